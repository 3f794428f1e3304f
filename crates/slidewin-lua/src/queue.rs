//! `slidewin.queue_limit{ target_backlog, settle_ms, rate_half_life_ms, headroom, min_limit,
//! max_limit }`: the controller of [`slidewin::queue`], a rate (messages per second) that
//! follows a queue's consumers.
//!
//! ```lua
//! local q = slidewin.queue_limit{ target_backlog = 100 }
//! -- every interval, from XINFO GROUPS: processed = entries-read - pending, backlog = lag + pending
//! local per_second = q:update(processed, backlog)   -- nil until a rate is known
//! ```

use mlua::{Lua, Result as LuaResult, Table, UserData, UserDataMethods, Value};
use slidewin::queue::{QueueLimit, QueueLimitConfig, QueueSample};

use crate::args;
use crate::now_ms;

const NEW: &str = "slidewin.queue_limit";
const UPDATE: &str = "q:update";

/// `slidewin.queue_limit{...}`: the object.
pub fn new(_: &Lua, opts: Table) -> LuaResult<LuaQueueLimit> {
    let d = QueueLimitConfig::default();
    let positive = |field: &'static str| args::field_positive(NEW, &opts, field);
    let ms = |field: &'static str, default: i64| -> LuaResult<i64> {
        Ok(positive(field)?.map_or(default, |v| i64::try_from(v).unwrap_or(i64::MAX)))
    };
    let headroom = match opts.raw_get::<Value>("headroom")? {
        Value::Nil => d.headroom,
        v => args::number(NEW, "headroom", &v)?,
    };
    let config = QueueLimitConfig {
        target_backlog: positive("target_backlog")?.unwrap_or(d.target_backlog),
        settle_ms: ms("settle_ms", d.settle_ms)?,
        rate_half_life_ms: ms("rate_half_life_ms", d.rate_half_life_ms)?,
        headroom,
        min_limit: positive("min_limit")?.unwrap_or(d.min_limit),
        max_limit: positive("max_limit")?.unwrap_or(d.max_limit),
    };
    Ok(LuaQueueLimit(
        QueueLimit::new(config).map_err(args::core(NEW))?,
    ))
}

/// The controller's object.
pub struct LuaQueueLimit(QueueLimit);

impl UserData for LuaQueueLimit {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        // `update(processed, backlog)` -> the next limit (messages per second), nil until the
        // consumers' rate is known.
        methods.add_method_mut("update", |_, this, (processed, backlog): (Value, Value)| {
            let sample = QueueSample {
                processed: args::uint(UPDATE, "processed", &processed)?,
                backlog: args::uint(UPDATE, "backlog", &backlog)?,
            };
            this.0
                .update_at(now_ms(), sample)
                .map_err(args::core(UPDATE))
        });
        // The consumers' processing rate (messages per second), nil before two samples.
        methods.add_method("rate", |_, this, ()| Ok(this.0.rate()));
    }
}
