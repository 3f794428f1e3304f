//! The [`Policy`] a door answers a store's decisions with, held for the limits' version it was
//! made at and made again only when a decision comes from another version (a limit set, a
//! rule put again); it writes a decision's header values in a door's [`Style`]. The native
//! nginx module holds one per zone (its `slidewin_limit`s each have their style) and the Lua
//! binding one per limiter, so a version change means the same thing at every door.
//!
//! ```
//! use slidewin::held_policy::HeldPolicy;
//! use slidewin::headers::{Field, Policy, PolicyWindow, Style};
//! use slidewin::Decision;
//!
//! let mut held = HeldPolicy::new();
//! let policy = || Policy::new(&[PolicyWindow { name: "api", limit: 10, window_ms: 1_000 }]);
//! // A decision of version 7: the policy is made once, then kept while the version holds.
//! assert!(held.follow(7, || Some(policy())));
//! assert!(held.follow(7, || unreachable!()));
//! assert_eq!(held.policy().value(), r#""api";q=10;w=1"#);
//!
//! let admitted = Decision {
//!     allowed: true, limit: 10, remaining: 9, retry_after_ms: None, reset_after_ms: 1_000,
//!     window: 0,
//! };
//! let mut buf = [0u8; 64];
//! let mut values = Vec::new();
//! let sink = |field, value: &mut [u8]| values.push((field, value.to_vec()));
//! assert!(held.write(Style::Draft, &admitted, 0, &mut buf, sink));
//! assert_eq!(values, [(Field::RateLimit, br#""api";r=9;t=1"#.to_vec())]);
//! ```

use crate::headers::{write_values, Field, Policy, Style};
use crate::Decision;

/// A policy and the version of the limits it is of.
#[derive(Debug, Clone, Default)]
pub struct HeldPolicy {
    policy: Policy,
    /// The version `policy` is of; `None` before the first.
    version: Option<u64>,
}

impl HeldPolicy {
    /// The version a policy is held under for a store that keeps no versions (one deciding
    /// elsewhere, whose limits the door is told): no store's version reaches it.
    pub const UNVERSIONED: u64 = u64::MAX;

    /// No policy held yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether it holds the policy of `version`.
    pub fn holds(&self, version: u64) -> bool {
        self.version == Some(version)
    }

    /// Holds the policy of `version`, from `make` when the one held is of another version;
    /// false when `make` has none to give (what was held stays).
    pub fn follow(&mut self, version: u64, make: impl FnOnce() -> Option<Policy>) -> bool {
        if self.holds(version) {
            return true;
        }
        match make() {
            Some(policy) => {
                self.hold(version, policy);
                true
            }
            None => false,
        }
    }

    /// A policy held for no store's version: one made for a single decision.
    pub fn made(policy: Policy) -> Self {
        let version = Some(Self::UNVERSIONED);
        Self { policy, version }
    }

    /// Holds `policy` as the one of `version`.
    pub fn hold(&mut self, version: u64, policy: Policy) {
        (self.policy, self.version) = (policy, Some(version));
    }

    /// The policy held.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The header values of `decision` (made at the version held) in `style`, written into
    /// `buf` and each given to `sink`; false when they did not fit ([`Policy::values_bytes`]
    /// always does). `RateLimit-Policy` is [`HeldPolicy::policy`]'s value, the same for every
    /// decision of the version.
    pub fn write<'b>(
        &self,
        style: Style,
        decision: &Decision,
        now_ms: i64,
        buf: &'b mut [u8],
        sink: impl FnMut(Field, &'b mut [u8]),
    ) -> bool {
        write_values(style, &self.policy, decision, now_ms, buf, sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::PolicyWindow;

    fn policy(limit: u64) -> Policy {
        Policy::new(&[PolicyWindow {
            name: "a",
            limit,
            window_ms: 1_000,
        }])
    }

    #[test]
    fn a_new_version_makes_the_policy_again_and_a_failed_make_keeps_the_old_one() {
        let mut held = HeldPolicy::new();
        assert!(!held.holds(0));
        assert!(held.follow(0, || Some(policy(5))));
        assert!(held.holds(0));
        assert!(held.follow(1, || Some(policy(6))));
        assert_eq!(held.policy().value(), r#""a";q=6;w=1"#);
        assert!(!held.follow(2, || None));
        assert!(held.holds(1) && !held.holds(2));
        assert_eq!(held.policy().value(), r#""a";q=6;w=1"#);
    }

    #[test]
    fn an_unversioned_policy_is_held_until_told_otherwise() {
        let mut held = HeldPolicy::new();
        held.hold(HeldPolicy::UNVERSIONED, policy(3));
        assert!(held.holds(HeldPolicy::UNVERSIONED));
        assert!(held.follow(HeldPolicy::UNVERSIONED, || unreachable!()));
    }
}
