//! `cjson`: lua-cjson 2.1.0 as Redis 7.0 ships it to scripts. The library
//! itself is Lua (`cjson.lua`); this module gives it what Lua lacks:
//!
//! - a C entry for each of its functions ([`entry`]). lua-cjson's functions
//!   are C functions, and a C function stays on the stack as the frame a
//!   script's `return cjson.encode(t)` called, where a Lua function would be
//!   a tail call that hides the script's line;
//! - [`raise`], which raises cjson.lua's errors as that C function would:
//!   after the calling script's `user_script:LINE: ` (`luaL_error`), an
//!   argument error naming the function the way the script called it
//!   (`luaL_argerror`: `'encode'`, `'f'` through a local, `'?'` through
//!   pcall, and `self` not counted in a method call). The error is a plain
//!   string, so a script's `pcall` gets the text without the `ERR ` prefix
//!   the script's error handler adds when it becomes the reply;
//! - C's `strtod` ([`strtod`]), which lua-cjson reads numbers with (hex,
//!   inf, nan, and where a number ends).

use std::ffi::{c_char, c_int, CStr};

use mlua::{ffi, Function, Lua, Value};

const CJSON: &str = include_str!("cjson.lua");

/// A function that loads cjson.lua and returns its `create` (glue.lua
/// loads cjson when a script first reads it).
pub(super) fn loader(lua: &Lua) -> mlua::Result<Function> {
    // cjson.null: a NULL light userdata, as lua-cjson's.
    let null = Value::LightUserData(mlua::LightUserData(std::ptr::null_mut()));
    // SAFETY: C functions following the Lua C API's rules (see each).
    let (wrap, raise, strtod) = unsafe {
        (
            lua.create_c_function(wrap)?,
            lua.create_c_function(raise)?,
            lua.create_c_function(strtod)?,
        )
    };
    lua.create_function(move |lua, ()| {
        lua.load(CJSON).set_name("=coordis").call::<Function>((
            null.clone(),
            wrap.clone(),
            raise.clone(),
            strtod.clone(),
        ))
    })
}

/// `wrap(f, cfg)`: an [`entry`] calling Lua function `f` with settings `cfg`.
///
/// # Safety
/// Called by Lua only.
unsafe extern "C-unwind" fn wrap(state: *mut ffi::lua_State) -> c_int {
    ffi::lua_settop(state, 2);
    ffi::lua_pushcclosure(state, entry, 2);
    1
}

/// A cjson function as scripts see it: calls the Lua implementation
/// (upvalue 1) with the settings (upvalue 2) and the arguments, and returns
/// what it returns. Its errors, out-of-memory included, pass through as
/// they are.
///
/// # Safety
/// Called by Lua only, as a closure [`wrap`] made. It holds no Rust value,
/// so an error may longjmp through it.
unsafe extern "C-unwind" fn entry(state: *mut ffi::lua_State) -> c_int {
    let nargs = ffi::lua_gettop(state);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
    ffi::lua_insert(state, 2);
    ffi::lua_call(state, nargs + 1, ffi::LUA_MULTRET);
    ffi::lua_gettop(state)
}

/// `raise(message [, narg])`: raises `message` as the running [`entry`]
/// would with `luaL_error`, or with `luaL_argerror` for argument `narg`.
///
/// # Safety
/// Called by Lua only, by cjson.lua, with a string (and an integer). It
/// holds no Rust value across the error's longjmp; the message stays on the
/// stack, so its pointer stays valid.
unsafe extern "C-unwind" fn raise(state: *mut ffi::lua_State) -> c_int {
    let message = ffi::lua_tolstring(state, 1, std::ptr::null_mut());
    let mut narg = ffi::lua_tointeger(state, 2) as c_int;
    let Some(level) = entry_level(state) else {
        ffi::lua_settop(state, 1);
        ffi::lua_error(state)
    };
    // Where the entry was called from (level 1 for the entry itself).
    ffi::luaL_where(state, level + 1);
    if narg == 0 {
        ffi::lua_pushvalue(state, 1);
    } else {
        // luaL_argerror, for the entry's frame rather than ours.
        let mut ar: ffi::lua_Debug = std::mem::zeroed();
        ffi::lua_getstack(state, level, &mut ar);
        ffi::lua_getinfo(state, c"n".as_ptr(), &mut ar);
        let method = !ar.namewhat.is_null() && CStr::from_ptr(ar.namewhat) == c"method";
        if method {
            narg -= 1;
        }
        if method && narg == 0 {
            ffi::lua_pushfstring(state, c"calling '%s' on bad self (%s)".as_ptr(), ar.name, message);
        } else {
            let name = if ar.name.is_null() { c"?".as_ptr() } else { ar.name };
            ffi::lua_pushfstring(state, c"bad argument #%d to '%s' (%s)".as_ptr(), narg, name, message);
        }
    }
    ffi::lua_concat(state, 2);
    ffi::lua_error(state)
}

/// The stack level of the innermost running [`entry`], seen from a C
/// function cjson.lua called.
///
/// # Safety
/// `state` is running such a function; the stack has room for one value.
unsafe fn entry_level(state: *mut ffi::lua_State) -> Option<c_int> {
    let mut ar: ffi::lua_Debug = std::mem::zeroed();
    let mut level = 1;
    while ffi::lua_getstack(state, level, &mut ar) != 0 {
        ffi::lua_getinfo(state, c"f".as_ptr(), &mut ar);
        let function = ffi::lua_tocfunction(state, -1);
        ffi::lua_pop(state, 1);
        if function.is_some_and(|f| f as usize == entry as ffi::lua_CFunction as usize) {
            return Some(level);
        }
        level += 1;
    }
    None
}

/// `strtod(text, pos)`: C's `strtod` at 1-based position `pos` of string
/// `text`: the number and the position after it, or nothing when no number
/// starts there.
///
/// # Safety
/// Called by Lua only, by cjson.lua, with a string and a position in it.
unsafe extern "C-unwind" fn strtod(state: *mut ffi::lua_State) -> c_int {
    let mut len = 0;
    let text = ffi::lua_tolstring(state, 1, &mut len);
    let pos = ffi::lua_tointeger(state, 2);
    if text.is_null() || pos < 1 || pos as usize > len + 1 {
        return 0;
    }
    // Lua strings always end with a NUL, where strtod stops at the latest.
    let start = text.add(pos as usize - 1);
    let mut end: *mut c_char = std::ptr::null_mut();
    let value = libc::strtod(start, &mut end);
    if end.cast_const() == start {
        return 0;
    }
    ffi::lua_pushnumber(state, value);
    ffi::lua_pushinteger(state, pos + end.offset_from(start) as ffi::lua_Integer);
    2
}
