//! Child processes owned by a test, and the loopback ports they listen on.

use std::io::ErrorKind;
use std::net::{Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Child;
use std::time::{Duration, Instant};

/// A TCP port free on both 127.0.0.1 and [::1] (the OS picks it; the listeners are closed before
/// returning): a config may listen on both, and nginx retries a busy address for seconds while the
/// other already accepts.
pub fn free_port() -> u16 {
    loop {
        let v4 = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = v4.local_addr().expect("local address").port();
        match TcpListener::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, port))) {
            Err(e) if e.kind() == ErrorKind::AddrInUse => continue,
            // No IPv6 on this machine: the configs listening on [::1] can't run anyway.
            _ => return port,
        }
    }
}

/// Wait until something accepts connections on `127.0.0.1:port`, or panic after `timeout`.
pub fn wait_for_port(port: u16, timeout: Duration) {
    wait_for(
        SocketAddr::from(([127, 0, 0, 1], port)),
        timeout,
        &mut || Ok(()),
    );
}

/// Wait until something accepts connections on `addr`; panic after `timeout`, or with the
/// message `alive` returns once the listener's process has gone.
pub fn wait_for(
    addr: SocketAddr,
    timeout: Duration,
    alive: &mut dyn FnMut() -> Result<(), String>,
) {
    let deadline = Instant::now() + timeout;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
        if let Err(gone) = alive() {
            panic!("nothing will listen on {addr}: {gone}");
        }
        assert!(
            Instant::now() < deadline,
            "nothing listens on {addr} after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child process killed and reaped when dropped, so a failing test leaves nothing running.
pub struct Owned {
    pub child: Child,
    pub name: String,
}

impl Owned {
    pub fn new(name: impl Into<String>, child: Child) -> Self {
        Self {
            child,
            name: name.into(),
        }
    }

    /// Stop the process now (SIGKILL) and wait for it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.stop();
    }
}
