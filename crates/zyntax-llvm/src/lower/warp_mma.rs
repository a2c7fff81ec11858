//! Warp MMA, ldmatrix and stmatrix (issue 12 items 1-2) as inline PTX: LLVM 19
//! has no e4m3/e5m2 `mma` intrinsics and no `stmatrix`, so every form goes
//! through one path. Fragments are ordinary LLVM values (vectors of `i32`
//! packed registers, of the accumulator type, or `double`); each element is
//! one asm operand.

use super::FnLowering;
use crate::error::CompileResult;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum};
use zyntax_hir as hir;
use zyntax_hir::{MmaElem, Op, ScalarType};

/// The `createpolicy` that gives an access an L2 eviction priority (every
/// line it touches: fraction 1.0), for the hint forms of `load`/`store.<cop>`.
fn l2_policy(c: zyntax_hir::CacheOp) -> Option<String> {
    c.is_l2_hint().then(|| {
        let which = c.name().trim_start_matches("evict_");
        format!("createpolicy.fractional.L2::evict_{which}.b64 zpol, 1.0;")
    })
}

impl<'ctx> FnLowering<'_, 'ctx> {
    pub(super) fn lower_warp_mma(&mut self, d: &hir::InstData) -> CompileResult<()> {
        match &d.op {
            Op::MmaSync { shape, elem } => self.mma_sync(d, &format!("{shape}"), *elem),
            Op::Ldmatrix { num, trans } => self.ldmatrix(d, *num, *trans),
            Op::Stmatrix { num, trans } => self.stmatrix(d, *num, *trans),
            Op::Approx(op) => {
                // One PTX instruction each (LLVM 19 lacks tanh.approx).
                let x = self.val(self.arg(d, 0)?)?;
                let f32t = self.ctx().f32_type();
                let text = format!("{} $0, $1;", op.ptx());
                let r = self
                    .asm(&text, "=f,f", Some(f32t.into()), &[x.into()])?
                    .ok_or_else(|| self.bug("approx returned nothing"))?;
                self.set(self.result(d, 0)?, r);
                Ok(())
            }
            Op::LoadCached(c) => self.load_cached(d, *c),
            Op::StoreCached(c) => self.store_cached(d, *c),
            other => Err(self.bug(format!("no lowering for `{}`", other.mnemonic()))),
        }
    }

    /// PTX type suffix, register class and LLVM register type of one element.
    fn reg_of(&self, s: ScalarType) -> (String, &'static str, BasicTypeEnum<'ctx>) {
        let ctx = self.ctx();
        match s {
            ScalarType::F32 => ("f32".into(), "f", ctx.f32_type().into()),
            ScalarType::F64 => ("f64".into(), "d", ctx.f64_type().into()),
            _ => match s.bits() {
                16 => ("b16".into(), "h", ctx.i16_type().into()),
                32 => ("b32".into(), "r", ctx.i32_type().into()),
                _ => ("b64".into(), "l", ctx.i64_type().into()),
            },
        }
    }

    fn load_cached(&mut self, d: &hir::InstData, c: zyntax_hir::CacheOp) -> CompileResult<()> {
        let p = self.ptr(self.arg(d, 0)?)?;
        let res = self.result(d, 0)?;
        let t = self.hir_ty(res).clone();
        let (s, n) = transport(&t);
        let (suffix, cls, rt) = self.reg_of(s);
        let v = if n == 1 {
            String::new()
        } else {
            format!(".v{n}")
        };
        let regs: Vec<String> = (0..n).map(|i| format!("${i}")).collect();
        let list = if n == 1 {
            regs.join(", ")
        } else {
            format!("{{{}}}", regs.join(", "))
        };
        let text = match l2_policy(c) {
            Some(policy) => format!(
                "{{ .reg .b64 zpol; {policy} ld.global.L2::cache_hint{v}.{suffix} {list}, [${n}], zpol; }}"
            ),
            None => format!("ld.global.{c}{v}.{suffix} {list}, [${n}];"),
        };
        let mut cons: Vec<String> = (0..n).map(|_| format!("={cls}")).collect();
        cons.push("l".into());
        cons.push("~{memory}".into());
        let fields: Vec<BasicTypeEnum> = (0..n).map(|_| rt).collect();
        let ret = self.ctx().struct_type(&fields, false);
        let r = self
            .asm(&text, &cons.join(","), Some(ret.into()), &[p.into()])?
            .ok_or_else(|| self.bug("ld returned nothing"))?;
        let to = super::ty::value_type(self.ctx(), &t)?;
        let out = self.gather(r, 0, n, rt, to)?;
        self.set(res, out);
        Ok(())
    }

    fn store_cached(&mut self, d: &hir::InstData, c: zyntax_hir::CacheOp) -> CompileResult<()> {
        let p = self.ptr(self.arg(d, 0)?)?;
        let vid = self.arg(d, 1)?;
        let t = self.hir_ty(vid).clone();
        let (s, n) = transport(&t);
        let (suffix, cls, rt) = self.reg_of(s);
        let v = self.val(vid)?;
        // Elements travel in the register type (f16/bf16 as b16 bits).
        let as_ty = if n == 1 {
            Some(rt)
        } else {
            Some(match rt {
                BasicTypeEnum::IntType(it) => it.vec_type(n).into(),
                BasicTypeEnum::FloatType(ft) => ft.vec_type(n).into(),
                other => other,
            })
        };
        let vals = self.elements(v, as_ty)?;
        let vs = if n == 1 {
            String::new()
        } else {
            format!(".v{n}")
        };
        let regs: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
        let list = if n == 1 {
            regs.join(", ")
        } else {
            format!("{{{}}}", regs.join(", "))
        };
        let text = match l2_policy(c) {
            Some(policy) => format!(
                "{{ .reg .b64 zpol; {policy} st.global.L2::cache_hint{vs}.{suffix} [$0], {list}, zpol; }}"
            ),
            None => format!("st.global.{c}{vs}.{suffix} [$0], {list};"),
        };
        let mut cons = vec!["l".to_string()];
        cons.extend((0..n).map(|_| cls.to_string()));
        cons.push("~{memory}".into());
        let mut args: Vec<BasicMetadataValueEnum> = vec![p.into()];
        args.extend(vals);
        self.asm(&text, &cons.join(","), None, &args)?;
        Ok(())
    }

    /// The scalar elements of `v` (a vector or a scalar), after bitcasting
    /// the vector to `as_ty` when given (f16 accumulators travel as `f16x2` in b32).
    pub(super) fn elements(
        &mut self,
        v: BasicValueEnum<'ctx>,
        as_ty: Option<BasicTypeEnum<'ctx>>,
    ) -> CompileResult<Vec<BasicMetadataValueEnum<'ctx>>> {
        let v = match as_ty {
            Some(t) => self.b.build_bit_cast(v, t, "")?,
            None => v,
        };
        let BasicValueEnum::VectorValue(vec) = v else {
            return Ok(vec![v.into()]);
        };
        let n = vec.get_type().get_size();
        let i32t = self.ctx().i32_type();
        (0..n)
            .map(|i| {
                Ok(self
                    .b
                    .build_extract_element(vec, i32t.const_int(u64::from(i), false), "")?
                    .into())
            })
            .collect()
    }

    /// Rebuild a vector of `n` elements of `elem_ty` from fields `first..` of the
    /// asm result `r`, then bitcast it to `to`.
    pub(super) fn gather(
        &mut self,
        r: BasicValueEnum<'ctx>,
        first: u32,
        n: u32,
        elem_ty: BasicTypeEnum<'ctx>,
        to: BasicTypeEnum<'ctx>,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        let sv = r.into_struct_value();
        if n == 1 {
            let x = self.b.build_extract_value(sv, first, "")?;
            return Ok(self.b.build_bit_cast(x, to, "")?);
        }
        let mut acc = match elem_ty {
            BasicTypeEnum::IntType(t) => t.vec_type(n).get_undef(),
            BasicTypeEnum::FloatType(t) => t.vec_type(n).get_undef(),
            other => return Err(self.bug(format!("vector of {other:?}"))),
        };
        let i32t = self.ctx().i32_type();
        for i in 0..n {
            let x = self.b.build_extract_value(sv, first + i, "")?;
            acc = self
                .b
                .build_insert_element(acc, x, i32t.const_int(u64::from(i), false), "")?;
        }
        Ok(self.b.build_bit_cast(acc, to, "")?)
    }

    fn mma_sync(&mut self, d: &hir::InstData, shape: &str, elem: MmaElem) -> CompileResult<()> {
        let ctx = self.ctx();
        let c = self.arg(d, 2)?;
        let acc = self.scalar_of(c)?;
        let (cls, creg_ty, ptx_acc): (&str, BasicTypeEnum, &str) = match acc {
            ScalarType::F32 => ("f", ctx.f32_type().into(), "f32"),
            ScalarType::F16 => ("r", ctx.i32_type().into(), "f16"),
            ScalarType::I32 => ("r", ctx.i32_type().into(), "s32"),
            ScalarType::F64 => ("d", ctx.f64_type().into(), "f64"),
            other => return Err(self.bug(format!("mma.sync accumulating in {other}"))),
        };
        let in_cls = if elem == MmaElem::F64 { "d" } else { "r" };
        let a = self.val(self.arg(d, 0)?)?;
        let b = self.val(self.arg(d, 1)?)?;
        let cv = self.val(c)?;
        let a = self.elements(a, None)?;
        let b = self.elements(b, None)?;
        // f16 accumulators: <4 x half> travels as two f16x2 registers.
        let c_as = (acc == ScalarType::F16).then(|| ctx.i32_type().vec_type(2).into());
        let cs = self.elements(cv, c_as)?;
        let nd = cs.len() as u32;
        let mut k = 0u32;
        let mut list = |n: usize| {
            let s: Vec<String> = (0..n)
                .map(|_| {
                    k += 1;
                    format!("${}", k - 1)
                })
                .collect();
            format!("{{{}}}", s.join(", "))
        };
        let (dl, al, bl, cl) = (list(cs.len()), list(a.len()), list(b.len()), list(cs.len()));
        let text = format!(
            "mma.sync.aligned.{shape}.row.col.{ptx_acc}.{elem}.{elem}.{ptx_acc} {dl}, {al}, {bl}, {cl};"
        );
        let mut cons: Vec<String> = (0..nd).map(|_| format!("={cls}")).collect();
        cons.extend((0..a.len() + b.len()).map(|_| in_cls.to_string()));
        cons.extend((0..nd).map(|_| cls.to_string()));
        let fields: Vec<BasicTypeEnum> = (0..nd).map(|_| creg_ty).collect();
        let ret = ctx.struct_type(&fields, false);
        let args: Vec<BasicMetadataValueEnum> = a.into_iter().chain(b).chain(cs).collect();
        let r = self
            .asm(&text, &cons.join(","), Some(ret.into()), &args)?
            .ok_or_else(|| self.bug("mma.sync returned nothing"))?;
        let to = cv.get_type();
        let out = self.gather(r, 0, nd, creg_ty, to)?;
        self.set(self.result(d, 0)?, out);
        Ok(())
    }

    fn ldmatrix(&mut self, d: &hir::InstData, num: u32, trans: bool) -> CompileResult<()> {
        let ctx = self.ctx();
        let p = self.ptr(self.arg(d, 0)?)?;
        let regs: Vec<String> = (0..num).map(|i| format!("${i}")).collect();
        let text = format!(
            "ldmatrix.sync.aligned.m8n8.x{num}{}.shared.b16 {{{}}}, [${num}];",
            if trans { ".trans" } else { "" },
            regs.join(", ")
        );
        let mut cons: Vec<&str> = (0..num).map(|_| "=r").collect();
        cons.push("l");
        cons.push("~{memory}");
        let i32t: BasicTypeEnum = ctx.i32_type().into();
        let fields: Vec<BasicTypeEnum> = (0..num).map(|_| i32t).collect();
        let ret = ctx.struct_type(&fields, false);
        let r = self
            .asm(&text, &cons.join(","), Some(ret.into()), &[p.into()])?
            .ok_or_else(|| self.bug("ldmatrix returned nothing"))?;
        let res = self.result(d, 0)?;
        let to = super::ty::value_type(ctx, self.hir_ty(res))?;
        let out = self.gather(r, 0, num, i32t, to)?;
        self.set(res, out);
        Ok(())
    }

    fn stmatrix(&mut self, d: &hir::InstData, num: u32, trans: bool) -> CompileResult<()> {
        let p = self.ptr(self.arg(d, 0)?)?;
        let v = self.val(self.arg(d, 1)?)?;
        let vals = self.elements(v, None)?;
        let regs: Vec<String> = (1..=num).map(|i| format!("${i}")).collect();
        let text = format!(
            "stmatrix.sync.aligned.m8n8.x{num}{}.shared.b16 [$0], {{{}}};",
            if trans { ".trans" } else { "" },
            regs.join(", ")
        );
        let mut cons = vec!["l"];
        cons.extend((0..num).map(|_| "r"));
        cons.push("~{memory}");
        let mut args: Vec<BasicMetadataValueEnum> = vec![p.into()];
        args.extend(vals);
        self.asm(&text, &cons.join(","), None, &args)?;
        Ok(())
    }
}

/// The element type and count one `ld`/`st` moves `t` as: PTX vectors have at
/// most 4 elements, so 8 16-bit lanes (16 bytes) travel as 4 b32 words.
fn transport(t: &hir::Type) -> (ScalarType, u32) {
    match t {
        hir::Type::Vector(s, n) if *n > 4 => (ScalarType::U32, n * s.bits() / 32),
        hir::Type::Vector(s, n) => (*s, *n),
        other => (other.as_scalar().unwrap_or(ScalarType::U32), 1),
    }
}
