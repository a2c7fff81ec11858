//! Issue 12 (warp-sync) instructions → inline PTX: bit-field, byte-permute and
//! funnel-shift ops, `red`, packed `f16x2`/`bf16x2` atomic adds, acquire loads,
//! release stores and scoped fences.
//!
//! All inline, for the reason scoped atomics are (see `gpu.rs`): LLVM 19's
//! NVPTX backend has no `ld.acquire`/`st.release`/`fence.acq_rel` selection
//! and drops `syncscope`, so the scope would silently become `.gpu` or `.sys`.
//! The bit ops are inline so that each is exactly one PTX instruction whose
//! definition `docs/semantics.md` documents (LLVM would rewrite `bfe` into
//! shifts with its own edge cases).

use super::FnLowering;
use crate::error::CompileResult;
use inkwell::types::BasicTypeEnum;
use inkwell::values::BasicValueEnum;
use zyntax_hir as hir;
use zyntax_hir::{AddrSpace, AtomicOp, BitOp, Op, PackFmt, ReduxOp, ScalarType, Scope, Type};

/// What `cvt_unpack` gives.
fn fmt_unpacked() -> Type {
    Type::Vector(ScalarType::F16, 2)
}

impl<'ctx> FnLowering<'_, 'ctx> {
    pub(super) fn lower_sync(&mut self, d: &hir::InstData) -> CompileResult<()> {
        match &d.op {
            Op::Bits(op) => self.bits(d, *op),
            Op::Red { op, scope } => self.red(d, *op, *scope),
            Op::LoadAcquire(scope) => self.load_acquire(d, *scope),
            Op::StoreRelease(scope) => self.store_release(d, *scope),
            Op::FenceAcqRel(scope) => {
                let text = format!("fence.acq_rel.{};", Self::scope_name(*scope));
                self.asm(&text, "~{memory}", None, &[])?;
                Ok(())
            }
            Op::CompilerFence => {
                // An empty asm that clobbers memory: the compiler may not move
                // memory accesses across it; no instruction is emitted.
                self.asm("", "~{memory}", None, &[])?;
                Ok(())
            }
            Op::Redux(op) => {
                let v = self.arg(d, 1)?;
                let ty = match (op, self.scalar_of(v)?) {
                    (ReduxOp::Add | ReduxOp::Min | ReduxOp::Max, ScalarType::I32) => "s32",
                    (ReduxOp::Add | ReduxOp::Min | ReduxOp::Max, _) => "u32",
                    _ => "b32",
                };
                let text = format!("redux.sync.{op}.{ty} $0, $1, $2;");
                let args = [self.val(v)?.into(), self.val(self.arg(d, 0)?)?.into()];
                let i32t: BasicTypeEnum = self.ctx().i32_type().into();
                let r = self
                    .asm(&text, "=r,r,r", Some(i32t), &args)?
                    .ok_or_else(|| self.bug("redux returned nothing"))?;
                self.set(self.result(d, 0)?, r);
                Ok(())
            }
            // --- issue 12 (rest)
            Op::NamedBarrier { arrive, id, count } => {
                // `bar.sync` is `barrier.sync.aligned`: the whole warp arrives.
                let which = if *arrive { "arrive" } else { "sync" };
                let text = format!("bar.{which} {id}, {count};");
                self.asm(&text, "~{memory}", None, &[])?;
                Ok(())
            }
            Op::CvtPack(fmt) => self.cvt_pack(d, *fmt),
            Op::CvtUnpack(fmt) => {
                let a = self.val(self.arg(d, 0)?)?;
                let i32t: BasicTypeEnum = self.ctx().i32_type().into();
                let text = format!("cvt.rn.f16x2.{fmt} $0, $1;");
                let r = self
                    .asm(&text, "=r,h", Some(i32t), &[a.into()])?
                    .ok_or_else(|| self.bug("cvt returned nothing"))?;
                let to = super::ty::value_type(self.ctx(), &fmt_unpacked())?;
                let r = self.b.build_bit_cast(r, to, "")?;
                self.set(self.result(d, 0)?, r);
                Ok(())
            }
            other => Err(self.bug(format!("no lowering for `{}`", other.mnemonic()))),
        }
    }

    /// `cvt.rn[.satfinite].<fmt>.f32 d, hi, lo`: PTX puts its first source in
    /// the upper half, HIR's `lo` is lane 0 (the lower half).
    fn cvt_pack(&mut self, d: &hir::InstData, fmt: PackFmt) -> CompileResult<()> {
        let lo = self.val(self.arg(d, 0)?)?;
        let hi = self.val(self.arg(d, 1)?)?;
        let (sat, cls, rt): (&str, &str, BasicTypeEnum) = if fmt.is_fp8() {
            (".satfinite", "h", self.ctx().i16_type().into())
        } else {
            ("", "r", self.ctx().i32_type().into())
        };
        let text = format!("cvt.rn{sat}.{fmt}.f32 $0, $1, $2;");
        let r = self
            .asm(
                &text,
                &format!("={cls},f,f"),
                Some(rt),
                &[hi.into(), lo.into()],
            )?
            .ok_or_else(|| self.bug("cvt returned nothing"))?;
        let to = super::ty::value_type(self.ctx(), &fmt.packed_type())?;
        let r = self.b.build_bit_cast(r, to, "")?;
        self.set(self.result(d, 0)?, r);
        Ok(())
    }

    fn bits(&mut self, d: &hir::InstData, op: BitOp) -> CompileResult<()> {
        let first = self.arg(d, if op == BitOp::Bfi { 1 } else { 0 })?;
        let s = self.scalar_of(first)?;
        let (c, n) = if s.bits() == 64 { ("l", 64) } else { ("r", 32) };
        let ty = match op {
            BitOp::Bfe => format!("bfe.{}{n}", if s.is_signed() { "s" } else { "u" }),
            BitOp::Bfi => format!("bfi.b{n}"),
            BitOp::Prmt => "prmt.b32".to_string(),
            other => format!("{}.b32", other.name()),
        };
        let kinds: Vec<&str> = match op {
            BitOp::Bfe => vec![c, "r", "r"],
            BitOp::Bfi => vec![c, c, "r", "r"],
            _ => vec!["r", "r", "r"],
        };
        let regs: Vec<String> = (1..=kinds.len()).map(|i| format!("${i}")).collect();
        let text = format!("{ty} $0, {};", regs.join(", "));
        let constraints = format!("={c},{}", kinds.join(","));
        let mut args = Vec::new();
        for i in 0..kinds.len() {
            args.push(self.val(self.arg(d, i)?)?.into());
        }
        let rt: BasicTypeEnum = self.int_ty(n)?.into();
        let r = self
            .asm(&text, &constraints, Some(rt), &args)?
            .ok_or_else(|| self.bug("bit op returned nothing"))?;
        self.set(self.result(d, 0)?, r);
        Ok(())
    }

    /// `vec<f16|bf16, 2>` (packed) or the scalar type of an atomic's value.
    fn packed_half2(&self, t: &Type) -> Option<&'static str> {
        match t {
            Type::Vector(ScalarType::F16, 2) => Some("noftz.f16x2"),
            Type::Vector(ScalarType::BF16, 2) => Some("noftz.bf16x2"),
            _ => None,
        }
    }

    /// `atom`/`red` `.add.noftz.{f16x2,bf16x2}` on a packed pair, in a 32-bit register.
    pub(super) fn atomic_half2(
        &mut self,
        d: &hir::InstData,
        scope: Scope,
        with_result: bool,
    ) -> CompileResult<()> {
        let (p, v) = (self.arg(d, 0)?, self.arg(d, 1)?);
        let space = self
            .hir_ty(p)
            .addr_space()
            .ok_or_else(|| self.bug("atomic on a non-pointer"))?;
        let suffix = self
            .packed_half2(self.hir_ty(v))
            .ok_or_else(|| self.bug("packed atomic on another type"))?;
        let ptr = self.ptr(p)?;
        let x = self.val(v)?;
        let i32t: BasicTypeEnum = self.ctx().i32_type().into();
        let xa = self.reinterpret(x, i32t)?;
        let head = format!(
            "{}.{}{}.add.{suffix}",
            if with_result { "atom" } else { "red" },
            Self::scope_name(scope),
            self.space_suffix(space)?
        );
        if with_result {
            let r = self
                .asm(
                    &format!("{head} $0, [$1], $2;"),
                    "=r,l,r,~{memory}",
                    Some(i32t),
                    &[ptr.into(), xa.into()],
                )?
                .ok_or_else(|| self.bug("atom returned nothing"))?;
            let r = self.reinterpret(r, x.get_type())?;
            self.set(self.result(d, 0)?, r);
        } else {
            self.asm(
                &format!("{head} [$0], $1;"),
                "l,r,~{memory}",
                None,
                &[ptr.into(), xa.into()],
            )?;
        }
        Ok(())
    }

    fn red(&mut self, d: &hir::InstData, op: AtomicOp, scope: Scope) -> CompileResult<()> {
        let v = self.arg(d, 1)?;
        if self.packed_half2(self.hir_ty(v)).is_some() {
            return self.atomic_half2(d, scope, false);
        }
        let (space, s, ptr, x, op) = self.atomic_operands(d, op)?;
        // No `red` form: float min/max and 16-bit exch loop on CAS; `red` has no exch.
        if (s.is_float() && matches!(op, AtomicOp::Min | AtomicOp::Max))
            || (s.bits() == 16 && op == AtomicOp::Exch)
        {
            self.cas_loop(ptr, space, scope, s, x, op)?;
            return Ok(());
        }
        if space == AddrSpace::Shared {
            self.shared_atomic(ptr, s, x, op)?;
            return Ok(());
        }
        if op == AtomicOp::Exch {
            self.scoped_atomic(ptr, space, scope, s, x, op)?;
            return Ok(());
        }
        let ty = Self::atom_type(op, s).ok_or_else(|| self.bug(format!("red {op} on {s}")))?;
        let (cons, at) = self.asm_operand(s)?;
        let xa: BasicValueEnum = self.reinterpret(x, at)?;
        let text = format!(
            "red.{}{}.{}.{ty} [$0], $1;",
            Self::scope_name(scope),
            self.space_suffix(space)?,
            op.name()
        );
        self.asm(
            &text,
            &format!("l,{cons},~{{memory}}"),
            None,
            &[ptr.into(), xa.into()],
        )?;
        Ok(())
    }

    /// The integer register class and type moving a 32/64-bit value.
    fn bits_operand(&self, s: ScalarType) -> CompileResult<(&'static str, BasicTypeEnum<'ctx>)> {
        Ok(match s.bits() {
            32 => ("r", self.ctx().i32_type().into()),
            64 => ("l", self.ctx().i64_type().into()),
            _ => return Err(self.bug(format!("ordered access on {s}"))),
        })
    }

    fn load_acquire(&mut self, d: &hir::InstData, scope: Scope) -> CompileResult<()> {
        let p = self.arg(d, 0)?;
        let space = self
            .hir_ty(p)
            .addr_space()
            .ok_or_else(|| self.bug("load.acquire on a non-pointer"))?;
        let r = self.result(d, 0)?;
        let s = self.scalar_of(r)?;
        let (c, t) = self.bits_operand(s)?;
        let ptr = self.ptr(p)?;
        let text = format!(
            "ld.acquire.{}{}.b{} $0, [$1];",
            Self::scope_name(scope),
            self.space_suffix(space)?,
            s.bits()
        );
        let v = self
            .asm(
                &text,
                &format!("={c},l,~{{memory}}"),
                Some(t),
                &[ptr.into()],
            )?
            .ok_or_else(|| self.bug("ld.acquire returned nothing"))?;
        let want: BasicTypeEnum = match s {
            ScalarType::F32 => self.ctx().f32_type().into(),
            ScalarType::F64 => self.ctx().f64_type().into(),
            _ => t,
        };
        let v = self.reinterpret(v, want)?;
        self.set(r, v);
        Ok(())
    }

    fn store_release(&mut self, d: &hir::InstData, scope: Scope) -> CompileResult<()> {
        let (p, v) = (self.arg(d, 0)?, self.arg(d, 1)?);
        let space = self
            .hir_ty(p)
            .addr_space()
            .ok_or_else(|| self.bug("store.release on a non-pointer"))?;
        let s = self.scalar_of(v)?;
        let (c, t) = self.bits_operand(s)?;
        let ptr = self.ptr(p)?;
        let x = self.val(v)?;
        let xa = self.reinterpret(x, t)?;
        let text = format!(
            "st.release.{}{}.b{} [$0], $1;",
            Self::scope_name(scope),
            self.space_suffix(space)?,
            s.bits()
        );
        self.asm(
            &text,
            &format!("l,{c},~{{memory}}"),
            None,
            &[ptr.into(), xa.into()],
        )?;
        Ok(())
    }
}
