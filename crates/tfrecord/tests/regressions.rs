//! Inputs found by fuzzing (`fuzz/fuzz_targets/tfrecord_example.rs`), each
//! decoded with the specs that failed, checking the error variant or the
//! correct output.
//!
//! Each file under `tests/regressions/` is a fuzz input, replayable with
//! `cargo fuzz run tfrecord_example <file>`: a selector byte (the fuzz
//! configuration; each test here spells its specs out), then one record,
//! or, when the selector's high bit is set, a length byte and two records.

use std::path::PathBuf;
use std::sync::Arc;

use grist_tensor::json::{batch_to_json, compare_json};
use grist_tensor::{Batch, SpecFile, TensorError};
use grist_tfrecord::{Error, ExampleBuilder, ExampleDecoder, FeatureProblem, encode_batch};
use serde_json::{Value, json};

/// The selector bit of two-record fuzz inputs.
const TWO_RECORDS: u8 = 0x80;

/// The records of the fuzz input `name`.
fn records(name: &str) -> Vec<Vec<u8>> {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/regressions")).join(name);
    let input = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (&selector, rest) = input.split_first().expect("a selector byte");
    match rest.split_first() {
        Some((&len, two)) if selector & TWO_RECORDS != 0 => {
            let (a, b) = two.split_at(usize::from(len).min(two.len()));
            vec![a.to_vec(), b.to_vec()]
        }
        _ => vec![rest.to_vec()],
    }
}

fn decoder(spec: &Value) -> (SpecFile, ExampleDecoder) {
    let spec = SpecFile::from_value(spec).unwrap();
    let decoder = ExampleDecoder::from_spec_file(&spec).unwrap();
    (spec, decoder)
}

fn decode(decoder: &mut ExampleDecoder, records: &[Vec<u8>]) -> Result<Batch, Error> {
    let file: Arc<str> = "regression".into();
    decoder.decode_batch(&file, 0, records.iter().map(|r| &r[..]))
}

/// A one-feature ragged spec reading values from `a`.
fn ragged(dtype: &str, partitions: Value, splits: &str, validate: bool) -> Value {
    json!({"features": [{
        "name": "r", "kind": "ragged", "dtype": dtype, "value_key": "a",
        "partitions": partitions, "row_splits_dtype": splits, "validate": validate,
    }]})
}

fn assert_bad_ragged_encoding(result: Result<Vec<Vec<u8>>, Error>) {
    match result {
        Err(Error::Spec(TensorError::BadRagged { feature, .. })) => assert_eq!(feature, "r"),
        other => panic!("expected BadRagged, got {other:?}"),
    }
}

fn assert_bad_partition(result: Result<Batch, Error>) {
    match result {
        Err(Error::Feature {
            at,
            problem: FeatureProblem::BadPartition { .. },
        }) => assert_eq!(at.feature.as_deref(), Some("r")),
        other => panic!("expected BadPartition, got {other:?}"),
    }
}

/// 3 values and one row of 5 (`row_lengths`): with `validate: false` the
/// decoder returns the ill-formed tensor, as TensorFlow does; encoding it
/// sliced past the values and panicked. Now it is refused.
#[test]
fn encode_refuses_ill_formed_ragged() {
    let records = records("example_encode_ill_formed_ragged.bin");
    let partitions = json!([{"kind": "row_lengths", "key": "b"}]);
    let (spec, mut d) = decoder(&ragged("float32", partitions.clone(), "int32", false));
    let batch = decode(&mut d, &records).unwrap();
    let r = batch.get("r").unwrap().as_ragged().unwrap();
    assert_eq!(r.nested_row_splits, vec![vec![0, 1], vec![0, 5]]);
    assert_bad_ragged_encoding(encode_batch(&batch, &spec));

    let (_, mut d) = decoder(&ragged("float32", partitions, "int32", true));
    assert_bad_partition(decode(&mut d, &records));
}

/// A feature list whose one step holds no values: the batch's dense shape
/// counts the step, but the records written for it left the step out, so
/// reading them back gave `[1, 0, 0]` instead of `[1, 1, 0]`.
#[test]
fn sequence_varlen_keeps_trailing_empty_steps() {
    let records = records("example_sequence_varlen_trailing_empty_step.bin");
    let (spec, mut d) = decoder(&json!({
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
    }));
    let batch = decode(&mut d, &records).unwrap();
    let b = batch
        .get_in(grist_tensor::Section::FeatureLists, "b")
        .unwrap()
        .as_sparse()
        .unwrap();
    assert_eq!(b.dense_shape, vec![1, 1, 0]);
    let encoded = encode_batch(&batch, &spec).unwrap();
    let again = decode(
        &mut d,
        &encoded.iter().map(|r| r.to_vec()).collect::<Vec<_>>(),
    )
    .unwrap();
    compare_json(&batch_to_json(&batch), &batch_to_json(&again)).unwrap();
}

/// Row id 2^63 - 1 after a record with one row: shifting the ids by the
/// rows before them overflowed (a panic with overflow checks) before the
/// row limit was checked. Now the limit is checked first.
#[test]
fn value_rowids_past_the_limit_fail_without_overflow() {
    let records = records("example_value_rowids_overflow.bin");
    let partitions = json!([{"kind": "value_rowids", "key": "b"}]);
    for validate in [false, true] {
        let (_, mut d) = decoder(&ragged("float32", partitions.clone(), "int64", validate));
        assert_bad_partition(decode(&mut d, &records));
        let first = ExampleBuilder::new()
            .with_floats("a", [0.5])
            .with_int64s("b", [0])
            .encode();
        let both = [first, records[0].clone()];
        assert_bad_partition(decode(&mut d, &both));
    }
}

/// Two records that disagree on where rows end, under `row_splits`, then
/// `value_rowids`, then rows of 2: the first record's splits take 3 rows
/// but its row ids make 2, the second's take 1 and make 2 (the first of
/// them empty). The batch is well formed, but the first record now ends
/// with an empty row, which row ids cannot describe. Encoding it wrote
/// records that read back as another (ill-formed) batch; now it is
/// refused.
#[test]
fn encode_refuses_value_rowids_empty_last_row() {
    let records = records("example_value_rowids_empty_last_row.bin");
    assert_eq!(records.len(), 2);
    let partitions = json!([
        {"kind": "row_splits", "key": "b"},
        {"kind": "value_rowids", "key": "c"},
        {"kind": "uniform_row_length", "length": 2},
    ]);
    for validate in [false, true] {
        let (spec, mut d) = decoder(&ragged("int64", partitions.clone(), "int32", validate));
        let batch = decode(&mut d, &records).unwrap();
        let r = batch.get("r").unwrap().as_ragged().unwrap();
        assert_eq!(
            r.nested_row_splits,
            vec![vec![0, 1, 2], vec![0, 3, 4], vec![0, 1, 2, 2, 3]]
        );
        assert_bad_ragged_encoding(encode_batch(&batch, &spec));
    }
}

/// A negative row id makes finishing the batch fail at the first column;
/// the columns after it kept their rows, so the next batch decoded into
/// the same builder held rows of the failed one. Now finishing empties
/// every column, also when it fails.
#[test]
fn failed_finish_leaves_the_builder_empty() {
    let records = records("example_finish_error_keeps_later_columns.bin");
    let (_, mut d) = decoder(&json!({"features": [
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
    ]}));
    let good = ExampleBuilder::new()
        .with_int64s("a", [4])
        .with_int64s("b", [0])
        .with_bytes("c", ["x"])
        .with_int64s("e", [5])
        .with_int64s("f", [9])
        .with_floats("g", [0.5, 0.25])
        .with_bytes("h", ["p", "q"])
        .encode();
    let file: Arc<str> = "regression".into();
    let at = grist_tfrecord::Location::record(file.clone(), 0);
    let mut out = d.new_batch(2);
    d.decode(&good, &at, &mut out).unwrap();
    d.decode(&records[0], &at, &mut out).unwrap();
    assert_bad_partition(d.finish(&mut out, &file, 0));

    d.decode(&good, &at, &mut out).unwrap();
    let reused = d.finish(&mut out, &file, 0).unwrap();
    let fresh = decode(&mut d, &[good]).unwrap();
    compare_json(&batch_to_json(&fresh), &batch_to_json(&reused)).unwrap();
}

/// Not a fuzz input: found measuring allocations against input size. Every
/// row of a FixedLenSequenceFeature is padded to the longest, so one
/// record of 1,000 floats among 999 empty ones asked for a million values
/// whatever the decoder's limits (1 MB of records made 1 GB). The padded
/// size is now checked against the allocation limit.
#[test]
fn padding_respects_the_allocation_limit() {
    let limits = grist_tensor::Limits::default().with_max_alloc_bytes(1 << 20);
    let long = |key: &str| ExampleBuilder::new().with_floats(key, vec![0.5; 1000]);
    let mut records = vec![long("p").encode()];
    records.extend((0..999).map(|_| ExampleBuilder::new().encode()));
    let (_, d) = decoder(&json!({"features": [
        {"name": "p", "kind": "fixed_len_sequence", "dtype": "float32", "shape": [],
         "allow_missing": true},
    ]}));
    let mut d = d.with_limits(limits);
    match decode(&mut d, &records) {
        Err(Error::BatchTooLarge {
            source: TensorError::LimitExceeded { requested, max, .. },
            ..
        }) => {
            assert_eq!((requested, max), (4_000_000, 1 << 20));
        }
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    // Under the limit, the same padding is fine.
    assert_eq!(decode(&mut d, &records[..200]).unwrap().rows(), 200);
}
