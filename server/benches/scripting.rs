//! Cost of one cached script run (EVALSHA of the unlock script) inside the
//! VM, with a stub dispatcher standing in for the keyspace.
//! `cargo bench -p coordis --bench scripting`

use std::sync::Arc;

use bytes::Bytes;
use coordis::internals::Reply;
use coordis::internals::{ScriptState, Scripting};
use criterion::{criterion_group, criterion_main, Criterion};

fn bench(c: &mut Criterion) {
    // The server's default lua-memory-limit (256 MB).
    let limit = coordis::Config::default().lua_memory_limit;
    let mut s = Scripting::new(limit, Arc::new(ScriptState::default())).unwrap();
    let body = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/lua/unlock.lua")).unwrap();
    let sha = s.load(&body).unwrap();
    let keys = [Bytes::from_static(b"lock:1")];
    let argv = [Bytes::from_static(b"pod")];
    c.bench_function("evalsha unlock (stub keyspace)", |b| {
        b.iter(|| {
            s.run(&sha, &keys, &argv, 1, &mut |args: &[Bytes], _mode| {
                if args[0].eq_ignore_ascii_case(b"get") {
                    Reply::Bulk(Bytes::from_static(b"pod"))
                } else {
                    Reply::Int(1)
                }
            })
        })
    });
    c.bench_function("eval return 1", |b| {
        let sha = s.load(b"return 1").unwrap();
        b.iter(|| s.run(&sha, &[], &[], 1, &mut |_: &[Bytes], _mode| Reply::Ok))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
