//! Every error text coordis sends, worded exactly as Redis 7.0.15 words it.
//!
//! Commands never spell an error inline: they use a constant or constructor
//! from here, so the wording is checked (and changed) in one place. The texts
//! exclude the leading `-` of the wire format. (The Lua libraries' own
//! errors, raised inside Lua as the C libraries word them — cjson, struct,
//! cmsgpack, the sandbox — live beside their ports in `lua/`.)

use std::borrow::Cow;

use crate::protocol::Reply;

pub(crate) const SYNTAX: &str = "ERR syntax error";
pub(crate) const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub(crate) const NOT_FLOAT: &str = "ERR value is not a valid float";
pub(crate) const OVERFLOW: &str = "ERR increment or decrement would overflow";
pub(crate) const DECR_OVERFLOW: &str = "ERR decrement would overflow";
pub(crate) const NAN_OR_INF: &str = "ERR increment would produce NaN or Infinity";
pub(crate) const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub(crate) const NO_SUCH_KEY: &str = "ERR no such key";
pub(crate) const DB_OUT_OF_RANGE: &str = "ERR DB index is out of range";
pub(crate) const INVALID_CURSOR: &str = "ERR invalid cursor";
pub(crate) const OFFSET_OUT_OF_RANGE: &str = "ERR offset is out of range";
pub(crate) const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
pub(crate) const NOAUTH: &str = "NOAUTH Authentication required.";
pub(crate) const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub(crate) const AUTH_NOT_CONFIGURED: &str =
    "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";
pub(crate) const NOPROTO: &str = "NOPROTO unsupported protocol version";
pub(crate) const PROTOCOL_VERSION_NOT_INTEGER: &str = "ERR Protocol version is not an integer or out of range";
pub(crate) const NX_XX_GT_LT: &str = "ERR NX and XX, GT or LT options at the same time are not compatible";
pub(crate) const GT_LT: &str = "ERR GT and LT options at the same time are not compatible";
pub(crate) const CLIENT_NAME_SPACES: &str = "ERR Client names cannot contain spaces, newlines or special characters.";
pub(crate) const NO_SUCH_CLIENT: &str = "ERR No such client";
pub(crate) const MAX_CLIENTS: &str = "ERR max number of clients reached";
/// Sent (then the connection closed) to a non-loopback client of a server in
/// protected mode without a password.
pub const DENIED: &str = "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.";
pub(crate) const SAME_OBJECT: &str = "ERR source and destination objects are the same";

pub(crate) const NOT_IN_MULTI: &str = "ERR Command not allowed inside a transaction";
pub(crate) const SCRIPT_UNKNOWN_COMMAND: &str = "ERR Unknown Redis command called from script";
pub(crate) const SCRIPT_WRONG_ARGS: &str = "ERR Wrong number of args calling Redis command from script";
pub(crate) const NOT_FROM_SCRIPT: &str = "ERR This Redis command is not allowed from script";
pub(crate) const WRITE_IN_READ_ONLY_SCRIPT: &str = "ERR Write commands are not allowed from read-only scripts.";
pub(crate) const WATCH_IN_MULTI: &str = "ERR WATCH inside MULTI is not allowed";
/// A command panicked (a bug in coordis): contained, logged, answered.
pub(crate) const INTERNAL: &str = "ERR internal error running the command";
pub(crate) const VALUE_OUT_OF_RANGE: &str = "ERR value is out of range";
pub(crate) const HASH_NOT_INTEGER: &str = "ERR hash value is not an integer";
pub(crate) const HASH_NOT_FLOAT: &str = "ERR hash value is not a float";
pub(crate) const NUMKEYS_NOT_POSITIVE: &str = "ERR numkeys should be greater than 0";
pub(crate) const INDEX_OUT_OF_RANGE: &str = "ERR index out of range";
pub(crate) const RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";
pub(crate) const COUNT_NEGATIVE: &str = "ERR COUNT can't be negative";
pub(crate) const MAXLEN_NEGATIVE: &str = "ERR MAXLEN can't be negative";
pub(crate) const COUNT_NOT_POSITIVE: &str = "ERR count should be greater than 0";
pub(crate) const LFU_NO_IDLETIME: &str = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
pub(crate) const NO_LFU: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
pub(crate) const NAN_OR_INF_VALUE: &str = "ERR value is NaN or Infinity";
/// `getRangeLongFromObjectOrReply` with Redis's `-LONG_MAX..LONG_MAX`.
pub(crate) const LONG_OUT_OF_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
pub(crate) const BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
pub(crate) const BIT_VALUE: &str = "ERR bit is not an integer or out of range";
pub(crate) const BIT_ARGUMENT: &str = "ERR The bit argument must be 1 or 0.";
pub(crate) const BITOP_NOT_ONE_SOURCE: &str = "ERR BITOP NOT must be called with a single source key.";
pub(crate) const BITFIELD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
pub(crate) const BITFIELD_OVERFLOW: &str = "ERR Invalid OVERFLOW type specified";
pub(crate) const BITFIELD_RO_ONLY_GET: &str = "ERR BITFIELD_RO only supports the GET subcommand";
pub(crate) const LCS_NOT_STRINGS: &str = "ERR The specified keys must contain string values";
pub(crate) const LCS_LEN_AND_IDX: &str = "ERR If you want both the length and indexes, please just use IDX.";
pub(crate) const LCS_TOO_BIG: &str = "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
pub(crate) const SORT_NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";
pub(crate) const MULTI_NESTED: &str = "ERR MULTI calls can not be nested";
pub(crate) const DISCARD_WITHOUT_MULTI: &str = "ERR DISCARD without MULTI";
pub(crate) const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";
pub(crate) const NOT_BUSY: &str = "NOTBUSY No scripts in execution right now.";
pub(crate) const BUSY: &str = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub(crate) const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
pub(crate) const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

pub(crate) const NUMKEYS_TOO_MANY: &str = "ERR Number of keys can't be greater than number of args";
pub(crate) const NUMKEYS_NEGATIVE: &str = "ERR Number of keys can't be negative";
pub(crate) const SCRIPT_FLUSH_MODE: &str = "ERR SCRIPT FLUSH only support SYNC|ASYNC option";
pub(crate) const SCRIPT_DEBUG_MODE: &str = "ERR Use SCRIPT DEBUG YES/SYNC/NO";
pub(crate) const SCRIPT_DEBUG_IN_MULTI: &str = "ERR SCRIPT DEBUG must be called outside a pipeline";
/// coordis's own: it has no Lua debugger (LDB) to switch on.
pub(crate) const SCRIPT_DEBUG_UNSUPPORTED: &str =
    "ERR coordis has no Lua debugger: SCRIPT DEBUG YES and SYNC are not supported";
pub(crate) const HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";
pub(crate) const INVALID_CLIENT_ID: &str = "ERR Invalid client ID";
pub(crate) const CLIENT_ID_NOT_POSITIVE: &str = "ERR client-id should be greater than 0";
pub(crate) const NO_CONFIG_FILE: &str = "ERR The server is running without a config file";
pub(crate) const INVALID_FIRST_DB: &str = "ERR invalid first DB index";
pub(crate) const INVALID_SECOND_DB: &str = "ERR invalid second DB index";
pub(crate) const NO_SHUTDOWN_IN_PROGRESS: &str = "ERR No shutdown in progress.";
/// SHUTDOWN whose final save failed (without FORCE), or a SHUTDOWN
/// waiting for replicas that was aborted: the server goes on.
pub(crate) const SHUTDOWN_FAILED: &str = "ERR Errors trying to SHUTDOWN. Check logs.";
/// SHUTDOWN that would wait for replicas from a client that cannot block.
pub(crate) const SHUTDOWN_DENY_BLOCKING: &str =
    "ERR SHUTDOWN without NOW or ABORT isn't allowed for DENY BLOCKING client";
/// Writes (and PING) after a failed background save, with save points set
/// and `stop-writes-on-bgsave-error yes` (Redis's `shared.bgsaveerr`).
pub(crate) const MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";
/// Writes (and PING) while the append-only file's last write or fsync
/// failed: this, then the error's `strerror` text (Redis's
/// `writeCommandsGetDiskErrorMessage`).
pub(crate) fn misconf_aof(errno: i32) -> Reply {
    let why = strerror(&std::io::Error::from_raw_os_error(errno));
    owned(format!("MISCONF Errors writing to the AOF file: {why}"))
}
/// Logged before a replica whose disk failed stops, at its primary's
/// first write, with `replica-ignore-disk-write-errors no` (Redis's
/// `serverPanic` in `processCommand`).
pub(crate) const REPLICA_DISK_PANIC: [&str; 3] = [
    "------------------------------------------------",
    "!!! Software Failure. Press left mouse button to continue",
    "Guru Meditation: Replica was unable to write command to disk. #server.c:3890",
];
/// Logged for an error reply to a command of the primary's stream (`who`
/// "replica", `to` "master") or of the append-only file being loaded
/// ("server", "AOF-loading-client"), as Redis's `afterErrorReply`.
pub(crate) fn propagation_error(who: &str, to: &str, error: &str, command: &str) -> String {
    format!("== CRITICAL == This {who} is sending an error to its {to}: '-{error}' after processing the command '{command}'")
}
/// Redis's panic under `propagation-error-behavior panic`: the lines its
/// `serverPanic` logs before the crash report.
pub(crate) fn propagation_panic(who: &str, to: &str, command: &str) -> [String; 3] {
    [
        REPLICA_DISK_PANIC[0].to_string(),
        REPLICA_DISK_PANIC[1].to_string(),
        format!("Guru Meditation: This {who} panicked sending an error to its {to} after processing the command '{command}' #networking.c:555"),
    ]
}
/// Logged at most every 10 s while a replica whose disk failed applies its
/// primary's writes (`replica-ignore-disk-write-errors yes`).
pub(crate) const REPLICA_DISK_IGNORED: &str =
    "Replica is applying a command even though it is unable to write to disk.";
/// Logged before the server stops when a write of the append-only file
/// fails under `appendfsync always` (Redis exits with status 1).
pub(crate) const AOF_WRITE_FATAL: &str =
    "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...";
/// Logged before the server stops when an fsync of the append-only file
/// fails under `appendfsync always` (Redis exits with status 1).
pub(crate) fn aof_fsync_fatal(e: &std::io::Error) -> String {
    format!(
        "Can't persist AOF for fsync error when the AOF fsync policy is 'always': {}. Exiting...",
        strerror(e)
    )
}
/// A `denyoom` command (or a queued one, an EXEC of them, a script's
/// write) while used memory is over `maxmemory` and nothing may be evicted
/// (Redis's `shared.oomerr`).
pub(crate) const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// Writes while `min-replicas-to-write` is not met.
pub(crate) const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
/// Commands without the `loading` flag while the dataset loads.
pub(crate) const LOADING: &str = "LOADING Redis is loading the dataset in memory";
/// A write on a replica with `replica-read-only yes` (also from a script).
pub(crate) const READONLY_REPLICA: &str = "READONLY You can't write against a read only replica.";
/// A command not flagged `stale` on a replica whose link is down, with
/// `replica-serve-stale-data no`.
pub(crate) const MASTERDOWN: &str = "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
/// A script's command not flagged `stale` on a replica whose link is down
/// with `replica-serve-stale-data no` (an `allow-stale` script got to run).
pub(crate) const STALE_IN_SCRIPT: &str = "ERR Can not execute the command on a stale replica";
/// REPLICAOF's port out of 0..=65535 or not a number.
pub(crate) const INVALID_MASTER_PORT: &str = "ERR Invalid master port";
/// REPLICAOF's answer when the link already points at that primary.
pub(crate) const ALREADY_CONNECTED: &str = "OK Already connected to specified master";
/// FAILOVER and the PSYNC FAILOVER handoff (Redis's `failoverCommand`,
/// `syncCommand`, `replicaofCommand`).
pub(crate) mod failover {
    pub(crate) const NOT_IN_PROGRESS: &str = "ERR No failover in progress.";
    pub(crate) const TIMEOUT_NOT_POSITIVE: &str = "ERR FAILOVER timeout must be greater than 0";
    pub(crate) const IN_PROGRESS: &str = "ERR FAILOVER already in progress.";
    pub(crate) const ON_REPLICA: &str = "ERR FAILOVER is not valid when server is a replica.";
    pub(crate) const NO_REPLICAS: &str = "ERR FAILOVER requires connected replicas.";
    pub(crate) const FORCE_NEEDS: &str =
        "ERR FAILOVER with force option requires both a timeout and target HOST and IP.";
    pub(crate) const NOT_A_REPLICA: &str = "ERR FAILOVER target HOST and PORT is not a replica.";
    pub(crate) const NOT_ONLINE: &str = "ERR FAILOVER target replica is not online.";
    pub(crate) const IN_CLUSTER: &str =
        "ERR FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead.";
    /// REPLICAOF while a FAILOVER runs.
    pub(crate) const NO_REPLICAOF: &str = "ERR REPLICAOF not allowed while failing over.";
    /// PSYNC ... FAILOVER sent to a primary.
    pub(crate) const PSYNC_TO_PRIMARY: &str = "ERR PSYNC FAILOVER can't be sent to a master.";
    /// PSYNC ... FAILOVER naming another history than the replica's.
    pub(crate) const PSYNC_REPLID: &str = "ERR PSYNC FAILOVER replid must match my replid.";
    /// A replica asking to sync while this server fails over.
    pub(crate) const NO_SYNC_FAILING_OVER: &str = "NOMASTERLINK Can't SYNC while failing over";
    /// A replica asking to sync from a replica whose own link is down.
    pub(crate) const NO_SYNC_LINK_DOWN: &str = "NOMASTERLINK Can't SYNC while not connected with my master";
    /// SYNC or PSYNC behind replies not yet written (pipelined after
    /// another command).
    pub(crate) const NO_SYNC_PENDING_OUTPUT: &str = "ERR SYNC and PSYNC are invalid with pending output";
}
pub(crate) const EXEC_WITHOUT_MULTI: &str = "ERR EXEC without MULTI";
pub(crate) const XX_NX: &str = "ERR XX and NX options at the same time are not compatible";
pub(crate) const GT_LT_NX: &str = "ERR GT, LT, and/or NX options at the same time are not compatible";
pub(crate) const INCR_SINGLE_PAIR: &str = "ERR INCR option supports a single increment-element pair";
pub(crate) const LIMIT_NEEDS_BY: &str =
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
pub(crate) const GEO_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";
pub(crate) const GEO_RADIUS_NOT_NUMBER: &str = "ERR need numeric radius";
pub(crate) const GEO_RADIUS_NEGATIVE: &str = "ERR radius cannot be negative";
pub(crate) const GEO_WIDTH_NOT_NUMBER: &str = "ERR need numeric width";
pub(crate) const GEO_HEIGHT_NOT_NUMBER: &str = "ERR need numeric height";
pub(crate) const GEO_BOX_NEGATIVE: &str = "ERR height or width cannot be negative";
pub(crate) const GEO_COUNT_NOT_POSITIVE: &str = "ERR COUNT must be > 0";
pub(crate) const GEO_MEMBER_UNKNOWN: &str = "ERR could not decode requested zset member";
pub(crate) const GEO_ANY_WITHOUT_COUNT: &str = "ERR the ANY argument requires COUNT argument";
pub(crate) const GEO_STORE_WITH: &str =
    "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options";
pub(crate) const GEOSEARCHSTORE_WITH: &str =
    "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options";
pub(crate) const WITHSCORES_BYLEX: &str = "ERR syntax error, WITHSCORES not supported in combination with BYLEX";
pub(crate) const WEIGHT_NOT_FLOAT: &str = "ERR weight value is not a float";
pub(crate) const LIMIT_NEGATIVE: &str = "ERR LIMIT can't be negative";
pub(crate) const BINARY_SCRIPT: &str =
    "ERR Error compiling script (new function): user_script: binary code not allowed";
pub(crate) const CALL_OUTSIDE_SCRIPT: &str = "ERR redis.call can only be used while a script runs";
pub(crate) const CALL_NO_ARGS: &str = "ERR Please specify at least one argument for this redis lib call";
pub(crate) const CALL_ARG_TYPE: &str = "ERR Lua redis lib command arguments must be strings or integers";
pub(crate) const SCRIPT_KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
pub(crate) const MIN_MAX_NOT_FLOAT: &str = "ERR min or max is not a float";
pub(crate) const MIN_MAX_NOT_STRING_RANGE: &str = "ERR min or max not valid string range item";
pub(crate) const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";
pub(crate) const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
/// Blocking commands' and WAIT's timeouts (`getTimeoutFromObjectOrReply`).
pub(crate) const TIMEOUT_NOT_FLOAT: &str = "ERR timeout is not a float or out of range";
pub(crate) const TIMEOUT_NOT_INTEGER: &str = "ERR timeout is not an integer or out of range";
pub(crate) const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";
/// The error a client blocked in a command gets from `CLIENT UNBLOCK id ERROR`.
pub(crate) const UNBLOCKED: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";
/// What a client blocked in a command gets when its primary becomes a
/// replica (Redis's `disconnectAllBlockedClients`; it is closed after it).
pub(crate) const UNBLOCKED_DEMOTED: &str =
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";
pub(crate) const UNBLOCK_REASON: &str = "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR";
pub(crate) const PAUSE_MODE: &str = "ERR CLIENT PAUSE mode must be WRITE or ALL";
/// `COORDIS.CLOCK` on a server built with a clock of its own.
pub(crate) const NOT_A_TEST_CLOCK: &str = "ERR this server's clock is not a test clock";
pub(crate) const DEBUG_DISABLED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
/// `COORDIS.SERVER PAUSE` on an engine driven without a runtime (tests).
pub(crate) const NO_RUNTIME: &str = "ERR no runtime to lift the pause";
/// `COORDIS.MEMORY FILL` (`ServerControl::fill_memory`) with no limit to fill to.
pub(crate) const FILL_NO_LIMIT: &str =
    "ERR COORDIS.MEMORY FILL needs a maxmemory limit (COORDIS.MEMORY LIMIT sets one)";
/// `COORDIS.MEMORY FILL` to more than ten times the limit.
pub(crate) const FILL_PERCENT: &str = "ERR COORDIS.MEMORY FILL percent must be at most 1000";
/// COORDIS.REPLICATION naming a replica link that is not there.
pub(crate) const NO_SUCH_LINK: &str = "ERR no replica link with that index (COORDIS.REPLICATION LINKS lists them)";
/// COORDIS.REPLICATION PROMOTE outside a runtime (nothing to talk to the replica).
pub(crate) const PROMOTE_NO_RUNTIME: &str = "ERR no runtime to reach the replica";
/// `COORDIS.FAULT ADD ... PROBABILITY p` outside 0..1.
pub(crate) const PROBABILITY: &str = "ERR probability must be a number from 0 to 1";

/// A HyperLogLog whose sparse runs do not cover its registers.
pub(crate) const HLL_CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";
/// A string that is not a HyperLogLog given to a PF command.
pub(crate) const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
/// PFDEBUG of a missing key.
pub(crate) const PFDEBUG_NO_KEY: &str = "ERR The specified key does not exist";
/// PFDEBUG DECODE of a dense HyperLogLog.
pub(crate) const PFDEBUG_NOT_SPARSE: &str = "ERR HLL encoding is not sparse";

/// `ERR Unknown PFDEBUG subcommand 'x'` (the name as given).
pub(crate) fn pfdebug_unknown(sub: &[u8]) -> Reply {
    owned(sanitize(format!("ERR Unknown PFDEBUG subcommand '{}'", lossy(sub))))
}

/// PFSELFTEST's failure replies.
pub(crate) fn pfselftest_failed(failure: &crate::store::hll::SelftestFailure) -> Reply {
    use crate::store::hll::SelftestFailure::*;
    owned(match failure {
        Register { index, expected, got } => {
            format!("ERR TESTFAILED Register {index} should be {expected} but is {got}")
        }
        NotSparse => "ERR TESTFAILED sparse encoding not used".to_string(),
        Disagree => "ERR TESTFAILED dense/sparse disagree".to_string(),
        TooBigError { card, abs_err } => format!("ERR TESTFAILED Too big error. card:{card} abserr:{abs_err}"),
    })
}

pub(crate) fn err(text: &'static str) -> Reply {
    Reply::Error(Cow::Borrowed(text))
}

fn owned(text: String) -> Reply {
    Reply::Error(Cow::Owned(text))
}

/// Redis turns `\r` and `\n` in error texts built from user input into spaces.
fn sanitize(text: String) -> String {
    text.replace(['\r', '\n'], " ")
}

fn lossy(b: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// `ERR wrong number of arguments for 'get' command` (name as Redis spells
/// it: lower case, `parent|sub` for subcommands).
/// The log line CONFIG SET maxmemory writes for a limit below the memory in use.
pub(crate) fn maxmemory_below_used(max: u64, used: u64) -> String {
    format!("WARNING: the new maxmemory value set via CONFIG SET ({max}) is smaller than the current memory usage ({used}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.")
}

pub(crate) fn wrong_args(name: &str) -> Reply {
    owned(format!("ERR wrong number of arguments for '{name}' command"))
}

/// `ERR unknown command 'x', with args beginning with: 'a' 'b' `.
pub(crate) fn unknown_command(args: &[bytes::Bytes]) -> Reply {
    let mut list = String::new();
    for arg in &args[1..] {
        if list.len() >= 128 {
            break;
        }
        let room = 128 - list.len();
        let text = lossy(arg);
        let cut: String = text.chars().take(room).collect();
        list.push_str(&format!("'{cut}' "));
    }
    let name: String = lossy(&args[0]).chars().take(128).collect();
    owned(sanitize(format!(
        "ERR unknown command '{name}', with args beginning with: {list}"
    )))
}

/// A RESP2 client in pub/sub context sent a command other than
/// (P)SUBSCRIBE, (P)UNSUBSCRIBE, PING, QUIT or RESET.
pub(crate) fn not_while_subscribed(name: &str) -> Reply {
    owned(format!("ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"))
}

/// `EXECABORT Transaction discarded because of: <reason>`, the reason being
/// the error that refused EXEC without its `ERR ` prefix.
pub(crate) fn exec_abort(reason: &str) -> Reply {
    let reason = reason.strip_prefix("ERR ").unwrap_or(reason);
    owned(format!("EXECABORT Transaction discarded because of: {reason}"))
}

/// `ERR Syntax error in HELLO option 'x'`.
pub(crate) fn hello_option(opt: &[u8]) -> Reply {
    owned(sanitize(format!("ERR Syntax error in HELLO option '{}'", lossy(opt))))
}

/// `ERR Unknown client type 'x'` (CLIENT LIST / KILL TYPE).
pub(crate) fn unknown_client_type(kind: &[u8]) -> Reply {
    owned(sanitize(format!("ERR Unknown client type '{}'", lossy(kind))))
}

/// `ERR No such user 'x'` (CLIENT KILL USER).
pub(crate) fn no_such_user(user: &[u8]) -> Reply {
    owned(sanitize(format!("ERR No such user '{}'", lossy(user))))
}

/// `ERR at least 1 input key is needed for 'zunionstore' command`.
pub(crate) fn no_input_keys(cmd: &str) -> Reply {
    owned(format!("ERR at least 1 input key is needed for '{cmd}' command"))
}

/// A script that does not compile: `ERR Error compiling script (new function): <lua error>`.
pub(crate) fn compile_error(lua: &str) -> Reply {
    owned(sanitize(format!("ERR Error compiling script (new function): {lua}")))
}

/// A script the VM could not run to an answer: `ERR <lua error>`.
pub(crate) fn script_failed(lua: &str) -> Reply {
    owned(sanitize(format!("ERR {lua}")))
}

/// `ERR unknown subcommand or wrong number of arguments for 'x'. Try PUBSUB HELP.`
pub(crate) fn sub_wrong_args(sub: &[u8], parent: &str) -> Reply {
    owned(sanitize(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {parent} HELP.",
        lossy(sub)
    )))
}

/// A test-control command `enable-test-commands` does not allow, worded
/// as Redis refuses DEBUG under `enable-debug-command`.
pub(crate) fn test_commands_disabled(command: &str) -> Reply {
    owned(format!(
        "ERR {command} command not allowed. If the enable-test-commands option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."
    ))
}

/// `ERR unknown subcommand 'x'. Try CLIENT HELP.`
pub(crate) fn unknown_subcommand(sub: &[u8], parent: &str) -> Reply {
    let sub: String = lossy(sub).chars().take(128).collect();
    owned(sanitize(format!("ERR unknown subcommand '{sub}'. Try {parent} HELP.")))
}

/// `ERR invalid expire time in 'set' command`.
pub(crate) fn invalid_expire(cmd: &str) -> Reply {
    owned(format!("ERR invalid expire time in '{cmd}' command"))
}

/// `ERR Unsupported option foo` (EXPIRE family).
pub(crate) fn unsupported_option(opt: &[u8]) -> Reply {
    owned(sanitize(format!("ERR Unsupported option {}", lossy(opt))))
}

/// CONFIG SET on a parameter coordis does not have.
pub(crate) fn config_set_unknown(name: &str) -> Reply {
    owned(sanitize(format!(
        "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
    )))
}

/// CONFIG SET with a value the parameter rejects.
pub(crate) fn config_set_failed(name: &str, why: &str) -> Reply {
    owned(sanitize(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
    )))
}

/// Redis's log lines when TLS cannot be configured (tls.c's
/// `tlsConfigure`, server.c's startup), each followed by the reason where
/// Redis prints OpenSSL's: coordis words its own reasons.
pub(crate) mod tls {
    pub(crate) const NO_CERT: &str = "No tls-cert-file configured!";
    pub(crate) const NO_KEY: &str = "No tls-key-file configured!";
    pub(crate) const NO_CA: &str = "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!";
    pub(crate) const BAD_PROTOCOLS: &str =
        "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.";
    /// At startup, after the reason's own line; the process then exits 1.
    pub(crate) const STARTUP_FAILED: &str = "Failed to configure TLS. Check logs for more info.";
    /// A TLS handshake that did not complete (Redis's `clientAcceptHandler`).
    pub(crate) const ACCEPT_FAILED: &str = "Error accepting a client connection";
    pub(crate) fn cert(file: &str, why: &str) -> String {
        format!("Failed to load certificate: {file}: {why}")
    }
    pub(crate) fn key(file: &str, why: &str) -> String {
        format!("Failed to load private key: {file}: {why}")
    }
    pub(crate) fn ca(why: &str) -> String {
        format!("Failed to configure CA certificate(s) file/directory: {why}")
    }
    pub(crate) fn ciphers(list: &str) -> String {
        format!("Failed to configure ciphers: {list}")
    }
    pub(crate) fn ciphersuites(list: &str) -> String {
        format!("Failed to configure ciphersuites: {list}")
    }
    pub(crate) fn dh_load(file: &str, why: &str) -> String {
        format!("Failed to load {file}: {why}")
    }
    pub(crate) fn dh_read(file: &str) -> String {
        format!("{file}: failed to read DH params.")
    }
    /// At startup, when the TLS port cannot be bound.
    pub(crate) fn listen_failed(port: u16) -> String {
        format!("Failed listening on port {port} (TLS), aborting.")
    }
}

/// An OS error as C's strerror words it (Rust adds ` (os error N)`).
pub fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Redis's log lines for the Unix-domain listener (`unixsocket`): server.c's
/// start-up and `closeListeningSockets`, anet.c's reasons.
pub(crate) mod unix {
    /// Logged when the listener is bound and serving.
    pub(crate) fn ready(path: &str) -> String {
        format!("The server is now ready to accept connections at {path}")
    }
    /// At start-up, before the process exits 1.
    pub(crate) fn open_failed(why: &str) -> String {
        format!("Failed opening Unix socket: {why}")
    }
    /// The reason for a path that does not fit `sockaddr_un`.
    pub(crate) fn too_long(len: usize, max: usize) -> String {
        format!("unix socket path too long ({len}), must be under {max}")
    }
    /// The reason for a failed system call (`bind: ...`, `listen: ...`).
    pub(crate) fn call_failed(call: &str, e: &std::io::Error) -> String {
        format!("{call}: {}", super::strerror(e))
    }
    /// At shutdown, before the file is removed.
    pub(crate) const REMOVING: &str = "Removing the unix socket file.";
    pub(crate) fn remove_failed(e: &std::io::Error) -> String {
        format!("Error removing the unix socket file: {}", super::strerror(e))
    }
}

/// What the process tells the log about settings the operating system
/// applies (`tcp-backlog`, `oom-score-adj`), as Redis words it.
pub(crate) mod os {
    /// At start, when the kernel caps the listen backlog below `tcp-backlog`.
    pub(crate) fn backlog_capped(backlog: i32, somaxconn: i32) -> String {
        format!(
            "WARNING: The TCP backlog setting of {backlog} cannot be enforced because /proc/sys/net/core/somaxconn is set to the lower value of {somaxconn}."
        )
    }
    pub(crate) fn oom_read_failed(e: &std::io::Error) -> String {
        format!("Unable to read oom_score_adj: {}", super::strerror(e))
    }
    pub(crate) fn oom_write_failed(e: &std::io::Error) -> String {
        format!("Unable to write oom_score_adj: {}", super::strerror(e))
    }
}

/// The log lines of a shutdown ([`crate::shutdown`]), as Redis's server.c
/// writes them.
pub(crate) mod shutdown {
    pub(crate) const WAITING_FOR_REPLICAS: &str = "Waiting for replicas before shutting down.";
    pub(crate) const ABORTED: &str = "Shutdown manually aborted.";
    pub(crate) const FAILED_LOG: &str = "Errors trying to shut down the server. Check the logs for more information.";
    pub(crate) fn lagging_replica(name: &str, behind: u64, lag: u64, state: &str) -> String {
        format!("Lagging replica {name} reported offset {behind} behind master, lag={lag}, state={state}.")
    }
    pub(crate) fn in_sync(synced: usize, replicas: usize) -> String {
        format!("{synced} of {replicas} replicas are in sync when shutting down.")
    }
}

/// Reasons a directive's value is refused (the text after CONFIG SET's
/// `- `, and after a config file's line at startup), as Redis's config.c
/// words them.
pub(crate) mod directive {
    /// Redis's report of a bad line of its startup configuration, line
    /// `line` reading `text` (printed as is, then the process exits 1).
    pub(crate) fn fatal_config(line: usize, text: &str, reason: &str) -> String {
        format!(
            "\n*** FATAL CONFIG FILE ERROR (Redis {}) ***\nReading the configuration file, at line {line}\n>>> '{text}'\n{reason}",
            crate::REDIS_VERSION
        )
    }
    pub(crate) const WRONG_ARGS: &str = "wrong number of arguments";
    pub(crate) const NOT_OCTAL: &str = "argument couldn't be parsed as an octal number";
    pub(crate) const PROC_TITLE: &str = "template format is invalid or contains unknown variables";
    pub(crate) const SHUTDOWN_SAVE_NOSAVE: &str = "shutdown options SAVE and NOSAVE can't be used simultaneously";
    pub(crate) const OOM_VALUES: &str = "Invalid oom-score-adj-values, elements must be between -2000 and 2000.";
    pub(crate) const PERCENTILES_INVALID: &str = "Invalid latency-tracking-info-percentiles parameters";
    pub(crate) const PERCENTILES_RANGE: &str =
        "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]";
    pub(crate) const MASTER_PORT: &str = "Invalid master port";
    pub(crate) const MEMORY_OR_PERCENT: &str = "argument must be a memory or percent value";
    pub(crate) const HOSTNAME_LONG: &str = "Hostnames must be less than 256 characters";
    pub(crate) const HOSTNAME_CHARS: &str = "Hostnames may only contain alphanumeric characters, hyphens or dots";
    pub(crate) const DEFRAG_UNAVAILABLE: &str = "Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution";
    /// coordis's own: a `user` line other than the default user's.
    pub(crate) const SENTINEL_OUTSIDE: &str = "sentinel directive while not in sentinel mode";
    pub(crate) const TLS_UNAVAILABLE: &str = "Unable to update TLS configuration. Check server logs.";
    pub(crate) const LISTEN_FAILED: &str = "Unable to listen on this port. Check server logs.";
    pub(crate) const OOM_SCORE_FAILED: &str = "Failed to set current oom_score_adj. Check server logs.";
    pub(crate) const BIND_FAILED: &str = "Failed to bind to specified addresses.";
    pub(crate) const TOO_MANY_BIND: &str = "Too many bind addresses specified.";
    /// An `include`d file that cannot be read.
    pub(crate) fn cannot_open(path: &str, why: &str) -> String {
        format!("Fatal error, can't open config file '{path}': {why}")
    }
    /// A percentage past its bound.
    pub(crate) fn percent_bound(max: i64) -> String {
        format!("percentage argument must be less or equal to {max}")
    }
    /// The enum words a value must be one of.
    pub(crate) fn one_of(words: &[&str]) -> String {
        format!("argument(s) must be one of the following: {}", words.join(", "))
    }
}

/// CONFIG REWRITE that could not write the file.
pub(crate) fn config_rewrite_failed(why: &str) -> Reply {
    owned(sanitize(format!("ERR Rewriting config file: {why}")))
}

/// A protocol error (already formatted by the parser).
pub(crate) fn protocol(text: String) -> Reply {
    owned(format!("ERR {text}"))
}

// Streams (`cmd/stream.rs`).
/// XREAD and XREADGROUP alike, with an odd list of keys and IDs.
pub(crate) const XREAD_UNBALANCED: &str =
    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.";
pub(crate) const ELEMENTS_TOO_LARGE: &str = "ERR Elements are too large to be stored";
pub(crate) const UNBLOCKED_STREAM_GONE: &str = "UNBLOCKED the stream key no longer exists";
pub(crate) const STREAM_BAD_ID: &str = "ERR Invalid stream ID specified as stream command argument";
pub(crate) const XADD_ID_TOO_SMALL: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";
pub(crate) const XADD_ID_ZERO: &str = "ERR The ID specified in XADD must be greater than 0-0";
pub(crate) const STREAM_EXHAUSTED: &str = "ERR The stream has exhausted the last possible ID, unable to add more items";
pub(crate) const MAXLEN_NEGATIVE_STREAM: &str = "ERR The MAXLEN argument must be >= 0.";
pub(crate) const LIMIT_NEGATIVE_STREAM: &str = "ERR The LIMIT argument must be >= 0.";
pub(crate) const MAXLEN_AND_MINID: &str =
    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
pub(crate) const LIMIT_WITHOUT_TILDE: &str = "ERR syntax error, LIMIT cannot be used without the special ~ option";
pub(crate) const LIMIT_WITHOUT_STRATEGY: &str =
    "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy";
pub(crate) const XTRIM_NO_STRATEGY: &str = "ERR syntax error, XTRIM must be called with a trimming strategy";
pub(crate) const INVALID_START_ID: &str = "ERR invalid start ID for the interval";
pub(crate) const INVALID_END_ID: &str = "ERR invalid end ID for the interval";
pub(crate) const XREAD_GT_ID: &str =
    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.";
pub(crate) const XREADGROUP_DOLLAR: &str = "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.";
pub(crate) const XREAD_GROUP_OPTION: &str =
    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.";
pub(crate) const XREAD_NOACK_OPTION: &str =
    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.";
pub(crate) const XREADGROUP_MISSING_GROUP: &str = "ERR Missing GROUP option for XREADGROUP";
pub(crate) const BUSYGROUP: &str = "BUSYGROUP Consumer Group name already exists";
pub(crate) const XGROUP_KEY_MISSING: &str = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";
pub(crate) const ENTRIESREAD_NEGATIVE: &str = "ERR value for ENTRIESREAD must be positive or -1";
pub(crate) const NOGROUP_DESTROYED: &str = "NOGROUP the consumer group this client was blocked on no longer exists";
pub(crate) const XCLAIM_MIN_IDLE: &str = "ERR Invalid min-idle-time argument for XCLAIM";
pub(crate) const XCLAIM_IDLE: &str = "ERR Invalid IDLE option argument for XCLAIM";
pub(crate) const XCLAIM_TIME: &str = "ERR Invalid TIME option argument for XCLAIM";
pub(crate) const XCLAIM_RETRYCOUNT: &str = "ERR Invalid RETRYCOUNT option argument for XCLAIM";
pub(crate) const XAUTOCLAIM_MIN_IDLE: &str = "ERR Invalid min-idle-time argument for XAUTOCLAIM";
pub(crate) const XAUTOCLAIM_COUNT: &str = "ERR COUNT must be > 0";
pub(crate) const XSETID_SMALLER: &str = "ERR The ID specified in XSETID is smaller than the target stream top item";
pub(crate) const XSETID_ENTRIES_ADDED: &str =
    "ERR The entries_added specified in XSETID is smaller than the target stream length";
pub(crate) const XSETID_BELOW_MAX_DELETED_ARG: &str =
    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id";
pub(crate) const ENTRIES_ADDED_NEGATIVE: &str = "ERR entries_added must be positive";

/// XREAD BLOCK from a script (`name` as the script typed it).
pub(crate) fn xread_block_in_script(name: &[u8]) -> Reply {
    owned(sanitize(format!(
        "ERR {} command is not allowed with BLOCK option from scripts",
        lossy(name)
    )))
}

/// XREADGROUP on a missing key or group.
pub(crate) fn nogroup_xreadgroup(key: &[u8], group: &[u8]) -> Reply {
    owned(sanitize(format!(
        "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
        lossy(key),
        lossy(group)
    )))
}

/// XPENDING / XCLAIM / XAUTOCLAIM on a missing key or group.
pub(crate) fn nogroup_key(key: &[u8], group: &[u8]) -> Reply {
    owned(sanitize(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        lossy(key),
        lossy(group)
    )))
}

/// XGROUP SETID / CREATECONSUMER / DELCONSUMER and XINFO CONSUMERS on a missing group.
pub(crate) fn nogroup_for_key(group: &[u8], key: &[u8]) -> Reply {
    owned(sanitize(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        lossy(group),
        lossy(key)
    )))
}

/// XCLAIM with an option it does not know.
pub(crate) fn xclaim_option(opt: &[u8]) -> Reply {
    owned(sanitize(format!("ERR Unrecognized XCLAIM option '{}'", lossy(opt))))
}

// Functions (`cmd/functions.rs`, `lua/functions.rs`).
pub(crate) const MONITOR_DENY_BLOCKING: &str = "ERR MONITOR isn't allowed for DENY BLOCKING client";
pub(crate) const SLOWLOG_COUNT: &str = "ERR count should be greater than or equal to -1";
pub(crate) const GETKEYS_UNKNOWN_COMMAND: &str = "ERR Invalid command specified";
pub(crate) const GETKEYS_ARITY: &str = "ERR Invalid number of arguments specified for command";
pub(crate) const GETKEYS_NO_KEYS: &str = "ERR The command has no key arguments";
pub(crate) const GETKEYS_INVALID: &str = "ERR Invalid arguments specified for command";
pub(crate) const NOT_C_INT: &str = "ERR value is out of range, value must between -2147483648 and 2147483647";
pub(crate) const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
pub(crate) const LIBRARY_METADATA_MISSING: &str = "ERR Missing library metadata";
pub(crate) const LIBRARY_METADATA_INVALID: &str = "ERR Invalid library metadata";
pub(crate) const LIBRARY_NAME_TWICE: &str = "ERR Invalid metadata value, name argument was given multiple times";
pub(crate) const LIBRARY_NAME_MISSING: &str = "ERR Library name was not given";
pub(crate) const LIBRARY_NAME_INVALID: &str =
    "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";
/// A library's body ran past the load timeout (as the error table's text).
pub(crate) const FUNCTION_LOAD_TIMEOUT: &str = "ERR FUNCTION LOAD timeout";
pub(crate) const NO_FUNCTIONS_REGISTERED: &str = "ERR No functions registered";
pub(crate) const FUNCTION_NOT_FOUND: &str = "ERR Function not found";
pub(crate) const LIBRARY_NOT_FOUND: &str = "ERR Library not found";
pub(crate) const BAD_NUMBER_OF_KEYS: &str = "ERR Bad number of keys provided";
pub(crate) const WRITE_FLAG_WITH_RO: &str = "ERR Can not execute a script with write flag using *_ro command.";
pub(crate) const LIBRARY_NAME_ARG_MISSING: &str = "ERR library name argument was not given";
pub(crate) const FUNCTION_FLUSH_MODE: &str = "ERR FUNCTION FLUSH only supports SYNC|ASYNC option";
pub(crate) const DUMP_PAYLOAD_INVALID: &str = "ERR DUMP payload version or checksum are wrong";
pub(crate) const RESTORE_POLICY: &str =
    "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.";
pub(crate) const INVALID_SHEBANG: &str = "ERR Invalid script shebang";

/// FUNCTION LOAD with a shebang argument it does not know.
pub(crate) fn metadata_value(part: &[u8]) -> Reply {
    owned(sanitize(format!("ERR Invalid metadata value given: {}", lossy(part))))
}

pub(crate) fn engine_not_found(engine: &str) -> Reply {
    owned(sanitize(format!("ERR Engine '{engine}' not found")))
}

pub(crate) fn library_exists(name: &str) -> Reply {
    owned(sanitize(format!("ERR Library '{name}' already exists")))
}

/// FUNCTION RESTORE (APPEND) of a library already loaded: worded without
/// FUNCTION LOAD's quotes.
pub(crate) fn restored_library_exists(name: &str) -> Reply {
    owned(sanitize(format!("ERR Library {name} already exists")))
}

pub(crate) fn function_exists(name: &str) -> Reply {
    owned(sanitize(format!("ERR Function {name} already exists")))
}

pub(crate) fn function_compile_error(lua: &str) -> Reply {
    owned(sanitize(format!("ERR Error compiling function: {lua}")))
}

/// A library's code failed while it loaded (`error` already starts with
/// its code, `ERR ...`).
pub(crate) fn registering_functions(error: &str) -> Reply {
    owned(sanitize(format!("ERR Error registering functions: {error}")))
}

/// FUNCTION LIST / RESTORE with an argument it does not know.
pub(crate) fn unknown_argument(arg: &[u8]) -> Reply {
    owned(sanitize(format!("ERR Unknown argument {}", lossy(arg))))
}

pub(crate) fn unknown_option_given(arg: &[u8]) -> Reply {
    owned(sanitize(format!("ERR Unknown option given: {}", lossy(arg))))
}

/// EVAL's shebang, Redis's `evalExtractShebangFlags` errors.
pub(crate) fn shebang_engine(engine: &[u8]) -> Reply {
    owned(sanitize(format!(
        "ERR Unexpected engine in script shebang: {}",
        lossy(engine)
    )))
}

pub(crate) fn shebang_flag(flag: &[u8]) -> Reply {
    owned(sanitize(format!(
        "ERR Unexpected flag in script shebang: {}",
        lossy(flag)
    )))
}

pub(crate) fn shebang_option(option: &[u8]) -> Reply {
    owned(sanitize(format!("ERR Unknown lua shebang option: {}", lossy(option))))
}

// MEMORY DOCTOR's report, in Redis's words (`getMemoryDoctorReport`).
pub(crate) const MEMORY_DOCTOR_EMPTY: &str = "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n";
pub(crate) const MEMORY_DOCTOR_FINE: &str =
    "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n";
pub(crate) const MEMORY_DOCTOR_ISSUES: &str =
    "Sam, I detected a few issues in this Redis instance memory implants:\n\n";
pub(crate) const MEMORY_DOCTOR_PEAK: &str = " * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n";
pub(crate) const MEMORY_DOCTOR_HIGH_RSS: &str = " * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"libc\".\n\n";
pub(crate) const MEMORY_DOCTOR_ALLOCATOR_FRAG: &str = " * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' config option.\n\n";
pub(crate) const MEMORY_DOCTOR_ALLOCATOR_RSS: &str = " * High allocator RSS overhead: This instance has an RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the allocator is much larger than the sum what the allocator actually holds). This problem is usually due to a large peak memory (check if there is a peak memory entry above in the report), you can try the MEMORY PURGE command to reclaim it.\n\n";
pub(crate) const MEMORY_DOCTOR_MANY_SCRIPTS: &str = " * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n";
pub(crate) const MEMORY_DOCTOR_END: &str = "I'm here to keep you safe, Sam. I want to help you.\n";
/// MEMORY MALLOC-STATS from a Redis built with libc malloc, as coordis is.
pub(crate) const MALLOC_STATS_UNSUPPORTED: &str = "Stats not supported for the current allocator";

// A standalone server without modules (cmd/cluster.rs).
pub(crate) const CLUSTER_DISABLED: &str = "ERR This instance has cluster support disabled";

// Cluster mode (Redis 7.0.15's cluster.c, db.c and script.c texts).
pub(crate) const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
pub(crate) const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";
pub(crate) const CLUSTERDOWN: &str = "CLUSTERDOWN The cluster is down";
pub(crate) const CLUSTERDOWN_READ_ONLY: &str = "CLUSTERDOWN The cluster is down and only accepts read commands";
pub(crate) const CLUSTERDOWN_UNBOUND: &str = "CLUSTERDOWN Hash slot not served";
pub(crate) const SCRIPT_CLUSTER_DOWN_READ_ONLY: &str =
    "ERR Script attempted to execute a write command while the cluster is down and readonly";
pub(crate) const SCRIPT_CLUSTER_DOWN: &str = "ERR Script attempted to execute a command while the cluster is down";
pub(crate) const SCRIPT_NON_LOCAL_KEY: &str = "ERR Script attempted to access a non local key in a cluster node";
pub(crate) const SCRIPT_NO_CLUSTER: &str = "ERR Can not run script on cluster, 'no-cluster' flag is set.";
pub(crate) const SCRIPT_CROSS_SLOT: &str = "ERR Script attempted to access keys that do not hash to the same slot";
pub(crate) const SELECT_IN_CLUSTER: &str = "ERR SELECT is not allowed in cluster mode";
pub(crate) const MOVE_IN_CLUSTER: &str = "ERR MOVE is not allowed in cluster mode";
pub(crate) const SWAPDB_IN_CLUSTER: &str = "ERR SWAPDB is not allowed in cluster mode";
pub(crate) const CLUSTER_BAD_SLOT: &str = "ERR Invalid or out of range slot";
pub(crate) const CLUSTER_INVALID_SLOT: &str = "ERR Invalid slot";
pub(crate) const CLUSTER_INVALID_SLOT_OR_COUNT: &str = "ERR Invalid slot or number of keys";
pub(crate) const CLUSTER_FLUSHSLOTS_NOT_EMPTY: &str = "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.";
pub(crate) const CLUSTER_SETSLOT_ON_REPLICA: &str = "ERR Please use SETSLOT only with masters.";
pub(crate) const CLUSTER_TARGET_NOT_MASTER: &str = "ERR Target node is not a master";
pub(crate) const CLUSTER_SETSLOT_SYNTAX: &str =
    "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP";
pub(crate) const CLUSTER_FORGET_MYSELF: &str = "ERR I tried hard but I can't forget myself...";
pub(crate) const CLUSTER_FORGET_MASTER: &str = "ERR Can't forget my master!";
pub(crate) const CLUSTER_REPLICATE_MYSELF: &str = "ERR Can't replicate myself";
pub(crate) const CLUSTER_REPLICATE_REPLICA: &str = "ERR I can only replicate a master, not a replica.";
pub(crate) const CLUSTER_REPLICATE_NOT_EMPTY: &str =
    "ERR To set a master the node must be empty and without assigned slots.";
pub(crate) const CLUSTER_NOT_A_MASTER: &str = "ERR The specified node is not a master";
pub(crate) const CLUSTER_FAILOVER_ON_MASTER: &str = "ERR You should send CLUSTER FAILOVER to a replica";
pub(crate) const CLUSTER_EPOCH_OTHERS_KNOWN: &str =
    "ERR The user can assign a config epoch only when the node does not know any other node.";
pub(crate) const CLUSTER_EPOCH_NONZERO: &str = "ERR Node config epoch is already non-zero";
pub(crate) const CLUSTER_RESET_WITH_KEYS: &str = "ERR CLUSTER RESET can't be called with master nodes containing keys";
pub(crate) const CLUSTER_FAILOVER_MASTER_UNKNOWN: &str = "ERR I'm a replica but my master is unknown to me";
pub(crate) const CLUSTER_FAILOVER_MASTER_DOWN: &str = "ERR Master is down or failed, please use CLUSTER FAILOVER FORCE";
pub(crate) const REPLICAOF_IN_CLUSTER: &str = "ERR REPLICAOF not allowed in cluster mode.";
/// Logged when the nodes file cannot be read (the server does not start).
pub(crate) const CLUSTER_CONFIG_CORRUPTED: &str = "Unrecoverable error: corrupted cluster config file.";
pub(crate) const MODULE_DISABLED: &str = "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
pub(crate) const MODULE_LOAD_FAILED: &str = "ERR Error loading the extension. Please check the server logs.";
pub(crate) const MODULE_UNLOAD_FAILED: &str = "ERR Error unloading module: no such module with that name";

/// BGREWRITEAOF's answer.
pub(crate) const AOF_REWRITE_STARTED: &str = "Background append only file rewriting started";
/// BGREWRITEAOF while a save runs, or inside a transaction.
pub(crate) const AOF_REWRITE_SCHEDULED: &str = "Background append only file rewriting scheduled";
/// BGREWRITEAOF while one runs.
pub(crate) const AOF_REWRITE_IN_PROGRESS: &str = "ERR Background append only file rewriting already in progress";
/// BGREWRITEAOF when the rewrite failed.
pub(crate) const AOF_REWRITE_FAILED: &str =
    "ERR Can't execute an AOF background rewriting. Please check the server logs for more information.";
/// CONFIG SET appendonly yes when the rewrite failed (the reason part).
pub(crate) const AOF_TURN_ON_FAILED: &str = "Unable to turn on AOF. Check server logs.";
// DUMP, RESTORE and SAVE (Redis 7.0.15's cluster.c and rdb.c texts).
pub(crate) const BUSYKEY: &str = "BUSYKEY Target key name already exists.";
// MIGRATE (Redis 7.0.15's cluster.c).
pub(crate) const MIGRATE_KEYS_WITH_KEY: &str =
    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string";
/// MIGRATE's status reply when none of its keys is here.
pub(crate) const MIGRATE_NOKEY: &str = "NOKEY";
pub(crate) const MIGRATE_CONNECT: &str = "IOERR error or timeout connecting to the client";
pub(crate) const MIGRATE_WRITE_FAILED: &str = "IOERR error or timeout writing to target instance";
pub(crate) const MIGRATE_READ_FAILED: &str = "IOERR error or timeout reading to target instance";
/// Followed by the target's error line without its `-`.
pub(crate) const MIGRATE_TARGET_ERROR: &str = "ERR Target instance replied with error: ";
pub(crate) const BAD_DATA_FORMAT: &str = "ERR Bad data format";
pub(crate) const INVALID_TTL: &str = "ERR Invalid TTL value, must be >= 0";
pub(crate) const INVALID_IDLETIME: &str = "ERR Invalid IDLETIME value, must be >= 0";
pub(crate) const INVALID_FREQ: &str = "ERR Invalid FREQ value, must be >= 0 and <= 255";
pub(crate) const SAVE_FAILED: &str = "ERR";
/// DEBUG RELOAD with an option it does not know.
pub(crate) const DEBUG_RELOAD_OPTIONS: &str = "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.";
/// DEBUG PROTOCOL with a type it does not know.
pub(crate) const DEBUG_PROTOCOL_TYPES: &str = "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false";
/// DEBUG PROTOCOL PUSH from a RESP2 client.
pub(crate) const DEBUG_PROTOCOL_RESP2_PUSH: &str = "ERR RESP2 is not supported by this command";
/// DEBUG QUICKLIST-PACKED-THRESHOLD with a size it refuses.
pub(crate) const DEBUG_PACKED_THRESHOLD: &str =
    "ERR argument must be a memory value bigger than 1 and smaller than 4gb";
/// DEBUG LOADAOF whose files did not load (Redis exits instead).
pub(crate) const DEBUG_LOADAOF_FAILED: &str = "ERR Error trying to load the AOF files";
/// DEBUG RELOAD whose file did not load.
pub(crate) const DEBUG_RELOAD_FAILED: &str = "ERR Error trying to load the RDB dump";
/// DEBUG HTSTATS with a database number past the last.
pub(crate) const DEBUG_HTSTATS_DB_RANGE: &str = "ERR Out of range database";
/// DEBUG HTSTATS-KEY on a value kept without a hash table.
pub(crate) const DEBUG_HTSTATS_NOT_TABLE: &str =
    "ERR The value stored at the specified key is not represented using an hash table";
/// BGSAVE's replies.
pub(crate) const BGSAVE_STARTED: &str = "Background saving started";
pub(crate) const BGSAVE_SCHEDULED: &str = "Background saving scheduled";
pub(crate) const BGSAVE_IN_PROGRESS: &str = "ERR Background save already in progress";
/// BGSAVE without SCHEDULE while a rewrite runs.
pub(crate) const BGSAVE_CHILD_ACTIVE: &str = "ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.";

// Sharded pub/sub (`cmd/pubsub.rs`).
pub(crate) const SSUBSCRIBE_DENY_BLOCKING: &str = "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client";

// Client-side caching (`tracking.rs`: CLIENT TRACKING and CLIENT CACHING).
pub(crate) const TRACKING_ONE_REDIRECT: &str = "ERR A client can only redirect to a single other client";
pub(crate) const TRACKING_NO_REDIRECT_CLIENT: &str = "ERR The client ID you want redirect to does not exist";
pub(crate) const TRACKING_PREFIX_NEEDS_BCAST: &str = "ERR PREFIX option requires BCAST mode to be enabled";
pub(crate) const TRACKING_BCAST_SWITCH: &str = "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.";
pub(crate) const TRACKING_OPT_WITH_BCAST: &str = "ERR OPTIN and OPTOUT are not compatible with BCAST";
pub(crate) const TRACKING_OPTIN_AND_OPTOUT: &str = "ERR You can't specify both OPTIN mode and OPTOUT mode";
pub(crate) const TRACKING_OPT_SWITCH: &str = "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.";
pub(crate) const CACHING_NOT_TRACKING: &str =
    "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled";
pub(crate) const CACHING_YES_NOT_OPTIN: &str =
    "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.";
pub(crate) const CACHING_NO_NOT_OPTOUT: &str =
    "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.";

/// A BCAST prefix that overlaps one the client already has.
pub(crate) fn tracking_prefix_overlaps_existing(prefix: &[u8], existing: &[u8]) -> Reply {
    owned(sanitize(format!(
        "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
        lossy(prefix),
        lossy(existing)
    )))
}

/// Two BCAST prefixes of one CLIENT TRACKING that overlap.
pub(crate) fn tracking_prefix_overlaps_other(prefix: &[u8], other: &[u8]) -> Reply {
    owned(sanitize(format!(
        "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
        lossy(prefix),
        lossy(other)
    )))
}

/// A coordinate pair outside the valid ranges (GEOADD, GEORADIUS,
/// FROMLONLAT), printed with C's `%f`.
pub(crate) fn geo_invalid_pair(lon: f64, lat: f64) -> Reply {
    owned(format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"))
}

/// GEOSEARCH or GEOSEARCHSTORE without FROMMEMBER or FROMLONLAT; `cmd` as
/// the client spelled it.
pub(crate) fn geo_needs_center(cmd: &[u8]) -> Reply {
    owned(sanitize(format!(
        "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
        lossy(cmd)
    )))
}

/// GEOSEARCH or GEOSEARCHSTORE without BYRADIUS or BYBOX.
pub(crate) fn geo_needs_shape(cmd: &[u8]) -> Reply {
    owned(sanitize(format!(
        "ERR exactly one of BYRADIUS and BYBOX can be specified for {}",
        lossy(cmd)
    )))
}

/// Sentinel mode's texts, as Redis 7.0.15's `sentinel.c` words them.
pub(crate) mod sentinel {
    use super::{owned, sanitize, Reply};

    pub(crate) const NEEDS_CONFIG: &str = "Sentinel needs config file on disk to save state. Exiting...";
    pub(crate) const NO_SUCH_MASTER_CONF: &str = "No such master with specified name.";
    pub(crate) const NO_SUCH_MASTER: &str = "ERR No such master with that name";
    pub(crate) const QUORUM: &str = "Quorum must be 1 or greater.";
    pub(crate) const ERR_QUORUM: &str = "ERR Quorum must be 1 or greater.";
    pub(crate) const DUPLICATE_MASTER: &str = "Duplicate master name.";
    pub(crate) const ERR_DUPLICATE_MASTER: &str = "ERR Duplicate master name.";
    pub(crate) const BAD_PORT: &str = "Invalid port number.";
    pub(crate) const ERR_BAD_PORT: &str = "ERR Invalid port number.";
    pub(crate) const ERR_INVALID_PORT: &str = "ERR Invalid port";
    pub(crate) const ERR_INVALID_QUORUM: &str = "ERR Invalid quorum";
    pub(crate) const ERR_INVALID_IP: &str = "ERR Invalid IP address or hostname specified";
    pub(crate) const NEGATIVE_TIME: &str = "negative or zero time parameter.";
    pub(crate) const MALFORMED_MYID: &str = "Malformed Sentinel id in myid option.";
    pub(crate) const UNRECOGNIZED: &str = "Unrecognized sentinel configuration statement.";
    pub(crate) const DENY_SCRIPTS_YES_NO: &str = "Please specify yes or no for the deny-scripts-reconfig options.";
    pub(crate) const RESOLVE_YES_NO: &str = "Please specify yes or no for the resolve-hostnames option.";
    pub(crate) const ANNOUNCE_YES_NO: &str = "Please specify yes or no for the announce-hostnames option.";
    pub(crate) const INPROG: &str = "INPROG Failover already in progress";
    pub(crate) const NOGOODSLAVE: &str = "NOGOODSLAVE No suitable replica to promote";
    pub(crate) const ONLY_HELLO: &str = "ERR Only HELLO messages are accepted by Sentinel instances.";
    pub(crate) const CONFIG_USAGE: &str = "ERR Only SENTINEL CONFIG GET <option> / SET <option> <value> are supported.";
    pub(crate) const UNKNOWN_SIMULATION: &str = "ERR Unknown failure simulation specified";
    pub(crate) const SAVE_FAILED: &str = "ERR Failed to save config file. Check server logs.";
    pub(crate) const SCRIPTS_DENIED: &str = "ERR Reconfiguration of scripts path is denied for security reasons. Check the deny-scripts-reconfig configuration directive in your Sentinel configuration";

    /// `Sentinel config file <path> is not writable: <strerror>. Exiting...`
    pub(crate) fn not_writable(path: &str, why: &str) -> String {
        format!("Sentinel config file {path} is not writable: {why}. Exiting...")
    }

    pub(crate) use super::strerror;

    /// `-NOQUORUM <n> usable Sentinels. ...` (SENTINEL CKQUORUM).
    pub(crate) fn noquorum(usable: usize, no_quorum: bool, no_auth: bool) -> Reply {
        let mut e = format!("NOQUORUM {usable} usable Sentinels. ");
        if no_quorum {
            e.push_str("Not enough available Sentinels to reach the specified quorum for this master");
        }
        if no_auth {
            if no_quorum {
                e.push_str(". ");
            }
            e.push_str("Not enough available Sentinels to reach the majority and authorize a failover");
        }
        owned(e)
    }

    /// `ERR Unknown option or number of arguments for SENTINEL SET 'x'`.
    pub(crate) fn set_unknown(option: &str) -> Reply {
        owned(sanitize(format!(
            "ERR Unknown option or number of arguments for SENTINEL SET '{option}'"
        )))
    }

    /// `ERR Invalid argument 'x' for SENTINEL SET 'option'`.
    pub(crate) fn set_invalid(arg: &str, option: &str) -> Reply {
        owned(sanitize(format!(
            "ERR Invalid argument '{arg}' for SENTINEL SET '{option}'"
        )))
    }

    /// `ERR Invalid argument 'x' to SENTINEL CONFIG SET`.
    pub(crate) fn config_set_unknown(option: &str) -> Reply {
        owned(sanitize(format!(
            "ERR Invalid argument '{option}' to SENTINEL CONFIG SET"
        )))
    }

    /// `ERR Invalid value 'v' to SENTINEL CONFIG SET 'option'`.
    pub(crate) fn config_set_invalid(value: &str, option: &str) -> Reply {
        owned(sanitize(format!(
            "ERR Invalid value '{value}' to SENTINEL CONFIG SET '{option}'"
        )))
    }

    /// `ERR Invalid argument 'v' for SENTINEL DEBUG 'name'`.
    pub(crate) fn debug_invalid(value: &str, name: &str) -> Reply {
        owned(sanitize(format!(
            "ERR Invalid argument '{value}' for SENTINEL DEBUG '{name}'"
        )))
    }

    /// `ERR Unknown option or number of arguments for SENTINEL DEBUG 'name'`.
    pub(crate) fn debug_unknown(name: &str) -> Reply {
        owned(sanitize(format!(
            "ERR Unknown option or number of arguments for SENTINEL DEBUG '{name}'"
        )))
    }
}

/// The ACL's texts (Redis's `acl.c`, and the refusals `processCommand`,
/// `execCommand` and `scriptCall` word).
pub(crate) mod acl {
    use super::{lossy, owned, sanitize, Reply};

    pub(crate) const SYNTAX: &str = "Syntax error";
    pub(crate) const UNKNOWN: &str = "Unknown command or category name in ACL";
    pub(crate) const KEYS_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
    pub(crate) const CHANNELS_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";
    pub(crate) const NO_SUCH_PASSWORD: &str = "The password you are trying to remove from the user does not exist";
    pub(crate) const BAD_HASH: &str =
        "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters";
    pub(crate) const FIRST_ARG_OF_SUB: &str = "Allowing first-arg of a subcommand is not supported";
    pub(crate) const DUPLICATE_USER: &str = "Duplicate user found. A user can only be defined once in config files";

    pub(crate) const NOPERM_KEY: &str =
        "NOPERM this user has no permissions to access one of the keys used as arguments";
    pub(crate) const NOPERM_CHANNEL: &str =
        "NOPERM this user has no permissions to access one of the channels used as arguments";
    pub(crate) const USERNAME_SPACES: &str = "ERR Usernames can't contain spaces or null characters";
    pub(crate) const DEFAULT_NOT_REMOVABLE: &str = "ERR The 'default' user cannot be removed";
    pub(crate) const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";
    pub(crate) const SAVE_FAILED: &str =
        "ERR There was an error trying to save the ACLs. Please check the server logs for more information";
    pub(crate) const GENPASS_BITS: &str =
        "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096";
    pub(crate) const ACL_CHECK_CMD_INVALID: &str = "ERR Invalid command passed to redis.acl_check_cmd()";
    pub(crate) const ACL_CHECK_CMD_OUTSIDE: &str =
        "ERR redis.acl_check_cmd can only be called inside a script invocation";
    pub(crate) const FILE_NO_CHANGE: &str =
        "WARNING: ACL errors detected, no change to the previously active ACL rules was performed";
    /// Redis refuses a config file with both (`ACLLoadUsersAtStartup`).
    pub(crate) const FILE_AND_USERS: &str = "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.";

    /// `-NOPERM` for a command the user may not run (`x` as Redis names it).
    pub(crate) fn noperm_command(name: &str) -> Reply {
        owned(format!(
            "NOPERM this user has no permissions to run the '{name}' command"
        ))
    }

    /// A command queued in MULTI that the rules refuse by EXEC time.
    pub(crate) fn exec_changed(reason: &str) -> Reply {
        owned(format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"))
    }
    pub(crate) const EXEC_CMD: &str = "no permission to execute the command or subcommand";
    pub(crate) const EXEC_KEY: &str = "no permission to touch the specified keys";
    pub(crate) const EXEC_CHANNEL: &str = "no permission to access one of the channels used as arguments";

    /// A script's `redis.call` refused (`scriptVerifyACL`).
    pub(crate) fn script_denied(why: &str) -> Reply {
        owned(format!("ERR The user executing the script {why}"))
    }
    pub(crate) const SCRIPT_CMD: &str = "can't run this command or subcommand";
    pub(crate) const SCRIPT_KEY: &str = "can't access at least one of the keys mentioned in the command arguments";
    pub(crate) const SCRIPT_CHANNEL: &str = "can't publish to the channel mentioned in the command";

    pub(crate) fn unmatched_parenthesis(start: &[u8]) -> String {
        sanitize(format!(
            "ERR Unmatched parenthesis in acl selector starting at '{}'.",
            lossy(start)
        ))
    }

    pub(crate) fn setuser_modifier(op: &[u8], why: &str) -> String {
        sanitize(format!("ERR Error in ACL SETUSER modifier '{}': {why}", lossy(op)))
    }

    pub(crate) fn unknown_category(name: &[u8]) -> Reply {
        let name: String = lossy(name).chars().take(128).collect();
        owned(sanitize(format!("ERR Unknown category '{name}'")))
    }

    pub(crate) fn dryrun_no_user(name: &[u8]) -> Reply {
        owned(sanitize(format!("ERR User '{}' not found", lossy(name))))
    }

    pub(crate) fn dryrun_no_command(name: &[u8]) -> Reply {
        owned(sanitize(format!("ERR Command '{}' not found", lossy(name))))
    }

    pub(crate) fn dryrun_command(name: &str) -> String {
        format!("This user has no permissions to run the '{name}' command")
    }

    pub(crate) fn dryrun_key(key: &[u8]) -> String {
        format!("This user has no permissions to access the '{}' key", lossy(key))
    }

    pub(crate) fn dryrun_channel(channel: &[u8]) -> String {
        format!(
            "This user has no permissions to access the '{}' channel",
            lossy(channel)
        )
    }

    pub(crate) fn load_open_failed(path: &str, why: &str) -> String {
        format!("Error loading ACLs, opening file '{path}': {why}")
    }

    pub(crate) fn file_no_user_keyword(file: &str, line: usize) -> String {
        format!("{file}:{line} should start with user keyword followed by the username. ")
    }

    pub(crate) fn file_bad_username(file: &str, line: usize, name: &str) -> String {
        format!("'{file}:{line}: username '{name}' contains invalid characters. ")
    }

    pub(crate) fn file_duplicate_user(name: &str, line: usize) -> String {
        format!("WARNING: Duplicate user '{name}' found on line {line}. ")
    }

    pub(crate) fn file_unmatched_parenthesis(file: &str, line: usize) -> String {
        format!("{file}:{line}: Unmatched parenthesis in selector definition.")
    }

    pub(crate) fn file_operation(file: &str, line: usize, op: &str, why: &str) -> String {
        format!("{file}:{line}: Error in applying operation '{op}': {why}. ")
    }

    pub(crate) fn file_rule(file: &str, line: usize, why: &str) -> String {
        format!("{file}:{line}: {why}. ")
    }

    /// A `user` directive with a bad rule (the config file's error line).
    pub(crate) fn directive_rule(word: &str, why: &str) -> String {
        format!("Error in user declaration '{word}': {why}")
    }
}

/// `ERR Unrecognized REPLCONF option: x`.
pub(crate) fn unrecognized_replconf(option: &[u8]) -> Reply {
    owned(sanitize(format!("ERR Unrecognized REPLCONF option: {}", lossy(option))))
}

/// LATENCY DOCTOR's report and LATENCY GRAPH's error, in Redis's words
/// (latency.c's `createLatencyReport`).
pub(crate) mod latency {
    use super::{owned, Reply};

    /// `ERR No samples available for event '<event>'` (LATENCY GRAPH).
    pub(crate) fn no_samples(event: &str) -> Reply {
        owned(format!("ERR No samples available for event '{event}'"))
    }

    pub(crate) const DISABLED: &str = "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n";
    pub(crate) const SPIKES: &str =
        "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n";
    /// One event's line (without its newline).
    pub(crate) fn event(n: usize, name: &str, samples: usize, avg: u64, mad: u64, period: f64, max: u64) -> String {
        format!("{n}. {name}: {samples} latency spikes (average {avg}ms, mean deviation {mad}ms, period {period:.2} sec). Worst all time event {max}ms.")
    }
    pub(crate) const NO_SPIKES: &str = "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n";
    pub(crate) const NO_FIX: &str = "\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n";
    pub(crate) const ADVICES: &str = "\nI have a few advices for you:\n\n";
    pub(crate) fn slowlog_enable(threshold_us: u64) -> String {
        format!("- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {threshold_us}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.\n")
    }
    pub(crate) fn slowlog_tuning(threshold_us: u64) -> String {
        format!("- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {threshold_us}'.\n")
    }
    pub(crate) const SLOWLOG_INSPECT: &str = "- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n";
    pub(crate) const SCHEDULER: &str = "- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n";
    pub(crate) const LOCAL_DISK: &str = "- It is strongly advised to use local disks for persistence, especially if you are using AOF. Remote disks provided by platform-as-a-service providers are known to be slow.\n";
    pub(crate) const SSD: &str = "- SSD disks are able to reduce fsync latency, and total time needed for snapshotting and AOF log rewriting (resulting in smaller memory usage). With extremely high write load SSD disks can be a good option. However Redis should perform reasonably with high load using normal disks. Use this advice as a last resort.\n";
    pub(crate) const DATA_WRITEBACK: &str = "- Mounting ext3/4 filesystems with data=writeback can provide a performance boost compared to data=ordered, however this mode of operation provides less guarantees, and sometimes it can happen that after a hard crash the AOF file will have a half-written command at the end and will require to be repaired before Redis restarts.\n";
    pub(crate) const DISK_CONTENTION: &str = "- Try to lower the disk contention. This is often caused by other disk intensive processes running in the same computer (including other Redis instances).\n";
    pub(crate) const NO_APPENDFSYNC: &str = "- Assuming from the point of view of data safety this is viable in your environment, you could try to enable the 'no-appendfsync-on-rewrite' option, so that fsync will not be performed while there is a child rewriting the AOF file or producing an RDB file (the moment where there is high disk contention).\n";
    pub(crate) const RELAX_FSYNC: &str = "- Your fsync policy is set to 'always'. It is very hard to get good performances with such a setup, if possible try to relax the fsync policy to 'onesec'.\n";
    pub(crate) const WRITE_LOAD: &str = "- Latency during the AOF atomic rename operation or when the final difference is flushed to the AOF file at the end of the rewrite, sometimes is caused by very high write load, causing the AOF buffer to get very large. If possible try to send less commands to accomplish the same work, or use Lua scripts to group multiple operations into a single EVALSHA call.\n";
    pub(crate) const HZ: &str = "- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n";
    pub(crate) const LARGE_OBJECTS: &str = "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n";
    pub(crate) const MASS_EVICTION: &str = "- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large objects via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large keys migrations (RESTORE command), may create sudden memory pressure forcing the server to block trying to evict keys. \n";
    pub(crate) const DISABLE_THP: &str = "- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n";
}

/// COORDIS.CLUSTER on a node that does not own the slot it is to move.
pub(crate) const MOVE_NOT_OWNER: &str =
    "ERR this node does not own the slot (send COORDIS.CLUSTER to the slot's owner)";
/// COORDIS.CLUSTER BEGINMOVE/MOVESLOT naming this node as the target.
pub(crate) const MOVE_TO_SELF: &str = "ERR the slot is already on this node";
/// COORDIS.CLUSTER PARTITION or HEAL naming this node.
pub(crate) const PARTITION_SELF: &str = "ERR a node cannot be partitioned from itself";
/// COORDIS.CLUSTER MOVEKEYS/FINISHMOVE on a slot no BEGINMOVE opened.
pub(crate) const MOVE_NOT_STARTED: &str = "ERR the slot is not being moved (COORDIS.CLUSTER BEGINMOVE starts a move)";
/// COORDIS.CLUSTER BEGINMOVE on a slot already migrating.
pub(crate) const MOVE_ALREADY_STARTED: &str =
    "ERR the slot is already being moved (COORDIS.CLUSTER FINISHMOVE ends the move)";
/// COORDIS.CLUSTER: the target's address is not known yet.
pub(crate) const MOVE_NO_ADDRESS: &str = "ERR the target node's address is not known yet";
/// COORDIS.CLUSTER: the target could not be reached or refused a step
/// (followed by what went wrong).
pub(crate) const MOVE_TARGET_FAILED: &str = "ERR the target node refused or failed: ";
