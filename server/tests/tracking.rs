//! Client-side caching (CLIENT TRACKING and its invalidations), sharded
//! pub/sub (SSUBSCRIBE, SPUBLISH, PUBSUB SHARD*) and what a subscriber with
//! its replies off still receives, driven over several
//! connections in RESP2 and RESP3 and compared byte for byte with a real
//! Redis: after every step, everything each connection received.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use coordis::testing::{RawClient, RedisServer};

/// How long a step waits for messages to arrive on every connection.
const SETTLE: Duration = Duration::from_millis(60);

/// Connections opened and closed before a run.
const ID_FLOOR: usize = 40;

struct Conn {
    stream: TcpStream,
    id: String,
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut conn = Conn {
            stream,
            id: String::new(),
        };
        conn.send(&["CLIENT", "ID"]);
        std::thread::sleep(SETTLE);
        let reply = conn.take();
        conn.id = String::from_utf8(reply[1..reply.len() - 2].to_vec()).unwrap();
        conn
    }

    fn send(&mut self, args: &[&str]) {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.stream.write_all(&RawClient::encode(&raw)).unwrap();
    }

    /// Everything that has arrived (waits a little for the first byte).
    fn take(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.stream.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut chunk = [0u8; 65536];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
                Err(e) => panic!("read: {e}"),
            }
        }
        out
    }
}

/// Runs `steps` (connection index, command; `$IDn` is connection n's id)
/// on `conns` fresh connections to `addr`, and returns, for each step,
/// what every connection received, with client ids written as `$IDn`.
/// CLIENT INFO replies are cut to their `flags=`, `ssub=` and `redir=`
/// fields, INFO to its tracking and pub/sub lines.
fn run(addr: SocketAddr, conns: usize, steps: &[(usize, &[&str])]) -> Vec<String> {
    // Ids past any count a reply carries, so that they can be told apart.
    for _ in 0..ID_FLOOR {
        drop(TcpStream::connect(addr).unwrap());
    }
    let mut c: Vec<Conn> = (0..conns).map(|_| Conn::open(addr)).collect();
    let ids: Vec<String> = c.iter().map(|c| c.id.clone()).collect();
    let mut out = Vec::new();
    for (i, (who, args)) in steps.iter().enumerate() {
        let args_shown = args;
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                let mut a = a.to_string();
                for (n, id) in ids.iter().enumerate().rev() {
                    a = a.replace(&format!("$ID{n}"), id);
                }
                a
            })
            .collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        c[*who].send(&refs);
        std::thread::sleep(SETTLE);
        let info = refs.len() == 2 && refs[0].eq_ignore_ascii_case("client") && refs[1].eq_ignore_ascii_case("info");
        for (n, conn) in c.iter_mut().enumerate() {
            let got = conn.take();
            if got.is_empty() {
                continue;
            }
            let mut text = String::from_utf8_lossy(&got).into_owned();
            if info && n == *who {
                text = text
                    .split(' ')
                    .filter(|f| f.starts_with("flags=") || f.starts_with("redir=") || f.starts_with("ssub="))
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            if refs[0].eq_ignore_ascii_case("info") {
                text = text
                    .split("\r\n")
                    .filter(|l| l.starts_with("tracking_") || l.starts_with("pubsub"))
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            // Ids differ between servers: written as `$IDn` where a reply
            // carries one (small counts elsewhere would look like ids).
            let names_ids = info
                || text.contains("tracking-redir-broken")
                || refs.iter().any(|a| {
                    a.eq_ignore_ascii_case("getredir")
                        || a.eq_ignore_ascii_case("trackinginfo")
                        || a.eq_ignore_ascii_case("hello")
                })
                || refs == ["CLIENT", "ID"];
            if names_ids {
                for (m, id) in ids.iter().enumerate() {
                    text = text.replace(&format!(":{id}\r\n"), &format!(":$ID{m}\r\n"));
                    text = text.replace(&format!("redir={id}"), &format!("redir=$ID{m}"));
                }
            }
            out.push(format!("step {i} {:?} -> conn {n}: {text:?}", args_shown.join(" ")));
        }
    }
    out
}

/// Runs the steps on coordis and, when it is installed, on Redis, and
/// compares; returns coordis's transcript for the test's own checks.
fn compare(conns: usize, steps: &[(usize, &[&str])]) -> Vec<String> {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let ours = run(server.addr(), conns, steps);
    match RedisServer::start(&[]).unwrap() {
        Some(redis) => {
            let theirs = run(redis.addr(), conns, steps);
            for (a, b) in ours.iter().zip(&theirs) {
                assert_eq!(a, b);
            }
            assert_eq!(ours.len(), theirs.len(), "ours: {ours:#?}\ntheirs: {theirs:#?}");
        }
        None => eprintln!("SKIPPED the comparison with Redis: redis-server is not installed"),
    }
    ours
}

fn has(transcript: &[String], needle: &str) -> bool {
    transcript.iter().any(|l| l.contains(needle))
}

#[test]
fn resp3_tracking_invalidates_keys_read_as_redis_does() {
    let t = compare(
        2,
        &[
            (0, &["HELLO", "3"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["CLIENT", "GETREDIR"]),
            (0, &["CLIENT", "TRACKING", "ON"]),
            (0, &["CLIENT", "INFO"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["CLIENT", "GETREDIR"]),
            (0, &["SET", "a", "1"]),
            (0, &["GET", "a"]),
            (0, &["MGET", "a", "b", "c"]),
            (0, &["INFO", "stats"]),
            (1, &["SET", "a", "2"]),
            (1, &["DEL", "b", "c"]),
            (1, &["SET", "b", "x"]),
            (0, &["GET", "a"]),
            // The client's own write: the invalidation follows the reply.
            (0, &["SET", "a", "3"]),
            (0, &["HGETALL", "h"]),
            (0, &["EXISTS", "a"]),
            (1, &["HSET", "h", "f", "v"]),
            (1, &["INCR", "a"]),
            // Inside MULTI: after EXEC's reply.
            (0, &["GET", "a"]),
            (0, &["MULTI"]),
            (0, &["INCR", "a"]),
            (0, &["GET", "a"]),
            (0, &["EXEC"]),
            (1, &["SET", "a", "9"]),
            // Expiry is a write.
            (0, &["SET", "e", "1", "PX", "100"]),
            (0, &["GET", "e"]),
            (0, &["DEBUG", "SLEEP", "0.2"]),
            (0, &["GET", "e"]),
            // Flushes send null.
            (0, &["GET", "a"]),
            (1, &["FLUSHALL"]),
            (0, &["FLUSHDB"]),
            (0, &["CLIENT", "TRACKING", "OFF"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["CLIENT", "GETREDIR"]),
            (0, &["GET", "a"]),
            (1, &["SET", "a", "x"]),
        ],
    );
    assert!(has(&t, "invalidate"), "{t:#?}");
}

#[test]
fn noloop_optin_optout_and_caching_follow_redis() {
    let t = compare(
        2,
        &[
            (0, &["HELLO", "3"]),
            (0, &["CLIENT", "CACHING", "YES"]),
            (0, &["CLIENT", "TRACKING", "ON", "NOLOOP"]),
            (0, &["GET", "k"]),
            (0, &["SET", "k", "1"]),
            (0, &["GET", "k"]),
            (1, &["SET", "k", "2"]),
            (0, &["CLIENT", "CACHING", "YES"]),
            (0, &["CLIENT", "CACHING", "NO"]),
            (0, &["CLIENT", "CACHING", "MAYBE"]),
            (0, &["CLIENT", "TRACKING", "ON", "OPTIN"]),
            (0, &["CLIENT", "TRACKING", "OFF"]),
            (0, &["CLIENT", "TRACKING", "ON", "OPTIN"]),
            (0, &["CLIENT", "TRACKING", "ON", "OPTOUT"]),
            (0, &["CLIENT", "CACHING", "NO"]),
            (0, &["GET", "o1"]),
            (0, &["CLIENT", "CACHING", "YES"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["GET", "o2"]),
            (0, &["GET", "o3"]),
            (1, &["MSET", "o1", "1", "o2", "2", "o3", "3"]),
            // The window stays open across CLIENT subcommands and a transaction.
            (0, &["CLIENT", "CACHING", "YES"]),
            (0, &["CLIENT", "ID"]),
            (0, &["GET", "o4"]),
            (0, &["CLIENT", "CACHING", "YES"]),
            (0, &["MULTI"]),
            (0, &["GET", "o5"]),
            (0, &["GET", "o6"]),
            (0, &["EXEC"]),
            (1, &["MSET", "o4", "1", "o5", "2", "o6", "3"]),
            (0, &["CLIENT", "TRACKING", "OFF"]),
            (0, &["CLIENT", "TRACKING", "ON", "OPTOUT"]),
            (0, &["CLIENT", "CACHING", "YES"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["GET", "p1"]),
            (0, &["CLIENT", "CACHING", "NO"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["GET", "p2"]),
            (1, &["MSET", "p1", "1", "p2", "2"]),
            (0, &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"]),
            (0, &["CLIENT", "TRACKING", "ON", "BCAST"]),
            (0, &["CLIENT", "TRACKING", "OFF"]),
            (0, &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"]),
            (0, &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"]),
            (0, &["CLIENT", "TRACKING", "ON", "PREFIX", "a"]),
            (0, &["CLIENT", "TRACKING", "ON", "FOO"]),
            (0, &["CLIENT", "TRACKING", "MAYBE"]),
            (0, &["CLIENT", "TRACKING", "ON", "REDIRECT"]),
            (0, &["CLIENT", "TRACKING", "ON", "REDIRECT", "abc"]),
            (0, &["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"]),
            (0, &["CLIENT", "TRACKING", "ON", "REDIRECT", "$ID1", "REDIRECT", "$ID1"]),
            (0, &["CLIENT", "TRACKING"]),
            (0, &["CLIENT", "CACHING"]),
            (0, &["CLIENT", "GETREDIR", "x"]),
            (0, &["CLIENT", "TRACKINGINFO", "x"]),
            (0, &["INFO", "clients"]),
        ],
    );
    assert!(has(&t, "overlaps") || has(&t, "OPTIN"), "{t:#?}");
}

/// A script's read-only commands make its caller remember the keys the
/// script declared (not those the commands read); a script that only
/// writes remembers nothing; EVAL_RO and FCALL_RO likewise.
#[test]
fn scripts_remember_their_declared_keys_as_redis_does() {
    let t = compare(
        2,
        &[
            (0, &["HELLO", "3"]),
            (0, &["CLIENT", "TRACKING", "ON"]),
            (1, &["MSET", "a", "1", "b", "1", "c", "1"]),
            (0, &["EVAL", "redis.call('set', 'c', 'x')", "2", "a", "b"]),
            (1, &["MSET", "a", "2", "b", "2", "c", "2"]),
            (0, &["EVAL", "redis.call('get', 'c')", "2", "a", "b"]),
            (1, &["MSET", "a", "3", "b", "3", "c", "3"]),
            (0, &["EVAL_RO", "redis.call('ping')", "1", "a"]),
            (1, &["SET", "a", "4"]),
            (0, &["EVAL_RO", "redis.call('get', 'c')", "1", "b"]),
            (1, &["MSET", "b", "4", "c", "4"]),
            // Read, then written by the script itself: the caller hears it.
            (0, &["EVAL", "redis.call('get', KEYS[1]); redis.call('set', KEYS[1], 'y')", "1", "a"]),
            (1, &["SET", "a", "5"]),
            (0, &["CLIENT", "TRACKING", "ON", "NOLOOP"]),
            (0, &["EVAL", "redis.call('get', KEYS[1]); redis.call('set', KEYS[1], 'y')", "1", "b"]),
            (1, &["SET", "b", "5"]),
            (0, &["CLIENT", "TRACKING", "OFF"]),
            (0, &["CLIENT", "TRACKING", "ON", "OPTIN"]),
            (0, &["EVAL", "redis.call('get', 'c')", "1", "c"]),
            (1, &["SET", "c", "5"]),
            (0, &["CLIENT", "CACHING", "YES"]),
            (0, &["EVAL", "redis.call('get', 'c')", "1", "c"]),
            (1, &["SET", "c", "6"]),
            (0, &["FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function{function_name='rd', callback=function(keys) return redis.call('get', 'zz') end, flags={'no-writes'}}"]),
            (0, &["CLIENT", "TRACKING", "OFF"]),
            (0, &["CLIENT", "TRACKING", "ON"]),
            (0, &["FCALL_RO", "rd", "1", "f1"]),
            (0, &["FCALL", "rd", "1", "f2"]),
            (1, &["MSET", "f1", "1", "f2", "1", "zz", "1"]),
            (0, &["MULTI"]),
            (0, &["EVAL", "redis.call('get', 'zz')", "1", "m1"]),
            (0, &["EXEC"]),
            (1, &["SET", "m1", "1"]),
        ],
    );
    assert!(has(&t, "invalidate"), "{t:#?}");
}

/// Subscribe confirmations and messages are not replies: CLIENT REPLY OFF
/// and SKIP do not silence them, in RESP2 as in RESP3 (Redis 7.0).
#[test]
fn a_subscriber_with_replies_off_still_gets_its_messages() {
    let t = compare(
        3,
        &[
            (0, &["CLIENT", "REPLY", "OFF"]),
            (0, &["SUBSCRIBE", "ch1", "ch2"]),
            (0, &["PSUBSCRIBE", "ch*"]),
            (2, &["PUBLISH", "ch1", "m1"]),
            (0, &["PING"]),
            // (A bare UNSUBSCRIBE goes in hash order: one channel at a time.)
            (0, &["UNSUBSCRIBE", "ch1", "ch2"]),
            (0, &["PUNSUBSCRIBE"]),
            (0, &["SSUBSCRIBE", "sh"]),
            (2, &["SPUBLISH", "sh", "m2"]),
            (0, &["SUNSUBSCRIBE"]),
            (0, &["CLIENT", "REPLY", "ON"]),
            (0, &["CLIENT", "REPLY", "SKIP"]),
            (0, &["SUBSCRIBE", "ch3"]),
            (2, &["PUBLISH", "ch3", "m3"]),
            (0, &["UNSUBSCRIBE", "ch3"]),
            (1, &["HELLO", "3"]),
            (1, &["CLIENT", "REPLY", "OFF"]),
            (1, &["SUBSCRIBE", "ch1"]),
            (1, &["GET", "k"]),
            (2, &["PUBLISH", "ch1", "m4"]),
            (1, &["UNSUBSCRIBE"]),
            (1, &["CLIENT", "REPLY", "ON"]),
            (1, &["PING"]),
        ],
    );
    assert!(has(&t, "m1") && has(&t, "m4"), "{t:#?}");
}

#[test]
fn bcast_prefixes_and_noloop_follow_redis() {
    compare(
        3,
        &[
            (0, &["HELLO", "3"]),
            (
                0,
                &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "us"],
            ),
            (
                0,
                &[
                    "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "item:",
                ],
            ),
            (0, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "use"]),
            (0, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "order:"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["CLIENT", "INFO"]),
            (0, &["CLIENT", "TRACKING", "ON"]),
            (1, &["HELLO", "3"]),
            (1, &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"]),
            (2, &["MSET", "user:2", "a", "user:1", "b", "other", "c"]),
            (2, &["SET", "item:1", "x"]),
            (1, &["SET", "mine", "1"]),
            (1, &["MSET", "mine", "2", "user:9", "z"]),
            (0, &["GET", "user:1"]),
            (0, &["INFO", "stats"]),
            (2, &["DEL", "order:1", "user:1"]),
            (2, &["FLUSHALL"]),
            (0, &["CLIENT", "TRACKING", "OFF"]),
            (0, &["INFO", "stats"]),
            (2, &["SET", "user:1", "again"]),
        ],
    );
}

#[test]
fn resp2_redirect_to_a_subscriber_and_a_broken_redirect_follow_redis() {
    let t = compare(
        4,
        &[
            (1, &["SUBSCRIBE", "__redis__:invalidate"]),
            (0, &["CLIENT", "TRACKING", "ON", "REDIRECT", "$ID1"]),
            (0, &["CLIENT", "GETREDIR"]),
            (0, &["CLIENT", "INFO"]),
            (0, &["GET", "a"]),
            (0, &["SET", "a", "1"]),
            (0, &["GET", "a"]),
            (2, &["SET", "a", "2"]),
            (0, &["GET", "a"]),
            (2, &["FLUSHDB"]),
            // RESP2 without a redirect: nothing can be said.
            (2, &["CLIENT", "TRACKING", "ON"]),
            (2, &["GET", "a"]),
            (0, &["SET", "a", "3"]),
            // A RESP3 client redirecting to one that goes away.
            (3, &["HELLO", "3"]),
            (3, &["CLIENT", "TRACKING", "ON", "REDIRECT", "$ID2"]),
            (3, &["GET", "z"]),
            (2, &["QUIT"]),
            (0, &["SET", "z", "1"]),
            (3, &["CLIENT", "TRACKINGINFO"]),
            (3, &["CLIENT", "INFO"]),
            (3, &["GET", "z"]),
            (0, &["SET", "z", "2"]),
            (3, &["CLIENT", "TRACKING", "ON", "REDIRECT", "$ID1"]),
            (3, &["CLIENT", "TRACKINGINFO"]),
            (3, &["GET", "z"]),
            (0, &["SET", "z", "3"]),
        ],
    );
    assert!(has(&t, "__redis__:invalidate"), "{t:#?}");
    assert!(has(&t, "tracking-redir-broken"), "{t:#?}");
}

/// Key names (`k1`, `x100`, `s2`, `t3`...) in pushes as `$_ key`: the
/// table's limit invalidates keys at random (Redis walks its radix tree at
/// random), so only how many and where they come are compared.
fn without_key_digits(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\r\n") {
        out.push_str(&rest[..at + 2]);
        rest = &rest[at + 2..];
        let mut chars = rest.char_indices();
        if let Some((_, 'k' | 'x' | 's' | 't')) = chars.next() {
            let digits = rest[1..].bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && rest[1 + digits..].starts_with("\r\n") {
                out.push_str(&rest[..1]);
                out.push('#');
                rest = &rest[1 + digits..];
            }
        }
    }
    out.push_str(rest);
    for named in ["$2\r\nk#", "$4\r\nx#", "$2\r\ns#", "$2\r\nt#"] {
        out = out.replace(named, "$_\r\nkey");
    }
    out
}

/// INFO's replies in `text` cut to their tracking and Pub/Sub lines
/// (`INFO[...]`, the length and the RESP3 verbatim header dropped).
fn cut_info(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("# Stats\r\n") {
        let head = rest[..at]
            .strip_suffix("txt:")
            .map_or(&rest[..at], |h| h)
            .trim_end_matches("\r\n");
        let start = head.rfind(['$', '=']).unwrap_or(0);
        out.push_str(&rest[..start]);
        let body_end = rest[at..].find("\r\n\r\n").map_or(rest.len(), |e| at + e + 4);
        let lines: Vec<&str> = rest[at..body_end]
            .split("\r\n")
            .filter(|l| l.starts_with("tracking_") || l.starts_with("pubsub"))
            .collect();
        out.push_str(&format!("INFO[{}]", lines.join(" ")));
        rest = &rest[body_end..];
    }
    out.push_str(rest);
    out
}

/// Runs of one invalidation (RESP3 or RESP2, keys written as `key`)
/// written as `[Nx...]`.
fn collapse_pushes(text: &str) -> String {
    let mut out = text.to_string();
    for push in [
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$_\r\nkey\r\n",
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$_\r\nkey\r\n",
    ] {
        for n in (2..=400).rev() {
            let run = push.repeat(n);
            if out.contains(&run) {
                out = out.replace(&run, &format!("[{n}x{push}]"));
            }
        }
    }
    out
}

/// `tracking-table-max-keys` on one server: what each connection receives,
/// keys written as `k#` and INFO cut to its tracking lines. Requests sent
/// in one write run together (no periodic tick between them); a pause of
/// 400 ms lets the server's periodic tick (10 a second) do its part.
fn table_limit_transcript(addr: SocketAddr) -> Vec<String> {
    let mut c: Vec<Conn> = (0..3).map(|_| Conn::open(addr)).collect();
    let mut out = Vec::new();
    let ids: Vec<String> = c.iter().map(|c| c.id.clone()).collect();
    let mut step = |c: &mut Vec<Conn>, who: usize, cmds: &[&[&str]], pause: Duration| {
        let mut raw = Vec::new();
        for args in cmds {
            let bytes: Vec<&[u8]> = args
                .iter()
                .map(|a| if *a == "$ID1" { ids[1].as_bytes() } else { a.as_bytes() })
                .collect();
            raw.extend(RawClient::encode(&bytes));
        }
        c[who].stream.write_all(&raw).unwrap();
        std::thread::sleep(pause);
        for (n, conn) in c.iter_mut().enumerate() {
            let got = conn.take();
            if got.is_empty() {
                continue;
            }
            let text = without_key_digits(&String::from_utf8_lossy(&got));
            let text = name_ids(collapse_pushes(&cut_info(&text)), &ids, false);
            let shown: Vec<&str> = cmds[0].iter().take(4).copied().collect();
            out.push(format!("{:?} -> conn {n}: {text:?}", shown.join(" ")));
        }
    };
    let short = SETTLE;
    let tick = Duration::from_millis(400);
    let info: &[&str] = &["INFO", "stats"];
    step(&mut c, 0, &[&["HELLO", "3"]], short);
    step(&mut c, 0, &[&["CONFIG", "GET", "tracking-table-max-keys"]], short);
    step(&mut c, 0, &[&["CONFIG", "SET", "tracking-table-max-keys", "-1"]], short);
    step(&mut c, 0, &[&["CONFIG", "SET", "tracking-table-max-keys", "1"]], short);
    step(&mut c, 0, &[&["CLIENT", "TRACKING", "ON"]], short);
    // Over the limit after MGET: the next command's admission invalidates,
    // ahead of its reply.
    step(&mut c, 0, &[&["MGET", "k1", "k2", "k3"], &["PING"], info], short);
    // Far over: each try gives up after 100 keys more than the last.
    step(&mut c, 0, &[&["CONFIG", "SET", "tracking-table-max-keys", "10"]], short);
    let many: Vec<String> = (100..400).map(|i| format!("x{i}")).collect();
    let mut mget: Vec<&str> = vec!["MGET"];
    mget.extend(many.iter().map(String::as_str));
    step(&mut c, 0, &[&mget, info, info, info, info], short);
    // Idle: the periodic tick brings a table over a lowered limit down.
    step(&mut c, 0, &[&["CONFIG", "SET", "tracking-table-max-keys", "3"]], tick);
    step(&mut c, 0, &[info], short);
    // RESP2 through a redirect, two clients tracking the same keys: an
    // invalidated key reaches both.
    step(&mut c, 1, &[&["SUBSCRIBE", "__redis__:invalidate"]], short);
    step(&mut c, 0, &[&["FLUSHALL"]], short);
    step(&mut c, 0, &[&["CONFIG", "SET", "tracking-table-max-keys", "0"]], short);
    step(&mut c, 2, &[&["CLIENT", "TRACKING", "ON", "REDIRECT", "$ID1"]], short);
    step(&mut c, 2, &[&["MGET", "s1", "s2", "s3"]], short);
    step(&mut c, 0, &[&["MGET", "s1", "s2", "s3"], info], short);
    step(&mut c, 0, &[&["CONFIG", "SET", "tracking-table-max-keys", "1"]], tick);
    step(&mut c, 0, &[info], short);
    // With no client tracking, nothing is invalidated: the keys stay
    // until a client tracks again.
    step(&mut c, 0, &[&["CONFIG", "SET", "tracking-table-max-keys", "0"]], short);
    step(&mut c, 0, &[&["FLUSHALL"]], short);
    step(&mut c, 2, &[&["MGET", "t1", "t2", "t3", "t4"]], short);
    step(&mut c, 0, &[&["CLIENT", "TRACKING", "OFF"]], short);
    step(&mut c, 2, &[&["CLIENT", "TRACKING", "OFF"]], short);
    step(&mut c, 0, &[&["CONFIG", "SET", "tracking-table-max-keys", "2"]], tick);
    step(&mut c, 0, &[info], short);
    step(&mut c, 2, &[&["CLIENT", "TRACKING", "ON", "REDIRECT", "$ID1"]], tick);
    step(&mut c, 0, &[info], short);
    // A NOLOOP client's own keys invalidated by its own command's
    // admission are not told to it (Redis spares the running client).
    step(&mut c, 0, &[&["CONFIG", "SET", "tracking-table-max-keys", "0"]], short);
    step(&mut c, 0, &[&["FLUSHALL"]], short);
    step(&mut c, 0, &[&["CLIENT", "TRACKING", "ON", "NOLOOP"]], short);
    step(&mut c, 2, &[&["CLIENT", "TRACKING", "OFF"]], short);
    step(
        &mut c,
        0,
        &[
            &["CONFIG", "SET", "tracking-table-max-keys", "1"],
            &["MGET", "k1", "k2"],
            &["PING"],
            info,
        ],
        short,
    );
    step(
        &mut c,
        0,
        &[&["CONFIG", "SET", "tracking-table-max-keys", "1000000"]],
        short,
    );
    out
}

#[test]
fn tracking_table_max_keys_invalidates_as_redis_does() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let ours = table_limit_transcript(server.addr());
    // 301 keys over a limit of 10: 100 invalidated, then 200 and stop at 10.
    for needle in ["tracking_total_keys:201", "[100x>2", "tracking_total_keys:10 ", "[2x*3"] {
        assert!(ours.iter().any(|l| l.contains(needle)), "{needle}: {ours:#?}");
    }
    match RedisServer::start(&[]).unwrap() {
        Some(redis) => {
            let theirs = table_limit_transcript(redis.addr());
            for (a, b) in ours.iter().zip(&theirs) {
                if a != b {
                    // Long lines: from a little before where they part.
                    let at = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
                    let from = a[..at].char_indices().rev().nth(200).map_or(0, |(i, _)| i);
                    panic!("coordis: ...{}\nRedis:   ...{}", &a[from..], &b[from..]);
                }
            }
            assert_eq!(ours.len(), theirs.len(), "ours: {ours:#?}\ntheirs: {theirs:#?}");
        }
        None => eprintln!("SKIPPED the comparison with Redis: redis-server is not installed"),
    }
}

#[test]
fn sharded_pubsub_follows_redis() {
    let t = compare(
        3,
        &[
            (0, &["SSUBSCRIBE", "orders", "users"]),
            (0, &["SSUBSCRIBE", "orders"]),
            (0, &["SUBSCRIBE", "plain"]),
            (0, &["GET", "k"]),
            (0, &["PING"]),
            (0, &["CLIENT", "INFO"]),
            (1, &["HELLO", "3"]),
            (1, &["SSUBSCRIBE", "orders"]),
            (1, &["PSUBSCRIBE", "ord*"]),
            (2, &["SPUBLISH", "orders", "o-1"]),
            (2, &["PUBLISH", "orders", "not-sharded"]),
            (2, &["SPUBLISH", "plain", "not-plain"]),
            // (The full list comes in hash order, which differs.)
            (2, &["PUBSUB", "SHARDCHANNELS", "us*"]),
            (2, &["PUBSUB", "SHARDCHANNELS", "ord*"]),
            (2, &["PUBSUB", "SHARDCHANNELS", "a", "b"]),
            (2, &["PUBSUB", "SHARDNUMSUB", "orders", "users", "none"]),
            (2, &["PUBSUB", "SHARDNUMSUB"]),
            (2, &["PUBSUB", "CHANNELS"]),
            (2, &["PUBSUB", "NUMSUB", "orders"]),
            (2, &["INFO", "stats"]),
            (2, &["MULTI"]),
            (2, &["SSUBSCRIBE", "x"]),
            (2, &["EXEC"]),
            (
                2,
                &[
                    "EVAL",
                    "return redis.call('spublish', KEYS[1], ARGV[1])",
                    "1",
                    "orders",
                    "from-lua",
                ],
            ),
            (2, &["COMMAND", "GETKEYS", "SSUBSCRIBE", "a", "b"]),
            (2, &["COMMAND", "GETKEYSANDFLAGS", "SPUBLISH", "a", "m"]),
            (2, &["COMMAND", "INFO", "spublish", "ssubscribe", "sunsubscribe"]),
            (0, &["SUNSUBSCRIBE", "orders", "nope"]),
            (0, &["UNSUBSCRIBE"]),
            (0, &["SUNSUBSCRIBE"]),
            (0, &["SUNSUBSCRIBE"]),
            (0, &["GET", "k"]),
            (1, &["SUNSUBSCRIBE"]),
            (1, &["RESET"]),
            (2, &["PUBSUB", "SHARDNUMSUB", "orders", "users"]),
            (2, &["SPUBLISH", "orders", "nobody"]),
        ],
    );
    assert!(has(&t, "smessage"), "{t:#?}");
}

/// SPUBLISH is forced to replicas (outside a cluster) as PUBLISH is:
/// the feed carries what a real Redis sends its replicas.
#[test]
fn spublish_reaches_replicas_as_redis_sends_it() {
    use coordis::testing::{parse_commands, show_command, ReplicationCapture};
    let workload: &[&[&str]] = &[&["SPUBLISH", "ch", "m"], &["SET", "a", "1"], &["SPUBLISH", "ch2", "n"]];
    let run_all = |addr| {
        let mut c = RawClient::connect(addr).unwrap();
        for args in workload {
            c.command(args).unwrap();
        }
    };
    let show = |cmds: &[Vec<Vec<u8>>]| cmds.iter().map(|c| show_command(c)).collect::<Vec<_>>();
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut feed = server.control().effects();
    run_all(server.addr());
    let ours = show(&parse_commands(&feed.try_bytes()));
    assert_eq!(ours, ["SELECT 0", "SPUBLISH ch m", "SET a 1", "SPUBLISH ch2 n"]);
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        eprintln!("SKIPPED the comparison with Redis: redis-server is not installed");
        return;
    };
    let mut capture = ReplicationCapture::start(redis.addr()).unwrap();
    run_all(redis.addr());
    let theirs = show(&capture.take().unwrap());
    assert_eq!(ours, theirs, "coordis's feed (left) and Redis's stream (right)");
}

/// A key evicted before a command runs (admission's eviction, Redis's
/// `performEvictions`) is invalidated ahead of that command's reply, as
/// Redis sends it: the limit is set 100 KiB over each server's own use,
/// then a 200 KB string pushes the next command over it.
#[test]
fn an_eviction_before_a_command_is_invalidated_ahead_of_its_reply() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let redis = RedisServer::start(&[]).unwrap();
    if redis.is_none() {
        eprintln!("SKIPPED the comparison with Redis: redis-server is not installed");
    }
    let addrs = std::iter::once(server.addr()).chain(redis.as_ref().map(|r| r.addr()));
    for addr in addrs {
        let mut c = RawClient::connect(addr).unwrap();
        assert!(c.command(&["HELLO", "3"]).unwrap().starts_with(b"%"));
        assert_eq!(c.command(&["CLIENT", "TRACKING", "ON"]).unwrap(), b"+OK\r\n");
        let used: u64 = c.info_field("memory", "used_memory").parse().unwrap();
        let limit = (used + 100 * 1024).to_string();
        assert_eq!(c.command(&["CONFIG", "SET", "maxmemory", &limit]).unwrap(), b"+OK\r\n");
        let policy = ["CONFIG", "SET", "maxmemory-policy", "volatile-random"];
        assert_eq!(c.command(&policy).unwrap(), b"+OK\r\n");
        assert_eq!(c.command(&["SETEX", "volatile-key", "10000", "x"]).unwrap(), b"+OK\r\n");
        assert_eq!(c.command(&["GET", "volatile-key"]).unwrap(), b"$1\r\nx\r\n");
        assert_eq!(c.command(&["SETBIT", "big-key", "1600000", "0"]).unwrap(), b":0\r\n");
        let first = c.command(&["GETBIT", "big-key", "0"]).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&first),
            ">2\r\n$10\r\ninvalidate\r\n*1\r\n$12\r\nvolatile-key\r\n",
            "{addr}: the invalidation first"
        );
        assert_eq!(c.read_reply().unwrap(), b":0\r\n", "{addr}: then the reply");
    }
}

/// What the random generator remembers of a connection: its Pub/Sub
/// channels (a bare UNSUBSCRIBE of several goes in each server's hash
/// order, so it is only sent for one channel at most).
#[derive(Default, Clone)]
struct Subscriptions {
    channels: std::collections::BTreeSet<String>,
    shard: std::collections::BTreeSet<String>,
}

/// The connection other trackers REDIRECT to in the random sequences.
const LISTENER: usize = 1;

/// One random unit: a connection and the commands it sends in one write.
type Unit = (usize, Vec<Vec<String>>);

/// A seeded sequence of units over `conns` connections: CLIENT TRACKING
/// with every option (valid and refused combinations), CLIENT CACHING
/// followed by a read, reads and writes of a few keys of several types
/// (under the BCAST prefixes `a` and `b`), HELLO 2 and 3, RESET, QUIT,
/// MULTI/EXEC, the invalidation channel and sharded Pub/Sub. `$IDn` is
/// connection n's id (its latest connection's, after a QUIT).
fn random_tracking_units(seed: u64, conns: usize, n: usize) -> Vec<Unit> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x7acc);
    let mut subs = vec![Subscriptions::default(); conns];
    let keys = ["a1", "a2", "b1", "b2", "c", "h", "l"];
    let shard = ["s1", "s2", "s3"];
    let channels = ["__redis__:invalidate", "news"];
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    // A start where messages flow: a RESP3 tracker, a RESP2 subscriber to
    // the invalidation channel with a RESP2 tracker redirecting to it, and
    // a RESP3 BCAST tracker; the random units then change all of it.
    let mut out: Vec<Unit> = vec![
        (0, vec![words(&["HELLO", "3"]), words(&["CLIENT", "TRACKING", "ON"])]),
        (LISTENER % conns, vec![words(&["SUBSCRIBE", "__redis__:invalidate"])]),
        (
            2 % conns,
            vec![words(&["CLIENT", "TRACKING", "ON", "REDIRECT", "$ID1"])],
        ),
        (
            3 % conns,
            vec![
                words(&["HELLO", "3"]),
                words(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a"]),
            ],
        ),
    ];
    subs[LISTENER % conns].channels.insert("__redis__:invalidate".into());
    for _ in 0..n {
        let who = rng.usize(..conns);
        let key = |rng: &mut fastrand::Rng| keys[rng.usize(..keys.len())].to_string();
        let read = |rng: &mut fastrand::Rng| -> Vec<String> {
            match rng.u32(0..6) {
                0 | 1 => vec!["GET".into(), key(rng)],
                2 => vec!["MGET".into(), key(rng), key(rng)],
                3 => vec!["EXISTS".into(), key(rng)],
                4 => vec!["HGET".into(), "h".into(), "f".into()],
                _ => vec!["LRANGE".into(), "l".into(), "0".into(), "-1".into()],
            }
        };
        let write = |rng: &mut fastrand::Rng| -> Vec<String> {
            match rng.u32(0..9) {
                0 | 1 => vec!["SET".into(), key(rng), format!("v{}", rng.u32(0..9))],
                2 => vec!["DEL".into(), key(rng), key(rng)],
                3 => vec!["MSET".into(), key(rng), "m".into(), key(rng), "n".into()],
                4 => vec!["APPEND".into(), key(rng), "x".into()],
                5 => vec!["HSET".into(), "h".into(), "f".into(), rng.u32(0..9).to_string()],
                6 => vec!["RPUSH".into(), "l".into(), "e".into()],
                7 => vec!["RENAME".into(), key(rng), key(rng)],
                _ => {
                    if rng.u32(0..4) == 0 {
                        vec!["FLUSHDB".into()]
                    } else {
                        vec!["SELECT".into(), rng.u32(0..2).to_string()]
                    }
                }
            }
        };
        let mut unit: Vec<Vec<String>> = Vec::new();
        // The listener (a REDIRECT target) only reads and listens.
        let pick = match rng.u32(0..100) {
            20..=39 | 90..=93 if who == LISTENER % conns => rng.u32(0..20),
            pick => pick,
        };
        match pick {
            0..=19 => unit.push(read(&mut rng)),
            20..=39 => {
                // Now and then several writes: BCAST sends a batch's keys together.
                for _ in 0..(if rng.u32(0..4) == 0 { 3 } else { 1 }) {
                    unit.push(write(&mut rng));
                }
            }
            40..=49 => {
                let mut c = words(&["CLIENT", "TRACKING"]);
                if rng.u32(0..4) == 0 {
                    c.push("OFF".into());
                } else {
                    c.push("ON".into());
                    if rng.u32(0..3) == 0 {
                        // To the listener, to itself, or to no one: never to
                        // a connection that writes, where Redis sends the
                        // message at the moment each command signals its
                        // key, before or after its reply as the command's
                        // code has it.
                        c.push("REDIRECT".into());
                        c.push(match rng.u32(0..8) {
                            0 => "999999".into(),
                            1..=3 => format!("$ID{who}"),
                            _ => format!("$ID{}", LISTENER % conns),
                        });
                    }
                    let bcast = rng.u32(0..3) == 0;
                    if bcast {
                        c.push("BCAST".into());
                        for _ in 0..rng.usize(0..3) {
                            c.push("PREFIX".into());
                            c.push(["a", "b", "a1", "c"][rng.usize(..4)].into());
                        }
                    }
                    // Now and then a refused combination.
                    if rng.u32(0..(if bcast { 12 } else { 3 })) == 0 {
                        c.push(["OPTIN", "OPTOUT"][rng.usize(..2)].into());
                    }
                    if rng.u32(0..3) == 0 {
                        c.push("NOLOOP".into());
                    }
                }
                unit.push(c);
            }
            50..=56 => {
                unit.push(words(&["CLIENT", "CACHING", ["YES", "NO"][rng.usize(..2)]]));
                if rng.u32(0..4) == 0 {
                    unit.push(words(&["CLIENT", "TRACKINGINFO"]));
                }
                unit.push(read(&mut rng));
            }
            57..=59 => unit.push(words(&["CLIENT", ["TRACKINGINFO", "GETREDIR"][rng.usize(..2)]])),
            60..=62 => unit.push(words(&["HELLO", ["2", "3"][rng.usize(..2)]])),
            63..=66 => {
                let s = &mut subs[who];
                let ch = channels[rng.usize(..2)];
                // A RESP2 subscriber can do little else: mostly leave again.
                if s.channels.is_empty() || rng.u32(0..4) == 0 {
                    unit.push(words(&["SUBSCRIBE", ch]));
                    s.channels.insert(ch.into());
                } else if s.channels.len() <= 1 && rng.bool() {
                    unit.push(words(&["UNSUBSCRIBE"]));
                    s.channels.clear();
                } else {
                    unit.push(words(&["UNSUBSCRIBE", ch]));
                    s.channels.remove(ch);
                }
            }
            67..=71 if subs[who].shard.is_empty() || rng.bool() => {
                let s = &mut subs[who];
                let mut c = words(&["SSUBSCRIBE"]);
                for _ in 0..rng.usize(1..3) {
                    let ch = shard[rng.usize(..3)];
                    c.push(ch.into());
                    s.shard.insert(ch.into());
                }
                unit.push(c);
            }
            67..=75 => {
                let s = &mut subs[who];
                if s.shard.len() <= 1 && rng.bool() {
                    unit.push(words(&["SUNSUBSCRIBE"]));
                    s.shard.clear();
                } else {
                    let ch = shard[rng.usize(..3)];
                    unit.push(words(&["SUNSUBSCRIBE", ch]));
                    s.shard.remove(ch);
                }
            }
            76..=83 => unit.push(words(&[
                "SPUBLISH",
                shard[rng.usize(..3)],
                &format!("m{}", rng.u32(0..99)),
            ])),
            84..=85 => unit.push(words(&["PUBLISH", channels[rng.usize(..2)], "p"])),
            86..=89 => unit.push(match rng.u32(0..3) {
                // Patterns that match one channel at most (a list of
                // several comes in each server's hash order).
                0 => words(&["PUBSUB", "SHARDCHANNELS", ["s1", "s2*", "x*", "s[3]"][rng.usize(..4)]]),
                1 => words(&[
                    "PUBSUB",
                    "SHARDNUMSUB",
                    shard[rng.usize(..3)],
                    shard[rng.usize(..3)],
                    "none",
                ]),
                _ => words(&["PUBSUB", "NUMSUB", channels[rng.usize(..2)]]),
            }),
            90..=93 => {
                unit.push(words(&["MULTI"]));
                for _ in 0..rng.usize(1..4) {
                    unit.push(if rng.bool() { read(&mut rng) } else { write(&mut rng) });
                }
                unit.push(words(&["EXEC"]));
            }
            94 => {
                unit.push(words(&["RESET"]));
                subs[who] = Subscriptions::default();
            }
            95 => {
                unit.push(words(&["QUIT"]));
                subs[who] = Subscriptions::default();
            }
            _ => unit.push(words(&["INFO", "stats"])),
        }
        out.push((who, unit));
    }
    out
}

/// A connection's text with its server's client ids written as `$IDn`
/// where a reply carries one: HELLO's `id`, TRACKINGINFO's `redirect`,
/// a broken redirect's push, and CLIENT GETREDIR's whole reply.
fn name_ids(mut text: String, ids: &[String], getredir: bool) -> String {
    for (m, id) in ids.iter().enumerate() {
        for field in ["$2\r\nid\r\n", "$8\r\nredirect\r\n", "tracking-redir-broken\r\n"] {
            text = text.replace(&format!("{field}:{id}\r\n"), &format!("{field}:$ID{m}\r\n"));
        }
        if getredir && text.starts_with(&format!(":{id}\r\n")) {
            text = text.replacen(&format!(":{id}\r\n"), &format!(":$ID{m}\r\n"), 1);
        }
    }
    text
}

/// Runs `units` on `conns` connections to `addr` and returns, for each
/// unit, what every connection received. After a unit, each connection
/// sends `PING <marker>` and is read up to the marker's echo, so whatever
/// the unit sent it (replies, invalidations, messages, broadcasts) has
/// arrived before; PING closes a CLIENT CACHING window as any command,
/// which is why CACHING and its read are sent in one unit. Client ids are
/// written as `$IDn` in replies that carry them, INFO is cut to its
/// tracking and Pub/Sub lines.
fn run_units(addr: SocketAddr, conns: usize, units: &[Unit]) -> Vec<String> {
    for _ in 0..ID_FLOOR {
        drop(TcpStream::connect(addr).unwrap());
    }
    let mut c: Vec<Conn> = (0..conns).map(|_| Conn::open(addr)).collect();
    // Every id a slot had (index: slot + conns * reopenings), for naming.
    let mut ids: Vec<String> = c.iter().map(|c| c.id.clone()).collect();
    let mut out = Vec::new();
    for (step, (who, cmds)) in units.iter().enumerate() {
        let current: Vec<String> = c.iter().map(|c| c.id.clone()).collect();
        let mut raw = Vec::new();
        for args in cmds {
            let args: Vec<String> = args
                .iter()
                .map(|a| match a.strip_prefix("$ID") {
                    Some(n) => current[n.parse::<usize>().unwrap()].clone(),
                    None => a.clone(),
                })
                .collect();
            let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            raw.extend(RawClient::encode(&bytes));
        }
        let quit = cmds.last().is_some_and(|c| c[0] == "QUIT");
        // Two markers: the unit's own (its replies have arrived), then one
        // on every connection (what the unit's batch sent others, and the
        // BCAST broadcasts sent when a batch ends, have arrived).
        let (first, second) = (format!("sync-a-{step}"), format!("sync-b-{step}"));
        if !quit {
            raw.extend(RawClient::encode(&[b"PING", first.as_bytes()]));
        }
        c[*who].stream.write_all(&raw).unwrap();
        let mut got: Vec<Vec<u8>> = vec![Vec::new(); conns];
        got[*who] = if quit {
            read_to_end(&mut c[*who])
        } else {
            read_to(&mut c[*who], &first)
        };
        if quit {
            c[*who] = Conn::open(addr);
            ids.push(c[*who].id.clone());
        }
        for conn in c.iter_mut() {
            conn.send(&["PING", &second]);
        }
        for (n, conn) in c.iter_mut().enumerate() {
            got[n].extend(read_to(conn, &second));
        }
        let shown: Vec<String> = cmds.iter().map(|c| c.join(" ")).collect();
        for (n, bytes) in got.iter().enumerate() {
            let mut text = String::from_utf8_lossy(bytes).into_owned();
            // The markers' echoes, in either shape, are not compared.
            for marker in [&first, &second] {
                let echo = format!("${}\r\n{marker}\r\n", marker.len());
                text = text.replace(&format!("*2\r\n$4\r\npong\r\n{echo}"), "");
                text = text.replace(&echo, "");
            }
            if shown.iter().any(|c| c.starts_with("INFO")) {
                text = cut_info(&text);
            }
            let getredir = n == *who && shown.iter().any(|c| c.contains("GETREDIR"));
            text = name_ids(text, &ids, getredir);
            if !text.is_empty() {
                out.push(format!("unit {step} {shown:?} on conn {who} -> conn {n}: {text:?}"));
            }
        }
    }
    out
}

/// Reads `conn` until `marker` followed by CRLF has arrived (and what
/// came with it).
fn read_to(conn: &mut Conn, marker: &str) -> Vec<u8> {
    let needle = format!("{marker}\r\n");
    let mut out = Vec::new();
    conn.stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut chunk = [0u8; 65536];
    while !out.windows(needle.len()).any(|w| w == needle.as_bytes()) {
        match conn.stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("waiting for {marker}: {e}; got {:?}", String::from_utf8_lossy(&out)),
        }
    }
    out
}

/// Reads `conn` until the server closes it (QUIT).
fn read_to_end(conn: &mut Conn) -> Vec<u8> {
    let mut out = Vec::new();
    conn.stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = conn.stream.read_to_end(&mut out);
    out
}

/// Random multi-connection sequences of client-side caching and sharded
/// Pub/Sub, the same on coordis and Redis, compared connection by
/// connection and unit by unit. Seeds 1..=6 by default;
/// `COORDIS_TRACKING_SEED=n` replays seed n alone (the failure names it).
#[test]
fn random_tracking_and_sharded_pubsub_match_redis() {
    const CONNS: usize = 4;
    let seeds: Vec<u64> = match std::env::var("COORDIS_TRACKING_SEED") {
        Ok(s) => vec![s.parse().expect("COORDIS_TRACKING_SEED is a number")],
        Err(_) => (1..=6).collect(),
    };
    let server = coordis::Server::builder().start_blocking().unwrap();
    let redis = RedisServer::start(&[]).unwrap();
    if redis.is_none() {
        eprintln!("SKIPPED the comparison with Redis: redis-server is not installed");
    }
    let mut seen = String::new();
    for seed in seeds {
        let units = random_tracking_units(seed, CONNS, 250);
        // A fresh keyspace and no leftover state per seed.
        for addr in std::iter::once(server.addr()).chain(redis.as_ref().map(|r| r.addr())) {
            RawClient::connect(addr).unwrap().command(&["FLUSHALL"]).unwrap();
        }
        let ours = run_units(server.addr(), CONNS, &units);
        seen.extend(ours.iter().map(String::as_str));
        if std::env::var("COORDIS_TRACKING_SHOW").is_ok() {
            eprintln!("{ours:#?}");
        }
        let Some(redis) = redis.as_ref() else { continue };
        let theirs = run_units(redis.addr(), CONNS, &units);
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(
                a, b,
                "seed {seed} (COORDIS_TRACKING_SEED={seed} replays it): coordis (left), Redis (right)"
            );
        }
        assert_eq!(
            ours.len(),
            theirs.len(),
            "seed {seed}: ours: {ours:#?}\ntheirs: {theirs:#?}"
        );
    }
    // The generator reaches what it is for.
    for needle in [
        ">2\\r\\n$10\\r\\ninvalidate\\r\\n*1",
        ">2\\r\\n$10\\r\\ninvalidate\\r\\n*2",
        "$20\\r\\n__redis__:invalidate\\r\\n*1",
        "tracking-redir-broken",
        "smessage",
        "caching-yes",
    ] {
        eprintln!("{needle}: {}", seen.matches(needle).count());
    }
}
