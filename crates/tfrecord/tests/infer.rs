//! Spec inference: specs inferred from the corpus files read them as the
//! cases' own specs do (feature by feature, where the two agree), from
//! prod19 files too; the dense/varlen rule, missing features, sequence
//! examples, empty and damaged files.

use std::path::Path;
use std::sync::Arc;

use grist_tensor::json::{batch_to_json, compare_json};
use grist_tensor::synth::{prod19, prod19_example_specs};
use grist_tensor::{
    DType, FeatureSpec, Format, InferOptions, Inferred, Input, SpecFile, TensorError,
};
use grist_testkit::corpus;
use grist_tfrecord::{
    Error, ExampleBuilder, ExampleDecoder, RecordWriter, TfRecordFormat, WriterOptions,
    encode_batch, proto,
};
use prost::Message as _;
use serde_json::Value;

use crate::support::read_all;

fn infer(paths: &[&Path], options: &InferOptions) -> Result<Inferred, grist_tensor::BoxError> {
    let inputs: Vec<Input> = paths.iter().map(|p| Input::local(*p)).collect();
    TfRecordFormat.infer_spec(&inputs, options)
}

fn write(path: &Path, records: &[Vec<u8>]) {
    let mut w = RecordWriter::create(path, WriterOptions::default()).unwrap();
    for r in records {
        w.write_record(r).unwrap();
    }
    w.finish().unwrap();
}

/// The batches of `records` decoded with `spec`, `batch` records each, as
/// the manifests write them.
fn decode(spec: &SpecFile, records: &[Vec<u8>], batch: usize, file: &Arc<str>) -> Vec<Value> {
    let mut decoder = ExampleDecoder::from_spec_file(spec).unwrap();
    records
        .chunks(batch.max(1))
        .enumerate()
        .map(|(b, chunk)| {
            let first = (b * batch) as u64;
            let batch = decoder
                .decode_batch(file, first, chunk.iter().map(|r| &r[..]))
                .unwrap_or_else(|e| panic!("{file}: the inferred spec fails: {e}"));
            batch_to_json(&batch)
        })
        .collect()
}

/// Every good corpus file with records gets a spec that decodes all of
/// its records; where a feature's inferred spec agrees with the case's,
/// its tensors are TensorFlow's, batch by batch.
#[test]
fn corpus_specs_read_the_corpus_as_tensorflow_does() {
    let (mut cases, mut compared) = (0, 0);
    for case in corpus::cases("tfrecord") {
        if !case.is_ok() || case.parses().is_empty() {
            continue;
        }
        let paths: Vec<&Path> = case.files.iter().map(|f| f.as_path()).collect();
        let records: Vec<Vec<u8>> = case.files.iter().flat_map(|f| read_all(f)).collect();
        let inferred = match infer(&paths, &InferOptions::default()) {
            Ok(i) => i,
            Err(e) if records.is_empty() => {
                assert!(
                    matches!(
                        e.downcast_ref::<TensorError>(),
                        Some(TensorError::NoRecords { .. })
                    ),
                    "{}: {e}",
                    case.name
                );
                continue;
            }
            Err(e) => panic!("{}: {e}", case.name),
        };
        assert_eq!(inferred.records, records.len() as u64, "{}", case.name);
        let spec = &inferred.spec;
        // Sequence examples are told by their records.
        let sequence = case.parses()[0]["api"] == "tf.io.parse_sequence_example";
        assert_eq!(spec.sequence, sequence, "{}", case.name);
        let file: Arc<str> = case.files[0].display().to_string().into();
        for parse in case.parses() {
            if parse["outcome"] != "ok" {
                continue;
            }
            let own = SpecFile::from_value(parse).unwrap();
            let batch = own.batch_size.unwrap();
            let got = decode(spec, &records, batch, &file);
            let want = parse["batches"].as_array().unwrap();
            assert_eq!(got.len(), want.len(), "{}", case.name);
            let sections: &[(&str, &[FeatureSpec], &[FeatureSpec])] = if sequence {
                &[
                    ("context", &own.context_features, &spec.context_features),
                    (
                        "feature_lists",
                        &own.sequence_features,
                        &spec.sequence_features,
                    ),
                ]
            } else {
                &[("outputs", &own.features, &spec.features)]
            };
            for (section, own, inferred) in sections {
                let json = |s: &[FeatureSpec]| serde_json::to_value(s).unwrap();
                for name in corpus::agreeing_features(&json(own), &json(inferred)) {
                    for (b, (w, g)) in want.iter().zip(&got).enumerate() {
                        compare_json(&w[section][&name], &g[section][&name]).unwrap_or_else(|m| {
                            panic!("{} {}/{name} batch {b}: {m}", case.name, parse["id"])
                        });
                    }
                    compared += 1;
                }
            }
        }
        cases += 1;
    }
    assert!(cases >= 8, "{cases} cases");
    assert!(
        compared >= 20,
        "only {compared} features compared in {cases} cases"
    );
}

/// prod19 as tf.Example: its dense features come back as they were
/// written, its sparse features as their index and value lists.
#[test]
fn prod19_infers_its_dense_features_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prod19.tfrecord");
    let specs = SpecFile {
        features: prod19_example_specs(),
        ..SpecFile::default()
    };
    let batch = prod19(300, 7);
    write(&path, &encode_batch(&batch, &specs).unwrap());
    let inferred = infer(&[&path], &InferOptions::default()).unwrap();
    assert!(inferred.notes.is_empty(), "{:?}", inferred.notes);
    let got = &inferred.spec.features;
    assert_eq!(got.len(), 24);
    for s in &specs.features {
        match s {
            FeatureSpec::Dense(_) => assert!(got.contains(s), "{}", s.name()),
            FeatureSpec::Sparse(sp) => {
                let keys = [sp.index_keys()[0].clone(), sp.value_key.clone().unwrap()];
                assert!(got.contains(&FeatureSpec::varlen(&keys[0], DType::Int64)));
                assert!(got.contains(&FeatureSpec::varlen(&keys[1], DType::Float32)));
            }
            other => panic!("{other:?}"),
        }
    }
    let records = read_all(&path);
    let decoded = ExampleDecoder::from_spec_file(&inferred.spec)
        .unwrap()
        .decode_batch(&"p".into(), 0, records.iter().map(|r| &r[..]))
        .unwrap();
    for column in batch.columns() {
        match column.tensor.as_sparse() {
            None => assert_eq!(decoded.get(&column.name), Some(&column.tensor)),
            Some(sp) => {
                let values = decoded.get(&format!("{}_values", column.name)).unwrap();
                assert!(values.as_sparse().unwrap().values.bit_eq(&sp.values));
                let indices = decoded.get(&format!("{}_indices", column.name)).unwrap();
                let indices = indices.as_sparse().unwrap();
                let cols: Vec<i64> = sp.index_tuples().map(|t| t[1]).collect();
                assert_eq!(indices.values, grist_tensor::Values::Int64(cols));
            }
        }
    }
}

/// Same count everywhere: dense (a scalar for one value); counts that
/// vary, features missing from a record, lists empty everywhere: varlen;
/// two list kinds: left out with a note. Only the sampled records count.
#[test]
fn dense_when_every_record_agrees_varlen_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.tfrecord");
    let records: Vec<Vec<u8>> = (0..5i64)
        .map(|i| {
            let mut e = ExampleBuilder::new()
                .with_int64s("id", [i])
                .with_floats("xy", [0.5, 1.5])
                .with_bytes("tags", vec![b"t".to_vec(); 1 + (i as usize >= 3) as usize])
                .with_int64s("empty", []);
            if i != 2 {
                e = e.with_floats("opt", [1.0]);
            }
            if i == 4 {
                e = e.with_bytes("mixed", [b"x"]);
            } else {
                e = e.with_int64s("mixed", [1]);
            }
            e.encode()
        })
        .collect();
    write(&path, &records);
    let all = infer(&[&path], &InferOptions::default()).unwrap();
    assert_eq!(
        all.spec.features,
        [
            FeatureSpec::varlen("empty", DType::Int64),
            FeatureSpec::dense("id", DType::Int64, []),
            FeatureSpec::varlen("opt", DType::Float32),
            FeatureSpec::varlen("tags", DType::String),
            FeatureSpec::dense("xy", DType::Float32, [2]),
        ]
    );
    let skipped: Vec<_> = all.skipped().collect();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].feature, "mixed");
    assert!(skipped[0].message.contains("int64") && skipped[0].message.contains("string"));
    // The first two records alone: "opt" and "tags" look dense.
    let two = infer(&[&path], &InferOptions::default().with_records(2)).unwrap();
    assert_eq!(two.records, 2);
    assert!(
        two.spec
            .features
            .contains(&FeatureSpec::dense("tags", DType::String, []))
    );
    assert!(
        two.spec
            .features
            .contains(&FeatureSpec::dense("opt", DType::Float32, []))
    );
    // The inferred spec reads every record.
    let spec = &all.spec;
    let got = decode(spec, &records, 2, &"a".into());
    assert_eq!(got.len(), 3);
    assert_eq!(
        got[1]["outputs"]["opt"]["values"].as_array().unwrap().len(),
        1
    );
}

fn feature(kind: proto::feature::Kind) -> proto::Feature {
    proto::Feature { kind: Some(kind) }
}

fn ints(v: &[i64]) -> proto::Feature {
    feature(proto::feature::Kind::Int64List(proto::Int64List {
        value: v.to_vec(),
    }))
}

fn floats(v: &[f32]) -> proto::Feature {
    feature(proto::feature::Kind::FloatList(proto::FloatList {
        value: v.to_vec(),
    }))
}

/// Sequence examples: told apart by their `feature_lists`; lists whose
/// steps agree are fixed_len_sequence (allowing missing lists when one is
/// missing), others varlen; the spec reads every record.
#[test]
fn sequence_examples_are_told_and_their_lists_inferred() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seq.tfrecord");
    let records: Vec<Vec<u8>> = (0..4usize)
        .map(|i| {
            let mut lists = std::collections::BTreeMap::new();
            let steps = |f: &dyn Fn(usize) -> proto::Feature| proto::FeatureList {
                feature: (0..i).map(f).collect(),
            };
            lists.insert("frames".to_string(), steps(&|s| floats(&[s as f32, 0.5])));
            lists.insert("tokens".to_string(), steps(&|s| ints(&vec![7; s + 1])));
            if i != 1 {
                lists.insert("labels".to_string(), steps(&|s| ints(&[s as i64])));
            }
            let mut context = std::collections::BTreeMap::new();
            context.insert("len".to_string(), ints(&[i as i64]));
            proto::SequenceExample {
                context: Some(proto::Features { feature: context }),
                feature_lists: Some(proto::FeatureLists {
                    feature_list: lists,
                }),
            }
            .encode_to_vec()
        })
        .collect();
    write(&path, &records);
    let inferred = infer(&[&path], &InferOptions::default()).unwrap();
    let spec = &inferred.spec;
    assert!(spec.sequence);
    assert_eq!(
        spec.context_features,
        [FeatureSpec::dense("len", DType::Int64, [])]
    );
    let kinds: Vec<(&str, &str)> = spec
        .sequence_features
        .iter()
        .map(|s| (s.name(), s.kind()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("frames", "fixed_len_sequence"),
            ("labels", "fixed_len_sequence"),
            ("tokens", "varlen")
        ]
    );
    let allow = |i: usize| match &spec.sequence_features[i] {
        FeatureSpec::FixedLenSequence(f) => (f.shape.clone(), f.allow_missing),
        other => panic!("{other:?}"),
    };
    assert_eq!(allow(0), (vec![2], false));
    assert_eq!(allow(1), (vec![], true));
    let got = decode(spec, &records, 4, &"seq".into());
    assert_eq!(
        got[0]["feature_lists"]["frames"]["shape"],
        serde_json::json!([4, 3, 2])
    );
    // Read as plain Examples, the context is all there is.
    let plain = infer(&[&path], &InferOptions::default().with_sequence(false)).unwrap();
    assert!(!plain.spec.sequence);
    assert_eq!(plain.spec.features, spec.context_features);
}

/// A file without records is an error naming it; a record that is no
/// Example is an error naming its file and record.
#[test]
fn empty_and_damaged_files_are_errors_that_name_them() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.tfrecord");
    write(&empty, &[]);
    let e = infer(&[&empty], &InferOptions::default()).unwrap_err();
    assert!(
        matches!(
            e.downcast_ref::<TensorError>(),
            Some(TensorError::NoRecords { .. })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("empty.tfrecord"), "{e}");
    let bad = dir.path().join("bad.tfrecord");
    write(
        &bad,
        &[
            ExampleBuilder::new().with_int64s("a", [1]).encode(),
            vec![0xff; 3],
        ],
    );
    let e = infer(&[&bad], &InferOptions::default()).unwrap_err();
    assert!(matches!(
        e.downcast_ref::<Error>(),
        Some(Error::Malformed { .. })
    ));
    let text = e.to_string();
    assert!(
        text.contains("bad.tfrecord") && text.contains("record 1"),
        "{text}"
    );
    // Several files are sampled as one: the empty one adds nothing.
    let inferred = infer(&[&empty, &bad], &InferOptions::default().with_records(1)).unwrap();
    assert_eq!(
        inferred.spec.features,
        [FeatureSpec::dense("a", DType::Int64, [])]
    );
}

/// Cut files: inference may fail, naming the file, but never panics.
#[test]
fn prefixes_of_corpus_files_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut cuts = 0;
    for case in corpus::cases("tfrecord") {
        for file in &case.files {
            let bytes = std::fs::read(file).unwrap();
            let name = file.file_name().unwrap();
            let cut = dir.path().join(name);
            let step = (bytes.len().min(64 << 10) / 50).max(1);
            for len in (0..bytes.len().min(64 << 10)).step_by(step) {
                std::fs::write(&cut, &bytes[..len]).unwrap();
                if let Err(e) = infer(&[&cut], &InferOptions::default()) {
                    let text = e.to_string();
                    assert!(text.contains(name.to_str().unwrap()), "{text}");
                }
                cuts += 1;
            }
        }
    }
    assert!(cuts > 500, "{cuts}");
}
