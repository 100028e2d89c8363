//! Commands: the table of every command coordis knows, and dispatch.
//!
//! One file per command family. A handler receives the whole argument vector
//! (`args[0]` is the command name) after the table has checked its arity, parses
//! and validates its options (producing Redis's exact errors), then applies
//! them to the keyspace and returns a [`Reply`]. Handlers do no I/O and never
//! await: the same handler serves a socket, and later a script or a
//! transaction.

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;

use crate::clients::ClientState;
use crate::engine::ServerState;
use crate::errors;
use crate::protocol::Reply;
use crate::store::{Db, EntryRef};

/// Builds one [`CommandSpec`] row: documentation group, name, arity, flags,
/// key positions, summary, handler. Each family wraps it as `spec!` with its group.
macro_rules! command {
    ($group:literal, $name:literal, $arity:expr, $flags:expr, $keys:expr, $summary:literal, $handler:expr) => {
        $crate::cmd::CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            keys: $keys,
            group: $group,
            summary: $summary,
            handler: $handler,
        }
    };
}

pub mod keys;
pub mod pubsub;
pub mod scripting;
pub mod server;
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
}

impl Ctx<'_> {
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

    /// Publishes `expired` events for keys removed by expiry so far.
    pub fn flush_expired(&mut self) {
        let flags = self.server.config.notify_keyspace_events;
        pubsub::publish_expired(self.dbs, self.server, Some(self.client), flags, self.now);
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

/// Command flags that change how dispatch treats a command.
pub mod flags {
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1;
    /// Modifies the keyspace (COMMAND INFO `write`).
    pub const WRITE: u32 = 2;
    /// Only reads (COMMAND INFO `readonly`).
    pub const READONLY: u32 = 4;
    /// O(1) or O(log n) (COMMAND INFO `fast`).
    pub const FAST: u32 = 8;
    /// Refused inside scripts (`This Redis command is not allowed from script`).
    pub const NOSCRIPT: u32 = 16;
}

/// One row of the command table, with what COMMAND INFO reports.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lower-case name (`client` for the parent of `client|list`).
    pub name: &'static str,
    /// Redis arity: N means exactly N arguments including the name, -N at least N.
    pub arity: i32,
    pub flags: u32,
    /// Key positions for COMMAND INFO: first, last (-1: last argument), step.
    pub keys: (i32, i32, i32),
    /// The documentation group (COMMAND DOCS).
    pub group: &'static str,
    pub summary: &'static str,
    pub handler: Handler,
}

impl CommandSpec {
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }
}

/// Every command, from each family's table.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    strings::COMMANDS
        .iter()
        .chain(keys::COMMANDS.iter())
        .chain(zset::COMMANDS.iter())
        .chain(scripting::COMMANDS.iter())
        .chain(tx::COMMANDS.iter())
        .chain(pubsub::COMMANDS.iter())
        .chain(server::COMMANDS.iter())
}

/// Finds a command by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
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

/// Runs a command for a script's `redis.call`: Redis's script-specific
/// checks, then the same handler a socket reaches. The flag says whether a
/// write command ran (a script that wrote cannot be killed).
pub fn dispatch_from_script(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> (Reply, bool) {
    let Some(spec) = lookup(&args[0]) else {
        return (errors::err("ERR Unknown Redis command called from script"), false);
    };
    if !spec.arity_ok(args.len()) {
        return (
            errors::err("ERR Wrong number of args calling Redis command from script"),
            false,
        );
    }
    if spec.flags & flags::NOSCRIPT != 0 {
        return (errors::err("ERR This Redis command is not allowed from script"), false);
    }
    let write = spec.flags & flags::WRITE != 0;
    if read_only && write {
        return (
            errors::err("ERR Write commands are not allowed from read-only scripts."),
            false,
        );
    }
    ctx.server.stats.total_commands_processed += 1;
    let reply = (spec.handler)(ctx, args);
    let wrote = write && !reply.is_error();
    (reply, wrote)
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

    /// A database index argument (SELECT, SWAPDB, COPY ... DB).
    pub fn db_index(arg: &[u8], databases: usize) -> Result<usize, Reply> {
        let n = int(arg)?;
        if n < 0 || n as u64 >= databases as u64 {
            return Err(errors::err(errors::DB_OUT_OF_RANGE));
        }
        Ok(n as usize)
    }
}

/// Unwraps a `Result<T, Reply>` inside a handler, returning the error reply.
#[macro_export]
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(reply) => return reply,
        }
    };
}

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
        }
        assert!(lookup(b"GeT").is_some());
        assert!(lookup(b"nosuch").is_none());
    }
}
