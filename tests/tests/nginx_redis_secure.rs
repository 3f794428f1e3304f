//! store = "redis" over TLS and as an ACL user (nginx/redis-secure.conf), against real
//! redis-servers serving TLS with a certificate the test makes: one server, a Redis Cluster, and
//! a Sentinel with its own password. A wrong password, a wrong server name or plain text on a TLS
//! port is a store error naming the step that failed, answered per on_store_error.

use slidewin_tests::http::Response;
use slidewin_tests::nginx::{Nginx, Prefix};
use slidewin_tests::redis::{RedisCluster, RedisSentinel, RedisServer};
use slidewin_tests::resp::{Reply, Resp};
use slidewin_tests::tls::TestCa;

/// The ACL user every limiter of redis-secure.conf authenticates as.
const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// nginx on redis-secure.conf (2 workers) with `env`, trusting `ca`.
fn nginx_with(ca: &TestCa, env: &[(&str, String)]) -> Nginx {
    let prefix = Prefix::temporary(2);
    std::fs::copy(ca.ca_cert(), prefix.dir.join("conf/redis-ca.crt")).expect("copy the CA");
    Nginx::start_in(prefix, "redis-secure.conf", env)
}

/// Creates the ACL user the limiters use (ACL SETUSER; `client` on a plain port).
fn add_user(mut client: Resp) {
    let password = format!(">{PASSWORD}");
    let reply = client.cmd(&["ACL", "SETUSER", USER, "on", &password, "~*", "&*", "+@all"]);
    assert_eq!(reply, Reply::Status("OK".into()));
}

/// The statuses of `n` GETs of /limit/<limiter>?user=<user>.
fn statuses(nginx: &Nginx, limiter: &str, user: &str, n: usize) -> Vec<u16> {
    (0..n)
        .map(|_| nginx.get(&format!("/limit/{limiter}?user={user}")).status)
        .collect()
}

/// 8 requests for one user at limit 5: 5 admitted by Redis (with headers), then 3 refused.
fn assert_limit_holds(nginx: &Nginx, limiter: &str, user: &str) {
    let responses: Vec<Response> = (0..8)
        .map(|_| nginx.get(&format!("/limit/{limiter}?user={user}")))
        .collect();
    let got: Vec<(u16, bool)> = responses
        .iter()
        .map(|r| (r.status, r.header("RateLimit").is_some()))
        .collect();
    let want: Vec<(u16, bool)> = [(200, true); 5]
        .into_iter()
        .chain([(429, true); 3])
        .collect();
    assert_eq!(got, want, "{limiter} for {user}\n{}", nginx.error_log());
}

fn store_errors(nginx: &Nginx, limiter: &str) -> u64 {
    let metric = format!("slidewin_store_errors_total{{limiter=\"{limiter}\"}} ");
    let metrics = nginx.get("/metrics").body;
    let line = metrics
        .lines()
        .find(|l| l.starts_with(&metric))
        .unwrap_or_else(|| panic!("{metric} in {metrics}"));
    line[metric.len()..].parse().unwrap()
}

/// `limiter` failed on every one of 3 requests with `error` in error.log, answered by its
/// policy (allow: 200 without headers, deny: 429), and no worker died.
fn assert_store_error(nginx: &Nginx, limiter: &str, policy: &str, error: &str) {
    let want = if policy == "allow" { 200 } else { 429 };
    let got = statuses(nginx, limiter, "u", 3);
    assert_eq!(got, vec![want; 3], "{limiter}\n{}", nginx.error_log());
    assert_eq!(store_errors(nginx, limiter), 3, "{limiter}");
    let log = nginx.error_log();
    let line = log
        .lines()
        .find(|l| l.contains(&format!("slidewin {limiter}: store error: ")))
        .unwrap_or_else(|| panic!("no store error of {limiter} in error.log:\n{log}"));
    assert!(line.contains(error), "{line}\nshould contain: {error}");
    assert!(
        line.contains(&format!("answered by on_store_error={policy}")),
        "{line}"
    );
    assert!(!log.contains("exited on signal"), "{log}");
}

#[test]
fn tls_and_an_acl_user_on_one_redis_hold_the_limit_and_a_wrong_identity_is_named() {
    let ca = TestCa::new();
    let redis = RedisServer::start_tls(&ca, &[]);
    add_user(redis.client());
    let nginx = nginx_with(
        &ca,
        &[
            ("SLIDEWIN_REDIS_PORT", redis.tls_port().to_string()),
            ("SLIDEWIN_REDIS_TLS", "1".into()),
        ],
    );
    assert_limit_holds(&nginx, "acl", "u1");
    assert_limit_holds(&nginx, "unverified", "u1");
    // The decisions are in this Redis, as alice.
    let mut client = redis.client();
    for tag in ["acl:u1", "unverified:u1"] {
        assert_eq!(keys_of(&mut client, tag), 1, "{tag}");
    }
    // alice's pooled, authenticated TLS connections to the same port are never lent to
    // another identity.
    let node = format!("127.0.0.1:{}", redis.tls_port());
    let auth = format!("redis AUTH on {node} as user alice failed: {WRONGPASS}");
    assert_store_error(&nginx, "wrong-password-allow", "allow", &auth);
    assert_store_error(&nginx, "wrong-password-deny", "deny", &auth);
    assert_store_error(
        &nginx,
        "wrong-name",
        "deny",
        &format!(
            "redis TLS handshake with {node} (server_name other.slidewin.test, ssl_verify true): "
        ),
    );
    // The reason, in nginx's words (resty.core's reply is "certificate host mismatch" or, when
    // the handshake ended at once, an assertion: see connection.lua).
    let log = nginx.error_log();
    assert!(
        log.contains("lua ssl certificate does not match host \"other.slidewin.test\""),
        "{log}"
    );
    // Plain text on the TLS port: the server hangs up on the first command.
    let hung_up = format!("redis AUTH on {node} as user alice failed: ");
    assert_store_error(&nginx, "plain", "deny", &hung_up);
    // Still served after all those failures.
    assert_limit_holds(&nginx, "acl", "u2");
}

#[test]
fn a_tls_cluster_with_acl_users_holds_the_limit_on_every_master() {
    let ca = TestCa::new();
    let cluster = RedisCluster::start_tls(3, 0, &ca, &[]);
    for i in 0..3 {
        add_user(cluster.node(i).client());
    }
    let nginx = nginx_with(
        &ca,
        &[
            ("SLIDEWIN_REDIS_CLUSTER", cluster.tls_seeds()),
            ("SLIDEWIN_REDIS_TLS", "1".into()),
        ],
    );
    // A user on each master, found by asking the cluster where its key lives.
    let mut users = vec![None; 3];
    for i in 0.. {
        let user = format!("user{i}");
        let master = cluster.master_of(&format!("slidewin:{{acl:{user}}}"));
        users[master].get_or_insert(user);
        if users.iter().all(Option::is_some) {
            break;
        }
    }
    for (master, user) in users.iter().flatten().enumerate() {
        assert_limit_holds(&nginx, "acl", user);
        let tag = format!("acl:{user}");
        assert_eq!(keys_of(&mut cluster.node(master).client(), &tag), 1);
    }
    assert_store_error(
        &nginx,
        "wrong-password-deny",
        "deny",
        &format!("as user alice failed: {WRONGPASS}"),
    );
}

#[test]
fn a_sentinel_with_its_own_password_or_acl_user_names_the_master() {
    let (ca, redis) = (
        TestCa::new(),
        RedisSentinel::start_with(None, Some("sentinel-secret")),
    );
    add_user(redis.master.client());
    let reply = redis.client().cmd(&[
        "ACL",
        "SETUSER",
        "watcher",
        "on",
        ">watcher-secret",
        "+@all",
    ]);
    assert_eq!(reply, Reply::Status("OK".into()));
    let sentinel = format!("127.0.0.1:{}", redis.port());
    let as_user = |username: Option<&str>, password: &str| {
        let mut env = vec![
            ("SLIDEWIN_REDIS_SENTINELS", sentinel.clone()),
            ("SLIDEWIN_REDIS_MASTER", RedisSentinel::MASTER_NAME.into()),
            ("SLIDEWIN_REDIS_SENTINEL_PASSWORD", password.into()),
        ];
        env.extend(username.map(|u| ("SLIDEWIN_REDIS_SENTINEL_USERNAME", u.to_string())));
        nginx_with(&ca, &env)
    };
    let nginx = as_user(None, "sentinel-secret");
    assert_limit_holds(&nginx, "acl", "u1");
    assert_eq!(keys_of(&mut redis.master.client(), "acl:u1"), 1);
    // The data nodes' password is not the sentinel's.
    let master = format!("127.0.0.1:{}", redis.master.port());
    let auth = format!("redis AUTH on {master} as user alice failed: {WRONGPASS}");
    assert_store_error(&nginx, "wrong-password-deny", "deny", &auth);
    assert_limit_holds(&as_user(Some("watcher"), "watcher-secret"), "acl", "u2");
    let wrong = as_user(None, "wrong");
    assert_store_error(&wrong, "acl", "deny", "master mymaster not resolved yet");
    let log = wrong.error_log();
    assert!(
        log.contains(&format!(
            "no sentinel named master mymaster ({sentinel}: redis AUTH on sentinel {sentinel} as user default failed: WRONGPASS"
        )),
        "{log}"
    );
}

/// The error of a limiter on store redis with options `redis` (a Lua table), "nil" for none.
fn option_error(nginx: &Nginx, redis: &str) -> String {
    let conf = format!("name = 'x', limit = 1, window_ms = 1000, store = 'redis', redis = {redis}");
    let lua = format!("return select(2, require('resty.slidewin').new{{ {conf} }})");
    nginx.eval(&lua).body
}

#[test]
fn a_sentinel_and_its_primary_on_tls_hold_the_limit() {
    let ca = TestCa::new();
    let redis = RedisSentinel::start_with(Some(&ca), Some("sentinel-secret"));
    add_user(redis.master.client());
    let nginx = nginx_with(
        &ca,
        &[
            (
                "SLIDEWIN_REDIS_SENTINELS",
                format!("127.0.0.1:{}", redis.tls_port()),
            ),
            ("SLIDEWIN_REDIS_MASTER", RedisSentinel::MASTER_NAME.into()),
            ("SLIDEWIN_REDIS_SENTINEL_PASSWORD", "sentinel-secret".into()),
            ("SLIDEWIN_REDIS_TLS", "1".into()),
        ],
    );
    assert_limit_holds(&nginx, "acl", "u1");
    assert_eq!(keys_of(&mut redis.master.client(), "acl:u1"), 1);
    // The master found (by the limiters' shared sentinel topology) is verified too.
    let master = format!("127.0.0.1:{}", redis.master.tls_port());
    let handshake = format!("redis TLS handshake with {master} (server_name other.slidewin.test");
    assert_store_error(&nginx, "wrong-name", "deny", &handshake);
}

#[test]
fn bad_tls_and_acl_options_are_named() {
    let nginx = Nginx::start("test.conf", 1);
    let cases = [
        ("{ ssl = 'yes' }", "redis.ssl must be a boolean, got yes"),
        (
            "{ ssl_verify = true }",
            "redis.ssl_verify goes with redis.ssl = true, got ssl = nil",
        ),
        (
            "{ ssl = false, server_name = 'r' }",
            "redis.server_name goes with redis.ssl = true, got ssl = false",
        ),
        ("{ ssl = true, server_name = 5 }", "redis.server_name must be a string, got 5"),
        (
            "{ username = 'alice' }",
            "redis.username alice needs redis.password (AUTH user password)",
        ),
        (
            "{ sentinel_password = 's' }",
            "redis.sentinel_password and redis.sentinel_username go with redis.sentinels",
        ),
        (
            "{ sentinels = { 'a:1' }, master_name = 'm', sentinel_username = 'w' }",
            "redis.sentinel_username w needs redis.sentinel_password (AUTH user password on the sentinels)",
        ),
    ];
    for (redis, message) in cases {
        assert_eq!(option_error(&nginx, redis), message, "redis = {redis}");
    }
    let valid =
        "{ ssl = true, ssl_verify = true, server_name = 'r', username = 'u', password = 'p' }";
    assert_eq!(option_error(&nginx, valid), "nil");
}

/// Keys of the limiter and key `tag` ("name:key") in this Redis: one per window of its rule.
fn keys_of(client: &mut Resp, tag: &str) -> usize {
    match client.cmd(&["KEYS", &format!("slidewin:{{{tag}}}:*")]) {
        Reply::Array(Some(keys)) => keys.len(),
        other => panic!("KEYS answered {other:?}"),
    }
}
