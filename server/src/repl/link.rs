//! A replica's link: the task its connection becomes once PSYNC or SYNC
//! made it a replica. It writes what the engine tells it (`+FULLRESYNC`,
//! `+CONTINUE`, the snapshot's RDB framed as `$<len>` or `$EOF:<mark>`),
//! then copies the stream from the backlog to the socket from the
//! replica's offset as the engine publishes it, and reads the replica's
//! `REPLCONF ACK`s.
//!
//! The test-control plane's faults ([`super::LinkFaults`]) act here: a
//! paused link writes nothing of the stream, a delayed one writes bytes
//! once the server clock is that far past when it saw them published, the
//! units a link was told to drop are skipped, and a draining one (a dying
//! primary's last words) ends once it wrote up to its mark.
//!
//! It owns the socket and nothing of the engine: it takes the engine lock
//! only to report ACKs (WAIT), and never while it holds the hub's lock.
//! What must never happen here: a write to the socket under either lock.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::{Handoff, LinkMsg, Replica, State};
use crate::engine::Engine;
use crate::lua::ScriptState;
use crate::net::clients::ConnSignal;
use crate::protocol::{ProtocolLimits, RequestParser};

/// Read buffer of a link (a replica sends only small ACKs).
const READ_BUFFER: usize = 4096;

/// What a link needs of its server.
pub(crate) struct LinkCtx<'a> {
    pub(crate) engine: &'a Mutex<Engine>,
    pub(crate) script: &'a ScriptState,
    pub(crate) signal: &'a ConnSignal,
    pub(crate) stop: watch::Receiver<bool>,
}

/// Why a write stopped early.
fn ended() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "the replica's link ended")
}

/// Resolves once the replica is scheduled to be disconnected.
async fn killed(replica: &Replica) {
    while !replica.is_killed() {
        replica.wake.notified().await;
    }
}

/// Runs the link until the replica goes, is killed (CLIENT KILL, output
/// limit, timeout) or the server stops. `buf`: what the connection had
/// read past PSYNC.
pub(crate) async fn run<S: AsyncRead + AsyncWrite + Unpin>(
    socket: &mut S,
    mut buf: BytesMut,
    handoff: Handoff,
    ctx: LinkCtx<'_>,
) -> io::Result<()> {
    let Handoff {
        replica,
        hub,
        mut msgs,
        clock,
    } = handoff;
    let mut moved = clock.moved();
    let mut delay = Delay::default();
    let LinkCtx {
        engine,
        script,
        signal,
        mut stop,
    } = ctx;
    let mut published = hub.published.subscribe();
    let mut parser = RequestParser::new();
    let limits = ProtocolLimits::default();
    // Copying the stream to the socket.
    let mut streaming = false;
    // A diskless sync ended: the stream starts at the first ACK (Redis's
    // `repl_start_cmd_stream_on_ack`).
    let mut stream_on_ack = false;
    let mut msgs_open = true;
    let (mut rd, mut wr) = tokio::io::split(socket);
    loop {
        if replica.is_killed() || *stop.borrow() {
            return Ok(());
        }
        let mut wait = None;
        if streaming {
            loop {
                let mut next = replica.next.load(Ordering::Acquire);
                let mut upto = u64::MAX;
                let faults = &replica.faults;
                if faults.any() {
                    let drain_to = faults.drain_to.load(Ordering::Acquire);
                    if next >= drain_to {
                        return Ok(());
                    }
                    if faults.paused.load(Ordering::Acquire) {
                        break;
                    }
                    let (from, limit) = faults.skip_from(next);
                    if from != next {
                        next = from;
                        replica.next.store(next, Ordering::Release);
                    }
                    let (free_to, wake) = delay.free_to(
                        faults.delay_ms.load(Ordering::Acquire),
                        hub.offset() + 1,
                        clock.now_ms(),
                    );
                    wait = wake;
                    upto = limit.min(drain_to).min(free_to);
                } else {
                    delay.reset(hub.offset() + 1);
                }
                let Some(chunk) = hub.read_from(next, upto) else {
                    tracing::warn!("Replica {}:{} fell out of the backlog", replica.ip, replica.port);
                    return Ok(());
                };
                if chunk.is_empty() {
                    break;
                }
                write(&mut wr, &chunk, signal, &replica).await?;
                replica.next.fetch_add(chunk.len() as u64, Ordering::AcqRel);
            }
        }
        if buf.capacity() - buf.len() < READ_BUFFER / 4 {
            buf.reserve(READ_BUFFER);
        }
        let mut acked = false;
        tokio::select! {
            biased;
            () = signal.closed() => return Ok(()),
            () = killed(&replica) => return Ok(()),
            _ = stop.changed() => return Ok(()),
            msg = msgs.recv(), if msgs_open => match msg {
                Some(LinkMsg::Line(line)) => write(&mut wr, &line, signal, &replica).await?,
                Some(LinkMsg::Rdb { rdb, eof }) => {
                    if eof {
                        let mark = super::random_id();
                        let head = format!("$EOF:{mark}\r\n");
                        write(&mut wr, head.as_bytes(), signal, &replica).await?;
                        write(&mut wr, &rdb, signal, &replica).await?;
                        write(&mut wr, mark.as_bytes(), signal, &replica).await?;
                        tracing::info!("Streamed RDB transfer with replica {}:{} succeeded (socket). Waiting for REPLCONF ACK from replica to enable streaming", replica.ip, replica.port);
                        stream_on_ack = true;
                    } else {
                        let head = format!("${}\r\n", rdb.len());
                        write(&mut wr, head.as_bytes(), signal, &replica).await?;
                        write(&mut wr, &rdb, signal, &replica).await?;
                        tracing::info!("Synchronization with replica {}:{} succeeded", replica.ip, replica.port);
                        streaming = true;
                    }
                    replica.ack_ms.store(super::now_ms(), Ordering::Release);
                    replica.set_state(State::Online);
                }
                Some(LinkMsg::Stream) => streaming = true,
                None => {
                    msgs_open = false;
                    if !streaming && !stream_on_ack {
                        // Its snapshot failed or was killed.
                        return Ok(());
                    }
                }
            },
            changed = published.changed(), if streaming => {
                if changed.is_err() {
                    return Ok(());
                }
            }
            () = replica.faults.changed.notified() => {}
            _ = async { moved.as_mut().expect("guarded").changed().await }, if moved.is_some() && wait.is_some() => {}
            () = tokio::time::sleep(wait.unwrap_or_default()), if wait.is_some() => {}
            read = rd.read_buf(&mut buf) => {
                if read? == 0 {
                    return Ok(());
                }
                loop {
                    match parser.next(&mut buf, &limits) {
                        Ok(Some(args)) => {
                            let is = |i: usize, word: &str| args.get(i).is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()));
                            if is(0, "replconf") && is(1, "ack") {
                                if let Some(offset) = args.get(2).and_then(|a| crate::store::num::parse_i64(a)) {
                                    replica.ack(offset.max(0) as u64);
                                    acked = true;
                                    if std::mem::take(&mut stream_on_ack) {
                                        streaming = true;
                                    }
                                }
                            }
                        }
                        Ok(None) => break,
                        Err(_) => return Ok(()),
                    }
                }
            }
        }
        if acked {
            crate::net::lock_engine(engine, script).await.replication_acked();
        }
    }
}

/// A delayed link's record of when it saw the stream published: bytes up
/// to `free_to` may go; each later stretch goes once the clock is the
/// delay past its stamp.
#[derive(Debug, Default)]
struct Delay {
    /// (end offset, server clock ms it was seen at), oldest first.
    stamps: VecDeque<(u64, u64)>,
    /// The offset (exclusive) up to which the stream was seen.
    seen: u64,
    /// The offset (exclusive) up to which bytes may be written.
    free: u64,
}

impl Delay {
    /// No delay: everything seen is free.
    fn reset(&mut self, end: u64) {
        self.stamps.clear();
        self.seen = end;
        self.free = end;
    }

    /// With `delay_ms` (0: none) and the stream's end now: the offset up
    /// to which bytes may go, and how long until more may (real time, the
    /// clock's pace; a moved test clock wakes the link sooner).
    fn free_to(&mut self, delay_ms: u64, end: u64, now: u64) -> (u64, Option<Duration>) {
        if delay_ms == 0 {
            self.reset(end);
            return (u64::MAX, None);
        }
        if end > self.seen {
            self.stamps.push_back((end, now));
            self.seen = end;
        }
        while let Some(&(stamp_end, at)) = self.stamps.front() {
            if at.saturating_add(delay_ms) > now {
                let left = at.saturating_add(delay_ms) - now;
                return (self.free, Some(Duration::from_millis(left)));
            }
            self.free = stamp_end;
            self.stamps.pop_front();
        }
        (self.free, None)
    }
}

/// Writes `bytes`, unless the connection is killed meanwhile.
async fn write(
    wr: &mut (impl AsyncWrite + Unpin),
    bytes: &[u8],
    signal: &ConnSignal,
    replica: &Replica,
) -> io::Result<()> {
    tokio::select! {
        r = wr.write_all(bytes) => r,
        () = signal.closed() => Err(ended()),
        () = killed(replica) => Err(ended()),
    }
}
