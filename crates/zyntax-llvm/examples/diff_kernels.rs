//! Differential test data: random kernels (tests/common/random_gen.rs) run on
//! the reference interpreter; writes their PTX and a JSON manifest with the
//! inputs and the interpreter's outputs, for `tests/gpu/diff_gpu.py` to
//! compare against a real GPU bit for bit (NaNs compare equal to NaNs).
//!
//! Usage: `cargo run -p zyntax-llvm --example diff_kernels -- OUT_DIR [ARCH] [COUNT] [SEED] [OPT]`

#[path = "../tests/common/random_gen.rs"]
mod random_gen;

use random_gen::*;
use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1) else {
        eprintln!("usage: diff_kernels OUT_DIR [ARCH] [COUNT] [SEED] [OPT]");
        std::process::exit(2);
    };
    let arch = args
        .get(2)
        .and_then(|a| Arch::from_name(a))
        .unwrap_or(Arch::Sm80);
    let count: usize = args.get(3).and_then(|c| c.parse().ok()).unwrap_or(100);
    let seed: u64 = args.get(4).and_then(|c| c.parse().ok()).unwrap_or(1);
    let opt = args
        .get(5)
        .and_then(|o| OptLevel::from_name(o))
        .unwrap_or(OptLevel::O3);
    let mut rng = Rng::new(seed);
    let mut m = Module::new("diff");
    let mut slots = Vec::new();
    for k in 0..count {
        let g = random_kernel(&format!("d{k}"), &mut rng, 10 + k % 30);
        m.functions.push(g.function);
        slots.push(g.slots);
    }
    let interp = Interpreter::new(&m).expect("verified");
    let (grid, block) = ([2u32, 1, 1], [64u32, 1, 1]);
    let threads = 128usize;
    let mut cases = Vec::new();
    for (f, kinds) in m.functions.iter().zip(&slots) {
        let mut input = vec![0u8; threads * IN_WORDS * 4];
        for (n, chunk) in input.chunks_mut(4).enumerate() {
            // Mix small values (interesting for shifts, divisions, lanes) with full-width ones.
            let w = match n % 3 {
                0 => rng.next() as u32 % 64,
                1 => (rng.next() as u32 % 2000).wrapping_sub(1000),
                _ => rng.next() as u32,
            };
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        let mut bufs = vec![input.clone(), vec![0u8; threads * OUT_SLOTS * 8]];
        if let Err(e) = interp.launch(
            &f.name,
            grid,
            block,
            0,
            &[Arg::Buffer(0), Arg::Buffer(1)],
            &mut bufs,
        ) {
            eprintln!("@{}: interpreter: {e}", f.name);
            std::process::exit(1);
        }
        let kinds: Vec<&str> = kinds
            .iter()
            .map(|k| match k {
                SlotKind::Int => "int",
                SlotKind::F32 => "f32",
                SlotKind::F64 => "f64",
            })
            .collect();
        cases.push(serde_json::json!({
            "kernel": f.name,
            "grid": grid,
            "block": block,
            "input": hex(&input),
            "expected": hex(&bufs[1]),
            "slots": kinds,
        }));
    }
    let out = zyntax_llvm::compile_ptx(&m, &zyntax_llvm::Options::new(arch).with_opt_level(opt))
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1);
        });
    std::fs::create_dir_all(dir).expect("OUT_DIR");
    let d = std::path::Path::new(dir);
    std::fs::write(d.join("diff.ptx"), &out.ptx).expect("write");
    std::fs::write(d.join("diff.zir"), print_module(&m)).expect("write");
    let manifest =
        serde_json::json!({"arch": arch.name(), "seed": seed, "opt": opt.name(), "cases": cases});
    std::fs::write(d.join("diff.json"), manifest.to_string()).expect("write");
    println!("{} kernels -> {}", count, d.display());
}
