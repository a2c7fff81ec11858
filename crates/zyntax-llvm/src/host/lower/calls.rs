//! Calls between lowered functions (the error record, lengths and context
//! threaded through) and the software prefetch of `prefetch` hints: `FnLower`
//! methods kept out of `lower.rs` for its size.

use super::*;

impl FnLower<'_> {
    pub(super) fn emit_prefetch(&mut self, addr: InstId, dist: i64) -> LResult<()> {
        let Some(ad) = self.f.insts.get(addr.index()).cloned() else {
            return Ok(());
        };
        let (Some(base), Some(idx)) = (ad.args.first().copied(), ad.args.get(1).copied()) else {
            return Ok(());
        };
        let pointee = self.ty(base)?.pointee().cloned().unwrap_or(Type::U8);
        let Some(m) = mty(&pointee) else {
            return Ok(());
        };
        let i64v = self.ext64(idx)?;
        let bo = self.op(base)?;
        let n = self.t();
        self.emit(format!("{n} = add i64 {i64v}, {dist}"));
        let p = self.t();
        // No `inbounds`: the prefetched address may lie past the end (prefetch never faults).
        self.emit(format!("{p} = getelementptr {m}, ptr {bo}, i64 {n}"));
        self.decl("declare void @llvm.prefetch.p0(ptr, i32, i32, i32)");
        self.emit(format!(
            "call void @llvm.prefetch.p0(ptr {p}, i32 0, i32 3, i32 1)"
        ));
        Ok(())
    }

    pub(super) fn call(
        &mut self,
        name: &str,
        args: &[ValueId],
        results: &[ValueId],
        inst: InstId,
    ) -> LResult<()> {
        let m = self.mi.m;
        let Some(callee) = m.function(name) else {
            return self.e(format!(
                "call to @{name}, which is not defined in the module"
            ));
        };
        let csig = signature(callee)?;
        if args.len() != callee.params().len() {
            return self.e(format!(
                "call to @{name} passes {} arguments, it takes {}",
                args.len(),
                callee.params().len()
            ));
        }
        let mut parts = Vec::new();
        for a in args {
            let t = self.vt(&self.ty(*a)?)?;
            parts.push(format!("{t} {}", self.op(*a)?));
        }
        let ptypes = callee.param_types();
        for k in &csig.ptr_params {
            let a = args[*k];
            let es = ptypes[*k]
                .pointee()
                .and_then(|t| t.size_bytes())
                .unwrap_or(1)
                .max(1);
            let origin = self.origins.get(a.index()).copied().flatten();
            let known = origin
                .and_then(|o| self.lens_bytes.get(&o).cloned())
                .zip(self.offs.get(a.index()).cloned().flatten());
            match known {
                Some((lenb, off)) => {
                    let rem = self.t();
                    self.emit(format!("{rem} = sub i64 {lenb}, {off}"));
                    let q = self.t();
                    self.emit(format!("{q} = sdiv i64 {rem}, {es}"));
                    let c = self.t();
                    self.emit(format!("{c} = call i64 @llvm.smax.i64(i64 {q}, i64 0)"));
                    self.decl("declare i64 @llvm.smax.i64(i64, i64)");
                    parts.push(format!("i64 {c}"));
                }
                None => parts.push(format!("i64 {}", i64::MAX)),
            }
        }
        let slots = if csig.multi_ret {
            let s = format!("%rs{}", inst.0);
            let _ = writeln!(
                self.entry_text,
                "  {s} = alloca [{} x i64], align 8",
                results.len()
            );
            parts.push(format!("ptr {s}"));
            Some(s)
        } else {
            None
        };
        parts.push("ptr %err".into());
        if csig.gpu {
            if !self.f.kind.is_gpu() {
                return self.e(format!("host function calls GPU function @{name}"));
            }
            parts.push("ptr %ctx".into());
        }
        let call = format!("call {} {}({})", csig.ret, gname(name), parts.join(", "));
        match (&slots, results.first()) {
            (None, Some(r)) => self.emit(format!("%v{} = {call}", r.0)),
            _ => self.emit(call),
        }
        if let Some(s) = slots {
            for (k, r) in results.iter().enumerate() {
                let t = self.ty(*r)?;
                let p = self.t();
                self.emit(format!("{p} = getelementptr i64, ptr {s}, i64 {k}"));
                if t.is_bool() {
                    let x = self.t();
                    self.emit(format!("{x} = load i8, ptr {p}"));
                    self.emit(format!("%v{} = trunc i8 {x} to i1", r.0));
                } else {
                    let mt = mty(&t).unwrap_or_else(|| "i64".into());
                    self.emit(format!("%v{} = load {mt}, ptr {p}", r.0));
                }
            }
        }
        if self.mi.can_fail.contains(name) {
            let e = self.t();
            self.emit(format!("{e} = load i64, ptr %err, align 8"));
            let bad = self.t();
            self.emit(format!("{bad} = icmp ne i64 {e}, 0"));
            self.guard(&bad, "zx.fail");
        }
        Ok(())
    }
}
