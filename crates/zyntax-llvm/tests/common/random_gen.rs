//! Random structured HIR kernels for differential testing (shared by
//! `tests/random_programs.rs` and `examples/diff_kernels.rs`).
//!
//! Each kernel is `k(inp: ptr<global, u32>, out: ptr<global, u64>)`: thread
//! `t` reads `inp[4t..4t+4]`, runs random integer / exactly-rounded float
//! arithmetic, compares, selects, casts, if/else with results, counted loops
//! with carried values and (in uniform control flow only) warp shuffles and
//! votes, then writes `OUT_SLOTS` results to `out[8t..]` as u64 bit patterns.
//! Approximate math (exp, sin, …) is left out: its exact value is not defined.
#![allow(dead_code)]

use zyntax_hir::*;

pub const OUT_SLOTS: usize = 8;
pub const IN_WORDS: usize = 4;

/// xorshift64*: deterministic and good enough for test generation.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const TYPES: [ScalarType; 8] = [
    ScalarType::I32,
    ScalarType::U32,
    ScalarType::I64,
    ScalarType::U64,
    ScalarType::I16,
    ScalarType::U8,
    ScalarType::F32,
    ScalarType::F64,
];

/// What a kernel writes in each output slot (for NaN-tolerant comparison).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotKind {
    Int,
    F32,
    F64,
}

pub struct Generated {
    pub function: Function,
    pub slots: Vec<SlotKind>,
}

struct Gen<'r> {
    rng: &'r mut Rng,
    b: FunctionBuilder,
    pool: Vec<(ValueId, ScalarType)>,
    budget: usize,
    /// Whether shuffles and votes may appear (the CPU backend runs kernels
    /// with warp collectives on the interpreter instead of compiling them).
    warp_ops: bool,
}

impl Gen<'_> {
    fn of(&self, t: ScalarType) -> Vec<ValueId> {
        self.pool
            .iter()
            .filter(|(_, s)| *s == t)
            .map(|(v, _)| *v)
            .collect()
    }

    fn pick(&mut self, t: ScalarType) -> ValueId {
        let vs = self.of(t);
        if vs.is_empty() {
            let (v, _) = self.pool[self.rng.below(self.pool.len())];
            return self.b.cast(v, Type::Scalar(t)).unwrap();
        }
        vs[self.rng.below(vs.len())]
    }

    /// A value of type `t` other than `x`: another one of the pool, or a cast
    /// of a random pool value (an op on two copies of one value tests little).
    fn pick_other(&mut self, t: ScalarType, x: ValueId) -> ValueId {
        let vs: Vec<ValueId> = self.of(t).into_iter().filter(|v| *v != x).collect();
        if vs.is_empty() || self.rng.chance(25) {
            let (v, _) = self.pool[self.rng.below(self.pool.len())];
            if v != x {
                return self.b.cast(v, Type::Scalar(t)).unwrap();
            }
        }
        if vs.is_empty() {
            return x;
        }
        vs[self.rng.below(vs.len())]
    }

    fn any_type(&mut self) -> ScalarType {
        TYPES[self.rng.below(TYPES.len())]
    }

    fn push(&mut self, v: ValueId, t: ScalarType) {
        self.pool.push((v, t));
    }

    fn stmt(&mut self, depth: usize, uniform: bool) {
        if self.budget == 0 {
            return;
        }
        self.budget -= 1;
        let r = self.rng.below(100);
        match r {
            0..=34 => self.binary(),
            35..=44 => self.unary(),
            45..=54 => self.cmp_select(),
            55..=64 => {
                let t = self.any_type();
                let (v, _) = self.pool[self.rng.below(self.pool.len())];
                let c = self.b.cast(v, Type::Scalar(t)).unwrap();
                self.push(c, t);
            }
            65..=71 if uniform && self.warp_ops => self.warp(),
            72..=81 if depth < 3 => self.if_else(depth),
            82..=89 if depth < 3 => self.counted_loop(depth, uniform),
            _ => self.binary(),
        }
    }

    fn binary(&mut self) {
        let t = self.any_type();
        let x = self.pick(t);
        let mut y = self.pick_other(t, x);
        let ops: &[BinOp] = if t.is_float() {
            &[
                BinOp::Add,
                BinOp::Sub,
                BinOp::Mul,
                BinOp::Div,
                BinOp::Min,
                BinOp::Max,
            ]
        } else {
            BinOp::ALL
        };
        let op = ops[self.rng.below(ops.len())];
        if matches!(op, BinOp::Div | BinOp::Rem) && t.is_int() {
            // A non-zero divisor: division by zero traps (tested elsewhere).
            let one = self.b.iconst(Type::Scalar(t), 1).unwrap();
            y = self.b.binary(BinOp::Or, y, one).unwrap();
        }
        let v = self.b.binary(op, x, y).unwrap();
        self.push(v, t);
    }

    fn unary(&mut self) {
        let t = self.any_type();
        let x = self.pick(t);
        let ops: &[UnOp] = if t.is_float() {
            &[UnOp::Neg, UnOp::Abs, UnOp::Sqrt, UnOp::Floor, UnOp::Ceil]
        } else if t.is_signed() {
            &[UnOp::Neg, UnOp::Not, UnOp::Abs]
        } else {
            &[UnOp::Neg, UnOp::Not]
        };
        let op = ops[self.rng.below(ops.len())];
        let v = if t.is_float() && self.rng.chance(25) {
            let y = self.pick_other(t, x);
            let z = self.pick(t);
            self.b.fma(x, y, z).unwrap()
        } else {
            self.b.unary(op, x).unwrap()
        };
        self.push(v, t);
    }

    fn cmp_select(&mut self) {
        let t = self.any_type();
        let x = self.pick(t);
        let y = self.pick_other(t, x);
        let op = CmpOp::ALL[self.rng.below(CmpOp::ALL.len())];
        let c = self.b.cmp(op, x, y).unwrap();
        let u = self.any_type();
        let a = self.pick(u);
        let bb = self.pick(u);
        let v = self.b.select(c, a, bb).unwrap();
        self.push(v, u);
    }

    fn warp(&mut self) {
        let mask = self.b.iconst(Type::U32, -1).unwrap();
        if self.rng.chance(30) {
            let t = self.any_type();
            let x = self.pick(t);
            let y = self.pick_other(t, x);
            let c = self.b.cmp(CmpOp::Lt, x, y).unwrap();
            let mode = VoteMode::ALL[self.rng.below(3)];
            let v = self.b.vote(mode, mask, c).unwrap();
            if mode == VoteMode::Ballot {
                self.push(v, ScalarType::U32);
            } else {
                let u = self.b.cast(v, Type::U32).unwrap();
                self.push(u, ScalarType::U32);
            }
            return;
        }
        let choices = [
            ScalarType::I32,
            ScalarType::U32,
            ScalarType::F32,
            ScalarType::U64,
            ScalarType::F64,
        ];
        let t = choices[self.rng.below(choices.len())];
        let x = self.pick(t);
        let lane_src = self.pick(ScalarType::U32);
        let m31 = self.b.iconst(Type::U32, 31).unwrap();
        let lane = self.b.binary(BinOp::And, lane_src, m31).unwrap();
        let mode = ShflMode::ALL[self.rng.below(4)];
        let width = 1u32 << self.rng.below(6);
        let v = self.b.shfl(mode, mask, x, lane, width).unwrap();
        self.push(v, t);
    }

    fn if_else(&mut self, depth: usize) {
        let t = self.any_type();
        let x = self.pick(t);
        let y = self.pick_other(t, x);
        let c = self.b.cmp(CmpOp::ALL[self.rng.below(6)], x, y).unwrap();
        let n = 1 + self.rng.below(2);
        let tys: Vec<ScalarType> = (0..n).map(|_| self.any_type()).collect();
        let types: Vec<Type> = tys.iter().map(|s| Type::Scalar(*s)).collect();
        let mark = self.pool.len();
        let mut frame = self.b.begin_if(c, &types).unwrap();
        for _ in 0..1 + self.rng.below(3) {
            self.stmt(depth + 1, false);
        }
        let then_vals: Vec<ValueId> = tys.iter().map(|s| self.pick(*s)).collect();
        self.pool.truncate(mark);
        self.b.begin_else(&mut frame, &then_vals).unwrap();
        for _ in 0..self.rng.below(3) {
            self.stmt(depth + 1, false);
        }
        let else_vals: Vec<ValueId> = tys.iter().map(|s| self.pick(*s)).collect();
        self.pool.truncate(mark);
        let merged = self.b.end_if(frame, &else_vals).unwrap();
        for (v, s) in merged.into_iter().zip(tys) {
            self.push(v, s);
        }
    }

    fn counted_loop(&mut self, depth: usize, uniform: bool) {
        let zero = self.b.iconst(Type::U32, 0).unwrap();
        let stop = self
            .b
            .iconst(Type::U32, 1 + self.rng.below(4) as i64)
            .unwrap();
        let one = self.b.iconst(Type::U32, 1).unwrap();
        let n = 1 + self.rng.below(2);
        let tys: Vec<ScalarType> = (0..n).map(|_| self.any_type()).collect();
        let init: Vec<ValueId> = tys.iter().map(|s| self.pick(*s)).collect();
        let mark = self.pool.len();
        let frame = self.b.begin_for(zero, stop, one, &init).unwrap();
        self.push(frame.iv, ScalarType::U32);
        for (v, s) in frame.carried.iter().zip(&tys) {
            self.push(*v, *s);
        }
        for _ in 0..1 + self.rng.below(3) {
            // A constant trip count keeps the body uniform if the loop is.
            self.stmt(depth + 1, uniform);
        }
        let next: Vec<ValueId> = tys.iter().map(|s| self.pick(*s)).collect();
        self.pool.truncate(mark);
        let out = self.b.end_for(frame, &next).unwrap();
        for (v, s) in out.into_iter().zip(tys) {
            self.push(v, s);
        }
    }
}

/// One random kernel named `name`.
pub fn random_kernel(name: &str, rng: &mut Rng, statements: usize) -> Generated {
    random_kernel_with(name, rng, statements, true)
}

/// One random kernel named `name`, with or without warp collectives.
pub fn random_kernel_with(
    name: &str,
    rng: &mut Rng,
    statements: usize,
    warp_ops: bool,
) -> Generated {
    let mut b = FunctionBuilder::kernel(
        name,
        &[
            Type::ptr(AddrSpace::Global, Type::U32),
            Type::ptr(AddrSpace::Global, Type::U64),
        ],
    );
    let (inp, out) = (b.param(0), b.param(1));
    let tid = b.thread_idx(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let bd = b.block_dim(Dim::X).unwrap();
    let base = b.mul(bid, bd).unwrap();
    let t = b.add(base, tid).unwrap();
    let four = b.iconst(Type::U32, IN_WORDS as i64).unwrap();
    let t4 = b.mul(t, four).unwrap();
    let mut pool = vec![(t, ScalarType::U32)];
    for j in 0..IN_WORDS {
        let jv = b.iconst(Type::U32, j as i64).unwrap();
        let idx = b.add(t4, jv).unwrap();
        let p = b.ptr_add(inp, idx).unwrap();
        let w = b.load(p).unwrap();
        pool.push((w, ScalarType::U32));
    }
    let mut g = Gen {
        rng,
        b,
        pool,
        budget: statements,
        warp_ops,
    };
    // Seed every type from the inputs (f32/f64 through bit patterns of small ints).
    for s in TYPES {
        let w = g.pick(ScalarType::U32);
        let v = g.b.cast(w, Type::Scalar(s)).unwrap();
        g.push(v, s);
    }
    while g.budget > 0 {
        g.stmt(0, true);
    }
    // Every value computed reaches an output: slot j holds the XOR of the
    // pool's values j, j + 8, ... (floats as bits, NaN and -0.0 made canonical
    // so that only the values, not LLVM's choice of NaN or zero sign, count).
    let mut acc: Vec<Option<ValueId>> = vec![None; OUT_SLOTS];
    let pool = g.pool.clone();
    for (i, (v, s)) in pool.into_iter().enumerate() {
        let word = match s {
            ScalarType::F32 | ScalarType::F64 => {
                let (ft, it, nan) = if s == ScalarType::F32 {
                    (Type::F32, Type::U32, 0x7fc0_0000i64)
                } else {
                    (Type::F64, Type::U64, 0x7ff8_0000_0000_0000i64)
                };
                let zero = g.b.fconst(ft, 0.0).unwrap();
                let plus = g.b.add(v, zero).unwrap(); // -0.0 + 0.0 = +0.0
                let bits = g.b.bitcast(plus, it.clone()).unwrap();
                let is_nan = g.b.cmp(CmpOp::Ne, v, v).unwrap();
                let canon = g.b.iconst(it, nan).unwrap();
                g.b.select(is_nan, canon, bits).unwrap()
            }
            _ => v,
        };
        let wide = g.b.cast(word, Type::U64).unwrap();
        let j = i % OUT_SLOTS;
        acc[j] = Some(match acc[j] {
            Some(a) => g.b.xor(a, wide).unwrap(),
            None => wide,
        });
    }
    let eight = g.b.iconst(Type::U32, OUT_SLOTS as i64).unwrap();
    let t8 = g.b.mul(t, eight).unwrap();
    let mut slots = Vec::new();
    for (j, a) in acc.into_iter().enumerate() {
        let wide = match a {
            Some(a) => a,
            None => g.b.iconst(Type::U64, 0).unwrap(),
        };
        let jv = g.b.iconst(Type::U32, j as i64).unwrap();
        let idx = g.b.add(t8, jv).unwrap();
        let p = g.b.ptr_add(out, idx).unwrap();
        g.b.store(p, wide).unwrap();
        slots.push(SlotKind::Int);
    }
    g.b.ret(&[]).unwrap();
    Generated {
        function: g.b.finish().unwrap(),
        slots,
    }
}
