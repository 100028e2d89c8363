//! The watchdog keeps a long job's lock; a killed holder's lock frees within
//! one TTL. Leader election between two `coordis-pod` processes: exactly one
//! leads; after `kill -9` of the leader the other takes over within
//! ttl + interval (+ slack for a noisy machine).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use coordis_client_tests::backend::Backend;
use coordis_client_tests::lock::Lock;
use coordis_client_tests::on_every_backend;
use coordis_client_tests::watchdog::Watchdog;

on_every_backend!(watchdog_keeps_the_lock_for_a_long_job, |backend: &Backend| {
    let url = backend.url();
    async move {
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let ttl = Duration::from_millis(300);
        let lock = Lock::new("lock:job", "worker-1");
        assert!(lock.acquire(&mut conn, ttl).await.unwrap());
        let dog = Watchdog::start(client.clone(), lock.clone(), ttl);
        // The job runs 4x the TTL; the lock must be ours the whole time.
        let start = Instant::now();
        while start.elapsed() < ttl * 4 {
            assert_eq!(
                Lock::holder(&mut conn, "lock:job").await.unwrap().as_deref(),
                Some("worker-1")
            );
            assert!(!dog.is_lost());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        dog.stop();
        assert!(lock.release(&mut conn).await.unwrap());

        // A holder that dies (its task is killed, nothing released): the
        // lock frees within one TTL.
        let crashed = Lock::new("lock:job", "worker-2");
        assert!(crashed.acquire(&mut conn, ttl).await.unwrap());
        let dog = Watchdog::start(client.clone(), crashed.clone(), ttl);
        tokio::time::sleep(ttl).await;
        let killed_at = Instant::now();
        drop(dog);
        while Lock::holder(&mut conn, "lock:job").await.unwrap().is_some() {
            assert!(
                killed_at.elapsed() < ttl + Duration::from_millis(200),
                "lock not freed within one TTL"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
});

on_every_backend!(watchdog_reports_a_lost_lock, |backend: &Backend| {
    let url = backend.url();
    async move {
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let ttl = Duration::from_millis(300);
        let lock = Lock::new("lock:stolen", "worker-1");
        assert!(lock.acquire(&mut conn, ttl).await.unwrap());
        let dog = Watchdog::start(client.clone(), lock, ttl);
        // Someone deletes and re-takes the lock behind the holder's back.
        let _: () = redis::cmd("SET")
            .arg("lock:stolen")
            .arg("intruder")
            .query_async(&mut conn)
            .await
            .unwrap();
        let start = Instant::now();
        while !dog.is_lost() {
            assert!(start.elapsed() < ttl, "loss not reported");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
});

struct Pod {
    child: Child,
    port: u16,
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_pod(url: &str, name: &str, ttl_ms: u64, interval_ms: u64) -> Pod {
    let mut child = Command::new(env!("CARGO_BIN_EXE_coordis-pod"))
        .args([
            "--url",
            url,
            "--pod",
            name,
            "--ttl-ms",
            &ttl_ms.to_string(),
            "--interval-ms",
            &interval_ms.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().strip_prefix("port ").unwrap().parse().unwrap();
    Pod { child, port }
}

/// Asks a pod for its role: "leader <pod>" or "follower <pod>".
fn role(pod: &Pod) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", pod.port)).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out.trim().to_string())
}

on_every_backend!(two_pods_elect_one_leader_and_fail_over, |backend: &Backend| {
    let url = backend.url();
    async move {
        let (ttl_ms, interval_ms) = (1000u64, 200u64);
        let result = tokio::task::spawn_blocking(move || {
            let pods = vec![
                spawn_pod(&url, "pod-a", ttl_ms, interval_ms),
                spawn_pod(&url, "pod-b", ttl_ms, interval_ms),
            ];
            let client = redis::Client::open(url).unwrap();
            let mut conn = client.get_connection().unwrap();
            // Exactly one leader, and the key names it.
            let deadline = Instant::now() + Duration::from_secs(5);
            let leader = loop {
                let roles: Vec<String> = pods.iter().filter_map(role).collect();
                let leaders: Vec<&String> = roles.iter().filter(|r| r.starts_with("leader")).collect();
                if leaders.len() == 1 && roles.len() == 2 {
                    break leaders[0].strip_prefix("leader ").unwrap().to_string();
                }
                assert!(leaders.len() <= 1, "two leaders: {roles:?}");
                assert!(Instant::now() < deadline, "no leader elected: {roles:?}");
                std::thread::sleep(Duration::from_millis(50));
            };
            let named: String = redis::cmd("GET").arg("leader:svc").query(&mut conn).unwrap();
            assert_eq!(named, leader);
            // kill -9 the leader; the follower must take over.
            let (mut dead, survivor): (Vec<Pod>, Vec<Pod>) = pods
                .into_iter()
                .partition(|p| role(p).is_some_and(|r| r.ends_with(&leader)));
            dead[0].child.kill().unwrap();
            let killed = Instant::now();
            dead.clear();
            loop {
                if role(&survivor[0]).is_some_and(|r| r.starts_with("leader")) {
                    break;
                }
                assert!(killed.elapsed() < Duration::from_secs(10), "no failover");
                std::thread::sleep(Duration::from_millis(10));
            }
            killed.elapsed()
        })
        .await
        .unwrap();
        println!("leader failover took {result:?} (ttl 1000 ms, interval 200 ms)");
        // ttl + interval, plus slack for a shared 2-core machine.
        assert!(
            result <= Duration::from_millis(ttl_ms + interval_ms + 800),
            "failover took {result:?}"
        );
    }
});
