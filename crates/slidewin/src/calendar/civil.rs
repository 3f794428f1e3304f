//! Proleptic Gregorian dates as day numbers (days since 1970-01-01), the one date arithmetic
//! of [`crate::calendar`] (Howard Hinnant's `days_from_civil` / `civil_from_days`).
//!
//! Every function is total over the day numbers the module uses (instants within ±2^53 ms,
//! POSIX rules of years within ±300,000): no overflow, no panic.

/// Milliseconds in a civil day (local days are 86,400 s: the zone's offset absorbs DST).
pub(crate) const DAY_MS: i64 = 86_400_000;

/// Whether `year` has a February 29.
pub(crate) fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days in `month` (1..=12) of `year`.
pub(crate) fn days_in_month(year: i64, month: u8) -> u8 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The day number of `year-month-day` (month 1..=12, day 1..=31).
pub(crate) fn days_from_civil(year: i64, month: u8, day: u8) -> i64 {
    let (m, d) = (i64::from(month), i64::from(day));
    let y = if m <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The `(year, month, day)` of a day number.
pub(crate) fn civil_from_days(days: i64) -> (i64, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // In range by construction: day 1..=31, month 1..=12.
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The weekday of a day number, Monday 0 to Sunday 6 (1970-01-01 was a Thursday).
pub(crate) fn weekday(days: i64) -> u8 {
    (days + 3).rem_euclid(7) as u8
}

/// The day number of `day` in `year-month`, clamped to the month's last day.
pub(crate) fn clamped(year: i64, month: u8, day: u8) -> i64 {
    days_from_civil(year, month, day.min(days_in_month(year, month)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_known_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(weekday(0), 3);
        assert_eq!(weekday(days_from_civil(2024, 2, 29)), 3);
        for days in (-800_000..800_000).step_by(7) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
            assert!(d >= 1 && d <= days_in_month(y, m));
        }
        assert_eq!(clamped(2023, 2, 31), days_from_civil(2023, 2, 28));
    }
}
