//! The instruction table: one row per HIR instruction, as data.
//!
//! Everything per-op that is not meaning lives here: the `.zir` mnemonic,
//! operand names and count, result count and rule, the operand and result
//! types (a signature, see [`crate::sig`], or the scalar types a scalar
//! family accepts), effects, placement (class), the arch feature it always
//! needs, the Rust and Python builder methods and a one-line doc.
//! `Op::mnemonic`/`class`/`has_side_effects`/`is_warp_collective`, the
//! parser's lookup of immediate-free mnemonics, the verifier's arity,
//! placement and operand-type checks and `arch::op_requirements`' fixed
//! features read it; [`crate::gen`] renders from it the instruction reference in
//! `docs/hir.md`, the Rust builder shorthands, the generated `FunctionBuilder`
//! methods of the Python bindings and their `.pyi` stubs (a test fails if
//! those files drift).
//!
//! Meaning stays hand-written: type inference in the builder, the verifier's
//! type rules a signature cannot say (`check_op`: immediates, fragments,
//! wgmma shapes, calls), the interpreter and the lowerings. Adding an op:
//! `docs/add-an-hir-op.md`.

use crate::arch::{
    Feature, CLUSTER, CP_ASYNC, ELECT_SYNC, GRIDDEP, LDMATRIX, MATCH, MBARRIER, MBARRIER_TX,
    MMA_SYNC, REDUX, SETMAXNREG, STMATRIX, TANH_APPROX, WGMMA,
};
use crate::arch::{TMA, TMA_MULTICAST};
use crate::imm::{self, Imm, ImmKind, Imms, Seg};
use crate::imms;
use crate::op::*;
use crate::sig;
use crate::types::{FragType, Layout, Type};
use std::collections::HashMap;
use std::sync::OnceLock;

/// Effect flags of an instruction.
pub mod fx {
    /// Reads memory.
    pub const READ: u8 = 1;
    /// Writes memory.
    pub const WRITE: u8 = 2;
    /// Synchronizes (barrier, fence, async-copy groups).
    pub const SYNC: u8 = 4;
    /// Warp-collective: every thread named in the mask (all 32 for MMA) executes it together.
    pub const WARP: u8 = 8;
    /// Calls a function (unknown effects).
    pub const CALL: u8 = 16;
}

/// The scalar types a scalar-family op accepts (operands and result share the type).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Operands {
    /// Not a scalar-family op: the row's signature or a hand-written rule applies.
    Other,
    IntOrFloat,
    Int,
    IntOrBool,
    SignedOrFloat,
    Float,
}

impl Operands {
    pub fn accepts(self, s: crate::types::ScalarType) -> bool {
        match self {
            Operands::Other => true,
            Operands::IntOrFloat => s.is_int() || s.is_float(),
            Operands::Int => s.is_int(),
            Operands::IntOrBool => s.is_int() || s.is_bool(),
            Operands::SignedOrFloat => s.is_signed() || s.is_float(),
            Operands::Float => s.is_float(),
        }
    }
    /// "integers or floats": for two-operand messages.
    pub fn plural(self) -> &'static str {
        match self {
            Operands::Other => "values",
            Operands::IntOrFloat => "integers or floats",
            Operands::Int => "integers",
            Operands::IntOrBool => "integers or bool",
            Operands::SignedOrFloat => "signed integers or floats",
            Operands::Float => "floats",
        }
    }
    /// "an integer or a float": for one-operand messages.
    pub fn singular(self) -> &'static str {
        match self {
            Operands::Other => "a value",
            Operands::IntOrFloat => "an integer or a float",
            Operands::Int => "an integer",
            Operands::IntOrBool => "an integer or bool",
            Operands::SignedOrFloat => "a signed integer or a float",
            Operands::Float => "a float",
        }
    }
}

/// How the Python `FunctionBuilder` exposes an instruction. The generated
/// forms delegate to one hand-written helper per family (`crates/zyntax-python/src/hir.rs`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Py {
    /// Not exposed on its own.
    None,
    /// A hand-written method of this name (immediates or inference need code).
    Hand(&'static str),
    /// Generated: `name(a, b)` through the binary helper.
    Binary(&'static str),
    /// Generated: `name(a)` through the unary helper.
    Unary(&'static str),
    /// Generated: `name(a, b)` through the comparison helper.
    Cmp(&'static str),
    /// Generated: `name(ptr, value, scope="device")`.
    Atomic(&'static str),
    /// Generated: `name(value, <lane>, *, mask=None, width=32)`; the second
    /// string names the lane operand.
    Shfl(&'static str, &'static str),
    /// Generated: `name(pred, *, mask=None)`.
    Vote(&'static str),
    /// Generated: `name(dim=None)`, a special register.
    Index(&'static str),
    /// Generated: `name()` with no operands.
    Nullary(&'static str),
    /// Generated: `name(<the row's operands>)` through the bit-op helper.
    Bits(&'static str),
    /// Generated: `name(ptr, value, scope="device")`, no result.
    Red(&'static str),
    /// Generated from its typed parameters and the builder call they feed.
    Method(&'static PyMethod),
    /// Exposed through the generated method of this name, which another row
    /// of the family declares (`tma_load(..., multicast=m)`, `bulk_wait_group(read=True)`).
    Via(&'static str),
}

/// A parameter of a generated Python method ([`PyMethod`]), in Python order.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PyArg {
    /// An SSA value, and the phrase that names it in errors ("the destination").
    Value(&'static str, &'static str),
    /// A value or a Python int, materialised as the named type (`"U32"`: `Type::U32`).
    Opnd(&'static str, &'static str),
    /// A sequence of values or ints, each materialised as i32 (TMA coordinates).
    Coords(&'static str),
    /// Keyword-only and optional: a value or int of the named type, or `None`.
    KwOpnd(&'static str, &'static str),
    /// A bool, `False` by default; keyword-only when the second field says so.
    Flag(&'static str, bool),
    /// A u32 given as a Python int, with its default.
    Count(&'static str, u32),
    /// A spelling of an op enum: the parameter, the enum (in `zyntax_hir`),
    /// its spellings (`NAMES`) and what it is in errors ("TMA reduction").
    Enum(
        &'static str,
        &'static str,
        &'static [&'static str],
        &'static str,
    ),
}

impl PyArg {
    pub fn name(self) -> &'static str {
        match self {
            PyArg::Value(n, _)
            | PyArg::Opnd(n, _)
            | PyArg::Coords(n)
            | PyArg::KwOpnd(n, _)
            | PyArg::Flag(n, _)
            | PyArg::Count(n, _)
            | PyArg::Enum(n, ..) => n,
        }
    }
    /// Whether it is keyword-only.
    pub fn keyword(self) -> bool {
        matches!(self, PyArg::KwOpnd(..) | PyArg::Flag(_, true))
    }
}

/// A Python `FunctionBuilder` method generated whole from the row that
/// declares it: for ops whose Python form takes typed arguments (tensor
/// maps, coordinate lists, flags, enum spellings) rather than one family
/// helper's. `crate::gen` writes its PyO3 method (argument conversion, then
/// `call` inside the builder) and its `.pyi` stub.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PyMethod {
    pub name: &'static str,
    pub args: &'static [PyArg],
    /// The Rust expression that emits the op on `fb` (the Rust
    /// `FunctionBuilder`) from the converted arguments, by their names.
    pub call: &'static str,
    /// Whether it returns the op's result (else `None`).
    pub result: bool,
    /// The Python docstring.
    pub doc: &'static str,
}

impl Py {
    pub fn name(self) -> Option<&'static str> {
        match self {
            Py::None => None,
            Py::Hand(n)
            | Py::Binary(n)
            | Py::Unary(n)
            | Py::Cmp(n)
            | Py::Atomic(n)
            | Py::Shfl(n, _)
            | Py::Vote(n)
            | Py::Index(n)
            | Py::Nullary(n)
            | Py::Bits(n)
            | Py::Red(n)
            | Py::Via(n) => Some(n),
            Py::Method(m) => Some(m.name),
        }
    }
}

/// One instruction (`Copy`: the parts of the table are concatenated at compile time).
#[derive(Copy, Clone, Debug)]
pub struct OpDef {
    /// Key of the row: the `Op` variant (snake case) and, for ops that carry a
    /// sub-op enum (`binary`, `cmp`, `atomic`, ...), its name; see [`Op::key`].
    pub family: &'static str,
    pub sub: &'static str,
    /// As written in `.zir`: a pattern whose `<x>` and `[.x]` parts are
    /// immediates (see [`crate::imm`]).
    pub mnemonic: &'static str,
    /// The op itself when it has no immediates.
    pub op: Option<fn() -> Op>,
    /// The immediates and the op built from them (`op` and `imms` are both
    /// `None` only for `const`, `jump` and `br`, which the parser and printer
    /// spell by hand).
    pub imms: Option<Imms>,
    /// How the operands and any immediates after the mnemonic are written
    /// (a template, see [`crate::imm`]); `{args}`: the value operands.
    pub syntax: &'static str,
    /// What the literal that tells this row from its siblings names, for
    /// the parser's errors ("comparison" for `cmp.lq`); "" for none.
    pub what: &'static str,
    /// Operand names in `args` order; `None` when variadic.
    pub operands: Option<&'static [&'static str]>,
    /// Result count; `None` when variadic.
    pub results: Option<usize>,
    /// The result type rule (docs only).
    pub result: &'static str,
    /// Scalar operand types (scalar families only).
    pub types: Operands,
    /// The operand and result type rules (see [`crate::sig`]); `None`: the
    /// verifier's hand-written rule for the op says everything.
    pub sig: Option<&'static str>,
    pub class: OpClass,
    /// [`fx`] flags.
    pub effects: u8,
    /// A feature it always needs beyond the baseline (type-dependent ones are in `arch.rs`).
    pub feature: Option<Feature>,
    /// The Rust `FunctionBuilder` method.
    pub builder: &'static str,
    /// Whether that method is generated (`builder/generated.rs`): an op
    /// without immediates or results whose method takes its operands, in
    /// order, and pushes it (`rust_shorthand`).
    pub rust_generated: bool,
    pub py: Py,
    pub doc: &'static str,
    /// What the op becomes in LLVM and typically in PTX, for the lowering
    /// table of `docs/lowering.md` (one- and two-operand scalar ops, whose
    /// lines there are generated; "" for the rest, documented by hand).
    pub lower: (&'static str, &'static str),
    /// Its `zyntax.lang` primitive when that is the op on its own operands
    /// (`"popc(x)"`: the name, then the parameters), generated into
    /// `python/zyntax/_lang_ops.py`; "" for none (or a hand-written one).
    pub lang: &'static str,
}

const fn row(
    family: &'static str,
    sub: &'static str,
    mnemonic: &'static str,
    operands: &'static [&'static str],
    results: usize,
    result: &'static str,
) -> OpDef {
    OpDef {
        family,
        sub,
        mnemonic,
        op: None,
        imms: None,
        syntax: "{args}",
        what: "",
        operands: Some(operands),
        results: Some(results),
        result,
        types: Operands::Other,
        sig: None,
        class: OpClass::Scalar,
        effects: 0,
        feature: None,
        builder: "",
        rust_generated: false,
        py: Py::None,
        doc: "",
        lower: ("", ""),
        lang: "",
    }
}

impl OpDef {
    const fn op(mut self, f: fn() -> Op) -> Self {
        self.op = Some(f);
        self
    }
    const fn imms(mut self, imms: Imms) -> Self {
        self.imms = Some(imms);
        self
    }
    const fn syntax(mut self, template: &'static str) -> Self {
        self.syntax = template;
        self
    }
    const fn what(mut self, what: &'static str) -> Self {
        self.what = what;
        self
    }
    const fn types(mut self, t: Operands) -> Self {
        self.types = t;
        self
    }
    const fn sig(mut self, s: &'static str) -> Self {
        self.sig = Some(s);
        self
    }
    const fn class(mut self, c: OpClass) -> Self {
        self.class = c;
        self
    }
    const fn gpu(self) -> Self {
        self.class(OpClass::Gpu)
    }
    const fn fx(mut self, flags: u8) -> Self {
        self.effects = flags;
        self
    }
    const fn needs(mut self, f: Feature) -> Self {
        self.feature = Some(f);
        self
    }
    const fn variadic(mut self, args: bool, results: bool) -> Self {
        if args {
            self.operands = None;
        }
        if results {
            self.results = None;
        }
        self
    }
    const fn rust(mut self, builder: &'static str) -> Self {
        self.builder = builder;
        self
    }
    const fn lower(mut self, llvm: &'static str, ptx: &'static str) -> Self {
        self.lower = (llvm, ptx);
        self
    }
    /// The Rust builder method, generated from the row: `"name(operand, ...)"`.
    const fn rust_shorthand(mut self, builder: &'static str) -> Self {
        self.builder = builder;
        self.rust_generated = true;
        self
    }
    const fn lang(mut self, spelling: &'static str) -> Self {
        self.lang = spelling;
        self
    }
    const fn py(mut self, p: Py) -> Self {
        self.py = p;
        self
    }
    const fn doc(mut self, d: &'static str) -> Self {
        self.doc = d;
        self
    }

    /// Whether the parser reads this row's syntax from the table (all but
    /// `const`, `jump` and `br`).
    pub fn parsed(&self) -> bool {
        self.op.is_some() || self.imms.is_some()
    }

    /// The op with immediates `values` (by name), those not written taking
    /// their default (0 / false) and the result fragment `frag`; `None` if a
    /// value is missing or of the wrong kind.
    pub fn build(&self, values: imm::Named, frag: Option<FragType>) -> Option<Op> {
        let Some(imms) = &self.imms else {
            return self.op.map(|f| f());
        };
        let mut ordered = Vec::with_capacity(imms.defs.len());
        for d in imms.defs {
            let v = values
                .iter()
                .find(|(n, _)| *n == d.name)
                .map(|(_, v)| v.clone());
            ordered.push(match (v, d.kind) {
                (Some(v), _) => v,
                (None, ImmKind::ResultFrag) => Imm::Frag(frag?),
                (None, ImmKind::Int(_)) => Imm::Int(0),
                (None, ImmKind::Bool) => Imm::Bool(false),
                (None, _) => return None,
            });
        }
        (imms.build)(&mut ordered.into_iter())
    }

    /// `(operands, results)` when both are fixed.
    pub fn arity(&self) -> Option<(usize, usize)> {
        Some((self.operands?.len(), self.results?))
    }
    pub fn has_side_effects(&self) -> bool {
        self.effects & (fx::WRITE | fx::SYNC | fx::CALL) != 0 || self.class == OpClass::Terminator
    }
    pub fn is_warp_collective(&self) -> bool {
        self.effects & fx::WARP != 0
    }
}

use OpClass::{Call as CallC, Memory as Mem, Terminator as Term};
use Operands as T;

/// Operand-name lists the rows share.
const AB: &[&str] = &["a", "b"];
const A: &[&str] = &["a"];
const NONE: &[&str] = &[];

mod control;
mod hopper;
mod memory;
mod mma;
mod rows;
mod scalar;
mod threads;
pub use rows::OPS;
pub use scalar::{BinOp, UnOp};

fn index() -> &'static HashMap<(&'static str, &'static str), usize> {
    static INDEX: OnceLock<HashMap<(&'static str, &'static str), usize>> = OnceLock::new();
    INDEX.get_or_init(|| {
        OPS.iter()
            .enumerate()
            .map(|(i, d)| ((d.family, d.sub), i))
            .collect()
    })
}

fn by_mnemonic() -> &'static HashMap<&'static str, usize> {
    static INDEX: OnceLock<HashMap<&'static str, usize>> = OnceLock::new();
    INDEX.get_or_init(|| {
        OPS.iter()
            .enumerate()
            .filter(|(_, d)| d.op.is_some())
            .map(|(i, d)| (d.mnemonic, i))
            .collect()
    })
}

/// The parsed mnemonic pattern of every row, in `OPS` order.
fn patterns() -> &'static [Vec<Seg>] {
    static PATTERNS: OnceLock<Vec<Vec<Seg>>> = OnceLock::new();
    PATTERNS.get_or_init(|| OPS.iter().map(|d| imm::pattern(d.mnemonic)).collect())
}

/// The rows the parser reads from the table, by the first segment of their mnemonic.
fn by_head() -> &'static HashMap<&'static str, Vec<usize>> {
    static INDEX: OnceLock<HashMap<&'static str, Vec<usize>>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut out: HashMap<&'static str, Vec<usize>> = HashMap::new();
        for (i, d) in OPS.iter().enumerate() {
            if let (Some(Seg::Lit(head)), true) = (patterns()[i].first(), d.parsed()) {
                out.entry(head).or_default().push(i);
            }
        }
        out
    })
}

/// The row that mnemonic `m` names and the immediates written in it (by
/// name), or the parser's message: the most specific of the rows whose
/// mnemonic starts like `m` (a misspelled immediate, else the expected
/// spellings of the literal that tells siblings apart, else "unknown").
pub fn find_mnemonic(m: &str) -> Result<(&'static OpDef, imm::Named), String> {
    if let Some(&i) = by_mnemonic().get(m) {
        return Ok((&OPS[i], Vec::new()));
    }
    let parts: Vec<&str> = m.split('.').collect();
    let unknown = || format!("unknown instruction `{m}`");
    let rows = by_head().get(parts[0]).ok_or_else(unknown)?;
    let mut best: Option<(usize, imm::Miss)> = None;
    let mut literals: Vec<(usize, usize)> = Vec::new();
    for &i in rows {
        let d = &OPS[i];
        match imm::match_pattern(&patterns()[i], d.imms.as_ref(), &parts, m) {
            Ok(values) => return Ok((d, values)),
            Err((pos, miss)) => {
                if miss == imm::Miss::Literal {
                    literals.push((i, pos));
                }
                if best.as_ref().is_none_or(|(p, b)| (pos, &miss) > (*p, b)) {
                    best = Some((pos, miss));
                }
            }
        }
    }
    match best {
        Some((_, imm::Miss::Bad(message))) => Err(message),
        Some((pos, imm::Miss::Literal)) => {
            let siblings: Vec<usize> = literals
                .iter()
                .filter(|(_, p)| *p == pos)
                .map(|(i, _)| *i)
                .collect();
            let what = siblings.first().map_or("", |&i| OPS[i].what);
            if what.is_empty() {
                return Err(unknown());
            }
            let mut expected: Vec<String> = Vec::new();
            for i in siblings {
                if let Some(Seg::Lit(l)) = patterns()[i].get(pos) {
                    let l = format!("`{l}`");
                    if !expected.contains(&l) {
                        expected.push(l);
                    }
                }
            }
            Err(format!(
                "unknown {what} in `{m}` (expected one of {})",
                expected.join(", ")
            ))
        }
        _ => Err(unknown()),
    }
}

/// The parsed operand template of every row, in `OPS` order.
fn templates() -> &'static [Vec<imm::Tok>] {
    static TEMPLATES: OnceLock<Vec<Vec<imm::Tok>>> = OnceLock::new();
    TEMPLATES.get_or_init(|| OPS.iter().map(|d| imm::template(d.syntax)).collect())
}

/// The index of row `d` in `OPS`: by its address when it is one of them
/// (no hashing on the printer's path), else by its key.
fn row_index(d: &OpDef) -> Option<usize> {
    let size = std::mem::size_of::<OpDef>();
    let offset = (d as *const OpDef as usize).wrapping_sub(OPS.as_ptr() as usize);
    if offset.is_multiple_of(size) && offset / size < OPS.len() {
        return Some(offset / size);
    }
    index().get(&(d.family, d.sub)).copied()
}

/// The parsed mnemonic pattern of row `d`.
pub fn pattern_of(d: &OpDef) -> &'static [Seg] {
    row_index(d).map_or(&[], |i| &patterns()[i])
}

/// The parsed operand template of row `d`.
pub fn template_of(d: &OpDef) -> &'static [imm::Tok] {
    row_index(d).map_or(&[], |i| &templates()[i])
}

/// The parsed signature of every row, in `OPS` order.
fn sigs() -> &'static [Option<sig::Sig>] {
    static SIGS: OnceLock<Vec<Option<sig::Sig>>> = OnceLock::new();
    SIGS.get_or_init(|| {
        OPS.iter()
            .map(|d| {
                d.sig.map(|s| {
                    sig::parse(s).unwrap_or_else(|e| panic!("signature of `{}`: {e}", d.mnemonic))
                })
            })
            .collect()
    })
}

/// The parsed signature of row `d`, if it declares one.
pub fn sig_of(d: &OpDef) -> Option<&'static sig::Sig> {
    row_index(d).and_then(|i| sigs()[i].as_ref())
}

/// The row of `(family, sub)`.
pub fn lookup(family: &str, sub: &str) -> Option<&'static OpDef> {
    index().get(&(family, sub)).map(|&i| &OPS[i])
}

/// The immediate-free op written `mnemonic` in `.zir`.
pub fn op_by_mnemonic(mnemonic: &str) -> Option<Op> {
    by_mnemonic()
        .get(mnemonic)
        .and_then(|&i| OPS[i].op)
        .map(|f| f())
}

impl Op {
    /// The key of this op's row in [`OPS`].
    pub fn key(&self) -> (&'static str, &'static str) {
        use Op::*;
        match self {
            Const(_) => ("const", ""),
            Binary(b) => ("binary", b.name()),
            Unary(u) => ("unary", u.name()),
            Fma => ("fma", ""),
            Cmp(c) => ("cmp", c.name()),
            Select => ("select", ""),
            Cast => ("cast", ""),
            Bitcast => ("bitcast", ""),
            Extract(_) => ("extract", ""),
            Insert(_) => ("insert", ""),
            Load => ("load", ""),
            Store => ("store", ""),
            PtrAdd => ("ptr_add", ""),
            PtrCast => ("ptr_cast", ""),
            Alloca { .. } => ("alloca", ""),
            SharedAlloc { .. } => ("shared_alloc", ""),
            DynShared { .. } => ("dyn_shared", ""),
            ThreadIdx(_) => ("thread_idx", ""),
            BlockIdx(_) => ("block_idx", ""),
            BlockDim(_) => ("block_dim", ""),
            GridDim(_) => ("grid_dim", ""),
            LaneId => ("lane_id", ""),
            Barrier => ("barrier", ""),
            Fence(_) => ("fence", ""),
            WarpSync => ("warp_sync", ""),
            Atomic { op, .. } => ("atomic", op.name()),
            AtomicCas { .. } => ("atomic_cas", ""),
            Shfl { mode, .. } => ("shfl", mode.name()),
            Vote(m) => ("vote", m.name()),
            Match(m) => ("match", m.name()),
            MmaLoad { .. } => ("mma_load", ""),
            MmaFill => ("mma_fill", ""),
            Mma => ("mma", ""),
            MmaStore { .. } => ("mma_store", ""),
            CpAsync { .. } => ("cp_async", ""),
            CpAsyncCommit => ("cp_async_commit", ""),
            CpAsyncWait(_) => ("cp_async_wait", ""),
            Mbarrier(m) => ("mbarrier", m.name()),
            FenceProxyAsync => ("fence_proxy_async", ""),
            FenceMbarrierInit => ("fence_mbarrier_init", ""),
            MmaSync { .. } => ("mma_sync", ""),
            Ldmatrix { .. } => ("ldmatrix", ""),
            Stmatrix { .. } => ("stmatrix", ""),
            Approx(a) => ("approx", a.name()),
            LoadCached(_) => ("load_cached", ""),
            StoreCached(_) => ("store_cached", ""),
            Call(_) => ("call", ""),
            Jump => ("jump", ""),
            Branch => ("branch", ""),
            Return => ("return", ""),
            Unreachable => ("unreachable", ""),
            Bits(b) => ("bits", b.name()),
            Red { op, .. } => ("red", op.name()),
            LoadAcquire(_) => ("load_acquire", ""),
            StoreRelease(_) => ("store_release", ""),
            FenceAcqRel(_) => ("fence_acq_rel", ""),
            CompilerFence => ("compiler_fence", ""),
            Redux(r) => ("redux", r.name()),
            WgmmaDesc(_) => ("wgmma_desc", ""),
            Wgmma(_) => ("wgmma", ""),
            WgmmaZero => ("wgmma_zero", ""),
            WgmmaFence => ("wgmma_fence", ""),
            WgmmaCommit => ("wgmma_commit", ""),
            WgmmaWait(_) => ("wgmma_wait", ""),
            Setmaxnreg { .. } => ("setmaxnreg", ""),
            ElectSync => ("elect_sync", ""),
            TmaLoad { multicast } => ("tma_load", if *multicast { "multicast" } else { "" }),
            TmaStore => ("tma_store", ""),
            TmaReduce(r) => ("tma_reduce", r.name()),
            BulkCopyG2S => ("bulk_copy_g2s", ""),
            BulkCopyS2G => ("bulk_copy_s2g", ""),
            BulkCommitGroup => ("bulk_commit_group", ""),
            BulkWaitGroup { read, .. } => ("bulk_wait_group", if *read { "read" } else { "" }),
            PrefetchTensormap => ("prefetch_tensormap", ""),
            NamedBarrier { arrive, .. } => {
                ("named_barrier", if *arrive { "arrive" } else { "sync" })
            }
            CvtPack(_) => ("cvt_pack", ""),
            CvtUnpack(_) => ("cvt_unpack", ""),
            ClusterIdx(_) => ("cluster_idx", ""),
            ClusterDim(_) => ("cluster_dim", ""),
            ClusterBlockIdx(_) => ("cluster_block_idx", ""),
            ClusterGridDim(_) => ("cluster_grid_dim", ""),
            ClusterCtaRank => ("cluster_ctarank", ""),
            ClusterNctaRank => ("cluster_nctarank", ""),
            IsExplicitCluster => ("is_explicit_cluster", ""),
            ClusterBarrier(c) => ("cluster_barrier", c.name()),
            Mapa => ("mapa", ""),
            MbarrierArriveCluster => ("mbarrier_arrive_cluster", ""),
            MbarrierArriveClusterRelaxed => ("mbarrier_arrive_cluster_relaxed", ""),
            Griddep(g) => ("griddepcontrol", g.name()),
            GridSync => ("grid_sync", ""),
            BulkReduce(r) => ("bulk_reduce", r.name()),
            GlobalAddr(_) => ("global_addr", ""),
        }
    }

    /// This op's row in [`OPS`] (every op has one: see the table's tests).
    pub fn def(&self) -> &'static OpDef {
        let (family, sub) = self.key();
        lookup(family, sub).unwrap_or_else(|| panic!("no table row for {family}.{sub}"))
    }
}
