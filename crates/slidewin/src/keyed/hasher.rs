//! The keyed store's default hasher: foldhash behind a secret seed, so that keys chosen by an
//! attacker (user names, routes, addresses) cannot be picked to collide and slow the store down.

use core::hash::BuildHasher;
use foldhash::fast::SeedableRandomState;
use foldhash::SharedSeed;

/// A seeded [`BuildHasher`] for [`crate::Keyed`].
///
/// With the `std` feature, [`KeyHasher::default`] takes its seed from the operating system's
/// randomness (through `std`'s `RandomState`). Without `std`, bring a random seed:
///
/// ```
/// use slidewin::{keyed::KeyHasher, Keyed, SlidingCounter, Quota};
/// let seed = 0x5eed_1234_u64; // from your platform's random source
/// let store: Keyed<SlidingCounter, u64, KeyHasher> =
///     Keyed::with_hasher(Quota::new(10, 1_000).unwrap(), 100, KeyHasher::with_seed(seed))
///         .unwrap();
/// assert_eq!(store.len(), 0);
/// ```
#[derive(Clone, Debug)]
pub struct KeyHasher(SeedableRandomState);

impl KeyHasher {
    /// A hasher keyed by `seed`; keep the seed secret and random.
    pub fn with_seed(seed: u64) -> Self {
        Self(SeedableRandomState::with_seed(
            seed,
            SharedSeed::global_fixed(),
        ))
    }
}

#[cfg(feature = "std")]
impl Default for KeyHasher {
    fn default() -> Self {
        Self::with_seed(std::collections::hash_map::RandomState::new().hash_one(0_u64))
    }
}

impl BuildHasher for KeyHasher {
    type Hasher = foldhash::fast::FoldHasher<'static>;

    #[inline]
    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}
