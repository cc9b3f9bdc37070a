//! The Avro decoder: walks each record's fields by the compiled plan,
//! writing requested values straight into the batch columns and skipping
//! the rest without materialising them.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use grist_tensor::{
    Batch, BatchBuilder, ColumnBuilder, DenseBuilder, FeatureSpec, Limits, Section, SparseBuilder,
    Values, varint,
};

use crate::datum::{DatumError, DatumResult, Reader};
use crate::error::{Error, Result};
use crate::general;
use crate::plan::{Constant, FieldPlan, Leaf, Plan, SparsePart, Step, check_specs};
use crate::resolve::{ReaderSchema, resolve};
use crate::schema::{Node, Schema};
use grist_tensor::{FeatureProblem, Location};

/// Why decoding a record failed, before the location is attached.
#[derive(Debug)]
enum Fail {
    Datum(DatumError),
    Feature(usize, FeatureProblem),
}

/// Where a block's decoding stopped, once rows up to `end` of its
/// `record_count` are decoded: an error when the last record is decoded
/// and bytes are left (both plans end a block this way).
pub(crate) fn block_end(
    r: &Reader,
    end: usize,
    record_count: usize,
    at: Location,
) -> Result<usize> {
    if end == record_count && !r.at_end() {
        return Err(Error::Datum {
            at: at.into(),
            reason: format!(
                "{} bytes left after the block's {record_count} records",
                r.remaining()
            ),
        });
    }
    Ok(r.pos)
}

/// A bad datum of a block, at `at` (its record, and its feature if
/// known).
pub(crate) fn datum_error(at: Location, d: DatumError) -> Error {
    Error::Datum {
        at: at.into(),
        reason: format!("{} at byte {} of the block", d.reason, d.offset),
    }
}

impl From<DatumError> for Fail {
    fn from(e: DatumError) -> Self {
        Fail::Datum(e)
    }
}

type Hot<T> = std::result::Result<T, Fail>;

/// A recycled batch; clones of a decoder do not share (or copy) it.
#[derive(Debug, Default)]
struct Spare(Option<Batch>);

impl Clone for Spare {
    fn clone(&self) -> Self {
        Spare(None)
    }
}

/// Decodes Avro records into batches, the AvroTensorDataset way: dense
/// features from primitives or nested arrays, sparse features from records
/// of `indices0..` and `values` arrays, varlen features from nested arrays.
///
/// Specs whose names are key expressions (`name.first`, `friends[*].x`,
/// `cars['nick'].color`, `friends[gender='m'].x`, ...), or that need a
/// kind or form ATDS lacks (ragged, fixed_len_sequence, dense `[-1, ...]`,
/// sparse with `index_key`/`value_key`), or name TensorFlow's classes
/// (`tf_class`), take tensorflow-io's `parse_avro` mapping instead, for
/// any schema and without type promotion (`docs/AVRO-KEY-EXPRESSIONS.md`).
///
/// Build it once from the specs, register each file's writer schema with
/// [`add_schema`](Self::add_schema) (a plan is compiled once per distinct
/// schema), then decode blocks. Clone it to decode on several threads.
#[derive(Clone, Debug)]
pub struct AvroDecoder {
    specs: Arc<[FeatureSpec]>,
    /// Plans by file.
    plans: HashMap<Arc<str>, Arc<Plan>>,
    /// Plans by schema text, shared by files with the same schema.
    by_schema: HashMap<String, Arc<Plan>>,
    /// The file of the last block decoded and its plan: a shuffled batch
    /// takes a few rows of hundreds of blocks, mostly of one file, and
    /// hashing its name for each cost 0.9% of the batch.
    last: Option<(Arc<str>, Arc<Plan>)>,
    limits: Limits,
    /// The schema every file is read through, if not its writer's own.
    reader: Option<ReaderSchema>,
    ids: Vec<Vec<i64>>,
    index: Vec<i64>,
    per_row: Vec<(f64, f64)>,
    spare: Spare,
    /// The key-expression path, when the specs need it (`general.rs`).
    general: Option<Box<general::Plans>>,
}

impl AvroDecoder {
    /// A decoder for `specs`. On the ATDS plan: dense, sparse or varlen
    /// (other kinds are rejected by name); on the key-expression plan also
    /// ragged and fixed_len_sequence. Key-expression syntax errors are
    /// rejected here, naming the feature.
    pub fn new(specs: &[FeatureSpec]) -> Result<Self> {
        let general = general::wanted(specs);
        if general {
            general::check_specs(specs)?;
        } else {
            check_specs(specs)?;
        }
        Ok(AvroDecoder {
            specs: specs.into(),
            plans: HashMap::new(),
            by_schema: HashMap::new(),
            last: None,
            limits: Limits::default(),
            reader: None,
            ids: Vec::new(),
            index: Vec::new(),
            per_row: Vec::new(),
            spare: Spare(None),
            general: general.then(Box::default),
        })
    }

    /// The limits on allocations sized by input. By default,
    /// [`Limits::default`].
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Reads every file through `reader`, by the Avro specification's
    /// schema resolution rules: the specs name the reader's fields, each
    /// file's writer schema is resolved against it when registered
    /// ([`add_schema`](Self::add_schema) fails with
    /// [`Error::Resolution`], naming the file and the field, where the
    /// rules forbid the pairing), fields the writer lacks take the
    /// reader's defaults. By default, none: each file is read by its
    /// writer schema.
    #[must_use]
    pub fn with_reader_schema(mut self, reader: ReaderSchema) -> Self {
        self.reader = Some(reader);
        if let Some(g) = &mut self.general {
            **g = general::Plans::default();
        }
        self.plans.clear();
        self.by_schema.clear();
        self.last = None;
        self
    }

    /// The reader schema, if one was given.
    pub fn reader_schema(&self) -> Option<&ReaderSchema> {
        self.reader.as_ref()
    }

    /// The specs, in output order.
    pub fn specs(&self) -> &[FeatureSpec] {
        &self.specs
    }

    /// Registers the writer schema (the JSON text of `avro.schema`) of
    /// `file`, compiling a decode plan for it unless an identical schema
    /// was seen before. Fails, naming the feature, when a spec does not fit
    /// the schema.
    pub fn add_schema(&mut self, file: impl Into<Arc<str>>, schema_json: &str) -> Result<()> {
        let file = file.into();
        if let Some(g) = &mut self.general {
            return g.add_schema(&self.specs, self.reader.as_ref(), file, schema_json);
        }
        let plan = match self.by_schema.get(schema_json) {
            Some(p) => p.clone(),
            None => {
                let mut schema = Schema::parse(schema_json).map_err(|reason| Error::BadHeader {
                    file: file.clone(),
                    reason: format!("bad writer schema: {reason}"),
                })?;
                if let Some(reader) = &self.reader {
                    schema = resolve(&schema, reader, &file)?;
                }
                let mut plan = Plan::compile(Arc::new(schema), &self.specs, &file)?;
                let ranks = plan
                    .steps
                    .iter()
                    .chain(plan.constants.iter().map(|(step, _)| step))
                    .filter_map(|s| match s {
                        Step::Column {
                            plan: FieldPlan::Varlen { dims, .. },
                            ..
                        } => Some(dims.len()),
                        Step::Column {
                            plan: FieldPlan::Sparse { parts },
                            ..
                        } => Some(parts.len()),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0);
                self.ids.resize(self.ids.len().max(ranks), Vec::new());
                for (step, datum) in std::mem::take(&mut plan.constants) {
                    let constant = self.constant(&plan, step, &datum, &file)?;
                    plan.defaults.push(constant);
                }
                let plan = Arc::new(plan);
                self.by_schema.insert(schema_json.to_string(), plan.clone());
                plan
            }
        };
        self.plans.insert(file, plan);
        self.last = None;
        Ok(())
    }

    /// Decodes the reader's default of a field the writer lacks (`datum`,
    /// by `step`) into the row every record of the file gets.
    fn constant(
        &mut self,
        plan: &Plan,
        step: Step,
        datum: &[u8],
        file: &Arc<str>,
    ) -> Result<(usize, Constant)> {
        let Step::Column {
            col,
            nullable,
            node,
            plan: fp,
        } = step
        else {
            unreachable!("constants are columns");
        };
        let specs = self.specs.clone();
        let spec = &specs[col];
        let one = Plan {
            schema: plan.schema.clone(),
            steps: vec![Step::Column {
                col: 0,
                nullable,
                node,
                plan: fp,
            }],
            defaults: Vec::new(),
            constants: Vec::new(),
        };
        let mut out = BatchBuilder::new();
        if let Some(builder) = column_builder(spec) {
            out.push_column(spec.name(), Section::Features, builder);
        }
        out.begin_row();
        let mut r = Reader::new(datum);
        self.record(&mut r, &one, &mut out)
            .map_err(|f| Error::Resolution {
                file: file.clone(),
                field: spec.name().to_string(),
                reason: match f {
                    Fail::Datum(d) => format!("the reader's default does not decode: {}", d.reason),
                    Fail::Feature(_, p) => format!("the reader's default: {p}"),
                },
            })?;
        let column = match out.columns_mut().first_mut().map(|c| &mut c.builder) {
            Some(ColumnBuilder::Dense(d)) => Constant::Dense(d.values.clone()),
            Some(ColumnBuilder::Sparse(s)) => {
                let rank = s.rank();
                Constant::Sparse {
                    values: s.values.clone(),
                    indices: s
                        .indices
                        .chunks_exact(rank + 1)
                        .flat_map(|entry| entry[1..].iter().copied())
                        .collect(),
                    shape: s.shape.clone(),
                }
            }
            _ => unreachable!("Avro columns are dense or sparse"),
        };
        Ok((col, column))
    }

    /// Whether the writer schema of `file` is registered.
    pub(crate) fn knows(&self, file: &Arc<str>) -> bool {
        if let Some(g) = &self.general {
            return g.knows(file);
        }
        matches!(&self.last, Some((f, _)) if Arc::ptr_eq(f, file)) || self.plans.contains_key(file)
    }

    /// An empty batch builder for the specs' columns, with room for `rows`
    /// rows in the dense columns.
    pub fn new_batch(&self, rows: usize) -> BatchBuilder {
        self.new_batch_with(rows, None)
    }

    /// Gives the memory of a consumed batch back for the next batch.
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
        if self.general.is_some() {
            general::new_columns(&self.specs, &self.limits, &mut b);
        }
        for spec in self.specs.iter().filter(|_| self.general.is_none()) {
            // check_specs rejected the kinds without a builder.
            if let Some(builder) = column_builder(spec) {
                b.push_column(spec.name(), Section::Features, builder);
            }
        }
        if let Some(spare) = spare {
            b.recycle(spare);
        }
        b.reserve_rows(rows);
        for (c, &(values, indices)) in b.columns_mut().iter_mut().zip(&self.per_row) {
            if let ColumnBuilder::Sparse(s) = &mut c.builder {
                s.values.reserve((values * rows as f64 * 1.1) as usize);
                s.indices.reserve((indices * rows as f64 * 1.1) as usize);
            }
        }
        b
    }

    /// Decodes records `rows` (positions within the block) of one block
    /// of `file` (its writer schema registered with
    /// [`add_schema`](Self::add_schema)), appending them to `out`. The
    /// block holds `record_count` records from record `first_record` of the
    /// file on; when `rows` reaches its end, bytes left over after the last
    /// record are an error (the count lied).
    #[allow(clippy::too_many_arguments)]
    pub fn decode_block(
        &mut self,
        file: &Arc<str>,
        block: u64,
        first_record: u64,
        data: &[u8],
        record_count: usize,
        rows: Range<usize>,
        out: &mut BatchBuilder,
    ) -> Result<()> {
        self.decode_block_to(file, block, first_record, data, record_count, rows, out)
            .map(|_| ())
    }

    /// [`decode_block`](Self::decode_block), returning where the record
    /// after the last decoded one starts in `data`.
    ///
    /// A caller taking a block a few rows at a time (batches smaller than
    /// a block) passes the rest of the block next time: `&data[offset..]`,
    /// `first_record` moved on and `record_count` reduced by the rows
    /// decoded, rows from 0. Asking for later rows of the whole block
    /// instead skips the earlier records again on every call.
    #[allow(clippy::too_many_arguments)]
    pub fn decode_block_to(
        &mut self,
        file: &Arc<str>,
        block: u64,
        first_record: u64,
        data: &[u8],
        record_count: usize,
        rows: Range<usize>,
        out: &mut BatchBuilder,
    ) -> Result<usize> {
        if let Some(g) = &mut self.general {
            return g.decode_block(
                &self.specs,
                file,
                block,
                first_record,
                data,
                record_count,
                rows,
                out,
            );
        }
        let at = || Location::block(file.clone(), block);
        let plan = match &self.last {
            Some((last, plan)) if Arc::ptr_eq(last, file) => plan.clone(),
            _ => {
                let plan = self.plans.get(file).cloned().ok_or_else(|| Error::Schema {
                    file: file.clone(),
                    feature: String::new(),
                    reason: "no writer schema was registered for this file".into(),
                })?;
                self.last = Some((file.clone(), plan.clone()));
                plan
            }
        };
        let min = plan.schema.min_size[plan.schema.root];
        // Records of a schema that takes no bytes (an empty record, a
        // record of nulls) are valid, and a block may claim any number of
        // them (Java writes a whole file of them as one block): nothing is
        // allocated by the count, rows before `rows.start` are stepped over
        // at once, and only the rows asked for are built. Otherwise every
        // record takes at least `min` bytes, which bounds the count.
        let first = match data.len().checked_div(min) {
            None if !data.is_empty() => {
                return Err(Error::Datum {
                    at: at().into(),
                    reason: format!(
                        "{} bytes left after the block's {record_count} records, \
                         which take no bytes",
                        data.len()
                    ),
                });
            }
            None => rows.start,
            Some(most) if record_count > most => {
                return Err(Error::BadBlock {
                    at: at().into(),
                    reason: format!(
                        "the block claims {record_count} records in {} bytes \
                         (records of this schema take at least {min})",
                        data.len()
                    ),
                });
            }
            Some(_) => 0,
        };
        let mut r = Reader::new(data);
        let end = rows.end.min(record_count);
        for i in first.min(end)..end {
            let record = first_record.saturating_add(i as u64);
            let res = if i < rows.start {
                plan.steps.iter().try_for_each(|s| {
                    let node = match s {
                        Step::Skip(n) => *n,
                        Step::Column { node, nullable, .. } if nullable.is_none() => *node,
                        Step::Column { .. } => return skip_nullable(&mut r, &plan.schema, s),
                    };
                    r.skip(&plan.schema, node, 1).map_err(Fail::from)
                })
            } else {
                out.begin_row();
                let res = self.record(&mut r, &plan, out);
                match &res {
                    Ok(()) => out.end_row(),
                    Err(_) => out.discard_row(),
                }
                res
            };
            if let Err(e) = res {
                return Err(match e {
                    Fail::Datum(d) => datum_error(at().with_record(record), d),
                    Fail::Feature(col, problem) => Error::Feature {
                        at: at()
                            .with_record(record)
                            .with_feature(self.specs[col].name())
                            .into(),
                        problem,
                    },
                });
            }
        }
        block_end(&r, end, record_count, at())
    }

    /// Finishes a batch.
    pub fn finish(&mut self, out: &mut BatchBuilder) -> Result<Batch> {
        let rows = out.rows().max(1) as f64;
        self.per_row = out
            .columns()
            .iter()
            .map(|c| match &c.builder {
                ColumnBuilder::Sparse(s) => {
                    (s.values.len() as f64 / rows, s.indices.len() as f64 / rows)
                }
                _ => (0.0, 0.0),
            })
            .collect();
        out.finish().map_err(Error::Spec)
    }

    /// Decodes one record.
    fn record(&mut self, r: &mut Reader<'_>, plan: &Plan, out: &mut BatchBuilder) -> Hot<()> {
        let schema = &*plan.schema;
        let row = out.next_row() as i64;
        let columns = out.columns_mut();
        for step in &plan.steps {
            let (col, nullable, fp) = match step {
                Step::Skip(n) => {
                    r.skip(schema, *n, 1)?;
                    continue;
                }
                Step::Column {
                    col,
                    nullable,
                    plan,
                    ..
                } => (*col, nullable, plan),
            };
            let builder = &mut columns[col].builder;
            if let Some(n) = nullable {
                let at = r.pos;
                match r.long()? {
                    b if b == n.null_branch => {
                        if n.null_is_error {
                            return Err(Fail::Datum(DatumError {
                                reason: "null, which the reader schema's type does not take",
                                offset: at,
                            }));
                        }
                        // Null: a dense feature takes its default; varlen
                        // and sparse features have no values.
                        if let (FieldPlan::Dense { default, .. }, ColumnBuilder::Dense(d)) =
                            (fp, &mut *builder)
                        {
                            match default {
                                Some(v) => {
                                    d.values.extend_from(v);
                                    d.end_row();
                                }
                                None => {
                                    return Err(Fail::Feature(
                                        col,
                                        FeatureProblem::NullWithoutDefault,
                                    ));
                                }
                            }
                        }
                        continue;
                    }
                    b if b == 1 - n.null_branch => {}
                    _ => {
                        return Err(Fail::Datum(DatumError {
                            reason: "union branch index out of range",
                            offset: at,
                        }));
                    }
                }
            }
            match (fp, builder) {
                (FieldPlan::Dense { leaf, dims, .. }, ColumnBuilder::Dense(d)) => {
                    if dims.is_empty() {
                        read_leaf(r, schema, *leaf, &mut d.values)?;
                    } else {
                        dense(r, schema, *leaf, dims, 0, &mut d.values)
                            .map_err(|f| with_col(f, col))?;
                    }
                    d.end_row();
                }
                (FieldPlan::Varlen { leaf, dims }, ColumnBuilder::Sparse(s)) => {
                    self.index.clear();
                    self.index.resize(dims.len(), 0);
                    varlen(r, schema, *leaf, dims, 0, row, &mut self.index, s)
                        .map_err(|f| with_col(f, col))?;
                }
                (FieldPlan::Sparse { parts }, ColumnBuilder::Sparse(s)) => {
                    sparse(r, schema, parts, row, &mut self.ids, s)
                        .map_err(|f| with_col(f, col))?;
                }
                _ => unreachable!("plan and builder layouts always match"),
            }
        }
        for (col, default) in &plan.defaults {
            match (default, &mut columns[*col].builder) {
                (Constant::Dense(v), ColumnBuilder::Dense(d)) => {
                    d.values.extend_from(v);
                    d.end_row();
                }
                (
                    Constant::Sparse {
                        values,
                        indices,
                        shape,
                    },
                    ColumnBuilder::Sparse(s),
                ) => {
                    s.values.extend_from(values);
                    for entry in indices.chunks_exact(shape.len().max(1)) {
                        s.indices.push(row);
                        s.indices.extend_from_slice(entry);
                    }
                    for (d, &n) in s.shape.iter_mut().zip(shape) {
                        *d = (*d).max(n);
                    }
                }
                _ => unreachable!("plan and builder layouts always match"),
            }
        }
        Ok(())
    }
}

/// An empty column builder for a spec of a kind Avro decodes.
fn column_builder(spec: &FeatureSpec) -> Option<ColumnBuilder> {
    Some(match spec {
        FeatureSpec::Dense(d) => ColumnBuilder::Dense(DenseBuilder::new(
            d.dtype,
            d.shape.iter().map(|&x| x.max(0) as usize).collect(),
        )),
        FeatureSpec::Sparse(s) => ColumnBuilder::Sparse(SparseBuilder::new(
            s.dtype,
            s.shape.clone().unwrap_or_default(),
        )),
        FeatureSpec::Varlen(v) => {
            let shape = match (&v.shape, v.rank) {
                (Some(shape), _) => shape.iter().map(|&x| x.max(0)).collect(),
                (None, Some(rank)) => vec![0; rank],
                (None, None) => vec![0],
            };
            ColumnBuilder::Sparse(SparseBuilder::new(v.dtype, shape))
        }
        _ => return None,
    })
}

/// Skips a nullable field: its union index, then its value unless null.
fn skip_nullable(r: &mut Reader<'_>, schema: &Schema, step: &Step) -> Hot<()> {
    if let Step::Column {
        nullable: Some(n),
        node,
        ..
    } = step
    {
        let at = r.pos;
        match r.long()? {
            b if b == n.null_branch => {}
            b if b == 1 - n.null_branch => r.skip(schema, *node, 1)?,
            _ => {
                return Err(Fail::Datum(DatumError {
                    reason: "union branch index out of range",
                    offset: at,
                }));
            }
        }
    }
    Ok(())
}

/// Attaches the column to a feature problem found below the record level.
fn with_col(f: Fail, col: usize) -> Fail {
    match f {
        Fail::Feature(_, p) => Fail::Feature(col, p),
        other => other,
    }
}

/// The fewest bytes one leaf takes (at least 1, so that a count of items
/// is always bounded by the bytes left).
pub(crate) fn leaf_size(leaf: Leaf) -> usize {
    match leaf {
        Leaf::Float => 4,
        Leaf::Double => 8,
        Leaf::Fixed(n) => n.max(1),
        _ => 1,
    }
}

/// Reads one leaf value into `out` (whose dtype the plan checked).
#[inline(always)]
pub(crate) fn read_leaf(
    r: &mut Reader<'_>,
    schema: &Schema,
    leaf: Leaf,
    out: &mut Values,
) -> DatumResult<()> {
    match (leaf, out) {
        (Leaf::Int, Values::Int32(v)) => v.push(r.int()?),
        (Leaf::Int, Values::Int64(v)) => v.push(r.int()? as i64),
        (Leaf::Int, Values::Float32(v)) => v.push(r.int()? as f32),
        (Leaf::Int, Values::Float64(v)) => v.push(r.int()? as f64),
        (Leaf::Long, Values::Int64(v)) => v.push(r.long()?),
        (Leaf::Long, Values::Float32(v)) => v.push(r.long()? as f32),
        (Leaf::Long, Values::Float64(v)) => v.push(r.long()? as f64),
        (Leaf::Float, Values::Float32(v)) => v.push(r.float()?),
        (Leaf::Float, Values::Float64(v)) => v.push(r.float()? as f64),
        (Leaf::Double, Values::Float64(v)) => v.push(r.double()?),
        (Leaf::Boolean, Values::Bool(v)) => v.push(r.boolean()?),
        (Leaf::Bytes, Values::String(v)) => v.push(r.bytes()?),
        (Leaf::Fixed(n), Values::String(v)) => v.push(r.take(n)?),
        (Leaf::Enum(node), Values::String(v)) => {
            let at = r.pos;
            let i = r.long()?;
            let out_of_range = DatumError {
                reason: "enum index out of range",
                offset: at,
            };
            let i = usize::try_from(i).map_err(|_| out_of_range)?;
            let s = match schema.node(node) {
                Node::Enum { symbols } => symbols.get(i).ok_or(out_of_range)?,
                // Through a reader schema: the reader's symbol.
                Node::EnumMap { symbols } => match symbols.get(i).ok_or(out_of_range)? {
                    Some((_, s)) => s,
                    None => {
                        return Err(DatumError {
                            reason: "the writer's enum symbol is not in the reader's enum, \
                                     which has no default",
                            offset: at,
                        });
                    }
                },
                _ => unreachable!("enum leaves point at enum nodes"),
            };
            v.push(s.as_bytes());
        }
        _ => unreachable!("the plan only pairs leaves with dtypes they fit"),
    }
    Ok(())
}

/// Reads `count` leaves into `out`, in bulk where the encoding allows.
#[inline]
pub(crate) fn read_leaves(
    r: &mut Reader<'_>,
    schema: &Schema,
    leaf: Leaf,
    count: usize,
    out: &mut Values,
) -> DatumResult<()> {
    match (leaf, &mut *out) {
        (Leaf::Float, Values::Float32(v)) => {
            let bytes = r.take(count * 4)?;
            grist_tensor::le::extend(v, bytes);
        }
        (Leaf::Double, Values::Float64(v)) => {
            let bytes = r.take(count * 8)?;
            grist_tensor::le::extend(v, bytes);
        }
        (Leaf::Long, Values::Int64(v)) => {
            v.reserve(count);
            r.longs(count, |x| v.push(x))?;
        }
        (Leaf::Int, Values::Int32(v)) => {
            v.reserve(count);
            r.ints(count, |x| v.push(x))?;
        }
        (Leaf::Int, Values::Int64(v)) => {
            v.reserve(count);
            r.ints(count, |x| v.push(x as i64))?;
        }
        _ => {
            out.reserve(count);
            for _ in 0..count {
                read_leaf(r, schema, leaf, out)?;
            }
        }
    }
    Ok(())
}

/// Reads `dims.len() - level` levels of nested arrays into a dense column,
/// checking each array's length after reading it (innermost first, as ATDS
/// reports).
fn dense(
    r: &mut Reader<'_>,
    schema: &Schema,
    leaf: Leaf,
    dims: &[usize],
    level: usize,
    out: &mut Values,
) -> Hot<()> {
    let last = level + 1 == dims.len();
    let min = if last { leaf_size(leaf) } else { 1 };
    let mut n = 0usize;
    // Fast path: writers put a fixed-length array in one block, whose count
    // (below 64) is one byte.
    let want = dims[level];
    if last && (1..64).contains(&want) && r.buf.get(r.pos) == Some(&((want as u8) << 1)) {
        r.pos += 1;
        read_leaves(r, schema, leaf, want, out)?;
        n = want;
    }
    loop {
        let count = r.block_count(min)?;
        if count == 0 {
            break;
        }
        if last {
            read_leaves(r, schema, leaf, count, out)?;
        } else {
            for _ in 0..count {
                dense(r, schema, leaf, dims, level + 1, out)?;
            }
        }
        n += count;
    }
    if n != dims[level] {
        return Err(Fail::Feature(
            0,
            FeatureProblem::WrongCount {
                dim: Some(level),
                expected: dims[level],
                actual: n,
            },
        ));
    }
    Ok(())
}

/// Reads nested arrays into a varlen (sparse) column: each leaf's index
/// tuple is the batch row and its position at every level. Returns
/// whether the list held any leaf.
///
/// An unknown size of the batch's `dense_shape` is, as ATDS makes it,
/// 1 + the largest index present at that level: lists at the end of a
/// list that hold no leaf (`[[1], [], []]`) do not count.
#[allow(clippy::too_many_arguments)]
fn varlen(
    r: &mut Reader<'_>,
    schema: &Schema,
    leaf: Leaf,
    dims: &[Option<usize>],
    level: usize,
    row: i64,
    index: &mut [i64],
    b: &mut SparseBuilder,
) -> Hot<bool> {
    let last = level + 1 == dims.len();
    let min = if last { leaf_size(leaf) } else { 1 };
    let mut n = 0usize;
    // 1 + the position of the last item holding a leaf.
    let mut top = 0usize;
    loop {
        let count = r.block_count(min)?;
        if count == 0 {
            break;
        }
        for _ in 0..count {
            index[level] = n as i64;
            if last {
                read_leaf(r, schema, leaf, &mut b.values)?;
                b.indices.push(row);
                b.indices.extend_from_slice(index);
                top = n + 1;
            } else if varlen(r, schema, leaf, dims, level + 1, row, index, b)? {
                top = n + 1;
            }
            n += 1;
        }
    }
    match dims[level] {
        Some(d) if d != n => {
            return Err(Fail::Feature(
                0,
                FeatureProblem::WrongCount {
                    dim: Some(level),
                    expected: d,
                    actual: n,
                },
            ));
        }
        Some(_) => {}
        None => b.shape[level] = b.shape[level].max(top as i64),
    }
    Ok(top > 0)
}

/// Reads an ATDS sparse record: index arrays and values, in stored order.
fn sparse(
    r: &mut Reader<'_>,
    schema: &Schema,
    parts: &[SparsePart],
    row: i64,
    ids: &mut [Vec<i64>],
    b: &mut SparseBuilder,
) -> Hot<()> {
    let rank = b.shape.len();
    let start = b.values.len();
    let base = b.indices.len();
    // Rank 1 (the common case): indices go straight into the COO buffer
    // as (row, index) pairs, checked as they go.
    let mut direct = 0usize;
    let mut out_of_range = false;
    for part in parts {
        match part {
            SparsePart::Index { k: 0, leaf } if rank == 1 => {
                let size = b.shape[0] as u64;
                loop {
                    let count = r.block_count(1)?;
                    if count == 0 {
                        break;
                    }
                    // (row, index) pairs: rows filled here, indices below.
                    let from = b.indices.len();
                    b.indices.resize(from + 2 * count, row);
                    let start = r.pos;
                    if indices_in_range(r, &mut b.indices[from..], size, *leaf) {
                        direct += count;
                        continue;
                    }
                    // The careful path, from the block's first index: the
                    // same values, and the same errors in the same order.
                    r.pos = start;
                    let mut pairs = b.indices[from..].chunks_exact_mut(2);
                    let mut put = |i: i64| {
                        out_of_range |= i as u64 >= size;
                        if let Some(pair) = pairs.next() {
                            pair[1] = i;
                        }
                    };
                    if matches!(leaf, Leaf::Int) {
                        r.ints(count, |v| put(v as i64))?;
                    } else {
                        r.longs(count, &mut put)?;
                    }
                    direct += count;
                }
            }
            SparsePart::Index { k, leaf } => {
                let out = &mut ids[*k];
                out.clear();
                loop {
                    let count = r.block_count(1)?;
                    if count == 0 {
                        break;
                    }
                    out.reserve(count);
                    if matches!(leaf, Leaf::Int) {
                        r.ints(count, |v| out.push(v as i64))?;
                    } else {
                        r.longs(count, |v| out.push(v))?;
                    }
                }
            }
            SparsePart::Values(leaf) => loop {
                let count = r.block_count(leaf_size(*leaf))?;
                if count == 0 {
                    break;
                }
                read_leaves(r, schema, *leaf, count, &mut b.values)?;
            },
            SparsePart::Skip(node) => r.skip(schema, *node, 1)?,
        }
    }
    let nnz = b.values.len() - start;
    if rank == 1 {
        if direct != nnz {
            return Err(index_count_mismatch(0, direct, nnz));
        }
        if out_of_range {
            let bad = b.indices[base..].iter().skip(1).step_by(2);
            let bad = bad.copied().find(|&i| i as u64 >= b.shape[0] as u64);
            return Err(index_out_of_range(0, bad.unwrap_or(-1), b.shape[0]));
        }
        return Ok(());
    }
    for (k, id) in ids.iter().take(rank).enumerate() {
        if id.len() != nnz {
            return Err(index_count_mismatch(k, id.len(), nnz));
        }
        if let Some(&bad) = id.iter().find(|&&i| i as u64 >= b.shape[k] as u64) {
            return Err(index_out_of_range(k, bad, b.shape[k]));
        }
    }
    // Row-major COO: each entry's batch row (filled here), then its index
    // in every dimension.
    b.indices.resize(base + nnz * (rank + 1), row);
    for (j, entry) in b.indices[base..].chunks_exact_mut(rank + 1).enumerate() {
        for (slot, id) in entry[1..].iter_mut().zip(ids.iter()) {
            *slot = id[j];
        }
    }
    Ok(())
}

/// Decodes a block of sparse indices into the index slots of `pairs`
/// ((row, index) pairs, one per index) when every index is a varint of at
/// most 8 bytes, with 8 bytes to read from its start, and every index is in
/// `[0, size)` (and in 32 bits for an `int` leaf). Returns false, with the
/// reader and the pairs in an unspecified state, when any is not: the
/// caller decodes the block again the careful way.
#[inline(never)]
fn indices_in_range(r: &mut Reader<'_>, pairs: &mut [i64], size: u64, leaf: Leaf) -> bool {
    // A bound past 2^63 would let negative indices through.
    let bound = match leaf {
        Leaf::Int => size.min(1 << 31),
        _ => size.min(1 << 63),
    };
    // Each index starts at or before `last`, so that 8 bytes are there.
    let Some(last) = r.buf.len().checked_sub(8) else {
        return false;
    };
    let mut p = r.pos;
    // The largest index as a rotated zig-zag varint: zig-zag maps an
    // even varint v to v / 2 and an odd one to a negative number, so
    // rotating right by one gives the index when it is not negative and
    // a number of 2^63 or more (out of range) when it is.
    let mut largest = 0u64;
    let mut pairs = pairs.chunks_exact_mut(2);
    // While 24 bytes remain: find where every varint of the next 16 bytes
    // ends at once (one bit per byte), and cut each out from its own
    // start. The next position depends on the 16-byte mask only, not on
    // decoding each index in turn (a chain of loads that made this loop
    // latency-bound).
    while pairs.len() > 0 && p + 24 <= r.buf.len() {
        let w0 = u64::from_le_bytes(r.buf[p..p + 8].try_into().unwrap_or_default());
        let w1 = u64::from_le_bytes(r.buf[p + 8..p + 16].try_into().unwrap_or_default());
        let mut ends = end_bits(w0) | end_bits(w1) << 8;
        if ends == 0 {
            // A varint over 16 bytes: not for this path.
            return false;
        }
        let mut start = 0usize;
        while ends != 0 {
            let Some(pair) = pairs.next() else {
                break;
            };
            let at = p + start;
            let Some((v, _)) = varint::decode_fast(&r.buf[at..at + 8]) else {
                return false;
            };
            let i = v.rotate_right(1);
            largest = largest.max(i);
            pair[1] = i as i64;
            start = ends.trailing_zeros() as usize + 1;
            ends &= ends - 1;
        }
        p += start;
    }
    for pair in pairs {
        if p > last {
            return false;
        }
        let Some((v, len)) = varint::decode_fast(&r.buf[p..p + 8]) else {
            return false;
        };
        let i = v.rotate_right(1);
        largest = largest.max(i);
        pair[1] = i as i64;
        p += len;
    }
    r.pos = p;
    largest < bound
}

/// One bit per byte of `word` (bit `k` for byte `k`) that ends a varint
/// (its high bit clear).
#[inline(always)]
fn end_bits(word: u64) -> u32 {
    // The clear high bits, gathered into the top byte by one product.
    let high = !word & 0x8080_8080_8080_8080;
    ((high >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32
}

#[cold]
fn index_count_mismatch(index: usize, indices: usize, values: usize) -> Fail {
    Fail::Feature(
        0,
        FeatureProblem::IndexCountMismatch {
            dim: Some(index),
            indices,
            values,
        },
    )
}

#[cold]
fn index_out_of_range(index: usize, value: i64, size: i64) -> Fail {
    Fail::Feature(
        0,
        FeatureProblem::IndexOutOfRange {
            dim: Some(index),
            index: value,
            size,
        },
    )
}

#[cfg(test)]
mod tests {
    use grist_tensor::DType;
    use grist_tensor::synth::SplitMix64;

    use super::*;

    fn put_long(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            out.push(z as u8 | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
    }

    /// What decoding one sparse record gives: the (row, index) pairs and
    /// the values, or the failure; and where the reader stopped.
    type Outcome = (std::result::Result<(Vec<i64>, Vec<f32>), String>, usize);

    fn outcome(res: Hot<()>, b: &SparseBuilder, pos: usize) -> Outcome {
        let Values::Float32(values) = &b.values else {
            unreachable!()
        };
        match res {
            Ok(()) => (Ok((b.indices.clone(), values.clone())), pos),
            Err(Fail::Datum(d)) => (Err(format!("{} at {}", d.reason, d.offset)), 0),
            Err(Fail::Feature(_, p)) => (Err(format!("{p:?}")), 0),
        }
    }

    /// The ATDS rules for one rank-1 sparse record, one value at a time:
    /// each index block decoded as longs (an int block then checked for
    /// 32-bit values), the values, then the count and the range.
    fn careful(buf: &[u8], int: bool, size: i64) -> Outcome {
        let mut r = Reader::new(buf);
        let mut b = SparseBuilder::new(DType::Float32, vec![size]);
        let res = (|| -> Hot<()> {
            let mut ids = Vec::new();
            loop {
                let count = r.block_count(1)?;
                if count == 0 {
                    break;
                }
                let start = r.pos;
                for _ in 0..count {
                    ids.push(r.long()?);
                }
                if int && ids.iter().any(|&i| i32::try_from(i).is_err()) {
                    r.pos = start;
                    for _ in 0..count {
                        r.int()?;
                    }
                }
            }
            let Values::Float32(values) = &mut b.values else {
                unreachable!()
            };
            loop {
                let count = r.block_count(4)?;
                if count == 0 {
                    break;
                }
                for _ in 0..count {
                    values.push(r.float()?);
                }
            }
            if ids.len() != values.len() {
                return Err(index_count_mismatch(0, ids.len(), values.len()));
            }
            if let Some(&bad) = ids.iter().find(|&&i| !(0..size).contains(&i)) {
                return Err(index_out_of_range(0, bad, size));
            }
            b.indices = ids.iter().flat_map(|&i| [7, i]).collect();
            Ok(())
        })();
        outcome(res, &b, r.pos)
    }

    #[test]
    fn sparse_indices_decode_as_one_by_one() {
        // Random records of indices that fit, sit at the edges of the
        // range, are negative, need 32 bits or more, or take 4 to 10
        // bytes; in one block or several (some with byte sizes); with
        // as many values or not; followed by 0 to 9 spare bytes (so the
        // last indices lack 8 bytes to read) or cut anywhere.
        let schema = Schema::parse(r#""null""#).unwrap();
        let mut rng = SplitMix64::new(19);
        for case in 0..4000 {
            let int = case % 2 == 1;
            let size = [1, 2, 50_001, 1 << 31, (1 << 31) + 5, 1 << 40, i64::MAX][case % 7];
            let n = rng.below(20) as usize;
            let ids: Vec<i64> = (0..n)
                .map(|_| match rng.below(10) {
                    0 => size,
                    1 => -1 - rng.below(1 << 20) as i64,
                    2 => (1i64 << 31) + rng.below(3) as i64 - 1,
                    3 => rng.next_u64() as i64,
                    4 => rng.below(size.unsigned_abs()) as i64 - 1,
                    _ => rng.below(size.min(100_000) as u64) as i64,
                })
                .collect();
            let mut buf = Vec::new();
            let mut left = &ids[..];
            while !left.is_empty() {
                let take = 1 + rng.below(left.len() as u64) as usize;
                let mut items = Vec::new();
                for &i in &left[..take] {
                    put_long(&mut items, i);
                }
                if rng.below(3) == 0 {
                    put_long(&mut buf, -(take as i64));
                    put_long(&mut buf, items.len() as i64);
                } else {
                    put_long(&mut buf, take as i64);
                }
                buf.extend(items);
                left = &left[take..];
            }
            buf.push(0);
            let values = if rng.below(8) == 0 { n + 1 } else { n };
            if values > 0 {
                put_long(&mut buf, values as i64);
                buf.extend((0..values).flat_map(|v| (v as f32).to_le_bytes()));
            }
            buf.push(0);
            let whole = buf.len();
            buf.extend((0..rng.below(10)).map(|_| rng.next_u64() as u8));
            let buf = match rng.below(4) {
                0 => &buf[..rng.below(whole as u64) as usize],
                _ => &buf[..],
            };
            let leaf = if int { Leaf::Int } else { Leaf::Long };
            let parts = [
                SparsePart::Index { k: 0, leaf },
                SparsePart::Values(Leaf::Float),
            ];
            let mut r = Reader::new(buf);
            let mut b = SparseBuilder::new(DType::Float32, vec![size]);
            let res = sparse(&mut r, &schema, &parts, 7, &mut [], &mut b);
            assert_eq!(
                outcome(res, &b, r.pos),
                careful(buf, int, size),
                "case {case}: {ids:?} in [0, {size}), int {int}, {buf:02x?}"
            );
        }
    }
}
