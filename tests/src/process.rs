//! Child processes owned by a test, and the loopback ports they listen on.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Child;
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (the OS picks it; the listener is closed before returning).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// Wait until something accepts connections on `127.0.0.1:port`, or panic after `timeout`.
pub fn wait_for_port(port: u16, timeout: Duration) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + timeout;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nothing listens on 127.0.0.1:{port} after {timeout:?}"
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
