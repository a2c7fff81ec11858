//! `load`, `store` and `atomic_add` against global views.
//!
//! Element `c` of the box at `origin` lives at `base + Σ (origin[d] + c[d]) ·
//! stride[d]` and exists when `origin[d] + c[d] < extent[d]` for every dim.
//! A masked-out element is never accessed (the interpreter traps any
//! out-of-bounds access, and so may the GPU): each access sits in an `if` on
//! its mask, and a masked load yields `other`. Stores and atomics also
//! require the thread to own the element, so each element is written once.
//! This session's lowering is scalar; vectorised, `cp.async` and TMA
//! accesses are future work (docs/tile.md).

use super::{Coord, Lowerer};
use crate::error::TileResult;
use crate::ir::{Const, ScalarId, TileId, ViewId};
use zyntax_hir::{AtomicOp, Scope, ValueId};

impl Lowerer<'_> {
    /// The element offset and in-bounds mask of `coords` in the box at `origin`.
    fn address(
        &mut self,
        view: ViewId,
        origin: &[ValueId],
        coords: &[Coord],
    ) -> TileResult<(ValueId, ValueId)> {
        let v = self.views[view.0 as usize].clone();
        let mut offset = self.u32(0)?;
        let mut inside = None;
        for (d, c) in coords.iter().enumerate() {
            let g = self.b.add(origin[d], c.value)?;
            let ok = self.b.lt(g, v.shape[d])?;
            inside = self.and(inside, Some(ok))?;
            let term = self.b.mul(g, v.strides[d])?;
            offset = self.b.add(offset, term)?;
        }
        let inside = match inside {
            Some(m) => m,
            None => self.b.bconst(true)?,
        };
        Ok((offset, inside))
    }

    fn origin(&self, origin: &[ScalarId]) -> TileResult<Vec<ValueId>> {
        origin.iter().map(|s| self.scalar(*s)).collect()
    }

    pub(super) fn load(
        &mut self,
        out: TileId,
        view: ViewId,
        origin: &[ScalarId],
        other: Const,
    ) -> TileResult<()> {
        let layout = self.layout(out)?;
        let ty = self.program.tile(out).clone();
        let origin = self.origin(origin)?;
        let table = self.coords(&layout, &ty.shape)?;
        let other = match other {
            Const::Int(i) => self.b.iconst(ty.elem.clone(), i)?,
            Const::Float(f) => self.b.fconst(ty.elem.clone(), f)?,
        };
        let base = self.views[view.0 as usize].base;
        let mut regs = Vec::new();
        for r in 0..layout.num_regs(&ty.shape) {
            let coords = Self::reg_coords(&layout, &ty.shape, &table, r);
            let (offset, inside) = self.address(view, &origin, &coords)?;
            let mut frame = self.b.begin_if(inside, std::slice::from_ref(&ty.elem))?;
            let p = self.b.ptr_add(base, offset)?;
            let value = self.b.load(p)?;
            self.b.begin_else(&mut frame, &[value])?;
            let merged = self.b.end_if(frame, &[other])?;
            regs.push(merged[0]);
        }
        self.set_tile(out, regs);
        Ok(())
    }

    /// A store, or with `atomic` a device-scope atomic add, of every owned
    /// in-bounds element.
    pub(super) fn store(
        &mut self,
        view: ViewId,
        origin: &[ScalarId],
        tile: TileId,
        atomic: bool,
    ) -> TileResult<()> {
        let layout = self.layout(tile)?;
        let shape = self.program.tile(tile).shape.clone();
        let values = self.regs(tile)?;
        let origin = self.origin(origin)?;
        let table = self.coords(&layout, &shape)?;
        let base = self.views[view.0 as usize].base;
        for (r, &value) in values.iter().enumerate() {
            let coords = Self::reg_coords(&layout, &shape, &table, r as u32);
            let (offset, inside) = self.address(view, &origin, &coords)?;
            let owned = self.owned(&coords)?;
            let mask = self.and(Some(inside), owned)?.unwrap_or(inside);
            let frame = self.b.begin_if(mask, &[])?;
            let p = self.b.ptr_add(base, offset)?;
            if atomic {
                self.b.atomic(AtomicOp::Add, Scope::Device, p, value)?;
            } else {
                self.b.store(p, value)?;
            }
            self.b.end_if(frame, &[])?;
        }
        Ok(())
    }
}
