//! Protobuf wire-format reading for the hot path: varints, tags, length-
//! delimited fields and packed lists, straight from the record bytes.

/// Wire types.
pub(crate) const VARINT: u32 = 0;
pub(crate) const FIXED64: u32 = 1;
pub(crate) const LEN: u32 = 2;
pub(crate) const START_GROUP: u32 = 3;
pub(crate) const END_GROUP: u32 = 4;
pub(crate) const FIXED32: u32 = 5;

/// A wire-format error: what and where (byte offset in the record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WireError {
    pub(crate) reason: &'static str,
    pub(crate) offset: usize,
}

pub(crate) type WireResult<T> = Result<T, WireError>;

/// A cursor over one message's bytes. `base` is the offset of `buf[0]`
/// within the record, for error reporting.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor {
            buf,
            pos: 0,
            base: 0,
        }
    }

    fn sub(buf: &'a [u8], base: usize) -> Self {
        Cursor { buf, pos: 0, base }
    }

    #[inline]
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    #[inline]
    fn err(&self, reason: &'static str) -> WireError {
        WireError {
            reason,
            offset: self.offset(),
        }
    }

    /// Reads a varint of up to 10 bytes (the 10th may only hold bit 63).
    #[inline]
    pub(crate) fn varint(&mut self) -> WireResult<u64> {
        match read_varint(&self.buf[self.pos..]) {
            Ok((v, n)) => {
                self.pos += n;
                Ok(v)
            }
            Err(reason) => Err(self.err(reason)),
        }
    }

    /// Reads a tag, returning (field number, wire type).
    #[inline]
    pub(crate) fn tag(&mut self) -> WireResult<(u32, u32)> {
        let start = self.pos;
        let t = self.varint()?;
        if t >> 32 != 0 || t >> 3 == 0 {
            self.pos = start;
            return Err(self.err("invalid tag"));
        }
        Ok(((t >> 3) as u32, (t & 7) as u32))
    }

    /// Reads a length-delimited field's bytes (after its tag).
    #[inline]
    pub(crate) fn bytes(&mut self) -> WireResult<&'a [u8]> {
        let len = self.varint()?;
        let remaining = (self.buf.len() - self.pos) as u64;
        if len > remaining {
            return Err(self.err("length runs past the end of the message"));
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok(&self.buf[start..self.pos])
    }

    /// Reads a length-delimited field as a sub-message cursor.
    #[inline]
    pub(crate) fn message(&mut self) -> WireResult<Cursor<'a>> {
        let len = self.varint()?;
        let remaining = (self.buf.len() - self.pos) as u64;
        if len > remaining {
            return Err(self.err("length runs past the end of the message"));
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok(Cursor::sub(&self.buf[start..self.pos], self.base + start))
    }

    /// The byte range (relative to the record) of a length-delimited field.
    #[inline]
    pub(crate) fn span(&mut self) -> WireResult<Span> {
        let len = self.varint()?;
        let remaining = (self.buf.len() - self.pos) as u64;
        if len > remaining {
            return Err(self.err("length runs past the end of the message"));
        }
        let start = self.base + self.pos;
        self.pos += len as usize;
        Ok(Span {
            start: start as u32,
            end: (start + len as usize) as u32,
        })
    }

    fn fixed<const N: usize>(&mut self) -> WireResult<[u8; N]> {
        match self.buf.get(self.pos..self.pos + N) {
            Some(b) => {
                self.pos += N;
                let mut out = [0; N];
                out.copy_from_slice(b);
                Ok(out)
            }
            None => Err(self.err("truncated fixed-width value")),
        }
    }

    /// The fast path for a map entry written the usual way: key (field 1)
    /// then value (field 2), nothing else. `None` when the entry has any
    /// other layout (the caller then walks it field by field). Inlined:
    /// returned from a call, the key and span went through memory.
    #[inline(always)]
    pub(crate) fn key_value(&self) -> Option<(&'a [u8], Span)> {
        let e = &self.buf[self.pos..];
        if e.first() != Some(&0x0a) {
            return None;
        }
        let (klen, n) = read_varint(&e[1..]).ok()?;
        let key_start = 1 + n;
        let key_end = key_start.checked_add(usize::try_from(klen).ok()?)?;
        if e.get(key_end) != Some(&0x12) {
            return None;
        }
        let (vlen, m) = read_varint(e.get(key_end + 1..)?).ok()?;
        let value_start = key_end + 1 + m;
        if (e.len() - value_start.min(e.len())) as u64 != vlen || value_start > e.len() {
            return None;
        }
        let base = self.base + self.pos;
        Some((
            &e[key_start..key_end],
            Span {
                start: (base + value_start) as u32,
                end: (base + e.len()) as u32,
            },
        ))
    }

    /// Skips a field of `wire_type` (after its tag). Groups are rejected, as
    /// TensorFlow does.
    pub(crate) fn skip(&mut self, wire_type: u32) -> WireResult<()> {
        match wire_type {
            VARINT => self.varint().map(drop),
            FIXED64 => self.fixed::<8>().map(drop),
            LEN => self.bytes().map(drop),
            FIXED32 => self.fixed::<4>().map(drop),
            START_GROUP | END_GROUP => Err(self.err("groups are not supported")),
            _ => Err(self.err("invalid wire type")),
        }
    }
}

/// Decodes one varint from the start of `buf`: the value and its length.
#[inline(always)]
pub(crate) fn read_varint(buf: &[u8]) -> Result<(u64, usize), &'static str> {
    grist_tensor::varint::decode(buf)
}

/// Decodes every varint that ends in `word` (their ends marked in `ends`)
/// into `out`; returns the bit offset after the last one.
#[inline(always)]
fn squeeze_all(word: u64, ends: u64, out: &mut Vec<i64>) -> u32 {
    grist_tensor::varint::decode_ends(word, ends, usize::MAX, |v| out.push(v as i64)).1
}

/// Appends the packed varints of `bytes` to `out` (as int64, two's
/// complement, like protobuf's int64). Fails with the offset of a bad
/// varint. `bytes` lies at offset `base` of `record`.
#[inline]
fn packed_varints(record: &[u8], bytes: &[u8], base: usize, out: &mut Vec<i64>) -> WireResult<()> {
    // Every varint takes at least one byte: room for `bytes.len()` values
    // is enough, so pushing never reallocates below.
    out.reserve(bytes.len());
    let mut p = 0;
    // Bulk: while 8 bytes remain, decode every varint that ends within
    // the next 8-byte word, without a dependency from one to the next.
    while let Some(w) = bytes.get(p..).and_then(|b| b.first_chunk::<8>()) {
        let word = u64::from_le_bytes(*w);
        let ends = !word & 0x8080_8080_8080_8080;
        if ends == 0 {
            // A varint longer than 8 bytes: the careful path below.
            break;
        }
        let from = squeeze_all(word, ends, out);
        p += (from / 8) as usize;
    }
    // The last bytes (fewer than 8): one more word, its bytes past the list
    // set to 0x80 (a continuation byte ends no varint), so a varint cut
    // short by the end still fails below. The word is read from `record`
    // around the list when it has the room, else built byte by byte.
    if p < bytes.len() && bytes.len() - p < 8 {
        let word = grist_tensor::varint::tail_word(record, base + p, bytes.len() - p);
        let ends = !word & 0x8080_8080_8080_8080;
        let from = squeeze_all(word, ends, out);
        p += (from / 8) as usize;
    }
    while p < bytes.len() {
        match read_varint(&bytes[p..]) {
            Ok((v, len)) => {
                out.push(v as i64);
                p += len;
            }
            Err(reason) => {
                return Err(WireError {
                    reason,
                    offset: base + p,
                });
            }
        }
    }
    Ok(())
}

/// A byte range within the record being parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) end: u32,
}

impl Span {
    #[inline]
    pub(crate) fn of<'a>(&self, record: &'a [u8]) -> &'a [u8] {
        &record[self.start as usize..self.end as usize]
    }

    #[inline]
    pub(crate) fn cursor<'a>(&self, record: &'a [u8]) -> Cursor<'a> {
        Cursor::sub(self.of(record), self.start as usize)
    }
}

/// The list kind of a `tf.train.Feature`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Bytes,
    Float,
    Int64,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Bytes => "bytes_list",
            Kind::Float => "float_list",
            Kind::Int64 => "int64_list",
        }
    }
}

/// A parsed `tf.train.Feature`: its kind and the bytes holding its list
/// message(s) (relative to the record). `None` kind = no kind set (an empty
/// Feature), which TensorFlow treats as missing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FeatureRef {
    pub(crate) kind: Option<Kind>,
    /// From the start of the last run of this kind's fields to the end of
    /// the Feature message. Normally exactly one list field.
    pub(crate) body: Span,
    /// When the Feature is exactly one list field (the common case): the
    /// list message itself.
    pub(crate) list: Option<Span>,
}

impl Kind {
    fn field(self) -> u32 {
        match self {
            Kind::Bytes => 1,
            Kind::Float => 2,
            Kind::Int64 => 3,
        }
    }
}

/// Reads a `Feature` message. The oneof follows protobuf semantics: the
/// last list field present decides the kind, and repeated occurrences of
/// the same list field are concatenated (TensorFlow agrees on every Feature
/// a protobuf library writes: exactly one list field).
///
/// The common case (one list field spanning the message) is inlined into
/// the caller: returned from a call, the result went through memory and
/// its reload stalled on the stores just made (5% of a prod19 parse).
#[inline(always)]
pub(crate) fn feature(c: Cursor<'_>) -> WireResult<FeatureRef> {
    let end = c.offset() + (c.buf.len() - c.pos);
    // Fast path: one list field spanning the whole message.
    let rest = &c.buf[c.pos..];
    if let (Some(&tag), Some(rest)) = (rest.first(), rest.get(1..)) {
        let kind = match tag {
            0x0a => Some(Kind::Bytes),
            0x12 => Some(Kind::Float),
            0x1a => Some(Kind::Int64),
            _ => None,
        };
        if let (Some(kind), Ok((len, n))) = (kind, read_varint(rest)) {
            if len == (rest.len() - n) as u64 {
                let start = (c.offset() + 1 + n) as u32;
                let list = Span {
                    start,
                    end: end as u32,
                };
                return Ok(FeatureRef {
                    kind: Some(kind),
                    body: Span {
                        start: c.offset() as u32,
                        end: end as u32,
                    },
                    list: Some(list),
                });
            }
        }
    }
    feature_fields(c)
}

/// [`feature`] for any other message: field by field.
#[inline(never)]
fn feature_fields(mut c: Cursor<'_>) -> WireResult<FeatureRef> {
    let end = c.offset() + (c.buf.len() - c.pos);
    let mut out = FeatureRef {
        kind: None,
        body: Span::default(),
        list: None,
    };
    while !c.at_end() {
        let field_start = c.offset();
        let (field, wt) = c.tag()?;
        let kind = match (field, wt) {
            (1, LEN) => Kind::Bytes,
            (2, LEN) => Kind::Float,
            (3, LEN) => Kind::Int64,
            _ => {
                c.skip(wt)?;
                continue;
            }
        };
        c.bytes()?;
        if out.kind != Some(kind) {
            out.kind = Some(kind);
            out.body.start = field_start as u32;
        }
    }
    out.body.end = end as u32;
    Ok(out)
}

/// Calls `f` with each list message of `feature` (normally one).
#[inline]
fn for_each_list<'a>(
    record: &'a [u8],
    feature: &FeatureRef,
    mut f: impl FnMut(Cursor<'a>) -> WireResult<()>,
) -> WireResult<()> {
    let Some(kind) = feature.kind else {
        return Ok(());
    };
    if let Some(list) = feature.list {
        return f(list.cursor(record));
    }
    let mut c = feature.body.cursor(record);
    while !c.at_end() {
        let (field, wt) = c.tag()?;
        if field == kind.field() && wt == LEN {
            f(c.message()?)?;
        } else {
            c.skip(wt)?;
        }
    }
    Ok(())
}

/// Walks the `value` fields (field 1) of a feature's list message(s),
/// calling `on` with the cursor after each tag and the field's wire type;
/// `on` reads the value and returns `true`, or returns `false` to have the
/// field skipped (a wire type the list does not use).
#[inline(always)]
fn for_each_value<'a>(
    record: &'a [u8],
    feature: &FeatureRef,
    mut on: impl FnMut(&mut Cursor<'a>, u32) -> WireResult<bool>,
) -> WireResult<()> {
    for_each_list(record, feature, |mut list| {
        while !list.at_end() {
            let (field, wt) = list.tag()?;
            if field != 1 || !on(&mut list, wt)? {
                list.skip(wt)?;
            }
        }
        Ok(())
    })
}

/// Appends the values of an `Int64List` feature to `out`.
#[inline]
pub(crate) fn int64_list(
    record: &[u8],
    feature: &FeatureRef,
    out: &mut Vec<i64>,
) -> WireResult<()> {
    for_each_value(record, feature, |list, wt| {
        match wt {
            LEN => {
                let packed = list.bytes()?;
                packed_varints(record, packed, list.offset() - packed.len(), out)?;
            }
            VARINT => out.push(list.varint()? as i64),
            _ => return Ok(false),
        }
        Ok(true)
    })
}

/// Appends the values of a `FloatList` feature to `out`.
#[inline]
pub(crate) fn float_list(
    record: &[u8],
    feature: &FeatureRef,
    out: &mut Vec<f32>,
) -> WireResult<()> {
    for_each_value(record, feature, |list, wt| {
        match wt {
            LEN => {
                let at = list.offset();
                let bytes = list.bytes()?;
                if bytes.len() % 4 != 0 {
                    return Err(WireError {
                        reason: "packed float list length is not a multiple of 4",
                        offset: at,
                    });
                }
                grist_tensor::le::extend(out, bytes);
            }
            FIXED32 => out.push(f32::from_le_bytes(list.fixed::<4>()?)),
            _ => return Ok(false),
        }
        Ok(true)
    })
}

/// Appends the values of a `BytesList` feature to `out`.
#[inline]
pub(crate) fn bytes_list(
    record: &[u8],
    feature: &FeatureRef,
    out: &mut grist_tensor::StringValues,
) -> WireResult<()> {
    for_each_value(record, feature, |list, wt| {
        if wt != LEN {
            return Ok(false);
        }
        out.push(list.bytes()?);
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        let mut c = Cursor::new(&[0x96, 0x01]);
        assert_eq!(c.varint().unwrap(), 150);
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Cursor::new(&max).varint().unwrap(), u64::MAX);
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Cursor::new(&over).varint().is_err());
        assert!(Cursor::new(&[0x80]).varint().is_err());
        assert!(Cursor::new(&[0xff; 11]).varint().is_err());
    }

    #[test]
    fn varints_of_every_length_round_trip() {
        let mut values: Vec<u64> = (0..64)
            .flat_map(|b| [1u64 << b, (1u64 << b) - 1, (1u64 << b) + 1])
            .collect();
        values.extend([u64::MAX, i64::MIN as u64, -1i64 as u64, 0]);
        let mut packed = Vec::new();
        for &v in &values {
            let mut buf = Vec::new();
            prost::encoding::encode_varint(v, &mut buf);
            packed.extend_from_slice(&buf);
            // Alone, and followed by padding (the word-wise path).
            assert_eq!(read_varint(&buf), Ok((v, buf.len())), "{v}");
            buf.extend([0xffu8; 12]);
            assert_eq!(read_varint(&buf).map(|(x, _)| x), Ok(v), "{v}");
        }
        let mut out = Vec::new();
        packed_varints(&packed, &packed, 0, &mut out).unwrap();
        // The same bytes inside a larger record decode the same.
        let mut framed = vec![0xffu8; 3];
        framed.extend_from_slice(&packed);
        framed.extend([0x01u8; 5]);
        let mut again = Vec::new();
        packed_varints(&framed, &framed[3..3 + packed.len()], 3, &mut again).unwrap();
        assert_eq!(again, out);
        assert_eq!(out, values.iter().map(|&v| v as i64).collect::<Vec<_>>());
        // A truncated final varint fails.
        assert!(packed_varints(&[0x80, 0x80], &[0x80, 0x80], 0, &mut out).is_err());
        // A varint cut by the list's end fails even if the record goes on.
        let record = [0x80u8, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0];
        assert!(packed_varints(&record, &record[..2], 0, &mut out).is_err());
    }

    #[test]
    fn lengths_past_the_end_fail() {
        let mut c = Cursor::new(&[0x05, 1, 2]);
        assert!(c.bytes().is_err());
    }
}
