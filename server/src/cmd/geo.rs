//! GEO commands, following Redis 7.0's `geo.c` argument by argument: a
//! geospatial index is a sorted set whose scores are 52-bit geohashes
//! ([`crate::store::geohash`] does the arithmetic).
//!
//! GEOADD is ZADD of the encoded scores, and ZADD (`zadd key [flags]
//! score member ...`) is its effect, as Redis rewrites its command vector.
//! A search walks the centre's cell and its neighbours in Redis's order,
//! keeps what is inside the shape, and sorts by distance as Redis does:
//! glibc's `qsort` (a stable merge sort) when every match is returned, the
//! Bentley–McIlroy partial sort of Redis's `pqsort` when COUNT returns
//! fewer, so equal distances come out in Redis's order too. A STORE or
//! STOREDIST counts the members stored (or one for a destination it
//! deleted) and leaves the command itself as its effect.

use std::cmp::Ordering;

use bytes::Bytes;

use super::args::{int, is};
use super::flags::*;
use super::{acl, CommandSpec, Ctx};
use crate::errors::{self, err};
use crate::notify;
use crate::protocol::Reply;
use crate::store::geohash::{self, Extent, Shape, LAT_MAX, LAT_MIN, LON_MAX, LON_MIN};
use crate::store::num;
use crate::store::zset::{ScoreRange, ZSet};
use crate::store::{EntryRef, Value, ValueRef};
use crate::tri;

macro_rules! spec {
    ($($row:tt)*) => { command!("geo", $($row)*) };
}

#[rustfmt::skip]
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec!("geoadd", -5, WRITE | DENYOOM, acl::GEO, "Add one or more geospatial items in the geospatial index represented using a sorted set", geoadd),
    spec!("geodist", -4, READONLY, acl::GEO, "Returns the distance between two members of a geospatial index", geodist),
    spec!("geohash", -2, READONLY, acl::GEO, "Returns members of a geospatial index as standard geohash strings", geohash),
    spec!("geopos", -2, READONLY, acl::GEO, "Returns longitude and latitude of members of a geospatial index", geopos),
    spec!("georadius", -6, WRITE | DENYOOM | MOVABLEKEYS, acl::GEO, "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point", georadius).keys_by(super::keyspecs::georadius_keys),
    spec!("georadius_ro", -6, READONLY, acl::GEO, "A read-only variant for GEORADIUS", georadius_ro),
    spec!("georadiusbymember", -5, WRITE | DENYOOM | MOVABLEKEYS, acl::GEO, "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member", georadiusbymember).keys_by(super::keyspecs::georadius_keys),
    spec!("georadiusbymember_ro", -5, READONLY, acl::GEO, "A read-only variant for GEORADIUSBYMEMBER", georadiusbymember_ro),
    spec!("geosearch", -7, READONLY, acl::GEO, "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.", geosearch),
    spec!("geosearchstore", -8, WRITE | DENYOOM, acl::GEO, "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.", geosearchstore),
];

/// Digits after the point of a distance reply (Redis's
/// `addReplyDoubleDistance`: "5.2145", decently accurate in kilometres).
const DISTANCE_DIGITS: i32 = 4;

/// Looks up the sorted set a GEO command reads (a keyspace hit or miss, as
/// Redis's `lookupKeyRead`); another type is WRONGTYPE.
fn read<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a ZSet>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(EntryRef {
            value: ValueRef::ZSet(z),
            ..
        }) => Ok(Some(z)),
        Some(_) => Err(err(errors::WRONGTYPE)),
    }
}

/// A longitude and a latitude argument (Redis's `extractLongLatOrReply`).
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<[f64; 2], Reply> {
    let lon = num::parse_f64(lon).ok_or_else(|| err(errors::NOT_FLOAT))?;
    let lat = num::parse_f64(lat).ok_or_else(|| err(errors::NOT_FLOAT))?;
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return Err(errors::geo_invalid_pair(lon, lat));
    }
    Ok([lon, lat])
}

/// Metres per unit of a unit argument (Redis's `extractUnitOrReply`).
fn unit(arg: &[u8]) -> Result<f64, Reply> {
    const UNITS: &[(&str, f64)] = &[("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)];
    UNITS
        .iter()
        .find(|(name, _)| is(arg, name))
        .map(|(_, metres)| *metres)
        .ok_or_else(|| err(errors::GEO_UNIT))
}

/// `radius unit`: the radius and metres per unit.
fn radius_arg(radius: &[u8], unit_arg: &[u8]) -> Result<(f64, f64), Reply> {
    let r = num::parse_f64(radius).ok_or_else(|| err(errors::GEO_RADIUS_NOT_NUMBER))?;
    if r < 0.0 {
        return Err(err(errors::GEO_RADIUS_NEGATIVE));
    }
    Ok((r, unit(unit_arg)?))
}

/// `width height unit`: the box and metres per unit.
fn box_arg(args: &[Bytes]) -> Result<(f64, f64, f64), Reply> {
    let w = num::parse_f64(&args[0]).ok_or_else(|| err(errors::GEO_WIDTH_NOT_NUMBER))?;
    let h = num::parse_f64(&args[1]).ok_or_else(|| err(errors::GEO_HEIGHT_NOT_NUMBER))?;
    if h < 0.0 || w < 0.0 {
        return Err(err(errors::GEO_BOX_NEGATIVE));
    }
    Ok((w, h, unit(&args[2])?))
}

/// The position of `member`, if the set has it.
fn member_position(z: &ZSet, member: &[u8]) -> Option<[f64; 2]> {
    z.score(member).map(geohash::decode_score)
}

/// A distance as Redis replies one: rounded (half to even, C's `llrint`)
/// to four decimals, always with them.
fn format_distance(d: f64) -> String {
    if d == 0.0 {
        return format!("0.{:0width$}", 0, width = DISTANCE_DIGITS as usize);
    }
    let scaled = d * 10f64.powi(DISTANCE_DIGITS);
    // llrint of a value outside a long long is x86-64's "indefinite" value.
    let v = if scaled.is_finite() && scaled.abs() < 9.2e18 {
        scaled.round_ties_even() as i64
    } else {
        i64::MIN
    };
    let sign = if v < 0 { "-" } else { "" };
    let magnitude = v.unsigned_abs();
    let unit = 10u64.pow(DISTANCE_DIGITS as u32);
    format!(
        "{sign}{}.{:0width$}",
        magnitude / unit,
        magnitude % unit,
        width = DISTANCE_DIGITS as usize
    )
}

fn distance_reply(d: f64) -> Reply {
    Reply::bulk(format_distance(d))
}

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]: ZADD of the
/// encoded positions, and ZADD is its effect.
fn geoadd(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (mut nx, mut xx) = (false, false);
    let mut first = 2;
    while first < args.len() {
        let a = &args[first];
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if !is(a, "ch") {
            break;
        }
        first += 1;
    }
    if !(args.len() - first).is_multiple_of(3) || (xx && nx) {
        return err(errors::SYNTAX);
    }
    let mut zadd: Vec<Bytes> = Vec::with_capacity(first + (args.len() - first) / 3 * 2);
    zadd.push(Bytes::from_static(b"zadd"));
    zadd.extend(args[1..first].iter().cloned());
    for triple in args[first..].chunks(3) {
        let [lon, lat] = tri!(lon_lat(&triple[0], &triple[1]));
        zadd.push(super::args::int_arg(geohash::encode_score(lon, lat)));
        zadd.push(triple[2].clone());
    }
    let reply = super::zset::zadd(ctx, &zadd);
    ctx.propagate_as(|| zadd);
    reply
}

/// GEODIST key member1 member2 [unit].
fn geodist(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let to_metres = match args.len() {
        5 => tri!(unit(&args[4])),
        n if n > 5 => return err(errors::SYNTAX),
        _ => 1.0,
    };
    let Some(z) = tri!(read(ctx, &args[1])) else {
        return Reply::Nil;
    };
    match (member_position(z, &args[2]), member_position(z, &args[3])) {
        (Some([lon1, lat1]), Some([lon2, lat2])) => {
            distance_reply(geohash::distance(lon1, lat1, lon2, lat2) / to_metres)
        }
        _ => Reply::Nil,
    }
}

/// GEOHASH key member [...]: standard 11-character geohashes.
fn geohash(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let z = tri!(read(ctx, &args[1]));
    Reply::Array(
        args[2..]
            .iter()
            .map(|m| match z.and_then(|z| z.score(m)) {
                Some(score) => Reply::bulk(Bytes::copy_from_slice(&geohash::standard_string(score))),
                None => Reply::Nil,
            })
            .collect(),
    )
}

/// GEOPOS key member [...]: `[longitude, latitude]` pairs.
fn geopos(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let z = tri!(read(ctx, &args[1]));
    Reply::Array(
        args[2..]
            .iter()
            .map(|m| match z.and_then(|z| member_position(z, m)) {
                Some([lon, lat]) => Reply::Array(vec![Reply::HumanDouble(lon), Reply::HumanDouble(lat)]),
                None => Reply::NilArray,
            })
            .collect(),
    )
}

/// Which search command runs (Redis's `RADIUS_*` and `GEOSEARCH*` flags).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Search {
    /// GEORADIUS, GEORADIUS_RO (`store`: STORE and STOREDIST accepted).
    Coords { store: bool },
    /// GEORADIUSBYMEMBER, GEORADIUSBYMEMBER_RO.
    Member { store: bool },
    /// GEOSEARCH.
    Area,
    /// GEOSEARCHSTORE.
    AreaStore,
}

impl Search {
    fn radius_store(self) -> bool {
        matches!(self, Search::Coords { store: true } | Search::Member { store: true })
    }

    fn is_search(self) -> bool {
        matches!(self, Search::Area | Search::AreaStore)
    }
}

/// The order a search's results are sorted in.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A match: what the reply or the stored set needs of it. The member is
/// the set's own bytes: only the matches returned are copied out.
#[derive(Clone, Debug)]
struct Point<'a> {
    member: &'a [u8],
    lon: f64,
    lat: f64,
    /// Metres from the centre, until the reply converts it to the unit.
    dist: f64,
    score: f64,
}

/// Redis's `sort_gp_asc`: by distance, equal when equal.
fn by_distance(a: &Point<'_>, b: &Point<'_>) -> Ordering {
    if a.dist > b.dist {
        Ordering::Greater
    } else if a.dist == b.dist {
        Ordering::Equal
    } else {
        Ordering::Less
    }
}

fn georadius(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    search(ctx, args, 1, Search::Coords { store: true })
}

fn georadius_ro(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    search(ctx, args, 1, Search::Coords { store: false })
}

fn georadiusbymember(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    search(ctx, args, 1, Search::Member { store: true })
}

fn georadiusbymember_ro(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    search(ctx, args, 1, Search::Member { store: false })
}

fn geosearch(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    search(ctx, args, 1, Search::Area)
}

fn geosearchstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    search(ctx, args, 2, Search::AreaStore)
}

/// A search's options, as Redis's `georadiusGeneric` reads them.
#[derive(Debug, Default)]
struct Options {
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    any: bool,
    /// 0: no limit.
    count: usize,
    /// The destination's argument index (STORE, STOREDIST, GEOSEARCHSTORE).
    store: Option<usize>,
    storedist: bool,
}

/// Redis's `georadiusGeneric`: `src` is the source key's index.
fn search(ctx: &mut Ctx, args: &[Bytes], src: usize, how: Search) -> Reply {
    let limits = ctx.server.config.zset_listpack();
    let z = tri!(read(ctx, &args[src]));
    // Redis's zeroed shape: a GEORADIUSBYMEMBER of a missing key never
    // reads its radius.
    let mut shape = Shape {
        lon: 0.0,
        lat: 0.0,
        extent: Extent::Radius(0.0),
        conversion: 0.0,
    };
    let mut o = Options::default();
    let base = match how {
        Search::Coords { .. } => {
            [shape.lon, shape.lat] = tri!(lon_lat(&args[2], &args[3]));
            let (r, conversion) = tri!(radius_arg(&args[4], &args[5]));
            (shape.extent, shape.conversion) = (Extent::Radius(r), conversion);
            6
        }
        Search::Member { .. } => {
            if let Some(z) = z {
                let Some([lon, lat]) = member_position(z, &args[2]) else {
                    return err(errors::GEO_MEMBER_UNKNOWN);
                };
                (shape.lon, shape.lat) = (lon, lat);
                let (r, conversion) = tri!(radius_arg(&args[3], &args[4]));
                (shape.extent, shape.conversion) = (Extent::Radius(r), conversion);
            }
            5
        }
        Search::Area => 2,
        Search::AreaStore => {
            o.store = Some(1);
            3
        }
    };
    let mut sort = Sort::None;
    let (mut frommember, mut fromlonlat, mut byradius, mut bybox) = (false, false, false, false);
    let remaining = args.len().saturating_sub(base);
    let mut i = 0;
    while i < remaining {
        let at = base + i;
        let arg = &args[at];
        if is(arg, "withdist") {
            o.withdist = true;
        } else if is(arg, "withhash") {
            o.withhash = true;
        } else if is(arg, "withcoord") {
            o.withcoord = true;
        } else if is(arg, "any") {
            o.any = true;
        } else if is(arg, "asc") {
            sort = Sort::Asc;
        } else if is(arg, "desc") {
            sort = Sort::Desc;
        } else if is(arg, "count") && i + 1 < remaining {
            let n = tri!(int(&args[at + 1]));
            if n <= 0 {
                return err(errors::GEO_COUNT_NOT_POSITIVE);
            }
            o.count = usize::try_from(n).unwrap_or(usize::MAX);
            i += 1;
        } else if (is(arg, "store") || is(arg, "storedist")) && i + 1 < remaining && how.radius_store() {
            o.store = Some(at + 1);
            o.storedist = is(arg, "storedist");
            i += 1;
        } else if is(arg, "storedist") && how == Search::AreaStore {
            o.storedist = true;
        } else if is(arg, "frommember") && i + 1 < remaining && how.is_search() && !fromlonlat {
            // Without a source key the member is not looked up: the
            // parsing goes on, and the reply is the empty one.
            if let Some(z) = z {
                let Some([lon, lat]) = member_position(z, &args[at + 1]) else {
                    return err(errors::GEO_MEMBER_UNKNOWN);
                };
                (shape.lon, shape.lat) = (lon, lat);
            }
            frommember = true;
            i += 1;
        } else if is(arg, "fromlonlat") && i + 2 < remaining && how.is_search() && !frommember {
            [shape.lon, shape.lat] = tri!(lon_lat(&args[at + 1], &args[at + 2]));
            fromlonlat = true;
            i += 2;
        } else if is(arg, "byradius") && i + 2 < remaining && how.is_search() && !bybox {
            let (r, conversion) = tri!(radius_arg(&args[at + 1], &args[at + 2]));
            (shape.extent, shape.conversion) = (Extent::Radius(r), conversion);
            byradius = true;
            i += 2;
        } else if is(arg, "bybox") && i + 3 < remaining && how.is_search() && !byradius {
            let (width, height, conversion) = tri!(box_arg(&args[at + 1..at + 4]));
            (shape.extent, shape.conversion) = (Extent::Box { width, height }, conversion);
            bybox = true;
            i += 3;
        } else {
            return err(errors::SYNTAX);
        }
        i += 1;
    }
    if o.store.is_some() && (o.withdist || o.withhash || o.withcoord) {
        return err(if how == Search::AreaStore {
            errors::GEOSEARCHSTORE_WITH
        } else {
            errors::GEO_STORE_WITH
        });
    }
    if how.is_search() && !(frommember || fromlonlat) {
        return errors::geo_needs_center(&args[0]);
    }
    if how.is_search() && !(byradius || bybox) {
        return errors::geo_needs_shape(&args[0]);
    }
    if o.any && o.count == 0 {
        return err(errors::GEO_ANY_WITHOUT_COUNT);
    }
    let Some(z) = z else {
        return match o.store {
            Some(dst) => {
                if ctx.db().server_del(&args[dst]) {
                    ctx.notify(notify::GENERIC, "del", &args[dst]);
                    ctx.dirty(1);
                }
                Reply::Int(0)
            }
            None => Reply::Array(vec![]),
        };
    };
    if o.count != 0 && sort == Sort::None && !o.any {
        sort = Sort::Asc;
    }
    let mut found = members_in_cells(z, &shape, if o.any { o.count } else { 0 });
    if found.is_empty() && o.store.is_none() {
        return Reply::Array(vec![]);
    }
    let returned = if o.count == 0 {
        found.len()
    } else {
        found.len().min(o.count)
    };
    if sort != Sort::None {
        let cmp: fn(&Point<'_>, &Point<'_>) -> Ordering = match sort {
            Sort::Desc => |a, b| by_distance(b, a),
            _ => by_distance,
        };
        if returned == found.len() {
            // glibc's qsort is a merge sort: stable.
            found.sort_by(cmp);
        } else {
            partial_sort(&mut found, 0, returned - 1, cmp);
        }
    }
    found.truncate(returned);
    for p in &mut found {
        p.dist /= shape.conversion;
    }
    let Some(dst) = o.store else {
        return Reply::Array(found.into_iter().map(|p| point_reply(p, &o)).collect());
    };
    let dst = &args[dst];
    if returned > 0 {
        let stored = ZSet::from_items(
            found
                .iter()
                .map(|p| (p.member, if o.storedist { p.dist } else { p.score })),
            limits,
        );
        drop(found);
        ctx.db().insert(dst, Value::ZSet(Box::new(stored)), 0);
        let event = if how.is_search() {
            "geosearchstore"
        } else {
            "georadiusstore"
        };
        ctx.notify(notify::ZSET, event, dst);
        ctx.dirty(returned as u64);
    } else if ctx.db().server_del(dst) {
        ctx.notify(notify::GENERIC, "del", dst);
        ctx.dirty(1);
    }
    Reply::Int(returned as i64)
}

/// One result: the member alone, or `[member, dist?, hash?, [lon, lat]?]`.
fn point_reply(p: Point<'_>, o: &Options) -> Reply {
    let member = Reply::Bulk(Bytes::copy_from_slice(p.member));
    if !(o.withdist || o.withhash || o.withcoord) {
        return member;
    }
    let mut item = vec![member];
    if o.withdist {
        item.push(distance_reply(p.dist));
    }
    if o.withhash {
        item.push(Reply::Int(p.score as i64));
    }
    if o.withcoord {
        item.push(Reply::Array(vec![Reply::HumanDouble(p.lon), Reply::HumanDouble(p.lat)]));
    }
    Reply::Array(item)
}

/// The members inside `shape`, cell by cell in Redis's order (Redis's
/// `membersOfAllNeighbors`), stopping at `limit` matches (0: none; ANY).
fn members_in_cells<'a>(z: &'a ZSet, shape: &Shape, limit: usize) -> Vec<Point<'a>> {
    let cells = shape.cells();
    let centre = geohash::Origin::new(shape.lon, shape.lat);
    let mut found = vec![];
    // As in Redis, the centre (index 0) is never compared with: a
    // neighbour equal to the last cell searched is skipped only once a
    // neighbour has been searched.
    let mut last = 0;
    for (i, &cell) in cells.iter().enumerate() {
        let Some((min, max)) = geohash::score_range(cell) else {
            continue;
        };
        if last != 0 && cell == cells[last] {
            continue;
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
        members_in_range(z, min, max, shape, &centre, &mut found, limit);
        last = i;
    }
    found
}

/// The members with scores in `[min, max)` inside `shape`, appended to
/// `found` (Redis's `geoGetPointsInRange`).
fn members_in_range<'a>(
    z: &'a ZSet,
    min: f64,
    max: f64,
    shape: &Shape,
    centre: &geohash::Origin,
    found: &mut Vec<Point<'a>>,
    limit: usize,
) {
    let range = ScoreRange {
        min,
        max,
        minex: false,
        maxex: true,
    };
    let mut cur = z.first_in_score_range(&range);
    while let Some(c) = cur {
        let (member, score) = z.get(c);
        if !range.lte_max(score) {
            break;
        }
        if let Some(([lon, lat], dist)) = shape.contains(centre, score) {
            found.push(Point {
                member,
                lon,
                lat,
                dist,
                score,
            });
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
        cur = z.step(c, false);
    }
}

/// Sorts `a` enough that positions `lo..=hi` hold what a full sort puts
/// there, by the steps of Redis's `pqsort` (Bentley and McIlroy's
/// quicksort, "Engineering a Sort Function", skipping the partitions
/// outside `lo..=hi`): the same swaps, so elements that compare equal end
/// where Redis puts them.
fn partial_sort<T>(a: &mut [T], lo: usize, hi: usize, cmp: fn(&T, &T) -> Ordering) {
    /// Below this many elements, an insertion sort.
    const INSERTION: usize = 7;
    /// Above this many, the pivot is the median of three medians.
    const NINTHER: usize = 40;
    // Whether the partition `start..start + len` holds none of `lo..=hi`.
    let outside = |start: usize, len: usize| (lo < start && hi < start) || (lo >= start + len && hi >= start + len);
    let med3 = |a: &[T], x: usize, y: usize, z: usize| {
        if cmp(&a[x], &a[y]).is_lt() {
            if cmp(&a[y], &a[z]).is_lt() {
                y
            } else if cmp(&a[x], &a[z]).is_lt() {
                z
            } else {
                x
            }
        } else if cmp(&a[y], &a[z]).is_gt() {
            y
        } else if cmp(&a[x], &a[z]).is_lt() {
            x
        } else {
            z
        }
    };
    let vecswap = |a: &mut [T], x: usize, y: usize, n: usize| {
        for k in 0..n {
            a.swap(x + k, y + k);
        }
    };
    let (mut base, mut n) = (0usize, a.len());
    // The explicit stack stands for the first partition's recursion.
    let mut pending: Vec<(usize, usize)> = vec![];
    loop {
        if n < INSERTION {
            for m in base + 1..base + n {
                let mut l = m;
                while l > base && cmp(&a[l - 1], &a[l]).is_gt() {
                    a.swap(l, l - 1);
                    l -= 1;
                }
            }
        } else {
            let mut pm = base + n / 2;
            if n > INSERTION {
                let mut pl = base;
                let mut pn = base + n - 1;
                if n > NINTHER {
                    let d = n / 8;
                    pl = med3(a, pl, pl + d, pl + 2 * d);
                    pm = med3(a, pm - d, pm, pm + d);
                    pn = med3(a, pn - 2 * d, pn - d, pn);
                }
                pm = med3(a, pl, pm, pn);
            }
            a.swap(base, pm);
            let (mut pa, mut pb) = (base + 1, base + 1);
            let (mut pc, mut pd) = (base + n - 1, base + n - 1);
            loop {
                while pb <= pc {
                    let r = cmp(&a[pb], &a[base]);
                    if r.is_gt() {
                        break;
                    }
                    if r.is_eq() {
                        a.swap(pa, pb);
                        pa += 1;
                    }
                    pb += 1;
                }
                while pb <= pc {
                    let r = cmp(&a[pc], &a[base]);
                    if r.is_lt() {
                        break;
                    }
                    if r.is_eq() {
                        a.swap(pc, pd);
                        pd -= 1;
                    }
                    pc -= 1;
                }
                if pb > pc {
                    break;
                }
                a.swap(pb, pc);
                pb += 1;
                pc -= 1;
            }
            let pn = base + n;
            let r = (pa - base).min(pb - pa);
            vecswap(a, base, pb - r, r);
            let r = (pd - pc).min(pn - pd - 1);
            vecswap(a, pb, pn - r, r);
            let left = pb - pa;
            let right = pd - pc;
            // Redis recurses into the left part, then iterates on the right.
            if right > 1 && !outside(pn - right, right) {
                pending.push((pn - right, right));
            }
            if left > 1 && !outside(base, left) {
                (base, n) = (base, left);
                continue;
            }
        }
        match pending.pop() {
            Some((b, len)) => (base, n) = (b, len),
            None => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_have_four_decimals_rounded_half_to_even() {
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(166274.15156960033), "166274.1516");
        // Exact ties (2^-5 and 3 * 2^-5, times 10^4: 312.5 and 937.5).
        assert_eq!(format_distance(0.03125), "0.0312");
        assert_eq!(format_distance(0.09375), "0.0938");
        assert_eq!(format_distance(0.00001), "0.0000");
        assert_eq!(format_distance(12.5), "12.5000");
        assert_eq!(format_distance(-1.25), "-1.2500");
    }

    #[test]
    fn the_partial_sort_orders_the_asked_positions() {
        fn cmp(a: &(u32, u32), b: &(u32, u32)) -> Ordering {
            a.0.cmp(&b.0)
        }
        let mut rng = fastrand::Rng::with_seed(7);
        for len in [1usize, 2, 6, 7, 8, 40, 41, 100, 500] {
            for hi in [0, len / 3, len - 1] {
                let mut v: Vec<(u32, u32)> = (0..len as u32).map(|i| (rng.u32(0..20), i)).collect();
                let mut sorted = v.clone();
                sorted.sort_by(cmp);
                partial_sort(&mut v, 0, hi, cmp);
                let keys: Vec<u32> = v[..=hi].iter().map(|p| p.0).collect();
                let want: Vec<u32> = sorted[..=hi].iter().map(|p| p.0).collect();
                assert_eq!(keys, want, "len {len} hi {hi}");
            }
        }
    }
}
