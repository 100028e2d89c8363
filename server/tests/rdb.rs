//! The RDB format against Redis 7.0.15: DUMP bytes equal for the same
//! values, DUMP/RESTORE both ways, a file saved by either server loads in
//! the other (and passes `redis-check-rdb`), and corrupted payloads are
//! Redis's error texts, never a crash.

use std::path::PathBuf;
use std::process::Command;

use coordis::testing::{compare_datasets, dataset, RawClient, RedisServer, TempDir};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Builds the same dataset on a server: every type, small and large
/// encodings, int and non-int sets, a TTL, two databases.
fn populate(c: &mut RawClient) {
    let many: Vec<String> = (0..700).map(|i| format!("m{i}")).collect();
    let ints: Vec<String> = (0..600).map(|i| i.to_string()).collect();
    let mut cmds: Vec<Vec<String>> = vec![
        vec!["SET".into(), "str".into(), "hello".into()],
        vec!["SET".into(), "int".into(), "12345".into()],
        vec!["SET".into(), "long".into(), "x".repeat(100)],
        vec!["SET".into(), "ttl".into(), "v".into(), "EX".into(), "1000".into()],
        vec![
            "RPUSH".into(),
            "list".into(),
            "a".into(),
            "1".into(),
            "-5".into(),
            "300".into(),
        ],
        vec!["SADD".into(), "iset".into(), "3".into(), "1".into(), "2".into()],
        vec!["SADD".into(), "sset".into(), "a".into(), "b".into()],
        vec![
            "HSET".into(),
            "hash".into(),
            "f".into(),
            "v".into(),
            "n".into(),
            "1".into(),
        ],
        vec![
            "ZADD".into(),
            "zset".into(),
            "1".into(),
            "a".into(),
            "2.5".into(),
            "b".into(),
            "-0".into(),
            "c".into(),
        ],
    ];
    let mut big_list = vec!["RPUSH".to_string(), "biglist".into()];
    big_list.extend(many.iter().cloned());
    cmds.push(big_list);
    let mut big_iset = vec!["SADD".to_string(), "bigiset".into()];
    big_iset.extend(ints.iter().cloned());
    cmds.push(big_iset);
    let mut big_hash = vec!["HSET".to_string(), "bighash".into()];
    for m in &many {
        big_hash.push(m.clone());
        big_hash.push(format!("value-{m}"));
    }
    cmds.push(big_hash);
    let mut big_zset = vec!["ZADD".to_string(), "bigzset".into()];
    for (i, m) in many.iter().enumerate() {
        big_zset.push(format!("{}", i as f64 / 3.0));
        big_zset.push(m.clone());
    }
    cmds.push(big_zset);
    cmds.push(vec!["SELECT".into(), "2".into()]);
    cmds.push(vec!["SET".into(), "other".into(), "db".into()]);
    cmds.push(vec!["SELECT".into(), "0".into()]);
    for cmd in cmds {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let reply = c.command(&args).unwrap();
        assert!(!reply.starts_with(b"-"), "{args:?}: {}", text(&reply));
    }
}

const KEYS: &[&str] = &[
    "str", "int", "long", "list", "iset", "sset", "hash", "zset", "biglist", "bigiset", "bighash", "bigzset",
];
/// Keys whose DUMP is deterministic (no hashtable order).
const DETERMINISTIC: &[&str] = &[
    "str", "int", "long", "list", "iset", "hash", "zset", "biglist", "bigzset",
];

fn dump(c: &mut RawClient, key: &str) -> Vec<u8> {
    c.command(&["DUMP", key]).unwrap()
}

fn payload(reply: &[u8]) -> Vec<u8> {
    // A bulk reply: $<len>\r\n<bytes>\r\n.
    let nl = reply.iter().position(|&b| b == b'\n').unwrap();
    reply[nl + 1..reply.len() - 2].to_vec()
}

#[test]
fn dump_bytes_equal_redis_s_and_restore_both_ways() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut r = RawClient::connect(redis.addr()).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    populate(&mut r);
    populate(&mut c);
    for key in DETERMINISTIC {
        assert_eq!(text(&dump(&mut c, key)), text(&dump(&mut r, key)), "DUMP {key}");
    }
    // Each way: restore under a new name, then compare the values.
    for key in KEYS {
        let from_redis = payload(&dump(&mut r, key));
        let from_coordis = payload(&dump(&mut c, key));
        let new = format!("restored:{key}");
        assert_eq!(
            c.command_bytes(&[b"RESTORE", new.as_bytes(), b"0", &from_redis])
                .unwrap(),
            b"+OK\r\n",
            "{key}"
        );
        assert_eq!(
            r.command_bytes(&[b"RESTORE", new.as_bytes(), b"0", &from_coordis])
                .unwrap(),
            b"+OK\r\n",
            "{key}"
        );
        for side in [&mut c, &mut r] {
            let enc_a = side.command(&["OBJECT", "ENCODING", key]).unwrap();
            let enc_b = side.command(&["OBJECT", "ENCODING", &new]).unwrap();
            assert_eq!(text(&enc_a), text(&enc_b), "{key}");
        }
    }
    let a = dataset(redis.addr(), &[0, 2]).unwrap();
    let b = dataset(server.addr(), &[0, 2]).unwrap();
    let diff = compare_datasets(&a, &b, 5000);
    assert!(diff.is_empty(), "{diff:#?}");
}

/// DEBUG OBJECT's `serializedlength` field of `key`.
fn serialized_length(c: &mut RawClient, key: &str) -> String {
    let reply = text(&c.command(&["DEBUG", "OBJECT", key]).unwrap());
    reply
        .split_whitespace()
        .find_map(|f| f.strip_prefix("serializedlength:"))
        .unwrap_or_else(|| panic!("DEBUG OBJECT {key}: {reply}"))
        .to_string()
}

#[test]
fn debug_object_serialized_length_is_redis_s_for_every_encoding() {
    let Some(redis) = RedisServer::start(&["--enable-debug-command", "yes"]).unwrap() else {
        return;
    };
    let mut builder = coordis::Server::builder();
    builder
        .config_mut()
        .apply("enable-debug-command", &["yes".to_string()])
        .unwrap();
    let server = builder.start_blocking().unwrap();
    let mut r = RawClient::connect(redis.addr()).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    populate(&mut r);
    populate(&mut c);
    // Hash-ordered encodings have the same size in any order.
    for key in KEYS {
        assert_eq!(serialized_length(&mut c, key), serialized_length(&mut r, key), "{key}");
    }
}

#[test]
fn restore_errors_and_corruption_as_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut r = RawClient::connect(redis.addr()).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    populate(&mut r);
    populate(&mut c);
    let good = payload(&dump(&mut r, "hash"));
    let cases: Vec<Vec<Vec<u8>>> = vec![
        vec![b"RESTORE".to_vec(), b"hash".to_vec(), b"0".to_vec(), good.clone()],
        vec![b"RESTORE".to_vec(), b"n1".to_vec(), b"-1".to_vec(), good.clone()],
        vec![b"RESTORE".to_vec(), b"n1".to_vec(), b"x".to_vec(), good.clone()],
        vec![b"RESTORE".to_vec(), b"n1".to_vec(), b"0".to_vec(), b"short".to_vec()],
        vec![
            b"RESTORE".to_vec(),
            b"n1".to_vec(),
            b"0".to_vec(),
            good.clone(),
            b"IDLETIME".to_vec(),
            b"-1".to_vec(),
        ],
        vec![
            b"RESTORE".to_vec(),
            b"n1".to_vec(),
            b"0".to_vec(),
            good.clone(),
            b"FREQ".to_vec(),
            b"256".to_vec(),
        ],
        vec![
            b"RESTORE".to_vec(),
            b"n1".to_vec(),
            b"0".to_vec(),
            good.clone(),
            b"IDLETIME".to_vec(),
            b"1".to_vec(),
            b"FREQ".to_vec(),
            b"1".to_vec(),
        ],
        vec![
            b"RESTORE".to_vec(),
            b"n1".to_vec(),
            b"0".to_vec(),
            good.clone(),
            b"BOGUS".to_vec(),
        ],
        vec![
            b"RESTORE".to_vec(),
            b"past".to_vec(),
            b"1".to_vec(),
            good.clone(),
            b"ABSTTL".to_vec(),
        ],
        vec![b"EXISTS".to_vec(), b"past".to_vec()],
        vec![
            b"RESTORE".to_vec(),
            b"hash".to_vec(),
            b"1".to_vec(),
            good.clone(),
            b"ABSTTL".to_vec(),
            b"REPLACE".to_vec(),
        ],
        vec![b"EXISTS".to_vec(), b"hash".to_vec()],
    ];
    for case in &cases {
        let args: Vec<&[u8]> = case.iter().map(Vec::as_slice).collect();
        assert_eq!(
            text(&c.command_bytes(&args).unwrap()),
            text(&r.command_bytes(&args).unwrap()),
            "{:?}",
            text(case[..2].concat().as_slice())
        );
    }
    // The cases deleted "hash": build it again.
    populate(&mut r);
    // Flip and truncate every byte of payloads of every type: the same
    // reply as Redis's when both agree on an error text; never a crash.
    for key in KEYS.iter().filter(|k| !k.starts_with("big")) {
        let p = payload(&dump(&mut r, key));
        for i in 0..p.len() {
            let mut bad = p.clone();
            bad[i] ^= 0x5A;
            let reply = c.command_bytes(&[b"RESTORE", b"fuzz", b"0", &bad, b"REPLACE"]).unwrap();
            assert!(
                reply.starts_with(b"-ERR DUMP payload version or checksum are wrong"),
                "{key} {i}: {}",
                text(&reply)
            );
            let reply = c
                .command_bytes(&[b"RESTORE", b"fuzz", b"0", &p[..i], b"REPLACE"])
                .unwrap();
            assert!(reply.starts_with(b"-ERR"), "{key} cut {i}: {}", text(&reply));
        }
    }
    // Corrupt bodies with a valid footer: Bad data format, never a panic.
    let mut seed: u64 = 0x2545F4914F6CDD1D;
    for key in KEYS {
        let p = payload(&dump(&mut r, key));
        let body = &p[..p.len() - 10];
        for _ in 0..200 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut bad = body.to_vec();
            let at = (seed as usize) % bad.len();
            bad[at] ^= (seed >> 32) as u8 | 1;
            if seed.is_multiple_of(3) {
                bad.truncate(at.max(1));
            }
            let sealed = reseal(&bad);
            let reply = c
                .command_bytes(&[b"RESTORE", b"fuzz", b"0", &sealed, b"REPLACE"])
                .unwrap();
            assert!(
                reply == b"+OK\r\n" || reply.starts_with(b"-ERR Bad data format"),
                "{key}: {}",
                text(&reply)
            );
        }
    }
    assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n");
}

/// A body with a right footer (Redis's CRC-64, computed here bit by bit).
fn reseal(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(&10u16.to_le_bytes());
    let mut crc: u64 = 0;
    for &b in &out {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x95AC_9329_AC4B_C9B5
            } else {
                crc >> 1
            };
        }
    }
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[test]
fn files_load_both_ways() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let dir_r = TempDir::new("from-redis");
    let dir_c = TempDir::new("from-coordis");
    let mut r = RawClient::connect(redis.addr()).unwrap();
    populate(&mut r);
    r.command(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nredis.register_function('f', function() return 7 end)",
    ])
    .unwrap();
    assert_eq!(r.command(&["SAVE"]).unwrap(), b"+OK\r\n");
    let dir_reply = text(&r.command(&["CONFIG", "GET", "dir"]).unwrap());
    let redis_dir = dir_reply.lines().nth(4).unwrap().to_string();
    std::fs::copy(PathBuf::from(&redis_dir).join("dump.rdb"), dir_r.0.join("dump.rdb")).unwrap();
    // Redis's file into coordis.
    let server = coordis::Server::builder().dir(dir_r.text()).start_blocking().unwrap();
    let a = dataset(redis.addr(), &[0, 2]).unwrap();
    let b = dataset(server.addr(), &[0, 2]).unwrap();
    let diff = compare_datasets(&a, &b, 5000);
    assert!(diff.is_empty(), "{diff:#?}");
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(c.command(&["FCALL", "f", "0"]).unwrap(), b":7\r\n");
    for key in DETERMINISTIC {
        assert_eq!(
            text(&dump(&mut c, key)),
            text(&dump(&mut r, key)),
            "DUMP {key} after load"
        );
    }
    // coordis's file: redis-check-rdb passes, and Redis loads it.
    std::fs::remove_file(dir_r.0.join("dump.rdb")).unwrap();
    assert_eq!(c.command(&["SAVE"]).unwrap(), b"+OK\r\n");
    let file = dir_r.0.join("dump.rdb");
    std::fs::copy(&file, dir_c.0.join("dump.rdb")).unwrap();
    let check = Command::new("redis-check-rdb").arg(&file).output().unwrap();
    assert!(check.status.success(), "{}", text(&check.stdout));
    let dir_arg = dir_c.text().to_string();
    let Some(redis2) = RedisServer::start(&["--dir", &dir_arg]).unwrap() else {
        return;
    };
    let c2 = dataset(redis2.addr(), &[0, 2]).unwrap();
    let diff = compare_datasets(&b, &c2, 5000);
    assert!(diff.is_empty(), "{diff:#?}");
    let mut r2 = RawClient::connect(redis2.addr()).unwrap();
    assert_eq!(r2.command(&["FCALL", "f", "0"]).unwrap(), b":7\r\n");
}
