//! Everything that touches nginx's C structures: the module's tables, the directives and the
//! shared zone here; the request's side (the phase handler, the variable, the zone export) in
//! [`request`], the metrics handler in [`scrape`], the worker as a lock owner and its clock in
//! [`process`]. Each callback runs its body under `catch_unwind`: a panic becomes an error
//! (config) or a 500 (request), never an unwind into nginx.

pub mod process;
mod request;
mod scrape;

use core::ffi::{c_char, c_void};
use core::ptr;
use core::sync::atomic::AtomicU64;
use std::panic::{catch_unwind, AssertUnwindSafe};

use ngx::core::{Status as NgxStatus, NGX_CONF_ERROR, NGX_CONF_OK};
use ngx::ffi::{
    ngx_array_push, ngx_command_t, ngx_conf_t, ngx_hash_key_t, ngx_http_add_variable,
    ngx_http_compile_complex_value, ngx_http_compile_complex_value_t, ngx_http_complex_value_t,
    ngx_http_get_variable_index, ngx_http_handler_pt, ngx_http_module_t,
    ngx_http_phases_NGX_HTTP_LOG_PHASE, ngx_http_phases_NGX_HTTP_PREACCESS_PHASE,
    ngx_http_request_t, ngx_http_variable_t, ngx_http_variable_value_t, ngx_int_t, ngx_module_t,
    ngx_pnalloc, ngx_shared_memory_add, ngx_shm_zone_t, ngx_slab_pool_t, ngx_str_t, ngx_uint_t,
    NGX_CONF_2MORE, NGX_CONF_NOARGS, NGX_CONF_TAKE1, NGX_HTTP_LOC_CONF, NGX_HTTP_LOC_CONF_OFFSET,
    NGX_HTTP_MAIN_CONF, NGX_HTTP_MAIN_CONF_OFFSET, NGX_HTTP_MODULE, NGX_HTTP_SRV_CONF,
    NGX_HTTP_VAR_NOCACHEABLE, NGX_HTTP_VAR_NOHASH, NGX_LOG_EMERG, NGX_LOG_ERR, NGX_LOG_INFO,
    NGX_LOG_NOTICE, NGX_LOG_WARN,
};
use ngx::http::{
    HttpModule, HttpModuleLocationConf, HttpModuleMainConf, Merge, MergeConfigError,
    NgxHttpCoreModule,
};
use ngx::{ngx_conf_log_error, ngx_log_error, ngx_string};
use slidewin::headers::Style;
use slidewin::reservation::Excess;
use slidewin::rule::Limits;
use slidewin::shared::Attached;

use crate::config::{self, Cost, LogLevel};
use crate::zone::ZoneState;
use request::{log_phase, msec_variable, no_value, preaccess, status_variable};

/// A variable's get handler.
type VariableHandler =
    extern "C" fn(*mut ngx_http_request_t, *mut ngx_http_variable_value_t, usize) -> ngx_int_t;
use scrape::metrics_handler;

struct Module;

impl HttpModule for Module {
    fn module() -> &'static ngx_module_t {
        // SAFETY: the module table is written by nginx only while it loads the module, before
        // any callback runs.
        unsafe { &*ptr::addr_of!(ngx_http_slidewin_module) }
    }

    unsafe extern "C" fn preconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
        guarded(NgxStatus::NGX_ERROR.into(), || {
            // A request's decision is kept in a variable no config can name: a request's
            // variables live as long as it, through internal redirects, which zero the
            // module contexts.
            let hidden = (NGX_HTTP_VAR_NOCACHEABLE | NGX_HTTP_VAR_NOHASH) as ngx_uint_t;
            let Some(index) = add_variable(cf, DECISION, hidden, no_value, 0)
                .and_then(|_| add_variable(cf, RESERVED, hidden, no_value, 0))
                .and_then(|_| variable_index(cf, DECISION.as_bytes()).ok())
            else {
                return NgxStatus::NGX_ERROR.into();
            };
            let variables: [(ngx_str_t, VariableHandler); 2] = [
                (ngx_string!("slidewin_status"), status_variable),
                (ngx_string!("slidewin_msec"), msec_variable),
            ];
            let flags = NGX_HTTP_VAR_NOCACHEABLE as ngx_uint_t;
            for (name, handler) in variables {
                if add_variable(cf, name, flags, handler, index).is_none() {
                    return NgxStatus::NGX_ERROR.into();
                }
            }
            NgxStatus::NGX_OK.into()
        })
    }

    unsafe extern "C" fn postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
        guarded(NgxStatus::NGX_ERROR.into(), || {
            // SAFETY: nginx passes a valid cf inside the http block.
            let Some(cmcf) = NgxHttpCoreModule::main_conf_mut(unsafe { &*cf }) else {
                return NgxStatus::NGX_ERROR.into();
            };
            // SAFETY: cf is valid, and this module's main conf was made for the http block.
            let Some(main) = Module::main_conf(unsafe { &*cf }) else {
                return NgxStatus::NGX_ERROR.into();
            };
            // The log phase's handler only where a slidewin_limit has settle=: every request
            // of the http block would run it.
            let preaccess_phase = ngx_http_phases_NGX_HTTP_PREACCESS_PHASE as usize;
            let log = ngx_http_phases_NGX_HTTP_LOG_PHASE as usize;
            let settles = main.reserved.is_some();
            let handlers: [(usize, ngx_http_handler_pt, bool); 2] = [
                (preaccess_phase, Some(preaccess), true),
                (log, Some(log_phase), settles),
            ];
            for (phase, handler, _) in handlers.into_iter().filter(|h| h.2) {
                let phase = &mut cmcf.phases[phase];
                // SAFETY: the handlers array belongs to the core module's main conf.
                let h = unsafe { ngx_array_push(&mut phase.handlers) } as *mut ngx_http_handler_pt;
                if h.is_null() {
                    return NgxStatus::NGX_ERROR.into();
                }
                // SAFETY: ngx_array_push returned room for one handler.
                unsafe { *h = handler };
            }
            // SAFETY: before ngx_http_variables_init_vars, the core's declared variables and
            // prefix variables are arrays of ngx_hash_key_t and ngx_http_variable_t.
            let (declared, prefixes) = unsafe {
                let keys = (*cmcf.variables_keys).keys.as_slice::<ngx_hash_key_t>();
                let prefixes = cmcf.prefix_variables.as_slice::<ngx_http_variable_t>();
                (
                    keys.iter().map(|k| k.key.as_bytes()).collect::<Vec<_>>(),
                    prefixes
                        .iter()
                        .map(|v| v.name.as_bytes())
                        .collect::<Vec<_>>(),
                )
            };
            for (name, at) in &main.references {
                let known = declared
                    .iter()
                    .any(|d| d.eq_ignore_ascii_case(name.as_bytes()))
                    || prefixes.iter().any(|p| name.as_bytes().starts_with(p));
                if !known {
                    // SAFETY: cf's log is valid during configuration.
                    let log = unsafe { (*cf).log };
                    ngx_log_error!(NGX_LOG_EMERG, log, "{at}: unknown variable \"{name}\"");
                    return NgxStatus::NGX_ERROR.into();
                }
            }
            NgxStatus::NGX_OK.into()
        })
    }
}

/// The http block's zones (boxed: nginx's shared zones point at them), and the variables the
/// limits read, checked once every module has declared its own: `(name, where)`.
#[derive(Default)]
struct MainConf {
    #[allow(clippy::vec_box)] // the boxes stay put as the Vec grows: shm zones point at them
    zones: Vec<Box<ZoneState>>,
    references: Vec<(String, String)>,
    /// The index of the hidden variable that holds a request's reservations, once a
    /// `slidewin_limit` has `settle=` (the log phase has nothing to do before).
    reserved: Option<ngx_uint_t>,
}

/// A `slidewin_limit`'s cost as compiled: a constant, or a value read for each request.
#[derive(Clone, Copy)]
enum LimitCost {
    Fixed(u64),
    Variable(*mut ngx_http_complex_value_t),
}

/// A `slidewin_limit`'s `limit=`: the key's own limits.
#[derive(Clone, Copy)]
enum KeyLimits {
    /// None given: the zone's live limits.
    Zone,
    /// A constant, checked against the zone's rule when nginx read it.
    Fixed(Limits),
    /// A value with variables, read and checked for each request (empty: the zone's).
    Variable(*mut ngx_http_complex_value_t),
}

/// The name of the hidden variable that holds a request's decision.
const DECISION: ngx_str_t = ngx_string!("slidewin_decision");
/// The name of the hidden variable that holds a request's reservations (`settle=`).
const RESERVED: ngx_str_t = ngx_string!("slidewin_reserved");

/// Adds variable `name` with `flags`, read by `handler` with `data`; `None` when nginx could
/// not.
fn add_variable(
    cf: *mut ngx_conf_t,
    mut name: ngx_str_t,
    flags: ngx_uint_t,
    handler: VariableHandler,
    data: ngx_uint_t,
) -> Option<()> {
    // SAFETY: cf is valid during preconfiguration; the variable lives in the cycle's pool.
    let var = unsafe { ngx_http_add_variable(cf, &mut name, flags) };
    if var.is_null() {
        return None;
    }
    // SAFETY: just allocated by nginx, not yet shared.
    unsafe {
        (*var).get_handler = Some(handler);
        (*var).data = data;
    }
    Some(())
}

/// One `slidewin_limit` as compiled.
#[derive(Clone, Copy)]
struct Limit {
    zone: *const ZoneState,
    key: *mut ngx_http_complex_value_t,
    /// The index of the key's one variable, when it is one alone (`$binary_remote_addr`).
    key_index: Option<ngx_uint_t>,
    cost: LimitCost,
    limits: KeyLimits,
    /// `settle=`: what the call used, read in the log phase.
    settle: Option<*mut ngx_http_complex_value_t>,
    /// `above=`: what a settlement above the reservation does.
    above: Excess,
    status: usize,
    dry_run: bool,
    style: Style,
}

#[derive(Default)]
struct LocConf {
    limits: Vec<Limit>,
    /// The index of the hidden variable that holds a request's decision (with the limits).
    decision: ngx_uint_t,
    /// `slidewin_limit_log_level`, when this level or one above sets it.
    log_level: Option<LogLevel>,
    /// Whether a limit has `settle=`: the request's admitted calls are kept for the log phase.
    settles: bool,
}

impl LocConf {
    /// The error.log level of a refusal: `error` unless set.
    fn refusal_log_level(&self) -> ngx_uint_t {
        let level = match self.log_level.unwrap_or(LogLevel::Error) {
            LogLevel::Info => NGX_LOG_INFO,
            LogLevel::Notice => NGX_LOG_NOTICE,
            LogLevel::Warn => NGX_LOG_WARN,
            LogLevel::Error => NGX_LOG_ERR,
        };
        level as ngx_uint_t
    }
}

impl Merge for LocConf {
    fn merge(&mut self, prev: &LocConf) -> Result<(), MergeConfigError> {
        // Like limit_req: a level with no slidewin_limit of its own inherits all of them.
        if self.limits.is_empty() {
            self.limits = prev.limits.clone();
            self.decision = prev.decision;
            self.settles = prev.settles;
        }
        self.log_level = self.log_level.or(prev.log_level);
        Ok(())
    }
}

// SAFETY: MainConf is what create_main_conf allocates for this module's main conf slot.
unsafe impl HttpModuleMainConf for Module {
    type MainConf = MainConf;
}

// SAFETY: LocConf is what create_loc_conf allocates for this module's location conf slot.
unsafe impl HttpModuleLocationConf for Module {
    type LocationConf = LocConf;
}

/// Where a directive may stand: http, server and location.
const ANY_LEVEL: u32 = NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF;

/// A directive of the table: its name (`ngx_string!`: nginx compares it NUL-terminated),
/// contexts and arguments, handler and conf slot.
const fn command(
    name: ngx_str_t,
    type_: u32,
    set: extern "C" fn(*mut ngx_conf_t, *mut ngx_command_t, *mut c_void) -> *mut c_char,
    conf: ngx_uint_t,
) -> ngx_command_t {
    ngx_command_t {
        name,
        type_: type_ as ngx_uint_t,
        set: Some(set),
        conf,
        offset: 0,
        post: ptr::null_mut(),
    }
}

static mut COMMANDS: [ngx_command_t; 5] = [
    command(
        ngx_string!("slidewin_zone"),
        NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE,
        set_zone,
        NGX_HTTP_MAIN_CONF_OFFSET,
    ),
    command(
        ngx_string!("slidewin_limit"),
        ANY_LEVEL | NGX_CONF_2MORE,
        set_limit,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("slidewin_limit_log_level"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        set_log_level,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("slidewin_metrics"),
        NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
        set_metrics,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    ngx_command_t::empty(),
];

static CTX: ngx_http_module_t = ngx_http_module_t {
    preconfiguration: Some(Module::preconfiguration),
    postconfiguration: Some(Module::postconfiguration),
    create_main_conf: Some(Module::create_main_conf),
    init_main_conf: None,
    create_srv_conf: None,
    merge_srv_conf: None,
    create_loc_conf: Some(Module::create_loc_conf),
    merge_loc_conf: Some(Module::merge_loc_conf),
};

ngx::ngx_modules!(ngx_http_slidewin_module);

#[used]
#[allow(non_upper_case_globals)]
pub static mut ngx_http_slidewin_module: ngx_module_t = ngx_module_t {
    ctx: ptr::addr_of!(CTX) as _,
    // SAFETY: the address of a static, taken at compile time.
    commands: unsafe { ptr::addr_of_mut!(COMMANDS[0]) },
    type_: NGX_HTTP_MODULE as _,
    ..ngx_module_t::default()
};

/// Runs `f`, answering `on_panic` if it panics.
fn guarded<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// A directive's handler around `f`: its error logged at emerg, naming the directive.
fn directive(cf: *mut ngx_conf_t, f: impl FnOnce(&[&[u8]]) -> Result<(), String>) -> *mut c_char {
    let result = guarded(Err("internal error".to_string()), || {
        // SAFETY: nginx passes the directive's words in cf->args (strings in cf->pool).
        let words = unsafe { (*(*cf).args).as_slice::<ngx_str_t>() };
        let args: Vec<&[u8]> = words[1..].iter().map(|w| w.as_bytes()).collect();
        f(&args)
    });
    match result {
        Ok(()) => NGX_CONF_OK,
        Err(message) => {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "{}", message);
            NGX_CONF_ERROR
        }
    }
}

extern "C" fn set_zone(
    cf: *mut ngx_conf_t,
    _: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    directive(cf, |args| {
        let spec = config::zone(args)?;
        // SAFETY: conf is this module's main conf, made by create_main_conf.
        let main = unsafe { &mut *(conf as *mut MainConf) };
        if main.zones.iter().any(|z| z.spec.name == spec.name) {
            return Err(format!(
                "slidewin_zone: zone \"{}\" is declared twice",
                spec.name
            ));
        }
        let size = spec.size;
        let mut state = Box::new(ZoneState::new(spec));
        let shm_name = state.shm_name();
        let mut name = ngx_str_t {
            len: shm_name.len(),
            // SAFETY: ngx_shared_memory_add copies nothing: the bytes go to cf->pool below.
            data: unsafe { ngx_pnalloc((*cf).pool, shm_name.len()) } as *mut u8,
        };
        if name.data.is_null() {
            return Err("slidewin_zone: out of memory".into());
        }
        // SAFETY: data has room for the name's bytes.
        unsafe { ptr::copy_nonoverlapping(shm_name.as_ptr(), name.data, shm_name.len()) };
        let tag = ptr::addr_of_mut!(ngx_http_slidewin_module) as *mut c_void;
        // SAFETY: cf is valid; nginx keeps the zone for the cycle.
        let shm = unsafe { ngx_shared_memory_add(cf, &mut name, size, tag) };
        if shm.is_null() {
            return Err(format!(
                "slidewin_zone: could not add zone \"{}\"",
                state.spec.name
            ));
        }
        // SAFETY: shm is the cycle's zone entry, set up here before nginx maps it.
        unsafe {
            (*shm).init = Some(init_zone);
            (*shm).data = (&mut *state as *mut ZoneState).cast();
        }
        main.zones.push(state);
        Ok(())
    })
}

/// nginx mapped (or kept, on a reload with the same name and size) the zone's memory: lay
/// the core zone over what follows the slab header.
extern "C" fn init_zone(shm: *mut ngx_shm_zone_t, _old: *mut c_void) -> ngx_int_t {
    guarded(NgxStatus::NGX_ERROR.into(), || {
        // SAFETY: nginx passes the zone set_zone added, whose data is our ZoneState (alive as
        // long as the conf, which outlives the zone's use), and whose memory starts with the
        // slab pool nginx initialised; nothing allocates from that pool, so the words between
        // its start and end are ours alone, and stay mapped while this cycle lives.
        let (state, words) = unsafe {
            let state = &mut *((*shm).data as *mut ZoneState);
            let pool = (*shm).shm.addr as *mut ngx_slab_pool_t;
            let start = ((*pool).start as usize).next_multiple_of(8);
            let len = ((*pool).end as usize).saturating_sub(start) / 8;
            let words: &'static [AtomicU64] =
                core::slice::from_raw_parts(start as *const AtomicU64, len);
            (state, words)
        };
        // SAFETY: the cycle's log, valid while nginx initialises the cycle.
        let log = unsafe { (*shm).shm.log };
        match state.attach(words) {
            Ok(attached) => {
                let how = match attached {
                    Attached::Fresh => "laid out afresh",
                    Attached::Reused => "kept with its keys",
                };
                let (keys, bytes) = state.capacity();
                ngx_log_error!(
                    NGX_LOG_NOTICE,
                    log,
                    "slidewin_zone \"{}\": {}, holds {} keys of {} bytes",
                    state.spec.name,
                    how,
                    keys,
                    bytes
                );
                NgxStatus::NGX_OK.into()
            }
            Err(message) => {
                ngx_log_error!(NGX_LOG_EMERG, log, "{}", message);
                NgxStatus::NGX_ERROR.into()
            }
        }
    })
}

/// A value of the directive, compiled (variables allowed).
fn compile(cf: *mut ngx_conf_t, value: &[u8]) -> Result<*mut ngx_http_complex_value_t, String> {
    // SAFETY: cf is valid during the directive; what is allocated lives in its pool, and
    // `value` points into a word nginx read into cf->pool.
    unsafe {
        let cv = ngx_pnalloc((*cf).pool, core::mem::size_of::<ngx_http_complex_value_t>())
            as *mut ngx_http_complex_value_t;
        if cv.is_null() {
            return Err("slidewin_limit: out of memory".into());
        }
        ptr::write_bytes(cv, 0, 1);
        let mut text = ngx_str_t {
            len: value.len(),
            data: value.as_ptr() as *mut u8,
        };
        let mut ccv: ngx_http_compile_complex_value_t = core::mem::zeroed();
        ccv.cf = cf;
        ccv.value = &mut text;
        ccv.complex_value = cv;
        if ngx_http_compile_complex_value(&mut ccv) != NgxStatus::NGX_OK.into() {
            return Err(format!(
                "slidewin_limit: \"{}\" is not a valid value (an unknown variable?)",
                String::from_utf8_lossy(value)
            ));
        }
        Ok(cv)
    }
}

/// The index of variable `name`, which a request reads without nginx's script engine.
fn variable_index(cf: *mut ngx_conf_t, name: &[u8]) -> Result<ngx_uint_t, String> {
    let mut text = ngx_str_t {
        len: name.len(),
        data: name.as_ptr() as *mut u8,
    };
    // SAFETY: cf is valid during the directive; nginx copies the name into its pool.
    let index = unsafe { ngx_http_get_variable_index(cf, &mut text) };
    ngx_uint_t::try_from(index).map_err(|_| {
        format!(
            "slidewin_limit: variable \"{}\" could not be indexed",
            String::from_utf8_lossy(name)
        )
    })
}

extern "C" fn set_limit(
    cf: *mut ngx_conf_t,
    _: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    directive(cf, |args| {
        let spec = config::limit(args)?;
        // SAFETY: cf is inside the http block (the directive's context says so); nothing else
        // holds the main conf while a directive is read.
        let main = Module::main_conf_mut(unsafe { &*cf }).ok_or("slidewin_limit: outside http")?;
        let zone = main
            .zones
            .iter_mut()
            .find(|z| z.spec.name == spec.zone)
            .ok_or_else(|| {
                format!(
                    "slidewin_limit: zone \"{}\" must be declared by a slidewin_zone before it",
                    spec.zone
                )
            })?;
        zone.dry_runs |= spec.dry_run;
        let zone: *const ZoneState = &**zone;
        let key = compile(cf, spec.key)?;
        let key_index = match config::lone_variable(spec.key) {
            Some(name) => Some(variable_index(cf, name)?),
            None => None,
        };
        let (cost, cost_text) = match spec.cost {
            Cost::Fixed(cost) => (LimitCost::Fixed(cost), &b""[..]),
            Cost::Variable(text) => (LimitCost::Variable(compile(cf, text)?), text),
        };
        let limit_text = spec.limit.unwrap_or_default();
        let limits = match spec.limit {
            None => KeyLimits::Zone,
            Some(text) if text.contains(&b'$') => KeyLimits::Variable(compile(cf, text)?),
            // SAFETY: the zone is boxed in the main conf, alive while nginx reads it.
            Some(text) => KeyLimits::Fixed(config::limits(
                spec.zone,
                &unsafe { &*zone }.spec.rule,
                text,
            )?),
        };
        // SAFETY: cf is valid during the directive; conf_file names the file being read.
        let (file, line) = unsafe {
            (
                (*(*cf).conf_file).file.name.as_bytes(),
                (*(*cf).conf_file).line,
            )
        };
        let file = String::from_utf8_lossy(file);
        let settle = match spec.settle {
            Some(text) => {
                main.reserved = Some(variable_index(cf, RESERVED.as_bytes())?);
                Some(compile(cf, text)?)
            }
            None => None,
        };
        let settle_text = spec.settle.unwrap_or_default();
        let arguments = [
            ("key", spec.key),
            ("cost", cost_text),
            ("limit", limit_text),
            ("settle", settle_text),
        ];
        for (argument, value) in arguments {
            for name in config::variables(value) {
                let value = String::from_utf8_lossy(value);
                let at = format!("slidewin_limit: {argument} \"{value}\" in {file}:{line}");
                main.references.push((name, at));
            }
        }
        // SAFETY: conf is this module's location conf for the level being read.
        let loc = unsafe { &mut *(conf as *mut LocConf) };
        loc.decision = variable_index(cf, DECISION.as_bytes())?;
        if loc.limits.iter().any(|l| ptr::eq(l.zone, zone)) {
            return Err(format!(
                "slidewin_limit: zone \"{}\" is limited twice here",
                spec.zone
            ));
        }
        loc.settles |= settle.is_some();
        loc.limits.push(Limit {
            zone,
            key,
            key_index,
            cost,
            limits,
            settle,
            above: spec.above,
            status: spec.status,
            dry_run: spec.dry_run,
            style: spec.style,
        });
        Ok(())
    })
}

extern "C" fn set_log_level(
    cf: *mut ngx_conf_t,
    _: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    directive(cf, |args| {
        // SAFETY: conf is this module's location conf for the level being read.
        let loc = unsafe { &mut *(conf as *mut LocConf) };
        if loc.log_level.is_some() {
            return Err("slidewin_limit_log_level: is duplicate".to_string());
        }
        loc.log_level = Some(config::log_level(args)?);
        Ok(())
    })
}

extern "C" fn set_metrics(
    cf: *mut ngx_conf_t,
    _: *mut ngx_command_t,
    _: *mut c_void,
) -> *mut c_char {
    directive(cf, |_| {
        // SAFETY: cf is inside a location (the directive's context says so).
        let clcf = NgxHttpCoreModule::location_conf_mut(unsafe { &*cf })
            .ok_or("slidewin_metrics: outside a location")?;
        clcf.handler = Some(metrics_handler);
        Ok(())
    })
}
