//! The cluster bus's I/O (`cluster-enabled yes`): the listener on the bus
//! port (the client port + 10000 unless `cluster-port` says otherwise), the
//! links this node opens to the nodes it knows, and the cron that drives
//! them every 100 ms. Each link is one task moving whole messages between
//! its socket and the engine, where the protocol runs
//! ([`crate::cluster::bus`]) under the engine lock.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio::sync::watch;

use crate::cluster::bus::{announced_len, CRON_MS, HEADER_LEN};
use crate::engine::Engine;

/// How long opening a link may take (Redis gives a connect the node
/// timeout; a link that does not open is retried by the next cron).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The largest message accepted: a PUBLISH carries a whole message, so
/// this is the bulk limit's order, not the header's.
const MAX_MESSAGE: usize = 512 << 20;

/// A link the cron asked to open, already registered with its sender.
pub(crate) struct Opening {
    pub id: u64,
    pub addr: SocketAddr,
    pub rx: UnboundedReceiver<Vec<u8>>,
    /// `bind-source-addr`: where the link leaves from (empty: anywhere).
    pub source_addr: String,
}

/// Serves the bus until `stop`.
pub(crate) async fn serve(engine: Arc<Mutex<Engine>>, listener: TcpListener, mut stop: watch::Receiver<bool>) {
    let mut cron = tokio::time::interval(Duration::from_millis(CRON_MS));
    // A late tick is not made up with a burst of crons (tokio's default):
    // on a loaded machine the catch-up kept the node's thread busy, so it
    // never caught up. Redis's cron, too, just runs late.
    cron.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(CRON_MS)).await;
                    continue;
                };
                let (tx, rx) = unbounded_channel();
                let Some(id) = engine.lock().bus_accepted(tx) else {
                    continue;
                };
                tokio::spawn(run_link(engine.clone(), id, stream, rx, stop.clone()));
            }
            _ = cron.tick() => {
                let openings = engine.lock().bus_cron();
                for opening in openings {
                    tokio::spawn(open_link(engine.clone(), opening, stop.clone()));
                }
            }
        }
    }
}

async fn open_link(engine: Arc<Mutex<Engine>>, o: Opening, stop: watch::Receiver<bool>) {
    let connecting = crate::net::outgoing::connect_addr(o.addr, &o.source_addr);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            run_link(engine, o.id, stream, o.rx, stop).await;
        }
        _ => engine.lock().bus_closed(o.id),
    }
}

/// Moves messages both ways until the socket closes, the link is freed
/// (its sender dropped) or the server stops.
async fn run_link(
    engine: Arc<Mutex<Engine>>,
    id: u64,
    stream: TcpStream,
    mut rx: UnboundedReceiver<Vec<u8>>,
    mut stop: watch::Receiver<bool>,
) {
    let (local, peer) = match (stream.local_addr(), stream.peer_addr()) {
        (Ok(l), Ok(p)) => (l, p),
        _ => {
            engine.lock().bus_closed(id);
            return;
        }
    };
    let (mut reader, mut writer) = stream.into_split();
    let mut buf = BytesMut::with_capacity(HEADER_LEN * 2);
    'link: loop {
        tokio::select! {
            _ = stop.changed() => break,
            out = rx.recv() => match out {
                Some(msg) => {
                    if writer.write_all(&msg).await.is_err() {
                        break;
                    }
                }
                None => break,
            },
            read = reader.read_buf(&mut buf) => {
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                while buf.len() >= 8 {
                    let start: [u8; 8] = buf[..8].try_into().expect("8 bytes");
                    let Some(len) = announced_len(&start).filter(|l| (8..=MAX_MESSAGE).contains(l)) else {
                        break 'link;
                    };
                    if buf.len() < len {
                        break;
                    }
                    let msg = buf.split_to(len);
                    engine.lock().bus_message(id, &msg, local, peer);
                    if !engine.lock().bus_link_alive(id) {
                        break 'link;
                    }
                }
            }
        }
    }
    let _ = writer.shutdown().await;
    engine.lock().bus_closed(id);
}
