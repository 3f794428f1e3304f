//! The readers of [`slidewin::llm`] for `resty.slidewin.llm`: requests, usage, weights and
//! event streams of OpenAI-compatible APIs.
//!
//! ```lua
//! local tok, err = slidewin.llm_tokenizer{ path = "/etc/nginx/o200k_base.tiktoken" }
//! -- or { table = bytes, split = "cl100k" }; split: "cl100k" or "o200k", nil: from the
//! -- file's name; tok:count(text) -> tokens, tok:size() -> tokens in the table
//! local req, err = slidewin.llm_request{ body = body, endpoint = "chat", media_tokens = 2000,
//!     tokenizer = tok }   -- tokenizer: nil, the bound is the body's bytes
//! -- req:model(), req:cap() (nil: none asked), req:choices(), req:stream(), req:asks_usage(),
//! -- req:prompt_bound(); req:rewrite(body, cap) -> the body with that cap
//! local w = slidewin.llm_weights{ input = 2.5, cached = 1.25, output = 10 }
//! -- w:bound(prompt, cap, choices), w:cap_within(room, prompt, choices), w:cost(in, cached, out)
//! local events = slidewin.llm_events{ strip_usage = true }
//! -- events:feed(chunk) -> bytes to pass on; events:finish() -> the rest; events:usage()
//! local input, cached, output = slidewin.llm_usage(json_body)   -- nil: none reported
//! ```

use mlua::{
    AnyUserData, IntoLuaMulti, Lua, LuaString, MultiValue, Result as LuaResult, Table, UserData,
    UserDataMethods, Value,
};
use slidewin::llm::events::EventStream;
use slidewin::llm::request::{self, Request};
use slidewin::llm::tokens::{Split, Tokenizer};
use slidewin::llm::usage::{self, Usage, Weights};
use slidewin::llm::Endpoint;

use crate::args;

const REQUEST: &str = "slidewin.llm_request";
const WEIGHTS: &str = "slidewin.llm_weights";
const TOKENIZER: &str = "slidewin.llm_tokenizer";

/// Registers the constructors and `llm_usage` in `module`.
pub fn register(lua: &Lua, module: &Table) -> LuaResult<()> {
    module.set("llm_request", lua.create_function(new_request)?)?;
    module.set("llm_weights", lua.create_function(new_weights)?)?;
    module.set("llm_tokenizer", lua.create_function(new_tokenizer)?)?;
    module.set(
        "llm_events",
        lua.create_function(|_, opts: Table| {
            let strip = opts
                .raw_get::<Option<bool>>("strip_usage")?
                .unwrap_or(false);
            Ok(LuaEvents(EventStream::new(strip)))
        })?,
    )?;
    module.set(
        "llm_usage",
        lua.create_function(|lua, body: LuaString| {
            usage_values(lua, usage::of_answer(&body.as_bytes()))
        })?,
    )?;
    Ok(())
}

/// input, cached, output; nothing when no usage was reported.
fn usage_values(lua: &Lua, usage: Option<Usage>) -> LuaResult<MultiValue> {
    match usage {
        Some(u) => (u.input as f64, u.cached as f64, u.output as f64).into_lua_multi(lua),
        None => Ok(MultiValue::new()),
    }
}

fn new_request(lua: &Lua, opts: Table) -> LuaResult<MultiValue> {
    let string = |name: &str| match opts.raw_get::<Value>(name)? {
        Value::String(s) => Ok(s),
        v => Err(args::error(
            REQUEST,
            format_args!("{name} must be a string, got {}", args::describe(&v)),
        )),
    };
    let body = string("body")?;
    let name = string("endpoint")?;
    let endpoint = Endpoint::from_name(&name.to_str()?).ok_or_else(|| {
        let expected = "chat, completions, responses or embeddings";
        let got = args::describe(&Value::String(name.clone()));
        args::error(
            REQUEST,
            format_args!("endpoint must be {expected}, got {got}"),
        )
    })?;
    let media = match opts.raw_get::<Value>("media_tokens")? {
        Value::Nil => 0,
        v => args::uint(REQUEST, "media_tokens", &v)?,
    };
    let tokenizer = match opts.raw_get::<Value>("tokenizer")? {
        Value::Nil => None,
        v => Some(tokenizer_of(&v).ok_or_else(|| {
            let got = args::describe(&v);
            args::error(
                REQUEST,
                format_args!("tokenizer must be a slidewin.llm_tokenizer, got {got}"),
            )
        })?),
    };
    let tokenizer = tokenizer
        .as_ref()
        .map(|ud| ud.borrow::<LuaTokenizer>())
        .transpose()?;
    let table = tokenizer.as_ref().map(|t| &t.0);
    match request::read(&body.as_bytes(), endpoint, media, table) {
        Ok(req) => LuaRequest(req).into_lua_multi(lua),
        Err(bad) => (Value::Nil, bad.0).into_lua_multi(lua),
    }
}

/// The userdata of a tokenizer made by the prelude's class (a table holding it).
fn tokenizer_of(value: &Value) -> Option<AnyUserData> {
    let Value::Table(t) = value else { return None };
    match t.raw_get::<Value>(1).ok()? {
        Value::UserData(ud) if ud.is::<LuaTokenizer>() => Some(ud),
        _ => None,
    }
}

/// `{ path = ... }` or `{ table = bytes }`, and `split`: the tokenizer, or nil, err (a file
/// that cannot be read, a table with a bad line).
fn new_tokenizer(lua: &Lua, opts: Table) -> LuaResult<MultiValue> {
    let string = |name: &str| match opts.raw_get::<Value>(name)? {
        Value::Nil => Ok(None),
        Value::String(s) => Ok(Some(s.to_string_lossy())),
        v => Err(args::error(
            TOKENIZER,
            format_args!("{name} must be a string, got {}", args::describe(&v)),
        )),
    };
    let (path, split) = (string("path")?, string("split")?);
    let table = match opts.raw_get::<Value>("table")? {
        Value::Nil => None,
        Value::String(s) => Some(s.as_bytes().to_vec()),
        v => {
            let got = args::describe(&v);
            return Err(args::error(
                TOKENIZER,
                format_args!("table must be a string, got {got}"),
            ));
        }
    };
    // What the table is, in messages: its path, or "table".
    let (source, bytes) = match (path, table) {
        (Some(path), None) => {
            let shown = format!("path \"{path}\"");
            match std::fs::read(&path) {
                Ok(bytes) => (shown, bytes),
                Err(e) => return (Value::Nil, format!("{shown}: {e}")).into_lua_multi(lua),
            }
        }
        (None, Some(bytes)) => ("table".to_owned(), bytes),
        _ => {
            let message = "give one of path (a file) and table (its bytes)";
            return Err(args::error(TOKENIZER, message));
        }
    };
    let named = split.as_deref().or_else(|| {
        let file = source.rsplit('/').next().unwrap_or_default();
        ["cl100k", "o200k"]
            .into_iter()
            .find(|n| file.starts_with(n))
    });
    let Some(split) = named.and_then(Split::from_name) else {
        let got = split.map_or("nil".to_owned(), |s| format!("\"{s}\""));
        let message = format!(
            "split must be \"cl100k\" or \"o200k\" (or the path's file name begins with one), got {got}"
        );
        return Err(args::error(TOKENIZER, message));
    };
    match Tokenizer::new(&bytes, split) {
        Ok(t) => LuaTokenizer(t).into_lua_multi(lua),
        Err(bad) => (Value::Nil, format!("{source}: {bad}")).into_lua_multi(lua),
    }
}

/// A tokenizer table: counts tokens of texts.
pub struct LuaTokenizer(Tokenizer);

impl UserData for LuaTokenizer {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("count", |_, this, text: LuaString| {
            let text = text
                .to_str()
                .map_err(|_| args::error("tok:count", "text must be UTF-8"))?;
            Ok(this.0.count(&text) as f64)
        });
        methods.add_method("size", |_, this, ()| Ok(this.0.len() as f64));
    }
}

fn new_weights(_: &Lua, opts: Table) -> LuaResult<LuaWeights> {
    let weight = |name: &str| -> LuaResult<f64> {
        match opts.raw_get::<Value>(name)? {
            Value::Nil => Ok(1.0),
            v => args::number(WEIGHTS, name, &v),
        }
    };
    let w = Weights::new(weight("input")?, weight("cached")?, weight("output")?)
        .map_err(args::core(WEIGHTS))?;
    Ok(LuaWeights(w))
}

/// A request read: what the limits need, and its members to write it again.
pub struct LuaRequest(Request);

impl UserData for LuaRequest {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("model", |_, this, ()| Ok(this.0.model.clone()));
        methods.add_method("cap", |_, this, ()| Ok(this.0.cap.map(|c| c as f64)));
        methods.add_method("choices", |_, this, ()| Ok(this.0.choices as f64));
        methods.add_method("stream", |_, this, ()| Ok(this.0.stream));
        methods.add_method("asks_usage", |_, this, ()| Ok(this.0.asks_usage()));
        methods.add_method("prompt_bound", |_, this, ()| Ok(this.0.prompt_bound as f64));
        // `rewrite(body, cap)`: the body read, with that cap (and the stream asked for its
        // usage when asks_usage()).
        methods.add_method("rewrite", |lua, this, (body, cap): (LuaString, Value)| {
            let cap = args::uint("req:rewrite", "cap", &cap)?;
            let req = &this.0;
            lua.create_string(req.rewrite(&body.as_bytes(), cap, req.asks_usage()))
        });
    }
}

/// A rule's units per token of each kind.
pub struct LuaWeights(Weights);

impl UserData for LuaWeights {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("cost", |_, this, (i, c, o): (Value, Value, Value)| {
            const COST: &str = "w:cost";
            let input = args::uint(COST, "input", &i)?;
            let cached = args::uint(COST, "cached", &c)?.min(input);
            let output = args::uint(COST, "output", &o)?;
            Ok(this.0.cost(Usage {
                input,
                cached,
                output,
            }) as f64)
        });
        methods.add_method("bound", |_, this, (p, c, n): (Value, Value, Value)| {
            const BOUND: &str = "w:bound";
            let prompt = args::uint(BOUND, "prompt", &p)?;
            let bound = this.0.bound(
                prompt,
                args::uint(BOUND, "cap", &c)?,
                args::uint(BOUND, "choices", &n)?,
            );
            Ok(bound as f64)
        });
        methods.add_method("cap_within", |_, this, (r, p, n): (Value, Value, Value)| {
            const CAP: &str = "w:cap_within";
            let room = args::uint(CAP, "room", &r)?;
            let cap = this.0.cap_within(
                room,
                args::uint(CAP, "prompt", &p)?,
                args::uint(CAP, "choices", &n)?,
            );
            Ok(cap as f64)
        });
    }
}

/// An answer's event stream, read as it passes.
pub struct LuaEvents(EventStream);

impl UserData for LuaEvents {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method_mut("feed", |lua, this, chunk: LuaString| {
            let mut out = Vec::new();
            this.0.feed(&chunk.as_bytes(), &mut out);
            lua.create_string(out)
        });
        methods.add_method_mut("finish", |lua, this, ()| {
            let mut out = Vec::new();
            this.0.finish(&mut out);
            lua.create_string(out)
        });
        methods.add_method("usage", |lua, this, ()| usage_values(lua, this.0.usage()));
    }
}
