//! Column builders: the buffers decoders append rows into.
//!
//! A decoder creates one [`BatchBuilder`] per batch (or per thread's share
//! of a batch), writes each record's values straight into the typed buffers
//! of its columns, and calls [`BatchBuilder::finish`] to get a [`Batch`].
//! Builders of the same specs filled on different threads are joined with
//! [`BatchBuilder::append`], which shifts row numbers and splits instead of
//! re-copying rows one by one.

use crate::{
    Batch, Column, DType, DenseTensor, Limits, RaggedTensor, Section, SparseTensor, Tensor,
    TensorError, Values,
};

/// The most values a dense column reserves ahead of its rows (2^24): see
/// [`DenseBuilder::reserve_rows`].
const MAX_RESERVE: usize = 1 << 24;

/// Builds a dense column of shape `[rows] + row_shape`.
///
/// The decoder appends exactly `row_len()` values per row to `values`, then
/// calls [`end_row`](Self::end_row).
#[derive(Clone, Debug)]
pub struct DenseBuilder {
    /// The values of the finished rows, row-major.
    pub values: Values,
    row_shape: Vec<usize>,
    row_len: usize,
    rows: usize,
}

impl DenseBuilder {
    /// A builder for rows of `row_shape`.
    pub fn new(dtype: DType, row_shape: Vec<usize>) -> Self {
        // Saturating: specs are checked by `shape_elements`; a larger
        // shape given here fails as its rows are appended instead.
        let row_len = row_shape.iter().fold(1usize, |n, &d| n.saturating_mul(d));
        DenseBuilder {
            values: Values::new(dtype),
            row_shape,
            row_len,
            rows: 0,
        }
    }

    /// The number of values in one row.
    pub fn row_len(&self) -> usize {
        self.row_len
    }

    /// The shape of one row.
    pub fn row_shape(&self) -> &[usize] {
        &self.row_shape
    }

    /// The number of finished rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Marks one more row as written.
    #[inline]
    pub fn end_row(&mut self) {
        self.rows += 1;
        debug_assert_eq!(self.values.len(), self.rows * self.row_len);
    }

    /// Reserves room for `rows` more rows, at most 2^24 values: beyond
    /// that the values grow as they are appended.
    pub fn reserve_rows(&mut self, rows: usize) {
        // Pre-sizing is a guess from the spec: past MAX_RESERVE the values
        // grow as the data brings them (a shape of 2^40 would otherwise
        // ask for petabytes before any record said so).
        self.values
            .reserve(rows.saturating_mul(self.row_len).min(MAX_RESERVE));
    }

    fn append(&mut self, other: &mut DenseBuilder) {
        self.values.extend_from(&other.values);
        self.rows += other.rows;
        other.values.clear();
        other.rows = 0;
    }

    fn finish(&mut self) -> DenseTensor {
        let mut shape = Vec::with_capacity(1 + self.row_shape.len());
        shape.push(self.rows);
        shape.extend_from_slice(&self.row_shape);
        self.rows = 0;
        let dtype = self.values.dtype();
        DenseTensor {
            shape,
            values: std::mem::replace(&mut self.values, Values::new(dtype)),
        }
    }
}

/// Builds a sparse COO column whose first index is the batch row.
///
/// The decoder pushes `rank` indices per value into `indices` (the batch
/// row first) and the value into `values`, and keeps `shape` (the dense
/// shape without the batch dimension) up to date: fixed by the spec, or the
/// running maximum for variable-length dimensions.
#[derive(Clone, Debug)]
pub struct SparseBuilder {
    /// The index tuples, `rank` entries per value, batch row first.
    pub indices: Vec<i64>,
    /// The values.
    pub values: Values,
    /// The dense shape without the batch dimension.
    pub shape: Vec<i64>,
    base_shape: Vec<i64>,
    row_start_shape: Vec<i64>,
}

impl SparseBuilder {
    /// A builder of the given dtype whose dense shape (without the batch
    /// dimension) starts as `shape`.
    pub fn new(dtype: DType, shape: Vec<i64>) -> Self {
        SparseBuilder {
            indices: Vec::new(),
            values: Values::new(dtype),
            base_shape: shape.clone(),
            row_start_shape: shape.clone(),
            shape,
        }
    }

    /// The rank of the indices including the batch dimension.
    pub fn rank(&self) -> usize {
        self.shape.len() + 1
    }

    fn discard_rows_from(&mut self, rows: usize) {
        let rank = self.rank();
        let mut keep = self.indices.len() / rank;
        while keep > 0 && self.indices[(keep - 1) * rank] >= rows as i64 {
            keep -= 1;
        }
        self.indices.truncate(keep * rank);
        self.values.truncate(keep);
        self.shape.clone_from(&self.row_start_shape);
    }

    fn append(&mut self, other: &mut SparseBuilder, row_offset: i64) {
        let rank = self.rank();
        // One bulk copy, then the batch rows moved on in place, unless the
        // part was decoded with its batch rows (`set_row_base`).
        let start = self.indices.len();
        self.indices.extend_from_slice(&other.indices);
        if row_offset != 0 {
            for tuple in self.indices[start..].chunks_exact_mut(rank) {
                tuple[0] += row_offset;
            }
        }
        self.values.extend_from(&other.values);
        for (a, b) in self.shape.iter_mut().zip(&other.shape) {
            *a = (*a).max(*b);
        }
        other.indices.clear();
        other.values.clear();
        other.shape.clone_from(&other.base_shape);
        other.row_start_shape.clone_from(&other.base_shape);
    }

    fn finish(&mut self, rows: usize) -> SparseTensor {
        let mut dense_shape = Vec::with_capacity(self.rank());
        dense_shape.push(rows as i64);
        dense_shape.extend_from_slice(&self.shape);
        let dtype = self.values.dtype();
        self.shape.clone_from(&self.base_shape);
        self.row_start_shape.clone_from(&self.base_shape);
        SparseTensor {
            indices: std::mem::take(&mut self.indices),
            values: std::mem::replace(&mut self.values, Values::new(dtype)),
            dense_shape,
        }
    }
}

/// How one level of a ragged tensor is described in the input
/// (TensorFlow's `RaggedFeature` partitions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionKind {
    /// Row splits (each record's list starts with 0).
    RowSplits,
    /// Row lengths.
    RowLengths,
    /// Row starts.
    RowStarts,
    /// Row limits.
    RowLimits,
    /// The row id of each value.
    ValueRowids,
    /// Rows of a fixed length.
    UniformRowLength(i64),
}

/// The raw values of one partition feature over the rows of a batch.
#[derive(Clone, Debug)]
pub struct PartitionBuffer {
    /// The partition kind.
    pub kind: PartitionKind,
    /// The partition values of every row, concatenated.
    pub values: Vec<i64>,
    /// `[0, end of row 0, end of row 1, ...]` into `values`.
    pub row_splits: Vec<i64>,
}

/// Builds a ragged column the way TensorFlow's batched `RaggedFeature`
/// parsing does: each row appends its flat values and the values of each
/// partition feature; [`BatchBuilder::finish`] applies the partitions,
/// innermost first, with TensorFlow's batched semantics.
///
/// With no partitions the result is `[batch, (values)]`. The decoder pushes
/// each row's values to `values` and then its end to `row_splits`, and for
/// each non-uniform partition its values and end likewise.
#[derive(Clone, Debug)]
pub struct RaggedBuilder {
    /// The flat values of every row.
    pub values: Values,
    /// `[0, end of row 0, ...]` into `values`.
    pub row_splits: Vec<i64>,
    /// The partitions, outermost first.
    pub partitions: Vec<PartitionBuffer>,
    /// The dtype the splits are reported in.
    pub row_splits_dtype: DType,
    /// Whether to check that the partitions are consistent (TensorFlow's
    /// `validate`); without it they are only checked enough to stay safe.
    pub validate: bool,
    max_rows: usize,
}

impl RaggedBuilder {
    /// A builder of `dtype` values with the given partitions (outermost
    /// first). `limits` bounds the rows a `value_rowids` partition may
    /// create.
    pub fn new(
        dtype: DType,
        partitions: &[PartitionKind],
        row_splits_dtype: DType,
        limits: &Limits,
    ) -> Self {
        RaggedBuilder {
            values: Values::new(dtype),
            row_splits: vec![0],
            partitions: partitions
                .iter()
                .map(|&kind| PartitionBuffer {
                    kind,
                    values: Vec::new(),
                    row_splits: vec![0],
                })
                .collect(),
            row_splits_dtype,
            validate: false,
            max_rows: (limits.max_alloc_bytes() / 8).min(usize::MAX as u64) as usize,
        }
    }

    /// Ends a row: records where its values (and partition values) end.
    #[inline]
    pub fn end_row(&mut self) {
        self.row_splits.push(self.values.len() as i64);
        for p in &mut self.partitions {
            p.row_splits.push(p.values.len() as i64);
        }
    }

    fn discard_rows_from(&mut self, rows: usize) {
        self.row_splits.truncate(rows + 1);
        self.values
            .truncate(self.row_splits.last().copied().unwrap_or(0) as usize);
        for p in &mut self.partitions {
            p.row_splits.truncate(rows + 1);
            p.values
                .truncate(p.row_splits.last().copied().unwrap_or(0) as usize);
        }
    }

    fn append(&mut self, other: &mut RaggedBuilder) {
        let base = self.values.len() as i64;
        self.row_splits
            .extend(other.row_splits.iter().skip(1).map(|s| s + base));
        self.values.extend_from(&other.values);
        other.values.clear();
        other.row_splits.truncate(1);
        for (mine, theirs) in self.partitions.iter_mut().zip(&mut other.partitions) {
            let base = mine.values.len() as i64;
            mine.row_splits
                .extend(theirs.row_splits.iter().skip(1).map(|s| s + base));
            mine.values.extend_from_slice(&theirs.values);
            theirs.values.clear();
            theirs.row_splits.truncate(1);
        }
    }

    fn finish(&mut self) -> Result<RaggedTensor, String> {
        let dtype = self.values.dtype();
        let values = std::mem::replace(&mut self.values, Values::new(dtype));
        let row_splits = std::mem::replace(&mut self.row_splits, vec![0]);
        let partitions: Vec<PartitionBuffer> = self
            .partitions
            .iter_mut()
            .map(|p| PartitionBuffer {
                kind: p.kind,
                values: std::mem::take(&mut p.values),
                row_splits: std::mem::replace(&mut p.row_splits, vec![0]),
            })
            .collect();
        let (levels, inner) = compose(values.len(), row_splits, &partitions, self.max_rows)?;
        if self.validate {
            validate(&levels, values.len() / inner.max(1))?;
        }
        let mut shape = vec![values.len() / inner.max(1)];
        if inner != 1 {
            shape.push(inner);
        }
        Ok(RaggedTensor {
            nested_row_splits: levels,
            row_splits_dtype: self.row_splits_dtype,
            flat_values: DenseTensor { shape, values },
        })
    }
}

/// Applies `partitions` (outermost first) to `[batch, (values)]` as
/// TensorFlow's `_add_batched_ragged_partition` does, innermost first.
/// Returns the nested row splits and the uniform inner dimension of the
/// flat values (1 when there is none).
fn compose(
    nvals: usize,
    row_splits: Vec<i64>,
    partitions: &[PartitionBuffer],
    max_rows: usize,
) -> Result<(Vec<Vec<i64>>, usize), String> {
    let mut levels = vec![row_splits];
    let mut inner: usize = 1;
    for p in partitions.iter().rev() {
        let batch = levels[0].len() - 1;
        // The number of rows of rt.values.
        let nrows_values = if levels.len() > 1 {
            levels[1].len() - 1
        } else {
            nvals / inner
        };
        let (outer, level): (Vec<i64>, Option<Vec<i64>>) = match p.kind {
            PartitionKind::UniformRowLength(len) => {
                if len <= 0 {
                    return Err(format!("uniform_row_length {len} must be positive"));
                }
                let outer = levels[0].iter().map(|s| s / len).collect();
                if levels.len() > 1 {
                    let groups = nrows_values / len as usize;
                    let uniform = (0..=groups as i64).map(|i| i * len).collect();
                    (outer, Some(uniform))
                } else {
                    if nrows_values % len as usize != 0 {
                        return Err(format!(
                            "{nrows_values} values cannot be reshaped into rows of {len}"
                        ));
                    }
                    inner *= len as usize;
                    (outer, None)
                }
            }
            kind => {
                let consistent = p.row_splits.len() == batch + 1
                    && p.row_splits.first() == Some(&0)
                    && p.row_splits.windows(2).all(|w| w[0] <= w[1])
                    && p.row_splits
                        .last()
                        .is_some_and(|&e| e as usize <= p.values.len());
                if !consistent {
                    return Err("partition buffer row splits are inconsistent".into());
                }
                let rows =
                    |r: usize| &p.values[p.row_splits[r] as usize..p.row_splits[r + 1] as usize];
                let starts = &levels[0];
                match kind {
                    PartitionKind::RowLengths => {
                        let mut level = Vec::with_capacity(p.values.len() + 1);
                        let mut acc = 0i64;
                        level.push(0);
                        for &l in &p.values {
                            acc = acc.wrapping_add(l);
                            level.push(acc);
                        }
                        (p.row_splits.clone(), Some(level))
                    }
                    PartitionKind::RowSplits | PartitionKind::RowLimits => {
                        let drop_first = kind == PartitionKind::RowSplits;
                        let mut outer = Vec::with_capacity(batch + 1);
                        let mut level = Vec::with_capacity(p.values.len() + 1);
                        outer.push(0);
                        level.push(0);
                        for (r, &start) in starts.iter().take(batch).enumerate() {
                            let v = rows(r);
                            let v = if drop_first && !v.is_empty() {
                                &v[1..]
                            } else {
                                v
                            };
                            level.extend(v.iter().map(|x| x.wrapping_add(start)));
                            outer.push((level.len() - 1) as i64);
                        }
                        (outer, Some(level))
                    }
                    PartitionKind::RowStarts => {
                        let mut level = Vec::with_capacity(p.values.len() + 1);
                        for (r, &start) in starts.iter().take(batch).enumerate() {
                            level.extend(rows(r).iter().map(|x| x.wrapping_add(start)));
                        }
                        level.push(nrows_values as i64);
                        (p.row_splits.clone(), Some(level))
                    }
                    PartitionKind::ValueRowids => {
                        let mut outer = Vec::with_capacity(batch + 1);
                        outer.push(0i64);
                        let mut adjusted = Vec::with_capacity(p.values.len());
                        let mut base = 0i64;
                        for r in 0..batch {
                            let v = rows(r);
                            let nrows = v
                                .iter()
                                .copied()
                                .max()
                                .map_or(0, |m| m.saturating_add(1))
                                .max(0);
                            if let Some(&neg) = v.iter().find(|&&x| x < 0) {
                                return Err(format!("negative value_rowid {neg}"));
                            }
                            // Checked before the ids are shifted: every id is
                            // below `nrows`, so none overflows past `end`.
                            let end = base.saturating_add(nrows);
                            if end as u64 > max_rows as u64 {
                                return Err(format!(
                                    "value_rowids describe {end} rows, over the limit"
                                ));
                            }
                            adjusted.extend(v.iter().map(|x| x + base));
                            base = end;
                            outer.push(base);
                        }
                        let total = adjusted.iter().copied().max().map_or(0, |m| m + 1) as usize;
                        let mut counts = vec![0i64; total];
                        for &id in &adjusted {
                            counts[id as usize] += 1;
                        }
                        let mut level = Vec::with_capacity(total + 1);
                        let mut acc = 0i64;
                        level.push(0);
                        for c in counts {
                            acc += c;
                            level.push(acc);
                        }
                        (outer, Some(level))
                    }
                    PartitionKind::UniformRowLength(_) => unreachable!("handled above"),
                }
            }
        };
        let rest = levels.split_off(1);
        levels = vec![outer];
        levels.extend(level);
        levels.extend(rest);
    }
    Ok((levels, inner))
}

/// TensorFlow's `validate=True` checks: each level starts at 0, never
/// decreases, and ends at the number of rows (or values) of the next.
fn validate(levels: &[Vec<i64>], nvals: usize) -> Result<(), String> {
    for (i, level) in levels.iter().enumerate() {
        let next = levels.get(i + 1).map_or(nvals, |l| l.len() - 1);
        if level.first() != Some(&0) {
            return Err(format!("row splits of level {i} do not start at 0"));
        }
        if level.windows(2).any(|w| w[1] < w[0]) {
            return Err(format!("row splits of level {i} decrease"));
        }
        if level.last().copied() != Some(next as i64) {
            return Err(format!(
                "row splits of level {i} end at {}, not at the {next} rows of the next level",
                level.last().copied().unwrap_or(0)
            ));
        }
    }
    Ok(())
}

/// Builds a dense column of sequences of fixed-shape items, padded to the
/// longest sequence of the batch: shape `[rows, max_steps] + item_shape`.
///
/// The decoder appends `steps × item_len()` values per row and pushes
/// `steps` to `steps`.
#[derive(Clone, Debug)]
pub struct PaddedBuilder {
    /// The values of every row, unpadded.
    pub values: Values,
    /// The number of items of each row.
    pub steps: Vec<usize>,
    item_shape: Vec<usize>,
    item_len: usize,
    pad: Values,
    limits: Limits,
}

impl PaddedBuilder {
    /// A builder of items of `item_shape`, padded with `pad` (one item's
    /// worth of values, or a single value repeated).
    pub fn new(item_shape: Vec<usize>, pad: Values) -> Self {
        let item_len = item_shape.iter().fold(1usize, |n, &d| n.saturating_mul(d));
        let pad = if pad.len() == item_len {
            pad
        } else {
            let mut p = Values::new(pad.dtype());
            if pad.len() == 1 {
                p.extend_repeat(&pad, item_len);
            }
            p
        };
        PaddedBuilder {
            values: Values::new(pad.dtype()),
            steps: Vec::new(),
            item_shape,
            item_len,
            pad,
            limits: Limits::default(),
        }
    }

    /// Bounds the padded values [`BatchBuilder::finish`] allocates: every
    /// row is padded to the longest, so one long record in a batch of many
    /// short ones asks for rows × its length. By default,
    /// [`Limits::default`].
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The number of values in one item.
    pub fn item_len(&self) -> usize {
        self.item_len
    }

    fn discard_rows_from(&mut self, rows: usize) {
        self.steps.truncate(rows);
        let n: usize = self.steps.iter().sum();
        self.values.truncate(n * self.item_len);
    }

    fn append(&mut self, other: &mut PaddedBuilder) {
        self.values.extend_from(&other.values);
        self.steps.extend_from_slice(&other.steps);
        other.values.clear();
        other.steps.clear();
    }

    fn finish(&mut self) -> Result<(DenseTensor, Vec<i64>), TensorError> {
        let max_steps = self.steps.iter().copied().max().unwrap_or(0);
        let n = (self.steps.len() as u64)
            .saturating_mul(max_steps as u64)
            .saturating_mul(self.item_len as u64);
        let mut bytes = n.saturating_mul(self.values.dtype().size_of() as u64);
        if let (Values::String(v), Values::String(pad)) = (&self.values, &self.pad) {
            let padded: u64 = self.steps.iter().map(|&s| (max_steps - s) as u64).sum();
            bytes = bytes
                .saturating_add(v.data().len() as u64)
                .saturating_add(padded.saturating_mul(pad.data().len() as u64));
        }
        if let Err(e) = self.limits.check_alloc("padded sequence values", bytes) {
            self.values.clear();
            self.steps.clear();
            return Err(e);
        }
        let mut values = Values::with_capacity(
            self.values.dtype(),
            self.steps.len() * max_steps * self.item_len,
        );
        let mut at = 0;
        for &s in &self.steps {
            let n = s * self.item_len;
            values.extend_from_range(&self.values, at..at + n);
            at += n;
            values.extend_repeat(&self.pad, max_steps - s);
        }
        let mut shape = vec![self.steps.len(), max_steps];
        shape.extend_from_slice(&self.item_shape);
        let lengths = self.steps.iter().map(|&s| s as i64).collect();
        self.values.clear();
        self.steps.clear();
        Ok((DenseTensor { shape, values }, lengths))
    }
}

/// The builder of one column, by layout.
#[derive(Clone, Debug)]
pub enum ColumnBuilder {
    /// A dense column.
    Dense(DenseBuilder),
    /// A sparse column.
    Sparse(SparseBuilder),
    /// A ragged column.
    Ragged(RaggedBuilder),
    /// A padded sequence column.
    Padded(PaddedBuilder),
}

/// One named column under construction.
#[derive(Clone, Debug)]
pub struct BuilderColumn {
    /// The output name.
    pub name: String,
    /// The section of the record it belongs to.
    pub section: Section,
    /// For padded columns: also emit a `feature_list_lengths` column.
    pub emit_lengths: bool,
    /// The builder.
    pub builder: ColumnBuilder,
}

/// `columns` in two groups (those marked in `second` in the second), in
/// order.
fn split_columns<'c>(
    columns: &'c mut [BuilderColumn],
    second: &[bool],
) -> [Vec<&'c mut BuilderColumn>; 2] {
    let mut groups = [Vec::new(), Vec::new()];
    for (col, &g) in columns.iter_mut().zip(second) {
        groups[usize::from(g)].push(col);
    }
    groups
}

/// Appends, for each of `theirs` in order (with its sparse row offset in
/// `offsets`), its columns to the matching ones of `mine`.
fn append_job<'c>(
    mut mine: Vec<&'c mut BuilderColumn>,
    mut theirs: Vec<Vec<&'c mut BuilderColumn>>,
    offsets: &'c [i64],
) -> impl FnMut() + Send + 'c {
    move || {
        for (other, &offset) in theirs.iter_mut().zip(offsets) {
            for (m, t) in mine.iter_mut().zip(other.iter_mut()) {
                m.append(t, offset);
            }
        }
    }
}

impl BuilderColumn {
    /// Appends `other`'s rows (leaving it empty), their sparse rows moved
    /// by `row_offset`.
    fn append(&mut self, other: &mut BuilderColumn, row_offset: i64) {
        match (&mut self.builder, &mut other.builder) {
            (ColumnBuilder::Dense(a), ColumnBuilder::Dense(b)) => a.append(b),
            (ColumnBuilder::Sparse(a), ColumnBuilder::Sparse(b)) => a.append(b, row_offset),
            (ColumnBuilder::Ragged(a), ColumnBuilder::Ragged(b)) => a.append(b),
            (ColumnBuilder::Padded(a), ColumnBuilder::Padded(b)) => a.append(b),
            _ => panic!("append: column {} differs in layout", self.name),
        }
    }
}

impl ColumnBuilder {
    /// About the bytes an append of this column copies (its values and
    /// indices; a share of the work, not an allocation size).
    fn bytes(&self) -> usize {
        let values = |v: &Values| v.len() * v.dtype().size_of();
        match self {
            ColumnBuilder::Dense(d) => values(&d.values),
            ColumnBuilder::Sparse(s) => values(&s.values) + 8 * s.indices.len(),
            ColumnBuilder::Ragged(r) => values(&r.values) + 8 * r.row_splits.len(),
            ColumnBuilder::Padded(p) => values(&p.values) + 8 * p.steps.len(),
        }
    }
}

/// How long the buffers of a batch's sparse and ragged columns were, column
/// by column: kept from one batch to pre-size the builder of the next
/// ([`BatchBuilder::reserve_like`]) when its memory was not given back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchSizes {
    columns: Vec<ColumnSizes>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ColumnSizes {
    Other,
    Sparse {
        values: usize,
        bytes: usize,
        indices: usize,
    },
    Ragged {
        values: usize,
        bytes: usize,
        splits: usize,
    },
}

impl BatchSizes {
    /// No sizes: [`BatchBuilder::reserve_like`] reserves nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the sizes of `batch`'s columns (in the memory of the last
    /// ones taken).
    pub fn measure(&mut self, batch: &Batch) {
        self.columns.clear();
        self.columns
            .extend(batch.columns().iter().map(|c| match &c.tensor {
                Tensor::Sparse(t) => ColumnSizes::Sparse {
                    values: t.values.len(),
                    bytes: t.values.string_bytes(),
                    indices: t.indices.len(),
                },
                Tensor::Ragged(t) => ColumnSizes::Ragged {
                    values: t.flat_values.values.len(),
                    bytes: t.flat_values.values.string_bytes(),
                    splits: t.nested_row_splits.first().map_or(0, Vec::len),
                },
                _ => ColumnSizes::Other,
            }));
    }
}

/// The builders of every column of one batch, in spec order.
#[derive(Clone, Debug, Default)]
pub struct BatchBuilder {
    rows: usize,
    /// The batch row number of the first row (a part of a batch decoded
    /// on its own: see [`BatchBuilder::set_row_base`]).
    row_base: usize,
    columns: Vec<BuilderColumn>,
}

impl BatchBuilder {
    /// An empty batch builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a column.
    pub fn push_column(
        &mut self,
        name: impl Into<String>,
        section: Section,
        builder: ColumnBuilder,
    ) {
        self.columns.push(BuilderColumn {
            name: name.into(),
            section,
            emit_lengths: false,
            builder,
        });
    }

    /// Adds a padded column that also yields its lengths.
    pub fn push_sequence_column(&mut self, name: impl Into<String>, builder: PaddedBuilder) {
        self.columns.push(BuilderColumn {
            name: name.into(),
            section: Section::FeatureLists,
            emit_lengths: true,
            builder: ColumnBuilder::Padded(builder),
        });
    }

    /// The number of finished rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The batch row number the next row gets: the rows finished, plus
    /// the row base. Decoders write it into sparse indices.
    #[inline]
    pub fn next_row(&self) -> usize {
        self.row_base + self.rows
    }

    /// Sets the batch row number of the first row, for a builder that
    /// decodes a part of a batch on its own: its sparse indices then carry
    /// their rows in the whole batch, and [`append_from`](Self::append_from)
    /// into the builder holding the rows before them copies them as they
    /// are (no row fix-up). Takes effect for rows not yet written; `0` by
    /// default.
    pub fn set_row_base(&mut self, base: usize) {
        self.row_base = base;
    }

    /// Marks one more row as finished (every column has received it).
    #[inline]
    pub fn end_row(&mut self) {
        self.rows += 1;
    }

    /// The columns.
    pub fn columns(&self) -> &[BuilderColumn] {
        &self.columns
    }

    /// The columns, for writing.
    pub fn columns_mut(&mut self) -> &mut [BuilderColumn] {
        &mut self.columns
    }

    /// The builder of column `i`.
    pub fn column_mut(&mut self, i: usize) -> &mut ColumnBuilder {
        &mut self.columns[i].builder
    }

    /// Starts a row: remembers what [`discard_row`](Self::discard_row)
    /// needs to undo it.
    #[inline]
    pub fn begin_row(&mut self) {
        for c in &mut self.columns {
            if let ColumnBuilder::Sparse(s) = &mut c.builder {
                s.row_start_shape.clone_from(&s.shape);
            }
        }
    }

    /// Discards whatever was written since the last finished row (after
    /// an error in the middle of a row), so only whole rows remain.
    pub fn discard_row(&mut self) {
        let rows = self.rows;
        for c in &mut self.columns {
            match &mut c.builder {
                ColumnBuilder::Dense(d) => {
                    d.rows = rows;
                    d.values.truncate(rows * d.row_len);
                }
                ColumnBuilder::Sparse(s) => s.discard_rows_from(self.row_base + rows),
                ColumnBuilder::Ragged(r) => r.discard_rows_from(rows),
                ColumnBuilder::Padded(p) => p.discard_rows_from(rows),
            }
        }
    }

    /// Takes back the memory of a finished batch of the same columns, so
    /// the next batch reuses it instead of fresh allocations (which cost
    /// page faults and kernel zeroing for large batches). Only columns
    /// that are still empty take buffers; a batch of other columns gives
    /// nothing.
    pub fn recycle(&mut self, batch: Batch) {
        fn take(into: &mut Values, from: Values) {
            if into.is_empty() && into.dtype() == from.dtype() {
                let mut from = from;
                from.clear();
                *into = from;
            }
        }
        for (c, column) in self.columns.iter_mut().zip(batch.into_columns()) {
            match (&mut c.builder, column.tensor) {
                (ColumnBuilder::Dense(d), Tensor::Dense(t)) => take(&mut d.values, t.values),
                (ColumnBuilder::Sparse(s), Tensor::Sparse(t)) => {
                    take(&mut s.values, t.values);
                    if s.indices.is_empty() {
                        let mut indices = t.indices;
                        indices.clear();
                        s.indices = indices;
                    }
                }
                (ColumnBuilder::Ragged(r), Tensor::Ragged(t)) => {
                    take(&mut r.values, t.flat_values.values)
                }
                (ColumnBuilder::Padded(p), Tensor::Dense(t)) => take(&mut p.values, t.values),
                _ => {}
            }
        }
    }

    /// This empty builder made ready for `rows` rows: in the memory of
    /// `spare` (a batch given back, see [`recycle`](Self::recycle)) if
    /// there is one, or else with its sparse and ragged columns reserved
    /// as large as an earlier batch's `sizes` ([`reserve_like`](Self::reserve_like)),
    /// and its dense columns reserved for the rows. (Reserving first and
    /// recycling then would allocate every column and free it again at
    /// once: with large batches, a heap grown and trimmed per batch.)
    #[must_use]
    pub fn reusing(mut self, spare: Option<Batch>, sizes: &BatchSizes, rows: usize) -> Self {
        match spare {
            Some(spare) => self.recycle(spare),
            None => self.reserve_like(sizes),
        }
        self.reserve_rows(rows);
        self
    }

    /// Reserves room for `rows` more rows in the dense columns.
    pub fn reserve_rows(&mut self, rows: usize) {
        for c in &mut self.columns {
            if let ColumnBuilder::Dense(d) = &mut c.builder {
                d.reserve_rows(rows);
            }
        }
    }

    /// Reserves, in each sparse and ragged column, room for as many values
    /// (indices, row splits, string bytes) as `sizes` measured in an
    /// earlier batch and an eighth more, at most 2^24 of each: a builder without a recycled
    /// batch then does not grow its buffers by reallocation (each of which
    /// copies what is there) while the parts of the batch are appended.
    /// Dense columns are sized by [`reserve_rows`](Self::reserve_rows).
    pub fn reserve_like(&mut self, sizes: &BatchSizes) {
        // An eighth more: batches differ in size, and one slightly larger
        // than the last would otherwise reallocate (copy) it all once.
        let cap = |n: usize| n.saturating_add(n / 8).min(MAX_RESERVE);
        for (c, s) in self.columns.iter_mut().zip(&sizes.columns) {
            match (&mut c.builder, s) {
                (
                    ColumnBuilder::Sparse(b),
                    ColumnSizes::Sparse {
                        values,
                        bytes,
                        indices,
                    },
                ) => {
                    b.values.reserve_with_bytes(cap(*values), cap(*bytes));
                    b.indices.reserve(cap(*indices));
                }
                (
                    ColumnBuilder::Ragged(b),
                    ColumnSizes::Ragged {
                        values,
                        bytes,
                        splits,
                    },
                ) => {
                    b.values.reserve_with_bytes(cap(*values), cap(*bytes));
                    b.row_splits.reserve(cap(*splits));
                }
                _ => {}
            }
        }
    }

    /// Appends the rows of `other`, a builder made for the same specs, after
    /// the rows of `self`.
    ///
    /// # Panics
    ///
    /// When `other` has different columns (a caller bug).
    pub fn append(&mut self, mut other: BatchBuilder) {
        self.append_from(&mut other);
    }

    /// Appends the rows of `other`, a builder made for the same specs,
    /// after the rows of `self`, and leaves `other` empty with its memory,
    /// ready for another part of another batch (no fresh allocation per
    /// part and batch).
    ///
    /// # Panics
    ///
    /// When `other` has different columns (a caller bug).
    pub fn append_from(&mut self, other: &mut BatchBuilder) {
        self.append_all_from(&mut [other], |_, a, b| {
            a();
            b();
        });
    }

    /// Appends the rows of each of `others` (builders made for the same
    /// specs) in order, after the rows of `self`, and leaves them empty
    /// with their memory, as [`append_from`](Self::append_from) on each in
    /// turn would; the copying is split into two jobs, each appending
    /// some of the columns (about half the bytes) of every one of
    /// `others`, which `run` runs, on two threads if it likes (the columns
    /// are disjoint), given first about how many bytes there are to copy
    /// (too few are not worth waking a thread for).
    ///
    /// Joining the parts of a batch decoded on two threads this way keeps
    /// both at work instead of one copying while the other waits.
    ///
    /// ```
    /// use grist_tensor::{BatchBuilder, ColumnBuilder, DType, DenseBuilder, Section};
    ///
    /// let part = |from: i64, to: i64| {
    ///     let mut b = BatchBuilder::new();
    ///     b.push_column("x", Section::Features, ColumnBuilder::Dense(DenseBuilder::new(DType::Int64, vec![])));
    ///     b.push_column("y", Section::Features, ColumnBuilder::Dense(DenseBuilder::new(DType::Int64, vec![])));
    ///     for v in from..to {
    ///         b.begin_row();
    ///         for c in 0..2 {
    ///             let ColumnBuilder::Dense(d) = b.column_mut(c) else { unreachable!() };
    ///             let grist_tensor::Values::Int64(x) = &mut d.values else { unreachable!() };
    ///             x.push(v * (c as i64 + 1));
    ///             d.end_row();
    ///         }
    ///         b.end_row();
    ///     }
    ///     b
    /// };
    /// let (mut whole, mut a, mut b) = (part(0, 2), part(2, 5), part(5, 6));
    /// whole.append_all_from(&mut [&mut a, &mut b], |_bytes, x, y| std::thread::scope(|s| {
    ///     s.spawn(|| x());
    ///     y();
    /// }));
    /// assert_eq!((whole.rows(), a.rows(), b.rows()), (6, 0, 0));
    /// assert_eq!(whole.finish().unwrap(), part(0, 6).finish().unwrap());
    /// ```
    ///
    /// # Panics
    ///
    /// When one of `others` has different columns (a caller bug).
    pub fn append_all_from(
        &mut self,
        others: &mut [&mut BatchBuilder],
        run: impl FnOnce(usize, &mut (dyn FnMut() + Send), &mut (dyn FnMut() + Send)),
    ) {
        let n = self.columns.len();
        for other in others.iter() {
            assert_eq!(n, other.columns.len(), "append: columns differ");
        }
        // How far each one's sparse rows move (none when it was decoded
        // with its batch rows).
        let mut next = self.next_row();
        let offsets: Vec<i64> = others
            .iter()
            .map(|o| {
                let offset = next as i64 - o.row_base as i64;
                next += o.rows;
                offset
            })
            .collect();
        // The columns into two groups of about equal bytes, largest first.
        let bytes: Vec<usize> = (0..n)
            .map(|c| others.iter().map(|o| o.columns[c].builder.bytes()).sum())
            .collect();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&c| std::cmp::Reverse(bytes[c]));
        let mut second = vec![false; n];
        let mut loads = [0usize; 2];
        for c in order {
            let g = usize::from(loads[1] < loads[0]);
            second[c] = g == 1;
            loads[g] += bytes[c];
        }
        let [mine_a, mine_b] = split_columns(&mut self.columns, &second);
        let (mut theirs_a, mut theirs_b) = (Vec::new(), Vec::new());
        let mut rows = 0;
        for other in others.iter_mut() {
            rows += other.rows;
            other.rows = 0;
            let [a, b] = split_columns(&mut other.columns, &second);
            theirs_a.push(a);
            theirs_b.push(b);
        }
        let mut a = append_job(mine_a, theirs_a, &offsets);
        let mut b = append_job(mine_b, theirs_b, &offsets);
        run(loads[0] + loads[1], &mut a, &mut b);
        self.rows += rows;
    }

    /// Finishes the batch, leaving the builder empty and ready for the next
    /// (also when it fails).
    ///
    /// Fails when a ragged column's partitions cannot be applied, or when
    /// a padded column would exceed its [`Limits`].
    pub fn finish(&mut self) -> Result<Batch, TensorError> {
        let rows = std::mem::take(&mut self.rows);
        let mut columns = Vec::with_capacity(self.columns.len());
        let mut lengths = Vec::new();
        let mut error = None;
        for c in &mut self.columns {
            let tensor = match &mut c.builder {
                ColumnBuilder::Dense(d) => Tensor::Dense(d.finish()),
                ColumnBuilder::Sparse(s) => Tensor::Sparse(s.finish(rows)),
                ColumnBuilder::Ragged(r) => match r.finish() {
                    Ok(t) => Tensor::Ragged(t),
                    Err(reason) => {
                        // The first error is reported; the other columns
                        // are still emptied for the next batch.
                        error.get_or_insert(TensorError::BadRagged {
                            feature: c.name.clone(),
                            reason,
                        });
                        continue;
                    }
                },
                ColumnBuilder::Padded(p) => {
                    let (dense, lens) = match p.finish() {
                        Ok(done) => done,
                        Err(e) => {
                            error.get_or_insert(e);
                            continue;
                        }
                    };
                    if c.emit_lengths {
                        lengths.push(Column {
                            name: c.name.clone(),
                            section: Section::FeatureListLengths,
                            tensor: Tensor::Dense(DenseTensor {
                                shape: vec![lens.len()],
                                values: Values::Int64(lens),
                            }),
                        });
                    }
                    Tensor::Dense(dense)
                }
            };
            columns.push(Column {
                name: c.name.clone(),
                section: c.section,
                tensor,
            });
        }
        if let Some(e) = error {
            return Err(e);
        }
        columns.extend(lengths);
        Ok(Batch::new(rows, columns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rows: std::ops::Range<i64>) -> BatchBuilder {
        let mut b = empty();
        fill(&mut b, rows);
        b
    }

    fn empty() -> BatchBuilder {
        let mut b = BatchBuilder::new();
        b.push_column(
            "d",
            Section::Features,
            ColumnBuilder::Dense(DenseBuilder::new(DType::Int64, vec![2])),
        );
        b.push_column(
            "s",
            Section::Features,
            ColumnBuilder::Sparse(SparseBuilder::new(DType::Int64, vec![0])),
        );
        b.push_column(
            "r",
            Section::Features,
            ColumnBuilder::Ragged(RaggedBuilder::new(
                DType::Int64,
                &[PartitionKind::RowLengths],
                DType::Int64,
                &Limits::default(),
            )),
        );
        b.push_sequence_column("p", PaddedBuilder::new(vec![], Values::Int64(vec![-1])));
        b
    }

    fn fill(b: &mut BatchBuilder, rows: std::ops::Range<i64>) {
        for r in rows {
            // As decoders do: sparse rows are numbered from the row base.
            let row = b.next_row() as i64;
            for c in b.columns_mut() {
                match &mut c.builder {
                    ColumnBuilder::Dense(d) => {
                        if let Values::Int64(v) = &mut d.values {
                            v.extend([r, -r]);
                        }
                        d.end_row();
                    }
                    ColumnBuilder::Sparse(s) => {
                        for j in 0..r {
                            s.indices.extend([row, j]);
                            if let Values::Int64(v) = &mut s.values {
                                v.push(r);
                            }
                        }
                        s.shape[0] = s.shape[0].max(r);
                    }
                    ColumnBuilder::Ragged(g) => {
                        // r inner rows of one value each.
                        for _ in 0..r {
                            if let Values::Int64(v) = &mut g.values {
                                v.push(r);
                            }
                            g.partitions[0].values.push(1);
                        }
                        g.end_row();
                    }
                    ColumnBuilder::Padded(p) => {
                        if let Values::Int64(v) = &mut p.values {
                            v.extend(0..r);
                        }
                        p.steps.push(r as usize);
                    }
                }
            }
            b.end_row();
        }
    }

    fn capacities(b: &BatchBuilder) -> (usize, usize, usize, usize) {
        let cap = |v: &Values| match v {
            Values::Int64(v) => v.capacity(),
            other => panic!("{other:?}"),
        };
        match (&b.columns()[1].builder, &b.columns()[2].builder) {
            (ColumnBuilder::Sparse(s), ColumnBuilder::Ragged(r)) => (
                cap(&s.values),
                s.indices.capacity(),
                cap(&r.values),
                r.row_splits.capacity(),
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reserve_like_sizes_a_builder_as_the_measured_batch() {
        let batch = sample(0..9).finish().unwrap();
        let mut sizes = BatchSizes::new();
        sizes.measure(&batch);
        let mut b = empty();
        b.reserve_like(&sizes);
        let (Tensor::Sparse(s), Tensor::Ragged(r)) =
            (&batch.columns()[1].tensor, &batch.columns()[2].tensor)
        else {
            panic!("{batch:?}")
        };
        let (sv, si, rv, rs) = capacities(&b);
        assert!(sv >= s.values.len() && si >= s.indices.len());
        assert!(rv >= r.flat_values.values.len() && rs >= r.nested_row_splits[0].len());
        // Filling the builder so sized gives the same batch.
        fill(&mut b, 0..9);
        assert_eq!(b.finish().unwrap(), batch);
        // Without sizes nothing is reserved.
        let mut b = empty();
        b.reserve_like(&BatchSizes::new());
        assert_eq!(capacities(&b), (0, 0, 0, 1));
    }

    #[test]
    fn reserve_like_reserves_at_most_max_reserve_of_each() {
        let huge = usize::MAX;
        let sizes = BatchSizes {
            columns: vec![
                ColumnSizes::Other,
                ColumnSizes::Sparse {
                    values: huge,
                    bytes: huge,
                    indices: huge,
                },
                ColumnSizes::Ragged {
                    values: huge,
                    bytes: huge,
                    splits: huge,
                },
            ],
        };
        let mut b = empty();
        b.reserve_like(&sizes);
        let (sv, si, rv, rs) = capacities(&b);
        for c in [sv, si, rv, rs] {
            assert!((MAX_RESERVE..=MAX_RESERVE + 1).contains(&c), "{c}");
        }
    }

    #[test]
    fn recycled_batches_give_the_same_results() {
        let mut b = empty();
        b.recycle(sample(0..3).finish().unwrap());
        // The recycled columns are empty but keep their capacity.
        match &b.columns()[1].builder {
            ColumnBuilder::Sparse(s) => assert!(s.indices.is_empty() && s.indices.capacity() > 0),
            other => panic!("{other:?}"),
        }
        fill(&mut b, 0..4);
        assert_eq!(b.finish().unwrap(), sample(0..4).finish().unwrap());
    }

    #[test]
    fn discard_row_restores_whole_rows() {
        let expected = sample(0..3).finish().unwrap();
        let mut b = sample(0..3);
        b.begin_row();
        // Half a row: the dense, sparse and ragged columns get data.
        for c in b.columns_mut() {
            match &mut c.builder {
                ColumnBuilder::Dense(d) => {
                    if let Values::Int64(v) = &mut d.values {
                        v.extend([7, 7]);
                    }
                    d.end_row();
                }
                ColumnBuilder::Sparse(s) => {
                    s.indices.extend([3, 9]);
                    if let Values::Int64(v) = &mut s.values {
                        v.push(1);
                    }
                    s.shape[0] = 99;
                }
                ColumnBuilder::Ragged(g) => {
                    if let Values::Int64(v) = &mut g.values {
                        v.push(5);
                    }
                    g.partitions[0].values.push(1);
                    g.end_row();
                }
                ColumnBuilder::Padded(_) => {}
            }
        }
        b.discard_row();
        assert_eq!(b.finish().unwrap(), expected);
    }

    #[test]
    fn append_from_leaves_a_reusable_empty_builder() {
        let mut part = sample(2..5);
        let mut first = sample(0..2);
        first.append_from(&mut part);
        assert_eq!(part.rows(), 0);
        assert_eq!(first.finish().unwrap(), sample(0..5).finish().unwrap());
        // The emptied part fills and joins again like a new one.
        fill(&mut part, 3..6);
        let mut again = sample(0..3);
        again.append_from(&mut part);
        assert_eq!(again.finish().unwrap(), sample(0..6).finish().unwrap());
        assert_eq!(part.finish().unwrap(), empty().finish().unwrap());
    }

    #[test]
    fn parts_with_a_row_base_join_without_fix_ups() {
        let whole = sample(0..7).finish().unwrap();
        let mut first = sample(0..2);
        let mut part = empty();
        part.set_row_base(2);
        fill(&mut part, 2..7);
        assert_eq!(part.rows(), 5);
        assert_eq!(part.next_row(), 7);
        // Discarding a half-written row keeps the rows before it, by their
        // batch numbers.
        part.begin_row();
        if let ColumnBuilder::Sparse(s) = &mut part.columns_mut()[1].builder {
            s.indices.extend([7, 0]);
            if let Values::Int64(v) = &mut s.values {
                v.push(9);
            }
        }
        part.discard_row();
        first.append_from(&mut part);
        assert_eq!(first.finish().unwrap(), whole);
        // A base that does not match the rows before is moved on as before.
        let mut first = sample(0..3);
        part.set_row_base(1);
        fill(&mut part, 3..7);
        first.append_from(&mut part);
        assert_eq!(first.finish().unwrap(), sample(0..7).finish().unwrap());
    }

    #[test]
    fn rank_3_sparse_rows_move_on_when_joined() {
        let three = || {
            let mut b = BatchBuilder::new();
            b.push_column(
                "s",
                Section::Features,
                ColumnBuilder::Sparse(SparseBuilder::new(DType::Int64, vec![4, 4])),
            );
            b
        };
        let put = |b: &mut BatchBuilder, n: i64| {
            for r in 0..n {
                let row = b.next_row() as i64;
                if let ColumnBuilder::Sparse(s) = &mut b.columns_mut()[0].builder {
                    s.indices.extend([row, r, r + 1]);
                    if let Values::Int64(v) = &mut s.values {
                        v.push(r);
                    }
                }
                b.end_row();
            }
        };
        let mut whole = three();
        put(&mut whole, 2);
        put(&mut whole, 3);
        let mut first = three();
        put(&mut first, 2);
        let mut part = three();
        put(&mut part, 3);
        first.append_from(&mut part);
        assert_eq!(first.finish().unwrap(), whole.finish().unwrap());
    }

    #[test]
    fn append_equals_building_in_one_go() {
        let whole = sample(0..5).finish().unwrap();
        let mut first = sample(0..2);
        first.append(sample(2..5));
        assert_eq!(first.finish().unwrap(), whole);
        let r = whole.get("r").unwrap().as_ragged().unwrap();
        assert_eq!(
            r.nested_row_splits,
            vec![vec![0, 0, 1, 3, 6, 10], (0..=10).collect::<Vec<_>>()]
        );
        assert_eq!(whole.rows(), 5);
        let p = whole
            .get_in(Section::FeatureLists, "p")
            .unwrap()
            .as_dense()
            .unwrap();
        assert_eq!(p.shape, vec![5, 4]);
        let lens = whole
            .get_in(Section::FeatureListLengths, "p")
            .unwrap()
            .as_dense()
            .unwrap();
        assert_eq!(lens.values, Values::Int64(vec![0, 1, 2, 3, 4]));
    }

    #[test]
    fn appending_many_parts_on_two_threads_equals_building_in_one_go() {
        let whole = sample(0..12).finish().unwrap();
        // Parts with and without their batch row base; both halves of the
        // columns copied on their own threads.
        let mut head = sample(0..3);
        let mut a = empty();
        a.set_row_base(3);
        fill(&mut a, 3..4);
        let mut b = sample(4..8);
        let mut c = empty();
        c.set_row_base(8);
        fill(&mut c, 8..12);
        let mut jobs = 0;
        head.append_all_from(&mut [&mut a, &mut b, &mut c], |_, x, y| {
            std::thread::scope(|s| {
                s.spawn(y);
                x();
            });
            jobs += 2;
        });
        assert_eq!(jobs, 2);
        assert_eq!([a.rows(), b.rows(), c.rows()], [0, 0, 0]);
        assert_eq!(head.finish().unwrap(), whole);
        // The emptied parts build again.
        fill(&mut b, 0..2);
        assert_eq!(b.finish().unwrap(), sample(0..2).finish().unwrap());
    }
}
