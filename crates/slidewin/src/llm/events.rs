//! An answer of `text/event-stream`: its usage read as the events pass, and the usage event
//! the layer asked for taken out again when the client did not ask for it.
//!
//! Chat completions and completions report usage in a last event whose `choices` are empty
//! (`stream_options.include_usage`), responses in its `response.completed` event. Events pass
//! whole (a client reads an event at its blank line, so holding its first lines delays
//! nothing); only events with a `"usage": {` are read as JSON. An event longer than
//! [`LONGEST`] passes unread.

use alloc::vec::Vec;

use serde_json::Value;

use super::usage::Usage;

/// The longest event kept to be read: longer ones pass as they come.
pub const LONGEST: usize = 1 << 20;

/// The events of one answer, read as they pass.
#[derive(Debug)]
pub struct EventStream {
    strip_usage: bool,
    /// Finds `"usage"` (made once: a finder's setup costs more than a short event's scan).
    usage_key: memchr::memmem::Finder<'static>,
    /// Bytes of the event not yet ended.
    pending: Vec<u8>,
    /// The last two bytes of the event not yet ended (held or passed), for a blank line that
    /// lies across two chunks.
    tail: [u8; 2],
    /// Passing an over-long event's bytes until it ends.
    passing: bool,
    usage: Option<Usage>,
}

impl EventStream {
    /// A stream; with `strip_usage`, the chat usage event (empty `choices`) does not pass.
    pub fn new(strip_usage: bool) -> EventStream {
        EventStream {
            strip_usage,
            usage_key: memchr::memmem::Finder::new(USAGE_KEY),
            pending: Vec::new(),
            tail: [0; 2],
            passing: false,
            usage: None,
        }
    }

    /// Reads `chunk`; appends to `out` the bytes to pass on now. Events that start and end
    /// in the chunk are read where they lie; only one begun in an earlier chunk is copied.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let mut start = 0;
        if self.passing || !self.pending.is_empty() {
            let Some(end) = across(self.tail, chunk).or_else(|| event_end(chunk, 0)) else {
                return self.keep(chunk, out);
            };
            if core::mem::take(&mut self.passing) {
                out.extend_from_slice(&chunk[..end]);
            } else {
                let mut event = core::mem::take(&mut self.pending);
                event.extend_from_slice(&chunk[..end]);
                self.read(&event, out);
            }
            start = end;
        }
        while let Some(end) = event_end(chunk, start) {
            self.read(&chunk[start..end], out);
            start = end;
        }
        self.keep(&chunk[start..], out);
    }

    /// Keeps bytes of an event not yet ended, or passes them once it is over-long.
    fn keep(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        // A new event has no bytes before it.
        let before = if self.passing || !self.pending.is_empty() {
            self.tail[1]
        } else {
            0
        };
        self.tail = match bytes {
            [.., a, b] => [*a, *b],
            [b] => [before, *b],
            [] => self.tail,
        };
        if self.passing || self.pending.len() + bytes.len() > LONGEST {
            self.passing = true;
            out.append(&mut self.pending);
            out.extend_from_slice(bytes);
        } else {
            self.pending.extend_from_slice(bytes);
        }
    }

    /// The answer ended: appends to `out` what is left (an event the stream did not end).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        // An over-long event has passed already; what is held is an event the stream cut.
        self.passing = false;
        let rest = core::mem::take(&mut self.pending);
        if !rest.is_empty() {
            self.read(&rest, out);
        }
    }

    /// The usage the stream reported, if it has.
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    fn read(&mut self, event: &[u8], out: &mut Vec<u8>) {
        if has_usage_object(&self.usage_key, event) {
            if let Some(value) =
                data_of(event).and_then(|d| serde_json::from_slice::<Value>(&d).ok())
            {
                let usage = value
                    .get("usage")
                    .or_else(|| value.get("response").and_then(|r| r.get("usage")))
                    .and_then(Usage::of);
                if usage.is_some() {
                    self.usage = usage;
                    let choices = value.get("choices").and_then(Value::as_array);
                    if self.strip_usage && choices.is_some_and(|c| c.is_empty()) {
                        return;
                    }
                }
            }
        }
        out.extend_from_slice(event);
    }
}

/// Where the event in `bytes` ends (after its blank line), searching from `from`.
fn event_end(bytes: &[u8], from: usize) -> Option<usize> {
    memchr::memchr_iter(b'\n', &bytes[from..]).find_map(|nl| {
        let rest = &bytes[from + nl + 1..];
        match rest {
            [b'\n', ..] => Some(from + nl + 2),
            [b'\r', b'\n', ..] => Some(from + nl + 3),
            _ => None,
        }
    })
}

/// Where in `chunk` an event ends whose blank line began in the bytes before it (their last
/// two: `tail`).
fn across(tail: [u8; 2], chunk: &[u8]) -> Option<usize> {
    match (tail, chunk) {
        ([_, b'\n'], [b'\n', ..]) | ([b'\n', b'\r'], [b'\n', ..]) => Some(1),
        ([_, b'\n'], [b'\r', b'\n', ..]) => Some(2),
        _ => None,
    }
}

const USAGE_KEY: &[u8] = b"\"usage\"";

/// Whether the bytes hold `"usage"` followed by an object (not the `null` of other chunks).
fn has_usage_object(key: &memchr::memmem::Finder<'_>, bytes: &[u8]) -> bool {
    key.find_iter(bytes).any(|at| {
        let rest = &bytes[at + USAGE_KEY.len()..];
        let value = rest
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b':' | b'\r' | b'\n'));
        value.is_some_and(|i| rest[i] == b'{')
    })
}

/// The event's data: its `data:` lines' values joined by newlines.
fn data_of(event: &[u8]) -> Option<Vec<u8>> {
    let mut data: Option<Vec<u8>> = None;
    for line in event.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(value) = line.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            match data.as_mut() {
                Some(d) => {
                    d.push(b'\n');
                    d.extend_from_slice(value);
                }
                None => data = Some(value.to_vec()),
            }
        }
    }
    data
}
