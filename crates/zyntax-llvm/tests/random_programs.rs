//! Random structured kernels (see `common/random_gen.rs`): each verifies, runs
//! on the reference interpreter without a trap, and compiles to PTX that
//! `ptxas -Werror` accepts, at O0 and O3, on sm_70, sm_80 and sm_90. The same
//! generator feeds `examples/diff_kernels.rs`, which compares the GPU with the
//! interpreter bit for bit.

mod common;
#[path = "common/random_gen.rs"]
mod random_gen;

use common::*;
use random_gen::*;
use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter};
use zyntax_llvm::{compile_ptx, Options};

#[test]
fn random_kernels_interpret_compile_and_assemble() {
    let mut rng = Rng::new(7);
    let mut m = Module::new("random");
    for k in 0..40 {
        let g = random_kernel(&format!("r{k}"), &mut rng, 12 + k % 20);
        m.functions.push(g.function);
    }
    verify_module(&m).unwrap_or_else(|e| panic!("{e}\n{}", print_module(&m)));
    let interp = Interpreter::new(&m).unwrap();
    let threads = 64usize;
    for f in &m.functions {
        let mut input = vec![0u8; threads * IN_WORDS * 4];
        for chunk in input.chunks_mut(8) {
            let w = rng.next().to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
        let mut bufs = vec![input, vec![0u8; threads * OUT_SLOTS * 8]];
        interp
            .launch(
                &f.name,
                [2, 1, 1],
                [32, 1, 1],
                0,
                &[Arg::Buffer(0), Arg::Buffer(1)],
                &mut bufs,
            )
            .unwrap_or_else(|e| panic!("@{}: {e}\n{}", f.name, print_function(f)));
    }
    for arch in [Arch::Sm70, Arch::Sm80, Arch::Sm90] {
        for level in [OptLevel::O0, OptLevel::O3] {
            let out = compile_ptx(&m, &Options::new(arch).with_opt_level(level))
                .unwrap_or_else(|e| panic!("{arch} {level}: {e}"));
            ptxas()
                .assemble(&out.ptx, arch)
                .unwrap_or_else(|e| panic!("{arch} {level}: {e}"));
            assert_eq!(out.kernels.len(), 40);
        }
    }
}
