//! HIR → textual LLVM IR for the host CPU.
//!
//! The NVPTX lowering in [`crate::lower`] is written for the GPU (address
//! spaces, `ptx_kernel`, traps); the host needs a different ABI (lengths and an
//! error record for bounds checks, slot wrappers for dynamic callers, a kernel
//! block runner), loop metadata and per-function attributes, which textual IR
//! expresses directly. The text is parsed by LLVM (`inkwell`) and verified, so
//! a mistake here is an error, never an abort. Scalar semantics follow
//! `crate::lower` (PTX): shifts clamp, float→int casts saturate (NaN → 0),
//! float `min`/`max` return the non-NaN operand, `MIN / -1` wraps; integer
//! division by zero reports an error instead of trapping.
//!
//! ABI of every lowered function `@"name"`:
//! `ret name(params..., i64 len for each pointer param, [ptr rets if >1 returns], ptr err [, ptr ctx for GPU functions])`
//! - `len` counts elements of the pointee type;
//! - `rets` points at one 8-byte slot per return value;
//! - `err` points at a [`ErrRecord`](super::ErrRecord) (seven `i64`s): the
//!   first six zero on success, the seventh the lowest stack address recursive
//!   functions may run at (0: unchecked);
//! - `ctx` (kernels and device functions) points at the thread context (see `CTX_*`).
//!
//! `@"name.zx_slots"(ptr args, ptr lens, ptr rets, ptr err)` calls it with
//! arguments in 8-byte slots; a kernel's `@"name.zx_block"(ptr args, ptr lens,
//! ptr err, ptr ctx)` runs every thread of one block.

use super::{fission, regions, warp};
use crate::scalar::{self, class_of, Conv, Scalar};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use zyntax_hir::{
    AddrSpace, ApproxOp, AtomicOp, BinOp, BlockId, ConstValue, Dim, Function, InstId, Module, Op,
    OptLevel, ScalarType, Type, UnOp, ValueDef, ValueId,
};
use zyntax_opt::{FunctionPlan, Origin};

// PTX bit-field ops and approximate-math helpers of `FnLower` (a child
// module: it sees the lowering's private state).
mod bits;
// The rest of `FnLower` and the module driver, by concern (child modules:
// they see the lowering's private state).
mod arith;
mod calls;
mod inst;
mod module;
// Kernels split at their barriers (region fission, `host/fission.rs`).
mod split;

pub use module::{lower_module, pipeline_for, value_def_block, LoweredFn, LATENCY_PIPELINE};

/// Error codes written to the error record.
pub const ERR_OOB: i64 = 1;
pub const ERR_DIV_ZERO: i64 = 2;
pub const ERR_UNREACHABLE: i64 = 4;
/// A recursive function found the stack pointer below the record's limit.
pub const ERR_STACK: i64 = 8;
/// Index of the stack limit in the error record (see [`super::ErrRecord`]).
const ERR_STACK_LIMIT_SLOT: u32 = 6;

/// Thread context layout (byte offsets).
pub const CTX_TID: u64 = 0;
pub const CTX_BID: u64 = 12;
pub const CTX_BDIM: u64 = 24;
pub const CTX_GDIM: u64 = 36;
pub const CTX_SHARED: u64 = 48;
pub const CTX_DYN: u64 = 56;
pub const CTX_BYTES: usize = 72;

/// A lowering failure: the function and why (unsupported on the host).
#[derive(Clone, Debug)]
pub struct LowerError {
    pub function: String,
    pub message: String,
}

type LResult<T> = Result<T, LowerError>;

/// LLVM name of a scalar as a value.
pub fn sname(s: ScalarType) -> &'static str {
    match s {
        ScalarType::Bool => "i1",
        ScalarType::I8 | ScalarType::U8 => "i8",
        ScalarType::I16 | ScalarType::U16 => "i16",
        ScalarType::I32 | ScalarType::U32 => "i32",
        ScalarType::I64 | ScalarType::U64 => "i64",
        ScalarType::F16 => "half",
        ScalarType::BF16 => "bfloat",
        ScalarType::F32 => "float",
        ScalarType::F64 => "double",
    }
}

fn mangle_s(s: ScalarType) -> &'static str {
    match s {
        ScalarType::Bool => "i1",
        ScalarType::I8 | ScalarType::U8 => "i8",
        ScalarType::I16 | ScalarType::U16 => "i16",
        ScalarType::I32 | ScalarType::U32 => "i32",
        ScalarType::I64 | ScalarType::U64 => "i64",
        ScalarType::F16 => "f16",
        ScalarType::BF16 => "bf16",
        ScalarType::F32 => "f32",
        ScalarType::F64 => "f64",
    }
}

/// Intrinsic name suffix of a scalar or vector type (`f32`, `v4f32`).
fn mangle(t: &Type) -> String {
    match t {
        Type::Vector(s, n) => format!("v{n}{}", mangle_s(*s)),
        Type::Scalar(s) => mangle_s(*s).to_string(),
        _ => "p0".into(),
    }
}

/// Quoted LLVM global name.
pub fn gname(name: &str) -> String {
    let mut s = String::from("@\"");
    for b in name.bytes() {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            let _ = write!(s, "\\{b:02X}");
        } else {
            s.push(b as char);
        }
    }
    s.push('"');
    s
}

/// LLVM type of a value.
pub fn vty(t: &Type) -> Option<String> {
    Some(match t {
        Type::Scalar(s) => sname(*s).to_string(),
        Type::Vector(s, n) => format!("<{n} x {}>", sname(*s)),
        Type::Ptr(..) => "ptr".into(),
        Type::Array(e, n) => format!("[{n} x {}]", mty(e)?),
        Type::Frag(_) | Type::TensorMap => return None,
    })
}

/// LLVM type of a value in memory (bool is a byte).
pub fn mty(t: &Type) -> Option<String> {
    match t {
        Type::Scalar(ScalarType::Bool) => Some("i8".into()),
        Type::Vector(ScalarType::Bool, _) => None,
        _ => vty(t),
    }
}

fn zero_of(t: &Type) -> String {
    match t {
        Type::Scalar(s) if s.is_float() => "0.0".into(),
        Type::Scalar(ScalarType::Bool) => "false".into(),
        Type::Scalar(_) => "0".into(),
        Type::Ptr(..) => "null".into(),
        _ => "zeroinitializer".into(),
    }
}

fn is_half(s: ScalarType) -> bool {
    matches!(s, ScalarType::F16 | ScalarType::BF16)
}

/// The operand text of an integer constant of type `s`.
fn int_lit(s: ScalarType, v: i64) -> String {
    let bits = s.bits();
    if bits >= 64 {
        return v.to_string();
    }
    // Print the width's signed value so LLVM's parser accepts it.
    let shift = 64 - bits;
    ((v << shift) >> shift).to_string()
}

fn f64_lit(v: f64) -> String {
    format!("0x{:016X}", v.to_bits())
}

/// Whether function `name` can call itself through a chain of calls.
fn reaches_itself(m: &Module, name: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut work = vec![name.to_string()];
    while let Some(n) = work.pop() {
        let Some(f) = m.function(&n) else { continue };
        for c in zyntax_opt::analysis::callees(f) {
            if c == name {
                return true;
            }
            if seen.insert(c.clone()) {
                work.push(c);
            }
        }
    }
    false
}

/// Per-module facts the lowering needs.
pub struct ModuleInfo<'m> {
    pub m: &'m Module,
    /// Functions whose calls may set the error record.
    pub can_fail: BTreeSet<String>,
    /// Functions on a cycle of the call graph: they check the stack on entry.
    pub recursive: BTreeSet<String>,
    /// Byte offset of every `shared_alloc` in the per-block shared buffer.
    pub shared_offsets: BTreeMap<(String, InstId), u64>,
    pub shared_bytes: u64,
    pub cpu: String,
    pub features: String,
    /// Forced runner settings; per kernel the rest is `mode::choose`'s.
    pub forced: super::mode::Forced,
}

impl<'m> ModuleInfo<'m> {
    pub fn new(m: &'m Module, plans: &[FunctionPlan], cpu: &str, features: &str) -> Self {
        let checked = |f: &Function| {
            plans
                .iter()
                .find(|p| p.name == f.name)
                .is_none_or(|p| p.bounds_checks)
        };
        let recursive: BTreeSet<String> = m
            .functions
            .iter()
            .filter(|f| reaches_itself(m, &f.name))
            .map(|f| f.name.clone())
            .collect();
        let mut can_fail = recursive.clone();
        for f in &m.functions {
            let direct = f.insts_in_order().any(|(_, i)| {
                f.insts.get(i.index()).is_some_and(|d| match &d.op {
                    Op::Binary(BinOp::Div | BinOp::Rem) => d
                        .args
                        .first()
                        .is_some_and(|a| f.has_value(*a) && f.value_type(*a).is_int()),
                    Op::Unreachable => true,
                    Op::Load
                    | Op::LoadCached(_)
                    | Op::LoadAcquire(_)
                    | Op::Store
                    | Op::StoreCached(_)
                    | Op::StoreRelease(_)
                    | Op::Atomic { .. }
                    | Op::Red { .. }
                    | Op::AtomicCas { .. } => checked(f),
                    Op::Call(c) => m.function(c).is_none(),
                    _ => false,
                })
            });
            if direct {
                can_fail.insert(f.name.clone());
            }
        }
        loop {
            let mut changed = false;
            for f in &m.functions {
                if can_fail.contains(&f.name) {
                    continue;
                }
                if zyntax_opt::analysis::callees(f)
                    .iter()
                    .any(|c| can_fail.contains(c))
                {
                    can_fail.insert(f.name.clone());
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut shared_offsets = BTreeMap::new();
        let mut off = 0u64;
        for f in &m.functions {
            for (_, i) in f.insts_in_order() {
                if let Some(Op::SharedAlloc { elem, count, align }) =
                    f.insts.get(i.index()).map(|d| &d.op)
                {
                    let align = zyntax_hir::op::shared_align(elem, *align);
                    off = off.div_ceil(align) * align;
                    shared_offsets.insert((f.name.clone(), i), off);
                    off = off.saturating_add(elem.size_bytes().unwrap_or(0).saturating_mul(*count));
                }
            }
        }
        ModuleInfo {
            m,
            can_fail,
            recursive,
            shared_offsets,
            shared_bytes: off,
            cpu: cpu.to_string(),
            features: features.to_string(),
            forced: super::mode::Forced::default(),
        }
    }
}

/// The alignment a CPU load or store of `t` assumes: a vector's element's,
/// not the whole vector's. A GPU faults on a misaligned vector access, but on
/// the CPU numpy hands kernels arrays at any element offset (a slice `x[1:]`),
/// and an x86 aligned-move of such an address would kill the process;
/// unaligned vector moves cost the same on current cores.
fn host_align(t: &Type) -> u64 {
    match t {
        Type::Vector(s, _) => s.size_bytes().max(1),
        _ => t.align_bytes(),
    }
}

/// Function signature pieces in the lowered ABI.
pub struct Sig {
    pub ret: String,
    /// (llvm type, name) of every parameter, hidden ones included.
    pub params: Vec<(String, String)>,
    pub ptr_params: Vec<usize>,
    pub multi_ret: bool,
    pub gpu: bool,
}

pub fn signature(f: &Function) -> LResult<Sig> {
    let err = |m: String| LowerError {
        function: f.name.clone(),
        message: m,
    };
    let mut params = Vec::new();
    let mut ptr_params = Vec::new();
    for (k, t) in f.param_types().iter().enumerate() {
        let ty = vty(t).ok_or_else(|| {
            err(format!(
                "parameter {k} has type {t}, which the CPU backend cannot pass"
            ))
        })?;
        params.push((ty, format!("%a{k}")));
        if t.is_ptr() {
            ptr_params.push(k);
        }
    }
    for k in &ptr_params {
        params.push(("i64".into(), format!("%len{k}")));
    }
    let multi_ret = f.returns.len() > 1;
    let ret = match f.returns.len() {
        0 => "void".to_string(),
        1 => vty(&f.returns[0]).ok_or_else(|| {
            err(format!(
                "return type {} is not supported on the CPU",
                f.returns[0]
            ))
        })?,
        _ => {
            for t in &f.returns {
                mty(t)
                    .filter(|_| t.size_bytes().is_some_and(|b| b <= 8))
                    .ok_or_else(|| err(format!("return type {t} does not fit a return slot")))?;
            }
            params.push(("ptr".into(), "%rets".into()));
            "void".to_string()
        }
    };
    params.push(("ptr".into(), "%err".into()));
    let gpu = f.kind.is_gpu();
    if gpu {
        params.push(("ptr".into(), "%ctx".into()));
    }
    Ok(Sig {
        ret,
        params,
        ptr_params,
        multi_ret,
        gpu,
    })
}

/// One edge into a block: argument operands, their byte offsets (pointers of known origin), source label.
type Incoming = (Vec<String>, Vec<Option<String>>, String);

struct FnLower<'a> {
    mi: &'a ModuleInfo<'a>,
    f: &'a Function,
    fid: usize,
    plan: &'a FunctionPlan,
    origins: Vec<Option<Origin>>,
    /// Byte offset operand of pointer values with a known origin.
    offs: Vec<Option<String>>,
    ops: Vec<String>,
    entry_text: String,
    blocks_text: Vec<(String, String)>,
    cur: String,
    cur_label: String,
    tmp: usize,
    incoming: BTreeMap<BlockId, Vec<Incoming>>,
    fails: String,
    meta: &'a mut Vec<String>,
    decls: &'a mut BTreeSet<String>,
    prefetch: BTreeMap<InstId, (InstId, i64)>,
    pos: BTreeMap<BlockId, usize>,
    lens_bytes: BTreeMap<Origin, String>,
    checks: usize,
    unchecked: usize,
    /// A kernel split at its barriers (`None`: not split).
    fission: Option<fission::Plan>,
    /// The kernel's vectorizable variant `name.zx_fast` (see `regions::fast_runner`):
    /// a failed check marks the thread's flag instead of the error record.
    fast: bool,
    /// Every value's operand as its definition names it (`ops` may hold a
    /// later reload of a value saved across barriers).
    base_ops: Vec<String>,
}

impl FnLower<'_> {
    fn e<T>(&self, m: impl Into<String>) -> LResult<T> {
        Err(LowerError {
            function: self.f.name.clone(),
            message: m.into(),
        })
    }
    fn t(&mut self) -> String {
        self.tmp += 1;
        format!("%t{}", self.tmp)
    }
    fn label(&mut self) -> String {
        self.tmp += 1;
        format!("zx.{}", self.tmp)
    }
    fn emit(&mut self, s: impl AsRef<str>) {
        self.cur.push_str("  ");
        self.cur.push_str(s.as_ref());
        self.cur.push('\n');
    }
    /// Close the current LLVM block (already terminated) and open `label`.
    fn open(&mut self, label: String) {
        let text = std::mem::take(&mut self.cur);
        let old = std::mem::replace(&mut self.cur_label, label);
        self.blocks_text.push((old, text));
    }
    fn ty(&self, v: ValueId) -> LResult<Type> {
        match self.f.values.get(v.index()) {
            Some(d) => Ok(d.ty.clone()),
            None => self.e(format!("unknown value {v}")),
        }
    }
    fn op(&self, v: ValueId) -> LResult<String> {
        match self.ops.get(v.index()) {
            Some(s) => Ok(s.clone()),
            None => self.e(format!("unknown value {v}")),
        }
    }
    fn vt(&self, t: &Type) -> LResult<String> {
        match vty(t) {
            Some(s) => Ok(s),
            None => self.e(format!("type {t} is not supported on the CPU")),
        }
    }
    fn decl(&mut self, d: impl Into<String>) {
        self.decls.insert(d.into());
    }

    /// Emit the failure block for a check; returns its label.
    fn fail(&mut self, code: i64, param: i64, index: &str, len: &str, inst: InstId) -> String {
        let l = self.label();
        let _ = writeln!(self.fails, "{l}:");
        if self.fast {
            // The vectorizable variant: the failing thread stops with its code,
            // which every exit writes into the thread's byte of the row's flags
            // (see `fast_exit`); the runner re-runs the block checked for the
            // details.
            let _ = writeln!(
                self.fails,
                "  store i8 {code}, ptr %zx.code.a, align 1\n  br label %zx.fail"
            );
            return l;
        }
        let fields = [
            code.to_string(),
            param.to_string(),
            index.to_string(),
            len.to_string(),
            inst.0.to_string(),
            self.fid.to_string(),
        ];
        for (k, v) in fields.iter().enumerate() {
            let _ = writeln!(
                self.fails,
                "  %{l}.p{k} = getelementptr i64, ptr %err, i64 {k}"
            );
            let _ = writeln!(self.fails, "  store i64 {v}, ptr %{l}.p{k}");
        }
        let _ = writeln!(self.fails, "  br label %zx.fail");
        l
    }

    /// Branch to `fail_label` when `bad` holds (marked unlikely), else continue in a new block.
    fn guard(&mut self, bad: &str, fail_label: &str) {
        let ok = self.label();
        self.emit(format!(
            "br i1 {bad}, label %{fail_label}, label %{ok}, !prof !0"
        ));
        self.open(ok);
    }

    /// Bounds check of an access of `size` bytes through `ptr`.
    fn check_access(&mut self, ptr: ValueId, size: u64, inst: InstId) -> LResult<()> {
        if !self.plan.bounds_checks {
            return Ok(());
        }
        let origin = self.origins.get(ptr.index()).copied().flatten();
        let (Some(origin), Some(off)) = (origin, self.offs.get(ptr.index()).cloned().flatten())
        else {
            self.unchecked += 1;
            return Ok(());
        };
        let Some(lenb) = self.lens_bytes.get(&origin).cloned() else {
            self.unchecked += 1;
            return Ok(());
        };
        self.checks += 1;
        let (param, elem) = match origin {
            Origin::Param(k) => {
                let t = self.f.param_types().get(k as usize).cloned();
                let es = t
                    .as_ref()
                    .and_then(|t| t.pointee())
                    .and_then(|p| p.size_bytes())
                    .unwrap_or(1)
                    .max(1);
                (i64::from(k), es)
            }
            _ => (-1, 1),
        };
        let end = self.t();
        self.emit(format!("{end} = add i64 {off}, {size}"));
        let neg = self.t();
        self.emit(format!("{neg} = icmp slt i64 {off}, 0"));
        let over = self.t();
        self.emit(format!("{over} = icmp sgt i64 {end}, {lenb}"));
        let bad = self.t();
        self.emit(format!("{bad} = or i1 {neg}, {over}"));
        // The record holds element indices, as the user wrote them.
        let idx = self.t();
        self.emit(format!("{idx} = sdiv i64 {off}, {elem}"));
        let len = self.t();
        self.emit(format!("{len} = sdiv i64 {lenb}, {elem}"));
        let fl = self.fail(ERR_OOB, param, &idx, &len, inst);
        self.guard(&bad, &fl);
        Ok(())
    }

    fn ext64(&mut self, v: ValueId) -> LResult<String> {
        let t = self.ty(v)?;
        let o = self.op(v)?;
        let s = t.as_scalar().filter(|s| s.is_int() || s.is_bool());
        let Some(s) = s else {
            return self.e(format!("index {v} must be an integer, got {t}"));
        };
        if s.bits() == 64 {
            return Ok(o);
        }
        let r = self.t();
        let how = if s.is_signed() { "sext" } else { "zext" };
        self.emit(format!("{r} = {how} {} {o} to i64", sname(s)));
        Ok(r)
    }

    fn ctx_u32(&mut self, base: u64, d: u64) -> String {
        let p = self.t();
        self.emit(format!(
            "{p} = getelementptr i8, ptr %ctx, i64 {}",
            base + 4 * d
        ));
        let v = self.t();
        self.emit(format!("{v} = load i32, ptr {p}, align 4"));
        v
    }

    fn lower_fn(&mut self) -> LResult<String> {
        let f = self.f;
        let sig = signature(f)?;
        let entry = match f.entry() {
            Some(e) => e,
            None => return self.e("function has no blocks"),
        };
        // Operands: constants as literals where LLVM accepts them, every other value by name.
        self.ops = (0..f.values.len()).map(|i| format!("%v{i}")).collect();
        for (k, p) in f.params().iter().enumerate() {
            if let Some(s) = self.ops.get_mut(p.index()) {
                *s = format!("%a{k}");
            }
        }
        for (_, i) in f.insts_in_order() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            if let (Op::Const(c), Some(r)) = (&d.op, d.results.first()) {
                let t = self.ty(*r)?;
                let lit = match (c, t.as_scalar()) {
                    (ConstValue::Int(v), Some(s)) if s.is_int() => Some(int_lit(s, *v)),
                    (ConstValue::Bool(b), _) => Some(b.to_string()),
                    (ConstValue::Float(_), Some(ScalarType::F64)) => c.as_f64().map(f64_lit),
                    (ConstValue::Float(_), Some(ScalarType::F32)) => {
                        c.as_f64().map(|v| f64_lit(f64::from(v as f32)))
                    }
                    _ => None,
                };
                if let Some(l) = lit {
                    self.ops[r.index()] = l;
                }
            }
        }
        self.base_ops = self.ops.clone();
        if f.is_kernel() && !self.mi.recursive.contains(&f.name) {
            let ops = &self.ops;
            let literal = |v: ValueId| ops.get(v.index()).is_some_and(|o| !o.starts_with('%'));
            let mode = super::mode::choose(f, &self.mi.forced);
            self.fission = fission::plan(f, &literal, &mode);
        }
        // A split kernel computes its context-only values before the region
        // dispatch (`fission::hoisted`): no barrier saves them.
        let hoist = if self.fission.is_some() {
            fission::hoisted(f)
        } else {
            BTreeSet::new()
        };
        for (k, b) in f.layout.iter().enumerate() {
            self.pos.insert(*b, k);
        }
        for (_, i) in f.insts_in_order() {
            if let Some(d) = f.insts.get(i.index()) {
                if d.targets.iter().any(|t| t.block == entry) {
                    return self.e("a branch targets the entry block");
                }
            }
        }
        // Offsets and byte lengths of checkable memory objects.
        self.offs = vec![None; f.values.len()];
        for (k, p) in f.params().iter().enumerate() {
            if f.value_type(*p).is_ptr() {
                self.offs[p.index()] = Some("0".into());
                let es = f
                    .value_type(*p)
                    .pointee()
                    .and_then(|t| t.size_bytes())
                    .unwrap_or(1);
                let _ = writeln!(self.entry_text, "  %lenb{k} = mul i64 %len{k}, {es}");
                self.lens_bytes
                    .insert(Origin::Param(k as u32), format!("%lenb{k}"));
            }
        }
        // Block params with an origin get an offset phi.
        for b in &f.layout {
            if *b == entry {
                continue;
            }
            for p in &f.block(*b).params {
                if self.origins.get(p.index()).copied().flatten().is_some() {
                    self.offs[p.index()] = Some(format!("%o{}", p.0));
                }
            }
        }
        if self.fast {
            // The thread's failure code (0: none) and its byte of the row's flags.
            let _ = writeln!(
                self.entry_text,
                "  %zx.code.a = alloca i8, align 1\n  store i8 0, ptr %zx.code.a, align 1\n  \
                 %zx.fbp = getelementptr i8, ptr %ctx, i64 {}\n  %zx.fb = load ptr, ptr %zx.fbp, align 8\n  \
                 %zx.ftx = load i32, ptr %ctx, align 4\n  %zx.ftx64 = zext i32 %zx.ftx to i64\n  \
                 %zx.flagp = getelementptr i8, ptr %zx.fb, i64 %zx.ftx64",
                regions::CTX_FLAGS
            );
        }
        if sig.gpu {
            let _ = writeln!(
                self.entry_text,
                "  %shp = getelementptr i8, ptr %ctx, i64 {CTX_SHARED}"
            );
            let _ = writeln!(self.entry_text, "  %shbase = load ptr, ptr %shp, align 8");
        }
        self.cur_label = "zx.body".into();
        for b in f.layout.clone() {
            if b != entry {
                self.open(format!("b{}", b.0));
                self.split_defs(&f.block(b).params);
                // An interchanged loop's header: a virtual barrier after its
                // parameters (`host/interchange.rs`).
                let vp = super::interchange::point(b);
                if self
                    .fission
                    .as_ref()
                    .is_some_and(|p| p.live.contains_key(&vp))
                {
                    self.split_barrier(vp);
                }
            } else {
                self.cur_label = format!("b{}", b.0);
            }
            let insts = f.block(b).insts.clone();
            for i in insts {
                if hoist.contains(&i) {
                    let here = std::mem::take(&mut self.cur);
                    self.lower_inst(b, i, &sig)?;
                    let text = std::mem::replace(&mut self.cur, here);
                    self.entry_text.push_str(&text);
                    continue;
                }
                self.split_uses(i);
                self.lower_inst(b, i, &sig)?;
                if let Some(d) = f.insts.get(i.index()) {
                    self.split_defs(&d.results);
                }
            }
        }
        self.open("zx.end".into());

        // Assemble.
        let mut out = String::new();
        let params: Vec<String> = sig.params.iter().map(|(t, n)| format!("{t} {n}")).collect();
        let attrs = self.attrs();
        let align = self
            .plan
            .align
            .map(|a| format!(" align {a}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "define {} {}({}) {attrs}{align} {{",
            sig.ret,
            gname(&if self.fast {
                format!("{}.zx_fast", f.name)
            } else {
                f.name.clone()
            }),
            params.join(", ")
        );
        let _ = writeln!(out, "zx.entry:");
        out.push_str(&self.entry_text);
        if self.mi.recursive.contains(&f.name) {
            // Unbounded recursion must not run into the guard page (SIGSEGV):
            // below the caller's limit (slot 6 of the error record) fail instead.
            self.decl("declare ptr @llvm.stacksave.p0()");
            let fl = self.label();
            let _ = writeln!(self.fails, "{fl}:");
            for (k, v) in [ERR_STACK, -1, 0, 0, -1, self.fid as i64]
                .iter()
                .enumerate()
            {
                let _ = writeln!(
                    self.fails,
                    "  %{fl}.p{k} = getelementptr i64, ptr %err, i64 {k}"
                );
                let _ = writeln!(self.fails, "  store i64 {v}, ptr %{fl}.p{k}");
            }
            let _ = writeln!(self.fails, "  br label %zx.fail");
            let _ = writeln!(
                out,
                "  %zx.sp = call ptr @llvm.stacksave.p0()\n  %zx.spi = ptrtoint ptr %zx.sp to i64\n  \
                 %zx.limp = getelementptr i64, ptr %err, i64 {ERR_STACK_LIMIT_SLOT}\n  \
                 %zx.lim = load i64, ptr %zx.limp, align 8\n  %zx.deep = icmp ult i64 %zx.spi, %zx.lim\n  \
                 br i1 %zx.deep, label %{fl}, label %b{}, !prof !0",
                entry.0
            );
        } else if let Some(plan) = &self.fission {
            out.push_str(&plan.entry());
            out.push_str(&plan.dispatch(entry));
        } else {
            let _ = writeln!(out, "  br label %b{}", entry.0);
        }
        for (label, text) in std::mem::take(&mut self.blocks_text) {
            if label == "zx.body" {
                continue;
            }
            let _ = writeln!(out, "{label}:");
            if let Some(bid) = label.strip_prefix('b').and_then(|n| n.parse::<u32>().ok()) {
                let bid = BlockId(bid);
                if bid != entry {
                    let params = f.block(bid).params.clone();
                    let inc = self.incoming.get(&bid).cloned().unwrap_or_default();
                    for (k, p) in params.iter().enumerate() {
                        let t = self.vt(&f.value_type(*p).clone())?;
                        if inc.is_empty() {
                            // A block nothing branches to: its parameters are never observed.
                            let _ = writeln!(out, "  %v{} = freeze {t} poison", p.0);
                            if self.offs.get(p.index()).cloned().flatten().is_some() {
                                let _ = writeln!(out, "  %o{} = freeze i64 poison", p.0);
                            }
                            continue;
                        }
                        let parts: Vec<String> = inc
                            .iter()
                            .map(|(vals, _, from)| {
                                format!(
                                    "[ {}, %{from} ]",
                                    vals.get(k).cloned().unwrap_or_else(|| "poison".into())
                                )
                            })
                            .collect();
                        let _ = writeln!(out, "  %v{} = phi {t} {}", p.0, parts.join(", "));
                        if self.offs.get(p.index()).cloned().flatten().is_some() {
                            let parts: Vec<String> = inc
                                .iter()
                                .map(|(_, offs, from)| {
                                    format!(
                                        "[ {}, %{from} ]",
                                        offs.get(k)
                                            .cloned()
                                            .flatten()
                                            .unwrap_or_else(|| "0".into())
                                    )
                                })
                                .collect();
                            let _ = writeln!(out, "  %o{} = phi i64 {}", p.0, parts.join(", "));
                        }
                    }
                }
            }
            out.push_str(&text);
        }
        out.push_str(&self.fails);
        let _ = writeln!(out, "zx.fail:");
        if sig.ret == "void" {
            let _ = writeln!(out, "  ret void");
        } else {
            let _ = writeln!(out, "  ret {} {}", sig.ret, zero_of(&f.returns[0]));
        }
        let _ = writeln!(out, "}}");
        // Unreachable blocks the builder left without predecessors are harmless; phis with none are dropped above.
        Ok(if self.fast {
            let saves = self
                .fission
                .as_ref()
                .map(|p| p.save_all())
                .unwrap_or_default();
            fast_exit(&out, &saves)
        } else {
            out
        })
    }

    fn attrs(&self) -> String {
        let p = self.plan;
        let mut a = vec!["nounwind".to_string()];
        // A kernel without suspend points is called only by its block runner's
        // thread loop: inlined there, its thread index is the loop counter
        // and the loop is one LLVM can optimize (LLVM's cost model would
        // leave a large kernel as a call per thread).
        let runner_inlined =
            self.f.is_kernel() && (!super::regions::has_suspend(self.f) || self.fission.is_some());
        if p.optnone {
            a.push("optnone noinline".into());
        } else if p.always_inline || runner_inlined {
            a.push("alwaysinline".into());
        }
        if p.hot {
            a.push("hot".into());
        }
        if p.optimize_size {
            a.push("optsize".into());
        }
        a.push(format!("\"target-cpu\"=\"{}\"", self.mi.cpu));
        a.push(format!("\"target-features\"=\"{}\"", self.mi.features));
        a.push("\"frame-pointer\"=\"none\"".into());
        a.join(" ")
    }

    fn edge(&mut self, target: &zyntax_hir::BlockCall, from_label: &str) -> LResult<()> {
        let mut vals = Vec::new();
        let mut offs = Vec::new();
        for a in &target.args {
            vals.push(self.op(*a)?);
            offs.push(self.offs.get(a.index()).cloned().flatten());
        }
        self.incoming
            .entry(target.block)
            .or_default()
            .push((vals, offs, from_label.to_string()));
        Ok(())
    }

    fn loop_md(&mut self, from: BlockId, to: BlockId) -> String {
        let back = match (self.pos.get(&from), self.pos.get(&to)) {
            (Some(a), Some(b)) => b <= a,
            _ => false,
        };
        if !back || !(self.plan.vectorize_loops || self.plan.no_unroll) {
            return String::new();
        }
        let id = self.meta.len() + 10;
        let mut items = vec![format!("!{id}")];
        if self.plan.vectorize_loops {
            items.push("!1".into());
        }
        if self.plan.no_unroll {
            items.push("!2".into());
        }
        self.meta
            .push(format!("!{id} = distinct !{{{}}}", items.join(", ")));
        format!(", !llvm.loop !{id}")
    }
}

fn widen(t: &Type) -> String {
    match t {
        Type::Vector(_, n) => format!("<{n} x float>"),
        _ => "float".into(),
    }
}

fn mangle_from(llvm_ty: &str) -> String {
    match llvm_ty {
        "float" => "f32".into(),
        "double" => "f64".into(),
        other => {
            // "<4 x float>"
            let inner = other.trim_start_matches('<').trim_end_matches('>');
            let mut it = inner.split(" x ");
            let n = it.next().unwrap_or("1");
            let e = match it.next().unwrap_or("float") {
                "double" => "f64",
                _ => "f32",
            };
            format!("v{n}{e}")
        }
    }
}

/// The vectorizable variant's exits: every `ret void` goes through one block
/// that ors the thread's failure code (0: none) into its flag byte — one
/// unconditional load and store per thread, which the loop vectorizer makes
/// plain vector ones (a conditional store of the code would become per-lane
/// branches or a slow masked store). Or, not store: the flags are cleared
/// once per block and indexed by `thread_idx.x`, so a region runner that
/// checks them after a region of several rows must not let a later row's
/// thread clear an earlier one's failure.
///
/// `saves`: in a kernel split at barriers, the copy of every saved value to
/// its per-thread array, done here on every exit rather than at each
/// barrier (see `fission::Plan::save_all`).
fn fast_exit(text: &str, saves: &str) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    for line in text.lines() {
        if line == "  ret void" {
            out.push_str("  br label %zx.ret\n");
        } else if line == "}" {
            let _ = write!(
                out,
                "zx.ret:\n{saves}  %zx.code = load i8, ptr %zx.code.a, align 1\n  \
                 %zx.fold = load i8, ptr %zx.flagp, align 1\n  %zx.fnew = or i8 %zx.fold, %zx.code\n  \
                 store i8 %zx.fnew, ptr %zx.flagp, align 1\n  ret void\n}}\n",
            );
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
