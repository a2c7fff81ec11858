//! The setup the builder-nest tests share (`nest.rs`, `nest_stage.rs`):
//! a seeded xorshift over f32 values in [-2, 2) (the seed printed, so that a
//! failure can be replayed), f32 buffers as bytes and back, `*f32` globals.

use zyntax_hir::{AddrSpace, Type};

pub fn random(n: usize, seed: &mut u64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
        })
        .collect()
}

pub fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    eprintln!("seed {s}");
    s
}

pub fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub fn f32p() -> Type {
    Type::ptr(AddrSpace::Global, Type::F32)
}
