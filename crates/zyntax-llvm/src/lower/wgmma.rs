//! Warpgroup MMA and warp specialisation (issue 13 items 1 and 5) → inline
//! PTX: LLVM 19 has no `wgmma`, `setmaxnreg` or `elect.sync` intrinsics.
//!
//! The accumulator is one LLVM vector; each of its registers is one asm output
//! tied to the matching input (`"=f"` / `"0"`), so D and C share registers as
//! PTX's `wgmma` requires and LLVM keeps them in registers. f16 accumulators
//! travel as packed `f16x2` (`b32`) registers.

use super::FnLowering;
use crate::error::CompileResult;
use inkwell::types::BasicTypeEnum;
use inkwell::values::BasicMetadataValueEnum;
use inkwell::IntPredicate;
use zyntax_hir as hir;
use zyntax_hir::{MmaElem, Op, ScalarType, Swizzle, Wgmma};

impl<'ctx> FnLowering<'_, 'ctx> {
    pub(super) fn lower_wgmma(&mut self, d: &hir::InstData) -> CompileResult<()> {
        let sync = |text: String| (text, "~{memory}");
        let (text, cons) = match &d.op {
            Op::WgmmaDesc(s) => return self.wgmma_desc(d, *s),
            Op::Wgmma(form) => return self.wgmma_mma(d, *form),
            Op::WgmmaZero => {
                let res = self.result(d, 0)?;
                let t = super::ty::value_type(self.ctx(), self.hir_ty(res))?;
                let zero = t.const_zero();
                self.set(res, zero);
                return Ok(());
            }
            Op::ElectSync => {
                let i32t = self.ctx().i32_type();
                let text = "{ .reg .pred p; elect.sync _|p, 0xffffffff; selp.u32 $0, 1, 0, p; }";
                let r = self
                    .asm(text, "=r", Some(i32t.into()), &[])?
                    .ok_or_else(|| self.bug("elect.sync returned nothing"))?;
                let r = self.b.build_int_compare(
                    IntPredicate::NE,
                    r.into_int_value(),
                    i32t.const_zero(),
                    "",
                )?;
                self.set(self.result(d, 0)?, r.into());
                return Ok(());
            }
            Op::WgmmaFence => sync("wgmma.fence.sync.aligned;".into()),
            Op::WgmmaCommit => sync("wgmma.commit_group.sync.aligned;".into()),
            Op::WgmmaWait(n) => sync(format!("wgmma.wait_group.sync.aligned {n};")),
            Op::Setmaxnreg { count, inc } => sync(format!(
                "setmaxnreg.{}.sync.aligned.u32 {count};",
                if *inc { "inc" } else { "dec" }
            )),
            other => return Err(self.bug(format!("no lowering for `{}`", other.mnemonic()))),
        };
        self.asm(&text, cons, None, &[])?;
        Ok(())
    }

    /// The descriptor as integer arithmetic on the shared-window address:
    /// bits 0-13 address >> 4, 16-29 leading byte offset >> 4, 32-45 stride
    /// byte offset >> 4, 62-63 the swizzle; base offset 0.
    fn wgmma_desc(&mut self, d: &hir::InstData, s: Swizzle) -> CompileResult<()> {
        let i64t = self.ctx().i64_type();
        let p = self.ptr(self.arg(d, 0)?)?;
        let addr = self.b.build_ptr_to_int(p, i64t, "")?;
        let mut desc = i64t.const_int(s.field() << 62, false);
        for (k, shift) in [(None, 0u64), (Some(1), 16), (Some(2), 32)] {
            let x = match k {
                None => addr,
                Some(k) => self
                    .b
                    .build_int_z_extend(self.int(self.arg(d, k)?)?, i64t, "")?,
            };
            let x = self
                .b
                .build_right_shift(x, i64t.const_int(4, false), false, "")?;
            let x = self.b.build_and(x, i64t.const_int(0x3fff, false), "")?;
            let x = self
                .b
                .build_left_shift(x, i64t.const_int(shift, false), "")?;
            desc = self.b.build_or(desc, x, "")?;
        }
        self.set(self.result(d, 0)?, desc.into());
        Ok(())
    }

    fn wgmma_mma(&mut self, d: &hir::InstData, w: Wgmma) -> CompileResult<()> {
        let ctx = self.ctx();
        let c = self.arg(d, 0)?;
        let acc = self.scalar_of(c)?;
        let (cls, creg_ty, dtype): (&str, BasicTypeEnum, &str) = match acc {
            ScalarType::F32 => ("f", ctx.f32_type().into(), "f32"),
            ScalarType::F16 => ("r", ctx.i32_type().into(), "f16"),
            ScalarType::I32 => ("r", ctx.i32_type().into(), "s32"),
            other => return Err(self.bug(format!("wgmma accumulating in {other}"))),
        };
        let cv = self.val(c)?;
        let c_as = (acc == ScalarType::F16).then(|| ctx.i32_type().vec_type(w.n / 4).into());
        let cs = self.elements(cv, c_as)?;
        let nd = cs.len();
        let a_id = self.arg(d, 1)?;
        let a_regs = *self.hir_ty(a_id) != hir::Type::U64;
        let a = self.val(a_id)?;
        let a = self.elements(a, None)?;
        let b = self.int(self.arg(d, 2)?)?;
        let scale = self.int(self.arg(d, 3)?)?;
        let scale = self.b.build_int_z_extend(scale, ctx.i32_type(), "")?;
        // Operands: outputs $0.., tied inputs, A (registers or descriptor), B, scale_d.
        let reg = |i: usize| format!("${i}");
        let dl: Vec<String> = (0..nd).map(reg).collect();
        let a0 = 2 * nd;
        let al = if a_regs {
            let r: Vec<String> = (a0..a0 + a.len()).map(reg).collect();
            format!("{{{}}}", r.join(", "))
        } else {
            reg(a0)
        };
        let bi = a0 + a.len();
        let int = matches!(w.a, MmaElem::S8 | MmaElem::U8);
        let mut imm = String::new();
        if !int {
            let sc = |neg: bool| if neg { "-1" } else { "1" };
            imm = format!(", {}, {}", sc(w.neg_a), sc(w.neg_b));
            if matches!(w.a, MmaElem::F16 | MmaElem::Bf16) {
                if !a_regs {
                    imm.push_str(if w.trans_a { ", 1" } else { ", 0" });
                }
                imm.push_str(if w.trans_b { ", 1" } else { ", 0" });
            }
        }
        let text = format!(
            "{{ .reg .pred p; setp.ne.b32 p, ${}, 0; wgmma.mma_async.sync.aligned.m64n{}k{}.{dtype}.{}.{} {{{}}}, {al}, ${bi}, p{imm}; }}",
            bi + 1,
            w.n,
            w.k(),
            w.a,
            w.b,
            dl.join(", "),
        );
        let a_cls = if a_regs { "r" } else { "l" };
        let mut cons: Vec<String> = (0..nd).map(|_| format!("={cls}")).collect();
        cons.extend((0..nd).map(|i| i.to_string()));
        cons.extend((0..a.len()).map(|_| a_cls.to_string()));
        cons.push("l".into());
        cons.push("r".into());
        cons.push("~{memory}".into());
        let fields: Vec<BasicTypeEnum> = (0..nd).map(|_| creg_ty).collect();
        let ret = ctx.struct_type(&fields, false);
        let args: Vec<BasicMetadataValueEnum> = cs
            .into_iter()
            .chain(a)
            .chain([b.into(), scale.into()])
            .collect();
        let r = self
            .asm(&text, &cons.join(","), Some(ret.into()), &args)?
            .ok_or_else(|| self.bug("wgmma returned nothing"))?;
        let out = self.gather(r, 0, nd as u32, creg_ty, cv.get_type())?;
        self.set(self.result(d, 0)?, out);
        Ok(())
    }
}
