//! xorshift64*: a small deterministic generator, so a failing random trace is named by its seed.

/// The generator; its state is the seed (not 0).
pub struct Random(pub u64);

impl Random {
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }

    /// One of `from`.
    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}
