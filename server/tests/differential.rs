//! Differential test: the same command sequences go to coordis and to a real
//! `redis-server` (started here on a free port), and every reply must be
//! byte-identical, in RESP2 and in RESP3.
//!
//! Scenarios live in `tests/scenarios/*.txt`. Without redis-server on PATH the
//! test prints a loud skip line, unless `COORDIS_REQUIRE_REDIS=1` (CI), where
//! that is a failure. `COORDIS_SCENARIOS=text` runs only the scenarios whose
//! name contains `text`.

use coordis::testing::conformance::{compare, load_dir, Scenario};
use coordis::testing::RedisServer;

#[test]
fn coordis_replies_match_redis_byte_for_byte() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let mut scenarios = load_dir(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/scenarios"
    )));
    if let Ok(only) = std::env::var("COORDIS_SCENARIOS") {
        scenarios.retain(|s| s.name.contains(&only));
    }
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
    // Differing replies first, then differing changes (the dirty counter).
    let (changes, replies): (Vec<&String>, Vec<&String>) = mismatches
        .iter()
        .partition(|m| m.contains("changes (rdb_changes_since_last_save)"));
    let mismatches: Vec<&String> = replies.into_iter().chain(changes).collect();
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(40)]
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Random sorted-set command sequences (fixed seeds, so a failure reproduces):
/// scores include ±inf and exclusive bounds, members repeat, and ZADD flag
/// combinations (valid and invalid) update existing members.
#[test]
fn random_zset_sequences_match_redis() {
    random_differential("random zset differential", 16, |seed| {
        (format!("random zset seed {seed}"), random_zset_commands(seed, 400))
    });
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
            12 => match rng.u32(0..4) {
                // The blocking forms, with a short timeout: served at once,
                // WRONGTYPE, or a null array after 10 ms.
                0 => vec![
                    pick(&mut rng, &["BZPOPMIN", "BZPOPMAX"]),
                    key,
                    format!("z{}", rng.u32(1..4)),
                    "0.01".into(),
                ],
                1 => vec![
                    "BZMPOP".into(),
                    "0.01".into(),
                    "2".into(),
                    key,
                    format!("z{}", rng.u32(1..4)),
                    pick(&mut rng, &["MIN", "MAX"]),
                    "COUNT".into(),
                    rng.u32(1..4).to_string(),
                ],
                _ => vec![
                    if rng.bool() { "ZPOPMIN" } else { "ZPOPMAX" }.into(),
                    key,
                    rng.u32(0..3).to_string(),
                ],
            },
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

/// Random GEO sequences (fixed seeds): positions clustered around a few
/// centres (Sicily, both sides of the antimeridian, near both poles, the
/// latitude limits) so searches find many members, some at one position
/// (equal distances, where the sort's order shows), every search command
/// with its options in random order and count, valid and invalid radii,
/// boxes, units and coordinates, STORE/STOREDIST destinations read back,
/// and scores ZADD puts where no position would.
#[test]
fn random_geo_sequences_match_redis() {
    random_differential("random geo differential", 16, |seed| {
        (format!("random geo seed {seed}"), random_geo_commands(seed, 300))
    });
}

fn random_geo_commands(seed: u64, n: usize) -> Vec<Vec<Vec<u8>>> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x6e0);
    let centres = [
        (13.36, 38.11),
        (15.08, 37.5),
        (179.95, 0.0),
        (-179.95, 0.5),
        (0.0, 84.9),
        (10.0, -84.9),
        (-73.98, 40.75),
    ];
    // Positions repeat: a few exact points are drawn again and again.
    let fixed = [
        "13.361389 38.115556",
        "15.087269 37.502669",
        "180 0",
        "-180 85.05112878",
        "0 -85.05112878",
    ];
    let units = ["m", "km", "mi", "ft", "KM", "parsec"];
    let radii = [
        "0", "1", "50", "100", "200", "500", "2000", "20000", "-1", "abc", "inf", "0.5",
    ];
    let bad_coords = ["181 0", "0 86", "-180.1 0", "abc 1", "inf 0"];
    let pick = |rng: &mut fastrand::Rng, list: &[&str]| list[rng.usize(..list.len())].to_string();
    let position = |rng: &mut fastrand::Rng| -> Vec<String> {
        if rng.u32(0..4) == 0 {
            return fixed[rng.usize(..fixed.len())].split(' ').map(String::from).collect();
        }
        let (lon, lat) = centres[rng.usize(..centres.len())];
        let lon = (lon + rng.f64() * 4.0 - 2.0).clamp(-180.0, 180.0);
        let lat = (lat + rng.f64() * 2.0 - 1.0).clamp(-85.05112878, 85.05112878);
        vec![format!("{lon:.6}"), format!("{lat:.6}")]
    };
    let member = |rng: &mut fastrand::Rng| format!("m{}", rng.u32(0..24));
    let mut out: Vec<Vec<String>> = vec![vec!["SET".into(), "str".into(), "v".into()]];
    for _ in 0..n {
        let key = pick(&mut rng, &["g1", "g1", "g1", "g2", "nokey", "str"]);
        let cmd: Vec<String> = match rng.u32(0..14) {
            0..=3 => {
                let mut c = vec!["GEOADD".to_string(), pick(&mut rng, &["g1", "g1", "g2", "str"])];
                for flag in ["NX", "XX", "CH"] {
                    if rng.u32(0..6) == 0 {
                        c.push(flag.into());
                    }
                }
                for _ in 0..rng.usize(1..6) {
                    if rng.u32(0..30) == 0 {
                        c.extend(pick(&mut rng, &bad_coords).split(' ').map(String::from));
                    } else {
                        c.extend(position(&mut rng));
                    }
                    c.push(member(&mut rng));
                }
                c
            }
            4 => {
                let mut c = vec![pick(&mut rng, &["GEOPOS", "GEOHASH"]), key];
                for _ in 0..rng.usize(0..4) {
                    c.push(member(&mut rng));
                }
                c
            }
            5 => {
                let mut c = vec!["GEODIST".into(), key, member(&mut rng), member(&mut rng)];
                if rng.bool() {
                    c.push(pick(&mut rng, &units));
                }
                c
            }
            6 => match rng.u32(0..3) {
                0 => vec!["ZREM".into(), "g1".into(), member(&mut rng)],
                1 => vec![
                    "ZADD".into(),
                    "g2".into(),
                    pick(&mut rng, &["-1", "0", "1.5", "inf", "4503599627370496", "1e30", "-inf"]),
                    member(&mut rng),
                ],
                _ => vec![
                    "ZRANGE".into(),
                    "g1".into(),
                    "0".into(),
                    "-1".into(),
                    "WITHSCORES".into(),
                ],
            },
            _ => {
                let variant = rng.u32(0..6);
                let mut c: Vec<String> = match variant {
                    0 | 1 => {
                        let mut c = vec![if variant == 0 { "GEORADIUS" } else { "GEORADIUS_RO" }.to_string(), key];
                        if rng.u32(0..20) == 0 {
                            c.extend(pick(&mut rng, &bad_coords).split(' ').map(String::from));
                        } else {
                            c.extend(position(&mut rng));
                        }
                        c
                    }
                    2 | 3 => vec![
                        if variant == 2 {
                            "GEORADIUSBYMEMBER"
                        } else {
                            "GEORADIUSBYMEMBER_RO"
                        }
                        .to_string(),
                        key,
                        member(&mut rng),
                    ],
                    4 => vec!["GEOSEARCH".into(), key],
                    _ => vec![
                        "GEOSEARCHSTORE".into(),
                        pick(&mut rng, &["dst", "dst", "g2", "str"]),
                        key,
                    ],
                };
                let search = variant >= 4;
                let mut options: Vec<Vec<String>> = vec![];
                if search {
                    if rng.u32(0..12) != 0 {
                        options.push(if rng.bool() {
                            vec!["FROMMEMBER".into(), member(&mut rng)]
                        } else {
                            [vec!["FROMLONLAT".to_string()], position(&mut rng)].concat()
                        });
                    }
                    if rng.u32(0..12) != 0 {
                        options.push(if rng.bool() {
                            vec!["BYRADIUS".into(), pick(&mut rng, &radii), pick(&mut rng, &units[..5])]
                        } else {
                            vec![
                                "BYBOX".into(),
                                pick(&mut rng, &radii),
                                pick(&mut rng, &radii),
                                pick(&mut rng, &units[..5]),
                            ]
                        });
                    }
                } else {
                    let unit = if rng.u32(0..15) == 0 {
                        pick(&mut rng, &units)
                    } else {
                        pick(&mut rng, &units[..5])
                    };
                    c.extend([pick(&mut rng, &radii), unit]);
                }
                let stores = variant == 5 || (matches!(variant, 0 | 2) && rng.u32(0..3) == 0);
                if !stores || rng.u32(0..10) == 0 {
                    for with in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
                        if rng.bool() {
                            options.push(vec![with.into()]);
                        }
                    }
                }
                match rng.u32(0..4) {
                    0 => options.push(vec!["ASC".into()]),
                    1 => options.push(vec!["DESC".into()]),
                    _ => {}
                }
                if rng.bool() {
                    options.push(vec![
                        "COUNT".into(),
                        pick(&mut rng, &["1", "2", "3", "5", "8", "100", "0"]),
                    ]);
                    if rng.u32(0..3) == 0 {
                        options.push(vec!["ANY".into()]);
                    }
                }
                if stores {
                    if variant == 5 {
                        if rng.bool() {
                            options.push(vec!["STOREDIST".into()]);
                        }
                    } else {
                        options.push(vec![
                            pick(&mut rng, &["STORE", "STOREDIST"]),
                            pick(&mut rng, &["dst", "dst", "str"]),
                        ]);
                    }
                }
                rng.shuffle(&mut options);
                c.extend(options.into_iter().flatten());
                if stores {
                    out.push(c);
                    vec![
                        "ZRANGE".into(),
                        "dst".into(),
                        "0".into(),
                        "-1".into(),
                        "WITHSCORES".into(),
                    ]
                } else {
                    c
                }
            }
        };
        out.push(cmd);
    }
    out.into_iter()
        .map(|c| c.into_iter().map(String::into_bytes).collect())
        .collect()
}

/// Random hash, list and set sequences (fixed seeds): small hashes (whose
/// listpack order is defined), lists over nodes of two entries and of the
/// default size, and integer sets (whose intset order is defined), with the
/// edge values the scenario files pin one by one: negative and huge
/// counts, out-of-range indexes, non-numbers, missing keys.
#[test]
fn random_hash_list_set_sequences_match_redis() {
    random_differential("random hash/list/set differential", 24, |seed| {
        let family = ["hash", "list", "set"][(seed % 3) as usize];
        (
            format!("random {family} seed {seed}"),
            random_type_commands(family, seed, 300),
        )
    });
}

fn random_type_commands(family: &str, seed: u64, n: usize) -> Vec<Vec<Vec<u8>>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let numbers = [
        "0",
        "1",
        "-1",
        "2",
        "5",
        "10",
        "-7",
        "abc",
        "",
        "9223372036854775807",
        "-9223372036854775808",
        "1.5",
    ];
    let mut out: Vec<Vec<String>> = vec![];
    if family == "list" {
        let fill = if seed.is_multiple_of(2) { "2" } else { "-2" };
        out.push(vec![
            "CONFIG".into(),
            "SET".into(),
            "list-max-listpack-size".into(),
            fill.into(),
        ]);
    }
    for _ in 0..n {
        let pick = |rng: &mut fastrand::Rng, list: &[&str]| list[rng.usize(..list.len())].to_string();
        let key = format!("k{}", rng.u32(1..3));
        let cmd: Vec<String> = match family {
            "hash" => {
                let field = |rng: &mut fastrand::Rng| format!("f{}", rng.u32(0..6));
                match rng.u32(0..12) {
                    0..=2 => {
                        let mut c = vec![if rng.bool() { "HSET" } else { "HMSET" }.to_string(), key];
                        for _ in 0..rng.usize(1..3) {
                            c.push(field(&mut rng));
                            c.push(pick(&mut rng, &numbers));
                        }
                        c
                    }
                    3 => vec!["HSETNX".into(), key, field(&mut rng), pick(&mut rng, &numbers)],
                    4 => vec!["HDEL".into(), key, field(&mut rng), field(&mut rng)],
                    5 => vec!["HINCRBY".into(), key, field(&mut rng), pick(&mut rng, &numbers)],
                    6 => vec![
                        "HINCRBYFLOAT".into(),
                        key,
                        field(&mut rng),
                        pick(&mut rng, &["1.5", "-0.25", "1e3", "abc", "3"]),
                    ],
                    7 => vec!["HGETALL".into(), key],
                    8 => vec!["HMGET".into(), key, field(&mut rng), field(&mut rng)],
                    9 => vec![pick(&mut rng, &["HLEN", "HKEYS", "HVALS"]), key],
                    10 => vec![pick(&mut rng, &["HGET", "HEXISTS", "HSTRLEN"]), key, field(&mut rng)],
                    // A count past the size returns the whole hash: deterministic.
                    _ => vec!["HRANDFIELD".into(), key, "100".into(), "WITHVALUES".into()],
                }
            }
            "list" => {
                let value = |rng: &mut fastrand::Rng| format!("v{}", rng.u32(0..5));
                let index = |rng: &mut fastrand::Rng| rng.i32(-8..8).to_string();
                match rng.u32(0..14) {
                    0..=3 => {
                        let mut c = vec![pick(&mut rng, &["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]), key];
                        for _ in 0..rng.usize(1..5) {
                            c.push(value(&mut rng));
                        }
                        c
                    }
                    4 => {
                        let mut c = vec![pick(&mut rng, &["LPOP", "RPOP"]), key];
                        if rng.bool() {
                            c.push(pick(&mut rng, &["0", "1", "3", "-1", "abc"]));
                        }
                        c
                    }
                    5 => vec!["LRANGE".into(), key, index(&mut rng), index(&mut rng)],
                    6 => vec!["LINDEX".into(), key, index(&mut rng)],
                    7 => vec!["LSET".into(), key, index(&mut rng), value(&mut rng)],
                    8 => vec![
                        "LINSERT".into(),
                        key,
                        pick(&mut rng, &["BEFORE", "AFTER"]),
                        value(&mut rng),
                        value(&mut rng),
                    ],
                    9 => vec!["LREM".into(), key, rng.i32(-2..3).to_string(), value(&mut rng)],
                    10 => vec!["LTRIM".into(), key, index(&mut rng), index(&mut rng)],
                    11 => {
                        let mut c = vec!["LPOS".into(), key, value(&mut rng)];
                        for opt in ["RANK", "COUNT", "MAXLEN"] {
                            if rng.u32(0..3) == 0 {
                                c.push(opt.into());
                                c.push(rng.i32(-2..4).to_string());
                            }
                        }
                        c
                    }
                    12 => match rng.u32(0..5) {
                        // The blocking forms, with a short timeout: served at
                        // once, WRONGTYPE, or a null after 10 ms.
                        0 => vec![
                            "BLMOVE".into(),
                            key,
                            format!("k{}", rng.u32(1..3)),
                            pick(&mut rng, &["LEFT", "RIGHT"]),
                            pick(&mut rng, &["LEFT", "RIGHT"]),
                            "0.01".into(),
                        ],
                        1 => vec![pick(&mut rng, &["BLPOP", "BRPOP"]), key, "k2".into(), "0.01".into()],
                        2 => vec![
                            "BLMPOP".into(),
                            "0.01".into(),
                            "2".into(),
                            key,
                            "k2".into(),
                            pick(&mut rng, &["LEFT", "RIGHT"]),
                            "COUNT".into(),
                            rng.u32(1..4).to_string(),
                        ],
                        _ => vec![
                            "LMOVE".into(),
                            key,
                            format!("k{}", rng.u32(1..3)),
                            pick(&mut rng, &["LEFT", "RIGHT"]),
                            pick(&mut rng, &["LEFT", "RIGHT"]),
                        ],
                    },
                    _ => vec!["LRANGE".into(), key, "0".into(), "-1".into()],
                }
            }
            _ => {
                let member = |rng: &mut fastrand::Rng| rng.i32(-3..12).to_string();
                match rng.u32(0..12) {
                    0..=3 => {
                        let mut c = vec!["SADD".to_string(), key];
                        for _ in 0..rng.usize(1..4) {
                            c.push(member(&mut rng));
                        }
                        c
                    }
                    4 => vec!["SREM".into(), key, member(&mut rng), member(&mut rng)],
                    5 => vec!["SMEMBERS".into(), key],
                    6 => vec![pick(&mut rng, &["SINTER", "SUNION", "SDIFF"]), "k1".into(), "k2".into()],
                    7 => vec![
                        pick(&mut rng, &["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]),
                        "k3".into(),
                        "k1".into(),
                        "k2".into(),
                    ],
                    8 => vec!["SMOVE".into(), key, format!("k{}", rng.u32(1..4)), member(&mut rng)],
                    9 => vec!["SMISMEMBER".into(), key, member(&mut rng), member(&mut rng)],
                    10 => vec![
                        "SINTERCARD".into(),
                        "2".into(),
                        "k1".into(),
                        "k2".into(),
                        "LIMIT".into(),
                        rng.u32(0..3).to_string(),
                    ],
                    _ => vec![pick(&mut rng, &["SCARD", "SMEMBERS"]), format!("k{}", rng.u32(1..4))],
                }
            }
        };
        out.push(cmd);
    }
    if family == "list" {
        out.push(vec![
            "CONFIG".into(),
            "SET".into(),
            "list-max-listpack-size".into(),
            "-2".into(),
        ]);
    }
    out.into_iter()
        .map(|c| c.into_iter().map(String::into_bytes).collect())
        .collect()
}

/// Random stream command sequences (fixed seeds): appends with explicit,
/// `ms-*` and too-small IDs, exact and approximate trimming by MAXLEN and
/// MINID (with LIMIT) over small nodes, so whole-node trimming is exercised
/// at node boundaries, deletions, ranges, and a consumer group's reads,
/// acks, claims and lag. Idle and delivery times never appear in a compared
/// reply (claims use JUSTID and min-idle 0).
#[test]
fn random_stream_sequences_match_redis() {
    random_differential("random stream differential", 12, |seed| {
        (format!("random stream seed {seed}"), random_stream_commands(seed, 500))
    });
}

fn random_stream_commands(seed: u64, n: usize) -> Vec<Vec<Vec<u8>>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let node_entries = ["3", "5", "100", "0"][(seed % 4) as usize];
    let mut out: Vec<Vec<String>> = vec![
        vec![
            "CONFIG".into(),
            "SET".into(),
            "stream-node-max-entries".into(),
            node_entries.into(),
        ],
        vec![
            "CONFIG".into(),
            "SET".into(),
            "stream-node-max-bytes".into(),
            ["4096", "60", "0"][(seed % 3) as usize].into(),
        ],
    ];
    let mut ms = 1u64;
    for _ in 0..n {
        let pick = |rng: &mut fastrand::Rng, list: &[&str]| list[rng.usize(..list.len())].to_string();
        let key = format!("s{}", rng.u32(1..3));
        // An ID near the ones in use: mostly existing or nearby entries.
        let near = |rng: &mut fastrand::Rng, ms: u64| match rng.u32(0..6) {
            0 => pick(rng, &["-", "+", "0", "0-0"]),
            1 => format!("({}-{}", rng.u64(0..ms + 2), rng.u32(0..3)),
            2 => rng.u64(0..ms + 2).to_string(),
            _ => format!("{}-{}", rng.u64(0..ms + 2), rng.u32(0..3)),
        };
        let strategy = |rng: &mut fastrand::Rng, ms: u64| -> Vec<String> {
            let mut c = vec![];
            if rng.bool() {
                c.push("MAXLEN".into());
                c.extend(
                    ["~", "=", ""]
                        .map(String::from)
                        .into_iter()
                        .filter(|_| rng.bool())
                        .take(1),
                );
                c.push(rng.i32(-1..25).to_string());
            } else {
                c.push("MINID".into());
                c.extend(["~", "="].map(String::from).into_iter().filter(|_| rng.bool()).take(1));
                c.push(format!("{}-{}", rng.u64(0..ms + 1), rng.u32(0..2)));
            }
            c.retain(|a| !a.is_empty());
            if rng.u32(0..4) == 0 {
                c.push("LIMIT".into());
                c.push(rng.i32(-1..12).to_string());
            }
            c
        };
        let cmd: Vec<String> = match rng.u32(0..20) {
            0..=6 => {
                let mut c = vec!["XADD".to_string(), key];
                if rng.u32(0..8) == 0 {
                    c.push("NOMKSTREAM".into());
                }
                if rng.u32(0..3) == 0 {
                    c.extend(strategy(&mut rng, ms));
                }
                ms += rng.u64(0..3);
                c.push(match rng.u32(0..8) {
                    0 => format!("{ms}-*"),
                    1 => format!("{}-{}", rng.u64(0..ms + 1), rng.u32(0..3)),
                    _ => format!("{ms}-{}", rng.u32(0..4)),
                });
                // Mostly the same field names (a node's master fields).
                let fields: &[&str] = if rng.u32(0..4) == 0 {
                    &["x", "y", "z"]
                } else {
                    &["a", "b"]
                };
                for f in &fields[..rng.usize(1..fields.len() + 1)] {
                    c.push(f.to_string());
                    c.push(rng.u32(0..300).to_string());
                }
                c
            }
            7 | 8 => {
                let mut c = vec!["XTRIM".to_string(), key];
                c.extend(strategy(&mut rng, ms));
                c
            }
            9 => vec![
                "XDEL".into(),
                key,
                near(&mut rng, ms),
                format!("{}-{}", rng.u64(0..ms + 1), rng.u32(0..3)),
            ],
            10 | 11 => {
                let mut c = vec![
                    pick(&mut rng, &["XRANGE", "XREVRANGE"]),
                    key,
                    near(&mut rng, ms),
                    near(&mut rng, ms),
                ];
                if rng.bool() {
                    c.push("COUNT".into());
                    c.push(rng.i32(-1..6).to_string());
                }
                c
            }
            12 => vec![pick(&mut rng, &["XLEN", "TYPE"]), key],
            13 => vec![
                "XGROUP".into(),
                "CREATE".into(),
                key,
                pick(&mut rng, &["g", "h"]),
                pick(&mut rng, &["0", "$", "3-0"]),
                "MKSTREAM".into(),
            ],
            14 => vec![
                "XREADGROUP".into(),
                "GROUP".into(),
                pick(&mut rng, &["g", "h"]),
                pick(&mut rng, &["c1", "c2"]),
                "COUNT".into(),
                rng.u32(1..5).to_string(),
                "STREAMS".into(),
                key,
                pick(&mut rng, &[">", ">", "0"]),
            ],
            15 => vec![
                "XACK".into(),
                key,
                pick(&mut rng, &["g", "h"]),
                near(&mut rng, ms),
                near(&mut rng, ms),
            ],
            16 => vec![
                "XCLAIM".into(),
                key,
                "g".into(),
                pick(&mut rng, &["c1", "c2", "c3"]),
                "0".into(),
                format!("{}-{}", rng.u64(0..ms + 1), rng.u32(0..3)),
                near(&mut rng, ms),
                "JUSTID".into(),
            ],
            17 => vec![
                "XAUTOCLAIM".into(),
                key,
                "g".into(),
                pick(&mut rng, &["c1", "c2"]),
                "0".into(),
                near(&mut rng, ms),
                "COUNT".into(),
                rng.u32(1..4).to_string(),
                "JUSTID".into(),
            ],
            18 if rng.bool() => vec!["XPENDING".into(), key, "g".into()],
            18 => vec!["XINFO".into(), "GROUPS".into(), key],
            _ => vec![
                "XREAD".into(),
                "COUNT".into(),
                rng.u32(0..4).to_string(),
                "STREAMS".into(),
                key,
                near(&mut rng, ms),
            ],
        };
        out.push(cmd);
    }
    out.push(vec![
        "CONFIG".into(),
        "SET".into(),
        "stream-node-max-entries".into(),
        "100".into(),
    ]);
    out.push(vec![
        "CONFIG".into(),
        "SET".into(),
        "stream-node-max-bytes".into(),
        "4096".into(),
    ]);
    out.into_iter()
        .map(|c| c.into_iter().map(String::into_bytes).collect())
        .collect()
}

/// Commands the random differential over every command leaves out, and why.
/// Everything else coordis has is drawn from.
const NOT_FUZZED: &[(&str, &str)] = &[
    // Answers that depend on the time, the process, randomness or hash order.
    ("time", "the time"),
    ("lastsave", "the time"),
    ("info", "the process"),
    ("memory|usage", "coordis's own byte counts (README)"),
    ("memory|stats", "the process"),
    ("memory|doctor", "the process"),
    ("memory|malloc-stats", "Redis's allocator is jemalloc"),
    ("client", "connection ids, addresses and ages"),
    ("config", "changes the server's settings"),
    (
        "acl",
        "users outlive FLUSHALL, GENPASS is random, LOG holds ages and client lines (scenarios/acl.txt and tests/acl.rs compare the ACL)",
    ),
    ("debug", "refused unless enabled"),
    ("shutdown", "stops the server"),
    ("slowlog", "durations"),
    ("latency", "durations"),
    ("command", "documentation, and the table in dictionary order"),
    ("object", "idle times and access frequencies"),
    ("randomkey", "randomness"),
    ("spop", "randomness"),
    ("srandmember", "randomness"),
    ("zrandmember", "randomness"),
    ("hrandfield", "randomness"),
    ("keys", "hash order"),
    (
        "dump",
        "a hashtable set's or hash's payload is in hash order (scenarios/restore.txt compares the rest)",
    ),
    ("scan", "hash order"),
    ("sscan", "hash order"),
    ("hscan", "hash order"),
    ("zscan", "hash order"),
    ("smembers", "a set of strings is in hash order"),
    ("sinter", "a set of strings is in hash order"),
    ("sunion", "a set of strings is in hash order"),
    ("sdiff", "a set of strings is in hash order"),
    ("xinfo", "radix-tree-nodes (README)"),
    ("xpending", "idle times"),
    (
        "function",
        "libraries outlive FLUSHALL, and LIST is in dictionary order",
    ),
    ("fcall", "needs a library"),
    ("fcall_ro", "needs a library"),
    // Commands that change the connection or wait.
    ("hello", "changes the protocol"),
    ("auth", "changes the connection"),
    ("quit", "closes the connection"),
    ("reset", "resets the connection"),
    ("monitor", "turns the connection into a feed"),
    (
        "sync",
        "turns the connection into a replica (tests/replication_primary.rs)",
    ),
    (
        "psync",
        "turns the connection into a replica (tests/replication_primary.rs)",
    ),
    (
        "replicaof",
        "turns the server into a replica (tests/replication_replica.rs)",
    ),
    (
        "migrate",
        "connects to the server its arguments name (tests/migrate.rs)",
    ),
    (
        "slaveof",
        "turns the server into a replica (tests/replication_replica.rs)",
    ),
    (
        "replconf",
        "a replica's handshake (tests/replication_primary.rs)",
    ),
    ("failover", "changes the server's role"),
    ("subscribe", "subscribes the connection"),
    ("psubscribe", "subscribes the connection"),
    ("unsubscribe", "pub/sub context"),
    ("punsubscribe", "pub/sub context"),
    ("ssubscribe", "subscribes the connection"),
    ("sunsubscribe", "pub/sub context"),
    // Files in the server's directory (tests/rdb.rs and tests/aof.rs).
    ("save", "writes the server's files"),
    ("bgrewriteaof", "writes the server's files"),
    ("bgsave", "writes the server's files"),
    ("wait", "waits"),
    (
        "pfselftest",
        "ten million adds: longer than the client waits (tests/hll.rs runs it)",
    ),
    (
        "script|debug",
        "YES and SYNC start Redis's Lua debugger, which coordis does not have (README)",
    ),
];

/// Commands answering a remaining time or a deadline, and how far apart
/// the two servers' answers may be, in the reply's unit (the servers run
/// the stream one after the other).
const TIMES: &[(&str, u64)] = &[("TTL", 5), ("PTTL", 5_000), ("EXPIRETIME", 5), ("PEXPIRETIME", 5_000)];

/// A seeded random command stream over every command coordis has (except
/// [`NOT_FUZZED`] and the blocking ones, which their own differential
/// covers): arity right or off by one, keys from a small pool of each type
/// (so commands collide), arguments drawn from edge cases (empty strings,
/// negative, huge and non-numbers, `inf`/`nan`, ranges, IDs) and from the
/// options Redis's commands take. Sent to coordis and Redis, every reply
/// compared byte for byte, RESP2 and RESP3 alternating by seed.
/// `COORDIS_FUZZ_SEEDS=n` runs n seeds of 2,000 commands (default 10).
#[test]
fn random_commands_across_every_family_match_redis() {
    let seeds: u64 = std::env::var("COORDIS_FUZZ_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    random_differential("random differential over every command", seeds, |seed| {
        (format!("random commands seed {seed}"), random_any_commands(seed, 2000))
    });
}

/// The random command stream of [`random_commands_across_every_family_match_redis`]
/// run as a user with random rules (categories, commands, subcommands, read
/// and write key patterns over the stream's key pool, channels, a selector),
/// so that commands, keys and channels are refused (`-NOPERM`) or allowed as
/// Redis decides, scripts' calls included. The rules are set and the user
/// authenticated at the start of each seed (its clients are fresh).
#[test]
fn random_commands_as_a_restricted_user_match_redis() {
    random_differential("random differential as a restricted user", 24, |seed| {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0xac1);
        let pool = [
            "+@all",
            "-@all",
            "+@read",
            "+@write",
            "-@write",
            "+@string",
            "-@string",
            "+@list",
            "+@hash",
            "-@keyspace",
            "+@keyspace",
            "-@dangerous",
            "+@scripting",
            "-@scripting",
            "+@pubsub",
            "+@sortedset",
            "-@slow",
            "+@fast",
            "+get",
            "-get",
            "+set",
            "-set",
            "+del",
            "+eval",
            "-eval",
            "+object|encoding",
            "-object",
            "+publish",
            "~s*",
            "~l1",
            "%R~h*",
            "%W~z*",
            "%RW~x1",
            "%R~*",
            "~nokey",
            "allkeys",
            "resetkeys",
            "&*",
            "&ch*",
            "resetchannels",
            "(~p* +@all)",
            "(%R~s* +get +mget)",
        ];
        let mut setuser: Vec<Vec<u8>> = ["ACL", "SETUSER", "rnd", "reset", "on", ">pw"]
            .iter()
            .map(|w| w.as_bytes().to_vec())
            .collect();
        for _ in 0..rng.usize(2..7) {
            setuser.push(pool[rng.usize(..pool.len())].as_bytes().to_vec());
        }
        let mut commands = vec![setuser, vec![b"AUTH".to_vec(), b"rnd".to_vec(), b"pw".to_vec()]];
        commands.extend(random_any_commands(seed, 600));
        (format!("random commands as a restricted user, seed {seed}"), commands)
    });
}

/// Random HyperLogLog sequences (fixed seeds): PFADD of elements from pools
/// of several sizes (so keys stay sparse, split and merge runs, or turn
/// dense), PFCOUNT of one key (the cache) and several, PFMERGE, PFDEBUG,
/// the HLL's bytes read back (GET) and broken by SETRANGE and APPEND, other
/// types among the keys, and `hll-sparse-max-bytes` changed on the way.
#[test]
fn random_hll_sequences_match_redis() {
    random_differential("random hll differential", 12, |seed| {
        (format!("random hll seed {seed}"), random_hll_commands(seed, 400))
    });
}

fn random_hll_commands(seed: u64, n: usize) -> Vec<Vec<Vec<u8>>> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x411);
    let keys = ["p1", "p2", "p3", "p4", "str", "list", "nokey"];
    let mut out: Vec<Vec<String>> = vec![
        vec!["SET".into(), "str".into(), "hello".into()],
        vec!["RPUSH".into(), "list".into(), "a".into()],
    ];
    for _ in 0..n {
        let key = |rng: &mut fastrand::Rng| keys[rng.usize(..keys.len())].to_string();
        let hll_key = |rng: &mut fastrand::Rng| keys[rng.usize(..4)].to_string();
        let cmd: Vec<String> = match rng.u32(0..24) {
            0..=8 => {
                // Element pools of 30, 3000 and 300000 distinct values.
                let pool = [30, 3000, 300_000][rng.usize(..3)];
                let mut c = vec![
                    "PFADD".into(),
                    if rng.u32(0..10) == 0 {
                        key(&mut rng)
                    } else {
                        hll_key(&mut rng)
                    },
                ];
                let most = [4, 40, 400][rng.usize(..3)];
                for _ in 0..rng.usize(0..most) {
                    c.push(format!("e{}", rng.u32(0..pool)));
                }
                c
            }
            9..=11 => vec!["PFCOUNT".into(), hll_key(&mut rng)],
            12..=13 => {
                let mut c = vec!["PFCOUNT".into()];
                c.extend((0..rng.usize(1..4)).map(|_| key(&mut rng)));
                c
            }
            14..=15 => {
                let mut c = vec!["PFMERGE".into(), hll_key(&mut rng)];
                c.extend((0..rng.usize(0..3)).map(|_| key(&mut rng)));
                c
            }
            16..=17 => {
                let sub = ["GETREG", "DECODE", "ENCODING", "TODENSE", "NOSUCH"][rng.usize(..5)];
                vec!["PFDEBUG".into(), sub.into(), key(&mut rng)]
            }
            18..=19 => vec!["GET".into(), hll_key(&mut rng)],
            20 => {
                // Break a register run, the header or the cache.
                let at = [4, 8, 15, 16, 17, 18, 19, 40, 12303][rng.usize(..9)];
                let bytes = [r"\x00", r"\x7f", r"\xff", r"\x40\x00", "x"][rng.usize(..5)];
                vec!["SETRANGE".into(), hll_key(&mut rng), at.to_string(), bytes.into()]
            }
            21 => vec!["APPEND".into(), hll_key(&mut rng), r"\x80".into()],
            22 => vec!["DEL".into(), hll_key(&mut rng)],
            _ => {
                let bytes = ["3000", "40", "200", "0"][rng.usize(..4)];
                vec![
                    "CONFIG".into(),
                    "SET".into(),
                    "hll-sparse-max-bytes".into(),
                    bytes.into(),
                ]
            }
        };
        out.push(cmd);
    }
    out.push(vec![
        "CONFIG".into(),
        "SET".into(),
        "hll-sparse-max-bytes".into(),
        "3000".into(),
    ]);
    out.into_iter()
        .map(|c| c.into_iter().map(|a| unescape(&a)).collect())
        .collect()
}

/// Random writes that move values across their encodings' thresholds
/// (fixed seeds; `COORDIS_ENCODING_SEED=n` replays seed n alone), each
/// followed by OBJECT ENCODING of the key it wrote: strings between int,
/// embstr and raw (shared integers, 20-digit numbers, the 44-byte embstr
/// limit, APPEND, SETRANGE, INCRBYFLOAT), hashes and sorted sets between
/// listpack and hashtable/skiplist by entries and by value length, sets
/// between intset and hashtable, lists, results of the *STORE commands,
/// COPY and RENAME, with the `*-max-*` directives set small by CONFIG SET
/// and changed on the way.
#[test]
fn random_encoding_changes_match_redis() {
    let seeds: Vec<u64> = match std::env::var("COORDIS_ENCODING_SEED") {
        Ok(s) => vec![s.parse().expect("COORDIS_ENCODING_SEED is a number")],
        Err(_) => (1..=12).collect(),
    };
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let mut commands = 0;
    let mut mismatches = vec![];
    for seed in seeds {
        let scenario = Scenario {
            name: format!("random encodings seed {seed} (COORDIS_ENCODING_SEED={seed})"),
            commands: random_encoding_commands(seed, 400),
        };
        commands += compare(
            redis.addr(),
            coordis.addr(),
            &scenario,
            seed.is_multiple_of(2),
            &mut mismatches,
        );
    }
    report("random encoding differential", commands, &mismatches);
}

fn random_encoding_commands(seed: u64, n: usize) -> Vec<Vec<Vec<u8>>> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0xe1c0);
    let small = |rng: &mut fastrand::Rng| ["1", "2", "3", "4", "8"][rng.usize(..5)].to_string();
    let config = |rng: &mut fastrand::Rng| -> Vec<String> {
        let (name, value) = match rng.u32(0..7) {
            0 => ("hash-max-listpack-entries", small(rng)),
            1 => (
                "hash-max-listpack-value",
                ["4", "8", "16", "64"][rng.usize(..4)].to_string(),
            ),
            2 => ("set-max-intset-entries", small(rng)),
            3 => ("zset-max-listpack-entries", small(rng)),
            4 => (
                "zset-max-listpack-value",
                ["4", "8", "16", "64"][rng.usize(..4)].to_string(),
            ),
            5 => (
                "list-max-listpack-size",
                ["2", "4", "-1", "-2"][rng.usize(..4)].to_string(),
            ),
            _ => ("hash-max-ziplist-entries", small(rng)),
        };
        vec!["CONFIG".into(), "SET".into(), name.into(), value]
    };
    // Strings of every length class: small and shared integers, integers
    // that are not canonical, and lengths around embstr's 44 bytes.
    let text = |rng: &mut fastrand::Rng| -> String {
        match rng.u32(0..12) {
            0 => rng.i64(-20..10020).to_string(),
            1 => rng.i64(..).to_string(),
            2 => "12345678901234567890".into(),
            3 => ["007", "-0", "+5", " 5", "1e3", "0x10", ""][rng.usize(..7)].into(),
            4 => "x".repeat(44),
            5 => "y".repeat(45),
            6 => "z".repeat(rng.usize(39..50)),
            _ => format!("v{}", "w".repeat(rng.usize(0..20))),
        }
    };
    let member = |rng: &mut fastrand::Rng| -> String {
        match rng.u32(0..6) {
            0..=2 => rng.i32(-5..20).to_string(),
            3 => "m".repeat(rng.usize(1..20)),
            4 => format!("m{}", rng.u32(0..8)),
            _ => rng.i64(..).to_string(),
        }
    };
    let mut out: Vec<Vec<String>> = (0..7).map(|_| config(&mut rng)).collect();
    for _ in 0..n {
        let pick = |rng: &mut fastrand::Rng, list: &[&str]| list[rng.usize(..list.len())].to_string();
        let (key, cmd): (String, Vec<String>) = match rng.u32(0..40) {
            0..=7 => {
                let k = pick(&mut rng, &["s1", "s2"]);
                let cmd = match rng.u32(0..11) {
                    0..=3 => vec!["SET".into(), k.clone(), text(&mut rng)],
                    4 => vec!["APPEND".into(), k.clone(), pick(&mut rng, &["1", "x", ""])],
                    5 => vec!["SETRANGE".into(), k.clone(), rng.u32(0..50).to_string(), "ab".into()],
                    6 => vec![pick(&mut rng, &["INCR", "DECR"]), k.clone()],
                    7 => vec!["INCRBY".into(), k.clone(), rng.i64(-100_000..100_000).to_string()],
                    8 => vec![
                        "INCRBYFLOAT".into(),
                        k.clone(),
                        pick(&mut rng, &["1.5", "2", "-0.5", "1e2"]),
                    ],
                    9 => vec!["GETSET".into(), k.clone(), text(&mut rng)],
                    _ => vec!["SETBIT".into(), k.clone(), rng.u32(0..100).to_string(), "1".into()],
                };
                (k, cmd)
            }
            8..=14 => {
                let k = pick(&mut rng, &["h1", "h2"]);
                let field = |rng: &mut fastrand::Rng| format!("f{}", "g".repeat(rng.usize(0..12)));
                let cmd = match rng.u32(0..6) {
                    0..=2 => {
                        let mut c = vec!["HSET".into(), k.clone()];
                        for _ in 0..rng.usize(1..4) {
                            c.push(field(&mut rng));
                            c.push(text(&mut rng));
                        }
                        c
                    }
                    3 => vec!["HDEL".into(), k.clone(), field(&mut rng)],
                    4 => vec!["HINCRBY".into(), k.clone(), field(&mut rng), "1".into()],
                    _ => vec!["HSETNX".into(), k.clone(), field(&mut rng), text(&mut rng)],
                };
                (k, cmd)
            }
            15..=21 => {
                let k = pick(&mut rng, &["t1", "t2"]);
                let cmd = match rng.u32(0..6) {
                    0..=2 => {
                        let mut c = vec!["SADD".into(), k.clone()];
                        c.extend((0..rng.usize(1..4)).map(|_| member(&mut rng)));
                        c
                    }
                    3 => vec!["SREM".into(), k.clone(), member(&mut rng)],
                    4 => vec![
                        "SMOVE".into(),
                        pick(&mut rng, &["t1", "t2"]),
                        k.clone(),
                        member(&mut rng),
                    ],
                    _ => vec![
                        pick(&mut rng, &["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]),
                        k.clone(),
                        "t1".into(),
                        "t2".into(),
                    ],
                };
                (k, cmd)
            }
            22..=30 => {
                let k = pick(&mut rng, &["z1", "z2"]);
                let cmd = match rng.u32(0..7) {
                    0..=2 => {
                        let mut c = vec!["ZADD".into(), k.clone()];
                        for _ in 0..rng.usize(1..4) {
                            c.push(rng.i32(-3..10).to_string());
                            c.push(member(&mut rng));
                        }
                        c
                    }
                    3 => vec!["ZREM".into(), k.clone(), member(&mut rng)],
                    4 => vec!["ZINCRBY".into(), k.clone(), "1".into(), member(&mut rng)],
                    5 => vec![
                        pick(&mut rng, &["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]),
                        k.clone(),
                        "2".into(),
                        "z1".into(),
                        "z2".into(),
                    ],
                    _ => vec![
                        "ZRANGESTORE".into(),
                        k.clone(),
                        pick(&mut rng, &["z1", "z2"]),
                        "0".into(),
                        rng.i32(-1..6).to_string(),
                    ],
                };
                (k, cmd)
            }
            31..=33 => {
                let k = "l1".to_string();
                let cmd = match rng.u32(0..4) {
                    0 | 1 => {
                        let mut c = vec![pick(&mut rng, &["RPUSH", "LPUSH"]), k.clone()];
                        c.extend((0..rng.usize(1..6)).map(|_| text(&mut rng)));
                        c
                    }
                    2 => vec!["LPOP".into(), k.clone(), rng.u32(1..4).to_string()],
                    _ => vec!["SORT".into(), pick(&mut rng, &["t1", "t2"]), "STORE".into(), k.clone()],
                };
                (k, cmd)
            }
            34 => {
                let (src, dst) = [("h1", "h2"), ("t1", "t2"), ("z1", "z2"), ("s1", "s2")][rng.usize(..4)];
                (
                    dst.into(),
                    vec!["COPY".into(), src.into(), dst.into(), "REPLACE".into()],
                )
            }
            35 => {
                let (src, dst) = [("h2", "h1"), ("t2", "t1"), ("z2", "z1"), ("s2", "s1")][rng.usize(..4)];
                (dst.into(), vec!["RENAME".into(), src.into(), dst.into()])
            }
            36 => {
                let k = pick(&mut rng, &["s1", "h1", "t1", "z1", "l1", "h2", "t2", "z2"]);
                (k.clone(), vec!["DEL".into(), k])
            }
            _ => {
                let k = pick(&mut rng, &["s1", "h1", "t1", "z1", "l1"]);
                (k, config(&mut rng))
            }
        };
        out.push(cmd);
        out.push(vec!["OBJECT".into(), "ENCODING".into(), key]);
    }
    // Back to the defaults for whatever runs next on these servers.
    for (name, value) in [
        ("hash-max-listpack-entries", "512"),
        ("hash-max-listpack-value", "64"),
        ("set-max-intset-entries", "512"),
        ("zset-max-listpack-entries", "128"),
        ("zset-max-listpack-value", "64"),
        ("list-max-listpack-size", "-2"),
    ] {
        out.push(vec!["CONFIG".into(), "SET".into(), name.into(), value.into()]);
    }
    out.into_iter()
        .map(|c| c.into_iter().map(String::into_bytes).collect())
        .collect()
}

/// `\\xHH` escapes in a generated argument as their bytes.
fn unescape(arg: &str) -> Vec<u8> {
    let mut out = vec![];
    let b = arg.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 3 < b.len() {
            out.push(u8::from_str_radix(&arg[i + 2..i + 4], 16).expect("hex escape"));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Runs seeds `1..=seeds` of a random command stream (`generate` names
/// each) on a redis-server and on coordis, RESP3 for even seeds, and fails
/// with every mismatch.
fn random_differential(label: &str, seeds: u64, generate: impl Fn(u64) -> (String, Vec<Vec<Vec<u8>>>)) {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let mut commands = 0;
    let mut mismatches = vec![];
    for seed in 1..=seeds {
        let (name, commands_of_seed) = generate(seed);
        let scenario = Scenario {
            name,
            commands: commands_of_seed,
        };
        commands += compare(
            redis.addr(),
            coordis.addr(),
            &scenario,
            seed.is_multiple_of(2),
            &mut mismatches,
        );
    }
    report(label, commands, &mismatches);
}

fn random_any_commands(seed: u64, n: usize) -> Vec<Vec<Vec<u8>>> {
    use coordis::internals::flags::BLOCKING;
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
    // Every command row, subcommands flattened: (words naming it, row).
    let mut rows: Vec<(Vec<String>, &'static coordis::internals::CommandSpec)> = vec![];
    for spec in coordis::internals::commands() {
        let top = spec.name.split('|').next().unwrap();
        if spec.flags & BLOCKING != 0 || NOT_FUZZED.iter().any(|(n, _)| *n == top) || top.starts_with("coordis.") {
            continue;
        }
        if spec.subcommands.is_empty() {
            rows.push((vec![spec.name.to_uppercase()], spec));
        } else {
            for sub in spec
                .subcommands
                .iter()
                .filter(|s| !NOT_FUZZED.iter().any(|(n, _)| *n == s.name))
            {
                let words = sub.name.split('|').map(str::to_uppercase).collect();
                rows.push((words, sub));
            }
        }
    }
    let keys = ["s1", "s2", "l1", "h1", "z1", "st1", "x1", "p1", "nokey"];
    let values = [
        "v",
        "",
        "0",
        "1",
        "-1",
        "2",
        "3",
        "10",
        "100",
        "1.5",
        "-2.5",
        "inf",
        "-inf",
        "+inf",
        "nan",
        "abc",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551616",
        "1e3",
        "(1",
        "[a",
        "(a",
        "-",
        "+",
        "0-1",
        "1-1",
        "2-0",
        "f1",
        "f2",
        "a",
        "b",
    ];
    let words = [
        "NX",
        "XX",
        "GT",
        "LT",
        "CH",
        "INCR",
        "GET",
        "EX",
        "PX",
        "EXAT",
        "PXAT",
        "KEEPTTL",
        "PERSIST",
        "COUNT",
        "LIMIT",
        "WITHSCORES",
        "WITHVALUES",
        "REV",
        "BYSCORE",
        "BYLEX",
        "MATCH",
        "TYPE",
        "LEFT",
        "RIGHT",
        "BEFORE",
        "AFTER",
        "MIN",
        "MAX",
        "STORE",
        "ASC",
        "DESC",
        "ALPHA",
        "BY",
        "WEIGHTS",
        "AGGREGATE",
        "SUM",
        "RANK",
        "MAXLEN",
        "MINID",
        "IDLE",
        "JUSTID",
        "FORCE",
        "STREAMS",
        "GROUP",
        "NOACK",
        "MKSTREAM",
        "REPLACE",
        "DB",
        "BIT",
        "BYTE",
        "OVERFLOW",
        "WRAP",
        "SAT",
        "FAIL",
        "SET",
        "INCRBY",
        "u8",
        "i16",
        "AND",
        "OR",
        "XOR",
        "NOT",
        "LEN",
        "IDX",
        "MINMATCHLEN",
        "WITHMATCHLEN",
        "~",
        "=",
        "ENTRIESREAD",
        "LASTID",
        "RETRYCOUNT",
        "TIME",
        "NOMKSTREAM",
        "ABSTTL",
        "COPY",
        "WITHDIST",
        "WITHCOORD",
        "WITHHASH",
        "ANY",
        "FROMMEMBER",
        "FROMLONLAT",
        "BYRADIUS",
        "BYBOX",
        "STOREDIST",
        "km",
        "m",
    ];
    let setup: Vec<Vec<&str>> = vec![
        vec!["SET", "s1", "hello"],
        vec!["SET", "s2", "42"],
        vec!["RPUSH", "l1", "a", "b", "c", "1", "2"],
        vec!["HSET", "h1", "f1", "v1", "f2", "2", "f3", "3.5"],
        vec!["ZADD", "z1", "1", "a", "2", "b", "3", "c"],
        vec!["SADD", "st1", "1", "2", "3", "4"],
        vec!["XADD", "x1", "1-1", "f", "v"],
        vec!["XADD", "x1", "2-1", "g", "w"],
        vec!["XGROUP", "CREATE", "x1", "g", "0"],
        vec!["PFADD", "p1", "a", "b", "c"],
    ];
    let mut out: Vec<Vec<String>> = vec![];
    let mut in_multi = false;
    for i in 0..n {
        if i % 250 == 0 {
            out.extend(setup.iter().map(|c| c.iter().map(|s| s.to_string()).collect()));
        }
        let (name, spec) = &rows[rng.usize(..rows.len())];
        let mut cmd: Vec<String> = name.clone();
        let fixed = spec.arity.unsigned_abs() as usize;
        let mut argc = if spec.arity >= 0 {
            fixed
        } else {
            fixed + rng.usize(0..4)
        };
        match rng.u32(0..20) {
            0 => argc = argc.saturating_sub(1).max(name.len()),
            1 => argc += 1,
            _ => {}
        }
        while cmd.len() < argc {
            let at = cmd.len();
            let keyed = spec.keys.0 > 0 && at as i32 >= spec.keys.0 && (spec.keys.1 < 0 || at as i32 <= spec.keys.1);
            let arg = match (keyed, rng.u32(0..20)) {
                (true, 0..=15) | (false, 0..=5) => keys[rng.usize(..keys.len())],
                (_, 6..=13) | (true, 16..=17) => values[rng.usize(..values.len())],
                _ => words[rng.usize(..words.len())],
            };
            cmd.push(arg.to_string());
        }
        // A short relative expiry would expire at a different point of the
        // run on each server (they run the stream one after the other): such
        // times become long ones. Past absolute times stay (deterministic).
        let relative = |w: &str| ["EX", "PX"].iter().any(|k| w.eq_ignore_ascii_case(k));
        let timed_at = ["EXPIRE", "PEXPIRE", "SETEX", "PSETEX"]
            .contains(&cmd[0].as_str())
            .then_some(2);
        for i in 1..cmd.len() {
            if (relative(&cmd[i - 1]) || timed_at == Some(i))
                && cmd[i].parse::<i64>().is_ok_and(|t| (1..100_000).contains(&t))
            {
                cmd[i] = "100000".into();
            }
        }
        // Remaining times and deadlines are read (and set) at another
        // instant on each server: compared within a tolerance, and left out
        // of transactions (EXEC's reply is compared exactly).
        match (TIMES.iter().find(|(name, _)| cmd[0] == *name), in_multi) {
            (Some(_), true) => continue,
            (Some((_, within)), false) => out.push([vec![format!("±{within}")], cmd].concat()),
            (None, _) => {
                if cmd.len() == 1 {
                    match cmd[0].as_str() {
                        "MULTI" => in_multi = true,
                        "EXEC" | "DISCARD" => in_multi = false,
                        _ => {}
                    }
                }
                out.push(cmd);
            }
        }
    }
    out.into_iter()
        .map(|c| c.into_iter().map(String::into_bytes).collect())
        .collect()
}

/// The effects feed replayed into a real Redis gives coordis's dataset:
/// each random workload (every family, and every command) runs on
/// coordis with a feed reader attached; the feed's bytes, written as the
/// append-only file a fresh redis-server loads at start (so Redis applies
/// them as it applies its primary's stream or its own AOF, obeying them
/// without a client's checks), must leave the same keys, types, values and
/// TTLs (within a tolerance) as coordis has. A write whose effect is
/// missing, relative, random or wrong shows here as a differing key.
#[test]
fn the_effects_feed_replayed_into_redis_gives_the_same_dataset() {
    if RedisServer::start(&[]).unwrap().is_none() {
        return;
    }
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let mut feed = coordis.control().effects();
    let workloads: Vec<(String, Vec<Vec<Vec<u8>>>)> = (1..=4)
        .flat_map(|seed| {
            let family = ["hash", "list", "set"][(seed % 3) as usize];
            [
                (format!("zset seed {seed}"), random_zset_commands(seed, 400)),
                (format!("{family} seed {seed}"), random_type_commands(family, seed, 300)),
                (format!("stream seed {seed}"), random_stream_commands(seed, 400)),
                (format!("geo seed {seed}"), random_geo_commands(seed, 300)),
                (format!("every command seed {seed}"), random_any_commands(seed, 1000)),
            ]
        })
        .collect();
    let dbs: Vec<usize> = (0..16).collect();
    let mut differences = vec![];
    let mut effects = 0;
    for (name, commands) in &workloads {
        let mut c = coordis::testing::RawClient::connect(coordis.addr()).unwrap();
        c.command(&["FLUSHALL"]).unwrap();
        feed.try_bytes();
        for args in commands {
            let raw: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            let _ = c.command_bytes(&raw);
        }
        drop(c);
        let stream = feed.try_bytes();
        effects += coordis::testing::parse_commands(&stream).len();
        let dir = std::env::temp_dir().join(format!("coordis-replay-{}-{}", std::process::id(), effects));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("appendonly.aof"), &stream).unwrap();
        let dir_arg = dir.to_string_lossy().into_owned();
        let redis = RedisServer::start(&[
            "--dir",
            &dir_arg,
            "--appendonly",
            "yes",
            "--appendfilename",
            "appendonly.aof",
        ])
        .unwrap()
        .expect("redis-server");
        let ours = replicated_view(coordis::testing::dataset(coordis.addr(), &dbs).unwrap());
        let theirs = replicated_view(coordis::testing::dataset(redis.addr(), &dbs).unwrap());
        if theirs.is_empty() && !ours.is_empty() && !stream.is_empty() {
            differences.push(format!(
                "[{name}] Redis loaded nothing: is the stream a valid append-only file?"
            ));
        }
        for difference in coordis::testing::compare_datasets(&ours, &theirs, 1000) {
            differences.push(format!("[{name}] {difference}"));
        }
        // Where two values differ, the first line that does.
        for (key, a) in &ours {
            let Some(b) = theirs.get(key).filter(|b| b.kind == a.kind && b.value != a.value) else {
                continue;
            };
            let at = a
                .value
                .iter()
                .zip(&b.value)
                .position(|(x, y)| x != y)
                .unwrap_or(a.value.len().min(b.value.len()));
            let line = |v: &Vec<Vec<u8>>| {
                v.get(at)
                    .map_or("<end>".into(), |l| String::from_utf8_lossy(l).into_owned())
            };
            differences.push(format!(
                "[{name}] db {} key {}: first difference: coordis {:?}, redis {:?}",
                key.0,
                String::from_utf8_lossy(&key.1),
                line(&a.value),
                line(&b.value)
            ));
        }
        drop(redis);
        let _ = std::fs::remove_dir_all(&dir);
    }
    report(
        &format!("effects feed replayed into Redis: {} workloads", workloads.len()),
        effects,
        &differences,
    );
}

/// A dataset as Redis's own replication carries it: a consumer group's
/// `entries-read` and `lag` are left out, since the XCLAIMs Redis 7.0.15
/// propagates for XREADGROUP do not carry them, and so is a pending
/// entry's delivery count, which a read of the consumer's history raises
/// without propagating anything, and a consumer with nothing pending,
/// which an XCLAIM or XAUTOCLAIM that claimed nothing creates without an
/// effect (a real replica of a real primary differs there too).
fn replicated_view(
    mut keys: std::collections::BTreeMap<(usize, Vec<u8>), coordis::testing::KeyDump>,
) -> std::collections::BTreeMap<(usize, Vec<u8>), coordis::testing::KeyDump> {
    for dump in keys.values_mut().filter(|d| d.kind == "stream") {
        dump.value
            .retain(|l| !(l.starts_with(b"consumer ") && l.ends_with(b" pel-count=0")));
        for line in dump
            .value
            .iter_mut()
            .filter(|l| l.starts_with(b"group ") || l.starts_with(b"pending "))
        {
            let text = String::from_utf8_lossy(line).into_owned();
            let kept: Vec<&str> = text
                .split(' ')
                .filter(|f| {
                    !["entries-read=", "lag=", "delivery-count="]
                        .iter()
                        .any(|p| f.starts_with(p))
                })
                .collect();
            *line = kept.join(" ").into_bytes();
        }
    }
    keys
}
