//! Lowering a tile program to one HIR kernel.
//!
//! Each thread's registers of a tile are separate HIR SSA values (the tile is
//! fully unrolled per thread, as Triton's LLVM lowering does); which element
//! a register holds is the tile's [`Layout`] evaluated on the runtime
//! thread index. Scalars are single uniform HIR values. One file per op
//! family: `memory` (load, store, atomic add), `elementwise` (full, iota,
//! map, broadcast, cast), `reduce`, `dot`, `convert` (layout conversion and
//! the shared-memory scratch they all use).
//!
//! Kernel parameters, in program order: a view is a `ptr<global, elem>`, its
//! `rank` extents and its `rank` strides (in elements, all `u32`); a scalar
//! parameter is itself.

mod convert;
mod dot;
mod dot_mma;
mod dot_wgmma;
mod elementwise;
mod fuse;
mod memory;
pub(crate) mod pipeline;
pub(crate) mod pipeline_ring;
pub(crate) mod pipeline_ws;
mod reduce;
mod store_tma;

pub use pipeline_ws::TensorMapParam;

use crate::error::{TileError, TileResult};
use crate::infer::{infer_for, Layouts};
use crate::ir::*;
use crate::layout::{Layout, WARP};
use crate::schedule::Schedule;
use std::collections::HashMap;
use zyntax_hir::{AddrSpace, Dim, FunctionBuilder, Module, ScalarType, Type, ValueId};

/// Largest static shared memory of one kernel (the HIR verifier's limit).
pub const MAX_SCRATCH_BYTES: u64 = 48 * 1024;

/// A kernel parameter as the lowered HIR signature spells it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelParam {
    /// A pointer, `rank` extents, `rank` strides.
    View {
        name: String,
        elem: Type,
        rank: usize,
    },
    Scalar {
        name: String,
        ty: Type,
    },
}

/// How to launch the kernel: block shape, shared memory, parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchInfo {
    /// Threads per block (`warps * 32` in x).
    pub block: [u32; 3],
    /// Static shared memory the kernel declares (nothing to pass at launch).
    pub shared_bytes: u64,
    /// Dynamic shared memory of the wgmma pipeline (`pipeline.rs`), 0 if
    /// none; it is also the kernel's declared default (`KernelInfo`), so
    /// launches that pass 0 get it.
    pub dynamic_shared_bytes: u64,
    pub params: Vec<KernelParam>,
    /// Tensor-map parameters after `params` (the warp-specialised pipeline,
    /// `pipeline_ws.rs`), in order; the launch builds each from its view.
    pub tensor_maps: Vec<TensorMapParam>,
    /// A persistent kernel: the launch passes the program's grid (x, y) as
    /// two `u32` parameters after the tensor maps and launches about one
    /// CTA per SM along x.
    pub persistent: bool,
    /// CTAs per cluster (1: none), along x: the kernel declares the cluster
    /// shape, so a persistent launch runs whole clusters (a multiple of
    /// this many CTAs, at most as many clusters as can be resident).
    pub cluster: u32,
}

/// A lowered tile program: the verified HIR module (one kernel of the
/// program's name), its launch facts, and the program after layout
/// inference with every tile's layout.
#[derive(Clone, Debug)]
pub struct TileKernel {
    pub module: Module,
    pub name: String,
    pub launch: LaunchInfo,
    pub program: TileProgram,
    pub layouts: Layouts,
}

/// The HIR values of a view parameter.
#[derive(Clone, Debug)]
pub(crate) struct ViewValues {
    pub base: ValueId,
    pub shape: Vec<ValueId>,
    pub strides: Vec<ValueId>,
}

/// One coordinate of a register: its value and, where copies exist along
/// the dim, whether this thread owns it (`None`: always).
#[derive(Copy, Clone, Debug)]
pub(crate) struct Coord {
    pub value: ValueId,
    pub owned: Option<ValueId>,
}

pub(crate) struct Lowerer<'p> {
    pub b: FunctionBuilder,
    pub program: &'p TileProgram,
    pub layouts: &'p Layouts,
    pub tiles: Vec<Option<Vec<ValueId>>>,
    pub scalars: Vec<Option<ValueId>>,
    pub views: Vec<ViewValues>,
    pub lane: ValueId,
    pub warp: ValueId,
    /// The kernel's one shared-memory scratch buffer (`u8`), if any op needs
    /// one: every use is bracketed by barriers, so all uses share it.
    pub scratch: Option<ValueId>,
    /// Zero vectors defined in the entry block, which vector values are
    /// built from with `insert` (HIR has no vector constants): `vec<f32, 4>`
    /// for `mma.sync` accumulators, one per type of vectorised access.
    pub vector_zeros: HashMap<Type, ValueId>,
    pub schedule: &'p Schedule,
    /// `A` fragments of loop `dot`s loaded before their loop, by the `dot`'s
    /// result: `[piece along M][K step]` (`dot_mma::hoisted`).
    pub hoisted_a: HashMap<TileId, Vec<Vec<ValueId>>>,
    /// The parity of the iteration of the innermost loop whose body has
    /// wgmma `dot`s: which of their two staging buffers it uses
    /// (`dot_wgmma.rs`).
    pub wgmma_parity: Option<ValueId>,
    /// The program instance a persistent kernel is on (`ProgramId` 0 and
    /// 1); `None`: the block index.
    pub program_ids: Option<[ValueId; 2]>,
    /// With a cluster: whether the program instance this CTA is on lies in
    /// the grid (`pipeline_ws.rs`); `None`: it does.
    pub instance_valid: Option<ValueId>,
    /// Element-wise ops recorded to be computed register by register where
    /// stored (`fuse.rs`: the warp-specialised epilogue), while on.
    pub fused: Option<fuse::Fused>,
    /// The consumers' TMA ring while they lower a program on it
    /// (`pipeline_ring.rs`).
    pub ring: Option<pipeline_ring::RingState>,
}

/// Infers layouts and lowers `program` for `schedule`.
pub fn lower(mut program: TileProgram, schedule: &Schedule) -> TileResult<TileKernel> {
    let layouts = infer_for(&mut program, schedule)?;
    check_registers(&program, &layouts, schedule)?;
    let mut scratch_bytes = convert::scratch_bytes(&program, &layouts, &program.body);
    if schedule.cluster > 1 && !schedule.warp_specialize {
        // The slots of reductions over the cluster (reduce.rs, step 4).
        scratch_bytes = scratch_bytes.max(reduce::cluster_slot_bytes(&program, &program.body));
    }
    if scratch_bytes > MAX_SCRATCH_BYTES {
        return Err(TileError::DoesNotFit {
            field: "block",
            message: format!(
                "the program stages {scratch_bytes} bytes through shared memory at once; the static limit is {MAX_SCRATCH_BYTES}"
            ),
        });
    }
    let mut params = Vec::new();
    let mut types = Vec::new();
    for p in &program.params {
        match p {
            Param::View(v) => {
                let view = program.view(*v);
                types.push(Type::ptr(AddrSpace::Global, view.elem.clone()));
                types.extend(vec![Type::U32; 2 * view.rank]);
                params.push(KernelParam::View {
                    name: view.name.clone(),
                    elem: view.elem.clone(),
                    rank: view.rank,
                });
            }
            Param::Scalar { name, id } => {
                types.push(program.scalar_type(*id).clone());
                params.push(KernelParam::Scalar {
                    name: name.clone(),
                    ty: program.scalar_type(*id).clone(),
                });
            }
        }
    }
    let ws = pipeline_ws::ws_plan(&program, &layouts, schedule, scratch_bytes);
    if let Some(plan) = &ws {
        // The tensor maps of `a` and `b`, and of a TMA store's output
        // (pipeline_ws.rs).
        types.extend(vec![Type::TensorMap; plan.maps.len()]);
    }
    // Otherwise an online softmax's key loop may take a TMA ring
    // (pipeline_ring.rs), with its operands' tensor maps.
    let ring = match ws {
        Some(_) => None,
        None => pipeline_ring::ring_plan(&program, &layouts, schedule, scratch_bytes),
    };
    if let Some(plan) = &ring {
        types.extend(vec![Type::TensorMap; plan.maps.len()]);
    }
    let persistent = ws.is_some() && schedule.persistent;
    if schedule.cluster > 1 && schedule.warp_specialize && ws.is_none() {
        return Err(TileError::BadSchedule {
            field: "cluster",
            message: format!(
                "clusters of {} are lowered on the warp-specialised persistent GEMM pipeline only, with a shared operand tile of whole 64-element boxes or 8-row slices per CTA: set persistent, or cluster 1",
                schedule.cluster
            ),
        });
    }
    // Outside the WS pipeline a cluster > 1 is "cluster rows": the CTAs of
    // a cluster share every reduction (lower/reduce.rs, step 4).
    let cluster = match &ws {
        Some(p) => p.share.map_or(1, |s| s.ctas),
        None => schedule.cluster,
    };
    if persistent {
        types.extend([Type::U32, Type::U32]);
    }
    // The producer warpgroup beside the consumer set(s) (pipeline_ws.rs).
    // The ring's producer warp after the consumers.
    let threads = match (&ws, &ring) {
        (Some(_), _) => schedule.threads() * schedule.consumer_sets() + 128,
        (None, Some(_)) => schedule.threads() + pipeline_ring::producer_threads(schedule.warps),
        (None, None) => schedule.threads(),
    };
    let dynamic_bytes = match (&ws, &ring) {
        (Some(plan), _) => pipeline_ws::ws_bytes(&program, plan, schedule.stages),
        (None, Some(plan)) => plan.bytes(),
        (None, None) => dot_wgmma::dynamic_bytes(&program, &layouts, schedule.stages),
    };
    let shared_limit = zyntax_hir::arch::max_shared_bytes(schedule.arch);
    if dynamic_bytes > 0 && scratch_bytes + dynamic_bytes > shared_limit {
        return Err(TileError::DoesNotFit {
            field: "stages",
            message: format!(
                "the wgmma pipeline's {dynamic_bytes} bytes and {scratch_bytes} bytes of scratch exceed the {shared_limit} bytes of shared memory of {}",
                schedule.arch
            ),
        });
    }
    let mut b = FunctionBuilder::kernel(program.name.clone(), &types);
    if let Some(info) = b.kernel_info_mut() {
        info.max_threads = Some([threads, 1, 1]);
        info.shared_bytes = dynamic_bytes as u32;
        if ws.is_some() || ring.is_some() {
            // setmaxnreg moves registers between the roles of one CTA.
            info.min_blocks = Some(1);
        }
        if cluster > 1 {
            info.cluster = Some([cluster, 1, 1]);
        }
    }
    let tid = b.thread_idx(Dim::X)?;
    let warp_size = b.iconst(Type::U32, i64::from(WARP))?;
    let lane = b.rem(tid, warp_size)?;
    let warp = b.div(tid, warp_size)?;
    let scratch = if scratch_bytes > 0 {
        Some(b.shared_alloc_aligned(Type::U8, scratch_bytes, 16)?)
    } else {
        None
    };
    let mut vector_types = Vec::new();
    if dot_mma::uses_mma(&program.body, &layouts) {
        // Accumulators, A fragments built from registers, B fragments
        // split from an ldmatrix.x4.
        vector_types.push(Type::Vector(ScalarType::F32, 4));
        vector_types.push(Type::Vector(ScalarType::U32, 4));
        vector_types.push(Type::Vector(ScalarType::U32, 2));
        // A fragments packed from 16-bit registers (dot_mma::a_fragment_from_regs).
        vector_types.push(Type::Vector(ScalarType::BF16, 2));
        vector_types.push(Type::Vector(ScalarType::F16, 2));
    }
    memory::vector_types(&program, &layouts, &program.body, &mut vector_types);
    convert::stage_vector_types(&program, &layouts, &program.body, &mut vector_types);
    let mut vector_zeros = HashMap::new();
    for ty in vector_types {
        let zeros = zero_vector(&mut b, &ty)?;
        vector_zeros.insert(ty, zeros);
    }
    let mut lw = Lowerer {
        b,
        program: &program,
        layouts: &layouts,
        tiles: vec![None; program.tiles.len()],
        scalars: vec![None; program.scalars.len()],
        views: Vec::new(),
        lane,
        warp,
        scratch,
        vector_zeros,
        schedule,
        hoisted_a: HashMap::new(),
        wgmma_parity: None,
        program_ids: None,
        instance_valid: None,
        fused: None,
        ring: None,
    };
    let next = lw.bind_params()?;
    match &ws {
        Some(plan) => {
            let n = plan.maps.len();
            let tmaps = (next..next + n)
                .map(|i| lw.b.try_param(i))
                .collect::<Result<Vec<_>, _>>()?;
            let grid = if persistent {
                Some([lw.b.try_param(next + n)?, lw.b.try_param(next + n + 1)?])
            } else {
                None
            };
            lw.ws_kernel(plan, &tmaps, grid)?
        }
        None => match &ring {
            Some(plan) => {
                let tmaps = (next..next + plan.maps.len())
                    .map(|i| lw.b.try_param(i))
                    .collect::<Result<Vec<_>, _>>()?;
                lw.ring_kernel(plan, &tmaps)?
            }
            None => lw.region(&program.body)?,
        },
    }
    lw.b.ret(&[])?;
    let function = lw.b.finish()?;
    let mut module = Module::new(program.name.clone());
    if dynamic_bytes > 0 {
        // wgmma is an sm_90a instruction.
        module.targets = vec![zyntax_hir::Arch::Sm90a];
    }
    module.functions.push(function);
    zyntax_hir::verify_module(&module).map_err(|e| TileError::Internal(e.to_string()))?;
    Ok(TileKernel {
        name: program.name.clone(),
        launch: LaunchInfo {
            block: [threads, 1, 1],
            shared_bytes: scratch_bytes,
            dynamic_shared_bytes: dynamic_bytes,
            params,
            tensor_maps: match (ws, ring) {
                (Some(p), _) => p.maps,
                (None, Some(p)) => p.maps,
                (None, None) => Vec::new(),
            },
            persistent,
            cluster,
        },
        module,
        program: program.clone(),
        layouts,
    })
}

/// A zero vector of type `ty` (through a local slot that LLVM promotes to
/// registers), to be built in the entry block so that it dominates every use.
fn zero_vector(b: &mut FunctionBuilder, ty: &Type) -> TileResult<ValueId> {
    let Type::Vector(elem, lanes) = ty else {
        return Err(TileError::Internal(format!("{ty} is not a vector")));
    };
    let elem = Type::Scalar(*elem);
    let slot = b.alloca(ty.clone(), 1)?;
    let parts = b.ptr_cast(slot, Type::ptr(AddrSpace::Local, elem.clone()))?;
    let zero = if elem.is_float() {
        b.fconst(elem, 0.0)?
    } else {
        b.iconst(elem, 0)?
    };
    for i in 0..*lanes {
        let at = b.iconst(Type::U32, i64::from(i))?;
        let p = b.ptr_add(parts, at)?;
        b.store(p, zero)?;
    }
    Ok(b.load(slot)?)
}

/// Every tile is unrolled into registers: a tile with more than the register
/// file's share per thread cannot be lowered.
fn check_registers(
    program: &TileProgram,
    layouts: &Layouts,
    schedule: &Schedule,
) -> TileResult<()> {
    for (i, ty) in program.tiles.iter().enumerate() {
        if let Some(l) = layouts.get(TileId(i as u32)) {
            let regs = l.num_regs(&ty.shape);
            if regs > crate::schedule::MAX_REGISTERS {
                return Err(TileError::DoesNotFit {
                    field: "warps",
                    message: format!(
                        "a {:?} tile over {} warps needs {regs} registers per thread (limit {})",
                        ty.shape,
                        schedule.warps,
                        crate::schedule::MAX_REGISTERS
                    ),
                });
            }
        }
    }
    Ok(())
}

impl Lowerer<'_> {
    /// Binds the program's parameters; returns the index of the next one.
    fn bind_params(&mut self) -> TileResult<usize> {
        let mut next = 0;
        let program = self.program;
        self.views = Vec::with_capacity(program.views.len());
        for p in &program.params {
            match p {
                Param::View(v) => {
                    let rank = program.view(*v).rank;
                    let base = self.b.try_param(next)?;
                    let shape = (0..rank)
                        .map(|d| self.b.try_param(next + 1 + d))
                        .collect::<Result<_, _>>()?;
                    let strides = (0..rank)
                        .map(|d| self.b.try_param(next + 1 + rank + d))
                        .collect::<Result<_, _>>()?;
                    debug_assert_eq!(self.views.len(), v.0 as usize);
                    self.views.push(ViewValues {
                        base,
                        shape,
                        strides,
                    });
                    next += 1 + 2 * rank;
                }
                Param::Scalar { id, .. } => {
                    self.scalars[id.0 as usize] = Some(self.b.try_param(next)?);
                    next += 1;
                }
            }
        }
        Ok(next)
    }

    pub fn u32(&mut self, v: u32) -> TileResult<ValueId> {
        Ok(self.b.iconst(Type::U32, i64::from(v))?)
    }

    pub fn scalar(&self, s: ScalarId) -> TileResult<ValueId> {
        self.scalars
            .get(s.0 as usize)
            .copied()
            .flatten()
            .ok_or_else(|| TileError::Internal(format!("scalar {s:?} used before it is defined")))
    }

    pub fn regs(&self, t: TileId) -> TileResult<Vec<ValueId>> {
        self.tiles
            .get(t.0 as usize)
            .cloned()
            .flatten()
            .ok_or_else(|| TileError::Internal(format!("tile {t:?} used before it is defined")))
    }

    pub fn layout(&self, t: TileId) -> TileResult<Layout> {
        self.layouts
            .get(t)
            .cloned()
            .ok_or_else(|| TileError::Internal(format!("tile {t:?} has no layout")))
    }

    /// The layout of `t`, which inference made blocked (reduce, broadcast).
    pub fn set_tile(&mut self, t: TileId, regs: Vec<ValueId>) {
        self.tiles[t.0 as usize] = Some(regs);
    }

    pub fn set_scalar(&mut self, s: ScalarId, v: ValueId) {
        self.scalars[s.0 as usize] = Some(v);
    }

    /// `Some(a && b)`, treating `None` as true.
    pub fn and(&mut self, a: Option<ValueId>, b: Option<ValueId>) -> TileResult<Option<ValueId>> {
        Ok(match (a, b) {
            (Some(a), Some(b)) => Some(self.b.and(a, b)?),
            (x, None) | (None, x) => x,
        })
    }

    /// The coordinates of a tile of `shape` in `layout` held by this thread:
    /// `[dim][register index along dim]`, evaluating [`Layout::coords`] (each
    /// dim's [`DimMap`](crate::layout::DimMap)) on the runtime lane and warp.
    pub fn coords(&mut self, layout: &Layout, shape: &[u32]) -> TileResult<Vec<Vec<Coord>>> {
        let mut out = Vec::with_capacity(shape.len());
        for (d, &extent) in shape.iter().enumerate() {
            let map = layout.dim_map(d);
            let mut first = self.u32(0)?;
            if map.warps > 1 {
                let (stride, warps) = (self.u32(map.warp_stride)?, self.u32(map.warps)?);
                let step = self.u32(map.warp_step)?;
                let w = self.b.div(self.warp, stride)?;
                let w = self.b.rem(w, warps)?;
                first = self.b.mul(w, step)?;
            }
            if map.lanes > 1 {
                let (stride, lanes) = (self.u32(map.lane_stride)?, self.u32(map.lanes)?);
                let step = self.u32(map.lane_step)?;
                let l = self.b.div(self.lane, stride)?;
                let l = self.b.rem(l, lanes)?;
                let l = self.b.mul(l, step)?;
                first = self.b.add(first, l)?;
            }
            let wraps = extent < map.coverage;
            let extent_v = self.u32(extent)?;
            let mut coords = Vec::with_capacity(map.regs(extent) as usize);
            for j in 0..map.regs(extent) {
                let off = self.u32(map.offset(extent, j))?;
                let raw = self.b.add(first, off)?;
                coords.push(if wraps {
                    Coord {
                        value: self.b.rem(raw, extent_v)?,
                        owned: Some(self.b.lt(raw, extent_v)?),
                    }
                } else {
                    Coord {
                        value: raw,
                        owned: None,
                    }
                });
            }
            out.push(coords);
        }
        Ok(out)
    }

    /// The coordinates of register `reg`, from [`Self::coords`]' table.
    pub fn reg_coords(
        layout: &Layout,
        shape: &[u32],
        table: &[Vec<Coord>],
        reg: u32,
    ) -> Vec<Coord> {
        let dims = layout.reg_dims(shape, reg);
        (0..shape.len())
            .map(|d| table[d][dims[d] as usize])
            .collect()
    }

    /// Whether this thread owns the element at `coords` (`None`: always).
    pub fn owned(&mut self, coords: &[Coord]) -> TileResult<Option<ValueId>> {
        let mut all = None;
        for c in coords {
            all = self.and(all, c.owned)?;
        }
        Ok(all)
    }

    fn region(&mut self, ops: &[Op]) -> TileResult<()> {
        for op in ops {
            self.op(op)?;
        }
        Ok(())
    }

    fn op(&mut self, op: &Op) -> TileResult<()> {
        if self.fuse(op)? || self.ring_skips(op) {
            return Ok(());
        }
        match op {
            Op::ScalarConst { out, value } => {
                let ty = self.program.scalar_type(*out).clone();
                let v = match *value {
                    Const::Int(i) => self.b.iconst(ty, i)?,
                    Const::Float(f) => self.b.fconst(ty, f)?,
                };
                self.set_scalar(*out, v);
            }
            Op::ProgramId { out, axis } => {
                let dim = [Dim::X, Dim::Y, Dim::Z][(*axis as usize).min(2)];
                let v = match self.program_ids {
                    Some(ids) if *axis < 2 => ids[*axis as usize],
                    Some(_) => self.u32(0)?,
                    None => self.b.block_idx(dim)?,
                };
                self.set_scalar(*out, v);
            }
            Op::ScalarBinary { out, op, a, b } => {
                let (a, b) = (self.scalar(*a)?, self.scalar(*b)?);
                let v = self.b.binary(*op, a, b)?;
                self.set_scalar(*out, v);
            }
            Op::ScalarCmp { out, op, a, b } => {
                let (a, b) = (self.scalar(*a)?, self.scalar(*b)?);
                let v = self.b.cmp(*op, a, b)?;
                self.set_scalar(*out, v);
            }
            Op::ViewDim { out, view, dim } => {
                let v = self.views[view.0 as usize].shape[*dim];
                self.set_scalar(*out, v);
            }
            Op::Full { out, value } => self.full(*out, *value)?,
            Op::Iota { out, axis } => self.iota(*out, *axis)?,
            Op::Load {
                out,
                view,
                origin,
                other,
            } => self.load(*out, *view, origin, *other)?,
            Op::Store { view, origin, tile } => self.store(*view, origin, *tile, false)?,
            Op::AtomicAdd { view, origin, tile } => self.store(*view, origin, *tile, true)?,
            Op::Map { out, op, args } => self.map(*out, *op, args)?,
            Op::Broadcast { out, tile } => self.broadcast(*out, *tile)?,
            Op::Cast { out, tile } => self.cast(*out, *tile)?,
            Op::Reduce {
                out,
                tile,
                axis,
                op,
            } => self.reduce(*out, *tile, *axis, *op)?,
            Op::Dot {
                out,
                a,
                b,
                acc,
                inputs,
            } => match self.layout(*out)? {
                // Outside a GEMM loop only 16-bit operands get a tensor-core
                // layout (`infer::mma_unfit`, `infer/rows.rs`).
                Layout::Mma(_) if *inputs != DotInputs::Native => {
                    return Err(TileError::Internal(format!(
                        "a {inputs:?} dot outside a GEMM loop got a tensor-core layout"
                    )))
                }
                Layout::Mma(mma) if mma.is_wgmma() => self.dot_wgmma(*out, *a, *b, *acc)?,
                Layout::Mma(mma) => self.dot_mma(*out, *a, *b, *acc, &mma)?,
                _ => self.dot(*out, *a, *b, *acc, *inputs)?,
            },
            Op::ConvertLayout { out, tile } => self.convert_layout(*out, *tile)?,
            Op::For {
                lo,
                hi,
                step,
                iv,
                inits,
                args,
                body,
                yields,
                results,
            } => match pipeline::gemm_loop(self.program, args, body, yields) {
                _ if self.ring.is_some() => {
                    self.for_loop(*lo, *hi, *step, *iv, inits, args, body, yields, results)?
                }
                Some(g) if pipeline::is_wgmma(self.layouts.get(g.dot)) => {
                    let (Value::Tile(init), Value::Tile(result)) = (inits[0], results[0]) else {
                        return Err(pipeline::not_a_gemm_loop());
                    };
                    self.gemm_pipeline(&g, *lo, *hi, *step, *iv, init, body, result)?
                }
                _ => self.for_loop(*lo, *hi, *step, *iv, inits, args, body, yields, results)?,
            },
        }
        Ok(())
    }

    /// Flattens carried values to HIR values: every register of every tile.
    fn flatten(&self, values: &[Value]) -> TileResult<Vec<ValueId>> {
        let mut flat = Vec::new();
        for v in values {
            match v {
                Value::Tile(t) => flat.extend(self.regs(*t)?),
                Value::Scalar(s) => flat.push(self.scalar(*s)?),
            }
        }
        Ok(flat)
    }

    /// Binds `values` to consecutive HIR values of `flat`.
    fn unflatten(&mut self, values: &[Value], flat: &[ValueId]) -> TileResult<()> {
        let mut at = 0;
        for v in values {
            match v {
                Value::Tile(t) => {
                    let n = self.layout(*t)?.num_regs(&self.program.tile(*t).shape) as usize;
                    let regs = flat
                        .get(at..at + n)
                        .ok_or_else(|| TileError::Internal("loop arity".into()))?;
                    self.set_tile(*t, regs.to_vec());
                    at += n;
                }
                Value::Scalar(s) => {
                    let v = *flat
                        .get(at)
                        .ok_or_else(|| TileError::Internal("loop arity".into()))?;
                    self.set_scalar(*s, v);
                    at += 1;
                }
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn for_loop(
        &mut self,
        lo: ScalarId,
        hi: ScalarId,
        step: ScalarId,
        iv: ScalarId,
        inits: &[Value],
        args: &[Value],
        body: &[Op],
        yields: &[Value],
        results: &[Value],
    ) -> TileResult<()> {
        let (lo, hi, step) = (self.scalar(lo)?, self.scalar(hi)?, self.scalar(step)?);
        for (out, a) in dot_mma::hoisted(self.program, self.layouts, body) {
            if pipeline::is_wgmma(self.layouts.get(out)) {
                self.stage_once_a(out, a)?; // SS form (dot_wgmma.rs says why)
            } else {
                self.hoist_a(out, a)?;
            }
        }
        if let Some(rot) = self.ring_rotation() {
            // One wgmma group in flight across the softmax (pipeline_ring.rs).
            let values = (inits, args, yields, results);
            return self.ring_loop_rotated(&rot, (lo, hi, step), iv, values, body);
        }
        let init = self.flatten(inits)?;
        let frame = self.b.begin_for(lo, hi, step, &init)?;
        self.set_scalar(iv, frame.iv);
        let carried = frame.carried.clone();
        self.unflatten(args, &carried)?;
        let outer = self.wgmma_parity;
        // On a TMA ring the dots read the iteration's stage, handed back
        // after the last one (pipeline_ring.rs); otherwise they stage into
        // two buffers alternating between iterations.
        let ring_last = self.ring_iteration(lo, step, frame.iv, body)?;
        let staged = ring_last.is_none() && dot_wgmma::stages_in(self.layouts, body);
        if staged {
            self.wgmma_parity = Some(self.iteration_parity(lo, step, frame.iv)?);
        }
        for (i, op) in body.iter().enumerate() {
            self.op(op)?;
            if ring_last == Some(i) {
                self.ring_release()?;
            }
        }
        let next = self.flatten(yields)?;
        let out = self.b.end_for(frame, &next)?;
        if staged {
            // The loop may run again (inside another loop) from buffer 0.
            self.b.barrier()?;
        }
        self.ring_loop_done(lo, hi, step)?;
        self.wgmma_parity = outer;
        self.unflatten(results, &out)
    }
}
