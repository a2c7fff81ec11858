//! Random structured kernels (see `common/random_gen.rs`, without warp
//! collectives) compiled by the CPU backend and run as loops over threads give
//! the reference interpreter's outputs bit for bit (NaNs: any NaN): the CPU
//! lowering's scalar semantics (integer wrapping, division, shifts past the
//! width, saturating casts, min/max with NaN) are the interpreter's, as the
//! NVPTX lowering's are (`random_programs.rs`, `examples/diff_kernels.rs`).

#[path = "common/random_gen.rs"]
mod random_gen;

use random_gen::*;
use zyntax_hir::*;
use zyntax_interp::{Arg as IArg, Interpreter};
use zyntax_llvm::host::{self, Arg, Buffer, HostFnKind, HostOptions};

fn same_bits(kind: SlotKind, a: u64, b: u64) -> bool {
    match kind {
        SlotKind::F32 => {
            a == b || (f32::from_bits(a as u32).is_nan() && f32::from_bits(b as u32).is_nan())
        }
        SlotKind::F64 => a == b || (f64::from_bits(a).is_nan() && f64::from_bits(b).is_nan()),
        SlotKind::Int => a == b,
    }
}

#[test]
fn random_kernels_on_the_cpu_match_the_interpreter() {
    check_random(&mut Rng::new(11));
}

/// The random kernels with every loop that may be interchanged with the
/// thread loop interchanged (`ZYNTAX_CPU_INTERCHANGE=all`, also for the
/// other test of this binary: results must not change either way): loops
/// with branches, carried values of every type, loads in the loop; their
/// rows as SIMD lanes (`ZYNTAX_CPU_AFFINE=1`, off by default) or, for half
/// the seeds, threads running 8 iterations per stop at the loop's header
/// (the default, `fission::iterations`).
#[test]
fn random_kernels_with_interchanged_loops_match_the_interpreter() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    let affine = if seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 63 == 1 {
        "1"
    } else {
        "0"
    };
    std::env::set_var("ZYNTAX_CPU_INTERCHANGE", "all");
    std::env::set_var("ZYNTAX_CPU_AFFINE", affine);
    eprintln!("seed {seed}, ZYNTAX_CPU_AFFINE={affine}");
    let taken = check_random(&mut Rng::new(seed));
    eprintln!("{taken} of 60 random kernels had a loop interchanged");
    assert!(
        taken >= 10,
        "only {taken} random kernels had a loop interchanged"
    );
}

/// 60 random kernels against the interpreter; returns how many had a loop
/// interchanged with the thread loop.
fn check_random(rng: &mut Rng) -> usize {
    let mut taken = 0;
    let mut m = Module::new("random_cpu");
    m.targets = vec![Arch::Sm80];
    let mut slots = Vec::new();
    for k in 0..60 {
        let g = random_kernel_with(&format!("r{k}"), rng, 12 + k % 24, false);
        taken += usize::from(!host::interchange::headers(&g.function).is_empty());
        m.functions.push(g.function);
        slots.push(g.slots);
    }
    verify_module(&m).unwrap_or_else(|e| panic!("{e}\n{}", print_module(&m)));
    let interp = Interpreter::new(&m).unwrap();
    let jit = host::jit(&m, &HostOptions::default()).unwrap();
    let (blocks, threads) = (2u32, 64u32);
    let n = (blocks * threads) as usize;
    for (f, kinds) in m.functions.iter().zip(&slots) {
        assert_eq!(
            jit.function(&f.name).unwrap().kind,
            HostFnKind::CpuKernel,
            "@{} should compile for the CPU",
            f.name
        );
        let mut words = vec![0u32; n * IN_WORDS];
        for w in &mut words {
            *w = rng.next() as u32;
        }
        // The interpreter's buffers are bytes.
        let input: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut bufs = vec![input, vec![0xA5u8; n * OUT_SLOTS * 8]];
        interp
            .launch(
                &f.name,
                [blocks, 1, 1],
                [threads, 1, 1],
                0,
                &[IArg::Buffer(0), IArg::Buffer(1)],
                &mut bufs,
            )
            .unwrap_or_else(|e| panic!("@{}: {e}\n{}", f.name, print_function(f)));
        let want: Vec<u64> = bufs[1]
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let mut inp = words.clone();
        let mut out = vec![0x5A5A_5A5A_5A5A_5A5Au64; n * OUT_SLOTS];
        jit.launch(
            &f.name,
            [blocks, 1, 1],
            [threads, 1, 1],
            &mut [
                Arg::Buffer(Buffer::new(&mut inp)),
                Arg::Buffer(Buffer::new(&mut out)),
            ],
            0,
        )
        .unwrap_or_else(|e| panic!("@{}: {e}\n{}", f.name, print_function(f)));
        for (i, (&got, &exp)) in out.iter().zip(&want).enumerate() {
            let kind = kinds[i % OUT_SLOTS];
            assert!(
                same_bits(kind, got, exp),
                "@{} thread {} slot {}: cpu {got:#x}, interpreter {exp:#x}\n{}",
                f.name,
                i / OUT_SLOTS,
                i % OUT_SLOTS,
                print_function(f)
            );
        }
    }
    taken
}
