//! Token counts with a tokenizer table (slidewin::llm::tokens) against a naive reference
//! (common/bpe.rs), table errors, and the prompt's bound with a table never below the count
//! a chat format gives.
#![cfg(feature = "llm")]

#[path = "common/bpe.rs"]
mod bpe;

use std::sync::LazyLock;

use bpe::{ref_count, ref_piece, tiktoken, train, Ranks, RefSplit, SAMPLE};
use proptest::prelude::*;
use serde_json::{json, Value};
use slidewin::llm::prompt::{PER_MESSAGE, PER_NAME, REPLY};
use slidewin::llm::request;
use slidewin::llm::tokens::{Split, Tokenizer, LONGEST_PIECE};
use slidewin::llm::Endpoint;

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
    // A whitespace run at the end is one piece in cl100k_base (tiktoken 0.14's \s++$ comes
    // before \s*[\r\n]), not in o200k_base.
    assert_eq!(cl("x\n \n "), ["x", "\n \n "]);
    assert_eq!(REF_O200K.pieces("x\n \n "), ["x", "\n \n", " "]);
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
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn counts_agree_with_the_reference(text in texts()) {
        both(&text);
    }

    #[test]
    fn counts_agree_on_any_text(text in any::<String>()) {
        both(&text);
    }
}

/// tiktoken's own counts on OpenAI's cl100k_base table, both splits (scripts/check-tiktoken.sh
/// writes them and runs this).
#[test]
#[ignore = "needs tiktoken's counts: scripts/check-tiktoken.sh"]
fn counts_agree_with_tiktoken() {
    let var = |name| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let table = std::fs::read(var("SLIDEWIN_TIKTOKEN_TABLE")).unwrap();
    let cases = std::fs::read_to_string(var("SLIDEWIN_TIKTOKEN_CASES")).unwrap();
    let cl100k = Tokenizer::new(&table, Split::Cl100k).unwrap();
    let o200k = Tokenizer::new(&table, Split::O200k).unwrap();
    assert_eq!(cl100k.len(), 100_256);
    let mut checked = 0;
    for line in cases.lines() {
        let case: Value = serde_json::from_str(line).unwrap();
        let text = case["text"].as_str().unwrap();
        let tokenizer = match case["split"].as_str() {
            Some("o200k") => &o200k,
            _ => &cl100k,
        };
        let expected = case["count"].as_u64().unwrap();
        assert_eq!(
            tokenizer.count(text),
            expected,
            "{:?} {text:?}",
            case["split"]
        );
        checked += 1;
    }
    assert!(checked > 1000, "{checked} cases");
    println!("{checked} texts counted as tiktoken does");
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
            "token must be 1 byte or more, got 0",
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

/// What a chat format costs, as OpenAI's cookbook counts it: 3 per message, the tokens of
/// each role, content and name, 1 per name, 3 to prime the reply.
fn cookbook(messages: &[Value]) -> u64 {
    let count = |s: &str| ref_count(&REF_CL100K, &RANKS, s, LONGEST_PIECE);
    let mut total = 3;
    for m in messages {
        total += 3;
        for (key, value) in m.as_object().unwrap() {
            let text = match value {
                Value::String(s) => count(s),
                Value::Array(parts) => parts
                    .iter()
                    .map(|p| count(p["text"].as_str().unwrap()))
                    .sum(),
                _ => 0,
            };
            total += text + u64::from(key == "name");
        }
    }
    total
}

#[test]
fn the_bound_of_a_chat_is_its_text_and_the_documented_overhead() {
    let content = "The quick brown fox jumps over the lazy dog. ".repeat(10);
    let body = json!({"model": "m", "max_tokens": 100, "temperature": 0.5, "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "name": "ann", "content": content},
        {"role": "user", "content": [{"type": "text", "text": "and this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
    ], "tools": [{"type": "function", "function": {"name": "f"}}]});
    let text = body.to_string();
    let bytes = request::read(text.as_bytes(), Endpoint::ChatCompletions, 700, None).unwrap();
    let req = request::read(
        text.as_bytes(),
        Endpoint::ChatCompletions,
        700,
        Some(&CL100K),
    );
    let tools = r#""tools":[{"function":{"name":"f"},"type":"function"}],"#.len() as u64;
    let count = |s: &str| CL100K.count(s);
    let expected = REPLY
        + 3 * PER_MESSAGE
        + count("system")
        + count("You are terse.")
        + 2 * count("user")
        + count("ann")
        + PER_NAME
        + count(&content)
        + count("and this")
        + 700
        + tools;
    assert_eq!(req.unwrap().prompt_bound, expected);
    // The text's bound about a third of its bytes' here.
    let text_bound = expected - 700;
    assert!(
        text_bound * 3 < bytes.prompt_bound - 700,
        "{expected} / {bytes:?}"
    );
}

#[test]
fn the_bound_of_inputs_and_members_not_read() {
    let bound = |body: Value, endpoint| {
        let text = body.to_string();
        request::read(text.as_bytes(), endpoint, 50, Some(&CL100K))
            .unwrap()
            .prompt_bound
    };
    let count = |s: &str| CL100K.count(s);
    let embed = json!({"model": "m", "input": ["one two", "three"], "dimensions": 8});
    let embed_bound = count("one two") + count("three");
    assert_eq!(bound(embed, Endpoint::Embeddings), embed_bound);
    // Token ids by their bytes.
    let ids = json!({"model": "m", "input": [[1, 22, 333]]});
    assert_eq!(bound(ids, Endpoint::Embeddings), "[1,22,333]".len() as u64);
    let responses = json!({"model": "m", "instructions": "be brief", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"},
            {"type": "input_image", "image_url": "https://x/y.png"}]}],
        "response_format": {"type": "json_object"}});
    // Responses make messages of instructions and input: each adds its format's tokens.
    let expected = count("be brief")
        + PER_MESSAGE
        + REPLY
        + PER_MESSAGE
        + count("user")
        + count("hi")
        + 50
        + r#""response_format":{"type":"json_object"},"#.len() as u64;
    assert_eq!(bound(responses, Endpoint::Responses), expected);
    let plain = json!({"model": "m", "input": "hi there"});
    let expected = count("hi there") + PER_MESSAGE + REPLY;
    assert_eq!(bound(plain, Endpoint::Responses), expected);
    // A completion's prompt is its text alone.
    let prompt = json!({"model": "m", "prompt": "hi there"});
    assert_eq!(bound(prompt, Endpoint::Completions), count("hi there"));
    // A message's other members (tool_calls) by their bytes.
    let calls = json!({"model": "m", "messages": [{"role": "assistant", "content": null,
        "tool_calls": [{"id": "c", "type": "function"}]}]});
    let expected = REPLY
        + PER_MESSAGE
        + count("assistant")
        + r#""tool_calls":[{"id":"c","type":"function"}],"#.len() as u64;
    assert_eq!(bound(calls, Endpoint::ChatCompletions), expected);
}

fn messages() -> impl Strategy<Value = Vec<Value>> {
    let text = texts();
    let message = (
        prop::sample::select(vec!["system", "user", "assistant"]),
        prop::option::of("[a-z]{1,8}"),
        prop::collection::vec(texts(), 0..3),
        text,
        any::<bool>(),
    )
        .prop_map(|(role, name, parts, text, as_parts)| {
            let content = match as_parts {
                true => Value::Array(
                    parts
                        .into_iter()
                        .map(|t| json!({"type": "text", "text": t}))
                        .collect(),
                ),
                false => Value::String(text),
            };
            let mut m = json!({"role": role, "content": content});
            if let Some(name) = name {
                m["name"] = Value::String(name);
            }
            m
        });
    prop::collection::vec(message, 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// The bound is never below the cookbook's count, nor above the body's bytes plus the
    /// reply's priming.
    #[test]
    fn the_bound_is_never_below_the_count(messages in messages()) {
        let body = json!({"model": "m", "messages": messages}).to_string();
        let req = request::read(body.as_bytes(), Endpoint::ChatCompletions, 0, Some(&CL100K));
        let bound = req.unwrap().prompt_bound;
        prop_assert!(bound >= cookbook(&messages), "{bound} < {}", cookbook(&messages));
        prop_assert!(bound <= body.len() as u64 + REPLY, "{bound} > {}", body.len());
    }
}
