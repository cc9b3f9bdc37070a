//! The tf.Example side of the protobuf wire format: `Feature` messages and
//! their lists, read straight from the record bytes with the shared
//! primitives of [`grist_tensor::wire`] (varints, tags, [`Cursor`], packed
//! varints).

pub(crate) use grist_tensor::wire::{Cursor, LEN, WireError, WireResult, read_varint};
use grist_tensor::wire::{FIXED32, VARINT, packed_varints};

/// The fast path for a map entry written the usual way: key (field 1)
/// then value (field 2), nothing else, at the cursor `c`. `None` when the
/// entry has any other layout (the caller then walks it field by field).
/// Inlined: returned from a call, the key and span went through memory.
#[inline(always)]
pub(crate) fn key_value<'a>(c: &Cursor<'a>) -> Option<(&'a [u8], Span)> {
    let e = c.rest();
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
    let base = c.offset();
    Some((
        &e[key_start..key_end],
        Span {
            start: (base + value_start) as u32,
            end: (base + e.len()) as u32,
        },
    ))
}

/// The byte range (relative to the record) of a length-delimited field.
#[inline]
pub(crate) fn span(c: &mut Cursor<'_>) -> WireResult<Span> {
    let r = c.len_field()?;
    Ok(Span {
        start: r.start as u32,
        end: r.end as u32,
    })
}

/// Appends the packed varints of `record[start..start + len]` to `out` (as
/// int64, two's complement, like protobuf's int64).
#[inline]
fn packed_int64s(record: &[u8], start: usize, len: usize, out: &mut Vec<i64>) -> WireResult<()> {
    // Every varint takes at least one byte: room for `len` values is
    // enough, so pushing never reallocates.
    out.reserve(len);
    packed_varints(record, start..start + len, |v| out.push(v as i64)).map(drop)
}

/// A byte range within the record being parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) end: u32,
}

impl Span {
    #[inline]
    pub(crate) fn cursor<'a>(&self, record: &'a [u8]) -> Cursor<'a> {
        Cursor::range(record, self.start as usize..self.end as usize)
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
    let end = c.end();
    // Fast path: one list field spanning the whole message.
    let rest = c.rest();
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
    let end = c.end();
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
                let packed = list.len_field()?;
                packed_int64s(record, packed.start, packed.len(), out)?;
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

    /// A record holding one feature list: `Feature { int64_list { value:
    /// packed } }`, as the map value.
    fn int64_feature(packed: &[u8]) -> Vec<u8> {
        let mut list = vec![0x0a, packed.len() as u8];
        list.extend_from_slice(packed);
        let mut feature = vec![0x1a, list.len() as u8];
        feature.extend(list);
        feature
    }

    fn int64s(record: &[u8]) -> WireResult<Vec<i64>> {
        let f = feature(Cursor::new(record))?;
        let mut out = Vec::new();
        int64_list(record, &f, &mut out)?;
        Ok(out)
    }

    #[test]
    fn packed_int64_lists_of_every_length_round_trip() {
        let mut values: Vec<u64> = (0..64)
            .flat_map(|b| [1u64 << b, (1u64 << b) - 1, (1u64 << b) + 1])
            .collect();
        values.extend([u64::MAX, i64::MIN as u64, -1i64 as u64, 0]);
        for chunk in values.chunks(10) {
            let mut packed = Vec::new();
            for &v in chunk {
                prost::encoding::encode_varint(v, &mut packed);
            }
            let record = int64_feature(&packed);
            let want: Vec<i64> = chunk.iter().map(|&v| v as i64).collect();
            assert_eq!(int64s(&record), Ok(want));
        }
    }

    #[test]
    fn overlong_varints_drop_the_bits_past_64() {
        // As protobuf's C++ parser (TensorFlow's) does: see grist_tensor::wire.
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert_eq!(int64s(&int64_feature(&over)), Ok(vec![-1]));
        let eleven = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert!(int64s(&int64_feature(&eleven)).is_err());
        // A varint cut by the list's end fails even if the record goes on.
        let mut record = int64_feature(&[0x80, 0x80]);
        record.extend([0x01, 0, 0, 0, 0, 0, 0, 0]);
        assert!(int64s(&record).is_err());
    }

    #[test]
    fn lengths_past_the_end_fail() {
        let mut c = Cursor::new(&[0x05, 1, 2]);
        assert!(c.bytes().is_err());
    }
}
