//! A test certificate authority made with `openssl`: a CA and one server certificate for
//! [`TestCa::SERVER_NAME`] and 127.0.0.1, in a temporary directory removed on drop.
//!
//! ```no_run
//! let ca = slidewin_tests::tls::TestCa::new();
//! let redis = slidewin_tests::redis::RedisServer::start_tls(&ca, &[]);
//! // clients under test reach it on redis.tls_port(), verifying against ca.ca_cert()
//! ```

use std::path::PathBuf;
use std::process::{Command, Stdio};

pub struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    /// The name in the server certificate (besides the IP address 127.0.0.1).
    pub const SERVER_NAME: &'static str = "redis.slidewin.test";

    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("slidewin-ca-")
            .tempdir()
            .expect("temp dir");
        let ca = Self { dir };
        std::fs::write(
            ca.path("server.ext"),
            format!("subjectAltName=DNS:{},IP:127.0.0.1\n", Self::SERVER_NAME),
        )
        .expect("write server.ext");
        ca.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=slidewin test CA",
        ]);
        let subject = format!("/CN={}", Self::SERVER_NAME);
        ca.openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            &subject,
        ]);
        ca.openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            "server.crt",
            "-extfile",
            "server.ext",
        ]);
        ca
    }

    /// The CA certificate (PEM): what a verifying client trusts.
    pub fn ca_cert(&self) -> PathBuf {
        self.path("ca.crt")
    }

    /// redis-server options to serve TLS on `port` with the server certificate, clients not
    /// asked for certificates.
    pub fn redis_args(&self, port: u16) -> Vec<String> {
        let file = |name: &str| self.path(name).display().to_string();
        [
            "--tls-port".to_string(),
            port.to_string(),
            "--tls-cert-file".into(),
            file("server.crt"),
            "--tls-key-file".into(),
            file("server.key"),
            "--tls-ca-cert-file".into(),
            file("ca.crt"),
            "--tls-auth-clients".into(),
            "no".into(),
        ]
        .into()
    }

    /// [`TestCa::redis_args`] as lines of a config file (a sentinel's).
    pub fn redis_conf(&self, port: u16) -> String {
        let args = self.redis_args(port);
        let lines = args
            .chunks(2)
            .map(|pair| format!("{} {}\n", pair[0].trim_start_matches("--"), pair[1]));
        lines.collect()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn openssl(&self, args: &[&str]) {
        let status = Command::new("openssl")
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run openssl (install it: scripts/deps.sh redis)");
        assert!(status.success(), "openssl {args:?} failed");
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}
