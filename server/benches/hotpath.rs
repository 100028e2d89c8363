//! The per-request hot path, piece by piece: parsing a pipelined read,
//! dispatching commands through the engine (one batch, as a connection runs
//! it), the store's get/set, and a cached EVALSHA through the engine.
//! `cargo bench -p coordis --bench hotpath`

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use coordis::internals::{Db, Value};
use coordis::internals::{ProtocolLimits, RequestParser};
use coordis::testing::{LocalEngine, RawClient};
use coordis::SystemClock;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn bench(c: &mut Criterion) {
    // 16 pipelined `SET lock:<i> pod NX EX 30` requests, as one read.
    let mut read = Vec::new();
    for i in 0..16 {
        let key = format!("lock:{i}");
        read.extend(RawClient::encode(&[
            b"SET",
            key.as_bytes(),
            b"pod",
            b"NX",
            b"EX",
            b"30",
        ]));
    }
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Elements(16));
    group.bench_function("16 SET NX EX requests", |b| {
        let limits = ProtocolLimits::default();
        let mut parser = RequestParser::new();
        b.iter(|| {
            let mut buf = BytesMut::from(&read[..]);
            let mut n = 0;
            while let Ok(Some(_)) = parser.next(&mut buf, &limits) {
                n += 1;
            }
            assert_eq!(n, 16);
        })
    });
    group.finish();

    let mut engine = LocalEngine::new(coordis::Config::default(), Arc::new(SystemClock));
    let requests = |args: &[&[u8]]| -> Vec<Vec<Bytes>> {
        (0..16)
            .map(|_| args.iter().map(|a| Bytes::copy_from_slice(a)).collect())
            .collect()
    };
    let mut group = c.benchmark_group("dispatch");
    group.throughput(Throughput::Elements(16));
    for (name, args) in [
        ("GET (16 per batch)", &[&b"GET"[..], b"k"][..]),
        ("SET (16 per batch)", &[b"SET", b"k", b"value"]),
        ("INCR (16 per batch)", &[b"INCR", b"n"]),
        (
            "SET NX EX (16 per batch)",
            &[b"SET", b"lock", b"pod", b"NX", b"EX", b"30"],
        ),
    ] {
        let batch = requests(args);
        group.bench_function(name, |b| b.iter(|| engine.run(batch.clone())));
    }
    let unlock = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/lua/unlock.lua")).unwrap();
    let sha = engine.command(&[b"SCRIPT", b"LOAD", &unlock]);
    let sha = &sha[5..45];
    let batch = requests(&[b"EVALSHA", sha, b"1", b"lock", b"pod"]);
    group.bench_function("EVALSHA unlock (16 per batch)", |b| {
        b.iter(|| engine.run(batch.clone()))
    });
    group.finish();

    let mut group = c.benchmark_group("store");
    let mut db = Db::default();
    let keys: Vec<Bytes> = (0..100_000).map(|i| Bytes::from(format!("lock:{i}"))).collect();
    for k in &keys {
        db.insert(k, Value::Str(Bytes::from_static(b"pod")), 0);
    }
    let mut i = 0;
    group.bench_function("get (100k keys)", |b| {
        b.iter(|| {
            i = (i + 7919) % keys.len();
            db.lookup(&keys[i], 0).is_some()
        })
    });
    group.bench_function("set (100k keys)", |b| {
        b.iter(|| {
            i = (i + 7919) % keys.len();
            db.insert(&keys[i], Value::Str(Bytes::from_static(b"pod")), 0)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
