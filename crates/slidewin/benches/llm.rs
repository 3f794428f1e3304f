//! The language-model readers alone (what resty.slidewin.llm calls per request): a 929-byte
//! chat request read and rewritten, a 900-byte JSON answer's usage, and a 1 MiB event stream
//! fed in 8 KiB chunks, the shapes of scripts/bench-llm.sh's requests.
//! `cargo bench -p slidewin --features llm --bench llm` (figures in BENCHMARKS.md, "Token
//! limits").

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use slidewin::llm::events::EventStream;
use slidewin::llm::{request, usage, Endpoint};
use std::hint::black_box;

fn readers(c: &mut Criterion) {
    let content = "Summarize the following text in three sentences. ".repeat(16);
    let body = format!(
        r#"{{"model":"gpt-4o-mini","messages":[{{"role":"system","content":"You are terse."}},{{"role":"user","content":"{content}"}}],"max_tokens":400,"temperature":0.2}}"#
    );
    let answer = format!(
        r#"{{"id":"c","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"{}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":250,"completion_tokens":120,"total_tokens":370}}}}"#,
        "token ".repeat(120)
    );
    let event = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token \"}}],\"usage\":null}\n\n";
    let stream = event.repeat((1 << 20) / event.len());

    c.bench_function("request read + rewrite (929 B)", |b| {
        b.iter(|| {
            let req = request::read(
                black_box(body.as_bytes()),
                Endpoint::ChatCompletions,
                2000,
                None,
            );
            req.unwrap().rewrite(body.as_bytes(), 100, true)
        })
    });
    c.bench_function("answer usage (900 B)", |b| {
        b.iter(|| usage::of_answer(black_box(answer.as_bytes())))
    });
    let mut group = c.benchmark_group("event stream");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    group.bench_function("1 MiB in 8 KiB chunks", |b| {
        let mut out = Vec::with_capacity(16 << 10);
        b.iter(|| {
            let mut events = EventStream::new(true);
            for chunk in stream.as_bytes().chunks(8 << 10) {
                out.clear();
                events.feed(black_box(chunk), &mut out);
            }
            events.usage()
        })
    });
    group.finish();
}

criterion_group!(benches, readers);
criterion_main!(benches);
