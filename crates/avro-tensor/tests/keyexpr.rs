//! The key-expression path: each feature kind through key expressions,
//! unions and defaults, filters and `@` references, maps, plan-time and
//! per-record errors, damaged files. Files are written by apache-avro from
//! JSON records; expected tensors are written out by hand.

use std::sync::Arc;

use apache_avro::types::Value as AvroValue;
use grist_avro_tensor::{AvroDecoder, BlockReader, Error, ReaderOptions};
use grist_tensor::json::{batch_to_json, compare_json};
use grist_tensor::{FeatureProblem, FeatureSpec};
use serde_json::{Value, json};

/// A container file of `records` (JSON, resolved against `schema`).
fn file(schema: &str, records: &[Value]) -> Vec<u8> {
    let schema = apache_avro::Schema::parse_str(schema).unwrap();
    let mut w = apache_avro::Writer::new(&schema, Vec::new());
    for r in records {
        let v = AvroValue::from(r.clone()).resolve(&schema).unwrap();
        w.append(v).unwrap();
    }
    w.into_inner().unwrap()
}

fn specs(json: Value) -> Vec<FeatureSpec> {
    serde_json::from_value(json).unwrap()
}

/// Every record of `bytes` decoded in one batch, as JSON.
fn decode(bytes: &[u8], specs: &[FeatureSpec]) -> Result<Value, Error> {
    let mut reader = BlockReader::new(bytes, "t.avro", ReaderOptions::default())?;
    let mut decoder = AvroDecoder::new(specs)?;
    let file: Arc<str> = reader.name().clone();
    decoder.add_schema(file.clone(), &reader.header().schema_json)?;
    let mut out = decoder.new_batch(8);
    while let Some(b) = reader.next_block()? {
        let n = b.record_count as usize;
        decoder.decode_block(&file, b.index, b.first_record, &b.data, n, 0..n, &mut out)?;
    }
    let batch = decoder.finish(&mut out)?;
    Ok(batch_to_json(&batch))
}

fn check(got: &Value, want: Value) {
    if let Err(m) = compare_json(&want, got) {
        panic!("{m}\nexpected {want}\nactual   {got}");
    }
}

const PERSON: &str = r#"{"type": "record", "name": "Person", "namespace": "ex", "fields": [
    {"name": "name", "type": {"type": "record", "name": "Name", "fields": [
        {"name": "first", "type": "string"}, {"name": "last", "type": "string"}]}},
    {"name": "age", "type": "int"},
    {"name": "height", "type": ["null", "float"]},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "friends", "type": {"type": "array", "items": {"type": "record", "name": "Friend",
        "fields": [{"name": "name", "type": "Name"}, {"name": "gender", "type": "string"},
                   {"name": "x", "type": "long"}]}}},
    {"name": "cars", "type": {"type": "map", "values": {"type": "record", "name": "Car",
        "fields": [{"name": "color", "type": "string"}, {"name": "year", "type": "int"}]}}},
    {"name": "m", "type": {"type": "array", "items": {"type": "array", "items": "int"}}},
    {"name": "sp", "type": {"type": "array", "items": {"type": "record", "name": "E",
        "fields": [{"name": "idx", "type": "long"}, {"name": "val", "type": "float"}]}}},
    {"name": "best", "type": "string"},
    {"name": "pet", "type": ["null", {"type": "record", "name": "Pet", "fields": [
        {"name": "kind", "type": "string"}]}, {"type": "record", "name": "Rock", "fields": [
        {"name": "weight", "type": "double"}]}]}
]}"#;

fn people() -> Vec<u8> {
    file(
        PERSON,
        &[
            json!({"name": {"first": "Ann", "last": "A"}, "age": 30, "height": 1.5,
                   "color": "GREEN",
                   "friends": [{"name": {"first": "Bo", "last": "B"}, "gender": "m", "x": 1},
                               {"name": {"first": "Cy", "last": "C"}, "gender": "f", "x": 2},
                               {"name": {"first": "Di", "last": "D"}, "gender": "m", "x": 3}],
                   "cars": {"nick": {"color": "red", "year": 1990}},
                   "m": [[1, 2], [3]], "sp": [{"idx": 4, "val": 0.5}, {"idx": 1, "val": 1.5}],
                   "best": "Cy", "pet": {"kind": "cat"}}),
            json!({"name": {"first": "Bo", "last": "B"}, "age": 40, "height": null,
                   "color": "RED", "friends": [],
                   "cars": {"nick": {"color": "blue", "year": 2000},
                            "bob": {"color": "black", "year": 2001}},
                   "m": [], "sp": [], "best": "Ann", "pet": null}),
            json!({"name": {"first": "Cy", "last": "C"}, "age": 50, "height": 2.0,
                   "color": "GREEN",
                   "friends": [{"name": {"first": "Ann", "last": "A"}, "gender": "f", "x": 7}],
                   "cars": {"nick": {"color": "green", "year": 1995}},
                   "m": [[4], [], [5, 6, 7]], "sp": [{"idx": 0, "val": 2.5}],
                   "best": "Ann", "pet": {"weight": 3.0}}),
        ],
    )
}

#[test]
fn dense_scalars_through_records_arrays_maps_unions_and_enums() {
    let got = decode(
        &people(),
        &specs(json!([
            {"name": "name.first", "kind": "dense", "dtype": "string", "shape": []},
            {"name": "friends[*].name.first", "kind": "dense", "dtype": "string",
             "shape": [2], "default": "?"},
            {"name": "cars['nick'].year", "kind": "dense", "dtype": "int32", "shape": []},
            {"name": "height", "kind": "dense", "dtype": "float32", "shape": [],
             "default": -1.0},
            {"name": "color", "kind": "dense", "dtype": "string", "shape": []},
            {"name": "pet.kind", "kind": "dense", "dtype": "string", "shape": [],
             "default": "none"},
            {"name": "pet.Rock.weight", "kind": "dense", "dtype": "float64", "shape": [],
             "default": 0.0},
            {"name": "pet.ex.Rock.weight", "kind": "dense", "dtype": "float64", "shape": [],
             "default": 0.0}
        ])),
    );
    // friends[*] has 3 values in record 0: more than [2] holds.
    let Err(Error::Feature { at, problem }) = got else {
        panic!("{got:?}")
    };
    assert_eq!(at.feature.as_deref(), Some("friends[*].name.first"));
    assert_eq!(at.record, Some(0));
    assert!(
        matches!(problem, FeatureProblem::WrongCount { .. }),
        "{problem}"
    );

    let got = decode(
        &people(),
        &specs(json!([
            {"name": "name.first", "kind": "dense", "dtype": "string", "shape": []},
            {"name": "friends[*].name.first", "kind": "dense", "dtype": "string",
             "shape": [3], "default": "?"},
            {"name": "cars['nick'].year", "kind": "dense", "dtype": "int32", "shape": []},
            {"name": "height", "kind": "dense", "dtype": "float32", "shape": [],
             "default": -1.0},
            {"name": "color", "kind": "dense", "dtype": "string", "shape": []},
            {"name": "pet.kind", "kind": "dense", "dtype": "string", "shape": [],
             "default": "none"},
            {"name": "pet.Rock.weight", "kind": "dense", "dtype": "float64", "shape": [],
             "default": 0.0}
        ])),
    )
    .unwrap();
    check(
        &got,
        json!({"records": 3, "outputs": {
            "name.first": {"kind": "dense", "dtype": "string", "shape": [3],
                           "values": ["Ann", "Bo", "Cy"]},
            "friends[*].name.first": {"kind": "dense", "dtype": "string", "shape": [3, 3],
                "values": ["Bo", "Cy", "Di", "?", "?", "?", "Ann", "?", "?"]},
            "cars['nick'].year": {"kind": "dense", "dtype": "int32", "shape": [3],
                                  "values": [1990, 2000, 1995]},
            "height": {"kind": "dense", "dtype": "float32", "shape": [3],
                       "values": [1.5, -1.0, 2.0]},
            "color": {"kind": "dense", "dtype": "string", "shape": [3],
                      "values": ["GREEN", "RED", "GREEN"]},
            "pet.kind": {"kind": "dense", "dtype": "string", "shape": [3],
                         "values": ["cat", "none", "none"]},
            "pet.Rock.weight": {"kind": "dense", "dtype": "float64", "shape": [3],
                                "values": [0.0, 0.0, 3.0]}
        }}),
    );
}

#[test]
fn varlen_padded_sequence_and_ragged_from_nested_arrays() {
    let got = decode(
        &people(),
        &specs(json!([
            {"name": "m[*][*]", "kind": "varlen", "dtype": "int32", "rank": 2},
            {"name": "m", "kind": "varlen", "dtype": "int32", "rank": 2},
            {"name": "friends[*].x", "kind": "dense", "dtype": "int64", "shape": [-1],
             "default": -1},
            {"name": "sp[*].val", "kind": "fixed_len_sequence", "dtype": "float32",
             "shape": [], "allow_missing": true},
            {"name": "rg", "value_key": "m[*][*]", "kind": "ragged", "dtype": "int32"}
        ])),
    )
    .unwrap();
    check(
        &got,
        json!({"records": 3, "outputs": {
            "m[*][*]": {"kind": "sparse", "dtype": "int32",
                "indices": [[0, 0, 0], [0, 0, 1], [0, 1, 0], [2, 0, 0], [2, 2, 0], [2, 2, 1],
                            [2, 2, 2]],
                "values": [1, 2, 3, 4, 5, 6, 7], "dense_shape": [3, 3, 3]},
            "m": {"kind": "sparse", "dtype": "int32",
                "indices": [[0, 0, 0], [0, 0, 1], [0, 1, 0], [2, 0, 0], [2, 2, 0], [2, 2, 1],
                            [2, 2, 2]],
                "values": [1, 2, 3, 4, 5, 6, 7], "dense_shape": [3, 3, 3]},
            "friends[*].x": {"kind": "dense", "dtype": "int64", "shape": [3, 3],
                             "values": [1, 2, 3, -1, -1, -1, 7, -1, -1]},
            "sp[*].val": {"kind": "dense", "dtype": "float32", "shape": [3, 2],
                          "values": [0.5, 1.5, 0.0, 0.0, 2.5, 0.0]},
            "rg": {"kind": "ragged", "dtype": "int32", "row_splits_dtype": "int32",
                   "nested_row_splits": [[0, 2, 2, 5], [0, 2, 3, 4, 4, 7]],
                   "flat_values_shape": [7], "flat_values": [1, 2, 3, 4, 5, 6, 7]}
        }}),
    );
}

#[test]
fn sparse_features_zip_index_and_value_keys_sorted_by_index() {
    let got = decode(
        &people(),
        &specs(json!([
            {"name": "sp", "kind": "sparse", "dtype": "float32", "index_key": "idx",
             "value_key": "val", "size": 5}
        ])),
    )
    .unwrap();
    check(
        &got,
        json!({"records": 3, "outputs": {
            "sp": {"kind": "sparse", "dtype": "float32",
                   "indices": [[0, 1], [0, 4], [2, 0]], "values": [1.5, 0.5, 2.5],
                   "dense_shape": [3, 5]}
        }}),
    );
    // An index past `size` names the record and the feature.
    let err = decode(
        &people(),
        &specs(json!([
            {"name": "sp", "kind": "sparse", "dtype": "float32", "index_key": "idx",
             "value_key": "val", "size": 4}
        ])),
    )
    .unwrap_err();
    let Error::Feature { at, problem } = &err else {
        panic!("{err}")
    };
    assert_eq!((at.record, at.feature.as_deref()), (Some(0), Some("sp")));
    assert!(matches!(
        problem,
        FeatureProblem::IndexOutOfRange { index: 4, .. }
    ));
}

#[test]
fn filters_compare_with_literals_paths_and_root_references() {
    let got = decode(
        &people(),
        &specs(json!([
            {"name": "friends[gender='m'].x", "kind": "varlen", "dtype": "int64"},
            {"name": "friends[name.first=@best].x", "kind": "varlen", "dtype": "int64"},
            {"name": "friends[x=2].name.first", "kind": "varlen", "dtype": "string"},
            {"name": "friends[gender=name.last].x", "kind": "varlen", "dtype": "int64"}
        ])),
    )
    .unwrap();
    check(
        &got,
        json!({"records": 3, "outputs": {
            "friends[gender='m'].x": {"kind": "sparse", "dtype": "int64",
                "indices": [[0, 0], [0, 1]], "values": [1, 3], "dense_shape": [3, 2]},
            "friends[name.first=@best].x": {"kind": "sparse", "dtype": "int64",
                "indices": [[0, 0], [2, 0]], "values": [2, 7], "dense_shape": [3, 1]},
            "friends[x=2].name.first": {"kind": "sparse", "dtype": "string",
                "indices": [[0, 0]], "values": ["Cy"], "dense_shape": [3, 1]},
            "friends[gender=name.last].x": {"kind": "sparse", "dtype": "int64",
                "indices": [], "values": [], "dense_shape": [3, 0]}
        }}),
    );
}

#[test]
fn missing_map_keys_indices_and_nulls_fail_naming_record_and_feature() {
    let cases = [
        (
            json!({"name": "cars['bob'].color", "kind": "dense", "dtype": "string",
                   "shape": [], "default": "none"}),
            0,
        ),
        (
            json!({"name": "friends[1].x", "kind": "dense", "dtype": "int64", "shape": []}),
            1,
        ),
        (
            json!({"name": "height", "kind": "dense", "dtype": "float32", "shape": [],
                   "tf_class": "tf.io.FixedLenFeature"}),
            1,
        ),
        (
            json!({"name": "pet.kind", "kind": "dense", "dtype": "string", "shape": []}),
            1,
        ),
    ];
    for (spec, record) in cases {
        let name = spec["name"].as_str().unwrap().to_string();
        let err = decode(&people(), &specs(json!([spec]))).unwrap_err();
        let Error::Feature { at, problem } = &err else {
            panic!("{name}: {err}")
        };
        assert_eq!(at.feature.as_deref(), Some(name.as_str()), "{err}");
        assert_eq!(at.record, Some(record), "{name}: {err}");
        assert_eq!(at.block, Some(0), "{name}: {err}");
        let text = err.to_string();
        assert!(text.contains("t.avro") && text.contains(&name), "{text}");
        if name == "height" || name == "pet.kind" {
            assert!(
                matches!(problem, FeatureProblem::NullWithoutDefault),
                "{name}: {problem}"
            );
        }
    }
}

#[test]
fn plan_errors_name_the_file_and_the_feature() {
    for (spec, want) in [
        (
            json!({"name": "age", "kind": "dense", "dtype": "int64", "shape": [],
                   "tf_class": "tf.io.FixedLenFeature"}),
            "cannot be read as int64",
        ),
        (
            json!({"name": "name.middle", "kind": "dense", "dtype": "string", "shape": []}),
            "no field \"middle\"",
        ),
        (
            json!({"name": "cars[0].year", "kind": "dense", "dtype": "int32", "shape": []}),
            "map",
        ),
        (
            json!({"name": "m[*][*]", "kind": "varlen", "dtype": "int32", "rank": 1}),
            "rank 1",
        ),
        (
            json!({"name": "friends[nope='x'].x", "kind": "varlen", "dtype": "int64"}),
            "nope",
        ),
        (
            json!({"name": "name", "kind": "dense", "dtype": "string", "shape": [],
                   "tf_class": "tf.io.FixedLenFeature"}),
            "record",
        ),
    ] {
        let name = spec["name"].as_str().unwrap().to_string();
        let err = decode(&people(), &specs(json!([spec]))).unwrap_err();
        let Error::Schema {
            file,
            feature,
            reason,
        } = &err
        else {
            panic!("{name}: {err}")
        };
        assert_eq!((&**file, feature.as_str()), ("t.avro", name.as_str()));
        assert!(reason.contains(want), "{name}: {reason}");
    }
    // A padded item the spec alone makes huge is refused up front.
    for spec in [
        json!({"name": "m[*][*]", "kind": "dense", "dtype": "int32", "shape": [-1, 1_i64 << 40]}),
        json!({"name": "m[*][*]", "kind": "fixed_len_sequence", "dtype": "int32",
               "shape": [1_i64 << 40], "default": 0}),
    ] {
        let err = AvroDecoder::new(&specs(json!([spec]))).unwrap_err();
        assert!(
            matches!(err, Error::Spec(_)) && err.to_string().contains("m[*][*]"),
            "{err}"
        );
    }
    // Bad syntax is refused before any file, naming the feature.
    for name in ["a[", "a..b", "cars['x"] {
        let err = AvroDecoder::new(&specs(json!([
            {"name": name, "kind": "dense", "dtype": "int32", "shape": []}
        ])))
        .unwrap_err();
        assert!(matches!(err, Error::Spec(_)), "{err}");
        assert!(err.to_string().contains(name), "{err}");
    }
}

/// Plain top-level names keep the ATDS plan (which reads an Avro int as
/// int64 by promotion); the same field named as TensorFlow's class, or
/// beside a key expression, takes the general plan, which does not.
#[test]
fn plain_specs_keep_the_atds_plan() {
    let plain = specs(json!([{"name": "age", "kind": "dense", "dtype": "int64", "shape": []}]));
    let got = decode(&people(), &plain).unwrap();
    check(
        &got,
        json!({"records": 3, "outputs": {
            "age": {"kind": "dense", "dtype": "int64", "shape": [3], "values": [30, 40, 50]}
        }}),
    );
    let mixed = specs(json!([
        {"name": "age", "kind": "dense", "dtype": "int64", "shape": []},
        {"name": "name.first", "kind": "dense", "dtype": "string", "shape": []}
    ]));
    assert!(matches!(
        decode(&people(), &mixed),
        Err(Error::Schema { feature, .. }) if feature == "age"
    ));
}

/// Every prefix of a file, and every byte flipped, through the general
/// path: errors, never a panic; a datum error names block and record.
#[test]
fn damaged_files_fail_cleanly() {
    let bytes = people();
    let all = specs(json!([
        {"name": "name.first", "kind": "dense", "dtype": "string", "shape": []},
        {"name": "friends[gender='m'].name.first", "kind": "varlen", "dtype": "string"},
        {"name": "friends[name.first=@best].x", "kind": "varlen", "dtype": "int64"},
        {"name": "cars['nick'].color", "kind": "dense", "dtype": "string", "shape": []},
        {"name": "m[*][*]", "kind": "varlen", "dtype": "int32", "rank": 2},
        {"name": "rg", "value_key": "m[*][*]", "kind": "ragged", "dtype": "int32"},
        {"name": "sp", "kind": "sparse", "dtype": "float32", "index_key": "idx",
         "value_key": "val", "size": 8},
        {"name": "pet.Rock.weight", "kind": "dense", "dtype": "float64", "shape": [],
         "default": 0.0}
    ]));
    decode(&bytes, &all).unwrap();
    for n in 0..bytes.len() {
        let _ = decode(&bytes[..n], &all);
    }
    let sync = BlockReader::new(&bytes[..], "t.avro", ReaderOptions::default())
        .unwrap()
        .header()
        .sync;
    let header = bytes.windows(16).position(|w| w == sync).unwrap() + 16;
    let mut datum_errors = 0;
    for i in header..bytes.len() - 16 {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= flip;
            if let Err(e @ Error::Datum { .. }) = decode(&b, &all) {
                let at = e.location().unwrap();
                assert_eq!(at.block, Some(0), "{e}");
                datum_errors += 1;
            }
        }
    }
    assert!(datum_errors > 0);
}

/// An ATDS sparse record beside a key expression goes through the general
/// plan with ATDS's meaning: `indices0..` and `values` arrays, entries in
/// stored order.
#[test]
fn atds_sparse_records_read_the_same_on_the_general_plan() {
    let schema = r#"{"type": "record", "name": "R", "fields": [
        {"name": "meta", "type": {"type": "record", "name": "M", "fields": [
            {"name": "id", "type": "long"}]}},
        {"name": "sp", "type": {"type": "record", "name": "S", "fields": [
            {"name": "indices0", "type": {"type": "array", "items": "long"}},
            {"name": "values", "type": {"type": "array", "items": "float"}}]}}]}"#;
    let bytes = file(
        schema,
        &[
            json!({"meta": {"id": 1}, "sp": {"indices0": [3, 1], "values": [0.5, 1.5]}}),
            json!({"meta": {"id": 2}, "sp": {"indices0": [], "values": []}}),
        ],
    );
    let sp = json!({"name": "sp", "kind": "sparse", "dtype": "float32", "shape": [4]});
    let want = json!({"kind": "sparse", "dtype": "float32", "indices": [[0, 3], [0, 1]],
                      "values": [0.5, 1.5], "dense_shape": [2, 4]});
    let atds = decode(&bytes, &specs(json!([sp]))).unwrap();
    check(&atds["outputs"]["sp"], want.clone());
    let general = decode(
        &bytes,
        &specs(json!([sp, {"name": "meta.id", "kind": "dense", "dtype": "int64", "shape": []}])),
    )
    .unwrap();
    check(&general["outputs"]["sp"], want);
    check(
        &general["outputs"]["meta.id"],
        json!({"kind": "dense", "dtype": "int64", "shape": [2], "values": [1, 2]}),
    );
}

/// `[*]` on a map takes every value (in stored order); a sequence without
/// `allow_missing` fails on a null on its path, with it the row is empty.
#[test]
fn map_values_and_sequences_cut_by_nulls() {
    let got = decode(
        &people(),
        &specs(json!([
            {"name": "cars[*].year", "kind": "varlen", "dtype": "int32"},
            {"name": "pet.kind", "kind": "fixed_len_sequence", "dtype": "string",
             "shape": [], "allow_missing": true, "default": "-"}
        ])),
    )
    .unwrap();
    let years = &got["outputs"]["cars[*].year"];
    assert_eq!(years["indices"], json!([[0, 0], [1, 0], [1, 1], [2, 0]]));
    let mut second: Vec<i64> = years["values"].as_array().unwrap()[1..3]
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    second.sort_unstable();
    assert_eq!(second, [2000, 2001]);
    check(
        &got["outputs"]["pet.kind"],
        json!({"kind": "dense", "dtype": "string", "shape": [3, 1],
               "values": ["cat", "-", "-"]}),
    );
    let err = decode(
        &people(),
        &specs(json!([
            {"name": "pet.kind", "kind": "fixed_len_sequence", "dtype": "string",
             "shape": [], "allow_missing": false}
        ])),
    )
    .unwrap_err();
    let Error::Feature { at, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(
        (at.record, at.feature.as_deref()),
        (Some(1), Some("pet.kind"))
    );
}

/// Every prefix of the corpus's key-expression files through each of
/// their parses: blocks that end inside the prefix decode (or fail as the
/// whole file does), nothing panics, errors carry a location.
#[test]
fn every_prefix_of_the_generic_corpus_files() {
    let mut checked = 0;
    for case in grist_testkit::corpus::cases("avro") {
        if !case.name.starts_with("avro_generic_") {
            continue;
        }
        let bytes = std::fs::read(&case.files[0]).unwrap();
        for parse in case.parses() {
            let Ok(spec) = grist_tensor::SpecFile::from_value(parse) else {
                continue;
            };
            for n in 0..=bytes.len() {
                match decode(&bytes[..n], &spec.features) {
                    Ok(_) => {}
                    Err(Error::Schema { .. } | Error::Spec(_)) => {}
                    Err(e) => {
                        if let Some(at) = e.location() {
                            assert_eq!(&*at.file, "t.avro", "{e}");
                        }
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}

/// `[*]` and `[i]` on one array read each element once, by one program
/// built from both: together the features give what each gives alone,
/// and an index past the end fails the same way.
#[test]
fn stars_and_indices_on_one_array_read_as_each_alone() {
    const ARR: &str = r#"{"type": "record", "name": "R", "fields": [
        {"name": "a", "type": {"type": "array", "items": {"type": "record", "name": "E",
            "fields": [{"name": "x", "type": "long"}, {"name": "s", "type": "string"},
                       {"name": "v", "type": {"type": "array", "items": "int"}}]}}}]}"#;
    let e = |x: i64, s: &str, v: &[i32]| json!({"x": x, "s": s, "v": v});
    let good = file(
        ARR,
        &[
            json!({"a": [e(1, "p", &[1, 2]), e(2, "q", &[]), e(3, "r", &[3])]}),
            json!({"a": [e(4, "s", &[4]), e(5, "t", &[5, 6, 7])]}),
            json!({"a": [e(6, "u", &[]), e(7, "v", &[8]), e(8, "w", &[9]), e(9, "x", &[])]}),
        ],
    );
    let all = specs(json!([
        {"name": "a[*].x", "kind": "varlen", "dtype": "int64"},
        {"name": "a[0].s", "kind": "dense", "dtype": "string", "shape": []},
        {"name": "a[*].v[*]", "kind": "varlen", "dtype": "int32"},
        {"name": "a[1].x", "kind": "dense", "dtype": "int64", "shape": []},
        {"name": "a[1].v[*]", "kind": "varlen", "dtype": "int32"},
        {"name": "a[*].s", "kind": "varlen", "dtype": "string"}
    ]));
    let together = decode(&good, &all).unwrap();
    for s in &all {
        let alone = decode(&good, std::slice::from_ref(s)).unwrap();
        check(
            &together["features"][s.name()],
            alone["features"][s.name()].clone(),
        );
    }
    // One element: a[1] is past the end.
    let short = file(ARR, &[json!({"a": [e(1, "p", &[1])]})]);
    let together = decode(&short, &all).unwrap_err().to_string();
    let alone = decode(&short, &all[3..4]).unwrap_err().to_string();
    assert_eq!(together, alone);
}
