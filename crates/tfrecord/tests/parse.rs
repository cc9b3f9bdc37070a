//! tf.Example / tf.SequenceExample parse tests against the golden corpus:
//! every parse of every tfrecord case, batch by batch, as TensorFlow gave it.

use std::sync::Arc;

use grist_tensor::SpecFile;
use grist_tensor::json::{batch_to_json, compare_json};
use grist_testkit::corpus;
use grist_tfrecord::{Error, ExampleDecoder};
use serde_json::Value;

use crate::support::read_all;

/// The outcome of running one manifest parse: the batches that succeeded,
/// then the error (and the index of the failing batch), if any.
struct Outcome {
    batches: Vec<Value>,
    error: Option<(usize, Error)>,
}

fn run_parse(parse: &Value, records: &[Vec<u8>], file: &Arc<str>) -> Outcome {
    let spec = SpecFile::from_value(parse).unwrap();
    let batch_size = spec.batch_size.unwrap();
    let mut decoder = match ExampleDecoder::from_spec_file(&spec) {
        Ok(d) => d,
        Err(e) => {
            return Outcome {
                batches: Vec::new(),
                error: Some((0, e)),
            };
        }
    };
    let mut batches = Vec::new();
    for (b, chunk) in records.chunks(batch_size).enumerate() {
        if spec.drop_remainder == Some(true) && chunk.len() < batch_size {
            break;
        }
        let first = (b * batch_size) as u64;
        match decoder.decode_batch(file, first, chunk.iter().map(|r| &r[..])) {
            Ok(batch) => batches.push(batch_to_json(&batch)),
            Err(e) => {
                return Outcome {
                    batches,
                    error: Some((b, e)),
                };
            }
        }
    }
    Outcome {
        batches,
        error: None,
    }
}

/// TensorFlow's error class for one of our errors.
fn tf_error_class(e: &Error) -> &'static str {
    match e {
        Error::Spec(_) => "ValueError",
        Error::Feature { .. } | Error::Malformed { .. } | Error::UnknownField { .. } => {
            "InvalidArgumentError"
        }
        _ => "other",
    }
}

#[test]
fn every_corpus_parse_matches_tensorflow() {
    let mut checked = 0;
    for case in corpus::cases("tfrecord") {
        if case.expected["expected"] != "ok" {
            continue;
        }
        let records: Vec<Vec<u8>> = case.files.iter().flat_map(|f| read_all(f)).collect();
        let file: Arc<str> = case.files[0].display().to_string().into();
        for parse in case.expected["parses"].as_array().unwrap() {
            let id = format!("{}/{}", case.name, parse["id"].as_str().unwrap());
            let outcome = run_parse(parse, &records, &file);
            let expected_batches = parse["batches"].as_array().cloned().unwrap_or_default();
            match (parse["outcome"].as_str().unwrap(), &outcome.error) {
                ("ok", None) => {
                    assert_eq!(
                        outcome.batches.len(),
                        expected_batches.len(),
                        "{id}: batch count"
                    );
                }
                ("ok", Some((b, e))) => panic!("{id}: batch {b} failed: {e}"),
                ("error", None) => panic!("{id}: expected an error, got none"),
                ("error", Some((b, e))) => {
                    let err = &parse["error"];
                    assert_eq!(
                        *b as u64,
                        err["failing_batch_index"].as_u64().unwrap(),
                        "{id}: failing batch ({e})"
                    );
                    assert_eq!(
                        tf_error_class(e),
                        err["error_class"].as_str().unwrap(),
                        "{id}: error class of {e}"
                    );
                    assert_eq!(
                        outcome.batches.len() as u64,
                        err["batches_before_error"].as_u64().unwrap(),
                        "{id}"
                    );
                    // Our message names the feature TensorFlow names.
                    let msg = e.to_string();
                    if let Error::Feature { at, .. } = e {
                        let feature = at.feature.as_deref().unwrap_or_default();
                        assert!(
                            err["message"].as_str().unwrap().contains(feature),
                            "{id}: {msg} vs {}",
                            err["message"]
                        );
                    }
                }
                (other, _) => panic!("{id}: unknown outcome {other}"),
            }
            for (i, (want, got)) in expected_batches.iter().zip(&outcome.batches).enumerate() {
                if let Err(m) = compare_json(want, got) {
                    panic!("{id}: batch {i}: {m}\nexpected {want}\nactual   {got}");
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} parses checked");
}

/// Whether a case's records are `SequenceExample`s (from its parses).
fn is_sequence_case(expected: &Value) -> bool {
    expected["parses"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|p| p["api"] == "tf.io.parse_sequence_example")
}

#[test]
fn generic_decode_matches_decoded_records() {
    let mut checked = 0;
    for case in corpus::cases("tfrecord") {
        let Some(want) = case.expected["decoded_records"].as_array() else {
            continue;
        };
        let records: Vec<Vec<u8>> = case.files.iter().flat_map(|f| read_all(f)).collect();
        assert_eq!(records.len(), want.len(), "{}", case.name);
        let sequence = is_sequence_case(&case.expected);
        for (i, (record, want)) in records.iter().zip(want).enumerate() {
            let at = grist_tfrecord::Location::record("", i as u64);
            let got = if sequence {
                grist_tfrecord::sequence_example_to_json(record, &at)
            } else {
                grist_tfrecord::example_to_json(record, &at)
            }
            .unwrap();
            if let Err(m) = compare_json(want, &got) {
                panic!("{} record {i}: {m}", case.name);
            }
            checked += 1;
        }
    }
    assert!(checked > 30, "only {checked} records checked");
}

/// `record` decoded and encoded again by prost: the bytes protobuf writes
/// for the message.
fn protobuf_reencoded(record: &[u8], sequence: bool) -> Vec<u8> {
    use grist_tfrecord::proto::{Example, SequenceExample};
    use prost::Message;
    if sequence {
        SequenceExample::decode(record).unwrap().encode_to_vec()
    } else {
        Example::decode(record).unwrap().encode_to_vec()
    }
}

/// Every corpus batch encodes to records that decode to the same batch,
/// written as protobuf writes them.
#[test]
fn encoded_batches_decode_to_the_same_batches() {
    let mut checked = 0;
    for case in corpus::cases("tfrecord") {
        if case.expected["expected"] != "ok" {
            continue;
        }
        let records: Vec<Vec<u8>> = case.files.iter().flat_map(|f| read_all(f)).collect();
        let file: Arc<str> = "mem".into();
        for parse in case.expected["parses"].as_array().unwrap() {
            if parse["outcome"] != "ok" {
                continue;
            }
            let spec = SpecFile::from_value(parse).unwrap();
            let mut decoder = ExampleDecoder::from_spec_file(&spec).unwrap();
            for chunk in records.chunks(spec.batch_size.unwrap()) {
                let batch = decoder
                    .decode_batch(&file, 0, chunk.iter().map(|r| &r[..]))
                    .unwrap();
                let encoded = grist_tfrecord::encode_batch(&batch, &spec).unwrap();
                for record in &encoded {
                    assert_eq!(
                        &protobuf_reencoded(record, spec.sequence),
                        record,
                        "{}",
                        case.name
                    );
                }
                let again = decoder
                    .decode_batch(&file, 0, encoded.iter().map(|r| &r[..]))
                    .unwrap();
                if let Err(m) = compare_json(&batch_to_json(&batch), &batch_to_json(&again)) {
                    panic!("{} {}: {m}", case.name, parse["id"]);
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 10);
}

/// int32 and bool columns read int64 lists (what writers widen them to):
/// `encode_batch` then decoding gives the same dtypes and values; a value
/// that does not fit is an error naming the record and the feature; a
/// float64 column is refused by `encode_batch` (tf.Example would narrow
/// it), naming the feature.
#[test]
fn int32_and_bool_read_back_and_float64_is_refused() {
    use grist_tensor::{DType, FeatureProblem, FeatureSpec, SpecFile, Values};
    use grist_tfrecord::{ExampleBuilder, ExampleDecoder, encode_batch};

    let specs = vec![
        FeatureSpec::dense("i", DType::Int32, [2]),
        FeatureSpec::varlen("b", DType::Bool),
    ];
    let spec = SpecFile {
        features: specs.clone(),
        ..SpecFile::default()
    };
    let records: Vec<Vec<u8>> = (0..5i64)
        .map(|r| {
            ExampleBuilder::new()
                .with_int64s("i", [i32::MIN as i64 + r, i32::MAX as i64 - r])
                .with_int64s("b", (0..r).map(|k| (k + r) % 2))
                .encode()
        })
        .collect();
    let file: Arc<str> = "mem".into();
    let mut decoder = ExampleDecoder::new(&specs).unwrap();
    let batch = decoder
        .decode_batch(&file, 0, records.iter().map(|r| &r[..]))
        .unwrap();
    let i = batch.get("i").unwrap().as_dense().unwrap();
    assert_eq!(i.values.dtype(), DType::Int32);
    let Values::Int32(v) = &i.values else {
        unreachable!()
    };
    assert_eq!((v[0], v[1]), (i32::MIN, i32::MAX));
    assert_eq!(batch.get("b").unwrap().dtype(), DType::Bool);
    let again = encode_batch(&batch, &spec).unwrap();
    let back = decoder
        .decode_batch(&file, 0, again.iter().map(|r| &r[..]))
        .unwrap();
    assert_eq!(back, batch);

    for (feature, bad, shown) in [
        (
            "i",
            ExampleBuilder::new().with_int64s("i", [0, 1 << 31]),
            "2147483648",
        ),
        (
            "b",
            ExampleBuilder::new()
                .with_int64s("i", [0, 0])
                .with_int64s("b", [1, 2]),
            "2",
        ),
    ] {
        let bad = bad.encode();
        let err = decoder
            .decode_batch(&file, 3, [&records[0][..], &bad[..]])
            .unwrap_err();
        let at = err.location().unwrap();
        assert_eq!((at.record, at.feature.as_deref()), (Some(4), Some(feature)));
        assert!(
            matches!(
                &err,
                Error::Feature { problem: FeatureProblem::Unrepresentable { value, .. }, .. }
                    if value == shown
            ),
            "{err}"
        );
    }

    let f64_spec = SpecFile {
        features: vec![FeatureSpec::dense("x", DType::Float64, [])],
        ..SpecFile::default()
    };
    let batch = grist_tensor::Batch::new(
        1,
        vec![grist_tensor::Column {
            name: "x".into(),
            section: grist_tensor::Section::Features,
            tensor: grist_tensor::Tensor::Dense(grist_tensor::DenseTensor {
                shape: vec![1],
                values: Values::Float64(vec![0.1]),
            }),
        }],
    );
    let err = encode_batch(&batch, &f64_spec).unwrap_err();
    assert!(err.to_string().contains("\"x\""), "{err}");
}

/// Records decoded by number name their file, record and dataset index in
/// errors, record after record and file after file (the location is kept
/// between records, and must follow both).
#[test]
fn records_decoded_by_number_name_their_file_record_and_index() {
    use grist_tensor::{DType, FeatureSpec};
    use grist_tfrecord::{ExampleBuilder, ExampleDecoder};

    let specs = vec![FeatureSpec::dense("x", DType::Int64, [])];
    let good = ExampleBuilder::new().with_int64s("x", [1]).encode();
    let bad = ExampleBuilder::new().with_int64s("y", [1]).encode();
    let mut decoder = ExampleDecoder::new(&specs).unwrap();
    let mut out = decoder.new_batch(8);
    let a: Arc<str> = "a.tfrecord".into();
    let b: Arc<str> = "b.tfrecord".into();
    let cases = [
        (&a, 3, None),
        (&a, 9, Some(40)),
        (&a, 11, None),
        (&b, 2, None),
        (&a, 5, None),
        (&b, 7, Some(12)),
    ];
    for (file, number, index) in cases {
        decoder
            .decode_numbered(&good, file, number, index, &mut out)
            .unwrap();
        let e = decoder
            .decode_numbered(&bad, file, number + 1, index, &mut out)
            .unwrap_err();
        let at = e.location().unwrap();
        assert_eq!(
            (&at.file, at.record, at.index, at.feature.as_deref()),
            (file, Some(number + 1), index, Some("x")),
            "{e}"
        );
    }
    assert_eq!(out.rows(), cases.len());
}
