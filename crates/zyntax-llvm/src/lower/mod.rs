//! HIR → LLVM IR.
//!
//! One [`lower_module`] call turns a verified HIR module into an LLVM module
//! for one NVPTX target. The structure:
//!
//! - every GPU function (kernels and device functions) becomes an LLVM function;
//!   host functions belong to the host backend and are skipped here;
//! - kernels get the `ptx_kernel` calling convention and `nvvm.annotations`
//!   (see [`crate::nvptx::annotations`]); device functions are `internal`;
//! - each function gets a prologue block holding its `alloca`s, then one LLVM
//!   block per reachable HIR block, lowered in reverse post-order so that every
//!   operand is defined before use; block parameters become `phi`s whose
//!   incoming values are filled in once all blocks exist (back edges);
//! - scalar ops follow the operand type (signedness picks `sdiv`/`udiv`,
//!   `ashr`/`lshr`, `icmp slt`/`ult`, `sitofp`/`uitofp`); GPU ops are in `gpu.rs`.
//!
//! Semantics chosen where LLVM would otherwise have undefined behaviour
//! (documented in `docs/lowering.md`): integer division or remainder by zero
//! traps (`trap;`), `MIN / -1` wraps to `MIN` (remainder 0), shift amounts of
//! at least the bit width clamp as in PTX (`shl`/logical `shr` give 0,
//! arithmetic `shr` fills with the sign), float→int casts saturate and map
//! NaN to 0 (PTX `cvt.rzi`), float `min`/`max` return the non-NaN operand.

mod cluster;
mod debug;
mod globals;
mod gpu;
mod hopper;
mod sync;
mod tma;
pub mod ty;
mod warp_mma;
mod wgmma;

use crate::error::{CompileError, CompileResult};
use crate::nvptx::annotations;
use crate::nvptx::PtxTarget;
use crate::scalar::{self, class_of, Conv, Inst, Scalar};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::targets::TargetMachine;
use inkwell::types::{AnyType, BasicMetadataTypeEnum, BasicType, BasicTypeEnum};
use inkwell::values::{
    BasicMetadataValueEnum, BasicValue, BasicValueEnum, FunctionValue, GlobalValue, IntValue,
    PhiValue,
};
use inkwell::{FloatPredicate, IntPredicate};
use std::collections::HashMap;
use zyntax_hir as hir;
use zyntax_hir::{
    BinOp, BlockId, CmpOp, ConstValue, FunctionKind, InstId, Op, OptLevel, ScalarType, Type, UnOp,
    ValueId,
};

/// PTX's calling convention for kernel entry points (`CallingConv::PTX_Kernel`).
pub const PTX_KERNEL_CC: u32 = 71;

/// Which functions of the HIR module go into the LLVM module for `target`.
pub fn selected_functions<'h>(
    m: &'h hir::Module,
    target: &PtxTarget,
) -> impl Iterator<Item = &'h hir::Function> + 'h {
    let arch = target.arch;
    m.functions.iter().filter(move |f| match &f.kind {
        FunctionKind::Host => false,
        FunctionKind::Device => true,
        // A kernel pinned to another arch is compiled in that arch's PTX only.
        FunctionKind::Kernel(k) => k.arch.unwrap_or(arch) == arch,
    })
}

/// Lower `m` (already accepted by zyntax's verifier) into a fresh LLVM module.
pub fn lower_module<'ctx>(
    ctx: &'ctx Context,
    m: &hir::Module,
    target: &PtxTarget,
    tm: &TargetMachine,
    line_info: bool,
) -> CompileResult<Module<'ctx>> {
    let module = ctx.create_module(&m.name);
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());

    let funcs: Vec<&hir::Function> = selected_functions(m, target).collect();
    // Line information only where there are locations: a module without
    // any lowers exactly as it would without `line_info`.
    let first_file = funcs
        .iter()
        .flat_map(|f| f.insts.iter().map(|d| &d.loc).chain([&f.loc]))
        .find_map(|l| l.as_ref().and_then(|l| l.file.clone()));
    let lines = match (line_info, first_file) {
        (true, Some(file)) => Some(debug::LineInfo::new(&module, &file)),
        _ => None,
    };
    let mut l = Lowerer {
        ctx,
        module,
        funcs: HashMap::new(),
        dyn_shared: None,
        shared_count: 0,
        arch: target.arch,
        lines,
    };
    l.declare_globals(m)?;
    for f in &funcs {
        l.declare(f)?;
    }
    for f in &funcs {
        FnLowering::new(&mut l, f)?.run()?;
    }
    if let Some(lines) = l.lines.take() {
        lines.finish();
    }
    for f in &funcs {
        if let FunctionKind::Kernel(info) = &f.kind {
            let fv = l.function(&f.name)?;
            annotations::annotate_kernel(ctx, &l.module, fv, info)?;
            annotations::annotate_grid_constants(ctx, &l.module, fv, &f.param_types())?;
        }
    }
    // The swizzled TMA boxes (issue 13) repeat every 1024 bytes of shared
    // address: a module with tensor copies gets its dynamic shared memory
    // aligned to that, so a box at offset k * 1024 is swizzled as the
    // interpreter does.
    if let Some(g) = l.dyn_shared {
        let tma = funcs.iter().any(|f| {
            f.insts.iter().any(|d| {
                matches!(
                    d.op,
                    hir::Op::TmaLoad { .. } | hir::Op::TmaStore | hir::Op::TmaReduce(_)
                )
            })
        });
        if tma {
            g.set_alignment(1024);
        }
    }
    check_declarations(&l.module)?;
    Ok(l.module)
}

/// Every function we only declare must be an LLVM intrinsic: anything else
/// would reach the PTX as an unresolved `.extern .func` (a zyntax bug).
fn check_declarations(module: &Module<'_>) -> CompileResult<()> {
    for f in module.get_functions() {
        if f.count_basic_blocks() == 0 {
            let name = f.get_name().to_string_lossy().into_owned();
            if f.get_intrinsic_id() == 0 {
                return Err(CompileError::internal(
                    "lowering",
                    format!("call to undefined function `{name}` would reach the PTX"),
                ));
            }
        }
    }
    Ok(())
}

pub(crate) struct Lowerer<'ctx> {
    pub ctx: &'ctx Context,
    pub module: Module<'ctx>,
    funcs: HashMap<String, FunctionValue<'ctx>>,
    dyn_shared: Option<GlobalValue<'ctx>>,
    shared_count: usize,
    /// The target arch (instruction selection that LLVM does not do well enough).
    arch: hir::Arch,
    /// Source lines for `.loc` (`Options::line_info`), when the module has any.
    lines: Option<debug::LineInfo>,
}

impl<'ctx> Lowerer<'ctx> {
    fn function(&self, name: &str) -> CompileResult<FunctionValue<'ctx>> {
        self.funcs.get(name).copied().ok_or_else(|| {
            CompileError::internal("lowering", format!("function @{name} was not declared"))
        })
    }

    /// The LLVM return type of a function returning `returns`.
    fn return_type(&self, returns: &[Type]) -> CompileResult<Option<BasicTypeEnum<'ctx>>> {
        match returns {
            [] => Ok(None),
            [t] => Ok(Some(ty::value_type(self.ctx, t)?)),
            many => {
                let fields = many
                    .iter()
                    .map(|t| ty::value_type(self.ctx, t))
                    .collect::<CompileResult<Vec<_>>>()?;
                Ok(Some(self.ctx.struct_type(&fields, false).into()))
            }
        }
    }

    fn declare(&mut self, f: &hir::Function) -> CompileResult<()> {
        let params = f
            .param_types()
            .iter()
            .map(|t| ty::value_type(self.ctx, t).map(BasicMetadataTypeEnum::from))
            .collect::<CompileResult<Vec<_>>>()?;
        let fn_ty = match self.return_type(&f.returns)? {
            None => self.ctx.void_type().fn_type(&params, false),
            Some(r) => r.fn_type(&params, false),
        };
        let is_kernel = f.is_kernel();
        let linkage = if is_kernel {
            None
        } else {
            Some(Linkage::Internal)
        };
        let fv = self.module.add_function(&f.name, fn_ty, linkage);
        if is_kernel {
            fv.set_call_conventions(PTX_KERNEL_CC);
        }
        // A tensor map (issue 13) is a 128-byte, 64-byte aligned by-value
        // parameter; `annotate_grid_constants` keeps it in parameter space.
        for (i, t) in f.param_types().iter().enumerate() {
            if *t == Type::TensorMap {
                let bytes = self.ctx.i8_type().array_type(128);
                let byval = self.ctx.create_type_attribute(
                    Attribute::get_named_enum_kind_id("byval"),
                    bytes.as_any_type_enum(),
                );
                let align = self
                    .ctx
                    .create_enum_attribute(Attribute::get_named_enum_kind_id("align"), 64);
                fv.add_attribute(AttributeLoc::Param(i as u32), byval);
                fv.add_attribute(AttributeLoc::Param(i as u32), align);
            }
        }
        // No exceptions on the GPU; every GPU function may contain warp-collective
        // or barrier code, so calls must not be made control-dependent on more values.
        for attr in ["nounwind", "convergent"] {
            fv.add_attribute(AttributeLoc::Function, self.enum_attr(attr)?);
        }
        if f.constraints.inline_always {
            fv.add_attribute(AttributeLoc::Function, self.enum_attr("alwaysinline")?);
        } else if f.constraints.opt_level == OptLevel::O0 {
            // `optnone` requires `noinline`.
            fv.add_attribute(AttributeLoc::Function, self.enum_attr("noinline")?);
            fv.add_attribute(AttributeLoc::Function, self.enum_attr("optnone")?);
        }
        self.funcs.insert(f.name.clone(), fv);
        Ok(())
    }

    fn enum_attr(&self, name: &str) -> CompileResult<Attribute> {
        let kind = Attribute::get_named_enum_kind_id(name);
        if kind == 0 {
            return Err(CompileError::internal(
                "lowering",
                format!("unknown LLVM attribute {name}"),
            ));
        }
        Ok(self.ctx.create_enum_attribute(kind, 0))
    }

    /// The module's `extern __shared__` array (one per module), aligned to
    /// the largest alignment any `dyn_shared` asks for (at least 16 bytes;
    /// 1024 with TMA tensor copies, see [`lower_module`]).
    fn dyn_shared(&mut self, align: u64) -> GlobalValue<'ctx> {
        let align = u32::try_from(align).unwrap_or(16);
        if let Some(g) = self.dyn_shared {
            if g.get_alignment() < align {
                g.set_alignment(align);
            }
            return g;
        }
        let ty = self.ctx.i8_type().array_type(0);
        let g = self.module.add_global(
            ty,
            Some(inkwell::AddressSpace::from(3u16)),
            "__zyntax_dyn_shared",
        );
        g.set_linkage(Linkage::External);
        g.set_alignment(align.max(16));
        self.dyn_shared = Some(g);
        g
    }

    /// A static shared-memory array for one `shared_alloc`.
    fn shared_global(
        &mut self,
        func: &str,
        elem: &Type,
        count: u64,
        align: u32,
    ) -> CompileResult<GlobalValue<'ctx>> {
        let elem_ty = ty::memory_type(self.ctx, elem)?;
        let n = u32::try_from(count).map_err(|_| {
            CompileError::Unsupported(format!("shared_alloc of {count} elements is too large"))
        })?;
        let arr = elem_ty.array_type(n);
        // PTX identifiers: keep [A-Za-z0-9_$]; the counter keeps names unique.
        let safe: String = func
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let name = format!("__zyntax_shared_{safe}_{}", self.shared_count);
        self.shared_count += 1;
        let g = self
            .module
            .add_global(arr, Some(inkwell::AddressSpace::from(3u16)), &name);
        g.set_linkage(Linkage::Internal);
        g.set_initializer(&arr.get_undef());
        // At least 16 bytes: vector loads and 16-byte cp.async into shared memory need it.
        let align = zyntax_hir::op::shared_align(elem, align);
        g.set_alignment(u32::try_from(align).unwrap_or(16));
        Ok(g)
    }
}

/// The inkwell opcode of a [`scalar::Inst`].
fn opcode(i: Inst) -> inkwell::values::InstructionOpcode {
    use inkwell::values::InstructionOpcode as O;
    match i {
        Inst::Add => O::Add,
        Inst::Sub => O::Sub,
        Inst::Mul => O::Mul,
        Inst::FAdd => O::FAdd,
        Inst::FSub => O::FSub,
        Inst::FMul => O::FMul,
        Inst::FDiv => O::FDiv,
        Inst::FRem => O::FRem,
        Inst::And => O::And,
        Inst::Or => O::Or,
        Inst::Xor => O::Xor,
    }
}

/// The inkwell opcode of a cast named as in textual IR.
fn cast_opcode(name: &str) -> Option<inkwell::values::InstructionOpcode> {
    use inkwell::values::InstructionOpcode as O;
    Some(match name {
        "trunc" => O::Trunc,
        "zext" => O::ZExt,
        "sext" => O::SExt,
        "fpext" => O::FPExt,
        "fptrunc" => O::FPTrunc,
        "sitofp" => O::SIToFP,
        "uitofp" => O::UIToFP,
        _ => return None,
    })
}

/// The inkwell predicate of an `icmp` predicate named as in textual IR.
fn int_predicate(name: &str) -> Option<IntPredicate> {
    Some(match name {
        "eq" => IntPredicate::EQ,
        "ne" => IntPredicate::NE,
        "slt" => IntPredicate::SLT,
        "sle" => IntPredicate::SLE,
        "sgt" => IntPredicate::SGT,
        "sge" => IntPredicate::SGE,
        "ult" => IntPredicate::ULT,
        "ule" => IntPredicate::ULE,
        "ugt" => IntPredicate::UGT,
        "uge" => IntPredicate::UGE,
        _ => return None,
    })
}

/// The inkwell predicate of an `fcmp` predicate named as in textual IR.
fn float_predicate(name: &str) -> Option<FloatPredicate> {
    Some(match name {
        "oeq" => FloatPredicate::OEQ,
        "une" => FloatPredicate::UNE,
        "olt" => FloatPredicate::OLT,
        "ole" => FloatPredicate::OLE,
        "ogt" => FloatPredicate::OGT,
        "oge" => FloatPredicate::OGE,
        _ => return None,
    })
}

pub(crate) struct FnLowering<'a, 'ctx> {
    pub l: &'a mut Lowerer<'ctx>,
    pub f: &'a hir::Function,
    pub fv: FunctionValue<'ctx>,
    pub b: Builder<'ctx>,
    values: Vec<Option<BasicValueEnum<'ctx>>>,
    blocks: Vec<Option<BasicBlock<'ctx>>>,
    phis: Vec<Vec<PhiValue<'ctx>>>,
    /// (phi, incoming HIR value, predecessor LLVM block), resolved at the end.
    pending: Vec<(PhiValue<'ctx>, ValueId, BasicBlock<'ctx>)>,
    prologue: BasicBlock<'ctx>,
    /// The instruction being lowered, for error messages.
    current: Option<InstId>,
    /// The function's debug subprogram, with line information on.
    scope: Option<inkwell::llvm_sys::prelude::LLVMMetadataRef>,
}

impl<'a, 'ctx> FnLowering<'a, 'ctx> {
    fn new(l: &'a mut Lowerer<'ctx>, f: &'a hir::Function) -> CompileResult<Self> {
        let fv = l.function(&f.name)?;
        let b = l.ctx.create_builder();
        let prologue = l.ctx.append_basic_block(fv, "entry");
        let scope = l
            .lines
            .as_mut()
            .map(|li| li.subprogram(fv, &f.name, f.loc.as_ref()));
        Ok(FnLowering {
            values: vec![None; f.values.len()],
            blocks: vec![None; f.blocks.len()],
            phis: vec![Vec::new(); f.blocks.len()],
            pending: Vec::new(),
            l,
            f,
            fv,
            b,
            prologue,
            current: None,
            scope,
        })
    }

    pub fn ctx(&self) -> &'ctx Context {
        self.l.ctx
    }

    /// An internal error naming the function and instruction being lowered.
    pub fn bug(&self, msg: impl std::fmt::Display) -> CompileError {
        let at = match self.current {
            Some(i) => format!("`{}`", hir::print_inst(self.f, i)),
            None => "function entry".to_string(),
        };
        CompileError::internal("lowering", format!("in @{}, {at}: {msg}", self.f.name))
    }

    /// Blocks reachable from the entry, in reverse post-order.
    fn reverse_post_order(&self) -> CompileResult<Vec<BlockId>> {
        let entry = self
            .f
            .entry()
            .ok_or_else(|| self.bug("function has no blocks"))?;
        let n = self.f.blocks.len();
        let mut seen = vec![false; n];
        let mut post = Vec::with_capacity(n);
        // Iterative DFS: (block, next successor index).
        let mut stack: Vec<(BlockId, usize)> = vec![(entry, 0)];
        seen[entry.index()] = true;
        while let Some((blk, i)) = stack.pop() {
            let succs = self.successors(blk);
            if let Some(s) = succs.get(i).copied() {
                stack.push((blk, i + 1));
                if s.index() < n && !seen[s.index()] {
                    seen[s.index()] = true;
                    stack.push((s, 0));
                }
            } else {
                post.push(blk);
            }
        }
        post.reverse();
        Ok(post)
    }

    fn successors(&self, blk: BlockId) -> Vec<BlockId> {
        let Some(last) = self.f.blocks.get(blk.index()).and_then(|b| b.insts.last()) else {
            return Vec::new();
        };
        self.f
            .insts
            .get(last.index())
            .map_or_else(Vec::new, |d| d.targets.iter().map(|t| t.block).collect())
    }

    /// With line information on, the next LLVM instructions come from `loc`.
    fn locate(&mut self, loc: Option<&hir::Loc>) {
        if let (Some(scope), Some(lines)) = (self.scope, self.l.lines.as_mut()) {
            lines.set(self.l.ctx, &self.b, scope, loc);
        }
    }

    fn run(mut self) -> CompileResult<()> {
        // Phis, the prologue's allocas and its branch: the function's line.
        let f: &'a hir::Function = self.f;
        self.locate(f.loc.as_ref());
        let order = self.reverse_post_order()?;
        let entry = order[0];
        let entry_has_preds = order
            .iter()
            .any(|blk| self.successors(*blk).contains(&entry));

        // Create LLVM blocks (in RPO, which is also their order in the output).
        for blk in &order {
            let bb = self.l.ctx.append_basic_block(self.fv, &format!("{blk}"));
            self.blocks[blk.index()] = Some(bb);
        }
        // Block parameters: phis, except for an entry block nobody branches to,
        // whose parameters are the function's.
        let args: Vec<BasicValueEnum<'ctx>> = self.fv.get_param_iter().collect();
        for blk in &order {
            let bb = self.bb(*blk)?;
            let params = self.f.block(*blk).params.clone();
            if *blk == entry && !entry_has_preds {
                for (v, a) in params.iter().zip(&args) {
                    self.set(*v, *a);
                }
                continue;
            }
            self.b.position_at_end(bb);
            for v in &params {
                let t = ty::value_type(self.l.ctx, self.f.value_type(*v))?;
                let phi = self.b.build_phi(t, "")?;
                self.set(*v, phi.as_basic_value());
                self.phis[blk.index()].push(phi);
            }
            if *blk == entry {
                let phis = self.phis[blk.index()].clone();
                for (phi, a) in phis.iter().zip(&args) {
                    phi.add_incoming(&[(a as &dyn BasicValue, self.prologue)]);
                }
            }
        }
        for blk in &order {
            self.b.position_at_end(self.bb(*blk)?);
            let insts = self.f.block(*blk).insts.clone();
            for i in insts {
                self.current = Some(i);
                self.locate(f.insts[i.index()].loc.as_ref());
                self.lower_inst(i)?;
            }
            self.current = None;
        }
        self.locate(f.loc.as_ref());
        // Back edges: incoming values now all exist.
        for (phi, v, pred) in std::mem::take(&mut self.pending) {
            let val = self.val(v)?;
            phi.add_incoming(&[(&val as &dyn BasicValue, pred)]);
        }
        // The prologue (allocas) falls through to the entry block.
        self.b.position_at_end(self.prologue);
        self.b.build_unconditional_branch(self.bb(entry)?)?;
        Ok(())
    }

    fn bb(&self, blk: BlockId) -> CompileResult<BasicBlock<'ctx>> {
        self.blocks
            .get(blk.index())
            .copied()
            .flatten()
            .ok_or_else(|| self.bug(format!("branch to unreachable or unknown {blk}")))
    }

    pub fn val(&self, v: ValueId) -> CompileResult<BasicValueEnum<'ctx>> {
        self.values
            .get(v.index())
            .copied()
            .flatten()
            .ok_or_else(|| self.bug(format!("{v} used before its definition")))
    }

    pub fn set(&mut self, v: ValueId, val: BasicValueEnum<'ctx>) {
        if let Some(slot) = self.values.get_mut(v.index()) {
            *slot = Some(val);
        }
    }

    pub fn hir_ty(&self, v: ValueId) -> &'a Type {
        let f: &'a hir::Function = self.f;
        &f.value(v).ty
    }

    pub fn int(&self, v: ValueId) -> CompileResult<IntValue<'ctx>> {
        match self.val(v)? {
            BasicValueEnum::IntValue(i) => Ok(i),
            other => Err(self.bug(format!("{v} is not an integer: {other:?}"))),
        }
    }

    pub fn ptr(&self, v: ValueId) -> CompileResult<inkwell::values::PointerValue<'ctx>> {
        match self.val(v)? {
            BasicValueEnum::PointerValue(p) => Ok(p),
            other => Err(self.bug(format!("{v} is not a pointer: {other:?}"))),
        }
    }

    /// Call an LLVM intrinsic by its base name with the given overload types.
    pub fn intrinsic(
        &self,
        name: &str,
        overloads: &[BasicTypeEnum<'ctx>],
        args: &[BasicMetadataValueEnum<'ctx>],
    ) -> CompileResult<Option<BasicValueEnum<'ctx>>> {
        let intr =
            Intrinsic::find(name).ok_or_else(|| self.bug(format!("no LLVM intrinsic {name}")))?;
        let decl = intr
            .get_declaration(&self.l.module, overloads)
            .ok_or_else(|| self.bug(format!("bad overload of {name}: {overloads:?}")))?;
        let call = self.b.build_call(decl, args, "")?;
        Ok(call.try_as_basic_value().basic())
    }

    /// Like [`Self::intrinsic`], for intrinsics that return a value.
    pub fn intrinsic_value(
        &self,
        name: &str,
        overloads: &[BasicTypeEnum<'ctx>],
        args: &[BasicMetadataValueEnum<'ctx>],
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        self.intrinsic(name, overloads, args)?
            .ok_or_else(|| self.bug(format!("{name} returned no value")))
    }

    /// Inline PTX. `ret` is the result type, if any; constraints as LLVM spells them.
    pub fn asm(
        &self,
        text: &str,
        constraints: &str,
        ret: Option<BasicTypeEnum<'ctx>>,
        args: &[BasicMetadataValueEnum<'ctx>],
    ) -> CompileResult<Option<BasicValueEnum<'ctx>>> {
        let arg_tys: Vec<BasicMetadataTypeEnum<'ctx>> = args
            .iter()
            .map(|a| match a {
                BasicMetadataValueEnum::IntValue(v) => Ok(v.get_type().into()),
                BasicMetadataValueEnum::FloatValue(v) => Ok(v.get_type().into()),
                BasicMetadataValueEnum::PointerValue(v) => Ok(v.get_type().into()),
                other => Err(self.bug(format!("inline asm operand {other:?}"))),
            })
            .collect::<CompileResult<_>>()?;
        let fn_ty = match ret {
            Some(r) => r.fn_type(&arg_tys, false),
            None => self.l.ctx.void_type().fn_type(&arg_tys, false),
        };
        let asm = self.l.ctx.create_inline_asm(
            fn_ty,
            text.to_string(),
            constraints.to_string(),
            true,
            false,
            None,
            false,
        );
        let call = self.b.build_indirect_call(fn_ty, asm, args, "")?;
        Ok(call.try_as_basic_value().basic())
    }

    /// The LLVM integer type of a width HIR uses.
    pub fn int_ty(&self, bits: u32) -> CompileResult<inkwell::types::IntType<'ctx>> {
        let ctx = self.l.ctx;
        Ok(match bits {
            1 => ctx.bool_type(),
            8 => ctx.i8_type(),
            16 => ctx.i16_type(),
            32 => ctx.i32_type(),
            64 => ctx.i64_type(),
            other => return Err(self.bug(format!("no {other}-bit integers"))),
        })
    }

    pub fn fneg(&self, x: BasicValueEnum<'ctx>) -> CompileResult<BasicValueEnum<'ctx>> {
        Ok(match x {
            BasicValueEnum::FloatValue(f) => self.b.build_float_neg(f, "")?.into(),
            BasicValueEnum::VectorValue(v) => self.b.build_float_neg(v, "")?.into(),
            other => return Err(self.bug(format!("fneg of {other:?}"))),
        })
    }

    pub fn scalar_of(&self, v: ValueId) -> CompileResult<ScalarType> {
        self.hir_ty(v)
            .elem_scalar()
            .ok_or_else(|| self.bug(format!("{v} is not a scalar or vector")))
    }

    pub fn result(&self, d: &hir::InstData, n: usize) -> CompileResult<ValueId> {
        d.results
            .get(n)
            .copied()
            .ok_or_else(|| self.bug(format!("missing result {n}")))
    }

    pub fn arg(&self, d: &hir::InstData, n: usize) -> CompileResult<ValueId> {
        d.args
            .get(n)
            .copied()
            .ok_or_else(|| self.bug(format!("missing operand {n}")))
    }

    fn lower_inst(&mut self, i: InstId) -> CompileResult<()> {
        let f: &'a hir::Function = self.f;
        let d: &'a hir::InstData = f.inst(i);
        match &d.op {
            Op::Const(c) => {
                let r = self.result(d, 0)?;
                let v = self.constant(self.hir_ty(r), *c)?;
                self.set(r, v);
            }
            Op::Binary(op) => {
                let (a, b) = (self.arg(d, 0)?, self.arg(d, 1)?);
                let v = self.binary(*op, a, b)?;
                self.set(self.result(d, 0)?, v);
            }
            Op::Unary(op) => {
                let a = self.arg(d, 0)?;
                let v = self.unary(*op, a)?;
                self.set(self.result(d, 0)?, v);
            }
            Op::Fma => {
                let a = self.arg(d, 0)?;
                let t = ty::value_type(self.l.ctx, self.hir_ty(a))?;
                let args = [
                    self.val(a)?.into(),
                    self.val(self.arg(d, 1)?)?.into(),
                    self.val(self.arg(d, 2)?)?.into(),
                ];
                let v = self.intrinsic_value("llvm.fma", &[t], &args)?;
                self.set(self.result(d, 0)?, v);
            }
            Op::Cmp(op) => {
                let (a, b) = (self.arg(d, 0)?, self.arg(d, 1)?);
                let v = self.compare(*op, a, b)?;
                self.set(self.result(d, 0)?, v);
            }
            Op::Select => {
                let c = self.int(self.arg(d, 0)?)?;
                let a = self.val(self.arg(d, 1)?)?;
                let b = self.val(self.arg(d, 2)?)?;
                let v = self.b.build_select(c, a, b, "")?;
                self.set(self.result(d, 0)?, v);
            }
            Op::Cast => {
                let a = self.arg(d, 0)?;
                let r = self.result(d, 0)?;
                let v = self.cast(a, self.hir_ty(r))?;
                self.set(r, v);
            }
            Op::Bitcast => {
                let a = self.arg(d, 0)?;
                let r = self.result(d, 0)?;
                let v = self.bitcast(a, self.hir_ty(r))?;
                self.set(r, v);
            }
            Op::Extract(lane) => {
                let vec = match self.val(self.arg(d, 0)?)? {
                    BasicValueEnum::VectorValue(v) => v,
                    other => return Err(self.bug(format!("extract from {other:?}"))),
                };
                let idx = self.l.ctx.i32_type().const_int(u64::from(*lane), false);
                let v = self.b.build_extract_element(vec, idx, "")?;
                self.set(self.result(d, 0)?, v);
            }
            Op::Insert(lane) => {
                let vec = match self.val(self.arg(d, 0)?)? {
                    BasicValueEnum::VectorValue(v) => v,
                    other => return Err(self.bug(format!("insert into {other:?}"))),
                };
                let s = self.val(self.arg(d, 1)?)?;
                let idx = self.l.ctx.i32_type().const_int(u64::from(*lane), false);
                let v = self.b.build_insert_element(vec, s, idx, "")?;
                self.set(self.result(d, 0)?, v.into());
            }
            Op::Load => {
                let p = self.arg(d, 0)?;
                let r = self.result(d, 0)?;
                let v = self.load(p, self.hir_ty(r))?;
                self.set(r, v);
            }
            Op::Store => {
                let (p, v) = (self.arg(d, 0)?, self.arg(d, 1)?);
                self.store(p, v)?;
            }
            Op::PtrAdd => {
                let (p, idx) = (self.arg(d, 0)?, self.arg(d, 1)?);
                let v = self.ptr_add(p, idx)?;
                self.set(self.result(d, 0)?, v);
            }
            Op::PtrCast => {
                let p = self.arg(d, 0)?;
                let r = self.result(d, 0)?;
                let from = self.hir_ty(p).addr_space();
                let to = self.hir_ty(r).addr_space();
                let pv = self.ptr(p)?;
                let v = match (from, to) {
                    (Some(_), Some(b)) => {
                        let to_ty = ty::ptr_type(self.l.ctx, b);
                        if pv.get_type() == to_ty {
                            pv // same LLVM space (only the pointee changes)
                        } else {
                            self.b.build_address_space_cast(pv, to_ty, "")?
                        }
                    }
                    _ => return Err(self.bug("ptr_cast of a non-pointer")),
                };
                self.set(r, v.into());
            }
            Op::Alloca { elem, count } => {
                let r = self.result(d, 0)?;
                let v = self.alloca(elem, *count)?;
                self.set(r, v);
            }
            Op::SharedAlloc { elem, count, align } => {
                let g = self.l.shared_global(&f.name, elem, *count, *align)?;
                self.set(self.result(d, 0)?, g.as_pointer_value().into());
            }
            Op::DynShared { elem, align } => {
                let g = self
                    .l
                    .dyn_shared(zyntax_hir::op::shared_align(elem, *align));
                self.set(self.result(d, 0)?, g.as_pointer_value().into());
            }
            Op::GlobalAddr(name) => {
                let p = self.global_addr(name)?;
                self.set(self.result(d, 0)?, p.into());
            }
            Op::Call(name) => self.call(name, d)?,
            Op::Jump => {
                let t = d
                    .targets
                    .first()
                    .ok_or_else(|| self.bug("jump without target"))?;
                self.bind_args(t)?;
                self.b.build_unconditional_branch(self.bb(t.block)?)?;
            }
            Op::Branch => {
                let c = self.int(self.arg(d, 0)?)?;
                let (t, e) = match d.targets.as_slice() {
                    [t, e] => (t, e),
                    _ => return Err(self.bug("br needs two targets")),
                };
                self.bind_args(t)?;
                self.bind_args(e)?;
                self.b
                    .build_conditional_branch(c, self.bb(t.block)?, self.bb(e.block)?)?;
            }
            Op::Return => {
                let vals = d
                    .args
                    .iter()
                    .map(|v| self.val(*v))
                    .collect::<CompileResult<Vec<_>>>()?;
                match vals.as_slice() {
                    [] => self.b.build_return(None)?,
                    [v] => self.b.build_return(Some(v))?,
                    many => self.b.build_aggregate_return(many)?,
                };
            }
            Op::Unreachable => {
                self.b.build_unreachable()?;
            }
            _ => self.lower_gpu(d)?,
        }
        Ok(())
    }

    /// Record the arguments a branch passes to its target's parameters.
    fn bind_args(&mut self, t: &hir::BlockCall) -> CompileResult<()> {
        // The HIR block may have been split (division checks): the branch
        // leaves from the block the builder is in now.
        let pred = self
            .b
            .get_insert_block()
            .ok_or_else(|| self.bug("builder not positioned"))?;
        let phis = self.phis.get(t.block.index()).cloned().unwrap_or_default();
        if phis.len() != t.args.len() {
            return Err(self.bug(format!(
                "{} takes {} arguments, branch passes {}",
                t.block,
                phis.len(),
                t.args.len()
            )));
        }
        for (phi, v) in phis.into_iter().zip(&t.args) {
            self.pending.push((phi, *v, pred));
        }
        Ok(())
    }

    fn constant(&self, t: &Type, c: ConstValue) -> CompileResult<BasicValueEnum<'ctx>> {
        let s = t
            .as_scalar()
            .ok_or_else(|| self.bug(format!("constant of type {t}")))?;
        let lt = ty::scalar_type(self.l.ctx, s);
        Ok(match (lt, c) {
            (BasicTypeEnum::IntType(it), ConstValue::Int(v)) => it.const_int(v as u64, true).into(),
            (BasicTypeEnum::IntType(it), ConstValue::Bool(v)) => {
                it.const_int(u64::from(v), false).into()
            }
            (BasicTypeEnum::FloatType(ft), ConstValue::Float(bits)) => {
                ft.const_float(f64::from_bits(bits)).into()
            }
            (BasicTypeEnum::FloatType(ft), ConstValue::Int(v)) => ft.const_float(v as f64).into(),
            _ => return Err(self.bug(format!("constant {c:?} of type {t}"))),
        })
    }

    fn binary(&mut self, op: BinOp, a: ValueId, b: ValueId) -> CompileResult<BasicValueEnum<'ctx>> {
        if let Some(v) = self.bf16x2_as_fma(op, a, b)? {
            return Ok(v);
        }
        let s = self.scalar_of(a)?;
        let (x, y) = (self.val(a)?, self.val(b)?);
        let lt = x.get_type();
        match scalar::binary(op, class_of(s)) {
            Some(Scalar::Inst(i)) => Ok(self.b.build_binop(opcode(i), x, y, "")?),
            Some(Scalar::Intrinsic(name)) => {
                self.intrinsic_value(name, &[lt], &[x.into(), y.into()])
            }
            Some(Scalar::IntDiv { div, signed }) => self.int_div(div, signed, x, y),
            Some(Scalar::Shift { left, signed }) => self.shift(left, signed, x, y),
            _ => Err(self.bug(format!("{op} on {s}"))),
        }
    }

    /// `add`/`sub`/`mul` of `vec<bf16, 2>` below sm_90 as one `fma.rn.bf16x2`
    /// (sm_80 has no packed bf16 add/sub/mul; LLVM goes through f32 per lane
    /// and folds an `llvm.fma` by 1 back into that): a + b = fma(a, 1, b),
    /// a - b = fma(b, -1, a), a * b = fma(a, b, -0), each exact before its one
    /// rounding, so the results are the same. Inline PTX keeps the fma.
    fn bf16x2_as_fma(
        &mut self,
        op: BinOp,
        a: ValueId,
        b: ValueId,
    ) -> CompileResult<Option<BasicValueEnum<'ctx>>> {
        let pair = hir::Type::Vector(hir::ScalarType::BF16, 2);
        if self.l.arch >= hir::Arch::Sm90 || *self.hir_ty(a) != pair {
            return Ok(None);
        }
        // Constant pairs as b32 bit patterns: 1.0, -1.0, -0.0 in both halves.
        let (k, operands) = match op {
            BinOp::Add => ("0x3F803F80", "$1, zk, $2"),
            BinOp::Sub => ("0xBF80BF80", "$2, zk, $1"),
            BinOp::Mul => ("0x80008000", "$1, $2, zk"),
            _ => return Ok(None),
        };
        let text = format!("{{ .reg .b32 zk; mov.b32 zk, {k}; fma.rn.bf16x2 $0, {operands}; }}");
        let (first, second) = (a, b);
        let i32t = self.l.ctx.i32_type();
        let x = self.b.build_bit_cast(self.val(first)?, i32t, "")?;
        let y = self.b.build_bit_cast(self.val(second)?, i32t, "")?;
        let r = self
            .asm(&text, "=r,r,r", Some(i32t.into()), &[x.into(), y.into()])?
            .ok_or_else(|| self.bug("fma returned nothing"))?;
        let t = ty::value_type(self.l.ctx, &pair)?;
        Ok(Some(self.b.build_bit_cast(r, t, "")?))
    }

    /// Integer division/remainder without LLVM's undefined cases: a zero
    /// divisor traps, `MIN / -1` wraps (see the module docs).
    fn int_div(
        &mut self,
        div: bool,
        signed: bool,
        x: BasicValueEnum<'ctx>,
        y: BasicValueEnum<'ctx>,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let (BasicValueEnum::IntValue(x), BasicValueEnum::IntValue(y)) = (x, y) else {
            return Err(self.bug("integer division on vectors is not supported"));
        };
        let it = x.get_type();
        let zero = it.const_zero();
        let is_zero = self.b.build_int_compare(IntPredicate::EQ, y, zero, "")?;
        let trap_bb = self.l.ctx.append_basic_block(self.fv, "div.zero");
        let ok_bb = self.l.ctx.append_basic_block(self.fv, "div.ok");
        self.b.build_conditional_branch(is_zero, trap_bb, ok_bb)?;
        self.b.position_at_end(trap_bb);
        self.intrinsic("llvm.trap", &[], &[])?;
        self.b.build_unreachable()?;
        self.b.position_at_end(ok_bb);
        let mut divisor = y;
        if signed {
            let bits = it.get_bit_width();
            let min = it.const_int(1u64 << (bits - 1), false);
            let minus_one = it.const_all_ones();
            let x_min = self.b.build_int_compare(IntPredicate::EQ, x, min, "")?;
            let y_m1 = self
                .b
                .build_int_compare(IntPredicate::EQ, y, minus_one, "")?;
            let overflow = self.b.build_and(x_min, y_m1, "")?;
            // MIN / 1 = MIN and MIN % 1 = 0: exactly the wrapped results.
            divisor = self
                .b
                .build_select(overflow, it.const_int(1, false), y, "")?
                .into_int_value();
        }
        let o = match (div, signed) {
            (true, true) => O::SDiv,
            (true, false) => O::UDiv,
            (false, true) => O::SRem,
            (false, false) => O::URem,
        };
        Ok(self.b.build_binop(o, x, divisor, "")?)
    }

    /// PTX shift semantics: amounts >= width clamp (see module docs).
    fn shift(
        &mut self,
        left: bool,
        signed: bool,
        x: BasicValueEnum<'ctx>,
        y: BasicValueEnum<'ctx>,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let (BasicValueEnum::IntValue(xi), BasicValueEnum::IntValue(yi)) = (x, y) else {
            return Err(self.bug("shifts of vectors are not supported"));
        };
        let it = xi.get_type();
        let bits = it.get_bit_width();
        let width = it.const_int(u64::from(bits), false);
        let too_far = self.b.build_int_compare(IntPredicate::UGE, yi, width, "")?;
        if left || !signed {
            let o = if left { O::Shl } else { O::LShr };
            let safe = self.b.build_select(too_far, it.const_zero(), yi, "")?;
            let shifted = self.b.build_binop(o, xi, safe.into_int_value(), "")?;
            Ok(self
                .b
                .build_select(too_far, it.const_zero(), shifted.into_int_value(), "")?)
        } else {
            let max = it.const_int(u64::from(bits - 1), false);
            let amount = self.b.build_select(too_far, max, yi, "")?;
            Ok(self
                .b
                .build_binop(O::AShr, xi, amount.into_int_value(), "")?)
        }
    }

    fn unary(&mut self, op: UnOp, a: ValueId) -> CompileResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let s = self.scalar_of(a)?;
        let x = self.val(a)?;
        let lt = x.get_type();
        let no_poison = self.l.ctx.bool_type().const_zero();
        match scalar::unary(op, class_of(s)) {
            Some(Scalar::FNeg) => self.fneg(x),
            Some(Scalar::Neg) => Ok(self.b.build_binop(O::Sub, lt.const_zero(), x, "")?),
            Some(Scalar::Not) => {
                let ones = all_ones(lt).ok_or_else(|| self.bug("not of a non-integer"))?;
                Ok(self.b.build_binop(O::Xor, x, ones, "")?)
            }
            Some(Scalar::Identity) => Ok(x),
            Some(Scalar::Intrinsic(name)) => self.intrinsic_value(name, &[lt], &[x.into()]),
            Some(Scalar::IntrinsicFalse(name)) => {
                self.intrinsic_value(name, &[lt], &[x.into(), no_poison.into()])
            }
            Some(Scalar::Bfind) => {
                let clz =
                    self.intrinsic_value("llvm.ctlz", &[lt], &[x.into(), no_poison.into()])?;
                let top = lt.into_int_type().const_int(u64::from(s.bits()) - 1, false);
                Ok(self.b.build_binop(O::Sub, top, clz.into_int_value(), "")?)
            }
            Some(Scalar::Math) => self.math(op, s, x),
            _ => Err(self.bug(format!("{op} on {s}"))),
        }
    }

    /// Transcendentals through the PTX approximate instructions, computed in
    /// f32 (f16/bf16/f64 convert to f32 and back; f64 `rsqrt` is exact-rounded
    /// `1/sqrt`). Accuracy is that of CUDA's `__expf`-style intrinsics.
    fn math(
        &mut self,
        op: UnOp,
        s: ScalarType,
        x: BasicValueEnum<'ctx>,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let ctx = self.l.ctx;
        let f32t = ctx.f32_type();
        if s == ScalarType::F64 && op == UnOp::Rsqrt {
            let sq = self.intrinsic_value("llvm.sqrt", &[x.get_type()], &[x.into()])?;
            let one = ctx.f64_type().const_float(1.0);
            return Ok(self
                .b
                .build_binop(O::FDiv, one, sq.into_float_value(), "")?);
        }
        if !matches!(x, BasicValueEnum::FloatValue(_)) {
            return Err(self.bug(format!("{op} on vectors is not supported")));
        }
        let xf = if s == ScalarType::F32 {
            x.into_float_value()
        } else {
            self.b
                .build_cast(
                    if s == ScalarType::F64 {
                        O::FPTrunc
                    } else {
                        O::FPExt
                    },
                    x,
                    f32t,
                    "",
                )?
                .into_float_value()
        };
        let c = |v: f64| f32t.const_float(v);
        let r = match op {
            UnOp::Rsqrt => self.intrinsic_value("llvm.nvvm.rsqrt.approx.f", &[], &[xf.into()])?,
            UnOp::Sin => self.intrinsic_value("llvm.nvvm.sin.approx.f", &[], &[xf.into()])?,
            UnOp::Cos => self.intrinsic_value("llvm.nvvm.cos.approx.f", &[], &[xf.into()])?,
            UnOp::Exp => {
                let t = self
                    .b
                    .build_float_mul(xf, c(std::f64::consts::LOG2_E), "")?;
                self.intrinsic_value("llvm.nvvm.ex2.approx.f", &[], &[t.into()])?
            }
            UnOp::Log => {
                let l2 = self.intrinsic_value("llvm.nvvm.lg2.approx.f", &[], &[xf.into()])?;
                self.b
                    .build_float_mul(l2.into_float_value(), c(std::f64::consts::LN_2), "")?
                    .into()
            }
            UnOp::Tanh => {
                // tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)); exp overflow gives 1.
                let ax = self.intrinsic_value("llvm.fabs", &[f32t.into()], &[xf.into()])?;
                let t = self.b.build_float_mul(
                    ax.into_float_value(),
                    c(2.0 * std::f64::consts::LOG2_E),
                    "",
                )?;
                let e = self.intrinsic_value("llvm.nvvm.ex2.approx.f", &[], &[t.into()])?;
                let den = self.b.build_float_add(e.into_float_value(), c(1.0), "")?;
                let q = self.b.build_float_div(c(2.0), den, "")?;
                let mag = self.b.build_float_sub(c(1.0), q, "")?;
                self.intrinsic_value("llvm.copysign", &[f32t.into()], &[mag.into(), xf.into()])?
            }
            _ => return Err(self.bug(format!("{op} is not a transcendental"))),
        };
        if s == ScalarType::F32 {
            return Ok(r);
        }
        let back = if s == ScalarType::F64 {
            O::FPExt
        } else {
            O::FPTrunc
        };
        Ok(self.b.build_cast(back, r, x.get_type(), "")?)
    }

    fn compare(
        &mut self,
        op: CmpOp,
        a: ValueId,
        b: ValueId,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        let t = self.hir_ty(a);
        let (x, y) = (self.val(a)?, self.val(b)?);
        if let (BasicValueEnum::FloatValue(x), BasicValueEnum::FloatValue(y)) = (x, y) {
            let p = float_predicate(scalar::fcmp(op)).ok_or_else(|| self.bug("fcmp"))?;
            return Ok(self.b.build_float_compare(p, x, y, "")?.into());
        }
        // Pointers compare as unsigned addresses.
        let signed = t.as_scalar().is_some_and(ScalarType::is_signed);
        let p = int_predicate(scalar::icmp(op, signed)).ok_or_else(|| self.bug("icmp"))?;
        match (x, y) {
            (BasicValueEnum::IntValue(x), BasicValueEnum::IntValue(y)) => {
                Ok(self.b.build_int_compare(p, x, y, "")?.into())
            }
            (BasicValueEnum::PointerValue(x), BasicValueEnum::PointerValue(y)) => {
                Ok(self.b.build_int_compare(p, x, y, "")?.into())
            }
            _ => Err(self.bug(format!("cmp on {t}"))),
        }
    }

    fn cast(&mut self, a: ValueId, to: &Type) -> CompileResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let from_s = self.scalar_of(a)?;
        let to_s = to
            .elem_scalar()
            .ok_or_else(|| self.bug(format!("cast to {to}")))?;
        let x = self.val(a)?;
        let dst = ty::value_type(self.l.ctx, to)?;
        match scalar::cast(from_s, to_s) {
            Conv::Same => Ok(x),
            Conv::NonZero => {
                let zero = x.get_type().const_zero();
                Ok(match (x, zero) {
                    (BasicValueEnum::FloatValue(x), BasicValueEnum::FloatValue(z)) => self
                        .b
                        .build_float_compare(FloatPredicate::UNE, x, z, "")?
                        .into(),
                    (BasicValueEnum::IntValue(x), BasicValueEnum::IntValue(z)) => {
                        self.b.build_int_compare(IntPredicate::NE, x, z, "")?.into()
                    }
                    _ => return Err(self.bug(format!("cast of {from_s} to bool"))),
                })
            }
            Conv::Cast(name) => {
                let op = cast_opcode(name).ok_or_else(|| self.bug(format!("cast `{name}`")))?;
                Ok(self.b.build_cast(op, x, dst, "")?)
            }
            Conv::Saturating(name) => self.intrinsic_value(name, &[dst, x.get_type()], &[x.into()]),
            Conv::ViaF32 => {
                let f32v = self.b.build_cast(O::FPExt, x, self.l.ctx.f32_type(), "")?;
                Ok(self.b.build_cast(O::FPTrunc, f32v, dst, "")?)
            }
        }
    }

    fn bitcast(&mut self, a: ValueId, to: &Type) -> CompileResult<BasicValueEnum<'ctx>> {
        use inkwell::values::InstructionOpcode as O;
        let x = self.val(a)?;
        let dst = ty::value_type(self.l.ctx, to)?;
        if x.get_type() == dst {
            return Ok(x);
        }
        let op = match (x, dst) {
            (BasicValueEnum::PointerValue(_), BasicTypeEnum::IntType(_)) => O::PtrToInt,
            (BasicValueEnum::IntValue(_), BasicTypeEnum::PointerType(_)) => O::IntToPtr,
            (BasicValueEnum::PointerValue(_), BasicTypeEnum::PointerType(_)) => O::AddrSpaceCast,
            _ => O::BitCast,
        };
        Ok(self.b.build_cast(op, x, dst, "")?)
    }

    fn load(&mut self, p: ValueId, t: &Type) -> CompileResult<BasicValueEnum<'ctx>> {
        let ptr = self.ptr(p)?;
        let mt = ty::memory_type(self.l.ctx, t)?;
        let v = self.b.build_load(mt, ptr, "")?;
        set_align(v.as_instruction_value(), t.align_bytes());
        if self.hir_ty(p).addr_space() == Some(zyntax_hir::AddrSpace::Constant) {
            if let Some(inst) = v.as_instruction_value() {
                let kind = self.l.ctx.get_kind_id("invariant.load");
                let empty = self.l.ctx.metadata_node(&[]);
                inst.set_metadata(empty, kind)
                    .map_err(|e| self.bug(format!("invariant.load: {e}")))?;
            }
        }
        if t.is_bool() {
            let zero = self.l.ctx.i8_type().const_zero();
            return Ok(self
                .b
                .build_int_compare(IntPredicate::NE, v.into_int_value(), zero, "")?
                .into());
        }
        Ok(v)
    }

    fn store(&mut self, p: ValueId, v: ValueId) -> CompileResult<()> {
        let ptr = self.ptr(p)?;
        let t = self.hir_ty(v);
        let mut x = self.val(v)?;
        if t.is_bool() {
            x = self
                .b
                .build_int_z_extend(x.into_int_value(), self.l.ctx.i8_type(), "")?
                .into();
        }
        let st = self.b.build_store(ptr, x)?;
        set_align(Some(st), t.align_bytes());
        Ok(())
    }

    fn ptr_add(&mut self, p: ValueId, idx: ValueId) -> CompileResult<BasicValueEnum<'ctx>> {
        let pointee = self
            .hir_ty(p)
            .pointee()
            .ok_or_else(|| self.bug("ptr_add on a non-pointer"))?;
        let elem = ty::memory_type(self.l.ctx, pointee)?;
        let ptr = self.ptr(p)?;
        let i = self.int(idx)?;
        let i64t = self.l.ctx.i64_type();
        let signed = self
            .hir_ty(idx)
            .as_scalar()
            .is_some_and(ScalarType::is_signed);
        let i = if i.get_type().get_bit_width() == 64 {
            i
        } else if signed {
            self.b.build_int_s_extend(i, i64t, "")?
        } else {
            self.b.build_int_z_extend(i, i64t, "")?
        };
        // SAFETY (inkwell's `unsafe`): GEP without `inbounds` has no UB of its own.
        let v = unsafe { self.b.build_gep(elem, ptr, &[i], "")? };
        Ok(v.into())
    }

    fn alloca(&mut self, elem: &Type, count: u64) -> CompileResult<BasicValueEnum<'ctx>> {
        let et = ty::memory_type(self.l.ctx, elem)?;
        let n = u32::try_from(count)
            .map_err(|_| CompileError::Unsupported(format!("alloca of {count} elements")))?;
        let here = self.b.get_insert_block();
        // Static allocas live in the prologue so LLVM turns them into registers/locals.
        match self.prologue.get_first_instruction() {
            Some(first) => self.b.position_before(&first),
            None => self.b.position_at_end(self.prologue),
        }
        let a = self.b.build_alloca(et.array_type(n), "")?;
        set_align(a.as_instruction(), elem.align_bytes());
        // NVPTX allocas are generic pointers; HIR's are `local`.
        let local = self.b.build_address_space_cast(
            a,
            ty::ptr_type(self.l.ctx, zyntax_hir::AddrSpace::Local),
            "",
        )?;
        if let Some(bb) = here {
            self.b.position_at_end(bb);
        }
        Ok(local.into())
    }

    fn call(&mut self, name: &str, d: &hir::InstData) -> CompileResult<()> {
        let callee = self.l.function(name)?;
        let args = d
            .args
            .iter()
            .map(|v| self.val(*v).map(BasicMetadataValueEnum::from))
            .collect::<CompileResult<Vec<_>>>()?;
        let call = self.b.build_call(callee, &args, "")?;
        let ret = call.try_as_basic_value().basic();
        match (d.results.as_slice(), ret) {
            ([], _) => {}
            ([r], Some(v)) => self.set(*r, v),
            (rs, Some(BasicValueEnum::StructValue(s))) => {
                for (n, r) in rs.iter().enumerate() {
                    let v = self.b.build_extract_value(s, n as u32, "")?;
                    self.set(*r, v);
                }
            }
            _ => return Err(self.bug(format!("call @{name}: result count mismatch"))),
        }
        Ok(())
    }
}

fn all_ones(t: BasicTypeEnum<'_>) -> Option<BasicValueEnum<'_>> {
    match t {
        BasicTypeEnum::IntType(it) => Some(it.const_all_ones().into()),
        BasicTypeEnum::VectorType(vt) => match vt.get_element_type() {
            BasicTypeEnum::IntType(it) => {
                let ones = it.const_all_ones();
                let lanes = vec![ones; vt.get_size() as usize];
                Some(inkwell::types::VectorType::const_vector(&lanes).into())
            }
            _ => None,
        },
        _ => None,
    }
}

fn set_align(inst: Option<inkwell::values::InstructionValue<'_>>, align: u64) {
    if let Some(i) = inst {
        // Alignment of HIR memory types is a small power of two; ignore failures
        // (LLVM then uses the ABI alignment, which is never larger).
        let _ = i.set_alignment(u32::try_from(align).unwrap_or(1).max(1));
    }
}
