//! Scripts against a real listener: atomicity, the busy threshold and SCRIPT
//! KILL, containment (memory, recursion, sandbox escapes), and the canonical
//! scripts in `scripts/lua/` on coordis and on a real Redis.

use std::time::{Duration, Instant};

use coordis::testing::{RawClient, RedisServer};

fn server() -> coordis::BlockingServer {
    coordis::Server::builder().start_blocking().unwrap()
}

fn eval(c: &mut RawClient, body: &str, keys: &[&str], args: &[&str]) -> Vec<u8> {
    let numkeys = keys.len().to_string();
    let mut cmd = vec!["EVAL", body, &numkeys];
    cmd.extend_from_slice(keys);
    cmd.extend_from_slice(args);
    c.command(&cmd).unwrap()
}

/// A server that allows DEBUG, as `--enable-debug-command yes`.
fn debug_server() -> coordis::BlockingServer {
    let mut builder = coordis::Server::builder();
    builder.config_mut().enable_debug_command = "yes".into();
    builder.start_blocking().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_script_is_atomic_across_keys() {
    let s = server();
    let addr = s.addr();
    // Writers keep a == b by updating both in one script; a reader script
    // checks the invariant. Plain commands from other clients interleave
    // between scripts, never inside one.
    let writers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = RawClient::connect(addr).unwrap();
                for _ in 0..300 {
                    eval(
                        &mut c,
                        "redis.call('incr', KEYS[1]); for i = 1, 200 do end; redis.call('incr', KEYS[2])",
                        &["a", "b"],
                        &[],
                    );
                }
            })
        })
        .collect();
    let mut r = RawClient::connect(addr).unwrap();
    let mut checks = 0;
    while !writers.iter().all(|w| w.is_finished()) {
        let reply = eval(
            &mut r,
            "return tonumber(redis.call('get', KEYS[1]) or 0) - tonumber(redis.call('get', KEYS[2]) or 0)",
            &["a", "b"],
            &[],
        );
        assert_eq!(reply, b":0\r\n");
        checks += 1;
    }
    for w in writers {
        w.join().unwrap();
    }
    assert!(checks > 0);
    assert_eq!(r.command(&["GET", "a"]).unwrap(), b"$4\r\n1200\r\n");
}

#[test]
fn busy_script_gets_busy_replies_and_script_kill_stops_it() {
    let s = server();
    let mut admin = RawClient::connect(s.addr()).unwrap();
    assert_eq!(
        admin.command(&["CONFIG", "SET", "lua-time-limit", "200"]).unwrap(),
        b"+OK\r\n"
    );
    let addr = s.addr();
    let runner = std::thread::spawn(move || {
        let mut c = RawClient::connect(addr).unwrap();
        eval(&mut c, "local i = 0 while true do i = i + 1 end", &[], &[])
    });
    std::thread::sleep(Duration::from_millis(400));
    let started = Instant::now();
    assert_eq!(
        admin.command(&["PING"]).unwrap(),
        b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    // A client that connects while the script runs is answered too.
    let mut late = RawClient::connect(addr).unwrap();
    assert!(text(&late.command(&["GET", "k"]).unwrap()).starts_with("-BUSY "));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "BUSY replies must not wait for the script"
    );
    assert_eq!(admin.command(&["SCRIPT", "KILL"]).unwrap(), b"+OK\r\n");
    let reply = text(&runner.join().unwrap());
    assert!(
        reply.starts_with("-ERR Script killed by user with SCRIPT KILL... script: "),
        "{reply}"
    );
    assert_eq!(admin.command(&["PING"]).unwrap(), b"+PONG\r\n");
    assert_eq!(
        admin.command(&["SCRIPT", "KILL"]).unwrap(),
        b"-NOTBUSY No scripts in execution right now.\r\n"
    );
}

#[test]
fn shutdown_nosave_during_a_script_closes_clients_that_arrived_meanwhile() {
    let s = server();
    let mut admin = RawClient::connect(s.addr()).unwrap();
    assert_eq!(
        admin.command(&["CONFIG", "SET", "lua-time-limit", "100"]).unwrap(),
        b"+OK\r\n"
    );
    let addr = s.addr();
    let runner = std::thread::spawn(move || {
        let mut c = RawClient::connect(addr).unwrap();
        let _ = c.command(&["EVAL", "while true do end", "0"]);
    });
    let mut late = None;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        let mut c = RawClient::connect(addr).unwrap();
        if text(&c.command(&["PING"]).unwrap()).starts_with("-BUSY ") {
            late = Some(c);
            break;
        }
    }
    // This client arrived while the script ran, so the engine has not seen
    // it; shutdown must still close it, not wait out the drain deadline.
    let mut late = late.expect("the script never became busy");
    let started = Instant::now();
    let _ = admin.command(&["SHUTDOWN", "NOSAVE"]);
    assert_eq!(late.read_to_close().unwrap(), b"");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    runner.join().unwrap();
}

#[test]
fn a_script_that_wrote_is_unkillable_but_the_server_keeps_answering() {
    let s = server();
    let mut admin = RawClient::connect(s.addr()).unwrap();
    admin.command(&["CONFIG", "SET", "lua-time-limit", "100"]).unwrap();
    let addr = s.addr();
    let runner = std::thread::spawn(move || {
        let mut c = RawClient::connect(addr).unwrap();
        let start = Instant::now();
        let reply = eval(
            &mut c,
            // Busy for about two seconds of the server's clock, however fast the machine.
            "redis.call('set', 'w', '1'); local t0 = redis.call('time')[1] + 0; while redis.call('time')[1] + 0 < t0 + 2 do end return 'done'",
            &[],
            &[],
        );
        (reply, start.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    let kill = text(&admin.command(&["SCRIPT", "KILL"]).unwrap());
    let (reply, _) = runner.join().unwrap();
    assert!(
        kill.starts_with("-UNKILLABLE Sorry the script already executed write commands"),
        "{kill}"
    );
    assert_eq!(reply, b"$4\r\ndone\r\n");
    assert_eq!(admin.command(&["GET", "w"]).unwrap(), b"$1\r\n1\r\n");
}

#[test]
fn memory_bombs_and_deep_recursion_fail_without_killing_the_server() {
    let s = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(s.addr()).unwrap();
    c.command(&["CONFIG", "SET", "lua-memory-limit", "64mb"]).unwrap();
    let bomb = text(&eval(
        &mut c,
        "local t = {} for i = 1, 5000 do t[i] = string.rep('x', 1024 * 1024 - 1) .. i end return #t",
        &[],
        &[],
    ));
    assert!(bomb.starts_with("-ERR ") && bomb.contains("memory"), "{bomb}");
    let deep = text(&eval(
        &mut c,
        "local function f(n) return f(n + 1) + 1 end return f(1)",
        &[],
        &[],
    ));
    assert!(deep.starts_with("-ERR ") && deep.contains("stack overflow"), "{deep}");
    // The VM and the server are fine afterwards.
    assert_eq!(eval(&mut c, "return 40 + 2", &[], &[]), b":42\r\n");
    assert_eq!(c.command(&["PING"]).unwrap(), b"+PONG\r\n");
}

#[test]
fn sandbox_escapes_fail() {
    let s = server();
    let mut c = RawClient::connect(s.addr()).unwrap();
    let attempts = [
        "return io.open('/etc/passwd')",
        "return os.execute('true')",
        "return require('os')",
        "return package.loaded",
        "return debug.getinfo(1)",
        "return loadfile('/etc/passwd')",
        "return dofile('/etc/passwd')",
        "return getfenv(0)",
        "rawset(_G, 'x', 1)",
        "setmetatable(_G, nil)",
        "redis.call = function() end",
        "string.rep = nil",
        "_G.redis = nil",
        "return assert(loadstring(string.dump(function() return 1 end)))()",
    ];
    for body in attempts {
        let reply = text(&eval(&mut c, body, &[], &[]));
        assert!(reply.starts_with("-"), "{body} => {reply}");
    }
    // Nothing leaked between scripts.
    assert_eq!(eval(&mut c, "return type(redis.call)", &[], &[]), b"$8\r\nfunction\r\n");
}

#[test]
fn evalsha_uses_the_cache_and_noscript_otherwise() {
    let s = server();
    let mut c = RawClient::connect(s.addr()).unwrap();
    let sha = coordis::internals::sha1_hex(b"return ARGV[1]");
    assert_eq!(
        c.command(&["EVALSHA", &sha, "0", "x"]).unwrap(),
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
    assert_eq!(eval(&mut c, "return ARGV[1]", &[], &["x"]), b"$1\r\nx\r\n");
    assert_eq!(c.command(&["EVALSHA", &sha, "0", "y"]).unwrap(), b"$1\r\ny\r\n");
    assert_eq!(c.command(&["SCRIPT", "FLUSH"]).unwrap(), b"+OK\r\n");
    assert_eq!(
        c.command(&["EVALSHA", &sha, "0", "z"]).unwrap(),
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
}

/// Runs each canonical script of scripts/lua through the same steps on one
/// server and returns the replies.
fn canonical_scripts_session(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let load = |name: &str| {
        std::fs::read_to_string(format!("{}/../scripts/lua/{name}.lua", env!("CARGO_MANIFEST_DIR"))).unwrap()
    };
    let (unlock, extend, acquire, release, fenced_acquire, fenced_write) = (
        load("unlock"),
        load("extend"),
        load("semaphore_acquire"),
        load("semaphore_release"),
        load("fenced_acquire"),
        load("fenced_write"),
    );
    let mut c = RawClient::connect(addr).unwrap();
    let mut out = vec![c.command(&["FLUSHALL"]).unwrap()];
    out.push(c.command(&["SET", "lock:job", "pod-1", "NX", "PX", "30000"]).unwrap());
    out.push(eval(&mut c, &unlock, &["lock:job"], &["pod-2"]));
    out.push(eval(&mut c, &extend, &["lock:job"], &["pod-2", "60000"]));
    out.push(eval(&mut c, &extend, &["lock:job"], &["pod-1", "60000"]));
    out.push(c.command(&["TTL", "lock:job"]).unwrap());
    out.push(eval(&mut c, &unlock, &["lock:job"], &["pod-1"]));
    out.push(c.command(&["EXISTS", "lock:job"]).unwrap());
    for (who, now) in [
        ("a", "1000"),
        ("b", "1001"),
        ("c", "1002"),
        ("a", "1003"),
        ("d", "1004"),
    ] {
        out.push(eval(&mut c, &acquire, &["sem"], &[who, "2", "10000", now]));
    }
    out.push(eval(&mut c, &acquire, &["sem"], &["d", "2", "10000", "20000"]));
    out.push(eval(&mut c, &release, &["sem"], &["d"]));
    out.push(eval(&mut c, &release, &["sem"], &["d"]));
    out.push(eval(
        &mut c,
        &fenced_acquire,
        &["flock", "flock:token"],
        &["a", "30000"],
    ));
    out.push(eval(
        &mut c,
        &fenced_acquire,
        &["flock", "flock:token"],
        &["b", "30000"],
    ));
    out.push(eval(&mut c, &fenced_write, &["res", "res:token"], &["2", "from-b"]));
    out.push(eval(&mut c, &fenced_write, &["res", "res:token"], &["1", "from-a"]));
    out.push(c.command(&["GET", "res"]).unwrap());
    out
}

#[test]
fn canonical_scripts_behave_the_same_on_coordis_and_redis() {
    let coordis_server = server();
    let ours = canonical_scripts_session(coordis_server.addr());
    assert_eq!(ours[2], b":0\r\n", "unlock by a non-owner");
    assert_eq!(ours[6], b":1\r\n", "unlock by the owner");
    assert_eq!(ours.last().unwrap(), b"$6\r\nfrom-b\r\n", "stale fenced write refused");
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let theirs = canonical_scripts_session(redis.addr());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(text(a), text(b), "step {i}");
    }
}

/// What a second client sees while a script is busy, then after SCRIPT
/// KILL: MULTI is accepted and its commands refused (Redis's test "MULTI and
/// script timeout"), EXEC then aborts, UNWATCH inside MULTI is queued,
/// SHUTDOWN without NOSAVE is refused, and AUTH (allowed while busy, served
/// by coordis once the script ends) still answers.
fn busy_session(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let mut admin = RawClient::connect(addr).unwrap();
    admin
        .command(&["CONFIG", "SET", "busy-reply-threshold", "100"])
        .unwrap();
    admin.command(&["SET", "k", "1"]).unwrap();
    let mut early = RawClient::connect(addr).unwrap();
    let mut replies = vec![early.command(&["MULTI"]).unwrap()];
    let runner = std::thread::spawn(move || {
        let mut c = RawClient::connect(addr).unwrap();
        eval(&mut c, "local i = 0 while true do i = i + 1 end", &[], &[])
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut c = RawClient::connect(addr).unwrap();
    let session: &[&[&str]] = &[
        &["MULTI"],
        &["INCR", "x"],
        &["EXEC"],
        &["EXEC"],
        &["DISCARD"],
        &["MULTI"],
        &["MULTI"],
        &["WATCH", "k"],
        &["UNWATCH"],
        &["SHUTDOWN"],
        &["DISCARD"],
        &["EXEC", "extra"],
        &["PING"],
        &["SHUTDOWN"],
        &["SCRIPT", "LOAD", "return 1"],
        &["CLIENT", "ID"],
        &["NOSUCH"],
        &["CLIENT", "NOSUCH"],
        &["MULTI"],
        &["SET", "k", "2"],
    ];
    for args in session {
        replies.push(c.command(args).unwrap());
    }
    // A client already in MULTI when the script got busy.
    replies.push(early.command(&["INCR", "x"]).unwrap());
    replies.push(early.command(&["EXEC"]).unwrap());
    // A pipelined transaction.
    let mut piped = RawClient::connect(addr).unwrap();
    piped
        .send(
            &[
                RawClient::encode(&[b"MULTI"]),
                RawClient::encode(&[b"INCR", b"x"]),
                RawClient::encode(&[b"EXEC"]),
            ]
            .concat(),
        )
        .unwrap();
    for _ in 0..3 {
        replies.push(piped.read_reply().unwrap());
    }
    replies.push(admin.command(&["SCRIPT", "KILL"]).unwrap());
    let killed = runner.join().unwrap();
    replies.push(killed[..killed.len().min(46)].to_vec());
    // After the script: the transaction begun while busy was doomed.
    replies.push(c.command(&["EXEC"]).unwrap());
    for args in [&["MULTI"][..], &["INCR", "x"], &["EXEC"], &["GET", "k"]] {
        replies.push(c.command(args).unwrap());
    }
    replies
}

#[test]
fn busy_script_transactions_match_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let s = server();
    let ours = busy_session(s.addr());
    let theirs = busy_session(redis.addr());
    let show = |r: &Vec<Vec<u8>>| r.iter().map(|b| text(b)).collect::<Vec<_>>();
    assert_eq!(show(&ours), show(&theirs));
}

/// A busy function and a busy script, each stopped by its own KILL: what
/// PING, the other KILL and the runner get.
fn busy_function_session(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let mut admin = RawClient::connect(addr).unwrap();
    admin
        .command(&["CONFIG", "SET", "busy-reply-threshold", "100"])
        .unwrap();
    let mut replies = vec![admin
        .command(&[
            "FUNCTION",
            "LOAD",
            "REPLACE",
            "#!lua name=busy\nredis.register_function('spin', function() local i = 0 while true do i = i + 1 end end)",
        ])
        .unwrap()];
    for (run, right_kill, wrong_kill) in [
        (&["FCALL", "spin", "0"][..], "FUNCTION", "SCRIPT"),
        (
            &["EVAL", "local i = 0 while true do i = i + 1 end", "0"][..],
            "SCRIPT",
            "FUNCTION",
        ),
    ] {
        let run: Vec<String> = run.iter().map(|s| s.to_string()).collect();
        let runner = std::thread::spawn(move || {
            let mut c = RawClient::connect(addr).unwrap();
            let args: Vec<&str> = run.iter().map(String::as_str).collect();
            c.command(&args).unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        replies.push(admin.command(&["PING"]).unwrap());
        replies.push(admin.command(&[wrong_kill, "KILL"]).unwrap());
        replies.push(admin.command(&[right_kill, "KILL"]).unwrap());
        replies.push(runner.join().unwrap());
        replies.push(admin.command(&[right_kill, "KILL"]).unwrap());
    }
    replies
}

#[test]
fn busy_functions_and_scripts_are_killed_each_by_its_own_kill_as_in_redis() {
    let coordis_server = server();
    let ours = busy_function_session(coordis_server.addr());
    assert_eq!(
        ours[1],
        b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(ours[3], b"+OK\r\n", "FUNCTION KILL stops the function");
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let theirs = busy_function_session(redis.addr());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(text(a), text(b), "step {i}");
    }
}

/// FUNCTION DUMP's payload moves both ways: a dump from Redis (whose long
/// library code is LZF-compressed) restores into coordis, and coordis's
/// dump restores into Redis.
#[test]
fn function_dumps_restore_across_coordis_and_redis() {
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let coordis_server = server();
    let mut theirs = RawClient::connect(redis.addr()).unwrap();
    let mut ours = RawClient::connect(coordis_server.addr()).unwrap();
    let library = format!(
        "#!lua name=big\n{}",
        (0..40)
            .map(|i| format!(
                "redis.register_function('f{i}', function(keys, args) return 'result of function {i}' end)\n"
            ))
            .collect::<String>()
    );
    assert_eq!(
        theirs.command(&["FUNCTION", "LOAD", &library]).unwrap(),
        b"$3\r\nbig\r\n"
    );
    let dump = theirs.command(&["FUNCTION", "DUMP"]).unwrap();
    let payload = bulk_payload(&dump);
    assert!(payload.len() < library.len(), "Redis compressed the code");
    let payload_arg: &[u8] = &payload;
    assert_eq!(
        ours.command_bytes(&[b"FUNCTION", b"RESTORE", payload_arg]).unwrap(),
        b"+OK\r\n"
    );
    assert_eq!(
        ours.command(&["FCALL", "f39", "0"]).unwrap(),
        b"$21\r\nresult of function 39\r\n"
    );
    // And back: coordis's dump into an empty Redis.
    ours.command(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=small\nredis.register_function('g', function() return 7 end)",
    ])
    .unwrap();
    let dump = bulk_payload(&ours.command(&["FUNCTION", "DUMP"]).unwrap());
    theirs.command(&["FUNCTION", "FLUSH"]).unwrap();
    let dump_arg: &[u8] = &dump;
    assert_eq!(
        theirs.command_bytes(&[b"FUNCTION", b"RESTORE", dump_arg]).unwrap(),
        b"+OK\r\n"
    );
    assert_eq!(theirs.command(&["FCALL", "g", "0"]).unwrap(), b":7\r\n");
    assert_eq!(
        theirs.command(&["FCALL", "f0", "0"]).unwrap(),
        b"$20\r\nresult of function 0\r\n"
    );
}

/// The bytes of a bulk reply.
fn bulk_payload(reply: &[u8]) -> Vec<u8> {
    let header_end = reply.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    reply[header_end..reply.len() - 2].to_vec()
}

/// `pcall` around a `redis.*` function that raises (Redis raises an error
/// table, whose text pcall returns) gives the script the error's text.
fn pcall_error_texts(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let mut c = RawClient::connect(addr).unwrap();
    [
        "pcall(redis.setresp, 5)",
        "pcall(redis.setresp)",
        "pcall(redis.sha1hex)",
        "pcall(redis.log, 99, 'x')",
        "pcall(redis.call, 'nosuchcommand')",
    ]
    .iter()
    .map(|call| {
        eval(
            &mut c,
            &format!("local ok, e = {call} return {{tostring(ok), type(e), e}}"),
            &[],
            &[],
        )
    })
    .collect()
}

#[test]
fn pcall_gives_the_text_of_errors_redis_functions_raise_as_redis_does() {
    let s = server();
    let ours = pcall_error_texts(s.addr());
    assert_eq!(
        text(&ours[0]),
        "*3\r\n$5\r\nfalse\r\n$6\r\nstring\r\n$32\r\nERR RESP version must be 2 or 3.\r\n"
    );
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let theirs = pcall_error_texts(redis.addr());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(text(a), text(b), "call {i}");
    }
}

/// Runs each script with EVAL (no keys) on one server, after a SCRIPT FLUSH
/// that puts cjson's settings back to their defaults; returns the replies.
fn eval_each(addr: std::net::SocketAddr, scripts: &[&str]) -> Vec<Vec<u8>> {
    let mut c = RawClient::connect(addr).unwrap();
    assert_eq!(c.command(&["SCRIPT", "FLUSH"]).unwrap(), b"+OK\r\n");
    scripts.iter().map(|s| eval(&mut c, s, &[], &[])).collect()
}

/// The replies to `scripts` on coordis, checked against Redis's when a
/// redis-server is at hand; `expect` pins some of them (index, reply)
/// whether or not it is.
fn same_as_redis(scripts: &[&str], expect: &[(usize, &str)]) {
    let coordis_server = server();
    let ours = eval_each(coordis_server.addr(), scripts);
    for &(i, reply) in expect {
        assert_eq!(text(&ours[i]), reply, "{}", scripts[i]);
    }
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let theirs = eval_each(redis.addr(), scripts);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(text(a), text(b), "{}", scripts[i]);
    }
}

/// A bulk string reply.
fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// The error reply of an EVAL whose one-line `script` raised `line`.
fn script_error(script: &str, line: &str) -> String {
    let sha = coordis::internals::sha1_hex(script.as_bytes());
    format!("-ERR user_script:1: {line} script: {sha}, on @user_script:1.\r\n")
}

#[test]
fn cjson_settings_read_back_and_refuse_bad_arguments_as_in_redis() {
    let scripts = [
        // Defaults.
        "return {cjson.encode_sparse_array()}",
        "return {cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision()}",
        "return {cjson.encode_keep_buffer(), cjson.encode_invalid_numbers(), cjson.decode_invalid_numbers()}",
        "return {cjson._NAME, cjson._VERSION, cjson.null == cjson.new().null}",
        // Set, then read back.
        "return {cjson.encode_sparse_array(true, 3, 7)}",
        "return {cjson.encode_sparse_array(nil, nil, 4)}",
        "return {cjson.encode_sparse_array('off', '5', ' 0x10 ')}",
        "return {cjson.encode_max_depth(7), cjson.encode_max_depth()}",
        "return {cjson.decode_max_depth(2.9), cjson.decode_max_depth(2^32 + 6)}",
        "return {cjson.encode_number_precision(1), cjson.encode_number_precision('14')}",
        "return {cjson.encode_keep_buffer(false), cjson.encode_keep_buffer('on')}",
        "return {cjson.encode_invalid_numbers('null'), cjson.encode_invalid_numbers(true), cjson.encode_invalid_numbers('off')}",
        "return {cjson.decode_invalid_numbers('off'), cjson.decode_invalid_numbers(true)}",
        // A number that is not an int in C: NaN and out of range are 0.
        "return {cjson.encode_sparse_array(nil, 0/0, 2^63)}",
        // Bad arguments.
        "return cjson.encode_max_depth(1, 2)",
        "return cjson.encode_sparse_array(true, 2, 10, 0)",
        "return cjson.encode_max_depth(0)",
        "return cjson.encode_max_depth(2^31)",
        "return cjson.encode_number_precision(15)",
        "return cjson.encode_max_depth('deep')",
        "return cjson.decode_max_depth({})",
        "return cjson.encode_sparse_array(nil, -1)",
        "return cjson.encode_sparse_array(nil, nil, 'x')",
        "return cjson.encode_keep_buffer('yes')",
        "return cjson.encode_keep_buffer(1)",
        "return cjson.encode_invalid_numbers('nul\\0l')",
        "return cjson.decode_invalid_numbers('null')",
        "return cjson.encode_invalid_numbers(cjson.null)",
        "return cjson.encode(1, 2)",
        "return cjson.decode()",
        "return cjson.decode(nil)",
        // The function is named as the script called it.
        "local depth = cjson.encode_max_depth return depth(0)",
        "return {pcall(cjson.encode_max_depth, 0)}",
        "return cjson:encode_max_depth(3)",
        "return cjson:encode_max_depth()",
        "return {pcall(function() return cjson.encode_number_precision(0) end)}",
        // An error after the first argument keeps what was set before it.
        "cjson.encode_sparse_array(true, -1)",
        "return {cjson.encode_sparse_array()}",
    ];
    let error = |i: usize, line: &str| script_error(scripts[i], line);
    same_as_redis(
        &scripts,
        &[
            (0, "*3\r\n$-1\r\n:2\r\n:10\r\n"),
            (1, "*3\r\n:1000\r\n:1000\r\n:14\r\n"),
            (2, "*3\r\n:1\r\n$-1\r\n:1\r\n"),
            (3, "*3\r\n$5\r\ncjson\r\n$5\r\n2.1.0\r\n:1\r\n"),
            (5, "*3\r\n:1\r\n:3\r\n:4\r\n"),
            (6, "*3\r\n$-1\r\n:5\r\n:16\r\n"),
            (8, "*2\r\n:2\r\n:6\r\n"),
            (11, "*3\r\n$4\r\nnull\r\n:1\r\n$-1\r\n"),
            (13, "*3\r\n$-1\r\n:0\r\n:0\r\n"),
            (
                14,
                &error(14, "bad argument #2 to 'encode_max_depth' (found too many arguments)"),
            ),
            (
                17,
                &error(17, "bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)"),
            ),
            (
                19,
                &error(19, "bad argument #1 to 'encode_max_depth' (number expected, got string)"),
            ),
            (
                21,
                &error(21, "bad argument #1 to 'encode_sparse_array' (expected integer between 0 and 2147483647)"),
            ),
            (
                22,
                &error(22, "bad argument #3 to 'encode_sparse_array' (number expected, got string)"),
            ),
            (
                25,
                &error(25, "bad argument #1 to 'encode_invalid_numbers' (invalid option 'nul')"),
            ),
            (
                31,
                &error(31, "bad argument #1 to 'depth' (expected integer between 1 and 2147483647)"),
            ),
            (
                32,
                &format!(
                    "*2\r\n$-1\r\n{}",
                    bulk("bad argument #1 to '?' (expected integer between 1 and 2147483647)")
                ),
            ),
            (
                34,
                &error(34, "calling 'encode_max_depth' on bad self (number expected, got table)"),
            ),
            (
                35,
                &format!(
                    "*2\r\n$-1\r\n{}",
                    bulk("user_script:1: bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)")
                ),
            ),
            (37, "*3\r\n:1\r\n:0\r\n:0\r\n"),
        ],
    );
}

#[test]
fn cjson_settings_change_what_encode_and_decode_do_as_in_redis() {
    let scripts = [
        // Sparse arrays: by default more than 10 and over twice the items
        // is an error; convert makes them objects; ratio 0 allows all.
        "return cjson.encode({[1] = 1, [10] = 10})",
        "return cjson.encode({[1] = 1, [11] = 11})",
        "cjson.encode_sparse_array(true) return cjson.encode({[1] = 1, [11] = 11})",
        "cjson.encode_sparse_array(false, 1, 0) return cjson.encode({[1] = 1, [3] = 3})",
        "cjson.encode_sparse_array(false, 0) return cjson.encode({[2] = 2})",
        // items * ratio wraps as C's int multiplication does.
        "cjson.encode_sparse_array(false, 2147483647, 0) return cjson.encode({[1] = 1, [5] = 5})",
        // An index of 2^31 or more makes the table an object.
        "cjson.encode_sparse_array(false, 2, 10) return cjson.encode({[1] = 1, [2^31] = 2})",
        // Depth.
        "cjson.encode_max_depth(2) return cjson.encode({{1}})",
        "return cjson.encode({{{1}}})",
        "return cjson.encode({a = {b = {}}})",
        "cjson.decode_max_depth(2) return cjson.decode('[[1]]')",
        "return cjson.decode('  [ [ [1]]]')",
        "return cjson.decode('{\"a\":{\"b\":[]}}')",
        // Past the C stack's room, whatever the setting.
        "cjson.encode_max_depth(100000) local t = {} for i = 1, 9000 do t = {t} end return cjson.encode(t)",
        "local t = {} for i = 1, 9000 do t = {a = t} end return cjson.encode(t)",
        "cjson.decode_max_depth(100000) return #cjson.decode(string.rep('[', 7998) .. string.rep(']', 7998))",
        "return cjson.decode(string.rep('[', 9000))",
        "return cjson.decode(string.rep('{\"a\":', 9000))",
        // Precision.
        "cjson.encode_number_precision(3) return cjson.encode({1.23456, 123456, 0.0001234, -0, [5] = 1/3})",
        "return cjson.encode({[1.23456] = 1})",
        "cjson.encode_number_precision(14) return cjson.encode(math.pi)",
        // Invalid numbers on encode.
        "return cjson.encode(1/0)",
        "cjson.encode_invalid_numbers(true) return cjson.encode({1/0, -1/0, 0/0, -(0/0)})",
        "return cjson.encode({[1/0] = 1})",
        "cjson.encode_invalid_numbers('null') return cjson.encode({1/0, -1/0, 0/0})",
        "return cjson.encode({[-1/0] = 1})",
        // Invalid numbers on decode: allowed by default.
        "return {tostring(cjson.decode('nan')), tostring(cjson.decode('-Infinity')), cjson.decode('0x10'), cjson.decode('+12'), cjson.decode('012')}",
        "cjson.decode_invalid_numbers(false) return cjson.decode('[1, 0x10]')",
        "return cjson.decode('-inf')",
        "return cjson.decode('012')",
        "return cjson.decode('+1')",
        "return cjson.decode('nan')",
        "return cjson.decode('[-0.5, 10, 1e2]')",
    ];
    let error = |i: usize, line: &str| script_error(scripts[i], line);
    same_as_redis(
        &scripts,
        &[
            (0, &bulk("[1,null,null,null,null,null,null,null,null,10]")),
            (1, &error(1, "Cannot serialise table: excessively sparse array")),
            (2, "$15\r\n{\"1\":1,\"11\":11}\r\n"),
            (5, &error(5, "Cannot serialise table: excessively sparse array")),
            (6, "$22\r\n{\"1\":1,\"2147483648\":2}\r\n"),
            (8, &error(8, "Cannot serialise, excessive nesting (3)")),
            (
                11,
                &error(11, "Found too many nested data structures (3) at character 7"),
            ),
            (13, &error(13, "Cannot serialise, excessive nesting (7998)")),
            (14, &error(14, "Cannot serialise, excessive nesting (4000)")),
            (15, ":1\r\n"),
            (
                16,
                &error(16, "Found too many nested data structures (7999) at character 7999"),
            ),
            (
                17,
                &error(17, "Found too many nested data structures (4000) at character 19996"),
            ),
            (18, &bulk("[1.23,1.23e+05,0.000123,-0,0.333]")),
            (22, "$18\r\n[inf,-inf,nan,nan]\r\n"),
            (24, "$16\r\n[null,null,null]\r\n"),
            (25, "$10\r\n{\"null\":1}\r\n"),
            (26, "*5\r\n$3\r\nnan\r\n$4\r\n-inf\r\n:16\r\n:12\r\n:12\r\n"),
            (27, &error(27, "Expected value but found invalid number at character 5")),
            (31, &error(31, "Expected value but found invalid token at character 1")),
        ],
    );
}

#[test]
fn cjson_decodes_token_by_token_as_in_redis() {
    let scripts = [
        "return cjson.decode('[1 2]')",
        "return cjson.decode('{\"a\" 1}')",
        "return cjson.decode('{1:2}')",
        "return cjson.decode('[1,]')",
        "return cjson.decode('[1] x')",
        "return cjson.decode('  ')",
        "return cjson.decode('-')",
        "return cjson.decode('1.5e')",
        "return cjson.decode('[nan(abc), -0x1p4, infinity]')[2]",
        "return cjson.decode('\"a\\\\qb\"')",
        "return cjson.decode('\"\\\\')",
        "return cjson.decode('\"x')",
        "return cjson.decode('\"\\\\u12\"')",
        "return cjson.decode('\"\\\\ud83d\\\\ude00\"')",
        "return cjson.decode('\"\\\\ud800\"')",
        "return cjson.decode('\"\\\\udc00\\\\ud800\"')",
        "return cjson.decode('\"\\\\ud800\\\\u0041\"')",
        // C reads up to the first NUL; one in the first two bytes is UTF-16.
        "return cjson.decode('[1]\\0junk')",
        "return cjson.decode('\"a\\0b\"')",
        "return cjson.decode('a\\0')",
        // A number is read as its text; the name is the script's.
        "return cjson.decode(123)",
        "return cjson.decode({})",
        "local parse = cjson.decode return parse()",
        "return {pcall(cjson.decode, {})}",
        "return {pcall(function() return cjson.encode(function() end) end)}",
    ];
    let error = |i: usize, line: &str| script_error(scripts[i], line);
    same_as_redis(
        &scripts,
        &[
            (
                0,
                &error(0, "Expected comma or array end but found T_NUMBER at character 4"),
            ),
            (3, &error(3, "Expected value but found T_ARR_END at character 4")),
            (6, &error(6, "Expected value but found invalid number at character 1")),
            (7, &error(7, "Expected the end but found invalid token at character 4")),
            (8, ":-16\r\n"),
            (
                9,
                &error(9, "Expected value but found invalid escape code at character 3"),
            ),
            (
                11,
                &error(11, "Expected value but found unexpected end of string at character 3"),
            ),
            (13, "$4\r\n\u{1f600}\r\n"),
            (
                14,
                &error(
                    14,
                    "Expected value but found invalid unicode escape code at character 2",
                ),
            ),
            (17, "*1\r\n:1\r\n"),
            (19, &error(19, "JSON parser does not support UTF-16 or UTF-32")),
            (20, ":123\r\n"),
            (22, &error(22, "bad argument #1 to 'parse' (expected 1 argument)")),
            (
                23,
                &format!(
                    "*2\r\n$-1\r\n{}",
                    bulk("bad argument #1 to '?' (string expected, got table)")
                ),
            ),
            (
                24,
                &format!(
                    "*2\r\n$-1\r\n{}",
                    bulk("user_script:1: Cannot serialise function: type not supported")
                ),
            ),
        ],
    );
}

/// cjson settings a script makes last for later scripts until SCRIPT
/// FLUSH; functions have settings of their own (Redis runs them in another
/// VM), which SCRIPT FLUSH leaves alone; cjson.new() makes an independent
/// instance.
fn cjson_settings_lifetime_session(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let mut c = RawClient::connect(addr).unwrap();
    c.command(&["SCRIPT", "FLUSH"]).unwrap();
    c.command(&["FUNCTION", "FLUSH"]).unwrap();
    let library = "#!lua name=cj\n\
        redis.register_function('depth', function(keys, args) return cjson.encode_max_depth(args[1]) end)\n\
        redis.register_function('nest', function() return cjson.encode({{{1}}}) end)";
    let mut out = vec![c.command(&["FUNCTION", "LOAD", library]).unwrap()];
    out.push(eval(&mut c, "return cjson.encode_max_depth(2)", &[], &[]));
    out.push(eval(&mut c, "return cjson.encode_max_depth()", &[], &[]));
    out.push(eval(&mut c, "return cjson.encode({{{1}}})", &[], &[]));
    out.push(c.command(&["FCALL", "depth", "0"]).unwrap());
    out.push(c.command(&["FCALL", "nest", "0"]).unwrap());
    out.push(c.command(&["FCALL", "depth", "0", "3"]).unwrap());
    out.push(c.command(&["SCRIPT", "FLUSH"]).unwrap());
    out.push(eval(&mut c, "return cjson.encode_max_depth()", &[], &[]));
    out.push(c.command(&["FCALL", "depth", "0"]).unwrap());
    out.push(c.command(&["FUNCTION", "FLUSH"]).unwrap());
    out.push(c.command(&["FUNCTION", "LOAD", library]).unwrap());
    out.push(c.command(&["FCALL", "depth", "0"]).unwrap());
    out.push(eval(
        &mut c,
        "local a = cjson.new() local b = a.new() a.encode_number_precision(2) b.encode_max_depth(1) \
         a.x = 'writable' \
         return {a.encode(1.234), b.encode(1.234), cjson.encode(1.234), a.encode_max_depth(), b.encode_max_depth(), a.x, pcall(b.encode, {{}})}",
        &[],
        &[],
    ));
    out.push(eval(&mut c, "cjson.encode_max_depth = nil", &[], &[]));
    out
}

#[test]
fn cjson_settings_last_until_script_flush_and_functions_keep_their_own_as_in_redis() {
    let coordis_server = server();
    let ours = cjson_settings_lifetime_session(coordis_server.addr());
    assert_eq!(text(&ours[2]), ":2\r\n", "a setting outlives its script");
    assert_eq!(text(&ours[4]), ":1000\r\n", "functions have their own settings");
    assert_eq!(text(&ours[5]), "$7\r\n[[[1]]]\r\n");
    assert_eq!(text(&ours[8]), ":1000\r\n", "SCRIPT FLUSH resets the scripts' settings");
    assert_eq!(text(&ours[9]), ":3\r\n", "and not the functions'");
    assert_eq!(text(&ours[12]), ":3\r\n", "FUNCTION FLUSH keeps them too");
    assert_eq!(
        text(&ours[13]),
        format!(
            "*8\r\n$3\r\n1.2\r\n$5\r\n1.234\r\n$5\r\n1.234\r\n:1000\r\n:1\r\n$8\r\nwritable\r\n$-1\r\n{}",
            bulk("Cannot serialise, excessive nesting (2)")
        )
    );
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let theirs = cjson_settings_lifetime_session(redis.addr());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(text(a), text(b), "step {i}");
    }
}

#[test]
fn numbers_passed_to_redis_call_are_printed_as_redis_prints_them() {
    same_as_redis(
        &[
            "redis.call('set', 'x', 9007199254740991) return redis.call('get', 'x')",
            "return {redis.call('echo', 3.0), redis.call('echo', 0.1), redis.call('echo', -0.0), redis.call('echo', 1e300)}",
            "return {redis.call('echo', 1/0), redis.call('echo', -1/0), redis.call('echo', 0/0), redis.call('echo', -(0/0))}",
            "return {redis.call('echo', 1e-300), redis.call('echo', 123456789012345678), redis.call('echo', 2^53 + 1)}",
            "redis.call('set', 'y', tonumber('7') + 0.1) return redis.call('get', 'y')",
            "return redis.pcall('echo', {})",
        ],
        &[
            (0, &bulk("9007199254740991")),
            (4, &bulk("7.0999999999999996")),
        ],
    );
}

#[test]
fn redis_call_takes_as_many_arguments_as_unpack_gives_as_in_redis() {
    same_as_redis(
        &[
            "local a = {} for i = 1, 7999 do a[i] = 1 end return redis.call('lpush', 'l', unpack(a))",
            "local a = {} for i = 1, 7998 do a[i] = 'v' end return redis.call('rpush', 'l', 'w', unpack(a))",
            "local a = {} for i = 1, 7999 do a[i] = 1 end return redis.pcall('lpush', 'l', {}, unpack(a))",
            "local a = {} for i = 1, 8000 do a[i] = 1 end return redis.call('lpush', 'l', unpack(a))",
        ],
        &[(0, ":7999\r\n"), (1, ":15998\r\n")],
    );
}

#[test]
fn the_globals_metatable_is_read_only_as_in_redis() {
    let script = "local g = getmetatable(_G) g.__index = {}";
    same_as_redis(
        &[
            script,
            "return {type(getmetatable(_G)), type(getmetatable(_G).__index), getmetatable(_G) == getmetatable(_G)}",
            "local g = getmetatable(_G) return {pcall(function() g.__index = {} end)}",
            "local v = getmetatable(_G).__index(_G, 'zz') return v",
            "setmetatable(getmetatable(_G), {})",
            "rawset(getmetatable(_G), 'a', 1)",
            "setmetatable(_G, {})",
            "_G = {}",
            "return getmetatable('').__index == string",
            "local ok = pcall(function() getmetatable('').x = 1 end) return ok",
        ],
        &[(0, &script_error(script, "Attempt to modify a readonly table"))],
    );
}

/// DEBUG SET-DISABLE-DENY-SCRIPTS: off, scripts are refused `noscript`
/// commands (DEBUG, CLIENT); on (any `atoi` non-zero), they may call them.
fn deny_scripts_session(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let mut c = RawClient::connect(addr).unwrap();
    let debug_call = "return redis.pcall('debug', 'protocol', 'integer')";
    let client_call = "return type(redis.pcall('client', 'list'))";
    let mut out = vec![];
    for switch in [None, Some("1"), Some("0"), Some("2x"), Some("abc")] {
        if let Some(switch) = switch {
            out.push(c.command(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", switch]).unwrap());
        }
        out.push(eval(&mut c, debug_call, &[], &[]));
        out.push(eval(&mut c, client_call, &[], &[]));
    }
    out.push(c.command(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS"]).unwrap());
    out.push(c.command(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1", "2"]).unwrap());
    out
}

#[test]
fn debug_set_disable_deny_scripts_lets_scripts_call_noscript_commands_as_in_redis() {
    let server = debug_server();
    let ours = deny_scripts_session(server.addr());
    assert_eq!(text(&ours[0]), "-ERR This Redis command is not allowed from script\r\n");
    assert_eq!(text(&ours[2]), "+OK\r\n");
    assert_eq!(text(&ours[3]), ":12345\r\n");
    assert_eq!(text(&ours[4]), bulk("string"));
    let Some(redis) = RedisServer::start(&["--enable-debug-command", "yes"]).unwrap() else {
        return;
    };
    let theirs = deny_scripts_session(redis.addr());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(text(a), text(b), "step {i}");
    }
}

/// Under `min-replicas-to-write` with no replica: a script with a shebang
/// and no `no-writes` (and a function without it) is refused before it
/// runs, also when MULTI would queue it; one without a shebang runs until
/// it writes.
fn too_few_replicas_session(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let mut c = RawClient::connect(addr).unwrap();
    c.command(&["FUNCTION", "FLUSH"]).unwrap();
    let library = "#!lua name=reps\n\
        redis.register_function('w', function() return 1 end)\n\
        redis.register_function{function_name='r', callback=function() return 2 end, flags={'no-writes'}}";
    let mut out = vec![c.command(&["FUNCTION", "LOAD", library]).unwrap()];
    out.push(c.command(&["SET", "x", "some value"]).unwrap());
    let shebang = "#!lua\nreturn redis.call('get', KEYS[1])";
    out.push(c.command(&["SCRIPT", "LOAD", shebang]).unwrap());
    let sha = coordis::internals::sha1_hex(shebang.as_bytes());
    out.push(c.command(&["CONFIG", "SET", "min-replicas-to-write", "1"]).unwrap());
    out.push(eval(
        &mut c,
        "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
        &["x"],
        &[],
    ));
    out.push(eval(&mut c, "return redis.call('get', KEYS[1])", &["x"], &[]));
    out.push(eval(&mut c, shebang, &["x"], &[]));
    out.push(eval(&mut c, "#!lua flags=allow-oom\nreturn 1", &[], &[]));
    out.push(c.command(&["EVALSHA", &sha, "1", "x"]).unwrap());
    out.push(eval(&mut c, "return redis.call('set', KEYS[1], 1)", &["x"], &[]));
    out.push(c.command(&["FCALL", "w", "0"]).unwrap());
    out.push(c.command(&["FCALL", "r", "0"]).unwrap());
    out.push(c.command(&["MULTI"]).unwrap());
    out.push(eval(&mut c, shebang, &["x"], &[]));
    out.push(c.command(&["EXEC"]).unwrap());
    out.push(c.command(&["CONFIG", "SET", "min-replicas-to-write", "0"]).unwrap());
    out.push(eval(&mut c, shebang, &["x"], &[]));
    out
}

#[test]
fn a_script_that_may_write_is_refused_before_it_runs_with_too_few_replicas_as_in_redis() {
    let coordis_server = server();
    let ours = too_few_replicas_session(coordis_server.addr());
    let noreplicas = "-NOREPLICAS Not enough good replicas to write.\r\n";
    assert_eq!(text(&ours[4]), bulk("some value"), "no-writes runs");
    assert_eq!(text(&ours[5]), bulk("some value"), "no shebang runs");
    assert_eq!(text(&ours[6]), noreplicas, "a shebang without no-writes");
    assert_eq!(text(&ours[8]), noreplicas, "the same by EVALSHA");
    assert_eq!(text(&ours[10]), noreplicas, "a function without no-writes");
    assert_eq!(text(&ours[13]), noreplicas, "refused before MULTI queues it");
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let theirs = too_few_replicas_session(redis.addr());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(text(a), text(b), "step {i}");
    }
}

/// `used_memory_lua` after a script that makes many strings, then after a
/// SCRIPT FLUSH and 3,000 short scripts (Redis's test "EVAL does not leak
/// in the Lua stack" runs 10,000 of them after a flush).
fn lua_memory_after_flush(addr: std::net::SocketAddr) -> (u64, u64) {
    let mut c = RawClient::connect(addr).unwrap();
    let lua_memory = |c: &mut RawClient| c.info_field("memory", "used_memory_lua").parse::<u64>().unwrap();
    let big = "local t = {} for i = 1, 20000 do t[i] = cmsgpack.pack({i, 'abc' .. i, {a = i}}) end return #t";
    assert_eq!(eval(&mut c, big, &[], &[]), b":20000\r\n");
    assert_eq!(c.command(&["SCRIPT", "FLUSH"]).unwrap(), b"+OK\r\n");
    let after_flush = lua_memory(&mut c);
    for _ in 0..3000 {
        assert!(eval(&mut c, "return redis.call('incr', KEYS[1])", &["x"], &[]).starts_with(b":"));
    }
    (after_flush, lua_memory(&mut c))
}

#[test]
fn script_flush_gives_back_the_lua_memory_scripts_used_as_redis_does() {
    let coordis_server = server();
    let mut servers = vec![("coordis", lua_memory_after_flush(coordis_server.addr()))];
    if let Some(redis) = RedisServer::start(&[]).unwrap() {
        servers.push(("redis", lua_memory_after_flush(redis.addr())));
    }
    // Redis's bound: a fresh VM there is 32 KB, ours 60 KB.
    for (name, (after_flush, after_scripts)) in servers {
        assert!(
            after_flush < 100 * 1024,
            "{name}: {after_flush} bytes after SCRIPT FLUSH"
        );
        assert!(
            after_scripts < 100 * 1024,
            "{name}: {after_scripts} bytes after 3000 scripts"
        );
    }
}

/// A key past its deadline with active expiry off: DEBUG OBJECT still shows
/// it (Redis's `dictFind`), a script's EXISTS expires it, and then DEBUG
/// OBJECT finds nothing (Redis's test "Script delete the expired key").
fn expired_key_session(addr: std::net::SocketAddr) -> Vec<String> {
    let mut c = RawClient::connect(addr).unwrap();
    let mut out = vec![text(&c.command(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap())];
    out.push(text(&c.command(&["SET", "key", "value", "PX", "1"]).unwrap()));
    std::thread::sleep(Duration::from_millis(20));
    let object = text(&c.command(&["DEBUG", "OBJECT", "key"]).unwrap());
    // The address and the access clock are each server's own.
    out.push(
        object
            .split(" lru:")
            .next()
            .unwrap()
            .split(" refcount:")
            .nth(1)
            .unwrap_or(&object)
            .to_string(),
    );
    out.push(text(&eval(&mut c, "return redis.call('EXISTS', 'key')", &[], &[])));
    out.push(text(&c.command(&["DEBUG", "OBJECT", "key"]).unwrap()));
    out.push(text(&c.command(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).unwrap()));
    out
}

#[test]
fn debug_object_shows_a_key_past_its_deadline_until_a_script_expires_it_as_in_redis() {
    let server = debug_server();
    let ours = expired_key_session(server.addr());
    assert_eq!(ours[2], "1 encoding:embstr serializedlength:6");
    assert_eq!(ours[3], ":0\r\n");
    assert_eq!(ours[4], "-ERR no such key\r\n");
    let Some(redis) = RedisServer::start(&["--enable-debug-command", "yes"]).unwrap() else {
        return;
    };
    assert_eq!(ours, expired_key_session(redis.addr()));
}

/// RESP3 replies a script receives from DEBUG PROTOCOL and returns as they
/// are (its maps and sets walked in the order Redis's Lua tables give), and
/// verbatim strings a script builds itself, to a RESP3 and a RESP2 caller.
fn resp3_conversion_session(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let mut c = RawClient::connect(addr).unwrap();
    c.command(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]).unwrap();
    let mut out = vec![];
    for hello in ["3", "2"] {
        c.command(&["HELLO", hello]).unwrap();
        for kind in ["verbatim", "map", "set", "attrib", "bignum", "double", "true"] {
            let body = format!("redis.setresp(3); return redis.call('debug', 'protocol', '{kind}')");
            out.push(eval(&mut c, &body, &[], &[]));
        }
        let walk = "redis.setresp(3); local r = redis.call('debug', 'protocol', 'map'); \
                    local o = {} for k, v in pairs(r.map) do table.insert(o, tostring(k)) end \
                    return table.concat(o, ',')";
        out.push(eval(&mut c, walk, &[], &[]));
        for built in [
            "return {verbatim_string={format='mkdown', string='hi'}}",
            "return {verbatim_string={format='txt\\0x', string='two\\nlines'}}",
            "return {verbatim_string={format='txt'}}",
            "return {verbatim_string='not a table'}",
        ] {
            out.push(eval(&mut c, built, &[], &[]));
        }
    }
    c.command(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"]).unwrap();
    out
}

#[test]
fn resp3_replies_pass_through_scripts_as_in_redis() {
    let server = debug_server();
    let ours = resp3_conversion_session(server.addr());
    assert_eq!(text(&ours[0]), "=29\r\ntxt:This is a verbatim\nstring\r\n");
    assert_eq!(text(&ours[8]), "=6\r\nmkd:hi\r\n");
    let Some(redis) = RedisServer::start(&["--enable-debug-command", "yes"]).unwrap() else {
        return;
    };
    let theirs = resp3_conversion_session(redis.addr());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(text(a), text(b), "step {i}");
    }
}

/// A transaction queued before `min-replicas-to-write` went up, with a
/// script or function that may write (declared so by its shebang or its
/// registration) or may not: its EXEC is refused or runs as in Redis.
fn queued_scripts_session(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let mut c = RawClient::connect(addr).unwrap();
    let mut admin = RawClient::connect(addr).unwrap();
    let library = "#!lua name=queued\n\
        redis.register_function('w', function() return 1 end)\n\
        redis.register_function{function_name='r', callback=function() return 2 end, flags={'no-writes'}}";
    let mut out = vec![c.command(&["FUNCTION", "LOAD", "REPLACE", library]).unwrap()];
    for queued in [
        &["EVAL", "#!lua\nreturn 1", "0"][..],
        &["EVAL", "#!lua flags=no-writes\nreturn 2", "0"],
        &["FCALL", "w", "0"],
        &["FCALL", "r", "0"],
        &["EVAL", "return 3", "0"],
    ] {
        admin.command(&["CONFIG", "SET", "min-replicas-to-write", "0"]).unwrap();
        out.push(c.command(&["MULTI"]).unwrap());
        out.push(c.command(queued).unwrap());
        admin.command(&["CONFIG", "SET", "min-replicas-to-write", "1"]).unwrap();
        out.push(c.command(&["EXEC"]).unwrap());
    }
    admin.command(&["CONFIG", "SET", "min-replicas-to-write", "0"]).unwrap();
    out
}

#[test]
fn exec_counts_what_queued_scripts_declared_as_in_redis() {
    let server = server();
    let ours = queued_scripts_session(server.addr());
    assert_eq!(
        text(&ours[3]),
        "-EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write.\r\n"
    );
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let theirs = queued_scripts_session(redis.addr());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(text(a), text(b), "step {i}");
    }
}

/// Scripts and functions have a Lua VM each, as in Redis: INFO memory
/// reports each (`used_memory_vm_functions` was always 0, the functions'
/// memory counted as the scripts'), FUNCTION LOAD grows only the
/// functions' VM, and SCRIPT FLUSH starts the scripts' VM afresh while the
/// functions' VM keeps its size. Returns what must hold on both servers.
fn vm_memory_session(addr: std::net::SocketAddr) -> Vec<(&'static str, bool)> {
    let mut c = RawClient::connect(addr).unwrap();
    let field = |c: &mut RawClient, f: &str| c.info_field("memory", f).parse::<u64>().unwrap();
    let fresh_eval = field(&mut c, "used_memory_vm_eval");
    let fresh_functions = field(&mut c, "used_memory_vm_functions");
    let mut checks = vec![("a fresh functions VM has a size", fresh_functions > 0)];
    let mut library = String::from("#!lua name=big\n");
    for i in 0..200 {
        library.push_str(&format!(
            "redis.register_function('f{i}', function(keys, args) return '{}' end)\n",
            "x".repeat(200)
        ));
    }
    assert_eq!(c.command(&["FUNCTION", "LOAD", &library]).unwrap(), b"$3\r\nbig\r\n");
    let functions = field(&mut c, "used_memory_vm_functions");
    checks.push((
        "FUNCTION LOAD grows the functions' VM",
        functions > fresh_functions + 20_000,
    ));
    checks.push((
        "FUNCTION LOAD leaves the scripts' VM",
        field(&mut c, "used_memory_vm_eval") < fresh_eval + 8_000,
    ));
    for i in 0..300 {
        let body = format!("return '{i}' .. string.rep('y', 100)");
        assert!(eval(&mut c, &body, &[], &[]).starts_with(b"$"));
    }
    checks.push((
        "cached scripts grow the scripts' VM",
        field(&mut c, "used_memory_vm_eval") > fresh_eval + 20_000,
    ));
    assert_eq!(c.command(&["SCRIPT", "FLUSH"]).unwrap(), b"+OK\r\n");
    let eval_after = field(&mut c, "used_memory_vm_eval");
    checks.push((
        "SCRIPT FLUSH starts the scripts' VM afresh",
        eval_after < fresh_eval + 2_000,
    ));
    let functions_after = field(&mut c, "used_memory_vm_functions");
    checks.push((
        "SCRIPT FLUSH leaves the functions' VM",
        functions_after + 4_000 > functions,
    ));
    checks.push((
        "the total is the two VMs",
        field(&mut c, "used_memory_vm_total") == eval_after + functions_after,
    ));
    let inside = text(&c.command(&["FCALL", "f0", "0"]).unwrap());
    checks.push(("a function runs", inside.contains(&"x".repeat(200))));
    checks
}

#[test]
fn scripts_and_functions_have_a_lua_vm_each_as_in_redis() {
    let coordis_server = server();
    let ours = vm_memory_session(coordis_server.addr());
    for (what, held) in &ours {
        assert!(held, "coordis: {what}");
    }
    if let Some(redis) = RedisServer::start(&[]).unwrap() {
        for (what, held) in vm_memory_session(redis.addr()) {
            assert!(held, "redis: {what}");
        }
    }
}
