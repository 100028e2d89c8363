//! Helpers for tests that talk to coordis and to a real Redis side by side.
//!
//! - [`RedisServer`] starts `redis-server` from PATH on a free loopback port
//!   (`--save '' --appendonly no`) and stops it on drop. It never touches a
//!   server it did not start.
//! - [`RawClient`] sends raw bytes and reads back exactly one RESP reply frame
//!   (split with the `redis-protocol` crate), for byte-for-byte assertions.
//! - [`require_redis`] says whether a missing redis-server is a failure
//!   (`COORDIS_REQUIRE_REDIS=1`) or a loud skip.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// True when `COORDIS_REQUIRE_REDIS=1`: tests must fail, not skip, without Redis.
pub fn require_redis() -> bool {
    std::env::var("COORDIS_REQUIRE_REDIS").is_ok_and(|v| v == "1")
}

/// A free TCP port on 127.0.0.1 (bound then released).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A `redis-server` child process owned by the test.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    addr: SocketAddr,
}

impl RedisServer {
    /// Starts `redis-server` from PATH with extra arguments. `Ok(None)` when it
    /// is not installed and `COORDIS_REQUIRE_REDIS` is not set (a skip line is
    /// printed to stderr); with it set, a missing Redis panics.
    pub fn start(extra_args: &[&str]) -> io::Result<Option<RedisServer>> {
        let which = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if which.is_err() {
            if require_redis() {
                panic!("COORDIS_REQUIRE_REDIS=1 but redis-server is not on PATH");
            }
            eprintln!("\n*** SKIPPED: redis-server is not on PATH; the real-Redis leg did not run (set COORDIS_REQUIRE_REDIS=1 to make this a failure) ***\n");
            return Ok(None);
        }
        let mut last_err = None;
        for _ in 0..5 {
            let port = free_port()?;
            let mut child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                ])
                .args(extra_args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if let Ok(mut c) = RawClient::connect(addr) {
                    if c.command(&["PING"]).map(|r| r == b"+PONG\r\n").unwrap_or(false) {
                        return Ok(Some(RedisServer { child, addr }));
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            last_err = Some(io::Error::other(format!("redis-server did not start on port {port}")));
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("redis-server did not start")))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking connection that reads replies as raw bytes, one frame at a time.
#[derive(Debug)]
pub struct RawClient {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Decode replies as RESP3 (after `HELLO 3`). Set by [`RawClient::command`]
    /// when it sees a successful HELLO.
    pub resp3: bool,
}

impl RawClient {
    pub fn connect(addr: SocketAddr) -> io::Result<RawClient> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_nodelay(true)?;
        Ok(RawClient {
            stream,
            buf: Vec::new(),
            resp3: false,
        })
    }

    /// Encodes arguments as a RESP multibulk request.
    pub fn encode(args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends one command and returns its reply's bytes.
    pub fn command(&mut self, args: &[&str]) -> io::Result<Vec<u8>> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.command_bytes(&raw)
    }

    pub fn command_bytes(&mut self, args: &[&[u8]]) -> io::Result<Vec<u8>> {
        self.send(&Self::encode(args))?;
        // HELLO's own reply already uses the protocol it asks for.
        let before = self.resp3;
        if args.len() >= 2 && args[0].eq_ignore_ascii_case(b"hello") {
            self.resp3 = args[1] == b"3";
        }
        let reply = self.read_reply()?;
        if reply.starts_with(b"-") {
            self.resp3 = before;
        }
        Ok(reply)
    }

    /// Reads exactly one reply frame.
    pub fn read_reply(&mut self) -> io::Result<Vec<u8>> {
        loop {
            let decoded = if self.resp3 {
                redis_protocol::resp3::decode::complete::decode(&self.buf).map(|o| o.map(|(_, n)| n))
            } else {
                redis_protocol::resp2::decode::decode(&self.buf).map(|o| o.map(|(_, n)| n))
            };
            match decoded {
                Ok(Some(n)) => return Ok(self.buf.drain(..n).collect()),
                Ok(None) => {}
                Err(e) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{e:?}: {:?}", String::from_utf8_lossy(&self.buf)),
                    ))
                }
            }
            let mut chunk = [0u8; 16384];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Changes how long [`RawClient::read_reply`] waits for bytes.
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(timeout)
    }

    /// Reads until the peer closes and returns whatever arrived (for
    /// protocol-error tests, where the server replies and then closes).
    pub fn read_to_close(&mut self) -> io::Result<Vec<u8>> {
        let mut out = std::mem::take(&mut self.buf);
        self.stream.read_to_end(&mut out)?;
        Ok(out)
    }
}
