//! A replica's link: the task its connection becomes once PSYNC or SYNC
//! made it a replica. It writes what the engine tells it (`+FULLRESYNC`,
//! `+CONTINUE`, the snapshot's RDB framed as `$<len>` or `$EOF:<mark>`),
//! then copies the stream from the backlog to the socket from the
//! replica's offset as the engine publishes it, and reads the replica's
//! `REPLCONF ACK`s.
//!
//! It owns the socket and nothing of the engine: it takes the engine lock
//! only to report ACKs (WAIT), and never while it holds the hub's lock.
//! What must never happen here: a write to the socket under either lock.

use std::io;
use std::sync::atomic::Ordering;

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
    let Handoff { replica, hub, mut msgs } = handoff;
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
        if streaming {
            loop {
                let next = replica.next.load(Ordering::Acquire);
                let Some(chunk) = hub.read_from(next) else {
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
