//! Soak: 100 clients take a lock, run a critical section and release it
//! with the Lua unlock script, over and over, against a `coordis-server`
//! process. Checked: never two holders at once, counters exact, and the
//! server's RSS flat across the run.
//!
//! It runs for `COORDIS_SOAK_SECS` seconds (default 3, so the normal test
//! run exercises it); the long run is
//! `COORDIS_SOAK_SECS=15 cargo test --release -p coordis --test soak -- --nocapture`.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordis::testing::ServerProcess;

const CLIENTS: usize = 100;

const UNLOCK: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

#[derive(Default)]
struct Tally {
    /// Critical sections entered (each INCRs `counter` once).
    sections: AtomicU64,
    /// Times a holder saw another holder inside (must stay 0).
    overlaps: AtomicU64,
    /// INCRs of `total` sent, one per loop.
    ops: AtomicU64,
    /// Unlocks that found the lock taken by someone else (must stay 0: the
    /// lock TTL is far longer than a critical section).
    lost_locks: AtomicU64,
}

fn worker(url: String, id: usize, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_connection().unwrap();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let token = format!("{id}:{n}");
        let _: i64 = redis::cmd("INCR").arg("total").query(&mut con).unwrap();
        tally.ops.fetch_add(1, Ordering::Relaxed);
        let got: Option<String> = redis::cmd("SET")
            .arg("lock")
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(10_000)
            .query(&mut con)
            .unwrap();
        if got.is_none() {
            std::thread::yield_now();
            continue;
        }
        let inside: i64 = redis::cmd("INCR").arg("holders").query(&mut con).unwrap();
        if inside != 1 {
            tally.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        let _: i64 = redis::cmd("INCR").arg("counter").query(&mut con).unwrap();
        tally.sections.fetch_add(1, Ordering::Relaxed);
        let _: i64 = redis::cmd("DECR").arg("holders").query(&mut con).unwrap();
        let released: i64 = redis::cmd("EVAL")
            .arg(UNLOCK)
            .arg(1)
            .arg("lock")
            .arg(&token)
            .query(&mut con)
            .unwrap();
        if released != 1 {
            tally.lost_locks.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[test]
fn lock_soak_with_many_clients() {
    let secs: u64 = std::env::var("COORDIS_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let server = ServerProcess::start(Command::new(env!("CARGO_BIN_EXE_coordis-server"))).unwrap();
    let url = format!("redis://{}", server.addr());
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let threads: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let (url, stop, tally) = (url.clone(), stop.clone(), tally.clone());
            std::thread::spawn(move || worker(url, id, stop, tally))
        })
        .collect();
    let started = Instant::now();
    let run = Duration::from_secs(secs);
    // RSS once the clients are connected and warm, then every half second.
    std::thread::sleep(run / 3);
    let warm = server.rss_kb().unwrap();
    let mut peak = warm;
    while started.elapsed() < run {
        std::thread::sleep(Duration::from_millis(500));
        peak = peak.max(server.rss_kb().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let end = server.rss_kb().unwrap();

    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_connection().unwrap();
    let get = |con: &mut redis::Connection, key: &str| -> u64 {
        let v: Option<u64> = redis::cmd("GET").arg(key).query(con).unwrap();
        v.unwrap_or(0)
    };
    let sections = tally.sections.load(Ordering::Relaxed);
    let ops = tally.ops.load(Ordering::Relaxed);
    println!(
        "soak {secs} s, {CLIENTS} clients: {ops} loops, {sections} critical sections; RSS {warm} kB warm, {peak} kB peak, {end} kB at the end"
    );
    assert!(sections > 0);
    assert_eq!(tally.overlaps.load(Ordering::Relaxed), 0, "two holders at once");
    assert_eq!(tally.lost_locks.load(Ordering::Relaxed), 0);
    assert_eq!(get(&mut con, "counter"), sections);
    assert_eq!(get(&mut con, "total"), ops);
    assert_eq!(get(&mut con, "holders"), 0);
    // Flat: no growth beyond allocator noise once warm.
    assert!(peak < warm + warm / 2 + 8 * 1024, "RSS grew: {warm} kB -> {peak} kB");
}
