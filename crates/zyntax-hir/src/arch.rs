//! Which instructions and types each target arch and PTX version allow.
//!
//! LLVM's NVPTX backend aborts the process ("Cannot select") on an intrinsic
//! the target lacks, and `ptxas` rejects PTX that uses an instruction newer
//! than the `.target`/`.version` it declares. So every GPU instruction that is
//! not available on the baseline (sm_70, PTX 6.0) has a row in [`FEATURES`],
//! and [`inst_requirements`] maps an instruction (op plus operand types) to the
//! rows it needs. The verifier checks every kernel and device function against
//! every arch it is compiled for; [`check_arch`] does the same for one arch
//! chosen at compile time.
//!
//! | feature | min arch | min PTX | why |
//! |---|---|---|---|
//! | any instruction | sm_70 | 6.0 | zyntax's oldest target; `shfl.sync`, `vote.sync`, `bar.warp.sync`, scoped atomics, `fence.acq_rel` |
//! | `bf16` values (any type containing bf16) | sm_80 | 7.0 | `cvt` to/from bf16 and bf16 arithmetic |
//! | `match.any` / `match.all` | sm_70 | 6.0 | `match.sync` |
//! | `atomic.add` on `f16` | sm_70 | 6.3 | `atom.add.noftz.f16` |
//! | `atomic.add` on `bf16` | sm_90 | 7.8 | `atom.add.noftz.bf16` |
//! | MMA, f16, m16n16k16 | sm_70 | 6.0 | `wmma.*.m16n16k16.f16` |
//! | MMA, f16, m32n8k16 / m8n32k16 | sm_70 | 6.1 | `wmma` shapes added in PTX 6.1 |
//! | MMA, bf16 | sm_80 | 7.0 | `wmma.*.bf16` |
//! | `cp.async`, `cp.async.commit`, `cp.async.wait` | sm_80 | 7.0 | `cp.async.*` |
//! | `mbarrier.init` / `arrive` / `test_wait` / `inval` | sm_80 | 7.0 | `mbarrier.*.shared.b64` |
//! | `mbarrier.arrive_expect_tx` / `complete_tx` / `try_wait_parity`, `fence.proxy_async`, `fence.mbarrier_init` | sm_90 | 8.0 | transaction counts and the async proxy |
//! | `atomic.add` / `red.add` on `vec<f16, 2>` | sm_70 | 6.2 | `atom.add.noftz.f16x2` |
//! | `atomic.add` / `red.add` on `vec<bf16, 2>` | sm_90 | 7.8 | `atom.add.noftz.bf16x2` |
//! | `redux.<op>` | sm_80 | 7.0 | `redux.sync` |
//! | `mma.sync` (f16, bf16, tf32, s8, u8, f64) | sm_80 | 7.0 | `mma.sync.aligned.{m16n8k16,m16n8k8,m16n8k32,m8n8k4}` |
//! | `mma.sync` e4m3 / e5m2 | sm_89 | 8.4 | `mma.sync.aligned.m16n8k32.*.e4m3/e5m2` |
//! | `ldmatrix` | sm_80 | 7.0 | `ldmatrix.sync.aligned.m8n8` (sm_75 has it from PTX 6.5, above its default) |
//! | `stmatrix` | sm_90 | 7.8 | `stmatrix.sync.aligned.m8n8` |
//! | `tanh.approx` | sm_80 | 7.0 | `tanh.approx.f32` (sm_75 from PTX 7.0, above its default) |
//! | `wgmma.*` | sm_90a | 8.0 | `wgmma.mma_async`, `wgmma.fence/commit_group/wait_group` (arch-specific) |
//! | `wgmma` on s8 × u8 / u8 × s8 | sm_90a | 8.4 | mixed integer inputs |
//! | `setmaxnreg` | sm_90a | 8.0 | `setmaxnreg.inc/dec.sync.aligned.u32` (arch-specific) |
//! | `elect.sync` | sm_90 | 8.0 | `elect.sync` |
//! | `tma.*`, `bulk.*`, `prefetch.tensormap` | sm_90 | 8.0 | `cp.async.bulk[.tensor]`, `cp.reduce.async.bulk.tensor`, tensor maps |
//! | `tma.load.multicast` | sm_90a | 8.0 | `.multicast::cluster` (ptxas: an advisory on plain sm_90) |
//! | `cvt_pack.f16x2` / `cvt_pack.bf16x2` | sm_80 | 7.0 | `cvt.rn.{f16x2,bf16x2}.f32` |
//! | `load.evict_first` / `evict_last`, `store.evict_*` | sm_80 | 7.4 | `createpolicy.fractional.L2::evict_*` + `ld/st.global.L2::cache_hint` (sm_80 needs an explicit `ptx(7.4)`) |
//! | `cvt_pack.e4m3x2` / `e5m2x2`, `cvt_unpack.*` | sm_89 | 8.1 | `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32`, `cvt.rn.f16x2.{e4m3x2,e5m2x2}` |
//! | cluster registers, `cluster_barrier.*`, `mapa`, `mbarrier.arrive_cluster`, a kernel's `cluster(..)` | sm_90 | 7.8 | `%cluster_*`, `barrier.cluster`, `mapa`, `.reqnctapercluster` |
//! | `griddepcontrol.*` | sm_90 | 7.8 | programmatic dependent launch |
//!
//! Kernel metadata is checked per arch too: static + dynamic shared memory
//! against [`max_shared_bytes`], `min_blocks` against [`max_blocks_per_sm`]
//! and, with `max_threads` in whole warps, [`max_threads_per_sm`].
//!
//! Each arch also has a minimum PTX version (`.target sm_XX` is rejected by
//! `ptxas` under an older `.version`): see [`min_ptx`]. The PTX versions LLVM 19
//! can emit are 6.0–6.5, 7.0–7.8 and 8.0–8.5 ([`ptx_supported`]).

use crate::entities::{BlockId, InstId};
use crate::error::{Diagnostic, VerifyError};
use crate::ir::{Function, InstData, Module};
use crate::op::{AtomicOp, MmaElem, Op};
use crate::printer::print_inst;
use crate::target::{Arch, PtxVersion};
use crate::types::{MmaShape, ScalarType, Type};

/// A feature some instructions need: the oldest arch and PTX version that have it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Feature {
    /// Short name used in diagnostics and docs.
    pub name: &'static str,
    pub arch: Arch,
    pub ptx: PtxVersion,
}

impl Feature {
    /// Whether `arch` with PTX `ptx` provides this feature.
    pub fn available(&self, arch: Arch, ptx: PtxVersion) -> bool {
        arch >= self.arch && ptx >= self.ptx
    }
}

const fn feature(name: &'static str, arch: Arch, major: u32, minor: u32) -> Feature {
    Feature {
        name,
        arch,
        ptx: PtxVersion::new(major, minor),
    }
}

pub const BASELINE: Feature = feature("baseline", Arch::Sm70, 6, 0);
pub const BF16: Feature = feature("bf16", Arch::Sm80, 7, 0);
pub const MATCH: Feature = feature("match.sync", Arch::Sm70, 6, 0);
pub const ATOMIC_ADD_F16: Feature = feature("atomic add on f16", Arch::Sm70, 6, 3);
pub const ATOMIC_ADD_BF16: Feature = feature("atomic add on bf16", Arch::Sm90, 7, 8);
pub const WMMA_F16: Feature = feature("wmma f16 m16n16k16", Arch::Sm70, 6, 0);
pub const WMMA_F16_SHAPES: Feature = feature("wmma f16 m32n8k16/m8n32k16", Arch::Sm70, 6, 1);
pub const WMMA_BF16: Feature = feature("wmma bf16", Arch::Sm80, 7, 0);
pub const CP_ASYNC: Feature = feature("cp.async", Arch::Sm80, 7, 0);
pub const MBARRIER: Feature = feature("mbarrier", Arch::Sm80, 7, 0);
pub const MBARRIER_TX: Feature = feature("mbarrier transaction counts", Arch::Sm90, 8, 0);
pub const ATOMIC_ADD_F16X2: Feature = feature("atomic add on vec<f16, 2>", Arch::Sm70, 6, 2);
pub const ATOMIC_ADD_BF16X2: Feature = feature("atomic add on vec<bf16, 2>", Arch::Sm90, 7, 8);
pub const REDUX: Feature = feature("redux.sync", Arch::Sm80, 7, 0);
// Warp MMA and ldmatrix/stmatrix (issue 12 items 1-2).
pub const MMA_SYNC: Feature = feature("mma.sync", Arch::Sm80, 7, 0);
pub const MMA_SYNC_FP8: Feature = feature("mma.sync on e4m3/e5m2", Arch::Sm89, 8, 4);
// ldmatrix/tanh.approx exist on sm_75 from PTX 6.5/7.0, newer than sm_75's default
// PTX 6.4: gated at sm_80 so every arch's default PTX covers its features.
pub const LDMATRIX: Feature = feature("ldmatrix", Arch::Sm80, 7, 0);
pub const STMATRIX: Feature = feature("stmatrix", Arch::Sm90, 7, 8);
pub const TANH_APPROX: Feature = feature("tanh.approx", Arch::Sm80, 7, 0);
// Warpgroup MMA and warp specialisation (issue 13 items 1 and 5).
pub const WGMMA: Feature = feature("wgmma", Arch::Sm90a, 8, 0);
pub const WGMMA_MIXED_INT: Feature = feature("wgmma with mixed s8/u8 inputs", Arch::Sm90a, 8, 4);
pub const SETMAXNREG: Feature = feature("setmaxnreg", Arch::Sm90a, 8, 0);
pub const ELECT_SYNC: Feature = feature("elect.sync", Arch::Sm90, 8, 0);
// TMA and bulk copies (issue 13 item 2).
pub const TMA: Feature = feature("tma", Arch::Sm90, 8, 0);
// ptxas flags `.multicast::cluster` on plain sm_90 ("use sm_90a").
pub const TMA_MULTICAST: Feature = feature("tma multicast", Arch::Sm90a, 8, 0);
// Packed conversions (issue 12 item 3).
pub const CVT_PACK: Feature = feature("cvt_pack to f16x2/bf16x2", Arch::Sm80, 7, 0);
// ptxas: sm_90 from PTX 7.8, sm_89 only from PTX 8.1 (one row: the later of the two).
pub const CVT_FP8: Feature = feature("fp8 pair conversions", Arch::Sm89, 8, 1);
// L2 eviction priorities (issue 12 item 3): `createpolicy` and `.L2::cache_hint`.
pub const L2_HINT: Feature = feature("L2 eviction hints", Arch::Sm80, 7, 4);
// Clusters, distributed shared memory and programmatic dependent launch (issue 13, h13-cluster).
pub const CLUSTER: Feature = feature("thread block clusters", Arch::Sm90, 7, 8);
pub const GRIDDEP: Feature = feature("griddepcontrol", Arch::Sm90, 7, 8);

/// Every row of the gating table.
pub const FEATURES: &[Feature] = &[
    BASELINE,
    BF16,
    MATCH,
    ATOMIC_ADD_F16,
    ATOMIC_ADD_BF16,
    WMMA_F16,
    WMMA_F16_SHAPES,
    WMMA_BF16,
    CP_ASYNC,
    MBARRIER,
    MBARRIER_TX,
    ATOMIC_ADD_F16X2,
    ATOMIC_ADD_BF16X2,
    REDUX,
    MMA_SYNC,
    MMA_SYNC_FP8,
    LDMATRIX,
    STMATRIX,
    TANH_APPROX,
    WGMMA,
    WGMMA_MIXED_INT,
    SETMAXNREG,
    ELECT_SYNC,
    TMA,
    TMA_MULTICAST,
    CVT_PACK,
    CVT_FP8,
    L2_HINT,
    CLUSTER,
    GRIDDEP,
];

/// The oldest PTX ISA version whose `.target` accepts `arch`.
pub fn min_ptx(arch: Arch) -> PtxVersion {
    match arch {
        Arch::Sm70 => PtxVersion::new(6, 0),
        Arch::Sm75 => PtxVersion::new(6, 3),
        Arch::Sm80 => PtxVersion::new(7, 0),
        Arch::Sm86 => PtxVersion::new(7, 1),
        Arch::Sm89 | Arch::Sm90 => PtxVersion::new(7, 8),
        Arch::Sm90a => PtxVersion::new(8, 0),
    }
}

/// Whether LLVM 19 can emit this PTX version (`ptx60` … `ptx85`).
pub fn ptx_supported(v: PtxVersion) -> bool {
    match v.major {
        6 => v.minor <= 5,
        7 => v.minor <= 8,
        8 => v.minor <= 5,
        _ => false,
    }
}

/// Every PTX ISA version LLVM 19 can emit ([`ptx_supported`]), oldest first.
pub fn ptx_versions() -> Vec<PtxVersion> {
    (6..=8)
        .flat_map(|major| (0..=9).map(move |minor| PtxVersion::new(major, minor)))
        .filter(|v| ptx_supported(*v))
        .collect()
}

/// Everything zyntax knows about one arch, as one row of the target table
/// ([`target_table`]): `zyntax archs` prints it and Python reads it
/// (`zyntax.targets`), so no other copy of these facts exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchFacts {
    pub arch: Arch,
    pub compute_capability: (u32, u32),
    /// Runs on exactly its compute capability only ([`Arch::is_arch_specific`]).
    pub arch_specific: bool,
    /// The PTX version emitted unless the module asks for another ([`Arch::default_ptx`]).
    pub default_ptx: PtxVersion,
    /// The oldest PTX version whose `.target` accepts the arch ([`min_ptx`]).
    pub min_ptx: PtxVersion,
    /// The names of the [`FEATURES`] rows the arch has at `default_ptx`.
    pub features: Vec<&'static str>,
    pub max_shared_bytes: u64,
    pub max_blocks_per_sm: u64,
    pub max_threads_per_sm: u64,
}

impl ArchFacts {
    pub fn of(arch: Arch) -> ArchFacts {
        let ptx = arch.default_ptx();
        ArchFacts {
            arch,
            compute_capability: arch.compute_capability(),
            arch_specific: arch.is_arch_specific(),
            default_ptx: ptx,
            min_ptx: min_ptx(arch),
            features: FEATURES
                .iter()
                .filter(|f| f.available(arch, ptx))
                .map(|f| f.name)
                .collect(),
            max_shared_bytes: max_shared_bytes(arch),
            max_blocks_per_sm: max_blocks_per_sm(arch),
            max_threads_per_sm: max_threads_per_sm(arch),
        }
    }
}

/// The target table: the facts of every arch of [`Arch::ALL`], oldest first.
/// The default arch is [`Arch::DEFAULT`]; a device's arch is [`Arch::for_device`].
pub fn target_table() -> Vec<ArchFacts> {
    Arch::ALL.iter().map(|a| ArchFacts::of(*a)).collect()
}

/// Most shared memory (static + dynamic) one block may use on `arch`, in bytes
/// (the opt-in maximum of the CUDA programming guide's compute capability table).
pub fn max_shared_bytes(arch: Arch) -> u64 {
    match arch {
        Arch::Sm70 => 96 * 1024,
        Arch::Sm75 => 64 * 1024,
        Arch::Sm80 => 163 * 1024,
        Arch::Sm86 | Arch::Sm89 => 99 * 1024,
        Arch::Sm90 | Arch::Sm90a => 227 * 1024,
    }
}

/// Most resident blocks per SM (`.minnctapersm` above it is a `ptxas` warning).
pub fn max_blocks_per_sm(arch: Arch) -> u64 {
    match arch {
        Arch::Sm70 | Arch::Sm80 | Arch::Sm90 | Arch::Sm90a => 32,
        Arch::Sm75 | Arch::Sm86 => 16,
        Arch::Sm89 => 24,
    }
}

/// Most resident threads per SM (`.minnctapersm` × `.maxntid`, in whole warps, above it is a `ptxas` warning).
pub fn max_threads_per_sm(arch: Arch) -> u64 {
    match arch {
        Arch::Sm70 | Arch::Sm80 | Arch::Sm90 | Arch::Sm90a => 2048,
        Arch::Sm75 => 1024,
        Arch::Sm86 | Arch::Sm89 => 1536,
    }
}

/// Smallest `max_registers` `ptxas` accepts without raising it (and warning).
pub const MIN_MAX_REGISTERS: u32 = 24;

/// Smallest `max_registers` `ptxas` accepts for a kernel on `arch` that
/// reaches tensor-core MMA instructions (`mma.*`): ptxas rejects a smaller
/// cap ("Insufficient registers"). Measured with ptxas 12.9 on every example
/// kernel (`crates/zyntax-llvm/tests/max_registers.rs` sweeps them); other
/// instruction classes assemble at [`MIN_MAX_REGISTERS`].
pub fn min_max_registers_mma(arch: Arch) -> u32 {
    match arch {
        Arch::Sm70 => 26,
        Arch::Sm75 => 25,
        _ => 28,
    }
}

/// The `max_registers` floor of a kernel on `arch`, by the instruction classes it reaches.
pub fn min_max_registers(m: &Module, f: &Function, arch: Arch) -> u32 {
    let mma = crate::verify::reaches_op(m, f, |op| {
        matches!(
            op,
            Op::MmaLoad { .. }
                | Op::MmaFill
                | Op::Mma
                | Op::MmaStore { .. }
                | Op::MmaSync { .. }
                | Op::Wgmma(_)
        )
    });
    let base = if mma {
        min_max_registers_mma(arch)
    } else {
        MIN_MAX_REGISTERS
    };
    base.max(crate::verify::max_over_reached(m, f, wgmma_min_registers))
}

/// Fewest registers ptxas (12.9) compiles a `wgmma` with: its accumulator's
/// registers + 26, + 4 with A in registers (measured for N = 8..256 and each
/// accumulator type; `crates/zyntax-llvm/tests/max_registers.rs` checks it).
fn wgmma_min_registers(f: &Function, d: &InstData) -> u32 {
    if !matches!(d.op, Op::Wgmma(_)) {
        return 0;
    }
    let ty = |k: usize| {
        d.args
            .get(k)
            .and_then(|v| f.values.get(v.index()))
            .map(|v| &v.ty)
    };
    let acc = match ty(0) {
        Some(Type::Vector(s, n)) => n * s.bits() / 32,
        _ => 0,
    };
    let a_regs = if ty(1) == Some(&Type::U64) { 0 } else { 4 };
    acc + 26 + a_regs
}

/// Whether a type mentions bf16 anywhere (vector, array, pointee, fragment).
pub fn mentions_bf16(t: &Type) -> bool {
    match t {
        Type::Scalar(s) | Type::Vector(s, _) => *s == ScalarType::BF16,
        Type::Array(e, _) | Type::Ptr(_, e) => mentions_bf16(e),
        Type::Frag(fr) => fr.elem == ScalarType::BF16,
        Type::TensorMap => false,
    }
}

/// The features an instruction needs beyond the baseline, given the types of
/// its operands and results (`None` where an id is out of range: that is the
/// verifier's structural error, not an arch one).
pub fn op_requirements(op: &Op, args: &[Option<&Type>], results: &[Option<&Type>]) -> Vec<Feature> {
    let mut out = Vec::new();
    let any_bf16 = args
        .iter()
        .chain(results)
        .flatten()
        .any(|t| mentions_bf16(t))
        || match op {
            Op::Alloca { elem, .. } | Op::SharedAlloc { elem, .. } | Op::DynShared { elem, .. } => {
                mentions_bf16(elem)
            }
            Op::MmaLoad { frag, .. } => frag.elem == ScalarType::BF16,
            _ => false,
        };
    if any_bf16 {
        out.push(BF16);
    }
    // Features an op always needs are in its table row; those that depend on types follow.
    if let Some(f) = op.def().feature {
        out.push(f);
    }
    match op {
        Op::Atomic {
            op: AtomicOp::Add, ..
        }
        | Op::Red {
            op: AtomicOp::Add, ..
        } => match args.get(1).copied().flatten() {
            Some(Type::Scalar(ScalarType::F16)) => out.push(ATOMIC_ADD_F16),
            Some(Type::Scalar(ScalarType::BF16)) => out.push(ATOMIC_ADD_BF16),
            Some(Type::Vector(ScalarType::F16, 2)) => out.push(ATOMIC_ADD_F16X2),
            Some(Type::Vector(ScalarType::BF16, 2)) => out.push(ATOMIC_ADD_BF16X2),
            _ => {}
        },
        Op::MmaLoad { frag, .. } => out.push(wmma_feature(frag.elem, frag.shape)),
        Op::MmaSync {
            elem: crate::op::MmaElem::E4m3 | crate::op::MmaElem::E5m2,
            ..
        } => out.push(MMA_SYNC_FP8),
        Op::Wgmma(w) if w.a != w.b && matches!(w.a, MmaElem::S8 | MmaElem::U8) => {
            out.push(WGMMA_MIXED_INT)
        }
        Op::CvtPack(f) | Op::CvtUnpack(f) => out.push(if f.is_fp8() { CVT_FP8 } else { CVT_PACK }),
        Op::LoadCached(c) | Op::StoreCached(c) if c.is_l2_hint() => out.push(L2_HINT),
        Op::Mma | Op::MmaStore { .. } | Op::MmaFill => {
            // The fragment operand (first frag among args/results) decides.
            let frag = args.iter().chain(results).flatten().find_map(|t| match t {
                Type::Frag(fr) => Some(*fr),
                _ => None,
            });
            if let Some(fr) = frag {
                // For `mma` the input element type decides; accumulators are f16/f32.
                let elem = match (op, args.first().copied().flatten()) {
                    (Op::Mma, Some(Type::Frag(a))) => a.elem,
                    _ => fr.elem,
                };
                out.push(wmma_feature(elem, fr.shape));
            }
        }
        _ => {}
    }
    out
}

fn wmma_feature(elem: ScalarType, shape: MmaShape) -> Feature {
    match (elem, shape) {
        (ScalarType::BF16, _) => WMMA_BF16,
        (_, MmaShape::M16N16K16) => WMMA_F16,
        _ => WMMA_F16_SHAPES,
    }
}

/// The features one instruction of `f` needs.
pub fn inst_requirements(f: &Function, d: &InstData) -> Vec<Feature> {
    let ty = |v: &crate::ValueId| f.values.get(v.index()).map(|x| &x.ty);
    let args: Vec<Option<&Type>> = d.args.iter().map(ty).collect();
    let results: Vec<Option<&Type>> = d.results.iter().map(ty).collect();
    op_requirements(&d.op, &args, &results)
}

/// Check a module for one arch, whatever its declared targets: every device
/// function and every kernel not pinned to another arch (what the PTX for
/// `arch` holds), with the module's PTX version (or the arch's default).
/// Only arch rules are checked here; run [`crate::verify_module`] as well.
pub fn check_arch(m: &Module, arch: Arch) -> Result<(), VerifyError> {
    let mut diags = Vec::new();
    check_ptx_for(m, arch, &mut diags);
    // As lowering selects them: device functions always, kernels unless pinned to another arch.
    let selected = m.functions.iter().filter(|f| match f.kind.kernel_info() {
        Some(k) => k.arch.unwrap_or(arch) == arch,
        None => f.kind.is_gpu(),
    });
    for f in selected {
        check_function(m, f, &[arch], m.ptx_version, &mut diags);
    }
    if diags.is_empty() {
        Ok(())
    } else {
        Err(VerifyError { diagnostics: diags })
    }
}

/// The PTX version used for `arch` in `m`.
pub fn ptx_for(m: &Module, arch: Arch) -> PtxVersion {
    m.ptx_version.unwrap_or_else(|| arch.default_ptx())
}

/// Module-level check of an explicit PTX version against one arch.
pub(crate) fn check_ptx_for(m: &Module, arch: Arch, diags: &mut Vec<Diagnostic>) {
    if let Some(v) = m.ptx_version {
        if v < min_ptx(arch) {
            diags.push(module_diag(format!(
                "ptx({v}) is too old for {arch}, which needs PTX {} or newer",
                min_ptx(arch)
            )));
        }
    }
}

pub(crate) fn module_diag(message: String) -> Diagnostic {
    Diagnostic {
        function: String::new(),
        block: None,
        inst: None,
        inst_text: None,
        loc: None,
        message,
    }
}

/// Check every instruction and block parameter of a GPU function against each
/// arch in `archs`. Ids out of range are skipped (the verifier reports them).
pub(crate) fn check_function(
    m: &Module,
    f: &Function,
    archs: &[Arch],
    ptx: Option<PtxVersion>,
    diags: &mut Vec<Diagnostic>,
) {
    if let Some(k) = f.kind.kernel_info() {
        for &arch in archs {
            check_kernel_limits(m, f, k, arch, diags);
        }
    }
    let missing = |needs: &[Feature]| -> Vec<String> {
        let mut out = Vec::new();
        for &arch in archs {
            let p = ptx.unwrap_or_else(|| arch.default_ptx());
            for feat in needs {
                if !feat.available(arch, p) {
                    out.push(format!(
                        "{} needs {} and PTX {}, but this function is compiled for {arch} with PTX {p}",
                        feat.name, feat.arch, feat.ptx
                    ));
                }
            }
        }
        out.dedup();
        out
    };
    for b in &f.layout {
        let Some(bd) = f.blocks.get(b.index()) else {
            continue;
        };
        let bf16_param = bd
            .params
            .iter()
            .filter_map(|v| f.values.get(v.index()))
            .any(|v| mentions_bf16(&v.ty));
        if bf16_param {
            for message in missing(&[BF16]) {
                diags.push(block_diag(
                    f,
                    *b,
                    format!("bf16 block parameter: {message}"),
                ));
            }
        }
        for i in &bd.insts {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            let needs = inst_requirements(f, d);
            for message in missing(&needs) {
                diags.push(inst_diag(f, *b, *i, d, message));
            }
        }
    }
    let bf16_return = f.returns.iter().any(mentions_bf16);
    if bf16_return {
        for message in missing(&[BF16]) {
            diags.push(Diagnostic {
                function: f.name.clone(),
                block: None,
                inst: None,
                inst_text: None,
                loc: f.loc.clone(),
                message: format!("bf16 return type: {message}"),
            });
        }
    }
}

/// A kernel's resource metadata against one arch's limits.
fn check_kernel_limits(
    m: &Module,
    f: &Function,
    k: &crate::ir::KernelInfo,
    arch: Arch,
    diags: &mut Vec<Diagnostic>,
) {
    let mut err = |message: String| {
        diags.push(Diagnostic {
            function: f.name.clone(),
            block: None,
            inst: None,
            inst_text: None,
            loc: f.loc.clone(),
            message,
        })
    };
    if let Some([x, y, z]) = k.cluster {
        if arch < CLUSTER.arch {
            err(format!(
                "cluster({x}, {y}, {z}) needs {} (thread block clusters); {arch} has none",
                CLUSTER.arch
            ));
        }
    }
    if let Some(n) = k.max_registers {
        let floor = min_max_registers(m, f, arch);
        if n < floor && n >= MIN_MAX_REGISTERS {
            err(format!(
                "max_registers({n}) is below {floor}, the fewest registers ptxas accepts for tensor-core MMA on {arch}"
            ));
        }
    }
    let static_bytes = crate::verify::kernel_static_shared(m, f);
    let dynamic = u64::from(k.shared_bytes);
    let max = max_shared_bytes(arch);
    if static_bytes.saturating_add(dynamic) > max {
        err(format!(
            "{static_bytes} bytes of static plus {dynamic} bytes of dynamic shared memory exceed {arch}'s per-block maximum of {max} bytes"
        ));
    }
    if let Some(n) = k.min_blocks {
        let n = u64::from(n);
        if n > max_blocks_per_sm(arch) {
            err(format!(
                "min_blocks({n}) exceeds the {} resident blocks per SM of {arch}",
                max_blocks_per_sm(arch)
            ));
        } else if let Some([x, y, z]) = k.max_threads.or(k.exact_threads) {
            let threads = u64::from(x)
                .saturating_mul(u64::from(y))
                .saturating_mul(u64::from(z));
            let warps_threads = threads.div_ceil(32) * 32;
            if n.saturating_mul(warps_threads) > max_threads_per_sm(arch) {
                err(format!(
                    "min_blocks({n}) blocks of {threads} threads ({warps_threads} in whole warps) exceed the {} resident threads per SM of {arch}",
                    max_threads_per_sm(arch)
                ));
            }
        }
    }
}

fn block_diag(f: &Function, b: BlockId, message: String) -> Diagnostic {
    Diagnostic {
        function: f.name.clone(),
        block: Some(b),
        inst: None,
        inst_text: None,
        loc: f.loc.clone(),
        message,
    }
}

fn inst_diag(f: &Function, b: BlockId, i: InstId, d: &InstData, message: String) -> Diagnostic {
    Diagnostic {
        function: f.name.clone(),
        block: Some(b),
        inst: Some(i),
        inst_text: Some(print_inst(f, i)),
        loc: d.loc.clone(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row is consistent: its default PTX is one LLVM emits, the arch's
    /// `.target` accepts it, and it covers every feature gated at the arch.
    #[test]
    fn target_table_rows_are_consistent() {
        let table = target_table();
        assert_eq!(
            table.iter().map(|r| r.arch).collect::<Vec<_>>(),
            Arch::ALL.to_vec()
        );
        for row in &table {
            assert!(ptx_versions().contains(&row.default_ptx), "{}", row.arch);
            assert!(row.default_ptx >= row.min_ptx, "{}", row.arch);
            for f in FEATURES.iter().filter(|f| f.arch == row.arch) {
                assert!(
                    row.features.contains(&f.name) || f.ptx > row.default_ptx,
                    "{}: {}",
                    row.arch,
                    f.name
                );
            }
        }
        let h100 = ArchFacts::of(Arch::Sm90a);
        assert!(h100.arch_specific && h100.features.contains(&WGMMA.name));
        assert!(!ArchFacts::of(Arch::Sm90).features.contains(&WGMMA.name));
        assert!(ArchFacts::of(Arch::Sm80).features.contains(&CP_ASYNC.name));
        assert!(!ArchFacts::of(Arch::Sm75).features.contains(&CP_ASYNC.name));
    }

    #[test]
    fn ptx_versions_are_those_llvm_emits() {
        let v = ptx_versions();
        assert_eq!(v.first(), Some(&PtxVersion::new(6, 0)));
        assert_eq!(v.last(), Some(&PtxVersion::new(8, 5)));
        assert_eq!(v.len(), 6 + 9 + 6);
        assert!(!v.contains(&PtxVersion::new(6, 6)));
    }
}
