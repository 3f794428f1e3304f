//! `slidewin.lease_table{...}`: a node's leases of one limiter kept in Redis
//! ([`slidewin::shared::Leases`]), shared by every worker of one nginx, and the per-request
//! crossing that spends them.
//!
//! ```lua
//! -- init_by_lua (the master maps the region, kept by name across reloads):
//! local t = slidewin.lease_table{ name = "api", validity_ms = 100, margin_ms = 10,
//!                                 max_validity_ms = 400, max_units = 1000, keys = 10000,
//!                                 max_key_bytes = 64 }
//! -- per request, one FFI call (resty.slidewin.store.lease):
//! -- slidewin_lease_spend(t:ffi_handle(), headers, key, key_len, cost, limits, n, out, call)
//! -- then, around a lease call to Redis, Redis's reply taken in one FFI call:
//! -- slidewin_lease_install(t:ffi_handle(), key, key_len, seq, sent_ms, validity_ms, cost,
//! --     limits, n, reply, recorded, out)
//! t:fail(key, seq, sent_ms)          -- the call failed: the lease, if granted, is never spent
//! t:settled(key, seq)                -- a settle-only call succeeded
//! t:sweep(period_ms, max)            -- { { key, seq, settle }, ... }: ended leases with units
//! t:id(seq), t:ahead_ms(), t:stats(), t:refund(key, cost)
//! t:validity_ms()                    -- the V calls ask for now (raised after late answers)
//! t:max_validity_ms()                -- the most it is raised to
//! ```
//!
//! Times are the node's `CLOCK_MONOTONIC` in ms, read here on every call: never the cached
//! `ngx.now()`, which may lag, and never the wall clock, which may step. The region is kept
//! like a shared limiter's (same name, key length and size: the same region, with its leases
//! and node id, after `nginx -s reload`).

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use mlua::{Lua, Result as LuaResult, Table, UserData, UserDataMethods, Value};
use slidewin::lease::{Grant, LeaseConfig, DEFAULT_MAX_UNITS};
use slidewin::rule::MAX_WINDOWS;
use slidewin::shared::{Fetch, Leases, RegionKind, Spent};
use slidewin::{arg, Decision};

use crate::answer::{fail, ffi_arguments, fill, render_into, Answer, Headers};
use crate::args::{self, error};
use crate::cdefs::{c_function, c_struct, opaque};
use crate::mapping::WorkerOwner;
use crate::region::{self, Region, Spec};

const NEW: &str = "slidewin.lease_table";
const SPEND: &str = "leases:spend";
const INSTALL: &str = "leases:install";
const DEFAULT_MAX_KEY_BYTES: u64 = 64;
const DEFAULT_KEYS: u64 = 10_000;
/// Room for a settle list: [`slidewin::shared::SETTLE_SLOTS`] entries of at most 77 bytes.
const SETTLE_BYTES: usize = 1024;
/// The version of a remote store's answers (the layer holds its policy under it).
const REMOTE_VERSION: f64 = -1.0;

type LeaseTable = Leases<Region, WorkerOwner>;
opaque!(LeaseTable);

/// The node's monotonic clock in ms.
pub fn monotonic_ms() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is; CLOCK_MONOTONIC always exists
    // on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}

c_struct!(
    /// A lease call to make, as the lease store reads it (`slidewin_lease_call_t`): `status` 0
    /// none, 1 a prefetch this caller claimed (the request was decided), 2 a call to make now
    /// for the request.
    #[repr(C)]
    #[c_name = "slidewin_lease_call_t"]
    pub struct Call {
        status: c_int,
        settle_len: c_int,
        seq: f64,
        want: f64,
        sent_ms: f64,
        validity_ms: f64,
        settle: [u8; SETTLE_BYTES],
    }
);

impl Call {
    fn set(&mut self, status: c_int, fetch: &Fetch) {
        self.status = status;
        self.seq = fetch.seq as f64;
        self.want = fetch.want as f64;
        self.sent_ms = fetch.sent_ms as f64;
        self.validity_ms = fetch.validity_ms as f64;
        // Ids are ASCII: a cut falls between entries' bytes at worst, which the script refuses
        // by name; the table never holds that many.
        let len = fetch.settle.len().min(SETTLE_BYTES);
        self.settle[..len].copy_from_slice(&fetch.settle.as_bytes()[..len]);
        self.settle_len = len as c_int;
    }
}

/// The table's object; the FFI reaches the table through `ffi_handle()` (a raw pointer, so
/// that no borrow of the object outlives a method call).
pub struct LuaLeases(*mut LeaseTable);

impl Drop for LuaLeases {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::into_raw in `new` and is freed only here; Lua keeps
        // the object alive while a caller holds its handle.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

impl LuaLeases {
    fn table(&self) -> &LeaseTable {
        // SAFETY: from Box::into_raw in `new`, freed only on drop; the table is only read
        // through shared references (its state is atomics in the region).
        unsafe { &*self.0 }
    }
}

/// `slidewin.lease_table{...}`: the object.
pub fn new(_: &Lua, opts: Table) -> LuaResult<LuaLeases> {
    let name = args::field_name(NEW, &opts)?;
    let positive = |field: &'static str| args::field_positive(NEW, &opts, field);
    let validity_ms = args::field_required_positive(NEW, &opts, "validity_ms")?;
    let margin_ms = match opts.raw_get::<Value>("margin_ms")? {
        Value::Nil => None,
        v => Some(args::uint(NEW, "margin_ms", &v)?),
    };
    let max_units = positive("max_units")?.unwrap_or(DEFAULT_MAX_UNITS);
    let mut config =
        LeaseConfig::new(validity_ms, margin_ms, max_units).map_err(args::core(NEW))?;
    if let Some(max_validity_ms) = positive("max_validity_ms")? {
        config = config
            .with_max_validity_ms(max_validity_ms)
            .map_err(args::core(NEW))?;
    }
    let max_key_bytes = positive("max_key_bytes")?.unwrap_or(DEFAULT_MAX_KEY_BYTES);
    let max_key_bytes = usize::try_from(max_key_bytes).unwrap_or(usize::MAX);
    let size = args::region_bytes(NEW, &opts, DEFAULT_KEYS, |keys| {
        LeaseTable::bytes_for(max_key_bytes, keys).map_err(args::core(NEW))
    })?;
    let spec = Spec {
        name: format!("{name} (leases)"),
        kind: RegionKind::Leases {
            validity_ms: config.validity_ms(),
            margin_ms: config.margin_ms(),
            max_key_bytes,
        },
        size,
    };
    let (region, _) = region::region(&spec).map_err(|e| error(NEW, e))?;
    let (table, _) = Leases::attach(
        region,
        config,
        max_key_bytes,
        WorkerOwner::new(),
        slidewin::shared::random_seed(),
    )
    .map_err(args::core(NEW))?;
    Ok(LuaLeases(Box::into_raw(Box::new(table))))
}

fn key_of(key: &Value, function: &'static str) -> LuaResult<Vec<u8>> {
    match key {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Integer(_) | Value::Number(_) => {
            let n = args::number(function, "key", key)?;
            crate::stack::number_key(n, function)
                .map(String::into_bytes)
                .map_err(|m| error(function, m))
        }
        other => Err(error(
            function,
            format_args!(
                "key must be a string or a number, got {}",
                args::describe(other)
            ),
        )),
    }
}

/// The call `seq` sent at `sent_ms`, as the Lua store hands it back.
fn call_of(function: &'static str, seq: &Value, sent_ms: &Value) -> LuaResult<Fetch> {
    Ok(Fetch {
        seq: args::uint(function, "seq", seq)?,
        want: 0,
        sent_ms: args::uint(function, "sent_ms", sent_ms)? as i64,
        // Only an answer's install reads it.
        validity_ms: 0,
        settle: String::new(),
    })
}

impl UserData for LuaLeases {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("ffi_handle", |_, this, ()| {
            Ok(Value::LightUserData(mlua::LightUserData(this.0.cast())))
        });
        methods.add_method(
            "fail",
            |_, this, (key, seq, sent_ms): (Value, Value, Value)| {
                const F: &str = "leases:fail";
                let fetch = call_of(F, &seq, &sent_ms)?;
                this.table()
                    .fail_at(&key_of(&key, F)?, &fetch, monotonic_ms())
                    .map_err(args::core(F))
            },
        );
        methods.add_method("settled", |_, this, (key, seq): (Value, Value)| {
            const F: &str = "leases:settled";
            let seq = args::uint(F, "seq", &seq)?;
            this.table().settled(&key_of(&key, F)?, seq);
            Ok(())
        });
        methods.add_method("refund", |_, this, (key, cost): (Value, Value)| {
            const F: &str = "leases:refund";
            let cost = args::uint(F, "cost", &cost)?;
            this.table()
                .refund_at(&key_of(&key, F)?, monotonic_ms(), cost)
                .map_err(args::core(F))
        });
        methods.add_method("sweep", |lua, this, (period_ms, max): (Value, Value)| {
            const F: &str = "leases:sweep";
            let period = args::positive(F, "period_ms", &period_ms)?;
            let max = args::positive(F, "max", &max)?;
            let swept = this
                .table()
                .sweep_at(monotonic_ms(), period as i64, max as usize)
                .map_err(args::core(F))?;
            let list = lua.create_table()?;
            for (key, fetch) in swept {
                let item = lua.create_table()?;
                item.set("key", lua.create_string(&key)?)?;
                item.set("seq", fetch.seq)?;
                item.set("settle", fetch.settle)?;
                list.push(item)?;
            }
            Ok(list)
        });
        // The stamp of a check ahead (ms after Redis's now), or nil: every call a lease call.
        methods.add_method("ahead_ms", |_, this, ()| {
            Ok(this.table().config().ahead_ms())
        });
        methods.add_method("validity_ms", |_, this, ()| Ok(this.table().validity_ms()));
        methods.add_method("max_validity_ms", |_, this, ()| {
            Ok(this.table().config().max_validity_ms())
        });
        methods.add_method("id", |_, this, seq: Value| {
            let seq = args::uint("leases:id", "seq", &seq)?;
            Ok(this.table().id(seq).to_string())
        });
        methods.add_method("stats", |lua, this, ()| {
            let s = this.table().stats();
            let t = lua.create_table()?;
            t.set("calls", s.calls)?;
            t.set("granted", s.granted)?;
            t.set("spent", s.spent)?;
            t.set("returned", s.returned)?;
            t.set("expired", s.expired)?;
            t.set("local", s.local)?;
            t.set("refusals_cached", s.refusals_cached)?;
            t.set("repairs", s.repairs)?;
            t.set("evictions", s.evictions)?;
            t.set("validity_ms", s.validity_ms)?;
            t.set("capacity", s.capacity)?;
            Ok(t)
        });
    }
}

c_function!(
    /// Spends `cost` of `key`'s lease (`key_len` bytes; null: the number `key_number`) under
    /// `limits` (`n_limits`, the live or the call's). Returns 0 with the request decided in `out`
    /// (its header values written when `headers`, if not null, holds a remote store's policy) and
    /// `call.status`
    /// 1 when this caller claimed the next lease's fetch; 2 with `call` the lease call to make
    /// now for the request; 3 when another caller's lease call of the key is in flight (ask
    /// again shortly); 1 with `out.message` saying what was wrong.
    ///
    /// # Safety
    /// `table` comes from `t:ffi_handle()` and `headers` from `headers:ffi_handle()` of objects
    /// still referenced by the caller; `key` points to `key_len` readable bytes (or is null);
    /// `limits` to `n_limits` doubles; `out` and `call` to writable structs.
    #[no_mangle]
    #[c_prototype(SPEND_PROTOTYPE)]
    pub unsafe extern "C" fn slidewin_lease_spend(
        table: *const LeaseTable,
        headers: *const Headers,
        key: *const u8,
        key_len: usize,
        key_number: f64,
        cost: f64,
        limits: *const f64,
        n_limits: usize,
        out: *mut Answer,
        call: *mut Call,
    ) -> c_int {
        // SAFETY: the caller's contract above: `out` and `call` are writable and not aliased.
        let (out, call) = unsafe { (&mut *out, &mut *call) };
        // SAFETY: the caller's contract above; only read here.
        let table = unsafe { &*table };
        if n_limits == 0 {
            let message = format!("{SPEND}: limits must list 1 to {MAX_WINDOWS} limits, got 0");
            return fail(out, &message);
        }
        let mut key_text = String::new();
        let mut given = [0u64; MAX_WINDOWS];
        // SAFETY: the caller's contract above: `key` holds `key_len` bytes (or is null) and
        // `limits` holds `n_limits` doubles for the call.
        let read = unsafe {
            let key = (key, key_len, key_number);
            ffi_arguments(SPEND, key, (limits, n_limits), &mut key_text, &mut given)
        };
        let key = match read {
            Ok(key) => key,
            Err(message) => return fail(out, &message),
        };
        let limits = &given[..n_limits];
        let cost = match arg::uint("cost", cost) {
            Ok(cost) => cost,
            Err(e) => return fail(out, &format!("{SPEND}: {e}")),
        };
        let spent = catch_unwind(AssertUnwindSafe(|| {
            table.spend_ahead_at(key, monotonic_ms(), cost, limits)
        }));
        let spent = match spent {
            Ok(Ok(spent)) => spent,
            Ok(Err(e)) => return fail(out, &format!("{SPEND}: {e}")),
            Err(_) => return fail(out, &format!("{SPEND}: internal error")),
        };
        call.status = 0;
        let (d, prefetch) = match spent {
            Spent::Fetch(fetch) => {
                call.set(2, &fetch);
                return 2;
            }
            Spent::Wait => return 3,
            Spent::Admitted {
                remaining,
                reset_after_ms,
                window,
                prefetch,
            } => {
                let d = decision(true, limits, window, remaining, Some(0), reset_after_ms);
                (d, prefetch)
            }
            Spent::Refused {
                remaining,
                retry_after_ms,
                reset_after_ms,
                window,
            } => {
                let d = decision(
                    false,
                    limits,
                    window,
                    remaining,
                    Some(retry_after_ms),
                    reset_after_ms,
                );
                (d, None)
            }
        };
        if let Some(fetch) = prefetch {
            call.set(1, &fetch);
        }
        fill(out, &d, REMOTE_VERSION, f64::NAN);
        if !headers.is_null() {
            // SAFETY: the caller's contract above; only read here.
            render_into(out, unsafe { &*headers });
        }
        0
    }
);

fn decision(
    allowed: bool,
    limits: &[u64],
    window: usize,
    remaining: u64,
    retry_after_ms: Option<u64>,
    reset_after_ms: u64,
) -> Decision {
    let window = window.min(limits.len() - 1);
    Decision {
        allowed,
        limit: limits[window],
        remaining: remaining.min(limits[window]),
        retry_after_ms,
        reset_after_ms,
        window,
    }
}

c_function!(
    /// Takes Redis's `reply` (5 doubles: granted, remaining, retry_after_ms (-1: never),
    /// reset_after_ms, window 1-based) to the lease call `seq` of `key` (as for
    /// `slidewin_lease_spend`) sent at `sent_ms` for a request of `cost` under `limits`;
    /// `recorded` non-zero when the call was a check ahead (Redis recorded the cost: nothing to
    /// settle). Returns 0 with the admitted request's remaining in `out.remaining`, 2 when it
    /// was not admitted (refused, or answered too late to spend), 1 with `out.message` set.
    ///
    /// # Safety
    /// `table` comes from `t:ffi_handle()` of an object still referenced by the caller; `key`
    /// points to `key_len` readable bytes (or is null); `limits` to `n_limits` doubles, `reply`
    /// to 5; `out` to a writable struct.
    #[no_mangle]
    #[c_prototype(INSTALL_PROTOTYPE)]
    pub unsafe extern "C" fn slidewin_lease_install(
        table: *const LeaseTable,
        key: *const u8,
        key_len: usize,
        key_number: f64,
        seq: f64,
        sent_ms: f64,
        validity_ms: f64,
        cost: f64,
        limits: *const f64,
        n_limits: usize,
        reply: *const f64,
        recorded: c_int,
        out: *mut Answer,
    ) -> c_int {
        // SAFETY: the caller's contract above: `out` is writable and not aliased, `table` and
        // `reply` only read.
        let (out, table, reply) =
            unsafe { (&mut *out, &*table, std::slice::from_raw_parts(reply, 5)) };
        let mut key_text = String::new();
        let mut given = [0u64; MAX_WINDOWS];
        // SAFETY: the caller's contract above: `key` holds `key_len` bytes (or is null) and
        // `limits` holds `n_limits` doubles for the call.
        let read = unsafe {
            let key = (key, key_len, key_number);
            ffi_arguments(INSTALL, key, (limits, n_limits), &mut key_text, &mut given)
        };
        let key = match read {
            Ok(key) => key,
            Err(message) => return fail(out, &message),
        };
        let uint =
            |name: &'static str, v: f64| arg::uint(name, v).map_err(|e| format!("{INSTALL}: {e}"));
        let read = (|| {
            let fetch = Fetch {
                seq: uint("seq", seq)?,
                want: 0,
                sent_ms: uint("sent_ms", sent_ms)? as i64,
                validity_ms: uint("validity_ms", validity_ms)?,
                settle: String::new(),
            };
            let window = uint("window", reply[4])?;
            let grant = Grant {
                granted: uint("granted", reply[0])?,
                remaining: uint("remaining", reply[1])?,
                retry_after_ms: (reply[2] >= 0.0).then_some(reply[2] as u64),
                reset_after_ms: uint("reset_after_ms", reply[3])?,
                window: (window.max(1) - 1) as usize,
            };
            Ok::<_, String>((fetch, grant, uint("cost", cost)?))
        })();
        let (fetch, grant, cost) = match read {
            Ok(read) => read,
            Err(message) => return fail(out, &message),
        };
        let limits = &given[..n_limits];
        let installed = catch_unwind(AssertUnwindSafe(|| {
            let now_ms = monotonic_ms();
            if recorded != 0 {
                table.install_recorded_at(key, &fetch, now_ms, cost, limits, &grant)
            } else {
                table.install_at(key, &fetch, now_ms, cost, limits, &grant)
            }
        }));
        match installed {
            Ok(Ok(Some(admitted))) => {
                out.remaining = admitted.remaining as f64;
                0
            }
            Ok(Ok(None)) => 2,
            Ok(Err(e)) => fail(out, &format!("{INSTALL}: {e}")),
            Err(_) => fail(out, &format!("{INSTALL}: internal error")),
        }
    }
);
