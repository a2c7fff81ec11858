//! GPU instructions → NVVM intrinsics, LLVM atomics and (for scoped atomics) inline PTX.
//!
//! Scoped atomics: LLVM 19's NVPTX backend ignores `syncscope` on
//! `atomicrmw`/`cmpxchg` (it always emits the default `.gpu` scope), and its
//! scoped `llvm.nvvm.atomic.*.gen.*.{cta,sys}` intrinsics drop the state space
//! and treat unsigned min/max as signed. So atomics on `global` and `generic`
//! pointers are emitted as one inline `atom.<scope>[.global].<op>.<type>`
//! instruction each, with the scope spelled out (`.cta`, `.gpu`, `.sys`).
//! Atomics on `shared` pointers use LLVM's `atomicrmw`/`cmpxchg` (and the
//! `llvm.nvvm.atomic.load.{inc,dec}.32` intrinsics), which select
//! `atom.shared.*`: shared memory is private to the block, so the scope adds
//! nothing. Float `min`/`max`, and 16-bit `exch`, have no PTX `atom` form and
//! become a compare-and-swap loop at the requested scope.

use super::ty::{self, frag_elem_name, frag_regs, FragReg};
use super::FnLowering;
use crate::error::CompileResult;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{AsValueRef, BasicMetadataValueEnum, BasicValue, BasicValueEnum};
use inkwell::IntPredicate;
use zyntax_hir as hir;
use zyntax_hir::{
    AddrSpace, AtomicOp, CacheHint, Dim, FragKind, MatchMode, Op, ScalarType, Scope, ShflMode,
    Type, VoteMode,
};

impl<'ctx> FnLowering<'_, 'ctx> {
    pub(super) fn lower_gpu(&mut self, d: &hir::InstData) -> CompileResult<()> {
        match &d.op {
            Op::ThreadIdx(dim) => self.sreg(d, "tid", Some(*dim)),
            Op::BlockIdx(dim) => self.sreg(d, "ctaid", Some(*dim)),
            Op::BlockDim(dim) => self.sreg(d, "ntid", Some(*dim)),
            Op::GridDim(dim) => self.sreg(d, "nctaid", Some(*dim)),
            Op::LaneId => self.sreg(d, "laneid", None),
            Op::Barrier => {
                self.intrinsic("llvm.nvvm.barrier0", &[], &[])?;
                Ok(())
            }
            Op::Fence(scope) => {
                let name = match scope {
                    Scope::Block => "llvm.nvvm.membar.cta",
                    Scope::Device => "llvm.nvvm.membar.gl",
                    Scope::System => "llvm.nvvm.membar.sys",
                };
                self.intrinsic(name, &[], &[])?;
                Ok(())
            }
            Op::WarpSync => {
                let mask = self.int(self.arg(d, 0)?)?;
                self.intrinsic("llvm.nvvm.bar.warp.sync", &[], &[mask.into()])?;
                Ok(())
            }
            Op::Atomic { scope, .. }
                if matches!(
                    d.args.get(1).map(|v| self.hir_ty(*v)),
                    Some(Type::Vector(..))
                ) =>
            {
                self.atomic_half2(d, *scope, true)
            }
            Op::Atomic { op, scope } => self.atomic(d, *op, *scope),
            Op::AtomicCas { scope } => self.atomic_cas(d, *scope),
            Op::Shfl { mode, width } => self.shfl(d, *mode, *width),
            Op::Vote(mode) => self.vote(d, *mode),
            Op::Match(mode) => self.match_sync(d, *mode),
            Op::MmaLoad { frag, layout } => self.mma_load(d, frag, *layout),
            Op::MmaFill => self.mma_fill(d),
            Op::Mma => self.mma(d),
            Op::MmaStore { layout } => self.mma_store(d, *layout),
            Op::CpAsync { bytes, cache } => self.cp_async(d, *bytes, *cache),
            Op::CpAsyncCommit => {
                self.intrinsic("llvm.nvvm.cp.async.commit.group", &[], &[])?;
                Ok(())
            }
            Op::CpAsyncWait(n) => {
                let n = self.ctx().i32_type().const_int(u64::from(*n), false);
                self.intrinsic("llvm.nvvm.cp.async.wait.group", &[], &[n.into()])?;
                Ok(())
            }
            Op::Mbarrier(m) => self.mbarrier(d, *m),
            Op::FenceProxyAsync => self.hopper_fence(false),
            Op::FenceMbarrierInit => self.hopper_fence(true),
            Op::MmaSync { .. }
            | Op::Ldmatrix { .. }
            | Op::Stmatrix { .. }
            | Op::Approx(_)
            | Op::LoadCached(_)
            | Op::StoreCached(_) => self.lower_warp_mma(d),
            Op::WgmmaDesc(_)
            | Op::Wgmma(_)
            | Op::WgmmaZero
            | Op::WgmmaFence
            | Op::WgmmaCommit
            | Op::WgmmaWait(_)
            | Op::Setmaxnreg { .. }
            | Op::ElectSync => self.lower_wgmma(d),
            Op::TmaLoad { .. }
            | Op::TmaStore
            | Op::TmaReduce(_)
            | Op::BulkCopyG2S
            | Op::BulkCopyS2G
            | Op::BulkCommitGroup
            | Op::BulkWaitGroup { .. }
            | Op::PrefetchTensormap
            | Op::BulkReduce(_) => self.tma(d),
            Op::ClusterIdx(_)
            | Op::ClusterDim(_)
            | Op::ClusterBlockIdx(_)
            | Op::ClusterGridDim(_)
            | Op::ClusterCtaRank
            | Op::ClusterNctaRank
            | Op::IsExplicitCluster
            | Op::ClusterBarrier(_)
            | Op::Mapa
            | Op::MbarrierArriveCluster
            | Op::MbarrierArriveClusterRelaxed
            | Op::Griddep(_)
            | Op::GridSync => self.lower_cluster(d),
            _ => self.lower_sync(d),
        }
    }

    fn sreg(&mut self, d: &hir::InstData, reg: &str, dim: Option<Dim>) -> CompileResult<()> {
        let name = match dim {
            Some(dim) => format!("llvm.nvvm.read.ptx.sreg.{reg}.{dim}"),
            None => format!("llvm.nvvm.read.ptx.sreg.{reg}"),
        };
        let v = self.intrinsic_value(&name, &[], &[])?;
        self.set(self.result(d, 0)?, v);
        Ok(())
    }

    // ------------------------------------------------------------------ atomics

    /// Pointer operand 0's space, operand 1's scalar type, the pointer and
    /// the value of an `atomic`/`red`, with `sub` turned into `add` of the
    /// negation (PTX has no `atom.sub`/`red.sub`).
    pub(super) fn atomic_operands(
        &mut self,
        d: &hir::InstData,
        op: AtomicOp,
    ) -> CompileResult<(
        AddrSpace,
        ScalarType,
        inkwell::values::PointerValue<'ctx>,
        BasicValueEnum<'ctx>,
        AtomicOp,
    )> {
        let (p, v) = (self.arg(d, 0)?, self.arg(d, 1)?);
        let space = self
            .hir_ty(p)
            .addr_space()
            .ok_or_else(|| self.bug("atomic on a non-pointer"))?;
        let s = self.scalar_of(v)?;
        let ptr = self.ptr(p)?;
        let mut x = self.val(v)?;
        let mut op = op;
        if op == AtomicOp::Sub {
            x = if s.is_float() {
                self.fneg(x)?
            } else {
                let zero = x.get_type().const_zero();
                self.b
                    .build_binop(inkwell::values::InstructionOpcode::Sub, zero, x, "")?
            };
            op = AtomicOp::Add;
        }
        Ok((space, s, ptr, x, op))
    }

    fn atomic(&mut self, d: &hir::InstData, op: AtomicOp, scope: Scope) -> CompileResult<()> {
        let (space, s, ptr, x, op) = self.atomic_operands(d, op)?;
        let needs_loop = (s.is_float() && matches!(op, AtomicOp::Min | AtomicOp::Max))
            || (s.bits() == 16 && op == AtomicOp::Exch);
        let r = if needs_loop {
            self.cas_loop(ptr, space, scope, s, x, op)?
        } else if space == AddrSpace::Shared {
            self.shared_atomic(ptr, s, x, op)?
        } else {
            self.scoped_atomic(ptr, space, scope, s, x, op)?
        };
        self.set(self.result(d, 0)?, r);
        Ok(())
    }

    /// `atomicrmw` (monotonic) on shared memory.
    pub(super) fn shared_atomic(
        &mut self,
        ptr: inkwell::values::PointerValue<'ctx>,
        s: ScalarType,
        x: BasicValueEnum<'ctx>,
        op: AtomicOp,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        use inkwell::llvm_sys::LLVMAtomicRMWBinOp as R;
        let rmw = match (op, s.is_float(), s.is_signed()) {
            (AtomicOp::Add, true, _) => R::LLVMAtomicRMWBinOpFAdd,
            (AtomicOp::Add, false, _) => R::LLVMAtomicRMWBinOpAdd,
            (AtomicOp::Min, false, true) => R::LLVMAtomicRMWBinOpMin,
            (AtomicOp::Min, false, false) => R::LLVMAtomicRMWBinOpUMin,
            (AtomicOp::Max, false, true) => R::LLVMAtomicRMWBinOpMax,
            (AtomicOp::Max, false, false) => R::LLVMAtomicRMWBinOpUMax,
            (AtomicOp::And, false, _) => R::LLVMAtomicRMWBinOpAnd,
            (AtomicOp::Or, false, _) => R::LLVMAtomicRMWBinOpOr,
            (AtomicOp::Xor, false, _) => R::LLVMAtomicRMWBinOpXor,
            (AtomicOp::Exch, _, _) => R::LLVMAtomicRMWBinOpXchg,
            (AtomicOp::Inc | AtomicOp::Dec, false, _) if s.bits() == 32 => {
                let name = if op == AtomicOp::Inc {
                    "llvm.nvvm.atomic.load.inc.32"
                } else {
                    "llvm.nvvm.atomic.load.dec.32"
                };
                return self.intrinsic_value(
                    name,
                    &[ptr.get_type().into()],
                    &[ptr.into(), x.into()],
                );
            }
            _ => return Err(self.bug(format!("atomic {op} on {s} in shared memory"))),
        };
        if self.b.get_insert_block().is_none() {
            return Err(self.bug("builder not positioned"));
        }
        // SAFETY: the builder is positioned (checked above); pointer and value are
        // live values of this function. inkwell's wrapper only accepts integers.
        let v = unsafe {
            inkwell::llvm_sys::core::LLVMBuildAtomicRMW(
                self.b.as_mut_ptr(),
                rmw,
                ptr.as_value_ref(),
                x.as_value_ref(),
                inkwell::llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
                0,
            )
        };
        // SAFETY: LLVMBuildAtomicRMW returns a first-class value of x's type.
        Ok(unsafe { BasicValueEnum::new(v) })
    }

    /// The PTX register class (inline-asm constraint) and the LLVM type an
    /// operand of scalar type `s` travels in.
    pub(super) fn asm_operand(
        &self,
        s: ScalarType,
    ) -> CompileResult<(&'static str, BasicTypeEnum<'ctx>)> {
        let ctx = self.ctx();
        Ok(match s {
            ScalarType::F32 => ("f", ctx.f32_type().into()),
            ScalarType::F64 => ("d", ctx.f64_type().into()),
            _ => match s.bits() {
                16 => ("h", ctx.i16_type().into()),
                32 => ("r", ctx.i32_type().into()),
                64 => ("l", ctx.i64_type().into()),
                _ => return Err(self.bug(format!("no PTX atomic on {s}"))),
            },
        })
    }

    pub(super) fn reinterpret(
        &mut self,
        x: BasicValueEnum<'ctx>,
        t: BasicTypeEnum<'ctx>,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        if x.get_type() == t {
            return Ok(x);
        }
        Ok(self.b.build_bit_cast(x, t, "")?)
    }

    pub(super) fn scope_name(scope: Scope) -> &'static str {
        match scope {
            Scope::Block => "cta",
            Scope::Device => "gpu",
            Scope::System => "sys",
        }
    }

    pub(super) fn space_suffix(&self, space: AddrSpace) -> CompileResult<&'static str> {
        match space {
            AddrSpace::Global => Ok(".global"),
            // A shared_cluster pointer is a generic address (see `cluster.rs`).
            AddrSpace::Generic | AddrSpace::SharedCluster => Ok(""),
            AddrSpace::Shared => Ok(".shared"),
            other => Err(self.bug(format!("atomic on {other} memory"))),
        }
    }

    /// The `.type` suffix of `atom`/`red` `.<op>` on scalar type `s`.
    pub(super) fn atom_type(op: AtomicOp, s: ScalarType) -> Option<String> {
        let bits = s.bits();
        Some(match (op, s) {
            (AtomicOp::Add, ScalarType::F16) => "noftz.f16".to_string(),
            (AtomicOp::Add, ScalarType::BF16) => "noftz.bf16".to_string(),
            (AtomicOp::Add, ScalarType::F32) => "f32".to_string(),
            (AtomicOp::Add, ScalarType::F64) => "f64".to_string(),
            (AtomicOp::Add, _) if s.is_int() => format!("u{bits}"),
            (AtomicOp::Min | AtomicOp::Max, _) if s.is_signed() => format!("s{bits}"),
            (AtomicOp::Min | AtomicOp::Max, _) if s.is_unsigned() => format!("u{bits}"),
            (AtomicOp::And | AtomicOp::Or | AtomicOp::Xor, _) if s.is_int() => format!("b{bits}"),
            (AtomicOp::Exch, _) => format!("b{bits}"),
            (AtomicOp::Inc | AtomicOp::Dec, ScalarType::U32 | ScalarType::I32) => "u32".to_string(),
            _ => return None,
        })
    }

    /// One `atom.<scope>.<space>.<op>.<type>` in inline PTX.
    pub(super) fn scoped_atomic(
        &mut self,
        ptr: inkwell::values::PointerValue<'ctx>,
        space: AddrSpace,
        scope: Scope,
        s: ScalarType,
        x: BasicValueEnum<'ctx>,
        op: AtomicOp,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        let ty_suffix =
            Self::atom_type(op, s).ok_or_else(|| self.bug(format!("atomic {op} on {s}")))?;
        let (cons, at) = if matches!(op, AtomicOp::Exch) {
            // exch moves bits: floats travel in integer registers.
            let (c, t) = self.asm_operand(s)?;
            match s {
                ScalarType::F32 => ("r", self.ctx().i32_type().into()),
                ScalarType::F64 => ("l", self.ctx().i64_type().into()),
                _ => (c, t),
            }
        } else {
            self.asm_operand(s)?
        };
        let text = format!(
            "atom.{}{}.{}.{ty_suffix} $0, [$1], $2;",
            Self::scope_name(scope),
            self.space_suffix(space)?,
            op.name(),
        );
        let xa = self.reinterpret(x, at)?;
        let constraints = format!("={cons},l,{cons},~{{memory}}");
        let r = self
            .asm(&text, &constraints, Some(at), &[ptr.into(), xa.into()])?
            .ok_or_else(|| self.bug("atom returned nothing"))?;
        self.reinterpret(r, x.get_type())
    }

    /// Compare-and-swap of raw bits; returns the old bits.
    fn cas_bits(
        &mut self,
        ptr: inkwell::values::PointerValue<'ctx>,
        space: AddrSpace,
        scope: Scope,
        expected: BasicValueEnum<'ctx>,
        desired: BasicValueEnum<'ctx>,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        let bits = expected.get_type().into_int_type().get_bit_width();
        if space == AddrSpace::Shared {
            let pair = self.b.build_cmpxchg(
                ptr,
                expected,
                desired,
                inkwell::AtomicOrdering::Monotonic,
                inkwell::AtomicOrdering::Monotonic,
            )?;
            return Ok(self.b.build_extract_value(pair, 0, "")?);
        }
        let cons = match bits {
            16 => "h",
            32 => "r",
            64 => "l",
            _ => return Err(self.bug(format!("no {bits}-bit atom.cas"))),
        };
        let text = format!(
            "atom.{}{}.cas.b{bits} $0, [$1], $2, $3;",
            Self::scope_name(scope),
            self.space_suffix(space)?
        );
        let constraints = format!("={cons},l,{cons},{cons},~{{memory}}");
        self.asm(
            &text,
            &constraints,
            Some(expected.get_type()),
            &[ptr.into(), expected.into(), desired.into()],
        )?
        .ok_or_else(|| self.bug("atom.cas returned nothing"))
    }

    fn atomic_cas(&mut self, d: &hir::InstData, scope: Scope) -> CompileResult<()> {
        let p = self.arg(d, 0)?;
        let space = self
            .hir_ty(p)
            .addr_space()
            .ok_or_else(|| self.bug("cas on a non-pointer"))?;
        let ptr = self.ptr(p)?;
        let ev = self.arg(d, 1)?;
        let bits = self.scalar_of(ev)?.bits();
        let e = self.val(ev)?;
        let n = self.val(self.arg(d, 2)?)?;
        let it: BasicTypeEnum = self.int_ty(bits)?.into();
        let (eb, nb) = (self.reinterpret(e, it)?, self.reinterpret(n, it)?);
        let old = self.cas_bits(ptr, space, scope, eb, nb)?;
        let r = self.reinterpret(old, e.get_type())?;
        self.set(self.result(d, 0)?, r);
        Ok(())
    }

    /// `old = *p; loop { new = op(old, x); prev = cas(p, old, new); if prev == old break; old = prev }`.
    /// Compares bits, so NaNs cannot make it spin.
    pub(super) fn cas_loop(
        &mut self,
        ptr: inkwell::values::PointerValue<'ctx>,
        space: AddrSpace,
        scope: Scope,
        s: ScalarType,
        x: BasicValueEnum<'ctx>,
        op: AtomicOp,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        let ctx = self.ctx();
        let vt = x.get_type();
        let it = self.int_ty(s.bits())?;
        let start = self
            .b
            .get_insert_block()
            .ok_or_else(|| self.bug("builder not positioned"))?;
        let first = self.b.build_load(it, ptr, "")?;
        if let Some(i) = first.as_instruction_value() {
            let _ = i.set_volatile(true);
        }
        let loop_bb = ctx.append_basic_block(self.fv, "cas.loop");
        let done_bb = ctx.append_basic_block(self.fv, "cas.done");
        self.b.build_unconditional_branch(loop_bb)?;
        self.b.position_at_end(loop_bb);
        let phi = self.b.build_phi(it, "")?;
        let old_bits = phi.as_basic_value();
        let old = self.reinterpret(old_bits, vt)?;
        let new = match op {
            AtomicOp::Min => self.intrinsic_value("llvm.minnum", &[vt], &[old.into(), x.into()])?,
            AtomicOp::Max => self.intrinsic_value("llvm.maxnum", &[vt], &[old.into(), x.into()])?,
            AtomicOp::Exch => x,
            _ => return Err(self.bug(format!("CAS loop for {op}"))),
        };
        let new_bits = self.reinterpret(new, it.into())?;
        let prev = self.cas_bits(ptr, space, scope, old_bits, new_bits)?;
        let same = self.b.build_int_compare(
            IntPredicate::EQ,
            prev.into_int_value(),
            old_bits.into_int_value(),
            "",
        )?;
        let here = self
            .b
            .get_insert_block()
            .ok_or_else(|| self.bug("builder not positioned"))?;
        phi.add_incoming(&[
            (&first as &dyn BasicValue, start),
            (&prev as &dyn BasicValue, here),
        ]);
        self.b.build_conditional_branch(same, done_bb, loop_bb)?;
        self.b.position_at_end(done_bb);
        self.reinterpret(old_bits, vt)
    }

    // ------------------------------------------------------------------ warp collectives

    /// Bring a value of scalar type `s` into the `i32`/`f32` a `.b32` warp op
    /// moves. Returns the 32-bit value(s): one, or (lo, hi) for 64-bit types.
    fn split_b32(
        &mut self,
        x: BasicValueEnum<'ctx>,
        s: ScalarType,
    ) -> CompileResult<Vec<BasicValueEnum<'ctx>>> {
        let ctx = self.ctx();
        let i32t = ctx.i32_type();
        Ok(match s.bits() {
            32 => vec![x],
            64 => {
                let bits = self.reinterpret(x, ctx.i64_type().into())?.into_int_value();
                let lo = self.b.build_int_truncate(bits, i32t, "")?;
                let shifted = self.b.build_right_shift(
                    bits,
                    ctx.i64_type().const_int(32, false),
                    false,
                    "",
                )?;
                let hi = self.b.build_int_truncate(shifted, i32t, "")?;
                vec![lo.into(), hi.into()]
            }
            n => {
                let narrow = self.int_ty(n)?;
                let bits = self.reinterpret(x, narrow.into())?.into_int_value();
                vec![self.b.build_int_z_extend(bits, i32t, "")?.into()]
            }
        })
    }

    fn join_b32(
        &mut self,
        parts: &[BasicValueEnum<'ctx>],
        s: ScalarType,
        t: BasicTypeEnum<'ctx>,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        let ctx = self.ctx();
        match (s.bits(), parts) {
            (32, [v]) => self.reinterpret(*v, t),
            (64, [lo, hi]) => {
                let i64t = ctx.i64_type();
                let lo = self.b.build_int_z_extend(lo.into_int_value(), i64t, "")?;
                let hi = self.b.build_int_z_extend(hi.into_int_value(), i64t, "")?;
                let hi = self.b.build_left_shift(hi, i64t.const_int(32, false), "")?;
                let bits = self.b.build_or(lo, hi, "")?;
                self.reinterpret(bits.into(), t)
            }
            (n, [v]) => {
                let narrow = self.int_ty(n)?;
                let bits = self.b.build_int_truncate(v.into_int_value(), narrow, "")?;
                self.reinterpret(bits.into(), t)
            }
            _ => Err(self.bug("bad warp operand split")),
        }
    }

    fn shfl(&mut self, d: &hir::InstData, mode: ShflMode, width: u32) -> CompileResult<()> {
        let mask = self.int(self.arg(d, 0)?)?;
        let v = self.arg(d, 1)?;
        let lane = self.int(self.arg(d, 2)?)?;
        let s = self.scalar_of(v)?;
        let x = self.val(v)?;
        let (suffix, clamp) = match mode {
            ShflMode::Idx => ("idx", 0x1f),
            ShflMode::Up => ("up", 0),
            ShflMode::Down => ("down", 0x1f),
            ShflMode::Xor => ("bfly", 0x1f),
        };
        if !(1..=32).contains(&width) || !width.is_power_of_two() {
            return Err(self.bug(format!("shuffle width {width}")));
        }
        // PTX's c operand: segment mask in bits 8..12, clamp value in bits 0..4.
        let c = ((32 - width) << 8) | clamp;
        let c = self.ctx().i32_type().const_int(u64::from(c), false);
        let parts = if s == ScalarType::F32 {
            vec![x]
        } else {
            self.split_b32(x, s)?
        };
        let mut out = Vec::with_capacity(parts.len());
        for p in parts {
            let ty_name = if p.is_float_value() { "f32" } else { "i32" };
            let name = format!("llvm.nvvm.shfl.sync.{suffix}.{ty_name}");
            let args = [mask.into(), p.into(), lane.into(), c.into()];
            out.push(self.intrinsic_value(&name, &[], &args)?);
        }
        let r = if s == ScalarType::F32 {
            out[0]
        } else {
            self.join_b32(&out, s, x.get_type())?
        };
        self.set(self.result(d, 0)?, r);
        Ok(())
    }

    fn vote(&mut self, d: &hir::InstData, mode: VoteMode) -> CompileResult<()> {
        let mask = self.int(self.arg(d, 0)?)?;
        let pred = self.int(self.arg(d, 1)?)?;
        let name = match mode {
            VoteMode::Ballot => "llvm.nvvm.vote.ballot.sync",
            VoteMode::Any => "llvm.nvvm.vote.any.sync",
            VoteMode::All => "llvm.nvvm.vote.all.sync",
        };
        let r = self.intrinsic_value(name, &[], &[mask.into(), pred.into()])?;
        self.set(self.result(d, 0)?, r);
        Ok(())
    }

    fn match_sync(&mut self, d: &hir::InstData, mode: MatchMode) -> CompileResult<()> {
        let mask = self.int(self.arg(d, 0)?)?;
        let v = self.arg(d, 1)?;
        let s = self.scalar_of(v)?;
        let x = self.val(v)?;
        let (arg, w) = if s.bits() == 64 {
            (self.reinterpret(x, self.ctx().i64_type().into())?, "i64")
        } else {
            let parts = self.split_b32(x, s)?;
            (
                self.reinterpret(parts[0], self.ctx().i32_type().into())?,
                "i32",
            )
        };
        match mode {
            MatchMode::Any => {
                let name = format!("llvm.nvvm.match.any.sync.{w}");
                let r = self.intrinsic_value(&name, &[], &[mask.into(), arg.into()])?;
                self.set(self.result(d, 0)?, r);
            }
            MatchMode::All => {
                let name = format!("llvm.nvvm.match.all.sync.{w}p");
                let pair = self.intrinsic_value(&name, &[], &[mask.into(), arg.into()])?;
                let pair = pair.into_struct_value();
                let m = self.b.build_extract_value(pair, 0, "")?;
                let p = self.b.build_extract_value(pair, 1, "")?;
                self.set(self.result(d, 0)?, m);
                self.set(self.result(d, 1)?, p);
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ tensor cores (WMMA)

    fn frag_of(&self, v: hir::ValueId) -> CompileResult<hir::FragType> {
        match self.hir_ty(v) {
            Type::Frag(f) => Ok(*f),
            other => Err(self.bug(format!("{v}: expected a fragment, found {other}"))),
        }
    }

    fn elem_name(&self, s: ScalarType) -> CompileResult<&'static str> {
        frag_elem_name(s).ok_or_else(|| self.bug(format!("no WMMA element type {s}")))
    }

    fn mma_load(
        &mut self,
        d: &hir::InstData,
        frag: &hir::FragType,
        layout: hir::Layout,
    ) -> CompileResult<()> {
        let ptr = self.ptr(self.arg(d, 0)?)?;
        let ldm = self.int(self.arg(d, 1)?)?;
        let k = match frag.kind {
            FragKind::A => "a",
            FragKind::B => "b",
            FragKind::Acc => "c",
        };
        let name = format!(
            "llvm.nvvm.wmma.{}.load.{k}.{}.stride.{}",
            frag.shape.name(),
            layout.name(),
            self.elem_name(frag.elem)?
        );
        let r = self.intrinsic_value(&name, &[ptr.get_type().into()], &[ptr.into(), ldm.into()])?;
        self.set(self.result(d, 0)?, r);
        Ok(())
    }

    fn mma_fill(&mut self, d: &hir::InstData) -> CompileResult<()> {
        let r = self.result(d, 0)?;
        let frag = self.frag_of(r)?;
        let st = ty::value_type(self.ctx(), &Type::Frag(frag))?.into_struct_type();
        let x = self.val(self.arg(d, 0)?)?;
        let (reg, n) = frag_regs(&frag).ok_or_else(|| self.bug(format!("fragment {frag}")))?;
        let elem = match reg {
            FragReg::Half2 => {
                let vt = self.ctx().f16_type().vec_type(2);
                let i32t = self.ctx().i32_type();
                let v = self
                    .b
                    .build_insert_element(vt.get_undef(), x, i32t.const_zero(), "")?;
                self.b
                    .build_insert_element(v, x, i32t.const_int(1, false), "")?
                    .into()
            }
            FragReg::F32 | FragReg::I32 => x,
        };
        let mut agg: inkwell::values::AggregateValueEnum = st.get_undef().into();
        for i in 0..n {
            agg = self.b.build_insert_value(agg, elem, i, "")?;
        }
        self.set(r, agg.as_basic_value_enum());
        Ok(())
    }

    fn fields(&mut self, v: hir::ValueId) -> CompileResult<Vec<BasicMetadataValueEnum<'ctx>>> {
        let s = match self.val(v)? {
            BasicValueEnum::StructValue(s) => s,
            other => return Err(self.bug(format!("{v} is not a fragment: {other:?}"))),
        };
        (0..s.get_type().count_fields())
            .map(|i| Ok(self.b.build_extract_value(s, i, "")?.into()))
            .collect()
    }

    fn mma(&mut self, d: &hir::InstData) -> CompileResult<()> {
        let (a, b, c) = (self.arg(d, 0)?, self.arg(d, 1)?, self.arg(d, 2)?);
        let (fa, fb, fc) = (self.frag_of(a)?, self.frag_of(b)?, self.frag_of(c)?);
        let (Some(la), Some(lb)) = (fa.layout, fb.layout) else {
            return Err(self.bug("A/B fragments without a layout"));
        };
        let shape = fa.shape.name();
        let name = match fa.elem {
            ScalarType::F16 => {
                let ct = self.elem_name(fc.elem)?;
                format!(
                    "llvm.nvvm.wmma.{shape}.mma.{}.{}.{ct}.{ct}",
                    la.name(),
                    lb.name()
                )
            }
            e => format!(
                "llvm.nvvm.wmma.{shape}.mma.{}.{}.{}",
                la.name(),
                lb.name(),
                self.elem_name(e)?
            ),
        };
        let mut args = self.fields(a)?;
        args.extend(self.fields(b)?);
        args.extend(self.fields(c)?);
        let r = self.intrinsic_value(&name, &[], &args)?;
        self.set(self.result(d, 0)?, r);
        Ok(())
    }

    fn mma_store(&mut self, d: &hir::InstData, layout: hir::Layout) -> CompileResult<()> {
        let ptr = self.ptr(self.arg(d, 0)?)?;
        let fv = self.arg(d, 1)?;
        let frag = self.frag_of(fv)?;
        let ldm = self.int(self.arg(d, 2)?)?;
        let name = format!(
            "llvm.nvvm.wmma.{}.store.d.{}.stride.{}",
            frag.shape.name(),
            layout.name(),
            self.elem_name(frag.elem)?
        );
        let mut args: Vec<BasicMetadataValueEnum> = vec![ptr.into()];
        args.extend(self.fields(fv)?);
        args.push(ldm.into());
        self.intrinsic(&name, &[ptr.get_type().into()], &args)?;
        Ok(())
    }

    // ------------------------------------------------------------------ async copy

    fn cp_async(&mut self, d: &hir::InstData, bytes: u32, cache: CacheHint) -> CompileResult<()> {
        let ctx = self.ctx();
        let mut dst = self.ptr(self.arg(d, 0)?)?;
        let mut src = self.ptr(self.arg(d, 1)?)?;
        let shared = ty::ptr_type(ctx, AddrSpace::Shared);
        let global = ty::ptr_type(ctx, AddrSpace::Global);
        if dst.get_type() != shared {
            dst = self.b.build_address_space_cast(dst, shared, "")?;
        }
        if src.get_type() != global {
            src = self.b.build_address_space_cast(src, global, "")?;
        }
        let name = format!("llvm.nvvm.cp.async.{}.shared.global.{bytes}", cache.name());
        self.intrinsic(&name, &[], &[dst.into(), src.into()])?;
        Ok(())
    }
}
