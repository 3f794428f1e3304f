//! Regions of shared memory, kept by name in the master: a shared limiter's
//! (`slidewin.limiter{ ..., shared = "name", size = bytes }`, a [`slidewin::shared::Zone`] for
//! every worker of one nginx), a named limiter's live limits, concurrency slots, a zone of
//! rules, and a node's leases of a limiter kept in Redis.
//!
//! Make them in `init_by_lua*`: that runs in the master before the workers fork, so they all
//! inherit the same mapping. The master keeps each region here, by name, across
//! `nginx -s reload` (this module stays loaded in it): a reload asking for the same kind
//! ([`RegionKind`]: for a limiter its windows' algorithms, lengths and max_limit, and its key
//! length) and size finds the region and keeps every window (old and new workers share it
//! while the old ones drain), and its live limits unless the config changed them; any other
//! change maps a new region, and a shared limiter's call returns a note saying so.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use slidewin::shared::{RegionKind, WindowShape, ZoneExport};

use crate::mapping::Mapping;

/// A mapped region, shared by the zones that use it.
#[derive(Clone)]
pub struct Region(Arc<Mapping>);

impl Region {
    /// A region of its own, kept by no name.
    pub fn new(bytes: usize) -> Result<Self, String> {
        Ok(Region(Arc::new(Mapping::new(bytes)?)))
    }

    /// The region of a zone the native nginx module exported (kept by that module).
    pub fn of_nginx_zone(export: &ZoneExport) -> Self {
        // SAFETY: the native module exports the words of an nginx shared zone, mapped in the
        // master before the fork and so for the whole life of this worker, and accessed only
        // through atomics by both modules.
        Region(Arc::new(unsafe {
            Mapping::borrowed(export.words, export.n_words)
        }))
    }
}

impl AsRef<[AtomicU64]> for Region {
    fn as_ref(&self) -> &[AtomicU64] {
        self.0.words()
    }
}

/// What a region was made for: reused only for the very same.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Spec {
    pub name: String,
    pub kind: RegionKind,
    pub size: usize,
}

/// The master's regions by name (what a reload finds again).
static REGIONS: Mutex<Vec<(Spec, Region)>> = Mutex::new(Vec::new());

/// The region for `spec`: the one made before for the same spec, or a new one (with a note
/// when it replaces a region of that name made for another spec).
pub fn region(spec: &Spec) -> Result<(Region, Option<String>), String> {
    let mut regions = REGIONS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let known = regions.iter().position(|(s, _)| s.name == spec.name);
    if let Some(i) = known {
        if regions[i].0 == *spec {
            return Ok((regions[i].1.clone(), None));
        }
    }
    let region = Region::new(spec.size)?;
    let note = known.map(|i| {
        let (old, _) = regions.remove(i);
        format!(
            "shared limiter \"{}\": its layout changed ({} -> {}), so it starts afresh with \
             no keys",
            spec.name,
            describe(&old),
            describe(spec),
        )
    });
    regions.push((spec.clone(), region.clone()));
    debug_assert_eq!(region.0.bytes(), spec.size);
    Ok((region, note))
}

/// A spec as a note shows it: `log max_limit 30 window_ms 5000, ... size 65536 max_key_bytes 64`
/// for a rule.
fn describe(spec: &Spec) -> String {
    let size = spec.size;
    let windows = |windows: &[WindowShape]| {
        let windows = windows.iter().map(|w| w.to_string());
        windows.collect::<Vec<_>>().join(", ")
    };
    match &spec.kind {
        RegionKind::Rule {
            windows: w,
            max_key_bytes,
        }
        | RegionKind::LiveLimits {
            windows: w,
            max_key_bytes,
        } => format!("{} size {size} max_key_bytes {max_key_bytes}", windows(w)),
        RegionKind::Concurrency {
            max_limit,
            max_key_bytes,
        } => format!("concurrency max_limit {max_limit} size {size} max_key_bytes {max_key_bytes}"),
        RegionKind::Leases {
            validity_ms,
            margin_ms,
            max_key_bytes,
        } => format!(
            "leases validity_ms {validity_ms} margin_ms {margin_ms} size {size} \
             max_key_bytes {max_key_bytes}"
        ),
        RegionKind::Directory { max_rules } => format!("max_rules {max_rules} size {size}"),
    }
}
