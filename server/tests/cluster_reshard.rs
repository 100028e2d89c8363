//! Resharding with `redis-cli --cluster` (reshard, rebalance, add-node,
//! del-node) against three-primary clusters of coordis nodes, of
//! redis-server nodes, and of both kinds: keys of every type (some with
//! TTLs) are written in the slots that move, and afterwards every key is
//! found through -MOVED with the same value and the same deadline.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coordis::testing::{dataset, key_slot, KeyDump};

mod cluster_common;
use cluster_common::*;

/// Slots each reshard moves: enough for keys in many slots, few enough
/// for a loaded machine (redis-cli runs several commands per slot).
const MOVE_SLOTS: u16 = 60;

/// Hash tags whose keys are written (each tag gets one key per type).
const TAGS: usize = 12;

/// TTL of the keys that have one: far beyond the test's length.
const TTL_MS: u64 = 3_600_000;

/// How much two reads of a key's deadline may differ beyond the time the
/// reads took (the servers' clocks are the same machine's).
const DEADLINE_SLACK_MS: u64 = 50;

/// The nodes' `cluster-node-timeout`: no node fails in these tests, and a
/// long timeout keeps a handshake or a ping late on a loaded machine from
/// marking a node failed mid-reshard.
const RESHARD_NODE_TIMEOUT: &str = "20000";

/// A cluster node with [`RESHARD_NODE_TIMEOUT`].
fn reshard_node(program: &str, tag: &str) -> Node {
    node_with(program, tag, &["--cluster-node-timeout", RESHARD_NODE_TIMEOUT])
}

/// Longest wait for every node to agree after a move.
const AGREE_WAIT: Duration = Duration::from_secs(30);

/// `count` hash tags whose slots are below `MOVE_SLOTS` (the first slots of
/// the first node, which a reshard from it moves first).
fn tags_in_moved_slots(count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("t{i}"))
        .filter(|t| key_slot(t.as_bytes()) < MOVE_SLOTS)
        .take(count)
        .collect()
}

/// Writes one key of every type under each tag (strings, a hash and a
/// zset with TTLs) and a few keys elsewhere; returns the keys' names.
fn write_keys(entry: SocketAddr) -> Vec<String> {
    let ttl = TTL_MS.to_string();
    let mut keys = vec![];
    for tag in tags_in_moved_slots(TAGS) {
        let k = |suffix: &str| format!("{{{tag}}}{suffix}");
        let writes: Vec<Vec<String>> = vec![
            vec!["SET".into(), k("s"), "v".into(), "PX".into(), ttl.clone()],
            vec!["SET".into(), k("p"), "persistent".into()],
            vec!["RPUSH".into(), k("l"), "a".into(), "b".into(), "c".into()],
            vec!["HSET".into(), k("h"), "f".into(), "1".into(), "g".into(), "2".into()],
            vec!["PEXPIRE".into(), k("h"), ttl.clone()],
            vec!["SADD".into(), k("set"), "x".into(), "y".into()],
            vec!["ZADD".into(), k("z"), "1.5".into(), "m".into(), "2".into(), "n".into()],
            vec!["PEXPIRE".into(), k("z"), ttl.clone()],
            vec!["XADD".into(), k("x"), "1-1".into(), "f".into(), "v".into()],
        ];
        for w in writes {
            let args: Vec<&str> = w.iter().map(String::as_str).collect();
            let reply = routed(entry, &args);
            assert!(!reply.starts_with('-'), "{args:?}: {reply}");
        }
        keys.extend(["s", "p", "l", "h", "set", "z", "x"].map(k));
    }
    for i in 0..20 {
        let key = format!("other{i}");
        assert_eq!(routed(entry, &["SET", &key, "o", "PX", &ttl]), "+OK\r\n");
        keys.push(key);
    }
    keys
}

/// Every node's keys (they must not overlap) and the interval in which
/// they were read.
struct Snapshot {
    keys: BTreeMap<Vec<u8>, KeyDump>,
    started: Instant,
    ended: Instant,
}

fn snapshot(nodes: &[&Node]) -> Snapshot {
    let started = Instant::now();
    let mut keys = BTreeMap::new();
    for n in nodes {
        for ((_, key), dump) in dataset(n.addr(), &[0]).unwrap() {
            assert!(
                keys.insert(key.clone(), dump).is_none(),
                "{} is on two nodes",
                String::from_utf8_lossy(&key)
            );
        }
    }
    Snapshot {
        keys,
        started,
        ended: Instant::now(),
    }
}

/// The same keys with the same values, and each deadline where it was:
/// a PTTL read in [s, e] puts the deadline in [s + pttl, e + pttl], and
/// the two intervals must meet.
fn assert_same(entry: SocketAddr, before: &Snapshot, after: &Snapshot, names: &[String]) {
    assert_eq!(
        before.keys.keys().collect::<Vec<_>>(),
        after.keys.keys().collect::<Vec<_>>(),
        "the key sets differ"
    );
    assert_eq!(before.keys.len(), names.len());
    for (key, was) in &before.keys {
        let now = &after.keys[key];
        let name = String::from_utf8_lossy(key);
        assert_eq!((&was.kind, &was.value), (&now.kind, &now.value), "{name}");
        match (was.pttl, now.pttl) {
            (None, None) => {}
            (Some(a), Some(b)) => {
                let ms = |d: Duration| d.as_millis() as u64;
                let lo_a = ms(before.started.duration_since(before.started)) + a;
                let hi_a = ms(before.ended.duration_since(before.started)) + a;
                let lo_b = ms(after.started.duration_since(before.started)) + b;
                let hi_b = ms(after.ended.duration_since(before.started)) + b;
                assert!(
                    lo_b <= hi_a + DEADLINE_SLACK_MS && lo_a <= hi_b + DEADLINE_SLACK_MS,
                    "{name}: deadline moved (PTTL {a} then {b}, reads {lo_a}..{hi_a} vs {lo_b}..{hi_b})"
                );
            }
            other => panic!("{name}: TTL {other:?}"),
        }
    }
    // Each key is reached through -MOVED from any node.
    for name in names {
        let kind = &before.keys[name.as_bytes()].kind;
        assert_eq!(routed(entry, &["TYPE", name]), format!("+{kind}\r\n"), "{name}");
    }
}

/// `redis-cli --cluster <args>`; panics on an `[ERR]` line.
fn cluster_cli(args: &[&str]) -> String {
    let mut all = vec!["--cluster"];
    all.extend(args);
    let out = redis_cli(&all).unwrap();
    // redis-cli reports a failed move with `*** ...` and other errors with
    // `[ERR]`, exiting 0 after either.
    assert!(
        !out.contains("[ERR]") && !out.contains("*** "),
        "redis-cli {all:?}:\n{out}"
    );
    out
}

/// `redis-cli --cluster check` passes on every node, every node knows
/// every other one out of its handshake and reports `cluster_state:ok`
/// (agreement may take a few bus rounds after a move; a node that joined
/// reaches the others by gossip, and a check from one node shows neither
/// whether another knows it, where a SETSLOT naming it would fail, nor
/// whether the new node's state is `ok` yet: alone before, it counted
/// itself in a minority and waits out the rejoin delay after joining,
/// refusing a MIGRATE's RESTORE-ASKING with -CLUSTERDOWN meanwhile, which
/// stops redis-cli with the slot left MIGRATING).
fn wait_checked(nodes: &[&Node]) {
    let start = Instant::now();
    let ids: Vec<String> = nodes.iter().map(|n| n.id()).collect();
    for n in nodes {
        loop {
            let out = redis_cli(&["--cluster", "check", &n.spec()]).unwrap();
            let view = n.command(&["CLUSTER", "NODES"]);
            let knows_all = ids.iter().all(|id| {
                view.lines()
                    .any(|l| l.starts_with(id.as_str()) && !l.contains("handshake") && !l.contains("noaddr"))
            });
            let ok = n.command(&["CLUSTER", "INFO"]).contains("cluster_state:ok");
            if knows_all
                && ok
                && out.contains("[OK] All nodes agree about slots configuration.")
                && out.contains("[OK] All 16384 slots covered.")
                && !out.contains("[WARNING]")
            {
                break;
            }
            assert!(start.elapsed() < AGREE_WAIT, "check never passed:\n{out}\n{view}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn reshard(entry: &Node, from: &Node, to: &Node, slots: u16) {
    let (from, to, slots) = (from.id(), to.id(), slots.to_string());
    cluster_cli(&[
        "reshard",
        &entry.spec(),
        "--cluster-from",
        &from,
        "--cluster-to",
        &to,
        "--cluster-slots",
        &slots,
        "--cluster-yes",
    ]);
}

/// Three primaries of `programs`: keys moved from the first to the third
/// and back, each time checked.
fn reshard_both_ways(programs: [&str; 3], tag: &str) -> Option<Vec<Node>> {
    if !have("redis-cli") || programs.iter().any(|p| !have(p)) {
        return None;
    }
    let nodes: Vec<Node> = programs
        .iter()
        .enumerate()
        .map(|(i, p)| reshard_node(p, &format!("{tag}-{i}")))
        .collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    create(&refs)?;
    assert_formed(&refs);
    let names = write_keys(nodes[1].addr());
    let first = snapshot(&refs);
    reshard(&nodes[0], &nodes[0], &nodes[2], MOVE_SLOTS);
    wait_checked(&refs);
    for tag in tags_in_moved_slots(TAGS) {
        let slot = key_slot(tag.as_bytes()).to_string();
        let left = nodes[0].command(&["CLUSTER", "COUNTKEYSINSLOT", &slot]);
        assert_eq!(left, ":0\r\n", "keys of slot {slot} stayed behind");
    }
    let moved = snapshot(&refs);
    assert_same(nodes[1].addr(), &first, &moved, &names);
    // The third node's first slots are the moved ones: back they go.
    reshard(&nodes[2], &nodes[2], &nodes[0], MOVE_SLOTS);
    wait_checked(&refs);
    let back = snapshot(&refs);
    assert_same(nodes[1].addr(), &moved, &back, &names);
    Some(nodes)
}

/// A cluster of three `program` nodes resharded both ways, then a new
/// empty primary joins, gets slots from a rebalance, gives them back and
/// leaves with del-node; the keys stay where -MOVED finds them.
fn reshard_rebalance_add_and_remove(program: &str, tag: &str) {
    let Some(mut nodes) = reshard_both_ways([program; 3], tag) else {
        return;
    };
    let refs: Vec<&Node> = nodes.iter().collect();
    let before = snapshot(&refs);
    let names: Vec<String> = before
        .keys
        .keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    // A new empty primary joins and gets slots from a rebalance; a low
    // weight keeps the number of slots moved small.
    let new = reshard_node(program, &format!("{tag}-new"));
    cluster_cli(&["add-node", &new.spec(), &nodes[0].spec()]);
    let new_id = new.id();
    let all: Vec<&Node> = nodes.iter().chain([&new]).collect();
    wait_checked(&all);
    let weight = format!("{new_id}=0.02");
    cluster_cli(&[
        "rebalance",
        &nodes[0].spec(),
        "--cluster-use-empty-masters",
        "--cluster-weight",
        &weight,
    ]);
    wait_checked(&all);
    let owned = new.command(&["CLUSTER", "INFO"]);
    assert!(!new.command(&["CLUSTER", "SLOTS"]).starts_with("*0\r\n"), "{owned}");
    let rebalanced = snapshot(&all);
    assert_same(nodes[1].addr(), &before, &rebalanced, &names);
    // Emptied again, it leaves with del-node.
    let count = new
        .command(&["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.contains("myself"))
        .unwrap()
        .split(' ')
        .skip(8)
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<u16>().unwrap() - a.parse::<u16>().unwrap() + 1,
            None => 1,
        })
        .sum::<u16>();
    reshard(&nodes[0], &new, &nodes[0], count);
    wait_checked(&all);
    // Left without slots, it follows the node that took its last one, as
    // Redis's primaries do (`cluster-allow-replica-migration yes`).
    wait_for(
        AGREE_WAIT,
        || new.role_of(&new_id) == format!("myself,slave {}", nodes[0].id()),
        || new.command(&["CLUSTER", "NODES"]),
    );
    cluster_cli(&["del-node", &nodes[0].spec(), &new_id]);
    wait_checked(&refs);
    for n in &nodes {
        assert!(!n.command(&["CLUSTER", "NODES"]).contains(&new_id));
    }
    let after = snapshot(&refs);
    assert_same(nodes[1].addr(), &rebalanced, &after, &names);
    nodes.push(new);
}

#[test]
fn a_coordis_cluster_reshards_rebalances_adds_and_removes_nodes() {
    reshard_rebalance_add_and_remove(BIN, "reshard-ours");
}

#[test]
fn a_redis_server_cluster_reshards_rebalances_adds_and_removes_nodes() {
    reshard_rebalance_add_and_remove("redis-server", "reshard-redis");
}

#[test]
fn a_mixed_cluster_moves_keys_from_coordis_to_redis_and_back() {
    reshard_both_ways([BIN, "redis-server", "redis-server"], "reshard-mixed-a");
}

#[test]
fn a_mixed_cluster_moves_keys_from_redis_to_coordis_and_back() {
    reshard_both_ways(["redis-server", "redis-server", BIN], "reshard-mixed-b");
}
