//! The connections this server opens itself (a replica's link to its
//! primary, the cluster bus's links), from `bind-source-addr` when it is
//! set, as Redis's `anetTcpNonBlockBestEffortBindConnect` opens them: each
//! address the host resolves to is tried in turn, the socket bound to the
//! source address first; when no connection could be made that way, they
//! are tried again without it (best effort).

use std::io;
use std::net::SocketAddr;

use tokio::net::{TcpSocket, TcpStream};

/// Connects to `host:port`, leaving from `source` (empty: the kernel's
/// choice of local address).
pub(crate) async fn connect(host: &str, port: u16, source: &str) -> io::Result<TcpStream> {
    let targets: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    connect_to(&targets, source).await
}

/// [`connect`] to an address already resolved.
pub(crate) async fn connect_addr(addr: SocketAddr, source: &str) -> io::Result<TcpStream> {
    connect_to(&[addr], source).await
}

/// The first of `targets` that accepts a connection, from `source` if it
/// can, else from anywhere.
async fn connect_to(targets: &[SocketAddr], source: &str) -> io::Result<TcpStream> {
    if !source.is_empty() {
        if let Ok(stream) = try_each(targets, Some(source)).await {
            return Ok(stream);
        }
    }
    try_each(targets, None).await
}

/// The first of `targets` that accepts a connection from `source`.
async fn try_each(targets: &[SocketAddr], source: Option<&str>) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
    for &target in targets {
        match connect_one(target, source).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn connect_one(target: SocketAddr, source: Option<&str>) -> io::Result<TcpStream> {
    let socket = match target {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    if let Some(source) = source {
        // The first of the source's addresses the socket can be bound to
        // (one of the target's family).
        let mut bound = Err(io::Error::new(io::ErrorKind::AddrNotAvailable, "no source address"));
        for local in tokio::net::lookup_host((source, 0)).await? {
            bound = socket.bind(local);
            if bound.is_ok() {
                break;
            }
        }
        bound?;
    }
    socket.connect(target).await
}
