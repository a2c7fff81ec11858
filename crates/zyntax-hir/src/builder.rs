//! Building HIR functions and modules.
//!
//! [`FunctionBuilder`] appends instructions to a current block and infers
//! result types where the op determines them. It checks only what it needs to
//! build (ids in range, a current block that is not terminated); the verifier
//! checks everything else. Structured helpers (`begin_if`/`begin_else`/`end_if`,
//! `begin_for`/`end_for`, `break_for`/`continue_for`) lower if/else and
//! counted loops to blocks with parameters, and are plain data so that
//! bindings can drive them from context managers. Variables
//! (`declare_var`/`def_var`/`use_var`, in [`crate::ssa`]) give SSA
//! construction on top: a front-end assigns and reads variables and the
//! builder adds the block parameters, also across the structured helpers.
//!
//! ```
//! use zyntax_hir::*;
//! let mut b = FunctionBuilder::kernel("fill", &[Type::ptr(AddrSpace::Global, Type::F32), Type::U32]);
//! let (out, n) = (b.param(0), b.param(1));
//! let tid = b.thread_idx(Dim::X).unwrap();
//! let inb = b.cmp(CmpOp::Lt, tid, n).unwrap();
//! let frame = b.begin_if(inb, &[]).unwrap();
//! let p = b.ptr_add(out, tid).unwrap();
//! let one = b.fconst(Type::F32, 1.0).unwrap();
//! b.store(p, one).unwrap();
//! b.end_if(frame, &[]).unwrap();
//! b.ret(&[]).unwrap();
//! let f = b.finish().unwrap();
//! let mut m = Module::new("demo");
//! m.functions.push(f);
//! assert!(verify_module(&m).is_ok());
//! ```

use crate::entities::{BlockId, InstId, ValueId};
use crate::error::{BuildError, Loc};
use crate::ir::{
    BlockCall, BlockData, Constraints, Function, FunctionKind, InstData, KernelInfo, ValueData,
    ValueDef,
};
use crate::op::*;
use crate::ssa::{Pred, SsaState};
use crate::types::{AddrSpace, FragKind, FragType, Layout, ScalarType, Type};

mod generated;

pub type BuildResult<T> = Result<T, BuildError>;

/// State of an `if` under construction (see [`FunctionBuilder::begin_if`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfFrame {
    branch: InstId,
    else_block: BlockId,
    merge: BlockId,
    has_else: bool,
}

/// State of a counted loop under construction (see [`FunctionBuilder::begin_for`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForFrame {
    header: BlockId,
    exit: BlockId,
    /// The induction variable (a parameter of the loop header).
    pub iv: ValueId,
    step: ValueId,
    /// Loop-carried values as seen inside the body (header parameters after `iv`).
    pub carried: Vec<ValueId>,
}

/// Builds one function.
#[derive(Clone, Debug)]
pub struct FunctionBuilder {
    pub(crate) func: Function,
    pub(crate) current: Option<BlockId>,
    pub(crate) loc: Option<Loc>,
    /// Variables, predecessors and sealed blocks (see [`crate::ssa`]).
    pub(crate) ssa: SsaState,
}

impl FunctionBuilder {
    /// A function with an entry block whose parameters have `params` types.
    pub fn new(
        name: impl Into<String>,
        kind: FunctionKind,
        params: &[Type],
        returns: &[Type],
    ) -> Self {
        let mut b = FunctionBuilder {
            func: Function::new(name, kind, returns.to_vec()),
            current: None,
            loc: None,
            ssa: SsaState::default(),
        };
        let entry = b.create_block(params);
        // Nothing may branch to the entry: it is sealed from the start.
        b.ssa.seal_entry(entry);
        b.switch_to(entry);
        b
    }

    pub fn kernel(name: impl Into<String>, params: &[Type]) -> Self {
        Self::new(
            name,
            FunctionKind::Kernel(KernelInfo::default()),
            params,
            &[],
        )
    }
    pub fn device(name: impl Into<String>, params: &[Type], returns: &[Type]) -> Self {
        Self::new(name, FunctionKind::Device, params, returns)
    }
    pub fn host(name: impl Into<String>, params: &[Type], returns: &[Type]) -> Self {
        Self::new(name, FunctionKind::Host, params, returns)
    }

    fn err<T>(&self, message: impl Into<String>) -> BuildResult<T> {
        Err(BuildError {
            function: self.func.name.clone(),
            message: message.into(),
        })
    }

    /// The function as built so far.
    pub fn func(&self) -> &Function {
        &self.func
    }
    pub fn name(&self) -> &str {
        &self.func.name
    }
    pub fn constraints_mut(&mut self) -> &mut Constraints {
        &mut self.func.constraints
    }
    pub fn kind_mut(&mut self) -> &mut FunctionKind {
        &mut self.func.kind
    }
    /// Kernel metadata, if this is a kernel.
    pub fn kernel_info_mut(&mut self) -> Option<&mut KernelInfo> {
        match &mut self.func.kind {
            FunctionKind::Kernel(k) => Some(k),
            _ => None,
        }
    }
    /// Source location attached to the instructions added from now on.
    pub fn set_loc(&mut self, loc: Option<Loc>) {
        self.loc = loc;
    }
    pub fn set_function_loc(&mut self, loc: Option<Loc>) {
        self.func.loc = loc;
    }

    /// The i-th function parameter. Panics if out of range: use [`Self::try_param`] for untrusted indices.
    pub fn param(&self, i: usize) -> ValueId {
        self.func.params()[i]
    }
    pub fn try_param(&self, i: usize) -> BuildResult<ValueId> {
        match self.func.params().get(i) {
            Some(v) => Ok(*v),
            None => self.err(format!(
                "parameter index {i} out of range ({} parameters)",
                self.func.params().len()
            )),
        }
    }
    pub fn params(&self) -> Vec<ValueId> {
        self.func.params().to_vec()
    }

    pub fn value_type(&self, v: ValueId) -> BuildResult<&Type> {
        match self.func.values.get(v.index()) {
            Some(d) => Ok(&d.ty),
            None => self.err(format!("unknown value {v}")),
        }
    }

    /// A new block with parameters of the given types (not yet placed in the layout).
    pub fn create_block(&mut self, param_types: &[Type]) -> BlockId {
        let b = BlockId::from_index(self.func.blocks.len());
        let mut params = Vec::with_capacity(param_types.len());
        for (n, ty) in param_types.iter().enumerate() {
            let v = ValueId::from_index(self.func.values.len());
            self.func.values.push(ValueData {
                ty: ty.clone(),
                def: ValueDef::Param(b, n as u32),
            });
            params.push(v);
        }
        self.func.blocks.push(BlockData {
            params,
            insts: Vec::new(),
        });
        self.ssa.add_block();
        b
    }

    pub fn block_params(&self, b: BlockId) -> BuildResult<Vec<ValueId>> {
        match self.func.blocks.get(b.index()) {
            Some(bd) => Ok(bd.params.clone()),
            None => self.err(format!("unknown block {b}")),
        }
    }

    /// Continue appending at the end of `b`, placing it in the layout on first use.
    pub fn switch_to(&mut self, b: BlockId) {
        if !self.func.layout.contains(&b) {
            self.func.layout.push(b);
        }
        self.current = Some(b);
    }

    pub fn current_block(&self) -> Option<BlockId> {
        self.current
    }

    /// Whether the current block already ends in a terminator.
    pub fn is_terminated(&self) -> bool {
        match self.current {
            Some(b) => self.func.blocks[b.index()]
                .insts
                .last()
                .is_some_and(|i| self.func.insts[i.index()].op.is_terminator()),
            None => true,
        }
    }

    /// Append an instruction with explicit result types. Every other method goes through here.
    pub fn push(
        &mut self,
        op: Op,
        args: &[ValueId],
        result_types: &[Type],
        targets: Vec<BlockCall>,
    ) -> BuildResult<Vec<ValueId>> {
        let Some(block) = self.current else {
            return self.err("no current block to append to");
        };
        if self.is_terminated() {
            return self.err(format!(
                "{block} already ends in a terminator; cannot append `{}`",
                op.mnemonic()
            ));
        }
        for v in args
            .iter()
            .chain(targets.iter().flat_map(|t| t.args.iter()))
        {
            if !self.func.has_value(*v) {
                return self.err(format!("unknown value {v} used by `{}`", op.mnemonic()));
            }
        }
        for t in &targets {
            if !self.func.has_block(t.block) {
                return self.err(format!(
                    "unknown block {} used by `{}`",
                    t.block,
                    op.mnemonic()
                ));
            }
            if Some(t.block) == self.func.entry() {
                return self.err(format!(
                    "`{}` targets the entry block {}, which cannot be branched to (add a loop header block)",
                    op.mnemonic(),
                    t.block
                ));
            }
            if self.ssa.is_sealed(t.block) {
                return self.err(format!(
                    "`{}` targets {}, which is sealed: all its predecessors were declared \
                     (seal a block only after the last branch to it)",
                    op.mnemonic(),
                    t.block
                ));
            }
        }
        let inst = InstId::from_index(self.func.insts.len());
        let mut results = Vec::with_capacity(result_types.len());
        for (n, ty) in result_types.iter().enumerate() {
            let v = ValueId::from_index(self.func.values.len());
            self.func.values.push(ValueData {
                ty: ty.clone(),
                def: ValueDef::Result(inst, n as u32),
            });
            results.push(v);
        }
        self.func.insts.push(InstData {
            op,
            args: args.to_vec(),
            results: results.clone(),
            targets: targets.clone(),
            loc: self.loc.clone(),
        });
        self.func.blocks[block.index()].insts.push(inst);
        for (target, t) in targets.iter().enumerate() {
            self.ssa.add_pred(
                t.block,
                Pred {
                    block,
                    inst,
                    target,
                },
            );
        }
        Ok(results)
    }

    fn push1(&mut self, op: Op, args: &[ValueId], ty: Type) -> BuildResult<ValueId> {
        Ok(self.push(op, args, &[ty], Vec::new())?[0])
    }

    /// One result of the type the op's table row gives (`infer::result_types`),
    /// for the ops whose row fixes it (the special registers): one rule, the row's.
    fn push_row1(&mut self, op: Op, args: &[ValueId]) -> BuildResult<ValueId> {
        Ok(self.push_inferred(op, args)?[0])
    }

    fn push0(&mut self, op: Op, args: &[ValueId]) -> BuildResult<()> {
        self.push(op, args, &[], Vec::new()).map(|_| ())
    }

    // ---------------------------------------------------------------- scalar

    /// An integer constant of an integer type (the value is truncated to the type's width).
    pub fn iconst(&mut self, ty: Type, value: i64) -> BuildResult<ValueId> {
        let Some(s) = ty.as_scalar().filter(|s| s.is_int()) else {
            return self.err(format!("iconst needs an integer type, got {ty}"));
        };
        self.push1(Op::Const(ConstValue::Int(normalize_int(s, value))), &[], ty)
    }
    pub fn fconst(&mut self, ty: Type, value: f64) -> BuildResult<ValueId> {
        if !ty.is_float() {
            return self.err(format!("fconst needs a float type, got {ty}"));
        }
        self.push1(Op::Const(ConstValue::float(value)), &[], ty)
    }
    pub fn bconst(&mut self, value: bool) -> BuildResult<ValueId> {
        self.push1(Op::Const(ConstValue::Bool(value)), &[], Type::BOOL)
    }
    pub fn binary(&mut self, op: BinOp, a: ValueId, b: ValueId) -> BuildResult<ValueId> {
        let ty = self.value_type(a)?.clone();
        self.value_type(b)?;
        self.push1(Op::Binary(op), &[a, b], ty)
    }
    pub fn unary(&mut self, op: UnOp, a: ValueId) -> BuildResult<ValueId> {
        let ty = self.value_type(a)?.clone();
        self.push1(Op::Unary(op), &[a], ty)
    }
    pub fn fma(&mut self, a: ValueId, b: ValueId, c: ValueId) -> BuildResult<ValueId> {
        let ty = self.value_type(a)?.clone();
        self.push1(Op::Fma, &[a, b, c], ty)
    }
    pub fn cmp(&mut self, op: CmpOp, a: ValueId, b: ValueId) -> BuildResult<ValueId> {
        self.push1(Op::Cmp(op), &[a, b], Type::BOOL)
    }
    pub fn select(&mut self, cond: ValueId, a: ValueId, b: ValueId) -> BuildResult<ValueId> {
        let ty = self.value_type(a)?.clone();
        self.push1(Op::Select, &[cond, a, b], ty)
    }
    pub fn cast(&mut self, a: ValueId, ty: Type) -> BuildResult<ValueId> {
        self.push1(Op::Cast, &[a], ty)
    }
    pub fn bitcast(&mut self, a: ValueId, ty: Type) -> BuildResult<ValueId> {
        self.push1(Op::Bitcast, &[a], ty)
    }
    pub fn extract(&mut self, vec: ValueId, lane: u32) -> BuildResult<ValueId> {
        let ty = match self.value_type(vec)? {
            Type::Vector(s, _) => Type::Scalar(*s),
            other => return self.err(format!("extract needs a vector, got {other}")),
        };
        self.push1(Op::Extract(lane), &[vec], ty)
    }
    pub fn insert(&mut self, vec: ValueId, scalar: ValueId, lane: u32) -> BuildResult<ValueId> {
        let ty = self.value_type(vec)?.clone();
        self.push1(Op::Insert(lane), &[vec, scalar], ty)
    }

    // ---------------------------------------------------------------- memory

    pub fn load(&mut self, ptr: ValueId) -> BuildResult<ValueId> {
        let ty = match self.value_type(ptr)? {
            Type::Ptr(_, t) => (**t).clone(),
            other => return self.err(format!("load needs a pointer, got {other}")),
        };
        self.push1(Op::Load, &[ptr], ty)
    }
    /// `ptr + index` elements of the pointee type.
    pub fn ptr_add(&mut self, ptr: ValueId, index: ValueId) -> BuildResult<ValueId> {
        let ty = self.value_type(ptr)?.clone();
        self.push1(Op::PtrAdd, &[ptr, index], ty)
    }
    pub fn ptr_cast(&mut self, ptr: ValueId, ty: Type) -> BuildResult<ValueId> {
        self.push1(Op::PtrCast, &[ptr], ty)
    }
    pub fn alloca(&mut self, elem: Type, count: u64) -> BuildResult<ValueId> {
        let ty = Type::ptr(AddrSpace::Local, elem.clone());
        self.push1(Op::Alloca { elem, count }, &[], ty)
    }
    pub fn shared_alloc(&mut self, elem: Type, count: u64) -> BuildResult<ValueId> {
        self.shared_alloc_aligned(elem, count, 0)
    }
    pub fn dyn_shared(&mut self, elem: Type) -> BuildResult<ValueId> {
        self.dyn_shared_aligned(elem, 0)
    }
    /// `shared_alloc` aligned to `align` bytes (a power of two up to 1024; 0: default).
    pub fn shared_alloc_aligned(
        &mut self,
        elem: Type,
        count: u64,
        align: u32,
    ) -> BuildResult<ValueId> {
        let ty = Type::ptr(AddrSpace::Shared, elem.clone());
        self.push1(Op::SharedAlloc { elem, count, align }, &[], ty)
    }
    /// `dyn_shared` aligned to `align` bytes (a power of two up to 1024; 0: default).
    pub fn dyn_shared_aligned(&mut self, elem: Type, align: u32) -> BuildResult<ValueId> {
        let ty = Type::ptr(AddrSpace::Shared, elem.clone());
        self.push1(Op::DynShared { elem, align }, &[], ty)
    }

    // ---------------------------------------------------------------- GPU

    pub fn thread_idx(&mut self, d: Dim) -> BuildResult<ValueId> {
        self.push_row1(Op::ThreadIdx(d), &[])
    }
    pub fn block_idx(&mut self, d: Dim) -> BuildResult<ValueId> {
        self.push_row1(Op::BlockIdx(d), &[])
    }
    pub fn block_dim(&mut self, d: Dim) -> BuildResult<ValueId> {
        self.push_row1(Op::BlockDim(d), &[])
    }
    pub fn grid_dim(&mut self, d: Dim) -> BuildResult<ValueId> {
        self.push_row1(Op::GridDim(d), &[])
    }
    pub fn lane_id(&mut self) -> BuildResult<ValueId> {
        self.push_row1(Op::LaneId, &[])
    }
    pub fn fence(&mut self, scope: Scope) -> BuildResult<()> {
        self.push0(Op::Fence(scope), &[])
    }
    /// Atomic read-modify-write; returns the old value.
    pub fn atomic(
        &mut self,
        op: AtomicOp,
        scope: Scope,
        ptr: ValueId,
        value: ValueId,
    ) -> BuildResult<ValueId> {
        let ty = self.value_type(value)?.clone();
        self.push1(Op::Atomic { op, scope }, &[ptr, value], ty)
    }
    /// Compare-and-swap: stores `desired` if the memory holds `expected`; returns the old value.
    pub fn atomic_cas(
        &mut self,
        scope: Scope,
        ptr: ValueId,
        expected: ValueId,
        desired: ValueId,
    ) -> BuildResult<ValueId> {
        let ty = self.value_type(expected)?.clone();
        self.push1(Op::AtomicCas { scope }, &[ptr, expected, desired], ty)
    }
    pub fn shfl(
        &mut self,
        mode: ShflMode,
        mask: ValueId,
        value: ValueId,
        lane: ValueId,
        width: u32,
    ) -> BuildResult<ValueId> {
        let ty = self.value_type(value)?.clone();
        self.push1(Op::Shfl { mode, width }, &[mask, value, lane], ty)
    }
    pub fn vote(&mut self, mode: VoteMode, mask: ValueId, pred: ValueId) -> BuildResult<ValueId> {
        let ty = if mode == VoteMode::Ballot {
            Type::U32
        } else {
            Type::BOOL
        };
        self.push1(Op::Vote(mode), &[mask, pred], ty)
    }
    /// `match.any` gives the mask of lanes holding the same value; `match.all`
    /// gives (mask, whether all lanes in `mask` agree).
    pub fn match_(
        &mut self,
        mode: MatchMode,
        mask: ValueId,
        value: ValueId,
    ) -> BuildResult<Vec<ValueId>> {
        let tys: &[Type] = match mode {
            MatchMode::Any => &[Type::U32],
            MatchMode::All => &[Type::U32, Type::BOOL],
        };
        self.push(Op::Match(mode), &[mask, value], tys, Vec::new())
    }
    pub fn mma_load(
        &mut self,
        frag: FragType,
        layout: Layout,
        ptr: ValueId,
        ldm: ValueId,
    ) -> BuildResult<ValueId> {
        self.push1(Op::MmaLoad { frag, layout }, &[ptr, ldm], Type::Frag(frag))
    }
    pub fn mma_fill(&mut self, frag: FragType, value: ValueId) -> BuildResult<ValueId> {
        self.push1(Op::MmaFill, &[value], Type::Frag(frag))
    }
    /// D = A * B + C; D has C's fragment type.
    pub fn mma(&mut self, a: ValueId, b: ValueId, c: ValueId) -> BuildResult<ValueId> {
        let ty = self.value_type(c)?.clone();
        self.push1(Op::Mma, &[a, b, c], ty)
    }
    pub fn mma_store(
        &mut self,
        layout: Layout,
        ptr: ValueId,
        frag: ValueId,
        ldm: ValueId,
    ) -> BuildResult<()> {
        self.push0(Op::MmaStore { layout }, &[ptr, frag, ldm])
    }
    pub fn cp_async(
        &mut self,
        bytes: u32,
        cache: CacheHint,
        dst: ValueId,
        src: ValueId,
    ) -> BuildResult<()> {
        self.push0(Op::CpAsync { bytes, cache }, &[dst, src])
    }
    /// Wait until at most `pending` committed groups are still in flight.
    pub fn cp_async_wait(&mut self, pending: u32) -> BuildResult<()> {
        self.push0(Op::CpAsyncWait(pending), &[])
    }

    // ---------------------------------------------------------------- Hopper barriers (issue 13)

    /// An `mbarrier` operation on `args` (the barrier, a `ptr<shared, u64>`, first;
    /// see the table row for the rest). Returns the state token (`arrive`,
    /// `arrive_expect_tx`), the completion flag (`test_wait`, `try_wait_parity`) or `None`.
    pub fn mbarrier(&mut self, op: MbarrierOp, args: &[ValueId]) -> BuildResult<Option<ValueId>> {
        let ty = match op {
            MbarrierOp::Arrive | MbarrierOp::ArriveExpectTx => Type::U64,
            MbarrierOp::TestWait | MbarrierOp::TryWaitParity => Type::BOOL,
            MbarrierOp::Init | MbarrierOp::CompleteTx | MbarrierOp::Inval => {
                return self.push0(Op::Mbarrier(op), args).map(|_| None);
            }
        };
        self.push1(Op::Mbarrier(op), args, ty).map(Some)
    }
    /// Spins on `mbarrier.try_wait_parity` until the phase of parity `parity`
    /// (u32) of `bar` has completed; `hint` (u32) is try_wait's suspend-time
    /// hint in ns (0: the hardware's default). Building continues in a new
    /// block after the loop. zyntax's one wait loop: the tile layer's
    /// pipelines and the kernel library (`FunctionBuilder.mbarrier_wait_parity`
    /// in Python) call it.
    pub fn mbarrier_wait_parity(
        &mut self,
        bar: ValueId,
        parity: ValueId,
        hint: ValueId,
    ) -> BuildResult<()> {
        let spin = self.create_block(&[]);
        let done = self.create_block(&[]);
        self.jump(spin, &[])?;
        self.switch_to(spin);
        let ok = self.push1(
            Op::Mbarrier(MbarrierOp::TryWaitParity),
            &[bar, parity, hint],
            Type::BOOL,
        )?;
        self.branch(ok, done, &[], spin, &[])?;
        // Every branch to both blocks is known: variables read after the loop resolve now.
        self.seal_block(spin)?;
        self.seal_block(done)?;
        self.switch_to(done);
        Ok(())
    }

    // ---------------------------------------------------------------- clusters, PDL, grid sync (h13-cluster)

    pub fn cluster_idx(&mut self, d: Dim) -> BuildResult<ValueId> {
        self.push_row1(Op::ClusterIdx(d), &[])
    }
    pub fn cluster_dim(&mut self, d: Dim) -> BuildResult<ValueId> {
        self.push_row1(Op::ClusterDim(d), &[])
    }
    pub fn cluster_block_idx(&mut self, d: Dim) -> BuildResult<ValueId> {
        self.push_row1(Op::ClusterBlockIdx(d), &[])
    }
    pub fn cluster_grid_dim(&mut self, d: Dim) -> BuildResult<ValueId> {
        self.push_row1(Op::ClusterGridDim(d), &[])
    }
    pub fn cluster_ctarank(&mut self) -> BuildResult<ValueId> {
        self.push_row1(Op::ClusterCtaRank, &[])
    }
    pub fn cluster_nctarank(&mut self) -> BuildResult<ValueId> {
        self.push_row1(Op::ClusterNctaRank, &[])
    }
    pub fn is_explicit_cluster(&mut self) -> BuildResult<ValueId> {
        self.push_row1(Op::IsExplicitCluster, &[])
    }
    pub fn cluster_barrier(&mut self, op: ClusterBarrierOp) -> BuildResult<()> {
        self.push0(Op::ClusterBarrier(op), &[])
    }
    /// `ptr` (a `ptr<shared, T>`) in the cluster's block of rank `rank`: a `ptr<shared_cluster, T>`.
    pub fn mapa(&mut self, ptr: ValueId, rank: ValueId) -> BuildResult<ValueId> {
        // A non-pointer operand is the verifier's to report; the result type is then moot.
        let elem = match self.value_type(ptr)? {
            Type::Ptr(_, e) => (**e).clone(),
            _ => Type::U8,
        };
        self.push1(
            Op::Mapa,
            &[ptr, rank],
            Type::ptr(AddrSpace::SharedCluster, elem),
        )
    }
    pub fn griddep(&mut self, op: GriddepOp) -> BuildResult<()> {
        self.push0(Op::Griddep(op), &[])
    }
    pub fn griddep_launch_dependents(&mut self) -> BuildResult<()> {
        self.griddep(GriddepOp::LaunchDependents)
    }
    pub fn griddep_wait(&mut self) -> BuildResult<()> {
        self.griddep(GriddepOp::Wait)
    }

    // ---------------------------------------------------------------- warp MMA (issue 12)

    /// `D = A * B + C` over the warp (`mma.sync`); D has C's type.
    pub fn mma_sync(
        &mut self,
        shape: WarpShape,
        elem: MmaElem,
        a: ValueId,
        b: ValueId,
        c: ValueId,
    ) -> BuildResult<ValueId> {
        let ty = self.value_type(c)?.clone();
        self.push1(Op::MmaSync { shape, elem }, &[a, b, c], ty)
    }
    /// `num` (1, 2, 4) 8x8 b16 matrices from shared memory: `u32` or `vec<u32, num>`.
    pub fn ldmatrix(&mut self, num: u32, trans: bool, ptr: ValueId) -> BuildResult<ValueId> {
        let ty = if num == 1 {
            Type::U32
        } else {
            Type::Vector(ScalarType::U32, num)
        };
        self.push1(Op::Ldmatrix { num, trans }, &[ptr], ty)
    }
    /// Store `num` 8x8 b16 matrices to shared memory (sm_90).
    pub fn stmatrix(
        &mut self,
        num: u32,
        trans: bool,
        ptr: ValueId,
        value: ValueId,
    ) -> BuildResult<()> {
        self.push0(Op::Stmatrix { num, trans }, &[ptr, value])
    }

    // ---------------------------------------------------------------- warpgroup MMA (issue 13)

    /// A `wgmma` shared-memory matrix descriptor (u64) for the matrix at `ptr`.
    pub fn wgmma_desc(
        &mut self,
        swizzle: Swizzle,
        ptr: ValueId,
        lbo: ValueId,
        sbo: ValueId,
    ) -> BuildResult<ValueId> {
        self.push1(Op::WgmmaDesc(swizzle), &[ptr, lbo, sbo], Type::U64)
    }
    /// `D = (scale_d ? acc : 0) + A * B` over the warpgroup; D has acc's type.
    pub fn wgmma(
        &mut self,
        form: Wgmma,
        acc: ValueId,
        a: ValueId,
        b: ValueId,
        scale_d: ValueId,
    ) -> BuildResult<ValueId> {
        let ty = self.value_type(acc)?.clone();
        self.push1(Op::Wgmma(form), &[acc, a, b, scale_d], ty)
    }
    /// An accumulator of zeros of type `ty` (`vec<f32|f16|i32, N/2>`).
    pub fn wgmma_zero(&mut self, ty: Type) -> BuildResult<ValueId> {
        self.push1(Op::WgmmaZero, &[], ty)
    }
    /// Wait until at most `n` committed wgmma groups are pending.
    pub fn wgmma_wait_group(&mut self, n: u32) -> BuildResult<()> {
        self.push0(Op::WgmmaWait(n), &[])
    }
    /// `setmaxnreg.inc` (`inc`) or `.dec` to `count` registers per thread.
    pub fn setmaxnreg(&mut self, count: u32, inc: bool) -> BuildResult<()> {
        self.push0(Op::Setmaxnreg { count, inc }, &[])
    }
    /// True in the lowest active lane of the warp.
    pub fn elect_sync(&mut self) -> BuildResult<ValueId> {
        self.push_row1(Op::ElectSync, &[])
    }

    /// Fast approximate f32 math (`ex2.approx`, `rcp.approx`, `tanh.approx`).
    pub fn approx(&mut self, op: ApproxOp, a: ValueId) -> BuildResult<ValueId> {
        self.push1(Op::Approx(op), &[a], Type::F32)
    }

    /// A global load with cache operator `cop`.
    pub fn load_cached(&mut self, cop: CacheOp, ptr: ValueId) -> BuildResult<ValueId> {
        let ty = self
            .value_type(ptr)?
            .pointee()
            .cloned()
            .unwrap_or(Type::BOOL);
        self.push1(Op::LoadCached(cop), &[ptr], ty)
    }
    /// A global store with cache operator `cop`.
    pub fn store_cached(&mut self, cop: CacheOp, ptr: ValueId, value: ValueId) -> BuildResult<()> {
        self.push0(Op::StoreCached(cop), &[ptr, value])
    }

    /// Pointer to the module global `@name`; `ty` is its `ptr<space, elem>`
    /// ([`crate::GlobalVar::ptr_type`]).
    pub fn global_addr(&mut self, name: impl Into<String>, ty: Type) -> BuildResult<ValueId> {
        self.push1(Op::GlobalAddr(name.into()), &[], ty)
    }

    // ---------------------------------------------------------------- calls, control flow

    pub fn call(
        &mut self,
        callee: impl Into<String>,
        args: &[ValueId],
        returns: &[Type],
    ) -> BuildResult<Vec<ValueId>> {
        self.push(Op::Call(callee.into()), args, returns, Vec::new())
    }
    pub fn jump(&mut self, block: BlockId, args: &[ValueId]) -> BuildResult<()> {
        self.push(
            Op::Jump,
            &[],
            &[],
            vec![BlockCall {
                block,
                args: args.to_vec(),
            }],
        )
        .map(|_| ())
    }
    pub fn branch(
        &mut self,
        cond: ValueId,
        then_block: BlockId,
        then_args: &[ValueId],
        else_block: BlockId,
        else_args: &[ValueId],
    ) -> BuildResult<()> {
        let targets = vec![
            BlockCall {
                block: then_block,
                args: then_args.to_vec(),
            },
            BlockCall {
                block: else_block,
                args: else_args.to_vec(),
            },
        ];
        self.push(Op::Branch, &[cond], &[], targets).map(|_| ())
    }
    pub fn ret(&mut self, values: &[ValueId]) -> BuildResult<()> {
        self.push0(Op::Return, values)
    }

    // ---------------------------------------------------------------- structured control flow

    /// Start `if cond { ... }`; the builder moves into the then-branch. `result_types`
    /// are the types of the values the if yields (from both branches) at `end_if`.
    pub fn begin_if(&mut self, cond: ValueId, result_types: &[Type]) -> BuildResult<IfFrame> {
        let then_block = self.create_block(&[]);
        let else_block = self.create_block(&[]);
        let merge = self.create_block(result_types);
        self.branch(cond, then_block, &[], else_block, &[])?;
        let branch = *self.func.blocks[self.current.map_or(0, BlockId::index)]
            .insts
            .last()
            .ok_or_else(|| BuildError {
                function: self.func.name.clone(),
                message: "internal: branch missing".into(),
            })?;
        // Each branch has exactly one predecessor, the `br`.
        self.seal_block(then_block)?;
        self.seal_block(else_block)?;
        self.switch_to(then_block);
        Ok(IfFrame {
            branch,
            else_block,
            merge,
            has_else: false,
        })
    }

    /// End the then-branch (yielding `then_values` unless it already terminated) and start the else-branch.
    pub fn begin_else(&mut self, frame: &mut IfFrame, then_values: &[ValueId]) -> BuildResult<()> {
        if frame.has_else {
            return self.err("begin_else called twice for one if");
        }
        if !self.is_terminated() {
            self.jump(frame.merge, then_values)?;
        }
        frame.has_else = true;
        self.switch_to(frame.else_block);
        Ok(())
    }

    /// End the if (yielding `values` from the open branch) and continue after it;
    /// returns the merged results.
    pub fn end_if(&mut self, frame: IfFrame, values: &[ValueId]) -> BuildResult<Vec<ValueId>> {
        if !self.is_terminated() {
            self.jump(frame.merge, values)?;
        }
        if !frame.has_else {
            if !self.func.blocks[frame.merge.index()].params.is_empty() {
                return self.err("an if that yields values needs an else branch");
            }
            // No else: branch straight to the merge block.
            self.func.insts[frame.branch.index()].targets[1].block = frame.merge;
            self.ssa
                .move_pred(frame.branch, 1, frame.else_block, frame.merge);
        }
        self.seal_block(frame.merge)?;
        self.switch_to(frame.merge);
        self.block_params(frame.merge)
    }

    /// Start `for iv in range(start, stop, step)` (step > 0) carrying `carried`
    /// values around the loop. The builder moves into the body; `frame.iv` and
    /// `frame.carried` are valid there.
    pub fn begin_for(
        &mut self,
        start: ValueId,
        stop: ValueId,
        step: ValueId,
        carried: &[ValueId],
    ) -> BuildResult<ForFrame> {
        let mut header_types = vec![self.value_type(start)?.clone()];
        let mut carried_types = Vec::new();
        for v in carried {
            carried_types.push(self.value_type(*v)?.clone());
        }
        header_types.extend(carried_types.iter().cloned());
        let header = self.create_block(&header_types);
        let body = self.create_block(&[]);
        let exit = self.create_block(&carried_types);
        let mut init = vec![start];
        init.extend_from_slice(carried);
        self.jump(header, &init)?;
        self.switch_to(header);
        let hp = self.block_params(header)?;
        let cond = self.cmp(CmpOp::Lt, hp[0], stop)?;
        self.branch(cond, body, &[], exit, &hp[1..])?;
        // The header waits for its back edges (end_for, continue_for) and the
        // exit for its breaks; the body has only the header.
        self.seal_block(body)?;
        self.switch_to(body);
        Ok(ForFrame {
            header,
            exit,
            iv: hp[0],
            step,
            carried: hp[1..].to_vec(),
        })
    }

    /// End the loop body (passing `next` as the carried values of the next
    /// iteration) and continue after the loop; returns the carried values at exit.
    pub fn end_for(&mut self, frame: ForFrame, next: &[ValueId]) -> BuildResult<Vec<ValueId>> {
        if next.len() != frame.carried.len() {
            return self.err(format!(
                "loop carries {} values but end_for got {}",
                frame.carried.len(),
                next.len()
            ));
        }
        if !self.is_terminated() {
            self.continue_for(&frame, next)?;
        }
        self.seal_block(frame.header)?;
        self.seal_block(frame.exit)?;
        self.switch_to(frame.exit);
        self.block_params(frame.exit)
    }

    /// `continue`: jump to the next iteration of the loop of `frame` (passing
    /// `next` as its carried values), ending the current block.
    pub fn continue_for(&mut self, frame: &ForFrame, next: &[ValueId]) -> BuildResult<()> {
        if next.len() != frame.carried.len() {
            return self.err(format!(
                "loop carries {} values but got {} for the next iteration",
                frame.carried.len(),
                next.len()
            ));
        }
        let iv_next = self.binary(BinOp::Add, frame.iv, frame.step)?;
        let mut args = vec![iv_next];
        args.extend_from_slice(next);
        self.jump(frame.header, &args)
    }

    /// `break`: leave the loop of `frame` (with `values` as the carried values
    /// at exit), ending the current block.
    pub fn break_for(&mut self, frame: &ForFrame, values: &[ValueId]) -> BuildResult<()> {
        if values.len() != frame.carried.len() {
            return self.err(format!(
                "loop carries {} values but break_for got {}",
                frame.carried.len(),
                values.len()
            ));
        }
        self.jump(frame.exit, values)
    }

    /// The finished function, canonicalized (ids in layout order). Seals the
    /// blocks left unsealed, which fails if a variable read is undefined on
    /// some path (see [`crate::ssa`]).
    pub fn finish(mut self) -> BuildResult<Function> {
        self.seal_all_blocks()?;
        self.resolve_aliases();
        self.func.canonicalize();
        Ok(self.func)
    }
}

/// Issue 12 (warp-sync): bit ops and the scoped memory model.
impl FunctionBuilder {
    /// A bit op (`bfe`, `bfi`, `prmt`, `shf.*`); operands as in its table row.
    pub fn bits(&mut self, op: BitOp, args: &[ValueId]) -> BuildResult<ValueId> {
        let want = Op::Bits(op).def().operands.map_or(0, <[_]>::len);
        if args.len() != want {
            return self.err(format!("`{op}` takes {want} operands, got {}", args.len()));
        }
        let ty = match op {
            BitOp::Bfe => self.value_type(args[0])?.clone(),
            BitOp::Bfi => self.value_type(args[1])?.clone(),
            _ => Type::U32,
        };
        self.push1(Op::Bits(op), args, ty)
    }
    /// Atomic read-modify-write without a result (`red`).
    pub fn red(
        &mut self,
        op: AtomicOp,
        scope: Scope,
        ptr: ValueId,
        value: ValueId,
    ) -> BuildResult<()> {
        self.push0(Op::Red { op, scope }, &[ptr, value])
    }
    /// Load with acquire semantics at `scope`.
    pub fn load_acquire(&mut self, scope: Scope, ptr: ValueId) -> BuildResult<ValueId> {
        let ty = match self.value_type(ptr)? {
            Type::Ptr(_, t) => (**t).clone(),
            other => return self.err(format!("load.acquire needs a pointer, got {other}")),
        };
        self.push1(Op::LoadAcquire(scope), &[ptr], ty)
    }
    /// Store with release semantics at `scope`.
    pub fn store_release(&mut self, scope: Scope, ptr: ValueId, value: ValueId) -> BuildResult<()> {
        self.push0(Op::StoreRelease(scope), &[ptr, value])
    }
    pub fn fence_acq_rel(&mut self, scope: Scope) -> BuildResult<()> {
        self.push0(Op::FenceAcqRel(scope), &[])
    }
    /// `redux.sync`: the reduction of `value` over the lanes in `mask`.
    pub fn redux(&mut self, op: ReduxOp, mask: ValueId, value: ValueId) -> BuildResult<ValueId> {
        let ty = self.value_type(value)?.clone();
        self.push1(Op::Redux(op), &[mask, value], ty)
    }

    // --- issue 12 (rest): named barriers, packed conversions
    /// `bar.sync id, count` (`arrive` false) or `bar.arrive id, count`.
    pub fn named_barrier(&mut self, arrive: bool, id: u32, count: u32) -> BuildResult<()> {
        self.push0(Op::NamedBarrier { arrive, id, count }, &[])
    }
    /// Two f32 packed as `fmt` (lo in lane 0 / the low half).
    pub fn cvt_pack(&mut self, fmt: PackFmt, lo: ValueId, hi: ValueId) -> BuildResult<ValueId> {
        self.push1(Op::CvtPack(fmt), &[lo, hi], fmt.packed_type())
    }
    /// A packed fp8 pair (u16) widened to `vec<f16, 2>`.
    pub fn cvt_unpack(&mut self, fmt: PackFmt, a: ValueId) -> BuildResult<ValueId> {
        self.push1(Op::CvtUnpack(fmt), &[a], Type::Vector(ScalarType::F16, 2))
    }
}

// ---------------------------------------------------------------- TMA (issue 13 item 2)

impl FunctionBuilder {
    /// `tma.load[.multicast]`: the box of `tmap` at `coords` (innermost first)
    /// into shared `dst`, its bytes completed on `bar`; with `multicast`, into
    /// every CTA of the cluster in the u16 mask.
    pub fn tma_load(
        &mut self,
        dst: ValueId,
        tmap: ValueId,
        bar: ValueId,
        coords: &[ValueId],
        multicast: Option<ValueId>,
    ) -> BuildResult<()> {
        let mut args = vec![dst, tmap, bar];
        args.extend_from_slice(coords);
        args.extend(multicast);
        self.push0(
            Op::TmaLoad {
                multicast: multicast.is_some(),
            },
            &args,
        )
    }
    /// `tma.store`: the box in shared `src` to `tmap`'s tensor at `coords`.
    pub fn tma_store(
        &mut self,
        tmap: ValueId,
        src: ValueId,
        coords: &[ValueId],
    ) -> BuildResult<()> {
        let mut args = vec![tmap, src];
        args.extend_from_slice(coords);
        self.push0(Op::TmaStore, &args)
    }
    /// `tma.reduce.<op>`: the box in shared `src` combined into `tmap`'s tensor at `coords`.
    pub fn tma_reduce(
        &mut self,
        op: BulkRedOp,
        tmap: ValueId,
        src: ValueId,
        coords: &[ValueId],
    ) -> BuildResult<()> {
        let mut args = vec![tmap, src];
        args.extend_from_slice(coords);
        self.push0(Op::TmaReduce(op), &args)
    }
    /// Waits until at most `pending` bulk groups are incomplete (`read`: still read their source).
    pub fn bulk_wait_group(&mut self, pending: u32, read: bool) -> BuildResult<()> {
        self.push0(Op::BulkWaitGroup { pending, read }, &[])
    }
    /// `bulk.reduce.<op>`: `bytes` of shared `src` combined element-wise into global `dst`.
    pub fn bulk_reduce(
        &mut self,
        op: BulkRedOp,
        dst: ValueId,
        src: ValueId,
        bytes: ValueId,
    ) -> BuildResult<()> {
        self.push0(Op::BulkReduce(op), &[dst, src, bytes])
    }
}

/// Truncate an integer to the width of its type and re-extend it by the type's
/// signedness, so equal values always have one representation.
pub fn normalize_int(s: ScalarType, value: i64) -> i64 {
    let bits = s.bits();
    if bits >= 64 || !s.is_int() {
        return value;
    }
    let shift = 64 - bits;
    if s.is_signed() {
        (value << shift) >> shift
    } else {
        ((value as u64) << shift >> shift) as i64
    }
}

/// A fragment type with the layout rules applied (A/B carry a layout, accumulators do not).
pub fn frag_type(
    kind: FragKind,
    shape: crate::types::MmaShape,
    elem: ScalarType,
    layout: Option<Layout>,
) -> FragType {
    FragType {
        kind,
        shape,
        elem,
        layout: if kind == FragKind::Acc { None } else { layout },
    }
}
