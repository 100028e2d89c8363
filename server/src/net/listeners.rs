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
//!
//! TLS listeners (`tls-port`) are a second set of slots on the same `bind`
//! addresses, marked as such: their accept loop hands each connection to
//! the TLS handshake first. `port 0` with a TLS port listens for TLS only,
//! as Redis does.
//!
//! Every TCP listener of the server (these, the cluster bus, Sentinel's) is
//! made by [`tcp_listen`], as Redis's anet makes them: `tcp-backlog`,
//! `socket-mark-id`, and IPv6 sockets for IPv6 only, so that `bind * -::*`
//! (Redis's default in its `redis.conf`) listens on both families on one
//! port.

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

/// The listening sockets' settings (`tcp-backlog`, `socket-mark-id`;
/// both immutable, as in Redis).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ListenOptions {
    /// The `listen(2)` backlog.
    pub backlog: i32,
    /// The socket's firewall mark (0: none).
    pub mark: u32,
}

impl Default for ListenOptions {
    /// Redis's defaults.
    fn default() -> Self {
        ListenOptions { backlog: 511, mark: 0 }
    }
}

impl ListenOptions {
    pub(crate) fn of(config: &crate::Config) -> ListenOptions {
        ListenOptions {
            backlog: config.tcp_backlog,
            mark: config.socket_mark_id,
        }
    }

    /// Redis's start-up warning when the kernel caps the backlog
    /// (`net.core.somaxconn`) below `tcp-backlog`.
    pub(crate) fn warn_if_capped(&self) {
        let somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok());
        if let Some(somaxconn) = somaxconn.filter(|&n| n > 0 && n < self.backlog) {
            tracing::warn!("{}", crate::errors::os::backlog_capped(self.backlog, somaxconn));
        }
    }
}

/// A non-blocking TCP listener on `addr`, as Redis's `anetTcpServer` makes
/// it: address reuse, IPv6 only on an IPv6 address, bound, listening with
/// the `tcp-backlog`, and marked with `socket-mark-id` when it is set
/// (a refusal, for want of `CAP_NET_ADMIN`, ignored as Redis ignores it).
pub(crate) fn tcp_listen(addr: SocketAddr, options: ListenOptions) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(options.backlog)?;
    if options.mark > 0 {
        let _ = socket.set_mark(options.mark);
    }
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// [`tcp_listen`] for the runtime (inside it).
pub(crate) fn tokio_listen(addr: SocketAddr, options: ListenOptions) -> io::Result<TcpListener> {
    TcpListener::from_std(tcp_listen(addr, options)?)
}

/// One listening socket, emptied when CONFIG SET closes it.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    listener: Mutex<Option<TcpListener>>,
    /// Connections accepted here speak TLS (`tls-port`).
    pub(crate) tls: bool,
    /// Wakes the accept loop once the socket is gone (the socket's own
    /// wakeup goes with it).
    closed: Notify,
}

impl Slot {
    fn new(listener: TcpListener, tls: bool) -> Arc<Slot> {
        Arc::new(Slot {
            listener: Mutex::new(Some(listener)),
            tls,
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
    pub(crate) fn close(&self) {
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
    /// The TLS listeners, rebound apart from the plain ones.
    current_tls: Mutex<Vec<Arc<Slot>>>,
    /// Where rebound slots go to get an accept loop: set once serving.
    serving: Mutex<Option<(mpsc::UnboundedSender<Arc<Slot>>, tokio::runtime::Handle)>>,
    /// How every socket is made, set at start.
    options: Mutex<ListenOptions>,
}

impl Listeners {
    /// Binds every address of `bind` on `port` at start (0: a free port,
    /// the first listener's, for all), for plain clients (`port`, `None`:
    /// none) and for TLS (`tls_port`, `None`: none); returns the first
    /// address of each.
    pub(crate) fn bind_at_start(
        &self,
        bind: &[String],
        port: Option<u16>,
        tls_port: Option<u16>,
        options: ListenOptions,
    ) -> io::Result<(Option<SocketAddr>, Option<SocketAddr>)> {
        *self.options.lock() = options;
        let plain = match port {
            Some(port) => Some(bind_all(bind, port, false, options)?),
            None => None,
        };
        let tls = match tls_port {
            Some(port) => Some(bind_all(bind, port, true, options)?),
            None => None,
        };
        let first = |slots: &Option<Vec<Arc<Slot>>>| -> io::Result<Option<SocketAddr>> {
            match slots {
                None => Ok(None),
                Some(slots) => slots
                    .first()
                    .and_then(|s| s.local_addr())
                    .map(Some)
                    .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no bind address")),
            }
        };
        let addrs = (first(&plain)?, first(&tls)?);
        *self.current.lock() = plain.unwrap_or_default();
        *self.current_tls.lock() = tls.unwrap_or_default();
        Ok(addrs)
    }

    /// The serving task takes the slots bound at start and from now on
    /// receives each rebound one.
    pub(crate) fn serve(&self) -> (Vec<Arc<Slot>>, mpsc::UnboundedReceiver<Arc<Slot>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.serving.lock() = Some((tx, tokio::runtime::Handle::current()));
        let mut slots = self.current.lock().clone();
        slots.extend(self.current_tls.lock().iter().cloned());
        (slots, rx)
    }

    /// CONFIG SET `port` or `bind`: closes every socket, then binds `bind`
    /// on `port` (0: listen nowhere, as Redis). On failure nothing listens
    /// (the caller rebinds the old settings).
    pub(crate) fn rebind(&self, bind: &[String], port: u16) -> io::Result<()> {
        self.rebind_kind(bind, port, false)
    }

    /// [`Listeners::rebind`] for the TLS listeners (`tls-port`).
    pub(crate) fn rebind_tls(&self, bind: &[String], port: u16) -> io::Result<()> {
        self.rebind_kind(bind, port, true)
    }

    /// The port the TLS listeners are bound to (0: none).
    pub(crate) fn tls_port(&self) -> u16 {
        self.current_tls
            .lock()
            .first()
            .and_then(|s| s.local_addr())
            .map_or(0, |a| a.port())
    }

    fn rebind_kind(&self, bind: &[String], port: u16, tls: bool) -> io::Result<()> {
        let mut current = if tls {
            self.current_tls.lock()
        } else {
            self.current.lock()
        };
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
        let options = *self.options.lock();
        let mut bound = vec![];
        for (ip, optional) in addresses(bind)? {
            let listener = tokio_listen(SocketAddr::new(ip, port), options);
            match listener {
                Ok(l) => bound.push(Slot::new(l, tls)),
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

/// Binds every address of `bind` on `port` (0: a free port, the first
/// listener's, for all).
fn bind_all(bind: &[String], port: u16, tls: bool, options: ListenOptions) -> io::Result<Vec<Arc<Slot>>> {
    let mut slots = vec![];
    let mut port = port;
    for (ip, optional) in addresses(bind)? {
        let listener = match tokio_listen(SocketAddr::new(ip, port), options) {
            Ok(l) => l,
            Err(e) if optional && unavailable(&e) => continue,
            Err(e) => return Err(e),
        };
        port = listener.local_addr()?.port();
        slots.push(Slot::new(listener, tls));
    }
    Ok(slots)
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
