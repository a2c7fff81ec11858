//! Grids in three dimensions, dynamic shared memory, constant memory, local
//! memory, and f16/bf16 arithmetic.

mod common;

use common::*;
use half::{bf16, f16};
use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter, TrapKind};

/// (to the type and back as f64, f64 rounded to the type as f32)
type Conv = (fn(f32) -> f64, fn(f64) -> f32);

fn g(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

fn module(fs: Vec<Function>) -> Module {
    let mut m = Module::new("t");
    m.targets = vec![Arch::from_name("sm_80").unwrap()];
    m.functions = fs;
    m
}

#[test]
fn indices_in_three_dimensions() {
    // out[gid * 4 + 0..4] = (tid packed, bid packed, dims packed, lane)
    let mut b = FunctionBuilder::kernel("k", &[g(Type::U32)]);
    let out = b.param(0);
    let get = |b: &mut FunctionBuilder,
               f: fn(&mut FunctionBuilder, Dim) -> BuildResult<ValueId>| {
        let x = f(b, Dim::X).unwrap();
        let y = f(b, Dim::Y).unwrap();
        let z = f(b, Dim::Z).unwrap();
        (x, y, z)
    };
    let (tx, ty, tz) = get(&mut b, FunctionBuilder::thread_idx);
    let (bx, by, bz) = get(&mut b, FunctionBuilder::block_idx);
    let (dx, dy, dz) = get(&mut b, FunctionBuilder::block_dim);
    let (gx, gy, _gz) = get(&mut b, FunctionBuilder::grid_dim);
    let pack = |b: &mut FunctionBuilder, x, y, z| {
        let c256 = b.iconst(Type::U32, 256).unwrap();
        let zy = b.mul(z, c256).unwrap();
        let zy = b.add(zy, y).unwrap();
        let zyx = b.mul(zy, c256).unwrap();
        b.add(zyx, x).unwrap()
    };
    let tp = pack(&mut b, tx, ty, tz);
    let bp = pack(&mut b, bx, by, bz);
    let dp = pack(&mut b, dx, dy, dz);
    let lane = b.lane_id().unwrap();
    // linear ids: t = tx + dx*(ty + dy*tz); blk = bx + gx*(by + gy*bz)
    let t1 = b.mul(dy, tz).unwrap();
    let t1 = b.add(ty, t1).unwrap();
    let t1 = b.mul(dx, t1).unwrap();
    let t = b.add(tx, t1).unwrap();
    let k1 = b.mul(gy, bz).unwrap();
    let k1 = b.add(by, k1).unwrap();
    let k1 = b.mul(gx, k1).unwrap();
    let blk = b.add(bx, k1).unwrap();
    let dxy = b.mul(dx, dy).unwrap();
    let nthreads = b.mul(dxy, dz).unwrap();
    let gid = b.mul(blk, nthreads).unwrap();
    let gid = b.add(gid, t).unwrap();
    let four = b.iconst(Type::U32, 4).unwrap();
    let base = b.mul(gid, four).unwrap();
    for (k, v) in [tp, bp, dp, lane].into_iter().enumerate() {
        let kk = b.iconst(Type::U32, k as i64).unwrap();
        let i = b.add(base, kk).unwrap();
        let p = b.ptr_add(out, i).unwrap();
        b.store(p, v).unwrap();
    }
    b.ret(&[]).unwrap();
    let m = module(vec![b.finish().unwrap()]);
    let it = Interpreter::new(&m).unwrap();
    let (grid, block) = ([3u32, 2, 2], [5u32, 4, 3]);
    let n = (grid.iter().product::<u32>() * block.iter().product::<u32>()) as usize;
    let mut bufs = vec![vec![0u8; n * 16]];
    it.launch("k", grid, block, 0, &[Arg::Buffer(0)], &mut bufs)
        .unwrap();
    let got = bytes_u32(&bufs[0]);
    let pack = |x: u32, y: u32, z: u32| (z * 256 + y) * 256 + x;
    let mut gid = 0;
    for bz in 0..grid[2] {
        for by in 0..grid[1] {
            for bx in 0..grid[0] {
                for tz in 0..block[2] {
                    for ty in 0..block[1] {
                        for tx in 0..block[0] {
                            let lin = tx + block[0] * (ty + block[1] * tz);
                            let want =
                                [pack(tx, ty, tz), pack(bx, by, bz), pack(5, 4, 3), lin % 32];
                            assert_eq!(
                                got[gid * 4..gid * 4 + 4],
                                want,
                                "block ({bx},{by},{bz}) thread ({tx},{ty},{tz})"
                            );
                            gid += 1;
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn dynamic_shared_memory_has_the_launch_size() {
    // s = dyn_shared; s[tid] = x[tid]; barrier; out[tid] = s[n - 1 - tid]
    let mut b = FunctionBuilder::kernel("rev", &[g(Type::F32), g(Type::F32)]);
    let (x, out) = (b.param(0), b.param(1));
    let s = b.dyn_shared(Type::F32).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let n = b.block_dim(Dim::X).unwrap();
    let px = b.ptr_add(x, tid).unwrap();
    let v = b.load(px).unwrap();
    let ps = b.ptr_add(s, tid).unwrap();
    b.store(ps, v).unwrap();
    b.barrier().unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let last = b.sub(n, one).unwrap();
    let j = b.sub(last, tid).unwrap();
    let pj = b.ptr_add(s, j).unwrap();
    let w = b.load(pj).unwrap();
    let po = b.ptr_add(out, tid).unwrap();
    b.store(po, w).unwrap();
    b.ret(&[]).unwrap();
    let m = module(vec![b.finish().unwrap()]);
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(41);
    let x: Vec<f32> = (0..128).map(|_| rng.f32(-1.0, 1.0)).collect();
    let mut bufs = vec![f32_bytes(&x), vec![0u8; 512]];
    let args = [Arg::Buffer(0), Arg::Buffer(1)];
    it.launch("rev", [1, 1, 1], [128, 1, 1], 512, &args, &mut bufs)
        .unwrap();
    let want: Vec<f32> = x.iter().rev().copied().collect();
    assert_eq!(bytes_f32(&bufs[1]), want);
    // One byte short: thread 127 stores past the end.
    let e = it
        .launch("rev", [1, 1, 1], [128, 1, 1], 511, &args, &mut bufs)
        .unwrap_err();
    let t = e.trap().unwrap();
    assert_eq!(t.kind, TrapKind::OutOfBounds);
    assert_eq!(t.thread, [127, 0, 0]);
    assert!(e.to_string().contains("dynamic shared memory"), "{e}");
}

#[test]
fn constant_and_local_memory() {
    // Lookup through a constant table, staged in a per-thread local array.
    let mut b = FunctionBuilder::kernel(
        "lut",
        &[Type::ptr(AddrSpace::Constant, Type::I32), g(Type::I32)],
    );
    let (table, out) = (b.param(0), b.param(1));
    let tid = b.thread_idx(Dim::X).unwrap();
    let local = b.alloca(Type::I32, 4).unwrap();
    for k in 0..4i64 {
        let kk = b.iconst(Type::U32, k).unwrap();
        let i = b.add(tid, kk).unwrap();
        let seven = b.iconst(Type::U32, 7).unwrap();
        let i = b.binary(BinOp::And, i, seven).unwrap();
        let pt = b.ptr_add(table, i).unwrap();
        let v = b.load(pt).unwrap();
        let pl = b.ptr_add(local, kk).unwrap();
        b.store(pl, v).unwrap();
    }
    let mut acc = b.iconst(Type::I32, 0).unwrap();
    for k in 0..4i64 {
        let kk = b.iconst(Type::U32, k).unwrap();
        let pl = b.ptr_add(local, kk).unwrap();
        let v = b.load(pl).unwrap();
        acc = b.add(acc, v).unwrap();
    }
    let po = b.ptr_add(out, tid).unwrap();
    b.store(po, acc).unwrap();
    b.ret(&[]).unwrap();
    let m = module(vec![b.finish().unwrap()]);
    let mut rng = Rng::new(42);
    let table: Vec<i32> = (0..8).map(|_| rng.u32() as i32 >> 4).collect();
    let mut bufs = vec![
        table.iter().flat_map(|v| v.to_le_bytes()).collect(),
        vec![0u8; 64 * 4],
    ];
    Interpreter::new(&m)
        .unwrap()
        .launch(
            "lut",
            [1, 1, 1],
            [64, 1, 1],
            0,
            &[Arg::Buffer(0), Arg::Buffer(1)],
            &mut bufs,
        )
        .unwrap();
    let got: Vec<i32> = bytes_u32(&bufs[1]).into_iter().map(|v| v as i32).collect();
    for (t, v) in got.iter().enumerate() {
        let want: i32 = (0..4)
            .map(|k| table[(t + k) & 7])
            .fold(0i32, i32::wrapping_add);
        assert_eq!(*v, want, "thread {t}");
    }
}

#[test]
fn half_precision_rounds_to_nearest_even() {
    // f(a, b) = (a + b, a * b, a / b, fma(a, b, a)) in the type, for f16 and bf16.
    for ty in [ScalarType::F16, ScalarType::BF16] {
        let t = Type::Scalar(ty);
        let mut b = FunctionBuilder::host(
            "f",
            &[t.clone(), t.clone()],
            &[t.clone(), t.clone(), t.clone(), t.clone(), Type::F32],
        );
        let (x, y) = (b.param(0), b.param(1));
        let s = b.add(x, y).unwrap();
        let p = b.mul(x, y).unwrap();
        let q = b.binary(BinOp::Div, x, y).unwrap();
        let f = b.fma(x, y, x).unwrap();
        let w = b.cast(s, Type::F32).unwrap();
        b.ret(&[s, p, q, f, w]).unwrap();
        let m = module(vec![b.finish().unwrap()]);
        let it = Interpreter::new(&m).unwrap();
        let mut rng = Rng::new(43);
        for _ in 0..300 {
            let (a, c) = (rng.f32(-100.0, 100.0), rng.f32(-3.0, 3.0));
            // Reference: f32 arithmetic then one rounding (exact: f32 has > 2p+2 bits).
            let (round, back): Conv = if ty == ScalarType::F16 {
                (|v| f16::from_f32(v).to_f64(), |v| f16::from_f64(v).to_f32())
            } else {
                (
                    |v| bf16::from_f32(v).to_f64(),
                    |v| bf16::from_f64(v).to_f32(),
                )
            };
            let (a, c) = (round(a), round(c));
            let r = it
                .call("f", &[Arg::Float(a), Arg::Float(c)], &mut [])
                .unwrap();
            let got: Vec<f64> = r.iter().map(|v| v.as_f64().unwrap()).collect();
            let (af, cf) = (a as f32, c as f32);
            let want = [
                f64::from(back(f64::from(af + cf))),
                f64::from(back(f64::from(af * cf))),
                f64::from(back(f64::from(af / cf))),
                f64::from(back(a.mul_add(c, a))),
                f64::from(back(f64::from(af + cf))),
            ];
            assert_eq!(got, want, "{ty} a={a} c={c}");
        }
    }
}
