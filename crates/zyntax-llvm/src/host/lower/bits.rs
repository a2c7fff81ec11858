//! The lowering of PTX's bit-field ops (`bfe`, `bfi`, `prmt`, `shf.*`) and
//! the subnormal flush of `ex2_ftz.approx`: `FnLower` methods, kept out of
//! `lower.rs` for its size.

use super::{sname, FnLower, LResult};
use zyntax_hir::Type;

impl FnLower<'_> {
    /// An integer operand widened to i64 (zero-extended, as the interpreter
    /// reads registers).
    fn wide(&mut self, (x, t): &(String, Type)) -> LResult<String> {
        let Some(s) = t.as_scalar().filter(|s| s.is_int()) else {
            return self.e(format!("bit operation on {t}"));
        };
        let o = self.t();
        if s.bits() == 64 {
            self.emit(format!("{o} = add i64 {x}, 0"));
        } else {
            self.emit(format!("{o} = zext {} {x} to i64", sname(s)));
        }
        Ok(o)
    }

    /// One i64 instruction `rhs` into a new temporary.
    fn i64_op(&mut self, rhs: String) -> String {
        let o = self.t();
        self.emit(format!("{o} = {rhs}"));
        o
    }

    /// `bfe`, `bfi`, `prmt`, `shf.*` with PTX's definitions, in closed form of
    /// the interpreter's per-bit loops (`zyntax-interp/src/scalar.rs`,
    /// `bits`), computed in i64 and truncated to the result type `t`.
    pub(super) fn bit_op(
        &mut self,
        op: zyntax_hir::BitOp,
        t: &Type,
        ops: &[(String, Type)],
        r: &str,
    ) -> LResult<()> {
        use zyntax_hir::BitOp;
        let s = t.as_scalar().filter(|s| s.is_int());
        let Some(s) = s else {
            return self.e(format!("`{}` on {t}", op.name()));
        };
        let w = u64::from(s.bits());
        let msb = w - 1;
        let m = if w == 64 { -1i64 } else { (1i64 << w) - 1 };
        let x: Vec<String> = ops.iter().map(|o| self.wide(o)).collect::<LResult<_>>()?;
        let arg = |k: usize| x.get(k).cloned().unwrap_or_else(|| "0".into());
        // A position or length operand: its low 8 bits (the low 32 for 64-bit types).
        let field_mask = if w == 64 { 0xffff_ffffi64 } else { 0xff };
        let res = match op {
            BitOp::Bfe | BitOp::Bfi => {
                let bfi = op == BitOp::Bfi;
                let a = arg(0);
                let pos = self.i64_op(format!(
                    "and i64 {}, {field_mask}",
                    arg(if bfi { 2 } else { 1 })
                ));
                let len = self.i64_op(format!(
                    "and i64 {}, {field_mask}",
                    arg(if bfi { 3 } else { 2 })
                ));
                let inr = self.i64_op(format!("icmp ule i64 {pos}, {msb}"));
                let room0 = self.i64_op(format!("sub i64 {w}, {pos}"));
                let room = self.i64_op(format!("select i1 {inr}, i64 {room0}, i64 0"));
                let v = self.i64_op(format!("call i64 @llvm.umin.i64(i64 {len}, i64 {room})"));
                self.decl("declare i64 @llvm.umin.i64(i64, i64)");
                let full = self.i64_op(format!("icmp uge i64 {v}, 64"));
                let vs = self.i64_op(format!("select i1 {full}, i64 0, i64 {v}"));
                let p2 = self.i64_op(format!("shl i64 1, {vs}"));
                let vm0 = self.i64_op(format!("sub i64 {p2}, 1"));
                let vmask = self.i64_op(format!("select i1 {full}, i64 -1, i64 {vm0}"));
                let sh = self.i64_op(format!("select i1 {inr}, i64 {pos}, i64 0"));
                if bfi {
                    let f = arg(1);
                    let af = self.i64_op(format!("and i64 {a}, {vmask}"));
                    let field = self.i64_op(format!("shl i64 {af}, {sh}"));
                    let fm = self.i64_op(format!("shl i64 {vmask}, {sh}"));
                    let nfm = self.i64_op(format!("xor i64 {fm}, -1"));
                    let keep = self.i64_op(format!("and i64 {f}, {nfm}"));
                    let d = self.i64_op(format!("or i64 {keep}, {field}"));
                    self.i64_op(format!("and i64 {d}, {m}"))
                } else {
                    let shifted0 = self.i64_op(format!("lshr i64 {a}, {sh}"));
                    let shifted = self.i64_op(format!("select i1 {inr}, i64 {shifted0}, i64 0"));
                    let low = self.i64_op(format!("and i64 {shifted}, {vmask}"));
                    if s.is_signed() {
                        // The sign: bit min(pos + len - 1, msb) of a, when len > 0.
                        let e0 = self.i64_op(format!("add i64 {pos}, {len}"));
                        let e1 = self.i64_op(format!("sub i64 {e0}, 1"));
                        let idx =
                            self.i64_op(format!("call i64 @llvm.umin.i64(i64 {e1}, i64 {msb})"));
                        let sb0 = self.i64_op(format!("lshr i64 {a}, {idx}"));
                        let sb = self.i64_op(format!("and i64 {sb0}, 1"));
                        let has = self.i64_op(format!("icmp ne i64 {len}, 0"));
                        let one = self.i64_op(format!("icmp ne i64 {sb}, 0"));
                        let neg = self.i64_op(format!("and i1 {has}, {one}"));
                        let nv = self.i64_op(format!("xor i64 {vmask}, -1"));
                        let hi0 = self.i64_op(format!("and i64 {nv}, {m}"));
                        let hi = self.i64_op(format!("select i1 {neg}, i64 {hi0}, i64 0"));
                        self.i64_op(format!("or i64 {low}, {hi}"))
                    } else {
                        low
                    }
                }
            }
            BitOp::Prmt => {
                let hi = self.i64_op(format!("shl i64 {}, 32", arg(1)));
                let src = self.i64_op(format!("or i64 {}, {hi}", arg(0)));
                let c = arg(2);
                let mut d = "0".to_string();
                for k in 0..4 {
                    let sel0 = self.i64_op(format!("lshr i64 {c}, {}", 4 * k));
                    let sel = self.i64_op(format!("and i64 {sel0}, 15"));
                    let idx0 = self.i64_op(format!("and i64 {sel}, 7"));
                    let idx = self.i64_op(format!("shl i64 {idx0}, 3"));
                    let b0 = self.i64_op(format!("lshr i64 {src}, {idx}"));
                    let byte = self.i64_op(format!("and i64 {b0}, 255"));
                    let top = self.i64_op(format!("and i64 {byte}, 128"));
                    let neg = self.i64_op(format!("icmp ne i64 {top}, 0"));
                    let fill = self.i64_op(format!("select i1 {neg}, i64 255, i64 0"));
                    let sgn0 = self.i64_op(format!("and i64 {sel}, 8"));
                    let sgn = self.i64_op(format!("icmp ne i64 {sgn0}, 0"));
                    let out = self.i64_op(format!("select i1 {sgn}, i64 {fill}, i64 {byte}"));
                    let placed = self.i64_op(format!("shl i64 {out}, {}", 8 * k));
                    d = self.i64_op(format!("or i64 {d}, {placed}"));
                }
                d
            }
            BitOp::ShfLWrap | BitOp::ShfLClamp | BitOp::ShfRWrap | BitOp::ShfRClamp => {
                let lo = self.i64_op(format!("and i64 {}, 4294967295", arg(0)));
                let hi0 = self.i64_op(format!("and i64 {}, 4294967295", arg(1)));
                let hi = self.i64_op(format!("shl i64 {hi0}, 32"));
                let wide = self.i64_op(format!("or i64 {lo}, {hi}"));
                let n0 = self.i64_op(format!("and i64 {}, 4294967295", arg(2)));
                let n = if matches!(op, BitOp::ShfLWrap | BitOp::ShfRWrap) {
                    self.i64_op(format!("and i64 {n0}, 31"))
                } else {
                    self.decl("declare i64 @llvm.umin.i64(i64, i64)");
                    self.i64_op(format!("call i64 @llvm.umin.i64(i64 {n0}, i64 32)"))
                };
                let v = if matches!(op, BitOp::ShfLWrap | BitOp::ShfLClamp) {
                    let l = self.i64_op(format!("shl i64 {wide}, {n}"));
                    self.i64_op(format!("lshr i64 {l}, 32"))
                } else {
                    self.i64_op(format!("lshr i64 {wide}, {n}"))
                };
                self.i64_op(format!("and i64 {v}, 4294967295"))
            }
        };
        if w == 64 {
            self.emit(format!("{r} = add i64 {res}, 0"));
        } else {
            self.emit(format!("{r} = trunc i64 {res} to {}", sname(s)));
        }
        Ok(())
    }

    /// `x` (an f32 operand) with a subnormal value flushed to signed zero.
    pub(super) fn flush_subnormal(&mut self, x: &str) -> String {
        self.decl("declare float @llvm.fabs.f32(float)");
        self.decl("declare float @llvm.copysign.f32(float, float)");
        let (a, sub, z, o) = (self.t(), self.t(), self.t(), self.t());
        self.emit(format!("{a} = call float @llvm.fabs.f32(float {x})"));
        // 0x3810000000000000: FLT_MIN, the smallest normal f32.
        self.emit(format!("{sub} = fcmp olt float {a}, 0x3810000000000000"));
        self.emit(format!(
            "{z} = call float @llvm.copysign.f32(float 0.0, float {x})"
        ));
        self.emit(format!("{o} = select i1 {sub}, float {z}, float {x}"));
        o
    }
}
