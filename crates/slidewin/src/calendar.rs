//! Calendar periods in a time zone: the day, week, month or year that contains an instant,
//! as UTC milliseconds `[start_ms, end_ms)`, for quotas such as "1,000,000 tokens per
//! calendar month in Europe/Berlin" (issue 43; this module is the period arithmetic alone).
//!
//! A period starts at local midnight of its first day and ends where the next one starts, so
//! a day is 23 or 25 hours long on the days clocks change. Where local midnight does not
//! exist (a zone that springs forward at 00:00, as America/Santiago and America/Havana do)
//! the period starts at the first instant after the gap; where midnight happens twice (clocks
//! going back from 01:00 to 00:00), at the first one. Periods tile time: each ends exactly
//! where the next starts.
//!
//! ## Where the time zone rules come from
//!
//! A [`Zone`] is parsed from TZif bytes (RFC 8536), the format of the system's database in
//! `/usr/share/zoneinfo`: [`Zone::from_system`] (feature `std`) reads a zone from there.
//! That database is the one the OS keeps up to date (its `tzdata` package), a running nginx
//! takes up a new one when it loads the zone again (a config reload), and the core stays
//! `no_std`, with no bundled copy of the database to go stale: it parses the bytes it is
//! given. [`Zone::utc`] needs no file.
//!
//! ```
//! use slidewin::calendar::{Calendar, Period, Weekday, Zone};
//!
//! # fn main() -> Result<(), slidewin::Error> {
//! // 2024-02-29T13:00:00Z, a Thursday.
//! let t = 1_709_211_600_000;
//! let day = 86_400_000;
//! let month = Calendar::new(Period::Month { anchor_day: 31 }, Zone::utc())?;
//! // Anchor 31 is clamped to each month's end: Jan 31 -> Feb 29 -> Mar 31.
//! assert_eq!(month.period_at(t)?, (1_709_164_800_000, 1_709_164_800_000 + 31 * day));
//! let week = Calendar::new(Period::Week { first: Weekday::Monday }, Zone::utc())?;
//! assert_eq!(week.period_at(t)?, (1_709_164_800_000 - 3 * day, 1_709_164_800_000 + 4 * day));
//!
//! let e = Calendar::new(Period::Month { anchor_day: 32 }, Zone::utc()).unwrap_err();
//! assert_eq!(e.to_string(), "anchor_day must be a day of the month, 1 to 31, got 32");
//!
//! #[cfg(feature = "std")]
//! {
//!     // The system's rules: Berlin's spring-forward day has 23 hours.
//!     let berlin = Calendar::new(Period::Day, Zone::from_system("Europe/Berlin")?)?;
//!     let (start, end) = berlin.period_at(1_711_846_800_000)?; // 2024-03-31T01:00:00Z
//!     assert_eq!(end - start, 23 * 3_600_000);
//! }
//! # Ok(())
//! # }
//! ```

mod civil;
mod posix;
mod zone;

pub use zone::Zone;

use crate::clock::check_time;
use crate::{Error, Value};
use civil::{civil_from_days, clamped, days_in_month, weekday, DAY_MS};

/// A day of the week.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Weekday {
    /// Monday (ISO 8601's first day).
    Monday,
    /// Tuesday.
    Tuesday,
    /// Wednesday.
    Wednesday,
    /// Thursday.
    Thursday,
    /// Friday.
    Friday,
    /// Saturday.
    Saturday,
    /// Sunday.
    Sunday,
}

impl Weekday {
    /// Monday 0 to Sunday 6.
    fn index(self) -> u8 {
        self as u8
    }
}

/// The length of a calendar period and the day it starts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Period {
    /// From local midnight to the next.
    Day,
    /// Seven days from local midnight of each `first` day.
    Week {
        /// The weekday a week starts on.
        first: Weekday,
    },
    /// From day `anchor_day` (1 to 31) of a month to that day of the next, clamped to the
    /// month's last day: anchor 31 runs Jan 31 -> Feb 28 (29) -> Mar 31 -> Apr 30 ...
    Month {
        /// The day of the month periods start on, 1 to 31.
        anchor_day: u8,
    },
    /// From `anchor_month`/`anchor_day` to the same day of the next year (January 1: 1 and
    /// 1); February 29 is clamped to February 28 in common years.
    Year {
        /// The month periods start in, 1 to 12.
        anchor_month: u8,
        /// The day of that month periods start on, 1 to its length in a leap year.
        anchor_day: u8,
    },
}

impl Period {
    /// The calendar year from January 1.
    pub const YEAR: Period = Period::Year {
        anchor_month: 1,
        anchor_day: 1,
    };

    fn validate(self) -> Result<Period, Error> {
        match self {
            Period::Month { anchor_day } if !(1..=31).contains(&anchor_day) => Err(Error::invalid(
                "anchor_day",
                "a day of the month, 1 to 31",
                Value::UInt(anchor_day.into()),
            )),
            Period::Year { anchor_month, .. } if !(1..=12).contains(&anchor_month) => {
                Err(Error::invalid(
                    "anchor_month",
                    "a month, 1 to 12",
                    Value::UInt(anchor_month.into()),
                ))
            }
            // 2000 is a leap year: February allows 29.
            Period::Year {
                anchor_month,
                anchor_day,
            } if anchor_day == 0 || anchor_day > days_in_month(2000, anchor_month) => {
                Err(Error::invalid(
                    "anchor_day",
                    "a day of anchor_month (February 29 allowed)",
                    Value::UInt(anchor_day.into()),
                ))
            }
            period => Ok(period),
        }
    }

    /// The first local day (a day number) of the period that contains local day `day`.
    fn start_day(self, day: i64) -> i64 {
        match self {
            Period::Day => day,
            Period::Week { first } => day - i64::from((weekday(day) + 7 - first.index()) % 7),
            Period::Month { anchor_day } => {
                let (year, month, _) = civil_from_days(day);
                let this = clamped(year, month, anchor_day);
                if day >= this {
                    this
                } else if month == 1 {
                    clamped(year - 1, 12, anchor_day)
                } else {
                    clamped(year, month - 1, anchor_day)
                }
            }
            Period::Year {
                anchor_month,
                anchor_day,
            } => {
                let (year, _, _) = civil_from_days(day);
                let this = clamped(year, anchor_month, anchor_day);
                if day >= this {
                    this
                } else {
                    clamped(year - 1, anchor_month, anchor_day)
                }
            }
        }
    }

    /// The first local day of the period after the one that starts on local day `start`.
    fn next_start(self, start: i64) -> i64 {
        match self {
            Period::Day => start + 1,
            Period::Week { .. } => start + 7,
            Period::Month { anchor_day } => match civil_from_days(start) {
                (year, 12, _) => clamped(year + 1, 1, anchor_day),
                (year, month, _) => clamped(year, month + 1, anchor_day),
            },
            Period::Year {
                anchor_month,
                anchor_day,
            } => clamped(civil_from_days(start).0 + 1, anchor_month, anchor_day),
        }
    }
}

/// Calendar periods of one kind in one time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    period: Period,
    zone: Zone,
}

impl Calendar {
    /// Periods `period` in `zone`; an anchor out of range is an error naming it
    /// (`anchor_day`, `anchor_month`) and its value.
    pub fn new(period: Period, zone: Zone) -> Result<Calendar, Error> {
        Ok(Calendar {
            period: period.validate()?,
            zone,
        })
    }

    /// The period.
    pub fn period(&self) -> Period {
        self.period
    }

    /// The time zone.
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// The period that contains `instant_ms`: `(start_ms, end_ms)` with
    /// `start_ms <= instant_ms < end_ms`, in UTC milliseconds. `instant_ms` must lie within
    /// ±2^53 ms (the crate's clock range), or the error names it.
    pub fn period_at(&self, instant_ms: i64) -> Result<(i64, i64), Error> {
        let t = check_time("instant_ms", instant_ms)?;
        let local_day = (t + self.zone.offset_ms_at(t)).div_euclid(DAY_MS);
        // local(t) >= the local midnight of the period's first day, so start <= t. Where
        // clocks go back over a midnight, t can lie past the end of the period of its local
        // day; the next periods are tried then (a fold is at most a day, so once or twice).
        let mut start_day = self.period.start_day(local_day);
        let mut start = self.zone.first_at_or_after(start_day * DAY_MS);
        loop {
            let next_day = self.period.next_start(start_day);
            let end = self.zone.first_at_or_after(next_day * DAY_MS);
            if t < end {
                return Ok((start, end));
            }
            (start_day, start) = (next_day, end);
        }
    }
}
