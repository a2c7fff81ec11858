//! Lowering of a recognised nest to a `zyntax_tile` program. Every load of
//! the nest becomes a view whose dims are the tile's loops, with the flat
//! access's coefficients as strides (0 where the load does not use a loop:
//! a broadcast) and the loop extents as extents, so tails are masked by the
//! tile layer's loads and stores.

use super::recognize::{flatten, recognize, ContractionPlan, FlatAccess, Recognition};
use super::{Expr, NestSpec, NestTileError, Refusal, RefusalKind};
use zyntax_hir::{Arch, BinOp, Type, UnOp};
use zyntax_tile::{
    heuristic, ws_heuristic, DotPath, GemmProblem, ScalarId, Schedule, TileBuilder, TileId,
    TileKernel, ViewId,
};

/// How to lower: the arch, and optionally a schedule (else the tile
/// layer's heuristic for contractions, a fixed blocking for maps).
#[derive(Clone, Debug)]
pub struct NestTileOptions {
    pub arch: Arch,
    pub schedule: Option<Schedule>,
    /// SMs of the GPU the kernel is for: the warp-specialised schedule's
    /// tile is the largest that still gives each SM a program instance
    /// (`zyntax_tile::ws_heuristic`). The launch sizes a persistent grid
    /// from the device it runs on; this only picks the tile.
    pub sms: u64,
}

/// SMs assumed when the caller does not say ([`NestTileOptions::sms`]): an
/// H100 / H200 SXM.
pub const DEFAULT_SMS: u64 = 132;

impl Default for NestTileOptions {
    fn default() -> NestTileOptions {
        NestTileOptions {
            arch: Arch::Sm80,
            schedule: None,
            sms: DEFAULT_SMS,
        }
    }
}

/// The kernel parameters of one view: `buffers[buffer]` from element
/// `offset` on, with these extents and strides (elements).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewArg {
    pub buffer: usize,
    pub offset: u64,
    pub extents: Vec<u32>,
    pub strides: Vec<u32>,
    /// The kernel assumes the view's first element (`buffers[buffer]` +
    /// `offset`) is aligned to this many bytes (16, for vector and
    /// `cp.async` copies), or nothing (1); the launcher must check it.
    pub align: u32,
}

/// A lowered nest: the tile kernel (verified HIR), what it was recognised
/// as, the schedule used, the launch grid (block: `kernel.launch.block`)
/// and the kernel's view arguments in parameter order. A warp-specialised
/// kernel (`kernel.launch.tensor_maps` not empty) also takes one TMA tensor
/// map per operand view after the views, and when `kernel.launch.persistent`
/// the program's grid (`grid[0]`, `grid[1]`) as two `u32`, launched on
/// about one CTA per SM ([`NestKernel::launch_grid`]).
#[derive(Clone, Debug)]
pub struct NestKernel {
    pub kernel: TileKernel,
    pub recognition: Recognition,
    pub schedule: Schedule,
    pub grid: [u32; 3],
    pub args: Vec<ViewArg>,
    /// Which pipeline a contraction runs and why (for reports): the
    /// warp-specialised TMA pipeline, or why not.
    pub pipeline: String,
}

impl NestKernel {
    /// The grid to launch on a GPU of `sms` SMs and the extra `u32`
    /// arguments after the tensor maps: a persistent kernel runs
    /// min(instances, `sms`) CTAs and takes the program's grid.
    pub fn launch_grid(&self, sms: u32) -> ([u32; 3], Vec<u32>) {
        if !self.kernel.launch.persistent {
            return (self.grid, Vec::new());
        }
        let instances = self.grid[0].saturating_mul(self.grid[1]);
        (
            [instances.min(sms).max(1), 1, 1],
            vec![self.grid[0], self.grid[1]],
        )
    }

    /// The view argument (index into `args`) each tensor map is built from.
    pub fn tensor_map_views(&self) -> Vec<usize> {
        self.kernel
            .launch
            .tensor_maps
            .iter()
            .map(|m| view_index(&self.kernel.launch.params, m.param))
            .collect()
    }
}

/// The position among the view parameters of parameter `param`.
fn view_index(params: &[zyntax_tile::KernelParam], param: usize) -> usize {
    params[..param]
        .iter()
        .filter(|p| matches!(p, zyntax_tile::KernelParam::View { .. }))
        .count()
}

/// Recognises and lowers `spec`; a [`NestTileError::Refused`] nest keeps
/// today's lowering.
pub fn lower(spec: &NestSpec, options: &NestTileOptions) -> Result<NestKernel, NestTileError> {
    let recognition = recognize(spec)?;
    let mut why_not_ws = String::new();
    let (tile_loops, schedules) = match &recognition {
        Recognition::Map(p) => (p.loops.clone(), vec![map_schedule(spec, &p.loops, options)]),
        Recognition::Contraction(c) => {
            let mut schedules = Vec::new();
            if options.schedule.is_none() {
                match ws_schedule(spec, c, options) {
                    Ok(s) => schedules.push(s),
                    Err(why) => why_not_ws = why,
                }
            }
            schedules.extend(gemm_schedules(spec, c, options));
            (vec![c.m, c.n], schedules)
        }
        Recognition::Reduction(r) => {
            let mut loops = r.loops.clone();
            loops.push(r.k);
            let s = map_schedule(spec, &loops, options);
            (loops, vec![s])
        }
    };
    // The first schedule that fits (a preferred one may not: a fused
    // epilogue converts the whole f32 accumulator through static shared
    // memory); a given schedule is the only one, and its error the caller's.
    // A warp-specialised schedule the tile layer lowered otherwise (an
    // epilogue needing scratch shared memory keeps it off TMA) gives way to
    // the next one: its tile was chosen for the TMA pipeline.
    let last = schedules.len() - 1;
    for (i, schedule) in schedules.into_iter().enumerate() {
        let ws = schedule.warp_specialize;
        match build(spec, &recognition, &tile_loops, schedule) {
            Err(NestTileError::Tile(
                e @ (zyntax_tile::TileError::DoesNotFit { .. }
                | zyntax_tile::TileError::BadSchedule { .. }),
            )) if i < last => {
                if ws {
                    why_not_ws = e.to_string();
                }
                continue;
            }
            Ok(nk) if ws && nk.kernel.launch.tensor_maps.is_empty() && i < last => {
                why_not_ws = "the tile layer did not lower the program warp-specialised \
                              (its epilogue stages the accumulator through shared memory)"
                    .into();
                continue;
            }
            Ok(mut nk) => {
                nk.pipeline = describe_pipeline(&nk, &why_not_ws);
                light_llvm_pipeline(&mut nk.kernel.module);
                if let Some(t) = F32_LARGE_TILE.filter(|t| t.schedule(options.arch) == nk.schedule)
                {
                    launch_bound(&mut nk.kernel.module, t.min_blocks);
                }
                return Ok(nk);
            }
            r => return r,
        }
    }
    unreachable!("at least one schedule")
}

/// The kernel reaches LLVM blocked, unrolled and scheduled by the tile
/// layer, so its functions ask for O1 (LLVM's default is O3): on the GPU
/// that is `zyntax_llvm::KERNEL_PIPELINE`, half of `default<O3>`'s compile
/// time for the same registers and 16-byte accesses (docs/lowering.md, "The
/// pass pipeline and its cost"). Only the default level (O3) changes.
fn light_llvm_pipeline(m: &mut zyntax_hir::Module) {
    for f in &mut m.functions {
        if f.constraints.opt_level == zyntax_hir::OptLevel::O3 {
            f.constraints.opt_level = zyntax_hir::OptLevel::O1;
        }
    }
}

/// An FFMA tile for large f32 contractions, in place of the tile layer's
/// heuristic (64x64, K step 16, 4 warps), and the launch bound its kernel
/// gets (HIR `min_blocks`: ptxas keeps registers under 65536 / (threads x
/// blocks)). `None`: the heuristic's.
struct F32Tile {
    block: u32,
    k: u32,
    warps: u32,
    min_blocks: Option<u32>,
}

impl F32Tile {
    fn schedule(&self, arch: Arch) -> Schedule {
        Schedule::block(&[self.block, self.block])
            .k(self.k)
            .warps(self.warps)
            .arch(arch)
            .dot_path(DotPath::Ffma)
    }
}

// Session 14 B2 (H200, f32 4096^3): 36.0 TFLOP/s against 33.0 for the
// heuristic's 64x64 (both register-blocked), 24.6 without the bound (155
// registers: one block per SM); cuBLAS 51.4, the library's SIMT kernel 42.9.
const F32_LARGE_TILE: Option<F32Tile> = Some(F32Tile {
    block: 128,
    k: 8,
    warps: 8,
    min_blocks: Some(2),
});

/// Sets the kernels' launch bound (`.minnctapersm`) to `min_blocks`.
fn launch_bound(m: &mut zyntax_hir::Module, min_blocks: Option<u32>) {
    for f in &mut m.functions {
        if let zyntax_hir::FunctionKind::Kernel(k) = &mut f.kind {
            k.min_blocks = min_blocks;
        }
    }
}

/// What [`NestKernel::pipeline`] says.
fn describe_pipeline(nk: &NestKernel, why_not_ws: &str) -> String {
    let s = &nk.schedule;
    if !matches!(nk.recognition, Recognition::Contraction(_)) || s.block.len() != 2 {
        return String::new();
    }
    let tile = format!("{}x{}, K step {}", s.block[0], s.block[1], s.k);
    if !nk.kernel.launch.tensor_maps.is_empty() {
        return format!(
            "warp-specialised TMA pipeline ({tile}, {} consumer warps{}, {} stages{}{})",
            s.warps,
            if s.pingpong { " x 2 sets" } else { "" },
            s.stages,
            if nk.kernel.launch.persistent {
                ", persistent"
            } else {
                ""
            },
            // the operands' two maps, and the output's when TMA stores it
            if nk.kernel.launch.tensor_maps.len() > 2 {
                ", output stored through TMA"
            } else {
                ""
            }
        );
    }
    let text = zyntax_hir::print_module(&nk.kernel.module);
    let path = if text.contains("wgmma") {
        "wgmma cp.async pipeline"
    } else if text.contains("mma.sync") {
        "mma.sync tiles"
    } else {
        "FFMA tiles"
    };
    if why_not_ws.is_empty() {
        format!("{path} ({tile}, {} warps, {} stages)", s.warps, s.stages)
    } else {
        format!(
            "{path} ({tile}, {} warps, {} stages); not warp-specialised: {why_not_ws}",
            s.warps, s.stages
        )
    }
}

fn build(
    spec: &NestSpec,
    recognition: &Recognition,
    tile_loops: &[usize],
    schedule: Schedule,
) -> Result<NestKernel, NestTileError> {
    let recognition = recognition.clone();
    let tile_loops = tile_loops.to_vec();
    if schedule.block.len() != tile_loops.len() {
        return Err(Refusal::new(
            RefusalKind::BadSpec,
            format!(
                "the schedule's block has {} dims; this nest tiles {}",
                schedule.block.len(),
                tile_loops.len()
            ),
        )
        .into());
    }
    let mut extents: Vec<u64> = tile_loops.iter().map(|&l| spec.loops[l].extent).collect();
    if let Recognition::Reduction(_) = recognition {
        // One program instance covers the whole reduction loop.
        if let Some(k) = extents.last_mut() {
            *k = 1;
        }
    }
    let grid = schedule.grid(&extents)?;
    let mut t = TileBuilder::new(spec.name.clone(), schedule.clone());
    let mut cx = Ctx {
        spec,
        loops: tile_loops.clone(),
        shape: schedule.block.clone(),
        origin: Vec::new(),
        args: Vec::new(),
        k_extent_one: false,
    };
    for (d, &b) in schedule.block.iter().enumerate() {
        let (pid, bs) = (t.program_id(d as u32), t.index(b));
        cx.origin.push(t.scalar_mul(pid, bs));
    }
    let f32_or_f64 = if uses_f64(spec) { Type::F64 } else { Type::F32 };
    let result = match &recognition {
        Recognition::Map(_) => cx.eval(&mut t, &spec.value, &f32_or_f64, None)?,
        Recognition::Contraction(c) => {
            let acc = cx.contract(&mut t, c, &schedule);
            match &spec.epilogue {
                Some(e) => cx.eval(&mut t, e, &f32_or_f64, Some(acc))?,
                None => acc,
            }
        }
        Recognition::Reduction(r) => {
            let acc = cx.reduce(&mut t, spec, r.k, &f32_or_f64)?;
            // The epilogue and the store see the `k` dim with extent 1.
            if let (Some(o), Some(s)) = (cx.origin.last_mut(), cx.shape.last_mut()) {
                *o = t.index(0);
                *s = 1;
            }
            cx.k_extent_one = true;
            match &spec.epilogue {
                Some(e) => cx.eval(&mut t, e, &f32_or_f64, Some(acc))?,
                None => acc,
            }
        }
    };
    let out = flatten(spec, &spec.output)?;
    let out_elem = spec.buffers[out.buffer].elem.clone();
    let view = cx.view(&mut t, &out);
    let result = t.cast(result, out_elem);
    let origin = cx.origin.clone();
    t.store(view, &origin, result);
    let kernel = t.finish()?;
    Ok(NestKernel {
        kernel,
        recognition,
        schedule,
        grid,
        args: cx.args,
        pipeline: String::new(),
    })
}

fn uses_f64(spec: &NestSpec) -> bool {
    spec.buffers.iter().any(|b| b.elem == Type::F64)
}

/// Maps: up to 1024 elements per tile (4 warps, 8 per thread), the last
/// loop fastest, each dim no larger than its loop needs.
fn map_schedule(spec: &NestSpec, loops: &[usize], options: &NestTileOptions) -> Schedule {
    if let Some(s) = &options.schedule {
        return s.clone();
    }
    let want: &[u32] = match loops.len() {
        1 => &[1024],
        2 => &[16, 64],
        _ => &[4, 8, 32],
    };
    let block: Vec<u32> = loops
        .iter()
        .zip(want)
        .map(|(&l, &w)| {
            let e = u32::try_from(spec.loops[l].extent).unwrap_or(u32::MAX);
            w.min(e.checked_next_power_of_two().unwrap_or(w))
        })
        .collect();
    Schedule::block(&block).warps(4).arch(options.arch)
}

/// Contractions: f16/bf16 on sm_90a, when the problem fills 128x128 tiles,
/// take the tile layer's wgmma pipeline (`DotPath::Auto` picks it for a GEMM
/// loop that fits: K steps of 64, i.e. 128-byte rows, two warpgroups, 4
/// stages of `cp.async`; else `mma.sync`); otherwise the tile layer's
/// heuristic, f16/bf16 on sm_80+ on `mma.sync` (a K step of at least 16, as
/// `mma.sync.m16n8k16` needs), f32 on FFMA.
fn gemm_schedules(
    spec: &NestSpec,
    c: &ContractionPlan,
    options: &NestTileOptions,
) -> Vec<Schedule> {
    if let Some(s) = &options.schedule {
        return vec![s.clone()];
    }
    let (m, n, k) = (
        spec.loops[c.m].extent,
        spec.loops[c.n].extent,
        spec.loops[c.k].extent,
    );
    let problem = GemmProblem {
        m,
        n,
        k,
        operand_bytes: c.elem.size_bytes().map_or(4, |b| b as u32),
    };
    let s = heuristic(&problem, options.arch);
    // (about one block per SM of an H100/H200 or more)
    let large = |b: u32| m.div_ceil(u64::from(b)) * n.div_ceil(u64::from(b)) >= DEFAULT_SMS;
    let f32_tile = F32_LARGE_TILE.filter(|t| c.elem == Type::F32 && large(t.block));
    let fallback = if let Some(t) = f32_tile {
        t.schedule(options.arch)
    } else if c.elem != Type::F32 && options.arch >= Arch::Sm80 {
        let k = s.k.max(16);
        s.k(k).warps(4).dot_path(DotPath::MmaSync)
    } else {
        // One stage: the register prefetch of 2 stages measured slower at
        // f32 4096^3 on an H200 (29.5 against 33.6 TFLOP/s, session 12 B1:
        // 149 registers against 127 cost a block per SM).
        s.dot_path(DotPath::Ffma)
    };
    // wgmma is sm_90a PTX (arch-specific): plain sm_90 stays on mma.sync.
    if c.elem != Type::F32 && options.arch == Arch::Sm90a && m >= 128 && n >= 128 && k >= 64 {
        let wgmma = |bn: u32, warps: u32, stages: u32| {
            Schedule::block(&[128, bn])
                .k(64)
                .warps(warps)
                .stages(stages)
                .arch(options.arch)
                .dot_path(DotPath::Auto)
        };
        // 128x128 over two warpgroups: 396 TFLOP/s at bf16 4096^3 on an
        // H200 against 319 over one (benches/tiling.py's ladder, docs/tiling.md).
        // 128x64 when an epilogue's f32 tile does not fit 128x128 (64 KiB
        // of static shared memory to convert it), with 2 stages: beside the
        // epilogue's 32 KiB they keep two blocks per SM (161 TFLOP/s for the
        // fused bf16 4096^3 nest against 113 with 4 stages, B2).
        return vec![wgmma(128, 8, 4), wgmma(64, 4, 2), fallback];
    }
    vec![fallback]
}

/// The warp-specialised, persistent TMA schedule of a 16-bit contraction on
/// sm_90a (`zyntax_tile::ws_heuristic`, the choice the library matmul
/// makes), or why the nest cannot take it: TMA loads 2-d boxes along a
/// unit-stride dim with 16-byte aligned rows, and the producer only issues
/// copies (a prologue computes on the loaded tiles).
fn ws_schedule(
    spec: &NestSpec,
    c: &ContractionPlan,
    options: &NestTileOptions,
) -> Result<Schedule, String> {
    if options.arch != Arch::Sm90a {
        return Err(format!("the pipeline is sm_90a code, not {}", options.arch));
    }
    if c.elem.size_bytes() != Some(2) {
        return Err(format!(
            "{} operands (TMA + wgmma take f16 and bf16)",
            c.elem
        ));
    }
    if c.a_prologue.is_some() || c.b_prologue.is_some() {
        return Err("a prologue computes on the loaded operand tiles".into());
    }
    for (what, acc, inner, outer) in [("A", &c.a, c.k, c.m), ("B", &c.b, c.n, c.k)] {
        let name = &spec.buffers[acc.buffer].name;
        let loop_name = |l: usize| spec.loops[l].name.clone();
        if acc.coef[inner] != 1 {
            return Err(format!(
                "operand {what} ({name}) does not have unit stride along `{}`",
                loop_name(inner)
            ));
        }
        if (acc.offset * 2) % 16 != 0 || (acc.coef[outer] * 2) % 16 != 0 {
            return Err(format!(
                "operand {what} ({name}): its first element or its rows along `{}` are not 16-byte aligned",
                loop_name(outer)
            ));
        }
    }
    let (m, n, k) = (
        spec.loops[c.m].extent,
        spec.loops[c.n].extent,
        spec.loops[c.k].extent,
    );
    let problem = GemmProblem {
        m,
        n,
        k,
        operand_bytes: 2,
    };
    let mut s = ws_heuristic(&problem, options.sms)
        .ok_or_else(|| format!("{m}x{n} has too few output tiles for {} SMs", options.sms))?;
    // An epilogue computes in the consumers' registers beside the f32
    // accumulator: 128 accumulators a thread (128x256 over 8 warps, a
    // 128x128 ping-pong set of 4) leave it too few, and ptxas spills (776
    // bytes for bias + gelu + residual at 128x256); 128x128 over 8
    // cooperative warps holds 64 a thread and spills nothing.
    let per_thread = s.block[0] * s.block[1] / s.threads();
    if spec.epilogue.is_some() && per_thread > 64 {
        s = Schedule::block(&[128, 128])
            .k(64)
            .warps(8)
            .stages(4)
            .arch(Arch::Sm90a)
            .warp_specialize(true)
            .persistent(true);
    }
    // A K shorter than the ring stays off it (as in zyntax.kernels.matmul).
    if k < u64::from(s.k * s.stages) {
        return Err(format!(
            "K = {k} is shorter than the {} stages of {}",
            s.stages, s.k
        ));
    }
    // Not on ping-pong sets: the per-warpgroup TMA store hung there on the
    // device in session 14 (docs/tile.md, "Known problems").
    let tma = !s.pingpong && tma_storable(spec, c);
    Ok(s.tma_store(tma))
}

/// Whether the output can be stored through TMA (`Schedule::tma_store`):
/// unit stride along `n`, a 16-byte aligned first element and rows, 2- or
/// 4-byte elements. The consumers then write each tile to shared memory and
/// TMA copies it out, clipping the tails: no masked stores, a third of the
/// LLVM code generation of the bf16 4096^3 nest (its per-element masked
/// stores were most of it), and the fused epilogue at 512 TFLOP/s against
/// 488 with plain stores (session 12 B2). (Session 13 held it back because
/// the interpreter's fused nest came out wrong: the tests' launcher built
/// the f32 output's tensor map as bf16.)
fn tma_storable(spec: &NestSpec, c: &ContractionPlan) -> bool {
    let Ok(out) = flatten(spec, &spec.output) else {
        return false;
    };
    let size = spec.buffers[out.buffer].elem.size_bytes().unwrap_or(0);
    matches!(size, 2 | 4)
        && out.coef[c.n] == 1
        && (out.offset * size).is_multiple_of(16)
        && (out.coef[c.m] * size).is_multiple_of(16)
}

/// `e` (one load, constants, element-wise ops) applied to the loaded tile
/// `x` of `shape` in f32, rounded back to the operand type `elem`; with
/// `k_tail = (k0, K)` the elements whose K coordinate (along `k_dim`) is
/// past K are set to 0 afterwards.
fn prologue(
    t: &mut TileBuilder,
    e: Option<&Expr>,
    x: TileId,
    elem: &Type,
    shape: [u32; 2],
    k_dim: usize,
    (k0, k_tail): (ScalarId, Option<ScalarId>),
) -> TileId {
    let Some(e) = e else { return x };
    fn go(t: &mut TileBuilder, e: &Expr, x: TileId, shape: &[u32]) -> TileId {
        match e {
            Expr::Load(_) => t.cast(x, Type::F32),
            Expr::Const(v) => t.full(shape, Type::F32, *v),
            Expr::Unary(op, a) => {
                let a = go(t, a, x, shape);
                t.unary(*op, a)
            }
            Expr::Binary(op, a, b) => {
                let a = go(t, a, x, shape);
                let b = go(t, b, x, shape);
                t.binary(*op, a, b)
            }
            // recognize keeps `Reduced` out of the value.
            Expr::Reduced => t.full(shape, Type::F32, 0.0),
        }
    }
    let mut y = go(t, e, x, &shape);
    if let Some(k_end) = k_tail {
        let iota = t.iota(&shape, k_dim);
        let (start, end) = (t.splat(&shape, k0), t.splat(&shape, k_end));
        let kk = t.add(iota, start);
        let inside = t.cmp(zyntax_hir::CmpOp::Lt, kk, end);
        let zeros = t.full(&shape, Type::F32, 0.0);
        y = t.where_(inside, y, zeros);
    }
    t.cast(y, elem.clone())
}

struct Ctx<'s> {
    spec: &'s NestSpec,
    /// The loop of each tile dim.
    loops: Vec<usize>,
    shape: Vec<u32>,
    origin: Vec<ScalarId>,
    args: Vec<ViewArg>,
    /// After a tile reduction: the last tile dim (`k`) has extent 1.
    k_extent_one: bool,
}

impl Ctx<'_> {
    /// A view of `access` over `dims` (loops), recorded as a kernel argument.
    fn view_over(&mut self, t: &mut TileBuilder, access: &FlatAccess, dims: &[usize]) -> ViewId {
        let buf = &self.spec.buffers[access.buffer];
        let name = format!("{}{}", buf.name, self.args.len());
        let strides: Vec<u32> = dims
            .iter()
            .map(|&l| u32::try_from(access.coef[l]).unwrap_or(u32::MAX))
            .collect();
        let rank = dims.len();
        // A unit-stride view whose offset keeps 16-byte alignment (given an
        // aligned buffer, which the launcher checks) is declared aligned:
        // vector loads and 16-byte cp.async copies instead of element ones.
        let size = buf.elem.size_bytes().unwrap_or(4);
        let align = if strides[rank - 1] == 1 && (access.offset * size).is_multiple_of(16) {
            16
        } else {
            1
        };
        let view = if align == 16 {
            t.view_param_aligned(&name, buf.elem.clone(), rank, rank - 1, 16)
        } else if strides[rank - 1] == 1 {
            t.view_param_unit_stride(&name, buf.elem.clone(), rank, rank - 1)
        } else {
            t.view_param(&name, buf.elem.clone(), rank)
        };
        let mut extents: Vec<u32> = dims
            .iter()
            .map(|&l| u32::try_from(self.spec.loops[l].extent).unwrap_or(u32::MAX))
            .collect();
        if self.k_extent_one {
            extents[rank - 1] = 1;
        }
        self.args.push(ViewArg {
            buffer: access.buffer,
            offset: access.offset,
            extents,
            strides,
            align,
        });
        view
    }

    fn view(&mut self, t: &mut TileBuilder, access: &FlatAccess) -> ViewId {
        let dims = self.loops.clone();
        self.view_over(t, access, &dims)
    }

    /// `Σ_k A·B` for this program's output tile, in f32.
    fn contract(&mut self, t: &mut TileBuilder, c: &ContractionPlan, s: &Schedule) -> TileId {
        let (bm, bn, bk) = (s.block[0], s.block[1], s.k);
        let a = self.view_over(t, &c.a, &[c.m, c.k]);
        let b = self.view_over(t, &c.b, &[c.k, c.n]);
        let (m0, n0) = (self.origin[0], self.origin[1]);
        let (zero, step) = (t.index(0), t.index(bk));
        let k_end = t.dim(a, 1);
        let acc0 = t.full(&[bm, bn], Type::F32, 0.0);
        let (a_pro, b_pro) = (c.a_prologue.clone(), c.b_prologue.clone());
        // K past the end loads as 0, but a prologue may map 0 elsewhere
        // (exp(0) = 1): with a ragged last K step its result is masked.
        let k_len = self.spec.loops[c.k].extent;
        let k_tail = (!k_len.is_multiple_of(u64::from(bk)))
            .then(|| t.index(u32::try_from(k_len).unwrap_or(u32::MAX)));
        let elem = c.elem.clone();
        if ffma_prefetch(s, &elem) {
            // Register prefetch (the FFMA dot has no cp.async pipeline): the
            // next K step's tiles are loaded before this step's dot stages
            // and multiplies its own, so their global latency overlaps it.
            // The load after the last step is past K: masked, all zeros.
            let at0 = t.load(a, &[m0, zero], &[bm, bk]);
            let bt0 = t.load(b, &[zero, n0], &[bk, bn]);
            let inits = [acc0.into(), at0.into(), bt0.into()];
            let acc = t.for_range(zero, k_end, step, &inits, |t, k0, carried| {
                let k1 = t.scalar_add(k0, step);
                let at_next = t.load(a, &[m0, k1], &[bm, bk]);
                let bt_next = t.load(b, &[k1, n0], &[bk, bn]);
                let (at, bt) = (carried[1].tile(), carried[2].tile());
                let at = prologue(t, a_pro.as_ref(), at, &elem, [bm, bk], 1, (k0, k_tail));
                let bt = prologue(t, b_pro.as_ref(), bt, &elem, [bk, bn], 0, (k0, k_tail));
                let acc = t.dot(at, bt, carried[0].tile());
                vec![acc.into(), at_next.into(), bt_next.into()]
            });
            return acc[0].tile();
        }
        let acc = t.for_range(zero, k_end, step, &[acc0.into()], |t, k0, carried| {
            let at = t.load(a, &[m0, k0], &[bm, bk]);
            let bt = t.load(b, &[k0, n0], &[bk, bn]);
            let at = prologue(t, a_pro.as_ref(), at, &elem, [bm, bk], 1, (k0, k_tail));
            let bt = prologue(t, b_pro.as_ref(), bt, &elem, [bk, bn], 0, (k0, k_tail));
            vec![t.dot(at, bt, carried[0].tile()).into()]
        });
        acc[0].tile()
    }

    /// `Σ_k value` for this program's tile of the parallel loops (the last
    /// tile dim is `k`): a loop over blocks of `k` whose out-of-range
    /// elements are replaced by 0 before the tile `reduce`.
    fn reduce(
        &mut self,
        t: &mut TileBuilder,
        spec: &NestSpec,
        k: usize,
        ty: &Type,
    ) -> Result<TileId, NestTileError> {
        let shape = self.shape.clone();
        let last = shape.len() - 1;
        let mut acc_shape = shape.clone();
        acc_shape[last] = 1;
        let (zero, step) = (t.index(0), t.index(shape[last]));
        let k_end = t.index(u32::try_from(spec.loops[k].extent).unwrap_or(u32::MAX));
        let acc0 = t.full(&acc_shape, ty.clone(), 0.0);
        let mut failed = None;
        let acc = t.for_range(zero, k_end, step, &[acc0.into()], |t, k0, carried| {
            self.origin[last] = k0;
            let value = match self.eval(t, &spec.value, ty, None) {
                Ok(v) => v,
                Err(e) => {
                    failed = Some(e);
                    return vec![carried[0]];
                }
            };
            let iota = t.iota(&shape, last);
            let (start, end) = (t.splat(&shape, k0), t.splat(&shape, k_end));
            let kk = t.add(iota, start);
            let inside = t.cmp(zyntax_hir::CmpOp::Lt, kk, end);
            let zeros = t.full(&shape, ty.clone(), 0.0);
            let value = t.where_(inside, value, zeros);
            let part = t.sum(value, last);
            vec![t.add(carried[0].tile(), part).into()]
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(acc[0].tile()),
        }
    }

    /// The element-wise expression on this program's tile, in `ty` (f32, or
    /// f64 when a buffer is f64); `reduced` is the contraction's sum.
    /// Repeated subexpressions are evaluated once (`gelu(x)` names `x` five
    /// times: five loads of a bias, each its own kernel parameter, before).
    fn eval(
        &mut self,
        t: &mut TileBuilder,
        e: &Expr,
        ty: &Type,
        reduced: Option<TileId>,
    ) -> Result<TileId, NestTileError> {
        let mut memo = Vec::new();
        self.eval_in(t, e, ty, reduced, &mut memo)
    }

    fn eval_in(
        &mut self,
        t: &mut TileBuilder,
        e: &Expr,
        ty: &Type,
        reduced: Option<TileId>,
        memo: &mut Vec<(Expr, TileId)>,
    ) -> Result<TileId, NestTileError> {
        if let Some((_, tile)) = memo.iter().find(|(seen, _)| seen == e) {
            return Ok(*tile);
        }
        let shape = self.shape.clone();
        let tile = match e {
            Expr::Const(v) => t.full(&shape, ty.clone(), *v),
            Expr::Reduced => {
                let r = reduced.ok_or_else(|| {
                    Refusal::new(RefusalKind::BadSpec, "`Reduced` outside an epilogue")
                })?;
                t.cast(r, ty.clone())
            }
            Expr::Load(access) => {
                let flat = flatten(self.spec, access)?;
                self.load_broadcast(t, &flat, ty)
            }
            // 1 + tanh(v) = 2 sigmoid(2v) = 2 r², r = rsqrt(1 + exp(-2v)) (the
            // tanh-form GELU's factor): two approximate MUFU ops where the
            // HIR `tanh` takes a full-precision division (the library's
            // epilogue measured 218 against 508 TFLOP/s with it, gemm_tile.py).
            Expr::Binary(BinOp::Add, a, b) if *ty == Type::F32 && one_plus_tanh(a, b).is_some() => {
                let v = one_plus_tanh(a, b).expect("matched");
                let v = self.eval_in(t, v, ty, reduced, memo)?;
                let minus_two = t.full(&shape, ty.clone(), -2.0);
                let v2 = t.mul(v, minus_two);
                let ex = t.unary(UnOp::Exp, v2);
                let one = t.full(&shape, ty.clone(), 1.0);
                let den = t.add(ex, one);
                let r = t.unary(UnOp::Rsqrt, den);
                let two = t.full(&shape, ty.clone(), 2.0);
                let r2 = t.mul(r, r);
                t.mul(r2, two)
            }
            Expr::Unary(op, a) => {
                let a = self.eval_in(t, a, ty, reduced, memo)?;
                t.unary(*op, a)
            }
            Expr::Binary(op, a, b) => {
                let a = self.eval_in(t, a, ty, reduced, memo)?;
                let b = self.eval_in(t, b, ty, reduced, memo)?;
                t.binary(*op, a, b)
            }
        };
        memo.push((e.clone(), tile));
        Ok(tile)
    }

    /// A load of `access` on this program's tile in `ty`. Along a tile dim
    /// the access does not move with (a bias `b[j]` along `i`), it loads
    /// one element and broadcasts it in registers, as the library GEMM's
    /// bias does, instead of a full tile of stride 0.
    fn load_broadcast(&mut self, t: &mut TileBuilder, flat: &FlatAccess, ty: &Type) -> TileId {
        let shape = self.shape.clone();
        let mut part = shape.clone();
        let mut origin = self.origin.clone();
        let zero = t.index(0);
        for (d, &l) in self.loops.iter().enumerate() {
            if flat.coef[l] == 0 {
                part[d] = 1;
                origin[d] = zero;
            }
        }
        let view = self.view(t, flat);
        if part != shape {
            // Its extent along those dims is 1 (the stride is 0 anyway).
            let arg = self.args.last_mut().expect("view() records its argument");
            for (d, p) in part.iter().enumerate() {
                if *p == 1 && shape[d] != 1 {
                    arg.extents[d] = 1;
                }
            }
        }
        let tile = t.load(view, &origin, &part);
        let tile = t.cast(tile, ty.clone());
        if part == shape {
            tile
        } else {
            t.broadcast(tile, &shape)
        }
    }
}

/// Whether the contraction's K loop prefetches the next step's tiles into
/// registers: an FFMA dot (f32 operands, or any on an FFMA schedule) with 2
/// stages or more asks for it (a given schedule; the default has 1); the
/// tensor-core paths pipeline themselves.
fn ffma_prefetch(s: &Schedule, elem: &Type) -> bool {
    let ffma = s.dot_path == DotPath::Ffma || (*elem == Type::F32 && s.dot_path == DotPath::Auto);
    ffma && s.stages >= 2
}

/// `v` when `a + b` is `1 + tanh(v)` or `tanh(v) + 1`.
fn one_plus_tanh<'e>(a: &'e Expr, b: &'e Expr) -> Option<&'e Expr> {
    match (a, b) {
        (Expr::Const(c), Expr::Unary(UnOp::Tanh, v))
        | (Expr::Unary(UnOp::Tanh, v), Expr::Const(c))
            if *c == 1.0 =>
        {
            Some(v)
        }
        _ => None,
    }
}
