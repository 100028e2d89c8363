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

pub(crate) mod args;
pub(crate) mod bitmap;

pub(crate) mod cluster;
pub(crate) mod coordis;
mod ctx;
pub(crate) mod functions;
pub(crate) mod hash;
pub(crate) mod keys;
pub(crate) mod keyspecs;
pub(crate) mod list;
pub(crate) mod memory;
pub(crate) mod observe;
pub(crate) mod pubsub;
pub(crate) mod scan;
pub(crate) mod scripting;
pub(crate) mod server;
pub(crate) mod set;
pub(crate) mod sort;
mod spec;
pub(crate) mod stream;
pub(crate) mod strings;
pub(crate) mod tx;
pub(crate) mod zset;

pub(crate) use ctx::Ctx;
pub(crate) use spec::container;
pub(crate) use spec::{acl, lookup, resolve, Unresolved};
pub use spec::{all, flags, CommandSpec};

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
