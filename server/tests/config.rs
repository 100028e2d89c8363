//! The directive table against real Redis 7.0.15: every directive coordis
//! lists in `CONFIG GET *` that Redis also has must show Redis's default and
//! answer the same `CONFIG SET` probes (valid, invalid, out of range,
//! immutable) with the same bytes, then show the same value again.
//! Directives Redis does not have must be coordis's own, listed here.

use coordis::testing::{RawClient, RedisServer};

/// coordis's own directives (README: `bgsave-slice-keys`, `bgsave-slice-pause-us`, `lua-memory-limit`, `proto-max-multibulk-len`, `port-file`, `enable-test-commands`).
const COORDIS_ONLY: &[&str] = &[
    "bgsave-slice-keys",
    "bgsave-slice-pause-us",
    "enable-test-commands",
    "log-format",
    "lua-memory-limit",
    "port-file",
    "proto-max-multibulk-len",
];

/// Directives whose value depends on how each server was started (the test
/// harness passes `--save ''`; `dir` is Redis's working directory).
const STARTED_DIFFERENTLY: &[&str] = &["port", "save", "dir"];

/// Directives coordis cannot change at run time where Redis can (it would
/// rebind its listeners): documented in README's known differences.
const IMMUTABLE_IN_COORDIS: &[&str] = &["port", "bind"];

/// Values every directive is probed with (besides its current value).
const PROBES: &[&str] = &["yes", "0", "-1", "1kb", "abc", "99999999999999999999", ""];

/// Probes that would make the test's Redis act on its surroundings.
fn harmful(name: &str, value: &str) -> bool {
    // An AOF in the working directory; a password that locks the test out.
    (name == "appendonly" && value == "yes") || name == "requirepass"
}

/// Reads a RESP2 array of bulk strings.
fn bulks(reply: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(reply);
    let mut lines = text.split("\r\n");
    let head = lines.next().unwrap_or_default();
    assert!(head.starts_with('*'), "not an array: {text:?}");
    let mut out = vec![];
    while let Some(len) = lines.next() {
        if len.starts_with('$') {
            out.push(lines.next().unwrap_or_default().to_string());
        }
    }
    out
}

fn get(c: &mut RawClient, name: &str) -> Vec<u8> {
    c.command(&["CONFIG", "GET", name]).unwrap()
}

#[test]
fn every_directive_matches_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    let all = bulks(&ours.command(&["CONFIG", "GET", "*"]).unwrap());
    let names: Vec<String> = all.chunks(2).map(|p| p[0].clone()).collect();
    assert!(names.len() > 50, "CONFIG GET * listed {names:?}");
    let mut mismatches = vec![];
    let mut only_ours = vec![];
    let mut probes = 0;
    for name in &names {
        let redis_value = get(&mut theirs, name);
        if bulks(&redis_value).is_empty() {
            only_ours.push(name.as_str());
            continue;
        }
        if !STARTED_DIFFERENTLY.contains(&name.as_str()) && get(&mut ours, name) != redis_value {
            mismatches.push(format!(
                "default of {name}: coordis {:?}, redis {:?}",
                String::from_utf8_lossy(&get(&mut ours, name)),
                String::from_utf8_lossy(&redis_value)
            ));
        }
        if IMMUTABLE_IN_COORDIS.contains(&name.as_str()) {
            continue;
        }
        let current = bulks(&get(&mut ours, name)).pop().unwrap_or_default();
        for value in std::iter::once(current.as_str()).chain(PROBES.iter().copied()) {
            if harmful(name, value) && value != current {
                continue;
            }
            probes += 1;
            let a = ours.command(&["CONFIG", "SET", name, value]).unwrap();
            let b = theirs.command(&["CONFIG", "SET", name, value]).unwrap();
            if a != b {
                mismatches.push(format!(
                    "CONFIG SET {name} {value:?}: coordis {:?}, redis {:?}",
                    String::from_utf8_lossy(&a),
                    String::from_utf8_lossy(&b)
                ));
            }
            if !STARTED_DIFFERENTLY.contains(&name.as_str()) && get(&mut ours, name) != get(&mut theirs, name) {
                mismatches.push(format!(
                    "after CONFIG SET {name} {value:?}: coordis {:?}, redis {:?}",
                    String::from_utf8_lossy(&get(&mut ours, name)),
                    String::from_utf8_lossy(&get(&mut theirs, name))
                ));
            }
        }
    }
    println!(
        "config: {} directives, {} probes, {} mismatches",
        names.len(),
        probes,
        mismatches.len()
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    only_ours.sort();
    assert_eq!(only_ours, COORDIS_ONLY, "directives Redis 7.0.15 does not have");
}

/// Several pairs at once are all or nothing, with Redis's precedence of
/// errors (an unknown name before an immutable one before a bad value), and
/// the same reply bytes.
#[test]
fn config_set_of_several_pairs_matches_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    let cases: &[&[&str]] = &[
        &["CONFIG", "SET", "maxclients", "11", "hz", "abc"],
        &["CONFIG", "SET", "maxclients", "12", "databases", "3", "nosuch", "1"],
        &["CONFIG", "SET", "maxclients", "12", "databases", "3"],
        &["CONFIG", "SET", "maxclients", "13", "MAXCLIENTS", "14"],
        &["CONFIG", "SET", "maxclients", "15", "hz"],
        &[
            "CONFIG",
            "SET",
            "MaxClients",
            "16",
            "Hz",
            "20",
            "zset-max-ziplist-entries",
            "7",
        ],
        &["CONFIG", "GET", "maxclients", "HZ", "zset-max-listpack-entries"],
        &["CONFIG", "SET", "lua-time-limit", "10", "busy-reply-threshold", "20"],
        &["CONFIG", "GET", "busy-reply-threshold"],
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        &["CONFIG", "GET", "notify-keyspace-events"],
        &["CONFIG", "SET", "notify-keyspace-events", "KEAn"],
        &["CONFIG", "GET", "notify-keyspace-events"],
        &["CONFIG", "SET", "notify-keyspace-events", "Kn"],
        &["CONFIG", "GET", "notify-keyspace-events"],
        &["CONFIG", "GET", "*max-*-entries"],
    ];
    for case in cases {
        let a = ours.command(case).unwrap();
        let b = theirs.command(case).unwrap();
        if case[1] == "GET" && case[2].contains('*') {
            // Redis lists patterns in hash order: compare as sets of pairs.
            let mut a: Vec<Vec<String>> = bulks(&a).chunks(2).map(|p| p.to_vec()).collect();
            let mut b: Vec<Vec<String>> = bulks(&b).chunks(2).map(|p| p.to_vec()).collect();
            a.sort();
            b.sort();
            assert_eq!(a, b, "{case:?}");
        } else if case[1] == "GET" {
            let mut a = bulks(&a);
            let mut b = bulks(&b);
            a.sort();
            b.sort();
            assert_eq!(a, b, "{case:?}");
        } else {
            assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b), "{case:?}");
        }
    }
}
