//! `slidewin.nginx_zone(name)`: a limiter over the zone a `slidewin_zone` directive of the
//! native nginx module declared, in a worker of the same nginx (both modules loaded). It
//! decides, lists its top keys and sets its live limits on the very words the module's
//! `slidewin_limit` uses: one region, two doors.
//!
//! ```lua
//! local lim = assert(require("slidewin").nginx_zone("api"))   -- in a worker, not init_by_lua
//! local top = lim:top(10)                                     -- the keys nginx.conf's limit refused
//! ```
//!
//! The native module maps its zones after the config is read, so the call belongs in a worker
//! (`init_worker_by_lua*` or a request), where it finds them; nginx loads modules with
//! `RTLD_GLOBAL`, so the module's `slidewin_nginx_zone` is found with `dlsym`.

use std::ffi::c_int;
use std::mem::MaybeUninit;

use mlua::{Lua, Result as LuaResult, Value};
use slidewin::shared::{Zone, ZoneExport};

use crate::args::{self, error};
use crate::limiter::{push, LuaLimiter};
use crate::mapping::WorkerOwner;
use crate::region::Region;

const NGINX_ZONE: &str = "slidewin.nginx_zone";

type FindZone = unsafe extern "C" fn(*const u8, usize, *mut ZoneExport) -> c_int;

/// `slidewin.nginx_zone(name)`: the limiter, or nil and why not.
pub fn new(lua: &Lua, name: Value) -> LuaResult<(Value, Option<String>)> {
    let Value::String(name) = name else {
        let got = args::describe(&name);
        return Err(error(
            NGINX_ZONE,
            format_args!("name must be a zone name (a string), got {got}"),
        ));
    };
    let name = name.as_bytes().to_vec();
    let shown = String::from_utf8_lossy(&name).into_owned();
    // SAFETY: dlsym on the process's global scope with a NUL-terminated name.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"slidewin_nginx_zone".as_ptr()) };
    if symbol.is_null() {
        return Ok((
            Value::Nil,
            Some("the native module (ngx_http_slidewin_module) is not loaded".into()),
        ));
    }
    // SAFETY: the symbol is the native module's function of this very signature.
    let find: FindZone = unsafe { std::mem::transmute::<*mut libc::c_void, FindZone>(symbol) };
    let mut export = MaybeUninit::<ZoneExport>::uninit();
    // SAFETY: name holds its bytes for the call; export is writable.
    if unsafe { find(name.as_ptr(), name.len(), export.as_mut_ptr()) } != 0 {
        let why = format!(
            "no slidewin_zone \"{shown}\" in this worker's nginx.conf (nginx maps its zones \
             after init_by_lua*: open one in a worker)"
        );
        return Ok((Value::Nil, Some(why)));
    }
    // SAFETY: filled by the call that returned 0.
    let export = unsafe { export.assume_init() };
    let rule = export.rule().map_err(args::core(NGINX_ZONE))?;
    // Opened, never laid out: a layout this build computes otherwise leaves the words as
    // they are and is an error.
    let region = Region::of_nginx_zone(&export);
    let zone = Zone::open(region, rule, export.max_key_bytes, WorkerOwner::new())
        .map_err(args::core(NGINX_ZONE))?;
    Ok((push(lua, LuaLimiter::new(Box::new(zone)))?, None))
}
