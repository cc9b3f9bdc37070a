//! Building OFRecords: from values with [`RecordBuilder`], or from whole
//! [`Batch`]es with [`encode_batch`], the inverse of
//! [`OfRecordDecoder`](crate::OfRecordDecoder). The output is canonical
//! (what Python protobuf writes): entries sorted by name bytes, key before
//! value (both always written), numeric lists packed.

use std::collections::BTreeMap;

use bytes::Bytes;
use grist_tensor::feature_map::{self as fm, FeaturesWriter, OFRECORD};
use grist_tensor::{Batch, FeatureSpec, Lossy, RecordBuf, Section, SpecFile, TensorError};
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
    #[must_use]
    pub fn with_feature(mut self, name: impl Into<String>, value: &FeatureValue) -> Self {
        self.features.insert(name.into(), feature_proto(value));
        self
    }

    /// Sets feature `name` to a `bytes_list`.
    #[must_use]
    pub fn with_bytes<B: AsRef<[u8]>>(
        self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = B>,
    ) -> Self {
        let v = values.into_iter().map(|b| b.as_ref().to_vec()).collect();
        self.with_feature(name, &FeatureValue::Bytes(v))
    }

    /// Sets feature `name` to a `float_list`.
    #[must_use]
    pub fn with_floats(
        self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = f32>,
    ) -> Self {
        self.with_feature(name, &FeatureValue::Float(values.into_iter().collect()))
    }

    /// Sets feature `name` to a `double_list`.
    #[must_use]
    pub fn with_doubles(
        self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = f64>,
    ) -> Self {
        self.with_feature(name, &FeatureValue::Double(values.into_iter().collect()))
    }

    /// Sets feature `name` to an `int32_list`.
    #[must_use]
    pub fn with_int32s(
        self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = i32>,
    ) -> Self {
        self.with_feature(name, &FeatureValue::Int32(values.into_iter().collect()))
    }

    /// Sets feature `name` to an `int64_list`.
    #[must_use]
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

/// The refusal of a sequence spec.
pub(crate) fn no_sequences() -> Error {
    Error::Spec(TensorError::Unsupported {
        what: "OFRecords have no context and feature lists: \
               a tf.SequenceExample spec cannot be written as OFRecords"
            .into(),
    })
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
    let mut records = RecordBuf::new();
    encode_rows(batch, spec, &mut records)?;
    Ok(records.iter().map(<[u8]>::to_vec).collect())
}

/// [`encode_batch`] into `out`.
pub(crate) fn encode_rows(batch: &Batch, spec: &SpecFile, out: &mut RecordBuf) -> Result<()> {
    if spec.sequence {
        return Err(no_sequences());
    }
    if let Some(r) = spec.features.iter().find_map(|f| match f {
        FeatureSpec::Ragged(r) if r.partitions.iter().any(|p| p.key().is_some()) => Some(r),
        _ => None,
    }) {
        return Err(keyed_partitions(&r.name));
    }
    let d = &OFRECORD;
    let columns = fm::columns(d, batch, Section::Features, &spec.features, Lossy::Refuse)?;
    let mut features = FeaturesWriter::new(d, &columns);
    for r in 0..batch.rows() {
        let len = features.measure(r);
        let data = out.data_mut();
        data.reserve(len);
        features.write(r, data);
        out.end_record();
    }
    Ok(())
}

/// The refusal of a ragged feature with keyed partitions.
pub(crate) fn keyed_partitions(name: &str) -> Error {
    Error::Spec(TensorError::UnsupportedSpec {
        feature: name.into(),
        format: "OFRecord writer",
        kind: "ragged",
        reason: "only ragged features without keyed partitions are written".into(),
    })
}
