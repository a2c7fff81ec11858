//! Bad input gets a typed error naming the op and operand (or the schedule
//! field) before anything is lowered or launched.

use zyntax_hir::{Arch, Type, UnOp};
use zyntax_tile::{Schedule, TileBuilder, TileError};

fn builder() -> TileBuilder {
    TileBuilder::new("k", Schedule::block(&[16, 16]).warps(2))
}

#[test]
fn shape_mismatches_name_the_op_and_operand() {
    let mut t = builder();
    let a = t.full(&[16, 16], Type::F32, 1.0);
    let b = t.full(&[16, 8], Type::F32, 1.0);
    t.add(a, b);
    match t.finish() {
        Err(TileError::ShapeMismatch {
            op: "map",
            operand: "b",
            found,
            ..
        }) => assert_eq!(found, [16, 8]),
        other => panic!("{other:?}"),
    }

    let mut t = builder();
    let a = t.full(&[16, 8], Type::F32, 1.0);
    let b = t.full(&[4, 16], Type::F32, 1.0);
    let acc = t.full(&[16, 16], Type::F32, 0.0);
    t.dot(a, b, acc);
    let e = t.finish().unwrap_err();
    assert!(
        matches!(
            e,
            TileError::ShapeMismatch {
                op: "dot",
                operand: "b",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("[8, N]"), "{e}");

    let mut t = builder();
    let a = t.full(&[1, 16], Type::F32, 1.0);
    t.broadcast(a, &[16, 8]);
    assert!(matches!(
        t.finish(),
        Err(TileError::ShapeMismatch {
            op: "broadcast",
            operand: "tile",
            ..
        })
    ));

    let mut t = builder();
    let v = t.view_param("v", Type::F32, 2);
    let z = t.index(0);
    t.load(v, &[z, z], &[16, 12]);
    assert!(matches!(
        t.finish(),
        Err(TileError::ShapeMismatch {
            op: "load",
            operand: "shape",
            ..
        })
    ));

    let mut t = builder();
    t.full(&[1 << 16, 1 << 16], Type::F32, 0.0);
    assert!(matches!(
        t.finish(),
        Err(TileError::ShapeMismatch {
            op: "splat",
            operand: "shape",
            ..
        })
    ));

    let mut t = builder();
    let v = t.view_param("v", Type::F32, 2);
    let z = t.index(0);
    t.load(v, &[z], &[16, 16]);
    assert!(matches!(
        t.finish(),
        Err(TileError::ShapeMismatch {
            op: "load",
            operand: "origin",
            ..
        })
    ));
}

#[test]
fn unsupported_dtypes_and_pairs_are_named() {
    let mut t = builder();
    let a = t.full(&[16, 16], Type::F16, 1.0);
    let b = t.full(&[16, 16], Type::BF16, 1.0);
    let acc = t.full(&[16, 16], Type::F32, 0.0);
    t.dot(a, b, acc);
    let e = t.finish().unwrap_err();
    assert!(
        matches!(
            e,
            TileError::UnsupportedDtype {
                op: "dot",
                operand: "b",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("f16"), "{e}");

    let mut t = builder();
    let a = t.full(&[16, 16], Type::F32, 1.0);
    let acc = t.full(&[16, 16], Type::F16, 0.0);
    t.dot(a, a, acc);
    assert!(matches!(
        t.finish(),
        Err(TileError::UnsupportedDtype {
            op: "dot",
            operand: "acc",
            ..
        })
    ));

    let mut t = builder();
    let a = t.full(&[16, 16], Type::I32, 1.0);
    t.unary(UnOp::Exp, a);
    assert!(matches!(
        t.finish(),
        Err(TileError::UnsupportedDtype {
            op: "map",
            operand: "a",
            ..
        })
    ));

    let mut t = builder();
    let a = t.full(&[16, 16], Type::F16, 1.0);
    t.sum(a, 1);
    assert!(matches!(
        t.finish(),
        Err(TileError::UnsupportedDtype {
            op: "reduce",
            operand: "tile",
            ..
        })
    ));

    let mut t = builder();
    let v = t.view_param("v", Type::F32, 2);
    let z = t.index(0);
    let x = t.full(&[16, 16], Type::I32, 1.0);
    t.store(v, &[z, z], x);
    let e = t.finish().unwrap_err();
    assert!(
        matches!(
            e,
            TileError::UnsupportedDtype {
                op: "store",
                operand: "tile",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("`v`"), "{e}");

    let mut t = builder();
    let a = t.full(&[16, 16], Type::F32, 1.0);
    let c = t.full(&[16, 16], Type::F32, 1.0);
    t.where_(a, a, c);
    assert!(matches!(
        t.finish(),
        Err(TileError::UnsupportedDtype {
            op: "where",
            operand: "cond",
            ..
        })
    ));
}

#[test]
fn bad_axes_are_named() {
    let mut t = builder();
    let a = t.full(&[16, 16], Type::F32, 1.0);
    t.sum(a, 2);
    assert_eq!(
        t.finish().unwrap_err(),
        TileError::BadAxis {
            op: "reduce",
            axis: 2,
            rank: 2
        }
    );
    let mut t = builder();
    t.program_id(3);
    assert!(matches!(
        t.finish(),
        Err(TileError::BadAxis {
            op: "program_id",
            ..
        })
    ));
}

#[test]
fn the_first_error_is_the_one_reported() {
    let mut t = builder();
    let a = t.full(&[16, 16], Type::F32, 1.0);
    let bad = t.sum(a, 5);
    // Later ops on the placeholder do not replace the first error.
    let b = t.full(&[8, 8], Type::F32, 1.0);
    t.add(bad, b);
    assert!(matches!(
        t.finish(),
        Err(TileError::BadAxis {
            op: "reduce",
            axis: 5,
            ..
        })
    ));
}

#[test]
fn schedule_fields_are_validated_by_name() {
    let field = |s: Schedule| match s.validate() {
        Err(TileError::BadSchedule { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(Schedule::block(&[16, 16]).warps(3)), "warps");
    assert_eq!(field(Schedule::block(&[16, 16]).warps(64)), "warps");
    assert_eq!(field(Schedule::block(&[16, 16]).warps(0)), "warps");
    assert_eq!(field(Schedule::block(&[16, 24])), "block");
    assert_eq!(field(Schedule::block(&[])), "block");
    assert_eq!(field(Schedule::block(&[16, 16]).k(12)), "k");
    assert_eq!(field(Schedule::block(&[16, 16]).stages(0)), "stages");
    assert_eq!(field(Schedule::block(&[16, 16]).cluster(3)), "cluster");
    assert_eq!(
        field(Schedule::block(&[16, 16]).cluster(2).arch(Arch::Sm80)),
        "cluster"
    );
    Schedule::block(&[16, 16])
        .cluster(2)
        .arch(Arch::Sm90)
        .validate()
        .unwrap();

    // A builder with a bad schedule fails at finish, naming the field.
    let t = TileBuilder::new("k", Schedule::block(&[16, 16]).warps(5));
    assert!(matches!(
        t.finish(),
        Err(TileError::BadSchedule { field: "warps", .. })
    ));
}

#[test]
fn schedules_that_do_not_fit_are_refused() {
    // Shared memory: 3 stages of 256x64 and 64x256 f32 tiles are 384 KiB.
    let s = Schedule::block(&[256, 256])
        .k(64)
        .stages(3)
        .warps(8)
        .arch(Arch::Sm90);
    let e = s.validate_gemm(4).unwrap_err();
    assert!(
        matches!(e, TileError::DoesNotFit { field: "block", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("sm_90"), "{e}");
    // Registers: a 128x128 f32 accumulator over one warp is 512 per thread.
    let s = Schedule::block(&[128, 128]).k(8).warps(1);
    assert!(matches!(
        s.validate_gemm(4),
        Err(TileError::DoesNotFit { field: "warps", .. })
    ));
    // The same, caught when the program itself is lowered.
    let mut t = TileBuilder::new("k", Schedule::block(&[128, 128]).warps(1));
    let v = t.view_param("v", Type::F32, 2);
    let z = t.index(0);
    let x = t.full(&[128, 128], Type::F32, 1.0);
    t.store(v, &[z, z], x);
    assert!(matches!(
        t.finish(),
        Err(TileError::DoesNotFit { field: "warps", .. })
    ));
}

#[test]
fn loop_yields_must_match_the_carried_values() {
    let mut t = builder();
    let (lo, hi, step) = (t.index(0), t.index(4), t.index(1));
    let acc = t.full(&[16, 16], Type::F32, 0.0);
    t.for_range(lo, hi, step, &[acc.into()], |t, _, _| {
        vec![t.full(&[16, 8], Type::F32, 0.0).into()]
    });
    assert!(matches!(
        t.finish(),
        Err(TileError::ShapeMismatch {
            op: "for_range",
            operand: "yields",
            ..
        })
    ));

    let mut t = builder();
    let (lo, hi, step) = (t.index(0), t.index(4), t.index(1));
    let acc = t.full(&[16, 16], Type::F32, 0.0);
    t.for_range(lo, hi, step, &[acc.into()], |_, _, _| vec![]);
    assert!(matches!(
        t.finish(),
        Err(TileError::BadOperand {
            op: "for_range",
            operand: "yields",
            ..
        })
    ));
}

#[test]
fn aligned_view_declarations_are_checked() {
    let mut t = builder();
    t.view_param_aligned("x", Type::F32, 2, 2, 16);
    assert_eq!(
        t.finish().unwrap_err(),
        TileError::BadAxis {
            op: "view_param_aligned",
            axis: 2,
            rank: 2
        }
    );
    for align in [0, 12, 32] {
        let mut t = builder();
        t.view_param_aligned("x", Type::F32, 2, 1, align);
        assert!(matches!(
            t.finish(),
            Err(TileError::BadOperand {
                op: "view_param_aligned",
                operand: "align_bytes",
                ..
            })
        ));
    }
}
