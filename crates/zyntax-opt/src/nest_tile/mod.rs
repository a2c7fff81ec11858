//! Loop nests recognised as maps and contractions and lowered to tile
//! programs (issue 26): a front-end describes a nest declaratively (its
//! loops, its buffers, affine accesses and an element-wise body) as a
//! [`NestSpec`]; [`recognize`] says what it is — a map, a contraction
//! `C[i,j] = epilogue(Σ_k A[i,k]·B[k,j])` with any strides or transposition,
//! another sum over one loop, or a [`Refusal`] saying why not — and
//! [`lower`] builds a `zyntax_tile` program for it (blocked masked tiles for
//! maps; a K loop of `load`s and `dot` on tensor cores or FFMA for
//! contractions; a K loop of masked tile sums for other reductions) and
//! returns the verified
//! HIR kernel with its launch: grid and one [`ViewArg`] per kernel view.
//! A refused nest keeps today's lowering ([`crate::nest`]). [`parse`]
//! reads a nest from a tiny text language (an embedder's DSL, the
//! `nest_dsl` example) and [`evaluate`] runs one directly in f64 (the
//! reference its lowering is checked against). [`fuse`] merges a sequence
//! of nests (element-wise consumers into their producer: a contraction's
//! epilogue), the resource check on the fused kernel's measurement. See
//! `docs/tiling.md`, "Nests lowered to tile programs".

mod eval;
mod fuse;
mod lower;
mod recognize;
mod text;

pub use eval::evaluate;
pub use fuse::{fuse, FuseOptions, FusedNests, Resources};
pub use lower::{lower, NestKernel, NestTileOptions, ViewArg, DEFAULT_SMS};
pub use recognize::{recognize, ContractionPlan, FlatAccess, MapPlan, Recognition, ReductionPlan};
pub use text::{gelu, parse, parse_with, ParseError};
/// The tile-layer types a caller of [`lower`] sees (schedules, the kernel).
pub use zyntax_tile::{DotPath, Schedule, TileError, TileKernel};

use zyntax_hir::{BinOp, Type, UnOp};

/// One loop of a nest: its name (for reports), its extent, and whether its
/// iterations are independent (`Parallel`) or summed (`Reduction`).
#[derive(Clone, Debug, PartialEq)]
pub struct Loop {
    pub name: String,
    pub extent: u64,
    pub kind: LoopKind,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LoopKind {
    Parallel,
    Reduction,
}

impl Loop {
    pub fn parallel(name: &str, extent: u64) -> Loop {
        Loop {
            name: name.into(),
            extent,
            kind: LoopKind::Parallel,
        }
    }
    pub fn reduction(name: &str, extent: u64) -> Loop {
        Loop {
            name: name.into(),
            extent,
            kind: LoopKind::Reduction,
        }
    }
}

/// A buffer the nest reads or writes: a contiguous row-major array of
/// `shape` elements of `elem` (kernel argument `buffers[i]` at launch).
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub name: String,
    pub elem: Type,
    pub shape: Vec<u64>,
}

impl Buffer {
    pub fn new(name: &str, elem: Type, shape: &[u64]) -> Buffer {
        Buffer {
            name: name.into(),
            elem,
            shape: shape.to_vec(),
        }
    }
}

/// `Σ coefficient · loop + constant` (loops by their position in
/// [`NestSpec::loops`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Affine {
    pub terms: Vec<(usize, i64)>,
    pub constant: i64,
}

impl Affine {
    /// The loop index itself.
    pub fn var(l: usize) -> Affine {
        Affine {
            terms: vec![(l, 1)],
            constant: 0,
        }
    }
}

/// One index of an access: affine in the loops, or something else (an
/// indirect or data-dependent index), described for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Index {
    Affine(Affine),
    Opaque(String),
}

/// `buffer[index_0, index_1, ...]`, one index per dim of the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    pub buffer: usize,
    pub index: Vec<Index>,
}

impl Access {
    /// `buffer[l0, l1, ...]`: each index one loop.
    pub fn at(buffer: usize, loops: &[usize]) -> Access {
        Access {
            buffer,
            index: loops
                .iter()
                .map(|&l| Index::Affine(Affine::var(l)))
                .collect(),
        }
    }
}

/// The element-wise body. `Reduced` is the sum over the reduction loops,
/// usable only in an epilogue.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Load(Access),
    Const(f64),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Reduced,
}

impl Expr {
    pub fn load(buffer: usize, loops: &[usize]) -> Expr {
        Expr::Load(Access::at(buffer, loops))
    }
    pub fn unary(op: UnOp, a: Expr) -> Expr {
        Expr::Unary(op, Box::new(a))
    }
    pub fn binary(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::Binary(op, Box::new(a), Box::new(b))
    }
}

/// A loop nest: `output = value` over the parallel loops when there is no
/// reduction loop (a map), else
/// `output = epilogue(Σ_{reduction loops} value)` (`epilogue` defaults to
/// [`Expr::Reduced`]; `C[i,j] += Σ ...` is the epilogue
/// `Reduced + C[i,j]`).
#[derive(Clone, Debug, PartialEq)]
pub struct NestSpec {
    pub name: String,
    pub loops: Vec<Loop>,
    pub buffers: Vec<Buffer>,
    pub output: Access,
    pub value: Expr,
    pub epilogue: Option<Expr>,
}

/// Why a nest is not lowered to tiles.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// The description is inconsistent (a loop or buffer that does not
    /// exist, an index count that is not the buffer's rank, a zero extent).
    BadSpec,
    /// An index that is not affine in the loops.
    NonAffineIndex,
    /// A reversed access (negative stride) or one that leaves its buffer.
    UnsupportedAccess,
    /// An element type the tile path does not take.
    UnsupportedDtype,
    /// An op the tile path does not lower.
    UnsupportedOp,
    /// Iterations of a parallel loop that depend on each other: two write
    /// the same element, or one reads what another writes.
    LoopCarriedDependence,
    /// An epilogue that reads along the reduction loop.
    NotAContraction,
    /// A nest shape not lowered yet (rank, batched contraction).
    UnsupportedShape,
}

/// A refusal: its kind and a sentence naming the loop, buffer or op.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(kind: RefusalKind, message: impl Into<String>) -> Refusal {
        Refusal {
            kind,
            message: message.into(),
        }
    }
}

/// The error of [`lower`]: a refused nest (keep today's lowering) or a tile
/// layer error (a user-given schedule that does not fit, say).
#[derive(Debug, thiserror::Error)]
pub enum NestTileError {
    #[error("nest not lowered to tiles: {0}")]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Tile(#[from] zyntax_tile::TileError),
}

/// A one-line report of what [`recognize`] found, or why it refused.
pub fn tiling_report(spec: &NestSpec) -> String {
    match recognize(spec) {
        Ok(r) => format!("{}: {}", spec.name, r.describe(spec)),
        Err(e) => format!("{}: not tiled ({:?}): {}", spec.name, e.kind, e.message),
    }
}
