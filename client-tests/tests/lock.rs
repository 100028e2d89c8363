//! Practice 1: a lock released by an owner-checked Lua script, the zombie
//! holder whose lease ran out, and why GET-then-DEL is wrong — on every backend.

use std::time::Duration;

use coordis_client_tests::backend::Backend;
use coordis_client_tests::lock::Lock;
use coordis_client_tests::on_every_backend;

const TTL: Duration = Duration::from_millis(300);

on_every_backend!(lock_and_lua_unlock, |backend: &Backend| {
    let backend_url = backend.url();
    async move {
        let client = redis::Client::open(backend_url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let a = Lock::new("lock:practice1", "holder-a");
        let b = Lock::new("lock:practice1", "holder-b");
        assert!(a.acquire(&mut conn, TTL).await.unwrap());
        assert!(!b.acquire(&mut conn, TTL).await.unwrap(), "the lock is taken");
        assert!(!b.release(&mut conn).await.unwrap(), "only the owner releases");
        assert!(a.extend(&mut conn, TTL).await.unwrap());
        assert!(a.release(&mut conn).await.unwrap());
        assert!(b.acquire(&mut conn, TTL).await.unwrap(), "free again");
        assert!(b.release(&mut conn).await.unwrap());
    }
});

on_every_backend!(zombie_cannot_release_the_new_holders_lock, |backend: &Backend| {
    let backend_url = backend.url();
    async move {
        let client = redis::Client::open(backend_url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let a = Lock::new("lock:zombie", "holder-a");
        let b = Lock::new("lock:zombie", "holder-b");
        assert!(a.acquire(&mut conn, TTL).await.unwrap());
        // A stalls past its lease; B takes the lock.
        tokio::time::sleep(TTL + Duration::from_millis(150)).await;
        assert!(b.acquire(&mut conn, TTL * 10).await.unwrap());
        // A wakes up: its release and extend must do nothing.
        assert!(!a.release(&mut conn).await.unwrap());
        assert!(!a.extend(&mut conn, TTL).await.unwrap());
        assert_eq!(
            Lock::holder(&mut conn, "lock:zombie").await.unwrap().as_deref(),
            Some("holder-b")
        );
        assert!(b.release(&mut conn).await.unwrap());
    }
});

on_every_backend!(get_then_del_deletes_someone_elses_lock, |backend: &Backend| {
    let backend_url = backend.url();
    async move {
        let client = redis::Client::open(backend_url).unwrap();
        let mut conn_a = client.get_multiplexed_async_connection().await.unwrap();
        let mut conn_b = client.get_multiplexed_async_connection().await.unwrap();
        let a = Lock::new("lock:naive", "holder-a");
        let b = Lock::new("lock:naive", "holder-b");
        assert!(a.acquire(&mut conn_a, TTL).await.unwrap());
        // A checks it still holds the lock (it does), then stalls before DEL;
        // meanwhile its lease ends and B acquires.
        let a_release = tokio::spawn(async move {
            a.naive_release(&mut conn_a, TTL + Duration::from_millis(200))
                .await
                .unwrap()
        });
        tokio::time::sleep(TTL + Duration::from_millis(100)).await;
        assert!(b.acquire(&mut conn_b, TTL * 10).await.unwrap());
        assert!(a_release.await.unwrap(), "the naive DEL ran");
        assert_eq!(
            Lock::holder(&mut conn_b, "lock:naive").await.unwrap(),
            None,
            "B's lock was deleted by A"
        );
    }
});
