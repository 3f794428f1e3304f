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
//! use slidewin::reservation::{Excess, Reservation};
//! use slidewin::{Limiter, SlidingLog};
//!
//! let mut log = SlidingLog::new(20, 1_000)?;
//! // A reservation of 10 at 0 and a call of 10 at 100 fill the window.
//! assert!(log.check_at(0, 10)?.allowed);
//! let reserved = Reservation { stamp_ms: 0, units: 10 };
//! assert!(log.check_at(100, 10)?.allowed);
//! // The reservation used nothing: its 10 units leave, the call's stay until 1_100.
//! let amend = reserved.settle(0, Excess::Refuse)?.expect("a change");
//! log.amend_at(500, reserved.stamp_ms, amend)?;
//! assert_eq!(log.check_at(1_000, 20)?.allowed, false);
//! assert_eq!(log.check_at(1_000, 10)?.remaining, 0);
//! # Ok::<(), slidewin::Error>(())
//! ```
//!
//! An actual cost above the reservation is what [`Excess`] says it is: an error (the
//! caller clamps the work to what was reserved, an output cap, so a window never holds more
//! than its limit of actual usage), or a debt ([`Excess::Owe`]): the units above it are
//! recorded at the stamp whether they fit or not, so the window refuses until they leave it.
//! A window counts at most twice its limit: with one limit of debt at a stamp it refuses every
//! call until the stamp leaves anyway, so more would change no decision of its own.
//!
//! ```
//! use slidewin::reservation::{Excess, Reservation};
//! use slidewin::{Limiter, SlidingLog};
//!
//! let mut log = SlidingLog::new(20, 1_000)?;
//! assert!(log.check_at(0, 10)?.allowed);
//! let reserved = Reservation { stamp_ms: 0, units: 10 };
//! // The call used 25: the 15 above its reservation are owed at its stamp.
//! let amend = reserved.settle(25, Excess::Owe)?.expect("a change");
//! log.amend_at(900, reserved.stamp_ms, amend)?;
//! assert_eq!(log.check_at(999, 1)?.allowed, false);
//! assert_eq!(log.check_at(1_000, 20)?.allowed, true); // the debt left with its stamp
//! # Ok::<(), slidewin::Error>(())
//! ```

use crate::{Error, Value};

/// Units recorded for a call at `stamp_ms`, to be settled when its cost is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// When the units were recorded: the time of the decision that admitted them.
    pub stamp_ms: i64,
    /// How many.
    pub units: u64,
}

/// What settling a reservation does with units used above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Excess {
    /// They are an error: the work was to be clamped to the reservation.
    Refuse,
    /// They are not recorded (the work was clamped; the caller counts them).
    Clamp,
    /// They are recorded at the stamp, fitting or not: a debt the window holds until it leaves.
    Owe,
}

/// A change to what a window recorded at a stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amend {
    /// Units recorded at the stamp or before go back, the newest first.
    GiveBack(u64),
    /// Units are recorded at the stamp whether they fit or not (a window counts at most twice
    /// its limit).
    Owe(u64),
}

impl Reservation {
    /// The change settling for `actual` units makes at the stamp (`None`: none), or an error
    /// when the call used more than it reserved and `excess` refuses that.
    pub fn settle(&self, actual: u64, excess: Excess) -> Result<Option<Amend>, Error> {
        Ok(match actual.checked_sub(self.units) {
            None => Some(Amend::GiveBack(self.units - actual)),
            Some(0) => None,
            Some(over) => match excess {
                Excess::Refuse => {
                    let expected = "at most the units reserved";
                    return Err(Error::invalid("actual", expected, Value::UInt(actual)));
                }
                Excess::Clamp => None,
                Excess::Owe => Some(Amend::Owe(over)),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use alloc::string::ToString;

    use super::*;

    #[test]
    fn settles_for_less_and_treats_more_as_told() {
        let r = Reservation {
            stamp_ms: 7,
            units: 5,
        };
        assert_eq!(r.settle(5, Excess::Refuse), Ok(None));
        assert_eq!(r.settle(0, Excess::Refuse), Ok(Some(Amend::GiveBack(5))));
        let err = r.settle(6, Excess::Refuse).unwrap_err().to_string();
        assert!(err.contains("actual") && err.contains('6'), "{err}");
        assert_eq!(r.settle(6, Excess::Clamp), Ok(None));
        assert_eq!(r.settle(9, Excess::Owe), Ok(Some(Amend::Owe(4))));
    }
}
