//! The binary libraries Redis ships to scripts: `struct` (Roberto
//! Ierusalimschy's lua-struct, pack/unpack/size) and `cmsgpack`
//! (lua-cmsgpack 0.4: pack/unpack/unpack_one/unpack_limit), written in Rust
//! after their C sources' rules.

use mlua::{Lua, MultiValue, Table, Value, Variadic};

use super::sandbox::{raise, script_position};

/// lua-struct's argument error: `user_script:N: bad argument #1 to 'pack' (...)`.
fn format_error<T>(lua: &Lua, function: &str, e: &str) -> mlua::Result<T> {
    raise(&format!(
        "ERR {}bad argument #1 to '{function}' ({e})",
        script_position(lua)
    ))
}

/// Native maximum alignment for `!` without a number.
const MAX_ALIGN: usize = 8;

struct Header {
    little: bool,
    align: usize,
}

/// One parsed struct format item.
enum Item {
    Skip,
    Pad,
    Int { size: usize, signed: bool },
    Float,
    Double,
    ZString,
    Chars(usize),
}

/// Reads an optional decimal size after a format letter.
fn size_arg(fmt: &[u8], i: &mut usize, default: usize) -> usize {
    let start = *i;
    while *i < fmt.len() && fmt[*i].is_ascii_digit() {
        *i += 1;
    }
    if start == *i {
        default
    } else {
        std::str::from_utf8(&fmt[start..*i])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    }
}

/// Parses a format into items, applying endianness and alignment options.
fn parse_format(fmt: &[u8]) -> Result<Vec<(Item, bool, usize)>, String> {
    let mut h = Header {
        little: cfg!(target_endian = "little"),
        align: 1,
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        i += 1;
        let item = match c {
            b' ' => Item::Skip,
            b'>' => {
                h.little = false;
                Item::Skip
            }
            b'<' => {
                h.little = true;
                Item::Skip
            }
            b'!' => {
                let a = size_arg(fmt, &mut i, MAX_ALIGN);
                if !a.is_power_of_two() {
                    return Err(format!("alignment {a} is not a power of 2"));
                }
                h.align = a;
                Item::Skip
            }
            b'x' => Item::Pad,
            b'b' => Item::Int { size: 1, signed: true },
            b'B' => Item::Int { size: 1, signed: false },
            b'h' => Item::Int { size: 2, signed: true },
            b'H' => Item::Int { size: 2, signed: false },
            b'l' => Item::Int { size: 8, signed: true },
            b'L' | b'T' => Item::Int { size: 8, signed: false },
            b'i' | b'I' => {
                let size = size_arg(fmt, &mut i, 4);
                if !(1..=8).contains(&size) {
                    return Err(format!("integral size {size} is larger than limit of 8"));
                }
                Item::Int {
                    size,
                    signed: c == b'i',
                }
            }
            b'f' => Item::Float,
            b'd' => Item::Double,
            b's' => Item::ZString,
            b'c' => Item::Chars(size_arg(fmt, &mut i, 1)),
            other => return Err(format!("invalid format option '{}'", other as char)),
        };
        out.push((item, h.little, h.align));
    }
    Ok(out)
}

fn item_size(item: &Item) -> usize {
    match item {
        Item::Skip | Item::ZString => 0,
        Item::Pad => 1,
        Item::Int { size, .. } => *size,
        Item::Float => 4,
        Item::Double => 8,
        Item::Chars(n) => *n,
    }
}

/// lua-struct's `gettoalign`.
fn padding(len: usize, item: &Item, align: usize) -> usize {
    let size = item_size(item);
    if size <= 1 || matches!(item, Item::Chars(_)) {
        return 0;
    }
    let size = size.min(align);
    (size - (len & (size - 1))) & (size - 1)
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => s.to_str().ok().and_then(|s| s.trim().parse().ok()),
        _ => None,
    }
}

fn struct_pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    let mut args = args.into_iter();
    let Some(Value::String(fmt)) = args.next() else {
        return raise("ERR bad argument #1 to 'pack' (string expected)");
    };
    let items = match parse_format(&fmt.as_bytes()) {
        Ok(i) => i,
        Err(e) => return format_error(lua, "pack", &e),
    };
    let mut out: Vec<u8> = Vec::new();
    for (item, little, align) in items {
        let pad = padding(out.len(), &item, align);
        out.resize(out.len() + pad, 0);
        match item {
            Item::Skip => {}
            Item::Pad => out.push(0),
            Item::Int { size, .. } => {
                let Some(n) = args.next().as_ref().and_then(number) else {
                    return raise("ERR bad argument to 'pack' (number expected)");
                };
                let v = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                let bytes = v.to_le_bytes();
                if little {
                    out.extend_from_slice(&bytes[..size]);
                } else {
                    out.extend(bytes[..size].iter().rev());
                }
            }
            Item::Float | Item::Double => {
                let Some(n) = args.next().as_ref().and_then(number) else {
                    return raise("ERR bad argument to 'pack' (number expected)");
                };
                let bytes: Vec<u8> = if matches!(item, Item::Float) {
                    if little {
                        (n as f32).to_le_bytes().to_vec()
                    } else {
                        (n as f32).to_be_bytes().to_vec()
                    }
                } else if little {
                    n.to_le_bytes().to_vec()
                } else {
                    n.to_be_bytes().to_vec()
                };
                out.extend_from_slice(&bytes);
            }
            Item::ZString | Item::Chars(_) => {
                let s = match args.next() {
                    Some(v @ (Value::String(_) | Value::Number(_) | Value::Integer(_))) => {
                        lua.coerce_string(v)?.map(|s| s.as_bytes().to_vec()).unwrap_or_default()
                    }
                    _ => return raise("ERR bad argument to 'pack' (string expected)"),
                };
                match item {
                    Item::ZString => {
                        if s.contains(&0) {
                            return raise("ERR bad argument to 'pack' (string contains zeros)");
                        }
                        out.extend_from_slice(&s);
                        out.push(0);
                    }
                    Item::Chars(n) => {
                        let n = if n == 0 { s.len() } else { n };
                        if s.len() < n {
                            return raise("ERR bad argument to 'pack' (string too short)");
                        }
                        out.extend_from_slice(&s[..n]);
                    }
                    _ => unreachable!(),
                }
            }
        }
    }
    lua.create_string(out)
}

fn struct_unpack(
    lua: &Lua,
    (fmt, data, start): (mlua::LuaString, mlua::LuaString, Option<i64>),
) -> mlua::Result<MultiValue> {
    let items = match parse_format(&fmt.as_bytes()) {
        Ok(i) => i,
        Err(e) => return format_error(lua, "unpack", &e),
    };
    let data = data.as_bytes();
    let mut pos = start.unwrap_or(1).max(1) as usize - 1;
    let mut out = MultiValue::new();
    let mut last_number: Option<f64> = None;
    for (item, little, align) in items {
        pos += padding(pos, &item, align);
        let size = item_size(&item);
        let need = |n: usize| -> mlua::Result<()> {
            if pos + n > data.len() {
                raise("ERR bad argument #2 to 'unpack' (data string too short)")
            } else {
                Ok(())
            }
        };
        match item {
            Item::Skip => {}
            Item::Pad => {
                need(1)?;
                pos += 1;
            }
            Item::Int { size, signed } => {
                need(size)?;
                let mut bytes = [0u8; 8];
                let src = &data[pos..pos + size];
                for (k, b) in src.iter().enumerate() {
                    let idx = if little { k } else { size - 1 - k };
                    bytes[idx] = *b;
                }
                let mut v = u64::from_le_bytes(bytes);
                let n = if signed && size < 8 && v & (1 << (size * 8 - 1)) != 0 {
                    v |= !0u64 << (size * 8);
                    v as i64 as f64
                } else if signed {
                    v as i64 as f64
                } else {
                    v as f64
                };
                last_number = Some(n);
                out.push_back(Value::Number(n));
                pos += size;
            }
            Item::Float | Item::Double => {
                need(size)?;
                let src = &data[pos..pos + size];
                let n = if size == 4 {
                    let b: [u8; 4] = src.try_into().expect("4 bytes");
                    (if little {
                        f32::from_le_bytes(b)
                    } else {
                        f32::from_be_bytes(b)
                    }) as f64
                } else {
                    let b: [u8; 8] = src.try_into().expect("8 bytes");
                    if little {
                        f64::from_le_bytes(b)
                    } else {
                        f64::from_be_bytes(b)
                    }
                };
                last_number = Some(n);
                out.push_back(Value::Number(n));
                pos += size;
            }
            Item::ZString => {
                let end = data[pos..].iter().position(|&b| b == 0).map(|e| pos + e);
                let Some(end) = end else {
                    return raise("ERR bad argument #2 to 'unpack' (unfinished string in data)");
                };
                out.push_back(Value::String(lua.create_string(&data[pos..end])?));
                pos = end + 1;
            }
            Item::Chars(n) => {
                let n = if n == 0 {
                    match last_number.take() {
                        Some(l) if l >= 0.0 => l as usize,
                        _ => return raise("ERR format 'c0' needs a previous size"),
                    }
                } else {
                    n
                };
                need(n)?;
                out.push_back(Value::String(lua.create_string(&data[pos..pos + n])?));
                pos += n;
            }
        }
    }
    out.push_back(Value::Number((pos + 1) as f64));
    Ok(out)
}

fn struct_size(lua: &Lua, fmt: mlua::LuaString) -> mlua::Result<f64> {
    let items = match parse_format(&fmt.as_bytes()) {
        Ok(i) => i,
        Err(e) => return format_error(lua, "size", &e),
    };
    let mut pos = 0;
    for (item, _, align) in items {
        if matches!(item, Item::ZString) {
            return raise("ERR options 'c0' - 's' have undefined sizes");
        }
        pos += padding(pos, &item, align) + item_size(&item);
    }
    Ok(pos as f64)
}

pub(super) fn create_struct(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(struct_pack)?)?;
    t.raw_set("unpack", lua.create_function(struct_unpack)?)?;
    t.raw_set("size", lua.create_function(struct_size)?)?;
    Ok(t)
}

/// lua-cmsgpack's nesting limit: deeper tables encode as nil.
const MSGPACK_MAX_NESTING: usize = 16;

fn mp_encode(v: &Value, out: &mut Vec<u8>, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => mp_int(*i, out),
        Value::Number(n) => {
            if n.is_finite() && (*n as i64) as f64 == *n {
                mp_int(*n as i64, out);
            } else if (*n as f32) as f64 == *n || n.is_nan() {
                out.push(0xca);
                out.extend_from_slice(&(*n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        Value::String(s) => {
            let b = s.as_bytes();
            let len = b.len();
            if len < 32 {
                out.push(0xa0 | len as u8);
            } else if len <= 0xff {
                out.push(0xd9);
                out.push(len as u8);
            } else if len <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(len as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) if depth < MSGPACK_MAX_NESTING => {
            let (mut count, mut max, mut array) = (0usize, 0usize, true);
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, _) = pair?;
                count += 1;
                match k {
                    Value::Integer(i) if i >= 1 => max = max.max(i as usize),
                    Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => max = max.max(n as usize),
                    _ => array = false,
                }
            }
            if array && max == count {
                mp_len(out, count, 0x90, 15, 0xdc, 0xdd);
                for i in 1..=count {
                    mp_encode(&t.raw_get::<Value>(i)?, out, depth + 1)?;
                }
            } else {
                mp_len(out, count, 0x80, 15, 0xde, 0xdf);
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    mp_encode(&k, out, depth + 1)?;
                    mp_encode(&v, out, depth + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

fn mp_len(out: &mut Vec<u8>, len: usize, fix: u8, fix_max: usize, b16: u8, b32: u8) {
    if len <= fix_max {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn mp_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Decodes one object at `*pos`; `Err` carries lua-cmsgpack's error text.
fn mp_decode(lua: &Lua, d: &[u8], pos: &mut usize) -> Result<Value, String> {
    const MISSING: &str = "Missing bytes in input.";
    let take = |pos: &mut usize, n: usize| -> Result<&[u8], String> {
        if *pos + n > d.len() {
            return Err(MISSING.into());
        }
        let s = &d[*pos..*pos + n];
        *pos += n;
        Ok(s)
    };
    let be = |b: &[u8]| b.iter().fold(0u64, |a, x| (a << 8) | *x as u64);
    let c = take(pos, 1)?[0];
    let lerr = |e: mlua::Error| e.to_string();
    let string = |pos: &mut usize, n: usize| -> Result<Value, String> {
        Ok(Value::String(lua.create_string(take(pos, n)?).map_err(lerr)?))
    };
    let array = |pos: &mut usize, n: usize| -> Result<Value, String> {
        let t = lua.create_table().map_err(lerr)?;
        for i in 1..=n {
            let v = mp_decode(lua, d, pos)?;
            t.raw_set(i, v).map_err(lerr)?;
        }
        Ok(Value::Table(t))
    };
    let map = |pos: &mut usize, n: usize| -> Result<Value, String> {
        let t = lua.create_table().map_err(lerr)?;
        for _ in 0..n {
            let k = mp_decode(lua, d, pos)?;
            let v = mp_decode(lua, d, pos)?;
            if !k.is_nil() {
                t.raw_set(k, v).map_err(lerr)?;
            }
        }
        Ok(Value::Table(t))
    };
    Ok(match c {
        0x00..=0x7f => Value::Number(c as f64),
        0x80..=0x8f => map(pos, (c & 0x0f) as usize)?,
        0x90..=0x9f => array(pos, (c & 0x0f) as usize)?,
        0xa0..=0xbf => string(pos, (c & 0x1f) as usize)?,
        0xc0 => Value::Nil,
        0xc2 => Value::Boolean(false),
        0xc3 => Value::Boolean(true),
        0xc4 | 0xd9 => {
            let n = take(pos, 1)?[0] as usize;
            string(pos, n)?
        }
        0xc5 | 0xda => {
            let n = be(take(pos, 2)?) as usize;
            string(pos, n)?
        }
        0xc6 | 0xdb => {
            let n = be(take(pos, 4)?) as usize;
            string(pos, n)?
        }
        0xca => Value::Number(f32::from_be_bytes(take(pos, 4)?.try_into().expect("4")) as f64),
        0xcb => Value::Number(f64::from_be_bytes(take(pos, 8)?.try_into().expect("8"))),
        0xcc => Value::Number(take(pos, 1)?[0] as f64),
        0xcd => Value::Number(be(take(pos, 2)?) as f64),
        0xce => Value::Number(be(take(pos, 4)?) as f64),
        0xcf => Value::Number(be(take(pos, 8)?) as f64),
        0xd0 => Value::Number(take(pos, 1)?[0] as i8 as f64),
        0xd1 => Value::Number(be(take(pos, 2)?) as u16 as i16 as f64),
        0xd2 => Value::Number(be(take(pos, 4)?) as u32 as i32 as f64),
        0xd3 => Value::Number(be(take(pos, 8)?) as i64 as f64),
        0xdc => {
            let n = be(take(pos, 2)?) as usize;
            array(pos, n)?
        }
        0xdd => {
            let n = be(take(pos, 4)?) as usize;
            array(pos, n)?
        }
        0xde => {
            let n = be(take(pos, 2)?) as usize;
            map(pos, n)?
        }
        0xdf => {
            let n = be(take(pos, 4)?) as usize;
            map(pos, n)?
        }
        0xe0..=0xff => Value::Number(c as i8 as f64),
        _ => return Err("Bad data format in input.".into()),
    })
}

/// Decodes up to `limit` objects (0: all) from `offset`; returns them and
/// the offset after them.
fn mp_unpack(lua: &Lua, data: &[u8], limit: usize, offset: usize) -> mlua::Result<(Vec<Value>, usize)> {
    let mut pos = offset;
    let mut values = Vec::new();
    while pos < data.len() && (limit == 0 || values.len() < limit) {
        match mp_decode(lua, data, &mut pos) {
            Ok(v) => values.push(v),
            Err(e) => return raise(&format!("ERR {e}")),
        }
    }
    Ok((values, pos))
}

pub(super) fn create_cmsgpack(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: Variadic<Value>| {
            if args.is_empty() {
                return raise("ERR MessagePack pack needs input.");
            }
            let mut out = Vec::new();
            for v in args.iter() {
                mp_encode(v, &mut out, 0)?;
            }
            lua.create_string(out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, data: mlua::LuaString| {
            let (values, _) = mp_unpack(lua, &data.as_bytes(), 0, 0)?;
            Ok(MultiValue::from_iter(values))
        })?,
    )?;
    let limited = |lua: &Lua, data: mlua::LuaString, limit: usize, offset: Option<i64>| -> mlua::Result<MultiValue> {
        let bytes = data.as_bytes();
        let offset = offset.unwrap_or(0).max(0) as usize;
        let (values, pos) = mp_unpack(lua, &bytes, limit, offset)?;
        let next = if pos >= bytes.len() { -1.0 } else { pos as f64 };
        let mut out = MultiValue::new();
        out.push_back(Value::Number(next));
        out.extend(values);
        Ok(out)
    };
    t.raw_set(
        "unpack_one",
        lua.create_function(move |lua, (data, offset): (mlua::LuaString, Option<i64>)| limited(lua, data, 1, offset))?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(move |lua, (data, limit, offset): (mlua::LuaString, i64, Option<i64>)| {
            limited(lua, data, limit.max(0) as usize, offset)
        })?,
    )?;
    Ok(t)
}
