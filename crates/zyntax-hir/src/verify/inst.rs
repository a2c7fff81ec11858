//! Per-instruction type checks: the table's signatures, then the rules
//! `check_op` adds by hand for each op.

use crate::entities::{BlockId, InstId};
use crate::ir::{FunctionKind, InstData};
use crate::op::{CacheHint, CmpOp, Op};
use crate::types::{AddrSpace, FragKind, ScalarType, Type};

use super::diag::Ctx;
use super::flow::{check_branch, check_call};
use super::op_rules::{
    check_alloc, check_atomic_type, check_bulk_reduce, check_const, check_named_barrier,
    check_shared_align, check_wgmma, is_half_pair, ordered_access_type,
};
use super::structure::placed_blocks;
use super::types::{frag_problem, memory_type_problem};
use super::{MAX_ALLOCA_BYTES, MAX_STATIC_SHARED_BYTES};

pub(super) fn check_insts(cx: &mut Ctx) {
    let f = cx.f;
    for b in placed_blocks(cx) {
        for i in f.blocks[b.index()].insts.clone() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            check_inst(cx, b, i, d);
        }
    }
}

/// Result of type-checking one instruction: `Err(message)` on the first problem.
pub(super) type Check = Result<(), String>;

pub(super) fn check_inst(cx: &mut Ctx, b: BlockId, i: InstId, d: &InstData) {
    let f = cx.f;
    // Operands and results that do not exist: report and stop (types unknown).
    let mut missing = false;
    for (what, vs) in [("operand", &d.args), ("result", &d.results)] {
        for v in vs.iter() {
            if !f.has_value(*v) {
                cx.inst_err(
                    b,
                    i,
                    format!("{what} {v} does not exist ({} values)", f.values.len()),
                );
                missing = true;
            }
        }
    }
    for t in &d.targets {
        for v in &t.args {
            if !f.has_value(*v) {
                cx.inst_err(
                    b,
                    i,
                    format!(
                        "branch argument {v} does not exist ({} values)",
                        f.values.len()
                    ),
                );
                missing = true;
            }
        }
    }
    if !d.op.is_terminator() && !d.targets.is_empty() {
        cx.inst_err(b, i, "only jump and br have branch targets");
    }
    if d.op.is_gpu() && matches!(f.kind, FunctionKind::Host) {
        cx.inst_err(
            b,
            i,
            format!(
                "GPU instruction `{}` in host function @{}; use a kernel or device function",
                d.op.mnemonic(),
                f.name
            ),
        );
    }
    if missing {
        return;
    }
    let args: Vec<&Type> = d.args.iter().map(|v| &f.values[v.index()].ty).collect();
    let results: Vec<&Type> = d.results.iter().map(|v| &f.values[v.index()].ty).collect();
    if let Err(msg) = check_op(cx, d, &args, &results) {
        cx.inst_err(b, i, msg);
    }
}

fn arity(d: &InstData, args: usize, results: usize) -> Check {
    if d.args.len() != args || d.results.len() != results {
        return Err(format!(
            "`{}` takes {args} operand{} and gives {results} result{}, got {} and {}",
            d.op.mnemonic(),
            if args == 1 { "" } else { "s" },
            if results == 1 { "" } else { "s" },
            d.args.len(),
            d.results.len()
        ));
    }
    Ok(())
}

pub(super) fn same(what: &str, got: &Type, want: &Type) -> Check {
    if got != want {
        return Err(format!("{what} has type {got}, expected {want}"));
    }
    Ok(())
}

pub(super) fn scalar(t: &Type) -> Option<ScalarType> {
    t.as_scalar()
}

fn is_u32(t: &Type) -> bool {
    *t == Type::U32
}

pub(super) fn want_u32(what: &str, t: &Type) -> Check {
    if !is_u32(t) {
        return Err(format!("{what} must be u32, got {t}"));
    }
    Ok(())
}

fn gpu_mem_ptr<'t>(what: &str, t: &'t Type) -> Result<(AddrSpace, &'t Type), String> {
    match t {
        Type::Ptr(space, pointee)
            if matches!(
                space,
                AddrSpace::Global
                    | AddrSpace::Shared
                    | AddrSpace::Generic
                    | AddrSpace::SharedCluster
            ) =>
        {
            Ok((*space, pointee))
        }
        _ => Err(format!(
            "{what} must be a pointer to global, shared or generic memory, got {t}"
        )),
    }
}

fn check_op(cx: &Ctx, d: &InstData, a: &[&Type], r: &[&Type]) -> Check {
    let f = cx.f;
    let mn = d.op.mnemonic();
    // Operand and result counts come from the instruction table; the rules below are per-op meaning.
    let def = d.op.def();
    if let Some((args, results)) = def.arity() {
        arity(d, args, results)?;
    }
    // The relational type rules the row declares; the arms below say only
    // what that vocabulary cannot (each says why).
    if let Some(s) = crate::table::sig_of(def) {
        crate::sig::check(s, &mn, def.operands.unwrap_or(&[]), a, r)?;
    }
    match &d.op {
        // The literal must fit the result type: a value rule.
        Op::Const(c) => check_const(*c, r[0]),
        // The scalar family is the row's `types`; half pairs take only some ops.
        Op::Binary(_) => {
            if is_half_pair(a[0]) {
                // Packed f16x2/bf16x2 arithmetic (issue 12): one PTX instruction per pair.
                if !matches!(
                    d.op,
                    Op::Binary(
                        crate::op::BinOp::Add
                            | crate::op::BinOp::Sub
                            | crate::op::BinOp::Mul
                            | crate::op::BinOp::Min
                            | crate::op::BinOp::Max
                    )
                ) {
                    return Err(format!(
                        "`{mn}` on {}: half pairs take add, sub, mul, min, max and fma",
                        a[0]
                    ));
                }
                return Ok(());
            }
            let Some(s) = scalar(a[0]) else {
                return Err(format!(
                    "`{mn}` takes scalars, got {} (extract vector lanes first; only the half pairs vec<f16, 2> and vec<bf16, 2> take arithmetic)",
                    a[0]
                ));
            };
            let want = d.op.def().types;
            if !want.accepts(s) {
                return Err(format!("`{mn}` takes {}, got {s}", want.plural()));
            }
            Ok(())
        }
        // The scalar family is the row's `types`.
        Op::Unary(_) => {
            let Some(s) = scalar(a[0]) else {
                return Err(format!("`{mn}` takes a scalar, got {}", a[0]));
            };
            let want = d.op.def().types;
            if !want.accepts(s) {
                return Err(format!("`{mn}` takes {}, got {s}", want.singular()));
            }
            same("the result", r[0], a[0])
        }
        // Floats or half pairs: a family the signature has no name for.
        Op::Fma if !a[0].is_float() && !is_half_pair(a[0]) => {
            Err(format!("`fma` takes floats, got {}", a[0]))
        }
        // Bool and pointers compare with eq/ne only: a rule on the sub-op and the type.
        Op::Cmp(op) => {
            let eq_only = matches!(op, CmpOp::Eq | CmpOp::Ne);
            let ok = match a[0] {
                Type::Scalar(s) => s.is_int() || s.is_float() || (s.is_bool() && eq_only),
                Type::Ptr(..) => eq_only,
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "`{mn}` compares integers or floats (bool and pointers with eq/ne only), got {}",
                    a[0]
                ));
            }
            Ok(())
        }
        // The signature has no "not a fragment".
        Op::Select if matches!(a[1], Type::Frag(_)) => {
            Err("`select` cannot choose between fragments".into())
        }
        // Any scalar to any non-bool scalar: a rule on the pair.
        Op::Cast => {
            let (Some(from), Some(to)) = (scalar(a[0]), scalar(r[0])) else {
                return Err(format!(
                    "`cast` converts between scalar numeric types, got {} to {} (use ptr_cast for pointers)",
                    a[0], r[0]
                ));
            };
            if to.is_bool() {
                return Err(format!(
                    "`cast` to bool is not defined; compare with zero (cmp.ne) instead of casting {from}"
                ));
            }
            Ok(())
        }
        // Equal sizes: a rule on sizes.
        Op::Bitcast => {
            let plain =
                |t: &Type| matches!(t, Type::Scalar(s) | Type::Vector(s, _) if !s.is_bool());
            if !plain(a[0]) || !plain(r[0]) {
                return Err(format!(
                    "`bitcast` reinterprets non-bool scalars or vectors, got {} to {} (use ptr_cast for pointers)",
                    a[0], r[0]
                ));
            }
            if a[0].size_bytes() != r[0].size_bytes() {
                return Err(format!(
                    "`bitcast` needs types of one size, got {} ({} bytes) to {} ({} bytes)",
                    a[0],
                    a[0].size_bytes().unwrap_or(0),
                    r[0],
                    r[0].size_bytes().unwrap_or(0)
                ));
            }
            Ok(())
        }
        // The lane immediate must fit the vector (also `insert`).
        Op::Extract(lane) => {
            let Type::Vector(s, n) = a[0] else {
                return Err(format!("`extract` needs a vector, got {}", a[0]));
            };
            if lane >= n {
                return Err(format!("lane {lane} is out of range for {}", a[0]));
            }
            same("the result", r[0], &Type::Scalar(*s))
        }
        Op::Insert(lane) => {
            let Type::Vector(s, n) = a[0] else {
                return Err(format!("`insert` needs a vector, got {}", a[0]));
            };
            if lane >= n {
                return Err(format!("lane {lane} is out of range for {}", a[0]));
            }
            same("the inserted value", a[1], &Type::Scalar(*s))?;
            same("the result", r[0], a[0])
        }
        // No whole arrays; the message is pinned by tests (also `store`: constant memory).
        Op::Load => {
            let Type::Ptr(_, pointee) = a[0] else {
                return Err(format!("`load` needs a pointer, got {}", a[0]));
            };
            if let Type::Array(..) = **pointee {
                return Err(format!(
                    "cannot load a whole array ({pointee}); ptr_cast to the element type and load elements"
                ));
            }
            same("the result", r[0], pointee)
        }
        Op::Store => {
            let Type::Ptr(space, pointee) = a[0] else {
                return Err(format!("`store` needs a pointer, got {}", a[0]));
            };
            if *space == AddrSpace::Constant {
                return Err("constant memory is read-only".into());
            }
            if let Type::Array(..) = **pointee {
                return Err(format!(
                    "cannot store a whole array ({pointee}); ptr_cast to the element type and store elements"
                ));
            }
            if a[1] != &**pointee {
                return Err(format!(
                    "stored value has type {}, but the pointer points to {pointee}",
                    a[1]
                ));
            }
            Ok(())
        }
        // The result is the operand's pointer type, space included: signatures have no space variables.
        Op::PtrAdd => {
            if !a[0].is_ptr() {
                return Err(format!("`ptr_add` needs a pointer, got {}", a[0]));
            }
            if !a[1].is_int() {
                return Err(format!("`ptr_add` index must be an integer, got {}", a[1]));
            }
            same("the result", r[0], a[0])
        }
        // Which address-space changes are allowed: a rule on two spaces.
        Op::PtrCast => {
            let (Type::Ptr(from, _), Type::Ptr(to, _)) = (a[0], r[0]) else {
                return Err(format!(
                    "`ptr_cast` converts pointers, got {} to {}",
                    a[0], r[0]
                ));
            };
            if from != to && *from != AddrSpace::Generic && *to != AddrSpace::Generic {
                return Err(format!(
                    "`ptr_cast` from {from} to {to}: address spaces change only to or from generic (cast through generic)"
                ));
            }
            if from != to && *to == AddrSpace::SharedCluster {
                return Err(format!(
                    "`ptr_cast` from {from} to shared_cluster: a shared_cluster pointer comes from `mapa`"
                ));
            }
            Ok(())
        }
        // The result type follows the immediates; sizes have limits (also the shared allocations).
        Op::Alloca { elem, count } => {
            check_alloc(elem, *count, MAX_ALLOCA_BYTES, "alloca")?;
            same(
                "the result",
                r[0],
                &Type::ptr(AddrSpace::Local, elem.clone()),
            )
        }
        Op::SharedAlloc { elem, count, align } => {
            check_alloc(elem, *count, MAX_STATIC_SHARED_BYTES, "shared_alloc")?;
            check_shared_align(*align, "shared_alloc")?;
            same(
                "the result",
                r[0],
                &Type::ptr(AddrSpace::Shared, elem.clone()),
            )
        }
        Op::DynShared { elem, align } => {
            check_shared_align(*align, "dyn_shared")?;
            if let Some(m) = memory_type_problem(elem) {
                return Err(format!("dyn_shared element: {m}"));
            }
            same(
                "the result",
                r[0],
                &Type::ptr(AddrSpace::Shared, elem.clone()),
            )
        }
        // Immediate ranges are not types (also the other waits, setmaxnreg, named barriers).
        Op::CpAsyncWait(n) => {
            if *n > 31 {
                return Err(format!("cp.async.wait {n}: at most 31 pending groups"));
            }
            Ok(())
        }
        // Element types depend on the operation; the message names the pointee (pinned by tests).
        Op::Atomic { op, .. } => {
            let (_, pointee) = gpu_mem_ptr("the atomic's pointer", a[0])?;
            if a[1] != pointee {
                return Err(format!(
                    "atomic value has type {}, but the pointer points to {pointee}",
                    a[1]
                ));
            }
            same("the result", r[0], a[1])?;
            check_atomic_type(*op, a[1])
        }
        // Its integer-only rule reads like the atomic family's (`check_atomic_type`).
        Op::AtomicCas { .. } => {
            let pointee = a[1];
            if !matches!(
                scalar(pointee),
                Some(ScalarType::I32 | ScalarType::U32 | ScalarType::I64 | ScalarType::U64)
            ) {
                return Err(format!(
                    "atomic.cas works on i32, u32, i64 or u64, got {pointee} (bitcast floats to the same-size integer)"
                ));
            }
            Ok(())
        }
        // The width immediate's range is not a type.
        Op::Shfl { width, .. } => {
            if !(1..=32).contains(width) || !width.is_power_of_two() {
                return Err(format!(
                    "shuffle width {width} must be a power of two in 1..=32"
                ));
            }
            Ok(())
        }
        // Fragment kinds, shapes and element types (also `mma.fill`, `mma`, `mma.store`).
        Op::MmaLoad { frag, layout } => {
            if let Some(m) = frag_problem(frag) {
                return Err(m);
            }
            if frag.kind != FragKind::Acc && frag.layout != Some(*layout) {
                return Err(format!(
                    "mma.load.{layout} of {frag}: A/B fragments load with their own layout ({})",
                    frag.layout.map_or("none", |l| l.name())
                ));
            }
            let (_, pointee) = gpu_mem_ptr("the mma.load pointer", a[0])?;
            same("the pointee", pointee, &Type::Scalar(frag.elem))?;
            want_u32("ldm", a[1])?;
            same("the result", r[0], &Type::Frag(*frag))
        }
        Op::MmaFill => {
            let Type::Frag(fr) = r[0] else {
                return Err(format!("mma.fill gives a fragment, got {}", r[0]));
            };
            if fr.kind != FragKind::Acc {
                return Err(format!("mma.fill fills accumulators, got {fr}"));
            }
            same("the fill value", a[0], &Type::Scalar(fr.elem))
        }
        Op::Mma => {
            let (Type::Frag(fa), Type::Frag(fb), Type::Frag(fc)) = (a[0], a[1], a[2]) else {
                return Err(format!(
                    "mma takes fragments a, b, acc, got {}, {}, {}",
                    a[0], a[1], a[2]
                ));
            };
            if fa.kind != FragKind::A || fb.kind != FragKind::B || fc.kind != FragKind::Acc {
                return Err(format!(
                    "mma takes an A, a B and an accumulator fragment in that order, got {fa}, {fb}, {fc}"
                ));
            }
            if fa.shape != fb.shape || fa.shape != fc.shape {
                return Err(format!(
                    "mma fragments must have one shape, got {}, {}, {}",
                    fa.shape.name(),
                    fb.shape.name(),
                    fc.shape.name()
                ));
            }
            if fa.elem != fb.elem {
                return Err(format!(
                    "mma A and B hold one element type, got {} and {}",
                    fa.elem, fb.elem
                ));
            }
            if fa.elem == ScalarType::BF16 && fc.elem != ScalarType::F32 {
                return Err(format!("bf16 mma accumulates in f32, got {}", fc.elem));
            }
            same("the result", r[0], a[2])
        }
        Op::MmaStore { .. } => {
            let Type::Frag(fr) = a[1] else {
                return Err(format!("mma.store stores a fragment, got {}", a[1]));
            };
            if fr.kind != FragKind::Acc {
                return Err(format!("mma.store stores accumulators, got {fr}"));
            }
            let (_, pointee) = gpu_mem_ptr("the mma.store pointer", a[0])?;
            same("the pointee", pointee, &Type::Scalar(fr.elem))?;
            want_u32("ldm", a[2])
        }
        // Byte count and cache hint are immediates.
        Op::CpAsync { bytes, cache } => {
            if !matches!(bytes, 4 | 8 | 16) {
                return Err(format!("cp.async copies 4, 8 or 16 bytes, got {bytes}"));
            }
            if *cache == CacheHint::Cg && *bytes != 16 {
                return Err(format!(
                    "cp.async.cg copies 16 bytes only, got {bytes} (use ca)"
                ));
            }
            Ok(())
        }
        // Warp MMA (issue 12): fragment types follow the shape and element immediates.
        Op::MmaSync { shape, elem } => {
            if *shape != elem.shape() {
                return Err(format!(
                    "mma.sync on {elem} has shape {}, not {shape}",
                    elem.shape()
                ));
            }
            let acc = a[2]
                .elem_scalar()
                .filter(|s| elem.accumulators().contains(s));
            let Some(acc) = acc else {
                let want: Vec<String> = elem
                    .accumulators()
                    .iter()
                    .map(|s| elem.fragment_types(*s)[2].to_string())
                    .collect();
                return Err(format!(
                    "mma.sync.{shape}.{elem} accumulator c must be {}, got {}",
                    want.join(" or "),
                    a[2]
                ));
            };
            let [ta, tb, tc] = elem.fragment_types(acc);
            same("fragment a", a[0], &ta)?;
            same("fragment b", a[1], &tb)?;
            same("fragment c", a[2], &tc)?;
            same("the result", r[0], &tc)
        }
        // The register count follows the `num` immediate.
        Op::Ldmatrix { num, .. } | Op::Stmatrix { num, .. } => {
            if !matches!(num, 1 | 2 | 4) {
                return Err(format!(
                    "{mn}: the matrix count must be 1, 2 or 4, got {num}"
                ));
            }
            let regs = if *num == 1 {
                Type::U32
            } else {
                Type::Vector(ScalarType::U32, *num)
            };
            match d.op {
                Op::Ldmatrix { .. } => same("the result", r[0], &regs),
                _ => same("the stored value", a[1], &regs),
            }
        }
        // The cache operator's direction; 16-, 32-, 64-bit elements up to 16 bytes.
        Op::LoadCached(c) | Op::StoreCached(c) => {
            let load = matches!(d.op, Op::LoadCached(_));
            let name = d.op.mnemonic();
            if (load && !c.for_load()) || (!load && !c.for_store()) {
                return Err(format!(
                    "{name}: `{c}` is not a {} cache operator (loads: ca, cg, cs, lu, cv; stores: wb, cg, cs, wt; both: evict_first, evict_last)",
                    if load { "load" } else { "store" }
                ));
            }
            let Type::Ptr(AddrSpace::Global, pointee) = a[0] else {
                return Err(format!(
                    "{name} needs a pointer to global memory, got {}",
                    a[0]
                ));
            };
            // One PTX ld/st of 16-, 32- or 64-bit elements, up to 16 bytes.
            let ok = match &**pointee {
                Type::Scalar(s) | Type::Vector(s, _) => {
                    matches!(s.bits(), 16 | 32 | 64)
                        && pointee.size_bytes().is_some_and(|b| b <= 16)
                }
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "{name} moves scalars or vectors of 16-, 32- or 64-bit elements up to 16 bytes, got {pointee}"
                ));
            }
            if load {
                same("the result", r[0], pointee)
            } else {
                same("the stored value", a[1], pointee)
            }
        }
        // Types come from the callee, the global, the target block or the function, not the op.
        Op::Call(name) => check_call(cx, d, name, a, r),
        Op::GlobalAddr(name) => {
            let Some(g) = cx.m.global(name) else {
                return Err(format!(
                    "global_addr of @{name}, which is not a global of the module"
                ));
            };
            same(&format!("the pointer to @{name}"), r[0], &g.ptr_type())
        }
        Op::Jump | Op::Branch => check_branch(cx, d, a),
        Op::Return => {
            if !d.results.is_empty() {
                return Err("return has no results".into());
            }
            if a.len() != f.returns.len() {
                return Err(format!(
                    "return gives {} value{}, but @{} returns {}",
                    a.len(),
                    if a.len() == 1 { "" } else { "s" },
                    f.name,
                    f.returns.len()
                ));
            }
            for (n, (got, want)) in a.iter().zip(&f.returns).enumerate() {
                same(&format!("returned value {n}"), got, want)?;
            }
            Ok(())
        }
        // The element types depend on the reduction (a table of its own).
        Op::Red { op, .. } => check_atomic_type(*op, a[1]),
        // 32 or 64 bits: a size rule, not a type list.
        Op::LoadAcquire(_) | Op::StoreRelease(_) => {
            let Type::Ptr(_, pointee) = a[0] else {
                return Ok(());
            };
            ordered_access_type(pointee)
        }
        // Warpgroup MMA (issue 13 item 1): shape arithmetic.
        Op::Wgmma(w) => check_wgmma(*w, a, r),
        // An accumulator vector whose lanes are a multiple of 4.
        Op::WgmmaZero => match r[0] {
            Type::Vector(s, n)
                if matches!(s, ScalarType::F32 | ScalarType::F16 | ScalarType::I32)
                    && *n >= 4
                    && n.is_multiple_of(4) =>
            {
                Ok(())
            }
            t => Err(format!(
                "wgmma.zero makes a vec<f32|f16|i32, N/2> accumulator, got {t}"
            )),
        },
        Op::WgmmaWait(n) => {
            if *n > 7 {
                return Err(format!("{mn}: at most 7 pending groups, got {n}"));
            }
            Ok(())
        }
        Op::Setmaxnreg { count, .. } => {
            if !(24..=256).contains(count) || !count.is_multiple_of(8) {
                return Err(format!(
                    "{mn}: the register count must be a multiple of 8 in 24..256, got {count}"
                ));
            }
            Ok(())
        }
        // The element types depend on the reduction (a table of its own).
        Op::BulkReduce(op) => check_bulk_reduce(*op, &mn, a),
        Op::BulkWaitGroup { pending, .. } => {
            if *pending > 63 {
                return Err(format!("`{mn}` {pending}: at most 63 pending groups"));
            }
            Ok(())
        }
        Op::NamedBarrier { id, count, .. } => check_named_barrier(f, &mn, *id, *count),
        // The result type follows the immediate.
        Op::CvtPack(fmt) => same("the result", r[0], &fmt.packed_type()),
        // Only the fp8 formats unpack: a rule on the immediate.
        Op::CvtUnpack(fmt) => {
            if !fmt.is_fp8() {
                return Err(format!(
                    "`{mn}`: only fp8 pairs (e4m3x2, e5m2x2) unpack; widen f16/bf16 with `cast`"
                ));
            }
            Ok(())
        }
        // Its message is pinned by tests (`mapa` maps ...).
        Op::Mapa => {
            let Type::Ptr(AddrSpace::Shared, pointee) = a[0] else {
                return Err(format!(
                    "`mapa` maps a pointer to shared memory (ptr<shared, T>), got {}",
                    a[0]
                ));
            };
            want_u32("the target block's rank", a[1])?;
            same(
                "the result",
                r[0],
                &Type::ptr(AddrSpace::SharedCluster, (**pointee).clone()),
            )
        }
        // The row's signature said everything.
        _ => Ok(()),
    }
}
