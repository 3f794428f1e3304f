//! The prompt's bound with a tokenizer table: the text's exact tokens, the chat format's
//! tokens bounded from above, and the rest of the body by its bytes.
//!
//! - each string of the prompt is counted with the table: `messages`' `role`, `name` and
//!   `content` (a string, or the `text` of each part), and `input`, `prompt` and
//!   `instructions` (a string, a list of strings, or a list of messages);
//! - each message adds [`PER_MESSAGE`] tokens, each name [`PER_NAME`], and a list of
//!   messages [`REPLY`] (the assistant's reply primed): at least what OpenAI's cookbook
//!   counts ("How to count tokens with tiktoken": 3 per message, 1 per name, 3 for the
//!   reply; 4 per message for gpt-3.5-turbo-0301). The responses endpoint makes messages
//!   of text too: there `instructions` and each string of `input` add [`PER_MESSAGE`], and
//!   `input` adds [`REPLY`]; completions and embeddings add nothing to their text;
//! - each image, audio or file part adds `media_tokens`, as in the byte bound;
//! - what else the provider reads into the prompt and is not tokenized here (`tools`,
//!   `functions`, `response_format`, `tool_choice`, a message's `tool_calls`, a part that is
//!   neither text nor media, token ids given as numbers...) adds its JSON's bytes, and
//!   `media_tokens` for each media part in it: the byte bound's argument, a token being at
//!   least one byte, and the JSON's quotes, colons and commas outnumbering the format's
//!   tokens;
//! - settings the provider does not read as prompt ([`SETTINGS`]) add nothing.
//!
//! The text parts of one message are counted each on its own: a provider that joins them
//! into one text may count a few tokens more or less at each join (BPE merges across it).
//! The bound assumes the provider's table is the one given: with another, it is no bound.

use alloc::string::String;

use serde_json::value::RawValue;
use serde_json::Value;

use super::request::{is_media, media_parts};
use super::tokens::{Counter, Tokenizer};
use super::Endpoint;

/// Tokens a chat format adds per message, at least (the cookbook's 3, or 4 for older models).
pub const PER_MESSAGE: u64 = 4;
/// Tokens a message's `name` adds besides its own, at least (the cookbook's 1).
pub const PER_NAME: u64 = 1;
/// Tokens that prime the reply after a list of messages, at least (the cookbook's 3).
pub const REPLY: u64 = 3;

/// Members that set how the call runs and are not part of the prompt.
pub const SETTINGS: [&str; 20] = [
    "model",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "n",
    "best_of",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "seed",
    "user",
    "presence_penalty",
    "frequency_penalty",
    "logprobs",
    "top_logprobs",
    "store",
    "parallel_tool_calls",
    "encoding_format",
    "dimensions",
];

/// The members whose strings are tokenized.
const TEXT: [&str; 4] = ["messages", "input", "prompt", "instructions"];

/// The bound of a body to `endpoint` whose top-level `members` are given, those of [`TEXT`]
/// parsed in `parsed` (other members there are counted by their bytes all the same).
pub(crate) fn bound(
    members: &[(String, &RawValue)],
    parsed: &[(&str, Value)],
    endpoint: Endpoint,
    tokenizer: &Tokenizer,
    media_tokens: u64,
) -> u64 {
    let mut b = Bound {
        counter: tokenizer.counter(),
        media_tokens,
        // Text made a message by the endpoint: its format's tokens per text.
        per_text: match endpoint {
            Endpoint::Responses => PER_MESSAGE,
            _ => 0,
        },
    };
    let mut total = 0u64;
    for (name, raw) in members {
        let text = parsed.iter().find(|(n, _)| n == name && TEXT.contains(n));
        let counted = match text {
            Some((_, value)) if name == "messages" => match value {
                Value::Array(messages) => {
                    let all = messages.iter().map(|m| b.message(m));
                    all.fold(REPLY, u64::saturating_add)
                }
                other => b.bytes(other),
            },
            Some((_, value)) if name == "input" && b.per_text > 0 => {
                b.input(value).saturating_add(REPLY)
            }
            Some((_, value)) => b.input(value),
            None if SETTINGS.contains(&name.as_str()) => 0,
            // The member's name, quotes, colon and comma with its value.
            None => (name.len() + raw.get().len() + 4) as u64,
        };
        total = total.saturating_add(counted);
    }
    total
}

struct Bound<'t> {
    counter: Counter<'t>,
    media_tokens: u64,
    per_text: u64,
}

impl Bound<'_> {
    /// `input`, `prompt` or `instructions`: text, a list of texts, or a list of messages.
    fn input(&mut self, value: &Value) -> u64 {
        match value {
            Value::String(s) => self.text(s).saturating_add(self.per_text),
            Value::Array(items) => items.iter().fold(0u64, |sum, item| {
                let counted = match item {
                    Value::String(s) => self.text(s).saturating_add(self.per_text),
                    Value::Object(_) => self.message(item),
                    other => self.bytes(other),
                };
                sum.saturating_add(counted)
            }),
            other => self.bytes(other),
        }
    }

    fn message(&mut self, message: &Value) -> u64 {
        let Value::Object(members) = message else {
            return self.bytes(message);
        };
        members.iter().fold(PER_MESSAGE, |sum, (name, value)| {
            let counted = match (name.as_str(), value) {
                ("role", Value::String(s)) => self.text(s),
                ("name", Value::String(s)) => self.text(s).saturating_add(PER_NAME),
                ("content", _) => self.content(value),
                _ => self.member(name, value),
            };
            sum.saturating_add(counted)
        })
    }

    /// A message's content: text, or a list of parts.
    fn content(&mut self, content: &Value) -> u64 {
        match content {
            Value::Null => 0,
            Value::String(s) => self.text(s),
            Value::Array(parts) => parts.iter().fold(0u64, |sum, part| {
                let counted = match part {
                    part if is_media(part) => self.media_tokens,
                    Value::Object(o) => o.iter().fold(0u64, |sum, (name, value)| {
                        let counted = match (name.as_str(), value) {
                            ("type", Value::String(_)) => 0,
                            ("text", Value::String(s)) => self.text(s),
                            _ => self.member(name, value),
                        };
                        sum.saturating_add(counted)
                    }),
                    other => self.bytes(other),
                };
                sum.saturating_add(counted)
            }),
            other => self.bytes(other),
        }
    }

    fn text(&mut self, text: &str) -> u64 {
        self.counter.count(text)
    }

    /// A member not tokenized: its name and value as JSON (quotes, colon, comma).
    fn member(&self, name: &str, value: &Value) -> u64 {
        (name.len() as u64 + 4).saturating_add(self.bytes(value))
    }

    /// A value not tokenized: its JSON's bytes, and `media_tokens` per media part in it.
    fn bytes(&self, value: &Value) -> u64 {
        let json = serde_json::to_string(value).map_or(0, |s| s.len() as u64);
        json.saturating_add(media_parts(value).saturating_mul(self.media_tokens))
    }
}
