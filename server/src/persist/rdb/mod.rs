//! The RDB format, version 10 as Redis 7.0.15 writes it, and every older
//! encoding Redis 7.0 loads.
//!
//! - [`codec`]: lengths, strings (int-encoded, LZF), doubles, times; the
//!   [`codec::Out`] writer and the bounds-checked [`codec::Input`] reader.
//! - [`crc64`], [`lzf`]: the checksum and the string compression.
//! - [`listpack`], [`ziplist`], [`intset`], [`zipmap`]: the packed
//!   encodings inside values.
//! - Streams: [`stream`].
//!
//! Everything here is a pure function over bytes and values: no locks,
//! no I/O beyond an `impl Write` the caller hands in.

pub(crate) mod codec;
pub(crate) mod crc64;
pub(crate) mod disk;
pub(crate) mod file;
pub(crate) mod intset;
pub(crate) mod listpack;
pub(crate) mod lzf;
pub(crate) mod payload;
pub(crate) mod stream;
pub(crate) mod value;
pub(crate) mod ziplist;
pub(crate) mod zipmap;

#[allow(unused_imports)]
pub(crate) use codec::{Corrupt, Input, Out, RDB_VERSION};

/// RDB value types (`RDB_TYPE_*` in rdb.h).
pub(crate) mod types {
    pub(crate) const STRING: u8 = 0;
    pub(crate) const LIST: u8 = 1;
    pub(crate) const SET: u8 = 2;
    pub(crate) const ZSET: u8 = 3;
    pub(crate) const HASH: u8 = 4;
    pub(crate) const ZSET_2: u8 = 5;
    pub(crate) const MODULE: u8 = 6;
    pub(crate) const MODULE_2: u8 = 7;
    pub(crate) const HASH_ZIPMAP: u8 = 9;
    pub(crate) const LIST_ZIPLIST: u8 = 10;
    pub(crate) const SET_INTSET: u8 = 11;
    pub(crate) const ZSET_ZIPLIST: u8 = 12;
    pub(crate) const HASH_ZIPLIST: u8 = 13;
    pub(crate) const LIST_QUICKLIST: u8 = 14;
    pub(crate) const STREAM_LISTPACKS: u8 = 15;
    pub(crate) const HASH_LISTPACK: u8 = 16;
    pub(crate) const ZSET_LISTPACK: u8 = 17;
    pub(crate) const LIST_QUICKLIST_2: u8 = 18;
    pub(crate) const STREAM_LISTPACKS_2: u8 = 19;
}

/// RDB opcodes (`RDB_OPCODE_*` in rdb.h).
pub(crate) mod opcodes {
    pub(crate) const FUNCTION2: u8 = 245;
    pub(crate) const FUNCTION: u8 = 246;
    pub(crate) const MODULE_AUX: u8 = 247;
    pub(crate) const IDLE: u8 = 248;
    pub(crate) const FREQ: u8 = 249;
    pub(crate) const AUX: u8 = 250;
    pub(crate) const RESIZEDB: u8 = 251;
    pub(crate) const EXPIRETIME_MS: u8 = 252;
    pub(crate) const EXPIRETIME: u8 = 253;
    pub(crate) const SELECTDB: u8 = 254;
    pub(crate) const EOF: u8 = 255;
}

/// Why a value or file could not be written.
#[derive(Debug)]
pub(crate) enum SaveError {
    /// The sink failed.
    Io(std::io::Error),
}

impl From<std::io::Error> for SaveError {
    fn from(e: std::io::Error) -> Self {
        SaveError::Io(e)
    }
}

impl std::fmt::Display for SaveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SaveError::Io(e) => write!(f, "{e}"),
        }
    }
}
