//! [`Ctx`]: everything a handler may touch while it runs — the keyspace,
//! the calling client, the server state, the VM — and the lookups,
//! notifications and effect reporting handlers share.

use bytes::Bytes;

use super::pubsub;
use crate::errors;
use crate::net::clients::{ClientState, ReplyMark};
use crate::protocol::Reply;
use crate::state::ServerState;
use crate::store::{Db, EntryRef, Value, ValueMut, ValueRef};

/// Everything a handler may touch while it runs.
pub struct Ctx<'a> {
    pub dbs: &'a mut [Db],
    pub client: &'a mut ClientState,
    pub server: &'a mut ServerState,
    /// The Lua VMs; `None` while a script or function runs (they cannot nest).
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
    /// [`crate::blocked::block`]).
    pub fn deny_blocking(&self) -> bool {
        !self.caller.may_block()
    }

    /// From the primary's stream or the append-only file being loaded
    /// (Redis's `mustObeyClient`): a server that already decided wrote it,
    /// so limits a client's request is held to are not applied again.
    pub(crate) fn must_obey(&self) -> bool {
        self.caller == crate::exec::Caller::Primary || self.server.aof.replaying()
    }

    /// Run by a script's or function's `redis.call`.
    pub fn in_script(&self) -> bool {
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
    /// (Redis's `forceCommandPropagation`: FLUSHDB of an empty database).
    #[inline]
    pub fn force_propagation(&mut self) {
        self.server.effects.force(false);
    }

    /// The running command leaves its effect for replicas only, though it
    /// changed nothing (Redis's `forceCommandPropagation(c, PROPAGATE_REPL)`:
    /// PUBLISH); an append-only file skips it ([`crate::exec::feed::Op::replicas_only`]).
    #[inline]
    pub fn force_propagation_to_replicas(&mut self) {
        self.server.effects.force(true);
    }

    /// The client's selected database.
    pub fn db(&mut self) -> &mut Db {
        &mut self.dbs[self.client.db]
    }

    /// Redis has written this command's whole reply at this point of it:
    /// what it publishes from here on to the client running it (a RESP3
    /// subscriber to its own keys' events) follows the reply, as Redis
    /// writes it into the client's buffer after the reply. Without a call,
    /// such messages precede the reply. Costs a test when the client
    /// subscribes to nothing.
    #[inline]
    pub(crate) fn replied(&mut self) {
        self.replied_up_to(usize::MAX);
    }

    /// [`Ctx::replied`] for a reply Redis has written only the first
    /// `nodes` nodes of (as [`Reply::nodes`] counts them: `*2`, then `$1 z`
    /// of ZMPOP's reply are two), where it publishes amid its reply.
    #[inline]
    pub(crate) fn replied_up_to(&mut self, nodes: usize) {
        if self.client.is_subscribed() && !self.in_script() {
            self.mark_reply(nodes);
        }
    }

    /// Records the mark [`Ctx::replied_up_to`] describes (EXEC places its
    /// commands' replies with it).
    pub(crate) fn mark_reply(&mut self, nodes: usize) {
        let messages = self.client.outbox.len();
        self.client.reply_marks.push(ReplyMark { messages, nodes });
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

    /// [`Ctx::lookup_read`] for a command that must not touch the key's
    /// access data (Redis's `LOOKUP_NOTOUCH`: TYPE, EXISTS, TTL and its
    /// kin, OBJECT).
    pub fn lookup_notouch(&mut self, key: &[u8]) -> Option<EntryRef<'_>> {
        let db = self.client.db;
        let saved = std::mem::replace(&mut self.dbs[db].notouch, true);
        let hit = self.lookup_read(key).is_some();
        self.dbs[db].notouch = saved;
        if !hit {
            return None;
        }
        self.dbs[db].peek(key).map(|item| EntryRef {
            value: item.value(),
            expire_at: item.expire_at(),
        })
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
            self.db().server_del(key);
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
