//! Conversions between command replies and Lua values, as Redis 7.0's
//! `script_lua.c` does them.
//!
//! Reply → Lua (what `redis.call` returns): integer → number, bulk → string,
//! null → false (nil after `redis.setresp(3)`), array → table, status →
//! `{ok=...}`, error → `{err=...}`; with RESP3: map → `{map=...}`, set →
//! `{set=...}`, double → `{double=...}`, boolean → boolean.
//!
//! Lua → reply (what a script returns): string → bulk, number → integer
//! (truncated), true → 1, false/nil → null, `{err=}` → error, `{ok=}` →
//! status, `{double=}`/`{map=}`/`{set=}` → those types, other tables → array
//! up to the first nil.

use bytes::Bytes;
use mlua::{Lua, MultiValue, Table, Value};

use crate::protocol::{format_double, Reply};

/// Deepest table nesting converted to a reply (cycles end here too).
const MAX_DEPTH: usize = 1000;

/// A Lua number as C's `(long long)` cast produces it on this machine:
/// truncation, and on x86-64 `i64::MIN` for NaN and out-of-range values.
pub fn number_to_integer(d: f64) -> i64 {
    if cfg!(target_arch = "x86_64") && !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&d) {
        return i64::MIN;
    }
    d as i64
}

/// `redis.call` arguments: strings, or numbers in Lua's own formatting.
pub fn command_args(lua: &Lua, args: MultiValue) -> Result<Vec<Bytes>, String> {
    if args.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call".into());
    }
    let mut out = Vec::with_capacity(args.len());
    for v in args {
        match v {
            Value::String(s) => out.push(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Integer(_) | Value::Number(_) => match lua.coerce_string(v) {
                Ok(Some(s)) => out.push(Bytes::copy_from_slice(&s.as_bytes())),
                _ => return Err("ERR Lua redis lib command arguments must be strings or integers".into()),
            },
            _ => return Err("ERR Lua redis lib command arguments must be strings or integers".into()),
        }
    }
    Ok(out)
}

/// An error text as `redis.error_reply` stores it: `-CODE msg` keeps its
/// code, a text without a leading `-` gets one; a single word becomes
/// `ERR word`; trailing CR/LF are trimmed.
pub fn error_reply_text(text: &str) -> String {
    let body = text.strip_prefix('-').unwrap_or(text);
    match body.find(' ') {
        None => format!("ERR {}", body.trim_end_matches(['\r', '\n'])),
        Some(i) => format!("{} {}", &body[..i], body[i + 1..].trim_end_matches(['\r', '\n'])),
    }
}

/// `{err = text}`.
pub fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", error_reply_text(text))?;
    Ok(t)
}

fn string(lua: &Lua, b: &[u8]) -> mlua::Result<Value> {
    Ok(Value::String(lua.create_string(b)?))
}

fn wrapped(lua: &Lua, field: &str, v: Value) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(field, v)?;
    Ok(Value::Table(t))
}

/// A command's reply as the script sees it.
pub fn reply_to_lua(lua: &Lua, reply: &Reply, resp3: bool) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Ok => wrapped(lua, "ok", string(lua, b"OK")?)?,
        Reply::Status(s) => wrapped(lua, "ok", string(lua, s.as_bytes())?)?,
        Reply::Error(e) => Value::Table(error_table(lua, e)?),
        Reply::Int(i) => Value::Number(*i as f64),
        Reply::Bulk(b) => string(lua, b)?,
        Reply::Nil | Reply::NilArray => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Reply::Array(items) | Reply::Push(items) | Reply::Many(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, reply_to_lua(lua, item, resp3)?)?;
            }
            Value::Table(t)
        }
        Reply::Set(items) => {
            if resp3 {
                let set = lua.create_table()?;
                for item in items {
                    set.raw_set(reply_to_lua(lua, item, resp3)?, true)?;
                }
                wrapped(lua, "set", Value::Table(set))?
            } else {
                reply_to_lua(lua, &Reply::Array(items.clone()), false)?
            }
        }
        Reply::Map(pairs) => {
            if resp3 {
                let map = lua.create_table()?;
                for (k, v) in pairs {
                    map.raw_set(reply_to_lua(lua, k, resp3)?, reply_to_lua(lua, v, resp3)?)?;
                }
                wrapped(lua, "map", Value::Table(map))?
            } else {
                let t = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    t.raw_set(2 * i + 1, reply_to_lua(lua, k, false)?)?;
                    t.raw_set(2 * i + 2, reply_to_lua(lua, v, false)?)?;
                }
                Value::Table(t)
            }
        }
        Reply::Double(d) => {
            if resp3 {
                wrapped(lua, "double", Value::Number(*d))?
            } else {
                string(lua, format_double(*d).as_bytes())?
            }
        }
        Reply::Bool(b) => {
            if resp3 {
                Value::Boolean(*b)
            } else {
                Value::Number(if *b { 1.0 } else { 0.0 })
            }
        }
        Reply::Verbatim(format, text) => {
            if resp3 {
                let t = lua.create_table()?;
                t.raw_set("format", *format)?;
                t.raw_set("string", lua.create_string(text)?)?;
                wrapped(lua, "verbatim_string", Value::Table(t))?
            } else {
                string(lua, text)?
            }
        }
        Reply::ScorePairs(pairs) => {
            let t = lua.create_table()?;
            for (i, (m, s)) in pairs.iter().enumerate() {
                if resp3 {
                    let pair = lua.create_table()?;
                    pair.raw_set(1, lua.create_string(m)?)?;
                    pair.raw_set(2, reply_to_lua(lua, &Reply::Double(*s), true)?)?;
                    t.raw_set(i + 1, pair)?;
                } else {
                    t.raw_set(2 * i + 1, lua.create_string(m)?)?;
                    t.raw_set(2 * i + 2, string(lua, format_double(*s).as_bytes())?)?;
                }
            }
            Value::Table(t)
        }
    })
}

/// What a script returned, as the reply its caller gets.
pub fn lua_to_reply(value: &Value, resp3: bool) -> mlua::Result<Reply> {
    to_reply(value, resp3, 0)
}

fn sanitize(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

fn to_reply(value: &Value, resp3: bool, depth: usize) -> mlua::Result<Reply> {
    if depth > MAX_DEPTH {
        return Ok(Reply::Error("ERR reached lua stack limit".into()));
    }
    Ok(match value {
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(number_to_integer(*n)),
        Value::Boolean(true) => {
            if resp3 {
                Reply::Bool(true)
            } else {
                Reply::Int(1)
            }
        }
        Value::Boolean(false) => {
            if resp3 {
                Reply::Bool(false)
            } else {
                Reply::Nil
            }
        }
        Value::Table(t) => {
            if let Value::String(e) = t.raw_get::<Value>("err")? {
                return Ok(Reply::Error(sanitize(&e.to_string_lossy()).into()));
            }
            if let Value::String(s) = t.raw_get::<Value>("ok")? {
                return Ok(Reply::Status(sanitize(&s.to_string_lossy()).into()));
            }
            match t.raw_get::<Value>("double")? {
                Value::Number(d) => return Ok(Reply::Double(d)),
                Value::Integer(d) => return Ok(Reply::Double(d as f64)),
                _ => {}
            }
            if let Value::Table(m) = t.raw_get::<Value>("map")? {
                let mut pairs = vec![];
                for pair in m.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    pairs.push((to_reply(&k, resp3, depth + 1)?, to_reply(&v, resp3, depth + 1)?));
                }
                return Ok(Reply::Map(pairs));
            }
            if let Value::Table(s) = t.raw_get::<Value>("set")? {
                let mut items = vec![];
                for pair in s.pairs::<Value, Value>() {
                    let (k, _) = pair?;
                    items.push(to_reply(&k, resp3, depth + 1)?);
                }
                return Ok(Reply::Set(items));
            }
            let mut items = vec![];
            for i in 1.. {
                let v: Value = t.raw_get(i)?;
                if v.is_nil() {
                    break;
                }
                items.push(to_reply(&v, resp3, depth + 1)?);
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    })
}

/// The reply for a script that raised `err` (the error handler's table):
/// `<err> script: <sha>, on <source>:<line>.`
pub fn script_error(err: &Value, sha: &str) -> Reply {
    let text = match err {
        Value::Table(t) => {
            let msg = match t.raw_get::<Value>("err") {
                Ok(Value::String(s)) => s.to_string_lossy(),
                _ => "ERR unknown error".to_string(),
            };
            let source = t.raw_get::<Option<String>>("source").ok().flatten();
            let line = t.raw_get::<Option<i64>>("line").ok().flatten();
            match (source, line) {
                (Some(source), Some(line)) => format!("{msg} script: {sha}, on {source}:{line}."),
                _ => format!("{msg} script: {sha}"),
            }
        }
        Value::String(s) if s.to_string_lossy() == "not enough memory" => {
            format!("ERR Lua script exceeded the scripting memory limit (lua-memory-limit) script: {sha}")
        }
        Value::String(s) => format!("ERR {} script: {sha}", s.to_string_lossy()),
        _ => format!("ERR unknown error script: {sha}"),
    };
    Reply::Error(sanitize(&text).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_reply_codes() {
        assert_eq!(error_reply_text("x"), "ERR x");
        assert_eq!(error_reply_text("MYERR x"), "MYERR x");
        assert_eq!(error_reply_text("-FOO bar"), "FOO bar");
        assert_eq!(
            error_reply_text("ERR value is not an integer or out of range"),
            "ERR value is not an integer or out of range"
        );
    }

    #[test]
    fn c_style_number_casts() {
        assert_eq!(number_to_integer(3.99), 3);
        assert_eq!(number_to_integer(-3.99), -3);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(number_to_integer(1e20), i64::MIN);
        }
    }
}
