//! Differential test: the same command sequences go to coordis and to a real
//! `redis-server` (started here on a free port), and every reply must be
//! byte-identical, in RESP2 and in RESP3.
//!
//! Scenarios live in `tests/scenarios/*.txt`. Without redis-server on PATH the
//! test prints a loud skip line, unless `COORDIS_REQUIRE_REDIS=1` (CI), where
//! that is a failure.

use coordis::testing::conformance::{compare, load_dir, Scenario};
use coordis::testing::RedisServer;

#[test]
fn coordis_replies_match_redis_byte_for_byte() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let scenarios = load_dir(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/scenarios"
    )));
    let mut commands = 0;
    let mut mismatches = vec![];
    for scenario in &scenarios {
        for resp3 in [false, true] {
            commands += compare(redis.addr(), coordis.addr(), scenario, resp3, &mut mismatches);
        }
    }
    report(
        &format!("differential: {} scenarios", scenarios.len()),
        commands,
        &mismatches,
    );
}

/// Prints the summary line and fails with the first mismatches, if any.
fn report(label: &str, commands: usize, mismatches: &[String]) {
    println!("{label}, {commands} commands, {} mismatches", mismatches.len());
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(40)].join("\n")
    );
}

/// Random sorted-set command sequences (fixed seeds, so a failure reproduces):
/// scores include ±inf and exclusive bounds, members repeat, and ZADD flag
/// combinations (valid and invalid) update existing members.
#[test]
fn random_zset_sequences_match_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let mut commands = 0;
    let mut mismatches = vec![];
    for seed in 1..=16u64 {
        let resp3 = seed % 2 == 0;
        let scenario = Scenario {
            name: format!("random zset seed {seed}"),
            commands: random_zset_commands(seed, 400),
        };
        commands += compare(redis.addr(), coordis.addr(), &scenario, resp3, &mut mismatches);
    }
    report("random zset differential", commands, &mismatches);
}

fn random_zset_commands(seed: u64, n: usize) -> Vec<Vec<Vec<u8>>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let scores = [
        "0", "1", "-1", "2.5", "-2.5", "3", "10", "100", "inf", "-inf", "+inf", "0.5", "7",
    ];
    // Union keys hold finite scores only: float sums of ±inf depend on order.
    let finite = ["0", "1", "-1", "2.5", "3", "10", "0.5", "7"];
    let bounds = [
        "-inf", "+inf", "0", "(0", "1", "(1", "2.5", "(2.5", "10", "(10", "-1", "(-1", "3", "(3",
    ];
    let lex = ["-", "+", "[m1", "(m1", "[m5", "(m5", "[m9", "(m3"];
    let mut out = vec![];
    for _ in 0..n {
        let key = format!("z{}", rng.u32(1..4));
        let member = || format!("m{}", fastrand::u32(0..10));
        let pick = |rng: &mut fastrand::Rng, list: &[&str]| list[rng.usize(..list.len())].to_string();
        let cmd: Vec<String> = match rng.u32(0..16) {
            0..=3 => {
                let mut c = vec!["ZADD".to_string(), key];
                for flag in ["NX", "XX", "GT", "LT", "CH", "INCR"] {
                    if rng.u32(0..6) == 0 {
                        c.push(flag.to_string());
                    }
                }
                for _ in 0..rng.usize(1..4) {
                    c.push(pick(&mut rng, &scores));
                    c.push(member());
                }
                c
            }
            4 => vec!["ZINCRBY".into(), key, pick(&mut rng, &scores), member()],
            5 => vec!["ZREM".into(), key, member(), member()],
            6 => {
                let mut c = vec![
                    "ZRANGEBYSCORE".into(),
                    key,
                    pick(&mut rng, &bounds),
                    pick(&mut rng, &bounds),
                ];
                if rng.bool() {
                    c.push("WITHSCORES".into());
                }
                if rng.bool() {
                    c.extend(["LIMIT".into(), rng.i32(-1..4).to_string(), rng.i32(-1..4).to_string()]);
                }
                c
            }
            7 => vec![
                "ZRANGE".into(),
                key,
                pick(&mut rng, &bounds),
                pick(&mut rng, &bounds),
                "BYSCORE".into(),
                "REV".into(),
                "WITHSCORES".into(),
            ],
            8 => vec!["ZCOUNT".into(), key, pick(&mut rng, &bounds), pick(&mut rng, &bounds)],
            9 => vec![
                "ZREMRANGEBYSCORE".into(),
                key,
                pick(&mut rng, &bounds),
                pick(&mut rng, &bounds),
            ],
            10 => vec![
                "ZREMRANGEBYRANK".into(),
                key,
                rng.i32(-4..4).to_string(),
                rng.i32(-4..4).to_string(),
            ],
            11 => vec![if rng.bool() { "ZRANK" } else { "ZREVRANK" }.into(), key, member()],
            12 => vec![
                if rng.bool() { "ZPOPMIN" } else { "ZPOPMAX" }.into(),
                key,
                rng.u32(0..3).to_string(),
            ],
            13 => vec![
                "ZRANGE".into(),
                key,
                rng.i32(-5..5).to_string(),
                rng.i32(-5..5).to_string(),
                "WITHSCORES".into(),
            ],
            14 => {
                let u = format!("u{}", rng.u32(1..3));
                vec![
                    "ZADD".into(),
                    u,
                    pick(&mut rng, &finite),
                    member(),
                    pick(&mut rng, &finite),
                    member(),
                ]
            }
            _ => {
                let op = ["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"][rng.usize(..3)];
                let mut c = vec![op.into(), "dst".into(), "2".into(), "u1".into(), "u2".into()];
                if op != "ZDIFFSTORE" {
                    c.extend([
                        "WEIGHTS".into(),
                        pick(&mut rng, &["1", "2", "-1", "0.5"]),
                        pick(&mut rng, &["1", "2", "-1"]),
                    ]);
                    c.extend(["AGGREGATE".into(), pick(&mut rng, &["SUM", "MIN", "MAX"])]);
                }
                out.push(c.into_iter().map(String::into_bytes).collect());
                vec![
                    "ZRANGE".into(),
                    "dst".into(),
                    "0".into(),
                    "-1".into(),
                    "WITHSCORES".into(),
                ]
            }
        };
        if rng.u32(0..8) == 0 {
            // Show the set first, so a ZLEXCOUNT mismatch is easy to read.
            out.push(
                ["ZRANGE", "z1", "0", "-1", "WITHSCORES"]
                    .iter()
                    .map(|a| a.as_bytes().to_vec())
                    .collect(),
            );
            // Lex commands on mixed scores: defined by Redis's compact encoding.
            let op = ["ZLEXCOUNT", "ZRANGEBYLEX", "ZREVRANGEBYLEX", "ZREMRANGEBYLEX"][rng.usize(..4)];
            let mut l = vec![op.to_string(), "z1".into(), pick(&mut rng, &lex), pick(&mut rng, &lex)];
            if op.contains("RANGEBYLEX") && !op.starts_with("ZREM") && rng.bool() {
                l.extend(["LIMIT".into(), rng.i32(-1..3).to_string(), rng.i32(-1..3).to_string()]);
            }
            out.push(l.into_iter().map(String::into_bytes).collect());
        }
        out.push(cmd.into_iter().map(String::into_bytes).collect());
    }
    out
}
