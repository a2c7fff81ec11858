//! The clock-seeded random source of the CPU backend's tests: fresh inputs
//! every run, the seed printed so that a failure can be replayed.
#![allow(dead_code)]

/// xorshift64* seeded from the clock.
pub struct Rng(u64);

impl Rng {
    pub fn new() -> Rng {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        eprintln!("seed {seed}");
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn words(&mut self, n: usize) -> Vec<u32> {
        (0..n).map(|_| self.next() as u32).collect()
    }
    /// In [-1, 1), away from zero by 1e-3 at the low end.
    pub fn f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0 + 1e-3
    }
    pub fn i32(&mut self) -> i32 {
        self.next() as i32
    }
}
