//! Load generator for blocking commands (`scripts/blocking.sh` runs it on
//! coordis and on Redis side by side).
//!
//! ```sh
//! wake-bench latency [HOST:]PORT CONSUMERS ROUNDS
//! wake-bench hold [HOST:]PORT CLIENTS
//! ```
//!
//! `latency`: CONSUMERS connections each wait in `BLPOP wake:<i> 0`; a
//! producer connection `LPUSH`es a timestamp to every consumer's key in
//! turn, then waits until every consumer has its element before the next
//! round. A wake-up latency is the time from the producer writing its LPUSH
//! to the consumer reading the BLPOP reply (one process, one monotonic
//! clock). Prints `p50_us p99_us` over CONSUMERS × ROUNDS wake-ups.
//!
//! `hold`: opens CLIENTS connections blocked in `BLPOP idle:<i> 0` (each on
//! its own key), prints `ready` once the server reports them all blocked,
//! and keeps them until its standard input closes.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn addr(arg: &str) -> String {
    if arg.contains(':') {
        arg.to_string()
    } else {
        format!("127.0.0.1:{arg}")
    }
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// Reads one reply and returns its last line's text (the element of a
/// BLPOP reply, the number of an integer reply).
fn read_reply(s: &mut TcpStream, buf: &mut Vec<u8>) -> String {
    loop {
        if let Some(text) = complete(buf) {
            return text;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// If `buf` starts with a whole reply of the shapes used here (`:n`, `+s`,
/// `*2 $k $v`), removes it and returns its last value.
fn complete(buf: &mut Vec<u8>) -> Option<String> {
    let text = std::str::from_utf8(buf).ok()?;
    let lines: Vec<&str> = text.split("\r\n").collect();
    let (used, value) = match text.as_bytes().first()? {
        b':' | b'+' if lines.len() > 1 => (1, lines[0][1..].to_string()),
        b'-' if lines.len() > 1 => panic!("error reply: {}", lines[0]),
        b'*' if lines.len() > 5 => (5, lines[4].to_string()),
        _ => return None,
    };
    let len: usize = lines[..used].iter().map(|l| l.len() + 2).sum();
    buf.drain(..len);
    Some(value)
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    s
}

fn latency(addr: &str, consumers: usize, rounds: usize) {
    let origin = Instant::now();
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    let mut ready = Vec::new();
    for i in 0..consumers {
        let mut s = connect(addr);
        let done = done_tx.clone();
        let (ready_tx, ready_rx) = mpsc::channel();
        ready.push(ready_rx);
        std::thread::spawn(move || {
            let key = format!("wake:{i}");
            let mut buf = Vec::new();
            for round in 0..rounds {
                s.write_all(&encode(&["BLPOP", &key, "0"])).expect("write");
                if round == 0 {
                    let _ = ready_tx.send(());
                }
                let sent: u64 = read_reply(&mut s, &mut buf).parse().expect("a timestamp");
                let now = origin.elapsed().as_nanos() as u64;
                let _ = done.send(now.saturating_sub(sent));
            }
        });
    }
    for r in ready {
        r.recv().expect("consumer started");
    }
    let mut producer = connect(addr);
    let mut buf = Vec::new();
    // Let every first BLPOP reach the server.
    wait_blocked(&mut producer, &mut buf, consumers);
    let mut samples = Vec::with_capacity(consumers * rounds);
    for round in 0..rounds {
        for i in 0..consumers {
            let stamp = origin.elapsed().as_nanos().to_string();
            producer
                .write_all(&encode(&["LPUSH", &format!("wake:{i}"), &stamp]))
                .expect("write");
            read_reply(&mut producer, &mut buf);
        }
        for _ in 0..consumers {
            samples.push(done_rx.recv_timeout(Duration::from_secs(30)).expect("a wake-up"));
        }
        if round + 1 < rounds {
            wait_blocked(&mut producer, &mut buf, consumers);
        }
    }
    samples.sort_unstable();
    let pct = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)] as f64 / 1000.0;
    println!("{:.1} {:.1}", pct(0.50), pct(0.99));
}

/// Waits until the server reports `n` blocked clients.
fn wait_blocked(s: &mut TcpStream, buf: &mut Vec<u8>, n: usize) {
    let want = format!("blocked_clients:{n}\r\n");
    let start = Instant::now();
    loop {
        s.write_all(&encode(&["INFO", "clients"])).expect("write");
        let mut text = Vec::new();
        // A bulk reply: read its header, then its body.
        loop {
            let mut chunk = [0u8; 4096];
            let got = s.read(&mut chunk).expect("read");
            assert!(got > 0, "server closed the connection");
            text.extend_from_slice(&chunk[..got]);
            if let Some(end) = text.windows(2).position(|w| w == b"\r\n") {
                let len: usize = std::str::from_utf8(&text[1..end]).unwrap().parse().unwrap();
                if text.len() >= end + 2 + len + 2 {
                    break;
                }
            }
        }
        if String::from_utf8_lossy(&text).contains(&want) {
            buf.clear();
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "clients never blocked");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn hold(addr: &str, clients: usize) {
    let mut held = Vec::with_capacity(clients);
    for i in 0..clients {
        let mut s = connect(addr);
        s.write_all(&encode(&["BLPOP", &format!("idle:{i}"), "0"]))
            .expect("write");
        held.push(s);
    }
    let mut admin = connect(addr);
    wait_blocked(&mut admin, &mut Vec::new(), clients);
    println!("ready");
    std::io::stdout().flush().expect("flush");
    // Until stdin closes.
    for _ in std::io::stdin().lock().lines() {}
    drop(held);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |i: usize, default: usize| args.get(i).map_or(default, |a| a.parse().expect("a number"));
    match args.get(1).map(String::as_str) {
        Some("latency") => latency(&addr(&args[2]), num(3, 1), num(4, 1000)),
        Some("hold") => hold(&addr(&args[2]), num(3, 10_000)),
        _ => {
            eprintln!("usage: wake-bench latency [HOST:]PORT CONSUMERS ROUNDS | hold [HOST:]PORT CLIENTS");
            std::process::exit(2);
        }
    }
}
