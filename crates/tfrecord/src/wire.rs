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
        let rest = &self.buf[self.pos..];
        // Fast path: one byte.
        if let Some(&b) = rest.first() {
            if b < 0x80 {
                self.pos += 1;
                return Ok(b as u64);
            }
        }
        let mut value: u64 = 0;
        for (i, &b) in rest.iter().enumerate().take(10) {
            value |= ((b & 0x7f) as u64) << (7 * i);
            if b < 0x80 {
                if i == 9 && b > 1 {
                    return Err(self.err("varint overflows 64 bits"));
                }
                self.pos += i + 1;
                return Ok(value);
            }
        }
        if rest.len() < 10 {
            Err(self.err("truncated varint"))
        } else {
            Err(self.err("varint longer than 10 bytes"))
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FeatureRef {
    pub(crate) kind: Option<Kind>,
    /// From the start of the last run of this kind's fields to the end of
    /// the Feature message. Normally exactly one list field.
    pub(crate) body: Span,
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
#[inline]
pub(crate) fn feature(mut c: Cursor<'_>) -> WireResult<FeatureRef> {
    let end = c.offset() + (c.buf.len() - c.pos);
    let mut out = FeatureRef {
        kind: None,
        body: Span::default(),
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

/// Appends the values of an `Int64List` feature to `out`.
#[inline]
pub(crate) fn int64_list(
    record: &[u8],
    feature: &FeatureRef,
    out: &mut Vec<i64>,
) -> WireResult<()> {
    for_each_list(record, feature, |mut list| {
        while !list.at_end() {
            let (field, wt) = list.tag()?;
            match (field, wt) {
                (1, LEN) => {
                    let mut packed = list.message()?;
                    // Each varint takes at least one byte.
                    out.reserve(packed.buf.len().min(1 << 20));
                    while !packed.at_end() {
                        out.push(packed.varint()? as i64);
                    }
                }
                (1, VARINT) => out.push(list.varint()? as i64),
                _ => list.skip(wt)?,
            }
        }
        Ok(())
    })
}

/// Appends the values of a `FloatList` feature to `out`.
#[inline]
pub(crate) fn float_list(
    record: &[u8],
    feature: &FeatureRef,
    out: &mut Vec<f32>,
) -> WireResult<()> {
    for_each_list(record, feature, |mut list| {
        while !list.at_end() {
            let (field, wt) = list.tag()?;
            match (field, wt) {
                (1, LEN) => {
                    let at = list.offset();
                    let bytes = list.bytes()?;
                    if bytes.len() % 4 != 0 {
                        return Err(WireError {
                            reason: "packed float list length is not a multiple of 4",
                            offset: at,
                        });
                    }
                    out.extend(
                        bytes
                            .chunks_exact(4)
                            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                    );
                }
                (1, FIXED32) => out.push(f32::from_le_bytes(list.fixed::<4>()?)),
                _ => list.skip(wt)?,
            }
        }
        Ok(())
    })
}

/// Appends the values of a `BytesList` feature to `out`.
#[inline]
pub(crate) fn bytes_list(
    record: &[u8],
    feature: &FeatureRef,
    out: &mut grist_tensor::StringValues,
) -> WireResult<()> {
    for_each_list(record, feature, |mut list| {
        while !list.at_end() {
            let (field, wt) = list.tag()?;
            match (field, wt) {
                (1, LEN) => out.push(list.bytes()?),
                _ => list.skip(wt)?,
            }
        }
        Ok(())
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
    fn lengths_past_the_end_fail() {
        let mut c = Cursor::new(&[0x05, 1, 2]);
        assert!(c.bytes().is_err());
    }
}
