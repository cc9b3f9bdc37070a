//! Feature specs and OneFlow's decoders over hand-built records: what each
//! kind outputs, and the error (kind, record, feature) for every way a
//! record can miss its spec.

use std::sync::Arc;

use grist_ofrecord::{
    BytesSpec, Error, FeatureProblem, FeatureValue, Field, OfRecordDecoder, RawDType, RawSpec,
    Record, RecordBuilder,
};
use grist_tensor::{Batch, DType, FeatureSpec, Partition, RaggedSpec, Values};
use serde_json::json;

fn decode(fields: &[Field], records: &[Vec<u8>]) -> Result<Batch, Error> {
    let mut decoder = OfRecordDecoder::with_fields(fields)?;
    let file: Arc<str> = "test".into();
    decoder.decode_batch(&file, 10, records.iter().map(|r| &r[..]))
}

fn spec(v: serde_json::Value) -> Field {
    Field::from_json(&v).unwrap()
}

/// The feature problem of a failed decode, with the record it names.
fn problem(result: Result<Batch, Error>) -> (FeatureProblem, u64, String) {
    match result {
        Err(Error::Feature { at, problem }) => (
            problem,
            at.record.expect("a record"),
            at.feature.as_deref().expect("a feature").to_string(),
        ),
        other => panic!("expected a feature error, got {other:?}"),
    }
}

#[test]
fn dense_defaults_missing_features_and_type_mismatches() {
    let records = vec![
        RecordBuilder::new().with_int64s("a", [1, 2]).encode(),
        RecordBuilder::new().encode(),
        RecordBuilder::new()
            .with_feature("a", &FeatureValue::None)
            .encode(),
    ];
    let with_default = spec(
        json!({"name": "a", "kind": "dense", "dtype": "int64", "shape": [2], "default": [7, 8]}),
    );
    let batch = decode(&[with_default], &records).unwrap();
    assert_eq!(
        batch.get("a").unwrap().as_dense().unwrap().values,
        Values::Int64(vec![1, 2, 7, 8, 7, 8])
    );
    let required = FeatureSpec::dense("a", DType::Int64, [2]).into();
    let (p, record, feature) = problem(decode(&[required], &records));
    assert_eq!(
        (p, record, feature.as_str()),
        (FeatureProblem::Missing, 11, "a")
    );
    let wrong_type = FeatureSpec::dense("a", DType::Float32, [2]).into();
    let (p, record, _) = problem(decode(&[wrong_type], &records));
    assert_eq!(record, 10);
    assert_eq!(
        p,
        FeatureProblem::TypeMismatch {
            expected: "float_list",
            actual: "int64_list"
        }
    );
    let wrong_count = FeatureSpec::dense("a", DType::Int64, [3]).into();
    let (p, _, _) = problem(decode(&[wrong_count], &records));
    assert_eq!(grist_ofrecord::problem_manifest_kind(&p), "length_mismatch");
    // Bool has no list of its own: int64 is a mismatch, int32 is read.
    let flags = vec![RecordBuilder::new().with_int32s("f", [0, 5]).encode()];
    let b = decode(&[FeatureSpec::dense("f", DType::Bool, [2]).into()], &flags).unwrap();
    assert_eq!(
        b.get("f").unwrap().as_dense().unwrap().values,
        Values::Bool(vec![false, true])
    );
}

#[test]
fn every_list_kind_reads_into_its_dtype() {
    let record = RecordBuilder::new()
        .with_bytes("b", [&b"x"[..], b""])
        .with_floats("f", [1.5, f32::NAN])
        .with_doubles("d", [1e300])
        .with_int32s("i", [-1, i32::MAX])
        .with_int64s("l", [i64::MIN])
        .encode();
    let fields: Vec<Field> = [
        ("b", DType::String),
        ("f", DType::Float32),
        ("d", DType::Float64),
        ("i", DType::Int32),
        ("l", DType::Int64),
    ]
    .into_iter()
    .map(|(n, d)| FeatureSpec::varlen(n, d).into())
    .collect();
    let batch = decode(&fields, &[record]).unwrap();
    let json = grist_tensor::json::batch_to_json(&batch);
    assert_eq!(json["outputs"]["b"]["values"], json!(["x", ""]));
    assert_eq!(json["outputs"]["f"]["values"], json!([1.5, "NaN"]));
    assert_eq!(json["outputs"]["d"]["values"], json!([1e300]));
    assert_eq!(json["outputs"]["i"]["values"], json!([-1, i32::MAX]));
    assert_eq!(json["outputs"]["l"]["values"], json!([i64::MIN]));
    assert_eq!(json["outputs"]["b"]["dense_shape"], json!([1, 2]));
}

#[test]
fn sparse_features_sort_rows_and_check_indices() {
    let records = vec![
        RecordBuilder::new()
            .with_int64s("ix", [4, 0, 2])
            .with_floats("v", [4.0, 0.5, 2.0])
            .encode(),
        // Index lists may be int32 lists.
        RecordBuilder::new()
            .with_int32s("ix", [1])
            .with_floats("v", [1.0])
            .encode(),
        RecordBuilder::new().encode(),
    ];
    let sparse = FeatureSpec::sparse("sp", DType::Float32, "ix", "v", 5);
    let batch = decode(&[sparse.clone().into()], &records).unwrap();
    let sp = batch.get("sp").unwrap().as_sparse().unwrap();
    assert_eq!(sp.indices, vec![0, 0, 0, 2, 0, 4, 1, 1]);
    assert_eq!(sp.values, Values::Float32(vec![0.5, 2.0, 4.0, 1.0]));
    assert_eq!(sp.dense_shape, vec![3, 5]);

    let out_of_range = vec![
        RecordBuilder::new()
            .with_int64s("ix", [5])
            .with_floats("v", [1.0])
            .encode(),
    ];
    let (p, _, feature) = problem(decode(&[sparse.clone().into()], &out_of_range));
    assert_eq!(
        (p, feature.as_str()),
        (
            FeatureProblem::IndexOutOfRange {
                dim: None,
                index: 5,
                size: 5
            },
            "sp"
        )
    );
    let counts = vec![
        RecordBuilder::new()
            .with_int64s("ix", [1, 2])
            .with_floats("v", [1.0])
            .encode(),
    ];
    let (p, _, _) = problem(decode(&[sparse.into()], &counts));
    assert_eq!(
        p,
        FeatureProblem::IndexCountMismatch {
            dim: None,
            indices: 2,
            values: 1
        }
    );
}

#[test]
fn ragged_features_apply_their_partitions() {
    let records = vec![
        RecordBuilder::new()
            .with_int64s("v", [1, 2, 3, 4, 5, 6])
            .with_int32s("len", [2, 0, 1])
            .encode(),
        RecordBuilder::new()
            .with_int64s("v", [7, 8])
            .with_int64s("len", [1])
            .encode(),
    ];
    let ragged = FeatureSpec::Ragged(RaggedSpec {
        name: "r".into(),
        dtype: DType::Int64,
        value_key: Some("v".into()),
        partitions: vec![
            Partition::RowLengths { key: "len".into() },
            Partition::UniformRowLength { length: 2 },
        ],
        row_splits_dtype: DType::Int32,
        validate: true,
        tf_class: None,
    });
    let batch = decode(&[ragged.into()], &records).unwrap();
    let r = batch.get("r").unwrap().as_ragged().unwrap();
    assert_eq!(
        r.nested_row_splits,
        vec![vec![0, 3, 4], vec![0, 2, 2, 3, 4]]
    );
    assert_eq!(r.flat_values.shape, vec![4, 2]);
}

#[test]
fn fixed_len_sequences_pad_to_the_longest() {
    let records = vec![
        RecordBuilder::new().with_int32s("s", [1, 2, 3, 4]).encode(),
        RecordBuilder::new().encode(),
        RecordBuilder::new().with_int32s("s", [5, 6]).encode(),
    ];
    let seq = spec(
        json!({"name": "s", "kind": "fixed_len_sequence", "dtype": "int32", "shape": [2], "allow_missing": true, "default": -1}),
    );
    let batch = decode(std::slice::from_ref(&seq), &records).unwrap();
    let d = batch.get("s").unwrap().as_dense().unwrap();
    assert_eq!(d.shape, vec![3, 2, 2]);
    assert_eq!(
        d.values,
        Values::Int32(vec![1, 2, 3, 4, -1, -1, -1, -1, 5, 6, -1, -1])
    );
    let odd = vec![RecordBuilder::new().with_int32s("s", [1, 2, 3]).encode()];
    let (p, _, _) = problem(decode(&[seq], &odd));
    assert_eq!(p, FeatureProblem::NotMultiple { item: 2, actual: 3 });
}

#[test]
fn oneflow_raw_decoder_converts_truncates_and_varies() {
    let records = vec![
        RecordBuilder::new()
            .with_doubles("x", [1.9, -1.9, 300.0])
            .encode(),
        RecordBuilder::new().with_doubles("x", [2.5]).encode(),
    ];
    // float -> int truncates toward zero; int8 out of range is undefined.
    let i32s = RawSpec::new("x", [3], RawDType::Int32).with_truncate(true);
    let batch = decode(&[i32s.into()], &records).unwrap();
    assert_eq!(
        batch.get("x").unwrap().as_dense().unwrap().values,
        Values::Int32(vec![1, -1, 300, 2, 0, 0])
    );
    let i8s = RawSpec::new("x", [3], RawDType::Int8).with_truncate(true);
    let (p, record, _) = problem(decode(&[i8s.into()], &records));
    assert_eq!(
        (grist_ofrecord::problem_manifest_kind(&p), record),
        ("overflow_undefined_in_oneflow", 10)
    );

    // Varying length: a ragged column, at most the shape's worth.
    let varying = RawSpec::new("x", [3], RawDType::Float32).with_dim1_varying_length(true);
    let batch = decode(&[varying.clone().into()], &records).unwrap();
    let r = batch.get("x").unwrap().as_ragged().unwrap();
    assert_eq!(r.nested_row_splits, vec![vec![0, 3, 4]]);
    assert_eq!(
        r.flat_values.values,
        Values::Float32(vec![1.9, -1.9, 300.0, 2.5])
    );
    let short = RawSpec::new("x", [2], RawDType::Float32).with_dim1_varying_length(true);
    let (p, _, _) = problem(decode(&[short.into()], &records));
    assert_eq!(p, FeatureProblem::Overrun { max: 2, actual: 3 });
    // Rank 2: rows of the inner dimensions.
    let rows = vec![RecordBuilder::new().with_int64s("m", [1, 2, 3, 4]).encode()];
    let m = RawSpec::new("m", [3, 2], RawDType::Int64).with_dim1_varying_length(true);
    let batch = decode(&[m.into()], &rows).unwrap();
    let r = batch.get("m").unwrap().as_ragged().unwrap();
    assert_eq!(r.nested_row_splits, vec![vec![0, 2]]);
    assert_eq!(r.flat_values.shape, vec![2, 2]);

    // Exact length without truncate or varying; no kind; missing.
    let exact = RawSpec::new("x", [3], RawDType::Float64);
    let (p, record, _) = problem(decode(&[exact.clone().into()], &records));
    assert_eq!(
        (p, record),
        (
            FeatureProblem::WrongCount {
                dim: None,
                expected: 3,
                actual: 1
            },
            11
        )
    );
    let nokind = vec![
        RecordBuilder::new()
            .with_feature("x", &FeatureValue::None)
            .encode(),
    ];
    let (p, _, _) = problem(decode(&[exact.clone().into()], &nokind));
    assert_eq!(
        grist_ofrecord::problem_manifest_kind(&p),
        "unsupported_kind"
    );
    let (p, _, _) = problem(decode(&[exact.into()], &[Vec::new()]));
    assert_eq!(grist_ofrecord::problem_manifest_kind(&p), "feature_missing");
}

#[test]
fn oneflow_bytes_decoders() {
    let records = vec![
        RecordBuilder::new()
            .with_bytes("b", [[0x80u8, 0x7f, 0xff]])
            .encode(),
        RecordBuilder::new().with_bytes("b", [&b""[..]]).encode(),
    ];
    let bytes = Field::Bytes(BytesSpec { name: "b".into() });
    let batch = decode(std::slice::from_ref(&bytes), &records).unwrap();
    let Values::String(s) = &batch.get("b").unwrap().as_dense().unwrap().values else {
        panic!("not strings");
    };
    assert_eq!(
        s.iter().collect::<Vec<_>>(),
        vec![&[0x80u8, 0x7f, 0xff][..], b""]
    );
    // Raw over bytes: signed bytes, zero-filled.
    let raw = RawSpec::new("b", [4], RawDType::Uint8);
    let batch = decode(&[raw.into()], &records).unwrap();
    assert_eq!(
        batch.get("b").unwrap().as_dense().unwrap().values,
        Values::Int32(vec![128, 127, 255, 0, 0, 0, 0, 0])
    );
    let two = vec![
        RecordBuilder::new()
            .with_bytes("b", [&b"a"[..], b"b"])
            .encode(),
    ];
    let (p, _, _) = problem(decode(std::slice::from_ref(&bytes), &two));
    assert_eq!(p, FeatureProblem::BytesValueCount { actual: 2 });
    let ints = vec![RecordBuilder::new().with_int32s("b", [1]).encode()];
    let (p, _, _) = problem(decode(&[bytes], &ints));
    assert_eq!(grist_ofrecord::problem_manifest_kind(&p), "not_bytes_list");
}

#[test]
fn failed_rows_leave_whole_rows_and_the_decoder_reusable() {
    let good = RecordBuilder::new()
        .with_int64s("a", [1])
        .with_floats("v", [1.0])
        .encode();
    let bad = RecordBuilder::new()
        .with_int64s("a", [2])
        .with_floats("v", [1.0, 2.0])
        .encode();
    let fields: Vec<Field> = vec![
        FeatureSpec::varlen("a", DType::Int64).into(),
        FeatureSpec::dense("v", DType::Float32, [1]).into(),
    ];
    let mut decoder = OfRecordDecoder::with_fields(&fields).unwrap();
    let mut out = decoder.new_batch(2);
    let at = grist_ofrecord::Location::record("f", 0);
    decoder.decode(&good, &at, &mut out).unwrap();
    assert!(decoder.decode(&bad, &at, &mut out).is_err());
    assert!(decoder.decode(&[0x0f], &at, &mut out).is_err());
    decoder.decode(&good, &at, &mut out).unwrap();
    let batch = decoder.finish(&mut out, &"f".into(), 0).unwrap();
    let once = decode(&fields, &[good.clone(), good]).unwrap();
    assert_eq!(batch, once);
}

/// Records protobuf would not parse fail as `protobuf` errors wherever the
/// damage is, also in features no output reads.
#[test]
fn damage_in_unread_features_is_still_an_error() {
    let mut record = Record::default();
    record.insert("a", FeatureValue::Int64(vec![1]));
    record.insert("z", FeatureValue::Float(vec![1.0]));
    let mut bytes = record.encode();
    // The float list's packed length 4 -> 3 (and its last byte dropped):
    // every enclosing length shrinks by one.
    let n = bytes.len();
    assert_eq!(&bytes[n - 6..n - 4], &[0x0a, 0x04]);
    bytes[n - 5] = 0x03;
    bytes.truncate(n - 1);
    for i in [n - 7, n - 9, n - 14] {
        bytes[i] -= 1;
    }
    assert!(matches!(
        Record::parse(&bytes),
        Err(Error::Malformed { .. })
    ));
    let fields = [FeatureSpec::dense("a", DType::Int64, [1]).into()];
    match decode(&fields, &[bytes]) {
        Err(e @ Error::Malformed { .. }) => assert_eq!(e.manifest_kind(), "protobuf"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn specs_ofrecord_cannot_honour_are_refused_when_built() {
    let bad = [
        json!({"name": "a", "kind": "dense", "dtype": "int64", "shape": [-1]}),
        json!({"name": "a", "kind": "varlen", "dtype": "int64", "shape": [-1, 2]}),
        json!({"name": "a", "kind": "sparse", "dtype": "int64", "shape": [10]}),
        json!({"name": "a", "kind": "fixed_len_sequence", "dtype": "int64", "shape": [2]}),
        json!({"op": "raw", "name": "a", "shape": [2, 0], "dtype": "int8", "dim1_varying_length": true}),
        json!({"op": "image", "name": "a"}),
    ];
    for v in bad {
        let built = Field::from_json(&v)
            .map_err(Error::from)
            .and_then(|f| OfRecordDecoder::with_fields(&[f]));
        assert!(matches!(built, Err(Error::Spec(_))), "{v}");
    }
    let twice = [
        FeatureSpec::varlen("a", DType::Int64).into(),
        FeatureSpec::varlen("a", DType::Int32).into(),
    ];
    assert!(OfRecordDecoder::with_fields(&twice).is_err());
}
