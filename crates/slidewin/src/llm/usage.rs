//! What a call used, as its answer reports it, and what that costs under a rule.

use serde_json::Value;

use crate::{Error, Value as Arg};

/// Tokens a call used, from its answer's `usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens (`prompt_tokens`, `input_tokens`), the cached ones included.
    pub input: u64,
    /// Of those, tokens read from the provider's prompt cache (`cached_tokens`).
    pub cached: u64,
    /// Generated tokens, reasoning included (`completion_tokens`, `output_tokens`).
    pub output: u64,
}

impl Usage {
    /// The usage in a `usage` object of either shape (chat completions and embeddings:
    /// `prompt_tokens`; responses: `input_tokens`); `None` when it has no prompt count or a
    /// count is not a non-negative integer.
    pub fn of(usage: &Value) -> Option<Usage> {
        let count = |name: &str| match usage.get(name) {
            None | Some(Value::Null) => Some(0),
            Some(v) => v.as_u64(),
        };
        let cached = |details: &str| match usage.get(details).and_then(|d| d.get("cached_tokens")) {
            None | Some(Value::Null) => Some(0),
            Some(v) => v.as_u64(),
        };
        let (input, cached, output) = if usage.get("input_tokens").is_some() {
            (
                count("input_tokens")?,
                cached("input_tokens_details")?,
                count("output_tokens")?,
            )
        } else {
            usage.get("prompt_tokens")?;
            (
                count("prompt_tokens")?,
                cached("prompt_tokens_details")?,
                count("completion_tokens")?,
            )
        };
        Some(Usage {
            input,
            cached: cached.min(input),
            output,
        })
    }
}

/// The usage reported by an answer body of JSON (`usage` at the top), if any.
pub fn of_answer(body: &[u8]) -> Option<Usage> {
    #[derive(serde::Deserialize)]
    struct Answer {
        usage: Option<Value>,
    }
    let answer: Answer = serde_json::from_slice(body).ok()?;
    Usage::of(answer.usage.as_ref()?)
}

/// A rule's units per token of each kind: 1 each to count tokens, prices to count money.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// Per prompt token not cached.
    pub input: f64,
    /// Per cached prompt token.
    pub cached: f64,
    /// Per output token.
    pub output: f64,
}

impl Weights {
    /// One unit per token, whatever its kind.
    pub const TOKENS: Weights = Weights {
        input: 1.0,
        cached: 1.0,
        output: 1.0,
    };

    /// Weights, each finite and at least 0.
    pub fn new(input: f64, cached: f64, output: f64) -> Result<Weights, Error> {
        for (name, w) in [("input", input), ("cached", cached), ("output", output)] {
            if !(w.is_finite() && w >= 0.0) {
                return Err(Error::invalid(
                    name,
                    "a finite weight of at least 0",
                    Arg::Float(w),
                ));
            }
        }
        Ok(Weights {
            input,
            cached,
            output,
        })
    }

    /// The units a call's usage costs, rounded up.
    pub fn cost(&self, u: Usage) -> u64 {
        let fresh = (u.input - u.cached) as f64;
        units(fresh * self.input + u.cached as f64 * self.cached + u.output as f64 * self.output)
    }

    /// The units a call may cost at most: a prompt of up to `prompt` tokens (any of them
    /// cached or not) and `choices` outputs of up to `cap` tokens.
    pub fn bound(&self, prompt: u64, cap: u64, choices: u64) -> u64 {
        let input = self.input.max(self.cached);
        units(prompt as f64 * input + cap as f64 * choices as f64 * self.output)
    }

    /// The largest output cap whose bound fits in `room` units (0 when the prompt alone does
    /// not fit; [`super::request::MOST`] when outputs cost nothing here).
    pub fn cap_within(&self, room: u64, prompt: u64, choices: u64) -> u64 {
        if self.bound(prompt, 0, choices) > room {
            return 0;
        }
        if self.output == 0.0 {
            return super::request::MOST;
        }
        let left = room as f64 - prompt as f64 * self.input.max(self.cached);
        let mut cap =
            (libm::floor(left / (self.output * choices as f64)) as u64).min(super::request::MOST);
        // Rounding may leave the float's answer one over.
        while cap > 0 && self.bound(prompt, cap, choices) > room {
            cap -= 1;
        }
        cap
    }
}

/// Units of a weighted sum, rounded up (saturating: no rule holds 2^64).
fn units(x: f64) -> u64 {
    libm::ceil(x) as u64
}
