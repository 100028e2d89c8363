//! Sentinel's outbound links to the instances it watches: the command link
//! (PING, INFO, PUBLISH, the failover's MULTI/SLAVEOF/EXEC, SENTINEL
//! IS-MASTER-DOWN-BY-ADDR to other Sentinels) and the pub/sub link that
//! listens on `__sentinel__:hello`, as Redis's Sentinel opens both.
//!
//! A link is a task that owns one TCP connection at a time and reconnects
//! when told to (the timer asks again each tick while it is down). What it
//! hears goes back to the state under its lock, tagged with the link's
//! generation so that a reply from a closed or replaced link is dropped.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};

use super::Shared;

/// How long a connection attempt may take: Redis's hiredis links connect
/// without blocking and are judged by the PINGs that follow; a bound here
/// keeps a black-holed address from holding the task forever.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(1000);

/// A reply as read from an instance (RESP2: what Redis answers a client
/// that never sent HELLO).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Resp {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Bytes>),
    Array(Option<Vec<Resp>>),
}

impl Resp {
    /// The text of a status, error or bulk reply.
    pub(crate) fn text(&self) -> Option<String> {
        match self {
            Resp::Status(s) | Resp::Error(s) => Some(s.clone()),
            Resp::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

/// What a command sent on a command link is for: which callback its reply
/// goes to (Redis's `sentinel*ReplyCallback`s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplyTo {
    Ping,
    Info,
    Publish,
    IsMasterDown,
    Discard,
}

/// One request for a command link.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) args: Vec<String>,
    pub(crate) reply_to: ReplyTo,
}

/// Which of the two connections a link task runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Command,
    PubSub,
}

/// Where a link's events go: the instance it belongs to, found again under
/// the state lock (the instance may be gone by then).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// The master's name.
    pub(crate) master: String,
    /// Which instance of that master's group.
    pub(crate) role: super::state::Role,
    /// `ip:port` of the instance (the master's own for `Role::Master`).
    pub(crate) addr: String,
}

/// What a link task reports to the state.
#[derive(Debug)]
pub(crate) enum Event {
    Connected { local_ip: String },
    Disconnected,
    Reply(ReplyTo, Resp),
    Hello(String),
}

/// The state's handle on a running link task: dropping it ends the task.
#[derive(Debug)]
pub(crate) struct Handle {
    pub(crate) requests: mpsc::UnboundedSender<Request>,
    /// Closes the current connection (Redis's `instanceLinkCloseConnection`),
    /// e.g. when PINGs go unanswered; the task reconnects on the next ask.
    pub(crate) close: Arc<Notify>,
    /// Asks a disconnected task to connect (each timer tick while down).
    pub(crate) reconnect: Arc<Notify>,
    /// Tells the task to stop: its instance is gone.
    pub(crate) stop: Arc<Notify>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.stop.notify_one();
    }
}

/// Credentials and the name the link's client gets on the instance.
#[derive(Clone, Debug, Default)]
pub(crate) struct Login {
    pub(crate) user: Option<String>,
    pub(crate) pass: Option<String>,
    pub(crate) client_name: String,
}

/// Starts a link task to `addr` reporting to `target` with generation `gen`.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    target: Target,
    kind: Kind,
    gen: u64,
    host: String,
    port: u16,
    login: Login,
) -> Handle {
    let (tx, rx) = mpsc::unbounded_channel();
    let close = Arc::new(Notify::new());
    let reconnect = Arc::new(Notify::new());
    let stop = Arc::new(Notify::new());
    let task = LinkTask {
        shared,
        target,
        kind,
        gen,
        host,
        port,
        login,
        close: close.clone(),
        reconnect: reconnect.clone(),
        stop: stop.clone(),
    };
    tokio::spawn(task.run(rx));
    Handle {
        requests: tx,
        close,
        reconnect,
        stop,
    }
}

struct LinkTask {
    shared: Arc<Shared>,
    target: Target,
    kind: Kind,
    gen: u64,
    host: String,
    port: u16,
    login: Login,
    close: Arc<Notify>,
    reconnect: Arc<Notify>,
    stop: Arc<Notify>,
}

impl LinkTask {
    fn report(&self, event: Event) {
        self.shared.link_event(&self.target, self.kind, self.gen, event);
    }

    async fn run(self, mut rx: mpsc::UnboundedReceiver<Request>) {
        loop {
            let connected = tokio::select! {
                _ = self.stop.notified() => return,
                c = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((self.host.as_str(), self.port))) => c,
            };
            match connected {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    let local_ip = stream.local_addr().map(|a| a.ip().to_string()).unwrap_or_default();
                    self.report(Event::Connected { local_ip });
                    let stopped = tokio::select! {
                        _ = self.stop.notified() => true,
                        _ = self.close.notified() => false,
                        _ = self.serve(stream, &mut rx) => false,
                    };
                    self.report(Event::Disconnected);
                    if stopped {
                        return;
                    }
                }
                _ => self.report(Event::Disconnected),
            }
            // Requests queued for a connection that is gone are lost, as
            // hiredis fails them when its context is freed.
            while rx.try_recv().is_ok() {}
            tokio::select! {
                _ = self.stop.notified() => return,
                _ = self.reconnect.notified() => {}
            }
        }
    }

    /// Runs one connection until it fails.
    async fn serve(&self, stream: TcpStream, rx: &mut mpsc::UnboundedReceiver<Request>) {
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        let mut hello = vec![];
        if let Some(pass) = &self.login.pass {
            let mut auth = vec!["AUTH".to_string()];
            auth.extend(self.login.user.clone());
            auth.push(pass.clone());
            hello.push(auth);
        }
        hello.push(vec!["CLIENT".into(), "SETNAME".into(), self.login.client_name.clone()]);
        if self.kind == Kind::PubSub {
            hello.push(vec!["SUBSCRIBE".into(), super::HELLO_CHANNEL.into()]);
        }
        for args in &hello {
            if write.write_all(&encode(args)).await.is_err() {
                return;
            }
        }
        if self.kind == Kind::PubSub {
            // The AUTH and SETNAME replies, then every message.
            loop {
                let Ok(reply) = read_reply(&mut read).await else { return };
                self.shared.pubsub_activity(&self.target, self.gen);
                if let Resp::Array(Some(items)) = &reply {
                    if items.len() == 3 && items[0].text().as_deref() == Some("message") {
                        if let Some(payload) = items[2].text() {
                            self.report(Event::Hello(payload));
                        }
                    }
                }
            }
        }
        for _ in &hello {
            if read_reply(&mut read).await.is_err() {
                return;
            }
        }
        // Requests go out as they come and replies are matched in order
        // (RESP answers in order), so that a slow INFO does not hold a
        // PING. Each request's purpose is queued before its bytes go out,
        // so it is there when the reply comes; the reader reads all the
        // time, so a closed connection is seen at once (as hiredis sees it),
        // not at the next request.
        let (sent_tx, mut sent_rx) = mpsc::unbounded_channel::<ReplyTo>();
        let writer = async {
            while let Some(req) = rx.recv().await {
                if sent_tx.send(req.reply_to).is_err() {
                    return;
                }
                if write.write_all(&encode(&req.args)).await.is_err() {
                    return;
                }
            }
        };
        let reader = async {
            loop {
                let Ok(reply) = read_reply(&mut read).await else { return };
                if let Ok(reply_to) = sent_rx.try_recv() {
                    self.report(Event::Reply(reply_to, reply));
                }
            }
        };
        tokio::select! {
            _ = writer => {}
            _ = reader => {}
        }
    }
}

fn encode(args: &[String]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads one RESP2 reply (nested arrays read iteratively).
async fn read_reply<R: tokio::io::AsyncRead + Unpin>(read: &mut BufReader<R>) -> std::io::Result<Resp> {
    let bad = || std::io::Error::other("bad reply");
    // (items so far, how many the array has)
    let mut stack: Vec<(Vec<Resp>, usize)> = vec![];
    loop {
        let mut line = String::new();
        if read.read_line(&mut line).await? == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        let line = line.trim_end_matches(['\r', '\n']);
        let (tag, rest) = line.split_at_checked(1).ok_or_else(bad)?;
        let mut value = match tag {
            "+" => Resp::Status(rest.into()),
            "-" => Resp::Error(rest.into()),
            ":" => Resp::Int(rest.parse().map_err(|_| bad())?),
            "$" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n < 0 {
                    Resp::Bulk(None)
                } else {
                    let mut buf = vec![0u8; n as usize + 2];
                    read.read_exact(&mut buf).await?;
                    buf.truncate(n as usize);
                    Resp::Bulk(Some(buf.into()))
                }
            }
            "*" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n <= 0 {
                    Resp::Array((n == 0).then(Vec::new))
                } else {
                    stack.push((Vec::with_capacity(n as usize), n as usize));
                    continue;
                }
            }
            _ => return Err(bad()),
        };
        loop {
            let Some((items, want)) = stack.last_mut() else {
                return Ok(value);
            };
            items.push(value);
            if items.len() < *want {
                break;
            }
            let (items, _) = stack.pop().ok_or_else(bad)?;
            value = Resp::Array(Some(items));
        }
    }
}
