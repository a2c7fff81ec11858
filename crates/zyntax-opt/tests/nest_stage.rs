//! The builder-level tiler in the Rust core (zyntax_opt::nest_stage): affine
//! forms, the staging plan with each refusal reason and the tile-size
//! limits, and a matmul nest tiled from Rust run on the interpreter against
//! a float64 reference and bit-exactly against the same nest untiled.

use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter};
#[path = "common/rand_f32.rs"]
mod rand_f32;
use rand_f32::{bytes, f32p, floats, random, seed};
use zyntax_opt::nest;
use zyntax_opt::nest_stage::*;

fn v(i: usize) -> ValueId {
    ValueId::from_index(i)
}

/// A nest whose values v0..v9 are defined before it.
fn nest2(workgroup: &[u32]) -> StageNest {
    StageNest {
        workgroup: workgroup.to_vec(),
        first_id: v(10),
        writes: vec![v(2)],
        shared_bytes: 0,
        names: Names::default(),
    }
}

fn op(ptr: usize, index: Result<Affine, NotAffine>) -> StageOperand {
    StageOperand {
        ptr: v(ptr),
        elem_bytes: Some(4),
        index,
    }
}

fn i(d: usize) -> Affine {
    Affine::sym(Sym::Index(d))
}

fn k() -> Affine {
    Affine::sym(Sym::K)
}

#[test]
fn affine_forms_lift_sums_and_invariant_products() {
    let names = Names::default();
    // i0 * K + k, with K a value: affine, printed as written.
    let a = i(0).mul(&Affine::value(v(3))).unwrap().add(&k());
    assert_eq!(a.display(&names).to_string(), "v3*i0 + 1*k");
    assert_eq!(a.coef(Sym::K), &[Coef::Int(1)]);
    // (2 + N) * j distributes over the summands; ints fold.
    let b = Affine::int(2)
        .add(&Affine::value(v(4)))
        .mul(&i(1).mul(&Affine::int(3)).unwrap())
        .unwrap();
    assert_eq!(b.display(&names).to_string(), "6+3*v4*i1");
    // i * j is not affine, and says so with both sides.
    let e = i(0).mul(&i(1)).unwrap_err();
    assert_eq!(
        e.why(&names),
        "product of two loop-dependent terms (1*i0 * 1*i1)"
    );
    assert_eq!(Affine::default().display(&names).to_string(), "0");
}

#[test]
fn matmul_operands_are_staged_with_the_report_of_the_python_tiler() {
    let mut n = nest2(&[16, 16]);
    let k_ = Affine::value(v(5));
    let n_ = Affine::value(v(4));
    let ops = [
        op(0, Ok(i(0).mul(&k_).unwrap().add(&k()))),
        op(1, Ok(k().mul(&n_).unwrap().add(&i(1)))),
    ];
    let plan = plan_reduction(&mut n, Extent::Value(v(5)), &ops, None).unwrap();
    assert_eq!(
        plan.report,
        [
            "reduction over k < v5",
            "  operand 0 (v0[v5*i0 + 1*k]): tiled through shared memory, 16x16, reused across i1",
            "  operand 1 (v1[v4*k + 1*i1]): tiled through shared memory, 16x16, reused across i0",
        ]
    );
    assert_eq!(plan.tile_k, 16);
    // a: broadcast reads, k fastest; b: x (i1) fastest, staged along it.
    let (a, b) = (&plan.operands[0], &plan.operands[1]);
    assert_eq!(a.layout, [Sym::K, Sym::Index(0)]);
    assert_eq!((a.pad, a.size), (0, 256));
    assert_eq!(b.layout, [Sym::Index(1), Sym::K]);
    assert_eq!(b.stage_order, [Sym::Index(1), Sym::K]);
    assert_eq!(n.shared_bytes, 2048);
}

#[test]
fn a_transposed_operand_gets_padded_rows() {
    let mut n = nest2(&[16, 16]);
    // a[k * M + i0]: unit stride along i0, but k is the fastest coordinate.
    let ops = [op(0, Ok(k().mul(&Affine::value(v(3))).unwrap().add(&i(0))))];
    let plan = plan_reduction(&mut n, Extent::Const(40), &ops, None).unwrap();
    let a = &plan.operands[0];
    assert_eq!(a.layout, [Sym::K, Sym::Index(0)]);
    assert_eq!(a.stage_order, [Sym::Index(0), Sym::K]);
    assert_eq!((a.pad, a.size), (1, 17 * 16));
    assert!(plan.report[1]
        .ends_with("16x16, rows padded by 1 against bank conflicts, reused across i1"));
}

#[test]
fn every_refusal_reason_is_reported() {
    let mut n = nest2(&[16, 16]);
    let inside = v(12); // defined inside the nest
    let ops = [
        op(0, Err(i(0).mul(&i(1)).unwrap_err())),
        op(2, Ok(k())), // the nest writes v2
        op(11, Ok(k())),
        op(0, Ok(k().mul(&Affine::value(inside)).unwrap())),
        op(0, Ok(k().add(&Affine::value(inside)))),
        op(0, Ok(i(0).add(&i(1)))),
        op(0, Ok(i(0).add(&i(1)).add(&k()))),
        StageOperand {
            ptr: v(3),
            elem_bytes: None,
            index: Ok(k()),
        },
        op(
            0,
            Err(NotAffine::Opaque {
                why: "the index is computed by a function (data-dependent), not an affine form"
                    .into(),
                text: Some("perm[k]".into()),
            }),
        ),
    ];
    let plan = plan_reduction(&mut n, Extent::Const(8), &ops, None).unwrap();
    let why: Vec<_> = plan
        .operands
        .iter()
        .map(|p| p.why.clone().unwrap())
        .collect();
    assert_eq!(
        why,
        [
            "index is not affine in the loop indices: product of two loop-dependent terms (1*i0 * 1*i1)",
            "the nest writes this buffer (aliasing)",
            "the pointer is computed inside the nest (aliasing cannot be ruled out)",
            "coefficient of k is not loop-invariant",
            "index offset depends on values computed inside the nest",
            "does not depend on the reduction index (nothing to stage)",
            "depends on every nest index (no reuse across the workgroup)",
            "not a pointer value",
            "index is not affine in the loop indices: the index is computed by a function \
             (data-dependent), not an affine form",
        ]
    );
    assert_eq!(plan.report[0], "reduction over k < 8");
    assert!(plan.report[9].starts_with("  operand 8 (v0[perm[k]]): not tiled"));
    assert_eq!(n.shared_bytes, 0);
    // A bound defined inside the nest: nothing is staged.
    let plan = plan_reduction(&mut n, Extent::Value(inside), &ops[..1], None).unwrap();
    assert_eq!(
        plan.operands[0].why.as_deref(),
        Some("the reduction bound is not loop-invariant (defined inside the nest)")
    );
}

#[test]
fn tile_size_limits() {
    let ops = [op(0, Ok(i(0).mul(&Affine::value(v(5))).unwrap().add(&k())))];
    // An explicit tile_k past the per-thread copy limit is an error, with the numbers.
    let err = plan_reduction(
        &mut nest2(&[16, 16]),
        Extent::Value(v(5)),
        &ops,
        Some(1 << 20),
    )
    .unwrap_err();
    assert_eq!(
        err.0,
        "tile_k=1048576: each of the 256 threads would copy 65536 elements of operand 0's \
         tile per step (at most 32); use a smaller tile_k or workgroup"
    );
    let err =
        plan_reduction(&mut nest2(&[16, 16]), Extent::Value(v(5)), &ops, Some(0)).unwrap_err();
    assert_eq!(err.0, "tile_k must be at least 1, not 0");
    // A constant bound below tile_k shortens it.
    let plan = plan_reduction(&mut nest2(&[16, 16]), Extent::Const(5), &ops, None).unwrap();
    assert_eq!(plan.tile_k, 5);
    // f64 with workgroup (2, 512): 512 x 16 of b alone is 64 KiB; tile_k halves to 8.
    let mut n = nest2(&[2, 512]);
    let f64op = |index| StageOperand {
        ptr: v(1),
        elem_bytes: Some(8),
        index,
    };
    let ops = [f64op(Ok(k().mul(&Affine::value(v(4))).unwrap().add(&i(1))))];
    let plan = plan_reduction(&mut n, Extent::Value(v(5)), &ops, None).unwrap();
    assert_eq!(plan.tile_k, 8);
    assert_eq!(n.shared_bytes, 512 * 8 * 8);
    // The shared memory left by earlier reductions bounds later ones; when not
    // even tile_k 1 fits the operands are loaded directly.
    n.shared_bytes = MAX_SHARED_BYTES - 100;
    let plan = plan_reduction(&mut n, Extent::Value(v(5)), &ops, None).unwrap();
    assert_eq!(
        plan.operands[0].why.as_deref(),
        Some(
            "its tile does not fit: the tiles need 4096 bytes of shared memory besides 49052 \
             for earlier reductions; a block has at most 49152"
        )
    );
    assert!(!plan.any_staged());
}

/// c[i, j] = Σ_k a[i, k] * b[k, j] over M x N x K, as a tiled nest (or the
/// plain loop with `tile_k` None and a bound that forbids staging). The
/// sizes are `ity` values: `u32`, or `i64` as the `lang.prange` translator
/// passes them (the indices then meet them at `i64`).
fn matmul_kernel(
    workgroup: &[u32],
    tile_k: Option<u64>,
    staged: bool,
    ity: &Type,
) -> (Module, Vec<String>) {
    let params = [
        f32p(),
        f32p(),
        f32p(),
        ity.clone(),
        ity.clone(),
        ity.clone(),
    ];
    let mut b = FunctionBuilder::kernel("mm", &params);
    let (a, bm, c) = (b.param(0), b.param(1), b.param(2));
    let (m, n, kk) = (b.param(3), b.param(4), b.param(5));
    let mut nest = TiledNest::begin(&mut b, &[m, n], workgroup, &[c]).unwrap();
    let (vi, vj) = (nest.values[0], nest.values[1]);
    let ops = [
        Operand {
            ptr: a,
            index: Ok(nest.index(0).mul(&Affine::value(kk)).unwrap().add(&k())),
        },
        Operand {
            ptr: bm,
            index: Ok(k().mul(&Affine::value(n)).unwrap().add(&nest.index(1))),
        },
    ];
    let init = b.fconst(Type::F32, 0.0).unwrap();
    // The untiled reference: the same nest with a bound computed inside it.
    let extent = if staged {
        Extent::Value(kk)
    } else {
        let zero = b.iconst(ity.clone(), 0).unwrap();
        Extent::Value(b.add(kk, zero).unwrap())
    };
    let (acc, plan) = nest
        .reduce(
            &mut b,
            extent,
            init,
            &ops,
            tile_k,
            &mut |b, acc, xs| b.fma(xs[0], xs[1], acc),
            &mut |_, _, _, _| unreachable!("every index is affine"),
        )
        .unwrap();
    assert_eq!(plan.any_staged(), staged);
    let g = nest.begin_inside(&mut b).unwrap();
    let (vi, vj) = if *ity == Type::U32 {
        (vi, vj)
    } else {
        (
            b.cast(vi, ity.clone()).unwrap(),
            b.cast(vj, ity.clone()).unwrap(),
        )
    };
    let row = b.mul(vi, n).unwrap();
    let at = b.add(row, vj).unwrap();
    let p = b.ptr_add(c, at).unwrap();
    b.store(p, acc).unwrap();
    nest.end_inside(&mut b, g).unwrap();
    b.ret(&[]).unwrap();
    let mut module = Module::new("mm");
    module.functions.push(b.finish().unwrap());
    verify_module(&module).unwrap();
    (module, nest.report)
}

fn run(
    module: &Module,
    workgroup: &[u32],
    a: &[f32],
    b: &[f32],
    dims: (usize, usize, usize),
) -> Vec<f32> {
    let (m, n, k) = dims;
    let mut bufs = vec![bytes(a), bytes(b), bytes(&vec![f32::NAN; m * n])];
    let (grid, block) = nest::launch_grid(&[m as u64, n as u64], workgroup).unwrap();
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Buffer(2),
        Arg::Int(m as i128),
        Arg::Int(n as i128),
        Arg::Int(k as i128),
    ];
    Interpreter::new(module)
        .unwrap()
        .launch("mm", grid, block, 0, &args, &mut bufs)
        .unwrap();
    floats(&bufs[2])
}

#[test]
fn tiled_matmul_matches_float64_and_the_untiled_nest_bit_for_bit() {
    let mut s = seed();
    for (workgroup, tile_k, dims, ity) in [
        (vec![8u32, 8], None, (19usize, 21usize, 37usize), Type::U32),
        (vec![4, 16], Some(5), (9, 33, 12), Type::U32),
        (vec![8, 4], Some(3), (13, 10, 17), Type::I64),
    ] {
        let (m, n, k) = dims;
        let (a, b) = (random(m * k, &mut s), random(k * n, &mut s));
        let (tiled, report) = matmul_kernel(&workgroup, tile_k, true, &ity);
        assert!(
            report[1].contains("tiled through shared memory"),
            "{report:?}"
        );
        // The index type comes from the sizes: u32 sizes keep every index
        // u32, i64 ones make the indices that meet them i64.
        let text = print_module(&tiled);
        assert_eq!(text.contains("i64"), ity == Type::I64, "{text}");
        let (plain, report) = matmul_kernel(&workgroup, None, false, &ity);
        assert!(report[1].contains("not tiled"), "{report:?}");
        let got = run(&tiled, &workgroup, &a, &b, dims);
        let want = run(&plain, &workgroup, &a, &b, dims);
        for r in 0..m {
            for c in 0..n {
                let exact: f64 = (0..k)
                    .map(|x| f64::from(a[r * k + x]) * f64::from(b[x * n + c]))
                    .sum();
                let g = got[r * n + c];
                assert!(
                    (f64::from(g) - exact).abs() <= 1e-4 * (1.0 + exact.abs()),
                    "({r}, {c})"
                );
                assert_eq!(
                    g.to_bits(),
                    want[r * n + c].to_bits(),
                    "({r}, {c}) tiled vs untiled"
                );
            }
        }
    }
}
