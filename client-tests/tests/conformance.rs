//! The conformance suite: every scenario of `server/tests/scenarios/*.txt`
//! (named command sequences covering the supported commands, their options
//! and their errors) is sent to a reference server and to a candidate, in
//! RESP2 and RESP3, and the replies are compared byte for byte.
//!
//! By default the reference is a `redis-server` started here and the
//! candidate an embedded coordis. `scripts/conformance.sh REF CANDIDATE`
//! points it at two running servers instead (`COORDIS_CONFORMANCE_REF` and
//! `COORDIS_CONFORMANCE_CANDIDATE`, as host:port). The scenarios FLUSHALL
//! both servers.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

use coordis::testing::conformance::{compare, load_dir};
use coordis::testing::RedisServer;

fn resolve(var: &str) -> Option<SocketAddr> {
    let value = std::env::var(var).ok().filter(|v| !v.is_empty())?;
    Some(
        value
            .to_socket_addrs()
            .unwrap_or_else(|e| panic!("{var}={value}: {e}"))
            .next()
            .expect("an address"),
    )
}

#[test]
fn conformance() {
    let scenarios = load_dir(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../server/tests/scenarios"
    )));
    let mut _keep_redis = None;
    let mut _keep_coordis = None;
    let (reference, candidate) = match (
        resolve("COORDIS_CONFORMANCE_REF"),
        resolve("COORDIS_CONFORMANCE_CANDIDATE"),
    ) {
        (Some(r), Some(c)) => (r, c),
        _ => {
            let Some(redis) = RedisServer::start(&[]).unwrap() else {
                return;
            };
            let coordis = coordis::Server::builder().start_blocking().unwrap();
            let pair = (redis.addr(), coordis.addr());
            _keep_redis = Some(redis);
            _keep_coordis = Some(coordis);
            pair
        }
    };
    let mut commands = 0;
    let mut mismatches = vec![];
    for scenario in &scenarios {
        for resp3 in [false, true] {
            commands += compare(reference, candidate, scenario, resp3, &mut mismatches);
        }
    }
    println!(
        "conformance: {} scenarios, {} commands, {} mismatches",
        scenarios.len(),
        commands,
        mismatches.len()
    );
    for m in &mismatches {
        println!("{m}");
    }
    assert!(mismatches.is_empty(), "{} mismatches (listed above)", mismatches.len());
}
