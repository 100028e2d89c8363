//! The `bit` library (LuaBitOp 1.0, as Redis ships it): 32-bit operations on
//! Lua numbers. Numbers are reduced modulo 2^32 with round-half-even, as
//! LuaBitOp's `2^52+2^51` trick does, and results are signed 32-bit.

use mlua::{Lua, Table, Variadic};

/// LuaBitOp's `barg`: the low 32 bits of the rounded number.
fn tobit(x: f64) -> i32 {
    if !x.is_finite() {
        return 0;
    }
    let r = x.round_ties_even();
    r.rem_euclid(4_294_967_296.0) as u64 as u32 as i32
}

pub(super) fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("tobit", lua.create_function(|_, x: f64| Ok(tobit(x)))?)?;
    t.raw_set("bnot", lua.create_function(|_, x: f64| Ok(!tobit(x)))?)?;
    t.raw_set(
        "band",
        lua.create_function(|_, (x, rest): (f64, Variadic<f64>)| Ok(rest.iter().fold(tobit(x), |a, b| a & tobit(*b))))?,
    )?;
    t.raw_set(
        "bor",
        lua.create_function(|_, (x, rest): (f64, Variadic<f64>)| Ok(rest.iter().fold(tobit(x), |a, b| a | tobit(*b))))?,
    )?;
    t.raw_set(
        "bxor",
        lua.create_function(|_, (x, rest): (f64, Variadic<f64>)| Ok(rest.iter().fold(tobit(x), |a, b| a ^ tobit(*b))))?,
    )?;
    t.raw_set(
        "lshift",
        lua.create_function(|_, (x, n): (f64, f64)| Ok(((tobit(x) as u32) << (tobit(n) as u32 & 31)) as i32))?,
    )?;
    t.raw_set(
        "rshift",
        lua.create_function(|_, (x, n): (f64, f64)| Ok(((tobit(x) as u32) >> (tobit(n) as u32 & 31)) as i32))?,
    )?;
    t.raw_set(
        "arshift",
        lua.create_function(|_, (x, n): (f64, f64)| Ok(tobit(x) >> (tobit(n) as u32 & 31)))?,
    )?;
    t.raw_set(
        "rol",
        lua.create_function(|_, (x, n): (f64, f64)| Ok((tobit(x) as u32).rotate_left(tobit(n) as u32 & 31) as i32))?,
    )?;
    t.raw_set(
        "ror",
        lua.create_function(|_, (x, n): (f64, f64)| Ok((tobit(x) as u32).rotate_right(tobit(n) as u32 & 31) as i32))?,
    )?;
    t.raw_set(
        "bswap",
        lua.create_function(|_, x: f64| Ok((tobit(x) as u32).swap_bytes() as i32))?,
    )?;
    t.raw_set(
        "tohex",
        lua.create_function(|_, (x, n): (f64, Option<f64>)| {
            let mut n = n.map_or(8, tobit);
            let upper = n < 0;
            if upper {
                n = -n;
            }
            let n = n.clamp(1, 8) as usize;
            let v = tobit(x) as u32 as u64;
            let text = if upper { format!("{v:08X}") } else { format!("{v:08x}") };
            Ok(text[8 - n..].to_string())
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::tobit;

    #[test]
    fn modular_rounding() {
        assert_eq!(tobit(0xffff_ffffu32 as f64), -1);
        assert_eq!(tobit(4_294_967_296.0 + 5.0), 5);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(2.5), 2);
        assert_eq!(tobit(3.5), 4);
    }
}
