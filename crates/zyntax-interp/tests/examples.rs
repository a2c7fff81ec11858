//! Every example kernel in `examples/*.zir` runs in the interpreter on fresh
//! random inputs and matches a reference computed here.

mod common;

use common::*;
use half::f16;
use zyntax_interp::{Arg, Interpreter};

#[test]
fn saxpy_matches_reference() {
    let m = example("saxpy");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(1);
    for n in [1u32, 255, 257, 10_000] {
        let a = rng.f32(-3.0, 3.0);
        let x: Vec<f32> = (0..n).map(|_| rng.f32(-10.0, 10.0)).collect();
        let y: Vec<f32> = (0..n).map(|_| rng.f32(-10.0, 10.0)).collect();
        let mut bufs = vec![f32_bytes(&x), f32_bytes(&y)];
        let args = [
            Arg::Int(n.into()),
            Arg::Float(a.into()),
            Arg::Buffer(0),
            Arg::Buffer(1),
        ];
        it.launch(
            "saxpy",
            [n.div_ceil(256), 1, 1],
            [256, 1, 1],
            0,
            &args,
            &mut bufs,
        )
        .unwrap();
        let got = bytes_f32(&bufs[1]);
        for i in 0..n as usize {
            // The kernel uses fma: one rounding.
            assert_eq!(got[i].to_bits(), a.mul_add(x[i], y[i]).to_bits(), "i={i}");
        }
        assert_eq!(bytes_f32(&bufs[0]), x, "x must be untouched");
    }
}

#[test]
fn block_sum_matches_reference() {
    let m = example("reduce_sum");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(2);
    for (n, block) in [(5000u32, 256u32), (777, 96), (4096, 1024)] {
        // Small integers: every partial sum is exact in f32, so any order gives the same bits.
        let x: Vec<f32> = (0..n).map(|_| (rng.below(100) + 1) as f32).collect();
        let mut bufs = vec![f32_bytes(&x), f32_bytes(&[0.0])];
        let args = [Arg::Buffer(0), Arg::Buffer(1), Arg::Int(n.into())];
        it.launch(
            "block_sum",
            [n.div_ceil(block), 1, 1],
            [block, 1, 1],
            0,
            &args,
            &mut bufs,
        )
        .unwrap();
        let want: f64 = x.iter().map(|v| f64::from(*v)).sum();
        assert_eq!(
            f64::from(bytes_f32(&bufs[1])[0]),
            want,
            "n={n} block={block}"
        );
    }
    // Random reals: close to the f64 sum.
    let n = 3000u32;
    let x: Vec<f32> = (0..n).map(|_| rng.f32(-1.0, 1.0)).collect();
    let mut bufs = vec![f32_bytes(&x), f32_bytes(&[0.0])];
    let args = [Arg::Buffer(0), Arg::Buffer(1), Arg::Int(n.into())];
    it.launch("block_sum", [12, 1, 1], [256, 1, 1], 0, &args, &mut bufs)
        .unwrap();
    let want: f64 = x.iter().map(|v| f64::from(*v)).sum();
    assert!((f64::from(bytes_f32(&bufs[1])[0]) - want).abs() < 1e-3);
}

#[test]
fn histogram_matches_reference() {
    let m = example("histogram");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(3);
    let n = 100_000u32;
    let data: Vec<u8> = (0..n).map(|_| rng.u32() as u8).collect();
    let mut bufs = vec![data.clone(), vec![0u8; 256 * 4]];
    let args = [Arg::Buffer(0), Arg::Int(n.into()), Arg::Buffer(1)];
    let stats = it
        .launch("histogram", [16, 1, 1], [256, 1, 1], 0, &args, &mut bufs)
        .unwrap();
    // Every element is visited (about ten instructions each).
    assert!(stats.instructions > u64::from(n) * 5, "{stats:?}");
    let mut want = vec![0u32; 256];
    for d in &data {
        want[*d as usize] += 1;
    }
    assert_eq!(bytes_u32(&bufs[1]), want);
}

#[test]
fn mma_tile_matches_reference() {
    let m = example("mma_tile");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(4);
    let a: Vec<f16> = (0..256)
        .map(|_| f16::from_f32(rng.f32(-2.0, 2.0)))
        .collect();
    let b: Vec<f16> = (0..256)
        .map(|_| f16::from_f32(rng.f32(-2.0, 2.0)))
        .collect();
    let c: Vec<f32> = (0..256).map(|_| rng.f32(-1.0, 1.0)).collect();
    let mut bufs = vec![f16_bytes(&a), f16_bytes(&b), f32_bytes(&c), vec![0u8; 1024]];
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Buffer(2),
        Arg::Buffer(3),
    ];
    it.launch("mma_16x16x16", [1, 1, 1], [32, 1, 1], 0, &args, &mut bufs)
        .unwrap();
    let d = bytes_f32(&bufs[3]);
    for i in 0..16 {
        for j in 0..16 {
            // A row-major (ldm 16), B column-major (ldm 16): B[k][j] at j*16 + k.
            let mut s = f64::from(c[i * 16 + j]);
            for k in 0..16 {
                s += a[i * 16 + k].to_f64() * b[j * 16 + k].to_f64();
            }
            assert_eq!(d[i * 16 + j], s as f32, "({i},{j})");
        }
    }
}

#[test]
fn cp_async_copy_matches_reference() {
    let m = example("cp_async_copy");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(5);
    let block = 256u32;
    let tiles = 7u32;
    let n = tiles * block * 4;
    let x: Vec<f32> = (0..n).map(|_| rng.f32(-5.0, 5.0)).collect();
    let mut bufs = vec![f32_bytes(&x), f32_bytes(&vec![0.0; n as usize])];
    let args = [Arg::Buffer(0), Arg::Buffer(1), Arg::Int(n.into())];
    it.launch(
        "cp_async_copy",
        [3, 1, 1],
        [block, 1, 1],
        0,
        &args,
        &mut bufs,
    )
    .unwrap();
    assert_eq!(bytes_f32(&bufs[1]), x);
}

#[test]
fn cp_async_double_buffer_matches_reference() {
    let m = example("cp_async_double_buffer");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(6);
    let (grid, tiles) = (3u32, 5u32);
    let n = (grid * tiles * 128 * 4) as usize;
    let x: Vec<f32> = (0..n).map(|_| rng.f32(-5.0, 5.0)).collect();
    let scale = rng.f32(0.5, 2.0);
    let mut bufs = vec![f32_bytes(&x), f32_bytes(&vec![0.0; n])];
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Int(tiles.into()),
        Arg::Float(scale.into()),
    ];
    it.launch(
        "scale_tiles",
        [grid, 1, 1],
        [128, 1, 1],
        0,
        &args,
        &mut bufs,
    )
    .unwrap();
    let want: Vec<f32> = x.iter().map(|v| v * scale).collect();
    assert_eq!(bytes_f32(&bufs[1]), want);
}

#[test]
fn critical_host_matches_reference() {
    let m = example("critical_host");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(7);
    let cap = 16u64;
    let mut ring: Vec<f64> = (0..cap)
        .map(|_| f64::from(rng.f32(-100.0, 100.0)))
        .collect();
    for head in [3u64, 15, 40] {
        let x = f64::from(rng.f32(-100.0, 100.0));
        let count = 1 + u64::from(rng.below(cap as u32));
        let mut bufs = vec![f64_bytes(&ring)];
        let args = [
            Arg::Buffer(0),
            Arg::Int(cap.into()),
            Arg::Int(head.into()),
            Arg::Float(x),
            Arg::Int(count.into()),
        ];
        let r = it.call("push_and_average", &args, &mut bufs).unwrap();
        ring[(head % cap) as usize] = x;
        assert_eq!(bytes_f64(&bufs[0]), ring);
        let mut s = 0.0;
        for i in 0..count {
            s += ring[((head + cap - i) % cap) as usize];
        }
        assert_eq!(r[0].as_f64(), Some(s / count as f64));
    }
    for _ in 0..20 {
        let pos = i64::from(rng.u32() as i16);
        let qty = i64::from(rng.u32() as i16);
        let limit = i64::from(rng.below(40_000));
        let price = f64::from(rng.f32(0.5, 3.0));
        let max_notional = f64::from(rng.f32(0.0, 50_000.0));
        let args = [
            Arg::Int(pos.into()),
            Arg::Int(qty.into()),
            Arg::Int(limit.into()),
            Arg::Float(price),
            Arg::Float(max_notional),
        ];
        let r = it.call("risk_check", &args, &mut []).unwrap();
        let want = (pos + qty).abs() <= limit && (qty as f64 * price).abs() <= max_notional;
        assert_eq!(r[0].as_i128(), Some(i128::from(want)));
    }
}

#[test]
fn host_latency_matches_reference() {
    let m = example("host_latency");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(8);
    let n = 37usize;
    let x: Vec<f64> = (0..n).map(|_| f64::from(rng.f32(-1.0, 1.0))).collect();
    let y: Vec<f64> = (0..n).map(|_| f64::from(rng.f32(-1.0, 1.0))).collect();
    let mut bufs = vec![f64_bytes(&x), f64_bytes(&y)];
    let mut want = 0.0f64;
    for i in 0..n {
        want = x[i].mul_add(y[i], want);
    }
    let args = [Arg::Buffer(0), Arg::Buffer(1), Arg::Int(n as i128)];
    let r = it.call("dot", &args, &mut bufs).unwrap();
    assert_eq!(r[0].as_f64(), Some(want));
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Int(n as i128),
        Arg::Float(-0.25),
        Arg::Float(0.25),
    ];
    let r = it.call("clamp_score", &args, &mut bufs).unwrap();
    assert_eq!(r[0].as_f64(), Some(want.clamp(-0.25, 0.25)));
}

#[test]
fn every_example_is_covered() {
    // A new example must get a test here (names of the .zir files we run).
    let covered = [
        "saxpy",
        "reduce_sum",
        "histogram",
        "mma_tile",
        "cp_async_copy",
        "cp_async_double_buffer",
        "critical_host",
        "host_latency",
        "mma_sync_gemm",
        "vector_copy",
        "nest_matmul",
        "cluster_exchange",
        "grid_reduce",
        "poly_constants",
    ];
    // Examples whose interpreter test lives in the Python suite (they need
    // host-built tensor maps or the Python example builders).
    let covered_in_python = [
        ("producer_consumer", "test_warp_isa.py"),
        ("tma_copy", "test_tma.py"),
        ("wgmma_tile", "test_gemm_sm90.py"),
    ];
    let py_tests = examples_dir().join("../tests/python");
    for (stem, file) in covered_in_python {
        let text = std::fs::read_to_string(py_tests.join(file)).unwrap();
        assert!(text.contains(stem), "{file} does not test example {stem}");
    }
    for e in std::fs::read_dir(examples_dir()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "zir") {
            let stem = p.file_stem().unwrap().to_string_lossy().to_string();
            assert!(
                covered.contains(&stem.as_str())
                    || covered_in_python.iter().any(|(s, _)| *s == stem),
                "example {stem} has no interpreter test"
            );
        }
    }
}

/// examples/mma_sync_gemm.zir: mma.sync fed by ldmatrix from XOR-swizzled
/// shared memory, against a float64 GEMM (inputs k/8 in [-2, 2]: every sum of
/// 16 products is exact, so the rounding to f32 after each mma.sync is the
/// only difference).
#[test]
fn mma_sync_gemm_matches_float64() {
    let m = example("mma_sync_gemm");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(12);
    for (mm, nn, kk) in [(16usize, 8usize, 32usize), (32, 16, 64)] {
        let small = |rng: &mut Rng| (rng.below(33) as f64 - 16.0) / 8.0;
        let a: Vec<f64> = (0..mm * kk).map(|_| small(&mut rng)).collect();
        let bt: Vec<f64> = (0..nn * kk).map(|_| small(&mut rng)).collect();
        let c: Vec<f32> = (0..mm * nn).map(|_| rng.f32(-4.0, 4.0)).collect();
        let h = |v: &[f64]| v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>();
        let mut bufs = vec![
            f16_bytes(&h(&a)),
            f16_bytes(&h(&bt)),
            f32_bytes(&c),
            f32_bytes(&vec![f32::NAN; mm * nn]),
        ];
        let args = [
            Arg::Buffer(0),
            Arg::Buffer(1),
            Arg::Buffer(2),
            Arg::Buffer(3),
            Arg::Int(nn as i128),
            Arg::Int(kk as i128),
        ];
        let grid = [(nn / 8) as u32, (mm / 16) as u32, 1];
        it.launch("mma_sync_gemm", grid, [32, 1, 1], 0, &args, &mut bufs)
            .unwrap();
        let got = bytes_f32(&bufs[3]);
        for i in 0..mm {
            for j in 0..nn {
                // Each mma.sync adds 16 products exactly and rounds once to f32.
                let mut acc = c[i * nn + j];
                for k0 in (0..kk).step_by(16) {
                    let s: f64 = (k0..k0 + 16).map(|k| a[i * kk + k] * bt[j * kk + k]).sum();
                    acc = (f64::from(acc) + s) as f32;
                }
                assert_eq!(got[i * nn + j], acc, "D[{i}][{j}] of {mm}x{nn}x{kk}");
            }
        }
    }
}

/// examples/vector_copy.zir: a grid-stride float4 copy, bit for bit.
#[test]
fn vector_copy_copies_every_element() {
    let m = example("vector_copy");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(13);
    for (n4, grid) in [(1u32, 1u32), (1000, 3), (4096, 16)] {
        let x: Vec<f32> = (0..4 * n4).map(|_| rng.f32(-9.0, 9.0)).collect();
        let mut bufs = vec![f32_bytes(&x), f32_bytes(&vec![f32::NAN; 4 * n4 as usize])];
        let args = [Arg::Buffer(0), Arg::Buffer(1), Arg::Int(n4.into())];
        it.launch("copy_v4", [grid, 1, 1], [256, 1, 1], 0, &args, &mut bufs)
            .unwrap();
        assert_eq!(bufs[1], bufs[0], "n4 = {n4}");
    }
}

/// examples/nest_matmul.zir: the auto-tiled loop-nest matmul (16x16 workgroup,
/// shared-memory tiles), bit for bit against an f32 fma chain in k order,
/// at sizes that are not multiples of the tile.
#[test]
fn nest_matmul_matches_fma_chain() {
    let m = example("nest_matmul");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(14);
    for (mm, nn, kk) in [(17usize, 5usize, 3usize), (33, 20, 40)] {
        let a: Vec<f32> = (0..mm * kk).map(|_| rng.f32(-2.0, 2.0)).collect();
        let b: Vec<f32> = (0..kk * nn).map(|_| rng.f32(-2.0, 2.0)).collect();
        let mut bufs = vec![
            f32_bytes(&a),
            f32_bytes(&b),
            f32_bytes(&vec![f32::NAN; mm * nn]),
        ];
        let args = [
            Arg::Buffer(0),
            Arg::Buffer(1),
            Arg::Buffer(2),
            Arg::Int(mm as i128),
            Arg::Int(nn as i128),
            Arg::Int(kk as i128),
        ];
        let grid = [nn.div_ceil(16) as u32, mm.div_ceil(16) as u32, 1];
        it.launch("mm", grid, [16, 16, 1], 0, &args, &mut bufs)
            .unwrap();
        let got = bytes_f32(&bufs[2]);
        for i in 0..mm {
            for j in 0..nn {
                let want = (0..kk).fold(0.0f32, |acc, k| a[i * kk + k].mul_add(b[k * nn + j], acc));
                assert_eq!(got[i * nn + j], want, "C[{i}][{j}] of {mm}x{nn}x{kk}");
            }
        }
    }
}

/// examples/cluster_exchange.zir: clusters of 2 blocks swap their tiles
/// through distributed shared memory (blocks co-scheduled per cluster).
#[test]
fn cluster_exchange_swaps_tiles() {
    let m = example("cluster_exchange");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(13);
    for (blocks, block) in [(2u32, 32u32), (6, 256), (4, 96)] {
        let n = (blocks * block) as usize;
        let x: Vec<f32> = (0..n).map(|_| rng.f32(-10.0, 10.0)).collect();
        let mut bufs = vec![f32_bytes(&x), f32_bytes(&vec![f32::NAN; n])];
        let args = [Arg::Buffer(0), Arg::Buffer(1)];
        it.launch(
            "exchange",
            [blocks, 1, 1],
            [block, 1, 1],
            0,
            &args,
            &mut bufs,
        )
        .unwrap();
        let got = bytes_f32(&bufs[1]);
        let b = block as usize;
        for (i, g) in got.iter().enumerate() {
            let partner = ((i / b) ^ 1) * b + i % b;
            assert_eq!(g.to_bits(), x[partner].to_bits(), "i={i}");
        }
    }
}

/// examples/grid_reduce.zir: a grid-synchronised two-phase sum (the whole
/// grid co-scheduled); small integers keep every partial sum exact.
#[test]
fn grid_reduce_sums_everything() {
    let m = example("grid_reduce");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(14);
    for (n, blocks, block) in [(1u32, 1u32, 32u32), (5000, 7, 128), (777, 3, 64)] {
        let x: Vec<f32> = (0..n).map(|_| (rng.below(100) + 1) as f32).collect();
        let want: f32 = x.iter().sum();
        let mut bufs = vec![
            f32_bytes(&x),
            f32_bytes(&vec![f32::NAN; blocks as usize]),
            f32_bytes(&[f32::NAN]),
        ];
        let args = [
            Arg::Buffer(0),
            Arg::Buffer(1),
            Arg::Buffer(2),
            Arg::Int(n.into()),
        ];
        it.launch(
            "grid_reduce",
            [blocks, 1, 1],
            [block, 1, 1],
            0,
            &args,
            &mut bufs,
        )
        .unwrap();
        assert_eq!(bytes_f32(&bufs[2])[0], want, "n={n} blocks={blocks}");
    }
}

/// examples/poly_constants.zir: Horner's rule (fma) over a `__constant__`
/// coefficient table, first its initializer, then a table the host wrote by
/// name; the `__device__` counter keeps counting across launches.
#[test]
fn poly_constants_reads_its_constant_table() {
    let m = example("poly_constants");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(13);
    let n = 700u32;
    let x: Vec<f32> = (0..n).map(|_| rng.f32(-2.0, 2.0)).collect();
    let horner = |c: &[f32], x: f32| {
        c.iter()
            .rev()
            .skip(1)
            .fold(c[7], |acc, &k| acc.mul_add(x, k))
    };
    let initial = bytes_f32(&it.global_bytes("coef").unwrap());
    let written: Vec<f32> = (0..8).map(|_| rng.f32(-1.0, 1.0)).collect();
    for (round, coef) in [initial, written].iter().enumerate() {
        it.set_global_bytes("coef", &f32_bytes(coef)).unwrap();
        let mut bufs = vec![f32_bytes(&x), f32_bytes(&vec![f32::NAN; n as usize])];
        let args = [Arg::Buffer(0), Arg::Buffer(1), Arg::Int(n.into())];
        it.launch(
            "poly",
            [n.div_ceil(256), 1, 1],
            [256, 1, 1],
            0,
            &args,
            &mut bufs,
        )
        .unwrap();
        let got = bytes_f32(&bufs[1]);
        for i in 0..n as usize {
            assert_eq!(got[i].to_bits(), horner(coef, x[i]).to_bits(), "i={i}");
        }
        let count = bytes_u32(&it.global_bytes("evaluated").unwrap());
        assert_eq!(count, [n * (round as u32 + 1)]);
    }
}

#[test]
fn poly_constants_initializer_is_exp_taylor() {
    let m = example("poly_constants");
    let it = Interpreter::new(&m).unwrap();
    let coef = bytes_f32(&it.global_bytes("coef").unwrap());
    let mut fact = 1.0f64;
    for (k, c) in coef.iter().enumerate() {
        fact *= (k.max(1)) as f64;
        assert_eq!(*c, (1.0 / fact) as f32, "k={k}");
    }
}
