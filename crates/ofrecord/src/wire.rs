//! The protobuf wire format of OFRecord, read straight from the record
//! bytes with protobuf's rules (those of C++ `ParseFromArray`, which
//! OneFlow calls): unknown fields of any valid wire type (groups included)
//! are skipped, a known field with another wire type is unknown, packed and
//! unpacked numeric lists are both read, the oneof keeps its last member
//! (merging repeats of it), and a map key given twice keeps its last entry.
//!
//! Positions are absolute offsets in the record, so errors and spans need
//! no rebasing.

use std::ops::Range;

use grist_tensor::wire::{
    Cursor, FIXED32, FIXED64, LEN, VARINT, count_packed_varints, packed_varints as decode_packed,
    read_varint,
};
pub(crate) use grist_tensor::wire::{WireError, WireResult};

/// The list kinds of OneFlow's `Feature` oneof, by field number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ListKind {
    /// `bytes_list` (field 1).
    Bytes,
    /// `float_list` (field 2).
    Float,
    /// `double_list` (field 3).
    Double,
    /// `int32_list` (field 4).
    Int32,
    /// `int64_list` (field 5).
    Int64,
}

impl ListKind {
    /// Every kind, in field-number order.
    pub const ALL: [ListKind; 5] = [
        ListKind::Bytes,
        ListKind::Float,
        ListKind::Double,
        ListKind::Int32,
        ListKind::Int64,
    ];

    /// The kind of `Feature` field `field`.
    pub(crate) fn from_field(field: u32) -> Option<Self> {
        Self::ALL.get((field as usize).wrapping_sub(1)).copied()
    }

    /// The field number in `Feature`.
    pub fn field(self) -> u32 {
        self as u32 + 1
    }

    /// The field name (`"int64_list"`, ...), as the corpus manifests name
    /// the kind.
    pub fn name(self) -> &'static str {
        match self {
            ListKind::Bytes => "bytes_list",
            ListKind::Float => "float_list",
            ListKind::Double => "double_list",
            ListKind::Int32 => "int32_list",
            ListKind::Int64 => "int64_list",
        }
    }

    /// The kind called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The wire type of an unpacked value of this kind.
    fn native_wire_type(self) -> u32 {
        match self {
            ListKind::Bytes => LEN,
            ListKind::Float => FIXED32,
            ListKind::Double => FIXED64,
            ListKind::Int32 | ListKind::Int64 => VARINT,
        }
    }
}

/// Where a feature's value lies in the record, as found by [`scan`]:
/// its list kind (`None`: a Feature with no list set) and its list
/// messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FeatureRef {
    pub(crate) kind: Option<ListKind>,
    layout: Layout,
    start: u32,
    end: u32,
    run_start: u32,
}

/// What `start..end` of a [`FeatureRef`] holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Layout {
    /// The map entry, whose Feature fields of the kind from `run_start` on
    /// are the lists (repeats of the oneof member merge; another member
    /// replaces them). Its lists were checked when it was found.
    #[default]
    Entry,
    /// The one list message of the Feature.
    List,
    /// The values of a numeric list that is one packed field.
    Packed,
}

/// Walks the map entries of an OFRecord, calling `on(key, feature)` for
/// each in order (a later entry with the same key replaces an earlier one:
/// that is the caller's business). Fails on anything C++ protobuf would
/// not parse outside the list messages of single-list features, which
/// the caller reads or checks with [`validate`].
#[inline]
pub(crate) fn scan<'a>(
    rec: &'a [u8],
    mut on: impl FnMut(&'a [u8], FeatureRef) -> WireResult<()>,
) -> WireResult<()> {
    if rec.len() > u32::MAX as usize {
        return Err(WireError {
            reason: "record is longer than 4 GiB",
            offset: 0,
        });
    }
    let mut top = Cursor::range(rec, 0..rec.len());
    while !top.at_end() {
        let (field, wt) = top.tag()?;
        if field != 1 || wt != LEN {
            top.skip_with_groups(field, wt)?;
            continue;
        }
        let entry = top.len_field()?;
        let (key, feature) = match entry_fast(rec, entry.clone()) {
            Some(found) => found,
            None => entry_slow(rec, entry)?,
        };
        on(key, feature)?;
    }
    Ok(())
}

/// A map entry written the usual way: key field, then a value field
/// holding exactly one list field.
#[inline(always)]
fn entry_fast(rec: &[u8], entry: Range<usize>) -> Option<(&[u8], FeatureRef)> {
    let e = &rec[entry.clone()];
    if e.first() != Some(&0x0a) {
        return None;
    }
    let (klen, n) = read_varint(&e[1..]).ok()?;
    let key_end = (1 + n).checked_add(usize::try_from(klen).ok()?)?;
    let key = e.get(1 + n..key_end)?;
    if e.get(key_end) != Some(&0x12) {
        return None;
    }
    let (vlen, m) = read_varint(e.get(key_end + 1..)?).ok()?;
    let value = key_end + 1 + m;
    if vlen != e.len().checked_sub(value)? as u64 {
        return None;
    }
    let v = &e[value..];
    let start = entry.start + value;
    if v.is_empty() {
        let empty = FeatureRef {
            kind: None,
            layout: Layout::List,
            start: start as u32,
            end: start as u32,
            run_start: 0,
        };
        return Some((key, empty));
    }
    // One length-delimited list field filling the Feature.
    let tag = v[0];
    let kind = if tag & 7 == LEN as u8 {
        ListKind::from_field(u32::from(tag >> 3))?
    } else {
        return None;
    };
    let (llen, k) = read_varint(&v[1..]).ok()?;
    if llen != (v.len() - 1 - k) as u64 {
        return None;
    }
    let list = start + 1 + k;
    let packed = match kind {
        ListKind::Bytes => None,
        _ => one_packed_field(&rec[list..entry.end]),
    };
    let (layout, start) = match packed {
        Some(len) => (Layout::Packed, entry.end - len),
        None => (Layout::List, list),
    };
    Some((
        key,
        FeatureRef {
            kind: Some(kind),
            layout,
            start: start as u32,
            end: entry.end as u32,
            run_start: 0,
        },
    ))
}

/// Any other map entry: fields in any order and number. Every list of
/// every Feature field is checked here (this path is rare).
#[cold]
fn entry_slow(rec: &[u8], entry: Range<usize>) -> WireResult<(&[u8], FeatureRef)> {
    let mut key: &[u8] = &[];
    let mut out = FeatureRef {
        kind: None,
        layout: Layout::Entry,
        start: entry.start as u32,
        end: entry.end as u32,
        run_start: 0,
    };
    let mut fields = Cursor::range(rec, entry);
    while !fields.at_end() {
        let (field, wt) = fields.tag()?;
        match (field, wt) {
            (1, LEN) => key = &rec[fields.len_field()?],
            (2, LEN) => {
                let value = fields.len_field()?;
                let mut feature = Cursor::range(rec, value);
                while !feature.at_end() {
                    let field_start = feature.offset();
                    let (field, wt) = feature.tag()?;
                    match ListKind::from_field(field) {
                        Some(kind) if wt == LEN => {
                            let list = feature.len_field()?;
                            read_list(rec, kind, list, &mut Check)?;
                            if out.kind != Some(kind) {
                                out.kind = Some(kind);
                                out.run_start = field_start as u32;
                            }
                        }
                        _ => feature.skip_with_groups(field, wt)?,
                    }
                }
            }
            _ => fields.skip_with_groups(field, wt)?,
        }
    }
    Ok((key, out))
}

/// Receives the values of a list, by kind.
pub(crate) trait Sink {
    /// True when the values themselves are not needed (only checked).
    const CHECK_ONLY: bool = false;
    /// One `bytes_list` value.
    fn bytes(&mut self, _v: &[u8]) {}
    /// Float32 values, 4 little-endian bytes each.
    fn f32s(&mut self, _le: &[u8]) {}
    /// Float64 values, 8 little-endian bytes each.
    fn f64s(&mut self, _le: &[u8]) {}
    /// One integer (the varint's 64 bits; int32 lists keep the low 32).
    fn int(&mut self, _v: u64) {}
    /// Room for `n` more integers.
    fn reserve_ints(&mut self, _n: usize) {}
}

/// A sink that only checks the wire format.
pub(crate) struct Check;

impl Sink for Check {
    const CHECK_ONLY: bool = true;
}

/// Reads the values of every list message of `feature` into `sink` and
/// returns how many there were. A feature with no kind has none.
#[inline]
pub(crate) fn read_values<S: Sink>(
    rec: &[u8],
    feature: &FeatureRef,
    sink: &mut S,
) -> WireResult<usize> {
    let Some(kind) = feature.kind else {
        return Ok(0);
    };
    let range = feature.start as usize..feature.end as usize;
    match feature.layout {
        Layout::Packed => return read_packed(rec, kind, range, sink),
        Layout::List => return read_list(rec, kind, range, sink),
        Layout::Entry => {}
    }
    let mut n = 0;
    let mut entry = Cursor::range(rec, feature.start as usize..feature.end as usize);
    while !entry.at_end() {
        let (field, wt) = entry.tag()?;
        if field != 2 || wt != LEN {
            entry.skip_with_groups(field, wt)?;
            continue;
        }
        let value = entry.len_field()?;
        let mut f = Cursor::range(rec, value);
        while !f.at_end() {
            let field_start = f.offset();
            let (field, wt) = f.tag()?;
            if field == kind.field() && wt == LEN && field_start >= feature.run_start as usize {
                let list = f.len_field()?;
                n += read_list(rec, kind, list, sink)?;
            } else {
                f.skip_with_groups(field, wt)?;
            }
        }
    }
    Ok(n)
}

/// Checks a feature's lists without keeping the values.
#[inline]
pub(crate) fn validate(rec: &[u8], feature: &FeatureRef) -> WireResult<()> {
    // Lists found on the slow path were checked as they were found.
    if feature.layout != Layout::Entry {
        read_values(rec, feature, &mut Check)?;
    }
    Ok(())
}

/// Reads the values of one list message of `kind` into `sink`.
#[inline]
fn read_list<S: Sink>(
    rec: &[u8],
    kind: ListKind,
    list: Range<usize>,
    sink: &mut S,
) -> WireResult<usize> {
    // The usual numeric list: one packed field filling the message.
    if kind != ListKind::Bytes {
        if let Some(packed) = one_packed_field(&rec[list.clone()]) {
            return read_packed(rec, kind, list.end - packed..list.end, sink);
        }
    }
    let mut f = Cursor::range(rec, list);
    let mut n = 0;
    let native = kind.native_wire_type();
    while !f.at_end() {
        let (field, wt) = f.tag()?;
        if field != 1 || (wt != LEN && wt != native) {
            f.skip_with_groups(field, wt)?;
            continue;
        }
        match (kind, wt) {
            (ListKind::Bytes, _) => {
                let v = f.len_field()?;
                sink.bytes(&rec[v]);
                n += 1;
            }
            (ListKind::Float, LEN) | (ListKind::Double, LEN) => {
                let v = f.len_field()?;
                n += read_packed(rec, kind, v, sink)?;
            }
            (ListKind::Float, _) => {
                sink.f32s(&rec[f.fixed_range(4)?]);
                n += 1;
            }
            (ListKind::Double, _) => {
                sink.f64s(&rec[f.fixed_range(8)?]);
                n += 1;
            }
            (_, LEN) => {
                let v = f.len_field()?;
                n += read_packed(rec, kind, v, sink)?;
            }
            _ => {
                sink.int(f.varint()?);
                n += 1;
            }
        }
    }
    Ok(n)
}

/// Reads the packed values `rec[values]` of a numeric list of `kind`.
#[inline(always)]
fn read_packed<S: Sink>(
    rec: &[u8],
    kind: ListKind,
    values: Range<usize>,
    sink: &mut S,
) -> WireResult<usize> {
    let size = match kind {
        ListKind::Float => 4,
        ListKind::Double => 8,
        _ => return packed_varints(rec, values, sink),
    };
    let len = values.len();
    if len % size != 0 {
        return Err(WireError {
            reason: "packed list length is not a multiple of the value size",
            offset: values.start,
        });
    }
    if !S::CHECK_ONLY {
        if size == 4 {
            sink.f32s(&rec[values]);
        } else {
            sink.f64s(&rec[values]);
        }
    }
    Ok(len / size)
}

/// The length of the packed values when `list` is exactly one field 1 of
/// wire type LEN (tag byte 0x0a, a varint length, that many bytes).
#[inline(always)]
fn one_packed_field(list: &[u8]) -> Option<usize> {
    if list.first() != Some(&0x0a) {
        return None;
    }
    let (len, n) = read_varint(&list[1..]).ok()?;
    (len == (list.len() - 1 - n) as u64).then_some(len as usize)
}

/// Reads the packed varints of `rec[range]` into `sink`.
#[inline]
fn packed_varints<S: Sink>(rec: &[u8], range: Range<usize>, sink: &mut S) -> WireResult<usize> {
    if S::CHECK_ONLY {
        return count_packed_varints(&rec[range.clone()], range.start);
    }
    // Every varint is at least one byte.
    sink.reserve_ints(range.len());
    decode_packed(rec, range, |v| sink.int(v))
}

/// A sink that collects integers.
impl Sink for Vec<i64> {
    #[inline(always)]
    fn int(&mut self, v: u64) {
        self.push(v as i64);
    }
    #[inline(always)]
    fn reserve_ints(&mut self, n: usize) {
        self.reserve(n);
    }
}

/// A sink that collects int32 values (the low 32 bits, as protobuf reads
/// an int32).
impl Sink for Vec<i32> {
    #[inline(always)]
    fn int(&mut self, v: u64) {
        self.push(v as i32);
    }
    #[inline(always)]
    fn reserve_ints(&mut self, n: usize) {
        self.reserve(n);
    }
}

impl Sink for Vec<f32> {
    #[inline(always)]
    fn f32s(&mut self, le: &[u8]) {
        grist_tensor::le::extend(self, le);
    }
}

impl Sink for Vec<f64> {
    #[inline(always)]
    fn f64s(&mut self, le: &[u8]) {
        grist_tensor::le::extend(self, le);
    }
}

impl Sink for grist_tensor::StringValues {
    #[inline(always)]
    fn bytes(&mut self, v: &[u8]) {
        self.push(v);
    }
}

/// Bools from an integer list (non-zero is true).
impl Sink for Vec<bool> {
    #[inline(always)]
    fn int(&mut self, v: u64) {
        self.push(v != 0);
    }
    #[inline(always)]
    fn reserve_ints(&mut self, n: usize) {
        self.reserve(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A feature as the tests see it: name, kind, integer values.
    type Found = (Vec<u8>, Option<ListKind>, Vec<i64>);

    fn features(rec: &[u8]) -> WireResult<Vec<Found>> {
        let mut out = Vec::new();
        scan(rec, |key, f| {
            let mut v: Vec<i64> = Vec::new();
            if matches!(f.kind, Some(ListKind::Int32 | ListKind::Int64)) {
                read_values(rec, &f, &mut v)?;
            }
            out.push((key.to_vec(), f.kind, v));
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn ten_byte_varints_drop_the_bits_past_64() {
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert_eq!(read_varint(&over), Ok((u64::MAX, 10)));
        assert!(read_varint(&[0xff; 11]).is_err());
        assert!(read_varint(&[0x80]).is_err());
    }

    #[test]
    fn groups_are_skipped_and_must_match() {
        // Unknown field 9 as a group holding a varint and a nested group,
        // then the entry {"k": int64_list [5]}.
        let mut rec = vec![0x4b, 0x08, 0x01, 0x53, 0x54, 0x4c];
        rec.extend([
            0x0a, 0x0a, 0x0a, 0x01, b'k', 0x12, 0x05, 0x2a, 0x03, 0x0a, 0x01, 0x05,
        ]);
        let found = features(&rec).unwrap();
        assert_eq!(found, vec![(b"k".to_vec(), Some(ListKind::Int64), vec![5])]);
        // End tag of another field.
        assert!(features(&[0x4b, 0x54]).is_err());
        // End tag with no group, group with no end.
        assert!(features(&[0x4c]).is_err());
        assert!(features(&[0x4b, 0x08, 0x01]).is_err());
    }
}
