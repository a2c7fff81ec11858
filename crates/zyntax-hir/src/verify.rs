//! The verifier: the gate before lowering. A module it accepts lowers to LLVM
//! IR that LLVM's verifier accepts and to PTX that `ptxas` accepts for every
//! target the module declares. It never panics, whatever the input (ids are
//! checked before any indexing), and it reports every problem it finds, each
//! as a [`Diagnostic`] naming function, block, instruction and source location.
//! Type rules report the first problem of each instruction; structure and
//! dominance problems are reported on their own, so one instruction may carry
//! several diagnostics.
//!
//! The full reference, with the reasons, is `docs/hir.md`. Invariants checked:
//!
//! **Module**
//! - function names are identifiers (`[A-Za-z_][A-Za-z0-9_]*`, not `_` alone,
//!   not starting with `__`, not a C runtime or libm symbol the backends call
//!   such as `memcpy` or `sinf`), at most 1024 bytes, unique;
//! - `ptx_version`, if set, is one LLVM 19 emits (6.0–6.5, 7.0–7.8, 8.0–8.5)
//!   and is at least the minimum of every arch a function is compiled for
//!   ([`crate::arch::min_ptx`]);
//! - globals (issue 12 item 7): identifier names unique among globals and
//!   functions, in `constant` or `global`, a numeric scalar or vector element,
//!   count ≥ 1, at most [`MAX_GLOBAL_BYTES`] each and [`MAX_CONSTANT_BYTES`]
//!   of constants in all, an initializer of one valid literal per lane or
//!   none; `global_addr` names one and gives its `ptr<space, elem>`.
//!
//! **Types**
//! - every type (returns, values, allocation elements and the pointers to
//!   them) nests at most [`crate::MAX_TYPE_DEPTH`] levels deep, checked first;
//!
//! **Function header**
//! - kernels return nothing; kernel parameters are scalars, vectors,
//!   `tensormap`s (only there) or pointers to `global`, `generic` or
//!   `constant` memory, 4 KiB in all;
//! - host functions use no fragment type anywhere; a host function with
//!   several return values returns each in 8 bytes or less (the CPU ABI's slots);
//! - kernel metadata: `max_threads` each ≥ 1, x, y ≤ 1024, z ≤ 64, product ≤ 1024;
//!   `min_blocks` in 1..=32 and only with `max_threads`; `max_registers` in
//!   24..=255 (`ptxas` raises smaller caps, a warning), and per compiled arch
//!   at least [`crate::arch::min_max_registers`] (26 on sm_70, 25 on sm_75,
//!   28 on sm_80+ for kernels reaching MMA, which ptxas rejects below); `shared_bytes` ≤ 227 KiB;
//!   static shared memory of the kernel (its `shared_alloc`s plus those of the
//!   device functions it calls) ≤ 48 KiB (`ptxas` rejects more);
//! - per arch it is compiled for (in [`crate::arch`], so [`check_arch`] covers
//!   it too): static + `shared_bytes` ≤ the arch's per-block maximum;
//!   `min_blocks` ≤ the arch's resident blocks per SM, and `min_blocks` × the
//!   block's threads rounded up to whole warps ≤ its resident threads per SM;
//! - arenas hold at most 2^24 entries each.
//!
//! **Structure**
//! - the layout is non-empty and names every block exactly once; every
//!   instruction sits in a placed block and every value is defined by a placed
//!   block or instruction (nothing lies outside the layout, so printing, which
//!   follows the layout, and [`Function::canonicalize`] drop nothing, and the
//!   entry block, `layout[0]`, cannot silently change);
//! - every placed instruction id exists and sits in exactly one block;
//! - every block is non-empty, ends in a terminator and has none before the end;
//! - every value is defined exactly once, and its [`ValueDef`] names where
//!   (block parameter `n` of its block, result `n` of its instruction);
//! - the entry block's parameters are the function's parameters; the entry
//!   block is not a branch target;
//! - `jump` has one target, `br` two, no other instruction has targets; each
//!   target is a block of the layout and gets as many arguments as it has
//!   parameters, of the same types; a `br` whose targets are one block passes
//!   both the same arguments; a block with parameters has a predecessor;
//! - `return` operands match the function's return types.
//!
//! **SSA**
//! - dominators are computed (Cooper–Harvey–Kennedy) over the blocks
//!   reachable from the entry; every use in a reachable block is dominated by
//!   its definition (in the same block: defined by an earlier instruction or a
//!   parameter);
//! - unreachable blocks are allowed and fully type-checked, but may only use
//!   values defined in the entry block or earlier in the same block (they are
//!   not dominated by anything else, and lowering emits them in layout order).
//!
//! **Types** (per op: the signatures the table's rows declare, checked by
//! [`crate::sig::check`], then the rules `check_op` adds by hand)
//! - value types are scalars, vectors (2, 4 or 8 lanes of a non-bool scalar;
//!   12..128 lanes by 4 as values only, for `wgmma` accumulators),
//!   pointers or fragments, never arrays; a pointee is a memory type (scalar,
//!   vector, pointer, array of ≥ 1 elements of a memory type, at most 2^40
//!   bytes); fragments: A/B of f16 or bf16 with a layout, accumulators of f32 or
//!   f16 without one;
//! - every op has its number of operands and results, with the types in
//!   `docs/hir.md` (e.g. binary operands and result share one scalar type;
//!   `rem`, `shl`, `shr` take integers; `and`/`or`/`xor` integers or bool; math
//!   unary ops floats; `cast` between numeric types or from bool, never to bool
//!   or pointers; `bitcast` between non-bool scalars/vectors of one size;
//!   constants fit their type);
//! - memory: loads and stores through pointers to non-array memory types, no
//!   stores to `constant`; `ptr_add` takes an integer index; `ptr_cast` keeps the
//!   address space or casts to or from `generic`; allocation counts ≥ 1 and
//!   sizes bounded (allocas ≤ 512 KiB per function in all, shared_alloc ≤ 48 KiB).
//!
//! **GPU**
//! - no GPU instruction in a host function;
//! - atomics go through pointers to `global`, `shared` or `generic` memory,
//!   with the value type equal to the pointee, and only the op/type
//!   combinations PTX has (table in `docs/hir.md`); `cas` on 32/64-bit integers;
//! - `shfl`: mask and lane `u32`, value a 32- or 64-bit scalar, width a power of
//!   two in 1..=32; `vote`: mask `u32`, predicate bool; `match`: 32/64-bit integers;
//! - MMA: fragment kinds, shapes and element types agree, loads use the A/B
//!   fragment's layout, memory operands point to the fragment's element type in
//!   `global`/`shared`/`generic`, `ldm` is `u32`;
//! - `cp.async`: `ptr<shared>` destination, `ptr<global>` source, 4, 8 or 16
//!   bytes, `cg` only with 16; `cp.async.wait n` with n ≤ 31;
//! - calls: the callee exists; host calls host, GPU functions call device
//!   functions; kernels are never called; arguments and results match.
//!   Recursion is allowed (PTX supports it).
//! - `no_alloc` functions use bounded stack: the `alloca`s they reach along
//!   their deepest call chain total at most [`NO_ALLOC_STACK_LIMIT`] bytes
//!   (every site is named otherwise), and no recursion is reachable from them.
//! - every GPU function passes [`crate::arch`]'s gating table for each arch it
//!   is compiled for: a kernel's `arch` if set, else the module's targets; a
//!   device function every arch the module is compiled for (the targets plus
//!   every kernel's `arch`: each arch's PTX holds every device function).
//!
//! Not checked statically: a `barrier` in divergent control flow (the
//! interpreter reports it at run time), memory bounds, data races.

use std::collections::HashMap;

use crate::arch;
use crate::entities::{BlockId, InstId, ValueId};
use crate::error::{Diagnostic, Loc, VerifyError};
use crate::ir::{Function, FunctionKind, InstData, KernelInfo, Module, ValueDef};
use crate::op::BulkRedOp;
use crate::op::{AtomicOp, CacheHint, CmpOp, ConstValue, Op};
use crate::printer::print_inst;
use crate::target::Arch;
use crate::types::{AddrSpace, FragKind, FragType, ScalarType, Type};

/// Largest arena (values, blocks or instructions) the verifier accepts.
pub const MAX_ARENA: usize = 1 << 24;
/// Largest `alloca` in bytes (CUDA's local memory per thread).
pub const MAX_ALLOCA_BYTES: u64 = 512 * 1024;
/// Largest static shared memory of a kernel in bytes (`ptxas` limit).
pub const MAX_STATIC_SHARED_BYTES: u64 = 48 * 1024;
/// Largest `shared_bytes` of a kernel (sm_90's per-block maximum).
pub const MAX_SHARED_BYTES: u64 = 227 * 1024;
/// Largest total size of a kernel's parameters (PTX's 4 KiB parameter space).
pub const MAX_KERNEL_PARAM_BYTES: u64 = 4096;
/// Largest memory type in bytes.
const MAX_TYPE_BYTES: u64 = 1 << 40;

/// Verify a whole module.
pub fn verify_module(m: &Module) -> Result<(), VerifyError> {
    let mut diags = Vec::new();
    check_module_header(m, &mut diags);
    let archs = compile_archs(m);
    for (n, f) in m.functions.iter().enumerate() {
        verify_function_into(m, f, &mut diags);
        if f.kind.is_gpu() {
            arch::check_function(m, f, &archs[n], m.ptx_version, &mut diags);
        }
    }
    finish(diags)
}

/// Verify one function in the context of its module (including the arch
/// gating for the archs it is compiled for, but not module-wide rules such as
/// unique names).
pub fn verify_function(m: &Module, f: &Function) -> Result<(), VerifyError> {
    let mut diags = Vec::new();
    verify_function_into(m, f, &mut diags);
    if f.kind.is_gpu() {
        let archs = compile_archs(m);
        let n = m.functions.iter().position(|g| std::ptr::eq(g, f));
        let mine = match (n, &f.kind) {
            (Some(n), _) => archs[n].clone(),
            (None, FunctionKind::Device) => module_archs(m),
            (None, _) => own_archs(m, f),
        };
        arch::check_function(m, f, &mine, m.ptx_version, &mut diags);
    }
    finish(diags)
}

/// The module as `.zir` text with each diagnostic printed as a `; error:`
/// comment under what it is about (module, function header, block label or
/// instruction), Cranelift style. The result still parses.
pub fn print_with_errors(m: &Module, e: &VerifyError) -> String {
    use crate::printer::{print_function_header, print_module};
    use std::fmt::Write;
    let note = |out: &mut String, indent: &str, d: &Diagnostic| {
        for (n, line) in d.message.lines().enumerate() {
            let lead = if n == 0 { "; error: " } else { ";        " };
            let _ = writeln!(out, "{indent}{lead}{line}");
        }
    };
    let mut out = String::new();
    // The module line, then module-level errors.
    let text = print_module(&Module {
        functions: Vec::new(),
        ..m.clone()
    });
    out.push_str(text.trim_end());
    out.push('\n');
    for d in e.diagnostics.iter().filter(|d| d.function.is_empty()) {
        note(&mut out, "", d);
    }
    for f in &m.functions {
        let mine: Vec<&Diagnostic> = e
            .diagnostics
            .iter()
            .filter(|d| d.function == f.name && !f.name.is_empty())
            .collect();
        let _ = writeln!(out, "\n{} {{", print_function_header(f));
        for d in mine
            .iter()
            .filter(|d| d.block.is_none() && d.inst.is_none())
        {
            note(&mut out, "", d);
        }
        for b in &f.layout {
            let Some(bd) = f.blocks.get(b.index()) else {
                continue;
            };
            let params: Vec<String> = bd
                .params
                .iter()
                .map(|v| match f.values.get(v.index()) {
                    Some(vd) => format!("{v}: {}", vd.ty),
                    None => format!("{v}: <invalid>"),
                })
                .collect();
            if params.is_empty() {
                let _ = writeln!(out, "{b}:");
            } else {
                let _ = writeln!(out, "{b}({}):", params.join(", "));
            }
            for d in mine
                .iter()
                .filter(|d| d.block == Some(*b) && d.inst.is_none())
            {
                note(&mut out, "    ", d);
            }
            for i in &bd.insts {
                let _ = writeln!(out, "    {}", print_inst(f, *i));
                for d in mine
                    .iter()
                    .filter(|d| d.block == Some(*b) && d.inst == Some(*i))
                {
                    note(&mut out, "    ", d);
                }
            }
        }
        out.push_str("}\n");
    }
    out
}

/// Re-exported for callers that compile for an arch the module does not list.
pub use crate::arch::check_arch;

fn finish(diagnostics: Vec<Diagnostic>) -> Result<(), VerifyError> {
    if diagnostics.is_empty() {
        Ok(())
    } else {
        Err(VerifyError { diagnostics })
    }
}

// ------------------------------------------------------------------ module

fn check_module_header(m: &Module, diags: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for f in &m.functions {
        if let Some(msg) = name_problem(&f.name) {
            diags.push(fn_diag(f, msg));
        }
        let count = seen.entry(f.name.as_str()).or_insert(0);
        *count += 1;
        if *count == 2 {
            diags.push(fn_diag(
                f,
                format!("function name @{} is defined more than once", f.name),
            ));
        }
    }
    check_globals(m, diags);
    if let Some(v) = m.ptx_version {
        if !arch::ptx_supported(v) {
            diags.push(arch::module_diag(format!(
                "ptx({v}) is not a PTX version LLVM 19 can emit (6.0-6.5, 7.0-7.8, 8.0-8.5)"
            )));
        }
        for a in module_archs(m) {
            arch::check_ptx_for(m, a, diags);
        }
    }
}

/// Constant memory of a module (`__constant__` bank 0): 64 KiB.
pub const MAX_CONSTANT_BYTES: u64 = 64 * 1024;
/// The largest module global (`__device__` arrays beyond this belong in allocations).
pub const MAX_GLOBAL_BYTES: u64 = 1 << 30;

/// Module globals: identifier names unique among globals and functions, a
/// numeric scalar or vector element, a count of at least one, an initializer
/// of exactly one literal per lane (or none), and at most 64 KiB of constants.
fn check_globals(m: &Module, diags: &mut Vec<Diagnostic>) {
    let mut constant_bytes = 0u64;
    for (n, g) in m.globals.iter().enumerate() {
        let mut bad =
            |msg: String| diags.push(arch::module_diag(format!("global @{}: {msg}", g.name)));
        if let Some(msg) = name_problem(&g.name) {
            bad(msg.replace("function name", "name"));
        }
        if m.globals[..n].iter().any(|o| o.name == g.name) {
            bad("defined more than once".into());
        }
        if m.function(&g.name).is_some() {
            bad("has the name of a function of the module".into());
        }
        if !matches!(g.space, AddrSpace::Constant | AddrSpace::Global) {
            bad(format!(
                "lives in `constant` or `global`, not `{}`",
                g.space
            ));
        }
        let lane = match &g.elem {
            Type::Scalar(s) | Type::Vector(s, _) if !s.is_bool() => *s,
            other => {
                bad(format!(
                    "element type {other} is not a numeric scalar or vector"
                ));
                continue;
            }
        };
        if g.count == 0 {
            bad("has no elements (count 0)".into());
        }
        let Some(bytes) = g.size_bytes().filter(|b| *b <= MAX_GLOBAL_BYTES) else {
            bad(format!("{} elements of {} is too large", g.count, g.elem));
            continue;
        };
        if g.space == AddrSpace::Constant {
            constant_bytes += bytes;
        }
        if !g.init.is_empty() && g.init.len() as u64 != g.lanes() {
            bad(format!(
                "initializer has {} literals, but {} x {} has {} lanes",
                g.init.len(),
                g.count,
                g.elem,
                g.lanes()
            ));
        }
        if let Some(e) = g
            .init
            .iter()
            .find_map(|c| check_const(*c, &Type::Scalar(lane)).err())
        {
            bad(format!("initializer: {e}"));
        }
    }
    if constant_bytes > MAX_CONSTANT_BYTES {
        diags.push(arch::module_diag(format!(
            "constant globals take {constant_bytes} bytes, more than the {MAX_CONSTANT_BYTES} of constant memory"
        )));
    }
}

/// Symbols the backends call implicitly (LLVM lowers memory intrinsics and
/// math to them, the CUDA runtime provides `vprintf`/`malloc`); a function of
/// that name would silently replace them.
const RESERVED_NAMES: &[&str] = &[
    "main", "memcpy", "memmove", "memset", "memcmp", "malloc", "free", "calloc", "realloc",
    "abort", "exit", "printf", "vprintf", "puts", "sqrt", "sqrtf", "exp", "expf", "exp2", "exp2f",
    "log", "logf", "log2", "log2f", "sin", "sinf", "cos", "cosf", "tanh", "tanhf", "floor",
    "floorf", "ceil", "ceilf", "fma", "fmaf", "fmin", "fminf", "fmax", "fmaxf", "fabs", "fabsf",
    "pow", "powf", "fmod", "fmodf",
];

fn name_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let ok_first = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let ok_rest = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok_first || !ok_rest || name == "_" {
        return Some(format!(
            "function name {name:?} is not an identifier ([A-Za-z_][A-Za-z0-9_]*, not `_` alone)"
        ));
    }
    if name.len() > 1024 {
        return Some("function name is longer than 1024 bytes".into());
    }
    if name.starts_with("__") {
        return Some(format!(
            "function name @{name} is reserved (names starting with `__` belong to the C runtime and libdevice)"
        ));
    }
    if RESERVED_NAMES.contains(&name) {
        return Some(format!(
            "function name @{name} is reserved: the backends call the C runtime or libm function of that name"
        ));
    }
    None
}

/// For each function, the archs it is compiled for: a kernel its own `arch`
/// or else the module's targets; a device function every arch the module is
/// compiled for (targets plus every kernel's `arch`), because the PTX of each
/// arch holds every device function.
fn compile_archs(m: &Module) -> Vec<Vec<Arch>> {
    m.functions
        .iter()
        .map(|f| match f.kind {
            FunctionKind::Device => module_archs(m),
            _ => own_archs(m, f),
        })
        .collect()
}

/// Every arch the module is compiled for: its targets and the kernels' `arch`.
fn module_archs(m: &Module) -> Vec<Arch> {
    let mut all = m.targets.clone();
    all.extend(m.kernels().filter_map(|k| k.kind.kernel_info()?.arch));
    all.sort();
    all.dedup();
    all
}

fn own_archs(m: &Module, f: &Function) -> Vec<Arch> {
    match f.kind.kernel_info().and_then(|k| k.arch) {
        Some(a) => vec![a],
        None => {
            let mut t = m.targets.clone();
            t.sort();
            t.dedup();
            t
        }
    }
}

/// Indices of the functions reachable through calls from function `start` (excluding it unless recursive).
fn reachable_callees(m: &Module, index: &HashMap<&str, usize>, start: usize) -> Vec<usize> {
    let mut seen = vec![false; m.functions.len()];
    let mut stack = vec![start];
    let mut out = Vec::new();
    while let Some(n) = stack.pop() {
        for callee in callees(&m.functions[n]) {
            if let Some(&c) = index.get(callee) {
                if !seen[c] {
                    seen[c] = true;
                    out.push(c);
                    stack.push(c);
                }
            }
        }
    }
    out
}

/// Names called by placed instructions of `f`.
fn callees(f: &Function) -> impl Iterator<Item = &str> {
    placed_insts(f).filter_map(|d| match &d.op {
        Op::Call(name) => Some(name.as_str()),
        _ => None,
    })
}

fn placed_insts(f: &Function) -> impl Iterator<Item = &InstData> {
    f.layout
        .iter()
        .filter_map(|b| f.blocks.get(b.index()))
        .flat_map(|bd| bd.insts.iter())
        .filter_map(|i| f.insts.get(i.index()))
}

// ------------------------------------------------------------------ diagnostics

fn fn_diag(f: &Function, message: String) -> Diagnostic {
    Diagnostic {
        function: f.name.clone(),
        block: None,
        inst: None,
        inst_text: None,
        loc: f.loc.clone(),
        message,
    }
}

struct Ctx<'a> {
    m: &'a Module,
    f: &'a Function,
    diags: &'a mut Vec<Diagnostic>,
    /// Where each value is defined: (block, position); params at 0, inst k at k+1.
    def_site: Vec<Option<(BlockId, usize)>>,
    /// Position of each block in the layout, if placed.
    layout_pos: Vec<Option<usize>>,
}

impl Ctx<'_> {
    fn func_err(&mut self, message: impl Into<String>) {
        let d = fn_diag(self.f, message.into());
        self.diags.push(d);
    }
    fn block_err(&mut self, b: BlockId, message: impl Into<String>) {
        let loc = self.block_loc(b);
        self.diags.push(Diagnostic {
            function: self.f.name.clone(),
            block: Some(b),
            inst: None,
            inst_text: None,
            loc,
            message: message.into(),
        });
    }
    fn inst_err(&mut self, b: BlockId, i: InstId, message: impl Into<String>) {
        let loc = self.f.insts.get(i.index()).and_then(|d| d.loc.clone());
        self.diags.push(Diagnostic {
            function: self.f.name.clone(),
            block: Some(b),
            inst: Some(i),
            inst_text: Some(print_inst(self.f, i)),
            loc: loc.or_else(|| self.f.loc.clone()),
            message: message.into(),
        });
    }
    /// A block's location: that of its first instruction, else the function's.
    fn block_loc(&self, b: BlockId) -> Option<Loc> {
        self.f
            .blocks
            .get(b.index())
            .and_then(|bd| bd.insts.first())
            .and_then(|i| self.f.insts.get(i.index()))
            .and_then(|d| d.loc.clone())
            .or_else(|| self.f.loc.clone())
    }
    fn ty(&self, v: ValueId) -> Option<&Type> {
        self.f.values.get(v.index()).map(|d| &d.ty)
    }
}

// ------------------------------------------------------------------ function

fn verify_function_into(m: &Module, f: &Function, diags: &mut Vec<Diagnostic>) {
    let mut cx = Ctx {
        m,
        f,
        diags,
        def_site: Vec::new(),
        layout_pos: Vec::new(),
    };
    for (what, n) in [
        ("values", f.values.len()),
        ("blocks", f.blocks.len()),
        ("instructions", f.insts.len()),
        ("layout entries", f.layout.len()),
    ] {
        if n > MAX_ARENA {
            cx.func_err(format!("too many {what}: {n} (at most {MAX_ARENA})"));
            return;
        }
    }
    if !check_type_depths(&mut cx) {
        return;
    }
    check_header(&mut cx);
    if f.layout.is_empty() {
        cx.func_err("function has no blocks (the layout is empty)");
        return;
    }
    check_layout(&mut cx);
    check_defs(&mut cx);
    check_entry(&mut cx);
    check_blocks(&mut cx);
    check_value_types(&mut cx);
    check_insts(&mut cx);
    check_dominance(&mut cx);
    check_no_alloc(&mut cx);
    check_alloca_total(&mut cx);
}

/// Every type in the function nests at most [`crate::MAX_TYPE_DEPTH`] deep;
/// checked first (without recursion) so that the other checks, which recurse
/// over types, are safe. Returns whether they all do.
fn check_type_depths(cx: &mut Ctx) -> bool {
    let f = cx.f;
    let mut ok = true;
    for (k, t) in f.returns.iter().enumerate() {
        if let Err(m) = t.check_depth() {
            cx.func_err(format!("return type {k}: {m}"));
            ok = false;
        }
    }
    for (k, d) in f.values.iter().enumerate() {
        if let Err(m) = d.ty.check_depth() {
            cx.func_err(format!("type of v{k}: {m}"));
            ok = false;
        }
    }
    for (k, d) in f.insts.iter().enumerate() {
        if let Op::Alloca { elem, .. } | Op::SharedAlloc { elem, .. } | Op::DynShared { elem, .. } =
            &d.op
        {
            // The result is a pointer to `elem`, one level deeper.
            let d = elem.depth();
            if d >= u64::from(crate::MAX_TYPE_DEPTH) {
                cx.func_err(format!(
                    "element type of inst{k} nests {d} levels deep; a pointer to it would exceed the limit of {}",
                    crate::MAX_TYPE_DEPTH
                ));
                ok = false;
            }
        }
    }
    ok
}

/// Each `alloca` is bounded on its own (in `check_op`); their sum must fit too.
fn check_alloca_total(cx: &mut Ctx) {
    let total = placed_insts(cx.f)
        .filter_map(|d| match &d.op {
            Op::Alloca { elem, count } => elem.size_bytes().map(|s| s.saturating_mul(*count)),
            _ => None,
        })
        .fold(0u64, u64::saturating_add);
    if total > MAX_ALLOCA_BYTES {
        cx.func_err(format!(
            "the allocas of this function take {total} bytes; at most {MAX_ALLOCA_BYTES} in all (CUDA's local memory per thread)"
        ));
    }
}

fn check_header(cx: &mut Ctx) {
    let f = cx.f;
    for t in &f.returns {
        if *t == Type::TensorMap {
            cx.func_err(format!("return type {t}: {TENSORMAP_PLACE}"));
        } else if let Some(msg) = value_type_problem(t) {
            cx.func_err(format!("return type {t}: {msg}"));
        }
    }
    match &f.kind {
        FunctionKind::Kernel(info) => {
            if !f.returns.is_empty() {
                cx.func_err("a kernel returns nothing; write results through pointers");
            }
            check_kernel_info(cx, info);
        }
        FunctionKind::Host => {
            if f.returns.iter().any(mentions_frag) {
                cx.func_err("host functions cannot use fragment types");
            }
            // The CPU ABI returns several values through 8-byte slots.
            if f.returns.len() > 1 {
                for t in &f.returns {
                    if t.size_bytes().is_some_and(|b| b > 8) {
                        cx.func_err(format!(
                            "return type {t} is larger than 8 bytes; a host function returning several values returns each in an 8-byte slot"
                        ));
                    }
                }
            }
        }
        FunctionKind::Device => {}
    }
}

fn check_kernel_info(cx: &mut Ctx, k: &KernelInfo) {
    // issue 12: the exact block shape (`.reqntid`) obeys the same limits and
    // must fit a declared upper bound.
    if let Some([x, y, z]) = k.exact_threads {
        let n = u64::from(x) * u64::from(y) * u64::from(z);
        if n == 0 || x > 1024 || y > 1024 || z > 64 || n > 1024 {
            cx.func_err(format!(
                "exact_threads({x}, {y}, {z}): every dimension at least 1, x and y at most 1024, z at most 64, at most 1024 threads"
            ));
        } else if k.max_threads.is_some() {
            // ptxas: "Conflicting directives: .maxntid and .reqntid cannot both be specified".
            cx.func_err(format!(
                "exact_threads({x}, {y}, {z}) and max_threads cannot both be declared (the exact shape is also the bound)"
            ));
        }
    }
    // issue 13: `.reqnctapercluster`; the hardware's largest cluster is 16
    // blocks (above 8 only with the runtime's non-portable opt-in).
    if let Some([x, y, z]) = k.cluster {
        let n = u64::from(x) * u64::from(y) * u64::from(z);
        if n == 0 || n > 16 {
            cx.func_err(format!(
                "cluster({x}, {y}, {z}): every dimension at least 1 and at most 16 blocks per cluster, got {n}"
            ));
        }
    }
    if let Some([x, y, z]) = k.max_threads {
        if x == 0 || y == 0 || z == 0 {
            cx.func_err(format!(
                "max_threads({x}, {y}, {z}): every dimension must be at least 1"
            ));
        } else if x > 1024 || y > 1024 || z > 64 {
            cx.func_err(format!(
                "max_threads({x}, {y}, {z}): x and y are at most 1024 and z at most 64"
            ));
        } else if u64::from(x) * u64::from(y) * u64::from(z) > 1024 {
            cx.func_err(format!(
                "max_threads({x}, {y}, {z}): a block has at most 1024 threads, this allows {}",
                u64::from(x) * u64::from(y) * u64::from(z)
            ));
        }
    }
    if let Some(n) = k.min_blocks {
        if k.max_threads.is_none() && k.exact_threads.is_none() {
            cx.func_err("min_blocks needs max_threads or exact_threads (PTX .minnctapersm requires .maxntid or .reqntid)");
        }
        if !(1..=32).contains(&n) {
            cx.func_err(format!("min_blocks({n}) must be in 1..=32"));
        }
    }
    if let Some(n) = k.max_registers {
        if !(arch::MIN_MAX_REGISTERS..=255).contains(&n) {
            cx.func_err(format!(
                "max_registers({n}) must be in {}..=255 (ptxas raises smaller caps to {})",
                arch::MIN_MAX_REGISTERS,
                arch::MIN_MAX_REGISTERS
            ));
        }
    }
    let dynamic = u64::from(k.shared_bytes);
    if dynamic > MAX_SHARED_BYTES {
        cx.func_err(format!(
            "shared_bytes({dynamic}) exceeds the largest per-block shared memory of any target ({MAX_SHARED_BYTES} bytes)"
        ));
    }
    let static_bytes = kernel_static_shared(cx.m, cx.f);
    if static_bytes > MAX_STATIC_SHARED_BYTES {
        cx.func_err(format!(
            "static shared memory of this kernel and the device functions it calls is {static_bytes} bytes; at most {MAX_STATIC_SHARED_BYTES} (use dyn_shared for more)"
        ));
    }
    // Per-arch limits (shared memory, occupancy) are checked in `arch`, so
    // that `check_arch` covers archs the module does not list.
}

/// Static shared memory of a kernel: its `shared_alloc`s plus those of every function it reaches.
pub(crate) fn kernel_static_shared(m: &Module, f: &Function) -> u64 {
    let (me, reached) = reached_from(m, f);
    let mut total = own_static_shared(f);
    for n in reached {
        if Some(n) != me {
            total = total.saturating_add(own_static_shared(&m.functions[n]));
        }
    }
    total
}

/// Whether kernel `f` (with `m`: or a function of `m` it calls) uses
/// `grid_sync`, so the runtime must launch it cooperatively (h13-cluster).
pub fn uses_grid_sync(m: Option<&Module>, f: &Function) -> bool {
    let is_sync = |op: &Op| matches!(op, Op::GridSync);
    match m {
        Some(m) => reaches_op(m, f, is_sync),
        None => placed_insts(f).any(|d| is_sync(&d.op)),
    }
}

/// Whether `f` or a function it reaches through calls has a placed
/// instruction satisfying `pred`.
pub(crate) fn reaches_op(m: &Module, f: &Function, pred: impl Fn(&Op) -> bool) -> bool {
    let (_, reached) = reached_from(m, f);
    std::iter::once(f)
        .chain(reached.iter().map(|&n| &m.functions[n]))
        .any(|g| placed_insts(g).any(|d| pred(&d.op)))
}

/// The largest `value` of an instruction placed in `f` or a function it reaches (0 if none).
pub(crate) fn max_over_reached(
    m: &Module,
    f: &Function,
    value: impl Fn(&Function, &InstData) -> u32,
) -> u32 {
    let (_, reached) = reached_from(m, f);
    std::iter::once(f)
        .chain(reached.iter().map(|&n| &m.functions[n]))
        .flat_map(|g| placed_insts(g).map(move |d| (g, d)))
        .map(|(g, d)| value(g, d))
        .max()
        .unwrap_or(0)
}

/// `f`'s index in the module, if it is there, and the indices of the functions it reaches.
fn reached_from(m: &Module, f: &Function) -> (Option<usize>, Vec<usize>) {
    let index: HashMap<&str, usize> = m
        .functions
        .iter()
        .enumerate()
        .map(|(n, g)| (g.name.as_str(), n))
        .collect();
    let me = m.functions.iter().position(|g| std::ptr::eq(g, f));
    let reached = match me {
        Some(n) => reachable_callees(m, &index, n),
        None => {
            // Not in the module: follow its direct callees.
            let mut out = Vec::new();
            for c in callees(f) {
                if let Some(&n) = index.get(c) {
                    out.push(n);
                    out.extend(reachable_callees(m, &index, n));
                }
            }
            out.sort_unstable();
            out.dedup();
            out
        }
    };
    (me, reached)
}

fn own_static_shared(f: &Function) -> u64 {
    placed_insts(f)
        .filter_map(|d| match &d.op {
            Op::SharedAlloc { elem, count, .. } => {
                elem.size_bytes().map(|s| s.saturating_mul(*count))
            }
            _ => None,
        })
        .fold(0u64, u64::saturating_add)
}

fn check_layout(cx: &mut Ctx) {
    let f = cx.f;
    cx.layout_pos = vec![None; f.blocks.len()];
    for (n, b) in f.layout.iter().enumerate() {
        if !f.has_block(*b) {
            cx.func_err(format!(
                "layout entry {n} names {b}, which does not exist ({} blocks)",
                f.blocks.len()
            ));
        } else if cx.layout_pos[b.index()].is_some() {
            cx.block_err(*b, format!("{b} appears more than once in the layout"));
        } else {
            cx.layout_pos[b.index()] = Some(n);
        }
    }
}

/// Placed blocks in layout order (each once, existing).
fn placed_blocks(cx: &Ctx) -> Vec<BlockId> {
    cx.f.layout
        .iter()
        .enumerate()
        .filter(|(n, b)| cx.layout_pos.get(b.index()).copied().flatten() == Some(*n))
        .map(|(_, b)| *b)
        .collect()
}

fn check_defs(cx: &mut Ctx) {
    let f = cx.f;
    cx.def_site = vec![None; f.values.len()];
    let mut inst_site: Vec<Option<BlockId>> = vec![None; f.insts.len()];
    for b in placed_blocks(cx) {
        let bd = &f.blocks[b.index()];
        for (n, v) in bd.params.iter().enumerate() {
            let Some(vd) = f.values.get(v.index()) else {
                cx.block_err(
                    b,
                    format!(
                        "parameter {n} is {v}, which does not exist ({} values)",
                        f.values.len()
                    ),
                );
                continue;
            };
            if cx.def_site[v.index()].is_some() {
                cx.block_err(b, format!("{v} is defined more than once"));
                continue;
            }
            cx.def_site[v.index()] = Some((b, 0));
            if vd.def != ValueDef::Param(b, n as u32) {
                cx.block_err(
                    b,
                    format!(
                        "{v} is parameter {n} of {b} but its definition says {}",
                        def_text(vd.def)
                    ),
                );
            }
        }
        for (k, i) in bd.insts.iter().enumerate() {
            let Some(d) = f.insts.get(i.index()) else {
                cx.block_err(
                    b,
                    format!(
                        "position {k} holds {i}, which does not exist ({} instructions)",
                        f.insts.len()
                    ),
                );
                continue;
            };
            if let Some(other) = inst_site[i.index()] {
                cx.inst_err(
                    b,
                    *i,
                    format!("{i} is placed more than once (also in {other})"),
                );
                continue;
            }
            inst_site[i.index()] = Some(b);
            for (n, v) in d.results.iter().enumerate() {
                let Some(vd) = f.values.get(v.index()) else {
                    cx.inst_err(
                        b,
                        *i,
                        format!(
                            "result {n} is {v}, which does not exist ({} values)",
                            f.values.len()
                        ),
                    );
                    continue;
                };
                if cx.def_site[v.index()].is_some() {
                    cx.inst_err(b, *i, format!("{v} is defined more than once"));
                    continue;
                }
                cx.def_site[v.index()] = Some((b, k + 1));
                if vd.def != ValueDef::Result(*i, n as u32) {
                    cx.inst_err(
                        b,
                        *i,
                        format!(
                            "{v} is result {n} of {i} but its definition says {}",
                            def_text(vd.def)
                        ),
                    );
                }
            }
        }
    }
    check_nothing_unplaced(cx, &inst_site);
}

/// Every block is in the layout, every instruction in a placed block and
/// every value defined by one: the `.zir` text prints only what the layout
/// reaches, and the entry block is `layout[0]`, so anything left outside
/// would be dropped by a print/parse round trip (a layout that omits block0
/// silently turned a kernel's parameters into none).
fn check_nothing_unplaced(cx: &mut Ctx, inst_site: &[Option<BlockId>]) {
    let f = cx.f;
    fn listed(ids: &[String]) -> String {
        const SHOWN: usize = 4;
        let mut s = ids[..ids.len().min(SHOWN)].join(", ");
        if ids.len() > SHOWN {
            s.push_str(&format!(" and {} more", ids.len() - SHOWN));
        }
        s
    }
    let blocks: Vec<String> = (0..f.blocks.len())
        .filter(|&k| cx.layout_pos.get(k).copied().flatten().is_none())
        .map(|k| BlockId::from_index(k).to_string())
        .collect();
    if !blocks.is_empty() {
        cx.func_err(format!(
            "{} not in the layout (of {} blocks): every block must be placed, \
             since the entry block is the layout's first and printing drops what it omits",
            listed(&blocks),
            f.blocks.len()
        ));
    }
    let insts: Vec<String> = (0..f.insts.len())
        .filter(|&k| inst_site[k].is_none())
        .map(|k| InstId::from_index(k).to_string())
        .collect();
    if !insts.is_empty() {
        cx.func_err(format!(
            "{} not placed in any block of the layout (of {} instructions)",
            listed(&insts),
            f.insts.len()
        ));
    }
    let values: Vec<String> = (0..f.values.len())
        .filter(|&k| cx.def_site[k].is_none())
        .map(|k| ValueId::from_index(k).to_string())
        .collect();
    if !values.is_empty() {
        cx.func_err(format!(
            "{} defined by no placed block or instruction (of {} values)",
            listed(&values),
            f.values.len()
        ));
    }
}

fn def_text(d: ValueDef) -> String {
    match d {
        ValueDef::Param(b, n) => format!("parameter {n} of {b}"),
        ValueDef::Result(i, n) => format!("result {n} of {i}"),
    }
}

fn check_entry(cx: &mut Ctx) {
    let f = cx.f;
    let Some(entry) = f.entry().filter(|b| f.has_block(*b)) else {
        return;
    };
    let params = f.blocks[entry.index()].params.clone();
    if f.is_kernel() {
        let bytes: u64 = params
            .iter()
            .filter_map(|v| {
                cx.ty(*v).and_then(|t| match t {
                    Type::TensorMap => Some(crate::tensormap::TENSORMAP_BYTES as u64),
                    t => t.size_bytes(),
                })
            })
            .fold(0, u64::saturating_add);
        if bytes > MAX_KERNEL_PARAM_BYTES {
            cx.block_err(
                entry,
                format!(
                    "kernel parameters take {bytes} bytes; PTX allows at most {MAX_KERNEL_PARAM_BYTES} (pass a pointer to a struct in memory)"
                ),
            );
        }
    }
    for v in params {
        let Some(t) = cx.ty(v).cloned() else { continue };
        match &f.kind {
            FunctionKind::Kernel(_) => {
                let ok = match &t {
                    Type::Scalar(_) | Type::Vector(..) | Type::TensorMap => true,
                    Type::Ptr(space, _) => matches!(
                        space,
                        AddrSpace::Global | AddrSpace::Generic | AddrSpace::Constant
                    ),
                    _ => false,
                };
                if !ok {
                    cx.block_err(
                        entry,
                        format!(
                            "kernel parameter {v} has type {t}; kernel parameters are scalars, vectors, tensormaps or pointers to global, generic or constant memory"
                        ),
                    );
                }
            }
            FunctionKind::Host => {
                if mentions_frag(&t) {
                    cx.block_err(
                        entry,
                        format!("parameter {v}: host functions cannot use fragment types"),
                    );
                }
            }
            FunctionKind::Device => {}
        }
    }
}

fn check_blocks(cx: &mut Ctx) {
    let f = cx.f;
    for b in placed_blocks(cx) {
        let insts = &f.blocks[b.index()].insts;
        if insts.is_empty() {
            cx.block_err(b, format!("{b} is empty; every block ends in a terminator"));
            continue;
        }
        let last = insts.len() - 1;
        for (k, i) in insts.iter().enumerate() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            let term = d.op.is_terminator();
            if k < last && term {
                cx.inst_err(
                    b,
                    *i,
                    format!(
                        "terminator `{}` in the middle of {b}; only the last instruction may be a terminator",
                        d.op.mnemonic()
                    ),
                );
            } else if k == last && !term {
                cx.inst_err(
                    b,
                    *i,
                    format!(
                        "{b} ends with `{}`, which is not a terminator (jump, br, return or unreachable)",
                        d.op.mnemonic()
                    ),
                );
            }
        }
    }
}

fn check_value_types(cx: &mut Ctx) {
    let f = cx.f;
    let host = matches!(f.kind, FunctionKind::Host);
    for b in placed_blocks(cx) {
        let kernel_entry = f.is_kernel() && Some(b) == f.entry();
        for v in f.blocks[b.index()].params.clone() {
            let Some(t) = cx.ty(v).cloned() else { continue };
            if t == Type::TensorMap && !kernel_entry {
                cx.block_err(b, format!("parameter {v}: {TENSORMAP_PLACE}"));
            } else if let Some(msg) = value_type_problem(&t) {
                cx.block_err(b, format!("parameter {v}: {msg}"));
            } else if host && mentions_frag(&t) {
                cx.block_err(
                    b,
                    format!("parameter {v}: host functions cannot use fragment types"),
                );
            }
        }
        for i in f.blocks[b.index()].insts.clone() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            for v in &d.results {
                let Some(t) = cx.ty(*v).cloned() else {
                    continue;
                };
                if t == Type::TensorMap {
                    cx.inst_err(b, i, format!("result {v}: {TENSORMAP_PLACE}"));
                } else if let Some(msg) = value_type_problem(&t) {
                    cx.inst_err(b, i, format!("result {v}: {msg}"));
                } else if host && mentions_frag(&t) {
                    cx.inst_err(
                        b,
                        i,
                        format!("result {v}: host functions cannot use fragment types"),
                    );
                }
            }
        }
    }
}

/// Issue 13: a tensor map is a 128-byte `__grid_constant__` kernel parameter
/// that only the TMA instructions read.
const TENSORMAP_PLACE: &str =
    "a tensormap may only be a kernel parameter (it is passed by value as a __grid_constant__)";

fn mentions_frag(t: &Type) -> bool {
    match t {
        Type::Frag(_) => true,
        Type::Ptr(_, e) | Type::Array(e, _) => mentions_frag(e),
        _ => false,
    }
}

/// Why `t` cannot be the type of an SSA value, if it cannot.
pub fn value_type_problem(t: &Type) -> Option<String> {
    match t {
        Type::Scalar(_) => None,
        Type::Vector(s, n) => {
            // Longer vectors exist as values for wgmma accumulators (N/2 lanes).
            let long = *n > 8 && *n <= 128 && n.is_multiple_of(4);
            if !matches!(n, 2 | 4 | 8) && !long {
                Some(format!(
                    "vector {t} must have 2, 4 or 8 lanes (values: also 12 to 128 by 4)"
                ))
            } else if s.is_bool() {
                Some(format!("vector {t}: vectors of bool are not supported"))
            } else {
                None
            }
        }
        Type::Array(..) => Some(format!(
            "array {t} is not a value type (arrays live in memory: use a pointer to it)"
        )),
        Type::Ptr(_, pointee) => {
            memory_type_problem(pointee).map(|m| format!("pointee of {t}: {m}"))
        }
        Type::Frag(fr) => frag_problem(fr),
        // Where a tensor map may appear is checked by `tensormap_place_problem`.
        Type::TensorMap => None,
    }
}

/// Why `t` cannot live in memory (be a pointee or an allocation's element), if it cannot.
pub fn memory_type_problem(t: &Type) -> Option<String> {
    match t {
        Type::Vector(_, n) if *n > 8 => Some(format!(
            "vector {t} cannot live in memory (at most 8 lanes; extract the lanes)"
        )),
        Type::Scalar(_) | Type::Vector(..) | Type::Ptr(..) => value_type_problem(t),
        Type::Array(e, n) => {
            if *n == 0 {
                Some(format!("array {t} must have at least one element"))
            } else if let Some(m) = memory_type_problem(e) {
                Some(m)
            } else {
                match t.size_bytes() {
                    Some(s) if s <= MAX_TYPE_BYTES => None,
                    _ => Some(format!("array {t} is larger than 2^40 bytes")),
                }
            }
        }
        Type::Frag(_) => Some(format!(
            "fragment {t} cannot live in memory (use mma.store)"
        )),
        Type::TensorMap => {
            Some("a tensormap cannot live in memory (it is only a kernel parameter)".into())
        }
    }
}

fn frag_problem(fr: &FragType) -> Option<String> {
    match fr.kind {
        FragKind::A | FragKind::B => {
            if !matches!(fr.elem, ScalarType::F16 | ScalarType::BF16) {
                return Some(format!("{fr}: A/B fragments hold f16 or bf16"));
            }
            if fr.layout.is_none() {
                return Some(format!("{fr}: A/B fragments carry a layout (row or col)"));
            }
        }
        FragKind::Acc => {
            if !matches!(fr.elem, ScalarType::F16 | ScalarType::F32) {
                return Some(format!("{fr}: accumulators hold f32 or f16"));
            }
            if fr.layout.is_some() {
                return Some(format!("{fr}: accumulators carry no layout"));
            }
        }
    }
    None
}

// ------------------------------------------------------------------ instructions

fn check_insts(cx: &mut Ctx) {
    let f = cx.f;
    for b in placed_blocks(cx) {
        for i in f.blocks[b.index()].insts.clone() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            check_inst(cx, b, i, d);
        }
    }
}

/// Result of type-checking one instruction: `Err(message)` on the first problem.
type Check = Result<(), String>;

fn check_inst(cx: &mut Ctx, b: BlockId, i: InstId, d: &InstData) {
    let f = cx.f;
    // Operands and results that do not exist: report and stop (types unknown).
    let mut missing = false;
    for (what, vs) in [("operand", &d.args), ("result", &d.results)] {
        for v in vs.iter() {
            if !f.has_value(*v) {
                cx.inst_err(
                    b,
                    i,
                    format!("{what} {v} does not exist ({} values)", f.values.len()),
                );
                missing = true;
            }
        }
    }
    for t in &d.targets {
        for v in &t.args {
            if !f.has_value(*v) {
                cx.inst_err(
                    b,
                    i,
                    format!(
                        "branch argument {v} does not exist ({} values)",
                        f.values.len()
                    ),
                );
                missing = true;
            }
        }
    }
    if !d.op.is_terminator() && !d.targets.is_empty() {
        cx.inst_err(b, i, "only jump and br have branch targets");
    }
    if d.op.is_gpu() && matches!(f.kind, FunctionKind::Host) {
        cx.inst_err(
            b,
            i,
            format!(
                "GPU instruction `{}` in host function @{}; use a kernel or device function",
                d.op.mnemonic(),
                f.name
            ),
        );
    }
    if missing {
        return;
    }
    let args: Vec<&Type> = d.args.iter().map(|v| &f.values[v.index()].ty).collect();
    let results: Vec<&Type> = d.results.iter().map(|v| &f.values[v.index()].ty).collect();
    if let Err(msg) = check_op(cx, d, &args, &results) {
        cx.inst_err(b, i, msg);
    }
}

fn arity(d: &InstData, args: usize, results: usize) -> Check {
    if d.args.len() != args || d.results.len() != results {
        return Err(format!(
            "`{}` takes {args} operand{} and gives {results} result{}, got {} and {}",
            d.op.mnemonic(),
            if args == 1 { "" } else { "s" },
            if results == 1 { "" } else { "s" },
            d.args.len(),
            d.results.len()
        ));
    }
    Ok(())
}

fn same(what: &str, got: &Type, want: &Type) -> Check {
    if got != want {
        return Err(format!("{what} has type {got}, expected {want}"));
    }
    Ok(())
}

fn scalar(t: &Type) -> Option<ScalarType> {
    t.as_scalar()
}

fn is_u32(t: &Type) -> bool {
    *t == Type::U32
}

fn want_u32(what: &str, t: &Type) -> Check {
    if !is_u32(t) {
        return Err(format!("{what} must be u32, got {t}"));
    }
    Ok(())
}

fn gpu_mem_ptr<'t>(what: &str, t: &'t Type) -> Result<(AddrSpace, &'t Type), String> {
    match t {
        Type::Ptr(space, pointee)
            if matches!(
                space,
                AddrSpace::Global
                    | AddrSpace::Shared
                    | AddrSpace::Generic
                    | AddrSpace::SharedCluster
            ) =>
        {
            Ok((*space, pointee))
        }
        _ => Err(format!(
            "{what} must be a pointer to global, shared or generic memory, got {t}"
        )),
    }
}

fn check_op(cx: &Ctx, d: &InstData, a: &[&Type], r: &[&Type]) -> Check {
    let f = cx.f;
    let mn = d.op.mnemonic();
    // Operand and result counts come from the instruction table; the rules below are per-op meaning.
    let def = d.op.def();
    if let Some((args, results)) = def.arity() {
        arity(d, args, results)?;
    }
    // The relational type rules the row declares; the arms below say only
    // what that vocabulary cannot (each says why).
    if let Some(s) = crate::table::sig_of(def) {
        crate::sig::check(s, &mn, def.operands.unwrap_or(&[]), a, r)?;
    }
    match &d.op {
        // The literal must fit the result type: a value rule.
        Op::Const(c) => check_const(*c, r[0]),
        // The scalar family is the row's `types`; half pairs take only some ops.
        Op::Binary(_) => {
            if is_half_pair(a[0]) {
                // Packed f16x2/bf16x2 arithmetic (issue 12): one PTX instruction per pair.
                if !matches!(
                    d.op,
                    Op::Binary(
                        crate::op::BinOp::Add
                            | crate::op::BinOp::Sub
                            | crate::op::BinOp::Mul
                            | crate::op::BinOp::Min
                            | crate::op::BinOp::Max
                    )
                ) {
                    return Err(format!(
                        "`{mn}` on {}: half pairs take add, sub, mul, min, max and fma",
                        a[0]
                    ));
                }
                return Ok(());
            }
            let Some(s) = scalar(a[0]) else {
                return Err(format!(
                    "`{mn}` takes scalars, got {} (extract vector lanes first; only the half pairs vec<f16, 2> and vec<bf16, 2> take arithmetic)",
                    a[0]
                ));
            };
            let want = d.op.def().types;
            if !want.accepts(s) {
                return Err(format!("`{mn}` takes {}, got {s}", want.plural()));
            }
            Ok(())
        }
        // The scalar family is the row's `types`.
        Op::Unary(_) => {
            let Some(s) = scalar(a[0]) else {
                return Err(format!("`{mn}` takes a scalar, got {}", a[0]));
            };
            let want = d.op.def().types;
            if !want.accepts(s) {
                return Err(format!("`{mn}` takes {}, got {s}", want.singular()));
            }
            same("the result", r[0], a[0])
        }
        // Floats or half pairs: a family the signature has no name for.
        Op::Fma if !a[0].is_float() && !is_half_pair(a[0]) => {
            Err(format!("`fma` takes floats, got {}", a[0]))
        }
        // Bool and pointers compare with eq/ne only: a rule on the sub-op and the type.
        Op::Cmp(op) => {
            let eq_only = matches!(op, CmpOp::Eq | CmpOp::Ne);
            let ok = match a[0] {
                Type::Scalar(s) => s.is_int() || s.is_float() || (s.is_bool() && eq_only),
                Type::Ptr(..) => eq_only,
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "`{mn}` compares integers or floats (bool and pointers with eq/ne only), got {}",
                    a[0]
                ));
            }
            Ok(())
        }
        // The signature has no "not a fragment".
        Op::Select if matches!(a[1], Type::Frag(_)) => {
            Err("`select` cannot choose between fragments".into())
        }
        // Any scalar to any non-bool scalar: a rule on the pair.
        Op::Cast => {
            let (Some(from), Some(to)) = (scalar(a[0]), scalar(r[0])) else {
                return Err(format!(
                    "`cast` converts between scalar numeric types, got {} to {} (use ptr_cast for pointers)",
                    a[0], r[0]
                ));
            };
            if to.is_bool() {
                return Err(format!(
                    "`cast` to bool is not defined; compare with zero (cmp.ne) instead of casting {from}"
                ));
            }
            Ok(())
        }
        // Equal sizes: a rule on sizes.
        Op::Bitcast => {
            let plain =
                |t: &Type| matches!(t, Type::Scalar(s) | Type::Vector(s, _) if !s.is_bool());
            if !plain(a[0]) || !plain(r[0]) {
                return Err(format!(
                    "`bitcast` reinterprets non-bool scalars or vectors, got {} to {} (use ptr_cast for pointers)",
                    a[0], r[0]
                ));
            }
            if a[0].size_bytes() != r[0].size_bytes() {
                return Err(format!(
                    "`bitcast` needs types of one size, got {} ({} bytes) to {} ({} bytes)",
                    a[0],
                    a[0].size_bytes().unwrap_or(0),
                    r[0],
                    r[0].size_bytes().unwrap_or(0)
                ));
            }
            Ok(())
        }
        // The lane immediate must fit the vector (also `insert`).
        Op::Extract(lane) => {
            let Type::Vector(s, n) = a[0] else {
                return Err(format!("`extract` needs a vector, got {}", a[0]));
            };
            if lane >= n {
                return Err(format!("lane {lane} is out of range for {}", a[0]));
            }
            same("the result", r[0], &Type::Scalar(*s))
        }
        Op::Insert(lane) => {
            let Type::Vector(s, n) = a[0] else {
                return Err(format!("`insert` needs a vector, got {}", a[0]));
            };
            if lane >= n {
                return Err(format!("lane {lane} is out of range for {}", a[0]));
            }
            same("the inserted value", a[1], &Type::Scalar(*s))?;
            same("the result", r[0], a[0])
        }
        // No whole arrays; the message is pinned by tests (also `store`: constant memory).
        Op::Load => {
            let Type::Ptr(_, pointee) = a[0] else {
                return Err(format!("`load` needs a pointer, got {}", a[0]));
            };
            if let Type::Array(..) = **pointee {
                return Err(format!(
                    "cannot load a whole array ({pointee}); ptr_cast to the element type and load elements"
                ));
            }
            same("the result", r[0], pointee)
        }
        Op::Store => {
            let Type::Ptr(space, pointee) = a[0] else {
                return Err(format!("`store` needs a pointer, got {}", a[0]));
            };
            if *space == AddrSpace::Constant {
                return Err("constant memory is read-only".into());
            }
            if let Type::Array(..) = **pointee {
                return Err(format!(
                    "cannot store a whole array ({pointee}); ptr_cast to the element type and store elements"
                ));
            }
            if a[1] != &**pointee {
                return Err(format!(
                    "stored value has type {}, but the pointer points to {pointee}",
                    a[1]
                ));
            }
            Ok(())
        }
        // The result is the operand's pointer type, space included: signatures have no space variables.
        Op::PtrAdd => {
            if !a[0].is_ptr() {
                return Err(format!("`ptr_add` needs a pointer, got {}", a[0]));
            }
            if !a[1].is_int() {
                return Err(format!("`ptr_add` index must be an integer, got {}", a[1]));
            }
            same("the result", r[0], a[0])
        }
        // Which address-space changes are allowed: a rule on two spaces.
        Op::PtrCast => {
            let (Type::Ptr(from, _), Type::Ptr(to, _)) = (a[0], r[0]) else {
                return Err(format!(
                    "`ptr_cast` converts pointers, got {} to {}",
                    a[0], r[0]
                ));
            };
            if from != to && *from != AddrSpace::Generic && *to != AddrSpace::Generic {
                return Err(format!(
                    "`ptr_cast` from {from} to {to}: address spaces change only to or from generic (cast through generic)"
                ));
            }
            if from != to && *to == AddrSpace::SharedCluster {
                return Err(format!(
                    "`ptr_cast` from {from} to shared_cluster: a shared_cluster pointer comes from `mapa`"
                ));
            }
            Ok(())
        }
        // The result type follows the immediates; sizes have limits (also the shared allocations).
        Op::Alloca { elem, count } => {
            check_alloc(elem, *count, MAX_ALLOCA_BYTES, "alloca")?;
            same(
                "the result",
                r[0],
                &Type::ptr(AddrSpace::Local, elem.clone()),
            )
        }
        Op::SharedAlloc { elem, count, align } => {
            check_alloc(elem, *count, MAX_STATIC_SHARED_BYTES, "shared_alloc")?;
            check_shared_align(*align, "shared_alloc")?;
            same(
                "the result",
                r[0],
                &Type::ptr(AddrSpace::Shared, elem.clone()),
            )
        }
        Op::DynShared { elem, align } => {
            check_shared_align(*align, "dyn_shared")?;
            if let Some(m) = memory_type_problem(elem) {
                return Err(format!("dyn_shared element: {m}"));
            }
            same(
                "the result",
                r[0],
                &Type::ptr(AddrSpace::Shared, elem.clone()),
            )
        }
        // Immediate ranges are not types (also the other waits, setmaxnreg, named barriers).
        Op::CpAsyncWait(n) => {
            if *n > 31 {
                return Err(format!("cp.async.wait {n}: at most 31 pending groups"));
            }
            Ok(())
        }
        // Element types depend on the operation; the message names the pointee (pinned by tests).
        Op::Atomic { op, .. } => {
            let (_, pointee) = gpu_mem_ptr("the atomic's pointer", a[0])?;
            if a[1] != pointee {
                return Err(format!(
                    "atomic value has type {}, but the pointer points to {pointee}",
                    a[1]
                ));
            }
            same("the result", r[0], a[1])?;
            check_atomic_type(*op, a[1])
        }
        // Its integer-only rule reads like the atomic family's (`check_atomic_type`).
        Op::AtomicCas { .. } => {
            let pointee = a[1];
            if !matches!(
                scalar(pointee),
                Some(ScalarType::I32 | ScalarType::U32 | ScalarType::I64 | ScalarType::U64)
            ) {
                return Err(format!(
                    "atomic.cas works on i32, u32, i64 or u64, got {pointee} (bitcast floats to the same-size integer)"
                ));
            }
            Ok(())
        }
        // The width immediate's range is not a type.
        Op::Shfl { width, .. } => {
            if !(1..=32).contains(width) || !width.is_power_of_two() {
                return Err(format!(
                    "shuffle width {width} must be a power of two in 1..=32"
                ));
            }
            Ok(())
        }
        // Fragment kinds, shapes and element types (also `mma.fill`, `mma`, `mma.store`).
        Op::MmaLoad { frag, layout } => {
            if let Some(m) = frag_problem(frag) {
                return Err(m);
            }
            if frag.kind != FragKind::Acc && frag.layout != Some(*layout) {
                return Err(format!(
                    "mma.load.{layout} of {frag}: A/B fragments load with their own layout ({})",
                    frag.layout.map_or("none", |l| l.name())
                ));
            }
            let (_, pointee) = gpu_mem_ptr("the mma.load pointer", a[0])?;
            same("the pointee", pointee, &Type::Scalar(frag.elem))?;
            want_u32("ldm", a[1])?;
            same("the result", r[0], &Type::Frag(*frag))
        }
        Op::MmaFill => {
            let Type::Frag(fr) = r[0] else {
                return Err(format!("mma.fill gives a fragment, got {}", r[0]));
            };
            if fr.kind != FragKind::Acc {
                return Err(format!("mma.fill fills accumulators, got {fr}"));
            }
            same("the fill value", a[0], &Type::Scalar(fr.elem))
        }
        Op::Mma => {
            let (Type::Frag(fa), Type::Frag(fb), Type::Frag(fc)) = (a[0], a[1], a[2]) else {
                return Err(format!(
                    "mma takes fragments a, b, acc, got {}, {}, {}",
                    a[0], a[1], a[2]
                ));
            };
            if fa.kind != FragKind::A || fb.kind != FragKind::B || fc.kind != FragKind::Acc {
                return Err(format!(
                    "mma takes an A, a B and an accumulator fragment in that order, got {fa}, {fb}, {fc}"
                ));
            }
            if fa.shape != fb.shape || fa.shape != fc.shape {
                return Err(format!(
                    "mma fragments must have one shape, got {}, {}, {}",
                    fa.shape.name(),
                    fb.shape.name(),
                    fc.shape.name()
                ));
            }
            if fa.elem != fb.elem {
                return Err(format!(
                    "mma A and B hold one element type, got {} and {}",
                    fa.elem, fb.elem
                ));
            }
            if fa.elem == ScalarType::BF16 && fc.elem != ScalarType::F32 {
                return Err(format!("bf16 mma accumulates in f32, got {}", fc.elem));
            }
            same("the result", r[0], a[2])
        }
        Op::MmaStore { .. } => {
            let Type::Frag(fr) = a[1] else {
                return Err(format!("mma.store stores a fragment, got {}", a[1]));
            };
            if fr.kind != FragKind::Acc {
                return Err(format!("mma.store stores accumulators, got {fr}"));
            }
            let (_, pointee) = gpu_mem_ptr("the mma.store pointer", a[0])?;
            same("the pointee", pointee, &Type::Scalar(fr.elem))?;
            want_u32("ldm", a[2])
        }
        // Byte count and cache hint are immediates.
        Op::CpAsync { bytes, cache } => {
            if !matches!(bytes, 4 | 8 | 16) {
                return Err(format!("cp.async copies 4, 8 or 16 bytes, got {bytes}"));
            }
            if *cache == CacheHint::Cg && *bytes != 16 {
                return Err(format!(
                    "cp.async.cg copies 16 bytes only, got {bytes} (use ca)"
                ));
            }
            Ok(())
        }
        // Warp MMA (issue 12): fragment types follow the shape and element immediates.
        Op::MmaSync { shape, elem } => {
            if *shape != elem.shape() {
                return Err(format!(
                    "mma.sync on {elem} has shape {}, not {shape}",
                    elem.shape()
                ));
            }
            let acc = a[2]
                .elem_scalar()
                .filter(|s| elem.accumulators().contains(s));
            let Some(acc) = acc else {
                let want: Vec<String> = elem
                    .accumulators()
                    .iter()
                    .map(|s| elem.fragment_types(*s)[2].to_string())
                    .collect();
                return Err(format!(
                    "mma.sync.{shape}.{elem} accumulator c must be {}, got {}",
                    want.join(" or "),
                    a[2]
                ));
            };
            let [ta, tb, tc] = elem.fragment_types(acc);
            same("fragment a", a[0], &ta)?;
            same("fragment b", a[1], &tb)?;
            same("fragment c", a[2], &tc)?;
            same("the result", r[0], &tc)
        }
        // The register count follows the `num` immediate.
        Op::Ldmatrix { num, .. } | Op::Stmatrix { num, .. } => {
            if !matches!(num, 1 | 2 | 4) {
                return Err(format!(
                    "{mn}: the matrix count must be 1, 2 or 4, got {num}"
                ));
            }
            let regs = if *num == 1 {
                Type::U32
            } else {
                Type::Vector(ScalarType::U32, *num)
            };
            match d.op {
                Op::Ldmatrix { .. } => same("the result", r[0], &regs),
                _ => same("the stored value", a[1], &regs),
            }
        }
        // The cache operator's direction; 16-, 32-, 64-bit elements up to 16 bytes.
        Op::LoadCached(c) | Op::StoreCached(c) => {
            let load = matches!(d.op, Op::LoadCached(_));
            let name = d.op.mnemonic();
            if (load && !c.for_load()) || (!load && !c.for_store()) {
                return Err(format!(
                    "{name}: `{c}` is not a {} cache operator (loads: ca, cg, cs, lu, cv; stores: wb, cg, cs, wt; both: evict_first, evict_last)",
                    if load { "load" } else { "store" }
                ));
            }
            let Type::Ptr(AddrSpace::Global, pointee) = a[0] else {
                return Err(format!(
                    "{name} needs a pointer to global memory, got {}",
                    a[0]
                ));
            };
            // One PTX ld/st of 16-, 32- or 64-bit elements, up to 16 bytes.
            let ok = match &**pointee {
                Type::Scalar(s) | Type::Vector(s, _) => {
                    matches!(s.bits(), 16 | 32 | 64)
                        && pointee.size_bytes().is_some_and(|b| b <= 16)
                }
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "{name} moves scalars or vectors of 16-, 32- or 64-bit elements up to 16 bytes, got {pointee}"
                ));
            }
            if load {
                same("the result", r[0], pointee)
            } else {
                same("the stored value", a[1], pointee)
            }
        }
        // Types come from the callee, the global, the target block or the function, not the op.
        Op::Call(name) => check_call(cx, d, name, a, r),
        Op::GlobalAddr(name) => {
            let Some(g) = cx.m.global(name) else {
                return Err(format!(
                    "global_addr of @{name}, which is not a global of the module"
                ));
            };
            same(&format!("the pointer to @{name}"), r[0], &g.ptr_type())
        }
        Op::Jump | Op::Branch => check_branch(cx, d, a),
        Op::Return => {
            if !d.results.is_empty() {
                return Err("return has no results".into());
            }
            if a.len() != f.returns.len() {
                return Err(format!(
                    "return gives {} value{}, but @{} returns {}",
                    a.len(),
                    if a.len() == 1 { "" } else { "s" },
                    f.name,
                    f.returns.len()
                ));
            }
            for (n, (got, want)) in a.iter().zip(&f.returns).enumerate() {
                same(&format!("returned value {n}"), got, want)?;
            }
            Ok(())
        }
        // The element types depend on the reduction (a table of its own).
        Op::Red { op, .. } => check_atomic_type(*op, a[1]),
        // 32 or 64 bits: a size rule, not a type list.
        Op::LoadAcquire(_) | Op::StoreRelease(_) => {
            let Type::Ptr(_, pointee) = a[0] else {
                return Ok(());
            };
            ordered_access_type(pointee)
        }
        // Warpgroup MMA (issue 13 item 1): shape arithmetic.
        Op::Wgmma(w) => check_wgmma(*w, a, r),
        // An accumulator vector whose lanes are a multiple of 4.
        Op::WgmmaZero => match r[0] {
            Type::Vector(s, n)
                if matches!(s, ScalarType::F32 | ScalarType::F16 | ScalarType::I32)
                    && *n >= 4
                    && n.is_multiple_of(4) =>
            {
                Ok(())
            }
            t => Err(format!(
                "wgmma.zero makes a vec<f32|f16|i32, N/2> accumulator, got {t}"
            )),
        },
        Op::WgmmaWait(n) => {
            if *n > 7 {
                return Err(format!("{mn}: at most 7 pending groups, got {n}"));
            }
            Ok(())
        }
        Op::Setmaxnreg { count, .. } => {
            if !(24..=256).contains(count) || !count.is_multiple_of(8) {
                return Err(format!(
                    "{mn}: the register count must be a multiple of 8 in 24..256, got {count}"
                ));
            }
            Ok(())
        }
        // The element types depend on the reduction (a table of its own).
        Op::BulkReduce(op) => check_bulk_reduce(*op, &mn, a),
        Op::BulkWaitGroup { pending, .. } => {
            if *pending > 63 {
                return Err(format!("`{mn}` {pending}: at most 63 pending groups"));
            }
            Ok(())
        }
        Op::NamedBarrier { id, count, .. } => check_named_barrier(f, &mn, *id, *count),
        // The result type follows the immediate.
        Op::CvtPack(fmt) => same("the result", r[0], &fmt.packed_type()),
        // Only the fp8 formats unpack: a rule on the immediate.
        Op::CvtUnpack(fmt) => {
            if !fmt.is_fp8() {
                return Err(format!(
                    "`{mn}`: only fp8 pairs (e4m3x2, e5m2x2) unpack; widen f16/bf16 with `cast`"
                ));
            }
            Ok(())
        }
        // Its message is pinned by tests (`mapa` maps ...).
        Op::Mapa => {
            let Type::Ptr(AddrSpace::Shared, pointee) = a[0] else {
                return Err(format!(
                    "`mapa` maps a pointer to shared memory (ptr<shared, T>), got {}",
                    a[0]
                ));
            };
            want_u32("the target block's rank", a[1])?;
            same(
                "the result",
                r[0],
                &Type::ptr(AddrSpace::SharedCluster, (**pointee).clone()),
            )
        }
        // The row's signature said everything.
        _ => Ok(()),
    }
}

/// Operand types of `wgmma.mma_async` (issue 13 item 1).
fn check_wgmma(w: crate::op::Wgmma, a: &[&Type], r: &[&Type]) -> Check {
    use crate::op::MmaElem as E;
    let name = w.to_string();
    let pair_ok = match (w.a, w.b) {
        (E::E4m3 | E::E5m2, E::E4m3 | E::E5m2) | (E::S8 | E::U8, E::S8 | E::U8) => true,
        (E::F64, _) => false,
        (x, y) => x == y,
    };
    if !pair_ok {
        return Err(format!(
            "{name}: wgmma takes f16, bf16, tf32, e4m3/e5m2 or s8/u8 inputs (A and B alike), got {} and {}",
            w.a, w.b
        ));
    }
    if !w.n_allowed() {
        let steps = if matches!(w.a, E::S8 | E::U8) {
            "8, 16, 24, then 32 to 256 by 16"
        } else {
            "8 to 256 by 8"
        };
        return Err(format!(
            "{name}: N = {} is not a wgmma shape for {} (N is {steps})",
            w.n, w.a
        ));
    }
    let b16 = matches!(w.a, E::F16 | E::Bf16);
    if (w.trans_a || w.trans_b) && !b16 {
        return Err(format!(
            "{name}: transposed (MN-major) operands exist for f16/bf16 only"
        ));
    }
    if (w.neg_a || w.neg_b) && matches!(w.a, E::S8 | E::U8) {
        return Err(format!("{name}: integer wgmma has no negated inputs"));
    }
    let lanes = w.n / 2;
    let acc = match a[0] {
        Type::Vector(s, n) if *n == lanes && w.accumulators().contains(s) => *s,
        t => {
            let want: Vec<String> = w
                .accumulators()
                .iter()
                .map(|s| format!("vec<{s}, {lanes}>"))
                .collect();
            return Err(format!(
                "{name}: the accumulator must be {}, got {t}",
                want.join(" or ")
            ));
        }
    };
    let regs = Type::Vector(ScalarType::U32, 4);
    if *a[1] == regs {
        if w.trans_a {
            return Err(format!(
                "{name}: A in registers cannot be transposed (trans_a needs a descriptor)"
            ));
        }
    } else if *a[1] != Type::U64 {
        return Err(format!(
            "{name}: A must be a u64 shared-memory descriptor or vec<u32, 4> registers, got {}",
            a[1]
        ));
    }
    if *a[2] != Type::U64 {
        return Err(format!(
            "{name}: B must be a u64 shared-memory descriptor, got {}",
            a[2]
        ));
    }
    same("scale_d", a[3], &Type::BOOL)?;
    same("the result", r[0], &Type::Vector(acc, lanes))
}

/// `vec<f16, 2>` or `vec<bf16, 2>`: the packed pairs `add`/`sub`/`mul`/`min`/`max`/`fma` take.
fn is_half_pair(t: &Type) -> bool {
    matches!(t, Type::Vector(ScalarType::F16 | ScalarType::BF16, 2))
}

/// A declared shared-memory alignment: 0 (the default) or a power of two up to 1024.
fn check_shared_align(align: u32, what: &str) -> Check {
    if align != 0 && (!align.is_power_of_two() || align > crate::op::MAX_SHARED_ALIGN) {
        return Err(format!(
            "{what}: align {align} must be a power of two up to {}",
            crate::op::MAX_SHARED_ALIGN
        ));
    }
    Ok(())
}

/// `bar.sync`/`bar.arrive`: id 1..=15 (0 is `barrier`), a count of whole warps
/// that fits the kernel's declared block size.
fn check_named_barrier(f: &Function, mn: &str, id: u32, count: u32) -> Check {
    if !(1..=15).contains(&id) {
        return Err(format!(
            "`{mn}`: named-barrier id {id} is out of range 1..15 (barrier 0 is the block-wide `barrier`)"
        ));
    }
    if count == 0 || !count.is_multiple_of(32) || count > 1024 {
        return Err(format!(
            "`{mn}`: the thread count {count} must be a multiple of 32 (whole warps) in 32..1024"
        ));
    }
    let info = f.kind.kernel_info();
    let block = info.and_then(|k| k.exact_threads.or(k.max_threads));
    if let Some(b) = block {
        let threads = u64::from(b[0]) * u64::from(b[1]) * u64::from(b[2]);
        // Whole warps: a partial last warp still counts 32 at a barrier.
        let warps = threads.div_ceil(32) * 32;
        if u64::from(count) > warps {
            return Err(format!(
                "`{mn}`: {count} threads can never arrive in a block of at most {threads} threads"
            ));
        }
    }
    Ok(())
}

/// The element types PTX's `cp.reduce.async.bulk` (and `.tensor`) reduce:
/// `add` on u32, i32, u64, f32, f64, f16, bf16; `min`/`max` on u32, i32,
/// u64, i64, f16, bf16.
pub fn bulk_reduce_type_ok(op: BulkRedOp, s: ScalarType) -> bool {
    use ScalarType as S;
    match op {
        BulkRedOp::Add => matches!(
            s,
            S::U32 | S::I32 | S::U64 | S::F32 | S::F64 | S::F16 | S::BF16
        ),
        BulkRedOp::Min | BulkRedOp::Max => {
            matches!(s, S::U32 | S::I32 | S::U64 | S::I64 | S::F16 | S::BF16)
        }
    }
}

/// `bulk.reduce.<op> dst, src, bytes`: global and shared pointers to one
/// scalar type PTX reduces, a u32 byte count.
fn check_bulk_reduce(op: BulkRedOp, mn: &str, a: &[&Type]) -> Check {
    let (Type::Ptr(AddrSpace::Global, d), Type::Ptr(AddrSpace::Shared, s)) = (a[0], a[1]) else {
        return Err(format!(
            "`{mn}` takes a global destination and a shared source, got {} and {}",
            a[0], a[1]
        ));
    };
    if d != s {
        return Err(format!(
            "`{mn}`: destination and source point to {d} and {s}; they must agree"
        ));
    }
    match scalar(d) {
        Some(t) if bulk_reduce_type_ok(op, t) => {}
        _ => return Err(format!("`{mn}`: PTX has no bulk {op} reduction of {d}")),
    }
    want_u32("the byte count", a[2])
}

/// `ld.acquire`/`st.release` move 32 or 64 bits.
fn ordered_access_type(t: &Type) -> Check {
    match scalar(t) {
        Some(s) if !s.is_bool() && matches!(s.bits(), 32 | 64) => Ok(()),
        _ => Err(format!(
            "acquire loads and release stores work on 32- or 64-bit scalars, got {t}"
        )),
    }
}

fn check_const(c: ConstValue, t: &Type) -> Check {
    let Some(s) = scalar(t) else {
        return Err(format!("constants are scalars, got {t}"));
    };
    match c {
        ConstValue::Int(v) => {
            if !s.is_int() {
                return Err(format!("integer constant {v} for non-integer type {s}"));
            }
            if crate::builder::normalize_int(s, v) != v {
                return Err(format!(
                    "integer constant {v} does not fit {s} (store it truncated to the type's width)"
                ));
            }
            Ok(())
        }
        ConstValue::Float(bits) => {
            if !s.is_float() {
                return Err(format!("float constant for non-float type {s}"));
            }
            let v = f64::from_bits(bits);
            let max = match s {
                ScalarType::F16 => 65504.0,
                ScalarType::BF16 => 3.389_531_389_251_535_5e38,
                ScalarType::F32 => f64::from(f32::MAX),
                _ => f64::MAX,
            };
            if v.is_finite() && v.abs() > max {
                return Err(format!(
                    "float constant {v} overflows {s} (largest finite {max}); write inf explicitly"
                ));
            }
            Ok(())
        }
        ConstValue::Bool(_) => {
            if !s.is_bool() {
                return Err(format!("bool constant for type {s}"));
            }
            Ok(())
        }
    }
}

fn check_alloc(elem: &Type, count: u64, max: u64, what: &str) -> Check {
    if let Some(m) = memory_type_problem(elem) {
        return Err(format!("{what} element: {m}"));
    }
    if count == 0 {
        return Err(format!("{what} needs a count of at least 1"));
    }
    let bytes = elem.size_bytes().and_then(|s| s.checked_mul(count));
    match bytes {
        Some(n) if n <= max => Ok(()),
        _ => Err(format!("{what} of {count} x {elem} exceeds {max} bytes")),
    }
}

/// Which atomic ops PTX has for which types (see `docs/hir.md`).
fn check_atomic_type(op: AtomicOp, t: &Type) -> Check {
    use ScalarType as S;
    let s = scalar(t);
    let int32_64 = matches!(s, Some(S::I32 | S::U32 | S::I64 | S::U64));
    let ok = match op {
        AtomicOp::Add => {
            int32_64
                || matches!(s, Some(S::F16 | S::BF16 | S::F32 | S::F64))
                || matches!(t, Type::Vector(S::F16 | S::BF16, 2))
        }
        // Float min/max have no PTX `atom` form: the lowering loops on CAS.
        AtomicOp::Min | AtomicOp::Max => int32_64 || matches!(s, Some(S::F32 | S::F64)),
        AtomicOp::Sub | AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => int32_64,
        AtomicOp::Exch => int32_64 || matches!(s, Some(S::F32 | S::F64)),
        AtomicOp::Inc | AtomicOp::Dec => s == Some(S::U32),
    };
    if ok {
        return Ok(());
    }
    let want = match op {
        AtomicOp::Add => "i32, u32, i64, u64, f16, bf16, f32, f64, vec<f16, 2> or vec<bf16, 2>",
        AtomicOp::Exch => "i32, u32, i64, u64, f32 or f64",
        AtomicOp::Inc | AtomicOp::Dec => "u32",
        AtomicOp::Min | AtomicOp::Max => "i32, u32, i64, u64, f32 or f64",
        _ => "i32, u32, i64 or u64",
    };
    Err(format!("atomic.{op} works on {want}, got {t}"))
}

fn check_call(cx: &Ctx, d: &InstData, name: &str, a: &[&Type], r: &[&Type]) -> Check {
    let f = cx.f;
    let Some(callee) = cx.m.function(name) else {
        return Err(format!("call to @{name}, which is not in the module"));
    };
    match (&f.kind, &callee.kind) {
        (_, FunctionKind::Kernel(_)) => {
            return Err(format!(
                "@{name} is a kernel; kernels are launched, not called"
            ))
        }
        (FunctionKind::Host, FunctionKind::Device) => {
            return Err(format!(
                "host function calls device function @{name}; launch a kernel instead"
            ))
        }
        (FunctionKind::Kernel(_) | FunctionKind::Device, FunctionKind::Host) => {
            return Err(format!("GPU function calls host function @{name}"))
        }
        _ => {}
    }
    let params: Vec<Option<&Type>> = callee
        .entry()
        .and_then(|b| callee.blocks.get(b.index()))
        .map(|bd| {
            bd.params
                .iter()
                .map(|v| callee.values.get(v.index()).map(|x| &x.ty))
                .collect()
        })
        .unwrap_or_default();
    if a.len() != params.len() {
        return Err(format!(
            "@{name} takes {} argument{}, got {}",
            params.len(),
            if params.len() == 1 { "" } else { "s" },
            a.len()
        ));
    }
    for (n, (got, want)) in a.iter().zip(&params).enumerate() {
        if let Some(want) = want {
            same(&format!("argument {n}"), got, want)?;
        }
    }
    if d.results.len() != callee.returns.len() {
        return Err(format!(
            "@{name} returns {} value{}, the call has {} result{}",
            callee.returns.len(),
            if callee.returns.len() == 1 { "" } else { "s" },
            d.results.len(),
            if d.results.len() == 1 { "" } else { "s" }
        ));
    }
    for (n, (got, want)) in r.iter().zip(&callee.returns).enumerate() {
        same(&format!("result {n}"), got, want)?;
    }
    Ok(())
}

fn check_branch(cx: &Ctx, d: &InstData, a: &[&Type]) -> Check {
    let f = cx.f;
    let is_jump = d.op == Op::Jump;
    let (nargs, ntargets) = if is_jump { (0, 1) } else { (1, 2) };
    if d.args.len() != nargs || !d.results.is_empty() || d.targets.len() != ntargets {
        return Err(format!(
            "`{}` takes {nargs} operand{}, {ntargets} target{} and no results, got {}, {} and {}",
            d.op.mnemonic(),
            if nargs == 1 { "" } else { "s" },
            if ntargets == 1 { "" } else { "s" },
            d.args.len(),
            d.targets.len(),
            d.results.len()
        ));
    }
    if !is_jump {
        same("the branch condition", a[0], &Type::BOOL)?;
    }
    let entry = f.entry();
    let mut problems = Vec::new();
    if let [t0, t1] = d.targets.as_slice() {
        // LLVM allows two phi entries for one predecessor only if they agree.
        if t0.block == t1.block && t0.args != t1.args {
            problems.push(format!(
                "both targets are {} but pass different arguments; use select on the arguments and a jump",
                t0.block
            ));
        }
    }
    for t in &d.targets {
        let tb = t.block;
        if !f.has_block(tb) {
            problems.push(format!(
                "target {tb} does not exist ({} blocks)",
                f.blocks.len()
            ));
            continue;
        }
        if cx.layout_pos[tb.index()].is_none() {
            problems.push(format!("target {tb} is not in the layout"));
            continue;
        }
        if Some(tb) == entry {
            problems.push(format!(
                "target {tb} is the entry block, which cannot be branched to (add a loop header block)"
            ));
        }
        let params = &f.blocks[tb.index()].params;
        if params.len() != t.args.len() {
            problems.push(format!(
                "{tb} takes {} argument{}, got {}",
                params.len(),
                if params.len() == 1 { "" } else { "s" },
                t.args.len()
            ));
            continue;
        }
        for (n, (arg, p)) in t.args.iter().zip(params).enumerate() {
            let (Some(at), Some(pt)) = (cx.ty(*arg), cx.ty(*p)) else {
                continue;
            };
            if at != pt {
                problems.push(format!(
                    "argument {n} to {tb} ({arg}) has type {at}, but the parameter {p} has type {pt}"
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

// ------------------------------------------------------------------ dominance

fn check_dominance(cx: &mut Ctx) {
    let f = cx.f;
    let blocks = placed_blocks(cx);
    let nb = f.blocks.len();
    let Some(&entry) = blocks.first() else {
        return;
    };
    if f.entry() != Some(entry) {
        // The first layout entry is invalid; structure errors already reported.
        return;
    }
    // Successors of each placed block.
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for &b in &blocks {
        if let Some(d) = f.blocks[b.index()]
            .insts
            .last()
            .and_then(|i| f.insts.get(i.index()))
        {
            for t in &d.targets {
                if cx
                    .layout_pos
                    .get(t.block.index())
                    .copied()
                    .flatten()
                    .is_some()
                {
                    succs[b.index()].push(t.block.index());
                }
            }
        }
    }
    // Reverse postorder from the entry (iterative DFS).
    let mut rpo_num = vec![usize::MAX; nb];
    let mut postorder = Vec::new();
    let mut visited = vec![false; nb];
    let mut stack: Vec<(usize, usize)> = vec![(entry.index(), 0)];
    visited[entry.index()] = true;
    while let Some(top) = stack.last_mut() {
        let (node, next) = *top;
        if next < succs[node].len() {
            top.1 += 1;
            let s = succs[node][next];
            if !visited[s] {
                visited[s] = true;
                stack.push((s, 0));
            }
        } else {
            postorder.push(node);
            stack.pop();
        }
    }
    let rpo: Vec<usize> = postorder.iter().rev().copied().collect();
    for (n, &blk) in rpo.iter().enumerate() {
        rpo_num[blk] = n;
    }
    // A parameter needs an incoming value: LLVM rejects a phi with no entries.
    let mut has_pred = vec![false; nb];
    for &b in &blocks {
        for &s in &succs[b.index()] {
            has_pred[s] = true;
        }
    }
    for &b in blocks.iter().skip(1) {
        if !has_pred[b.index()] && !f.blocks[b.index()].params.is_empty() {
            cx.block_err(
                b,
                format!("{b} has parameters but no branch targets it; remove the parameters"),
            );
        }
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for &blk in &rpo {
        for &s in &succs[blk] {
            preds[s].push(blk);
        }
    }
    // Cooper, Harvey, Kennedy: "A Simple, Fast Dominance Algorithm".
    let mut idom = vec![usize::MAX; nb];
    idom[entry.index()] = entry.index();
    let mut changed = true;
    while changed {
        changed = false;
        for &blk in rpo.iter().skip(1) {
            let mut new_idom = usize::MAX;
            for &p in &preds[blk] {
                if idom[p] == usize::MAX {
                    continue;
                }
                new_idom = if new_idom == usize::MAX {
                    p
                } else {
                    intersect(&idom, &rpo_num, p, new_idom)
                };
            }
            if new_idom != usize::MAX && idom[blk] != new_idom {
                idom[blk] = new_idom;
                changed = true;
            }
        }
    }
    // Number the dominator tree (pre/post order) so each query is O(1):
    // a dominates b iff b's interval lies inside a's.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for &blk in rpo.iter().skip(1) {
        if idom[blk] != usize::MAX {
            children[idom[blk]].push(blk);
        }
    }
    let (mut pre, mut post) = (vec![0usize; nb], vec![0usize; nb]);
    let mut clock = 0usize;
    let mut walk: Vec<(usize, usize)> = vec![(entry.index(), 0)];
    pre[entry.index()] = clock;
    while let Some(top) = walk.last_mut() {
        let (node, next) = *top;
        if let Some(&c) = children[node].get(next) {
            top.1 += 1;
            clock += 1;
            pre[c] = clock;
            walk.push((c, 0));
        } else {
            clock += 1;
            post[node] = clock;
            walk.pop();
        }
    }
    let dominates = |a: usize, b: usize| pre[a] <= pre[b] && post[b] <= post[a];
    for &b in &blocks {
        let reachable = visited[b.index()];
        for (k, i) in f.blocks[b.index()].insts.clone().into_iter().enumerate() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            let uses = d
                .args
                .iter()
                .chain(d.targets.iter().flat_map(|t| t.args.iter()));
            let mut problems = Vec::new();
            for &v in uses {
                if !f.has_value(v) {
                    continue; // reported by check_inst
                }
                let Some((db, dpos)) = cx.def_site[v.index()] else {
                    problems.push(format!(
                        "uses {v}, which no placed block parameter or instruction defines"
                    ));
                    continue;
                };
                let upos = k + 1;
                let ok = if db == b {
                    dpos < upos
                } else if reachable {
                    visited[db.index()] && dominates(db.index(), b.index())
                } else {
                    db == entry
                };
                if !ok {
                    let why = if db == b {
                        format!("{v} is used before it is defined")
                    } else if reachable {
                        format!("the definition of {v} in {db} does not dominate this use")
                    } else {
                        format!(
                            "{b} is unreachable from the entry, so it may only use values defined in itself or the entry block; {v} is defined in {db}"
                        )
                    };
                    problems.push(why);
                }
            }
            if !problems.is_empty() {
                cx.inst_err(b, i, problems.join("; "));
            }
        }
    }
}

fn intersect(idom: &[usize], rpo_num: &[usize], mut a: usize, mut b: usize) -> usize {
    while a != b {
        while rpo_num[a] > rpo_num[b] {
            a = idom[a];
        }
        while rpo_num[b] > rpo_num[a] {
            b = idom[b];
        }
    }
    a
}

// ------------------------------------------------------------------ constraints

/// Stack that a `no_alloc` function may use through `alloca`, summed along its
/// deepest call chain; past this an allocation counts as unbounded (it could
/// overflow a thread's stack). zyntax-opt's proof uses the same budget.
pub const NO_ALLOC_STACK_LIMIT: u64 = 64 * 1024;

/// Bytes of `alloca` in one function's own frame (saturating: huge is huge).
fn own_alloca_bytes(f: &Function) -> u64 {
    placed_insts(f)
        .filter_map(|d| match &d.op {
            Op::Alloca { elem, count } => {
                Some(elem.size_bytes().unwrap_or(u64::MAX).saturating_mul(*count))
            }
            _ => None,
        })
        .fold(0u64, u64::saturating_add)
}

/// Deepest `alloca` stack from function `n` down its calls, or the call cycle
/// that makes it unbounded. Iterative, so deep call chains cannot overflow.
fn max_alloca_stack(
    m: &Module,
    index: &HashMap<&str, usize>,
    n: usize,
) -> Result<u64, Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done(u64),
    }
    let callees_of = |k: usize| -> Vec<usize> {
        callees(&m.functions[k])
            .filter_map(|c| index.get(c).copied())
            .collect()
    };
    let mut state = vec![State::New; m.functions.len()];
    // Frames: (function, its callees, next callee to visit, deepest callee stack so far).
    let mut frames: Vec<(usize, Vec<usize>, usize, u64)> = vec![(n, callees_of(n), 0, 0)];
    state[n] = State::Open;
    while let Some(&(f, ref cs, next, deepest)) = frames.last() {
        if next >= cs.len() {
            let total = own_alloca_bytes(&m.functions[f]).saturating_add(deepest);
            state[f] = State::Done(total);
            frames.pop();
            if let Some(parent) = frames.last_mut() {
                parent.3 = parent.3.max(total);
            }
            continue;
        }
        let c = cs[next];
        if let Some(top) = frames.last_mut() {
            top.2 += 1;
        }
        match state[c] {
            State::Done(s) => {
                if let Some(top) = frames.last_mut() {
                    top.3 = top.3.max(s);
                }
            }
            State::Open => {
                let mut cycle: Vec<String> = frames
                    .iter()
                    .skip_while(|e| e.0 != c)
                    .map(|e| format!("@{}", m.functions[e.0].name))
                    .collect();
                cycle.push(format!("@{}", m.functions[c].name));
                return Err(cycle);
            }
            State::New => {
                state[c] = State::Open;
                frames.push((c, callees_of(c), 0, 0));
            }
        }
    }
    match state[n] {
        State::Done(s) => Ok(s),
        _ => Ok(0),
    }
}

fn check_no_alloc(cx: &mut Ctx) {
    let f = cx.f;
    if !f.constraints.no_alloc {
        return;
    }
    let m = cx.m;
    let index: HashMap<&str, usize> = m
        .functions
        .iter()
        .enumerate()
        .map(|(n, g)| (g.name.as_str(), n))
        .collect();
    let Some(&me) = index.get(f.name.as_str()) else {
        return;
    };
    match max_alloca_stack(m, &index, me) {
        Err(cycle) => cx.func_err(format!(
            "no_alloc function reaches recursion, which needs unbounded stack: {}",
            cycle.join(" -> ")
        )),
        Ok(total) if total > NO_ALLOC_STACK_LIMIT => {
            // Name every site: each alloca of this function, and each callee that allocates.
            for b in placed_blocks(cx) {
                for i in f.blocks[b.index()].insts.clone() {
                    if let Some(Op::Alloca { .. }) = f.insts.get(i.index()).map(|d| &d.op) {
                        cx.inst_err(
                            b,
                            i,
                            format!(
                                "alloca in a no_alloc function whose stack reaches {total} bytes \
                                 (budget {NO_ALLOC_STACK_LIMIT})"
                            ),
                        );
                    }
                }
            }
            let mut reached = reachable_callees(m, &index, me);
            reached.sort_unstable();
            reached.dedup();
            for n in reached {
                let g = &m.functions[n];
                let own = own_alloca_bytes(g);
                if n != me && own > 0 {
                    cx.func_err(format!(
                        "no_alloc function reaches @{}, which allocates {own} bytes of stack \
                         (total {total}, budget {NO_ALLOC_STACK_LIMIT})",
                        g.name
                    ));
                }
            }
        }
        Ok(_) => {}
    }
}
