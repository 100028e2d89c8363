//! A MULTI/EXEC load generator: the rows of `scripts/bench.sh` that
//! redis-benchmark cannot produce (it sends one command per request, and
//! never one built from the reply before it).
//!
//! ```sh
//! cargo run --release -p coordis-client-tests --bin tx-bench -- [HOST:]PORT [CLIENTS] [PIPELINE] [TRANSACTIONS] [tx|stream]
//! ```
//!
//! `stream` measures a consumer's round trip instead: `XREADGROUP GROUP g
//! c<n> COUNT 1 STREAMS s >`, then `XACK s g <the ID it read>` (PIPELINE is
//! then 1). The stream `s` and its group `g` must hold enough entries.
//!
//! HOST defaults to 127.0.0.1. CLIENTS connections (default 50) each send
//! PIPELINE transactions at a time (default 1) until TRANSACTIONS (default
//! 100,000) have been answered. A transaction takes a fencing token and a
//! lock, the shape of a coordination client's acquire:
//!
//! ```text
//! MULTI
//! INCR fence
//! SET lock:<random 0..100000> pod NX EX 30
//! EXEC
//! ```
//!
//! Prints `transactions/s p50_ms p99_ms` on one line. A latency is measured
//! from writing a pipeline to reading its last reply, as redis-benchmark
//! measures pipelined requests. Like redis-benchmark, it runs on one thread,
//! so it loads the machine the same way for either server.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Replies per transaction: +OK, +QUEUED, +QUEUED, and EXEC's array.
const REPLIES: usize = 4;

/// The end of the complete reply starting at `at`, or None if more bytes
/// are needed. Panics on an error reply: the run would measure nothing.
fn reply_end(buf: &[u8], at: usize) -> Option<usize> {
    let line = at + buf.get(at..)?.windows(2).position(|w| w == b"\r\n")? + 2;
    let number = || -> i64 {
        let text = std::str::from_utf8(&buf[at + 1..line - 2]).expect("reply header is text");
        text.parse().expect("reply length is a number")
    };
    match buf[at] {
        b'+' | b':' => Some(line),
        b'-' => panic!("error reply: {}", String::from_utf8_lossy(&buf[at..line - 2])),
        b'$' => match number() {
            n if n < 0 => Some(line),
            n => Some(line + n as usize + 2).filter(|&end| end <= buf.len()),
        },
        b'*' => (0..number().max(0)).try_fold(line, |p, _| reply_end(buf, p)),
        other => panic!("unexpected reply type byte {other:#x}"),
    }
}

/// A small xorshift generator for the lock keys (no seeding needs).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One connection: sends pipelines until `issued` reaches `total`; returns
/// the latency of each transaction in microseconds.
/// The bulk strings of the complete reply at the start of `buf`, in order.
fn bulks(buf: &[u8]) -> Vec<&[u8]> {
    let mut out = vec![];
    let mut at = 0;
    while let Some(line) = buf[at..].windows(2).position(|w| w == b"\r\n").map(|p| at + p + 2) {
        if buf[at] == b'$' {
            let len: i64 = std::str::from_utf8(&buf[at + 1..line - 2]).unwrap().parse().unwrap();
            if len >= 0 {
                out.push(&buf[line..line + len as usize]);
                at = line + len as usize + 2;
                continue;
            }
        }
        at = line;
    }
    out
}

/// Sends `request` and returns its one reply.
async fn exchange(socket: &mut TcpStream, input: &mut Vec<u8>, request: &[u8]) -> Vec<u8> {
    socket.write_all(request).await.expect("write");
    input.clear();
    while reply_end(input, 0).is_none() {
        if socket.read_buf(input).await.expect("read") == 0 {
            panic!("server closed the connection");
        }
    }
    input.clone()
}

/// One consumer of the `stream` workload: reads one entry, acks it, again.
async fn consumer(addr: Arc<str>, total: usize, issued: Arc<AtomicUsize>, n: u64) -> Vec<u32> {
    let mut socket = TcpStream::connect(&*addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    socket.set_nodelay(true).expect("nodelay");
    let name = format!("c{n}");
    let read = format!(
        "*9\r\n$10\r\nXREADGROUP\r\n$5\r\nGROUP\r\n$1\r\ng\r\n${}\r\n{name}\r\n$5\r\nCOUNT\r\n$1\r\n1\r\n$7\r\nSTREAMS\r\n$1\r\ns\r\n$1\r\n>\r\n",
        name.len()
    );
    let mut input = Vec::with_capacity(4096);
    let mut latencies = Vec::new();
    while issued.fetch_add(1, Ordering::Relaxed) < total {
        let start = Instant::now();
        let reply = exchange(&mut socket, &mut input, read.as_bytes()).await;
        let id = bulks(&reply)
            .get(1)
            .map(|id| id.to_vec())
            .expect("the stream ran dry: fill it first");
        let mut ack = format!("*4\r\n$4\r\nXACK\r\n$1\r\ns\r\n$1\r\ng\r\n${}\r\n", id.len()).into_bytes();
        ack.extend_from_slice(&id);
        ack.extend_from_slice(b"\r\n");
        assert_eq!(exchange(&mut socket, &mut input, &ack).await, b":1\r\n");
        latencies.push(start.elapsed().as_micros().min(u32::MAX as u128) as u32);
    }
    latencies
}

async fn client(addr: Arc<str>, pipeline: usize, total: usize, issued: Arc<AtomicUsize>, seed: u64) -> Vec<u32> {
    let mut socket = TcpStream::connect(&*addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    socket.set_nodelay(true).expect("nodelay");
    let mut rng = Rng(seed | 1);
    let (mut out, mut input) = (Vec::new(), Vec::with_capacity(16 * 1024));
    let mut latencies = Vec::new();
    loop {
        let n = pipeline.min(total.saturating_sub(issued.fetch_add(pipeline, Ordering::Relaxed)));
        if n == 0 {
            return latencies;
        }
        out.clear();
        for _ in 0..n {
            let key = format!("lock:{}", rng.below(100_000));
            out.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$5\r\nfence\r\n");
            out.extend_from_slice(
                format!(
                    "*6\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$3\r\npod\r\n$2\r\nNX\r\n$2\r\nEX\r\n$2\r\n30\r\n",
                    key.len()
                )
                .as_bytes(),
            );
            out.extend_from_slice(b"*1\r\n$4\r\nEXEC\r\n");
        }
        let start = Instant::now();
        socket.write_all(&out).await.expect("write");
        let (mut replies, mut pos) = (0, 0);
        input.clear();
        while replies < n * REPLIES {
            if socket.read_buf(&mut input).await.expect("read") == 0 {
                panic!("server closed the connection");
            }
            while let Some(end) = reply_end(&input, pos) {
                replies += 1;
                pos = end;
            }
        }
        let micros = start.elapsed().as_micros().min(u32::MAX as u128) as u32;
        latencies.extend(std::iter::repeat_n(micros, n));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: usize| args.get(i).map_or(default, |a| a.parse().expect("a number"));
    let addr: Arc<str> = match args.first() {
        Some(a) if a.contains(':') => a.as_str().into(),
        Some(port) if port.parse::<u16>().is_ok() => format!("127.0.0.1:{port}").into(),
        _ => panic!("usage: tx-bench [HOST:]PORT [CLIENTS] [PIPELINE] [TRANSACTIONS] [tx|stream]"),
    };
    let stream = match args.get(4).map(String::as_str) {
        None | Some("tx") => false,
        Some("stream") => true,
        Some(other) => panic!("unknown workload {other}: tx or stream"),
    };
    let (clients, pipeline, total) = (arg(1, 50), arg(2, 1).max(1), arg(3, 100_000));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let issued = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut latencies: Vec<u32> = runtime.block_on(async {
        let tasks: Vec<_> = (0..clients)
            .map(|i| {
                if stream {
                    tokio::spawn(consumer(addr.clone(), total, issued.clone(), i as u64))
                } else {
                    tokio::spawn(client(
                        addr.clone(),
                        pipeline,
                        total,
                        issued.clone(),
                        0x9E37_79B9_7F4A_7C15 ^ i as u64,
                    ))
                }
            })
            .collect();
        let mut all = Vec::with_capacity(total);
        for t in tasks {
            all.extend(t.await.expect("client task"));
        }
        all
    });
    let elapsed = start.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
    println!(
        "{:.2} {:.3} {:.3}",
        latencies.len() as f64 / elapsed,
        pct(0.50),
        pct(0.99)
    );
}
