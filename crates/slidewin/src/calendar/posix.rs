//! The POSIX TZ string of a TZif footer (RFC 8536 section 3.3, with its version 3 extensions:
//! rule times from -167 to 167 hours), e.g. `CET-1CEST,M3.5.0,M10.5.0/3`: local time after a
//! zone's last explicit transition.

use super::civil::{days_from_civil, days_in_month, is_leap, weekday, DAY_MS};
use crate::Error;
use alloc::format;
use alloc::string::String;

/// A parsed TZ string. Offsets are seconds east of UTC (POSIX writes them west, negated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Posix {
    std_offset: i32,
    dst: Option<Dst>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Dst {
    offset: i32,
    start: Rule,
    end: Rule,
}

/// A change's day of the year and its local time (seconds after that day's midnight, in the
/// offset in effect before the change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rule {
    day: Day,
    time: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Day {
    /// `Jn`: day 1..=365, February 29 never counted.
    Julian1(u16),
    /// `n`: day 0..=365, February 29 counted.
    Julian0(u16),
    /// `Mm.w.d`: weekday `d` (0 Sunday) of week `w` (5: the last) of month `m`.
    Month { month: u8, week: u8, weekday: u8 },
}

const EXPECTED: &str = "a POSIX TZ string (RFC 8536 3.3) like \"CET-1CEST,M3.5.0,M10.5.0/3\"";

impl Posix {
    /// Parses a whole TZ string; the error names `tzif footer`, the string and where it failed.
    pub(crate) fn parse(text: &[u8]) -> Result<Posix, Error> {
        let mut p = Parser { text, at: 0 };
        let posix = p.tz().ok_or_else(|| {
            Error::malformed(
                "tzif footer",
                EXPECTED,
                format!(
                    "{:?} (at byte {})",
                    String::from_utf8_lossy(text),
                    p.at.min(text.len())
                ),
            )
        })?;
        Ok(posix)
    }

    /// The offset (seconds east of UTC) in effect at `t_ms`, and the first later instant at
    /// which it changes (`None`: never).
    pub(crate) fn segment(&self, t_ms: i64) -> (i32, Option<i64>) {
        let Some(dst) = &self.dst else {
            return (self.std_offset, None);
        };
        // Each year's two changes lie within its days and 8 days either side (rule times reach
        // ±167 h), so the changes of years y-3..=y+3 hold, complete, every instant from the
        // middle of year y-2 to the last days of year y+2: the last change at or before t_ms
        // and the next one after it (a change of offset later than that means none: DST all
        // year).
        let (year, _, _) = super::civil::civil_from_days(t_ms.div_euclid(DAY_MS));
        let mut changes = [(0i64, 0u8, 0i32); 14];
        for (i, y) in (year - 3..=year + 3).enumerate() {
            let start = change_ms(y, dst.start, self.std_offset);
            let end = change_ms(y, dst.end, dst.offset);
            // Order of equal instants: by year, then start before end (a zone in DST all year
            // ends one year's DST at the instant it starts the next).
            changes[2 * i] = (start, 2 * i as u8, dst.offset);
            changes[2 * i + 1] = (end, 2 * i as u8 + 1, self.std_offset);
        }
        let complete_until = (days_from_civil(year + 3, 1, 1) - 9) * DAY_MS;
        changes.sort_unstable_by_key(|&(at, order, _)| (at, order));
        let before = changes.iter().take_while(|c| c.0 <= t_ms).last();
        let offset = before.map_or(self.std_offset, |c| c.2);
        // The first later instant whose last change sets another offset.
        let mut next = None;
        let mut i = changes.partition_point(|c| c.0 <= t_ms);
        while i < changes.len() {
            let at = changes[i].0;
            let mut j = i;
            while j + 1 < changes.len() && changes[j + 1].0 == at {
                j += 1;
            }
            if at > complete_until {
                break;
            }
            if changes[j].2 != offset {
                next = Some(at);
                break;
            }
            i = j + 1;
        }
        (offset, next)
    }
}

/// The UTC instant (ms) of `rule` in `year`, whose time is local in `offset_before`.
fn change_ms(year: i64, rule: Rule, offset_before: i32) -> i64 {
    let day = match rule.day {
        Day::Julian1(n) => {
            let n = i64::from(n);
            days_from_civil(year, 1, 1) + n - 1 + i64::from(is_leap(year) && n >= 60)
        }
        Day::Julian0(n) => days_from_civil(year, 1, 1) + i64::from(n),
        Day::Month {
            month,
            week,
            weekday: wd,
        } => {
            let first = days_from_civil(year, month, 1);
            // Sunday 0 as POSIX counts, from the module's Monday 0.
            let first_wd = (i64::from(weekday(first)) + 1) % 7;
            let mut day =
                first + (i64::from(wd) - first_wd).rem_euclid(7) + 7 * i64::from(week - 1);
            let last = first + i64::from(days_in_month(year, month)) - 1;
            while day > last {
                day -= 7;
            }
            day
        }
    };
    day * DAY_MS + (i64::from(rule.time) - i64::from(offset_before)) * 1_000
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let hit = self.peek() == Some(byte);
        self.at += usize::from(hit);
        hit
    }

    fn tz(&mut self) -> Option<Posix> {
        self.name()?;
        let std_offset = -self.hms(24)?;
        if self.at == self.text.len() {
            return Some(Posix {
                std_offset,
                dst: None,
            });
        }
        self.name()?;
        let offset = match self.peek() {
            Some(b',') => std_offset + 3_600,
            _ => -self.hms(24)?,
        };
        // A DST name with no rule: POSIX leaves the rule to the implementation; a TZif
        // footer always has one.
        if !self.eat(b',') {
            return None;
        }
        let start = self.rule()?;
        if !self.eat(b',') {
            return None;
        }
        let end = self.rule()?;
        (self.at == self.text.len()).then_some(Posix {
            std_offset,
            dst: Some(Dst { offset, start, end }),
        })
    }

    /// A zone abbreviation: three or more letters, or `<...>` of letters, digits, `+`, `-`.
    fn name(&mut self) -> Option<()> {
        let begin = self.at;
        if self.eat(b'<') {
            while matches!(self.peek(), Some(b) if b.is_ascii_alphanumeric() || b == b'+' || b == b'-')
            {
                self.at += 1;
            }
            let len = self.at - begin - 1;
            (self.eat(b'>') && len >= 3).then_some(())
        } else {
            while matches!(self.peek(), Some(b) if b.is_ascii_alphabetic()) {
                self.at += 1;
            }
            (self.at - begin >= 3).then_some(())
        }
    }

    fn number(&mut self, max: i32) -> Option<i32> {
        let begin = self.at;
        let mut n: i32 = 0;
        while let Some(b @ b'0'..=b'9') = self.peek() {
            n = n.checked_mul(10)?.checked_add(i32::from(b - b'0'))?;
            if n > max {
                return None;
            }
            self.at += 1;
        }
        (self.at > begin).then_some(n)
    }

    /// `[+-]hh[:mm[:ss]]` in seconds, hours at most `max_hours`.
    fn hms(&mut self, max_hours: i32) -> Option<i32> {
        let sign = if self.eat(b'-') {
            -1
        } else {
            self.eat(b'+');
            1
        };
        let mut seconds = self.number(max_hours)? * 3_600;
        if self.eat(b':') {
            seconds += self.number(59)? * 60;
            if self.eat(b':') {
                seconds += self.number(59)?;
            }
        }
        Some(sign * seconds)
    }

    fn rule(&mut self) -> Option<Rule> {
        let day = if self.eat(b'J') {
            Day::Julian1(u16::try_from(self.number(365)?).ok().filter(|&n| n >= 1)?)
        } else if self.eat(b'M') {
            let month = self.number(12)? as u8;
            if month == 0 || !self.eat(b'.') {
                return None;
            }
            let week = self.number(5)? as u8;
            if week == 0 || !self.eat(b'.') {
                return None;
            }
            let weekday = self.number(6)? as u8;
            Day::Month {
                month,
                week,
                weekday,
            }
        } else {
            Day::Julian0(self.number(365)? as u16)
        };
        let time = if self.eat(b'/') {
            self.hms(167)?
        } else {
            7_200
        };
        Some(Rule { day, time })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn parses_the_footers_of_the_database() {
        for ok in [
            "UTC0",
            "CET-1CEST,M3.5.0,M10.5.0/3",
            "EST5EDT,M3.2.0,M11.1.0",
            "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0",
            "IST-5:30",
            "<-04>4<-03>,M9.1.6/24,M4.1.6/24",
            "CST5CDT,M3.2.0/0,M11.1.0/1",
            "<-02>2<-01>,M3.5.0/-1,M10.5.0/0",
            "EST5EDT4,0/0,J365/25",
            "AAA3BBB,J60/1:30:15,300/+2",
        ] {
            assert!(Posix::parse(ok.as_bytes()).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "U0",
            "CET",
            "CET-1CEST",
            "CET-1CEST,M3.5.0",
            "CET-1CEST,M13.5.0,M10.5.0",
            "CET-1CEST,M3.0.0,M10.5.0",
            "CET-1CEST,M3.5.7,M10.5.0",
            "CET-25",
            "CET-1x",
            "CET-1CEST,J0,J365",
            "CET-1CEST,366,1",
            "CET-1CEST,1/168,2",
            "<AB>1",
            "<ABC1",
            "CET-1:60",
            "CET-99999999999999999999",
        ] {
            let e = Posix::parse(bad.as_bytes()).unwrap_err().to_string();
            assert!(
                e.starts_with("tzif footer must be a POSIX TZ string"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn all_year_dst_has_no_change() {
        let p = Posix::parse(b"EST5EDT4,0/0,J365/25").unwrap();
        assert_eq!(p.segment(1_700_000_000_000), (-4 * 3_600, None));
    }
}
