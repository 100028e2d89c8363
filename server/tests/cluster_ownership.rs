//! How a slot's new owner becomes known, on three-primary clusters of
//! coordis nodes and of redis-server nodes run side by side: CLUSTER
//! SETSLOT NODE on the importing node sends a PONG to every other node at
//! once (they learn the owner without waiting for the next ping), and a
//! primary whose slot another primary claims with a greater config epoch
//! gives it up and deletes the keys it still has there (Redis's dirty
//! slots) while keeping its other slots and keys.

use std::time::{Duration, Instant};

mod cluster_common;
use cluster_common::*;

/// The nodes' `cluster-node-timeout`: long, so that the only regular
/// gossip is the ping to a random node every second (no node is pinged
/// for being silent half a timeout), and no node fails on a loaded machine.
const NODE_TIMEOUT: &str = "20000";

/// Slots moved one after the other in the SETSLOT test.
const ROUNDS: u16 = 5;

/// Longest wait for gossip to carry a change.
const GOSSIP_WAIT: Duration = Duration::from_secs(30);

/// The median of the times the third node took to learn the new owner
/// must stay below this: the PONG arrives within milliseconds, while the
/// regular gossip (a ping to a random node every second, either way) takes
/// about a second on average.
const AT_ONCE: Duration = Duration::from_millis(300);

/// Three primaries of `program` from `redis-cli --cluster create`, formed;
/// `None` (skipped loudly) without the programs.
fn three(program: &str, tag: &str) -> Option<Vec<Node>> {
    if !have("redis-cli") || !have(program) {
        return None;
    }
    let nodes: Vec<Node> = (0..3)
        .map(|i| {
            node_with(
                program,
                &format!("{tag}-{i}"),
                &["--cluster-node-timeout", NODE_TIMEOUT],
            )
        })
        .collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    create(&refs)?;
    assert_formed(&refs);
    Some(nodes)
}

/// A counter of CLUSTER INFO.
fn info_field(c: &mut coordis::testing::RawClient, field: &str) -> u64 {
    let info = String::from_utf8_lossy(&c.command(&["CLUSTER", "INFO"]).unwrap()).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .trim()
        .parse()
        .unwrap()
}

/// Moves [`ROUNDS`] empty slots of the first node to the third as
/// `redis-cli --cluster reshard` does; returns how long the second node
/// took, each time, to show the third as the owner after the third's
/// SETSLOT NODE (before the first is told).
fn setslot_node_latencies(program: &str, tag: &str) -> Option<Vec<Duration>> {
    let nodes = three(program, tag)?;
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    let mut target = client(nodes[2].addr(), false);
    let mut latencies = vec![];
    for slot in 0..ROUNDS {
        let s = slot.to_string();
        assert_eq!(nodes[1].owner_of(slot), ids[0]);
        assert_eq!(
            target
                .command(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &ids[0]])
                .unwrap(),
            b"+OK\r\n"
        );
        assert_eq!(
            nodes[0].command(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &ids[2]]),
            "+OK\r\n"
        );
        let pongs = info_field(&mut target, "cluster_stats_messages_pong_sent");
        assert_eq!(
            target.command(&["CLUSTER", "SETSLOT", &s, "NODE", &ids[2]]).unwrap(),
            b"+OK\r\n"
        );
        let started = Instant::now();
        // One PONG to each other node went out with the reply.
        let sent = info_field(&mut target, "cluster_stats_messages_pong_sent") - pongs;
        assert!(sent >= 2, "{program}: {sent} PONGs after SETSLOT {s} NODE");
        wait_for(
            GOSSIP_WAIT,
            || nodes[1].owner_of(slot) == ids[2],
            || format!("{program}: the second node never learnt slot {s}'s owner"),
        );
        latencies.push(started.elapsed());
        assert_eq!(
            nodes[0].command(&["CLUSTER", "SETSLOT", &s, "NODE", &ids[2]]),
            "+OK\r\n"
        );
    }
    Some(latencies)
}

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

#[test]
fn setslot_node_tells_the_other_nodes_at_once_as_redis() {
    let Some(ours) = setslot_node_latencies(BIN, "setslot-ours") else {
        return;
    };
    eprintln!("coordis: the third node learnt each new owner after {ours:?}");
    assert!(median(ours.clone()) < AT_ONCE, "coordis: {ours:?}");
    if !have("redis-server") {
        return;
    }
    let theirs = setslot_node_latencies("redis-server", "setslot-redis").unwrap();
    eprintln!("redis-server: the third node learnt each new owner after {theirs:?}");
    assert!(median(theirs.clone()) < AT_ONCE, "redis-server: {theirs:?}");
}

/// Two hash tags in distinct slots of the first node (the first third of
/// the slots): the first one's slot is taken from it, the other stays.
fn two_tags() -> (String, String) {
    let mut tags = (0..)
        .map(|i| format!("d{i}"))
        .filter(|t| coordis::testing::key_slot(t.as_bytes()) < 5461);
    let lost = tags.next().unwrap();
    let kept = tags
        .find(|t| coordis::testing::key_slot(t.as_bytes()) != coordis::testing::key_slot(lost.as_bytes()))
        .unwrap();
    (lost, kept)
}

/// The second node claims a slot of the first with a greater config epoch
/// (BUMPEPOCH, then SETSLOT NODE itself): the first gives the slot up and
/// deletes its keys there, keeping its other slots and keys.
fn lost_slot_loses_its_keys(program: &str, tag: &str) {
    let Some(nodes) = three(program, tag) else {
        return;
    };
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    let (tag, kept_tag) = two_tags();
    let lost = coordis::testing::key_slot(tag.as_bytes());
    let lost_keys: Vec<String> = ["a", "b", "c"].iter().map(|k| format!("{{{tag}}}{k}")).collect();
    let kept = format!("{{{kept_tag}}}k");
    for key in lost_keys.iter().chain([&kept]) {
        assert_eq!(nodes[0].command(&["SET", key, "v"]), "+OK\r\n", "{key}");
    }
    let bumped = nodes[1].command(&["CLUSTER", "BUMPEPOCH"]);
    assert!(bumped.starts_with("+BUMPED "), "{program}: {bumped}");
    let s = lost.to_string();
    assert_eq!(
        nodes[1].command(&["CLUSTER", "SETSLOT", &s, "NODE", &ids[1]]),
        "+OK\r\n"
    );
    wait_for(
        GOSSIP_WAIT,
        || nodes[0].owner_of(lost) == ids[1] && nodes[0].command(&["DBSIZE"]) == ":1\r\n",
        || {
            format!(
                "{program}: slot {s} on the first node: {} keys; {}",
                nodes[0].command(&["DBSIZE"]),
                nodes[0].command(&["CLUSTER", "NODES"])
            )
        },
    );
    assert_eq!(nodes[0].command(&["CLUSTER", "COUNTKEYSINSLOT", &s]), ":0\r\n");
    assert!(
        nodes[0].role_of(&ids[0]).contains("master"),
        "{program}: still a primary"
    );
    assert_eq!(nodes[0].command(&["GET", &kept]), "$1\r\nv\r\n");
    for key in &lost_keys {
        assert_eq!(
            nodes[0].command(&["GET", key]),
            format!("-MOVED {lost} 127.0.0.1:{}\r\n", nodes[1].port)
        );
        assert_eq!(nodes[1].command(&["GET", key]), "$-1\r\n", "{program}: {key} is gone");
    }
}

#[test]
fn a_primary_deletes_the_keys_of_a_slot_taken_with_a_greater_epoch() {
    lost_slot_loses_its_keys(BIN, "dirty-ours");
}

#[test]
fn a_redis_primary_deletes_the_keys_of_a_slot_taken_the_same_way() {
    lost_slot_loses_its_keys("redis-server", "dirty-redis");
}
