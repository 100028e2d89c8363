//! Fencing, semaphores, the rate limiter and the barrier, on every backend.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordis_client_tests::backend::Backend;
use coordis_client_tests::semaphore::{KeySemaphore, ZSetSemaphore};
use coordis_client_tests::{fencing, limits, on_every_backend};

on_every_backend!(fencing_rejects_the_stalled_holders_write, |backend: &Backend| {
    let url = backend.url();
    async move {
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let ttl = Duration::from_millis(300);
        let token_a = fencing::acquire(&mut conn, "lock:fenced", "a", ttl)
            .await
            .unwrap()
            .expect("A acquires");
        assert_eq!(
            fencing::acquire(&mut conn, "lock:fenced", "b", ttl).await.unwrap(),
            None
        );
        // A stalls (a GC pause) past its lease; B acquires a newer token and writes.
        tokio::time::sleep(ttl + Duration::from_millis(150)).await;
        let token_b = fencing::acquire(&mut conn, "lock:fenced", "b", ttl)
            .await
            .unwrap()
            .expect("B acquires");
        assert_eq!(token_b, token_a + 1);
        fencing::write(&mut conn, "resource", token_b, "from-b").await.unwrap();
        // A wakes and writes with its old token: refused.
        let stale = fencing::write(&mut conn, "resource", token_a, "from-a")
            .await
            .unwrap_err();
        assert_eq!(stale.code(), Some("STALE"), "{stale}");
        let value: String = redis::cmd("GET").arg("resource").query_async(&mut conn).await.unwrap();
        assert_eq!(value, "from-b");
    }
});

/// Runs 10 workers doing acquire / work / release rounds on a semaphore of 3
/// and returns the most holders seen at once.
async fn max_concurrency<F, Fut>(url: String, round: F) -> usize
where
    F: Fn(redis::aio::MultiplexedConnection, String, Arc<AtomicUsize>, Arc<AtomicUsize>) -> Fut
        + Send
        + Sync
        + 'static
        + Clone,
    Fut: std::future::Future<Output = ()> + Send,
{
    let inside = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let client = redis::Client::open(url).unwrap();
    let mut workers = vec![];
    for w in 0..10 {
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        let (inside, max, round) = (inside.clone(), max.clone(), round.clone());
        workers.push(tokio::spawn(async move {
            round(conn, format!("worker-{w}"), inside, max).await
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    max.load(Ordering::SeqCst)
}

/// The critical section: counts holders inside, keeps the maximum.
async fn critical_section(inside: &AtomicUsize, max: &AtomicUsize) {
    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
    max.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(20)).await;
    inside.fetch_sub(1, Ordering::SeqCst);
}

on_every_backend!(key_semaphore_admits_exactly_three, |backend: &Backend| {
    let url = backend.url();
    async move {
        let sem = KeySemaphore {
            name: "sem:keys".into(),
            permits: 3,
            lease: Duration::from_secs(5),
        };
        let max = max_concurrency(url.clone(), move |mut conn, me, inside, max| {
            let sem = sem.clone();
            async move {
                for _ in 0..5 {
                    let permit = loop {
                        if let Some(p) = sem.acquire(&mut conn, &me).await.unwrap() {
                            break p;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    };
                    critical_section(&inside, &max).await;
                    assert!(sem.release(&mut conn, &me, permit).await.unwrap());
                }
            }
        })
        .await;
        assert_eq!(max, 3);
        // A crashed holder's permit frees after its lease.
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let short = KeySemaphore {
            name: "sem:crash".into(),
            permits: 1,
            lease: Duration::from_millis(200),
        };
        assert!(short.acquire(&mut conn, "crashed").await.unwrap().is_some());
        assert!(short.acquire(&mut conn, "other").await.unwrap().is_none());
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert_eq!(short.acquire(&mut conn, "other").await.unwrap(), Some(1));
        assert!(short.refresh(&mut conn, "other", 1).await.unwrap());
    }
});

on_every_backend!(zset_semaphore_admits_exactly_three, |backend: &Backend| {
    let url = backend.url();
    async move {
        let sem = ZSetSemaphore {
            name: "sem:zset".into(),
            permits: 3,
            lease: Duration::from_secs(5),
        };
        let max = max_concurrency(url.clone(), move |mut conn, me, inside, max| {
            let sem = sem.clone();
            async move {
                for _ in 0..5 {
                    while !sem.acquire(&mut conn, &me).await.unwrap() {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    critical_section(&inside, &max).await;
                    assert!(sem.release(&mut conn, &me).await.unwrap());
                }
            }
        })
        .await;
        assert_eq!(max, 3);
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let short = ZSetSemaphore {
            name: "sem:zcrash".into(),
            permits: 1,
            lease: Duration::from_millis(200),
        };
        assert!(short.acquire(&mut conn, "crashed").await.unwrap());
        assert!(!short.acquire(&mut conn, "other").await.unwrap());
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert!(short.acquire(&mut conn, "other").await.unwrap());
        assert!(short.refresh(&mut conn, "other").await.unwrap());
        assert!(!short.refresh(&mut conn, "crashed").await.unwrap());
    }
});

on_every_backend!(rate_limiter_admits_exactly_the_limit_per_window, |backend: &Backend| {
    let url = backend.url();
    async move {
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let window = Duration::from_millis(400);
        let start = Instant::now();
        let mut admitted = 0;
        for _ in 0..20 {
            if limits::rate_limit(&mut conn, "rl:api", 5, window).await.unwrap() {
                admitted += 1;
            }
        }
        if start.elapsed() < window {
            assert_eq!(admitted, 5);
        }
        tokio::time::sleep(window + Duration::from_millis(100)).await;
        assert!(
            limits::rate_limit(&mut conn, "rl:api", 5, window).await.unwrap(),
            "a new window admits again"
        );
    }
});

on_every_backend!(
    barrier_releases_everyone_only_when_the_last_arrives,
    |backend: &Backend| {
        let url = backend.url();
        async move {
            let client = redis::Client::open(url).unwrap();
            let released = Arc::new(AtomicUsize::new(0));
            let mut parties = vec![];
            for i in 0..4u64 {
                let mut conn = client.get_multiplexed_async_connection().await.unwrap();
                let released = released.clone();
                parties.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(50 * i)).await;
                    limits::barrier(&mut conn, "barrier:start", 5, Duration::from_millis(10))
                        .await
                        .unwrap();
                    released.fetch_add(1, Ordering::SeqCst);
                }));
            }
            tokio::time::sleep(Duration::from_millis(400)).await;
            assert_eq!(
                released.load(Ordering::SeqCst),
                0,
                "nobody passes before the fifth arrives"
            );
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            assert_eq!(
                limits::barrier(&mut conn, "barrier:start", 5, Duration::from_millis(10))
                    .await
                    .unwrap(),
                5
            );
            for p in parties {
                p.await.unwrap();
            }
            assert_eq!(released.load(Ordering::SeqCst), 4);
        }
    }
);
