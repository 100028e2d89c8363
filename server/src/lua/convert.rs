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
use mlua::{Lua, Table, Value};

use crate::protocol::Reply;

/// Deepest table nesting converted to a reply (cycles end here too).
/// Tables nested deeper than this in a script's result become an error
/// (Redis runs out of Lua stack at the same depth: 7,995 levels).
const MAX_DEPTH: usize = 7994;

/// A Lua number as C's `(long long)` cast produces it on this machine:
/// truncation, and on x86-64 `i64::MIN` for NaN and out-of-range values.
pub(crate) fn number_to_integer(d: f64) -> i64 {
    if cfg!(target_arch = "x86_64") && !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&d) {
        return i64::MIN;
    }
    d as i64
}

/// An error text as `redis.error_reply` stores it: `-CODE msg` keeps its
/// code, a text without a leading `-` gets one; a single word becomes
/// `ERR word`; trailing CR/LF are trimmed.
pub(crate) fn error_reply_text(text: &str) -> String {
    let body = text.strip_prefix('-').unwrap_or(text);
    match body.find(' ') {
        None => format!("ERR {}", body.trim_end_matches(['\r', '\n'])),
        Some(i) => format!("{} {}", &body[..i], body[i + 1..].trim_end_matches(['\r', '\n'])),
    }
}

/// `{err = text}`.
pub(crate) fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", error_reply_text(text))?;
    Ok(t)
}

/// `redis.call` / `redis.pcall` on the raw Lua C API: reading the command
/// from the stack and pushing its reply. They run inside the C functions
/// Lua calls for `redis.call` (see `lua/mod.rs`), with the VM's memory limit
/// lifted so that no push can fail, and never raise Lua errors themselves.
///
/// # Safety (every function here)
///
/// `state` is the running VM's valid `lua_State`, on the thread running
/// the script, inside a C function Lua called (so the stack is ours); the
/// memory limit is lifted (pushes cannot raise); the stack indices named
/// are valid, and each function leaves the stack as its docs say.
pub(super) mod raw {
    use std::ffi::c_int;

    use bytes::Bytes;
    use mlua::ffi;

    use super::error_reply_text;
    use crate::protocol::{format_double, Reply};
    use crate::store::num::fmt_g17;

    /// # Safety
    /// See the module; the value at `index` is a string (or was just converted to one).
    unsafe fn bytes_at(state: *mut ffi::lua_State, index: c_int) -> Bytes {
        let mut len = 0;
        let p = ffi::lua_tolstring(state, index, &mut len);
        Bytes::copy_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), len))
    }

    /// The result at `index` of a script or function that succeeded, when
    /// it is not a table, converted as [`super::lua_to_reply`] converts it
    /// (`None` for a table, which that conversion reads). Short scripts'
    /// answers (a number, a string, nil) so become a reply without an mlua
    /// value, whose making needs the memory limit lifted.
    ///
    /// # Safety
    /// See the module; `index` is a valid stack index.
    pub(crate) unsafe fn scalar_reply(state: *mut ffi::lua_State, index: c_int, resp3: bool) -> Option<Reply> {
        Some(match ffi::lua_type(state, index) {
            ffi::LUA_TTABLE => return None,
            ffi::LUA_TSTRING => Reply::Bulk(bytes_at(state, index)),
            // mlua's Integer and Number both end as this integer.
            ffi::LUA_TNUMBER => Reply::Int(super::number_to_integer(ffi::lua_tonumber(state, index))),
            ffi::LUA_TBOOLEAN => match (ffi::lua_toboolean(state, index) != 0, resp3) {
                (b, true) => Reply::Bool(b),
                (true, false) => Reply::Int(1),
                (false, false) => Reply::Nil,
            },
            _ => Reply::Nil,
        })
    }

    /// The command on the stack (slots 1..=top): strings, or numbers as
    /// Redis prints them (`%.17g`: Lua's own `%.14g` would turn
    /// 9007199254740991 into `9.007199254741e+15`). The arguments are
    /// popped, as Redis pops them, so that the reply always has room on the
    /// stack: a call with ~8000 arguments (a `unpack`ed table) fills the
    /// stack up to Lua's C-stack limit.
    ///
    /// # Safety
    /// See the module.
    pub(crate) unsafe fn command_args(state: *mut ffi::lua_State) -> Result<Vec<Bytes>, &'static str> {
        let n = ffi::lua_gettop(state);
        if n == 0 {
            return Err(crate::errors::CALL_NO_ARGS);
        }
        let mut out = Vec::with_capacity(n as usize);
        for i in 1..=n {
            match ffi::lua_type(state, i) {
                ffi::LUA_TSTRING => out.push(bytes_at(state, i)),
                ffi::LUA_TNUMBER => out.push(Bytes::from(fmt_g17(ffi::lua_tonumber(state, i)))),
                _ => break,
            }
        }
        ffi::lua_settop(state, 0);
        if out.len() != n as usize {
            return Err(crate::errors::CALL_ARG_TYPE);
        }
        Ok(out)
    }

    /// # Safety
    /// See the module.
    unsafe fn push_str(state: *mut ffi::lua_State, b: &[u8]) {
        ffi::lua_pushlstring(state, b.as_ptr().cast(), b.len());
    }

    /// Sets field `name` of the table below the value on top of the stack.
    ///
    /// # Safety
    /// See the module; a table is below the top.
    unsafe fn set_field(state: *mut ffi::lua_State, name: &std::ffi::CStr) {
        ffi::lua_setfield(state, -2, name.as_ptr());
    }

    /// Pops a key and a value and sets them in the table below; a nil key
    /// (which `lua_rawset` would raise on) is dropped.
    ///
    /// # Safety
    /// See the module; a table is below the key and the value.
    unsafe fn set_entry(state: *mut ffi::lua_State) {
        if ffi::lua_type(state, -2) == ffi::LUA_TNIL {
            ffi::lua_pop(state, 2);
        } else {
            ffi::lua_rawset(state, -3);
        }
    }

    /// `{name = <value on top>}`, replacing the value.
    ///
    /// # Safety
    /// See the module.
    unsafe fn wrap(state: *mut ffi::lua_State, name: &std::ffi::CStr) {
        ffi::lua_createtable(state, 0, 1);
        ffi::lua_insert(state, -2);
        set_field(state, name);
    }

    /// `{err = text}`, the way `redis.error_reply` words it.
    ///
    /// # Safety
    /// See the module.
    pub(crate) unsafe fn push_error_table(state: *mut ffi::lua_State, text: &str) {
        push_str(state, error_reply_text(text).as_bytes());
        wrap(state, c"err");
    }

    /// Pushes `items` as an array table, each pushed by `push`.
    ///
    /// # Safety
    /// See the module; `push` pushes exactly one value.
    unsafe fn push_array<T>(state: *mut ffi::lua_State, items: &[T], mut push: impl FnMut(&T)) {
        ffi::lua_createtable(state, items.len().min(i32::MAX as usize) as c_int, 0);
        for (i, item) in items.iter().enumerate() {
            push(item);
            ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
        }
    }

    /// Pushes a command's reply as the script sees it: integer -> number,
    /// bulk -> string, null -> false (nil after `redis.setresp(3)`), array
    /// -> table, status -> `{ok=...}`, error -> `{err=...}`; with RESP3 map
    /// -> `{map=...}`, set -> `{set=...}`, double -> `{double=...}`, boolean
    /// -> boolean, verbatim -> `{verbatim_string={format=, string=}}`, big
    /// number -> `{big_number=digits}`; attributes are skipped.
    ///
    /// # Safety
    /// See the module.
    pub(crate) unsafe fn push_reply(state: *mut ffi::lua_State, reply: &Reply, resp3: bool) {
        // Each nesting level needs a few slots; replies nest a handful deep.
        if ffi::lua_checkstack(state, 4) == 0 {
            ffi::lua_pushnil(state);
            return;
        }
        match reply {
            Reply::Ok => {
                push_str(state, b"OK");
                wrap(state, c"ok");
            }
            Reply::Status(s) => {
                push_str(state, s.as_bytes());
                wrap(state, c"ok");
            }
            Reply::Error(e) => push_error_table(state, e),
            Reply::Int(i) => ffi::lua_pushnumber(state, *i as ffi::lua_Number),
            Reply::Bulk(b) => push_str(state, b),
            Reply::Nil | Reply::NilArray if resp3 => ffi::lua_pushnil(state),
            Reply::Nil | Reply::NilArray => ffi::lua_pushboolean(state, 0),
            Reply::Array(items) | Reply::Push(items) | Reply::Many(items) => {
                push_array(state, items, |item| push_reply(state, item, resp3))
            }
            // Maps and sets grow from empty tables, as Redis builds them
            // (`lua_newtable`, then one entry at a time): a table sized up
            // front lays its entries out otherwise, and a script walking it
            // with `pairs` (or returning it) sees another order than Redis's.
            Reply::Set(items) if resp3 => {
                ffi::lua_createtable(state, 0, 0);
                for item in items {
                    push_reply(state, item, resp3);
                    ffi::lua_pushboolean(state, 1);
                    set_entry(state);
                }
                wrap(state, c"set");
            }
            Reply::Set(items) => push_array(state, items, |item| push_reply(state, item, false)),
            Reply::KeyedPairs(pairs) if !resp3 => push_array(state, pairs, |(k, v)| {
                ffi::lua_createtable(state, 2, 0);
                push_reply(state, k, false);
                ffi::lua_rawseti(state, -2, 1);
                push_reply(state, v, false);
                ffi::lua_rawseti(state, -2, 2);
            }),
            Reply::Map(pairs) | Reply::KeyedPairs(pairs) if resp3 => {
                ffi::lua_createtable(state, 0, 0);
                for (k, v) in pairs {
                    push_reply(state, k, resp3);
                    push_reply(state, v, resp3);
                    set_entry(state);
                }
                wrap(state, c"map");
            }
            // (KeyedPairs in RESP2 is the first arm above.)
            Reply::Map(pairs) | Reply::KeyedPairs(pairs) => {
                ffi::lua_createtable(state, (pairs.len() * 2).min(i32::MAX as usize) as c_int, 0);
                for (i, (k, v)) in pairs.iter().enumerate() {
                    push_reply(state, k, false);
                    ffi::lua_rawseti(state, -2, (2 * i + 1) as ffi::lua_Integer);
                    push_reply(state, v, false);
                    ffi::lua_rawseti(state, -2, (2 * i + 2) as ffi::lua_Integer);
                }
            }
            Reply::Double(d) if resp3 => {
                ffi::lua_pushnumber(state, *d);
                wrap(state, c"double");
            }
            Reply::Double(d) => push_str(state, format_double(*d).as_bytes()),
            Reply::HumanDouble(d) if resp3 => {
                ffi::lua_pushnumber(state, *d);
                wrap(state, c"double");
            }
            Reply::HumanDouble(d) => push_str(state, crate::store::num::fmt_human(*d).as_bytes()),
            Reply::Bool(b) if resp3 => ffi::lua_pushboolean(state, *b as c_int),
            Reply::Bool(b) => ffi::lua_pushnumber(state, if *b { 1.0 } else { 0.0 }),
            Reply::Verbatim(format, text) if resp3 => {
                ffi::lua_createtable(state, 0, 2);
                push_str(state, format);
                set_field(state, c"format");
                push_str(state, text);
                set_field(state, c"string");
                wrap(state, c"verbatim_string");
            }
            Reply::Verbatim(_, text) => push_str(state, text),
            Reply::BigNum(digits) if resp3 => {
                push_str(state, digits);
                wrap(state, c"big_number");
            }
            Reply::BigNum(digits) => push_str(state, digits),
            // Scripts do not see attributes (Redis's parser skips them).
            Reply::Attribute(attributed) => push_reply(state, &attributed.1, resp3),
            Reply::ScorePairs(pairs) if resp3 => push_array(state, pairs, |(m, s)| {
                ffi::lua_createtable(state, 2, 0);
                push_str(state, m);
                ffi::lua_rawseti(state, -2, 1);
                push_reply(state, &Reply::Double(*s), true);
                ffi::lua_rawseti(state, -2, 2);
            }),
            Reply::ScorePairs(pairs) => {
                ffi::lua_createtable(state, (pairs.len() * 2).min(i32::MAX as usize) as c_int, 0);
                for (i, (m, s)) in pairs.iter().enumerate() {
                    push_str(state, m);
                    ffi::lua_rawseti(state, -2, (2 * i + 1) as ffi::lua_Integer);
                    push_str(state, format_double(*s).as_bytes());
                    ffi::lua_rawseti(state, -2, (2 * i + 2) as ffi::lua_Integer);
                }
            }
        }
    }
}

/// A verbatim reply's format from a script's `format` field, as Redis's
/// `addReplyVerbatim` takes it: its first three bytes, up to a NUL, padded
/// with spaces.
fn verbatim_format(text: &[u8]) -> [u8; 3] {
    let mut format = [b' '; 3];
    for (slot, &b) in format.iter_mut().zip(text.iter().take_while(|&&b| b != 0)) {
        *slot = b;
    }
    format
}

/// What a script returned, as the reply its caller gets.
pub(crate) fn lua_to_reply(value: &Value, resp3: bool) -> mlua::Result<Reply> {
    to_reply(value, resp3)
}

fn sanitize(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

/// A table being converted (see [`to_reply`]).
enum Pending {
    /// An array: its elements (read when it opens, so no reference to the
    /// table itself stays alive: mlua's references are Lua stack slots), and
    /// the items converted so far.
    Array(std::vec::IntoIter<Value>, Vec<Reply>),
    /// A `{map=...}`: its entries, and the pairs converted so far (a key
    /// waits in the last slot until its value is done).
    Map(
        std::vec::IntoIter<(Value, Value)>,
        Vec<(Reply, Reply)>,
        Option<Reply>,
        Option<Value>,
    ),
    /// A `{set=...}`: its members, and those converted so far.
    Set(std::vec::IntoIter<Value>, Vec<Reply>),
}

/// What one value is: a finished reply, or a table whose elements follow.
enum Step {
    Done(Reply),
    Open(Pending),
}

/// One value's reply, or the table it opens, at nesting `depth`: past
/// [`MAX_DEPTH`] a table is the `reached lua stack limit` error in its
/// place, as Redis answers a script's deeply nested result.
///
/// What is not a table converts as [`raw::scalar_reply`] converts it on
/// the stack: the two must agree.
fn step(value: &Value, resp3: bool, depth: usize) -> mlua::Result<Step> {
    Ok(Step::Done(match value {
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(number_to_integer(*n)),
        Value::Boolean(true) if resp3 => Reply::Bool(true),
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) if resp3 => Reply::Bool(false),
        Value::Boolean(false) => Reply::Nil,
        Value::Table(_) if depth > MAX_DEPTH => Reply::Error("ERR reached lua stack limit".into()),
        Value::Table(t) => {
            if let Value::String(e) = t.raw_get::<Value>("err")? {
                return Ok(Step::Done(Reply::Error(sanitize(&e.to_string_lossy()).into())));
            }
            if let Value::String(s) = t.raw_get::<Value>("ok")? {
                return Ok(Step::Done(Reply::Status(sanitize(&s.to_string_lossy()).into())));
            }
            match t.raw_get::<Value>("double")? {
                Value::Number(d) => return Ok(Step::Done(Reply::Double(d))),
                Value::Integer(d) => return Ok(Step::Done(Reply::Double(d as f64))),
                _ => {}
            }
            if let Value::String(digits) = t.raw_get::<Value>("big_number")? {
                let digits = sanitize(&digits.to_string_lossy());
                return Ok(Step::Done(Reply::BigNum(Bytes::from(digits))));
            }
            if let Value::Table(v) = t.raw_get::<Value>("verbatim_string")? {
                if let (Value::String(format), Value::String(text)) = (v.raw_get("format")?, v.raw_get("string")?) {
                    return Ok(Step::Done(Reply::Verbatim(
                        verbatim_format(&format.as_bytes()),
                        Bytes::copy_from_slice(&text.as_bytes()),
                    )));
                }
            }
            if let Value::Table(m) = t.raw_get::<Value>("map")? {
                let entries = m.pairs::<Value, Value>().collect::<mlua::Result<Vec<_>>>()?;
                return Ok(Step::Open(Pending::Map(entries.into_iter(), vec![], None, None)));
            }
            if let Value::Table(set) = t.raw_get::<Value>("set")? {
                let members = set
                    .pairs::<Value, Value>()
                    .map(|p| p.map(|(k, _)| k))
                    .collect::<mlua::Result<Vec<_>>>()?;
                return Ok(Step::Open(Pending::Set(members.into_iter(), vec![])));
            }
            let mut elements = vec![];
            for i in 1.. {
                let v: Value = t.raw_get(i)?;
                if v.is_nil() {
                    break;
                }
                elements.push(v);
            }
            return Ok(Step::Open(Pending::Array(elements.into_iter(), vec![])));
        }
        _ => Reply::Nil,
    }))
}

/// Converts a script's result without recursion (a script may return
/// thousands of nested tables): open tables wait on an explicit stack.
fn to_reply(value: &Value, resp3: bool) -> mlua::Result<Reply> {
    let first = match step(value, resp3, 0)? {
        Step::Done(reply) => return Ok(reply),
        Step::Open(pending) => pending,
    };
    let mut stack: Vec<Pending> = vec![first];
    let mut next: Option<Value> = None;
    loop {
        // Convert the next value; a finished one goes to its parent.
        let mut done = match next.take() {
            Some(v) => match step(&v, resp3, stack.len())? {
                Step::Done(reply) => Some(reply),
                Step::Open(pending) => {
                    stack.push(pending);
                    None
                }
            },
            None => None,
        };
        loop {
            let Some(top) = stack.last_mut() else {
                return Ok(done.unwrap_or(Reply::Nil));
            };
            match top {
                Pending::Array(elements, items) | Pending::Set(elements, items) => {
                    if let Some(reply) = done.take() {
                        items.push(reply);
                    }
                    if let Some(v) = elements.next() {
                        next = Some(v);
                        break;
                    }
                }
                Pending::Map(entries, pairs, key, value) => {
                    if let Some(reply) = done.take() {
                        match key.take() {
                            Some(k) => pairs.push((k, reply)),
                            None => *key = Some(reply),
                        }
                    }
                    if key.is_some() {
                        if let Some(v) = value.take() {
                            next = Some(v);
                            break;
                        }
                    } else if let Some((k, v)) = entries.next() {
                        *value = Some(v);
                        next = Some(k);
                        break;
                    }
                }
            }
            // The table on top is complete.
            done = stack.pop().map(|finished| match finished {
                Pending::Array(_, items) => Reply::Array(items),
                Pending::Map(_, pairs, _, _) => Reply::Map(pairs),
                Pending::Set(_, items) => Reply::Set(items),
            });
        }
    }
}

/// The reply for a script that raised `err` (the error handler's table):
/// `<err> script: <sha>, on <source>:<line>.`
pub(crate) fn script_error(err: &Value, sha: &str) -> Reply {
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
