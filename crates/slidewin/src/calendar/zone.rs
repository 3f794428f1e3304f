//! [`Zone`]: a time zone's rules read from TZif bytes (RFC 8536).

use super::posix::Posix;
use crate::{Error, Value};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// The widest offsets accepted, RFC 8536's bounds for `utoff`: -25 h + 1 s to +26 h - 1 s.
const MIN_OFFSET_S: i32 = -89_999;
const MAX_OFFSET_S: i32 = 93_599;

/// A time zone's rules: its offset from UTC at every instant.
///
/// Built from the bytes of a TZif file ([`Zone::from_tzif`], any version 1 to 4), from the
/// system's database ([`Zone::from_system`], feature `std`), or [`Zone::utc`]. Instants up to
/// the file's last transition take its 64-bit transitions (version 2 and later; a version 1
/// file its 32-bit ones); later instants take the footer's POSIX TZ string (a version 1 file,
/// which has none, keeps its last offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// Transitions in strictly ascending order: (instant in ms, offset in seconds from then).
    transitions: Vec<(i64, i32)>,
    /// The offset before the first transition (the file's time type 0).
    initial: i32,
    /// The footer's rule, for instants at and after the last transition (all instants when
    /// there is no transition).
    rule: Option<Posix>,
}

impl Zone {
    /// Coordinated Universal Time: offset 0 at every instant.
    pub fn utc() -> Zone {
        Zone {
            transitions: Vec::new(),
            initial: 0,
            rule: None,
        }
    }

    /// A zone from the bytes of a TZif file (RFC 8536, versions 1 to 4, as in
    /// `/usr/share/zoneinfo`). Any bytes give either a zone or an error naming `tzif` (or
    /// `tzif footer`) and what was wrong; no input panics.
    ///
    /// ```
    /// use slidewin::calendar::Zone;
    /// let e = Zone::from_tzif(b"GIF89a, not a zone at all, but long enough for a header").unwrap_err();
    /// assert_eq!(
    ///     e.to_string(),
    ///     "tzif must be TZif data (RFC 8536) starting with \"TZif\", got \"GIF8\""
    /// );
    /// ```
    pub fn from_tzif(bytes: &[u8]) -> Result<Zone, Error> {
        let v1 = Header::read(bytes)?;
        if v1.version == 0 {
            let (zone, _) = Block::parse(bytes, 0, &v1, 4)?;
            return Ok(zone);
        }
        // Version 2+: skip the 32-bit block, read the 64-bit one and the footer.
        let v1_end = HEADER_LEN as u64 + v1.block_len(4);
        let rest = usize::try_from(v1_end)
            .ok()
            .and_then(|at| bytes.get(at..))
            .ok_or_else(|| truncated(bytes.len() as u64, v1_end))?;
        let v2 = Header::read(rest)?;
        let (mut zone, footer) = Block::parse(rest, bytes.len() - rest.len(), &v2, 8)?;
        zone.rule = footer_rule(footer)?;
        Ok(zone)
    }

    /// The zone named `name` (`Europe/Berlin`) in the system's database, read from
    /// `/usr/share/zoneinfo/<name>` now. A name with `..`, a leading `/` or a NUL is refused
    /// before any file is opened.
    #[cfg(feature = "std")]
    pub fn from_system(name: &str) -> Result<Zone, Error> {
        if name.is_empty() || name.starts_with('/') || name.contains("..") || name.contains('\0') {
            return Err(Error::malformed(
                "zone",
                "a name in /usr/share/zoneinfo like \"Europe/Berlin\" (no \"..\", no leading \
                 \"/\")",
                format!("{name:?}"),
            ));
        }
        let path = std::path::Path::new("/usr/share/zoneinfo").join(name);
        let bytes = std::fs::read(&path).map_err(|e| {
            Error::malformed(
                "zone",
                "a zone of /usr/share/zoneinfo like \"Europe/Berlin\"",
                format!("{name:?} ({e})"),
            )
        })?;
        Zone::from_tzif(&bytes)
    }

    /// The zone's offset from UTC at `instant_ms`, in milliseconds (`3_600_000` for
    /// Europe/Berlin in winter).
    pub fn offset_ms_at(&self, instant_ms: i64) -> i64 {
        i64::from(self.segment(instant_ms).0) * 1_000
    }

    /// The offset (seconds) in effect at `t_ms`, and the next instant it may change at.
    fn segment(&self, t_ms: i64) -> (i32, Option<i64>) {
        let i = self.transitions.partition_point(|&(at, _)| at <= t_ms);
        match (&self.rule, i) {
            (Some(rule), i) if i == self.transitions.len() => rule.segment(t_ms),
            (_, 0) => (self.initial, self.transitions.first().map(|t| t.0)),
            _ => (
                self.transitions[i - 1].1,
                self.transitions.get(i).map(|t| t.0),
            ),
        }
    }

    /// The first instant whose local time is `local_ms` or later: local midnight when it
    /// exists, the end of the gap when the clocks jump over it, the first of two when they
    /// go back over it. `local_ms` within ±(2^53 ms + a year).
    pub(crate) fn first_at_or_after(&self, local_ms: i64) -> i64 {
        // local(t) = t + offset(t): no instant before local_ms - MAX_OFFSET has a local time
        // of local_ms or later, every one from local_ms - MIN_OFFSET has. Walk the offsets'
        // segments from there; each step reaches a later change, so the walk ends.
        let mut t = local_ms - i64::from(MAX_OFFSET_S) * 1_000 - 1_000;
        loop {
            let (offset, next) = self.segment(t);
            let candidate = t.max(local_ms - i64::from(offset) * 1_000);
            match next {
                Some(change) if candidate >= change => t = change,
                _ => return candidate,
            }
        }
    }
}

const HEADER_LEN: usize = 44;

/// The counts of one TZif header.
struct Header {
    version: u8,
    isutcnt: u32,
    isstdcnt: u32,
    leapcnt: u32,
    timecnt: u32,
    typecnt: u32,
    charcnt: u32,
}

impl Header {
    fn read(bytes: &[u8]) -> Result<Header, Error> {
        let Some(head) = bytes.get(..HEADER_LEN) else {
            return Err(Error::invalid(
                "tzif",
                "TZif data at least as long as its 44-byte header (RFC 8536), in bytes",
                Value::UInt(bytes.len() as u64),
            ));
        };
        if &head[..4] != b"TZif" {
            return Err(Error::malformed(
                "tzif",
                "TZif data (RFC 8536) starting with \"TZif\"",
                format!("{:?}", String::from_utf8_lossy(&head[..4])),
            ));
        }
        let version = match head[4] {
            0 => 0,
            v @ b'2'..=b'4' => v - b'0',
            v => {
                return Err(Error::invalid(
                    "tzif version",
                    "0, '2', '3' or '4' (bytes 0, 50, 51, 52)",
                    Value::UInt(v.into()),
                ))
            }
        };
        let count = |i: usize| {
            let at = 20 + 4 * i;
            u32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]])
        };
        let header = Header {
            version,
            isutcnt: count(0),
            isstdcnt: count(1),
            leapcnt: count(2),
            timecnt: count(3),
            typecnt: count(4),
            charcnt: count(5),
        };
        if header.typecnt == 0 {
            return Err(Error::invalid("tzif typecnt", "at least 1", Value::UInt(0)));
        }
        for (name, n) in [
            ("tzif isutcnt", header.isutcnt),
            ("tzif isstdcnt", header.isstdcnt),
        ] {
            if n != 0 && n != header.typecnt {
                return Err(Error::invalid(name, "0 or typecnt", Value::UInt(n.into())));
            }
        }
        if header.leapcnt != 0 {
            return Err(Error::invalid(
                "tzif leapcnt",
                "0 (a zone without leap seconds, not one of zoneinfo's \"right/\")",
                Value::UInt(header.leapcnt.into()),
            ));
        }
        Ok(header)
    }

    /// Bytes of the data block after the header, with `time_len`-byte times.
    fn block_len(&self, time_len: u64) -> u64 {
        u64::from(self.timecnt) * (time_len + 1)
            + u64::from(self.typecnt) * 6
            + u64::from(self.charcnt)
            + u64::from(self.leapcnt) * (time_len + 4)
            + u64::from(self.isstdcnt)
            + u64::from(self.isutcnt)
    }
}

fn truncated(len: u64, needed: u64) -> Error {
    Error::malformed(
        "tzif",
        "as long as its header's counts say (RFC 8536)",
        format!("{len} bytes where they need {needed}: a truncated file?"),
    )
}

struct Block;

impl Block {
    /// The zone of the data block after `header` at the start of `bytes` (`skipped` bytes
    /// into the file), and the bytes after the block.
    fn parse<'a>(
        bytes: &'a [u8],
        skipped: usize,
        header: &Header,
        time_len: usize,
    ) -> Result<(Zone, &'a [u8]), Error> {
        let needed = HEADER_LEN as u64 + header.block_len(time_len as u64);
        let end = usize::try_from(needed)
            .ok()
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| {
                let skipped = skipped as u64;
                truncated(skipped + bytes.len() as u64, skipped + needed)
            })?;
        // In range: the block's length was checked above.
        let timecnt = header.timecnt as usize;
        let typecnt = header.typecnt as usize;
        let times = &bytes[HEADER_LEN..HEADER_LEN + timecnt * time_len];
        let indices = &bytes[HEADER_LEN + timecnt * time_len..][..timecnt];
        let types = &bytes[HEADER_LEN + timecnt * (time_len + 1)..][..typecnt * 6];

        let mut offsets = Vec::with_capacity(typecnt);
        for ty in types.chunks_exact(6) {
            let utoff = i32::from_be_bytes([ty[0], ty[1], ty[2], ty[3]]);
            if !(MIN_OFFSET_S..=MAX_OFFSET_S).contains(&utoff) {
                return Err(Error::invalid(
                    "tzif utoff",
                    "between -89999 and 93599 seconds (RFC 8536)",
                    Value::Int(utoff.into()),
                ));
            }
            offsets.push(utoff);
        }
        let mut transitions = Vec::with_capacity(timecnt);
        let mut previous: Option<i64> = None;
        for (time, &index) in times.chunks_exact(time_len).zip(indices) {
            let seconds = match *time {
                [a, b, c, d] => i64::from(i32::from_be_bytes([a, b, c, d])),
                [a, b, c, d, e, f, g, h] => i64::from_be_bytes([a, b, c, d, e, f, g, h]),
                _ => 0,
            };
            if let Some(before) = previous.filter(|&before| seconds <= before) {
                return Err(Error::malformed(
                    "tzif transition times",
                    "in strictly ascending order (RFC 8536)",
                    format!("{seconds} after {before}"),
                ));
            }
            previous = Some(seconds);
            let Some(&offset) = offsets.get(usize::from(index)) else {
                return Err(Error::malformed(
                    "tzif transition types",
                    "indices of the file's local time types",
                    format!("{index} of {typecnt} types"),
                ));
            };
            transitions.push((seconds.saturating_mul(1_000), offset));
        }
        let zone = Zone {
            transitions,
            initial: offsets[0],
            rule: None,
        };
        Ok((zone, &bytes[end..]))
    }
}

/// The rule of a version 2+ footer: `\n<TZ string>\n`, an empty string for none.
fn footer_rule(footer: &[u8]) -> Result<Option<Posix>, Error> {
    let text = footer
        .strip_prefix(b"\n")
        .and_then(|rest| {
            rest.iter()
                .position(|&b| b == b'\n')
                .map(|end| &rest[..end])
        })
        .ok_or_else(|| {
            let shown = &footer[..footer.len().min(40)];
            Error::malformed(
                "tzif footer",
                "a POSIX TZ string between two newlines (RFC 8536 3.3)",
                format!("{:?}", String::from_utf8_lossy(shown)),
            )
        })?;
    if text.is_empty() {
        return Ok(None);
    }
    Posix::parse(text).map(Some)
}
