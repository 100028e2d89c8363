//! The Unix-domain listener (`unixsocket`, `unixsocketperm`), as Redis
//! serves it: at start a file left at the path is removed, the socket is
//! bound there and given the configured mode; at shutdown the file is
//! removed. Its clients are served as TCP clients are (see [`super`]); this
//! module only binds, accepts and removes, and never reads or writes a
//! connection.

use std::io;
use std::path::Path;
use std::sync::Arc;

use socket2::{Domain, SockAddr, Socket, Type};
use tokio::net::{UnixListener, UnixStream};

use crate::errors;

/// The bytes of a path `sockaddr_un` holds, its terminating NUL left out
/// (`sizeof(sun_path) - 1` in Redis's check).
const SUN_PATH_MAX: usize = 107;

/// The bound listener and the path its clients are shown under.
#[derive(Debug)]
pub(crate) struct UnixListen {
    listener: UnixListener,
    /// The configured text, unresolved, as Redis shows it (`addr=PATH:0`).
    pub(crate) path: Arc<str>,
}

impl UnixListen {
    /// Binds `path` (removing a file already there, as Redis does) and sets
    /// its mode to `perm` unless 0. The error is Redis's reason, already
    /// logged with its start-up line.
    /// `backlog` is `tcp-backlog`, which Redis gives its Unix socket too.
    pub(crate) fn bind(path: &str, perm: u32, backlog: i32) -> io::Result<UnixListen> {
        // Whatever is there goes, as in Redis ("don't care if this fails").
        let _ = std::fs::remove_file(path);
        let listener = listen(path, perm, backlog).map_err(|why| {
            let line = errors::unix::open_failed(&why);
            tracing::warn!("{line}");
            // A setting that cannot be served, as a bad `bind` address.
            io::Error::new(io::ErrorKind::InvalidInput, line)
        })?;
        Ok(UnixListen {
            listener,
            path: Arc::from(path),
        })
    }

    /// The next connection.
    pub(crate) async fn accept(&self) -> io::Result<UnixStream> {
        self.listener.accept().await.map(|(stream, _)| stream)
    }

    /// Removes the socket file at shutdown, with Redis's lines.
    pub(crate) fn remove_file(path: &str) {
        tracing::info!("{}", errors::unix::REMOVING);
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!("{}", errors::unix::remove_failed(&e));
        }
    }
}

/// socket, bind, chmod, listen, as anet.c's `anetUnixServer` does them;
/// the error is the failing step's reason in anet's words.
fn listen(path: &str, perm: u32, backlog: i32) -> Result<UnixListener, String> {
    if path.len() > SUN_PATH_MAX {
        return Err(errors::unix::too_long(path.len(), SUN_PATH_MAX + 1));
    }
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None).map_err(|e| errors::unix::call_failed("socket", &e))?;
    let addr = SockAddr::unix(path).map_err(|e| errors::unix::call_failed("bind", &e))?;
    socket.bind(&addr).map_err(|e| errors::unix::call_failed("bind", &e))?;
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        // Unchecked, as in anet.c.
        let _ = std::fs::set_permissions(Path::new(path), std::fs::Permissions::from_mode(perm));
    }
    socket
        .listen(backlog)
        .map_err(|e| errors::unix::call_failed("listen", &e))?;
    socket
        .set_nonblocking(true)
        .map_err(|e| errors::unix::call_failed("fcntl", &e))?;
    let std_listener: std::os::unix::net::UnixListener = socket.into();
    UnixListener::from_std(std_listener).map_err(|e| errors::unix::call_failed("listen", &e))
}
