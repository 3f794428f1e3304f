//! A stand-in for an OpenAI-compatible provider, of the tests' own: it answers chat
//! completions, completions, responses and embeddings in JSON or as event streams, reports
//! usage as providers do, and keeps a record of what it produced, for the tests to replay.
//!
//! Its prompt tokens are the prompt's text bytes / 4 rounded up (at least 1), or, started
//! with a tokenizer table ([`LlmUpstream::start_counting`]), what OpenAI's cookbook counts: the
//! table's tokens of each message's role, content and name, 3 per message, 1 per name, 3 for
//! the reply, and the tokens of `input`, `prompt` and `instructions`' strings; its output is a
//! random length from 1 to the request's cap (16 without one), streamed one token per event
//! over the request's `X-Stream-Ms` (or a random time in the upstream's range). A stream
//! reports usage only when asked (`stream_options.include_usage`; responses: always). Request
//! headers that make it misbehave: `X-Ignore-Cap: N` produces N tokens whatever the cap,
//! `X-Cut: 1` ends a stream before its usage, `X-Status: N` answers an error N with usage.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use slidewin::llm::tokens::Tokenizer;

use crate::random::Random;

/// What the upstream produced for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Produced {
    /// The request's `X-Stamp` header (the reservation's stamp), 0 without one.
    pub stamp_ms: i64,
    /// The output cap the request carried, if any.
    pub cap: Option<u64>,
    /// Prompt tokens counted.
    pub prompt: u64,
    /// Output tokens produced.
    pub output: u64,
    /// Whether the usage was reported to the gateway.
    pub reported: bool,
}

/// The running stand-in; stops accepting when dropped.
pub struct LlmUpstream {
    /// Its port on 127.0.0.1.
    pub port: u16,
    record: Arc<Mutex<Vec<Produced>>>,
}

impl LlmUpstream {
    /// Starts it; streams without `X-Stream-Ms` last a random time in `stream_ms`.
    pub fn start(stream_ms: (u64, u64)) -> LlmUpstream {
        Self::start_with(stream_ms, None)
    }

    /// Starts it counting prompts with `table` as the cookbook does.
    pub fn start_counting(stream_ms: (u64, u64), table: Tokenizer) -> LlmUpstream {
        Self::start_with(stream_ms, Some(table))
    }

    fn start_with(stream_ms: (u64, u64), table: Option<Tokenizer>) -> LlmUpstream {
        let table = Arc::new(table);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in upstream");
        let port = listener.local_addr().unwrap().port();
        let record = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&record);
        thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(stream) = stream else { continue };
                let record = Arc::clone(&kept);
                let table = Arc::clone(&table);
                let mut random = Random(0x9e37_79b9_7f4a_7c15 ^ (n as u64 + 1));
                thread::spawn(move || {
                    let _ = serve(stream, &record, &mut random, stream_ms, &table);
                });
            }
        });
        LlmUpstream { port, record }
    }

    /// What it produced so far, in the order calls ended.
    pub fn record(&self) -> Vec<Produced> {
        self.record.lock().unwrap().clone()
    }

    /// The record once it holds `n` calls (a call is recorded just after its answer is sent).
    pub fn wait(&self, n: usize) -> Vec<Produced> {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let record = self.record();
            if record.len() >= n || std::time::Instant::now() > deadline {
                return record;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The prompt's text: every string under messages, input, prompt and instructions.
fn text_bytes(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.len() as u64,
        Value::Array(a) => a.iter().map(text_bytes).sum(),
        Value::Object(o) => o.values().map(text_bytes).sum(),
        _ => 0,
    }
}

/// The cookbook's count of a request's prompt with `table`.
fn cookbook(table: &Tokenizer, req: &Value) -> u64 {
    fn strings(table: &Tokenizer, v: &Value) -> u64 {
        match v {
            Value::String(s) => table.count(s),
            Value::Array(a) => a.iter().map(|v| strings(table, v)).sum(),
            Value::Object(o) => o.values().map(|v| strings(table, v)).sum(),
            _ => 0,
        }
    }
    let messages = req.get("messages").and_then(Value::as_array);
    let chat: u64 = messages.map_or(0, |messages| {
        let each = messages.iter().map(|m| {
            let text = |key| m.get(key).map_or(0, |v| strings(table, v));
            3 + text("role") + text("content") + m.get("name").map_or(0, |n| strings(table, n) + 1)
        });
        3 + each.sum::<u64>()
    });
    let inputs = ["input", "prompt", "instructions"].iter();
    chat + inputs
        .filter_map(|f| req.get(*f))
        .map(|v| strings(table, v))
        .sum::<u64>()
}

fn serve(
    stream: TcpStream,
    record: &Mutex<Vec<Produced>>,
    random: &mut Random,
    stream_ms: (u64, u64),
    table: &Option<Tokenizer>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split(' ').nth(1).unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let responses = path.ends_with("/responses");
    let embeddings = path.ends_with("/embeddings");
    let cap = ["max_completion_tokens", "max_tokens", "max_output_tokens"]
        .iter()
        .filter_map(|f| req.get(*f).and_then(Value::as_u64))
        .min();
    let prompt_text: u64 = ["messages", "input", "prompt", "instructions"]
        .iter()
        .filter_map(|f| req.get(*f))
        .map(text_bytes)
        .sum();
    let prompt = match table {
        Some(table) => cookbook(table, &req),
        None => prompt_text.div_ceil(4).max(1),
    };
    let output = match (embeddings, header("x-ignore-cap")) {
        (true, _) => 0,
        (false, Some(n)) => n.parse().unwrap_or(1),
        (false, None) => 1 + random.below(cap.unwrap_or(16).max(1)),
    };
    let streamed = req.get("stream") == Some(&Value::Bool(true));
    let asked =
        responses || req.pointer("/stream_options/include_usage") == Some(&Value::Bool(true));
    let cut = header("x-cut").is_some();
    let status: u16 = header("x-status")
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let ms = header("x-stream-ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| stream_ms.0 + random.below(stream_ms.1 - stream_ms.0 + 1));
    let usage = if responses {
        json!({"input_tokens": prompt, "output_tokens": output, "total_tokens": prompt + output})
    } else {
        json!({"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output})
    };
    let stamp_ms = header("x-stamp").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut out = stream;
    let reported = if streamed && status == 200 {
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )?;
        let start = now_ms();
        for i in 0..output {
            let event = if responses {
                "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"tok \"}\n\n".to_string()
            } else {
                let usage_field = if asked { ",\"usage\":null" } else { "" };
                format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok \"}}}}]{usage_field}}}\n\n")
            };
            chunk(&mut out, event.as_bytes())?;
            let due = start + ms * (i + 1) / output.max(1);
            thread::sleep(Duration::from_millis(due.saturating_sub(now_ms())));
        }
        if !cut {
            if responses {
                let done = json!({"type": "response.completed", "response": {"usage": usage}});
                chunk(
                    &mut out,
                    format!("event: response.completed\ndata: {done}\n\n").as_bytes(),
                )?;
            } else if asked {
                let last = json!({"choices": [], "usage": usage});
                chunk(&mut out, format!("data: {last}\n\n").as_bytes())?;
            }
            chunk(&mut out, b"data: [DONE]\n\n")?;
            out.write_all(b"0\r\n\r\n")?;
        }
        asked && !cut
    } else {
        thread::sleep(Duration::from_millis(ms));
        let answer = if status == 200 {
            json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0,
                "message": {"role": "assistant", "content": "tok ".repeat(output as usize)}}],
                "usage": usage})
        } else {
            json!({"error": {"message": "stand-in error"}, "usage": usage})
        };
        let text = answer.to_string();
        write!(
            out,
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        )?;
        true
    };
    record.lock().unwrap().push(Produced {
        stamp_ms,
        cap,
        prompt,
        output,
        reported,
    });
    Ok(())
}

fn chunk(out: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    write!(out, "{:x}\r\n", bytes.len())?;
    out.write_all(bytes)?;
    out.write_all(b"\r\n")?;
    out.flush()
}
