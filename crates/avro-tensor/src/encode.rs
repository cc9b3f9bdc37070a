//! Encoding batches as Avro datums: the schema derived from the specs, one
//! datum per row, the inverse of [`AvroDecoder`](crate::AvroDecoder).

use grist_tensor::{
    Batch, DType, FeatureSpec, RecordBuf, SparseTensor, SpecFile, Tensor, TensorError, UNKNOWN_DIM,
    Values,
};
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The Avro type that values of `dtype` (of feature `feature`) are
/// written as.
fn avro_type(feature: &str, dtype: DType) -> Result<&'static str> {
    Ok(match dtype {
        DType::Bool => "boolean",
        DType::Int32 => "int",
        DType::Int64 => "long",
        DType::Float32 => "float",
        DType::Float64 => "double",
        DType::String => "bytes",
        other => {
            return Err(Error::Spec(TensorError::Unsupported {
                what: format!("feature {feature}: Avro has no type for {other} values"),
            }));
        }
    })
}

fn nest(mut t: Value, levels: usize) -> Value {
    for _ in 0..levels {
        t = json!({"type": "array", "items": t});
    }
    t
}

/// The refusal of a sequence spec.
pub(crate) fn no_sequences() -> Error {
    Error::Spec(TensorError::Unsupported {
        what: "Avro records have no context and feature lists: \
               a tf.SequenceExample spec cannot be written to Avro"
            .into(),
    })
}

fn bad(feature: &str, reason: impl Into<String>) -> Error {
    Error::Spec(TensorError::InvalidSpec {
        feature: feature.to_string(),
        reason: reason.into(),
    })
}

/// The writer schema (JSON) for records holding `specs`: a record named
/// `name` with one field per spec, in spec order. Dense features become
/// their type nested in one array per dimension, varlen features likewise,
/// sparse features a record of `indices0..indicesN-1` (`array<long>`) and
/// `values`. Strings are written as `bytes` (they may hold any bytes).
pub fn schema_for_specs(specs: &[FeatureSpec], name: &str) -> Result<String> {
    let mut fields = Vec::with_capacity(specs.len());
    for s in specs {
        let t = match s {
            FeatureSpec::Dense(d) => nest(json!(avro_type(s.name(), d.dtype)?), d.shape.len()),
            FeatureSpec::Varlen(v) => {
                let rank = v.shape.as_ref().map_or(v.rank.unwrap_or(1), Vec::len);
                nest(json!(avro_type(s.name(), v.dtype)?), rank)
            }
            FeatureSpec::Sparse(sp) => {
                let rank = sp.shape.as_ref().map_or(0, Vec::len);
                let mut sub: Vec<Value> = (0..rank)
                    .map(|k| json!({"name": format!("indices{k}"), "type": {"type": "array", "items": "long"}}))
                    .collect();
                sub.push(json!({"name": "values", "type": {"type": "array", "items": avro_type(s.name(), sp.dtype)?}}));
                json!({"type": "record", "name": format!("{}_sparse", sanitize(s.name())), "fields": sub})
            }
            other => {
                return Err(bad(
                    other.name(),
                    "only dense, sparse and varlen features can be written to Avro",
                ));
            }
        };
        fields.push(json!({"name": s.name(), "type": t}));
    }
    Ok(json!({"type": "record", "name": name, "fields": fields}).to_string())
}

/// An Avro name made of `[A-Za-z0-9_]`, not starting with a digit.
fn sanitize(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

fn long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Writes values `range` of `values`, one after the other.
fn run(out: &mut Vec<u8>, values: &Values, range: std::ops::Range<usize>) {
    match values {
        Values::Bool(v) => out.extend(v[range].iter().map(|&b| b as u8)),
        Values::Int32(v) => v[range].iter().for_each(|&x| long(out, x as i64)),
        Values::Int64(v) => v[range].iter().for_each(|&x| long(out, x)),
        Values::Float32(v) => grist_tensor::le::append(out, &v[range]),
        Values::Float64(v) => grist_tensor::le::append(out, &v[range]),
        Values::String(s) => {
            for i in range {
                let b = s.get(i).unwrap_or_default();
                long(out, b.len() as i64);
                out.extend_from_slice(b);
            }
        }
        _ => unreachable!("encode_batch refuses dtypes without an Avro type"),
    }
}

/// Writes an Avro array of values `range` of `values` (one block, then the
/// end).
fn array(out: &mut Vec<u8>, values: &Values, range: std::ops::Range<usize>) {
    if !range.is_empty() {
        long(out, range.len() as i64);
        run(out, values, range);
    }
    long(out, 0);
}

/// Writes `dims` nested arrays of the values from `*at` on.
fn dense(out: &mut Vec<u8>, values: &Values, dims: &[usize], at: &mut usize) {
    match dims {
        [] => {
            run(out, values, *at..*at + 1);
            *at += 1;
        }
        [n] => {
            array(out, values, *at..*at + n);
            *at += n;
        }
        [n, rest @ ..] => {
            if *n > 0 {
                long(out, *n as i64);
                for _ in 0..*n {
                    dense(out, values, rest, at);
                }
            }
            long(out, 0);
        }
    }
}

/// Writes the entries `range` of a row of a varlen tensor (index tuples
/// `[row, i0, i1, ...]`, row-major) as nested arrays of rank `dims.len()`.
/// An array's length is its declared size, or one more than its largest
/// index (trailing empty lists are not recorded by the tensor).
fn varlen(
    out: &mut Vec<u8>,
    indices: &[i64],
    rank: usize,
    values: &Values,
    dims: &[i64],
    level: usize,
    range: std::ops::Range<usize>,
) {
    let tuple = |e: usize| &indices[e * (rank + 1)..(e + 1) * (rank + 1)];
    if level + 1 == rank {
        // The innermost list: its entries' values, in order.
        array(out, values, range);
        return;
    }
    let len = if dims[level] != UNKNOWN_DIM && dims[level] >= 0 {
        dims[level] as usize
    } else {
        range
            .clone()
            .map(|e| tuple(e)[level + 1] + 1)
            .max()
            .unwrap_or(0)
            .max(0) as usize
    };
    if len > 0 {
        long(out, len as i64);
        let mut e = range.start;
        for i in 0..len as i64 {
            let start = e;
            while e < range.end && tuple(e)[level + 1] == i {
                e += 1;
            }
            varlen(out, indices, rank, values, dims, level + 1, start..e);
        }
    }
    long(out, 0);
}

/// For each batch row, the entries of a COO tensor that belong to it.
fn rows_of(indices: &[i64], rank: usize, rows: usize) -> Vec<std::ops::Range<usize>> {
    let nnz = indices.len() / (rank + 1).max(1);
    let mut out = Vec::with_capacity(rows);
    let mut e = 0;
    for r in 0..rows {
        let start = e;
        while e < nnz && indices[e * (rank + 1)] == r as i64 {
            e += 1;
        }
        out.push(start..e);
    }
    out
}

/// Encodes every row of `batch` as one Avro datum of the schema
/// [`schema_for_specs`] gives for `spec.features`, such that decoding the
/// datums with the same specs gives the same batch. Every dtype has an
/// Avro type (bool, int32, int64, float32, float64 and string become
/// `boolean`, `int`, `long`, `float`, `double` and `bytes`): nothing is
/// narrowed.
///
/// Takes a [`SpecFile`], as every grist `encode_batch` does (and
/// [`Format::decoder`](grist_tensor::Format::decoder)); a sequence spec
/// (tf.SequenceExample's context and feature lists) is refused with
/// [`TensorError::Unsupported`] in [`Error::Spec`], as is a kind Avro
/// does not write (ragged, fixed-length sequence).
pub fn encode_batch(batch: &Batch, spec: &SpecFile) -> Result<Vec<Vec<u8>>> {
    let mut records = RecordBuf::new();
    encode_rows(batch, spec, &mut records)?;
    Ok(records.iter().map(<[u8]>::to_vec).collect())
}

/// How one column's rows are written.
enum Column<'a> {
    Dense {
        values: &'a Values,
        dims: Vec<usize>,
        row_len: usize,
    },
    Varlen {
        t: &'a SparseTensor,
        declared: Vec<i64>,
        rows: Vec<std::ops::Range<usize>>,
    },
    Sparse {
        t: &'a SparseTensor,
        rows: Vec<std::ops::Range<usize>>,
    },
}

impl Column<'_> {
    /// Writes row `r` of the column.
    fn write(&self, r: usize, out: &mut Vec<u8>) {
        match self {
            Column::Dense {
                values,
                dims,
                row_len,
            } => dense(out, values, dims, &mut (r * row_len)),
            Column::Varlen { t, declared, rows } => {
                let rank = t.rank() - 1;
                varlen(
                    out,
                    &t.indices,
                    rank,
                    &t.values,
                    declared,
                    0,
                    rows[r].clone(),
                );
            }
            Column::Sparse { t, rows } => {
                let rank = t.rank() - 1;
                let range = rows[r].clone();
                for k in 0..rank {
                    if !range.is_empty() {
                        long(out, range.len() as i64);
                        for e in range.clone() {
                            long(out, t.indices[e * (rank + 1) + 1 + k]);
                        }
                    }
                    long(out, 0);
                }
                array(out, &t.values, range);
            }
        }
    }
}

/// [`encode_batch`] into `out`.
pub(crate) fn encode_rows(batch: &Batch, spec: &SpecFile, out: &mut RecordBuf) -> Result<()> {
    if spec.sequence {
        return Err(no_sequences());
    }
    let rows = batch.rows();
    let mut columns = Vec::with_capacity(spec.features.len());
    for s in &spec.features {
        let name = s.name();
        let tensor = batch
            .get(name)
            .ok_or_else(|| bad(name, "the batch has no such column"))?;
        // Every value written below has an Avro type.
        avro_type(name, tensor.dtype())?;
        let short = || bad(name, "the column holds fewer values than its shape says");
        columns.push(match (s, tensor) {
            (FeatureSpec::Dense(d), Tensor::Dense(t)) => {
                let dims: Vec<usize> = d.shape.iter().map(|&x| x.max(0) as usize).collect();
                let row_len = dims.iter().product::<usize>();
                if t.values.len() < row_len * rows {
                    return Err(short());
                }
                Column::Dense {
                    values: &t.values,
                    dims,
                    row_len,
                }
            }
            (FeatureSpec::Varlen(v), Tensor::Sparse(t)) => {
                let rank = t.rank() - 1;
                Column::Varlen {
                    t,
                    declared: v.shape.clone().unwrap_or_else(|| vec![UNKNOWN_DIM; rank]),
                    rows: rows_of(&t.indices, rank, rows),
                }
            }
            (FeatureSpec::Sparse(_), Tensor::Sparse(t)) => Column::Sparse {
                t,
                rows: rows_of(&t.indices, t.rank() - 1, rows),
            },
            (s, _) => {
                return Err(bad(
                    s.name(),
                    format!("a {} spec cannot be written from this tensor", s.kind()),
                ));
            }
        });
    }
    for r in 0..rows {
        let data = out.data_mut();
        for c in &columns {
            c.write(r, data);
        }
        out.end_record();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use grist_tensor::FeatureSpec;
    use grist_tensor::json::{batch_to_json, compare_json};

    use super::*;
    use crate::AvroDecoder;

    #[test]
    fn encoded_rows_decode_back_and_parse_in_apache_avro() {
        let spec = SpecFile::from_json(
            r#"[{"name": "l", "kind": "dense", "dtype": "int64", "shape": []},
                {"name": "m", "kind": "dense", "dtype": "float32", "shape": [2, 2]},
                {"name": "s", "kind": "dense", "dtype": "string", "shape": []},
                {"name": "v", "kind": "varlen", "dtype": "int32", "shape": [-1]},
                {"name": "w", "kind": "varlen", "dtype": "float64", "shape": [2, -1]},
                {"name": "sp", "kind": "sparse", "dtype": "bool", "shape": [5, 3]}]"#,
        )
        .unwrap();
        let spec_file = spec.clone();
        let specs: Vec<FeatureSpec> = spec.features;
        let schema = schema_for_specs(&specs, "T").unwrap();
        let parsed = apache_avro::Schema::parse_str(&schema).unwrap();
        // Hand-made datums for 3 rows, decoded, re-encoded, decoded again.
        let mut data = Vec::new();
        for r in 0..3i64 {
            long(&mut data, r * 1000 - 1);
            long(&mut data, 2);
            for _ in 0..2 {
                long(&mut data, 2);
                for k in 0..2 {
                    data.extend_from_slice(&((r + k) as f32 * 0.5).to_le_bytes());
                }
                long(&mut data, 0);
            }
            long(&mut data, 0);
            long(&mut data, 3);
            data.extend_from_slice(b"a\xffb");
            long(&mut data, r);
            for i in 0..r {
                long(&mut data, i);
            }
            if r > 0 {
                long(&mut data, 0);
            }
            long(&mut data, 2);
            long(&mut data, 0); // an empty inner list
            long(&mut data, r + 1);
            for i in 0..=r {
                data.extend_from_slice(&(i as f64).to_le_bytes());
            }
            long(&mut data, 0);
            long(&mut data, 0);
            for idx in [[1i64, 4], [0, 2]] {
                long(&mut data, 2);
                long(&mut data, idx[0]);
                long(&mut data, idx[1]);
                long(&mut data, 0);
            }
            long(&mut data, 2);
            data.extend([1u8, 0]);
            long(&mut data, 0);
        }
        let file: Arc<str> = "mem".into();
        let mut d = AvroDecoder::new(&specs).unwrap();
        d.add_schema(file.clone(), &schema).unwrap();
        let mut out = d.new_batch(3);
        d.decode_block(&file, 0, 0, &data, 3, 0..3, &mut out)
            .unwrap();
        let batch = d.finish(&mut out).unwrap();
        let datums = encode_batch(&batch, &spec_file).unwrap();
        for datum in &datums {
            apache_avro::from_avro_datum(&parsed, &mut &datum[..], None).unwrap();
        }
        let again: Vec<u8> = datums.concat();
        let mut out = d.new_batch(3);
        d.decode_block(&file, 0, 0, &again, 3, 0..3, &mut out)
            .unwrap();
        let back = d.finish(&mut out).unwrap();
        compare_json(&batch_to_json(&batch), &batch_to_json(&back)).unwrap();
        // The first row's varlen "v" is empty, the second's has one value.
        let v = batch.get("v").unwrap().as_sparse().unwrap();
        assert_eq!(v.dense_shape, vec![3, 2]);
        // Bytes left after the records are an error; so is a missing record.
        let mut d2 = d.clone();
        let mut out = d2.new_batch(3);
        assert!(
            d2.decode_block(&file, 0, 0, &again, 2, 0..2, &mut out)
                .is_err()
        );
        let mut out = d2.new_batch(3);
        assert!(
            d2.decode_block(&file, 0, 0, &again[..again.len() - 1], 3, 0..3, &mut out)
                .is_err()
        );
    }
}
