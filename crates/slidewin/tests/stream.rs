//! Stream aggregates: known vectors, the documented edge cases, errors and serde.

mod stream_ref;

use slidewin::stream::*;
use slidewin::{Error, Value};
use stream_ref::Rng;

const XS: [f64; 8] = [1.0, 3.0, -1.0, -3.0, 5.0, 3.0, 6.0, 7.0];

/// The value after each push of `xs`, from the first full window on.
fn streamed(aggregate: &mut dyn Aggregate, xs: &[f64]) -> Vec<f64> {
    let mut out = Vec::new();
    for &x in xs {
        aggregate.push(x).unwrap();
        if aggregate.is_full() {
            out.push(aggregate.value().unwrap());
        }
    }
    out
}

#[test]
fn known_vectors_for_max_and_min() {
    let max = [3.0, 3.0, 5.0, 5.0, 6.0, 7.0];
    let min = [-1.0, -3.0, -3.0, -3.0, 3.0, 3.0];
    assert_eq!(sliding_max(&XS, 3).unwrap(), max);
    assert_eq!(sliding_min(&XS, 3).unwrap(), min);
    assert_eq!(
        streamed(&mut SlidingMax::new(Window::Count(3)).unwrap(), &XS),
        max
    );
    assert_eq!(
        streamed(&mut SlidingMin::new(Window::Count(3)).unwrap(), &XS),
        min
    );
    assert_eq!(
        sliding_sum(&XS, 3).unwrap(),
        [3.0, -1.0, 1.0, 5.0, 14.0, 16.0]
    );
    assert_eq!(sliding_mean(&XS, 8).unwrap(), [21.0 / 8.0]);
    assert_eq!(sliding_max(&XS, 9).unwrap(), Vec::<f64>::new());
}

#[test]
fn replace_last_corrects_the_newest_sample_whichever_way() {
    let mut max = SlidingMax::new(Window::Count(3)).unwrap();
    for x in [9.0, 8.0, 7.0] {
        max.push(x).unwrap();
    }
    max.push(10.0).unwrap(); // [8, 7, 10]: the candidates 8 and 7 are beaten
    assert_eq!(max.value(), Some(10.0));
    max.replace_last(1.0).unwrap(); // [8, 7, 1]: 8 must come back
    assert_eq!(max.value(), Some(8.0));
    max.push(0.0).unwrap(); // [7, 1, 0]
    assert_eq!(max.value(), Some(7.0));
    assert_eq!(max.samples().collect::<Vec<_>>(), [7.0, 1.0, 0.0]);
}

#[test]
fn equal_values_keep_their_own_place() {
    let mut max = SlidingMax::new(Window::Count(2)).unwrap();
    for (x, want) in [(5.0, 5.0), (5.0, 5.0), (1.0, 5.0), (1.0, 1.0)] {
        max.push(x).unwrap();
        assert_eq!(max.value(), Some(want));
    }
    let mut min = SlidingMin::new(Window::Count(2)).unwrap();
    for (x, want) in [(0.0, 0.0), (-0.0, -0.0), (3.0, -0.0)] {
        min.push(x).unwrap();
        let got = min.value().unwrap();
        assert!(
            got == want && got.is_sign_negative() == want.is_sign_negative(),
            "{got}"
        );
    }
}

#[test]
fn time_windows_keep_samples_newer_than_now_minus_window() {
    let mut sum = SlidingSum::new(Window::Time(100)).unwrap();
    for t in [1_000, 1_000, 1_050, 1_100] {
        sum.push_at(t, 1.0).unwrap(); // equal times are fine
    }
    assert_eq!((sum.len(), sum.value()), (2, Some(2.0))); // t = 1000 is exactly 100 ms old: gone
    assert_eq!(sum.value_at(1_149).unwrap(), Some(2.0));
    assert_eq!(sum.value_at(1_150).unwrap(), Some(1.0));
    assert_eq!(sum.value_at(1_200).unwrap(), None);
    assert!(sum.is_empty());
    assert_eq!(
        sum.replace_last(1.0),
        Err(Error::NoSample {
            name: "replace_last"
        })
    );
    assert_eq!(
        sum.advance_to(1_199).unwrap_err().to_string(),
        "now_ms must not be earlier than the newest sample (1200), got 1199"
    );
}

#[test]
fn is_full_means_the_whole_window_is_covered() {
    let mut count = SlidingMean::new(Window::Count(2)).unwrap();
    count.push(1.0).unwrap();
    assert!(!count.is_full());
    assert_eq!(count.value(), Some(1.0)); // partial window: the mean of what is there
    count.push(2.0).unwrap();
    assert!(count.is_full());

    let mut time = SlidingMean::new(Window::Time(1_000)).unwrap();
    assert!(!time.is_full());
    time.push_at(5_000, 1.0).unwrap();
    time.advance_to(5_999).unwrap();
    assert!(!time.is_full());
    time.advance_to(6_000).unwrap();
    assert!(time.is_full());
    time.clear();
    assert!(!time.is_full());
}

#[test]
fn push_without_time_stays_at_the_latest_time() {
    let mut rate = Rate::new(Window::Time(1_000)).unwrap();
    rate.push_at(10_000, 1.0).unwrap();
    rate.push(1.0).unwrap();
    assert_eq!((rate.latest_ms(), rate.value()), (Some(10_000), Some(2.0)));
    assert_eq!(rate.value_at(11_000).unwrap(), None);

    let mut untimed = SlidingSum::new(Window::Time(1_000)).unwrap();
    untimed.push(1.0).unwrap();
    untimed.push(2.0).unwrap();
    assert_eq!(untimed.value(), Some(3.0));
    untimed.push_at(0, 4.0).unwrap(); // the first timed call drops the untimed samples
    assert_eq!(untimed.value(), Some(4.0));
}

#[test]
fn empty_and_single_sample_values() {
    let window = Window::Count(4);
    let aggregates: Vec<Box<dyn Aggregate>> = vec![
        Box::new(SlidingMax::new(window).unwrap()),
        Box::new(SlidingSum::new(window).unwrap()),
        Box::new(SlidingVariance::new(window).unwrap()),
        Box::new(SlidingPopulationStdDev::new(window).unwrap()),
        Box::new(Ewma::new(0.5).unwrap()),
        Box::new(TimeEwma::new(10).unwrap()),
    ];
    let mut one_sample = Vec::new();
    for mut aggregate in aggregates {
        assert_eq!(aggregate.value(), None);
        assert_eq!(
            aggregate.replace_last(1.0),
            Err(Error::NoSample {
                name: "replace_last"
            })
        );
        aggregate.push(2.0).unwrap();
        one_sample.push(aggregate.value());
    }
    assert_eq!(
        one_sample,
        [Some(2.0), Some(2.0), None, Some(0.0), Some(2.0), Some(2.0)]
    );
}

#[test]
fn bad_configurations_name_the_argument_and_value() {
    let message = |e: Error| e.to_string();
    assert_eq!(
        message(SlidingMax::new(Window::Count(0)).unwrap_err()),
        "k must be a positive integer, got 0"
    );
    assert_eq!(
        message(SlidingSum::new(Window::Time(0)).unwrap_err()),
        "window_ms must be a positive integer, got 0"
    );
    assert_eq!(
        message(SlidingMean::new(Window::Time(-5)).unwrap_err()),
        "window_ms must be a positive integer, got -5"
    );
    assert_eq!(
        message(SlidingMin::new(Window::Time(1 << 53)).unwrap_err()),
        "window_ms must be at most 2^52, got 9007199254740992"
    );
    assert_eq!(
        message(Rate::new(Window::Count(5)).unwrap_err()),
        "window must be a time window for a rate (not a count), got 5"
    );
    for alpha in [0.0, -0.5, 1.0 + f64::EPSILON, f64::NAN, f64::INFINITY] {
        let want = Error::invalid("alpha", "a number in (0, 1]", Value::Float(alpha));
        assert_eq!(message(Ewma::new(alpha).unwrap_err()), message(want));
    }
    assert!(Ewma::new(1.0).is_ok() && Ewma::new(f64::MIN_POSITIVE).is_ok());
    assert_eq!(
        message(TimeEwma::new(0).unwrap_err()),
        "half_life_ms must be an integer in 1..=2^52, got 0"
    );
    assert_eq!(
        message(sliding_max(&[1.0], 0).unwrap_err()),
        "k must be a positive integer, got 0"
    );
    assert_eq!(
        message(ewma(&[1.0], 2.0).unwrap_err()),
        "alpha must be a number in (0, 1], got 2"
    );
    assert_eq!(
        message(sliding_mean(&[1.0, f64::NAN], 1).unwrap_err()),
        "x must be a finite number, got NaN"
    );
}

#[test]
fn rejected_samples_leave_the_aggregate_as_it_was() {
    let mut mean = SlidingMean::new(Window::Time(1_000)).unwrap();
    mean.push_at(100, 4.0).unwrap();
    let before = mean.clone();
    for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let want = Error::invalid("x", "a finite number", Value::Float(x)).to_string();
        assert_eq!(mean.push_at(200, x).unwrap_err().to_string(), want);
        assert!(mean.replace_last(x).is_err());
    }
    assert!(mean.push_at(99, 1.0).is_err());
    assert_eq!(mean, before); // not even the time moved
    let mut ewma = Ewma::new(0.5).unwrap();
    ewma.push_at(100, 4.0).unwrap();
    assert!(ewma.push_at(200, f64::NAN).is_err());
    assert_eq!(
        (ewma.value(), ewma.latest_ms(), ewma.len()),
        (Some(4.0), Some(100), 1)
    );
}

#[test]
fn variance_of_a_large_mean_keeps_full_precision() {
    // Around 1e9 with a spread of 1e-2, where sum-of-squares formulas cancel to noise.
    let mut rng = Rng(7);
    let xs: Vec<f64> = (0..200_000)
        .map(|_| 1e9 + (rng.unit() - 0.5) * 2e-2)
        .collect();
    let k = 1_000;
    let mut var = SlidingVariance::new(Window::Count(k)).unwrap();
    let (mut worst, mut worst_textbook) = (0.0f64, 0.0f64);
    for (i, &x) in xs.iter().enumerate() {
        var.push(x).unwrap();
        if i + 1 >= k && i % 997 == 0 {
            let window = &xs[i + 1 - k..=i];
            let mean = stream_ref::exact_sum(window.iter().copied()) / k as f64;
            let want = stream_ref::exact_sum(window.iter().map(|x| (x - mean) * (x - mean)))
                / (k - 1) as f64;
            worst = worst.max((var.value().unwrap() - want).abs() / want);
            let (s, sq) = window
                .iter()
                .fold((0.0, 0.0), |(s, sq), x| (s + x, sq + x * x));
            let textbook = (sq - s * s / k as f64) / (k - 1) as f64;
            worst_textbook = worst_textbook.max((textbook - want).abs() / want);
        }
    }
    assert!(worst < 1e-9, "relative error {worst:e}");
    assert!(
        worst_textbook > 1.0,
        "the textbook formula should fail here: {worst_textbook:e}"
    );
}

#[test]
fn time_ewma_decays_with_time_not_with_samples() {
    let mut ewma = TimeEwma::new(1_000).unwrap();
    ewma.push_at(0, 0.0).unwrap();
    ewma.advance_to(3_000).unwrap(); // the old sample weighs 1/8 now
    ewma.push_at(3_000, 9.0).unwrap();
    assert_eq!(ewma.value(), Some(8.0));
    ewma.replace_last(0.0).unwrap();
    assert_eq!(ewma.value(), Some(0.0));
    // A burst at one instant is a plain mean; a gap of many half-lives forgets the past.
    let mut burst = TimeEwma::new(1_000).unwrap();
    for x in [1.0, 2.0, 3.0, 6.0] {
        burst.push_at(0, x).unwrap();
    }
    assert_eq!(burst.value(), Some(3.0));
    burst.push_at(1_000_000_000, 5.0).unwrap();
    assert_eq!(burst.value(), Some(5.0));
}

#[test]
fn window_count_checks_host_integers() {
    assert_eq!(
        Window::count(0).unwrap_err().to_string(),
        "k must be a positive integer, got 0"
    );
    assert_eq!(
        Window::time(0).unwrap_err().to_string(),
        "window_ms must be a positive integer, got 0"
    );
    assert_eq!(Window::time(250), Ok(Window::Time(250)));
}

#[cfg(feature = "serde")]
#[test]
fn serde_restores_configs_and_state_to_the_same_results() {
    fn round_trip<A>(aggregate: &mut A, rng: &mut Rng)
    where
        A: Aggregate + serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        for t in 0..300 {
            aggregate
                .push_at(t * 7, rng.log_uniform(1e-3, 1e9))
                .unwrap();
        }
        let json = serde_json::to_string(aggregate).unwrap();
        let mut restored: A = serde_json::from_str(&json).unwrap();
        assert_eq!(&restored, aggregate);
        for t in 300..700 {
            let x = rng.log_uniform(1e-3, 1e9);
            aggregate.push_at(t * 7, x).unwrap();
            restored.push_at(t * 7, x).unwrap();
            assert_eq!(
                restored.value().map(f64::to_bits),
                aggregate.value().map(f64::to_bits)
            );
        }
    }
    let mut rng = Rng(3);
    for window in [Window::Count(50), Window::Time(500)] {
        round_trip(&mut SlidingMax::new(window).unwrap(), &mut rng);
        round_trip(&mut SlidingMin::new(window).unwrap(), &mut rng);
        round_trip(&mut SlidingSum::new(window).unwrap(), &mut rng);
        round_trip(&mut SlidingMean::new(window).unwrap(), &mut rng);
        round_trip(&mut SlidingVariance::new(window).unwrap(), &mut rng);
        round_trip(&mut SlidingPopulationStdDev::new(window).unwrap(), &mut rng);
        round_trip(&mut SlidingWma::new(window).unwrap(), &mut rng);
        round_trip(
            &mut SlidingQuantile::with_q(window, 0.95).unwrap(),
            &mut rng,
        );
        round_trip(&mut Bollinger::new(window, 2.0).unwrap(), &mut rng);
    }
    round_trip(&mut Ema::new(20, Seed::Sma).unwrap(), &mut rng);
    round_trip(&mut Rate::new(Window::Time(500)).unwrap(), &mut rng);
    round_trip(&mut Ewma::new(0.1).unwrap(), &mut rng);
    round_trip(&mut TimeEwma::new(100).unwrap(), &mut rng);

    // Restoring checks the configuration like a constructor does.
    let bad = serde_json::to_string(&SlidingMax::new(Window::Count(3)).unwrap())
        .unwrap()
        .replace("3", "0");
    let error = serde_json::from_str::<SlidingMax>(&bad)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("k must be a positive integer, got 0"),
        "{error}"
    );
    let bad = serde_json::to_string(&Ewma::new(0.5).unwrap())
        .unwrap()
        .replace("0.5", "1.5");
    let error = serde_json::from_str::<Ewma>(&bad).unwrap_err().to_string();
    assert!(
        error.starts_with("alpha must be a number in (0, 1], got 1.5"),
        "{error}"
    );
    // A count window that has slid serialises its samples oldest first, and a restored one
    // may not hold more than k.
    let mut sum = SlidingSum::new(Window::Count(2)).unwrap();
    for x in [1.0, 2.0, 3.0] {
        sum.push_at(5, x).unwrap();
    }
    let json = serde_json::to_string(&sum).unwrap();
    assert!(
        json.starts_with(r#"{"window":{"Count":2},"values":[2.0,3.0],"times":[],"latest_ms":5,"#),
        "{json}"
    );
    let error = serde_json::from_str::<SlidingSum>(&json.replace("[2.0,3.0]", "[1.0,2.0,3.0]"))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("values must be at most k samples, got 3"),
        "{error}"
    );
    let window: Window = serde_json::from_str(r#"{"Time":250}"#).unwrap();
    assert_eq!(window, Window::Time(250));
}
