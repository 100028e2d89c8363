//! Sentinel's client side: its own command table (Redis's Sentinel answers
//! only these; anything else is `-ERR unknown command`), the connection
//! loop on the server's RESP parser and reply encoder, pub/sub of the
//! Sentinel's events, and every SENTINEL subcommand.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::state::{Instance, Master, Role, State, SRI_FAILOVER_IN_PROGRESS, SRI_O_DOWN, SRI_S_DOWN};
use super::{Shared, HELLO_CHANNEL};
use crate::cmd::flags;
use crate::errors::{self, err, sentinel as text};
use crate::protocol::{ProtocolLimits, Reply, RequestParser};
use crate::REDIS_VERSION;

/// Server-wide counters INFO shows.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) connections: AtomicU64,
    pub(crate) connected: AtomicU64,
    pub(crate) commands: AtomicU64,
    pub(crate) next_id: AtomicU64,
}

/// One client connection's state.
#[derive(Debug)]
struct Client {
    id: u64,
    peer: SocketAddr,
    resp3: bool,
    authenticated: bool,
    name: Option<String>,
    channels: BTreeSet<String>,
    patterns: BTreeSet<String>,
    close: bool,
}

impl Client {
    fn subscriptions(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }
}

type Handler = fn(&Arc<Shared>, &mut Client, &[Bytes]) -> Reply;

/// A row of Sentinel's command table: Redis's name, arity and flags.
struct Row {
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: Handler,
}

const fn row(name: &'static str, arity: i32, flags: u32, handler: Handler) -> Row {
    Row {
        name,
        arity,
        flags,
        handler,
    }
}

/// The commands a Sentinel answers (Redis 7.0.15's sentinel mode).
static TABLE: &[Row] = &[
    row("ping", -1, flags::FAST | flags::SUBSCRIBED_OK, ping),
    row("sentinel", -2, flags::ADMIN, sentinel),
    row("subscribe", -2, flags::PUBSUB | flags::SUBSCRIBED_OK, subscribe),
    row("psubscribe", -2, flags::PUBSUB | flags::SUBSCRIBED_OK, psubscribe),
    row("unsubscribe", -1, flags::PUBSUB | flags::SUBSCRIBED_OK, unsubscribe),
    row("punsubscribe", -1, flags::PUBSUB | flags::SUBSCRIBED_OK, punsubscribe),
    row("publish", 3, flags::PUBSUB | flags::FAST, publish),
    row("info", -1, 0, info),
    row("role", 1, flags::FAST, role),
    row("client", -2, 0, client),
    row("command", -1, 0, command),
    row("hello", -1, flags::NO_AUTH | flags::FAST, hello),
    row("auth", -2, flags::NO_AUTH | flags::FAST, auth),
    row("shutdown", -1, flags::ADMIN, shutdown),
    row("reset", 1, flags::NO_AUTH | flags::FAST | flags::SUBSCRIBED_OK, reset),
];

fn lookup(name: &[u8]) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.name.as_bytes().eq_ignore_ascii_case(name))
}

fn lower(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_lowercase()
}

fn string(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn bulk(s: impl Into<String>) -> Reply {
    Reply::bulk(Bytes::from(s.into()))
}

/// Serves one client until it closes or the Sentinel stops.
pub(crate) async fn serve(shared: Arc<Shared>, mut stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    shared.counters.connections.fetch_add(1, Ordering::Relaxed);
    shared.counters.connected.fetch_add(1, Ordering::Relaxed);
    let mut client = Client {
        id: shared.counters.next_id.fetch_add(1, Ordering::Relaxed) + 1,
        peer,
        resp3: false,
        authenticated: shared.requirepass.is_none(),
        name: None,
        channels: BTreeSet::new(),
        patterns: BTreeSet::new(),
        close: false,
    };
    let mut events = shared.events.subscribe();
    let mut stop = shared.shutdown.subscribe();
    let mut parser = RequestParser::new();
    let limits = ProtocolLimits::default();
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut out = BytesMut::new();
    'conn: loop {
        tokio::select! {
            _ = super::until_stopped(&mut stop) => break,
            read = stream.read_buf(&mut buf) => {
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                loop {
                    match parser.next(&mut buf, &limits) {
                        Ok(Some(args)) => {
                            if args.is_empty() {
                                continue;
                            }
                            let reply = execute(&shared, &mut client, &args);
                            reply.encode(&mut out, client.resp3);
                            if client.close {
                                let _ = stream.write_all(&out).await;
                                break 'conn;
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            errors::protocol(e).encode(&mut out, client.resp3);
                            let _ = stream.write_all(&out).await;
                            break 'conn;
                        }
                    }
                }
            }
            event = events.recv() => {
                let Ok((channel, msg)) = event else { continue };
                if client.channels.contains(&channel) {
                    Reply::Push(vec![bulk("message"), bulk(channel.clone()), bulk(msg.clone())]).encode(&mut out, client.resp3);
                }
                for p in &client.patterns {
                    if crate::store::glob::matches(p.as_bytes(), channel.as_bytes(), false) {
                        Reply::Push(vec![bulk("pmessage"), bulk(p.clone()), bulk(channel.clone()), bulk(msg.clone())]).encode(&mut out, client.resp3);
                    }
                }
            }
        }
        if !out.is_empty() {
            if stream.write_all(&out).await.is_err() {
                break;
            }
            out.clear();
        }
    }
    shared.counters.connected.fetch_sub(1, Ordering::Relaxed);
}

fn execute(shared: &Arc<Shared>, client: &mut Client, args: &[Bytes]) -> Reply {
    shared.counters.commands.fetch_add(1, Ordering::Relaxed);
    let Some(row) = lookup(&args[0]) else {
        return errors::unknown_command(args);
    };
    let argc = args.len() as i32;
    if (row.arity > 0 && argc != row.arity) || (row.arity < 0 && argc < -row.arity) {
        return errors::wrong_args(row.name);
    }
    if !client.authenticated && row.flags & flags::NO_AUTH == 0 {
        return err(errors::NOAUTH);
    }
    if !client.resp3 && client.subscriptions() > 0 && row.flags & flags::SUBSCRIBED_OK == 0 {
        return errors::not_while_subscribed(row.name);
    }
    (row.handler)(shared, client, args)
}

fn ping(_: &Arc<Shared>, client: &mut Client, args: &[Bytes]) -> Reply {
    if args.len() > 2 {
        return errors::wrong_args("ping");
    }
    if client.subscriptions() > 0 && !client.resp3 {
        let payload = args.get(1).cloned().unwrap_or_default();
        return Reply::Array(vec![bulk("pong"), Reply::Bulk(payload)]);
    }
    match args.get(1) {
        Some(a) => Reply::Bulk(a.clone()),
        None => Reply::status("PONG"),
    }
}

fn sub_reply(kind: &str, name: &str, count: usize) -> Reply {
    Reply::Push(vec![bulk(kind), bulk(name), Reply::Int(count as i64)])
}

fn subscribe(_: &Arc<Shared>, client: &mut Client, args: &[Bytes]) -> Reply {
    let mut replies = vec![];
    for a in &args[1..] {
        client.channels.insert(string(a));
        replies.push(sub_reply("subscribe", &string(a), client.subscriptions()));
    }
    Reply::Many(replies)
}

fn psubscribe(_: &Arc<Shared>, client: &mut Client, args: &[Bytes]) -> Reply {
    let mut replies = vec![];
    for a in &args[1..] {
        client.patterns.insert(string(a));
        replies.push(sub_reply("psubscribe", &string(a), client.subscriptions()));
    }
    Reply::Many(replies)
}

fn unsubscribe_in(client: &mut Client, args: &[Bytes], patterns: bool) -> Reply {
    let kind = if patterns { "punsubscribe" } else { "unsubscribe" };
    let names: Vec<String> = if args.len() > 1 {
        args[1..].iter().map(|a| string(a)).collect()
    } else if patterns {
        client.patterns.iter().cloned().collect()
    } else {
        client.channels.iter().cloned().collect()
    };
    if names.is_empty() {
        return Reply::Push(vec![bulk(kind), Reply::Nil, Reply::Int(client.subscriptions() as i64)]);
    }
    let mut replies = vec![];
    for n in names {
        if patterns {
            client.patterns.remove(&n);
        } else {
            client.channels.remove(&n);
        }
        replies.push(sub_reply(kind, &n, client.subscriptions()));
    }
    Reply::Many(replies)
}

fn unsubscribe(_: &Arc<Shared>, client: &mut Client, args: &[Bytes]) -> Reply {
    unsubscribe_in(client, args, false)
}

fn punsubscribe(_: &Arc<Shared>, client: &mut Client, args: &[Bytes]) -> Reply {
    unsubscribe_in(client, args, true)
}

/// PUBLISH: only hello messages, which are processed (not delivered).
fn publish(shared: &Arc<Shared>, _: &mut Client, args: &[Bytes]) -> Reply {
    if &args[1][..] != HELLO_CHANNEL.as_bytes() {
        return err(text::ONLY_HELLO);
    }
    let hello = string(&args[2]);
    shared.with(|st, now| {
        if !hello.contains(&st.g.myid) {
            st.process_hello(&hello, now);
        }
    });
    Reply::Int(1)
}

fn role(shared: &Arc<Shared>, _: &mut Client, _: &[Bytes]) -> Reply {
    let st = shared.state.lock();
    Reply::Array(vec![
        bulk("sentinel"),
        Reply::Array(st.masters.keys().map(|n| bulk(n.clone())).collect()),
    ])
}

fn info(shared: &Arc<Shared>, _: &mut Client, args: &[Bytes]) -> Reply {
    let sections: Vec<String> = args[1..].iter().map(|a| lower(a)).collect();
    let all = sections.is_empty()
        || sections
            .iter()
            .any(|s| s == "all" || s == "everything" || s == "default");
    let want = |s: &str| all || sections.iter().any(|x| x == s);
    let now = shared.now();
    let uptime = now.saturating_sub(shared.started_ms) / 1000;
    let mut parts = vec![];
    if want("server") {
        parts.push(format!(
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:sentinel\r\nos:{}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:tokio\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:10\r\nconfigured_hz:10\r\nlru_clock:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:0\r\ncoordis_version:{}\r\n",
            crate::process::os_name(),
            std::process::id(),
            shared.run_id,
            shared.port,
            shared.clock.now_us(),
            uptime / 86400,
            (now / 1000) & 0xFF_FFFF,
            std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            shared.config_path.display(),
            env!("CARGO_PKG_VERSION"),
        ));
    }
    if want("clients") {
        parts.push(format!(
            "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:10000\r\nclient_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\nblocked_clients:0\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n",
            shared.counters.connected.load(Ordering::Relaxed)
        ));
    }
    if want("stats") {
        parts.push(format!(
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:0\r\npubsub_channels:0\r\npubsub_patterns:0\r\n",
            shared.counters.connections.load(Ordering::Relaxed),
            shared.counters.commands.load(Ordering::Relaxed)
        ));
    }
    if want("sentinel") {
        let st = shared.state.lock();
        let mut s = format!(
            "# Sentinel\r\nsentinel_masters:{}\r\nsentinel_tilt:0\r\nsentinel_tilt_since_seconds:-1\r\nsentinel_running_scripts:0\r\nsentinel_scripts_queue_length:0\r\nsentinel_simulate_failure_flags:{}\r\n",
            st.masters.len(),
            st.g.simfailure_flags
        );
        for (i, m) in st.masters.values().enumerate() {
            let status = if m.inst.flags & SRI_O_DOWN != 0 {
                "odown"
            } else if m.inst.flags & SRI_S_DOWN != 0 {
                "sdown"
            } else {
                "ok"
            };
            s.push_str(&format!(
                "master{i}:name={},status={status},address={}:{},slaves={},sentinels={}\r\n",
                m.inst.name,
                m.inst.host,
                m.inst.port,
                m.replicas.len(),
                m.sentinels.len() + 1
            ));
        }
        parts.push(s);
    }
    Reply::Verbatim(*b"txt", Bytes::from(parts.join("\r\n")))
}

fn client(_: &Arc<Shared>, client: &mut Client, args: &[Bytes]) -> Reply {
    let sub = lower(&args[1]);
    match (sub.as_str(), args.len()) {
        ("id", 2) => Reply::Int(client.id as i64),
        ("getname", 2) => client.name.clone().map_or(Reply::Nil, bulk),
        ("setname", 3) => {
            if !args[2].iter().all(|c| (b'!'..=b'~').contains(c)) {
                return err(errors::CLIENT_NAME_SPACES);
            }
            client.name = (!args[2].is_empty()).then(|| string(&args[2]));
            Reply::Ok
        }
        ("list" | "info", _) => bulk(format!(
            "id={} addr={} laddr= fd=0 name={} age=0 idle=0 flags={} db=0 sub={} psub={} ssub=0 multi=-1 cmd=client|{} user=default resp={}\n",
            client.id,
            client.peer,
            client.name.clone().unwrap_or_default(),
            if client.subscriptions() > 0 { "P" } else { "N" },
            client.channels.len(),
            client.patterns.len(),
            sub,
            if client.resp3 { 3 } else { 2 }
        )),
        ("help", 2) => crate::cmd::server::help_reply(&[
            "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "LIST",
            "    Return information about client connections.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
        ]),
        _ => errors::sub_wrong_args(&args[1], "CLIENT"),
    }
}

fn command(_: &Arc<Shared>, _: &mut Client, args: &[Bytes]) -> Reply {
    let describe = |r: &Row| {
        let mut words = vec![];
        for (bit, word) in [
            (flags::ADMIN, "admin"),
            (flags::PUBSUB, "pubsub"),
            (flags::NO_AUTH, "no_auth"),
            (flags::FAST, "fast"),
        ] {
            if r.flags & bit != 0 {
                words.push(Reply::status(word));
            }
        }
        Reply::Array(vec![
            bulk(r.name),
            Reply::Int(r.arity.into()),
            Reply::Set(words),
            Reply::Int(0),
            Reply::Int(0),
            Reply::Int(0),
            Reply::Set(vec![]),
            Reply::Array(vec![]),
            Reply::Array(vec![]),
            Reply::Array(vec![]),
        ])
    };
    match args.get(1).map(|a| lower(a)).as_deref() {
        None => Reply::Array(TABLE.iter().map(describe).collect()),
        Some("count") => Reply::Int(TABLE.len() as i64),
        Some("info") => Reply::Array(
            args[2..]
                .iter()
                .map(|a| lookup(a).map_or(Reply::NilArray, describe))
                .collect(),
        ),
        Some("docs") => Reply::Map(vec![]),
        Some(_) => errors::unknown_subcommand(&args[1], "COMMAND"),
    }
}

fn hello(shared: &Arc<Shared>, client: &mut Client, args: &[Bytes]) -> Reply {
    let mut version = None;
    let mut i = 1;
    if args.len() >= 2 {
        let v: i64 = match string(&args[1]).parse() {
            Ok(v) => v,
            Err(_) => return err(errors::PROTOCOL_VERSION_NOT_INTEGER),
        };
        if !(2..=3).contains(&v) {
            return err(errors::NOPROTO);
        }
        version = Some(v);
        i = 2;
    }
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = lower(&args[i]);
        if opt == "auth" && more >= 2 {
            if shared.requirepass.as_deref() != Some(&string(&args[i + 2]))
                || !args[i + 1].eq_ignore_ascii_case(b"default")
            {
                return err(errors::WRONGPASS);
            }
            client.authenticated = true;
            i += 3;
        } else if opt == "setname" && more >= 1 {
            client.name = Some(string(&args[i + 1]));
            i += 2;
        } else {
            return errors::hello_option(&args[i]);
        }
    }
    if !client.authenticated {
        return err(errors::HELLO_NOAUTH);
    }
    if let Some(v) = version {
        client.resp3 = v == 3;
    }
    Reply::Map(vec![
        (bulk("server"), bulk("redis")),
        (bulk("version"), bulk(REDIS_VERSION)),
        (bulk("proto"), Reply::Int(if client.resp3 { 3 } else { 2 })),
        (bulk("id"), Reply::Int(client.id as i64)),
        (bulk("mode"), bulk("sentinel")),
        (bulk("role"), bulk("master")),
        (bulk("modules"), Reply::Array(vec![])),
    ])
}

fn auth(shared: &Arc<Shared>, client: &mut Client, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return err(errors::SYNTAX);
    }
    let Some(pass) = &shared.requirepass else {
        return err(errors::AUTH_NOT_CONFIGURED);
    };
    let user_ok = args.len() == 2 || args[1].eq_ignore_ascii_case(b"default");
    if user_ok && args[args.len() - 1][..] == *pass.as_bytes() {
        client.authenticated = true;
        Reply::Ok
    } else {
        err(errors::WRONGPASS)
    }
}

fn shutdown(shared: &Arc<Shared>, client: &mut Client, _: &[Bytes]) -> Reply {
    tracing::warn!("User requested shutdown...");
    shared.shutdown.send_replace(true);
    client.close = true;
    Reply::NOTHING
}

fn reset(shared: &Arc<Shared>, client: &mut Client, _: &[Bytes]) -> Reply {
    client.resp3 = false;
    client.name = None;
    client.channels.clear();
    client.patterns.clear();
    client.authenticated = shared.requirepass.is_none();
    Reply::status("RESET")
}

/// An instance as SENTINEL MASTER / REPLICAS / SENTINELS show it
/// (`addReplySentinelRedisInstance`): a map of bulk strings.
fn instance_reply(i: &Instance, m: Option<&Master>, now: u64) -> Reply {
    let mut f: Vec<(&str, String)> = vec![
        ("name", i.name.clone()),
        ("ip", i.host.clone()),
        ("port", i.port.to_string()),
        ("runid", i.runid.clone().unwrap_or_default()),
        ("flags", i.flag_words()),
        ("link-pending-commands", i.link.pending.max(0).to_string()),
        ("link-refcount", "1".into()),
    ];
    if let Some(m) = m.filter(|m| m.inst.flags & SRI_FAILOVER_IN_PROGRESS != 0) {
        f.push(("failover-state", m.failover_state.word().into()));
    }
    let since = |t: u64| now.saturating_sub(t).to_string();
    f.push((
        "last-ping-sent",
        if i.link.act_ping_time != 0 {
            since(i.link.act_ping_time)
        } else {
            "0".into()
        },
    ));
    f.push(("last-ok-ping-reply", since(i.link.last_avail_time)));
    f.push(("last-ping-reply", since(i.link.last_pong_time)));
    if i.flags & SRI_S_DOWN != 0 {
        f.push(("s-down-time", since(i.s_down_since)));
    }
    if i.flags & SRI_O_DOWN != 0 {
        f.push(("o-down-time", since(i.o_down_since)));
    }
    f.push(("down-after-milliseconds", i.down_after.to_string()));
    if i.role != Role::Sentinel {
        f.push((
            "info-refresh",
            if i.info_refresh != 0 {
                since(i.info_refresh)
            } else {
                "0".into()
            },
        ));
        f.push((
            "role-reported",
            if i.role_reported == Role::Master {
                "master"
            } else {
                "slave"
            }
            .into(),
        ));
        f.push(("role-reported-time", since(i.role_reported_time)));
    }
    if let Some(m) = m {
        f.push(("config-epoch", m.config_epoch.to_string()));
        f.push(("num-slaves", m.replicas.len().to_string()));
        f.push(("num-other-sentinels", m.sentinels.len().to_string()));
        f.push(("quorum", m.quorum.to_string()));
        f.push(("failover-timeout", m.failover_timeout.to_string()));
        f.push(("parallel-syncs", m.parallel_syncs.to_string()));
    }
    if i.role == Role::Replica {
        f.push(("master-link-down-time", i.master_link_down_time.to_string()));
        f.push(("master-link-status", if i.master_link_up { "ok" } else { "err" }.into()));
        f.push(("master-host", i.slave_master_host.clone().unwrap_or_else(|| "?".into())));
        f.push(("master-port", i.slave_master_port.to_string()));
        f.push(("slave-priority", i.slave_priority.to_string()));
        f.push(("slave-repl-offset", i.slave_repl_offset.to_string()));
        f.push(("replica-announced", i.replica_announced.to_string()));
    }
    if i.role == Role::Sentinel {
        f.push(("last-hello-message", since(i.last_hello_time)));
        f.push(("voted-leader", i.leader.clone().unwrap_or_else(|| "?".into())));
        f.push(("voted-leader-epoch", i.leader_epoch.to_string()));
    }
    Reply::Map(f.into_iter().map(|(k, v)| (bulk(k), bulk(v))).collect())
}

const SENTINEL_HELP: &[&str] = &[
    "SENTINEL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CKQUORUM <master-name>",
    "    Check if the current Sentinel configuration is able to reach the quorum",
    "    needed to failover a master and the majority needed to authorize the",
    "    failover.",
    "CONFIG SET <param> <value>",
    "    Set a global Sentinel configuration parameter.",
    "CONFIG GET <param>",
    "    Get global Sentinel configuration parameter.",
    "DEBUG [<param> <value> ...]",
    "    Show a list of configurable time parameters and their values (milliseconds).",
    "    Or update current configurable parameters values (one or more).",
    "GET-MASTER-ADDR-BY-NAME <master-name>",
    "    Return the ip and port number of the master with that name.",
    "FAILOVER <master-name>",
    "    Manually failover a master node without asking for agreement from other",
    "    Sentinels",
    "FLUSHCONFIG",
    "    Force Sentinel to rewrite its configuration on disk, including the current",
    "    Sentinel state.",
    "INFO-CACHE <master-name>",
    "    Return last cached INFO output from masters and all its replicas.",
    "IS-MASTER-DOWN-BY-ADDR <ip> <port> <current-epoch> <runid>",
    "    Check if the master specified by ip:port is down from current Sentinel's",
    "    point of view.",
    "MASTER <master-name>",
    "    Show the state and info of the specified master.",
    "MASTERS",
    "    Show a list of monitored masters and their state.",
    "MONITOR <name> <ip> <port> <quorum>",
    "    Start monitoring a new master with the specified name, ip, port and quorum.",
    "MYID",
    "    Return the ID of the Sentinel instance.",
    "PENDING-SCRIPTS",
    "    Get pending scripts information.",
    "REMOVE <master-name>",
    "    Remove master from Sentinel's monitor list.",
    "REPLICAS <master-name>",
    "    Show a list of replicas for this master and their state.",
    "RESET <pattern>",
    "    Reset masters for specific master name matching this pattern.",
    "SENTINELS <master-name>",
    "    Show a list of Sentinel instances for this master and their state.",
    "SET <master-name> <option> <value> [<option> <value> ...]",
    "    Set configuration parameters for certain masters.",
    "SIMULATE-FAILURE [CRASH-AFTER-ELECTION] [CRASH-AFTER-PROMOTION] [HELP]",
    "    Simulate a Sentinel crash.",
];

/// SENTINEL subcommands' arities (Redis 7.0.15's command table).
const SUBCOMMANDS: &[(&str, i32)] = &[
    ("ckquorum", 3),
    ("config", -3),
    ("debug", -2),
    ("failover", 3),
    ("flushconfig", 2),
    ("get-master-addr-by-name", 3),
    ("help", 2),
    ("info-cache", -3),
    ("is-master-down-by-addr", 6),
    ("master", 3),
    ("masters", 2),
    ("monitor", 6),
    ("myid", 2),
    ("pending-scripts", 2),
    ("remove", 3),
    ("replicas", 3),
    ("reset", 3),
    ("sentinels", 3),
    ("set", -5),
    ("simulate-failure", -3),
    ("slaves", 3),
];

fn flush_and_reply(shared: &Arc<Shared>, st: &State) -> Reply {
    match shared.save(st) {
        Ok(()) => Reply::Ok,
        Err(e) => {
            tracing::warn!("could not rewrite the Sentinel config file: {e}");
            err(text::SAVE_FAILED)
        }
    }
}

fn sentinel(shared: &Arc<Shared>, _: &mut Client, args: &[Bytes]) -> Reply {
    let sub = lower(&args[1]);
    let Some(&(_, arity)) = SUBCOMMANDS.iter().find(|(n, _)| *n == sub) else {
        return errors::unknown_subcommand(&args[1], "SENTINEL");
    };
    let argc = args.len() as i32;
    if (arity > 0 && argc != arity) || (arity < 0 && argc < -arity) {
        return errors::wrong_args(&format!("sentinel|{sub}"));
    }
    let arg = |i: usize| string(&args[i]);
    shared.with(|st, now| match sub.as_str() {
        "help" => crate::cmd::server::help_reply(SENTINEL_HELP),
        "masters" => Reply::Array(
            st.masters
                .values()
                .map(|m| instance_reply(&m.inst, Some(m), now))
                .collect(),
        ),
        "master" => match st.masters.get(&arg(2)) {
            Some(m) => instance_reply(&m.inst, Some(m), now),
            None => err(text::NO_SUCH_MASTER),
        },
        "replicas" | "slaves" => match st.masters.get(&arg(2)) {
            Some(m) => Reply::Array(m.replicas.values().map(|r| instance_reply(r, None, now)).collect()),
            None => err(text::NO_SUCH_MASTER),
        },
        "sentinels" => match st.masters.get(&arg(2)) {
            Some(m) => Reply::Array(m.sentinels.values().map(|s| instance_reply(s, None, now)).collect()),
            None => err(text::NO_SUCH_MASTER),
        },
        "myid" => bulk(st.g.myid.clone()),
        "get-master-addr-by-name" => match st.masters.get(&arg(2)) {
            Some(m) => {
                let (h, p) = m.current_addr();
                Reply::Array(vec![bulk(h), bulk(p.to_string())])
            }
            None => Reply::NilArray,
        },
        "is-master-down-by-addr" => {
            let Ok(port) = arg(3).parse::<u16>() else {
                return err(errors::NOT_INTEGER);
            };
            let Ok(epoch) = arg(4).parse::<u64>() else {
                return err(errors::NOT_INTEGER);
            };
            let (down, leader, leader_epoch) = st.is_master_down(&arg(2), port, epoch, &arg(5), now);
            Reply::Array(vec![
                Reply::Int(down.into()),
                bulk(leader.unwrap_or_else(|| "*".into())),
                Reply::Int(leader_epoch as i64),
            ])
        }
        "reset" => Reply::Int(st.reset_matching(&arg(2), now)),
        "failover" => {
            let name = arg(2);
            let Some(m) = st.masters.get(&name) else {
                return err(text::NO_SUCH_MASTER);
            };
            if m.inst.flags & SRI_FAILOVER_IN_PROGRESS != 0 {
                return err(text::INPROG);
            }
            if !st.can_select_replica(&name, now) {
                return err(text::NOGOODSLAVE);
            }
            tracing::warn!("Executing user requested FAILOVER of '{name}'");
            st.force_failover(&name, now);
            Reply::Ok
        }
        "pending-scripts" => Reply::Array(vec![]),
        "monitor" => {
            let Ok(quorum) = arg(5).parse::<i64>() else {
                return err(text::ERR_INVALID_QUORUM);
            };
            let Ok(port) = arg(4).parse::<i64>() else {
                return err(text::ERR_INVALID_PORT);
            };
            if quorum <= 0 {
                return err(text::ERR_QUORUM);
            }
            let host = arg(3);
            if !st.g.resolve_hostnames && host.parse::<std::net::IpAddr>().is_err() {
                return err(text::ERR_INVALID_IP);
            }
            if !(1..=65535).contains(&port) {
                return err(text::ERR_BAD_PORT);
            }
            let name = arg(2);
            if st.masters.contains_key(&name) {
                return err(text::ERR_DUPLICATE_MASTER);
            }
            let m = Master::new(&name, &host, port as u16, quorum as u32, now);
            st.masters.insert(name.clone(), m);
            let reply = flush_and_reply(shared, st);
            st.event("+monitor", format!("master {name} {host} {port} quorum {quorum}"));
            reply
        }
        "flushconfig" => flush_and_reply(shared, st),
        "remove" => {
            let name = arg(2);
            let Some(m) = st.masters.remove(&name) else {
                return err(text::NO_SUCH_MASTER);
            };
            st.event(
                "-monitor",
                format!("master {} {} {}", m.inst.name, m.inst.host, m.inst.port),
            );
            flush_and_reply(shared, st)
        }
        "ckquorum" => {
            let Some(m) = st.masters.get(&arg(2)) else {
                return err(text::NO_SUCH_MASTER);
            };
            let voters = m.sentinels.len() + 1;
            let usable = 1 + m
                .sentinels
                .values()
                .filter(|s| s.flags & (SRI_S_DOWN | SRI_O_DOWN) == 0)
                .count();
            let no_quorum = usable < m.quorum as usize;
            let no_auth = usable < voters / 2 + 1;
            if !no_quorum && !no_auth {
                Reply::Status(
                    format!("OK {usable} usable Sentinels. Quorum and failover authorization can be reached").into(),
                )
            } else {
                text::noquorum(usable, no_quorum, no_auth)
            }
        }
        "set" => set(shared, st, args, now),
        "config" => config_cmd(shared, st, args),
        "info-cache" => {
            let names: Vec<String> = args[2..].iter().map(|a| string(a)).collect();
            let mut out = vec![];
            for m in st.masters.values().filter(|m| names.contains(&m.inst.name)) {
                out.push(bulk(m.inst.name.clone()));
                let entry = |i: &Instance| {
                    Reply::Array(vec![
                        Reply::Int(if i.info_refresh != 0 {
                            now.saturating_sub(i.info_refresh) as i64
                        } else {
                            0
                        }),
                        i.info.clone().map_or(Reply::Nil, bulk),
                    ])
                };
                let mut infos = vec![entry(&m.inst)];
                infos.extend(m.replicas.values().map(entry));
                out.push(Reply::Array(infos));
            }
            Reply::Array(out)
        }
        "simulate-failure" => {
            let mut flags = 0;
            for a in &args[2..] {
                match lower(a).as_str() {
                    "crash-after-election" => flags |= 1,
                    "crash-after-promotion" => flags |= 2,
                    "help" => return Reply::Array(vec![bulk("crash-after-election"), bulk("crash-after-promotion")]),
                    _ => return err(text::UNKNOWN_SIMULATION),
                }
            }
            st.g.simfailure_flags = flags;
            Reply::Ok
        }
        "debug" => debug(st, args),
        _ => errors::unknown_subcommand(&args[1], "SENTINEL"),
    })
}

/// SENTINEL SET <master> <option> <value> ...
fn set(shared: &Arc<Shared>, st: &mut State, args: &[Bytes], _now: u64) -> Reply {
    let name = string(&args[2]);
    if !st.masters.contains_key(&name) {
        return err(text::NO_SUCH_MASTER);
    }
    let deny = st.g.deny_scripts_reconfig;
    let mut j = 3;
    let mut changes = 0;
    while j < args.len() {
        let option = lower(&args[j]);
        let more = args.len() - 1 - j;
        if more == 0 {
            return text::set_unknown(&string(&args[j]));
        }
        let value = string(&args[j + 1]);
        let positive = || value.parse::<i64>().ok().filter(|v| *v > 0).map(|v| v as u64);
        let m = st.masters.get_mut(&name).expect("checked above");
        match option.as_str() {
            "down-after-milliseconds" => {
                let Some(v) = positive() else {
                    return text::set_invalid(&value, &option);
                };
                m.inst.down_after = v;
                for i in m.replicas.values_mut().chain(m.sentinels.values_mut()) {
                    i.down_after = v;
                }
            }
            "failover-timeout" => {
                let Some(v) = positive() else {
                    return text::set_invalid(&value, &option);
                };
                m.failover_timeout = v;
            }
            "parallel-syncs" => {
                let Some(v) = positive() else {
                    return text::set_invalid(&value, &option);
                };
                m.parallel_syncs = v;
            }
            "quorum" => {
                let Some(v) = positive() else {
                    return text::set_invalid(&value, &option);
                };
                m.quorum = v as u32;
            }
            "auth-pass" => {
                m.auth_pass = (!value.is_empty()).then(|| value.clone());
                drop_group_links(m);
            }
            "auth-user" => {
                m.auth_user = (!value.is_empty()).then(|| value.clone());
                drop_group_links(m);
            }
            "notification-script" | "client-reconfig-script" if deny => return err(text::SCRIPTS_DENIED),
            _ => return text::set_unknown(&string(&args[j])),
        }
        let shown = if option == "auth-pass" {
            "******".to_string()
        } else {
            value.clone()
        };
        let desc = format!(
            "master {} {} {} {} {}",
            m.inst.name,
            m.inst.host,
            m.inst.port,
            string(&args[j]),
            shown
        );
        st.event("+set", desc);
        changes += 1;
        j += 2;
    }
    if changes > 0 {
        flush_and_reply(shared, st)
    } else {
        Reply::Ok
    }
}

fn drop_group_links(m: &mut Master) {
    for i in std::iter::once(&mut m.inst).chain(m.replicas.values_mut()) {
        i.link.cmd = None;
        i.link.pubsub = None;
        i.link.gen += 1;
        i.link.disconnected = true;
        i.link.pc_connected = false;
    }
}

fn config_cmd(shared: &Arc<Shared>, st: &mut State, args: &[Bytes]) -> Reply {
    let op = lower(&args[2]);
    if op == "get" && args.len() == 4 {
        let pattern = args[3].clone();
        let g = &st.g;
        let yn = |b: bool| if b { "yes" } else { "no" }.to_string();
        let rows = [
            ("resolve-hostnames", yn(g.resolve_hostnames)),
            ("announce-hostnames", yn(g.announce_hostnames)),
            ("announce-ip", g.announce_ip.clone().unwrap_or_default()),
            ("announce-port", g.announce_port.to_string()),
            ("sentinel-user", g.sentinel_user.clone().unwrap_or_default()),
            ("sentinel-pass", g.sentinel_pass.clone().unwrap_or_default()),
        ];
        return Reply::Map(
            rows.into_iter()
                .filter(|(n, _)| crate::store::glob::matches(&pattern, n.as_bytes(), true))
                .map(|(n, v)| (bulk(n), bulk(v)))
                .collect(),
        );
    }
    if op != "set" || args.len() != 5 {
        return err(text::CONFIG_USAGE);
    }
    let option = lower(&args[3]);
    let value = string(&args[4]);
    let yn = match value.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    };
    let bad = || text::config_set_invalid(&value, &string(&args[3]));
    match option.as_str() {
        "resolve-hostnames" => {
            st.g.resolve_hostnames = match yn {
                Some(b) => b,
                None => return bad(),
            }
        }
        "announce-hostnames" => {
            st.g.announce_hostnames = match yn {
                Some(b) => b,
                None => return bad(),
            }
        }
        "announce-ip" => st.g.announce_ip = (!value.is_empty()).then(|| value.clone()),
        "announce-port" => match value.parse::<u16>() {
            Ok(p) => st.g.announce_port = p,
            Err(_) => return bad(),
        },
        "sentinel-user" => st.g.sentinel_user = (!value.is_empty()).then(|| value.clone()),
        "sentinel-pass" => st.g.sentinel_pass = (!value.is_empty()).then(|| value.clone()),
        _ => return text::config_set_unknown(&string(&args[3])),
    }
    flush_and_reply(shared, st)
}

fn debug(st: &mut State, args: &[Bytes]) -> Reply {
    let p = &mut st.g.periods;
    if args.len() == 2 {
        let rows = [
            ("INFO-PERIOD", p.info),
            ("PING-PERIOD", p.ping),
            ("ASK-PERIOD", p.ask),
            ("PUBLISH-PERIOD", p.publish),
            ("DEFAULT-DOWN-AFTER", p.default_down_after),
            ("DEFAULT-FAILOVER-TIMEOUT", p.default_failover_timeout),
            ("TILT-TRIGGER", p.tilt_trigger),
            ("TILT-PERIOD", p.tilt_period),
            ("SLAVE-RECONF-TIMEOUT", p.slave_reconf_timeout),
            ("MIN-LINK-RECONNECT-PERIOD", p.min_link_reconnect),
            ("ELECTION-TIMEOUT", p.election_timeout),
            ("SCRIPT-MAX-RUNTIME", p.script_max_runtime),
            ("SCRIPT-RETRY-DELAY", p.script_retry_delay),
        ];
        return Reply::Map(rows.into_iter().map(|(n, v)| (bulk(n), bulk(v.to_string()))).collect());
    }
    let mut j = 2;
    while j < args.len() {
        let name = lower(&args[j]);
        let Some(value) = args.get(j + 1).map(|a| string(a)) else {
            return text::debug_unknown(&name);
        };
        let Some(v) = value.parse::<i64>().ok().filter(|v| *v > 0).map(|v| v as u64) else {
            return text::debug_invalid(&value, &name);
        };
        let slot = match name.as_str() {
            "info-period" => &mut p.info,
            "ping-period" => &mut p.ping,
            "ask-period" => &mut p.ask,
            "publish-period" => &mut p.publish,
            "default-down-after" => &mut p.default_down_after,
            "default-failover-timeout" => &mut p.default_failover_timeout,
            "tilt-trigger" => &mut p.tilt_trigger,
            "tilt-period" => &mut p.tilt_period,
            "slave-reconf-timeout" => &mut p.slave_reconf_timeout,
            "min-link-reconnect-period" => &mut p.min_link_reconnect,
            "election-timeout" => &mut p.election_timeout,
            "script-max-runtime" => &mut p.script_max_runtime,
            "script-retry-delay" => &mut p.script_retry_delay,
            _ => return text::debug_unknown(&name),
        };
        *slot = v;
        j += 2;
    }
    Reply::Ok
}
