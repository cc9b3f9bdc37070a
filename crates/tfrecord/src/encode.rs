//! Building `tf.train.Example` / `tf.train.SequenceExample` records: from
//! values with [`ExampleBuilder`], or from a whole [`Batch`] with
//! [`encode_batch`], the inverse of [`ExampleDecoder`](crate::ExampleDecoder).

use std::collections::BTreeMap;

use bytes::Bytes;
use grist_tensor::feature_map::{
    self as fm, FeaturesWriter, TAG_1, TAG_2, TF_EXAMPLE, Val, entry_len, field_len,
    put_entry_start, put_len_field,
};
use grist_tensor::{
    Batch, FeatureSpec, Lossy, RecordBuf, Section, SpecFile, Tensor, TensorError, Values,
};
use prost::Message;

use crate::error::{Error, Result};
use crate::proto::{self, feature::Kind};

/// Builds one `tf.train.Example` from values.
///
/// ```
/// use grist_tfrecord::ExampleBuilder;
/// let bytes = ExampleBuilder::new()
///     .with_int64s("id", [7])
///     .with_floats("score", [0.5])
///     .with_bytes("label", ["cat"])
///     .encode();
/// assert!(!bytes.is_empty());
/// ```
#[derive(Clone, Debug, Default)]
pub struct ExampleBuilder {
    features: BTreeMap<String, proto::Feature>,
}

fn int64_feature(values: impl IntoIterator<Item = i64>) -> proto::Feature {
    proto::Feature {
        kind: Some(Kind::Int64List(proto::Int64List {
            value: values.into_iter().collect(),
        })),
    }
}

fn float_feature(values: impl IntoIterator<Item = f32>) -> proto::Feature {
    proto::Feature {
        kind: Some(Kind::FloatList(proto::FloatList {
            value: values.into_iter().collect(),
        })),
    }
}

fn bytes_feature<B: AsRef<[u8]>>(values: impl IntoIterator<Item = B>) -> proto::Feature {
    proto::Feature {
        kind: Some(Kind::BytesList(proto::BytesList {
            value: values
                .into_iter()
                .map(|b| Bytes::copy_from_slice(b.as_ref()))
                .collect(),
        })),
    }
}

impl ExampleBuilder {
    /// An Example with no features.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets feature `key` to an `int64_list`.
    #[must_use]
    pub fn with_int64s(
        mut self,
        key: impl Into<String>,
        values: impl IntoIterator<Item = i64>,
    ) -> Self {
        self.features.insert(key.into(), int64_feature(values));
        self
    }

    /// Sets feature `key` to a `float_list`.
    #[must_use]
    pub fn with_floats(
        mut self,
        key: impl Into<String>,
        values: impl IntoIterator<Item = f32>,
    ) -> Self {
        self.features.insert(key.into(), float_feature(values));
        self
    }

    /// Sets feature `key` to a `bytes_list`.
    #[must_use]
    pub fn with_bytes<B: AsRef<[u8]>>(
        mut self,
        key: impl Into<String>,
        values: impl IntoIterator<Item = B>,
    ) -> Self {
        self.features.insert(key.into(), bytes_feature(values));
        self
    }

    /// The Example message.
    fn build(self) -> proto::Example {
        proto::Example {
            features: Some(proto::Features {
                feature: self.features,
            }),
        }
    }

    /// The serialized Example.
    pub fn encode(self) -> Vec<u8> {
        self.build().encode_to_vec()
    }
}

/// The refusal of a float64 feature written without [`Lossy::Allow`].
pub(crate) fn narrowing(name: &str) -> Error {
    Error::Spec(fm::narrowing(&TF_EXAMPLE, name))
}

fn mismatch(name: &str, reason: impl Into<String>) -> Error {
    Error::Spec(TensorError::InvalidSpec {
        feature: name.to_string(),
        reason: reason.into(),
    })
}

/// Encodes every row of `batch` as a serialized `tf.train.Example` (or
/// `SequenceExample` when `spec` is a sequence spec) such that decoding
/// the records with the same specs yields the same batch.
///
/// The specs say which keys to write: dense and varlen features under
/// their name, `SparseFeature`s as their index and value keys,
/// `RaggedFeature`s as their value key and partition keys. A
/// `FixedLenSequenceFeature` of a plain Example is written with its
/// padding (the batch does not record the original lengths), and so is a
/// sequence `VarLenFeature` (every feature list gets the batch's number of
/// steps). The bytes are those protobuf writes for the message (map
/// entries in key order, numeric lists packed).
///
/// Values keep their meaning exactly: int64, float32 and string columns
/// are written as they are, int32 and bool columns widened to int64 lists
/// (a decoder whose spec says int32 or bool reads them back as such). A
/// float64 column is refused with [`TensorError::UnsupportedSpec`]:
/// tf.Example holds float32 only, and the round trip would not be exact
/// ([`ExampleEncoder`](crate::ExampleEncoder) narrows it under
/// [`Lossy::Allow`]).
///
/// Fails with [`TensorError::BadRagged`] (in [`Error::Spec`]) for a ragged
/// tensor that no records describe, such as one a decoder with
/// `validate: false` returned for inconsistent partitions, and with
/// [`TensorError::InvalidSpec`] when a column does not fit its spec.
pub fn encode_batch(batch: &Batch, spec: &SpecFile) -> Result<Vec<Vec<u8>>> {
    let mut records = RecordBuf::new();
    encode_rows(batch, spec, Lossy::Refuse, &mut records)?;
    Ok(records.iter().map(<[u8]>::to_vec).collect())
}

/// [`encode_batch`] into `out`, float64 values narrowed to float32 when
/// `lossy` allows it (and refused otherwise).
pub(crate) fn encode_rows(
    batch: &Batch,
    spec: &SpecFile,
    lossy: Lossy,
    out: &mut RecordBuf,
) -> Result<()> {
    let d = &TF_EXAMPLE;
    let rows = batch.rows();
    if !spec.sequence {
        let columns = fm::columns(d, batch, Section::Features, &spec.features, lossy)?;
        let mut features = FeaturesWriter::new(d, &columns);
        for r in 0..rows {
            let len = features.measure(r);
            let data = out.data_mut();
            data.reserve(field_len(len));
            put_len_field(data, TAG_1, len);
            features.write(r, data);
            out.end_record();
        }
        return Ok(());
    }
    let context = fm::columns(d, batch, Section::Context, &spec.context_features, lossy)?;
    let lists = feature_lists(batch, spec, rows, lossy)?;
    let mut context = FeaturesWriter::new(d, &context);
    for r in 0..rows {
        let context_len = context.measure(r);
        let list_lens: Vec<Option<usize>> = lists
            .iter()
            .map(|(_, steps)| steps[r].as_ref().map(|s| feature_list_len(s)))
            .collect();
        let lists_len: usize = lists
            .iter()
            .zip(&list_lens)
            .filter_map(|((key, _), len)| {
                len.map(|len| field_len(entry_len(d, key, list_value(len))))
            })
            .sum();
        let data = out.data_mut();
        put_len_field(data, TAG_1, context_len);
        context.write(r, data);
        put_len_field(data, TAG_2, lists_len);
        for ((key, steps), len) in lists.iter().zip(&list_lens) {
            let (Some(steps), Some(len)) = (&steps[r], len) else {
                continue;
            };
            put_entry_start(d, data, key, entry_len(d, key, list_value(*len)));
            if let Some(len) = list_value(*len) {
                put_len_field(data, TAG_2, len);
                for v in steps {
                    let payload = v.payload(d);
                    put_len_field(data, TAG_1, v.feature_len(payload));
                    v.write_feature(d, payload, data);
                }
            }
        }
        out.end_record();
    }
    Ok(())
}

/// The bytes of a `FeatureList` of these steps.
fn feature_list_len(steps: &[Val]) -> usize {
    steps
        .iter()
        .map(|v| field_len(v.feature_len(v.payload(&TF_EXAMPLE))))
        .sum()
}

/// A `FeatureList` of `len` bytes as a map entry's value: protobuf leaves
/// an empty one (the default) out.
fn list_value(len: usize) -> Option<usize> {
    (len > 0).then_some(len)
}

/// Per sequence feature (in key order), each row's steps, `None` for a
/// row the feature list is left out of.
type Lists<'a> = Vec<(&'a str, Vec<Option<Vec<Val<'a>>>>)>;

/// The feature lists of a sequence batch.
fn feature_lists<'a>(
    batch: &'a Batch,
    spec: &'a SpecFile,
    rows: usize,
    lossy: Lossy,
) -> Result<Lists<'a>> {
    let d = &TF_EXAMPLE;
    let find = |section, name| fm::find(batch, section, name).map_err(Error::Spec);
    let val =
        |name, values, range, lossy| fm::val(d, name, values, range, lossy).map_err(Error::Spec);
    let mut lists: BTreeMap<&str, Vec<Option<Vec<Val>>>> = BTreeMap::new();
    for s in &spec.sequence_features {
        let name = s.name();
        let mut column = Vec::with_capacity(rows);
        match (s, find(Section::FeatureLists, name)?) {
            (FeatureSpec::FixedLenSequence(_), Tensor::Dense(d)) => {
                let lengths = find(Section::FeatureListLengths, name)?;
                let Some(Values::Int64(lengths)) = lengths.as_dense().map(|l| &l.values) else {
                    return Err(mismatch(name, "feature_list_lengths is not int64"));
                };
                let item: usize = d.shape.iter().skip(2).product();
                let max_steps = d.shape.get(1).copied().unwrap_or(0);
                for r in 0..rows {
                    let steps = lengths.get(r).copied().unwrap_or(0).max(0) as usize;
                    let base = r * max_steps * item;
                    let steps = (0..steps.min(max_steps))
                        .map(|t| {
                            val(
                                name,
                                &d.values,
                                base + t * item..base + (t + 1) * item,
                                lossy,
                            )
                        })
                        .collect::<Result<_>>()?;
                    column.push(Some(steps));
                }
            }
            (FeatureSpec::Varlen(_), Tensor::Sparse(sp)) => {
                // Every row gets the batch's number of steps, trailing steps
                // without values included: they are part of the dense
                // shape the decoder reports.
                let batch_steps = sp.dense_shape.get(1).copied().unwrap_or(0);
                for range in fm::sparse_rows(name, &sp.indices, 3, rows)? {
                    let steps = range
                        .clone()
                        .map(|i| sp.indices[i * 3 + 1] + 1)
                        .fold(batch_steps, i64::max)
                        .max(0) as usize;
                    let mut feature = Vec::with_capacity(steps);
                    let mut at = range.start;
                    for t in 0..steps {
                        let start = at;
                        while at < range.end && sp.indices[at * 3 + 1] == t as i64 {
                            at += 1;
                        }
                        feature.push(val(name, &sp.values, start..at, lossy)?);
                    }
                    column.push((steps > 0).then_some(feature));
                }
            }
            (FeatureSpec::Ragged(_), Tensor::Ragged(t)) => {
                fm::check_ragged(name, t, rows, 2)?;
                for r in 0..rows {
                    let ranges = fm::ragged_ranges(&t.nested_row_splits, r);
                    let steps = ranges.get(1).cloned().unwrap_or(0..0);
                    let inner = &t.nested_row_splits[1];
                    let steps = steps
                        .map(|i| {
                            let (a, b) = (inner[i].max(0) as usize, inner[i + 1].max(0) as usize);
                            val(name, &t.flat_values.values, a..b, lossy)
                        })
                        .collect::<Result<_>>()?;
                    column.push(Some(steps));
                }
            }
            (s, t) => {
                return Err(mismatch(
                    name,
                    format!(
                        "a {} sequence spec cannot be written from a {} tensor",
                        s.kind(),
                        fm::layout(t)
                    ),
                ));
            }
        }
        lists.insert(name, column);
    }
    Ok(lists.into_iter().collect())
}
