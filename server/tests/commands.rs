//! The command table against real Redis 7.0.15: for every command coordis
//! has, `COMMAND INFO` must give Redis's name, arity, flags, key positions,
//! ACL categories, tips and key specs, and list the same subcommands with
//! theirs, in RESP2 and RESP3. (Argument docs are not reproduced: README's
//! known differences.)
//! Also what INFO and MEMORY report: Redis's layout, coordis's figures.

use coordis::testing::{RawClient, RedisServer};

/// A parsed RESP2 reply.
#[derive(Debug, PartialEq)]
enum Value {
    /// A bulk string or an error.
    Text(String),
    /// A status line (`+RO`), kept apart from a bulk string with the same
    /// text because Redis sends flags one way and tips the other.
    Status(String),
    Int(i64),
    Array(Vec<Value>),
    Nil,
}

fn parse(bytes: &[u8], at: &mut usize) -> Value {
    let end = at.to_owned() + bytes[*at..].windows(2).position(|w| w == b"\r\n").unwrap();
    let line = String::from_utf8_lossy(&bytes[*at + 1..end]).into_owned();
    let kind = bytes[*at];
    *at = end + 2;
    match kind {
        b'+' => Value::Status(line),
        b'-' => Value::Text(line),
        b':' => Value::Int(line.parse().unwrap()),
        b'$' => {
            let n: i64 = line.parse().unwrap();
            if n < 0 {
                return Value::Nil;
            }
            let text = String::from_utf8_lossy(&bytes[*at..*at + n as usize]).into_owned();
            *at += n as usize + 2;
            Value::Text(text)
        }
        b'*' => {
            let n: i64 = line.parse().unwrap();
            if n < 0 {
                return Value::Nil;
            }
            Value::Array((0..n).map(|_| parse(bytes, at)).collect())
        }
        other => panic!("unexpected reply type {:?}", other as char),
    }
}

/// One COMMAND INFO entry with its subcommands in name order (coordis
/// lists them in its own order, and only those it has).
fn essentials(entry: &Value) -> Value {
    let Value::Array(fields) = entry else {
        return Value::Nil;
    };
    let mut out: Vec<Value> = vec![];
    for (i, field) in fields.iter().enumerate() {
        match i {
            0..=8 => out.push(clone(field)),
            9 => {
                let Value::Array(subs) = field else { continue };
                let mut subs: Vec<Value> = subs.iter().map(essentials).collect();
                subs.sort_by_key(|v| format!("{v:?}"));
                out.push(Value::Array(subs));
            }
            _ => {}
        }
    }
    Value::Array(out)
}

/// Where an entry's subcommands are; the fields before it (name to key
/// specs) are compared as they are.
const SUBCOMMANDS: usize = 9;

fn clone(v: &Value) -> Value {
    match v {
        Value::Text(t) => Value::Text(t.clone()),
        Value::Status(t) => Value::Status(t.clone()),
        Value::Int(n) => Value::Int(*n),
        Value::Array(a) => Value::Array(a.iter().map(clone).collect()),
        Value::Nil => Value::Nil,
    }
}

fn info(c: &mut RawClient, name: &str) -> Value {
    let reply = c.command(&["COMMAND", "INFO", name]).unwrap();
    let Value::Array(mut entries) = parse(&reply, &mut 0) else {
        panic!("COMMAND INFO {name}")
    };
    essentials(&entries.remove(0))
}

#[test]
fn command_info_matches_redis_for_every_command() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    let Value::Array(names) = parse(&ours.command(&["COMMAND", "LIST"]).unwrap(), &mut 0) else {
        panic!("COMMAND LIST")
    };
    let mut mismatches = vec![];
    let mut own = vec![];
    for name in &names {
        let Value::Text(name) = name else { continue };
        // coordis's own namespace (the test-control commands) has no
        // counterpart in Redis.
        if name.starts_with("coordis.") {
            if !name.contains('|') {
                own.push(name.clone());
            }
            continue;
        }
        let (a, b) = (info(&mut ours, name), info(&mut theirs, name));
        if let (Value::Array(a_fields), Value::Array(b_fields)) = (&a, &b) {
            // coordis lists the subcommands it has; each must be Redis's.
            let subs = |v: &[Value]| match v.get(SUBCOMMANDS) {
                Some(Value::Array(s)) => s.iter().map(clone).collect::<Vec<_>>(),
                _ => vec![],
            };
            let (ours_subs, redis_subs) = (subs(a_fields), subs(b_fields));
            if a_fields[..SUBCOMMANDS] != b_fields[..SUBCOMMANDS] {
                mismatches.push(format!(
                    "{name}: coordis {:?}\n  redis {:?}",
                    &a_fields[..SUBCOMMANDS],
                    &b_fields[..SUBCOMMANDS]
                ));
            }
            for sub in &ours_subs {
                if !redis_subs.contains(sub) {
                    mismatches.push(format!("{name}: subcommand {sub:?} differs from Redis's"));
                }
            }
        } else {
            mismatches.push(format!("{name}: coordis {a:?}, redis {b:?}"));
        }
    }
    assert_eq!(
        own,
        [
            "coordis.clock",
            "coordis.server",
            "coordis.fault",
            "coordis.memory",
            "coordis.replication",
            "coordis.cluster"
        ],
        "coordis's own commands"
    );
    println!(
        "commands: {} compared, {} mismatches",
        names.len() - own.len(),
        mismatches.len()
    );
    assert!(names.len() >= 100, "{names:?}");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// A RESP3 connection that returns each reply's bytes as sent. (Its own
/// framing: the usual decoder refuses a set of maps, which key specs are.)
struct Resp3Client {
    stream: std::net::TcpStream,
    buf: Vec<u8>,
}

impl Resp3Client {
    fn connect(addr: std::net::SocketAddr) -> Resp3Client {
        let stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut c = Resp3Client { stream, buf: vec![] };
        assert!(c.command(&["HELLO", "3"]).starts_with(b"%"), "HELLO 3");
        c
    }

    fn command(&mut self, args: &[&str]) -> Vec<u8> {
        use std::io::{Read, Write};
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.stream.write_all(&RawClient::encode(&args)).unwrap();
        loop {
            if let Some(n) = resp3_frame_len(&self.buf, 0) {
                return self.buf.drain(..n).collect();
            }
            let mut chunk = [0u8; 16384];
            let n = self.stream.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Where the RESP3 frame starting at `at` ends, if `buf` holds all of it.
fn resp3_frame_len(buf: &[u8], at: usize) -> Option<usize> {
    let line_end = at + buf.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
    let header = std::str::from_utf8(&buf[at + 1..line_end]).unwrap();
    let mut end = line_end + 2;
    let children = match buf[at] {
        b'$' | b'!' | b'=' => {
            let n: i64 = header.parse().unwrap();
            if n >= 0 {
                end += n as usize + 2;
            }
            return (buf.len() >= end).then_some(end);
        }
        b'*' | b'~' | b'>' => header.parse::<i64>().unwrap().max(0) as usize,
        b'%' | b'|' => 2 * header.parse::<usize>().unwrap(),
        _ => 0,
    };
    for _ in 0..children {
        end = resp3_frame_len(buf, end)?;
    }
    Some(end)
}

/// In RESP3 the tips and key specs are sets of bulk strings and of maps
/// (the flags a set of statuses), byte for byte as Redis sends them: for
/// commands with each kind of search (index, keyword, keynum, unknown),
/// notes and tips.
#[test]
fn command_info_in_resp3_matches_redis_bytes() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut ours = Resp3Client::connect(server.addr());
    let mut theirs = Resp3Client::connect(redis.addr());
    let mut compared = vec![];
    for name in [
        "get",
        "set",
        "eval",
        "xreadgroup",
        "migrate",
        "sort",
        "keys",
        "config|set",
    ] {
        let args = ["COMMAND", "INFO", name];
        let (a, b) = (ours.command(&args), theirs.command(&args));
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "COMMAND INFO {name} in RESP3"
        );
        compared.push((name, b));
    }
    let redis_says = |name: &str, text: &str| {
        let (_, reply) = compared.iter().find(|(n, _)| *n == name).unwrap();
        String::from_utf8_lossy(reply).contains(text)
    };
    // The replies compared carry what this test is about.
    assert!(redis_says("sort", "$5\r\nnotes\r\n"), "SORT's key specs have notes");
    assert!(
        redis_says("xreadgroup", "$7\r\nkeyword\r\n"),
        "XREADGROUP begins at a keyword"
    );
    assert!(redis_says("eval", "$6\r\nkeynum\r\n"), "EVAL counts its keys");
    assert!(redis_says("get", "~2\r\n+RO\r\n+access\r\n"), "GET's key flags");
    assert!(
        redis_says("keys", "$25\r\nrequest_policy:all_shards\r\n"),
        "KEYS's tips"
    );
}

/// `container|sub` names and unknown ones, as Redis answers them.
#[test]
fn command_info_of_subcommands_matches_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    for name in [
        "client|list",
        "CONFIG|GET",
        "script|kill",
        "pubsub|numpat",
        "command|count",
    ] {
        assert_eq!(info(&mut ours, name), info(&mut theirs, name), "{name}");
    }
    for args in [
        &["COMMAND", "INFO", "nosuch", "client|nosuch"][..],
        &["CLIENT", "NOSUCH"],
        &["client"],
    ] {
        assert_eq!(ours.command(args).unwrap(), theirs.command(args).unwrap(), "{args:?}");
    }
}

/// INFO lists the sections Redis 7.0.15 lists, in its order, for the
/// default, `everything`, and sections named together, each with the
/// fields Redis prints, in its order (values aside).
#[test]
fn info_sections_and_fields_match_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let layout = |addr, args: &[&str]| -> Vec<String> {
        let mut c = RawClient::connect(addr).unwrap();
        c.command(&["SET", "k", "v"]).unwrap();
        let mut cmd = vec!["INFO"];
        cmd.extend_from_slice(args);
        let text = String::from_utf8(c.command(&cmd).unwrap()).unwrap();
        text.split("\r\n")
            .filter(|l| l.starts_with('#') || l.contains(':'))
            // Fields by name; the per-command rows depend on what ran.
            .map(|l| l.split(':').next().unwrap().to_string())
            .filter(|f| {
                !f.starts_with("cmdstat_")
                    && !f.starts_with("latency_percentiles_usec_")
                    && !f.starts_with("errorstat_")
            })
            .collect()
    };
    for args in [
        &[][..],
        &["everything"],
        &["default"],
        &["stats", "cpu"],
        &["memory", "persistence", "replication"],
        &["commandstats", "errorstats", "latencystats"],
    ] {
        let theirs = layout(redis.addr(), args);
        let ours = layout(coordis.addr(), args);
        let sections = |v: &[String]| v.iter().filter(|l| l.starts_with('#')).cloned().collect::<Vec<_>>();
        assert_eq!(sections(&ours), sections(&theirs), "INFO {args:?}");
        // Every field Redis prints, in its order; coordis adds its own
        // version at the end of the server section.
        let ours: Vec<String> = ours.into_iter().filter(|f| f != "coordis_version").collect();
        assert_eq!(ours, theirs, "INFO {args:?} fields");
    }
}

/// INFO memory's figures are real: they follow what is stored, a peak
/// stays, and the script, function and maxmemory rows say what was set.
#[test]
fn info_memory_follows_the_dataset() {
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(coordis.addr()).unwrap();
    let memory = |c: &mut RawClient| -> std::collections::HashMap<String, String> {
        let text = String::from_utf8(c.command(&["INFO", "memory"]).unwrap()).unwrap();
        text.split("\r\n")
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let n = |m: &std::collections::HashMap<String, String>, k: &str| -> u64 { m[k].parse().unwrap() };
    let before = memory(&mut c);
    // 32 MB of values: 8,000 keys of 4 KB. (The figures are the whole test
    // process's, so the margins leave room for the other tests running.)
    let value = "v".repeat(4096);
    for i in 0..8000 {
        c.command(&["SET", &format!("k{i}"), &value]).unwrap();
    }
    let loaded = memory(&mut c);
    let grown = n(&loaded, "used_memory").saturating_sub(n(&before, "used_memory"));
    assert!(grown >= 24_000_000, "used_memory grew by {grown}");
    assert!(n(&loaded, "used_memory_dataset") >= 24_000_000);
    assert!(n(&loaded, "used_memory_rss") > 0 && n(&loaded, "total_system_memory") > 0);
    c.command(&["FLUSHALL"]).unwrap();
    let flushed = memory(&mut c);
    assert!(
        n(&flushed, "used_memory") + 16_000_000 < n(&loaded, "used_memory"),
        "{flushed:?}"
    );
    assert!(n(&flushed, "used_memory_peak") >= n(&loaded, "used_memory"));

    c.command(&["EVAL", "return 1", "0"]).unwrap();
    c.command(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
    ])
    .unwrap();
    c.command(&["CONFIG", "SET", "maxmemory", "100mb", "maxmemory-policy", "allkeys-lru"])
        .unwrap();
    let m = memory(&mut c);
    assert_eq!(
        [
            &m["number_of_cached_scripts"],
            &m["used_memory_scripts_eval"],
            &m["number_of_libraries"]
        ],
        ["1", "8", "1"]
    );
    assert_eq!(
        [&m["maxmemory"], &m["maxmemory_human"], &m["maxmemory_policy"]],
        ["104857600", "100.00M", "allkeys-lru"]
    );
}

/// MEMORY USAGE follows what a key holds (sampled or whole), STATS counts
/// the keys per database, DOCTOR answers with one of Redis's reports.
#[test]
fn memory_usage_follows_the_value() {
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(coordis.addr()).unwrap();
    let mut run = |args: &[&str]| parse(&c.command(args).unwrap(), &mut 0);
    let usage = |v: Value| match v {
        Value::Int(n) => n,
        other => panic!("MEMORY USAGE: {other:?}"),
    };
    assert_eq!(run(&["MEMORY", "USAGE", "missing"]), Value::Nil);
    run(&["SET", "short", "v"]);
    let long = "x".repeat(10_000);
    run(&["SET", "long", &long]);
    let short = usage(run(&["MEMORY", "USAGE", "short"]));
    assert!((16..200).contains(&short), "{short}");
    assert!(usage(run(&["MEMORY", "USAGE", "long"])) >= 10_000);
    // Every type: 1,000 elements of 100 bytes weigh at least 100 KB.
    let value = "v".repeat(100);
    for i in 0..1000 {
        let member = format!("{i:03}{value}");
        run(&["HSET", "hash", &member, &value]);
        run(&["RPUSH", "list", &member]);
        run(&["SADD", "set", &member]);
        run(&["ZADD", "zset", &i.to_string(), &member]);
        run(&["XADD", "stream", "*", "f", &member]);
    }
    for key in ["hash", "list", "set", "zset", "stream"] {
        let sampled = usage(run(&["MEMORY", "USAGE", key]));
        let whole = usage(run(&["MEMORY", "USAGE", key, "SAMPLES", "0"]));
        assert!(whole >= 100_000 && sampled >= 100_000, "{key}: {sampled} / {whole}");
        assert!(sampled < whole * 2 && whole < sampled * 2, "{key}: {sampled} / {whole}");
    }
    let Value::Array(stats) = run(&["MEMORY", "STATS"]) else {
        panic!()
    };
    let field = |name: &str| {
        let at = stats.iter().position(|v| *v == Value::Text(name.into())).unwrap();
        clone(&stats[at + 1])
    };
    assert_eq!(field("keys.count"), Value::Int(7));
    assert!(matches!(field("db.0"), Value::Array(a) if a.len() == 6));
    assert!(!stats.contains(&Value::Text("db.1".into())));
    let Value::Text(report) = run(&["MEMORY", "DOCTOR"]) else {
        panic!()
    };
    assert!(
        report.starts_with("Hi Sam") || report.starts_with("Sam, I detected"),
        "{report}"
    );
    assert_eq!(run(&["MEMORY", "PURGE"]), Value::Status("OK".into()));
}

/// The commands and subcommands of Redis 7.0.15's COMMAND LIST that coordis
/// does not serve yet, as README's "Supported commands" names them.
const NOT_YET: [&str; 0] = [];

/// README's line that names [`NOT_YET`].
const README_NOT_YET: &str = "Not in `COMMAND LIST` yet:";

/// README's exception line names exactly [`NOT_YET`] (upper case, in
/// backticks), so the list the test allows is the one users read.
#[test]
fn readme_names_the_command_list_exceptions() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with(README_NOT_YET))
        .unwrap_or_else(|| panic!("README has no line starting {README_NOT_YET:?}"));
    let named: Vec<String> = line
        .split('`')
        .skip(3)
        .step_by(2)
        .map(|w| w.to_ascii_lowercase())
        .collect();
    assert_eq!(named, NOT_YET, "{line}");
}

/// COMMAND LIST, with and without FILTERBY, lists what Redis lists (commands
/// and subcommands), among the commands coordis has; COMMAND DOCS of a
/// container lists its subcommands.
#[test]
fn command_list_filters_and_docs_match_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let list = |addr, args: &[&str]| -> Vec<String> {
        let mut c = RawClient::connect(addr).unwrap();
        let mut cmd = vec!["COMMAND", "LIST"];
        cmd.extend_from_slice(args);
        let reply = String::from_utf8(c.command(&cmd).unwrap()).unwrap();
        let mut names: Vec<String> = reply
            .split("\r\n")
            .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
            .map(String::from)
            .collect();
        names.sort();
        names
    };
    let ours_all = list(coordis.addr(), &[]);
    assert!(
        ours_all.contains(&"xgroup|create".to_string()),
        "subcommands are listed"
    );
    for filter in [
        &[][..],
        &["FILTERBY", "ACLCAT", "write"],
        &["FILTERBY", "ACLCAT", "Stream"],
        &["FILTERBY", "ACLCAT", "dangerous"],
        &["FILTERBY", "PATTERN", "x*"],
        &["FILTERBY", "PATTERN", "client|*"],
        &["FILTERBY", "MODULE", "redisjson"],
        &["FILTERBY", "ACLCAT", "nosuchcategory"],
    ] {
        let theirs: Vec<String> = list(redis.addr(), filter)
            .into_iter()
            .filter(|n| ours_all.contains(n))
            .collect();
        // coordis's own COORDIS.* family is not Redis's to list.
        let ours: Vec<String> = list(coordis.addr(), filter)
            .into_iter()
            .filter(|n| !n.starts_with("coordis."))
            .collect();
        assert_eq!(ours, theirs, "COMMAND LIST {filter:?}");
    }
    // Unfiltered, the lists differ only in coordis's own family and in
    // the commands README names as not there yet.
    let theirs_all = list(redis.addr(), &[]);
    let ours_redis: Vec<&String> = ours_all.iter().filter(|n| !n.starts_with("coordis.")).collect();
    let theirs_known: Vec<&String> = theirs_all.iter().filter(|n| !NOT_YET.contains(&n.as_str())).collect();
    assert_eq!(ours_redis, theirs_known, "COMMAND LIST beyond README's exceptions");
    for name in NOT_YET {
        assert!(theirs_all.iter().any(|n| n == name), "{name} is a Redis command");
        assert!(
            !ours_all.iter().any(|n| n == name),
            "{name} is served now: take it out of NOT_YET and README's list"
        );
    }
    let mut c = RawClient::connect(coordis.addr()).unwrap();
    let docs = String::from_utf8(c.command(&["COMMAND", "DOCS", "xinfo"]).unwrap()).unwrap();
    assert!(
        docs.contains("subcommands") && docs.contains("xinfo|consumers"),
        "{docs}"
    );
}
