//! The directive table against real Redis 7.0.15: every directive coordis
//! lists in `CONFIG GET *` that Redis also has must show Redis's default and
//! answer the same `CONFIG SET` probes (valid, invalid, out of range,
//! immutable) with the same bytes, then show the same value again.
//! Directives Redis does not have must be coordis's own, listed here.

use coordis::testing::{free_port, RawClient, RedisServer};

/// coordis's own directives (README: `bgsave-slice-keys`, `bgsave-slice-pause-us`, `lua-memory-limit`, `proto-max-multibulk-len`, `port-file`, `enable-test-commands`):
/// as Redis's hidden ones, not in `CONFIG GET *`, shown and set by name.
const COORDIS_ONLY: &[&str] = &[
    "bgsave-slice-keys",
    "bgsave-slice-pause-us",
    "enable-test-commands",
    "log-format",
    "lua-memory-limit",
    "port-file",
    "proto-max-multibulk-len",
];

/// Redis's hidden directives (its test knobs): not in `CONFIG GET *`,
/// shown and set by name.
const HIDDEN: &[&str] = &[
    "use-exit-on-panic",
    "rdb-key-save-delay",
    "key-load-delay",
    "watchdog-period",
    "loading-process-events-interval-bytes",
];

/// Directives whose value depends on how each server was started (the test
/// harness passes `--save ''`; `dir` is Redis's working directory).
const STARTED_DIFFERENTLY: &[&str] = &["port", "save", "dir"];

/// Directives probed apart (`port_and_bind_rebind_as_redis_does`): the
/// generic probes would move both servers off the addresses the test uses.
const PROBED_APART: &[&str] = &["port", "bind"];

/// Values every directive is probed with (besides its current value).
const PROBES: &[&str] = &["yes", "0", "-1", "1kb", "abc", "99999999999999999999", ""];

/// Values particular directives are probed with besides [`PROBES`]: their
/// several words, other names of a value, their own limits and texts.
const EXTRA_PROBES: &[(&str, &[&str])] = &[
    (
        "shutdown-on-sigint",
        &["save now", "SAVE NOSAVE", "force now save", "now bad", "default"],
    ),
    ("shutdown-on-sigterm", &["nosave force", "save  now", "DEFAULT"]),
    ("oom-score-adj", &["relative", "absolute", "YES", "no"]),
    (
        "oom-score-adj-values",
        &["1 2 3", "1 2", "-2001 0 0", "0 0 2000", "+1 -0 7", "0 200 800"],
    ),
    (
        "latency-tracking-info-percentiles",
        &["50.5 1e1", "101", "abc 1", "99.99999 0", "50  99", "50 99 99.9"],
    ),
    ("maxmemory-clients", &["10%", "101%", "100%", "-1%", "%", "5mb", "0"]),
    (
        "proc-title-template",
        &[
            "{title}",
            "{title} {port}",
            "{nosuch}",
            "{{x",
            "x}",
            "{",
            "{title} {listen-addr} {server-mode}",
        ],
    ),
    ("cluster-announce-hostname", &["a.b-c", "a_b", "x y", ""]),
    ("repl-backlog-size", &["20000", "16383", "1mb"]),
    ("tls-cert-file", &["/nonexistent", ""]),
    ("tls-replication", &["no"]),
    ("activedefrag", &["no", "NO"]),
    ("acl-pubsub-default", &["allchannels", "resetchannels"]),
    ("repl-diskless-load", &["swapdb", "on-empty-db", "disabled"]),
    ("unixsocketperm", &["700"]),
];

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
    let mut names: Vec<String> = all.chunks(2).map(|p| p[0].clone()).collect();
    // CONFIG GET * lists exactly Redis's names (aliases too); coordis's own
    // answer by name only, as Redis's hidden ones.
    let mut listed: Vec<String> = names.clone();
    let mut redis_listed: Vec<String> = bulks(&theirs.command(&["CONFIG", "GET", "*"]).unwrap())
        .chunks(2)
        .map(|p| p[0].clone())
        .collect();
    listed.sort();
    redis_listed.sort();
    assert_eq!(listed, redis_listed, "CONFIG GET * names");
    // Hidden directives are not listed, and answer by name.
    for hidden in HIDDEN.iter().chain(COORDIS_ONLY) {
        assert!(!names.iter().any(|n| n == hidden), "{hidden} listed");
        names.push(hidden.to_string());
    }
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
        if PROBED_APART.contains(&name.as_str()) {
            continue;
        }
        let current = bulks(&get(&mut ours, name)).pop().unwrap_or_default();
        let extra = EXTRA_PROBES
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.iter().copied());
        for value in std::iter::once(current.as_str())
            .chain(PROBES.iter().copied())
            .chain(extra)
        {
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

/// A temp dir removed on drop (also when the test fails).
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("coordis-rewrite-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The config file both servers start from: comments, an alias, a
/// directive twice, several `save` and `client-output-buffer-limit` lines,
/// an include (what it sets has no line here), blank runs.
fn rewrite_fixture(dir: &std::path::Path, extra: &std::path::Path) -> std::path::PathBuf {
    let conf = dir.join("redis.conf");
    let text = format!(
        "# The rewrite fixture\nbind 127.0.0.1\nmaxclients 500\n\n\n# encodings\nhash-max-ziplist-entries 100\n\
         hz 10\nhz 15\nsave 900 1\nsave 300 10\ntimeout 0\nnotify-keyspace-events \"\"\n\
         client-output-buffer-limit pubsub 32mb 8mb 60\nslave-priority 90\ninclude {}\nloglevel notice\n\
         proc-title-template \"{{title}} {{listen-addr}} {{server-mode}}\"\n# the end\n",
        extra.display()
    );
    std::fs::write(&conf, text).unwrap();
    conf
}

/// Lines that name where each server runs (its port, its dir).
fn comparable(line: &str) -> bool {
    !(line.starts_with("port ") || line.starts_with("dir "))
}

/// The whole file with the lines that name where each server runs (its
/// port, its dir) written the same for both.
fn placeless(text: &str) -> String {
    text.split('\n')
        .map(|l| {
            if l.starts_with("port ") {
                "port <port>"
            } else if l.starts_with("dir ") {
                "dir <dir>"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// CONFIG REWRITE of a file that declares ACL users with `user` lines, after
/// ACL SETUSER and DELUSER: both servers write the users in name order
/// over the old `user` lines, in place, byte for byte the same file; with
/// an `aclfile` (the users live there) neither writes a `user` line.
#[test]
fn config_rewrite_writes_the_users_as_redis_does() {
    let ours_dir = TempDir::new("users-ours");
    let theirs_dir = TempDir::new("users-theirs");
    let fixture = "# users\nport 6379\nbind 127.0.0.1\nsave \"\"\ndir /tmp\nappendonly no\ndaemonize no\n\
                   user worker on >workerpass ~lock:* +@all -flushall\n\
                   user default on nopass ~* &* +@all\n# readers\nuser reader on nopass %R~* +@read -keys\n\
                   user gone off\n# the end\n";
    let (ours_conf, theirs_conf) = (ours_dir.0.join("redis.conf"), theirs_dir.0.join("redis.conf"));
    std::fs::write(&ours_conf, fixture).unwrap();
    std::fs::write(&theirs_conf, fixture).unwrap();
    let Some(redis) = RedisServer::start_with_config(&theirs_conf, &[]).unwrap() else {
        return;
    };
    let args: Vec<String> = [ours_conf.display().to_string(), "--port".into(), "0".into()].into();
    let config = coordis::Config::from_args(&args, &mut |_| {}).unwrap();
    let server = coordis::Builder::from_config(config).start_blocking().unwrap();
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    let steps: &[&[&str]] = &[
        &[
            "ACL",
            "SETUSER",
            "added",
            "on",
            ">x",
            "~queue:*",
            "+lpush",
            "(~r* +get)",
        ],
        &["ACL", "DELUSER", "reader", "gone"],
        &["ACL", "SETUSER", "worker", "&jobs"],
        &["CONFIG", "REWRITE"],
    ];
    for step in steps {
        let (a, b) = (ours.command(step).unwrap(), theirs.command(step).unwrap());
        assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b), "{step:?}");
    }
    let ours_text = std::fs::read_to_string(&ours_conf).unwrap();
    let theirs_text = std::fs::read_to_string(&theirs_conf).unwrap();
    assert_eq!(
        placeless(&ours_text),
        placeless(&theirs_text),
        "coordis (left), Redis (right)"
    );
    let users: Vec<&str> = ours_text.lines().filter(|l| l.starts_with("user ")).collect();
    assert_eq!(users.len(), 3, "{ours_text}");
    assert!(users[0].starts_with("user added on #"), "{ours_text}");
    // The rewritten file starts a server with the same users.
    let args = [ours_conf.display().to_string(), "--port".into(), "0".into()];
    let config = coordis::Config::from_args(&args, &mut |_| {}).unwrap();
    let again = coordis::Builder::from_config(config).start_blocking().unwrap();
    let list = |c: &mut RawClient| String::from_utf8_lossy(&c.command(&["ACL", "LIST"]).unwrap()).into_owned();
    assert_eq!(list(&mut RawClient::connect(again.addr()).unwrap()), list(&mut ours));

    // With an aclfile.
    let (ours_acl, theirs_acl) = (ours_dir.0.join("users.acl"), theirs_dir.0.join("users.acl"));
    for (conf, acl) in [(&ours_conf, &ours_acl), (&theirs_conf, &theirs_acl)] {
        std::fs::write(acl, "user worker on nopass ~lock:* +@all\n").unwrap();
        std::fs::write(
            conf,
            format!(
                "# users in a file\naclfile {}\nport 6379\nbind 127.0.0.1\nsave \"\"\ndir /tmp\n",
                acl.display()
            ),
        )
        .unwrap();
    }
    let Some(redis) = RedisServer::start_with_config(&theirs_conf, &[]).unwrap() else {
        return;
    };
    let config = coordis::Config::from_args(&args, &mut |_| {}).unwrap();
    let server = coordis::Builder::from_config(config).start_blocking().unwrap();
    for c in [server.addr(), redis.addr()] {
        assert_eq!(
            RawClient::connect(c).unwrap().command(&["CONFIG", "REWRITE"]).unwrap(),
            b"+OK\r\n"
        );
    }
    let ours_text = std::fs::read_to_string(&ours_conf).unwrap();
    let theirs_text = std::fs::read_to_string(&theirs_conf).unwrap();
    let without_acl_path = |t: &str| {
        placeless(t)
            .replace(&ours_acl.display().to_string(), "<acl>")
            .replace(&theirs_acl.display().to_string(), "<acl>")
    };
    assert_eq!(without_acl_path(&ours_text), without_acl_path(&theirs_text));
    assert!(!ours_text.contains("\nuser "), "{ours_text}");
}

/// The file as kept lines (in order, up to the signature) and appended
/// lines (in any order: Redis walks its config dict in hash order).
fn split_rewrite(text: &str) -> (Vec<String>, Vec<String>) {
    let lines: Vec<String> = text.lines().filter(|l| comparable(l)).map(String::from).collect();
    let at = lines
        .iter()
        .position(|l| l == "# Generated by CONFIG REWRITE")
        .unwrap_or(lines.len());
    let mut appended = lines[at..].to_vec();
    appended.sort();
    (lines[..at].to_vec(), appended)
}

/// CONFIG REWRITE after the same CONFIG SETs on coordis and on Redis,
/// each from a copy of the same file: the same lines kept, reused,
/// blanked and appended; coordis loads its rewritten file back with the
/// values set; without a config file both give the same error.
#[test]
fn config_rewrite_writes_the_file_as_redis_does() {
    let ours_dir = TempDir::new("ours");
    let theirs_dir = TempDir::new("theirs");
    let shared = TempDir::new("shared");
    let extra = shared.0.join("extra.conf");
    std::fs::write(&extra, "maxmemory-samples 7\n").unwrap();
    let ours_conf = rewrite_fixture(&ours_dir.0, &extra);
    let theirs_conf = rewrite_fixture(&theirs_dir.0, &extra);
    let flags = ["--save", "", "--appendonly", "no", "--daemonize", "no"];
    let Some(redis) = RedisServer::start_with_config(&theirs_conf, &[]).unwrap() else {
        return;
    };
    let mut args = vec![ours_conf.display().to_string(), "--port".into(), "0".into()];
    args.extend(flags.iter().map(|f| f.to_string()));
    let config = coordis::Config::from_args(&args, &mut |_| {}).unwrap();
    let server = coordis::Builder::from_config(config).start_blocking().unwrap();
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    let info = String::from_utf8(ours.command(&["INFO", "server"]).unwrap()).unwrap();
    assert!(
        info.contains(&format!("config_file:{}\r\n", ours_conf.display())),
        "{info}"
    );
    let sets: &[&[&str]] = &[
        &["CONFIG", "SET", "maxclients", "600", "hz", "20"],
        &["CONFIG", "SET", "slowlog-max-len", "200", "maxmemory", "10mb"],
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        &["CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 2mb 3"],
        &["CONFIG", "SET", "lua-time-limit", "100", "replica-priority", "50"],
        &["CONFIG", "SET", "masterauth", "a b\"c", "repl-backlog-size", "1000000"],
        &[
            "CONFIG",
            "SET",
            "oom-score-adj-values",
            "0 100 900",
            "latency-tracking-info-percentiles",
            "50.5",
        ],
        &[
            "CONFIG",
            "SET",
            "shutdown-on-sigterm",
            "now force",
            "maxmemory-clients",
            "5%",
        ],
        &["CONFIG", "REWRITE"],
    ];
    for case in sets {
        let (a, b) = (ours.command(case).unwrap(), theirs.command(case).unwrap());
        assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b), "{case:?}");
    }
    let ours_text = std::fs::read_to_string(&ours_conf).unwrap();
    let theirs_text = std::fs::read_to_string(&theirs_conf).unwrap();
    let (ours_kept, ours_added) = split_rewrite(&ours_text);
    let (theirs_kept, theirs_added) = split_rewrite(&theirs_text);
    assert_eq!(
        ours_kept, theirs_kept,
        "kept lines\ncoordis:\n{ours_text}\nredis:\n{theirs_text}"
    );
    assert_eq!(
        ours_added, theirs_added,
        "appended lines\ncoordis:\n{ours_text}\nredis:\n{theirs_text}"
    );
    assert!(ours_added.len() > 5, "{ours_text}");
    // A second rewrite of the rewritten file, too.
    let (a, b) = (
        ours.command(&["CONFIG", "REWRITE"]).unwrap(),
        theirs.command(&["CONFIG", "REWRITE"]).unwrap(),
    );
    assert_eq!(a, b);
    let again = |p: &std::path::Path| split_rewrite(&std::fs::read_to_string(p).unwrap());
    assert_eq!(again(&ours_conf), again(&theirs_conf));
    // The rewritten file loads, with the values set.
    let reloaded = coordis::Config::from_args(&[ours_conf.display().to_string()], &mut |_| {}).unwrap();
    assert_eq!(
        (reloaded.maxclients, reloaded.hz, reloaded.busy_reply_threshold),
        (600, 20, 100)
    );
    assert_eq!(reloaded.memory.samples, 7, "from the include");
    // Without a config file.
    let plain = coordis::Server::builder().start_blocking().unwrap();
    let Some(plain_redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let a = RawClient::connect(plain.addr())
        .unwrap()
        .command(&["CONFIG", "REWRITE"])
        .unwrap();
    let b = RawClient::connect(plain_redis.addr())
        .unwrap()
        .command(&["CONFIG", "REWRITE"])
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
}

/// Connects to `addr` and PINGs, or says why not.
fn reachable(addr: std::net::SocketAddr) -> bool {
    RawClient::connect(addr)
        .and_then(|mut c| c.command(&["PING"]))
        .is_ok_and(|r| r == b"+PONG\r\n")
}

/// CONFIG SET `port` and `bind` rebind the listeners as Redis does: the
/// new address answers, the old one no longer does, connections already
/// open stay; a port or address that cannot be bound fails with Redis's
/// text and everything in the same CONFIG SET is restored, the old
/// listeners included.
#[test]
fn port_and_bind_rebind_as_redis_does() {
    use std::net::SocketAddr;
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut ours = RawClient::connect(server.addr()).unwrap();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    let both = |ours: &mut RawClient, theirs: &mut RawClient, case: &[&str]| {
        let (a, b) = (ours.command(case).unwrap(), theirs.command(case).unwrap());
        assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b), "{case:?}");
        String::from_utf8_lossy(&a).into_owned()
    };
    let local = |port: u16| -> SocketAddr { ([127, 0, 0, 1], port).into() };
    // A new port for each.
    let (ours_new, theirs_new) = (free_port().unwrap(), free_port().unwrap());
    for (c, port, old) in [
        (&mut ours, ours_new, server.addr()),
        (&mut theirs, theirs_new, redis.addr()),
    ] {
        assert_eq!(
            c.command(&["CONFIG", "SET", "port", &port.to_string()]).unwrap(),
            b"+OK\r\n"
        );
        assert!(reachable(local(port)), "the new port answers");
        assert!(!reachable(old), "the old port is closed");
        assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n", "open connections stay");
        let info = String::from_utf8(c.command(&["INFO", "server"]).unwrap()).unwrap();
        assert!(info.contains(&format!("tcp_port:{port}\r\n")), "{info}");
    }
    // A port in use: refused, and the other pair restored with it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port().to_string();
    both(&mut ours, &mut theirs, &["CONFIG", "SET", "maxclients", "77"]);
    let reply = both(
        &mut ours,
        &mut theirs,
        &["CONFIG", "SET", "maxclients", "88", "port", &taken_port],
    );
    assert!(reply.contains("'port'"), "{reply}");
    both(&mut ours, &mut theirs, &["CONFIG", "GET", "maxclients"]);
    assert!(
        reachable(local(ours_new)) && reachable(local(theirs_new)),
        "the old listeners are back"
    );
    // Another address on the same port, then an address this machine lacks.
    both(
        &mut ours,
        &mut theirs,
        &["CONFIG", "SET", "bind", "127.0.0.1 127.0.0.2"],
    );
    for port in [ours_new, theirs_new] {
        assert!(reachable(([127, 0, 0, 2], port).into()), "127.0.0.2:{port}");
    }
    both(&mut ours, &mut theirs, &["CONFIG", "GET", "bind"]);
    let reply = both(
        &mut ours,
        &mut theirs,
        &["CONFIG", "SET", "bind", "127.0.0.1 192.0.2.1", "hz", "33"],
    );
    assert!(reply.contains("'bind'"), "{reply}");
    both(&mut ours, &mut theirs, &["CONFIG", "GET", "bind"]);
    both(&mut ours, &mut theirs, &["CONFIG", "GET", "hz"]);
    for port in [ours_new, theirs_new] {
        assert!(reachable(([127, 0, 0, 2], port).into()), "restored 127.0.0.2:{port}");
    }
    let many = vec!["127.0.0.1"; 17].join(" ");
    both(&mut ours, &mut theirs, &["CONFIG", "SET", "bind", &many]);
    both(&mut ours, &mut theirs, &["CONFIG", "SET", "bind", "127.0.0.1"]);
    for port in [ours_new, theirs_new] {
        assert!(!reachable(([127, 0, 0, 2], port).into()), "127.0.0.2:{port} closed");
    }
    drop(taken);
}

/// CONFIG REWRITE of the stock config files (Debian's installed one and
/// the source tree's), each server started on its own copy with the same
/// flags after it: the same lines kept, rewritten, blanked and appended.
#[test]
fn config_rewrite_of_the_stock_files_matches_redis() {
    let installed = std::path::Path::new("/etc/redis/redis.conf");
    let source = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/redis-7.0.15.conf"));
    let mut files = vec![(source, "source")];
    if installed.exists() {
        files.push((installed, "debian"));
    } else {
        let missing = "the installed /etc/redis/redis.conf: redis-server is not installed here";
        assert!(!coordis::testing::require_redis(), "{missing}");
        eprintln!("SKIPPED {missing}");
    }
    for (stock, tag) in files {
        let ours_dir = TempDir::new(&format!("stock-ours-{tag}"));
        let theirs_dir = TempDir::new(&format!("stock-theirs-{tag}"));
        let (ours_conf, theirs_conf) = (ours_dir.0.join("redis.conf"), theirs_dir.0.join("redis.conf"));
        std::fs::copy(stock, &ours_conf).unwrap();
        std::fs::copy(stock, &theirs_conf).unwrap();
        // Not the packaged service's log and pid file.
        let service = ["--logfile", "", "--pidfile", ""];
        let Some(redis) = RedisServer::start_with_config(&theirs_conf, &service).unwrap() else {
            return;
        };
        let mut args = vec![ours_conf.display().to_string()];
        let flags = [
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
        ];
        args.extend(flags.iter().chain(service.iter()).map(|f| f.to_string()));
        args.extend(["--dir".to_string(), ours_dir.0.display().to_string()]);
        let config = coordis::Config::from_args(&args, &mut |_| {}).unwrap();
        let server = coordis::Builder::from_config(config).start_blocking().unwrap();
        let mut ours = RawClient::connect(server.addr()).unwrap();
        let mut theirs = RawClient::connect(redis.addr()).unwrap();
        // Every value as loaded from the file, as Redis reports it.
        let pairs = |c: &mut RawClient| -> Vec<Vec<String>> {
            let mut all: Vec<Vec<String>> = bulks(&c.command(&["CONFIG", "GET", "*"]).unwrap())
                .chunks(2)
                .map(|p| p.to_vec())
                .filter(|p| !STARTED_DIFFERENTLY.contains(&p[0].as_str()) && !COORDIS_ONLY.contains(&p[0].as_str()))
                .collect();
            all.sort();
            all
        };
        let (a, b) = (pairs(&mut ours), pairs(&mut theirs));
        let differing: Vec<String> = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| x != y)
            .map(|(x, y)| format!("coordis {x:?} / redis {y:?}"))
            .collect();
        assert!(
            differing.is_empty() && a.len() == b.len(),
            "{tag}: {}",
            differing.join("\n")
        );
        for case in [
            &["CONFIG", "SET", "maxmemory", "100mb", "hz", "15"][..],
            &["CONFIG", "REWRITE"],
        ] {
            let (a, b) = (ours.command(case).unwrap(), theirs.command(case).unwrap());
            assert_eq!(
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b),
                "{tag}: {case:?}"
            );
        }
        let ours_text = std::fs::read_to_string(&ours_conf).unwrap();
        let theirs_text = std::fs::read_to_string(&theirs_conf).unwrap();
        let (ours_kept, ours_added) = split_rewrite(&ours_text);
        let (theirs_kept, theirs_added) = split_rewrite(&theirs_text);
        let differing: Vec<String> = ours_kept
            .iter()
            .zip(&theirs_kept)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("coordis {a:?} / redis {b:?}"))
            .collect();
        assert!(differing.is_empty(), "{tag}: {}", differing.join("\n"));
        assert_eq!(ours_kept.len(), theirs_kept.len(), "{tag}");
        assert_eq!(ours_added, theirs_added, "{tag}: appended lines");
        assert!(ours_added.iter().any(|l| l == "maxmemory 100mb"), "{tag}: {ours_text}");
        assert!(
            ours_kept.iter().any(|l| l == "hz 15") && ours_kept.iter().any(|l| l == "daemonize no"),
            "{tag}"
        );
    }
}

/// `enable-protected-configs` lets CONFIG SET change the protected
/// directives, as in Redis (`local`: loopback clients, which the test is).
#[test]
fn protected_configs_follow_enable_protected_configs() {
    for setting in ["no", "yes", "local"] {
        let Some(redis) = RedisServer::start(&["--enable-protected-configs", setting]).unwrap() else {
            return;
        };
        // A directory of its own and no save points: the server neither
        // loads nor leaves a file in the working directory.
        let dir = std::env::temp_dir().join(format!("coordis-protected-{}-{setting}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir_arg = dir.display().to_string();
        let args: Vec<String> = [
            "--port",
            "0",
            "--save",
            "",
            "--dir",
            &dir_arg,
            "--enable-protected-configs",
            setting,
        ]
        .map(String::from)
        .to_vec();
        let config = coordis::Config::from_args(&args, &mut |_| {}).unwrap();
        let server = coordis::Builder::from_config(config).start_blocking().unwrap();
        let mut ours = RawClient::connect(server.addr()).unwrap();
        let mut theirs = RawClient::connect(redis.addr()).unwrap();
        for case in [
            &["CONFIG", "SET", "dbfilename", "other.rdb"][..],
            &["CONFIG", "GET", "dbfilename"],
        ] {
            let (a, b) = (ours.command(case).unwrap(), theirs.command(case).unwrap());
            assert_eq!(
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b),
                "{setting}: {case:?}"
            );
        }
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// What a server started with `args` that refuses its configuration says
/// on stderr (it must exit without serving).
fn refused_start(program: &str, args: &[String]) -> String {
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{program} {args:?} started");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{program} {args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_bad_startup_line_is_reported_as_redis_reports_it() {
    if RedisServer::start(&[]).unwrap().is_none() {
        return;
    }
    let dir = coordis::testing::TempDir::new("fatal-config");
    let file = |name: &str, text: &str| {
        let path = dir.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let bad = file("bad.conf", "port 7777\nfoo bar\n");
    let good = file("good.conf", "port 7777\n");
    let late = file("late.conf", "port 1\n\n# a comment\nloglevel x\n");
    let cases: Vec<Vec<String>> = [
        vec!["--port", "7777", "--foo", "bar"],
        vec![&bad, "--port", "1"],
        vec![&good, "--loglevel", "x", "--port", "1"],
        vec!["--loglevel", "x"],
        vec![&late],
        vec!["--unixsocketperm", "999"],
        vec!["--unixsocketperm", "1000"],
        vec!["--maxmemory-policy", "sometimes"],
    ]
    .iter()
    .map(|case| case.iter().map(|a| a.to_string()).collect())
    .collect();
    for case in &cases {
        assert_eq!(
            refused_start(env!("CARGO_BIN_EXE_coordis-server"), case),
            refused_start("redis-server", case),
            "{case:?}"
        );
    }
}
