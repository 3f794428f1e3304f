//! A minimal RESP2 client: enough to drive redis-server from tests (commands in, replies out).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One Redis reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The integer of an integer reply, or the number in a bulk string; panics otherwise.
    pub fn int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).parse().expect("a number"),
            other => panic!("expected an integer reply, got {other:?}"),
        }
    }

    /// The text of a status or bulk reply; panics otherwise.
    pub fn text(&self) -> String {
        match self {
            Reply::Status(s) => s.clone(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("expected a string reply, got {other:?}"),
        }
    }

    /// The integers of an array reply (a script's `{allowed, remaining, ...}`); panics otherwise.
    pub fn ints(&self) -> Vec<i64> {
        match self {
            Reply::Array(Some(items)) => items.iter().map(Reply::int).collect(),
            other => panic!("expected an array reply, got {other:?}"),
        }
    }
}

/// A connection to one redis-server.
pub struct Resp {
    reader: BufReader<TcpStream>,
}

impl Resp {
    /// Connect to `127.0.0.1:port`.
    pub fn connect(port: u16) -> std::io::Result<Self> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            reader: BufReader::new(stream),
        })
    }

    /// Send one command, read its reply (an error reply is a `Reply::Error`, not an `Err`).
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> std::io::Result<Reply> {
        self.send(args)?;
        self.read()
    }

    /// Send commands back to back, then read all replies (a pipeline).
    pub fn pipeline<A: AsRef<[u8]>>(&mut self, commands: &[Vec<A>]) -> std::io::Result<Vec<Reply>> {
        for args in commands {
            self.send(args)?;
        }
        commands.iter().map(|_| self.read()).collect()
    }

    /// [`Resp::call`] with string arguments, panicking on I/O errors (for tests).
    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        self.call(args)
            .unwrap_or_else(|e| panic!("redis {args:?}: {e}"))
    }

    fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) -> std::io::Result<()> {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            let arg = arg.as_ref();
            buf.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            buf.extend_from_slice(arg);
            buf.extend_from_slice(b"\r\n");
        }
        self.reader.get_mut().write_all(&buf)
    }

    fn read(&mut self) -> std::io::Result<Reply> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let (kind, rest) = line.trim_end().split_at(1);
        let number = || {
            rest.parse::<i64>()
                .map_err(|e| std::io::Error::other(format!("{line:?}: {e}")))
        };
        Ok(match kind {
            "+" => Reply::Status(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Int(number()?),
            "$" => match number()? {
                -1 => Reply::Bulk(None),
                len => {
                    let mut data = vec![0; len as usize + 2];
                    std::io::Read::read_exact(&mut self.reader, &mut data)?;
                    data.truncate(len as usize);
                    Reply::Bulk(Some(data))
                }
            },
            "*" => match number()? {
                -1 => Reply::Array(None),
                len => Reply::Array(Some(
                    (0..len).map(|_| self.read()).collect::<Result<_, _>>()?,
                )),
            },
            _ => return Err(std::io::Error::other(format!("bad RESP line {line:?}"))),
        })
    }
}
