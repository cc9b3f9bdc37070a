//! Column builders: the buffers decoders append rows into.
//!
//! A decoder creates one [`BatchBuilder`] per batch (or per thread's share
//! of a batch), writes each record's values straight into the typed buffers
//! of its columns, and calls [`BatchBuilder::finish`] to get a [`Batch`].
//! Builders of the same specs filled on different threads are joined with
//! [`BatchBuilder::append`], which shifts row numbers and splits instead of
//! re-copying rows one by one.

use crate::{
    Batch, Column, DType, DenseTensor, RaggedTensor, Section, SparseTensor, Tensor, Values,
};

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
        let row_len = row_shape.iter().product();
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

    /// Reserves room for `rows` more rows.
    pub fn reserve_rows(&mut self, rows: usize) {
        self.values.reserve(rows.saturating_mul(self.row_len));
    }

    fn append(&mut self, other: DenseBuilder) {
        self.values.extend_from(&other.values);
        self.rows += other.rows;
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
}

impl SparseBuilder {
    /// A builder of the given dtype whose dense shape (without the batch
    /// dimension) starts as `shape`.
    pub fn new(dtype: DType, shape: Vec<i64>) -> Self {
        SparseBuilder {
            indices: Vec::new(),
            values: Values::new(dtype),
            base_shape: shape.clone(),
            shape,
        }
    }

    /// The rank of the indices including the batch dimension.
    pub fn rank(&self) -> usize {
        self.shape.len() + 1
    }

    fn append(&mut self, other: SparseBuilder, row_offset: usize) {
        let rank = self.rank();
        self.indices.reserve(other.indices.len());
        for tuple in other.indices.chunks(rank) {
            self.indices.push(tuple[0] + row_offset as i64);
            self.indices.extend_from_slice(&tuple[1..]);
        }
        self.values.extend_from(&other.values);
        for (a, b) in self.shape.iter_mut().zip(other.shape) {
            *a = (*a).max(b);
        }
    }

    fn finish(&mut self, rows: usize) -> SparseTensor {
        let mut dense_shape = Vec::with_capacity(self.rank());
        dense_shape.push(rows as i64);
        dense_shape.extend_from_slice(&self.shape);
        let dtype = self.values.dtype();
        self.shape.clone_from(&self.base_shape);
        SparseTensor {
            indices: std::mem::take(&mut self.indices),
            values: std::mem::replace(&mut self.values, Values::new(dtype)),
            dense_shape,
        }
    }
}

/// Builds a ragged column: flat values plus nested row splits, the first
/// level over the batch rows.
///
/// Every level of `splits` starts as `[0]`; the decoder pushes the end of
/// each row at each level.
#[derive(Clone, Debug)]
pub struct RaggedBuilder {
    /// The flat values.
    pub values: Values,
    /// The row splits, outermost (over the batch) first.
    pub splits: Vec<Vec<i64>>,
    /// The dtype the splits are reported in.
    pub row_splits_dtype: DType,
}

impl RaggedBuilder {
    /// A builder with `levels` levels of splits (at least 1: the batch).
    pub fn new(dtype: DType, levels: usize, row_splits_dtype: DType) -> Self {
        RaggedBuilder {
            values: Values::new(dtype),
            splits: vec![vec![0]; levels.max(1)],
            row_splits_dtype,
        }
    }

    fn append(&mut self, other: RaggedBuilder) {
        for (mine, theirs) in self.splits.iter_mut().zip(other.splits) {
            let base = *mine.last().unwrap_or(&0);
            mine.extend(theirs.iter().skip(1).map(|s| s + base));
        }
        self.values.extend_from(&other.values);
    }

    fn finish(&mut self) -> RaggedTensor {
        let dtype = self.values.dtype();
        let levels = self.splits.len();
        let values = std::mem::replace(&mut self.values, Values::new(dtype));
        RaggedTensor {
            nested_row_splits: std::mem::replace(&mut self.splits, vec![vec![0]; levels]),
            row_splits_dtype: self.row_splits_dtype,
            flat_values: DenseTensor {
                shape: vec![values.len()],
                values,
            },
        }
    }
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
}

impl PaddedBuilder {
    /// A builder of items of `item_shape`, padded with `pad` (one item's
    /// worth of values, or a single value repeated).
    pub fn new(item_shape: Vec<usize>, pad: Values) -> Self {
        let item_len = item_shape.iter().product();
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
        }
    }

    /// The number of values in one item.
    pub fn item_len(&self) -> usize {
        self.item_len
    }

    fn append(&mut self, other: PaddedBuilder) {
        self.values.extend_from(&other.values);
        self.steps.extend_from_slice(&other.steps);
    }

    fn finish(&mut self) -> (DenseTensor, Vec<i64>) {
        let max_steps = self.steps.iter().copied().max().unwrap_or(0);
        let mut values =
            Values::with_capacity(self.values.dtype(), self.steps.len() * max_steps * self.item_len);
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
        (DenseTensor { shape, values }, lengths)
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

/// The builders of every column of one batch, in spec order.
#[derive(Clone, Debug, Default)]
pub struct BatchBuilder {
    rows: usize,
    columns: Vec<BuilderColumn>,
}

impl BatchBuilder {
    /// An empty batch builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a column.
    pub fn push_column(&mut self, name: impl Into<String>, section: Section, builder: ColumnBuilder) {
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

    /// Reserves room for `rows` more rows in the dense columns.
    pub fn reserve_rows(&mut self, rows: usize) {
        for c in &mut self.columns {
            if let ColumnBuilder::Dense(d) = &mut c.builder {
                d.reserve_rows(rows);
            }
        }
    }

    /// Appends the rows of `other`, a builder made for the same specs, after
    /// the rows of `self`.
    ///
    /// # Panics
    ///
    /// When `other` has different columns (a caller bug).
    pub fn append(&mut self, other: BatchBuilder) {
        assert_eq!(self.columns.len(), other.columns.len(), "append: columns differ");
        let offset = self.rows;
        for (mine, theirs) in self.columns.iter_mut().zip(other.columns) {
            match (&mut mine.builder, theirs.builder) {
                (ColumnBuilder::Dense(a), ColumnBuilder::Dense(b)) => a.append(b),
                (ColumnBuilder::Sparse(a), ColumnBuilder::Sparse(b)) => a.append(b, offset),
                (ColumnBuilder::Ragged(a), ColumnBuilder::Ragged(b)) => a.append(b),
                (ColumnBuilder::Padded(a), ColumnBuilder::Padded(b)) => a.append(b),
                _ => panic!("append: column {} differs in layout", mine.name),
            }
        }
        self.rows += other.rows;
    }

    /// Finishes the batch, leaving the builder empty and ready for the next.
    pub fn finish(&mut self) -> Batch {
        let rows = std::mem::take(&mut self.rows);
        let mut columns = Vec::with_capacity(self.columns.len());
        let mut lengths = Vec::new();
        for c in &mut self.columns {
            let tensor = match &mut c.builder {
                ColumnBuilder::Dense(d) => Tensor::Dense(d.finish()),
                ColumnBuilder::Sparse(s) => Tensor::Sparse(s.finish(rows)),
                ColumnBuilder::Ragged(r) => Tensor::Ragged(r.finish()),
                ColumnBuilder::Padded(p) => {
                    let (dense, lens) = p.finish();
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
        columns.extend(lengths);
        Batch::new(rows, columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rows: std::ops::Range<i64>) -> BatchBuilder {
        let mut b = BatchBuilder::new();
        b.push_column("d", Section::Features, ColumnBuilder::Dense(DenseBuilder::new(DType::Int64, vec![2])));
        b.push_column("s", Section::Features, ColumnBuilder::Sparse(SparseBuilder::new(DType::Int64, vec![0])));
        b.push_column("r", Section::Features, ColumnBuilder::Ragged(RaggedBuilder::new(DType::Int64, 2, DType::Int64)));
        b.push_sequence_column("p", PaddedBuilder::new(vec![], Values::Int64(vec![-1])));
        for (local, r) in rows.enumerate() {
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
                            s.indices.extend([local as i64, j]);
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
                            let end = *g.splits[1].last().unwrap() + 1;
                            g.splits[1].push(end);
                        }
                        let end = *g.splits[0].last().unwrap() + r;
                        g.splits[0].push(end);
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
        b
    }

    #[test]
    fn append_equals_building_in_one_go() {
        let whole = sample(0..5).finish();
        let mut first = sample(0..2);
        first.append(sample(2..5));
        assert_eq!(first.finish(), whole);
        assert_eq!(whole.rows(), 5);
        let p = whole.get_in(Section::FeatureLists, "p").unwrap().as_dense().unwrap();
        assert_eq!(p.shape, vec![5, 4]);
        let lens = whole.get_in(Section::FeatureListLengths, "p").unwrap().as_dense().unwrap();
        assert_eq!(lens.values, Values::Int64(vec![0, 1, 2, 3, 4]));
    }
}
