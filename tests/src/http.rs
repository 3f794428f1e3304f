//! A minimal HTTP/1.1 client for loopback tests: one request per connection, whole response.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A response: status, headers in order, body as text.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `GET path` on 127.0.0.1:`port`.
pub fn get(port: u16, path: &str) -> Response {
    request("127.0.0.1", port, "GET", path, "")
}

/// `GET path` on `host` (another loopback address, e.g. "::1"):`port`.
pub fn get_at(host: &str, port: u16, path: &str) -> Response {
    request(host, port, "GET", path, "")
}

/// `POST path` with `body` on 127.0.0.1:`port`.
pub fn post(port: u16, path: &str, body: &str) -> Response {
    request("127.0.0.1", port, "POST", path, body)
}

/// `POST path` as an operator's client sends a change to an admin location: with the header
/// `X-Slidewin-Admin: 1` that resty.slidewin.guard asks of every change.
pub fn admin_post(port: u16, path: &str) -> Response {
    send(port, "POST", path, &[("X-Slidewin-Admin", "1")], "")
}

/// `method path` on 127.0.0.1:`port` with `headers` (a `Host` among them replaces 127.0.0.1).
/// The body may be any bytes (not UTF-8, compressed).
pub fn send(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl AsRef<[u8]>,
) -> Response {
    request_with("127.0.0.1", port, method, path, headers, body.as_ref())
}

fn request(host: &str, port: u16, method: &str, path: &str, body: &str) -> Response {
    request_with(host, port, method, path, &[], body.as_bytes())
}

fn request_with(
    host: &str,
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut stream = TcpStream::connect((host, port)).expect("connect to nginx");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("set timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str("Host: 127.0.0.1\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(
        stream,
        "{head}Connection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .expect("send request");
    stream.write_all(body).expect("send request body");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    parse(&String::from_utf8_lossy(&raw))
}

fn parse(raw: &str) -> Response {
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {raw:?}"));
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}
