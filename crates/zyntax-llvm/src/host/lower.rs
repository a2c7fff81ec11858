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

use super::{regions, warp};
use crate::scalar::{self, class_of, Conv, Scalar};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use zyntax_hir::{
    ApproxOp, AtomicOp, BinOp, BlockId, ConstValue, Dim, Function, InstId, Module, Op, OptLevel,
    ScalarType, Type, UnOp, ValueDef, ValueId,
};
use zyntax_opt::{FunctionPlan, Origin};

// PTX bit-field ops and approximate-math helpers of `FnLower` (a child
// module: it sees the lowering's private state).
mod bits;

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
            } else {
                self.cur_label = format!("b{}", b.0);
            }
            let insts = f.block(b).insts.clone();
            for i in insts {
                self.lower_inst(b, i, &sig)?;
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
            gname(&f.name),
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
        Ok(out)
    }

    fn attrs(&self) -> String {
        let p = self.plan;
        let mut a = vec!["nounwind".to_string()];
        // A kernel without suspend points is called only by its block runner's
        // thread loop: inlined there, its thread index is the loop counter
        // and the loop is one LLVM can optimize (LLVM's cost model would
        // leave a large kernel as a call per thread).
        let runner_inlined = self.f.is_kernel() && !super::regions::has_suspend(self.f);
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

    fn lower_inst(&mut self, b: BlockId, i: InstId, sig: &Sig) -> LResult<()> {
        let f = self.f;
        let Some(d) = f.insts.get(i.index()).cloned() else {
            return self.e(format!("unknown instruction {i}"));
        };
        let res = d.results.first().copied();
        let r = res.map(|v| format!("%v{}", v.0)).unwrap_or_default();
        let rty = match res {
            Some(v) => Some(self.ty(v)?),
            None => None,
        };
        let arg = |k: usize| -> LResult<ValueId> {
            d.args.get(k).copied().ok_or_else(|| LowerError {
                function: f.name.clone(),
                message: format!("`{}` is missing operand {k}", d.op.mnemonic()),
            })
        };
        match &d.op {
            Op::Const(c) => {
                let t = rty.clone().unwrap_or(Type::I32);
                if self
                    .ops
                    .get(res.map_or(0, |v| v.index()))
                    .is_some_and(|s| s.starts_with('%'))
                {
                    let v = c.as_f64().unwrap_or(0.0);
                    let tt = self.vt(&t)?;
                    self.emit(format!("{r} = fptrunc double {} to {tt}", f64_lit(v)));
                }
            }
            Op::Binary(op) => {
                let (a, bb) = (arg(0)?, arg(1)?);
                let t = self.ty(a)?;
                let (ao, bo) = (self.op(a)?, self.op(bb)?);
                self.binary(*op, &t, &ao, &bo, &r, i)?;
            }
            Op::Unary(op) => {
                let a = arg(0)?;
                let t = self.ty(a)?;
                let ao = self.op(a)?;
                self.unary(*op, &t, &ao, &r)?;
            }
            Op::Bits(op) => {
                let ops = d.args.iter().map(|&v| Ok((self.op(v)?, self.ty(v)?)));
                let ops = ops.collect::<LResult<Vec<_>>>()?;
                let t = rty.clone().unwrap_or(Type::U32);
                self.bit_op(*op, &t, &ops, &r)?;
            }
            // PTX's approximate f32 math, as the interpreter gives it: the
            // correctly rounded value (in f64, rounded once); `ex2_ftz` flushes
            // a subnormal operand and result to signed zero.
            Op::Approx(op) => {
                let ftz = matches!(op, ApproxOp::Ex2Ftz);
                let mut x = self.op(arg(0)?)?;
                if ftz {
                    x = self.flush_subnormal(&x);
                }
                let w = self.t();
                self.emit(format!("{w} = fpext float {x} to double"));
                let y = self.t();
                match op {
                    ApproxOp::Ex2 | ApproxOp::Ex2Ftz => {
                        self.decl("declare double @llvm.exp2.f64(double)");
                        self.emit(format!("{y} = call double @llvm.exp2.f64(double {w})"));
                    }
                    ApproxOp::Rcp => self.emit(format!("{y} = fdiv double 1.0, {w}")),
                    ApproxOp::Tanh => {
                        self.decl("declare double @llvm.tanh.f64(double)");
                        self.emit(format!("{y} = call double @llvm.tanh.f64(double {w})"));
                    }
                }
                if ftz {
                    let n = self.t();
                    self.emit(format!("{n} = fptrunc double {y} to float"));
                    let f = self.flush_subnormal(&n);
                    self.emit(format!("{r} = fadd float {f}, -0.0"));
                } else {
                    self.emit(format!("{r} = fptrunc double {y} to float"));
                }
            }
            Op::Fma => {
                let t = self.ty(arg(0)?)?;
                let ops = [self.op(arg(0)?)?, self.op(arg(1)?)?, self.op(arg(2)?)?];
                self.float_op(
                    &t,
                    &r,
                    |me, tt, x| {
                        let m = mangle_from(tt);
                        me.decl(format!("declare {tt} @llvm.fma.{m}({tt}, {tt}, {tt})"));
                        let o = me.t();
                        me.emit(format!(
                            "{o} = call {tt} @llvm.fma.{m}({tt} {}, {tt} {}, {tt} {})",
                            x[0], x[1], x[2]
                        ));
                        Ok(o)
                    },
                    &ops,
                )?;
            }
            Op::Cmp(c) => {
                let (a, bb) = (arg(0)?, arg(1)?);
                let t = self.ty(a)?;
                let (mut ao, mut bo) = (self.op(a)?, self.op(bb)?);
                let s = t.elem_scalar();
                let mut tt = self.vt(&t)?;
                if let Some(s) = s.filter(|s| s.is_float()) {
                    if is_half(s) {
                        let wide = widen(&t);
                        ao = self.conv("fpext", &tt, &ao, &wide);
                        bo = self.conv("fpext", &tt, &bo, &wide);
                        tt = wide;
                    }
                    let p = scalar::fcmp(*c);
                    self.emit(format!("{r} = fcmp {p} {tt} {ao}, {bo}"));
                } else {
                    let signed = s.is_some_and(|s| s.is_signed());
                    let p = scalar::icmp(*c, signed);
                    self.emit(format!("{r} = icmp {p} {tt} {ao}, {bo}"));
                }
            }
            Op::Select => {
                let t = self.ty(arg(1)?)?;
                let tt = self.vt(&t)?;
                let (c, a, bb) = (self.op(arg(0)?)?, self.op(arg(1)?)?, self.op(arg(2)?)?);
                self.emit(format!("{r} = select i1 {c}, {tt} {a}, {tt} {bb}"));
                if let (Some(rv), Some(o1), Some(o2)) = (
                    res,
                    self.offs.get(arg(1)?.index()).cloned().flatten(),
                    self.offs.get(arg(2)?.index()).cloned().flatten(),
                ) {
                    if self.origins.get(rv.index()).copied().flatten().is_some() {
                        let o = format!("%o{}", rv.0);
                        self.emit(format!("{o} = select i1 {c}, i64 {o1}, i64 {o2}"));
                        self.offs[rv.index()] = Some(o);
                    }
                }
            }
            Op::Cast => {
                let a = arg(0)?;
                let from = self.ty(a)?;
                let to = rty.clone().unwrap_or(Type::I32);
                let ao = self.op(a)?;
                self.cast(&from, &to, &ao, &r)?;
            }
            Op::Bitcast => {
                let a = arg(0)?;
                let from = self.ty(a)?;
                let to = rty.clone().unwrap_or(Type::I32);
                let (ft, tt) = (self.vt(&from)?, self.vt(&to)?);
                let ao = self.op(a)?;
                if from.elem_scalar() == Some(ScalarType::Bool)
                    || to.elem_scalar() == Some(ScalarType::Bool)
                {
                    return self.e("bitcast of bool is not supported");
                }
                let how = match (from.is_ptr(), to.is_ptr()) {
                    (true, false) => "ptrtoint",
                    (false, true) => "inttoptr",
                    _ => "bitcast",
                };
                self.emit(format!("{r} = {how} {ft} {ao} to {tt}"));
            }
            Op::Extract(l) => {
                let a = arg(0)?;
                let tt = self.vt(&self.ty(a)?)?;
                let ao = self.op(a)?;
                self.emit(format!("{r} = extractelement {tt} {ao}, i32 {l}"));
            }
            Op::Insert(l) => {
                let (a, s) = (arg(0)?, arg(1)?);
                let tt = self.vt(&self.ty(a)?)?;
                let st = self.vt(&self.ty(s)?)?;
                let (ao, so) = (self.op(a)?, self.op(s)?);
                self.emit(format!("{r} = insertelement {tt} {ao}, {st} {so}, i32 {l}"));
            }
            // Cache operators are hints for the GPU's caches: a plain access here.
            // `ld.acquire` is an LLVM acquire load (any scope: one host).
            Op::Load | Op::LoadCached(_) | Op::LoadAcquire(_) => {
                let p = arg(0)?;
                let t = rty.clone().unwrap_or(Type::I32);
                let Some(m) = mty(&t) else {
                    return self.e(format!("cannot load a value of type {t}"));
                };
                self.check_access(p, t.size_bytes().unwrap_or(1), i)?;
                if let Some((addr, dist)) = self.prefetch.get(&i).copied() {
                    self.emit_prefetch(addr, dist)?;
                }
                let po = self.op(p)?;
                let al = host_align(&t);
                let (ld, order) = if matches!(d.op, Op::LoadAcquire(_)) {
                    ("load atomic", " acquire")
                } else {
                    ("load", "")
                };
                if t.is_bool() {
                    let x = self.t();
                    self.emit(format!("{x} = {ld} i8, ptr {po}{order}, align 1"));
                    self.emit(format!("{r} = trunc i8 {x} to i1"));
                } else {
                    self.emit(format!("{r} = {ld} {m}, ptr {po}{order}, align {al}"));
                }
            }
            Op::Store | Op::StoreCached(_) | Op::StoreRelease(_) => {
                let (p, v) = (arg(0)?, arg(1)?);
                let t = self.ty(v)?;
                let Some(m) = mty(&t) else {
                    return self.e(format!("cannot store a value of type {t}"));
                };
                self.check_access(p, t.size_bytes().unwrap_or(1), i)?;
                let (po, vo) = (self.op(p)?, self.op(v)?);
                let al = host_align(&t);
                let (st, order) = if matches!(d.op, Op::StoreRelease(_)) {
                    ("store atomic", " release")
                } else {
                    ("store", "")
                };
                if t.is_bool() {
                    let x = self.t();
                    self.emit(format!("{x} = zext i1 {vo} to i8"));
                    self.emit(format!("{st} i8 {x}, ptr {po}{order}, align 1"));
                } else {
                    self.emit(format!("{st} {m} {vo}, ptr {po}{order}, align {al}"));
                }
            }
            Op::PtrAdd => {
                let (p, idx) = (arg(0)?, arg(1)?);
                let pt = self.ty(p)?;
                let pointee = pt.pointee().cloned().unwrap_or(Type::U8);
                let Some(m) = mty(&pointee) else {
                    return self.e(format!("cannot index a pointer to {pointee}"));
                };
                let i64v = self.ext64(idx)?;
                let po = self.op(p)?;
                self.emit(format!(
                    "{r} = getelementptr inbounds {m}, ptr {po}, i64 {i64v}"
                ));
                if let (Some(rv), Some(o)) = (res, self.offs.get(p.index()).cloned().flatten()) {
                    let sz = pointee.size_bytes().unwrap_or(1);
                    let x = self.t();
                    self.emit(format!("{x} = mul i64 {i64v}, {sz}"));
                    let no = format!("%o{}", rv.0);
                    self.emit(format!("{no} = add i64 {o}, {x}"));
                    self.offs[rv.index()] = Some(no);
                }
            }
            Op::PtrCast => {
                let p = arg(0)?;
                let po = self.op(p)?;
                self.emit(format!("{r} = bitcast ptr {po} to ptr"));
                if let Some(rv) = res {
                    self.offs[rv.index()] = self.offs.get(p.index()).cloned().flatten();
                }
            }
            Op::Alloca { elem, count } => {
                let Some(m) = mty(elem) else {
                    return self.e(format!("cannot allocate {elem}"));
                };
                let al = elem.align_bytes().max(1);
                let _ = writeln!(
                    self.entry_text,
                    "  {r} = alloca {m}, i64 {count}, align {al}"
                );
                if let Some(rv) = res {
                    self.offs[rv.index()] = Some("0".into());
                    let bytes = elem.size_bytes().unwrap_or(0).saturating_mul(*count);
                    self.lens_bytes.insert(Origin::Alloca(i), bytes.to_string());
                }
            }
            Op::SharedAlloc { elem, count, .. } => {
                let off = self
                    .mi
                    .shared_offsets
                    .get(&(f.name.clone(), i))
                    .copied()
                    .unwrap_or(0);
                if !sig.gpu {
                    return self.e("shared_alloc outside a GPU function");
                }
                self.emit(format!("{r} = getelementptr i8, ptr %shbase, i64 {off}"));
                if let Some(rv) = res {
                    self.offs[rv.index()] = Some("0".into());
                    let bytes = elem.size_bytes().unwrap_or(0).saturating_mul(*count);
                    self.lens_bytes.insert(Origin::Shared(i), bytes.to_string());
                }
            }
            Op::DynShared { .. } => {
                let p = self.t();
                self.emit(format!("{p} = getelementptr i8, ptr %ctx, i64 {CTX_DYN}"));
                self.emit(format!("{r} = load ptr, ptr {p}, align 8"));
            }
            Op::ThreadIdx(dm) | Op::BlockIdx(dm) | Op::BlockDim(dm) | Op::GridDim(dm) => {
                let base = match &d.op {
                    Op::ThreadIdx(_) => CTX_TID,
                    Op::BlockIdx(_) => CTX_BID,
                    Op::BlockDim(_) => CTX_BDIM,
                    _ => CTX_GDIM,
                };
                let k = match dm {
                    Dim::X => 0,
                    Dim::Y => 1,
                    Dim::Z => 2,
                };
                let v = self.ctx_u32(base, k);
                self.emit(format!("{r} = add i32 {v}, 0"));
            }
            Op::LaneId => {
                let (tx, ty_, tz) = (
                    self.ctx_u32(CTX_TID, 0),
                    self.ctx_u32(CTX_TID, 1),
                    self.ctx_u32(CTX_TID, 2),
                );
                let (bx, by) = (self.ctx_u32(CTX_BDIM, 0), self.ctx_u32(CTX_BDIM, 1));
                let a = self.t();
                self.emit(format!("{a} = mul i32 {tz}, {by}"));
                let bq = self.t();
                self.emit(format!("{bq} = add i32 {a}, {ty_}"));
                let c = self.t();
                self.emit(format!("{c} = mul i32 {bq}, {bx}"));
                let lin = self.t();
                self.emit(format!("{lin} = add i32 {c}, {tx}"));
                self.emit(format!("{r} = and i32 {lin}, 31"));
            }
            Op::Barrier
            | Op::Shfl { .. }
            | Op::Vote(_)
            | Op::WarpSync
            | Op::ElectSync
            | Op::Redux(_)
            | Op::Match(_)
                if f.is_kernel() =>
            {
                let ops = d.args.iter().map(|&v| Ok((self.op(v)?, self.ty(v)?)));
                let ops = ops.collect::<LResult<Vec<_>>>()?;
                let l = self.label();
                let sp = warp::Suspend::new(i, &d.op, &ops, &r, rty.as_ref());
                let sp = sp.or_else(|m| self.e(m))?;
                for line in sp.up_to_suspend(i, &l) {
                    self.emit(line);
                }
                self.open(l);
                sp.after.into_iter().for_each(|line| self.emit(line));
            }
            Op::Fence(_) => self.emit("fence seq_cst"),
            Op::FenceAcqRel(_) => self.emit("fence acq_rel"),
            // A compiler-only fence: orders this thread's accesses, emits no instruction.
            Op::CompilerFence => self.emit("fence syncscope(\"singlethread\") seq_cst"),
            // `red` is an atomic whose old value nobody reads.
            Op::Atomic { op, .. } | Op::Red { op, .. } => {
                let r = if matches!(d.op, Op::Red { .. }) {
                    self.t()
                } else {
                    r.clone()
                };
                let (p, v) = (arg(0)?, arg(1)?);
                let t = self.ty(v)?;
                let tt = self.vt(&t)?;
                if !matches!(t, Type::Scalar(_)) {
                    return self.e(format!(
                        "`{}` on {t} (a packed atomic) is not supported on the CPU",
                        d.op.mnemonic()
                    ));
                }
                self.check_access(p, t.size_bytes().unwrap_or(1), i)?;
                let s = t.as_scalar().unwrap_or(ScalarType::U32);
                let name = match (op, s.is_float(), s.is_signed()) {
                    (AtomicOp::Add, true, _) => "fadd",
                    (AtomicOp::Sub, true, _) => "fsub",
                    (AtomicOp::Min, true, _) => "fmin",
                    (AtomicOp::Max, true, _) => "fmax",
                    (AtomicOp::Add, false, _) => "add",
                    (AtomicOp::Sub, false, _) => "sub",
                    (AtomicOp::Min, false, true) => "min",
                    (AtomicOp::Max, false, true) => "max",
                    (AtomicOp::Min, false, false) => "umin",
                    (AtomicOp::Max, false, false) => "umax",
                    (AtomicOp::And, _, _) => "and",
                    (AtomicOp::Or, _, _) => "or",
                    (AtomicOp::Xor, _, _) => "xor",
                    (AtomicOp::Exch, _, _) => "xchg",
                    (AtomicOp::Inc, _, _) => "uinc_wrap",
                    (AtomicOp::Dec, _, _) => "udec_wrap",
                };
                let (po, vo) = (self.op(p)?, self.op(v)?);
                self.emit(format!(
                    "{r} = atomicrmw {name} ptr {po}, {tt} {vo} seq_cst, align {}",
                    t.align_bytes()
                ));
            }
            Op::AtomicCas { .. } => {
                let (p, e, dsr) = (arg(0)?, arg(1)?, arg(2)?);
                let t = self.ty(e)?;
                if !t.is_int() {
                    return self.e(format!(
                        "atomic.cas on {t} is not supported on the CPU (integers only)"
                    ));
                }
                let tt = self.vt(&t)?;
                self.check_access(p, t.size_bytes().unwrap_or(1), i)?;
                let (po, eo, dso) = (self.op(p)?, self.op(e)?, self.op(dsr)?);
                let x = self.t();
                self.emit(format!(
                    "{x} = cmpxchg ptr {po}, {tt} {eo}, {tt} {dso} seq_cst seq_cst, align {}",
                    t.align_bytes()
                ));
                self.emit(format!("{r} = extractvalue {{ {tt}, i1 }} {x}, 0"));
            }
            Op::Call(name) => self.call(name, &d.args, &d.results, i)?,
            Op::Jump => {
                let t = d.targets.first().cloned().ok_or_else(|| LowerError {
                    function: f.name.clone(),
                    message: "jump without a target".into(),
                })?;
                let from = self.cur_label.clone();
                self.edge(&t, &from)?;
                let md = self.loop_md(b, t.block);
                self.emit(format!("br label %b{}{md}", t.block.0));
            }
            Op::Branch => {
                let c = self.op(arg(0)?)?;
                if d.targets.len() != 2 {
                    return self.e("br needs two targets");
                }
                let mut labels = Vec::new();
                let mut edges = Vec::new();
                for t in &d.targets {
                    if t.args.is_empty()
                        && f.blocks
                            .get(t.block.index())
                            .is_some_and(|bd| bd.params.is_empty())
                    {
                        let from = self.cur_label.clone();
                        self.edge(t, &from)?;
                        labels.push(format!("b{}", t.block.0));
                    } else {
                        let l = self.label();
                        labels.push(l.clone());
                        edges.push((l, t.clone()));
                    }
                }
                let md0 = if edges.is_empty() {
                    let a = self.loop_md(b, d.targets[0].block);
                    if a.is_empty() {
                        self.loop_md(b, d.targets[1].block)
                    } else {
                        a
                    }
                } else {
                    String::new()
                };
                self.emit(format!(
                    "br i1 {c}, label %{}, label %{}{md0}",
                    labels[0], labels[1]
                ));
                for (l, t) in edges {
                    self.open(l.clone());
                    self.edge(&t, &l)?;
                    let md = self.loop_md(b, t.block);
                    self.emit(format!("br label %b{}{md}", t.block.0));
                }
            }
            Op::Return => {
                if sig.multi_ret {
                    for (k, v) in d.args.iter().enumerate() {
                        let t = self.ty(*v)?;
                        let vo = self.op(*v)?;
                        let p = self.t();
                        self.emit(format!("{p} = getelementptr i64, ptr %rets, i64 {k}"));
                        if t.is_bool() {
                            let x = self.t();
                            self.emit(format!("{x} = zext i1 {vo} to i8"));
                            self.emit(format!("store i8 {x}, ptr {p}"));
                        } else {
                            let m = mty(&t).unwrap_or_else(|| "i64".into());
                            self.emit(format!("store {m} {vo}, ptr {p}"));
                        }
                    }
                    self.emit("ret void");
                } else if let Some(v) = d.args.first() {
                    let tt = self.vt(&self.ty(*v)?)?;
                    let vo = self.op(*v)?;
                    self.emit(format!("ret {tt} {vo}"));
                } else {
                    self.emit("ret void");
                }
            }
            Op::Unreachable => {
                let l = self.fail(ERR_UNREACHABLE, -1, "0", "0", i);
                self.emit(format!("br label %{l}"));
            }
            other => {
                return self.e(format!(
                    "`{}` cannot run on the CPU backend",
                    other.mnemonic()
                ));
            }
        }
        Ok(())
    }

    fn emit_prefetch(&mut self, addr: InstId, dist: i64) -> LResult<()> {
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

    fn conv(&mut self, how: &str, from: &str, v: &str, to: &str) -> String {
        let x = self.t();
        self.emit(format!("{x} = {how} {from} {v} to {to}"));
        x
    }

    /// Run `body` on float operands, widening f16/bf16 to f32 and narrowing the result into `r`.
    fn float_op(
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

    fn binary(
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

    fn unary(&mut self, op: UnOp, t: &Type, a: &str, r: &str) -> LResult<()> {
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

    fn cast(&mut self, from: &Type, to: &Type, a: &str, r: &str) -> LResult<()> {
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

    fn call(
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

/// What the lowering produced for one function.
#[derive(Clone, Debug)]
pub struct LoweredFn {
    pub name: String,
    /// Bounds checks emitted, and accesses left unchecked (pointer of unknown origin).
    pub checks: usize,
    pub unchecked: usize,
    pub has_slots: bool,
    pub has_block_runner: bool,
}

/// Lower the whole module (host functions, and kernels/device functions the CPU can run).
/// `cpu_kernels` names the kernels to lower; others are skipped.
pub fn lower_module(
    mi: &ModuleInfo<'_>,
    plans: &[FunctionPlan],
    triple: &str,
    datalayout: &str,
    cpu_kernels: &BTreeSet<String>,
) -> LResult<(String, Vec<LoweredFn>)> {
    let m = mi.m;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "; zyntax host lowering of module `{}`",
        m.name.replace('\n', " ")
    );
    let _ = writeln!(out, "target datalayout = \"{datalayout}\"");
    let _ = writeln!(out, "target triple = \"{triple}\"");
    let mut meta = Vec::new();
    let mut decls = BTreeSet::new();
    let mut lowered = Vec::new();
    let default_plans: Vec<FunctionPlan> = m.functions.iter().map(FunctionPlan::defaults).collect();
    // Device functions are lowered only when some CPU kernel may reach them.
    let mut needed: BTreeSet<String> = m
        .functions
        .iter()
        .filter(|f| !f.kind.is_gpu())
        .map(|f| f.name.clone())
        .collect();
    let mut work: Vec<String> = needed
        .iter()
        .cloned()
        .chain(cpu_kernels.iter().cloned())
        .collect();
    needed.extend(cpu_kernels.iter().cloned());
    while let Some(n) = work.pop() {
        if let Some(f) = m.function(&n) {
            for c in zyntax_opt::analysis::callees(f) {
                if needed.insert(c.clone()) {
                    work.push(c);
                }
            }
        }
    }
    for (fid, f) in m.functions.iter().enumerate() {
        if !needed.contains(&f.name) {
            continue;
        }
        let plan = plans
            .iter()
            .find(|p| p.name == f.name)
            .unwrap_or(&default_plans[fid]);
        let mut prefetch = BTreeMap::new();
        for s in &plan.prefetch {
            prefetch.insert(s.load, (s.addr, s.distance));
        }
        let mut fl = FnLower {
            mi,
            f,
            fid,
            plan,
            origins: zyntax_opt::analysis::pointer_origins(f),
            offs: Vec::new(),
            ops: Vec::new(),
            entry_text: String::new(),
            blocks_text: Vec::new(),
            cur: String::new(),
            cur_label: String::new(),
            tmp: 0,
            incoming: BTreeMap::new(),
            fails: String::new(),
            meta: &mut meta,
            decls: &mut decls,
            prefetch,
            pos: BTreeMap::new(),
            lens_bytes: BTreeMap::new(),
            checks: 0,
            unchecked: 0,
        };
        let coro = f.is_kernel() && cpu_kernels.contains(&f.name) && regions::has_suspend(f);
        let text = fl.lower_fn()?;
        let (checks, unchecked) = (fl.checks, fl.unchecked);
        if coro {
            out.push_str(&regions::to_coroutine(&text, &f.name));
            decls.extend(
                regions::DECLS
                    .iter()
                    .chain(&regions::RUNNER_DECLS)
                    .map(|d| d.to_string()),
            );
        } else {
            out.push_str(&text);
        }
        let sig = signature(f)?;
        let slots_ok = f
            .param_types()
            .iter()
            .chain(f.returns.iter())
            .all(|t| t.is_ptr() || matches!(t, Type::Scalar(_)));
        let mut lf = LoweredFn {
            name: f.name.clone(),
            checks,
            unchecked,
            has_slots: false,
            has_block_runner: false,
        };
        if slots_ok && !f.kind.is_gpu() {
            out.push_str(&slots_wrapper(f, &sig, &target_attrs(mi)));
            lf.has_slots = true;
        }
        if slots_ok && f.is_kernel() && cpu_kernels.contains(&f.name) {
            let mut pre = String::new();
            let parts = call_args(f, &sig, &mut pre);
            out.push_str(&if coro {
                regions::coro_block_runner(f, &target_attrs(mi), &pre, &parts, fid)
            } else {
                regions::block_runner(f, &sig, &target_attrs(mi), &pre, &parts)
            });
            lf.has_block_runner = true;
        }
        lowered.push(lf);
    }
    for d in &decls {
        let _ = writeln!(out, "{d}");
    }
    let _ = writeln!(out, "!0 = !{{!\"branch_weights\", i32 1, i32 1048575}}");
    let _ = writeln!(out, "!1 = !{{!\"llvm.loop.vectorize.enable\", i1 true}}");
    let _ = writeln!(out, "!2 = !{{!\"llvm.loop.unroll.disable\"}}");
    for md in meta {
        let _ = writeln!(out, "{md}");
    }
    Ok((out, lowered))
}

/// Load argument `k` of type `t` from the slot array `%args` (bool slots hold a byte).
fn load_slot(out: &mut String, k: usize, t: &Type, name: &str) {
    let _ = writeln!(out, "  %{name}.p = getelementptr i64, ptr %args, i64 {k}");
    if t.is_bool() {
        let _ = writeln!(out, "  %{name}.b = load i8, ptr %{name}.p");
        let _ = writeln!(out, "  %{name} = trunc i8 %{name}.b to i1");
    } else {
        let m = mty(t).unwrap_or_else(|| "i64".into());
        let _ = writeln!(out, "  %{name} = load {m}, ptr %{name}.p");
    }
}

fn call_args(f: &Function, sig: &Sig, out: &mut String) -> Vec<String> {
    let mut parts = Vec::new();
    for (k, t) in f.param_types().iter().enumerate() {
        load_slot(out, k, t, &format!("s{k}"));
        parts.push(format!("{} %s{k}", vty(t).unwrap_or_default()));
    }
    for k in &sig.ptr_params {
        let _ = writeln!(out, "  %l{k}.p = getelementptr i64, ptr %lens, i64 {k}");
        let _ = writeln!(out, "  %l{k} = load i64, ptr %l{k}.p");
        parts.push(format!("i64 %l{k}"));
    }
    parts
}

fn target_attrs(mi: &ModuleInfo<'_>) -> String {
    format!(
        "nounwind \"target-cpu\"=\"{}\" \"target-features\"=\"{}\"",
        mi.cpu, mi.features
    )
}

fn slots_wrapper(f: &Function, sig: &Sig, attrs: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "define void {}(ptr %args, ptr %lens, ptr %rets, ptr %err) {attrs} {{",
        gname(&format!("{}.zx_slots", f.name))
    );
    let _ = writeln!(out, "entry:");
    let mut parts = call_args(f, sig, &mut out);
    if sig.multi_ret {
        parts.push("ptr %rets".into());
    }
    parts.push("ptr %err".into());
    let call = format!("call {} {}({})", sig.ret, gname(&f.name), parts.join(", "));
    if f.returns.len() == 1 {
        let t = &f.returns[0];
        let _ = writeln!(out, "  %r = {call}");
        if t.is_bool() {
            let _ = writeln!(out, "  %rb = zext i1 %r to i8");
            let _ = writeln!(out, "  store i8 %rb, ptr %rets");
        } else {
            let _ = writeln!(out, "  store {} %r, ptr %rets", mty(t).unwrap_or_default());
        }
    } else {
        let _ = writeln!(out, "  {call}");
    }
    let _ = writeln!(out, "  ret void\n}}");
    out
}

/// Which HIR values feed which (used by tests and the report).
pub fn value_def_block(f: &Function, v: ValueId) -> Option<BlockId> {
    match f.values.get(v.index())?.def {
        ValueDef::Param(b, _) => Some(b),
        ValueDef::Result(i, _) => zyntax_opt::analysis::inst_blocks(f).get(&i).copied(),
    }
}

/// The effective LLVM pipeline for the module's plans: the strongest level wins
/// (per-function `optnone`/`optsize` attributes keep weaker levels weaker).
pub fn pipeline_for(plans: &[FunctionPlan]) -> (String, Option<&'static str>) {
    let rank = |l: OptLevel| match l {
        OptLevel::O0 => 0,
        OptLevel::Os => 1,
        OptLevel::O1 => 2,
        OptLevel::O2 => 3,
        OptLevel::O3 => 4,
        OptLevel::Olatency => 5,
    };
    let top = plans
        .iter()
        .map(|p| p.opt_level)
        .max_by_key(|l| rank(*l))
        .unwrap_or(OptLevel::O3);
    let base = match top {
        OptLevel::O0 => "default<O0>",
        OptLevel::Os => "default<Os>",
        OptLevel::O1 => "default<O1>",
        OptLevel::O2 => "default<O2>",
        OptLevel::O3 | OptLevel::Olatency => "default<O3>",
    };
    let latency = (top == OptLevel::Olatency).then_some(LATENCY_PIPELINE);
    (base.to_string(), latency)
}

/// Latency cleanup run after `default<O3>` for `Olatency` modules: scalar
/// replacement, redundancy elimination, vectorization with the loop hints, tail
/// calls and dead code, in the order that exposes the most for the next pass.
pub const LATENCY_PIPELINE: &str = "function(sroa,early-cse<memssa>,gvn,instcombine,loop-simplify,lcssa,loop-mssa(licm),loop-vectorize,slp-vectorizer,instcombine,simplifycfg,tailcallelim,adce)";
