//! Cluster mode's client-facing protocol against Redis 7.0.15 run with
//! `--cluster-enabled yes`: the CLUSTER commands of a single node, and the
//! slot rules (MOVED, ASK, ASKING, TRYAGAIN, CROSSSLOT, CLUSTERDOWN,
//! scripts' keys, SELECT) of a node whose nodes file names a second
//! primary. Both servers read the same nodes file, so node IDs match; each
//! server's own ports are masked. Every reply is compared byte for byte, in
//! RESP2 and RESP3.

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use coordis::testing::{RedisServer, ServerProcess, TempDir};

mod cluster_common;
use cluster_common::*;

const ME: &str = "a11ce00000000000000000000000000000000001";
const OTHER: &str = "b0b0000000000000000000000000000000000002";

fn coordis(dir: &TempDir, extra: &[&str]) -> ServerProcess {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        &cluster_port().to_string(),
    ])
    .arg("--dir")
    .arg(&dir.0)
    .args(extra);
    ServerProcess::start(cmd).unwrap()
}

/// The reply with the server's own ports (client and bus) and any node ID
/// but the two fixed ones masked.
fn masked(reply: &[u8], addr: SocketAddr, bus: u16) -> String {
    let text = String::from_utf8_lossy(reply).replace("\r\n", "\\r\\n");
    let text = text
        .replace(&bus.to_string(), "<bus>")
        .replace(&addr.port().to_string(), "<port>");
    let mut out = String::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
        if i + 40 <= bytes.len()
            && bytes[i..i + 40].iter().all(hex)
            && !text[i..].starts_with(ME)
            && !text[i..].starts_with(OTHER)
        {
            out.push_str("<id>");
            i += 40;
        } else {
            out.push(bytes[i] as char);
            i += 1;
        }
    }
    out
}

fn bus_port(addr: SocketAddr) -> u16 {
    let mut c = client(addr, false);
    let nodes = String::from_utf8_lossy(&c.command(&["CLUSTER", "NODES"]).unwrap()).into_owned();
    let at = nodes.find('@').expect("a node line");
    nodes[at + 1..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Runs `script` (one command per line, words split on spaces) on both
/// servers and returns the mismatches.
fn compare(redis: SocketAddr, ours: SocketAddr, script: &[&str], resp3: bool) -> Vec<String> {
    let (rbus, obus) = (bus_port(redis), bus_port(ours));
    let (mut r, mut o) = (client(redis, resp3), client(ours, resp3));
    let mut mismatches = vec![];
    for line in script {
        // `\ ` is a space inside a word.
        let words: Vec<String> = line
            .replace("\\ ", "\u{1}")
            .split(' ')
            .map(|w| w.replace('\u{1}', " "))
            .collect();
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        let expected = masked(&r.command(&args).unwrap(), redis, rbus);
        let actual = masked(&o.command(&args).unwrap(), ours, obus);
        if expected != actual {
            mismatches.push(format!(
                "{line} (resp3={resp3}):\n  redis:   {expected}\n  coordis: {actual}"
            ));
        }
    }
    mismatches
}

const SINGLE_NODE: &[&str] = &[
    "CLUSTER KEYSLOT foo",
    "CLUSTER KEYSLOT {user1000}.following",
    "CLUSTER KEYSLOT foo{}{bar}",
    "CLUSTER ADDSLOTS 0 5",
    "CLUSTER ADDSLOTS 5",
    "CLUSTER ADDSLOTS 7 7",
    "CLUSTER ADDSLOTS 16384",
    "CLUSTER ADDSLOTS x",
    "CLUSTER ADDSLOTSRANGE 10 20 30 40",
    "CLUSTER ADDSLOTSRANGE 50 45",
    "CLUSTER ADDSLOTSRANGE 1",
    "CLUSTER ADDSLOTSRANGE 1 2 3",
    "CLUSTER DELSLOTS 0",
    "CLUSTER DELSLOTS 0",
    "CLUSTER DELSLOTSRANGE 10 12",
    "CLUSTER NODES",
    "CLUSTER SLOTS",
    "CLUSTER SHARDS",
    "CLUSTER COUNTKEYSINSLOT 5",
    "CLUSTER COUNTKEYSINSLOT 16384",
    "CLUSTER COUNTKEYSINSLOT x",
    "CLUSTER GETKEYSINSLOT 5 10",
    "CLUSTER GETKEYSINSLOT 5 -1",
    "CLUSTER SETSLOT 5 MIGRATING abc",
    "CLUSTER SETSLOT 6 MIGRATING abc",
    "CLUSTER SETSLOT 5 IMPORTING abc",
    "CLUSTER SETSLOT 5 NODE abc",
    "CLUSTER SETSLOT 5 BOGUS",
    "CLUSTER SETSLOT 5 STABLE",
    "CLUSTER SETSLOT 99999 STABLE",
    "CLUSTER SET-CONFIG-EPOCH -1",
    "CLUSTER SET-CONFIG-EPOCH 5",
    "CLUSTER SET-CONFIG-EPOCH 6",
    "CLUSTER BUMPEPOCH",
    "CLUSTER INFO",
    "CLUSTER LINKS",
    "CLUSTER FORGET abc",
    "CLUSTER COUNT-FAILURE-REPORTS abc",
    "CLUSTER REPLICAS abc",
    "CLUSTER RESET BOGUS",
    "CLUSTER FAILOVER BOGUS",
    "CLUSTER FAILOVER",
    "CLUSTER MEET 127.0.0.1 x",
    "CLUSTER MEET 127.0.0.1 1 x",
    "CLUSTER HELP",
    "CLUSTER BOGUS",
    "CLUSTER FLUSHSLOTS",
    "CLUSTER NODES",
    "READONLY",
    "READWRITE",
    "ASKING",
    "SELECT 0",
    "SELECT 1",
    "SELECT x",
    "SWAPDB 0 1",
    "MOVE foo 1",
    "SET foo bar",
    "GET foo",
];

#[test]
fn single_node_commands_match_redis() {
    let bus = cluster_port().to_string();
    let Some(redis) = RedisServer::start(&["--cluster-enabled", "yes", "--cluster-port", &bus]).unwrap() else {
        return;
    };
    let dir = TempDir::new("cluster-single");
    let ours = coordis(&dir, &[]);
    let mut mismatches = compare(redis.addr(), ours.addr(), SINGLE_NODE, false);
    // The whole range, then the keyed rules once both are `ok`.
    for resp3 in [false, true] {
        let setup = if resp3 {
            &[][..]
        } else {
            &["CLUSTER ADDSLOTSRANGE 0 16383"][..]
        };
        mismatches.extend(compare(redis.addr(), ours.addr(), setup, resp3));
        wait_ok(redis.addr());
        wait_ok(ours.addr());
        mismatches.extend(compare(
            redis.addr(),
            ours.addr(),
            &[
                "CLUSTER SLOTS",
                "CLUSTER SHARDS",
                "CLUSTER NODES",
                "CLUSTER INFO",
                "SET foo bar",
                "MSET a 1 b 2",
                "MSET {a}1 x {a}2 y",
                "CLUSTER COUNTKEYSINSLOT 15495",
                // One key: Redis lists a slot's keys newest first, coordis in its
                // table's order.
                "CLUSTER GETKEYSINSLOT 12182 5",
                "CLUSTER FLUSHSLOTS",
                "CLUSTER RESET",
                "MULTI",
                "SET {a}1 z",
                "SET b 1",
                "EXEC",
                "EVAL return\\ 1 2 a b",
                // Undeclared keys of two slots: allowed without a shebang
                // (compatibility mode) or with allow-cross-slot-keys.
                "EVAL redis.call('set','x',1)\\ return\\ redis.call('set','y',2) 0",
                "EVAL #!lua\nredis.call('set','x',1)\\ return\\ redis.call('set','y',2) 0",
                "EVAL #!lua\\ flags=allow-cross-slot-keys\nredis.call('set','x',1)\\ return\\ redis.call('set','y',2) 0",
                "EVAL #!lua\\ flags=no-cluster\nreturn\\ 1 0",
                "EVAL_RO #!lua\\ flags=no-cluster\nreturn\\ 1 0",
                "FUNCTION LOAD #!lua\\ name=cl\nredis.register_function{function_name='nc',callback=function()\\ return\\ 1\\ end,flags={'no-cluster'}}\nredis.register_function{function_name='xs',callback=function()\\ redis.call('set','x',1)\\ return\\ redis.call('set','y',2)\\ end,flags={'allow-cross-slot-keys'}}\nredis.register_function('one',function()\\ redis.call('set','x',1)\\ return\\ redis.call('set','y',2)\\ end)",
                "FCALL nc 0",
                "FCALL_RO nc 0",
                "FCALL xs 0",
                "FCALL one 0",
                "FUNCTION FLUSH",
                "DEL x y",
                "DEL foo {a}1 {a}2",
            ],
            resp3,
        ));
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// A slot left uncovered (CLUSTER DELSLOTS) fails the cluster under
/// `cluster-require-full-coverage yes`: keys meet `-CLUSTERDOWN`; reads go
/// on under `cluster-allow-reads-when-down yes`; without full coverage the
/// other slots are served and the uncovered one is "not served"; covered
/// again, its keys are back. Both servers, byte for byte.
#[test]
fn an_uncovered_slot_fails_the_cluster_as_redis() {
    let bus = cluster_port().to_string();
    let Some(redis) = RedisServer::start(&["--cluster-enabled", "yes", "--cluster-port", &bus]).unwrap() else {
        return;
    };
    let dir = TempDir::new("cluster-uncovered");
    let ours = coordis(&dir, &[]);
    let (r, o) = (redis.addr(), ours.addr());
    // foo is in slot 12182, a in 15495.
    let mut mismatches = compare(r, o, &["CLUSTER ADDSLOTSRANGE 0 16383"], false);
    wait_ok(r);
    wait_ok(o);
    mismatches.extend(compare(
        r,
        o,
        &["SET foo bar", "SET a 1", "CLUSTER DELSLOTS 12182"],
        false,
    ));
    wait_state(r, "fail");
    wait_state(o, "fail");
    for resp3 in [false, true] {
        mismatches.extend(compare(
            r,
            o,
            &[
                "GET foo",
                "GET a",
                "SET a 2",
                "CLUSTER INFO",
                "CLUSTER COUNTKEYSINSLOT 12182",
            ],
            resp3,
        ));
    }
    mismatches.extend(compare(
        r,
        o,
        &[
            "CONFIG SET cluster-allow-reads-when-down yes",
            "GET a",
            "GET foo",
            "SET a 3",
            "MGET a foo",
            "CONFIG SET cluster-allow-reads-when-down no",
            "CONFIG SET cluster-require-full-coverage no",
        ],
        false,
    ));
    wait_ok(r);
    wait_ok(o);
    for resp3 in [false, true] {
        mismatches.extend(compare(
            r,
            o,
            &["GET foo", "GET a", "SET a 4", "SET foo baz", "CLUSTER INFO"],
            resp3,
        ));
    }
    mismatches.extend(compare(r, o, &["CLUSTER ADDSLOTS 12182", "GET foo"], false));
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// A nodes file where this node serves slots 0-8000 and another primary
/// (never reachable) 8001-16383.
fn two_primaries(dir: &TempDir, other_port: u16) {
    let text = format!(
        "{ME} 127.0.0.1:1@2 myself,master - 0 0 1 connected 0-8000\n\
         {OTHER} 127.0.0.1:{other_port}@{} master - 0 0 2 connected 8001-16383\n\
         vars currentEpoch 2 lastVoteEpoch 0\n",
        other_port + 1
    );
    std::fs::write(dir.0.join("nodes.conf"), text).unwrap();
}

/// NODES, SHARDS and INFO are left out here: Redis lists nodes in its
/// hash table's order and counts the PINGs it tries on the bus.
const TWO_PRIMARIES: &[&str] = &[
    "GET foo",
    "GET bar",
    "SET {bar}1 v",
    "CLUSTER SETSLOT 5061 MIGRATING b0b0000000000000000000000000000000000002",
    "GET {bar}1",
    "GET {bar}2",
    "SET {bar}2 w",
    "MGET {bar}1 {bar}2",
    "MGET {bar}2 {bar}3",
    "CLUSTER SETSLOT 5061 STABLE",
    "CLUSTER SETSLOT 12182 IMPORTING b0b0000000000000000000000000000000000002",
    "GET foo",
    "ASKING",
    "GET foo",
    "GET foo",
    "ASKING",
    "MGET {foo}a {foo}b",
    "ASKING",
    "MULTI",
    "GET foo",
    "EXEC",
    "MULTI",
    "GET {bar}1",
    "GET x",
    "EXEC",
    "MULTI",
    "GET {bar}1",
    "GET foo",
    "EXEC",
    "EVAL return\\ redis.call('get','foo') 0",
    "EVAL return\\ redis.call('get',KEYS[1]) 1 foo",
    "EVAL return\\ redis.call('get','{bar}1') 1 a",
    "EVAL return\\ redis.call('get','{bar}1') 1 {bar}2",
    "EVAL return\\ redis.call('get','{bar}1') 0",
    "CLUSTER SETSLOT 12182 STABLE",
    "CLUSTER SETSLOT 100 NODE b0b0000000000000000000000000000000000002",
    "CLUSTER SETSLOT 5061 NODE b0b0000000000000000000000000000000000002",
    "GET {bar}1",
    "CLUSTER SLOTS",
    "CLUSTER COUNT-FAILURE-REPORTS b0b0000000000000000000000000000000000002",
    "CLUSTER FORGET b0b0000000000000000000000000000000000002",
    "GET foo",
];

#[test]
fn slot_rules_with_a_second_primary_match_redis() {
    // The other primary's ports stay bound (and silent) for the whole
    // test: no other test's node may take them and answer for it.
    let (other, _held) = loop {
        let port = cluster_port();
        let held = (
            std::net::TcpListener::bind(("127.0.0.1", port)),
            std::net::TcpListener::bind(("127.0.0.1", port + 1)),
        );
        if let (Ok(a), Ok(b)) = held {
            break (port, (a, b));
        }
    };
    let redis_dir = TempDir::new("cluster-redis-two");
    two_primaries(&redis_dir, other);
    let bus = cluster_port().to_string();
    let redis_dir_text = redis_dir.0.to_string_lossy().into_owned();
    let Some(redis) = RedisServer::start(&[
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        &bus,
        "--dir",
        &redis_dir_text,
    ])
    .unwrap() else {
        return;
    };
    let dir = TempDir::new("cluster-two");
    two_primaries(&dir, other);
    let ours = coordis(&dir, &[]);
    wait_ok(redis.addr());
    wait_ok(ours.addr());
    let mut mismatches = vec![];
    for resp3 in [false, true] {
        // After the first run slot 5061 is still this node's (SETSLOT NODE
        // was refused: its keys are here) and foo's the other node's.
        let script: Vec<&str> = if resp3 {
            vec![
                "GET {bar}1",
                "CLUSTER COUNTKEYSINSLOT 5061",
                "CLUSTER SLOTS",
                "MGET a b",
                "GET bar",
            ]
        } else {
            TWO_PRIMARIES.to_vec()
        };
        mismatches.extend(compare(redis.addr(), ours.addr(), &script, resp3));
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn the_nodes_file_survives_a_restart_and_is_locked() {
    let dir = TempDir::new("cluster-restart");
    let mut first = coordis(&dir, &[]);
    let mut c = client(first.addr(), false);
    c.command(&["CLUSTER", "ADDSLOTSRANGE", "0", "99", "200", "200"])
        .unwrap();
    c.command(&["CLUSTER", "SET-CONFIG-EPOCH", "7"]).unwrap();
    let id = c.command(&["CLUSTER", "MYID"]).unwrap();
    let written = std::fs::read_to_string(dir.0.join("nodes.conf")).unwrap();
    assert!(written.ends_with("vars currentEpoch 7 lastVoteEpoch 0\n"), "{written}");
    assert!(
        written.contains(" myself,master - 0 0 7 connected 0-99 200\n"),
        "{written}"
    );
    // A second node on the same file refuses to start.
    let mut second = Command::new(BIN);
    second
        .args([
            "--cluster-enabled",
            "yes",
            "--port",
            &cluster_port().to_string(),
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(&dir.0);
    let out = second.output().unwrap();
    assert!(!out.status.success(), "a second node started on a locked nodes file");
    first.terminate(Duration::from_secs(5)).unwrap();
    let again = coordis(&dir, &[]);
    let mut c = client(again.addr(), false);
    assert_eq!(c.command(&["CLUSTER", "MYID"]).unwrap(), id);
    let info = String::from_utf8_lossy(&c.command(&["CLUSTER", "INFO"]).unwrap()).into_owned();
    assert!(info.contains("cluster_slots_assigned:101\r\n"), "{info}");
    assert!(info.contains("cluster_current_epoch:7\r\n"), "{info}");
}

#[test]
fn standalone_still_refuses_cluster_commands() {
    let dir = TempDir::new("cluster-off");
    let mut cmd = Command::new(BIN);
    cmd.arg("--dir").arg(&dir.0);
    let server = ServerProcess::start(cmd).unwrap();
    let mut c = client(server.addr(), false);
    for args in [
        &["CLUSTER", "INFO"][..],
        &["READONLY"],
        &["ASKING"],
        &["CLUSTER", "KEYSLOT", "a"],
    ] {
        assert_eq!(
            c.command(args).unwrap(),
            b"-ERR This instance has cluster support disabled\r\n"
        );
    }
    assert_eq!(c.command(&["SELECT", "1"]).unwrap(), b"+OK\r\n");
}

#[test]
fn three_coordis_nodes_form_a_cluster_with_redis_cli() {
    let nodes: Vec<Node> = (0..3).map(|i| node(BIN, &format!("bus-ours-{i}"))).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    let Some(out) = create(&refs) else {
        return;
    };
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    assert_formed(&refs);
    // redis-cli gives the last third of the slots (foo's 12182) to the
    // third node: the others send clients there.
    for n in &nodes[..2] {
        assert_eq!(
            n.command(&["GET", "foo"]),
            format!("-MOVED 12182 127.0.0.1:{}\r\n", nodes[2].port)
        );
    }
    assert_eq!(nodes[2].command(&["GET", "foo"]), "$-1\r\n");
    // PUBLISH reaches a subscriber of another node.
    let mut sub = client(nodes[2].addr(), false);
    sub.command(&["SUBSCRIBE", "news"]).unwrap();
    let published = nodes[0].command(&["PUBLISH", "news", "hello"]);
    let got = match sub.read_reply() {
        Ok(got) => String::from_utf8_lossy(&got).into_owned(),
        Err(e) => panic!(
            "{e}: PUBLISH answered {published}; {}",
            nodes[0].command(&["CLUSTER", "NODES"])
        ),
    };
    assert_eq!(got, "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    // A stopped primary is PFAIL then FAIL for the others, and the
    // cluster (a third of the slots lost) goes down.
    let mut nodes = nodes;
    let gone = nodes.pop().unwrap();
    let gone_id = gone.command(&["CLUSTER", "MYID"]);
    let gone_id = gone_id.lines().nth(1).unwrap().to_string();
    drop(gone);
    let start = Instant::now();
    loop {
        let view = nodes[0].command(&["CLUSTER", "NODES"]);
        let line = view.lines().find(|l| l.starts_with(&gone_id)).unwrap().to_string();
        if line.contains("master,fail ") {
            break;
        }
        assert!(start.elapsed() < STATE_WAIT, "never marked failing: {line}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        nodes[1].command(&["CLUSTER", "INFO"]).contains("cluster_state:fail") || {
            std::thread::sleep(Duration::from_millis(500));
            nodes[1].command(&["CLUSTER", "INFO"]).contains("cluster_state:fail")
        }
    );
}

#[test]
fn a_mixed_cluster_of_coordis_and_redis_agrees_on_slots() {
    if Command::new("redis-server").arg("--version").output().is_err() {
        assert!(!coordis::testing::require_redis(), "redis-server is not on PATH");
        eprintln!("\n*** SKIPPED: redis-server is not on PATH ***\n");
        return;
    }
    let a = node(BIN, "bus-mixed-a");
    let b = node("redis-server", "bus-mixed-b");
    let c = node(BIN, "bus-mixed-c");
    let d = node("redis-server", "bus-mixed-d");
    let refs = [&a, &b, &c, &d];
    let Some(out) = create(&refs) else {
        return;
    };
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    assert_formed(&refs);
    // Redirections name the owner whichever kind of node answers.
    for n in refs {
        let reply = n.command(&["SET", "foo", "bar"]);
        assert!(
            reply == "+OK\r\n" || reply.starts_with("-MOVED 12182 127.0.0.1:"),
            "{reply}"
        );
    }
}
