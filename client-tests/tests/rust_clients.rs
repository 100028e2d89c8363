//! Real Rust client libraries, unmodified, with the same assertions on
//! coordis and on Redis: `fred` (RESP3, pub/sub, Lua) and the `redis`
//! crate's client-side cache on every backend, and `rslock` (Redlock) over
//! three servers of each kind.

use std::time::Duration;

use coordis_client_tests::backend::Backend;
use coordis_client_tests::on_every_backend;
use fred::prelude::*;
use fred::types::RespVersion;

/// Long enough for a loaded CI machine; a hang fails with a message.
const PATIENCE: Duration = Duration::from_secs(30);

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {PATIENCE:?}"))
}

on_every_backend!(fred_resp3_pubsub_and_lua, |backend: &Backend| {
    let url = backend.url();
    async move {
        within("fred", async {
            let config = Config::from_url(&url).unwrap();
            let client = Builder::from_config(config.clone())
                .with_config(|c| c.version = RespVersion::RESP3)
                .build()
                .unwrap();
            client.init().await.unwrap();
            // RESP3: the handshake went through HELLO 3, and replies decode.
            let info: String = client
                .custom(
                    fred::types::CustomCommand::new_static("CLIENT", None, false),
                    vec!["INFO"],
                )
                .await
                .unwrap();
            assert!(info.contains(" resp=3"), "{info}");
            let _: () = client
                .set(
                    "lock:fred",
                    "pod-1",
                    Some(Expiration::PX(30_000)),
                    Some(SetOptions::NX),
                    false,
                )
                .await
                .unwrap();
            let held: Option<String> = client
                .set("lock:fred", "pod-2", None, Some(SetOptions::NX), false)
                .await
                .unwrap();
            assert_eq!(held, None, "NX refused");
            let owner: String = client.get("lock:fred").await.unwrap();
            assert_eq!(owner, "pod-1");
            let _: () = client
                .hset("job:1", [("state", "queued"), ("attempts", "0")])
                .await
                .unwrap();
            let job: std::collections::HashMap<String, String> = client.hgetall("job:1").await.unwrap();
            assert_eq!(job["state"], "queued");
            // Lua: EVAL, then SCRIPT LOAD and EVALSHA of the unlock script.
            let unlock = include_str!("../../scripts/lua/unlock.lua");
            let n: i64 = client.eval(unlock, vec!["lock:fred"], vec!["pod-2"]).await.unwrap();
            assert_eq!(n, 0, "not the owner");
            let sha: String = client.script_load(unlock).await.unwrap();
            let n: i64 = client.evalsha(&sha, vec!["lock:fred"], vec!["pod-1"]).await.unwrap();
            assert_eq!(n, 1, "released by its owner");
            // Pub/sub: a subscriber client gets what another publishes.
            let subscriber = Builder::from_config(config).build_subscriber_client().unwrap();
            subscriber.init().await.unwrap();
            let mut messages = subscriber.message_rx();
            subscriber.subscribe("lock:fred:released").await.unwrap();
            // The subscription may reach the server after the call returns:
            // publish until someone is listening (a message to nobody is lost).
            loop {
                let receivers: i64 = client.publish("lock:fred:released", "pod-1").await.unwrap();
                if receivers == 1 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let message = messages.recv().await.unwrap();
            assert_eq!(message.channel, "lock:fred:released");
            assert_eq!(message.value.convert::<String>().unwrap(), "pod-1");
            subscriber.quit().await.unwrap();
            client.quit().await.unwrap();
        })
        .await;
    }
});

// The `redis` crate's client-side cache (its `cache-aio` feature: a RESP3
// connection that turns CLIENT TRACKING on and drops what the server's
// invalidation pushes name), which asks nothing of the server's version
// and so runs on Redis 7.0 (redis-py's `cache_config` wants 7.4): a read
// is answered from the cache the second time, a write from another
// connection invalidates it, and the next read gets the new value.
on_every_backend!(redis_rs_client_side_cache, |backend: &Backend| {
    let url = backend.url();
    async move {
        within("redis-rs client-side cache", async {
            use redis::AsyncCommands;
            let client = redis::Client::open(format!("{url}?protocol=resp3")).unwrap();
            let config = redis::AsyncConnectionConfig::new().set_cache_config(redis::caching::CacheConfig::new());
            let mut cached = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .unwrap();
            let mut writer = redis::Client::open(url.as_str())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let stats = |c: &redis::aio::MultiplexedConnection| {
                let s = c.get_cache_statistics().expect("a caching connection");
                (s.hit, s.miss, s.invalidate)
            };
            let _: () = writer.set("csc:config", "v1").await.unwrap();
            let first: String = cached.get("csc:config").await.unwrap();
            let second: String = cached.get("csc:config").await.unwrap();
            assert_eq!((first.as_str(), second.as_str()), ("v1", "v1"));
            assert_eq!(stats(&cached), (1, 1, 0), "the second read came from the cache");
            let _: () = writer.set("csc:config", "v2").await.unwrap();
            // The invalidation is a push on the cached connection: it may
            // arrive after the writer's reply.
            while stats(&cached).2 == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let third: String = cached.get("csc:config").await.unwrap();
            assert_eq!(third, "v2", "the invalidated entry is read again");
            assert_eq!(stats(&cached), (1, 2, 1));
            let fourth: String = cached.get("csc:config").await.unwrap();
            assert_eq!(fourth, "v2");
            assert_eq!(stats(&cached), (2, 2, 1), "cached again");
        })
        .await;
    }
});

/// rslock's Redlock over three servers: a lock, a second client refused, an
/// extension, a release that frees it for the second client.
async fn rslock_session(urls: Vec<String>) {
    use rslock::LockManager;
    within("rslock", async {
        let a = LockManager::new(urls.clone());
        let b = LockManager::new(urls);
        let lock = a.lock("report", Duration::from_secs(10)).await.expect("the first lock");
        assert!(lock.validity_time > 9_000, "{}", lock.validity_time);
        assert!(b.lock("report", Duration::from_secs(10)).await.is_err(), "held by a");
        let lock = a
            .extend(&lock, Duration::from_secs(20))
            .await
            .expect("extended by its holder");
        assert!(lock.validity_time > 19_000, "{}", lock.validity_time);
        a.unlock(&lock).await;
        let again = b
            .lock("report", Duration::from_secs(10))
            .await
            .expect("free after the release");
        b.unlock(&again).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_over_three_embedded_servers() {
    let set = coordis::ServerSet::start(3).await.unwrap();
    rslock_session(set.urls()).await;
    set.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_over_three_redis_servers() {
    let mut servers = vec![];
    for _ in 0..3 {
        match coordis::testing::RedisServer::start(&[]).unwrap() {
            Some(s) => servers.push(s),
            None => return,
        }
    }
    rslock_session(servers.iter().map(|s| format!("redis://{}", s.addr())).collect()).await;
}
