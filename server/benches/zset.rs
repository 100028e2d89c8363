//! Sorted-set cost per operation at 1k, 100k and 1M members: it must grow
//! like log n. `cargo bench -p coordis --bench zset`
//!
//! - `zadd_update`: ZADD of an existing member with a new score (remove +
//!   insert in the skip list), the semaphore-refresh case.
//! - `zadd_insert_remove`: ZADD of a new member, then ZREM of it.
//! - `zremrangebyscore_10`: remove a 10-member score range, then put it back
//!   (the ZSET-semaphore expiry sweep).
//! - `zrank`: rank lookup through the skip list spans.

use bytes::Bytes;
use coordis::internals::zset::{Listpack, ScoreRange, ZSet};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn build(n: usize) -> (ZSet, Vec<Bytes>) {
    let members: Vec<Bytes> = (0..n).map(|i| Bytes::from(format!("member:{i:08}"))).collect();
    let mut z = ZSet::default();
    for (i, m) in members.iter().enumerate() {
        z.insert(m, i as f64, Listpack::default());
    }
    (z, members)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("zset");
    for n in [1_000usize, 100_000, 1_000_000] {
        let (mut z, members) = build(n);
        let mut rng = fastrand::Rng::with_seed(1);
        group.bench_function(BenchmarkId::new("zadd_update", n), |b| {
            b.iter(|| {
                let m = &members[rng.usize(..n)];
                z.insert(m, rng.usize(..n) as f64 + 0.5, Listpack::default())
            })
        });
        let extra = Bytes::from_static(b"extra-member");
        group.bench_function(BenchmarkId::new("zadd_insert_remove", n), |b| {
            b.iter(|| {
                z.insert(&extra, rng.usize(..n) as f64, Listpack::default());
                z.remove(&extra)
            })
        });
        let (mut z, members) = build(n);
        group.bench_function(BenchmarkId::new("zremrangebyscore_10", n), |b| {
            b.iter(|| {
                let start = rng.usize(..n - 10);
                let range = ScoreRange {
                    min: start as f64,
                    max: (start + 9) as f64,
                    minex: false,
                    maxex: false,
                };
                let removed = z.remove_score_range(&range);
                for (i, m) in members[start..start + 10].iter().enumerate() {
                    z.insert(m, (start + i) as f64, Listpack::default());
                }
                removed
            })
        });
        group.bench_function(BenchmarkId::new("zrank", n), |b| {
            b.iter(|| z.rank(&members[rng.usize(..n)], false))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
