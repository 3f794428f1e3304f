//! The charting conventions (EMA seeded by an SMA, population standard deviation, Bollinger
//! bands, WMA) against the test vectors technicalindicators 3.1 publishes in its repository
//! (github.com/anandanand84/technicalindicators, test/data.js and the files named below).
//! The peer rounds its expected outputs (to 2 decimals, or to 4 significant digits for the
//! bands): each value here must round to the published one.

use slidewin::stream::*;

/// `close` of technicalindicators' test/data.js.
const CLOSE: [f64; 18] = [
    127.75, 129.02, 132.75, 145.40, 148.98, 137.52, 147.38, 139.05, 137.23, 149.30, 162.45, 178.95,
    200.35, 221.90, 243.23, 243.52, 286.42, 280.27,
];

/// The values of `aggregate` after each sample of `xs`, where it has one.
fn outputs(aggregate: &mut dyn Aggregate, xs: &[f64]) -> Vec<f64> {
    xs.iter()
        .filter_map(|&x| {
            aggregate.push(x).unwrap();
            aggregate.value()
        })
        .collect()
}

/// Each of `got` rounds to the published `want` (within half a unit of its last `decimals`).
fn rounds_to(got: &[f64], want: &[f64], half_unit: impl Fn(f64) -> f64) {
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= half_unit(*w) * (1.0 + 1e-9),
            "got {g}, published {w}"
        );
    }
}

fn two_decimals(_: f64) -> f64 {
    0.005
}

fn four_digits(w: f64) -> f64 {
    0.5 * 10f64.powi(w.abs().log10().floor() as i32 - 3)
}

#[test]
fn ema_seeded_by_an_sma_matches_test_moving_averages_ema_js() {
    let published = [
        138.34, 140.53, 144.92, 151.72, 161.45, 173.54, 187.48, 198.69, 216.23, 229.04,
    ];
    let mut ema = Ema::new(9, Seed::Sma).unwrap();
    rounds_to(&outputs(&mut ema, &CLOSE), &published, two_decimals);
}

#[test]
fn wma_matches_test_moving_averages_wma_js() {
    let published = [
        140.33, 142.52, 146.86, 153.76, 163.92, 177.16, 193.05, 206.64, 226.68, 242.22,
    ];
    let mut wma = SlidingWma::new(Window::Count(9)).unwrap();
    let full: Vec<f64> = outputs(&mut wma, &CLOSE).split_off(8);
    rounds_to(&full, &published, two_decimals);
}

#[test]
fn population_sd_matches_test_utils_sd_js() {
    let data = [
        11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 18.0, 19.0, 22.0, 23.0, 23.0,
    ];
    let published = [1.41, 1.41, 1.72, 1.85, 2.45, 2.58, 2.1];
    let mut sd = SlidingPopulationStdDev::new(Window::Count(5)).unwrap();
    rounds_to(
        &outputs(&mut sd, &data).split_off(4),
        &published,
        two_decimals,
    );
}

#[test]
fn bollinger_bands_match_test_volatility_bollinger_bands_js() {
    // period 10, stdDev 2: (lower, middle, upper) per full window.
    let published = [
        (124.1, 139.4, 154.7),
        (124.4, 142.9, 161.4),
        (121.7, 147.9, 174.1),
        (115.8, 154.7, 193.5),
        (107.1, 162.3, 217.6),
        (99.32, 171.7, 244.2),
        (102.4, 182.3, 262.3),
        (98.98, 196.2, 293.5),
        (109.5, 210.4, 311.2),
    ];
    let mut bands = Bollinger::new(Window::Count(10), 2.0).unwrap();
    let mut got = Vec::new();
    for x in CLOSE {
        bands.push(x).unwrap();
        if bands.is_full() {
            got.push(bands.bands().unwrap());
        }
    }
    let column = |f: fn(&Bands) -> f64| got.iter().map(f).collect::<Vec<_>>();
    rounds_to(&column(|b| b.lower), &published.map(|p| p.0), four_digits);
    rounds_to(&column(|b| b.middle), &published.map(|p| p.1), four_digits);
    rounds_to(&column(|b| b.upper), &published.map(|p| p.2), four_digits);
}
