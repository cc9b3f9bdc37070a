//! Reader schemas (Avro schema resolution): a dataset of three files
//! written with three schema versions (grist-testkit's `evolution`) reads
//! through one reader schema, record by record ([`DatumReader`]), into
//! batches ([`AvroDecoder`]) and through the loader (ordered and
//! shuffled), each judged by apache-avro's own reader-schema resolution;
//! and every pairing the specification forbids fails when the plan is
//! compiled, naming the file and the field.

use std::path::PathBuf;
use std::sync::Arc;

use grist_avro_tensor::{
    AvroDecoder, AvroFormat, BlockReader, DatumReader, Error, ReaderOptions, ReaderSchema,
    datum_to_json,
};
use grist_loader::{LoaderBuilder, Threads};
use grist_tensor::{Batch, FeatureSpec, SpecFile, Tensor, Values};
use grist_testkit::evolution::{READER_SCHEMA, RECORDS, reference_records, write_dataset};
use serde_json::{Value, json};

/// The value a null `maybe` takes (the spec's default).
const MAYBE_DEFAULT: f64 = -1.0;

fn specs() -> Vec<FeatureSpec> {
    serde_json::from_value(json!([
        {"name": "id", "kind": "dense", "dtype": "int64", "shape": []},
        {"name": "score", "kind": "dense", "dtype": "float64", "shape": []},
        {"name": "kind", "kind": "dense", "dtype": "string", "shape": []},
        {"name": "name", "kind": "dense", "dtype": "string", "shape": []},
        {"name": "tags", "kind": "varlen", "dtype": "int64", "shape": [-1]},
        {"name": "weight", "kind": "dense", "dtype": "float32", "shape": []},
        {"name": "maybe", "kind": "dense", "dtype": "float64", "shape": [], "default": MAYBE_DEFAULT}
    ]))
    .unwrap()
}

fn dataset() -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let files = write_dataset(dir.path());
    (dir, files)
}

/// apache-avro's records of every file, as the specs read them (a null
/// `maybe` as the spec's default).
fn expected_rows(files: &[PathBuf]) -> Vec<Value> {
    files
        .iter()
        .flat_map(|f| reference_records(f))
        .map(|mut r| {
            if r["maybe"].is_null() {
                r["maybe"] = json!(MAYBE_DEFAULT);
            }
            r
        })
        .collect()
}

/// The rows of a batch of [`specs`], as JSON objects of the reference's
/// form.
fn batch_rows(batch: &Batch) -> Vec<Value> {
    let mut rows = vec![serde_json::Map::new(); batch.rows()];
    for column in batch.columns() {
        let name = column.name.clone();
        match &column.tensor {
            Tensor::Dense(d) => {
                let values: Vec<Value> = match &d.values {
                    Values::Int64(v) => v.iter().map(|x| json!(x)).collect(),
                    Values::Float32(v) => v.iter().map(|&x| json!(f64::from(x))).collect(),
                    Values::Float64(v) => v.iter().map(|x| json!(x)).collect(),
                    Values::String(v) => v
                        .iter()
                        .map(|s| json!(String::from_utf8_lossy(s)))
                        .collect(),
                    other => panic!("{name}: unexpected {other:?}"),
                };
                assert_eq!(values.len(), rows.len(), "{name}");
                for (row, v) in rows.iter_mut().zip(values) {
                    row.insert(name.clone(), v);
                }
            }
            Tensor::Sparse(s) => {
                let Values::Int64(values) = &s.values else {
                    panic!("{name}: unexpected {:?}", s.values)
                };
                for row in rows.iter_mut() {
                    row.insert(name.clone(), json!([]));
                }
                for (tuple, v) in s.index_tuples().zip(values) {
                    let list = rows[tuple[0] as usize][&name].as_array_mut().unwrap();
                    assert_eq!(tuple[1] as usize, list.len(), "{name}: indices in order");
                    list.push(json!(v));
                }
            }
            other => panic!("{name}: unexpected {other:?}"),
        }
    }
    rows.into_iter().map(Value::Object).collect()
}

/// Asserts `got == expected`, row by row, showing the first that differs.
#[track_caller]
fn assert_rows(got: &[Value], expected: &[Value]) {
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(g, e, "row {i}");
    }
    assert_eq!(got.len(), expected.len());
}

fn reader_schema() -> ReaderSchema {
    ReaderSchema::parse(READER_SCHEMA).unwrap()
}

/// Every block of `files` decoded by `decoder` into one batch.
fn decode_all(mut decoder: AvroDecoder, files: &[PathBuf]) -> Result<Batch, Error> {
    let mut out = decoder.new_batch(0);
    for path in files {
        let mut reader = BlockReader::open(path, ReaderOptions::default())?;
        let name = reader.name().clone();
        decoder.add_schema(name.clone(), &reader.header().schema_json)?;
        while let Some(block) = reader.next_block()? {
            let n = block.record_count as usize;
            decoder.decode_block(
                &name,
                block.index,
                block.first_record,
                &block.data,
                n,
                0..n,
                &mut out,
            )?;
        }
    }
    decoder.finish(&mut out)
}

#[test]
fn records_read_through_the_reader_schema_as_apache_avro_resolves_them() {
    let (_dir, files) = dataset();
    let reader = reader_schema();
    for path in &files {
        let expected = reference_records(path);
        assert_eq!(expected.len(), RECORDS);
        let mut datums = DatumReader::open(path, ReaderOptions::default())
            .unwrap()
            .with_reader_schema(&reader)
            .unwrap();
        let schema = datums.schema().clone();
        let mut got = Vec::new();
        while let Some(d) = datums.next_datum().unwrap() {
            got.push(datum_to_json(&schema, d.data, &d.location()).unwrap());
        }
        assert_rows(&got, &expected);
    }
}

#[test]
fn batches_read_through_the_reader_schema_as_apache_avro_resolves_them() {
    let (_dir, files) = dataset();
    let decoder = AvroDecoder::new(&specs())
        .unwrap()
        .with_reader_schema(reader_schema());
    let batch = decode_all(decoder, &files).unwrap();
    assert_rows(&batch_rows(&batch), &expected_rows(&files));
    // The specs name the reader's fields: a writer field the reader lacks
    // is no feature.
    let legacy: Vec<FeatureSpec> = serde_json::from_value(
        json!([{"name": "legacy", "kind": "dense", "dtype": "int64", "shape": []}]),
    )
    .unwrap();
    let decoder = AvroDecoder::new(&legacy)
        .unwrap()
        .with_reader_schema(reader_schema());
    let err = decode_all(decoder, &files[..1]).unwrap_err();
    assert!(
        matches!(&err, Error::Schema { feature, .. } if feature == "legacy")
            && err
                .to_string()
                .contains("the reader schema has no such field"),
        "{err}"
    );
    // Without the reader schema, the versions do not read as one.
    let err = decode_all(AvroDecoder::new(&specs()).unwrap(), &files).unwrap_err();
    assert!(matches!(err, Error::Schema { .. }), "{err}");
}

#[test]
fn the_writer_schema_as_reader_schema_reads_as_no_reader_schema() {
    let (_dir, files) = dataset();
    let v3 = &files[2..];
    let specs: Vec<FeatureSpec> = specs().into_iter().collect();
    let writer = BlockReader::open(&v3[0], ReaderOptions::default())
        .unwrap()
        .header()
        .schema_json
        .clone();
    let same = AvroDecoder::new(&specs)
        .unwrap()
        .with_reader_schema(ReaderSchema::parse(&writer).unwrap());
    assert_eq!(
        decode_all(same, v3).unwrap(),
        decode_all(AvroDecoder::new(&specs).unwrap(), v3).unwrap()
    );
}

fn loader(files: &[PathBuf], shuffle: bool) -> LoaderBuilder {
    let spec = SpecFile {
        features: specs(),
        reader_schema: Some(serde_json::from_str(READER_SCHEMA).unwrap()),
        ..SpecFile::default()
    };
    LoaderBuilder::new()
        .with_paths(files.iter().cloned())
        .with_format(Arc::new(AvroFormat))
        .with_spec_file(spec)
        .with_batch_size(64)
        .with_threads(Threads::Fixed(2))
        .with_shuffle(shuffle)
        .with_shuffle_buffer(100)
        .with_seed(7)
}

fn load(builder: LoaderBuilder) -> Vec<Value> {
    let mut rows = Vec::new();
    for batch in builder.build().unwrap() {
        rows.extend(batch_rows(&batch.unwrap()));
    }
    rows
}

#[test]
fn the_loader_reads_the_versions_through_the_spec_files_reader_schema() {
    let (_dir, files) = dataset();
    let expected = expected_rows(&files);
    assert_rows(&load(loader(&files, false)), &expected);
    // Shuffled: the same records, in another order.
    let mut shuffled = load(loader(&files, true));
    assert_ne!(shuffled, expected);
    let key = |r: &Value| r["id"].as_i64();
    shuffled.sort_by_key(key);
    let mut sorted = expected.clone();
    sorted.sort_by_key(key);
    assert_rows(&shuffled, &sorted);
    // The builder's reader schema replaces the spec file's.
    let mut wrong: Value = serde_json::from_str(READER_SCHEMA).unwrap();
    wrong["fields"][0]["type"] = json!("int");
    let loader = loader(&files, false)
        .with_reader_schema(wrong)
        .build()
        .unwrap();
    let err = loader.into_iter().find_map(|b| b.err()).expect("an error");
    let text = grist_testkit::chain(&err);
    assert!(text.contains("v2.avro") && text.contains("id"), "{text}");
}

/// The error of registering `writer` (a record of `fields`, as the file
/// `old.avro`) with a decoder of `specs` reading through a record of
/// `reader_fields`.
fn plan_error(fields: &str, reader_fields: &str, specs: Value) -> Error {
    let record = |f: &str| format!(r#"{{"type": "record", "name": "R", "fields": [{f}]}}"#);
    let specs: Vec<FeatureSpec> = serde_json::from_value(specs).unwrap();
    let mut decoder = AvroDecoder::new(&specs)
        .unwrap()
        .with_reader_schema(ReaderSchema::parse(&record(reader_fields)).unwrap());
    decoder.add_schema("old.avro", &record(fields)).unwrap_err()
}

fn assert_resolution(err: Error, field: &str, says: &str) {
    let text = err.to_string();
    match &err {
        Error::Resolution {
            file,
            field: f,
            reason,
        } => {
            assert_eq!(&**file, "old.avro");
            assert_eq!(f, field, "{text}");
            assert!(reason.contains(says), "{text}");
        }
        other => panic!("expected a resolution error, got {other}"),
    }
    assert!(text.contains("old.avro") && text.contains(field), "{text}");
}

#[test]
fn forbidden_resolutions_fail_at_plan_time_naming_file_and_field() {
    let id = json!([{"name": "id", "kind": "dense", "dtype": "int64", "shape": []}]);
    // A reader field without a default that the writer lacks.
    assert_resolution(
        plan_error(
            r#"{"name": "id", "type": "long"}"#,
            r#"{"name": "id", "type": "long"}, {"name": "extra", "type": "string"}"#,
            id.clone(),
        ),
        "extra",
        "no default",
    );
    // Types that do not promote, at any depth.
    assert_resolution(
        plan_error(
            r#"{"name": "id", "type": "double"}"#,
            r#"{"name": "id", "type": "long"}"#,
            id.clone(),
        ),
        "id",
        "cannot be read as",
    );
    assert_resolution(
        plan_error(
            r#"{"name": "id", "type": "long"}, {"name": "p", "type": {"type": "record", "name": "P",
                "fields": [{"name": "xs", "type": {"type": "array", "items": "string"}}]}}"#,
            r#"{"name": "id", "type": "long"}, {"name": "p", "type": {"type": "record", "name": "P",
                "fields": [{"name": "xs", "type": {"type": "array", "items": "int"}}]}}"#,
            id.clone(),
        ),
        "p.xs[*]",
        "cannot be read as",
    );
    // A union with no branch to match.
    assert_resolution(
        plan_error(
            r#"{"name": "id", "type": "string"}"#,
            r#"{"name": "id", "type": ["null", "long"]}"#,
            id.clone(),
        ),
        "id",
        "no branch",
    );
    assert_resolution(
        plan_error(
            r#"{"name": "id", "type": ["null", "boolean"]}"#,
            r#"{"name": "id", "type": "long"}"#,
            id.clone(),
        ),
        "id",
        "no branch",
    );
    // A default that does not fit its type: apache-avro refuses the
    // reader schema itself.
    assert!(matches!(
        ReaderSchema::parse(
            r#"{"type": "record", "name": "R", "fields": [{"name": "n", "type": "int", "default": "x"}]}"#
        ),
        Err(Error::BadReaderSchema { .. })
    ));
    // A reader default of null for a dense feature without a default.
    assert_resolution(
        plan_error(
            r#"{"name": "x", "type": "long"}"#,
            r#"{"name": "x", "type": "long"}, {"name": "id", "type": ["null", "long"], "default": null}"#,
            id,
        ),
        "id",
        "default",
    );
}

/// Decodes datums written by `writer` (one datum per record) through a
/// record of `reader_fields`, with the ATDS decoder (the feature `v`, a
/// string) and generically; returns both outcomes.
fn read_one(
    writer_fields: &str,
    reader_fields: &str,
    datum: &[u8],
) -> (Result<Batch, Error>, Result<Value, Error>) {
    let record = |f: &str| format!(r#"{{"type": "record", "name": "R", "fields": [{f}]}}"#);
    let reader = ReaderSchema::parse(&record(reader_fields)).unwrap();
    let specs: Vec<FeatureSpec> = serde_json::from_value(
        json!([{"name": "v", "kind": "dense", "dtype": "string", "shape": []}]),
    )
    .unwrap();
    let mut decoder = AvroDecoder::new(&specs)
        .unwrap()
        .with_reader_schema(reader.clone());
    let file: Arc<str> = "old.avro".into();
    let batch = (|| {
        decoder.add_schema(file.clone(), &record(writer_fields))?;
        let mut out = decoder.new_batch(1);
        decoder.decode_block(&file, 0, 0, datum, 1, 0..1, &mut out)?;
        decoder.finish(&mut out)
    })();
    let generic =
        grist_avro_tensor::DatumSchema::resolve("old.avro", &record(writer_fields), &reader)
            .and_then(|s| {
                datum_to_json(
                    &s,
                    datum,
                    &grist_avro_tensor::Location::block("old.avro", 0).with_record(0),
                )
            });
    (batch, generic)
}

#[test]
fn values_the_reader_cannot_take_fail_when_met() {
    let writer = r#"{"name": "v", "type": {"type": "enum", "name": "E", "symbols": ["a", "b"]}}"#;
    let reader = r#"{"name": "v", "type": {"type": "enum", "name": "E", "symbols": ["b"]}}"#;
    // Symbol b (index 1) reads; symbol a has no reader symbol nor default.
    let (batch, json) = read_one(writer, reader, &[2]);
    assert_eq!(json.unwrap(), json!({"v": "b"}));
    assert_eq!(batch_strings(&batch.unwrap()), ["b"]);
    let (batch, json) = read_one(writer, reader, &[0]);
    for err in [batch.unwrap_err(), json.unwrap_err()] {
        assert!(matches!(err, Error::Datum { .. }), "{err}");
        assert!(err.to_string().contains("no default"), "{err}");
    }
    // The writer's [null, string] read as string: a null fails when met.
    let (batch, json) = read_one(
        r#"{"name": "v", "type": ["null", "string"]}"#,
        r#"{"name": "v", "type": "string"}"#,
        &[2, 2, b'x'],
    );
    assert_eq!(json.unwrap(), json!({"v": "x"}));
    assert_eq!(batch_strings(&batch.unwrap()), ["x"]);
    let (batch, json) = read_one(
        r#"{"name": "v", "type": ["null", "string"]}"#,
        r#"{"name": "v", "type": "string"}"#,
        &[0],
    );
    for err in [batch.unwrap_err(), json.unwrap_err()] {
        assert!(matches!(err, Error::Datum { .. }), "{err}");
    }
    // bytes read as string.
    let (batch, json) = read_one(
        r#"{"name": "v", "type": "bytes"}"#,
        r#"{"name": "v", "type": "string"}"#,
        &[2, b'y'],
    );
    assert_eq!(json.unwrap(), json!({"v": "y"}));
    assert_eq!(batch_strings(&batch.unwrap()), ["y"]);
}

fn batch_strings(batch: &Batch) -> Vec<String> {
    match batch.get("v") {
        Some(Tensor::Dense(d)) => match &d.values {
            Values::String(s) => s
                .iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_bad_reader_schema_is_refused() {
    assert!(matches!(
        ReaderSchema::parse("{"),
        Err(Error::BadReaderSchema { .. })
    ));
    assert!(matches!(
        ReaderSchema::parse(
            r#"{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]}"#
        ),
        Err(Error::BadReaderSchema { .. })
    ));
    // A spec file's string of JSON is the schema it holds.
    let text = json!(READER_SCHEMA);
    assert_eq!(
        ReaderSchema::from_value(&text).unwrap().json()["name"],
        "Event"
    );
}

/// Datums written by apache-avro with `writer`, read through `reader` by
/// grist's generic decoder and by apache-avro's `from_avro_datum`.
fn differential(writer: &str, reader: &str, values: Vec<apache_avro::types::Value>) {
    let w = apache_avro::Schema::parse_str(writer).unwrap();
    let r = apache_avro::Schema::parse_str(reader).unwrap();
    let schema = grist_avro_tensor::DatumSchema::resolve(
        "d.avro",
        writer,
        &ReaderSchema::parse(reader).unwrap(),
    )
    .unwrap();
    for (i, value) in values.into_iter().enumerate() {
        let datum = apache_avro::to_avro_datum(&w, value).unwrap();
        let want = apache_avro::from_avro_datum(&w, &mut &datum[..], Some(&r)).unwrap();
        let at = grist_avro_tensor::Location::block("d.avro", 0).with_record(i as u64);
        let got = datum_to_json(&schema, &datum, &at).unwrap();
        assert_eq!(got, grist_testkit::evolution::to_json(&want), "value {i}");
    }
}

#[test]
fn nested_recursive_and_map_values_resolve_as_apache_avro_resolves_them() {
    use apache_avro::types::Value as V;
    // A recursive list whose reader adds a field and promotes another.
    let node = |v: i32, next: Option<V>| {
        V::Record(vec![
            ("v".into(), V::Int(v)),
            (
                "next".into(),
                match next {
                    None => V::Union(0, Box::new(V::Null)),
                    Some(n) => V::Union(1, Box::new(n)),
                },
            ),
        ])
    };
    differential(
        r#"{"type": "record", "name": "Node", "fields": [
            {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}"#,
        r#"{"type": "record", "name": "Node", "fields": [
            {"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]},
            {"name": "w", "type": "string", "default": "d"}]}"#,
        vec![node(1, None), node(1, Some(node(2, Some(node(3, None)))))],
    );
    // Maps and arrays of records, promoted and evolved inside.
    let inner = |a: i32| {
        V::Record(vec![
            ("a".into(), V::Int(a)),
            ("gone".into(), V::String(format!("g{a}"))),
        ])
    };
    let outer = |n: i32| {
        V::Record(vec![
            (
                "m".into(),
                V::Map((0..n).map(|k| (format!("k{k}"), V::Int(k * 7))).collect()),
            ),
            ("xs".into(), V::Array((0..n).map(inner).collect())),
            ("f".into(), V::Float(n as f32 + 0.5)),
        ])
    };
    differential(
        r#"{"type": "record", "name": "O", "fields": [
            {"name": "m", "type": {"type": "map", "values": "int"}},
            {"name": "xs", "type": {"type": "array", "items": {"type": "record", "name": "I",
                "fields": [{"name": "a", "type": "int"}, {"name": "gone", "type": "string"}]}}},
            {"name": "f", "type": "float"}]}"#,
        r#"{"type": "record", "name": "O", "fields": [
            {"name": "f", "type": ["null", "string", "double"]},
            {"name": "xs", "type": {"type": "array", "items": {"type": "record", "name": "I",
                "fields": [{"name": "added", "type": ["null", "int"], "default": null},
                           {"name": "a", "type": "long"}]}}},
            {"name": "m", "type": {"type": "map", "values": "double"}}]}"#,
        (0..4).map(outer).collect(),
    );
}

#[test]
fn cut_files_read_through_the_reader_schema_fail_cleanly() {
    let (dir, files) = dataset();
    let reader = reader_schema();
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        for cut in (0..bytes.len()).step_by(23) {
            let cut_path = dir.path().join("cut.avro");
            std::fs::write(&cut_path, &bytes[..cut]).unwrap();
            // Either path may fail; neither may panic.
            let files = [cut_path.clone()];
            let decoder = AvroDecoder::new(&specs())
                .unwrap()
                .with_reader_schema(reader.clone());
            let _ = decode_all(decoder, &files);
            if let Ok(datums) = DatumReader::open(&cut_path, ReaderOptions::default()) {
                if let Ok(mut datums) = datums.with_reader_schema(&reader) {
                    let schema = datums.schema().clone();
                    while let Ok(Some(d)) = datums.next_datum() {
                        let _ = datum_to_json(&schema, d.data, &d.location());
                    }
                }
            }
        }
    }
}
