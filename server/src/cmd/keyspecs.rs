//! Redis 7.0.15's key specs and command tips, one row per command and
//! subcommand coordis has (COMMAND INFO shows both), and the walk over the
//! specs that finds a command's keys with their access flags (Redis's
//! `getKeysUsingKeySpecs`): COMMAND GETKEYS and COMMAND GETKEYSANDFLAGS
//! answer from here.
//!
//! The tables are Redis's data, generated from its COMMAND INFO by
//! `scripts/keyspecs.py`; `server/tests/commands.rs` checks that every
//! command coordis has with keys has its row (a new command needs one).
//! Where Redis falls back to a command's own key finder (a spec it cannot
//! walk, or flags that depend on the arguments: SET with GET, BITFIELD with
//! only GETs, SORT's STORE), [`fallback`] does what that finder does.

use bytes::Bytes;

use super::CommandSpec;

/// One key spec: the flags of the keys it finds, where its search begins
/// and how it finds the keys from there.
#[derive(Debug)]
pub(crate) struct KeySpec {
    /// Redis's remark on the spec (why its flags or search are what they
    /// are); COMMAND INFO shows it first.
    pub notes: Option<&'static str>,
    pub flags: &'static [&'static str],
    pub begin: Begin,
    pub find: Find,
}

#[derive(Debug)]
pub(crate) enum Begin {
    /// At this argument.
    Index(i32),
    /// After this keyword, searched from this argument (negative: from the
    /// end, backwards).
    Keyword(&'static str, i32),
    /// Redis cannot say (the command's own finder knows).
    Unknown,
}

#[derive(Debug)]
pub(crate) enum Find {
    /// Keys up to `lastkey` (relative; negative: from the end, or with
    /// `limit`, a 1/limit share of what is left), every `step`.
    Range {
        lastkey: i32,
        step: i32,
        limit: i32,
    },
    /// A count at `index` (relative), the keys `first` after the search
    /// start, every `step`.
    Keynum {
        index: i32,
        first: i32,
        step: i32,
    },
    Unknown,
}

#[rustfmt::skip]
static KEY_SPECS: &[(&str, &[KeySpec])] = &[
    ("append", &[KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("bitcount", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("bitfield", &[KeySpec { notes: Some("This command allows both access and modification of the key"), flags: &["RW", "access", "update", "variable_flags"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("bitfield_ro", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("bitop", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(3), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("bitpos", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("blmove", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("blmpop", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("blpop", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -2, step: 1, limit: 0 } }]),
    ("brpop", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -2, step: 1, limit: 0 } }]),
    ("brpoplpush", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("bzmpop", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("bzpopmax", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -2, step: 1, limit: 0 } }]),
    ("bzpopmin", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -2, step: 1, limit: 0 } }]),
    ("copy", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("decr", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("decrby", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("del", &[KeySpec { notes: None, flags: &["RM", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("dump", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("eval", &[KeySpec { notes: Some("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"), flags: &["RW", "access", "update"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("eval_ro", &[KeySpec { notes: Some("We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"), flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("evalsha", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("evalsha_ro", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("exists", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("expire", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("expireat", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("expiretime", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("fcall", &[KeySpec { notes: Some("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"), flags: &["RW", "access", "update"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("fcall_ro", &[KeySpec { notes: Some("We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"), flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("geoadd", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("geodist", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("geohash", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("geopos", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("georadius", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Keyword("STORE", 6), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Keyword("STOREDIST", 6), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("georadius_ro", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("georadiusbymember", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Keyword("STORE", 5), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Keyword("STOREDIST", 5), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("georadiusbymember_ro", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("geosearch", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("geosearchstore", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("get", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("getbit", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("getdel", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("getex", &[KeySpec { notes: Some("RW and UPDATE because it changes the TTL"), flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("getrange", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("getset", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hdel", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hexists", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hget", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hgetall", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hincrby", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hincrbyfloat", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hkeys", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hlen", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hmget", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hmset", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hrandfield", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hscan", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hset", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hsetnx", &[KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hstrlen", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hvals", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("incr", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("incrby", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("incrbyfloat", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lcs", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 1, step: 1, limit: 0 } }]),
    ("lindex", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("linsert", &[KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("llen", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lmove", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lmpop", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("lpop", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lpos", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lpush", &[KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lpushx", &[KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lrange", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lrem", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lset", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("ltrim", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("memory|usage", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("mget", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("migrate", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(3), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RW", "access", "delete", "incomplete"], begin: Begin::Keyword("KEYS", -2), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("move", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("mset", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 2, limit: 0 } }]),
    ("msetnx", &[KeySpec { notes: None, flags: &["OW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 2, limit: 0 } }]),
    ("object|encoding", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("object|freq", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("object|idletime", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("object|refcount", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("persist", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("pexpire", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("pexpireat", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("pexpiretime", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("pfadd", &[KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("pfcount", &[KeySpec { notes: Some("RW because it may change the internal representation of the key, and propagate to replicas"), flags: &["RW", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("pfdebug", &[KeySpec { notes: None, flags: &["RW", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("pfmerge", &[KeySpec { notes: None, flags: &["RW", "access", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("psetex", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("pttl", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("rename", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("renamenx", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["OW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("restore", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("restore-asking", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("rpop", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("rpoplpush", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("rpush", &[KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("rpushx", &[KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sadd", &[KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("scard", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sdiff", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("sdiffstore", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("set", &[KeySpec { notes: Some("RW and ACCESS due to the optional `GET` argument"), flags: &["RW", "access", "update", "variable_flags"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("setbit", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("setex", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("setnx", &[KeySpec { notes: None, flags: &["OW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("setrange", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sinter", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("sintercard", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("sinterstore", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("sismember", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("smembers", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("smismember", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("smove", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sort", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: Some("For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort"), flags: &["RO", "access"], begin: Begin::Unknown, find: Find::Unknown }, KeySpec { notes: Some("For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array"), flags: &["OW", "update"], begin: Begin::Unknown, find: Find::Unknown }]),
    ("sort_ro", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: Some("For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort"), flags: &["RO", "access"], begin: Begin::Unknown, find: Find::Unknown }]),
    ("spop", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("spublish", &[KeySpec { notes: None, flags: &["not_key"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("srandmember", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("srem", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sscan", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("ssubscribe", &[KeySpec { notes: None, flags: &["not_key"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("strlen", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("substr", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sunion", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("sunionstore", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("sunsubscribe", &[KeySpec { notes: None, flags: &["not_key"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("touch", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("ttl", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("type", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("unlink", &[KeySpec { notes: None, flags: &["RM", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("watch", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("xack", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xadd", &[KeySpec { notes: Some("UPDATE instead of INSERT because of the optional trimming feature"), flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xautoclaim", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xclaim", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xdel", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xgroup|create", &[KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xgroup|createconsumer", &[KeySpec { notes: None, flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xgroup|delconsumer", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xgroup|destroy", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xgroup|setid", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xinfo|consumers", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xinfo|groups", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xinfo|stream", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xlen", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xpending", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xrange", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xread", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Keyword("STREAMS", 1), find: Find::Range { lastkey: -1, step: 1, limit: 2 } }]),
    ("xreadgroup", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Keyword("STREAMS", 4), find: Find::Range { lastkey: -1, step: 1, limit: 2 } }]),
    ("xrevrange", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xsetid", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xtrim", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zadd", &[KeySpec { notes: None, flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zcard", &[KeySpec { notes: None, flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zcount", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zdiff", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zdiffstore", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zincrby", &[KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zinter", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zintercard", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zinterstore", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zlexcount", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zmpop", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zmscore", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zpopmax", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zpopmin", &[KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrandmember", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrange", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrangebylex", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrangebyscore", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrangestore", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrank", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrem", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zremrangebylex", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zremrangebyrank", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zremrangebyscore", &[KeySpec { notes: None, flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrevrange", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrevrangebylex", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrevrangebyscore", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrevrank", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zscan", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zscore", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zunion", &[KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zunionstore", &[KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
];

#[rustfmt::skip]
static TIPS: &[(&str, &[&str])] = &[
    ("client|info", &["nondeterministic_output"]),
    ("client|list", &["nondeterministic_output"]),
    ("cluster|bumpepoch", &["nondeterministic_output"]),
    ("cluster|count-failure-reports", &["nondeterministic_output"]),
    ("cluster|getkeysinslot", &["nondeterministic_output"]),
    ("cluster|info", &["nondeterministic_output"]),
    ("cluster|links", &["nondeterministic_output"]),
    ("cluster|nodes", &["nondeterministic_output"]),
    ("cluster|replicas", &["nondeterministic_output"]),
    ("cluster|shards", &["nondeterministic_output"]),
    ("cluster|slaves", &["nondeterministic_output"]),
    ("cluster|slots", &["nondeterministic_output"]),
    ("command", &["nondeterministic_output_order"]),
    ("command|docs", &["nondeterministic_output_order"]),
    ("command|info", &["nondeterministic_output_order"]),
    ("command|list", &["nondeterministic_output_order"]),
    ("config|set", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("dbsize", &["request_policy:all_shards", "response_policy:agg_sum"]),
    ("del", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("dump", &["nondeterministic_output"]),
    ("exists", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("flushall", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("flushdb", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|delete", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|flush", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|kill", &["request_policy:all_shards", "response_policy:one_succeeded"]),
    ("function|list", &["nondeterministic_output_order"]),
    ("function|load", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|restore", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|stats", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    ("hgetall", &["nondeterministic_output_order"]),
    ("hkeys", &["nondeterministic_output_order"]),
    ("hrandfield", &["nondeterministic_output"]),
    ("hscan", &["nondeterministic_output"]),
    ("hvals", &["nondeterministic_output_order"]),
    ("info", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    ("keys", &["request_policy:all_shards", "nondeterministic_output_order"]),
    ("lastsave", &["nondeterministic_output"]),
    ("latency|doctor", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    ("latency|graph", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    ("latency|histogram", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    ("latency|history", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    ("latency|latest", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    ("latency|reset", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("memory|doctor", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    ("memory|malloc-stats", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    ("memory|purge", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("memory|stats", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    ("mget", &["request_policy:multi_shard"]),
    ("migrate", &["nondeterministic_output"]),
    ("module|list", &["nondeterministic_output_order"]),
    ("mset", &["request_policy:multi_shard", "response_policy:all_succeeded"]),
    ("msetnx", &["request_policy:multi_shard", "response_policy:agg_min"]),
    ("object|encoding", &["nondeterministic_output"]),
    ("object|freq", &["nondeterministic_output"]),
    ("object|idletime", &["nondeterministic_output"]),
    ("object|refcount", &["nondeterministic_output"]),
    ("ping", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("pttl", &["nondeterministic_output"]),
    ("randomkey", &["request_policy:all_shards", "nondeterministic_output"]),
    ("scan", &["nondeterministic_output", "request_policy:special"]),
    ("script|exists", &["request_policy:all_shards", "response_policy:agg_logical_and"]),
    ("script|flush", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("script|kill", &["request_policy:all_shards", "response_policy:one_succeeded"]),
    ("script|load", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("sdiff", &["nondeterministic_output_order"]),
    ("sinter", &["nondeterministic_output_order"]),
    ("slowlog|get", &["request_policy:all_nodes", "nondeterministic_output"]),
    ("slowlog|len", &["request_policy:all_nodes", "response_policy:agg_sum", "nondeterministic_output"]),
    ("slowlog|reset", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("smembers", &["nondeterministic_output_order"]),
    ("spop", &["nondeterministic_output"]),
    ("srandmember", &["nondeterministic_output"]),
    ("sscan", &["nondeterministic_output"]),
    ("sunion", &["nondeterministic_output_order"]),
    ("time", &["nondeterministic_output"]),
    ("touch", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("ttl", &["nondeterministic_output"]),
    ("unlink", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("wait", &["request_policy:all_shards", "response_policy:agg_min"]),
    ("xadd", &["nondeterministic_output"]),
    ("xautoclaim", &["nondeterministic_output"]),
    ("xclaim", &["nondeterministic_output"]),
    ("xinfo|consumers", &["nondeterministic_output"]),
    ("xpending", &["nondeterministic_output"]),
    ("xtrim", &["nondeterministic_output"]),
    ("zrandmember", &["nondeterministic_output"]),
    ("zscan", &["nondeterministic_output"]),
];

/// The key specs of the command row named `name` (`xgroup|create`).
pub(crate) fn of(name: &str) -> &'static [KeySpec] {
    KEY_SPECS
        .binary_search_by(|(n, _)| n.cmp(&name))
        .map_or(&[], |i| KEY_SPECS[i].1)
}

/// The command tips of the row named `name`, in Redis's order; empty for
/// a row without any.
pub(crate) fn tips(name: &str) -> &'static [&'static str] {
    TIPS.binary_search_by(|(n, _)| n.cmp(&name)).map_or(&[], |i| TIPS[i].1)
}

/// A key: its argument position and its flags.
pub(crate) type Key = (usize, &'static [&'static str]);

/// The keys `args` names for command `spec`, with their flags, as Redis's
/// `getKeysFromCommandWithSpecs`; an empty list when the arguments name
/// none it can find (a bad `numkeys`).
pub(crate) fn keys(spec: &CommandSpec, args: &[Bytes]) -> Vec<Key> {
    let specs = of(spec.name);
    let variable = specs.iter().any(|s| s.flags.contains(&"variable_flags"));
    if !variable {
        if let Some(keys) = walk(specs, args, spec.arity < 0) {
            return keys;
        }
    }
    fallback(spec, specs, args)
}

/// Walks the specs; `None` when one cannot be walked (Redis's
/// `invalid_spec`).
fn walk(specs: &'static [KeySpec], args: &[Bytes], variable_arity: bool) -> Option<Vec<Key>> {
    let argc = args.len() as i32;
    let mut keys = vec![];
    for spec in specs {
        let mut first = match spec.begin {
            Begin::Index(i) => i,
            Begin::Keyword(word, from) => {
                let (start, end) = if from > 0 { (from, argc - 1) } else { (argc + from, 1) };
                let mut i = start;
                let mut found = 0;
                while i != end && (1..argc).contains(&i) {
                    if args[i as usize].eq_ignore_ascii_case(word.as_bytes()) {
                        found = i + 1;
                        break;
                    }
                    i += if start <= end { 1 } else { -1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            Begin::Unknown => return None,
        };
        let (last, step) = match spec.find {
            Find::Range { lastkey, step, limit } => {
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (last, step)
            }
            Find::Keynum {
                index,
                first: offset,
                step,
            } => {
                let count = args.get((first + index) as usize)?;
                let n = crate::store::num::parse_i64(count).filter(|n| *n >= 0)?;
                first += offset;
                (first + n as i32 - 1, step)
            }
            Find::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            if i >= argc && variable_arity {
                break;
            }
            keys.push((i as usize, spec.flags));
            i += step.max(1);
        }
        // An incomplete spec (MIGRATE's KEYS) leaves the keys to the
        // command's own finder, as Redis's `invalid_spec`.
        if spec.flags.contains(&"incomplete") {
            return None;
        }
    }
    Some(keys)
}

/// What the command's own key finder gives where the specs cannot: its
/// keys (see [`command_keys`]), flagged as Redis's finder flags them.
fn fallback(spec: &CommandSpec, specs: &'static [KeySpec], args: &[Bytes]) -> Vec<Key> {
    // Redis falls back only to a finder the command has (`getkeys_proc`);
    // without one, the command has no keys here. The counted ones read
    // their count as C's `atoi` and flag no access (`genericGetKeys`).
    if let Some((store, count_at, first)) = generic_finder(spec.name) {
        return generic_keys(args, store, count_at, first);
    }
    if !OWN_FINDERS.contains(&spec.name) {
        return vec![];
    }
    const RO: &[&str] = &["RO", "access"];
    const OW: &[&str] = &["OW", "update"];
    const RW: &[&str] = &["RW", "access", "update"];
    let Some(found) = command_keys(spec, args) else {
        return vec![];
    };
    let has = |word: &str| args.iter().skip(2).any(|a| a.eq_ignore_ascii_case(word.as_bytes()));
    let default = specs.first().map_or(RW, |s| s.flags);
    found
        .into_iter()
        .enumerate()
        .map(|(n, at)| {
            let flags = match spec.name {
                "set" if has("get") => RW,
                "set" => OW,
                "bitfield" if !has("set") && !has("incrby") => RO,
                "bitfield" => RW,
                "sort" | "sort_ro" if n > 0 => OW,
                "sort" | "sort_ro" => RO,
                _ => default,
            };
            (at, flags)
        })
        .collect()
}

/// The commands with a key finder of their own in Redis 7.0.15 besides
/// [`generic_finder`]'s.
const OWN_FINDERS: &[&str] = &[
    "set",
    "bitfield",
    "sort",
    "sort_ro",
    "migrate",
    "georadius",
    "georadiusbymember",
    "xread",
    "xreadgroup",
];

/// Redis's `genericGetKeys` commands: where the store key is (0: none),
/// where the count is, where the keys begin (one key per argument).
fn generic_finder(name: &str) -> Option<(usize, usize, usize)> {
    Some(match name {
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => (0, 1, 2),
        "zunionstore" | "zinterstore" | "zdiffstore" => (1, 2, 3),
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop" | "bzmpop" => (0, 2, 3),
        _ => return None,
    })
}

/// `genericGetKeys`: `count` keys from `first` (none when the count is
/// below 1 or more than the arguments left), then the store key.
fn generic_keys(args: &[Bytes], store: usize, count_at: usize, first: usize) -> Vec<Key> {
    let Some(count) = args.get(count_at).map(|a| atoi(a)) else {
        return vec![];
    };
    if count < 1 || count > args.len().saturating_sub(first) as i64 {
        return vec![];
    }
    let mut keys: Vec<Key> = (0..count as usize).map(|i| (first + i, &[][..])).collect();
    if store != 0 {
        keys.push((store, &[]));
    }
    keys
}

/// C's `atoi`: leading blanks, a sign, the digits up to the first other
/// character (0 when there are none).
fn atoi(text: &[u8]) -> i64 {
    let text = text.trim_ascii_start();
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let value = digits
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .fold(0i64, |n, c| n.saturating_mul(10).saturating_add(i64::from(c - b'0')));
    if negative {
        -value
    } else {
        value
    }
}

/// Where the keys of a command are, by argument position, as the command's
/// own key finder sees them (fault rules match these; COMMAND GETKEYS uses
/// the key specs, [`keyspecs`], and falls back to this as Redis does): the
/// row's fixed positions (first, last, step), or for a command whose keys
/// move, where its arguments say. `None` when the arguments cannot name
/// keys (a bad `numkeys`).
pub(crate) fn command_keys(spec: &CommandSpec, args: &[Bytes]) -> Option<Vec<usize>> {
    let n = args.len();
    // `numkeys` at `at`, the keys right after it.
    let counted = |at: usize, min: i64| -> Option<Vec<usize>> {
        let count = crate::store::num::parse_i64(args.get(at)?)?;
        if count < min || count > (n - at - 1) as i64 {
            return None;
        }
        Some((at + 1..at + 1 + count as usize).collect())
    };
    if spec.has(super::flags::MOVABLEKEYS) {
        return match spec.name {
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => counted(2, 0),
            "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => counted(1, 1),
            "blmpop" | "bzmpop" => counted(2, 1),
            "zunionstore" | "zinterstore" | "zdiffstore" => {
                args.get(1)?;
                let mut keys = vec![1];
                keys.extend(counted(2, 1)?);
                Some(keys)
            }
            "xread" | "xreadgroup" => {
                let at = args.iter().position(|a| a.eq_ignore_ascii_case(b"streams"))?;
                let rest = n - at - 1;
                rest.is_multiple_of(2).then(|| (at + 1..at + 1 + rest / 2).collect())
            }
            // Redis's georadiusGetKeys: the source, and the last STORE or
            // STOREDIST destination.
            "georadius" | "georadiusbymember" => {
                args.get(1)?;
                let mut keys = vec![1];
                let mut i = 5;
                let mut stored = None;
                while i < n {
                    if (args[i].eq_ignore_ascii_case(b"store") || args[i].eq_ignore_ascii_case(b"storedist"))
                        && i + 1 < n
                    {
                        stored = Some(i + 1);
                        i += 1;
                    }
                    i += 1;
                }
                keys.extend(stored);
                Some(keys)
            }
            // Redis's migrateGetKeys: the key, or the keys after KEYS
            // (none when the key is not "" too: MIGRATE refuses that).
            "migrate" => {
                args.get(3)?;
                let mut i = 6;
                while i < n {
                    if args[i].eq_ignore_ascii_case(b"keys") {
                        return Some(if args[3].is_empty() {
                            (i + 1..n).collect()
                        } else {
                            vec![]
                        });
                    }
                    i += match &args[i] {
                        a if a.eq_ignore_ascii_case(b"auth") => 2,
                        a if a.eq_ignore_ascii_case(b"auth2") => 3,
                        _ => 1,
                    };
                }
                Some(vec![3])
            }
            // SORT_RO has no STORE: its one key.
            "sort_ro" => {
                args.get(1)?;
                Some(vec![1])
            }
            // Redis's `sortGetKeys`: LIMIT, GET and BY skip their arguments,
            // the last STORE with a name after it wins, and STORE's own
            // argument is read as an option in turn (`STORE STORE x`
            // stores to `x`), as SORT itself reads them.
            "sort" => {
                args.get(1)?;
                let mut store = None;
                let mut i = 2;
                while i < n {
                    let a = &args[i];
                    if a.eq_ignore_ascii_case(b"limit") {
                        i += 2;
                    } else if a.eq_ignore_ascii_case(b"get") || a.eq_ignore_ascii_case(b"by") {
                        i += 1;
                    } else if a.eq_ignore_ascii_case(b"store") && i + 1 < n {
                        store = Some(i + 1);
                    }
                    i += 1;
                }
                Some(std::iter::once(1).chain(store).collect())
            }
            _ => None,
        };
    }
    let (first, last, step) = spec.keys;
    if first <= 0 || step <= 0 {
        return Some(vec![]);
    }
    let last = if last < 0 {
        n as i32 + last
    } else {
        last.min(n as i32 - 1)
    };
    Some(
        (first..=last)
            .step_by(step as usize)
            .map(|i| i as usize)
            .filter(|&i| i < n)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command row with keys has its key specs, and the table is in
    /// name order (it is searched by halves).
    #[test]
    fn every_command_with_keys_has_its_row() {
        assert!(KEY_SPECS.windows(2).all(|w| w[0].0 < w[1].0), "KEY_SPECS out of order");
        assert!(TIPS.windows(2).all(|w| w[0].0 < w[1].0), "TIPS out of order");
        let rows = crate::cmd::all().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()));
        for c in rows {
            let keyed = c.keys.0 > 0 || c.has(crate::cmd::flags::MOVABLEKEYS);
            assert_eq!(
                keyed,
                !of(c.name).is_empty(),
                "{}: key specs (regenerate with scripts/keyspecs.py)",
                c.name
            );
        }
    }
}
