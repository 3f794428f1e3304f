//! Configs and state snapshots round-trip through serde, and bad ones are refused on reading.
#![cfg(feature = "serde")]

use serde::{de::DeserializeOwned, Serialize};
use slidewin::{BucketQuota, BucketState, BucketWindow, CounterState, Limiter, LogState, Quota};
use slidewin::{SlidingCounter, SlidingLog};

fn round_trip<T: Serialize + DeserializeOwned>(value: &T) -> T {
    serde_json::from_str(&serde_json::to_string(value).unwrap()).unwrap()
}

fn refused<T: DeserializeOwned + core::fmt::Debug>(json: &str) -> String {
    serde_json::from_str::<T>(json).unwrap_err().to_string()
}

#[test]
fn configs_round_trip_and_are_validated() {
    let quota = Quota::new(10, 1_000).unwrap();
    assert_eq!(
        serde_json::to_string(&quota).unwrap(),
        r#"{"limit":10,"window_ms":1000}"#
    );
    assert_eq!(round_trip(&quota), quota);
    let buckets = BucketQuota::new(10, 1_000, 100).unwrap();
    assert_eq!(
        serde_json::to_string(&buckets).unwrap(),
        r#"{"limit":10,"window_ms":1000,"bucket_ms":100}"#
    );
    assert_eq!(round_trip(&buckets), buckets);
    assert_eq!(
        refused::<BucketQuota>(r#"{"limit":10,"window_ms":1000,"bucket_ms":300}"#),
        "bucket_ms must be a divisor of window_ms, got 300"
    );
    assert_eq!(
        refused::<Quota>(r#"{"limit":0,"window_ms":1000}"#),
        "limit must be a positive integer, got 0"
    );
}

/// A snapshot read back behaves as the limiter it was taken from.
fn snapshot_behaves_alike<L: Limiter>(mut limiter: L, times: &[i64])
where
    L::State: Serialize + DeserializeOwned + Clone,
{
    for &t in times {
        limiter.check_at(t, 2).unwrap();
    }
    let (config, state) = limiter.parts_mut();
    let mut copy = round_trip(&*state);
    for t in [times[times.len() - 1], 1_050, 1_500, 2_500] {
        assert_eq!(
            L::decide(config, &mut copy, t, 3, true).unwrap(),
            L::decide(config, state, t, 3, true).unwrap(),
            "at {t}"
        );
    }
}

#[test]
fn state_snapshots_round_trip() {
    let times = [0, 10, 10, 400, 999, 1_001];
    snapshot_behaves_alike(SlidingLog::new(10, 1_000).unwrap(), &times);
    snapshot_behaves_alike(BucketWindow::new(10, 1_000, 100).unwrap(), &times);
    snapshot_behaves_alike(SlidingCounter::new(10, 1_000).unwrap(), &times);
    let mut log = SlidingLog::new(10, 1_000).unwrap();
    log.check_at(5, 2).unwrap();
    log.check_at(7, 3).unwrap();
    assert_eq!(
        serde_json::to_string(log.state()).unwrap(),
        r#"{"newest_ms":7,"entries":[[5,2],[7,3]]}"#
    );
}

#[test]
fn bad_snapshots_are_refused() {
    assert_eq!(
        refused::<LogState>(r#"{"newest_ms":7,"entries":[[7,2],[5,3]]}"#),
        "entries.ms must be increasing and not after newest_ms, got 5"
    );
    assert_eq!(
        refused::<LogState>(r#"{"newest_ms":7,"entries":[[5,0]]}"#),
        "entries.cost must be a positive integer, got 0"
    );
    assert_eq!(
        refused::<LogState>(r#"{"newest_ms":9223372036854775807,"entries":[]}"#),
        "newest_ms must be between -2^53 and 2^53, got 9223372036854775807"
    );
    assert_eq!(
        refused::<CounterState>(r#"{"newest_ms":9007199254740993,"previous":0,"current":0}"#),
        "newest_ms must be between -2^53 and 2^53, got 9007199254740993"
    );
    assert_eq!(
        refused::<BucketState>(r#"{"newest_ms":7,"head_start_ms":0,"counts":[1]}"#),
        "counts.len must be 2 to 65537, got 1"
    );
    assert_eq!(
        refused::<BucketState>(r#"{"newest_ms":7,"head_start_ms":9,"counts":[1,2]}"#),
        "head_start_ms must be not after newest_ms, got 9"
    );
}
