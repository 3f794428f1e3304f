//! Every stream aggregate against a naive recomputation over random data, windows and
//! operations (pushes with equal and increasing times, corrections, time passing, bad input).

mod stream_ref;

use proptest::prelude::*;
use slidewin::stream::*;
use slidewin::Error;
use stream_ref::exact_sum;

#[derive(Debug, Clone)]
enum Op {
    Push {
        after_ms: i64,
        x: f64,
    },
    Replace(f64),
    Advance(i64),
    /// A sample that must be refused (NaN or infinite) without changing anything.
    Bad(f64),
    /// A time before the newest one, which must be refused.
    Backwards(f64),
}

fn sample() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-4i32..4).prop_map(f64::from), // ties
        -1e6f64..1e6,
        (-1.0f64..1.0).prop_map(|d| 1e9 + d), // a large mean
        (-3.0f64..9.0).prop_map(|e| 10f64.powf(e)), // mixed magnitudes
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (prop_oneof![Just(0i64), 0i64..400], sample())
            .prop_map(|(after_ms, x)| Op::Push { after_ms, x }),
        2 => sample().prop_map(Op::Replace),
        1 => (0i64..1_500).prop_map(Op::Advance),
        1 => prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY)].prop_map(Op::Bad),
        1 => sample().prop_map(Op::Backwards),
    ]
}

fn window() -> impl Strategy<Value = Window> {
    prop_oneof![
        (1usize..24).prop_map(Window::Count),
        (1i64..1_500).prop_map(Window::Time)
    ]
}

/// The naive model: every sample with its time; the window is recomputed from scratch.
#[derive(Default)]
struct Model {
    samples: Vec<(i64, f64)>,
    latest_ms: Option<i64>,
}

impl Model {
    fn in_window(&self, window: Option<Window>) -> Vec<(i64, f64)> {
        let latest = self.latest_ms.unwrap_or(i64::MIN);
        let kept: Vec<_> = match window {
            None => self.samples.clone(),
            Some(Window::Count(k)) => self.samples[self.samples.len().saturating_sub(k)..].to_vec(),
            Some(Window::Time(w)) => self
                .samples
                .iter()
                .copied()
                .filter(|&(t, _)| t > latest - w)
                .collect(),
        };
        kept
    }
}

/// Compares an aggregate's value with the samples a naive model has in the window.
type Check<'a> = &'a dyn Fn(Option<f64>, &[(i64, f64)]) -> Result<(), TestCaseError>;

/// Apply `ops` to `aggregate` and the model; after each, `check` compares the aggregate's
/// value with the model's samples in the window (`None` window: all samples).
fn run(
    aggregate: &mut dyn Aggregate,
    window: Option<Window>,
    ops: &[Op],
    check: Check,
) -> Result<(), TestCaseError> {
    let mut model = Model::default();
    for op in ops {
        let now = model.latest_ms.unwrap_or(1_000);
        match *op {
            Op::Push { after_ms, x } => {
                aggregate.push_at(now + after_ms, x).unwrap();
                model.latest_ms = Some(now + after_ms);
                model.samples.push((now + after_ms, x));
            }
            Op::Replace(x) => {
                let result = aggregate.replace_last(x);
                let in_window = model.in_window(window);
                match in_window.last() {
                    Some(_) => {
                        result.unwrap();
                        model.samples.last_mut().unwrap().1 = x;
                    }
                    None => prop_assert_eq!(
                        result,
                        Err(Error::NoSample {
                            name: "replace_last"
                        })
                    ),
                }
            }
            Op::Advance(after_ms) => {
                aggregate.advance_to(now + after_ms).unwrap();
                model.latest_ms = Some(now + after_ms);
            }
            Op::Bad(x) => {
                let message = format!("x must be a finite number, got {x}");
                prop_assert_eq!(
                    aggregate.push_at(now, x).unwrap_err().to_string(),
                    message.clone()
                );
                if !model.in_window(window).is_empty() {
                    prop_assert_eq!(aggregate.replace_last(x).unwrap_err().to_string(), message);
                }
            }
            Op::Backwards(x) => {
                if let Some(latest) = model.latest_ms {
                    prop_assert_eq!(
                        aggregate.push_at(latest - 1, x),
                        Err(Error::OutOfOrder {
                            name: "t_ms",
                            newest_ms: latest,
                            got_ms: latest - 1
                        })
                    );
                }
            }
        }
        let in_window = model.in_window(window);
        prop_assert_eq!(aggregate.len(), in_window.len());
        prop_assert_eq!(aggregate.latest_ms(), model.latest_ms);
        check(aggregate.value(), &in_window)?;
    }
    aggregate.clear();
    prop_assert_eq!(
        (aggregate.len(), aggregate.value(), aggregate.latest_ms()),
        (0, None, None)
    );
    Ok(())
}

fn values(samples: &[(i64, f64)]) -> impl Iterator<Item = f64> + Clone + '_ {
    samples.iter().map(|&(_, x)| x)
}

/// `got` is `want` within `tolerance`, and both are `None` together.
fn near(got: Option<f64>, want: Option<f64>, tolerance: f64) -> Result<(), TestCaseError> {
    match (got, want) {
        (Some(g), Some(w)) => prop_assert!(
            (g - w).abs() <= tolerance,
            "got {g}, want {w} ± {tolerance}"
        ),
        _ => prop_assert_eq!(got, want),
    }
    Ok(())
}

/// A few units in the last place of the sum of the magnitudes: what a drift-free sum keeps.
fn sum_tolerance(samples: &[(i64, f64)]) -> f64 {
    8.0 * f64::EPSILON * values(samples).map(f64::abs).sum::<f64>() + f64::MIN_POSITIVE
}

fn naive_variance(samples: &[(i64, f64)], sample: bool) -> Option<f64> {
    let n = samples.len();
    let divisor = if sample {
        n.checked_sub(1).filter(|&d| d > 0)?
    } else {
        n.checked_sub(0).filter(|&d| d > 0)?
    };
    let mean = exact_sum(values(samples)) / n as f64;
    Some(exact_sum(values(samples).map(|x| (x - mean) * (x - mean))) / divisor as f64)
}

fn variance_tolerance(samples: &[(i64, f64)]) -> f64 {
    let mean = exact_sum(values(samples)) / samples.len().max(1) as f64;
    let spread = values(samples)
        .map(|x| (x - mean).abs())
        .fold(0.0, f64::max);
    // Rounding the mean alone moves each deviation by an ulp of the mean.
    let mean_ulp = mean.abs() * f64::EPSILON;
    1e-12 * spread * spread + 4.0 * spread * mean_ulp + f64::MIN_POSITIVE
}

/// The `q`-quantile of a sorted copy (linear interpolation between the nearest ranks).
fn sorted_quantile(samples: &[(i64, f64)], q: f64) -> Option<f64> {
    let mut xs: Vec<f64> = values(samples).collect();
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    let h = (n.checked_sub(1)?) as f64 * q;
    let floor = h.floor() as usize;
    let fraction = h - floor as f64;
    Some(match xs.get(floor + 1) {
        Some(&above) if fraction > 0.0 => (1.0 - fraction) * xs[floor] + fraction * above,
        _ => xs[floor],
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn max_and_min_are_the_extreme_sample(window in window(), ops in prop::collection::vec(op(), 1..120)) {
        run(&mut SlidingMax::new(window).unwrap(), Some(window), &ops, &|got, samples| {
            prop_assert_eq!(got, values(samples).reduce(f64::max));
            Ok(())
        })?;
        run(&mut SlidingMin::new(window).unwrap(), Some(window), &ops, &|got, samples| {
            prop_assert_eq!(got, values(samples).reduce(f64::min));
            Ok(())
        })?;
    }

    #[test]
    fn sum_mean_and_rate_match_an_exact_sum(window in window(), ops in prop::collection::vec(op(), 1..120)) {
        run(&mut SlidingSum::new(window).unwrap(), Some(window), &ops, &|got, samples| {
            let want = (!samples.is_empty()).then(|| exact_sum(values(samples)));
            near(got, want, sum_tolerance(samples))
        })?;
        run(&mut SlidingMean::new(window).unwrap(), Some(window), &ops, &|got, samples| {
            let n = samples.len() as f64;
            let want = (!samples.is_empty()).then(|| exact_sum(values(samples)) / n);
            near(got, want, sum_tolerance(samples) / n.max(1.0))
        })?;
        if let Window::Time(window_ms) = window {
            let seconds = window_ms as f64 / 1_000.0;
            run(&mut Rate::new(window).unwrap(), Some(window), &ops, &|got, samples| {
                let want = (!samples.is_empty()).then(|| exact_sum(values(samples)) / seconds);
                near(got, want, sum_tolerance(samples) / seconds)
            })?;
        }
    }

    #[test]
    fn variances_match_a_two_pass_recomputation(window in window(), ops in prop::collection::vec(op(), 1..120)) {
        let sample_var = |got: Option<f64>, samples: &[(i64, f64)]| {
            near(got, naive_variance(samples, true), variance_tolerance(samples))
        };
        run(&mut SlidingVariance::new(window).unwrap(), Some(window), &ops, &sample_var)?;
        run(&mut SlidingPopulationVariance::new(window).unwrap(), Some(window), &ops, &|got, samples| {
            near(got, naive_variance(samples, false), variance_tolerance(samples))
        })?;
        run(&mut SlidingStdDev::new(window).unwrap(), Some(window), &ops, &|got, samples| {
            let want = naive_variance(samples, true).map(f64::sqrt);
            near(got.map(|s| s * s), want.map(|s| s * s), 4.0 * variance_tolerance(samples))
        })?;
        run(&mut SlidingPopulationStdDev::new(window).unwrap(), Some(window), &ops, &|got, samples| {
            let want = naive_variance(samples, false).map(f64::sqrt);
            near(got.map(|s| s * s), want.map(|s| s * s), 4.0 * variance_tolerance(samples))
        })?;
    }

    #[test]
    fn ewma_matches_the_recursion(alpha in 0.001f64..=1.0, ops in prop::collection::vec(op(), 1..120)) {
        run(&mut Ewma::new(alpha).unwrap(), None, &ops, &|got, samples| {
            let want = values(samples).reduce(|mean, x| (1.0 - alpha) * mean + alpha * x);
            let scale = values(samples).map(f64::abs).fold(0.0, f64::max);
            near(got, want, 1e-12 * scale * samples.len() as f64)
        })?;
    }

    #[test]
    fn time_ewma_is_the_half_life_weighted_mean(half_life_ms in 1i64..5_000, ops in prop::collection::vec(op(), 1..120)) {
        run(&mut TimeEwma::new(half_life_ms).unwrap(), None, &ops, &|got, samples| {
            // Weights relative to the newest sample (the ratios are what count), so none underflows.
            let newest_ms = samples.last().map_or(0, |&(t, _)| t);
            let weight = |t: i64| (-((newest_ms - t) as f64) / half_life_ms as f64).exp2();
            let want = (!samples.is_empty()).then(|| {
                let total = samples.iter().map(|&(t, _)| weight(t)).sum::<f64>();
                samples.iter().map(|&(t, x)| weight(t) * x).sum::<f64>() / total
            });
            let scale = values(samples).map(f64::abs).fold(0.0, f64::max);
            near(got, want, 1e-9 * scale)
        })?;
    }

    #[test]
    fn batch_functions_match_the_naive_scans(xs in prop::collection::vec(sample(), 0..80), k in 1usize..12) {
        let windows: Vec<&[f64]> = xs.windows(k).collect();
        prop_assert_eq!(sliding_max(&xs, k).unwrap(), windows.iter().map(|w| w.iter().copied().fold(f64::MIN, f64::max)).collect::<Vec<_>>());
        prop_assert_eq!(sliding_min(&xs, k).unwrap(), windows.iter().map(|w| w.iter().copied().fold(f64::MAX, f64::min)).collect::<Vec<_>>());
        let sums = sliding_sum(&xs, k).unwrap();
        let means = sliding_mean(&xs, k).unwrap();
        prop_assert_eq!((sums.len(), means.len()), (windows.len(), windows.len()));
        for ((w, sum), mean) in windows.iter().zip(sums).zip(means) {
            let tolerance = 8.0 * f64::EPSILON * w.iter().map(|x| x.abs()).sum::<f64>();
            prop_assert!((sum - exact_sum(w.iter().copied())).abs() <= tolerance);
            prop_assert!((mean - exact_sum(w.iter().copied()) / k as f64).abs() <= tolerance / k as f64);
        }
        let smoothed = ewma(&xs, 0.25).unwrap();
        let mut mean = None;
        for (x, got) in xs.iter().zip(smoothed) {
            let next = mean.map_or(*x, |m: f64| 0.75 * m + 0.25 * x);
            prop_assert_eq!(got, next);
            mean = Some(next);
        }
    }

    #[test]
    fn quantiles_match_a_sorted_copy_of_the_window(
        window in window(),
        q in prop_oneof![Just(0.0), Just(0.5), Just(0.95), Just(0.99), Just(1.0), 0.0f64..=1.0],
        ops in prop::collection::vec(op(), 1..120),
    ) {
        run(&mut SlidingQuantile::with_q(window, q).unwrap(), Some(window), &ops, &|got, samples| {
            prop_assert_eq!(got, sorted_quantile(samples, q));
            Ok(())
        })?;
    }

    #[test]
    fn wma_matches_the_weighted_sum(window in window(), ops in prop::collection::vec(op(), 1..120)) {
        run(&mut SlidingWma::new(window).unwrap(), Some(window), &ops, &|got, samples| {
            let n = samples.len() as f64;
            let weighted = values(samples).enumerate().map(|(i, x)| (i + 1) as f64 * x);
            let want = (!samples.is_empty()).then(|| exact_sum(weighted.clone()) / (n * (n + 1.0) / 2.0));
            let magnitude = weighted.map(f64::abs).sum::<f64>() / (n * (n + 1.0) / 2.0).max(1.0);
            near(got, want, 1024.0 * f64::EPSILON * magnitude + f64::MIN_POSITIVE)
        })?;
    }

    #[test]
    fn ema_by_period_matches_its_seeding_and_recursion(period in 1u64..12, ops in prop::collection::vec(op(), 1..120)) {
        let alpha = 2.0 / (period as f64 + 1.0);
        for seed in [Seed::Sma, Seed::First] {
            run(&mut Ema::new(period, seed).unwrap(), None, &ops, &|got, samples| {
                let p = match seed { Seed::Sma => period as usize, Seed::First => 1 };
                let want = (samples.len() >= p).then(|| {
                    let start = exact_sum(values(&samples[..p])) / p as f64;
                    values(&samples[p..]).fold(start, |mean, x| (1.0 - alpha) * mean + alpha * x)
                });
                let scale = values(samples).map(f64::abs).fold(0.0, f64::max);
                near(got, want, 1e-12 * scale * samples.len() as f64)
            })?;
        }
    }

    #[test]
    fn bollinger_is_the_mean_and_population_sd(window in window(), width in 0.0f64..4.0, ops in prop::collection::vec(op(), 1..120)) {
        let mut bands = Bollinger::new(window, width).unwrap();
        let mut sd = SlidingPopulationStdDev::new(window).unwrap();
        let mut mean = SlidingMean::new(window).unwrap();
        let mut t_ms = 0;
        for op in &ops {
            if let Op::Push { after_ms, x } = *op {
                t_ms += after_ms;
                for a in [&mut bands as &mut dyn Aggregate, &mut sd, &mut mean] {
                    a.push_at(t_ms, x).unwrap();
                }
                let b = bands.bands().unwrap();
                let (m, s) = (mean.value().unwrap(), sd.value().unwrap());
                let tolerance = 1e-9 * (m.abs() + s * width) + 1e-300;
                prop_assert!((b.middle - m).abs() <= tolerance && bands.value() == Some(b.middle));
                prop_assert!((b.upper - (m + width * s)).abs() <= tolerance);
                prop_assert!((b.lower - (m - width * s)).abs() <= tolerance);
            }
        }
    }
}
