//! `slidewin::calendar` against an independent computation: jiff-core (Jiff's own TZif
//! parser, POSIX TZ rules and civil dates) finds each period's first day with its date
//! arithmetic and that day's first instant with its own disambiguation of local times.
//!
//! Zones: UTC, Europe/Berlin, America/New_York, Australia/Lord_Howe (30-minute DST),
//! Asia/Kolkata, and three that change clocks at midnight (America/Santiago and
//! America/Havana: midnight missing in spring; Havana's midnight twice in autumn;
//! Asia/Beirut until 2022), each as the system's file, as a "slim" file whose transitions
//! stop in 2019 (so 2020-2030 come from the footer's POSIX TZ string) and as its version 1
//! part alone. Instants: random ones of 2020-2030, every clock change of those years and the
//! midnights around it, February 29 of 2024 and 2028.
#![cfg(feature = "calendar")]

use jiff_core::civil::Date;
use jiff_core::tz::tzif::TimeZone as JiffZone;
use jiff_core::tz::AmbiguousOffset;
use jiff_core::Timestamp;
use proptest::prelude::*;
use slidewin::calendar::{Calendar, Period, Weekday, Zone};
use slidewin::Error;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

const NAMES: [&str; 7] = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "America/Santiago",
    "America/Havana",
    "Asia/Beirut",
];

const PERIODS: [Period; 9] = [
    Period::Day,
    Period::Week {
        first: Weekday::Monday,
    },
    Period::Week {
        first: Weekday::Sunday,
    },
    Period::Month { anchor_day: 1 },
    Period::Month { anchor_day: 15 },
    Period::Month { anchor_day: 29 },
    Period::Month { anchor_day: 31 },
    Period::YEAR,
    Period::Year {
        anchor_month: 2,
        anchor_day: 29,
    },
];

/// 2020-01-01T00:00:00Z and 2030-01-01T00:00:00Z.
const FROM_MS: i64 = 1_577_836_800_000;
const TO_MS: i64 = 1_893_456_000_000;
/// Slim files keep the transitions before 2019-01-01T00:00:00Z.
const SLIM_CUT_S: i64 = 1_546_300_800;

static CHECKED: AtomicUsize = AtomicUsize::new(0);

struct Case {
    name: String,
    jiff: JiffZone,
    calendars: Vec<Calendar>,
}

fn cases() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| {
        let mut cases = vec![case("UTC".into(), &read("UTC"))];
        for name in NAMES {
            let bytes = read(name);
            cases.push(case(name.into(), &bytes));
            cases.push(case(format!("{name} (slim)"), &slim(&bytes, SLIM_CUT_S)));
            cases.push(case(format!("{name} (v1)"), &v1_only(&bytes)));
        }
        cases
    })
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!("/usr/share/zoneinfo/{name}")).unwrap()
}

fn case(name: String, bytes: &[u8]) -> Case {
    let zone = Zone::from_tzif(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let jiff = JiffZone::parse(bytes).unwrap();
    let calendars = PERIODS
        .iter()
        .map(|&p| Calendar::new(p, zone.clone()).unwrap())
        .collect();
    Case {
        name,
        jiff,
        calendars,
    }
}

// ---- the reference: jiff-core's dates and time zone ----

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap()
}

fn local_date(tz: &JiffZone, ms: i64) -> Date {
    ts(ms).to_datetime(tz.to_offset(ts(ms))).date()
}

/// The first instant of `date`: its midnight, the end of a gap over it, the first of two.
fn first_instant(tz: &JiffZone, date: Date) -> i64 {
    let midnight = date.at(0, 0, 0, 0);
    let instant = match tz.to_ambiguous_timestamp(midnight).offset() {
        AmbiguousOffset::Unambiguous { offset } => midnight.to_timestamp(offset).unwrap(),
        AmbiguousOffset::Fold { before, .. } => midnight.to_timestamp(before).unwrap(),
        AmbiguousOffset::Gap { after, .. } => tz
            .next_transition(midnight.to_timestamp(after).unwrap())
            .unwrap()
            .timestamp(),
    };
    instant.as_millisecond()
}

fn constrain(year: i16, month: i8, day: u8) -> Date {
    Date::new_constrain(year, month, day as i8).unwrap()
}

fn start_date(period: Period, date: Date) -> Date {
    match period {
        Period::Day => date,
        Period::Week { first } => {
            let first = first as i8; // Monday 0
            let back = (date.weekday().to_monday_zero_offset() - first).rem_euclid(7);
            date.checked_sub(i32::from(back)).unwrap()
        }
        Period::Month { anchor_day } => {
            let this = constrain(date.year(), date.month(), anchor_day);
            if date >= this {
                this
            } else {
                let before = date.first_of_month().yesterday().unwrap();
                constrain(before.year(), before.month(), anchor_day)
            }
        }
        Period::Year {
            anchor_month,
            anchor_day,
        } => {
            let this = constrain(date.year(), anchor_month as i8, anchor_day);
            if date >= this {
                this
            } else {
                constrain(date.year() - 1, anchor_month as i8, anchor_day)
            }
        }
        _ => unreachable!(),
    }
}

fn next_date(period: Period, start: Date) -> Date {
    match period {
        Period::Day => start.tomorrow().unwrap(),
        Period::Week { .. } => start.checked_add(7).unwrap(),
        Period::Month { anchor_day } => {
            let next = start.last_of_month().tomorrow().unwrap();
            constrain(next.year(), next.month(), anchor_day)
        }
        Period::Year {
            anchor_month,
            anchor_day,
        } => constrain(start.year() + 1, anchor_month as i8, anchor_day),
        _ => unreachable!(),
    }
}

/// The period containing `ms`: from its local date's period on, the first whose end is later.
fn reference(tz: &JiffZone, period: Period, ms: i64) -> (i64, i64) {
    let mut start = start_date(period, local_date(tz, ms));
    loop {
        let next = next_date(period, start);
        let (a, b) = (first_instant(tz, start), first_instant(tz, next));
        if ms < b {
            assert!(a <= ms, "reference: {a} <= {ms}");
            return (a, b);
        }
        start = next;
    }
}

/// The period of `ms` in every calendar of `case` equals the reference's, and periods tile
/// time: the period's first and last milliseconds give it back, its neighbours touch it.
fn check(case: &Case, ms: i64) {
    for (calendar, &period) in case.calendars.iter().zip(&PERIODS) {
        let got = calendar.period_at(ms).unwrap();
        let want = reference(&case.jiff, period, ms);
        assert_eq!(got, want, "{} {period:?} at {ms}", case.name);
        let (start, end) = got;
        assert_eq!(calendar.period_at(start).unwrap(), got);
        assert_eq!(calendar.period_at(end - 1).unwrap(), got);
        assert_eq!(calendar.period_at(start - 1).unwrap().1, start);
        assert_eq!(calendar.period_at(end).unwrap().0, end);
        CHECKED.fetch_add(1, Relaxed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_048, ..ProptestConfig::default() })]

    /// Random instants of 2020-2030, in every zone (22 files) and period (9).
    #[test]
    fn random_instants_match_jiff(ms in FROM_MS..TO_MS) {
        for case in cases() {
            check(case, ms);
        }
    }
}

/// Every clock change of 2020-2030 (and the midnights around it) in every zone, and
/// February 29 of 2024 and 2028.
#[test]
fn every_clock_change_and_leap_day_match_jiff() {
    let before = CHECKED.load(Relaxed);
    let mut changes = 0;
    for case in cases() {
        let tz = &case.jiff;
        let mut at = ts(FROM_MS);
        // (jiff-core answers Kolkata's 1945 change after 2020: only later changes count.)
        while let Some(change) = tz
            .next_transition(at)
            .filter(|t| t.timestamp() > at && t.timestamp() < ts(TO_MS))
        {
            at = change.timestamp();
            let t = at.as_millisecond();
            changes += 1;
            for ms in [t - 1, t, t + 1] {
                check(case, ms);
            }
            let day = local_date(tz, t);
            for date in [day.yesterday().unwrap(), day, day.tomorrow().unwrap()] {
                let m = first_instant(tz, date);
                for ms in [m - 1, m, m + 1] {
                    check(case, ms);
                }
            }
        }
        for leap_day in [
            Date::new(2024, 2, 29).unwrap(),
            Date::new(2028, 2, 29).unwrap(),
        ] {
            for date in [leap_day, leap_day.tomorrow().unwrap()] {
                let m = first_instant(tz, date);
                for ms in [m - 1, m, m + 1, m + 12 * 3_600_000] {
                    check(case, ms);
                }
            }
        }
    }
    // 20 changes a decade in each DST zone file, 13 in Beirut's (DST ended in 2023),
    // Santiago's 2022 rule change...
    assert!(changes > 300, "{changes} clock changes");
    eprintln!(
        "{changes} clock changes, {} period checks",
        CHECKED.load(Relaxed) - before
    );
}

/// Known days, so the reference is checked too: 23 and 25 hours, half an hour at Lord Howe,
/// a midnight missing (Santiago, Havana, Beirut) and one twice (Havana).
#[test]
fn known_days() {
    let h = 3_600_000;
    let day_of = |name: &str, ms: i64| {
        let zone = Zone::from_system(name).unwrap();
        Calendar::new(Period::Day, zone)
            .unwrap()
            .period_at(ms)
            .unwrap()
    };
    // 2024-03-31 Berlin: 2024-03-30T23:00Z to 2024-03-31T22:00Z.
    assert_eq!(
        day_of("Europe/Berlin", 1_711_846_800_000),
        (1_711_839_600_000, 1_711_839_600_000 + 23 * h)
    );
    // 2024-10-27 Berlin: 25 hours.
    let (s, e) = day_of("Europe/Berlin", 1_730_030_000_000);
    assert_eq!((s, e - s), (1_729_980_000_000, 25 * h));
    // 2024-10-06 Lord Howe springs forward by 30 minutes at 02:00: 23.5 hours.
    let (s, e) = day_of("Australia/Lord_Howe", 1_728_180_000_000);
    assert_eq!(e - s, 23 * h + h / 2);
    // 2024-09-08 Santiago: 24:00 of the 7th is 01:00 of the 8th; the day starts at that
    // change (04:00Z) and ends at midnight -03 (03:00Z of the 9th).
    assert_eq!(
        day_of("America/Santiago", 1_725_800_000_000),
        (1_725_768_000_000, 1_725_768_000_000 + 23 * h)
    );
    // 2024-11-03 Havana: 01:00 CDT goes back to 00:00 CST; the day starts at the first
    // midnight (04:00Z) and has 25 hours.
    let (s, e) = day_of("America/Havana", 1_730_620_000_000);
    assert_eq!((s, e - s), (1_730_606_400_000, 25 * h));
    // 2021-03-28 Beirut: midnight is 01:00; from 2021-03-27T22:00Z, 23 hours.
    let (s, e) = day_of("Asia/Beirut", 1_616_900_000_000);
    assert_eq!((s, e - s), (1_616_882_400_000, 23 * h));
}

#[test]
fn utc_needs_no_file() {
    let day = 86_400_000;
    let feb = Calendar::new(Period::Month { anchor_day: 31 }, Zone::utc()).unwrap();
    // 2023-02-28 to 2023-03-31, then to 2023-04-30.
    let feb28 = 1_677_542_400_000;
    assert_eq!(feb.period_at(feb28).unwrap(), (feb28, feb28 + 31 * day));
    assert_eq!(feb.period_at(feb28 - 1).unwrap(), (feb28 - 28 * day, feb28));
    assert_eq!(
        feb.period_at(feb28 + 31 * day).unwrap(),
        (feb28 + 31 * day, feb28 + 61 * day)
    );
    // Before 1970 and at the ends of the clock's range.
    let year = Calendar::new(Period::YEAR, Zone::utc()).unwrap();
    assert_eq!(year.period_at(-1).unwrap(), (-365 * day, 0));
    for t in [-(1 << 53), 1 << 53] {
        let (s, e) = year.period_at(t).unwrap();
        assert!(s <= t && t < e);
    }
}

// ---- errors ----

fn message<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn bad_arguments_are_named() {
    let utc = Zone::utc;
    for (period, text) in [
        (
            Period::Month { anchor_day: 0 },
            "anchor_day must be a day of the month, 1 to 31, got 0",
        ),
        (
            Period::Month { anchor_day: 32 },
            "anchor_day must be a day of the month, 1 to 31, got 32",
        ),
        (
            Period::Year {
                anchor_month: 13,
                anchor_day: 1,
            },
            "anchor_month must be a month, 1 to 12, got 13",
        ),
        (
            Period::Year {
                anchor_month: 0,
                anchor_day: 1,
            },
            "anchor_month must be a month, 1 to 12, got 0",
        ),
        (
            Period::Year {
                anchor_month: 2,
                anchor_day: 30,
            },
            "anchor_day must be a day of anchor_month (February 29 allowed), got 30",
        ),
        (
            Period::Year {
                anchor_month: 4,
                anchor_day: 0,
            },
            "anchor_day must be a day of anchor_month (February 29 allowed), got 0",
        ),
    ] {
        assert_eq!(message(Calendar::new(period, utc())), text);
    }
    let day = Calendar::new(Period::Day, utc()).unwrap();
    assert_eq!(
        message(day.period_at(i64::MAX)),
        "instant_ms must be between -2^53 and 2^53, got 9223372036854775807"
    );
    for (name, text) in [
        (
            "../../etc/passwd",
            "zone must be a name in /usr/share/zoneinfo like \"Europe/Berlin\" (no \"..\", no \
             leading \"/\"), got \"../../etc/passwd\"",
        ),
        (
            "/etc/localtime",
            "zone must be a name in /usr/share/zoneinfo like \"Europe/Berlin\" (no \"..\", no \
             leading \"/\"), got \"/etc/localtime\"",
        ),
        (
            "Europe/../../../etc/passwd",
            "zone must be a name in /usr/share/zoneinfo like \"Europe/Berlin\" (no \"..\", no \
             leading \"/\"), got \"Europe/../../../etc/passwd\"",
        ),
        (
            "",
            "zone must be a name in /usr/share/zoneinfo like \"Europe/Berlin\" (no \"..\", no \
             leading \"/\"), got \"\"",
        ),
    ] {
        assert_eq!(message(Zone::from_system(name)), text);
    }
    assert_eq!(
        message(Zone::from_system("Mars/Olympus_Mons")),
        "zone must be a zone of /usr/share/zoneinfo like \"Europe/Berlin\", got \
         \"Mars/Olympus_Mons\" (No such file or directory (os error 2))"
    );
    // A directory is not a zone either.
    assert!(message(Zone::from_system("Europe")).starts_with("zone must be a zone of"));
}

#[test]
fn bad_tzif_bytes_are_named() {
    let berlin = read("Europe/Berlin");
    // Every truncation of a real file is an error, never a zone.
    for len in 0..berlin.len() {
        let e = message(Zone::from_tzif(&berlin[..len]));
        assert!(e.starts_with("tzif"), "{len}: {e}");
    }
    assert_eq!(
        message(Zone::from_tzif(&berlin[..10])),
        "tzif must be TZif data at least as long as its 44-byte header (RFC 8536), in bytes, \
         got 10"
    );
    assert_eq!(
        message(Zone::from_tzif(&berlin[..1000])),
        "tzif must be as long as its header's counts say (RFC 8536), got 1000 bytes where they \
         need 2270: a truncated file?"
    );
    assert_eq!(
        message(Zone::from_tzif(&berlin[..berlin.len() - 1])),
        "tzif footer must be a POSIX TZ string between two newlines (RFC 8536 3.3), got \
         \"\\nCET-1CEST,M3.5.0,M10.5.0/3\""
    );
    let mut bad = berlin.clone();
    bad[..4].copy_from_slice(b"TZjf");
    assert_eq!(
        message(Zone::from_tzif(&bad)),
        "tzif must be TZif data (RFC 8536) starting with \"TZif\", got \"TZjf\""
    );
    let mut bad = berlin.clone();
    bad[4] = b'9';
    assert_eq!(
        message(Zone::from_tzif(&bad)),
        "tzif version must be 0, '2', '3' or '4' (bytes 0, 50, 51, 52), got 57"
    );
    // A footer that is not a TZ string.
    let mut bad = berlin.clone();
    let n = bad.len();
    bad[n - 4] = b'X';
    assert_eq!(
        message(Zone::from_tzif(&bad)),
        "tzif footer must be a POSIX TZ string (RFC 8536 3.3) like \
         \"CET-1CEST,M3.5.0,M10.5.0/3\", got \"CET-1CEST,M3.5.0,M10.5.X/3\" (at byte 23)"
    );
    // Leap seconds (zoneinfo's right/ zones) are refused, not misread.
    assert_eq!(
        message(Zone::from_tzif(&read("right/Europe/Berlin"))),
        "tzif leapcnt must be 0 (a zone without leap seconds, not one of zoneinfo's \
         \"right/\"), got 27"
    );
    // Transitions out of order, a type out of range, an offset beyond RFC 8536's bounds.
    let mut raw = Raw::parse(&berlin);
    raw.times.swap(10, 11);
    assert!(message(Zone::from_tzif(&raw.encode()))
        .starts_with("tzif transition times must be in strictly ascending order (RFC 8536), got"));
    let mut raw = Raw::parse(&berlin);
    raw.indices[3] = raw.types.len() as u8;
    assert!(message(Zone::from_tzif(&raw.encode()))
        .starts_with("tzif transition types must be indices of the file's local time types"));
    let mut raw = Raw::parse(&berlin);
    raw.types[1][..4].copy_from_slice(&100_000i32.to_be_bytes());
    assert_eq!(
        message(Zone::from_tzif(&raw.encode())),
        "tzif utoff must be between -89999 and 93599 seconds (RFC 8536), got 100000"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// Random bytes (with a TZif header half the time) never panic the parser.
    #[test]
    fn random_bytes_never_panic(
        header in any::<bool>(),
        version in prop_oneof![Just(0u8), Just(b'2'), Just(b'3'), any::<u8>()],
        counts in proptest::collection::vec(0u32..8, 6),
        body in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut bytes = Vec::new();
        if header {
            bytes.extend_from_slice(b"TZif");
            bytes.push(version);
            bytes.extend_from_slice(&[0; 15]);
            for c in &counts {
                bytes.extend_from_slice(&c.to_be_bytes());
            }
        }
        bytes.extend_from_slice(&body);
        if let Ok(zone) = Zone::from_tzif(&bytes) {
            exercise(zone);
        }
    }

    /// Real files with random bytes changed: a zone (whatever its offsets) or an error.
    #[test]
    fn mutated_files_never_panic(
        which in 0..NAMES.len(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        slimmed in any::<bool>(),
    ) {
        let mut bytes = read(NAMES[which]);
        if slimmed {
            bytes = slim(&bytes, SLIM_CUT_S);
        }
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        if let Ok(zone) = Zone::from_tzif(&bytes) {
            exercise(zone);
        }
    }

    /// Any TZ string in a footer: parsed or refused, never a panic; periods still tile.
    #[test]
    fn random_footers_never_panic(footer in "[A-Z<>+0-9:,./JM-]{0,40}") {
        let mut raw = Raw::parse(&read("Europe/Berlin"));
        raw.times.truncate(5);
        raw.indices.truncate(5);
        raw.footer = format!("\n{footer}\n").into_bytes();
        if let Ok(zone) = Zone::from_tzif(&raw.encode()) {
            exercise(zone);
        }
    }
}

/// Periods of a zone built from hostile bytes still contain their instant and tile time.
fn exercise(zone: Zone) {
    for period in [Period::Day, Period::Month { anchor_day: 31 }, Period::YEAR] {
        let calendar = Calendar::new(period, zone.clone()).unwrap();
        for t in [
            -(1 << 53),
            -1,
            0,
            1_700_000_000_000,
            4_000_000_000_000,
            1 << 53,
        ] {
            let (start, end) = calendar.period_at(t).unwrap();
            assert!(start <= t && t < end, "{period:?} {t}: {start}..{end}");
            if start > -(1 << 53) {
                assert_eq!(calendar.period_at(start - 1).unwrap().1, start);
            }
        }
    }
}

// ---- TZif files made from the system's: slim, version 1 alone ----

/// The 64-bit block and footer of a version 2+ file.
struct Raw {
    version: u8,
    times: Vec<i64>,
    indices: Vec<u8>,
    types: Vec<[u8; 6]>,
    chars: Vec<u8>,
    isstd: Vec<u8>,
    isut: Vec<u8>,
    footer: Vec<u8>,
}

fn counts(bytes: &[u8]) -> [usize; 6] {
    std::array::from_fn(|i| {
        u32::from_be_bytes(bytes[20 + 4 * i..24 + 4 * i].try_into().unwrap()) as usize
    })
}

fn v1_len(bytes: &[u8]) -> usize {
    let [isut, isstd, leap, time, ty, chars] = counts(bytes);
    44 + time * 5 + ty * 6 + chars + leap * 8 + isstd + isut
}

impl Raw {
    fn parse(bytes: &[u8]) -> Raw {
        let rest = &bytes[v1_len(bytes)..];
        let [isut, isstd, leap, time, ty, chars] = counts(rest);
        assert_eq!(leap, 0);
        let mut at = 44;
        let mut take = |n: usize| {
            let s = &rest[at..at + n];
            at += n;
            s.to_vec()
        };
        let times = take(time * 8)
            .chunks(8)
            .map(|c| i64::from_be_bytes(c.try_into().unwrap()))
            .collect();
        let indices = take(time);
        let types = take(ty * 6)
            .chunks(6)
            .map(|c| c.try_into().unwrap())
            .collect();
        let chars = take(chars);
        let isstd = take(isstd);
        let isut = take(isut);
        let footer = rest[at..].to_vec();
        Raw {
            version: bytes[4],
            times,
            indices,
            types,
            chars,
            isstd,
            isut,
            footer,
        }
    }

    /// A version 2+ file: a minimal version 1 block (one type), then this block and footer.
    fn encode(&self) -> Vec<u8> {
        let header = |out: &mut Vec<u8>, counts: [usize; 6]| {
            out.extend_from_slice(b"TZif");
            out.push(self.version);
            out.extend_from_slice(&[0; 15]);
            for c in counts {
                out.extend_from_slice(&(c as u32).to_be_bytes());
            }
        };
        let mut out = Vec::new();
        header(&mut out, [0, 0, 0, 0, 1, 1]);
        out.extend_from_slice(&self.types[0]);
        out.push(0);
        header(
            &mut out,
            [
                self.isut.len(),
                self.isstd.len(),
                0,
                self.times.len(),
                self.types.len(),
                self.chars.len(),
            ],
        );
        for t in &self.times {
            out.extend_from_slice(&t.to_be_bytes());
        }
        out.extend_from_slice(&self.indices);
        for ty in &self.types {
            out.extend_from_slice(ty);
        }
        out.extend_from_slice(&self.chars);
        out.extend_from_slice(&self.isstd);
        out.extend_from_slice(&self.isut);
        out.extend_from_slice(&self.footer);
        out
    }
}

/// The file with only its transitions before `cut_s`: the footer's rule takes over there.
fn slim(bytes: &[u8], cut_s: i64) -> Vec<u8> {
    let mut raw = Raw::parse(bytes);
    let keep = raw.times.partition_point(|&t| t < cut_s);
    raw.times.truncate(keep);
    raw.indices.truncate(keep);
    raw.encode()
}

/// The version 1 part alone, marked version 1 (32-bit transitions, no footer).
fn v1_only(bytes: &[u8]) -> Vec<u8> {
    let mut v1 = bytes[..v1_len(bytes)].to_vec();
    v1[4] = 0;
    v1
}

#[test]
fn made_files_are_what_they_say() {
    let berlin = read("Europe/Berlin");
    let slim = slim(&berlin, SLIM_CUT_S);
    assert_eq!(Raw::parse(&slim).times.len(), 143 - 38);
    let (fat_zone, slim_zone) = (
        Zone::from_tzif(&berlin).unwrap(),
        Zone::from_tzif(&slim).unwrap(),
    );
    assert_ne!(fat_zone, slim_zone);
    // The same offsets all the same, the footer's from 2019 on.
    for ms in (FROM_MS..TO_MS).step_by(3_600_000 * 97) {
        assert_eq!(fat_zone.offset_ms_at(ms), slim_zone.offset_ms_at(ms));
    }
    assert_eq!(
        Zone::from_tzif(&v1_only(&berlin))
            .unwrap()
            .offset_ms_at(FROM_MS),
        3_600_000
    );
}
