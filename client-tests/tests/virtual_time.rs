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

/// Redlock over five embedded servers ([`coordis::ServerSet`]), some of
/// them hanging (a stop-the-world pause: connections accepted, no answers).
/// On Redis this takes SIGSTOP on server processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_with_hanging_servers() {
    use coordis_client_tests::redlock::Redlock;
    let set = coordis::ServerSet::start(5).await.unwrap();
    let mut redlock = Redlock::new(&set.urls());
    // Retries wait at most 30 ms of real time (no sleep over 50 ms).
    redlock.retry_delay = Duration::from_millis(20);
    let ttl = Duration::from_secs(10);
    // Two of five hang: the quorum of three still grants, within the budget.
    set.pause(&[3, 4]);
    let started = Instant::now();
    let validity = redlock
        .lock("res:two-down", "client-a", ttl)
        .await
        .expect("quorum of 3");
    let granted = started.elapsed();
    assert!(validity > ttl - Duration::from_secs(2), "{validity:?}");
    // Three hang: refused, and in bounded time (retries × node timeouts).
    set.pause(&[2]);
    let started_refusal = Instant::now();
    assert_eq!(redlock.lock("res:three-down", "client-b", ttl).await, None);
    let refusal = started_refusal.elapsed();
    assert!(refusal < Duration::from_secs(5), "{refusal:?}");
    println!("two hanging: granted after {granted:?}; three hanging: refused after {refusal:?}");
    set.heal();
    set.shutdown().await;
}

/// Two of five servers hang, and the reply to one of the other three's
/// `SET NX` is lost after the SET ran (a fault rule: run, then drop the
/// connection). Counting that server as a failure leaves two of five: no
/// quorum. The client asks again with `SET NX GET`, finds its own owner id
/// and counts the server: three of five, granted at the first attempt. On
/// Redis: a proxy that cuts the connection at the right byte, with luck.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_recognises_its_own_lock_after_a_lost_reply() {
    use coordis::{FaultAction, FaultRule};
    use coordis_client_tests::redlock::Redlock;
    let set = coordis::ServerSet::start(5).await.unwrap();
    set.pause(&[3, 4]);
    let lost = set.add_fault(
        &[1],
        FaultRule::new(FaultAction::LoseReply)
            .command("set")
            .key("res:*")
            .times(1),
    );
    let mut redlock = Redlock::new(&set.urls());
    redlock.retries = 1;
    let ttl = Duration::from_secs(10);
    redlock
        .lock("res:job", "client-a", ttl)
        .await
        .expect("granted at the first attempt: server 1 counted");
    let fault = set
        .server(1)
        .control()
        .faults()
        .into_iter()
        .find(|f| f.id == lost[0])
        .unwrap();
    assert_eq!(fault.fired, 1, "the reply was lost once");
    set.resume(&[3, 4]);
    for (i, url) in set.urls().iter().enumerate().take(3) {
        assert_eq!(get(url, "res:job").await.as_deref(), Some("client-a"), "server {i}");
    }
    set.shutdown().await;
}

/// GET on a fresh connection to `url`.
async fn get(url: &str, key: &str) -> Option<String> {
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    redis::cmd("GET").arg(key).query_async(&mut conn).await.unwrap()
}

/// The next fencing token of the protected report.
async fn next_token(store: &mut redis::aio::MultiplexedConnection) -> i64 {
    redis::cmd("INCR").arg("report:token").query_async(store).await.unwrap()
}

/// A forward clock jump on Redlock servers. On one of five, the lock's key
/// expires early there only: no second client can reach a quorum. On three
/// of five, a second client is granted the lock while the first still holds
/// it (its validity, measured on its own clock, has not run out): the two
/// overlap, and only the fencing token keeps the first's late write out.
/// On Redis: changing the system clock of three machines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_clock_jumps_and_the_fencing_token() {
    use coordis_client_tests::{fencing, redlock::Redlock};
    let set = coordis::ServerSet::start(5).await.unwrap();
    let storage = coordis::Server::start().await.unwrap();
    let mut store = redis::Client::open(storage.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut redlock = Redlock::new(&set.urls());
    redlock.retry_delay = Duration::from_millis(20);
    let ttl = Duration::from_secs(30);
    let urls = set.urls();
    let holds = |i: usize| get(&urls[i], "res:report");
    let a_validity = redlock.lock("res:report", "client-a", ttl).await.expect("granted");
    let token_a = next_token(&mut store).await;
    fencing::write(&mut store, "report", token_a, "from a").await.unwrap();
    // One server's clock jumps past the lease: the key is gone there only.
    set.clock(0).unwrap().jump_ms(31_000);
    assert_eq!(holds(0).await, None, "expired early on the jumped server");
    assert_eq!(holds(1).await.as_deref(), Some("client-a"));
    assert_eq!(
        redlock.lock("res:report", "client-b", ttl).await,
        None,
        "no quorum with one jump"
    );
    // Three servers' clocks jump: a quorum of them has forgotten the lock.
    set.clock(1).unwrap().jump_ms(31_000);
    set.clock(2).unwrap().jump_ms(31_000);
    let b_validity = redlock
        .lock("res:report", "client-b", ttl)
        .await
        .expect("a quorum forgot a");
    assert!(
        a_validity > Duration::from_secs(20),
        "client-a still believes it holds the lock"
    );
    assert!(b_validity > Duration::from_secs(20));
    let token_b = next_token(&mut store).await;
    fencing::write(&mut store, "report", token_b, "from b").await.unwrap();
    // Both hold it; the fence refuses the older token.
    let stale = fencing::write(&mut store, "report", token_a, "late a")
        .await
        .unwrap_err();
    assert_eq!(stale.code(), Some("STALE"), "{stale:?}");
    set.shutdown().await;
    storage.shutdown().await;
}

// Heartbeat leader election when the leader's connection hangs (a fault
// rule holds every command of the client named pod-a): its renewals go
// unanswered, it steps down at the first one that does not answer in
// time, and the standby takes over once the lease has run out, within
// ttl + interval, all on the frozen test clock. On Redis: a network
// partition and a real wait of the lease.
on_every_backend!(
    a_hanging_leader_is_replaced_within_ttl_plus_interval,
    |backend: &Backend| {
        use coordis::{FaultAction, FaultRule};
        use coordis_client_tests::leader::{Elector, Role};
        let control = backend.test_control();
        let client = backend.client();
        async move {
            let Some(control) = control else { return };
            let clock = control.clock().expect("a test clock");
            clock.freeze();
            let (ttl, interval) = (Duration::from_secs(3), Duration::from_secs(1));
            let answer_within = Duration::from_millis(50);
            let mut a_conn = client.get_multiplexed_async_connection().await.unwrap();
            let mut b_conn = client.get_multiplexed_async_connection().await.unwrap();
            redis::cmd("CLIENT")
                .arg("SETNAME")
                .arg("pod-a")
                .query_async::<()>(&mut a_conn)
                .await
                .unwrap();
            let a = Elector::new("leader", "pod-a", ttl);
            let b = Elector::new("leader", "pod-b", ttl);
            assert_eq!(a.tick_within(&mut a_conn, answer_within).await, Role::Leader);
            assert_eq!(b.tick_within(&mut b_conn, answer_within).await, Role::Follower);
            control.add_fault(FaultRule::new(FaultAction::Hang).client("pod-a"));
            let mut elapsed = Duration::ZERO;
            let mut stepped_down = None;
            let takeover = loop {
                clock.advance(interval);
                elapsed += interval;
                if a.tick_within(&mut a_conn, answer_within).await == Role::Follower && stepped_down.is_none() {
                    stepped_down = Some(elapsed);
                }
                let b_role = b.tick_within(&mut b_conn, answer_within).await;
                assert!(
                    !(a.role() == Role::Leader && b_role == Role::Leader),
                    "two leaders at {elapsed:?}"
                );
                if b_role == Role::Leader {
                    break elapsed;
                }
                assert!(elapsed <= ttl + interval, "no takeover by {elapsed:?}");
            };
            assert_eq!(
                stepped_down,
                Some(interval),
                "the old leader stepped down at its first failed renewal"
            );
            assert!(takeover <= ttl + interval, "{takeover:?}");
            println!("hanging leader: stepped down after {interval:?}, standby leader after {takeover:?} (ttl {ttl:?}, interval {interval:?})");
            control.clear_faults();
        }
    }
);

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
