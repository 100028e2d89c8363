//! Every command with random arguments: each gets a reply (never a closed
//! connection or a dead server). A small, seeded stand-in for fuzzing.

use coordis::testing::RawClient;

#[test]
fn random_arguments_to_every_command_always_get_a_reply() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let names: Vec<&str> = coordis::internals::commands()
        // Commands that wait (BLPOP ... 0, WAIT 1 0), hold or silence this
        // client (CLIENT PAUSE, CLIENT REPLY OFF), or inject faults into the
        // server (COORDIS.*) have their own tests.
        .filter(|s| s.flags & coordis::internals::flags::BLOCKING == 0)
        .map(|s| s.name)
        // MONITOR a second time answers nothing at all, as in Redis.
        .filter(|n| !matches!(*n, "wait" | "client" | "monitor") && !n.starts_with("coordis."))
        // (P|S)(UN)SUBSCRIBE answer once per channel: not one reply per command.
        .filter(|n| {
            !matches!(
                *n,
                "quit"
                    | "shutdown"
                    | "reset"
                    | "subscribe"
                    | "psubscribe"
                    | "unsubscribe"
                    | "punsubscribe"
                    | "ssubscribe"
                    | "sunsubscribe"
                    | "multi"
                    | "hello"
            )
        })
        // SYNC and PSYNC turn the connection into a replica's link (a
        // stream, not replies), REPLICAOF/SLAVEOF/FAILOVER the server into
        // a replica (tests/replication_*.rs cover them); MIGRATE connects
        // to the server its arguments name (tests/migrate.rs).
        .filter(|n| !matches!(*n, "sync" | "psync" | "replicaof" | "slaveof" | "failover" | "migrate"))
        .collect();
    let words = [
        "k",
        "z",
        "s",
        "0",
        "1",
        "-1",
        "2.5",
        "inf",
        "-inf",
        "(1",
        "[a",
        "-",
        "+",
        "NX",
        "XX",
        "GT",
        "LT",
        "EX",
        "PX",
        "KEEPTTL",
        "GET",
        "WITHSCORES",
        "LIMIT",
        "BYSCORE",
        "BYLEX",
        "REV",
        "COUNT",
        "MATCH",
        "TYPE",
        "*",
        "",
        "9223372036854775807",
        "abc",
        "return 1",
        "WEIGHTS",
        "AGGREGATE",
        "SUM",
    ];
    let mut rng = fastrand::Rng::with_seed(7);
    c.command(&["ZADD", "z", "1", "a", "2", "b"]).unwrap();
    c.command(&["SET", "s", "10"]).unwrap();
    for i in 0..6000 {
        let name = names[rng.usize(..names.len())];
        let mut args = vec![name];
        for _ in 0..rng.usize(0..7) {
            args.push(words[rng.usize(..words.len())]);
        }
        let reply = c.command(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert!(!reply.is_empty(), "{args:?}");
        if i % 500 == 0 {
            assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n", "after {args:?}");
        }
    }
    let mut fresh = RawClient::connect(server.addr()).unwrap();
    assert_eq!(fresh.command(&["PING"]).unwrap(), b"+PONG\r\n");
}
