//! With `--features compute`: the tile GEMM on sm_90a (the wgmma pipeline,
//! `lower/pipeline.rs`) compiles to PTX with `wgmma.mma_async` from
//! shared-memory descriptors and 16-byte `cp.async` copies, and passes
//! `ptxas` (from `$ZYNTAX_PTXAS`; a missing ptxas fails the test).
#![cfg(feature = "compute")]

use zyntax_hir::{Arch, Type};
use zyntax_llvm::{compile_ptx, Options, Ptxas};
use zyntax_tile::{Schedule, TileBuilder, TileKernel};

fn gemm(schedule: Schedule, elem: Type, a_unit_dim: usize, b_unit_dim: usize) -> TileKernel {
    let (bm, bn, bk) = (schedule.block[0], schedule.block[1], schedule.k);
    let mut t = TileBuilder::new("gemm", schedule);
    let a = t.view_param_aligned("a", elem.clone(), 2, a_unit_dim, 16);
    let b = t.view_param_aligned("b", elem, 2, b_unit_dim, 16);
    let c = t.view_param_aligned("c", Type::BF16, 2, 1, 16);
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
    let out = t.cast(acc[0].tile(), Type::BF16);
    t.store(c, &[m0, n0], out);
    t.finish().unwrap()
}

#[test]
fn wgmma_gemm_passes_ptxas() {
    let ptxas = Ptxas::locate().unwrap_or_else(|e| panic!("{e}"));
    // (block, warps, stages, elem, unit-stride dims of a and b)
    for (block, warps, stages, elem, name, a_unit, b_unit) in [
        ([64, 64], 4, 2, Type::BF16, "bf16", 1, 1),
        ([128, 128], 8, 4, Type::BF16, "bf16", 1, 1),
        ([128, 256], 8, 3, Type::F16, "f16", 1, 1),
        ([128, 256], 8, 4, Type::BF16, "bf16", 1, 1),
        ([256, 128], 16, 4, Type::BF16, "bf16", 1, 1),
        ([128, 128], 8, 4, Type::BF16, "bf16", 1, 0),
        ([128, 128], 8, 4, Type::BF16, "bf16", 0, 1),
    ] {
        let s = Schedule::block(&block)
            .k(64)
            .warps(warps)
            .stages(stages)
            .arch(Arch::Sm90a);
        let kernel = gemm(s, elem, a_unit, b_unit);
        let ptx = compile_ptx(&kernel.module, &Options::new(Arch::Sm90a))
            .unwrap_or_else(|e| panic!("{block:?}: {e}"))
            .ptx;
        for needle in [
            format!(
                "wgmma.mma_async.sync.aligned.m64n{}k16.f32.{name}.{name}",
                block[1]
            ),
            "cp.async.cg.shared.global".to_string(),
            "wgmma.wait_group.sync.aligned 0".to_string(),
            "fence.proxy.async".to_string(),
        ] {
            assert!(
                ptx.contains(&needle),
                "{block:?} {name}: missing `{needle}`"
            );
        }
        // WGMMA_PTX_DUMP=<dir> keeps the PTX (for `ptxas -v` by hand).
        if let Ok(dir) = std::env::var("WGMMA_PTX_DUMP") {
            let path = format!(
                "{dir}/gemm_{}x{}_w{warps}_s{stages}_a{a_unit}_b{b_unit}.ptx",
                block[0], block[1]
            );
            std::fs::write(path, &ptx).unwrap();
        }
        if let Err(e) = ptxas.assemble(&ptx, Arch::Sm90a) {
            panic!("{block:?} {name} wgmma gemm: {e}");
        }
    }
}
