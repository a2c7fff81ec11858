//! `FnLower::lower_inst`: one HIR instruction to textual LLVM IR, dispatched
//! on its op (scalar arithmetic goes on to `arith.rs`, calls and prefetches to
//! `calls.rs`, bit-field ops to `bits.rs`); kept out of `lower.rs` for its size.

use super::*;

impl FnLower<'_> {
    pub(super) fn lower_inst(&mut self, b: BlockId, i: InstId, sig: &Sig) -> LResult<()> {
        let f = self.f;
        let Some(d) = f.insts.get(i.index()).cloned() else {
            return self.e(format!("unknown instruction {i}"));
        };
        let res = d.results.first().copied();
        let r = res.map(|v| format!("%v{}", v.0)).unwrap_or_default();
        let rty = match res {
            Some(v) => Some(self.ty(v)?),
            None => None,
        };
        let arg = |k: usize| -> LResult<ValueId> {
            d.args.get(k).copied().ok_or_else(|| LowerError {
                function: f.name.clone(),
                message: format!("`{}` is missing operand {k}", d.op.mnemonic()),
            })
        };
        match &d.op {
            Op::Const(c) => {
                let t = rty.clone().unwrap_or(Type::I32);
                if self
                    .ops
                    .get(res.map_or(0, |v| v.index()))
                    .is_some_and(|s| s.starts_with('%'))
                {
                    let v = c.as_f64().unwrap_or(0.0);
                    let tt = self.vt(&t)?;
                    self.emit(format!("{r} = fptrunc double {} to {tt}", f64_lit(v)));
                }
            }
            Op::Binary(op) => {
                let (a, bb) = (arg(0)?, arg(1)?);
                let t = self.ty(a)?;
                let (ao, bo) = (self.op(a)?, self.op(bb)?);
                self.binary(*op, &t, &ao, &bo, &r, i)?;
            }
            Op::Unary(op) => {
                let a = arg(0)?;
                let t = self.ty(a)?;
                let ao = self.op(a)?;
                self.unary(*op, &t, &ao, &r)?;
            }
            Op::Bits(op) => {
                let ops = d.args.iter().map(|&v| Ok((self.op(v)?, self.ty(v)?)));
                let ops = ops.collect::<LResult<Vec<_>>>()?;
                let t = rty.clone().unwrap_or(Type::U32);
                self.bit_op(*op, &t, &ops, &r)?;
            }
            // PTX's approximate f32 math, as the interpreter gives it: the
            // correctly rounded value (in f64, rounded once); `ex2_ftz` flushes
            // a subnormal operand and result to signed zero.
            Op::Approx(op) => {
                let ftz = matches!(op, ApproxOp::Ex2Ftz);
                let mut x = self.op(arg(0)?)?;
                if ftz {
                    x = self.flush_subnormal(&x);
                }
                let w = self.t();
                self.emit(format!("{w} = fpext float {x} to double"));
                let y = self.t();
                match op {
                    ApproxOp::Ex2 | ApproxOp::Ex2Ftz => {
                        self.decl("declare double @llvm.exp2.f64(double)");
                        self.emit(format!("{y} = call double @llvm.exp2.f64(double {w})"));
                    }
                    ApproxOp::Rcp => self.emit(format!("{y} = fdiv double 1.0, {w}")),
                    ApproxOp::Tanh => {
                        self.decl("declare double @llvm.tanh.f64(double)");
                        self.emit(format!("{y} = call double @llvm.tanh.f64(double {w})"));
                    }
                }
                if ftz {
                    let n = self.t();
                    self.emit(format!("{n} = fptrunc double {y} to float"));
                    let f = self.flush_subnormal(&n);
                    self.emit(format!("{r} = fadd float {f}, -0.0"));
                } else {
                    self.emit(format!("{r} = fptrunc double {y} to float"));
                }
            }
            Op::Fma => {
                let t = self.ty(arg(0)?)?;
                let ops = [self.op(arg(0)?)?, self.op(arg(1)?)?, self.op(arg(2)?)?];
                self.float_op(
                    &t,
                    &r,
                    |me, tt, x| {
                        let m = mangle_from(tt);
                        me.decl(format!("declare {tt} @llvm.fma.{m}({tt}, {tt}, {tt})"));
                        let o = me.t();
                        me.emit(format!(
                            "{o} = call {tt} @llvm.fma.{m}({tt} {}, {tt} {}, {tt} {})",
                            x[0], x[1], x[2]
                        ));
                        Ok(o)
                    },
                    &ops,
                )?;
            }
            Op::Cmp(c) => {
                let (a, bb) = (arg(0)?, arg(1)?);
                let t = self.ty(a)?;
                let (mut ao, mut bo) = (self.op(a)?, self.op(bb)?);
                let s = t.elem_scalar();
                let mut tt = self.vt(&t)?;
                if let Some(s) = s.filter(|s| s.is_float()) {
                    if is_half(s) {
                        let wide = widen(&t);
                        ao = self.conv("fpext", &tt, &ao, &wide);
                        bo = self.conv("fpext", &tt, &bo, &wide);
                        tt = wide;
                    }
                    let p = scalar::fcmp(*c);
                    self.emit(format!("{r} = fcmp {p} {tt} {ao}, {bo}"));
                } else {
                    let signed = s.is_some_and(|s| s.is_signed());
                    let p = scalar::icmp(*c, signed);
                    self.emit(format!("{r} = icmp {p} {tt} {ao}, {bo}"));
                }
            }
            Op::Select => {
                let t = self.ty(arg(1)?)?;
                let tt = self.vt(&t)?;
                let (c, a, bb) = (self.op(arg(0)?)?, self.op(arg(1)?)?, self.op(arg(2)?)?);
                self.emit(format!("{r} = select i1 {c}, {tt} {a}, {tt} {bb}"));
                if let (Some(rv), Some(o1), Some(o2)) = (
                    res,
                    self.offs.get(arg(1)?.index()).cloned().flatten(),
                    self.offs.get(arg(2)?.index()).cloned().flatten(),
                ) {
                    if self.origins.get(rv.index()).copied().flatten().is_some() {
                        let o = format!("%o{}", rv.0);
                        self.emit(format!("{o} = select i1 {c}, i64 {o1}, i64 {o2}"));
                        self.offs[rv.index()] = Some(o);
                    }
                }
            }
            Op::Cast => {
                let a = arg(0)?;
                let from = self.ty(a)?;
                let to = rty.clone().unwrap_or(Type::I32);
                let ao = self.op(a)?;
                self.cast(&from, &to, &ao, &r)?;
            }
            Op::Bitcast => {
                let a = arg(0)?;
                let from = self.ty(a)?;
                let to = rty.clone().unwrap_or(Type::I32);
                let (ft, tt) = (self.vt(&from)?, self.vt(&to)?);
                let ao = self.op(a)?;
                if from.elem_scalar() == Some(ScalarType::Bool)
                    || to.elem_scalar() == Some(ScalarType::Bool)
                {
                    return self.e("bitcast of bool is not supported");
                }
                let how = match (from.is_ptr(), to.is_ptr()) {
                    (true, false) => "ptrtoint",
                    (false, true) => "inttoptr",
                    _ => "bitcast",
                };
                self.emit(format!("{r} = {how} {ft} {ao} to {tt}"));
            }
            Op::Extract(l) => {
                let a = arg(0)?;
                let tt = self.vt(&self.ty(a)?)?;
                let ao = self.op(a)?;
                self.emit(format!("{r} = extractelement {tt} {ao}, i32 {l}"));
            }
            Op::Insert(l) => {
                let (a, s) = (arg(0)?, arg(1)?);
                let tt = self.vt(&self.ty(a)?)?;
                let st = self.vt(&self.ty(s)?)?;
                let (ao, so) = (self.op(a)?, self.op(s)?);
                self.emit(format!("{r} = insertelement {tt} {ao}, {st} {so}, i32 {l}"));
            }
            // Cache operators are hints for the GPU's caches: a plain access here.
            // `ld.acquire` is an LLVM acquire load (any scope: one host).
            Op::Load | Op::LoadCached(_) | Op::LoadAcquire(_) => {
                let p = arg(0)?;
                let t = rty.clone().unwrap_or(Type::I32);
                let Some(m) = mty(&t) else {
                    return self.e(format!("cannot load a value of type {t}"));
                };
                self.check_access(p, t.size_bytes().unwrap_or(1), i)?;
                if let Some((addr, dist)) = self.prefetch.get(&i).copied() {
                    self.emit_prefetch(addr, dist)?;
                }
                let po = self.op(p)?;
                let al = host_align(&t);
                let (ld, order) = if matches!(d.op, Op::LoadAcquire(_)) {
                    ("load atomic", " acquire")
                } else {
                    ("load", "")
                };
                if t.is_bool() {
                    let x = self.t();
                    self.emit(format!("{x} = {ld} i8, ptr {po}{order}, align 1"));
                    self.emit(format!("{r} = trunc i8 {x} to i1"));
                } else {
                    self.emit(format!("{r} = {ld} {m}, ptr {po}{order}, align {al}"));
                }
            }
            Op::Store | Op::StoreCached(_) | Op::StoreRelease(_) => {
                let (p, v) = (arg(0)?, arg(1)?);
                let t = self.ty(v)?;
                let Some(m) = mty(&t) else {
                    return self.e(format!("cannot store a value of type {t}"));
                };
                self.check_access(p, t.size_bytes().unwrap_or(1), i)?;
                let (po, vo) = (self.op(p)?, self.op(v)?);
                let al = host_align(&t);
                let (st, order) = if matches!(d.op, Op::StoreRelease(_)) {
                    ("store atomic", " release")
                } else {
                    ("store", "")
                };
                if t.is_bool() {
                    let x = self.t();
                    self.emit(format!("{x} = zext i1 {vo} to i8"));
                    self.emit(format!("{st} i8 {x}, ptr {po}{order}, align 1"));
                } else {
                    self.emit(format!("{st} {m} {vo}, ptr {po}{order}, align {al}"));
                }
            }
            Op::PtrAdd => {
                let (p, idx) = (arg(0)?, arg(1)?);
                let pt = self.ty(p)?;
                let pointee = pt.pointee().cloned().unwrap_or(Type::U8);
                let Some(m) = mty(&pointee) else {
                    return self.e(format!("cannot index a pointer to {pointee}"));
                };
                let i64v = self.ext64(idx)?;
                let po = self.op(p)?;
                self.emit(format!(
                    "{r} = getelementptr inbounds {m}, ptr {po}, i64 {i64v}"
                ));
                if let (Some(rv), Some(o)) = (res, self.offs.get(p.index()).cloned().flatten()) {
                    let sz = pointee.size_bytes().unwrap_or(1);
                    let x = self.t();
                    self.emit(format!("{x} = mul i64 {i64v}, {sz}"));
                    let no = format!("%o{}", rv.0);
                    self.emit(format!("{no} = add i64 {o}, {x}"));
                    self.offs[rv.index()] = Some(no);
                }
            }
            Op::PtrCast => {
                let p = arg(0)?;
                let po = self.op(p)?;
                self.emit(format!("{r} = bitcast ptr {po} to ptr"));
                if let Some(rv) = res {
                    self.offs[rv.index()] = self.offs.get(p.index()).cloned().flatten();
                }
            }
            Op::Alloca { elem, count } => {
                let Some(m) = mty(elem) else {
                    return self.e(format!("cannot allocate {elem}"));
                };
                let al = elem.align_bytes().max(1);
                let _ = writeln!(
                    self.entry_text,
                    "  {r} = alloca {m}, i64 {count}, align {al}"
                );
                if let Some(rv) = res {
                    self.offs[rv.index()] = Some("0".into());
                    let bytes = elem.size_bytes().unwrap_or(0).saturating_mul(*count);
                    self.lens_bytes.insert(Origin::Alloca(i), bytes.to_string());
                }
            }
            Op::SharedAlloc { elem, count, .. } => {
                let off = self
                    .mi
                    .shared_offsets
                    .get(&(f.name.clone(), i))
                    .copied()
                    .unwrap_or(0);
                if !sig.gpu {
                    return self.e("shared_alloc outside a GPU function");
                }
                // In the entry block: it dominates every use, so a kernel
                // split at its barriers never saves it per thread.
                let _ = writeln!(
                    self.entry_text,
                    "  {r} = getelementptr i8, ptr %shbase, i64 {off}"
                );
                if let Some(rv) = res {
                    self.offs[rv.index()] = Some("0".into());
                    let bytes = elem.size_bytes().unwrap_or(0).saturating_mul(*count);
                    self.lens_bytes.insert(Origin::Shared(i), bytes.to_string());
                }
            }
            Op::DynShared { .. } => {
                let p = self.t();
                self.emit(format!("{p} = getelementptr i8, ptr %ctx, i64 {CTX_DYN}"));
                self.emit(format!("{r} = load ptr, ptr {p}, align 8"));
            }
            Op::ThreadIdx(dm) | Op::BlockIdx(dm) | Op::BlockDim(dm) | Op::GridDim(dm) => {
                let base = match &d.op {
                    Op::ThreadIdx(_) => CTX_TID,
                    Op::BlockIdx(_) => CTX_BID,
                    Op::BlockDim(_) => CTX_BDIM,
                    _ => CTX_GDIM,
                };
                let k = match dm {
                    Dim::X => 0,
                    Dim::Y => 1,
                    Dim::Z => 2,
                };
                let v = self.ctx_u32(base, k);
                self.emit(format!("{r} = add i32 {v}, 0"));
            }
            Op::LaneId => {
                let (tx, ty_, tz) = (
                    self.ctx_u32(CTX_TID, 0),
                    self.ctx_u32(CTX_TID, 1),
                    self.ctx_u32(CTX_TID, 2),
                );
                let (bx, by) = (self.ctx_u32(CTX_BDIM, 0), self.ctx_u32(CTX_BDIM, 1));
                let a = self.t();
                self.emit(format!("{a} = mul i32 {tz}, {by}"));
                let bq = self.t();
                self.emit(format!("{bq} = add i32 {a}, {ty_}"));
                let c = self.t();
                self.emit(format!("{c} = mul i32 {bq}, {bx}"));
                let lin = self.t();
                self.emit(format!("{lin} = add i32 {c}, {tx}"));
                self.emit(format!("{r} = and i32 {lin}, 31"));
            }
            Op::Barrier if self.fission.is_some() => self.split_barrier(i),
            Op::Barrier
            | Op::Shfl { .. }
            | Op::Vote(_)
            | Op::WarpSync
            | Op::ElectSync
            | Op::Redux(_)
            | Op::Match(_)
                if f.is_kernel() =>
            {
                let ops = d.args.iter().map(|&v| Ok((self.op(v)?, self.ty(v)?)));
                let ops = ops.collect::<LResult<Vec<_>>>()?;
                let l = self.label();
                let sp = warp::Suspend::new(i, &d.op, &ops, &r, rty.as_ref());
                let sp = sp.or_else(|m| self.e(m))?;
                for line in sp.up_to_suspend(i, &l) {
                    self.emit(line);
                }
                self.open(l);
                sp.after.into_iter().for_each(|line| self.emit(line));
            }
            Op::Fence(_) => self.emit("fence seq_cst"),
            Op::FenceAcqRel(_) => self.emit("fence acq_rel"),
            // A compiler-only fence: orders this thread's accesses, emits no instruction.
            Op::CompilerFence => self.emit("fence syncscope(\"singlethread\") seq_cst"),
            // `red` is an atomic whose old value nobody reads.
            Op::Atomic { op, .. } | Op::Red { op, .. } => {
                let r = if matches!(d.op, Op::Red { .. }) {
                    self.t()
                } else {
                    r.clone()
                };
                let (p, v) = (arg(0)?, arg(1)?);
                let t = self.ty(v)?;
                let tt = self.vt(&t)?;
                if !matches!(t, Type::Scalar(_)) {
                    return self.e(format!(
                        "`{}` on {t} (a packed atomic) is not supported on the CPU",
                        d.op.mnemonic()
                    ));
                }
                self.check_access(p, t.size_bytes().unwrap_or(1), i)?;
                let s = t.as_scalar().unwrap_or(ScalarType::U32);
                let name = match (op, s.is_float(), s.is_signed()) {
                    (AtomicOp::Add, true, _) => "fadd",
                    (AtomicOp::Sub, true, _) => "fsub",
                    (AtomicOp::Min, true, _) => "fmin",
                    (AtomicOp::Max, true, _) => "fmax",
                    (AtomicOp::Add, false, _) => "add",
                    (AtomicOp::Sub, false, _) => "sub",
                    (AtomicOp::Min, false, true) => "min",
                    (AtomicOp::Max, false, true) => "max",
                    (AtomicOp::Min, false, false) => "umin",
                    (AtomicOp::Max, false, false) => "umax",
                    (AtomicOp::And, _, _) => "and",
                    (AtomicOp::Or, _, _) => "or",
                    (AtomicOp::Xor, _, _) => "xor",
                    (AtomicOp::Exch, _, _) => "xchg",
                    (AtomicOp::Inc, _, _) => "uinc_wrap",
                    (AtomicOp::Dec, _, _) => "udec_wrap",
                };
                let (po, vo) = (self.op(p)?, self.op(v)?);
                // Shared memory is the block's, and a block runs on one
                // worker from start to end: no other CPU thread can touch it,
                // so its atomics need no `lock` (the threads of the block run
                // one after another, each read-modify-write whole). The plain
                // form gives the same old value and memory; it is several
                // times cheaper (histogram's per-block counting).
                let plain = match name {
                    "add" | "sub" | "and" | "or" | "xor" => Some(name),
                    "fadd" | "fsub" if matches!(s, ScalarType::F32 | ScalarType::F64) => Some(name),
                    "xchg" => Some(""),
                    _ => None,
                };
                let shared = matches!(self.ty(p)?, Type::Ptr(AddrSpace::Shared, _));
                match plain {
                    Some(bin) if shared => {
                        let al = t.align_bytes();
                        self.emit(format!("{r} = load {tt}, ptr {po}, align {al}"));
                        let new = if bin.is_empty() {
                            vo
                        } else {
                            let n = self.t();
                            self.emit(format!("{n} = {bin} {tt} {r}, {vo}"));
                            n
                        };
                        self.emit(format!("store {tt} {new}, ptr {po}, align {al}"));
                    }
                    _ => self.emit(format!(
                        "{r} = atomicrmw {name} ptr {po}, {tt} {vo} seq_cst, align {}",
                        t.align_bytes()
                    )),
                }
            }
            Op::AtomicCas { .. } => {
                let (p, e, dsr) = (arg(0)?, arg(1)?, arg(2)?);
                let t = self.ty(e)?;
                if !t.is_int() {
                    return self.e(format!(
                        "atomic.cas on {t} is not supported on the CPU (integers only)"
                    ));
                }
                let tt = self.vt(&t)?;
                self.check_access(p, t.size_bytes().unwrap_or(1), i)?;
                let (po, eo, dso) = (self.op(p)?, self.op(e)?, self.op(dsr)?);
                let x = self.t();
                self.emit(format!(
                    "{x} = cmpxchg ptr {po}, {tt} {eo}, {tt} {dso} seq_cst seq_cst, align {}",
                    t.align_bytes()
                ));
                self.emit(format!("{r} = extractvalue {{ {tt}, i1 }} {x}, 0"));
            }
            Op::Call(name) => self.call(name, &d.args, &d.results, i)?,
            Op::Jump => {
                let t = d.targets.first().cloned().ok_or_else(|| LowerError {
                    function: f.name.clone(),
                    message: "jump without a target".into(),
                })?;
                let from = self.cur_label.clone();
                self.edge(&t, &from)?;
                let md = self.loop_md(b, t.block);
                self.emit(format!("br label %b{}{md}", t.block.0));
            }
            Op::Branch => {
                let c = self.op(arg(0)?)?;
                if d.targets.len() != 2 {
                    return self.e("br needs two targets");
                }
                let mut labels = Vec::new();
                let mut edges = Vec::new();
                for t in &d.targets {
                    if t.args.is_empty()
                        && f.blocks
                            .get(t.block.index())
                            .is_some_and(|bd| bd.params.is_empty())
                    {
                        let from = self.cur_label.clone();
                        self.edge(t, &from)?;
                        labels.push(format!("b{}", t.block.0));
                    } else {
                        let l = self.label();
                        labels.push(l.clone());
                        edges.push((l, t.clone()));
                    }
                }
                let md0 = if edges.is_empty() {
                    let a = self.loop_md(b, d.targets[0].block);
                    if a.is_empty() {
                        self.loop_md(b, d.targets[1].block)
                    } else {
                        a
                    }
                } else {
                    String::new()
                };
                self.emit(format!(
                    "br i1 {c}, label %{}, label %{}{md0}",
                    labels[0], labels[1]
                ));
                for (l, t) in edges {
                    self.open(l.clone());
                    self.edge(&t, &l)?;
                    let md = self.loop_md(b, t.block);
                    self.emit(format!("br label %b{}{md}", t.block.0));
                }
            }
            Op::Return => {
                if sig.multi_ret {
                    for (k, v) in d.args.iter().enumerate() {
                        let t = self.ty(*v)?;
                        let vo = self.op(*v)?;
                        let p = self.t();
                        self.emit(format!("{p} = getelementptr i64, ptr %rets, i64 {k}"));
                        if t.is_bool() {
                            let x = self.t();
                            self.emit(format!("{x} = zext i1 {vo} to i8"));
                            self.emit(format!("store i8 {x}, ptr {p}"));
                        } else {
                            let m = mty(&t).unwrap_or_else(|| "i64".into());
                            self.emit(format!("store {m} {vo}, ptr {p}"));
                        }
                    }
                    self.emit("ret void");
                } else if let Some(v) = d.args.first() {
                    let tt = self.vt(&self.ty(*v)?)?;
                    let vo = self.op(*v)?;
                    self.emit(format!("ret {tt} {vo}"));
                } else {
                    self.emit("ret void");
                }
            }
            Op::Unreachable => {
                let l = self.fail(ERR_UNREACHABLE, -1, "0", "0", i);
                self.emit(format!("br label %{l}"));
            }
            other => {
                return self.e(format!(
                    "`{}` cannot run on the CPU backend",
                    other.mnemonic()
                ));
            }
        }
        Ok(())
    }
}
