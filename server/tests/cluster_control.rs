//! The cluster's test-control plane: a slot moved step by step with
//! `ServerControl::begin_move` / `move_keys` / `finish_move` (clients meet
//! `-ASK` for a key already moved and `-TRYAGAIN` for keys split between
//! the nodes, then `-MOVED`), and at once over the wire with
//! `COORDIS.CLUSTER MOVESLOT`, on an in-process cluster of three primaries.

use std::net::SocketAddr;

use coordis::testing::{key_slot, RawClient};
use coordis::ServerSet;

use coordis::testing::command_text as command;

fn addr_of(url: &str) -> SocketAddr {
    url.trim_start_matches("redis://").parse().unwrap()
}

/// The node serving `key`: the one that does not redirect it (asked
/// of each in turn).
fn owner(addrs: &[SocketAddr], key: &str) -> usize {
    addrs
        .iter()
        .position(|a| !command(*a, &["GET", key]).starts_with("-MOVED"))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moves_step_by_step_and_at_once() {
    let set = ServerSet::cluster(3, 0).await.unwrap();
    let addrs: Vec<SocketAddr> = set.urls().iter().map(|u| addr_of(u)).collect();
    let (a, b) = ("{lock}a", "{lock}b");
    let slot = key_slot(b"lock");
    let src = owner(&addrs, a);
    let dst = (src + 1) % 3;
    let dst_id = set.node_id(dst).unwrap().to_string();
    assert_eq!(command(addrs[src], &["SET", a, "1"]), "+OK\r\n");
    assert_eq!(command(addrs[src], &["SET", b, "2", "PX", "600000"]), "+OK\r\n");
    let control = set.server(src).control();
    let (result, control) = tokio::task::spawn_blocking(move || {
        let r = (|| -> Result<(), String> {
            control.begin_move(slot, &dst_id)?;
            // Held open: both keys still here.
            assert_eq!(control.move_keys(slot, 1)?, 1);
            Ok(())
        })();
        (r, control)
    })
    .await
    .unwrap();
    result.unwrap();
    let ask = format!("-ASK {slot} 127.0.0.1:{}\r\n", addrs[dst].port());
    let (moved, stayed) = if command(addrs[src], &["GET", a]) == ask {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(command(addrs[src], &["GET", moved]), ask);
    assert!(command(addrs[src], &["GET", stayed]).starts_with('$'));
    assert_eq!(
        command(addrs[src], &["MGET", a, b]),
        "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
    );
    let nodes = command(addrs[src], &["CLUSTER", "NODES"]);
    assert!(nodes.contains(&format!("[{slot}->-")), "{nodes}");
    // The target serves the moved key after ASKING, and redirects without it.
    let mut t = RawClient::connect(addrs[dst]).unwrap();
    assert_eq!(t.command(&["ASKING"]).unwrap(), b"+OK\r\n");
    assert!(String::from_utf8_lossy(&t.command(&["GET", moved]).unwrap()).starts_with('$'));
    let result = tokio::task::spawn_blocking(move || control.finish_move(slot))
        .await
        .unwrap();
    result.unwrap();
    let to_dst = format!("-MOVED {slot} 127.0.0.1:{}\r\n", addrs[dst].port());
    assert_eq!(command(addrs[src], &["GET", a]), to_dst);
    assert_eq!(command(addrs[dst], &["GET", a]), "$1\r\n1\r\n");
    let pttl: i64 = command(addrs[dst], &["PTTL", b])[1..].trim().parse().unwrap();
    assert!(pttl > 500_000 && pttl <= 600_000, "{pttl}");
    assert_eq!(
        command(addrs[src], &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]),
        ":0\r\n"
    );
    // Not the owner any more: the move is refused there.
    let src_id = set.node_id(src).unwrap().to_string();
    let refused = command(addrs[src], &["COORDIS.CLUSTER", "MOVESLOT", &slot.to_string(), &src_id]);
    assert!(refused.starts_with("-ERR this node does not own the slot"), "{refused}");
    // Back at once, over the wire.
    let (addr, slot_text) = (addrs[dst], slot.to_string());
    let back =
        tokio::task::spawn_blocking(move || command(addr, &["COORDIS.CLUSTER", "MOVESLOT", &slot_text, &src_id]))
            .await
            .unwrap();
    assert_eq!(back, "+OK\r\n");
    assert_eq!(command(addrs[src], &["GET", a]), "$1\r\n1\r\n");
    assert_eq!(
        command(addrs[dst], &["GET", a]),
        format!("-MOVED {slot} 127.0.0.1:{}\r\n", addrs[src].port())
    );
}

/// Steps the cluster's clock a second at a time until `done` holds.
async fn step_until(set: &ServerSet, what: &str, mut done: impl FnMut() -> bool) {
    let clock = set.cluster_clock().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        clock.advance_ms(1_000);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A primary partitioned from every other node on the bus (`PARTITION`):
/// on the cluster's clock the majority fails it and promotes its replica,
/// while the partitioned node, in a minority, refuses writes with
/// `-CLUSTERDOWN`; once healed it learns it lost its slots and follows
/// the new owner. The control's refusals, over the wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_partitioned_from_the_others_is_failed_over_and_rejoins_as_a_replica() {
    let set = ServerSet::cluster(3, 1).await.unwrap();
    let addrs: Vec<SocketAddr> = set.urls().iter().map(|u| addr_of(u)).collect();
    let ids: Vec<String> = (0..6).map(|i| set.node_id(i).unwrap().to_string()).collect();
    // foo hashes to slot 12182, the third primary's; its replica is node 5.
    let (old, replica) = (2, 5);
    assert_eq!(command(addrs[old], &["SET", "foo", "bar"]), "+OK\r\n");

    let refused = command(addrs[old], &["COORDIS.CLUSTER", "PARTITION", &ids[old]]);
    assert_eq!(refused, "-ERR a node cannot be partitioned from itself\r\n");
    let unknown = command(addrs[old], &["COORDIS.CLUSTER", "PARTITION", "nosuchnode"]);
    assert_eq!(unknown, "-ERR Unknown node nosuchnode\r\n");

    let others: Vec<String> = (0..6).filter(|&i| i != old).map(|i| ids[i].clone()).collect();
    let control = set.server(old).control();
    tokio::task::spawn_blocking(move || {
        let others: Vec<&str> = others.iter().map(String::as_str).collect();
        control.partition(&others)
    })
    .await
    .unwrap()
    .unwrap();

    let promoted = format!("-MOVED 12182 {}\r\n", addrs[replica]);
    step_until(&set, "the majority promotes the replica", || {
        command(addrs[0], &["SET", "foo", "baz"]) == promoted
    })
    .await;
    assert_eq!(command(addrs[replica], &["SET", "foo", "baz"]), "+OK\r\n");
    step_until(&set, "the partitioned primary sees itself in a minority", || {
        command(addrs[old], &["CLUSTER", "INFO"]).contains("cluster_state:fail")
    })
    .await;
    assert!(
        command(addrs[old], &["SET", "foo", "lost"]).starts_with("-CLUSTERDOWN "),
        "a write on the minority side is refused"
    );

    let control = set.server(old).control();
    tokio::task::spawn_blocking(move || control.heal(&[]))
        .await
        .unwrap()
        .unwrap();
    step_until(&set, "the old primary follows the new owner", || {
        command(addrs[old], &["SET", "foo", "again"]) == promoted
    })
    .await;
    let nodes = command(addrs[old], &["CLUSTER", "NODES"]);
    let me = nodes.lines().find(|l| l.contains("myself")).unwrap();
    assert!(me.contains("slave") && me.contains(&ids[replica]), "{me}");
    assert_eq!(command(addrs[replica], &["GET", "foo"]), "$3\r\nbaz\r\n");
    set.shutdown().await;
}

/// A node cut off from its clients (`set_down`: connections dropped, new
/// ones closed at once) stays in the cluster: its bus still answers, so
/// however long the cluster's clock runs no node fails it and its slots
/// stay its own; clients of it see a dead server until it is back, with
/// its keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_its_clients_stays_in_the_cluster() {
    let set = ServerSet::cluster(3, 0).await.unwrap();
    let addrs: Vec<SocketAddr> = set.urls().iter().map(|u| addr_of(u)).collect();
    // foo hashes to slot 12182, the third primary's.
    let cut = 2;
    assert_eq!(command(addrs[cut], &["SET", "foo", "bar"]), "+OK\r\n");
    let control = set.server(cut).control();
    tokio::task::spawn_blocking(move || control.set_down(true))
        .await
        .unwrap();
    let refused = |addr: SocketAddr| {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(addr) else {
            return true;
        };
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let _ = s.write_all(b"PING\r\n");
        let mut buf = [0u8; 16];
        matches!(s.read(&mut buf), Ok(0) | Err(_))
    };
    assert!(refused(addrs[cut]), "a client of the cut-off node is closed");
    // Ten node timeouts (the default 15 s) on the cluster's clock: nobody
    // fails the node.
    let clock = set.cluster_clock().unwrap();
    for _ in 0..10 {
        clock.advance_ms(15_000);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for i in 0..3 {
        if i == cut {
            continue;
        }
        let info = command(addrs[i], &["CLUSTER", "INFO"]);
        assert!(info.contains("cluster_state:ok"), "node {i}: {info}");
        let nodes = command(addrs[i], &["CLUSTER", "NODES"]);
        assert!(!nodes.contains("fail"), "node {i}: {nodes}");
        assert_eq!(
            command(addrs[i], &["GET", "foo"]),
            format!("-MOVED 12182 {}\r\n", addrs[cut])
        );
    }
    let control = set.server(cut).control();
    tokio::task::spawn_blocking(move || control.set_down(false))
        .await
        .unwrap();
    assert_eq!(command(addrs[cut], &["GET", "foo"]), "$3\r\nbar\r\n");
    set.shutdown().await;
}
