//! Building `tf.train.Example` / `tf.train.SequenceExample` records: from
//! values with [`ExampleBuilder`], or from a whole [`Batch`] with
//! [`encode_batch`], the inverse of [`ExampleDecoder`](crate::ExampleDecoder).

use std::collections::BTreeMap;

use bytes::Bytes;
use grist_tensor::{
    Batch, FeatureSpec, Lossy, Partition, RaggedTensor, Section, SpecFile, Tensor, TensorError,
    Values,
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
    pub fn with_int64s(
        mut self,
        key: impl Into<String>,
        values: impl IntoIterator<Item = i64>,
    ) -> Self {
        self.features.insert(key.into(), int64_feature(values));
        self
    }

    /// Sets feature `key` to a `float_list`.
    pub fn with_floats(
        mut self,
        key: impl Into<String>,
        values: impl IntoIterator<Item = f32>,
    ) -> Self {
        self.features.insert(key.into(), float_feature(values));
        self
    }

    /// Sets feature `key` to a `bytes_list`.
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

/// A feature list holding `values[range]` of a value list (of feature
/// `name`).
fn feature_of(
    name: &str,
    values: &Values,
    range: std::ops::Range<usize>,
    lossy: Lossy,
) -> Result<proto::Feature> {
    Ok(match values {
        Values::Int64(v) => int64_feature(v[range].iter().copied()),
        Values::Int32(v) => int64_feature(v[range].iter().map(|&x| x as i64)),
        Values::Bool(v) => int64_feature(v[range].iter().map(|&x| x as i64)),
        Values::Float32(v) => float_feature(v[range].iter().copied()),
        Values::Float64(v) if lossy == Lossy::Allow => {
            float_feature(v[range].iter().map(|&x| x as f32))
        }
        Values::Float64(_) => return Err(narrowing(name)),
        Values::String(s) => bytes_feature(range.map(|i| s.get(i).unwrap_or_default())),
        other => {
            return Err(Error::Spec(TensorError::Unsupported {
                what: format!(
                    "feature {name}: tf.Example cannot hold {} values",
                    other.dtype()
                ),
            }));
        }
    })
}

/// The refusal of a float64 feature written without [`Lossy::Allow`].
pub(crate) fn narrowing(name: &str) -> Error {
    Error::Spec(TensorError::UnsupportedSpec {
        feature: name.to_string(),
        format: "tf.Example",
        kind: "float64",
        reason: "tf.Example holds float32, not float64: writing would lose precision \
                 (allow it with Lossy::Allow)"
            .into(),
    })
}

fn mismatch(name: &str, reason: impl Into<String>) -> Error {
    Error::Spec(TensorError::InvalidSpec {
        feature: name.to_string(),
        reason: reason.into(),
    })
}

/// For each batch row, the range of entries of a row-sorted COO index list
/// (`rank` entries per value) that belong to it.
fn sparse_rows(indices: &[i64], rank: usize, rows: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::with_capacity(rows);
    let nnz = indices.len() / rank.max(1);
    let mut at = 0;
    for r in 0..rows {
        let start = at;
        while at < nnz && indices[at * rank] == r as i64 {
            at += 1;
        }
        out.push(start..at);
    }
    out
}

/// Checks that a ragged tensor of a `rows`-row batch describes rows that
/// records can hold: `levels` levels of row splits, the outermost over the
/// batch, each starting at 0, never decreasing and ending at the number of
/// rows of the level below (the flat values, for the innermost).
///
/// A decoder with `validate: false` may return tensors that fail this, as
/// TensorFlow does; no records describe them.
fn check_ragged(name: &str, t: &RaggedTensor, rows: usize, levels: usize) -> Result<()> {
    let bad = |reason: String| {
        Err(Error::Spec(TensorError::BadRagged {
            feature: name.to_string(),
            reason,
        }))
    };
    let splits = &t.nested_row_splits;
    if splits.len() != levels {
        return bad(format!(
            "{} levels of row splits, the spec describes {levels}",
            splits.len()
        ));
    }
    let flat = &t.flat_values;
    if flat.values.len() != flat.shape.iter().product::<usize>() {
        return bad(format!(
            "{} flat values do not fill the shape {:?}",
            flat.values.len(),
            flat.shape
        ));
    }
    if splits[0].len() != rows + 1 {
        return bad(format!(
            "the outer row splits have {} entries for {rows} records",
            splits[0].len()
        ));
    }
    let nvals = flat.shape.first().copied().unwrap_or(0);
    for (i, level) in splits.iter().enumerate() {
        let below = splits
            .get(i + 1)
            .map_or(nvals, |l| l.len().saturating_sub(1));
        if level.first() != Some(&0) {
            return bad(format!("row splits of level {i} do not start at 0"));
        }
        if level.windows(2).any(|w| w[1] < w[0]) {
            return bad(format!("row splits of level {i} decrease"));
        }
        if level.last() != Some(&(below as i64)) {
            return bad(format!(
                "row splits of level {i} end at {}, not at the {below} rows below",
                level.last().copied().unwrap_or(0)
            ));
        }
    }
    Ok(())
}

/// Per record, the ranges of rows at each level of a ragged tensor: level
/// 0 is the records themselves; level `i + 1` is indexed by the splits of
/// level `i`. The last entry ranges over the flat values.
fn ragged_ranges(splits: &[Vec<i64>], record: usize) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::with_capacity(splits.len() + 1);
    ranges.push(record..record + 1);
    for level in splits {
        let r = ranges.last().cloned().unwrap_or(0..0);
        let get = |i: usize| level.get(i).copied().unwrap_or(0).max(0) as usize;
        ranges.push(get(r.start)..get(r.end));
    }
    ranges
}

/// Writes each record's features for one output column into `out`.
fn encode_column(
    spec: &FeatureSpec,
    tensor: &Tensor,
    rows: usize,
    lossy: Lossy,
    out: &mut [BTreeMap<String, proto::Feature>],
) -> Result<()> {
    let name = spec.name();
    match (spec, tensor) {
        (FeatureSpec::Dense(_), Tensor::Dense(d))
        | (FeatureSpec::FixedLenSequence(_), Tensor::Dense(d)) => {
            let row_len = d.values.len().checked_div(rows).unwrap_or(0);
            for (r, features) in out.iter_mut().enumerate() {
                features.insert(
                    name.to_string(),
                    feature_of(name, &d.values, r * row_len..(r + 1) * row_len, lossy)?,
                );
            }
        }
        (FeatureSpec::Varlen(_), Tensor::Sparse(s)) => {
            for (r, range) in sparse_rows(&s.indices, s.rank(), rows)
                .into_iter()
                .enumerate()
            {
                out[r].insert(name.to_string(), feature_of(name, &s.values, range, lossy)?);
            }
        }
        (FeatureSpec::Sparse(sp), Tensor::Sparse(s)) => {
            let (Some(value_key), keys) = (&sp.value_key, sp.index_keys()) else {
                return Err(mismatch(name, "SparseFeature without value_key"));
            };
            let rank = s.rank();
            if keys.len() + 1 != rank {
                return Err(mismatch(name, "index keys do not match the tensor rank"));
            }
            for (r, range) in sparse_rows(&s.indices, rank, rows).into_iter().enumerate() {
                for (k, key) in keys.iter().enumerate() {
                    let ids = range.clone().map(|i| s.indices[i * rank + 1 + k]);
                    out[r].insert(key.clone(), int64_feature(ids));
                }
                out[r].insert(
                    value_key.clone(),
                    feature_of(name, &s.values, range, lossy)?,
                );
            }
        }
        (FeatureSpec::Ragged(rs), Tensor::Ragged(t)) => {
            let inner: usize = t.flat_values.shape.iter().skip(1).product();
            // Uniform partitions are dense inner dimensions or fixed
            // levels: nothing to write for them.
            let n = rs.partitions.len();
            let innermost_uniform = rs
                .partitions
                .iter()
                .rev()
                .take_while(|p| matches!(p, Partition::UniformRowLength { .. }))
                .count();
            check_ragged(name, t, rows, 1 + n - innermost_uniform)?;
            let keyed: Vec<(usize, &Partition)> = rs.partitions[..n - innermost_uniform]
                .iter()
                .enumerate()
                .filter(|(_, p)| !matches!(p, Partition::UniformRowLength { .. }))
                .map(|(i, p)| (i + 1, p))
                .collect();
            for (r, features) in out.iter_mut().enumerate() {
                let ranges = ragged_ranges(&t.nested_row_splits, r);
                let values = ranges.last().cloned().unwrap_or(0..0);
                features.insert(
                    rs.value_key().to_string(),
                    feature_of(
                        name,
                        &t.flat_values.values,
                        values.start * inner..values.end * inner,
                        lossy,
                    )?,
                );
                for &(level, p) in &keyed {
                    let rows_here = ranges[level].clone();
                    let next = &t.nested_row_splits[level];
                    let base = next.get(rows_here.start).copied().unwrap_or(0);
                    let bounds = |i: usize| next.get(i).copied().unwrap_or(0);
                    let last = rows_here.end.wrapping_sub(1);
                    if matches!(p, Partition::ValueRowids { .. })
                        && !rows_here.is_empty()
                        && bounds(last + 1) == bounds(last)
                    {
                        // A record has as many rows as its largest row id
                        // + 1: an empty last row cannot be written. (Records
                        // that disagree on where rows end make such batches.)
                        return Err(Error::Spec(TensorError::BadRagged {
                            feature: name.to_string(),
                            reason: format!(
                                "record {r}: value_rowids cannot describe its empty last row"
                            ),
                        }));
                    }
                    let vals: Vec<i64> = match p {
                        Partition::RowLengths { .. } => {
                            rows_here.map(|i| bounds(i + 1) - bounds(i)).collect()
                        }
                        Partition::RowSplits { .. } => std::iter::once(0)
                            .chain(rows_here.map(|i| bounds(i + 1) - base))
                            .collect(),
                        Partition::RowLimits { .. } => {
                            rows_here.map(|i| bounds(i + 1) - base).collect()
                        }
                        Partition::RowStarts { .. } => {
                            rows_here.map(|i| bounds(i) - base).collect()
                        }
                        Partition::ValueRowids { .. } => rows_here
                            .clone()
                            .flat_map(|i| {
                                let n = (bounds(i + 1) - bounds(i)).max(0) as usize;
                                std::iter::repeat_n((i - rows_here.start) as i64, n)
                            })
                            .collect(),
                        Partition::UniformRowLength { .. } => continue,
                    };
                    if let Some(key) = p.key() {
                        features.insert(key.to_string(), int64_feature(vals));
                    }
                }
            }
        }
        (spec, t) => {
            return Err(mismatch(
                name,
                format!(
                    "a {} spec cannot be written from a {:?} tensor",
                    spec.kind(),
                    layout(t)
                ),
            ));
        }
    }
    Ok(())
}

fn layout(t: &Tensor) -> &'static str {
    match t {
        Tensor::Dense(_) => "dense",
        Tensor::Sparse(_) => "sparse",
        Tensor::Ragged(_) => "ragged",
        _ => "another",
    }
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
/// steps).
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
    encode_rows(batch, spec, Lossy::Refuse)
}

/// [`encode_batch`], float64 values narrowed to float32 when `lossy`
/// allows it (and refused otherwise).
pub(crate) fn encode_rows(batch: &Batch, spec: &SpecFile, lossy: Lossy) -> Result<Vec<Vec<u8>>> {
    let rows = batch.rows();
    let find = |section: Section, name: &str| {
        batch
            .get_in(section, name)
            .ok_or_else(|| mismatch(name, "the batch has no such column"))
    };
    if !spec.sequence {
        let mut features = vec![BTreeMap::new(); rows];
        for s in &spec.features {
            encode_column(
                s,
                find(Section::Features, s.name())?,
                rows,
                lossy,
                &mut features,
            )?;
        }
        return Ok(features
            .into_iter()
            .map(|feature| {
                proto::Example {
                    features: Some(proto::Features { feature }),
                }
                .encode_to_vec()
            })
            .collect());
    }
    let mut context = vec![BTreeMap::new(); rows];
    for s in &spec.context_features {
        encode_column(
            s,
            find(Section::Context, s.name())?,
            rows,
            lossy,
            &mut context,
        )?;
    }
    let mut lists: Vec<BTreeMap<String, proto::FeatureList>> = vec![BTreeMap::new(); rows];
    for s in &spec.sequence_features {
        let name = s.name();
        match (s, find(Section::FeatureLists, name)?) {
            (FeatureSpec::FixedLenSequence(_), Tensor::Dense(d)) => {
                let lengths = find(Section::FeatureListLengths, name)?;
                let Some(Values::Int64(lengths)) = lengths.as_dense().map(|l| &l.values) else {
                    return Err(mismatch(name, "feature_list_lengths is not int64"));
                };
                let item: usize = d.shape.iter().skip(2).product();
                let max_steps = d.shape.get(1).copied().unwrap_or(0);
                for (r, list) in lists.iter_mut().enumerate() {
                    let steps = lengths.get(r).copied().unwrap_or(0).max(0) as usize;
                    let base = r * max_steps * item;
                    let feature = (0..steps.min(max_steps))
                        .map(|t| {
                            feature_of(
                                name,
                                &d.values,
                                base + t * item..base + (t + 1) * item,
                                lossy,
                            )
                        })
                        .collect::<Result<_>>()?;
                    list.insert(name.to_string(), proto::FeatureList { feature });
                }
            }
            (FeatureSpec::Varlen(_), Tensor::Sparse(sp)) => {
                // Every row gets the batch's number of steps, trailing steps
                // without values included: they are part of the dense
                // shape the decoder reports.
                let batch_steps = sp.dense_shape.get(1).copied().unwrap_or(0);
                for (r, range) in sparse_rows(&sp.indices, 3, rows).into_iter().enumerate() {
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
                        feature.push(feature_of(name, &sp.values, start..at, lossy)?);
                    }
                    if steps > 0 {
                        lists[r].insert(name.to_string(), proto::FeatureList { feature });
                    }
                }
            }
            (FeatureSpec::Ragged(_), Tensor::Ragged(t)) => {
                check_ragged(name, t, rows, 2)?;
                for (r, list) in lists.iter_mut().enumerate() {
                    let ranges = ragged_ranges(&t.nested_row_splits, r);
                    let steps = ranges.get(1).cloned().unwrap_or(0..0);
                    let inner = &t.nested_row_splits[1];
                    let feature = steps
                        .map(|i| {
                            let (a, b) = (inner[i].max(0) as usize, inner[i + 1].max(0) as usize);
                            feature_of(name, &t.flat_values.values, a..b, lossy)
                        })
                        .collect::<Result<_>>()?;
                    list.insert(name.to_string(), proto::FeatureList { feature });
                }
            }
            (s, t) => {
                return Err(mismatch(
                    name,
                    format!(
                        "a {} sequence spec cannot be written from a {} tensor",
                        s.kind(),
                        layout(t)
                    ),
                ));
            }
        }
    }
    Ok(context
        .into_iter()
        .zip(lists)
        .map(|(feature, feature_list)| {
            proto::SequenceExample {
                context: Some(proto::Features { feature }),
                feature_lists: Some(proto::FeatureLists { feature_list }),
            }
            .encode_to_vec()
        })
        .collect())
}
