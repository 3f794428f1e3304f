//! Exact token counts with a tokenizer table: tiktoken's byte-level BPE over its pre-tokenizer.
//!
//! A [`Tokenizer`] reads a table in tiktoken's format, one token a line as `BASE64TOKEN RANK`
//! (OpenAI's `cl100k_base.tiktoken` and `o200k_base.tiktoken`), and the pre-tokenizer of that
//! table ([`Split`]). [`Tokenizer::count`] splits a text as tiktoken does, then encodes each
//! piece's UTF-8 bytes by merging, again and again, the adjacent pair whose concatenation has
//! the lowest rank (the leftmost of equals), and counts the tokens left: tiktoken's
//! `encode_ordinary` length, special tokens read as text.
//!
//! One exception keeps a crafted text from costing quadratic time: a piece longer than
//! [`LONGEST_PIECE`] bytes (a run of letters or symbols with no space between) counts one
//! token per byte, an upper bound, since every token is at least one byte.
//!
//! ```
//! use slidewin::llm::tokens::{Split, Tokenizer};
//!
//! // A table of the 256 bytes and one merge: "ab".
//! let mut table = String::new();
//! for b in 0..=255u8 {
//!     table += &format!("{} {b}\n", base64(&[b]));
//! }
//! table += &format!("{} 256\n", base64(b"ab"));
//! let tokenizer = Tokenizer::new(table.as_bytes(), Split::Cl100k)?;
//! // "abab cab" splits as "abab", " cab": ab|ab and " "|c|ab.
//! assert_eq!(tokenizer.count("abab cab"), 5);
//! # fn base64(b: &[u8]) -> String {
//! #     use base64::Engine;
//! #     base64::engine::general_purpose::STANDARD.encode(b)
//! # }
//! # Ok::<(), slidewin::llm::tokens::BadTable>(())
//! ```

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::hash::BuildHasher;

use base64::Engine;
use foldhash::fast::FixedState;
use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, MatchKind};

/// The longest piece encoded exactly, in bytes; a longer one counts one token per byte.
pub const LONGEST_PIECE: usize = 255;

/// The pre-tokenizer of a table: how a text is cut into pieces before each is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// `cl100k_base` (GPT-4, GPT-3.5, text-embedding-3).
    Cl100k,
    /// `o200k_base` (GPT-4o, GPT-4.1, o1, o3, o4-mini).
    O200k,
}

impl Split {
    /// The split of a name: `cl100k` or `o200k` (`_base` after it is allowed too).
    pub fn from_name(name: &str) -> Option<Split> {
        match name.strip_suffix("_base").unwrap_or(name) {
            "cl100k" => Some(Split::Cl100k),
            "o200k" => Some(Split::O200k),
            _ => None,
        }
    }

    /// The table's pattern (tiktoken 0.14's), as three patterns tried at each position in
    /// order: the alternatives before `\s+(?!\S)`, and `\s+$` (at the end of the text it
    /// matches what the lookahead would); then `\s+\s`, whose last character is given back
    /// (the lookahead, emulated: a whitespace run that a non-space follows leaves its last
    /// character to the piece after it, as tiktoken's backtracking does); then the last
    /// alternative. cl100k_base's possessive quantifiers (`?+`, `++`, `*+`) match as the
    /// greedy ones do here: nothing after them in their alternative could take back a
    /// character.
    fn patterns(self) -> [&'static str; 3] {
        match self {
            // tiktoken's: '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|
            // ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
            Split::Cl100k => [
                concat!(
                    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}",
                    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s+$|\s*[\r\n]",
                ),
                r"\s+\s",
                r"\s",
            ],
            // tiktoken's, whose last three alternatives are \s*[\r\n]+|\s+(?!\S)|\s+
            Split::O200k => [
                concat!(
                    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
                    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
                    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+$",
                ),
                r"\s+\s",
                r"\s+",
            ],
        }
    }
}

/// The pattern whose match gives its last character back (`\s+\s`).
const LOOKAHEAD: usize = 1;

/// A table the tokenizer refuses, with the line and what is wrong in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTable(pub String);

impl fmt::Display for BadTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One token of the table, 16 bytes: its first 8 bytes (the whole of 80% of cl100k_base's
/// tokens, compared without a look elsewhere), its rank, and where the rest lies in
/// `Tokenizer::bytes`.
#[derive(Clone, Copy, Default)]
struct Slot {
    /// The token's first 8 bytes, little-endian, zeros after a shorter one.
    prefix: u64,
    rank: u32,
    /// Its start in `bytes` (the high 24 bits) and its length (the low 8); 0: no token.
    at: u32,
}

/// The first 8 bytes of `bytes`, little-endian, zeros after fewer.
fn prefix(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<8>() {
        Some(head) => u64::from_le_bytes(*head),
        None => bytes.iter().rev().fold(0, |v, &b| v << 8 | u64::from(b)),
    }
}

/// A tokenizer table and its pre-tokenizer; counts tokens of texts ([`Tokenizer::count`]).
pub struct Tokenizer {
    /// Every token's bytes, one after the other.
    bytes: Vec<u8>,
    /// An open-addressing table of the tokens (linear probing, a power of two long, at most
    /// half full), indexed by the top bits of a hash.
    slots: Vec<Slot>,
    /// 64 - log2(slots.len()).
    shift: u32,
    /// The hash of tokens over 8 bytes.
    hasher: FixedState,
    tokens: usize,
    split: Split,
    regex: Regex,
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("tokens", &self.len())
            .field("split", &self.split)
            .finish()
    }
}

impl Tokenizer {
    /// Reads a table in tiktoken's format (`BASE64TOKEN RANK` a line), for `split`. Ranks
    /// must be distinct integers below 2^32 - 1, tokens distinct and non-empty, under 16 MiB
    /// in all, and every one of the 256 bytes a token of its own. A token over
    /// [`LONGEST_PIECE`] bytes is never looked up (no piece that long is encoded) and is not
    /// kept.
    pub fn new(table: &[u8], split: Split) -> Result<Tokenizer, BadTable> {
        let mut tokens = Vec::new();
        let mut bytes = Vec::with_capacity(table.len() * 3 / 4);
        for (i, line) in table.split(|&b| b == b'\n').enumerate() {
            let n = i + 1;
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            let shown = String::from_utf8_lossy(&line[..line.len().min(60)]);
            let mut fields = line.split(|&b| b == b' ');
            let (Some(token), Some(rank), None) = (fields.next(), fields.next(), fields.next())
            else {
                let got = format!("\"{shown}\"");
                return Err(bad(n, "must be \"BASE64TOKEN RANK\"", &got));
            };
            let start = bytes.len();
            base64::engine::general_purpose::STANDARD
                .decode_vec(token, &mut bytes)
                .map_err(|e| bad(n, "token must be base64", &format!("\"{shown}\" ({e})")))?;
            let len = bytes.len() - start;
            if len == 0 {
                return Err(bad(n, "token must be 1 byte or more", "0"));
            }
            let rank = core::str::from_utf8(rank)
                .ok()
                .and_then(|r| r.parse::<u32>().ok())
                .filter(|&r| r < u32::MAX)
                .ok_or_else(|| {
                    let got = format!("\"{}\"", String::from_utf8_lossy(rank));
                    bad(n, "rank must be an integer from 0 to 4294967294", &got)
                })?;
            if start + len > 1 << 24 {
                let got = format!("{} bytes so far", start + len);
                return Err(bad(n, "tokens must be under 16 MiB in all", &got));
            }
            tokens.push((start as u32, len, rank, n));
        }
        let slots = (tokens.len() * 2).next_power_of_two().max(16);
        let mut tokenizer = Tokenizer {
            bytes,
            slots: vec![Slot::default(); slots],
            shift: 64 - slots.trailing_zeros(),
            hasher: FixedState::with_seed(0x736c_6964_6577_696e),
            tokens: tokens.len(),
            split,
            regex: Regex::builder()
                .syntax(syntax::Config::new().unicode(true).utf8(true))
                .configure(Regex::config().match_kind(MatchKind::LeftmostFirst))
                .build_many(&split.patterns())
                .map_err(|e| BadTable(format!("split {split:?} does not compile: {e}")))?,
        };
        for &(start, len, rank, n) in tokens.iter().filter(|t| t.1 <= LONGEST_PIECE) {
            if let Some(first) = tokenizer.insert(start, len as u32, rank) {
                let got = format!("a token given rank {first} before");
                return Err(bad(n, "token must be new", &got));
            }
        }
        let mut ranks: Vec<(u32, usize)> = tokens.iter().map(|t| (t.2, t.3)).collect();
        ranks.sort_unstable();
        if let Some(w) = ranks.windows(2).find(|w| w[0].0 == w[1].0) {
            let got = format!("rank {} again (line {})", w[1].0, w[0].1);
            return Err(bad(w[1].1, "rank must be new", &got));
        }
        if let Some(b) = (0..=255u8).find(|&b| tokenizer.rank(&[b]).is_none()) {
            return Err(BadTable(format!(
                "table must have a token for each byte: byte 0x{b:02x} has none"
            )));
        }
        Ok(tokenizer)
    }

    /// How many tokens the table has (those not kept, over [`LONGEST_PIECE`] bytes, too).
    pub fn len(&self) -> usize {
        self.tokens
    }

    /// Whether the table holds no token (never: a table has the 256 bytes at least).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pre-tokenizer it was made with.
    pub fn split(&self) -> Split {
        self.split
    }

    /// The number of tokens of `text`; see the module's introduction.
    pub fn count(&self, text: &str) -> u64 {
        self.counter().count(text)
    }

    /// A counter: its scratch space kept from one text to the next, for many texts.
    pub fn counter(&self) -> Counter<'_> {
        Counter {
            tokenizer: self,
            parts: Vec::with_capacity(LONGEST_PIECE + 1),
        }
    }

    /// The slot for `bytes` (at most [`LONGEST_PIECE`] long): its own, or the empty one where
    /// it would go.
    fn slot(&self, bytes: &[u8]) -> usize {
        let (len, head) = (bytes.len(), prefix(bytes));
        let hash = match len {
            0..=8 => head ^ (len as u64) << 59,
            _ => self.hasher.hash_one(bytes),
        };
        let mask = self.slots.len() - 1;
        let mut i = (hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize;
        loop {
            let s = self.slots[i];
            if s.at == 0 {
                return i;
            }
            if s.prefix == head && (s.at & 0xff) as usize == len {
                let start = (s.at >> 8) as usize;
                if len <= 8 || self.bytes[start + 8..start + len] == bytes[8..] {
                    return i;
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds the token at `start..start + len` of `self.bytes`; `Some(rank)`: it was there.
    fn insert(&mut self, start: u32, len: u32, rank: u32) -> Option<u32> {
        let token = &self.bytes[start as usize..(start + len) as usize];
        let (i, prefix) = (self.slot(token), prefix(token));
        if self.slots[i].at != 0 {
            return Some(self.slots[i].rank);
        }
        let at = start << 8 | len;
        self.slots[i] = Slot { prefix, rank, at };
        None
    }

    /// The rank of the token `bytes`, if it is one.
    fn rank(&self, bytes: &[u8]) -> Option<u32> {
        let s = self.slots[self.slot(bytes)];
        (s.at != 0).then_some(s.rank)
    }
}

fn bad(line: usize, what: &str, got: &str) -> BadTable {
    BadTable(format!("line {line}: {what}, got {got}"))
}

/// Counts tokens of texts with one [`Tokenizer`], reusing its scratch space (the regex's
/// caches are the regex's own, kept per thread).
pub struct Counter<'t> {
    tokenizer: &'t Tokenizer,
    /// The merge's parts: each one's start in the piece and the rank of it joined with the
    /// next (`u32::MAX`: no token).
    parts: Vec<(usize, u32)>,
}

impl Counter<'_> {
    /// The number of tokens of `text`.
    pub fn count(&mut self, text: &str) -> u64 {
        let mut total = 0;
        let mut at = 0;
        let regex = &self.tokenizer.regex;
        while at < text.len() {
            // Anchored where the last piece ended (one pass of the lazy DFA, forward only),
            // which matches unless no pattern takes the next character.
            let input = Input::new(text).range(at..);
            let found = match regex.search(&input.clone().anchored(Anchored::Yes)) {
                None => regex.search(&input),
                anchored => anchored,
            };
            let Some(m) = found else {
                total += self.piece(&text.as_bytes()[at..]);
                break;
            };
            let mut end = m.end();
            if m.pattern().as_usize() == LOOKAHEAD {
                end -= text[..end].chars().next_back().map_or(0, char::len_utf8);
            }
            if m.start() > at {
                total += self.piece(&text.as_bytes()[at..m.start()]);
            }
            total += self.piece(&text.as_bytes()[m.start()..end]);
            at = end;
        }
        total
    }

    /// The tokens of one piece: tiktoken's `byte_pair_merge`.
    fn piece(&mut self, piece: &[u8]) -> u64 {
        let table = self.tokenizer;
        if piece.len() <= 1 || table.rank(piece).is_some() {
            return piece.len().min(1) as u64;
        }
        if piece.len() > LONGEST_PIECE {
            return piece.len() as u64;
        }
        let rank = |parts: &[(usize, u32)], i: usize| match parts.get(i + 3) {
            Some(&(end, _)) => table.rank(&piece[parts[i].0..end]).unwrap_or(u32::MAX),
            None => u32::MAX,
        };
        let parts = &mut self.parts;
        parts.clear();
        parts.extend((0..piece.len() - 1).map(|i| {
            let pair = table.rank(&piece[i..i + 2]).unwrap_or(u32::MAX);
            (i, pair)
        }));
        parts.push((piece.len() - 1, u32::MAX));
        parts.push((piece.len(), u32::MAX));
        loop {
            let (mut least, mut at) = (u32::MAX, 0);
            for (i, &(_, r)) in parts[..parts.len() - 1].iter().enumerate() {
                if r < least {
                    (least, at) = (r, i);
                }
            }
            if least == u32::MAX {
                break;
            }
            if at > 0 {
                parts[at - 1].1 = rank(parts, at - 1);
            }
            parts[at].1 = rank(parts, at);
            parts.remove(at + 1);
        }
        (parts.len() - 1) as u64
    }
}
