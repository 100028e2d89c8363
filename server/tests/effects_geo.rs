//! The effects of the GEO writes (`ServerControl::effects`), compared with
//! what a real Redis 7.0.15 sends its replicas for the same commands.
//!
//! Each workload runs on an embedded coordis, whose feed must be exactly
//! the expected stream, and on a `redis-server` with a replication capture
//! attached, whose stream must be the same (`effects_common::check`). Without
//! redis-server only the first half runs (the expected streams were read
//! from Redis's), unless `COORDIS_REQUIRE_REDIS=1`.
//!
//! What the rules come to: GEOADD is replayed as the ZADD Redis rewrites
//! it to (lower-case `zadd`, the options as given, the 52-bit scores); a
//! GEOADD that changed nothing leaves nothing; GEORADIUS with STORE or
//! STOREDIST, GEORADIUSBYMEMBER's and GEOSEARCHSTORE are replayed as
//! themselves when they stored or deleted a destination, and leave nothing
//! otherwise (a search without STORE, a store of nothing over no key).

mod effects_common;

use effects_common::check;

#[test]
fn geoadd_is_replayed_as_zadd_of_the_scores() {
    check(
        &[
            "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
            "GEOADD g 13.361389 38.115556 Palermo",
            "GEOADD g ch XX 13.361389 38.115556 Palermo 15 37 Catania",
            "GEOADD g NX 1 1 Palermo",
            "GEOADD g 200 1 bad",
            "GEOADD g Nx cH 1 1 Palermo 180 -85.05112878 corner",
        ],
        &[
            "SELECT 0",
            "zadd g 3479099956230698 Palermo 3479447370796909 Catania",
            "zadd g ch XX 3479099956230698 Palermo 3476504601741708 Catania",
            "zadd g Nx cH 3377822707026402 Palermo 9007199254740992 corner",
        ],
    );
}

#[test]
fn stores_are_replayed_as_themselves_when_they_changed_something() {
    check(
        &[
            "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
            "GEORADIUS g 15 37 200 km",
            "GEORADIUS g 15 37 200 km STORE dst",
            "GEORADIUS g 15 37 200 km STOREDIST dst2 COUNT 1",
            "GEOSEARCHSTORE dst3 g FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST",
            "GEORADIUS g 15 37 1 m STORE dst",
            "GEORADIUS g 15 37 1 m STORE dst",
            "GEORADIUSBYMEMBER nokey m 1 km STORE dst2",
            "GEORADIUSBYMEMBER nokey m 1 km STORE dst2",
            "GEOSEARCHSTORE dst3 nokey FROMLONLAT 1 1 BYRADIUS 1 km",
            "GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 200 km",
        ],
        &[
            "SELECT 0",
            "zadd g 3479099956230698 Palermo 3479447370796909 Catania",
            "GEORADIUS g 15 37 200 km STORE dst",
            "GEORADIUS g 15 37 200 km STOREDIST dst2 COUNT 1",
            "GEOSEARCHSTORE dst3 g FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST",
            "GEORADIUS g 15 37 1 m STORE dst",
            "GEORADIUSBYMEMBER nokey m 1 km STORE dst2",
            "GEOSEARCHSTORE dst3 nokey FROMLONLAT 1 1 BYRADIUS 1 km",
        ],
    );
}
