//! How a region is cut for one limiter config: the header, then `sets` of [`WAYS`] ways, each
//! way a key's length word, its last use, its bytes and the limiter's state.

use super::{SharedLimiter, HEADER_WORDS, SET_HEADER, WAYS, W_KEY};
use crate::{Error, Value};

/// How a region is cut for one config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) key_words: usize,
    pub(crate) state_words: usize,
    pub(crate) way_words: usize,
    pub(crate) set_words: usize,
    pub(crate) sets: usize,
}

impl Layout {
    pub(crate) fn new<L: SharedLimiter>(
        config: &L::Config,
        max_key_bytes: usize,
        region_words: usize,
    ) -> Result<Self, Error> {
        let (key_words, state_words) = Self::per_key::<L>(config, max_key_bytes)?;
        let way_words = W_KEY + key_words + state_words;
        // Sets start on 64-byte lines, so two sets never share one.
        let set_words = (SET_HEADER + WAYS + WAYS * way_words).next_multiple_of(8);
        let sets = region_words.saturating_sub(HEADER_WORDS) / set_words;
        if sets == 0 {
            return Err(Error::RegionTooSmall {
                needed: ((HEADER_WORDS + set_words) * 8) as u64,
                got: (region_words * 8) as u64,
            });
        }
        Ok(Self {
            key_words,
            state_words,
            way_words,
            set_words,
            sets: sets.min(u32::MAX as usize),
        })
    }

    /// Words per key for the key and for the state.
    pub(crate) fn per_key<L: SharedLimiter>(
        config: &L::Config,
        max_key_bytes: usize,
    ) -> Result<(usize, usize), Error> {
        if !(16..=65_536).contains(&max_key_bytes) {
            let got = Value::UInt(max_key_bytes as u64);
            return Err(Error::invalid("max_key_bytes", "from 16 to 65536", got));
        }
        Ok((max_key_bytes.div_ceil(8), L::state_words(config)?))
    }

    pub(crate) fn fingerprint<L: SharedLimiter>(
        &self,
        config: &L::Config,
        region_words: usize,
    ) -> u64 {
        let words = L::fingerprint(config).into_iter().chain([
            self.key_words as u64,
            self.state_words as u64,
            self.sets as u64,
            region_words as u64,
        ]);
        // FNV-1a over the words: a fixed function, so every process computes the same value.
        words.fold(0xcbf2_9ce4_8422_2325, |h: u64, w| {
            (h ^ w).wrapping_mul(0x0100_0000_01b3)
        })
    }
}
