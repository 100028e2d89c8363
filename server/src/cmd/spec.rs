//! The command table's schema: a row ([`CommandSpec`]) with Redis 7.0.15's
//! arity, flags and ACL categories, the flag and category bits, every row
//! of every family ([`all`]), and the lookup a request makes ([`resolve`]).

use std::sync::OnceLock;

use bytes::Bytes;

use super::*;
use crate::errors;
use crate::protocol::Reply;

/// A command handler.
pub(super) type Handler = fn(&mut Ctx, &[Bytes]) -> Reply;

/// Command flags: Redis's, in the order `COMMAND INFO` lists them, then
/// coordis's own (never shown) where Redis compares command procedures.
pub mod flags {
    /// Changes data (`@write`); refused to read-only scripts, held by CLIENT PAUSE WRITE.
    pub const WRITE: u32 = 1 << 0;
    /// Only reads data (`@read`, unless the command is `@scripting`).
    pub const READONLY: u32 = 1 << 1;
    /// May grow memory: refused while used memory is over `maxmemory` and
    /// eviction cannot bring it under (`-OOM`).
    pub const DENYOOM: u32 = 1 << 2;
    /// Administrative (`@admin`, `@dangerous`); MONITOR does not show it.
    pub const ADMIN: u32 = 1 << 3;
    /// Pub/sub (`@pubsub`).
    pub const PUBSUB: u32 = 1 << 4;
    /// Refused inside scripts (`This Redis command is not allowed from script`).
    pub const NOSCRIPT: u32 = 1 << 5;
    /// May block the client (`@blocking`).
    pub const BLOCKING: u32 = 1 << 6;
    /// Allowed while Redis loads its data (coordis never loads: only shown).
    pub const LOADING: u32 = 1 << 7;
    /// Allowed on a replica whose link is down with
    /// `replica-serve-stale-data no` (everything else gets `-MASTERDOWN`).
    pub const STALE: u32 = 1 << 8;
    /// Not shown to MONITOR clients.
    pub const SKIP_MONITOR: u32 = 1 << 9;
    /// Never logged by SLOWLOG.
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    /// O(1) or O(log n).
    pub const FAST: u32 = 1 << 11;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 12;
    /// May have no key at all (COMMAND GETKEYS answers an empty array, not an error).
    pub const NO_MANDATORY_KEYS: u32 = 1 << 13;
    /// Refused inside MULTI (`Command not allowed inside a transaction`).
    pub const NO_MULTI: u32 = 1 << 14;
    /// Key positions depend on the arguments (COMMAND GETKEYS asks the key specs).
    pub const MOVABLEKEYS: u32 = 1 << 15;
    /// Served while a script is busy; everything else gets `-BUSY`.
    pub const ALLOW_BUSY: u32 = 1 << 16;
    /// Refused while a replica loads its data asynchronously; coordis has
    /// no replication, so only COMMAND INFO shows it.
    pub const NO_ASYNC_LOADING: u32 = 1 << 17;
    /// Redis's `asking`: served in an importing slot without ASKING first
    /// (RESTORE-ASKING).
    pub const ASKING: u32 = 1 << 18;
    /// coordis's own (Redis compares `migrateCommand`): moves keys between
    /// nodes, so it is served here whatever a migrating or importing slot's
    /// keys are (MIGRATE).
    pub const MIGRATES_KEYS: u32 = 1 << 19;
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
    /// `enable-module-command`). The settings are in `exec::Guards`.
    pub const PROTECTED: u32 = 1 << 27;
    /// coordis's own: which setting lets a [`PROTECTED`] command in
    /// (`enable-debug-command`, `enable-module-command`,
    /// `enable-test-commands`; see `exec::Guards`).
    pub const GUARD_DEBUG: u32 = 1 << 28;
    /// See [`GUARD_DEBUG`]: `enable-module-command`.
    pub const GUARD_MODULE: u32 = 1 << 29;
    /// See [`GUARD_DEBUG`]: `enable-test-commands`.
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
    /// coordis's own (Redis compares `pingCommand`): refused with
    /// `-MISCONF` after a failed background save though it writes nothing.
    pub const DISK_ERROR_REFUSED: u32 = 1 << 21;
    /// coordis's own (Redis compares procedures): inside MULTI over
    /// `maxmemory`, everything else is refused with `-OOM` (queuing grows
    /// memory); EXEC, DISCARD, QUIT and RESET are not (an EXEC is if its
    /// queue holds a `denyoom` command).
    pub const OOM_OK_IN_MULTI: u32 = 1 << 20;

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
        (ASKING, "asking"),
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
pub(crate) mod acl {
    pub(crate) const KEYSPACE: u32 = 1 << 0;
    pub(crate) const READ: u32 = 1 << 1;
    pub(crate) const WRITE: u32 = 1 << 2;
    pub(crate) const SET: u32 = 1 << 3;
    pub(crate) const SORTEDSET: u32 = 1 << 4;
    pub(crate) const LIST: u32 = 1 << 5;
    pub(crate) const HASH: u32 = 1 << 6;
    pub(crate) const STRING: u32 = 1 << 7;
    pub(crate) const BITMAP: u32 = 1 << 8;
    pub(crate) const HYPERLOGLOG: u32 = 1 << 9;
    pub(crate) const GEO: u32 = 1 << 10;
    pub(crate) const STREAM: u32 = 1 << 11;
    pub(crate) const PUBSUB: u32 = 1 << 12;
    pub(crate) const ADMIN: u32 = 1 << 13;
    pub(crate) const FAST: u32 = 1 << 14;
    pub(crate) const SLOW: u32 = 1 << 15;
    pub(crate) const BLOCKING: u32 = 1 << 16;
    pub(crate) const DANGEROUS: u32 = 1 << 17;
    pub(crate) const CONNECTION: u32 = 1 << 18;
    pub(crate) const TRANSACTION: u32 = 1 << 19;
    pub(crate) const SCRIPTING: u32 = 1 << 20;

    pub(crate) const NAMES: &[(u32, &str)] = &[
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
    /// ACL categories (the `acl` bits) beyond those the flags imply.
    pub acl: u32,
    /// Key positions for COMMAND INFO and for finding the keys of a
    /// command without a finder of its own: first, last (-1: last
    /// argument), step. Derived from the key specs, as Redis derives its
    /// legacy range (`keyspecs::legacy_range`).
    pub keys: (i32, i32, i32),
    /// Redis 7.0.15's key specs of this row ([`keyspecs`], by name when the
    /// table is compiled): COMMAND INFO, COMMAND GETKEYS and the ACL key
    /// check read them.
    pub(crate) key_specs: &'static [keyspecs::KeySpec],
    /// Redis 7.0.15's command tips of this row (COMMAND INFO).
    pub(crate) tips: &'static [&'static str],
    /// The command's own key finder (Redis's `getkeys_proc`), for keys its
    /// specs cannot always tell; `None`: the specs and the range do.
    pub(crate) getkeys: Option<keyspecs::KeyFinder>,
    /// Which arguments the slow log and MONITOR show as `(redacted)`
    /// (passwords: the arguments Redis's command redacts with
    /// `redactClientCommandArgument`); `None`: none. Read through
    /// [`CommandSpec::hides_arg`].
    pub(crate) redact: Option<Redact>,
    /// The documentation group (COMMAND DOCS).
    pub group: &'static str,
    /// One-line description (COMMAND DOCS `summary`).
    pub summary: &'static str,
    /// What runs the command.
    pub handler: Handler,
    /// A container's subcommands (empty for other commands).
    pub subcommands: &'static [CommandSpec],
    /// How an `allow_busy` command is answered while a script is busy,
    /// without the keyspace (`exec::busy`); `None`: the busy script's hook
    /// runs it on the engine, as any request.
    pub busy: Option<crate::exec::busy::Handler>,
    /// For a command that runs a script or a function: whether these
    /// arguments are refused under OOM as a [`flags::DENYOOM`] command is
    /// (Redis's `scriptFlagsToCmdFlags`: a shebang script or a function
    /// without `allow-oom` or `no-writes`); `None`: they are not.
    pub deny_oom: Option<fn(&crate::lua::Scripting, &[Bytes]) -> bool>,
    /// For a command that runs a script or a function: the flags its
    /// script declared (a shebang, a function's flags), which replace the
    /// row's `write` and `stale` in admission's replica checks (Redis's
    /// `scriptFlagsToCmdFlags`) and say whether CLIENT PAUSE WRITE holds it
    /// (`evalGetCommandFlags`, `fcallGetCommandFlags`); `None` from the
    /// hook: nothing declared (an unknown script or function).
    pub declared: Option<DeclaredFlags>,
    /// Which arguments are pub/sub channels the ACL checks against a user's
    /// channel rules (Redis's `getChannelsFromCommand`, which names the
    /// publishing and subscribing commands; the unsubscribing ones are not
    /// checked); `None`: none.
    pub(crate) channels: Option<ChannelArgs>,
}

/// A row's channel arguments ([`CommandSpec::channels`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChannelArgs {
    /// The first channel argument.
    pub(crate) first: usize,
    /// The first argument after the last channel; `None`: every argument
    /// from `first` on is one.
    pub(crate) end: Option<usize>,
    /// The arguments are patterns (PSUBSCRIBE), matched literally against
    /// the user's channel rules rather than as channels against them.
    pub(crate) patterns: bool,
}

impl ChannelArgs {
    /// Every argument after the name is a channel (SUBSCRIBE, SSUBSCRIBE).
    pub(crate) const ALL: ChannelArgs = ChannelArgs {
        first: 1,
        end: None,
        patterns: false,
    };
    /// Every argument after the name is a pattern (PSUBSCRIBE).
    pub(crate) const PATTERNS: ChannelArgs = ChannelArgs {
        first: 1,
        end: None,
        patterns: true,
    };
    /// The first argument is the channel (PUBLISH, SPUBLISH).
    pub(crate) const FIRST: ChannelArgs = ChannelArgs {
        first: 1,
        end: Some(2),
        patterns: false,
    };
}

/// What the slow log and MONITOR show for a redacted argument (Redis's
/// `shared.redacted`).
pub(crate) const REDACTED: &[u8] = b"(redacted)";

/// A row's hook for [`CommandSpec::redact`]: whether argument `i` of
/// `args` is redacted.
pub(crate) type Redact = fn(args: &[Bytes], i: usize) -> bool;

/// A row's hook for [`CommandSpec::declared`].
pub(crate) type DeclaredFlags = fn(&crate::lua::Scripting, &[Bytes]) -> Option<Declared>;

/// What a script or function declared about itself, as admission reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    /// Not `no-writes`: it counts as a write command.
    pub writes: bool,
    /// Not `no-writes`, shebang or not: CLIENT PAUSE WRITE holds it (a
    /// script without a shebang may write; it is refused only when it does).
    pub may_write: bool,
    /// `allow-stale`: it runs on a replica serving no stale data.
    pub stale_ok: bool,
}

impl CommandSpec {
    /// The row with a handler for when a script is busy.
    pub const fn while_busy(self, handler: crate::exec::busy::Handler) -> CommandSpec {
        CommandSpec {
            busy: Some(handler),
            ..self
        }
    }

    /// The row of a command whose script declares its flags.
    pub const fn declared_by(self, declared: fn(&crate::lua::Scripting, &[Bytes]) -> Option<Declared>) -> CommandSpec {
        CommandSpec {
            declared: Some(declared),
            ..self
        }
    }

    /// The row of a command refused under OOM as its script says.
    pub const fn deny_oom_if(self, deny_oom: fn(&crate::lua::Scripting, &[Bytes]) -> bool) -> CommandSpec {
        CommandSpec {
            deny_oom: Some(deny_oom),
            ..self
        }
    }

    /// The row of a command with a key finder of its own.
    pub(crate) const fn keys_by(self, finder: keyspecs::KeyFinder) -> CommandSpec {
        CommandSpec {
            getkeys: Some(finder),
            ..self
        }
    }

    /// The row of a command with channel arguments the ACL checks.
    pub(crate) const fn channels(self, channels: ChannelArgs) -> CommandSpec {
        CommandSpec {
            channels: Some(channels),
            ..self
        }
    }

    /// The row of a command whose slow-log entries and MONITOR lines
    /// redact some arguments.
    pub(crate) const fn redacts(self, redact: Redact) -> CommandSpec {
        CommandSpec {
            redact: Some(redact),
            ..self
        }
    }

    /// Whether argument `i` of `args` is shown as [`REDACTED`].
    pub(crate) fn hides_arg(&self, args: &[Bytes], i: usize) -> bool {
        self.redact.is_some_and(|redacted| redacted(args, i))
    }

    /// Whether `argc` arguments (the name included) fit [`CommandSpec::arity`].
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    /// Whether any of the [`flags`] bits in `flag` is set.
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// The ACL categories COMMAND INFO shows: the row's own plus those
    /// Redis derives from the flags (`setImplicitACLCategories`).
    pub fn categories(&self) -> impl Iterator<Item = &'static str> {
        let cats = self.category_bits();
        acl::NAMES
            .iter()
            .filter(move |(bit, _)| cats & bit != 0)
            .map(|(_, name)| *name)
    }

    /// The `acl` bits of [`CommandSpec::categories`].
    pub(crate) fn category_bits(&self) -> u32 {
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
        cats
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
        .chain(migrate::COMMANDS.iter())
        .chain(zset::COMMANDS.iter())
        .chain(geo::COMMANDS.iter())
        .chain(hash::COMMANDS.iter())
        .chain(list::COMMANDS.iter())
        .chain(set::COMMANDS.iter())
        .chain(bitmap::COMMANDS.iter())
        .chain(hll::COMMANDS.iter())
        .chain(stream::COMMANDS.iter())
        .chain(sort::COMMANDS.iter())
        .chain(scripting::COMMANDS.iter())
        .chain(functions::COMMANDS.iter())
        .chain(tx::COMMANDS.iter())
        .chain(pubsub::COMMANDS.iter())
        .chain(server::COMMANDS.iter())
        .chain(replicaof::COMMANDS.iter())
        .chain(users::COMMANDS.iter())
        .chain(observe::COMMANDS.iter())
        .chain(memory::COMMANDS.iter())
        .chain(lolwut::COMMANDS.iter())
        .chain(cluster::COMMANDS.iter())
        .chain(coordis::COMMANDS.iter())
        .chain(coordis_cluster::COMMANDS.iter())
        .chain(TEST_COMMANDS.iter())
}

/// Commands that exist only in coordis's own unit tests.
#[cfg(test)]
#[rustfmt::skip]
static TEST_COMMANDS: &[CommandSpec] = &[
    command!("server", "coordis-test-panic", 1, 0, 0, "Panics (tests that a panic is contained)", |_, _| {
        panic!("coordis-test-panic")
    }),
];
#[cfg(not(test))]
static TEST_COMMANDS: &[CommandSpec] = &[];

/// Finds a command by name, case-insensitively (`a|b` finds a subcommand,
/// as COMMAND INFO names them).
pub(crate) fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    match name.iter().position(|&c| c == b'|') {
        Some(bar) => lookup_top(&name[..bar])?.subcommand(&name[bar + 1..]),
        None => lookup_top(name),
    }
}

/// Slots of [`lookup_top`]'s table: a power of two, at least four times the
/// number of top-level commands, so that a probe rarely goes past its slot.
const LOOKUP_SLOTS: usize = 1024;

/// A case-blind hash of a command name (FNV-1a over the bytes with the
/// ASCII case bit set): no lowercased copy is made, and names that differ
/// only in case hash alike.
#[inline]
fn name_hash(name: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h = (h ^ u64::from(b | 0x20)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    // The high bits are the well-mixed ones.
    (h >> 40) as usize
}

/// Finds a top-level command by name, case-insensitively: the lookup every
/// request makes. An open-addressed table of the rows, probed linearly,
/// with the name compared case-blind in place (a hash map keyed by the
/// lowercased name cost a copy, a general hash and a second compare:
/// about 180 instructions for GET, now a fifth of that).
#[inline]
pub(super) fn lookup_top(name: &[u8]) -> Option<&'static CommandSpec> {
    static TABLE: OnceLock<Box<[Option<&'static CommandSpec>]>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = vec![None; LOOKUP_SLOTS].into_boxed_slice();
        let mut rows = 0;
        for spec in all() {
            rows += 1;
            let mut slot = name_hash(spec.name.as_bytes()) & (LOOKUP_SLOTS - 1);
            while table[slot].is_some() {
                slot = (slot + 1) & (LOOKUP_SLOTS - 1);
            }
            table[slot] = Some(spec);
        }
        assert!(rows * 4 <= LOOKUP_SLOTS, "{rows} commands: grow LOOKUP_SLOTS");
        table
    });
    let mut slot = name_hash(name) & (LOOKUP_SLOTS - 1);
    loop {
        let spec = table[slot]?;
        if spec.name.len() == name.len() && spec.name.as_bytes().eq_ignore_ascii_case(name) {
            return Some(spec);
        }
        slot = (slot + 1) & (LOOKUP_SLOTS - 1);
    }
}

/// Why a request names no runnable command ([`resolve`]).
pub(crate) enum Unresolved {
    /// No such command, or no such subcommand of a container.
    Unknown(Reply),
    /// The command (or subcommand) exists but the argument count is wrong.
    Arity(&'static CommandSpec),
}

/// The row a request runs: the command, or for a container called with a
/// subcommand, the subcommand's row; checked for arity. As Redis's
/// `lookupCommand` and arity check.
pub(crate) fn resolve(args: &[Bytes]) -> Result<&'static CommandSpec, Unresolved> {
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
pub(crate) fn container(_ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    errors::wrong_args(&String::from_utf8_lossy(&args[0]).to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row is found by its name in any case, and only by it.
    #[test]
    fn every_command_is_found_by_its_name_in_any_case() {
        for spec in all() {
            let lower = spec.name.as_bytes().to_vec();
            let upper = spec.name.to_ascii_uppercase().into_bytes();
            let mixed: Vec<u8> = lower
                .iter()
                .enumerate()
                .map(|(i, c)| if i % 2 == 0 { c.to_ascii_uppercase() } else { *c })
                .collect();
            for name in [&lower, &upper, &mixed] {
                let found = lookup_top(name).map(|s| s.name);
                assert_eq!(found, Some(spec.name), "{}", String::from_utf8_lossy(name));
            }
            // One byte more, one byte less, a byte changed: not this row.
            let mut longer = lower.clone();
            longer.push(b'x');
            assert_ne!(lookup_top(&longer).map(|s| s.name), Some(spec.name));
            assert_ne!(lookup_top(&lower[..lower.len() - 1]).map(|s| s.name), Some(spec.name));
            let mut changed = lower.clone();
            changed[0] ^= 0x01;
            assert_ne!(lookup_top(&changed).map(|s| s.name), Some(spec.name));
        }
        for unknown in [&b""[..], b"gets", b"ge", b"g\xc5t", b"GET\0", &[b'a'; 300]] {
            assert!(lookup_top(unknown).is_none(), "{}", String::from_utf8_lossy(unknown));
        }
    }

    /// A lookup hands out the row of its table itself, never a copy: the
    /// statistics know a command by its row's address.
    #[test]
    fn lookups_hand_out_the_rows_of_the_tables() {
        for spec in all() {
            assert!(
                std::ptr::eq(lookup(spec.name.as_bytes()).unwrap(), spec),
                "{}",
                spec.name
            );
            let args = [Bytes::from(spec.name.to_ascii_uppercase()), Bytes::from_static(b"x")];
            if let Ok(found) = resolve(&args[..spec.arity.unsigned_abs().min(2) as usize]) {
                assert!(std::ptr::eq(found, spec), "{}", spec.name);
            }
            for sub in spec.subcommands {
                assert!(std::ptr::eq(lookup(sub.name.as_bytes()).unwrap(), sub), "{}", sub.name);
            }
        }
    }
}
