//! The tf.Example / tf.SequenceExample decoder: reads the protobuf wire
//! format of each record straight into the batch columns.

use std::sync::Arc;

use grist_tensor::{
    Batch, BatchBuilder, ColumnBuilder, DType, DenseBuilder, FeatureSpec, Limits, PaddedBuilder,
    RaggedBuilder, Section, SparseBuilder, SpecFile, Values,
};

use crate::error::{Error, Result};
use crate::plan::{ColumnPlan, KeyTable, Plan, Role, SequencePlan};
use crate::wire::{self, Cursor, FeatureRef, Kind, LEN, Span, WireError};
use grist_tensor::{FeatureProblem, Location};

/// The hot path's result: the error boxed, so results stay small.
type Hot<T> = std::result::Result<T, Box<Error>>;

/// Where each wanted key was found in the current record.
#[derive(Clone, Debug, Default)]
struct Found {
    /// Per key slot: the generation it was seen in, the span of its value
    /// message and, for `Features` maps, the value parsed as a Feature.
    slots: Vec<(u32, Span, FeatureRef)>,
    predictor: Predictor,
}

/// Finds the slot of each map key, guessing first that keys come in the
/// same order as in the previous record.
#[derive(Clone, Debug, Default)]
struct Predictor {
    /// The slot (+1; 0 = not wanted) of the n-th map entry of the previous
    /// record: writers emit keys in the same order record after record, so
    /// a key is usually confirmed by one comparison instead of a hash.
    predicted: Vec<u32>,
    /// The map entries seen so far in the current record.
    entries: usize,
}

impl Found {
    fn new(n: usize) -> Self {
        Found {
            slots: vec![(0, Span::default(), FeatureRef::default()); n],
            predictor: Predictor::default(),
        }
    }
}

impl Predictor {
    /// The slot of `key`, the `entries`-th key of the record (inlined into
    /// the entry loop: called, it cost 8% of a prod19 parse).
    #[inline(always)]
    fn slot_of(&mut self, keys: &KeyTable, key: &[u8]) -> Option<u32> {
        let i = self.entries;
        self.entries += 1;
        if let Some(&p) = self.predicted.get(i) {
            if p != 0 && keys.is(p - 1, key) {
                return Some(p - 1);
            }
        }
        let slot = keys.lookup(key);
        let p = slot.map_or(0, |s| s + 1);
        if let Some(entry) = self.predicted.get_mut(i) {
            *entry = p;
        } else if self.predicted.len() < 1 << 16 {
            self.predicted.push(p);
        }
        slot
    }
}

impl Found {
    #[inline]
    fn get(&self, slot: u32, generation: u32) -> Option<Span> {
        let (g, span, _) = self.slots[slot as usize];
        (g == generation).then_some(span)
    }

    #[inline]
    fn feature(&self, slot: u32, generation: u32) -> Option<FeatureRef> {
        let (g, _, f) = self.slots[slot as usize];
        (g == generation).then_some(f)
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

/// Reusable per-decoder buffers (no allocation per record).
#[derive(Clone, Debug, Default)]
struct Scratch {
    ids: Vec<Vec<i64>>,
    order: Vec<usize>,
    /// A copy of the values being reordered (unsorted sparse rows).
    tail: Option<Values>,
    /// One-pass decoding: per column, the index lists of a SparseFeature
    /// and where the row's values start.
    sparse_ids: Vec<Vec<Vec<i64>>>,
    sparse_start: Vec<usize>,
}

/// Decodes serialized `tf.train.Example` (or `tf.train.SequenceExample`)
/// records into batches with the semantics of `tf.io.parse_example` (or
/// `tf.io.parse_sequence_example`).
///
/// Built once from the feature specs (rejecting, by feature name, what
/// TensorFlow would reject), then called per record; clone it to decode
/// on several threads.
#[derive(Clone, Debug)]
pub struct ExampleDecoder {
    plan: Arc<Plan>,
    limits: Limits,
    generation: u32,
    found: Found,
    found_lists: Found,
    scratch: Scratch,
    /// Per column: values (and index entries) per row seen in the last
    /// finished batch, to pre-size the next batch's variable-length
    /// columns.
    per_row: Vec<(f64, f64)>,
    /// A finished batch whose memory the next batch reuses.
    spare: Spare,
    /// The location of the last record decoded by number
    /// ([`decode_numbered`](Self::decode_numbered)).
    at: Option<Location>,
}

impl ExampleDecoder {
    /// A decoder of `tf.train.Example` records for `specs`
    /// (`tf.io.parse_example`).
    pub fn new(specs: &[FeatureSpec]) -> Result<Self> {
        Ok(Self::from_plan(Plan::example(specs)?))
    }

    /// A decoder of `tf.train.SequenceExample` records
    /// (`tf.io.parse_sequence_example`): `context` features and
    /// `sequence` (feature list) features.
    pub fn sequence(context: &[FeatureSpec], sequence: &[FeatureSpec]) -> Result<Self> {
        Ok(Self::from_plan(Plan::sequence(context, sequence)?))
    }

    /// A decoder for a spec file: a sequence-example decoder when the file
    /// has context or sequence features, an Example decoder otherwise.
    pub fn from_spec_file(spec: &SpecFile) -> Result<Self> {
        if spec.sequence {
            Self::sequence(&spec.context_features, &spec.sequence_features)
        } else {
            Self::new(&spec.features)
        }
    }

    fn from_plan(plan: Plan) -> Self {
        let found = Found::new(plan.keys.len());
        let found_lists = Found::new(plan.list_keys.len());
        let ids = plan
            .columns
            .iter()
            .map(|(_, c)| match c {
                ColumnPlan::Sparse { index_keys, .. } => index_keys.len(),
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        let sparse_ids = plan_sparse_ids(&plan);
        let sparse_start = vec![0; plan.columns.len()];
        ExampleDecoder {
            plan: Arc::new(plan),
            limits: Limits::default(),
            generation: 0,
            at: None,
            per_row: Vec::new(),
            spare: Spare(None),
            found,
            found_lists,
            scratch: Scratch {
                ids: vec![Vec::new(); ids],
                sparse_ids,
                sparse_start,
                ..Scratch::default()
            },
        }
    }

    /// The limits on allocations sized by input. By default,
    /// [`Limits::default`].
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether records are parsed as `SequenceExample`s.
    pub fn is_sequence(&self) -> bool {
        self.plan.is_sequence
    }

    /// The specs, in output order (context first for sequence examples).
    pub fn specs(&self) -> &[FeatureSpec] {
        &self.plan.specs
    }

    /// An empty batch builder for this decoder's columns, with room for
    /// `rows` rows in the dense columns.
    pub fn new_batch(&self, rows: usize) -> BatchBuilder {
        self.new_batch_with(rows, None)
    }

    /// Gives the memory of a finished batch (from this decoder) back for
    /// the next [`recycled_batch`](Self::recycled_batch) or
    /// [`decode_batch`](Self::decode_batch) to reuse. Large batches then
    /// stop paying for fresh memory (page faults, kernel zeroing) on every
    /// batch.
    pub fn recycle(&mut self, batch: Batch) {
        self.spare = Spare(Some(batch));
    }

    /// Like [`new_batch`](Self::new_batch), reusing the memory of the last
    /// batch given to [`recycle`](Self::recycle), if any.
    pub fn recycled_batch(&mut self, rows: usize) -> BatchBuilder {
        let spare = self.spare.0.take();
        self.new_batch_with(rows, spare)
    }

    fn new_batch_with(&self, rows: usize, spare: Option<Batch>) -> BatchBuilder {
        let mut b = BatchBuilder::new();
        let section = if self.plan.is_sequence {
            Section::Context
        } else {
            Section::Features
        };
        for (name, plan) in &self.plan.columns {
            let builder = match plan {
                ColumnPlan::Dense { dtype, shape, .. } => {
                    ColumnBuilder::Dense(DenseBuilder::new(*dtype, shape.clone()))
                }
                ColumnPlan::Varlen { dtype, .. } => {
                    ColumnBuilder::Sparse(SparseBuilder::new(*dtype, vec![0]))
                }
                ColumnPlan::Sparse { dtype, sizes, .. } => {
                    ColumnBuilder::Sparse(SparseBuilder::new(*dtype, sizes.clone()))
                }
                ColumnPlan::Ragged {
                    dtype,
                    partitions,
                    row_splits_dtype,
                    validate,
                    ..
                } => {
                    let kinds: Vec<_> = partitions.iter().map(|(k, _)| *k).collect();
                    let mut r = RaggedBuilder::new(*dtype, &kinds, *row_splits_dtype, &self.limits);
                    r.validate = *validate;
                    ColumnBuilder::Ragged(r)
                }
                ColumnPlan::Padded {
                    item_shape, pad, ..
                } => ColumnBuilder::Padded(
                    PaddedBuilder::new(item_shape.clone(), pad.clone()).with_limits(self.limits),
                ),
            };
            b.push_column(name.clone(), section, builder);
        }
        for (name, plan) in &self.plan.sequence {
            match plan {
                SequencePlan::Dense {
                    dtype, item_shape, ..
                } => {
                    let zero = crate::plan::zero(*dtype);
                    b.push_sequence_column(
                        name.clone(),
                        PaddedBuilder::new(item_shape.clone(), zero).with_limits(self.limits),
                    );
                }
                SequencePlan::Varlen { dtype, .. } => b.push_column(
                    name.clone(),
                    Section::FeatureLists,
                    ColumnBuilder::Sparse(SparseBuilder::new(*dtype, vec![0, 0])),
                ),
                SequencePlan::Ragged {
                    dtype,
                    row_splits_dtype,
                    ..
                } => b.push_column(
                    name.clone(),
                    Section::FeatureLists,
                    ColumnBuilder::Ragged(RaggedBuilder::new(
                        *dtype,
                        &[grist_tensor::PartitionKind::RowLengths],
                        *row_splits_dtype,
                        &self.limits,
                    )),
                ),
            }
        }
        if let Some(spare) = spare {
            b.recycle(spare);
        }
        b.reserve_rows(rows);
        for (c, &(values, indices)) in b.columns_mut().iter_mut().zip(&self.per_row) {
            let want = |per_row: f64| (per_row * rows as f64 * 1.1) as usize;
            match &mut c.builder {
                ColumnBuilder::Sparse(s) => {
                    s.values.reserve(want(values));
                    s.indices.reserve(want(indices));
                }
                ColumnBuilder::Ragged(r) => r.values.reserve(want(values)),
                ColumnBuilder::Padded(p) => p.values.reserve(want(values)),
                ColumnBuilder::Dense(_) => {}
            }
        }
        b
    }

    /// Remembers how many values per row each column held.
    fn learn_sizes(&mut self, out: &BatchBuilder) {
        let rows = out.rows().max(1) as f64;
        self.per_row = out
            .columns()
            .iter()
            .map(|c| match &c.builder {
                ColumnBuilder::Sparse(s) => {
                    (s.values.len() as f64 / rows, s.indices.len() as f64 / rows)
                }
                ColumnBuilder::Ragged(r) => (r.values.len() as f64 / rows, 0.0),
                ColumnBuilder::Padded(p) => (p.values.len() as f64 / rows, 0.0),
                ColumnBuilder::Dense(_) => (0.0, 0.0),
            })
            .collect();
    }

    /// Decodes `records` into one batch.
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

    /// Finishes a batch built by [`decode`](Self::decode), reporting a
    /// ragged feature whose partitions cannot be applied, or a batch whose
    /// padding would exceed the limits ([`Error::BatchTooLarge`]).
    pub fn finish(
        &mut self,
        out: &mut BatchBuilder,
        file: &Arc<str>,
        first_record: u64,
    ) -> Result<Batch> {
        self.learn_sizes(out);
        out.finish().map_err(|e| match e {
            grist_tensor::TensorError::BadRagged { feature, reason } => Error::Feature {
                at: Location::record(file.clone(), first_record)
                    .with_feature(feature)
                    .into(),
                problem: FeatureProblem::BadPartition { key: None, reason },
            },
            other @ grist_tensor::TensorError::LimitExceeded { .. } => Error::BatchTooLarge {
                at: Location::record(file.clone(), first_record).into(),
                source: other,
            },
            other => Error::Spec(other),
        })
    }

    /// Decodes one serialized record (at `at`, for error messages) and
    /// appends it as a row to `out`, a builder from
    /// [`new_batch`](Self::new_batch). On error, `out` keeps the rows
    /// before this one.
    pub fn decode(&mut self, record: &[u8], at: &Location, out: &mut BatchBuilder) -> Result<()> {
        out.begin_row();
        if self.plan.direct.is_some() && record.len() <= u32::MAX as usize {
            if self.decode_direct(record, out) {
                out.end_row();
                return Ok(());
            }
            // Something unusual (an error, a key given twice, an empty
            // Feature): start the row over on the general path, which
            // reports exactly what is wrong.
            out.discard_row();
        }
        match self.decode_inner(record, at, out) {
            Ok(()) => {
                out.end_row();
                Ok(())
            }
            Err(e) => {
                out.discard_row();
                Err(*e)
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

    /// Decodes a plain Example in one pass over its bytes, each wanted
    /// feature straight into its column as its map entry is read. Returns
    /// `false` on anything but a well-formed record whose every key appears
    /// once: the caller then discards the partial row and uses the general
    /// path, so results and errors are the same either way.
    fn decode_direct(&mut self, record: &[u8], out: &mut BatchBuilder) -> bool {
        self.next_generation();
        // Borrowed, not cloned: an `Arc` clone per record is an atomic on
        // a counter every parse thread's decoder shares.
        let plan = &*self.plan;
        let Some(roles) = plan.direct.as_deref() else {
            return false;
        };
        let generation = self.generation;
        let row = out.next_row() as i64;
        let columns = out.columns_mut();
        let scratch = &mut self.scratch;
        for (c, (_, col)) in plan.columns.iter().enumerate() {
            if let (ColumnPlan::Sparse { .. }, ColumnBuilder::Sparse(b)) =
                (col, &columns[c].builder)
            {
                scratch.sparse_start[c] = b.values.len();
            }
        }
        let slots = &mut self.found.slots;
        let predictor = &mut self.found.predictor;
        predictor.entries = 0;
        let mut on_entry = |slot: u32, value: Span| -> wire::WireResult<bool> {
            let seen = &mut slots[slot as usize].0;
            if *seen == generation {
                return Ok(false);
            }
            *seen = generation;
            let f = wire::feature(value.cursor(record))?;
            let Some(kind) = f.kind else {
                return Ok(false);
            };
            Ok(match roles[slot as usize] {
                Role::Dense(c) => match &mut columns[c].builder {
                    ColumnBuilder::Dense(b) => {
                        kind == wanted_kind(b.values.dtype())
                            && append(record, &f, &mut b.values)? == b.row_len()
                    }
                    _ => false,
                },
                Role::Varlen(c) => match &mut columns[c].builder {
                    ColumnBuilder::Sparse(b) if kind == wanted_kind(b.values.dtype()) => {
                        let n = append(record, &f, &mut b.values)?;
                        b.indices.reserve(2 * n);
                        b.indices.extend((0..n as i64).flat_map(|j| [row, j]));
                        b.shape[0] = b.shape[0].max(n as i64);
                        true
                    }
                    _ => false,
                },
                Role::Padded(c) => match &mut columns[c].builder {
                    ColumnBuilder::Padded(b) if kind == wanted_kind(b.values.dtype()) => {
                        let n = append(record, &f, &mut b.values)?;
                        match n.checked_div(b.item_len()) {
                            Some(steps) if n % b.item_len() == 0 => {
                                b.steps.push(steps);
                                true
                            }
                            _ => false,
                        }
                    }
                    _ => false,
                },
                Role::SparseValue(c) => match &mut columns[c].builder {
                    ColumnBuilder::Sparse(b) if kind == wanted_kind(b.values.dtype()) => {
                        append(record, &f, &mut b.values)?;
                        true
                    }
                    _ => false,
                },
                Role::SparseIndex(c, k) => {
                    let ids = &mut scratch.sparse_ids[c][k];
                    ids.clear();
                    kind == Kind::Int64 && {
                        wire::int64_list(record, &f, ids)?;
                        true
                    }
                }
            })
        };
        let mut c = Cursor::new(record);
        let complete = (|| -> wire::WireResult<bool> {
            while !c.at_end() {
                let (field, wt) = c.tag()?;
                if field == 1 && wt == LEN {
                    if !for_each_entry(c.message()?, &plan.keys, predictor, false, &mut on_entry)? {
                        return Ok(false);
                    }
                } else {
                    c.skip(wt)?;
                }
            }
            Ok(true)
        })();
        if complete != Ok(true) {
            return false;
        }
        // Columns whose keys did not appear, and the sparse indices.
        let seen = |slot: u32| slots[slot as usize].0 == generation;
        for (c, (_, col)) in plan.columns.iter().enumerate() {
            match (col, &mut columns[c].builder) {
                (ColumnPlan::Dense { key, default, .. }, ColumnBuilder::Dense(b)) => {
                    if !seen(*key) {
                        match default {
                            Some(d) => b.values.extend_from(d),
                            None => return false,
                        }
                    }
                    b.end_row();
                }
                (ColumnPlan::Padded { key, .. }, ColumnBuilder::Padded(b)) if !seen(*key) => {
                    b.steps.push(0);
                }
                (
                    ColumnPlan::Sparse {
                        index_keys,
                        sizes,
                        already_sorted,
                        ..
                    },
                    ColumnBuilder::Sparse(b),
                ) => {
                    let start = scratch.sparse_start[c];
                    let nnz = b.values.len() - start;
                    let ids = &mut scratch.sparse_ids[c];
                    for (k, key) in index_keys.iter().enumerate() {
                        if !seen(*key) {
                            ids[k].clear();
                        }
                    }
                    if check_sparse(ids, nnz, sizes).is_some() {
                        return false;
                    }
                    write_sparse_row(
                        ids,
                        nnz,
                        row,
                        *already_sorted,
                        start,
                        b,
                        &mut scratch.order,
                        &mut scratch.tail,
                    );
                }
                _ => {}
            }
        }
        true
    }

    fn next_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Wrapped: clear so stale entries cannot match.
            for s in self
                .found
                .slots
                .iter_mut()
                .chain(self.found_lists.slots.iter_mut())
            {
                *s = (0, Span::default(), FeatureRef::default());
            }
            self.generation = 1;
        }
    }

    fn decode_inner(&mut self, record: &[u8], at: &Location, out: &mut BatchBuilder) -> Hot<()> {
        if record.len() > u32::MAX as usize {
            return Err(Box::new(Error::RecordTooLarge {
                at: at.clone().into(),
                len: record.len() as u64,
                max: u32::MAX as u64,
            }));
        }
        self.next_generation();
        let plan = self.plan.clone();
        let message = if plan.is_sequence {
            "SequenceExample"
        } else {
            "Example"
        };
        let malformed = |e: WireError| {
            Box::new(match unknown_field(record, &e, at) {
                Some(unknown) => unknown,
                None => Error::Malformed {
                    at: at.clone().into(),
                    message,
                    reason: e.reason,
                    offset: e.offset,
                },
            })
        };
        let generation = self.generation;
        if plan.is_sequence {
            scan_sequence(
                record,
                &plan.keys,
                &plan.list_keys,
                &mut self.found,
                &mut self.found_lists,
                generation,
            )
            .map_err(malformed)?;
        } else {
            scan_example(record, &plan.keys, &mut self.found, generation).map_err(malformed)?;
        }
        let ctx = Ctx {
            record,
            row: out.next_row() as i64,
            at,
            found: &self.found,
            generation,
            keys: &plan.keys,
        };
        let columns = out.columns_mut();
        for (i, (name, col)) in plan.columns.iter().enumerate() {
            ctx.column(name, col, &mut columns[i].builder, &mut self.scratch)?;
        }
        let n = plan.columns.len();
        for (j, (name, col)) in plan.sequence.iter().enumerate() {
            let lists = Ctx {
                found: &self.found_lists,
                keys: &plan.list_keys,
                ..ctx
            };
            lists.sequence_column(name, col, &mut columns[n + j].builder)?;
        }
        Ok(())
    }
}

/// The reasons of the [`WireError`]s of a field other than the map in a
/// `Features` or a `FeatureLists` message, at the field's tag
/// ([`unknown_field`] turns them into [`Error::UnknownField`]).
const NOT_THE_MAP: [&str; 2] = [
    "a field other than the feature map in Features",
    "a field other than the feature map in FeatureLists",
];

/// Calls `on` with the slot and value span of every wanted entry of a
/// `Features` (`lists`: `FeatureLists`) map message; stops early
/// (returning `Ok(false)`) when `on` returns `false`. Any other field
/// fails, as in TensorFlow's parser (`NOT_THE_MAP`).
#[inline(always)]
fn for_each_entry(
    mut features: Cursor<'_>,
    keys: &KeyTable,
    predictor: &mut Predictor,
    lists: bool,
    mut on: impl FnMut(u32, Span) -> wire::WireResult<bool>,
) -> wire::WireResult<bool> {
    while !features.at_end() {
        let offset = features.offset();
        let (field, wt) = features.tag()?;
        if field != 1 || wt != LEN {
            return Err(WireError {
                reason: NOT_THE_MAP[usize::from(lists)],
                offset,
            });
        }
        let mut entry = features.message()?;
        let (key, value) = match wire::key_value(&entry) {
            Some(kv) => kv,
            None => {
                let mut key: &[u8] = b"";
                let mut value = Span {
                    start: entry.offset() as u32,
                    end: entry.offset() as u32,
                };
                while !entry.at_end() {
                    let (f, w) = entry.tag()?;
                    match (f, w) {
                        (1, LEN) => key = entry.bytes()?,
                        (2, LEN) => value = wire::span(&mut entry)?,
                        _ => entry.skip(w)?,
                    }
                }
                (key, value)
            }
        };
        if let Some(slot) = predictor.slot_of(keys, key) {
            if !on(slot, value)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// [`Error::UnknownField`] for a [`WireError`] of `NOT_THE_MAP`, with the
/// field number and wire type read back from its tag.
#[cold]
fn unknown_field(record: &[u8], e: &WireError, at: &Location) -> Option<Error> {
    let i = NOT_THE_MAP.iter().position(|&r| r == e.reason)?;
    let (tag, _) = grist_tensor::wire::read_varint(record.get(e.offset..)?).ok()?;
    Some(Error::UnknownField {
        at: at.clone().into(),
        message: ["Features", "FeatureLists"][i],
        field: tag >> 3,
        wire_type: (tag & 7) as u8,
        offset: e.offset,
    })
}

/// Per column: room for the index lists of a SparseFeature.
fn plan_sparse_ids(plan: &Plan) -> Vec<Vec<Vec<i64>>> {
    plan.columns
        .iter()
        .map(|(_, c)| match c {
            ColumnPlan::Sparse { index_keys, .. } => vec![Vec::new(); index_keys.len()],
            _ => Vec::new(),
        })
        .collect()
}

/// Scans the map entries of a `Features` (or, with `lists`, a
/// `FeatureLists`) message into `found`.
#[inline]
fn scan_features(
    record: &[u8],
    features: Cursor<'_>,
    keys: &KeyTable,
    found: &mut Found,
    generation: u32,
    lists: bool,
) -> wire::WireResult<()> {
    let slots = &mut found.slots;
    for_each_entry(
        features,
        keys,
        &mut found.predictor,
        lists,
        |slot, value| {
            let feature = if lists {
                FeatureRef::default()
            } else {
                wire::feature(value.cursor(record))?
            };
            // Later entries win, as protobuf map merging does.
            slots[slot as usize] = (generation, value, feature);
            Ok(true)
        },
    )?;
    Ok(())
}

fn scan_example(
    record: &[u8],
    keys: &KeyTable,
    found: &mut Found,
    generation: u32,
) -> wire::WireResult<()> {
    found.predictor.entries = 0;
    let mut c = Cursor::new(record);
    while !c.at_end() {
        let (field, wt) = c.tag()?;
        if field == 1 && wt == LEN {
            scan_features(record, c.message()?, keys, found, generation, false)?;
        } else {
            c.skip(wt)?;
        }
    }
    Ok(())
}

fn scan_sequence(
    record: &[u8],
    keys: &KeyTable,
    list_keys: &KeyTable,
    found: &mut Found,
    found_lists: &mut Found,
    generation: u32,
) -> wire::WireResult<()> {
    found.predictor.entries = 0;
    found_lists.predictor.entries = 0;
    let mut c = Cursor::new(record);
    while !c.at_end() {
        let (field, wt) = c.tag()?;
        match (field, wt) {
            (1, LEN) => scan_features(record, c.message()?, keys, found, generation, false)?,
            // FeatureLists has the same shape as Features: a map of
            // string → message under field 1.
            (2, LEN) => scan_features(
                record,
                c.message()?,
                list_keys,
                found_lists,
                generation,
                true,
            )?,
            _ => c.skip(wt)?,
        }
    }
    Ok(())
}

fn wanted_kind(dtype: DType) -> Kind {
    match dtype {
        // int32 and bool are written as int64 lists (widened) and read
        // back narrowed.
        DType::Int64 | DType::Int32 | DType::Bool => Kind::Int64,
        DType::Float32 => Kind::Float,
        _ => Kind::Bytes,
    }
}

/// The reason of the [`wire::WireError`] of an int64 value that does not
/// fit the column's int32 or bool dtype ([`Ctx::append`] turns it into
/// [`FeatureProblem::Unrepresentable`]).
const NARROW: &str = "an int64 value does not fit the spec's dtype";

/// Appends a feature's values to a value list of its dtype, returning the
/// number appended.
#[inline]
fn append(record: &[u8], f: &FeatureRef, out: &mut Values) -> wire::WireResult<usize> {
    let before = out.len();
    match out {
        Values::Int64(v) => wire::int64_list(record, f, v)?,
        Values::Float32(v) => wire::float_list(record, f, v)?,
        Values::String(v) => wire::bytes_list(record, f, v)?,
        Values::Int32(_) | Values::Bool(_) => return append_narrowed(record, f, out),
        // Plans only build int64, int32, bool, float32 and string columns.
        _ => {}
    }
    Ok(out.len() - before)
}

thread_local! {
    /// The int64 values of a list on their way into an int32 or bool
    /// column (reused: no allocation per record once it has grown).
    static WIDE: std::cell::RefCell<Vec<i64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Appends an int64 list to an int32 or bool column (values written
/// widened, as tf.Example has no narrower list): every value must fit
/// (bools are 0 or 1), or the whole list is refused with [`NARROW`].
fn append_narrowed(record: &[u8], f: &FeatureRef, out: &mut Values) -> wire::WireResult<usize> {
    WIDE.with_borrow_mut(|wide| {
        wide.clear();
        wire::int64_list(record, f, wide)?;
        let narrow = WireError {
            reason: NARROW,
            offset: 0,
        };
        match out {
            Values::Int32(v) => {
                if wide.iter().any(|&x| i32::try_from(x).is_err()) {
                    return Err(narrow);
                }
                v.extend(wide.iter().map(|&x| x as i32));
            }
            Values::Bool(v) => {
                if wide.iter().any(|&x| !matches!(x, 0 | 1)) {
                    return Err(narrow);
                }
                v.extend(wide.iter().map(|&x| x == 1));
            }
            _ => return Err(narrow),
        }
        Ok(wide.len())
    })
}

/// The first value of an int64 list that does not fit `dtype`, as text.
#[cold]
fn unfit_value(record: &[u8], f: &FeatureRef, dtype: DType) -> String {
    let mut wide = Vec::new();
    let _ = wire::int64_list(record, f, &mut wide);
    wide.into_iter()
        .find(|&x| match dtype {
            DType::Bool => !matches!(x, 0 | 1),
            _ => i32::try_from(x).is_err(),
        })
        .map_or_else(String::new, |x| x.to_string())
}

/// The per-record context for filling columns.
#[derive(Clone, Copy)]
struct Ctx<'r> {
    record: &'r [u8],
    /// The batch row being written.
    row: i64,
    at: &'r Location,
    found: &'r Found,
    generation: u32,
    keys: &'r KeyTable,
}

impl<'r> Ctx<'r> {
    #[cold]
    fn malformed(&self, e: WireError) -> Box<Error> {
        Box::new(Error::Malformed {
            at: self.at.clone().into(),
            message: "Feature",
            reason: e.reason,
            offset: e.offset,
        })
    }

    /// [`append`], its errors reported: a value that does not fit the
    /// column's int32 or bool dtype as a problem of feature `name`, the
    /// rest as malformed records.
    #[inline]
    fn append(&self, name: &str, f: &FeatureRef, out: &mut Values) -> Hot<usize> {
        append(self.record, f, out).map_err(|e| {
            if e.reason == NARROW {
                let dtype = out.dtype();
                self.problem(
                    name,
                    FeatureProblem::Unrepresentable {
                        value: unfit_value(self.record, f, dtype),
                        dtype: dtype.name(),
                    },
                )
            } else {
                self.malformed(e)
            }
        })
    }

    #[cold]
    fn problem(&self, feature: &str, problem: FeatureProblem) -> Box<Error> {
        Box::new(Error::Feature {
            at: self.at.clone().with_feature(feature).into(),
            problem,
        })
    }

    /// The feature stored under `slot`: `None` when absent or when it has
    /// no kind (TensorFlow treats both as missing); a type mismatch is an
    /// error naming `feature`.
    #[inline]
    fn feature(&self, slot: u32, dtype: DType) -> Hot<Option<FeatureRef>> {
        let Some(f) = self.found.feature(slot, self.generation) else {
            return Ok(None);
        };
        match f.kind {
            None => Ok(None),
            Some(k) if k == wanted_kind(dtype) => Ok(Some(f)),
            Some(k) => Err(self.problem(
                &self.keys.name(slot),
                FeatureProblem::TypeMismatch {
                    expected: dtype.tf_name(),
                    actual: k.name(),
                },
            )),
        }
    }

    fn column(
        &self,
        name: &str,
        plan: &ColumnPlan,
        builder: &mut ColumnBuilder,
        scratch: &mut Scratch,
    ) -> Hot<()> {
        match (plan, builder) {
            (
                ColumnPlan::Dense {
                    key,
                    dtype,
                    row_len,
                    default,
                    ..
                },
                ColumnBuilder::Dense(b),
            ) => {
                match self.feature(*key, *dtype)? {
                    Some(f) => {
                        let n = self.append(name, &f, &mut b.values)?;
                        if n != *row_len {
                            return Err(self.problem(
                                name,
                                FeatureProblem::WrongCount {
                                    dim: None,
                                    expected: *row_len,
                                    actual: n,
                                },
                            ));
                        }
                    }
                    None => match default {
                        Some(d) => b.values.extend_from(d),
                        None => return Err(self.problem(name, FeatureProblem::Missing)),
                    },
                }
                b.end_row();
            }
            (ColumnPlan::Varlen { key, dtype }, ColumnBuilder::Sparse(b)) => {
                if let Some(f) = self.feature(*key, *dtype)? {
                    let n = self.append(name, &f, &mut b.values)?;
                    let row = self.row;
                    b.indices.reserve(2 * n);
                    for j in 0..n as i64 {
                        b.indices.push(row);
                        b.indices.push(j);
                    }
                    b.shape[0] = b.shape[0].max(n as i64);
                }
            }
            (
                ColumnPlan::Sparse {
                    index_keys,
                    value_key,
                    dtype,
                    sizes,
                    already_sorted,
                },
                ColumnBuilder::Sparse(b),
            ) => self.sparse(
                name,
                index_keys,
                *value_key,
                *dtype,
                sizes,
                *already_sorted,
                b,
                scratch,
            )?,
            (
                ColumnPlan::Ragged {
                    value_key,
                    dtype,
                    partitions,
                    ..
                },
                ColumnBuilder::Ragged(b),
            ) => {
                if let Some(f) = self.feature(*value_key, *dtype)? {
                    self.append(name, &f, &mut b.values)?;
                }
                for (i, (_, key)) in partitions.iter().enumerate() {
                    if let Some(key) = key {
                        if let Some(f) = self.feature(*key, DType::Int64)? {
                            wire::int64_list(self.record, &f, &mut b.partitions[i].values)
                                .map_err(|e| self.malformed(e))?;
                        }
                    }
                }
                b.end_row();
            }
            (
                ColumnPlan::Padded {
                    key,
                    dtype,
                    item_len,
                    ..
                },
                ColumnBuilder::Padded(b),
            ) => {
                let mut steps = 0;
                if let Some(f) = self.feature(*key, *dtype)? {
                    let n = self.append(name, &f, &mut b.values)?;
                    if *item_len == 0 {
                        if n != 0 {
                            return Err(self.problem(
                                name,
                                FeatureProblem::NotMultiple { item: 0, actual: n },
                            ));
                        }
                    } else if n % item_len != 0 {
                        return Err(self.problem(
                            name,
                            FeatureProblem::NotMultiple {
                                item: *item_len,
                                actual: n,
                            },
                        ));
                    } else {
                        steps = n / item_len;
                    }
                }
                b.steps.push(steps);
            }
            _ => unreachable!("plan and builder layouts always match"),
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn sparse(
        &self,
        name: &str,
        index_keys: &[u32],
        value_key: u32,
        dtype: DType,
        sizes: &[i64],
        already_sorted: bool,
        b: &mut SparseBuilder,
        scratch: &mut Scratch,
    ) -> Hot<()> {
        let start = b.values.len();
        let nnz = match self.feature(value_key, dtype)? {
            Some(f) => self.append(name, &f, &mut b.values)?,
            None => 0,
        };
        for (k, &key) in index_keys.iter().enumerate() {
            let ids = &mut scratch.ids[k];
            ids.clear();
            if let Some(f) = self.feature(key, DType::Int64)? {
                wire::int64_list(self.record, &f, ids).map_err(|e| self.malformed(e))?;
            }
        }
        let ids = &scratch.ids[..index_keys.len()];
        if let Some(problem) = check_sparse(ids, nnz, sizes) {
            return Err(self.problem(name, problem));
        }
        write_sparse_row(
            ids,
            nnz,
            self.row,
            already_sorted,
            start,
            b,
            &mut scratch.order,
            &mut scratch.tail,
        );
        Ok(())
    }

    fn sequence_column(
        &self,
        name: &str,
        plan: &SequencePlan,
        builder: &mut ColumnBuilder,
    ) -> Hot<()> {
        let (key, dtype) = match plan {
            SequencePlan::Dense { key, dtype, .. }
            | SequencePlan::Varlen { key, dtype }
            | SequencePlan::Ragged { key, dtype, .. } => (*key, *dtype),
        };
        let list = self.found.get(key, self.generation);
        let mut steps = 0usize;
        match (plan, builder) {
            (
                SequencePlan::Dense {
                    item_len,
                    allow_missing,
                    ..
                },
                ColumnBuilder::Padded(b),
            ) => {
                let Some(list) = list else {
                    if *allow_missing {
                        b.steps.push(0);
                        return Ok(());
                    }
                    return Err(self.problem(name, FeatureProblem::Missing));
                };
                self.for_each_step(list, dtype, name, |f| {
                    let n = match f {
                        Some(f) => self.append(name, &f, &mut b.values)?,
                        None => 0,
                    };
                    if n != *item_len {
                        return Err(self.problem(
                            name,
                            FeatureProblem::WrongCount {
                                dim: None,
                                expected: *item_len,
                                actual: n,
                            },
                        ));
                    }
                    steps += 1;
                    Ok(())
                })?;
                b.steps.push(steps);
            }
            (SequencePlan::Varlen { .. }, ColumnBuilder::Sparse(b)) => {
                let row = self.row;
                if let Some(list) = list {
                    let mut max_values = 0i64;
                    self.for_each_step(list, dtype, name, |f| {
                        let n = match f {
                            Some(f) => self.append(name, &f, &mut b.values)?,
                            None => 0,
                        };
                        for j in 0..n as i64 {
                            b.indices.extend([row, steps as i64, j]);
                        }
                        max_values = max_values.max(n as i64);
                        steps += 1;
                        Ok(())
                    })?;
                    b.shape[0] = b.shape[0].max(steps as i64);
                    b.shape[1] = b.shape[1].max(max_values);
                }
            }
            (SequencePlan::Ragged { .. }, ColumnBuilder::Ragged(b)) => {
                if let Some(list) = list {
                    let (values, partitions) = (&mut b.values, &mut b.partitions);
                    self.for_each_step(list, dtype, name, |f| {
                        let n = match f {
                            Some(f) => self.append(name, &f, values)?,
                            None => 0,
                        };
                        partitions[0].values.push(n as i64);
                        Ok(())
                    })?;
                }
                b.end_row();
            }
            _ => unreachable!("plan and builder layouts always match"),
        }
        Ok(())
    }

    /// Calls `f` with each step (Feature) of a FeatureList, type-checked.
    fn for_each_step(
        &self,
        list: Span,
        dtype: DType,
        name: &str,
        mut f: impl FnMut(Option<FeatureRef>) -> Hot<()>,
    ) -> Hot<()> {
        let mut c = list.cursor(self.record);
        while !c.at_end() {
            let offset = c.offset();
            let (field, wt) = c.tag().map_err(|e| self.malformed(e))?;
            if field != 1 || wt != LEN {
                // TensorFlow refuses any other field in a FeatureList it
                // parses ("Error in sequence feature").
                return Err(Box::new(Error::UnknownField {
                    at: self.at.clone().with_feature(name).into(),
                    message: "FeatureList",
                    field: u64::from(field),
                    wire_type: wt as u8,
                    offset,
                }));
            }
            let step = c.message().map_err(|e| self.malformed(e))?;
            let feature = wire::feature(step).map_err(|e| self.malformed(e))?;
            match feature.kind {
                Some(k) if k != wanted_kind(dtype) => {
                    return Err(self.problem(
                        name,
                        FeatureProblem::TypeMismatch {
                            expected: dtype.tf_name(),
                            actual: k.name(),
                        },
                    ));
                }
                Some(_) => f(Some(feature))?,
                None => f(None)?,
            }
        }
        Ok(())
    }
}

/// What is wrong with one row of a `SparseFeature`: index lists that do not
/// match the values in length, or an index outside its dimension.
#[inline]
pub(crate) fn check_sparse(ids: &[Vec<i64>], nnz: usize, sizes: &[i64]) -> Option<FeatureProblem> {
    for (id, &size) in ids.iter().zip(sizes) {
        if id.len() != nnz {
            return Some(FeatureProblem::IndexCountMismatch {
                dim: None,
                indices: id.len(),
                values: nnz,
            });
        }
        // One unsigned compare rejects negative indices too.
        if let Some(&bad) = id.iter().find(|&&i| i as u64 >= size as u64) {
            return Some(FeatureProblem::IndexOutOfRange {
                dim: None,
                index: bad,
                size,
            });
        }
    }
    None
}

/// Writes the COO indices of one checked `SparseFeature` row (batch row
/// `row`, values from `start` on), sorting the row unless it is sorted.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn write_sparse_row(
    ids: &[Vec<i64>],
    nnz: usize,
    row: i64,
    already_sorted: bool,
    start: usize,
    b: &mut SparseBuilder,
    order: &mut Vec<usize>,
    tail: &mut Option<Values>,
) {
    let rank = ids.len();
    if rank == 1 {
        // One index per value (the common case): a plain sortedness check
        // and an interleaving copy.
        let id = &ids[0];
        if already_sorted || id.windows(2).all(|w| w[0] <= w[1]) {
            b.indices.reserve(2 * nnz);
            b.indices.extend(id.iter().flat_map(|&i| [row, i]));
            return;
        }
    }
    let less = |a: usize, b: usize| {
        for id in ids {
            match id[a].cmp(&id[b]) {
                std::cmp::Ordering::Equal => continue,
                o => return o,
            }
        }
        std::cmp::Ordering::Equal
    };
    let sorted = already_sorted || (1..nnz).all(|i| less(i - 1, i) != std::cmp::Ordering::Greater);
    b.indices.reserve(nnz * (rank + 1));
    if sorted {
        for i in 0..nnz {
            b.indices.push(row);
            b.indices.extend(ids.iter().map(|id| id[i]));
        }
    } else {
        order.clear();
        order.extend(0..nnz);
        order.sort_by(|&a, &b| less(a, b));
        for &i in order.iter() {
            b.indices.push(row);
            b.indices.extend(ids.iter().map(|id| id[i]));
        }
        permute_tail(&mut b.values, start, order, tail);
    }
}

/// Reorders `values[start..]` so that position `k` holds the old value at
/// `start + order[k]`, using `tail` as reusable scratch space.
fn permute_tail(values: &mut Values, start: usize, order: &[usize], tail: &mut Option<Values>) {
    let tail = match tail {
        Some(t) if t.dtype() == values.dtype() => t,
        _ => tail.insert(Values::new(values.dtype())),
    };
    tail.clear();
    tail.extend_from_range(values, start..values.len());
    values.truncate(start);
    for &i in order {
        values.extend_from_range(tail, i..i + 1);
    }
}
