//! Which nginx the harness runs, and how that nginx gets its Lua module.
//!
//! `NGINX` names the binary (default: `nginx` on PATH). An nginx with the Lua module built in
//! (OpenResty: `--add-module=.../ngx_lua-...` in `nginx -V`) needs no `load_module` line, and
//! loading Debian's files into it would fail; any other nginx (Debian's) gets NDK and the Lua
//! module from its `--modules-path`, NDK first (the Lua module needs its symbols).

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// The dynamic modules a Lua-less nginx loads, in order.
const DYNAMIC_MODULES: [&str; 2] = ["ndk_http_module.so", "ngx_http_lua_module.so"];

/// Where Debian's nginx keeps its modules when `nginx -V` names no `--modules-path`.
const DEFAULT_MODULES_PATH: &str = "/usr/lib/nginx/modules";

/// The nginx binary under test: `$NGINX`, or `nginx` on PATH.
pub fn nginx_binary() -> String {
    std::env::var("NGINX").unwrap_or_else(|_| "nginx".into())
}

/// The main-context `load_module` lines for [`nginx_binary`] (empty when the Lua module is
/// built in), worked out once per process from its `nginx -V`.
pub fn load_module_lines() -> &'static str {
    static LINES: OnceLock<String> = OnceLock::new();
    LINES.get_or_init(|| {
        let binary = nginx_binary();
        let output = Command::new(&binary)
            .arg("-V")
            .output()
            .unwrap_or_else(|e| panic!("run {binary} -V (NGINX names the binary): {e}"));
        // nginx prints its version and configure arguments on stderr.
        let version = String::from_utf8_lossy(&output.stderr);
        load_modules_for(&version, &|path| path.is_file())
            .unwrap_or_else(|problem| panic!("{binary}: {problem}"))
    })
}

/// The `load_module` lines an nginx whose `nginx -V` printed `version` needs, given which files
/// exist; an error saying what to install when the Lua module is neither built in nor a file.
pub fn load_modules_for(version: &str, exists: &dyn Fn(&Path) -> bool) -> Result<String, String> {
    let configure = version
        .lines()
        .find_map(|line| line.strip_prefix("configure arguments:"))
        .unwrap_or("");
    let built_in = configure.split_whitespace().any(|arg| {
        arg.strip_prefix("--add-module=")
            .is_some_and(|module| module.contains("ngx_lua") || module.contains("lua-nginx-module"))
    });
    if built_in {
        return Ok(String::new());
    }
    let modules_path = configure
        .split_whitespace()
        .find_map(|arg| arg.strip_prefix("--modules-path="))
        .unwrap_or(DEFAULT_MODULES_PATH);
    let mut lines = String::new();
    for module in DYNAMIC_MODULES {
        let file = Path::new(modules_path).join(module);
        if !exists(&file) {
            return Err(format!(
                "the Lua module is not built in and {} is missing: install it (scripts/deps.sh nginx) \
                 or set NGINX to an nginx with ngx_lua built in (OpenResty)",
                file.display()
            ));
        }
        lines.push_str(&format!("load_module {};\n", file.display()));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN: &str = "nginx version: nginx/1.22.1\nbuilt with OpenSSL 3.0.11\n\
        configure arguments: --with-cc-opt='-g -O2' --prefix=/usr/share/nginx \
        --modules-path=/usr/lib/nginx/modules --with-compat --with-http_ssl_module\n";
    const OPENRESTY: &str = "nginx version: openresty/1.25.3.1\n\
        configure arguments: --prefix=/usr/local/openresty/nginx --with-cc-opt=-O2 \
        --add-module=../ngx_devel_kit-0.3.3 --add-module=../echo-nginx-module-0.63 \
        --add-module=../ngx_lua-0.10.26 --add-module=../stream-lua-nginx-module-0.0.14\n";

    #[test]
    fn openresty_loads_no_module() {
        assert_eq!(load_modules_for(OPENRESTY, &|_| true), Ok(String::new()));
    }

    #[test]
    fn a_built_in_lua_nginx_module_checkout_loads_no_module() {
        let version = "configure arguments: --add-module=/src/lua-nginx-module\n";
        assert_eq!(load_modules_for(version, &|_| false), Ok(String::new()));
    }

    #[test]
    fn debian_loads_ndk_then_lua_from_its_modules_path() {
        assert_eq!(
            load_modules_for(DEBIAN, &|_| true).unwrap(),
            "load_module /usr/lib/nginx/modules/ndk_http_module.so;\n\
             load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;\n"
        );
    }

    #[test]
    fn a_missing_module_file_is_an_error_naming_it() {
        let only_ndk = |path: &Path| path.ends_with("ndk_http_module.so");
        let err = load_modules_for(DEBIAN, &only_ndk).unwrap_err();
        assert!(
            err.contains("/usr/lib/nginx/modules/ngx_http_lua_module.so is missing"),
            "{err}"
        );
    }

    #[test]
    fn the_modules_path_comes_from_nginx_v() {
        let version = "configure arguments: --modules-path=/opt/nginx/mods\n";
        let lines = load_modules_for(version, &|_| true).unwrap();
        assert!(
            lines.starts_with("load_module /opt/nginx/mods/ndk_http_module.so;"),
            "{lines}"
        );
    }
}
