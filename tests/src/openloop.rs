//! An open-loop load generator for loopback benchmarks and tests: requests are due at a fixed
//! rate whatever the server does (a slow server does not slow the offered load down), many
//! client threads with keep-alive connections send them, and each one has a client timeout
//! counted from the moment it was due (so waiting for a free client counts, as it does for a
//! real caller). Results are kept per second of the due time.
//!
//! ```no_run
//! use slidewin_tests::openloop::{Load, Outcome};
//! let run = Load { port: 8080, path: "/api/".into(), rate: 500.0, seconds: 5, ..Load::default() }.run();
//! println!("{} good", run.seconds[4].count(Outcome::Good));
//! ```

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What happened to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx within the client timeout (goodput).
    Good,
    /// 429: refused by the limiter.
    Refused,
    /// Another status within the timeout (e.g. an upstream 502/503/504).
    Failed,
    /// Sent, no whole response within the timeout (or the connection broke).
    TimedOut,
    /// Never sent: no client was free before its timeout had passed.
    Unsent,
}

const OUTCOMES: usize = 5;

impl Outcome {
    fn index(self) -> usize {
        self as usize
    }
}

/// The requests due in one second of the run.
#[derive(Debug, Clone, Default)]
pub struct Second {
    counts: [u64; OUTCOMES],
    /// Latency (ms from due to response) of every admitted request: all but `Refused` and
    /// `Unsent`; a timed-out one counts as the timeout (a lower bound).
    pub admitted_ms: Vec<f64>,
    /// What `Load::probe` read at the end of this second, if anything.
    pub probe: Option<f64>,
}

impl Second {
    pub fn count(&self, outcome: Outcome) -> u64 {
        self.counts[outcome.index()]
    }

    pub fn offered(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Requests the limiter let through (sent and not refused).
    pub fn admitted(&self) -> u64 {
        self.offered() - self.count(Outcome::Refused) - self.count(Outcome::Unsent)
    }
}

/// A request to the run's port at a second of the run (e.g. an upstream's admin location).
pub type Action = (u64, u16, String);

/// One run: `rate` requests/s to `127.0.0.1:port` + `path` for `seconds`.
#[derive(Clone)]
pub struct Load {
    pub port: u16,
    pub path: String,
    pub rate: f64,
    pub seconds: u64,
    pub timeout: Duration,
    /// Client threads (each one keeps one connection).
    pub clients: usize,
    /// Read once a second (e.g. the limiter's current limit); `None` when it has nothing.
    pub probe: Option<Arc<dyn Fn() -> Option<f64> + Send + Sync>>,
    /// `(second, port, path)`: GET `path` on 127.0.0.1:`port` at that second of the run.
    pub actions: Vec<Action>,
}

impl Default for Load {
    fn default() -> Self {
        Self {
            port: 0,
            path: "/".into(),
            rate: 100.0,
            seconds: 10,
            timeout: Duration::from_secs(1),
            clients: 256,
            probe: None,
            actions: Vec::new(),
        }
    }
}

/// The results of a run.
#[derive(Debug, Clone)]
pub struct Run {
    pub seconds: Vec<Second>,
}

impl Run {
    /// Seconds `from..to` of the run merged into one.
    pub fn merged(&self, from: usize, to: usize) -> Second {
        let mut all = Second::default();
        for s in &self.seconds[from.min(self.seconds.len())..to.min(self.seconds.len())] {
            for (a, b) in all.counts.iter_mut().zip(s.counts) {
                *a += b;
            }
            all.admitted_ms.extend(&s.admitted_ms);
        }
        all
    }
}

/// The `q` quantile (0..=1) of `samples` (nearest rank), or `None` when empty.
pub fn quantile(samples: &[f64], q: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// Requests due but not yet taken by a client, and whether the schedule has ended.
struct Queue {
    due: Mutex<(VecDeque<Instant>, bool)>,
    ready: Condvar,
}

impl Load {
    /// Runs the load to its end (and the requests still out to their timeout).
    pub fn run(&self) -> Run {
        assert!(
            self.rate > 0.0 && self.clients > 0,
            "rate and clients must be positive"
        );
        let start = Instant::now();
        let results = Arc::new(Mutex::new(vec![Second::default(); self.seconds as usize]));
        let queue = Arc::new(Queue {
            due: Mutex::new((VecDeque::new(), false)),
            ready: Condvar::new(),
        });
        let clients: Vec<_> = (0..self.clients)
            .map(|_| {
                let (load, queue, results) = (self.clone(), queue.clone(), results.clone());
                std::thread::Builder::new()
                    .stack_size(128 * 1024)
                    .spawn(move || load.client(start, &queue, &results))
                    .expect("spawn a client thread")
            })
            .collect();
        let ticker = {
            let (load, results) = (self.clone(), results.clone());
            std::thread::spawn(move || load.tick(start, &results))
        };
        self.schedule(start, &queue);
        for client in clients {
            client.join().expect("client thread");
        }
        ticker.join().expect("ticker thread");
        let seconds = std::mem::take(&mut *results.lock().unwrap());
        Run { seconds }
    }

    /// Puts each request in the queue at its due time, then marks the end.
    fn schedule(&self, start: Instant, queue: &Queue) {
        let total = (self.rate * self.seconds as f64) as u64;
        let gap = Duration::from_secs_f64(1.0 / self.rate);
        for n in 0..total {
            let due = start + gap * n as u32;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            queue.due.lock().unwrap().0.push_back(due);
            queue.ready.notify_one();
        }
        queue.due.lock().unwrap().1 = true;
        queue.ready.notify_all();
    }

    /// Once a second: the actions due, then the probe, recorded for the second just ended.
    fn tick(&self, start: Instant, results: &Mutex<Vec<Second>>) {
        for second in 0..self.seconds {
            for (_, port, path) in self.actions.iter().filter(|a| a.0 == second) {
                let _ = request(&mut None, *port, path, Duration::from_secs(2));
            }
            let end = start + Duration::from_secs(second + 1);
            if let Some(wait) = end.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let value = self.probe.as_ref().and_then(|probe| probe());
            results.lock().unwrap()[second as usize].probe = value;
        }
    }

    fn client(&self, start: Instant, queue: &Queue, results: &Mutex<Vec<Second>>) {
        let mut connection = None;
        loop {
            let due = {
                let mut guard = queue.due.lock().unwrap();
                loop {
                    if let Some(due) = guard.0.pop_front() {
                        break due;
                    }
                    if guard.1 {
                        return;
                    }
                    guard = queue.ready.wait(guard).unwrap();
                }
            };
            let deadline = due + self.timeout;
            let (outcome, latency) = match deadline.checked_duration_since(Instant::now()) {
                None => (Outcome::Unsent, None),
                Some(left) => {
                    let outcome = match request(&mut connection, self.port, &self.path, left) {
                        Some(status) if Instant::now() > deadline => {
                            connection = None;
                            classify(status, true)
                        }
                        Some(status) => classify(status, false),
                        None => {
                            connection = None;
                            Outcome::TimedOut
                        }
                    };
                    let ms = due.elapsed().min(self.timeout).as_secs_f64() * 1e3;
                    (outcome, (outcome != Outcome::Refused).then_some(ms))
                }
            };
            let second = due.duration_since(start).as_secs() as usize;
            let mut results = results.lock().unwrap();
            let slot = &mut results[second];
            slot.counts[outcome.index()] += 1;
            slot.admitted_ms.extend(latency);
        }
    }
}

fn classify(status: u16, late: bool) -> Outcome {
    match status {
        _ if late => Outcome::TimedOut,
        200..=299 => Outcome::Good,
        429 => Outcome::Refused,
        _ => Outcome::Failed,
    }
}

/// `GET path` on a kept-alive connection (made when `connection` is `None`, or broken): the
/// status once the whole response is read within `timeout`, else `None`.
pub fn request(
    connection: &mut Option<BufReader<TcpStream>>,
    port: u16,
    path: &str,
    timeout: Duration,
) -> Option<u16> {
    let deadline = Instant::now() + timeout;
    for fresh in [connection.is_none(), true] {
        if fresh {
            let stream =
                TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), timeout).ok()?;
            stream.set_nodelay(true).ok()?;
            *connection = Some(BufReader::new(stream));
        }
        let left = deadline.checked_duration_since(Instant::now())?;
        let reader = connection.as_mut()?;
        reader.get_ref().set_read_timeout(Some(left)).ok()?;
        let sent = write!(
            reader.get_mut(),
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        );
        match sent.ok().and_then(|_| read_response(reader)) {
            Some((status, keep)) => {
                if !keep {
                    *connection = None;
                }
                return Some(status);
            }
            // A kept-alive connection the server had closed: once more on a new one.
            None if !fresh && Instant::now() < deadline => continue,
            None => break,
        }
    }
    *connection = None;
    None
}

/// Reads one response (Content-Length or chunked body): its status and whether the
/// connection stays open.
fn read_response(reader: &mut BufReader<TcpStream>) -> Option<(u16, bool)> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
    let status = line.split(' ').nth(1)?.parse().ok()?;
    let (mut length, mut chunked, mut keep) = (0usize, false, true);
    loop {
        line.clear();
        reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse().ok()?,
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            "connection" => keep = !value.eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    if !chunked {
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        return Some((status, keep));
    }
    loop {
        line.clear();
        reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
        let size = usize::from_str_radix(line.trim_end(), 16).ok()?;
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).ok()?;
        if size == 0 {
            return Some((status, keep));
        }
    }
}

/// The value of the first line of Prometheus text that starts with `metric` (its name and
/// labels, e.g. `slidewin_adaptive_limit{limiter="api"}`).
pub fn metric(text: &str, metric: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(metric))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}
