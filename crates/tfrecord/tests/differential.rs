//! Differential test: random Examples written with prost, parsed by the
//! wire-format decoder and by a plain reference (decode with prost, then
//! apply `tf.io.parse_example` semantics value by value). Both must agree
//! on every batch, and on which record and feature fails.

use std::collections::BTreeMap;
use std::sync::Arc;

use grist_tensor::json::{batch_to_json, compare_json, float_to_json};
use grist_tensor::{DType, FeatureSpec, OneOrMany, RaggedSpec, SparseSpec};
use grist_tfrecord::proto::{self, feature::Kind};
use grist_tfrecord::{Error, ExampleDecoder};
use proptest::prelude::*;
use prost::Message;
use serde_json::{Value, json};

const KEYS: [&str; 5] = ["a", "b", "c", "d", "e"];

#[derive(Clone, Debug)]
enum Spec {
    Dense {
        dtype: DType,
        len: usize,
        default: bool,
    },
    Varlen {
        dtype: DType,
    },
    Sparse {
        dtype: DType,
        size: i64,
    },
    Ragged {
        dtype: DType,
    },
    Seq {
        dtype: DType,
        item: usize,
    },
}

fn dtype() -> impl Strategy<Value = DType> {
    prop_oneof![
        Just(DType::Int64),
        Just(DType::Float32),
        Just(DType::String)
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        (dtype(), 0usize..3, any::<bool>()).prop_map(|(dtype, len, default)| Spec::Dense {
            dtype,
            len,
            default
        }),
        dtype().prop_map(|dtype| Spec::Varlen { dtype }),
        (dtype(), 1i64..6).prop_map(|(dtype, size)| Spec::Sparse { dtype, size }),
        dtype().prop_map(|dtype| Spec::Ragged { dtype }),
        (dtype(), 1usize..3).prop_map(|(dtype, item)| Spec::Seq { dtype, item }),
    ]
}

/// A feature value as written: kind (None = empty Feature) and values.
#[derive(Clone, Debug)]
enum Val {
    Empty,
    Ints(Vec<i64>),
    Floats(Vec<f32>),
    Bytes(Vec<Vec<u8>>),
}

fn val() -> impl Strategy<Value = Val> {
    prop_oneof![
        1 => Just(Val::Empty),
        4 => prop::collection::vec(-3i64..8, 0..5).prop_map(Val::Ints),
        3 => prop::collection::vec(any::<f32>(), 0..5).prop_map(Val::Floats),
        3 => prop::collection::vec(prop::collection::vec(any::<u8>(), 0..4), 0..4).prop_map(Val::Bytes),
    ]
}

type Record = BTreeMap<String, Val>;

/// A value of `dtype` with `n` entries.
fn typed(dtype: DType, n: usize) -> BoxedStrategy<Val> {
    match dtype {
        DType::Int64 => prop::collection::vec(-3i64..8, n)
            .prop_map(Val::Ints)
            .boxed(),
        DType::Float32 => prop::collection::vec(any::<f32>(), n)
            .prop_map(Val::Floats)
            .boxed(),
        _ => prop::collection::vec(prop::collection::vec(any::<u8>(), 0..4), n)
            .prop_map(Val::Bytes)
            .boxed(),
    }
}

/// The features of one record for the key `key` of spec `s`: mostly values
/// that fit the spec, sometimes anything (or nothing).
fn entries(key: &str, s: &Spec) -> BoxedStrategy<Vec<(String, Val)>> {
    let k = key.to_string();
    let ki = format!("{key}_i");
    let fitting: BoxedStrategy<Vec<(String, Val)>> = match s.clone() {
        Spec::Dense { dtype, len, .. } => typed(dtype, len.max(1))
            .prop_map(move |v| vec![(k.clone(), v)])
            .boxed(),
        Spec::Varlen { dtype } | Spec::Ragged { dtype } => (0usize..5)
            .prop_flat_map(move |n| typed(dtype, n))
            .prop_map(move |v| vec![(k.clone(), v)])
            .boxed(),
        Spec::Seq { dtype, item } => (0usize..3)
            .prop_flat_map(move |n| typed(dtype, n * item))
            .prop_map(move |v| vec![(k.clone(), v)])
            .boxed(),
        Spec::Sparse { dtype, size } => (0usize..5)
            .prop_flat_map(move |n| (typed(dtype, n), prop::collection::vec(0..size, n)))
            .prop_map(move |(v, ids)| vec![(k.clone(), v), (ki.clone(), Val::Ints(ids))])
            .boxed(),
    };
    let k = key.to_string();
    let ki = format!("{key}_i");
    prop_oneof![
        12 => fitting,
        1 => Just(vec![]),
        1 => (val(), prop::option::of(val())).prop_map(move |(v, i)| {
            let mut out = vec![(k.clone(), v)];
            out.extend(i.map(|i| (ki.clone(), i)));
            out
        }),
    ]
    .boxed()
}

fn record(specs: &[(String, Spec)]) -> BoxedStrategy<Record> {
    let parts: Vec<_> = specs.iter().map(|(k, s)| entries(k, s)).collect();
    parts
        .prop_map(|p| p.into_iter().flatten().collect::<Record>())
        .boxed()
}

fn encode(r: &Record) -> Vec<u8> {
    let feature = r
        .iter()
        .map(|(k, v)| {
            let kind = match v {
                Val::Empty => None,
                Val::Ints(x) => Some(Kind::Int64List(proto::Int64List { value: x.clone() })),
                Val::Floats(x) => Some(Kind::FloatList(proto::FloatList { value: x.clone() })),
                Val::Bytes(x) => Some(Kind::BytesList(proto::BytesList {
                    value: x.iter().map(|b| b.clone().into()).collect(),
                })),
            };
            (k.clone(), proto::Feature { kind })
        })
        .collect();
    proto::Example {
        features: Some(proto::Features { feature }),
    }
    .encode_to_vec()
}

fn feature_spec(key: &str, s: &Spec) -> FeatureSpec {
    match s {
        Spec::Dense {
            dtype,
            len,
            default,
        } => {
            let f = FeatureSpec::dense(
                key,
                *dtype,
                if *len == 0 { vec![] } else { vec![*len as i64] },
            );
            if *default {
                f.with_default(default_json(*dtype))
            } else {
                f
            }
        }
        Spec::Varlen { dtype } => FeatureSpec::varlen(key, *dtype),
        Spec::Sparse { dtype, size } => FeatureSpec::Sparse(SparseSpec {
            name: key.to_string(),
            dtype: *dtype,
            shape: None,
            index_key: Some(OneOrMany::One(format!("{key}_i"))),
            value_key: Some(key.to_string()),
            size: Some(OneOrMany::One(*size)),
            already_sorted: false,
            tf_class: None,
            atds_class: None,
        }),
        Spec::Ragged { dtype } => FeatureSpec::Ragged(RaggedSpec {
            name: key.to_string(),
            dtype: *dtype,
            value_key: None,
            partitions: vec![],
            row_splits_dtype: DType::Int64,
            validate: false,
            tf_class: None,
        }),
        Spec::Seq { dtype, item } => {
            FeatureSpec::FixedLenSequence(grist_tensor::FixedLenSequenceSpec {
                name: key.to_string(),
                dtype: *dtype,
                shape: vec![*item as i64],
                allow_missing: true,
                default: None,
                tf_class: None,
            })
        }
    }
}

fn default_json(dtype: DType) -> Value {
    match dtype {
        DType::Int64 => json!(-7),
        DType::Float32 => json!(0.5),
        _ => json!("dflt"),
    }
}

fn kind_matches(v: &Val, dtype: DType) -> bool {
    matches!(
        (v, dtype),
        (Val::Ints(_), DType::Int64)
            | (Val::Floats(_), DType::Float32)
            | (Val::Bytes(_), DType::String)
    )
}

fn json_values(v: &Val) -> Vec<Value> {
    match v {
        Val::Empty => vec![],
        Val::Ints(x) => x.iter().map(|&i| json!(i)).collect(),
        Val::Floats(x) => x.iter().map(|&f| float_to_json(f as f64)).collect(),
        Val::Bytes(x) => x
            .iter()
            .map(|b| grist_tensor::json::bytes_to_json(b))
            .collect(),
    }
}

/// The reference: values present with a kind, a type error, or absent.
fn lookup<'a>(r: &'a Record, key: &str, dtype: DType) -> Result<Option<&'a Val>, String> {
    match r.get(key) {
        None | Some(Val::Empty) => Ok(None),
        Some(v) if kind_matches(v, dtype) => Ok(Some(v)),
        Some(_) => Err(key.to_string()),
    }
}

/// One record's values for one column, and their sparse indices.
type RefRow = (Vec<Value>, Vec<Vec<i64>>);

/// Reference parse of one batch: the output JSON, or (record, feature) of
/// the first failure.
fn reference(records: &[Record], specs: &[(String, Spec)]) -> Result<Value, (usize, String)> {
    let mut cols: Vec<Vec<RefRow>> = vec![Vec::new(); specs.len()];
    for (r, rec) in records.iter().enumerate() {
        for (c, (key, s)) in specs.iter().enumerate() {
            let fail = |f: &str| (r, f.to_string());
            let row = match s {
                Spec::Dense {
                    dtype,
                    len,
                    default,
                } => {
                    let n = (*len).max(1);
                    match lookup(rec, key, *dtype).map_err(|f| fail(&f))? {
                        Some(v) => {
                            let vals = json_values(v);
                            if vals.len() != n {
                                return Err(fail(key));
                            }
                            (vals, vec![])
                        }
                        None if *default => (vec![default_json(*dtype); n], vec![]),
                        None => return Err(fail(key)),
                    }
                }
                Spec::Varlen { dtype } | Spec::Ragged { dtype } => {
                    let v = lookup(rec, key, *dtype).map_err(|f| fail(&f))?;
                    (v.map(json_values).unwrap_or_default(), vec![])
                }
                Spec::Sparse { dtype, size } => {
                    let vals = lookup(rec, key, *dtype)
                        .map_err(|f| fail(&f))?
                        .map(json_values)
                        .unwrap_or_default();
                    let ik = format!("{key}_i");
                    let ids: Vec<i64> =
                        match lookup(rec, &ik, DType::Int64).map_err(|f| fail(&f))? {
                            Some(Val::Ints(x)) => x.clone(),
                            _ => vec![],
                        };
                    if ids.len() != vals.len() || ids.iter().any(|&i| i < 0 || i >= *size) {
                        return Err(fail(key));
                    }
                    let mut pairs: Vec<(i64, Value)> = ids.into_iter().zip(vals).collect();
                    pairs.sort_by_key(|p| p.0);
                    let idx = pairs.iter().map(|p| vec![p.0]).collect();
                    (pairs.into_iter().map(|p| p.1).collect(), idx)
                }
                Spec::Seq { dtype, item } => {
                    let vals = lookup(rec, key, *dtype)
                        .map_err(|f| fail(&f))?
                        .map(json_values)
                        .unwrap_or_default();
                    if vals.len() % item != 0 {
                        return Err(fail(key));
                    }
                    (vals, vec![])
                }
            };
            cols[c].push(row);
        }
    }
    let n = records.len();
    let mut outputs = serde_json::Map::new();
    for ((key, s), rows) in specs.iter().zip(cols) {
        let dtype = match s {
            Spec::Dense { dtype, .. }
            | Spec::Varlen { dtype }
            | Spec::Sparse { dtype, .. }
            | Spec::Ragged { dtype }
            | Spec::Seq { dtype, .. } => *dtype,
        };
        let t = match s {
            Spec::Dense { len, .. } => {
                let mut shape = vec![n];
                if *len > 0 {
                    shape.push(*len);
                }
                json!({"kind": "dense", "dtype": dtype.name(), "shape": shape,
                       "values": rows.into_iter().flat_map(|r| r.0).collect::<Vec<_>>()})
            }
            Spec::Varlen { .. } | Spec::Sparse { .. } => {
                let mut indices = vec![];
                let mut values = vec![];
                let mut max = 0;
                for (b, (vals, idx)) in rows.into_iter().enumerate() {
                    max = max.max(vals.len());
                    for (j, v) in vals.into_iter().enumerate() {
                        let i = idx.get(j).map_or(j as i64, |x| x[0]);
                        indices.push(json!([b, i]));
                        values.push(v);
                    }
                }
                let width = match s {
                    Spec::Sparse { size, .. } => *size,
                    _ => max as i64,
                };
                json!({"kind": "sparse", "dtype": dtype.name(), "indices": indices, "values": values, "dense_shape": [n, width]})
            }
            Spec::Ragged { .. } => {
                let mut splits = vec![0];
                let mut flat = vec![];
                for (vals, _) in rows {
                    flat.extend(vals);
                    splits.push(flat.len());
                }
                json!({"kind": "ragged", "dtype": dtype.name(), "row_splits_dtype": "int64",
                       "nested_row_splits": [splits], "flat_values_shape": [flat.len()], "flat_values": flat})
            }
            Spec::Seq { item, .. } => {
                let steps = rows.iter().map(|r| r.0.len() / item).max().unwrap_or(0);
                let mut values = vec![];
                for (vals, _) in rows {
                    let pad = steps * item - vals.len();
                    values.extend(vals);
                    values.extend(std::iter::repeat_n(
                        match dtype {
                            DType::Int64 => json!(0),
                            DType::Float32 => json!(0.0),
                            _ => json!(""),
                        },
                        pad,
                    ));
                }
                json!({"kind": "dense", "dtype": dtype.name(), "shape": [n, steps, item], "values": values})
            }
        };
        outputs.insert(key.clone(), t);
    }
    Ok(json!({"records": n, "outputs": outputs}))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn fast_parse_equals_prost_reference(
        (specs, records) in prop::collection::vec(spec(), KEYS.len()).prop_flat_map(|specs| {
            let specs: Vec<(String, Spec)> = KEYS.iter().map(|k| k.to_string()).zip(specs).collect();
            let records = prop::collection::vec(record(&specs), 0..6);
            (Just(specs), records)
        }),
    ) {
        let feature_specs: Vec<FeatureSpec> = specs.iter().map(|(k, s)| feature_spec(k, s)).collect();
        let mut decoder = ExampleDecoder::new(&feature_specs).unwrap();
        let encoded: Vec<Vec<u8>> = records.iter().map(encode).collect();
        let file: Arc<str> = "random".into();
        let ours = decoder.decode_batch(&file, 0, encoded.iter().map(|r| &r[..]));
        match (reference(&records, &specs), ours) {
            (Ok(want), Ok(batch)) => {
                let got = batch_to_json(&batch);
                if let Err(m) = compare_json(&want, &got) {
                    panic!("{m}\nwant {want}\ngot  {got}");
                }
            }
            (Err((r, f)), Err(Error::Feature { at, .. })) => {
                prop_assert_eq!(at.record, Some(r as u64));
                prop_assert_eq!(at.feature.as_deref(), Some(f.as_str()));
            }
            (want, got) => panic!("reference {want:?}, decoder {got:?}"),
        }
    }
}
