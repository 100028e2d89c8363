//! MIGRATE and RESTORE-ASKING as Redis 7.0.15's `cluster.c`: the keys'
//! DUMP payloads sent to another server as RESTORE (RESTORE-ASKING in
//! cluster mode), the local keys deleted once the target acknowledged
//! them, and the cache of connections to targets (`migrate_cached_sockets`).
//!
//! MIGRATE is the one handler that does network I/O: like Redis, it talks
//! to the target synchronously while it holds the keyspace, so no other
//! command sees a key half moved (the engine lock is held; the tokio worker
//! is handed over with `block_in_place`, so other connections' tasks go on
//! running on another thread and wait only for the lock). Every wait is
//! bounded by the command's timeout. It never blocks on anything else.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;

use super::args::{int, is};
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::notify;
use crate::protocol::Reply;
use crate::tri;

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    command!("generic", "migrate", -6, WRITE | MOVABLEKEYS | MIGRATES_KEYS, acl::KEYSPACE | acl::DANGEROUS, "Atomically transfer a key from a Redis instance to another one.", migrate).keys_by(super::keyspecs::migrate_keys).redacts(migrate_redacts),
    command!("server", "restore-asking", -4, WRITE | DENYOOM | ASKING, acl::KEYSPACE | acl::DANGEROUS, "An internal command for migrating keys in a cluster", super::keys::restore),
];

/// MIGRATE's slow-log entries hide AUTH's password and AUTH2's user name
/// and password (Redis's `migrateCommand`), up to KEYS.
fn migrate_redacts(args: &[Bytes], i: usize) -> bool {
    let mut j = 6;
    while j < args.len() {
        let a = &args[j];
        if a.eq_ignore_ascii_case(b"keys") {
            return false;
        }
        let skip = if a.eq_ignore_ascii_case(b"auth") {
            1
        } else if a.eq_ignore_ascii_case(b"auth2") {
            2
        } else {
            0
        };
        if (j + 1..=j + skip).contains(&i) && i < args.len() {
            return true;
        }
        j += skip + 1;
    }
    false
}

/// How many target connections are kept (Redis's
/// `MIGRATE_SOCKET_CACHE_ITEMS`); past it a random one is closed.
const CACHE_ITEMS: usize = 64;
/// A cached connection unused for longer than this is closed (Redis's
/// `MIGRATE_SOCKET_CACHE_TTL`, seconds on the server clock).
const CACHE_TTL_SECS: u64 = 10;
/// The query goes out in chunks of this size, each with its own timeout
/// (Redis writes 64 KiB at a time).
const WRITE_CHUNK: usize = 64 * 1024;
/// The longest reply line read from the target (Redis reads into a
/// 1024-byte buffer, its last byte the terminator).
const LINE_MAX: usize = 1023;
/// A timeout of 0 or less means this many milliseconds (Redis's default).
const DEFAULT_TIMEOUT_MS: u64 = 1000;

/// A connection to a target, kept between MIGRATEs.
struct Cached {
    /// Buffered for reading the target's reply lines; written through
    /// `get_mut`.
    conn: BufReader<TcpStream>,
    /// The database last SELECTed on it (`None`: unknown, so the next
    /// MIGRATE sends SELECT), as Redis's `last_dbid`.
    last_db: Option<i64>,
    /// Unix seconds of its last use, for [`CACHE_TTL_SECS`].
    last_use: u64,
}

/// The cached connections, by the `host:port` text MIGRATE named.
#[derive(Default)]
pub(crate) struct Sockets {
    by_target: HashMap<String, Cached>,
}

impl std::fmt::Debug for Sockets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sockets")
            .field("cached", &self.by_target.len())
            .finish()
    }
}

impl Sockets {
    /// Closes the connections unused for longer than [`CACHE_TTL_SECS`]
    /// (Redis's `migrateCloseTimedoutSockets`, run by its cron; here
    /// whenever the cache is used or counted).
    pub(crate) fn close_timed_out(&mut self, now_secs: u64) {
        self.by_target
            .retain(|_, c| now_secs.saturating_sub(c.last_use) <= CACHE_TTL_SECS);
    }

    /// INFO's `migrate_cached_sockets`.
    pub(crate) fn count(&mut self, now_secs: u64) -> usize {
        self.close_timed_out(now_secs);
        self.by_target.len()
    }
}

/// How an exchange with the target failed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Failure {
    /// The timeout ran out (Redis's `ETIMEDOUT`: never retried).
    TimedOut,
    /// Anything else (a closed cached connection: retried once).
    Other,
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Failure::TimedOut,
            _ => Failure::Other,
        }
    }
}

/// The parsed options after `host port key db timeout`.
struct Options {
    copy: bool,
    replace: bool,
    /// AUTH's password, or AUTH2's user and password.
    auth: Option<(Option<Bytes>, Bytes)>,
    /// Where the keys are in the arguments.
    keys: std::ops::Range<usize>,
}

fn parse(args: &[Bytes]) -> Result<Options, Reply> {
    let mut o = Options {
        copy: false,
        replace: false,
        auth: None,
        keys: 3..4,
    };
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(&args[j], "copy") {
            o.copy = true;
        } else if is(&args[j], "replace") {
            o.replace = true;
        } else if is(&args[j], "auth") {
            if more == 0 {
                return Err(err(errors::SYNTAX));
            }
            o.auth = Some((None, args[j + 1].clone()));
            j += 1;
        } else if is(&args[j], "auth2") {
            if more < 2 {
                return Err(err(errors::SYNTAX));
            }
            o.auth = Some((Some(args[j + 1].clone()), args[j + 2].clone()));
            j += 2;
        } else if is(&args[j], "keys") {
            if !args[3].is_empty() {
                return Err(err(errors::MIGRATE_KEYS_WITH_KEY));
            }
            o.keys = j + 1..args.len();
            break;
        } else {
            return Err(err(errors::SYNTAX));
        }
        j += 1;
    }
    Ok(o)
}

/// Appends one RESP bulk string.
fn bulk(out: &mut Vec<u8>, arg: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
    out.extend_from_slice(arg);
    out.extend_from_slice(b"\r\n");
}

/// Reads one reply line as Redis's `syncReadLine`: up to [`LINE_MAX`]
/// bytes or the newline, the `\r\n` removed; an empty line is a failure.
fn read_line(conn: &mut BufReader<TcpStream>) -> Result<Vec<u8>, Failure> {
    let mut line = Vec::new();
    let mut limited = conn.by_ref().take(LINE_MAX as u64);
    limited.read_until(b'\n', &mut line)?;
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    } else if line.len() < LINE_MAX {
        // The connection closed before the line ended.
        return Err(Failure::Other);
    }
    if line.is_empty() {
        return Err(Failure::Other);
    }
    Ok(line)
}

/// How opening a connection to a target went.
enum Connect {
    Open(TcpStream),
    /// Refused. Redis connects without blocking and waits until the socket
    /// is writable, which a refused one is too: it finds out on the write
    /// (`IOERR ... writing`), so this is treated as a connection whose
    /// first write fails.
    Refused,
    /// No address, or no answer within the timeout (`IOERR ... connecting`).
    Failed,
}

/// Opens a connection to `host:port` within `timeout`.
fn connect(host: &[u8], port: &[u8], timeout: Duration) -> Connect {
    let Some(addr) = std::str::from_utf8(host).ok().and_then(|host| {
        // Redis reads the port with atoi: what it cannot read is port 0.
        let port = crate::store::num::parse_i64(port)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(0);
        (host, port).to_socket_addrs().ok()?.next()
    }) else {
        return Connect::Failed;
    };
    match TcpStream::connect_timeout(&addr, timeout) {
        Ok(stream) => {
            let _ = stream.set_nodelay(true);
            Connect::Open(stream)
        }
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Connect::Refused,
        Err(_) => Connect::Failed,
    }
}

/// Runs `f` where blocking is allowed: on a multi-threaded runtime the
/// worker's other tasks move to another thread first.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw | AUTH2
/// user pw] [KEYS key ...]
pub(crate) fn migrate(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let options = tri!(parse(args));
    let timeout = tri!(int(&args[5]));
    let db = tri!(int(&args[4]));
    let timeout = Duration::from_millis(if timeout <= 0 {
        DEFAULT_TIMEOUT_MS
    } else {
        timeout as u64
    });
    // The keys here; none at all is `+NOKEY` (often a key that expired).
    let mut keys: Vec<Bytes> = args[options.keys.clone()]
        .iter()
        .filter(|k| ctx.lookup_read(k).is_some())
        .cloned()
        .collect();
    if keys.is_empty() {
        return Reply::Status(errors::MIGRATE_NOKEY.into());
    }
    let restore: &[u8] = if ctx.server.cluster.is_some() {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    // The keys' payloads, serialized once: the keyspace does not change
    // while the lock is held, so a retry sends the same values. Their TTLs
    // are not: as Redis does, each attempt sends the time left on a clock
    // read once connected, so a slow connect (or a retry) does not move the
    // deadline on the target.
    let now = ctx.now;
    let compress = ctx.server.config.rdb_compression;
    let encodings = crate::persist::rdb::value::Encodings::of(&ctx.server.config);
    let mut payloads = Vec::with_capacity(keys.len());
    keys.retain(|key| {
        let Some(entry) = ctx.dbs[ctx.client.db].lookup(key, now) else {
            return false;
        };
        if entry.expire_at != 0 && entry.expire_at < now {
            return false;
        }
        let mut out = crate::persist::rdb::Out::new(compress);
        if crate::persist::rdb::value::write(&mut out, entry.value, &encodings).is_err() {
            return false;
        }
        payloads.push(Payload {
            expire_at: entry.expire_at,
            dump: crate::persist::rdb::payload::seal(out.buf),
        });
        true
    });
    let restore = Restores {
        command: restore,
        keys: &keys,
        payloads: &payloads,
        replace: options.replace,
        clock: ctx.server.clock.clone(),
    };
    let target = format!(
        "{}:{}",
        String::from_utf8_lossy(&args[1]),
        String::from_utf8_lossy(&args[2])
    );
    let now_secs = now / 1000;
    let mut sockets = std::mem::take(&mut ctx.server.migrate_sockets);
    sockets.close_timed_out(now_secs);
    let outcome = blocking(|| {
        exchange(
            &mut sockets,
            &target,
            (&args[1], &args[2]),
            db,
            timeout,
            now_secs,
            &options,
            &restore,
        )
    });
    ctx.server.migrate_sockets = sockets;
    // The keys the target acknowledged are deleted here (unless COPY), and
    // the command's effect is their DEL.
    let acknowledged: Vec<Bytes> = outcome.acknowledged.iter().map(|&i| keys[i].clone()).collect();
    if !options.copy && !acknowledged.is_empty() {
        for key in &acknowledged {
            ctx.db().remove(key);
            ctx.dirty(1);
            ctx.notify(notify::GENERIC, "del", key);
        }
        ctx.propagate_as(|| {
            let mut del = vec![Bytes::from_static(b"DEL")];
            del.extend(acknowledged.iter().cloned());
            del
        });
    }
    outcome.reply
}

/// One key's value to send, serialized.
struct Payload {
    /// Its deadline (unix ms, 0: none), turned into the time left when the
    /// RESTORE is written.
    expire_at: u64,
    dump: Vec<u8>,
}

/// The RESTOREs of one MIGRATE, written anew for each attempt.
struct Restores<'a> {
    /// RESTORE, or RESTORE-ASKING in cluster mode.
    command: &'a [u8],
    keys: &'a [Bytes],
    payloads: &'a [Payload],
    replace: bool,
    clock: std::sync::Arc<dyn crate::store::Clock>,
}

impl Restores<'_> {
    /// Appends the RESTOREs with the TTLs left now (at least 1 ms, as
    /// Redis sends); the indexes of the keys sent (a key whose deadline
    /// passed since it was read is left out, as Redis leaves it).
    fn write(&self, query: &mut Vec<u8>) -> Vec<usize> {
        let now = self.clock.now_ms();
        let mut sent = Vec::with_capacity(self.keys.len());
        for (i, (key, payload)) in self.keys.iter().zip(self.payloads).enumerate() {
            let ttl = match payload.expire_at {
                0 => 0,
                at if at < now => continue,
                at => (at - now).max(1),
            };
            query.extend_from_slice(if self.replace { b"*5\r\n" } else { b"*4\r\n" });
            bulk(query, self.command);
            bulk(query, key);
            bulk(query, ttl.to_string().as_bytes());
            bulk(query, &payload.dump);
            if self.replace {
                bulk(query, b"REPLACE");
            }
            sent.push(i);
        }
        sent
    }
}

/// What an exchange with the target came to.
struct Outcome {
    reply: Reply,
    /// The keys (by index) the target restored.
    acknowledged: Vec<usize>,
}

/// Sends AUTH, SELECT and the RESTOREs on a cached or new connection and
/// reads the replies, retrying once on a fresh connection when a cached one
/// failed before anything was restored (Redis's `try_again`).
#[allow(clippy::too_many_arguments)]
fn exchange(
    sockets: &mut Sockets,
    target: &str,
    (host, port): (&[u8], &[u8]),
    db: i64,
    timeout: Duration,
    now_secs: u64,
    options: &Options,
    restores: &Restores<'_>,
) -> Outcome {
    let mut may_retry = true;
    loop {
        if !sockets.by_target.contains_key(target) {
            if sockets.by_target.len() >= CACHE_ITEMS {
                // Full: one goes, any one (Redis drops a random one).
                let victim = sockets.by_target.keys().next().cloned();
                if let Some(victim) = victim {
                    sockets.by_target.remove(&victim);
                }
            }
            let conn = match connect(host, port, timeout) {
                Connect::Open(conn) => conn,
                Connect::Refused if may_retry => {
                    may_retry = false;
                    continue;
                }
                Connect::Refused => {
                    return Outcome {
                        reply: err(errors::MIGRATE_WRITE_FAILED),
                        acknowledged: vec![],
                    }
                }
                Connect::Failed => {
                    return Outcome {
                        reply: err(errors::MIGRATE_CONNECT),
                        acknowledged: vec![],
                    }
                }
            };
            sockets.by_target.insert(
                target.to_string(),
                Cached {
                    conn: BufReader::new(conn),
                    last_db: None,
                    last_use: now_secs,
                },
            );
        }
        let cached = sockets.by_target.get_mut(target).expect("just cached");
        cached.last_use = now_secs;
        let mut query = Vec::new();
        if let Some((user, password)) = &options.auth {
            query.extend_from_slice(if user.is_some() { b"*3\r\n" } else { b"*2\r\n" });
            bulk(&mut query, b"AUTH");
            if let Some(user) = user {
                bulk(&mut query, user);
            }
            bulk(&mut query, password);
        }
        let select = cached.last_db != Some(db);
        if select {
            query.extend_from_slice(b"*2\r\n");
            bulk(&mut query, b"SELECT");
            bulk(&mut query, db.to_string().as_bytes());
        }
        let sent = restores.write(&mut query);
        let mut replied = vec![];
        let result = talk(
            cached,
            &query,
            timeout,
            options.auth.is_some(),
            select,
            sent.len(),
            &mut replied,
        );
        let acknowledged: Vec<usize> = replied.into_iter().map(|i| sent[i]).collect();
        let (failure, writing) = match result {
            Talk::Done => {
                cached.last_db = Some(db);
                return Outcome {
                    reply: Reply::Ok,
                    acknowledged,
                };
            }
            Talk::Refused { text, broken } => {
                cached.last_db = None;
                if broken {
                    sockets.by_target.remove(target);
                }
                let text = text.unwrap_or_default();
                return Outcome {
                    reply: Reply::Error(format!("{}{text}", errors::MIGRATE_TARGET_ERROR).into()),
                    acknowledged,
                };
            }
            Talk::Failed { failure, writing } => (failure, writing),
        };
        sockets.by_target.remove(target);
        // A retry only when nothing was restored (the first reply never
        // came) and the timeout did not run out.
        if acknowledged.is_empty() && may_retry && failure != Failure::TimedOut {
            may_retry = false;
            continue;
        }
        return Outcome {
            reply: err(if writing {
                errors::MIGRATE_WRITE_FAILED
            } else {
                errors::MIGRATE_READ_FAILED
            }),
            acknowledged,
        };
    }
}

/// How one round trip ended.
enum Talk {
    /// Every reply read, none an error.
    Done,
    /// The target answered with an error (the first one's text, without
    /// its `-`); `broken`: the connection then failed before every reply
    /// was read, so it is closed.
    Refused { text: Option<String>, broken: bool },
    /// The connection failed, while writing or while reading.
    Failed { failure: Failure, writing: bool },
}

/// One round trip: the query out, the AUTH, SELECT and RESTORE replies in.
fn talk(
    cached: &mut Cached,
    query: &[u8],
    timeout: Duration,
    auth: bool,
    select: bool,
    count: usize,
    acknowledged: &mut Vec<usize>,
) -> Talk {
    let failed = |failure: Failure, writing: bool| Talk::Failed { failure, writing };
    let stream = cached.conn.get_mut();
    if stream.set_write_timeout(Some(timeout)).is_err() || stream.set_read_timeout(Some(timeout)).is_err() {
        return failed(Failure::Other, true);
    }
    for chunk in query.chunks(WRITE_CHUNK) {
        if let Err(e) = stream.write_all(chunk) {
            return failed(e.into(), true);
        }
    }
    let auth_reply = if auth {
        match read_line(&mut cached.conn) {
            Ok(line) => Some(line),
            Err(f) => return failed(f, false),
        }
    } else {
        None
    };
    let select_reply = if select {
        match read_line(&mut cached.conn) {
            Ok(line) => Some(line),
            Err(f) => return failed(f, false),
        }
    } else {
        None
    };
    let refused = |line: &Option<Vec<u8>>| line.as_ref().is_some_and(|l| l.first() == Some(&b'-'));
    let mut target_error = None;
    for i in 0..count {
        let line = match read_line(&mut cached.conn) {
            Ok(line) => line,
            Err(f) => {
                if target_error.is_some() {
                    return Talk::Refused {
                        text: target_error,
                        broken: true,
                    };
                }
                return failed(f, false);
            }
        };
        if refused(&auth_reply) || refused(&select_reply) || line.first() == Some(&b'-') {
            if target_error.is_none() {
                let from = if refused(&auth_reply) {
                    auth_reply.as_deref()
                } else if refused(&select_reply) {
                    select_reply.as_deref()
                } else {
                    Some(&line[..])
                };
                let text = from.map(|l| String::from_utf8_lossy(&l[1..]).into_owned());
                target_error = text;
            }
        } else {
            acknowledged.push(i);
        }
    }
    match target_error {
        None => Talk::Done,
        text => Talk::Refused { text, broken: false },
    }
}
