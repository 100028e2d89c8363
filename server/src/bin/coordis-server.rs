//! `coordis-server`: a drop-in for `redis-server` in development.
//!
//! Takes redis-server's command line (an optional config file, then
//! `--directive value...`), logs through `tracing` (RUST_LOG overrides
//! `--loglevel`), and shuts down gracefully on SIGINT, SIGTERM or SHUTDOWN.

use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

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
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => {
            println!(
                "coordis-server v={} (Redis {} compatible)",
                env!("CARGO_PKG_VERSION"),
                coordis::REDIS_VERSION
            );
            return ExitCode::SUCCESS;
        }
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let mut warnings = vec![];
    let config = match coordis::Config::from_args(&args, &mut |w| warnings.push(w)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("coordis-server: configuration error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let level = match config.loglevel.as_str() {
        "debug" => "debug",
        "verbose" => "debug",
        "warning" => "warn",
        "nothing" => "error",
        _ => "info",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    for w in warnings {
        tracing::warn!("{w}");
    }
    let runtime = match coordis::runtime(config.io_threads) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("coordis-server: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let bind = config.bind.join(" ");
        let port = config.port;
        let served = coordis::Builder::from_config(config)
            .serve(
                async {
                    let signal = shutdown_signal().await;
                    tracing::info!("received {signal}, shutting down");
                },
                |addr| {
                    tracing::info!(
                        "coordis {} listening on {} (Redis {} protocol); ready to accept connections",
                        env!("CARGO_PKG_VERSION"),
                        addr,
                        coordis::REDIS_VERSION
                    )
                },
            )
            .await;
        match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("coordis-server: could not listen on {bind} port {port}: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}
