//! Prompt counts: a tokenizer table's exact count of text (llm::tokens), and a chat body's
//! prompt bound read with the table beside the byte bound, in MB/s of text or body. The
//! table is OpenAI's cl100k_base.tiktoken at `SLIDEWIN_TIKTOKEN_TABLE` when set
//! (scripts/check-tiktoken.sh installs one), else one trained on sample text
//! (tests/common/bpe.rs) and padded to 100,000 tokens, the size of cl100k_base, so that its
//! lookups miss the caches as a real one's do.
//! `cargo bench -p slidewin --features llm --bench tokens` (figures in BENCHMARKS.md, "Prompt
//! counts").

#[path = "../tests/common/bpe.rs"]
mod bpe;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use slidewin::llm::tokens::{Split, Tokenizer};
use slidewin::llm::{request, Endpoint};
use std::hint::black_box;

fn table() -> Tokenizer {
    if let Ok(path) = std::env::var("SLIDEWIN_TIKTOKEN_TABLE") {
        let table = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        return Tokenizer::new(&table, Split::Cl100k).unwrap();
    }
    let mut ranks = bpe::train(&bpe::SAMPLE.repeat(3), 400);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while ranks.len() < 100_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let filler: Vec<u8> = x.to_le_bytes()[..2 + (x % 6) as usize].to_vec();
        let rank = ranks.len() as u32;
        ranks.entry(filler).or_insert(rank);
    }
    Tokenizer::new(bpe::tiktoken(&ranks).as_bytes(), Split::Cl100k).unwrap()
}

fn counts(c: &mut Criterion) {
    let tokenizer = table();
    let prose = bpe::SAMPLE.repeat((64 << 10) / bpe::SAMPLE.len());
    let mut group = c.benchmark_group("prompt counts");
    group.throughput(Throughput::Bytes(prose.len() as u64));
    group.bench_function("count, 64 KiB of text", |b| {
        let mut counter = tokenizer.counter();
        b.iter(|| counter.count(black_box(&prose)))
    });
    let body = serde_json::json!({"model": "gpt-4o", "max_tokens": 400, "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": prose}]})
    .to_string();
    group.throughput(Throughput::Bytes(body.len() as u64));
    for (name, table) in [("bytes", None), ("table", Some(&tokenizer))] {
        group.bench_function(format!("chat body's bound, 64 KiB, {name}"), |b| {
            b.iter(|| {
                request::read(
                    black_box(body.as_bytes()),
                    Endpoint::ChatCompletions,
                    0,
                    table,
                )
            })
        });
    }
    group.finish();
    let bound = |table| request::read(body.as_bytes(), Endpoint::ChatCompletions, 0, table);
    let (bytes, tokens) = (bound(None).unwrap(), bound(Some(&tokenizer)).unwrap());
    println!(
        "bound of the 64 KiB body: {} by bytes, {} with the table",
        bytes.prompt_bound, tokens.prompt_bound
    );
}

criterion_group!(benches, counts);
criterion_main!(benches);
