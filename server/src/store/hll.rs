//! HyperLogLog strings, byte for byte as Redis 7.0.15 writes them, so an HLL
//! made here is one Redis reads and the other way round.
//!
//! An HLL is a plain string: a 16-byte header (`HYLL`, the encoding byte,
//! three reserved bytes, the cached cardinality as 8 little-endian bytes
//! whose top bit says the cache is stale) and then either
//! - **dense**: 16384 registers of 6 bits, least significant bits first
//!   (12288 bytes, 12304 in all), or
//! - **sparse**: run-length opcodes over the registers: ZERO (`00xxxxxx`,
//!   1..64 zero registers), XZERO (`01xxxxxx yyyyyyyy`, 1..16384 zero
//!   registers) and VAL (`1vvvvvxx`, 1..4 registers of value 1..32).
//!
//! Elements are hashed with MurmurHash64A and Redis's seed; the low 14 bits
//! choose the register, the run of zeros above them (plus one) is its
//! candidate value. A sparse HLL turns dense when a value does not fit a
//! VAL opcode or when growing would take it past `hll-sparse-max-bytes`.
//! The estimate is Ertl's improved estimator with Redis's tau and sigma
//! series, computed in the same order so the rounding is the same.
//!
//! This module only transforms bytes: the commands (and their errors,
//! counters and effects) are in `cmd/hll.rs`.

/// Bits of the hash that choose a register.
const P: u32 = 14;
/// Bits of the hash left for the run of zeros.
const Q: u32 = 64 - P;
/// Registers in every HLL.
pub(crate) const REGISTERS: usize = 1 << P;
/// Bits per dense register.
const BITS: usize = 6;
/// Largest value a register holds.
const REGISTER_MAX: u8 = (1 << BITS) - 1;
/// Header bytes before the registers or opcodes.
pub(crate) const HEADER: usize = 16;
/// Length of a dense HLL string.
pub(crate) const DENSE_SIZE: usize = HEADER + (REGISTERS * BITS).div_ceil(8);
/// The header's magic.
const MAGIC: &[u8; 4] = b"HYLL";
/// Offset of the encoding byte in the header.
const ENCODING_AT: usize = 4;
/// Offset of the cached cardinality (8 bytes, little endian).
const CARD_AT: usize = 8;
/// The top bit of the cardinality's last byte: set while the cache is stale.
const STALE_BIT: u8 = 0x80;
/// The seed Redis hashes elements with.
const SEED: u64 = 0xadc8_3b19;

/// Encoding byte of a dense HLL.
const DENSE: u8 = 0;
/// Encoding byte of a sparse HLL.
const SPARSE: u8 = 1;

/// Sparse opcodes: the tag bits and what one opcode can cover.
const XZERO_BIT: u8 = 0x40;
const VAL_BIT: u8 = 0x80;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;

/// `0.5 / ln 2`: the estimator's constant for an infinite register count.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// The representation is not a valid HLL (a sparse run that does not cover
/// exactly every register): Redis's `INVALIDOBJ`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Corrupt;

/// The two encodings PFDEBUG ENCODING names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    Dense,
    Sparse,
}

/// MurmurHash2, 64-bit version (Austin Appleby's `MurmurHash64A`), reading
/// words little endian as Redis's endian-neutral variant does.
pub(crate) fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for word in &mut words {
        let mut k = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register `ele` falls in and the length of its `0...01` pattern (1..=Q+1).
fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The bit above the Q used ones ends every run, so the count is at most Q+1.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Dense register `i` of `regs` (the bytes after the header).
#[inline]
fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * BITS / 8;
    let shift = (i * BITS) & 7;
    let b0 = regs[byte] as u16;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u16;
    (((b0 >> shift) | (b1 << (8 - shift))) & REGISTER_MAX as u16) as u8
}

/// Calls `f(i, value)` for every dense register of `regs` in order, four
/// registers from each three bytes (16384 six-bit registers tile 4096
/// groups exactly), not one shifted pair of bytes per register.
#[inline]
fn dense_each(regs: &[u8], mut f: impl FnMut(usize, u8)) {
    let mask = REGISTER_MAX;
    for (group, b) in regs[..REGISTERS * BITS / 8].chunks_exact(3).enumerate() {
        let (b0, b1, b2) = (b[0], b[1], b[2]);
        let i = group * 4;
        f(i, b0 & mask);
        f(i + 1, (b0 >> 6) | ((b1 << 2) & mask));
        f(i + 2, (b1 >> 4) | ((b2 << 4) & mask));
        f(i + 3, b2 >> 2);
    }
}

/// Sets dense register `i` of `regs` to `v`.
#[inline]
fn dense_set(regs: &mut [u8], i: usize, v: u8) {
    let byte = i * BITS / 8;
    let shift = (i * BITS) & 7;
    let v = v as u16;
    let mask = REGISTER_MAX as u16;
    regs[byte] = ((regs[byte] as u16 & !(mask << shift)) | (v << shift)) as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        let high = 8 - shift;
        *next = ((*next as u16 & !(mask >> high)) | (v >> high)) as u8;
    }
}

/// Raises dense register `i` to `v`; whether it changed.
#[inline]
fn dense_raise(regs: &mut [u8], i: usize, v: u8) -> bool {
    if v > dense_get(regs, i) {
        dense_set(regs, i, v);
        true
    } else {
        false
    }
}

/// One sparse opcode, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `len` zero registers, in one byte.
    Zero(usize),
    /// `len` zero registers, in two bytes.
    XZero(usize),
    /// `len` registers of value `value`.
    Val(u8, usize),
}

impl Op {
    /// The opcode at `at`; an XZERO cut short by the end reads its second
    /// byte as zero (Redis reads the string's terminating NUL there).
    #[inline]
    fn at(s: &[u8], at: usize) -> Op {
        let b = s[at];
        if b & VAL_BIT != 0 {
            Op::Val(((b >> 2) & 0x1f) + 1, (b & 0x3) as usize + 1)
        } else if b & XZERO_BIT != 0 {
            let low = s.get(at + 1).copied().unwrap_or(0) as usize;
            Op::XZero((((b & 0x3f) as usize) << 8 | low) + 1)
        } else {
            Op::Zero((b & 0x3f) as usize + 1)
        }
    }

    /// Registers covered.
    fn span(self) -> usize {
        match self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }

    /// Bytes taken.
    fn size(self) -> usize {
        match self {
            Op::XZero(_) => 2,
            Op::Zero(_) | Op::Val(..) => 1,
        }
    }
}

fn val_byte(value: u8, len: usize) -> u8 {
    ((value - 1) << 2 | (len as u8 - 1)) | VAL_BIT
}

/// Appends the opcode(s) Redis writes for a run of `len` zeros (1..=16384).
fn push_zeros(mut push: impl FnMut(u8), len: usize) {
    if len > ZERO_MAX_LEN {
        let l = len - 1;
        push((l >> 8) as u8 | XZERO_BIT);
        push((l & 0xff) as u8);
    } else {
        push((len - 1) as u8);
    }
}

/// The opcodes replacing a split one: five bytes at most (two XZEROs
/// around a VAL), kept on the stack.
#[derive(Default)]
struct Split {
    bytes: [u8; 5],
    len: usize,
}

impl Split {
    fn push(&mut self, b: u8) {
        self.bytes[self.len] = b;
        self.len += 1;
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// A new, empty HLL: sparse, all registers zero, cached cardinality 0.
pub(crate) fn new_sparse() -> Vec<u8> {
    let mut s = Vec::with_capacity(HEADER + 2);
    s.extend_from_slice(MAGIC);
    s.push(SPARSE);
    s.resize(HEADER, 0);
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(XZERO_MAX_LEN);
        push_zeros(|b| s.push(b), run);
        left -= run;
    }
    s
}

/// Whether a string is an HLL as Redis's `isHLLObjectOrReply` sees it: the
/// magic, a known encoding, and a dense HLL's exact length.
pub(crate) fn is_hll(s: &[u8]) -> bool {
    s.len() >= HEADER
        && &s[..4] == MAGIC
        && s[ENCODING_AT] <= SPARSE
        && (s[ENCODING_AT] != DENSE || s.len() == DENSE_SIZE)
}

/// The encoding of a string [`is_hll`] accepted.
pub(crate) fn encoding(s: &[u8]) -> Encoding {
    if s[ENCODING_AT] == DENSE {
        Encoding::Dense
    } else {
        Encoding::Sparse
    }
}

/// The cached cardinality, unless stale.
pub(crate) fn cached(s: &[u8]) -> Option<u64> {
    let card = u64::from_le_bytes(s[CARD_AT..CARD_AT + 8].try_into().expect("8 bytes"));
    (s[CARD_AT + 7] & STALE_BIT == 0).then_some(card)
}

/// Caches `card` in the header (which also marks it fresh).
pub(crate) fn set_cached(s: &mut [u8], card: u64) {
    s[CARD_AT..CARD_AT + 8].copy_from_slice(&card.to_le_bytes());
}

/// Marks the cached cardinality stale.
pub(crate) fn invalidate(s: &mut [u8]) {
    s[CARD_AT + 7] |= STALE_BIT;
}

/// Adds `ele`; whether a register changed. `sparse_max` is
/// `hll-sparse-max-bytes`. On [`Corrupt`], what earlier adds changed stays.
pub(crate) fn add(s: &mut Vec<u8>, ele: &[u8], sparse_max: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(ele);
    match encoding(s) {
        Encoding::Dense => Ok(dense_raise(&mut s[HEADER..], index, count)),
        Encoding::Sparse => sparse_set(s, index, count, sparse_max),
    }
}

/// Rewrites a sparse HLL as dense (the header copied, the encoding byte
/// changed; the cache kept). `Ok(true)` when it converted, `Ok(false)`
/// when it was dense already.
pub(crate) fn to_dense(s: &mut Vec<u8>) -> Result<bool, Corrupt> {
    if encoding(s) == Encoding::Dense {
        return Ok(false);
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HEADER].copy_from_slice(&s[..HEADER]);
    dense[ENCODING_AT] = DENSE;
    let regs = &mut dense[HEADER..];
    walk_sparse(&s[HEADER..], |i, v| dense_set(regs, i, v))?;
    *s = dense;
    Ok(true)
}

/// Calls `set(register, value)` for every register a VAL opcode of the
/// sparse body `ops` covers. The runs must cover exactly every register:
/// a run past the last one is corrupt however the runs before it add up
/// (as the installed Redis 7.0.15, with its fix for CVE-2025-32023, has it).
fn walk_sparse(ops: &[u8], mut set: impl FnMut(usize, u8)) -> Result<(), Corrupt> {
    let mut idx = 0;
    let mut at = 0;
    while at < ops.len() {
        let op = Op::at(ops, at);
        if idx + op.span() > REGISTERS {
            return Err(Corrupt);
        }
        match op {
            Op::Zero(n) | Op::XZero(n) => idx += n,
            Op::Val(v, n) => {
                for i in idx..idx + n {
                    set(i, v);
                }
                idx += n;
            }
        }
        at += op.size();
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// Where the sparse opcode covering a register is.
struct Found {
    /// Its offset in the string.
    at: usize,
    /// The first register it covers.
    first: usize,
    /// How many registers it covers.
    span: usize,
    /// The offset of the opcode before it, if any (where merging starts).
    prev: Option<usize>,
}

/// Every byte's high bit, for the eight-opcode steps of [`find`].
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
/// One in every byte.
const ONES: u64 = 0x0101_0101_0101_0101;

/// The registers eight one-byte opcodes (`w`, read little endian) cover,
/// or `None` when one of the bytes starts an XZERO (its second byte would
/// be read as an opcode). A ZERO covers its low six bits plus one, a VAL
/// its low two plus one: the bytes are masked to those bits and summed in
/// 16-bit lanes (each at most 126, their total at most 504).
#[inline]
fn span_of_eight(w: u64) -> Option<usize> {
    // XZERO: the high bit clear and the next one set.
    if !w & (w << 1) & HIGH_BITS != 0 {
        return None;
    }
    let val = (w >> 7) & ONES;
    let low = w & ((0x3f * ONES) ^ (val * 0x3c));
    let lanes = (low & 0x00ff_00ff_00ff_00ff) + ((low >> 8) & 0x00ff_00ff_00ff_00ff);
    Some((lanes.wrapping_mul(0x0001_0001_0001_0001) >> 48) as usize + 8)
}

/// The opcode of the sparse HLL `s` covering register `index`; `None`
/// when the opcodes end before it. Runs of eight one-byte opcodes that end
/// before `index` are passed in one step (a sparse HLL with a few hundred
/// registers set is mostly ZEROs and VALs: gaps of more than 64 registers,
/// the XZEROs, are few); elsewhere only each opcode's span and size are
/// read, not the whole opcode decoded.
#[inline]
fn find(s: &[u8], index: usize) -> Option<Found> {
    let end = s.len();
    let mut at = HEADER;
    let mut first = 0;
    let mut prev = None;
    // Whether the eight bytes from `at` are worth reading as one word:
    // false from the word that holds the register on.
    let mut words = true;
    while at < end {
        if words {
            if let Some(word) = s.get(at..at + 8) {
                let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
                match span_of_eight(w) {
                    Some(n) if index >= first + n => {
                        first += n;
                        prev = Some(at + 7);
                        at += 8;
                        continue;
                    }
                    Some(_) => words = false,
                    None => {}
                }
            }
        }
        let b = s[at];
        let (n, size) = if b & VAL_BIT != 0 {
            ((b & 0x3) as usize + 1, 1)
        } else if b & XZERO_BIT == 0 {
            ((b & 0x3f) as usize + 1, 1)
        } else {
            let low = s.get(at + 1).copied().unwrap_or(0) as usize;
            ((((b & 0x3f) as usize) << 8 | low) + 1, 2)
        };
        if index < first + n {
            return Some(Found {
                at,
                first,
                span: n,
                prev,
            });
        }
        prev = Some(at);
        at += size;
        first += n;
    }
    None
}

/// Raises register `index` of a sparse HLL to `count`, splitting the
/// opcode that covers it and merging equal neighbours as Redis's
/// `hllSparseSet` does, or turning it dense. Whether it changed.
fn sparse_set(s: &mut Vec<u8>, index: usize, count: u8, sparse_max: usize) -> Result<bool, Corrupt> {
    if count > VAL_MAX_VALUE {
        return promote(s, index, count);
    }
    let Some(Found { at, first, span, prev }) = find(s, index) else {
        return Err(Corrupt);
    };
    let op = Op::at(s, at);
    let has_next = at + op.size() < s.len();
    let simple = match op {
        Op::Val(old, _) if old >= count => return Ok(false),
        Op::Val(_, 1) | Op::Zero(1) => true,
        _ => false,
    };
    if simple {
        s[at] = val_byte(count, 1);
    } else {
        // Split the opcode around `index`.
        let last = first + span - 1;
        let mut seq = Split::default();
        match op {
            Op::Zero(_) | Op::XZero(_) => {
                if index != first {
                    push_zeros(|b| seq.push(b), index - first);
                }
                seq.push(val_byte(count, 1));
                if index != last {
                    push_zeros(|b| seq.push(b), last - index);
                }
            }
            Op::Val(value, _) => {
                if index != first {
                    seq.push(val_byte(value, index - first));
                }
                seq.push(val_byte(count, 1));
                if index != last {
                    seq.push(val_byte(value, last - index));
                }
            }
        }
        let seq = seq.as_slice();
        let old_len = op.size();
        let grows = seq.len() > old_len;
        if grows && s.len() + seq.len() - old_len > sparse_max {
            return promote(s, index, count);
        }
        let new_len = s.len() + seq.len() - old_len;
        if has_next {
            s.splice(at..at + old_len, seq.iter().copied());
        } else {
            // The last opcode: the sequence replaces it, and the string
            // takes the length Redis gives it (shorter than the sequence
            // only when a two-byte opcode was cut short by the end).
            s.truncate(at);
            s.extend_from_slice(seq);
            s.truncate(new_len);
        }
    }
    // Merge adjacent VALs of one value, scanning up to 5 opcodes from the
    // one before the change.
    let mut p = prev.unwrap_or(HEADER);
    let mut scans = 5;
    while p < s.len() && scans > 0 {
        scans -= 1;
        match Op::at(s, p) {
            Op::XZero(_) => p += 2,
            Op::Zero(_) => p += 1,
            Op::Val(v1, l1) => {
                if p + 1 < s.len() {
                    if let Op::Val(v2, l2) = Op::at(s, p + 1) {
                        if v1 == v2 && l1 + l2 <= VAL_MAX_LEN {
                            s[p + 1] = val_byte(v1, l1 + l2);
                            s.remove(p);
                            continue;
                        }
                    }
                }
                p += 1;
            }
        }
    }
    invalidate(s);
    Ok(true)
}

/// Turns a sparse HLL dense and raises register `index` to `count` there.
fn promote(s: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    to_dense(s)?;
    dense_raise(&mut s[HEADER..], index, count);
    Ok(true)
}

/// Raises `max[i]` to every register of `s` (a string [`is_hll`] accepted).
pub(crate) fn merge_into(max: &mut [u8], s: &[u8]) -> Result<(), Corrupt> {
    match encoding(s) {
        Encoding::Dense => {
            let max = &mut max[..REGISTERS];
            dense_each(&s[HEADER..], |i, v| max[i] = max[i].max(v));
            Ok(())
        }
        Encoding::Sparse => walk_sparse(&s[HEADER..], |i, v| {
            if v > max[i] {
                max[i] = v;
            }
        }),
    }
}

/// Sets every register `max` holds a non-zero value for in `s` (PFMERGE's
/// target), the sparse ones possibly turning it dense on the way.
pub(crate) fn raise_all(s: &mut Vec<u8>, max: &[u8], sparse_max: usize) {
    for (i, &v) in max.iter().enumerate() {
        if v == 0 {
            continue;
        }
        match encoding(s) {
            Encoding::Dense => {
                dense_raise(&mut s[HEADER..], i, v);
            }
            Encoding::Sparse => {
                // Redis ignores a failure here: the sources were checked.
                let _ = sparse_set(s, i, v, sparse_max);
            }
        }
    }
}

/// The estimate from a register histogram (`histo[v]`: registers holding
/// `v`), as Redis's `hllCount` computes it.
fn estimate(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - histo[q + 1] as f64) / m);
    for j in (1..=q).rev() {
        z += histo[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histo[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// Ertl's sigma series.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if before == z {
            return z;
        }
    }
}

/// Ertl's tau series.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if before == z {
            return z / 3.0;
        }
    }
}

/// The estimated cardinality of a string [`is_hll`] accepted; a sparse
/// one whose runs do not cover every register is [`Corrupt`].
pub(crate) fn count(s: &[u8]) -> Result<u64, Corrupt> {
    let mut histo = [0u32; 64];
    match encoding(s) {
        Encoding::Dense => dense_each(&s[HEADER..], |_, v| histo[v as usize] += 1),
        Encoding::Sparse => {
            let ops = &s[HEADER..];
            let (mut at, mut idx) = (0, 0);
            while at < ops.len() {
                let op = Op::at(ops, at);
                let (value, n) = match op {
                    Op::Zero(n) | Op::XZero(n) => (0, n),
                    Op::Val(v, n) => (v, n),
                };
                histo[value as usize] += n as u32;
                idx += n;
                at += op.size();
            }
            if idx != REGISTERS {
                return Err(Corrupt);
            }
        }
    }
    Ok(estimate(&histo))
}

/// The estimate of plain byte registers (PFCOUNT of several keys).
pub(crate) fn count_registers(max: &[u8]) -> u64 {
    let mut histo = [0u32; 64];
    for &v in max {
        histo[v as usize] += 1;
    }
    estimate(&histo)
}

/// Every register's value (PFDEBUG GETREG) of a dense HLL.
pub(crate) fn registers(s: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let regs = &s[HEADER..];
    (0..REGISTERS).map(move |i| dense_get(regs, i))
}

/// PFDEBUG DECODE's text for a sparse HLL: `z:len`, `Z:len`, `v:value,len`.
pub(crate) fn decode(s: &[u8]) -> String {
    let ops = &s[HEADER..];
    let mut out = Vec::new();
    let mut at = 0;
    while at < ops.len() {
        let op = Op::at(ops, at);
        out.push(match op {
            Op::Zero(n) => format!("z:{n}"),
            Op::XZero(n) => format!("Z:{n}"),
            Op::Val(v, n) => format!("v:{v},{n}"),
        });
        at += op.size();
    }
    out.join(" ")
}

/// What PFSELFTEST found wrong (its reply texts are in `errors`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SelftestFailure {
    /// A dense register did not read back what was written.
    Register { index: usize, expected: u8, got: u8 },
    /// A small HLL was not sparse.
    NotSparse,
    /// The dense and the sparse HLL of the same elements disagree.
    Disagree,
    /// An estimate was further off than six standard errors.
    TooBigError { card: u64, abs_err: u64 },
}

/// Redis's PFSELFTEST, its sizes given: `cycles` rounds of random values
/// written to and read back from every dense register, then `elements`
/// distinct elements added to a dense and a sparse HLL at once, checking at
/// each power of ten that the sparse one stayed sparse while small, that
/// both agree and that the error is within six standard errors.
pub(crate) fn selftest(
    cycles: u32,
    elements: u64,
    sparse_max: usize,
    rng: &mut fastrand::Rng,
) -> Result<(), SelftestFailure> {
    let mut dense = vec![0u8; DENSE_SIZE];
    let mut bytes = vec![0u8; REGISTERS];
    for _ in 0..cycles {
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = rng.u8(..) & REGISTER_MAX;
            dense_set(&mut dense[HEADER..], i, *b);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let got = dense_get(&dense[HEADER..], i);
            if got != b {
                return Err(SelftestFailure::Register {
                    index: i,
                    expected: b,
                    got,
                });
            }
        }
    }
    dense[HEADER..].fill(0);
    dense[ENCODING_AT] = DENSE;
    let mut sparse = new_sparse();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let seed = rng.u64(..);
    let mut checkpoint = 1u64;
    for j in 1..=elements {
        let ele = (j ^ seed).to_le_bytes();
        let (index, run) = pattern(&ele);
        dense_raise(&mut dense[HEADER..], index, run);
        add(&mut sparse, &ele, sparse_max).map_err(|_| SelftestFailure::Disagree)?;
        if j != checkpoint {
            continue;
        }
        if j < (sparse_max / 2) as u64 && encoding(&sparse) != Encoding::Sparse {
            return Err(SelftestFailure::NotSparse);
        }
        let estimate = count(&dense).expect("dense is never corrupt");
        if count(&sparse) != Ok(estimate) {
            return Err(SelftestFailure::Disagree);
        }
        let mut max_err = (relerr * 6.0 * checkpoint as f64).ceil() as u64;
        // At 10 a collision is likely enough to give a larger error.
        if j == 10 {
            max_err = 1;
        }
        let abs_err = checkpoint.abs_diff(estimate);
        if abs_err > max_err {
            return Err(SelftestFailure::TooBigError {
                card: checkpoint,
                abs_err,
            });
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPARSE_MAX: usize = 3000;

    #[test]
    fn a_new_hll_is_sparse_and_empty() {
        let s = new_sparse();
        assert_eq!(s, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert!(is_hll(&s));
        assert_eq!(cached(&s), Some(0));
        assert_eq!(count(&s), Ok(0));
        assert_eq!(decode(&s), "Z:16384");
    }

    #[test]
    fn elements_land_where_redis_puts_them() {
        // Redis 7.0.15: PFADD t a; PFDEBUG DECODE t is "Z:12711 v:2,1 Z:3672".
        assert_eq!(pattern(b"a"), (12711, 2));
        assert_eq!(pattern(b"hello-world-12345"), (14578, 1));
        let mut s = new_sparse();
        assert_eq!(add(&mut s, b"a", SPARSE_MAX), Ok(true));
        assert_eq!(decode(&s), "Z:12711 v:2,1 Z:3672");
        assert_eq!(add(&mut s, b"a", SPARSE_MAX), Ok(false));
    }

    #[test]
    fn dense_each_reads_what_dense_get_reads() {
        let mut regs = vec![0u8; DENSE_SIZE - HEADER];
        let mut rng = fastrand::Rng::with_seed(5);
        for i in 0..REGISTERS {
            dense_set(&mut regs, i, rng.u8(..=REGISTER_MAX));
        }
        let mut seen = 0;
        dense_each(&regs, |i, v| {
            assert_eq!(v, dense_get(&regs, i), "register {i}");
            assert_eq!(i, seen);
            seen += 1;
        });
        assert_eq!(seen, REGISTERS);
    }

    /// `find`'s eight-opcode steps land where a walk of one opcode at a
    /// time lands, on HLLs of a few to a thousand registers set (XZEROs
    /// from many to few), for every register, and say `None` past the end.
    #[test]
    fn find_lands_where_a_walk_of_single_opcodes_lands() {
        let mut rng = fastrand::Rng::with_seed(11);
        for set in [0, 3, 40, 300, 1000] {
            let mut s = new_sparse();
            for _ in 0..set {
                let e = rng.u64(..).to_le_bytes();
                add(&mut s, &e, usize::MAX).unwrap();
            }
            assert_eq!(encoding(&s), Encoding::Sparse);
            // The walk: (offset, first register, span) of every opcode.
            let mut ops = vec![];
            let (mut at, mut first) = (HEADER, 0);
            while at < s.len() {
                let op = Op::at(&s, at);
                ops.push((at, first, op.span()));
                first += op.span();
                at += op.size();
            }
            for index in 0..REGISTERS {
                let k = ops.iter().position(|&(_, f, n)| index < f + n).unwrap();
                let found = find(&s, index).unwrap();
                assert_eq!((found.at, found.first, found.span), ops[k], "register {index} of {set}");
                assert_eq!(
                    found.prev,
                    k.checked_sub(1).map(|p| ops[p].0),
                    "register {index} of {set}"
                );
            }
            assert!(find(&s, REGISTERS).is_none());
        }
    }

    #[test]
    fn dense_registers_keep_their_neighbours() {
        let mut regs = vec![0u8; DENSE_SIZE - HEADER];
        for i in 0..REGISTERS {
            dense_set(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8, "register {i}");
        }
    }

    #[test]
    fn sparse_and_dense_agree_and_sparse_turns_dense_when_full() {
        let mut sparse = new_sparse();
        let mut dense = new_sparse();
        to_dense(&mut dense).unwrap();
        for i in 0..5000u32 {
            let e = format!("e{i}");
            add(&mut sparse, e.as_bytes(), SPARSE_MAX).unwrap();
            add(&mut dense, e.as_bytes(), SPARSE_MAX).unwrap();
            if i % 97 == 0 {
                assert_eq!(count(&sparse), count(&dense), "after {i}");
            }
        }
        assert_eq!(encoding(&sparse), Encoding::Dense);
        assert_eq!(sparse[HEADER..], dense[HEADER..]);
        let c = count(&dense).unwrap();
        assert!((4800..5200).contains(&c), "{c}");
    }

    #[test]
    fn short_runs_are_corrupt() {
        let mut s = new_sparse();
        s.truncate(HEADER);
        s.push(0x3f); // z:64 covers 64 registers only
        assert_eq!(count(&s), Err(Corrupt));
        let mut over = new_sparse();
        over.extend_from_slice(&[0x80]); // one register too many
        assert_eq!(to_dense(&mut over.clone()), Err(Corrupt));
        let mut max = vec![0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &over), Err(Corrupt));
        assert_eq!(to_dense(&mut s), Err(Corrupt));
        let mut max = vec![0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &s), Err(Corrupt));
        assert!(!is_hll(b"HYLL\x00 too short for dense"));
        assert!(!is_hll(b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0"));
    }

    #[test]
    fn selftest_passes_at_small_sizes() {
        let mut rng = fastrand::Rng::with_seed(7);
        selftest(2, 100_000, SPARSE_MAX, &mut rng).unwrap();
    }
}
