//! Parse + dispatch of arbitrary command arrays on an engine without a
//! socket. Requests are separated by 0x00 and arguments by 0x01; a
//! request's first byte picks the command name from coordis's command
//! table, so every handler is reached. Scripting commands are left out (a
//! fuzzed `while true do end` would only test the time limit, which the
//! scripting tests cover) as is SHUTDOWN. Byte 0x02 at the start of a
//! request moves the clock forward, to reach expiry paths.
#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use coordis::store::ManualClock;
use coordis::testing::LocalEngine;
use libfuzzer_sys::fuzz_target;

fn names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let skip = ["eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "shutdown"];
        coordis::cmd::all().map(|c| c.name).filter(|n| !skip.contains(n)).collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let clock = Arc::new(ManualClock::at_ms(1_700_000_000_000));
    let mut config = coordis::Config::default();
    // Keep single values small: SETRANGE at a 512 MB offset is legal, and
    // slow, and not what this target looks for.
    config.proto_max_bulk_len = 1024 * 1024;
    let mut engine = LocalEngine::new(config, clock.clone());
    for request in data.split(|&b| b == 0) {
        let Some((&first, rest)) = request.split_first() else {
            continue;
        };
        if first == 2 {
            clock.advance_ms(rest.first().copied().unwrap_or(1) as u64 * 10);
            continue;
        }
        let mut args = vec![Bytes::from_static(names()[first as usize % names().len()].as_bytes())];
        if !rest.is_empty() {
            args.extend(rest.split(|&b| b == 1).map(Bytes::copy_from_slice));
        }
        let (reply, closed) = engine.run(vec![args]);
        assert!(closed || !reply.is_empty(), "every command gets a reply");
        if closed {
            break;
        }
    }
});
