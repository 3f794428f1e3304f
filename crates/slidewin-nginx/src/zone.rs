//! A `slidewin_zone` at run time: the core's [`Zone`] over the nginx shared zone's words, and
//! the header values of its decisions, rendered by the core ([`slidewin::headers`]).
//!
//! Every worker decides on the same words (nginx maps the zone in the master before the
//! fork), so counts are exact across workers; a lock word names its process, so a worker
//! SIGKILLed while deciding is found dead by the next one, which repairs the set.

use core::cell::{Cell, RefCell};
use core::sync::atomic::AtomicU64;

use slidewin::headers::{Field, Policy, Style};
use slidewin::held_policy::HeldPolicy;
use slidewin::reservation::Amend;
use slidewin::rule::Limits;
use slidewin::shared::{Attached, EvictionWatch, WindowShape, Zone, ZoneExport};
use slidewin::{Call, Clock, Decision};

use crate::config::ZoneSpec;
use crate::nginx::process::{WallClock, WorkerOwner};

/// How often a worker tells error.log that a zone evicts keys holding units, at most.
const EVICTION_WARNING_MS: i64 = 10_000;

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
    policy: RefCell<HeldPolicy>,
    /// Whether some `slidewin_limit` of the configuration only dry-runs the zone (its
    /// `/metrics` then tells would-be refusals).
    pub dry_runs: bool,
    /// What this worker told error.log of the zone's evictions.
    evictions: Cell<EvictionWatch>,
}

/// A decision as the headers describe it.
#[derive(Clone, Copy)]
pub struct Answer<'a> {
    pub style: Style,
    /// The key's own limits (`limit=`), or none: the zone's live ones.
    pub limits: Option<&'a Limits>,
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
            policy: RefCell::new(HeldPolicy::new()),
            dry_runs: false,
            evictions: Cell::new(EvictionWatch::new()),
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
        self.zone = Some((zone.with_full(self.spec.full), words));
        Ok(attached)
    }

    /// How many keys the zone holds, and the bytes each takes (none before it is mapped).
    pub fn capacity(&self) -> (usize, usize) {
        let rule = &self.spec.rule;
        let bytes = Zone::<Words, WorkerOwner>::bytes_per_key(rule, self.spec.max_key_bytes);
        let keys = self.zone.as_ref().map_or(0, |(zone, _)| zone.capacity());
        (keys, bytes.unwrap_or(0))
    }

    /// Decides for `key` now under `limits` (none: the zone's live ones) and records `cost`
    /// when it fits (a `dry_run`'s refusal counted as a would-be one); the decision and its
    /// time.
    pub fn decide(
        &self,
        key: &[u8],
        cost: u64,
        dry_run: bool,
        limits: Option<&Limits>,
    ) -> Result<(Decision, i64), String> {
        let (zone, _) = self.zone.as_ref().ok_or("the zone is not mapped")?;
        let cost = cost.min(self.max_cost);
        // The time is read once the key's set is locked: calls on a key are stamped in the
        // order they are decided, in every worker, so `$slidewin_msec` replays the zone.
        let call = if dry_run { Call::DryRun } else { Call::Check };
        let decided = zone.check_now(key, &WallClock, cost, call, limits);
        decided.map_err(|e| e.to_string())
    }

    /// What error.log should be told at `now_ms` when keys were evicted with units in their
    /// windows since this worker last told (at once, then at most every
    /// [`EVICTION_WARNING_MS`]): each eviction forgets a window, so the zone is too small.
    #[inline]
    pub fn eviction_warning(&self, now_ms: i64) -> Option<String> {
        let (zone, _) = self.zone.as_ref()?;
        let mut watch = self.evictions.get();
        let evicted = watch.poll(zone.evictions(), now_ms, EVICTION_WARNING_MS);
        self.evictions.set(watch);
        evicted.map(|evicted| {
            format!(
                "slidewin_zone \"{}\" is full: {evicted}; it holds {} keys: raise size= or set \
                 full=refuse",
                self.spec.name,
                zone.capacity()
            )
        })
    }

    /// Takes back a call [`ZoneState::decide`] admitted at `now_ms` that a later limit of the
    /// request refused: no zone is charged for another's refusal.
    pub fn withdraw(&self, key: &[u8], cost: u64, now_ms: i64) -> Result<(), String> {
        let (zone, _) = self.zone.as_ref().ok_or("the zone is not mapped")?;
        let cost = cost.min(self.max_cost);
        zone.withdraw_at(key, now_ms, cost)
            .map_err(|e| e.to_string())
    }

    /// Changes what a call recorded for `key` at `stamp_ms` (a reservation settled): the
    /// zone then holds what the call used where it was admitted.
    pub fn amend(&self, key: &[u8], stamp_ms: i64, amend: Amend) -> Result<(), String> {
        let (zone, _) = self.zone.as_ref().ok_or("the zone is not mapped")?;
        zone.amend_at(key, WallClock.now_ms(), Some(stamp_ms), amend)
            .map_err(|e| e.to_string())
    }

    /// Writes the header values of `answer` in its style (`Retry-After` only when refused)
    /// into the bytes `alloc` gives for the most they can take, and gives `push` each header
    /// with its value there; false when `alloc` or `push` failed.
    pub fn headers<'b>(
        &self,
        answer: Answer<'_>,
        alloc: impl FnOnce(usize) -> Option<&'b mut [u8]>,
        mut push: impl FnMut(&'static str, &'b mut [u8]) -> bool,
    ) -> bool {
        let Some((zone, _)) = self.zone.as_ref() else {
            return true;
        };
        // headers=off sends nothing but a refusal's Retry-After.
        if !answer.style.sends_headers() && !answer.refused {
            return true;
        }
        let mut held = self.policy.borrow_mut();
        let of =
            |limits: &Limits| Policy::of_named(&self.spec.rule, limits, &self.spec.window_names);
        held.follow(zone.limits_version(), || Some(of(&zone.limits())));
        // A key's own limits (limit=) are a policy of their own, made for the request.
        let own;
        let held = match answer.limits {
            Some(limits) if *limits != zone.limits() => {
                own = HeldPolicy::made(of(limits));
                &own
            }
            _ => &*held,
        };
        let policy = held.policy();
        let sends_policy = answer.style.sends_policy();
        let policy_bytes = if sends_policy {
            policy.value().len()
        } else {
            0
        };
        let most = policy_bytes + policy.values_bytes();
        let Some(free) = alloc(most) else {
            return false;
        };
        let (policy_value, free) = free.split_at_mut(policy_bytes);
        policy_value.copy_from_slice(&policy.value().as_bytes()[..policy_bytes]);
        if sends_policy && !push("RateLimit-Policy", policy_value) {
            return false;
        }
        let mut pushed = true;
        let fit = held.write(
            answer.style,
            &answer.decision,
            answer.now_ms,
            free,
            |field, value| {
                // A dry run's refusal lets the request through: no wait to tell.
                if field != Field::RetryAfter || answer.refused {
                    pushed &= push(field.name(), value);
                }
            },
        );
        fit && pushed
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
