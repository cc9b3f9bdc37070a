//! The spec configurations of the `tfrecord_example` fuzz target, two
//! valid records for each, and the ragged consistency check that decides
//! where write-then-read must round-trip.
//!
//! A fuzz input is one selector byte (its low 7 bits pick the
//! configuration, modulo [`configs`]`().len()`) followed by the record(s).
//! New configurations go at the end, so saved inputs keep their meaning.
//! Every configuration reads one-letter keys (`"a"`, `"b"`, ...), so
//! random bytes and small mutations of the seeds hit wanted features.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use grist_tensor::{
    Batch, DType, FeatureSpec, Limits, Partition, RaggedSpec, RaggedTensor, SpecFile, Tensor,
};
use grist_tfrecord::ExampleDecoder;
use grist_tfrecord::proto::{self, feature::Kind};
use prost::Message;
use serde_json::{Value, json};

/// One parse configuration.
#[derive(Debug)]
pub struct Config {
    /// A short name (`"ragged_row_splits_validate"`), for messages.
    pub name: String,
    /// The specs (also what [`grist_tfrecord::encode_batch`] writes).
    pub spec: SpecFile,
    /// A decoder for `spec` with [`limits`]; clone it per input.
    pub decoder: ExampleDecoder,
    /// Two records that decode without error, alone or together.
    pub valid: [Vec<u8>; 2],
    /// Whether every feature reads its own keys. When two features share
    /// a key, `encode_batch` writes the key once per feature (the last one
    /// wins), so write-then-read cannot be expected to round-trip.
    pub disjoint_keys: bool,
}

/// Small limits, so a fuzzed value cannot make a run slow or big: every
/// allocation sized by the input must stay under them.
pub fn limits() -> Limits {
    Limits::default()
        .with_max_record_bytes(1 << 20)
        .with_max_alloc_bytes(4 << 20)
}

/// Every configuration, built once.
pub fn configs() -> &'static [Config] {
    static CONFIGS: OnceLock<Vec<Config>> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        spec_values()
            .into_iter()
            .map(|(name, value)| {
                let spec = SpecFile::from_value(&value)
                    .unwrap_or_else(|e| panic!("config {name}: bad spec: {e}"));
                let decoder = ExampleDecoder::from_spec_file(&spec)
                    .unwrap_or_else(|e| panic!("config {name}: rejected spec: {e}"))
                    .with_limits(limits());
                let disjoint_keys = name != "overlapping_keys";
                let valid = if disjoint_keys {
                    [valid_record(&spec, 0), valid_record(&spec, 1)]
                } else {
                    // Every spec reads int64 key "a": [1, 1] is in range for
                    // the sparse indices and a consistent partition.
                    let a = |v: Vec<i64>| {
                        proto::Example {
                            features: Some(proto::Features {
                                feature: [("a".to_string(), int64s(v))].into(),
                            }),
                        }
                        .encode_to_vec()
                    };
                    [a(vec![1, 1]), a(vec![0])]
                };
                let config = Config {
                    name,
                    spec,
                    decoder,
                    valid,
                    disjoint_keys,
                };
                // The valid records really are valid, alone and together.
                let mut d = config.decoder.clone();
                let file = "valid".into();
                for records in [&config.valid[..1], &config.valid[1..], &config.valid[..]] {
                    if let Err(e) = d.decode_batch(&file, 0, records.iter().map(|r| &r[..])) {
                        panic!("config {}: a valid record fails: {e}", config.name);
                    }
                }
                config
            })
            .collect()
    })
}

/// The spec files, by name.
fn spec_values() -> Vec<(String, Value)> {
    let mut out = vec![
        (
            "dense_defaults",
            json!({"features": [
                {"name": "a", "kind": "dense", "dtype": "int64", "shape": [], "default": 7},
                {"name": "b", "kind": "dense", "dtype": "float32", "shape": [3], "default": 0.5},
                {"name": "c", "kind": "dense", "dtype": "string", "shape": [2, 3],
                 "default": ["u", "v", "w", "x", "y", "z"]},
                {"name": "d", "kind": "dense", "dtype": "string", "shape": [], "default": "dflt"},
                {"name": "e", "kind": "dense", "dtype": "int64", "shape": [3], "default": [1, 2, 3]},
                {"name": "f", "kind": "dense", "dtype": "float32", "shape": [2, 3], "default": "NaN"},
            ]}),
        ),
        (
            "dense_required",
            json!({"features": [
                {"name": "a", "kind": "dense", "dtype": "int64", "shape": []},
                {"name": "b", "kind": "dense", "dtype": "float32", "shape": [3]},
                {"name": "c", "kind": "dense", "dtype": "string", "shape": [2, 3]},
            ]}),
        ),
        (
            "varlen",
            json!({"features": [
                {"name": "a", "kind": "varlen", "dtype": "int64"},
                {"name": "b", "kind": "varlen", "dtype": "float32"},
                {"name": "c", "kind": "varlen", "dtype": "string"},
            ]}),
        ),
        (
            "ragged_flat",
            json!({"features": [
                {"name": "r1", "kind": "ragged", "dtype": "int64", "value_key": "a"},
                {"name": "r2", "kind": "ragged", "dtype": "float32", "value_key": "b",
                 "row_splits_dtype": "int64"},
                {"name": "r3", "kind": "ragged", "dtype": "string", "value_key": "c"},
            ]}),
        ),
        (
            "fixed_len_sequence",
            json!({"features": [
                {"name": "a", "kind": "fixed_len_sequence", "dtype": "int64", "shape": [],
                 "allow_missing": true},
                {"name": "b", "kind": "fixed_len_sequence", "dtype": "float32", "shape": [2],
                 "allow_missing": true, "default": -1.0},
                {"name": "c", "kind": "fixed_len_sequence", "dtype": "string", "shape": [],
                 "allow_missing": true},
                {"name": "d", "kind": "fixed_len_sequence", "dtype": "int64", "shape": [2, 3],
                 "allow_missing": true, "default": 9},
            ]}),
        ),
        (
            "overlapping_keys",
            json!({"features": [
                {"name": "a", "kind": "varlen", "dtype": "int64"},
                {"name": "sp", "kind": "sparse", "dtype": "int64", "index_key": ["a", "a"],
                 "value_key": "a", "size": [4, 4]},
                {"name": "r", "kind": "ragged", "dtype": "int64", "value_key": "a",
                 "partitions": [{"kind": "row_lengths", "key": "a"}]},
                {"name": "q", "kind": "ragged", "dtype": "int64", "value_key": "a",
                 "partitions": [{"kind": "value_rowids", "key": "a"},
                                {"kind": "row_splits", "key": "a"}]},
            ]}),
        ),
        (
            "sequence_lenient",
            json!({
                "context_features": [
                    {"name": "a", "kind": "dense", "dtype": "int64", "shape": [], "default": 0},
                    {"name": "b", "kind": "varlen", "dtype": "float32"},
                    {"name": "c", "kind": "ragged", "dtype": "string", "value_key": "c",
                     "partitions": [{"kind": "row_lengths", "key": "d"}]},
                ],
                "sequence_features": [
                    {"name": "a", "kind": "fixed_len_sequence", "dtype": "float32", "shape": [2],
                     "allow_missing": true},
                    {"name": "b", "kind": "fixed_len_sequence", "dtype": "int64", "shape": [],
                     "allow_missing": true},
                    {"name": "c", "kind": "varlen", "dtype": "string"},
                    {"name": "d", "kind": "ragged", "dtype": "int64", "value_key": "d"},
                ],
            }),
        ),
        (
            "sequence_strict",
            json!({
                "context_features": [
                    {"name": "a", "kind": "dense", "dtype": "float32", "shape": [3]},
                ],
                "sequence_features": [
                    {"name": "a", "kind": "fixed_len_sequence", "dtype": "int64", "shape": [],
                     "allow_missing": false},
                    {"name": "b", "kind": "varlen", "dtype": "int64"},
                    {"name": "c", "kind": "ragged", "dtype": "float32", "value_key": "c",
                     "row_splits_dtype": "int64"},
                    {"name": "d", "kind": "fixed_len_sequence", "dtype": "string", "shape": [2],
                     "allow_missing": false},
                ],
            }),
        ),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect::<Vec<_>>();

    for sorted in [false, true] {
        out.push((
            format!("sparse_{}", if sorted { "sorted" } else { "unsorted" }),
            json!({"features": [
                {"name": "s1", "kind": "sparse", "dtype": "int64", "index_key": "a",
                 "value_key": "b", "size": 10, "already_sorted": sorted},
                {"name": "s2", "kind": "sparse", "dtype": "float32", "index_key": ["c", "d"],
                 "value_key": "e", "size": [3, 4], "already_sorted": sorted},
                {"name": "s3", "kind": "sparse", "dtype": "string", "index_key": ["f"],
                 "value_key": "g", "size": [5], "already_sorted": sorted},
            ]}),
        ));
    }

    let row_splits = json!({"kind": "row_splits", "key": "b"});
    let row_lengths = json!({"kind": "row_lengths", "key": "b"});
    let row_starts = json!({"kind": "row_starts", "key": "b"});
    let row_limits = json!({"kind": "row_limits", "key": "b"});
    let value_rowids = json!({"kind": "value_rowids", "key": "b"});
    let uniform = |n: i64| json!({"kind": "uniform_row_length", "length": n});
    let key = |p: &Value, k: &str| {
        let mut p = p.clone();
        p["key"] = json!(k);
        p
    };
    let combos: Vec<(&str, Vec<Value>)> = vec![
        ("row_splits", vec![row_splits.clone()]),
        ("row_lengths", vec![row_lengths.clone()]),
        ("row_starts", vec![row_starts.clone()]),
        ("row_limits", vec![row_limits.clone()]),
        ("value_rowids", vec![value_rowids.clone()]),
        ("uniform", vec![uniform(2)]),
        (
            "lengths_splits",
            vec![row_lengths.clone(), key(&row_splits, "c")],
        ),
        (
            "rowids_uniform_starts",
            vec![value_rowids.clone(), uniform(2), key(&row_starts, "c")],
        ),
        ("uniform_limits", vec![uniform(3), row_limits.clone()]),
        (
            "splits_rowids_uniform",
            vec![row_splits.clone(), key(&value_rowids, "c"), uniform(2)],
        ),
        (
            "starts_lengths",
            vec![row_starts.clone(), key(&row_lengths, "c")],
        ),
    ];
    let dtypes = ["int64", "float32", "string"];
    for (i, (name, partitions)) in combos.into_iter().enumerate() {
        for validate in [false, true] {
            out.push((
                format!("ragged_{name}{}", if validate { "_validate" } else { "" }),
                json!({"features": [
                    {"name": "r", "kind": "ragged", "dtype": dtypes[i % 3], "value_key": "a",
                     "partitions": partitions,
                     "row_splits_dtype": if i % 2 == 0 { "int64" } else { "int32" },
                     "validate": validate},
                ]}),
            ));
        }
    }
    // Every kind in one parse: columns after a ragged one whose partitions
    // fail to compose, rows discarded across kinds.
    out.push((
        "mixed_kinds".to_string(),
        json!({"features": [
            {"name": "r", "kind": "ragged", "dtype": "int64", "value_key": "a",
             "partitions": [{"kind": "value_rowids", "key": "b"}], "validate": true},
            {"name": "c", "kind": "varlen", "dtype": "string"},
            {"name": "d", "kind": "dense", "dtype": "float32", "shape": [2], "default": 1.5},
            {"name": "s", "kind": "sparse", "dtype": "int64", "index_key": "e",
             "value_key": "f", "size": 6},
            {"name": "g", "kind": "fixed_len_sequence", "dtype": "float32", "shape": [],
             "allow_missing": true},
            {"name": "u", "kind": "ragged", "dtype": "string", "value_key": "h",
             "partitions": [{"kind": "uniform_row_length", "length": 2}]},
        ]}),
    ));
    out
}

/// A record that decodes without error under `spec`; `seed` varies it.
pub fn valid_record(spec: &SpecFile, seed: u64) -> Vec<u8> {
    if !spec.sequence {
        let mut feature = BTreeMap::new();
        for s in &spec.features {
            example_features(s, seed, &mut feature);
        }
        return proto::Example {
            features: Some(proto::Features { feature }),
        }
        .encode_to_vec();
    }
    let mut feature = BTreeMap::new();
    for s in &spec.context_features {
        example_features(s, seed, &mut feature);
    }
    let mut feature_list = BTreeMap::new();
    for s in &spec.sequence_features {
        let (key, list) = feature_list_of(s, seed);
        feature_list.insert(key, list);
    }
    proto::SequenceExample {
        context: Some(proto::Features { feature }),
        feature_lists: Some(proto::FeatureLists { feature_list }),
    }
    .encode_to_vec()
}

fn int64s(value: Vec<i64>) -> proto::Feature {
    proto::Feature {
        kind: Some(Kind::Int64List(proto::Int64List { value })),
    }
}

/// `n` values of `dtype` (with a NaN, a -0.0 and a non-UTF-8 string in
/// the mix).
fn values(dtype: DType, n: usize, seed: u64) -> proto::Feature {
    let s = seed as usize;
    let kind = match dtype {
        DType::Int64 => Kind::Int64List(proto::Int64List {
            value: (0..n).map(|i| ((s + 3 * i) % 11) as i64 - 3).collect(),
        }),
        DType::Float32 => Kind::FloatList(proto::FloatList {
            value: (0..n)
                .map(|i| [0.5, -0.0, f32::NAN, 1e30, -2.25][(s + i) % 5])
                .collect(),
        }),
        _ => Kind::BytesList(proto::BytesList {
            value: (0..n)
                .map(|i| {
                    if (s + i) % 4 == 3 {
                        vec![0xff, b'x'].into()
                    } else {
                        format!("s{s}_{i}").into_bytes().into()
                    }
                })
                .collect(),
        }),
    };
    proto::Feature { kind: Some(kind) }
}

fn example_features(s: &FeatureSpec, seed: u64, out: &mut BTreeMap<String, proto::Feature>) {
    let dims = |shape: &[i64]| shape.iter().product::<i64>().max(0) as usize;
    match s {
        // A feature with a default is left out every other record.
        FeatureSpec::Dense(d) if d.default.is_none() || seed.is_multiple_of(2) => {
            out.insert(d.name.clone(), values(d.dtype, dims(&d.shape), seed));
        }
        FeatureSpec::Dense(_) => {}
        FeatureSpec::Varlen(v) => {
            out.insert(v.name.clone(), values(v.dtype, (seed % 4) as usize, seed));
        }
        FeatureSpec::Sparse(sp) => {
            let sizes = sp.dense_shape();
            let n = 1 + (seed % 4) as usize;
            for (k, key) in sp.index_keys().iter().enumerate() {
                let size = sizes[k].max(1) as usize;
                let ids = (0..n)
                    .map(|i| ((seed as usize + 3 * i + k) % size) as i64)
                    .collect();
                out.insert(key.clone(), int64s(ids));
            }
            let value_key = sp.value_key.clone().unwrap_or_default();
            out.insert(value_key, values(sp.dtype, n, seed));
        }
        FeatureSpec::Ragged(r) => ragged_features(r, seed, out),
        FeatureSpec::FixedLenSequence(f) => {
            let n = dims(&f.shape) * (seed % 3) as usize;
            out.insert(f.name.clone(), values(f.dtype, n, seed));
        }
        // A kind the decoder does not know is refused when it is built.
        _ => {}
    }
}

/// A ragged value of 1–3 outer rows whose partitions agree with each
/// other and with the values.
fn ragged_features(r: &RaggedSpec, seed: u64, out: &mut BTreeMap<String, proto::Feature>) {
    let mut rows = 1 + (seed % 3) as usize;
    for p in &r.partitions {
        let Some(key) = p.key() else {
            if let Partition::UniformRowLength { length } = p {
                rows *= *length as usize;
            }
            continue;
        };
        let mut lengths: Vec<i64> = (0..rows)
            .map(|i| ((seed as usize + i) % 3) as i64)
            .collect();
        if let (Partition::ValueRowids { .. }, Some(last)) = (p, lengths.last_mut()) {
            // value_rowids cannot describe a record's trailing empty rows.
            *last = (*last).max(1);
        }
        let ends = lengths.iter().scan(0, |acc, l| {
            *acc += l;
            Some(*acc)
        });
        let vals: Vec<i64> = match p {
            Partition::RowSplits { .. } => std::iter::once(0).chain(ends).collect(),
            Partition::RowLengths { .. } => lengths.clone(),
            Partition::RowStarts { .. } => ends.zip(&lengths).map(|(e, l)| e - l).collect(),
            Partition::RowLimits { .. } => ends.collect(),
            Partition::ValueRowids { .. } => lengths
                .iter()
                .enumerate()
                .flat_map(|(i, &l)| std::iter::repeat_n(i as i64, l as usize))
                .collect(),
            Partition::UniformRowLength { .. } => unreachable!("has no key"),
        };
        out.insert(key.to_string(), int64s(vals));
        rows = lengths.iter().sum::<i64>() as usize;
    }
    out.insert(r.value_key().to_string(), values(r.dtype, rows, seed));
}

/// The feature list of a sequence feature: its key and 1–3 steps.
fn feature_list_of(s: &FeatureSpec, seed: u64) -> (String, proto::FeatureList) {
    let steps = 1 + (seed % 3) as usize;
    let (key, feature) = match s {
        FeatureSpec::FixedLenSequence(f) => {
            let item = f.shape.iter().product::<i64>().max(0) as usize;
            let feature = (0..steps)
                .map(|t| values(f.dtype, item, seed + t as u64))
                .collect();
            (f.name.clone(), feature)
        }
        FeatureSpec::Varlen(v) => {
            let feature = (0..steps)
                .map(|t| values(v.dtype, (seed as usize + t) % 3, seed + t as u64))
                .collect();
            (v.name.clone(), feature)
        }
        FeatureSpec::Ragged(r) => {
            let feature = (0..steps)
                .map(|t| values(r.dtype, (seed as usize + t) % 3, seed + t as u64))
                .collect();
            (r.value_key().to_string(), feature)
        }
        other => panic!("no feature lists for {other:?}"),
    };
    (key, proto::FeatureList { feature })
}

/// Whether a ragged tensor of a `rows`-row batch is well formed: the
/// outer splits cover the batch, and every level starts at 0, never
/// decreases and ends at the number of rows (or flat values) below it.
///
/// Only such tensors describe rows that records can hold; with
/// `validate: false` the decoder may return others (as TensorFlow does),
/// and [`grist_tfrecord::encode_batch`] must refuse them.
pub fn ragged_is_consistent(t: &RaggedTensor, rows: usize) -> bool {
    let nvals = t.flat_values.shape.first().copied().unwrap_or(0);
    t.nested_row_splits.first().map(Vec::len) == Some(rows + 1)
        && t.nested_row_splits.iter().enumerate().all(|(i, level)| {
            let next = t
                .nested_row_splits
                .get(i + 1)
                .map_or(nvals, |l| l.len().saturating_sub(1));
            level.first() == Some(&0)
                && level.windows(2).all(|w| w[0] <= w[1])
                && level.last() == Some(&(next as i64))
        })
}

/// Whether every ragged column of `batch` is well formed.
pub fn raggeds_are_consistent(batch: &Batch) -> bool {
    batch.columns().iter().all(|c| match &c.tensor {
        Tensor::Ragged(r) => ragged_is_consistent(r, batch.rows()),
        _ => true,
    })
}

/// Whether records can describe a well-formed ragged tensor of `spec` in
/// a `rows`-row batch. A `value_rowids` partition gives a record as many
/// rows as its largest row id + 1, so it cannot describe a record whose
/// last row at that level is empty; an outer partition can hand a record
/// such a row when the records disagree on where rows end (TensorFlow
/// composes partitions over the whole batch).
pub fn ragged_is_representable(t: &RaggedTensor, spec: &RaggedSpec, rows: usize) -> bool {
    let splits = &t.nested_row_splits;
    let at = |level: usize, i: usize| splits[level][i] as usize;
    for (i, p) in spec.partitions.iter().enumerate() {
        if !matches!(p, Partition::ValueRowids { .. }) || i + 1 >= splits.len() {
            continue;
        }
        for r in 0..rows {
            // The record's rows at the level partition `i` describes.
            let mut range = r..r + 1;
            for level in 0..=i {
                range = at(level, range.start)..at(level, range.end);
            }
            if let Some(last) = range.clone().last()
                && at(i + 1, last + 1) == at(i + 1, last)
            {
                return false;
            }
        }
    }
    true
}

/// Whether records can describe every (well-formed) ragged column of
/// `batch`, decoded with `spec`.
pub fn raggeds_are_representable(batch: &Batch, spec: &SpecFile) -> bool {
    spec.features.iter().chain(&spec.context_features).all(|s| {
        match (s, batch.get_in(section_of(spec), s.name())) {
            (FeatureSpec::Ragged(r), Some(Tensor::Ragged(t))) => {
                ragged_is_representable(t, r, batch.rows())
            }
            _ => true,
        }
    })
}

fn section_of(spec: &SpecFile) -> grist_tensor::Section {
    if spec.sequence {
        grist_tensor::Section::Context
    } else {
        grist_tensor::Section::Features
    }
}
