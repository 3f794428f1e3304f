//! A zone as one module of a process hands it to another (the native nginx module to the Lua
//! module, through a C function `nginx` makes visible to every module it loads): where its
//! words are, and the rule and key length that laid them out, so the other attaches a
//! [`super::Zone`] to the very same layout and shares every key's window.
//!
//! The words are a raw pointer: dereferencing it is the host's business (this crate has no
//! `unsafe`); [`ZoneExport::rule`] rebuilds the rule, so both sides compute the same layout.

use core::sync::atomic::AtomicU64;

use crate::rule::{Rule, RuleWindow, MAX_WINDOWS};
use crate::window_spec::WINDOW_WORDS;
use crate::Error;

/// A zone's words and layout, C-compatible.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ZoneExport {
    /// The first of the zone's words.
    pub words: *const AtomicU64,
    /// How many words the zone has.
    pub n_words: usize,
    /// The longest key stored as it is.
    pub max_key_bytes: usize,
    /// The rule's windows: the first `n_windows` of `windows`.
    pub n_windows: usize,
    /// The rule's windows, as [`RuleWindow::words`].
    pub windows: [[u64; WINDOW_WORDS]; MAX_WINDOWS],
}

impl ZoneExport {
    /// The export of a zone laid out over `words` for `rule` and `max_key_bytes`.
    pub fn new(words: &[AtomicU64], rule: &Rule, max_key_bytes: usize) -> Self {
        let mut windows = [[0; WINDOW_WORDS]; MAX_WINDOWS];
        for (out, w) in windows.iter_mut().zip(rule.windows()) {
            *out = w.words();
        }
        Self {
            words: words.as_ptr(),
            n_words: words.len(),
            max_key_bytes,
            n_windows: rule.windows().len(),
            windows,
        }
    }

    /// The rule the words were laid out for.
    pub fn rule(&self) -> Result<Rule, Error> {
        let windows = self.windows.iter().take(self.n_windows.min(MAX_WINDOWS));
        let windows = windows.map(|&w| RuleWindow::from_words(w));
        Rule::new(windows.collect::<Result<alloc::vec::Vec<_>, Error>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BucketQuota, Quota};

    #[test]
    fn a_rule_comes_back_as_it_was_exported() {
        let rule = Rule::new([
            RuleWindow::log(Quota::new(10, 1_000).unwrap())
                .with_max_limit(20)
                .unwrap(),
            RuleWindow::buckets(BucketQuota::new(100, 60_000, 1_000).unwrap()),
            RuleWindow::counter(Quota::new(5, 10_000).unwrap()),
        ])
        .unwrap();
        let words: alloc::vec::Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
        let export = ZoneExport::new(&words, &rule, 32);
        assert_eq!(export.rule().unwrap(), rule);
        assert_eq!((export.n_words, export.max_key_bytes), (4, 32));
    }
}
