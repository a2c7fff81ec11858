//! The tile ops of [`TileBuilder`]: element-wise maps, broadcast, cast,
//! reduce, dot and loops. Each checks its operands and records the first
//! error, naming the op and operand (see the parent module).

use super::{elem_name, TileBuilder};
use crate::error::TileError;
use crate::ir::*;
use zyntax_hir::{BinOp, CmpOp, Type, UnOp};

/// Why operands of element type `elem` cannot be read as `inputs`, if not.
fn dot_input_unfit(inputs: DotInputs, elem: &Type) -> Option<String> {
    let (ok, want) = match inputs {
        DotInputs::Native => (
            [Type::F32, Type::F16, Type::BF16].contains(elem),
            "a dot takes f32, f16 or bf16 operands (fp8 as u8 bytes with inputs e4m3/e5m2)",
        ),
        DotInputs::Tf32 => (*elem == Type::F32, "a tf32 dot reads f32 operands"),
        DotInputs::E4m3 | DotInputs::E5m2 => (
            *elem == Type::U8,
            "an fp8 dot reads u8 operands (the fp8 bytes)",
        ),
    };
    (!ok).then(|| want.to_string())
}

impl TileBuilder {
    // ---------------------------------------------------------------- element-wise

    /// An element-wise op over tiles of one shape.
    pub fn map(&mut self, op: MapOp, args: &[TileId]) -> TileId {
        const NAMES: [&str; 3] = ["a", "b", "c"];
        let arity = match op {
            MapOp::Unary(_) | MapOp::Approx(_) => 1,
            MapOp::Binary(_) | MapOp::Cmp(_) => 2,
            MapOp::Fma | MapOp::Where => 3,
        };
        if args.len() != arity {
            self.fail(TileError::BadOperand {
                op: "map",
                operand: "args",
                message: format!("{op:?} takes {arity} tiles, got {}", args.len()),
            });
            return self.dead_tile();
        }
        let mut types = Vec::new();
        for (i, &a) in args.iter().enumerate() {
            match self.tile_type("map", NAMES[i], a) {
                Some(t) => types.push(t),
                None => return self.dead_tile(),
            }
        }
        for (i, t) in types.iter().enumerate().skip(1) {
            if t.shape != types[0].shape {
                self.fail(TileError::ShapeMismatch {
                    op: "map",
                    operand: NAMES[i],
                    expected: format!("{:?} (the shape of `a`; broadcast first)", types[0].shape),
                    found: t.shape.clone(),
                });
                return self.dead_tile();
            }
        }
        // The operands whose element type must equal the result's.
        let (data, result_elem) = match op {
            MapOp::Where => {
                if types[0].elem != Type::BOOL {
                    return self.bad_dtype(
                        "where",
                        "cond",
                        &types[0].elem,
                        "the condition is a bool tile",
                    );
                }
                (&types[1..], types[1].elem.clone())
            }
            MapOp::Cmp(_) => (&types[..], Type::BOOL),
            _ => (&types[..], types[0].elem.clone()),
        };
        for (i, t) in data.iter().enumerate().skip(1) {
            if t.elem != data[0].elem {
                let operand = NAMES[i + types.len() - data.len()];
                let why = format!("the other operand is {}", data[0].elem);
                return self.bad_dtype("map", operand, &t.elem, &why);
            }
        }
        let elem = &data[0].elem;
        let float_only = match op {
            MapOp::Unary(u) => u.float_only(),
            MapOp::Fma => true,
            _ => false,
        };
        let int_only = matches!(op, MapOp::Unary(u) if u.int_only())
            || matches!(op, MapOp::Binary(b) if matches!(b, BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr));
        if float_only && !elem.is_float() {
            return self.bad_dtype("map", "a", elem, &format!("{op:?} takes floats"));
        }
        if matches!(op, MapOp::Approx(_)) && *elem != Type::F32 {
            return self.bad_dtype("map", "a", elem, &format!("{op:?} takes f32"));
        }
        if int_only && elem.is_float() {
            return self.bad_dtype("map", "a", elem, &format!("{op:?} takes integers"));
        }
        let out = self.tile(types[0].shape.clone(), result_elem);
        self.push(Op::Map {
            out,
            op,
            args: args.to_vec(),
        });
        out
    }

    fn bad_dtype(
        &mut self,
        op: &'static str,
        operand: &'static str,
        found: &Type,
        why: &str,
    ) -> TileId {
        self.fail(TileError::UnsupportedDtype {
            op,
            operand,
            found: elem_name(found),
            why: why.to_string(),
        });
        self.dead_tile()
    }

    pub fn unary(&mut self, op: UnOp, a: TileId) -> TileId {
        self.map(MapOp::Unary(op), &[a])
    }
    /// A fast approximation of an f32 function, element-wise (`MapOp::Approx`).
    pub fn approx(&mut self, op: zyntax_hir::ApproxOp, a: TileId) -> TileId {
        self.map(MapOp::Approx(op), &[a])
    }
    pub fn binary(&mut self, op: BinOp, a: TileId, b: TileId) -> TileId {
        self.map(MapOp::Binary(op), &[a, b])
    }
    pub fn add(&mut self, a: TileId, b: TileId) -> TileId {
        self.binary(BinOp::Add, a, b)
    }
    pub fn sub(&mut self, a: TileId, b: TileId) -> TileId {
        self.binary(BinOp::Sub, a, b)
    }
    pub fn mul(&mut self, a: TileId, b: TileId) -> TileId {
        self.binary(BinOp::Mul, a, b)
    }
    pub fn div(&mut self, a: TileId, b: TileId) -> TileId {
        self.binary(BinOp::Div, a, b)
    }
    pub fn maximum(&mut self, a: TileId, b: TileId) -> TileId {
        self.binary(BinOp::Max, a, b)
    }
    pub fn minimum(&mut self, a: TileId, b: TileId) -> TileId {
        self.binary(BinOp::Min, a, b)
    }
    pub fn exp(&mut self, a: TileId) -> TileId {
        self.unary(UnOp::Exp, a)
    }
    pub fn cmp(&mut self, op: CmpOp, a: TileId, b: TileId) -> TileId {
        self.map(MapOp::Cmp(op), &[a, b])
    }
    pub fn fma(&mut self, a: TileId, b: TileId, c: TileId) -> TileId {
        self.map(MapOp::Fma, &[a, b, c])
    }
    /// `cond ? a : b` element-wise.
    pub fn where_(&mut self, cond: TileId, a: TileId, b: TileId) -> TileId {
        self.map(MapOp::Where, &[cond, a, b])
    }

    /// `tile` expanded to `shape`: dims of size 1 repeat, others must match.
    pub fn broadcast(&mut self, tile: TileId, shape: &[u32]) -> TileId {
        let Some(t) = self.tile_type("broadcast", "tile", tile) else {
            return self.dead_tile();
        };
        let fits = t.shape.len() == shape.len()
            && t.shape.iter().zip(shape).all(|(&s, &d)| s == d || s == 1);
        if !fits {
            self.fail(TileError::ShapeMismatch {
                op: "broadcast",
                operand: "tile",
                expected: format!("the rank of {shape:?}, each dim equal or 1"),
                found: t.shape,
            });
            return self.dead_tile();
        }
        if !self.check_shape("broadcast", "shape", shape) {
            return self.dead_tile();
        }
        let out = self.tile(shape.to_vec(), t.elem);
        self.push(Op::Broadcast { out, tile });
        out
    }

    /// Numeric conversion of every element to `elem`.
    pub fn cast(&mut self, tile: TileId, elem: Type) -> TileId {
        let Some(t) = self.tile_type("cast", "tile", tile) else {
            return self.dead_tile();
        };
        for (operand, ty) in [("tile", &t.elem), ("elem", &elem)] {
            if ty.as_scalar().is_none() || *ty == Type::BOOL {
                return self.bad_dtype("cast", operand, ty, "cast converts between numeric types");
            }
        }
        let out = self.tile(t.shape, elem);
        self.push(Op::Cast { out, tile });
        out
    }

    /// Reduces `axis` with `op`; the result keeps the axis with size 1.
    pub fn reduce(&mut self, tile: TileId, axis: usize, op: ReduceOp) -> TileId {
        let Some(t) = self.tile_type("reduce", "tile", tile) else {
            return self.dead_tile();
        };
        if axis >= t.shape.len() {
            self.fail(TileError::BadAxis {
                op: "reduce",
                axis,
                rank: t.shape.len(),
            });
            return self.dead_tile();
        }
        if ![
            Type::F32,
            Type::I32,
            Type::U32,
            Type::F64,
            Type::I64,
            Type::U64,
        ]
        .contains(&t.elem)
        {
            return self.bad_dtype(
                "reduce",
                "tile",
                &t.elem,
                "reductions shuffle 32- or 64-bit values (cast f16/bf16 to f32 first)",
            );
        }
        let mut shape = t.shape;
        shape[axis] = 1;
        let out = self.tile(shape, t.elem);
        self.push(Op::Reduce {
            out,
            tile,
            axis,
            op,
        });
        out
    }

    pub fn sum(&mut self, tile: TileId, axis: usize) -> TileId {
        self.reduce(tile, axis, ReduceOp::Sum)
    }
    pub fn max(&mut self, tile: TileId, axis: usize) -> TileId {
        self.reduce(tile, axis, ReduceOp::Max)
    }

    /// `acc + a @ b`: `a: [M, K]`, `b: [K, N]` of f32, f16 or bf16 (both the
    /// same), `acc: [M, N]` f32.
    pub fn dot(&mut self, a: TileId, b: TileId, acc: TileId) -> TileId {
        self.dot_as(a, b, acc, DotInputs::Native)
    }

    /// `acc + a @ b` with the operands read as `inputs` says: f32 operands
    /// as tf32 ([`DotInputs::Tf32`]), `u8` operands as fp8 bytes
    /// ([`DotInputs::E4m3`], [`DotInputs::E5m2`]); see [`DotInputs`].
    pub fn dot_as(&mut self, a: TileId, b: TileId, acc: TileId, inputs: DotInputs) -> TileId {
        let (Some(ta), Some(tb), Some(tc)) = (
            self.tile_type("dot", "a", a),
            self.tile_type("dot", "b", b),
            self.tile_type("dot", "acc", acc),
        ) else {
            return self.dead_tile();
        };
        let mismatch = |operand, expected: String, found: &Vec<u32>| TileError::ShapeMismatch {
            op: "dot",
            operand,
            expected,
            found: found.clone(),
        };
        if ta.shape.len() != 2 {
            self.fail(mismatch("a", "[M, K]".into(), &ta.shape));
        } else if tb.shape.len() != 2 || tb.shape[0] != ta.shape[1] {
            self.fail(mismatch(
                "b",
                format!("[{}, N] (K from `a`)", ta.shape[1]),
                &tb.shape,
            ));
        } else if tc.shape != [ta.shape[0], tb.shape[1]] {
            let want = format!(
                "[{}, {}] (M from `a`, N from `b`)",
                ta.shape[0], tb.shape[1]
            );
            self.fail(mismatch("acc", want, &tc.shape));
        } else if let Some(why) = dot_input_unfit(inputs, &ta.elem) {
            return self.bad_dtype("dot", "a", &ta.elem, &why);
        } else if tb.elem != ta.elem {
            return self.bad_dtype(
                "dot",
                "b",
                &tb.elem,
                &format!("`a` is {}; the pair must match", ta.elem),
            );
        } else if tc.elem != Type::F32 {
            return self.bad_dtype("dot", "acc", &tc.elem, "dot accumulates in f32");
        } else {
            let out = self.tile(tc.shape, Type::F32);
            self.push(Op::Dot {
                out,
                a,
                b,
                acc,
                inputs,
            });
            return out;
        }
        self.dead_tile()
    }

    // ---------------------------------------------------------------- loops

    /// `for iv in (lo..hi).step_by(step)` over `u32` scalars, carrying `inits`:
    /// `body(builder, iv, carried)` returns the next carried values (same
    /// types); returns the values after the last iteration.
    pub fn for_range(
        &mut self,
        lo: ScalarId,
        hi: ScalarId,
        step: ScalarId,
        inits: &[Value],
        body: impl FnOnce(&mut TileBuilder, ScalarId, &[Value]) -> Vec<Value>,
    ) -> Vec<Value> {
        for (operand, s) in [("lo", lo), ("hi", hi), ("step", step)] {
            if let Some(t) = self.scalar_of("for_range", operand, s) {
                if t != Type::U32 {
                    self.fail(TileError::UnsupportedDtype {
                        op: "for_range",
                        operand,
                        found: elem_name(&t),
                        why: "loop bounds are u32".into(),
                    });
                }
            }
        }
        let iv = self.scalar(Type::U32);
        let mut args = Vec::new();
        let mut results = Vec::new();
        for &init in inits {
            let (arg, result) = match init {
                Value::Tile(t) => match self.tile_type("for_range", "inits", t) {
                    Some(ty) => (
                        Value::Tile(self.program.new_tile(ty.clone())),
                        Value::Tile(self.program.new_tile(ty)),
                    ),
                    None => (Value::Tile(self.dead_tile()), Value::Tile(self.dead_tile())),
                },
                Value::Scalar(s) => {
                    let ty = self.scalar_of("for_range", "inits", s).unwrap_or(Type::U32);
                    (
                        Value::Scalar(self.scalar(ty.clone())),
                        Value::Scalar(self.scalar(ty)),
                    )
                }
            };
            args.push(arg);
            results.push(result);
        }
        self.regions.push(Vec::new());
        let yields = body(self, iv, &args);
        let body_ops = self.regions.pop().unwrap_or_default();
        if yields.len() != inits.len() {
            self.fail(TileError::BadOperand {
                op: "for_range",
                operand: "yields",
                message: format!(
                    "the body yields {} values for {} carried",
                    yields.len(),
                    inits.len()
                ),
            });
        } else {
            for (&y, &a) in yields.iter().zip(&args) {
                self.check_yield(y, a);
            }
        }
        self.push(Op::For {
            lo,
            hi,
            step,
            iv,
            inits: inits.to_vec(),
            args,
            body: body_ops,
            yields,
            results: results.clone(),
        });
        results
    }

    fn check_yield(&mut self, y: Value, arg: Value) {
        match (y, arg) {
            (Value::Tile(y), Value::Tile(a)) => {
                let (Some(ty), Some(ta)) = (
                    self.tile_type("for_range", "yields", y),
                    self.tile_type("for_range", "yields", a),
                ) else {
                    return;
                };
                if ty != ta {
                    self.fail(TileError::ShapeMismatch {
                        op: "for_range",
                        operand: "yields",
                        expected: format!("{:?} of {} (the carried tile)", ta.shape, ta.elem),
                        found: ty.shape,
                    });
                }
            }
            (Value::Scalar(y), Value::Scalar(a)) => {
                let ty = self.scalar_of("for_range", "yields", y);
                let ta = self.scalar_of("for_range", "yields", a);
                if ty != ta {
                    self.fail(TileError::BadOperand {
                        op: "for_range",
                        operand: "yields",
                        message: format!("a yielded scalar is {ty:?}, the carried one {ta:?}"),
                    });
                }
            }
            _ => self.fail(TileError::BadOperand {
                op: "for_range",
                operand: "yields",
                message: "a tile yielded for a carried scalar, or the reverse".into(),
            }),
        }
    }
}
