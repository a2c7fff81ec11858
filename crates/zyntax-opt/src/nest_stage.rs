//! Shared-memory staging of the reductions of a parallel loop nest: the
//! builder-level tiler (docs/tiling.md, "What the tiler does").
//!
//! A reduction `acc = combine(acc, x0, x1, ...)` for `k` in `0..K` inside a
//! nest of `workgroup`-shaped blocks names what it reads as operands
//! (`pointer[index]`). [`plan_reduction`] decides per operand whether it is
//! staged through a shared-memory tile (its index is an [`Affine`] form that
//! depends on `k` and misses some nest index along which the workgroup has
//! more than one thread, so those threads read the same elements), lays each
//! tile out (fastest coordinate, padding against bank conflicts, the staging
//! order), picks `tile_k` under the hardware limits and writes the report
//! lines, with the reason for every operand it does not stage.
//! [`TiledNest`] emits the nest and the staged reduction on a
//! [`FunctionBuilder`]: thread indices, the tiles, the k-loop over tiles with
//! its two barriers, and the inner loop whose last, ragged tile runs a
//! shorter loop, so every element folds its terms in `k` order exactly as the
//! plain loop does (bit-identical).
//!
//! A Rust front-end calls [`TiledNest::reduce`], which plans and emits in
//! one call; Python's `zyntax.tiling.TiledNest` (the builder's
//! `tiled_parallel_for` and the `lang.prange` translator) drives the same
//! emitter through `_native.tiling_begin`, its callbacks in Python.

use std::collections::HashMap;
use std::fmt;

use zyntax_hir::{BuildError, CmpOp, FunctionBuilder, Type, ValueId};

use crate::nest::{open, IndexType, NestError, Opened};

/// Static shared memory a block may declare on every target (sm_70 and
/// newer): all tiles of a nest must fit.
pub const MAX_SHARED_BYTES: u64 = 48 * 1024;
/// Elements of one operand's tile each thread copies per `tile_k` step. The
/// copy is unrolled, so this bounds its code size and registers.
pub const MAX_STAGED_PER_THREAD: u64 = 32;
/// The automatic `tile_k` (halved until the tiles fit).
pub const DEFAULT_TILE_K: u64 = 16;

// ====================================================================== affine forms

/// A symbol of an affine form: a nest index (outermost first) or the
/// reduction index `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sym {
    Index(usize),
    K,
}

/// One factor of a coefficient: an integer, a value defined before the nest,
/// or a product of two factors.
#[derive(Clone, Debug, PartialEq)]
pub enum Coef {
    Int(i64),
    Value(ValueId),
    Mul(Box<Coef>, Box<Coef>),
}

impl Coef {
    fn is_one(&self) -> bool {
        matches!(self, Coef::Int(1))
    }

    fn times(&self, other: &Coef) -> Coef {
        match (self, other) {
            (Coef::Int(a), Coef::Int(b)) => Coef::Int(a.wrapping_mul(*b)),
            (a, b) if a.is_one() => b.clone(),
            (a, b) if b.is_one() => a.clone(),
            (a, b) => Coef::Mul(Box::new(a.clone()), Box::new(b.clone())),
        }
    }

    fn leaves(&self, out: &mut Vec<ValueId>) {
        match self {
            Coef::Int(_) => {}
            Coef::Value(v) => out.push(*v),
            Coef::Mul(a, b) => {
                a.leaves(out);
                b.leaves(out);
            }
        }
    }
}

/// `Σ coef[s]·s + const` over [`Sym`]s. A coefficient (and the constant) is
/// kept as a list of factors summed (`[]` is 0), so a form built from
/// `i*K + k` prints as the user wrote it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Affine {
    pub terms: Vec<(Sym, Vec<Coef>)>,
    pub konst: Vec<Coef>,
}

/// An index the tiler cannot express as an affine form; the operand is
/// loaded directly and the report says why.
#[derive(Clone, Debug, PartialEq)]
pub enum NotAffine {
    /// A product of two loop-dependent terms (`i * j`).
    Product(Affine, Affine),
    /// Anything else, in the front-end's words (`text`: the index as written).
    Opaque { why: String, text: Option<String> },
}

impl Affine {
    /// The symbol itself (coefficient 1).
    pub fn sym(s: Sym) -> Affine {
        Affine {
            terms: vec![(s, vec![Coef::Int(1)])],
            konst: Vec::new(),
        }
    }
    pub fn int(i: i64) -> Affine {
        Affine {
            terms: Vec::new(),
            konst: vec![Coef::Int(i)],
        }
    }
    /// A loop-invariant value (a kernel parameter, a size).
    pub fn value(v: ValueId) -> Affine {
        Affine {
            terms: Vec::new(),
            konst: vec![Coef::Value(v)],
        }
    }

    /// The factors of `s`'s coefficient (empty: the form does not depend on it).
    pub fn coef(&self, s: Sym) -> &[Coef] {
        self.terms
            .iter()
            .find(|(t, _)| *t == s)
            .map_or(&[], |(_, c)| c.as_slice())
    }

    pub fn depends_on(&self, s: Sym) -> bool {
        !self.coef(s).is_empty()
    }

    pub fn add(&self, other: &Affine) -> Affine {
        let mut out = self.clone();
        for (s, c) in &other.terms {
            match out.terms.iter_mut().find(|(t, _)| t == s) {
                Some((_, cs)) => cs.extend(c.iter().cloned()),
                None => out.terms.push((*s, c.clone())),
            }
        }
        out.konst.extend(other.konst.iter().cloned());
        out
    }

    /// The product, affine when at most one side depends on a symbol.
    pub fn mul(&self, other: &Affine) -> Result<Affine, NotAffine> {
        if !self.terms.is_empty() && !other.terms.is_empty() {
            return Err(NotAffine::Product(self.clone(), other.clone()));
        }
        let (var, inv) = if self.terms.is_empty() {
            (other, self)
        } else {
            (self, other)
        };
        if inv.konst.len() != 1 {
            // (a + b) * i: distribute over the summands.
            let mut out = Affine::default();
            for f in &inv.konst {
                out = out.add(&var.scaled(f));
            }
            return Ok(out);
        }
        Ok(var.scaled(&inv.konst[0]))
    }

    fn scaled(&self, f: &Coef) -> Affine {
        Affine {
            terms: self
                .terms
                .iter()
                .map(|(s, cs)| (*s, cs.iter().map(|c| c.times(f)).collect()))
                .collect(),
            konst: self.konst.iter().map(|c| c.times(f)).collect(),
        }
    }

    /// The form as the report prints it (`v3*i0 + 1*k`), with `names`.
    pub fn display<'a>(&'a self, names: &'a Names) -> impl fmt::Display + 'a {
        Shown(self, names)
    }
}

struct Shown<'a>(&'a Affine, &'a Names);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, names) = (self.0, self.1);
        let mut parts: Vec<String> = a
            .terms
            .iter()
            .filter(|(_, c)| !c.is_empty())
            .map(|(s, c)| format!("{}*{}", names.coefs(c), names.sym(*s)))
            .collect();
        parts.extend(a.konst.iter().map(|c| names.coefs(std::slice::from_ref(c))));
        if parts.is_empty() {
            write!(f, "0")
        } else {
            write!(f, "{}", parts.join(" + "))
        }
    }
}

impl NotAffine {
    /// Why the index is not affine (the report's wording).
    pub fn why(&self, names: &Names) -> String {
        match self {
            NotAffine::Product(a, b) => format!(
                "product of two loop-dependent terms ({} * {})",
                a.display(names),
                b.display(names)
            ),
            NotAffine::Opaque { why, .. } => why.clone(),
        }
    }
}

/// How the report names things: nest indices (`i0`, `i1`, ... by default),
/// values (`v3` by default: a front-end may say `a.strides[0]`).
#[derive(Clone, Debug, Default)]
pub struct Names {
    pub indices: Vec<String>,
    pub values: HashMap<ValueId, String>,
}

impl Names {
    pub fn sym(&self, s: Sym) -> String {
        match s {
            Sym::K => "k".into(),
            Sym::Index(d) => self.indices.get(d).cloned().unwrap_or(format!("i{d}")),
        }
    }
    pub fn value(&self, v: ValueId) -> String {
        self.values
            .get(&v)
            .cloned()
            .unwrap_or_else(|| v.to_string())
    }
    fn coef(&self, c: &Coef) -> String {
        match c {
            Coef::Int(i) => i.to_string(),
            Coef::Value(v) => self.value(*v),
            Coef::Mul(a, b) => format!("{}*{}", self.coef(a), self.coef(b)),
        }
    }
    fn coefs(&self, cs: &[Coef]) -> String {
        cs.iter()
            .map(|c| self.coef(c))
            .collect::<Vec<_>>()
            .join("+")
    }
}

// ====================================================================== the plan

/// A reduction's bound: a constant (which shortens a longer `tile_k`) or a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extent {
    Const(u64),
    Value(ValueId),
}

/// An operand as the planner sees it.
#[derive(Clone, Debug)]
pub struct StageOperand {
    pub ptr: ValueId,
    /// Bytes of one element; `None` when `ptr` is not a pointer value.
    pub elem_bytes: Option<u64>,
    pub index: Result<Affine, NotAffine>,
}

/// The nest around the reductions: what the planner needs to know of it.
#[derive(Clone, Debug)]
pub struct StageNest {
    /// Threads per block along each nest index, outermost first (the last runs along `x`).
    pub workgroup: Vec<u32>,
    /// Values numbered below this one are defined before the nest (loop-invariant).
    pub first_id: ValueId,
    /// Buffers the nest stores to: never staged (aliasing).
    pub writes: Vec<ValueId>,
    /// Shared memory the tiles of earlier reductions of the nest claimed.
    pub shared_bytes: u64,
    pub names: Names,
}

/// What the planner decided for one operand.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperandPlan {
    /// Why it is loaded directly; `None`: staged through shared memory.
    pub why: Option<String>,
    /// The nest indices its index depends on (ascending).
    pub dims: Vec<usize>,
    /// The tile's coordinates, fastest first, with their extents and strides.
    pub layout: Vec<Sym>,
    pub extents: Vec<u64>,
    pub strides: Vec<u64>,
    /// The order threads walk the tile when staging (fastest first): the
    /// coordinate with unit stride in global memory leads (coalesced).
    pub stage_order: Vec<Sym>,
    /// Elements of padding after each row of the fastest coordinate.
    pub pad: u64,
    /// Elements of the tile, padding included.
    pub size: u64,
}

impl OperandPlan {
    pub fn staged(&self) -> bool {
        self.why.is_none()
    }
    fn at(&self, of: &[u64], s: Sym) -> u64 {
        self.layout
            .iter()
            .position(|t| *t == s)
            .map_or(0, |n| of[n])
    }
    /// The tile's extent along `s` (0 when `s` is not a coordinate).
    pub fn extent(&self, s: Sym) -> u64 {
        self.at(&self.extents, s)
    }
    pub fn stride(&self, s: Sym) -> u64 {
        self.at(&self.strides, s)
    }
    /// Elements of the tile without padding (what staging copies).
    pub fn elements(&self) -> u64 {
        self.extents.iter().product()
    }
}

/// The plan of one reduction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagePlan {
    pub tile_k: u64,
    pub operands: Vec<OperandPlan>,
    /// `reduction over k < K`, then one line per operand.
    pub report: Vec<String>,
}

impl StagePlan {
    pub fn any_staged(&self) -> bool {
        self.operands.iter().any(OperandPlan::staged)
    }
}

/// An explicit `tile_k` the hardware cannot hold, or one below 1.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StageError(pub String);

impl StageNest {
    fn threads(&self) -> u64 {
        self.workgroup.iter().map(|&w| u64::from(w)).product()
    }

    fn invariant(&self, v: ValueId) -> bool {
        v.index() < self.first_id.index()
    }

    /// Why `op` cannot be staged (None: it can; `plan.dims` is set).
    fn why_not(&self, op: &StageOperand, bound_ok: bool, plan: &mut OperandPlan) -> Option<String> {
        if !bound_ok {
            return Some(
                "the reduction bound is not loop-invariant (defined inside the nest)".into(),
            );
        }
        let idx = match &op.index {
            Ok(a) => a,
            Err(na) => {
                return Some(format!(
                    "index is not affine in the loop indices: {}",
                    na.why(&self.names)
                ))
            }
        };
        if op.elem_bytes.is_none() {
            return Some("not a pointer value".into());
        }
        if self.writes.contains(&op.ptr) {
            return Some("the nest writes this buffer (aliasing)".into());
        }
        if !self.invariant(op.ptr) {
            return Some(
                "the pointer is computed inside the nest (aliasing cannot be ruled out)".into(),
            );
        }
        for (s, cs) in &idx.terms {
            let mut leaves = Vec::new();
            cs.iter().for_each(|c| c.leaves(&mut leaves));
            if leaves.iter().any(|v| !self.invariant(*v)) {
                let s = match s {
                    Sym::K => "k".to_string(),
                    Sym::Index(d) => d.to_string(),
                };
                return Some(format!("coefficient of {s} is not loop-invariant"));
            }
        }
        let mut leaves = Vec::new();
        idx.konst.iter().for_each(|c| c.leaves(&mut leaves));
        if leaves.iter().any(|v| !self.invariant(*v)) {
            return Some("index offset depends on values computed inside the nest".into());
        }
        if !idx.depends_on(Sym::K) {
            return Some("does not depend on the reduction index (nothing to stage)".into());
        }
        plan.dims = (0..self.workgroup.len())
            .filter(|&d| idx.depends_on(Sym::Index(d)))
            .collect();
        let reused =
            (0..self.workgroup.len()).any(|d| !plan.dims.contains(&d) && self.workgroup[d] > 1);
        if !reused {
            return Some("depends on every nest index (no reuse across the workgroup)".into());
        }
        None
    }

    /// Lays out a staged operand's tile for `tile_k`. The inner loop reads an
    /// operand that depends on the nest's `x` index (consecutive threads)
    /// along that index, so it is fastest (a warp reads consecutive words);
    /// one that does not is read by broadcast and keeps `k` fastest
    /// (contiguous per thread). Staging walks the unit-stride coordinate of
    /// global memory first (coalesced); when that is not the fastest one (a
    /// transposed operand) the staging writes would fall in one bank, so the
    /// rows get one element of padding.
    fn layout(&self, idx: &Affine, plan: &mut OperandPlan, tile_k: u64) {
        let x = self.workgroup.len() - 1;
        let rest = plan
            .dims
            .iter()
            .rev()
            .filter(|&&d| d != x)
            .map(|&d| Sym::Index(d));
        plan.layout = if plan.dims.contains(&x) {
            vec![Sym::Index(x), Sym::K]
        } else {
            vec![Sym::K]
        };
        plan.layout.extend(rest);
        plan.extents = plan
            .layout
            .iter()
            .map(|s| match s {
                Sym::K => tile_k,
                Sym::Index(d) => u64::from(self.workgroup[*d]),
            })
            .collect();
        plan.stage_order = plan.layout.clone();
        let unit = plan.layout.iter().position(|s| {
            let c = idx.coef(*s);
            c.len() == 1 && c[0].is_one()
        });
        if let Some(n) = unit {
            let s = plan.stage_order.remove(n);
            plan.stage_order.insert(0, s);
        }
        plan.pad = u64::from(plan.stage_order[0] != plan.layout[0]);
        let mut stride = 1u64;
        plan.strides.clear();
        for (n, e) in plan.extents.iter().enumerate() {
            plan.strides.push(stride);
            stride = stride.saturating_mul(e + if n == 0 { plan.pad } else { 0 });
        }
        plan.size = stride;
    }

    /// Lays out the staged operands for `tile_k`; why the hardware cannot
    /// hold those tiles (None: it can, and their shared memory is claimed).
    fn over_budget(
        &mut self,
        ops: &[StageOperand],
        plans: &mut [OperandPlan],
        tile_k: u64,
    ) -> Option<String> {
        let threads = self.threads();
        let mut need = 0u64;
        for (pos, (op, plan)) in ops.iter().zip(plans.iter_mut()).enumerate() {
            if !plan.staged() {
                continue;
            }
            let (Ok(idx), Some(elem)) = (&op.index, op.elem_bytes) else {
                continue;
            };
            self.layout(idx, plan, tile_k);
            let copies = plan
                .extents
                .iter()
                .fold(1u64, |a, e| a.saturating_mul(*e))
                .div_ceil(threads);
            if copies > MAX_STAGED_PER_THREAD {
                return Some(format!(
                    "each of the {threads} threads would copy {copies} elements of operand \
                     {pos}'s tile per step (at most {MAX_STAGED_PER_THREAD})"
                ));
            }
            need = need.saturating_add(plan.size.saturating_mul(elem));
        }
        if self.shared_bytes.saturating_add(need) > MAX_SHARED_BYTES {
            let earlier = if self.shared_bytes > 0 {
                format!(" besides {} for earlier reductions", self.shared_bytes)
            } else {
                String::new()
            };
            return Some(format!(
                "the tiles need {need} bytes of shared memory{earlier}; a block has at most \
                 {MAX_SHARED_BYTES}"
            ));
        }
        self.shared_bytes += need;
        None
    }

    fn tile_desc(&self, plan: &OperandPlan, tile_k: u64) -> String {
        let n = self.workgroup.len();
        let reused: Vec<String> = (0..n)
            .filter(|d| !plan.dims.contains(d))
            .map(|d| self.names.sym(Sym::Index(d)))
            .collect();
        let mut shape: Vec<String> = plan
            .dims
            .iter()
            .map(|&d| self.workgroup[d].to_string())
            .collect();
        if shape.is_empty() {
            shape.push("1".into());
        }
        let pad = if plan.pad > 0 {
            ", rows padded by 1 against bank conflicts"
        } else {
            ""
        };
        format!(
            "{}x{tile_k}{pad}, reused across {}",
            shape.join("x"),
            reused.join(", ")
        )
    }
}

/// `tile_k` checked (at least 1) and shortened to a constant bound below it.
fn checked_tile_k(tile_k: u64, extent: Extent) -> Result<u64, StageError> {
    if tile_k < 1 {
        return Err(StageError(format!(
            "tile_k must be at least 1, not {tile_k}"
        )));
    }
    Ok(match extent {
        Extent::Const(e) if 0 < e && e < tile_k => e,
        _ => tile_k,
    })
}

/// Decides how the reduction over `extent` with `operands` is staged in
/// `nest` (see the module docs), claiming the shared memory of its tiles in
/// `nest.shared_bytes`. `tile_k`: `None` takes [`DEFAULT_TILE_K`], halved
/// until the tiles fit (when not even 1 fits, the operands are loaded
/// directly and the report says so); an explicit one the hardware cannot
/// hold is an error.
pub fn plan_reduction(
    nest: &mut StageNest,
    extent: Extent,
    operands: &[StageOperand],
    tile_k: Option<u64>,
) -> Result<StagePlan, StageError> {
    let bound_ok = match extent {
        Extent::Const(_) => true,
        Extent::Value(v) => nest.invariant(v),
    };
    let mut plans: Vec<OperandPlan> = operands
        .iter()
        .map(|op| {
            let mut p = OperandPlan::default();
            p.why = nest.why_not(op, bound_ok, &mut p);
            p
        })
        .collect();
    let tile_k = match tile_k {
        Some(tk) => {
            let tk = checked_tile_k(tk, extent)?;
            if let Some(why) = nest.over_budget(operands, &mut plans, tk) {
                return Err(StageError(format!(
                    "tile_k={tk}: {why}; use a smaller tile_k or workgroup"
                )));
            }
            tk
        }
        None => {
            let mut tk = checked_tile_k(DEFAULT_TILE_K, extent)?;
            let mut why = nest.over_budget(operands, &mut plans, tk);
            while why.is_some() && tk > 1 {
                tk /= 2;
                why = nest.over_budget(operands, &mut plans, tk);
            }
            if let Some(why) = why {
                for p in plans.iter_mut().filter(|p| p.staged()) {
                    p.why = Some(format!("its tile does not fit: {why}"));
                }
            }
            tk
        }
    };
    let names = &nest.names;
    let mut report = vec![format!(
        "reduction over k < {}",
        match extent {
            Extent::Const(e) => e.to_string(),
            Extent::Value(v) => names.value(v),
        }
    )];
    for (pos, (op, plan)) in operands.iter().zip(&plans).enumerate() {
        let index = match &op.index {
            Ok(a) => a.display(names).to_string(),
            Err(NotAffine::Opaque {
                text: Some(text), ..
            }) => text.clone(),
            Err(na) => format!("NotAffine({})", na.why(names)),
        };
        let what = format!("operand {pos} ({}[{index}])", names.value(op.ptr));
        report.push(match &plan.why {
            None => format!(
                "  {what}: tiled through shared memory, {}",
                nest.tile_desc(plan, tile_k)
            ),
            Some(why) => format!("  {what}: not tiled: {why}"),
        });
    }
    Ok(StagePlan {
        tile_k,
        operands: plans,
        report,
    })
}

// ====================================================================== emission

/// Why a tiled nest could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TileError {
    #[error(transparent)]
    Nest(#[from] NestError),
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// An operand of [`TiledNest::reduce`]: `ptr[index]`.
#[derive(Clone, Debug)]
pub struct Operand {
    pub ptr: ValueId,
    pub index: Result<Affine, NotAffine>,
}

/// Computes an index the tiler cannot analyse: `(builder, operand position,
/// the nest's index values, k)` to the element offset (an integer value).
pub type OpaqueIndex<'a> =
    dyn FnMut(&mut FunctionBuilder, usize, &[ValueId], ValueId) -> Result<ValueId, BuildError> + 'a;

/// Folds one step: `(builder, acc, loaded elements)` to the new `acc`.
pub type Combine<'a> =
    dyn FnMut(&mut FunctionBuilder, ValueId, &[ValueId]) -> Result<ValueId, BuildError> + 'a;

/// An open tiled nest (Rust's `tiled_parallel_for`). The body is not
/// guarded (every thread of a block must reach the barriers): stores go
/// between [`TiledNest::begin_inside`] and [`TiledNest::end_inside`]. Launch
/// with exactly the workgroup's block shape ([`crate::nest::launch_grid`]).
#[derive(Clone, Debug)]
pub struct TiledNest {
    /// The nest indices (`u32`, outermost first), meaningful where `in_range`.
    pub values: Vec<ValueId>,
    /// Every index below its size.
    pub in_range: ValueId,
    /// What the planner knows of the nest (names for the report included).
    pub stage: StageNest,
    /// The report lines of every reduction so far.
    pub report: Vec<String>,
    sizes: Vec<ValueId>,
    tid: Vec<ValueId>,
    base: Vec<ValueId>,
    flat_tid: ValueId,
}

impl TiledNest {
    /// Opens a nest over `sizes` (`u32` values, outermost first) with
    /// `workgroup` threads per block, whose reductions may stage operands
    /// (never those in `writes`); sets the kernel's `max_threads`. The index
    /// type comes from the inputs: thread indices and literals are `u32`,
    /// sizes, bounds and value coefficients keep their integer types, and two
    /// integer types that differ meet at `i64` (`u32` sizes keep every index
    /// `u32`; `i64` shapes, as the `lang.prange` translator passes, give
    /// `i64` indices where they are used).
    pub fn begin(
        b: &mut FunctionBuilder,
        sizes: &[ValueId],
        workgroup: &[u32],
        writes: &[ValueId],
    ) -> Result<TiledNest, TileError> {
        let mut lt = |b: &mut FunctionBuilder, i: ValueId, size: ValueId| {
            ix(b, IxOp::Lt, Ix::V(i), Ix::V(size))
        };
        let Opened {
            tid,
            base,
            indices: values,
            inside,
            first,
        } = open(b, sizes, workgroup, IndexType::Typed(&mut lt))?;
        let n = sizes.len();
        let mut flat_tid = tid[0];
        for d in 1..n {
            let w = b.iconst(Type::U32, i64::from(workgroup[d]))?;
            let m = b.mul(flat_tid, w)?;
            flat_tid = b.add(m, tid[d])?;
        }
        Ok(TiledNest {
            values,
            in_range: inside,
            stage: StageNest {
                workgroup: workgroup.to_vec(),
                first_id: first,
                writes: writes.to_vec(),
                shared_bytes: 0,
                names: Names::default(),
            },
            report: Vec::new(),
            sizes: sizes.to_vec(),
            tid,
            base,
            flat_tid,
        })
    }

    /// The nest index `d` as an affine symbol.
    pub fn index(&self, d: usize) -> Affine {
        Affine::sym(Sym::Index(d))
    }

    /// Opens the in-range region (stores and other side effects go there).
    pub fn begin_inside(&self, b: &mut FunctionBuilder) -> Result<zyntax_hir::IfFrame, BuildError> {
        b.begin_if(self.in_range, &[])
    }

    pub fn end_inside(
        &self,
        b: &mut FunctionBuilder,
        frame: zyntax_hir::IfFrame,
    ) -> Result<(), BuildError> {
        b.end_if(frame, &[]).map(|_| ())
    }

    /// `acc = init; for k in 0..extent: acc = combine(acc, *loaded)`, the
    /// operands staged through shared memory where [`plan_reduction`] allows;
    /// returns `acc` (meaningful for in-range points) and the plan. `opaque`
    /// computes the indices that are [`NotAffine::Opaque`].
    #[allow(clippy::too_many_arguments)]
    pub fn reduce(
        &mut self,
        b: &mut FunctionBuilder,
        extent: Extent,
        init: ValueId,
        operands: &[Operand],
        tile_k: Option<u64>,
        combine: &mut Combine<'_>,
        opaque: &mut OpaqueIndex<'_>,
    ) -> Result<(ValueId, StagePlan), TileError> {
        let elems: Vec<Option<Type>> = operands
            .iter()
            .map(|op| b.value_type(op.ptr).ok().and_then(pointee))
            .collect();
        let ops: Vec<StageOperand> = operands
            .iter()
            .zip(&elems)
            .map(|(op, elem)| StageOperand {
                ptr: op.ptr,
                elem_bytes: elem.as_ref().map(|t| t.size_bytes().unwrap_or(8)),
                index: op.index.clone(),
            })
            .collect();
        let plan = plan_reduction(&mut self.stage, extent, &ops, tile_k)?;
        self.report.extend(plan.report.iter().cloned());
        let kv = match extent {
            Extent::Const(e) => b.iconst(Type::U32, e as i64)?,
            Extent::Value(v) => v,
        };
        let acc_ty = b.value_type(init)?.clone();
        let acc = b.declare_named_var("acc", acc_ty);
        b.def_var(acc, init)?;
        let mut em = Emit {
            nest: self,
            ops: &ops,
            elems: &elems,
            plan: &plan,
            combine,
            opaque,
            tiles: vec![None; ops.len()],
            row_base: vec![None; ops.len()],
        };
        if plan.any_staged() {
            em.tiled(b, kv, acc)?;
        } else {
            em.untiled(b, kv, acc)?;
        }
        Ok((b.use_var(acc)?, plan))
    }
}

fn pointee(t: &Type) -> Option<Type> {
    match t {
        Type::Ptr(_, elem) => Some((**elem).clone()),
        _ => None,
    }
}

fn zero_of(b: &mut FunctionBuilder, ty: &Type) -> Result<ValueId, BuildError> {
    if ty.as_scalar().is_some_and(|s| s.is_float()) {
        b.fconst(ty.clone(), 0.0)
    } else {
        b.iconst(ty.clone(), 0)
    }
}

fn u32c(b: &mut FunctionBuilder, v: u64) -> Result<ValueId, BuildError> {
    b.iconst(Type::U32, v as i64)
}

// ---------------------------------------------------------------- index arithmetic

/// An index operand: a value, or an integer that becomes a constant of the
/// type of the value it meets.
#[derive(Clone, Copy, Debug)]
enum Ix {
    Lit(i64),
    V(ValueId),
}

#[derive(Clone, Copy, Debug)]
enum IxOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Lt,
    Ge,
}

/// Two index values at one type: equal types stay, differing ones meet at
/// `i64` (indices are never negative). The index type thus comes from the
/// inputs: thread indices are `u32`, a nest whose sizes, bound or
/// coefficients are `i64` (the `lang.prange` translator's shapes) computes in
/// `i64` where they meet, exactly as the translator's own arithmetic does.
fn meet(b: &mut FunctionBuilder, x: ValueId, y: ValueId) -> Result<(ValueId, ValueId), BuildError> {
    let (tx, ty) = (b.value_type(x)?.clone(), b.value_type(y)?.clone());
    if tx == ty {
        return Ok((x, y));
    }
    let x = if tx == Type::I64 {
        x
    } else {
        b.cast(x, Type::I64)?
    };
    let y = if ty == Type::I64 {
        y
    } else {
        b.cast(y, Type::I64)?
    };
    Ok((x, y))
}

/// The value of `x`, a literal at the type of `like` (`u32` without one).
fn ix_value(b: &mut FunctionBuilder, x: Ix, like: Option<ValueId>) -> Result<ValueId, BuildError> {
    match x {
        Ix::V(v) => Ok(v),
        Ix::Lit(i) => {
            let t = match like {
                Some(l) => b.value_type(l)?.clone(),
                None => Type::U32,
            };
            b.iconst(t, i)
        }
    }
}

/// `x op y` for index operands (see [`meet`]; a literal takes the other
/// operand's type, the left one's when both are literals).
fn ix(b: &mut FunctionBuilder, op: IxOp, x: Ix, y: Ix) -> Result<ValueId, BuildError> {
    let (x, y) = match (x, y) {
        (Ix::V(xv), y) => (xv, ix_value(b, y, Some(xv))?),
        (x, Ix::V(yv)) => (ix_value(b, x, Some(yv))?, yv),
        (x, y) => {
            let xv = ix_value(b, x, None)?;
            (xv, ix_value(b, y, Some(xv))?)
        }
    };
    let (x, y) = meet(b, x, y)?;
    match op {
        IxOp::Add => b.add(x, y),
        IxOp::Sub => b.sub(x, y),
        IxOp::Mul => b.mul(x, y),
        IxOp::Div => b.div(x, y),
        IxOp::Rem => b.rem(x, y),
        IxOp::Lt => b.cmp(CmpOp::Lt, x, y),
        IxOp::Ge => b.cmp(CmpOp::Ge, x, y),
    }
}

/// `v * stride`, without the multiply when the stride is 1.
fn scaled(b: &mut FunctionBuilder, v: ValueId, stride: u64) -> Result<ValueId, BuildError> {
    if stride == 1 {
        return Ok(v);
    }
    ix(b, IxOp::Mul, Ix::V(v), Ix::Lit(stride as i64))
}

/// `Σ parts`, skipping literal zeros (`0u32` when nothing is left).
fn ix_sum(b: &mut FunctionBuilder, parts: &[Ix]) -> Result<ValueId, BuildError> {
    let mut out: Option<Ix> = None;
    for &p in parts {
        if matches!(p, Ix::Lit(0)) {
            continue;
        }
        out = Some(match out {
            None => p,
            Some(o) => Ix::V(ix(b, IxOp::Add, o, p)?),
        });
    }
    ix_value(b, out.unwrap_or(Ix::Lit(0)), None)
}

/// `for iv in lo..hi` (step 1) with `lo` and `hi` at one type (see [`meet`]).
fn for_range(
    b: &mut FunctionBuilder,
    lo: ValueId,
    hi: ValueId,
) -> Result<zyntax_hir::ForFrame, BuildError> {
    let (lo, hi) = meet(b, lo, hi)?;
    let one = ix_value(b, Ix::Lit(1), Some(lo))?;
    b.begin_for(lo, hi, one, &[])
}

/// The emission of one reduction (the plan decided, this writes it).
struct Emit<'n, 'c, 'o, 'x> {
    nest: &'n TiledNest,
    ops: &'n [StageOperand],
    elems: &'n [Option<Type>],
    plan: &'n StagePlan,
    combine: &'c mut Combine<'x>,
    opaque: &'o mut OpaqueIndex<'x>,
    tiles: Vec<Option<ValueId>>,
    row_base: Vec<Option<ValueId>>,
}

impl Emit<'_, '_, '_, '_> {
    /// A coefficient: an integer stays a literal (typed by what it meets).
    fn coef(b: &mut FunctionBuilder, c: &Coef) -> Result<Ix, BuildError> {
        match c {
            Coef::Int(i) => Ok(Ix::Lit(*i)),
            Coef::Value(v) => Ok(Ix::V(*v)),
            Coef::Mul(x, y) => {
                let (x, y) = (Self::coef(b, x)?, Self::coef(b, y)?);
                Ok(Ix::V(ix(b, IxOp::Mul, x, y)?))
            }
        }
    }

    /// The value of `a` with each symbol replaced by `at(symbol)`.
    fn eval(
        &self,
        b: &mut FunctionBuilder,
        a: &Affine,
        at: &dyn Fn(Sym) -> ValueId,
    ) -> Result<ValueId, BuildError> {
        let mut parts = Vec::new();
        for (s, cs) in &a.terms {
            for c in cs {
                let x = at(*s);
                parts.push(match c {
                    Coef::Int(1) => Ix::V(x),
                    Coef::Int(0) => continue,
                    c => {
                        let cv = Self::coef(b, c)?;
                        Ix::V(ix(b, IxOp::Mul, Ix::V(x), cv)?)
                    }
                });
            }
        }
        for c in &a.konst {
            parts.push(Self::coef(b, c)?);
        }
        ix_sum(b, &parts)
    }

    /// The element offset of operand `pos` at `k`, as the untiled loop computes it.
    fn direct_index(
        &mut self,
        b: &mut FunctionBuilder,
        pos: usize,
        k: ValueId,
    ) -> Result<ValueId, BuildError> {
        let values = self.nest.values.clone();
        match &self.ops[pos].index {
            Ok(a) => self.eval(b, a, &|s| match s {
                Sym::K => k,
                Sym::Index(d) => values[d],
            }),
            Err(NotAffine::Product(x, y)) => {
                let at = |s| match s {
                    Sym::K => k,
                    Sym::Index(d) => values[d],
                };
                let (x, y) = (self.eval(b, x, &at)?, self.eval(b, y, &at)?);
                ix(b, IxOp::Mul, Ix::V(x), Ix::V(y))
            }
            Err(NotAffine::Opaque { .. }) => (self.opaque)(b, pos, &values, k),
        }
    }

    fn direct_load(
        &mut self,
        b: &mut FunctionBuilder,
        pos: usize,
        k: ValueId,
    ) -> Result<ValueId, BuildError> {
        let ix = self.direct_index(b, pos, k)?;
        let p = b.ptr_add(self.ops[pos].ptr, ix)?;
        b.load(p)
    }

    fn fold(
        &mut self,
        b: &mut FunctionBuilder,
        acc: zyntax_hir::Var,
        xs: &[ValueId],
    ) -> Result<(), BuildError> {
        let cur = b.use_var(acc)?;
        let next = (self.combine)(b, cur, xs)?;
        b.def_var(acc, next)
    }

    /// The plain loop, for in-range threads only (no shared memory, no barrier).
    fn untiled(
        &mut self,
        b: &mut FunctionBuilder,
        kv: ValueId,
        acc: zyntax_hir::Var,
    ) -> Result<(), BuildError> {
        let guard = b.begin_if(self.nest.in_range, &[])?;
        let zero = u32c(b, 0)?;
        let lp = for_range(b, zero, kv)?;
        let xs = (0..self.ops.len())
            .map(|pos| self.direct_load(b, pos, lp.iv))
            .collect::<Result<Vec<_>, _>>()?;
        self.fold(b, acc, &xs)?;
        b.end_for(lp, &[])?;
        b.end_if(guard, &[])?;
        Ok(())
    }

    fn tiled(
        &mut self,
        b: &mut FunctionBuilder,
        kv: ValueId,
        acc: zyntax_hir::Var,
    ) -> Result<(), BuildError> {
        let tile_k = self.plan.tile_k;
        let tk = tile_k as i64;
        for (pos, p) in self.plan.operands.iter().enumerate() {
            let Some(elem) = self.elems[pos].clone().filter(|_| p.staged()) else {
                continue;
            };
            self.tiles[pos] = Some(b.shared_alloc(elem, p.size)?);
            let mut parts = Vec::new();
            for &d in &p.dims {
                parts.push(Ix::V(scaled(b, self.nest.tid[d], p.stride(Sym::Index(d)))?));
            }
            self.row_base[pos] = Some(ix_sum(b, &parts)?);
        }
        let up = ix(b, IxOp::Add, Ix::V(kv), Ix::Lit(tk - 1))?;
        let steps = ix(b, IxOp::Div, Ix::V(up), Ix::Lit(tk))?;
        let zero = u32c(b, 0)?;
        let outer = for_range(b, zero, steps)?;
        let k0 = ix(b, IxOp::Mul, Ix::V(outer.iv), Ix::Lit(tk))?;
        for pos in 0..self.ops.len() {
            if self.plan.operands[pos].staged() {
                self.stage(b, pos, k0, kv)?;
            }
        }
        b.barrier()?;
        // A full tile runs tile_k steps, the last, ragged one K mod tile_k:
        // every term in k order, no padding summed.
        let left = ix(b, IxOp::Sub, Ix::V(kv), Ix::V(k0))?;
        let full = ix(b, IxOp::Ge, Ix::V(left), Ix::Lit(tk))?;
        let mut pick = b.begin_if(full, &[])?;
        let count = u32c(b, tile_k)?;
        self.inner(b, k0, count, acc)?;
        b.begin_else(&mut pick, &[])?;
        self.inner(b, k0, left, acc)?;
        b.end_if(pick, &[])?;
        b.barrier()?;
        b.end_for(outer, &[])?;
        Ok(())
    }

    /// Folds `count` staged steps from `k0` into `acc`.
    fn inner(
        &mut self,
        b: &mut FunctionBuilder,
        k0: ValueId,
        count: ValueId,
        acc: zyntax_hir::Var,
    ) -> Result<(), BuildError> {
        let zero = u32c(b, 0)?;
        let lp = for_range(b, zero, count)?;
        let mut xs = Vec::with_capacity(self.ops.len());
        for pos in 0..self.ops.len() {
            let p = &self.plan.operands[pos];
            if let (Some(tile), Some(row)) = (self.tiles[pos], self.row_base[pos]) {
                let kk = scaled(b, lp.iv, p.stride(Sym::K))?;
                let slot = ix(b, IxOp::Add, Ix::V(row), Ix::V(kk))?;
                let ptr = b.ptr_add(tile, slot)?;
                xs.push(b.load(ptr)?);
            } else {
                // Loaded from global memory; out-of-range threads read nothing.
                let ty = self.elems[pos].clone().ok_or_else(|| BuildError {
                    function: b.name().into(),
                    message: format!("operand {pos} is not a pointer"),
                })?;
                let k = ix(b, IxOp::Add, Ix::V(k0), Ix::V(lp.iv))?;
                let mut f = b.begin_if(self.nest.in_range, std::slice::from_ref(&ty))?;
                let x = self.direct_load(b, pos, k)?;
                b.begin_else(&mut f, &[x])?;
                let z = zero_of(b, &ty)?;
                xs.push(b.end_if(f, &[z])?[0]);
            }
        }
        self.fold(b, acc, &xs)?;
        b.end_for(lp, &[])?;
        Ok(())
    }

    /// Every thread copies its share of operand `pos`'s tile for the step at
    /// `k0`: consecutive threads take consecutive coordinates in the staging
    /// order; out-of-range elements are 0 (never summed).
    fn stage(
        &mut self,
        b: &mut FunctionBuilder,
        pos: usize,
        k0: ValueId,
        kv: ValueId,
    ) -> Result<(), BuildError> {
        let p = &self.plan.operands[pos];
        let (Ok(idx), Some(ty), Some(tile)) = (
            &self.ops[pos].index,
            self.elems[pos].clone(),
            self.tiles[pos],
        ) else {
            return Ok(());
        };
        let threads = self.nest.stage.threads();
        let elements = p.elements();
        let ragged = !elements.is_multiple_of(threads);
        for r in 0..elements.div_ceil(threads) {
            let e = if r == 0 {
                self.nest.flat_tid
            } else {
                let off = Ix::Lit((r * threads) as i64);
                ix(b, IxOp::Add, Ix::V(self.nest.flat_tid), off)?
            };
            let mut local: HashMap<Sym, ValueId> = HashMap::new();
            let mut rest = e;
            for (n, s) in p.stage_order.iter().enumerate() {
                if n + 1 == p.stage_order.len() {
                    local.insert(*s, rest);
                } else {
                    let ext = Ix::Lit(p.extent(*s) as i64);
                    local.insert(*s, ix(b, IxOp::Rem, Ix::V(rest), ext)?);
                    rest = ix(b, IxOp::Div, Ix::V(rest), ext)?;
                }
            }
            let mut at: HashMap<Sym, ValueId> = HashMap::new();
            for &d in &p.dims {
                let base = Ix::V(self.nest.base[d]);
                let v = ix(b, IxOp::Add, base, Ix::V(local[&Sym::Index(d)]))?;
                at.insert(Sym::Index(d), v);
            }
            let kk = ix(b, IxOp::Add, Ix::V(k0), Ix::V(local[&Sym::K]))?;
            at.insert(Sym::K, kk);
            let mut ok = ix(b, IxOp::Lt, Ix::V(kk), Ix::V(kv))?;
            for &d in &p.dims {
                let size = Ix::V(self.nest.sizes[d]);
                let c = ix(b, IxOp::Lt, Ix::V(at[&Sym::Index(d)]), size)?;
                ok = b.and(ok, c)?;
            }
            let mut in_tile = None;
            if ragged {
                let c = ix(b, IxOp::Lt, Ix::V(e), Ix::Lit(elements as i64))?;
                in_tile = Some(c);
                ok = b.and(ok, c)?;
            }
            let mut f = b.begin_if(ok, std::slice::from_ref(&ty))?;
            let ix_v = self.eval(b, idx, &|s| at[&s])?;
            let src = b.ptr_add(self.ops[pos].ptr, ix_v)?;
            let x = b.load(src)?;
            b.begin_else(&mut f, &[x])?;
            let z = zero_of(b, &ty)?;
            let x = b.end_if(f, &[z])?[0];
            let mut parts = Vec::new();
            for s in &p.layout {
                parts.push(Ix::V(scaled(b, local[s], p.stride(*s))?));
            }
            let slot = ix_sum(b, &parts)?;
            let dst = b.ptr_add(tile, slot)?;
            match in_tile {
                None => b.store(dst, x)?,
                Some(c) => {
                    let g = b.begin_if(c, &[])?;
                    b.store(dst, x)?;
                    b.end_if(g, &[])?;
                }
            }
        }
        Ok(())
    }
}
