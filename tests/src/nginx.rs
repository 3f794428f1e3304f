//! Real nginx for tests and the demo: configs rendered from the repository's `nginx/` templates
//! into a prefix of their own, on a loopback port, `daemon off;`, stopped when dropped.
//!
//! A template may use `{{prefix}}`, `{{port}}`, `{{listen}}` (`127.0.0.1:<port>`),
//! `{{workers}}`, `{{load_modules}}` (the `load_module` lines the nginx under test needs, none
//! for OpenResty: see [`crate::nginx_binary`]) and `{{lua_path}}` / `{{lua_cpath}}` (where the
//! Lua modules and `slidewin.so` are, see [`Packages`]). The prefix gets a copy of `lua/`, the
//! module as `lib/slidewin.so` and, when present, the dashboard (`js/dashboard`, with what
//! `make js` vendors into it) under `html/`, all readable by `nobody` (the user nginx's workers
//! run as), wherever the repository lives. `NGINX` names the nginx binary (default `nginx`).
//!
//! ```no_run
//! let nginx = slidewin_tests::nginx::Nginx::start("test.conf", 1);
//! assert_eq!(nginx.get("/ok").status, 200);
//! ```

use std::fs;
use std::net::{Ipv6Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::http::{self, Response};
use crate::nginx_binary::{load_module_lines, nginx_binary};
use crate::process::{free_port, wait_for, Owned};

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// cargo's target directory: `CARGO_TARGET_DIR`, or `target/` of the repository.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// `slidewin.so`, built (release) the first time it is asked for in this process.
pub fn lua_module() -> &'static Path {
    static MODULE: OnceLock<PathBuf> = OnceLock::new();
    MODULE.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--release", "-q", "-p", "slidewin-lua"])
            .current_dir(repo_root())
            .status()
            .expect("run cargo build -p slidewin-lua");
        assert!(
            status.success(),
            "cargo build --release -p slidewin-lua failed"
        );
        target_dir().join("release/libslidewin_lua.so")
    })
}

/// The native module's file (a template's `{{slidewin_module}}`): `SLIDEWIN_NGINX_MODULE`
/// (one built for another nginx, as `NGINX` names it), or the one [`native_module`] builds.
fn native_module_path() -> PathBuf {
    std::env::var_os("SLIDEWIN_NGINX_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("release/ngx_http_slidewin_module.so"))
}

/// `ngx_http_slidewin_module.so`, built against Debian's nginx source tree
/// (`scripts/build-nginx-module.sh`) the first time it is asked for in this process, unless
/// `SLIDEWIN_NGINX_MODULE` names one.
pub fn native_module() -> &'static Path {
    static MODULE: OnceLock<PathBuf> = OnceLock::new();
    MODULE.get_or_init(|| {
        if std::env::var_os("SLIDEWIN_NGINX_MODULE").is_some() {
            return native_module_path();
        }
        let status = Command::new(repo_root().join("scripts/build-nginx-module.sh"))
            .current_dir(repo_root())
            .status()
            .expect("run scripts/build-nginx-module.sh");
        assert!(status.success(), "scripts/build-nginx-module.sh failed");
        native_module_path()
    })
}

/// Where nginx finds `resty.slidewin` and `slidewin.so`.
pub enum Packages {
    /// Copies of the checkout's `lua/` and the built module in the prefix (`lua/`, `lib/`).
    Checkout,
    /// A LuaRocks tree (`luarocks make --tree DIR`) and nothing else: the prefix holds neither.
    RocksTree(PathBuf),
}

impl Packages {
    /// `lua_package_path` and `lua_package_cpath` entries (without the final `;;`).
    fn paths(&self, prefix: &Path) -> (String, String) {
        match self {
            Packages::Checkout => (
                format!("{}/lua/?.lua", prefix.display()),
                format!("{}/lib/?.so", prefix.display()),
            ),
            Packages::RocksTree(tree) => {
                let lua = tree.join("share/lua/5.1");
                (
                    format!("{0}/?.lua;{0}/?/init.lua", lua.display()),
                    format!("{}/?.so", tree.join("lib/lua/5.1").display()),
                )
            }
        }
    }
}

/// A rendered prefix: `conf/` (every template of `nginx/`), `lua/`, `lib/`, `html/`, `logs/`.
pub struct Prefix {
    pub dir: PathBuf,
    pub port: u16,
    _temp: Option<tempfile::TempDir>,
}

impl Prefix {
    /// A new prefix in a temporary directory (removed on drop), on a free port.
    pub fn temporary(workers: u32) -> Self {
        Self::temporary_with(workers, &Packages::Checkout)
    }

    /// [`Prefix::temporary`] with the Lua modules from `packages`.
    pub fn temporary_with(workers: u32, packages: &Packages) -> Self {
        let temp = tempfile::Builder::new()
            .prefix("slidewin-nginx-")
            .tempdir()
            .expect("temp dir");
        let mut prefix = Self::at_with(temp.path(), free_port(), workers, packages);
        prefix._temp = Some(temp);
        prefix
    }

    /// A prefix at `dir` (created or refreshed, kept), listening on 127.0.0.1:`port`.
    pub fn at(dir: &Path, port: u16, workers: u32) -> Self {
        Self::at_with(dir, port, workers, &Packages::Checkout)
    }

    /// [`Prefix::at`] with the Lua modules from `packages`.
    pub fn at_with(dir: &Path, port: u16, workers: u32, packages: &Packages) -> Self {
        let dir = dir.to_path_buf();
        for sub in ["conf", "html", "logs", "temp"] {
            fs::create_dir_all(dir.join(sub)).expect("create prefix dirs");
        }
        let root = repo_root();
        let (lua_path, lua_cpath) = packages.paths(&dir);
        let vars = [
            ("prefix", dir.display().to_string()),
            ("port", port.to_string()),
            ("listen", format!("127.0.0.1:{port}")),
            ("workers", workers.to_string()),
            ("load_modules", load_module_lines().to_string()),
            ("lua_path", lua_path),
            ("lua_cpath", lua_cpath),
            (
                "slidewin_module",
                native_module_path().display().to_string(),
            ),
        ];
        copy_tree(&root.join("nginx"), &dir.join("conf"), &|text| {
            render(text, &vars)
        });
        if let Packages::Checkout = packages {
            copy_tree(&root.join("lua"), &dir.join("lua"), &|text| {
                text.to_string()
            });
            fs::create_dir_all(dir.join("lib")).expect("create lib/");
            fs::copy(lua_module(), dir.join("lib/slidewin.so")).expect("copy slidewin.so");
        }
        if root.join("js/dashboard").is_dir() {
            copy_tree(
                &root.join("js/dashboard"),
                &dir.join("html/dashboard"),
                &|text| text.to_string(),
            );
        }
        open_to_workers(&dir);
        Self {
            dir,
            port,
            _temp: None,
        }
    }

    /// The nginx command for `conf/<config>`, in the foreground.
    pub fn command(&self, config: &str) -> Command {
        let mut cmd = Command::new(nginx_binary());
        // nginx reads NGINX as the sockets of a binary upgrade: the harness's variable is not.
        cmd.env_remove("NGINX")
            .arg("-p")
            .arg(&self.dir)
            .arg("-c")
            .arg(self.dir.join("conf").join(config));
        cmd
    }

    pub fn error_log(&self) -> String {
        fs::read_to_string(self.dir.join("logs/error.log")).unwrap_or_default()
    }
}

/// `{{name}}` replaced by its value; a placeholder left over is a typo in a template.
fn render(template: &str, vars: &[(&str, String)]) -> String {
    let mut text = template.to_string();
    for (name, value) in vars {
        text = text.replace(&format!("{{{{{name}}}}}"), value);
    }
    if let Some(at) = text.find("{{") {
        let rest: String = text[at..].chars().take(30).collect();
        panic!("unknown placeholder in an nginx template: {rest}");
    }
    text
}

/// Copies `from` into `to`, passing text files through `transform` (binaries as they are).
fn copy_tree(from: &Path, to: &Path, transform: &dyn Fn(&str) -> String) {
    fs::create_dir_all(to).expect("create dir");
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display())) {
        let entry = entry.expect("dir entry");
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst, transform);
        } else {
            let bytes = fs::read(&src).expect("read file");
            let out = match String::from_utf8(bytes) {
                Ok(text) => transform(&text).into_bytes(),
                Err(binary) => binary.into_bytes(),
            };
            fs::write(&dst, out).expect("write file");
        }
    }
}

/// World-readable files and traversable directories, so nginx's `nobody` workers read them.
pub fn open_to_workers(dir: &Path) {
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o755));
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            open_to_workers(&path);
        } else {
            let _ = fs::set_permissions(&path, fs::Permissions::from_mode(0o644));
        }
    }
}

/// A running nginx owned by the test: stopped (TERM, then KILL) when dropped.
pub struct Nginx {
    pub prefix: Prefix,
    process: Owned,
}

impl Nginx {
    /// nginx running `nginx/<config>` with `workers` worker processes in a temporary prefix.
    pub fn start(config: &str, workers: u32) -> Self {
        Self::start_with_env(config, workers, &[])
    }

    /// [`Nginx::start`] with environment variables, which a config reads through nginx's `env`
    /// directive (e.g. `SLIDEWIN_REDIS_PORT` in redis.conf: templates render only fixed names).
    pub fn start_with_env(config: &str, workers: u32, env: &[(&str, String)]) -> Self {
        Self::start_in(Prefix::temporary(workers), config, env)
    }

    /// nginx running `conf/<config>` of `prefix` (e.g. [`Prefix::temporary_with`] a rocks tree).
    pub fn start_in(prefix: Prefix, config: &str, env: &[(&str, String)]) -> Self {
        let child = prefix
            .command(config)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx (is it installed? scripts/deps.sh nginx)");
        let mut nginx = Self {
            process: Owned::new("nginx", child),
            prefix,
        };
        // A zone of a gigabyte is laid out before nginx listens: seconds on a loaded machine.
        // nginx binds its addresses one by one, retrying a busy one: wait for each it names.
        let conf =
            fs::read_to_string(nginx.prefix.dir.join("conf").join(config)).unwrap_or_default();
        let port = nginx.prefix.port;
        let mut addrs = vec![SocketAddr::from(([127, 0, 0, 1], port))];
        if conf.contains(&format!("[::1]:{port}")) {
            addrs.push(SocketAddr::from((Ipv6Addr::LOCALHOST, port)));
        }
        for addr in addrs {
            wait_for(addr, Duration::from_secs(30), &mut || nginx.running());
        }
        nginx
    }

    /// `Ok` while the master runs; its exit status and error log once it has exited.
    fn running(&mut self) -> Result<(), String> {
        match self.process.child.try_wait() {
            Ok(Some(status)) => Err(format!("nginx exited ({status}): {}", self.error_log())),
            _ => Ok(()),
        }
    }

    pub fn port(&self) -> u16 {
        self.prefix.port
    }

    /// The master's process id.
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    pub fn get(&self, path: &str) -> Response {
        http::get(self.port(), path)
    }

    /// Runs a Lua chunk inside a worker (test.conf's `/eval`): its return value as a string.
    pub fn eval(&self, lua: &str) -> Response {
        http::post(self.port(), "/eval", lua)
    }

    /// [`Nginx::eval`] without `pcall`: an error reaches nginx (500, logged in error.log).
    pub fn eval_raw(&self, lua: &str) -> Response {
        http::post(self.port(), "/eval?raw=1", lua)
    }

    pub fn error_log(&self) -> String {
        self.prefix.error_log()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // TERM lets the master stop its workers; a KILLed master would leave them orphaned.
        let pid = self.process.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.process.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
