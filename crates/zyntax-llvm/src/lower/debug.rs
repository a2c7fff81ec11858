//! Line information: each instruction's source location (`hir::Loc`, the
//! Python line of a `@zyntax.kernel` op or the `.zir` line) as an LLVM debug
//! location, so that the NVPTX printer writes `.file` / `.loc` directives
//! (what `nvcc -lineinfo` gives; profilers map SASS back to source with it).
//!
//! The compile unit's emission kind is LLVM's `DebugDirectivesOnly`: PTX
//! gets the `.loc` lines and nothing else. `LineTablesOnly` would also emit
//! DWARF sections and mark the module `.target sm_XX, debug`, which makes
//! ptxas build a larger, debug-flavoured cubin. The LLVM-C enum stops at
//! `LineTablesOnly`, so the compile unit is created through a declaration of
//! the same C function that takes the kind as the integer it is in C.

use inkwell::context::AsContextRef;
use inkwell::llvm_sys::core::{
    LLVMAddModuleFlag, LLVMConstInt, LLVMInt32TypeInContext, LLVMSetCurrentDebugLocation2,
    LLVMValueAsMetadata,
};
use inkwell::llvm_sys::debuginfo::{
    LLVMCreateDIBuilder, LLVMDIBuilderCreateDebugLocation, LLVMDIBuilderCreateFile,
    LLVMDIBuilderCreateFunction, LLVMDIBuilderCreateSubroutineType, LLVMDIBuilderFinalize,
    LLVMDIFlagZero, LLVMDWARFSourceLanguage, LLVMDisposeDIBuilder,
};
use inkwell::llvm_sys::prelude::{LLVMBool, LLVMDIBuilderRef, LLVMMetadataRef};
use inkwell::llvm_sys::LLVMModuleFlagBehavior;
use inkwell::values::{AsValueRef, FunctionValue};
use std::collections::HashMap;
use std::ffi::{c_char, c_uint};
use zyntax_hir::Loc;

/// `llvm::DICompileUnit::DebugDirectivesOnly`.
const DEBUG_DIRECTIVES_ONLY: c_uint = 3;

extern "C" {
    /// `LLVMDIBuilderCreateCompileUnit` with the emission kind as its C
    /// integer (llvm-sys's enum has no `DebugDirectivesOnly`).
    #[link_name = "LLVMDIBuilderCreateCompileUnit"]
    fn create_compile_unit(
        builder: LLVMDIBuilderRef,
        lang: LLVMDWARFSourceLanguage,
        file: LLVMMetadataRef,
        producer: *const c_char,
        producer_len: usize,
        is_optimized: LLVMBool,
        flags: *const c_char,
        flags_len: usize,
        runtime_ver: c_uint,
        split_name: *const c_char,
        split_name_len: usize,
        kind: c_uint,
        dwo_id: c_uint,
        split_debug_inlining: LLVMBool,
        debug_info_for_profiling: LLVMBool,
        sys_root: *const c_char,
        sys_root_len: usize,
        sdk: *const c_char,
        sdk_len: usize,
    ) -> LLVMMetadataRef;
}

/// The module's debug-info builder, its compile unit and its files.
pub(crate) struct LineInfo {
    di: LLVMDIBuilderRef,
    /// The compile unit's file, for functions without a located file.
    cu_file: LLVMMetadataRef,
    files: HashMap<String, LLVMMetadataRef>,
    /// `subroutine type` shared by every function (line tables need no types).
    fn_type: LLVMMetadataRef,
}

impl LineInfo {
    /// Sets up line information for `module`, naming `first_file` as the
    /// compile unit's file (any file will do: each function names its own).
    pub(crate) fn new(module: &inkwell::module::Module<'_>, first_file: &str) -> LineInfo {
        // SAFETY: `module` is live for the lowering; the builder is disposed
        // in `finish`, after `LLVMDIBuilderFinalize`.
        unsafe {
            let m = module.as_mut_ptr();
            let di = LLVMCreateDIBuilder(m);
            let mut files = HashMap::new();
            let file = make_file(di, first_file);
            files.insert(first_file.to_string(), file);
            let producer = "zyntax";
            let none = c"".as_ptr();
            // The unit is recorded in the module's `llvm.dbg.cu` and becomes
            // every subprogram's unit: nothing here needs its handle.
            create_compile_unit(
                di,
                LLVMDWARFSourceLanguage::LLVMDWARFSourceLanguagePython,
                file,
                producer.as_ptr().cast(),
                producer.len(),
                1,
                none,
                0,
                0,
                none,
                0,
                DEBUG_DIRECTIVES_ONLY,
                0,
                0,
                0,
                none,
                0,
                none,
                0,
            );
            let fn_type = LLVMDIBuilderCreateSubroutineType(
                di,
                file,
                std::ptr::null_mut(),
                0,
                LLVMDIFlagZero,
            );
            // Without this flag LLVM drops the debug metadata as outdated.
            let ctx = module.get_context().as_ctx_ref();
            let three = LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(ctx), 3, 0));
            let key = "Debug Info Version";
            LLVMAddModuleFlag(
                m,
                LLVMModuleFlagBehavior::LLVMModuleFlagBehaviorWarning,
                key.as_ptr().cast(),
                key.len(),
                three,
            );
            LineInfo {
                di,
                cu_file: file,
                files,
                fn_type,
            }
        }
    }

    fn file(&mut self, path: &str) -> LLVMMetadataRef {
        if let Some(f) = self.files.get(path) {
            return *f;
        }
        // SAFETY: `self.di` is live until `finish`.
        let f = unsafe { make_file(self.di, path) };
        self.files.insert(path.to_string(), f);
        f
    }

    /// A subprogram for `fv` (named `name`, starting at `loc`), attached to it.
    pub(crate) fn subprogram(
        &mut self,
        fv: FunctionValue<'_>,
        name: &str,
        loc: Option<&Loc>,
    ) -> LLVMMetadataRef {
        let file = match loc.and_then(|l| l.file.as_deref()) {
            Some(path) => self.file(path),
            None => self.cu_file,
        };
        let line = loc.map_or(0, |l| l.line);
        // SAFETY: `self.di` is live; `fv` belongs to the builder's module.
        unsafe {
            let sp = LLVMDIBuilderCreateFunction(
                self.di,
                file,
                name.as_ptr().cast(),
                name.len(),
                name.as_ptr().cast(),
                name.len(),
                file,
                line,
                self.fn_type,
                0,
                1,
                line,
                LLVMDIFlagZero,
                1,
            );
            inkwell::llvm_sys::debuginfo::LLVMSetSubprogram(fv.as_value_ref(), sp);
            sp
        }
    }

    /// Points `b`'s next instructions at `loc` in `scope` (line 0, "no source
    /// line", without one: a function with line information must give every
    /// call a location, and LLVM's line 0 keeps the previous `.loc` from
    /// claiming code it did not produce). A location in another file than the
    /// function's is still attributed to that file: `.loc` names its own.
    pub(crate) fn set(
        &mut self,
        ctx: &inkwell::context::Context,
        b: &inkwell::builder::Builder<'_>,
        scope: LLVMMetadataRef,
        loc: Option<&Loc>,
    ) {
        let (line, col) = loc.map_or((0, 0), |l| (l.line, l.col));
        // SAFETY: `scope` is a subprogram of this builder's module.
        unsafe {
            let dl = LLVMDIBuilderCreateDebugLocation(
                ctx.as_ctx_ref(),
                line,
                col,
                scope,
                std::ptr::null_mut(),
            );
            LLVMSetCurrentDebugLocation2(b.as_mut_ptr(), dl);
        }
    }

    /// Resolves the debug metadata; call once, after every function is lowered.
    pub(crate) fn finish(self) {
        // SAFETY: finalize then dispose, once (`self` is consumed).
        unsafe {
            LLVMDIBuilderFinalize(self.di);
            LLVMDisposeDIBuilder(self.di);
        }
    }
}

/// A `DIFile` for `path`, split into directory and name as DWARF wants.
///
/// # Safety
/// `di` must be a live DIBuilder.
unsafe fn make_file(di: LLVMDIBuilderRef, path: &str) -> LLVMMetadataRef {
    let p = std::path::Path::new(path);
    let name = p
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned());
    let dir = p
        .parent()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    LLVMDIBuilderCreateFile(
        di,
        name.as_ptr().cast(),
        name.len(),
        dir.as_ptr().cast(),
        dir.len(),
    )
}
