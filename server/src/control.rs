//! The test-control plane, Rust side: a server's handle on its test clock
//! ([`ServerClock`]), and the server-wide faults [`crate::Server`] exposes
//! (a stop-the-world pause, a restart that may lose the data, a staged
//! power loss, a slow or full disk under the append-only file). Moving the
//! clock through it settles the server before the call returns: every key
//! due by the new time has expired, in deadline order, with its `expired`
//! event, and every blocked client whose timeout passed has its reply. A test never sleeps after it. (The same controls
//! over the wire are `COORDIS.CLOCK`, `cmd/coordis.rs`.)
//!
//! A primary's replica links ([`ServerControl::pause_link`] and the rest,
//! over the wire `COORDIS.REPLICATION`): pause, delay (on the server clock),
//! cut, drop writes; the primary dies now, with or without having sent its
//! last writes; promote replica k. A test holds the exact window in which a
//! write is on the primary and not yet on a replica.
//!
//! A cluster node's slot moves ([`ServerControl::move_slot`], step by step
//! [`ServerControl::begin_move`], [`ServerControl::move_keys`],
//! [`ServerControl::finish_move`]; over the wire `COORDIS.CLUSTER`).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::engine::Engine;
use crate::protocol::Reply;
use crate::store::{Clock, VirtualClock};

/// The engine as the embedding API holds it.
pub(crate) type EngineRef = Arc<Mutex<Engine>>;

/// A handle on a running server's test controls (from
/// [`crate::Server::control`]): cheap to clone and to move into a task, for
/// the faults a test injects while its clients run.
#[derive(Clone, Debug)]
pub struct ServerControl {
    pub(crate) engine: EngineRef,
    pub(crate) clock: Option<Arc<VirtualClock>>,
}

impl ServerControl {
    /// A reader of the server's effects feed: from now on, every write's
    /// effect (what a replica or the append-only file would receive), in
    /// order, as Redis 7.0.15's replication stream carries it
    /// ([`crate::EffectReader::try_bytes`]). Recording costs nothing until
    /// the first reader; a dropped reader is forgotten.
    pub fn effects(&self) -> crate::EffectReader {
        self.engine.lock().subscribe_effects()
    }

    /// See [`crate::Server::pause`].
    pub fn pause(&self) {
        self.engine.lock().shared().set_frozen(true);
    }

    /// See [`crate::Server::resume`].
    pub fn resume(&self) {
        self.engine.lock().shared().set_frozen(false);
    }

    /// Plays the server down (`true`): every connection is dropped and new
    /// ones are closed at once, as clients see a server that is gone; `false`
    /// brings it back, data as it was. The port stays bound meanwhile.
    pub fn set_down(&self, down: bool) {
        self.dropping(|engine| engine.set_down(down));
    }

    /// See [`crate::Server::restart`].
    pub fn restart(&self, lose_data: bool) {
        self.dropping(|engine| engine.restart(lose_data));
    }

    /// A staged power loss: every connection is dropped, the append-only
    /// file is cut back to what `appendfsync` had made durable (with
    /// `lose`: to the writes older than that much server time), and the
    /// server restarts from its files (`COORDIS.SERVER CRASH`). Returns
    /// the incremental file's length kept, `None` without the file on.
    pub fn crash(&self, lose: Option<Duration>) -> Option<u64> {
        let lose_ms = lose.map(|d| d.as_millis().min(u64::MAX as u128) as u64);
        self.dropping(|engine| engine.crash(lose_ms))
    }

    /// A staged slow disk: from now on every fsync of the append-only file
    /// first waits `stall` of real time (`Duration::ZERO` ends it;
    /// `COORDIS.SERVER FSYNC-STALL`). Under `always` replies wait for it;
    /// under `everysec` writes are held back in memory meanwhile for up to
    /// 2 s (INFO `aof_buffer_length`, then `aof_delayed_fsync`), as Redis
    /// holds them behind a slow background fsync, and a [`Self::crash`] then
    /// loses them.
    pub fn stall_fsync(&self, stall: Duration) {
        let ms = stall.as_millis().min(u64::MAX as u128) as u64;
        self.engine.lock().shared().aof.stall_fsync(ms);
    }

    /// A staged full disk (`on`), or its end (`COORDIS.SERVER DISK-FULL`):
    /// meanwhile every write and fsync of the append-only file fails with
    /// ENOSPC, as Redis's on a full disk. Under `everysec` and `no` the
    /// writes are kept in memory and retried every second, and writes and
    /// PING are refused with `-MISCONF Errors writing to the AOF file: No
    /// space left on device` until a write succeeds; under `always` the
    /// server stops (Redis exits), its clients' connections dropped.
    pub fn disk_full(&self, on: bool) {
        self.engine.lock().shared().aof.stage_disk_full(on);
    }

    /// Runs `f`, which drops connections, on the engine; then, the lock
    /// released, waits until their sockets are closed, so that when the
    /// call returns every client sees the drop (as when a process dies).
    fn dropping<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        let (result, killed) = {
            let mut engine = self.engine.lock();
            let result = f(&mut engine);
            (result, engine.take_killed())
        };
        crate::net::clients::wait_gone_blocking(&killed);
        result
    }

    /// Adds a fault rule ([`crate::FaultRule`]); returns its id.
    pub fn add_fault(&self, rule: crate::FaultRule) -> u64 {
        self.engine.lock().add_fault(rule)
    }

    /// Removes fault rule `id`; false if there was none. Clients a hang
    /// rule held go on once no hang rule is left.
    pub fn remove_fault(&self, id: u64) -> bool {
        self.engine.lock().remove_faults(Some(id))
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.engine.lock().remove_faults(None);
    }

    /// The rules with their match and fire counts.
    pub fn faults(&self) -> Vec<crate::FaultEntry> {
        self.engine.lock().fault_list()
    }

    /// Seeds the generator fault probabilities draw from.
    pub fn seed_faults(&self, seed: u64) {
        self.engine.lock().seed_faults(seed);
    }

    /// Seeds every random choice the server makes (SPOP, SRANDMEMBER,
    /// ZRANDMEMBER, HRANDFIELD, RANDOMKEY, eviction's sampling), for
    /// clients' commands and these controls alike: the same seed and the
    /// same commands give the same answers, so a test using them replays.
    pub fn seed_random(&self, seed: u64) {
        self.engine.lock().seed_random(seed);
    }

    fn memory(&self, args: &[&[u8]]) -> Reply {
        let mut all: Vec<bytes::Bytes> = vec![bytes::Bytes::from_static(b"COORDIS.MEMORY")];
        all.extend(args.iter().map(|a| bytes::Bytes::copy_from_slice(a)));
        self.engine.lock().run_internal(0, &all)
    }

    /// Sets `maxmemory` (0: no limit) and `maxmemory-policy` (its directive
    /// text, `allkeys-lru`...) for a test, as CONFIG SET does: a limit below
    /// the memory in use evicts before this returns (`COORDIS.MEMORY LIMIT`).
    pub fn set_memory_limit(&self, bytes: u64, policy: &str) -> Result<(), String> {
        match self.memory(&[b"LIMIT", bytes.to_string().as_bytes(), b"POLICY", policy.as_bytes()]) {
            Reply::Error(e) => Err(e.into_owned()),
            _ => Ok(()),
        }
    }

    /// The bytes counted against `maxmemory` now (`COORDIS.MEMORY USED`).
    pub fn used_memory(&self) -> u64 {
        match self.memory(&[b"USED"]) {
            Reply::Int(n) => n as u64,
            _ => 0,
        }
    }

    /// Adds string keys `fill:<n>` of `value_size` bytes until `percent` of
    /// `maxmemory` is in use, without evicting; returns the keys added
    /// (`COORDIS.MEMORY FILL`). Needs a limit set.
    pub fn fill_memory(&self, percent: u64, value_size: usize) -> Result<u64, String> {
        match self.memory(&[
            b"FILL",
            percent.to_string().as_bytes(),
            b"SIZE",
            value_size.to_string().as_bytes(),
        ]) {
            Reply::Int(n) => Ok(n as u64),
            Reply::Error(e) => Err(e.into_owned()),
            _ => Ok(0),
        }
    }

    /// The keys the next eviction would take, best first, as (database,
    /// key): one round of the sampler into the eviction pool, from the
    /// seeded generator when [`ServerControl::seed_random`] set one
    /// (`COORDIS.MEMORY CANDIDATES`). The first is the key the next
    /// eviction takes; the rest are the pool it leaves, which later
    /// evictions of the same run refill. Asking draws nothing and leaves
    /// the pool as it was: the eviction that follows sees the same samples.
    pub fn eviction_candidates(&self, count: usize) -> Vec<(usize, Vec<u8>)> {
        let Reply::Array(items) = self.memory(&[b"CANDIDATES", count.to_string().as_bytes()]) else {
            return Vec::new();
        };
        items
            .into_iter()
            .filter_map(|item| match item {
                Reply::Array(pair) => match pair.as_slice() {
                    [Reply::Int(db), Reply::Bulk(key)] => Some((*db as usize, key.to_vec())),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    /// See [`crate::Server::clock`].
    pub fn clock(&self) -> Option<ServerClock> {
        Some(ServerClock {
            clock: self.clock.clone()?,
            engine: self.engine.clone(),
        })
    }
}

/// One replica link of a primary, as [`ServerControl::replica_links`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaLink {
    /// The replica's address: the one it announced (or its peer's) and its
    /// listening port, as INFO's `slave<k>` line.
    pub ip: String,
    /// Its listening port (REPLCONF listening-port).
    pub port: u16,
    /// `wait_bgsave`, `send_bulk` or `online`.
    pub state: String,
    /// The offset it acknowledged last.
    pub acked: u64,
    /// The offset of the last stream byte written to it.
    pub sent: u64,
    /// [`ServerControl::pause_link`] holds it.
    pub paused: bool,
    /// [`ServerControl::delay_link`]'s delay (0: none).
    pub delay_ms: u64,
    /// Writes it will still leave out.
    pub writes_to_drop: u64,
}

/// How long [`ServerControl::primary_dies`] waits for its links to write
/// their last bytes and close.
const DIE_DRAIN_WAIT: Duration = Duration::from_secs(5);

/// How long [`ServerControl::promote_replica`] gives the replica to answer.
const PROMOTE_WAIT: Duration = Duration::from_secs(5);

impl ServerControl {
    fn replication(&self, args: &[&[u8]]) -> Result<Reply, String> {
        let mut all: Vec<bytes::Bytes> = vec![bytes::Bytes::from_static(b"COORDIS.REPLICATION")];
        all.extend(args.iter().map(|a| bytes::Bytes::copy_from_slice(a)));
        match self.engine.lock().run_internal(0, &all) {
            Reply::Error(e) => Err(e.into_owned()),
            reply => Ok(reply),
        }
    }

    fn link_fault(&self, what: &str, k: usize, arg: Option<u64>) -> Result<(), String> {
        let k = k.to_string();
        let arg = arg.map(|a| a.to_string());
        let mut args: Vec<&[u8]> = vec![what.as_bytes(), k.as_bytes()];
        if let Some(a) = &arg {
            args.push(a.as_bytes());
        }
        self.replication(&args).map(|_| ())
    }

    /// This primary's replica links, in the order they connected (link
    /// `k` below is the `k`-th of them, INFO's `slave<k>`).
    pub fn replica_links(&self) -> Vec<ReplicaLink> {
        let Ok(Reply::Array(rows)) = self.replication(&[b"LINKS"]) else {
            return Vec::new();
        };
        let text = |r: &Reply| match r {
            Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            Reply::Status(s) => s.to_string(),
            _ => String::new(),
        };
        let int = |r: &Reply| match r {
            Reply::Int(n) => *n as u64,
            _ => 0,
        };
        rows.iter()
            .filter_map(|row| match row {
                Reply::Array(f) if f.len() == 8 => Some(ReplicaLink {
                    ip: text(&f[0]),
                    port: int(&f[1]) as u16,
                    state: text(&f[2]),
                    acked: int(&f[3]),
                    sent: int(&f[4]),
                    paused: int(&f[5]) != 0,
                    delay_ms: int(&f[6]),
                    writes_to_drop: int(&f[7]),
                }),
                _ => None,
            })
            .collect()
    }

    /// Link `k` writes nothing of the stream from now on (the writes wait
    /// in the backlog; WAIT counts the replica only for what it had) until
    /// [`ServerControl::resume_link`] (`COORDIS.REPLICATION PAUSE k`).
    pub fn pause_link(&self, k: usize) -> Result<(), String> {
        self.link_fault("PAUSE", k, None)
    }

    /// Lifts link `k`'s pause and delay: what waited goes out at once.
    pub fn resume_link(&self, k: usize) -> Result<(), String> {
        self.link_fault("RESUME", k, None)
    }

    /// From now on link `k` writes each byte `by` of server clock after it
    /// was published (zero: no delay); moving the test clock releases them.
    pub fn delay_link(&self, k: usize, by: Duration) -> Result<(), String> {
        self.link_fault("DELAY", k, Some(by.as_millis().min(u64::MAX as u128) as u64))
    }

    /// Closes link `k`: the replica reconnects and resyncs partially.
    pub fn cut_link(&self, k: usize) -> Result<(), String> {
        self.link_fault("CUT", k, None)
    }

    /// Link `k` leaves out the next `n` writes: the replica never gets
    /// them (and never acknowledges this primary's offset again).
    pub fn drop_writes(&self, k: usize, n: u64) -> Result<(), String> {
        self.link_fault("DROP", k, Some(n))
    }

    /// The primary dies now: every connection is dropped and new ones are
    /// closed (as [`ServerControl::set_down`]; `set_down(false)` brings it
    /// back, data as it was). With `sent_last` each link first writes
    /// everything the primary had published (a paused or delayed one too);
    /// without, what a link had not written yet is lost with it. Returns
    /// once the links are closed.
    pub fn primary_dies(&self, sent_last: bool) {
        let how: &[u8] = if sent_last { b"SENT" } else { b"UNSENT" };
        let mut all: Vec<bytes::Bytes> = vec![bytes::Bytes::from_static(b"COORDIS.REPLICATION"), "DIE".into()];
        all.push(bytes::Bytes::copy_from_slice(how));
        self.dropping(|engine| engine.run_internal(0, &all));
        let started = std::time::Instant::now();
        while !self.replica_links().is_empty() && started.elapsed() < DIE_DRAIN_WAIT {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Promotes replica `k` (sends it `REPLICAOF NO ONE`, blocking until it
    /// answered; call it from a test's thread, not from the server's
    /// runtime). Works after [`ServerControl::primary_dies`] too; returns
    /// the replica's address.
    pub fn promote_replica(&self, k: usize) -> Result<std::net::SocketAddr, String> {
        let found = self.engine.lock().replica_address(k);
        let (ip, port) = found.ok_or_else(|| crate::errors::NO_SUCH_LINK.to_string())?;
        self.promote_at(&ip, port as u16)
    }

    fn promote_at(&self, ip: &str, port: u16) -> Result<std::net::SocketAddr, String> {
        use std::io::{Read, Write};
        let addr: std::net::SocketAddr = format!("{ip}:{port}").parse().map_err(|e| format!("{e}"))?;
        let mut s = std::net::TcpStream::connect_timeout(&addr, PROMOTE_WAIT).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(PROMOTE_WAIT)).map_err(|e| e.to_string())?;
        s.write_all(&crate::replica::link::encode(&[b"REPLICAOF", b"NO", b"ONE"]))
            .map_err(|e| e.to_string())?;
        let mut reply = [0u8; 256];
        let n = s.read(&mut reply).map_err(|e| e.to_string())?;
        match &reply[..n] {
            b"+OK\r\n" => Ok(addr),
            other => Err(String::from_utf8_lossy(other).into_owned()),
        }
    }
}

/// A cluster node's slot moves (over the wire `COORDIS.CLUSTER`): sent to
/// the slot's owner, each is what `redis-cli --cluster reshard` does to move
/// a slot, so a test can hold a slot half moved (IMPORTING on the target,
/// MIGRATING here, some keys on each side) and watch its clients meet
/// `-ASK` and `-TRYAGAIN`. Each call blocks until the target answered:
/// call them from a test's thread, not from the server's runtime.
impl ServerControl {
    fn cluster_control(&self, args: &[&[u8]]) -> Result<Reply, String> {
        let mut all: Vec<bytes::Bytes> = vec![bytes::Bytes::from_static(b"COORDIS.CLUSTER")];
        all.extend(args.iter().map(|a| bytes::Bytes::copy_from_slice(a)));
        match self.engine.lock().run_internal(0, &all) {
            Reply::Error(e) => Err(e.into_owned()),
            reply => Ok(reply),
        }
    }

    /// Moves `slot` and its keys from this node to primary `node_id` now.
    pub fn move_slot(&self, slot: u16, node_id: &str) -> Result<(), String> {
        let slot = slot.to_string();
        self.cluster_control(&[b"MOVESLOT", slot.as_bytes(), node_id.as_bytes()])
            .map(|_| ())
    }

    /// Opens the move of `slot` to primary `node_id`: the target imports
    /// it, this node marks it migrating; its keys stay here until
    /// [`ServerControl::move_keys`] or [`ServerControl::finish_move`].
    pub fn begin_move(&self, slot: u16, node_id: &str) -> Result<(), String> {
        let slot = slot.to_string();
        self.cluster_control(&[b"BEGINMOVE", slot.as_bytes(), node_id.as_bytes()])
            .map(|_| ())
    }

    /// Migrates up to `count` keys of the migrating `slot` to its target;
    /// how many moved.
    pub fn move_keys(&self, slot: u16, count: usize) -> Result<usize, String> {
        let (slot, count) = (slot.to_string(), count.to_string());
        match self.cluster_control(&[b"MOVEKEYS", slot.as_bytes(), count.as_bytes()])? {
            Reply::Int(n) => Ok(n as usize),
            other => Err(format!("unexpected reply {other:?}")),
        }
    }

    /// Moves the migrating `slot`'s other keys and gives the slot to its
    /// target (on the target, here and on the other primaries).
    pub fn finish_move(&self, slot: u16) -> Result<(), String> {
        let slot = slot.to_string();
        self.cluster_control(&[b"FINISHMOVE", slot.as_bytes()]).map(|_| ())
    }

    /// Partitions this node from the nodes `node_ids` on the cluster bus,
    /// both ways (clients still reach every node): on the cluster's clock,
    /// each side then fails the other as across a network split.
    pub fn partition(&self, node_ids: &[&str]) -> Result<(), String> {
        let mut args: Vec<&[u8]> = vec![b"PARTITION"];
        args.extend(node_ids.iter().map(|id| id.as_bytes()));
        self.cluster_control(&args).map(|_| ())
    }

    /// Ends [`ServerControl::partition`] for `node_ids` (every node, with
    /// none named).
    pub fn heal(&self, node_ids: &[&str]) -> Result<(), String> {
        let mut args: Vec<&[u8]> = vec![b"HEAL"];
        args.extend(node_ids.iter().map(|id| id.as_bytes()));
        self.cluster_control(&args).map(|_| ())
    }
}

/// A server's test clock ([`crate::Server::clock`]). Each move settles the
/// server at once (see the module docs); a clock shared by several servers
/// ([`crate::Builder::virtual_clock`]) settles the others on their own timer
/// shortly after, or on their next access to a key.
///
/// ```
/// use std::time::Duration;
/// let server = coordis::Server::builder().start_blocking()?;
/// let clock = server.clock().expect("the default clock is virtual");
/// clock.freeze();
/// // ... SET lock owner PX 30000 ...
/// clock.advance(Duration::from_secs(31)); // the lock has expired, its event is out
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ServerClock {
    clock: Arc<VirtualClock>,
    engine: EngineRef,
}

impl ServerClock {
    /// The server's time, unix ms.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Moves the clock forward by `by` (frozen or running) and settles.
    pub fn advance(&self, by: Duration) {
        self.clock.advance_ms(by.as_millis().min(u64::MAX as u128) as u64);
        self.settle();
    }

    /// Steps the clock by `ms`, forwards or backwards (a wall-clock jump),
    /// and settles.
    pub fn jump_ms(&self, ms: i64) {
        self.clock.jump_ms(ms);
        self.settle();
    }

    /// Sets the clock to `unix_ms` and settles.
    pub fn set_ms(&self, unix_ms: u64) {
        self.clock.set_ms(unix_ms);
        self.settle();
    }

    /// Stops the clock where it stands: nothing expires until it moves.
    pub fn freeze(&self) {
        self.clock.freeze();
    }

    /// Lets a frozen clock run on from where it stands.
    pub fn resume(&self) {
        self.clock.resume();
        self.settle();
    }

    /// Back to real time, and settles.
    pub fn reset(&self) {
        self.clock.reset();
        self.settle();
    }

    /// The clock itself (to share it with another server's builder).
    pub fn virtual_clock(&self) -> Arc<VirtualClock> {
        self.clock.clone()
    }

    /// Brings the server up to its clock (see the module docs).
    pub fn settle(&self) {
        self.engine.lock().settle();
    }
}

/// One key's value, read from the keyspace ([`Keyspace::get`]). Sets are
/// sorted (their order is the server's own business); the other types keep
/// the order Redis gives them.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyValue {
    /// A string's bytes.
    String(bytes::Bytes),
    /// A list's elements, head first.
    List(Vec<bytes::Bytes>),
    /// A set's members, sorted.
    Set(Vec<bytes::Bytes>),
    /// A hash's field-value pairs, in HGETALL order.
    Hash(Vec<(bytes::Bytes, bytes::Bytes)>),
    /// A sorted set's members with their scores, lowest score first.
    ZSet(Vec<(bytes::Bytes, f64)>),
    /// Entries in ID order: the ID (`ms-seq`) and the field-value pairs.
    Stream(Vec<(String, Vec<(bytes::Bytes, bytes::Bytes)>)>),
}

/// Direct access to a running server's keyspace from the test, without a
/// client (from [`ServerControl::keyspace`]): read and write keys and TTLs,
/// list keys, dump the whole database as a readable table for assertion
/// messages, and load fixtures. Reads are reads as a client's (lazy expiry
/// applies); writes are writes (WATCH, keyspace events, blocked clients
/// served).
#[derive(Clone, Debug)]
pub struct Keyspace {
    engine: EngineRef,
    db: usize,
}

impl ServerControl {
    /// Database 0 of the keyspace; [`Keyspace::db`] picks another.
    pub fn keyspace(&self) -> Keyspace {
        Keyspace {
            engine: self.engine.clone(),
            db: 0,
        }
    }
}

fn bulk_of(reply: &Reply) -> Option<bytes::Bytes> {
    match reply {
        Reply::Bulk(b) => Some(b.clone()),
        Reply::Status(s) => Some(bytes::Bytes::copy_from_slice(s.as_bytes())),
        _ => None,
    }
}

impl Keyspace {
    /// The same access to database `n`.
    pub fn db(mut self, n: usize) -> Keyspace {
        self.db = n;
        self
    }

    fn run(&self, args: &[&[u8]]) -> Reply {
        let args: Vec<bytes::Bytes> = args.iter().map(|a| bytes::Bytes::copy_from_slice(a)).collect();
        self.engine.lock().run_internal(self.db, &args)
    }

    /// The key's type as TYPE names it; `None` when it does not exist.
    pub fn type_of(&self, key: &str) -> Option<String> {
        match self.run(&[b"TYPE", key.as_bytes()]) {
            Reply::Status(t) if t != "none" => Some(t.into_owned()),
            _ => None,
        }
    }

    /// The key's value, whatever its type; `None` when it does not exist.
    pub fn get(&self, key: &str) -> Option<KeyValue> {
        let k = key.as_bytes();
        let items = |reply: Reply| match reply {
            Reply::Array(v) | Reply::Set(v) => v.iter().filter_map(bulk_of).collect::<Vec<_>>(),
            _ => vec![],
        };
        Some(match self.type_of(key)?.as_str() {
            "string" => KeyValue::String(bulk_of(&self.run(&[b"GET", k]))?),
            "list" => KeyValue::List(items(self.run(&[b"LRANGE", k, b"0", b"-1"]))),
            "set" => {
                let mut members = items(self.run(&[b"SMEMBERS", k]));
                members.sort();
                KeyValue::Set(members)
            }
            "hash" => match self.run(&[b"HGETALL", k]) {
                Reply::Map(pairs) => KeyValue::Hash(
                    pairs
                        .iter()
                        .filter_map(|(f, v)| Some((bulk_of(f)?, bulk_of(v)?)))
                        .collect(),
                ),
                _ => KeyValue::Hash(vec![]),
            },
            "zset" => match self.run(&[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"]) {
                Reply::ScorePairs(pairs) => KeyValue::ZSet(pairs),
                Reply::Array(pairs) => KeyValue::ZSet(
                    pairs
                        .iter()
                        .filter_map(|p| match p {
                            Reply::Array(mv) => match mv.as_slice() {
                                [m, Reply::Double(s)] => Some((bulk_of(m)?, *s)),
                                _ => None,
                            },
                            _ => None,
                        })
                        .collect(),
                ),
                _ => KeyValue::ZSet(vec![]),
            },
            "stream" => match self.run(&[b"XRANGE", k, b"-", b"+"]) {
                Reply::Array(entries) => KeyValue::Stream(
                    entries
                        .iter()
                        .filter_map(|e| match e {
                            Reply::Array(parts) => match parts.as_slice() {
                                [id, Reply::Array(fields)] => Some((
                                    String::from_utf8_lossy(&bulk_of(id)?).into_owned(),
                                    fields
                                        .chunks(2)
                                        .filter_map(|fv| Some((bulk_of(&fv[0])?, bulk_of(fv.get(1)?)?)))
                                        .collect(),
                                )),
                                _ => None,
                            },
                            _ => None,
                        })
                        .collect(),
                ),
                _ => KeyValue::Stream(vec![]),
            },
            _ => return None,
        })
    }

    /// The key's remaining time to live: `None` when the key does not exist,
    /// `Some(None)` when it has no deadline.
    pub fn ttl(&self, key: &str) -> Option<Option<Duration>> {
        match self.run(&[b"PTTL", key.as_bytes()]) {
            Reply::Int(-2) => None,
            Reply::Int(ms) if ms >= 0 => Some(Some(Duration::from_millis(ms as u64))),
            _ => Some(None),
        }
    }

    /// Sets a string key, with a time to live if given.
    pub fn set(&self, key: &str, value: &str, ttl: Option<Duration>) {
        let ms = ttl.map(|t| t.as_millis().max(1).to_string());
        match &ms {
            Some(ms) => self.run(&[b"SET", key.as_bytes(), value.as_bytes(), b"PX", ms.as_bytes()]),
            None => self.run(&[b"SET", key.as_bytes(), value.as_bytes()]),
        };
    }

    /// Deletes a key; whether it existed.
    pub fn delete(&self, key: &str) -> bool {
        matches!(self.run(&[b"DEL", key.as_bytes()]), Reply::Int(1))
    }

    /// Every key of the database, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = match self.run(&[b"KEYS", b"*"]) {
            Reply::Array(v) => v
                .iter()
                .filter_map(bulk_of)
                .map(|k| String::from_utf8_lossy(&k).into_owned())
                .collect(),
            _ => vec![],
        };
        keys.sort();
        keys
    }

    /// The database as a readable table (key, type, TTL, value), one key a
    /// line, sorted: for assertion messages.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for key in self.keys() {
            let Some(value) = self.get(&key) else { continue };
            let ttl = match self.ttl(&key) {
                Some(Some(t)) => format!("{}ms", t.as_millis()),
                _ => "-".to_string(),
            };
            let text = |b: &bytes::Bytes| format!("{:?}", String::from_utf8_lossy(b));
            let (kind, shown) = match &value {
                KeyValue::String(s) => ("string", text(s)),
                KeyValue::List(v) => (
                    "list",
                    format!("[{}]", v.iter().map(text).collect::<Vec<_>>().join(", ")),
                ),
                KeyValue::Set(v) => (
                    "set",
                    format!("{{{}}}", v.iter().map(text).collect::<Vec<_>>().join(", ")),
                ),
                KeyValue::Hash(v) => (
                    "hash",
                    format!(
                        "{{{}}}",
                        v.iter()
                            .map(|(f, x)| format!("{}: {}", text(f), text(x)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
                KeyValue::ZSet(v) => (
                    "zset",
                    format!(
                        "[{}]",
                        v.iter()
                            .map(|(m, s)| format!("{}: {s}", text(m)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
                KeyValue::Stream(v) => (
                    "stream",
                    format!(
                        "[{}]",
                        v.iter()
                            .map(|(id, fields)| {
                                let fields: Vec<String> = fields
                                    .iter()
                                    .map(|(f, x)| format!("{}: {}", text(f), text(x)))
                                    .collect();
                                format!("{id} {{{}}}", fields.join(", "))
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
            };
            out.push_str(&format!("{key:<24} {kind:<6} {ttl:>10}  {shown}\n"));
        }
        out
    }

    /// Loads a fixture: one command per line as redis-cli quotes them (`#`
    /// comments and blank lines skipped), run in order. The first error
    /// reply stops it, naming the line.
    pub fn load(&self, fixture: &str) -> Result<(), String> {
        for (n, line) in fixture.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let args = crate::protocol::split_args(line.as_bytes())
                .ok_or_else(|| format!("line {}: unbalanced quotes: {line}", n + 1))?;
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            if let Reply::Error(e) = self.run(&args) {
                return Err(format!("line {}: {line}: {e}", n + 1));
            }
        }
        Ok(())
    }
}
