//! Measures how promptly a server removes keys nobody reads, and what that
//! costs other clients.
//!
//! ```sh
//! cargo run --release -p coordis-client-tests --bin expiry-lag -- redis://127.0.0.1:6379 [KEYS] [PX]
//! ```
//!
//! Loads KEYS (default 1,000,000) keys with `SET exp:<i> v PX <PX>` (default
//! 2000) in pipelines, remembering when each batch was sent, then polls
//! DBSIZE every 5 ms while another connection PINGs in a loop. Keys are
//! removed in deadline order by an active expirer, so at each poll the
//! number of keys still present tells which deadline the server has reached;
//! the lag is how far behind the clock that deadline is. Prints the largest
//! lag, when the last key went (after the last deadline), and the PING
//! latency percentiles during the run. FLUSHes the database first.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BATCH: usize = 10_000;

fn connect(url: &str) -> TcpStream {
    let addr = url.trim_start_matches("redis://").trim_end_matches('/');
    let s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_nodelay(true).unwrap();
    s
}

/// Sends one inline command and reads one single-line reply.
fn command(s: &mut TcpStream, reader: &mut BufReader<TcpStream>, line: &str) -> String {
    s.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    let mut reply = String::new();
    reader.read_line(&mut reply).unwrap();
    reply.trim_end().to_string()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args.get(1).cloned().unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let keys: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let px: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(2000);

    let mut s = connect(&url);
    let mut reader = BufReader::new(s.try_clone().unwrap());
    assert_eq!(command(&mut s, &mut reader, "FLUSHALL"), "+OK");

    // Load; deadlines[i] is the send time of key i's batch plus PX (an
    // upper bound on the server's deadline for it).
    let start = Instant::now();
    let mut deadlines = Vec::with_capacity(keys);
    let mut buf = Vec::new();
    for first in (0..keys).step_by(BATCH) {
        let n = BATCH.min(keys - first);
        buf.clear();
        for i in first..first + n {
            write!(
                buf,
                "*5\r\n$3\r\nSET\r\n${}\r\nexp:{i}\r\n$1\r\nv\r\n$2\r\nPX\r\n${}\r\n{px}\r\n",
                4 + i.to_string().len(),
                px.to_string().len()
            )
            .unwrap();
        }
        let sent = start.elapsed();
        s.write_all(&buf).unwrap();
        for _ in 0..n {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            assert_eq!(line, "+OK\r\n");
        }
        deadlines.extend(std::iter::repeat_n(sent + Duration::from_millis(px), n));
    }
    let loaded = start.elapsed();
    let last_deadline = *deadlines.last().unwrap();
    println!(
        "loaded {keys} keys in {:.2} s; last deadline at {:.2} s",
        loaded.as_secs_f64(),
        last_deadline.as_secs_f64()
    );

    // PING loop on its own connection.
    let stop = Arc::new(AtomicBool::new(false));
    let pinger = {
        let (url, stop) = (url.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut s = connect(&url);
            let mut reader = BufReader::new(s.try_clone().unwrap());
            let mut samples = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                assert_eq!(command(&mut s, &mut reader, "PING"), "+PONG");
                samples.push(t.elapsed());
                std::thread::sleep(Duration::from_millis(1));
            }
            samples
        })
    };

    // Poll DBSIZE until empty (or 30 s past the last deadline).
    let mut max_lag = Duration::ZERO;
    let gone_at = loop {
        let now = start.elapsed();
        let left: usize = command(&mut s, &mut reader, "DBSIZE")
            .trim_start_matches(':')
            .parse()
            .unwrap();
        if left == 0 {
            break now;
        }
        // `left` keys remain, so key keys-left is the oldest one still
        // present (deadline order): it is `lag` overdue.
        let oldest = deadlines[keys - left];
        if now > oldest {
            max_lag = max_lag.max(now - oldest);
        }
        if now > last_deadline + Duration::from_secs(30) {
            println!("gave up: {left} keys still present 30 s after the last deadline");
            break now;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    stop.store(true, Ordering::Relaxed);
    let mut pings = pinger.join().unwrap();
    pings.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "largest expiry lag {:.0} ms; last key gone {:.0} ms after the last deadline",
        ms(max_lag),
        ms(gone_at.saturating_sub(last_deadline))
    );
    println!(
        "PING during the run ({} samples): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        pings.len(),
        ms(percentile(&pings, 0.5)),
        ms(percentile(&pings, 0.99)),
        ms(*pings.last().unwrap())
    );
}
