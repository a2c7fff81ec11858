//! Fusion of a sequence of nests over named buffers into fewer nests, each
//! then lowered to one tile program: an element-wise consumer of a nest's
//! output joins that nest (a contraction's epilogue, a map's value), so the
//! intermediate never reaches memory.
//!
//! `B = A·W; C = gelu(B + bias); D = C + R` (three nests, B and C
//! temporaries) becomes one contraction whose epilogue is
//! `gelu(Reduced + bias) + R`. A consumer joins the nest before it when all
//! of these hold (every decision is recorded with its reason):
//!
//! - it reads that nest's output (a real producer → consumer edge);
//! - it is a map (no reduction loop) over the same parallel extents, in
//!   order (its loops are identified with the producer's by position);
//! - every read of the producer's output is at the consumer's own point
//!   (the same flat element the producer writes there): another element
//!   would belong to another program instance;
//! - the producer's output is a temporary (a nest stores one buffer);
//! - the producer does not read what the consumer writes;
//! - the fused nest is still recognised, as the same kind;
//! - its measured resources fit the budget: the caller lowers the fused
//!   nest and measures it (ptxas's registers and shared memory:
//!   [`FuseOptions::measure`]), because a sum of the stages' estimates
//!   says little about one kernel that keeps the intermediate in registers.
//!
//! A map whose output a contraction reads in one factor fuses the other
//! way, as that factor's prologue (`X2 = gelu(X); C = X2·W` becomes
//! `C = Σ gelu(X)·W`, applied to each loaded tile), when the map writes one
//! element per point (one loop per dim of its output) and its value reads
//! one element, so the fused factor stays one load. Not fused yet (refused
//! with the reason): a reduction consuming a contraction (its row sum spans
//! program instances), prologues reading more than one element, and
//! consumers reading the producer's output elsewhere than at the point.

use super::recognize::{flatten, recognize, Recognition};
use super::{lower, Access, Buffer, Expr, Index, LoopKind, NestKernel, NestSpec, NestTileOptions};
use crate::fusion::{Budget, Decision};

/// Resources of a lowered kernel as ptxas reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resources {
    pub registers: u32,
    pub shared_bytes: u32,
}

/// Measures a lowered fused kernel (ptxas registers and shared memory), or `None`.
pub type Measure<'m> = dyn Fn(&NestKernel) -> Option<Resources> + 'm;

/// How to fuse: the lowering options (arch, schedule) of the fused
/// nests, the budget, and the measurement of a lowered fused kernel
/// (`None`: do not measure; a measurement that fails is `None` too and the
/// fusion is kept, saying it was not measured).
pub struct FuseOptions<'a> {
    pub lower: NestTileOptions,
    pub budget: Budget,
    pub measure: Option<&'a Measure<'a>>,
}

impl Default for FuseOptions<'_> {
    fn default() -> Self {
        FuseOptions {
            lower: NestTileOptions::default(),
            budget: Budget {
                registers: 255,
                shared_bytes: 227 * 1024,
            },
            measure: None,
        }
    }
}

/// The fused sequence: its nests (each one kernel) and every decision.
#[derive(Clone, Debug)]
pub struct FusedNests {
    pub nests: Vec<NestSpec>,
    /// For each fused nest, the names of the input nests it runs.
    pub members: Vec<Vec<String>>,
    pub decisions: Vec<Decision>,
}

impl FusedNests {
    /// One line per decision.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for d in &self.decisions {
            let verb = if d.fused {
                "fused into"
            } else {
                "not fused into"
            };
            out.push_str(&format!(
                "{} {verb} {} [{}]: {}\n",
                d.consumer, d.producer, d.rule, d.why
            ));
        }
        out
    }
}

/// Fuses `nests` (in program order; buffers are shared by name) where the
/// rules above allow. `temporaries` names the buffers nobody reads after
/// the sequence: only their stores can be elided.
pub fn fuse(nests: &[NestSpec], temporaries: &[&str], options: &FuseOptions<'_>) -> FusedNests {
    let mut out = FusedNests {
        nests: Vec::new(),
        members: Vec::new(),
        decisions: Vec::new(),
    };
    for c in nests {
        if let Some(p) = out.nests.last() {
            let (decision, fused) = try_fuse(p, c, temporaries, options);
            out.decisions.push(decision);
            if let Some(f) = fused {
                if let (Some(last), Some(members)) = (out.nests.last_mut(), out.members.last_mut())
                {
                    *last = f;
                    members.push(c.name.clone());
                }
                continue;
            }
        }
        out.nests.push(c.clone());
        out.members.push(vec![c.name.clone()]);
    }
    out
}

fn decision(
    p: &NestSpec,
    c: &NestSpec,
    fused: bool,
    rule: &str,
    why: impl Into<String>,
) -> Decision {
    Decision {
        producer: p.name.clone(),
        consumer: c.name.clone(),
        fused,
        rule: rule.into(),
        why: why.into(),
    }
}

fn try_fuse(
    p: &NestSpec,
    c: &NestSpec,
    temporaries: &[&str],
    options: &FuseOptions<'_>,
) -> (Decision, Option<NestSpec>) {
    let no = |rule: &str, why: String| (decision(p, c, false, rule, why), None);
    let t_name = &p.buffers[p.output.buffer].name;
    let reads_t = |e: &Expr| loads(e).iter().any(|a| c.buffers[a.buffer].name == *t_name);
    let c_reads_t = reads_t(&c.value) || c.epilogue.as_ref().is_some_and(reads_t);
    if !c_reads_t {
        return no(
            "no_dependence",
            format!("{} does not read {t_name}", c.name),
        );
    }
    let p_maps = p.loops.iter().all(|l| l.kind == LoopKind::Parallel);
    if c.loops.iter().any(|l| l.kind == LoopKind::Reduction) && p_maps {
        return prologue(p, c, temporaries, options);
    }
    if c.loops.iter().any(|l| l.kind == LoopKind::Reduction) {
        let why = if matches!(recognize(p), Ok(Recognition::Contraction(_))) {
            "a reduction consuming a contraction: its sums span program instances (not fused yet)"
        } else {
            "the consumer reduces: fusing it needs every point of the producer (not fused yet)"
        };
        return no("reduction_consumer", why.into());
    }
    let p_par: Vec<usize> = (0..p.loops.len())
        .filter(|&l| p.loops[l].kind == LoopKind::Parallel)
        .collect();
    let p_extents: Vec<u64> = p_par.iter().map(|&l| p.loops[l].extent).collect();
    let c_extents: Vec<u64> = c.loops.iter().map(|l| l.extent).collect();
    if p_extents != c_extents {
        return no(
            "space",
            format!("parallel extents {p_extents:?} and {c_extents:?} differ"),
        );
    }
    if !temporaries.contains(&t_name.as_str()) {
        return no(
            "live_out",
            format!("{t_name} is read after the sequence and a nest stores one buffer"),
        );
    }
    let c_out = &c.buffers[c.output.buffer].name;
    let p_reads_c_out = loads(&p.value)
        .iter()
        .chain(p.epilogue.as_ref().map(loads).unwrap_or_default().iter())
        .any(|a| p.buffers[a.buffer].name == *c_out);
    if p_reads_c_out {
        return no(
            "dependence",
            format!("{} reads {c_out}, which {} writes", p.name, c.name),
        );
    }
    // Buffers: the producer's, then the consumer's new ones (by name).
    let mut buffers = p.buffers.clone();
    let mut remap = Vec::new();
    for b in &c.buffers {
        match buffers.iter().position(|x| x.name == b.name) {
            Some(i) if buffers[i].shape != b.shape || buffers[i].elem != b.elem => {
                return no(
                    "buffers",
                    format!("{} is declared with two shapes or types", b.name),
                )
            }
            Some(i) => remap.push(i),
            None => {
                buffers.push(Buffer::clone(b));
                remap.push(buffers.len() - 1);
            }
        }
    }
    // The producer's output element at a point, over the producer's loops.
    let Ok(t_at_point) = flatten(p, &p.output) else {
        return no("spec", "the producer's output is not affine".into());
    };
    let produced = match &p.epilogue {
        Some(e) => e.clone(),
        None if p_par.len() < p.loops.len() => Expr::Reduced,
        None => p.value.clone(),
    };
    let mut cx = Subst {
        p,
        c,
        p_par: &p_par,
        remap: &remap,
        t_name,
        t_at_point: &t_at_point.coef,
        t_offset: t_at_point.offset,
        produced: &produced,
        bad: None,
    };
    let value = cx.expr(&c.value);
    let output = cx.access(&c.output);
    if let Some(why) = cx.bad {
        return no("not_at_point", why);
    }
    let mut fused = NestSpec {
        name: format!("{}_{}", p.name, c.name),
        loops: p.loops.clone(),
        buffers,
        output,
        value: p.value.clone(),
        epilogue: None,
    };
    if p_par.len() < p.loops.len() {
        fused.epilogue = Some(value);
    } else {
        fused.value = value;
    }
    let kind = |r: &Recognition| std::mem::discriminant(r);
    match (recognize(p), recognize(&fused)) {
        (Ok(a), Ok(b)) if kind(&a) == kind(&b) => {}
        (_, Err(e)) => return no("refused", format!("the fused nest is refused: {e}")),
        _ => {
            return no(
                "kind",
                "the fused nest is not recognised as the producer's kind".into(),
            )
        }
    }
    let mut why = format!(
        "{} reads {t_name} at its own point; {t_name} stays in registers",
        c.name
    );
    if let Some(r) = measured(&fused, options, &mut why) {
        return no(r.0, r.1);
    }
    (decision(p, c, true, "fused", why), Some(prune(fused)))
}

/// `spec` without the buffers nothing accesses any more (an elided
/// intermediate), accesses renumbered.
fn prune(spec: NestSpec) -> NestSpec {
    let mut used = vec![false; spec.buffers.len()];
    let mut all = loads(&spec.value);
    if let Some(e) = &spec.epilogue {
        all.extend(loads(e));
    }
    all.push(&spec.output);
    for a in all {
        used[a.buffer] = true;
    }
    let mut new_index = Vec::new();
    let mut next = 0;
    for &u in &used {
        new_index.push(next);
        next += usize::from(u);
    }
    let renumber = |a: &Access| Access {
        buffer: new_index[a.buffer],
        index: a.index.clone(),
    };
    fn walk(e: &Expr, f: &dyn Fn(&Access) -> Access) -> Expr {
        match e {
            Expr::Load(a) => Expr::Load(f(a)),
            Expr::Unary(op, a) => Expr::unary(*op, walk(a, f)),
            Expr::Binary(op, a, b) => Expr::binary(*op, walk(a, f), walk(b, f)),
            Expr::Const(_) | Expr::Reduced => e.clone(),
        }
    }
    NestSpec {
        name: spec.name.clone(),
        loops: spec.loops.clone(),
        buffers: spec
            .buffers
            .iter()
            .zip(&used)
            .filter(|(_, &u)| u)
            .map(|(b, _)| b.clone())
            .collect(),
        output: renumber(&spec.output),
        value: walk(&spec.value, &renumber),
        epilogue: spec.epilogue.as_ref().map(|e| walk(e, &renumber)),
    }
}

/// A map `p` whose output `T` a contraction `c` reads in a factor: `p`'s
/// value, with `p`'s loops replaced by the indices at which `c` reads `T`,
/// becomes that factor's prologue (applied to each loaded tile).
fn prologue(
    p: &NestSpec,
    c: &NestSpec,
    temporaries: &[&str],
    options: &FuseOptions<'_>,
) -> (Decision, Option<NestSpec>) {
    let no = |rule: &str, why: String| (decision(p, c, false, rule, why), None);
    let t_name = &p.buffers[p.output.buffer].name;
    if !temporaries.contains(&t_name.as_str()) {
        return no(
            "live_out",
            format!("{t_name} is read after the sequence and a nest stores one buffer"),
        );
    }
    if c.epilogue
        .as_ref()
        .is_some_and(|e| loads(e).iter().any(|a| c.buffers[a.buffer].name == *t_name))
    {
        return no(
            "prologue",
            format!(
                "{} reads {t_name} in its epilogue as well as in its sum",
                c.name
            ),
        );
    }
    // Which loop of `p` indexes each dim of T: p must write T[l0, l1, ...]
    // with one distinct loop per dim (then every element of T is one point).
    let mut dim_of_loop = vec![usize::MAX; p.loops.len()];
    for (d, ix) in p.output.index.iter().enumerate() {
        match ix {
            Index::Affine(a) if a.constant == 0 && a.terms.len() == 1 && a.terms[0].1 == 1 => {
                dim_of_loop[a.terms[0].0] = d;
            }
            _ => {
                return no(
                    "prologue",
                    format!("{} writes {t_name} other than one loop per dim", p.name),
                )
            }
        }
    }
    if dim_of_loop.contains(&usize::MAX) {
        return no(
            "prologue",
            format!("a loop of {} does not index {t_name}", p.name),
        );
    }
    let mut buffers = c.buffers.clone();
    let mut remap = Vec::new();
    for b in &p.buffers {
        match buffers.iter().position(|x| x.name == b.name) {
            Some(i) if buffers[i].shape != b.shape || buffers[i].elem != b.elem => {
                return no(
                    "buffers",
                    format!("{} is declared with two shapes or types", b.name),
                )
            }
            Some(i) => remap.push(i),
            None => {
                buffers.push(Buffer::clone(b));
                remap.push(buffers.len() - 1);
            }
        }
    }
    let mut failed = None;
    let value = substitute_reads(&c.value, &mut |a: &Access| {
        if c.buffers[a.buffer].name != *t_name {
            return None;
        }
        // p's value at T[a.index]: each p loop l becomes c's index of dim(l).
        let at: Vec<Option<super::Affine>> = dim_of_loop
            .iter()
            .map(|&d| match &a.index[d] {
                Index::Affine(af) => Some(af.clone()),
                Index::Opaque(_) => None,
            })
            .collect();
        match compose(&p.value, &at, &remap) {
            Some(e) => Some(e),
            None => {
                failed = Some(format!(
                    "{} reads {t_name} at an index that is not affine",
                    c.name
                ));
                None
            }
        }
    });
    if let Some(why) = failed {
        return no("prologue", why);
    }
    let fused = NestSpec {
        name: format!("{}_{}", p.name, c.name),
        loops: c.loops.clone(),
        buffers,
        output: c.output.clone(),
        value,
        epilogue: c.epilogue.clone(),
    };
    match recognize(&fused) {
        Ok(Recognition::Contraction(_)) => {}
        Ok(_) => return no("kind", "the fused nest is not a contraction".into()),
        Err(e) => return no("refused", format!("the fused nest is refused: {e}")),
    }
    let mut why = format!(
        "{}'s value is a prologue of {}'s factor; {t_name} is never stored",
        p.name, c.name
    );
    if let Some(r) = measured(&fused, options, &mut why) {
        return no(r.0, r.1);
    }
    (decision(p, c, true, "fused", why), Some(prune(fused)))
}

/// `e` with each load `f` answers `Some` for replaced.
fn substitute_reads(e: &Expr, f: &mut dyn FnMut(&Access) -> Option<Expr>) -> Expr {
    match e {
        Expr::Load(a) => f(a).unwrap_or_else(|| e.clone()),
        Expr::Unary(op, a) => Expr::unary(*op, substitute_reads(a, f)),
        Expr::Binary(op, a, b) => {
            let a = substitute_reads(a, f);
            Expr::binary(*op, a, substitute_reads(b, f))
        }
        Expr::Const(_) | Expr::Reduced => e.clone(),
    }
}

/// `e` (over `p`'s loops and buffers) with loop `l` replaced by `at[l]`
/// (affine in the consumer's loops) and buffers renumbered by `remap`.
fn compose(e: &Expr, at: &[Option<super::Affine>], remap: &[usize]) -> Option<Expr> {
    Some(match e {
        Expr::Load(a) => {
            let mut index = Vec::new();
            for ix in &a.index {
                let Index::Affine(af) = ix else {
                    index.push(ix.clone());
                    continue;
                };
                let mut out = super::Affine {
                    terms: Vec::new(),
                    constant: af.constant,
                };
                for &(l, k) in &af.terms {
                    let sub = at.get(l)?.as_ref()?;
                    out.constant += k * sub.constant;
                    for &(m, j) in &sub.terms {
                        match out.terms.iter_mut().find(|(x, _)| *x == m) {
                            Some(t) => t.1 += k * j,
                            None => out.terms.push((m, k * j)),
                        }
                    }
                }
                out.terms.retain(|&(_, c)| c != 0);
                index.push(Index::Affine(out));
            }
            Expr::Load(Access {
                buffer: remap[a.buffer],
                index,
            })
        }
        Expr::Unary(op, a) => Expr::unary(*op, compose(a, at, remap)?),
        Expr::Binary(op, a, b) => Expr::binary(*op, compose(a, at, remap)?, compose(b, at, remap)?),
        Expr::Const(_) | Expr::Reduced => e.clone(),
    })
}

/// The resource check of a fused nest: `Some((rule, why))` when it fails,
/// else the measurement appended to `why`.
fn measured(
    fused: &NestSpec,
    options: &FuseOptions<'_>,
    why: &mut String,
) -> Option<(&'static str, String)> {
    let measure = options.measure?;
    let lowered = match lower(fused, &options.lower) {
        Ok(k) => k,
        Err(e) => return Some(("lowering", format!("the fused nest does not lower: {e}"))),
    };
    match measure(&lowered) {
        Some(r) if r.registers > options.budget.registers => Some((
            "registers",
            format!(
                "the fused kernel needs {} registers per thread (ptxas), over {}",
                r.registers, options.budget.registers
            ),
        )),
        Some(r) if r.shared_bytes > options.budget.shared_bytes => Some((
            "shared_memory",
            format!(
                "the fused kernel needs {} bytes of shared memory (ptxas), over {}",
                r.shared_bytes, options.budget.shared_bytes
            ),
        )),
        Some(r) => {
            why.push_str(&format!(
                "; the fused kernel uses {} registers and {} bytes of shared memory (ptxas)",
                r.registers, r.shared_bytes
            ));
            None
        }
        None => {
            why.push_str("; the fused kernel's resources were not measured");
            None
        }
    }
}

/// Every load of `e`.
fn loads(e: &Expr) -> Vec<&Access> {
    match e {
        Expr::Load(a) => vec![a],
        Expr::Unary(_, a) => loads(a),
        Expr::Binary(_, a, b) => {
            let mut v = loads(a);
            v.extend(loads(b));
            v
        }
        Expr::Const(_) | Expr::Reduced => Vec::new(),
    }
}

/// Rewrites the consumer's expression over the producer's loops and
/// buffers, replacing its reads of the producer's output by the produced
/// value.
struct Subst<'a> {
    p: &'a NestSpec,
    c: &'a NestSpec,
    p_par: &'a [usize],
    remap: &'a [usize],
    t_name: &'a str,
    t_at_point: &'a [u64],
    t_offset: u64,
    produced: &'a Expr,
    bad: Option<String>,
}

impl Subst<'_> {
    fn access(&mut self, a: &Access) -> Access {
        let index = a
            .index
            .iter()
            .map(|ix| match ix {
                Index::Affine(af) => Index::Affine(super::Affine {
                    terms: af
                        .terms
                        .iter()
                        .map(|&(l, k)| (self.p_par.get(l).copied().unwrap_or(l), k))
                        .collect(),
                    constant: af.constant,
                }),
                Index::Opaque(t) => Index::Opaque(t.clone()),
            })
            .collect();
        Access {
            buffer: self.remap[a.buffer],
            index,
        }
    }

    fn expr(&mut self, e: &Expr) -> Expr {
        match e {
            Expr::Load(a) if self.c.buffers[a.buffer].name == self.t_name => {
                // At the point: the same flat element the producer writes there.
                let moved = self.access(a);
                let fused_like = NestSpec {
                    buffers: self.p.buffers.clone(),
                    output: Access {
                        buffer: self.p.output.buffer,
                        index: moved.index.clone(),
                    },
                    ..self.p.clone()
                };
                match flatten(&fused_like, &fused_like.output) {
                    Ok(f) if f.coef == self.t_at_point && f.offset == self.t_offset => {
                        self.produced.clone()
                    }
                    _ => {
                        self.bad = Some(format!(
                            "{} reads {} elsewhere than at its own point",
                            self.c.name, self.t_name
                        ));
                        e.clone()
                    }
                }
            }
            Expr::Load(a) => Expr::Load(self.access(a)),
            Expr::Unary(op, a) => Expr::unary(*op, self.expr(a)),
            Expr::Binary(op, a, b) => {
                let a = self.expr(a);
                Expr::binary(*op, a, self.expr(b))
            }
            Expr::Const(_) | Expr::Reduced => e.clone(),
        }
    }
}
