//! Reservations: a cost known only after the answer (tokens of a language model's response,
//! bytes, money), reserved ahead and settled when known.
//!
//! A reservation records `units` in every window of the rule as one decision, refused as a
//! whole when they do not fit. Settling it for `actual` units gives back `units - actual`
//! **where the reservation was recorded**, at its stamp: the window then holds `actual` units
//! at the time the call was admitted, as if it had known its cost. Giving them back at the
//! newest time instead (a refund) would take units of later calls, which leave the window
//! later than the reservation's: the window would count less than was used after the
//! reservation's stamp leaves it, and admit more than its limit.
//!
//! ```
//! use slidewin::reservation::Reservation;
//! use slidewin::{Limiter, SlidingLog};
//!
//! let mut log = SlidingLog::new(20, 1_000)?;
//! // A reservation of 10 at 0 and a call of 10 at 100 fill the window.
//! assert!(log.check_at(0, 10)?.allowed);
//! let reserved = Reservation { stamp_ms: 0, units: 10 };
//! assert!(log.check_at(100, 10)?.allowed);
//! // The reservation used nothing: its 10 units leave, the call's stay until 1_100.
//! log.give_back_at(500, reserved.stamp_ms, reserved.give_back(0)?)?;
//! assert_eq!(log.check_at(1_000, 20)?.allowed, false);
//! assert_eq!(log.check_at(1_000, 10)?.remaining, 0);
//! # Ok::<(), slidewin::Error>(())
//! ```
//!
//! An actual cost above the reservation is an error here: the caller clamps the work to what
//! was reserved (an output cap), so a window never holds more than its limit of actual usage.

use crate::{Error, Value};

/// Units recorded for a call at `stamp_ms`, to be settled when its cost is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// When the units were recorded: the time of the decision that admitted them.
    pub stamp_ms: i64,
    /// How many.
    pub units: u64,
}

impl Reservation {
    /// The units to give back at the stamp when the call used `actual`: error when it used
    /// more than it reserved.
    pub fn give_back(&self, actual: u64) -> Result<u64, Error> {
        self.units.checked_sub(actual).ok_or_else(|| {
            let expected = "at most the units reserved";
            Error::invalid("actual", expected, Value::UInt(actual))
        })
    }
}

#[cfg(test)]
mod tests {
    use alloc::string::ToString;

    use super::*;

    #[test]
    fn settles_for_less_and_refuses_more() {
        let r = Reservation {
            stamp_ms: 7,
            units: 5,
        };
        assert_eq!(r.give_back(5), Ok(0));
        assert_eq!(r.give_back(0), Ok(5));
        let err = r.give_back(6).unwrap_err().to_string();
        assert!(err.contains("actual") && err.contains('6'), "{err}");
    }
}
