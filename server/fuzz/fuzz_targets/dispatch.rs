//! Arbitrary command arrays through the engine; see
//! `coordis::testing::fuzz::dispatch`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| coordis::testing::fuzz::dispatch(data));
