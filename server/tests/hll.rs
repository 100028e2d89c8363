//! HyperLogLog beyond the scenario files: the effects the PF commands leave
//! (PFCOUNT of a stale cache is replicated as itself, a no-op PFADD leaves
//! nothing), compared with what a real Redis 7.0.15 sends its replicas, and
//! PFSELFTEST, whose ten million adds take a debug build longer than the
//! differential's client waits.

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use coordis::testing::{RawClient, RedisServer};

mod effects_common;

use effects_common::check;

#[test]
fn pf_writes_leave_redis_effects_and_pfcount_of_a_stale_cache_is_one() {
    check(
        &[
            "PFADD h a b c",
            "PFADD h a",
            "PFADD h",
            "PFCOUNT h",
            "PFCOUNT h",
            "PFCOUNT h nokey",
            "PFCOUNT nokey",
            "PFADD h d",
            "PFCOUNT h",
            "PFMERGE d h",
            "PFMERGE d",
            "PFDEBUG TODENSE d",
            "PFDEBUG TODENSE d",
            "PFDEBUG ENCODING d",
            "PFDEBUG DECODE h",
            "PFDEBUG GETREG h",
            "PFDEBUG GETREG h",
            "SET s x",
            "PFADD s a",
        ],
        &[
            "SELECT 0",
            "PFADD h a b c",
            "PFCOUNT h",
            "PFADD h d",
            "PFCOUNT h",
            "PFMERGE d h",
            "PFMERGE d",
            "PFDEBUG TODENSE d",
            "PFDEBUG GETREG h",
            "SET s x",
        ],
    );
}

#[test]
fn pfcount_inside_a_transaction_is_its_one_effect() {
    // One effect is not wrapped in MULTI/EXEC; two are.
    check(
        &[
            "PFADD h a",
            "MULTI",
            "PFCOUNT h",
            "PFCOUNT h",
            "PFADD h a",
            "EXEC",
            "MULTI",
            "PFADD h b",
            "PFCOUNT h",
            "EXEC",
        ],
        &[
            "SELECT 0",
            "PFADD h a",
            "PFCOUNT h",
            "MULTI",
            "PFADD h b",
            "PFCOUNT h",
            "EXEC",
        ],
    );
}

/// Sends `args` and waits up to `limit` for the reply.
fn command_waiting(c: &mut RawClient, args: &[&str], limit: Duration) -> Vec<u8> {
    let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&RawClient::encode(&raw)).unwrap();
    let deadline = Instant::now() + limit;
    loop {
        match c.read_reply() {
            Ok(reply) => return reply,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) && Instant::now() < deadline => {}
            Err(e) => panic!("{args:?}: {e}"),
        }
    }
}

#[test]
fn pfselftest_passes_as_on_redis() {
    let server = coordis::Server::builder().start_blocking().unwrap();
    let mut c = RawClient::connect(server.addr()).unwrap();
    let limit = Duration::from_secs(600);
    assert_eq!(command_waiting(&mut c, &["PFSELFTEST"], limit), b"+OK\r\n");
    // With a sparse limit too small for the small cardinalities, the test
    // that they stay sparse fails, as it does on Redis.
    c.command(&["CONFIG", "SET", "hll-sparse-max-bytes", "20"]).unwrap();
    let ours = command_waiting(&mut c, &["PFSELFTEST"], limit);
    assert_eq!(ours, b"-ERR TESTFAILED sparse encoding not used\r\n");
    let Some(redis) = RedisServer::start(&[]).unwrap() else {
        return;
    };
    let mut r = RawClient::connect(redis.addr()).unwrap();
    assert_eq!(command_waiting(&mut r, &["PFSELFTEST"], limit), b"+OK\r\n");
    r.command(&["CONFIG", "SET", "hll-sparse-max-bytes", "20"]).unwrap();
    assert_eq!(command_waiting(&mut r, &["PFSELFTEST"], limit), ours);
}
