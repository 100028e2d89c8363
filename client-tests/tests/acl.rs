//! Practice: a worker that runs as an ACL user allowed only its lock keys
//! (`~lock:*`) and the lock's commands. It acquires and releases its lock
//! (the release script's GET and DEL run as the worker too); its FLUSHALL
//! and its reads of another prefix are refused with Redis's `NOPERM`
//! texts, and ACL LOG shows both — on every backend.

use std::time::Duration;

use coordis_client_tests::backend::Backend;
use coordis_client_tests::lock::Lock;
use coordis_client_tests::on_every_backend;

const TTL: Duration = Duration::from_secs(5);
const WORKER: &str = "lock-worker";
const PASSWORD: &str = "worker-secret";

/// The worker's rules: its keys, and the commands the lock sends (SET to
/// acquire; EVALSHA for the scripts, and SCRIPT LOAD after NOSCRIPT; their GET,
/// DEL and PEXPIRE are checked against the same rules).
const RULES: &[&str] = &[
    "reset",
    "on",
    ">worker-secret",
    "~lock:*",
    "+set",
    "+get",
    "+del",
    "+pexpire",
    "+evalsha",
    "+script|load",
];

/// A field of one ACL LOG entry (a flat list of names and values).
fn field(entry: &redis::Value, name: &str) -> Option<String> {
    let redis::Value::Array(kv) = entry else { return None };
    kv.chunks(2).find_map(|pair| match (&pair[0], &pair[1]) {
        (redis::Value::BulkString(k), redis::Value::BulkString(v)) if k == name.as_bytes() => {
            Some(String::from_utf8_lossy(v).into_owned())
        }
        _ => None,
    })
}

on_every_backend!(a_worker_user_holds_its_lock_and_nothing_else, |backend: &Backend| {
    let admin_client = backend.client();
    let url = backend.url();
    async move {
        let mut admin = admin_client.get_multiplexed_async_connection().await.unwrap();
        let _: () = redis::cmd("ACL")
            .arg("LOG")
            .arg("RESET")
            .query_async(&mut admin)
            .await
            .unwrap();
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(WORKER)
            .arg(RULES)
            .query_async(&mut admin)
            .await
            .unwrap();

        // The worker connects as its user (the URL carries the credentials).
        let worker_url = url.replacen("redis://", &format!("redis://{WORKER}:{PASSWORD}@"), 1);
        let worker = redis::Client::open(worker_url).unwrap();
        let mut conn = worker.get_multiplexed_async_connection().await.unwrap();

        let lock = Lock::new("lock:acl-recipe", "worker-1");
        assert!(lock.acquire(&mut conn, TTL).await.unwrap());
        assert!(lock.extend(&mut conn, TTL).await.unwrap());
        assert!(lock.release(&mut conn).await.unwrap());

        let flush = redis::cmd("FLUSHALL").query_async::<()>(&mut conn).await.unwrap_err();
        assert_eq!(flush.code(), Some("NOPERM"));
        assert_eq!(
            flush.detail(),
            Some("this user has no permissions to run the 'flushall' command")
        );
        let other = redis::cmd("GET")
            .arg("other:1")
            .query_async::<Option<String>>(&mut conn)
            .await
            .unwrap_err();
        assert_eq!(other.code(), Some("NOPERM"));
        assert_eq!(
            other.detail(),
            Some("this user has no permissions to access one of the keys used as arguments")
        );

        // Newest first: the key, then the command.
        let log: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query_async(&mut admin).await.unwrap();
        let seen: Vec<(Option<String>, Option<String>, Option<String>)> = log
            .iter()
            .map(|e| (field(e, "reason"), field(e, "object"), field(e, "username")))
            .collect();
        let some = |s: &str| Some(s.to_string());
        assert_eq!(
            &seen[..2],
            &[
                (some("key"), some("other:1"), some(WORKER)),
                (some("command"), some("flushall"), some(WORKER)),
            ],
            "{seen:?}"
        );
        let deleted: i64 = redis::cmd("ACL")
            .arg("DELUSER")
            .arg(WORKER)
            .query_async(&mut admin)
            .await
            .unwrap();
        assert_eq!(deleted, 1);
    }
});
