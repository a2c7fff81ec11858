//! [`TileBuilder`]: the Rust API a DSL uses to write a tile program.
//!
//! Ops return handles at once and check their operands as they are added;
//! the first error is kept (naming the op and operand) and returned by
//! [`TileBuilder::finish`], so a program reads as straight-line code with one
//! `?` at the end. Ops after an error return placeholder handles.

use crate::error::{TileError, TileResult};
use crate::ir::*;
use crate::lower::{lower, TileKernel};
use crate::schedule::Schedule;
use zyntax_hir::{BinOp, CmpOp, Type};

// The tile ops (element-wise, broadcast, cast, reduce, dot, loops).
mod ops;

/// Most elements of one tile (a tile is unrolled into registers; the
/// register check at lowering is the real limit, this one keeps the
/// arithmetic on shapes far from overflow).
pub const MAX_TILE_ELEMENTS: u64 = 1 << 20;

/// Builds one tile program for one schedule.
pub struct TileBuilder {
    program: TileProgram,
    schedule: Schedule,
    /// Open regions: the program body, then the bodies of enclosing loops.
    regions: Vec<Vec<Op>>,
    error: Option<TileError>,
}

impl From<TileId> for Value {
    fn from(t: TileId) -> Value {
        Value::Tile(t)
    }
}

impl From<ScalarId> for Value {
    fn from(s: ScalarId) -> Value {
        Value::Scalar(s)
    }
}

impl Value {
    /// The tile; a scalar gives an invalid handle, reported by the op using it.
    pub fn tile(self) -> TileId {
        match self {
            Value::Tile(t) => t,
            Value::Scalar(_) => TileId(u32::MAX),
        }
    }
    /// The scalar; a tile gives an invalid handle, reported by the op using it.
    pub fn scalar(self) -> ScalarId {
        match self {
            Value::Scalar(s) => s,
            Value::Tile(_) => ScalarId(u32::MAX),
        }
    }
}

fn elem_name(t: &Type) -> String {
    t.to_string()
}

impl TileBuilder {
    pub fn new(name: impl Into<String>, schedule: Schedule) -> TileBuilder {
        TileBuilder {
            program: TileProgram::new(name),
            schedule,
            regions: vec![Vec::new()],
            error: None,
        }
    }

    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The program so far (for inspection and tests).
    pub fn program(&self) -> &TileProgram {
        &self.program
    }

    /// Lowers the program to a verified HIR kernel, or returns the first error.
    pub fn finish(mut self) -> TileResult<TileKernel> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.schedule.validate()?;
        if self.regions.len() != 1 {
            return Err(TileError::Internal("a loop body is still open".into()));
        }
        self.program.body = self.regions.pop().unwrap_or_default();
        lower(self.program, &self.schedule)
    }

    // ---------------------------------------------------------------- plumbing

    fn fail(&mut self, e: TileError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    fn push(&mut self, op: Op) {
        if self.error.is_none() {
            if let Some(region) = self.regions.last_mut() {
                region.push(op);
            }
        }
    }

    fn tile_type(
        &mut self,
        op: &'static str,
        operand: &'static str,
        t: TileId,
    ) -> Option<TileType> {
        match self.program.tiles.get(t.0 as usize) {
            Some(ty) => Some(ty.clone()),
            None => {
                self.fail(TileError::BadOperand {
                    op,
                    operand,
                    message: format!("{t:?} is not a tile of this program"),
                });
                None
            }
        }
    }

    fn scalar_of(&mut self, op: &'static str, operand: &'static str, s: ScalarId) -> Option<Type> {
        match self.program.scalars.get(s.0 as usize) {
            Some(ty) => Some(ty.clone()),
            None => {
                self.fail(TileError::BadOperand {
                    op,
                    operand,
                    message: format!("{s:?} is not a scalar of this program"),
                });
                None
            }
        }
    }

    fn view_of(&mut self, op: &'static str, v: ViewId) -> Option<ViewParam> {
        match self.program.views.get(v.0 as usize) {
            Some(p) => Some(p.clone()),
            None => {
                self.fail(TileError::BadOperand {
                    op,
                    operand: "view",
                    message: format!("{v:?} is not a view of this program"),
                });
                None
            }
        }
    }

    fn check_shape(&mut self, op: &'static str, operand: &'static str, shape: &[u32]) -> bool {
        let numel = shape
            .iter()
            .fold(1u64, |n, &s| n.saturating_mul(u64::from(s)));
        if shape.is_empty()
            || shape.len() > 3
            || shape.iter().any(|s| !s.is_power_of_two())
            || numel > MAX_TILE_ELEMENTS
        {
            self.fail(TileError::ShapeMismatch {
                op,
                operand,
                expected: format!(
                    "1 to 3 dims, each a power of two, at most {MAX_TILE_ELEMENTS} elements"
                ),
                found: shape.to_vec(),
            });
            return false;
        }
        true
    }

    fn scalar(&mut self, ty: Type) -> ScalarId {
        self.program.new_scalar(ty)
    }

    fn tile(&mut self, shape: Vec<u32>, elem: Type) -> TileId {
        self.program.new_tile(TileType { shape, elem })
    }

    /// A placeholder result for an op that failed.
    fn dead_tile(&mut self) -> TileId {
        self.tile(vec![1], Type::F32)
    }

    // ---------------------------------------------------------------- parameters and scalars

    /// A global tensor view of `rank` dims of `elem` (kernel parameters: a
    /// pointer, then `rank` extents and `rank` strides in elements, all `u32`).
    pub fn view_param(&mut self, name: &str, elem: Type, rank: usize) -> ViewId {
        self.add_view(name, elem, rank, None, None)
    }

    /// A view whose dim `dim` the caller promises has stride 1 (loads are then
    /// coalesced along it).
    pub fn view_param_unit_stride(
        &mut self,
        name: &str,
        elem: Type,
        rank: usize,
        dim: usize,
    ) -> ViewId {
        if dim >= rank {
            self.fail(TileError::BadAxis {
                op: "view_param_unit_stride",
                axis: dim,
                rank,
            });
        }
        self.add_view(
            name,
            elem,
            rank,
            Some(dim.min(rank.saturating_sub(1))),
            None,
        )
    }

    /// A view whose dim `dim` has stride 1 and whose base pointer is aligned
    /// to `align_bytes` (a power of two, at most 16), both promised by the
    /// caller: a thread's consecutive elements along `dim` are then accessed
    /// as one vector where the whole vector is in bounds and its address is
    /// aligned (checked at run time; other accesses stay scalar).
    pub fn view_param_aligned(
        &mut self,
        name: &str,
        elem: Type,
        rank: usize,
        dim: usize,
        align_bytes: u32,
    ) -> ViewId {
        if dim >= rank {
            self.fail(TileError::BadAxis {
                op: "view_param_aligned",
                axis: dim,
                rank,
            });
        }
        if !align_bytes.is_power_of_two() || align_bytes > 16 {
            self.fail(TileError::BadOperand {
                op: "view_param_aligned",
                operand: "align_bytes",
                message: format!("{align_bytes} is not a power of two up to 16"),
            });
        }
        let unit = Some(dim.min(rank.saturating_sub(1)));
        self.add_view(name, elem, rank, unit, Some(align_bytes))
    }

    fn add_view(
        &mut self,
        name: &str,
        elem: Type,
        rank: usize,
        unit: Option<usize>,
        align_bytes: Option<u32>,
    ) -> ViewId {
        // Views may have one dim more than tiles: a load or store of a
        // lower-rank tile indexes the leading dims (see `load_or`).
        if !(1..=4).contains(&rank) {
            self.fail(TileError::BadAxis {
                op: "view_param",
                axis: rank,
                rank: 4,
            });
        }
        if elem.as_scalar().is_none() || elem == Type::BOOL {
            self.fail(TileError::UnsupportedDtype {
                op: "view_param",
                operand: "elem",
                found: elem_name(&elem),
                why: "views hold numeric scalars".into(),
            });
        }
        self.program.views.push(ViewParam {
            name: name.to_string(),
            elem,
            rank,
            unit_stride_dim: unit,
            align_bytes,
        });
        let id = ViewId(self.program.views.len() as u32 - 1);
        self.program.params.push(Param::View(id));
        id
    }

    /// A scalar kernel parameter.
    pub fn scalar_param(&mut self, name: &str, ty: Type) -> ScalarId {
        if ty.as_scalar().is_none() {
            self.fail(TileError::UnsupportedDtype {
                op: "scalar_param",
                operand: "ty",
                found: elem_name(&ty),
                why: "scalar parameters are HIR scalars".into(),
            });
        }
        let id = self.scalar(ty);
        self.program.params.push(Param::Scalar {
            name: name.to_string(),
            id,
        });
        id
    }

    /// This program instance's index along `axis` (0, 1 or 2).
    pub fn program_id(&mut self, axis: u32) -> ScalarId {
        if axis > 2 {
            self.fail(TileError::BadAxis {
                op: "program_id",
                axis: axis as usize,
                rank: 3,
            });
        }
        let out = self.scalar(Type::U32);
        self.push(Op::ProgramId { out, axis });
        out
    }

    /// A `u32` constant.
    pub fn index(&mut self, value: u32) -> ScalarId {
        self.constant(Type::U32, Const::Int(i64::from(value)))
    }

    /// A constant of scalar type `ty`.
    pub fn constant(&mut self, ty: Type, value: Const) -> ScalarId {
        let out = self.scalar(ty);
        self.push(Op::ScalarConst { out, value });
        out
    }

    /// The runtime extent of `view` along `dim`.
    pub fn dim(&mut self, view: ViewId, dim: usize) -> ScalarId {
        let out = self.scalar(Type::U32);
        if let Some(v) = self.view_of("dim", view) {
            if dim >= v.rank {
                self.fail(TileError::BadAxis {
                    op: "dim",
                    axis: dim,
                    rank: v.rank,
                });
            }
        }
        self.push(Op::ViewDim { out, view, dim });
        out
    }

    /// `a op b` on scalars of one type.
    pub fn scalar_binary(&mut self, op: BinOp, a: ScalarId, b: ScalarId) -> ScalarId {
        let ta = self.scalar_of("scalar_binary", "a", a);
        let tb = self.scalar_of("scalar_binary", "b", b);
        let ty = ta.clone().unwrap_or(Type::U32);
        if let (Some(ta), Some(tb)) = (ta, tb) {
            if ta != tb {
                self.fail(TileError::UnsupportedDtype {
                    op: "scalar_binary",
                    operand: "b",
                    found: elem_name(&tb),
                    why: format!("`a` is {ta}"),
                });
            }
        }
        let out = self.scalar(ty);
        self.push(Op::ScalarBinary { out, op, a, b });
        out
    }

    pub fn scalar_add(&mut self, a: ScalarId, b: ScalarId) -> ScalarId {
        self.scalar_binary(BinOp::Add, a, b)
    }

    pub fn scalar_mul(&mut self, a: ScalarId, b: ScalarId) -> ScalarId {
        self.scalar_binary(BinOp::Mul, a, b)
    }

    /// `a op b` on scalars of one type, a `bool`.
    pub fn scalar_cmp(&mut self, op: CmpOp, a: ScalarId, b: ScalarId) -> ScalarId {
        let ta = self.scalar_of("scalar_cmp", "a", a);
        let tb = self.scalar_of("scalar_cmp", "b", b);
        if let (Some(ta), Some(tb)) = (ta, tb) {
            if ta != tb {
                self.fail(TileError::UnsupportedDtype {
                    op: "scalar_cmp",
                    operand: "b",
                    found: elem_name(&tb),
                    why: format!("`a` is {ta}"),
                });
            }
        }
        let out = self.scalar(Type::BOOL);
        self.push(Op::ScalarCmp { out, op, a, b });
        out
    }

    // ---------------------------------------------------------------- tile creation and memory

    /// A tile of `shape` with every element `value` (a scalar of the element type).
    pub fn splat(&mut self, shape: &[u32], value: ScalarId) -> TileId {
        let Some(elem) = self.scalar_of("splat", "value", value) else {
            return self.dead_tile();
        };
        if !self.check_shape("splat", "shape", shape) {
            return self.dead_tile();
        }
        let out = self.tile(shape.to_vec(), elem);
        self.push(Op::Full { out, value });
        out
    }

    /// A tile of `shape` of `elem` with every element `value`.
    pub fn full(&mut self, shape: &[u32], elem: Type, value: f64) -> TileId {
        let c = if elem.is_float() {
            Const::Float(value)
        } else {
            Const::Int(value as i64)
        };
        let s = self.constant(elem, c);
        self.splat(shape, s)
    }

    /// The `u32` tile `[0, 1, ..., n - 1]`.
    pub fn arange(&mut self, n: u32) -> TileId {
        self.iota(&[n], 0)
    }

    /// The `u32` tile of `shape` whose elements are their coordinate along
    /// `axis` (row or column indices, for masks such as causal ones).
    pub fn iota(&mut self, shape: &[u32], axis: usize) -> TileId {
        if !self.check_shape("iota", "shape", shape) {
            return self.dead_tile();
        }
        if axis >= shape.len() {
            self.fail(TileError::BadAxis {
                op: "iota",
                axis,
                rank: shape.len(),
            });
            return self.dead_tile();
        }
        let out = self.tile(shape.to_vec(), Type::U32);
        self.push(Op::Iota { out, axis });
        out
    }

    fn check_origin(&mut self, op: &'static str, view: &ViewParam, origin: &[ScalarId]) -> bool {
        if origin.len() != view.rank {
            self.fail(TileError::ShapeMismatch {
                op,
                operand: "origin",
                expected: format!("{} coordinates (the view's rank)", view.rank),
                found: vec![origin.len() as u32],
            });
            return false;
        }
        for &o in origin {
            match self.scalar_of(op, "origin", o) {
                Some(t) if t == Type::U32 => {}
                Some(t) => {
                    self.fail(TileError::UnsupportedDtype {
                        op,
                        operand: "origin",
                        found: elem_name(&t),
                        why: "coordinates are u32".into(),
                    });
                    return false;
                }
                None => return false,
            }
        }
        true
    }

    /// The `shape` box of `view` at `origin`; elements outside the view read as 0.
    pub fn load(&mut self, view: ViewId, origin: &[ScalarId], shape: &[u32]) -> TileId {
        self.load_or(view, origin, shape, 0.0)
    }

    /// [`Self::load`] with `other` for elements outside the view.
    ///
    /// A tile of lower rank than the view is the box of extent 1 along the
    /// view's leading dims (at their origin coordinates): `load(q, &[b, h,
    /// m0, 0], &[64, 128])` reads rows `m0..m0 + 64` of head `h` of batch `b`
    /// of a `[B, H, S, D]` view as a 2-D tile.
    pub fn load_or(
        &mut self,
        view: ViewId,
        origin: &[ScalarId],
        shape: &[u32],
        other: f64,
    ) -> TileId {
        let Some(v) = self.view_of("load", view) else {
            return self.dead_tile();
        };
        if !self.check_origin("load", &v, origin) || !self.check_shape("load", "shape", shape) {
            return self.dead_tile();
        }
        if shape.len() > v.rank {
            self.fail(TileError::ShapeMismatch {
                op: "load",
                operand: "shape",
                expected: format!("rank at most {} (the view's)", v.rank),
                found: shape.to_vec(),
            });
            return self.dead_tile();
        }
        let other = if v.elem.is_float() {
            Const::Float(other)
        } else {
            Const::Int(other as i64)
        };
        let out = self.tile(shape.to_vec(), v.elem.clone());
        self.push(Op::Load {
            out,
            view,
            origin: origin.to_vec(),
            other,
        });
        out
    }

    fn check_store(
        &mut self,
        op: &'static str,
        view: ViewId,
        origin: &[ScalarId],
        tile: TileId,
    ) -> bool {
        let Some(v) = self.view_of(op, view) else {
            return false;
        };
        let Some(t) = self.tile_type(op, "tile", tile) else {
            return false;
        };
        if !self.check_origin(op, &v, origin) {
            return false;
        }
        if t.shape.len() > v.rank {
            self.fail(TileError::ShapeMismatch {
                op,
                operand: "tile",
                expected: format!("rank at most {} (the view's)", v.rank),
                found: t.shape,
            });
            return false;
        }
        if t.elem != v.elem {
            self.fail(TileError::UnsupportedDtype {
                op,
                operand: "tile",
                found: elem_name(&t.elem),
                why: format!("the view `{}` holds {}", v.name, v.elem),
            });
            return false;
        }
        true
    }

    /// Writes `tile` at `origin` of `view`; elements outside the view are dropped.
    pub fn store(&mut self, view: ViewId, origin: &[ScalarId], tile: TileId) {
        if self.check_store("store", view, origin, tile) {
            self.push(Op::Store {
                view,
                origin: origin.to_vec(),
                tile,
            });
        }
    }

    /// Adds `tile` into `view` at `origin` with device-scope atomics.
    pub fn atomic_add(&mut self, view: ViewId, origin: &[ScalarId], tile: TileId) {
        if !self.check_store("atomic_add", view, origin, tile) {
            return;
        }
        let elem = self.program.tile(tile).elem.clone();
        if ![Type::F32, Type::I32, Type::U32, Type::U64, Type::F64].contains(&elem) {
            self.fail(TileError::UnsupportedDtype {
                op: "atomic_add",
                operand: "tile",
                found: elem_name(&elem),
                why: "atomic add takes f32, f64, i32, u32 or u64".into(),
            });
            return;
        }
        self.push(Op::AtomicAdd {
            view,
            origin: origin.to_vec(),
            tile,
        });
    }
}
