//! Hash, list and set recipes (re-entrant lock, signalled lock, sliding
//! window, job queue), on every backend.

use std::collections::HashSet;
use std::time::Duration;

use coordis_client_tests::backend::Backend;
use coordis_client_tests::on_every_backend;
use coordis_client_tests::queues::{sliding_window, JobQueue, ReentrantLock, Release, SignalLock};
use futures_util::StreamExt;

on_every_backend!(
    reentrant_hash_lock_counts_and_publishes_its_release,
    |backend: &Backend| {
        let url = backend.url();
        async move {
            let client = redis::Client::open(url).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let mut pubsub = client.get_async_pubsub().await.unwrap();
            pubsub.subscribe("lock:rr:released").await.unwrap();
            let lease = Duration::from_secs(30);
            let a = ReentrantLock {
                key: "lock:rr".into(),
                channel: "lock:rr:released".into(),
                holder: "a:1".into(),
                lease,
            };
            let b = ReentrantLock {
                holder: "b:1".into(),
                ..a.clone()
            };
            assert_eq!(a.acquire(&mut conn).await.unwrap(), None);
            assert_eq!(a.acquire(&mut conn).await.unwrap(), None, "re-entry");
            let remaining = b.acquire(&mut conn).await.unwrap().expect("held by a");
            assert!((29_000..=30_000).contains(&remaining), "{remaining}");
            let count: i64 = redis::cmd("HGET")
                .arg("lock:rr")
                .arg("a:1")
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(count, 2);
            assert_eq!(b.release(&mut conn).await.unwrap(), Release::NotHeld);
            assert_eq!(a.release(&mut conn).await.unwrap(), Release::StillHeld);
            assert!(b.acquire(&mut conn).await.unwrap().is_some());
            assert_eq!(a.release(&mut conn).await.unwrap(), Release::Released);
            let exists: i64 = redis::cmd("EXISTS")
                .arg("lock:rr")
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(exists, 0);
            let message = tokio::time::timeout(Duration::from_secs(5), pubsub.on_message().next())
                .await
                .expect("the release is published")
                .unwrap();
            assert_eq!(message.get_payload::<String>().unwrap(), "released");
            assert_eq!(
                b.acquire(&mut conn).await.unwrap(),
                None,
                "b takes it after the release"
            );
        }
    }
);

on_every_backend!(a_signalled_release_wakes_waiters_one_at_a_time, |backend: &Backend| {
    let url = backend.url();
    async move {
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let lock = SignalLock {
            key: "lock:sig".into(),
            signal: "lock:sig:signal".into(),
        };
        let ttl = Duration::from_secs(30);
        // Five workers take the lock in turn; each waits for a token before
        // trying again, and every release hands over exactly one token.
        let mut order = vec![];
        assert!(lock.try_acquire(&mut conn, "w0", ttl).await.unwrap());
        order.push(0);
        let mut holder = 0;
        for next in 1..5 {
            assert!(!lock.try_acquire(&mut conn, &format!("w{next}"), ttl).await.unwrap());
            assert!(!lock.take_signal(&mut conn).await.unwrap(), "no token while held");
            assert!(!lock.release(&mut conn, "intruder").await.unwrap());
            assert!(lock.release(&mut conn, &format!("w{holder}")).await.unwrap());
            assert!(lock.take_signal(&mut conn).await.unwrap(), "the release left a token");
            assert!(!lock.take_signal(&mut conn).await.unwrap(), "only one");
            assert!(lock.try_acquire(&mut conn, &format!("w{next}"), ttl).await.unwrap());
            order.push(next);
            holder = next;
        }
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
    }
});

on_every_backend!(sliding_window_admits_limit_per_window, |backend: &Backend| {
    let url = backend.url();
    async move {
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let window = Duration::from_millis(1000);
        // Explicit times: the limiter is checked at the window's edges.
        let mut admitted = vec![];
        for t in [0u64, 100, 200, 300, 999, 1000, 1099, 1100, 1101, 2200] {
            admitted.push(
                sliding_window(&mut conn, "rl:user", 10_000 + t, window, 3)
                    .await
                    .unwrap(),
            );
        }
        assert_eq!(
            admitted,
            vec![true, true, true, false, false, true, false, true, false, true]
        );
        let len: i64 = redis::cmd("LLEN").arg("rl:user").query_async(&mut conn).await.unwrap();
        assert_eq!(len, 3);
    }
});

on_every_backend!(
    job_queue_runs_every_job_exactly_once_despite_a_dead_worker,
    |backend: &Backend| {
        let url = backend.url();
        async move {
            let client = redis::Client::open(url).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let queue = JobQueue { name: "q".into() };
            for i in 0..30 {
                queue
                    .enqueue(&mut conn, &format!("j{i}"), &format!("payload {i}"))
                    .await
                    .unwrap();
            }
            assert_eq!(queue.live(&mut conn).await.unwrap(), 30);
            // A worker claims three jobs and dies before finishing them.
            for _ in 0..3 {
                queue.claim(&mut conn).await.unwrap().expect("a job");
            }
            assert_eq!(queue.reap(&mut conn).await.unwrap(), 3);
            // Three workers drain the queue.
            let mut done = HashSet::new();
            let mut workers = vec![];
            for _ in 0..3 {
                let mut conn = client.get_multiplexed_async_connection().await.unwrap();
                let queue = queue.clone();
                workers.push(tokio::spawn(async move {
                    let mut mine = vec![];
                    while let Some(id) = queue.claim(&mut conn).await.unwrap() {
                        queue.complete(&mut conn, &id).await.unwrap();
                        mine.push(id);
                    }
                    mine
                }));
            }
            for w in workers {
                for id in w.await.unwrap() {
                    assert!(done.insert(id.clone()), "{id} done twice");
                }
            }
            assert_eq!(done.len(), 30, "every job done once");
            assert_eq!(queue.live(&mut conn).await.unwrap(), 0);
            assert_eq!(
                queue.job_field(&mut conn, "j0", "state").await.unwrap().as_deref(),
                Some("done")
            );
            // The jobs the dead worker had claimed ran a second time.
            let mut retried = 0;
            for i in 0..30 {
                let attempts = queue.job_field(&mut conn, &format!("j{i}"), "attempts").await.unwrap();
                if attempts.as_deref() == Some("2") {
                    retried += 1;
                }
            }
            assert_eq!(retried, 3);
        }
    }
);
