//! The embedding API and server-level behaviour, through the `redis` crate.

use std::time::Duration;

use coordis::testing::RawClient;
use redis::AsyncCommands;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_start_url_and_shutdown() {
    let server = coordis::Server::start().await.unwrap();
    assert!(server.url().starts_with("redis://127.0.0.1:"));
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = conn.set_ex("lock", "pod-1", 30).await.unwrap();
    let owner: String = conn.get("lock").await.unwrap();
    assert_eq!(owner, "pod-1");
    let ttl: i64 = conn.ttl("lock").await.unwrap();
    assert!((29..=30).contains(&ttl));
    let addr = server.addr();
    server.shutdown().await;
    // The port is released and nothing answers any more.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[test]
fn blocking_server_drop_stops_it() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let addr = server.addr();
    let mut c = RawClient::connect(addr).unwrap();
    assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n");
    drop(server);
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[test]
fn shutdown_closes_open_connections() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["SET", "a", "1"]).unwrap(), b"+OK\r\n");
    server.shutdown();
    assert!(c.command(&["GET", "a"]).is_err());
}

/// A client's SHUTDOWN stops an embedded server whose handle the test still
/// holds: its port refuses the next client at once, as a Redis that exited
/// (before, the socket stayed open with the handle, and a client that
/// connected was accepted by the kernel and never answered).
#[test]
fn after_a_clients_shutdown_the_port_refuses_connections() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let addr = server.addr();
    let mut c = RawClient::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.send(&RawClient::encode(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
    assert_eq!(c.read_to_close().unwrap(), b"", "no reply: the server stopped");
    // (Unclosed, the socket accepted connections into its backlog for
    // seconds, until the backlog was full.)
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
        assert!(std::time::Instant::now() < deadline, "the port still accepts");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(server);
}

#[test]
fn a_connection_that_never_sent_a_request_is_listed_and_closed_at_shutdown() {
    use std::io::Read;
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut silent = std::net::TcpStream::connect(server.addr()).unwrap();
    // Wait until the server has accepted it: another client sees two connections.
    let mut c = RawClient::connect(server.addr()).unwrap();
    let mut accepted = false;
    for _ in 0..500 {
        let info = c.command(&["INFO", "clients"]).unwrap();
        if String::from_utf8_lossy(&info).contains("connected_clients:2\r\n") {
            accepted = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(accepted, "the silent connection was never accepted");
    // Listed before its first command, as Redis lists it.
    let list = String::from_utf8_lossy(&c.command(&["CLIENT", "LIST"]).unwrap()).into_owned();
    assert_eq!(list.matches("cmd=NULL").count(), 1, "{list}");
    // Shutdown closes it, rather than waiting out its 5 s drain deadline.
    let started = std::time::Instant::now();
    server.shutdown();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "shutdown took {:?}",
        started.elapsed()
    );
    silent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(silent.read(&mut byte).unwrap(), 0, "expected end of stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_incr_lose_nothing() {
    let server = coordis::Server::start().await.unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut tasks = vec![];
    for _ in 0..100 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            for _ in 0..50 {
                let _: i64 = conn.incr("counter", 1).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let total: i64 = conn.get("counter").await.unwrap();
    assert_eq!(total, 5000);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_expiry_removes_untouched_keys() {
    let server = coordis::Server::start().await.unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("SET")
            .arg(format!("lease:{i}"))
            .arg("x")
            .arg("PX")
            .arg(100)
            .ignore();
    }
    pipe.cmd("SET").arg("keeper").arg("x").ignore();
    let _: () = pipe.query_async(&mut conn).await.unwrap();
    // Nobody reads the keys; DBSIZE does not expire anything by itself, so the
    // count can only fall through active expiry.
    let mut size: i64 = 0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        size = redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap();
        if size == 1 {
            break;
        }
    }
    assert_eq!(size, 1);
    let info: String = redis::cmd("INFO").arg("stats").query_async(&mut conn).await.unwrap();
    assert!(info.contains("expired_keys:2000"), "{info}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maxclients_refuses_the_next_client() {
    let server = coordis::Server::builder().maxclients(2).start().await.unwrap();
    let addr = server.addr();
    let a = tokio::task::spawn_blocking(move || {
        let mut a = RawClient::connect(addr).unwrap();
        let mut b = RawClient::connect(addr).unwrap();
        assert_eq!(a.command(&["PING"]).unwrap(), b"+PONG\r\n");
        assert_eq!(b.command(&["PING"]).unwrap(), b"+PONG\r\n");
        let mut c = RawClient::connect(addr).unwrap();
        assert_eq!(c.read_to_close().unwrap(), b"-ERR max number of clients reached\r\n");
        drop(b);
        std::thread::sleep(Duration::from_millis(100));
        let mut d = RawClient::connect(addr).unwrap();
        assert_eq!(d.command(&["PING"]).unwrap(), b"+PONG\r\n");
        a
    })
    .await
    .unwrap();
    drop(a);
    server.shutdown().await;
}

#[test]
fn client_list_and_kill() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut a = RawClient::connect(server.addr()).unwrap();
    let mut b = RawClient::connect(server.addr()).unwrap();
    assert_eq!(b.command(&["CLIENT", "SETNAME", "victim"]).unwrap(), b"+OK\r\n");
    let id_reply = b.command(&["CLIENT", "ID"]).unwrap();
    let id = String::from_utf8_lossy(&id_reply[1..id_reply.len() - 2]).to_string();
    let list = String::from_utf8(a.command(&["CLIENT", "LIST"]).unwrap()).unwrap();
    assert!(
        list.contains(&format!("id={id} ")) && list.contains("name=victim"),
        "{list}"
    );
    assert_eq!(a.command(&["CLIENT", "KILL", "ID", &id]).unwrap(), b":1\r\n");
    assert!(b.command(&["PING"]).is_err());
    assert_eq!(a.command(&["PING"]).unwrap(), b"+PONG\r\n");
}

#[test]
fn info_sections_parse_as_redis_clients_expect() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    c.command(&["SET", "a", "1", "EX", "100"]).unwrap();
    let info = String::from_utf8(c.command(&["INFO"]).unwrap()).unwrap();
    for needle in [
        "# Server\r\nredis_version:7.0.15\r\n",
        "# Clients\r\nconnected_clients:1\r\n",
        "loading:0",
        "role:master",
        "db0:keys=1,expires=1,avg_ttl=0",
    ] {
        assert!(info.contains(needle), "missing {needle:?} in {info}");
    }
    let keyspace = String::from_utf8(c.command(&["INFO", "keyspace"]).unwrap()).unwrap();
    assert!(keyspace.contains("# Keyspace") && !keyspace.contains("# Server"));
    assert_eq!(c.command(&["INFO", "nosuchsection"]).unwrap(), b"$0\r\n\r\n");
}

#[test]
fn scan_visits_every_key_despite_concurrent_changes() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    for i in 0..300 {
        c.command(&["SET", &format!("stable:{i}"), "x"]).unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    let mut round = 0;
    loop {
        // Churn: add and delete other keys between pages.
        c.command(&["SET", &format!("churn:{round}"), "x"]).unwrap();
        if round > 2 {
            c.command(&["DEL", &format!("churn:{}", round - 2)]).unwrap();
        }
        round += 1;
        let reply = String::from_utf8(
            c.command(&["SCAN", &cursor, "MATCH", "stable:*", "COUNT", "7"])
                .unwrap(),
        )
        .unwrap();
        let lines: Vec<&str> = reply.split("\r\n").collect();
        cursor = lines[2].to_string();
        for w in lines.windows(2) {
            if w[0].starts_with('$') && w[1].starts_with("stable:") {
                seen.insert(w[1].to_string());
            }
        }
        if cursor == "0" {
            break;
        }
        assert!(round < 1000, "scan did not terminate");
    }
    assert_eq!(seen.len(), 300);
}

#[test]
fn config_set_applies_at_runtime() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["CONFIG", "SET", "requirepass", "pw"]).unwrap(), b"+OK\r\n");
    // Connections opened after the change must authenticate; existing ones
    // keep their state, as in Redis.
    let mut d = RawClient::connect(server.addr()).unwrap();
    assert_eq!(d.command(&["PING"]).unwrap(), b"-NOAUTH Authentication required.\r\n");
    assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n");
    assert_eq!(d.command(&["AUTH", "pw"]).unwrap(), b"+OK\r\n");
    assert_eq!(
        c.command(&["CONFIG", "GET", "requirepass"]).unwrap(),
        b"*2\r\n$11\r\nrequirepass\r\n$2\r\npw\r\n"
    );
    assert_eq!(c.command(&["CONFIG", "SET", "requirepass", ""]).unwrap(), b"+OK\r\n");
}

/// `dir` from `CONFIG GET dir`.
fn config_dir(c: &mut RawClient) -> String {
    let reply = String::from_utf8(c.command(&["CONFIG", "GET", "dir"]).unwrap()).unwrap();
    reply.split("\r\n").nth(4).unwrap().to_string()
}

/// Without `Builder::dir` a server keeps its files in a temp dir of its
/// own (each server its own), which it removes once stopped; with one, the
/// directory is the caller's and stays, and the next server loads it.
#[test]
fn the_files_live_in_a_temp_dir_of_the_servers_own_or_where_the_builder_says() {
    let start = || {
        let mut builder = coordis::Server::builder();
        builder.config_mut().apply("appendonly", &["yes".into()]).unwrap();
        builder.config_mut().apply("appendfsync", &["always".into()]).unwrap();
        builder.start_blocking().unwrap()
    };
    let (one, two) = (start(), start());
    assert_ne!(one.dir(), two.dir());
    let own = one.dir().to_path_buf();
    assert!(own.starts_with(std::env::temp_dir()), "{}", own.display());
    let mut c = RawClient::connect(one.addr()).unwrap();
    assert_eq!(config_dir(&mut c), own.to_str().unwrap());
    assert_eq!(c.command(&["SET", "k", "v"]).unwrap(), b"+OK\r\n");
    assert!(own.join("appendonlydir/appendonly.aof.manifest").is_file());
    // A staged crash restarts from the files there.
    one.control().crash(None);
    let mut c = RawClient::connect(one.addr()).unwrap();
    assert_eq!(c.command(&["GET", "k"]).unwrap(), b"$1\r\nv\r\n");
    one.shutdown();
    assert!(!own.exists(), "removed once stopped");
    two.shutdown();

    let mine = std::env::temp_dir().join(format!(
        "coordis-embedding-dir-{}-{}",
        std::process::id(),
        coordis::testing::free_port().unwrap()
    ));
    std::fs::create_dir_all(&mine).unwrap();
    let start_in = || {
        let mut builder = coordis::Server::builder().dir(mine.to_str().unwrap());
        builder.config_mut().apply("appendonly", &["yes".into()]).unwrap();
        builder.config_mut().apply("appendfsync", &["always".into()]).unwrap();
        builder.start_blocking().unwrap()
    };
    let server = start_in();
    assert_eq!(server.dir(), mine.as_path());
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["SET", "kept", "1"]).unwrap(), b"+OK\r\n");
    server.shutdown();
    let kept = mine.join("appendonlydir").is_dir();
    let again = start_in();
    let mut c = RawClient::connect(again.addr()).unwrap();
    let got = c.command(&["GET", "kept"]).unwrap();
    again.shutdown();
    let _ = std::fs::remove_dir_all(&mine);
    assert!(kept, "the builder's directory stays");
    assert_eq!(got, b"$1\r\n1\r\n", "the next server loads it");
}
