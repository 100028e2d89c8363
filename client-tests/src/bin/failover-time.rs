//! Measures the time from "the primary dies" to a client's first write
//! on the new primary, with coordis's Sentinel on a test clock watching a
//! coordis primary and replica (Sentinel's default timers: 30 s
//! down-after-milliseconds, 180 s failover-timeout).
//!
//! ```sh
//! cargo run -p coordis-client-tests --bin failover-time -- [ROUNDS] [STEP_MS]
//! ```
//!
//! Each round starts the three in-process, lets the Sentinel find the
//! replica, then has the primary die (the test-control plane's
//! `primary_dies`) and, as a test does, advances the Sentinel's clock by
//! STEP_MS (default 1000) every few milliseconds until the Sentinel names
//! the replica and a `SET` on it answers `+OK`. Prints each round's wall
//! time and test-clock time, and the median wall time (the script
//! `scripts/failover.sh` puts it beside redis-sentinel's).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordis::testing::{RawClient, TempDir};
use coordis::Clock;

/// How often the clock is stepped, in wall time (a Sentinel reacts to
/// a moved clock within a millisecond or two; this leaves it that).
const POLL: Duration = Duration::from_millis(5);

/// How long a round may take before it is reported as failed.
const PATIENCE: Duration = Duration::from_secs(60);

fn cmd(addr: SocketAddr, args: &[&str]) -> String {
    match RawClient::connect(addr).and_then(|mut c| c.command(args)) {
        Ok(reply) => String::from_utf8_lossy(&reply).into_owned(),
        Err(e) => format!("<{e}>"),
    }
}

fn coordis() -> coordis::BlockingServer {
    let mut builder = coordis::Server::builder();
    builder.config_mut().repl.diskless_sync_delay = 0;
    builder.start_blocking().expect("start coordis")
}

fn wait(what: &str, mut step: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !step() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(POLL);
    }
}

/// One round: (wall time, test-clock time) from the death to the write.
fn round(step_ms: u64) -> (Duration, u64) {
    let (primary, replica) = (coordis(), coordis());
    let (p, r) = (primary.addr(), replica.addr());
    assert_eq!(cmd(r, &["REPLICAOF", "127.0.0.1", &p.port().to_string()]), "+OK\r\n");
    wait("the replica's link", || {
        cmd(r, &["INFO", "replication"]).contains("master_link_status:up")
    });
    let dir = TempDir::new("failover-time");
    let conf = dir.0.join("sentinel.conf");
    std::fs::write(&conf, format!("sentinel monitor mymaster 127.0.0.1 {} 1\n", p.port())).unwrap();
    let clock = Arc::new(coordis::VirtualClock::at_ms(1_700_000_000_000));
    let rt = coordis::runtime(2).expect("a runtime");
    let args: Vec<String> = vec![
        conf.display().to_string(),
        "--port".into(),
        "0".into(),
        "--bind".into(),
        "127.0.0.1".into(),
    ];
    let sentinel = rt
        .block_on(coordis::sentinel::Sentinel::start_with_clock(&args, clock.clone()))
        .expect("start the Sentinel");
    let s = sentinel.addr();
    wait("the Sentinel to find the replica", || {
        clock.advance_ms(step_ms);
        cmd(s, &["SENTINEL", "REPLICAS", "mymaster"]).contains("\r\nok\r\n")
    });
    let primary_name = format!("$5\r\n{}\r\n", p.port());
    assert!(cmd(s, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]).contains(&primary_name));
    let replica_name = format!("$5\r\n{}\r\n", r.port());

    let (started, clock_at) = (Instant::now(), clock.now_ms());
    primary.control().primary_dies(false);
    wait("the write on the new primary", || {
        clock.advance_ms(step_ms);
        cmd(s, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]).contains(&replica_name)
            && cmd(r, &["SET", "after", "failover"]) == "+OK\r\n"
    });
    let took = (started.elapsed(), clock.now_ms() - clock_at);
    rt.block_on(sentinel.shutdown());
    took
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(5, |a| a.parse().expect("ROUNDS"));
    let step_ms: u64 = args.next().map_or(1000, |a| a.parse().expect("STEP_MS"));
    let mut walls = vec![];
    for i in 0..rounds {
        let (wall, virtual_ms) = round(step_ms);
        println!(
            "round {}: {:.1} ms wall, {} ms of test clock",
            i + 1,
            wall.as_secs_f64() * 1000.0,
            virtual_ms
        );
        walls.push(wall);
    }
    walls.sort();
    println!(
        "coordis Sentinel (test clock): median {:.1} ms from the primary's death to a write on the new primary",
        walls[walls.len() / 2].as_secs_f64() * 1000.0
    );
}
