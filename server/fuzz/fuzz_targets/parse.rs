//! The request parser on arbitrary bytes; see `coordis::testing::fuzz::parse`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| coordis::testing::fuzz::parse(data));
