//! Spec inference: the feature specs that read a file, found from its
//! schema (Avro) or by sampling its first records (tf.Example,
//! SequenceExample, OFRecord), behind [`Format::infer_spec`].
//!
//! The formats that sample share the rules of [`SpecSampler`]: each
//! record's features are told to it, one by one, and
//! [`finish`](SpecSampler::finish) turns what was seen into specs.
//!
//! [`Format::infer_spec`]: crate::Format::infer_spec

use std::collections::BTreeMap;

use crate::report::MinMax;
use crate::{DType, FeatureSpec, FixedLenSequenceSpec, Input, ReadOptions, SpecFile, TensorError};

/// Options of [`Format::infer_spec`](crate::Format::infer_spec).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct InferOptions {
    /// How many records to sample (formats that sample records; Avro
    /// reads records only to find the shapes of sparse features).
    pub records: u64,
    /// Whether the records are `tf.SequenceExample`s (formats of
    /// tf.Example records); `None` tells by the records.
    pub sequence: Option<bool>,
    /// How files are read.
    pub read: ReadOptions,
    /// Avro: the reader schema the files are read through (schema
    /// evolution): the spec then names the reader's fields, and every
    /// file's writer schema must resolve against it. Other formats refuse
    /// it.
    pub reader_schema: Option<serde_json::Value>,
}

impl Default for InferOptions {
    fn default() -> Self {
        InferOptions {
            records: 1000,
            sequence: None,
            read: ReadOptions::default(),
            reader_schema: None,
        }
    }
}

impl InferOptions {
    /// Options with every field at its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sample the first `records` records. By default, 1000.
    #[must_use]
    pub fn with_records(mut self, records: u64) -> Self {
        self.records = records;
        self
    }

    /// Read the records as `tf.SequenceExample`s (`true`) or
    /// `tf.Example`s (`false`). By default, told by the records: they are
    /// sequence examples when a sampled record has `feature_lists` (a
    /// field a `tf.Example` does not have).
    #[must_use]
    pub fn with_sequence(mut self, sequence: bool) -> Self {
        self.sequence = Some(sequence);
        self
    }

    /// How files are read. By default, [`ReadOptions::default`].
    #[must_use]
    pub fn with_read(mut self, read: ReadOptions) -> Self {
        self.read = read;
        self
    }

    /// Avro: infer the spec of the files as read through this reader
    /// schema (its JSON, as a spec file's `"reader_schema"` gives it):
    /// the features are the reader's fields, and the spec carries the
    /// schema. By default, none: the first file's writer schema decides.
    #[must_use]
    pub fn with_reader_schema(mut self, schema: serde_json::Value) -> Self {
        self.reader_schema = Some(schema);
        self
    }
}

/// What inference found: the spec, and notes on features it left out or
/// guessed at.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Inferred {
    /// The spec file: features (or context and sequence features) in name
    /// order for the sampling formats, in writer order for Avro.
    pub spec: SpecFile,
    /// Notes for people, feature by feature.
    pub notes: Vec<InferNote>,
    /// The records looked at.
    pub records: u64,
}

impl Inferred {
    /// `spec`, inferred from `records` records, with `notes`.
    pub fn new(spec: SpecFile, notes: Vec<InferNote>, records: u64) -> Self {
        Inferred {
            spec,
            notes,
            records,
        }
    }

    /// The features left out of the spec.
    pub fn skipped(&self) -> impl Iterator<Item = &InferNote> {
        self.notes.iter().filter(|n| n.skipped)
    }
}

/// A note on one feature of an [`Inferred`] spec.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InferNote {
    /// The feature (or field) name.
    pub feature: String,
    /// Whether the feature was left out of the spec.
    pub skipped: bool,
    /// What happened, for people.
    pub message: String,
}

impl InferNote {
    /// A note that `feature` was left out, because of `message`.
    pub fn skipped(feature: impl Into<String>, message: impl Into<String>) -> Self {
        InferNote {
            feature: feature.into(),
            skipped: true,
            message: message.into(),
        }
    }

    /// A note on `feature`, which is in the spec.
    pub fn kept(feature: impl Into<String>, message: impl Into<String>) -> Self {
        InferNote {
            feature: feature.into(),
            skipped: false,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for InferNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.skipped {
            write!(f, "feature {:?} left out: {}", self.feature, self.message)
        } else {
            write!(f, "feature {:?}: {}", self.feature, self.message)
        }
    }
}

/// The inputs named in a message: the first one, and how many more.
pub fn inputs_named(inputs: &[Input]) -> String {
    match inputs {
        [] => "no input".into(),
        [one] => one.name().to_string(),
        [first, rest @ ..] => format!(
            "{} and {} other file{}",
            first.name(),
            rest.len(),
            crate::report::plural(rest.len() as u64)
        ),
    }
}

/// What was seen of one feature (or feature list).
#[derive(Clone, Debug, Default)]
struct Seen {
    /// The element type of its value lists, once one was seen.
    dtype: Option<DType>,
    /// Two element types seen, and the record where the second one was.
    conflict: Option<(DType, DType, u64)>,
    /// In how many records it had a value list.
    present: u64,
    /// The record it was last counted present in, plus one.
    last: u64,
    /// Values per record (features) or per step (feature lists).
    values: MinMax,
    /// Steps per record (feature lists).
    steps: MinMax,
}

impl Seen {
    fn dtype(&mut self, dtype: DType, record: u64) {
        match self.dtype {
            None => self.dtype = Some(dtype),
            Some(d) if d != dtype => {
                if self.conflict.is_none() {
                    self.conflict = Some((d, dtype, record));
                }
            }
            Some(_) => {}
        }
    }

    fn present(&mut self, record: u64) {
        if self.last != record + 1 {
            self.last = record + 1;
            self.present += 1;
        }
    }

    /// Why the feature cannot be read by any spec, if it cannot.
    fn problem(&self) -> Option<String> {
        if let Some((a, b, record)) = self.conflict {
            return Some(format!(
                "its values are {a} in some records and {b} in others (the first such: record \
                 {record} of the sample)"
            ));
        }
        if self.dtype.is_none() {
            return Some("no sampled record gives it a value list, so its type is unknown".into());
        }
        None
    }
}

/// The rules of spec inference by sampling, shared by the formats of
/// tf.Example, SequenceExample and OFRecord records.
///
/// For each sampled record, tell it each feature ([`feature`]) or feature
/// list ([`feature_list`]) the record holds, then [`end_record`]. Then
/// [`finish`] applies the rules:
///
/// * a feature whose value list has the same number of values `n > 0` in
///   every sampled record is `dense`, of shape `[]` when `n` is 1 and
///   `[n]` otherwise, with no default;
/// * any other feature (its count varies, it is empty everywhere, or it is
///   missing from some records) is `varlen`: a missing feature reads as no
///   values, where a dense one would need a default that the data does not
///   give;
/// * a feature list (sequence examples) whose every step holds the same
///   number of values `n > 0` is `fixed_len_sequence` of shape `[]` or
///   `[n]`, with `allow_missing` when some sampled record lacks it; any
///   other is `varlen`;
/// * a feature whose values have two types in the sample, or whose type
///   no sampled record tells (it is only ever a Feature with no list), is
///   left out, with a note.
///
/// ```
/// use grist_tensor::{DType, FeatureSpec, SpecSampler};
///
/// let mut s = SpecSampler::new();
/// for n in [3, 3] {
///     s.feature("id", Some(DType::Int64), 1);
///     s.feature("emb", Some(DType::Float32), 4);
///     s.feature("tags", Some(DType::String), n - 1);
///     s.end_record();
/// }
/// s.feature("id", Some(DType::Int64), 1);
/// s.feature("emb", Some(DType::Float32), 4);
/// s.feature("tags", Some(DType::String), 5);
/// s.end_record();
/// let inferred = s.finish(Some(false));
/// let f = &inferred.spec.features;
/// assert_eq!(f[0], FeatureSpec::dense("emb", DType::Float32, [4]));
/// assert_eq!(f[1], FeatureSpec::dense("id", DType::Int64, []));
/// assert_eq!(f[2], FeatureSpec::varlen("tags", DType::String));
/// ```
///
/// [`feature`]: Self::feature
/// [`feature_list`]: Self::feature_list
/// [`end_record`]: Self::end_record
/// [`finish`]: Self::finish
#[derive(Clone, Debug, Default)]
pub struct SpecSampler {
    records: u64,
    features: BTreeMap<String, Seen>,
    lists: BTreeMap<String, Seen>,
    /// Features left out before their values were looked at, and why.
    unusable: BTreeMap<String, String>,
    sequence_seen: bool,
}

impl SpecSampler {
    /// Nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current record's feature `name`: a list of `values` values of
    /// `dtype`, or (`dtype` `None`) a Feature with no list, which reads as
    /// missing.
    pub fn feature(&mut self, name: &str, dtype: Option<DType>, values: usize) {
        let record = self.records;
        let seen = entry(&mut self.features, name);
        if let Some(dtype) = dtype {
            seen.dtype(dtype, record);
            seen.present(record);
            seen.values.add(values);
        }
    }

    /// The current record's feature list `name` (sequence examples): its
    /// steps, each a list of some values of a type (`None`: a Feature with
    /// no list).
    pub fn feature_list(
        &mut self,
        name: &str,
        steps: impl IntoIterator<Item = (Option<DType>, usize)>,
    ) {
        let record = self.records;
        self.sequence_seen = true;
        let seen = entry(&mut self.lists, name);
        seen.present(record);
        let mut n = 0;
        for (dtype, values) in steps {
            if let Some(dtype) = dtype {
                seen.dtype(dtype, record);
            }
            seen.values.add(values);
            n += 1;
        }
        seen.steps.add(n);
    }

    /// Says that the records are sequence examples even if none of the
    /// sampled ones has a feature list (a record with an empty
    /// `feature_lists` field).
    pub fn saw_sequence(&mut self) {
        self.sequence_seen = true;
    }

    /// Leaves feature `name` out of the spec, because of `message` (a
    /// name that is not UTF-8, ...); said once in the notes, however
    /// often it is called.
    pub fn leave_out(&mut self, name: &str, message: &str) {
        if !self.unusable.contains_key(name) {
            self.unusable.insert(name.to_string(), message.to_string());
        }
    }

    /// Ends the current record.
    pub fn end_record(&mut self) {
        self.records += 1;
    }

    /// The records ended so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The spec the sampled records call for (see the rules above):
    /// `features` when `sequence` is `Some(false)`, context and sequence
    /// features when it is `Some(true)`; `None` picks sequence features
    /// when a record had feature lists (or [`saw_sequence`] was called).
    ///
    /// [`saw_sequence`]: Self::saw_sequence
    pub fn finish(self, sequence: Option<bool>) -> Inferred {
        let sequence = sequence.unwrap_or(self.sequence_seen);
        let records = self.records;
        let mut notes: Vec<InferNote> = self
            .unusable
            .iter()
            .map(|(name, message)| InferNote::skipped(name, message))
            .collect();
        let mut plain = Vec::new();
        for (name, seen) in &self.features {
            if self.unusable.contains_key(name) {
                continue;
            }
            if let Some(problem) = seen.problem() {
                notes.push(InferNote::skipped(name, problem));
                continue;
            }
            let Some(dtype) = seen.dtype else { continue };
            plain.push(match seen.values.get() {
                Some((lo, hi)) if seen.present == records && lo == hi && lo > 0 => {
                    FeatureSpec::dense(name.clone(), dtype, shape_of(lo))
                }
                _ => FeatureSpec::varlen(name.clone(), dtype),
            });
        }
        let mut lists = Vec::new();
        if sequence {
            for (name, seen) in &self.lists {
                if self.features.get(name).is_some_and(|f| f.dtype.is_some()) {
                    notes.push(InferNote::skipped(
                        name,
                        "it is both a context feature and a feature list; the context feature \
                         is kept",
                    ));
                    continue;
                }
                if let Some(problem) = seen.problem() {
                    notes.push(InferNote::skipped(name, problem));
                    continue;
                }
                let Some(dtype) = seen.dtype else { continue };
                lists.push(match seen.values.get() {
                    Some((lo, hi)) if lo == hi && lo > 0 => {
                        FeatureSpec::FixedLenSequence(FixedLenSequenceSpec {
                            name: name.clone(),
                            dtype,
                            shape: shape_of(lo),
                            allow_missing: seen.present < records,
                            default: None,
                            tf_class: None,
                        })
                    }
                    _ => FeatureSpec::varlen(name.clone(), dtype),
                });
            }
        } else {
            for name in self.lists.keys() {
                notes.push(InferNote::skipped(
                    name,
                    "it is a feature list of sequence examples, and the records are read as \
                     tf.Examples",
                ));
            }
        }
        let spec = if sequence {
            SpecFile {
                context_features: plain,
                sequence_features: lists,
                sequence: true,
                ..SpecFile::default()
            }
        } else {
            SpecFile {
                features: plain,
                ..SpecFile::default()
            }
        };
        Inferred::new(spec, notes, records)
    }

    /// Like [`finish`](Self::finish), but an error naming `inputs` when no
    /// record was sampled: with nothing to go by, an empty spec would read
    /// every record as nothing.
    pub fn finish_for(
        self,
        inputs: &[Input],
        sequence: Option<bool>,
    ) -> Result<Inferred, TensorError> {
        if self.records == 0 {
            return Err(TensorError::NoRecords {
                inputs: inputs_named(inputs),
            });
        }
        Ok(self.finish(sequence))
    }
}

fn entry<'a>(map: &'a mut BTreeMap<String, Seen>, name: &str) -> &'a mut Seen {
    if !map.contains_key(name) {
        map.insert(name.to_string(), Seen::default());
    }
    map.get_mut(name).expect("inserted above")
}

/// The shape of a feature of `n` values: a scalar for one.
fn shape_of(n: usize) -> Vec<i64> {
    if n == 1 { Vec::new() } else { vec![n as i64] }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varlen(name: &str, dtype: DType) -> FeatureSpec {
        FeatureSpec::varlen(name, dtype)
    }

    #[test]
    fn missing_features_are_varlen_and_conflicts_are_left_out() {
        let mut s = SpecSampler::new();
        s.feature("a", Some(DType::Int64), 2);
        s.feature("b", Some(DType::Int64), 1);
        s.feature("none", None, 0);
        s.feature("empty", Some(DType::Float32), 0);
        s.end_record();
        s.feature("a", Some(DType::Int64), 2);
        s.feature("b", Some(DType::Float32), 1);
        s.feature("empty", Some(DType::Float32), 0);
        s.feature("none", None, 0);
        s.end_record();
        s.feature("b", Some(DType::Int64), 1);
        s.feature("empty", Some(DType::Float32), 0);
        s.end_record();
        let inferred = s.finish(None);
        assert!(!inferred.spec.sequence);
        assert_eq!(
            inferred.spec.features,
            [varlen("a", DType::Int64), varlen("empty", DType::Float32)]
        );
        let skipped: Vec<&str> = inferred.skipped().map(|n| n.feature.as_str()).collect();
        assert_eq!(skipped, ["b", "none"]);
        assert!(inferred.notes[0].message.contains("record 1"));
        assert_eq!(inferred.records, 3);
    }

    #[test]
    fn a_feature_given_twice_in_a_record_counts_once() {
        let mut s = SpecSampler::new();
        for _ in 0..2 {
            s.feature("a", Some(DType::Int64), 2);
            s.feature("a", Some(DType::Int64), 2);
            s.end_record();
        }
        let f = s.finish(Some(false)).spec.features;
        assert_eq!(f, [FeatureSpec::dense("a", DType::Int64, [2])]);
    }

    #[test]
    fn feature_lists_are_fixed_when_every_step_agrees() {
        let mut s = SpecSampler::new();
        s.feature("ctx", Some(DType::String), 1);
        s.feature_list(
            "fixed",
            [(Some(DType::Float32), 2), (Some(DType::Float32), 2)],
        );
        s.feature_list("ragged", [(Some(DType::Int64), 1), (Some(DType::Int64), 3)]);
        s.feature_list("none", []);
        s.end_record();
        s.feature("ctx", Some(DType::String), 1);
        s.feature_list("ragged", []);
        s.end_record();
        let inferred = s.finish(None);
        let spec = &inferred.spec;
        assert!(spec.sequence && spec.features.is_empty());
        assert_eq!(
            spec.context_features,
            [FeatureSpec::dense("ctx", DType::String, [])]
        );
        match &spec.sequence_features[0] {
            FeatureSpec::FixedLenSequence(f) => {
                assert_eq!((f.name.as_str(), &f.shape[..]), ("fixed", &[2i64][..]));
                assert!(f.allow_missing);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(spec.sequence_features[1], varlen("ragged", DType::Int64));
        assert_eq!(spec.sequence_features.len(), 2);
        assert_eq!(inferred.skipped().next().unwrap().feature, "none");
        // Read as plain examples, the lists are left out with a note.
        let mut s = SpecSampler::new();
        s.feature_list("l", [(Some(DType::Int64), 1)]);
        s.end_record();
        let plain = s.finish(Some(false));
        assert!(plain.spec.features.is_empty() && !plain.spec.sequence);
        assert_eq!(plain.notes.len(), 1);
    }

    #[test]
    fn no_records_is_an_error_naming_the_input() {
        let e = SpecSampler::new()
            .finish_for(&[Input::local("/x/empty.tfrecord")], None)
            .unwrap_err();
        assert!(matches!(e, TensorError::NoRecords { .. }));
        assert!(e.to_string().contains("/x/empty.tfrecord"), "{e}");
    }

    #[test]
    fn inferred_specs_serialize_and_read_back() {
        let mut s = SpecSampler::new();
        s.feature("x", Some(DType::Float32), 3);
        s.feature_list("y", [(Some(DType::Int64), 1)]);
        s.end_record();
        let spec = s.finish(None).spec;
        assert_eq!(SpecFile::from_json(&spec.to_json()).unwrap(), spec);
    }
}
