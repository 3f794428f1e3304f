//! Keys in a shared region: any bytes. Keys of up to `max_key_bytes` are stored as they are
//! (so two keys share a state only if they are equal); longer ones as a 128-bit SipHash digest
//! under the region's secret seed (two keys then share a state only on a 2^-128 collision that
//! an attacker who does not know the seed cannot aim at).

use core::hash::{BuildHasher, Hasher};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::keyed::KeyHasher;

// A stored key's words in its way: its length word, then (after the way's last use, table.rs)
// the key's bytes.
pub(crate) const W_LEN: usize = 0;
pub(crate) const W_KEY: usize = 2;

/// The length word of a key stored as a digest.
const DIGEST: u64 = 1 << 63;

/// Hashes and stores keys for one region.
pub(crate) struct KeyCodec {
    hasher: KeyHasher,
    sip_keys: [u64; 4],
    max_key_bytes: usize,
}

/// A key as the region stores it.
pub(crate) struct Key<'k> {
    /// The seeded hash: its high half picks the set, the whole (made odd) is the tag.
    pub(crate) hash: u64,
    form: Form<'k>,
}

enum Form<'k> {
    Bytes(&'k [u8]),
    Digest([u64; 2]),
}

impl KeyCodec {
    /// `max_key_bytes`: a multiple of 8, the room a way has for a key.
    pub(crate) fn new(seed: [u64; 2], max_key_bytes: usize) -> Self {
        let mix = |s: u64, k: u64| (s ^ k).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Self {
            hasher: KeyHasher::with_seed(seed[0]),
            sip_keys: [
                mix(seed[1], 1),
                mix(seed[1], 2),
                mix(seed[1], 3),
                mix(seed[1], 4),
            ],
            max_key_bytes,
        }
    }

    pub(crate) fn key<'k>(&self, bytes: &'k [u8]) -> Key<'k> {
        if bytes.len() <= self.max_key_bytes {
            Key {
                hash: self.hasher.hash_one(bytes),
                form: Form::Bytes(bytes),
            }
        } else {
            let digest = [self.sip(0, bytes), self.sip(2, bytes)];
            Key {
                hash: digest[0],
                form: Form::Digest(digest),
            }
        }
    }

    #[allow(deprecated)] // core's SipHasher: SipHash-2-4, keyed; no dependency for 30 lines.
    fn sip(&self, at: usize, bytes: &[u8]) -> u64 {
        let mut h = core::hash::SipHasher::new_with_keys(self.sip_keys[at], self.sip_keys[at + 1]);
        h.write(bytes);
        h.finish()
    }

    /// The tag the key stored in `words` (length word, then key words) must have, or `None`
    /// when the length word is not one a key can have.
    pub(crate) fn stored_tag(&self, words: &[AtomicU64]) -> Option<u64> {
        match self.stored(words)? {
            Stored::Digest(digest) => Some(digest[0] | 1),
            Stored::Bytes(bytes) => Some(self.key(&bytes).tag()),
        }
    }

    /// The key stored in `words` (length word, then key words), or `None` when the length
    /// word is not one a key can have.
    pub(crate) fn stored(&self, words: &[AtomicU64]) -> Option<Stored> {
        let len = words[W_LEN].load(Relaxed);
        let key = &words[W_KEY..];
        if len & DIGEST != 0 {
            return Some(Stored::Digest([0, 1].map(|i| key[i].load(Relaxed))));
        }
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= self.max_key_bytes)?;
        let mut bytes = alloc::vec::Vec::with_capacity(len.next_multiple_of(8));
        for word in &key[..len.div_ceil(8)] {
            bytes.extend_from_slice(&word.load(Relaxed).to_le_bytes());
        }
        bytes.truncate(len);
        Some(Stored::Bytes(bytes))
    }
}

/// Up to 7 bytes as a little-endian word, zero-padded, without a copy of variable length
/// (every request's key goes through here): 4 to 7 bytes as two overlapping 4-byte reads,
/// whose shared bytes are equal, so or-ing them is exact.
fn short_word(bytes: &[u8]) -> u64 {
    let read4 = |at: usize| {
        let four: [u8; 4] = bytes[at..at + 4].try_into().unwrap_or_default();
        u64::from(u32::from_le_bytes(four))
    };
    match bytes.len() {
        len @ 4.. => read4(0) | read4(len - 4) << (8 * (len - 4)),
        _ => bytes
            .iter()
            .rev()
            .fold(0, |word, &b| word << 8 | u64::from(b)),
    }
}

/// A key read back from a way: its bytes, or the digest a long key is kept as.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stored {
    /// A key of up to `max_key_bytes`, as it was given.
    Bytes(alloc::vec::Vec<u8>),
    /// A longer key's 128-bit keyed digest (the key itself is not kept).
    Digest([u64; 2]),
}

impl Key<'_> {
    /// Never 0 (the tag of an empty way).
    pub(crate) fn tag(&self) -> u64 {
        self.hash | 1
    }

    fn length_word(&self) -> u64 {
        match self.form {
            Form::Bytes(bytes) => bytes.len() as u64,
            Form::Digest(_) => DIGEST,
        }
    }

    /// The key's words, zero-padded.
    fn word(&self, i: usize) -> u64 {
        match &self.form {
            Form::Bytes(bytes) => {
                let chunk = bytes.get(i * 8..).unwrap_or(&[]);
                match chunk.first_chunk::<8>() {
                    Some(word) => u64::from_le_bytes(*word),
                    None => short_word(chunk),
                }
            }
            Form::Digest(digest) => digest.get(i).copied().unwrap_or(0),
        }
    }

    /// Words the key takes.
    fn words(&self) -> usize {
        match self.form {
            Form::Bytes(bytes) => bytes.len().div_ceil(8),
            Form::Digest(_) => 2,
        }
    }

    /// Whether `stored` (length word, then key words) holds this key.
    pub(crate) fn matches(&self, stored: &[AtomicU64]) -> bool {
        let key = &stored[W_KEY..];
        if stored[W_LEN].load(Relaxed) != self.length_word() {
            return false;
        }
        let Form::Bytes(bytes) = self.form else {
            return (0..2).all(|i| key[i].load(Relaxed) == self.word(i));
        };
        // Whole words, then the short last one: no word is put together a byte at a time.
        let mut chunks = bytes.chunks_exact(8);
        let whole = |(chunk, word): (&[u8], &AtomicU64)| {
            let chunk: [u8; 8] = chunk.try_into().unwrap_or_default();
            word.load(Relaxed) == u64::from_le_bytes(chunk)
        };
        let rest = chunks.remainder();
        chunks.by_ref().zip(key).all(whole)
            && (rest.is_empty() || key[bytes.len() / 8].load(Relaxed) == short_word(rest))
    }

    /// Writes the key into `stored`.
    pub(crate) fn store(&self, stored: &[AtomicU64]) {
        stored[W_LEN].store(self.length_word(), Relaxed);
        super::fault::point();
        let key = &stored[W_KEY..];
        for (i, word) in key.iter().enumerate() {
            word.store(if i < self.words() { self.word(i) } else { 0 }, Relaxed);
            super::fault::point();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::short_word;

    #[test]
    fn a_short_word_is_the_bytes_zero_padded() {
        let bytes = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77];
        for len in 0..=7 {
            let mut padded = [0u8; 8];
            padded[..len].copy_from_slice(&bytes[..len]);
            assert_eq!(
                short_word(&bytes[..len]),
                u64::from_le_bytes(padded),
                "{len} bytes"
            );
        }
    }
}
