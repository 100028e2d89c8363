//! Commands: the table of every command coordis knows, and dispatch.
//!
//! One file per command family, each with a table of rows ([`CommandSpec`]):
//! name, arity, Redis 7.0.15's flags and ACL categories (as `COMMAND INFO`
//! reports them), key positions, documentation, handler, and for container
//! commands (CLIENT, CONFIG, ...) a table of subcommand rows. Every policy
//! decision is made from the flags in one place, [`call`], in Redis's order
//! (`processCommand`): unknown command or subcommand, arity, AUTH, MULTI,
//! pub/sub context, queueing; scripts go through [`dispatch_from_script`].
//! A handler receives the whole argument vector (`args[0]` is the command
//! name), parses and validates its options (producing Redis's exact errors),
//! applies them to the keyspace and returns a [`Reply`]. Handlers do no I/O
//! and never await: the same handler serves a socket, a script and a
//! transaction.
//!
//! # Adding a command or a family
//!
//! - A command: its handler and one row in its family's `COMMANDS` table,
//!   with the arity, flags, categories and key positions Redis 7.0.15's
//!   `COMMAND INFO` gives (`server/tests/commands.rs` compares every row
//!   with Redis); any new error text in [`crate::errors`]; a scenario in
//!   `server/tests/scenarios/`; a word in README's command table.
//! - If it writes: [`Ctx::dirty`] for each change, exactly where Redis
//!   raises `server.dirty` (INFO's `rdb_changes_since_last_save`, and what
//!   decides whether the command leaves an effect), and the effect itself
//!   when its arguments are not it: [`Ctx::propagate_as`] for relative or
//!   random arguments (Redis's `rewriteClientCommandVector`),
//!   [`Ctx::also_propagate`] / [`Ctx::prevent_propagation`] for effects of
//!   another shape ([`crate::exec::feed`]).
//! - A family: a new file here with its `COMMANDS`, chained in [`all`].
//! - A value type: an arm of [`crate::store::Value`] (and of the storage
//!   tag in `store/item.rs`); every `match` that must handle it fails to
//!   compile until it does.
//! - A directive: one row of [`crate::config::DIRECTIVES`].

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;

use crate::clients::ClientState;
use crate::engine::ServerState;
use crate::errors;
use crate::protocol::Reply;
use crate::store::{Db, EntryRef, Value, ValueMut, ValueRef};

/// Builds one [`CommandSpec`] row: documentation group, name, arity, flags,
/// explicit ACL categories, key positions, summary, handler, and for a
/// container its subcommand rows. Each family wraps it as `spec!` with its
/// group.
macro_rules! command {
    ($group:literal, $name:literal, $arity:expr, $flags:expr, $acl:expr, $keys:expr, $summary:literal, $handler:expr) => {
        command!($group, $name, $arity, $flags, $acl, $keys, $summary, $handler, &[])
    };
    ($group:literal, $name:literal, $arity:expr, $flags:expr, $acl:expr, $keys:expr, $summary:literal, $handler:expr, $subs:expr) => {
        $crate::cmd::CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            acl: $acl,
            keys: $keys,
            group: $group,
            summary: $summary,
            handler: $handler,
            subcommands: $subs,
            busy: None,
            may_write: None,
        }
    };
}

/// A family's `pick` and `pick_mut`: select its value type for
/// [`Ctx::read_as`] and [`Ctx::write_as`] (another type is WRONGTYPE).
macro_rules! value_pickers {
    ($arm:ident, $ty:ty) => {
        fn pick(v: $crate::store::ValueRef<'_>) -> Option<&$ty> {
            match v {
                $crate::store::ValueRef::$arm(x) => Some(x),
                _ => None,
            }
        }

        fn pick_mut(v: $crate::store::ValueMut<'_>) -> Option<&mut $ty> {
            match v {
                $crate::store::ValueMut::$arm(x) => Some(x),
                _ => None,
            }
        }
    };
}

/// A subcommand row (`client|list`): name, arity, flags, explicit ACL
/// categories, handler.
macro_rules! subcommand {
    ($group:literal, $name:literal, $arity:expr, $flags:expr, $acl:expr, $handler:expr) => {
        command!($group, $name, $arity, $flags, $acl, (0, 0, 0), "", $handler)
    };
}

pub mod bitmap;
pub mod busy;
pub mod cluster;
pub mod control;
pub mod functions;
pub mod hash;
pub mod keys;
pub mod keyspecs;
pub mod list;
pub mod memory;
pub mod observe;
pub mod pubsub;
pub mod scan;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod stream;
pub mod strings;
pub mod tx;
pub mod zset;

/// Everything a handler may touch while it runs.
pub struct Ctx<'a> {
    pub dbs: &'a mut [Db],
    pub client: &'a mut ClientState,
    pub server: &'a mut ServerState,
    /// The Lua VM; `None` while a script runs (scripts cannot nest).
    pub scripting: Option<&'a mut crate::lua::Scripting>,
    /// The command's time, unix ms: read once so a command sees one instant.
    pub now: u64,
    /// Who runs the command: only a client's own request may block
    /// ([`crate::exec::Caller::may_block`]); XREAD refuses BLOCK from a
    /// script, MONITOR shows a script's commands as `lua`.
    pub caller: crate::exec::Caller,
}

impl Ctx<'_> {
    /// Inside MULTI/EXEC, a script or the control plane: blocking commands
    /// answer at once (Redis's `CLIENT_DENY_BLOCKING`; see
    /// [`crate::blocking::block`]).
    pub fn deny_blocking(&self) -> bool {
        !self.caller.may_block()
    }

    /// Run by a script's or function's `redis.call`.
    pub fn from_script(&self) -> bool {
        matches!(self.caller, crate::exec::Caller::Script { .. })
    }

    /// Counts `n` changes to the dataset (Redis's `server.dirty += n`):
    /// INFO's `rdb_changes_since_last_save`, and what makes [`crate::exec::call`]
    /// record the command's effect.
    #[inline]
    pub fn dirty(&mut self, n: u64) {
        self.server.dirty += n;
    }

    /// Whether effects are being recorded (someone reads the feed): a
    /// handler builds a rewritten effect only then.
    #[inline]
    pub fn propagating(&self) -> bool {
        self.server.effects.active()
    }

    /// The running command's effect is `build()` instead of its own
    /// arguments (Redis's `rewriteClientCommandVector`: EXPIRE as
    /// PEXPIREAT, SET EX as SET PXAT, INCRBYFLOAT as SET KEEPTTL). Built
    /// only while effects are recorded.
    #[inline]
    pub fn propagate_as(&mut self, build: impl FnOnce() -> Vec<Bytes>) {
        if self.server.effects.active() {
            self.server.effects.propagate_as(build());
        }
    }

    /// Adds the effect `build()` in the client's database before the running
    /// command's own (Redis's `alsoPropagate`: SPOP's SREMs, a blocking pop's
    /// plain pop). Built only while effects are recorded.
    #[inline]
    pub fn also_propagate(&mut self, build: impl FnOnce() -> Vec<Bytes>) {
        if self.server.effects.active() {
            let db = self.client.db;
            self.server.effects.also_propagate(db, build());
        }
    }

    /// The running command leaves no effect of its own (Redis's
    /// `preventCommandPropagation`): what it added with
    /// [`Ctx::also_propagate`] is its effect.
    #[inline]
    pub fn prevent_propagation(&mut self) {
        self.server.effects.prevent();
    }

    /// The running command leaves its effect though it changed nothing
    /// (Redis's `forceCommandPropagation`: PUBLISH, SCRIPT LOAD).
    #[inline]
    pub fn force_propagation(&mut self) {
        self.server.effects.force();
    }

    /// The client's selected database.
    pub fn db(&mut self) -> &mut Db {
        &mut self.dbs[self.client.db]
    }

    /// Emits a keyspace notification for `key` in the client's database (if
    /// `notify-keyspace-events` enables `class`), after any pending
    /// `expired` events so they keep Redis's order.
    pub fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        let db = self.client.db;
        self.notify_in(db, class, event, key);
    }

    /// [`Ctx::notify`] for a key in database `db` (COPY ... DB n).
    pub fn notify_in(&mut self, db: usize, class: u32, event: &str, key: &[u8]) {
        let flags = self.server.config.notify_keyspace_events;
        if flags == 0 {
            return;
        }
        self.flush_expired();
        for (channel, message) in crate::notify::messages(flags, class, event, key, db) {
            pubsub::publish_to(self.server, Some(self.client), &channel, &message, self.now);
        }
    }

    /// Publishes `expired` events for keys removed by expiry so far, and
    /// records their DELs before the running command's effect.
    pub fn flush_expired(&mut self) {
        pubsub::publish_expired(self.dbs, self.server, Some(self.client), self.now, false);
    }

    /// Looks up a string value to read it: `Ok(None)` when absent,
    /// `Err(WRONGTYPE)` when the key holds another type. Counts a keyspace
    /// hit or miss, as Redis's `lookupKeyRead` does.
    pub fn get_str(&mut self, key: &[u8]) -> Result<Option<Bytes>, Reply> {
        let now = self.now;
        let found = self.db().lookup_str(key, now);
        self.count_lookups(found.is_some() as u64, found.is_none() as u64);
        string_or_wrongtype(found)
    }

    /// Looks a key up for a command that reads it, counting a keyspace hit
    /// (any type) or miss, as Redis's `lookupKeyRead` does. Commands that
    /// change a key look it up through [`Ctx::db`], which counts nothing.
    pub fn lookup_read(&mut self, key: &[u8]) -> Option<EntryRef<'_>> {
        let found = self.dbs[self.client.db].lookup(key, self.now);
        let stats = &mut self.server.stats;
        if found.is_some() {
            stats.keyspace_hits += 1;
        } else {
            stats.keyspace_misses += 1;
        }
        found
    }

    /// Looks up a collection to read it, as [`Ctx::lookup_read`]: `pick`
    /// selects the type the command works on; another type is WRONGTYPE.
    pub fn read_as<T: ?Sized>(
        &mut self,
        key: &[u8],
        pick: for<'v> fn(ValueRef<'v>) -> Option<&'v T>,
    ) -> Result<Option<&T>, Reply> {
        match self.lookup_read(key) {
            None => Ok(None),
            Some(entry) => pick(entry.value)
                .map(Some)
                .ok_or_else(|| errors::err(errors::WRONGTYPE)),
        }
    }

    /// Looks up a collection to change it in place (no hit or miss counted,
    /// as Redis's `lookupKeyWrite`); another type is WRONGTYPE. The caller
    /// marks the key changed with [`Db::touch`] when it changed it.
    pub fn write_as<T: ?Sized>(
        &mut self,
        key: &[u8],
        pick: for<'v> fn(ValueMut<'v>) -> Option<&'v mut T>,
    ) -> Result<Option<&mut T>, Reply> {
        let now = self.now;
        match self.db().lookup_mut(key, now) {
            None => Ok(None),
            Some(value) => pick(value).map(Some).ok_or_else(|| errors::err(errors::WRONGTYPE)),
        }
    }

    /// [`Ctx::write_as`] for a command that creates its collection: an
    /// absent key first gets `make()`.
    pub fn write_or_insert<T: ?Sized>(
        &mut self,
        key: &[u8],
        pick: for<'v> fn(ValueMut<'v>) -> Option<&'v mut T>,
        make: impl FnOnce() -> Value,
    ) -> Result<&mut T, Reply> {
        let now = self.now;
        pick(self.db().lookup_or_insert_mut(key, now, make)).ok_or_else(|| errors::err(errors::WRONGTYPE))
    }

    /// Deletes `key` if it holds a collection that became empty (Redis
    /// never keeps one), with the `del` event.
    pub fn delete_if_empty(&mut self, key: &[u8]) {
        let now = self.now;
        if self
            .db()
            .lookup(key, now)
            .is_some_and(|e| e.value.is_empty_collection())
        {
            self.db().remove(key);
            self.notify(crate::notify::GENERIC, "del", key);
        }
    }

    /// Adds to the keyspace hit and miss counters (INFO stats).
    pub fn count_lookups(&mut self, hits: u64, misses: u64) {
        self.server.stats.keyspace_hits += hits;
        self.server.stats.keyspace_misses += misses;
    }

    /// Looks up a string value that the command is about to change (APPEND,
    /// SETRANGE, INCRBYFLOAT): like [`Ctx::get_str`], but no keyspace hit or
    /// miss is counted, as with Redis's `lookupKeyWrite`.
    pub fn get_str_for_write(&mut self, key: &[u8]) -> Result<Option<Bytes>, Reply> {
        let now = self.now;
        string_or_wrongtype(self.db().lookup_str(key, now))
    }
}

/// [`Db::lookup_str`]'s answer as a command sees it: WRONGTYPE for a key of
/// another type.
fn string_or_wrongtype(found: Option<Result<Bytes, ()>>) -> Result<Option<Bytes>, Reply> {
    match found {
        None => Ok(None),
        Some(Ok(s)) => Ok(Some(s)),
        Some(Err(())) => Err(errors::err(errors::WRONGTYPE)),
    }
}

/// A command handler.
pub type Handler = fn(&mut Ctx, &[Bytes]) -> Reply;

/// Command flags: Redis's, in the order `COMMAND INFO` lists them, then
/// coordis's own (never shown) where Redis compares command procedures.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    /// Refused inside scripts (`This Redis command is not allowed from script`).
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    /// O(1) or O(log n).
    pub const FAST: u32 = 1 << 11;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 12;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 13;
    /// Refused inside MULTI (`Command not allowed inside a transaction`).
    pub const NO_MULTI: u32 = 1 << 14;
    pub const MOVABLEKEYS: u32 = 1 << 15;
    /// Served while a script is busy; everything else gets `-BUSY`.
    pub const ALLOW_BUSY: u32 = 1 << 16;
    /// Refused while a replica loads its data asynchronously; coordis has
    /// no replication, so only COMMAND INFO shows it.
    pub const NO_ASYNC_LOADING: u32 = 1 << 17;
    /// coordis's own: runs at once inside MULTI instead of being queued
    /// (Redis: EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
    pub const TX_CONTROL: u32 = 1 << 24;
    /// coordis's own: allowed on a RESP2 connection in pub/sub context
    /// (Redis: (P)SUBSCRIBE, (P)UNSUBSCRIBE, PING, QUIT, RESET).
    pub const SUBSCRIBED_OK: u32 = 1 << 25;
    /// Redis's `may_replicate` (not shown by COMMAND INFO): a command that
    /// may write though not flagged `write` (EVAL, EVALSHA); CLIENT PAUSE
    /// WRITE holds it.
    pub const MAY_REPLICATE: u32 = 1 << 26;
    /// Redis's `protected` (not shown by COMMAND INFO): refused, before any
    /// other check and before MULTI queues it, unless its setting lets the
    /// client in (DEBUG: `enable-debug-command`; MODULE LOAD/LOADEX/UNLOAD:
    /// `enable-module-command`). See [`protected_refusal`].
    pub const PROTECTED: u32 = 1 << 27;
    /// coordis's own: which setting lets a [`PROTECTED`] command in
    /// (`enable-debug-command`, `enable-module-command`,
    /// `enable-test-commands`; see [`crate::exec::Guards`]).
    pub const GUARD_DEBUG: u32 = 1 << 28;
    pub const GUARD_MODULE: u32 = 1 << 29;
    pub const GUARD_TEST: u32 = 1 << 30;
    /// coordis's own: EXEC (its refusal ends the transaction; CLIENT PAUSE
    /// WRITE looks at what it would run).
    pub const EXEC: u32 = 1 << 31;
    /// coordis's own (Redis compares procedures): the commands that run
    /// others (EXEC, EVAL, FCALL) leave no effect of their own; the
    /// commands they ran carry the effects.
    pub const NO_PROPAGATE: u32 = 1 << 23;
    /// Redis's `touches_arbitrary_keys` (not shown by COMMAND INFO): SCAN
    /// and RANDOMKEY, whose effects (expired keys' DELs) are not wrapped
    /// in MULTI/EXEC.
    pub const TOUCHES_ARBITRARY_KEYS: u32 = 1 << 22;

    /// The flags `COMMAND INFO` shows, in its order.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLEKEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// ACL categories, in the order `COMMAND INFO` lists them. A row names only
/// those Redis does not derive from its flags (see [`CommandSpec::categories`]).
pub mod acl {
    pub const KEYSPACE: u32 = 1 << 0;
    pub const READ: u32 = 1 << 1;
    pub const WRITE: u32 = 1 << 2;
    pub const SET: u32 = 1 << 3;
    pub const SORTEDSET: u32 = 1 << 4;
    pub const LIST: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const STRING: u32 = 1 << 7;
    pub const BITMAP: u32 = 1 << 8;
    pub const HYPERLOGLOG: u32 = 1 << 9;
    pub const GEO: u32 = 1 << 10;
    pub const STREAM: u32 = 1 << 11;
    pub const PUBSUB: u32 = 1 << 12;
    pub const ADMIN: u32 = 1 << 13;
    pub const FAST: u32 = 1 << 14;
    pub const SLOW: u32 = 1 << 15;
    pub const BLOCKING: u32 = 1 << 16;
    pub const DANGEROUS: u32 = 1 << 17;
    pub const CONNECTION: u32 = 1 << 18;
    pub const TRANSACTION: u32 = 1 << 19;
    pub const SCRIPTING: u32 = 1 << 20;

    pub const NAMES: &[(u32, &str)] = &[
        (KEYSPACE, "@keyspace"),
        (READ, "@read"),
        (WRITE, "@write"),
        (SET, "@set"),
        (SORTEDSET, "@sortedset"),
        (LIST, "@list"),
        (HASH, "@hash"),
        (STRING, "@string"),
        (BITMAP, "@bitmap"),
        (HYPERLOGLOG, "@hyperloglog"),
        (GEO, "@geo"),
        (STREAM, "@stream"),
        (PUBSUB, "@pubsub"),
        (ADMIN, "@admin"),
        (FAST, "@fast"),
        (SLOW, "@slow"),
        (BLOCKING, "@blocking"),
        (DANGEROUS, "@dangerous"),
        (CONNECTION, "@connection"),
        (TRANSACTION, "@transaction"),
        (SCRIPTING, "@scripting"),
    ];
}

/// One row of the command table, with what COMMAND INFO reports.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lower-case name; `parent|sub` for a subcommand (`client|list`), as
    /// Redis 7 names them in errors, COMMAND INFO and CLIENT LIST.
    pub name: &'static str,
    /// Redis arity: N means exactly N arguments including the name, -N at least N.
    pub arity: i32,
    /// [`flags`]: Redis's and coordis's own.
    pub flags: u32,
    /// [`acl`] categories beyond those the flags imply.
    pub acl: u32,
    /// Key positions for COMMAND INFO: first, last (-1: last argument), step.
    pub keys: (i32, i32, i32),
    /// The documentation group (COMMAND DOCS).
    pub group: &'static str,
    pub summary: &'static str,
    pub handler: Handler,
    /// A container's subcommands (empty for other commands).
    pub subcommands: &'static [CommandSpec],
    /// How an `allow_busy` command is answered while a script is busy,
    /// without the keyspace ([`busy`]); `None`: it waits for the script.
    pub busy: Option<busy::Handler>,
    /// For a [`flags::MAY_REPLICATE`] command that runs a script or a
    /// function: whether these arguments may write, from the script's own
    /// flags (Redis's `evalGetCommandFlags`, `fcallGetCommandFlags`);
    /// `None`: it may.
    pub may_write: Option<fn(&crate::lua::Scripting, &[Bytes]) -> bool>,
}

impl CommandSpec {
    /// The row with a handler for when a script is busy.
    pub const fn while_busy(self, handler: busy::Handler) -> CommandSpec {
        CommandSpec {
            busy: Some(handler),
            ..self
        }
    }

    /// The row of a command that may write only as its script says.
    pub const fn may_write_if(self, may_write: fn(&crate::lua::Scripting, &[Bytes]) -> bool) -> CommandSpec {
        CommandSpec {
            may_write: Some(may_write),
            ..self
        }
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// The ACL categories COMMAND INFO shows: the row's own plus those
    /// Redis derives from the flags (`setImplicitACLCategories`).
    pub fn categories(&self) -> impl Iterator<Item = &'static str> {
        let mut cats = self.acl;
        let implied = [
            (flags::WRITE, acl::WRITE),
            (flags::ADMIN, acl::ADMIN | acl::DANGEROUS),
            (flags::PUBSUB, acl::PUBSUB),
            (flags::FAST, acl::FAST),
            (flags::BLOCKING, acl::BLOCKING),
        ];
        for (flag, cat) in implied {
            if self.has(flag) {
                cats |= cat;
            }
        }
        if self.has(flags::READONLY) && cats & acl::SCRIPTING == 0 {
            cats |= acl::READ;
        }
        if !self.has(flags::FAST) {
            cats |= acl::SLOW;
        }
        acl::NAMES
            .iter()
            .filter(move |(bit, _)| cats & bit != 0)
            .map(|(_, name)| *name)
    }

    /// The flag names COMMAND INFO shows.
    pub fn flag_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        flags::NAMES
            .iter()
            .filter(|(bit, _)| self.has(*bit))
            .map(|(_, name)| *name)
    }

    /// The subcommand named `sub` (any case).
    pub fn subcommand(&self, sub: &[u8]) -> Option<&'static CommandSpec> {
        self.subcommands.iter().find(|s| {
            let (_, short) = s.name.split_once('|').unwrap_or(("", s.name));
            short.as_bytes().eq_ignore_ascii_case(sub)
        })
    }
}

/// Every command, from each family's table.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    strings::COMMANDS
        .iter()
        .chain(keys::COMMANDS.iter())
        .chain(zset::COMMANDS.iter())
        .chain(hash::COMMANDS.iter())
        .chain(list::COMMANDS.iter())
        .chain(set::COMMANDS.iter())
        .chain(bitmap::COMMANDS.iter())
        .chain(stream::COMMANDS.iter())
        .chain(sort::COMMANDS.iter())
        .chain(scripting::COMMANDS.iter())
        .chain(functions::COMMANDS.iter())
        .chain(tx::COMMANDS.iter())
        .chain(pubsub::COMMANDS.iter())
        .chain(server::COMMANDS.iter())
        .chain(observe::COMMANDS.iter())
        .chain(memory::COMMANDS.iter())
        .chain(cluster::COMMANDS.iter())
        .chain(control::COMMANDS.iter())
        .chain(TEST_COMMANDS.iter())
}

/// Commands that exist only in coordis's own unit tests.
#[cfg(test)]
#[rustfmt::skip]
static TEST_COMMANDS: &[CommandSpec] = &[
    command!("server", "coordis-test-panic", 1, 0, 0, (0, 0, 0), "Panics (tests that a panic is contained)", |_, _| {
        panic!("coordis-test-panic")
    }),
];
#[cfg(not(test))]
static TEST_COMMANDS: &[CommandSpec] = &[];

/// Finds a command by name, case-insensitively (`a|b` finds a subcommand,
/// as COMMAND INFO names them).
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    match name.iter().position(|&c| c == b'|') {
        Some(bar) => lookup_top(&name[..bar])?.subcommand(&name[bar + 1..]),
        None => lookup_top(name),
    }
}

/// Finds a top-level command by name, case-insensitively: the lookup every
/// request makes.
#[inline]
fn lookup_top(name: &[u8]) -> Option<&'static CommandSpec> {
    // A fixed seed is fine here: the keys are our own command names.
    type Table = HashMap<&'static [u8], &'static CommandSpec, foldhash::fast::FixedState>;
    static TABLE: OnceLock<Table> = OnceLock::new();
    let table = TABLE.get_or_init(|| all().map(|c| (c.name.as_bytes(), c)).collect());
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    table.get(&*lower).copied()
}

/// Why a request names no runnable command ([`resolve`]).
pub enum Unresolved {
    /// No such command, or no such subcommand of a container.
    Unknown(Reply),
    /// The command (or subcommand) exists but the argument count is wrong.
    Arity(&'static CommandSpec),
}

/// The row a request runs: the command, or for a container called with a
/// subcommand, the subcommand's row; checked for arity. As Redis's
/// `lookupCommand` and arity check.
pub fn resolve(args: &[Bytes]) -> Result<&'static CommandSpec, Unresolved> {
    let Some(base) = lookup_top(&args[0]) else {
        return Err(Unresolved::Unknown(errors::unknown_command(args)));
    };
    let spec = if !base.subcommands.is_empty() && args.len() >= 2 {
        match base.subcommand(&args[1]) {
            Some(sub) => sub,
            None => {
                let parent = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
                return Err(Unresolved::Unknown(errors::unknown_subcommand(&args[1], &parent)));
            }
        }
    } else {
        base
    };
    if spec.arity_ok(args.len()) {
        Ok(spec)
    } else {
        Err(Unresolved::Arity(spec))
    }
}

/// The handler of a container row (CLIENT, CONFIG, ...): never reached,
/// since [`resolve`] runs a subcommand's row and the container's arity
/// needs one.
fn container(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    errors::wrong_args(&String::from_utf8_lossy(&args[0]).to_ascii_lowercase())
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
    if spec.has(flags::MOVABLEKEYS) {
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

/// Argument helpers shared by the families.
pub mod args {
    use super::*;
    use crate::store::num;

    /// Case-insensitive comparison of an argument with an ASCII keyword.
    pub fn is(arg: &[u8], keyword: &str) -> bool {
        arg.eq_ignore_ascii_case(keyword.as_bytes())
    }

    /// An integer argument, or Redis's "not an integer" error.
    pub fn int(arg: &[u8]) -> Result<i64, Reply> {
        num::parse_i64(arg).ok_or_else(|| errors::err(errors::NOT_INTEGER))
    }

    /// The `numkeys key [key ...] <where> [COUNT count]` tail of the *MPOP
    /// family from `args[first..]`, with Redis's errors in its order: the
    /// keys' range in `args`, the end to pop from (`end` reads the word;
    /// LEFT|RIGHT, MIN|MAX) and the count.
    pub fn mpop<W>(
        args: &[Bytes],
        first: usize,
        end: impl Fn(&[u8]) -> Option<W>,
    ) -> Result<(std::ops::Range<usize>, W, usize), Reply> {
        let numkeys = match num::parse_i64(&args[first]) {
            Some(n) if n > 0 => n as u64,
            _ => return Err(errors::err(errors::NUMKEYS_NOT_POSITIVE)),
        };
        if numkeys >= (args.len() - first - 1) as u64 {
            return Err(errors::err(errors::SYNTAX));
        }
        let keys = first + 1..first + 1 + numkeys as usize;
        let end = end(&args[keys.end]).ok_or_else(|| errors::err(errors::SYNTAX))?;
        let count = match &args[keys.end + 1..] {
            [] => 1,
            [word, n] if is(word, "count") => match num::parse_i64(n) {
                Some(n) if n > 0 => n as usize,
                _ => return Err(errors::err(errors::COUNT_NOT_POSITIVE)),
            },
            _ => return Err(errors::err(errors::SYNTAX)),
        };
        Ok((keys, end, count))
    }

    /// An integer as an argument of an effect (a deadline, a count).
    pub fn int_arg(n: impl itoa::Integer) -> Bytes {
        Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
    }

    /// A database index argument (SELECT, SWAPDB, COPY ... DB).
    /// A database index as Redis reads one (`getIntFromObjectOrReply`): an
    /// integer, within a C int, then within the databases.
    pub fn db_index(arg: &[u8], databases: usize) -> Result<usize, Reply> {
        let n = int(arg)?;
        if i32::try_from(n).is_err() {
            return Err(errors::err(errors::NOT_C_INT));
        }
        if n < 0 || n as u64 >= databases as u64 {
            return Err(errors::err(errors::DB_OUT_OF_RANGE));
        }
        Ok(n as usize)
    }
}

/// Unwraps a `Result<T, Reply>` inside a handler, returning the error reply.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(reply) => return reply,
        }
    };
}
pub(crate) use tri;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        let mut seen = std::collections::HashSet::new();
        for c in all() {
            assert!(seen.insert(c.name), "duplicate {}", c.name);
            assert_eq!(c.name, c.name.to_ascii_lowercase());
            assert!(c.name.len() <= 32);
            assert_ne!(c.arity, 0);
            for sub in c.subcommands {
                assert_eq!(sub.name.split_once('|').map(|(p, _)| p), Some(c.name));
                assert!(sub.arity.abs() >= 2, "{}", sub.name);
            }
        }
        assert!(lookup(b"GeT").is_some());
        assert!(lookup(b"nosuch").is_none());
        assert_eq!(lookup(b"CLIENT|List").map(|c| c.name), Some("client|list"));
    }
}
