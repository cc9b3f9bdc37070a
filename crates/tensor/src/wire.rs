//! Protobuf wire-format primitives shared by the tf.Example (grist-tfrecord)
//! and OFRecord (grist-ofrecord) parsers: varints with protobuf's rule for
//! overlong ones, tags and wire types, a [`Cursor`] over one message's
//! fields, skipping unknown fields, and packed varint lists decoded sixteen
//! or a word at a time. Message-specific walking stays in each format
//! crate.
//!
//! Shared internals, not a stable API: hidden from the docs.
//!
//! # Overlong varints
//!
//! A varint takes at most 10 bytes. The 10th byte can only carry bit 63 of
//! a 64-bit value; protobuf's C++ parser (which TensorFlow and OneFlow
//! call: `VarintParseSlow64`, `CodedInputStream::ReadVarint64`) and its
//! Python parser (`_DecodeVarint`, which masks the result to 64 bits)
//! accept any 10th byte below 0x80 and drop the bits past 64. Go's
//! `protowire` and prost refuse a 10th byte above 1 instead; grist follows
//! the parsers the reference readers use. So:
//!
//! - 1 to 10 bytes ending in a byte below 0x80: the value, bits past 64
//!   dropped (`ff ff ff ff ff ff ff ff ff 7f` is `u64::MAX`);
//! - 10 bytes that all have the high bit set: an error ("varint longer
//!   than 10 bytes"), whatever follows;
//! - the input ends first: an error ("truncated varint").
//!
//! Avro's zig-zag varints are not protobuf's: they stay in
//! [`crate::varint`], which refuses a 10th byte above 1.

use std::ops::Range;

use crate::{varint, varint_block};

/// Wire type of a varint field.
pub const VARINT: u32 = 0;
/// Wire type of an 8-byte little-endian field.
pub const FIXED64: u32 = 1;
/// Wire type of a length-delimited field.
pub const LEN: u32 = 2;
/// Wire type of a group's start tag.
pub const START_GROUP: u32 = 3;
/// Wire type of a group's end tag.
pub const END_GROUP: u32 = 4;
/// Wire type of a 4-byte little-endian field.
pub const FIXED32: u32 = 5;

/// How deep groups may nest when they are skipped (protobuf's default
/// recursion limit is 100; the messages around a list take a few levels).
pub const MAX_GROUP_DEPTH: usize = 96;

/// A wire-format error: what and where (a byte offset in the record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireError {
    /// What is wrong.
    pub reason: &'static str,
    /// The byte offset in the record.
    pub offset: usize,
}

/// A `Result` with [`WireError`].
pub type WireResult<T> = Result<T, WireError>;

/// Decodes one protobuf varint from the start of `buf`: the value and its
/// length. Bits past 64 in a 10th byte are dropped (see the module docs).
#[inline(always)]
pub fn read_varint(buf: &[u8]) -> Result<(u64, usize), &'static str> {
    match varint::decode(buf) {
        Ok(v) => Ok(v),
        Err(reason) => overlong_varint(buf, reason),
    }
}

/// A 10-byte varint whose last byte holds bits past 64 (which protobuf
/// drops), or the error `reason` of the strict decoder.
#[cold]
fn overlong_varint(buf: &[u8], reason: &'static str) -> Result<(u64, usize), &'static str> {
    match buf.first_chunk::<10>() {
        Some(ten) if ten[..9].iter().all(|&b| b >= 0x80) && ten[9] < 0x80 => {
            let v = ten
                .iter()
                .enumerate()
                .fold(0u64, |v, (i, &b)| v | (((b & 0x7f) as u64) << (7 * i)));
            Ok((v, 10))
        }
        _ => Err(reason),
    }
}

/// A cursor over the fields of one message: `buf` is the message, and
/// `base` the offset of `buf[0]` in the record, so that offsets (in errors
/// and ranges) are the record's.
#[derive(Clone, Copy, Debug)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor over a whole record.
    #[inline]
    pub fn new(record: &'a [u8]) -> Self {
        Cursor {
            buf: record,
            pos: 0,
            base: 0,
        }
    }

    /// A cursor over `record[range]` (offsets stay the record's).
    #[inline]
    pub fn range(record: &'a [u8], range: Range<usize>) -> Self {
        Cursor {
            base: range.start,
            buf: &record[range],
            pos: 0,
        }
    }

    /// True when every field has been read.
    #[inline(always)]
    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// The offset in the record of the next byte to read.
    #[inline(always)]
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// The offset in the record just past the message.
    #[inline(always)]
    pub fn end(&self) -> usize {
        self.base + self.buf.len()
    }

    /// The bytes not read yet.
    #[inline(always)]
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// An error at the cursor.
    #[inline]
    pub fn err(&self, reason: &'static str) -> WireError {
        WireError {
            reason,
            offset: self.offset(),
        }
    }

    /// Reads a varint ([`read_varint`]).
    #[inline(always)]
    pub fn varint(&mut self) -> WireResult<u64> {
        match read_varint(&self.buf[self.pos..]) {
            Ok((v, n)) => {
                self.pos += n;
                Ok(v)
            }
            Err(reason) => Err(self.err(reason)),
        }
    }

    /// Reads a tag: (field number, wire type). Fails on tags past 32 bits,
    /// field number 0 and wire types 6 and 7, leaving the cursor at the
    /// tag. An end-group tag is returned (only [`skip_with_groups`]
    /// expects one).
    ///
    /// [`skip_with_groups`]: Self::skip_with_groups
    #[inline(always)]
    pub fn tag(&mut self) -> WireResult<(u32, u32)> {
        let start = self.pos;
        let t = self.varint()?;
        let (field, wt) = (t >> 3, (t & 7) as u32);
        let reason = if t >> 32 != 0 {
            "tag is longer than 32 bits"
        } else if field == 0 {
            "field number 0"
        } else if wt > FIXED32 {
            "invalid wire type"
        } else {
            return Ok((field as u32, wt));
        };
        self.pos = start;
        Err(self.err(reason))
    }

    /// Reads a length-delimited field's length (after its tag) and returns
    /// the range of its contents in the record.
    #[inline(always)]
    pub fn len_field(&mut self) -> WireResult<Range<usize>> {
        let len = self.varint()?;
        if len > (self.buf.len() - self.pos) as u64 {
            return Err(self.err("length runs past the end of the message"));
        }
        let start = self.offset();
        self.pos += len as usize;
        Ok(start..self.offset())
    }

    /// Reads a length-delimited field's bytes (after its tag).
    #[inline(always)]
    pub fn bytes(&mut self) -> WireResult<&'a [u8]> {
        let r = self.len_field()?;
        Ok(&self.buf[r.start - self.base..r.end - self.base])
    }

    /// Reads a length-delimited field as a cursor over its fields.
    #[inline(always)]
    pub fn message(&mut self) -> WireResult<Cursor<'a>> {
        let r = self.len_field()?;
        Ok(Cursor {
            buf: &self.buf[r.start - self.base..r.end - self.base],
            pos: 0,
            base: r.start,
        })
    }

    /// Reads a fixed-width value of `N` bytes (after its tag).
    #[inline]
    pub fn fixed<const N: usize>(&mut self) -> WireResult<[u8; N]> {
        match self.buf.get(self.pos..).and_then(|b| b.first_chunk::<N>()) {
            Some(b) => {
                self.pos += N;
                Ok(*b)
            }
            None => Err(self.err("truncated fixed-width value")),
        }
    }

    /// Reads a fixed-width value of `n` bytes and returns its range in the
    /// record.
    #[inline]
    pub fn fixed_range(&mut self, n: usize) -> WireResult<Range<usize>> {
        if self.buf.len() - self.pos < n {
            return Err(self.err("truncated fixed-width value"));
        }
        let start = self.offset();
        self.pos += n;
        Ok(start..self.offset())
    }

    /// Skips a field of wire type `wt` (after its tag). Groups are
    /// refused, as TensorFlow's tf.Example parser does.
    #[inline]
    pub fn skip(&mut self, wt: u32) -> WireResult<()> {
        match wt {
            VARINT => self.varint().map(drop),
            FIXED64 => self.fixed_range(8).map(drop),
            LEN => self.len_field().map(drop),
            FIXED32 => self.fixed_range(4).map(drop),
            START_GROUP | END_GROUP => Err(self.err("groups are not supported")),
            _ => Err(self.err("invalid wire type")),
        }
    }

    /// Skips field `field` of wire type `wt` (after its tag), groups
    /// included, as protobuf's C++ `ParseFromArray` does for unknown
    /// fields; an end-group tag outside its group fails.
    pub fn skip_with_groups(&mut self, field: u32, wt: u32) -> WireResult<()> {
        match wt {
            START_GROUP => self.skip_group(field, 1),
            END_GROUP => Err(self.err("unexpected end-group tag")),
            _ => self.skip(wt),
        }
    }

    fn skip_group(&mut self, field: u32, depth: usize) -> WireResult<()> {
        if depth > MAX_GROUP_DEPTH {
            return Err(self.err("groups nest too deep"));
        }
        loop {
            if self.at_end() {
                return Err(self.err("group without its end tag"));
            }
            let start = self.pos;
            let (inner, wt) = self.tag()?;
            match wt {
                END_GROUP if inner == field => return Ok(()),
                END_GROUP => {
                    self.pos = start;
                    return Err(self.err("end-group tag does not match its group"));
                }
                START_GROUP => self.skip_group(inner, depth + 1)?,
                _ => self.skip(wt)?,
            }
        }
    }
}

/// Lists of at least this many bytes left are decoded by
/// [`varint_block`] where the core allows.
const BLOCK_FROM: usize = 16;

/// Decodes the packed varints of `record[range]`, handing each value to
/// `push` in order, and returns their number. Fails with the offset of the
/// first bad varint (one cut short by the list's end, or longer than 10
/// bytes); values before it have been pushed. Every varint takes at least
/// one byte: a caller can reserve `range.len()` values up front.
///
/// Where the core has AVX-512 VBMI2, runs of varints of up to 4 bytes are
/// decoded sixteen at a time first (`varint_block`). Then, while a whole word remains, every varint that
/// ends within it is decoded at once ([`varint::decode_ends`]); the last
/// bytes, and varints over 8 bytes, take the careful path.
#[inline]
pub fn packed_varints(
    record: &[u8],
    range: Range<usize>,
    mut push: impl FnMut(u64),
) -> WireResult<usize> {
    let bytes = &record[range.clone()];
    let mut p = 0;
    let mut n = 0;
    // Sixteen short varints at a time where the core can; the rest (and
    // everything, on other cores) one word at a time.
    if bytes.len() >= BLOCK_FROM {
        (n, p) = varint_block::decode_blocks(bytes, BLOCK_FROM, |vals| {
            vals.iter().for_each(|&v| push(v))
        });
    }
    while let Some(word) = bytes.get(p..).and_then(|b| b.first_chunk::<8>()) {
        let word = u64::from_le_bytes(*word);
        let ends = !word & 0x8080_8080_8080_8080;
        if ends == 0 {
            // A varint longer than 8 bytes: the careful path below.
            break;
        }
        let (count, bits) = varint::decode_ends(word, ends, usize::MAX, &mut push);
        n += count;
        p += (bits / 8) as usize;
    }
    // The last bytes (fewer than 8; a scalar is a list of one short
    // varint): one more word, its bytes past the list set to 0x80 (a
    // continuation byte ends no varint), so a varint cut short by the end
    // of the list is left to the careful path. The word is read from the
    // record around the list when it has the room, else built byte by byte.
    if p < bytes.len() && bytes.len() - p < 8 {
        let word = varint::tail_word(record, range.start + p, bytes.len() - p);
        let ends = !word & 0x8080_8080_8080_8080;
        let (count, bits) = varint::decode_ends(word, ends, usize::MAX, &mut push);
        n += count;
        p += (bits / 8) as usize;
    }
    while p < bytes.len() {
        // Decoded from the rest of the record, so that a whole word is
        // usually there for the fast path; a varint is self-delimiting, so
        // only one that runs past the list is wrong.
        let at = range.start + p;
        match read_varint(&record[at..]) {
            Ok((v, len)) if p + len <= bytes.len() => {
                push(v);
                p += len;
                n += 1;
            }
            Ok(_) => {
                return Err(WireError {
                    reason: "truncated varint",
                    offset: at,
                });
            }
            Err(reason) => {
                // Within the list, the error is the list's own.
                let reason = read_varint(&bytes[p..]).err().unwrap_or(reason);
                return Err(WireError { reason, offset: at });
            }
        }
    }
    Ok(n)
}

/// Checks the packed varints of `bytes` (at offset `base` of the record)
/// without decoding them, with the outcome [`packed_varints`] has: the
/// last byte ends a varint and none is longer than 10 bytes. Returns their
/// number.
pub fn count_packed_varints(bytes: &[u8], base: usize) -> WireResult<usize> {
    let mut run = 0usize;
    let mut n = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        if b < 0x80 {
            run = 0;
            n += 1;
        } else {
            run += 1;
            if run == 10 {
                return Err(WireError {
                    reason: "varint longer than 10 bytes",
                    offset: base + i + 1 - run,
                });
            }
        }
    }
    if run > 0 {
        return Err(WireError {
            reason: "truncated varint",
            offset: base + bytes.len() - run,
        });
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    #[test]
    fn overlong_varints_follow_protobuf_cpp_and_python() {
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(read_varint(&max), Ok((u64::MAX, 10)));
        // A 10th byte of 2 to 0x7f: its bits past 64 are dropped.
        for last in [0x02u8, 0x03, 0x40, 0x7f] {
            let mut b = max;
            b[9] = last;
            let want = u64::MAX >> 1 | (u64::from(last & 1) << 63);
            assert_eq!(read_varint(&b), Ok((want, 10)), "{last:#x}");
            // Followed by other bytes, in a word or not.
            let mut long = b.to_vec();
            long.extend([0x05; 8]);
            assert_eq!(read_varint(&long), Ok((want, 10)), "{last:#x}");
        }
        // Zero with padding: 0x80 x 9, then 0x00 (non-minimal, accepted).
        let mut zero = [0x80u8; 10];
        zero[9] = 0;
        assert_eq!(read_varint(&zero), Ok((0, 10)));
        // An 11th byte: refused, as every protobuf parser does.
        let mut eleven = [0x80u8; 11];
        eleven[10] = 0;
        assert_eq!(read_varint(&eleven), Err("varint longer than 10 bytes"));
        assert_eq!(read_varint(&[0xff; 10]), Err("varint longer than 10 bytes"));
        // Cut short at every length.
        for cut in 0..10 {
            assert_eq!(read_varint(&max[..cut]), Err("truncated varint"), "{cut}");
        }
    }

    #[test]
    fn packed_varints_agree_with_one_by_one_and_the_count() {
        let mut seed = 7u64;
        for case in 0..3000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut list = Vec::new();
            for k in 0..(seed >> 60) as usize {
                let bits = (seed >> (k * 5 % 50)) % 64;
                encode((seed.rotate_left(k as u32 * 7)) >> (63 - bits), &mut list);
            }
            // Sometimes an overlong 10-byte varint, sometimes cut inside
            // the last varint.
            if case % 7 == 3 {
                list.extend([0xff; 9]);
                list.push(0x7f);
            }
            if case % 5 == 4 && !list.is_empty() && list[list.len() - 1] < 0x80 {
                list.pop();
                if let Some(b) = list.last_mut() {
                    *b |= 0x80;
                }
            }
            for (before, after) in [(0usize, 0usize), (3, 9), (1, 2)] {
                let mut rec = vec![0x81; before];
                rec.extend_from_slice(&list);
                rec.extend(std::iter::repeat_n(0x05, after));
                let range = before..before + list.len();
                let mut got = Vec::new();
                let n = packed_varints(&rec, range.clone(), |v| got.push(v));
                // One at a time, the reference.
                let mut want = Vec::new();
                let mut p = 0;
                let reference = loop {
                    if p == list.len() {
                        break Ok(want.len());
                    }
                    match read_varint(&list[p..]) {
                        Ok((v, len)) => {
                            want.push(v);
                            p += len;
                        }
                        Err(reason) => {
                            break Err(WireError {
                                reason,
                                offset: before + p,
                            });
                        }
                    }
                };
                assert_eq!(n, reference, "{list:x?} {before} {after}");
                assert_eq!(got, want, "{list:x?} {before} {after}");
                assert_eq!(count_packed_varints(&list, before), reference);
            }
        }
    }

    #[test]
    fn groups_are_skipped_only_when_asked() {
        // Field 9 as a group holding a varint and a nested group, then
        // field 1 (varint 5).
        let rec = [0x4b, 0x08, 0x01, 0x53, 0x54, 0x4c, 0x08, 0x05];
        let mut c = Cursor::new(&rec);
        let (field, wt) = c.tag().unwrap();
        assert_eq!((field, wt), (9, START_GROUP));
        c.skip_with_groups(field, wt).unwrap();
        assert_eq!(c.tag().unwrap(), (1, VARINT));
        assert_eq!(c.varint(), Ok(5));
        assert!(c.at_end());
        let mut c = Cursor::new(&rec);
        let (_, wt) = c.tag().unwrap();
        assert_eq!(c.skip(wt).unwrap_err().reason, "groups are not supported");
        // An end tag of another field, an end tag alone, a group left open.
        for bad in [&[0x4b, 0x54][..], &[0x4c], &[0x4b, 0x08, 0x01]] {
            let mut c = Cursor::new(bad);
            let (field, wt) = c.tag().unwrap();
            assert!(c.skip_with_groups(field, wt).is_err(), "{bad:x?}");
        }
    }

    #[test]
    fn offsets_are_the_records() {
        // Field 1 (LEN 3: a sub-message with field 2 = varint 7) in a
        // record that starts 2 bytes before the message.
        let rec = [0xaa, 0xbb, 0x0a, 0x02, 0x10, 0x07];
        let mut c = Cursor::range(&rec, 2..6);
        assert_eq!(c.tag().unwrap(), (1, LEN));
        let mut m = c.message().unwrap();
        assert_eq!((m.offset(), m.end()), (4, 6));
        assert_eq!(m.tag().unwrap(), (2, VARINT));
        assert_eq!(m.varint(), Ok(7));
        let mut c = Cursor::range(&rec, 2..6);
        c.tag().unwrap();
        assert_eq!(c.len_field(), Ok(4..6));
        let mut short = Cursor::range(&rec, 2..4);
        short.tag().unwrap();
        // The error is at the end of the length, where the contents start.
        assert_eq!(short.len_field().unwrap_err().offset, 4);
    }
}
