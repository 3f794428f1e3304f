//! The language-model layer's readers: requests (bounds, caps, hostile bodies), usage and
//! weights, event streams cut anywhere.
#![cfg(feature = "llm")]

use proptest::prelude::*;
use slidewin::llm::events::EventStream;
use slidewin::llm::request::{self, MOST};
use slidewin::llm::usage::{self, Usage, Weights};
use slidewin::llm::Endpoint;

const CHAT: Endpoint = Endpoint::ChatCompletions;

fn bad(body: &[u8], endpoint: Endpoint) -> String {
    request::read(body, endpoint, 1_000, None).unwrap_err().0
}

#[test]
fn reads_caps_choices_streams_and_media() {
    let body = br#"{"model":"gpt","stream":true,"n":3,"max_completion_tokens":90,"max_tokens":120,
        "messages":[{"role":"user","content":[{"type":"text","text":"hi"},
        {"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}"#;
    let r = request::read(body, CHAT, 1_000, None).unwrap();
    assert_eq!(r.model, "gpt");
    assert_eq!(
        (r.cap, r.choices, r.stream, r.wants_usage),
        (Some(90), 3, true, false)
    );
    assert_eq!(r.prompt_bound, body.len() as u64 + 1_000);
    assert!(r.asks_usage());
    // Both caps written, the stream asked for its usage; other members keep their bytes.
    let out = String::from_utf8(r.rewrite(body, 40, true)).unwrap();
    let messages = r#"[{"role":"user","content":[{"type":"text","text":"hi"},
        {"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]"#;
    assert_eq!(
        out,
        format!(
            r#"{{"model":"gpt","stream":true,"n":3,"max_completion_tokens":40,"max_tokens":40,"messages":{messages},"stream_options":{{"include_usage":true}}}}"#
        )
    );

    let completions = br#"{"model":"m","prompt":"x","n":2,"best_of":5,"stream_options":{"include_usage":true,"other":1},"stream":true}"#;
    let r = request::read(completions, Endpoint::Completions, 0, None).unwrap();
    assert_eq!(
        (r.cap, r.choices, r.wants_usage, r.asks_usage()),
        (None, 5, true, false)
    );
    let out = String::from_utf8(r.rewrite(completions, 7, true)).unwrap();
    assert!(
        out.contains(r#""stream_options":{"include_usage":true,"other":1}"#),
        "{out}"
    );
    assert!(out.ends_with(r#","max_tokens":7}"#), "{out}");

    let responses = br#"{"model":"m","input":"hi","max_output_tokens":50,"stream":true}"#;
    let r = request::read(responses, Endpoint::Responses, 0, None).unwrap();
    assert_eq!((r.cap, r.asks_usage()), (Some(50), false));
    assert_eq!(
        r.rewrite(responses, 9, false),
        br#"{"model":"m","input":"hi","max_output_tokens":9,"stream":true}"#
    );

    let embeddings = br#"{"model":"e","input":["a","b"]}"#;
    let r = request::read(embeddings, Endpoint::Embeddings, 0, None).unwrap();
    assert_eq!(r.rewrite(embeddings, 9, false), embeddings);
}

/// Thirty hostile bodies, each refused with what is wrong in it.
#[test]
fn hostile_bodies_are_refused_by_name() {
    let deep = format!(
        r#"{{"model":"m","messages":{}1{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let huge = format!(
        r#"{{"model":"m","messages":[],"max_tokens":1{}}}"#,
        "0".repeat(400)
    );
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"".to_vec(), "body must be a JSON object: EOF"),
        (
            b"not json".to_vec(),
            "body must be a JSON object: expected ident",
        ),
        (
            br#"{"model":"m","messages":[{"role":"#.to_vec(),
            "body must be a JSON object: EOF",
        ),
        (
            b"[1,2]".to_vec(),
            "body must be a JSON object: invalid type: sequence",
        ),
        (
            b"\"text\"".to_vec(),
            "body must be a JSON object: invalid type: string",
        ),
        (
            b"null".to_vec(),
            "body must be a JSON object: invalid type: null",
        ),
        (
            br#"{"model":"m"} {}"#.to_vec(),
            "body must be a JSON object: trailing characters",
        ),
        (
            br#"{"model":"m",}"#.to_vec(),
            "body must be a JSON object: trailing comma",
        ),
        (
            b"{\"model\":\"m\xff\"}".to_vec(),
            "body must be UTF-8: invalid byte at 11",
        ),
        (
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00".to_vec(),
            "body must be UTF-8: invalid byte at 1",
        ),
        (
            b"\xef\xbb\xbf{\"model\":\"m\"}".to_vec(),
            "body must be a JSON object: expected value",
        ),
        (br#"{"messages":[]}"#.to_vec(), "model is missing"),
        (
            br#"{"model":5}"#.to_vec(),
            "model must be a non-empty string, got 5",
        ),
        (
            br#"{"model":""}"#.to_vec(),
            r#"model must be a non-empty string, got """#,
        ),
        (
            br#"{"model":null}"#.to_vec(),
            "model must be a non-empty string, got null",
        ),
        (
            br#"{"model":"m","model":"n"}"#.to_vec(),
            "body has member model twice",
        ),
        (
            br#"{"model":"m","max_tokens":1,"max_tokens":9}"#.to_vec(),
            "body has member max_tokens twice",
        ),
        (
            br#"{"model":"m","max_tokens":-5}"#.to_vec(),
            "max_tokens must be an integer from 0 to 9007199254740992, got -5",
        ),
        (
            br#"{"model":"m","max_tokens":1.5}"#.to_vec(),
            "max_tokens must be an integer from 0 to 9007199254740992, got 1.5",
        ),
        (
            br#"{"model":"m","max_tokens":"10"}"#.to_vec(),
            r#"max_tokens must be an integer from 0 to 9007199254740992, got "10""#,
        ),
        (
            br#"{"model":"m","max_tokens":1e300}"#.to_vec(),
            "max_tokens must be an integer from 0 to 9007199254740992, got 1e300",
        ),
        (
            huge.into_bytes(),
            "max_tokens must be an integer from 0 to 9007199254740992, got number out of range",
        ),
        (
            br#"{"model":"m","max_tokens":9007199254740993}"#.to_vec(),
            "max_tokens must be an integer from 0 to 9007199254740992, got 9007199254740993",
        ),
        (
            br#"{"model":"m","max_completion_tokens":[1]}"#.to_vec(),
            "max_completion_tokens must be an integer from 0 to 9007199254740992, got [1]",
        ),
        (
            br#"{"model":"m","n":0}"#.to_vec(),
            "n must be an integer from 1 to 9007199254740992, got 0",
        ),
        (
            br#"{"model":"m","stream":"yes"}"#.to_vec(),
            r#"stream must be a boolean, got "yes""#,
        ),
        (
            br#"{"model":"m","stream_options":true}"#.to_vec(),
            "stream_options must be an object, got true",
        ),
        (deep.into_bytes(), "messages: recursion limit exceeded"),
        (
            br#"{"model":"m","messages":"x\u0"}"#.to_vec(),
            "body must be a JSON object: EOF while parsing a string",
        ),
        (
            br#"{"model":"m"\u0000}"#.to_vec(),
            "body must be a JSON object: expected `,` or `}`",
        ),
    ];
    assert_eq!(cases.len(), 30);
    let wrong: Vec<String> = cases
        .iter()
        .map(|(body, want)| (String::from_utf8_lossy(body), bad(body, CHAT), want))
        .filter(|(_, got, want)| !got.starts_with(*want))
        .map(|(body, got, _)| format!("{body}: {got}"))
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
    // best_of counts for completions only; chat passes it on untouched.
    assert!(request::read(br#"{"model":"m","best_of":0}"#, CHAT, 0, None).is_ok());
    assert!(
        bad(br#"{"model":"m","best_of":0}"#, Endpoint::Completions).starts_with("best_of must be")
    );
}

#[test]
fn usage_of_every_shape() {
    let chat = br#"{"id":"x","usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42,
        "prompt_tokens_details":{"cached_tokens":8}}}"#;
    assert_eq!(usage::of_answer(chat), used(12, 8, 30));
    let responses = br#"{"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":9},"output_tokens":7}}"#;
    assert_eq!(usage::of_answer(responses), used(5, 5, 7));
    let embeddings = br#"{"data":[],"usage":{"prompt_tokens":4,"total_tokens":4}}"#;
    assert_eq!(usage::of_answer(embeddings), used(4, 0, 0));
    for none in [
        &br#"{"usage":null}"#[..],
        br#"{"usage":{"prompt_tokens":-1}}"#,
        br#"{"error":{}}"#,
        b"{",
        br#"{"usage":{"total_tokens":3}}"#,
    ] {
        assert_eq!(
            usage::of_answer(none),
            None,
            "{}",
            String::from_utf8_lossy(none)
        );
    }
}

#[test]
fn weights_cost_bound_and_cap() {
    let price = Weights::new(2.5, 1.25, 10.0).unwrap();
    let u = Usage {
        input: 100,
        cached: 40,
        output: 10,
    };
    assert_eq!(price.cost(u), 150 + 50 + 100);
    assert_eq!(price.bound(100, 10, 2), 250 + 200);
    assert_eq!(price.cap_within(450, 100, 2), 10);
    assert_eq!(price.cap_within(449, 100, 2), 9);
    assert_eq!(price.cap_within(249, 100, 2), 0);
    assert_eq!(
        Weights::new(1.0, 1.0, 0.0).unwrap().cap_within(100, 100, 1),
        MOST
    );
    let err = Weights::new(1.0, f64::NAN, 1.0).unwrap_err().to_string();
    assert!(err.contains("cached") && err.contains("NaN"), "{err}");
}

proptest! {
    /// A cap found always fits, and one more does not.
    #[test]
    fn cap_within_is_the_largest_that_fits(
        room in 0u64..1_000_000, prompt in 0u64..10_000, choices in 1u64..8,
        w in (0.0f64..20.0, 0.0f64..20.0, 0.01f64..20.0),
    ) {
        let weights = Weights::new(w.0, w.1, w.2).unwrap();
        let cap = weights.cap_within(room, prompt, choices);
        if weights.bound(prompt, 0, choices) <= room {
            prop_assert!(weights.bound(prompt, cap, choices) <= room);
            prop_assert!(weights.bound(prompt, cap + 1, choices) > room);
        } else {
            prop_assert_eq!(cap, 0);
        }
    }

    /// Cut anywhere, a stream passes the same bytes and reads the same usage.
    #[test]
    fn a_stream_cut_anywhere_reads_the_same(cuts in proptest::collection::vec(0usize..400, 0..12), strip: bool, crlf: bool) {
        let stream = sse(crlf);
        let (whole, usage) = pass(&stream, &[], strip);
        let (cut, cut_usage) = pass(&stream, &cuts, strip);
        prop_assert_eq!(whole, cut);
        prop_assert_eq!(usage, cut_usage);
    }
}

fn used(input: u64, cached: u64, output: u64) -> Option<Usage> {
    Some(Usage {
        input,
        cached,
        output,
    })
}

fn sse(crlf: bool) -> Vec<u8> {
    let nl = if crlf { "\r\n" } else { "\n" };
    let events = [
        r#"data: {"choices":[{"delta":{"content":"a"}}],"usage":null}"#,
        ": keep-alive",
        r#"data: {"choices":[{"delta":{"content":"b \"usage\": {"}}],"usage":null}"#,
        r#"data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
        "data: [DONE]",
    ];
    events
        .iter()
        .map(|e| format!("{e}{nl}{nl}"))
        .collect::<String>()
        .into_bytes()
}

fn pass(stream: &[u8], cuts: &[usize], strip: bool) -> (Vec<u8>, Option<Usage>) {
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(stream.len())).collect();
    cuts.sort();
    let mut events = EventStream::new(strip);
    let mut out = Vec::new();
    let mut at = 0;
    for c in cuts.into_iter().chain([stream.len()]) {
        events.feed(&stream[at..c], &mut out);
        at = c;
    }
    events.finish(&mut out);
    (out, events.usage())
}

/// However the network cuts a stream into chunks (here at every byte, and at every pair of
/// bytes a few apart), the same bytes pass and the same usage is read: a usage misread at a
/// chunk's edge would give back tokens that were used.
#[test]
fn every_cut_of_a_stream_reads_the_same() {
    for (crlf, strip) in [(false, false), (true, false), (false, true), (true, true)] {
        let stream = sse(crlf);
        let whole = pass(&stream, &[], strip);
        for at in 0..=stream.len() {
            assert_eq!(pass(&stream, &[at], strip), whole, "cut at {at}");
            for gap in [1, 2, 7] {
                assert_eq!(
                    pass(&stream, &[at, at + gap], strip),
                    whole,
                    "cuts at {at}, +{gap}"
                );
            }
        }
    }
}

#[test]
fn streams_report_usage_and_strip_only_what_was_asked() {
    for crlf in [false, true] {
        let stream = sse(crlf);
        let (kept, usage) = pass(&stream, &[], false);
        assert_eq!(kept, stream);
        assert_eq!(usage, used(3, 0, 2));
        let (stripped, _) = pass(&stream, &[], true);
        let text = String::from_utf8(stripped).unwrap();
        assert!(
            !text.contains("prompt_tokens")
                && text.contains("[DONE]")
                && text.contains("keep-alive"),
            "{text}"
        );
    }
    let responses = b"event: response.output_text.delta\ndata: {\"delta\":\"x\"}\n\n\
        event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":4,\"output_tokens\":6}}}\n\n";
    let (out, usage) = pass(responses, &[17, 40], true);
    assert_eq!(out, responses);
    assert_eq!(usage, used(4, 0, 6));
    // A stream cut before its usage reports none; an event with no end is still read.
    assert_eq!(pass(&sse(false)[..120], &[], false).1, None);
    let unended = br#"data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;
    assert_eq!(pass(unended, &[], false).1, used(1, 0, 1));
    // An event over the longest kept passes unread, and the next is read again.
    let long = format!(
        "data: {}\n\n{}",
        "x".repeat(slidewin::llm::events::LONGEST + 10),
        String::from_utf8(sse(false)).unwrap()
    );
    let (out, usage) = pass(long.as_bytes(), &[1000, 1 << 20, (1 << 20) + 30], false);
    assert_eq!(out, long.as_bytes());
    assert_eq!(usage, used(3, 0, 2));
}
