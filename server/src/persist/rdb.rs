//! The RDB format: encoding and decoding of values and whole files.

pub(crate) mod stream;
