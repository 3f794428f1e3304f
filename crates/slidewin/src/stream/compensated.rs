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
}
