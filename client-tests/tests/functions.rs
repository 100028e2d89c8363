//! The function library (`scripts/lua/coordis.lua`) on every backend: a
//! lock and a semaphore through FCALL, and the library outliving SCRIPT
//! FLUSH and FLUSHALL.

use std::time::Duration;

use coordis_client_tests::backend::Backend;
use coordis_client_tests::functions::{self, FunctionLock, FunctionSemaphore};
use coordis_client_tests::on_every_backend;

on_every_backend!(a_lock_through_the_function_library, |backend: &Backend| {
    let client = backend.client();
    async move {
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        assert_eq!(functions::load(&mut conn).await.unwrap(), "coordis");
        let lock = FunctionLock { key: "lock:fn".into() };
        let ttl = Duration::from_secs(30);
        assert!(lock.acquire(&mut conn, "pod-a", ttl).await.unwrap());
        assert!(!lock.acquire(&mut conn, "pod-b", ttl).await.unwrap(), "held");
        assert!(!lock.release(&mut conn, "pod-b").await.unwrap(), "not the owner");
        assert!(lock.extend(&mut conn, "pod-a", Duration::from_secs(60)).await.unwrap());
        let pttl: i64 = redis::cmd("PTTL").arg("lock:fn").query_async(&mut conn).await.unwrap();
        assert!((59_000..=60_000).contains(&pttl), "{pttl}");
        assert!(!lock.extend(&mut conn, "pod-b", ttl).await.unwrap());
        // Functions are kept by the server: SCRIPT FLUSH and FLUSHALL leave them.
        redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async::<()>(&mut conn)
            .await
            .unwrap();
        assert!(lock.release(&mut conn, "pod-a").await.unwrap());
        redis::cmd("FLUSHALL").query_async::<()>(&mut conn).await.unwrap();
        assert!(lock.acquire(&mut conn, "pod-b", ttl).await.unwrap());
        // A second load without REPLACE is refused with Redis's text.
        let again: redis::RedisResult<String> = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(functions::LIBRARY)
            .query_async(&mut conn)
            .await;
        assert_eq!(again.unwrap_err().detail(), Some("Library 'coordis' already exists"));
    }
});

on_every_backend!(a_semaphore_through_the_function_library, |backend: &Backend| {
    let client = backend.client();
    async move {
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        functions::load(&mut conn).await.unwrap();
        let sem = FunctionSemaphore {
            key: "sem:fn".into(),
            permits: 3,
            lease: Duration::from_secs(10),
        };
        let now = 1_700_000_000_000u64;
        for holder in ["w1", "w2", "w3"] {
            assert!(sem.acquire(&mut conn, holder, now).await.unwrap());
        }
        assert!(!sem.acquire(&mut conn, "w4", now + 1).await.unwrap(), "full");
        assert!(
            sem.acquire(&mut conn, "w2", now + 2).await.unwrap(),
            "a holder refreshes"
        );
        assert!(sem.release(&mut conn, "w1").await.unwrap());
        assert!(!sem.release(&mut conn, "w1").await.unwrap());
        assert!(
            sem.acquire(&mut conn, "w4", now + 3).await.unwrap(),
            "a released permit is free"
        );
        // Past w3's lease (taken at `now`), its permit is free again.
        assert!(sem.acquire(&mut conn, "w5", now + 10_001).await.unwrap());
    }
});
