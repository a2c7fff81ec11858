//! `load`, `store` and `atomic_add` against global views.
//!
//! Element `c` of the box at `origin` lives at `base + Σ (origin[d] + c[d]) ·
//! stride[d]` and exists when `origin[d] + c[d] < extent[d]` for every dim.
//! A masked-out element is never accessed (the interpreter traps any
//! out-of-bounds access, and so may the GPU): each access sits in an `if` on
//! its mask, and a masked load yields `other`. Stores and atomics also
//! require the thread to own the element, so each element is written once.
//!
//! **Vector accesses.** When the view promises a unit-stride dim and a base
//! alignment (`view_param_aligned`) and the layout gives a thread runs of
//! consecutive elements along that dim, each run of `width` registers is one
//! `vec<elem, width>` load or store, under a run-time test that the whole
//! vector is in bounds and its element offset a multiple of `width` (with
//! the promised base alignment, the address is then aligned). A run that
//! fails the test (a tail, an odd row stride, an odd origin) takes the scalar
//! path, element by element with its own mask. Atomics stay scalar.
//!
//! **Lower-rank tiles.** A tile of rank `r` below the view's rank `R` is the
//! box of extent 1 along the view's first `R - r` dims: its coordinates are
//! padded with zeros in front ([`Lowerer::padded`]), so the address and mask
//! see the leading origin coordinates like any other.

use super::{Coord, Lowerer};
use crate::error::{TileError, TileResult};
use crate::infer::Layouts;
use crate::ir::{Const, Op, ScalarId, TileId, TileProgram, ViewId};
use crate::layout::Layout;
use zyntax_hir::{AddrSpace, AtomicOp, Scope, Type, ValueId};

/// Runs of `width` registers along `dim` accessed as one vector (`dim` of
/// the tile; `view_dim` the same dim of the view, which may have more).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct VectorPlan {
    pub dim: usize,
    pub view_dim: usize,
    pub width: u32,
}

/// How a tile of `shape` in `layout` accesses `view`: `Some` when vector
/// accesses apply (see the module docs), `None` for scalar ones.
pub(super) fn vector_plan(
    program: &TileProgram,
    layout: &Layout,
    view: ViewId,
    shape: &[u32],
) -> Option<VectorPlan> {
    let v = program.view(view);
    let (view_dim, align) = (v.unit_stride_dim?, v.align_bytes?);
    let dim = view_dim.checked_sub(v.rank - shape.len())?;
    let bytes = v.elem.size_bytes()? as u32;
    let map = layout.dim_map(dim);
    if map.run_step != 1 {
        return None;
    }
    // Runs and sizes are powers of two, so `width` divides the run.
    // At most 8 lanes: a HIR vector in memory has no more (16 u8 lanes
    // would be one 16-byte access; fp8 tiles load 8 at a time).
    let width = map
        .run
        .min(shape[dim])
        .min(16 / bytes)
        .min(align / bytes)
        .min(8);
    (width >= 2).then_some(VectorPlan {
        dim,
        view_dim,
        width,
    })
}

/// The vector types the vectorised loads and stores of `ops` (and of loops
/// inside them) build values from; see [`Lowerer::vector_zeros`].
pub(super) fn vector_types(
    program: &TileProgram,
    layouts: &Layouts,
    ops: &[Op],
    out: &mut Vec<Type>,
) {
    for op in ops {
        match op {
            Op::Store { view, tile, .. }
            | Op::Load {
                view, out: tile, ..
            } => {
                let shape = &program.tile(*tile).shape;
                let plan = layouts
                    .get(*tile)
                    .and_then(|l| vector_plan(program, l, *view, shape));
                let elem = program.view(*view).elem.as_scalar();
                if let (Some(p), Some(e)) = (plan, elem) {
                    let ty = Type::Vector(e, p.width);
                    if !out.contains(&ty) {
                        out.push(ty);
                    }
                }
            }
            Op::For { body, .. } => vector_types(program, layouts, body, out),
            _ => {}
        }
    }
}

/// The registers accessed together with register `reg`: with a plan, the run
/// of `width` along its dim starting at `reg` (`None` if `reg` does not start
/// one); without, `reg` alone.
fn group(layout: &Layout, shape: &[u32], reg: u32, plan: Option<VectorPlan>) -> Option<Vec<u32>> {
    let Some(p) = plan else {
        return Some(vec![reg]);
    };
    let dims = layout.reg_dims(shape, reg);
    if !dims[p.dim].is_multiple_of(p.width) {
        return None;
    }
    Some(
        (0..p.width)
            .map(|i| {
                let mut d = dims.clone();
                d[p.dim] += i;
                layout.reg_index(shape, &d)
            })
            .collect(),
    )
}

/// How [`Lowerer::store_groups`] writes each group.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Access {
    /// Masked by the view's extents (vectors where whole and aligned).
    Masked,
    /// The box is known inside the view and aligned: no test but ownership.
    Whole,
    /// Device-scope atomic adds, element by element, masked.
    Atomic,
    /// `Whole` where the value holds, else `Masked`, group by group.
    Either(ValueId),
}

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

    /// Whether the vector of `plan.width` elements starting at `first`
    /// (element offset `offset`, first element in bounds: `inside`) is wholly
    /// in bounds and aligned.
    fn vector_ok(
        &mut self,
        view: ViewId,
        origin: &[ValueId],
        first: &[Coord],
        (offset, inside): (ValueId, ValueId),
        plan: VectorPlan,
    ) -> TileResult<ValueId> {
        let extent = self.views[view.0 as usize].shape[plan.view_dim];
        let last = self
            .b
            .add(origin[plan.view_dim], first[plan.view_dim].value)?;
        let width_less_one = self.u32(plan.width - 1)?;
        let last = self.b.add(last, width_less_one)?;
        let last_inside = self.b.lt(last, extent)?;
        let width = self.u32(plan.width)?;
        let misalignment = self.b.rem(offset, width)?;
        let zero = self.u32(0)?;
        let aligned = self.b.eq(misalignment, zero)?;
        let ok = self.b.and(inside, last_inside)?;
        Ok(self.b.and(ok, aligned)?)
    }

    /// The view's base advanced by `offset`, as a pointer to `vec<elem, width>`.
    fn vector_ptr(&mut self, view: ViewId, offset: ValueId, width: u32) -> TileResult<ValueId> {
        let base = self.views[view.0 as usize].base;
        let elem = self.program.view(view).elem.as_scalar().ok_or_else(|| {
            TileError::Internal("a vector access to a view of non-scalars".into())
        })?;
        let p = self.b.ptr_add(base, offset)?;
        let ty = Type::ptr(AddrSpace::Global, Type::Vector(elem, width));
        Ok(self.b.ptr_cast(p, ty)?)
    }

    fn origin(&self, origin: &[ScalarId]) -> TileResult<Vec<ValueId>> {
        origin.iter().map(|s| self.scalar(*s)).collect()
    }

    /// A tile's coordinates as the view's: zeros in front for the leading
    /// dims a lower-rank tile does not have.
    fn padded(&mut self, view: ViewId, coords: Vec<Coord>) -> TileResult<Vec<Coord>> {
        let lead = self.program.view(view).rank - coords.len();
        if lead == 0 {
            return Ok(coords);
        }
        let zero = self.u32(0)?;
        let mut out: Vec<Coord> = (0..lead)
            .map(|_| Coord {
                value: zero,
                owned: None,
            })
            .collect();
        out.extend(coords);
        Ok(out)
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
        let plan = vector_plan(self.program, &layout, view, &ty.shape);
        let n = layout.num_regs(&ty.shape);
        let mut regs = vec![None; n as usize];
        for r in 0..n {
            if group(&layout, &ty.shape, r, plan).is_none() {
                continue;
            }
            for (g, v) in self.load_group(out, view, &origin, other, &table, r)? {
                regs[g as usize] = Some(v);
            }
        }
        let regs = regs
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| TileError::Internal("a load left a register unset".into()))?;
        self.set_tile(out, regs);
        Ok(())
    }

    /// The registers of the group (a vector's run, or one element) of the
    /// load of `out` that holds register `r`, with their values.
    pub(super) fn load_group(
        &mut self,
        out: TileId,
        view: ViewId,
        origin: &[ValueId],
        other: Const,
        table: &[Vec<Coord>],
        r: u32,
    ) -> TileResult<Vec<(u32, ValueId)>> {
        let layout = self.layout(out)?;
        let ty = self.program.tile(out).clone();
        let other = match other {
            Const::Int(i) => self.b.iconst(ty.elem.clone(), i)?,
            Const::Float(f) => self.b.fconst(ty.elem.clone(), f)?,
        };
        let plan = vector_plan(self.program, &layout, view, &ty.shape);
        let first = match plan {
            Some(p) => {
                let mut dims = layout.reg_dims(&ty.shape, r);
                dims[p.dim] -= dims[p.dim] % p.width;
                layout.reg_index(&ty.shape, &dims)
            }
            None => r,
        };
        let regs_of_group = group(&layout, &ty.shape, first, plan)
            .ok_or_else(|| TileError::Internal("a load group does not start a run".into()))?;
        let coords: Vec<Vec<Coord>> = regs_of_group
            .iter()
            .map(|&g| Self::reg_coords(&layout, &ty.shape, table, g))
            .map(|c| self.padded(view, c))
            .collect::<TileResult<_>>()?;
        let values = match plan {
            Some(p) => self.load_vector(view, origin, &coords, &ty.elem, other, p)?,
            None => vec![self.load_scalar(view, origin, &coords[0], &ty.elem, other)?],
        };
        Ok(regs_of_group.into_iter().zip(values).collect())
    }

    /// One element, or `other` where it is outside the view.
    fn load_scalar(
        &mut self,
        view: ViewId,
        origin: &[ValueId],
        coords: &[Coord],
        elem: &Type,
        other: ValueId,
    ) -> TileResult<ValueId> {
        let base = self.views[view.0 as usize].base;
        let (offset, inside) = self.address(view, origin, coords)?;
        let mut frame = self.b.begin_if(inside, std::slice::from_ref(elem))?;
        let p = self.b.ptr_add(base, offset)?;
        let value = self.b.load(p)?;
        self.b.begin_else(&mut frame, &[value])?;
        Ok(self.b.end_if(frame, &[other])?[0])
    }

    /// A run of elements (`coords[i]` the i-th) as one vector load where
    /// [`Self::vector_ok`], else element by element.
    fn load_vector(
        &mut self,
        view: ViewId,
        origin: &[ValueId],
        coords: &[Vec<Coord>],
        elem: &Type,
        other: ValueId,
        plan: VectorPlan,
    ) -> TileResult<Vec<ValueId>> {
        let at = self.address(view, origin, &coords[0])?;
        let ok = self.vector_ok(view, origin, &coords[0], at, plan)?;
        // Both paths yield the vector, split after the join: were each path
        // to yield scalars, LLVM would scalarise the vector load and sink the
        // loads both paths share, and the vector would not survive.
        let p = self.vector_ptr(view, at.0, plan.width)?;
        let ty = self.b.value_type(p)?.clone();
        let Type::Ptr(_, vector_ty) = ty else {
            return Err(TileError::Internal("vector_ptr is not a pointer".into()));
        };
        let mut frame = self.b.begin_if(ok, std::slice::from_ref(&*vector_ty))?;
        let vector = self.b.load(p)?;
        self.b.begin_else(&mut frame, &[vector])?;
        let mut vector = self.vector_zeros(p)?;
        for (i, c) in coords.iter().enumerate() {
            let part = self.load_scalar(view, origin, c, elem, other)?;
            vector = self.b.insert(vector, part, i as u32)?;
        }
        let vector = self.b.end_if(frame, &[vector])?[0];
        (0..plan.width)
            .map(|i| Ok(self.b.extract(vector, i)?))
            .collect()
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
        let origin = self.origin(origin)?;
        let table = self.coords(&layout, &shape)?;
        if atomic {
            return self.store_groups(view, &origin, tile, &table, None, Access::Atomic);
        }
        let plan = vector_plan(self.program, &layout, view, &shape);
        // A box wholly inside the view (and, for vectors, aligned) is stored
        // with no per-element test: one uniform test instead of a mask and
        // an alignment branch per access (an epilogue's 128x256 tile is 64
        // stores a thread, each ~15 instructions with its tests).
        let whole = self.whole_store_box(view, &origin, &shape, plan)?;
        if self.tiles[tile.0 as usize].is_none() {
            // An epilogue computed where stored (`fuse.rs`): each group is
            // computed once, then stored on either path. Computed in both
            // paths, LLVM hoists what they share above the branch, the whole
            // epilogue live at once.
            return self.store_groups(view, &origin, tile, &table, plan, Access::Either(whole));
        }
        let mut f = self.b.begin_if(whole, &[])?;
        self.store_groups(view, &origin, tile, &table, plan, Access::Whole)?;
        self.b.begin_else(&mut f, &[])?;
        self.store_groups(view, &origin, tile, &table, plan, Access::Masked)?;
        self.b.end_if(f, &[])?;
        Ok(())
    }

    /// Whether the box of `shape` at `origin` lies wholly inside `view` and,
    /// with a vector `plan`, every vector of it is aligned (the origin along
    /// the unit-stride dim and the other dims' strides multiples of the width).
    fn whole_store_box(
        &mut self,
        view: ViewId,
        origin: &[ValueId],
        shape: &[u32],
        plan: Option<VectorPlan>,
    ) -> TileResult<ValueId> {
        let v = self.views[view.0 as usize].clone();
        let lead = v.shape.len() - shape.len();
        let mut ok = self.b.bconst(true)?;
        for d in 0..v.shape.len() {
            let ext = self.u32(if d < lead { 1 } else { shape[d - lead] })?;
            let end = self.b.add(origin[d], ext)?;
            let inside = self.b.le(end, v.shape[d])?;
            // an origin near 2^32 wraps `end` around: it must pass it too
            let no_wrap = self.b.ge(end, origin[d])?;
            let inside = self.b.and(inside, no_wrap)?;
            ok = self.b.and(ok, inside)?;
        }
        if let Some(p) = plan {
            let (width, zero) = (self.u32(p.width)?, self.u32(0)?);
            for (d, (&o, &stride)) in origin.iter().zip(&v.strides).enumerate() {
                let x = if d == p.view_dim { o } else { stride };
                let r = self.b.rem(x, width)?;
                let aligned = self.b.eq(r, zero)?;
                ok = self.b.and(ok, aligned)?;
            }
        }
        Ok(ok)
    }

    /// The stores (or atomics) of every register group of `tile`.
    fn store_groups(
        &mut self,
        view: ViewId,
        origin: &[ValueId],
        tile: TileId,
        table: &[Vec<Coord>],
        plan: Option<VectorPlan>,
        access: Access,
    ) -> TileResult<()> {
        let layout = self.layout(tile)?;
        let shape = self.program.tile(tile).shape.clone();
        for r in 0..layout.num_regs(&shape) {
            let Some(regs_of_group) = group(&layout, &shape, r, plan) else {
                continue;
            };
            let coords: Vec<Vec<Coord>> = regs_of_group
                .iter()
                .map(|&g| Self::reg_coords(&layout, &shape, table, g))
                .map(|c| self.padded(view, c))
                .collect::<TileResult<_>>()?;
            // Computed here when the tile's ops were recorded (`fuse.rs`).
            let parts = self.tile_regs(tile, &regs_of_group)?;
            match (access, plan) {
                (Access::Either(whole), _) => {
                    let mut f = self.b.begin_if(whole, &[])?;
                    self.store_whole(view, origin, &coords[0], &parts, plan)?;
                    self.b.begin_else(&mut f, &[])?;
                    match plan {
                        Some(p) => self.store_vector(view, origin, &coords, &parts, p)?,
                        None => self.store_scalar(view, origin, &coords[0], parts[0], false)?,
                    }
                    self.b.end_if(f, &[])?;
                }
                (Access::Whole, _) => self.store_whole(view, origin, &coords[0], &parts, plan)?,
                (Access::Masked, Some(p)) => self.store_vector(view, origin, &coords, &parts, p)?,
                (_, _) => {
                    self.store_scalar(view, origin, &coords[0], parts[0], access == Access::Atomic)?
                }
            }
        }
        Ok(())
    }

    /// A group (a vector's run, or one element) of a box known inside the
    /// view and aligned: stored if this thread owns it, with no other test.
    fn store_whole(
        &mut self,
        view: ViewId,
        origin: &[ValueId],
        first: &[Coord],
        parts: &[ValueId],
        plan: Option<VectorPlan>,
    ) -> TileResult<()> {
        let (offset, _) = self.address(view, origin, first)?;
        let owned = self.owned(first)?;
        let frame = owned.map(|o| self.b.begin_if(o, &[])).transpose()?;
        match plan {
            Some(p) => {
                let ptr = self.vector_ptr(view, offset, p.width)?;
                let mut vector = self.vector_zeros(ptr)?;
                for (i, &part) in parts.iter().enumerate() {
                    vector = self.b.insert(vector, part, i as u32)?;
                }
                self.b.store(ptr, vector)?;
            }
            None => {
                let base = self.views[view.0 as usize].base;
                let ptr = self.b.ptr_add(base, offset)?;
                self.b.store(ptr, parts[0])?;
            }
        }
        if let Some(f) = frame {
            self.b.end_if(f, &[])?;
        }
        Ok(())
    }

    /// One element, if this thread owns it and it is inside the view.
    fn store_scalar(
        &mut self,
        view: ViewId,
        origin: &[ValueId],
        coords: &[Coord],
        value: ValueId,
        atomic: bool,
    ) -> TileResult<()> {
        let base = self.views[view.0 as usize].base;
        let (offset, inside) = self.address(view, origin, coords)?;
        let owned = self.owned(coords)?;
        let mask = self.and(Some(inside), owned)?.unwrap_or(inside);
        let frame = self.b.begin_if(mask, &[])?;
        let p = self.b.ptr_add(base, offset)?;
        if atomic {
            self.b.atomic(AtomicOp::Add, Scope::Device, p, value)?;
        } else {
            self.b.store(p, value)?;
        }
        self.b.end_if(frame, &[])?;
        Ok(())
    }

    /// A run of elements as one vector store where this thread owns the run
    /// (ownership is the same for all of it: a run never straddles the
    /// wrap-around) and [`Self::vector_ok`], else element by element.
    fn store_vector(
        &mut self,
        view: ViewId,
        origin: &[ValueId],
        coords: &[Vec<Coord>],
        parts: &[ValueId],
        plan: VectorPlan,
    ) -> TileResult<()> {
        let at = self.address(view, origin, &coords[0])?;
        let ok = self.vector_ok(view, origin, &coords[0], at, plan)?;
        let owned = self.owned(&coords[0])?;
        let ok = self.and(Some(ok), owned)?.unwrap_or(ok);
        let mut frame = self.b.begin_if(ok, &[])?;
        let p = self.vector_ptr(view, at.0, plan.width)?;
        let mut vector = self.vector_zeros(p)?;
        for (i, &part) in parts.iter().enumerate() {
            vector = self.b.insert(vector, part, i as u32)?;
        }
        self.b.store(p, vector)?;
        self.b.begin_else(&mut frame, &[])?;
        for (c, &part) in coords.iter().zip(parts) {
            self.store_scalar(view, origin, c, part, false)?;
        }
        self.b.end_if(frame, &[])?;
        Ok(())
    }

    /// The zero vector of `ptr`'s pointee type, made in the entry block.
    fn vector_zeros(&mut self, ptr: ValueId) -> TileResult<ValueId> {
        let ty = match self.b.value_type(ptr)? {
            Type::Ptr(_, t) => (**t).clone(),
            other => return Err(TileError::Internal(format!("{other} is not a pointer"))),
        };
        self.vector_zeros
            .get(&ty)
            .copied()
            .ok_or_else(|| TileError::Internal(format!("no {ty} made in the entry block")))
    }
}
