//! Kernel metadata: `nvvm.annotations`.
//!
//! Each kernel gets `!{ptr @k, !"kernel", i32 1}` (LLVM 19 still reads it, next
//! to the `ptx_kernel` calling convention), plus one entry per declared launch
//! bound: `maxntidx/y/z` (→ `.maxntid x, y, z`), `minctasm` (→ `.minnctapersm`)
//! `reqntidx/y/z` (→ `.reqntid x, y, z`, the exact block shape)
//! and `maxnreg` (→ `.maxnreg`). They are added before optimization so the
//! optimizer's range analysis of `%tid`/`%ntid` sees them.

use crate::error::{CompileError, CompileResult};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{BasicMetadataValueEnum, FunctionValue};
use zyntax_hir::KernelInfo;

/// The `(key, value)` annotations of a kernel, in emission order.
pub fn kernel_annotations(info: &KernelInfo) -> Vec<(&'static str, u32)> {
    let mut out = vec![("kernel", 1)];
    if let Some([x, y, z]) = info.max_threads {
        out.push(("maxntidx", x));
        out.push(("maxntidy", y));
        out.push(("maxntidz", z));
    }
    if let Some([x, y, z]) = info.exact_threads {
        out.push(("reqntidx", x));
        out.push(("reqntidy", y));
        out.push(("reqntidz", z));
    }
    if let Some(n) = info.min_blocks {
        out.push(("minctasm", n));
    }
    if let Some(r) = info.max_registers {
        out.push(("maxnreg", r));
    }
    out
}

pub fn annotate_kernel<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    kernel: FunctionValue<'ctx>,
    info: &KernelInfo,
) -> CompileResult<()> {
    let fptr = kernel.as_global_value().as_pointer_value();
    for (key, value) in kernel_annotations(info) {
        let node = ctx.metadata_node(&[
            BasicMetadataValueEnum::from(fptr),
            ctx.metadata_string(key).into(),
            ctx.i32_type().const_int(u64::from(value), false).into(),
        ]);
        module
            .add_global_metadata("nvvm.annotations", &node)
            .map_err(|e| CompileError::internal("kernel annotations", format!("{key}: {e}")))?;
    }
    Ok(())
}

/// `!{ptr @k, !"grid_constant", !{i32 i, ...}}` (1-based) for the kernel's
/// `tensormap` parameters (issue 13): LLVM then keeps each in parameter space
/// and takes its address with `cvta.param`, as `__grid_constant__` does.
pub fn annotate_grid_constants<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    kernel: FunctionValue<'ctx>,
    params: &[zyntax_hir::Type],
) -> CompileResult<()> {
    let idx: Vec<BasicMetadataValueEnum> = params
        .iter()
        .enumerate()
        .filter(|(_, t)| **t == zyntax_hir::Type::TensorMap)
        .map(|(i, _)| ctx.i32_type().const_int(i as u64 + 1, false).into())
        .collect();
    if idx.is_empty() {
        return Ok(());
    }
    let node = ctx.metadata_node(&[
        BasicMetadataValueEnum::from(kernel.as_global_value().as_pointer_value()),
        ctx.metadata_string("grid_constant").into(),
        ctx.metadata_node(&idx).into(),
    ]);
    module
        .add_global_metadata("nvvm.annotations", &node)
        .map_err(|e| CompileError::internal("kernel annotations", format!("grid_constant: {e}")))
}
