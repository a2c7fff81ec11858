//! Shared helpers of the interpreter tests: fresh pseudo-random inputs,
//! byte conversion, and launching a lowered tile kernel with its views
//! spelled out as the kernel's HIR parameters.
#![allow(dead_code)]

use zyntax_interp::{Arg, Interpreter};
use zyntax_tile::TileKernel;

/// A xorshift generator seeded from the clock (the seed is printed).
pub struct Rng(u64);

impl Rng {
    pub fn new() -> Rng {
        let s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        eprintln!("seed {s}");
        Rng(s)
    }
    /// Uniform in [-2, 2).
    pub fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
    }
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

pub fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A kernel argument: a view over a buffer, or a scalar.
pub enum TArg {
    /// Buffer index, runtime extents, strides (elements).
    View(usize, Vec<u32>, Vec<u32>),
    Int(i128),
    Float(f64),
}

/// A row-major view of `shape` over buffer `buf`.
pub fn row_major(buf: usize, shape: &[u32]) -> TArg {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    TArg::View(buf, shape.to_vec(), strides)
}

/// Runs `kernel` on the interpreter over `grid` program instances.
pub fn run(kernel: &TileKernel, grid: [u32; 3], args: &[TArg], buffers: &mut [Vec<u8>]) {
    let mut hir_args = Vec::new();
    for a in args {
        match a {
            TArg::View(buf, shape, strides) => {
                hir_args.push(Arg::Buffer(*buf));
                hir_args.extend(shape.iter().map(|&s| Arg::Int(s.into())));
                hir_args.extend(strides.iter().map(|&s| Arg::Int(s.into())));
            }
            TArg::Int(i) => hir_args.push(Arg::Int(*i)),
            TArg::Float(f) => hir_args.push(Arg::Float(*f)),
        }
    }
    let it = Interpreter::new(&kernel.module).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = it.launch(
        &kernel.name,
        grid,
        kernel.launch.block,
        0,
        &hir_args,
        buffers,
    ) {
        panic!(
            "{}: {e}\n{}",
            kernel.name,
            zyntax_hir::print_module(&kernel.module)
                .lines()
                .take(200)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// Asserts `got` is within `tol` (relative to max(1, |want|)) of `want`.
pub fn assert_close(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= tol * w.abs().max(1.0),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}
