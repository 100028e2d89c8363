//! `coordis-server`: a drop-in for `redis-server` in development.
//!
//! Takes redis-server's command line (an optional config file, then
//! `--directive value...`), logs as Redis does (see [`logging`]; RUST_LOG
//! overrides `--loglevel`), and shuts down gracefully on SIGINT, SIGTERM or SHUTDOWN:
//! a signal as `shutdown-on-sigint` / `shutdown-on-sigterm` say (a final
//! save that fails without `force` keeps it running, as Redis), then
//! within the drain deadline, busy script or not (a second SIGINT exits at
//! once).
//!
//! Once listening it prints one JSON line on stdout, for whatever started
//! it (a test fixture with `--port 0`):
//! `{"ready":true,"port":54321,"addr":"127.0.0.1:54321","pid":1234}`
//! (with a TLS port also `"tls_port":54322`), and writes the port to
//! `--port-file PATH` when that is set (removed again at a clean exit).
//! `--tls-port 0` serves TLS on a free port (in a config file, `tls-port
//! 0` keeps its Redis meaning: no TLS).
//!
//! `--cluster-local N [--cluster-replicas R]` starts a whole cluster in this
//! one process instead ([`coordis::ServerSet::cluster`]): N primaries (and
//! R replicas each) on consecutive ports from `--port` (free ones with
//! `--port 0`), every other option applied to each node. Its ready line,
//! printed once every node reports `cluster_state:ok`, lists them:
//! `{"ready":true,"port":P,"addr":..,"url":..,"cluster_state":"ok","nodes":[{"port":P,"addr":..,"url":..,"id":..,"role":"master"},..],"pid":..}`.
//!
//! `--replicas-local N [--sentinels-local S]` starts a primary with N
//! replicas and S Sentinels watching it (as `mymaster`) in this one process
//! ([`coordis::ServerSet::replicated`]), on consecutive ports from `--port`
//! (primary, replicas, Sentinels; free ones with `--port 0`), every other
//! option applied to each server, all on one test clock (`COORDIS.CLOCK` on
//! any server moves it for the Sentinels too). Its ready line, printed once
//! every replica is caught up and every Sentinel sees the set:
//! `{"ready":true,"port":P,"addr":..,"url":..,"master_name":"mymaster","primary":{"port":P,"addr":..,"url":..},"replicas":[{..},..],"sentinels":[{"port":..,"addr":..},..],"pid":..}`.

use std::process::ExitCode;

#[path = "coordis-server/logging.rs"]
mod logging;
#[path = "coordis-server/supervise.rs"]
mod supervise;

/// How long after SIGTERM / SIGINT the process exits whatever still runs:
/// the drain's deadline, the grace a stopped script gets, and the
/// runtime's own shutdown.
const EXIT_DEADLINE: std::time::Duration = coordis::DRAIN_DEADLINE
    .saturating_add(coordis::SCRIPT_STOP_GRACE)
    .saturating_add(coordis::SCRIPT_STOP_GRACE);

const USAGE: &str = "Usage: coordis-server [/path/to/redis.conf] [options]
       coordis-server -v or --version
       coordis-server -h or --help

Examples:
       coordis-server (run with defaults: 127.0.0.1:6379)
       coordis-server /etc/redis/6379.conf
       coordis-server --port 7777
       coordis-server --port 7000 --save '' --appendonly no
       coordis-server --requirepass secret --maxclients 100";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => {
            // redis-server's line, which tools parse for `v=`; `build=`
            // names coordis.
            println!(
                "Redis server v={} sha=00000000:0 malloc=libc bits={} build=coordis-{}",
                coordis::REDIS_VERSION,
                usize::BITS,
                env!("CARGO_PKG_VERSION")
            );
            return ExitCode::SUCCESS;
        }
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    if let Some(at) = args.iter().position(|a| a == "--sentinel") {
        args.remove(at);
        return sentinel_main(&args);
    }
    let (local, replicated) = match cluster_local_args(&mut args).and_then(|c| Ok((c, replicas_local_args(&mut args)?)))
    {
        Ok(local) => local,
        Err(e) => {
            eprintln!("coordis-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    if local.is_some() && replicated.is_some() {
        eprintln!("coordis-server: --cluster-local and --replicas-local do not go together");
        return ExitCode::FAILURE;
    }
    let mut warnings = vec![];
    let config = match coordis::Config::from_args(&args, &mut |w| warnings.push(w)) {
        Ok(mut c) => {
            c.tls.free_port = c.tls.port == 0 && asks_free_tls_port(&args);
            c
        }
        Err(e) => {
            // Redis's own report (a bad line's FATAL CONFIG FILE ERROR block).
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // Redis's order: the supervisor found, then the fork to the background
    // (not under a supervisor), before any thread or log file exists.
    let (supervisor, supervision_note) = supervise::detect(&config.supervised);
    let background = config.daemonize && supervisor.is_none();
    if background {
        if let Err(e) = supervise::daemonize() {
            eprintln!("coordis-server: cannot go to the background: {e}");
            return ExitCode::FAILURE;
        }
    }
    if let Err(e) = logging::init(&config) {
        eprintln!("coordis-server: {e}");
        return ExitCode::FAILURE;
    }
    // Redis's startup lines, which tools wait for ("Ready to accept
    // connections" below).
    tracing::warn!("oO0OoO0OoO0Oo coordis is starting oO0OoO0OoO0Oo");
    tracing::warn!(
        "coordis version={}, Redis version={}, bits={}, pid={}, just started",
        env!("CARGO_PKG_VERSION"),
        coordis::REDIS_VERSION,
        usize::BITS,
        std::process::id()
    );
    tracing::warn!("Configuration loaded");
    for w in warnings {
        tracing::warn!("{w}");
    }
    if let Some(text) = supervision_note {
        tracing::warn!("{text}");
    }
    // Removed when `main` returns.
    let _pidfile = supervise::PidFile::create(&config.pidfile, background);
    // Before the runtime's threads exist, so that they inherit the mask.
    let signalled = watch_signals();
    let runtime = match coordis::runtime(config.io_threads) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("coordis-server: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if local.is_some() || replicated.is_some() {
        // Several servers, several roles: the lines keep `M`.
        let _ = logging::ROLE.set('M');
    }
    if let Some((masters, replicas)) = local {
        let code = runtime.block_on(cluster_local_main(config, masters, replicas, signalled.first()));
        runtime.shutdown_timeout(coordis::SCRIPT_STOP_GRACE);
        return code;
    }
    if let Some((replicas, sentinels)) = replicated {
        let code = runtime.block_on(replicas_local_main(config, replicas, sentinels, signalled.first()));
        runtime.shutdown_timeout(coordis::SCRIPT_STOP_GRACE);
        return code;
    }
    let code = runtime.block_on(async move {
        let bind = config.bind.join(" ");
        let port = config.port;
        let mode = if config.cluster.enabled {
            "cluster"
        } else {
            "standalone"
        };
        let port_file = (!config.port_file.is_empty()).then(|| std::path::PathBuf::from(&config.port_file));
        let replica = !config.replica.replicaof.is_empty();
        let unixsocket = (!config.unixsocket.is_empty()).then(|| config.unixsocket.clone());
        let Signals { rx, stopping: flag } = signalled;
        let served = coordis::Builder::from_config(config)
            .serve_signals(
                rx,
                || stopping(&flag),
                |addr, tls_addr| {
                    tracing::info!("Running mode={mode}, port={}.", addr.port());
                    tracing::warn!("Server initialized");
                    tracing::info!("Ready to accept connections");
                    announce(addr, tls_addr, unixsocket.as_deref(), port_file.as_deref());
                    if let Some(supervisor) = supervisor {
                        supervise::ready(supervisor, replica);
                    }
                },
            )
            .await;
        if let Some(path) = &port_file {
            let _ = std::fs::remove_file(path);
        }
        match served {
            Ok(()) => ExitCode::SUCCESS,
            // Logged already (Redis's `exit(1)` after a failed write of the
            // append-only file under `appendfsync always`).
            Err(e) if e.get_ref().is_some_and(|inner| inner.is::<coordis::Fatal>()) => ExitCode::FAILURE,
            // A refused setting (TLS that cannot be configured, a bad
            // address): the error says it all.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                eprintln!("coordis-server: {e}");
                ExitCode::FAILURE
            }
            Err(e) => {
                eprintln!("coordis-server: could not listen on {bind} port {port}: {e}");
                ExitCode::FAILURE
            }
        }
    });
    // Dropping the runtime would wait for every worker, one running a
    // script that never returns too: the drain has had its deadline, and
    // the process exits whatever is left.
    runtime.shutdown_timeout(coordis::SCRIPT_STOP_GRACE);
    code
}

/// Takes `--NAME n` out of `args`: `Some(n)` when it is there.
fn take_count(args: &mut Vec<String>, name: &str) -> Result<Option<usize>, String> {
    let Some(at) = args.iter().position(|a| a.eq_ignore_ascii_case(name)) else {
        return Ok(None);
    };
    let value = args.get(at + 1).ok_or_else(|| format!("{name} needs a number"))?;
    let n = value
        .parse()
        .map_err(|_| format!("{name} needs a number, not {value:?}"))?;
    args.drain(at..at + 2);
    Ok(Some(n))
}

/// Takes `--cluster-local N` and `--cluster-replicas R` out of `args`:
/// `Some((N, R))` when the first is there.
fn cluster_local_args(args: &mut Vec<String>) -> Result<Option<(usize, usize)>, String> {
    let masters = take_count(args, "--cluster-local")?;
    let replicas = take_count(args, "--cluster-replicas")?;
    match (masters, replicas) {
        (Some(m), r) => Ok(Some((m, r.unwrap_or(0)))),
        (None, Some(_)) => Err("--cluster-replicas goes with --cluster-local".into()),
        (None, None) => Ok(None),
    }
}

/// Takes `--replicas-local N` and `--sentinels-local S` out of `args`:
/// `Some((N, S))` when the first is there.
fn replicas_local_args(args: &mut Vec<String>) -> Result<Option<(usize, usize)>, String> {
    let replicas = take_count(args, "--replicas-local")?;
    let sentinels = take_count(args, "--sentinels-local")?;
    match (replicas, sentinels) {
        (Some(r), s) => Ok(Some((r, s.unwrap_or(0)))),
        (None, Some(_)) => Err("--sentinels-local goes with --replicas-local".into()),
        (None, None) => Ok(None),
    }
}

/// The local set, or `None` once the failure to start the `what` is logged
/// and printed.
fn started_or_report(what: &str, started: std::io::Result<coordis::ServerSet>) -> Option<coordis::ServerSet> {
    match started {
        Ok(set) => Some(set),
        Err(e) => {
            tracing::warn!("the local {what} did not start: {e}");
            eprintln!("coordis-server: the local {what} did not start: {e}");
            None
        }
    }
}

/// One member of a ready line: `{"port":P,"addr":"..","url":"redis://.."}`.
fn member_json(addr: std::net::SocketAddr) -> String {
    format!(
        "{{\"port\":{},\"addr\":\"{addr}\",\"url\":\"redis://{addr}\"}}",
        addr.port()
    )
}

/// Prints a ready line and flushes it.
fn print_ready(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// `--replicas-local`: the primary, its replicas and Sentinels in this
/// process until a signal; the ready line once the set is ready.
async fn replicas_local_main(
    config: coordis::Config,
    replicas: usize,
    sentinels: usize,
    signalled: impl std::future::Future<Output = ()>,
) -> ExitCode {
    let port = config.port;
    let started = coordis::ServerSet::replicated_builder(replicas, sentinels)
        .port(port)
        .config(config)
        .start();
    let Some(set) = started_or_report("replicated set", started.await) else {
        return ExitCode::FAILURE;
    };
    tracing::info!("Running mode=replicas-local, replicas={replicas}, sentinels={sentinels}.");
    tracing::info!("Ready to accept connections");
    let primary = set.server(0).addr();
    let replica_list: Vec<String> = (1..set.len()).map(|i| member_json(set.server(i).addr())).collect();
    let sentinel_list: Vec<String> = set
        .sentinel_addrs()
        .into_iter()
        .map(|a| format!("{{\"port\":{},\"addr\":\"{a}\"}}", a.port()))
        .collect();
    print_ready(&format!(
        "{{\"ready\":true,\"port\":{},\"addr\":\"{primary}\",\"url\":\"redis://{primary}\",\"master_name\":\"{}\",\"primary\":{},\"replicas\":[{}],\"sentinels\":[{}],\"pid\":{}}}",
        primary.port(),
        set.master_name().unwrap_or_default(),
        member_json(primary),
        replica_list.join(","),
        sentinel_list.join(","),
        std::process::id()
    ));
    signalled.await;
    set.shutdown().await;
    ExitCode::SUCCESS
}

/// `--cluster-local`: the cluster in this process until a signal; the ready
/// line once every node is `ok`.
async fn cluster_local_main(
    config: coordis::Config,
    masters: usize,
    replicas: usize,
    signalled: impl std::future::Future<Output = ()>,
) -> ExitCode {
    let port = config.port;
    let started = coordis::ServerSet::cluster_builder(masters, replicas)
        .port(port)
        .config(config)
        .start();
    let Some(set) = started_or_report("cluster", started.await) else {
        return ExitCode::FAILURE;
    };
    tracing::info!("Running mode=cluster-local, nodes={}.", set.len());
    tracing::info!("Ready to accept connections");
    let nodes: Vec<String> = (0..set.len())
        .map(|i| {
            let addr = set.server(i).addr();
            let role = if set.primaries().contains(&i) {
                "master"
            } else {
                "slave"
            };
            format!(
                "{{\"port\":{},\"addr\":\"{addr}\",\"url\":\"redis://{addr}\",\"id\":\"{}\",\"role\":\"{role}\"}}",
                addr.port(),
                set.node_id(i).unwrap_or_default()
            )
        })
        .collect();
    let first = set.server(0).addr();
    let line = format!(
        "{{\"ready\":true,\"port\":{},\"addr\":\"{first}\",\"url\":\"redis://{first}\",\"cluster_state\":\"ok\",\"nodes\":[{}],\"pid\":{}}}",
        first.port(),
        nodes.join(","),
        std::process::id()
    );
    print_ready(&line);
    signalled.await;
    set.shutdown().await;
    ExitCode::SUCCESS
}

/// Sentinel mode (`coordis-server sentinel.conf --sentinel`): the same
/// logging, signals and ready line as the server, then
/// [`coordis::sentinel::Sentinel`] until SHUTDOWN or a signal.
fn sentinel_main(args: &[String]) -> ExitCode {
    let _ = logging::ROLE.set('X');
    if let Err(e) = logging::init(&coordis::Config::default()) {
        eprintln!("coordis-server: {e}");
        return ExitCode::FAILURE;
    }
    tracing::warn!("oO0OoO0OoO0Oo coordis is starting oO0OoO0OoO0Oo");
    let signalled = watch_signals();
    let runtime = match coordis::runtime(1) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("coordis-server: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async move {
        let sentinel = match coordis::sentinel::Sentinel::start(args).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("{e}");
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        tracing::info!("Running mode=sentinel, port={}.", sentinel.addr().port());
        tracing::info!("Ready to accept connections");
        announce(sentinel.addr(), None, None, None);
        let stop = sentinel.stopper();
        tokio::select! {
            () = signalled.first() => stop(),
            _ = sentinel.wait() => {}
        }
        ExitCode::SUCCESS
    });
    runtime.shutdown_timeout(coordis::SCRIPT_STOP_GRACE);
    code
}

/// Tells whoever started the server where it listens: the ready line on
/// stdout (with the Unix socket's path when there is one), and the port
/// file (written whole under another name, then renamed, so a reader never
/// sees half a number).
fn announce(
    addr: std::net::SocketAddr,
    tls_addr: Option<std::net::SocketAddr>,
    unixsocket: Option<&str>,
    port_file: Option<&std::path::Path>,
) {
    use std::io::Write;
    if let Some(path) = port_file {
        let partial = path.with_extension("partial");
        let written =
            std::fs::write(&partial, format!("{}\n", addr.port())).and_then(|()| std::fs::rename(&partial, path));
        if let Err(e) = written {
            tracing::warn!("cannot write the port file {}: {e}", path.display());
        }
    }
    let tls = tls_addr.map_or(String::new(), |a| format!(",\"tls_port\":{}", a.port()));
    let unix = unixsocket.map_or(String::new(), |p| format!(",\"unixsocket\":{}", json_string(p)));
    let line = format!(
        "{{\"ready\":true,\"port\":{},\"addr\":\"{}\"{tls}{unix},\"pid\":{}}}",
        addr.port(),
        addr,
        std::process::id()
    );
    // Nobody reading stdout is no reason to stop.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// `text` as a JSON string, quoted and escaped.
fn json_string(text: &str) -> String {
    let mut out = String::from('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether the command line (not a config file) sets `--tls-port 0`.
fn asks_free_tls_port(args: &[String]) -> bool {
    args.windows(2)
        .any(|w| w[0].eq_ignore_ascii_case("--tls-port") && w[1].trim() == "0")
}

/// SIGTERM and SIGINT as the server hears them ([`watch_signals`]).
struct Signals {
    /// Every signal, in order: the server decides what each does
    /// (`shutdown-on-sigint` / `-sigterm`; a failed final save keeps it
    /// running).
    rx: tokio::sync::mpsc::UnboundedReceiver<coordis::StopSignal>,
    /// Set once a signal's shutdown goes ahead ([`Signals::stopping`]).
    stopping: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Signals {
    /// The first signal, for the modes that stop on any (Sentinel, the
    /// local cluster): it counts as a shutdown going ahead.
    async fn first(mut self) {
        let _ = self.rx.recv().await;
        stopping(&self.stopping);
    }
}

/// A signal's shutdown goes ahead: from now on a second SIGINT exits at
/// once, and a watchdog exits [`EXIT_DEADLINE`] later whatever still runs.
fn stopping(flag: &std::sync::atomic::AtomicBool) {
    if flag.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return;
    }
    let _ = std::thread::Builder::new().name("coordis-exit".into()).spawn(|| {
        std::thread::sleep(EXIT_DEADLINE);
        tracing::warn!("shutdown did not finish in {EXIT_DEADLINE:?}: exiting now");
        std::process::exit(1);
    });
}

/// SIGTERM and SIGINT, taken by a thread of their own (blocked in every
/// other thread) rather than by the runtime: a runtime whose workers are all
/// inside a script still hears them. Each is passed on to the server; a
/// SIGINT while a shutdown goes ahead exits at once, as Redis's second
/// SIGINT does.
fn watch_signals() -> Signals {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopping = flag.clone();
    // SAFETY: sigset operations on a local set; pthread_sigmask on this
    // (the main) thread, before any other thread is started.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let spawned = std::thread::Builder::new()
        .name("coordis-signals".into())
        .spawn(move || loop {
            let mut signal: libc::c_int = 0;
            // SAFETY: waits for one of the blocked signals in `set`.
            if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
                continue;
            }
            let (name, which) = if signal == libc::SIGINT {
                ("SIGINT", coordis::StopSignal::Interrupt)
            } else {
                ("SIGTERM", coordis::StopSignal::Terminate)
            };
            if which == coordis::StopSignal::Interrupt && flag.load(std::sync::atomic::Ordering::Acquire) {
                tracing::warn!("You insist... exiting now.");
                std::process::exit(1);
            }
            tracing::warn!("Received {name} scheduling shutdown...");
            let _ = tx.send(which);
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch for signals: {e}");
    }
    Signals { rx, stopping }
}
