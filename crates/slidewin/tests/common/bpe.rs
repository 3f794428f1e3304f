//! A naive reference of tiktoken's counting, written plainly to check `slidewin::llm::tokens`
//! against, and a small table trained with it (the real tables are not on the test machines).
//! Used by crates/slidewin/tests/llm_tokens.rs, the `tokens` bench and the nginx tests.
#![allow(dead_code)] // each user takes part of it

use std::collections::HashMap;

use base64::Engine;
use regex::Regex;

/// tiktoken's cl100k_base alternatives (tiktoken 0.14: its possessive quantifiers match
/// as greedy ones here), in order; `None`: `\s+(?!\S)`, done by hand.
const CL100K: &[Option<&str>] = &[
    Some(r"'(?i:[sdmt]|ll|ve|re)"),
    Some(r"[^\r\n\p{L}\p{N}]?\p{L}+"),
    Some(r"\p{N}{1,3}"),
    Some(r" ?[^\s\p{L}\p{N}]+[\r\n]*"),
    Some(r"\s+$"),
    Some(r"\s*[\r\n]"),
    None,
    Some(r"\s"),
];

/// tiktoken's o200k_base alternatives, in order.
const O200K: &[Option<&str>] = &[
    Some(
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    ),
    Some(
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    ),
    Some(r"\p{N}{1,3}"),
    Some(r" ?[^\s\p{L}\p{N}]+[\r\n/]*"),
    Some(r"\s*[\r\n]+"),
    None,
    Some(r"\s+"),
];

/// A backtracking engine's reading of the pattern: at each position, the first alternative
/// that matches there, each anchored on its own; `\s+(?!\S)` takes the whole whitespace run
/// and gives back characters until what follows is not a non-space.
pub struct RefSplit {
    alternatives: Vec<Option<Regex>>,
}

impl RefSplit {
    /// `o200k`: o200k_base's pattern, else cl100k_base's.
    pub fn new(o200k: bool) -> RefSplit {
        let alternatives = if o200k { O200K } else { CL100K };
        let alternatives = alternatives
            .iter()
            .map(|a| a.map(|p| Regex::new(&format!("^(?:{p})")).unwrap()))
            .collect();
        RefSplit { alternatives }
    }

    /// The pieces of `text`.
    pub fn pieces<'a>(&self, text: &'a str) -> Vec<&'a str> {
        let mut pieces = Vec::new();
        let mut at = 0;
        let mut gap = 0;
        while at < text.len() {
            let rest = &text[at..];
            let len = self.alternatives.iter().find_map(|a| match a {
                Some(regex) => regex.find(rest).map(|m| m.end()),
                None => lookahead_run(rest),
            });
            match len {
                Some(len) => {
                    if gap < at {
                        pieces.push(&text[gap..at]);
                    }
                    pieces.push(&rest[..len]);
                    at += len;
                    gap = at;
                }
                None => at += rest.chars().next().unwrap().len_utf8(),
            }
        }
        if gap < text.len() {
            pieces.push(&text[gap..]);
        }
        pieces
    }
}

/// `\s+(?!\S)` at the start of `rest`: its length in bytes, if it matches.
fn lookahead_run(rest: &str) -> Option<usize> {
    let mut ends: Vec<usize> = rest
        .char_indices()
        .take_while(|(_, c)| c.is_whitespace())
        .map(|(i, c)| i + c.len_utf8())
        .collect();
    while let Some(end) = ends.pop() {
        match rest[end..].chars().next() {
            Some(c) if !c.is_whitespace() => continue,
            _ => return Some(end),
        }
    }
    None
}

/// A table: token bytes to rank.
pub type Ranks = HashMap<Vec<u8>, u32>;

/// tiktoken's count of one piece, plainly: 1 when the piece is a token, else its bytes
/// merged, the adjacent pair of lowest rank first (the leftmost of equals), until no pair is
/// a token.
pub fn ref_piece(ranks: &Ranks, piece: &[u8]) -> u64 {
    if ranks.contains_key(piece) {
        return 1;
    }
    let mut parts: Vec<Vec<u8>> = piece.iter().map(|&b| vec![b]).collect();
    loop {
        let mut best: Option<(u32, usize)> = None;
        for i in 0..parts.len().saturating_sub(1) {
            let pair = [parts[i].as_slice(), parts[i + 1].as_slice()].concat();
            if let Some(&r) = ranks.get(&pair) {
                if best.is_none_or(|(b, _)| r < b) {
                    best = Some((r, i));
                }
            }
        }
        let Some((_, i)) = best else {
            return parts.len() as u64;
        };
        let next = parts.remove(i + 1);
        parts[i].extend(next);
    }
}

/// tiktoken's count of `text`, plainly; pieces longer than `longest` bytes count one token
/// per byte (as slidewin's does).
pub fn ref_count(split: &RefSplit, ranks: &Ranks, text: &str, longest: usize) -> u64 {
    split
        .pieces(text)
        .iter()
        .map(|p| match p.len() > longest {
            true => p.len() as u64,
            false => ref_piece(ranks, p.as_bytes()),
        })
        .sum()
}

/// A table trained on `text`: the 256 bytes (ranks 0 to 255), then up to `merges` tokens,
/// each the most frequent adjacent pair within the pieces of `text` (cl100k_base's split),
/// the smallest bytes first among equals.
pub fn train(text: &str, merges: usize) -> Ranks {
    let mut ranks: Ranks = (0..=255u8).map(|b| (vec![b], u32::from(b))).collect();
    let mut words: Vec<Vec<Vec<u8>>> = RefSplit::new(false)
        .pieces(text)
        .iter()
        .map(|w| w.bytes().map(|b| vec![b]).collect())
        .collect();
    for rank in 256..256 + merges as u32 {
        let mut pairs: HashMap<Vec<u8>, usize> = HashMap::new();
        for w in &words {
            for p in w.windows(2) {
                *pairs
                    .entry([p[0].as_slice(), p[1].as_slice()].concat())
                    .or_default() += 1;
            }
        }
        let Some((best, _)) = pairs
            .into_iter()
            .filter(|(p, _)| !ranks.contains_key(p))
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        else {
            break;
        };
        for w in &mut words {
            let mut i = 0;
            while i + 1 < w.len() {
                if w[i].len() + w[i + 1].len() == best.len()
                    && [w[i].as_slice(), w[i + 1].as_slice()].concat() == best
                {
                    let next = w.remove(i + 1);
                    w[i].extend(next);
                }
                i += 1;
            }
        }
        ranks.insert(best, rank);
    }
    ranks
}

/// The table in tiktoken's format, by rank.
pub fn tiktoken(ranks: &Ranks) -> String {
    let mut by_rank: Vec<(&u32, &Vec<u8>)> = ranks.iter().map(|(t, r)| (r, t)).collect();
    by_rank.sort();
    let b64 = base64::engine::general_purpose::STANDARD;
    by_rank
        .iter()
        .map(|(r, t)| format!("{} {r}\n", b64.encode(t)))
        .collect()
}

/// Sample text to train on: prose, code, numbers, contractions, whitespace and some Unicode.
pub const SAMPLE: &str =
    "The quick brown fox jumps over the lazy dog. It's the dog's day; they're \
    sure we'll see what I'd do, and you've been told. Rate limits keep the window's count under \
    its limit: 1000 tokens per 10000 ms, 2026-12-07 at 04:40.\n\n    fn main() {\n        \
    let count = tokens.count(\"hello world\");\n    }\n\nUne fenêtre glissante compte les jetons. \
    Ein gleitendes Fenster zählt die Tokens. Скользящее окно считает токены. 滑动窗口计算令牌。\n\
    The the the quick quick brown brown fox fox limit limit window window tokens tokens count.";
