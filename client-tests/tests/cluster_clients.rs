//! Cluster clients, unmodified, with the same assertions on a coordis
//! cluster (`ServerSet::cluster(3, 0)`, in this process) and on three
//! redis-server nodes joined by `redis-cli --cluster create` (skipped loudly
//! without redis-server, mandatory under COORDIS_REQUIRE_REDIS=1): the redis
//! crate's cluster-async client (a lock, a `{queue}` queue) and fred in
//! cluster mode (a lock, pub/sub across nodes).

use coordis_client_tests::cluster::on_both;
use fred::prelude::*;

const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_crate_cluster_async_lock_and_queue() {
    on_both(|backend, nodes| async move {
        let urls: Vec<String> = nodes.iter().map(|(h, p)| format!("redis://{h}:{p}")).collect();
        let client = redis::cluster::ClusterClient::new(urls).unwrap();
        let mut conn = client.get_async_connection().await.unwrap();
        let release = redis::Script::new(RELEASE);
        for key in ["lock:a", "lock:b", "lock:c", "lock:d"] {
            let got: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg("pod-1")
                .arg("NX")
                .arg("PX")
                .arg(30_000)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(got.as_deref(), Some("OK"), "{backend}");
            let again: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg("pod-2")
                .arg("NX")
                .arg("PX")
                .arg(30_000)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(again, None, "{backend}");
            let wrong: i64 = release.key(key).arg("pod-2").invoke_async(&mut conn).await.unwrap();
            let right: i64 = release.key(key).arg("pod-1").invoke_async(&mut conn).await.unwrap();
            assert_eq!((wrong, right), (0, 1), "{backend}");
        }
        let (jobs, done) = ("{queue}:jobs", "{queue}:done");
        for i in 0..5 {
            let _: i64 = redis::cmd("LPUSH")
                .arg(jobs)
                .arg(format!("job{i}"))
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        for i in 0..5 {
            let moved: String = redis::cmd("LMOVE")
                .arg(jobs)
                .arg(done)
                .arg("RIGHT")
                .arg("LEFT")
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(moved, format!("job{i}"), "{backend}");
        }
        let len: i64 = redis::cmd("LLEN").arg(done).query_async(&mut conn).await.unwrap();
        assert_eq!(len, 5, "{backend}");
        let crossed: redis::RedisResult<()> = redis::cmd("RENAME")
            .arg(done)
            .arg("{other}:done")
            .query_async(&mut conn)
            .await;
        let err = crossed.expect_err("keys of two slots");
        assert!(
            err.to_string().contains("Keys in request don't hash to the same slot"),
            "{backend}: {err}"
        );
    })
    .await;
}

fn fred_config(nodes: &[(String, u16)]) -> Config {
    Config {
        server: ServerConfig::Clustered {
            hosts: nodes.iter().map(|(h, p)| Server::new(h.as_str(), *p)).collect(),
            policy: Default::default(),
        },
        ..Config::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_clustered_lock_and_pubsub() {
    on_both(|backend, nodes| async move {
        let client = Builder::from_config(fred_config(&nodes)).build().unwrap();
        client.init().await.unwrap();
        for key in ["lock:a", "lock:b", "lock:c", "lock:d"] {
            let got: Option<String> = client
                .set(key, "pod-1", Some(Expiration::PX(30_000)), Some(SetOptions::NX), false)
                .await
                .unwrap();
            assert_eq!(got.as_deref(), Some("OK"), "{backend}");
            let again: Option<String> = client
                .set(key, "pod-2", Some(Expiration::PX(30_000)), Some(SetOptions::NX), false)
                .await
                .unwrap();
            assert_eq!(again, None, "{backend}");
            let freed: i64 = client.eval(RELEASE, vec![key], vec!["pod-1"]).await.unwrap();
            assert_eq!(freed, 1, "{backend}");
        }
        // A subscriber on one node hears a message published on another:
        // the bus carries PUBLISH to every node.
        let (host, port) = nodes[0].clone();
        let sub = Builder::from_config(Config {
            server: ServerConfig::new_centralized(host.as_str(), port),
            ..Config::default()
        })
        .build_subscriber_client()
        .unwrap();
        sub.init().await.unwrap();
        let mut rx = sub.message_rx();
        sub.subscribe("events").await.unwrap();
        let (host, port) = nodes[2].clone();
        let publisher = Builder::from_config(Config {
            server: ServerConfig::new_centralized(host.as_str(), port),
            ..Config::default()
        })
        .build()
        .unwrap();
        publisher.init().await.unwrap();
        let _: i64 = publisher.publish("events", "done").await.unwrap();
        let message = rx.recv().await.unwrap();
        assert_eq!(message.channel.to_string(), "events", "{backend}");
        assert_eq!(message.value.as_string().as_deref(), Some("done"), "{backend}");
        client.quit().await.unwrap();
        sub.quit().await.unwrap();
        publisher.quit().await.unwrap();
    })
    .await;
}
