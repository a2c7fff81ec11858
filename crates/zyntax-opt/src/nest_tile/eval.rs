//! The nest evaluated directly in f64, point by point, as its description
//! says: the reference a lowered nest is checked against (the tiny-DSL
//! example, front-ends' tests). Slow by design; for small sizes.

use super::{Access, Expr, Index, LoopKind, NestSpec, Refusal, RefusalKind};
use zyntax_hir::{BinOp, UnOp};

/// `output` after running `spec` over `buffers` (one `Vec<f64>` per spec
/// buffer, row-major; the output's own values are read where the nest
/// reads them, `C += ...`). An opaque index cannot be evaluated: a
/// [`Refusal`] of kind `NonAffineIndex`.
pub fn evaluate(spec: &NestSpec, buffers: &[Vec<f64>]) -> Result<Vec<f64>, Refusal> {
    if buffers.len() != spec.buffers.len() {
        return Err(Refusal::new(
            RefusalKind::BadSpec,
            format!(
                "{} buffers given for {} declared",
                buffers.len(),
                spec.buffers.len()
            ),
        ));
    }
    for (b, v) in spec.buffers.iter().zip(buffers) {
        let n: u64 = b.shape.iter().product();
        if v.len() as u64 != n {
            return Err(Refusal::new(
                RefusalKind::BadSpec,
                format!(
                    "buffer {} has {} elements, its shape says {n}",
                    b.name,
                    v.len()
                ),
            ));
        }
    }
    let kinds = |k: LoopKind| -> Vec<usize> {
        (0..spec.loops.len())
            .filter(|&l| spec.loops[l].kind == k)
            .collect()
    };
    let (par, red) = (kinds(LoopKind::Parallel), kinds(LoopKind::Reduction));
    let ev = Eval { spec, buffers };
    let mut out = buffers[spec.output.buffer].clone();
    let mut iv = vec![0u64; spec.loops.len()];
    let mut results = Vec::new();
    // The nest's iterations are independent (or it is refused), so writes
    // are applied after all reads: `C += ...` reads the old C.
    for_each(spec, &par, &mut iv, &mut |iv| {
        let value = if red.is_empty() {
            ev.expr(&spec.value, iv, 0.0)?
        } else {
            let mut sum = 0.0;
            let mut inner = iv.to_vec();
            for_each(spec, &red, &mut inner, &mut |jv| {
                sum += ev.expr(&spec.value, jv, 0.0)?;
                Ok(())
            })?;
            match &spec.epilogue {
                Some(e) => ev.expr(e, iv, sum)?,
                None => sum,
            }
        };
        results.push((ev.flat(&spec.output, iv)?, value));
        Ok(())
    })?;
    for (i, v) in results {
        out[i] = v;
    }
    Ok(out)
}

/// Calls `f` for every value of `loops` (row-major), the others as in `iv`.
fn for_each(
    spec: &NestSpec,
    loops: &[usize],
    iv: &mut [u64],
    f: &mut dyn FnMut(&[u64]) -> Result<(), Refusal>,
) -> Result<(), Refusal> {
    let Some((&first, rest)) = loops.split_first() else {
        return f(iv);
    };
    for v in 0..spec.loops[first].extent {
        iv[first] = v;
        for_each(spec, rest, iv, f)?;
    }
    Ok(())
}

struct Eval<'a> {
    spec: &'a NestSpec,
    buffers: &'a [Vec<f64>],
}

impl Eval<'_> {
    fn flat(&self, a: &Access, iv: &[u64]) -> Result<usize, Refusal> {
        let shape = &self.spec.buffers[a.buffer].shape;
        let mut e = 0i128;
        for (d, ix) in a.index.iter().enumerate() {
            let Index::Affine(af) = ix else {
                return Err(Refusal::new(
                    RefusalKind::NonAffineIndex,
                    "an opaque index cannot be evaluated",
                ));
            };
            let v = i128::from(af.constant)
                + af.terms
                    .iter()
                    .map(|&(l, c)| i128::from(c) * i128::from(iv[l]))
                    .sum::<i128>();
            if v < 0 || v >= i128::from(shape[d]) {
                return Err(Refusal::new(
                    RefusalKind::UnsupportedAccess,
                    format!(
                        "index {d} of {} is {v}, outside 0..{}",
                        self.spec.buffers[a.buffer].name, shape[d]
                    ),
                ));
            }
            e = e * i128::from(shape[d]) + v;
        }
        Ok(e as usize)
    }

    fn expr(&self, e: &Expr, iv: &[u64], reduced: f64) -> Result<f64, Refusal> {
        Ok(match e {
            Expr::Const(c) => *c,
            Expr::Reduced => reduced,
            Expr::Load(a) => self.buffers[a.buffer][self.flat(a, iv)?],
            Expr::Unary(op, a) => {
                let x = self.expr(a, iv, reduced)?;
                match op {
                    UnOp::Neg => -x,
                    UnOp::Abs => x.abs(),
                    UnOp::Sqrt => x.sqrt(),
                    UnOp::Rsqrt => 1.0 / x.sqrt(),
                    UnOp::Exp => x.exp(),
                    UnOp::Log => x.ln(),
                    UnOp::Sin => x.sin(),
                    UnOp::Cos => x.cos(),
                    UnOp::Tanh => x.tanh(),
                    UnOp::Floor => x.floor(),
                    UnOp::Ceil => x.ceil(),
                    _ => {
                        return Err(Refusal::new(
                            RefusalKind::UnsupportedOp,
                            format!("unary op {op:?}"),
                        ))
                    }
                }
            }
            Expr::Binary(op, a, b) => {
                let (x, y) = (self.expr(a, iv, reduced)?, self.expr(b, iv, reduced)?);
                match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    BinOp::Max => x.max(y),
                    BinOp::Min => x.min(y),
                    _ => {
                        return Err(Refusal::new(
                            RefusalKind::UnsupportedOp,
                            format!("binary op {op:?}"),
                        ))
                    }
                }
            }
        })
    }
}
