//! Embedded start-to-first-PONG: how long a test waits for a fresh server.
//!
//! `cargo bench -p coordis --bench startup`

use std::io::{Read, Write};
use std::net::TcpStream;

use criterion::{criterion_group, criterion_main, Criterion};

fn start_to_first_pong(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    c.bench_function("embedded start + first PONG + shutdown", |b| {
        b.iter(|| {
            let server = runtime.block_on(coordis::Server::start()).unwrap();
            let mut conn = TcpStream::connect(server.addr()).unwrap();
            conn.write_all(b"PING\r\n").unwrap();
            let mut reply = [0u8; 7];
            conn.read_exact(&mut reply).unwrap();
            assert_eq!(&reply, b"+PONG\r\n");
            runtime.block_on(server.shutdown());
        })
    });
}

criterion_group!(benches, start_to_first_pong);
criterion_main!(benches);
