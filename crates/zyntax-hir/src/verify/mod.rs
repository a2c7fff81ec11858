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
//! - every value is defined exactly once, and its [`ValueDef`](crate::ir::ValueDef) names where
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

mod callgraph;
mod diag;
mod dominance;
mod flow;
mod header;
mod inst;
mod module;
mod no_alloc;
mod op_rules;
mod structure;
mod types;

use crate::arch;
use crate::error::{Diagnostic, VerifyError};
use crate::ir::{Function, FunctionKind, Module};
use crate::printer::print_inst;

use callgraph::{compile_archs, module_archs, own_archs};
use diag::Ctx;
use dominance::check_dominance;
use header::{check_alloca_total, check_header, check_type_depths};
use inst::check_insts;
use module::check_module_header;
use no_alloc::check_no_alloc;
use structure::{check_blocks, check_defs, check_entry, check_layout};
use types::check_value_types;

pub use callgraph::uses_grid_sync;
pub(crate) use callgraph::{kernel_static_shared, max_over_reached, reaches_op};
pub use module::{MAX_CONSTANT_BYTES, MAX_GLOBAL_BYTES};
pub use no_alloc::NO_ALLOC_STACK_LIMIT;
pub use op_rules::bulk_reduce_type_ok;
pub use types::{memory_type_problem, value_type_problem};

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

// ------------------------------------------------------------------ function

/// Every per-function rule, in order: the arena sizes and type depths first
/// (the other checks rely on them), then the header, structure, types and
/// dominance.
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
