//! Building OFRecords: from values with [`RecordBuilder`], or from whole
//! [`Batch`]es with [`encode_batch`], the inverse of
//! [`OfRecordDecoder`](crate::OfRecordDecoder). The output is canonical
//! (what Python protobuf writes): entries sorted by name bytes, key before
//! value (both always written), numeric lists packed.

use std::collections::BTreeMap;

use bytes::Bytes;
use grist_tensor::{Batch, FeatureSpec, SpecFile, Tensor, TensorError, Values};
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use crate::error::{Error, Result};
use crate::proto::{self, feature::Kind};
use crate::record::FeatureValue;

/// Appends the map entries `(name, feature)` of an OFRecord to `out`, in
/// the order given.
pub(crate) fn encode_entries<'a>(
    entries: impl Iterator<Item = (&'a [u8], &'a proto::Feature)>,
    out: &mut Vec<u8>,
) {
    for (name, feature) in entries {
        encode_entry(name, feature, out);
    }
}

fn encode_entry(name: &[u8], feature: &proto::Feature, out: &mut Vec<u8>) {
    let value_len = feature.encoded_len();
    let key_field = 1 + encoded_len_varint(name.len() as u64) + name.len();
    let value_field = 1 + encoded_len_varint(value_len as u64) + value_len;
    encode_key(1, WireType::LengthDelimited, out);
    encode_varint((key_field + value_field) as u64, out);
    encode_key(1, WireType::LengthDelimited, out);
    encode_varint(name.len() as u64, out);
    out.extend_from_slice(name);
    encode_key(2, WireType::LengthDelimited, out);
    encode_varint(value_len as u64, out);
    feature.encode_raw(out);
}

/// The protobuf message of a feature value.
pub(crate) fn feature_proto(value: &FeatureValue) -> proto::Feature {
    let kind = match value {
        FeatureValue::None => None,
        FeatureValue::Bytes(v) => Some(Kind::BytesList(proto::BytesList {
            value: v.iter().map(|b| Bytes::copy_from_slice(b)).collect(),
        })),
        FeatureValue::Float(v) => Some(Kind::FloatList(proto::FloatList { value: v.clone() })),
        FeatureValue::Double(v) => Some(Kind::DoubleList(proto::DoubleList { value: v.clone() })),
        FeatureValue::Int32(v) => Some(Kind::Int32List(proto::Int32List { value: v.clone() })),
        FeatureValue::Int64(v) => Some(Kind::Int64List(proto::Int64List { value: v.clone() })),
    };
    proto::Feature { kind }
}

/// Builds one OFRecord from values.
///
/// ```
/// use grist_ofrecord::{Record, RecordBuilder};
/// let bytes = RecordBuilder::new()
///     .with_int64s("label", [7])
///     .with_floats("x", [1.0, 2.5])
///     .with_bytes("encoded", [&b"\xff\xd8"[..]])
///     .encode();
/// assert_eq!(Record::parse(&bytes)?.features.len(), 3);
/// # Ok::<(), grist_ofrecord::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordBuilder {
    features: BTreeMap<String, proto::Feature>,
}

impl RecordBuilder {
    /// An OFRecord with no features.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets feature `name` to `value`.
    pub fn with_feature(mut self, name: impl Into<String>, value: &FeatureValue) -> Self {
        self.features.insert(name.into(), feature_proto(value));
        self
    }

    /// Sets feature `name` to a `bytes_list`.
    pub fn with_bytes<B: AsRef<[u8]>>(
        self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = B>,
    ) -> Self {
        let v = values.into_iter().map(|b| b.as_ref().to_vec()).collect();
        self.with_feature(name, &FeatureValue::Bytes(v))
    }

    /// Sets feature `name` to a `float_list`.
    pub fn with_floats(
        self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = f32>,
    ) -> Self {
        self.with_feature(name, &FeatureValue::Float(values.into_iter().collect()))
    }

    /// Sets feature `name` to a `double_list`.
    pub fn with_doubles(
        self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = f64>,
    ) -> Self {
        self.with_feature(name, &FeatureValue::Double(values.into_iter().collect()))
    }

    /// Sets feature `name` to an `int32_list`.
    pub fn with_int32s(
        self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = i32>,
    ) -> Self {
        self.with_feature(name, &FeatureValue::Int32(values.into_iter().collect()))
    }

    /// Sets feature `name` to an `int64_list`.
    pub fn with_int64s(
        self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = i64>,
    ) -> Self {
        self.with_feature(name, &FeatureValue::Int64(values.into_iter().collect()))
    }

    /// The OFRecord message (prost's type: hidden, see [`crate::proto`]).
    #[doc(hidden)]
    pub fn build(self) -> proto::OfRecord {
        proto::OfRecord {
            feature: self.features,
        }
    }

    /// The canonical serialization.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        encode_entries(
            self.features.iter().map(|(k, f)| (k.as_bytes(), f)),
            &mut out,
        );
        out
    }
}

/// A feature holding `values[range]`, as the list of its dtype: int32,
/// int64, float32, float64 and string become int32, int64, float, double
/// and bytes lists; bools become an int32 list of 0 and 1.
fn list_of(name: &str, values: &Values, range: std::ops::Range<usize>) -> Result<proto::Feature> {
    let kind = match values {
        Values::Int32(v) => Kind::Int32List(proto::Int32List {
            value: v[range].to_vec(),
        }),
        Values::Bool(v) => Kind::Int32List(proto::Int32List {
            value: v[range].iter().map(|&b| i32::from(b)).collect(),
        }),
        Values::Int64(v) => Kind::Int64List(proto::Int64List {
            value: v[range].to_vec(),
        }),
        Values::Float32(v) => Kind::FloatList(proto::FloatList {
            value: v[range].to_vec(),
        }),
        Values::Float64(v) => Kind::DoubleList(proto::DoubleList {
            value: v[range].to_vec(),
        }),
        Values::String(s) => Kind::BytesList(proto::BytesList {
            value: range
                .map(|i| Bytes::copy_from_slice(s.get(i).unwrap_or_default()))
                .collect(),
        }),
        other => {
            return Err(unfit(
                name,
                format!("no OFRecord list holds {} values", other.dtype()),
            ));
        }
    };
    Ok(proto::Feature { kind: Some(kind) })
}

/// The refusal of a sequence spec.
pub(crate) fn no_sequences() -> Error {
    Error::Spec(TensorError::Unsupported {
        what: "OFRecords have no context and feature lists: \
               a tf.SequenceExample spec cannot be written as OFRecords"
            .into(),
    })
}

fn unfit(name: &str, reason: impl Into<String>) -> Error {
    Error::Spec(TensorError::InvalidSpec {
        feature: name.to_string(),
        reason: reason.into(),
    })
}

/// The entries of a row-sorted COO index list (`rank` per value) of each
/// of `rows` batch rows.
fn rows_of_coo(indices: &[i64], rank: usize, rows: usize) -> Result<Vec<std::ops::Range<usize>>> {
    let nnz = indices.len() / rank.max(1);
    let mut out = Vec::with_capacity(rows);
    let mut i = 0;
    for r in 0..rows as i64 {
        let start = i;
        while i < nnz && indices[i * rank] == r {
            i += 1;
        }
        out.push(start..i);
    }
    if i != nnz {
        return Err(unfit(
            "",
            "sparse indices are not sorted by batch row or exceed the batch",
        ));
    }
    Ok(out)
}

/// Encodes every row of `batch` as a serialized OFRecord such that
/// decoding the records with the same specs gives the same batch.
///
/// The specs say what to write: dense, varlen and fixed-length-sequence
/// features under their name (a sequence with its padding), a
/// `SparseFeature` as its index keys (int64 lists) and value key, a
/// `RaggedFeature` without keyed partitions as its value key. Lists take
/// the column's dtype (see [`OfRecordDecoder`](crate::OfRecordDecoder)).
/// Fails with [`Error::Spec`] when a column is missing or does not fit its
/// spec, or for a `RaggedFeature` with row-split, row-length, row-start,
/// row-limit or value-rowid partitions, which this writer does not write.
///
/// Takes a [`SpecFile`], as every grist `encode_batch` does (and
/// [`Format::decoder`](grist_tensor::Format::decoder)); a sequence spec
/// is refused ([`TensorError::Unsupported`] in [`Error::Spec`]): OFRecords
/// have no feature lists.
///
/// ```
/// use grist_ofrecord::{OfRecordDecoder, RecordBuilder, encode_batch};
/// use grist_tensor::{DType, FeatureSpec, SpecFile};
///
/// let specs = [
///     FeatureSpec::dense("label", DType::Int64, []),
///     FeatureSpec::varlen("x", DType::Float32),
/// ];
/// let spec = SpecFile { features: specs.to_vec(), ..SpecFile::default() };
/// let mut decoder = OfRecordDecoder::new(&specs)?;
/// let written: Vec<Vec<u8>> = (0..4)
///     .map(|i| RecordBuilder::new().with_int64s("label", [i]).with_floats("x", vec![0.5; i as usize]).encode())
///     .collect();
/// let batch = decoder.decode_batch(&"mem".into(), 0, written.iter().map(|r| &r[..]))?;
///
/// let records = encode_batch(&batch, &spec)?;
/// let back = decoder.decode_batch(&"mem".into(), 0, records.iter().map(|r| &r[..]))?;
/// assert_eq!(back, batch);
/// # Ok::<(), grist_ofrecord::Error>(())
/// ```
pub fn encode_batch(batch: &Batch, spec: &SpecFile) -> Result<Vec<Vec<u8>>> {
    if spec.sequence {
        return Err(no_sequences());
    }
    let specs = &spec.features;
    let rows = batch.rows();
    let mut records: Vec<BTreeMap<String, proto::Feature>> = vec![BTreeMap::new(); rows];
    for spec in specs {
        let name = spec.name();
        let tensor = batch
            .get(name)
            .ok_or_else(|| unfit(name, "the batch has no such column"))?;
        match (spec, tensor) {
            (FeatureSpec::Dense(_) | FeatureSpec::FixedLenSequence(_), Tensor::Dense(d)) => {
                let row_len = d.values.len().checked_div(rows).unwrap_or(0);
                for (r, rec) in records.iter_mut().enumerate() {
                    rec.insert(
                        name.into(),
                        list_of(name, &d.values, r * row_len..(r + 1) * row_len)?,
                    );
                }
            }
            (FeatureSpec::Varlen(_), Tensor::Sparse(s)) => {
                let ranges = rows_of_coo(&s.indices, s.rank(), rows)
                    .map_err(|_| unfit(name, "sparse indices are not sorted by batch row"))?;
                for (rec, range) in records.iter_mut().zip(ranges) {
                    rec.insert(name.into(), list_of(name, &s.values, range)?);
                }
            }
            (FeatureSpec::Sparse(sp), Tensor::Sparse(s)) => {
                let (Some(value_key), keys) = (&sp.value_key, sp.index_keys()) else {
                    return Err(unfit(
                        name,
                        "an OFRecord SparseFeature needs index_key and value_key",
                    ));
                };
                let rank = s.rank();
                if keys.len() + 1 != rank {
                    return Err(unfit(name, "the index keys do not match the tensor's rank"));
                }
                let ranges = rows_of_coo(&s.indices, rank, rows)
                    .map_err(|_| unfit(name, "sparse indices are not sorted by batch row"))?;
                for (rec, range) in records.iter_mut().zip(ranges) {
                    for (k, key) in keys.iter().enumerate() {
                        let ids = range.clone().map(|i| s.indices[i * rank + 1 + k]).collect();
                        let list = proto::Int64List { value: ids };
                        rec.insert(
                            key.clone(),
                            proto::Feature {
                                kind: Some(Kind::Int64List(list)),
                            },
                        );
                    }
                    rec.insert(value_key.clone(), list_of(name, &s.values, range)?);
                }
            }
            (FeatureSpec::Ragged(rs), Tensor::Ragged(t)) => {
                if rs.partitions.iter().any(|p| p.key().is_some()) {
                    return Err(Error::Spec(TensorError::UnsupportedSpec {
                        feature: name.into(),
                        format: "OFRecord writer",
                        kind: "ragged",
                        reason: "only ragged features without keyed partitions are written".into(),
                    }));
                }
                let splits = match t.nested_row_splits.as_slice() {
                    [outer] if outer.len() == rows + 1 => outer,
                    _ => {
                        return Err(Error::Spec(TensorError::BadRagged {
                            feature: name.into(),
                            reason: "expected one level of row splits over the batch".into(),
                        }));
                    }
                };
                let inner: usize = t.flat_values.shape.iter().skip(1).product();
                let nvals = t.flat_values.values.len();
                for (r, rec) in records.iter_mut().enumerate() {
                    let (a, b) = (splits[r], splits[r + 1]);
                    let range = usize::try_from(a).ok().zip(usize::try_from(b).ok());
                    let Some((a, b)) = range.filter(|(a, b)| a <= b && b * inner <= nvals) else {
                        return Err(Error::Spec(TensorError::BadRagged {
                            feature: name.into(),
                            reason: format!("row splits {a}..{b} of record {r} are out of range"),
                        }));
                    };
                    rec.insert(
                        rs.value_key().into(),
                        list_of(name, &t.flat_values.values, a * inner..b * inner)?,
                    );
                }
            }
            (spec, _) => {
                return Err(unfit(
                    name,
                    format!(
                        "a {} spec cannot be written from this column's layout",
                        spec.kind()
                    ),
                ));
            }
        }
    }
    Ok(records
        .into_iter()
        .map(|rec| {
            let mut out = Vec::new();
            encode_entries(rec.iter().map(|(k, f)| (k.as_bytes(), f)), &mut out);
            out
        })
        .collect())
}
