//! Token and cost limits for language-model APIs (OpenAI-compatible: chat completions,
//! completions, responses, embeddings), where a call's cost is known only from its answer.
//!
//! A gateway reads the request ([`request::read`]) for an upper bound of the prompt and the
//! output cap, clamps the cap to the room the limits leave ([`usage::Weights::cap_within`]),
//! rewrites the body with that cap ([`request::Request::rewrite`]), reserves the bound
//! ([`crate::reservation`]) and settles it for what the answer reports ([`usage::of_answer`],
//! or [`events::EventStream`] for `text/event-stream`). The cap makes the reservation an upper
//! bound of the call's usage, so no window ever holds more than its limit of actual usage.
//!
//! ```
//! use slidewin::llm::{request, usage::{Usage, Weights}, Endpoint};
//!
//! let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":500}"#;
//! let req = request::read(body, Endpoint::ChatCompletions, 1_000, None)?;
//! assert_eq!((req.cap, req.prompt_bound), (Some(500), body.len() as u64));
//! // 200 tokens of room: the prompt's bound takes 74, the output may take the rest.
//! let tokens = Weights::TOKENS;
//! let cap = tokens.cap_within(200, req.prompt_bound, req.choices).min(req.cap.unwrap());
//! assert_eq!(cap, 126);
//! let rewritten = req.rewrite(body, cap, false);
//! assert!(rewritten.ends_with(br#""max_tokens":126}"#));
//! // The answer reports 9 + 30 tokens: the reservation of 200 is settled for 39.
//! let used = Usage { input: 9, cached: 0, output: 30 };
//! assert_eq!((tokens.bound(req.prompt_bound, cap, 1), tokens.cost(used)), (200, 39));
//! # Ok::<(), slidewin::llm::BadBody>(())
//! ```

pub mod events;
pub mod prompt;
pub mod request;
pub mod tokens;
pub mod usage;

use alloc::string::String;
use core::fmt;

/// The API a request is for: which fields cap its output and how its usage is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`: `max_completion_tokens` or `max_tokens`, `n` choices.
    ChatCompletions,
    /// `/v1/completions`: `max_tokens`, `n` and `best_of` choices.
    Completions,
    /// `/v1/responses`: `max_output_tokens`.
    Responses,
    /// `/v1/embeddings`: no output tokens.
    Embeddings,
}

impl Endpoint {
    /// The endpoint of a name: `chat`, `completions`, `responses` or `embeddings`.
    pub fn from_name(name: &str) -> Option<Endpoint> {
        Some(match name {
            "chat" => Endpoint::ChatCompletions,
            "completions" => Endpoint::Completions,
            "responses" => Endpoint::Responses,
            "embeddings" => Endpoint::Embeddings,
            _ => return None,
        })
    }

    /// The fields that cap the output, the one written when a request has none first.
    pub(crate) fn cap_fields(self) -> &'static [&'static str] {
        match self {
            Endpoint::ChatCompletions => &["max_tokens", "max_completion_tokens"],
            Endpoint::Completions => &["max_tokens"],
            Endpoint::Responses => &["max_output_tokens"],
            Endpoint::Embeddings => &[],
        }
    }

    /// The fields that multiply the output (choices generated per call).
    pub(crate) fn choice_fields(self) -> &'static [&'static str] {
        match self {
            Endpoint::ChatCompletions => &["n"],
            Endpoint::Completions => &["n", "best_of"],
            Endpoint::Responses | Endpoint::Embeddings => &[],
        }
    }

    /// Whether a stream reports its usage only when asked (`stream_options.include_usage`).
    pub(crate) fn usage_on_request(self) -> bool {
        matches!(self, Endpoint::ChatCompletions | Endpoint::Completions)
    }
}

/// A request body the layer refuses (an HTTP 400), with what is wrong in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadBody(pub String);

impl fmt::Display for BadBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
