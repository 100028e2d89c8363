//! Redis 7 functions on the scripting VM: libraries loaded with FUNCTION
//! LOAD, kept until deleted (SCRIPT FLUSH and FLUSHALL leave them), and
//! their functions called with FCALL / FCALL_RO.
//!
//! A library's code runs once, at load, in glue.lua's load mode: its only
//! global is `redis` with `register_function`, `log`, the log levels and the
//! version (Redis 7.0's library API), so it can do nothing but register.
//! The callbacks it registers run later with a script's globals minus KEYS
//! and ARGV (they get keys and arguments as their two parameters); globals
//! are read-only in both modes, so libraries cannot see or change each
//! other's state. The commands are in `cmd/functions.rs`; the payload of
//! FUNCTION DUMP / RESTORE in [`dump`] and [`restore`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use bytes::Bytes;
use mlua::{ffi, Function, Table, Value};

use super::{lua_error_text, monotonic_us, Dispatch, Returned, Scripting, Unlimited, DETACH_AFTER_MS};
use crate::errors;
use crate::persist::rdb;
use crate::protocol::Reply;

/// A function's flags, as `register_function` and EVAL's shebang name them,
/// in the order Redis lists them.
pub(crate) const FLAG_NAMES: [&str; 5] = [
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// One registered function.
#[derive(Debug, Clone)]
pub struct FunctionInfo {
    pub name: String,
    pub description: Option<Bytes>,
    /// Names from [`FLAG_NAMES`], in that order.
    pub flags: Vec<&'static str>,
    callback: Function,
}

impl FunctionInfo {
    pub fn no_writes(&self) -> bool {
        self.flags.contains(&"no-writes")
    }

    pub fn allow_oom(&self) -> bool {
        self.flags.contains(&"allow-oom")
    }

    pub fn no_cluster(&self) -> bool {
        self.flags.contains(&"no-cluster")
    }

    pub fn allow_cross_slot(&self) -> bool {
        self.flags.contains(&"allow-cross-slot-keys")
    }
}

/// A loaded library: its code as given (shebang included) and functions.
#[derive(Debug, Clone)]
pub struct Library {
    pub name: String,
    pub code: Bytes,
    pub functions: Vec<FunctionInfo>,
}

/// Every library by name, and every function by lower-case name (FCALL
/// finds functions case-insensitively; library names are case-sensitive).
#[derive(Debug, Default, Clone)]
pub struct Libraries {
    by_name: BTreeMap<String, Library>,
    functions: HashMap<String, String, foldhash::fast::RandomState>,
}

impl Libraries {
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    /// Libraries in name order.
    pub fn iter(&self) -> impl Iterator<Item = &Library> {
        self.by_name.values()
    }

    pub fn get(&self, name: &str) -> Option<&Library> {
        self.by_name.get(name)
    }

    /// The function called `name` (any case).
    pub fn function(&self, name: &str) -> Option<&FunctionInfo> {
        let library = self.functions.get(&name.to_ascii_lowercase())?;
        self.by_name[library]
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
    }

    fn remove(&mut self, name: &str) -> Option<Library> {
        let library = self.by_name.remove(name)?;
        for f in &library.functions {
            self.functions.remove(&f.name.to_ascii_lowercase());
        }
        Some(library)
    }

    /// Adds `library`, unless one of its functions belongs to another
    /// library: Redis's `Function x already exists`.
    fn add(&mut self, library: Library) -> Result<(), Reply> {
        if let Some(f) = library
            .functions
            .iter()
            .find(|f| self.functions.contains_key(&f.name.to_ascii_lowercase()))
        {
            return Err(errors::function_exists(&f.name));
        }
        for f in &library.functions {
            self.functions.insert(f.name.to_ascii_lowercase(), library.name.clone());
        }
        self.by_name.insert(library.name.clone(), library);
        Ok(())
    }
}

/// A library's name from its shebang line (`#!lua name=<lib>`), with
/// Redis's errors; also where the code after the shebang starts.
fn metadata(code: &[u8]) -> Result<(String, usize), Reply> {
    if !code.starts_with(b"#!") {
        return Err(errors::err(errors::LIBRARY_METADATA_MISSING));
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err(errors::err(errors::LIBRARY_METADATA_INVALID));
    };
    let parts = match crate::protocol::split_args(&code[..end]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err(errors::err(errors::LIBRARY_METADATA_INVALID)),
    };
    let engine = String::from_utf8_lossy(&parts[0][2..]).into_owned();
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(errors::err(errors::LIBRARY_NAME_TWICE));
            }
            name = Some(String::from_utf8_lossy(&part[5..]).into_owned());
            continue;
        }
        return Err(errors::metadata_value(part));
    }
    let Some(name) = name else {
        return Err(errors::err(errors::LIBRARY_NAME_MISSING));
    };
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(errors::engine_not_found(&engine));
    }
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(errors::err(errors::LIBRARY_NAME_INVALID));
    }
    Ok((name, end))
}

/// What FUNCTION RESTORE does with the libraries already loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Keep them; a library of the same name is an error.
    Append,
    /// Replace those of the same name.
    Replace,
    /// Delete them all first.
    Flush,
}

impl Scripting {
    /// The loaded libraries.
    pub fn libraries(&self) -> &Libraries {
        &self.libraries
    }

    /// FUNCTION LOAD: compiles and runs `code`, registering its functions;
    /// returns the library's name.
    pub fn load_library(&mut self, code: &Bytes, replace: bool) -> Result<String, Reply> {
        let library = self.compile_library(code, replace)?;
        let name = library.name.clone();
        let mut next = self.libraries.clone();
        if replace {
            next.remove(&name);
        }
        next.add(library)?;
        self.libraries = next;
        Ok(name)
    }

    /// Compiles and runs one library's code (checking only that the name is
    /// free unless `replace`), without installing it.
    fn compile_library(&mut self, code: &Bytes, replace: bool) -> Result<Library, Reply> {
        let (name, body_at) = metadata(code)?;
        if !replace && self.libraries.get(&name).is_some() {
            return Err(errors::library_exists(&name));
        }
        let chunk = self
            .functions
            .lua
            .load(&code[body_at..])
            .set_name("@user_function")
            .set_mode(mlua::chunk::ChunkMode::Text)
            .into_function()
            .map_err(|e| errors::function_compile_error(&lua_error_text(&e)))?;
        // The handler turns any error into Redis's {err=...}; the glue's
        // load_library runs the chunk in load mode.
        let (handler, loader) = (self.functions.handler.clone(), self.functions.load_library.clone());
        // The body may loop: the hook stops it past Redis's load timeout.
        // (Redis waits forever for a library loaded from a file or a
        // primary; coordis applies the timeout there too.)
        self.state.set_loading(true);
        let ran = self
            .functions
            .lua
            .load("local handler, load, chunk = ... return xpcall(function() return load(chunk) end, handler)")
            .set_name("=coordis")
            .call::<(bool, Value)>((handler, loader, chunk));
        self.state.set_loading(false);
        self.functions.note_memory();
        let result: mlua::Result<Table> = ran.and_then(|(ok, value)| match (ok, value) {
            (true, Value::Table(t)) => Ok(t),
            (_, Value::Table(err)) => Err(mlua::Error::runtime(
                err.raw_get::<String>("err")
                    .unwrap_or_else(|_| "ERR unknown error".into()),
            )),
            (_, other) => Err(mlua::Error::runtime(format!("ERR {other:?}"))),
        });
        let registered = result.map_err(|e| errors::registering_functions(&lua_error_text(&e)))?;
        let mut functions = vec![];
        for entry in registered.sequence_values::<Table>() {
            let entry = entry.map_err(|e| errors::registering_functions(&lua_error_text(&e)))?;
            let flags: Vec<String> = entry.raw_get::<Vec<String>>(3).unwrap_or_default();
            functions.push(FunctionInfo {
                name: entry.raw_get::<String>(1).unwrap_or_default(),
                callback: entry
                    .raw_get::<Function>(2)
                    .map_err(|e| errors::registering_functions(&lua_error_text(&e)))?,
                flags: FLAG_NAMES
                    .iter()
                    .copied()
                    .filter(|f| flags.iter().any(|g| g == f))
                    .collect(),
                description: entry
                    .raw_get::<Option<mlua::LuaString>>(4)
                    .ok()
                    .flatten()
                    .map(|d| Bytes::copy_from_slice(&d.as_bytes())),
            });
        }
        if functions.is_empty() {
            return Err(errors::err(errors::NO_FUNCTIONS_REGISTERED));
        }
        Ok(Library {
            name,
            code: code.clone(),
            functions,
        })
    }

    /// FUNCTION DELETE; false when there is no such library.
    pub fn delete_library(&mut self, name: &str) -> bool {
        let deleted = self.libraries.remove(name).is_some();
        self.release_function_cjson();
        deleted
    }

    /// With no library left, no function can hold the functions' cjson:
    /// it may go, so that cjson.lua's code is unloaded once scripts have
    /// none either (its settings stay, as in Redis's function VM).
    fn release_function_cjson(&self) {
        if self.libraries.is_empty() {
            let _ = self.functions.forget_function_cjson.call::<()>(());
        }
    }

    /// FUNCTION FLUSH: every library removed and freed by `freer` (on its
    /// thread when `lazy` and they hold more than 64 functions, as Redis's
    /// `freeFunctionsAsync`; a lazy flush leaves the chunks to Lua's
    /// incremental collector).
    pub(crate) fn flush_functions(&mut self, freer: &crate::lazyfree::LazyFree, lazy: bool) {
        let libraries = std::mem::take(&mut self.libraries);
        let count = libraries.function_count();
        freer.free_collection(Box::new(libraries), count, lazy);
        self.release_function_cjson();
        if !lazy {
            let _ = self.functions.lua.gc_collect();
        }
        self.functions.note_memory();
    }

    /// FUNCTION RESTORE: loads every library in `codes`, all or nothing.
    pub fn restore_libraries(&mut self, codes: Vec<Bytes>, policy: RestorePolicy) -> Result<(), Reply> {
        let mut next = match policy {
            RestorePolicy::Flush => Libraries::default(),
            RestorePolicy::Append | RestorePolicy::Replace => self.libraries.clone(),
        };
        for code in codes {
            let library = self.compile_library(&code, true)?;
            if next.get(&library.name).is_some() {
                if policy == RestorePolicy::Append {
                    return Err(errors::restored_library_exists(&library.name));
                }
                next.remove(&library.name.clone());
            }
            next.add(library)?;
        }
        self.libraries = next;
        Ok(())
    }

    /// FCALL: runs function `name` with `keys` and `args` as its two
    /// parameters. `None` when there is no such function.
    pub fn call_function(
        &mut self,
        name: &str,
        keys: &[Bytes],
        args: &[Bytes],
        now_ms: u64,
        dispatch: &mut Dispatch,
    ) -> Option<Reply> {
        let function = self.libraries.function(name)?.clone();
        self.functions.bridge.resp.store(2, Ordering::Relaxed);
        self.state.kill.store(false, Ordering::Relaxed);
        self.state.wrote.store(false, Ordering::Relaxed);
        self.state.repl_withheld.store(0, Ordering::Relaxed);
        self.state.function.store(true, Ordering::Relaxed);
        self.state.started_ms.store(now_ms.max(1), Ordering::Release);
        self.state.run_started_us.store(monotonic_us(), Ordering::Relaxed);
        self.state.next_detach_ms.store(DETACH_AFTER_MS, Ordering::Relaxed);
        let vm = &mut self.functions;
        let mut dispatch: &mut Dispatch = dispatch;
        vm.bridge
            .current
            .0
            .store(&mut dispatch as *mut &mut Dispatch as *mut (), Ordering::Release);
        let out = vm.call_callback(&function.callback, keys, args);
        vm.bridge.current.0.store(std::ptr::null_mut(), Ordering::Release);
        let reply = out.and_then(|returned| vm.returned_reply(returned, &function.name));
        if reply.is_err() {
            let _ = vm.lua.gc_collect();
        }
        vm.pace_gc();
        vm.note_memory();
        self.state.started_ms.store(0, Ordering::Release);
        self.state.function.store(false, Ordering::Relaxed);
        self.state.kill.store(false, Ordering::Relaxed);
        Some(reply.unwrap_or_else(|e| errors::script_failed(&lua_error_text(&e))))
    }
}

impl super::Vm {
    /// Calls `callback(keys, args)` under the error handler, on the raw Lua
    /// C API as [`super::Vm::call_script`] calls a script.
    fn call_callback(&self, callback: &Function, keys: &[Bytes], args: &[Bytes]) -> mlua::Result<Returned> {
        self.lua.exec_raw_lua(|raw| {
            // SAFETY: as in `call_script`: nothing here raises outside the
            // protected call, and the stack is restored to `base` on every path.
            unsafe {
                let state = raw.state();
                let base = ffi::lua_gettop(state);
                let restore = |result| {
                    ffi::lua_settop(state, base);
                    result
                };
                {
                    let _unlimited = Unlimited::new(&self.lua);
                    if ffi::lua_checkstack(state, 8) == 0 {
                        return restore(Err(mlua::Error::StackError));
                    }
                    if let Err(e) = raw.push(&self.handler).and_then(|_| raw.push(callback)) {
                        return restore(Err(e));
                    }
                    for items in [keys, args] {
                        ffi::lua_createtable(state, items.len().min(i32::MAX as usize) as i32, 0);
                        super::fill_array(state, ffi::lua_gettop(state), items, 0);
                    }
                }
                let status = ffi::lua_pcall(state, 2, 1, base + 1);
                let returned = self.pop_returned(state, status, || raw.pop_value());
                restore(Ok(returned))
            }
        })
    }
}

/// FUNCTION DUMP's payload: every library's code as an RDB string after
/// its opcode (`FUNCTION2`), then the RDB version and a CRC-64 of all
/// before it, as Redis's DUMP writes them; `compress` is `rdbcompression`.
pub(crate) fn dump(libraries: &Libraries, compress: bool) -> Vec<u8> {
    let mut out = rdb::Out::new(compress);
    for library in libraries.iter() {
        rdb::file::put_function(&mut out, &library.code);
    }
    rdb::payload::seal(out.buf)
}

/// The libraries' code in a FUNCTION DUMP payload (Redis's or coordis's),
/// or `None` when the version, checksum or layout is wrong.
pub(crate) fn restore(payload: &[u8]) -> Option<Vec<Bytes>> {
    let body = rdb::payload::open(payload).ok()?;
    let mut input = rdb::Input::new(body);
    let mut codes = vec![];
    while !input.is_empty() {
        match input.u8().ok()? {
            rdb::opcodes::FUNCTION2 => codes.push(Bytes::from(input.string().ok()?.into_owned())),
            // 7.0's release candidates' format (FUNCTION) is refused by
            // Redis too, as is anything else.
            _ => return None,
        }
    }
    Some(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_taken_from_redis_restores() {
        // FUNCTION DUMP of Redis 7.0.15 holding one library.
        let payload = b"\xf5@B#!lua name=q\nredis.register_function('f', function() return 1 end)\n\x00\xc2\xfd\x98\x9a\xeeV\xd0T";
        let codes = restore(payload).expect("valid payload");
        assert_eq!(
            codes,
            vec![Bytes::from_static(
                b"#!lua name=q\nredis.register_function('f', function() return 1 end)"
            )]
        );
        let mut bad = payload.to_vec();
        bad[5] ^= 1;
        assert!(restore(&bad).is_none());
    }

    #[test]
    fn shebang_metadata() {
        assert_eq!(metadata(b"#!lua name=lib\ncode").ok(), Some(("lib".to_string(), 14)));
        assert_eq!(metadata(b"#!LUA  NAME=x\n").ok(), Some(("x".to_string(), 13)));
        assert!(metadata(b"return 1").is_err());
        assert!(metadata(b"#!lua name=x").is_err());
        assert!(metadata(b"#!lua\n").is_err());
        assert!(metadata(b"#!lua name=a-b\n").is_err());
        assert!(metadata(b"#!lua name=a name=b\n").is_err());
        assert!(metadata(b"#!js name=a\n").is_err());
    }
}
