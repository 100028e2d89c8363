//! RESP framing: bytes in, requests out; replies in, bytes out.
//!
//! Owns the wire format only. It never looks at what a command means and never
//! touches the keyspace. Requests are parsed by [`RequestParser`], which keeps
//! Redis's exact `Protocol error: ...` texts and never allocates from a length
//! a client merely declared. Replies are built as [`Reply`] values and encoded
//! for RESP2 or RESP3 by [`Reply::encode`].
//!
//! The `redis-protocol` crate decodes *replies* (tests, the conformance
//! client); requests are parsed here because a request is a narrower grammar
//! than RESP (arrays of bulk strings, or inline text) whose errors must carry
//! Redis's wording and whose arguments must be zero-copy slices of the read
//! buffer.

mod parse;
mod reply;

pub(crate) use parse::split_args;
pub(crate) use parse::Requests;
pub use parse::{ProtocolLimits, RequestParser};
pub(crate) use reply::format_double;
pub use reply::Reply;
