//! `slidewin.nginx_zone(name)`: a limiter over the zone a `slidewin_zone` directive of the
//! native nginx module declared, in a worker of the same nginx (both modules loaded). It
//! decides, lists its top keys and sets its live limits on the very words the module's
//! `slidewin_limit` uses: one region, two doors.
//!
//! ```lua
//! local lim, err = require("slidewin").nginx_zone("api")  -- in a worker, not init_by_lua
//! local top = lim:top(10)                     -- the keys nginx.conf's limit refused
//! -- lim:rule().windows[i].name: the names nginx.conf gives the windows ("api", "api-10s")
//! ```
//!
//! The native module maps its zones after the config is read, so the call belongs in a worker
//! (`init_worker_by_lua*` or a request), where it finds them; nginx loads modules with
//! `RTLD_GLOBAL`, so the module's `slidewin_nginx_zone` is found with `dlsym`.

use std::ffi::c_int;
use std::mem::MaybeUninit;

use mlua::{Lua, Result as LuaResult, Value};
use slidewin::shared::{Zone, ZoneExport};
use slidewin::window_name::WindowNames;

use crate::args::{self, error};
use crate::limiter::{push, LuaLimiter};
use crate::mapping::WorkerOwner;
use crate::region::Region;

const NGINX_ZONE: &str = "slidewin.nginx_zone";

type FindZone = unsafe extern "C" fn(*const u8, usize, *mut ZoneExport) -> c_int;
type WindowName =
    unsafe extern "C" fn(*const u8, usize, usize, *mut *const u8, *mut usize) -> c_int;

/// The module's function `symbol` (NUL-terminated), or null when no loaded module has it.
fn module_symbol(symbol: &std::ffi::CStr) -> *mut libc::c_void {
    // SAFETY: dlsym on the process's global scope with a NUL-terminated name.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, symbol.as_ptr()) }
}

/// `slidewin.nginx_zone(name)`: the limiter (its windows named as nginx.conf names them), or nil
/// and why not.
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
    let symbol = module_symbol(c"slidewin_nginx_zone");
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
    let lengths: Vec<i64> = rule.windows().iter().map(|w| w.window_ms()).collect();
    // Opened, never laid out: a layout this build computes otherwise leaves the words as
    // they are and is an error.
    let region = Region::of_nginx_zone(&export);
    let zone = Zone::open(region, rule, export.max_key_bytes, WorkerOwner::new())
        .map_err(args::core(NGINX_ZONE))?;
    let configured = zone_window_names(&name, export.n_windows);
    let names = WindowNames::new(&shown, configured.into_iter().zip(lengths)).ok();
    Ok((push(lua, LuaLimiter::new(Box::new(zone), names))?, None))
}

/// The names nginx.conf gives the zone's `n` windows, read from the module (`None` each from
/// a module without the function: one built before it).
fn zone_window_names(zone: &[u8], n: usize) -> Vec<Option<String>> {
    let symbol = module_symbol(c"slidewin_nginx_zone_window_name");
    // SAFETY: the symbol is the native module's function of this very signature.
    let name_of = (!symbol.is_null())
        .then(|| unsafe { std::mem::transmute::<*mut libc::c_void, WindowName>(symbol) });
    (0..n)
        .map(|window| {
            let name_of = name_of?;
            let (mut data, mut len) = (std::ptr::null(), 0);
            // SAFETY: zone holds its bytes for the call; data and len are writable.
            if unsafe { name_of(zone.as_ptr(), zone.len(), window, &mut data, &mut len) } != 0 {
                return None;
            }
            // SAFETY: the module gave `len` bytes at `data`, living as long as its
            // configuration, which runs this worker; they are copied at once.
            let bytes = unsafe { std::slice::from_raw_parts(data, len) };
            Some(String::from_utf8_lossy(bytes).into_owned())
        })
        .collect()
}
