//! Recipes on coordis's test clock: what takes real sleeps (or cannot be
//! done) against Redis takes none here. Each runs on the embedded backend
//! and prints one line saying it is skipped on the others.

use std::time::{Duration, Instant};

use coordis_client_tests::backend::Backend;
use coordis_client_tests::limits::rate_limit;
use coordis_client_tests::lock::Lock;
use coordis_client_tests::on_every_backend;
use futures_util::StreamExt;

// On Redis: a 30-second sleep, then the event.
on_every_backend!(
    a_thirty_second_lock_expires_without_waiting_thirty_seconds,
    |backend: &Backend| {
        let clock = backend.test_clock();
        let client = backend.client();
        async move {
            let Some(clock) = clock else { return };
            clock.freeze();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("notify-keyspace-events")
                .arg("Ex")
                .query_async::<()>(&mut conn)
                .await
                .unwrap();
            let mut events = client.get_async_pubsub().await.unwrap();
            events.subscribe("__keyevent@0__:expired").await.unwrap();
            let holder = Lock::new("lock:report", "pod-a");
            let other = Lock::new("lock:report", "pod-b");
            assert!(holder.acquire(&mut conn, Duration::from_secs(30)).await.unwrap());
            assert!(!other.acquire(&mut conn, Duration::from_secs(30)).await.unwrap());
            let started = Instant::now();
            clock.advance(Duration::from_secs(30) + Duration::from_millis(1));
            let event = tokio::time::timeout(Duration::from_secs(5), events.on_message().next())
                .await
                .expect("the expired event")
                .unwrap();
            assert_eq!(event.get_payload::<String>().unwrap(), "lock:report");
            assert!(other.acquire(&mut conn, Duration::from_secs(30)).await.unwrap());
            println!("30 s of lease expired in {:?} of wall time", started.elapsed());
        }
    }
);

// On Redis: the boundary is a race with the wall clock.
on_every_backend!(a_fixed_window_limiter_at_its_exact_boundary, |backend: &Backend| {
    let clock = backend.test_clock();
    let client = backend.client();
    async move {
        let Some(clock) = clock else { return };
        clock.freeze();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let window = Duration::from_millis(1000);
        for _ in 0..3 {
            assert!(rate_limit(&mut conn, "rl:api", 3, window).await.unwrap());
        }
        assert!(
            !rate_limit(&mut conn, "rl:api", 3, window).await.unwrap(),
            "4th in the window"
        );
        // The window's key lives through its deadline millisecond, as in Redis.
        clock.advance(Duration::from_millis(1000));
        assert!(
            !rate_limit(&mut conn, "rl:api", 3, window).await.unwrap(),
            "still the same window"
        );
        clock.advance(Duration::from_millis(1));
        assert!(
            rate_limit(&mut conn, "rl:api", 3, window).await.unwrap(),
            "a new window"
        );
    }
});

// On Redis: kill -9 and a restart without persistence, with timing luck.
on_every_backend!(
    a_restart_that_loses_data_lets_a_second_holder_in,
    |backend: &Backend| {
        let control = backend.test_control();
        let client = backend.client();
        let lease = Duration::from_secs(30);
        async move {
            let Some(control) = control else { return };
            let mut a = client.get_multiplexed_async_connection().await.unwrap();
            let token_a = coordis_client_tests::fencing::acquire(&mut a, "lock:job", "pod-a", lease)
                .await
                .unwrap()
                .expect("free");
            control.restart(true);
            let mut b = client.get_multiplexed_async_connection().await.unwrap();
            let token_b = coordis_client_tests::fencing::acquire(&mut b, "lock:job", "pod-b", lease)
                .await
                .unwrap()
                .expect("the restart forgot pod-a's lock");
            // pod-a still believes it holds the lock for most of its 30 s lease,
            // and the token counter restarted with the data: the tokens collide,
            // so a resource fenced by them cannot tell the holders apart. Keep
            // the counter where a restart does not reset it, or delay restarts by
            // the longest lease.
            assert_eq!((token_a, token_b), (1, 1));
        }
    }
);

/// Redlock over five embedded servers, some of them hanging (a
/// stop-the-world pause: connections accepted, no answers). On Redis this
/// takes SIGSTOP on server processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_with_hanging_servers() {
    use coordis_client_tests::redlock::Redlock;
    let mut servers = vec![];
    for _ in 0..5 {
        servers.push(coordis::Server::start().await.unwrap());
    }
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let redlock = Redlock::new(&urls);
    let ttl = Duration::from_secs(10);
    // Two of five hang: the quorum of three still grants, within the budget.
    servers[3].pause();
    servers[4].pause();
    let started = Instant::now();
    let validity = redlock
        .lock("res:two-down", "client-a", ttl)
        .await
        .expect("quorum of 3");
    let granted = started.elapsed();
    assert!(validity > ttl - Duration::from_secs(2), "{validity:?}");
    // Three hang: refused, and in bounded time (retries × node timeouts).
    servers[2].pause();
    let started_refusal = Instant::now();
    assert_eq!(redlock.lock("res:three-down", "client-b", ttl).await, None);
    let refusal = started_refusal.elapsed();
    assert!(refusal < Duration::from_secs(5), "{refusal:?}");
    println!("two hanging: granted after {granted:?}; three hanging: refused after {refusal:?}");
    for s in &servers {
        s.resume();
    }
    for s in servers {
        s.shutdown().await;
    }
}

// On Redis: SIGSTOP the server past the lease, with timing luck.
on_every_backend!(
    a_server_pause_past_the_lease_is_caught_by_the_watchdog_and_the_fence,
    |backend: &Backend| {
        use coordis_client_tests::{fencing, lock::Lock, watchdog::Watchdog};
        let control = backend.test_control();
        let client = backend.client();
        async move {
            let Some(control) = control else { return };
            let clock = control.clock().expect("a test clock");
            clock.freeze();
            let lease = Duration::from_millis(60);
            let mut a = client.get_multiplexed_async_connection().await.unwrap();
            let token_a = fencing::acquire(&mut a, "lock:job", "pod-a", lease)
                .await
                .unwrap()
                .expect("free");
            let watchdog = Watchdog::start(client.clone(), Lock::new("lock:job", "pod-a"), lease);
            fencing::write(&mut a, "report", token_a, "from a").await.unwrap();
            // The server stops for longer than the lease: renewals wait unanswered.
            control.pause();
            clock.advance(Duration::from_secs(1));
            tokio::time::sleep(Duration::from_millis(50)).await;
            control.resume();
            // The first renewal answered finds the lease gone: the holder knows.
            let started = Instant::now();
            while !watchdog.is_lost() {
                assert!(started.elapsed() < Duration::from_secs(5), "the watchdog never noticed");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let mut b = client.get_multiplexed_async_connection().await.unwrap();
            let token_b = fencing::acquire(&mut b, "lock:job", "pod-b", lease)
                .await
                .unwrap()
                .expect("expired");
            assert!(token_b > token_a);
            fencing::write(&mut b, "report", token_b, "from b").await.unwrap();
            // A holder that did not listen to its watchdog is stopped by the fence.
            let stale = fencing::write(&mut a, "report", token_a, "stale a").await.unwrap_err();
            assert_eq!(stale.code(), Some("STALE"), "{stale:?}");
            watchdog.stop();
        }
    }
);
