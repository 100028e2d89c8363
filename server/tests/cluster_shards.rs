//! A shard's primary and replicas together, on clusters of coordis nodes
//! and of redis-server nodes run side by side: SPUBLISH reaches the shard
//! channel's subscribers on the shard's replicas (over the bus, as Redis
//! 7.0 forwards it to the nodes of the shard), PUBLISH reaches a replica's
//! subscribers once (over the bus only, not replicated as well), and a
//! replica of the primary with the most replicas migrates to a primary
//! left without a working one (`cluster-migration-barrier`,
//! `cluster-allow-replica-migration`).

use std::time::Duration;

mod cluster_common;
use cluster_common::*;

/// Longest wait for a replica to join and link, or a role to change.
const ROLE_WAIT: Duration = Duration::from_secs(40);

/// Three primaries of `program` from `redis-cli --cluster create`, then a
/// replica of primary `i` for each `i` of `replicas` (`add-node
/// --cluster-slave`), every link up and every node seeing every role.
/// The primaries come first. `None` (skipped loudly) without the programs.
fn shards(program: &str, tag: &str, replicas: &[usize], extra: &[&str]) -> Option<Vec<Node>> {
    if !have("redis-cli") || !have(program) {
        return None;
    }
    let start = |i: usize| node_with(program, &format!("{tag}-{i}"), extra);
    let mut nodes: Vec<Node> = (0..3).map(start).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    create(&refs)?;
    assert_formed(&refs);
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    for (n, &of) in replicas.iter().enumerate() {
        let replica = start(3 + n);
        let out = redis_cli(&[
            "--cluster",
            "add-node",
            &replica.spec(),
            &nodes[0].spec(),
            "--cluster-slave",
            "--cluster-master-id",
            &ids[of],
        ])
        .unwrap();
        assert!(out.contains("[OK] New node added correctly."), "{out}");
        nodes.push(replica);
    }
    for (n, &of) in replicas.iter().enumerate() {
        let replica = &nodes[3 + n];
        let id = replica.id();
        for other in &nodes {
            wait_for(
                ROLE_WAIT,
                || other.role_of(&id).ends_with(&format!("slave {}", ids[of])),
                || {
                    format!(
                        "{} never saw {id} as a replica: {}",
                        other.port,
                        other.command(&["CLUSTER", "NODES"])
                    )
                },
            );
        }
        wait_for(
            ROLE_WAIT,
            || {
                replica
                    .command(&["INFO", "replication"])
                    .contains("master_link_status:up")
            },
            || replica.command(&["INFO", "replication"]),
        );
    }
    Some(nodes)
}

/// A shard channel of the first primary (the first third of the slots).
fn first_shard_channel() -> String {
    (0..)
        .map(|i| format!("ch{i}"))
        .find(|c| coordis::testing::key_slot(c.as_bytes()) < 5461)
        .unwrap()
}

/// A subscriber's next message, or the test fails naming what it waited for.
fn next(sub: &mut coordis::testing::RawClient, what: &str) -> String {
    match sub.read_reply() {
        Ok(reply) => String::from_utf8_lossy(&reply).into_owned(),
        Err(e) => panic!("{what}: {e}"),
    }
}

fn sharded_publish_reaches_the_replicas(program: &str, tag: &str) {
    let Some(nodes) = shards(program, tag, &[0, 0], &[]) else {
        return;
    };
    let channel = first_shard_channel();
    let smessage = |m: &str| {
        format!(
            "*3\r\n$8\r\nsmessage\r\n${}\r\n{channel}\r\n${}\r\n{m}\r\n",
            channel.len(),
            m.len()
        )
    };
    // A subscriber on the primary and on each replica.
    let mut subs: Vec<_> = [0, 3, 4]
        .iter()
        .map(|&i| {
            let mut c = client(nodes[i].addr(), false);
            let reply = String::from_utf8_lossy(&c.command(&["SSUBSCRIBE", &channel]).unwrap()).into_owned();
            assert!(
                reply.starts_with("*3\r\n$10\r\nssubscribe\r\n"),
                "{program} node {i}: {reply}"
            );
            c
        })
        .collect();
    // The primary counts its own subscribers; the replicas' hear it too.
    assert_eq!(nodes[0].command(&["SPUBLISH", &channel, "hello"]), ":1\r\n");
    for (i, sub) in subs.iter_mut().enumerate() {
        assert_eq!(next(sub, &format!("{program}: subscriber {i}")), smessage("hello"));
    }
    // Published on a replica, it reaches its primary and the other replica.
    let mut on_replica = client(nodes[3].addr(), false);
    on_replica.command(&["READONLY"]).unwrap();
    assert_eq!(on_replica.command(&["SPUBLISH", &channel, "again"]).unwrap(), b":1\r\n");
    for (i, sub) in subs.iter_mut().enumerate() {
        assert_eq!(next(sub, &format!("{program}: subscriber {i}")), smessage("again"));
    }
    // PUBLISH reaches a replica's subscriber once: then its PING's reply.
    let mut sub = client(nodes[4].addr(), false);
    sub.command(&["SUBSCRIBE", "news"]).unwrap();
    assert_eq!(nodes[1].command(&["PUBLISH", "news", "once"]), ":0\r\n");
    assert_eq!(
        next(&mut sub, program),
        "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$4\r\nonce\r\n"
    );
    // A duplicate would come before the PING's reply: give it time to.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        String::from_utf8_lossy(&sub.command(&["PING"]).unwrap()),
        "*2\r\n$4\r\npong\r\n$0\r\n\r\n",
        "{program}: PUBLISH arrived twice"
    );
}

#[test]
fn spublish_reaches_the_shards_replicas() {
    sharded_publish_reaches_the_replicas(BIN, "spub-ours");
}

#[test]
fn spublish_reaches_a_redis_shards_replicas() {
    sharded_publish_reaches_the_replicas("redis-server", "spub-redis");
}

/// Each replica's view of itself: `myself,slave <primary-id>`.
fn follows(replica: &Node, primary: &str) -> bool {
    replica.role_of(&replica.id()) == format!("myself,slave {primary}")
}

/// Long enough for a replica to migrate if it were going to: Redis waits
/// 5 s from when a primary is seen orphaned, checked every 100 ms.
const MIGRATION_CHANCE: Duration = Duration::from_secs(8);

/// The first primary has two replicas, the others one each; the third's
/// replica stops. With `cluster-migration-barrier 2` (the first primary would keep
/// one) and then with `cluster-allow-replica-migration no` nothing moves;
/// with the barrier at 1 and migration allowed, the first primary's
/// replica with the smaller node ID moves to the orphaned third primary
/// and replicates it, the other stays.
fn replica_migrates_to_an_orphaned_primary(program: &str, tag: &str) {
    let Some(mut nodes) = shards(program, tag, &[0, 0, 1, 2], &["--cluster-migration-barrier", "2"]) else {
        return;
    };
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    drop(nodes.pop());
    let gone = &ids[6];
    for n in &nodes {
        wait_for(
            ROLE_WAIT,
            || n.role_of(gone).contains("fail") && !n.role_of(gone).contains("fail?"),
            || {
                format!(
                    "{program}: {} never failed {gone}: {}",
                    n.port,
                    n.command(&["CLUSTER", "NODES"])
                )
            },
        );
    }
    let set_on_replicas = |directive: &str, value: &str| {
        for n in &nodes[3..5] {
            assert_eq!(n.command(&["CONFIG", "SET", directive, value]), "+OK\r\n");
        }
    };
    let nobody_moves = |why: &str| {
        std::thread::sleep(MIGRATION_CHANCE);
        for n in &nodes[3..5] {
            assert!(
                follows(n, &ids[0]),
                "{program}, {why}: {}",
                n.command(&["CLUSTER", "NODES"])
            );
        }
    };
    nobody_moves("barrier 2");
    set_on_replicas("cluster-allow-replica-migration", "no");
    set_on_replicas("cluster-migration-barrier", "1");
    nobody_moves("migration not allowed");
    set_on_replicas("cluster-allow-replica-migration", "yes");
    let (mover, stayer) = if ids[3] < ids[4] { (3, 4) } else { (4, 3) };
    wait_for(
        ROLE_WAIT,
        || follows(&nodes[mover], &ids[2]),
        || {
            format!(
                "{program}: never migrated: {}",
                nodes[mover].command(&["CLUSTER", "NODES"])
            )
        },
    );
    for n in &nodes {
        wait_for(
            ROLE_WAIT,
            || n.role_of(&ids[mover]).ends_with(&format!("slave {}", ids[2])),
            || {
                format!(
                    "{program}: {} never saw the move: {}",
                    n.port,
                    n.command(&["CLUSTER", "NODES"])
                )
            },
        );
    }
    assert!(follows(&nodes[stayer], &ids[0]));
    let port = format!("master_port:{}", nodes[2].port);
    wait_for(
        ROLE_WAIT,
        || {
            let info = nodes[mover].command(&["INFO", "replication"]);
            info.contains(&port) && info.contains("master_link_status:up")
        },
        || nodes[mover].command(&["INFO", "replication"]),
    );
}

#[test]
fn a_replica_migrates_to_an_orphaned_primary() {
    replica_migrates_to_an_orphaned_primary(BIN, "migrate-ours");
}

#[test]
fn a_redis_replica_migrates_to_an_orphaned_primary() {
    replica_migrates_to_an_orphaned_primary("redis-server", "migrate-redis");
}
