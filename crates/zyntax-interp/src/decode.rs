//! Pre-decoding: one entry function (with every device/host function it calls
//! inlined, so threads never need a call stack) becomes a flat array of
//! compact instructions whose operands are register slots. A value of `n`
//! bytes takes `ceil(n/8)` consecutive 64-bit slots (vectors pack their
//! elements little-endian, as in memory); an MMA fragment takes a per-warp
//! fragment register instead.
//!
//! Each op family decodes in its own file, next to its execution
//! (`scalar.rs`, `memory.rs`, `atomic.rs`, `warp.rs`, ...): `decode_inst`
//! matches an instruction's family and calls the family's `decode_*`
//! function. Control flow (calls, branches, returns) is the decoder's own:
//! it inlines calls and lays out the edges.

use crate::{atomic, cluster, control, cp_async, frag_mma, mbarrier, memory, pack};
use crate::{scalar, special, tma, warp, warp_mma, wgmma};
use crate::{InterpError, Result};
use zyntax_hir::{
    ApproxOp, AtomicOp, BinOp, BitOp, BlockCall, CmpOp, FragType, Function, InstData, InstId,
    Layout, MatchMode, MbarrierOp, MmaElem, Module, Op, PackFmt, ReduxOp, ScalarType, ShflMode,
    Swizzle, Type, UnOp, ValueId, VoteMode, Wgmma,
};

/// Elements of the largest fragment (32x16 or 16x32).
pub const FRAG_ELEMS: usize = 512;

/// Upper bound on decoded instructions after inlining.
const MAX_INSTS: usize = 4_000_000;

/// How a value is held in memory: size, alignment and element layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemTy {
    pub elem: ScalarType,
    /// Elements (1 for scalars); pointers are one u64 element.
    pub n: u32,
    pub size: u32,
    pub align: u32,
}

impl MemTy {
    pub fn of(ty: &Type) -> Option<MemTy> {
        match ty {
            Type::Scalar(s) => {
                let size = s.size_bytes() as u32;
                Some(MemTy {
                    elem: *s,
                    n: 1,
                    size,
                    align: size,
                })
            }
            Type::Ptr(..) => Some(MemTy {
                elem: ScalarType::U64,
                n: 1,
                size: 8,
                align: 8,
            }),
            Type::Vector(s, n) => {
                let size = s.size_bytes() as u32 * n;
                Some(MemTy {
                    elem: *s,
                    n: *n,
                    size,
                    align: size.next_power_of_two().min(16),
                })
            }
            _ => None,
        }
    }
    pub fn slots(&self) -> u32 {
        self.size.div_ceil(8).max(1)
    }
}

/// Register location of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VLoc {
    Slots(u32, u32),
    Frag(u32),
}

#[derive(Clone, Debug, Default)]
pub struct Edge {
    pub pc: u32,
    /// Parallel copy (all sources read before any destination is written).
    pub copies: Vec<(u32, u32)>,
    pub frag_copies: Vec<(u32, u32)>,
}

#[derive(Clone, Copy, Debug)]
pub enum Special {
    Tid(usize),
    Bid(usize),
    BDim(usize),
    GDim(usize),
    Lane,
    // Clusters (h13-cluster).
    ClusterIdx(usize),
    ClusterDim(usize),
    ClusterBlockIdx(usize),
    ClusterGridDim(usize),
    ClusterRank,
    ClusterNRank,
    IsExplicitCluster,
}

#[derive(Clone, Debug)]
pub enum DOp {
    Const {
        dst: u32,
        bits: u64,
    },
    Bin {
        op: BinOp,
        ty: ScalarType,
        dst: u32,
        a: u32,
        b: u32,
    },
    /// Element-wise binary op on a vector of `n` elements.
    BinV {
        op: BinOp,
        mt: MemTy,
        dst: u32,
        a: u32,
        b: u32,
    },
    Un {
        op: UnOp,
        ty: ScalarType,
        dst: u32,
        a: u32,
    },
    UnV {
        op: UnOp,
        mt: MemTy,
        dst: u32,
        a: u32,
    },
    Fma {
        ty: ScalarType,
        dst: u32,
        a: u32,
        b: u32,
        c: u32,
    },
    Cmp {
        op: CmpOp,
        ty: ScalarType,
        dst: u32,
        a: u32,
        b: u32,
    },
    Select {
        dst: u32,
        cond: u32,
        a: u32,
        b: u32,
        n: u32,
    },
    Cast {
        from: ScalarType,
        to: ScalarType,
        dst: u32,
        a: u32,
    },
    /// Copy `n` slots masked to `bits` (bitcast, and pointer casts that keep the space).
    Copy {
        dst: u32,
        a: u32,
        n: u32,
    },
    Extract {
        mt: MemTy,
        lane: u32,
        dst: u32,
        v: u32,
    },
    Insert {
        mt: MemTy,
        lane: u32,
        dst: u32,
        v: u32,
        s: u32,
    },
    Load {
        mt: MemTy,
        dst: u32,
        ptr: u32,
    },
    Store {
        mt: MemTy,
        ptr: u32,
        val: u32,
    },
    PtrAdd {
        dst: u32,
        ptr: u32,
        idx: u32,
        idx_ty: ScalarType,
        elem_size: u64,
    },
    /// Cast to a specific space from generic: checks the pointer is in `space`.
    PtrToSpace {
        dst: u32,
        a: u32,
        space: zyntax_hir::AddrSpace,
    },
    Alloca {
        dst: u32,
        k: u32,
    },
    SharedAlloc {
        dst: u32,
        k: u32,
    },
    /// Pointer to module global `k` (its allocation follows the buffers).
    GlobalAddr {
        dst: u32,
        k: u32,
    },
    DynShared {
        dst: u32,
    },
    Special {
        dst: u32,
        which: Special,
    },
    Barrier,
    Nop,
    WarpSync {
        mask: u32,
    },
    Atomic {
        op: AtomicOp,
        ty: ScalarType,
        dst: u32,
        ptr: u32,
        val: u32,
    },
    Cas {
        ty: ScalarType,
        dst: u32,
        ptr: u32,
        exp: u32,
        des: u32,
    },
    Shfl {
        mode: ShflMode,
        width: u32,
        dst: u32,
        mask: u32,
        val: u32,
        lane: u32,
        n: u32,
    },
    Vote {
        mode: VoteMode,
        dst: u32,
        mask: u32,
        pred: u32,
    },
    Match {
        mode: MatchMode,
        dst: u32,
        dst2: u32,
        mask: u32,
        val: u32,
        n: u32,
    },
    MmaLoad {
        frag: FragType,
        layout: Layout,
        dst: u32,
        ptr: u32,
        ldm: u32,
    },
    MmaFill {
        frag: FragType,
        dst: u32,
        val: u32,
        val_ty: ScalarType,
    },
    Mma {
        a: u32,
        b: u32,
        c: u32,
        d: u32,
        fa: FragType,
        fb: FragType,
        fc: FragType,
    },
    MmaStore {
        layout: Layout,
        frag: FragType,
        ptr: u32,
        src: u32,
        ldm: u32,
    },
    CpAsync {
        bytes: u32,
        dst: u32,
        src: u32,
    },
    CpCommit,
    CpWait(u32),
    /// Issue 13 item 2: a TMA or bulk-copy op, `Program::tma[i]`.
    Tma(u32),
    // h13-cluster: blocks co-scheduled with their cluster (or the whole grid).
    ClusterArrive,
    ClusterWait,
    GridSync,
    Mapa {
        dst: u32,
        ptr: u32,
        rank: u32,
    },
    /// Issue 13; operand and result slots are `NO_SLOT` where the op has none.
    Mbarrier {
        op: MbarrierOp,
        bar: u32,
        a1: u32,
        a2: u32,
        dst: u32,
    },
    // Warp MMA and ldmatrix/stmatrix (issue 12 items 1-2).
    MmaSync {
        elem: MmaElem,
        acc: ScalarType,
        a: u32,
        b: u32,
        c: u32,
        d: u32,
    },
    Ldmatrix {
        num: u32,
        trans: bool,
        dst: u32,
        ptr: u32,
    },
    Stmatrix {
        num: u32,
        trans: bool,
        ptr: u32,
        src: u32,
    },
    /// Fast approximate f32 math (issue 12 item 3).
    Approx {
        op: ApproxOp,
        dst: u32,
        a: u32,
    },
    Jump(u32),
    Br {
        cond: u32,
        t: u32,
        e: u32,
    },
    /// Return from the entry function; `rets` indexes [`Program::ret_lists`].
    Exit {
        rets: u32,
    },
    Unreachable,
    /// A recursive call; indexes [`Program::rec_calls`].
    CallRec {
        call: u32,
    },
    // --- issue 12 (warp-sync)
    /// `bfe`/`bfi`/`prmt`/`shf.*` on operands `a` (unused ones are 0).
    Bits {
        op: BitOp,
        ty: ScalarType,
        dst: u32,
        a: [u32; 4],
    },
    /// An atomic on `n` packed elements (`vec<f16, 2>` add), or one without a
    /// result (`red`, `dst` is `None`).
    AtomicV {
        op: AtomicOp,
        elem: ScalarType,
        n: u32,
        dst: Option<u32>,
        ptr: u32,
        val: u32,
    },
    /// `redux.sync` over the lanes in `mask` (i32 when `signed`).
    Redux {
        op: ReduxOp,
        signed: bool,
        dst: u32,
        mask: u32,
        val: u32,
    },
    // --- issue 13 items 1 and 5: warpgroup MMA, elect
    WgmmaDesc {
        swizzle: Swizzle,
        dst: u32,
        ptr: u32,
        lbo: u32,
        sbo: u32,
    },
    /// `a_regs`: A is a `vec<u32, 4>` fragment (else a descriptor).
    Wgmma {
        form: Wgmma,
        acc: ScalarType,
        c: u32,
        a: u32,
        a_regs: bool,
        b: u32,
        scale_d: u32,
        d: u32,
    },
    /// `n` zero slots.
    Zero {
        dst: u32,
        n: u32,
    },
    Elect {
        dst: u32,
    },
    // --- issue 12 (rest)
    /// Element-wise `fma` of packed half pairs.
    FmaV {
        mt: MemTy,
        dst: u32,
        a: u32,
        b: u32,
        c: u32,
    },
    /// `bar.sync`/`bar.arrive`: the whole warp arrives (32 threads) at barrier `id`.
    NamedBarrier {
        arrive: bool,
        id: u32,
        count: u32,
    },
    CvtPack {
        fmt: PackFmt,
        dst: u32,
        lo: u32,
        hi: u32,
    },
    CvtUnpack {
        fmt: PackFmt,
        dst: u32,
        a: u32,
    },
}

impl DOp {
    /// Ops that need the warp's lanes together.
    pub fn is_collective(&self) -> bool {
        matches!(
            self,
            DOp::WarpSync { .. }
                | DOp::Shfl { .. }
                | DOp::Vote { .. }
                | DOp::Match { .. }
                | DOp::MmaLoad { .. }
                | DOp::Mma { .. }
                | DOp::MmaStore { .. }
                | DOp::Redux { .. }
                | DOp::MmaSync { .. }
                | DOp::Ldmatrix { .. }
                | DOp::Stmatrix { .. }
                | DOp::Wgmma { .. }
                | DOp::Elect { .. }
                | DOp::NamedBarrier { .. }
        )
    }
}

/// An absent operand or result of a [`DOp`].
pub const NO_SLOT: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub struct DInst {
    pub op: DOp,
    /// Where it came from (function index in the module, instruction), for messages.
    pub func: u32,
    pub inst: InstId,
}

#[derive(Clone, Debug)]
pub struct Program {
    pub entry: usize,
    pub insts: Vec<DInst>,
    pub edges: Vec<Edge>,
    pub ret_lists: Vec<Vec<VLoc>>,
    pub nslots: usize,
    pub nfrags: usize,
    pub params: Vec<(VLoc, Type)>,
    pub returns: Vec<Type>,
    /// Static shared allocations: (bytes, name).
    pub shared: Vec<(u64, String)>,
    /// Per-thread allocas: (bytes, name).
    pub locals: Vec<(u64, String)>,
    pub uses_frags: bool,
    /// Recursive call sites (see [`DOp::CallRec`]).
    pub rec_calls: Vec<RecCall>,
    /// TMA and bulk-copy instructions (see [`DOp::Tma`]).
    pub tma: Vec<crate::tma::TmaInst>,
}

/// A recursive call: run `callee` as a nested single-thread activation.
#[derive(Clone, Debug)]
pub struct RecCall {
    pub callee: usize,
    pub args: Vec<VLoc>,
    pub results: Vec<VLoc>,
}

struct Pending {
    edge: usize,
    callee: usize,
    args: Vec<VLoc>,
    results: Vec<VLoc>,
    cont: u32,
    chain: Vec<usize>,
}

enum RetTo {
    Exit,
    Call { cont: u32, results: Vec<VLoc> },
}

struct Decoder<'m> {
    m: &'m Module,
    p: Program,
    pending: Vec<Pending>,
}

fn unsupported<T>(f: &Function, inst: Option<InstId>, msg: impl Into<String>) -> Result<T> {
    let mut s = format!("in @{}", f.name);
    if let Some(i) = inst {
        s.push_str(&format!(", `{}`", zyntax_hir::print_inst(f, i)));
    }
    Err(InterpError::Unsupported(format!("{s}: {}", msg.into())))
}

/// Decode the function at `entry` (an index into `m.functions`).
pub fn decode(m: &Module, entry: usize) -> Result<Program> {
    let Some(f) = m.functions.get(entry) else {
        return Err(InterpError::Internal(format!("no function #{entry}")));
    };
    let mut d = Decoder {
        m,
        p: Program {
            entry,
            insts: Vec::new(),
            edges: Vec::new(),
            ret_lists: Vec::new(),
            nslots: 0,
            nfrags: 0,
            params: Vec::new(),
            returns: f.returns.clone(),
            shared: Vec::new(),
            locals: Vec::new(),
            uses_frags: false,
            rec_calls: Vec::new(),
            tma: Vec::new(),
        },
        pending: Vec::new(),
    };
    let (pc, params) = d.instantiate(entry, RetTo::Exit, vec![entry])?;
    if pc != 0 {
        return Err(InterpError::Internal("entry does not start at pc 0".into()));
    }
    d.p.params = params.into_iter().zip(f.param_types()).collect::<Vec<_>>();
    // Inline calls breadth-first; each call site gets its own copy.
    let mut next = 0;
    while next < d.pending.len() {
        let pd = std::mem::replace(
            &mut d.pending[next],
            Pending {
                edge: 0,
                callee: 0,
                args: Vec::new(),
                results: Vec::new(),
                cont: 0,
                chain: Vec::new(),
            },
        );
        next += 1;
        let (pc, params) = d.instantiate(
            pd.callee,
            RetTo::Call {
                cont: pd.cont,
                results: pd.results,
            },
            pd.chain,
        )?;
        let mut e = Edge {
            pc,
            ..Edge::default()
        };
        add_copies(&mut e, &pd.args, &params);
        d.p.edges[pd.edge] = e;
    }
    d.p.uses_frags = d.p.nfrags > 0;
    Ok(d.p)
}

fn add_copies(e: &mut Edge, from: &[VLoc], to: &[VLoc]) {
    for (a, b) in from.iter().zip(to) {
        match (a, b) {
            (VLoc::Slots(s, n), VLoc::Slots(t, _)) => {
                for k in 0..*n {
                    e.copies.push((s + k, t + k));
                }
            }
            (VLoc::Frag(s), VLoc::Frag(t)) => e.frag_copies.push((*s, *t)),
            _ => {}
        }
    }
}

impl Decoder<'_> {
    fn loc_for(&mut self, ty: &Type) -> VLoc {
        match ty {
            Type::Frag(_) => {
                self.p.nfrags += 1;
                VLoc::Frag(self.p.nfrags as u32 - 1)
            }
            other => {
                let n = MemTy::of(other).map_or(1, |m| m.slots());
                let s = self.p.nslots as u32;
                self.p.nslots += n as usize;
                VLoc::Slots(s, n)
            }
        }
    }

    fn instantiate(
        &mut self,
        fi: usize,
        ret: RetTo,
        chain: Vec<usize>,
    ) -> Result<(u32, Vec<VLoc>)> {
        let m = self.m;
        let f = &m.functions[fi];
        let locs: Vec<VLoc> = f.values.iter().map(|v| self.loc_for(&v.ty)).collect();
        let start = self.p.insts.len();
        let mut block_pc = vec![u32::MAX; f.blocks.len()];
        let mut pc = start;
        for b in &f.layout {
            let Some(bd) = f.blocks.get(b.index()) else {
                return unsupported(f, None, format!("bad block {b}"));
            };
            block_pc[b.index()] = pc as u32;
            pc += bd.insts.len();
        }
        if pc > MAX_INSTS {
            return unsupported(f, None, "program too large after inlining calls");
        }
        let cx = FnCx {
            f,
            locs: &locs,
            block_pc: &block_pc,
        };
        for b in &f.layout {
            for &i in &f.blocks[b.index()].insts {
                let op = self.decode_inst(&cx, i, &ret, &chain)?;
                self.p.insts.push(DInst {
                    op,
                    func: fi as u32,
                    inst: i,
                });
            }
        }
        let params = f
            .params()
            .iter()
            .map(|v| locs[v.index()])
            .collect::<Vec<_>>();
        Ok((start as u32, params))
    }

    fn edge(&mut self, cx: &FnCx, call: &BlockCall) -> Result<u32> {
        let pc = cx
            .block_pc
            .get(call.block.index())
            .copied()
            .unwrap_or(u32::MAX);
        if pc == u32::MAX {
            return unsupported(
                cx.f,
                None,
                format!("branch to {} outside the layout", call.block),
            );
        }
        let params = &cx.f.blocks[call.block.index()].params;
        let mut e = Edge {
            pc,
            ..Edge::default()
        };
        let from: Vec<VLoc> = call.args.iter().map(|v| cx.loc(*v)).collect();
        let to: Vec<VLoc> = params.iter().map(|v| cx.loc(*v)).collect();
        add_copies(&mut e, &from, &to);
        self.p.edges.push(e);
        Ok(self.p.edges.len() as u32 - 1)
    }

    fn decode_inst(&mut self, cx: &FnCx, i: InstId, ret: &RetTo, chain: &[usize]) -> Result<DOp> {
        let Some(d) = cx.f.insts.get(i.index()) else {
            return unsupported(cx.f, None, format!("{i} does not exist"));
        };
        let ic = InstCx {
            m: self.m,
            cx,
            d,
            i,
        };
        match &d.op {
            Op::Const(_)
            | Op::Binary(_)
            | Op::Unary(_)
            | Op::Fma
            | Op::Cmp(_)
            | Op::Select
            | Op::Cast
            | Op::Bitcast
            | Op::Extract(_)
            | Op::Insert(_)
            | Op::Bits(_)
            | Op::Approx(_) => scalar::decode_scalar(&ic),
            Op::Load
            | Op::LoadCached(_)
            | Op::LoadAcquire(_)
            | Op::Store
            | Op::StoreCached(_)
            | Op::StoreRelease(_)
            | Op::PtrAdd
            | Op::PtrCast
            | Op::Alloca { .. }
            | Op::SharedAlloc { .. }
            | Op::DynShared { .. }
            | Op::GlobalAddr(_)
            | Op::Fence(_)
            | Op::FenceAcqRel(_)
            | Op::CompilerFence => memory::decode_memory(&ic, &mut self.p),
            Op::ThreadIdx(_)
            | Op::BlockIdx(_)
            | Op::BlockDim(_)
            | Op::GridDim(_)
            | Op::LaneId
            | Op::ClusterIdx(_)
            | Op::ClusterDim(_)
            | Op::ClusterBlockIdx(_)
            | Op::ClusterGridDim(_)
            | Op::ClusterCtaRank
            | Op::ClusterNctaRank
            | Op::IsExplicitCluster => special::decode_special(&ic),
            Op::Red { .. } | Op::Atomic { .. } | Op::AtomicCas { .. } => atomic::decode_atomic(&ic),
            Op::WarpSync
            | Op::Shfl { .. }
            | Op::Vote(_)
            | Op::Match(_)
            | Op::Redux(_)
            | Op::ElectSync => warp::decode_warp(&ic),
            Op::MmaLoad { .. } | Op::MmaFill | Op::Mma | Op::MmaStore { .. } => {
                frag_mma::decode_frag_mma(&ic)
            }
            Op::MmaSync { .. } | Op::Ldmatrix { .. } | Op::Stmatrix { .. } => {
                warp_mma::decode_warp_mma(&ic)
            }
            Op::WgmmaDesc(_)
            | Op::Wgmma(_)
            | Op::WgmmaZero
            | Op::WgmmaFence
            | Op::WgmmaCommit
            | Op::WgmmaWait(_)
            | Op::Setmaxnreg { .. } => wgmma::decode_wgmma(&ic),
            Op::CpAsync { .. } | Op::CpAsyncCommit | Op::CpAsyncWait(_) => {
                cp_async::decode_cp_async(&ic)
            }
            Op::Mbarrier(_)
            | Op::MbarrierArriveCluster
            | Op::MbarrierArriveClusterRelaxed
            | Op::FenceMbarrierInit => mbarrier::decode_mbarrier(&ic),
            Op::TmaLoad { .. }
            | Op::TmaStore
            | Op::TmaReduce(_)
            | Op::BulkCopyG2S
            | Op::BulkCopyS2G
            | Op::BulkCommitGroup
            | Op::BulkWaitGroup { .. }
            | Op::PrefetchTensormap
            | Op::BulkReduce(_)
            | Op::FenceProxyAsync => tma::decode_tma(&ic, &mut self.p),
            Op::ClusterBarrier(_) | Op::GridSync | Op::Griddep(_) | Op::Mapa => {
                cluster::decode_cluster(&ic)
            }
            Op::CvtPack(_) | Op::CvtUnpack(_) => pack::decode_pack(&ic),
            Op::Barrier | Op::NamedBarrier { .. } => control::decode_barrier(&ic),
            Op::Call(_) | Op::Jump | Op::Branch | Op::Return | Op::Unreachable => {
                self.decode_flow(&ic, ret, chain)
            }
        }
    }

    /// Decode a call (inlined, or a recursive activation), branch or return.
    fn decode_flow(&mut self, ic: &InstCx, ret: &RetTo, chain: &[usize]) -> Result<DOp> {
        Ok(match &ic.d.op {
            Op::Call(name) => {
                let Some(callee) = self.m.functions.iter().position(|g| &g.name == name) else {
                    return ic.bad(format!("call to unknown function @{name}"));
                };
                if chain.contains(&callee) {
                    // A recursive call cannot be inlined: it runs as a nested
                    // activation of the callee's own program (see the executor).
                    let args: Vec<VLoc> = ic.d.args.iter().map(|v| ic.loc(*v)).collect();
                    let results: Vec<VLoc> = ic.d.results.iter().map(|v| ic.loc(*v)).collect();
                    if args
                        .iter()
                        .chain(&results)
                        .any(|l| matches!(l, VLoc::Frag(_)))
                    {
                        return ic.bad("fragments cannot be passed through a recursive call");
                    }
                    self.p.rec_calls.push(RecCall {
                        callee,
                        args,
                        results,
                    });
                    return Ok(DOp::CallRec {
                        call: self.p.rec_calls.len() as u32 - 1,
                    });
                }
                let mut chain2 = chain.to_vec();
                chain2.push(callee);
                self.p.edges.push(Edge::default());
                let edge = self.p.edges.len() - 1;
                self.pending.push(Pending {
                    edge,
                    callee,
                    args: ic.d.args.iter().map(|v| ic.loc(*v)).collect(),
                    results: ic.d.results.iter().map(|v| ic.loc(*v)).collect(),
                    cont: self.p.insts.len() as u32 + 1,
                    chain: chain2,
                });
                DOp::Jump(edge as u32)
            }
            Op::Jump => {
                let Some(t) = ic.d.targets.first() else {
                    return ic.bad("jump without target");
                };
                DOp::Jump(self.edge(ic.cx, t)?)
            }
            Op::Branch => {
                if ic.d.targets.len() != 2 {
                    return ic.bad("br needs two targets");
                }
                let t = self.edge(ic.cx, &ic.d.targets[0])?;
                let e = self.edge(ic.cx, &ic.d.targets[1])?;
                DOp::Br {
                    cond: ic.arg(0)?,
                    t,
                    e,
                }
            }
            Op::Return => {
                let vals: Vec<VLoc> = ic.d.args.iter().map(|v| ic.loc(*v)).collect();
                match ret {
                    RetTo::Exit => {
                        // One list per `return`: a function may return from several blocks.
                        self.p.ret_lists.push(vals);
                        DOp::Exit {
                            rets: self.p.ret_lists.len() as u32 - 1,
                        }
                    }
                    RetTo::Call { cont, results } => {
                        let mut e = Edge {
                            pc: *cont,
                            ..Edge::default()
                        };
                        add_copies(&mut e, &vals, results);
                        self.p.edges.push(e);
                        DOp::Jump(self.p.edges.len() as u32 - 1)
                    }
                }
            }
            Op::Unreachable => DOp::Unreachable,
            _ => return Err(InterpError::Internal("not a control-flow op".into())),
        })
    }
}

struct FnCx<'a> {
    f: &'a Function,
    locs: &'a [VLoc],
    block_pc: &'a [u32],
}

impl FnCx<'_> {
    fn loc(&self, v: ValueId) -> VLoc {
        self.locs
            .get(v.index())
            .copied()
            .unwrap_or(VLoc::Slots(0, 1))
    }
    fn slot(&self, v: ValueId) -> u32 {
        match self.loc(v) {
            VLoc::Slots(s, _) => s,
            VLoc::Frag(r) => r,
        }
    }
    fn nslots(&self, v: ValueId) -> u32 {
        match self.loc(v) {
            VLoc::Slots(_, n) => n,
            VLoc::Frag(_) => 0,
        }
    }
    fn ty(&self, v: ValueId) -> &Type {
        self.f.values.get(v.index()).map_or(&Type::BOOL, |d| &d.ty)
    }
}

/// One instruction being decoded, for the family decoders: its operands'
/// register slots and types. Errors name the function and the instruction.
pub(crate) struct InstCx<'a> {
    pub(crate) m: &'a Module,
    cx: &'a FnCx<'a>,
    pub(crate) d: &'a InstData,
    i: InstId,
}

impl InstCx<'_> {
    /// The instruction is not supported, for the reason `msg`.
    pub(crate) fn bad<T>(&self, msg: impl Into<String>) -> Result<T> {
        unsupported(self.cx.f, Some(self.i), msg)
    }

    /// The first slot (or fragment register) of operand `k`.
    pub(crate) fn arg(&self, k: usize) -> Result<u32> {
        match self.d.args.get(k) {
            Some(v) => Ok(self.cx.slot(*v)),
            None => self.bad(format!("missing operand {k}")),
        }
    }

    /// The first slot (or fragment register) of result `k`.
    pub(crate) fn res(&self, k: usize) -> Result<u32> {
        match self.d.results.get(k) {
            Some(v) => Ok(self.cx.slot(*v)),
            None => self.bad(format!("missing result {k}")),
        }
    }

    /// The type of operand `k` (`bool` when it is missing).
    pub(crate) fn arg_ty(&self, k: usize) -> Type {
        self.d
            .args
            .get(k)
            .map_or(Type::BOOL, |v| self.cx.ty(*v).clone())
    }

    /// The type of result `k` (`bool` when it is missing).
    pub(crate) fn res_ty(&self, k: usize) -> Type {
        self.d
            .results
            .get(k)
            .map_or(Type::BOOL, |v| self.cx.ty(*v).clone())
    }

    /// Operand `k` as a fragment register and its fragment type.
    pub(crate) fn frag_of(&self, k: usize) -> Result<(u32, FragType)> {
        match self
            .d
            .args
            .get(k)
            .map(|v| (self.cx.loc(*v), self.cx.ty(*v)))
        {
            Some((VLoc::Frag(r), Type::Frag(ft))) => Ok((r, *ft)),
            _ => self.bad(format!("operand {k} is not a fragment")),
        }
    }

    /// Where the value `v` is held.
    pub(crate) fn loc(&self, v: ValueId) -> VLoc {
        self.cx.loc(v)
    }

    /// Slots of result 0 (1 when there is none).
    pub(crate) fn res_slots(&self) -> u32 {
        self.d.results.first().map_or(1, |v| self.cx.nslots(*v))
    }

    /// Slots of operand `k` (1 when there is none).
    pub(crate) fn arg_slots(&self, k: usize) -> u32 {
        self.d.args.get(k).map_or(1, |v| self.cx.nslots(*v))
    }

    /// The name of the function the instruction is in.
    pub(crate) fn func_name(&self) -> &str {
        &self.cx.f.name
    }

    /// The instruction.
    pub(crate) fn inst_id(&self) -> InstId {
        self.i
    }
}
