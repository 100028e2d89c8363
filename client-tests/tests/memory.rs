//! Locks under `maxmemory`, on every backend:
//!
//! - noeviction: a runaway writer gets `-OOM`; the locks already held stay,
//!   extend and release; a new lock cannot be taken until memory is freed.
//!   The server's RSS stays within its base (the RSS before the limit was
//!   set) plus the limit's room and a documented allowance
//!   ([`RSS_ALLOWANCE_KB`]): the test's own process for embedded coordis,
//!   redis-server's process for Redis.
//! - allkeys-lru: a lock nobody touched is evicted under memory pressure, a
//!   second client acquires it while the first still believes it holds it,
//!   and the fencing token refuses the first holder's write.
//! - volatile-ttl: the lock, the key with the shortest TTL, is the first to go.
//!
//! The limit is set above the memory the server uses at the start. An
//! embedded server counts its whole process's allocations, so the tests of
//! this file run one at a time.

use std::time::Duration;

use coordis_client_tests::backend::Backend;
use coordis_client_tests::fencing;
use coordis_client_tests::lock::Lock;
use coordis_client_tests::on_every_backend;
use redis::aio::MultiplexedConnection;

/// One memory test at a time in this process (see the module docs).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Room above the memory in use at the start.
const ROOM: u64 = 4 * 1024 * 1024;
const VALUE: usize = 1024;

async fn used_memory(conn: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await.unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

async fn evicted_keys(conn: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query_async(conn).await.unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("evicted_keys:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

async fn config_set(conn: &mut MultiplexedConnection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query_async(conn)
        .await
        .unwrap();
}

/// Sets `policy` and a limit `ROOM` above the memory in use now.
async fn limit(conn: &mut MultiplexedConnection, policy: &str) -> u64 {
    config_set(conn, "maxmemory-policy", policy).await;
    let max = used_memory(conn).await + ROOM;
    config_set(conn, "maxmemory", &max.to_string()).await;
    max
}

/// How far the server's resident set may grow past the limit's room when a
/// runaway writer fills it under noeviction: the allocators' overhead on
/// 4 MB of 1 KB list elements (chunk headers, partly used pages) and the
/// server's own buffers. Measured over 5 runs: RSS grew 4080–4368 kB on
/// embedded coordis (glibc) and 4216–4236 kB on Redis (jemalloc) for a
/// room of 4096 kB, at most 272 kB over; the allowance is a quarter of the room.
const RSS_ALLOWANCE_KB: u64 = 1024;

/// The resident set of process `pid`, in kB.
fn rss_kb(pid: u32) -> u64 {
    coordis::testing::rss_kb(pid).expect("the server's /proc status")
}

async fn exists(conn: &mut MultiplexedConnection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query_async::<i64>(conn).await.unwrap() == 1
}

on_every_backend!(
    noeviction_refuses_the_runaway_writer_and_keeps_the_locks,
    |backend: &Backend| {
        let backend_url = backend.url();
        let pid = backend.server_pid();
        async move {
            let _one = ONE_AT_A_TIME.lock().await;
            let client = redis::Client::open(backend_url).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let held = Lock::new("lock:orders", "worker-1");
            assert!(held.acquire(&mut conn, Duration::from_secs(60)).await.unwrap());
            let rss_base = pid.map(rss_kb);
            let max = limit(&mut conn, "noeviction").await;
            // The runaway writer: 1 KB list elements until it is refused.
            let element = "x".repeat(VALUE);
            let mut pushed = 0u64;
            let refusal = loop {
                let r: redis::RedisResult<i64> = redis::cmd("RPUSH")
                    .arg("runaway")
                    .arg(&element)
                    .query_async(&mut conn)
                    .await;
                match r {
                    Ok(_) => pushed += 1,
                    Err(e) => break e,
                }
                assert!(pushed < 4 * ROOM / VALUE as u64, "never refused: {pushed} pushes");
            };
            assert_eq!(refusal.code(), Some("OOM"), "{refusal}");
            assert!(used_memory(&mut conn).await <= max + max / 20);
            // The server's resident set: its base (what it held before the
            // limit was set) plus the limit's room and the allocator's overhead.
            if let (Some(pid), Some(base)) = (pid, rss_base) {
                let now = rss_kb(pid);
                let grown = now.saturating_sub(base);
                eprintln!(
                    "RSS {base} kB before the runaway writer, {now} kB after ({grown} kB for {pushed} pushes of {VALUE} B; room {} kB)",
                    ROOM / 1024
                );
                assert!(
                    grown <= ROOM / 1024 + RSS_ALLOWANCE_KB,
                    "RSS grew {grown} kB, over the room {} kB and the allowance {RSS_ALLOWANCE_KB} kB",
                    ROOM / 1024
                );
            }
            // The lock held survives, extends and releases (none of these grow memory)...
            assert_eq!(
                Lock::holder(&mut conn, "lock:orders").await.unwrap().as_deref(),
                Some("worker-1")
            );
            assert!(held.extend(&mut conn, Duration::from_secs(60)).await.unwrap());
            assert!(held.release(&mut conn).await.unwrap());
            // ...but a new lock is a write that grows memory: refused while full.
            let next = Lock::new("lock:orders", "worker-2");
            let err = next.acquire(&mut conn, Duration::from_secs(60)).await.unwrap_err();
            assert_eq!(err.code(), Some("OOM"));
            let _: i64 = redis::cmd("DEL").arg("runaway").query_async(&mut conn).await.unwrap();
            assert!(next.acquire(&mut conn, Duration::from_secs(60)).await.unwrap());
            assert_eq!(evicted_keys(&mut conn).await, 0);
            config_set(&mut conn, "maxmemory", "0").await;
        }
    }
);

on_every_backend!(
    allkeys_lru_evicts_an_idle_lock_and_the_fencing_token_catches_it,
    |backend: &Backend| {
        let backend_url = backend.url();
        async move {
            let _one = ONE_AT_A_TIME.lock().await;
            let client = redis::Client::open(backend_url).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let mut b_conn = client.get_multiplexed_async_connection().await.unwrap();
            let ttl = Duration::from_secs(60);
            let a_token = fencing::acquire(&mut conn, "lock:lru", "holder-a", ttl)
                .await
                .unwrap()
                .unwrap();
            fencing::write(&mut conn, "report", a_token, "a's first draft")
                .await
                .unwrap();
            limit(&mut conn, "allkeys-lru").await;
            // Enough samples that the pick is near exact (as in the
            // volatile-ttl recipe): the longest idle goes first.
            config_set(&mut conn, "maxmemory-samples", "64").await;
            // A holds the lock and goes quiet; a cache fills the server. The
            // token counter and the resource are read all along (hot keys).
            tokio::time::sleep(Duration::from_millis(2100)).await;
            let value = "v".repeat(VALUE);
            // The cache's first part fits under the limit and is then left
            // an LRU tick behind; the second part evicts from it (the lock,
            // idle longest, first). Evictions into keys as fresh as the hot
            // ones (a tie at idle 0) would let the sampler take the token
            // counter too, as happened on both servers when the first part
            // already went over the limit.
            let first = ROOM as usize * 3 / 4 / VALUE;
            let keys = 2 * first;
            for i in 0..keys {
                if i == first {
                    tokio::time::sleep(Duration::from_millis(1100)).await;
                }
                let _: () = redis::cmd("SET")
                    .arg(format!("cache:{i}"))
                    .arg(&value)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                if i % 10 == 0 {
                    for hot in ["lock:lru:token", "report", "report:token"] {
                        let _: Option<String> = redis::cmd("GET").arg(hot).query_async(&mut conn).await.unwrap();
                    }
                }
            }
            assert!(evicted_keys(&mut conn).await > 0);
            assert!(!exists(&mut conn, "lock:lru").await, "the idle lock was evicted");
            // B finds the lock free and takes it, with a newer token.
            let b_token = fencing::acquire(&mut b_conn, "lock:lru", "holder-b", ttl)
                .await
                .unwrap()
                .unwrap();
            assert!(b_token > a_token);
            fencing::write(&mut b_conn, "report", b_token, "b's report")
                .await
                .unwrap();
            // A still believes it holds the lock: the token refuses its write.
            let stale = fencing::write(&mut conn, "report", a_token, "a's late write")
                .await
                .unwrap_err();
            assert_eq!(stale.code(), Some("STALE"), "{stale}");
            let report: String = redis::cmd("GET").arg("report").query_async(&mut conn).await.unwrap();
            assert_eq!(report, "b's report");
            config_set(&mut conn, "maxmemory", "0").await;
            config_set(&mut conn, "maxmemory-samples", "5").await;
            let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
        }
    }
);

on_every_backend!(volatile_ttl_evicts_the_lock_first, |backend: &Backend| {
    let backend_url = backend.url();
    async move {
        let _one = ONE_AT_A_TIME.lock().await;
        let client = redis::Client::open(backend_url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        // Few large cached values, all sampled each round, so the pick is
        // exact: the nearest deadline goes first.
        config_set(&mut conn, "maxmemory-samples", "64").await;
        let a_token = fencing::acquire(&mut conn, "lock:ttl", "holder-a", Duration::from_secs(30))
            .await
            .unwrap()
            .unwrap();
        limit(&mut conn, "volatile-ttl").await;
        let big = "c".repeat(ROOM as usize / 8);
        let mut first_eviction_at = None;
        for i in 0..16 {
            let _: () = redis::cmd("SET")
                .arg(format!("cache:{i}"))
                .arg(&big)
                .arg("EX")
                .arg(3600)
                .query_async(&mut conn)
                .await
                .unwrap();
            if evicted_keys(&mut conn).await > 0 {
                first_eviction_at = Some(i);
                break;
            }
        }
        let Some(last) = first_eviction_at else {
            panic!("the fill evicted nothing");
        };
        // The lock is gone, and any other key evicted with it is a cached
        // one (the lock alone may not free enough).
        assert!(!exists(&mut conn, "lock:ttl").await, "the lock went first");
        let mut cached_left = 0;
        for i in 0..=last {
            cached_left += exists(&mut conn, &format!("cache:{i}")).await as u64;
        }
        assert_eq!(evicted_keys(&mut conn).await, 1 + (last as u64 + 1 - cached_left));
        // The token counter has no TTL: volatile-ttl never takes it, so the
        // next holder's token is still newer.
        let b_token = fencing::acquire(&mut conn, "lock:ttl", "holder-b", Duration::from_secs(30))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(b_token, a_token + 1);
        config_set(&mut conn, "maxmemory", "0").await;
        config_set(&mut conn, "maxmemory-samples", "5").await;
        let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    }
});
