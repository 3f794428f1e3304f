//! `ngx_http_slidewin_module`: slidewin's exact sliding windows in plain nginx, no Lua.
//!
//! ```nginx
//! load_module modules/ngx_http_slidewin_module.so;
//! http {
//!     slidewin_zone api size=10m log 10/1s log 50/10s;
//!     server {
//!         location /api/ { slidewin_limit api key=$binary_remote_addr; proxy_pass ...; }
//!         location = /metrics { slidewin_metrics; }
//!     }
//! }
//! ```
//!
//! The decisions are the core's (`slidewin::shared::Zone` over an nginx shared zone) and so
//! are the header values (`slidewin::headers`): the module only reads directives, carries
//! keys and costs in and headers out. Every `unsafe` lives in [`nginx`]; every nginx callback
//! catches panics there, so none crosses into nginx.

mod config;
mod limit;
mod metrics;
mod nginx;
mod zone;
