//! Redis 7.0.15's key specs, one row per command and subcommand coordis
//! has, and the walk over them that finds a command's keys with their
//! access flags (Redis's `getKeysUsingKeySpecs`): COMMAND GETKEYS and
//! COMMAND GETKEYSANDFLAGS answer from here.
//!
//! The table is Redis's data, generated from its COMMAND INFO by
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
pub struct KeySpec {
    pub flags: &'static [&'static str],
    pub begin: Begin,
    pub find: Find,
}

#[derive(Debug)]
pub enum Begin {
    /// At this argument.
    Index(i32),
    /// After this keyword, searched from this argument (negative: from the
    /// end, backwards).
    Keyword(&'static str, i32),
    /// Redis cannot say (the command's own finder knows).
    Unknown,
}

#[derive(Debug)]
pub enum Find {
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
    ("append", &[KeySpec { flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("bitcount", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("bitfield", &[KeySpec { flags: &["RW", "access", "update", "variable_flags"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("bitfield_ro", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("bitop", &[KeySpec { flags: &["OW", "update"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RO", "access"], begin: Begin::Index(3), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("bitpos", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("blmove", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("blmpop", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("blpop", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -2, step: 1, limit: 0 } }]),
    ("brpop", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -2, step: 1, limit: 0 } }]),
    ("brpoplpush", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("bzmpop", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("bzpopmax", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -2, step: 1, limit: 0 } }]),
    ("bzpopmin", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -2, step: 1, limit: 0 } }]),
    ("copy", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["OW", "update"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("decr", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("decrby", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("del", &[KeySpec { flags: &["RM", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("eval", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("eval_ro", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("evalsha", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("evalsha_ro", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("exists", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("expire", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("expireat", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("expiretime", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("fcall", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("fcall_ro", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("get", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("getbit", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("getdel", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("getex", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("getrange", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("getset", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hdel", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hexists", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hget", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hgetall", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hincrby", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hincrbyfloat", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hkeys", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hlen", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hmget", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hmset", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hrandfield", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hscan", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hset", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hsetnx", &[KeySpec { flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hstrlen", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("hvals", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("incr", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("incrby", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("incrbyfloat", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lcs", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 1, step: 1, limit: 0 } }]),
    ("lindex", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("linsert", &[KeySpec { flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("llen", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lmove", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lmpop", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("lpop", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lpos", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lpush", &[KeySpec { flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lpushx", &[KeySpec { flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lrange", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lrem", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("lset", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("ltrim", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("memory|usage", &[KeySpec { flags: &["RO"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("mget", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("move", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("mset", &[KeySpec { flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 2, limit: 0 } }]),
    ("msetnx", &[KeySpec { flags: &["OW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 2, limit: 0 } }]),
    ("object|encoding", &[KeySpec { flags: &["RO"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("object|freq", &[KeySpec { flags: &["RO"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("object|idletime", &[KeySpec { flags: &["RO"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("object|refcount", &[KeySpec { flags: &["RO"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("persist", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("pexpire", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("pexpireat", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("pexpiretime", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("psetex", &[KeySpec { flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("pttl", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("rename", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["OW", "update"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("renamenx", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["OW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("rpop", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("rpoplpush", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("rpush", &[KeySpec { flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("rpushx", &[KeySpec { flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sadd", &[KeySpec { flags: &["RW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("scard", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sdiff", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("sdiffstore", &[KeySpec { flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("set", &[KeySpec { flags: &["RW", "access", "update", "variable_flags"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("setbit", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("setex", &[KeySpec { flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("setnx", &[KeySpec { flags: &["OW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("setrange", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sinter", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("sintercard", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("sinterstore", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("sismember", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("smembers", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("smismember", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("smove", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sort", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RO", "access"], begin: Begin::Unknown, find: Find::Unknown }, KeySpec { flags: &["OW", "update"], begin: Begin::Unknown, find: Find::Unknown }]),
    ("sort_ro", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RO", "access"], begin: Begin::Unknown, find: Find::Unknown }]),
    ("spop", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("srandmember", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("srem", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sscan", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("strlen", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("substr", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("sunion", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("sunionstore", &[KeySpec { flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("touch", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("ttl", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("type", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("unlink", &[KeySpec { flags: &["RM", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("watch", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, step: 1, limit: 0 } }]),
    ("xack", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xadd", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xautoclaim", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xclaim", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xdel", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xgroup|create", &[KeySpec { flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xgroup|createconsumer", &[KeySpec { flags: &["RW", "insert"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xgroup|delconsumer", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xgroup|destroy", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xgroup|setid", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xinfo|consumers", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xinfo|groups", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xinfo|stream", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xlen", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xpending", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xrange", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xread", &[KeySpec { flags: &["RO", "access"], begin: Begin::Keyword("STREAMS", 1), find: Find::Range { lastkey: -1, step: 1, limit: 2 } }]),
    ("xreadgroup", &[KeySpec { flags: &["RO", "access"], begin: Begin::Keyword("STREAMS", 4), find: Find::Range { lastkey: -1, step: 1, limit: 2 } }]),
    ("xrevrange", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xsetid", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("xtrim", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zadd", &[KeySpec { flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zcard", &[KeySpec { flags: &["RO"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zcount", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zdiff", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zdiffstore", &[KeySpec { flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zincrby", &[KeySpec { flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zinter", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zintercard", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zinterstore", &[KeySpec { flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zlexcount", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zmpop", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zmscore", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zpopmax", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zpopmin", &[KeySpec { flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrandmember", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrange", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrangebylex", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrangebyscore", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrangestore", &[KeySpec { flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrank", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrem", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zremrangebylex", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zremrangebyrank", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zremrangebyscore", &[KeySpec { flags: &["RW", "delete"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrevrange", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrevrangebylex", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrevrangebyscore", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zrevrank", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zscan", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zscore", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }]),
    ("zunion", &[KeySpec { flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
    ("zunionstore", &[KeySpec { flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, step: 1, limit: 0 } }, KeySpec { flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { index: 0, first: 1, step: 1 } }]),
];

/// The key specs of the command row named `name` (`xgroup|create`).
pub fn of(name: &str) -> &'static [KeySpec] {
    KEY_SPECS
        .binary_search_by(|(n, _)| n.cmp(&name))
        .map_or(&[], |i| KEY_SPECS[i].1)
}

/// A key: its argument position and its flags.
pub type Key = (usize, &'static [&'static str]);

/// The keys `args` names for command `spec`, with their flags, as Redis's
/// `getKeysFromCommandWithSpecs`; an empty list when the arguments name
/// none it can find (a bad `numkeys`).
pub fn keys(spec: &CommandSpec, args: &[Bytes]) -> Vec<Key> {
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
    }
    Some(keys)
}

/// What the command's own key finder gives where the specs cannot: its
/// keys (see [`command_keys`]), flagged as Redis's finder flags them.
fn fallback(spec: &CommandSpec, specs: &'static [KeySpec], args: &[Bytes]) -> Vec<Key> {
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

/// Where the keys of a command are, by argument position, as the command's
/// own key finder sees them (fault rules match these; COMMAND GETKEYS uses
/// the key specs, [`keyspecs`], and falls back to this as Redis does): the
/// row's fixed positions (first, last, step), or for a command whose keys
/// move, where its arguments say. `None` when the arguments cannot name
/// keys (a bad `numkeys`).
pub fn command_keys(spec: &CommandSpec, args: &[Bytes]) -> Option<Vec<usize>> {
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
            "sort" | "sort_ro" => {
                args.get(1)?;
                let mut keys = vec![1];
                if let Some(at) = args.iter().skip(2).position(|a| a.eq_ignore_ascii_case(b"store")) {
                    if at + 3 < n {
                        keys.push(at + 3);
                    }
                }
                Some(keys)
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
