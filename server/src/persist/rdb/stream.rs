//! Streams in the RDB format (STREAM_LISTPACKS, _2): not written or read
//! yet. The value writer and reader dispatch here, so the stream codec is
//! filled in without touching them.

use super::codec::{Corrupt, Input, Out, Result};
use super::SaveError;
use crate::store::stream::Stream;

/// Writes `stream` (type byte included) as Redis 7.0.15 does
/// (STREAM_LISTPACKS_2). Not yet implemented: an error, so a save of a
/// dataset holding a stream fails rather than dropping it.
pub(crate) fn write(_out: &mut Out, _stream: &Stream) -> std::result::Result<(), SaveError> {
    Err(SaveError::Unsupported("a stream cannot be saved yet"))
}

/// Reads a stream of RDB type `rdb_type` (STREAM_LISTPACKS or _2), the
/// type byte already read; `deep` is the deep validation of
/// `sanitize-dump-payload`. Not yet implemented: an error.
pub(crate) fn read(_input: &mut Input<'_>, _rdb_type: u8, _deep: bool) -> Result<Stream> {
    Err(Corrupt::bad("a stream cannot be loaded yet"))
}
