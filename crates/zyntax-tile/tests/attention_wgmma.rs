//! FlashAttention-2's loop (one head, causal, keys in blocks) on sm_90a: the
//! row-statistics `dot`s go on `wgmma` (`lower/dot_wgmma.rs`): S = Q K^T
//! with Q staged once before the loop (SS form) and K^T staged K-major,
//! O += P V with P from registers (wgmma's RS form) and V staged N-major,
//! the row max / sum on the wgmma accumulator layout. Run on the
//! interpreter against f64 (outputs poisoned with NaN), and, with
//! `--features compute`, compiled to PTX and passed through `ptxas`.

mod common;
use common::*;
use half::bf16;
use zyntax_hir::{Arch, BinOp, CmpOp, Op as HOp, Type};
use zyntax_tile::{Layout, Schedule, TileBuilder, TileKernel};

/// Views `q [S, D]`, `kt [D, S]` (k transposed: strides only, declared
/// unit-stride along D), `v [S, D]` (bf16), `o [S, D]` (f32); scalar
/// `scale`. Causal. With `v_first`, the body loads its V block before the
/// first dot (as attention_tile.py's prefetching program does), so the
/// first dot's barrier also covers V's staging.
fn flash(bm: u32, bn: u32, d: u32, warps: u32, arch: Arch, v_first: bool) -> TileKernel {
    flash_with(
        Schedule::block(&[bm, bn]).warps(warps).arch(arch),
        d,
        v_first,
    )
}

/// [`flash`] under schedule `s` (its block is `[bm, bn]`); with `split`,
/// the key blocks in two loops (the first two blocks, then the rest), as
/// attention_tile.py's split program walks them in three.
fn flash_with(s: Schedule, d: u32, v_first: bool) -> TileKernel {
    flash_loops(s, d, v_first, false)
}

fn flash_loops(s: Schedule, d: u32, v_first: bool, split: bool) -> TileKernel {
    let (bm, bn) = (s.block[0], s.block[1]);
    let mut t = TileBuilder::new("flash_wgmma", s);
    let q = t.view_param_aligned("q", Type::BF16, 2, 1, 16);
    let kt = t.view_param_aligned("kt", Type::BF16, 2, 0, 16);
    let v = t.view_param_aligned("v", Type::BF16, 2, 1, 16);
    let o = t.view_param("o", Type::F32, 2);
    let scale = t.scalar_param("scale", Type::F32);
    let (cbm, zero) = (t.index(bm), t.index(0));
    let pid = t.program_id(0);
    let m0 = t.scalar_mul(pid, cbm);
    let s_len = t.dim(kt, 1);
    let end = t.scalar_add(m0, cbm);
    let hi = t.scalar_binary(BinOp::Min, end, s_len);
    let qt = t.load(q, &[m0, zero], &[bm, d]);
    let neg_inf = t.full(&[bm, 1], Type::F32, f64::NEG_INFINITY);
    let l0 = t.full(&[bm, 1], Type::F32, 0.0);
    let acc0 = t.full(&[bm, d], Type::F32, 0.0);
    let cbn = t.index(bn);
    let inits = [acc0.into(), neg_inf.into(), l0.into()];
    let body = move |t: &mut TileBuilder, n0, c: &[zyntax_tile::Value]| {
        let (acc, m, l) = (c[0].tile(), c[1].tile(), c[2].tile());
        let v_early = v_first.then(|| t.load(v, &[n0, zero], &[bn, d]));
        let kb = t.load(kt, &[zero, n0], &[d, bn]);
        let z = t.full(&[bm, bn], Type::F32, 0.0);
        let s = t.dot(qt, kb, z);
        let sc = t.splat(&[bm, bn], scale);
        let s = t.mul(s, sc);
        let (i, j) = (t.iota(&[bm, bn], 0), t.iota(&[bm, bn], 1));
        let (m0t, n0t, st) = (
            t.splat(&[bm, bn], m0),
            t.splat(&[bm, bn], n0),
            t.splat(&[bm, bn], s_len),
        );
        let (row, col) = (t.add(i, m0t), t.add(j, n0t));
        let causal = t.cmp(CmpOp::Le, col, row);
        let inside = t.cmp(CmpOp::Lt, col, st);
        let ninf = t.full(&[bm, bn], Type::F32, f64::NEG_INFINITY);
        let s = t.where_(inside, s, ninf);
        let s = t.where_(causal, s, ninf);
        let row_max = t.max(s, 1);
        let m_new = t.maximum(m, row_max);
        let mb = t.broadcast(m_new, &[bm, bn]);
        let sm = t.sub(s, mb);
        let p = t.exp(sm);
        let dm = t.sub(m, m_new);
        let alpha = t.exp(dm);
        let la = t.mul(l, alpha);
        let ps = t.sum(p, 1);
        let l_new = t.add(la, ps);
        let vb = v_early.unwrap_or_else(|| t.load(v, &[n0, zero], &[bn, d]));
        let ab = t.broadcast(alpha, &[bm, d]);
        let scaled = t.mul(acc, ab);
        let p16 = t.cast(p, Type::BF16);
        let acc = t.dot(p16, vb, scaled);
        vec![acc.into(), m_new.into(), l_new.into()]
    };
    let out = if split {
        let two = t.index(2 * bn);
        let mid = t.scalar_binary(BinOp::Min, two, hi);
        let first = t.for_range(zero, mid, cbn, &inits, body);
        t.for_range(mid, hi, cbn, &first, body)
    } else {
        t.for_range(zero, hi, cbn, &inits, body)
    };
    let (acc, l) = (out[0].tile(), out[2].tile());
    let lb = t.broadcast(l, &[bm, d]);
    let y = t.div(acc, lb);
    t.store(o, &[m0, zero], y);
    t.finish().unwrap()
}

fn rounded(rng: &mut Rng, n: usize) -> (Vec<u8>, Vec<f64>) {
    rounded16(rng, n, bf16::from_f32, bf16::to_le_bytes, bf16::to_f64)
}

/// Runs `k` over `s_len` tokens of head dim `d` on fresh bf16 inputs and
/// checks it against f64.
fn check_f64(k: &TileKernel, bm: u32, (s_len, d): (u32, u32), rng: &mut Rng, what: &str) {
    let n = (s_len * d) as usize;
    let qkv = (rounded(rng, n), rounded(rng, n), rounded(rng, n));
    let (got, want) = run_causal_attention(k, bm, (s_len, d), qkv, 0.3);
    // p is rounded to bf16 before the second dot: ~2^-8 relative per term.
    assert_close(&got, &want, 2e-2, what);
}

/// The `wgmma` instructions of the kernel and how many take `A` from
/// registers (a `vec<u32, 4>` operand).
fn wgmmas(k: &TileKernel) -> (usize, usize) {
    let f = &k.module.functions[0];
    let (mut all, mut regs) = (0, 0);
    for inst in &f.insts {
        if let HOp::Wgmma(_) = inst.op {
            all += 1;
            if matches!(f.value_type(inst.args[1]), Type::Vector(_, 4)) {
                regs += 1;
            }
        }
    }
    (all, regs)
}

fn is_wgmma_layout(l: &Option<Layout>) -> bool {
    matches!(l, Some(Layout::Mma(m)) if m.is_wgmma())
}

#[test]
fn flash_attention_on_wgmma_against_f64() {
    let mut rng = Rng::new();
    // (bm, bn, d, warps, tokens): one and two warpgroups, one and two
    // repetitions along M, head dims 64 and 128, tails.
    for (bm, bn, d, warps, s_len, v_first) in [
        (64, 64, 64, 4, 150u32, false),
        (128, 64, 128, 8, 200, true),
        (128, 64, 64, 4, 130, false),
        (64, 128, 64, 4, 77, true),
        (64, 64, 64, 4, 300, true),
    ] {
        let k = flash(bm, bn, d, warps, Arch::Sm90a, v_first);
        assert!(
            k.layouts.of.iter().any(is_wgmma_layout),
            "{bm}x{bn} d{d}: not on wgmma"
        );
        assert!(
            !k.layouts
                .of
                .iter()
                .any(|l| matches!(l, Some(Layout::Mma(m)) if !m.is_wgmma())),
            "{bm}x{bn} d{d}: an mma.sync layout is left"
        );
        // P V takes A from registers (P in place), S = Q K^T from Q
        // staged once before the loop.
        let reps = bm / (16 * warps);
        let (all, regs) = wgmmas(&k);
        assert_eq!(
            (all - regs, regs),
            ((reps * d / 16) as usize, (reps * bn / 16) as usize),
            "{bm}x{bn} d{d}: {regs} of {all} wgmmas from registers"
        );
        assert_eq!(k.module.targets, vec![Arch::Sm90a]);
        // Q's staging (1), one barrier per dot in the loop, or one for both
        // when V is loaded first, and one after the loop (buffers alternate
        // between iterations: none after the wgmmas).
        let text = zyntax_hir::print_module(&k.module);
        let bars = text.lines().filter(|l| l.trim() == "barrier").count();
        let want = if v_first { 3 } else { 4 };
        assert_eq!(bars, want, "{bm}x{bn} d{d}: barriers");
        check_f64(&k, bm, (s_len, d), &mut rng, &format!("{bm}x{bn} d{d}"));
    }
}

/// The loop-invariant Q is read by descriptor in the loop, never as
/// register fragments defined before it: ptxas 12.9 took such fragments
/// (read only by the loop's wgmmas) for dead after their last read in the
/// body and gave their registers to P's fragments at head dim 64, so every
/// key block after the first computed S = P K^T (every output wrong on an
/// H200, session 11). The A registers of every wgmma in the loop are
/// defined in it.
#[test]
fn loop_invariant_wgmma_a_is_not_held_in_registers_across_the_loop() {
    for (bm, bn, d, warps) in [(64, 64, 64, 4), (128, 64, 64, 8), (128, 64, 128, 8)] {
        let k = flash(bm, bn, d, warps, Arch::Sm90a, true);
        let f = &k.module.functions[0];
        let text = zyntax_hir::print_module(&k.module);
        // Positions: the loop's first wgmma and each A operand's definition.
        let first = f
            .insts
            .iter()
            .position(|i| matches!(i.op, HOp::Wgmma(_)))
            .expect("a wgmma");
        for inst in f.insts.iter().filter(|i| matches!(i.op, HOp::Wgmma(_))) {
            let a = inst.args[1];
            if !matches!(f.value_type(a), Type::Vector(_, 4)) {
                continue; // a descriptor
            }
            let def = f
                .insts
                .iter()
                .position(|i| i.results.contains(&a))
                .unwrap_or_else(|| panic!("{bm}x{bn} d{d}: A {a:?} is no result\n{text}"));
            assert!(
                def > first,
                "{bm}x{bn} d{d}: a wgmma's A fragment is defined before the loop's wgmmas"
            );
        }
    }
}

/// The key loop on a TMA ring (`lower/pipeline_ring.rs`, a schedule with
/// `warp_specialize`): K and V by TMA into `stages` stages filled by a
/// producer (a warp, or a warpgroup beside two consumer ones), the consumers waiting on `full` and handing stages back
/// on `empty`; no CTA barrier after the mbarriers' initialisation (staging
/// Q meets the consumers at a named barrier). Against f64, with key tails,
/// one and two warpgroups, V loaded before and after the first dot.
/// With `in_flight` 1 the loop is rotated: block j's P V stays in flight
/// while block j + 1's softmax runs (`pipeline_ring::Rotation`). With
/// `split` the key blocks run in two loops (see [`flash_loops`]): the ring's
/// counter runs on from one loop to the next, Q is staged once.
fn ring_loops(
    bm: u32,
    bn: u32,
    d: u32,
    warps: u32,
    (stages, in_flight): (u32, u32),
    v_first: bool,
    split: bool,
) -> TileKernel {
    let s = Schedule::block(&[bm, bn])
        .warps(warps)
        .arch(Arch::Sm90a)
        .warp_specialize(true)
        .stages(stages)
        .wgmma_in_flight(in_flight);
    flash_loops(s, d, v_first, split)
}

#[test]
fn flash_attention_on_a_tma_ring_against_f64() {
    let mut rng = Rng::new();
    for (bm, bn, d, warps, s_len, stages, v_first, split) in [
        (64, 64, 64, 4, 150u32, (2, 0), false, false),
        (128, 64, 128, 8, 200, (3, 1), true, false),
        (64, 128, 64, 4, 77, (3, 0), false, false),
        (128, 64, 64, 8, 300, (2, 1), true, true),
        (64, 64, 64, 4, 40, (2, 1), false, false),
        (64, 64, 64, 4, 333, (3, 0), false, true),
    ] {
        let k = ring_loops(bm, bn, d, warps, stages, v_first, split);
        let what = format!("{bm}x{bn} d{d} w{warps} {stages:?} stages, in flight, split {split}");
        let loops = 1 + usize::from(split);
        let waits = zyntax_hir::print_module(&k.module)
            .matches("wgmma.wait_group.1")
            .count();
        assert_eq!(
            waits,
            loops * stages.1 as usize,
            "{what}: one wait for S only per rotated loop"
        );
        let text = zyntax_hir::print_module(&k.module);
        // A producer warp, or a warpgroup giving registers to two consumer ones.
        let producer = if warps >= 8 { 128 } else { 32 };
        assert_eq!(k.launch.block[0], 32 * warps + producer, "{what}: producer");
        assert_eq!(k.launch.tensor_maps.len(), 2, "{what}: K's and V's maps");
        let (tma, bars) = (
            text.matches("tma.load").count(),
            text.lines().filter(|l| l.trim() == "barrier").count(),
        );
        // One TMA load per 64 elements of the head dim, K's and V's.
        assert_eq!(
            tma,
            loops * (2 * d / 64) as usize,
            "{what}: TMA loads\n{text}"
        );
        assert_eq!(
            bars, 1,
            "{what}: CTA barriers (the mbarriers' initialisation)"
        );
        assert!(
            text.contains("bar.sync 1") || text.contains("named_barrier"),
            "{what}: Q's named barrier"
        );
        check_f64(&k, bm, (s_len, d), &mut rng, &what);
    }
    // The two consumer warpgroups taking turns at their wgmmas (the
    // schedule's pingpong on the ring): named barriers 2 and 3, two loops.
    let s = Schedule::block(&[128, 64])
        .warps(8)
        .arch(Arch::Sm90a)
        .warp_specialize(true)
        .stages(2)
        .wgmma_in_flight(1)
        .persistent(true)
        .pingpong(true);
    let k = flash_loops(s, 64, false, true);
    let text = zyntax_hir::print_module(&k.module);
    for turn in [
        "bar.sync 2, 256",
        "bar.sync 3, 256",
        "bar.arrive 2, 256",
        "bar.arrive 3, 256",
    ] {
        assert!(text.contains(turn), "turns: no `{turn}`");
    }
    check_f64(&k, 128, (300, 64), &mut rng, "128x64 d64 taking turns");
}

#[test]
fn flash_attention_stays_on_mma_sync_where_wgmma_does_not_fit() {
    // sm_80 and plain sm_90 (wgmma is sm_90a PTX), 2 warps, 32-key blocks.
    for (arch, bm, bn, warps) in [
        (Arch::Sm80, 128, 64, 8),
        (Arch::Sm90, 128, 64, 8),
        (Arch::Sm90a, 32, 64, 2),
        (Arch::Sm90a, 64, 32, 4),
    ] {
        let k = flash(bm, bn, 64, warps, arch, true);
        assert!(
            !k.layouts.of.iter().any(is_wgmma_layout),
            "{arch} {bm}x{bn}w{warps}"
        );
        assert_eq!(wgmmas(&k).0, 0);
    }
}

/// Both builds through ptxas: staged (two buffers) and on a TMA ring with
/// P V in flight across the softmax; no spills and no "wgmma serialized"
/// (C7514: the softmax's code must not touch registers of wgmmas in flight).
#[cfg(feature = "compute")]
#[test]
fn flash_attention_on_wgmma_passes_ptxas() {
    use zyntax_llvm::{compile_ptx, Options, Ptxas};
    let ptxas = Ptxas::locate().unwrap_or_else(|e| panic!("{e}"));
    for (bm, bn, d, warps) in [(64, 64, 64, 4), (128, 64, 128, 8)] {
        let wgmma = |n: u32| format!("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16");
        let staged = flash(bm, bn, d, warps, Arch::Sm90a, true);
        let on_ring = ring_loops(bm, bn, d, warps, (3, 1), false, false);
        // The warpgroups taking turns where there are two (the ring's pingpong).
        let turns = Schedule::block(&[bm, bn])
            .warps(warps)
            .arch(Arch::Sm90a)
            .warp_specialize(true)
            .stages(3)
            .wgmma_in_flight(1)
            .persistent(true)
            .pingpong(warps == 8);
        let turns = flash_loops(turns, d, false, false);
        for (name, k, needles) in [
            (
                "flash",
                staged,
                ["fence.proxy.async", "wgmma.wait_group.sync.aligned 0"],
            ),
            (
                "flash_ring",
                on_ring,
                ["cp.async.bulk.tensor.2d", "bar.sync 1"],
            ),
            (
                "flash_turns",
                turns,
                ["cp.async.bulk.tensor.2d", "bar.sync 1"],
            ),
        ] {
            let what = format!("{name} {bm}x{bn} d{d}");
            let ptx = compile_ptx(&k.module, &Options::new(Arch::Sm90a))
                .unwrap_or_else(|e| panic!("{what}: {e}"))
                .ptx;
            for needle in [wgmma(bn), wgmma(d)]
                .iter()
                .map(String::as_str)
                .chain(needles)
            {
                assert!(ptx.contains(needle), "{what}: missing `{needle}`");
            }
            if let Ok(dir) = std::env::var("WGMMA_PTX_DUMP") {
                std::fs::write(format!("{dir}/{name}_{bm}x{bn}_d{d}.ptx"), &ptx).unwrap();
            }
            let out = ptxas
                .assemble(&ptx, Arch::Sm90a)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let spills = !out.log.contains(" 0 bytes spill stores");
            let bad = spills && out.log.contains("spill") || out.log.contains("C7514");
            assert!(!bad, "{what}: spills or serialised wgmmas\n{}", out.log);
        }
    }
}
