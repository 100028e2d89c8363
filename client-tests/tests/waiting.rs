//! Recipes that wait on blocking commands (fair lock, reliable queue,
//! delayed queue), on every backend.

use std::collections::HashSet;
use std::time::Duration;

use coordis_client_tests::backend::Backend;
use coordis_client_tests::on_every_backend;
use coordis_client_tests::waiting::{until_blocked, waiting_connection, DelayedQueue, FairLock, ReliableQueue};

/// Long enough for a loaded CI machine; a hang fails with a message instead.
const PATIENCE: Duration = Duration::from_secs(30);

async fn client_id(conn: &mut redis::aio::MultiplexedConnection) -> i64 {
    redis::cmd("CLIENT").arg("ID").query_async(conn).await.unwrap()
}

on_every_backend!(a_fair_lock_serves_its_waiters_in_arrival_order, |backend: &Backend| {
    let url = backend.url();
    async move {
        let client = redis::Client::open(url).unwrap();
        let mut admin = client.get_multiplexed_async_connection().await.unwrap();
        let lock = FairLock {
            key: "lock:fair".into(),
            signal: "lock:fair:signal".into(),
        };
        let lease = Duration::from_secs(30);
        assert!(lock
            .acquire(&mut admin, "holder", lease, Duration::from_secs(1))
            .await
            .unwrap());
        let mut waiters = vec![];
        for i in 0..20 {
            let mut conn = waiting_connection(&client).await.unwrap();
            let id = client_id(&mut conn).await;
            let lock = lock.clone();
            waiters.push(tokio::spawn(async move {
                let owner = format!("waiter-{i}");
                assert!(lock.acquire(&mut conn, &owner, lease, PATIENCE).await.unwrap());
                redis::cmd("RPUSH")
                    .arg("served")
                    .arg(i)
                    .query_async::<()>(&mut conn)
                    .await
                    .unwrap();
                assert!(lock.release(&mut conn, &owner).await.unwrap());
            }));
            // The next waiter arrives only once this one waits.
            until_blocked(&mut admin, id).await.unwrap();
        }
        assert!(lock.release(&mut admin, "holder").await.unwrap());
        for waiter in waiters {
            tokio::time::timeout(PATIENCE, waiter)
                .await
                .expect("every waiter is served")
                .unwrap();
        }
        let served: Vec<i64> = redis::cmd("LRANGE")
            .arg("served")
            .arg(0)
            .arg(-1)
            .query_async(&mut admin)
            .await
            .unwrap();
        assert_eq!(
            served,
            (0..20).collect::<Vec<i64>>(),
            "arrival order, none lost, none twice"
        );
    }
});

on_every_backend!(
    a_reliable_queue_does_every_job_once_despite_a_dead_worker,
    |backend: &Backend| {
        let url = backend.url();
        async move {
            let client = redis::Client::open(url).unwrap();
            let mut admin = client.get_multiplexed_async_connection().await.unwrap();
            let queue = ReliableQueue { name: "work".into() };
            let jobs: Vec<String> = (0..30).map(|i| format!("job-{i}")).collect();
            // A worker takes a job and dies before acknowledging it.
            let mut doomed = waiting_connection(&client).await.unwrap();
            queue.push(&mut admin, "job-first").await.unwrap();
            let lost = queue.take(&mut doomed, Duration::from_secs(1)).await.unwrap();
            assert_eq!(lost.as_deref(), Some("job-first"));
            drop(doomed);
            // Workers wait for jobs that are pushed while they wait.
            let run_workers = |n: usize| {
                let client = client.clone();
                let queue = queue.clone();
                async move {
                    let mut workers = vec![];
                    for _ in 0..n {
                        let mut conn = waiting_connection(&client).await.unwrap();
                        let queue = queue.clone();
                        workers.push(tokio::spawn(async move {
                            while let Some(job) = queue.take(&mut conn, Duration::from_millis(500)).await.unwrap() {
                                redis::cmd("RPUSH")
                                    .arg("done")
                                    .arg(&job)
                                    .query_async::<()>(&mut conn)
                                    .await
                                    .unwrap();
                                queue.ack(&mut conn, &job).await.unwrap();
                            }
                        }));
                    }
                    workers
                }
            };
            let workers = run_workers(3).await;
            for job in &jobs {
                queue.push(&mut admin, job).await.unwrap();
            }
            for w in workers {
                tokio::time::timeout(PATIENCE, w)
                    .await
                    .expect("workers finish")
                    .unwrap();
            }
            let processing: Vec<String> = redis::cmd("LRANGE")
                .arg(queue.processing())
                .arg(0)
                .arg(-1)
                .query_async(&mut admin)
                .await
                .unwrap();
            assert_eq!(processing, vec!["job-first".to_string()], "the dead worker's job waits");
            assert_eq!(queue.reap(&mut admin).await.unwrap(), 1);
            for w in run_workers(2).await {
                tokio::time::timeout(PATIENCE, w)
                    .await
                    .expect("workers finish")
                    .unwrap();
            }
            let done: Vec<String> = redis::cmd("LRANGE")
                .arg("done")
                .arg(0)
                .arg(-1)
                .query_async(&mut admin)
                .await
                .unwrap();
            let unique: HashSet<&String> = done.iter().collect();
            assert_eq!(done.len(), 31, "{done:?}");
            assert_eq!(unique.len(), 31, "each job once: {done:?}");
            assert!(unique.contains(&"job-first".to_string()));
            let left: i64 = redis::cmd("EXISTS")
                .arg(queue.pending())
                .arg(queue.processing())
                .query_async(&mut admin)
                .await
                .unwrap();
            assert_eq!(left, 0);
        }
    }
);

on_every_backend!(a_delayed_queue_runs_jobs_when_due_in_due_order, |backend: &Backend| {
    let url = backend.url();
    async move {
        let client = redis::Client::open(url).unwrap();
        let mut admin = client.get_multiplexed_async_connection().await.unwrap();
        let queue = DelayedQueue { key: "delayed".into() };
        // A worker waiting on the empty queue is woken by a job due now.
        let mut worker = waiting_connection(&client).await.unwrap();
        let id = client_id(&mut worker).await;
        let waiting = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.take_due(&mut worker, 5_000, PATIENCE).await.unwrap() })
        };
        until_blocked(&mut admin, id).await.unwrap();
        queue.schedule(&mut admin, "urgent", 0).await.unwrap();
        let first = tokio::time::timeout(PATIENCE, waiting).await.expect("woken").unwrap();
        assert_eq!(first.as_deref(), Some("urgent"));
        // Jobs come out in due order, and one not yet due goes back.
        for (job, due) in [("report", 3_000), ("email", 1_000), ("cleanup", 2_000)] {
            queue.schedule(&mut admin, job, due).await.unwrap();
        }
        let wait = Duration::from_millis(100);
        let now = 2_500;
        assert_eq!(
            queue.take_due(&mut admin, now, wait).await.unwrap().as_deref(),
            Some("email")
        );
        assert_eq!(
            queue.take_due(&mut admin, now, wait).await.unwrap().as_deref(),
            Some("cleanup")
        );
        assert_eq!(
            queue.take_due(&mut admin, now, wait).await.unwrap(),
            None,
            "not due yet"
        );
        let left: i64 = redis::cmd("ZCARD")
            .arg("delayed")
            .query_async(&mut admin)
            .await
            .unwrap();
        assert_eq!(left, 1, "put back");
        assert_eq!(
            queue.take_due(&mut admin, 3_000, wait).await.unwrap().as_deref(),
            Some("report")
        );
        assert_eq!(
            queue.take_due(&mut admin, 9_999, wait).await.unwrap(),
            None,
            "empty: timed out"
        );
    }
});
