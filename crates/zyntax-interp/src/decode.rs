//! Pre-decoding: one entry function (with every device/host function it calls
//! inlined, so threads never need a call stack) becomes a flat array of
//! compact instructions whose operands are register slots. A value of `n`
//! bytes takes `ceil(n/8)` consecutive 64-bit slots (vectors pack their
//! elements little-endian, as in memory); an MMA fragment takes a per-warp
//! fragment register instead.

use crate::memory;
use crate::{InterpError, Result};
use zyntax_hir::{
    ApproxOp, AtomicOp, BinOp, BitOp, BlockCall, CacheHint, CmpOp, FragKind, FragType, Function,
    InstId, Layout, MatchMode, MbarrierOp, MmaElem, Module, Op, PackFmt, ReduxOp, ScalarType,
    ShflMode, Swizzle, Type, UnOp, ValueId, VoteMode, Wgmma,
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
            fi,
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
        let f = cx.f;
        let Some(d) = f.insts.get(i.index()) else {
            return unsupported(f, None, format!("{i} does not exist"));
        };
        let bad = |msg: &str| unsupported::<DOp>(f, Some(i), msg.to_string());
        let arg = |k: usize| -> Result<u32> {
            match d.args.get(k) {
                Some(v) => Ok(cx.slot(*v)),
                None => unsupported(f, Some(i), format!("missing operand {k}")),
            }
        };
        let frag_of = |k: usize| -> Result<(u32, FragType)> {
            match d.args.get(k).map(|v| (cx.loc(*v), cx.ty(*v))) {
                Some((VLoc::Frag(r), Type::Frag(ft))) => Ok((r, *ft)),
                _ => unsupported(f, Some(i), format!("operand {k} is not a fragment")),
            }
        };
        let arg_ty = |k: usize| -> Type { d.args.get(k).map_or(Type::BOOL, |v| cx.ty(*v).clone()) };
        let res = |k: usize| -> Result<u32> {
            match d.results.get(k) {
                Some(v) => Ok(cx.slot(*v)),
                None => unsupported(f, Some(i), format!("missing result {k}")),
            }
        };
        let res_ty =
            |k: usize| -> Type { d.results.get(k).map_or(Type::BOOL, |v| cx.ty(*v).clone()) };
        let scalar = |t: &Type| t.as_scalar();
        // `red`, and atomics on packed `vec<f16|bf16, 2>` (issue 12).
        let atomic_v = |op: AtomicOp, t: Type, dst: Option<u32>| -> Result<DOp> {
            let (elem, n) = match t {
                Type::Scalar(s) if s != ScalarType::Bool => (s, 1),
                Type::Vector(s, 2) if s.is_float() && op == AtomicOp::Add => (s, 2),
                t => return bad(&format!("atomic {op} on {t}")),
            };
            let bitwise = matches!(
                op,
                AtomicOp::And | AtomicOp::Or | AtomicOp::Xor | AtomicOp::Inc | AtomicOp::Dec
            );
            if bitwise && !elem.is_int() {
                return bad(&format!("atomic {op} on {elem}"));
            }
            Ok(DOp::AtomicV {
                op,
                elem,
                n,
                dst,
                ptr: arg(0)?,
                val: arg(1)?,
            })
        };
        Ok(match &d.op {
            Op::Const(c) => {
                let Some(s) = scalar(&res_ty(0)) else {
                    return bad("constant of non-scalar type");
                };
                DOp::Const {
                    dst: res(0)?,
                    bits: crate::scalar::const_bits(s, *c),
                }
            }
            Op::Binary(op) => match arg_ty(0) {
                Type::Scalar(s) if crate::scalar::binop_defined(*op, s) => DOp::Bin {
                    op: *op,
                    ty: s,
                    dst: res(0)?,
                    a: arg(0)?,
                    b: arg(1)?,
                },
                t @ Type::Vector(s, _) if crate::scalar::binop_defined(*op, s) => DOp::BinV {
                    op: *op,
                    mt: MemTy::of(&t).unwrap_or(MemTy {
                        elem: s,
                        n: 1,
                        size: 1,
                        align: 1,
                    }),
                    dst: res(0)?,
                    a: arg(0)?,
                    b: arg(1)?,
                },
                t => return bad(&format!("`{op}` is not defined on {t}")),
            },
            Op::Unary(op) => match arg_ty(0) {
                Type::Scalar(s) if crate::scalar::unop_defined(*op, s) => DOp::Un {
                    op: *op,
                    ty: s,
                    dst: res(0)?,
                    a: arg(0)?,
                },
                t @ Type::Vector(s, _) if crate::scalar::unop_defined(*op, s) => DOp::UnV {
                    op: *op,
                    mt: MemTy::of(&t).unwrap_or(MemTy {
                        elem: s,
                        n: 1,
                        size: 1,
                        align: 1,
                    }),
                    dst: res(0)?,
                    a: arg(0)?,
                },
                t => return bad(&format!("`{op}` is not defined on {t}")),
            },
            Op::Fma => match arg_ty(0) {
                Type::Scalar(s) if s.is_float() => DOp::Fma {
                    ty: s,
                    dst: res(0)?,
                    a: arg(0)?,
                    b: arg(1)?,
                    c: arg(2)?,
                },
                t @ Type::Vector(s, _) if s.is_float() => DOp::FmaV {
                    mt: MemTy::of(&t).ok_or_else(|| InterpError::Internal("fma vector".into()))?,
                    dst: res(0)?,
                    a: arg(0)?,
                    b: arg(1)?,
                    c: arg(2)?,
                },
                t => return bad(&format!("fma on {t}")),
            },
            Op::Cmp(op) => match arg_ty(0) {
                Type::Scalar(s) => DOp::Cmp {
                    op: *op,
                    ty: s,
                    dst: res(0)?,
                    a: arg(0)?,
                    b: arg(1)?,
                },
                // Pointers compare by their encoding (equality is exact; order only within one allocation).
                Type::Ptr(..) => DOp::Cmp {
                    op: *op,
                    ty: ScalarType::U64,
                    dst: res(0)?,
                    a: arg(0)?,
                    b: arg(1)?,
                },
                t => return bad(&format!("comparison of {t}")),
            },
            Op::Select => DOp::Select {
                dst: res(0)?,
                cond: arg(0)?,
                a: arg(1)?,
                b: arg(2)?,
                n: d.results.first().map_or(1, |v| cx.nslots(*v)),
            },
            Op::Cast => match (arg_ty(0), res_ty(0)) {
                (Type::Scalar(a), Type::Scalar(b)) => DOp::Cast {
                    from: a,
                    to: b,
                    dst: res(0)?,
                    a: arg(0)?,
                },
                (a, b) => return bad(&format!("cast from {a} to {b}")),
            },
            Op::Bitcast => {
                let (a, b) = (arg_ty(0), res_ty(0));
                if a.size_bytes() != b.size_bytes() || a.is_bool() != b.is_bool() {
                    return bad(&format!("bitcast from {a} to {b}"));
                }
                DOp::Copy {
                    dst: res(0)?,
                    a: arg(0)?,
                    n: d.results.first().map_or(1, |v| cx.nslots(*v)),
                }
            }
            Op::Extract(lane) | Op::Insert(lane) => {
                let t = arg_ty(0);
                let Some(mt) = MemTy::of(&t).filter(|_| matches!(t, Type::Vector(..))) else {
                    return bad("extract/insert needs a vector");
                };
                if *lane >= mt.n {
                    return bad("lane out of range");
                }
                if matches!(d.op, Op::Extract(_)) {
                    DOp::Extract {
                        mt,
                        lane: *lane,
                        dst: res(0)?,
                        v: arg(0)?,
                    }
                } else {
                    DOp::Insert {
                        mt,
                        lane: *lane,
                        dst: res(0)?,
                        v: arg(0)?,
                        s: arg(1)?,
                    }
                }
            }
            // Cache operators change speed, never values (issue 12 item 3).
            Op::Load | Op::LoadCached(_) => {
                let t = res_ty(0);
                let Some(mt) = MemTy::of(&t) else {
                    return bad(&format!("load of {t}"));
                };
                DOp::Load {
                    mt,
                    dst: res(0)?,
                    ptr: arg(0)?,
                }
            }
            Op::Store | Op::StoreCached(_) => {
                let t = arg_ty(1);
                let Some(mt) = MemTy::of(&t) else {
                    return bad(&format!("store of {t}"));
                };
                DOp::Store {
                    mt,
                    ptr: arg(0)?,
                    val: arg(1)?,
                }
            }
            Op::PtrAdd => {
                let elem_size = arg_ty(0).pointee().and_then(Type::size_bytes).unwrap_or(0);
                let Some(idx_ty) = scalar(&arg_ty(1)).filter(|s| s.is_int()) else {
                    return bad("ptr_add index must be an integer");
                };
                DOp::PtrAdd {
                    dst: res(0)?,
                    ptr: arg(0)?,
                    idx: arg(1)?,
                    idx_ty,
                    elem_size,
                }
            }
            Op::PtrCast => {
                let to = res_ty(0)
                    .addr_space()
                    .unwrap_or(zyntax_hir::AddrSpace::Generic);
                let from = arg_ty(0)
                    .addr_space()
                    .unwrap_or(zyntax_hir::AddrSpace::Generic);
                if to == from || to == zyntax_hir::AddrSpace::Generic {
                    DOp::Copy {
                        dst: res(0)?,
                        a: arg(0)?,
                        n: 1,
                    }
                } else {
                    DOp::PtrToSpace {
                        dst: res(0)?,
                        a: arg(0)?,
                        space: to,
                    }
                }
            }
            // Every allocation starts at offset 0 of its own region: any declared alignment holds.
            Op::Alloca { elem, count } | Op::SharedAlloc { elem, count, .. } => {
                let Some(bytes) = elem.size_bytes().and_then(|b| b.checked_mul(*count)) else {
                    return bad("allocation size overflows");
                };
                if bytes > (1u64 << (memory::OFFSET_BITS - 2)) {
                    return bad("allocation too large");
                }
                let name = format!(
                    "@{}:{}",
                    f.name,
                    d.results.first().map_or(i.to_string(), |v| v.to_string())
                );
                if matches!(d.op, Op::Alloca { .. }) {
                    self.p.locals.push((bytes, format!("local {name}")));
                    DOp::Alloca {
                        dst: res(0)?,
                        k: self.p.locals.len() as u32 - 1,
                    }
                } else {
                    self.p.shared.push((bytes, format!("shared {name}")));
                    DOp::SharedAlloc {
                        dst: res(0)?,
                        k: self.p.shared.len() as u32 - 1,
                    }
                }
            }
            Op::DynShared { .. } => DOp::DynShared { dst: res(0)? },
            Op::GlobalAddr(name) => {
                let Some(k) = self.m.globals.iter().position(|g| &g.name == name) else {
                    return bad("global_addr of an unknown global");
                };
                DOp::GlobalAddr {
                    dst: res(0)?,
                    k: k as u32,
                }
            }
            Op::ThreadIdx(dm) => DOp::Special {
                dst: res(0)?,
                which: Special::Tid(dim(*dm)),
            },
            Op::BlockIdx(dm) => DOp::Special {
                dst: res(0)?,
                which: Special::Bid(dim(*dm)),
            },
            Op::BlockDim(dm) => DOp::Special {
                dst: res(0)?,
                which: Special::BDim(dim(*dm)),
            },
            Op::GridDim(dm) => DOp::Special {
                dst: res(0)?,
                which: Special::GDim(dim(*dm)),
            },
            Op::LaneId => DOp::Special {
                dst: res(0)?,
                which: Special::Lane,
            },
            Op::Barrier => DOp::Barrier,
            // Execution is sequentially consistent, so fences have nothing to order.
            Op::Fence(_) => DOp::Nop,
            Op::WarpSync => DOp::WarpSync { mask: arg(0)? },
            // --- issue 12 (warp-sync). Execution is sequentially consistent, so
            // acquire/release accesses are plain ones and fences have nothing to order.
            Op::Bits(op) => {
                let Some(ty) =
                    scalar(&arg_ty(if *op == BitOp::Bfi { 1 } else { 0 })).filter(|s| s.is_int())
                else {
                    return bad(&format!("`{op}` on a non-integer"));
                };
                let mut a = [0u32; 4];
                for (i, slot) in a.iter_mut().enumerate().take(d.args.len()) {
                    *slot = arg(i)?;
                }
                DOp::Bits {
                    op: *op,
                    ty,
                    dst: res(0)?,
                    a,
                }
            }
            Op::LoadAcquire(_) => {
                let t = res_ty(0);
                let Some(mt) = MemTy::of(&t) else {
                    return bad(&format!("load.acquire of {t}"));
                };
                DOp::Load {
                    mt,
                    dst: res(0)?,
                    ptr: arg(0)?,
                }
            }
            Op::StoreRelease(_) => {
                let t = arg_ty(1);
                let Some(mt) = MemTy::of(&t) else {
                    return bad(&format!("store.release of {t}"));
                };
                DOp::Store {
                    mt,
                    ptr: arg(0)?,
                    val: arg(1)?,
                }
            }
            Op::FenceAcqRel(_) | Op::CompilerFence => DOp::Nop,
            // h13-cluster. Launches run one after another, so `griddepcontrol` has nothing to wait for.
            Op::ClusterIdx(dm) => DOp::Special {
                dst: res(0)?,
                which: Special::ClusterIdx(dim(*dm)),
            },
            Op::ClusterDim(dm) => DOp::Special {
                dst: res(0)?,
                which: Special::ClusterDim(dim(*dm)),
            },
            Op::ClusterBlockIdx(dm) => DOp::Special {
                dst: res(0)?,
                which: Special::ClusterBlockIdx(dim(*dm)),
            },
            Op::ClusterGridDim(dm) => DOp::Special {
                dst: res(0)?,
                which: Special::ClusterGridDim(dim(*dm)),
            },
            Op::ClusterCtaRank => DOp::Special {
                dst: res(0)?,
                which: Special::ClusterRank,
            },
            Op::ClusterNctaRank => DOp::Special {
                dst: res(0)?,
                which: Special::ClusterNRank,
            },
            Op::IsExplicitCluster => DOp::Special {
                dst: res(0)?,
                which: Special::IsExplicitCluster,
            },
            Op::ClusterBarrier(c) => match c {
                zyntax_hir::ClusterBarrierOp::Wait => DOp::ClusterWait,
                _ => DOp::ClusterArrive,
            },
            Op::GridSync => DOp::GridSync,
            Op::Griddep(_) => DOp::Nop,
            Op::Mapa => DOp::Mapa {
                dst: res(0)?,
                ptr: arg(0)?,
                rank: arg(1)?,
            },
            // A remote arrival is an `arrive` on the barrier word `mapa` pointed at
            // (the interpreter's memory is sequentially consistent: both scopes alike).
            Op::MbarrierArriveCluster | Op::MbarrierArriveClusterRelaxed => DOp::Mbarrier {
                op: MbarrierOp::Arrive,
                bar: arg(0)?,
                a1: NO_SLOT,
                a2: NO_SLOT,
                dst: NO_SLOT,
            },
            Op::Redux(op) => DOp::Redux {
                op: *op,
                signed: arg_ty(1) == Type::I32,
                dst: res(0)?,
                mask: arg(0)?,
                val: arg(1)?,
            },
            Op::Red { op, .. } => atomic_v(*op, arg_ty(1), None)?,
            Op::Atomic { op, .. } if matches!(arg_ty(1), Type::Vector(..)) => {
                atomic_v(*op, arg_ty(1), Some(res(0)?))?
            }
            Op::Atomic { op, .. } => {
                let Some(ty) = scalar(&arg_ty(1)).filter(|s| *s != ScalarType::Bool) else {
                    return bad("atomic on a non-scalar");
                };
                let ok = match op {
                    AtomicOp::And
                    | AtomicOp::Or
                    | AtomicOp::Xor
                    | AtomicOp::Inc
                    | AtomicOp::Dec => ty.is_int(),
                    _ => true,
                };
                if !ok {
                    return bad(&format!("atomic {op} on {ty}"));
                }
                DOp::Atomic {
                    op: *op,
                    ty,
                    dst: res(0)?,
                    ptr: arg(0)?,
                    val: arg(1)?,
                }
            }
            Op::AtomicCas { .. } => {
                let Some(ty) = scalar(&arg_ty(1)).filter(|s| *s != ScalarType::Bool) else {
                    return bad("atomic.cas on a non-scalar");
                };
                DOp::Cas {
                    ty,
                    dst: res(0)?,
                    ptr: arg(0)?,
                    exp: arg(1)?,
                    des: arg(2)?,
                }
            }
            Op::Shfl { mode, width } => {
                if !width.is_power_of_two() || *width > 32 {
                    return bad("shuffle width must be a power of two <= 32");
                }
                DOp::Shfl {
                    mode: *mode,
                    width: *width,
                    dst: res(0)?,
                    mask: arg(0)?,
                    val: arg(1)?,
                    lane: arg(2)?,
                    n: d.results.first().map_or(1, |v| cx.nslots(*v)),
                }
            }
            Op::Vote(mode) => DOp::Vote {
                mode: *mode,
                dst: res(0)?,
                mask: arg(0)?,
                pred: arg(1)?,
            },
            Op::Match(mode) => DOp::Match {
                mode: *mode,
                dst: res(0)?,
                dst2: if *mode == MatchMode::All { res(1)? } else { 0 },
                mask: arg(0)?,
                val: arg(1)?,
                n: d.args.get(1).map_or(1, |v| cx.nslots(*v)),
            },
            Op::MmaLoad { frag, layout } => {
                let Some(&v) = d.results.first() else {
                    return bad("missing result");
                };
                let VLoc::Frag(dst) = cx.loc(v) else {
                    return bad("mma.load result is not a fragment");
                };
                DOp::MmaLoad {
                    frag: *frag,
                    layout: *layout,
                    dst,
                    ptr: arg(0)?,
                    ldm: arg(1)?,
                }
            }
            Op::MmaFill => {
                let (Some(&v), Type::Frag(frag)) = (d.results.first(), res_ty(0)) else {
                    return bad("mma.fill result is not a fragment");
                };
                let VLoc::Frag(dst) = cx.loc(v) else {
                    return bad("mma.fill result is not a fragment");
                };
                let Some(val_ty) = scalar(&arg_ty(0)) else {
                    return bad("mma.fill needs a scalar");
                };
                DOp::MmaFill {
                    frag,
                    dst,
                    val: arg(0)?,
                    val_ty,
                }
            }
            Op::Mma => {
                let (a, fa) = frag_of(0)?;
                let (b, fb) = frag_of(1)?;
                let (c, fc) = frag_of(2)?;
                let Some(VLoc::Frag(dr)) = d.results.first().map(|v| cx.loc(*v)) else {
                    return bad("mma result is not a fragment");
                };
                if fa.kind != FragKind::A || fb.kind != FragKind::B || fc.kind != FragKind::Acc {
                    return bad("mma needs (a, b, acc) fragments");
                }
                if fa.shape != fb.shape || fa.shape != fc.shape {
                    return bad("mma fragment shapes differ");
                }
                DOp::Mma {
                    a,
                    b,
                    c,
                    d: dr,
                    fa,
                    fb,
                    fc,
                }
            }
            Op::MmaStore { layout } => {
                let (src, frag) = frag_of(1)?;
                DOp::MmaStore {
                    layout: *layout,
                    frag,
                    ptr: arg(0)?,
                    src,
                    ldm: arg(2)?,
                }
            }
            Op::CpAsync { bytes, cache } => {
                if !matches!(bytes, 4 | 8 | 16) || (*cache == CacheHint::Cg && *bytes != 16) {
                    return bad("cp.async copies 4, 8 or 16 bytes (cg: 16)");
                }
                DOp::CpAsync {
                    bytes: *bytes,
                    dst: arg(0)?,
                    src: arg(1)?,
                }
            }
            Op::CpAsyncCommit => DOp::CpCommit,
            Op::CpAsyncWait(n) => DOp::CpWait(*n),
            Op::Mbarrier(op) => {
                let opt = |k: usize| {
                    if k < d.args.len() {
                        arg(k)
                    } else {
                        Ok(NO_SLOT)
                    }
                };
                DOp::Mbarrier {
                    op: *op,
                    bar: arg(0)?,
                    a1: opt(1)?,
                    a2: opt(2)?,
                    dst: if d.results.is_empty() {
                        NO_SLOT
                    } else {
                        res(0)?
                    },
                }
            }
            // The interpreter has one proxy and sequentially consistent memory.
            Op::FenceProxyAsync | Op::FenceMbarrierInit => DOp::Nop,
            Op::MmaSync { elem, .. } => {
                let Some(acc) = arg_ty(2).elem_scalar() else {
                    return bad("mma.sync accumulator is not a vector");
                };
                DOp::MmaSync {
                    elem: *elem,
                    acc,
                    a: arg(0)?,
                    b: arg(1)?,
                    c: arg(2)?,
                    d: res(0)?,
                }
            }
            // Warpgroup MMA and warp specialisation (issue 13 items 1 and 5).
            Op::WgmmaDesc(swizzle) => DOp::WgmmaDesc {
                swizzle: *swizzle,
                dst: res(0)?,
                ptr: arg(0)?,
                lbo: arg(1)?,
                sbo: arg(2)?,
            },
            Op::Wgmma(form) => {
                let Some(acc) = arg_ty(0).elem_scalar() else {
                    return bad("wgmma accumulator is not a vector");
                };
                DOp::Wgmma {
                    form: *form,
                    acc,
                    c: arg(0)?,
                    a: arg(1)?,
                    a_regs: arg_ty(1) != Type::U64,
                    b: arg(2)?,
                    scale_d: arg(3)?,
                    d: res(0)?,
                }
            }
            Op::WgmmaZero => DOp::Zero {
                dst: res(0)?,
                n: d.results.first().map_or(1, |v| cx.nslots(*v)),
            },
            // wgmma completes at issue in the interpreter; registers are not modelled.
            Op::WgmmaFence | Op::WgmmaCommit | Op::WgmmaWait(_) | Op::Setmaxnreg { .. } => DOp::Nop,
            Op::ElectSync => DOp::Elect { dst: res(0)? },
            Op::Ldmatrix { num, trans } => DOp::Ldmatrix {
                num: *num,
                trans: *trans,
                dst: res(0)?,
                ptr: arg(0)?,
            },
            Op::Stmatrix { num, trans } => DOp::Stmatrix {
                num: *num,
                trans: *trans,
                ptr: arg(0)?,
                src: arg(1)?,
            },
            Op::NamedBarrier { arrive, id, count } => DOp::NamedBarrier {
                arrive: *arrive,
                id: *id,
                count: *count,
            },
            Op::CvtPack(fmt) => DOp::CvtPack {
                fmt: *fmt,
                dst: res(0)?,
                lo: arg(0)?,
                hi: arg(1)?,
            },
            Op::CvtUnpack(fmt) => DOp::CvtUnpack {
                fmt: *fmt,
                dst: res(0)?,
                a: arg(0)?,
            },
            Op::Approx(op) => DOp::Approx {
                op: *op,
                dst: res(0)?,
                a: arg(0)?,
            },
            Op::Call(name) => {
                let Some(callee) = self.m.functions.iter().position(|g| &g.name == name) else {
                    return bad(&format!("call to unknown function @{name}"));
                };
                if chain.contains(&callee) {
                    // A recursive call cannot be inlined: it runs as a nested
                    // activation of the callee's own program (see the executor).
                    let args: Vec<VLoc> = d.args.iter().map(|v| cx.loc(*v)).collect();
                    let results: Vec<VLoc> = d.results.iter().map(|v| cx.loc(*v)).collect();
                    if args
                        .iter()
                        .chain(&results)
                        .any(|l| matches!(l, VLoc::Frag(_)))
                    {
                        return bad("fragments cannot be passed through a recursive call");
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
                    args: d.args.iter().map(|v| cx.loc(*v)).collect(),
                    results: d.results.iter().map(|v| cx.loc(*v)).collect(),
                    cont: self.p.insts.len() as u32 + 1,
                    chain: chain2,
                });
                let _ = cx.fi;
                DOp::Jump(edge as u32)
            }
            Op::Jump => {
                let Some(t) = d.targets.first() else {
                    return bad("jump without target");
                };
                DOp::Jump(self.edge(cx, t)?)
            }
            Op::Branch => {
                if d.targets.len() != 2 {
                    return bad("br needs two targets");
                }
                let t = self.edge(cx, &d.targets[0])?;
                let e = self.edge(cx, &d.targets[1])?;
                DOp::Br {
                    cond: arg(0)?,
                    t,
                    e,
                }
            }
            Op::Return => {
                let vals: Vec<VLoc> = d.args.iter().map(|v| cx.loc(*v)).collect();
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
            Op::TmaLoad { .. }
            | Op::TmaStore
            | Op::TmaReduce(_)
            | Op::BulkCopyG2S
            | Op::BulkCopyS2G
            | Op::BulkCommitGroup
            | Op::BulkWaitGroup { .. }
            | Op::PrefetchTensormap
            | Op::BulkReduce(_) => {
                let slots = (0..d.args.len()).map(arg).collect::<Result<Vec<u32>>>()?;
                // `bulk.reduce`: the element type is the source pointer's.
                let elem = match d.op {
                    Op::BulkReduce(_) => arg_ty(1).pointee().and_then(Type::as_scalar),
                    _ => None,
                };
                self.p.tma.push(crate::tma::TmaInst {
                    op: d.op.clone(),
                    slots,
                    elem,
                });
                DOp::Tma(self.p.tma.len() as u32 - 1)
            }
        })
    }
}

fn dim(d: zyntax_hir::Dim) -> usize {
    match d {
        zyntax_hir::Dim::X => 0,
        zyntax_hir::Dim::Y => 1,
        zyntax_hir::Dim::Z => 2,
    }
}

struct FnCx<'a> {
    f: &'a Function,
    fi: usize,
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
