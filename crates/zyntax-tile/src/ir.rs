//! The tile IR: a kernel over tiles, in SSA form.
//!
//! A [`TileProgram`] is run by a grid of program instances, one CTA each; the
//! CTA's threads hold every tile value together (how they share it out is the
//! tile's layout, chosen later by [`crate::infer`]). Scalars are uniform: every
//! thread of the CTA holds the same value. Ops name their results by
//! [`TileId`] / [`ScalarId`]; the types live in the program's tables.

use zyntax_hir::{ApproxOp, BinOp, CmpOp, Type, UnOp};

/// A tile value of a program.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileId(pub u32);

/// A uniform scalar value of a program.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScalarId(pub u32);

/// A global tensor view parameter of a program.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ViewId(pub u32);

/// A value a loop carries: a tile or a scalar.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    Tile(TileId),
    Scalar(ScalarId),
}

/// A tile's static shape and element type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileType {
    pub shape: Vec<u32>,
    pub elem: Type,
}

impl TileType {
    pub fn numel(&self) -> u64 {
        self.shape.iter().map(|&s| u64::from(s)).product()
    }
}

/// A global tensor view: a base pointer with a runtime shape and runtime
/// strides (in elements), so transposed and sliced views are only strides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewParam {
    pub name: String,
    pub elem: Type,
    pub rank: usize,
    /// The dim whose stride the front-end promises is 1, if it knows one;
    /// layout inference makes that dim the fastest-varying one for loads.
    pub unit_stride_dim: Option<usize>,
    /// The alignment in bytes the front-end promises for the base pointer
    /// (with `unit_stride_dim`): runs of consecutive elements along the
    /// unit-stride dim may then be loaded and stored as vectors.
    pub align_bytes: Option<u32>,
}

/// A kernel parameter, in signature order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    View(ViewId),
    Scalar { name: String, id: ScalarId },
}

/// Element-wise ops, by HIR op (the HIR op table gives their meaning).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MapOp {
    Unary(UnOp),
    Binary(BinOp),
    /// A comparison; the result is a `bool` tile.
    Cmp(CmpOp),
    /// `a * b + c`.
    Fma,
    /// `cond ? a : b` (the issue's `where`).
    Where,
    /// A fast approximation of an f32 function (PTX `tanh.approx.f32` and
    /// the like: one MUFU op; error bounds in docs/semantics.md).
    Approx(ApproxOp),
}

/// Row/column reductions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

/// How a `dot` reads its operands. The HIR has no fp8 or tf32 scalar type
/// (its `mma`/`wgmma` name those formats and carry the bits in integer
/// registers), so neither has the tile IR: an fp8 tensor is a `u8` view of
/// its bytes, and the `dot` names the format its bytes are in.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum DotInputs {
    /// By the operands' element type: f32 (exact), f16 or bf16.
    #[default]
    Native,
    /// f32 operands read as tf32: the low 13 mantissa bits dropped, as the
    /// tensor cores read them (wgmma `.tf32`, k8); f32 accumulation.
    Tf32,
    /// `u8` operands holding fp8 e4m3 bytes (wgmma `.e4m3`, k32).
    E4m3,
    /// `u8` operands holding fp8 e5m2 bytes (wgmma `.e5m2`, k32).
    E5m2,
}

impl DotInputs {
    /// Whether the operands are fp8 bytes.
    pub fn is_fp8(self) -> bool {
        matches!(self, DotInputs::E4m3 | DotInputs::E5m2)
    }
}

/// A scalar constant.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Const {
    Int(i64),
    Float(f64),
}

/// One operation. Tile and scalar results are named by id.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A scalar constant of the scalar's type.
    ScalarConst { out: ScalarId, value: Const },
    /// The program instance's index along `axis` (0..3), a `u32`.
    ProgramId { out: ScalarId, axis: u32 },
    /// `a op b` on uniform scalars.
    ScalarBinary {
        out: ScalarId,
        op: BinOp,
        a: ScalarId,
        b: ScalarId,
    },
    /// `a op b` on uniform scalars, a `bool`.
    ScalarCmp {
        out: ScalarId,
        op: CmpOp,
        a: ScalarId,
        b: ScalarId,
    },
    /// The runtime extent of a view along `dim` (a `u32`).
    ViewDim {
        out: ScalarId,
        view: ViewId,
        dim: usize,
    },
    /// A tile with every element `value`.
    Full { out: TileId, value: ScalarId },
    /// The `u32` tile whose every element is its coordinate along `axis`
    /// (`arange(n)` is the 1-D case).
    Iota { out: TileId, axis: usize },
    /// The box of `view` at `origin` with the result's shape; elements outside
    /// the view's runtime shape read as `other`.
    Load {
        out: TileId,
        view: ViewId,
        origin: Vec<ScalarId>,
        other: Const,
    },
    /// Writes `tile` into the box of `view` at `origin`; elements outside the
    /// view are not written.
    Store {
        view: ViewId,
        origin: Vec<ScalarId>,
        tile: TileId,
    },
    /// Adds `tile` into the box of `view` at `origin` with device-scope atomics.
    AtomicAdd {
        view: ViewId,
        origin: Vec<ScalarId>,
        tile: TileId,
    },
    /// Element-wise op over tiles of one shape.
    Map {
        out: TileId,
        op: MapOp,
        args: Vec<TileId>,
    },
    /// Expands the dims of size 1 of `tile` to the result's shape.
    Broadcast { out: TileId, tile: TileId },
    /// Numeric conversion to the result's element type.
    Cast { out: TileId, tile: TileId },
    /// Reduces `axis`; the result keeps it with size 1.
    Reduce {
        out: TileId,
        tile: TileId,
        axis: usize,
        op: ReduceOp,
    },
    /// `acc + a @ b` with `a: [M, K]`, `b: [K, N]`, `acc: [M, N]` (f32),
    /// the operands read as `inputs` says.
    Dot {
        out: TileId,
        a: TileId,
        b: TileId,
        acc: TileId,
        inputs: DotInputs,
    },
    /// The same tile in another layout (inserted by layout inference only).
    ConvertLayout { out: TileId, tile: TileId },
    /// `for iv in (lo..hi).step_by(step)`, carrying values: inside `body`
    /// the carried values are `args`; `yields` feed the next iteration and
    /// the last ones are `results`.
    For {
        lo: ScalarId,
        hi: ScalarId,
        step: ScalarId,
        iv: ScalarId,
        inits: Vec<Value>,
        args: Vec<Value>,
        body: Vec<Op>,
        yields: Vec<Value>,
        results: Vec<Value>,
    },
}

/// A tile program: parameters, value tables and the top-level ops.
#[derive(Clone, Debug, PartialEq)]
pub struct TileProgram {
    pub name: String,
    pub params: Vec<Param>,
    pub views: Vec<ViewParam>,
    pub tiles: Vec<TileType>,
    pub scalars: Vec<Type>,
    pub body: Vec<Op>,
}

impl TileProgram {
    pub fn new(name: impl Into<String>) -> TileProgram {
        TileProgram {
            name: name.into(),
            params: Vec::new(),
            views: Vec::new(),
            tiles: Vec::new(),
            scalars: Vec::new(),
            body: Vec::new(),
        }
    }
    pub fn tile(&self, t: TileId) -> &TileType {
        &self.tiles[t.0 as usize]
    }
    pub fn view(&self, v: ViewId) -> &ViewParam {
        &self.views[v.0 as usize]
    }
    pub fn scalar_type(&self, s: ScalarId) -> &Type {
        &self.scalars[s.0 as usize]
    }
    pub fn new_tile(&mut self, ty: TileType) -> TileId {
        self.tiles.push(ty);
        TileId(self.tiles.len() as u32 - 1)
    }
    pub fn new_scalar(&mut self, ty: Type) -> ScalarId {
        self.scalars.push(ty);
        ScalarId(self.scalars.len() as u32 - 1)
    }
}
