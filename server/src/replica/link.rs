//! The replica link: one task per server that follows the primary
//! [`super::ReplicaState`] names, as Redis 7.0.15's replica does.
//!
//! Connect, then the handshake Redis sends (PING; AUTH with `masterauth`
//! and `masteruser`; `REPLCONF listening-port <port>`, the port
//! `replica-announce-port` gives when set; `REPLCONF ip-address <ip>` with
//! `replica-announce-ip`; `REPLCONF capa eof capa psync2`; `PSYNC <replid> <offset>` from the cached primary, or
//! `PSYNC ? -1`). `+FULLRESYNC` is followed by the RDB (`$<len>` or the
//! diskless `$EOF:<mark>` framing), which replaces the dataset as
//! `repl-diskless-load` says ([`LoadPlan`]): written to a temp file in
//! `dir` and loaded from it once complete (`disabled`, and `on-empty-db`
//! with data), or parsed as it arrives ([`crate::persist::rdb::disk::SocketLoad`])
//! into the flushed dataset (`on-empty-db`) or beside the old one, which
//! keeps serving when the resync continues its history and stays if the
//! transfer fails (`swapdb`). `+CONTINUE` keeps the dataset. Then the stream: every complete command is applied
//! through the engine ([`crate::engine::Engine::replica_apply`]), counted in
//! the offset; `REPLCONF ACK <offset>` goes back every second and for each
//! `REPLCONF GETACK`. A dropped link is retried after [`RECONNECT_DELAY`],
//! asking a partial resync from where it stopped.
//!
//! The task owns the socket; the engine lock is taken only to apply what
//! was read (never across an await), and everything applied carries the
//! generation it was read under, so a link REPLICAOF replaced changes
//! nothing.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::{LinkState, Primary};
use crate::engine::Engine;
use crate::protocol::{ProtocolLimits, RequestParser};
use crate::state::Shared;

/// How long a failed or dropped link waits before it tries again (Redis
/// retries from its once-a-second cron).
pub(crate) const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// How often the link sends `REPLCONF ACK <offset>` (Redis's
/// `replicationCron`, once a second).
pub(crate) const ACK_PERIOD: Duration = Duration::from_secs(1);

/// How long connecting and each handshake reply may take (Redis's
/// `repl-timeout` default).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;

/// How long the primary pauses mid-transfer before the bytes the parser
/// held back are parsed anyway (`SocketLoad::settle`).
const SETTLE_AFTER: Duration = Duration::from_millis(100);

/// The length of the diskless transfer's end mark (`$EOF:<mark>`).
const EOF_MARK_LEN: usize = super::REPLID_LEN;

/// What the link needs to (re)connect, read from the engine.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub generation: u64,
    pub primary: Primary,
    pub masterauth: String,
    pub masteruser: String,
    /// This server's port, or `replica-announce-port` (`REPLCONF
    /// listening-port`).
    pub port: u16,
    /// `replica-announce-ip` (`REPLCONF ip-address`; empty: not sent).
    pub announce_ip: String,
    /// `bind-source-addr`: where the link leaves from (empty: anywhere).
    pub source_addr: String,
    /// What PSYNC asks: a replication ID and the offset to continue from.
    pub psync: (String, i64),
    /// This server hands its primary role over (FAILOVER): PSYNC carries
    /// `FAILOVER`, and the answer ends or aborts the hand-over.
    pub failover: bool,
    /// Where a full resync's transfer is counted (INFO `master_sync_*`).
    pub transfer: Arc<super::Transfer>,
}

/// Why a link ended.
enum End {
    /// REPLICAOF changed the primary (or ended the replication).
    Replaced,
    /// The server stops.
    Stopped,
    /// An I/O error, a refusal or a protocol error: retry later.
    Failed(String),
}

/// The link task (spawned once by the server): follows the primary until
/// `stop`.
pub(crate) async fn run(engine: Arc<Mutex<Engine>>, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        let target = crate::net::lock_engine(&engine, &shared.script).await.replica_target();
        let Some(target) = target else {
            tokio::select! {
                _ = stop.changed() => return,
                () = shared.replica_changed.notified() => continue,
            }
        };
        let generation = target.generation;
        // A REPLICAOF that changes the primary ends this link wherever it
        // is (a silent primary's handshake included); any other wake-up
        // lets it go on.
        let link = follow(&engine, &shared, target);
        tokio::pin!(link);
        let end = loop {
            tokio::select! {
                end = &mut link => break end,
                _ = stop.changed() => break End::Stopped,
                () = shared.replica_changed.notified() => {
                    let current = crate::net::lock_engine(&engine, &shared.script).await.replica_offset(generation);
                    if current.is_none() {
                        break End::Replaced;
                    }
                }
            }
        };
        crate::net::lock_engine(&engine, &shared.script)
            .await
            .replica_link_lost(generation);
        match end {
            End::Stopped => return,
            End::Replaced => continue,
            End::Failed(why) => {
                tracing::debug!("replication link: {why}");
                tokio::select! {
                    _ = stop.changed() => return,
                    () = shared.replica_changed.notified() => {}
                    () = tokio::time::sleep(RECONNECT_DELAY) => {}
                }
            }
        }
    }
}

/// The socket and what was read from it and not yet used.
struct Conn {
    socket: TcpStream,
    buf: BytesMut,
    /// Set while a full resync's RDB is read: every read counts in it.
    transfer: Option<Arc<super::Transfer>>,
}

impl Conn {
    async fn fill(&mut self) -> Result<(), End> {
        self.buf.reserve(READ_CHUNK);
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.socket.read_buf(&mut self.buf)).await {
            Err(_) => Err(End::Failed(
                "Master did not respond to command during SYNC handshake".into(),
            )),
            Ok(Ok(0)) => Err(End::Failed("the primary closed the connection".into())),
            Ok(Ok(_)) => {
                if let Some(t) = &self.transfer {
                    t.touch();
                }
                Ok(())
            }
            Ok(Err(e)) => Err(End::Failed(format!("I/O error reading from MASTER: {e}"))),
        }
    }

    /// The next reply line, without its CRLF; the bare newlines a primary
    /// sends to keep the link alive while it prepares an RDB are skipped.
    async fn line(&mut self) -> Result<String, End> {
        loop {
            while self.buf.first() == Some(&b'\n') {
                self.buf.advance(1);
            }
            if let Some(eol) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..eol]).into_owned();
                self.buf.advance(eol + 2);
                return Ok(line);
            }
            self.fill().await?;
        }
    }

    fn announce(&self, size: i64) {
        if let Some(t) = &self.transfer {
            t.announce(size);
        }
    }

    fn progress(&self, read: usize) {
        if let Some(t) = &self.transfer {
            t.progress(read as i64);
        }
    }

    async fn send(&mut self, args: &[&[u8]]) -> Result<(), End> {
        self.socket
            .write_all(&encode(args))
            .await
            .map_err(|e| End::Failed(format!("I/O error writing to MASTER: {e}")))
    }

    /// Reads a full resync's `$` line: `$<len>`, or `$EOF:<mark>` (the
    /// diskless framing); `to` names where the bytes go in the log line
    /// (`disk` or `parser`).
    async fn header(&mut self, to: &str) -> Result<Framing, End> {
        let header = self.line().await?;
        let Some(size) = header.strip_prefix('$') else {
            return Err(End::Failed(format!(
                "Bad protocol from MASTER, the first byte is not '$' (we received '{header}'), are you sure the host and port are right?"
            )));
        };
        if let Some(mark) = size.strip_prefix("EOF:") {
            if mark.len() != EOF_MARK_LEN {
                return Err(End::Failed("bad EOF mark from MASTER".into()));
            }
            tracing::info!("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to {to}");
            self.announce(0);
            return Ok(Framing::Mark(mark.as_bytes().to_vec()));
        }
        let len: usize = size
            .parse()
            .map_err(|_| End::Failed(format!("bad RDB length from MASTER: '{size}'")))?;
        tracing::info!("MASTER <-> REPLICA sync: receiving {len} bytes from master to {to}");
        self.announce(len as i64);
        Ok(Framing::Len(len))
    }

    /// The next bytes of the RDB as they arrive (the end mark left out),
    /// and whether they are its last; `got` counts the bytes read so far.
    /// Cancel safe (a timeout may drop it): nothing is taken from the
    /// buffer or counted in `got` but in the return, and a read cut short
    /// reads nothing.
    async fn next_chunk(&mut self, framing: &Framing, got: &mut usize) -> Result<(Vec<u8>, bool), End> {
        loop {
            match framing {
                Framing::Len(len) => {
                    let n = self.buf.len().min(len - *got);
                    if n > 0 || *got == *len {
                        *got += n;
                        self.progress(*got);
                        return Ok((self.buf.split_to(n).to_vec(), *got == *len));
                    }
                }
                Framing::Mark(mark) => {
                    // Every byte read counts (Redis's `repl_transfer_read`),
                    // those held back as a possible mark too.
                    self.progress(*got + self.buf.len());
                    if self.buf.ends_with(mark) {
                        *got += self.buf.len();
                        self.progress(*got);
                        let n = self.buf.len() - mark.len();
                        let chunk = self.buf.split_to(n).to_vec();
                        self.buf.clear();
                        return Ok((chunk, true));
                    }
                    // The last bytes may be the start of the mark.
                    if self.buf.len() > mark.len() {
                        let n = self.buf.len() - mark.len();
                        *got += n;
                        return Ok((self.buf.split_to(n).to_vec(), false));
                    }
                }
            }
            self.fill().await?;
        }
    }
}

/// How a full resync's RDB is framed on the wire.
enum Framing {
    /// `$<len>`: that many bytes.
    Len(usize),
    /// `$EOF:<mark>`: bytes up to the 40-byte mark (diskless).
    Mark(Vec<u8>),
}

/// How a full resync's RDB is loaded (`repl-diskless-load`, decided by
/// [`Engine::replica_load_plan`]).
#[derive(Debug)]
pub(crate) enum LoadPlan {
    /// Written to `dir/temp-<unix time>.<pid>.rdb` as it arrives, then the
    /// dataset flushed and the file loaded (as `dir/dbfilename`).
    Disk { dir: std::path::PathBuf, now_secs: u64 },
    /// Parsed as it arrives; into a new dataset swapped in at the end
    /// (`swap`), or into the flushed one.
    Parser { swap: bool },
}

/// The temp file of a transfer to disk: removed unless it was renamed
/// (the link failed, or was replaced mid-transfer).
struct TempFile(Option<std::path::PathBuf>);

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The loading state a link set: ended if the link stops mid-load (a
/// REPLICAOF replaced it, the server stops), as the engine ends it otherwise.
struct LoadingGuard(Arc<Shared>);

impl Drop for LoadingGuard {
    fn drop(&mut self) {
        self.0.loading.end();
    }
}

/// `repl-diskless-load disabled` (or `on-empty-db` with data): the
/// transfer to a temp file, then the flush and the file's load. True with
/// the diskless framing.
async fn load_via_disk(
    engine: &Arc<Mutex<Engine>>,
    shared: &Arc<Shared>,
    conn: &mut Conn,
    generation: u64,
    (replid, offset): (String, i64),
    (dir, now_secs): (std::path::PathBuf, u64),
) -> Result<bool, End> {
    let lock = || crate::net::lock_engine(engine, &shared.script);
    let framing = conn.header("disk").await?;
    let path = dir.join(format!("temp-{now_secs}.{}.rdb", std::process::id()));
    let mut temp = TempFile(Some(path.clone()));
    let mut file = tokio::fs::File::create(&path).await.map_err(|e| {
        let why = format!("Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}");
        tracing::warn!("{why}");
        End::Failed(why)
    })?;
    let mut got = 0;
    loop {
        let (chunk, last) = conn.next_chunk(&framing, &mut got).await?;
        if let Err(e) = file.write_all(&chunk).await {
            let why = format!(
                "Write error or short write writing to the DB dump file needed for MASTER <-> REPLICA synchronization: {e}"
            );
            tracing::warn!("{why}");
            return Err(End::Failed(why));
        }
        if last {
            break;
        }
    }
    if let Err(e) = file.sync_all().await {
        let why = format!("Failed trying to sync the temp DB to disk in MASTER <-> REPLICA synchronization: {e}");
        tracing::warn!("{why}");
        return Err(End::Failed(why));
    }
    drop(file);
    let Some(rdb) = lock()
        .await
        .replica_disk_load_begin(generation, &path)
        .map_err(End::Failed)?
    else {
        return Err(End::Replaced);
    };
    temp.0 = None;
    let _loading = LoadingGuard(shared.clone());
    let (config, progress) = lock().await.replica_load_inputs();
    let file = rdb.clone();
    let parsed = tokio::task::spawn_blocking(move || {
        let bytes = std::fs::read(&file).map_err(|e| e.to_string())?;
        // Time 0: every key loads (a replica's expire by its primary's DELs).
        crate::persist::rdb::disk::read_dataset(&bytes, &config, 0, Some(&progress.loading)).map_err(|e| e.to_string())
    })
    .await
    .unwrap_or_else(|e| Err(e.to_string()));
    let mut engine = lock().await;
    let loaded = match parsed {
        Ok(loaded) => loaded,
        Err(why) => {
            engine.replica_load_failed(false);
            tracing::warn!("Failed trying to load the MASTER synchronization DB from disk: {why}");
            engine.replica_drop_sync_file(&rdb);
            return Err(End::Failed(why));
        }
    };
    let ended = engine.replica_load_end(generation, replid, offset, loaded, false);
    engine.replica_drop_sync_file(&rdb);
    match ended {
        Ok(true) => Ok(matches!(framing, Framing::Mark(_))),
        Ok(false) => Err(End::Replaced),
        Err(why) => Err(End::Failed(why)),
    }
}

/// `repl-diskless-load swapdb` (or `on-empty-db` on an empty dataset): the
/// RDB parsed as it arrives, into a new dataset (`swap`) or the flushed
/// one; installed at its end. True with the diskless framing.
async fn load_from_socket(
    engine: &Arc<Mutex<Engine>>,
    shared: &Arc<Shared>,
    conn: &mut Conn,
    generation: u64,
    (replid, offset): (String, i64),
    swap: bool,
) -> Result<bool, End> {
    let lock = || crate::net::lock_engine(engine, &shared.script);
    let framing = conn.header("parser").await?;
    let total = match framing {
        Framing::Len(len) => len as u64,
        Framing::Mark(_) => 0,
    };
    if !lock().await.replica_load_begin(generation, swap, &replid, total) {
        return Err(End::Replaced);
    }
    let _loading = LoadingGuard(shared.clone());
    let (config, progress) = lock().await.replica_load_inputs();
    // Time 0: every key loads (a replica's expire by its primary's DELs).
    let mut load = crate::persist::rdb::disk::SocketLoad::new(&config, 0);
    let mut got = 0;
    let failed = |why: String| async move {
        lock().await.replica_load_failed(swap);
        tracing::warn!("Failed trying to load the MASTER synchronization DB from socket: {why}");
        End::Failed(why)
    };
    loop {
        // Bytes the parser held back (see `SocketLoad::settle`) are parsed
        // when the primary pauses.
        let next = if load.unsettled() {
            tokio::time::timeout(SETTLE_AFTER, conn.next_chunk(&framing, &mut got)).await
        } else {
            Ok(conn.next_chunk(&framing, &mut got).await)
        };
        let (chunk, last) = match next {
            Ok(Ok(c)) => (Some(c.0), c.1),
            Ok(Err(End::Failed(why))) => return Err(failed(why).await),
            Ok(Err(end)) => return Err(end),
            Err(_) => (None, false),
        };
        // Off the runtime's workers: `key-load-delay` sleeps per key.
        let progress = progress.clone();
        let fed = tokio::task::spawn_blocking(move || {
            let fed = match chunk {
                Some(chunk) => load.feed(&chunk, last, Some(&progress.loading)),
                None => load.settle(Some(&progress.loading)),
            };
            (load, fed)
        })
        .await;
        let fed = match fed {
            Ok((back, fed)) => {
                load = back;
                fed.map_err(|e| e.to_string())
            }
            Err(e) => return Err(failed(e.to_string()).await),
        };
        if let Err(why) = fed {
            return Err(failed(why).await);
        }
        if last {
            break;
        }
    }
    if !load.done() {
        return Err(failed("the transfer ended inside the RDB".into()).await);
    }
    if !load.trailing().is_empty() {
        tracing::warn!("Replication stream EOF marker is broken");
        lock().await.replica_load_failed(swap);
        return Err(End::Failed("Replication stream EOF marker is broken".into()));
    }
    match lock()
        .await
        .replica_load_end(generation, replid, offset, load.finish(), swap)
    {
        Ok(true) => Ok(matches!(framing, Framing::Mark(_))),
        Ok(false) => Err(End::Replaced),
        Err(why) => Err(End::Failed(why)),
    }
}

/// A command in RESP, as Redis's `sendCommand` writes it.
pub(crate) fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Whether a reply to the handshake's PING lets the link go on: PONG, or
/// the refusals of a primary that wants AUTH first (Redis's list).
fn ping_ok(reply: &str) -> bool {
    !reply.starts_with('-')
        || reply.starts_with("-NOAUTH")
        || reply.starts_with("-NOPERM")
        || reply.starts_with("-ERR operation not permitted")
}

/// One link: connect, handshake, resync, stream, until it fails or is
/// replaced.
async fn follow(engine: &Arc<Mutex<Engine>>, shared: &Arc<Shared>, target: Target) -> End {
    let generation = target.generation;
    let lock = || crate::net::lock_engine(engine, &shared.script);
    let set_state = |state| async move { lock().await.replica_set_state(generation, state) };
    if !set_state(LinkState::Connecting).await {
        return End::Replaced;
    }
    let (host, port) = (target.primary.host.as_str(), target.primary.port);
    let connecting = crate::net::outgoing::connect(host, port, &target.source_addr);
    let socket = match tokio::time::timeout(HANDSHAKE_TIMEOUT, connecting).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::warn!("Error condition on socket for SYNC: {e}");
            return End::Failed(e.to_string());
        }
        Err(_) => {
            tracing::warn!("Timeout connecting to the MASTER...");
            return End::Failed("connect timeout".into());
        }
    };
    let _ = socket.set_nodelay(true);
    tracing::info!("MASTER <-> REPLICA sync started");
    tracing::info!("Non blocking connect for SYNC fired the event.");
    if !set_state(LinkState::Handshake).await {
        return End::Replaced;
    }
    let mut conn = Conn {
        socket,
        buf: BytesMut::new(),
        transfer: None,
    };
    if let Err(end) = handshake(&mut conn, &target).await {
        return end;
    }
    let (replid, offset) = target.psync.clone();
    if replid == "?" {
        tracing::info!("Partial resynchronization not possible (no cached master)");
    } else {
        tracing::info!("Trying a partial resynchronization (request {replid}:{offset}).");
    }
    let offset_text = offset.to_string();
    let mut psync: Vec<&[u8]> = vec![b"PSYNC", replid.as_bytes(), offset_text.as_bytes()];
    if target.failover {
        psync.push(b"FAILOVER");
    }
    let sent = conn.send(&psync).await;
    let reply = match sent {
        Ok(()) => conn.line().await,
        Err(end) => Err(end),
    };
    if target.failover {
        // Redis's `syncWithMaster`: a write error or any other answer than
        // a resync aborts the FAILOVER (this server is a primary again).
        let accepted = reply
            .as_ref()
            .is_ok_and(|r| r.starts_with("+CONTINUE") || r.starts_with("+FULLRESYNC"));
        lock().await.replica_failover_answered(generation, accepted);
        if !accepted {
            return End::Replaced;
        }
    }
    let reply = match reply {
        Ok(r) => r,
        Err(end) => return end,
    };
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC") {
        let mut words = rest.split_whitespace();
        let (Some(id), Some(off)) = (words.next(), words.next().and_then(|o| o.parse::<i64>().ok())) else {
            return End::Failed(format!("bad FULLRESYNC reply: '{reply}'"));
        };
        tracing::info!("Full resync from master: {id}:{off}");
        target.transfer.start();
        if !set_state(LinkState::Sync).await {
            return End::Replaced;
        }
        let Some(plan) = lock().await.replica_load_plan(generation) else {
            return End::Replaced;
        };
        conn.transfer = Some(target.transfer.clone());
        let resync = (id.to_string(), off);
        let loaded = match plan {
            LoadPlan::Disk { dir, now_secs } => {
                load_via_disk(engine, shared, &mut conn, generation, resync, (dir, now_secs)).await
            }
            LoadPlan::Parser { swap } => load_from_socket(engine, shared, &mut conn, generation, resync, swap).await,
        };
        conn.transfer = None;
        let diskless = match loaded {
            Ok(diskless) => diskless,
            Err(end) => return end,
        };
        if diskless {
            // Redis acknowledges at once, which puts the link online on a
            // primary that streamed the RDB from its socket.
            let ack = lock().await.replica_offset(generation).unwrap_or(off);
            if let Err(end) = conn.send(&[b"REPLCONF", b"ACK", ack.to_string().as_bytes()]).await {
                return end;
            }
        }
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        tracing::info!("Successful partial resynchronization with master.");
        let new_id = rest.split_whitespace().next().map(str::to_string);
        if !lock().await.replica_continue(generation, new_id) {
            return End::Replaced;
        }
        tracing::info!("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.");
    } else {
        tracing::warn!("Unexpected reply to PSYNC from master: {reply}");
        return End::Failed(reply);
    }
    stream(engine, shared, conn, generation).await
}

/// PING, AUTH, REPLCONF listening-port, ip-address (with
/// `replica-announce-ip`) and capa, as Redis 7.0.15 sends them (all but
/// PING in one write, then their replies in order).
async fn handshake(conn: &mut Conn, target: &Target) -> Result<(), End> {
    conn.send(&[b"PING"]).await?;
    let pong = conn.line().await?;
    if !ping_ok(&pong) {
        tracing::warn!("Error reply to PING from master: '{pong}'");
        return Err(End::Failed(pong));
    }
    tracing::info!("Master replied to PING, replication can continue...");
    let mut batch = Vec::new();
    let auth = !target.masterauth.is_empty();
    if auth {
        let (user, pass) = (target.masteruser.as_bytes(), target.masterauth.as_bytes());
        if user.is_empty() {
            batch.extend(encode(&[b"AUTH", pass]));
        } else {
            batch.extend(encode(&[b"AUTH", user, pass]));
        }
    }
    batch.extend(encode(&[
        b"REPLCONF",
        b"listening-port",
        target.port.to_string().as_bytes(),
    ]));
    let announce_ip = !target.announce_ip.is_empty();
    if announce_ip {
        batch.extend(encode(&[b"REPLCONF", b"ip-address", target.announce_ip.as_bytes()]));
    }
    batch.extend(encode(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]));
    conn.socket
        .write_all(&batch)
        .await
        .map_err(|e| End::Failed(format!("I/O error writing to MASTER: {e}")))?;
    if auth {
        let reply = conn.line().await?;
        if let Some(why) = reply.strip_prefix('-') {
            tracing::warn!("Unable to AUTH to MASTER: {why}");
            return Err(End::Failed(reply));
        }
    }
    let reply = conn.line().await?;
    if let Some(why) = reply.strip_prefix('-') {
        tracing::info!("(Non critical) Master does not understand REPLCONF listening-port: {why}");
    }
    if announce_ip {
        let reply = conn.line().await?;
        if let Some(why) = reply.strip_prefix('-') {
            tracing::info!("(Non critical) Master does not understand REPLCONF ip-address: {why}");
        }
    }
    let reply = conn.line().await?;
    if let Some(why) = reply.strip_prefix('-') {
        tracing::info!("(Non critical) Master does not understand REPLCONF capa: {why}");
    }
    Ok(())
}

/// The stream: parse every complete command read, apply them as one
/// batch, answer GETACKs; ACK every [`ACK_PERIOD`].
async fn stream(engine: &Arc<Mutex<Engine>>, shared: &Arc<Shared>, mut conn: Conn, generation: u64) -> End {
    let (Ok(peer), Ok(local)) = (conn.socket.peer_addr(), conn.socket.local_addr()) else {
        return End::Failed("the link's socket has no address".into());
    };
    // The primary's client, as CLIENT LIST shows it; CLIENT KILL closes
    // the link through its signal.
    let killed = crate::net::lock_engine(engine, &shared.script)
        .await
        .replica_link_up(generation, peer, local);
    let Some(killed) = killed else {
        return End::Replaced;
    };
    let limits = ProtocolLimits::default();
    let mut parser = RequestParser::new();
    let mut acks = tokio::time::interval(ACK_PERIOD);
    acks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut read = 0usize;
    // The bytes the parser took, as they came: the complete commands' are
    // passed on to this server's replicas verbatim; those of the command
    // not completed yet (the parser keeps a partial header's progress
    // itself) count for it once it completes.
    let mut taken = BytesMut::new();
    loop {
        // What is already buffered (bytes after the RDB) is applied first.
        let mut batch: Vec<(Vec<Bytes>, usize)> = Vec::new();
        // The parser consumes from the front: what it took is a prefix of
        // what was buffered.
        let buffered = Bytes::copy_from_slice(&conn.buf);
        let (mut complete, mut consumed) = (0, 0);
        loop {
            let before = conn.buf.len();
            let parsed = parser.next(&mut conn.buf, &limits);
            consumed += before - conn.buf.len();
            match parsed {
                Ok(Some(args)) => {
                    let end = taken.len() + consumed;
                    batch.push((args, end - complete));
                    complete = end;
                }
                Ok(None) => break,
                Err(e) => return End::Failed(format!("protocol error from MASTER: {e}")),
            }
        }
        taken.extend_from_slice(&buffered[..consumed]);
        let raw = taken.split_to(complete);
        // Bytes of a command not yet complete count as read, not applied.
        if !batch.is_empty() || read > 0 {
            let applied = crate::net::lock_engine(engine, &shared.script)
                .await
                .replica_apply(generation, batch, &raw, read);
            let Some(getacks) = applied else {
                return End::Replaced;
            };
            for offset in getacks {
                if let Err(end) = conn.send(&[b"REPLCONF", b"ACK", offset.to_string().as_bytes()]).await {
                    return end;
                }
            }
        }
        conn.buf.reserve(READ_CHUNK);
        tokio::select! {
            () = killed.closed() => return End::Failed("the primary's client was killed".into()),
            got = conn.socket.read_buf(&mut conn.buf) => match got {
                Ok(0) => return End::Failed("the primary closed the connection".into()),
                Ok(n) => read = n,
                Err(e) => return End::Failed(format!("I/O error reading from MASTER: {e}")),
            },
            _ = acks.tick() => {
                read = 0;
                let offset = crate::net::lock_engine(engine, &shared.script).await.replica_offset(generation);
                let Some(offset) = offset else {
                    return End::Replaced;
                };
                if let Err(end) = conn.send(&[b"REPLCONF", b"ACK", offset.to_string().as_bytes()]).await {
                    return end;
                }
            }
        }
    }
}
