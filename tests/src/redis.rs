//! A real redis-server owned by a test: its own port and directory, no persistence.
//!
//! ```no_run
//! let mut redis = slidewin_tests::redis::RedisServer::start();
//! assert_eq!(redis.client().cmd(&["PING"]).text(), "PONG");
//! redis.stop(); // refuses connections now
//! redis.restart(); // same port, empty
//! ```

use crate::process::{free_port, wait_for_port, Owned};
use crate::resp::{Reply, Resp};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A redis-server on `127.0.0.1:port` with `--save '' --appendonly no`, killed when dropped.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
    process: Option<Owned>,
}

impl RedisServer {
    /// Start one on a free port with a fresh directory.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`RedisServer::start`] with more command-line options, e.g. `["--maxmemory", "16mb"]`.
    pub fn start_with(args: &[&str]) -> Self {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("slidewin-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create redis dir");
        let mut server = Self {
            port,
            dir,
            args: args.iter().map(|a| a.to_string()).collect(),
            process: None,
        };
        server.restart();
        server
    }

    /// The port it listens on (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id of the running server.
    pub fn pid(&self) -> u32 {
        self.process
            .as_ref()
            .expect("redis-server is running")
            .child
            .id()
    }

    /// Its directory (holds `redis.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new client connection.
    pub fn client(&self) -> Resp {
        Resp::connect(self.port)
            .unwrap_or_else(|e| panic!("connect to redis on {}: {e}", self.port))
    }

    /// Kill it (SIGKILL, like a crash); the port refuses connections until [`RedisServer::restart`].
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.stop();
        }
    }

    /// Freeze it (SIGSTOP): connections are accepted by the kernel but never answered, like a
    /// server stuck in a slow command. [`RedisServer::resume`] thaws it.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaw a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let process = self.process.as_ref().expect("redis-server is running");
        let pid = process.child.id().to_string();
        let status = Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Start it again on the same port (empty: nothing is persisted).
    pub fn restart(&mut self) {
        self.stop();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args([
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--protected-mode",
                "no",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.dir.join("redis.log"))
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn redis-server (install it: scripts/deps.sh redis)");
        self.process = Some(Owned::new("redis-server", child));
        wait_for_port(self.port, Duration::from_secs(10));
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The text sent to Redis for script `name` ("log", "buckets", "counter"):
/// `lua/redis/args.lua` followed by `lua/redis/<name>.lua`.
pub fn script_source(name: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lua/redis");
    ["args", name]
        .iter()
        .map(|file| {
            let path = dir.join(format!("{file}.lua"));
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

/// One of the scripts in `lua/redis/`, called with EVALSHA and falling back to EVAL on NOSCRIPT.
pub struct Script {
    source: String,
    sha: String,
}

impl Script {
    /// [`script_source`] of `name`, loaded into the server behind `client`.
    pub fn load(client: &mut Resp, name: &str) -> Self {
        Self::from_source(client, script_source(name))
    }

    /// Any script text, loaded into the server behind `client`.
    pub fn from_source(client: &mut Resp, source: String) -> Self {
        let sha = client.cmd(&["SCRIPT", "LOAD", &source]).text();
        Self { source, sha }
    }

    /// The script's SHA1, as SCRIPT LOAD reported it.
    pub fn sha(&self) -> &str {
        &self.sha
    }

    /// Run it with `keys` and `args`; reloads it transparently after a SCRIPT FLUSH or a restart.
    pub fn run(&self, client: &mut Resp, keys: &[&str], args: &[&str]) -> Reply {
        match self.call(client, "EVALSHA", &self.sha, keys, args) {
            Reply::Error(e) if e.starts_with("NOSCRIPT") => {
                self.call(client, "EVAL", &self.source, keys, args)
            }
            reply => reply,
        }
    }

    fn call(
        &self,
        client: &mut Resp,
        verb: &str,
        body: &str,
        keys: &[&str],
        args: &[&str],
    ) -> Reply {
        let count = keys.len().to_string();
        let command: Vec<&str> = [verb, body, &count]
            .into_iter()
            .chain(keys.iter().copied())
            .chain(args.iter().copied())
            .collect();
        client
            .call(&command)
            .unwrap_or_else(|e| panic!("{verb} {keys:?} {args:?}: {e}"))
    }
}
