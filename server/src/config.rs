//! Server settings: defaults, redis.conf / command-line directives, and the
//! CONFIG GET / CONFIG SET view of them.
//!
//! `coordis-server` reads the same syntax as `redis-server`: an optional
//! config file path first, then `--directive value...` pairs, each directive
//! exactly as in redis.conf. Directives coordis implements are listed in
//! [`Config::apply`]; directives Redis has but coordis has no use for
//! (persistence, daemonizing, ...) are accepted, remembered for CONFIG GET, and
//! logged as ignored, so existing scripts keep working. Anything else is an
//! error, as in Redis.

use std::collections::BTreeMap;

use crate::protocol::split_args;
use crate::store::glob;

/// All settings, with Redis's defaults unless noted.
#[derive(Clone, Debug)]
pub struct Config {
    /// Addresses to listen on. Default `127.0.0.1` (loopback only).
    pub bind: Vec<String>,
    /// TCP port. Default 6379; 0 picks a free port (embedded use).
    pub port: u16,
    /// Password of the `default` user; `None` means no authentication.
    pub requirepass: Option<Secret>,
    /// Number of databases (SELECT 0..n-1). Default 16.
    pub databases: usize,
    /// Connection limit; the next client gets `ERR max number of clients reached`. Default 10000.
    pub maxclients: usize,
    /// Log level: debug, verbose, notice or warning. Default notice.
    pub loglevel: String,
    /// Close connections idle for this many seconds; 0 = never. Default 0.
    pub timeout: u64,
    /// TCP keepalive interval in seconds; 0 = off. Default 300.
    pub tcp_keepalive: u64,
    /// Largest bulk string accepted in a request and largest string value. Default 512 MB.
    pub proto_max_bulk_len: usize,
    /// Most arguments in one request (`proto-max-multibulk-len`, coordis's
    /// own). Default 1,048,576; Redis 7.0 accepts up to 2^31-1.
    pub proto_max_multibulk_len: usize,
    /// A client whose unparsed input passes this many bytes is disconnected
    /// (`client-query-buffer-limit`). Default 1 GB.
    pub client_query_buffer_limit: usize,
    /// With no password set, refuse clients that do not connect from
    /// 127.0.0.1 or ::1 with Redis's `-DENIED` text. Default yes.
    pub protected_mode: bool,
    /// Active-expiry frequency (times per second). Default 10.
    pub hz: u32,
    /// Threads serving connections in `coordis-server` (tokio workers).
    /// Default 1, as Redis's `io-threads`: on small machines one thread plus
    /// the client's beats two contending for the keyspace lock; raise it on
    /// machines with cores to spare and many concurrent clients.
    pub io_threads: usize,
    /// Milliseconds a script may run before other clients get `-BUSY`
    /// (`busy-reply-threshold`, alias `lua-time-limit`). Default 5000.
    pub busy_reply_threshold: u64,
    /// Bytes the Lua VM may allocate (`lua-memory-limit`, coordis's own;
    /// Redis has no limit). A script past it fails; the server lives on.
    /// Default 256 MB; 0 disables the limit.
    pub lua_memory_limit: usize,
    /// Keyspace notification classes (`notify-keyspace-events`), as
    /// [`crate::notify`] flags. Default: none.
    pub notify_keyspace_events: u32,
    /// Redis directives accepted but without effect in coordis, by name.
    pub ignored: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec!["127.0.0.1".into()],
            port: 6379,
            requirepass: None,
            databases: 16,
            maxclients: 10000,
            loglevel: "notice".into(),
            timeout: 0,
            tcp_keepalive: 300,
            proto_max_bulk_len: 512 * 1024 * 1024,
            proto_max_multibulk_len: 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            protected_mode: true,
            hz: 10,
            io_threads: 1,
            busy_reply_threshold: 5000,
            lua_memory_limit: 256 * 1024 * 1024,
            notify_keyspace_events: 0,
            ignored: IGNORED.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }
}

/// A password. Its `Debug` output is redacted, so logging a [`Config`]
/// never shows it; [`Secret::expose`] is the one way to read it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Redis directives coordis accepts without acting on them, with the value
/// CONFIG GET reports until one is given.
const IGNORED: &[(&str, &str)] = &[
    ("save", "3600 1 300 100 60 10000"),
    ("appendonly", "no"),
    ("appendfsync", "everysec"),
    ("appendfilename", "appendonly.aof"),
    ("daemonize", "no"),
    ("supervised", "no"),
    ("pidfile", ""),
    ("logfile", ""),
    ("dir", "."),
    ("dbfilename", "dump.rdb"),
    ("tcp-backlog", "511"),
    ("always-show-logo", "no"),
    ("set-proc-title", "yes"),
    ("stop-writes-on-bgsave-error", "yes"),
    ("rdbcompression", "yes"),
    ("rdbchecksum", "yes"),
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("lazyfree-lazy-eviction", "no"),
    ("lazyfree-lazy-expire", "no"),
    ("lazyfree-lazy-server-del", "no"),
    ("lazyfree-lazy-user-del", "no"),
    ("slowlog-log-slower-than", "10000"),
    ("slowlog-max-len", "128"),
    ("latency-monitor-threshold", "0"),
    ("enable-debug-command", "no"),
    ("unixsocket", ""),
    ("unixsocketperm", "0"),
    ("replica-read-only", "yes"),
    ("repl-diskless-sync", "yes"),
    ("cluster-enabled", "no"),
    ("activerehashing", "yes"),
    ("dynamic-hz", "yes"),
    (
        "client-output-buffer-limit",
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    ),
];

/// Why CONFIG SET refused a value.
#[derive(Debug, PartialEq)]
pub enum SetError {
    /// Not a parameter coordis knows.
    Unknown,
    /// Known, but the value is invalid: Redis's reason text.
    Invalid(String),
}

fn parse_num<T: std::str::FromStr>(value: &str) -> Result<T, SetError> {
    value
        .trim()
        .parse()
        .map_err(|_| SetError::Invalid("argument couldn't be parsed into an integer".into()))
}

/// A byte size of at least 1 MB, with Redis's error text for the two
/// directives that share this range (`proto-max-bulk-len`,
/// `client-query-buffer-limit`).
fn parse_bytes_from_1mb(value: &str) -> Result<usize, SetError> {
    match parse_bytes(value)? {
        n if n < 1024 * 1024 => Err(SetError::Invalid(
            "argument must be between 1048576 and 9223372036854775807 inclusive".into(),
        )),
        n => Ok(n),
    }
}

fn parse_bytes(value: &str) -> Result<usize, SetError> {
    let v = value.trim().to_ascii_lowercase();
    let (digits, mult) = if let Some(d) = v.strip_suffix("gb") {
        (d, 1 << 30)
    } else if let Some(d) = v.strip_suffix("mb") {
        (d, 1 << 20)
    } else if let Some(d) = v.strip_suffix("kb") {
        (d, 1 << 10)
    } else if let Some(d) = v.strip_suffix('g') {
        (d, 1_000_000_000)
    } else if let Some(d) = v.strip_suffix('m') {
        (d, 1_000_000)
    } else if let Some(d) = v.strip_suffix('k') {
        (d, 1000)
    } else {
        (v.as_str(), 1)
    };
    let n: usize = digits
        .parse()
        .map_err(|_| SetError::Invalid("argument couldn't be parsed into an integer".into()))?;
    n.checked_mul(mult)
        .ok_or_else(|| SetError::Invalid("argument couldn't be parsed into an integer".into()))
}

impl Config {
    /// Applies one directive given at startup (config file or command line).
    /// `Ok(false)` means it was accepted but has no effect in coordis.
    pub fn apply(&mut self, name: &str, values: &[String]) -> Result<bool, String> {
        let name = name.to_ascii_lowercase();
        let joined = values.join(" ");
        let one = || -> Result<&str, String> {
            match values {
                [v] => Ok(v.as_str()),
                _ => Err("wrong number of arguments".to_string()),
            }
        };
        match name.as_str() {
            "bind" => {
                if values.is_empty() {
                    return Err("wrong number of arguments".into());
                }
                self.bind = values.to_vec();
            }
            "port" | "databases" | "io-threads" => {
                let v = one()?;
                self.set_runtime_inner(&name, v, true).map_err(describe)?;
            }
            "requirepass"
            | "maxclients"
            | "loglevel"
            | "timeout"
            | "tcp-keepalive"
            | "proto-max-bulk-len"
            | "proto-max-multibulk-len"
            | "client-query-buffer-limit"
            | "protected-mode"
            | "hz"
            | "lua-time-limit"
            | "busy-reply-threshold"
            | "lua-memory-limit" => {
                let v = one()?;
                self.set_runtime_inner(&name, v, true).map_err(describe)?;
            }
            _ if self.ignored.contains_key(&name) => {
                self.ignored.insert(name, joined);
                return Ok(false);
            }
            _ => return Err("Bad directive or wrong number of arguments".into()),
        }
        Ok(true)
    }

    /// CONFIG SET of one parameter (names are lower case).
    pub fn set_runtime(&mut self, name: &str, value: &str) -> Result<(), SetError> {
        self.set_runtime_inner(name, value, false)
    }

    fn set_runtime_inner(&mut self, name: &str, value: &str, startup: bool) -> Result<(), SetError> {
        match name {
            "requirepass" => self.requirepass = (!value.is_empty()).then(|| Secret(value.to_string())),
            "maxclients" => {
                let n: usize = parse_num(value)?;
                if n < 1 {
                    return Err(SetError::Invalid(
                        "argument must be between 1 and 4294967295 inclusive".into(),
                    ));
                }
                self.maxclients = n;
            }
            "loglevel" => {
                let v = value.to_ascii_lowercase();
                if !["debug", "verbose", "notice", "warning", "nothing"].contains(&v.as_str()) {
                    return Err(SetError::Invalid(
                        "argument(s) must be one of the following: debug, verbose, notice, warning, nothing".into(),
                    ));
                }
                self.loglevel = v;
            }
            "timeout" => self.timeout = parse_num(value)?,
            "tcp-keepalive" => self.tcp_keepalive = parse_num(value)?,
            "proto-max-bulk-len" => self.proto_max_bulk_len = parse_bytes_from_1mb(value)?,
            "proto-max-multibulk-len" => {
                let n: usize = parse_num(value)?;
                if !(1..=i32::MAX as usize).contains(&n) {
                    return Err(SetError::Invalid(
                        "argument must be between 1 and 2147483647 inclusive".into(),
                    ));
                }
                self.proto_max_multibulk_len = n;
            }
            "client-query-buffer-limit" => self.client_query_buffer_limit = parse_bytes_from_1mb(value)?,
            "protected-mode" => {
                self.protected_mode = match value.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(SetError::Invalid("argument must be 'yes' or 'no'".into())),
                }
            }
            "hz" => {
                let n: u32 = parse_num(value)?;
                self.hz = n.clamp(1, 500);
            }
            "lua-time-limit" | "busy-reply-threshold" => self.busy_reply_threshold = parse_num(value)?,
            "lua-memory-limit" => self.lua_memory_limit = parse_bytes(value)?,
            "notify-keyspace-events" => {
                self.notify_keyspace_events = crate::notify::parse_flags(value)
                    .ok_or_else(|| SetError::Invalid("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()))?
            }
            "port" if startup => self.port = parse_num(value)?,
            "databases" if startup => {
                let n: usize = parse_num(value)?;
                if n < 1 {
                    return Err(SetError::Invalid(
                        "argument must be between 1 and 2147483647 inclusive".into(),
                    ));
                }
                self.databases = n;
            }
            "io-threads" if startup => {
                let n: usize = parse_num(value)?;
                if !(1..=128).contains(&n) {
                    return Err(SetError::Invalid("argument must be between 1 and 128 inclusive".into()));
                }
                self.io_threads = n;
            }
            "port" | "databases" | "bind" | "io-threads" => {
                return Err(SetError::Invalid("can't set immutable config".into()))
            }
            _ if self.ignored.contains_key(name) => {
                self.ignored.insert(name.to_string(), value.to_string());
            }
            _ => return Err(SetError::Unknown),
        }
        Ok(())
    }

    /// Every parameter and its current value, as CONFIG GET shows it.
    pub fn all(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("bind".to_string(), self.bind.join(" ")),
            ("port".to_string(), self.port.to_string()),
            (
                "requirepass".to_string(),
                self.requirepass
                    .as_ref()
                    .map(|p| p.expose().to_string())
                    .unwrap_or_default(),
            ),
            ("databases".to_string(), self.databases.to_string()),
            ("maxclients".to_string(), self.maxclients.to_string()),
            ("loglevel".to_string(), self.loglevel.clone()),
            ("timeout".to_string(), self.timeout.to_string()),
            ("tcp-keepalive".to_string(), self.tcp_keepalive.to_string()),
            ("proto-max-bulk-len".to_string(), self.proto_max_bulk_len.to_string()),
            (
                "proto-max-multibulk-len".to_string(),
                self.proto_max_multibulk_len.to_string(),
            ),
            (
                "client-query-buffer-limit".to_string(),
                self.client_query_buffer_limit.to_string(),
            ),
            (
                "protected-mode".to_string(),
                if self.protected_mode { "yes" } else { "no" }.to_string(),
            ),
            ("hz".to_string(), self.hz.to_string()),
            ("io-threads".to_string(), self.io_threads.to_string()),
            (
                "busy-reply-threshold".to_string(),
                self.busy_reply_threshold.to_string(),
            ),
            ("lua-time-limit".to_string(), self.busy_reply_threshold.to_string()),
            ("lua-memory-limit".to_string(), self.lua_memory_limit.to_string()),
            (
                "notify-keyspace-events".to_string(),
                crate::notify::flags_to_string(self.notify_keyspace_events),
            ),
        ];
        out.extend(self.ignored.iter().map(|(k, v)| (k.clone(), v.clone())));
        out
    }

    /// Parameters whose name matches a CONFIG GET pattern (case-insensitive).
    pub fn matching(&self, pattern: &[u8]) -> Vec<(String, String)> {
        self.all()
            .into_iter()
            .filter(|(name, _)| glob::matches(pattern, name.as_bytes(), true))
            .collect()
    }

    /// Reads redis.conf syntax: one directive per line, `#` comments,
    /// arguments split like redis-cli (quotes allowed).
    pub fn apply_file_text(&mut self, text: &str, warn: &mut dyn FnMut(String)) -> Result<(), String> {
        for (lineno, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let Some(words) = split_args(trimmed.as_bytes()) else {
                return Err(format!("line {}: unbalanced quotes in configuration line", lineno + 1));
            };
            let words: Vec<String> = words
                .into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect();
            match self.apply(&words[0], &words[1..]) {
                Ok(true) => {}
                Ok(false) => warn(format!(
                    "directive '{}' is accepted but has no effect in coordis",
                    words[0]
                )),
                Err(e) => return Err(format!("line {}: '{}': {}", lineno + 1, trimmed, e)),
            }
        }
        Ok(())
    }

    /// Reads a redis-server command line (without the program name): an
    /// optional config file path, then `--directive value ...` groups.
    pub fn from_args(args: &[String], warn: &mut dyn FnMut(String)) -> Result<Config, String> {
        let mut config = Config::default();
        let mut rest = args;
        if let Some(first) = args.first() {
            if !first.starts_with("--") {
                let text =
                    std::fs::read_to_string(first).map_err(|e| format!("can't open config file '{first}': {e}"))?;
                config.apply_file_text(&text, warn)?;
                rest = &args[1..];
            }
        }
        let mut i = 0;
        while i < rest.len() {
            let Some(name) = rest[i].strip_prefix("--") else {
                return Err(format!("unexpected argument '{}'", rest[i]));
            };
            let mut values = vec![];
            i += 1;
            while i < rest.len() && !(rest[i].starts_with("--") && rest[i].len() > 2) {
                values.push(rest[i].clone());
                i += 1;
            }
            match config.apply(name, &values) {
                Ok(true) => {}
                Ok(false) => warn(format!("directive '{name}' is accepted but has no effect in coordis")),
                Err(e) => return Err(format!("'--{name} {}': {e}", values.join(" "))),
            }
        }
        Ok(config)
    }
}

fn describe(e: SetError) -> String {
    match e {
        SetError::Unknown => "Bad directive or wrong number of arguments".into(),
        SetError::Invalid(why) => why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn redis_server_command_line() {
        let mut warnings = vec![];
        let c = Config::from_args(
            &args(&[
                "--port",
                "7000",
                "--save",
                "",
                "--appendonly",
                "no",
                "--requirepass",
                "pw",
            ]),
            &mut |w| warnings.push(w),
        )
        .unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.requirepass.as_ref().map(Secret::expose), Some("pw"));
        assert_eq!(c.ignored["save"], "");
        assert_eq!(warnings.len(), 2);
        assert!(Config::from_args(&args(&["--nosuch", "1"]), &mut |_| {}).is_err());
        assert!(Config::from_args(&args(&["--port", "abc"]), &mut |_| {}).is_err());
    }

    #[test]
    fn config_file_syntax() {
        let mut c = Config::default();
        c.apply_file_text("# comment\nport 7001\nbind 127.0.0.1 ::1\nsave \"\"\n", &mut |_| {})
            .unwrap();
        assert_eq!(c.port, 7001);
        assert_eq!(c.bind, vec!["127.0.0.1", "::1"]);
    }

    #[test]
    fn runtime_set_and_get() {
        let mut c = Config::default();
        assert_eq!(c.set_runtime("nosuch", "1"), Err(SetError::Unknown));
        assert!(matches!(c.set_runtime("maxclients", "abc"), Err(SetError::Invalid(_))));
        c.set_runtime("maxclients", "5").unwrap();
        assert_eq!(c.matching(b"maxcl*"), vec![("maxclients".to_string(), "5".to_string())]);
        assert!(c.set_runtime("port", "1").is_err());
    }
}
