//! What grist cannot hold is refused, naming the column, before anything
//! is written.

use std::sync::Arc;

use arrow_array::builder::{Int64Builder, ListBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, Date32Array, Decimal128Array, DictionaryArray, Int64Array, RecordBatch, StringArray,
    UInt64Array,
};
use arrow_schema::{DataType, Field, Schema};
use grist::io::{Address, Storage};
use grist_arrow::{Error, FormatWriter, from_record_batch, spec_from_schema};
use grist_tensor::WriteOptions;

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns).unwrap()
}

fn ok_column() -> (&'static str, ArrayRef) {
    ("fine", Arc::new(Int64Array::from(vec![1, 2, 3])))
}

#[test]
fn types_without_a_dtype_name_the_column() {
    let dict: DictionaryArray<Int32Type> = vec!["a", "b", "a"].into_iter().collect();
    let cases: Vec<(&str, ArrayRef)> = vec![
        ("day", Arc::new(Date32Array::from(vec![1, 2, 3]))),
        (
            "price",
            Arc::new(
                Decimal128Array::from(vec![1, 2, 3])
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
            ),
        ),
        ("category", Arc::new(dict)),
        ("big", Arc::new(UInt64Array::from(vec![1, 2, 3]))),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, array) in cases {
        let b = batch(vec![ok_column(), (name, array)]);
        match spec_from_schema(&b.schema()) {
            Err(Error::UnsupportedType { column, .. }) => assert_eq!(column, name),
            other => panic!("{name}: {other:?}"),
        }
        assert!(matches!(
            from_record_batch(b.clone(), None),
            Err(Error::UnsupportedType { column, .. }) if column == name
        ));
        // The writer refuses before the file exists.
        let path = dir.path().join(format!("{name}.tfrecord"));
        let format = grist::registry().get("tfrecord").unwrap();
        let err = FormatWriter::try_new(
            format.as_ref(),
            &Storage::new(),
            &Address::from(path.as_path()),
            &b.schema(),
            None,
            &WriteOptions::new(),
        )
        .unwrap_err();
        assert!(err.to_string().contains(name), "{err}");
        assert!(!path.exists());
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn nulls_name_the_column() {
    let b = batch(vec![
        ok_column(),
        (
            "gaps",
            Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])),
        ),
    ]);
    assert!(matches!(
        from_record_batch(b, None),
        Err(Error::Nulls { column }) if column == "gaps"
    ));
    // A null list that is empty reads as an empty list; a null inside one
    // is refused.
    let mut lists = ListBuilder::new(Int64Builder::new());
    lists.append_value([Some(1), Some(2)]);
    lists.append_null();
    lists.append_value([Some(3)]);
    let b = batch(vec![ok_column(), ("ids", Arc::new(lists.finish()))]);
    let (back, _) = from_record_batch(b, None).unwrap();
    let ids = back.sparse::<i64>("ids").unwrap();
    assert_eq!(ids.values, [1, 2, 3]);
    let mut lists = ListBuilder::new(Int64Builder::new());
    lists.append_value([Some(1), None]);
    let b = batch(vec![("ids", Arc::new(lists.finish()) as ArrayRef)]);
    assert!(matches!(
        from_record_batch(b, None),
        Err(Error::Nulls { column }) if column == "ids"
    ));
}

#[test]
fn a_spec_feature_without_a_column_is_named() {
    let b = batch(vec![ok_column()]);
    let mut spec = spec_from_schema(&b.schema()).unwrap();
    spec.features.push(grist_tensor::FeatureSpec::dense(
        "absent",
        grist_tensor::DType::Int64,
        [],
    ));
    assert!(matches!(
        from_record_batch(b, Some(&spec)),
        Err(Error::Missing { column }) if column == "absent"
    ));
}

#[test]
fn a_dtype_that_would_narrow_is_refused() {
    let schema = Schema::new(vec![Field::new("x", DataType::Utf8, false)]);
    let b = RecordBatch::try_new(
        Arc::new(schema),
        vec![Arc::new(StringArray::from(vec!["a"]))],
    )
    .unwrap();
    let spec = grist_tensor::SpecFile {
        features: vec![grist_tensor::FeatureSpec::dense(
            "x",
            grist_tensor::DType::Int64,
            [],
        )],
        ..Default::default()
    };
    assert!(matches!(
        from_record_batch(b, Some(&spec)),
        Err(Error::DType { column, .. }) if column == "x"
    ));
}

/// An error's message and its causes', as the CLI prints them.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

#[test]
fn what_a_format_cannot_write_is_refused_before_the_file_exists() {
    let b = batch(vec![
        ok_column(),
        (
            "wide",
            Arc::new(arrow_array::Float64Array::from(vec![0.5, 1.5, 2.5])),
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.tfrecord");
    let format = grist::registry().get("tfrecord").unwrap();
    let err = FormatWriter::try_new(
        format.as_ref(),
        &Storage::new(),
        &Address::from(path.as_path()),
        &b.schema(),
        None,
        &WriteOptions::new(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Write { .. }), "{err:?}");
    assert!(chain(&err).contains("wide"), "{}", chain(&err));
    assert!(!path.exists());
}

#[test]
fn a_failure_part_way_leaves_nothing() {
    let good = batch(vec![ok_column()]);
    let bad = batch(vec![(
        "fine",
        Arc::new(Int64Array::from(vec![Some(1), None])) as ArrayRef,
    )]);
    let dir = tempfile::tempdir().unwrap();
    for format in grist::registry().formats() {
        let path = dir.path().join(format.part_name(0, &WriteOptions::new()));
        let result = grist_arrow::write_batches(
            format.as_ref(),
            &Storage::new(),
            &Address::from(path.as_path()),
            &good.schema(),
            None,
            &WriteOptions::new(),
            [Ok(good.clone()), Ok(bad.clone())],
        );
        assert!(
            matches!(result, Err(Error::Nulls { ref column }) if column == "fine"),
            "{}: {result:?}",
            format.name()
        );
        assert!(!path.exists(), "{}", format.name());
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
