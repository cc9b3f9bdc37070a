//! Base-128 varints (protobuf's, and Avro's after zig-zag), decoded fast:
//! a varint of up to 8 bytes in one word, without a branch per byte.
//!
//! [`decode`] is strict: a 10th byte above 1 (bits past 64) fails, as
//! Avro's readers do. Protobuf's parsers drop those bits instead:
//! protobuf readers use `grist_tensor::wire::read_varint`, built on these.
//!
//! ```
//! use grist_tensor::varint;
//! assert_eq!(varint::decode(&[0x96, 0x01]), Ok((150, 2)));
//! assert_eq!(varint::zigzag(3), -2);
//! ```

/// Decodes one varint from the start of `buf`: the value and its length
/// in bytes. Fails on an empty buffer, a varint cut short by its end, more
/// than 10 bytes, or a value past 64 bits.
#[inline(always)]
pub fn decode(buf: &[u8]) -> Result<(u64, usize), &'static str> {
    match buf.first() {
        Some(&b) if b < 0x80 => return Ok((b as u64, 1)),
        None => return Err("truncated varint"),
        _ => {}
    }
    if let Some(word) = buf.first_chunk::<8>() {
        if let Some(v) = decode_word(u64::from_le_bytes(*word)) {
            return Ok(v);
        }
    }
    decode_slow(buf)
}

/// Decodes the varint at the start of `buf` when `buf` holds at least 8
/// bytes and the varint ends within them: the value and its length.
/// `None` otherwise (fewer than 8 bytes left, or a longer varint), for
/// [`decode`] to decode or reject.
///
/// Varints of 1 to 3 bytes (values below 2^21, such as most indices and
/// counts) take one path, without a branch on their length.
///
/// ```
/// use grist_tensor::varint;
/// let buf = [0x96, 0x01, 0, 0, 0, 0, 0, 0];
/// assert_eq!(varint::decode_fast(&buf), Some((150, 2)));
/// assert_eq!(varint::decode_fast(&buf[..7]), None);
/// ```
#[inline(always)]
pub fn decode_fast(buf: &[u8]) -> Option<(u64, usize)> {
    let word = u64::from_le_bytes(*buf.first_chunk::<8>()?);
    // A byte without its high bit ends the varint. First the three low
    // bytes, with 32-bit masks (no 64-bit constants to hold).
    let low = word as u32;
    let ends = !low & 0x0080_8080;
    if ends != 0 {
        // The varint's bits: `ends - 1` keeps those below the lowest end,
        // and any higher ends, whose bits are clear in `low` anyway. Then
        // three 7-bit groups.
        let x = low & (ends - 1);
        let v = (x & 0x7f) | ((x >> 1) & 0x3f80) | ((x >> 2) & 0x1f_c000);
        return Some((v as u64, (ends.trailing_zeros() / 8 + 1) as usize));
    }
    let ends = !word & 0x8080_8080_8080_8080;
    if ends == 0 {
        return None;
    }
    // 4 to 8 bytes, cut out the same way.
    let x = word & (ends - 1);
    Some((squeeze(x), (ends.trailing_zeros() / 8 + 1) as usize))
}

/// Decodes a varint of at most 8 bytes held in the little-endian `word`;
/// `None` when it does not end within the word.
#[inline(always)]
pub fn decode_word(word: u64) -> Option<(u64, usize)> {
    // A byte without its high bit ends the varint.
    let ends = !word & 0x8080_8080_8080_8080;
    if ends == 0 {
        return None;
    }
    let len = (ends.trailing_zeros() as usize + 1) / 8;
    // Keep the varint's bytes (len is 1..=8).
    let keep = u64::MAX >> (64 - 8 * len);
    Some((squeeze(word & keep), len))
}

/// Joins the 7-bit groups of up to 8 varint bytes (little-endian in `x`,
/// continuation bits ignored) into the value they encode.
#[inline(always)]
pub fn squeeze(x: u64) -> u64 {
    let mut x = x & 0x7f7f_7f7f_7f7f_7f7f;
    // Pairs, quads, then halves.
    x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4)
}

/// Decodes, in order, up to `limit` varints that end within `word` (eight
/// little-endian bytes starting at a varint's first byte), handing each
/// value to `push`. `ends` marks their last bytes: the high bit of every
/// byte whose own high bit is clear (`!word & 0x8080_8080_8080_8080`).
/// Returns how many were decoded and the bit offset just past the last.
/// The varints are independent of each other, so the CPU decodes several
/// at once instead of one byte chain after another.
#[inline(always)]
pub fn decode_ends(
    word: u64,
    mut ends: u64,
    limit: usize,
    mut push: impl FnMut(u64),
) -> (usize, u32) {
    let mut from = 0u32;
    let mut n = 0;
    while ends != 0 && n < limit {
        let to = ends.trailing_zeros() + 1;
        let bits = (word >> from) & (u64::MAX >> (64 - (to - from)));
        push(if to - from <= 24 {
            // Up to 3 bytes (values below 2^21): three groups.
            (bits & 0x7f) | ((bits >> 1) & 0x3f80) | ((bits >> 2) & 0x1f_c000)
        } else {
            squeeze(bits)
        });
        from = to;
        ends &= ends - 1;
        n += 1;
    }
    (n, from)
}

/// The last `len` (1 to 7) bytes of a packed varint list, which start at
/// `at` in `record`, as one little-endian word whose bytes past the list
/// are continuation bytes (0x80), so that no varint ends past the list: a
/// varint cut short by the list's end stays undecoded for a careful path.
/// The word is read from `record` when 8 bytes are there (around the
/// list), else built from the list's bytes. Feed it to [`decode_ends`].
///
/// ```
/// use grist_tensor::varint;
/// // The list [5, 300] (0x05, 0xac 0x02), then an unrelated 0x01.
/// let record = [0x05, 0xac, 0x02, 0x01];
/// let word = varint::tail_word(&record, 0, 3);
/// let mut got = Vec::new();
/// let ends = !word & 0x8080_8080_8080_8080;
/// let (n, bits) = varint::decode_ends(word, ends, usize::MAX, |v| got.push(v));
/// assert_eq!((n, bits, got), (2, 24, vec![5, 300]));
/// ```
#[inline]
pub fn tail_word(record: &[u8], at: usize, len: usize) -> u64 {
    let keep = u64::MAX >> (64 - 8 * len.clamp(1, 7));
    let raw = match record.get(at..).and_then(|b| b.first_chunk::<8>()) {
        Some(w) => u64::from_le_bytes(*w),
        None => record
            .get(at..at.saturating_add(len))
            .unwrap_or_default()
            .iter()
            .rev()
            .fold(0u64, |w, &b| (w << 8) | b as u64),
    };
    (raw & keep) | (0x8080_8080_8080_8080 & !keep)
}

/// Decodes `count` consecutive varints from the start of `buf`, handing
/// each value to `push` in order; returns the bytes they took. Fails with
/// the reason and the byte offset of the first bad varint (values before
/// it have been pushed).
#[inline]
pub fn decode_count(
    buf: &[u8],
    count: usize,
    mut push: impl FnMut(u64),
) -> Result<usize, (&'static str, usize)> {
    let mut rest = buf;
    let mut left = count;
    // Bulk: while 8 bytes remain and each varint ends within them.
    while left > 0 {
        let Some((v, len)) = decode_fast(rest) else {
            break;
        };
        push(v);
        rest = rest.get(len..).unwrap_or_default();
        left -= 1;
    }
    let mut p = buf.len() - rest.len();
    while left > 0 {
        let (v, len) = decode(buf.get(p..).unwrap_or_default()).map_err(|e| (e, p))?;
        push(v);
        p += len;
        left -= 1;
    }
    Ok(p)
}

/// Zig-zag decoding (Avro's `int` and `long`).
#[inline(always)]
pub fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cold]
fn decode_slow(buf: &[u8]) -> Result<(u64, usize), &'static str> {
    let mut v: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(10) {
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b < 0x80 {
            if i == 9 && b > 1 {
                return Err("varint overflows 64 bits");
            }
            return Ok((v, i + 1));
        }
    }
    if buf.len() < 10 {
        Err("truncated varint")
    } else {
        Err("varint longer than 10 bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    #[test]
    fn every_length_round_trips() {
        let values = (0..64).flat_map(|b| [1u64 << b, (1u64 << b) - 1, (1u64 << b) + 1]);
        for v in values.chain([u64::MAX, 0]) {
            let mut buf = encode(v);
            assert_eq!(decode(&buf), Ok((v, buf.len())), "{v}");
            buf.extend([0xffu8; 12]);
            assert_eq!(decode(&buf).map(|(x, _)| x), Ok(v), "{v}");
        }
        assert!(decode(&[]).is_err());
        assert!(decode(&[0x80]).is_err());
        assert!(decode(&[0xff; 11]).is_err());
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert!(decode(&over).is_err());
        assert_eq!(zigzag(1), -1);
        assert_eq!(zigzag(u64::MAX), i64::MIN);
    }

    /// The smallest and largest value of each length from 1 to 10 bytes.
    fn extremes() -> Vec<(u64, usize)> {
        (1..=10)
            .flat_map(|len| {
                let lo = if len == 1 { 0 } else { 1u64 << (7 * (len - 1)) };
                let hi = if len == 10 {
                    u64::MAX
                } else {
                    (1u64 << (7 * len)) - 1
                };
                [(lo, len), (hi, len), (lo | 0x55, len)]
            })
            .collect()
    }

    #[test]
    fn decode_fast_every_length_and_position() {
        // Each varint at every offset from a word boundary, followed by 0
        // to 9 bytes that carry (0xff) or end (0x00) varints, so that the
        // bytes past its end must be dropped whatever they are.
        for (v, len) in extremes() {
            let bytes = encode(v);
            assert_eq!(bytes.len(), len, "{v}");
            for at in 0..16 {
                for after in 0..10 {
                    for fill in [0x00, 0xff] {
                        let mut buf = vec![0xaa; at];
                        buf.extend(&bytes);
                        buf.extend(std::iter::repeat_n(fill, after));
                        let rest = &buf[at..];
                        let fits = len <= 8 && rest.len() >= 8;
                        let want = fits.then_some((v, len));
                        assert_eq!(decode_fast(rest), want, "{v} at {at} + {after}");
                        assert_eq!(decode(rest), Ok((v, len)), "{v} at {at} + {after}");
                        // Cut inside the varint: truncated, whatever came
                        // before it.
                        for cut in 0..len {
                            assert_eq!(decode_fast(&rest[..cut]), None);
                            assert_eq!(decode(&rest[..cut]), Err("truncated varint"));
                        }
                    }
                }
            }
        }
        // Too long and too large, with bytes to spare after them.
        let mut long = vec![0x80; 10];
        long.extend([0x00; 8]);
        assert_eq!(decode_fast(&long), None);
        assert_eq!(decode(&long), Err("varint longer than 10 bytes"));
        let mut over = vec![0xff; 9];
        over.extend([0x02, 0x00, 0x00]);
        assert_eq!(decode_fast(&over), None);
        assert_eq!(decode(&over), Err("varint overflows 64 bits"));
        // Non-minimal encodings decode to their value.
        let padded = [0x81, 0x80, 0x80, 0x00, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(decode_fast(&padded), Some((1, 4)));
    }

    #[test]
    fn decode_count_every_count_and_cut() {
        // Runs of each length, and of lengths mixed, stopped after every
        // count (so that the last varint ends anywhere in a word) and cut
        // at every byte.
        let mut runs: Vec<Vec<u64>> = extremes().into_iter().map(|(v, _)| vec![v; 13]).collect();
        runs.push(extremes().into_iter().map(|(v, _)| v).collect());
        for values in runs {
            let bytes: Vec<u8> = values.iter().flat_map(|&v| encode(v)).collect();
            for count in 0..=values.len() {
                let mut got = Vec::new();
                let used = decode_count(&bytes, count, |v| got.push(v));
                let want: usize = values[..count].iter().map(|&v| encode(v).len()).sum();
                assert_eq!(used, Ok(want));
                assert_eq!(got, values[..count]);
            }
            for cut in 0..bytes.len() {
                let mut got = Vec::new();
                let err = decode_count(&bytes[..cut], values.len(), |v| got.push(v));
                let at: usize = got.iter().map(|&v| encode(v).len()).sum();
                assert_eq!(err, Err(("truncated varint", at)), "cut {cut}");
                assert!(at <= cut && cut < at + encode(values[got.len()]).len());
                assert_eq!(got, values[..got.len()]);
            }
        }
    }

    #[test]
    fn decode_count_matches_one_by_one() {
        // Every length from 1 to 10 bytes, in a run long enough to use
        // whole words, then cut at every length.
        let values: Vec<u64> = (0..200u64)
            .map(|i| match i % 11 {
                10 => u64::MAX,
                k => (1u64 << (7 * k)).wrapping_add(i),
            })
            .collect();
        let bytes: Vec<u8> = values.iter().flat_map(|&v| encode(v)).collect();
        for count in [0, 1, 7, 100, 200] {
            let mut got = Vec::new();
            let used = decode_count(&bytes, count, |v| got.push(v)).unwrap();
            assert_eq!(got, values[..count]);
            let want: usize = values[..count].iter().map(|&v| encode(v).len()).sum();
            assert_eq!(used, want);
        }
        for cut in 0..bytes.len() {
            let mut got = Vec::new();
            match decode_count(&bytes[..cut], values.len(), |v| got.push(v)) {
                Ok(_) => panic!("{cut} bytes cannot hold every varint"),
                Err((_, at)) => {
                    let want: usize = got.iter().map(|&v| encode(v).len()).sum();
                    assert_eq!(at, want, "cut {cut}");
                    assert_eq!(got, values[..got.len()]);
                }
            }
        }
        let mut long = vec![0xffu8; 11];
        long.push(0);
        assert_eq!(decode_count(&long, 1, |_| {}).map_err(|e| e.1), Err(0));
    }
}
