//! With `--features compute`: the lowered GEMM and row softmax compile to PTX
//! through the NVPTX backend and pass `ptxas` (from `$ZYNTAX_PTXAS`, set by
//! `source scripts/env.sh && activate_venv`; a missing ptxas fails the test).
#![cfg(feature = "compute")]

use zyntax_hir::{Arch, Type};
use zyntax_llvm::{compile_ptx, Options, Ptxas};
use zyntax_tile::{DotPath, Schedule, TileBuilder, TileKernel};

fn gemm(schedule: Schedule) -> TileKernel {
    gemm_of(schedule, Type::F32)
}

fn gemm_of(schedule: Schedule, elem: Type) -> TileKernel {
    let (bm, bn, bk) = (schedule.block[0], schedule.block[1], schedule.k);
    let mut t = TileBuilder::new("gemm", schedule);
    let a = t.view_param("a", elem.clone(), 2);
    let b = t.view_param("b", elem, 2);
    let c = t.view_param("c", Type::F32, 2);
    let (pm, pn) = (t.program_id(0), t.program_id(1));
    let (cbm, cbn, cbk, zero) = (t.index(bm), t.index(bn), t.index(bk), t.index(0));
    let (m0, n0) = (t.scalar_mul(pm, cbm), t.scalar_mul(pn, cbn));
    let k = t.dim(a, 1);
    let acc0 = t.full(&[bm, bn], Type::F32, 0.0);
    let acc = t.for_range(zero, k, cbk, &[acc0.into()], |t, k0, carried| {
        let a_tile = t.load(a, &[m0, k0], &[bm, bk]);
        let b_tile = t.load(b, &[k0, n0], &[bk, bn]);
        vec![t.dot(a_tile, b_tile, carried[0].tile()).into()]
    });
    t.store(c, &[m0, n0], acc[0].tile());
    t.finish().unwrap()
}

fn softmax(bm: u32, bn: u32, warps: u32) -> TileKernel {
    let mut t = TileBuilder::new("softmax", Schedule::block(&[bm, bn]).warps(warps));
    let x = t.view_param("x", Type::F32, 2);
    let out = t.view_param("out", Type::F32, 2);
    let p0 = t.program_id(0);
    let (cbm, zero) = (t.index(bm), t.index(0));
    let origin = [t.scalar_mul(p0, cbm), zero];
    let xt = t.load_or(x, &origin, &[bm, bn], f64::NEG_INFINITY);
    let mx = t.max(xt, 1);
    let m = t.broadcast(mx, &[bm, bn]);
    let d = t.sub(xt, m);
    let e = t.exp(d);
    let s = t.sum(e, 1);
    let s = t.broadcast(s, &[bm, bn]);
    let y = t.div(e, s);
    t.store(out, &origin, y);
    t.finish().unwrap()
}

#[test]
fn lowered_tile_programs_pass_ptxas() {
    let ptxas = Ptxas::locate().unwrap_or_else(|e| panic!("{e}"));
    let kernels = [
        gemm(Schedule::block(&[64, 64]).k(16).warps(4)),
        softmax(4, 128, 4),
        // Rows of 1024 over 8 warps: the reductions cross warps through shared memory.
        softmax(2, 1024, 8),
    ];
    for kernel in &kernels {
        for arch in [Arch::Sm80, Arch::Sm90] {
            let out = compile_ptx(&kernel.module, &Options::new(arch))
                .unwrap_or_else(|e| panic!("{arch}: {e}"));
            assert!(
                out.ptx.contains(&format!(".entry {}", kernel.name)),
                "{}",
                out.ptx
            );
            if let Err(e) = ptxas.assemble(&out.ptx, arch) {
                panic!("{} for {arch}: {e}", kernel.name);
            }
        }
    }
    // The GEMM's inner loop is FFMA on registers, with the operands staged
    // through shared memory behind barriers (each thread's run of 4 f32 of
    // a row of `b` one vector store) and read back 4 rows of `a` (staged
    // K-major) or 4 columns of `b` per 16-byte load (the register-blocked
    // accumulator).
    let ptx = compile_ptx(&kernels[0].module, &Options::new(Arch::Sm80))
        .unwrap()
        .ptx;
    for needle in [
        "fma.rn.f32",
        "ld.shared.v4.f32",
        "st.shared.v4.f32",
        "bar.sync",
        ".maxntid 128, 1, 1",
    ] {
        assert!(ptx.contains(needle), "missing `{needle}` in the GEMM's PTX");
    }
}

/// bf16 and f16 GEMMs on tensor cores, for sm_80 and sm_90: `ldmatrix`
/// (plain for A, transposed for B, two 8-column pieces of B per x4) and
/// `mma.sync.m16n8k16` with f32 accumulators, through ptxas.
#[test]
fn mma_gemm_passes_ptxas() {
    let ptxas = Ptxas::locate().unwrap_or_else(|e| panic!("{e}"));
    for (elem, name) in [(Type::BF16, "bf16"), (Type::F16, "f16")] {
        for warps in [4, 8] {
            let schedule = Schedule::block(&[128, 128])
                .k(32)
                .warps(warps)
                .dot_path(DotPath::MmaSync);
            let kernel = gemm_of(schedule, elem.clone());
            for arch in [Arch::Sm80, Arch::Sm90] {
                let ptx = compile_ptx(&kernel.module, &Options::new(arch))
                    .unwrap_or_else(|e| panic!("{arch}: {e}"))
                    .ptx;
                for needle in [
                    format!("mma.sync.aligned.m16n8k16.row.col.f32.{name}.{name}.f32"),
                    "ldmatrix.sync.aligned.m8n8.x4.shared.b16".to_string(),
                    "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16".to_string(),
                ] {
                    assert!(ptx.contains(&needle), "{arch} {name}: missing `{needle}`");
                }
                if let Err(e) = ptxas.assemble(&ptx, arch) {
                    panic!("{name} mma gemm, {warps} warps, for {arch}: {e}");
                }
            }
        }
    }
}

/// A copy between views declared unit-stride and 16-byte aligned moves 4
/// f32 per global access (the run-time test guards each vector).
#[test]
fn aligned_views_get_vector_global_accesses() {
    let ptxas = Ptxas::locate().unwrap_or_else(|e| panic!("{e}"));
    let mut t = TileBuilder::new("copy", Schedule::block(&[64, 64]).warps(4));
    let input = t.view_param_aligned("in", Type::F32, 2, 1, 16);
    let out = t.view_param_aligned("out", Type::F32, 2, 1, 16);
    let (p0, p1) = (t.program_id(0), t.program_id(1));
    let c64 = t.index(64);
    let origin = [t.scalar_mul(p0, c64), t.scalar_mul(p1, c64)];
    let x = t.load(input, &origin, &[64, 64]);
    t.store(out, &origin, x);
    let kernel = t.finish().unwrap();
    for arch in [Arch::Sm80, Arch::Sm90] {
        let ptx = compile_ptx(&kernel.module, &Options::new(arch))
            .unwrap_or_else(|e| panic!("{arch}: {e}"))
            .ptx;
        for needle in ["ld.global.v4.f32", "st.global.v4.f32"] {
            assert!(ptx.contains(needle), "{arch}: missing `{needle}`");
        }
        if let Err(e) = ptxas.assemble(&ptx, arch) {
            panic!("aligned copy for {arch}: {e}");
        }
    }
}
