//! Embedded start-to-first-PONG: how long a test waits for a fresh server
//! (bind, spawn, connect, PING, PONG). Shutdown is measured separately.
//!
//! `cargo bench -p coordis --bench startup`

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

fn ping(server: &coordis::Server) {
    let mut conn = TcpStream::connect(server.addr()).unwrap();
    conn.write_all(b"PING\r\n").unwrap();
    let mut reply = [0u8; 7];
    conn.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+PONG\r\n");
}

fn startup(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    c.bench_function("embedded start to first PONG", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                let server = runtime.block_on(coordis::Server::start()).unwrap();
                ping(&server);
                total += t.elapsed();
                runtime.block_on(server.shutdown());
            }
            total
        })
    });
    c.bench_function("embedded shutdown", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let server = runtime.block_on(coordis::Server::start()).unwrap();
                ping(&server);
                let t = Instant::now();
                runtime.block_on(server.shutdown());
                total += t.elapsed();
            }
            total
        })
    });
}

criterion_group!(benches, startup);
criterion_main!(benches);
