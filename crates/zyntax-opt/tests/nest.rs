//! Parallel loop nests (zyntax_opt::nest) on the interpreter: a ragged 2-D
//! elementwise kernel against a Rust reference on fresh random inputs, and
//! the workgroup limits.

use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter};
#[path = "common/rand_f32.rs"]
mod rand_f32;
use rand_f32::{bytes, f32p, floats, random, seed};
use zyntax_opt::nest::{self, NestError};

/// out[i, j] = a[i, j] * 2 + bias[j] over rows x cols.
#[test]
fn ragged_2d_nest_matches_the_reference() {
    let mut b = FunctionBuilder::kernel("ew", &[f32p(), f32p(), f32p(), Type::U32, Type::U32]);
    let (a, bias, out, rows, cols) = (b.param(0), b.param(1), b.param(2), b.param(3), b.param(4));
    let frame = nest::begin_parallel_for(&mut b, &[rows, cols], &[16, 16]).unwrap();
    let (i, j) = (frame.indices[0], frame.indices[1]);
    let row = b.mul(i, cols).unwrap();
    let k = b.add(row, j).unwrap();
    let pa = b.ptr_add(a, k).unwrap();
    let x = b.load(pa).unwrap();
    let two = b.fconst(Type::F32, 2.0).unwrap();
    let pb = b.ptr_add(bias, j).unwrap();
    let y = b.load(pb).unwrap();
    let v = b.fma(x, two, y).unwrap();
    let po = b.ptr_add(out, k).unwrap();
    b.store(po, v).unwrap();
    nest::end_parallel_for(&mut b, frame).unwrap();
    b.ret(&[]).unwrap();
    let f = b.finish().unwrap();
    assert_eq!(
        f.kind.kernel_info().and_then(|k| k.max_threads),
        Some([16, 16, 1])
    );
    let mut m = Module::new("ew");
    m.functions.push(f);
    verify_module(&m).unwrap();

    let (rows, cols) = (37usize, 45usize);
    let mut s = seed();
    let (av, bv) = (random(rows * cols, &mut s), random(cols, &mut s));
    let mut bufs = vec![bytes(&av), bytes(&bv), bytes(&vec![f32::NAN; rows * cols])];
    let (grid, block) = nest::launch_grid(&[rows as u64, cols as u64], &[16, 16]).unwrap();
    assert_eq!((grid, block), ([3, 3, 1], [16, 16, 1]));
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Buffer(2),
        Arg::Int(rows as i128),
        Arg::Int(cols as i128),
    ];
    Interpreter::new(&m)
        .unwrap()
        .launch("ew", grid, block, 0, &args, &mut bufs)
        .unwrap();
    let got = floats(&bufs[2]);
    for r in 0..rows {
        for c in 0..cols {
            let want = av[r * cols + c].mul_add(2.0, bv[c]);
            assert_eq!(got[r * cols + c].to_bits(), want.to_bits(), "({r}, {c})");
        }
    }
}

#[test]
fn workgroup_limits_and_shapes() {
    let err = |wg: &[u32]| match nest::block_shape(wg) {
        Err(NestError::Shape(m)) => m,
        other => panic!("{wg:?}: {other:?}"),
    };
    assert!(err(&[64, 32]).contains("2048 threads; devices allow at most 1024 per block"));
    assert!(err(&[128, 1, 1]).contains("128 threads along z; devices allow at most 64"));
    assert!(err(&[0, 4]).contains("extent below 1"));
    assert!(err(&[1, 1, 1, 1]).contains("1 to 3 dimensions"));
    assert_eq!(nest::block_shape(&[2, 4, 8]).unwrap(), [8, 4, 2]);
    assert_eq!(
        nest::launch_grid(&[3, 4, 5], &[1, 2, 4]).unwrap(),
        ([2, 2, 3], [4, 2, 1])
    );
    assert!(nest::launch_grid(&[8, 8], &[64]).is_err());
    // Grids past the device limits (y and z at most 65535 blocks).
    let Err(NestError::Shape(m)) = nest::launch_grid(&[1 << 40, 4], &[1, 4]) else {
        panic!("a grid of 2^40 blocks along y")
    };
    assert!(
        m.contains("needs 1099511627776 blocks along y with workgroup (1, 4)"),
        "{m}"
    );
    assert!(m.ends_with("at most 65535"), "{m}");
    // The builder is untouched by a rejected workgroup.
    let mut b = FunctionBuilder::kernel("k", &[Type::U32]);
    let n = b.param(0);
    assert!(nest::begin_parallel_for(&mut b, &[n], &[2048]).is_err());
    b.ret(&[]).unwrap();
    assert!(b.finish().is_ok());
}
