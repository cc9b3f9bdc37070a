//! `RecordBatch` → `Batch`: Arrow buffers taken back as vectors when the
//! record batch was their only owner and they came from vectors (as
//! [`to_record_batch`](crate::to_record_batch) makes them), copied
//! otherwise.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, OffsetSizeTrait, RecordBatch};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::DataType;
use grist_tensor::{
    Batch, Column, DType, DenseTensor, FeatureSpec, RaggedTensor, Section, SparseTensor, SpecFile,
    StringValues, Tensor, Values,
};

use crate::Error;
use crate::schema::{self, KIND_KEY, LENGTHS_KIND};
use crate::to_arrow::find;

/// Converts an Arrow record batch into a grist batch, with the spec of its
/// columns: `spec`, or (when `None`) [`spec_from_schema`]'s.
///
/// Every feature of the spec must have a column (named as
/// [`field_name`](crate::field_name) names it); columns the spec does not
/// name are left out, except the lengths of padded sequence features.
/// Columns keep the record batch's order. Nulls are refused (except a null
/// list that is empty, read as an empty list), as are Arrow types without
/// a grist dtype, naming the column. Buffers are taken back without a
/// copy when the record batch was their only owner, unsliced, and
/// allocated as vectors.
///
/// [`spec_from_schema`]: crate::spec_from_schema
pub fn from_record_batch(
    batch: RecordBatch,
    spec: Option<&SpecFile>,
) -> Result<(Batch, SpecFile), Error> {
    let schema = batch.schema();
    let spec = match spec {
        Some(s) => s.clone(),
        None => schema::spec_from_schema(&schema)?,
    };
    let (_, arrays, rows) = batch.into_parts();
    let mut columns = Vec::new();
    let mut found = Vec::new();
    for (field, array) in schema.fields().iter().zip(arrays) {
        let (section, name) = schema::field_place(field);
        let column = field.name().as_str();
        let lengths = field.metadata().get(KIND_KEY).map(String::as_str) == Some(LENGTHS_KIND)
            || section == Section::FeatureListLengths;
        let tensor = if lengths {
            dense(column, array, rows, DType::Int64, &[])?
        } else {
            let Some(feature) = find(&spec, section, &name) else {
                continue;
            };
            found.push((section, name.clone()));
            read(column, feature, array, rows)?
        };
        columns.push(Column {
            name,
            section,
            tensor,
        });
    }
    let sections = [
        (Section::Features, &spec.features),
        (Section::Context, &spec.context_features),
        (Section::FeatureLists, &spec.sequence_features),
    ];
    for (section, features) in sections {
        for f in features.iter() {
            if !found.iter().any(|(s, n)| *s == section && n == f.name()) {
                return Err(Error::Missing {
                    column: schema::field_name(section, f.name()),
                });
            }
        }
    }
    Ok((Batch::new(rows, columns), spec))
}

fn read(
    column: &str,
    feature: &FeatureSpec,
    array: ArrayRef,
    rows: usize,
) -> Result<Tensor, Error> {
    let dtype = feature.dtype();
    match feature {
        FeatureSpec::Dense(d) => dense(column, array, rows, dtype, &d.shape),
        FeatureSpec::FixedLenSequence(f) => {
            let shape: Vec<i64> = std::iter::once(-1).chain(f.shape.iter().copied()).collect();
            dense(column, array, rows, dtype, &shape)
        }
        FeatureSpec::Varlen(_) => varlen(column, array, rows, dtype),
        FeatureSpec::Ragged(r) => ragged(column, array, rows, dtype, r.row_splits_dtype),
        FeatureSpec::Sparse(s) => sparse(column, array, rows, dtype, &s.dense_shape()),
        other => Err(Error::layout(
            column,
            format!("feature kind {} is not supported", other.kind()),
        )),
    }
}

/// One list level, peeled off an array.
enum Level {
    /// A fixed-size list of this size.
    Fixed(usize),
    /// A list with these offsets.
    List(Offsets),
}

/// The offsets of a `List` or `LargeList`.
enum Offsets {
    Small(OffsetBuffer<i32>),
    Large(OffsetBuffer<i64>),
}

impl Offsets {
    fn at(&self, i: usize) -> i64 {
        match self {
            Offsets::Small(o) => i64::from(o[i]),
            Offsets::Large(o) => o[i],
        }
    }

    /// Offsets `start..=start + len`, rebased to 0: the vector itself when
    /// it is exactly that and nobody else holds it.
    fn into_splits(self, start: usize, len: usize) -> Vec<i64> {
        if let Offsets::Large(o) = self {
            if start == 0 && o.len() == len + 1 && o[0] == 0 {
                return match o.into_inner().into_inner().into_vec::<i64>() {
                    Ok(v) => v,
                    Err(b) => ScalarBuffer::<i64>::from(b).to_vec(),
                };
            }
            let base = o[start];
            return o[start..=start + len].iter().map(|&x| x - base).collect();
        }
        let base = self.at(start);
        (start..=start + len).map(|i| self.at(i) - base).collect()
    }
}

/// Peels the list levels off `array` down to its values, checking nulls: a
/// null fixed-size list is refused, a null list only when it is not empty.
fn peel(column: &str, mut array: ArrayRef) -> Result<(Vec<Level>, ArrayRef), Error> {
    let mut levels = Vec::new();
    loop {
        match array.data_type() {
            DataType::FixedSizeList(_, _) => {
                // Cloning an array clones references to its buffers; the
                // original is dropped at once, so the clone is their owner.
                let a = array.as_fixed_size_list().clone();
                drop(array);
                let (_, size, values, nulls) = a.into_parts();
                if nulls.is_some_and(|n| n.null_count() > 0) {
                    return Err(Error::Nulls {
                        column: column.to_string(),
                    });
                }
                levels.push(Level::Fixed(size as usize));
                array = values;
            }
            DataType::List(_) => {
                let a = array.as_list::<i32>().clone();
                drop(array);
                let (_, offsets, values, nulls) = a.into_parts();
                check_list_nulls(column, &offsets, nulls)?;
                levels.push(Level::List(Offsets::Small(offsets)));
                array = values;
            }
            DataType::LargeList(_) => {
                let a = array.as_list::<i64>().clone();
                drop(array);
                let (_, offsets, values, nulls) = a.into_parts();
                check_list_nulls(column, &offsets, nulls)?;
                levels.push(Level::List(Offsets::Large(offsets)));
                array = values;
            }
            _ => return Ok((levels, array)),
        }
    }
}

fn check_list_nulls<O: OffsetSizeTrait>(
    column: &str,
    offsets: &OffsetBuffer<O>,
    nulls: Option<NullBuffer>,
) -> Result<(), Error> {
    // (Let chains: this crate needs Rust 1.88 for arrow-rs anyway.)
    if let Some(nulls) = nulls
        && (0..nulls.len()).any(|i| nulls.is_null(i) && offsets[i] != offsets[i + 1])
    {
        return Err(Error::Nulls {
            column: column.to_string(),
        });
    }
    Ok(())
}

/// A dense column: every level's rows of one length (a list level's from
/// the spec's shape or its first row).
fn dense(
    column: &str,
    array: ArrayRef,
    rows: usize,
    dtype: DType,
    shape: &[i64],
) -> Result<Tensor, Error> {
    let (levels, leaf) = peel(column, array)?;
    if levels.len() != shape.len() {
        return Err(Error::layout(
            column,
            format!(
                "{} list levels, the spec's shape has {} dimensions",
                levels.len(),
                shape.len()
            ),
        ));
    }
    let (mut start, mut len) = (0usize, rows);
    let mut dims = vec![rows];
    for (level, &want) in levels.iter().zip(shape) {
        match level {
            Level::Fixed(size) => {
                start *= size;
                len *= size;
                dims.push(*size);
            }
            Level::List(o) => {
                let first = if len > 0 {
                    o.at(start + 1) - o.at(start)
                } else {
                    want.max(0)
                };
                if (0..len).any(|i| o.at(start + i + 1) - o.at(start + i) != first) {
                    return Err(Error::layout(
                        column,
                        "rows of a dense column differ in length",
                    ));
                }
                start = o.at(start) as usize;
                len *= first as usize;
                dims.push(first as usize);
            }
        }
    }
    let values = values(column, leaf, start, len, dtype)?;
    Ok(Tensor::Dense(DenseTensor {
        shape: dims,
        values,
    }))
}

/// A varlen column: lists nested `rank - 1` deep, back to COO indices.
fn varlen(column: &str, array: ArrayRef, rows: usize, dtype: DType) -> Result<Tensor, Error> {
    let (levels, leaf) = peel(column, array)?;
    let lists: Vec<&Offsets> = levels
        .iter()
        .map(|l| match l {
            Level::List(o) => Ok(o),
            Level::Fixed(_) => Err(Error::layout(
                column,
                "a varlen column holds lists, not fixed-size lists",
            )),
        })
        .collect::<Result<_, _>>()?;
    if lists.is_empty() {
        return Err(Error::layout(column, "a varlen column holds lists"));
    }
    let rank = lists.len() + 1;
    let mut indices = Vec::new();
    let mut maxes = vec![0i64; rank - 1];
    let mut prefix = Vec::with_capacity(rank);
    for row in 0..rows {
        prefix.clear();
        prefix.push(row as i64);
        walk(&lists, 0, row, &mut prefix, &mut indices, &mut maxes);
    }
    // The values under the rows: from the first row's start to the last
    // row's end, level by level.
    let (mut start, mut end) = (0usize, rows);
    for o in &lists {
        (start, end) = (o.at(start) as usize, o.at(end) as usize);
    }
    let values = values(column, leaf, start, end - start, dtype)?;
    let mut dense_shape = vec![rows as i64];
    dense_shape.extend(maxes);
    Ok(Tensor::Sparse(SparseTensor {
        indices,
        values,
        dense_shape,
    }))
}

/// The index tuples under item `item` of level `l`.
fn walk(
    lists: &[&Offsets],
    l: usize,
    item: usize,
    prefix: &mut Vec<i64>,
    indices: &mut Vec<i64>,
    maxes: &mut [i64],
) {
    let o = lists[l];
    let (start, end) = (o.at(item), o.at(item + 1));
    maxes[l] = maxes[l].max(end - start);
    for (j, child) in (start..end).enumerate() {
        prefix.push(j as i64);
        if l + 1 == lists.len() {
            indices.extend_from_slice(prefix);
        } else {
            walk(lists, l + 1, child as usize, prefix, indices, maxes);
        }
        prefix.pop();
    }
}

/// A ragged column: the list levels' offsets as row splits, fixed-size
/// lists below them as the flat values' inner dimensions.
fn ragged(
    column: &str,
    array: ArrayRef,
    rows: usize,
    dtype: DType,
    splits_dtype: DType,
) -> Result<Tensor, Error> {
    let (levels, leaf) = peel(column, array)?;
    let (mut start, mut len) = (0usize, rows);
    let mut nested_row_splits = Vec::new();
    let mut inner = Vec::new();
    for level in levels {
        match level {
            Level::List(o) if inner.is_empty() => {
                let (s, e) = (o.at(start) as usize, o.at(start + len) as usize);
                nested_row_splits.push(o.into_splits(start, len));
                (start, len) = (s, e - s);
            }
            Level::Fixed(size) => {
                inner.push(size);
            }
            Level::List(_) => {
                return Err(Error::layout(
                    column,
                    "a list under a fixed-size list in a ragged column",
                ));
            }
        }
    }
    if nested_row_splits.is_empty() {
        return Err(Error::layout(column, "a ragged column holds lists"));
    }
    let per: usize = inner.iter().product();
    let values = values(column, leaf, start * per, len * per, dtype)?;
    let mut shape = vec![len];
    shape.extend(inner);
    Ok(Tensor::Ragged(RaggedTensor {
        nested_row_splits,
        row_splits_dtype: splits_dtype,
        flat_values: DenseTensor { shape, values },
    }))
}

/// A sparse column: a struct of `indices` (lists of index tuples without
/// the batch row) and `values` (lists of values), back to COO.
fn sparse(
    column: &str,
    array: ArrayRef,
    rows: usize,
    dtype: DType,
    shape: &[i64],
) -> Result<Tensor, Error> {
    let Some(st) = array.as_struct_opt().cloned() else {
        return Err(Error::layout(
            column,
            format!(
                "a sparse column is a struct of indices and values, not {}",
                array.data_type()
            ),
        ));
    };
    drop(array);
    let (fields, arrays, nulls) = st.into_parts();
    if nulls.is_some_and(|n| n.null_count() > 0) {
        return Err(Error::Nulls {
            column: column.to_string(),
        });
    }
    let mut indices_array = None;
    let mut values_array = None;
    for (f, a) in fields.iter().zip(arrays) {
        match f.name().as_str() {
            "indices" => indices_array = Some(a),
            "values" => values_array = Some(a),
            _ => {}
        }
    }
    let (Some(ia), Some(va)) = (indices_array, values_array) else {
        return Err(Error::layout(
            column,
            "a sparse column is a struct of indices and values",
        ));
    };
    let (ilevels, ileaf) = peel(column, ia)?;
    let (vlevels, vleaf) = peel(column, va)?;
    let (Some(Level::List(io)), Some(Level::Fixed(k)), 2) =
        (ilevels.first(), ilevels.get(1), ilevels.len())
    else {
        return Err(Error::layout(
            column,
            "sparse indices are a list of fixed-size lists",
        ));
    };
    let [Level::List(vo)] = &vlevels[..] else {
        return Err(Error::layout(column, "sparse values are a list"));
    };
    let k = *k;
    let base = io.at(0) as usize;
    let Values::Int64(flat) = values(
        column,
        ileaf,
        base * k,
        (io.at(rows) as usize - base) * k,
        DType::Int64,
    )?
    else {
        return Err(Error::layout(column, "sparse indices are int64"));
    };
    let mut indices = Vec::new();
    let mut maxes = vec![-1i64; k];
    for row in 0..rows {
        let (a, b) = (io.at(row) as usize, io.at(row + 1) as usize);
        if vo.at(row + 1) - vo.at(row) != (b - a) as i64 {
            return Err(Error::layout(
                column,
                "sparse indices and values differ in number",
            ));
        }
        for i in a - base..b - base {
            let t = &flat[i * k..(i + 1) * k];
            indices.push(row as i64);
            indices.extend_from_slice(t);
            for (m, &x) in maxes.iter_mut().zip(t) {
                *m = (*m).max(x);
            }
        }
    }
    let (s, e) = (vo.at(0) as usize, vo.at(rows) as usize);
    let values = values(column, vleaf, s, e - s, dtype)?;
    // The dense shape is the spec's when it gives one, else the largest
    // index plus one.
    let mut dense_shape = vec![rows as i64];
    if shape.len() == k && shape.iter().all(|&d| d >= 0) {
        dense_shape.extend_from_slice(shape);
    } else {
        dense_shape.extend(maxes.iter().map(|m| m + 1));
    }
    Ok(Tensor::Sparse(SparseTensor {
        indices,
        values,
        dense_shape,
    }))
}

/// Values `start..start + len` of a leaf array as `dtype`, refusing nulls
/// in that range.
fn values(
    column: &str,
    leaf: ArrayRef,
    start: usize,
    len: usize,
    dtype: DType,
) -> Result<Values, Error> {
    if leaf.len() < start + len {
        return Err(Error::layout(column, "list offsets point past the values"));
    }
    if let Some(n) = leaf.logical_nulls()
        && n.slice(start, len).null_count() > 0
    {
        return Err(Error::Nulls {
            column: column.to_string(),
        });
    }
    let found = leaf.data_type().clone();
    let Some(natural) = schema::leaf_dtype(&found) else {
        return Err(Error::unsupported(column, &found));
    };
    let mismatch = || Error::DType {
        column: column.to_string(),
        expected: dtype,
        found: found.clone(),
    };
    // The integers widen exactly to the spec's int64, as do floats to
    // float64; nothing narrows.
    let ok = natural == dtype
        || matches!(
            (natural, dtype),
            (DType::Int32, DType::Int64) | (DType::Float32, DType::Float64)
        );
    if !ok {
        return Err(mismatch());
    }
    let v = match (found.clone(), dtype) {
        (DataType::Boolean, _) => {
            let a = leaf.as_boolean().slice(start, len);
            Values::Bool(a.values().iter().collect())
        }
        (DataType::Int32, DType::Int32) => Values::Int32(take::<Int32Type>(leaf, start, len)),
        (DataType::Int64, DType::Int64) => Values::Int64(take::<Int64Type>(leaf, start, len)),
        (DataType::Float32, DType::Float32) => {
            Values::Float32(take::<Float32Type>(leaf, start, len))
        }
        (DataType::Float64, DType::Float64) => {
            Values::Float64(take::<Float64Type>(leaf, start, len))
        }
        (DataType::Float32, DType::Float64) => {
            Values::Float64(widen::<Float32Type, f64>(&leaf, start, len))
        }
        (DataType::Int8, DType::Int32) => Values::Int32(widen::<Int8Type, i32>(&leaf, start, len)),
        (DataType::Int16, DType::Int32) => {
            Values::Int32(widen::<Int16Type, i32>(&leaf, start, len))
        }
        (DataType::UInt8, DType::Int32) => {
            Values::Int32(widen::<UInt8Type, i32>(&leaf, start, len))
        }
        (DataType::UInt16, DType::Int32) => {
            Values::Int32(widen::<UInt16Type, i32>(&leaf, start, len))
        }
        (DataType::Int8, DType::Int64) => Values::Int64(widen::<Int8Type, i64>(&leaf, start, len)),
        (DataType::Int16, DType::Int64) => {
            Values::Int64(widen::<Int16Type, i64>(&leaf, start, len))
        }
        (DataType::Int32, DType::Int64) => {
            Values::Int64(widen::<Int32Type, i64>(&leaf, start, len))
        }
        (DataType::UInt8, DType::Int64) => {
            Values::Int64(widen::<UInt8Type, i64>(&leaf, start, len))
        }
        (DataType::UInt16, DType::Int64) => {
            Values::Int64(widen::<UInt16Type, i64>(&leaf, start, len))
        }
        (DataType::UInt32, DType::Int64) => {
            Values::Int64(widen::<UInt32Type, i64>(&leaf, start, len))
        }
        (DataType::LargeUtf8, _) => {
            let a = leaf.as_string::<i64>().clone();
            drop(leaf);
            let (o, d, _) = a.into_parts();
            large_bytes(o, d, start, len)
        }
        (DataType::LargeBinary, _) => {
            let a = leaf.as_binary::<i64>().clone();
            drop(leaf);
            let (o, d, _) = a.into_parts();
            large_bytes(o, d, start, len)
        }
        (DataType::Utf8, _) => Values::String(
            leaf.as_string::<i32>()
                .slice(start, len)
                .iter()
                .map(|s| s.unwrap_or_default().as_bytes())
                .collect(),
        ),
        (DataType::Binary, _) => Values::String(
            leaf.as_binary::<i32>()
                .slice(start, len)
                .iter()
                .map(|s| s.unwrap_or_default())
                .collect(),
        ),
        (DataType::Utf8View, _) => Values::String(
            leaf.as_string_view()
                .slice(start, len)
                .iter()
                .map(|s| s.unwrap_or_default().as_bytes())
                .collect(),
        ),
        (DataType::BinaryView, _) => Values::String(
            leaf.as_binary_view()
                .slice(start, len)
                .iter()
                .map(|s| s.unwrap_or_default())
                .collect(),
        ),
        _ => return Err(mismatch()),
    };
    Ok(v)
}

/// Primitive values `start..start + len`: the vector itself when the array
/// was their only owner and made from one, else a copy.
fn take<T: ArrowPrimitiveType>(leaf: ArrayRef, start: usize, len: usize) -> Vec<T::Native> {
    let a = leaf.as_primitive::<T>().clone();
    drop(leaf);
    let (_, buffer, _) = a.into_parts();
    if start == 0 && buffer.len() == len {
        match buffer.into_inner().into_vec::<T::Native>() {
            Ok(v) => v,
            Err(b) => ScalarBuffer::<T::Native>::from(b).to_vec(),
        }
    } else {
        buffer[start..start + len].to_vec()
    }
}

fn widen<T: ArrowPrimitiveType, U: From<T::Native>>(
    leaf: &ArrayRef,
    start: usize,
    len: usize,
) -> Vec<U> {
    leaf.as_primitive::<T>().values()[start..start + len]
        .iter()
        .map(|&x| U::from(x))
        .collect()
}

/// Large binary or UTF-8 values: the bytes and the offsets (as `usize`, in
/// place on 64-bit targets) taken back when they are exactly these
/// strings' and owned here, else copied.
fn large_bytes(o: OffsetBuffer<i64>, d: arrow_buffer::Buffer, start: usize, len: usize) -> Values {
    let whole = start == 0 && o.len() == len + 1 && o[0] == 0 && o[len] as usize == d.len();
    if !whole {
        return Values::String(copy_bytes(&o, d.as_slice(), start, len));
    }
    let data = match d.into_vec::<u8>() {
        Ok(v) => v,
        Err(d) => return Values::String(copy_bytes(&o, d.as_slice(), start, len)),
    };
    let offsets = match o.into_inner().into_inner().into_vec::<i64>() {
        Ok(v) => v,
        Err(b) => ScalarBuffer::<i64>::from(b).to_vec(),
    };
    let offsets = match bytemuck::allocation::try_cast_vec::<i64, usize>(offsets) {
        Ok(v) => v,
        Err((_, v)) => v.into_iter().map(|x| x as usize).collect(),
    };
    // Arrow's offsets never decrease; they start at 0 and end at the
    // data's length (checked above), so this always holds.
    Values::String(StringValues::from_parts(data, offsets).unwrap_or_default())
}

fn copy_bytes(o: &OffsetBuffer<i64>, d: &[u8], start: usize, len: usize) -> StringValues {
    (start..start + len)
        .map(|i| &d[o[i] as usize..o[i + 1] as usize])
        .collect()
}
