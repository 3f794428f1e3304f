//! One request through a location's `slidewin_limit`s: each decides in its zone, in order;
//! the first refusal answers (a `dry_run` one is only noted), and the headers describe the
//! last decision made. A request that goes on leaves the reservations of the limits with
//! `settle=`, settled in the log phase ([`settle`]).

use core::fmt;

use slidewin::headers::{seconds_up, Style};
use slidewin::reservation::{Excess, Reservation};
use slidewin::rule::Limits;

use crate::zone::{Answer, ZoneState};

/// `$slidewin_status`, as `$limit_req_status` names its outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Passed = 0,
    Rejected = 1,
    RejectedDryRun = 2,
}

impl Status {
    pub const fn text(self) -> &'static str {
        match self {
            Status::Passed => "PASSED",
            Status::Rejected => "REJECTED",
            Status::RejectedDryRun => "REJECTED_DRY_RUN",
        }
    }
}

/// One `slidewin_limit` with its key and cost read from the request.
#[derive(Clone, Copy)]
pub struct Call<'a> {
    pub zone: &'a ZoneState,
    pub key: &'a [u8],
    pub cost: u64,
    /// `limit=`: the key's own limits (none: the zone's live ones).
    pub limits: Option<&'a Limits>,
    pub style: Style,
    pub dry_run: bool,
    pub status: usize,
}

/// What the request gets.
pub struct Outcome<'a> {
    pub status: Status,
    /// The HTTP status to refuse with, or none: the request goes on.
    pub refuse_with: Option<usize>,
    /// The decision the headers describe, and its zone.
    pub answer: (&'a ZoneState, Answer<'a>),
}

/// A refusal as error.log tells it (nginx appends the client, server and request):
/// `limiting requests[, dry run,] by zone "api": window "api-10s" full, retry after 3 s`.
#[derive(Clone, Copy)]
pub struct Refusal<'a> {
    pub zone: &'a ZoneState,
    /// The window that refused, and when it admits the cost (never: `None`).
    pub window: usize,
    pub retry_after_ms: Option<u64>,
    pub cost: u64,
    pub dry_run: bool,
}

impl fmt::Display for Refusal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let spec = &self.zone.spec;
        let dry_run = if self.dry_run { ", dry run," } else { "" };
        let window = spec.window_names.get(self.window);
        let window = window.map_or("", String::as_str);
        write!(f, "limiting requests{dry_run} by zone \"{}\": ", spec.name)?;
        match self.retry_after_ms {
            Some(wait_ms) => write!(
                f,
                "window \"{window}\" full, retry after {} s",
                seconds_up(wait_ms)
            ),
            None => write!(f, "cost {} never fits window \"{window}\"", self.cost),
        }
    }
}

/// Decides `calls` in order (an error: the message for error.log, the request gets a 500),
/// handing `on_refusal` each refusal, a dry run's too. A refusal, or an error, takes back
/// what the calls before it admitted, as `limit_req` does: a zone is charged only for
/// requests that go on. `limits` is how many calls there may be (one: nothing to take back).
/// With `kept` (a location with `settle=`), a request that goes on leaves there the calls
/// it admitted, with the times their cost was recorded at.
pub fn decide<'a>(
    calls: impl Iterator<Item = Result<Call<'a>, String>>,
    limits: usize,
    mut on_refusal: impl FnMut(Refusal<'a>),
    kept: Option<&mut Vec<(Call<'a>, i64)>>,
) -> Result<Option<Outcome<'a>>, String> {
    let mut outcome: Option<Outcome> = None;
    let mut admitted: Vec<(Call<'a>, i64)> = Vec::new();
    let keep = limits > 1 || kept.is_some();
    for call in calls {
        let call = match call {
            Ok(call) => call,
            Err(message) => return Err(withdrawn(&admitted, message)),
        };
        let decided = call
            .zone
            .decide(call.key, call.cost, call.dry_run, call.limits);
        let (d, now_ms) = match decided {
            Ok(decided) => decided,
            Err(message) => return Err(withdrawn(&admitted, message)),
        };
        let refused = !d.allowed && !call.dry_run;
        if !d.allowed {
            on_refusal(Refusal {
                zone: call.zone,
                window: d.window,
                retry_after_ms: d.retry_after_ms,
                cost: call.cost,
                dry_run: call.dry_run,
            });
        }
        let status = match (d.allowed, call.dry_run) {
            (true, _) => Status::Passed,
            (false, false) => Status::Rejected,
            (false, true) => Status::RejectedDryRun,
        };
        let status = match &outcome {
            Some(o) if o.status == Status::RejectedDryRun && status == Status::Passed => o.status,
            _ => status,
        };
        outcome = Some(Outcome {
            status,
            refuse_with: refused.then_some(call.status),
            answer: (
                call.zone,
                Answer {
                    style: call.style,
                    limits: call.limits,
                    decision: d,
                    now_ms,
                    refused,
                },
            ),
        });
        if refused {
            withdraw(&admitted)?;
            return Ok(outcome);
        }
        if keep && d.allowed {
            admitted.push((call, now_ms));
        }
    }
    if let Some(kept) = kept {
        *kept = admitted;
    }
    Ok(outcome)
}

/// The log phase's settlement of `reserved`: `used` is what `settle=` read (`None`: nothing
/// was reported, and the reservation stays whole); what the call did not use goes back at the
/// stamp, and what it used above it is as `above=` says. An error names what was wrong for
/// error.log.
pub fn settle(
    zone: &ZoneState,
    key: &[u8],
    reserved: &Reservation,
    (used, above): (Option<&[u8]>, Excess),
) -> Result<(), String> {
    let cost = reserved.units;
    let Some(used) = used.filter(|u| !u.is_empty()) else {
        return Ok(());
    };
    let actual = crate::config::cost(used).map_err(|_| {
        format!(
            "slidewin_limit: settle must be a non-negative integer, got \"{}\"; the \
             reservation of {cost} stays",
            String::from_utf8_lossy(used)
        )
    })?;
    match reserved.settle(actual, above) {
        Ok(None) => Ok(()),
        Ok(Some(amend)) => zone.amend(key, reserved.stamp_ms, amend),
        Err(_) => Err(format!(
            "slidewin_limit: settle {actual} is above the cost reserved ({cost}); the \
             reservation stays"
        )),
    }
}

/// Takes back every call of `admitted` (a dry run recorded as a check does, so it too).
fn withdraw(admitted: &[(Call, i64)]) -> Result<(), String> {
    for (call, now_ms) in admitted {
        call.zone.withdraw(call.key, call.cost, *now_ms)?;
    }
    Ok(())
}

/// `message`, after taking back `admitted` (and with the reason it could not, if so).
fn withdrawn(admitted: &[(Call, i64)], message: String) -> String {
    match withdraw(admitted) {
        Ok(()) => message,
        Err(also) => format!("{message}; and taking back an admission: {also}"),
    }
}
