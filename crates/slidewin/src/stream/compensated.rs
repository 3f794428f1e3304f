//! Compensated (Kahan–Babuška–Neumaier) summation: a sum plus the rounding error it has dropped.

/// A running sum kept as `total + carry`, where `carry` collects, exactly, what each addition
/// rounded off (error-free TwoSum, branch-free so random data costs no mispredictions).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Compensated {
    total: f64,
    carry: f64,
}

/// `a + b` as the rounded sum and the exact rounding error (Knuth's TwoSum).
#[inline(always)]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let sum = a + b;
    let b_virtual = sum - a;
    let a_virtual = sum - b_virtual;
    (sum, (a - a_virtual) + (b - b_virtual))
}

impl Compensated {
    /// Add `x`.
    #[inline]
    pub fn add(&mut self, x: f64) {
        // Not `add_with_error(x, 0.0)`: `error + 0.0` is one more addition (it turns -0 into +0).
        let (total, error) = two_sum(self.total, x);
        self.total = total;
        self.carry += error;
    }

    /// Add `x`, whose own rounding error `x_error` is known, with one update of each field
    /// (so each is a single 4-cycle dependency chain).
    #[inline(always)]
    fn add_with_error(&mut self, x: f64, x_error: f64) {
        let (total, error) = two_sum(self.total, x);
        self.total = total;
        self.carry += error + x_error;
    }

    /// Subtract the sum `other`, its carry included.
    #[inline]
    pub fn subtract(&mut self, other: &Compensated) {
        self.add_with_error(-other.total, -other.carry);
    }

    /// Add `entering - leaving` (a window sliding by one) with one addition on the running total.
    #[inline]
    pub fn slide(&mut self, entering: f64, leaving: f64) {
        let (delta, delta_error) = two_sum(entering, -leaving);
        self.add_with_error(delta, delta_error);
    }

    /// The compensated sum of the samples in `parts` (a ring buffer's two halves), in four
    /// independent lanes so a recomputation runs at the adder's throughput, not its latency.
    pub fn of(parts: (&[f64], &[f64])) -> Self {
        let mut lanes = [Self::default(); 8];
        let mut rest = Self::default();
        for part in [parts.0, parts.1] {
            let chunks = part.chunks_exact(8);
            chunks.remainder().iter().for_each(|&x| rest.add(x));
            for chunk in chunks {
                for (lane, &x) in lanes.iter_mut().zip(chunk) {
                    lane.add(x);
                }
            }
        }
        for lane in lanes {
            rest.add_with_error(lane.total, lane.carry);
        }
        rest
    }

    /// The sum's best value.
    #[inline]
    pub fn value(&self) -> f64 {
        self.total + self.carry
    }

    /// Whether the carry is no longer small beside the total: a sample far larger than the
    /// rest has left, and what it rounded off is all that is left (recompute the sum).
    #[inline(always)]
    pub fn is_lossy(&self) -> bool {
        self.carry.abs() * pow2(20) > self.total.abs()
    }
}

/// `2^e` for `-1022 <= e <= 1023`.
pub(super) const fn pow2(e: i64) -> f64 {
    f64::from_bits(((1023 + e) as u64) << 52)
}

/// Samples of this magnitude and beyond are summed apart by [`Wide`], scaled by [`SCALE`].
const HUGE: f64 = pow2(960);
/// Scaling a sample of at least [`HUGE`] by this power of two is exact.
const SCALE: f64 = pow2(-64);
const UNSCALE: f64 = pow2(64);

/// A compensated sum that no finite samples overflow: those of magnitude `2^960` and beyond
/// are summed apart, scaled down by `2^-64` (exactly), so neither part can overflow before
/// it holds `2^64` samples. A result read from it ([`quotient`](Wide::quotient)) is ±∞ only
/// when the true one is beyond `f64`, and exact again once the huge samples have left. With
/// no huge sample it is a plain [`Compensated`], to the bit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Wide {
    small: Compensated,
    huge: Compensated,
    huge_len: usize,
}

#[inline(always)]
fn is_huge(x: f64) -> bool {
    x.abs() >= HUGE
}

impl Wide {
    /// Add `x`.
    #[inline]
    pub fn add(&mut self, x: f64) {
        if is_huge(x) {
            self.huge.add(x * SCALE);
            self.huge_len += 1;
        } else {
            self.small.add(x);
        }
    }

    /// Remove `x`, added before.
    #[inline]
    pub fn remove(&mut self, x: f64) {
        if is_huge(x) {
            self.huge.add(-x * SCALE);
            self.huge_len -= 1;
        } else {
            self.small.add(-x);
        }
    }

    /// Add `entering`, remove `leaving`. Always inlined, the huge case out of line: this is
    /// the per-sample step of every full count window (a call per sample costs more than it).
    #[inline(always)]
    pub fn slide(&mut self, entering: f64, leaving: f64) {
        // `|`, not `||` or `max`: two compares, no branch between them (and no `fmax` call in wasm).
        if is_huge(entering) | is_huge(leaving) {
            self.slide_huge(entering, leaving);
        } else {
            self.small.slide(entering, leaving);
        }
    }

    #[cold]
    #[inline(never)]
    fn slide_huge(&mut self, entering: f64, leaving: f64) {
        self.add(entering);
        self.remove(leaving);
    }

    /// The sum of the samples in `parts` (a ring buffer's two halves).
    pub fn of(parts: (&[f64], &[f64])) -> Self {
        let all = || parts.0.iter().chain(parts.1);
        if !all().any(|&x| is_huge(x)) {
            return Self {
                small: Compensated::of(parts),
                ..Self::default()
            };
        }
        let mut sum = Self::default();
        all().for_each(|&x| sum.add(x));
        sum
    }

    /// Whether either part [`is_lossy`](Compensated::is_lossy).
    #[inline(always)]
    pub fn is_lossy(&self) -> bool {
        self.small.is_lossy() || (self.huge_len > 0 && self.huge.is_lossy())
    }

    /// The sum divided by `divisor` (at least 1): each part divided first, so a mean of huge
    /// samples is finite when it is representable.
    #[inline]
    pub fn quotient(&self, divisor: f64) -> f64 {
        let small = self.small.value() / divisor;
        if self.huge_len == 0 {
            small
        } else {
            self.huge.value() / divisor * UNSCALE + small
        }
    }
}
