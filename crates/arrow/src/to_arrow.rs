//! `Batch` → `RecordBatch`: the batch's vectors moved into Arrow buffers.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, FixedSizeListArray, Float32Array, Float64Array, Int32Array, Int64Array,
    LargeBinaryArray, LargeListArray, LargeStringArray, RecordBatch, RecordBatchOptions,
    StructArray,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{Field, Fields, Schema};
use grist_tensor::{
    Batch, Column, DenseTensor, FeatureSpec, RaggedSpec, RaggedTensor, Section, SparseTensor,
    SpecFile, StringValues, Tensor, Values, VarlenSpec,
};

use crate::Error;
use crate::schema::{self, LENGTHS_KIND, SEQUENCE_KEY};

/// Converts `batch` into an Arrow record batch, moving its value buffers
/// into Arrow's without copying them (see the crate docs for the mapping
/// and what is copied).
///
/// `spec` says what each column is (a sparse tensor is a varlen feature or
/// a sparse one); a column it does not name is described from its tensor
/// (a sparse tensor as a varlen feature). Each field's metadata carries the
/// feature's spec, so [`from_record_batch`](crate::from_record_batch) and
/// [`spec_from_schema`](crate::spec_from_schema) get the same features back.
pub fn to_record_batch(batch: Batch, spec: &SpecFile) -> Result<RecordBatch, Error> {
    let rows = batch.rows();
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for column in batch.into_columns() {
        let Column {
            name,
            section,
            tensor,
        } = column;
        let feature = find(spec, section, &name)
            .cloned()
            .unwrap_or_else(|| describe(&name, &tensor));
        let field_name = schema::field_name(section, &name);
        let array = convert(&field_name, &feature, tensor, rows)?;
        let kind = if section == Section::FeatureListLengths {
            LENGTHS_KIND
        } else {
            feature.kind()
        };
        let spec = (section != Section::FeatureListLengths).then_some(&feature);
        fields.push(
            Field::new(field_name, array.data_type().clone(), false)
                .with_metadata(schema::metadata(section, &name, kind, spec)),
        );
        arrays.push(array);
    }
    let mut schema = Schema::new(fields);
    if spec.sequence || !spec.context_features.is_empty() || !spec.sequence_features.is_empty() {
        let metadata =
            std::collections::HashMap::from([(SEQUENCE_KEY.to_string(), "true".to_string())]);
        schema = schema.with_metadata(metadata);
    }
    // The row count is given: a batch without columns still has rows.
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(
        Arc::new(schema),
        arrays,
        &options,
    )?)
}

/// The spec of the column `name` in `section`.
pub(crate) fn find<'a>(
    spec: &'a SpecFile,
    section: Section,
    name: &str,
) -> Option<&'a FeatureSpec> {
    let list = match section {
        Section::Features => &spec.features,
        Section::Context => &spec.context_features,
        Section::FeatureLists => &spec.sequence_features,
        Section::FeatureListLengths => return None,
    };
    list.iter().find(|f| f.name() == name)
}

/// A spec for a column that the given spec does not name.
fn describe(name: &str, tensor: &Tensor) -> FeatureSpec {
    match tensor {
        Tensor::Dense(d) => {
            let shape = d
                .shape
                .iter()
                .skip(1)
                .map(|&x| x as i64)
                .collect::<Vec<_>>();
            FeatureSpec::dense(name, d.dtype(), shape)
        }
        // A varlen feature as `VarLenFeature` (rank 1) or with its rank.
        Tensor::Sparse(s) if s.rank() <= 2 => FeatureSpec::varlen(name, s.dtype()),
        Tensor::Sparse(s) => FeatureSpec::Varlen(VarlenSpec {
            name: name.to_string(),
            dtype: s.dtype(),
            shape: None,
            rank: Some(s.rank() - 1),
            tf_class: None,
            atds_class: None,
        }),
        Tensor::Ragged(r) => FeatureSpec::Ragged(RaggedSpec {
            name: name.to_string(),
            dtype: r.dtype(),
            value_key: None,
            partitions: Vec::new(),
            row_splits_dtype: r.row_splits_dtype,
            validate: false,
            tf_class: None,
        }),
        // `Tensor` is non-exhaustive: a future layout is described as a
        // dense scalar and refused by `convert`.
        other => FeatureSpec::dense(name, other.dtype(), []),
    }
}

fn convert(
    column: &str,
    feature: &FeatureSpec,
    tensor: Tensor,
    rows: usize,
) -> Result<ArrayRef, Error> {
    match (feature, tensor) {
        (FeatureSpec::Dense(d), Tensor::Dense(t)) => {
            let lists: Vec<bool> = d.shape.iter().map(|&x| x < 0).collect();
            dense(column, t, rows, &lists)
        }
        (FeatureSpec::FixedLenSequence(f), Tensor::Dense(t)) => {
            // The steps dimension is padded to the batch's longest
            // sequence: a list, so that the Arrow type does not change
            // from batch to batch.
            let lists: Vec<bool> = std::iter::once(true)
                .chain(f.shape.iter().map(|&x| x < 0))
                .collect();
            dense(column, t, rows, &lists)
        }
        (_, Tensor::Dense(t)) => dense(column, t, rows, &[]),
        (FeatureSpec::Sparse(_), Tensor::Sparse(s)) => sparse(column, s, rows),
        (_, Tensor::Sparse(s)) => varlen(column, s, rows),
        (_, Tensor::Ragged(r)) => ragged(column, r, rows),
        (_, other) => Err(Error::layout(
            column,
            format!("unknown tensor layout of {}", other.dtype()),
        )),
    }
}

/// The flat values as an Arrow array: the vectors moved into Arrow
/// buffers, except bools, which Arrow packs into bits.
pub(crate) fn leaf(values: Values) -> ArrayRef {
    #[allow(unreachable_patterns)]
    match values {
        Values::Bool(v) => Arc::new(BooleanArray::from(v)),
        Values::Int32(v) => Arc::new(Int32Array::new(ScalarBuffer::from(v), None)),
        Values::Int64(v) => Arc::new(Int64Array::new(ScalarBuffer::from(v), None)),
        Values::Float32(v) => Arc::new(Float32Array::new(ScalarBuffer::from(v), None)),
        Values::Float64(v) => Arc::new(Float64Array::new(ScalarBuffer::from(v), None)),
        Values::String(s) => strings(s),
        // `Values` is non-exhaustive; every dtype grist has is above, and a
        // new one would be added here.
        other => unreachable!("grist dtype {} has no Arrow type here", other.dtype()),
    }
}

/// Strings as `LargeUtf8` when every one is UTF-8, else `LargeBinary`; the
/// bytes moved, the offsets reinterpreted as `i64` in place on 64-bit
/// targets (a copy elsewhere).
fn strings(s: StringValues) -> ArrayRef {
    let (data, offsets) = s.into_parts();
    let offsets: Vec<i64> = match bytemuck::allocation::try_cast_vec::<usize, i64>(offsets) {
        Ok(v) => v,
        Err((_, v)) => v.into_iter().map(|o| o as i64).collect(),
    };
    // StringValues keeps its offsets valid (from 0, non-decreasing, ending
    // at the data's length), which is all OffsetBuffer::new asks.
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    let data = Buffer::from_vec(data);
    // Buffers are reference counted: trying UTF-8 first costs no copy.
    match LargeStringArray::try_new(offsets.clone(), data.clone(), None) {
        Ok(utf8) => Arc::new(utf8),
        Err(_) => Arc::new(LargeBinaryArray::new(offsets, data, None)),
    }
}

fn item(array: &ArrayRef) -> Arc<Field> {
    Arc::new(Field::new("item", array.data_type().clone(), false))
}

/// A list level over `child` (the offsets checked before they are moved).
pub(crate) fn list(column: &str, offsets: Vec<i64>, child: ArrayRef) -> Result<ArrayRef, Error> {
    let valid = offsets.first() == Some(&0)
        && offsets.windows(2).all(|w| w[0] <= w[1])
        && offsets.last().is_some_and(|&e| e as usize <= child.len());
    if !valid {
        return Err(Error::layout(
            column,
            "row splits are not a valid partition of the values",
        ));
    }
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    Ok(Arc::new(LargeListArray::try_new(
        item(&child),
        offsets,
        child,
        None,
    )?))
}

fn fixed(child: ArrayRef, size: usize, len: usize) -> Result<ArrayRef, Error> {
    Ok(Arc::new(FixedSizeListArray::try_new_with_length(
        item(&child),
        size as i32,
        child,
        None,
        len,
    )?))
}

/// Dense `[rows, d1, ...]`: fixed-size lists over the flat values, or
/// (where `lists[k]` says the dimension is padded to the batch) a list of
/// uniform offsets, so the Arrow type does not depend on the batch.
fn dense(column: &str, t: DenseTensor, rows: usize, lists: &[bool]) -> Result<ArrayRef, Error> {
    let DenseTensor { shape, values } = t;
    if shape.first().copied().unwrap_or(0) != rows
        || shape.iter().product::<usize>() != values.len()
    {
        return Err(Error::layout(
            column,
            format!(
                "shape {shape:?} does not fit {rows} rows of {} values",
                values.len()
            ),
        ));
    }
    let mut array = leaf(values);
    for k in (1..shape.len()).rev() {
        let outer: usize = shape[..k].iter().product();
        let size = shape[k];
        if i32::try_from(size).is_err() {
            return Err(Error::layout(
                column,
                format!("dimension {size} is too large for Arrow"),
            ));
        }
        array = if lists.get(k - 1).copied().unwrap_or(false) {
            let offsets = (0..=outer).map(|i| (i * size) as i64).collect();
            list(column, offsets, array)?
        } else {
            fixed(array, size, outer)?
        };
    }
    Ok(array)
}

/// Row offsets of COO indices of `rank` entries (the batch row first),
/// checking the rows are sorted and in the batch.
fn row_offsets(column: &str, indices: &[i64], rank: usize, rows: usize) -> Result<Vec<i64>, Error> {
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0i64);
    for (k, t) in indices.chunks_exact(rank.max(1)).enumerate() {
        let row = t[0];
        if row < 0 || row as usize >= rows || (row as usize) + 1 < offsets.len() {
            return Err(Error::layout(
                column,
                "sparse indices are not sorted by batch row",
            ));
        }
        while offsets.len() <= row as usize {
            offsets.push(k as i64);
        }
    }
    let nnz = (indices.len() / rank.max(1)) as i64;
    offsets.resize(rows + 1, nnz);
    Ok(offsets)
}

/// Sparse features: a struct of `indices` (per row, a list of the index
/// tuples without the batch row: copied) and `values` (per row, a list of
/// the values: moved).
fn sparse(column: &str, s: SparseTensor, rows: usize) -> Result<ArrayRef, Error> {
    let SparseTensor {
        indices,
        values,
        dense_shape,
    } = s;
    let nnz = values.len();
    let rank = dense_shape.len();
    if rank == 0 || indices.len() != rank * nnz {
        return Err(Error::layout(
            column,
            "sparse indices do not match the values",
        ));
    }
    let offsets = row_offsets(column, &indices, rank, rows)?;
    let tuples: Vec<i64> = indices
        .chunks_exact(rank)
        .flat_map(|t| t[1..].iter().copied())
        .collect();
    let tuples = fixed(leaf(Values::Int64(tuples)), rank - 1, nnz)?;
    let indices = list(column, offsets.clone(), tuples)?;
    let values = list(column, offsets, leaf(values))?;
    let fields = Fields::from(vec![
        Field::new("indices", indices.data_type().clone(), false),
        Field::new("values", values.data_type().clone(), false),
    ]);
    Ok(Arc::new(StructArray::try_new_with_length(
        fields,
        vec![indices, values],
        None,
        rows,
    )?))
}

/// Varlen features: lists nested `rank - 1` deep. Each row's list holds as
/// many items as its largest index says (gaps become empty lists); the
/// innermost lists hold the values, which are moved.
fn varlen(column: &str, s: SparseTensor, rows: usize) -> Result<ArrayRef, Error> {
    let SparseTensor {
        indices,
        values,
        dense_shape,
    } = s;
    let rank = dense_shape.len();
    let nnz = values.len();
    if rank < 2 || indices.len() != rank * nnz {
        return Err(Error::layout(
            column,
            "varlen indices do not match the values",
        ));
    }
    let at = |k: usize, l: usize| indices[k * rank + l];
    let unsorted = || Error::layout(column, "varlen indices are not sorted");
    // Groups of entries (ranges), one per list of the current level.
    let first = row_offsets(column, &indices, rank, rows)?;
    let mut groups: Vec<(usize, usize)> = first
        .windows(2)
        .map(|w| (w[0] as usize, w[1] as usize))
        .collect();
    let mut levels = Vec::with_capacity(rank - 1);
    for l in 1..rank {
        let mut offsets = Vec::with_capacity(groups.len() + 1);
        offsets.push(0i64);
        let mut next = Vec::new();
        let mut total = 0i64;
        for &(start, end) in &groups {
            if l == rank - 1 {
                // The innermost lists: positions 0, 1, ... in order.
                if (start..end).any(|k| at(k, l) != (k - start) as i64) {
                    return Err(unsorted());
                }
                total += (end - start) as i64;
            } else {
                let n = if start == end { 0 } else { at(end - 1, l) + 1 };
                let mut k = start;
                for j in 0..n {
                    let from = k;
                    while k < end && at(k, l) == j {
                        k += 1;
                    }
                    next.push((from, k));
                }
                if k != end {
                    return Err(unsorted());
                }
                total += n;
            }
            offsets.push(total);
        }
        levels.push(offsets);
        groups = next;
    }
    let mut array = leaf(values);
    for offsets in levels.into_iter().rev() {
        array = list(column, offsets, array)?;
    }
    Ok(array)
}

/// Ragged: a list per level of row splits (the splits moved), over the
/// flat values (fixed-size lists for their inner dimensions).
fn ragged(column: &str, r: RaggedTensor, rows: usize) -> Result<ArrayRef, Error> {
    let RaggedTensor {
        nested_row_splits,
        flat_values,
        ..
    } = r;
    if nested_row_splits.first().map(Vec::len) != Some(rows + 1) {
        return Err(Error::layout(
            column,
            "the outer row splits do not fit the batch",
        ));
    }
    let flat_rows = flat_values.shape.first().copied().unwrap_or(0);
    let mut array = dense(column, flat_values, flat_rows, &[])?;
    for splits in nested_row_splits.into_iter().rev() {
        array = list(column, splits, array)?;
    }
    Ok(array)
}
