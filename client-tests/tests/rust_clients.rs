//! Real Rust client libraries, unmodified, with the same assertions on
//! coordis and on Redis: `fred` (RESP3, pub/sub, Lua) on every backend, and
//! `rslock` (Redlock) over three servers of each kind.

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
