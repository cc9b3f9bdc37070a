//! Spec inference from writer schemas: the ATDS corpus cases read with
//! the inferred spec give tensorflow-io's values; prod19 written by the
//! crate's writer; nullable fields, fields the ATDS layout cannot read,
//! files without records, schemas that are no record.

use std::path::{Path, PathBuf};

use apache_avro::types::Value as Apache;
use grist_avro_tensor::schema_for_specs;
use grist_avro_tensor::{AvroDecoder, AvroFormat, ContainerWriter, WriterOptions, encode_batch};
use grist_tensor::json::compare_json;
use grist_tensor::synth::{PROD19_SPARSE_SIZE, prod19_native, prod19_native_specs};
use grist_tensor::{
    DType, FeatureSpec, Format, InferOptions, Inferred, Input, SparseSpec, SpecFile,
};
use grist_testkit::{corpus, temp_dir};
use serde_json::{Value, json};

use crate::decode::{decode_all, read_blocks};

fn infer(paths: &[PathBuf], options: &InferOptions) -> Result<Inferred, grist_tensor::BoxError> {
    let inputs: Vec<Input> = paths.iter().map(Input::local).collect();
    AvroFormat.infer_spec(&inputs, options)
}

/// `paths` decoded with `spec` in batches of `batch`, as manifest JSON.
fn decode(paths: &[PathBuf], spec: &SpecFile, batch: usize) -> Vec<Value> {
    let (schemas, blocks, error) = read_blocks(paths);
    assert!(error.is_none(), "{error:?}");
    let mut decoder = AvroDecoder::new(&spec.features).unwrap();
    for (file, schema) in &schemas {
        decoder.add_schema(file.clone(), schema).unwrap();
    }
    let (batches, error) = decode_all(&mut decoder, &blocks, batch, false, false);
    assert!(error.is_none(), "the inferred spec fails: {error:?}");
    batches
}

/// The ATDS cases (all but the generic key-expression ones): the inferred
/// spec decodes every record; a feature whose spec agrees is tensorflow-io's
/// tensor; a sparse or varlen one whose shape differs has its indices and
/// values; a dense array the schema calls varlen has its values.
#[test]
fn atds_cases_read_with_the_inferred_spec_give_tensorflow_io_values() {
    let (mut cases, mut whole, mut partial) = (0, 0, 0);
    for case in corpus::cases("avro") {
        let atds: Vec<&Value> = case
            .parses()
            .iter()
            .filter(|p| {
                p["api"].as_str().is_some_and(|a| a.contains("ATDS")) && p["outcome"] == "ok"
            })
            .collect();
        if !case.is_ok() || atds.is_empty() {
            continue;
        }
        let inferred = infer(&case.files, &InferOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(
            inferred.skipped().next().is_none(),
            "{}: {:?}",
            case.name,
            inferred.notes
        );
        let record_count = case.avro()["record_count"].as_u64().unwrap();
        for parse in atds {
            let own = SpecFile::from_value(parse).unwrap();
            let batch = own.batch_size.unwrap();
            let got = decode(&case.files, &inferred.spec, batch);
            let want = parse["batches"].as_array().unwrap();
            assert_eq!(got.len(), want.len(), "{}", case.name);
            let json = |s: &[FeatureSpec]| serde_json::to_value(s).unwrap();
            let agree =
                corpus::agreeing_features(&json(&own.features), &json(&inferred.spec.features));
            for spec in &own.features {
                let name = spec.name();
                let theirs = inferred.spec.features.iter().find(|s| s.name() == name);
                let theirs = theirs.unwrap_or_else(|| panic!("{}: no {name}", case.name));
                assert_eq!(theirs.dtype(), spec.dtype(), "{}/{name}", case.name);
                for (b, (w, g)) in want.iter().zip(&got).enumerate() {
                    let (w, g) = (&w["outputs"][name], &g["outputs"][name]);
                    let at = format!("{} {name} batch {b}", case.name);
                    if agree.iter().any(|a| a == name) {
                        compare_json(w, g).unwrap_or_else(|m| panic!("{at}: {m}"));
                        continue;
                    }
                    match (spec.kind(), theirs.kind()) {
                        ("sparse", "sparse") | ("varlen", "varlen") => {
                            for key in ["indices", "values"] {
                                compare_json(&w[key], &g[key])
                                    .unwrap_or_else(|m| panic!("{at}: {m}"));
                            }
                            // The sampled shape is within the true one.
                            let (ws, gs) = (
                                w["dense_shape"].as_array().unwrap(),
                                g["dense_shape"].as_array().unwrap(),
                            );
                            assert!(
                                ws.iter().zip(gs).all(|(a, b)| b.as_i64() <= a.as_i64()),
                                "{at}: {ws:?} {gs:?}"
                            );
                        }
                        ("dense", "varlen") => {
                            compare_json(&w["values"], &g["values"])
                                .unwrap_or_else(|m| panic!("{at}: {m}"));
                            assert_eq!(
                                w["shape"].as_array().unwrap().len(),
                                g["dense_shape"].as_array().unwrap().len(),
                                "{at}"
                            );
                        }
                        kinds => panic!("{at}: kinds {kinds:?}"),
                    }
                    partial += 1;
                }
                whole += agree.iter().any(|a| a == name) as usize;
            }
        }
        // Sparse shapes come from every record (there are fewer than the sample).
        assert!(
            inferred.records == 0 || inferred.records == record_count,
            "{}",
            case.name
        );
        cases += 1;
    }
    assert!(
        cases >= 8 && whole >= 15 && partial >= 30,
        "{cases} cases, {whole} whole, {partial} partial"
    );
}

/// prod19 with its own Avro types, written by the crate's writer: the
/// scalars come back as dense features of their dtype, the arrays as
/// varlen, the sparse records as sparse within the true shape; every value
/// is the one written.
#[test]
fn prod19_written_by_the_writer() {
    let dir = temp_dir();
    let path = dir.path().join("prod19.avro");
    let specs = prod19_native_specs();
    let batch = prod19_native(150, 5);
    let schema = schema_for_specs(&specs, "prod19").unwrap();
    let mut w = ContainerWriter::create(&path, &schema, WriterOptions::default()).unwrap();
    for datum in encode_batch(
        &batch,
        &SpecFile {
            features: specs.clone(),
            ..SpecFile::default()
        },
    )
    .unwrap()
    {
        w.append_datum(&datum).unwrap();
    }
    w.finish().unwrap();
    let inferred = infer(std::slice::from_ref(&path), &InferOptions::default()).unwrap();
    assert_eq!(inferred.records, 150);
    let got = &inferred.spec.features;
    assert_eq!(got.len(), specs.len());
    for (want, got) in specs.iter().zip(got) {
        assert_eq!((want.name(), want.dtype()), (got.name(), got.dtype()));
        match (want, got) {
            (FeatureSpec::Dense(d), _) if d.shape.is_empty() => assert_eq!(want, got),
            (FeatureSpec::Dense(_), FeatureSpec::Varlen(v)) => {
                assert_eq!(v.shape, Some(vec![-1]))
            }
            (FeatureSpec::Sparse(_), FeatureSpec::Sparse(s)) => {
                let shape = s.shape.as_ref().unwrap();
                assert!(shape.len() == 1 && shape[0] <= PROD19_SPARSE_SIZE && shape[0] > 40_000);
            }
            other => panic!("{other:?}"),
        }
    }
    // Notes say where the sparse shapes come from; nothing is left out.
    assert_eq!(inferred.notes.len(), 5);
    assert!(inferred.skipped().next().is_none());
    let decoded = decode(&[path], &inferred.spec, 150);
    let written = grist_tensor::json::batch_to_json(&batch);
    for spec in &specs {
        let (w, g) = (
            &written["outputs"][spec.name()],
            &decoded[0]["outputs"][spec.name()],
        );
        compare_json(&w["values"], &g["values"]).unwrap_or_else(|m| panic!("{}: {m}", spec.name()));
        if spec.kind() == "sparse" {
            compare_json(&w["indices"], &g["indices"]).unwrap();
        }
    }
}

fn write_apache(path: &Path, schema: &str, rows: Vec<Apache>) {
    let schema = apache_avro::Schema::parse_str(schema).unwrap();
    let mut w = apache_avro::Writer::new(&schema, Vec::new());
    for r in rows {
        w.append(r).unwrap();
    }
    std::fs::write(path, w.into_inner().unwrap()).unwrap();
}

const MIXED: &str = r#"{"type": "record", "name": "R", "fields": [
  {"name": "id", "type": "long"},
  {"name": "score", "type": ["null", "double"]},
  {"name": "tags", "type": ["null", {"type": "array", "items": "string"}]},
  {"name": "grid", "type": {"type": "array", "items": {"type": "array", "items": "int"}}},
  {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
  {"name": "digest", "type": {"type": "fixed", "name": "D", "size": 2}},
  {"name": "flag", "type": "boolean"},
  {"name": "attrs", "type": {"type": "map", "values": "long"}},
  {"name": "either", "type": ["int", "string"]},
  {"name": "points", "type": {"type": "array", "items": {"type": "record", "name": "P", "fields": [{"name": "x", "type": "float"}]}}},
  {"name": "sp", "type": {"type": "record", "name": "S", "fields": [
    {"name": "indices0", "type": {"type": "array", "items": "long"}},
    {"name": "values", "type": {"type": "array", "items": "float"}}]}}
]}"#;

fn mixed_row(i: i64, null: bool) -> Apache {
    Apache::Record(vec![
        ("id".into(), Apache::Long(i)),
        (
            "score".into(),
            if null {
                Apache::Union(0, Box::new(Apache::Null))
            } else {
                Apache::Union(1, Box::new(Apache::Double(0.5)))
            },
        ),
        (
            "tags".into(),
            Apache::Union(
                1,
                Box::new(Apache::Array(vec![Apache::String("t".into()); i as usize])),
            ),
        ),
        (
            "grid".into(),
            Apache::Array(vec![Apache::Array(vec![Apache::Int(1), Apache::Int(2)])]),
        ),
        ("kind".into(), Apache::Enum(1, "B".into())),
        ("digest".into(), Apache::Fixed(2, vec![0xff, 0])),
        ("flag".into(), Apache::Boolean(i % 2 == 0)),
        ("attrs".into(), Apache::Map(Default::default())),
        ("either".into(), Apache::Union(0, Box::new(Apache::Int(3)))),
        ("points".into(), Apache::Array(vec![])),
        (
            "sp".into(),
            Apache::Record(vec![
                ("indices0".into(), Apache::Array(vec![Apache::Long(3 * i)])),
                ("values".into(), Apache::Array(vec![Apache::Float(1.0)])),
            ]),
        ),
    ])
}

/// Every primitive and its dtype; nullable fields (a dense one with a
/// default of zero); arrays of records as key expressions (`points[*].x`);
/// maps and other unions left out with notes naming them; the sparse
/// shape from the sample.
#[test]
fn schema_fields_map_to_atds_specs() {
    let dir = temp_dir();
    let path = dir.path().join("mixed.avro");
    write_apache(&path, MIXED, (0..4).map(|i| mixed_row(i, i == 2)).collect());
    let inferred = infer(std::slice::from_ref(&path), &InferOptions::default()).unwrap();
    let specs = &inferred.spec.features;
    let names: Vec<(&str, &str, DType)> = specs
        .iter()
        .map(|s| (s.name(), s.kind(), s.dtype()))
        .collect();
    assert_eq!(
        names,
        [
            ("id", "dense", DType::Int64),
            ("score", "dense", DType::Float64),
            ("tags", "varlen", DType::String),
            ("grid", "varlen", DType::Int32),
            ("kind", "dense", DType::String),
            ("digest", "dense", DType::String),
            ("flag", "dense", DType::Bool),
            ("points[*].x", "varlen", DType::Float32),
            ("sp", "sparse", DType::Float32),
        ]
    );
    assert_eq!(
        specs[1],
        FeatureSpec::dense("score", DType::Float64, []).with_default(json!(0.0))
    );
    match &specs[3] {
        FeatureSpec::Varlen(v) => assert_eq!(v.shape, Some(vec![-1, -1])),
        other => panic!("{other:?}"),
    }
    match &specs[8] {
        FeatureSpec::Sparse(SparseSpec { shape, .. }) => assert_eq!(shape, &Some(vec![10])),
        other => panic!("{other:?}"),
    }
    let skipped: Vec<&str> = inferred.skipped().map(|n| n.feature.as_str()).collect();
    assert_eq!(skipped, ["attrs", "either"]);
    assert!(
        inferred
            .notes
            .iter()
            .any(|n| n.feature == "score" && !n.skipped)
    );
    // The spec reads every record: the null score reads as 0.
    let got = decode(std::slice::from_ref(&path), &inferred.spec, 4);
    assert_eq!(
        got[0]["outputs"]["score"]["values"],
        json!([0.5, 0.5, 0.0, 0.5])
    );
    assert_eq!(
        got[0]["outputs"]["kind"]["values"],
        json!(["B", "B", "B", "B"])
    );
    assert_eq!(
        got[0]["outputs"]["points[*].x"]["dense_shape"],
        json!([4, 0])
    );
    // Two records: the sparse shape is what they show.
    let two = infer(&[path], &InferOptions::default().with_records(2)).unwrap();
    match two.spec.features.iter().find(|s| s.name() == "sp") {
        Some(FeatureSpec::Sparse(s)) => assert_eq!(s.shape, Some(vec![4])),
        other => panic!("{other:?}"),
    }
    assert_eq!(two.records, 2);
}

/// A file without records still has its schema: the spec is inferred,
/// but a sparse feature, whose shape no record tells, is left out. A
/// schema that is no record is an error naming the file.
#[test]
fn empty_files_and_schemas_that_are_no_record() {
    let dir = temp_dir();
    let path = dir.path().join("empty.avro");
    write_apache(&path, MIXED, Vec::new());
    let inferred = infer(&[path], &InferOptions::default()).unwrap();
    assert_eq!(inferred.records, 0);
    assert_eq!(inferred.spec.features.len(), 8);
    let sp = inferred.skipped().find(|n| n.feature == "sp").unwrap();
    assert!(sp.message.contains("shape"), "{sp}");
    let path = dir.path().join("longs.avro");
    write_apache(&path, r#""long""#, vec![Apache::Long(1)]);
    let e = infer(&[path], &InferOptions::default()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("longs.avro") && text.contains("not a record"),
        "{text}"
    );
    let e = infer(&[dir.path().join("missing.avro")], &InferOptions::default()).unwrap_err();
    assert!(e.to_string().contains("missing.avro"), "{e}");
}

/// Cut files: inference may fail, naming the file, but never panics.
#[test]
fn prefixes_of_corpus_files_fail_cleanly() {
    let dir = temp_dir();
    let mut cuts = 0;
    for case in corpus::cases("avro") {
        for file in &case.files {
            let bytes = std::fs::read(file).unwrap();
            let name = file.file_name().unwrap().to_str().unwrap();
            let cut = dir.path().join(name);
            let step = (bytes.len() / 150).max(1);
            for len in (0..bytes.len()).step_by(step) {
                std::fs::write(&cut, &bytes[..len]).unwrap();
                if let Err(e) = infer(std::slice::from_ref(&cut), &InferOptions::default()) {
                    assert!(e.to_string().contains(name), "{e}");
                }
                cuts += 1;
            }
        }
    }
    assert!(cuts > 2000, "{cuts}");
}

/// Files whose writer schemas differ: the features they share alike are
/// kept, the others left out with a note naming the file that differs.
#[test]
fn files_whose_schemas_differ_keep_what_they_share() {
    let dir = temp_dir();
    let a = dir.path().join("a.avro");
    let b = dir.path().join("b.avro");
    write_apache(&a, MIXED, (0..2).map(|i| mixed_row(i, false)).collect());
    let other = r#"{"type": "record", "name": "R", "fields": [
      {"name": "id", "type": "long"},
      {"name": "flag", "type": "int"},
      {"name": "sp", "type": {"type": "record", "name": "S", "fields": [
        {"name": "indices0", "type": {"type": "array", "items": "int"}},
        {"name": "values", "type": {"type": "array", "items": "float"}}]}}
    ]}"#;
    let row = |i: i32| {
        Apache::Record(vec![
            ("id".into(), Apache::Long(i as i64)),
            ("flag".into(), Apache::Int(i)),
            (
                "sp".into(),
                Apache::Record(vec![
                    ("indices0".into(), Apache::Array(vec![Apache::Int(20 + i)])),
                    ("values".into(), Apache::Array(vec![Apache::Float(2.0)])),
                ]),
            ),
        ])
    };
    write_apache(&b, other, (0..2).map(row).collect());
    let both = [a.clone(), b.clone()];
    let inferred = infer(&both, &InferOptions::default()).unwrap();
    let names: Vec<&str> = inferred.spec.features.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["id", "sp"]);
    match &inferred.spec.features[1] {
        FeatureSpec::Sparse(s) => assert_eq!(s.shape, Some(vec![22])),
        other => panic!("{other:?}"),
    }
    let flag = inferred.skipped().find(|n| n.feature == "flag").unwrap();
    assert!(flag.message.contains("b.avro"), "{flag}");
    assert_eq!(inferred.records, 4);
    // The spec reads both files.
    let got = decode(&both, &inferred.spec, 4);
    assert_eq!(got[0]["outputs"]["id"]["values"], json!([0, 1, 0, 1]));
}

/// A nested schema (the corpus's generic case): nested record scalars as
/// `name.first`, fields of arrays of records as varlen `friends[*].x`,
/// enums and fixed as strings, nullable scalars with a zero default; the
/// inferred spec reads every record, and its values are fastavro's.
#[test]
fn nested_schemas_infer_key_expressions() {
    let case = grist_testkit::corpus::case("avro", "avro_generic_nested");
    let inferred = infer(&case.files, &InferOptions::default()).unwrap();
    let names: Vec<(&str, &str)> = inferred
        .spec
        .features
        .iter()
        .map(|s| (s.name(), s.kind()))
        .collect();
    for want in [
        ("name.first", "dense"),
        ("age", "dense"),
        ("height", "dense"),
        ("friends[*].name.first", "varlen"),
        ("friends[*].x", "varlen"),
        ("sp[*].idx", "varlen"),
    ] {
        assert!(names.contains(&want), "{want:?} not in {names:?}");
    }
    let skipped: Vec<&str> = inferred.skipped().map(|n| n.feature.as_str()).collect();
    assert_eq!(skipped, ["cars"]);
    let records = case.expected["avro"]["records"].as_array().unwrap();
    let got = decode(&case.files, &inferred.spec, records.len());
    let out = &got[0]["outputs"];
    for (i, r) in records.iter().enumerate() {
        assert_eq!(out["name.first"]["values"][i], r["name"]["first"], "{i}");
        assert_eq!(out["color"]["values"][i], r["color"], "{i}");
    }
    let xs: Vec<&Value> = records
        .iter()
        .flat_map(|r| r["friends"].as_array().unwrap().iter().map(|f| &f["x"]))
        .collect();
    let got_xs: Vec<&Value> = out["friends[*].x"]["values"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(got_xs, xs);
}
