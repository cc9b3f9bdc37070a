//! [`OfRecordDecoder`]: serialized OFRecords straight into batch columns.

use std::sync::Arc;

use grist_tensor::{
    Batch, BatchBuilder, ColumnBuilder, DenseBuilder, FeatureSpec, Limits, PaddedBuilder,
    RaggedBuilder, Section, SparseBuilder, StringValues, TensorError, Values,
};

use crate::error::{Error, Result};
use crate::plan::{Col, Field, Keys, Plan, RawDType, RawSpec, partition_kinds, sequence_pad};
use crate::wire::{self, FeatureRef, ListKind, Sink, WireError};
use grist_tensor::{FeatureProblem, Location};

/// Why a row failed, before it is given its location.
#[derive(Debug)]
enum Problem {
    Wire(WireError),
    Feature(FeatureProblem),
}

impl From<WireError> for Problem {
    fn from(e: WireError) -> Self {
        Problem::Wire(e)
    }
}

impl From<FeatureProblem> for Problem {
    fn from(p: FeatureProblem) -> Self {
        Problem::Feature(p)
    }
}

/// A recycled batch; clones of a decoder do not share (or copy) it.
#[derive(Debug, Default)]
struct Spare(Option<Batch>);

impl Clone for Spare {
    fn clone(&self) -> Self {
        Spare(None)
    }
}

/// Reusable buffers: no allocation per record once they have grown.
#[derive(Clone, Debug, Default)]
struct Scratch {
    i8s: Vec<i8>,
    i32s: Vec<i32>,
    i64s: Vec<i64>,
    f32s: Vec<f32>,
    f64s: Vec<f64>,
    first: Vec<u8>,
    /// The index lists of a `SparseFeature` row.
    ids: Vec<Vec<i64>>,
    order: Vec<usize>,
    moved: Option<Values>,
}

/// Decodes serialized OFRecords into batches: grist feature specs with
/// tf.Example-like semantics over OFRecord's typed lists, and OneFlow's
/// raw and bytes decoders with OneFlow's semantics (see [`Field`]).
///
/// Each feature spec reads the list of its dtype: `int32` (and `bool`,
/// non-zero is true) an `int32_list`, `int64` an `int64_list`, `float32` a
/// `float_list`, `float64` a `double_list`, `string` a `bytes_list`;
/// another list is [`FeatureProblem::TypeMismatch`]. Sparse index lists and
/// ragged partitions may be int32 or int64 lists. A missing feature (or a
/// Feature with no list) takes a dense spec's default, is an error without
/// one, and is empty for the other kinds. OneFlow's decoders read any
/// list kind, and report a missing feature or one with no list as errors.
///
/// The decoder reads the protobuf wire format of each record directly
/// into the batch columns (no message objects), and rejects every record
/// protobuf would not parse, as OneFlow does. Built once, called per
/// record; clone it to decode on several threads.
///
/// ```
/// use grist_ofrecord::{OfRecordDecoder, RawDType, RawSpec, RecordBuilder};
/// use grist_tensor::{DType, FeatureSpec, Values};
///
/// let records = [
///     RecordBuilder::new().with_int32s("label", [3]).with_bytes("img", [[0u8, 1, 0xff]]).encode(),
///     RecordBuilder::new().with_int32s("label", [4]).with_bytes("img", [[9u8]]).encode(),
/// ];
/// let mut decoder = OfRecordDecoder::with_fields(&[
///     FeatureSpec::dense("label", DType::Int32, []).into(),
///     RawSpec::new("img", [3], RawDType::Float32).into(),
/// ])?;
/// let batch = decoder.decode_batch(&"mem".into(), 0, records.iter().map(|r| &r[..]))?;
/// let img = batch.get("img").unwrap().as_dense().unwrap();
/// assert_eq!(img.values, Values::Float32(vec![0.0, 1.0, -1.0, 9.0, 0.0, 0.0]));
/// # Ok::<(), grist_ofrecord::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct OfRecordDecoder {
    plan: Arc<Plan>,
    limits: Limits,
    generation: u32,
    /// Per wanted key: the generation (record) it was last seen in and
    /// where its value lies.
    slots: Vec<(u32, FeatureRef)>,
    /// The slot (+1; 0 = not wanted) of the n-th entry of the previous
    /// record: writers emit keys in the same order record after record,
    /// so one comparison usually finds a key.
    predicted: Vec<u32>,
    scratch: Scratch,
    spare: Spare,
    /// The location of the last record decoded by number
    /// ([`decode_numbered`](Self::decode_numbered)).
    at: Option<Location>,
}

impl OfRecordDecoder {
    /// A decoder of `specs`.
    pub fn new(specs: &[FeatureSpec]) -> Result<Self> {
        let fields: Vec<Field> = specs.iter().cloned().map(Field::Spec).collect();
        Self::with_fields(&fields)
    }

    /// A decoder of any [`Field`]s: feature specs and OneFlow decoders.
    pub fn with_fields(fields: &[Field]) -> Result<Self> {
        let plan = Plan::new(fields)?;
        let ids = plan
            .columns
            .iter()
            .map(|c| match c {
                Col::Sparse { index, .. } => index.len(),
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        Ok(OfRecordDecoder {
            slots: vec![(0, FeatureRef::default()); plan.keys.len()],
            plan: Arc::new(plan),
            limits: Limits::default(),
            generation: 0,
            at: None,
            predicted: Vec::new(),
            scratch: Scratch {
                ids: vec![Vec::new(); ids],
                ..Scratch::default()
            },
            spare: Spare(None),
        })
    }

    /// The limits on allocations sized by input. By default,
    /// [`Limits::default`].
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The fields, in output order.
    pub fn fields(&self) -> &[Field] {
        &self.plan.fields
    }

    /// The feature specs of the output columns, in order (see
    /// [`Field::spec`]).
    pub fn specs(&self) -> &[FeatureSpec] {
        &self.plan.specs
    }

    /// An empty batch builder for this decoder's columns, with room for
    /// `rows` rows in its dense columns.
    pub fn new_batch(&self, rows: usize) -> BatchBuilder {
        let mut b = BatchBuilder::new();
        for spec in &self.plan.specs {
            let dtype = spec.dtype();
            let shape = |s: &[i64]| s.iter().map(|&d| d.max(0) as usize).collect::<Vec<_>>();
            let builder = match spec {
                FeatureSpec::Dense(d) => {
                    ColumnBuilder::Dense(DenseBuilder::new(dtype, shape(&d.shape)))
                }
                FeatureSpec::Varlen(_) => ColumnBuilder::Sparse(SparseBuilder::new(dtype, vec![0])),
                FeatureSpec::Sparse(s) => {
                    ColumnBuilder::Sparse(SparseBuilder::new(dtype, s.dense_shape()))
                }
                FeatureSpec::Ragged(r) => {
                    let mut rb = RaggedBuilder::new(
                        dtype,
                        &partition_kinds(spec),
                        r.row_splits_dtype,
                        &self.limits,
                    );
                    rb.validate = r.validate;
                    ColumnBuilder::Ragged(rb)
                }
                FeatureSpec::FixedLenSequence(f) => {
                    // Checked when the plan was built.
                    let pad = sequence_pad(spec).unwrap_or_else(|_| Values::new(dtype));
                    ColumnBuilder::Padded(
                        PaddedBuilder::new(shape(&f.shape), pad).with_limits(self.limits),
                    )
                }
                _ => unreachable!("the plan refuses {} specs", spec.kind()),
            };
            b.push_column(spec.name(), Section::Features, builder);
        }
        b.reserve_rows(rows);
        b
    }

    /// Gives the memory of a finished batch of this decoder back, for the
    /// next [`recycled_batch`](Self::recycled_batch) (or
    /// [`decode_batch`](Self::decode_batch)) to reuse.
    pub fn recycle(&mut self, batch: Batch) {
        self.spare = Spare(Some(batch));
    }

    /// Like [`new_batch`](Self::new_batch), reusing the memory of the last
    /// batch given to [`recycle`](Self::recycle), if any.
    pub fn recycled_batch(&mut self, rows: usize) -> BatchBuilder {
        let mut b = self.new_batch(0);
        if let Some(spare) = self.spare.0.take() {
            b.recycle(spare);
        }
        b.reserve_rows(rows);
        b
    }

    /// Decodes `records` (record `first_record` on of `file`) into one
    /// batch.
    pub fn decode_batch<'a>(
        &mut self,
        file: &Arc<str>,
        first_record: u64,
        records: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Batch> {
        let records = records.into_iter();
        let mut out = self.recycled_batch(records.size_hint().0);
        let mut at = Location::record(file.clone(), first_record);
        for (i, r) in records.enumerate() {
            at.record = Some(first_record.saturating_add(i as u64));
            self.decode(r, &at, &mut out)?;
        }
        self.finish(&mut out, file, first_record)
    }

    /// Finishes a batch built by [`decode`](Self::decode), reporting ragged
    /// partitions that cannot be applied, or padding past the limits.
    pub fn finish(
        &mut self,
        out: &mut BatchBuilder,
        file: &Arc<str>,
        first_record: u64,
    ) -> Result<Batch> {
        let at = Location::record(file.clone(), first_record);
        out.finish().map_err(|e| match e {
            TensorError::BadRagged { feature, reason } => Error::Feature {
                at: at.with_feature(feature).into(),
                problem: FeatureProblem::BadPartition { key: None, reason },
            },
            other @ TensorError::LimitExceeded { .. } => Error::BatchTooLarge {
                at: at.into(),
                source: other,
            },
            other => Error::Spec(other),
        })
    }

    /// Decodes one serialized OFRecord (at `at`, for errors) and appends it
    /// as a row to `out`, a builder from [`new_batch`](Self::new_batch). On
    /// error, `out` keeps the rows before this one.
    pub fn decode(&mut self, record: &[u8], at: &Location, out: &mut BatchBuilder) -> Result<()> {
        out.begin_row();
        match self.decode_row(record, out) {
            Ok(()) => {
                out.end_row();
                Ok(())
            }
            Err((column, problem)) => {
                out.discard_row();
                Err(match problem {
                    Problem::Wire(e) => Error::Malformed {
                        at: at.clone().into(),
                        reason: e.reason,
                        offset: e.offset,
                    },
                    Problem::Feature(problem) => Error::Feature {
                        at: at
                            .clone()
                            .with_feature(self.plan.fields[column].name())
                            .into(),
                        problem,
                    },
                })
            }
        }
    }

    /// [`decode`](Self::decode) of record `number` of `file` (number `index`
    /// in a dataset of several files, if given), its [`Location`] built
    /// once and reused from record to record: decoding threads then share
    /// no reference count per record (the file name's), and only an error
    /// takes a copy.
    pub fn decode_numbered(
        &mut self,
        record: &[u8],
        file: &Arc<str>,
        number: u64,
        index: Option<u64>,
        out: &mut BatchBuilder,
    ) -> Result<()> {
        let at = Location::numbered(&mut self.at, file, number, index);
        let result = self.decode(record, &at, out);
        self.at = Some(at);
        result
    }

    fn decode_row(&mut self, rec: &[u8], out: &mut BatchBuilder) -> Result<(), (usize, Problem)> {
        self.scan(rec).map_err(|e| (0, Problem::Wire(e)))?;
        let row = Row {
            rec,
            generation: self.generation,
            slots: &self.slots,
            index: out.next_row() as i64,
        };
        for (c, (col, builder)) in self.plan.columns.iter().zip(out.columns_mut()).enumerate() {
            if let Err(p) = fill(col, &mut builder.builder, &row, &mut self.scratch) {
                // A record protobuf cannot parse is reported as such, also
                // when a feature error came first.
                if let Some(e) = self.slots.iter().find_map(|(seen, f)| {
                    (*seen == self.generation)
                        .then(|| wire::validate(rec, f).err())
                        .flatten()
                }) {
                    return Err((c, Problem::Wire(e)));
                }
                return Err((c, p));
            }
        }
        Ok(())
    }

    /// Finds where each wanted feature lies, checking the rest.
    fn scan(&mut self, rec: &[u8]) -> Result<(), WireError> {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            for s in &mut self.slots {
                s.0 = 0;
            }
            self.generation = 1;
        }
        let generation = self.generation;
        let keys = &self.plan.keys;
        let (slots, predicted) = (&mut self.slots, &mut self.predicted);
        let mut entry = 0;
        wire::scan(rec, |key, feature| {
            match predict(keys, predicted, entry, key) {
                Some(slot) => {
                    let (seen, old) = &mut slots[slot as usize];
                    if *seen == generation {
                        // A later entry replaces this one, which must
                        // still parse.
                        wire::validate(rec, old)?;
                    }
                    *seen = generation;
                    *old = feature;
                }
                None => wire::validate(rec, &feature)?,
            }
            entry += 1;
            Ok(())
        })
    }
}

/// The slot of `key`, the `entry`-th key of the record.
#[inline]
fn predict(keys: &Keys, predicted: &mut Vec<u32>, entry: usize, key: &[u8]) -> Option<u32> {
    if let Some(&p) = predicted.get(entry) {
        if p != 0 && same_key(&keys.names[p as usize - 1], key) {
            return Some(p - 1);
        }
    }
    let slot = keys.lookup(key);
    let p = slot.map_or(0, |s| s + 1);
    if let Some(e) = predicted.get_mut(entry) {
        *e = p;
    } else if entry == predicted.len() && entry < 1 << 16 {
        predicted.push(p);
    }
    slot
}

/// Whether two feature names are equal; names of up to 16 bytes (most)
/// compare as two overlapping words instead of a `memcmp` call.
#[inline(always)]
fn same_key(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let word = |x: &[u8], at: usize| u64::from_le_bytes(x[at..at + 8].try_into().unwrap_or([0; 8]));
    match a.len() {
        0..=7 => a.iter().zip(b).all(|(x, y)| x == y),
        8..=16 => {
            let last = a.len() - 8;
            word(a, 0) == word(b, 0) && word(a, last) == word(b, last)
        }
        _ => a == b,
    }
}

/// The record being decoded.
struct Row<'a> {
    rec: &'a [u8],
    generation: u32,
    slots: &'a [(u32, FeatureRef)],
    /// The row's number in the batch.
    index: i64,
}

impl Row<'_> {
    /// The feature in slot `slot`, if the record has it.
    #[inline]
    fn get(&self, slot: u32) -> Option<FeatureRef> {
        let (seen, f) = self.slots[slot as usize];
        (seen == self.generation).then_some(f)
    }

    /// The feature in slot `slot` if it has a list, which must be `kind`.
    #[inline]
    fn typed(&self, slot: u32, kind: ListKind) -> Result<Option<FeatureRef>, FeatureProblem> {
        match self.get(slot) {
            Some(f) => match f.kind {
                None => Ok(None),
                Some(k) if k == kind => Ok(Some(f)),
                Some(k) => Err(FeatureProblem::TypeMismatch {
                    expected: kind.name(),
                    actual: k.name(),
                }),
            },
            None => Ok(None),
        }
    }

    /// Appends the values of an int32 or int64 list in slot `slot`.
    fn ints(&self, slot: u32, out: &mut Vec<i64>) -> Result<usize, Problem> {
        let Some(f) = self.get(slot) else {
            return Ok(0);
        };
        Ok(match f.kind {
            None => 0,
            Some(ListKind::Int64) => wire::read_values(self.rec, &f, out)?,
            Some(ListKind::Int32) => wire::read_values(self.rec, &f, &mut Int32Wide(out))?,
            Some(k) => {
                return Err(FeatureProblem::TypeMismatch {
                    expected: ListKind::Int64.name(),
                    actual: k.name(),
                }
                .into());
            }
        })
    }
}

/// Int32 values widened to int64 (after keeping the low 32 bits, as
/// protobuf reads an int32).
struct Int32Wide<'a>(&'a mut Vec<i64>);

impl Sink for Int32Wide<'_> {
    #[inline(always)]
    fn int(&mut self, v: u64) {
        self.0.push(v as i32 as i64);
    }
    fn reserve_ints(&mut self, n: usize) {
        self.0.reserve(n);
    }
}

/// Appends the values of `f` (whose kind matches `values`) to `values`.
#[inline]
fn append(rec: &[u8], f: &FeatureRef, values: &mut Values) -> Result<usize, WireError> {
    match values {
        Values::Int32(v) => wire::read_values(rec, f, v),
        Values::Int64(v) => wire::read_values(rec, f, v),
        Values::Float32(v) => wire::read_values(rec, f, v),
        Values::Float64(v) => wire::read_values(rec, f, v),
        Values::String(v) => wire::read_values(rec, f, v),
        Values::Bool(v) => wire::read_values(rec, f, v),
        // The plan refuses dtypes without an OFRecord list.
        _ => Err(WireError {
            reason: "values of a dtype no OFRecord list holds",
            offset: 0,
        }),
    }
}

/// Counts a bytes list's values, copying the first.
struct FirstBytes<'a, S> {
    count: usize,
    out: &'a mut S,
}

impl Sink for FirstBytes<'_, Vec<u8>> {
    fn bytes(&mut self, v: &[u8]) {
        if self.count == 0 {
            self.out.extend_from_slice(v);
        }
        self.count += 1;
    }
}

impl Sink for FirstBytes<'_, StringValues> {
    fn bytes(&mut self, v: &[u8]) {
        if self.count == 0 {
            self.out.push(v);
        }
        self.count += 1;
    }
}

/// Fills one column with the current row.
#[inline]
fn fill(
    col: &Col,
    builder: &mut ColumnBuilder,
    row: &Row<'_>,
    scratch: &mut Scratch,
) -> Result<(), Problem> {
    let rec = row.rec;
    match (col, builder) {
        (
            Col::Dense {
                slot,
                kind,
                row_len,
                default,
            },
            ColumnBuilder::Dense(d),
        ) => {
            match row.typed(*slot, *kind)? {
                Some(f) => {
                    let n = append(rec, &f, &mut d.values)?;
                    if n != *row_len {
                        return Err(FeatureProblem::WrongCount {
                            dim: None,
                            expected: *row_len,
                            actual: n,
                        }
                        .into());
                    }
                }
                None => match default {
                    Some(v) => d.values.extend_from(v),
                    None => return Err(FeatureProblem::Missing.into()),
                },
            }
            d.end_row();
        }
        (Col::Varlen { slot, kind }, ColumnBuilder::Sparse(s)) => {
            if let Some(f) = row.typed(*slot, *kind)? {
                let n = append(rec, &f, &mut s.values)?;
                s.indices.reserve(2 * n);
                for j in 0..n as i64 {
                    s.indices.extend([row.index, j]);
                }
                s.shape[0] = s.shape[0].max(n as i64);
            }
        }
        (
            Col::Sparse {
                index,
                value,
                kind,
                sizes,
                sorted,
            },
            ColumnBuilder::Sparse(s),
        ) => {
            let start = s.values.len();
            let nnz = match row.typed(*value, *kind)? {
                Some(f) => append(rec, &f, &mut s.values)?,
                None => 0,
            };
            if let ([key], [size]) = (index.as_slice(), sizes.as_slice()) {
                return sparse_1d(row, *key, *size, nnz, *sorted, start, s, scratch);
            }
            for ((&key, ids), &size) in index.iter().zip(&mut scratch.ids).zip(sizes) {
                ids.clear();
                row.ints(key, ids)?;
                if ids.len() != nnz {
                    return Err(FeatureProblem::IndexCountMismatch {
                        dim: None,
                        indices: ids.len(),
                        values: nnz,
                    }
                    .into());
                }
                // One unsigned comparison also rejects negative indices.
                if let Some(&bad) = ids.iter().find(|&&i| i as u64 >= size as u64) {
                    return Err(FeatureProblem::IndexOutOfRange {
                        dim: None,
                        index: bad,
                        size,
                    }
                    .into());
                }
            }
            let ids = &scratch.ids[..index.len()];
            let order = (&mut scratch.order, &mut scratch.moved);
            sparse_indices(row.index, ids, nnz, *sorted, start, s, order);
        }
        (
            Col::Ragged {
                value,
                kind,
                partitions,
            },
            ColumnBuilder::Ragged(r),
        ) => {
            if let Some(f) = row.typed(*value, *kind)? {
                append(rec, &f, &mut r.values)?;
            }
            for (p, key) in r.partitions.iter_mut().zip(partitions) {
                if let Some(key) = key {
                    row.ints(*key, &mut p.values)?;
                }
            }
            r.end_row();
        }
        (
            Col::Sequence {
                slot,
                kind,
                item_len,
            },
            ColumnBuilder::Padded(p),
        ) => {
            let n = match row.typed(*slot, *kind)? {
                Some(f) => append(rec, &f, &mut p.values)?,
                None => 0,
            };
            if (*item_len == 0 && n != 0) || (*item_len != 0 && n % item_len != 0) {
                return Err(FeatureProblem::NotMultiple {
                    item: *item_len,
                    actual: n,
                }
                .into());
            }
            p.steps.push(n.checked_div(*item_len).unwrap_or(0));
        }
        (
            Col::Raw {
                slot,
                spec,
                row_len,
                varying,
            },
            builder,
        ) => {
            let values = match builder {
                ColumnBuilder::Dense(d) => &mut d.values,
                ColumnBuilder::Ragged(r) => &mut r.values,
                _ => unreachable!("raw columns are dense or ragged"),
            };
            raw(row, *slot, spec, *row_len, *varying, values, scratch)?;
            match builder {
                ColumnBuilder::Dense(d) => d.end_row(),
                ColumnBuilder::Ragged(r) => r.end_row(),
                _ => {}
            }
        }
        (Col::Bytes { slot }, ColumnBuilder::Dense(d)) => {
            let f = row.get(*slot).ok_or(FeatureProblem::Missing)?;
            match f.kind {
                Some(ListKind::Bytes) => {}
                Some(k) => return Err(FeatureProblem::NotBytesList { actual: k.name() }.into()),
                None => return Err(FeatureProblem::NoKind.into()),
            }
            let Values::String(out) = &mut d.values else {
                unreachable!("bytes columns hold strings");
            };
            let mut first = FirstBytes { count: 0, out };
            wire::read_values(rec, &f, &mut first)?;
            if first.count != 1 {
                return Err(FeatureProblem::BytesValueCount {
                    actual: first.count,
                }
                .into());
            }
            d.end_row();
        }
        _ => unreachable!("plans and builders are made from the same specs"),
    }
    Ok(())
}

/// The COO indices of a one-dimensional `SparseFeature` row written as
/// they are read, (row, index) pairs, checking order and bounds on the way.
struct Coo<'a> {
    out: &'a mut Vec<i64>,
    row: i64,
    size: i64,
    int32: bool,
    prev: i64,
    sorted: bool,
    bad: Option<i64>,
}

impl Sink for Coo<'_> {
    #[inline(always)]
    fn int(&mut self, v: u64) {
        let i = if self.int32 {
            v as i32 as i64
        } else {
            v as i64
        };
        self.sorted &= i >= self.prev;
        self.prev = i;
        // One unsigned comparison also catches negative indices.
        if i as u64 >= self.size as u64 && self.bad.is_none() {
            self.bad = Some(i);
        }
        self.out.extend([self.row, i]);
    }
    fn reserve_ints(&mut self, n: usize) {
        self.out.reserve(2 * n);
    }
}

/// The indices of a one-dimensional `SparseFeature` row (its `nnz` values,
/// from `start` on, are in place), straight into the COO list; a row that
/// is not sorted is sorted afterwards.
#[allow(clippy::too_many_arguments)]
fn sparse_1d(
    row: &Row<'_>,
    key: u32,
    size: i64,
    nnz: usize,
    sorted: bool,
    start: usize,
    s: &mut SparseBuilder,
    scratch: &mut Scratch,
) -> Result<(), Problem> {
    let before = s.indices.len();
    let mut coo = Coo {
        out: &mut s.indices,
        row: row.index,
        size,
        int32: false,
        prev: i64::MIN,
        sorted: true,
        bad: None,
    };
    let n = match row.get(key) {
        None => 0,
        Some(f) => match f.kind {
            None => 0,
            Some(ListKind::Int64) => wire::read_values(row.rec, &f, &mut coo)?,
            Some(ListKind::Int32) => {
                coo.int32 = true;
                wire::read_values(row.rec, &f, &mut coo)?
            }
            Some(k) => {
                return Err(FeatureProblem::TypeMismatch {
                    expected: ListKind::Int64.name(),
                    actual: k.name(),
                }
                .into());
            }
        },
    };
    let (in_order, bad) = (coo.sorted, coo.bad);
    if n != nnz {
        return Err(FeatureProblem::IndexCountMismatch {
            dim: None,
            indices: n,
            values: nnz,
        }
        .into());
    }
    if let Some(index) = bad {
        return Err(FeatureProblem::IndexOutOfRange {
            dim: None,
            index,
            size,
        }
        .into());
    }
    if !(in_order || sorted) {
        let ids = &mut scratch.ids[0];
        ids.clear();
        ids.extend(s.indices[before..].iter().skip(1).step_by(2));
        s.indices.truncate(before);
        let order = (&mut scratch.order, &mut scratch.moved);
        sparse_indices(row.index, &scratch.ids[..1], nnz, false, start, s, order);
    }
    Ok(())
}

/// Writes the COO indices of a checked `SparseFeature` row (values from
/// `start` on), sorting the row's entries by index unless they are sorted.
fn sparse_indices(
    row: i64,
    ids: &[Vec<i64>],
    nnz: usize,
    sorted: bool,
    start: usize,
    s: &mut SparseBuilder,
    (order, moved): (&mut Vec<usize>, &mut Option<Values>),
) {
    let key = |i: usize| ids.iter().map(move |id| id[i]);
    let in_order = sorted || (1..nnz).all(|i| key(i - 1).le(key(i)));
    s.indices.reserve(nnz * (ids.len() + 1));
    if in_order {
        for i in 0..nnz {
            s.indices.push(row);
            s.indices.extend(key(i));
        }
        return;
    }
    order.clear();
    order.extend(0..nnz);
    order.sort_by(|&a, &b| key(a).cmp(key(b)));
    for &i in order.iter() {
        s.indices.push(row);
        s.indices.extend(key(i));
    }
    // Move the row's values into the same order.
    let moved = match moved {
        Some(m) if m.dtype() == s.values.dtype() => m,
        slot => slot.insert(Values::new(s.values.dtype())),
    };
    moved.clear();
    moved.extend_from_range(&s.values, start..s.values.len());
    s.values.truncate(start);
    for &i in order.iter() {
        s.values.extend_from_range(moved, i..i + 1);
    }
}

/// A value OneFlow's raw decoder converts with `static_cast`.
trait RawValue: Copy + std::fmt::Display {
    /// The integer of `dtype` the cast gives; `None` where the cast is
    /// undefined (floats out of range, NaN).
    fn to_int(self, dtype: RawDType) -> Option<i64>;
    fn to_f32(self) -> f32;
    fn to_f64(self) -> f64;
}

/// Integers wrap to the narrower type, as C++ conversions do.
fn wrap(v: i64, dtype: RawDType) -> i64 {
    match dtype {
        RawDType::Int8 => v as i8 as i64,
        RawDType::Uint8 => v as u8 as i64,
        RawDType::Int32 => v as i32 as i64,
        _ => v,
    }
}

/// A float truncated toward zero, if the result fits `dtype`.
fn float_to_int(v: f64, dtype: RawDType) -> Option<i64> {
    let t = v.trunc();
    let fits = match dtype {
        RawDType::Int8 => (-128.0..=127.0).contains(&t),
        RawDType::Uint8 => (0.0..=255.0).contains(&t),
        RawDType::Int32 => (-2147483648.0..=2147483647.0).contains(&t),
        _ => (-9223372036854775808.0..9223372036854775808.0).contains(&t),
    };
    fits.then_some(t as i64)
}

macro_rules! raw_int {
    ($t:ty) => {
        impl RawValue for $t {
            fn to_int(self, dtype: RawDType) -> Option<i64> {
                Some(wrap(self as i64, dtype))
            }
            fn to_f32(self) -> f32 {
                self as f32
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}

raw_int!(i8);
raw_int!(i32);
raw_int!(i64);

macro_rules! raw_float {
    ($t:ty) => {
        impl RawValue for $t {
            fn to_int(self, dtype: RawDType) -> Option<i64> {
                float_to_int(self as f64, dtype)
            }
            fn to_f32(self) -> f32 {
                self as f32
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}

raw_float!(f32);
raw_float!(f64);

/// Appends `src` converted to `dtype`.
fn push_raw<T: RawValue>(
    src: &[T],
    dtype: RawDType,
    out: &mut Values,
) -> Result<(), FeatureProblem> {
    let int = |x: T| {
        x.to_int(dtype)
            .ok_or_else(|| FeatureProblem::Unrepresentable {
                value: x.to_string(),
                dtype: dtype.name(),
            })
    };
    match out {
        Values::Int32(o) => {
            for &x in src {
                o.push(int(x)? as i32);
            }
        }
        Values::Int64(o) => {
            for &x in src {
                o.push(int(x)?);
            }
        }
        Values::Float32(o) => o.extend(src.iter().map(|x| x.to_f32())),
        Values::Float64(o) => o.extend(src.iter().map(|x| x.to_f64())),
        _ => unreachable!("raw outputs are numeric"),
    }
    Ok(())
}

fn zero_fill(out: &mut Values, n: usize) {
    match out {
        Values::Int32(o) => o.resize(o.len() + n, 0),
        Values::Int64(o) => o.resize(o.len() + n, 0),
        Values::Float32(o) => o.resize(o.len() + n, 0.0),
        Values::Float64(o) => o.resize(o.len() + n, 0.0),
        _ => unreachable!("raw outputs are numeric"),
    }
}

/// One row of OneFlow's raw decoder.
fn raw(
    row: &Row<'_>,
    slot: u32,
    spec: &RawSpec,
    n: usize,
    varying: Option<usize>,
    out: &mut Values,
    scratch: &mut Scratch,
) -> Result<(), Problem> {
    let f = row.get(slot).ok_or(FeatureProblem::Missing)?;
    let Some(kind) = f.kind else {
        return Err(FeatureProblem::NoKind.into());
    };
    let rec = row.rec;
    let dtype = spec.dtype;
    match kind {
        ListKind::Bytes => {
            scratch.first.clear();
            let mut first = FirstBytes {
                count: 0,
                out: &mut scratch.first,
            };
            wire::read_values(rec, &f, &mut first)?;
            if first.count != 1 {
                return Err(FeatureProblem::BytesValueCount {
                    actual: first.count,
                }
                .into());
            }
            // The first min(n, len) bytes as int8; truncate and varying
            // length do not apply (OneFlow leaves the rest unwritten: it
            // is zero here, and absent from a varying-length row).
            let m = n.min(scratch.first.len());
            scratch.i8s.clear();
            scratch
                .i8s
                .extend(scratch.first[..m].iter().map(|&b| b as i8));
            match varying {
                None => {
                    push_raw(&scratch.i8s, dtype, out)?;
                    zero_fill(out, n - m);
                }
                Some(inner) if m % inner != 0 => {
                    return Err(FeatureProblem::NotMultiple {
                        item: inner,
                        actual: m,
                    }
                    .into());
                }
                Some(_) => push_raw(&scratch.i8s, dtype, out)?,
            }
            Ok(())
        }
        ListKind::Float => {
            scratch.f32s.clear();
            wire::read_values(rec, &f, &mut scratch.f32s)?;
            raw_list(&scratch.f32s, spec, n, varying, out)
        }
        ListKind::Double => {
            scratch.f64s.clear();
            wire::read_values(rec, &f, &mut scratch.f64s)?;
            raw_list(&scratch.f64s, spec, n, varying, out)
        }
        ListKind::Int32 => {
            scratch.i32s.clear();
            wire::read_values(rec, &f, &mut scratch.i32s)?;
            raw_list(&scratch.i32s, spec, n, varying, out)
        }
        ListKind::Int64 => {
            scratch.i64s.clear();
            wire::read_values(rec, &f, &mut scratch.i64s)?;
            raw_list(&scratch.i64s, spec, n, varying, out)
        }
    }
}

/// A numeric list through the raw decoder's length rules.
fn raw_list<T: RawValue>(
    src: &[T],
    spec: &RawSpec,
    n: usize,
    varying: Option<usize>,
    out: &mut Values,
) -> Result<(), Problem> {
    let size = src.len();
    if spec.truncate {
        let m = size.min(n);
        push_raw(&src[..m], spec.dtype, out)?;
        zero_fill(out, n - m);
    } else if let Some(inner) = varying {
        if size > n {
            return Err(FeatureProblem::Overrun {
                max: n,
                actual: size,
            }
            .into());
        }
        if size % inner != 0 {
            return Err(FeatureProblem::NotMultiple {
                item: inner,
                actual: size,
            }
            .into());
        }
        push_raw(src, spec.dtype, out)?;
    } else {
        if size != n {
            return Err(FeatureProblem::WrongCount {
                dim: None,
                expected: n,
                actual: size,
            }
            .into());
        }
        push_raw(src, spec.dtype, out)?;
    }
    Ok(())
}
