//! Keys in a shared region: any bytes. Keys of up to `max_key_bytes` are stored as they are
//! (so two keys share a state only if they are equal); longer ones as a 128-bit SipHash digest
//! under the region's secret seed (two keys then share a state only on a 2^-128 collision that
//! an attacker who does not know the seed cannot aim at).

use core::hash::{BuildHasher, Hasher};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::keyed::KeyHasher;

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
        let len = words[super::W_LEN].load(Relaxed);
        let key = &words[super::W_KEY..];
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
                let mut word = [0u8; 8];
                let n = chunk.len().min(8);
                word[..n].copy_from_slice(&chunk[..n]);
                u64::from_le_bytes(word)
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
        let key = &stored[super::W_KEY..];
        stored[super::W_LEN].load(Relaxed) == self.length_word()
            && (0..self.words()).all(|i| key[i].load(Relaxed) == self.word(i))
    }

    /// Writes the key into `stored`.
    pub(crate) fn store(&self, stored: &[AtomicU64]) {
        stored[super::W_LEN].store(self.length_word(), Relaxed);
        let key = &stored[super::W_KEY..];
        for (i, word) in key.iter().enumerate() {
            word.store(if i < self.words() { self.word(i) } else { 0 }, Relaxed);
        }
    }
}
