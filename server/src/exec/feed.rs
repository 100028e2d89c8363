//! The effects feed: what every write leaves for another server to apply
//! (Redis's `alsoPropagate` and `propagatePendingCommands`).
//!
//! A write's *effect* is a command that, replayed on another server, gives
//! the same dataset: deterministic, absolute, minimal. [`crate::exec::call`]
//! records the command's own arguments as its effect when the dirty counter
//! moved, unless the handler rewrote it ([`Effects::propagate_as`]),
//! prevented it, or the row says its inner commands carry the effects
//! (EXEC, EVAL, FCALL: [`crate::cmd::flags::NO_PROPAGATE`]). Handlers add
//! further effects before it ([`Effects::also_propagate`]); expired keys
//! add a `DEL`.
//!
//! The effects of one *execution unit* (a top-level command, with whatever
//! ran inside it) form one [`Unit`]: several effects are wrapped in
//! MULTI/EXEC when the unit is replayed, as Redis wraps them. The units of
//! one engine batch go to every reader at once ([`Effects::flush`]), which
//! consumes them outside the engine lock and encodes them as the Redis
//! replication stream would carry them (SELECT when the database changes).
//! With no reader nothing is recorded: [`Effects::active`] is one branch.
//!
//! What must never happen here: a record while no one reads, or I/O.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use crate::cmd::{flags, CommandSpec};

/// One effect: a command and the database it applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// The database it applies to (SELECT index).
    pub db: usize,
    /// The command and its arguments, as replicas and the append-only file get them.
    pub args: Vec<Bytes>,
    /// For replicas, not for the append-only file (PUBLISH: Redis forces
    /// it to replicas only; what a script runs under `redis.set_repl(redis.REPL_REPLICA)`).
    pub replicas_only: bool,
    /// For the append-only file, not for replicas (what a script runs under
    /// `redis.set_repl(redis.REPL_AOF)`).
    pub aof_only: bool,
}

impl Op {
    /// Whether replicas get it (and a reader of the feed, which sees the
    /// replication stream).
    pub fn for_replicas(&self) -> bool {
        !self.aof_only
    }

    /// Whether the append-only file gets it.
    pub fn for_aof(&self) -> bool {
        !self.replicas_only
    }
}

/// The effects of one execution unit, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unit {
    /// The effects, in the order they happened.
    pub ops: Vec<Op>,
    /// Replayed without MULTI/EXEC around several effects: active expiry,
    /// and the commands Redis flags `touches_arbitrary_keys` (SCAN,
    /// RANDOMKEY), whose only effects are expired keys' DELs.
    pub unwrapped: bool,
}

/// The current call's propagation state: saved and restored around every
/// nested call ([`Effects::enter`], [`Effects::leave`]).
#[derive(Debug, Default)]
pub(crate) struct Frame {
    /// The handler's rewrite of its own effect (Redis's
    /// `rewriteClientCommandVector`).
    own: Option<Vec<Bytes>>,
    /// The handler asked for no effect of its own (`preventCommandPropagation`).
    prevented: bool,
    /// The handler asked for its effect whatever the dirty counter says
    /// (`forceCommandPropagation`): `Some(true)` for replicas only
    /// (`PROPAGATE_REPL`, PUBLISH), `Some(false)` for every reader.
    forced: Option<bool>,
}

/// Effects being recorded, and the readers they go to.
#[derive(Debug, Default)]
pub(crate) struct Effects {
    readers: Vec<mpsc::Sender<Arc<[Unit]>>>,
    /// The append-only file's writer: a reader of its own, because the
    /// engine puts markers (a new file, a crash) in order with the batches.
    aof: Option<crate::persist::aof::Sink>,
    /// The replication stream's encoder, while a backlog exists: encodes
    /// each unit as it closes, under the engine lock, so the replication
    /// offset is exact at every command's end ([`crate::repl`]).
    repl: Option<crate::repl::Encoder>,
    /// The effects of the execution unit now running.
    unit: Vec<Op>,
    /// The unit now running is replayed without MULTI/EXEC.
    unwrapped: bool,
    /// Where the running command's own effect may not go: `(aof,
    /// replicas)`, neither unless a script narrowed it for the commands it
    /// runs (`redis.set_repl`, Redis's script `repl_flags`, which mask only
    /// a command's own effect, not what its handler adds).
    own_withheld: (bool, bool),
    /// The units closed in this engine batch, not yet sent.
    closed: Vec<Unit>,
    frame: Frame,
}

impl Effects {
    /// Whether anyone reads the feed (nothing is recorded otherwise).
    #[inline]
    pub(crate) fn active(&self) -> bool {
        !self.readers.is_empty() || self.aof.is_some() || self.repl.is_some()
    }

    /// Attaches (`Some`) or detaches the replication stream's encoder.
    pub(crate) fn set_repl(&mut self, encoder: Option<crate::repl::Encoder>) {
        self.repl = encoder;
    }

    /// The next effect in the replication stream selects its database
    /// (a full sync starts: Redis's `slaveseldb = -1`).
    pub(crate) fn reset_repl_select(&mut self) {
        if let Some(e) = &mut self.repl {
            e.reset_select();
        }
    }

    /// `REPLCONF GETACK *` goes into the replication stream at the end of
    /// this batch (a WAIT blocked).
    pub(crate) fn request_ack(&mut self) {
        if let Some(e) = &mut self.repl {
            e.request_ack();
        }
    }

    /// A command of the replication stream outside any database (PING).
    pub(crate) fn repl_command(&mut self, args: &[&[u8]]) {
        if let Some(e) = &mut self.repl {
            e.command(args);
        }
    }

    /// Attaches (`Some`) or detaches the append-only file's writer.
    pub(crate) fn set_aof(&mut self, sink: Option<crate::persist::aof::Sink>) -> Option<crate::persist::aof::Sink> {
        std::mem::replace(&mut self.aof, sink)
    }

    /// The append-only file's writer, if attached.
    pub(crate) fn aof(&self) -> Option<&crate::persist::aof::Sink> {
        self.aof.as_ref()
    }

    /// Takes every reader away (loading a file: what is replayed is no
    /// effect, as Redis's loading propagates nothing); [`Effects::resume`]
    /// puts them back.
    pub(crate) fn suspend(&mut self) -> Suspended {
        // What is still recorded goes out first (a load is no place for a
        // latency event of its write).
        let _ = self.flush();
        Suspended {
            readers: std::mem::take(&mut self.readers),
            aof: self.aof.take(),
            repl: self.repl.take(),
        }
    }

    /// Puts back the readers [`Effects::suspend`] took (what was recorded
    /// meanwhile is dropped).
    pub(crate) fn resume(&mut self, suspended: Suspended) {
        self.unit.clear();
        self.closed.clear();
        self.readers = suspended.readers;
        self.aof = suspended.aof;
        self.repl = suspended.repl;
    }

    /// A new reader: it receives every batch closed from now on.
    pub(crate) fn subscribe(&mut self) -> Reader {
        let (tx, rx) = mpsc::channel();
        self.readers.push(tx);
        Reader {
            rx,
            selected: None,
            pending: Vec::new(),
        }
    }

    /// Starts a call: its own frame, the caller's returned to restore.
    #[inline]
    pub(crate) fn enter(&mut self) -> Frame {
        std::mem::take(&mut self.frame)
    }

    /// Ends a call: records its own effect (when `dirty` changes were made,
    /// or it was forced, and neither the handler nor the row prevents it),
    /// then restores the caller's frame.
    #[inline]
    pub(crate) fn leave(&mut self, outer: Frame, dirty: u64, spec: &CommandSpec, db: usize, args: &[Bytes]) {
        let frame = std::mem::replace(&mut self.frame, outer);
        if !self.active() {
            return;
        }
        if (dirty > 0 || frame.forced.is_some()) && !frame.prevented && !spec.has(flags::NO_PROPAGATE) {
            // Only for a reader that exists, as Redis's `shouldPropagate`
            // records nothing for the append-only file while it is off, or
            // for replicas while there is no backlog (a reader of the feed
            // sees the replication stream): so MULTI/EXEC wraps what some
            // stream carries, not an effect no one gets.
            let (no_aof, no_replicas) = self.own_withheld;
            let aof = !no_aof && (dirty > 0 || frame.forced == Some(false)) && self.aof.is_some();
            let replicas = !no_replicas && (self.repl.is_some() || !self.readers.is_empty());
            if aof || replicas {
                let args = frame.own.unwrap_or_else(|| args.to_vec());
                self.unit.push(Op {
                    db,
                    args,
                    replicas_only: !aof,
                    aof_only: !replicas,
                });
            }
        }
        if spec.has(flags::TOUCHES_ARBITRARY_KEYS) {
            self.unwrapped = true;
        }
    }

    /// Where the own effects of the commands called from now on go
    /// (`aof`, `replicas`): a script's `redis.set_repl` for the commands it
    /// runs; [`Effects::reset_targets`] goes back to both.
    pub(crate) fn set_targets(&mut self, aof: bool, replicas: bool) {
        self.own_withheld = (!aof, !replicas);
    }

    /// Own effects go to every reader again (see [`Effects::set_targets`]).
    pub(crate) fn reset_targets(&mut self) {
        self.own_withheld = (false, false);
    }

    /// Ends a served blocked client's call: only what it added is its effect.
    pub(crate) fn leave_waiter(&mut self, outer: Frame) {
        self.frame = outer;
    }

    /// The running command's effect is `args` instead of its own arguments.
    pub(crate) fn propagate_as(&mut self, args: Vec<Bytes>) {
        self.frame.own = Some(args);
    }

    /// The running command leaves no effect of its own (what it added with
    /// [`Effects::also_propagate`] stays).
    pub(crate) fn prevent(&mut self) {
        self.frame.prevented = true;
    }

    /// The running command leaves its effect even if it changed nothing;
    /// `replicas_only`: for replicas, not the append-only file (PUBLISH).
    pub(crate) fn force(&mut self, replicas_only: bool) {
        let both = self.frame.forced == Some(false);
        self.frame.forced = Some(replicas_only && !both);
    }

    /// Adds an effect before the running command's own.
    pub(crate) fn also_propagate(&mut self, db: usize, args: Vec<Bytes>) {
        if self.active() {
            self.unit.push(Op {
                db,
                args,
                replicas_only: false,
                aof_only: false,
            });
        }
    }

    /// Closes the execution unit now running; with a replication stream,
    /// the offset after it when it had effects.
    #[inline]
    pub(crate) fn end_unit(&mut self) -> Option<u64> {
        let mut offset = None;
        if !self.unit.is_empty() {
            let unit = Unit {
                ops: std::mem::take(&mut self.unit),
                unwrapped: self.unwrapped,
            };
            if let Some(e) = &mut self.repl {
                offset = Some(e.unit(&unit));
            }
            self.closed.push(unit);
        }
        self.unwrapped = false;
        offset
    }

    /// An effect outside any command (active expiry): a unit of its own.
    pub(crate) fn record_alone(&mut self, db: usize, args: Vec<Bytes>) {
        if self.active() {
            let unit = Unit {
                ops: vec![Op {
                    db,
                    args,
                    replicas_only: false,
                    aof_only: false,
                }],
                unwrapped: true,
            };
            if let Some(e) = &mut self.repl {
                let _ = e.unit(&unit);
            }
            self.closed.push(unit);
        }
    }

    /// Bytes of the effects recorded and not yet sent (arguments only):
    /// memory `maxmemory` does not count, as Redis leaves its AOF buffer out.
    pub(crate) fn pending_bytes(&self) -> usize {
        let ops = self.unit.iter().chain(self.closed.iter().flat_map(|u| u.ops.iter()));
        ops.map(|op| op.args.iter().map(|a| a.len()).sum::<usize>()).sum()
    }

    /// Sends the units closed so far to every reader (dropping readers that
    /// are gone). Called at the end of every engine batch, through
    /// [`crate::state::ServerState::flush_effects`], which records the
    /// append-only file's write it returns as a latency event.
    #[must_use]
    pub(crate) fn flush(&mut self) -> Option<crate::persist::aof::Wrote> {
        if let Some(e) = &mut self.repl {
            e.flush();
        }
        if self.closed.is_empty() {
            return None;
        }
        let batch: Arc<[Unit]> = std::mem::take(&mut self.closed).into();
        let wrote = self.aof.as_ref().and_then(|aof| aof.send(batch.clone()));
        self.readers.retain(|tx| tx.send(batch.clone()).is_ok());
        wrote
    }
}

/// The readers [`Effects::suspend`] took away.
#[derive(Debug)]
pub(crate) struct Suspended {
    readers: Vec<mpsc::Sender<Arc<[Unit]>>>,
    aof: Option<crate::persist::aof::Sink>,
    repl: Option<crate::repl::Encoder>,
}

/// One reader of the feed: receives the engine's batches in order and
/// encodes them as Redis's replication stream carries them.
#[derive(Debug)]
pub struct Reader {
    rx: mpsc::Receiver<Arc<[Unit]>>,
    /// The database the stream last selected (`None`: nothing yet, so the
    /// first effect is preceded by SELECT, as a new replica's stream is).
    selected: Option<usize>,
    /// Units received and not yet taken.
    pending: Vec<Unit>,
}

impl Reader {
    /// Every unit received so far (without waiting).
    pub fn try_units(&mut self) -> Vec<Unit> {
        while let Ok(batch) = self.rx.try_recv() {
            self.pending.extend(batch.iter().cloned());
        }
        std::mem::take(&mut self.pending)
    }

    /// Waits up to `timeout` for at least one unit; every unit received.
    pub fn units_timeout(&mut self, timeout: Duration) -> Vec<Unit> {
        if self.pending.is_empty() {
            if let Ok(batch) = self.rx.recv_timeout(timeout) {
                self.pending.extend(batch.iter().cloned());
            }
        }
        self.try_units()
    }

    /// Every unit received so far, encoded as RESP commands the way Redis
    /// 7.0.15 writes its replication stream: SELECT whenever the database
    /// changes, several effects of one unit between MULTI and EXEC.
    pub fn try_bytes(&mut self) -> Vec<u8> {
        let mut out = BytesMut::new();
        for unit in self.try_units() {
            self.encode(&unit, &mut out);
        }
        out.to_vec()
    }

    /// The same stream as [`Reader::try_bytes`], one command per item.
    pub fn try_commands(&mut self) -> Vec<Vec<Bytes>> {
        let mut commands = Vec::new();
        for unit in self.try_units() {
            self.stream(&unit, |args| commands.push(args.to_vec()));
        }
        commands
    }

    /// The same stream, one command per line with its arguments separated
    /// by spaces (lossy UTF-8): for assertions in tests.
    pub fn try_lines(&mut self) -> Vec<String> {
        self.try_commands()
            .iter()
            .map(|args| {
                args.iter()
                    .map(|a| String::from_utf8_lossy(a))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    /// Encodes one unit after what this reader encoded before.
    pub fn encode(&mut self, unit: &Unit, out: &mut BytesMut) {
        self.stream(unit, |args| encode_command(args, out));
    }

    /// The commands of one unit in stream order, after what this reader
    /// streamed before.
    fn stream(&mut self, unit: &Unit, emit: impl FnMut(&[Bytes])) {
        stream(&mut self.selected, &unit.ops, unit.unwrapped, Op::for_replicas, emit);
    }
}

/// The commands of one unit's effects `ops` in stream order, after a
/// stream that last selected `selected` (the one encoding of replicas'
/// stream and the append-only file's), with the effects `keep` says are
/// for this stream: SELECT whenever the database changes, several effects
/// between MULTI and EXEC unless `unwrapped`. Whether to wrap is decided
/// on all the unit's effects, kept or not, as Redis's
/// `propagatePendingCommands` does (a transaction of a SET and a PUBLISH is
/// MULTI, SET, EXEC in the append-only file).
pub(crate) fn stream(
    selected: &mut Option<usize>,
    ops: &[Op],
    unwrapped: bool,
    keep: impl Fn(&Op) -> bool,
    mut emit: impl FnMut(&[Bytes]),
) {
    let wrap = ops.len() > 1 && !unwrapped;
    let mut select = |db: usize, emit: &mut dyn FnMut(&[Bytes])| {
        if *selected != Some(db) {
            let mut buf = itoa::Buffer::new();
            let index = Bytes::copy_from_slice(buf.format(db).as_bytes());
            emit(&[Bytes::from_static(b"SELECT"), index]);
            *selected = Some(db);
        }
    };
    if wrap {
        // MULTI goes out in the first effect's database, so its SELECT
        // comes first; EXEC in the last one's, which needs a SELECT only
        // when that effect was not for this stream.
        select(ops[0].db, &mut emit);
        emit(&[Bytes::from_static(b"MULTI")]);
    }
    for op in ops.iter().filter(|op| keep(op)) {
        select(op.db, &mut emit);
        emit(&op.args);
    }
    if let (true, Some(last)) = (wrap, ops.last()) {
        select(last.db, &mut emit);
        emit(&[Bytes::from_static(b"EXEC")]);
    }
}

/// A command as a RESP array of bulk strings.
pub(crate) fn encode_command(args: &[Bytes], out: &mut BytesMut) {
    let mut buf = itoa::Buffer::new();
    out.put_u8(b'*');
    out.put_slice(buf.format(args.len()).as_bytes());
    out.put_slice(b"\r\n");
    for arg in args {
        out.put_u8(b'$');
        out.put_slice(buf.format(arg.len()).as_bytes());
        out.put_slice(b"\r\n");
        out.put_slice(arg);
        out.put_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(db: usize, args: &[&str]) -> Op {
        Op {
            db,
            args: args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect(),
            replicas_only: false,
            aof_only: false,
        }
    }

    #[test]
    fn units_encode_as_the_replication_stream() {
        let mut effects = Effects::default();
        let mut reader = effects.subscribe();
        effects.unit.push(op(0, &["SET", "a", "1"]));
        effects.end_unit();
        effects.unit.push(op(0, &["DEL", "b"]));
        effects.unit.push(op(1, &["SET", "c", "2"]));
        effects.end_unit();
        effects.record_alone(1, vec![Bytes::from_static(b"DEL"), Bytes::from_static(b"x")]);
        let _ = effects.flush();
        let text = String::from_utf8(reader.try_bytes()).unwrap().replace("\r\n", " ");
        assert_eq!(
            text,
            "*2 $6 SELECT $1 0 *3 $3 SET $1 a $1 1 *1 $5 MULTI *2 $3 DEL $1 b *2 $6 SELECT $1 1 \
             *3 $3 SET $1 c $1 2 *1 $4 EXEC *2 $3 DEL $1 x "
        );
    }

    #[test]
    fn a_unit_is_wrapped_for_every_stream_even_where_some_effects_are_not_carried() {
        let mut publish = op(2, &["PUBLISH", "ch", "m"]);
        publish.replicas_only = true;
        let ops = [op(0, &["SET", "a", "1"]), publish];
        let lines = |keep: fn(&Op) -> bool| {
            let mut out = vec![];
            stream(&mut None, &ops, false, keep, |args| {
                out.push(
                    args.iter()
                        .map(|a| String::from_utf8_lossy(a))
                        .collect::<Vec<_>>()
                        .join(" "),
                )
            });
            out
        };
        assert_eq!(
            lines(Op::for_replicas),
            ["SELECT 0", "MULTI", "SET a 1", "SELECT 2", "PUBLISH ch m", "EXEC"]
        );
        // EXEC goes out in the last effect's database, selected even though
        // the append-only file does not carry that effect.
        assert_eq!(lines(Op::for_aof), ["SELECT 0", "MULTI", "SET a 1", "SELECT 2", "EXEC"]);
    }

    #[test]
    fn nothing_is_recorded_without_a_reader() {
        let mut effects = Effects::default();
        effects.also_propagate(0, vec![Bytes::from_static(b"DEL")]);
        effects.record_alone(0, vec![Bytes::from_static(b"DEL")]);
        effects.end_unit();
        assert!(effects.unit.is_empty() && effects.closed.is_empty());
        let reader = effects.subscribe();
        drop(reader);
        effects.record_alone(0, vec![Bytes::from_static(b"DEL")]);
        let _ = effects.flush();
        assert!(!effects.active(), "a reader that is gone is dropped");
    }
}
