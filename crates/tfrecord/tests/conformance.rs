//! Files TensorFlow 2.16.2 wrote and what its parsers did with them
//! (`tests/conformance/`, made by `benches/peers/gen_conformance.py
//! tfrecord`): a `default_value` on a `FixedLenSequenceFeature` (padding
//! in `parse_example`, refused by the sequence parses before reading),
//! and a field other than the feature map inside `Features` or
//! `FeatureLists` (the record refused; inside `Example` or
//! `SequenceExample`, skipped). grist must do the same, value for value.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use grist_tensor::json::{batch_to_json, compare_json};
use grist_tensor::{SpecFile, TensorError};
use grist_tfrecord::{Error, ExampleDecoder, Location, ReaderOptions, RecordReader};
use serde_json::{Map, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

fn doc(name: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(format!("{name}.tf.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn records(file: &str) -> Vec<Vec<u8>> {
    let mut r = RecordReader::open(dir().join(file), ReaderOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        out.push(rec.to_vec());
    }
    out
}

/// `records` decoded as one batch: its JSON, or the error.
fn parse(decoder: &mut ExampleDecoder, records: &[Vec<u8>], first: u64) -> Result<Value, Error> {
    let file: Arc<str> = "conformance.tfrecord".into();
    let mut out = decoder.new_batch(records.len());
    for (i, r) in records.iter().enumerate() {
        decoder.decode(
            r,
            &Location::record(file.clone(), first + i as u64),
            &mut out,
        )?;
    }
    Ok(batch_to_json(&decoder.finish(&mut out, &file, first)?))
}

/// TensorFlow's output sections of an ok outcome, as in `batch_to_json`.
fn sections(outcome: &Value) -> Map<String, Value> {
    let keys = [
        "outputs",
        "context",
        "feature_lists",
        "feature_list_lengths",
    ];
    keys.iter()
        .filter_map(|&k| Some((k.to_string(), outcome.get(k)?.clone())))
        .collect()
}

fn same(want: &Value, got: &Value, what: &str) {
    let want = sections(want);
    let got: Map<String, Value> = want.keys().map(|k| (k.clone(), got[k].clone())).collect();
    if let Err(e) = compare_json(&Value::Object(want), &Value::Object(got.clone())) {
        panic!("{what}: {e:?}\n{got:?}");
    }
}

#[test]
fn fixed_len_sequence_defaults_as_tensorflow() {
    let d = doc("fls_default");
    let example = records(d["example_file"].as_str().unwrap());
    let sequence = records(d["sequence_file"].as_str().unwrap());
    let (mut ok, mut refused) = (0, 0);
    for p in d["parses"].as_array().unwrap() {
        let what = format!("{} {}", p["api"], p["spec"]);
        let spec = SpecFile::from_value(&p["spec"]).unwrap();
        let decoder = ExampleDecoder::from_spec_file(&spec);
        if p["outcome"] == "error" {
            // Refused when the decoder is made, before any record.
            assert_eq!(p["error_class"], "ValueError", "{what}");
            let message = p["message"].as_str().unwrap();
            match decoder {
                Err(Error::Spec(TensorError::InvalidSpec { reason, .. })) => {
                    assert_eq!(reason, message, "{what}");
                }
                // In the context TensorFlow refuses the kind itself.
                Err(Error::Spec(TensorError::UnsupportedSpec { feature, .. }))
                    if message.starts_with("Unsupported FixedLenSequenceFeature") =>
                {
                    assert!(message.ends_with(&format!("for key '{feature}'")), "{what}");
                }
                other => panic!("{what}: {:?}", other.map(|_| ())),
            }
            refused += 1;
            continue;
        }
        let mut decoder = decoder.unwrap();
        if p["api"] == "parse_single_sequence_example" {
            ok += 1;
            continue;
        }
        let input = if spec.sequence { &sequence } else { &example };
        let got = parse(&mut decoder, input, 0).unwrap();
        same(p, &got, &what);
        ok += 1;
    }
    assert!(ok >= 5 && refused >= 10, "{ok} ok, {refused} refused");
}

/// Each record alone: TensorFlow's outcome, and for a refused one an
/// [`Error::UnknownField`] naming the record, the message and the field.
fn check_unknown_fields(name: &str) {
    let d = doc(name);
    let records = records(d["file"].as_str().unwrap());
    let what = d["records"].as_array().unwrap();
    assert_eq!(records.len(), what.len());
    for p in d["parses"].as_array().unwrap() {
        let spec = SpecFile::from_value(&p["spec"]).unwrap();
        let mut decoder = ExampleDecoder::from_spec_file(&spec).unwrap();
        for (i, want) in p["per_record"].as_array().unwrap().iter().enumerate() {
            let at = format!("{name} {} record {i} ({})", p["spec"], what[i]);
            let got = parse(&mut decoder, std::slice::from_ref(&records[i]), i as u64);
            match (want["outcome"].as_str().unwrap(), got) {
                ("ok", Ok(got)) => same(want, &got, &at),
                ("error", Err(e)) => {
                    assert_eq!(want["error_class"], "InvalidArgumentError", "{at}");
                    let Error::UnknownField {
                        at: loc,
                        message,
                        field,
                        ..
                    } = &e
                    else {
                        panic!("{at}: {e}");
                    };
                    assert_eq!(loc.record, Some(i as u64), "{at}");
                    assert_eq!(*message, what[i]["where"].as_str().unwrap(), "{at}");
                    assert_eq!(*field, what[i]["field"].as_u64().unwrap(), "{at}");
                }
                (want, got) => panic!("{at}: TensorFlow {want}, grist {got:?}"),
            }
        }
    }
}

#[test]
fn unknown_fields_in_features_as_tensorflow() {
    check_unknown_fields("features_unknown_field");
}

#[test]
fn unknown_fields_in_sequence_examples_as_tensorflow() {
    check_unknown_fields("feature_lists_unknown_field");
}
