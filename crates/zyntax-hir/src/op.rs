//! The instruction set: one `Op` enum plus the table of mnemonics used by the
//! printer and parser. Adding an op: see `docs/add-an-hir-op.md`.
//!
//! Operand conventions (the verifier enforces them; `args` order as listed):
//!
//! | op | args | results |
//! |---|---|---|
//! | `const` | – | 1 scalar (type given) |
//! | binary (`add` … `shr`) | a, b (same type) | 1, type of a |
//! | unary (`neg` … `ceil`) | a | 1, type of a |
//! | `fma` | a, b, c (float) | 1 |
//! | `cmp.*` | a, b | 1 bool |
//! | `select` | cond, a, b | 1 |
//! | `cast`, `bitcast` | a | 1 (type given) |
//! | `load` | ptr | 1, pointee |
//! | `store` | ptr, value | – |
//! | `ptr_add` | ptr, index (int) | 1, ptr type |
//! | `ptr_cast` | ptr | 1 (type given) |
//! | `alloca`, `shared_alloc`, `dyn_shared` | – | 1 ptr |
//! | `extract` / `insert` | vec / vec, scalar | 1 |
//! | special registers | – | 1 u32 |
//! | `barrier`, `fence.*`, `cp.async.commit`, `cp.async.wait` | – | – |
//! | `warp_sync` | mask (u32) | – |
//! | `atomic.<op>.<scope>` | ptr, value | 1 old value |
//! | `atomic.cas.<scope>` | ptr, expected, desired | 1 old value |
//! | `shfl.<mode>` | mask, value, lane/delta/lanemask (u32) | 1 |
//! | `vote.ballot` / `vote.any` / `vote.all` | mask, pred | 1 u32 / bool |
//! | `match.any` / `match.all` | mask, value | u32 / u32, bool |
//! | `mma.load.<layout>` | ptr, ldm (u32) | 1 frag |
//! | `mma.fill` | scalar | 1 acc frag |
//! | `mma` | a, b, c | 1 acc frag |
//! | `mma.store.<layout>` | ptr, frag, ldm | – |
//! | `cp.async.<hint>.<bytes>` | dst (shared ptr), src (global ptr) | – |
//! | `mbarrier.init` / `.inval` | bar (`ptr<shared, u64>`), count (u32) / bar | – |
//! | `mbarrier.arrive` / `.arrive_expect_tx` | bar / bar, tx bytes (u32) | 1 u64 state |
//! | `mbarrier.complete_tx` | bar, tx bytes (u32) | – |
//! | `mbarrier.test_wait` | bar, state (u64) | 1 bool |
//! | `mbarrier.try_wait_parity` | bar, parity (u32), suspend-time hint in ns (u32) | 1 bool |
//! | `fence.proxy_async`, `fence.mbarrier_init` | – | – |
//! | `bfe` / `bfi` | a, pos, len / a, b, pos, len | 1, type of a / of b |
//! | `prmt`, `shf.{l,r}.{wrap,clamp}` | a, b, c (u32) | 1 u32 |
//! | `red.<op>.<scope>` | ptr, value | – |
//! | `load.acquire.<scope>` / `store.release.<scope>` | ptr / ptr, value | 1 / – |
//! | `fence.acq_rel.<scope>`, `compiler_fence` | – | – |
//! | `redux.<op>` | mask, value (u32/i32) | 1, type of value |
//! | `mma.sync.<shape>.<elem>` | a, b, c (per-lane registers) | 1, type of c |
//! | `ldmatrix.x<n>[.trans]` | ptr (shared) | 1 u32 / vec<u32, n> |
//! | `stmatrix.x<n>[.trans]` | ptr (shared), value (u32 / vec<u32, n>) | – |
//! | `ex2.approx` / `rcp.approx` / `tanh.approx` | a (f32) | 1 f32 |
//! | `load.<cop>` / `store.<cop>` | ptr (global) / ptr, value | 1 pointee / – |
//! | `wgmma.desc.<swizzle>` | ptr (shared), leading and stride byte offsets (u32) | 1 u64 descriptor |
//! | `wgmma.m64n<N>.<a>.<b>[.trans_a][.trans_b][.neg_a][.neg_b]` | acc, a (u64 descriptor or vec<u32, 4>), b (u64 descriptor), scale_d (bool) | 1, type of acc |
//! | `wgmma.zero` | – | 1 accumulator of zeros (type given) |
//! | `wgmma.fence`, `wgmma.commit_group`, `wgmma.wait_group.<n>` | – | – |
//! | `setmaxnreg.{inc,dec}.<count>` | – | – |
//! | `elect.sync` | – | 1 bool |
//! | `tma.load[.multicast]` | dst (shared ptr), tmap, bar, 1-5 coords (i32/u32) [, cta mask (u16)] | – |
//! | `tma.store` / `tma.reduce.<op>` | tmap, src (shared ptr), 1-5 coords (i32/u32) | – |
//! | `bulk.copy.g2s` / `bulk.copy.s2g` | dst, src, bytes (u32) [, bar] | – |
//! | `bulk.reduce.<op>` | dst (global ptr), src (shared ptr), bytes (u32) | – |
//! | `bulk.commit_group`, `bulk.wait_group[.read] <n>` | – | – |
//! | `prefetch.tensormap` | tmap | – |
//! | `bar.sync` / `bar.arrive` (immediates id, count) | – | – |
//! | `cvt_pack.<fmt>` / `cvt_unpack.<fmt>` | lo, hi (f32) / packed (u16) | 1 packed pair / vec<f16, 2> |
//! | cluster special registers | – | 1 u32 (`is_explicit_cluster`: bool) |
//! | `cluster_barrier.*`, `griddepcontrol.*`, `grid_sync` | – | – |
//! | `mapa` | ptr (`ptr<shared, T>`), rank (u32) | 1 `ptr<shared_cluster, T>` |
//! | `mbarrier.arrive_cluster[_relaxed]` | bar (`ptr<shared_cluster, u64>`) | – |
//! | `call @f` | arguments | callee's returns |
//! | `jump` / `br` / `return` / `unreachable` | – / cond / values / – | – |

use crate::types::{FragType, Layout};
use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[derive(::serde::Serialize, ::serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The spellings, in `ALL` order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            pub fn from_name(s: &str) -> Option<$name> {
                match s { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl $crate::imm::ImmValue for $name {
            const KIND: $crate::imm::ImmKind = $crate::imm::ImmKind::Enum($name::NAMES);
            fn from_imm(i: $crate::imm::Imm) -> Option<Self> {
                match i {
                    $crate::imm::Imm::Enum(k) => $name::ALL.get(k).copied(),
                    _ => None,
                }
            }
            fn to_imm(&self) -> $crate::imm::Imm {
                $crate::imm::Imm::Enum(*self as usize)
            }
        }
    };
}
pub(crate) use named_enum;

named_enum!(
    /// Operations on a shared-memory transaction barrier (`mbarrier`, a `u64` in shared memory).
    MbarrierOp {
        Init => "init", Arrive => "arrive", ArriveExpectTx => "arrive_expect_tx",
        CompleteTx => "complete_tx", TestWait => "test_wait", TryWaitParity => "try_wait_parity",
        Inval => "inval",
    }
);

named_enum!(
    /// Cluster barrier steps (issue 13 item 4): `barrier.cluster.arrive`
    /// (`.relaxed`: without release ordering) and `barrier.cluster.wait`.
    ClusterBarrierOp { Arrive => "arrive", ArriveRelaxed => "arrive_relaxed", Wait => "wait" }
);

named_enum!(
    /// Programmatic dependent launch (issue 13 item 5): `griddepcontrol.*`.
    GriddepOp { LaunchDependents => "launch_dependents", Wait => "wait" }
);

named_enum!(
    /// A grid dimension.
    Dim { X => "x", Y => "y", Z => "z" }
);

named_enum!(
    /// Memory scope of fences and atomics: CTA (`.cta`), GPU (`.gpu`), system (`.sys`).
    Scope { Block => "block", Device => "device", System => "system" }
);

// `BinOp` and `UnOp` are declared by their rows in the instruction table
// (`table/scalar.rs`): a new scalar op is one line there.
pub use crate::table::{BinOp, UnOp};

named_enum!(
    /// Comparisons. Integer comparisons follow signedness; float comparisons are ordered
    /// (false if either side is NaN) except `ne`, which is unordered (true on NaN).
    CmpOp { Eq => "eq", Ne => "ne", Lt => "lt", Le => "le", Gt => "gt", Ge => "ge" }
);

named_enum!(
    /// Read-modify-write atomics (CAS is a separate op). `inc`/`dec` are PTX's
    /// wrapping forms on u32: `inc`: old >= v ? 0 : old+1; `dec`: (old == 0 || old > v) ? v : old-1.
    AtomicOp {
        Add => "add", Sub => "sub", Min => "min", Max => "max", And => "and", Or => "or",
        Xor => "xor", Exch => "exch", Inc => "inc", Dec => "dec",
    }
);

named_enum!(
    /// Warp shuffle modes.
    ShflMode { Idx => "idx", Up => "up", Down => "down", Xor => "xor" }
);

named_enum!(
    /// Warp vote modes.
    VoteMode { Ballot => "ballot", Any => "any", All => "all" }
);

named_enum!(
    /// Warp match modes.
    MatchMode { Any => "any", All => "all" }
);

named_enum!(
    /// Cache hint of `cp.async`: `ca` caches in L1 and L2, `cg` in L2 only (16-byte copies only).
    CacheHint { Ca => "ca", Cg => "cg" }
);

named_enum!(
    /// PTX bit-field, byte-permute and funnel-shift instructions (issue 12): see
    /// `docs/semantics.md` for their exact definitions.
    BitOp {
        Bfe => "bfe", Bfi => "bfi", Prmt => "prmt",
        ShfLWrap => "shf.l.wrap", ShfLClamp => "shf.l.clamp",
        ShfRWrap => "shf.r.wrap", ShfRClamp => "shf.r.clamp",
    }
);

named_enum!(
    /// `redux.sync` reductions over the lanes of a mask (sm_80): on u32 or i32
    /// (`min`/`max` by signedness; `and`/`or`/`xor` bitwise).
    ReduxOp { Add => "add", Min => "min", Max => "max", And => "and", Or => "or", Xor => "xor" }
);

named_enum!(
    /// Reductions of `cp.reduce.async.bulk.tensor` (issue 13 item 2); the
    /// element type is the tensor map's.
    BulkRedOp { Add => "add", Min => "min", Max => "max" }
);

named_enum!(
    /// PTX cache operator of a global load or store (issue 12 item 3). Loads:
    /// `ca` (L1 and L2), `cg` (L2 only), `cs` (streaming, evict first), `lu`
    /// (last use), `cv` (don't cache, fetch again); stores: `wb` (write back),
    /// `cg`, `cs`, `wt` (write through). `evict_first` / `evict_last` (loads
    /// and stores, sm_80) keep the default operator and give the access an L2
    /// eviction priority through a `createpolicy` cache hint. They change
    /// speed, never values.
    CacheOp {
        Ca => "ca", Cg => "cg", Cs => "cs", Lu => "lu", Cv => "cv", Wb => "wb", Wt => "wt",
        EvictFirst => "evict_first", EvictLast => "evict_last",
    }
);

impl CacheOp {
    /// Whether loads (else stores) take this operator.
    pub fn for_load(self) -> bool {
        matches!(
            self,
            CacheOp::Ca | CacheOp::Cg | CacheOp::Cs | CacheOp::Lu | CacheOp::Cv
        ) || self.is_l2_hint()
    }
    pub fn for_store(self) -> bool {
        matches!(self, CacheOp::Wb | CacheOp::Cg | CacheOp::Cs | CacheOp::Wt) || self.is_l2_hint()
    }
    /// An L2 eviction priority (`createpolicy` + `.L2::cache_hint`), not a PTX cache operator.
    pub fn is_l2_hint(self) -> bool {
        matches!(self, CacheOp::EvictFirst | CacheOp::EvictLast)
    }
}

named_enum!(
    /// Fast approximate f32 math (issue 12 item 3): PTX's `ex2.approx`,
    /// `rcp.approx`, `tanh.approx` (sm_80+), and `ex2.approx.ftz` (subnormal
    /// operands and results flushed to zero: the one-instruction form that
    /// softmax kernels want); error bounds in docs/semantics.md.
    ApproxOp { Ex2 => "ex2", Rcp => "rcp", Tanh => "tanh", Ex2Ftz => "ex2_ftz" }
);

impl ApproxOp {
    /// The PTX instruction (f32 operand and result).
    pub fn ptx(self) -> &'static str {
        match self {
            ApproxOp::Ex2 => "ex2.approx.f32",
            ApproxOp::Rcp => "rcp.approx.f32",
            ApproxOp::Tanh => "tanh.approx.f32",
            ApproxOp::Ex2Ftz => "ex2.approx.ftz.f32",
        }
    }
}

named_enum!(
    /// Packed pair formats of `cvt_pack` / `cvt_unpack` (issue 12 item 3): the
    /// first operand goes to lane 0 (the low half), the second to lane 1.
    /// `f16x2`/`bf16x2` give `vec<f16|bf16, 2>`; the fp8 pairs (`e4m3x2`,
    /// `e5m2x2`, saturated to the largest finite value) a `u16`.
    PackFmt { F16x2 => "f16x2", Bf16x2 => "bf16x2", E4m3x2 => "e4m3x2", E5m2x2 => "e5m2x2" }
);

impl PackFmt {
    /// The type of a packed pair.
    pub fn packed_type(self) -> crate::types::Type {
        use crate::types::{ScalarType as S, Type};
        match self {
            PackFmt::F16x2 => Type::Vector(S::F16, 2),
            PackFmt::Bf16x2 => Type::Vector(S::BF16, 2),
            PackFmt::E4m3x2 | PackFmt::E5m2x2 => Type::Scalar(S::U16),
        }
    }
    pub fn is_fp8(self) -> bool {
        matches!(self, PackFmt::E4m3x2 | PackFmt::E5m2x2)
    }
}

named_enum!(
    /// Shape (M x N x K) of a warp-level `mma.sync`.
    WarpShape { M16n8k16 => "m16n8k16", M16n8k8 => "m16n8k8", M16n8k32 => "m16n8k32", M8n8k4 => "m8n8k4" }
);

named_enum!(
    /// Element type of the A and B operands of `mma.sync` (one type for both).
    /// `tf32`, `e4m3` and `e5m2` have no HIR scalar type: those operands travel
    /// in packed `u32` registers, like every sub-64-bit input (see docs/semantics.md).
    MmaElem {
        F16 => "f16", Bf16 => "bf16", Tf32 => "tf32", S8 => "s8", U8 => "u8",
        E4m3 => "e4m3", E5m2 => "e5m2", F64 => "f64",
    }
);

named_enum!(
    /// Swizzle mode of a wgmma shared-memory matrix descriptor (bits 62-63: 0, 3, 2, 1).
    Swizzle { None => "none", B32 => "32B", B64 => "64B", B128 => "128B" }
);

impl Swizzle {
    /// The descriptor's 2-bit layout-type field.
    pub fn field(self) -> u64 {
        match self {
            Swizzle::None => 0,
            Swizzle::B128 => 1,
            Swizzle::B64 => 2,
            Swizzle::B32 => 3,
        }
    }
}

/// One `wgmma.mma_async` form (issue 13 item 1): M = 64, N = `n`, K from the
/// input types (f16/bf16 16, tf32 8, 8-bit 32).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Wgmma {
    pub n: u32,
    /// Element types of A and B (equal except e4m3/e5m2 and s8/u8 mixes).
    pub a: MmaElem,
    pub b: MmaElem,
    /// MN-major (transposed) A / B in shared memory (f16/bf16 only).
    pub trans_a: bool,
    pub trans_b: bool,
    /// Negate A / B (PTX's imm-scale -1; floating-point inputs only).
    pub neg_a: bool,
    pub neg_b: bool,
}

impl Wgmma {
    /// K of the instruction.
    pub fn k(self) -> u32 {
        256 / self.a.bits()
    }
    /// Whether N is one PTX allows for these inputs (8..256 by 8; s8/u8: 8, 16, 24, then by 16).
    pub fn n_allowed(self) -> bool {
        let int = matches!(self.a, MmaElem::S8 | MmaElem::U8);
        (8..=256).contains(&self.n)
            && self.n.is_multiple_of(8)
            && (!int || self.n <= 24 || self.n.is_multiple_of(16))
    }
    /// Accumulator element types the inputs allow (f32 first).
    pub fn accumulators(self) -> &'static [crate::types::ScalarType] {
        use crate::types::ScalarType as S;
        match self.a {
            MmaElem::F16 | MmaElem::E4m3 | MmaElem::E5m2 => &[S::F32, S::F16],
            MmaElem::Bf16 | MmaElem::Tf32 => &[S::F32],
            MmaElem::S8 | MmaElem::U8 => &[S::I32],
            MmaElem::F64 => &[],
        }
    }
}

impl fmt::Display for Wgmma {
    /// Its mnemonic (from the instruction table).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Op::Wgmma(*self).mnemonic())
    }
}

impl WarpShape {
    /// (M, N, K)
    pub fn dims(self) -> (u32, u32, u32) {
        match self {
            WarpShape::M16n8k16 => (16, 8, 16),
            WarpShape::M16n8k8 => (16, 8, 8),
            WarpShape::M16n8k32 => (16, 8, 32),
            WarpShape::M8n8k4 => (8, 8, 4),
        }
    }
}

impl MmaElem {
    /// The one shape each input type has in zyntax's `mma.sync`.
    pub fn shape(self) -> WarpShape {
        match self {
            MmaElem::F16 | MmaElem::Bf16 => WarpShape::M16n8k16,
            MmaElem::Tf32 => WarpShape::M16n8k8,
            MmaElem::S8 | MmaElem::U8 | MmaElem::E4m3 | MmaElem::E5m2 => WarpShape::M16n8k32,
            MmaElem::F64 => WarpShape::M8n8k4,
        }
    }
    /// Bits of one input element.
    pub fn bits(self) -> u32 {
        match self {
            MmaElem::F16 | MmaElem::Bf16 => 16,
            MmaElem::Tf32 => 32,
            MmaElem::S8 | MmaElem::U8 | MmaElem::E4m3 | MmaElem::E5m2 => 8,
            MmaElem::F64 => 64,
        }
    }
    /// Per-lane types of A, B and C/D for accumulator element `acc`: inputs
    /// narrower than 64 bits travel packed in `u32` registers (`vec<u32, n>`),
    /// f64 in one `f64`; accumulators are `vec<acc, 4>` (`vec<f64, 2>` for f64).
    pub fn fragment_types(self, acc: crate::types::ScalarType) -> [crate::types::Type; 3] {
        use crate::types::{ScalarType as S, Type};
        let packed = |n| Type::Vector(S::U32, n);
        match self {
            MmaElem::F64 => [Type::F64, Type::F64, Type::Vector(S::F64, 2)],
            _ => [packed(4), packed(2), Type::Vector(acc, 4)],
        }
    }
    /// The accumulator element types it accepts.
    pub fn accumulators(self) -> &'static [crate::types::ScalarType] {
        use crate::types::ScalarType as S;
        match self {
            MmaElem::F16 => &[S::F32, S::F16],
            MmaElem::Bf16 | MmaElem::Tf32 | MmaElem::E4m3 | MmaElem::E5m2 => &[S::F32],
            MmaElem::S8 | MmaElem::U8 => &[S::I32],
            MmaElem::F64 => &[S::F64],
        }
    }
}

named_enum!(
    /// Optimization level of a function. `Olatency` is O3 tuned for the latency of
    /// one call (see the critical-path optimizer).
    OptLevel { O0 => "O0", O1 => "O1", O2 => "O2", O3 => "O3", Os => "Os", Olatency => "Olatency" }
);

#[allow(clippy::derivable_impls)] // the variants come from a macro without `#[default]`
impl Default for OptLevel {
    fn default() -> OptLevel {
        OptLevel::O3
    }
}

/// A constant's value. Integers are stored as the two's-complement bits truncated
/// to the type's width (sign-extended to i64 for signed types); floats as the bits
/// of the `f64` holding the value exactly, so that equality and hashing are exact.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConstValue {
    Int(i64),
    Float(u64),
    Bool(bool),
}

impl ConstValue {
    pub fn float(v: f64) -> ConstValue {
        ConstValue::Float(v.to_bits())
    }
    pub fn as_f64(self) -> Option<f64> {
        match self {
            ConstValue::Float(b) => Some(f64::from_bits(b)),
            _ => None,
        }
    }
}

/// An HIR instruction's operation and immediates. Operands are SSA values kept
/// in `InstData::args`; branch targets in `InstData::targets`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    // --- scalar
    Const(ConstValue),
    Binary(BinOp),
    Unary(UnOp),
    Fma,
    Cmp(CmpOp),
    Select,
    /// Numeric conversion (int<->int by the source's signedness, int<->float, float<->float, bool->int).
    Cast,
    /// Reinterpret the bits of a value as another type of the same size.
    Bitcast,
    /// Read one lane of a vector.
    Extract(u32),
    /// Replace one lane of a vector.
    Insert(u32),

    // --- memory
    Load,
    Store,
    PtrAdd,
    /// Address-space cast to or from `generic`, or a change of pointee type.
    PtrCast,
    /// Per-thread stack memory: `count` elements in `local`.
    Alloca {
        elem: crate::types::Type,
        count: u64,
    },
    /// Static shared memory of the block: `count` elements, aligned to
    /// `align` bytes (0: the default, see [`shared_align`]).
    SharedAlloc {
        elem: crate::types::Type,
        count: u64,
        #[serde(default, skip_serializing_if = "is_zero")]
        align: u32,
    },
    /// Pointer to the block's dynamic shared memory (size set at launch),
    /// aligned to `align` bytes (0: the default).
    DynShared {
        elem: crate::types::Type,
        #[serde(default, skip_serializing_if = "is_zero")]
        align: u32,
    },

    // --- GPU: indices
    ThreadIdx(Dim),
    BlockIdx(Dim),
    BlockDim(Dim),
    GridDim(Dim),
    LaneId,

    // --- GPU: synchronization
    Barrier,
    Fence(Scope),
    WarpSync,

    // --- GPU: atomics
    Atomic {
        op: AtomicOp,
        scope: Scope,
    },
    AtomicCas {
        scope: Scope,
    },

    // --- GPU: warp collectives
    Shfl {
        mode: ShflMode,
        width: u32,
    },
    Vote(VoteMode),
    Match(MatchMode),

    // --- GPU: tensor cores
    MmaLoad {
        frag: FragType,
        layout: Layout,
    },
    MmaFill,
    Mma,
    MmaStore {
        layout: Layout,
    },

    // --- GPU: async copy
    CpAsync {
        bytes: u32,
        cache: CacheHint,
    },
    CpAsyncCommit,
    CpAsyncWait(u32),

    // --- GPU: Hopper barriers (issue 13)
    Mbarrier(MbarrierOp),
    /// `fence.proxy.async`: orders generic-proxy shared-memory accesses against the async proxy (TMA, wgmma).
    FenceProxyAsync,
    /// `fence.mbarrier_init.release.cluster`: makes `mbarrier.init` visible to the cluster and the async proxy.
    FenceMbarrierInit,
    // --- GPU: warp MMA (issue 12 items 1-2)
    /// `D = A * B + C` over the warp, per-lane register fragments in PTX's layouts.
    MmaSync {
        shape: WarpShape,
        elem: MmaElem,
    },
    /// Load `num` (1, 2, 4) 8x8 matrices of 16-bit elements from shared memory.
    Ldmatrix {
        num: u32,
        trans: bool,
    },
    /// Store `num` (1, 2, 4) 8x8 matrices of 16-bit elements to shared memory (sm_90).
    Stmatrix {
        num: u32,
        trans: bool,
    },
    // --- GPU: fast approximate math (issue 12 item 3)
    Approx(ApproxOp),
    /// A global load with a cache operator (`ld.global.<cop>[.v2/.v4]`).
    LoadCached(CacheOp),
    /// A global store with a cache operator (`st.global.<cop>[.v2/.v4]`).
    StoreCached(CacheOp),

    // --- calls and control flow
    Call(String),
    Jump,
    Branch,
    Return,
    Unreachable,

    // --- issue 12 (warp-sync): bit ops and the scoped memory model
    /// `bfe`/`bfi`/`prmt`/`shf.*`: pure bit manipulation with PTX's definitions.
    Bits(BitOp),
    /// `red.<op>.<scope>`: an atomic that returns nothing.
    Red {
        op: AtomicOp,
        scope: Scope,
    },
    /// `ld.acquire.<scope>`.
    LoadAcquire(Scope),
    /// `st.release.<scope>`.
    StoreRelease(Scope),
    /// `fence.acq_rel.<scope>` (the plain `fence.<scope>` is `fence.sc`).
    FenceAcqRel(Scope),
    /// Orders memory accesses of this thread for the compiler only; emits no instruction.
    CompilerFence,
    /// `redux.sync.<op>`: the reduction of `value` over the lanes in `mask`.
    Redux(ReduxOp),

    // --- issue 13 items 1 and 5: warpgroup MMA (sm_90a) and warp specialisation
    /// A shared-memory matrix descriptor (u64) for `wgmma` from a shared pointer.
    WgmmaDesc(Swizzle),
    /// `wgmma.mma_async`: D = scale_d * acc + A * B over the warpgroup.
    Wgmma(Wgmma),
    /// An accumulator of zeros (its type is the result's).
    WgmmaZero,
    WgmmaFence,
    WgmmaCommit,
    /// `wgmma.wait_group n`: at most n committed groups still pending.
    WgmmaWait(u32),
    /// `setmaxnreg.{inc,dec}.sync.aligned.u32 count` (sm_90a).
    Setmaxnreg {
        count: u32,
        inc: bool,
    },
    /// `elect.sync`: true in exactly one active lane of the warp (the lowest).
    ElectSync,
    // --- GPU: TMA and bulk copies (issue 13 item 2); coordinates innermost first
    /// `cp.async.bulk.tensor.<n>d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`
    /// (`.multicast::cluster` with a u16 CTA mask last).
    TmaLoad {
        multicast: bool,
    },
    /// `cp.async.bulk.tensor.<n>d.global.shared::cta.tile.bulk_group`.
    TmaStore,
    /// `cp.reduce.async.bulk.tensor.<n>d.global.shared::cta.<op>.tile.bulk_group`.
    TmaReduce(BulkRedOp),
    /// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`.
    BulkCopyG2S,
    /// `cp.async.bulk.global.shared::cta.bulk_group`.
    BulkCopyS2G,
    /// `cp.async.bulk.commit_group`.
    BulkCommitGroup,
    /// `cp.async.bulk.wait_group[.read] pending`.
    BulkWaitGroup {
        pending: u32,
        read: bool,
    },
    /// `prefetch.tensormap`.
    PrefetchTensormap,
    // --- issue 12 (rest): named barriers and packed conversions
    /// `bar.sync id, count` (`arrive: false`) or `bar.arrive id, count`:
    /// named barrier `id` (1..=15) completes when `count` threads (whole warps) arrived.
    NamedBarrier {
        arrive: bool,
        id: u32,
        count: u32,
    },
    /// Two f32 rounded to nearest even and packed into one 32- or 16-bit pair.
    CvtPack(PackFmt),
    /// A packed fp8 pair (`u16`) widened exactly to `vec<f16, 2>` (sm_89).
    CvtUnpack(PackFmt),
    // --- issue 13 items 4-5, issue 12 item 6 (h13-cluster): clusters, PDL, grid sync
    /// `%clusterid.<dim>`: the cluster's index in the grid.
    ClusterIdx(Dim),
    /// `%cluster_nctaid.<dim>`: blocks per cluster.
    ClusterDim(Dim),
    /// `%cluster_ctaid.<dim>`: the block's index in its cluster.
    ClusterBlockIdx(Dim),
    /// `%nclusterid.<dim>`: clusters per grid.
    ClusterGridDim(Dim),
    /// `%cluster_ctarank`: the block's linear rank in its cluster.
    ClusterCtaRank,
    /// `%cluster_nctarank`: blocks in the cluster.
    ClusterNctaRank,
    /// `%is_explicit_cluster`: whether the launch declared a cluster shape.
    IsExplicitCluster,
    /// `barrier.cluster.{arrive[.relaxed], wait}`.
    ClusterBarrier(ClusterBarrierOp),
    /// `mapa`: a shared pointer of this block → the same address in another block of the cluster.
    Mapa,
    /// `mbarrier.arrive.release.cluster.shared::cluster`: one arrival on a (remote) barrier.
    MbarrierArriveCluster,
    /// `mbarrier.arrive.shared::cluster` (release at CTA scope): one arrival on a
    /// (remote) barrier that orders nothing for the other block (no `MEMBAR.GPU`).
    MbarrierArriveClusterRelaxed,
    /// `griddepcontrol.{launch_dependents, wait}`.
    Griddep(GriddepOp),
    /// Grid-wide barrier (needs a cooperative launch).
    GridSync,
    /// `cp.reduce.async.bulk.global.shared::cta.bulk_group.<op>.<type>`: the
    /// element type is the pointers' scalar.
    BulkReduce(BulkRedOp),
    /// Pointer to the module global `@name` (see [`crate::GlobalVar`]).
    GlobalAddr(String),
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

/// The largest alignment a shared allocation may declare (wgmma's 128-byte
/// swizzle atoms and TMA destinations need 1024 / 128 bytes).
pub const MAX_SHARED_ALIGN: u32 = 1024;

/// The alignment in bytes a shared allocation of `elem` gets: the declared
/// `align`, the element's own, and at least 16 (vector and `cp.async` accesses).
pub fn shared_align(elem: &crate::types::Type, align: u32) -> u64 {
    elem.align_bytes().max(16).max(u64::from(align))
}

/// Broad classes of ops, used by the verifier's placement rules and the docs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OpClass {
    Scalar,
    Memory,
    Gpu,
    Call,
    Terminator,
}

impl Op {
    /// The op's class, from its row in [`crate::table::OPS`].
    pub fn class(&self) -> OpClass {
        self.def().class
    }

    pub fn is_terminator(&self) -> bool {
        self.class() == OpClass::Terminator
    }

    /// GPU-only ops may not appear in host functions.
    pub fn is_gpu(&self) -> bool {
        self.class() == OpClass::Gpu
    }

    /// Whether the op may write memory, synchronize or call (so it is never
    /// removed or reordered by passes); terminators too.
    pub fn has_side_effects(&self) -> bool {
        self.def().has_side_effects()
    }

    /// Warp-collective ops: every thread named in the mask (all 32 for MMA) must execute them together.
    pub fn is_warp_collective(&self) -> bool {
        self.def().is_warp_collective()
    }

    /// The mnemonic as written in `.zir`, without operands and types
    /// (e.g. `add`, `atomic.cas.device`, `shfl.down`, `cp.async.cg.16`, `call`):
    /// the table's pattern with the immediates that are part of it filled in.
    pub fn mnemonic(&self) -> String {
        let d = self.def();
        let values = d.imms.map(|x| (x.values)(self)).unwrap_or_default();
        Op::mnemonic_in(d, &values)
    }

    /// The mnemonic of row `d` with immediates `values` (in its `imms` order).
    pub(crate) fn mnemonic_in(d: &crate::table::OpDef, values: &[crate::imm::Imm]) -> String {
        match &d.imms {
            Some(imms) => crate::imm::fill_pattern(crate::table::pattern_of(d), Some(imms), values),
            None => d.mnemonic.into(),
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
