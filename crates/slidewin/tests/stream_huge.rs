//! Huge finite samples: a window holding them reads their true aggregate, or ±∞
//! when that is beyond `f64`, and the exact aggregate again once they have left — never a
//! wrong finite value, never NaN, never a poisoned state.

mod stream_ref;

use slidewin::stream::*;
use stream_ref::{exact_sum, Rng};

/// `e` where `2^(e-1) <= max |x| < 2^e`: scaled by `2^-e` (exactly), every sample is within
/// ±1, so the reference sums and squares cannot overflow.
fn exponent(xs: &[f64]) -> i32 {
    let magnitude = xs.iter().map(|x| x.abs()).fold(f64::MIN_POSITIVE, f64::max);
    magnitude.log2().floor() as i32 + 1
}

/// `x * 2^e` in two steps, so that `2^e` itself need not be representable.
fn scaled(x: f64, e: i32) -> f64 {
    x * 2f64.powi(e / 2) * 2f64.powi(e - e / 2)
}

fn reference_mean(xs: &[f64]) -> f64 {
    let e = exponent(xs);
    scaled(
        exact_sum(xs.iter().map(|&x| scaled(x, -e))) / xs.len() as f64,
        e,
    )
}

/// Population (`sample = false`) or sample variance, computed on scaled samples; ±∞ beyond f64.
fn reference_variance(xs: &[f64], sample: bool) -> Option<f64> {
    let n = xs.len();
    let divisor = if sample { n - 1 } else { n };
    (divisor > 0).then(|| {
        let e = exponent(xs);
        let mean = exact_sum(xs.iter().map(|&x| scaled(x, -e))) / n as f64;
        let squares = exact_sum(xs.iter().map(|&x| (scaled(x, -e) - mean).powi(2)));
        scaled(scaled(squares / divisor as f64, e), e)
    })
}

/// `got` is `want` (relative `tolerance`, or an absolute one of `floor`), or both are infinite.
fn check(what: &str, step: usize, got: Option<f64>, want: Option<f64>, tolerance: f64, floor: f64) {
    match (got, want) {
        (Some(g), Some(w)) if w.is_infinite() => {
            assert!(g.is_infinite(), "{what} step {step}: got {g}, want ±inf")
        }
        (Some(g), Some(w)) => assert!(
            (g - w).abs() <= tolerance * w.abs() + floor,
            "{what} step {step}: got {g}, want {w}"
        ),
        _ => assert_eq!(got, want, "{what} step {step}"),
    }
}

#[test]
fn the_issue_examples_recover_once_the_huge_samples_left() {
    let mut variance = SlidingVariance::new(Window::Count(3)).unwrap();
    let mut mean = SlidingMean::new(Window::Count(3)).unwrap();
    let mut variances = Vec::new();
    let mut means = Vec::new();
    for x in [1.7e308, 1.7e308, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0] {
        variance.push(x).unwrap();
        mean.push(x).unwrap();
        variances.push(variance.value().unwrap_or(f64::NAN));
        means.push(mean.value().unwrap());
    }
    // [1.7e308, 1.7e308] has no spread; with a small sample next to them the variance is ∞.
    assert!(variances[0].is_nan()); // one sample: no sample variance
    assert_eq!(variances[1], 0.0);
    assert!(
        variances[2..4].iter().all(|v| v.is_infinite()),
        "{variances:?}"
    );
    assert_eq!(variances[4..], [1.0; 4]);
    assert_eq!(means[..2], [1.7e308, 1.7e308]); // the mean itself is representable
    assert_eq!(means[4..], [2.0, 3.0, 4.0, 5.0]);

    let mut variance = SlidingVariance::new(Window::Count(3)).unwrap();
    for x in [1e155, 1.0, 2.0, 3.0] {
        variance.push(x).unwrap();
    }
    assert_eq!(variance.value(), Some(1.0));
}

#[test]
fn new_aggregates_recover_too() {
    let mut wma = SlidingWma::new(Window::Count(3)).unwrap();
    let mut p50 = SlidingQuantile::with_q(Window::Count(3), 0.5).unwrap();
    let mut bands = Bollinger::new(Window::Count(3), 2.0).unwrap();
    for x in [1.7e308, -1.7e308, 1.7e308, 1.0, 2.0, 3.0, 4.0] {
        for a in [&mut wma as &mut dyn Aggregate, &mut p50, &mut bands] {
            a.push(x).unwrap();
        }
    }
    assert_eq!(wma.value(), Some((2.0 + 2.0 * 3.0 + 3.0 * 4.0) / 6.0));
    assert_eq!(p50.value(), Some(3.0));
    let b = bands.bands().unwrap();
    assert_eq!(b.middle, 3.0);
    assert!((b.upper - 3.0 - 2.0 * (2.0f64 / 3.0).sqrt()).abs() < 1e-15);
}

/// Random traces mixing ordinary samples with huge ones of both signs, through count and time
/// windows and corrections of the newest sample.
#[test]
fn huge_samples_match_a_scaled_reference_on_random_traces() {
    let huge = [
        1.7e308,
        -1.7e308,
        1e155,
        -3e200,
        8.9e307,
        f64::MAX,
        f64::MIN,
    ];
    let mut rng = Rng(13);
    for window in [
        Window::Count(1),
        Window::Count(3),
        Window::Count(8),
        Window::Time(40),
    ] {
        let mut sum = SlidingSum::new(window).unwrap();
        let mut mean = SlidingMean::new(window).unwrap();
        let mut variance = SlidingPopulationVariance::new(window).unwrap();
        let mut sample_variance = SlidingVariance::new(window).unwrap();
        let mut samples: Vec<(i64, f64)> = Vec::new();
        let mut t_ms = 0;
        for step in 0..3_000 {
            let x = if rng.next_u64() % 10 == 0 {
                huge[(rng.next_u64() % huge.len() as u64) as usize]
            } else {
                (rng.next_u64() % 2_000) as f64 / 8.0 - 100.0
            };
            let replace = step > 0 && rng.next_u64() % 5 == 0;
            let aggregates: [&mut dyn Aggregate; 4] =
                [&mut sum, &mut mean, &mut variance, &mut sample_variance];
            if replace {
                for a in aggregates {
                    a.replace_last(x).unwrap();
                }
                samples.last_mut().unwrap().1 = x;
            } else {
                t_ms += (rng.next_u64() % 9) as i64;
                for a in aggregates {
                    a.push_at(t_ms, x).unwrap();
                }
                samples.push((t_ms, x));
            }
            let xs: Vec<f64> = match window {
                Window::Count(k) => samples.iter().rev().take(k).rev().map(|s| s.1).collect(),
                Window::Time(w) => samples
                    .iter()
                    .filter(|s| s.0 > t_ms - w)
                    .map(|s| s.1)
                    .collect(),
            };
            let magnitude = xs.iter().map(|x| x.abs()).fold(0.0, f64::max);
            let what = format!("{window:?}");
            let total = {
                let e = exponent(&xs);
                scaled(exact_sum(xs.iter().map(|&x| scaled(x, -e))), e)
            };
            check(
                &format!("sum {what}"),
                step,
                sum.value(),
                Some(total),
                1e-15,
                8.0 * f64::EPSILON * magnitude,
            );
            check(
                &format!("mean {what}"),
                step,
                mean.value(),
                Some(reference_mean(&xs)),
                1e-15,
                8.0 * f64::EPSILON * magnitude,
            );
            let floor = 1e-12 * magnitude * magnitude;
            check(
                &format!("variance {what}"),
                step,
                variance.value(),
                reference_variance(&xs, false),
                1e-12,
                floor,
            );
            check(
                &format!("sample variance {what}"),
                step,
                sample_variance.value(),
                reference_variance(&xs, true),
                1e-12,
                floor,
            );
        }
    }
}

#[test]
fn smoothed_means_of_the_largest_samples_stay_finite() {
    for alpha in [0.3, 0.5, 0.9] {
        let mut ewma = Ewma::new(alpha).unwrap();
        let mut ema = Ema::new(3, Seed::Sma).unwrap();
        for x in [f64::MAX, f64::MAX, f64::MAX, f64::MIN, f64::MAX] {
            ewma.push(x).unwrap();
            ema.push(x).unwrap();
            assert!(ewma.value().unwrap().is_finite(), "alpha {alpha} after {x}");
            assert!(ema.value().is_none_or(f64::is_finite), "ema after {x}");
        }
        for _ in 0..5_000 {
            ewma.push(1.0).unwrap();
        }
        assert!(
            (ewma.value().unwrap() - 1.0).abs() < 1e-9,
            "alpha {alpha}: {:?}",
            ewma.value()
        );
    }
    let mut time_ewma = TimeEwma::new(10).unwrap();
    time_ewma.push_at(0, f64::MAX).unwrap();
    time_ewma.push_at(0, f64::MAX).unwrap();
    time_ewma.push_at(0, f64::MAX).unwrap();
    assert_eq!(time_ewma.value(), Some(f64::MAX));
}
