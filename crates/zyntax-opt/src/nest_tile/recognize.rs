//! Recognition: checks a [`NestSpec`] and classifies it as a map or a
//! contraction, flattening every access to `offset + Σ coef[l] · l` over the
//! buffer's row-major layout (so transposition and strides are only
//! coefficients).

use super::{Access, Expr, Index, LoopKind, NestSpec, Refusal, RefusalKind as K};
use zyntax_hir::{BinOp, Type, UnOp};

/// An access flattened over its buffer: element `offset + Σ coef[l] · l`
/// (`coef` has one entry per loop of the nest, 0 where unused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlatAccess {
    pub buffer: usize,
    pub offset: u64,
    pub coef: Vec<u64>,
}

/// A map over the parallel loops (in nest order; the last is the tile's
/// fastest dim).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapPlan {
    pub loops: Vec<usize>,
}

/// `C[m, n] = epilogue(Σ_k A[m, k] · B[k, n])` with `a` and `b` the flat
/// accesses of the two factors (either order in the body).
#[derive(Clone, Debug, PartialEq)]
pub struct ContractionPlan {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: FlatAccess,
    pub b: FlatAccess,
    /// The operand element type (f32, f16 or bf16).
    pub elem: Type,
    /// An element-wise prologue of a factor (`exp(A[i,k]) * B[k,j]`): the
    /// factor's expression, whose one load is the operand, applied to each
    /// loaded tile (in f32, rounded back to the operand type) before the dot.
    pub a_prologue: Option<Expr>,
    pub b_prologue: Option<Expr>,
}

/// `out[p...] = epilogue(Σ_k value)` for a sum over one reduction loop
/// that is not a tensor-core/FFMA contraction (a row sum, a matrix-vector
/// product, f64 or mixed-type products): tiles over the parallel loops and
/// `k`, summed along `k` with the tile `reduce`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReductionPlan {
    pub loops: Vec<usize>,
    pub k: usize,
    /// Why the contraction path did not take it.
    pub why_not_contraction: String,
}

/// What a nest was recognised as.
#[derive(Clone, Debug, PartialEq)]
pub enum Recognition {
    Map(MapPlan),
    Contraction(ContractionPlan),
    Reduction(ReductionPlan),
}

impl Recognition {
    /// A sentence for reports.
    pub fn describe(&self, spec: &NestSpec) -> String {
        let name = |l: usize| spec.loops[l].name.clone();
        match self {
            Recognition::Map(p) => {
                let loops: Vec<String> = p.loops.iter().map(|&l| name(l)).collect();
                format!("map over ({}), blocked tiles", loops.join(", "))
            }
            Recognition::Reduction(r) => {
                let loops: Vec<String> = r.loops.iter().map(|&l| name(l)).collect();
                format!(
                    "reduction over {} for each ({}), tile reduce (not a dot: {})",
                    name(r.k),
                    loops.join(", "),
                    r.why_not_contraction
                )
            }
            Recognition::Contraction(c) => format!(
                "contraction over {} ({}x{}) reducing {} ({}), {} operands, {}{}",
                format_args!("({}, {})", name(c.m), name(c.n)),
                spec.loops[c.m].extent,
                spec.loops[c.n].extent,
                name(c.k),
                spec.loops[c.k].extent,
                c.elem,
                if c.elem == Type::F32 {
                    "FFMA dot"
                } else {
                    "mma.sync dot (sm_80+; the wgmma pipeline on sm_90a when it fits)"
                },
                match (
                    spec.epilogue.is_some(),
                    c.a_prologue.is_some() || c.b_prologue.is_some()
                ) {
                    (true, true) => " with element-wise prologue and epilogue",
                    (true, false) => " with an element-wise epilogue",
                    (false, true) => " with an element-wise prologue",
                    (false, false) => "",
                },
            ),
        }
    }
}

const FLOATS: [Type; 4] = [Type::F32, Type::F64, Type::F16, Type::BF16];
const UNARY: [UnOp; 11] = [
    UnOp::Neg,
    UnOp::Abs,
    UnOp::Sqrt,
    UnOp::Rsqrt,
    UnOp::Exp,
    UnOp::Log,
    UnOp::Sin,
    UnOp::Cos,
    UnOp::Tanh,
    UnOp::Floor,
    UnOp::Ceil,
];
const BINARY: [BinOp; 6] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Div,
    BinOp::Min,
    BinOp::Max,
];

/// Recognises `spec` as a map or a contraction, or says why not.
pub fn recognize(spec: &NestSpec) -> Result<Recognition, Refusal> {
    check_loops(spec)?;
    let out = flatten(spec, &spec.output)?;
    let parallel: Vec<usize> = loops_of(spec, LoopKind::Parallel);
    let reduction: Vec<usize> = loops_of(spec, LoopKind::Reduction);
    check_output(spec, &out, &parallel, &reduction)?;
    check_expr(spec, &spec.value, &out, false, &reduction)?;
    if let Some(e) = &spec.epilogue {
        if reduction.is_empty() {
            return Err(Refusal::new(
                K::BadSpec,
                "an epilogue needs a reduction loop (a map's body is its value)",
            ));
        }
        check_expr(spec, e, &out, true, &reduction)?;
    }
    if reduction.is_empty() {
        if parallel.len() > 3 {
            return Err(Refusal::new(
                K::UnsupportedShape,
                format!(
                    "a map of {} parallel loops; tiles have rank 1 to 3",
                    parallel.len()
                ),
            ));
        }
        return Ok(Recognition::Map(MapPlan { loops: parallel }));
    }
    match contraction(spec, &parallel, &reduction) {
        Ok(c) => Ok(Recognition::Contraction(c)),
        Err(e) if reduction.len() == 1 && (1..=2).contains(&parallel.len()) => {
            Ok(Recognition::Reduction(ReductionPlan {
                loops: parallel,
                k: reduction[0],
                why_not_contraction: e.message,
            }))
        }
        Err(e) => Err(e),
    }
}

fn loops_of(spec: &NestSpec, kind: LoopKind) -> Vec<usize> {
    (0..spec.loops.len())
        .filter(|&l| spec.loops[l].kind == kind)
        .collect()
}

fn check_loops(spec: &NestSpec) -> Result<(), Refusal> {
    // The name becomes the kernel's: an identifier.
    let mut chars = spec.name.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && spec.name != "_";
    if !ident {
        return Err(Refusal::new(
            K::BadSpec,
            format!(
                "the nest's name {:?} is not an identifier (it names the kernel)",
                spec.name
            ),
        ));
    }
    if spec.loops.is_empty() {
        return Err(Refusal::new(K::BadSpec, "the nest has no loop"));
    }
    for l in &spec.loops {
        if l.extent == 0 || l.extent > u64::from(u32::MAX) {
            return Err(Refusal::new(
                K::BadSpec,
                format!("loop {} has extent {} (1 to 2^32-1)", l.name, l.extent),
            ));
        }
    }
    for b in &spec.buffers {
        if !FLOATS.contains(&b.elem) {
            return Err(Refusal::new(
                K::UnsupportedDtype,
                format!(
                    "buffer {} is {}; tiled nests take f32, f64, f16 and bf16",
                    b.name, b.elem
                ),
            ));
        }
    }
    Ok(())
}

/// Flattens `access` over its buffer, checking it is affine, in bounds and
/// not reversed.
pub(super) fn flatten(spec: &NestSpec, access: &Access) -> Result<FlatAccess, Refusal> {
    let buf = spec.buffers.get(access.buffer).ok_or_else(|| {
        Refusal::new(
            K::BadSpec,
            format!("access to buffer #{} which is not declared", access.buffer),
        )
    })?;
    if access.index.len() != buf.shape.len() {
        return Err(Refusal::new(
            K::BadSpec,
            format!(
                "buffer {} has rank {} but is indexed with {} indices",
                buf.name,
                buf.shape.len(),
                access.index.len()
            ),
        ));
    }
    let mut coef = vec![0i128; spec.loops.len()];
    let mut offset = 0i128;
    let mut stride = 1i128;
    for (d, index) in access.index.iter().enumerate().rev() {
        let aff = match index {
            Index::Affine(a) => a,
            Index::Opaque(what) => {
                return Err(Refusal::new(
                    K::NonAffineIndex,
                    format!(
                        "index {d} of {} (`{what}`) is not affine in the loops",
                        buf.name
                    ),
                ))
            }
        };
        let (mut lo, mut hi) = (i128::from(aff.constant), i128::from(aff.constant));
        for &(l, c) in &aff.terms {
            let lp = spec.loops.get(l).ok_or_else(|| {
                Refusal::new(K::BadSpec, format!("index of {} uses loop #{l}", buf.name))
            })?;
            let span = i128::from(c) * i128::from(lp.extent - 1);
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
            coef[l] += i128::from(c) * stride;
        }
        if lo < 0 || hi >= i128::from(buf.shape[d]) {
            return Err(Refusal::new(
                K::UnsupportedAccess,
                format!(
                    "index {d} of {} ranges over {lo}..={hi}, outside 0..{}",
                    buf.name, buf.shape[d]
                ),
            ));
        }
        offset += i128::from(aff.constant) * stride;
        stride *= i128::from(buf.shape[d]);
    }
    let mut flat = Vec::with_capacity(coef.len());
    for (l, c) in coef.into_iter().enumerate() {
        if c < 0 {
            return Err(Refusal::new(
                K::UnsupportedAccess,
                format!(
                    "{} is read in reverse along loop {} (stride {c}); views take non-negative strides",
                    buf.name, spec.loops[l].name
                ),
            ));
        }
        flat.push(
            u64::try_from(c)
                .ok()
                .filter(|&c| c <= u64::from(u32::MAX))
                .ok_or_else(|| {
                    Refusal::new(
                        K::UnsupportedAccess,
                        format!("{} has a stride above 2^32", buf.name),
                    )
                })?,
        );
    }
    Ok(FlatAccess {
        buffer: access.buffer,
        offset: u64::try_from(offset).unwrap_or(0),
        coef: flat,
    })
}

/// Each output element is written by exactly one iteration of the parallel
/// loops: every parallel loop moves the index, injectively (mixed radix),
/// and no reduction loop does.
fn check_output(
    spec: &NestSpec,
    out: &FlatAccess,
    parallel: &[usize],
    reduction: &[usize],
) -> Result<(), Refusal> {
    let name = &spec.buffers[out.buffer].name;
    for &l in reduction {
        if out.coef[l] != 0 {
            return Err(Refusal::new(
                K::LoopCarriedDependence,
                format!(
                    "the output {name} is indexed by reduction loop {}",
                    spec.loops[l].name
                ),
            ));
        }
    }
    let mut by_stride: Vec<usize> = parallel.to_vec();
    by_stride.sort_by_key(|&l| out.coef[l]);
    let mut reach = 0u128;
    for l in by_stride {
        let c = u128::from(out.coef[l]);
        if c == 0 || c <= reach {
            return Err(Refusal::new(
                K::LoopCarriedDependence,
                format!(
                    "several iterations of parallel loop {} write the same element of {name}",
                    spec.loops[l].name
                ),
            ));
        }
        reach += c * u128::from(spec.loops[l].extent - 1);
    }
    Ok(())
}

/// Ops, and loads that neither read another iteration's output element nor
/// (in an epilogue) depend on a reduction loop.
fn check_expr(
    spec: &NestSpec,
    e: &Expr,
    out: &FlatAccess,
    epilogue: bool,
    reduction: &[usize],
) -> Result<(), Refusal> {
    match e {
        Expr::Const(_) => Ok(()),
        Expr::Reduced if epilogue => Ok(()),
        Expr::Reduced => Err(Refusal::new(
            K::BadSpec,
            "`Reduced` (the sum) is only defined in the epilogue",
        )),
        Expr::Unary(op, a) if UNARY.contains(op) => check_expr(spec, a, out, epilogue, reduction),
        Expr::Binary(op, a, b) if BINARY.contains(op) => {
            check_expr(spec, a, out, epilogue, reduction)?;
            check_expr(spec, b, out, epilogue, reduction)
        }
        Expr::Unary(op, _) => Err(Refusal::new(
            K::UnsupportedOp,
            format!("unary op {op:?} is not lowered to tiles"),
        )),
        Expr::Binary(op, _, _) => Err(Refusal::new(
            K::UnsupportedOp,
            format!("binary op {op:?} is not lowered to tiles"),
        )),
        Expr::Load(access) => {
            let flat = flatten(spec, access)?;
            let name = &spec.buffers[flat.buffer].name;
            if flat.buffer == out.buffer && (flat != *out || (!reduction.is_empty() && !epilogue)) {
                return Err(Refusal::new(
                    K::LoopCarriedDependence,
                    format!(
                        "{name} is written and also read at another element (or inside the reduction)"
                    ),
                ));
            }
            if epilogue {
                if let Some(&l) = reduction.iter().find(|&&l| flat.coef[l] != 0) {
                    return Err(Refusal::new(
                        K::NotAContraction,
                        format!(
                            "the epilogue reads {name} along reduction loop {}",
                            spec.loops[l].name
                        ),
                    ));
                }
            }
            Ok(())
        }
    }
}

fn contraction(
    spec: &NestSpec,
    parallel: &[usize],
    reduction: &[usize],
) -> Result<ContractionPlan, Refusal> {
    if reduction.len() != 1 {
        return Err(Refusal::new(
            K::UnsupportedShape,
            format!(
                "{} reduction loops; a tiled contraction reduces one",
                reduction.len()
            ),
        ));
    }
    let k = reduction[0];
    let (fx, fy) = match &spec.value {
        Expr::Binary(BinOp::Mul, x, y) => (&**x, &**y),
        _ => return Err(not_product()),
    };
    // Each factor is a load, or an element-wise expression of exactly one
    // load and constants (a prologue).
    let operand = |f: &Expr| -> Result<(FlatAccess, Option<Expr>), Refusal> {
        let mut loads = Vec::new();
        collect_loads(f, &mut loads);
        // One load, possibly read several times (gelu(x) reads x five times).
        loads.dedup_by(|a, b| a == b);
        match (f, loads.as_slice()) {
            (Expr::Load(a), _) => Ok((flatten(spec, a)?, None)),
            (_, [a]) if loads.iter().all(|l| l == a) => Ok((flatten(spec, a)?, Some(f.clone()))),
            _ => Err(not_product()),
        }
    };
    let ((x, x_pro), (y, y_pro)) = (operand(fx)?, operand(fy)?);
    if parallel.len() != 2 {
        return Err(Refusal::new(
            K::UnsupportedShape,
            format!(
                "a contraction over {} parallel loops; tiled contractions have two (batched ones are not lowered yet)",
                parallel.len()
            ),
        ));
    }
    let uses = |f: &FlatAccess| -> Vec<usize> {
        (0..spec.loops.len()).filter(|&l| f.coef[l] != 0).collect()
    };
    let (ux, uy) = (uses(&x), uses(&y));
    let pair = |u: &[usize]| -> Option<usize> {
        match u {
            [p, q] if *q == k && parallel.contains(p) => Some(*p),
            [q, p] if *q == k && parallel.contains(p) => Some(*p),
            _ => None,
        }
    };
    let (Some(px), Some(py)) = (pair(&ux), pair(&uy)) else {
        return Err(Refusal::new(
            K::NotAContraction,
            format!(
                "the factors read {} and {}; a contraction needs each to use the reduction loop and one output loop",
                spec.buffers[x.buffer].name, spec.buffers[y.buffer].name
            ),
        ));
    };
    if px == py {
        return Err(Refusal::new(
            K::NotAContraction,
            "both factors use the same output loop",
        ));
    }
    let (ex, ey) = (&spec.buffers[x.buffer].elem, &spec.buffers[y.buffer].elem);
    if ex != ey {
        return Err(Refusal::new(
            K::UnsupportedDtype,
            format!("the factors are {ex} and {ey}; a tiled dot takes one operand type"),
        ));
    }
    if *ex == Type::F64 {
        return Err(Refusal::new(
            K::UnsupportedDtype,
            "f64 operands: the tile dot takes f32, f16 and bf16",
        ));
    }
    Ok(ContractionPlan {
        m: px,
        n: py,
        k,
        a: x,
        b: y,
        elem: ex.clone(),
        a_prologue: x_pro,
        b_prologue: y_pro,
    })
}

/// The loads of `e`, in order.
fn collect_loads<'e>(e: &'e Expr, out: &mut Vec<&'e super::Access>) {
    match e {
        Expr::Load(a) => out.push(a),
        Expr::Unary(_, a) => collect_loads(a, out),
        Expr::Binary(_, a, b) => {
            collect_loads(a, out);
            collect_loads(b, out);
        }
        Expr::Const(_) | Expr::Reduced => {}
    }
}

fn not_product() -> Refusal {
    Refusal::new(
        K::NotAContraction,
        "the reduced value is not a product of two factors, each one load (or an element-wise expression of one load)",
    )
}
