//! The script environment, as Redis 7.0 builds it: base, table, string and
//! math libraries, `bit` (and `cjson`, loaded on first use by `glue.lua`);
//! no io, os, package/require, loadfile,
//! dofile, print, getfenv/setfenv, debug; globals (and the library tables)
//! read-only, and reading an undefined global is an error.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use super::{convert, sha1_hex};
use crate::REDIS_VERSION;

const GLUE: &str = include_str!("glue.lua");

/// Globals Redis removes (or never loads).
const REMOVED: &[&str] = &[
    "dofile", "loadfile", "print", "getfenv", "setfenv", "newproxy", "module", "require", "package", "debug", "io",
    "os",
];

/// A Lua error carrying an exact error text: glue.lua's handler finds the
/// text between the \u{1} and \u{2} markers and makes it the script's error.
pub(super) fn raise<T>(text: &str) -> mlua::Result<T> {
    Err(mlua::Error::runtime(format!("\u{1}{text}\u{2}")))
}

/// `user_script:LINE: ` for the script line calling the current Rust function,
/// as `luaL_error` prefixes errors raised by Redis's C libraries.
pub(super) fn script_position(lua: &Lua) -> String {
    lua.inspect_stack(1, |d| d.current_line())
        .flatten()
        .map(|line| format!("user_script:{line}: "))
        .unwrap_or_default()
}

/// What [`create`] hands to [`super::Scripting`].
pub(super) struct Vm {
    pub lua: Lua,
    /// glue.lua's error handler (Redis 7.0's `__redis__err__handler`): the
    /// message handler scripts are called under.
    pub handler: Function,
    /// glue.lua's `adopt`: gives a compiled script the read-only environment.
    pub adopt: Function,
    /// glue.lua's `load_library`: runs a library's code in load mode and
    /// returns what it registered.
    pub load_library: Function,
    /// The real `redis` table (`call`/`pcall` are installed by the caller).
    pub redis: Table,
    /// The table behind scripts' read-only globals (KEYS and ARGV go here).
    pub visible: Table,
    /// glue.lua's `forget_function_cjson`: with no library left, the
    /// functions' cjson goes (its settings stay).
    pub forget_function_cjson: Function,
}

/// Builds the VM.
pub(super) fn create(resp: Arc<AtomicU8>, state: Arc<super::ScriptState>) -> mlua::Result<Vm> {
    // SAFETY: the debug library is loaded only to give the error handler
    // `debug.getinfo`; scripts cannot reach it (see REMOVED).
    let lua = unsafe {
        Lua::unsafe_new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
            LuaOptions::default(),
        )
    };
    let globals = lua.globals();
    let getinfo: Function = globals.get::<Table>("debug")?.get("getinfo")?;
    let setfenv: Function = globals.get("setfenv")?;

    let redis = lua.create_table()?;
    redis.raw_set("REDIS_VERSION", REDIS_VERSION)?;
    let mut parts = REDIS_VERSION.split('.').map(|p| p.parse::<i64>().unwrap_or(0));
    let num = (parts.next().unwrap_or(0) << 16) | (parts.next().unwrap_or(0) << 8) | parts.next().unwrap_or(0);
    redis.raw_set("REDIS_VERSION_NUM", num)?;
    for (name, level) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
    ] {
        redis.raw_set(name, level)?;
    }
    for (name, v) in [
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.raw_set(name, v)?;
    }
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise("ERR wrong number of arguments");
            }
            // Redis hashes what `lua_tolstring` gives: a string or number's
            // text, and nothing (the empty string) for nil, a table or a boolean.
            match lua.coerce_string(args[0].clone())? {
                Some(s) => Ok(sha1_hex(&s.as_bytes())),
                None => Ok(sha1_hex(b"")),
            }
        })?,
    )?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| match (args.len(), args.front()) {
            (1, Some(Value::String(s))) => convert::error_table(lua, &convert::error_reply_text(&s.to_string_lossy())),
            _ => convert::error_table(lua, "ERR wrong number or type of arguments"),
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| match (args.len(), args.front()) {
            (1, Some(Value::String(s))) => {
                let t = lua.create_table()?;
                t.raw_set("ok", s.clone())?;
                Ok(t)
            }
            _ => convert::error_table(lua, "ERR wrong number or type of arguments"),
        })?,
    )?;
    redis.raw_set(
        "setresp",
        lua.create_function(move |_, args: MultiValue| {
            if args.len() != 1 {
                return raise("ERR redis.setresp() requires one argument.");
            }
            let v = match args[0] {
                Value::Integer(v) => v as f64,
                Value::Number(v) => v,
                _ => -1.0,
            };
            if v != 2.0 && v != 3.0 {
                return raise("ERR RESP version must be 2 or 3.");
            }
            resp.store(v as u8, Ordering::Relaxed);
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "log",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() < 2 {
                return raise("ERR redis.log() requires two arguments or more.");
            }
            let level = match args[0] {
                Value::Integer(l) => l as f64,
                Value::Number(l) => l,
                _ => return raise("ERR First argument must be a number (log level)."),
            };
            let mut message = String::new();
            for (i, v) in args.iter().skip(1).enumerate() {
                if i > 0 {
                    message.push(' ');
                }
                if let Some(s) = lua.coerce_string(v.clone())? {
                    message.push_str(&s.to_string_lossy());
                }
            }
            match level as i64 {
                0 | 1 => tracing::debug!(target: "coordis::script", "{message}"),
                2 => tracing::info!(target: "coordis::script", "{message}"),
                3 => tracing::warn!(target: "coordis::script", "{message}"),
                _ => return raise("ERR Invalid debug level."),
            }
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "set_repl",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                // Redis 7.0's text, though one argument is what it wants.
                return raise("ERR redis.set_repl() requires two arguments.");
            }
            // `lua_tonumber`: what is not a number is 0 (REPL_NONE); a
            // fraction is truncated, as C's conversion to int does.
            let flags = lua.coerce_number(args[0].clone()).ok().flatten().unwrap_or(0.0) as i64;
            let all = i64::from(super::REPL_AOF | super::REPL_REPLICA);
            if flags & !all != 0 {
                return raise("ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
            }
            state.repl_withheld.store(!(flags as u8) & all as u8, Ordering::Relaxed);
            Ok(())
        })?,
    )?;
    redis.raw_set("replicate_commands", lua.create_function(|_, _: MultiValue| Ok(true))?)?;
    redis.raw_set("breakpoint", lua.create_function(|_, _: MultiValue| Ok(false))?)?;
    redis.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;

    // The globals scripts see: the standard ones minus REMOVED, plus Redis's libraries.
    let visible = lua.create_table()?;
    for pair in globals.pairs::<Value, Value>() {
        let (k, v) = pair?;
        if let Value::String(name) = &k {
            if REMOVED.iter().any(|r| name.as_bytes().as_ref() == r.as_bytes()) || name.as_bytes().as_ref() == b"_G" {
                continue;
            }
        }
        visible.raw_set(k, v)?;
    }
    visible.raw_set("redis", redis.clone())?;
    visible.raw_set("bit", super::bit::create(&lua)?)?;
    visible.raw_set("struct", super::binary::create_struct(&lua)?)?;
    visible.raw_set("cmsgpack", super::binary::create_cmsgpack(&lua)?)?;
    // (cjson comes from glue.lua, which loads it on first use.)
    let (handler, adopt, load_library, forget_function_cjson): (Function, Function, Function, Function) = lua
        .load(GLUE)
        .set_name("=coordis")
        .call((getinfo, setfenv, visible.clone(), super::cjson::loader(&lua)?))?;
    for name in REMOVED {
        globals.raw_set(*name, Value::Nil)?;
    }
    Ok(Vm {
        lua,
        handler,
        adopt,
        load_library,
        redis,
        visible,
        forget_function_cjson,
    })
}
