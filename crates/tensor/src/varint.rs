//! Base-128 varints (protobuf's, and Avro's after zig-zag), decoded fast:
//! a varint of up to 8 bytes in one word, without a branch per byte.
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
}
