//! A request's body: its bound of prompt tokens, its output cap, and the body again with the
//! cap the limits leave.
//!
//! **The prompt's bound**, without a tokenizer table, is the body's length in bytes, plus
//! `media_tokens` for each image, audio or file part. Tokenizers of these APIs (byte-level
//! BPE) make every token of at least one byte, and the JSON around each message (`{"role":"user","content":""}`) is longer than
//! the few tokens a chat format adds per message, so a text prompt never has more tokens than
//! its body has bytes. Media parts are priced by the provider (an image by its tiles), not by
//! their bytes: `media_tokens` must be at least what one costs. With a table
//! ([`Tokenizer`]), the prompt's text is counted exactly and the rest bounded: see
//! [`prompt`], closer by the text's bytes per token (about 4 for English prose).
//!
//! Bodies are read strictly: UTF-8 JSON with an object at the top, no member twice (which of
//! two `max_tokens` would the upstream read?), `model` a string, caps and choice counts
//! integers in range, `stream` a boolean. Anything else is a [`BadBody`] naming what is wrong.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::tokens::Tokenizer;
use super::{prompt, BadBody, Endpoint};

/// The largest output cap or choice count a request may carry (2^53: exact in every binding).
pub const MOST: u64 = 1 << 53;

/// What the limits need of a request, and its members to write it again.
#[derive(Debug)]
pub struct Request {
    /// The model asked for.
    pub model: String,
    /// The output cap the client asked for (the smallest when it gave several); `None`: the
    /// provider's own.
    pub cap: Option<u64>,
    /// How many outputs one call generates (`n`, `best_of`), each up to the cap.
    pub choices: u64,
    /// Whether the answer is a stream of events.
    pub stream: bool,
    /// Whether the client asked a stream to report its usage (`stream_options.include_usage`).
    pub wants_usage: bool,
    /// An upper bound of the prompt's tokens.
    pub prompt_bound: u64,
    endpoint: Endpoint,
    /// The top-level members in order: each name and where its value lies in the body.
    members: Vec<(String, Range<usize>)>,
}

/// Reads a request to `endpoint`; `media_tokens`: the tokens one media part may cost;
/// `tokenizer`: the table that counts the prompt's text (`None`: the bound is the bytes).
pub fn read(
    body: &[u8],
    endpoint: Endpoint,
    media_tokens: u64,
    tokenizer: Option<&Tokenizer>,
) -> Result<Request, BadBody> {
    let text = core::str::from_utf8(body).map_err(|e| {
        BadBody(format!(
            "body must be UTF-8: invalid byte at {}",
            e.valid_up_to()
        ))
    })?;
    let mut de = serde_json::Deserializer::from_str(text);
    // Nothing but whitespace after the object.
    let members = de
        .deserialize_map(Members)
        .and_then(|m| de.end().map(|()| m))
        .map_err(|e| BadBody(format!("body must be a JSON object: {e}")))?;
    for (i, (name, _)) in members.iter().enumerate() {
        if members[..i].iter().any(|(n, _)| n == name) {
            return Err(BadBody(format!("body has member {name} twice")));
        }
    }
    let find = |name: &str| members.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    let model = match find("model").map(parse::<Value>) {
        Some(Ok(Value::String(model))) if !model.is_empty() => model,
        Some(v) => {
            return Err(BadBody(format!(
                "model must be a non-empty string, got {}",
                shown(v)
            )))
        }
        None => return Err(BadBody("model is missing".to_owned())),
    };
    let mut cap = None;
    for name in endpoint.cap_fields() {
        if let Some(v) = find(name) {
            let n = count(name, v, 0)?;
            cap = Some(cap.map_or(n, |c: u64| c.min(n)));
        }
    }
    let mut choices = 1;
    for name in endpoint.choice_fields() {
        if let Some(v) = find(name) {
            choices = choices.max(count(name, v, 1)?);
        }
    }
    let stream = match find("stream").map(parse::<Value>) {
        None | Some(Ok(Value::Null)) => false,
        Some(Ok(Value::Bool(b))) => b,
        Some(v) => {
            return Err(BadBody(format!(
                "stream must be a boolean, got {}",
                shown(v)
            )))
        }
    };
    let wants_usage = match find("stream_options").map(parse::<Value>) {
        None | Some(Ok(Value::Null)) => false,
        Some(Ok(Value::Object(o))) => o.get("include_usage") == Some(&Value::Bool(true)),
        Some(v) => {
            return Err(BadBody(format!(
                "stream_options must be an object, got {}",
                shown(v)
            )))
        }
    };
    let mut parsed = Vec::new();
    for name in ["messages", "input", "prompt", "instructions", "tools"] {
        if let Some(v) = find(name) {
            let value = parse::<Value>(v).map_err(|e| BadBody(format!("{name}: {e}")))?;
            parsed.push((name, value));
        }
    }
    let prompt_bound = match tokenizer {
        Some(table) => prompt::bound(&members, &parsed, endpoint, table, media_tokens),
        None => {
            let media: u64 = parsed.iter().map(|(_, v)| media_parts(v)).sum();
            (body.len() as u64).saturating_add(media.saturating_mul(media_tokens))
        }
    };
    let at = |raw: &RawValue| {
        let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
        start..start + raw.get().len()
    };
    let members = members
        .into_iter()
        .map(|(name, raw)| (name, at(raw)))
        .collect();
    Ok(Request {
        model,
        cap,
        choices,
        stream,
        wants_usage,
        prompt_bound,
        endpoint,
        members,
    })
}

impl Request {
    /// The body read (`body`) again with every output cap set to `cap` (the endpoint's first
    /// cap field when the client gave none) and, with `ask_usage`, a stream asked to report
    /// its usage. Members keep their order and bytes; only those written change.
    pub fn rewrite(&self, body: &[u8], cap: u64, ask_usage: bool) -> Vec<u8> {
        let fields = self.endpoint.cap_fields();
        let mut out = Vec::with_capacity(body.len() + 64);
        out.push(b'{');
        let mut wrote_cap = false;
        let mut wrote_usage = false;
        for (name, at) in &self.members {
            let raw = &body[at.clone()];
            if fields.contains(&name.as_str()) {
                wrote_cap = true;
                member(&mut out, name, format!("{cap}").as_bytes());
            } else if ask_usage && name == "stream_options" {
                wrote_usage = true;
                member(&mut out, name, with_usage(raw).as_bytes());
            } else {
                member(&mut out, name, raw);
            }
        }
        if let (false, Some(first)) = (wrote_cap, fields.first()) {
            member(&mut out, first, format!("{cap}").as_bytes());
        }
        if ask_usage && !wrote_usage {
            member(&mut out, "stream_options", br#"{"include_usage":true}"#);
        }
        out.push(b'}');
        out
    }

    /// Whether the layer must ask the stream for its usage (and strip it from the answer
    /// again: the client did not ask).
    pub fn asks_usage(&self) -> bool {
        self.stream && !self.wants_usage && self.endpoint.usage_on_request()
    }
}

fn member(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    if out.len() > 1 {
        out.push(b',');
    }
    let quoted = serde_json::to_string(name).unwrap_or_default();
    out.extend_from_slice(quoted.as_bytes());
    out.push(b':');
    out.extend_from_slice(value);
}

/// `stream_options` (an object: read checked it) with `include_usage` set.
fn with_usage(raw: &[u8]) -> String {
    let mut options: serde_json::Map<String, Value> =
        serde_json::from_slice(raw).unwrap_or_default();
    options.insert("include_usage".to_owned(), Value::Bool(true));
    serde_json::to_string(&options).unwrap_or_default()
}

/// An integer member from `least` to [`MOST`].
fn count(name: &str, raw: &RawValue, least: u64) -> Result<u64, BadBody> {
    match parse::<Value>(raw) {
        Ok(Value::Number(n)) => match n.as_u64() {
            Some(v) if (least..=MOST).contains(&v) => Ok(v),
            _ => Err(BadBody(format!(
                "{name} must be an integer from {least} to {MOST}, got {}",
                raw.get()
            ))),
        },
        v => Err(BadBody(format!(
            "{name} must be an integer from {least} to {MOST}, got {}",
            shown(v)
        ))),
    }
}

fn parse<T: serde::de::DeserializeOwned>(raw: &RawValue) -> serde_json::Result<T> {
    serde_json::from_str(raw.get())
}

/// A value in an error message, cut short.
fn shown(v: Result<Value, serde_json::Error>) -> String {
    let text = match v {
        Ok(v) => serde_json::to_string(&v).unwrap_or_default(),
        Err(e) => format!("{e}"),
    };
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    }
}

/// Whether `value` is a part that is not text: an image, audio, a file.
pub(crate) fn is_media(value: &Value) -> bool {
    const MEDIA: [&str; 7] = [
        "image_url",
        "input_image",
        "image",
        "input_audio",
        "audio",
        "file",
        "input_file",
    ];
    value
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| MEDIA.contains(&t))
}

/// Parts of `value`, itself or within, that are not text.
pub(crate) fn media_parts(value: &Value) -> u64 {
    match value {
        Value::Array(items) => items.iter().map(media_parts).sum(),
        Value::Object(o) => u64::from(is_media(value)) + o.values().map(media_parts).sum::<u64>(),
        _ => 0,
    }
}

/// The top-level object's members in order, each value's bytes as they came.
struct Members;

impl<'de> Visitor<'de> for Members {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some(entry) = map.next_entry::<String, &RawValue>()? {
            members.push(entry);
        }
        Ok(members)
    }
}
