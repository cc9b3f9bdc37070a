//! Writing protobuf feature maps (tf.Example's `Features`, an OFRecord)
//! straight from a batch's columns: the bytes protobuf writes for the
//! message, without building a message per record.
//!
//! The specs (in the tf.Example form, [`SpecForm::Example`](crate::SpecForm))
//! say which keys a column writes; [`columns`] gathers, per key in key
//! order (the order protobuf writes a map in), each row's values as
//! [`Val`]s borrowed from the columns; [`FeaturesWriter`] measures and
//! writes one row's map. A [`Dialect`] holds what differs between the two
//! formats: the list types' field numbers, whether float64 and int32 have
//! lists of their own, whether a map entry's empty key is written.
//!
//! ```
//! use grist_tensor::feature_map::{FeaturesWriter, TF_EXAMPLE, columns};
//! use grist_tensor::{Batch, Column, DType, DenseTensor, FeatureSpec, Lossy, Section, Tensor, Values};
//!
//! let spec = [FeatureSpec::dense("x", DType::Int64, [])];
//! let x = DenseTensor { shape: vec![1], values: Values::Int64(vec![7]) };
//! let column = Column { name: "x".into(), section: Section::Features, tensor: Tensor::Dense(x) };
//! let batch = Batch::new(1, vec![column]);
//! let columns = columns(&TF_EXAMPLE, &batch, Section::Features, &spec, Lossy::Refuse)?;
//! let mut writer = FeaturesWriter::new(&TF_EXAMPLE, &columns);
//! let len = writer.measure(0);
//! let mut out = Vec::new();
//! writer.write(0, &mut out);
//! // One map entry: key "x", Feature { int64_list { value: [7] } }.
//! assert_eq!(out, [0x0a, 10, 0x0a, 1, b'x', 0x12, 5, 0x1a, 3, 0x0a, 1, 7]);
//! assert_eq!(out.len(), len);
//! # Ok::<(), grist_tensor::TensorError>(())
//! ```

use std::collections::BTreeMap;
use std::ops::Range;

use crate::{
    Batch, FeatureSpec, Lossy, Partition, RaggedTensor, Section, StringValues, Tensor, TensorError,
    Values,
};

/// What differs between the feature maps of tf.Example and OFRecord.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dialect {
    /// The format, as errors name it.
    pub name: &'static str,
    /// The field of `Feature`'s bytes list.
    pub bytes: u32,
    /// The field of `Feature`'s float list.
    pub float: u32,
    /// The field of `Feature`'s int64 list.
    pub int64: u32,
    /// The field of the int32 list (which bools are written to too);
    /// `None`: int32 and bool values widen to int64 lists.
    pub int32: Option<u32>,
    /// The field of the double list; `None`: float64 values narrow to
    /// float lists (when [`Lossy::Allow`]s it).
    pub double: Option<u32>,
    /// Whether a map entry's empty key is written (protobuf leaves a
    /// proto3 map entry's default key out; Python writes proto2's).
    pub empty_key: bool,
}

/// tf.Example's `Features` (proto3): bytes, float and int64 lists.
pub const TF_EXAMPLE: Dialect = Dialect {
    name: "tf.Example",
    bytes: 1,
    float: 2,
    int64: 3,
    int32: None,
    double: None,
    empty_key: false,
};

/// OneFlow's OFRecord (proto2): bytes, float, double, int32 and int64
/// lists.
pub const OFRECORD: Dialect = Dialect {
    name: "OFRecord",
    bytes: 1,
    float: 2,
    int64: 5,
    int32: Some(4),
    double: Some(3),
    empty_key: true,
};

/// The tag byte of length-delimited field `field` (fields 1 to 15).
const fn tag(field: u32) -> u8 {
    ((field << 3) | 2) as u8
}

/// The tags of fields 1 and 2 of the messages around the lists.
pub const TAG_1: u8 = tag(1);
/// See [`TAG_1`].
pub const TAG_2: u8 = tag(2);

/// The bytes of `v` as a protobuf varint.
#[inline]
pub fn varint_len(v: u64) -> usize {
    // 1 byte per 7 bits, at least one.
    ((64 - (v | 1).leading_zeros() as usize) * 9 + 64) / 64
}

/// Appends `v` as a protobuf varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends the tag and length of a length-delimited field of `len`
/// bytes (the caller writes the bytes).
#[inline]
pub fn put_len_field(out: &mut Vec<u8>, tag: u8, len: usize) {
    out.push(tag);
    put_varint(out, len as u64);
}

/// The bytes of a length-delimited field of `len` bytes.
#[inline]
pub fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// One record's values of one feature as they go on the wire, borrowed
/// from the batch's column where it stores them.
#[derive(Clone, Debug)]
pub enum Val<'a> {
    /// int64 values: item `col` of each `stride`-long tuple of `data` (a
    /// run of a column: stride 1; one index column of a COO index list).
    I64 {
        /// The tuples.
        data: &'a [i64],
        /// The length of a tuple.
        stride: usize,
        /// The item of each tuple (less than `stride`).
        col: usize,
    },
    /// int32 values.
    I32(&'a [i32]),
    /// bool values, written as 0 and 1.
    Bool(&'a [bool]),
    /// float32 values.
    F32(&'a [f32]),
    /// float64 values (narrowed to float32 where the dialect has no
    /// double list).
    F64(&'a [f64]),
    /// Strings `.1` of a string column.
    Str(&'a StringValues, Range<usize>),
    /// int64 values computed for the record (ragged partitions).
    Owned(Vec<i64>),
}

impl Val<'_> {
    /// Calls `f` with each value of an integer list.
    #[inline]
    fn for_each_int(&self, mut f: impl FnMut(i64)) {
        match self {
            Val::I64 { data, stride, col } => {
                if *stride == 1 {
                    data.iter().for_each(|&x| f(x));
                } else if (*stride, *col) == (2, 1) {
                    // The indices of a rank-1 sparse feature's COO list:
                    // with a constant stride.
                    data.chunks_exact(2).for_each(|t| f(t[1]));
                } else {
                    data.chunks_exact(*stride)
                        .for_each(|t| f(t.get(*col).copied().unwrap_or(0)));
                }
            }
            Val::I32(v) => v.iter().for_each(|&x| f(x as i64)),
            Val::Bool(v) => v.iter().for_each(|&x| f(x as i64)),
            Val::Owned(v) => v.iter().for_each(|&x| f(x)),
            Val::F32(_) | Val::F64(_) | Val::Str(..) => {}
        }
    }

    /// Writes the values of a float list (nothing for other lists): the
    /// packed payload after its length.
    #[inline]
    fn write_values(&self, d: &Dialect, out: &mut Vec<u8>) {
        match self {
            Val::F32(v) => crate::le::append(out, v),
            Val::F64(v) if d.double.is_some() => crate::le::append(out, v),
            Val::F64(v) => {
                for &x in *v {
                    out.extend_from_slice(&(x as f32).to_le_bytes());
                }
            }
            _ => {}
        }
    }

    /// The tag of the list's field in `Feature`.
    fn tag(&self, d: &Dialect) -> u8 {
        tag(match self {
            Val::Str(..) => d.bytes,
            Val::F32(_) => d.float,
            Val::F64(_) => d.double.unwrap_or(d.float),
            Val::I32(_) | Val::Bool(_) => d.int32.unwrap_or(d.int64),
            Val::I64 { .. } | Val::Owned(_) => d.int64,
        })
    }

    /// The bytes of the list's values: the packed payload of a numeric
    /// list, the `value` fields of a bytes list.
    pub fn payload(&self, d: &Dialect) -> usize {
        match self {
            Val::F32(v) => 4 * v.len(),
            Val::F64(v) if d.double.is_some() => 8 * v.len(),
            Val::F64(v) => 4 * v.len(),
            Val::Str(s, range) => range
                .clone()
                .map(|i| field_len(s.get(i).map_or(0, <[u8]>::len)))
                .sum(),
            _ => {
                let mut n = 0;
                // Negative numbers take 10 bytes (sign-extended to 64 bits),
                // int32 ones too.
                self.for_each_int(|x| n += varint_len(x as u64));
                n
            }
        }
    }

    /// The bytes of the list message with `payload` bytes of values: an
    /// empty packed list is not written at all.
    fn list_len(&self, payload: usize) -> usize {
        match self {
            Val::Str(..) => payload,
            _ if payload == 0 => 0,
            _ => field_len(payload),
        }
    }

    /// The bytes of the `Feature` message whose values take `payload`
    /// bytes.
    pub fn feature_len(&self, payload: usize) -> usize {
        field_len(self.list_len(payload))
    }

    /// Writes the `Feature` message of these values, whose payload is
    /// `payload` bytes.
    pub fn write_feature(&self, d: &Dialect, payload: usize, out: &mut Vec<u8>) {
        put_len_field(out, self.tag(d), self.list_len(payload));
        match self {
            Val::Str(s, range) => {
                for i in range.clone() {
                    let b = s.get(i).unwrap_or_default();
                    put_len_field(out, TAG_1, b.len());
                    out.extend_from_slice(b);
                }
            }
            _ if payload == 0 => {}
            Val::F32(_) | Val::F64(_) => {
                put_len_field(out, TAG_1, payload);
                self.write_values(d, out);
            }
            _ => {
                put_len_field(out, TAG_1, payload);
                // `payload` is the exact size: write into it in place
                // rather than growing the buffer a byte at a time.
                let start = out.len();
                out.resize(start + payload, 0);
                let buf = &mut out[start..];
                let mut at = 0;
                self.for_each_int(|x| {
                    let mut v = x as u64;
                    while v >= 0x80 {
                        buf[at] = v as u8 | 0x80;
                        v >>= 7;
                        at += 1;
                    }
                    buf[at] = v as u8;
                    at += 1;
                });
            }
        }
    }
}

fn mismatch(name: &str, reason: impl Into<String>) -> TensorError {
    TensorError::InvalidSpec {
        feature: name.to_string(),
        reason: reason.into(),
    }
}

/// The refusal of float64 values in a dialect without double lists and
/// without [`Lossy::Allow`].
pub fn narrowing(d: &Dialect, name: &str) -> TensorError {
    TensorError::UnsupportedSpec {
        feature: name.to_string(),
        format: d.name,
        kind: "float64",
        reason: format!(
            "{} holds float32, not float64: writing would lose precision \
             (allow it with Lossy::Allow)",
            d.name
        ),
    }
}

/// Values `range` of a column (of feature `name`) as one record's list.
pub fn val<'a>(
    d: &Dialect,
    name: &str,
    values: &'a Values,
    range: Range<usize>,
    lossy: Lossy,
) -> Result<Val<'a>, TensorError> {
    let mut out = vals(d, name, values, std::iter::once(range), lossy)?;
    Ok(out.pop().unwrap_or(Val::Owned(Vec::new())))
}

/// [`val`] of each of `ranges`: the column's type is matched once, not
/// once a row.
fn vals<'a>(
    d: &Dialect,
    name: &str,
    values: &'a Values,
    ranges: impl ExactSizeIterator<Item = Range<usize>>,
    lossy: Lossy,
) -> Result<Vec<Val<'a>>, TensorError> {
    let past_end = |range: Range<usize>| {
        mismatch(
            name,
            format!(
                "values {range:?} are past the end of its {} values",
                values.len()
            ),
        )
    };
    let mut out = Vec::with_capacity(ranges.len());
    fn each<'a, T>(
        v: &'a [T],
        ranges: impl Iterator<Item = Range<usize>>,
        out: &mut Vec<Val<'a>>,
        make: impl Fn(&'a [T]) -> Val<'a>,
        past_end: impl Fn(Range<usize>) -> TensorError,
    ) -> Result<(), TensorError> {
        for range in ranges {
            match v.get(range.clone()) {
                Some(s) => out.push(make(s)),
                None => return Err(past_end(range)),
            }
        }
        Ok(())
    }
    match values {
        Values::Int64(v) => each(
            v,
            ranges,
            &mut out,
            |data| Val::I64 {
                data,
                stride: 1,
                col: 0,
            },
            past_end,
        )?,
        Values::Int32(v) => each(v, ranges, &mut out, Val::I32, past_end)?,
        Values::Bool(v) => each(v, ranges, &mut out, Val::Bool, past_end)?,
        Values::Float32(v) => each(v, ranges, &mut out, Val::F32, past_end)?,
        Values::Float64(v) if d.double.is_some() || lossy == Lossy::Allow => {
            each(v, ranges, &mut out, Val::F64, past_end)?
        }
        Values::Float64(_) => return Err(narrowing(d, name)),
        Values::String(s) => {
            for range in ranges {
                if range.end > s.len() {
                    return Err(past_end(range));
                }
                out.push(Val::Str(s, range));
            }
        }
    }
    Ok(out)
}

/// For each batch row, the range of entries of a row-sorted COO index list
/// (`rank` entries per value, of feature `name`) that belong to it.
pub fn sparse_rows(
    name: &str,
    indices: &[i64],
    rank: usize,
    rows: usize,
) -> Result<Vec<Range<usize>>, TensorError> {
    let rank = rank.max(1);
    let nnz = indices.len() / rank;
    // The common ranks with a constant stride.
    let ranges = match rank {
        1 => row_ranges(indices.iter().copied(), nnz, rows),
        2 => row_ranges(indices.chunks_exact(2).map(|t| t[0]), nnz, rows),
        _ => row_ranges(indices.chunks_exact(rank).map(|t| t[0]), nnz, rows),
    };
    ranges.ok_or_else(|| {
        mismatch(
            name,
            "sparse indices are not sorted by batch row or exceed the batch",
        )
    })
}

/// [`sparse_rows`] of the `nnz` entries' batch rows `ids`, in one pass;
/// `None` when they decrease or leave `0..rows`.
#[inline]
fn row_ranges(
    ids: impl Iterator<Item = i64>,
    nnz: usize,
    rows: usize,
) -> Option<Vec<Range<usize>>> {
    let mut out = Vec::with_capacity(rows);
    // `row` is the row being gathered, from entry `start` on.
    let (mut row, mut start) = (0i64, 0);
    for (i, b) in ids.enumerate() {
        if b == row {
            continue;
        }
        if b < row || b >= rows as i64 {
            return None;
        }
        out.push(start..i);
        // Rows without entries between the two.
        out.extend(std::iter::repeat_n(i..i, (b - row - 1) as usize));
        (row, start) = (b, i);
    }
    if rows == 0 {
        return (nnz == 0).then_some(out);
    }
    out.push(start..nnz);
    out.resize(rows, nnz..nnz);
    Some(out)
}

/// Checks that a ragged tensor of a `rows`-row batch describes rows that
/// records can hold: `levels` levels of row splits, the outermost over the
/// batch, each starting at 0, never decreasing and ending at the number of
/// rows of the level below (the flat values, for the innermost).
///
/// A decoder with `validate: false` may return tensors that fail this, as
/// TensorFlow does; no records describe them.
pub fn check_ragged(
    name: &str,
    t: &RaggedTensor,
    rows: usize,
    levels: usize,
) -> Result<(), TensorError> {
    let bad = |reason: String| {
        Err(TensorError::BadRagged {
            feature: name.to_string(),
            reason,
        })
    };
    let splits = &t.nested_row_splits;
    if splits.len() != levels {
        return bad(format!(
            "{} levels of row splits, the spec describes {levels}",
            splits.len()
        ));
    }
    let flat = &t.flat_values;
    if flat.values.len() != flat.shape.iter().product::<usize>() {
        return bad(format!(
            "{} flat values do not fill the shape {:?}",
            flat.values.len(),
            flat.shape
        ));
    }
    if splits[0].len() != rows + 1 {
        return bad(format!(
            "the outer row splits have {} entries for {rows} records",
            splits[0].len()
        ));
    }
    let nvals = flat.shape.first().copied().unwrap_or(0);
    for (i, level) in splits.iter().enumerate() {
        let below = splits
            .get(i + 1)
            .map_or(nvals, |l| l.len().saturating_sub(1));
        if level.first() != Some(&0) {
            return bad(format!("row splits of level {i} do not start at 0"));
        }
        if level.windows(2).any(|w| w[1] < w[0]) {
            return bad(format!("row splits of level {i} decrease"));
        }
        if level.last() != Some(&(below as i64)) {
            return bad(format!(
                "row splits of level {i} end at {}, not at the {below} rows below",
                level.last().copied().unwrap_or(0)
            ));
        }
    }
    Ok(())
}

/// Per record, the ranges of rows at each level of a ragged tensor: level
/// 0 is the records themselves; level `i + 1` is indexed by the splits of
/// level `i`. The last entry ranges over the flat values.
pub fn ragged_ranges(splits: &[Vec<i64>], record: usize) -> Vec<Range<usize>> {
    let mut ranges = Vec::with_capacity(splits.len() + 1);
    ranges.push(record..record + 1);
    for level in splits {
        let r = ranges.last().cloned().unwrap_or(0..0);
        let get = |i: usize| level.get(i).copied().unwrap_or(0).max(0) as usize;
        ranges.push(get(r.start)..get(r.end));
    }
    ranges
}

/// A batch's feature map being written: per key, in key order (the order
/// protobuf writes a map in), each row's values.
pub type Columns<'a> = Vec<(&'a str, Vec<Val<'a>>)>;

/// [`columns`] being gathered: a later column writing a key replaces an
/// earlier one's, as in a map.
type Gathering<'a> = BTreeMap<&'a str, Vec<Val<'a>>>;

/// Column `name` of `batch`'s `section`.
pub fn find<'a>(batch: &'a Batch, section: Section, name: &str) -> Result<&'a Tensor, TensorError> {
    batch
        .get_in(section, name)
        .ok_or_else(|| mismatch(name, "the batch has no such column"))
}

/// The feature map that `specs` (tf.Example form) write from `batch`'s
/// columns in `section`: per key, in key order, each row's values.
pub fn columns<'a>(
    d: &Dialect,
    batch: &'a Batch,
    section: Section,
    specs: &'a [FeatureSpec],
    lossy: Lossy,
) -> Result<Columns<'a>, TensorError> {
    let mut columns = Gathering::new();
    for s in specs {
        let tensor = find(batch, section, s.name())?;
        collect_column(d, s, tensor, batch.rows(), lossy, &mut columns)?;
    }
    Ok(columns.into_iter().collect())
}

/// Each row's values of one output column, under the keys its spec writes
/// (a later column writing a key replaces an earlier one's).
fn collect_column<'a>(
    d: &Dialect,
    spec: &'a FeatureSpec,
    tensor: &'a Tensor,
    rows: usize,
    lossy: Lossy,
    out: &mut Gathering<'a>,
) -> Result<(), TensorError> {
    let name = spec.name();
    match (spec, tensor) {
        (FeatureSpec::Dense(_), Tensor::Dense(t))
        | (FeatureSpec::FixedLenSequence(_), Tensor::Dense(t)) => {
            let row_len = t.values.len().checked_div(rows).unwrap_or(0);
            let ranges = (0..rows).map(|r| r * row_len..(r + 1) * row_len);
            out.insert(name, vals(d, name, &t.values, ranges, lossy)?);
        }
        (FeatureSpec::Varlen(_), Tensor::Sparse(s)) => {
            let ranges = sparse_rows(name, &s.indices, s.rank(), rows)?;
            out.insert(name, vals(d, name, &s.values, ranges.into_iter(), lossy)?);
        }
        (FeatureSpec::Sparse(sp), Tensor::Sparse(s)) => {
            let (Some(value_key), keys) = (&sp.value_key, sp.index_keys()) else {
                return Err(mismatch(name, "SparseFeature without value_key"));
            };
            let rank = s.rank();
            if keys.len() + 1 != rank {
                return Err(mismatch(name, "index keys do not match the tensor rank"));
            }
            let ranges = sparse_rows(name, &s.indices, rank, rows)?;
            for (k, key) in keys.iter().enumerate() {
                let ids = ranges.iter().map(|range| Val::I64 {
                    data: s
                        .indices
                        .get(range.start * rank..range.end * rank)
                        .unwrap_or_default(),
                    stride: rank,
                    col: 1 + k,
                });
                out.insert(key, ids.collect());
            }
            out.insert(
                value_key,
                vals(d, name, &s.values, ranges.into_iter(), lossy)?,
            );
        }
        (FeatureSpec::Ragged(rs), Tensor::Ragged(t)) => {
            let inner: usize = t.flat_values.shape.iter().skip(1).product();
            // Uniform partitions are dense inner dimensions or fixed
            // levels: nothing to write for them.
            let n = rs.partitions.len();
            let innermost_uniform = rs
                .partitions
                .iter()
                .rev()
                .take_while(|p| matches!(p, Partition::UniformRowLength { .. }))
                .count();
            check_ragged(name, t, rows, 1 + n - innermost_uniform)?;
            let keyed: Vec<(usize, &Partition)> = rs.partitions[..n - innermost_uniform]
                .iter()
                .enumerate()
                .filter(|(_, p)| !matches!(p, Partition::UniformRowLength { .. }))
                .map(|(i, p)| (i + 1, p))
                .collect();
            let mut values = Vec::with_capacity(rows);
            let mut partitions: Vec<Vec<Val>> = vec![Vec::with_capacity(rows); keyed.len()];
            for r in 0..rows {
                let ranges = ragged_ranges(&t.nested_row_splits, r);
                let flat = ranges.last().cloned().unwrap_or(0..0);
                values.push(val(
                    d,
                    name,
                    &t.flat_values.values,
                    flat.start * inner..flat.end * inner,
                    lossy,
                )?);
                for (&(level, p), column) in keyed.iter().zip(&mut partitions) {
                    column.push(Val::Owned(partition_values(name, t, r, &ranges, level, p)?));
                }
            }
            out.insert(rs.value_key(), values);
            for (&(_, p), column) in keyed.iter().zip(partitions) {
                if let Some(key) = p.key() {
                    out.insert(key, column);
                }
            }
        }
        (spec, t) => {
            return Err(mismatch(
                name,
                format!(
                    "a {} spec cannot be written from a {:?} tensor",
                    spec.kind(),
                    layout(t)
                ),
            ));
        }
    }
    Ok(())
}

/// The values record `r` holds for partition `p` of level `level` of a
/// ragged tensor (`ranges`: the record's rows at each level).
fn partition_values(
    name: &str,
    t: &RaggedTensor,
    r: usize,
    ranges: &[Range<usize>],
    level: usize,
    p: &Partition,
) -> Result<Vec<i64>, TensorError> {
    let rows_here = ranges[level].clone();
    let next = &t.nested_row_splits[level];
    let base = next.get(rows_here.start).copied().unwrap_or(0);
    let bounds = |i: usize| next.get(i).copied().unwrap_or(0);
    let last = rows_here.end.wrapping_sub(1);
    if matches!(p, Partition::ValueRowids { .. })
        && !rows_here.is_empty()
        && bounds(last + 1) == bounds(last)
    {
        // A record has as many rows as its largest row id + 1: an empty
        // last row cannot be written. (RecordBuf that disagree on where rows
        // end make such batches.)
        return Err(TensorError::BadRagged {
            feature: name.to_string(),
            reason: format!("record {r}: value_rowids cannot describe its empty last row"),
        });
    }
    Ok(match p {
        Partition::RowLengths { .. } => rows_here.map(|i| bounds(i + 1) - bounds(i)).collect(),
        Partition::RowSplits { .. } => std::iter::once(0)
            .chain(rows_here.map(|i| bounds(i + 1) - base))
            .collect(),
        Partition::RowLimits { .. } => rows_here.map(|i| bounds(i + 1) - base).collect(),
        Partition::RowStarts { .. } => rows_here.map(|i| bounds(i) - base).collect(),
        Partition::ValueRowids { .. } => rows_here
            .clone()
            .flat_map(|i| {
                let n = (bounds(i + 1) - bounds(i)).max(0) as usize;
                std::iter::repeat_n((i - rows_here.start) as i64, n)
            })
            .collect(),
        _ => Vec::new(),
    })
}

pub fn layout(t: &Tensor) -> &'static str {
    match t {
        Tensor::Dense(_) => "dense",
        Tensor::Sparse(_) => "sparse",
        Tensor::Ragged(_) => "ragged",
    }
}

/// The bytes of a map entry of key `key` whose value message is `value`
/// bytes (`None`: a value protobuf leaves out, an empty `FeatureList`).
pub fn entry_len(d: &Dialect, key: &str, value: Option<usize>) -> usize {
    let key = if key.is_empty() && !d.empty_key {
        0
    } else {
        field_len(key.len())
    };
    key + value.map_or(0, field_len)
}

/// Writes the start of a map entry of `entry` bytes: its tag and length,
/// and its key (the caller writes the value).
pub fn put_entry_start(d: &Dialect, out: &mut Vec<u8>, key: &str, entry: usize) {
    put_len_field(out, TAG_1, entry);
    if !key.is_empty() || d.empty_key {
        put_len_field(out, TAG_1, key.len());
        out.extend_from_slice(key.as_bytes());
    }
}

/// One row's feature map of [`Columns`] at a time: measured (each
/// feature's payload and `Feature` bytes kept), then written.
///
/// What does not change from row to row is worked out once per batch:
/// each key's bytes, and, for a column whose rows all hold as many
/// float values (dense float columns), every byte of its map entry but
/// the values.
#[derive(Debug)]
pub struct FeaturesWriter<'c, 'a> {
    dialect: &'c Dialect,
    columns: Vec<Col<'c, 'a>>,
    /// The bytes of the fixed columns' map entries, the same in every row.
    fixed: usize,
    /// Per column (fixed ones unused): the row's payload, `Feature` and
    /// map entry bytes.
    sizes: Vec<(usize, usize, usize)>,
}

/// One key of a [`FeaturesWriter`].
#[derive(Debug)]
struct Col<'c, 'a> {
    vals: &'c [Val<'a>],
    /// The key's field (tag, length, bytes); empty when it is left out.
    key: Few,
    /// A fixed column's map entry up to its values, and their payload
    /// bytes.
    fixed: Option<(Few, usize)>,
}

impl<'c, 'a> FeaturesWriter<'c, 'a> {
    /// The writer of `columns`' rows.
    pub fn new(dialect: &'c Dialect, columns: &'c [(&'a str, Vec<Val<'a>>)]) -> Self {
        let mut fixed = 0;
        let columns: Vec<Col> = columns
            .iter()
            .map(|(key, vals)| {
                let mut key_field = Vec::new();
                if !key.is_empty() || dialect.empty_key {
                    put_len_field(&mut key_field, TAG_1, key.len());
                    key_field.extend_from_slice(key.as_bytes());
                }
                let prefix = fixed_prefix(dialect, key, vals);
                if let Some((prefix, payload)) = &prefix {
                    fixed += prefix.len() + payload;
                }
                Col {
                    vals,
                    key: Few::new(key_field),
                    fixed: prefix.map(|(p, payload)| (Few::new(p), payload)),
                }
            })
            .collect();
        FeaturesWriter {
            dialect,
            sizes: vec![(0, 0, 0); columns.len()],
            columns,
            fixed,
        }
    }

    /// The bytes of row `r`'s map entries (the body of tf.Example's
    /// `Features`, or a whole OFRecord).
    pub fn measure(&mut self, r: usize) -> usize {
        let mut len = self.fixed;
        for (col, size) in self.columns.iter().zip(&mut self.sizes) {
            if col.fixed.is_some() {
                continue;
            }
            let v = &col.vals[r];
            let payload = v.payload(self.dialect);
            let feature = v.feature_len(payload);
            let entry = col.key.len + field_len(feature);
            *size = (payload, feature, entry);
            len += field_len(entry);
        }
        len
    }

    /// Writes the map entries of row `r`, which was the last measured.
    pub fn write(&self, r: usize, out: &mut Vec<u8>) {
        let d = self.dialect;
        for (col, &(payload, feature, entry)) in self.columns.iter().zip(&self.sizes) {
            let v = &col.vals[r];
            if let Some((prefix, _)) = &col.fixed {
                prefix.put(out);
                v.write_values(d, out);
                continue;
            }
            put_len_field(out, TAG_1, entry);
            col.key.put(out);
            put_len_field(out, TAG_2, feature);
            v.write_feature(d, payload, out);
        }
    }
}

/// A few bytes written in every row (a key's field, a fixed column's
/// entry up to its values): short ones are copied as one fixed-size
/// block and the excess cut off, cheaper than a `memcpy` call of a
/// length known only at run time.
#[derive(Debug)]
struct Few {
    bytes: Vec<u8>,
    /// `bytes`, zero-padded, when they fit.
    block: Option<[u8; FEW]>,
    len: usize,
}

/// The size of [`Few`]'s block.
const FEW: usize = 32;

impl Few {
    fn new(bytes: Vec<u8>) -> Self {
        let block = (bytes.len() <= FEW).then(|| {
            let mut block = [0; FEW];
            block[..bytes.len()].copy_from_slice(&bytes);
            block
        });
        Few {
            len: bytes.len(),
            bytes,
            block,
        }
    }

    #[inline]
    fn put(&self, out: &mut Vec<u8>) {
        match &self.block {
            Some(block) => {
                let end = out.len() + self.len;
                out.extend_from_slice(block);
                out.truncate(end);
            }
            None => out.extend_from_slice(&self.bytes),
        }
    }
}

/// For a column whose rows all hold the same number of float values,
/// its map entry up to the values (the same in every row) and the
/// values' bytes; `None` for any other column.
fn fixed_prefix(d: &Dialect, key: &str, vals: &[Val]) -> Option<(Vec<u8>, usize)> {
    let first = vals.first()?;
    let n = match first {
        Val::F32(v) => v.len(),
        Val::F64(v) => v.len(),
        _ => return None,
    };
    let same = vals.iter().all(|v| match (first, v) {
        (Val::F32(_), Val::F32(v)) => v.len() == n,
        (Val::F64(_), Val::F64(v)) => v.len() == n,
        _ => false,
    });
    if !same {
        return None;
    }
    // Row 0's entry, written the general way, less its values.
    let payload = first.payload(d);
    let feature = first.feature_len(payload);
    let mut entry = Vec::new();
    put_entry_start(d, &mut entry, key, entry_len(d, key, Some(feature)));
    put_len_field(&mut entry, TAG_2, feature);
    first.write_feature(d, payload, &mut entry);
    entry.truncate(entry.len() - payload);
    Some((entry, payload))
}
