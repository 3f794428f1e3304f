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
        let (total, error) = two_sum(self.total, x);
        self.total = total;
        self.carry += error;
    }

    /// Add `entering - leaving` (a window sliding by one) with one addition on the running total.
    #[inline]
    pub fn slide(&mut self, entering: f64, leaving: f64) {
        let (delta, delta_error) = two_sum(entering, -leaving);
        self.add(delta);
        self.carry += delta_error;
    }

    /// The sum of `xs`, compensated.
    pub fn of(xs: impl Iterator<Item = f64>) -> Self {
        let mut sum = Self::default();
        xs.for_each(|x| sum.add(x));
        sum
    }

    /// The sum's best value.
    #[inline]
    pub fn value(&self) -> f64 {
        self.total + self.carry
    }
}
