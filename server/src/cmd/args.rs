//! Argument helpers shared by the families: keywords, integers, database
//! indexes, the *MPOP tail, integers as effect arguments.
use bytes::Bytes;

use crate::errors;
use crate::protocol::Reply;
use crate::store::num;

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub(crate) fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// An integer argument, or Redis's "not an integer" error.
pub(crate) fn int(arg: &[u8]) -> Result<i64, Reply> {
    num::parse_i64(arg).ok_or_else(|| errors::err(errors::NOT_INTEGER))
}

/// The `numkeys key [key ...] <where> [COUNT count]` tail of the *MPOP
/// family from `args[first..]`, with Redis's errors in its order: the
/// keys' range in `args`, the end to pop from (`end` reads the word;
/// LEFT|RIGHT, MIN|MAX) and the count.
pub(crate) fn mpop<W>(
    args: &[Bytes],
    first: usize,
    end: impl Fn(&[u8]) -> Option<W>,
) -> Result<(std::ops::Range<usize>, W, usize), Reply> {
    let numkeys = match num::parse_i64(&args[first]) {
        Some(n) if n > 0 => n as u64,
        _ => return Err(errors::err(errors::NUMKEYS_NOT_POSITIVE)),
    };
    if numkeys >= (args.len() - first - 1) as u64 {
        return Err(errors::err(errors::SYNTAX));
    }
    let keys = first + 1..first + 1 + numkeys as usize;
    let end = end(&args[keys.end]).ok_or_else(|| errors::err(errors::SYNTAX))?;
    let count = match &args[keys.end + 1..] {
        [] => 1,
        [word, n] if is(word, "count") => match num::parse_i64(n) {
            Some(n) if n > 0 => n as usize,
            _ => return Err(errors::err(errors::COUNT_NOT_POSITIVE)),
        },
        _ => return Err(errors::err(errors::SYNTAX)),
    };
    Ok((keys, end, count))
}

/// An integer as an argument of an effect (a deadline, a count).
pub(crate) fn int_arg(n: impl itoa::Integer) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

/// A database index argument (SELECT, SWAPDB, COPY ... DB).
/// A database index as Redis reads one (`getIntFromObjectOrReply`): an
/// integer, within a C int, then within the databases.
pub(crate) fn db_index(arg: &[u8], databases: usize) -> Result<usize, Reply> {
    let n = int(arg)?;
    if i32::try_from(n).is_err() {
        return Err(errors::err(errors::NOT_C_INT));
    }
    if n < 0 || n as u64 >= databases as u64 {
        return Err(errors::err(errors::DB_OUT_OF_RANGE));
    }
    Ok(n as usize)
}
