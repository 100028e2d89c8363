//! Cluster replicas against Redis 7.0.15: CLUSTER REPLICATE (the link to
//! the primary, the roles every node sees, SLOTS/SHARDS/REPLICAS, READONLY
//! reads), `redis-cli --cluster create --cluster-replicas 1` and `check`,
//! CLUSTER FAILOVER (default, FORCE, TAKEOVER) and the automatic failover a
//! replica of a FAIL primary wins by the primaries' votes — in a cluster of
//! coordis nodes and in mixed clusters where coordis and redis-server nodes
//! replicate each other and vote for each other.

use std::process::Command;
use std::time::Duration;

mod cluster_common;
use cluster_common::*;

/// Longest wait for a replication or a role change (a failover needs the
/// node timeout, the FAIL's spread, the election's delay and its votes).
const ROLE_WAIT: Duration = Duration::from_secs(40);

fn have_redis() -> bool {
    if Command::new("redis-server").arg("--version").output().is_err() {
        assert!(!coordis::testing::require_redis(), "redis-server is not on PATH");
        eprintln!("\n*** SKIPPED: redis-server is not on PATH ***\n");
        return false;
    }
    true
}

/// Waits until every node sees `replica` as a replica of `master`.
fn wait_replica_of(nodes: &[&Node], replica: &str, master: &str) {
    for n in nodes {
        wait_for(
            ROLE_WAIT,
            || {
                let role = n.role_of(replica);
                role.ends_with(&format!("slave {master}")) && !role.contains("fail")
            },
            || {
                format!(
                    "{} never saw {replica} as a replica of {master}: {}",
                    n.port,
                    n.command(&["CLUSTER", "NODES"])
                )
            },
        );
    }
}

/// Waits until every node sees `id` as a primary.
fn wait_master(nodes: &[&Node], id: &str) {
    for n in nodes {
        wait_for(
            ROLE_WAIT,
            || n.role_of(id).contains("master") && n.role_of(id).ends_with(" -"),
            || {
                format!(
                    "{} never saw {id} as a primary: {}",
                    n.port,
                    n.command(&["CLUSTER", "NODES"])
                )
            },
        );
    }
}

/// `key`'s value on `replica` with READONLY, once replication brought it.
fn wait_read(replica: &Node, key: &str, want: &str) {
    wait_for(
        ROLE_WAIT,
        || {
            let mut c = client(replica.addr(), false);
            c.command(&["READONLY"]).unwrap();
            c.command(&["GET", key]).unwrap() == format!("${}\r\n{want}\r\n", want.len()).as_bytes()
        },
        || {
            format!(
                "{} never served {key}: {}",
                replica.port,
                replica.command(&["INFO", "replication"])
            )
        },
    );
}

/// The slot of `foo` (12182) and a key on each third of the slots.
const KEYS: [(&str, u16); 3] = [("a", 15495), ("b", 3300), ("foo", 12182)];

/// Which node serves `slot` according to `n` (CLUSTER NODES ranges).
fn owner_of(n: &Node, slot: u16) -> String {
    for line in n.command(&["CLUSTER", "NODES"]).lines() {
        let f: Vec<&str> = line.split(' ').collect();
        for range in f.iter().skip(8) {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            if let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>()) {
                if (a..=b).contains(&slot) {
                    return f[0].to_string();
                }
            }
        }
    }
    String::new()
}

#[test]
fn six_coordis_nodes_with_replicas_fail_over_every_way() {
    let nodes: Vec<Node> = (0..6).map(|i| node(BIN, &format!("repl-ours-{i}"))).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    let specs: Vec<String> = nodes.iter().map(|n| n.spec()).collect();
    let mut args = vec!["--cluster", "create"];
    args.extend(specs.iter().map(String::as_str));
    args.extend(["--cluster-replicas", "1", "--cluster-yes"]);
    let Some(out) = redis_cli(&args) else {
        return;
    };
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    assert_formed(&refs);
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    // redis-cli makes the first three primaries, the others replicas.
    let master_of = |r: usize| -> usize {
        let role = nodes[r].role_of(&ids[r]);
        let m = role.rsplit(' ').next().unwrap();
        ids.iter().position(|i| i == m).unwrap_or_else(|| panic!("{role}"))
    };
    for r in 3..6 {
        let m = master_of(r);
        assert!(m < 3, "replica {r} follows {m}");
        wait_replica_of(&refs, &ids[r], &ids[m]);
        // CLUSTER REPLICAS on any node lists it.
        let listed = nodes[(r + 1) % 6].command(&["CLUSTER", "REPLICAS", &ids[m]]);
        assert!(listed.contains(&ids[r]) && listed.contains("slave"), "{listed}");
        // The nodes file records it.
        let file = std::fs::read_to_string(nodes[r]._dir.0.join("nodes.conf")).unwrap();
        assert!(file.contains(&format!("myself,slave {}", ids[m])), "{file}");
    }
    // Writes go to the primary; the replica serves them under READONLY and
    // redirects otherwise.
    for (key, slot) in KEYS {
        let m = ids.iter().position(|i| *i == owner_of(&nodes[0], slot)).unwrap();
        assert_eq!(nodes[m].command(&["SET", key, "v1"]), "+OK\r\n");
        let r = (3..6).find(|r| master_of(*r) == m).unwrap();
        wait_read(&nodes[r], key, "v1");
        assert_eq!(
            nodes[r].command(&["GET", key]),
            format!("-MOVED {slot} 127.0.0.1:{}\r\n", nodes[m].port)
        );
        assert_eq!(
            nodes[r].command(&["SET", key, "v2"]),
            format!("-MOVED {slot} 127.0.0.1:{}\r\n", nodes[m].port)
        );
    }
    // CLUSTER SLOTS lists each replica once it has an offset; SHARDS too.
    wait_for(
        ROLE_WAIT,
        || {
            let slots = nodes[0].command(&["CLUSTER", "SLOTS"]);
            ids[3..].iter().all(|id| slots.contains(id.as_str()))
        },
        || nodes[0].command(&["CLUSTER", "SLOTS"]),
    );
    let shards = nodes[1].command(&["CLUSTER", "SHARDS"]);
    assert_eq!(shards.matches("replica").count(), 3, "{shards}");
    assert!(redis_cli(&["--cluster", "check", &nodes[5].spec()])
        .unwrap()
        .contains("[OK] All nodes agree about slots configuration."));

    // The default manual failover: the primary pauses, the replica catches
    // up, is elected, and the old primary follows it.
    let (r, m) = (3, master_of(3));
    assert_eq!(
        nodes[m].command(&["CLUSTER", "FAILOVER"]),
        "-ERR You should send CLUSTER FAILOVER to a replica\r\n"
    );
    assert_eq!(nodes[r].command(&["CLUSTER", "FAILOVER"]), "+OK\r\n");
    wait_master(&refs, &ids[r]);
    wait_replica_of(&refs, &ids[m], &ids[r]);
    wait_ok(nodes[r].addr());

    // TAKEOVER: no election, a new epoch.
    let (r, m) = (4, master_of(4));
    let epoch_before = nodes[r].command(&["CLUSTER", "INFO"]);
    assert_eq!(nodes[r].command(&["CLUSTER", "FAILOVER", "TAKEOVER"]), "+OK\r\n");
    wait_master(&refs, &ids[r]);
    wait_replica_of(&refs, &ids[m], &ids[r]);
    assert_ne!(nodes[r].command(&["CLUSTER", "INFO"]), epoch_before);

    // Automatic: the third primary dies; its replica is elected.
    let (r, m) = (5, master_of(5));
    let mut nodes = nodes;
    let dead = nodes.remove(m);
    let r = if m < r { r - 1 } else { r };
    drop(dead);
    let refs: Vec<&Node> = nodes.iter().collect();
    let rid = nodes[r].id();
    wait_master(&refs, &rid);
    for n in &refs {
        wait_ok(n.addr());
    }
    let key = KEYS.iter().find(|(_, s)| owner_of(&nodes[0], *s) == rid).unwrap();
    assert_eq!(nodes[r].command(&["GET", key.0]), "$2\r\nv1\r\n");
}

#[test]
fn coordis_and_redis_replicate_and_elect_each_other() {
    if !have_redis() {
        return;
    }
    let a = node(BIN, "repl-mixed-a");
    let b = node("redis-server", "repl-mixed-b");
    let c = node(BIN, "repl-mixed-c");
    let Some(out) = create(&[&a, &b, &c]) else {
        return;
    };
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    // d: a redis-server replica of coordis primary a; e: a coordis replica
    // of redis-server primary b.
    let d = node("redis-server", "repl-mixed-d");
    let e = node(BIN, "repl-mixed-e");
    for n in [&d, &e] {
        assert_eq!(
            n.command(&["CLUSTER", "MEET", "127.0.0.1", &a.port.to_string()]),
            "+OK\r\n"
        );
    }
    let (ida, idb) = (a.id(), b.id());
    let all = [&a, &b, &c, &d, &e];
    for n in [&d, &e] {
        wait_for(
            ROLE_WAIT,
            || {
                n.command(&["CLUSTER", "NODES"]).lines().count() == 5
                    && !n.role_of(&ida).is_empty()
                    && !n.role_of(&idb).is_empty()
            },
            || n.command(&["CLUSTER", "NODES"]),
        );
    }
    assert_eq!(d.command(&["CLUSTER", "REPLICATE", &ida]), "+OK\r\n");
    assert_eq!(e.command(&["CLUSTER", "REPLICATE", &idb]), "+OK\r\n");
    let (idd, ide) = (d.id(), e.id());
    wait_replica_of(&all, &idd, &ida);
    wait_replica_of(&all, &ide, &idb);
    assert_formed(&all);
    // Data flows both ways across the kinds.
    let slot_of_a = |key: &str| owner_of(&a, KEYS.iter().find(|(k, _)| *k == key).unwrap().1);
    let on_a = KEYS.iter().find(|(k, _)| slot_of_a(k) == ida).unwrap().0;
    let on_b = KEYS.iter().find(|(k, _)| slot_of_a(k) == idb).unwrap().0;
    assert_eq!(a.command(&["SET", on_a, "v1"]), "+OK\r\n");
    assert_eq!(b.command(&["SET", on_b, "v1"]), "+OK\r\n");
    wait_read(&d, on_a, "v1");
    wait_read(&e, on_b, "v1");

    // A manual failover of the coordis replica of the redis-server primary.
    assert_eq!(e.command(&["CLUSTER", "FAILOVER"]), "+OK\r\n");
    wait_master(&all, &ide);
    wait_replica_of(&all, &idb, &ide);
    wait_read(&b, on_b, "v1");

    // The coordis primary a dies: its redis-server replica d is elected by
    // the coordis primaries c and e.
    drop(a);
    let rest = [&c, &d, &e, &b];
    wait_master(&rest, &idd);
    for n in rest {
        wait_ok(n.addr());
    }
    assert_eq!(d.command(&["GET", on_a]), "$2\r\nv1\r\n");
    // And the other way: e (coordis) dies, b (redis-server) is elected by
    // c (coordis) and d (redis-server).
    drop(e);
    let rest = [&b, &c, &d];
    wait_master(&rest, &idb);
    for n in rest {
        wait_ok(n.addr());
    }
}
