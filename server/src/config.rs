//! Server settings: one table of directives ([`DIRECTIVES`]) that startup
//! flags, config files, `CONFIG GET`, `CONFIG SET` and the defaults all read.
//!
//! `coordis-server` reads the same syntax as `redis-server`: an optional
//! config file path first, then `--directive value...` pairs, each directive
//! exactly as in redis.conf. A directive is one row of the table (compare
//! Redis's `static_configs[]` in config.c): its name and aliases, its default
//! (as redis.conf would spell it), whether CONFIG SET may change it, how its
//! value is checked and shown, where it is stored, and what a change must
//! reach beyond this struct ([`Effect`]). Every directive of Redis 7.0.15
//! has a row: those coordis has no use for (replication, cluster,
//! daemonizing, ...) are checked as Redis checks them, remembered for CONFIG
//! GET, logged once as ignored at startup, so existing config files and
//! scripts keep working. Anything else is an error, as in Redis.
//!
//! Config files are read as Redis reads them: `include` (wildcards, relative
//! to the working directory as `dir` lines move it), Redis's deprecated
//! names, the command line's options as lines after the file's. CONFIG
//! REWRITE is [`rewrite`]'s.
//!
//! Adding a directive: a field in [`Config`] (if it has an effect) and a row.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::errors;
use crate::protocol::split_args;

#[path = "config_rewrite.rs"]
pub(crate) mod rewrite;
use crate::store::{glob, num};

/// All settings. The defaults are the directive table's (`DIRECTIVES`).
#[derive(Clone, Debug)]
pub struct Config {
    /// Addresses to listen on. Default `127.0.0.1` (loopback only).
    pub bind: Vec<String>,
    /// TCP port. Default 6379; 0 picks a free port (embedded use).
    pub port: u16,
    /// `unixsocket`: the path of a Unix-domain listener beside the TCP
    /// ones (empty: none), as Redis serves it.
    pub unixsocket: String,
    /// `unixsocketperm`: the mode the socket file gets once bound (0:
    /// left as the umask made it, as Redis leaves it).
    pub unixsocketperm: u32,
    /// Password of the `default` user; `None` means no authentication.
    pub requirepass: Option<Secret>,
    /// Number of databases (SELECT 0..n-1). Default 16.
    pub databases: usize,
    /// Connection limit; the next client gets `ERR max number of clients reached`. Default 10000.
    pub maxclients: usize,
    /// Log level: debug, verbose, notice or warning. Default notice.
    pub loglevel: String,
    /// Where `coordis-server` logs (`logfile`): empty, stderr; otherwise
    /// this file, appended to. The embedding library logs through the
    /// application's own `tracing` subscriber instead.
    pub logfile: String,
    /// `log-format` (coordis's own): `redis`, Redis's log line (the
    /// default), or `tracing`, tracing-subscriber's own format.
    pub log_format: String,
    /// `syslog-enabled`: also send every log message to syslog, as Redis.
    pub syslog_enabled: bool,
    /// `syslog-ident`: the syslog identity. Default `redis`, as Redis.
    pub syslog_ident: String,
    /// `syslog-facility`: `user` or `local0` to `local7`. Default `local0`.
    pub syslog_facility: String,
    /// `aclfile`: where ACL LOAD and ACL SAVE read and write the users
    /// (empty: none; the `user` directives then define them).
    pub aclfile: String,
    /// `acllog-max-len`: the most entries the ACL log keeps.
    pub acllog_max_len: usize,
    /// `acl-pubsub-default allchannels`: new users may use every channel.
    pub acl_pubsub_allchannels: bool,
    /// The `user` directives read from the config file, each its words
    /// after `user` (applied when the server starts, as Redis's).
    pub users: Vec<Vec<String>>,
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
    /// `shutdown-on-sigint`: how SIGINT shuts the server down, SHUTDOWN's
    /// options (none: `default`, the final save as save points say).
    pub shutdown_on_sigint: ShutdownFlags,
    /// `shutdown-on-sigterm`: the same for SIGTERM.
    pub shutdown_on_sigterm: ShutdownFlags,
    /// `shutdown-timeout`: seconds a shutdown without NOW waits for lagging
    /// replicas, writes paused, before it goes on (0: it does not wait).
    /// Default 10.
    pub shutdown_timeout: u64,
    /// Active-expiry frequency (times per second), 1 to 500. Default 10.
    pub hz: u32,
    /// `dynamic-hz`: with many clients the server's timer runs faster than
    /// `hz` (see `ServerState::hz`). Default yes.
    pub dynamic_hz: bool,
    /// `active-expire-effort` (1 to 10): how much time an active-expiry
    /// cycle may take, as Redis scales it (see `engine::ExpireCycle`).
    /// Default 1.
    pub active_expire_effort: u32,
    /// `key-load-delay` (Redis's test knob): microseconds slept per key
    /// loaded from an RDB file; negative `-n`, one microsecond every `n`
    /// keys. Makes a load slow enough for a test to see `-LOADING`.
    pub key_load_delay: i64,
    /// `rdb-key-save-delay` (Redis's test knob): microseconds slept per
    /// key saved (SAVE, BGSAVE, a full sync's image, an append-only file
    /// rewrite); negative `-n`, one microsecond every `n` keys. A
    /// background walk sleeps between its slices, outside the engine lock,
    /// as Redis's forked child sleeps without holding up the server: what
    /// a test uses to keep a save in progress.
    pub rdb_key_save_delay: i64,
    /// `bind-source-addr`: the local address the connections this server
    /// opens leave from (a replica's link to its primary, the cluster
    /// bus's links; empty: the kernel's choice). Best effort, as Redis's:
    /// when it cannot be bound the connection is made without it.
    pub bind_source_addr: String,
    /// `tcp-backlog`: the `listen(2)` backlog of every listening socket
    /// (TCP, TLS, the cluster bus, the Unix socket), as Redis's. The kernel
    /// caps it at `net.core.somaxconn`, which the start warns about as
    /// Redis does.
    pub tcp_backlog: i32,
    /// `socket-mark-id`: the firewall mark (`SO_MARK`) of the listening
    /// sockets (0: none), for policy routing. Setting a mark needs
    /// `CAP_NET_ADMIN`; a refusal is ignored, as Redis ignores it.
    pub socket_mark_id: u32,
    /// `oom-score-adj`: `no` (the process's `oom_score_adj` is left as it
    /// was, or given back when turned off), `yes` (relative: the score the
    /// process started with plus the role's value) or `absolute` (the
    /// role's value), written to `/proc/self/oom_score_adj` at start, on
    /// CONFIG SET and when the server becomes a replica or a primary, as
    /// Redis writes it. It is the whole process's: a server embedded in a
    /// test process sets the test's score.
    pub oom_score_adj: String,
    /// `oom-score-adj-values`: the primary's, a replica's and a background
    /// child's values (coordis saves without a child: the third is kept
    /// for CONFIG GET and REWRITE only).
    pub oom_score_adj_values: [i32; 3],
    /// Threads serving connections in `coordis-server` (tokio workers).
    /// Default 1, as Redis's `io-threads`: on small machines one thread plus
    /// the client's beats two contending for the keyspace lock; raise it on
    /// machines with cores to spare and many concurrent clients.
    pub io_threads: usize,
    /// `coordis-server` writes the port it listens on (and a newline) to
    /// this file once listening, and removes it at a clean exit
    /// (`port-file`, coordis's own): with `--port 0`, how a test fixture in
    /// another language learns the port. Empty (the default): no file.
    pub port_file: String,
    /// `coordis-server` goes to the background at start (`daemonize`): the
    /// command returns once the server process is forked off, as
    /// redis-server's does. No effect on an embedded server.
    pub daemonize: bool,
    /// Where `coordis-server` writes its pid, removed at exit (`pidfile`;
    /// empty: none, or `/var/run/redis.pid` when daemonized, as Redis).
    pub pidfile: String,
    /// `supervised`: `systemd` (or `auto` under systemd) tells systemd
    /// when the server is ready (`READY=1` on `$NOTIFY_SOCKET`), for a
    /// `Type=notify` unit; `upstart` stops the process (`SIGSTOP`) when
    /// ready, as Redis does for upstart's `expect stop`.
    pub supervised: String,
    /// Whether the test-control commands (`COORDIS.CLOCK`) run: `no`,
    /// `yes`, or `local` (loopback clients only), as Redis's
    /// `enable-debug-command` (`enable-test-commands`, coordis's own).
    /// Default `no` for `coordis-server`; the embedding [`crate::Builder`]
    /// makes it `local`.
    pub enable_test_commands: String,
    /// Whether DEBUG runs: `no` (the default), `yes`, or `local` (loopback
    /// clients only), as in Redis 7.
    pub enable_debug_command: String,
    /// `enable-module-command`: who may run MODULE LOAD/LOADEX/UNLOAD
    /// (which then fail: coordis loads no modules).
    pub enable_module_command: String,
    /// `enable-protected-configs`: who may CONFIG SET the protected
    /// directives (`dir`, `dbfilename`, ...): `no`, `yes`, or `local`
    /// (loopback clients only), as Redis's `allowProtectedAction`.
    pub enable_protected_configs: String,
    /// Milliseconds a script may run before other clients get `-BUSY`
    /// (`busy-reply-threshold`, alias `lua-time-limit`). Default 5000.
    pub busy_reply_threshold: u64,
    /// Keys the tracking table may hold (`tracking-table-max-keys`; 0: no
    /// limit): past it, tracked keys are invalidated at random until it
    /// holds no more (the `tracking` module). Default 1000000.
    pub tracking_table_max_keys: u64,
    /// Bytes each Lua VM (the scripts', the functions') may allocate
    /// (`lua-memory-limit`, coordis's own; Redis has no limit). A script past it fails; the server lives on.
    /// Default 256 MB; 0 disables the limit.
    pub lua_memory_limit: usize,
    /// The `tls-*` directives ([`TlsConfig`]).
    pub tls: TlsConfig,
    /// Keyspace notification classes (`notify-keyspace-events`), as
    /// `notify` module flags. Default: none.
    pub notify_keyspace_events: u32,
    /// Sorted sets of at most this many members, none longer than
    /// `zset_max_listpack_value`, are held the way Redis's listpack holds
    /// them (a score of -0 reads back as 0). Defaults 128 and 64.
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value`: longest member, in bytes (see above).
    pub zset_max_listpack_value: usize,
    /// The hash, set and list encoding thresholds Redis's own tests set;
    /// they drive `OBJECT ENCODING` and the small-type orders once those
    /// types exist. Defaults as Redis: 512, 64, 512, -2, 0.
    pub hash_max_listpack_entries: usize,
    /// `hash-max-listpack-value`: longest field or value, in bytes.
    pub hash_max_listpack_value: usize,
    /// `set-max-intset-entries`: most members of an all-integer set held as an intset.
    pub set_max_intset_entries: usize,
    /// `list-max-listpack-size`: list node size (negative: a size class in KB, positive: entries).
    pub list_max_listpack_size: i64,
    /// `list-compress-depth`: accepted and shown, without effect (coordis does not compress).
    pub list_compress_depth: u64,
    /// A stream node (Redis's listpack in the radix tree) takes new entries
    /// while its listpack would stay under this many bytes and it holds
    /// fewer than this many entries (0: no limit); approximate trimming
    /// (`MAXLEN ~`) removes whole nodes. Defaults as Redis: 4096 and 100.
    pub stream_node_max_bytes: usize,
    /// `stream-node-max-entries`: most entries in one stream node (0: no limit).
    pub stream_node_max_entries: usize,
    /// A sparse HyperLogLog that would grow past this many bytes (header
    /// included) turns dense, as in Redis (`hll-sparse-max-bytes`, default
    /// 3000): a longer sparse string costs more time per PFADD than the
    /// 12 KB of a dense one saves.
    pub hll_sparse_max_bytes: usize,
    /// SLOWLOG: commands taking at least this many µs are logged (-1: none,
    /// 0: all), the newest `slowlog_max_len` kept. Defaults as Redis: 10000
    /// and 128.
    pub slowlog_log_slower_than: i64,
    /// `slowlog-max-len`: how many SLOWLOG entries are kept.
    pub slowlog_max_len: usize,
    /// LATENCY: commands taking at least this many ms are latency events
    /// (0: off, the default, as Redis).
    pub latency_monitor_threshold: u64,
    /// `latency-tracking`: each command's latency goes into its histogram
    /// (INFO `latencystats`, LATENCY HISTOGRAM). With `no`, nothing is
    /// recorded and INFO's section is empty; what was recorded stays for
    /// LATENCY HISTOGRAM, as in Redis. Default yes.
    pub latency_tracking: bool,
    /// `latency-tracking-info-percentiles`: the percentiles INFO
    /// `latencystats` prints per command, in the order given (none: each
    /// command's line names no percentile). Default 50, 99, 99.9.
    pub latency_tracking_info_percentiles: Vec<f64>,
    /// The append-only file's settings (`appendonly`, `appendfsync`, ...).
    pub aof: AofConfig,
    /// The replication directives of a primary ([`ReplConfig`]).
    pub repl: ReplConfig,
    /// The `cluster-*` directives (see `crate::cluster`).
    pub cluster: ClusterConfig,
    /// `dir`: where SAVE writes and startup reads `dbfilename`.
    pub dir: String,
    /// `dbfilename`: the RDB file's name inside `dir` (default `dump.rdb`).
    pub dbfilename: String,
    /// `save <seconds> <changes> ...`: a background save starts once at
    /// least `changes` writes happened and more than `seconds` passed since
    /// the last save (Redis's defaults `3600 1 300 100 60 10000`; `save ""`:
    /// none). Checked on the persistence tick against the server clock.
    pub save_points: Vec<SavePoint>,
    /// `stop-writes-on-bgsave-error`: after a failed background save, with
    /// save points set, writes (and PING) are refused with `-MISCONF`
    /// until a save succeeds. Default yes.
    pub stop_writes_on_bgsave_error: bool,
    /// `rdb-save-incremental-fsync`: an RDB file being saved (SAVE,
    /// BGSAVE, the save points) is written out to disk every 4 MB as it
    /// grows (`persist::rdb::disk::AutoSync`), not only fsynced at
    /// its end. Default yes.
    pub rdb_save_incremental_fsync: bool,
    /// `loading-process-events-interval-bytes`: an append-only file's RDB
    /// base loaded at start is parsed at most this many bytes per hold of
    /// the engine lock (Redis serves events that often while it loads).
    /// Default 2 MB.
    pub loading_process_events_interval_bytes: usize,
    /// `bgsave-slice-keys` (coordis's own; Redis forks instead): keys a
    /// background save serializes per hold of the engine lock, which bounds
    /// what a save adds to a command's latency. Default 256.
    pub bgsave_slice_keys: usize,
    /// `bgsave-slice-pause-us` (coordis's own): microseconds a background
    /// save's walk sleeps between slices, trading save time for lock time
    /// (and how a test makes writes land mid-walk). Default 0.
    pub bgsave_slice_pause_us: u64,
    /// `rdbcompression`: RDB strings longer than 20 bytes are LZF-compressed
    /// (DUMP payloads and files, as Redis). Default yes.
    pub rdb_compression: bool,
    /// `rdbchecksum`: a saved file ends with its CRC-64 (no: 0, which a
    /// load does not check, as Redis). Default yes.
    pub rdb_checksum: bool,
    /// `sanitize-dump-payload`: RESTORE deep-validates packed encodings
    /// (`yes`), never (`no`, the default), or for clients other than
    /// replication links (`clients`).
    pub sanitize_dump_payload: String,
    /// The replica side's directives (`replicaof`, `masterauth`, ...; see
    /// `crate::replica`).
    pub replica: ReplicaConfig,
    /// `maxmemory` and eviction (see `crate::evict`).
    pub memory: MemoryConfig,
    /// Directives accepted without effect in coordis, by name: their value
    /// as CONFIG GET shows it.
    pub ignored: BTreeMap<&'static str, String>,
    /// The config file's absolute path, empty without one (INFO's
    /// `config_file`; what CONFIG REWRITE writes).
    pub config_file: String,
}

/// The replica side's directives, with Redis 7.0.15's defaults (see
/// `crate::replica` for what each does).
#[derive(Clone, Debug, Default)]
pub struct ReplicaConfig {
    /// `replicaof`: `<host> <port>` of the primary to replicate from at
    /// start, empty for none (REPLICAOF changes the link, not this).
    pub replicaof: String,
    /// `masterauth`: the password the link sends with AUTH (empty: none).
    pub masterauth: String,
    /// `masteruser`: the user AUTH names with `masterauth` (empty: the
    /// one-argument AUTH).
    pub masteruser: String,
    /// `replica-read-only`: clients' writes are refused on a replica.
    /// Default yes.
    pub read_only: bool,
    /// `replica-serve-stale-data`: with `no`, commands not flagged `stale`
    /// are refused with `-MASTERDOWN` while the link is down. Default yes.
    pub serve_stale_data: bool,
    /// `replica-ignore-disk-write-errors`: a replica whose disk fails
    /// (`-MISCONF`) still applies its primary's writes, logging it; with
    /// `no` (the default) it stops on the first one, as Redis panics.
    pub ignore_disk_write_errors: bool,
    /// `replica-priority` (INFO's `slave_priority`, for Sentinel). Default 100.
    pub priority: i64,
    /// `replica-announced` (INFO's `replica_announced`). Default yes.
    pub announced: bool,
    /// `replica-announce-ip`: the address the link tells its primary
    /// (`REPLCONF ip-address`), which the primary's INFO and Sentinel then
    /// show; empty: none is sent, the primary sees the connection's.
    pub announce_ip: String,
    /// `replica-announce-port`: the port the link tells its primary
    /// (`REPLCONF listening-port`); 0: this server's own.
    pub announce_port: u16,
    /// `repl-diskless-load`: how a full resync's RDB is loaded. Default
    /// disabled.
    pub diskless_load: DisklessLoad,
    /// `replica-lazy-flush`: the dataset a full resync replaces is freed
    /// on the lazy-free thread (INFO's `lazyfreed_objects` counts its
    /// keys), as Redis's `EMPTYDB_ASYNC`. Default no.
    pub lazy_flush: bool,
    /// `propagation-error-behavior`: what an error reply to a command of
    /// the primary's stream (on a read-only replica) or of the
    /// append-only file being loaded does: `ignore` (logged and counted),
    /// `panic` (the server stops, as Redis panics), `panic-on-replicas`
    /// (the replica's case only).
    pub propagation_error_behavior: String,
    /// `rdb-del-sync-files`: the RDB file a full resync wrote to disk
    /// (`repl-diskless-load disabled`) is removed once loaded when this
    /// server persists nothing (no save points, no append-only file).
    /// Default no: it stays as `dbfilename`.
    pub del_sync_files: bool,
}

/// `repl-diskless-load` (see `crate::replica::link`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DisklessLoad {
    /// The transfer goes to a temp file in `dir`, then the dataset is
    /// flushed and the file loaded.
    #[default]
    Disabled,
    /// Parsed from the socket when the dataset is empty, else as `Disabled`.
    OnEmptyDb,
    /// Parsed from the socket into a new dataset that replaces the old one
    /// at the end (the old one stays if the transfer fails).
    Swapdb,
}

impl std::str::FromStr for DisklessLoad {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "disabled" => Ok(DisklessLoad::Disabled),
            "on-empty-db" => Ok(DisklessLoad::OnEmptyDb),
            "swapdb" => Ok(DisklessLoad::Swapdb),
            _ => Err(()),
        }
    }
}

impl std::fmt::Display for DisklessLoad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DisklessLoad::Disabled => "disabled",
            DisklessLoad::OnEmptyDb => "on-empty-db",
            DisklessLoad::Swapdb => "swapdb",
        })
    }
}

/// `maxmemory` and the eviction directives, with Redis 7.0.15's defaults
/// (see `crate::evict` for what each does).
#[derive(Clone, Debug, Default)]
pub struct MemoryConfig {
    /// `maxmemory` in bytes; 0 (the default) for no limit.
    pub maxmemory: u64,
    /// `maxmemory-policy`. Default noeviction.
    pub policy: crate::evict::Policy,
    /// `maxmemory-samples`: keys sampled per database and round. Default 5.
    pub samples: u32,
    /// `maxmemory-eviction-tenacity` (0-100): how long one eviction run may
    /// take. Default 10.
    pub tenacity: u32,
    /// `lfu-log-factor`: how slowly the LFU counter grows. Default 10.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time`: minutes per LFU counter decrement. Default 1.
    pub lfu_decay_time: u32,
    /// The `lazyfree-lazy-*` directives (see `crate::lazyfree`). All no by default.
    pub(crate) lazy: crate::lazyfree::Lazy,
    /// `replica-ignore-maxmemory` (default yes): a replica neither evicts
    /// nor refuses for memory; its primary's DELs keep it in step.
    pub(crate) replica_ignores: bool,
}

/// A primary's replication directives, with Redis 7.0.15's defaults
/// (see `repl` for what each does).
#[derive(Clone, Debug, Default)]
pub struct ReplConfig {
    /// `repl-backlog-size`: bytes of the stream kept for partial resyncs. Default 1 MB.
    pub backlog_size: u64,
    /// `repl-backlog-ttl`: seconds without replicas before the backlog is
    /// freed (0: never). Default 3600.
    pub backlog_ttl: u64,
    /// `repl-timeout`: seconds without an ACK before a replica is dropped. Default 60.
    pub timeout: u64,
    /// `repl-ping-replica-period`: seconds between PINGs in the stream. Default 10.
    pub ping_period: u64,
    /// `repl-diskless-sync`: a full sync to a replica that said `capa eof`
    /// uses the `$EOF:` framing. Default yes.
    pub diskless_sync: bool,
    /// `repl-diskless-sync-delay`: seconds a diskless full sync waits for
    /// more replicas. Default 5.
    pub diskless_sync_delay: u64,
    /// `repl-diskless-sync-max-replicas`: ... unless this many wait (0: no
    /// such limit). Default 0.
    pub diskless_sync_max_replicas: u64,
    /// `min-replicas-to-write`: writes are refused with fewer good replicas (0: off).
    pub min_replicas_to_write: u64,
    /// `min-replicas-max-lag`: a good replica ACKed within this many seconds (0: off).
    pub min_replicas_max_lag: u64,
}

/// The cluster directives coordis acts on, with Redis 7.0.15's defaults
/// (see `crate::cluster` for what each does).
#[derive(Clone, Debug, Default)]
pub struct ClusterConfig {
    /// `cluster-enabled`: the node is a cluster node (slot checks, the
    /// CLUSTER commands, the nodes file). Default no.
    pub enabled: bool,
    /// `cluster-config-file`: the nodes file, relative to `dir`. Default `nodes.conf`.
    pub config_file: String,
    /// `cluster-port`: the bus port; 0 (the default) is the client port + 10000.
    pub port: u16,
    /// `cluster-node-timeout`, ms: a peer silent this long is suspected. Default 15000.
    pub node_timeout: u64,
    /// `cluster-announce-ip`: the address peers and redirections name (empty: learned from peers).
    pub announce_ip: String,
    /// `cluster-announce-hostname`: shown with the address when set.
    pub announce_hostname: String,
    /// `cluster-announce-port` / `-bus-port`: 0 means the ports listened on.
    pub announce_port: u16,
    /// `cluster-announce-bus-port`: 0 means the bus port listened on.
    pub announce_bus_port: u16,
    /// `cluster-preferred-endpoint-type`: `ip`, `hostname` or `unknown-endpoint`.
    pub preferred_endpoint_type: String,
    /// `cluster-require-full-coverage`: an unserved slot takes the cluster down. Default yes.
    pub require_full_coverage: bool,
    /// `cluster-allow-reads-when-down`: reads are served while the cluster is down. Default no.
    pub allow_reads_when_down: bool,
    /// `cluster-allow-pubsubshard-when-down`: sharded pub/sub goes on while down. Default yes.
    pub allow_pubsubshard_when_down: bool,
    /// `cluster-allow-replica-migration`: a primary left without slots
    /// becomes a replica of the node that took its last one, and a replica
    /// of the primary with the most replicas may move to an orphaned
    /// primary (`cluster-migration-barrier`). Default yes.
    pub allow_replica_migration: bool,
    /// `cluster-migration-barrier`: a replica migrates to an orphaned
    /// primary only if its own primary keeps more than this many working
    /// replicas. Default 1.
    pub migration_barrier: u64,
    /// `cluster-replica-no-failover`: this replica never starts an election
    /// for a failed primary (a manual failover still runs). Default no.
    pub replica_no_failover: bool,
    /// `cluster-replica-validity-factor`: a replica cut off from its primary
    /// longer than this many node timeouts (plus the ping period) does not
    /// stand for election; 0 always stands. Default 10.
    pub replica_validity_factor: u64,
}

/// The append-only file's directives, with Redis 7.0.15's defaults (see
/// `persist::aof` for what each does).
#[derive(Clone, Debug, Default)]
pub struct AofConfig {
    /// `appendonly`: the effects feed is written to the append-only file,
    /// and loaded from it at start. Default no.
    pub enabled: bool,
    /// `appendfsync`: `always`, `everysec` (the default) or `no`.
    pub fsync: String,
    /// `appendfilename`: the prefix of every file's name. Default `appendonly.aof`.
    pub filename: String,
    /// `appenddirname`: the directory under `dir` holding the files. Default `appendonlydir`.
    pub dirname: String,
    /// `no-appendfsync-on-rewrite`: while a save or rewrite walks, the AOF
    /// writer writes without fsyncing, as Redis skips the fsync while a
    /// child runs.
    pub no_fsync_on_rewrite: bool,
    /// `auto-aof-rewrite-percentage`: rewrite once the files grew by this
    /// much since the last rewrite (0: never). Default 100.
    pub auto_rewrite_percentage: u64,
    /// `auto-aof-rewrite-min-size`: ... and are at least this large. Default 64 MB.
    pub auto_rewrite_min_size: u64,
    /// `aof-load-truncated`: a last command cut short is dropped (the file
    /// truncated) instead of refusing to start. Default yes.
    pub load_truncated: bool,
    /// `aof-use-rdb-preamble`: the base file is an RDB. Default yes.
    pub use_rdb_preamble: bool,
    /// `aof-timestamp-enabled`: `#TS:` annotations in the files. Default no.
    pub timestamps: bool,
    /// `aof-rewrite-incremental-fsync`: a rewrite's new base is written
    /// out to disk every 4 MB as it grows
    /// (`persist::rdb::disk::AutoSync`), not only fsynced at its
    /// end. Default yes.
    pub rewrite_incremental_fsync: bool,
    /// `aof-disable-auto-gc`: the files a rewrite made history stay on
    /// disk and in the manifest (`yes`) instead of being removed; turning
    /// it back off removes them, as Redis. Default no.
    pub disable_auto_gc: bool,
}

impl Default for Config {
    fn default() -> Self {
        let mut config = Config {
            bind: vec![],
            port: 0,
            requirepass: None,
            databases: 0,
            maxclients: 0,
            loglevel: String::new(),
            logfile: String::new(),
            log_format: String::new(),
            syslog_enabled: false,
            syslog_ident: String::new(),
            syslog_facility: String::new(),
            aclfile: String::new(),
            acllog_max_len: 128,
            acl_pubsub_allchannels: false,
            users: Vec::new(),
            timeout: 0,
            tcp_keepalive: 0,
            proto_max_bulk_len: 0,
            proto_max_multibulk_len: 0,
            client_query_buffer_limit: 0,
            protected_mode: false,
            hz: 0,
            shutdown_on_sigint: ShutdownFlags::default(),
            shutdown_on_sigterm: ShutdownFlags::default(),
            shutdown_timeout: 0,
            active_expire_effort: 0,
            io_threads: 0,
            enable_protected_configs: String::new(),
            dynamic_hz: false,
            bind_source_addr: String::new(),
            tcp_backlog: 0,
            socket_mark_id: 0,
            oom_score_adj: String::new(),
            oom_score_adj_values: [0; 3],
            port_file: String::new(),
            daemonize: false,
            pidfile: String::new(),
            supervised: "no".into(),
            unixsocket: String::new(),
            unixsocketperm: 0,
            enable_test_commands: String::new(),
            enable_debug_command: String::new(),
            enable_module_command: String::new(),
            busy_reply_threshold: 0,
            tracking_table_max_keys: 0,
            lua_memory_limit: 0,
            notify_keyspace_events: 0,
            zset_max_listpack_entries: 0,
            zset_max_listpack_value: 0,
            hash_max_listpack_entries: 0,
            hash_max_listpack_value: 0,
            set_max_intset_entries: 0,
            list_max_listpack_size: 0,
            list_compress_depth: 0,
            stream_node_max_bytes: 0,
            stream_node_max_entries: 0,
            hll_sparse_max_bytes: 0,
            slowlog_log_slower_than: 0,
            slowlog_max_len: 0,
            latency_monitor_threshold: 0,
            latency_tracking: false,
            latency_tracking_info_percentiles: Vec::new(),
            aof: AofConfig::default(),
            tls: TlsConfig::default(),
            repl: ReplConfig::default(),
            cluster: ClusterConfig::default(),
            dir: String::new(),
            dbfilename: String::new(),
            save_points: Vec::new(),
            stop_writes_on_bgsave_error: false,
            rdb_save_incremental_fsync: true,
            bgsave_slice_keys: crate::persist::snapshot::SLICE_KEYS,
            loading_process_events_interval_bytes: 2 * 1024 * 1024,
            bgsave_slice_pause_us: 0,
            rdb_compression: false,
            rdb_checksum: false,
            key_load_delay: 0,
            rdb_key_save_delay: 0,
            sanitize_dump_payload: String::new(),
            replica: ReplicaConfig::default(),
            memory: MemoryConfig::default(),
            ignored: BTreeMap::new(),
            config_file: String::new(),
        };
        for d in DIRECTIVES {
            let text = d
                .check(d.default, "")
                .expect("a directive's default passes its own check");
            d.write(&mut config, &text);
        }
        config
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

/// The `tls-*` directives, as Redis's `redisTLSContextConfig` and the
/// TLS fields of its server struct hold them (empty text: not set). How
/// they become a rustls configuration is `net::tls`'s.
#[derive(Clone, Debug, Default)]
pub struct TlsConfig {
    /// `tls-port`: where TLS clients connect; 0: nowhere (unless
    /// `free_port`). With `port 0` and a TLS port, only TLS is served.
    pub port: u16,
    /// Serve TLS on a port the system picks (coordis's own, not a
    /// directive): set by `Builder::tls` and by `coordis-server --tls-port
    /// 0`, since a `tls-port` of 0 means "no TLS" to every Redis config file.
    pub free_port: bool,
    /// `tls-cert-file`: the server's certificate chain (PEM), leaf first.
    pub cert_file: String,
    /// `tls-key-file`: its private key (PEM).
    pub key_file: String,
    /// Decrypts an encrypted PKCS#8 `tls-key-file`.
    pub key_file_pass: String,
    /// The certificate outgoing links (replication, cluster bus) present;
    /// without one they present `cert_file`, as Redis does.
    pub client_cert_file: String,
    /// `tls-client-key-file`: the key of `client_cert_file`.
    pub client_key_file: String,
    /// `tls-client-key-file-pass`: decrypts `client_key_file`.
    pub client_key_file_pass: String,
    /// Read and checked as Redis loads it; rustls has no finite-field DHE,
    /// so the parameters are not used (see `net::tls`).
    pub dh_params_file: String,
    /// `tls-ca-cert-file`: the CA certificates client and link certificates are verified with.
    pub ca_cert_file: String,
    /// `tls-ca-cert-dir`: a directory of them.
    pub ca_cert_dir: String,
    /// `no`, `yes` or `optional`: whether a client must present a
    /// certificate the CA signed. Read per connection, as Redis does.
    pub auth_clients: String,
    /// Space-separated, as Redis's `tls-protocols` (empty: TLSv1.2 and TLSv1.3).
    pub protocols: String,
    /// OpenSSL's TLSv1.2 cipher list syntax, mapped onto rustls's suites.
    pub ciphers: String,
    /// OpenSSL's TLSv1.3 suite names, colon-separated.
    pub ciphersuites: String,
    /// `tls-prefer-server-ciphers`: the server's suite order wins.
    pub prefer_server_ciphers: bool,
    /// `tls-session-caching`: sessions may be resumed.
    pub session_caching: bool,
    /// `tls-session-cache-size`: sessions kept (0: no limit).
    pub session_cache_size: usize,
    /// `tls-session-cache-timeout`: seconds (kept; rustls's own lifetimes apply).
    pub session_cache_timeout: u64,
    /// Stored for the replication links (`tls-replication`).
    pub replication: bool,
    /// Stored for the cluster bus (`tls-cluster`).
    pub cluster: bool,
}

/// Whether CONFIG SET may change a directive (Redis's `IMMUTABLE_CONFIG` and
/// `PROTECTED_CONFIG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    Mutable,
    Immutable,
    Protected,
}

/// How a value is checked, and the canonical text it is kept and shown as.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// `yes` or `no`, any case.
    Bool,
    /// An integer in `min..=max`, spelled as Redis's `string2ll` accepts.
    Int { min: i64, max: i64 },
    /// A byte count with an optional unit (`b`, `k`, `kb`, `m`, `mb`, `g`,
    /// `gb`, any case), in `min..=max`; shown in bytes. (Bounds are `i128`
    /// because `maxmemory` goes up to `u64::MAX`.)
    Memory { min: i128, max: i128 },
    /// One of these words, any case; shown in lower case.
    Enum(&'static [&'static str]),
    /// Any text.
    Text,
    /// Checked and made canonical by a function of its own, given the new
    /// value and the current one (for directives that update in parts).
    Custom(fn(&str, &str) -> Result<String, String>),
}

/// What a changed directive must reach besides [`Config`]; the CONFIG
/// command applies it (see `cmd::server`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Nothing: readers look at the config each time.
    None,
    /// Settings connection tasks read without the engine lock
    /// ([`crate::state::Shared`]).
    Connections,
    /// Whether databases record expired keys for `expired` events.
    Notifications,
    /// The Lua VM's memory limit.
    LuaMemory,
    /// `requirepass`: the default ACL user's password.
    DefaultPassword,
    /// `maxmemory`: a limit lowered below the memory in use evicts at once.
    Maxmemory,
    /// `appendonly` turned the append-only file on or off.
    AppendOnly,
    /// The append-only file's writer reads its policy (`appendfsync`,
    /// `aof-timestamp-enabled`).
    AofWriter,
    /// `port` or `bind`: the listening sockets are rebound (CONFIG SET
    /// closes them, binds the new ones, and restores the old on failure).
    Listeners,
    /// `repl-backlog-size`: a changed size below Redis's minimum backlog
    /// becomes that minimum (as Redis's resize does; at startup it stays).
    ReplBacklog,
    /// `client-output-buffer-limit`: the replicas' limit is read by the
    /// backlog, the others by the engine's client limits, as is
    /// `maxmemory-clients` (clients over it are evicted at once).
    OutputLimits,
    /// A TLS setting: while TLS is wanted, the configuration is built
    /// again from the files (Redis's `applyTlsCfg`), and a changed
    /// `tls-port` rebinds the TLS listeners (`applyTLSPort`); a failure
    /// restores the old settings.
    Tls,
    /// `aof-disable-auto-gc` turned off: the history files go now.
    AofHistory,
    /// `oom-score-adj` or its values: the process's `oom_score_adj` is
    /// written again (a failure restores the old settings, as Redis's
    /// `updateOOMScoreAdj`).
    OomScoreAdj,
    /// `tls-auth-clients`: the next TLS connection reads it.
    TlsAuth,
}

/// Where a directive's value lives.
#[derive(Clone, Copy)]
pub(crate) enum Store {
    /// A [`Config`] field: `set` writes the canonical text into it (already
    /// checked), `get` renders it as CONFIG GET shows it.
    Field {
        set: fn(&mut Config, &str),
        get: fn(&Config) -> String,
    },
    /// Kept as its text in [`Config::ignored`]: accepted for compatibility
    /// and without effect, unless the row has an [`Effect`], whose readers
    /// parse the text (`client-output-buffer-limit`, `maxmemory-clients`).
    Ignored,
}

/// One directive: see the module docs.
#[derive(Clone, Copy)]
pub(crate) struct Directive {
    pub name: &'static str,
    /// Other names for it (old Redis spellings), equally accepted everywhere.
    pub aliases: &'static [&'static str],
    /// As redis.conf would spell it.
    pub default: &'static str,
    pub change: Change,
    /// Takes several words at startup (`bind 127.0.0.1 ::1`, `save 3600 1`),
    /// kept joined by spaces (Redis's `MULTI_ARG_CONFIG`).
    pub multi_arg: bool,
    pub kind: Kind,
    pub store: Store,
    pub effect: Effect,
    /// Left out of `CONFIG GET` patterns, shown only when asked for by name
    /// (Redis's `HIDDEN_CONFIG`: its test-only knobs; and coordis's own
    /// directives, so that `CONFIG GET *` lists exactly Redis's names and a
    /// tool that sets back every listed name, as Redis's own test suite
    /// does, meets no directive Redis lacks).
    pub hidden: bool,
    /// A password (Redis's `SENSITIVE_CONFIG`): CONFIG SET's value is
    /// redacted in the slow log and MONITOR.
    pub sensitive: bool,
}

const fn row(name: &'static str, default: &'static str, kind: Kind, store: Store) -> Directive {
    Directive {
        name,
        aliases: &[],
        default,
        change: Change::Mutable,
        multi_arg: false,
        kind,
        store,
        effect: Effect::None,
        hidden: false,
        sensitive: false,
    }
}

impl Directive {
    const fn alias(self, aliases: &'static [&'static str]) -> Self {
        Directive { aliases, ..self }
    }
    const fn immutable(self) -> Self {
        Directive {
            change: Change::Immutable,
            ..self
        }
    }
    const fn protected(self) -> Self {
        Directive {
            change: Change::Protected,
            ..self
        }
    }
    const fn multi_arg(self) -> Self {
        Directive {
            multi_arg: true,
            ..self
        }
    }
    const fn effect(self, effect: Effect) -> Self {
        Directive { effect, ..self }
    }
    const fn hidden(self) -> Self {
        Directive { hidden: true, ..self }
    }
    const fn sensitive(self) -> Self {
        Directive {
            sensitive: true,
            ..self
        }
    }
    /// coordis's own directive, one Redis 7.0.15 lacks: hidden from
    /// `CONFIG GET` patterns (see [`Directive::hidden`]).
    const fn own(self) -> Self {
        self.hidden()
    }

    /// Whether the directive does anything in coordis (those that do not
    /// are logged at start as having no effect).
    pub(crate) fn is_effective(&self) -> bool {
        matches!(self.store, Store::Field { .. }) || self.effect != Effect::None
    }

    /// Every name it answers to, its own first.
    pub(crate) fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }

    /// Checks a value given while the directive holds `current`; `Ok` is
    /// the canonical text to store, `Err` Redis's reason.
    pub(crate) fn check(&self, value: &str, current: &str) -> Result<String, String> {
        self.kind.check_value(value, current)
    }

    /// Stores an already checked canonical value.
    fn write(&self, config: &mut Config, text: &str) {
        match self.store {
            Store::Field { set, .. } => set(config, text),
            Store::Ignored => {
                config.ignored.insert(self.name, text.to_string());
            }
        }
    }

    /// The value as CONFIG GET shows it.
    pub(crate) fn read(&self, config: &Config) -> String {
        match self.store {
            Store::Field { get, .. } => get(config),
            Store::Ignored => config.ignored.get(self.name).cloned().unwrap_or_default(),
        }
    }
}

impl Kind {
    /// See [`Directive::check`].
    fn check_value(self, value: &str, current: &str) -> Result<String, String> {
        match self {
            Kind::Bool => match value.to_ascii_lowercase().as_str() {
                v @ ("yes" | "no") => Ok(v.to_string()),
                _ => Err("argument must be 'yes' or 'no'".into()),
            },
            Kind::Int { min, max } => {
                let n = num::parse_i64(value.as_bytes())
                    .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
                within(n, min, max)
            }
            Kind::Memory { min, max } => {
                let n = parse_memory(value).ok_or_else(|| "argument must be a memory value".to_string())?;
                // Redis keeps all but unsigned 64-bit settings in a `long
                // long`: a value past i64::MAX wraps negative there.
                let n = if max > i64::MAX as i128 {
                    n as i128
                } else {
                    n as i64 as i128
                };
                within(n, min, max)
            }
            Kind::Enum(words) => {
                let v = value.to_ascii_lowercase();
                if words.contains(&v.as_str()) {
                    Ok(v)
                } else {
                    Err(format!(
                        "argument(s) must be one of the following: {}",
                        words.join(", ")
                    ))
                }
            }
            Kind::Text => Ok(value.to_string()),
            Kind::Custom(check) => check(value, current),
        }
    }
}

fn within<T: Into<i128>>(n: T, min: T, max: T) -> Result<String, String> {
    let (n, min, max) = (n.into(), min.into(), max.into());
    if (min..=max).contains(&n) {
        Ok(n.to_string())
    } else {
        Err(format!("argument must be between {min} and {max} inclusive"))
    }
}

/// Redis 7.0's `memtoull`: digits and an optional unit, nothing else; no
/// digits read as 0, and too many saturate at `u64::MAX` (as `strtoull`).
pub(crate) fn parse_memory(value: &str) -> Option<u64> {
    let v = value.to_ascii_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, unit) = v.split_at(split);
    let mult: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    if digits.len() >= 128 {
        return None;
    }
    let n = if digits.is_empty() {
        0
    } else {
        digits.parse::<u64>().unwrap_or(u64::MAX)
    };
    Some(n.wrapping_mul(mult))
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// `notify-keyspace-events`: Redis's class letters. The value is kept as
/// given (its flags are parsed from it); CONFIG GET shows Redis's canonical
/// letters, which, as in Redis 7.0.15, leave out `n` next to `A`.
/// `unixsocketperm`: an octal mode up to 777, shown in octal (Redis's
/// `OCTAL_CONFIG`).
fn check_octal_perm(value: &str, _current: &str) -> Result<String, String> {
    const MAX: u32 = 0o777;
    let digits = value.strip_prefix('-').unwrap_or(value);
    let parsed = (!digits.is_empty() && digits.bytes().all(|b| (b'0'..=b'7').contains(&b)))
        .then(|| u32::from_str_radix(digits, 8).ok())
        .flatten()
        .ok_or_else(|| errors::directive::NOT_OCTAL.to_string())?;
    if value.starts_with('-') && parsed != 0 || parsed > MAX {
        return Err(format!("argument must be between 0 and {MAX:o} inclusive"));
    }
    Ok(format!("{parsed:o}"))
}

fn check_events(value: &str, _current: &str) -> Result<String, String> {
    crate::notify::parse_flags(value)
        .map(|_| value.to_string())
        .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into())
}

/// `save`: empty, or pairs of `<seconds> <changes>`.
/// One `save` point: a save is due after `changes` writes once more than
/// `seconds` passed since the last save.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SavePoint {
    pub seconds: u64,
    pub changes: u64,
}

/// `save`: pairs of `<seconds> <changes>`, seconds at least 1 (Redis's
/// `setConfigSaveOption`), or the empty string for none.
fn check_save(value: &str, _current: &str) -> Result<String, String> {
    let words: Vec<&str> = value.split(' ').filter(|w| !w.is_empty()).collect();
    let valid = if words.is_empty() {
        value.is_empty()
    } else {
        words.len().is_multiple_of(2)
            && words.iter().enumerate().all(|(i, w)| {
                let least = if i % 2 == 0 { 1 } else { 0 };
                num::parse_i64(w.as_bytes()).is_some_and(|n| n >= least)
            })
    };
    if valid {
        Ok(words.join(" "))
    } else {
        Err("Invalid save parameters".into())
    }
}

fn set_save(config: &mut Config, text: &str) {
    let numbers: Vec<u64> = text.split(' ').filter_map(|w| w.parse().ok()).collect();
    config.save_points = numbers
        .chunks_exact(2)
        .map(|pair| SavePoint {
            seconds: pair[0],
            changes: pair[1],
        })
        .collect();
}

fn get_save(config: &Config) -> String {
    let words: Vec<String> = config
        .save_points
        .iter()
        .map(|p| format!("{} {}", p.seconds, p.changes))
        .collect();
    words.join(" ")
}

/// `client-output-buffer-limit`: groups of `<class> <hard> <soft> <seconds>`,
/// each replacing its class's limits in `current`.
fn check_output_limits(value: &str, current: &str) -> Result<String, String> {
    const CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];
    let mut limits: [Option<String>; 3] = Default::default();
    for group in current.split_whitespace().collect::<Vec<_>>().chunks(4) {
        if let Some(i) = CLASSES.iter().position(|c| *c == group[0]) {
            limits[i] = Some(group.join(" "));
        }
    }
    let words: Vec<&str> = value.split_whitespace().collect();
    if !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    for group in words.chunks(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
        };
        let hard = parse_memory(group[1]);
        let soft = parse_memory(group[2]);
        let secs = num::parse_i64(group[3].as_bytes()).filter(|n| *n >= 0);
        let (Some(hard), Some(soft), Some(secs)) = (hard, soft, secs) else {
            return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into());
        };
        limits[class] = Some(format!("{} {hard} {soft} {secs}", CLASSES[class]));
    }
    Ok(limits.into_iter().flatten().collect::<Vec<_>>().join(" "))
}

/// `proc-title-template`: Redis's `{variable}` template (`{{` a literal
/// brace), only known variables, not blank once expanded with an empty
/// title and standalone mode.
fn check_proc_title(value: &str, _current: &str) -> Result<String, String> {
    const KNOWN: [(&str, &str); 7] = [
        ("title", ""),
        ("listen-addr", "*:0"),
        ("server-mode", ""),
        ("config-file", "-"),
        ("port", "0"),
        ("tls-port", "0"),
        ("unixsocket", ""),
    ];
    let invalid = || Err(errors::directive::PROC_TITLE.to_string());
    let mut expanded = String::new();
    let mut rest = value;
    while let Some(open) = rest.find('{') {
        expanded.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if after.is_empty() {
            return invalid();
        }
        if let Some(tail) = after.strip_prefix('{') {
            expanded.push('{');
            rest = tail;
            continue;
        }
        let Some(close) = after.find('}') else { return invalid() };
        let Some((_, text)) = KNOWN.iter().find(|(name, _)| *name == &after[..close]) else {
            return invalid();
        };
        expanded.push_str(text);
        rest = &after[close + 1..];
    }
    expanded.push_str(rest);
    if expanded.trim_matches(' ').is_empty() {
        return invalid();
    }
    Ok(value.to_string())
}

/// `bind`: at most Redis's 16 addresses; an empty value is none (which
/// listens on every interface, as Redis).
fn check_bind(value: &str, _current: &str) -> Result<String, String> {
    let words = multi_words(value);
    if words.len() > crate::net::listeners::MAX_BIND_ADDRESSES {
        return Err(errors::directive::TOO_MANY_BIND.into());
    }
    Ok(words.join(" "))
}

/// `activedefrag`: a boolean that cannot be `yes`, as in a Redis built
/// without its own jemalloc (Debian's): coordis has nothing to defragment.
fn check_activedefrag(value: &str, current: &str) -> Result<String, String> {
    match Kind::Bool.check_value(value, current)?.as_str() {
        "yes" => Err(errors::directive::DEFRAG_UNAVAILABLE.into()),
        no => Ok(no.to_string()),
    }
}

/// `oom-score-adj`: `relative` is another name of `yes`, shown as `yes`.
fn check_oom_score_adj(value: &str, _current: &str) -> Result<String, String> {
    const WORDS: [&str; 4] = ["no", "yes", "relative", "absolute"];
    match value.to_ascii_lowercase().as_str() {
        "relative" | "yes" => Ok("yes".into()),
        v @ ("no" | "absolute") => Ok(v.to_string()),
        _ => Err(errors::directive::one_of(&WORDS)),
    }
}

/// `oom-score-adj-values`: three integers in -2000..=2000.
fn check_oom_values(value: &str, _current: &str) -> Result<String, String> {
    /// The primary's, a replica's and a background child's.
    const CLASSES: usize = 3;
    const BOUND: i64 = 2000;
    let words = multi_words(value);
    if words.len() != CLASSES {
        return Err(errors::directive::WRONG_ARGS.into());
    }
    let values: Option<Vec<i64>> = words
        .iter()
        .map(|w| strtoll(w).filter(|n| (-BOUND..=BOUND).contains(n)))
        .collect();
    let values = values.ok_or_else(|| errors::directive::OOM_VALUES.to_string())?;
    Ok(values.iter().map(i64::to_string).collect::<Vec<_>>().join(" "))
}

/// What a shutdown does: SHUTDOWN's options, and the words of
/// `shutdown-on-sigint` / `shutdown-on-sigterm` (none set: `default`, the
/// final save as the save points say).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShutdownFlags {
    /// Save even without save points.
    pub save: bool,
    /// No final save, save points or not.
    pub nosave: bool,
    /// Do not wait for lagging replicas (`shutdown-timeout`).
    pub now: bool,
    /// Stop even when the final save fails.
    pub force: bool,
}

impl ShutdownFlags {
    /// The words, as shown (and checked: [`check_shutdown_flags`]).
    const WORDS: [&'static str; 4] = ["save", "nosave", "now", "force"];

    fn get(&self, i: usize) -> bool {
        [self.save, self.nosave, self.now, self.force][i]
    }

    /// From checked words (`default` sets none).
    fn parse(words: &str) -> ShutdownFlags {
        let has = |w: &str| words.split(' ').any(|x| x.eq_ignore_ascii_case(w));
        ShutdownFlags {
            save: has("save"),
            nosave: has("nosave"),
            now: has("now"),
            force: has("force"),
        }
    }
}

impl std::fmt::Display for ShutdownFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: Vec<&str> = (0..Self::WORDS.len())
            .filter(|&i| self.get(i))
            .map(|i| Self::WORDS[i])
            .collect();
        if shown.is_empty() {
            f.write_str("default")
        } else {
            f.write_str(&shown.join(" "))
        }
    }
}

/// `shutdown-on-sigint` / `-sigterm`: `default`, or flags among `save`,
/// `nosave`, `now`, `force`, shown in that order.
fn check_shutdown_flags(value: &str, _current: &str) -> Result<String, String> {
    const DEFAULT: &str = "default";
    let one_of = || {
        let mut words = vec![DEFAULT];
        words.extend(ShutdownFlags::WORDS);
        errors::directive::one_of(&words)
    };
    let words = multi_words(value);
    if words.is_empty() {
        return Err(one_of());
    }
    for w in &words {
        if !w.eq_ignore_ascii_case(DEFAULT) && !ShutdownFlags::WORDS.iter().any(|k| k.eq_ignore_ascii_case(w)) {
            return Err(one_of());
        }
    }
    let flags = ShutdownFlags::parse(value);
    if flags.save && flags.nosave {
        return Err(errors::directive::SHUTDOWN_SAVE_NOSAVE.into());
    }
    Ok(flags.to_string())
}

/// `latency-tracking-info-percentiles`: percentiles in 0..=100 (none for
/// an empty value), shown as C's `%f` without trailing zeros.
fn check_percentiles(value: &str, _current: &str) -> Result<String, String> {
    let mut shown = vec![];
    for w in multi_words(value) {
        let p = strtod(w).ok_or_else(|| errors::directive::PERCENTILES_INVALID.to_string())?;
        if !(0.0..=100.0).contains(&p) {
            return Err(errors::directive::PERCENTILES_RANGE.into());
        }
        shown.push(percentile_text(p));
    }
    Ok(shown.join(" "))
}

/// A percentile as Redis shows it, in CONFIG GET and in INFO
/// `latencystats`' names: C's `%f` without trailing zeros (`99.9`, `50`).
pub(crate) fn percentile_text(p: f64) -> String {
    let fixed = format!("{p:.6}");
    fixed.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `replicaof`: `<host> <port>`, or `no one` (shown empty; empty is also
/// the default, no primary).
fn check_replicaof(value: &str, _current: &str) -> Result<String, String> {
    const MAX_PORT: i64 = 65535;
    if value.is_empty() {
        return Ok(String::new());
    }
    let words = multi_words(value);
    let [host, port] = words[..] else {
        return Err(errors::directive::WRONG_ARGS.into());
    };
    if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") {
        return Ok(String::new());
    }
    match strtoll(port) {
        Some(p) if (0..=MAX_PORT).contains(&p) => Ok(format!("{host} {p}")),
        _ => Err(errors::directive::MASTER_PORT.into()),
    }
}

/// `maxmemory-clients`: a memory value, or a percentage of `maxmemory`
/// (`N%`, shown so), as Redis's `PERCENT_CONFIG`.
fn check_memory_or_percent(value: &str, _current: &str) -> Result<String, String> {
    const MAX_PERCENT: i64 = 100;
    // Redis keeps it in an `ssize_t`, a percentage as its negation.
    let n: i64 = if let Some(bytes) = parse_memory(value) {
        bytes as i64
    } else {
        match value.strip_suffix('%').and_then(|d| num::parse_i64(d.as_bytes())) {
            Some(p) if p >= 0 && value.len() > 1 => -p,
            _ => return Err(errors::directive::MEMORY_OR_PERCENT.into()),
        }
    };
    if n < 0 {
        if n < -MAX_PERCENT {
            return Err(errors::directive::percent_bound(MAX_PERCENT));
        }
        return Ok(format!("{}%", -n));
    }
    Ok(n.to_string())
}

/// `cluster-announce-hostname`: letters, digits, `-` and `.`, under 256 bytes.
fn check_hostname(value: &str, _current: &str) -> Result<String, String> {
    const HOST_LEN: usize = 256;
    if value.len() >= HOST_LEN {
        return Err(errors::directive::HOSTNAME_LONG.into());
    }
    if !value
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
    {
        return Err(errors::directive::HOSTNAME_CHARS.into());
    }
    Ok(value.to_string())
}

/// The words of a several-word value, split on single spaces as Redis
/// splits a CONFIG SET value (an empty value has none).
fn multi_words(value: &str) -> Vec<&str> {
    if value.is_empty() {
        vec![]
    } else {
        value.split(' ').collect()
    }
}

/// C's `strtoll` in base 10 with nothing after the number (leading blanks
/// and a sign allowed).
fn strtoll(text: &str) -> Option<i64> {
    let t = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    t.strip_prefix('+').unwrap_or(t).parse().ok()
}

/// Redis's `string2d`: a whole decimal (no surrounding blanks), not NaN.
fn strtod(text: &str) -> Option<f64> {
    let blank = |c: char| c.is_ascii_whitespace();
    if text.is_empty() || text.starts_with(blank) || text.ends_with(blank) {
        return None;
    }
    text.parse::<f64>().ok().filter(|v| !v.is_nan())
}

/// A [`Store::Field`] for a field whose canonical text parses into it.
macro_rules! field {
    ($f:ident) => {
        Store::Field {
            set: |c, v| c.$f = v.parse().expect("checked by the directive's kind"),
            get: |c| c.$f.to_string(),
        }
    };
    (bool $f:ident) => {
        Store::Field {
            set: |c, v| c.$f = v == "yes",
            get: |c| yes_no(c.$f),
        }
    };
}

/// A [`Store::Field`] for a field of [`MemoryConfig`].
macro_rules! memory {
    ($f:ident) => {
        Store::Field {
            set: |c, v| c.memory.$f = v.parse().expect("checked by the directive's kind"),
            get: |c| c.memory.$f.to_string(),
        }
    };
    (lazy $f:ident) => {
        Store::Field {
            set: |c, v| c.memory.lazy.$f = v == "yes",
            get: |c| yes_no(c.memory.lazy.$f),
        }
    };
    (flag $f:ident) => {
        Store::Field {
            set: |c, v| c.memory.$f = v == "yes",
            get: |c| yes_no(c.memory.$f),
        }
    };
}

/// A [`Store::Field`] for a field of [`AofConfig`].
macro_rules! aof {
    ($f:ident) => {
        Store::Field {
            set: |c, v| c.aof.$f = v.parse().expect("checked by the directive's kind"),
            get: |c| c.aof.$f.to_string(),
        }
    };
    (bool $f:ident) => {
        Store::Field {
            set: |c, v| c.aof.$f = v == "yes",
            get: |c| yes_no(c.aof.$f),
        }
    };
}

/// A [`Store::Field`] for a field of [`ReplicaConfig`].
macro_rules! replica {
    ($f:ident) => {
        Store::Field {
            set: |c, v| c.replica.$f = v.parse().expect("checked by the directive's kind"),
            get: |c| c.replica.$f.to_string(),
        }
    };
    (bool $f:ident) => {
        Store::Field {
            set: |c, v| c.replica.$f = v == "yes",
            get: |c| yes_no(c.replica.$f),
        }
    };
}

/// A [`Store::Field`] for a field of [`ReplConfig`].
macro_rules! repl {
    ($f:ident) => {
        Store::Field {
            set: |c, v| c.repl.$f = v.parse().expect("checked by the directive's kind"),
            get: |c| c.repl.$f.to_string(),
        }
    };
    (bool $f:ident) => {
        Store::Field {
            set: |c, v| c.repl.$f = v == "yes",
            get: |c| yes_no(c.repl.$f),
        }
    };
}

/// A [`Store::Field`] for a field of [`TlsConfig`].
macro_rules! tls {
    ($f:ident) => {
        Store::Field {
            set: |c, v| c.tls.$f = v.parse().expect("checked by the directive's kind"),
            get: |c| c.tls.$f.to_string(),
        }
    };
    (bool $f:ident) => {
        Store::Field {
            set: |c, v| c.tls.$f = v == "yes",
            get: |c| yes_no(c.tls.$f),
        }
    };
}

/// A [`Store::Field`] for a field of [`ClusterConfig`].
macro_rules! cluster {
    ($f:ident) => {
        Store::Field {
            set: |c, v| c.cluster.$f = v.parse().expect("checked by the directive's kind"),
            get: |c| c.cluster.$f.to_string(),
        }
    };
    (bool $f:ident) => {
        Store::Field {
            set: |c, v| c.cluster.$f = v == "yes",
            get: |c| yes_no(c.cluster.$f),
        }
    };
}

const I32: i64 = i32::MAX as i64;
/// The smallest replication backlog Redis resizes to (16 KB).
const REPL_BACKLOG_MIN: u64 = 16 * 1024;
const LONG: i64 = i64::MAX;
const MB: i128 = 1 << 20;
const LONG_MEM: i128 = i64::MAX as i128;
use Kind::{Bool, Enum, Int, Memory, Text};

/// Every directive coordis accepts. Order is CONFIG GET's for patterns.
#[rustfmt::skip]
pub(crate) static DIRECTIVES: &[Directive] = &[
    // Networking and clients.
    row("bind", "127.0.0.1", Kind::Custom(check_bind), Store::Field {
        set: |c, v| c.bind = multi_words(v).into_iter().map(String::from).collect(),
        get: |c| c.bind.join(" "),
    }).multi_arg().effect(Effect::Listeners),
    row("port", "6379", Int { min: 0, max: 65535 }, field!(port)).effect(Effect::Listeners),
    row("requirepass", "", Text, Store::Field {
        set: |c, v| c.requirepass = (!v.is_empty()).then(|| Secret(v.to_string())),
        get: |c| c.requirepass.as_ref().map(|p| p.expose().to_string()).unwrap_or_default(),
    }).sensitive().effect(Effect::DefaultPassword),
    row("databases", "16", Int { min: 1, max: I32 }, field!(databases)).immutable(),
    row("maxclients", "10000", Int { min: 1, max: u32::MAX as i64 }, field!(maxclients)).effect(Effect::Connections),
    row("loglevel", "notice", Enum(&["debug", "verbose", "notice", "warning"]), field!(loglevel)),
    row("logfile", "", Text, field!(logfile)).immutable(),
    row("log-format", "redis", Enum(&["redis", "tracing"]), field!(log_format)).immutable().own(),
    row("syslog-enabled", "no", Bool, field!(bool syslog_enabled)).immutable(),
    row("syslog-ident", "redis", Text, field!(syslog_ident)).immutable(),
    row("syslog-facility", "local0", Enum(&["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"]), field!(syslog_facility)).immutable(),
    row("timeout", "0", Int { min: 0, max: I32 }, field!(timeout)).effect(Effect::Connections),
    row("tcp-keepalive", "300", Int { min: 0, max: I32 }, field!(tcp_keepalive)).effect(Effect::Connections),
    row("proto-max-bulk-len", "512mb", Memory { min: MB, max: LONG_MEM }, field!(proto_max_bulk_len)).effect(Effect::Connections),
    row("proto-max-multibulk-len", "1048576", Int { min: 1, max: I32 }, field!(proto_max_multibulk_len)).effect(Effect::Connections).own(),
    row("client-query-buffer-limit", "1gb", Memory { min: MB, max: LONG_MEM }, field!(client_query_buffer_limit)).effect(Effect::Connections),
    row("protected-mode", "yes", Bool, field!(bool protected_mode)).effect(Effect::Connections),
    row("io-threads", "1", Int { min: 1, max: 128 }, field!(io_threads)).immutable(),
    row("port-file", "", Text, field!(port_file)).immutable().own(),
    row("bind-source-addr", "", Text, field!(bind_source_addr)),
    row("tcp-backlog", "511", Int { min: 0, max: I32 }, field!(tcp_backlog)).immutable(),
    row("socket-mark-id", "0", Int { min: 0, max: u32::MAX as i64 }, field!(socket_mark_id)).immutable(),
    row("oom-score-adj", "no", Kind::Custom(check_oom_score_adj), field!(oom_score_adj)).effect(Effect::OomScoreAdj),
    row("oom-score-adj-values", "0 200 800", Kind::Custom(check_oom_values), Store::Field {
        set: |c, v| {
            for (slot, word) in c.oom_score_adj_values.iter_mut().zip(v.split(' ')) {
                *slot = word.parse().expect("checked by check_oom_values");
            }
        },
        get: |c| c.oom_score_adj_values.map(|v| v.to_string()).join(" "),
    }).multi_arg().effect(Effect::OomScoreAdj),
    row("enable-test-commands", "no", Enum(&["no", "yes", "local"]), field!(enable_test_commands)).immutable().own(),
    row("enable-debug-command", "no", Enum(&["no", "yes", "local"]), field!(enable_debug_command)).immutable(),
    row("enable-module-command", "no", Enum(&["no", "yes", "local"]), field!(enable_module_command)).immutable(),
    row("enable-protected-configs", "no", Enum(&["no", "yes", "local"]), field!(enable_protected_configs)).immutable(),
    // Expiry, scripting, notifications.
    row("hz", "10", Int { min: 0, max: I32 }, Store::Field {
        // Redis keeps hz within 1..=500 whatever is asked.
        set: |c, v| c.hz = v.parse::<u32>().expect("checked").clamp(1, 500),
        get: |c| c.hz.to_string(),
    }),
    row("dynamic-hz", "yes", Bool, field!(bool dynamic_hz)),
    row("busy-reply-threshold", "5000", Int { min: 0, max: LONG }, field!(busy_reply_threshold))
        .alias(&["lua-time-limit"]).effect(Effect::Connections),
    row("tracking-table-max-keys", "1000000", Int { min: 0, max: LONG }, field!(tracking_table_max_keys)),
    row("lua-memory-limit", "256mb", Memory { min: 0, max: LONG_MEM }, field!(lua_memory_limit)).effect(Effect::LuaMemory).own(),
    row("notify-keyspace-events", "", Kind::Custom(check_events), Store::Field {
        set: |c, v| c.notify_keyspace_events = crate::notify::parse_flags(v).expect("checked"),
        get: |c| crate::notify::flags_to_string(c.notify_keyspace_events),
    }).effect(Effect::Notifications),
    // Encodings a client can see.
    row("zset-max-listpack-entries", "128", Int { min: 0, max: LONG }, field!(zset_max_listpack_entries))
        .alias(&["zset-max-ziplist-entries"]),
    row("zset-max-listpack-value", "64", Memory { min: 0, max: LONG_MEM }, field!(zset_max_listpack_value))
        .alias(&["zset-max-ziplist-value"]),
    row("hash-max-listpack-entries", "512", Int { min: 0, max: LONG }, field!(hash_max_listpack_entries))
        .alias(&["hash-max-ziplist-entries"]),
    row("hash-max-listpack-value", "64", Memory { min: 0, max: LONG_MEM }, field!(hash_max_listpack_value))
        .alias(&["hash-max-ziplist-value"]),
    row("set-max-intset-entries", "512", Int { min: 0, max: LONG }, field!(set_max_intset_entries)),
    row("list-max-listpack-size", "-2", Int { min: i32::MIN as i64, max: I32 }, field!(list_max_listpack_size))
        .alias(&["list-max-ziplist-size"]),
    row("list-compress-depth", "0", Int { min: 0, max: I32 }, field!(list_compress_depth)),
    row("stream-node-max-bytes", "4096", Memory { min: 0, max: LONG_MEM }, field!(stream_node_max_bytes)),
    row("stream-node-max-entries", "100", Int { min: 0, max: LONG }, field!(stream_node_max_entries)),
    row("hll-sparse-max-bytes", "3000", Memory { min: 0, max: LONG_MEM }, field!(hll_sparse_max_bytes)),
    // The append-only file.
    row("appendonly", "no", Bool, aof!(bool enabled)).effect(Effect::AppendOnly),
    row("appendfsync", "everysec", Enum(&["everysec", "always", "no"]), aof!(fsync)).effect(Effect::AofWriter),
    row("appendfilename", "appendonly.aof", Text, aof!(filename)).immutable(),
    row("appenddirname", "appendonlydir", Text, aof!(dirname)).immutable(),
    row("no-appendfsync-on-rewrite", "no", Bool, aof!(bool no_fsync_on_rewrite)).effect(Effect::AofWriter),
    row("auto-aof-rewrite-percentage", "100", Int { min: 0, max: I32 }, aof!(auto_rewrite_percentage)),
    row("auto-aof-rewrite-min-size", "64mb", Memory { min: 0, max: LONG_MEM }, aof!(auto_rewrite_min_size)),
    row("aof-load-truncated", "yes", Bool, aof!(bool load_truncated)),
    row("aof-use-rdb-preamble", "yes", Bool, aof!(bool use_rdb_preamble)),
    row("aof-timestamp-enabled", "no", Bool, aof!(bool timestamps)).effect(Effect::AofWriter),
    row("aof-rewrite-incremental-fsync", "yes", Bool, aof!(bool rewrite_incremental_fsync)),
    row("aof-disable-auto-gc", "no", Bool, aof!(bool disable_auto_gc)).effect(Effect::AofHistory),
    row("daemonize", "no", Bool, field!(bool daemonize)).immutable(),
    row("supervised", "no", Enum(&["upstart", "systemd", "auto", "no"]), field!(supervised)).immutable(),
    row("pidfile", "", Text, field!(pidfile)).immutable(),
    row("dir", ".", Text, field!(dir)).protected(),
    row("dbfilename", "dump.rdb", Text, field!(dbfilename)).protected(),
    row("save", "3600 1 300 100 60 10000", Kind::Custom(check_save), Store::Field { set: set_save, get: get_save }).multi_arg(),
    row("stop-writes-on-bgsave-error", "yes", Bool, field!(bool stop_writes_on_bgsave_error)),
    row("bgsave-slice-keys", "64", Int { min: 1, max: I32 }, field!(bgsave_slice_keys)).own(),
    row("bgsave-slice-pause-us", "0", Int { min: 0, max: 1_000_000 }, field!(bgsave_slice_pause_us)).own(),
    // Accepted without effect, checked as Redis checks them.
    row("always-show-logo", "no", Bool, Store::Ignored).immutable(),
    row("set-proc-title", "yes", Bool, Store::Ignored).immutable(),
    row("rdbcompression", "yes", Bool, field!(bool rdb_compression)),
    row("rdbchecksum", "yes", Bool, field!(bool rdb_checksum)).immutable(),
    row("sanitize-dump-payload", "no", Enum(&["no", "yes", "clients"]), field!(sanitize_dump_payload)),
    row("maxmemory", "0", Memory { min: 0, max: u64::MAX as i128 }, memory!(maxmemory)).effect(Effect::Maxmemory),
    row("maxmemory-policy", "noeviction", Enum(&["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"]),
        Store::Field { set: |c, v| c.memory.policy = crate::evict::Policy::parse(v).expect("checked by the directive's kind"), get: |c| c.memory.policy.name().to_string() }),
    row("lazyfree-lazy-eviction", "no", Bool, memory!(lazy eviction)),
    row("lazyfree-lazy-expire", "no", Bool, memory!(lazy expire)),
    row("lazyfree-lazy-server-del", "no", Bool, memory!(lazy server_del)),
    row("lazyfree-lazy-user-del", "no", Bool, memory!(lazy user_del)),
    row("slowlog-log-slower-than", "10000", Int { min: -1, max: LONG }, field!(slowlog_log_slower_than)),
    row("slowlog-max-len", "128", Int { min: 0, max: LONG }, field!(slowlog_max_len)),
    row("latency-monitor-threshold", "0", Int { min: 0, max: LONG }, field!(latency_monitor_threshold)),
    row("unixsocket", "", Text, field!(unixsocket)).immutable(),
    row("unixsocketperm", "0", Kind::Custom(check_octal_perm), Store::Field {
        set: |c, v| c.unixsocketperm = u32::from_str_radix(v, 8).expect("checked as octal"),
        get: |c| format!("{:o}", c.unixsocketperm),
    }).immutable(),
    row("replica-read-only", "yes", Bool, replica!(bool read_only)).alias(&["slave-read-only"]),
    row("repl-diskless-sync", "yes", Bool, repl!(bool diskless_sync)),
    row("cluster-enabled", "no", Bool, cluster!(bool enabled)).immutable(),
    row("activerehashing", "yes", Bool, Store::Ignored),
    row("client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        Kind::Custom(check_output_limits), Store::Ignored).multi_arg().effect(Effect::OutputLimits),
    // Every other directive of Redis 7.0.15, accepted without effect (what
    // the server they configure would do: replication, cluster, TLS,
    // eviction, defragmentation, the process), each checked and shown as
    // Redis does.
    // Process and networking.
    row("io-threads-do-reads", "no", Bool, Store::Ignored).immutable(),
    row("disable-thp", "yes", Bool, Store::Ignored).immutable(),
    row("jemalloc-bg-thread", "yes", Bool, Store::Ignored),
    row("crash-log-enabled", "yes", Bool, Store::Ignored),
    row("crash-memcheck-enabled", "yes", Bool, Store::Ignored),
    row("proc-title-template", "{title} {listen-addr} {server-mode}", Kind::Custom(check_proc_title), Store::Ignored),
    row("server_cpulist", "", Text, Store::Ignored).immutable(),
    row("bio_cpulist", "", Text, Store::Ignored).immutable(),
    row("aof_rewrite_cpulist", "", Text, Store::Ignored).immutable(),
    row("bgsave_cpulist", "", Text, Store::Ignored).immutable(),
    row("ignore-warnings", "", Text, Store::Ignored),
    row("shutdown-on-sigint", "default", Kind::Custom(check_shutdown_flags), Store::Field {
        set: |c, v| c.shutdown_on_sigint = ShutdownFlags::parse(v),
        get: |c| c.shutdown_on_sigint.to_string(),
    }).multi_arg(),
    row("shutdown-on-sigterm", "default", Kind::Custom(check_shutdown_flags), Store::Field {
        set: |c, v| c.shutdown_on_sigterm = ShutdownFlags::parse(v),
        get: |c| c.shutdown_on_sigterm.to_string(),
    }).multi_arg(),
    row("shutdown-timeout", "10", Int { min: 0, max: I32 }, field!(shutdown_timeout)),
    row("active-expire-effort", "1", Int { min: 1, max: 10 }, field!(active_expire_effort)),
    row("latency-tracking", "yes", Bool, field!(bool latency_tracking)),
    row("latency-tracking-info-percentiles", "50 99 99.9", Kind::Custom(check_percentiles), Store::Field {
        set: |c, v| c.latency_tracking_info_percentiles = v.split(' ').filter_map(|w| w.parse().ok()).collect(),
        get: |c| c.latency_tracking_info_percentiles.iter().map(|p| percentile_text(*p)).collect::<Vec<_>>().join(" "),
    }).multi_arg(),
    row("lazyfree-lazy-user-flush", "no", Bool, memory!(lazy user_flush)),
    // ACL.
    row("aclfile", "", Text, field!(aclfile)).immutable(),
    row("acllog-max-len", "128", Int { min: 0, max: LONG }, field!(acllog_max_len)),
    row("acl-pubsub-default", "resetchannels", Enum(&["allchannels", "resetchannels"]), Store::Field {
        set: |c, v| c.acl_pubsub_allchannels = v == "allchannels",
        get: |c| if c.acl_pubsub_allchannels { "allchannels" } else { "resetchannels" }.to_string(),
    }),
    // Eviction and defragmentation.
    row("maxmemory-samples", "5", Int { min: 1, max: I32 }, memory!(samples)),
    row("maxmemory-eviction-tenacity", "10", Int { min: 0, max: 100 }, memory!(tenacity)),
    row("maxmemory-clients", "0", Kind::Custom(check_memory_or_percent), Store::Ignored).effect(Effect::OutputLimits),
    row("lfu-log-factor", "10", Int { min: 0, max: I32 }, memory!(lfu_log_factor)),
    row("lfu-decay-time", "1", Int { min: 0, max: I32 }, memory!(lfu_decay_time)),
    row("activedefrag", "no", Kind::Custom(check_activedefrag), Store::Ignored),
    row("active-defrag-cycle-min", "1", Int { min: 1, max: 99 }, Store::Ignored),
    row("active-defrag-cycle-max", "25", Int { min: 1, max: 99 }, Store::Ignored),
    row("active-defrag-threshold-lower", "10", Int { min: 0, max: 1000 }, Store::Ignored),
    row("active-defrag-threshold-upper", "100", Int { min: 0, max: 1000 }, Store::Ignored),
    row("active-defrag-ignore-bytes", "100mb", Memory { min: 1, max: LONG_MEM }, Store::Ignored),
    row("active-defrag-max-scan-fields", "1000", Int { min: 1, max: LONG }, Store::Ignored),
    // Persistence details beyond the persistence rows.
    row("rdb-save-incremental-fsync", "yes", Bool, field!(bool rdb_save_incremental_fsync)),
    // Replication.
    row("replicaof", "", Kind::Custom(check_replicaof), replica!(replicaof)).alias(&["slaveof"]).immutable().multi_arg(),
    row("masterauth", "", Text, replica!(masterauth)).sensitive(),
    row("masteruser", "", Text, replica!(masteruser)).sensitive(),
    row("replica-serve-stale-data", "yes", Bool, replica!(bool serve_stale_data)).alias(&["slave-serve-stale-data"]),
    row("replica-ignore-maxmemory", "yes", Bool, memory!(flag replica_ignores)).alias(&["slave-ignore-maxmemory"]),
    row("replica-ignore-disk-write-errors", "no", Bool, replica!(bool ignore_disk_write_errors)),
    row("replica-announced", "yes", Bool, replica!(bool announced)),
    row("replica-priority", "100", Int { min: 0, max: I32 }, replica!(priority)).alias(&["slave-priority"]),
    row("replica-announce-ip", "", Text, replica!(announce_ip)).alias(&["slave-announce-ip"]),
    row("replica-announce-port", "0", Int { min: 0, max: 65535 }, replica!(announce_port)).alias(&["slave-announce-port"]),
    row("replica-lazy-flush", "no", Bool, replica!(bool lazy_flush)).alias(&["slave-lazy-flush"]),
    row("rdb-del-sync-files", "no", Bool, replica!(bool del_sync_files)),
    row("propagation-error-behavior", "ignore", Enum(&["ignore", "panic", "panic-on-replicas"]), replica!(propagation_error_behavior)),
    row("repl-diskless-load", "disabled", Enum(&["disabled", "on-empty-db", "swapdb"]), replica!(diskless_load)),
    row("repl-diskless-sync-delay", "5", Int { min: 0, max: I32 }, repl!(diskless_sync_delay)),
    row("repl-diskless-sync-max-replicas", "0", Int { min: 0, max: I32 }, repl!(diskless_sync_max_replicas)),
    row("repl-disable-tcp-nodelay", "no", Bool, Store::Ignored),
    row("repl-backlog-size", "1mb", Memory { min: 1, max: LONG_MEM }, repl!(backlog_size)).effect(Effect::ReplBacklog),
    row("repl-backlog-ttl", "3600", Int { min: 0, max: LONG }, repl!(backlog_ttl)),
    row("repl-timeout", "60", Int { min: 1, max: I32 }, repl!(timeout)),
    row("repl-ping-replica-period", "10", Int { min: 1, max: I32 }, repl!(ping_period)).alias(&["repl-ping-slave-period"]),
    row("min-replicas-to-write", "0", Int { min: 0, max: I32 }, repl!(min_replicas_to_write)).alias(&["min-slaves-to-write"]),
    row("min-replicas-max-lag", "10", Int { min: 0, max: I32 }, repl!(min_replicas_max_lag)).alias(&["min-slaves-max-lag"]),
    // Cluster.
    row("cluster-config-file", "nodes.conf", Text, cluster!(config_file)).immutable(),
    row("cluster-port", "0", Int { min: 0, max: 65535 }, cluster!(port)).immutable(),
    row("cluster-node-timeout", "15000", Int { min: 0, max: LONG }, cluster!(node_timeout)),
    row("cluster-announce-ip", "", Text, cluster!(announce_ip)),
    row("cluster-announce-hostname", "", Kind::Custom(check_hostname), cluster!(announce_hostname)),
    row("cluster-announce-port", "0", Int { min: 0, max: 65535 }, cluster!(announce_port)),
    row("cluster-announce-bus-port", "0", Int { min: 0, max: 65535 }, cluster!(announce_bus_port)),
    row("cluster-announce-tls-port", "0", Int { min: 0, max: 65535 }, Store::Ignored),
    row("cluster-preferred-endpoint-type", "ip", Enum(&["ip", "hostname", "unknown-endpoint"]), cluster!(preferred_endpoint_type)),
    row("cluster-require-full-coverage", "yes", Bool, cluster!(bool require_full_coverage)),
    row("cluster-replica-no-failover", "no", Bool, cluster!(bool replica_no_failover)).alias(&["cluster-slave-no-failover"]),
    row("cluster-replica-validity-factor", "10", Int { min: 0, max: I32 }, cluster!(replica_validity_factor)).alias(&["cluster-slave-validity-factor"]),
    row("cluster-migration-barrier", "1", Int { min: 0, max: I32 }, cluster!(migration_barrier)),
    row("cluster-allow-replica-migration", "yes", Bool, cluster!(bool allow_replica_migration)),
    row("cluster-allow-reads-when-down", "no", Bool, cluster!(bool allow_reads_when_down)),
    row("cluster-allow-pubsubshard-when-down", "yes", Bool, cluster!(bool allow_pubsubshard_when_down)),
    row("cluster-link-sendbuf-limit", "0", Memory { min: 0, max: u64::MAX as i128 }, Store::Ignored),
    // TLS (coordis serves none: see `Effect::Tls`).
    row("tls-port", "0", Int { min: 0, max: 65535 }, tls!(port)).effect(Effect::Tls),
    row("tls-replication", "no", Bool, tls!(bool replication)).effect(Effect::Tls),
    row("tls-cluster", "no", Bool, tls!(bool cluster)).effect(Effect::Tls),
    // Read per connection, as Redis (no apply function there either).
    row("tls-auth-clients", "yes", Enum(&["no", "yes", "optional"]), tls!(auth_clients)).effect(Effect::TlsAuth),
    row("tls-prefer-server-ciphers", "no", Bool, tls!(bool prefer_server_ciphers)).effect(Effect::Tls),
    row("tls-session-caching", "yes", Bool, tls!(bool session_caching)).effect(Effect::Tls),
    row("tls-session-cache-size", "20480", Int { min: 0, max: I32 }, tls!(session_cache_size)).effect(Effect::Tls),
    row("tls-session-cache-timeout", "300", Int { min: 0, max: I32 }, tls!(session_cache_timeout)).effect(Effect::Tls),
    row("tls-cert-file", "", Text, tls!(cert_file)).effect(Effect::Tls),
    row("tls-key-file", "", Text, tls!(key_file)).effect(Effect::Tls),
    row("tls-key-file-pass", "", Text, tls!(key_file_pass)).effect(Effect::Tls),
    row("tls-client-cert-file", "", Text, tls!(client_cert_file)).effect(Effect::Tls),
    row("tls-client-key-file", "", Text, tls!(client_key_file)).effect(Effect::Tls),
    row("tls-client-key-file-pass", "", Text, tls!(client_key_file_pass)).effect(Effect::Tls),
    row("tls-dh-params-file", "", Text, tls!(dh_params_file)).effect(Effect::Tls),
    row("tls-ca-cert-file", "", Text, tls!(ca_cert_file)).effect(Effect::Tls),
    row("tls-ca-cert-dir", "", Text, tls!(ca_cert_dir)).effect(Effect::Tls),
    row("tls-protocols", "", Text, tls!(protocols)).effect(Effect::Tls),
    row("tls-ciphers", "", Text, tls!(ciphers)).effect(Effect::Tls),
    row("tls-ciphersuites", "", Text, tls!(ciphersuites)).effect(Effect::Tls),
    // Redis's test-only knobs, shown by name only.
    row("use-exit-on-panic", "no", Bool, Store::Ignored).hidden(),
    row("rdb-key-save-delay", "0", Int { min: i32::MIN as i64, max: I32 }, field!(rdb_key_save_delay)).hidden(),
    row("key-load-delay", "0", Int { min: i32::MIN as i64, max: I32 }, field!(key_load_delay)).hidden(),
    row("watchdog-period", "0", Int { min: 0, max: I32 }, Store::Ignored).hidden(),
    row(
        "loading-process-events-interval-bytes",
        "2097152",
        Int { min: 1024, max: I32 },
        field!(loading_process_events_interval_bytes),
    )
    .hidden(),
];

/// The directive named `name` (or one of its aliases), any case.
pub(crate) fn lookup(name: &str) -> Option<&'static Directive> {
    DIRECTIVES
        .iter()
        .find(|d| d.names().any(|n| n.eq_ignore_ascii_case(name)))
}

/// Why CONFIG SET refused.
#[derive(Debug, PartialEq)]
pub(crate) enum SetError {
    /// Not a parameter coordis knows (the name as given).
    Unknown(String),
    /// The parameter given as `.0` cannot be set: Redis's reason text.
    Refused(String, String),
}

impl Config {
    /// A `user` directive: its rules checked as Redis checks them when it
    /// reads the file (`ACLAppendUserForLoading`: unknown commands are
    /// left for later), kept for the start.
    fn add_user_directive(&mut self, args: &[String]) -> Result<(), String> {
        let argv: Vec<&str> = std::iter::once("user").chain(args.iter().map(String::as_str)).collect();
        let declaration = |at: usize, why: &str| errors::acl::directive_rule(argv[at], why);
        if self.users.iter().any(|u| u[0] == args[0]) {
            return Err(declaration(1, errors::acl::DUPLICATE_USER));
        }
        let ops: Vec<bytes::Bytes> = args[1..].iter().map(|a| bytes::Bytes::from(a.clone())).collect();
        let merged = crate::acl::merge_selectors(&ops).map_err(|_| declaration(0, errors::acl::SYNTAX))?;
        let mut user = crate::acl::User::new(args[0].as_bytes(), self.acl_pubsub_allchannels);
        for (j, op) in merged.iter().enumerate() {
            match user.apply(op, self.acl_pubsub_allchannels) {
                Ok(()) | Err(crate::acl::RuleError::Unknown) => {}
                Err(e) => return Err(declaration(j, e.text())),
            }
        }
        self.users.push(args.to_vec());
        Ok(())
    }

    /// `maxmemory` in bytes (0: no limit).
    pub fn maxmemory(&self) -> u64 {
        self.memory.maxmemory
    }

    /// `maxmemory-policy`, as its directive spells it.
    pub fn maxmemory_policy(&self) -> &str {
        self.memory.policy.name()
    }

    /// Applies one directive given at startup (config file or command line).
    /// `Ok(false)` means it was accepted but has no effect in coordis.
    pub fn apply(&mut self, name: &str, values: &[String]) -> Result<bool, String> {
        self.apply_startup(name, values, &mut false)
    }

    /// [`Config::apply`] within one startup: `save_seen` says a `save`
    /// line was read already, so the next ones add their points to it
    /// instead of replacing the defaults (Redis's `save_loaded`: `save 900
    /// 1` and `save 300 10` on two lines are two points).
    fn apply_startup(&mut self, name: &str, values: &[String], save_seen: &mut bool) -> Result<bool, String> {
        let Some(d) = lookup(name) else {
            return Err("Bad directive or wrong number of arguments".into());
        };
        let value = match values {
            [one] => one.clone(),
            _ if d.multi_arg && !values.is_empty() => values.join(" "),
            _ => return Err("wrong number of arguments".into()),
        };
        let mut text = d.check(&value, &d.read(self))?;
        if d.name == "save" {
            if *save_seen && !text.is_empty() {
                let kept = d.read(self);
                if !kept.is_empty() {
                    text = format!("{kept} {text}");
                }
            }
            *save_seen = true;
        }
        d.write(self, &text);
        Ok(d.is_effective())
    }

    /// CONFIG SET of `(name, value)` pairs, all or nothing, as Redis 7:
    /// unknown names first, then immutable ones and duplicates, then the
    /// values. Returns the effects the changes must reach. (For a local
    /// client: the tests' shorthand.)
    #[cfg(test)]
    pub(crate) fn set_runtime(&mut self, pairs: &[(&str, &str)]) -> Result<Vec<Effect>, SetError> {
        self.set_runtime_by(pairs, true)
    }

    /// [`Config::set_runtime`] for a client, `local` when it connects from
    /// loopback: protected directives (`dir`, `dbfilename`) are settable
    /// as `enable-protected-configs` says (`yes`, or `local` for local
    /// clients), as Redis's `allowProtectedAction`.
    pub(crate) fn set_runtime_by(&mut self, pairs: &[(&str, &str)], local: bool) -> Result<Vec<Effect>, SetError> {
        let protected_allowed = match self.enable_protected_configs.as_str() {
            "yes" => true,
            "local" => local,
            _ => false,
        };
        // Names first, in order: the first unknown, immutable or repeated
        // one is the error.
        let mut found: Vec<&'static Directive> = Vec::with_capacity(pairs.len());
        for (i, (name, _)) in pairs.iter().enumerate() {
            let Some(d) = lookup(name) else {
                return Err(SetError::Unknown(name.to_string()));
            };
            let refused = |why: &str| Err(SetError::Refused(name.to_string(), why.to_string()));
            match d.change {
                Change::Mutable => {}
                Change::Immutable => return refused("can't set immutable config"),
                Change::Protected if protected_allowed => {}
                Change::Protected => return refused("can't set protected config"),
            }
            // The same name twice is refused; a name and its alias are not.
            if pairs[..i].iter().any(|(other, _)| other.eq_ignore_ascii_case(name)) {
                return refused("duplicate parameter");
            }
            found.push(d);
        }
        let mut staged = self.clone();
        let mut effects = vec![];
        for (d, (name, value)) in found.into_iter().zip(pairs) {
            let before = d.read(&staged);
            let text = d
                .check(value, &before)
                .map_err(|why| SetError::Refused(name.to_string(), why))?;
            d.write(&mut staged, &text);
            let changed = d.read(&staged) != before;
            if d.effect == Effect::ReplBacklog && changed {
                let size: u64 = d.read(&staged).parse().expect("checked as a memory value");
                d.write(&mut staged, &size.max(REPL_BACKLOG_MIN).to_string());
            }
            if !effects.contains(&d.effect) {
                effects.push(d.effect);
            }
        }
        *self = staged;
        Ok(effects)
    }

    /// CONFIG GET: the parameters matching each pattern (any case; a name
    /// without glob characters is looked up and shown as given, as Redis
    /// does), each once.
    pub fn matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = vec![];
        let mut seen: Vec<&str> = vec![];
        for pattern in patterns {
            if !pattern.iter().any(|c| matches!(c, b'*' | b'?' | b'[')) {
                let name = String::from_utf8_lossy(pattern);
                let Some(d) = lookup(&name) else { continue };
                if !out.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                    out.push((name.into_owned(), d.read(self)));
                }
                continue;
            }
            for d in DIRECTIVES.iter().filter(|d| !d.hidden) {
                for name in d.names() {
                    let shown = out.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) || seen.contains(&name);
                    if !shown && glob::matches(pattern, name.as_bytes(), true) {
                        seen.push(name);
                        out.push((name.to_string(), d.read(self)));
                    }
                }
            }
        }
        out
    }

    /// Zsets' listpack thresholds, as the sorted-set code takes them.
    pub(crate) fn zset_listpack(&self) -> crate::store::zset::Listpack {
        crate::store::zset::Listpack {
            max_entries: self.zset_max_listpack_entries,
            max_value: self.zset_max_listpack_value,
        }
    }

    /// Hashes' listpack thresholds.
    pub(crate) fn hash_listpack(&self) -> crate::store::hash::Limits {
        crate::store::hash::Limits {
            max_entries: self.hash_max_listpack_entries,
            max_value: self.hash_max_listpack_value,
        }
    }

    /// Lists' node size (`list-max-listpack-size`).
    pub(crate) fn list_fill(&self) -> crate::store::list::Fill {
        crate::store::list::Fill(self.list_max_listpack_size)
    }

    /// Stream node limits (`stream-node-max-bytes`, `stream-node-max-entries`).
    pub(crate) fn stream_limits(&self) -> crate::store::stream::NodeLimits {
        crate::store::stream::NodeLimits {
            max_bytes: self.stream_node_max_bytes,
            max_entries: self.stream_node_max_entries,
        }
    }

    /// Reads redis.conf syntax: one directive per line, `#` comments,
    /// arguments split like redis-cli (quotes allowed), `include` of other
    /// files (relative to the working directory, see [`Config::from_args`]).
    pub fn apply_file_text(&mut self, text: &str, warn: &mut dyn FnMut(String)) -> Result<(), String> {
        let mut cwd = std::env::current_dir().unwrap_or_default();
        self.apply_text_in(text, &mut cwd, 0, 0, &mut false, warn)
    }

    /// [`Config::apply_file_text`] with `cwd`, the directory relative paths
    /// resolve against: Redis changes its working directory at each `dir`
    /// line, so an `include` after one reads from there. `depth` counts
    /// the includes this text is in; `lines_before`, the lines of the
    /// startup's text before this one (Redis numbers the command line's
    /// options after the file's lines); `save_seen` is
    /// [`Config::apply_startup`]'s, for the whole startup. An error names
    /// its line as Redis's `FATAL CONFIG FILE ERROR` block does.
    fn apply_text_in(
        &mut self,
        text: &str,
        cwd: &mut PathBuf,
        depth: usize,
        lines_before: usize,
        save_seen: &mut bool,
        warn: &mut dyn FnMut(String),
    ) -> Result<(), String> {
        for (lineno, line) in text.split('\n').enumerate() {
            let trimmed = line.trim_matches([' ', '\t', '\r', '\n']);
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let at = |e: String| errors::directive::fatal_config(lines_before + lineno + 1, trimmed, &e);
            let Some(words) = split_args(trimmed.as_bytes()) else {
                return Err(at("Unbalanced quotes in configuration line".into()));
            };
            let words: Vec<String> = words
                .into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect();
            let Some((name, args)) = words.split_first() else {
                continue;
            };
            let name = name.to_ascii_lowercase();
            if lookup(&name).is_none() {
                if DEPRECATED.iter().any(|d| *d == name) && args.len() == 1 {
                    continue;
                }
                // `user <name> <rules...>` (CONFIG REWRITE writes the users
                // back as these lines): checked now, applied when the
                // server starts (Redis's `ACLAppendUserForLoading`).
                if name == "user" && !args.is_empty() {
                    self.add_user_directive(args).map_err(at)?;
                    continue;
                }
                // Sentinel mode is a mode of its own (not this one): its
                // lines are refused as Redis refuses them outside it.
                if name == "sentinel" {
                    if args.is_empty() {
                        continue;
                    }
                    return Err(at(errors::directive::SENTINEL_OUTSIDE.into()));
                }
                if name == "include" && args.len() == 1 {
                    if depth >= MAX_INCLUDE_DEPTH {
                        return Err(at("include nested too deeply".into()));
                    }
                    for path in include_paths(&cwd.join(&args[0]))? {
                        let text = std::fs::read_to_string(&path).map_err(|e| {
                            errors::directive::cannot_open(&path.display().to_string(), &errors::strerror(&e))
                        })?;
                        self.apply_text_in(&text, cwd, depth + 1, 0, save_seen, warn)?;
                    }
                    continue;
                }
            }
            match self.apply_startup(&name, args, save_seen) {
                Ok(true) => {}
                Ok(false) => warn(format!("directive '{name}' is accepted but has no effect in coordis")),
                Err(e) => return Err(at(e)),
            }
            if name == "dir" {
                *cwd = cwd.join(&args[0]);
            }
        }
        Ok(())
    }

    /// Reads a redis-server command line (without the program name): an
    /// optional config file path, then `--directive value ...` groups.
    /// Each directive without effect is reported to `warn` once.
    pub fn from_args(args: &[String], warn: &mut dyn FnMut(String)) -> Result<Config, String> {
        let mut warned: Vec<String> = vec![];
        let mut warn_once = |w: String| {
            if !warned.contains(&w) {
                warned.push(w.clone());
                warn(w);
            }
        };
        let mut config = Config::default();
        let mut save_seen = false;
        let mut rest = args;
        let mut cwd = std::env::current_dir().unwrap_or_default();
        // Redis appends each option to the file's text after a newline:
        // the first option is on the line after the file's last.
        let mut lines_before = 1;
        if let Some(first) = args.first() {
            if !first.starts_with("--") {
                let text = std::fs::read_to_string(first)
                    .map_err(|e| errors::directive::cannot_open(first, &errors::strerror(&e)))?;
                // Redis keeps the file's absolute path (INFO's config_file,
                // CONFIG REWRITE), taken before any `dir` moves it.
                config.config_file = cwd.join(first).display().to_string();
                config.apply_text_in(&text, &mut cwd, 0, 0, &mut save_seen, &mut warn_once)?;
                lines_before = text.matches('\n').count() + 1;
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
            // The options are read as lines appended to the file's text.
            let line = std::iter::once(name.to_string())
                .chain(values.iter().map(|v| repr(v)))
                .collect::<Vec<_>>()
                .join(" ");
            config.apply_text_in(&line, &mut cwd, 0, lines_before, &mut save_seen, &mut warn_once)?;
            lines_before += 1;
        }
        if !config.aclfile.is_empty() && !config.users.is_empty() {
            return Err(errors::acl::FILE_AND_USERS.into());
        }
        Ok(config)
    }
}

/// Names Redis 7.0 still accepts in a config file and ignores.
const DEPRECATED: [&str; 3] = [
    "list-max-ziplist-entries",
    "list-max-ziplist-value",
    "lua-replicate-commands",
];

/// How deep `include`s may nest (Redis has no limit and recurses until it
/// crashes; a file including itself is an error here).
const MAX_INCLUDE_DEPTH: usize = 32;

/// The files an `include` names: the path itself, or with a wildcard in
/// it, the files its last part matches in order (none is no error, so an
/// empty `conf.d` may be included), as Redis's use of `glob`.
fn include_paths(path: &std::path::Path) -> Result<Vec<PathBuf>, String> {
    let text = path.display().to_string();
    if !text.contains(['*', '?', '[']) {
        return Ok(vec![path.to_path_buf()]);
    }
    let (Some(dir), Some(pattern)) = (path.parent(), path.file_name()) else {
        return Ok(vec![]);
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(vec![]);
    };
    let pattern = pattern.to_string_lossy().into_owned();
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            // glob(3) leaves out dot files unless the pattern starts with a dot.
            (!name.starts_with('.') || pattern.starts_with('.'))
                && glob::matches(pattern.as_bytes(), name.as_bytes(), false)
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    Ok(found)
}

/// Redis's `sdscatrepr`: the text in double quotes, `\\`, `"` and
/// control bytes escaped, so that a config line reads it back whole (how
/// command-line values join the file's lines, and how CONFIG REWRITE
/// writes strings).
pub(crate) fn repr(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for &b in v.as_bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn save_points_default_accumulate_and_reset() {
        let point = |seconds, changes| SavePoint { seconds, changes };
        let c = Config::default();
        assert_eq!(c.save_points, vec![point(3600, 1), point(300, 100), point(60, 10000)]);
        // Lines at startup add up; the first replaces the defaults.
        let c = Config::from_args(&args(&["--save", "900", "1", "--save", "30", "5"]), &mut |_| {}).unwrap();
        assert_eq!(c.save_points, vec![point(900, 1), point(30, 5)]);
        let c = Config::from_args(&args(&["--save", "", "--save", "30", "5"]), &mut |_| {}).unwrap();
        assert_eq!(c.save_points, vec![point(30, 5)]);
        // Seconds are at least 1, changes at least 0, in pairs.
        for bad in [&["0", "1"][..], &["10"], &["10", "-1"], &["x", "1"]] {
            let mut a = vec!["--save"];
            a.extend_from_slice(bad);
            assert!(Config::from_args(&args(&a), &mut |_| {}).is_err(), "{bad:?}");
        }
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
                "--notify-keyspace-events",
                "KEA",
            ]),
            &mut |w| warnings.push(w),
        )
        .unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.requirepass.as_ref().map(Secret::expose), Some("pw"));
        assert!(c.save_points.is_empty());
        assert_eq!(c.notify_keyspace_events, crate::notify::parse_flags("KEA").unwrap());
        // `save` and `appendonly` are real: no warning.
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(!c.aof.enabled);
        assert!(Config::from_args(&args(&["--nosuch", "1"]), &mut |_| {}).is_err());
        assert!(Config::from_args(&args(&["--port", "abc"]), &mut |_| {}).is_err());
        assert!(Config::from_args(&args(&["--port", "1", "2"]), &mut |_| {}).is_err());
    }

    #[test]
    fn config_file_syntax() {
        let mut c = Config::default();
        c.apply_file_text(
            "# comment\nport 7001\nbind 127.0.0.1 ::1\nsave \"\"\nnotify-keyspace-events KEA\nzset-max-ziplist-entries 16\n",
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(c.port, 7001);
        assert_eq!(c.bind, vec!["127.0.0.1", "::1"]);
        assert_eq!(c.zset_max_listpack_entries, 16);
    }

    /// `include` as Redis resolves it: relative to the working directory,
    /// which a `dir` line before it moves; a wildcard includes the files it
    /// matches in order (none is no error); a missing file is Redis's error.
    /// Deprecated names and the default user's line are accepted; each
    /// directive without effect is reported once.
    #[test]
    fn include_dir_and_special_lines() {
        let root = std::env::temp_dir().join(format!("coordis-include-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("conf.d")).unwrap();
        std::fs::create_dir_all(root.join("empty.d")).unwrap();
        std::fs::write(root.join("conf.d/a.conf"), "maxclients 11\nhz 12\n").unwrap();
        std::fs::write(
            root.join("conf.d/b.conf"),
            "maxclients 13\nactive-defrag-cycle-min 14\n",
        )
        .unwrap();
        std::fs::write(root.join("conf.d/skip.txt"), "hz 99\n").unwrap();
        std::fs::write(root.join("one.conf"), "databases 5\n").unwrap();
        let main = root.join("main.conf");
        std::fs::write(
            &main,
            format!(
                "dir {}\ninclude one.conf\ninclude conf.d/*.conf\ninclude empty.d/*.conf\n\
                 list-max-ziplist-entries 512\nuser default on nopass ~* &* +@all\nactive-defrag-cycle-min 15\nactive-defrag-cycle-min 16\n",
                root.display()
            ),
        )
        .unwrap();
        let mut warnings = vec![];
        let c = Config::from_args(&args(&[main.to_str().unwrap()]), &mut |w| warnings.push(w)).unwrap();
        assert_eq!((c.databases, c.maxclients, c.hz), (5, 13, 12));
        assert_eq!(c.ignored["active-defrag-cycle-min"], "16");
        assert_eq!(c.config_file, main.display().to_string());
        let repl: Vec<&String> = warnings
            .iter()
            .filter(|w| w.contains("'active-defrag-cycle-min'"))
            .collect();
        assert_eq!(repl.len(), 1, "{warnings:?}");
        let missing = root.join("missing.conf");
        std::fs::write(&missing, "include nowhere.conf\n").unwrap();
        let err = Config::from_args(&args(&[missing.to_str().unwrap()]), &mut |_| {}).unwrap_err();
        assert!(
            err.contains("can't open config file") && err.contains("No such file or directory"),
            "{err}"
        );
        let other_user = root.join("user.conf");
        std::fs::write(&other_user, "user alice on >pw ~* +@all\nuser bob +nope\n").unwrap();
        let c = Config::from_args(&args(&[other_user.to_str().unwrap()]), &mut |_| {}).unwrap();
        assert_eq!(
            c.users.len(),
            2,
            "users are kept for the start; unknown commands too, as Redis"
        );
        std::fs::write(&other_user, "user alice on\nuser alice off\n").unwrap();
        let err = Config::from_args(&args(&[other_user.to_str().unwrap()]), &mut |_| {}).unwrap_err();
        assert!(err.ends_with("Error in user declaration 'alice': Duplicate user found. A user can only be defined once in config files"), "{err}");
        std::fs::write(&other_user, "user alice on #abc\n").unwrap();
        let err = Config::from_args(&args(&[other_user.to_str().unwrap()]), &mut |_| {}).unwrap_err();
        assert!(err.ends_with("Error in user declaration 'alice': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"), "{err}");
        let sentinel = root.join("sentinel.conf");
        std::fs::write(&sentinel, "sentinel monitor m 127.0.0.1 6379 2\n").unwrap();
        let err = Config::from_args(&args(&[sentinel.to_str().unwrap()]), &mut |_| {}).unwrap_err();
        assert!(err.ends_with("sentinel directive while not in sentinel mode"), "{err}");
        let looping = root.join("loop.conf");
        std::fs::write(&looping, format!("include {}\n", looping.display())).unwrap();
        assert!(Config::from_args(&args(&[looping.to_str().unwrap()]), &mut |_| {}).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn special_values_as_redis_shows_them() {
        let check = |name: &str, value: &str| lookup(name).unwrap().check(value, "");
        assert_eq!(check("oom-score-adj", "RELATIVE").unwrap(), "yes");
        assert_eq!(check("shutdown-on-sigint", "force save now").unwrap(), "save now force");
        assert!(check("shutdown-on-sigint", "save nosave").is_err());
        assert_eq!(
            check("latency-tracking-info-percentiles", "50.5000 1e1").unwrap(),
            "50.5 10"
        );
        assert_eq!(check("maxmemory-clients", "10%").unwrap(), "10%");
        assert!(check("maxmemory-clients", "101%").is_err());
        assert_eq!(check("replicaof", "NO ONE").unwrap(), "");
        assert_eq!(check("replicaof", "h +7").unwrap(), "h 7");
        assert!(check("proc-title-template", "{title}").is_err());
        assert!(check("proc-title-template", "{{ {port}").is_ok());
        assert_eq!(repr("a\"b\\\n\x01"), "\"a\\\"b\\\\\\n\\x01\"");
    }

    /// Every row: its default passes its own check and reads back as it
    /// was written; every name (aliases too) is accepted on the command
    /// line, in a file and, where mutable, by CONFIG SET.
    #[test]
    fn every_directive_is_accepted_everywhere() {
        let defaults = Config::default();
        for d in DIRECTIVES {
            let canonical = d.check(d.default, "").unwrap();
            assert_eq!(d.read(&defaults), d.check(&canonical, "").unwrap(), "{}", d.name);
            for name in d.names() {
                let words: Vec<String> = if d.multi_arg {
                    d.default.split(' ').map(String::from).collect()
                } else {
                    vec![d.default.to_string()]
                };
                let mut line = vec![format!("--{name}")];
                line.extend(words.iter().cloned());
                if d.default.is_empty() {
                    line.truncate(1);
                    line.push(String::new());
                }
                let c = Config::from_args(&line, &mut |_| {}).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(d.read(&c), d.read(&defaults), "{name} on the command line");
                let mut f = Config::default();
                f.apply_file_text(&format!("{name} \"{}\"\n", d.default), &mut |_| {})
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(d.read(&f), d.read(&defaults), "{name} in a file");
                let mut r = Config::default();
                let set = r.set_runtime(&[(name, d.default)]);
                match d.change {
                    Change::Mutable => assert!(set.is_ok(), "{name}: {set:?}"),
                    Change::Immutable | Change::Protected => assert!(matches!(set, Err(SetError::Refused(..)))),
                }
            }
        }
        let mut names: Vec<&str> = DIRECTIVES.iter().flat_map(|d| d.names()).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "a name in two rows");
    }

    #[test]
    fn runtime_set_and_get() {
        let mut c = Config::default();
        assert_eq!(
            c.set_runtime(&[("nosuch", "1")]),
            Err(SetError::Unknown("nosuch".into()))
        );
        assert!(matches!(
            c.set_runtime(&[("maxclients", "abc")]),
            Err(SetError::Refused(..))
        ));
        c.set_runtime(&[("maxclients", "5")]).unwrap();
        assert_eq!(
            c.matching(&[b"maxcl*"]),
            vec![("maxclients".to_string(), "5".to_string())]
        );
        // Rebinding is CONFIG SET's (the listeners); the table takes the value.
        assert_eq!(c.set_runtime(&[("port", "1")]), Ok(vec![Effect::Listeners]));
        assert!(c.set_runtime(&[("bind", &["127.0.0.1"; 17].join(" "))]).is_err());
        // All or nothing.
        assert!(c.set_runtime(&[("maxclients", "6"), ("hz", "x")]).is_err());
        assert_eq!(c.maxclients, 5);
        assert_eq!(
            c.set_runtime(&[("maxclients", "6"), ("MAXCLIENTS", "7")]),
            Err(SetError::Refused("MAXCLIENTS".into(), "duplicate parameter".into()))
        );
        c.set_runtime(&[("zset-max-ziplist-entries", "3"), ("hz", "1000")])
            .unwrap();
        assert_eq!((c.zset_max_listpack_entries, c.hz), (3, 500));
        assert_eq!(c.matching(&[b"HZ"]), vec![("HZ".to_string(), "500".to_string())]);
    }
}
