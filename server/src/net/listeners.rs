//! The listening sockets: bound at start from `bind` and `port`, and
//! rebound by CONFIG SET of either as Redis rebinds them (`changeListenPort`,
//! `changeBindAddr`): the old sockets are closed, then the new addresses
//! bound; port 0 listens nowhere; a failure leaves nothing listening and
//! the caller restores the old settings by rebinding them.
//!
//! Each socket sits in a [`Slot`] that its accept loop polls and CONFIG SET
//! may empty at any time, so closing is synchronous (under the engine
//! lock, no waiting for a task). Connections already accepted are not
//! touched. New slots reach the serving task over a channel, which gives
//! each its accept loop. This module never reads or writes a connection.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};

/// Redis's addresses when `bind` lists none: every IPv4 and, where there
/// is IPv6, every IPv6 interface.
const ALL_INTERFACES: [&str; 2] = ["*", "-::*"];

/// Redis's limit on `bind` addresses (`CONFIG_BINDADDR_MAX`).
pub(crate) const MAX_BIND_ADDRESSES: usize = 16;

/// One listening socket, emptied when CONFIG SET closes it.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    listener: Mutex<Option<TcpListener>>,
    /// Wakes the accept loop once the socket is gone (the socket's own
    /// wakeup goes with it).
    closed: Notify,
}

impl Slot {
    fn new(listener: TcpListener) -> Arc<Slot> {
        Arc::new(Slot {
            listener: Mutex::new(Some(listener)),
            closed: Notify::new(),
        })
    }

    /// The next connection; `None` once the slot is closed.
    pub(crate) async fn accept(&self) -> Option<io::Result<(TcpStream, SocketAddr)>> {
        let polled = std::future::poll_fn(|cx: &mut Context<'_>| match self.listener.lock().as_ref() {
            Some(listener) => listener.poll_accept(cx).map(Some),
            None => Poll::Ready(None),
        });
        tokio::select! {
            accepted = polled => accepted,
            () = self.closed.notified() => None,
        }
    }

    /// Closes the socket now (its port is free when this returns).
    fn close(&self) {
        drop(self.listener.lock().take());
        self.closed.notify_one();
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.lock().as_ref().and_then(|l| l.local_addr().ok())
    }
}

/// The server's listening sockets (in [`crate::state::Shared`]).
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    current: Mutex<Vec<Arc<Slot>>>,
    /// Where rebound slots go to get an accept loop: set once serving.
    serving: Mutex<Option<(mpsc::UnboundedSender<Arc<Slot>>, tokio::runtime::Handle)>>,
}

impl Listeners {
    /// Binds every address of `bind` on `port` at start (0: a free port,
    /// the first listener's, for all); returns the first address.
    pub(crate) async fn bind_at_start(&self, bind: &[String], port: u16) -> io::Result<SocketAddr> {
        let mut slots = vec![];
        let mut port = port;
        for (ip, optional) in addresses(bind)? {
            let listener = match TcpListener::bind(SocketAddr::new(ip, port)).await {
                Ok(l) => l,
                Err(e) if optional && unavailable(&e) => continue,
                Err(e) => return Err(e),
            };
            port = listener.local_addr()?.port();
            slots.push(Slot::new(listener));
        }
        let first = slots
            .first()
            .and_then(|s| s.local_addr())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no bind address"))?;
        *self.current.lock() = slots;
        Ok(first)
    }

    /// The serving task takes the slots bound at start and from now on
    /// receives each rebound one.
    pub(crate) fn serve(&self) -> (Vec<Arc<Slot>>, mpsc::UnboundedReceiver<Arc<Slot>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.serving.lock() = Some((tx, tokio::runtime::Handle::current()));
        (self.current.lock().clone(), rx)
    }

    /// CONFIG SET `port` or `bind`: closes every socket, then binds `bind`
    /// on `port` (0: listen nowhere, as Redis). On failure nothing listens
    /// (the caller rebinds the old settings).
    pub(crate) fn rebind(&self, bind: &[String], port: u16) -> io::Result<()> {
        let mut current = self.current.lock();
        for slot in current.drain(..) {
            slot.close();
        }
        if port == 0 {
            return Ok(());
        }
        let serving = self.serving.lock();
        let Some((tx, runtime)) = serving.as_ref() else {
            return Err(io::Error::other("the server is not serving yet"));
        };
        let _in_runtime = runtime.enter();
        let mut bound = vec![];
        for (ip, optional) in addresses(bind)? {
            let listener = std::net::TcpListener::bind(SocketAddr::new(ip, port))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .and_then(TcpListener::from_std);
            match listener {
                Ok(l) => bound.push(Slot::new(l)),
                Err(e) if optional && unavailable(&e) => continue,
                Err(e) => {
                    for slot in bound {
                        slot.close();
                    }
                    return Err(e);
                }
            }
        }
        for slot in &bound {
            // The serving task is gone only at shutdown, when nothing
            // needs to accept any more.
            let _ = tx.send(slot.clone());
        }
        *current = bound;
        Ok(())
    }
}

/// The addresses of `bind` (none: Redis's all interfaces), each with
/// whether it is optional (`-addr`: skipped where this machine has no
/// such address).
fn addresses(bind: &[String]) -> io::Result<Vec<(IpAddr, bool)>> {
    let defaults: Vec<String> = ALL_INTERFACES.iter().map(|a| a.to_string()).collect();
    let bind = if bind.is_empty() { &defaults[..] } else { bind };
    bind.iter()
        .map(|host| {
            let optional = host.starts_with('-');
            let host = match host.trim_start_matches('-') {
                "*" => "0.0.0.0",
                "::*" => "::",
                h => h,
            };
            let ip: IpAddr = host
                .parse()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("invalid bind address '{host}'")))?;
            Ok((ip, optional))
        })
        .collect()
}

/// Whether binding failed for want of the address or its family here
/// (Redis's `EADDRNOTAVAIL`, `EAFNOSUPPORT`, ... for optional addresses).
fn unavailable(e: &io::Error) -> bool {
    const NO_FAMILY: [i32; 3] = [libc::EAFNOSUPPORT, libc::EPROTONOSUPPORT, libc::ESOCKTNOSUPPORT];
    e.kind() == io::ErrorKind::AddrNotAvailable || e.raw_os_error().is_some_and(|n| NO_FAMILY.contains(&n))
}
