//! The harness the `effects*.rs` tests share: one workload, run on an
//! embedded coordis and on a real `redis-server` 7.0.15 side by side, and
//! at every checkpoint coordis's effects feed (`ServerControl::effects`)
//! compared with what Redis sent its replicas ([`ReplicationCapture`]).
//!
//! - coordis runs on a frozen clock at [`T0`], so the deadlines and IDs its
//!   feed carries are exact and a test can still assert them as literals
//!   ([`Pair::take`] returns coordis's stream); Redis runs on the wall
//!   clock, so before the two streams are compared, the absolute times near
//!   each run's moment are masked ([`normalize_times`]).
//! - Both servers allow DEBUG (for `DEBUG SET-ACTIVE-EXPIRE 0`, which keeps
//!   keys past their deadline until a command meets them); [`Pair::advance`]
//!   moves coordis's clock and waits as long on Redis's.
//! - A checkpoint publishes a marker on both servers from a connection of
//!   its own in database 0 and takes each stream up to it (a SELECT right
//!   before the marker was the marker's), so both streams are in database 0
//!   after every checkpoint and the next write elsewhere selects its
//!   database on both.
//! - Every reply is compared too ([`Client::run`]), so a workload that went
//!   differently on the two servers is named where it diverged, not as a
//!   stream difference later; [`Client::run_any`] is for the replies that
//!   legitimately differ (a generated stream ID, SPOP's random members).
//!
//! Without redis-server only coordis's half runs (a loud skip line), unless
//! `COORDIS_REQUIRE_REDIS=1`, which makes a missing Redis a failure.
#![allow(dead_code)] // each test crate uses a part

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use coordis::testing::{
    normalize_times, parse_commands, show_command, RawClient, RedisServer, ReplicationCapture, StreamCommand,
};

/// A fixed start for coordis's frozen clock, so deadlines are exact.
pub const T0: u64 = 1_900_000_000_000;

/// How far from a run's moment a time in these workloads may be (the
/// longest relative expiry is 100 s): such times are masked when the two
/// streams are compared; times further away (an EXPIREAT in 2033) compare
/// exactly.
pub const DEADLINE_SPAN_MS: u64 = 200_000;

/// The channel the checkpoints publish their markers on (on coordis; the
/// capture has its own on Redis, which coordis never sees).
const MARKER: &str = "__effects_marker__";

/// How long a blocked client or a checkpoint's marker may take.
const WAIT: Duration = Duration::from_secs(5);

/// `T0 + ms`, as the stream writes an absolute deadline.
pub fn at(ms: u64) -> String {
    (T0 + ms).to_string()
}

/// A command of a workload: space-separated words, `""` for an empty one.
pub fn words(line: &str) -> Vec<&str> {
    line.split(' ').map(|w| if w == "\"\"" { "" } else { w }).collect()
}

/// A stream as lines, arguments space-separated (lossy UTF-8).
pub fn lines(cmds: &[StreamCommand]) -> Vec<String> {
    cmds.iter()
        .map(|args| {
            args.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Runs `workload` (one command per line, see [`words`]) on both servers
/// and asserts coordis's feed is `expected` and Redis's stream the same.
pub fn check(workload: &[&str], expected: &[impl AsRef<str>]) {
    let mut pair = Pair::start();
    let mut c = pair.client();
    for line in workload {
        c.run(line);
    }
    let expected: Vec<&str> = expected.iter().map(AsRef::as_ref).collect();
    assert_eq!(pair.take(), expected, "coordis's feed");
}

/// The real-Redis half of a [`Pair`].
struct RedisSide {
    /// Declared before the server, so the link closes before it stops.
    capture: ReplicationCapture,
    server: RedisServer,
    /// The wall-clock time the workload started at: Redis's deadlines are
    /// near it, as coordis's are near [`T0`].
    started_ms: u64,
}

/// An embedded coordis and (when installed) a redis-server, running the
/// same workload; see the module docs.
pub struct Pair {
    pub coordis: coordis::BlockingServer,
    feed: coordis::EffectReader,
    /// coordis's marker connection (database 0).
    marker: RawClient,
    /// The number the next marker carries.
    next_marker: u64,
    redis: Option<RedisSide>,
    /// How far coordis's clock moved from [`T0`] ([`Pair::advance`]).
    advanced_ms: u64,
}

impl Pair {
    /// Both servers, with a reader of coordis's feed and a capture of
    /// Redis's stream attached before any command runs.
    pub fn start() -> Pair {
        let mut builder = coordis::Server::builder();
        builder.config_mut().enable_debug_command = "yes".into();
        let coordis = builder.start_blocking().unwrap();
        let clock = coordis.clock().unwrap();
        clock.freeze();
        clock.set_ms(T0);
        let feed = coordis.control().effects();
        let marker = RawClient::connect(coordis.addr()).unwrap();
        let redis = RedisServer::start(&["--enable-debug-command", "yes"])
            .unwrap()
            .map(|server| RedisSide {
                capture: ReplicationCapture::start(server.addr()).unwrap(),
                server,
                started_ms: now_ms(),
            });
        Pair {
            coordis,
            feed,
            marker,
            next_marker: 1,
            redis,
            advanced_ms: 0,
        }
    }

    /// Whether the real-Redis half runs.
    pub fn has_redis(&self) -> bool {
        self.redis.is_some()
    }

    /// Redis's address, when it runs.
    pub fn redis_addr(&self) -> Option<SocketAddr> {
        self.redis.as_ref().map(|r| r.server.addr())
    }

    /// A client of each server, in database 0.
    pub fn client(&self) -> Client {
        Client {
            ours: RawClient::connect(self.coordis.addr()).unwrap(),
            theirs: self.redis_addr().map(|a| RawClient::connect(a).unwrap()),
        }
    }

    /// Lets `ms` pass: coordis's clock moves at once, Redis's by waiting.
    pub fn advance(&mut self, ms: u64) {
        self.coordis.clock().unwrap().advance(Duration::from_millis(ms));
        self.advanced_ms += ms;
        if self.has_redis() {
            std::thread::sleep(Duration::from_millis(ms));
        }
    }

    /// A client of each server that selects `db`, sends `line` and is
    /// blocked in it (each server reports it blocked) when this returns.
    pub fn block(&self, db: usize, line: &str) -> Blocked {
        let mut addrs = vec![self.coordis.addr()];
        addrs.extend(self.redis_addr());
        let mut waiters = addrs.into_iter().map(|addr| block_on(addr, db, line));
        Blocked {
            line: line.to_string(),
            ours: waiters.next().unwrap(),
            theirs: waiters.next(),
        }
    }

    /// coordis's stream since the last checkpoint, after asserting Redis's
    /// is the same (deadlines masked).
    pub fn take(&mut self) -> Vec<String> {
        self.take_with(|_, cmds| cmds)
    }

    /// As [`Pair::take`], comparing the two streams as multisets: for
    /// effects whose order is the servers' own (the expired keys a SCAN or
    /// RANDOMKEY met, in hash-table or random order). Returns coordis's in
    /// its order.
    pub fn take_unordered(&mut self) -> Vec<String> {
        self.take_with(|_, mut cmds| {
            cmds.sort();
            cmds
        })
    }

    /// As [`Pair::take`], with every argument that is one of `ours` (in
    /// coordis's stream) or `theirs` (in Redis's) replaced by `<masked>`:
    /// for values each server chose by itself (SPOP's random members),
    /// taken from each one's replies.
    pub fn take_masking(&mut self, ours: &[Vec<u8>], theirs: &[Vec<u8>]) -> Vec<String> {
        self.take_with(|redis, cmds| {
            let chosen = if redis { theirs } else { ours };
            cmds.into_iter()
                .map(|cmd| {
                    let mut cmd = cmd.into_iter();
                    let name = cmd.next().into_iter();
                    name.chain(cmd.map(|a| if chosen.contains(&a) { b"<masked>".to_vec() } else { a }))
                        .collect()
                })
                .collect()
        })
    }

    /// The checkpoint: each side's stream up to its marker, `adjust`ed
    /// (`true` for Redis's) after the times are masked, compared.
    fn take_with(&mut self, adjust: impl Fn(bool, Vec<StreamCommand>) -> Vec<StreamCommand>) -> Vec<String> {
        let ours = self.take_ours();
        if let Some(redis) = self.redis.as_mut() {
            let theirs = redis.capture.take().unwrap();
            let elapsed = now_ms() - redis.started_ms;
            let ours = adjust(false, normalize_times(&ours, T0, DEADLINE_SPAN_MS + self.advanced_ms));
            let theirs = adjust(
                true,
                normalize_times(&theirs, redis.started_ms, DEADLINE_SPAN_MS + elapsed),
            );
            assert_eq!(
                lines(&ours),
                lines(&theirs),
                "coordis's feed (left) against Redis's replication stream (right)"
            );
        }
        lines(&ours)
    }

    /// coordis's feed up to a marker published now (it and the SELECT
    /// right before it dropped).
    fn take_ours(&mut self) -> Vec<StreamCommand> {
        let n = self.next_marker.to_string();
        self.next_marker += 1;
        let reply = self.marker.command(&["PUBLISH", MARKER, &n]).unwrap();
        assert!(reply.starts_with(b":"), "PUBLISH marker: {reply:?}");
        let is_marker =
            |c: &StreamCommand| c.len() == 3 && c[0] == b"PUBLISH" && c[1] == MARKER.as_bytes() && c[2] == n.as_bytes();
        let feed = &mut self.feed;
        let deadline = Instant::now() + WAIT;
        let mut out = vec![];
        loop {
            let mut got = vec![];
            for unit in feed.units_timeout(Duration::from_millis(100)) {
                let mut bytes = bytes::BytesMut::new();
                feed.encode(&unit, &mut bytes);
                got.extend(parse_commands(&bytes));
            }
            if let Some(at) = got.iter().position(is_marker) {
                assert!(
                    at + 1 == got.len(),
                    "effects after the marker: {:?}",
                    lines(&got[at + 1..])
                );
                got.truncate(at);
                out.extend(got);
                if out.last().is_some_and(|c| c[0] == b"SELECT") {
                    out.pop();
                }
                return out;
            }
            out.extend(got);
            assert!(
                Instant::now() < deadline,
                "coordis's marker {n} never reached the feed; got {:?}",
                out.iter().map(|c| show_command(c)).collect::<Vec<_>>()
            );
        }
    }
}

/// One client on each server; see [`Client::run`].
pub struct Client {
    ours: RawClient,
    theirs: Option<RawClient>,
}

impl Client {
    /// Runs `line` ([`words`]) on both servers; asserts the replies are the
    /// same and returns coordis's.
    pub fn run(&mut self, line: &str) -> String {
        self.run_args(&words(line))
    }

    /// [`Client::run`] with the arguments given one by one (a script).
    pub fn run_args(&mut self, args: &[&str]) -> String {
        let (ours, theirs) = self.run_any_args(args);
        if let Some(theirs) = theirs {
            assert_eq!(
                ours, theirs,
                "the replies to {args:?}: coordis's (left) and Redis's (right)"
            );
        }
        ours
    }

    /// Runs `line` on both servers and returns both replies (Redis's when
    /// it runs), not comparing them.
    pub fn run_any(&mut self, line: &str) -> (String, Option<String>) {
        self.run_any_args(&words(line))
    }

    fn run_any_args(&mut self, args: &[&str]) -> (String, Option<String>) {
        let text = |reply: Vec<u8>| String::from_utf8_lossy(&reply).into_owned();
        let ours = text(self.ours.command(args).unwrap());
        let theirs = self.theirs.as_mut().map(|c| text(c.command(args).unwrap()));
        (ours, theirs)
    }

    /// Runs each line with [`Client::run`].
    pub fn run_all(&mut self, lines: &[&str]) {
        for line in lines {
            self.run(line);
        }
    }
}

/// A client blocked on each server by [`Pair::block`].
pub struct Blocked {
    line: String,
    ours: RawClient,
    theirs: Option<RawClient>,
}

impl Blocked {
    /// The reply each server gave once it served the client (waiting up to
    /// [`WAIT`]): asserted the same, coordis's returned.
    pub fn served(&mut self) -> String {
        let mut read = |c: &mut RawClient| {
            c.set_read_timeout(Some(WAIT)).unwrap();
            let reply = c
                .read_reply()
                .unwrap_or_else(|e| panic!("{} was not served: {e}", self.line));
            String::from_utf8_lossy(&reply).into_owned()
        };
        let ours = read(&mut self.ours);
        if let Some(theirs) = self.theirs.as_mut().map(&mut read) {
            assert_eq!(
                ours, theirs,
                "served {}: coordis's reply (left) and Redis's (right)",
                self.line
            );
        }
        ours
    }
}

/// A new client of the server at `addr` that selects `db` and sends
/// `line`, returned once CLIENT LIST shows it blocked (flag `b`).
fn block_on(addr: SocketAddr, db: usize, line: &str) -> RawClient {
    let mut waiter = RawClient::connect(addr).unwrap();
    let ok = waiter.command(&["SELECT", &db.to_string()]).unwrap();
    assert_eq!(ok, b"+OK\r\n");
    let id = String::from_utf8(waiter.command(&["CLIENT", "ID"]).unwrap()).unwrap();
    let prefix = format!("id={} ", id.trim_start_matches(':').trim_end());
    let args: Vec<&[u8]> = words(line).into_iter().map(str::as_bytes).collect();
    waiter.send(&RawClient::encode(&args)).unwrap();
    let mut admin = RawClient::connect(addr).unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let list = String::from_utf8(admin.command(&["CLIENT", "LIST"]).unwrap()).unwrap();
        let blocked = list.lines().any(|l| {
            // The bulk header sits in front of the first line.
            let l = l.trim_start_matches(|c: char| !c.is_ascii_alphabetic());
            l.starts_with(&prefix)
                && l.split(' ')
                    .any(|f| f.strip_prefix("flags=").is_some_and(|f| f.contains('b')))
        });
        if blocked {
            return waiter;
        }
        assert!(Instant::now() < deadline, "{line} did not block on {addr}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
