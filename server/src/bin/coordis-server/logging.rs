//! Where `coordis-server`'s log goes and what its lines look like.
//!
//! - Format (`log-format`, coordis's own directive): `redis`, the default,
//!   writes Redis's line, `pid:role dd Mon yyyy hh:mm:ss.mmm <level> message`
//!   (level `.` debug, `-` verbose, `*` notice, `#` warning), so tools that
//!   read Redis logs read coordis's; `tracing` writes tracing-subscriber's
//!   own format, with event fields and module paths.
//! - Destination (`logfile`): empty, stderr (Redis writes to stdout; coordis
//!   keeps stdout for the one JSON ready line a fixture reads); otherwise
//!   the file, opened for appending at startup (an unwritable file stops the
//!   start, as in Redis). `syslog-enabled yes` also sends each message, as
//!   Redis does, to syslog with `syslog-ident` and `syslog-facility`.
//! - Colour only in the `tracing` format, only on a terminal, and never with
//!   `NO_COLOR` set (<https://no-color.org>).

use std::ffi::CString;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber `config` describes; `Err` is why it could
/// not (the log file cannot be opened).
pub(crate) fn init(config: &coordis::Config) -> Result<(), String> {
    let level = match config.loglevel.as_str() {
        "debug" => "trace",
        "verbose" => "debug",
        "warning" => "warn",
        "nothing" => "error",
        _ => "info",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let sink = if config.logfile.is_empty() {
        Sink::Stderr
    } else {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.logfile)
            .map_err(|e| format!("Can't open the log file: {e}"))?;
        Sink::File(Arc::new(Mutex::new(file)))
    };
    let syslog = config
        .syslog_enabled
        .then(|| Syslog::open(&config.syslog_ident, &config.syslog_facility));
    let colour = matches!(sink, Sink::Stderr)
        && std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let registry = tracing_subscriber::registry().with(filter).with(syslog);
    let installed = if config.log_format == "tracing" {
        registry
            .with(tracing_subscriber::fmt::layer().with_writer(sink).with_ansi(colour))
            .try_init()
    } else {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(sink)
                    .with_ansi(false)
                    .event_format(RedisFormat),
            )
            .try_init()
    };
    installed.map_err(|e| e.to_string())
}

/// The log's destination (see the module docs).
#[derive(Clone)]
enum Sink {
    Stderr,
    /// Shared by every line's writer; each line is written whole.
    File(Arc<Mutex<std::fs::File>>),
}

/// One line's writer: collects the line, writes it in one call when dropped,
/// so lines of concurrent threads never interleave.
struct Line {
    sink: Sink,
    buf: Vec<u8>,
}

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        // A log that cannot be written is no reason to stop serving.
        let _ = match &self.sink {
            Sink::Stderr => std::io::stderr().lock().write_all(&self.buf),
            Sink::File(file) => match file.lock() {
                Ok(mut f) => f.write_all(&self.buf),
                Err(_) => Ok(()),
            },
        };
    }
}

impl<'a> MakeWriter<'a> for Sink {
    type Writer = Line;
    fn make_writer(&'a self) -> Line {
        Line {
            sink: self.clone(),
            buf: Vec::with_capacity(128),
        }
    }
}

/// Redis's level mark for a tracing level (`loglevel` maps debug to TRACE,
/// verbose to DEBUG, notice to INFO, warning to WARN and above).
fn level_mark(level: &Level) -> char {
    match *level {
        Level::TRACE => '.',
        Level::DEBUG => '-',
        Level::INFO => '*',
        Level::WARN | Level::ERROR => '#',
    }
}

/// The role letter of Redis's log lines when it is not the server's own
/// (`M` or `S`, [`coordis::internals::role_letter`]): `X` in Sentinel
/// mode, as Redis writes it, and `M` for a process serving several
/// servers (a local cluster or replicated set), whose roles differ. Set
/// once, at start.
pub(crate) static ROLE: std::sync::OnceLock<char> = std::sync::OnceLock::new();

/// Redis's line: `pid:M 01 Dec 2026 23:48:12.062 * message` (role `M`, `S`
/// on a replica, `X` for a Sentinel, see [`ROLE`]), the event's other
/// fields after the message as `name=value`.
struct RedisFormat;

impl<S, N> FormatEvent<S, N> for RedisFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _: &FmtContext<'_, S, N>, mut w: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        let mut text = Message::default();
        event.record(&mut text);
        writeln!(
            w,
            "{}:{} {} {} {}",
            std::process::id(),
            ROLE.get().copied().unwrap_or_else(coordis::internals::role_letter),
            local_timestamp(),
            level_mark(event.metadata().level()),
            text.0
        )
    }
}

/// An event's message and its other fields, as one line of text.
#[derive(Default)]
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

/// Now in local time as Redis writes it: `01 Dec 2026 23:48:12.062`.
fn local_timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: localtime_r fills the zeroed `tm` from a valid time_t; strftime
    // writes at most `buf.len()` bytes into `buf` from the filled `tm` and a
    // NUL-terminated format.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return String::new();
        }
        let mut buf = [0u8; 32];
        let n = libc::strftime(buf.as_mut_ptr().cast(), buf.len(), c"%d %b %Y %H:%M:%S".as_ptr(), &tm);
        format!("{}.{:03}", String::from_utf8_lossy(&buf[..n]), now.subsec_millis())
    }
}

/// Messages to syslog, as Redis sends them: the message text alone, at the
/// priority of its level.
struct Syslog;

impl Syslog {
    fn open(ident: &str, facility: &str) -> Syslog {
        let facility = match facility {
            "user" => libc::LOG_USER,
            "local1" => libc::LOG_LOCAL1,
            "local2" => libc::LOG_LOCAL2,
            "local3" => libc::LOG_LOCAL3,
            "local4" => libc::LOG_LOCAL4,
            "local5" => libc::LOG_LOCAL5,
            "local6" => libc::LOG_LOCAL6,
            "local7" => libc::LOG_LOCAL7,
            _ => libc::LOG_LOCAL0,
        };
        // openlog keeps the pointer: the identity lives as long as the process.
        let ident: &'static std::ffi::CStr = Box::leak(
            CString::new(ident.replace('\0', ""))
                .expect("no NUL")
                .into_boxed_c_str(),
        );
        // SAFETY: `ident` is NUL-terminated and never freed.
        unsafe {
            libc::openlog(
                ident.as_ptr(),
                libc::LOG_PID | libc::LOG_NDELAY | libc::LOG_NOWAIT,
                facility,
            )
        };
        Syslog
    }
}

impl<S: Subscriber> Layer<S> for Syslog {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let priority = match *event.metadata().level() {
            Level::TRACE => libc::LOG_DEBUG,
            Level::DEBUG => libc::LOG_INFO,
            Level::INFO => libc::LOG_NOTICE,
            Level::WARN | Level::ERROR => libc::LOG_WARNING,
        };
        let mut text = Message::default();
        event.record(&mut text);
        let Ok(text) = CString::new(text.0.replace('\0', "")) else {
            return;
        };
        // SAFETY: a "%s" format with one NUL-terminated argument.
        unsafe { libc::syslog(priority, c"%s".as_ptr(), text.as_ptr()) };
    }
}
