//! `slidewin.limiter{ ..., shared = "name", size = bytes, max_key_bytes = 64 }`: a keyed
//! limiter in shared memory ([`slidewin::shared::Zone`]) for every worker of one nginx.
//!
//! Make it in `init_by_lua*`: that runs in the master before the workers fork, so they all
//! inherit the same mapping. The master keeps each region here, by name, across
//! `nginx -s reload` (this module stays loaded in it): a reload with the same algorithm,
//! config, size and key length finds the region and keeps every window (old and new workers
//! share it while the old ones drain); any other change maps a new region, and the call
//! returns a note saying so.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use slidewin::shared::{SharedLimiter, Zone, ZoneStats};
use slidewin::Error;

use crate::limiter::{keyed_store, Store};
use crate::mapping::{Mapping, WorkerOwner};

/// A mapped region, shared by the zones that use it.
#[derive(Clone)]
pub struct Region(Arc<Mapping>);

impl AsRef<[AtomicU64]> for Region {
    fn as_ref(&self) -> &[AtomicU64] {
        self.0.words()
    }
}

/// What a region was made for: reused only for the very same.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Spec {
    pub name: String,
    pub algorithm: &'static str,
    pub config: [u64; 3],
    pub size: usize,
    pub max_key_bytes: usize,
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
    let region = Region(Arc::new(Mapping::new(spec.size)?));
    let note = known.map(|i| {
        let (old, _) = regions.remove(i);
        format!(
            "shared limiter \"{}\": its layout changed ({} {:?} size {} max_key_bytes {} -> \
             {} {:?} size {} max_key_bytes {}), so it starts afresh with no keys",
            spec.name,
            old.algorithm,
            old.config,
            old.size,
            old.max_key_bytes,
            spec.algorithm,
            spec.config,
            spec.size,
            spec.max_key_bytes
        )
    });
    regions.push((spec.clone(), region.clone()));
    debug_assert_eq!(region.0.bytes(), spec.size);
    Ok((region, note))
}

/// A fresh secret seed for a new region's hashes.
fn seed() -> [u64; 2] {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new();
    [random.hash_one(1_u8), random.hash_one(2_u8)]
}

/// A [`Zone`] behind the binding's [`Store`] seam.
pub fn store<L: SharedLimiter + 'static>(
    config: L::Config,
    region: Region,
    max_key_bytes: usize,
) -> Result<Box<dyn Store>, Error> {
    let (zone, _) =
        Zone::<_, L, _>::attach(region, config, max_key_bytes, WorkerOwner::new(), seed())?;
    Ok(Box::new(zone))
}

keyed_store!(
    impl<L: SharedLimiter> for Zone<Region, L, WorkerOwner>,
    check_at, peek_at, uncommit_at, reset,
    stats: |zone| zone.stats()
);
