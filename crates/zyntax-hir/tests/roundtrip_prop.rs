//! Property: for random well-typed modules built with [`FunctionBuilder`]
//! (every op kind, GPU ops included, nested if/else and loops with carried
//! values, kernels with metadata, host and device functions with constraints),
//! the verifier accepts them, `parse(print(m)) == m`, printing the parsed
//! module gives the same text, and every parsed instruction's location points
//! at the line that prints it.
//!
//! proptest draws a seed; a small deterministic generator builds the module
//! from it, so a failure reports a seed that reproduces it.

use proptest::prelude::*;
use zyntax_hir::*;

/// SplitMix64: tiny, deterministic, good enough to pick among choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }
}

const INTS: [ScalarType; 8] = [
    ScalarType::I8,
    ScalarType::I16,
    ScalarType::I32,
    ScalarType::I64,
    ScalarType::U8,
    ScalarType::U16,
    ScalarType::U32,
    ScalarType::U64,
];

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Host,
    Device,
    Kernel,
}

/// A function other functions may call: name, parameter and return types.
#[derive(Clone)]
struct Callee {
    name: String,
    params: Vec<Type>,
    returns: Vec<Type>,
}

struct Gen<'r> {
    rng: &'r mut Rng,
    b: FunctionBuilder,
    kind: Kind,
    /// Visible values, innermost scope last (a value defined in a branch or loop
    /// body is not visible after it: dominance).
    scopes: Vec<Vec<(ValueId, Type)>>,
    allow_alloca: bool,
    callees: Vec<Callee>,
    /// Memory space of pointer parameters (`global` on the GPU, `generic` on the host).
    space: AddrSpace,
    budget: u32,
    shared_used: u64,
}

impl Gen<'_> {
    fn gpu(&self) -> bool {
        self.kind != Kind::Host
    }

    fn floats(&self) -> Vec<ScalarType> {
        if self.gpu() {
            vec![
                ScalarType::F16,
                ScalarType::BF16,
                ScalarType::F32,
                ScalarType::F64,
            ]
        } else {
            vec![ScalarType::F32, ScalarType::F64]
        }
    }

    fn scalars(&self) -> Vec<ScalarType> {
        let mut out = INTS.to_vec();
        out.extend(self.floats());
        out.push(ScalarType::Bool);
        out
    }

    fn add(&mut self, v: ValueId) {
        let ty = self.b.value_type(v).expect("fresh value").clone();
        if let Some(scope) = self.scopes.last_mut() {
            scope.push((v, ty));
        }
    }

    fn visible(&self, ty: &Type) -> Vec<ValueId> {
        self.scopes
            .iter()
            .flatten()
            .filter(|(_, t)| t == ty)
            .map(|(v, _)| *v)
            .collect()
    }

    fn const_of(&mut self, s: ScalarType) -> ValueId {
        let v = if s.is_bool() {
            self.b.bconst(self.rng.chance(50)).expect("bconst")
        } else if s.is_int() {
            let raw = match self.rng.below(4) {
                0 => 0,
                1 => 1,
                2 => -1,
                _ => self.rng.next() as i64,
            };
            self.b.iconst(Type::Scalar(s), raw).expect("iconst")
        } else {
            let max = match s {
                ScalarType::F16 => 65504.0,
                ScalarType::BF16 | ScalarType::F32 => 3.0e38,
                _ => f64::MAX,
            };
            let x = match self.rng.below(8) {
                0 => 0.0,
                1 => -0.0,
                2 => f64::INFINITY,
                3 => f64::NEG_INFINITY,
                4 => f64::from_bits(0x7ff8_0000_0000_0000 | (self.rng.next() & 0xffff)),
                5 => 1e-7,
                _ => {
                    let frac = (self.rng.next() % 2_000_001) as f64 / 1_000_000.0 - 1.0;
                    frac * max.min(1e6)
                }
            };
            self.b.fconst(Type::Scalar(s), x).expect("fconst")
        };
        self.add(v);
        v
    }

    /// A visible value of scalar type `s`, or a new constant.
    fn get(&mut self, s: ScalarType) -> ValueId {
        let vs = self.visible(&Type::Scalar(s));
        if !vs.is_empty() && self.rng.chance(75) {
            return self.rng.pick(&vs);
        }
        self.const_of(s)
    }

    /// A pointer `ptr<space, elem>` offset by a random index: a visible one if any,
    /// else a parameter of that type exists by construction (see `pointer_params`).
    fn ptr_to(&mut self, elem: &Type) -> Option<ValueId> {
        let ty = Type::ptr(self.space, elem.clone());
        let base = self.visible(&ty);
        if base.is_empty() {
            return None;
        }
        let p = self.rng.pick(&base);
        let idx_ty = self
            .rng
            .pick(&[ScalarType::U32, ScalarType::I64, ScalarType::U64]);
        let i = self.get(idx_ty);
        let q = self.b.ptr_add(p, i).expect("ptr_add");
        self.add(q);
        Some(q)
    }

    fn stmts(&mut self, depth: u32) {
        let n = 1 + self.rng.below(6);
        for _ in 0..n {
            if self.budget == 0 {
                return;
            }
            self.budget -= 1;
            self.stmt(depth);
        }
    }

    fn stmt(&mut self, depth: u32) {
        let choice = self.rng.below(30);
        match choice {
            0 => {
                let s = self.rng.pick(&self.scalars());
                self.const_of(s);
            }
            1..=3 => self.binary(),
            4 => self.unary(),
            5 => {
                let f = self.rng.pick(&self.floats());
                let (a, b, c) = (self.get(f), self.get(f), self.get(f));
                let v = self.b.fma(a, b, c).expect("fma");
                self.add(v);
            }
            6 => {
                let s = self.rng.pick(&self.scalars());
                let op = if s.is_bool() {
                    self.rng.pick(&[CmpOp::Eq, CmpOp::Ne])
                } else {
                    self.rng.pick(CmpOp::ALL)
                };
                let (a, b) = (self.get(s), self.get(s));
                let v = self.b.cmp(op, a, b).expect("cmp");
                self.add(v);
            }
            7 => {
                let s = self.rng.pick(&self.scalars());
                let c = self.get(ScalarType::Bool);
                let (a, b) = (self.get(s), self.get(s));
                let v = self.b.select(c, a, b).expect("select");
                self.add(v);
            }
            8 => {
                let from = self.rng.pick(&self.scalars());
                let mut to = self.rng.pick(&self.scalars());
                if to.is_bool() {
                    to = ScalarType::I32;
                }
                let a = self.get(from);
                let v = self.b.cast(a, Type::Scalar(to)).expect("cast");
                self.add(v);
            }
            9 => {
                let pairs: &[(ScalarType, ScalarType)] = &[
                    (ScalarType::F32, ScalarType::U32),
                    (ScalarType::I32, ScalarType::F32),
                    (ScalarType::F64, ScalarType::I64),
                    (ScalarType::U64, ScalarType::F64),
                    (ScalarType::I16, ScalarType::U16),
                    (ScalarType::I8, ScalarType::U8),
                ];
                let (from, to) = self.rng.pick(pairs);
                let a = self.get(from);
                let v = self.b.bitcast(a, Type::Scalar(to)).expect("bitcast");
                self.add(v);
            }
            10 => self.vector(),
            11 | 12 => self.memory(),
            13 => {
                if self.allow_alloca {
                    let count = 1 + self.rng.below(8) as u64;
                    let p = self.b.alloca(Type::F32, count).expect("alloca");
                    self.add(p);
                    let x = self.get(ScalarType::F32);
                    self.b.store(p, x).expect("store");
                    let y = self.b.load(p).expect("load");
                    self.add(y);
                }
            }
            14 | 15 if depth < 3 => self.if_else(depth),
            16 if depth < 3 => self.for_loop(depth),
            17 => self.call(),
            _ if self.gpu() => self.gpu_stmt(choice),
            _ => self.binary(),
        }
    }

    fn binary(&mut self) {
        let s = self.rng.pick(&self.scalars());
        let ops: Vec<BinOp> = BinOp::ALL
            .iter()
            .copied()
            .filter(|op| match op {
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max => {
                    !s.is_bool()
                }
                BinOp::Rem | BinOp::Shl | BinOp::Shr => s.is_int(),
                BinOp::And | BinOp::Or | BinOp::Xor => s.is_int() || s.is_bool(),
            })
            .collect();
        let op = self.rng.pick(&ops);
        let (a, b) = (self.get(s), self.get(s));
        let v = self.b.binary(op, a, b).expect("binary");
        self.add(v);
    }

    fn unary(&mut self) {
        let s = self.rng.pick(&self.scalars());
        let ops: Vec<UnOp> = UnOp::ALL
            .iter()
            .copied()
            .filter(|op| Op::Unary(*op).def().types.accepts(s))
            .collect();
        if ops.is_empty() {
            return;
        }
        let op = self.rng.pick(&ops);
        let a = self.get(s);
        let v = self.b.unary(op, a).expect("unary");
        self.add(v);
    }

    fn vector(&mut self) {
        let vty = Type::Vector(ScalarType::F32, 4);
        // No vector pointer in scope: emit scalar arithmetic instead.
        let Some(p) = self.ptr_to(&vty) else {
            return self.binary();
        };
        let v = self.b.load(p).expect("load vec");
        self.add(v);
        let lane = self.rng.below(4) as u32;
        let x = self.b.extract(v, lane).expect("extract");
        self.add(x);
        let y = self.get(ScalarType::F32);
        let w = self
            .b
            .insert(v, y, self.rng.below(4) as u32)
            .expect("insert");
        self.add(w);
        self.b.store(p, w).expect("store vec");
    }

    fn memory(&mut self) {
        let elems = [ScalarType::F32, ScalarType::U32, ScalarType::I64];
        let s = self.rng.pick(&elems);
        let Some(p) = self.ptr_to(&Type::Scalar(s)) else {
            return self.binary();
        };
        if self.rng.chance(50) {
            let v = self.b.load(p).expect("load");
            self.add(v);
        } else {
            let x = self.get(s);
            self.b.store(p, x).expect("store");
        }
        if self.space == AddrSpace::Global && self.rng.chance(30) {
            // Round trip through the generic address space.
            let g = self
                .b
                .ptr_cast(p, Type::ptr(AddrSpace::Generic, Type::Scalar(s)))
                .expect("ptr_cast");
            self.add(g);
            let v = self.b.load(g).expect("load generic");
            self.add(v);
        }
    }

    /// Values of the given types, from what is visible now.
    fn values_of(&mut self, tys: &[ScalarType]) -> Vec<ValueId> {
        tys.iter().map(|s| self.get(*s)).collect()
    }

    fn if_else(&mut self, depth: u32) {
        let cond = self.get(ScalarType::Bool);
        let n = self.rng.below(3);
        let tys: Vec<ScalarType> = (0..n).map(|_| self.rng.pick(&self.scalars())).collect();
        let ty_list: Vec<Type> = tys.iter().map(|s| Type::Scalar(*s)).collect();
        let mut frame = self.b.begin_if(cond, &ty_list).expect("begin_if");
        self.scopes.push(Vec::new());
        self.stmts(depth + 1);
        let then_vals = self.values_of(&tys);
        self.scopes.pop();
        let has_else = n > 0 || self.rng.chance(50);
        if has_else {
            self.b
                .begin_else(&mut frame, &then_vals)
                .expect("begin_else");
            self.scopes.push(Vec::new());
            self.stmts(depth + 1);
            let else_vals = self.values_of(&tys);
            self.scopes.pop();
            let merged = self.b.end_if(frame, &else_vals).expect("end_if");
            for v in merged {
                self.add(v);
            }
        } else {
            self.b.end_if(frame, &then_vals).expect("end_if");
        }
    }

    fn for_loop(&mut self, depth: u32) {
        let t = self.rng.pick(&[
            ScalarType::I32,
            ScalarType::U32,
            ScalarType::I64,
            ScalarType::U64,
        ]);
        let start = self.get(t);
        let stop = self.get(t);
        let step = self
            .b
            .iconst(Type::Scalar(t), 1 + self.rng.below(4) as i64)
            .expect("step");
        let n = self.rng.below(3);
        let tys: Vec<ScalarType> = (0..n).map(|_| self.rng.pick(&self.scalars())).collect();
        let init = self.values_of(&tys);
        let frame = self
            .b
            .begin_for(start, stop, step, &init)
            .expect("begin_for");
        self.scopes.push(Vec::new());
        self.add(frame.iv);
        for v in frame.carried.clone() {
            self.add(v);
        }
        self.stmts(depth + 1);
        let next = self.values_of(&tys);
        self.scopes.pop();
        let exit = self.b.end_for(frame, &next).expect("end_for");
        for v in exit {
            self.add(v);
        }
    }

    fn call(&mut self) {
        if self.callees.is_empty() {
            return;
        }
        let c = self.rng.pick(&self.callees);
        let mut args = Vec::new();
        for p in &c.params {
            let v = match p {
                Type::Scalar(s) => self.get(*s),
                other => match self.visible(other).first() {
                    Some(v) => *v,
                    None => return,
                },
            };
            args.push(v);
        }
        let rs = self.b.call(&c.name, &args, &c.returns).expect("call");
        for r in rs {
            self.add(r);
        }
    }

    fn gpu_stmt(&mut self, choice: usize) {
        let full = |g: &mut Self| {
            let v = g.b.iconst(Type::U32, -1).expect("mask");
            g.add(v);
            v
        };
        match choice {
            18 => {
                let d = self.rng.pick(Dim::ALL);
                let v = match self.rng.below(5) {
                    0 => self.b.thread_idx(d),
                    1 => self.b.block_idx(d),
                    2 => self.b.block_dim(d),
                    3 => self.b.grid_dim(d),
                    _ => self.b.lane_id(),
                }
                .expect("special register");
                self.add(v);
            }
            19 => match self.rng.below(3) {
                0 => self.b.barrier().expect("barrier"),
                1 => self.b.fence(self.rng.pick(Scope::ALL)).expect("fence"),
                _ => {
                    let m = full(self);
                    self.b.warp_sync(m).expect("warp_sync");
                }
            },
            20 | 21 => {
                let (op, s) = match self.rng.below(5) {
                    0 => (
                        self.rng.pick(&[AtomicOp::Add, AtomicOp::Exch]),
                        self.rng
                            .pick(&[ScalarType::F32, ScalarType::U32, ScalarType::I64]),
                    ),
                    1 => (
                        self.rng.pick(&[AtomicOp::Inc, AtomicOp::Dec]),
                        ScalarType::U32,
                    ),
                    _ => (
                        self.rng.pick(&[
                            AtomicOp::Add,
                            AtomicOp::Sub,
                            AtomicOp::Min,
                            AtomicOp::Max,
                            AtomicOp::And,
                            AtomicOp::Or,
                            AtomicOp::Xor,
                            AtomicOp::Exch,
                        ]),
                        self.rng.pick(&[ScalarType::U32, ScalarType::I64]),
                    ),
                };
                let Some(p) = self.ptr_to(&Type::Scalar(s)) else {
                    return;
                };
                let x = self.get(s);
                let scope = self.rng.pick(Scope::ALL);
                let v = if s.is_int() && self.rng.chance(25) {
                    let y = self.get(s);
                    self.b.atomic_cas(scope, p, x, y)
                } else {
                    self.b.atomic(op, scope, p, x)
                }
                .expect("atomic");
                self.add(v);
            }
            22 => {
                let s = self.rng.pick(&[
                    ScalarType::I32,
                    ScalarType::U32,
                    ScalarType::F32,
                    ScalarType::I64,
                    ScalarType::U64,
                    ScalarType::F64,
                ]);
                let m = full(self);
                let x = self.get(s);
                let lane = self.get(ScalarType::U32);
                let width = 1u32 << self.rng.below(6);
                let mode = self.rng.pick(ShflMode::ALL);
                let v = self.b.shfl(mode, m, x, lane, width).expect("shfl");
                self.add(v);
            }
            23 => {
                let m = full(self);
                if self.rng.chance(50) {
                    let p = self.get(ScalarType::Bool);
                    let v = self
                        .b
                        .vote(self.rng.pick(VoteMode::ALL), m, p)
                        .expect("vote");
                    self.add(v);
                } else {
                    let s = self.rng.pick(&[
                        ScalarType::I32,
                        ScalarType::U32,
                        ScalarType::I64,
                        ScalarType::U64,
                    ]);
                    let x = self.get(s);
                    let rs = self
                        .b
                        .match_(self.rng.pick(MatchMode::ALL), m, x)
                        .expect("match");
                    for r in rs {
                        self.add(r);
                    }
                }
            }
            24 | 25 => self.mma(),
            26 => self.cp_async(),
            27 => {
                let count = 1 + self.rng.below(64) as u64;
                if self.shared_used + count * 4 > 8 * 1024 {
                    return;
                }
                self.shared_used += count * 4;
                let p = self.b.shared_alloc(Type::F32, count).expect("shared_alloc");
                self.add(p);
                let x = self.get(ScalarType::F32);
                self.b.store(p, x).expect("store shared");
                let q = self
                    .b
                    .dyn_shared(Type::array(Type::U32, 4))
                    .expect("dyn_shared");
                self.add(q);
                let e = self
                    .b
                    .ptr_cast(q, Type::ptr(AddrSpace::Shared, Type::U32))
                    .expect("ptr_cast");
                self.add(e);
                let y = self.b.load(e).expect("load dyn");
                self.add(y);
            }
            _ => self.binary(),
        }
    }

    fn mma(&mut self) {
        let shape = self.rng.pick(&MmaShape::ALL);
        let elem = self.rng.pick(&[ScalarType::F16, ScalarType::BF16]);
        let acc_elem = if elem == ScalarType::BF16 || self.rng.chance(50) {
            ScalarType::F32
        } else {
            ScalarType::F16
        };
        let Some(pa) = self.ptr_to(&Type::Scalar(elem)) else {
            return;
        };
        let Some(pc) = self.ptr_to(&Type::Scalar(acc_elem)) else {
            return;
        };
        let ldm = self.get(ScalarType::U32);
        let la = self.rng.pick(&[Layout::Row, Layout::Col]);
        let lb = self.rng.pick(&[Layout::Row, Layout::Col]);
        let fa = frag_type(FragKind::A, shape, elem, Some(la));
        let fb = frag_type(FragKind::B, shape, elem, Some(lb));
        let fc = frag_type(FragKind::Acc, shape, acc_elem, None);
        let a = self.b.mma_load(fa, la, pa, ldm).expect("mma.load a");
        self.add(a);
        let b = self.b.mma_load(fb, lb, pa, ldm).expect("mma.load b");
        self.add(b);
        let c = if self.rng.chance(50) {
            let z = self.get(acc_elem);
            self.b.mma_fill(fc, z).expect("mma.fill")
        } else {
            let l = self.rng.pick(&[Layout::Row, Layout::Col]);
            self.b.mma_load(fc, l, pc, ldm).expect("mma.load acc")
        };
        self.add(c);
        let d = self.b.mma(a, b, c).expect("mma");
        self.add(d);
        let l = self.rng.pick(&[Layout::Row, Layout::Col]);
        self.b.mma_store(l, pc, d, ldm).expect("mma.store");
    }

    fn cp_async(&mut self) {
        if self.space != AddrSpace::Global || self.shared_used + 256 > 8 * 1024 {
            return;
        }
        self.shared_used += 256;
        let dst = self.b.shared_alloc(Type::F32, 64).expect("shared_alloc");
        self.add(dst);
        let Some(src) = self.ptr_to(&Type::F32) else {
            return;
        };
        let (bytes, cache) = match self.rng.below(4) {
            0 => (4, CacheHint::Ca),
            1 => (8, CacheHint::Ca),
            2 => (16, CacheHint::Ca),
            _ => (16, CacheHint::Cg),
        };
        self.b.cp_async(bytes, cache, dst, src).expect("cp.async");
        self.b.cp_async_commit().expect("commit");
        self.b
            .cp_async_wait(self.rng.below(32) as u32)
            .expect("wait");
    }
}

/// Pointer parameters every function gets, so memory ops always find one.
fn pointer_params(space: AddrSpace, gpu: bool) -> Vec<Type> {
    let mut elems = vec![
        Type::F32,
        Type::U32,
        Type::I64,
        Type::Vector(ScalarType::F32, 4),
    ];
    if gpu {
        elems.extend([Type::F16, Type::BF16]);
    }
    elems.into_iter().map(|e| Type::ptr(space, e)).collect()
}

fn gen_function(
    rng: &mut Rng,
    name: &str,
    kind: Kind,
    callees: Vec<Callee>,
    allow_alloca: bool,
) -> (Function, Callee) {
    let space = if kind == Kind::Host {
        AddrSpace::Generic
    } else {
        AddrSpace::Global
    };
    let mut params = pointer_params(space, kind != Kind::Host);
    let scalar_pool: Vec<ScalarType> = if kind == Kind::Host {
        INTS.iter()
            .copied()
            .chain([ScalarType::F32, ScalarType::F64, ScalarType::Bool])
            .collect()
    } else {
        ScalarType::ALL.to_vec()
    };
    for _ in 0..rng.below(4) {
        params.push(Type::Scalar(rng.pick(&scalar_pool)));
    }
    let returns: Vec<Type> = if kind == Kind::Kernel {
        Vec::new()
    } else {
        (0..rng.below(3))
            .map(|_| Type::Scalar(rng.pick(&scalar_pool)))
            .collect()
    };
    let b = match kind {
        Kind::Host => FunctionBuilder::host(name, &params, &returns),
        Kind::Device => FunctionBuilder::device(name, &params, &returns),
        Kind::Kernel => FunctionBuilder::kernel(name, &params),
    };
    let mut g = Gen {
        rng,
        b,
        kind,
        scopes: vec![Vec::new()],
        allow_alloca,
        callees,
        space,
        budget: 60,
        shared_used: 0,
    };
    for p in g.b.params() {
        g.add(p);
    }
    g.stmts(0);
    while g.budget > 0 && g.rng.chance(60) {
        g.stmts(0);
    }
    let rets: Vec<ValueId> = returns
        .iter()
        .map(|t| g.get(t.as_scalar().unwrap_or(ScalarType::I32)))
        .collect();
    g.b.ret(&rets).expect("ret");
    {
        let c = g.b.constraints_mut();
        c.no_alloc = !allow_alloca && g.rng.chance(50);
        c.critical_path = g.rng.chance(30);
        c.inline_always = kind == Kind::Device && g.rng.chance(30);
        c.no_bounds_check = g.rng.chance(20);
        c.opt_level = g.rng.pick(OptLevel::ALL);
    }
    if kind == Kind::Kernel {
        let threads = [(256, 1, 1), (32, 4, 2), (1024, 1, 1), (16, 16, 4)];
        let (x, y, z) = g.rng.pick(&threads);
        let with_threads = g.rng.chance(60);
        // Within every target's occupancy limits (the verifier checks them per
        // arch: at most 16 blocks and 1536 threads per SM on sm_86) and ptxas's
        // register floor of 24.
        let per_sm = (1536 / (x * y * z) as usize).min(16);
        let min_blocks = g.rng.chance(40).then(|| 1 + g.rng.below(per_sm) as u32);
        // At or above every arch's floor (28 for kernels reaching tensor-core MMA).
        let max_registers = g.rng.chance(40).then(|| 28 + g.rng.below(228) as u32);
        let shared_bytes = if g.rng.chance(40) {
            g.rng.below(40_000) as u32
        } else {
            0
        };
        let arch = g
            .rng
            .chance(30)
            .then(|| g.rng.pick(&[Arch::Sm80, Arch::Sm86, Arch::Sm90]));
        if let Some(k) = g.b.kernel_info_mut() {
            k.max_threads = with_threads.then_some([x, y, z]);
            k.min_blocks = if with_threads { min_blocks } else { None };
            k.max_registers = max_registers;
            k.shared_bytes = shared_bytes;
            k.arch = arch;
        }
    }
    let f = g.b.finish().expect("finish");
    let callee = Callee {
        name: name.to_string(),
        params,
        returns,
    };
    (f, callee)
}

fn gen_module(seed: u64) -> Module {
    let mut rng = Rng(seed);
    let mut m = Module::new(format!("random_{seed:x}"));
    let target_sets: [&[Arch]; 4] = [
        &[Arch::Sm80],
        &[Arch::Sm80, Arch::Sm90],
        &[Arch::Sm86, Arch::Sm89],
        &[Arch::Sm90],
    ];
    m.targets = rng.pick(&target_sets).to_vec();
    if rng.chance(30) {
        m.ptx_version = Some(PtxVersion::new(7, 8));
    }
    // Callees come first; they never allocate, so `no_alloc` callers stay valid.
    let (dev, dev_callee) = gen_function(&mut rng, "dev_helper", Kind::Device, Vec::new(), false);
    let (host_leaf, host_callee) =
        gen_function(&mut rng, "host_leaf", Kind::Host, Vec::new(), false);
    m.functions.push(dev);
    m.functions.push(host_leaf);
    let kernels = 1 + rng.below(2);
    for k in 0..kernels {
        let alloca = rng.chance(50);
        let (f, _) = gen_function(
            &mut rng,
            &format!("kernel_{k}"),
            Kind::Kernel,
            vec![dev_callee.clone()],
            alloca,
        );
        m.functions.push(f);
    }
    let alloca = rng.chance(50);
    let (h, _) = gen_function(&mut rng, "host_main", Kind::Host, vec![host_callee], alloca);
    m.functions.push(h);
    m
}

fn check_round_trip(seed: u64) -> Result<(), TestCaseError> {
    let m = gen_module(seed);
    if let Err(e) = verify_module(&m) {
        return Err(TestCaseError::fail(format!(
            "seed {seed:#x}: generated module does not verify: {e}\n{}",
            print_module(&m)
        )));
    }
    let text = print_module(&m);
    let parsed = parse_module_named(&text, Some("gen.zir"))
        .map_err(|e| TestCaseError::fail(format!("seed {seed:#x}: {e}\n{text}")))?;
    prop_assert_eq!(&parsed, &m, "seed {:#x}", seed);
    let json = m
        .to_json()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back = Module::from_json(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, &m, "seed {:#x}: JSON round trip", seed);
    prop_assert_eq!(print_module(&parsed), text.clone(), "seed {:#x}", seed);
    // Every instruction's location is the line that prints it.
    let lines: Vec<&str> = text.lines().collect();
    for f in &parsed.functions {
        for (_, i) in f.insts_in_order() {
            let loc = f.inst(i).loc.clone();
            let Some(loc) = loc else {
                return Err(TestCaseError::fail("instruction without location"));
            };
            let line = lines.get(loc.line as usize - 1).copied().unwrap_or("");
            prop_assert_eq!(line.trim(), print_inst(f, i));
            prop_assert_eq!(loc.col, 5);
            prop_assert_eq!(loc.file.as_deref(), Some("gen.zir"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_valid_modules_round_trip(seed in any::<u64>()) {
        check_round_trip(seed)?;
    }
}

/// The generator really covers every op kind: over a fixed set of seeds, every
/// mnemonic family appears (so the property above cannot silently weaken).
#[test]
fn generator_covers_every_op() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..60u64 {
        let m = gen_module(seed);
        for f in &m.functions {
            for d in &f.insts {
                let mn = d.op.mnemonic();
                seen.insert(mn.clone());
                if let Some((head, _)) = mn.split_once('.') {
                    seen.insert(head.to_string());
                }
            }
        }
    }
    let want = [
        "const",
        "add",
        "sub",
        "mul",
        "div",
        "rem",
        "min",
        "max",
        "and",
        "or",
        "xor",
        "shl",
        "shr",
        "neg",
        "not",
        "abs",
        "sqrt",
        "exp",
        "fma",
        "cmp",
        "select",
        "cast",
        "bitcast",
        "extract",
        "insert",
        "load",
        "store",
        "ptr_add",
        "ptr_cast",
        "alloca",
        "shared_alloc",
        "dyn_shared",
        "thread_idx",
        "block_idx",
        "block_dim",
        "grid_dim",
        "lane_id",
        "barrier",
        "fence",
        "warp_sync",
        "atomic",
        "atomic.cas.block",
        "shfl",
        "vote",
        "match",
        "mma.load.row",
        "mma.load.col",
        "mma.fill",
        "mma",
        "mma.store.row",
        "mma.store.col",
        "cp.async.cg.16",
        "cp.async.ca.4",
        "cp.async.commit",
        "cp.async.wait",
        "call",
        "jump",
        "br",
        "return",
    ];
    for w in want {
        assert!(seen.contains(w), "generator never produced `{w}`");
    }
    // And the fixed seeds round trip too.
    for seed in 0..60u64 {
        if let Err(e) = check_round_trip(seed) {
            panic!("{e}");
        }
    }
}
