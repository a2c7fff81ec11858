//! Compile time of long straight-line code grows near-linearly (issue 10,
//! item 17): modules with a block over `SLP_MAX_BLOCK_INSTS` skip the SLP
//! vectorizer, which is quadratic in a block's memory operations.

use std::time::Instant;
use zyntax_hir::*;
use zyntax_llvm::{compile_ptx, Options};

/// `n` groups of `b[i + g] = a[i + g] + c` with a run-time `i`: the stores
/// may alias the later loads, the case that was quadratic.
pub fn straight_line(n: usize) -> Module {
    let mut out = String::from(
        "module \"straight\" targets(sm_80)\nkernel @k {\nblock0(v0: ptr<global, f32>, v1: ptr<global, f32>, v2: f32, v3: u32):\n",
    );
    let mut v = 4;
    for g in 0..n {
        out.push_str(&format!(
            "    v{v}: u32 = const {g}\n    v{a}: u32 = add v3, v{v}\n    v{p}: ptr<global, f32> = ptr_add v0, v{a}\n    v{x}: f32 = load v{p}\n    v{y}: f32 = add v{x}, v2\n    v{q}: ptr<global, f32> = ptr_add v1, v{a}\n    store v{q}, v{y}\n",
            a = v + 1, p = v + 2, x = v + 3, y = v + 4, q = v + 5
        ));
        v += 6;
    }
    out.push_str("    return\n}\n");
    parse_module(&out).unwrap()
}

fn seconds(n: usize) -> f64 {
    let m = straight_line(n);
    let t = Instant::now();
    let out = compile_ptx(&m, &Options::new(Arch::Sm80)).unwrap();
    assert!(out.ptx.contains("st.global.f32"));
    t.elapsed().as_secs_f64()
}

#[test]
fn long_straight_line_code_compiles_in_near_linear_time() {
    let small = seconds(700);
    let large = seconds(2800);
    eprintln!("700 groups {small:.2} s, 2800 groups {large:.2} s");
    // 4x the code: quadratic would be 16x (before the fix, 1,000 -> 4,000
    // groups went from 4.3 s to 175 s in the optimizer alone); allow 8x for
    // noise on a loaded machine.
    assert!(
        large < 8.0 * small.max(0.25),
        "{small:.2} s -> {large:.2} s"
    );
}
