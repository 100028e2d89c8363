//! FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms], against real Redis
//! 7.0.15:
//!
//! - every refusal is worded as redis-server words it, with and without a
//!   replica (the same commands sent to both, replies compared byte for byte);
//! - a coordis primary hands over to a redis-server replica, and a
//!   redis-server primary to a coordis replica: the new primary continues
//!   the old one's history with a partial resync (PSYNC2, `sync_partial_ok`),
//!   the old primary follows it, writes flow the other way;
//! - a coordis primary hands over to a coordis replica;
//! - the wait (`waiting-for-sync`) holds writes; its timeout, on the test
//!   clock, aborts it (the held write then runs), and with FORCE hands over
//!   to a replica that is behind (the held write is then refused as a
//!   replica's); FAILOVER ABORT ends the wait;
//! - a primary becoming a replica (REPLICAOF host port, or the end of a
//!   FAILOVER) unblocks its blocked clients (BLPOP, XREAD BLOCK in RESP3,
//!   WAIT) with Redis's `-UNBLOCKED ... (master -> replica?)` and closes
//!   them, as redis-server does, while a client a CLIENT PAUSE holds runs
//!   its command once the pause ends;
//! - the test-control plane's replica link faults, in Rust and over the wire
//!   (`COORDIS.REPLICATION`): a paused link holds writes (WAIT answers 0), a
//!   delayed one releases them when the test clock passes the delay, dropped
//!   writes never arrive, a cut link resyncs partially, the primary dies with
//!   or without its last writes and a replica is promoted.
//!
//! Skipped loudly without redis-server (a failure with `COORDIS_REQUIRE_REDIS=1`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coordis::testing::{RawClient, RedisServer};
use coordis::BlockingServer;

/// The tests run one at a time: two servers started at once can be given
/// the same free port (`free_port` releases it before the server binds).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long a test waits for a link or a hand-over.
const PATIENCE: Duration = Duration::from_secs(20);

/// A coordis server whose full syncs start at once.
fn coordis() -> BlockingServer {
    let mut builder = coordis::Server::builder();
    builder.config_mut().repl.diskless_sync_delay = 0;
    builder.start_blocking().unwrap()
}

/// A redis-server whose full syncs start at once; `None` without Redis.
fn redis(extra: &[&str]) -> Option<RedisServer> {
    let mut args = vec!["--repl-diskless-sync-delay", "0"];
    args.extend_from_slice(extra);
    RedisServer::start(&args).unwrap()
}

fn cmd(addr: SocketAddr, args: &[&str]) -> String {
    String::from_utf8_lossy(&RawClient::connect(addr).unwrap().command(args).unwrap()).into_owned()
}

fn info(addr: SocketAddr, field: &str) -> String {
    let body = cmd(addr, &["INFO", "replication"]);
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

fn stat(addr: SocketAddr, field: &str) -> String {
    let body = cmd(addr, &["INFO", "stats"]);
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn replicaof(replica: SocketAddr, primary: SocketAddr) {
    assert_eq!(
        cmd(replica, &["REPLICAOF", "127.0.0.1", &primary.port().to_string()]),
        "+OK\r\n"
    );
}

/// Waits until `replica` streams from `primary` and has acknowledged all of it.
fn wait_caught_up(replica: SocketAddr, primary: SocketAddr) {
    wait_for("the replica to catch up", || {
        let p = cmd(primary, &["INFO", "replication"]);
        info(replica, "master_link_status") == "up"
            && p.contains("state=online")
            && p.contains(&format!("offset={},", info(primary, "master_repl_offset")))
    });
}

/// Waits until the FAILOVER from `old` to `new` is over: `new` is a
/// primary, `old` streams from it.
fn wait_handed_over(old: SocketAddr, new: SocketAddr) {
    wait_for("the hand-over", || {
        info(new, "role") == "master"
            && info(old, "role") == "slave"
            && info(old, "master_port") == new.port().to_string()
            && info(old, "master_link_status") == "up"
            && info(old, "master_failover_state") == "no-failover"
    });
}

/// The refusals a server without replicas gives.
const WITHOUT_REPLICAS: &[&[&str]] = &[
    &["FAILOVER"],
    &["FAILOVER", "ABORT"],
    &["FAILOVER", "abort", "x"],
    &["FAILOVER", "TIMEOUT", "0"],
    &["FAILOVER", "TIMEOUT", "-5"],
    &["FAILOVER", "TIMEOUT", "x"],
    &["FAILOVER", "TIMEOUT", "10", "TIMEOUT", "10"],
    &["FAILOVER", "TIMEOUT"],
    &["FAILOVER", "TO", "h"],
    &["FAILOVER", "TO", "h", "x"],
    &["FAILOVER", "TO", "h", "1", "TO", "h", "2"],
    &["FAILOVER", "FORCE"],
    &["FAILOVER", "FORCE", "FORCE"],
    &["FAILOVER", "BOGUS"],
    &["PSYNC", "0123456789012345678901234567890123456789", "1", "FAILOVER"],
];

/// The refusals of a primary with one replica at 127.0.0.1 `port`.
fn with_a_replica(port: u16) -> Vec<Vec<String>> {
    let port = port.to_string();
    let other = (port.parse::<u32>().unwrap() + 1).to_string();
    let lines: Vec<Vec<&str>> = vec![
        vec!["FAILOVER", "FORCE"],
        vec!["FAILOVER", "FORCE", "TIMEOUT", "100"],
        vec!["FAILOVER", "TO", "127.0.0.1", &port, "FORCE"],
        vec!["FAILOVER", "TO", "127.0.0.1", &other],
        vec!["FAILOVER", "TO", "10.1.2.3", &port],
        vec!["FAILOVER", "ABORT"],
    ];
    lines
        .into_iter()
        .map(|l| l.into_iter().map(str::to_string).collect())
        .collect()
}

fn replies(addr: SocketAddr, lines: &[Vec<String>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| cmd(addr, &l.iter().map(String::as_str).collect::<Vec<_>>()))
        .collect()
}

#[test]
fn the_refusals_are_worded_as_redis_words_them() {
    let _serial = serial();
    let Some(real) = redis(&[]) else {
        return;
    };
    let ours = coordis();
    let lines: Vec<Vec<String>> = WITHOUT_REPLICAS
        .iter()
        .map(|l| l.iter().map(|w| w.to_string()).collect())
        .collect();
    assert_eq!(replies(ours.addr(), &lines), replies(real.addr(), &lines));
    assert_eq!(
        cmd(ours.addr(), &["FAILOVER"]),
        "-ERR FAILOVER requires connected replicas.\r\n"
    );

    // Each primary with a replica of the other kind.
    let Some(real_replica) = redis(&[]) else {
        return;
    };
    let our_replica = coordis();
    replicaof(real_replica.addr(), ours.addr());
    replicaof(our_replica.addr(), real.addr());
    wait_caught_up(real_replica.addr(), ours.addr());
    wait_caught_up(our_replica.addr(), real.addr());
    let ours_say = replies(ours.addr(), &with_a_replica(real_replica.addr().port()));
    let redis_says = replies(real.addr(), &with_a_replica(our_replica.addr().port()));
    assert_eq!(ours_say, redis_says);
    assert!(ours_say[3].contains("is not a replica"), "{ours_say:?}");
    // A replica refuses FAILOVER, and a PSYNC FAILOVER of another history.
    let on_replica: Vec<Vec<String>> = vec![
        vec!["FAILOVER".into()],
        vec![
            "PSYNC".into(),
            "0123456789012345678901234567890123456789".into(),
            "1".into(),
            "FAILOVER".into(),
        ],
    ];
    assert_eq!(
        replies(our_replica.addr(), &on_replica),
        replies(real_replica.addr(), &on_replica)
    );
}

/// After a hand-over from `old` to `new`: writes go to `new` and reach `old`.
fn assert_writes_flow(old: SocketAddr, new: SocketAddr) {
    assert_eq!(cmd(new, &["SET", "after", "1"]), "+OK\r\n");
    wait_for("the write to reach the old primary", || {
        cmd(old, &["GET", "after"]) == "$1\r\n1\r\n"
    });
    assert!(cmd(old, &["SET", "x", "1"]).starts_with("-READONLY"));
}

#[test]
fn a_coordis_primary_hands_over_to_a_redis_replica() {
    let _serial = serial();
    let primary = coordis();
    let Some(replica) = redis(&[]) else {
        return;
    };
    let (p, r) = (primary.addr(), replica.addr());
    assert_eq!(cmd(p, &["SET", "lock", "owner-1"]), "+OK\r\n");
    replicaof(r, p);
    assert_eq!(cmd(p, &["INCR", "fence"]), ":1\r\n");
    wait_caught_up(r, p);
    let replid = info(p, "master_replid");
    assert_eq!(cmd(p, &["FAILOVER"]), "+OK\r\n");
    wait_handed_over(p, r);
    assert_eq!(cmd(r, &["GET", "lock"]), "$7\r\nowner-1\r\n");
    assert_eq!(cmd(r, &["GET", "fence"]), "$1\r\n1\r\n");
    // The new primary continued our history and let us continue partially.
    assert_eq!(info(r, "master_replid2"), replid);
    assert_eq!(stat(r, "sync_partial_ok"), "1");
    assert_eq!(stat(r, "sync_full"), "0");
    assert_writes_flow(p, r);
}

#[test]
fn a_redis_primary_hands_over_to_a_coordis_replica() {
    let _serial = serial();
    let Some(primary) = redis(&[]) else {
        return;
    };
    let replica = coordis();
    let (p, r) = (primary.addr(), replica.addr());
    assert_eq!(cmd(p, &["SET", "lock", "owner-1"]), "+OK\r\n");
    replicaof(r, p);
    assert_eq!(cmd(p, &["INCR", "fence"]), ":1\r\n");
    wait_caught_up(r, p);
    let replid = info(p, "master_replid");
    assert_eq!(
        cmd(p, &["FAILOVER", "TO", "127.0.0.1", &r.port().to_string()]),
        "+OK\r\n"
    );
    wait_handed_over(p, r);
    assert_eq!(cmd(r, &["GET", "lock"]), "$7\r\nowner-1\r\n");
    assert_eq!(info(r, "master_replid2"), replid);
    // Redis asked us to continue its history: it did, without a full sync.
    assert_eq!(stat(r, "sync_partial_ok"), "1");
    assert_eq!(stat(r, "sync_full"), "0");
    assert_writes_flow(p, r);
}

#[test]
fn a_coordis_primary_hands_over_to_a_coordis_replica() {
    let _serial = serial();
    let (primary, replica) = (coordis(), coordis());
    let (p, r) = (primary.addr(), replica.addr());
    replicaof(r, p);
    assert_eq!(cmd(p, &["SET", "lock", "owner-1"]), "+OK\r\n");
    wait_caught_up(r, p);
    assert_eq!(
        cmd(
            p,
            &["FAILOVER", "TO", "127.0.0.1", &r.port().to_string(), "TIMEOUT", "10000"]
        ),
        "+OK\r\n"
    );
    wait_handed_over(p, r);
    assert_eq!(cmd(r, &["GET", "lock"]), "$7\r\nowner-1\r\n");
    assert_eq!(stat(r, "sync_partial_ok"), "1");
    assert_writes_flow(p, r);
}

/// A coordis primary with `replica` caught up on it; with `frozen`, the
/// primary's clock stands still until the test moves it.
fn linked(replica: SocketAddr, frozen: bool) -> BlockingServer {
    let primary = coordis();
    if frozen {
        primary.clock().unwrap().freeze();
    }
    replicaof(replica, primary.addr());
    wait_caught_up(replica, primary.addr());
    primary
}

/// A client whose reply has not come within `within` (a held command).
fn no_reply_within(c: &mut RawClient, within: Duration) -> bool {
    c.set_read_timeout(Some(within)).unwrap();
    let held = c.read_reply().is_err();
    c.set_read_timeout(None).unwrap();
    held
}

fn send(c: &mut RawClient, args: &[&str]) {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&RawClient::encode(&args)).unwrap();
}

fn reply(c: &mut RawClient) -> String {
    String::from_utf8_lossy(&c.read_reply().unwrap()).into_owned()
}

#[test]
fn the_wait_holds_writes_and_its_timeout_on_the_test_clock_aborts_it() {
    let _serial = serial();
    let replica = coordis();
    let primary = linked(replica.addr(), true);
    let (p, control, clock) = (primary.addr(), primary.control(), primary.clock().unwrap());
    control.pause_link(0).unwrap();
    assert_eq!(cmd(p, &["SET", "x", "1"]), "+OK\r\n");
    assert_eq!(cmd(p, &["FAILOVER", "TIMEOUT", "1000"]), "+OK\r\n");
    assert_eq!(info(p, "master_failover_state"), "waiting-for-sync");
    assert_eq!(cmd(p, &["FAILOVER"]), "-ERR FAILOVER already in progress.\r\n");
    assert_eq!(
        cmd(p, &["REPLICAOF", "NO", "ONE"]),
        "-ERR REPLICAOF not allowed while failing over.\r\n"
    );
    assert_eq!(
        cmd(p, &["PSYNC", "?", "-1"]),
        "-NOMASTERLINK Can't SYNC while failing over\r\n"
    );
    // Reads go on; a write is held.
    assert_eq!(cmd(p, &["GET", "x"]), "$1\r\n1\r\n");
    let mut writer = RawClient::connect(p).unwrap();
    send(&mut writer, &["SET", "held", "1"]);
    assert!(
        no_reply_within(&mut writer, Duration::from_millis(300)),
        "a write ran during the wait"
    );
    clock.advance(Duration::from_millis(999));
    assert_eq!(info(p, "master_failover_state"), "waiting-for-sync");
    clock.advance(Duration::from_millis(1));
    assert_eq!(info(p, "master_failover_state"), "no-failover");
    assert_eq!(
        reply(&mut writer),
        "+OK\r\n",
        "the held write runs once the wait is aborted"
    );
    assert_eq!(info(p, "role"), "master");
    // FAILOVER ABORT ends a wait too.
    assert_eq!(cmd(p, &["FAILOVER"]), "+OK\r\n");
    assert_eq!(cmd(p, &["FAILOVER", "ABORT"]), "+OK\r\n");
    assert_eq!(info(p, "master_failover_state"), "no-failover");
    assert_eq!(cmd(p, &["SET", "y", "1"]), "+OK\r\n");
}

#[test]
fn force_hands_over_to_a_replica_that_is_behind() {
    let _serial = serial();
    let replica = coordis();
    let primary = linked(replica.addr(), true);
    let (p, r) = (primary.addr(), replica.addr());
    primary.control().pause_link(0).unwrap();
    assert_eq!(cmd(p, &["SET", "unreplicated", "1"]), "+OK\r\n");
    let to = [
        "FAILOVER",
        "TO",
        "127.0.0.1",
        &r.port().to_string(),
        "FORCE",
        "TIMEOUT",
        "500",
    ];
    assert_eq!(cmd(p, &to), "+OK\r\n");
    let mut writer = RawClient::connect(p).unwrap();
    send(&mut writer, &["SET", "held", "1"]);
    assert!(no_reply_within(&mut writer, Duration::from_millis(200)));
    primary.clock().unwrap().advance(Duration::from_millis(500));
    assert_eq!(info(p, "master_failover_state"), "failover-in-progress");
    assert!(
        reply(&mut writer).starts_with("-READONLY"),
        "the held write is a replica's now"
    );
    wait_handed_over(p, r);
    // The write the replica never got is gone: the old primary resynced in full.
    assert_eq!(cmd(r, &["GET", "unreplicated"]), "$-1\r\n");
    wait_for("the old primary to take the new one's dataset", || {
        cmd(p, &["GET", "unreplicated"]) == "$-1\r\n"
    });
}

#[test]
fn a_paused_link_holds_writes_and_wait_answers_0_until_it_resumes() {
    let _serial = serial();
    let Some(replica) = redis(&[]) else {
        return;
    };
    let primary = linked(replica.addr(), false);
    let (p, r, control) = (primary.addr(), replica.addr(), primary.control());
    control.pause_link(0).unwrap();
    let links = control.replica_links();
    assert_eq!((links.len(), links[0].paused, links[0].port), (1, true, r.port()));
    let mut c = RawClient::connect(p).unwrap();
    assert_eq!(reply_to(&mut c, &["SET", "lock", "a", "NX", "PX", "30000"]), "+OK\r\n");
    assert_eq!(reply_to(&mut c, &["WAIT", "1", "100"]), ":0\r\n");
    assert_eq!(cmd(r, &["GET", "lock"]), "$-1\r\n");
    control.resume_link(0).unwrap();
    assert_eq!(reply_to(&mut c, &["WAIT", "1", "5000"]), ":1\r\n");
    assert_eq!(cmd(r, &["GET", "lock"]), "$1\r\na\r\n");
    assert_eq!(
        control.pause_link(1),
        Err("ERR no replica link with that index (COORDIS.REPLICATION LINKS lists them)".into())
    );
}

fn reply_to(c: &mut RawClient, args: &[&str]) -> String {
    String::from_utf8_lossy(&c.command(args).unwrap()).into_owned()
}

#[test]
fn a_delayed_link_writes_when_the_test_clock_passes_the_delay() {
    let _serial = serial();
    let replica = coordis();
    let primary = linked(replica.addr(), true);
    let (p, r) = (primary.addr(), replica.addr());
    // Over the wire this time.
    assert_eq!(cmd(p, &["COORDIS.REPLICATION", "DELAY", "0", "500"]), "+OK\r\n");
    assert_eq!(cmd(p, &["SET", "k", "v"]), "+OK\r\n");
    std::thread::sleep(Duration::from_millis(200));
    let clock = primary.clock().unwrap();
    clock.advance(Duration::from_millis(499));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(cmd(r, &["GET", "k"]), "$-1\r\n", "the write left before its delay");
    clock.advance(Duration::from_millis(1));
    wait_for("the delayed write", || cmd(r, &["GET", "k"]) == "$1\r\nv\r\n");
    assert!(cmd(p, &["COORDIS.REPLICATION", "LINKS"]).contains(":500\r\n"));
    assert_eq!(cmd(p, &["COORDIS.REPLICATION", "RESUME", "0"]), "+OK\r\n");
    assert_eq!(cmd(p, &["SET", "k2", "v"]), "+OK\r\n");
    wait_for("the undelayed write", || cmd(r, &["GET", "k2"]) == "$1\r\nv\r\n");
}

#[test]
fn dropped_writes_never_arrive_and_a_cut_link_resyncs_partially() {
    let _serial = serial();
    let replica = coordis();
    let primary = linked(replica.addr(), false);
    let (p, r, control) = (primary.addr(), replica.addr(), primary.control());
    control.drop_writes(0, 1).unwrap();
    let mut c = RawClient::connect(p).unwrap();
    assert_eq!(reply_to(&mut c, &["SET", "lost", "1"]), "+OK\r\n");
    assert_eq!(reply_to(&mut c, &["SET", "kept", "1"]), "+OK\r\n");
    wait_for("the write after the dropped one", || {
        cmd(r, &["GET", "kept"]) == "$1\r\n1\r\n"
    });
    assert_eq!(cmd(r, &["GET", "lost"]), "$-1\r\n");
    assert_eq!(
        reply_to(&mut c, &["WAIT", "1", "1500"]),
        ":0\r\n",
        "the replica is behind for good"
    );
    let full = stat(p, "sync_full");
    control.cut_link(0).unwrap();
    assert_eq!(cmd(p, &["SET", "after-cut", "1"]), "+OK\r\n");
    wait_for("the write after the cut", || {
        cmd(r, &["GET", "after-cut"]) == "$1\r\n1\r\n"
    });
    assert_eq!(stat(p, "sync_partial_ok"), "1");
    assert_eq!(stat(p, "sync_full"), full);
}

#[test]
fn the_primary_dies_with_or_without_its_last_writes_and_a_replica_is_promoted() {
    let _serial = serial();
    for sent_last in [false, true] {
        let replica = coordis();
        let primary = linked(replica.addr(), false);
        let (p, r, control) = (primary.addr(), replica.addr(), primary.control());
        control.pause_link(0).unwrap();
        assert_eq!(cmd(p, &["SET", "lock", "owner-1", "NX", "PX", "30000"]), "+OK\r\n");
        control.primary_dies(sent_last);
        assert!(
            RawClient::connect(p).unwrap().command(&["PING"]).is_err(),
            "the primary still answers"
        );
        if sent_last {
            wait_for("the last write", || cmd(r, &["GET", "lock"]) == "$7\r\nowner-1\r\n");
        }
        assert_eq!(control.promote_replica(0), Ok(r));
        assert_eq!(info(r, "role"), "master");
        let second = cmd(r, &["SET", "lock", "owner-2", "NX", "PX", "30000"]);
        assert_eq!(
            second,
            if sent_last { "$-1\r\n" } else { "+OK\r\n" },
            "sent_last {sent_last}"
        );
    }
    // Over the wire: the dying primary gives no reply.
    let replica = coordis();
    let primary = linked(replica.addr(), false);
    let mut c = RawClient::connect(primary.addr()).unwrap();
    assert_eq!(reply_to(&mut c, &["COORDIS.REPLICATION", "PAUSE", "0"]), "+OK\r\n");
    assert_eq!(reply_to(&mut c, &["SET", "w", "1"]), "+OK\r\n");
    send(&mut c, &["COORDIS.REPLICATION", "DIE", "SENT"]);
    assert_eq!(c.read_to_close().unwrap(), b"");
    wait_for("the dead primary's last write", || {
        cmd(replica.addr(), &["GET", "w"]) == "$1\r\n1\r\n"
    });
}

/// What each client blocked in a command gets when its server becomes a
/// replica; then the connection closes.
const DEMOTED: &str =
    "-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n";

fn blocked_clients(addr: SocketAddr) -> String {
    let body = cmd(addr, &["INFO", "clients"]);
    body.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:").map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

/// Clients blocked on `addr` in `commands` (a RESP3 client for the ones
/// after `HELLO 3`); returns once INFO counts them all.
fn block_clients(addr: SocketAddr, commands: &[&[&str]]) -> Vec<RawClient> {
    let mut clients = Vec::new();
    for args in commands {
        let mut c = RawClient::connect(addr).unwrap();
        if args[0] == "HELLO" {
            assert!(reply_to(&mut c, &["HELLO", "3"]).starts_with('%'));
            send(&mut c, &args[2..]);
        } else {
            send(&mut c, args);
        }
        clients.push(c);
    }
    let n = commands.len().to_string();
    wait_for("the clients to block", || blocked_clients(addr) == n);
    clients
}

/// Each client's whole remaining output, up to the server closing it.
fn read_all_to_close(clients: Vec<RawClient>) -> Vec<String> {
    clients
        .into_iter()
        .map(|mut c| {
            c.set_read_timeout(Some(PATIENCE)).unwrap();
            String::from_utf8_lossy(&c.read_to_close().unwrap()).into_owned()
        })
        .collect()
}

/// REPLICAOF on a primary with clients blocked in BLPOP (RESP2), XREAD
/// BLOCK (RESP3) and WAIT: what every client reads, and what a client
/// held by CLIENT PAUSE then gets.
fn demoted_by_replicaof(addr: SocketAddr) -> (Vec<String>, String) {
    let blocked = block_clients(
        addr,
        &[
            &["BLPOP", "queue", "0"],
            &["HELLO", "3", "XREAD", "BLOCK", "0", "STREAMS", "events", "$"],
            &["WAIT", "1", "0"],
        ],
    );
    // A write held by a pause has not run: it is not unblocked, and runs
    // (as a replica's client: refused) once the pause ends.
    assert_eq!(cmd(addr, &["CLIENT", "PAUSE", "100000", "WRITE"]), "+OK\r\n");
    let mut held = RawClient::connect(addr).unwrap();
    send(&mut held, &["SET", "k", "v"]);
    wait_for("the write to be held", || blocked_clients(addr) == "4");
    let nowhere = coordis::testing::free_port().unwrap().to_string();
    assert_eq!(cmd(addr, &["REPLICAOF", "127.0.0.1", &nowhere]), "+OK\r\n");
    let got = read_all_to_close(blocked);
    assert_eq!(blocked_clients(addr), "1", "the held write is still held");
    assert_eq!(cmd(addr, &["CLIENT", "UNPAUSE"]), "+OK\r\n");
    (got, reply(&mut held))
}

#[test]
fn blocked_clients_are_unblocked_and_closed_when_their_primary_becomes_a_replica() {
    let _serial = serial();
    let Some(redis) = redis(&[]) else {
        return;
    };
    let expected = demoted_by_replicaof(redis.addr());
    assert_eq!(expected.0, vec![DEMOTED; 3], "redis-server's replies");
    let server = coordis();
    assert_eq!(demoted_by_replicaof(server.addr()), expected);
}

/// A FAILOVER from `p` to its replica `r` with clients blocked on `p`:
/// what they read.
fn demoted_by_failover(p: SocketAddr, r: SocketAddr) -> Vec<String> {
    replicaof(r, p);
    wait_caught_up(r, p);
    let blocked = block_clients(
        p,
        &[
            &["BLPOP", "queue", "0"],
            &["HELLO", "3", "XREAD", "BLOCK", "0", "STREAMS", "events", "$"],
        ],
    );
    assert_eq!(cmd(p, &["FAILOVER"]), "+OK\r\n");
    wait_handed_over(p, r);
    read_all_to_close(blocked)
}

#[test]
fn a_failover_unblocks_the_old_primarys_blocked_clients() {
    let _serial = serial();
    let (Some(rp), Some(rr)) = (redis(&[]), redis(&[])) else {
        return;
    };
    let expected = demoted_by_failover(rp.addr(), rr.addr());
    assert_eq!(expected, vec![DEMOTED; 2], "redis-server's replies");
    let (p, r) = (coordis(), coordis());
    assert_eq!(demoted_by_failover(p.addr(), r.addr()), expected);
}
