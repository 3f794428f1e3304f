//! A `slidewin_zone` at run time: the core's [`Zone`] over the nginx shared zone's words, and
//! the header values of its decisions, rendered by the core ([`slidewin::headers`]).
//!
//! Every worker decides on the same words (nginx maps the zone in the master before the
//! fork), so counts are exact across workers; a lock word names its process, so a worker
//! SIGKILLed while deciding is found dead by the next one, which repairs the set.

use core::cell::RefCell;
use core::sync::atomic::AtomicU64;

use slidewin::headers::{render, write_value, Field, Policy, PolicyWindow, Style, Value};
use slidewin::shared::{Attached, WindowShape, Zone, ZoneExport, ZoneStats};
use slidewin::{Clock, Decision};

use crate::config::ZoneSpec;
use crate::nginx::{WallClock, WorkerOwner};

/// The words of a shared zone, mapped by nginx for the life of the cycle that made it.
pub type Words = &'static [AtomicU64];

/// A zone's config and, once nginx has mapped its memory, its core zone.
pub struct ZoneState {
    pub spec: ZoneSpec,
    zone: Option<(Zone<Words, WorkerOwner>, Words)>,
    /// The cost recorded at most: one above every window's max_limit, which can never fit
    /// (the core answers it as refused for good) and stays far from overflowing a count.
    max_cost: u64,
    /// This worker's policy for the live limits' version it was made for.
    policy: RefCell<(u64, Policy)>,
}

/// A header value as the zone gives it, for nginx to write into the request's memory.
pub enum HeaderValue<'a> {
    /// Bytes kept by the zone (the policy).
    Copied(&'a [u8]),
    /// A value the core renders.
    Rendered(Value<'a>),
}

impl HeaderValue<'_> {
    pub fn len(&self) -> usize {
        match self {
            HeaderValue::Copied(bytes) => bytes.len(),
            HeaderValue::Rendered(value) => value.len(),
        }
    }

    /// Writes the value into the start of `out`, [`HeaderValue::len`] bytes; `None` when
    /// `out` is shorter.
    pub fn write<'b>(&self, out: &'b mut [u8]) -> Option<&'b [u8]> {
        match self {
            HeaderValue::Copied(bytes) => {
                let out = out.get_mut(..bytes.len())?;
                out.copy_from_slice(bytes);
                Some(out)
            }
            HeaderValue::Rendered(value) => write_value(out, *value),
        }
    }
}

/// A decision as the headers describe it.
#[derive(Clone, Copy)]
pub struct Answer {
    pub style: Style,
    pub decision: Decision,
    pub now_ms: i64,
    pub refused: bool,
}

impl ZoneState {
    pub fn new(spec: ZoneSpec) -> Self {
        let most = spec.rule.windows().iter().map(|w| w.max_limit()).max();
        Self {
            max_cost: most.unwrap_or(0).saturating_add(1),
            spec,
            zone: None,
            policy: RefCell::new((u64::MAX, Policy::default())),
        }
    }

    /// The name nginx keeps the shared memory under: the zone's name and its layout, so that a
    /// reload that changes the layout maps a new zone (workers of the old config still
    /// decide on theirs while they drain) and one that keeps it keeps every key's window.
    pub fn shm_name(&self) -> String {
        let windows = self.spec.rule.windows().iter();
        let shapes: Vec<String> = windows.map(|w| WindowShape::of(w).to_string()).collect();
        format!(
            "slidewin {} {} max_key_bytes {}",
            self.spec.name,
            shapes.join(", "),
            self.spec.max_key_bytes
        )
    }

    /// Lays the core zone over `words` (kept when they already hold this layout).
    pub fn attach(&mut self, words: Words) -> Result<Attached, String> {
        // A fresh secret seed for a new zone's hashes (a reused zone keeps its own).
        let seed = slidewin::shared::random_seed();
        let (zone, attached) = Zone::attach(
            words,
            self.spec.rule.clone(),
            self.spec.max_key_bytes,
            WorkerOwner,
            seed,
        )
        .map_err(|e| format!("slidewin_zone \"{}\": {e}", self.spec.name))?;
        self.zone = Some((zone, words));
        Ok(attached)
    }

    /// Decides for `key` now and records `cost` when it fits; the decision and its time.
    pub fn decide(&self, key: &[u8], cost: u64) -> Result<(Decision, i64), String> {
        let (zone, _) = self.zone.as_ref().ok_or("the zone is not mapped")?;
        let now_ms = WallClock.now_ms();
        let d = zone
            .check_at(key, now_ms, cost.min(self.max_cost))
            .map_err(|e| e.to_string())?;
        Ok((d, now_ms))
    }

    /// Gives `sink` each header of `answer` in its style, `Retry-After` only when refused;
    /// false when the sink failed.
    pub fn headers(
        &self,
        answer: Answer,
        mut sink: impl FnMut(&'static str, HeaderValue) -> bool,
    ) -> bool {
        let Some((zone, _)) = self.zone.as_ref() else {
            return true;
        };
        // headers=off sends nothing but a refusal's Retry-After.
        if answer.style == Style::None && !answer.refused {
            return true;
        }
        let mut cached = self.policy.borrow_mut();
        let version = zone.limits_version();
        if cached.0 != version {
            let limits = zone.limits();
            let windows: Vec<PolicyWindow> = self
                .spec
                .window_names
                .iter()
                .zip(self.spec.rule.windows())
                .zip(limits.iter())
                .map(|((name, w), &limit)| PolicyWindow {
                    name,
                    limit,
                    window_ms: w.window_ms() as u64,
                })
                .collect();
            *cached = (version, Policy::new(&windows));
        }
        let mut ok = true;
        if answer.style == Style::Draft {
            ok &= sink(
                "RateLimit-Policy",
                HeaderValue::Copied(cached.1.value().as_bytes()),
            );
        }
        render(
            answer.style,
            &cached.1,
            &answer.decision,
            answer.now_ms,
            &mut |field, value| {
                if field != Field::RetryAfter || answer.refused {
                    ok &= sink(field.name(), HeaderValue::Rendered(value));
                }
            },
        );
        ok
    }

    pub fn stats(&self) -> Option<ZoneStats> {
        self.zone.as_ref().map(|(z, _)| z.stats())
    }

    /// The zone's words and layout, for the Lua module of the same worker.
    pub fn export(&self) -> Option<ZoneExport> {
        let (_, words) = self.zone.as_ref()?;
        Some(ZoneExport::new(
            words,
            &self.spec.rule,
            self.spec.max_key_bytes,
        ))
    }
}
