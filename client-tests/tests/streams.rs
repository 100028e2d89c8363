//! Stream recipes (a consumer-group work queue with takeover, an events
//! stream read by blocking listeners), on every backend.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coordis_client_tests::backend::Backend;
use coordis_client_tests::on_every_backend;
use coordis_client_tests::streams::{EventLog, WorkQueue};
use coordis_client_tests::waiting::waiting_connection;

/// How long a pending message may sit before another consumer takes it.
const LEASE: Duration = Duration::from_millis(100);

on_every_backend!(
    a_crashed_consumers_messages_are_claimed_and_every_message_is_acked_once,
    |backend: &Backend| {
        let client = backend.client();
        async move {
            let mut admin = client.get_multiplexed_async_connection().await.unwrap();
            let queue = WorkQueue {
                key: "jobs".into(),
                group: "workers".into(),
            };
            queue.create(&mut admin).await.unwrap();
            for i in 0..300 {
                queue.push(&mut admin, &format!("job-{i}")).await.unwrap();
            }
            // The third consumer takes ten messages and dies before acking.
            let mut doomed = waiting_connection(&client).await.unwrap();
            let lost = queue.take(&mut doomed, "c3", 10, LEASE).await.unwrap();
            assert_eq!(lost.len(), 10);
            drop(doomed);
            // Two live consumers work through the rest concurrently; every
            // XACK that answers 1 is counted against its message.
            let acked: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
            let mut workers = vec![];
            for name in ["c1", "c2"] {
                let (queue, acked) = (queue.clone(), acked.clone());
                let mut conn = waiting_connection(&client).await.unwrap();
                workers.push(tokio::spawn(async move {
                    loop {
                        let batch = queue.take(&mut conn, name, 7, LEASE).await.unwrap();
                        if batch.is_empty() {
                            return;
                        }
                        for (id, fields) in batch {
                            assert_eq!(fields[0], "job");
                            if queue.ack(&mut conn, &id).await.unwrap() {
                                *acked.lock().unwrap().entry(id).or_default() += 1;
                            }
                        }
                    }
                }));
            }
            for w in workers {
                w.await.unwrap();
            }
            assert_eq!(acked.lock().unwrap().len(), 290);
            assert_eq!(
                queue.pending(&mut admin).await.unwrap(),
                10,
                "the crashed consumer's messages"
            );
            // Before the lease has run out nothing is taken over...
            assert!(queue
                .reclaim(&mut admin, "c1", Duration::from_secs(600))
                .await
                .unwrap()
                .is_empty());
            // ...after it, c1 takes all ten and acks them.
            tokio::time::sleep(LEASE + Duration::from_millis(20)).await;
            let claimed = queue.reclaim(&mut admin, "c1", LEASE).await.unwrap();
            let mut claimed_ids: Vec<&String> = claimed.iter().map(|(id, _)| id).collect();
            let mut lost_ids: Vec<&String> = lost.iter().map(|(id, _)| id).collect();
            claimed_ids.sort();
            lost_ids.sort();
            assert_eq!(claimed_ids, lost_ids);
            for (id, _) in &claimed {
                if queue.ack(&mut admin, id).await.unwrap() {
                    *acked.lock().unwrap().entry(id.clone()).or_default() += 1;
                }
                assert!(
                    !queue.ack(&mut admin, id).await.unwrap(),
                    "a second ack acknowledges nothing"
                );
            }
            let acked = acked.lock().unwrap().clone();
            assert_eq!(acked.len(), 300);
            assert!(acked.values().all(|&n| n == 1), "every message acked exactly once");
            assert_eq!(queue.pending(&mut admin).await.unwrap(), 0);
            // The group read all 300 and has no lag.
            let groups: Vec<HashMap<String, redis::Value>> = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg("jobs")
                .query_async(&mut admin)
                .await
                .unwrap();
            assert_eq!(groups[0]["entries-read"], redis::Value::Int(300));
            assert_eq!(groups[0]["lag"], redis::Value::Int(0));
        }
    }
);

on_every_backend!(
    two_blocking_listeners_see_every_event_of_a_capped_stream_in_order,
    |backend: &Backend| {
        let client = backend.client();
        async move {
            const EVENTS: usize = 3000;
            let mut producer = client.get_multiplexed_async_connection().await.unwrap();
            let log = EventLog {
                key: "events".into(),
                max_len: 1000,
            };
            let start = log.publish(&mut producer, "start").await.unwrap();
            // Each listener reports how far it has read, so the producer
            // never gets more than the cap ahead of the slower one.
            let progress: Arc<Vec<std::sync::atomic::AtomicUsize>> =
                Arc::new((0..2).map(|_| std::sync::atomic::AtomicUsize::new(0)).collect());
            let mut listeners = vec![];
            for me in 0..2 {
                let (log, start, progress) = (log.clone(), start.clone(), progress.clone());
                let mut conn = waiting_connection(&client).await.unwrap();
                listeners.push(tokio::spawn(async move {
                    let (mut after, mut seen) = (start, Vec::with_capacity(EVENTS));
                    while seen.len() < EVENTS {
                        let batch = log.listen(&mut conn, &after, Duration::from_secs(30)).await.unwrap();
                        assert!(!batch.is_empty(), "no event within 30 s");
                        for (id, fields) in batch {
                            seen.push(fields[1].parse::<usize>().unwrap());
                            after = id;
                        }
                        progress[me].store(seen.len(), std::sync::atomic::Ordering::Relaxed);
                    }
                    seen
                }));
            }
            for i in 0..EVENTS {
                while i
                    >= 500
                        + progress
                            .iter()
                            .map(|p| p.load(std::sync::atomic::Ordering::Relaxed))
                            .min()
                            .unwrap()
                {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                log.publish(&mut producer, &i.to_string()).await.unwrap();
            }
            for l in listeners {
                assert_eq!(
                    l.await.unwrap(),
                    (0..EVENTS).collect::<Vec<_>>(),
                    "every event, in order"
                );
            }
            // Trimmed by whole nodes: at least the cap, at most a node more.
            let len: usize = redis::cmd("XLEN")
                .arg("events")
                .query_async(&mut producer)
                .await
                .unwrap();
            assert!((1000..=1100).contains(&len), "{len}");
        }
    }
);
