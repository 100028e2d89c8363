//! Sentinel mode against real redis-server processes: a primary and two
//! replicas on free ports (each in its own temp dir), watched by coordis's
//! Sentinel, by a real `redis-server --sentinel` beside it, and used by
//! redis-py's `Sentinel` client. Every process a test starts is stopped on
//! drop, failure or not. A real Sentinel also fails over a coordis primary
//! with coordis replicas. Without redis-server the tests skip loudly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coordis::sentinel::Sentinel;
use coordis::testing::{RawClient, RedisServer, TempDir};

/// How long a real-time failover may take here (down-after 1 s, INFO
/// every second while failing over, a replica's resync).
const FAILOVER_WAIT: Duration = Duration::from_secs(40);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A primary and two replicas replicating from it (links up).
struct Group {
    primary: Option<RedisServer>,
    replicas: Vec<RedisServer>,
}

impl Group {
    fn start() -> Option<Group> {
        let primary = RedisServer::start(&[]).unwrap()?;
        let port = primary.addr().port().to_string();
        let mut replicas = vec![];
        for _ in 0..2 {
            let r = RedisServer::start(&["--replicaof", "127.0.0.1", &port, "--repl-diskless-sync-delay", "0"])
                .unwrap()
                .expect("redis-server ran for the primary");
            replicas.push(r);
        }
        for r in &replicas {
            wait_until("replica link up", Duration::from_secs(20), || {
                info(r.addr(), "replication").contains("master_link_status:up")
            });
        }
        Some(Group {
            primary: Some(primary),
            replicas,
        })
    }

    fn primary_port(&self) -> u16 {
        self.primary.as_ref().expect("primary running").addr().port()
    }
}

fn info(addr: SocketAddr, section: &str) -> String {
    let Ok(mut c) = RawClient::connect(addr) else {
        return String::new();
    };
    c.command(&["INFO", section]).map(|b| text(&b)).unwrap_or_default()
}

fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A sentinel.conf in `dir` monitoring `mymaster` at `port`.
fn sentinel_conf(dir: &TempDir, file: &str, port: u16, quorum: u32, down_after_ms: u64) -> PathBuf {
    let path = dir.0.join(file);
    std::fs::write(
        &path,
        format!(
            "sentinel monitor mymaster 127.0.0.1 {port} {quorum}\nsentinel down-after-milliseconds mymaster {down_after_ms}\nsentinel failover-timeout mymaster 20000\n"
        ),
    )
    .unwrap();
    path
}

/// coordis's Sentinel on a free port, on a runtime of its own.
struct Ours {
    rt: tokio::runtime::Runtime,
    sentinel: Option<Sentinel>,
}

impl Ours {
    fn start(conf: &std::path::Path, clock: Option<Arc<coordis::VirtualClock>>) -> Ours {
        let rt = coordis::runtime(2).unwrap();
        let args: Vec<String> = vec![
            conf.display().to_string(),
            "--port".into(),
            "0".into(),
            "--bind".into(),
            "127.0.0.1".into(),
        ];
        let sentinel = rt
            .block_on(async {
                match clock {
                    Some(c) => Sentinel::start_with_clock(&args, c).await,
                    None => Sentinel::start(&args).await,
                }
            })
            .unwrap();
        Ours {
            rt,
            sentinel: Some(sentinel),
        }
    }

    fn addr(&self) -> SocketAddr {
        self.sentinel.as_ref().unwrap().addr()
    }
}

impl Drop for Ours {
    fn drop(&mut self) {
        if let Some(s) = self.sentinel.take() {
            self.rt.block_on(s.shutdown());
        }
    }
}

/// A RESP2 reply, parsed.
#[derive(Debug)]
enum Val {
    Str(String),
    List(Vec<Val>),
}

fn parse(reply: &[u8]) -> Val {
    fn one(lines: &mut std::iter::Peekable<std::str::Split<'_, &str>>) -> Val {
        let line = lines.next().unwrap_or_default();
        match line.split_at_checked(1) {
            Some(("*", n)) => {
                let n: i64 = n.parse().unwrap();
                Val::List((0..n.max(0)).map(|_| one(lines)).collect())
            }
            Some(("$", "-1")) => Val::Str(String::new()),
            Some(("$", _)) => Val::Str(lines.next().unwrap_or_default().to_string()),
            Some((_, rest)) => Val::Str(rest.to_string()),
            None => Val::Str(String::new()),
        }
    }
    let text = text(reply);
    one(&mut text.split("\r\n").peekable())
}

/// A reply's strings, depth first.
fn flat(reply: &[u8]) -> Vec<String> {
    fn walk(v: &Val, out: &mut Vec<String>) {
        match v {
            Val::Str(s) => out.push(s.clone()),
            Val::List(items) => items.iter().for_each(|i| walk(i, out)),
        }
    }
    let mut out = vec![];
    walk(&parse(reply), &mut out);
    out
}

fn to_pairs(v: &Val) -> Vec<(String, String)> {
    let Val::List(items) = v else { return vec![] };
    items
        .chunks(2)
        .map(|c| match c {
            [Val::Str(k), Val::Str(v)] => (k.clone(), v.clone()),
            _ => panic!("not a flat map: {c:?}"),
        })
        .collect()
}

/// A flat map reply as (key, value) pairs.
fn pairs(reply: &[u8]) -> Vec<(String, String)> {
    to_pairs(&parse(reply))
}

/// `SENTINEL REPLICAS` (or SENTINELS) as one (key, value) list per instance, by name.
fn instances(addr: SocketAddr, which: &str) -> Vec<Vec<(String, String)>> {
    let mut c = RawClient::connect(addr).unwrap();
    let Val::List(items) = parse(&c.command(&["SENTINEL", which, "mymaster"]).unwrap()) else {
        panic!("SENTINEL {which} is not an array")
    };
    let mut out: Vec<Vec<(String, String)>> = items.iter().map(to_pairs).collect();
    out.sort_by(|a, b| a[0].1.cmp(&b[0].1));
    out
}

fn replicas(addr: SocketAddr) -> Vec<Vec<(String, String)>> {
    instances(addr, "REPLICAS")
}

fn field<'a>(pairs: &'a [(String, String)], key: &str) -> &'a str {
    pairs.iter().find(|(k, _)| k == key).map_or("", |(_, v)| v.as_str())
}

/// A PSUBSCRIBE * client on a Sentinel, collecting `channel message` lines.
struct Events {
    client: RawClient,
    seen: Vec<String>,
}

impl Events {
    fn subscribe(addr: SocketAddr) -> Events {
        let mut client = RawClient::connect(addr).unwrap();
        client.command(&["PSUBSCRIBE", "*"]).unwrap();
        client.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        Events { client, seen: vec![] }
    }

    fn poll(&mut self) {
        while let Ok(reply) = self.client.read_reply() {
            let items = flat(&reply);
            if items.len() == 4 && items[0] == "pmessage" {
                self.seen.push(format!("{} {}", items[2], items[3]));
            }
        }
    }

    /// Waits for an event line starting with `prefix`; `step` runs between
    /// polls (a test clock's advance).
    fn wait_for(&mut self, prefix: &str, timeout: Duration, mut step: impl FnMut()) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            self.poll();
            if let Some(line) = self.seen.iter().find(|l| l.starts_with(prefix)) {
                return line.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no '{prefix}' event within {timeout:?}; seen:\n{}",
                self.seen.join("\n")
            );
            step();
        }
    }

    fn position(&self, prefix: &str) -> usize {
        self.seen
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no '{prefix}' in:\n{}", self.seen.join("\n")))
    }
}

/// After a failover to `new`: it is a primary and `other` replicates from it.
fn assert_promoted(new: SocketAddr, other: SocketAddr) {
    wait_until("the promoted replica reports role:master", FAILOVER_WAIT, || {
        info(new, "replication").contains("role:master")
    });
    let port = format!("master_port:{}", new.port());
    wait_until(
        "the other replica replicates from the new primary",
        FAILOVER_WAIT,
        || {
            let i = info(other, "replication");
            i.contains(&port) && i.contains("master_link_status:up")
        },
    );
}

fn master_addr(addr: SocketAddr) -> Vec<String> {
    let mut c = RawClient::connect(addr).unwrap();
    flat(&c.command(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]).unwrap())
}

/// SENTINEL MASTER, REPLICAS, SENTINELS and a set of plain replies are what
/// a real redis-sentinel answers for the same setup; then, as a quorum of
/// two (one of each), they fail over together when the primary dies.
#[test]
fn answers_like_redis_sentinel_and_fails_over_with_it() {
    let Some(mut group) = Group::start() else { return };
    let dir = TempDir::new("sentinel-mixed");
    let port = group.primary_port();
    let theirs_conf = sentinel_conf(&dir, "theirs.conf", port, 2, 1000);
    let Some(theirs) = RedisServer::start_with_config(&theirs_conf, &["--sentinel"]).unwrap() else {
        return;
    };
    let ours_conf = sentinel_conf(&dir, "ours.conf", port, 2, 1000);
    let ours = Ours::start(&ours_conf, None);
    let (a, b) = (ours.addr(), theirs.addr());
    let myid = |addr| {
        flat(
            &RawClient::connect(addr)
                .unwrap()
                .command(&["SENTINEL", "MYID"])
                .unwrap(),
        )[0]
        .clone()
    };
    let (our_id, their_id) = (myid(a), myid(b));
    // Each discovers the other through hello messages, and both see the replicas with their links up.
    wait_until(
        "both Sentinels know each other and the replicas",
        Duration::from_secs(30),
        || {
            [(a, &their_id), (b, &our_id)].iter().all(|(addr, other)| {
                let sentinels = instances(*addr, "SENTINELS");
                let reps = replicas(*addr);
                // Linked, not just heard of (a Sentinel connects on its next tick).
                sentinels.len() == 1
                    && field(&sentinels[0], "runid") == other.as_str()
                    && field(&sentinels[0], "flags") == "sentinel"
                    && reps.len() == 2
                    && reps.iter().all(|r| field(r, "master-link-status") == "ok")
            })
        },
    );
    assert_eq!(master_addr(a), master_addr(b));
    assert_eq!(master_addr(a), vec!["127.0.0.1".to_string(), port.to_string()]);

    // SENTINEL MASTER: the same fields in the same order, and the same
    // values where they do not depend on timing.
    let master = |addr| {
        pairs(
            &RawClient::connect(addr)
                .unwrap()
                .command(&["SENTINEL", "MASTER", "mymaster"])
                .unwrap(),
        )
    };
    let (ma, mb) = (master(a), master(b));
    let keys = |p: &[(String, String)]| p.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&ma), keys(&mb));
    for k in [
        "name",
        "ip",
        "port",
        "runid",
        "flags",
        "link-refcount",
        "down-after-milliseconds",
        "role-reported",
        "config-epoch",
        "num-slaves",
        "num-other-sentinels",
        "quorum",
        "failover-timeout",
        "parallel-syncs",
    ] {
        assert_eq!(field(&ma, k), field(&mb, k), "SENTINEL MASTER {k}");
    }
    let (ra, rb) = (replicas(a), replicas(b));
    for (x, y) in ra.iter().zip(&rb) {
        assert_eq!(keys(x), keys(y));
        for k in [
            "name",
            "ip",
            "port",
            "runid",
            "flags",
            "role-reported",
            "master-link-status",
            "master-host",
            "master-port",
            "slave-priority",
            "replica-announced",
        ] {
            assert_eq!(field(x, k), field(y, k), "SENTINEL REPLICAS {k}");
        }
    }
    let sentinels = |addr| instances(addr, "SENTINELS").remove(0);
    let (sa, sb) = (sentinels(a), sentinels(b));
    assert_eq!(keys(&sa), keys(&sb));
    assert_eq!(field(&sa, "runid"), their_id);
    assert_eq!(field(&sb, "runid"), our_id);
    assert_eq!(field(&sa, "port"), b.port().to_string());
    assert_eq!(field(&sb, "port"), a.port().to_string());
    for k in ["ip", "flags", "down-after-milliseconds"] {
        assert_eq!(field(&sa, k), field(&sb, k), "SENTINEL SENTINELS {k}");
    }
    // Replies that do not depend on the instance: byte for byte.
    let down = [
        "SENTINEL",
        "IS-MASTER-DOWN-BY-ADDR",
        "127.0.0.1",
        &port.to_string(),
        "0",
        "*",
    ]
    .map(String::from);
    let cases: Vec<Vec<String>> = [
        "GET x",
        "CONFIG GET port",
        "SENTINEL MASTER nope",
        "SENTINEL REPLICAS nope",
        "SENTINEL FOO",
        "SENTINEL MASTERS x",
        "SENTINEL GET-MASTER-ADDR-BY-NAME nope",
        "SENTINEL CKQUORUM mymaster",
        "SENTINEL SET mymaster foo 1",
        "SENTINEL SET mymaster quorum 0",
        "SENTINEL MONITOR mymaster 127.0.0.1 1 1",
        "SENTINEL MONITOR other 127.0.0.1 1 0",
        "SENTINEL MONITOR other not-an-ip 1 1",
        "SENTINEL REMOVE nope",
        "SENTINEL PENDING-SCRIPTS",
        "SENTINEL SIMULATE-FAILURE HELP",
        "SENTINEL SIMULATE-FAILURE bogus",
        "SENTINEL CONFIG GET resolve-hostnames",
        "SENTINEL CONFIG SET bogus 1",
        "SENTINEL CONFIG FOO",
        "SENTINEL DEBUG",
        "SENTINEL HELP",
        "PUBLISH foo bar",
        "ROLE",
        "PING",
        "AUTH x",
    ]
    .iter()
    .map(|c| c.split(' ').map(String::from).collect())
    .chain(std::iter::once(down.to_vec()))
    .collect();
    for case in &cases {
        let args: Vec<&str> = case.iter().map(String::as_str).collect();
        let run = |addr| text(&RawClient::connect(addr).unwrap().command(&args).unwrap());
        assert_eq!(run(a), run(b), "{}", case.join(" "));
    }
    let sentinel_section = |addr| {
        info(addr, "sentinel")
            .lines()
            .filter(|l| l.starts_with("sentinel_masters") || l.starts_with("master0:"))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(sentinel_section(a), sentinel_section(b));

    // The primary dies: neither has a quorum alone, together they fail over.
    let mut events = Events::subscribe(a);
    drop(group.primary.take());
    let odown = events.wait_for("+odown", FAILOVER_WAIT, || {});
    assert_eq!(odown, format!("+odown master mymaster 127.0.0.1 {port} #quorum 2/2"));
    let switch = events.wait_for("+switch-master", FAILOVER_WAIT, || {});
    let words: Vec<&str> = switch.split(' ').collect();
    assert_eq!(
        &words[..4],
        &["+switch-master", "mymaster", "127.0.0.1", &port.to_string()]
    );
    let new_port: u16 = words[5].parse().unwrap();
    wait_until("both Sentinels name the same new primary", FAILOVER_WAIT, || {
        master_addr(a) == master_addr(b)
    });
    assert_eq!(master_addr(a), vec!["127.0.0.1".to_string(), new_port.to_string()]);
    let (new, other) = if group.replicas[0].addr().port() == new_port {
        (group.replicas[0].addr(), group.replicas[1].addr())
    } else {
        (group.replicas[1].addr(), group.replicas[0].addr())
    };
    assert_eq!(new.port(), new_port, "the new primary is one of the replicas");
    assert_promoted(new, other);
}

/// Alone with quorum 1, coordis's Sentinel fails over when the primary
/// dies (Redis's events in Redis's order, a replica promoted, the other
/// moved to it, the config file rewritten); redis-py's Sentinel client
/// finds the primary before and after, and an ioredis client with
/// `sentinels`, open throughout, follows it to the new primary.
#[test]
fn fails_over_alone_and_clients_follow() {
    let Some(mut group) = Group::start() else { return };
    let dir = TempDir::new("sentinel-alone");
    let port = group.primary_port();
    let conf = sentinel_conf(&dir, "sentinel.conf", port, 1, 1000);
    let ours = Ours::start(&conf, None);
    let a = ours.addr();
    wait_until("the replicas are discovered", Duration::from_secs(30), || {
        let reps = replicas(a);
        reps.len() == 2 && reps.iter().all(|r| field(r, "master-link-status") == "ok")
    });
    let py = redis_py(a, "before");
    if let Some(out) = &py {
        assert_eq!(
            out.trim(),
            format!("127.0.0.1 {port} ok"),
            "redis-py before the failover"
        );
    }
    let mut node = IoRedis::connect(a);
    if let Some(node) = &mut node {
        assert_eq!(node.line(), format!("{port} ok"), "ioredis before the failover");
    }
    let mut events = Events::subscribe(a);
    drop(group.primary.take());
    let switch = events.wait_for("+switch-master", FAILOVER_WAIT, || {});
    let at = format!("master mymaster 127.0.0.1 {port}");
    assert_eq!(events.seen[events.position("+sdown")], format!("+sdown {at}"));
    assert_eq!(
        events.seen[events.position("+odown")],
        format!("+odown {at} #quorum 1/1")
    );
    let order = [
        "+sdown",
        "+odown",
        "+try-failover",
        "+elected-leader",
        "+selected-slave",
        "+promoted-slave",
        "+failover-end",
        "+switch-master",
    ];
    let positions: Vec<usize> = order.iter().map(|e| events.position(e)).collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "events out of order:\n{}",
        events.seen.join("\n")
    );
    let new_port: u16 = switch.split(' ').nth(5).unwrap().parse().unwrap();
    let (new, other) = if group.replicas[0].addr().port() == new_port {
        (group.replicas[0].addr(), group.replicas[1].addr())
    } else {
        (group.replicas[1].addr(), group.replicas[0].addr())
    };
    assert_eq!(new.port(), new_port);
    assert_promoted(new, other);
    assert_eq!(master_addr(a), vec!["127.0.0.1".to_string(), new_port.to_string()]);
    // What Redis's Sentinel writes back: the new primary, the old one and
    // the other replica as known replicas, the epochs.
    let file = std::fs::read_to_string(&conf).unwrap();
    for line in [
        format!("sentinel monitor mymaster 127.0.0.1 {new_port} 1"),
        format!("sentinel known-replica mymaster 127.0.0.1 {port}"),
        format!("sentinel known-replica mymaster 127.0.0.1 {}", other.port()),
        "sentinel config-epoch mymaster 1".into(),
        "sentinel current-epoch 1".into(),
    ] {
        assert!(
            file.lines().any(|l| l == line),
            "no '{line}' in the rewritten config:\n{file}"
        );
    }
    assert!(file
        .lines()
        .any(|l| l.starts_with("sentinel myid ") && l.len() == "sentinel myid ".len() + 40));
    if py.is_some() {
        let out = redis_py(a, "after").expect("redis-py ran before");
        assert_eq!(
            out.trim(),
            format!("127.0.0.1 {new_port} ok"),
            "redis-py after the failover"
        );
    }
    // The same ioredis client, connected before, now writes to the new primary.
    if let Some(mut node) = node {
        node.go();
        assert_eq!(node.line(), format!("{new_port} ok"), "ioredis after the failover");
    }
}

/// An ioredis client with `sentinels` (the client matrix's install), kept
/// open across the failover: it prints the primary's port once connected,
/// and again, after `go`, once it writes to a different primary.
struct IoRedis {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

/// The ioredis client's script; its argument is the Sentinel's port.
const IOREDIS_SCRIPT: &str = r#"
const Redis = require('ioredis');
const r = new Redis({ sentinels: [{ host: '127.0.0.1', port: Number(process.argv[1]) }], name: 'mymaster', maxRetriesPerRequest: null });
// Refused connections to the dead primary are expected until the switch.
r.on('error', () => {});
const port = async () => /tcp_port:(\d+)/.exec(await r.info('server'))[1];
(async () => {
  await r.set('ioredis', 'ok');
  const first = await port();
  console.log(first, await r.get('ioredis'));
  await new Promise(done => process.stdin.once('data', done));
  for (;;) {
    try {
      await r.set('ioredis-after', 'ok');
      const now = await port();
      if (now !== first) { console.log(now, await r.get('ioredis-after')); break; }
    } catch (e) {}
    await new Promise(t => setTimeout(t, 100));
  }
  r.disconnect();
})().catch(e => { console.error(e); process.exit(1); });
"#;

impl IoRedis {
    fn connect(sentinel: SocketAddr) -> Option<IoRedis> {
        let prefix = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/ecosystem/node");
        let installed = prefix.join("node_modules/ioredis").exists()
            && std::process::Command::new("node")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success());
        if !installed {
            assert!(
                !coordis::testing::require_redis(),
                "COORDIS_REQUIRE_REDIS=1 but ioredis is not installed in {}",
                prefix.display()
            );
            eprintln!("\n*** SKIPPED: ioredis is not installed (client-tests/ecosystem/node/run.sh installs it); the ioredis leg did not run ***\n");
            return None;
        }
        let mut child = std::process::Command::new("node")
            .current_dir(&prefix)
            .args(["-e", IOREDIS_SCRIPT, &sentinel.port().to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        Some(IoRedis { child, out })
    }

    fn line(&mut self) -> String {
        use std::io::BufRead;
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line.trim().to_string()
    }

    fn go(&mut self) {
        use std::io::Write;
        self.child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    }
}

impl Drop for IoRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs redis-py's `Sentinel` against `sentinel`: discovers mymaster and
/// writes through `master_for`. `None` (a loud skip) without the client
/// matrix's virtualenv.
fn redis_py(sentinel: SocketAddr, tag: &str) -> Option<String> {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/ecosystem/python-venv/bin/python");
    let has_redis = python.exists()
        && std::process::Command::new(&python)
            .args(["-c", "import redis.sentinel"])
            .status()
            .is_ok_and(|s| s.success());
    if !has_redis {
        assert!(
            !coordis::testing::require_redis(),
            "COORDIS_REQUIRE_REDIS=1 but redis-py is not installed in {}",
            python.display()
        );
        eprintln!("\n*** SKIPPED: redis-py is not installed (client-tests/ecosystem/python/run.sh installs it); the redis-py leg did not run ***\n");
        return None;
    }
    let script = format!(
        "from redis.sentinel import Sentinel\n\
         s = Sentinel([('127.0.0.1', {})], socket_timeout=5)\n\
         host, port = s.discover_master('mymaster')\n\
         m = s.master_for('mymaster', socket_timeout=5)\n\
         m.set('sentinel-{tag}', 'ok')\n\
         print(host, port, m.get('sentinel-{tag}').decode())\n",
        sentinel.port()
    );
    let out = std::process::Command::new(&python)
        .args(["-B", "-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "redis-py failed: {}", text(&out.stderr));
    Some(text(&out.stdout))
}

/// On a frozen test clock nothing is down until the clock says so: the
/// primary dies, real time passes and no +sdown comes; moving the clock
/// past down-after-milliseconds brings +sdown and +odown at once, and
/// stepping it a second at a time (each step lets the replicas' INFO
/// replies in) completes the failover.
#[test]
fn the_test_clock_drives_the_failover() {
    let Some(mut group) = Group::start() else { return };
    let dir = TempDir::new("sentinel-clock");
    let port = group.primary_port();
    let conf = sentinel_conf(&dir, "sentinel.conf", port, 1, 30_000);
    let clock = Arc::new(coordis::VirtualClock::at_ms(1_700_000_000_000));
    let ours = Ours::start(&conf, Some(clock.clone()));
    let a = ours.addr();
    // INFO goes out every 10 s of the clock: step it until both replicas are known.
    wait_until("the replicas are discovered", Duration::from_secs(30), || {
        clock.advance_ms(1000);
        std::thread::sleep(Duration::from_millis(50));
        let reps = replicas(a);
        reps.len() == 2 && reps.iter().all(|r| field(r, "master-link-status") == "ok")
    });
    let mut events = Events::subscribe(a);
    drop(group.primary.take());
    std::thread::sleep(Duration::from_millis(1500));
    events.poll();
    assert!(
        !events.seen.iter().any(|l| l.starts_with("+sdown master")),
        "SDOWN before the clock moved: {:?}",
        events.seen
    );
    clock.advance_ms(31_000);
    let sdown = events.wait_for("+sdown master", Duration::from_secs(2), || {});
    assert_eq!(sdown, format!("+sdown master mymaster 127.0.0.1 {port}"));
    events.wait_for("+odown", Duration::from_secs(2), || {});
    let switch = events.wait_for("+switch-master", FAILOVER_WAIT, || {
        clock.advance_ms(1000);
    });
    let new_port: u16 = switch.split(' ').nth(5).unwrap().parse().unwrap();
    assert!(group.replicas.iter().any(|r| r.addr().port() == new_port));
}

/// Sentinel needs a config file it can write, as Redis's does: the same
/// sentence redis-server logs, and coordis-server exits non-zero.
#[test]
fn sentinel_needs_a_config_file() {
    let rt = coordis::runtime(1).unwrap();
    let err = rt
        .block_on(Sentinel::start(&["--port".into(), "0".into()]))
        .unwrap_err();
    assert_eq!(err, "Sentinel needs config file on disk to save state. Exiting...");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_coordis-server"))
        .args(["--sentinel", "--port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains(&err), "{}", text(&out.stderr));
    if let Ok(redis) = std::process::Command::new("redis-server")
        .args(["--sentinel", "--port", "0"])
        .output()
    {
        assert!(!redis.status.success());
        assert!(
            text(&redis.stdout).contains(&err),
            "redis-server said: {}",
            text(&redis.stdout)
        );
    }
}

/// `coordis-server sentinel.conf --sentinel`: answers as a Sentinel on the
/// port it was given, records SENTINEL MONITOR and REMOVE in its file, and
/// exits cleanly on SHUTDOWN.
#[test]
fn coordis_server_runs_in_sentinel_mode() {
    let dir = TempDir::new("sentinel-binary");
    let conf = dir.0.join("sentinel.conf");
    std::fs::write(&conf, "# a comment the rewrite keeps\n").unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_coordis-server"));
    command.arg(&conf).arg("--sentinel");
    let mut server = coordis::testing::ServerProcess::start(command).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(text(&c.command(&["ROLE"]).unwrap()), "*2\r\n$8\r\nsentinel\r\n*0\r\n");
    assert_eq!(
        text(
            &c.command(&["SENTINEL", "MONITOR", "m1", "127.0.0.1", "6390", "2"])
                .unwrap()
        ),
        "+OK\r\n"
    );
    assert_eq!(
        text(
            &c.command(&["SENTINEL", "SET", "m1", "down-after-milliseconds", "5000"])
                .unwrap()
        ),
        "+OK\r\n"
    );
    let file = std::fs::read_to_string(&conf).unwrap();
    assert!(file.starts_with("# a comment the rewrite keeps\n"), "{file}");
    for line in [
        "sentinel monitor m1 127.0.0.1 6390 2",
        "sentinel down-after-milliseconds m1 5000",
        "sentinel config-epoch m1 0",
    ] {
        assert!(file.lines().any(|l| l == line), "no '{line}' in:\n{file}");
    }
    let id = flat(&c.command(&["SENTINEL", "MYID"]).unwrap())[0].clone();
    assert!(file.contains(&format!("sentinel myid {id}")), "{file}");
    assert_eq!(text(&c.command(&["SENTINEL", "REMOVE", "m1"]).unwrap()), "+OK\r\n");
    assert!(!std::fs::read_to_string(&conf).unwrap().contains("m1"));
    c.send(&RawClient::encode(&[b"SHUTDOWN"])).unwrap();
    let status = server
        .wait_exit(Duration::from_secs(10))
        .unwrap()
        .expect("exited after SHUTDOWN");
    let log = server.stderr_text();
    assert!(status.success(), "{status:?}: {log}");
    // Redis's log lines, with a Sentinel's role letter.
    let monitor = log
        .lines()
        .find(|l| l.ends_with("# +monitor master m1 127.0.0.1 6390 quorum 2"))
        .unwrap_or_else(|| panic!("no +monitor line in:\n{log}"));
    assert!(monitor.starts_with(&format!("{}:X ", server.pid())), "{monitor}");
    // The id survives a restart: it is in the file.
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_coordis-server"));
    command.arg(&conf).arg("--sentinel");
    let server = coordis::testing::ServerProcess::start(command).unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    assert_eq!(flat(&c.command(&["SENTINEL", "MYID"]).unwrap())[0], id);
}

/// SENTINEL FAILOVER promotes a replica without asking anyone (a second
/// one while it runs is `-INPROG`), and the old primary, still alive, is
/// turned into a replica of the new one (`+convert-to-slave`).
#[test]
fn sentinel_failover_promotes_a_replica_and_converts_the_old_primary() {
    let Some(group) = Group::start() else { return };
    let dir = TempDir::new("sentinel-manual");
    let port = group.primary_port();
    let conf = sentinel_conf(&dir, "sentinel.conf", port, 1, 1000);
    let ours = Ours::start(&conf, None);
    let a = ours.addr();
    let mut c = RawClient::connect(a).unwrap();
    assert_eq!(
        text(&c.command(&["SENTINEL", "FAILOVER", "nope"]).unwrap()),
        "-ERR No such master with that name\r\n"
    );
    wait_until("the replicas are discovered", Duration::from_secs(30), || {
        let reps = replicas(a);
        reps.len() == 2 && reps.iter().all(|r| field(r, "master-link-status") == "ok")
    });
    let mut events = Events::subscribe(a);
    assert_eq!(
        text(&c.command(&["SENTINEL", "FAILOVER", "mymaster"]).unwrap()),
        "+OK\r\n"
    );
    assert_eq!(
        text(&c.command(&["SENTINEL", "FAILOVER", "mymaster"]).unwrap()),
        "-INPROG Failover already in progress\r\n"
    );
    let switch = events.wait_for("+switch-master", FAILOVER_WAIT, || {});
    let new_port: u16 = switch.split(' ').nth(5).unwrap().parse().unwrap();
    let old = group.primary.as_ref().unwrap().addr();
    let convert = events.wait_for("+convert-to-slave", FAILOVER_WAIT, || {});
    assert_eq!(
        convert,
        format!("+convert-to-slave slave 127.0.0.1:{port} 127.0.0.1 {port} @ mymaster 127.0.0.1 {new_port}")
    );
    let new = group
        .replicas
        .iter()
        .find(|r| r.addr().port() == new_port)
        .expect("a replica was promoted")
        .addr();
    assert_promoted(new, old);
    assert_eq!(text(&c.command(&["SENTINEL", "RESET", "mymaster"]).unwrap()), ":1\r\n");
    assert_eq!(text(&c.command(&["SENTINEL", "RESET", "nomatch*"]).unwrap()), ":0\r\n");
}

/// A real `redis-server --sentinel` watches a coordis primary with two
/// coordis replicas: it discovers the replicas from coordis's INFO, and
/// when the primary dies it promotes one and points the other at it, which
/// then streams the new primary's writes.
#[test]
fn a_real_sentinel_fails_over_a_coordis_primary_with_coordis_replicas() {
    let coordis = || {
        let mut builder = coordis::Server::builder();
        builder.config_mut().repl.diskless_sync_delay = 0;
        builder.start_blocking().unwrap()
    };
    let primary = coordis();
    let ours = [coordis(), coordis()];
    let port = primary.addr().port();
    for r in &ours {
        let reply = RawClient::connect(r.addr())
            .unwrap()
            .command(&["REPLICAOF", "127.0.0.1", &port.to_string()])
            .unwrap();
        assert_eq!(text(&reply), "+OK\r\n");
    }
    for r in &ours {
        wait_until("replica link up", Duration::from_secs(20), || {
            info(r.addr(), "replication").contains("master_link_status:up")
        });
    }
    let dir = TempDir::new("sentinel-real-on-coordis");
    let conf = sentinel_conf(&dir, "theirs.conf", port, 1, 1000);
    let Some(theirs) = RedisServer::start_with_config(&conf, &["--sentinel"]).unwrap() else {
        return;
    };
    let s = theirs.addr();
    wait_until("the Sentinel knows both replicas", FAILOVER_WAIT, || {
        let reps = replicas(s);
        reps.len() == 2 && reps.iter().all(|r| field(r, "master-link-status") == "ok")
    });
    let mut events = Events::subscribe(s);
    primary.control().primary_dies(false);
    let switch = events.wait_for("+switch-master", FAILOVER_WAIT, || {});
    assert!(
        switch.starts_with(&format!("+switch-master mymaster 127.0.0.1 {port} 127.0.0.1 ")),
        "{switch}"
    );
    let new_port: u16 = switch.split(' ').nth(5).unwrap().parse().unwrap();
    let (new, other): (Vec<_>, Vec<_>) = ours.iter().map(|r| r.addr()).partition(|a| a.port() == new_port);
    assert_eq!((new.len(), other.len()), (1, 1), "{switch}");
    assert_promoted(new[0], other[0]);
    assert_eq!(master_addr(s), ["127.0.0.1".to_string(), new_port.to_string()]);
    let mut c = RawClient::connect(new[0]).unwrap();
    assert_eq!(text(&c.command(&["SET", "after", "failover"]).unwrap()), "+OK\r\n");
    wait_until(
        "the other replica streams the new primary's write",
        FAILOVER_WAIT,
        || {
            RawClient::connect(other[0])
                .and_then(|mut c| c.command(&["GET", "after"]))
                .map(|r| text(&r) == "$8\r\nfailover\r\n")
                .unwrap_or(false)
        },
    );
}
