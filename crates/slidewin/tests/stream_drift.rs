//! Drift: a sliding sum over a long stream of mixed magnitudes (1e-3 .. 1e9) against an exact
//! recomputation of the window. A plain running sum (`sum += new - old`) drifts; `SlidingSum`
//! must stay within 1e-12 relative error. The stream alternates blocks of mixed magnitudes with
//! blocks of small ones, where the residue a plain sum carries from the large values shows.

mod stream_ref;

use slidewin::stream::{Aggregate, SlidingSum, Window};
use stream_ref::{exact_sum, Rng};

const K: usize = 1_000;
/// Not a multiple of K, so the checks meet every phase of the periodic recomputation.
const BLOCK: usize = 5 * K + 317;

struct Worst {
    sliding: f64,
    plain: f64,
}

fn drift(samples: usize) -> Worst {
    let mut rng = Rng(0x5eed);
    let mut sum = SlidingSum::new(Window::Count(K)).unwrap();
    let mut window = std::collections::VecDeque::with_capacity(K);
    let mut plain = 0.0;
    let mut worst = Worst {
        sliding: 0.0,
        plain: 0.0,
    };
    let mut small = false;
    for i in 0..samples {
        if i % BLOCK == 0 {
            small = !small;
        }
        let x = if small {
            rng.log_uniform(1e-3, 1e-2)
        } else {
            rng.log_uniform(1e-3, 1e9)
        };
        sum.push(x).unwrap();
        window.push_back(x);
        plain += x;
        if window.len() > K {
            plain -= window.pop_front().unwrap();
        }
        // Check often while the window holds only the current block's samples.
        if i % BLOCK >= K && i % 331 == 0 {
            let exact = exact_sum(window.iter().copied());
            let relative = |got: f64| (got - exact).abs() / exact;
            worst.sliding = worst.sliding.max(relative(sum.value().unwrap()));
            worst.plain = worst.plain.max(relative(plain));
        }
    }
    worst
}

fn assert_drift_free(samples: usize) {
    let worst = drift(samples);
    println!(
        "{samples} samples: worst relative error SlidingSum {:e}, plain running sum {:e}",
        worst.sliding, worst.plain
    );
    assert!(
        worst.sliding <= 1e-12,
        "SlidingSum drifted: {:e}",
        worst.sliding
    );
    assert!(
        worst.plain > 1e-6,
        "the plain sum should drift here: {:e}",
        worst.plain
    );
}

/// What proves the point quickly, in every `cargo test`.
#[test]
fn sliding_sum_does_not_drift_where_a_plain_sum_does() {
    assert_drift_free(200_000);
}

/// The full length: 10^8 samples (~35 s in a debug build; `make test-stream-drift`).
#[test]
#[ignore = "10^8 samples: run by `make test-stream-drift`"]
fn sliding_sum_does_not_drift_over_1e8_samples() {
    assert_drift_free(100_000_000);
}
