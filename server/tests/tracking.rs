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

#[test]
fn tracking_table_max_keys_invalidates_the_keys_over_the_limit() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    c.command(&["HELLO", "3"]).unwrap();
    assert_eq!(
        c.command(&["CONFIG", "GET", "tracking-table-max-keys"]).unwrap(),
        b"%1\r\n$23\r\ntracking-table-max-keys\r\n$7\r\n1000000\r\n"
    );
    assert!(c
        .command(&["CONFIG", "SET", "tracking-table-max-keys", "-1"])
        .unwrap()
        .starts_with(b"-ERR CONFIG SET failed"));
    assert_eq!(
        c.command(&["CONFIG", "SET", "tracking-table-max-keys", "2"]).unwrap(),
        b"+OK\r\n"
    );
    c.command(&["CLIENT", "TRACKING", "ON"]).unwrap();
    assert_eq!(
        c.command(&["MGET", "k1", "k2", "k3", "k4"]).unwrap(),
        b"*4\r\n_\r\n_\r\n_\r\n_\r\n"
    );
    // Two of the four are invalidated (at random) right after the reply.
    let mut evicted = Vec::new();
    for _ in 0..2 {
        let push = c.read_reply().unwrap();
        assert!(
            push.starts_with(b">2\r\n$10\r\ninvalidate\r\n*1\r\n"),
            "{:?}",
            String::from_utf8_lossy(&push)
        );
        evicted.push(push);
    }
    evicted.dedup();
    assert_eq!(evicted.len(), 2);
    let info = c.command(&["INFO", "stats"]).unwrap();
    let info = String::from_utf8_lossy(&info);
    assert!(info.contains("tracking_total_keys:2\r\n"), "{info}");
    assert!(info.contains("tracking_total_items:2\r\n"), "{info}");
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
