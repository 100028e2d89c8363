//! The lock recipes over TLS with a client certificate, on embedded coordis
//! (`Builder::tls()`) and on `redis-server --tls-port`: the owner-checked
//! lock, the zombie holder, fencing tokens; a client without a certificate
//! is refused by both (`tls-auth-clients yes`, Redis's default).

use std::time::Duration;

use coordis_client_tests::backend::TlsBackend;
use coordis_client_tests::lock::Lock;
use coordis_client_tests::{fencing, on_every_tls_backend};

const TTL: Duration = Duration::from_millis(300);

on_every_tls_backend!(lock_and_lua_unlock_over_tls, |backend: &TlsBackend| {
    let client = backend.client(true);
    async move {
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let a = Lock::new("lock:tls", "holder-a");
        let b = Lock::new("lock:tls", "holder-b");
        assert!(a.acquire(&mut conn, TTL).await.unwrap());
        assert!(!b.acquire(&mut conn, TTL).await.unwrap(), "the lock is taken");
        assert!(!b.release(&mut conn).await.unwrap(), "only the owner releases");
        assert!(a.extend(&mut conn, TTL).await.unwrap());
        assert!(a.release(&mut conn).await.unwrap());
        assert!(b.acquire(&mut conn, TTL).await.unwrap(), "free again");
        assert!(b.release(&mut conn).await.unwrap());
    }
});

on_every_tls_backend!(zombie_cannot_release_over_tls, |backend: &TlsBackend| {
    let client = backend.client(true);
    async move {
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let a = Lock::new("lock:tls-zombie", "holder-a");
        let b = Lock::new("lock:tls-zombie", "holder-b");
        assert!(a.acquire(&mut conn, TTL).await.unwrap());
        tokio::time::sleep(TTL + Duration::from_millis(150)).await;
        assert!(b.acquire(&mut conn, TTL * 10).await.unwrap());
        assert!(!a.release(&mut conn).await.unwrap());
        assert!(!a.extend(&mut conn, TTL).await.unwrap());
        assert_eq!(
            Lock::holder(&mut conn, "lock:tls-zombie").await.unwrap().as_deref(),
            Some("holder-b")
        );
        assert!(b.release(&mut conn).await.unwrap());
    }
});

on_every_tls_backend!(fencing_over_tls, |backend: &TlsBackend| {
    let client = backend.client(true);
    async move {
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let ttl = Duration::from_millis(300);
        let token_a = fencing::acquire(&mut conn, "lock:tls-fenced", "a", ttl)
            .await
            .unwrap()
            .expect("A acquires");
        tokio::time::sleep(ttl + Duration::from_millis(150)).await;
        let token_b = fencing::acquire(&mut conn, "lock:tls-fenced", "b", ttl)
            .await
            .unwrap()
            .expect("B acquires");
        assert_eq!(token_b, token_a + 1);
        fencing::write(&mut conn, "tls-resource", token_b, "from-b")
            .await
            .unwrap();
        let stale = fencing::write(&mut conn, "tls-resource", token_a, "from-a")
            .await
            .unwrap_err();
        assert_eq!(stale.code(), Some("STALE"), "{stale}");
    }
});

on_every_tls_backend!(a_client_without_certificate_is_refused, |backend: &TlsBackend| {
    let client = backend.client(false);
    async move {
        let attempt = async {
            let mut conn = client.get_multiplexed_async_connection().await?;
            redis::cmd("PING").query_async::<String>(&mut conn).await
        };
        let result = tokio::time::timeout(Duration::from_secs(10), attempt)
            .await
            .expect("refused, not hung");
        assert!(result.is_err(), "served without a client certificate: {result:?}");
    }
});
