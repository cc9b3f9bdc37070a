//! A range of rows of a batch: `cat --limit` cuts its last batch with it,
//! and the demo compares decoded batches with generated chunks of other
//! sizes.

use anyhow::bail;
use grist_tensor::{Batch, Column, DenseTensor, RaggedTensor, SparseTensor, Tensor, Values};

/// Rows `rows` of a batch. Dense columns keep their inner shape (a padded
/// column keeps the whole batch's padding); sparse columns keep their
/// `dense_shape` past the first dimension (their indices must be sorted by
/// row, as decoders produce them); ragged columns keep the values of the
/// rows taken.
pub(crate) fn slice_rows(batch: &Batch, rows: std::ops::Range<usize>) -> anyhow::Result<Batch> {
    if rows.start > rows.end || rows.end > batch.rows() {
        bail!(
            "rows {}..{} of a batch of {}",
            rows.start,
            rows.end,
            batch.rows()
        );
    }
    let mut columns = Vec::with_capacity(batch.columns().len());
    for c in batch.columns() {
        let tensor = match &c.tensor {
            Tensor::Dense(d) => Tensor::Dense(dense_rows(d, rows.clone())),
            Tensor::Sparse(s) => Tensor::Sparse(sparse_rows(s, rows.clone())),
            Tensor::Ragged(r) => match ragged_rows(r, rows.clone()) {
                Some(r) => Tensor::Ragged(r),
                None => bail!("feature {:?}: its row splits do not fit its values", c.name),
            },
            _ => bail!(
                "feature {:?}: slicing this column's layout is not supported",
                c.name
            ),
        };
        columns.push(Column {
            name: c.name.clone(),
            section: c.section,
            tensor,
        });
    }
    Ok(Batch::new(rows.len(), columns))
}

/// Rows `rows` (of the first dimension) of a dense tensor.
fn dense_rows(d: &DenseTensor, rows: std::ops::Range<usize>) -> DenseTensor {
    let row_len: usize = d.shape.iter().skip(1).product();
    let mut values = Values::new(d.dtype());
    let end = (rows.end * row_len).min(d.values.len());
    let start = (rows.start * row_len).min(end);
    values.extend_from_range(&d.values, start..end);
    let mut shape = d.shape.clone();
    if let Some(first) = shape.first_mut() {
        *first = rows.len();
    }
    DenseTensor { shape, values }
}

/// Rows `rows` of a sparse tensor (indices sorted by row).
fn sparse_rows(s: &SparseTensor, rows: std::ops::Range<usize>) -> SparseTensor {
    let rank = s.rank().max(1);
    let row_of = |i: usize| s.indices[i * rank];
    let nnz = s.nnz();
    let lo = partition_point(nnz, |i| row_of(i) < rows.start as i64);
    let hi = partition_point(nnz, |i| row_of(i) < rows.end as i64);
    let mut indices = s.indices[lo * rank..hi * rank].to_vec();
    for tuple in indices.chunks_mut(rank) {
        tuple[0] -= rows.start as i64;
    }
    let mut values = Values::new(s.dtype());
    values.extend_from_range(&s.values, lo..hi);
    let mut dense_shape = s.dense_shape.clone();
    if let Some(first) = dense_shape.first_mut() {
        *first = rows.len() as i64;
    }
    SparseTensor {
        indices,
        values,
        dense_shape,
    }
}

/// Rows `rows` of a ragged tensor: each level of splits cut to the rows
/// below the ones taken and moved to start at 0; `None` when the splits
/// do not fit the values.
fn ragged_rows(r: &RaggedTensor, rows: std::ops::Range<usize>) -> Option<RaggedTensor> {
    let mut range = rows;
    let mut nested_row_splits = Vec::with_capacity(r.nested_row_splits.len());
    for splits in &r.nested_row_splits {
        let level = splits.get(range.start..=range.end)?;
        let base = *level.first()?;
        nested_row_splits.push(level.iter().map(|s| s - base).collect());
        let start = usize::try_from(base).ok()?;
        let end = usize::try_from(*level.last()?).ok()?;
        if start > end {
            return None;
        }
        range = start..end;
    }
    if range.end > r.flat_values.shape.first().copied().unwrap_or(0) {
        return None;
    }
    Some(RaggedTensor {
        nested_row_splits,
        row_splits_dtype: r.row_splits_dtype,
        flat_values: dense_rows(&r.flat_values, range),
    })
}

/// The first `i` in `0..n` for which `pred` is false (`pred` must be true
/// then false over the range).
fn partition_point(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use grist_tensor::{DType, Section};

    use super::*;

    fn column(name: &str, tensor: Tensor) -> Column {
        Column {
            name: name.into(),
            section: Section::Features,
            tensor,
        }
    }

    #[test]
    fn ragged_rows_keep_their_values() {
        // Rows [[1, 2], [], [3]] then [[4]]: two levels.
        let ragged = RaggedTensor {
            nested_row_splits: vec![vec![0, 3, 4], vec![0, 2, 2, 3, 4]],
            row_splits_dtype: DType::Int64,
            flat_values: DenseTensor {
                shape: vec![4],
                values: Values::Int64(vec![1, 2, 3, 4]),
            },
        };
        let batch = Batch::new(2, vec![column("r", Tensor::Ragged(ragged))]);
        let second = slice_rows(&batch, 1..2).unwrap();
        let Tensor::Ragged(r) = &second.columns()[0].tensor else {
            panic!("not ragged");
        };
        assert_eq!(r.nested_row_splits, [vec![0, 1], vec![0, 1]]);
        assert_eq!(r.flat_values.values, Values::Int64(vec![4]));
        let first = slice_rows(&batch, 0..1).unwrap();
        let Tensor::Ragged(r) = &first.columns()[0].tensor else {
            panic!("not ragged");
        };
        assert_eq!(r.nested_row_splits, [vec![0, 3], vec![0, 2, 2, 3]]);
        assert_eq!(r.flat_values.shape, [3]);
        assert!(slice_rows(&batch, 1..3).is_err());
    }

    #[test]
    fn dense_and_sparse_rows() {
        let dense = DenseTensor {
            shape: vec![3, 2],
            values: Values::Int64(vec![1, 2, 3, 4, 5, 6]),
        };
        let sparse = SparseTensor {
            indices: vec![0, 0, 2, 0, 2, 1],
            values: Values::Int64(vec![7, 8, 9]),
            dense_shape: vec![3, 2],
        };
        let batch = Batch::new(
            3,
            vec![
                column("d", Tensor::Dense(dense)),
                column("s", Tensor::Sparse(sparse)),
            ],
        );
        let cut = slice_rows(&batch, 2..3).unwrap();
        assert_eq!(cut.rows(), 1);
        let Tensor::Dense(d) = &cut.columns()[0].tensor else {
            panic!("not dense");
        };
        assert_eq!(
            (d.shape.clone(), &d.values),
            (vec![1, 2], &Values::Int64(vec![5, 6]))
        );
        let Tensor::Sparse(s) = &cut.columns()[1].tensor else {
            panic!("not sparse");
        };
        assert_eq!(s.indices, [0, 0, 0, 1]);
        assert_eq!(s.values, Values::Int64(vec![8, 9]));
        assert_eq!(s.dense_shape, [1, 2]);
    }
}
