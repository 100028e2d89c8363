//! The geohash arithmetic of the GEO commands, as Redis 7.0's
//! `geohash.c` and `geohash_helper.c` compute it: the 52-bit interleaved
//! code a position is stored as (the member's sorted-set score), its
//! decoding to a cell's centre, the haversine distances, and the nine
//! cells a radius or box search walks.
//!
//! Pure arithmetic with no state and no I/O. Every floating-point
//! operation is done in Redis's order, with the C library's `sin`, `cos`,
//! `asin` and `sqrt` (Rust's `f64` methods call the same libm), so every
//! score, coordinate and distance is the double Redis computes, bit for
//! bit; that is what makes the replies byte-identical.

use std::f64::consts::PI;

/// Bits per coordinate of a stored position: 26, so 52 bits in all (a
/// score a double holds exactly).
pub(crate) const STEP_MAX: u8 = 26;
/// The latitudes a position may have: the limits of the Web Mercator
/// projection (EPSG:3857), where the cells are square.
pub(crate) const LAT_MIN: f64 = -85.05112878;
/// See [`LAT_MIN`].
pub(crate) const LAT_MAX: f64 = 85.05112878;
/// The longitudes a position may have.
pub(crate) const LON_MIN: f64 = -180.0;
/// See [`LON_MIN`].
pub(crate) const LON_MAX: f64 = 180.0;
/// The Earth's radius the distances use (WGS-84's quadratic mean), metres.
const EARTH_RADIUS_M: f64 = 6372797.560856;
/// Half the Web Mercator world's width, metres: the search radius at
/// which one cell of step 1 is needed.
const MERCATOR_MAX: f64 = 20037726.37;
/// Degrees to radians.
const D_R: f64 = PI / 180.0;
/// The latitudes from which a search takes one step coarser cells (the
/// cells narrow towards the poles), and two steps coarser.
const POLAR_LAT: f64 = 66.0;
/// See [`POLAR_LAT`].
const FAR_POLAR_LAT: f64 = 80.0;

/// A geohash: `step` bits of each coordinate, interleaved (latitude in the
/// even bits, longitude in the odd ones).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Hash {
    pub(crate) bits: u64,
    pub(crate) step: u8,
}

impl Hash {
    /// Redis's "zero" hash: a neighbour a search leaves out.
    fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash as a 52-bit score (Redis's `geohashAlign52Bits`).
    pub(crate) fn align52(&self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }
}

/// An interval of one coordinate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Range {
    min: f64,
    max: f64,
}

/// The longitudes of stored positions.
const WGS84_LON: Range = Range {
    min: LON_MIN,
    max: LON_MAX,
};
/// The latitudes of stored positions.
const WGS84_LAT: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};
/// The latitudes of a standard geohash string (GEOHASH re-encodes with it).
const STANDARD_LAT: Range = Range { min: -90.0, max: 90.0 };

/// A cell: its longitudes and latitudes.
#[derive(Clone, Copy, Debug)]
struct Area {
    lon: Range,
    lat: Range,
}

/// Spreads the 32 bits of `v` to the even bits of a u64.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bits of `x` into 32 bits.
fn gather(x: u64) -> u64 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF
}

/// C's conversion of a double to a 32-bit unsigned fixed-point offset
/// (always in range here: 0 to 2^26).
fn offset_u32(v: f64) -> u32 {
    v as u32
}

/// C's `(uint64_t)score` as x86-64 code computes it (the SSE2 sequence
/// compilers emit: below 2^63 a signed truncation, above it one of the
/// value less 2^63 with the top bit flipped; NaN and out-of-range values
/// give the "integer indefinite" 2^63). Redis decodes any score this way,
/// so a score ZADD put there (negative, infinite, huge) decodes to the
/// position Redis reports for it.
pub(crate) fn score_bits(score: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    fn cvttsd2si(v: f64) -> u64 {
        if v.is_nan() || !(-TWO63..TWO63).contains(&v) {
            1 << 63
        } else {
            v as i64 as u64
        }
    }
    if score.is_nan() || score < TWO63 {
        cvttsd2si(score)
    } else {
        cvttsd2si(score - TWO63) ^ (1 << 63)
    }
}

/// Encodes a position in cells of `step` bits per coordinate within the
/// given ranges; `None` outside them (Redis's `geohashEncode`).
fn encode(lon_range: Range, lat_range: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if step > 32 || step == 0 {
        return None;
    }
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < lon_range.min || lon > lon_range.max {
        return None;
    }
    let cells = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * cells;
    let lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min) * cells;
    Some(Hash {
        bits: spread(offset_u32(lat_offset)) | (spread(offset_u32(lon_offset)) << 1),
        step,
    })
}

/// The 52-bit score of a valid position (GEOADD).
pub(crate) fn encode_score(lon: f64, lat: f64) -> u64 {
    encode(WGS84_LON, WGS84_LAT, lon, lat, STEP_MAX).map_or(0, |h| h.align52())
}

/// The cell a hash names; `None` for the zero hash (Redis's `geohashDecode`).
fn decode(lon_range: Range, lat_range: Range, hash: Hash) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let lat_cell = gather(hash.bits) as u32;
    let lon_cell = gather(hash.bits >> 1) as u32;
    let cells = (1u64 << hash.step) as f64;
    let lat_scale = lat_range.max - lat_range.min;
    let lon_scale = lon_range.max - lon_range.min;
    // (C's `ilato + 1` is 32-bit unsigned arithmetic: it wraps.)
    let edge = |range: Range, cell: u32, scale: f64| range.min + (f64::from(cell) * 1.0 / cells) * scale;
    Some(Area {
        lat: Range {
            min: edge(lat_range, lat_cell, lat_scale),
            max: edge(lat_range, lat_cell.wrapping_add(1), lat_scale),
        },
        lon: Range {
            min: edge(lon_range, lon_cell, lon_scale),
            max: edge(lon_range, lon_cell.wrapping_add(1), lon_scale),
        },
    })
}

/// The position a score stands for: the centre of its cell, within the
/// valid ranges (Redis's `decodeGeohash`). Any score decodes.
pub(crate) fn decode_score(score: f64) -> [f64; 2] {
    let hash = Hash {
        bits: score_bits(score),
        step: STEP_MAX,
    };
    let area = decode(WGS84_LON, WGS84_LAT, hash).expect("step 26 is never the zero hash");
    let lon = ((area.lon.min + area.lon.max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((area.lat.min + area.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [lon, lat]
}

/// The 11-character standard geohash of a score's position (GEOHASH): the
/// position re-encoded with latitudes -90..90, in base 32, the 11th
/// character always `0` (52 bits fill only 10.4 characters).
pub(crate) fn standard_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    const CHARS: usize = 11;
    const BITS_PER_CHAR: u32 = 5;
    let [lon, lat] = decode_score(score);
    let bits = encode(WGS84_LON, STANDARD_LAT, lon, lat, STEP_MAX).map_or(0, |h| h.bits);
    let mut out = [b'0'; CHARS];
    for (i, c) in out.iter_mut().enumerate().take(CHARS - 1) {
        let shift = 52 - (i as u32 + 1) * BITS_PER_CHAR;
        *c = ALPHABET[((bits >> shift) & 0x1f) as usize];
    }
    out
}

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// The distance along a meridian between two latitudes, metres.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The haversine great-circle distance between two positions, metres.
pub(crate) fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    Origin::new(lon1, lat1).distance(lon2, lat2)
}

/// The first position of many distances, with what each needs of it
/// (radians, the cosine of its latitude) computed once: a search measures
/// hundreds of members from its centre. The same operations in the same
/// order as Redis's `geohashGetDistance`, so the same results.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Origin {
    lon_r: f64,
    lat: f64,
    lat_r: f64,
    cos_lat: f64,
}

impl Origin {
    pub(crate) fn new(lon: f64, lat: f64) -> Origin {
        let lat_r = deg_rad(lat);
        Origin {
            lon_r: deg_rad(lon),
            lat,
            lat_r,
            cos_lat: lat_r.cos(),
        }
    }

    /// The haversine distance from here to `lon2`, `lat2`, metres.
    pub(crate) fn distance(&self, lon2: f64, lat2: f64) -> f64 {
        let lon2r = deg_rad(lon2);
        let v = ((lon2r - self.lon_r) / 2.0).sin();
        if v == 0.0 {
            return lat_distance(self.lat, lat2);
        }
        let lat2r = deg_rad(lat2);
        let u = ((lat2r - self.lat_r) / 2.0).sin();
        let a = u * u + self.cos_lat * lat2r.cos() * v * v;
        2.0 * EARTH_RADIUS_M * a.sqrt().asin()
    }
}

/// What a search covers around its centre.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Extent {
    /// BYRADIUS, in the unit's own measure.
    Radius(f64),
    /// BYBOX width and height, in the unit's own measure.
    Box { width: f64, height: f64 },
}

/// A search area: centre, extent, and the unit's size in metres.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub(crate) lon: f64,
    pub(crate) lat: f64,
    pub(crate) extent: Extent,
    /// Metres per unit of the extent (and of the distances replied).
    pub(crate) conversion: f64,
}

impl Shape {
    /// The distance from the centre to `score`'s position, and the
    /// position, when it is inside the area (Redis's `geoWithinShape`).
    /// `centre` is `Origin::new(self.lon, self.lat)`, made once per search.
    pub(crate) fn contains(&self, centre: &Origin, score: f64) -> Option<([f64; 2], f64)> {
        let [lon, lat] = decode_score(score);
        match self.extent {
            Extent::Radius(r) => {
                let d = centre.distance(lon, lat);
                // (A NaN distance is inside, as Redis's `>` test leaves it.)
                if d > r * self.conversion {
                    None
                } else {
                    Some(([lon, lat], d))
                }
            }
            Extent::Box { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                if lat_distance(lat, self.lat) > height_m / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > width_m / 2.0 {
                    return None;
                }
                Some(([lon, lat], centre.distance(lon, lat)))
            }
        }
    }

    /// The bounding box: min longitude, min latitude, max longitude, max
    /// latitude (Redis's `geohashBoundingBox`).
    fn bounds(&self) -> [f64; 4] {
        let (half_h, half_w) = match self.extent {
            Extent::Radius(r) => (r, r),
            Extent::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let height = self.conversion * half_h;
        let width = self.conversion * half_w;
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let lon_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let lon_delta_bottom = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        // The box is widest on the side nearer the equator.
        let lon_delta = if self.lat < 0.0 {
            lon_delta_bottom
        } else {
            lon_delta_top
        };
        [
            self.lon - lon_delta,
            self.lat - lat_delta,
            self.lon + lon_delta,
            self.lat + lat_delta,
        ]
    }

    /// The centre's cell and its eight neighbours, in the order Redis
    /// searches them (centre, N, S, E, W, NE, NW, SE, SW), the ones the
    /// area cannot reach zeroed (Redis's `geohashCalculateAreasByShapeWGS84`).
    pub(crate) fn cells(&self) -> [Hash; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let radius_m = match self.extent {
            Extent::Radius(r) => r,
            Extent::Box { width, height } => ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt(),
        } * self.conversion;
        let mut step = estimate_step(radius_m, self.lat);
        let centre = |step| {
            let hash = encode(WGS84_LON, WGS84_LAT, self.lon, self.lat, step).unwrap_or_default();
            let area = decode(WGS84_LON, WGS84_LAT, hash);
            (hash, neighbours(hash), area)
        };
        let (mut hash, mut near, mut area) = centre(step);
        // A cell next to the centre's may still not reach the box's edge:
        // then one step coarser.
        // (Compared as Redis compares them: a bound that is NaN, from an
        // infinite extent, decides nothing.)
        let cell = |n: Hash| decode(WGS84_LON, WGS84_LAT, n);
        let short = cell(near.north).is_some_and(|a| a.lat.max < max_lat)
            || cell(near.south).is_some_and(|a| a.lat.min > min_lat)
            || cell(near.east).is_some_and(|a| a.lon.max < max_lon)
            || cell(near.west).is_some_and(|a| a.lon.min > min_lon);
        if step > 1 && short {
            step -= 1;
            (hash, near, area) = centre(step);
        }
        if step >= 2 {
            if let Some(area) = area {
                let zero = Hash::default();
                if area.lat.min < min_lat {
                    (near.south, near.south_west, near.south_east) = (zero, zero, zero);
                }
                if area.lat.max > max_lat {
                    (near.north, near.north_east, near.north_west) = (zero, zero, zero);
                }
                if area.lon.min < min_lon {
                    (near.west, near.south_west, near.north_west) = (zero, zero, zero);
                }
                if area.lon.max > max_lon {
                    (near.east, near.south_east, near.north_east) = (zero, zero, zero);
                }
            }
        }
        [
            hash,
            near.north,
            near.south,
            near.east,
            near.west,
            near.north_east,
            near.north_west,
            near.south_east,
            near.south_west,
        ]
    }
}

/// The score range `[min, max)` of the positions inside cell `hash`
/// (Redis's `scoresOfGeoHashBox`); `None` for a zeroed neighbour.
pub(crate) fn score_range(hash: Hash) -> Option<(f64, f64)> {
    if hash.is_zero() {
        return None;
    }
    let next = Hash {
        bits: hash.bits.wrapping_add(1),
        step: hash.step,
    };
    Some((hash.align52() as f64, next.align52() as f64))
}

/// The cell size, in bits per coordinate, whose cells cover a radius of
/// `range_m` metres at latitude `lat` (Redis's `geohashEstimateStepsByRadius`).
fn estimate_step(range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return STEP_MAX;
    }
    let mut range_m = range_m;
    let mut step: i32 = 1;
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    // Two steps coarser, so the range is inside the nine cells in most cases.
    step -= 2;
    if !(-POLAR_LAT..=POLAR_LAT).contains(&lat) {
        step -= 1;
        if !(-FAR_POLAR_LAT..=FAR_POLAR_LAT).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

/// A cell's eight neighbours.
#[derive(Clone, Copy, Debug)]
struct Neighbours {
    north: Hash,
    south: Hash,
    east: Hash,
    west: Hash,
    north_east: Hash,
    north_west: Hash,
    south_east: Hash,
    south_west: Hash,
}

/// The cell `dx` cells east (negative: west) of `hash`, wrapping around
/// the antimeridian (Redis's `geohash_move_x`).
fn move_x(hash: Hash, dx: i8) -> Hash {
    move_bits(hash, dx, 0xaaaa_aaaa_aaaa_aaaa)
}

/// The cell `dy` cells north (negative: south) of `hash` (Redis's
/// `geohash_move_y`).
fn move_y(hash: Hash, dy: i8) -> Hash {
    move_bits(hash, dy, 0x5555_5555_5555_5555)
}

/// Adds or subtracts one to the coordinate in the bits of `mask`: the
/// other coordinate's bits are filled with ones so the carry (or borrow)
/// runs through them.
fn move_bits(hash: Hash, d: i8, mask: u64) -> Hash {
    if d == 0 {
        return hash;
    }
    let shift = 64 - u32::from(hash.step) * 2;
    let moved = hash.bits & mask;
    let kept = hash.bits & !mask;
    let fill = !mask >> shift;
    let moved = if d > 0 {
        moved.wrapping_add(fill.wrapping_add(1))
    } else {
        (moved | fill).wrapping_sub(fill.wrapping_add(1))
    };
    Hash {
        bits: (moved & (mask >> shift)) | kept,
        step: hash.step,
    }
}

fn neighbours(hash: Hash) -> Neighbours {
    let at = |dx, dy| move_y(move_x(hash, dx), dy);
    Neighbours {
        east: at(1, 0),
        west: at(-1, 0),
        south: at(0, -1),
        north: at(0, 1),
        north_west: at(-1, 1),
        north_east: at(1, 1),
        south_east: at(1, -1),
        south_west: at(-1, -1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_and_positions_are_redis_s() {
        // GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
        assert_eq!(encode_score(13.361389, 38.115556), 3479099956230698);
        assert_eq!(encode_score(15.087269, 37.502669), 3479447370796909);
        let [lon, lat] = decode_score(3479099956230698.0);
        assert_eq!(format!("{lon:.17}"), "13.36138933897018433");
        assert_eq!(format!("{lat:.17}"), "38.11555639549629859");
        assert_eq!(&standard_string(3479099956230698.0), b"sqc8b49rny0");
        let d = distance(
            13.361389338970184,
            38.1155563954963,
            15.087267458438873,
            37.50266842333162,
        );
        assert_eq!(format!("{:.4}", d / 1000.0), "166.2742");
    }

    #[test]
    fn any_score_decodes_as_x86_64_converts_it() {
        assert_eq!(score_bits(-1.0), u64::MAX);
        assert_eq!(score_bits(-2.5), u64::MAX - 1);
        assert_eq!(score_bits(f64::INFINITY), 0);
        assert_eq!(score_bits(f64::NEG_INFINITY), 1 << 63);
        assert_eq!(score_bits(1e30), 0);
        assert_eq!(score_bits(1.5), 1);
        assert_eq!(decode_score(-1.0), [LON_MAX, LAT_MAX]);
    }

    #[test]
    fn neighbours_wrap_around_the_antimeridian() {
        let h = encode(WGS84_LON, WGS84_LAT, 179.9999, 0.0, 4).unwrap();
        let east = decode(WGS84_LON, WGS84_LAT, move_x(h, 1)).unwrap();
        assert_eq!(east.lon.min, LON_MIN);
        let west = move_x(move_x(h, 1), -1);
        assert_eq!(west, h);
    }

    #[test]
    fn steps_follow_the_radius_and_the_latitude() {
        assert_eq!(estimate_step(0.0, 0.0), 26);
        assert_eq!(estimate_step(f64::INFINITY, 0.0), 1);
        assert!(estimate_step(1000.0, 0.0) > estimate_step(1000.0, 70.0));
        assert!(estimate_step(1000.0, 70.0) > estimate_step(1000.0, 85.0));
    }
}
