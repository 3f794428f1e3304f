//! Token counts with a tokenizer table (slidewin::llm::tokens) against a naive reference
//! (common/bpe.rs), and table errors.
#![cfg(feature = "llm")]

#[path = "common/bpe.rs"]
mod bpe;

use std::sync::LazyLock;

use bpe::{ref_count, ref_piece, tiktoken, train, Ranks, RefSplit, SAMPLE};
use proptest::prelude::*;
use slidewin::llm::tokens::{Split, Tokenizer, LONGEST_PIECE};

static RANKS: LazyLock<Ranks> = LazyLock::new(|| train(&SAMPLE.repeat(3), 400));
static CL100K: LazyLock<Tokenizer> = LazyLock::new(|| table(Split::Cl100k));
static O200K: LazyLock<Tokenizer> = LazyLock::new(|| table(Split::O200k));
static REF_CL100K: LazyLock<RefSplit> = LazyLock::new(|| RefSplit::new(false));
static REF_O200K: LazyLock<RefSplit> = LazyLock::new(|| RefSplit::new(true));

fn table(split: Split) -> Tokenizer {
    Tokenizer::new(tiktoken(&RANKS).as_bytes(), split).unwrap()
}

fn both(text: &str) {
    let cl = ref_count(&REF_CL100K, &RANKS, text, LONGEST_PIECE);
    assert_eq!(CL100K.count(text), cl, "cl100k {text:?}");
    let o = ref_count(&REF_O200K, &RANKS, text, LONGEST_PIECE);
    assert_eq!(O200K.count(text), o, "o200k {text:?}");
}

#[test]
fn the_reference_splits_as_tiktoken_does() {
    let cl = |t| REF_CL100K.pieces(t);
    assert_eq!(cl("hello world"), ["hello", " world"]);
    assert_eq!(cl("I'm  here"), ["I", "'m", " ", " here"]);
    assert_eq!(cl("1234567"), ["123", "456", "7"]);
    assert_eq!(cl("a\n\n  b  "), ["a", "\n\n", " ", " b", "  "]);
    assert_eq!(cl("x!!\n\ny"), ["x", "!!\n\n", "y"]);
    assert_eq!(cl("DON'T"), ["DON", "'T"]);
    let o = |t| REF_O200K.pieces(t);
    assert_eq!(o("HelloWorld don't"), ["Hello", "World", " don't"]);
    assert_eq!(o("a/b//\n"), ["a", "/b", "//\n"]);
    assert_eq!(o("   x"), ["  ", " x"]);
}

#[test]
fn counts_agree_with_the_reference_on_chosen_texts() {
    assert!(RANKS.len() > 500, "{} tokens trained", RANKS.len());
    for text in [
        "",
        "The quick brown fox jumps over the lazy dog.",
        "It's the dog's day; they're sure we'll see what I'd do",
        "    fn main() {\n        let x = 1;\n    }\n",
        "tokens\t\t\n \u{a0}\u{3000}x  \r\n\r\n",
        "Скользящее окно 滑动窗口 Fenêtre ǅx ʰa e\u{301}",
        "12345678901234567890 3.14159 2026-12-07",
        "😀😀 emoji 😀",
        &"the ".repeat(100),
        &"a".repeat(LONGEST_PIECE),
        &"a".repeat(LONGEST_PIECE + 1),
    ] {
        both(text);
    }
    // A piece over LONGEST_PIECE counts its bytes.
    assert_eq!(
        CL100K.count(&"ab".repeat(200)),
        400,
        "a run of letters too long to encode"
    );
}

#[test]
fn a_piece_that_is_a_token_is_one() {
    let word = RANKS
        .iter()
        .filter(|(t, _)| t.len() > 3)
        .map(|(t, _)| String::from_utf8(t.clone()))
        .find_map(Result::ok)
        .unwrap();
    assert_eq!(ref_piece(&RANKS, word.as_bytes()), 1);
    assert_eq!(
        CL100K.count(word.trim()),
        ref_count(&REF_CL100K, &RANKS, word.trim(), 256)
    );
}

/// Texts of fragments that exercise the split: letters of each case, contractions, digits,
/// whitespace runs of every kind, symbols, marks, and other scripts.
fn texts() -> impl Strategy<Value = String> {
    let fragment = prop::sample::select(vec![
        "a", "b", "the", "quick", "Hello", "HELLO", "WoRlD", " ", "  ", "   ", "\n", "\r\n", "\t",
        "\u{a0}", "\u{3000}", "'s", "'T", "'re", "'ll", "'", "1", "12", "123", "4567", "é",
        "e\u{301}", "ǅ", "ʰ", "ж", "Ж", "滑", "😀", "!", "?!", ".", "/", "//", "{", "}", "_", "-",
        "$", "1.5", "don't", "fox", " fox", "tokens",
    ]);
    prop::collection::vec(fragment, 0..40).prop_map(|f| f.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn counts_agree_with_the_reference(text in texts()) {
        both(&text);
    }

    #[test]
    fn counts_agree_on_any_text(text in any::<String>()) {
        both(&text);
    }
}

#[test]
fn bad_tables_name_the_line_and_what_is_wrong() {
    let good = tiktoken(&RANKS);
    let bad = |table: &str| {
        Tokenizer::new(table.as_bytes(), Split::Cl100k)
            .unwrap_err()
            .0
    };
    let cases = [
        (
            format!("{good}aGk=\n"),
            "must be \"BASE64TOKEN RANK\", got \"aGk=\"",
        ),
        (format!("{good}aGk= 1 2\n"), "must be \"BASE64TOKEN RANK\""),
        (
            format!("{good}!!!! 9000\n"),
            "token must be base64, got \"!!!! 9000\"",
        ),
        (
            format!("{good}aGk= x\n"),
            "rank must be an integer from 0 to 4294967294, got \"x\"",
        ),
        (format!("{good}aGk= -1\n"), "got \"-1\""),
        (format!("{good}aGk= 4294967295\n"), "got \"4294967295\""),
        (
            format!("{good} 9000\n"),
            "token must be 1 to 65535 bytes, got 0 bytes",
        ),
        (
            format!("{good}AA== 9000\n"),
            "token must be new, got a token given rank 0 before",
        ),
    ];
    let lines = good.lines().count();
    for (table, message) in cases {
        let got = bad(&table);
        let line = format!("line {}: ", lines + 1);
        assert!(got.starts_with(&line), "{got}");
        assert!(got.contains(message), "{got} / {message}");
    }
    let twice = format!("{good}aGk= 5\n");
    assert_eq!(
        bad(&twice),
        format!(
            "line {}: rank must be new, got rank 5 again (line 6)",
            lines + 1
        )
    );
    let no_byte: String = good.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert_eq!(
        bad(&no_byte),
        "table must have a token for each byte: byte 0x00 has none"
    );
    // CRLF line ends and a last line without one are read.
    let crlf = good.replace('\n', "\r\n");
    let table = Tokenizer::new(crlf.trim_end().as_bytes(), Split::O200k).unwrap();
    assert_eq!((table.len(), table.split()), (RANKS.len(), Split::O200k));
    assert_eq!(Split::from_name("o200k_base"), Some(Split::O200k));
    assert_eq!(Split::from_name("cl100k"), Some(Split::Cl100k));
    assert_eq!(Split::from_name("p50k"), None);
}

