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
use crate::tls::TestCa;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-server on `127.0.0.1:port` with `--save '' --appendonly no`, killed when dropped.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
    process: Option<Owned>,
    tls_port: Option<u16>,
}

impl RedisServer {
    /// Start one on a free port with a fresh directory.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`RedisServer::start`] with more command-line options, e.g. `["--maxmemory", "16mb"]`.
    pub fn start_with(args: &[&str]) -> Self {
        Self::start_on_free_ports(|| (args.iter().map(|a| a.to_string()).collect(), None))
    }

    /// [`RedisServer::start_with`], serving TLS with `ca`'s server certificate on
    /// [`RedisServer::tls_port`] too; [`RedisServer::port`] stays plain, for the harness only.
    pub fn start_tls(ca: &TestCa, args: &[&str]) -> Self {
        Self::start_on_free_ports(|| {
            let tls_port = free_port();
            let mut all = ca.redis_args(tls_port);
            all.extend(args.iter().map(|a| a.to_string()));
            (all, Some(tls_port))
        })
    }

    /// A server with the arguments (and TLS port) `attempt` gives, on a port found free. A
    /// port found free can be taken before redis-server binds it (by another test's server, or
    /// as the source port of a connection): then it exits, or the listener is not ours.
    /// Other ports, then.
    fn start_on_free_ports(attempt: impl Fn() -> (Vec<String>, Option<u16>)) -> Self {
        let mut log = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("slidewin-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("create redis dir");
            let (args, tls_port) = attempt();
            let mut server = Self {
                port,
                dir,
                args,
                process: None,
                tls_port,
            };
            if server.try_restart() {
                return server;
            }
            log = std::fs::read_to_string(server.dir.join("redis.log")).unwrap_or_default();
        }
        panic!("redis-server did not start on 5 free ports in a row; its last log:\n{log}");
    }

    /// The TLS port of a server made by [`RedisServer::start_tls`].
    pub fn tls_port(&self) -> u16 {
        self.tls_port.expect("a server started with start_tls")
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

    /// The script calls that decided something since the last CONFIG RESETSTAT: EVALSHA calls
    /// (less those refused with NOSCRIPT) plus the EVALs that followed them (INFO commandstats).
    pub fn script_decisions(&self) -> u64 {
        let stats = self.client().cmd(&["INFO", "commandstats"]).text();
        let field = |command: &str, name: &str| -> u64 {
            stats
                .lines()
                .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:")))
                .and_then(|l| {
                    l.split(',')
                        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                })
                .map_or(0, |v| v.parse().unwrap())
        };
        field("evalsha", "calls") - field("evalsha", "failed_calls") + field("eval", "calls")
    }

    /// Its role now: "master" or "slave" (the first field of ROLE).
    pub fn role(&self) -> String {
        match self.client().cmd(&["ROLE"]) {
            Reply::Array(Some(items)) => items[0].text(),
            other => panic!("ROLE: {other:?}"),
        }
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
        let dir = self.dir.display().to_string();
        assert!(
            self.try_restart(),
            "redis-server did not start on port {} (its log: {dir}/redis.log)",
            self.port
        );
    }

    /// Starts it on its port: false when the server that listens there is not this one (ours
    /// exited: another process had the port).
    fn try_restart(&mut self) -> bool {
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
        let pid = child.id();
        let mut process = Owned::new("redis-server", child);
        let deadline = Instant::now() + Duration::from_secs(10);
        let info = loop {
            // A listener that resets the connection (the port's last owner going away, or
            // not a redis) is waited out like one not there yet.
            let reply = Resp::connect(self.port).and_then(|mut c| c.call(&["INFO", "server"]));
            if let Ok(Reply::Bulk(Some(info))) = reply {
                break String::from_utf8_lossy(&info).into_owned();
            }
            let exited = process
                .child
                .try_wait()
                .is_ok_and(|status| status.is_some());
            if exited || Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.process = Some(process);
        // Every listener is bound before the first answer, the TLS port's too.
        info.contains(&format!("process_id:{pid}\r\n"))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The parts of the one script in `lua/redis/`, in the order they are sent.
pub const SCRIPT_PARTS: [&str; 4] = ["args", "entries", "counter", "rule"];

/// The text sent to Redis for a decision of a rule: the [`SCRIPT_PARTS`] of `lua/redis/`
/// (of `$SLIDEWIN_REDIS_SCRIPTS` instead when set: a benchmark can measure another version).
pub fn script_source() -> String {
    let dir = std::env::var_os("SLIDEWIN_REDIS_SCRIPTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../lua/redis"));
    SCRIPT_PARTS
        .iter()
        .map(|file| {
            let path = dir.join(format!("{file}.lua"));
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

/// A script (the rule script of `lua/redis/`, or any text), called with EVALSHA and falling
/// back to EVAL on NOSCRIPT.
pub struct Script {
    source: String,
    sha: String,
}

impl Script {
    /// [`script_source`], loaded into the server behind `client`.
    pub fn rule(client: &mut Resp) -> Self {
        Self::from_source(client, script_source())
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

/// The options that make a redis-server a Redis Cluster node; its peers call it failed after a
/// second without answers, so a replica takes over within a few seconds, and the other masters
/// keep serving their slots meanwhile (with the default full coverage, every node would answer
/// CLUSTERDOWN until the promotion).
const CLUSTER_NODE: [&str; 8] = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "1000",
    "--cluster-require-full-coverage",
    "no",
];

/// A local Redis Cluster on free ports: `masters` masters with `replicas` replicas each, made by
/// `redis-cli --cluster create`, every node killed when dropped.
///
/// ```no_run
/// let cluster = slidewin_tests::redis::RedisCluster::start(3, 1);
/// let master = cluster.master_of("slidewin:{log:u1}");
/// assert_eq!(cluster.node(master).client().cmd(&["PING"]).text(), "PONG");
/// ```
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start(masters: usize, replicas: usize) -> Self {
        Self::start_nodes(masters, replicas, || RedisServer::start_with(&CLUSTER_NODE))
    }

    /// [`RedisCluster::start`] with TLS on the cluster bus and for clients too (each node made
    /// by [`RedisServer::start_tls`] with `args`): CLUSTER SLOTS asked over TLS names the TLS
    /// ports, over the plain port the plain ones.
    pub fn start_tls(masters: usize, replicas: usize, ca: &TestCa, args: &[&str]) -> Self {
        let mut node_args = CLUSTER_NODE.to_vec();
        node_args.extend(["--tls-cluster", "yes"]);
        node_args.extend(args);
        Self::start_nodes(masters, replicas, || RedisServer::start_tls(ca, &node_args))
    }

    fn start_nodes(masters: usize, replicas: usize, node: impl Fn() -> RedisServer) -> Self {
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas)).map(|_| node()).collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())))
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run redis-cli --cluster create");
        assert!(status.success(), "redis-cli --cluster create failed");
        let cluster = Self { nodes };
        let all: Vec<usize> = (0..cluster.nodes.len()).collect();
        cluster.wait_until(
            "every node sees the cluster ok and replicas in sync",
            || {
                all.iter().all(|&i| {
                    let info = cluster.node(i).client().cmd(&["CLUSTER", "INFO"]).text();
                    let repl = cluster
                        .node(i)
                        .client()
                        .cmd(&["INFO", "replication"])
                        .text();
                    info.contains("cluster_state:ok")
                        && (repl.contains("role:master") || repl.contains("master_link_status:up"))
                })
            },
        );
        cluster
    }

    /// The process ids of the running nodes.
    pub fn pids(&self) -> Vec<u32> {
        self.nodes
            .iter()
            .filter(|n| n.process.is_some())
            .map(RedisServer::pid)
            .collect()
    }

    /// Node `i` (in creation order; `redis-cli` makes the first `masters` of them masters).
    pub fn node(&self, i: usize) -> &RedisServer {
        &self.nodes[i]
    }

    /// "127.0.0.1:p1,127.0.0.1:p2,..." of the nodes that are running: seeds for a client.
    pub fn seeds(&self) -> String {
        self.addresses(RedisServer::port)
    }

    /// [`RedisCluster::seeds`] on the nodes' TLS ports (a cluster made by `start_tls`).
    pub fn tls_seeds(&self) -> String {
        self.addresses(RedisServer::tls_port)
    }

    fn addresses(&self, port: fn(&RedisServer) -> u16) -> String {
        self.nodes
            .iter()
            .filter(|n| n.process.is_some())
            .map(|n| format!("127.0.0.1:{}", port(n)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The slot of `key`, as Redis computes it.
    pub fn slot(&self, key: &str) -> i64 {
        self.any().client().cmd(&["CLUSTER", "KEYSLOT", key]).int()
    }

    /// The node that serves `slot` now, as a running node sees it.
    pub fn master_of_slot(&self, slot: i64) -> usize {
        let nodes = self.any().client().cmd(&["CLUSTER", "NODES"]).text();
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let serves = fields[8..].iter().any(|range| {
                let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                match (lo.parse::<i64>(), hi.parse::<i64>()) {
                    (Ok(lo), Ok(hi)) => (lo..=hi).contains(&slot),
                    _ => false, // "[slot->-id]": a migration in progress
                }
            });
            if serves {
                return self.index_of(fields[1]);
            }
        }
        panic!("no master serves slot {slot}:\n{nodes}")
    }

    /// The node that serves `key` now.
    pub fn master_of(&self, key: &str) -> usize {
        self.master_of_slot(self.slot(key))
    }

    /// The replica of node `master`.
    pub fn replica_of(&self, master: usize) -> usize {
        let id = self.id(master);
        let nodes = self.any().client().cmd(&["CLUSTER", "NODES"]).text();
        let line = nodes
            .lines()
            .find(|l| l.split(' ').nth(3) == Some(id.as_str()))
            .unwrap_or_else(|| panic!("no replica of node {master}:\n{nodes}"));
        self.index_of(line.split(' ').nth(1).unwrap())
    }

    /// Node `i`'s cluster id.
    pub fn id(&self, i: usize) -> String {
        self.node(i).client().cmd(&["CLUSTER", "MYID"]).text()
    }

    /// Kill node `i` (SIGKILL, like a crash).
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].stop();
    }

    /// Start node `i` again on its port: empty, but it knows the cluster (its nodes.conf).
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].restart();
    }

    /// Wait (up to 20 s) until every running node sees the cluster ok.
    pub fn wait_ok(&self) {
        self.wait_until("the cluster to be ok", || {
            self.nodes.iter().filter(|n| n.process.is_some()).all(|n| {
                let info = n.client().cmd(&["CLUSTER", "INFO"]).text();
                info.contains("cluster_state:ok")
            })
        });
    }

    /// Move `slot` from node `from` to node `to` like `redis-cli --cluster reshard`, with
    /// `between()` run after its keys moved and before the slot is handed over (while the
    /// source answers ASK for them).
    pub fn migrate_slot(&self, slot: i64, from: usize, to: usize, between: impl FnOnce()) {
        let (from_id, to_id, slot_s) = (self.id(from), self.id(to), slot.to_string());
        let (mut source, mut target) = (self.node(from).client(), self.node(to).client());
        let ok = |r: Reply| assert_eq!(r, Reply::Status("OK".into()));
        ok(target.cmd(&["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &from_id]));
        ok(source.cmd(&["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &to_id]));
        let port = self.node(to).port().to_string();
        loop {
            let keys = source.cmd(&["CLUSTER", "GETKEYSINSLOT", &slot_s, "100"]);
            let keys: Vec<String> = match keys {
                Reply::Array(Some(items)) => items.iter().map(Reply::text).collect(),
                other => panic!("{other:?}"),
            };
            if keys.is_empty() {
                break;
            }
            // A batch at once, as `redis-cli --cluster reshard` does.
            let mut migrate = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            migrate.extend(keys.iter().map(String::as_str));
            ok(source.cmd(&migrate));
        }
        between();
        for node in [&mut target, &mut source] {
            ok(node.cmd(&["CLUSTER", "SETSLOT", &slot_s, "NODE", &to_id]));
        }
    }

    fn any(&self) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.process.is_some())
            .expect("a running node")
    }

    fn index_of(&self, address: &str) -> usize {
        let port: u16 = address
            .split(['@', ':'])
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("bad node address {address}"));
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }

    fn wait_until(&self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A primary, its replica and one Redis Sentinel watching them as "mymaster" (quorum 1, a
/// master down for 1 s fails over), all on free ports and killed when dropped.
pub struct RedisSentinel {
    pub master: RedisServer,
    pub replica: RedisServer,
    port: u16,
    tls_port: Option<u16>,
    password: Option<String>,
    _process: Owned,
}

impl RedisSentinel {
    pub const MASTER_NAME: &'static str = "mymaster";

    pub fn start() -> Self {
        Self::start_with(None, None)
    }

    /// [`RedisSentinel::start`] with the sentinel's own `requirepass` when `password` is given
    /// ([`RedisSentinel::client`] sends AUTH then), and with `ca`: TLS everywhere (replication,
    /// the sentinel to the nodes, clients on the TLS ports: the sentinel names the master's
    /// TLS port), the plain ports kept for the harness.
    pub fn start_with(ca: Option<&TestCa>, password: Option<&str>) -> Self {
        let server = |args: &[&str]| match ca {
            Some(ca) => RedisServer::start_tls(ca, args),
            None => RedisServer::start_with(args),
        };
        let master = server(&[]);
        let replica_of = match ca {
            Some(_) => master.tls_port(),
            None => master.port(),
        }
        .to_string();
        let mut replica_args = vec!["--replicaof", "127.0.0.1", &replica_of];
        if ca.is_some() {
            replica_args.extend(["--tls-replication", "yes"]);
        }
        let replica = server(&replica_args);
        let port = free_port();
        let tls_port = ca.map(|_| free_port());
        let tls = match (ca, tls_port) {
            (Some(ca), Some(tls_port)) => ca.redis_conf(tls_port) + "tls-replication yes\n",
            _ => String::new(),
        };
        let conf = master.dir().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {dir}\n\
                 logfile {dir}/sentinel.log\n\
                 sentinel monitor mymaster 127.0.0.1 {replica_of} 1\n\
                 sentinel down-after-milliseconds mymaster 1000\n\
                 sentinel failover-timeout mymaster 10000\n{requirepass}{tls}",
                dir = master.dir().display(),
                requirepass = password.map_or(String::new(), |p| format!("requirepass {p}\n")),
            ),
        )
        .expect("write sentinel.conf");
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn redis-server --sentinel");
        let sentinel = Self {
            master,
            replica,
            port,
            tls_port,
            password: password.map(str::to_string),
            _process: Owned::new("redis-sentinel", child),
        };
        wait_for_port(port, Duration::from_secs(10));
        // Failover needs the sentinel to know the replica, and the replica to be in sync.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let replicas = sentinel.client().cmd(&["SENTINEL", "REPLICAS", "mymaster"]);
            let synced = sentinel
                .replica
                .client()
                .cmd(&["INFO", "replication"])
                .text()
                .contains("master_link_status:up");
            if synced && matches!(replicas, Reply::Array(Some(r)) if !r.is_empty()) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the sentinel never saw the replica"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        sentinel
    }

    /// The sentinel's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The sentinel's TLS port (started with a CA).
    pub fn tls_port(&self) -> u16 {
        self.tls_port.expect("a sentinel started with a CA")
    }

    pub fn client(&self) -> Resp {
        let mut client = Resp::connect(self.port).expect("connect to the sentinel");
        if let Some(password) = &self.password {
            assert_eq!(client.cmd(&["AUTH", password]), Reply::Status("OK".into()));
        }
        client
    }

    /// The port of the master the sentinel names now.
    pub fn master_port(&self) -> u16 {
        let addr = self
            .client()
            .cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]);
        match addr {
            Reply::Array(Some(items)) => items[1].text().parse().unwrap(),
            other => panic!("{other:?}"),
        }
    }
}
