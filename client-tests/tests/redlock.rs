//! Redlock with five servers: five embedded coordis instances, and five
//! redis-server processes. Acquires with all up and with two down, fails
//! with three down; a lock held on three of five blocks a new holder.

use std::time::Duration;

use coordis_client_tests::backend::{self, Backend};
use coordis_client_tests::redlock::Redlock;

const TTL: Duration = Duration::from_millis(2000);

async fn five(kind: &str) -> Option<Vec<Backend>> {
    let mut out = vec![];
    for _ in 0..5 {
        out.push(backend::start(kind).await?);
    }
    Some(out)
}

async fn scenario(kind: &str) {
    let Some(mut servers) = five(kind).await else {
        return;
    };
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let rl = Redlock::new(&urls);
    assert_eq!(rl.quorum(), 3);

    let validity = rl.lock("res", "a", TTL).await.expect("all up: acquired");
    assert!(validity > TTL / 2 && validity < TTL);
    // Held on all five: a new holder is blocked.
    assert_eq!(rl.lock("res", "b", TTL).await, None);
    rl.unlock("res", "a").await;

    // Someone else holds the resource on three of the five servers.
    for url in &urls[..3] {
        let mut c = redis::Client::open(url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg("res2")
            .arg("other")
            .arg("PX")
            .arg(5000)
            .query_async(&mut c)
            .await
            .unwrap();
    }
    assert_eq!(rl.lock("res2", "a", TTL).await, None, "a minority cannot win");
    // The failed attempt released only its own keys.
    let mut c = redis::Client::open(urls[0].as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let holder: String = redis::cmd("GET").arg("res2").query_async(&mut c).await.unwrap();
    assert_eq!(holder, "other");

    // Two servers down: a quorum of three remains.
    for s in servers.drain(3..) {
        s.stop().await;
    }
    assert!(rl.lock("res3", "a", TTL).await.is_some(), "acquired with two down");
    rl.unlock("res3", "a").await;
    // Three down: no quorum.
    for s in servers.drain(2..) {
        s.stop().await;
    }
    assert_eq!(rl.lock("res4", "a", TTL).await, None, "three down: no quorum");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_on_five_embedded_servers() {
    scenario("embedded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_on_five_redis_servers() {
    scenario("redis").await;
}
