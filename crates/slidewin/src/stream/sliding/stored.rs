//! The serialised form of a [`Sliding`] aggregate: its window, its samples oldest first and
//! their times (for time windows), its clock and its accumulator. A restored window is checked
//! like a new one.

use alloc::collections::VecDeque;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{sample, Samples, Sliding};
use crate::stream::Window;
use crate::Value;

#[derive(Serialize)]
#[serde(rename = "Sliding")]
struct Borrowed<'a, A> {
    window: Window,
    #[serde(serialize_with = "oldest_first")]
    values: &'a Samples,
    #[serde(serialize_with = "their_times")]
    times: &'a Samples,
    latest_ms: Option<i64>,
    first_ms: Option<i64>,
    churn: usize,
    acc: &'a A,
}

#[derive(Deserialize)]
#[serde(rename = "Sliding")]
struct Owned<A> {
    #[serde(deserialize_with = "checked_window")]
    window: Window,
    #[serde(deserialize_with = "finite_samples")]
    values: VecDeque<f64>,
    times: VecDeque<i64>,
    latest_ms: Option<i64>,
    first_ms: Option<i64>,
    churn: usize,
    acc: A,
}

impl<A: Serialize> Serialize for Sliding<A> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Borrowed {
            window: self.samples.window(),
            values: &self.samples,
            times: &self.samples,
            latest_ms: self.latest_ms,
            first_ms: self.first_ms,
            churn: self.churn,
            acc: &self.acc,
        }
        .serialize(serializer)
    }
}

impl<'de, A: Deserialize<'de>> Deserialize<'de> for Sliding<A> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let stored = Owned::<A>::deserialize(deserializer)?;
        let len = stored.values.len();
        let samples = Samples::of(stored.window, stored.values, stored.times).ok_or_else(|| {
            let error =
                crate::Error::invalid("values", "at most k samples", Value::UInt(len as u64));
            D::Error::custom(error)
        })?;
        Ok(Sliding {
            samples,
            latest_ms: stored.latest_ms,
            first_ms: stored.first_ms,
            churn: stored.churn,
            acc: stored.acc,
        })
    }
}

fn oldest_first<S: Serializer>(samples: &&Samples, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(samples.iter())
}

fn their_times<S: Serializer>(samples: &&Samples, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(samples.times())
}

fn checked_window<'de, D: Deserializer<'de>>(d: D) -> Result<Window, D::Error> {
    let window: Window = Deserialize::deserialize(d)?;
    window.check().map_err(D::Error::custom)
}

fn finite_samples<'de, D: Deserializer<'de>>(d: D) -> Result<VecDeque<f64>, D::Error> {
    let values: VecDeque<f64> = Deserialize::deserialize(d)?;
    match values.iter().find(|x| !x.is_finite()) {
        Some(&x) => Err(D::Error::custom(sample(x).unwrap_err())),
        None => Ok(values),
    }
}
