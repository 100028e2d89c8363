//! Differential test: the same command sequences go to coordis and to a real
//! `redis-server` (started here on a free port), and every reply must be
//! byte-identical, in RESP2 and in RESP3.
//!
//! Scenarios live in `tests/scenarios/*.txt`. Without redis-server on PATH the
//! test prints a loud skip line, unless `COORDIS_REQUIRE_REDIS=1` (CI), where
//! that is a failure.

use std::net::SocketAddr;
use std::time::Duration;

use coordis::protocol::split_args;
use coordis::testing::{RawClient, RedisServer};

struct Scenario {
    name: String,
    commands: Vec<Vec<Vec<u8>>>,
}

fn parse_scenarios(text: &str) -> Vec<Scenario> {
    let mut out: Vec<Scenario> = vec![];
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("# ") || line == "#" {
            continue;
        }
        if let Some(name) = line.strip_prefix("## ") {
            out.push(Scenario {
                name: name.to_string(),
                commands: vec![],
            });
            continue;
        }
        let args = split_args(line.as_bytes()).unwrap_or_else(|| panic!("bad scenario line: {line}"));
        out.last_mut()
            .expect("command before first scenario")
            .commands
            .push(args);
    }
    out
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace("\r\n", "\\r\\n")
}

/// Runs one scenario against one server and returns every reply.
fn run(addr: SocketAddr, scenario: &Scenario, resp3: bool) -> Vec<Vec<u8>> {
    let mut admin = RawClient::connect(addr).unwrap();
    assert_eq!(admin.command(&["FLUSHALL"]).unwrap(), b"+OK\r\n");
    let mut c = RawClient::connect(addr).unwrap();
    if resp3 {
        let hello = c.command(&["HELLO", "3"]).unwrap();
        assert!(hello.starts_with(b"%7\r\n"), "{}", show(&hello));
    }
    let mut replies = vec![];
    for args in &scenario.commands {
        if args[0] == b"!sleep" {
            let ms: u64 = String::from_utf8_lossy(&args[1]).parse().unwrap();
            std::thread::sleep(Duration::from_millis(ms));
            replies.push(vec![]);
            continue;
        }
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        replies.push(
            c.command_bytes(&raw)
                .unwrap_or_else(|e| format!("<io error: {e}>").into_bytes()),
        );
    }
    replies
}

#[test]
fn coordis_replies_match_redis_byte_for_byte() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let mut scenarios = vec![];
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scenarios")).unwrap() {
        let path = entry.unwrap().path();
        scenarios.extend(parse_scenarios(&std::fs::read_to_string(&path).unwrap()));
    }
    let mut commands = 0;
    let mut mismatches = vec![];
    for scenario in &scenarios {
        for resp3 in [false, true] {
            let expected = run(redis.addr(), scenario, resp3);
            let actual = run(coordis.addr(), scenario, resp3);
            for (i, args) in scenario.commands.iter().enumerate() {
                commands += 1;
                if expected[i] != actual[i] {
                    let cmd: Vec<String> = args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                    mismatches.push(format!(
                        "[{} RESP{}] {}\n    redis:   {}\n    coordis: {}",
                        scenario.name,
                        if resp3 { 3 } else { 2 },
                        cmd.join(" "),
                        show(&expected[i]),
                        show(&actual[i])
                    ));
                }
            }
        }
    }
    println!(
        "differential: {} scenarios, {} commands, {} mismatches",
        scenarios.len(),
        commands,
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
