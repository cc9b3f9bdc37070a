//! Avro's binary encoding, written by hand where a test needs bytes no
//! writer library produces (arrays split into blocks of its choosing,
//! negative block counts with their byte sizes).

/// Appends `v` as Avro's zig-zag varint `long`.
pub fn long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push(z as u8 | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Appends `items` (each already encoded) as the blocks of an Avro array
/// or map, then the ending zero count. `split(left)` says each block's
/// item count (1 to `left`) and whether it is written with a negative
/// count followed by its byte size.
pub fn blocks(items: &[Vec<u8>], out: &mut Vec<u8>, mut split: impl FnMut(usize) -> (usize, bool)) {
    let mut rest = items;
    while !rest.is_empty() {
        let (n, negative) = split(rest.len());
        let (block, tail) = rest.split_at(n.clamp(1, rest.len()));
        let n = block.len() as i64;
        if negative {
            long(out, -n);
            long(out, block.iter().map(Vec::len).sum::<usize>() as i64);
        } else {
            long(out, n);
        }
        block.iter().for_each(|b| out.extend_from_slice(b));
        rest = tail;
    }
    long(out, 0);
}
