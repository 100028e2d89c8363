//! Replays the checked-in fuzz corpus (`server/fuzz/corpus`) through the fuzz
//! targets' bodies, so every input the fuzzer kept stays a regression test
//! without a nightly toolchain.

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{} fails on {}", target, path.display());
        n += 1;
    }
    n
}

#[test]
fn parse_corpus() {
    let n = replay("parse", coordis::testing::fuzz::parse);
    assert!(n > 100, "only {n} inputs");
}

#[test]
fn dispatch_corpus() {
    let n = replay("dispatch", coordis::testing::fuzz::dispatch);
    assert!(n > 100, "only {n} inputs");
}
