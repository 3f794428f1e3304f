//! A TCP relay on loopback that holds every byte for a fixed time each way: a network round
//! trip between hosts, for benchmarks on one machine whose kernel has no `netem` qdisc.
//!
//! Each direction of each connection is a reader that stamps what it reads and a writer that
//! sends it on once its stamp is `one_way` old, so bytes keep their order and a round trip
//! costs at least `2 * one_way` (plus the sleep's overshoot, tens of µs).
//!
//! ```no_run
//! use std::time::Duration;
//! use slidewin_tests::delay::DelayRelay;
//! let relay = DelayRelay::start(6379, Duration::from_micros(250)); // a 0.5 ms round trip
//! // point clients at 127.0.0.1:relay.port() instead of :6379
//! ```

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// Relays 127.0.0.1:port() to 127.0.0.1:upstream with `one_way` added each way, for as long
/// as the process runs; [`DelayRelay::set_one_way`] changes it for the bytes read after.
pub struct DelayRelay {
    port: u16,
    one_way_us: Arc<AtomicU64>,
}

impl DelayRelay {
    pub fn start(upstream: u16, one_way: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        let one_way_us = Arc::new(AtomicU64::new(one_way.as_micros() as u64));
        let delay = one_way_us.clone();
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                for stream in [&client, &server] {
                    stream.set_nodelay(true).ok();
                }
                pump(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    delay.clone(),
                );
                pump(server, client, delay.clone());
            }
        });
        DelayRelay { port, one_way_us }
    }

    /// The time added each way from now on.
    pub fn set_one_way(&self, one_way: Duration) {
        let us = one_way.as_micros() as u64;
        self.one_way_us.store(us, Ordering::Relaxed);
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

/// Bytes read from `from` written to `to` once `one_way_us` old (as it is when they are read);
/// closes `to`'s write side at EOF.
fn pump(mut from: TcpStream, mut to: TcpStream, one_way_us: Arc<AtomicU64>) {
    let (sender, receiver) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            let one_way = Duration::from_micros(one_way_us.load(Ordering::Relaxed));
            if sender
                .send((Instant::now() + one_way, buf[..n].to_vec()))
                .is_err()
            {
                break;
            }
        }
    });
    thread::spawn(move || {
        for (due, bytes) in receiver {
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        to.shutdown(Shutdown::Write).ok();
    });
}
