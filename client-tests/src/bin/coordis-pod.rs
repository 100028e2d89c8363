//! `coordis-pod`: one pod of the heartbeat leader election, as a separate OS
//! process. It runs the election loop against `--url` and answers "who are
//! you" on a loopback TCP port: each connection gets `leader <pod>` or
//! `follower <pod>` and is closed. The first stdout line is `port <n>`.
//!
//! coordis-pod --url redis://127.0.0.1:6379 --pod pod-1 [--ttl-ms 1000] [--interval-ms 200]

use std::time::Duration;

use coordis_client_tests::leader::{Elector, Role};
use tokio::io::AsyncWriteExt;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = arg(&args, "--url").expect("--url redis://HOST:PORT");
    let pod = arg(&args, "--pod").expect("--pod NAME");
    let ttl = Duration::from_millis(arg(&args, "--ttl-ms").map_or(1000, |v| v.parse().expect("--ttl-ms")));
    let interval =
        Duration::from_millis(arg(&args, "--interval-ms").map_or(200, |v| v.parse().expect("--interval-ms")));
    let key = arg(&args, "--key").unwrap_or_else(|| "leader:svc".into());

    let elector = Elector::new(key, pod.clone(), ttl);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    println!("port {}", listener.local_addr().expect("addr").port());
    let answering = elector.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let role = match answering.role() {
                Role::Leader => "leader",
                Role::Follower => "follower",
            };
            let _ = socket.write_all(format!("{role} {}\n", answering.pod).as_bytes()).await;
        }
    });
    let client = redis::Client::open(url).expect("url");
    let mut conn = client.get_multiplexed_async_connection().await.expect("connect");
    let mut every = tokio::time::interval(interval);
    let mut last = None;
    loop {
        every.tick().await;
        match elector.tick(&mut conn).await {
            Ok(role) => {
                if last != Some(role) {
                    eprintln!("{pod}: {role:?}");
                    last = Some(role);
                }
            }
            Err(e) => eprintln!("{pod}: heartbeat failed: {e}"),
        }
    }
}
