//! # zyntax-hir
//!
//! The high-level IR every zyntax front-end produces and every backend consumes:
//! a typed SSA IR with blocks that take parameters, whose instruction set
//! includes the GPU primitives (thread/block indices, barriers, fences, shared
//! memory, scoped atomics, warp shuffle/vote/match, tensor-core MMA, async copy).
//!
//! - [`types`]: scalar, vector, array, pointer (with address space) and MMA fragment types.
//! - [`op`]: the instruction set and its `.zir` mnemonics.
//! - [`ir`]: functions (arenas of values, blocks, instructions) and modules.
//! - [`builder`]: [`FunctionBuilder`] with structured if/for helpers.
//! - [`ssa`]: variables (`declare_var`/`def_var`/`use_var`, sealed blocks): SSA
//!   construction inside the builder.
//! - [`verify`]: the verifier; every invariant it checks is listed there.
//! - [`printer`] / [`parser`]: the `.zir` text format (see `docs/zir.md`).
//! - [`arch`]: which instructions each target arch and PTX version allows.
//! - [`table`]: one row per instruction (mnemonic, operands, effects, builders, doc);
//!   [`gen`] renders the docs table and the Python bindings from it.
//! - [`imm`]: instruction immediates as data; the parser and printer follow them.
//! - [`version`]: the format version of `.zir` and JSON, and its history.
//!
//! This crate knows nothing of LLVM, CUDA or Python.

pub mod arch;
pub mod builder;
pub mod entities;
pub mod error;
pub mod gen;
pub mod imm;
pub mod infer;
pub mod ir;
pub mod op;
pub mod parser;
pub mod printer;
pub mod sig;
pub mod ssa;
pub mod table;
pub mod target;
pub mod tensormap;
pub mod types;
pub mod verify;
pub mod version;

pub use builder::{frag_type, normalize_int, BuildResult, ForFrame, FunctionBuilder, IfFrame};
pub use entities::{BlockId, InstId, ValueId};
pub use error::{BuildError, Diagnostic, Loc, ParseError, VerifyError};
pub use ir::{
    BlockCall, BlockData, Constraints, Function, FunctionKind, GlobalVar, InstData, KernelInfo,
    Module, ValueData, ValueDef,
};
pub use op::BulkRedOp;
pub use op::{
    ApproxOp, AtomicOp, BinOp, BitOp, CacheHint, CacheOp, ClusterBarrierOp, CmpOp, ConstValue, Dim,
    GriddepOp, MatchMode, MbarrierOp, MmaElem, Op, OpClass, OptLevel, PackFmt, ReduxOp, Scope,
    ShflMode, Swizzle, UnOp, VoteMode, WarpShape, Wgmma,
};
pub use parser::{parse_module, parse_module_named};
pub use printer::{print_function, print_inst, print_module, print_module_located};
pub use ssa::Var;
pub use target::{Arch, PtxVersion};
pub use types::{
    AddrSpace, FragKind, FragType, Layout, MmaShape, ScalarType, Type, MAX_TYPE_DEPTH,
};
pub use verify::{uses_grid_sync, verify_function, verify_module};
pub use version::FORMAT_VERSION;
