//! Reading Avro binary datums: zig-zag varints, lengths, array blocks, and
//! skipping any value of any schema node.

use grist_tensor::varint;

use crate::schema::{Node, Schema};

/// How deep values may nest (records in arrays in unions ...) before the
/// datum is refused: bounds the recursion on hostile data.
pub(crate) const MAX_DEPTH: usize = 256;

/// A datum error: what and where (byte offset in the block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DatumError {
    pub(crate) reason: &'static str,
    pub(crate) offset: usize,
}

pub(crate) type DatumResult<T> = Result<T, DatumError>;

/// A cursor over a block's decompressed bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    #[cold]
    pub(crate) fn err(&self, reason: &'static str) -> DatumError {
        DatumError {
            reason,
            offset: self.pos,
        }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// A zig-zag `long` (at most 10 bytes).
    #[inline(always)]
    pub(crate) fn long(&mut self) -> DatumResult<i64> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        match varint::decode(rest) {
            Ok((v, n)) => {
                self.pos += n;
                Ok(varint::zigzag(v))
            }
            Err(reason) => Err(self.err(reason)),
        }
    }

    /// [`long`](Self::long), decoded from one word where 8 bytes are
    /// left: varints of 2 to 4 bytes (indices, most ids) with 32-bit masks
    /// rather than the 8-byte squeeze. More code in line, so used
    /// where such longs are frequent (the general path's long leaves).
    #[inline(always)]
    pub(crate) fn long_word(&mut self) -> DatumResult<i64> {
        if let Some(w) = self.buf.get(self.pos..).and_then(|b| b.first_chunk::<8>()) {
            let word = u64::from_le_bytes(*w);
            let low = word as u32;
            if low & 0x80 == 0 {
                self.pos += 1;
                return Ok(varint::zigzag((low & 0x7f) as u64));
            }
            let ends = !low & 0x8080_8080;
            if ends != 0 {
                // `ends - 1` keeps the bits below the first end (and
                // later ends, whose bits are clear in `low`).
                let x = low & (ends - 1);
                let v = (x & 0x7f)
                    | ((x >> 1) & 0x3f80)
                    | ((x >> 2) & 0x1f_c000)
                    | ((x >> 3) & 0x0fe0_0000);
                self.pos += (ends.trailing_zeros() / 8 + 1) as usize;
                return Ok(varint::zigzag(v as u64));
            }
            if let Some((v, n)) = varint::decode_word(word) {
                self.pos += n;
                return Ok(varint::zigzag(v));
            }
        }
        self.long()
    }

    /// A union's branch index (read as [`long_word`](Self::long_word)
    /// reads it), looked up in `branches`: an index out of range is an
    /// error at the index's offset.
    #[inline(always)]
    pub(crate) fn branch<'b, T>(&mut self, branches: &'b [T]) -> DatumResult<&'b T> {
        let at = self.pos;
        let b = self.long_word()?;
        usize::try_from(b)
            .ok()
            .and_then(|b| branches.get(b))
            .ok_or(DatumError {
                reason: "union branch index out of range",
                offset: at,
            })
    }

    /// `count` zig-zag `long`s, each handed to `push`; several are decoded
    /// at once where they fit in a word.
    #[inline(always)]
    pub(crate) fn longs(&mut self, count: usize, mut push: impl FnMut(i64)) -> DatumResult<()> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        match varint::decode_count(rest, count, |v| push(varint::zigzag(v))) {
            Ok(n) => {
                self.pos += n;
                Ok(())
            }
            Err((reason, at)) => Err(DatumError {
                reason,
                offset: self.pos + at,
            }),
        }
    }

    /// `count` zig-zag `int`s, each handed to `push`; fails at the first
    /// value out of 32-bit range.
    #[inline(always)]
    pub(crate) fn ints(&mut self, count: usize, mut push: impl FnMut(i32)) -> DatumResult<()> {
        let start = self.pos;
        let mut bad = false;
        self.longs(count, |v| {
            bad |= i32::try_from(v).is_err();
            push(v as i32);
        })?;
        if bad {
            // Find the culprit again, one by one (cold).
            self.pos = start;
            for _ in 0..count {
                self.int()?;
            }
        }
        Ok(())
    }

    /// A zig-zag `int` (a long that must fit 32 bits).
    #[inline]
    pub(crate) fn int(&mut self) -> DatumResult<i32> {
        let at = self.pos;
        let v = self.long()?;
        i32::try_from(v).map_err(|_| DatumError {
            reason: "int out of 32-bit range",
            offset: at,
        })
    }

    #[inline]
    pub(crate) fn fixed<const N: usize>(&mut self) -> DatumResult<[u8; N]> {
        match self.buf.get(self.pos..).and_then(|b| b.first_chunk::<N>()) {
            Some(b) => {
                self.pos += N;
                Ok(*b)
            }
            None => Err(self.err("truncated fixed-width value")),
        }
    }

    #[inline]
    pub(crate) fn float(&mut self) -> DatumResult<f32> {
        Ok(f32::from_le_bytes(self.fixed::<4>()?))
    }

    #[inline]
    pub(crate) fn double(&mut self) -> DatumResult<f64> {
        Ok(f64::from_le_bytes(self.fixed::<8>()?))
    }

    #[inline]
    pub(crate) fn boolean(&mut self) -> DatumResult<bool> {
        match self.buf.get(self.pos) {
            Some(0) => {
                self.pos += 1;
                Ok(false)
            }
            Some(1) => {
                self.pos += 1;
                Ok(true)
            }
            Some(_) => Err(self.err("boolean byte is neither 0 nor 1")),
            None => Err(self.err("truncated boolean")),
        }
    }

    /// `n` raw bytes.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> DatumResult<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.err("length runs past the end of the block"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// `bytes` / `string`: a long length, then the bytes.
    #[inline]
    pub(crate) fn bytes(&mut self) -> DatumResult<&'a [u8]> {
        let at = self.pos;
        let len = self.long()?;
        if len < 0 {
            return Err(DatumError {
                reason: "negative length",
                offset: at,
            });
        }
        self.take(usize::try_from(len).unwrap_or(usize::MAX))
    }

    /// The item count of the next array or map block: 0 ends the array. A
    /// negative count is followed by the block's byte size, which is read
    /// and checked. The count is checked against the bytes left, given the
    /// smallest size of an item.
    #[inline(always)]
    pub(crate) fn block_count(&mut self, min_item: usize) -> DatumResult<usize> {
        // Fast: a one-byte count of 0 to 63 items (zig-zag, so even) whose
        // smallest size fits in the bytes after it (`remaining` counts the
        // count's own byte). Anything else takes the careful path.
        if let Some(&b) = self.buf.get(self.pos) {
            let count = (b >> 1) as usize;
            if b & 0x81 == 0 && count.saturating_mul(min_item) < self.remaining() {
                self.pos += 1;
                return Ok(count);
            }
        }
        self.block_count_slow(min_item)
    }

    /// [`block_count`](Self::block_count) for any count.
    #[inline(never)]
    fn block_count_slow(&mut self, min_item: usize) -> DatumResult<usize> {
        let at = self.pos;
        let count = self.long()?;
        let count = if count < 0 {
            let size = self.long()?;
            if size < 0 {
                return Err(self.err("negative array block size"));
            }
            count.unsigned_abs()
        } else {
            count as u64
        };
        let fits = match min_item {
            0 => count <= (1 << 32),
            n => count <= (self.remaining() / n) as u64,
        };
        if !fits {
            return Err(DatumError {
                reason: "array block claims more items than the block holds",
                offset: at,
            });
        }
        Ok(count as usize)
    }

    /// Skips one value of node `node`.
    pub(crate) fn skip(&mut self, schema: &Schema, node: usize, depth: usize) -> DatumResult<()> {
        if depth > MAX_DEPTH {
            return Err(self.err("values nest too deeply"));
        }
        match schema.node(node) {
            Node::Null => {}
            Node::Boolean => {
                self.boolean()?;
            }
            Node::Int | Node::Long | Node::Enum { .. } | Node::EnumMap { .. } => {
                self.long()?;
            }
            Node::Default { .. } => {}
            Node::Skip(n) | Node::Promote { wire: n, .. } | Node::Unreadable { wire: n, .. } => {
                self.skip(schema, *n, depth)?
            }
            Node::Float => {
                self.take(4)?;
            }
            Node::Double => {
                self.take(8)?;
            }
            Node::Bytes | Node::String => {
                self.bytes()?;
            }
            Node::Fixed(n) => {
                self.take(*n)?;
            }
            Node::Array(items) => self.skip_blocks(schema, &[*items], depth)?,
            Node::Map(values) => {
                // Each entry: a string key, then the value.
                loop {
                    let at = self.pos;
                    let count = self.long()?;
                    if count == 0 {
                        break;
                    }
                    if count < 0 {
                        // The block's byte size lets us jump over it.
                        let size = self.long()?;
                        let size = usize::try_from(size).map_err(|_| DatumError {
                            reason: "negative map block size",
                            offset: at,
                        })?;
                        self.take(size)?;
                        continue;
                    }
                    if count as u64 > self.remaining() as u64 {
                        return Err(DatumError {
                            reason: "map block claims more entries than the block holds",
                            offset: at,
                        });
                    }
                    for _ in 0..count {
                        self.bytes()?;
                        self.skip(schema, *values, depth + 1)?;
                    }
                }
            }
            Node::Union(branches) => {
                let at = self.pos;
                let i = self.long()?;
                let b = usize::try_from(i)
                    .ok()
                    .and_then(|i| branches.get(i))
                    .ok_or(DatumError {
                        reason: "union branch index out of range",
                        offset: at,
                    })?;
                self.skip(schema, *b, depth + 1)?;
            }
            Node::Record { fields, .. } => {
                for &(_, f) in fields {
                    self.skip(schema, f, depth + 1)?;
                }
            }
        }
        Ok(())
    }

    /// Skips the blocks of an array of `item[0]`.
    fn skip_blocks(&mut self, schema: &Schema, item: &[usize], depth: usize) -> DatumResult<()> {
        let items = item[0];
        let min = schema.min_size[items];
        loop {
            let at = self.pos;
            let count = self.long()?;
            if count == 0 {
                return Ok(());
            }
            if count < 0 {
                // The block's byte size could let us jump over it, but
                // decoding a requested array reads its items and ignores
                // the size (as apache-avro does): skip the items too, so
                // that skipping a record consumes exactly the bytes that
                // decoding it does, even when the size lies.
                if self.long()? < 0 {
                    return Err(self.err("negative array block size"));
                }
            }
            let count = count.unsigned_abs();
            match min {
                // Items that always take no bytes (nulls, empty records,
                // zero-size fixeds): nothing to read, however many.
                0 => continue,
                n if count > (self.remaining() / n) as u64 => {
                    return Err(DatumError {
                        reason: "array block claims more items than the block holds",
                        offset: at,
                    });
                }
                _ => {}
            }
            match schema.node(items) {
                Node::Float => {
                    self.take(count as usize * 4)?;
                }
                Node::Double => {
                    self.take(count as usize * 8)?;
                }
                Node::Fixed(n) => {
                    self.take(count as usize * n)?;
                }
                _ => {
                    for _ in 0..count {
                        self.skip(schema, items, depth + 1)?;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag() {
        for (bytes, v) in [
            (&[0u8][..], 0i64),
            (&[1], -1),
            (&[2], 1),
            (&[0x80, 0x01], 64),
        ] {
            assert_eq!(Reader::new(bytes).long().unwrap(), v);
        }
        let max = [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Reader::new(&max).long().unwrap(), i64::MAX);
        assert!(Reader::new(&[0x80; 11]).long().is_err());
        assert!(Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x10]).int().is_err());
    }

    #[test]
    fn long_word_and_long_agree() {
        // Varints of every length (and bad ones: too long, past 64 bits,
        // cut short), with 0 to 12 bytes after them.
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for b in 0..64 {
            for v in [1u64 << b, (1u64 << b) - 1, (1u64 << b) + 1, u64::MAX >> b] {
                let mut buf = Vec::new();
                let mut z = v;
                while z >= 0x80 {
                    buf.push((z as u8) | 0x80);
                    z >>= 7;
                }
                buf.push(z as u8);
                cases.push(buf);
            }
        }
        cases.push(vec![0x80; 11]);
        cases.push([[0xff; 9].as_slice(), &[0x02]].concat());
        cases.push(vec![0x80, 0x80, 0x80]);
        for case in cases {
            for after in 0..12 {
                let mut buf = case.clone();
                buf.extend((0..after).map(|i| [0x81, 0x7f, 0x00][i % 3]));
                let mut fast = Reader::new(&buf);
                let mut careful = fast;
                let got = fast.long_word().map(|v| (v, fast.pos));
                let want = careful.long().map(|v| (v, careful.pos));
                assert_eq!(got, want, "{buf:x?}");
            }
        }
    }

    #[test]
    fn block_counts_fast_and_careful_agree() {
        // Every first byte (one-byte counts, negative counts, longer
        // counts), every small item size (0 for items that take no bytes,
        // huge for an overflowing product), and 0 to 70 bytes after it.
        for first in 0..=255u8 {
            for min_item in [0, 1, 2, 4, 8, 63, usize::MAX / 2, usize::MAX] {
                for after in 0..70 {
                    let mut buf = vec![first];
                    buf.extend((0..after).map(|i| [0x02, 0x81, 0x7f][i % 3]));
                    for at in [0, 3] {
                        let mut padded = vec![0; at];
                        padded.extend(&buf);
                        let mut fast = Reader::new(&padded);
                        fast.pos = at;
                        let mut careful = fast;
                        assert_eq!(
                            fast.block_count(min_item),
                            careful.block_count_slow(min_item),
                            "{first:#x}, items of {min_item}, {after} after"
                        );
                        assert_eq!(fast.pos, careful.pos);
                    }
                }
            }
        }
        // An empty buffer.
        assert!(Reader::new(&[]).block_count(1).is_err());
    }

    #[test]
    fn arrays_cannot_claim_more_than_the_bytes() {
        // A block of 2^40 longs in a 6-byte buffer.
        let mut buf = Vec::new();
        let n: i64 = 1 << 40;
        let mut z = ((n << 1) ^ (n >> 63)) as u64;
        while z >= 0x80 {
            buf.push((z as u8) | 0x80);
            z >>= 7;
        }
        buf.push(z as u8);
        let s = Schema::parse(r#"{"type": "array", "items": "long"}"#).unwrap();
        assert!(Reader::new(&buf).skip(&s, s.root, 0).is_err());
        // ... but an array of nulls may claim many items: they take no bytes.
        let s = Schema::parse(r#"{"type": "array", "items": "null"}"#).unwrap();
        buf.push(0);
        assert!(Reader::new(&buf).skip(&s, s.root, 0).is_ok());
        // So may arrays of other zero-size items (this divided by zero).
        for items in [
            r#"{"type": "record", "name": "E", "fields": []}"#,
            r#"{"type": "fixed", "name": "F", "size": 0}"#,
        ] {
            let s = Schema::parse(&format!(r#"{{"type": "array", "items": {items}}}"#)).unwrap();
            let mut r = Reader::new(&buf);
            assert!(r.skip(&s, s.root, 0).is_ok(), "{items}");
            assert!(r.at_end());
        }
    }
}
