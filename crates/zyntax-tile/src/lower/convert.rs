//! Layout conversion and shared-memory staging.
//!
//! A conversion writes the tile to shared memory (row-major, owners only),
//! waits at a barrier, reads it back in the new layout, and waits again so
//! that the next use of the scratch buffer cannot overwrite what a slower
//! warp still reads. `dot` stages its operands and `reduce` combines warps
//! the same way. Because every use is bracketed by barriers, all of them
//! share one scratch buffer, sized for the largest ([`scratch_bytes`]).

use super::{Coord, Lowerer};
use crate::error::{TileError, TileResult};
use crate::infer::Layouts;
use crate::ir::{Op, TileId, TileProgram};
use crate::layout::{Layout, SharedLayout};
use zyntax_hir::{AddrSpace, ScalarType, Type, ValueId};

/// Bytes one element takes in shared memory (`bool` is staged as `u32`).
pub(super) fn staged_bytes(elem: &Type) -> u64 {
    if *elem == Type::BOOL {
        4
    } else {
        elem.size_bytes().unwrap_or(4)
    }
}

/// How many registers of `tile` (in `layout`) one shared-memory store
/// stages: a run of elements consecutive along the last dim (contiguous in
/// the row-major staging, and starting at a multiple of the run: offsets
/// are then aligned, each staged region starting 16-byte aligned), at most
/// 16 bytes; 1 when there is none.
pub(super) fn stage_width(layout: &Layout, shape: &[u32], elem: &Type, last: usize) -> u32 {
    let map = layout.dim_map(last);
    match elem.size_bytes() {
        Some(bytes) if *elem != Type::BOOL && map.run_step == 1 => {
            // At most 8 lanes (HIR vectors in memory): a u8 run of 16 too.
            map.run.min(shape[last]).min(16 / bytes as u32).clamp(1, 8)
        }
        _ => 1,
    }
}

/// The vector types the staging of `ops` (dot operands, conversions; in
/// loops too) stores; see [`Lowerer::stage`].
pub(super) fn stage_vector_types(
    program: &TileProgram,
    layouts: &Layouts,
    ops: &[Op],
    out: &mut Vec<Type>,
) {
    for op in ops {
        let staged: &[TileId] = match op {
            Op::Dot { a, b, .. } => {
                // a K-major `b` is staged transposed (`dot_mma.rs`)
                if let (Some(l), Some(e)) = (layouts.get(*b), program.tile(*b).elem.as_scalar()) {
                    let ty = program.tile(*b);
                    // (the FFMA path stages it untransposed: both widths)
                    for dim in [0, 1] {
                        let w = stage_width(l, &ty.shape, &ty.elem, dim);
                        if w >= 2 && !out.contains(&Type::Vector(e, w)) {
                            out.push(Type::Vector(e, w));
                        }
                    }
                }
                std::slice::from_ref(a)
            }
            Op::ConvertLayout { tile, .. } => std::slice::from_ref(tile),
            Op::For { body, .. } => {
                stage_vector_types(program, layouts, body, out);
                &[]
            }
            _ => &[],
        };
        for &t in staged {
            let ty = program.tile(t);
            let (Some(layout), Some(e)) = (layouts.get(t), ty.elem.as_scalar()) else {
                continue;
            };
            let w = stage_width(layout, &ty.shape, &ty.elem, ty.shape.len() - 1);
            let v = Type::Vector(e, w);
            if w >= 2 && !out.contains(&v) {
                out.push(v);
            }
        }
    }
}

/// Whether a 2-D tile in `layout` runs along dim 0 (a `[K, N]` operand
/// loaded K-contiguous, such as attention's `k^T`): it is then staged
/// transposed, `[N, K]` row-major, so its runs stay vector stores.
pub(super) fn k_major(layout: &Layout, shape: &[u32]) -> bool {
    shape.len() == 2 && shape[0] > 1 && matches!(layout, Layout::Blocked(b) if b.order[0] == 0)
}

/// Elements of padding after each staged row of a `mma.sync` operand (16
/// bytes of f16/bf16): rows then start 16 bytes apart modulo 128, so the
/// eight rows one `ldmatrix` phase reads fall in eight different bank groups
/// (unpadded rows of 64 or 128 elements all hit the same banks).
pub(super) const MMA_PAD: u32 = 8;

/// Rounds up to 16 bytes (the alignment of each staged region).
pub(super) fn align16(bytes: u64) -> u64 {
    bytes.div_ceil(16) * 16
}

/// The largest scratch any op of `ops` (or of loops inside them) needs.
pub(super) fn scratch_bytes(program: &TileProgram, layouts: &Layouts, ops: &[Op]) -> u64 {
    scratch_in(program, layouts, ops, &[])
}

/// [`scratch_bytes`] of `ops`, the body of a loop whose `hoisted` dots
/// (`(result, a)`, `dot_mma::hoisted`) stage `a` before it, not in it.
fn scratch_in(
    program: &TileProgram,
    layouts: &Layouts,
    ops: &[Op],
    hoisted: &[(TileId, TileId)],
) -> u64 {
    let mut most = 0;
    for op in ops {
        let bytes = match op {
            Op::ConvertLayout { tile, .. } => {
                let t = program.tile(*tile);
                t.numel() * staged_bytes(&t.elem)
            }
            Op::Reduce {
                out, tile, axis, ..
            } => {
                // Warps tiling the axis, in any layout (an Mma accumulator's
                // columns are split by its warps along N).
                let warps = layouts.get(*tile).map_or(1, |l| l.dim_map(*axis).warps);
                let t = program.tile(*out);
                if warps > 1 {
                    u64::from(warps) * t.numel() * staged_bytes(&t.elem)
                } else {
                    0
                }
            }
            // The wgmma pipeline stages in its own dynamic shared memory.
            Op::Dot { out, .. } if super::pipeline::is_wgmma(layouts.get(*out)) => 0,
            Op::Dot { out, a, b, .. } => {
                let (ta, tb) = (program.tile(*a), program.tile(*b));
                match layouts.get(*out) {
                    // mma.sync stages with padded rows (dot_mma.rs)
                    Some(Layout::Mma(_)) => {
                        let kmajor = layouts.get(*b).is_some_and(|l| k_major(l, &tb.shape));
                        let ([m, k], [kb, n]) =
                            ([ta.shape[0], ta.shape[1]], [tb.shape[0], tb.shape[1]]);
                        let (rows_b, cols_b) = if kmajor { (n, kb) } else { (kb, n) };
                        let in_regs = super::dot_mma::a_in_registers(layouts, *a, *out)
                            || hoisted.iter().any(|(d, _)| d == out);
                        let a_bytes = if in_regs {
                            0
                        } else {
                            u64::from(m * (k + MMA_PAD)) * staged_bytes(&ta.elem)
                        };
                        align16(a_bytes)
                            + u64::from(rows_b * (cols_b + MMA_PAD)) * staged_bytes(&tb.elem)
                    }
                    _ => {
                        align16(ta.numel() * staged_bytes(&ta.elem))
                            + tb.numel() * staged_bytes(&tb.elem)
                    }
                }
            }
            Op::For { body, .. } => {
                let hoisted = super::dot_mma::hoisted(program, layouts, body);
                // (a wgmma `dot` stages its `a` in dynamic shared memory)
                let on_mma =
                    |&&(d, _): &&(TileId, TileId)| !super::pipeline::is_wgmma(layouts.get(d));
                let staged_a = hoisted.iter().filter(on_mma).map(|&(_, a)| {
                    let t = program.tile(a);
                    u64::from(t.shape[0] * (t.shape[1] + MMA_PAD)) * staged_bytes(&t.elem)
                });
                let before = staged_a.max().unwrap_or(0);
                scratch_in(program, layouts, body, &hoisted).max(before)
            }
            _ => 0,
        };
        most = most.max(bytes);
    }
    align16(most)
}

impl Lowerer<'_> {
    /// The scratch buffer as `ptr<shared, elem>`, advanced by `byte_offset`.
    pub(super) fn scratch_ptr(&mut self, elem: &Type, byte_offset: u64) -> TileResult<ValueId> {
        let scratch = self
            .scratch
            .ok_or_else(|| TileError::Internal("no shared scratch allocated".into()))?;
        let ty = if *elem == Type::BOOL {
            Type::U32
        } else {
            elem.clone()
        };
        let p = self.b.ptr_cast(scratch, Type::ptr(AddrSpace::Shared, ty))?;
        if byte_offset == 0 {
            return Ok(p);
        }
        let index = self.u32((byte_offset / staged_bytes(elem)) as u32)?;
        Ok(self.b.ptr_add(p, index)?)
    }

    /// Row-major offset of `coords` in a staged tile of `shape`.
    pub(super) fn staged_offset(
        &mut self,
        shape: &[u32],
        coords: &[ValueId],
    ) -> TileResult<ValueId> {
        let strides = SharedLayout::row_major(shape.len()).strides(shape);
        let mut offset = self.u32(0)?;
        for (c, s) in coords.iter().zip(strides) {
            let s = self.u32(s)?;
            let term = self.b.mul(*c, s)?;
            offset = self.b.add(offset, term)?;
        }
        Ok(offset)
    }

    /// Writes the owned elements of `tile` row-major at `ptr` (no barrier),
    /// each run of [`stage_width`] registers as one vector store (ownership
    /// is the same along a run: a run never straddles the wrap-around).
    pub(super) fn stage(&mut self, tile: TileId, ptr: ValueId) -> TileResult<()> {
        self.stage_as(tile, ptr, false, 0)
    }

    /// [`Self::stage`], or with `transposed` (2-D tiles) the transpose
    /// row-major (element `[i, j]` at row `j`, column `i`), with `pad`
    /// elements after each staged row.
    pub(super) fn stage_as(
        &mut self,
        tile: TileId,
        ptr: ValueId,
        transposed: bool,
        pad: u32,
    ) -> TileResult<()> {
        let layout = self.layout(tile)?;
        let ty = self.program.tile(tile).clone();
        let regs = self.regs(tile)?;
        let table = self.coords(&layout, &ty.shape)?;
        let last = if transposed { 0 } else { ty.shape.len() - 1 };
        let width = stage_width(&layout, &ty.shape, &ty.elem, last);
        for (r, &value) in regs.iter().enumerate() {
            let mut dims = layout.reg_dims(&ty.shape, r as u32);
            if dims[last] % width != 0 {
                continue; // stored with the run it belongs to
            }
            let coords: Vec<Coord> = Self::reg_coords(&layout, &ty.shape, &table, r as u32);
            let mut values: Vec<ValueId> = coords.iter().map(|c| c.value).collect();
            let mut staged_shape = ty.shape.clone();
            if transposed {
                values.reverse();
                staged_shape.reverse();
            }
            if let Some(row) = staged_shape.last_mut() {
                *row += pad;
            }
            let offset = self.staged_offset(&staged_shape, &values)?;
            let value = if ty.elem == Type::BOOL {
                let (one, zero) = (self.u32(1)?, self.u32(0)?);
                self.b.select(value, one, zero)?
            } else {
                value
            };
            let owned = self.owned(&coords)?;
            let frame = match owned {
                Some(o) => Some(self.b.begin_if(o, &[])?),
                None => None,
            };
            let p = self.b.ptr_add(ptr, offset)?;
            if width == 1 {
                self.b.store(p, value)?;
            } else {
                let e = ty
                    .elem
                    .as_scalar()
                    .ok_or_else(|| TileError::Internal("a vector staging of non-scalars".into()))?;
                self.store_run(p, e, width, &regs, &layout, &ty.shape, &mut dims, last)?;
            }
            if let Some(f) = frame {
                self.b.end_if(f, &[])?;
            }
        }
        Ok(())
    }

    /// One vector store at shared `p` of the `width` registers along `dim` of
    /// the run that holds `dims` (a staging's 16-byte chunk).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn store_run(
        &mut self,
        p: ValueId,
        e: ScalarType,
        width: u32,
        regs: &[ValueId],
        layout: &Layout,
        shape: &[u32],
        dims: &mut [u32],
        dim: usize,
    ) -> TileResult<()> {
        let vty = Type::Vector(e, width);
        let mut v = *self
            .vector_zeros
            .get(&vty)
            .ok_or_else(|| TileError::Internal(format!("no {vty} made in the entry block")))?;
        for i in 0..width {
            dims[dim] = dims[dim] - dims[dim] % width + i;
            let part = regs[layout.reg_index(shape, dims) as usize];
            v = self.b.insert(v, part, i)?;
        }
        let q = self.b.ptr_cast(p, Type::ptr(AddrSpace::Shared, vty))?;
        self.b.store(q, v)?;
        Ok(())
    }

    /// Reads element `offset` of a staged tile of `elem` at `ptr`.
    pub(super) fn read_staged(
        &mut self,
        ptr: ValueId,
        elem: &Type,
        offset: ValueId,
    ) -> TileResult<ValueId> {
        let p = self.b.ptr_add(ptr, offset)?;
        let v = self.b.load(p)?;
        if *elem == Type::BOOL {
            let zero = self.u32(0)?;
            return Ok(self.b.ne(v, zero)?);
        }
        Ok(v)
    }

    pub(super) fn convert_layout(&mut self, out: TileId, tile: TileId) -> TileResult<()> {
        let ty = self.program.tile(out).clone();
        let layout = self.layout(out)?;
        if ty.shape.iter().product::<u32>() == 1 {
            // One element (a row statistic, a target of a one-row program):
            // coordinates wrap, so every register of every thread holds it
            // in any layout, and no trip through shared memory is needed.
            let first = *self.regs(tile)?.first().ok_or_else(|| {
                TileError::Internal("a one-element tile without registers".into())
            })?;
            self.set_tile(out, vec![first; layout.num_regs(&ty.shape) as usize]);
            return Ok(());
        }
        let ptr = self.scratch_ptr(&ty.elem, 0)?;
        self.stage(tile, ptr)?;
        self.b.barrier()?;
        let table = self.coords(&layout, &ty.shape)?;
        let mut regs = Vec::new();
        for r in 0..layout.num_regs(&ty.shape) {
            let coords: Vec<ValueId> = Self::reg_coords(&layout, &ty.shape, &table, r)
                .iter()
                .map(|c| c.value)
                .collect();
            let offset = self.staged_offset(&ty.shape, &coords)?;
            regs.push(self.read_staged(ptr, &ty.elem, offset)?);
        }
        self.b.barrier()?;
        self.set_tile(out, regs);
        Ok(())
    }
}
