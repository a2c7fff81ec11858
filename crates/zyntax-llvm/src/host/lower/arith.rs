//! Scalar and vector arithmetic of the host lowering: `FnLower` methods for
//! binary and unary ops, casts and the f16/bf16-through-f32 float path,
//! kept out of `lower.rs` for its size.

use super::*;

impl FnLower<'_> {
    pub(super) fn conv(&mut self, how: &str, from: &str, v: &str, to: &str) -> String {
        let x = self.t();
        self.emit(format!("{x} = {how} {from} {v} to {to}"));
        x
    }

    /// Run `body` on float operands, widening f16/bf16 to f32 and narrowing the result into `r`.
    pub(super) fn float_op(
        &mut self,
        t: &Type,
        r: &str,
        body: impl FnOnce(&mut Self, &str, &[String]) -> LResult<String>,
        ops: &[String],
    ) -> LResult<()> {
        let tt = self.vt(t)?;
        let half = t.elem_scalar().is_some_and(is_half);
        if half {
            let wide = widen(t);
            let xs: Vec<String> = ops
                .iter()
                .map(|o| self.conv("fpext", &tt, o, &wide))
                .collect();
            let o = body(self, &wide, &xs)?;
            self.emit(format!("{r} = fptrunc {wide} {o} to {tt}"));
        } else {
            let o = body(self, &tt, ops)?;
            self.emit(format!("{r} = bitcast {tt} {o} to {tt}"));
        }
        Ok(())
    }

    pub(super) fn binary(
        &mut self,
        op: BinOp,
        t: &Type,
        a: &str,
        b: &str,
        r: &str,
        inst: InstId,
    ) -> LResult<()> {
        let Some(s) = t.elem_scalar() else {
            return self.e(format!("`{}` on {t}", op.name()));
        };
        let Some(form) = scalar::binary(op, class_of(s)) else {
            return self.e(format!("`{}` is not defined on {s}", op.name()));
        };
        let tt = self.vt(t)?;
        if s.is_float() {
            return self.float_op(
                t,
                r,
                |me, wt, x| {
                    let o = me.t();
                    match form {
                        Scalar::Inst(i) => {
                            me.emit(format!("{o} = {} {wt} {}, {}", i.name(), x[0], x[1]))
                        }
                        Scalar::Intrinsic(n) => {
                            let m = mangle_from(wt);
                            me.decl(format!("declare {wt} @{n}.{m}({wt}, {wt})"));
                            me.emit(format!(
                                "{o} = call {wt} @{n}.{m}({wt} {}, {wt} {})",
                                x[0], x[1]
                            ));
                        }
                        _ => return me.e(format!("`{}` on floats", op.name())),
                    }
                    Ok(o)
                },
                &[a.to_string(), b.to_string()],
            );
        }
        let bits = s.bits();
        match form {
            Scalar::Inst(i) => self.emit(format!("{r} = {} {tt} {a}, {b}", i.name())),
            Scalar::Intrinsic(n) => {
                let m = mangle(t);
                self.decl(format!("declare {tt} @{n}.{m}({tt}, {tt})"));
                self.emit(format!("{r} = call {tt} @{n}.{m}({tt} {a}, {tt} {b})"));
            }
            Scalar::Shift { left, signed } => {
                let splat = |v: String| -> String {
                    match t {
                        Type::Vector(_, n) => format!(
                            "<{}>",
                            vec![format!("{} {v}", sname(s)); *n as usize].join(", ")
                        ),
                        _ => v,
                    }
                };
                let cmpt = match t {
                    Type::Vector(_, n) => format!("<{n} x i1>"),
                    _ => "i1".into(),
                };
                if !left && signed {
                    // Amounts past the width shift by width - 1: the sign in every bit.
                    let m = mangle(t);
                    self.decl(format!("declare {tt} @llvm.umin.{m}({tt}, {tt})"));
                    let c = self.t();
                    self.emit(format!(
                        "{c} = call {tt} @llvm.umin.{m}({tt} {b}, {tt} {})",
                        splat((bits - 1).to_string())
                    ));
                    self.emit(format!("{r} = ashr {tt} {a}, {c}"));
                } else {
                    let sh = self.t();
                    let n = if left { "shl" } else { "lshr" };
                    self.emit(format!("{sh} = {n} {tt} {a}, {b}"));
                    let big = self.t();
                    let bw = splat(bits.to_string());
                    self.emit(format!("{big} = icmp uge {tt} {b}, {bw}"));
                    self.emit(format!(
                        "{r} = select {cmpt} {big}, {tt} zeroinitializer, {tt} {sh}"
                    ));
                }
            }
            Scalar::IntDiv { div, signed } => {
                if matches!(t, Type::Vector(..)) {
                    return self.e("integer division of vectors is not supported on the CPU");
                }
                // Division by zero is an error; MIN / -1 wraps (quotient MIN, remainder 0) as on the GPU.
                let z = self.t();
                self.emit(format!("{z} = icmp eq {tt} {b}, 0"));
                let fl = self.fail(ERR_DIV_ZERO, -1, "0", "0", inst);
                self.guard(&z, &fl);
                if signed {
                    let m1 = self.t();
                    self.emit(format!("{m1} = icmp eq {tt} {b}, -1"));
                    let safe = self.t();
                    self.emit(format!("{safe} = select i1 {m1}, {tt} 1, {tt} {b}"));
                    let q = self.t();
                    if div {
                        self.emit(format!("{q} = sdiv {tt} {a}, {safe}"));
                        let neg = self.t();
                        self.emit(format!("{neg} = sub {tt} 0, {a}"));
                        self.emit(format!("{r} = select i1 {m1}, {tt} {neg}, {tt} {q}"));
                    } else {
                        self.emit(format!("{q} = srem {tt} {a}, {safe}"));
                        self.emit(format!("{r} = select i1 {m1}, {tt} 0, {tt} {q}"));
                    }
                } else {
                    let n = if div { "udiv" } else { "urem" };
                    self.emit(format!("{r} = {n} {tt} {a}, {b}"));
                }
            }
            _ => return self.e(format!("`{}` on {s}", op.name())),
        }
        Ok(())
    }

    pub(super) fn unary(&mut self, op: UnOp, t: &Type, a: &str, r: &str) -> LResult<()> {
        let Some(s) = t.elem_scalar() else {
            return self.e(format!("`{}` on {t}", op.name()));
        };
        let Some(form) = scalar::unary(op, class_of(s)) else {
            return self.e(format!("`{}` is not defined on {s}", op.name()));
        };
        let tt = self.vt(t)?;
        if !s.is_float() {
            let m = mangle(t);
            match form {
                Scalar::Neg => self.emit(format!("{r} = sub {tt} zeroinitializer, {a}")),
                Scalar::Not => {
                    let ones = if s.is_bool() { "true" } else { "-1" };
                    let ones = match t {
                        Type::Vector(_, n) => format!(
                            "<{}>",
                            vec![format!("{tt_} {ones}", tt_ = sname(s)); *n as usize].join(", ")
                        ),
                        _ => ones.to_string(),
                    };
                    self.emit(format!("{r} = xor {tt} {a}, {ones}"));
                }
                Scalar::Identity => self.emit(format!("{r} = bitcast {tt} {a} to {tt}")),
                Scalar::Intrinsic(n) => {
                    self.decl(format!("declare {tt} @{n}.{m}({tt})"));
                    self.emit(format!("{r} = call {tt} @{n}.{m}({tt} {a})"));
                }
                Scalar::IntrinsicFalse(n) => {
                    self.decl(format!("declare {tt} @{n}.{m}({tt}, i1)"));
                    self.emit(format!("{r} = call {tt} @{n}.{m}({tt} {a}, i1 false)"));
                }
                Scalar::Bfind => {
                    self.decl(format!("declare {tt} @llvm.ctlz.{m}({tt}, i1)"));
                    let c = self.t();
                    self.emit(format!(
                        "{c} = call {tt} @llvm.ctlz.{m}({tt} {a}, i1 false)"
                    ));
                    self.emit(format!("{r} = sub {tt} {}, {c}", s.bits() - 1));
                }
                _ => return self.e(format!("`{}` on {s}", op.name())),
            }
            return Ok(());
        }
        self.float_op(
            t,
            r,
            |me, wt, x| {
                let m = mangle_from(wt);
                let o = me.t();
                let intr = |me: &mut Self, n: &str, o: &str, x: &str| {
                    me.decl(format!("declare {wt} @{n}.{m}({wt})"));
                    me.emit(format!("{o} = call {wt} @{n}.{m}({wt} {x})"));
                };
                match (form, op) {
                    (Scalar::FNeg, _) => me.emit(format!("{o} = fneg {wt} {}", x[0])),
                    (Scalar::Intrinsic(n), _) => intr(me, n, &o, &x[0]),
                    // The CPU's transcendentals: LLVM's libm intrinsics, exact to libm.
                    (Scalar::Math, UnOp::Exp) => intr(me, "llvm.exp", &o, &x[0]),
                    (Scalar::Math, UnOp::Log) => intr(me, "llvm.log", &o, &x[0]),
                    (Scalar::Math, UnOp::Sin) => intr(me, "llvm.sin", &o, &x[0]),
                    (Scalar::Math, UnOp::Cos) => intr(me, "llvm.cos", &o, &x[0]),
                    (Scalar::Math, UnOp::Tanh) => intr(me, "llvm.tanh", &o, &x[0]),
                    (Scalar::Math, UnOp::Rsqrt) => {
                        let q = me.t();
                        intr(me, "llvm.sqrt", &q, &x[0]);
                        let one = match wt {
                            "double" | "float" => "1.0".to_string(),
                            _ => {
                                let n = wt
                                    .split(" x ")
                                    .next()
                                    .unwrap_or("<1")
                                    .trim_start_matches('<')
                                    .to_string();
                                let e = wt
                                    .split(" x ")
                                    .nth(1)
                                    .unwrap_or("float>")
                                    .trim_end_matches('>')
                                    .to_string();
                                format!(
                                    "<{}>",
                                    vec![format!("{e} 1.0"); n.parse().unwrap_or(1)].join(", ")
                                )
                            }
                        };
                        me.emit(format!("{o} = fdiv {wt} {one}, {q}"));
                    }
                    _ => return me.e(format!("`{}` on floats", op.name())),
                }
                Ok(o)
            },
            &[a.to_string()],
        )
    }

    pub(super) fn cast(&mut self, from: &Type, to: &Type, a: &str, r: &str) -> LResult<()> {
        let (ft, tt) = (self.vt(from)?, self.vt(to)?);
        let (Some(fs), Some(ts)) = (from.elem_scalar(), to.elem_scalar()) else {
            if from.is_ptr() && to.is_ptr() {
                self.emit(format!("{r} = bitcast ptr {a} to ptr"));
                return Ok(());
            }
            return self.e(format!("cast from {from} to {to} is not supported"));
        };
        match scalar::cast(fs, ts) {
            Conv::Same => self.emit(format!("{r} = bitcast {ft} {a} to {tt}")),
            Conv::NonZero if fs.is_float() => {
                self.emit(format!("{r} = fcmp une {ft} {a}, zeroinitializer"))
            }
            Conv::NonZero => self.emit(format!("{r} = icmp ne {ft} {a}, zeroinitializer")),
            Conv::Cast(how) => self.emit(format!("{r} = {how} {ft} {a} to {tt}")),
            Conv::Saturating(n) => {
                let (mf, mt) = (mangle(from), mangle(to));
                self.decl(format!("declare {tt} @{n}.{mt}.{mf}({ft})"));
                self.emit(format!("{r} = call {tt} @{n}.{mt}.{mf}({ft} {a})"));
            }
            Conv::ViaF32 => {
                let w = widen(from);
                let x = self.conv("fpext", &ft, a, &w);
                self.emit(format!("{r} = fptrunc {w} {x} to {tt}"));
            }
        }
        Ok(())
    }
}
