//! ACL behaviour the scenarios cannot compare byte for byte, against Redis
//! 7.0.15: the ACL log's entries (their ages and client lines differ by
//! nature: compared by their fields), `acllog-max-len`, the ACL file that
//! ACL SAVE writes and ACL LOAD reads (with its errors), `user` directives,
//! the refusal of `user` directives together with an `aclfile`,
//! `requirepass` as the default user's password, and a restricted user's
//! requests while a script is busy.

use std::process::Command;

use coordis::testing::{RawClient, RedisServer, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");

fn connect(addr: std::net::SocketAddr) -> redis::Connection {
    redis::Client::open(format!("redis://{addr}"))
        .unwrap()
        .get_connection()
        .unwrap()
}

fn text(v: &redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Int(n) => n.to_string(),
        redis::Value::Double(d) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// The ACL log as `field=value` lines per entry: the age only checked to
/// be a small number, the client line reduced to the fields both servers
/// fill the same way.
fn acl_log(con: &mut redis::Connection, count: Option<i64>) -> Vec<Vec<String>> {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("LOG");
    if let Some(n) = count {
        cmd.arg(n);
    }
    let redis::Value::Array(entries) = cmd.query::<redis::Value>(con).unwrap() else {
        panic!("ACL LOG is not an array");
    };
    entries
        .iter()
        .map(|e| {
            let redis::Value::Array(kv) = e else {
                panic!("an entry is not a flat map: {e:?}")
            };
            kv.chunks(2)
                .map(|pair| {
                    let (k, v) = (text(&pair[0]), text(&pair[1]));
                    match k.as_str() {
                        "age-seconds" => {
                            let age: f64 = v.parse().unwrap();
                            assert!((0.0..60.0).contains(&age), "age {age}");
                            "age-seconds=<age>".to_string()
                        }
                        "client-info" => {
                            let kept: Vec<&str> = v
                                .split(' ')
                                .filter(|f| {
                                    ["name=", "flags=", "db=", "multi=", "cmd=", "user=", "resp="]
                                        .iter()
                                        .any(|p| f.starts_with(p))
                                })
                                .collect();
                            format!("client-info={}", kept.join(" "))
                        }
                        _ => format!("{k}={v}"),
                    }
                })
                .collect()
        })
        .collect()
}

fn run(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(con) {
        Ok(v) => text(&v),
        Err(e) => format!("error: {e}"),
    }
}

/// The denials of a worker and what the ACL log keeps of them, on one server.
fn log_workload(addr: std::net::SocketAddr) -> Vec<String> {
    let mut admin = connect(addr);
    let mut out = vec![];
    run(&mut admin, &["ACL", "LOG", "RESET"]);
    run(
        &mut admin,
        &[
            "ACL", "SETUSER", "worker", "reset", "on", ">wpass", "~lock:*", "+set", "+get", "+eval", "+multi", "+exec",
            "+publish", "&news",
        ],
    );
    let mut w = connect(addr);
    for args in [
        &["AUTH", "worker", "wpass"][..],
        &["SET", "other:1", "v"],
        &["FLUSHALL"],
        &["FLUSHALL"],
        &["PUBLISH", "ch", "m"],
        &["auth", "worker", "bad"],
        &["EVAL", "return redis.call('flushall')", "0"],
        &["MULTI"],
        &["FLUSHALL"],
        &["DISCARD"],
        &["AUTH", "nobody", "x"],
    ] {
        out.push(format!("{args:?} -> {}", run(&mut w, args)));
    }
    for entry in acl_log(&mut admin, None) {
        out.push(entry.join(" "));
    }
    out.push(format!("LOG 2: {:?}", acl_log(&mut admin, Some(2)).len()));
    out.push(format!("LOG -1: {:?}", acl_log(&mut admin, Some(-1)).len()));
    out.push(run(&mut admin, &["CONFIG", "SET", "acllog-max-len", "2"]));
    out.push(run(&mut w, &["GET", "other:2"]));
    out.push(format!("after max-len 2: {}", acl_log(&mut admin, None).len()));
    out.push(run(&mut admin, &["ACL", "LOG", "RESET"]));
    out.push(format!("after RESET: {}", acl_log(&mut admin, None).len()));
    run(&mut admin, &["CONFIG", "SET", "acllog-max-len", "128"]);
    run(&mut admin, &["ACL", "DELUSER", "worker"]);
    out
}

#[test]
fn acl_log_entries_match_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let expected = log_workload(redis.addr());
    let got = log_workload(coordis.addr());
    // The workload did what it means to: entries of every reason and
    // context, one of them grouped.
    let all = expected.join("\n");
    for needle in [
        "reason=key",
        "reason=command",
        "reason=channel",
        "reason=auth",
        "context=lua",
        "context=multi",
        "count=2",
    ] {
        assert!(all.contains(needle), "{needle} missing from Redis's log:\n{all}");
    }
    assert_eq!(got, expected);
}

/// What a server answers about its users after starting on `aclfile`,
/// changing and saving them, and loading a broken file.
fn file_workload(addr: std::net::SocketAddr, aclfile: &std::path::Path) -> Vec<String> {
    let mut c = connect(addr);
    let mut out = vec![run(&mut c, &["ACL", "LIST"])];
    let list = |c: &mut redis::Connection| -> Vec<String> {
        match redis::cmd("ACL").arg("LIST").query::<Vec<String>>(c) {
            Ok(v) => v,
            Err(e) => vec![e.to_string()],
        }
    };
    out.extend(list(&mut c));
    out.push(run(
        &mut c,
        &["ACL", "SETUSER", "added", "on", ">p", "%R~r:*", "&ch", "+@read"],
    ));
    out.push(run(&mut c, &["ACL", "SAVE"]));
    out.push(std::fs::read_to_string(aclfile).unwrap());
    std::fs::write(
        aclfile,
        "user a on +get\nnot a user line\nuser a off\nuser b +nope -@also ~x\nuser c #abc\n\n",
    )
    .unwrap();
    let path = aclfile.display().to_string();
    out.push(run(&mut c, &["ACL", "LOAD"]).replace(&path, "<aclfile>"));
    out.extend(list(&mut c));
    std::fs::write(
        aclfile,
        "user default on nopass ~* &* +@all\nuser fresh on nopass ~* +@all\n",
    )
    .unwrap();
    out.push(run(&mut c, &["ACL", "LOAD"]));
    out.extend(list(&mut c));
    std::fs::remove_file(aclfile).unwrap();
    out.push(run(&mut c, &["ACL", "LOAD"]).replace(&path, "<aclfile>"));
    out
}

#[test]
fn the_acl_file_is_read_and_written_as_redis_does() {
    let dir = TempDir::new("acl-file");
    let start = "user default on nopass ~* &* +@all\nuser worker on #2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824 ~lock:* resetchannels -@all +get\n";
    let redis_file = dir.0.join("redis.acl");
    std::fs::write(&redis_file, start).unwrap();
    let Some(redis) = RedisServer::start(&["--aclfile", redis_file.to_str().unwrap()]).unwrap() else {
        return;
    };
    let coordis_file = dir.0.join("coordis.acl");
    std::fs::write(&coordis_file, start).unwrap();
    let mut builder = coordis::Server::builder();
    builder.config_mut().aclfile = coordis_file.display().to_string();
    let coordis = builder.start_blocking().unwrap();
    let expected = file_workload(redis.addr(), &redis_file);
    assert!(
        expected.iter().any(|l| l.contains("user worker on #2cf2")),
        "{expected:#?}"
    );
    let got = file_workload(coordis.addr(), &coordis_file);
    assert_eq!(got, expected);
}

/// Starts `bin` on a config file and returns its exit and output, or
/// `None` if it is still up after a while (killed then).
fn start_and_exit(bin: &str, conf: &std::path::Path) -> Option<(bool, String)> {
    let mut child = Command::new(bin)
        .arg(conf)
        .args([
            "--port",
            &coordis::testing::free_port().unwrap().to_string(),
            "--save",
            "",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
            return Some((out.status.success(), text));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn user_directives_with_an_aclfile_stop_the_start_as_in_redis() {
    if RedisServer::start(&[]).unwrap().is_none() {
        return;
    }
    let dir = TempDir::new("acl-both");
    let acl = dir.0.join("users.acl");
    std::fs::write(&acl, "user default on nopass ~* &* +@all\n").unwrap();
    let conf = dir.0.join("both.conf");
    std::fs::write(
        &conf,
        format!(
            "dir {}\nuser alice on >p ~a* +get\naclfile {}\n",
            dir.0.display(),
            acl.display()
        ),
    )
    .unwrap();
    let (redis_ok, redis_out) = start_and_exit("redis-server", &conf).expect("redis-server refuses to start");
    let (coordis_ok, coordis_out) = start_and_exit(BIN, &conf).expect("coordis-server refuses to start");
    assert!(!redis_ok && !coordis_ok);
    let why = "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid.";
    assert!(redis_out.contains(why), "{redis_out}");
    assert!(coordis_out.contains(why), "{coordis_out}");
}

#[test]
fn user_directives_define_users_as_in_redis() {
    let dir = TempDir::new("acl-users");
    let conf = dir.0.join("users.conf");
    std::fs::write(
        &conf,
        "user worker on >wpass ~lock:* &jobs +@string\nuser default on >secret ~* &* +@all\nuser off-one\n",
    )
    .unwrap();
    let Some(redis) = RedisServer::start_with_config(&conf, &[]).unwrap() else {
        return;
    };
    let coordis = coordis::testing::ServerProcess::start({
        let mut c = Command::new(BIN);
        c.arg(&conf);
        c
    })
    .unwrap();
    let answers = |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        let mut out = vec![];
        for args in [
            &["PING"][..],
            &["AUTH", "secret"],
            &["ACL", "LIST"],
            &["AUTH", "worker", "wpass"],
            &["SET", "lock:1", "v"],
            &["SET", "x", "v"],
            &["ACL", "WHOAMI"],
        ] {
            out.push(String::from_utf8_lossy(&c.command(args).unwrap()).into_owned());
        }
        out
    };
    let expected = answers(redis.addr());
    assert!(expected[2].contains("user worker on #"), "{expected:?}");
    assert_eq!(answers(coordis.addr()), expected);
}

#[test]
fn requirepass_is_the_default_users_password() {
    let Some(redis) = RedisServer::start(&["--requirepass", "pw"]).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().requirepass("pw").start_blocking().unwrap();
    let answers = |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        let mut out = vec![];
        for args in [
            &["PING"][..],
            &["AUTH", "default", "bad"],
            &["AUTH", "pw"],
            &["ACL", "LIST"],
            &["CONFIG", "SET", "requirepass", "other"],
            &["ACL", "LIST"],
            &["AUTH", "pw"],
            &["AUTH", "default", "other"],
            &["CONFIG", "SET", "requirepass", ""],
            &["ACL", "LIST"],
            &["AUTH", "x"],
            &["ACL", "LOG", "RESET"],
        ] {
            out.push(String::from_utf8_lossy(&c.command(args).unwrap()).into_owned());
        }
        // A new connection needs no password now.
        let mut fresh = RawClient::connect(addr).unwrap();
        out.push(String::from_utf8_lossy(&fresh.command(&["ACL", "WHOAMI"]).unwrap()).into_owned());
        out
    };
    let expected = answers(redis.addr());
    assert!(expected[0].starts_with("-NOAUTH"), "{expected:?}");
    assert_eq!(answers(coordis.addr()), expected);
}

/// How long a busy-script test waits for any one reply before it fails.
const BUSY_REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A restricted user's requests while a script is busy (past a 50 ms
/// `busy-reply-threshold`), on one server: answered at once, the ACL
/// checked before the busy check as in Redis's `processCommand` (NOPERM
/// for what the user may not run, BUSY for what it may, MULTI served and
/// its transaction doomed), and the denials in the ACL log as soon as the
/// script has ended. A user changed since its client's last request is
/// answered at once too, by its new rules.
fn busy_workload(addr: std::net::SocketAddr) -> Vec<String> {
    let mut admin = connect(addr);
    let mut out = vec![];
    for args in [
        &["CONFIG", "SET", "busy-reply-threshold", "50"][..],
        &["ACL", "LOG", "RESET"],
        &[
            "ACL", "SETUSER", "worker", "reset", "on", ">wpass", "~lock:*", "&jobs", "+ping", "+get", "+set", "+multi",
            "+exec", "+discard", "+publish",
        ],
        &["ACL", "SETUSER", "late", "reset", "on", ">lpass", "~*", "+get"],
    ] {
        out.push(run(&mut admin, args));
    }
    let mut late = RawClient::connect(addr).unwrap();
    late.set_read_timeout(Some(BUSY_REPLY_TIMEOUT)).unwrap();
    out.push(text_of(&late.command(&["AUTH", "late", "lpass"]).unwrap()));
    // After `late`'s last request: its rules change.
    out.push(run(&mut admin, &["ACL", "SETUSER", "late", "-get"]));
    let mut worker = RawClient::connect(addr).unwrap();
    worker.set_read_timeout(Some(BUSY_REPLY_TIMEOUT)).unwrap();
    out.push(text_of(&worker.command(&["AUTH", "worker", "wpass"]).unwrap()));
    let mut runner = RawClient::connect(addr).unwrap();
    runner.set_read_timeout(Some(BUSY_REPLY_TIMEOUT)).unwrap();
    let body = "local t = redis.call('time')[1] + 0; while redis.call('time')[1] + 0 < t + 5 do end return 1";
    runner
        .send(&RawClient::encode(&[b"EVAL", body.as_bytes(), b"0"]))
        .unwrap();
    let mut probe = RawClient::connect(addr).unwrap();
    probe.set_read_timeout(Some(BUSY_REPLY_TIMEOUT)).unwrap();
    let deadline = std::time::Instant::now() + BUSY_REPLY_TIMEOUT;
    while !probe.command(&["PING"]).unwrap().starts_with(b"-BUSY ") {
        assert!(std::time::Instant::now() < deadline, "the script never got busy");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for args in [
        &["PING"][..],
        &["GET", "lock:a"],
        &["GET", "other:1"],
        &["FLUSHALL"],
        &["PUBLISH", "other", "m"],
        &["PUBLISH", "jobs", "m"],
        &["MULTI"],
        &["GET", "other:2"],
        &["SET", "lock:a", "1"],
        &["EXEC"],
        &["SCRIPT", "KILL"],
        &["FLUSHALL"],
    ] {
        let started = std::time::Instant::now();
        let reply = text_of(&worker.command(args).unwrap());
        // At once: well before the script's 5 s.
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{args:?} waited");
        out.push(format!("{args:?} -> {reply}"));
    }
    // `late`'s rules changed after its last request: answered at once too,
    // from the rules as they are now.
    let started = std::time::Instant::now();
    out.push(format!("late: {}", text_of(&late.command(&["GET", "k"]).unwrap())));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "late's GET waited"
    );
    out.push(text_of(&probe.command(&["SCRIPT", "KILL"]).unwrap()));
    out.push(format!("runner: {}", text_of(&runner.read_reply().unwrap())));
    // In any order: coordis adds the entries of busy answers at the
    // script's next hook, after the answer (README).
    let mut entries: Vec<String> = acl_log(&mut admin, None).iter().map(|e| e.join(" ")).collect();
    entries.sort();
    out.extend(entries);
    run(&mut admin, &["ACL", "DELUSER", "worker", "late"]);
    out
}

fn text_of(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply).trim_end().to_string()
}

#[test]
fn a_restricted_users_requests_while_a_script_is_busy_are_answered_as_in_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let coordis = coordis::Server::builder().start_blocking().unwrap();
    let expected = busy_workload(redis.addr());
    let got = busy_workload(coordis.addr());
    let all = expected.join("\n");
    for needle in [
        "-BUSY",
        "-NOPERM",
        "-EXECABORT",
        "reason=key",
        "reason=command",
        "reason=channel",
        "context=multi",
    ] {
        assert!(all.contains(needle), "{needle} missing from Redis's answers:\n{all}");
    }
    assert_eq!(got, expected, "coordis (left), Redis (right)");
}
