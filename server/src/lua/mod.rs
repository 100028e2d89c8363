//! Lua scripting: two Lua 5.1 VMs (mlua, vendored) with Redis 7.0's
//! environment, one for scripts and one for functions as in Redis, the
//! script cache, and the limits that keep scripts contained.
//!
//! This module owns the VM and never touches the keyspace itself: a script's
//! `redis.call` goes through a callback the caller passes to
//! [`Scripting::run`], which dispatches the command exactly as a socket would.
//!
//! - `glue.lua`: the error handler and the `redis.*` wrappers (Lua side).
//! - `sandbox`: libraries, removed globals, read-only tables.
//! - [`convert`]: replies to Lua values and back, as Redis converts them.
//! - `bit`, [`cjson`] (`cjson.lua`), `binary`: the libraries Redis ships.

mod binary;
mod bit;
mod cjson;
pub(crate) mod convert;
pub(crate) mod functions;
mod sandbox;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use mlua::{ffi, Function, Lua, Table, Value};
use sha1::{Digest, Sha1};

use crate::protocol::Reply;

/// Instructions between two checks of the kill flag and the clock.
const HOOK_EVERY: u32 = 10_000;

/// After this long, a running script leaves its tokio worker thread
/// (`block_in_place`) so connection tasks keep being served on a fresh one;
/// it tries again every `DETACH_RETRY_MS` in case the hand-off did not happen.
const DETACH_AFTER_MS: u64 = 50;
const DETACH_RETRY_MS: u64 = 1000;

/// What connection tasks and the VM share while a script runs, read without
/// taking the keyspace lock.
#[derive(Debug, Default)]
pub struct ScriptState {
    /// Unix ms when the running script started; 0 when none runs.
    pub started_ms: AtomicU64,
    /// Set by SCRIPT KILL / FUNCTION KILL; the instruction hook then stops
    /// the running script (cleared when the next one starts).
    pub kill: AtomicBool,
    /// Set once when the server shuts down, never cleared: the hook stops
    /// the running script and any script started afterwards, which a
    /// per-script `kill` (cleared at each start) could miss.
    shutdown: AtomicBool,
    /// The running script has executed a write command (SCRIPT KILL refuses).
    pub wrote: AtomicBool,
    /// Where the commands the running script calls may not leave their
    /// own effects, as `redis.set_repl` last said: bit [`REPL_AOF`] the
    /// append-only file, bit [`REPL_REPLICA`] replicas (0, the default at
    /// each start: both get them).
    pub(crate) repl_withheld: AtomicU8,
    /// What runs is a function (FCALL), not a script: FUNCTION KILL, not
    /// SCRIPT KILL, stops it, and `-BUSY` says so.
    pub function: AtomicBool,
    /// `lua-time-limit` / `busy-reply-threshold` in ms.
    pub busy_after_ms: AtomicU64,
    /// Monotonic start of the running script (µs since [`monotonic_us`]'s epoch).
    run_started_us: AtomicU64,
    /// Script run time (ms) at which the hook next leaves the tokio worker.
    next_detach_ms: AtomicU64,
    /// While a library's body runs (FUNCTION LOAD, RESTORE, a file's
    /// libraries): the [`monotonic_us`] instant past which the hook stops
    /// it with Redis's `FUNCTION LOAD timeout`; 0 otherwise.
    load_deadline_us: AtomicU64,
    /// The scripts' VM's bytes, noted when a script last called a command
    /// and after each change to the VM: what INFO memory reports as
    /// `used_memory_lua` when asked from inside a script or function (the
    /// VMs are in use then).
    pub lua_memory: AtomicU64,
    /// The same for the functions' VM (`used_memory_vm_functions`).
    pub functions_memory: AtomicU64,
    /// Requests only the engine can answer, left by connections while the
    /// script is busy for its hook to serve ([`crate::exec::busy::Inbox`]).
    pub(crate) inbox: crate::exec::busy::Inbox,
    /// Tasks in [`crate::net::lock_engine`] that found the engine lock
    /// taken: the dataset loader, which takes it again slice after slice,
    /// lets them in first (kept here as every taker of the lock has this
    /// state at hand).
    pub(crate) engine_waiters: std::sync::atomic::AtomicUsize,
}

/// `redis.REPL_AOF`: the bit of `redis.set_repl`'s flags for the
/// append-only file (Redis's `PROPAGATE_AOF`).
pub(crate) const REPL_AOF: u8 = 1;
/// `redis.REPL_REPLICA`: the bit for replicas (`PROPAGATE_REPL`).
pub(crate) const REPL_REPLICA: u8 = 2;

/// Microseconds on a monotonic clock (for script run time, not key expiry):
/// the exec core's, a time-stamp counter read where it can be, as every
/// script reads it once when it starts.
fn monotonic_us() -> u64 {
    crate::exec::monotonic::micros()
}

/// The `redis.call` target of the running script: a pointer to the
/// `&mut Dispatch` on [`Scripting::run`]'s stack, null between scripts.
#[derive(Default)]
struct CurrentDispatch(std::sync::atomic::AtomicPtr<()>);

impl CurrentDispatch {
    /// Runs `f` with the running script's dispatcher, or `None` outside a script.
    fn with<R>(&self, f: impl FnOnce(&mut Dispatch) -> R) -> Option<R> {
        let p = self.0.load(Ordering::Acquire) as *mut &mut Dispatch;
        if p.is_null() {
            return None;
        }
        // SAFETY: `run_inner` stores a pointer to a live `&mut Dispatch` for
        // exactly the duration of the script call and clears it afterwards;
        // redis.call and the instruction hook run synchronously on that same
        // thread, inside that call, and never re-enter each other (commands
        // do not run Lua, and the hook fires only between instructions).
        Some(f(unsafe { &mut **p }))
    }
}

/// What the `redis.call` / `redis.pcall` C functions reach through their
/// upvalue (a light userdata pointing here). Boxed in [`Scripting`], so its
/// address is stable for as long as the VM can run scripts.
struct Bridge {
    current: CurrentDispatch,
    /// Protocol version chosen by `redis.setresp` for the running script.
    resp: Arc<AtomicU8>,
    /// To lift the memory limit while a reply is pushed.
    lua: Lua,
    /// Where the VM's memory is noted before each command it calls.
    state: Arc<ScriptState>,
    /// Which VM this is, for the note.
    kind: VmKind,
}

/// The two VMs, as Redis has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VmKind {
    /// EVAL and EVALSHA's (`used_memory_vm_eval`), started afresh by
    /// SCRIPT FLUSH.
    Eval,
    /// FUNCTION LOAD and FCALL's (`used_memory_vm_functions`).
    Functions,
}

impl ScriptState {
    /// Where the memory of the VM of `kind` is noted.
    fn memory_of(&self, kind: VmKind) -> &AtomicU64 {
        match kind {
            VmKind::Eval => &self.lua_memory,
            VmKind::Functions => &self.functions_memory,
        }
    }

    /// True when a script has been running longer than the busy threshold.
    pub fn is_busy(&self, now_ms: u64) -> bool {
        let started = self.started_ms.load(Ordering::Acquire);
        started != 0 && now_ms.saturating_sub(started) >= self.busy_after_ms.load(Ordering::Relaxed)
    }

    /// True while a script or function runs, busy or not.
    pub fn is_running(&self) -> bool {
        self.started_ms.load(Ordering::Acquire) != 0
    }
}

/// Runs one command a script asked for (`redis.call` / `redis.pcall`) and
/// returns its reply; the caller decides whether an error reply raises.
/// With [`Mode::AclCheck`] it only answers whether the script's user may
/// run it (`redis.acl_check_cmd`): a boolean, or an error.
pub(crate) type Dispatch<'a> = dyn FnMut(&[Bytes], Mode) -> Reply + 'a;

/// What a `Dispatch` is asked to do with a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `redis.call` / `redis.pcall`: run the command.
    Call,
    /// `redis.acl_check_cmd`: only say whether it may run.
    AclCheck,
    /// From the instruction hook while the script is busy: serve what
    /// connections left in the script state's inbox (`exec::busy::Inbox`;
    /// no command, the reply is ignored).
    Serve,
}

/// The two VMs, the script cache, the libraries and the limits.
pub struct Scripting {
    /// The scripts' VM: compiled scripts live in it.
    eval: Vm,
    /// The functions' VM: the libraries' functions live in it.
    functions: Vm,
    /// `lua-memory-limit`, for each VM (and a fresh scripts' VM).
    memory_limit: usize,
    /// Compiled scripts by lower-case SHA1 hex.
    scripts: HashMap<String, Function, foldhash::fast::RandomState>,
    /// Bytes of the cached scripts' bodies (INFO used_memory_scripts_eval).
    scripts_bytes: usize,
    /// The flags of the cached scripts that have a shebang line.
    script_flags: HashMap<String, ScriptFlags, foldhash::fast::RandomState>,
    /// Function libraries (FUNCTION LOAD), see [`functions`].
    libraries: functions::Libraries,
    /// The KEYS and ARGV tables of the scripts' VM, reused from one script
    /// to the next while scripts leave them as plain arrays (see
    /// [`ArgTables`]).
    arg_tables: Option<ArgTables>,
    /// Shared with connection tasks, which read it without the keyspace
    /// lock (`-BUSY`, SCRIPT KILL).
    pub state: Arc<ScriptState>,
}

/// One Lua VM with Redis's environment and what runs code in it.
struct Vm {
    lua: Lua,
    /// glue.lua's functions.
    handler: Function,
    adopt: Function,
    load_library: Function,
    /// glue.lua's: with no library left, the functions' cjson goes (its
    /// settings stay).
    forget_function_cjson: Function,
    /// The table behind the globals: KEYS and ARGV are set here.
    visible: Table,
    /// Where `redis.call`/`redis.pcall` find the running code's dispatcher
    /// and protocol version.
    bridge: Box<Bridge>,
    /// Scripts or functions run since the last paced collection step
    /// ([`Vm::pace_gc`]).
    calls_since_gc_step: u32,
    /// The VM's bytes after the last paced collection step (or less, when
    /// Lua's own collector has since freed some): what the VM has grown
    /// by since is at most the garbage a step would find.
    used_after_gc_step: usize,
}

/// Every this many scripts or functions, a collection step worth this many
/// kilobytes, as Redis's `LUA_GC_CYCLE_PERIOD`: the collector keeps up with
/// short scripts' garbage instead of letting the heap double before a cycle.
const GC_CYCLE_PERIOD: u32 = 50;

/// The step is skipped while the VM has grown by less than this since the
/// last one. On a VM as small as a script VM (about 60 KB), Lua 5.1's step
/// runs a whole cycle, marking and sweeping every live object: for short
/// scripts that leave a few dozen bytes of garbage each (a lock's key
/// string) that was a sixth of their cost, spent to free almost nothing.
/// Garbage is still collected once there is this much of it, or sooner by
/// Lua's own collector; `used_memory_lua` reads at most this much higher
/// than with a step every period (well under the 100 KB Redis's test
/// "EVAL does not leak in the Lua stack" allows).
const GC_MIN_GROWTH: usize = 16 * 1024;

impl std::fmt::Debug for Scripting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripting")
            .field("scripts", &self.scripts.len())
            .finish()
    }
}

/// What a script's shebang line (`#!lua flags=no-writes,allow-oom`) says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// It has a shebang: EVAL_RO then requires `no-writes`.
    pub shebang: bool,
    /// `no-writes`: it runs read-only, and EVAL_RO may run it.
    pub no_writes: bool,
    /// `allow-stale`: it runs on a replica whose link is down with
    /// `replica-serve-stale-data no`.
    pub allow_stale: bool,
    /// `allow-oom`: it runs, and its commands run, over `maxmemory`.
    pub allow_oom: bool,
    /// `no-cluster`: refused on a cluster node.
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`: on a cluster node its commands may touch
    /// keys of several slots (all served here).
    pub allow_cross_slot: bool,
}

impl ScriptFlags {
    /// Whether its commands may touch keys of several slots: with the flag,
    /// or without a shebang (Redis's compatibility mode allows it too).
    pub fn cross_slot(&self) -> bool {
        !self.shebang || self.allow_cross_slot
    }
}

/// A script's shebang flags and where its code starts (at the shebang's
/// newline), or `None` without a shebang; Redis's
/// `evalExtractShebangFlags` errors. `allow-stale` matters on a replica
/// (admission), `allow-oom` under `maxmemory`, `no-cluster` and
/// `allow-cross-slot-keys` on a cluster node.
fn shebang_flags(body: &[u8]) -> Result<Option<(ScriptFlags, usize)>, Reply> {
    use crate::errors;
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err(errors::err(errors::INVALID_SHEBANG));
    };
    let parts = crate::protocol::split_args(&body[..end]).unwrap_or_default();
    let Some(engine) = parts.first() else {
        return Err(errors::err(errors::INVALID_SHEBANG));
    };
    if engine.as_slice() != b"#!lua" {
        return Err(errors::shebang_engine(engine));
    }
    let mut flags = ScriptFlags {
        shebang: true,
        no_writes: false,
        allow_stale: false,
        allow_oom: false,
        no_cluster: false,
        allow_cross_slot: false,
    };
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(errors::shebang_option(part));
        };
        if list.is_empty() {
            continue;
        }
        for flag in list.split(|&b| b == b',') {
            if !functions::FLAG_NAMES.iter().any(|f| f.as_bytes() == flag) {
                return Err(errors::shebang_flag(flag));
            }
            flags.no_writes |= flag == b"no-writes";
            flags.allow_stale |= flag == b"allow-stale";
            flags.allow_oom |= flag == b"allow-oom";
            flags.no_cluster |= flag == b"no-cluster";
            flags.allow_cross_slot |= flag == b"allow-cross-slot-keys";
        }
    }
    Ok(Some((flags, end)))
}

/// What a script body's shebang declares (the default flags, `shebang`
/// false, without one); `None` for a shebang EVAL refuses.
pub(crate) fn body_flags(body: &[u8]) -> Option<ScriptFlags> {
    match shebang_flags(body) {
        Ok(Some((flags, _))) => Some(flags),
        Ok(None) => Some(ScriptFlags::default()),
        Err(_) => None,
    }
}

/// Whether EVAL of a script body is refused under OOM: a shebang saying
/// neither `allow-oom` nor `no-writes` (a script without a shebang is
/// refused only at its first write, [`crate::exec::admit`]).
pub(crate) fn body_denies_oom(body: &[u8]) -> bool {
    matches!(shebang_flags(body), Ok(Some((flags, _))) if !flags.no_writes && !flags.allow_oom)
}

/// Lower-case hex SHA1, as SCRIPT LOAD returns and `redis.sha1hex` computes.
pub fn sha1_hex(data: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha1::digest(data);
    let mut out = String::with_capacity(40);
    for b in digest.iter() {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

/// Lifts the VM's memory limit while Rust code creates a few Lua values.
///
/// While a limit is set, mlua wraps every value it creates from Rust in a
/// protected call (an allocation failure must not unwind over Rust frames),
/// which costs more than the allocation itself. With the limit lifted the
/// allocator cannot fail and mlua pushes directly. The limit is back as soon
/// as the guard drops, so a script's own allocations stay bounded; values
/// created meanwhile (a command's reply) count, and a reply that took the
/// VM past the limit fails the script's next allocation.
struct Unlimited<'a> {
    lua: &'a Lua,
    limit: usize,
}

impl<'a> Unlimited<'a> {
    fn new(lua: &'a Lua) -> Self {
        let limit = lua.set_memory_limit(0).unwrap_or(0);
        Unlimited { lua, limit }
    }
}

impl Drop for Unlimited<'_> {
    fn drop(&mut self) {
        if self.limit != 0 {
            let _ = self.lua.set_memory_limit(self.limit);
        }
    }
}

/// Converts a Lua error (mlua's) into the text Redis would show.
pub(crate) fn lua_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        // mlua appends a traceback to errors raised in Lua code: not part of
        // the message Redis would show.
        mlua::Error::RuntimeError(m) => m.split("\nstack traceback:").next().unwrap_or(m).to_string(),
        mlua::Error::MemoryError(_) => "not enough memory".into(),
        mlua::Error::CallbackError { cause, .. } => lua_error_text(cause),
        other => other.to_string(),
    }
}

impl Vm {
    /// A fresh VM with Redis's environment and a memory limit in bytes
    /// (0: none).
    fn new(memory_limit: usize, state: &Arc<ScriptState>, kind: VmKind) -> mlua::Result<Vm> {
        let resp = Arc::new(AtomicU8::new(2));
        let vm = sandbox::create(resp.clone(), state.clone())?;
        if memory_limit > 0 {
            vm.lua.set_memory_limit(memory_limit)?;
        }
        let bridge = Box::new(Bridge {
            current: CurrentDispatch::default(),
            resp,
            lua: vm.lua.clone(),
            state: state.clone(),
            kind,
        });
        install_call(&vm.lua, &vm.redis, &bridge)?;
        install_hook(&vm.lua, &bridge)?;
        let vm = Vm {
            lua: vm.lua,
            handler: vm.handler,
            adopt: vm.adopt,
            load_library: vm.load_library,
            forget_function_cjson: vm.forget_function_cjson,
            visible: vm.visible,
            bridge,
            calls_since_gc_step: 0,
            used_after_gc_step: 0,
        };
        // What building the environment left behind goes now, so a fresh
        // VM reads its real size, as Redis's does.
        vm.lua.gc_collect()?;
        vm.note_memory();
        Ok(vm)
    }

    /// Notes the VM's bytes where INFO reads them from inside a script.
    fn note_memory(&self) {
        self.bridge
            .state
            .memory_of(self.bridge.kind)
            .store(self.lua.used_memory() as u64, Ordering::Relaxed);
    }

    /// After each script or function: every [`GC_CYCLE_PERIOD`] calls, one
    /// collection step of that many kilobytes (Redis's `luaCallFunction`),
    /// unless the VM has grown by less than [`GC_MIN_GROWTH`] since the last.
    fn pace_gc(&mut self) {
        self.calls_since_gc_step += 1;
        if self.calls_since_gc_step < GC_CYCLE_PERIOD {
            return;
        }
        self.calls_since_gc_step = 0;
        let used = self.lua.used_memory();
        self.used_after_gc_step = self.used_after_gc_step.min(used);
        if used - self.used_after_gc_step < GC_MIN_GROWTH {
            return;
        }
        // SAFETY: one lua_gc call on the main state, in mlua's protected
        // call, leaving the stack as it found it.
        let _ = unsafe {
            self.lua.exec_raw::<()>((), |state| {
                ffi::lua_gc(state, ffi::LUA_GCSTEP, GC_CYCLE_PERIOD as std::ffi::c_int);
            })
        };
        self.used_after_gc_step = self.lua.used_memory();
    }

    /// The reply for what a script or function returned; `name` (its SHA
    /// or function name) goes into an error's text.
    fn returned_reply(&self, returned: Returned, name: &str) -> mlua::Result<Reply> {
        match returned {
            Returned::Reply(reply) => Ok(reply),
            Returned::Value(true, value) => {
                convert::lua_to_reply(&value, self.bridge.resp.load(Ordering::Relaxed) == 3)
            }
            Returned::Value(false, value) => Ok(convert::script_error(&value, name)),
        }
    }

    /// Pops what a script or function left on the stack after `lua_pcall`
    /// returned `status`: a result that is not a table as its reply, read
    /// in place; anything else as an mlua value (made with the memory limit
    /// lifted, as nothing outside the protected call may raise).
    ///
    /// `pop_value` is the raw state's (mlua does not name its type).
    ///
    /// # Safety
    /// Inside `exec_raw_lua` on `state`, with the value on top.
    unsafe fn pop_returned(
        &self,
        state: *mut ffi::lua_State,
        status: std::ffi::c_int,
        pop_value: impl FnOnce() -> Value,
    ) -> Returned {
        if status == 0 {
            let resp3 = self.bridge.resp.load(Ordering::Relaxed) == 3;
            if let Some(reply) = convert::raw::scalar_reply(state, -1, resp3) {
                ffi::lua_pop(state, 1);
                return Returned::Reply(reply);
            }
        }
        let _unlimited = Unlimited::new(&self.lua);
        Returned::Value(status == 0, pop_value())
    }
}

impl Scripting {
    /// Fresh VMs with Redis's environment and a memory limit in bytes
    /// (0: none) for each.
    pub fn new(memory_limit: usize, state: Arc<ScriptState>) -> mlua::Result<Scripting> {
        Ok(Scripting {
            eval: Vm::new(memory_limit, &state, VmKind::Eval)?,
            functions: Vm::new(memory_limit, &state, VmKind::Functions)?,
            memory_limit,
            scripts: HashMap::default(),
            scripts_bytes: 0,
            script_flags: HashMap::default(),
            libraries: functions::Libraries::default(),
            arg_tables: None,
            state,
        })
    }

    /// Sets each VM's allocation limit in bytes (`lua-memory-limit`; 0: no limit).
    pub fn set_memory_limit(&mut self, bytes: usize) {
        self.memory_limit = bytes;
        for vm in [&self.eval, &self.functions] {
            let _ = vm.lua.set_memory_limit(bytes);
        }
    }

    /// Compiles and caches `body`; returns its SHA1. A compile error is
    /// Redis's `Error compiling script` reply.
    pub fn load(&mut self, body: &[u8]) -> Result<String, Reply> {
        let sha = sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        if body.starts_with(b"\x1b") {
            return Err(Reply::Error(crate::errors::BINARY_SCRIPT.into()));
        }
        // A shebang line is read for its flags and left out of the code (its
        // newline kept, so line numbers count it), as Redis 7 does.
        let (flags, code) = match shebang_flags(body)? {
            Some((flags, end)) => (Some(flags), &body[end..]),
            None => (None, body),
        };
        let compiled = self
            .eval
            .lua
            .load(code)
            .set_name("@user_script")
            .set_mode(mlua::chunk::ChunkMode::Text)
            .into_function()
            .and_then(|f| self.eval.adopt.call::<Function>(f));
        self.eval.note_memory();
        match compiled {
            Ok(f) => {
                self.scripts.insert(sha.clone(), f);
                self.scripts_bytes += body.len();
                if let Some(flags) = flags {
                    self.script_flags.insert(sha.clone(), flags);
                }
                Ok(sha)
            }
            Err(e) => Err(crate::errors::compile_error(&lua_error_text(&e))),
        }
    }

    /// The flags of cached script `sha` (any case); `None` when it is not
    /// cached. While no cached script has a shebang (the usual case) every
    /// script's flags are the default, answered without a lookup: EVALSHA
    /// pays nothing for shebangs, and [`Scripting::run`] then finds whether
    /// the script exists.
    pub fn script_flags(&self, sha: &str) -> Option<ScriptFlags> {
        if self.script_flags.is_empty() {
            return Some(ScriptFlags::default());
        }
        let sha = sha.to_ascii_lowercase();
        self.scripts
            .contains_key(&sha)
            .then(|| self.script_flags.get(&sha).copied().unwrap_or_default())
    }

    /// Whether a script with this SHA1 (any case) is cached.
    pub fn exists(&self, sha: &[u8]) -> bool {
        std::str::from_utf8(sha).is_ok_and(|s| {
            if s.bytes().any(|b| b.is_ascii_uppercase()) {
                self.scripts.contains_key(&s.to_ascii_lowercase())
            } else {
                self.scripts.contains_key(s)
            }
        })
    }

    /// SCRIPT FLUSH: the cache emptied and the scripts' VM started afresh,
    /// as Redis's `scriptingReset` does (its memory drops to a fresh VM's,
    /// and what scripts left in it, cjson's settings among them, is gone;
    /// functions keep theirs). The old VM and its scripts are freed by
    /// `freer` (on its thread when `lazy` and there are more than 64
    /// scripts, as Redis's `scriptingRelease`).
    pub(crate) fn flush(&mut self, freer: &crate::lazyfree::LazyFree, lazy: bool) {
        let scripts = std::mem::take(&mut self.scripts);
        let count = scripts.len();
        self.scripts_bytes = 0;
        self.script_flags.clear();
        self.arg_tables = None;
        match Vm::new(self.memory_limit, &self.state, VmKind::Eval) {
            Ok(fresh) => {
                let old = std::mem::replace(&mut self.eval, fresh);
                freer.free_collection(Box::new((scripts, old)), count, lazy);
            }
            // No memory for a new VM: the old one stays, emptied.
            Err(_) => {
                drop(scripts);
                let _ = self.eval.lua.gc_collect();
                self.eval.note_memory();
            }
        }
    }

    /// Number of cached scripts (INFO).
    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    /// Whether no script is cached.
    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }

    /// Bytes of the cached scripts' bodies (INFO used_memory_scripts_eval).
    pub fn scripts_bytes(&self) -> usize {
        self.scripts_bytes
    }

    /// Bytes the scripts' VM uses (INFO `used_memory_lua`).
    pub fn used_memory(&self) -> usize {
        self.eval.lua.used_memory()
    }

    /// Bytes the functions' VM uses (INFO `used_memory_vm_functions`).
    pub fn functions_used_memory(&self) -> usize {
        self.functions.lua.used_memory()
    }

    /// Runs a cached script. `dispatch` runs one command for `redis.call`;
    /// `now_ms` is the script's start time. `None` when the SHA is unknown.
    pub fn run(
        &mut self,
        sha: &str,
        keys: &[Bytes],
        argv: &[Bytes],
        now_ms: u64,
        dispatch: &mut Dispatch,
    ) -> Option<Reply> {
        let lower;
        let (sha, func) = match self.scripts.get_key_value(sha) {
            Some(found) => found,
            None => {
                lower = sha.to_ascii_lowercase();
                self.scripts.get_key_value(lower.as_str())?
            }
        };
        self.eval.bridge.resp.store(2, Ordering::Relaxed);
        self.state.kill.store(false, Ordering::Relaxed);
        self.state.wrote.store(false, Ordering::Relaxed);
        self.state.repl_withheld.store(0, Ordering::Relaxed);
        self.state.started_ms.store(now_ms.max(1), Ordering::Release);
        let tables = match self.arg_tables.take() {
            Some(tables) => Ok(tables),
            None => ArgTables::install(&self.eval.lua, &self.eval.visible),
        };
        let (reply, tables) = match tables {
            Ok(tables) => self.eval.run_script(sha, func, keys, argv, dispatch, tables),
            Err(e) => (Err(e), None),
        };
        self.arg_tables = tables;
        if matches!(&reply, Ok(Reply::Error(e)) if e.contains("memory limit")) || reply.is_err() {
            // Free what the failed script left behind before the next one runs.
            let _ = self.eval.lua.gc_collect();
        }
        self.eval.pace_gc();
        self.eval.note_memory();
        self.state.started_ms.store(0, Ordering::Release);
        self.state.kill.store(false, Ordering::Relaxed);
        Some(reply.unwrap_or_else(|e| crate::errors::script_failed(&lua_error_text(&e))))
    }
}

impl Vm {
    /// Runs script `func` with KEYS and ARGV filled in `tables`; hands the
    /// tables back if the script left them fit for reuse.
    fn run_script(
        &self,
        sha: &str,
        func: &Function,
        keys: &[Bytes],
        argv: &[Bytes],
        dispatch: &mut Dispatch,
        tables: ArgTables,
    ) -> (mlua::Result<Reply>, Option<ArgTables>) {
        let state = &self.bridge.state;
        state.run_started_us.store(monotonic_us(), Ordering::Relaxed);
        state.next_detach_ms.store(DETACH_AFTER_MS, Ordering::Relaxed);
        let mut dispatch: &mut Dispatch = dispatch;
        self.bridge
            .current
            .0
            .store(&mut dispatch as *mut &mut Dispatch as *mut (), Ordering::Release);
        let out = self.call_script(func, keys, argv, &tables);
        self.bridge.current.0.store(std::ptr::null_mut(), Ordering::Release);
        let (returned, plain) = match out {
            Ok(out) => out,
            Err(e) => return (Err(e), None),
        };
        let tables = plain.then_some(ArgTables {
            lens: (keys.len(), argv.len()),
            ..tables
        });
        (self.returned_reply(returned, sha), tables)
    }

    /// Calls `func` under the error handler with KEYS and ARGV filled in,
    /// on the raw Lua C API. Returns what it returned (or the handler's
    /// error table), and whether it left KEYS and ARGV plain.
    ///
    /// Everything but the script itself runs unprotected, so it must not
    /// raise a Lua error: values are pushed with the memory limit lifted (no
    /// allocation can fail), `lua_next` and `lua_getmetatable` do not raise,
    /// and the script runs inside `lua_pcall` with the limit back on. mlua's
    /// own `Function::call` / `exec_raw` would wrap this in a protected C
    /// closure allocated per call, a tenth of a short script's cost.
    fn call_script(
        &self,
        func: &Function,
        keys: &[Bytes],
        argv: &[Bytes],
        tables: &ArgTables,
    ) -> mlua::Result<(Returned, bool)> {
        self.lua.exec_raw_lua(|raw| {
            // SAFETY: see above. The stack is restored to `base` on every path.
            unsafe {
                let state = raw.state();
                let base = ffi::lua_gettop(state);
                let restore = |result| {
                    ffi::lua_settop(state, base);
                    result
                };
                let handler = base + 1;
                {
                    let _unlimited = Unlimited::new(&self.lua);
                    if ffi::lua_checkstack(state, 8) == 0 {
                        return restore(Err(mlua::Error::StackError));
                    }
                    if let Err(e) = raw
                        .push(&self.handler)
                        .and_then(|_| raw.push(&tables.keys))
                        .and_then(|_| raw.push(&tables.argv))
                    {
                        return restore(Err(e));
                    }
                    let (keys_len, argv_len) = tables.lens;
                    fill_array(state, base + 2, keys, keys_len);
                    fill_array(state, base + 3, argv, argv_len);
                    if let Err(e) = raw.push(func) {
                        return restore(Err(e));
                    }
                }
                let status = ffi::lua_pcall(state, 0, 1, handler);
                let plain = is_plain_array(state, base + 2, keys.len()) && is_plain_array(state, base + 3, argv.len());
                let returned = self.pop_returned(state, status, || raw.pop_value());
                restore(Ok((returned, plain)))
            }
        })
    }
}

/// What a script or function returned, off the stack.
pub(crate) enum Returned {
    /// A successful result that was not a table, already converted.
    Reply(Reply),
    /// Whether it succeeded, and its result (a table) or the error
    /// handler's error table, for [`convert`] to read.
    Value(bool, Value),
}

/// The KEYS and ARGV tables, set once as globals and refilled for each
/// script: building two fresh tables per call was a measurable part of a
/// short script's cost. A script that leaves anything but array entries in
/// them (other keys, a metatable) gets them replaced by fresh ones before the
/// next script, so every script sees plain arrays, as with Redis's fresh
/// tables.
struct ArgTables {
    keys: Table,
    argv: Table,
    /// How many entries the last script was given, to clear the rest.
    lens: (usize, usize),
}

impl ArgTables {
    /// Fresh tables, installed as the globals KEYS and ARGV.
    fn install(lua: &Lua, visible: &Table) -> mlua::Result<ArgTables> {
        let _unlimited = Unlimited::new(lua);
        let tables = ArgTables {
            keys: lua.create_table()?,
            argv: lua.create_table()?,
            lens: (0, 0),
        };
        visible.raw_set("KEYS", &tables.keys)?;
        visible.raw_set("ARGV", &tables.argv)?;
        Ok(tables)
    }
}

/// Sets the array at stack index `t` to `items` as Lua strings and clears
/// entries `items.len()+1..=previous`. Raw C API, inside `exec_raw`'s
/// protected call (see [`Scripting::run_inner`]).
///
/// # Safety
/// `state` is the VM's valid state on the running thread, inside a
/// protected call (a push that fails unwinds to it); `t` is a table's index.
unsafe fn fill_array(state: *mut ffi::lua_State, t: std::ffi::c_int, items: &[Bytes], previous: usize) {
    for (i, item) in items.iter().enumerate() {
        ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
        ffi::lua_rawseti(state, t, (i + 1) as ffi::lua_Integer);
    }
    for i in items.len() + 1..=previous {
        ffi::lua_pushnil(state);
        ffi::lua_rawseti(state, t, i as ffi::lua_Integer);
    }
}

/// Whether the table at stack index `t` has no metatable and no keys but
/// integers `1..=n` (which the next fill overwrites or clears).
///
/// # Safety
/// As [`fill_array`]; the stack has room for two more values.
unsafe fn is_plain_array(state: *mut ffi::lua_State, t: std::ffi::c_int, n: usize) -> bool {
    if ffi::lua_getmetatable(state, t) != 0 {
        ffi::lua_pop(state, 1);
        return false;
    }
    ffi::lua_pushnil(state);
    while ffi::lua_next(state, t) != 0 {
        let key = ffi::lua_tonumber(state, -2);
        let in_range =
            ffi::lua_type(state, -2) == ffi::LUA_TNUMBER && key >= 1.0 && key <= n as f64 && key.fract() == 0.0;
        ffi::lua_pop(state, 1);
        if !in_range {
            ffi::lua_pop(state, 1);
            return false;
        }
    }
    true
}

/// Installs `redis.call` and `redis.pcall` as C functions over the raw Lua
/// API: they run a command through the running script's dispatcher; `call`
/// raises command errors, `pcall` returns them as `{err=...}` (as Redis 7.0,
/// `call` raises the `{err=...}` table itself). mlua's callback machinery
/// costs more than the command for the short scripts locks use, hence the
/// raw API here.
fn install_call(lua: &Lua, redis: &Table, bridge: &Bridge) -> mlua::Result<()> {
    let functions: [(&str, ffi::lua_CFunction); 3] = [
        ("call", redis_call),
        ("pcall", redis_pcall),
        ("acl_check_cmd", redis_acl_check_cmd),
    ];
    for (name, function) in functions {
        // SAFETY: pushes a C closure whose one upvalue is a light userdata
        // pointing at `bridge`, which `Scripting` keeps (boxed) for as long as
        // it runs scripts.
        let f = unsafe {
            lua.exec_raw::<Function>((), |state| {
                ffi::lua_pushlightuserdata(state, bridge as *const Bridge as *mut std::ffi::c_void);
                ffi::lua_pushcclosure(state, function, 1);
            })?
        };
        redis.raw_set(name, f)?;
    }
    Ok(())
}

/// `redis.call`: the command's reply, or the command's error raised.
///
/// # Safety
/// Called by Lua only, as the C function registered with the [`Bridge`]
/// as its first upvalue, while a script runs.
unsafe extern "C-unwind" fn redis_call(state: *mut ffi::lua_State) -> std::ffi::c_int {
    match call_command(state) {
        Ok(()) => 1,
        // The error table is on the stack; every Rust value of the call has
        // been dropped, so nothing is skipped by the error's longjmp.
        Err(()) => ffi::lua_error(state),
    }
}

/// `redis.pcall`: the command's reply or its error table, never raised.
///
/// # Safety
/// As [`redis_call`].
unsafe extern "C-unwind" fn redis_pcall(state: *mut ffi::lua_State) -> std::ffi::c_int {
    let _ = call_command(state);
    1
}

/// `redis.acl_check_cmd`: whether the script's user may run the command
/// (a boolean); an unknown command raises Redis's error.
///
/// # Safety
/// As [`redis_call`].
unsafe extern "C-unwind" fn redis_acl_check_cmd(state: *mut ffi::lua_State) -> std::ffi::c_int {
    let bridge = &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const Bridge);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _unlimited = Unlimited::new(&bridge.lua);
        let args = convert::raw::command_args(state)?;
        match bridge.current.with(|d| d(&args, Mode::AclCheck)) {
            None => Err(crate::errors::acl::ACL_CHECK_CMD_OUTSIDE),
            Some(Reply::Bool(allowed)) => Ok(allowed),
            Some(_) => Err(crate::errors::acl::ACL_CHECK_CMD_INVALID),
        }
    }));
    let _unlimited = Unlimited::new(&bridge.lua);
    match outcome {
        Ok(Ok(allowed)) => {
            ffi::lua_pushboolean(state, allowed as std::ffi::c_int);
            1
        }
        Ok(Err(text)) => {
            convert::raw::push_error_table(state, text);
            drop(_unlimited);
            ffi::lua_error(state)
        }
        Err(_) => {
            convert::raw::push_error_table(state, crate::errors::INTERNAL);
            drop(_unlimited);
            ffi::lua_error(state)
        }
    }
}

/// Runs the command whose arguments are on the stack and pushes its reply
/// as the script sees it (`Ok`) or an `{err=...}` table (`Err`). Never
/// raises a Lua error: the memory limit is lifted while it pushes, and a
/// panic becomes an error reply.
///
/// # Safety
/// `state` is the state Lua called [`redis_call`] or [`redis_pcall`] with:
/// upvalue 1 is the live [`Bridge`], the arguments are slots `1..=top`.
unsafe fn call_command(state: *mut ffi::lua_State) -> Result<(), ()> {
    let bridge = &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const Bridge);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _unlimited = Unlimited::new(&bridge.lua);
        let args = convert::raw::command_args(state)?;
        bridge
            .state
            .memory_of(bridge.kind)
            .store(bridge.lua.used_memory() as u64, Ordering::Relaxed);
        match bridge.current.with(|d| d(&args, Mode::Call)) {
            None => Err(crate::errors::CALL_OUTSIDE_SCRIPT),
            Some(Reply::Error(text)) => {
                convert::raw::push_error_table(state, &text);
                Ok(false)
            }
            Some(reply) => {
                convert::raw::push_reply(state, &reply, bridge.resp.load(Ordering::Relaxed) == 3);
                Ok(true)
            }
        }
    }));
    match outcome {
        Ok(Ok(true)) => Ok(()),
        Ok(Ok(false)) => Err(()),
        Ok(Err(text)) => {
            let _unlimited = Unlimited::new(&bridge.lua);
            convert::raw::push_error_table(state, text);
            Err(())
        }
        Err(_) => {
            let _unlimited = Unlimited::new(&bridge.lua);
            convert::raw::push_error_table(state, crate::errors::INTERNAL);
            Err(())
        }
    }
}

/// Registry key (a light userdata: this static's address, the same in
/// every VM) of the [`Bridge`] the instruction hook reads.
static HOOK_BRIDGE_KEY: u8 = 0;

/// Chunk name of coordis's own Lua code (glue.lua, cjson.lua).
const GLUE_SOURCE: &[u8] = b"=coordis";

/// Installs the instruction hook (Redis's `luaMaskCountHook`) on the raw Lua
/// API: every [`HOOK_EVERY`] instructions it lets a long script leave its
/// tokio worker thread, serves the requests connections left for a busy
/// script ([`crate::exec::busy::Inbox`]), and stops a script SCRIPT KILL,
/// FUNCTION KILL or a shutdown asked to stop.
///
/// A raw hook rather than mlua's: coroutines a script creates inherit the C
/// hook (mlua's per-thread hook skips them), and the hook must re-arm itself
/// (see [`script_hook`]), which mlua's callback cannot do. `bridge` must
/// outlive the VM: [`Scripting`] holds it, boxed.
fn install_hook(lua: &Lua, bridge: &Bridge) -> mlua::Result<()> {
    let bridge = bridge as *const Bridge as *mut std::ffi::c_void;
    // SAFETY: plain stack operations on the main thread inside mlua's
    // protected call; the registry keeps only a light userdata.
    unsafe {
        lua.exec_raw::<()>((), |l| {
            ffi::lua_pushlightuserdata(l, &HOOK_BRIDGE_KEY as *const u8 as *mut std::ffi::c_void);
            ffi::lua_pushlightuserdata(l, bridge);
            ffi::lua_rawset(l, ffi::LUA_REGISTRYINDEX);
            arm_count_hook(l);
        })
    }
}

/// The hook's normal mode: every [`HOOK_EVERY`] instructions.
///
/// # Safety
/// `l` is a valid state of the VM, on the thread that runs it.
unsafe fn arm_count_hook(l: *mut ffi::lua_State) {
    ffi::lua_sethook(l, Some(script_hook), ffi::LUA_MASKCOUNT, HOOK_EVERY as std::ffi::c_int);
}

/// The instruction hook. While the script runs on, it lets it leave its
/// tokio worker and serves what connections left in the busy script's
/// [`ScriptState::inbox`]. Once the running script is to stop, it raises
/// Redis's kill error, and switches itself to fire on every new line and
/// every backward jump, as Redis does: a script that catches the error with
/// `pcall` and loops is stopped again at its next line, until it returns.
/// It never raises inside coordis's own Lua code (the `pcall` wrapper, the
/// error handler), which stands for Redis's C functions and always returns
/// to the script. The next script finds the hook on every line and not
/// killed: it goes back to counting.
///
/// # Safety
/// Called by Lua only, as the hook [`install_hook`] set, with the state
/// it runs and its debug record; the registry holds the [`Bridge`] (kept
/// alive by [`Scripting`]) under [`HOOK_BRIDGE_KEY`].
unsafe extern "C-unwind" fn script_hook(l: *mut ffi::lua_State, ar: *mut ffi::lua_Debug) {
    ffi::lua_pushlightuserdata(l, &HOOK_BRIDGE_KEY as *const u8 as *mut std::ffi::c_void);
    ffi::lua_rawget(l, ffi::LUA_REGISTRYINDEX);
    let bridge = ffi::lua_touserdata(l, -1) as *const Bridge;
    ffi::lua_pop(l, 1);
    // SAFETY: set by `install_hook`; `Scripting` keeps the bridge alive.
    let Some(bridge) = bridge.as_ref() else {
        return;
    };
    let state = &*bridge.state;
    let load_overdue = state.load_overdue();
    let stopping = (state.is_running() && state.must_stop()) || load_overdue;
    if !stopping {
        if (*ar).event == ffi::LUA_HOOKLINE {
            arm_count_hook(l);
        }
        if state.is_running() {
            // Nothing here may unwind into Lua's C frames.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| state.maybe_detach()));
            if state.inbox.has_requests() {
                let serve = || bridge.current.with(|d| d(&[], Mode::Serve));
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(serve));
            }
        }
        return;
    }
    if (*ar).event != ffi::LUA_HOOKLINE {
        ffi::lua_sethook(l, Some(script_hook), ffi::LUA_MASKLINE, 0);
    }
    if ffi::lua_getinfo(l, c"S".as_ptr(), ar) != 0
        && !(*ar).source.is_null()
        && std::ffi::CStr::from_ptr((*ar).source).to_bytes() == GLUE_SOURCE
    {
        return;
    }
    // Redis's error table: glue.lua's pcall gives the script its text, and
    // the error handler adds where the script was. No Rust value is live
    // across the error's longjmp.
    let text = if load_overdue {
        crate::errors::FUNCTION_LOAD_TIMEOUT
    } else {
        crate::errors::SCRIPT_KILLED
    };
    ffi::lua_createtable(l, 0, 1);
    ffi::lua_pushlstring(l, text.as_ptr().cast(), text.len());
    ffi::lua_setfield(l, -2, c"err".as_ptr());
    ffi::lua_error(l);
}

/// How long a library's body may run when it is loaded (Redis's
/// `LOAD_TIMEOUT_MS`): it should only register functions.
pub(crate) const LOAD_TIMEOUT_MS: u64 = 500;

impl ScriptState {
    /// A library's body starts running (`true`, for at most
    /// [`LOAD_TIMEOUT_MS`]) or has ended (`false`).
    pub(crate) fn set_loading(&self, loading: bool) {
        let deadline = if loading {
            monotonic_us() + LOAD_TIMEOUT_MS * 1000
        } else {
            0
        };
        self.load_deadline_us.store(deadline, Ordering::Relaxed);
    }

    /// Whether a library's body has run past its time.
    fn load_overdue(&self) -> bool {
        let deadline = self.load_deadline_us.load(Ordering::Relaxed);
        deadline != 0 && monotonic_us() > deadline
    }

    /// Whether the running script must stop: SCRIPT KILL / FUNCTION KILL,
    /// or the server is shutting down.
    pub fn must_stop(&self) -> bool {
        self.kill.load(Ordering::Relaxed) || self.shutdown.load(Ordering::Relaxed)
    }

    /// Stops the running script and every later one at their next hook,
    /// even one that wrote: the server is going away.
    pub fn stop_for_shutdown(&self) {
        self.shutdown.store(true, Ordering::Relaxed);
    }

    /// A signal's shutdown stopped a script, then did not go ahead (its
    /// final save failed): the server keeps serving, and scripts run again.
    pub(crate) fn resume_after_refused_shutdown(&self) {
        self.shutdown.store(false, Ordering::Relaxed);
    }

    /// Leaves the tokio worker thread once the script has run for
    /// [`DETACH_AFTER_MS`], then every [`DETACH_RETRY_MS`].
    fn maybe_detach(&self) {
        let elapsed_ms = monotonic_us().saturating_sub(self.run_started_us.load(Ordering::Relaxed)) / 1000;
        if elapsed_ms >= self.next_detach_ms.load(Ordering::Relaxed) {
            self.next_detach_ms
                .store(elapsed_ms + DETACH_RETRY_MS, Ordering::Relaxed);
            detach_from_runtime();
        }
    }
}

/// Lets the tokio runtime replace the current worker thread, so a long
/// script no longer holds up the tasks queued on it: `block_in_place` hands
/// this worker's queue to a fresh thread. The short sleep gives that thread
/// time to take the queue; if it has not, tokio gives the queue back when the
/// closure returns and the next attempt (a second later) tries again. Only
/// possible on a multi-threaded runtime; elsewhere a no-op.
fn detach_from_runtime() {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
            tokio::task::block_in_place(|| std::thread::sleep(std::time::Duration::from_millis(2)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_matches_redis() {
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    fn vm() -> Scripting {
        Scripting::new(64 * 1024 * 1024, Arc::new(ScriptState::default())).unwrap()
    }

    fn eval(s: &mut Scripting, body: &str) -> Reply {
        let sha = s.load(body.as_bytes()).unwrap();
        s.run(&sha, &[], &[], 1, &mut |_args: &[Bytes], _mode| Reply::Ok)
            .unwrap()
    }

    /// Redis answers a result nested deeper than its Lua stack with an
    /// error in place of the innermost tables: 7,995 levels, then the
    /// error. Converting, encoding and dropping such a reply must not
    /// overflow a 2 MB thread stack (tokio's default), in a debug build too.
    #[test]
    fn deeply_nested_results_stop_where_redis_stops_without_overflowing() {
        let out = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                let mut s = vm();
                let reply = eval(
                    &mut s,
                    "local t = {} local c = t for i = 1, 20000 do c[1] = {} c = c[1] end return t",
                );
                let mut out = bytes::BytesMut::new();
                reply.encode(&mut out, false);
                drop(reply);
                out
            })
            .unwrap()
            .join()
            .unwrap();
        let text = String::from_utf8_lossy(&out);
        assert_eq!(text.matches("*1\r\n").count(), 7995, "{}", &text[..text.len().min(300)]);
        assert!(
            text.ends_with("*1\r\n-ERR reached lua stack limit\r\n"),
            "{}",
            &text[text.len() - 60..]
        );
    }

    #[test]
    fn every_script_sees_plain_keys_and_argv() {
        let mut s = vm();
        let mut run = |body: &str, keys: &[&str], argv: &[&str]| {
            let sha = s.load(body.as_bytes()).unwrap();
            let k: Vec<Bytes> = keys.iter().map(|x| Bytes::copy_from_slice(x.as_bytes())).collect();
            let a: Vec<Bytes> = argv.iter().map(|x| Bytes::copy_from_slice(x.as_bytes())).collect();
            s.run(&sha, &k, &a, 1, &mut |_args: &[Bytes], _mode| Reply::Ok).unwrap()
        };
        let shape = "return {#KEYS, #ARGV, tostring(KEYS[1]), tostring(ARGV[2]), tostring(KEYS.x), tostring(getmetatable(ARGV))}";
        let bulk = |x: &str| Reply::Bulk(Bytes::copy_from_slice(x.as_bytes()));
        assert_eq!(
            run(shape, &["k1", "k2"], &["a1", "a2", "a3"]),
            Reply::Array(vec![
                Reply::Int(2),
                Reply::Int(3),
                bulk("k1"),
                bulk("a2"),
                bulk("nil"),
                bulk("nil")
            ])
        );
        // Fewer arguments than the previous script: no leftovers.
        assert_eq!(
            run(shape, &[], &["b1"]),
            Reply::Array(vec![
                Reply::Int(0),
                Reply::Int(1),
                bulk("nil"),
                bulk("nil"),
                bulk("nil"),
                bulk("nil")
            ])
        );
        // A script that changes the tables does not leak the change.
        run(
            "KEYS.x = 1 table.insert(ARGV, 'extra') setmetatable(ARGV, {}) return 1",
            &["k"],
            &["a"],
        );
        assert_eq!(
            run(shape, &["k"], &[]),
            Reply::Array(vec![
                Reply::Int(1),
                Reply::Int(0),
                bulk("k"),
                bulk("nil"),
                bulk("nil"),
                bulk("nil")
            ])
        );
        run("KEYS[5] = 'far' ARGV[1] = nil return 1", &["k"], &["a"]);
        assert_eq!(
            run("return {#KEYS, #ARGV, tostring(KEYS[5])}", &["k"], &["a"]),
            Reply::Array(vec![Reply::Int(1), Reply::Int(1), bulk("nil")])
        );
    }

    #[test]
    fn kill_flag_stops_a_busy_loop() {
        let mut s = vm();
        let state = s.state.clone();
        let killer = std::thread::spawn(move || {
            while !state.is_running() {
                std::thread::yield_now();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            state.kill.store(true, Ordering::Relaxed);
        });
        let reply = eval(&mut s, "local i = 0 while true do i = i + 1 end");
        killer.join().unwrap();
        match reply {
            Reply::Error(e) => assert!(
                e.starts_with("ERR Script killed by user with SCRIPT KILL... script: "),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(eval(&mut s, "return 1"), Reply::Int(1));
    }

    /// Runs `body` while another thread sets the stop flag `stop` picks
    /// once the script runs; the script's reply.
    fn eval_stopped(s: &mut Scripting, body: &str, stop: fn(&ScriptState)) -> Reply {
        let state = s.state.clone();
        let killer = std::thread::spawn(move || {
            while !state.is_running() {
                std::thread::yield_now();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            stop(&state);
        });
        let reply = eval(s, body);
        killer.join().unwrap();
        reply
    }

    fn assert_killed(reply: &Reply, body: &str) {
        match reply {
            Reply::Error(e) => assert!(
                e.starts_with("ERR Script killed by user with SCRIPT KILL... script: ")
                    && e.ends_with("@user_script:1."),
                "{body}: {e}"
            ),
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn kill_flag_stops_scripts_that_catch_the_error_and_coroutines() {
        let mut s = vm();
        for body in [
            "while 1 do pcall(function() while 1 do end end) end",
            "local f = function() while true do end end; while true do pcall(f) end",
            "while true do pcall(coroutine.wrap(function() while true do end end)) end",
            "local co = coroutine.wrap(function() while true do end end) co()",
            "while true do pcall(cjson.decode, '[1, 2, 3]') end",
        ] {
            let reply = eval_stopped(&mut s, body, |st| st.kill.store(true, Ordering::Relaxed));
            assert_killed(&reply, body);
            // The hook counts again: the next script is not stopped.
            assert_eq!(
                eval(&mut s, "local i = 0 for j = 1, 100000 do i = i + 1 end return i"),
                Reply::Int(100000)
            );
        }
    }

    #[test]
    fn pcall_gives_the_kill_error_as_text() {
        let mut s = vm();
        // The stop is caught once; the script returns on the same line,
        // before its next line event.
        let body = "local ok, e = pcall(function() while true do end end) return {tostring(ok), type(e), e}";
        let reply = eval_stopped(&mut s, body, |st| st.kill.store(true, Ordering::Relaxed));
        let bulk = |x: &str| Reply::Bulk(Bytes::copy_from_slice(x.as_bytes()));
        assert_eq!(
            reply,
            Reply::Array(vec![bulk("false"), bulk("string"), bulk(crate::errors::SCRIPT_KILLED)])
        );
    }

    #[test]
    fn a_shutdown_stops_the_running_script_and_every_later_one() {
        let mut s = vm();
        let body = "redis.call('set', 'k', 'v') while true do pcall(function() while true do end end) end";
        let reply = eval_stopped(&mut s, body, ScriptState::stop_for_shutdown);
        assert_killed(&reply, body);
        // A script started afterwards is stopped at its first hook, though
        // each start clears the kill flag.
        assert_killed(&eval(&mut s, "while true do end"), "later");
    }
}
