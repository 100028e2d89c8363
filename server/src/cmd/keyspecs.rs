//! Redis 7.0.15's key specs and command tips, one row per command and
//! subcommand coordis has (COMMAND INFO shows both), and the walk over the
//! specs that finds a command's keys with their access flags (Redis's
//! `getKeysUsingKeySpecs`): COMMAND GETKEYS and COMMAND GETKEYSANDFLAGS
//! answer from here.
//!
//! The tables are Redis's data, generated from its COMMAND INFO by
//! `scripts/keyspecs.py`; `server/tests/commands.rs` checks that every
//! command coordis has with keys has its row (a new command needs one).
//! They are the one source of key positions: each command row takes its
//! specs, tips and legacy (first, last, step) range from here when the
//! table is compiled ([`specs_of`], [`tips_of`], [`legacy_range`]).
//!
//! A command whose keys its specs cannot always tell (a spec Redis cannot
//! walk, or flags that depend on the arguments: SET with GET, BITFIELD
//! with only GETs, SORT's STORE) has its own finder on its row
//! ([`KeyFinder`], Redis's `getkeys_proc`; the finders are below, as
//! Redis's are in `db.c`). [`keys`] falls back to it as Redis does, and
//! [`command_keys`] (routing, tracking, fault rules) asks it first, as
//! Redis's `getKeysFromCommand`.

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
const KEY_SPECS: &[(&str, &[KeySpec])] = &[
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
const TIPS: &[(&str, &[&str])] = &[
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

/// The key specs of the command row named `name` (`xgroup|create`), none
/// for a row without keys; evaluated when the command table is compiled.
pub(crate) const fn specs_of(name: &str) -> &'static [KeySpec] {
    match find(KEY_SPECS, name) {
        Some(i) => KEY_SPECS[i].1,
        None => &[],
    }
}

/// The command tips of the row named `name`, in Redis's order; empty for
/// a row without any. Evaluated when the command table is compiled.
pub(crate) const fn tips_of(name: &str) -> &'static [&'static str] {
    match find(TIPS, name) {
        Some(i) => TIPS[i].1,
        None => &[],
    }
}

/// Where `name` is in a table sorted by name (a binary search that can
/// run at compile time).
const fn find<T>(table: &[(&str, T)], name: &str) -> Option<usize> {
    let (mut low, mut high) = (0, table.len());
    while low < high {
        let mid = (low + high) / 2;
        match compare(table[mid].0.as_bytes(), name.as_bytes()) {
            std::cmp::Ordering::Less => low = mid + 1,
            std::cmp::Ordering::Greater => high = mid,
            std::cmp::Ordering::Equal => return Some(mid),
        }
    }
    None
}

/// `a.cmp(b)` for byte strings, usable at compile time.
const fn compare(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let mut i = 0;
    while i < a.len() && i < b.len() {
        if a[i] != b[i] {
            return if a[i] < b[i] {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            };
        }
        i += 1;
    }
    if a.len() < b.len() {
        std::cmp::Ordering::Less
    } else if a.len() > b.len() {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Equal
    }
}

/// The (first, last, step) COMMAND INFO shows and commands without a
/// finder of their own find keys by (Redis's
/// `populateCommandLegacyRangeSpec`): one index-and-range spec as it is;
/// else the consecutive step-1 index-and-range specs merged, the others
/// left out; (0, 0, 0) when there is none. `last` is absolute, or
/// negative from the end.
pub(crate) const fn legacy_range(specs: &[KeySpec]) -> (i32, i32, i32) {
    if let [KeySpec {
        begin: Begin::Index(first),
        find: Find::Range { lastkey, step, .. },
        ..
    }] = specs
    {
        let last = if *lastkey >= 0 { *first + *lastkey } else { *lastkey };
        return (*first, last, *step);
    }
    let (mut first, mut last, mut prev_last) = (i32::MAX, 0i32, 0i32);
    let mut i = 0;
    while i < specs.len() {
        if let KeySpec {
            begin: Begin::Index(pos),
            find: Find::Range { lastkey, step: 1, .. },
            ..
        } = &specs[i]
        {
            if prev_last == 0 || prev_last == *pos - 1 {
                if *pos < first {
                    first = *pos;
                }
                let absolute = if *lastkey >= 0 { *lastkey + *pos } else { *lastkey };
                // Redis compares as unsigned: a negative (from the end) wins.
                if absolute as u32 > last as u32 {
                    last = absolute;
                }
                prev_last = last;
            }
        }
        i += 1;
    }
    if first == i32::MAX {
        (0, 0, 0)
    } else {
        (first, last, 1)
    }
}

/// A key: its argument position and its flags.
pub(crate) type Key = (usize, &'static [&'static str]);

/// The keys `args` names for command `spec`, with their flags, as Redis's
/// `getKeysFromCommandWithSpecs`; an empty list when the arguments name
/// none it can find (a bad `numkeys`).
pub(crate) fn keys(spec: &CommandSpec, args: &[Bytes]) -> Vec<Key> {
    let specs = spec.key_specs;
    let variable = specs.iter().any(|s| s.flags.contains(&"variable_flags"));
    if !variable {
        if let Some(keys) = walk(specs, args, spec.arity < 0) {
            return keys;
        }
    }
    // Redis falls back only to a finder the command has; without one, the
    // command has no keys here.
    spec.getkeys.map_or_else(Vec::new, |finder| finder(args))
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

/// A command's own key finder, on its row ([`CommandSpec::getkeys`]):
/// Redis's `getkeys_proc`. The keys `args` names, flagged as Redis's
/// finder flags them (not at all for a command whose specs tell the flags);
/// none when the arguments are wrong (the command then answers the error).
pub(crate) type KeyFinder = fn(&[Bytes]) -> Vec<Key>;

const NO_FLAGS: &[&str] = &[];
const RO_ACCESS: &[&str] = &["RO", "access"];
const OW_UPDATE: &[&str] = &["OW", "update"];
const RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];
const RW_ACCESS_DELETE: &[&str] = &["RW", "access", "delete"];

/// Redis's `genericGetKeys`: a count at `COUNT` (read as C's `atoi`), that
/// many keys from `FIRST` (none when the count is below 1 or more than the
/// arguments left), then the store key at `STORE` (0: none).
fn counted<const STORE: usize, const COUNT: usize, const FIRST: usize>(args: &[Bytes]) -> Vec<Key> {
    let Some(count) = args.get(COUNT).map(|a| atoi(a)) else {
        return vec![];
    };
    if count < 1 || count > args.len().saturating_sub(FIRST) as i64 {
        return vec![];
    }
    let mut keys: Vec<Key> = (0..count as usize).map(|i| (FIRST + i, NO_FLAGS)).collect();
    if STORE != 0 {
        keys.push((STORE, NO_FLAGS));
    }
    keys
}

/// `numkeys key ...` right after the name (ZUNION, ZINTER, ZDIFF,
/// ZINTERCARD, SINTERCARD, LMPOP, ZMPOP).
pub(crate) const NUMKEYS_FIRST: KeyFinder = counted::<0, 1, 2>;
/// `numkeys key ...` after one argument (EVAL and EVALSHA, their `_RO`
/// forms, FCALL, FCALL_RO, BLMPOP, BZMPOP).
pub(crate) const NUMKEYS_SECOND: KeyFinder = counted::<0, 2, 3>;
/// `destination numkeys key ...` (ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE).
pub(crate) const STORE_NUMKEYS: KeyFinder = counted::<1, 2, 3>;

/// SET (Redis's `setGetKeys`): the key, read too when a GET follows.
pub(crate) fn set_keys(args: &[Bytes]) -> Vec<Key> {
    let get = args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
    vec![(1, if get { RW_ACCESS_UPDATE } else { OW_UPDATE })]
}

/// BITFIELD (Redis's `bitfieldGetKeys`): the key, read-only while only
/// GETs and OVERFLOWs come before the first SET or INCRBY (a syntax error
/// counts as a write).
pub(crate) fn bitfield_keys(args: &[Bytes]) -> Vec<Key> {
    let mut read_only = true;
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        let arg = &args[i];
        if arg.eq_ignore_ascii_case(b"get") && left >= 2 {
            i += 2;
        } else if (arg.eq_ignore_ascii_case(b"set") || arg.eq_ignore_ascii_case(b"incrby")) && left >= 3 {
            read_only = false;
            break;
        } else if arg.eq_ignore_ascii_case(b"overflow") && left >= 1 {
            i += 1;
        } else {
            read_only = false;
            break;
        }
        i += 1;
    }
    vec![(1, if read_only { RO_ACCESS } else { RW_ACCESS_UPDATE })]
}

/// SORT (Redis's `sortGetKeys`): the key, and the last STORE's destination
/// (LIMIT's two arguments, GET's and BY's one are skipped).
pub(crate) fn sort_keys(args: &[Bytes]) -> Vec<Key> {
    let mut keys = vec![(1, RO_ACCESS)];
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let arg = &args[i];
        if arg.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if arg.eq_ignore_ascii_case(b"get") || arg.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if arg.eq_ignore_ascii_case(b"store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(store.map(|at| (at, OW_UPDATE)));
    keys
}

/// SORT_RO (Redis's `sortROGetKeys`): the key.
pub(crate) fn sort_ro_keys(_args: &[Bytes]) -> Vec<Key> {
    vec![(1, RO_ACCESS)]
}

/// MIGRATE (Redis's `migrateGetKeys`): the key, or the keys after KEYS
/// (none when the key is not "" too: MIGRATE refuses that); AUTH's one
/// argument and AUTH2's two are skipped.
pub(crate) fn migrate_keys(args: &[Bytes]) -> Vec<Key> {
    let mut i = 6;
    while i < args.len() {
        let arg = &args[i];
        if arg.eq_ignore_ascii_case(b"keys") {
            if !args[3].is_empty() {
                return vec![];
            }
            return (i + 1..args.len()).map(|at| (at, RW_ACCESS_DELETE)).collect();
        }
        if arg.eq_ignore_ascii_case(b"auth") {
            i += 1;
        } else if arg.eq_ignore_ascii_case(b"auth2") {
            i += 2;
        }
        i += 1;
    }
    vec![(3, RW_ACCESS_DELETE)]
}

/// GEORADIUS and GEORADIUSBYMEMBER (Redis's `georadiusGetKeys`): the
/// source, and the last STORE or STOREDIST destination.
pub(crate) fn georadius_keys(args: &[Bytes]) -> Vec<Key> {
    let mut keys = vec![(1, NO_FLAGS)];
    let mut stored = None;
    let mut i = 5;
    while i < args.len() {
        let arg = &args[i];
        if (arg.eq_ignore_ascii_case(b"store") || arg.eq_ignore_ascii_case(b"storedist")) && i + 1 < args.len() {
            stored = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    keys.extend(stored.map(|at| (at, NO_FLAGS)));
    keys
}

/// XREAD and XREADGROUP (Redis's `xreadGetKeys`): past the options (BLOCK
/// and COUNT with one argument, GROUP with two, NOACK), the first half of
/// what follows STREAMS; none when STREAMS is missing or what follows it
/// is not pairs.
pub(crate) fn xread_keys(args: &[Bytes]) -> Vec<Key> {
    let mut i = 1;
    while i < args.len() {
        let arg = &args[i];
        if arg.eq_ignore_ascii_case(b"block") || arg.eq_ignore_ascii_case(b"count") {
            i += 1;
        } else if arg.eq_ignore_ascii_case(b"group") {
            i += 2;
        } else if arg.eq_ignore_ascii_case(b"streams") {
            let rest = args.len() - i - 1;
            if rest == 0 || !rest.is_multiple_of(2) {
                return vec![];
            }
            return (i + 1..i + 1 + rest / 2).map(|at| (at, NO_FLAGS)).collect();
        } else if !arg.eq_ignore_ascii_case(b"noack") {
            return vec![];
        }
        i += 1;
    }
    vec![]
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

/// Where the keys of a command are, by argument position, as Redis's
/// `getKeysFromCommand` finds them (fault rules, routing and tracking
/// match these; COMMAND GETKEYS walks the key specs, [`keys`]): the row's
/// own finder, or its legacy (first, last, step) range. Empty when the
/// arguments name no keys (a bad `numkeys`).
pub(crate) fn command_keys(spec: &CommandSpec, args: &[Bytes]) -> Vec<usize> {
    if let Some(finder) = spec.getkeys {
        return finder(args).into_iter().map(|(at, _)| at).collect();
    }
    let n = args.len();
    let (first, last, step) = spec.keys;
    if first <= 0 || step <= 0 {
        return vec![];
    }
    let last = if last < 0 {
        n as i32 + last
    } else {
        last.min(n as i32 - 1)
    };
    (first..=last)
        .step_by(step as usize)
        .map(|i| i as usize)
        .filter(|&i| i < n)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tables are in name order (they are searched by halves), every
    /// row of them names a command row (a misspelt name would leave its
    /// command without specs), and every command whose keys move has its
    /// own finder, as in Redis 7.0.15.
    #[test]
    fn every_command_with_keys_has_its_row() {
        assert!(KEY_SPECS.windows(2).all(|w| w[0].0 < w[1].0), "KEY_SPECS out of order");
        assert!(TIPS.windows(2).all(|w| w[0].0 < w[1].0), "TIPS out of order");
        let rows: Vec<&CommandSpec> = crate::cmd::all()
            .flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()))
            .collect();
        for name in KEY_SPECS.iter().map(|(n, _)| n).chain(TIPS.iter().map(|(n, _)| n)) {
            assert!(rows.iter().any(|c| c.name == *name), "{name}: no such command row");
        }
        for c in &rows {
            assert_eq!(c.key_specs.len(), specs_of(c.name).len(), "{}", c.name);
            if c.has(crate::cmd::flags::MOVABLEKEYS) {
                assert!(c.getkeys.is_some(), "{}: keys move but it has no finder", c.name);
            }
        }
        // Redis 7.0.15's commands with a `getkeys_proc`.
        let mut with_finder: Vec<&str> = rows.iter().filter(|c| c.getkeys.is_some()).map(|c| c.name).collect();
        with_finder.sort_unstable();
        let mut redis = vec![
            "bitfield",
            "blmpop",
            "bzmpop",
            "eval",
            "eval_ro",
            "evalsha",
            "evalsha_ro",
            "fcall",
            "fcall_ro",
            "georadius",
            "georadiusbymember",
            "lmpop",
            "migrate",
            "set",
            "sintercard",
            "sort",
            "sort_ro",
            "xread",
            "xreadgroup",
            "zdiff",
            "zdiffstore",
            "zinter",
            "zintercard",
            "zinterstore",
            "zmpop",
            "zunion",
            "zunionstore",
        ];
        redis.sort_unstable();
        assert_eq!(with_finder, redis);
    }

    /// The legacy range is Redis's: one spec as it is, consecutive ranges
    /// merged, a negative last from the end.
    #[test]
    fn the_legacy_range_is_derived_from_the_specs_as_redis_does() {
        assert_eq!(legacy_range(specs_of("get")), (1, 1, 1));
        assert_eq!(legacy_range(specs_of("mset")), (1, -1, 2));
        assert_eq!(legacy_range(specs_of("blpop")), (1, -2, 1));
        assert_eq!(legacy_range(specs_of("lmove")), (1, 2, 1));
        assert_eq!(legacy_range(specs_of("sdiffstore")), (1, -1, 1));
        assert_eq!(legacy_range(specs_of("zunionstore")), (1, 1, 1));
        assert_eq!(legacy_range(specs_of("georadius")), (1, 1, 1));
        assert_eq!(legacy_range(specs_of("xread")), (0, 0, 0));
        assert_eq!(legacy_range(specs_of("ping")), (0, 0, 0));
    }

    /// The finders find what Redis's do.
    #[test]
    fn the_finders_find_what_redis_finds() {
        let args = |s: &str| {
            s.split(' ')
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect::<Vec<_>>()
        };
        let at = |keys: Vec<Key>| keys.into_iter().map(|(at, _)| at).collect::<Vec<_>>();
        assert_eq!(at(NUMKEYS_SECOND(&args("eval s 2x a b"))), [3, 4]);
        assert_eq!(at(NUMKEYS_SECOND(&args("eval s 3 a b"))), [0usize; 0]);
        assert_eq!(at(STORE_NUMKEYS(&args("zunionstore d 2 a b"))), [3, 4, 1]);
        assert_eq!(
            at(sort_keys(&args("sort k by store get store store a store b"))),
            [1, 9]
        );
        assert_eq!(
            at(xread_keys(&args("xreadgroup group streams c streams a b 1 2"))),
            [5, 6]
        );
        assert_eq!(at(xread_keys(&args("xread streams a b 1"))), [0usize; 0]);
        assert_eq!(at(migrate_keys(&args("migrate h p  0 1 auth keys keys a b"))), [9, 10]);
        assert_eq!(
            bitfield_keys(&args("bitfield k get u8 0 overflow wrap"))[0].1,
            RO_ACCESS
        );
        assert_eq!(
            bitfield_keys(&args("bitfield k get u8 0 set u8 0 1"))[0].1,
            RW_ACCESS_UPDATE
        );
        assert_eq!(set_keys(&args("set k v get"))[0].1, RW_ACCESS_UPDATE);
    }
}
