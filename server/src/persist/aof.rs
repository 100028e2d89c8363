//! The multi-part append-only file: manifest, base and incremental files.
