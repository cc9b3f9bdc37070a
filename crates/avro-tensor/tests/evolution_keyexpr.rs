//! Reader schemas on the key-expression path: features named by key
//! expressions read the reader's fields (renamed, promoted, enum symbols
//! mapped, reader-only fields from their defaults, writer-only fields
//! skipped), judged by apache-avro's own reader-schema resolution, on
//! grist-testkit's flat `evolution` dataset and on a nested schema of
//! records, arrays, maps and unions written here.

use std::path::{Path, PathBuf};

use apache_avro::types::{Record, Value as Avro};
use apache_avro::{Codec, Reader, Schema, Writer};
use grist_avro_tensor::{AvroDecoder, BlockReader, Error, ReaderOptions, ReaderSchema};
use grist_tensor::{Batch, FeatureSpec, Tensor, Values};
use grist_testkit::evolution::{READER_SCHEMA, reference_records, to_json, write_dataset};
use serde_json::{Value, json};

fn specs(v: Value) -> Vec<FeatureSpec> {
    serde_json::from_value(v).unwrap()
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

fn values(v: &Values) -> Vec<Value> {
    match v {
        Values::Int32(v) => v.iter().map(|x| json!(x)).collect(),
        Values::Int64(v) => v.iter().map(|x| json!(x)).collect(),
        Values::Float32(v) => v.iter().map(|&x| json!(f64::from(x))).collect(),
        Values::Float64(v) => v.iter().map(|x| json!(x)).collect(),
        Values::String(v) => v
            .iter()
            .map(|s| json!(String::from_utf8_lossy(s)))
            .collect(),
        other => panic!("unexpected {other:?}"),
    }
}

/// The column `name` of `batch`, one JSON value per row: a scalar for a
/// dense feature of shape `[]`, a list for a rank-1 varlen one.
fn column(batch: &Batch, name: &str) -> Vec<Value> {
    let c = batch
        .columns()
        .iter()
        .find(|c| &*c.name == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    match &c.tensor {
        Tensor::Dense(d) => values(&d.values),
        Tensor::Sparse(s) => {
            let mut rows = vec![json!([]); batch.rows()];
            for (tuple, v) in s.index_tuples().zip(values(&s.values)) {
                let list = rows[tuple[0] as usize].as_array_mut().unwrap();
                assert_eq!(tuple[1] as usize, list.len(), "{name}: indices in order");
                list.push(v);
            }
            rows
        }
        other => panic!("{name}: unexpected {other:?}"),
    }
}

#[track_caller]
fn assert_column(batch: &Batch, name: &str, expected: &[Value]) {
    let got = column(batch, name);
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(g, e, "{name}, row {i}");
    }
    assert_eq!(got.len(), expected.len(), "{name}");
}

#[test]
fn key_expressions_read_the_evolution_dataset_as_apache_avro_resolves_it() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_dataset(dir.path());
    // `tags[*]` is a key expression: the whole spec takes the general path.
    let specs = specs(json!([
        {"name": "id", "kind": "dense", "dtype": "int64", "shape": []},
        {"name": "score", "kind": "dense", "dtype": "float64", "shape": []},
        {"name": "kind", "kind": "dense", "dtype": "string", "shape": []},
        {"name": "name", "kind": "dense", "dtype": "string", "shape": []},
        {"name": "tags[*]", "kind": "varlen", "dtype": "int64", "shape": [-1]},
        {"name": "weight", "kind": "dense", "dtype": "float32", "shape": []},
        {"name": "maybe", "kind": "dense", "dtype": "float64", "shape": [], "default": -1.0}
    ]));
    let decoder = AvroDecoder::new(&specs)
        .unwrap()
        .with_reader_schema(ReaderSchema::parse(READER_SCHEMA).unwrap());
    let batch = decode_all(decoder, &files).unwrap();
    let reference: Vec<Value> = files.iter().flat_map(|f| reference_records(f)).collect();
    for (column, field) in [
        ("id", "id"),
        ("score", "score"),
        ("kind", "kind"),
        ("name", "name"),
        ("tags[*]", "tags"),
        ("weight", "weight"),
    ] {
        let expected: Vec<Value> = reference.iter().map(|r| r[field].clone()).collect();
        assert_column(&batch, column, &expected);
    }
    let maybe: Vec<Value> = reference
        .iter()
        .map(|r| match &r["maybe"] {
            Value::Null => json!(-1.0),
            v => v.clone(),
        })
        .collect();
    assert_column(&batch, "maybe", &maybe);

    // A path names the reader's fields: the writer's `legacy` (dropped by
    // the reader) and `old_name` (renamed) are no features.
    for gone in ["legacy", "old_name"] {
        let specs = self::specs(json!([
            {"name": gone, "kind": "dense", "dtype": "string", "shape": []},
            {"name": "tags[*]", "kind": "varlen", "dtype": "int64", "shape": [-1]}
        ]));
        let decoder = AvroDecoder::new(&specs)
            .unwrap()
            .with_reader_schema(ReaderSchema::parse(READER_SCHEMA).unwrap());
        let err = decode_all(decoder, &files[..1]).unwrap_err();
        assert!(
            matches!(&err, Error::Schema { feature, .. } if feature == gone),
            "{err}"
        );
    }
}

const NESTED_WRITER: &str = r#"{"type": "record", "name": "R", "fields": [
  {"name": "id", "type": "int"},
  {"name": "user", "type": {"type": "record", "name": "U", "fields": [
    {"name": "name", "type": "string"},
    {"name": "extra", "type": "long"},
    {"name": "scores", "type": {"type": "array", "items": "float"}}]}},
  {"name": "attrs", "type": {"type": "map", "values": "int"}},
  {"name": "events", "type": {"type": "array", "items": {"type": "record", "name": "E",
    "fields": [
      {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
      {"name": "junk", "type": "string"},
      {"name": "v", "type": "int"}]}}},
  {"name": "opt", "type": ["null", {"type": "record", "name": "P",
    "fields": [{"name": "x", "type": "int"}]}]}
]}"#;

const NESTED_READER: &str = r#"{"type": "record", "name": "R", "fields": [
  {"name": "opt", "type": ["null", {"type": "record", "name": "P",
    "fields": [{"name": "x", "type": "long"}]}], "default": null},
  {"name": "id", "type": "long"},
  {"name": "user", "type": {"type": "record", "name": "U", "fields": [
    {"name": "scores", "type": {"type": "array", "items": "double"}},
    {"name": "level", "type": "int", "default": 7},
    {"name": "name", "type": "string"}]}},
  {"name": "attrs", "type": {"type": "map", "values": "long"}},
  {"name": "events", "type": {"type": "array", "items": {"type": "record", "name": "E",
    "fields": [
      {"name": "v", "type": "double"},
      {"name": "w", "type": "long", "default": 3},
      {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["C", "B", "A"]}}]}}},
  {"name": "meta", "type": {"type": "record", "name": "M", "fields": [
    {"name": "a", "type": "int"},
    {"name": "tags", "type": {"type": "array", "items": "string"}}]},
    "default": {"a": 4, "tags": ["x", "y"]}}
]}"#;

const NESTED_RECORDS: usize = 60;

fn write_nested(dir: &Path) -> PathBuf {
    let schema = Schema::parse_str(NESTED_WRITER).unwrap();
    let Schema::Record(rs) = &schema else {
        unreachable!()
    };
    let field = |name: &str| {
        rs.fields
            .iter()
            .find(|f| f.name == name)
            .unwrap()
            .schema
            .clone()
    };
    let (user, opt) = (field("user"), field("opt"));
    let Schema::Array(events) = field("events") else {
        unreachable!()
    };
    let Schema::Union(u) = &opt else {
        unreachable!()
    };
    let p = u.variants()[1].clone();
    let mut w = Writer::builder()
        .schema(&schema)
        .writer(Vec::new())
        .codec(Codec::Null)
        .block_size(500)
        .build();
    for i in 0..NESTED_RECORDS {
        let i64_ = i as i64;
        let mut r = Record::new(&schema).unwrap();
        r.put("id", Avro::Int(i as i32));
        let mut ur = Record::new(&user).unwrap();
        ur.put("name", Avro::String(format!("user {i}")));
        ur.put("extra", Avro::Long(-i64_));
        let scores = (0..i % 3).map(|k| Avro::Float(k as f32 + 0.5)).collect();
        ur.put("scores", Avro::Array(scores));
        r.put("user", ur);
        let mut attrs = std::collections::HashMap::new();
        attrs.insert("k1".to_string(), Avro::Int(i as i32 * 2));
        if i % 2 == 0 {
            attrs.insert("k2".to_string(), Avro::Int(-1));
        }
        r.put("attrs", Avro::Map(attrs));
        let evs = (0..i % 4)
            .map(|k| {
                let mut e = Record::new(&events.items).unwrap();
                let kind = (i + k) % 2;
                e.put("kind", Avro::Enum(kind as u32, ["A", "B"][kind].into()));
                e.put("junk", Avro::String("j".repeat(k)));
                e.put("v", Avro::Int((i * 10 + k) as i32));
                e.into()
            })
            .collect();
        r.put("events", Avro::Array(evs));
        let opt = match i % 3 {
            0 => Avro::Union(0, Box::new(Avro::Null)),
            _ => {
                let mut pr = Record::new(&p).unwrap();
                pr.put("x", Avro::Int(i as i32 + 100));
                Avro::Union(1, Box::new(pr.into()))
            }
        };
        r.put("opt", opt);
        w.append(r).unwrap();
    }
    let path = dir.join("nested.avro");
    std::fs::write(&path, w.into_inner().unwrap()).unwrap();
    path
}

#[test]
fn nested_key_expressions_read_through_a_reader_schema_as_apache_avro_resolves_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_nested(dir.path());
    let reader = Schema::parse_str(NESTED_READER).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let reference: Vec<Value> = Reader::with_schema(&reader, &bytes[..])
        .unwrap()
        .map(|v| to_json(&v.unwrap()))
        .collect();
    assert_eq!(reference.len(), NESTED_RECORDS);

    let specs = specs(json!([
        {"name": "id", "kind": "dense", "dtype": "int64", "shape": []},
        {"name": "user.name", "kind": "dense", "dtype": "string", "shape": []},
        {"name": "user.level", "kind": "dense", "dtype": "int32", "shape": []},
        {"name": "user.scores[*]", "kind": "varlen", "dtype": "float64", "shape": [-1]},
        {"name": "attrs['k1']", "kind": "dense", "dtype": "int64", "shape": []},
        {"name": "events[*].v", "kind": "varlen", "dtype": "float64", "shape": [-1]},
        {"name": "events[*].w", "kind": "varlen", "dtype": "int64", "shape": [-1]},
        {"name": "events[*].kind", "kind": "varlen", "dtype": "string", "shape": [-1]},
        {"name": "events[kind='B'].v", "kind": "varlen", "dtype": "float64", "shape": [-1]},
        {"name": "meta.a", "kind": "dense", "dtype": "int32", "shape": []},
        {"name": "meta.tags[*]", "kind": "varlen", "dtype": "string", "shape": [-1]},
        {"name": "opt.x", "kind": "dense", "dtype": "int64", "shape": [], "default": -1}
    ]));
    let decoder = AvroDecoder::new(&specs)
        .unwrap()
        .with_reader_schema(ReaderSchema::parse(NESTED_READER).unwrap());
    let batch = decode_all(decoder, std::slice::from_ref(&path)).unwrap();

    let each = |f: &dyn Fn(&Value) -> Value| reference.iter().map(f).collect::<Vec<_>>();
    let events = |r: &Value, f: &dyn Fn(&Value) -> Option<Value>| {
        Value::Array(
            r["events"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(f)
                .collect(),
        )
    };
    assert_column(&batch, "id", &each(&|r| r["id"].clone()));
    assert_column(&batch, "user.name", &each(&|r| r["user"]["name"].clone()));
    assert_column(&batch, "user.level", &each(&|r| r["user"]["level"].clone()));
    assert_column(
        &batch,
        "user.scores[*]",
        &each(&|r| r["user"]["scores"].clone()),
    );
    assert_column(&batch, "attrs['k1']", &each(&|r| r["attrs"]["k1"].clone()));
    assert_column(
        &batch,
        "events[*].v",
        &each(&|r| events(r, &|e| Some(e["v"].clone()))),
    );
    assert_column(
        &batch,
        "events[*].w",
        &each(&|r| events(r, &|e| Some(e["w"].clone()))),
    );
    assert_column(
        &batch,
        "events[*].kind",
        &each(&|r| events(r, &|e| Some(e["kind"].clone()))),
    );
    assert_column(
        &batch,
        "events[kind='B'].v",
        &each(&|r| events(r, &|e| (e["kind"] == "B").then(|| e["v"].clone()))),
    );
    assert_column(&batch, "meta.a", &each(&|r| r["meta"]["a"].clone()));
    assert_column(
        &batch,
        "meta.tags[*]",
        &each(&|r| r["meta"]["tags"].clone()),
    );
    assert_column(
        &batch,
        "opt.x",
        &each(&|r| match &r["opt"] {
            Value::Null => json!(-1),
            o => o["x"].clone(),
        }),
    );

    // The writer's `user.extra` and `events[*].junk` are not in the reader
    // schema: a plan-time error naming the feature.
    for gone in ["user.extra", "events[*].junk"] {
        let specs = self::specs(json!([
            {"name": gone, "kind": "varlen", "dtype": "int64", "shape": [-1]}
        ]));
        let decoder = AvroDecoder::new(&specs)
            .unwrap()
            .with_reader_schema(ReaderSchema::parse(NESTED_READER).unwrap());
        let err = decode_all(decoder, std::slice::from_ref(&path)).unwrap_err();
        assert!(
            matches!(&err, Error::Schema { feature, reason, .. }
                if feature == gone && reason.contains("reader schema")),
            "{err}"
        );
    }
}

#[test]
fn a_writer_branch_the_reader_cannot_take_fails_naming_record_and_feature() {
    let writer = r#"{"type": "record", "name": "S", "fields": [
      {"name": "u", "type": ["null", "int", "string"]},
      {"name": "a", "type": {"type": "array", "items": "int"}}]}"#;
    let reader = r#"{"type": "record", "name": "S", "fields": [
      {"name": "u", "type": ["null", "long"]},
      {"name": "a", "type": {"type": "array", "items": "long"}}]}"#;
    let schema = Schema::parse_str(writer).unwrap();
    let mut w = Writer::new(&schema, Vec::new());
    for u in [
        Avro::Union(1, Box::new(Avro::Int(5))),
        Avro::Union(0, Box::new(Avro::Null)),
        Avro::Union(2, Box::new(Avro::String("x".into()))),
    ] {
        let mut r = Record::new(&schema).unwrap();
        r.put("u", u);
        r.put("a", Avro::Array(vec![Avro::Int(1)]));
        w.append(r).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.avro");
    std::fs::write(&path, w.into_inner().unwrap()).unwrap();
    let specs = specs(json!([
        {"name": "u", "kind": "dense", "dtype": "int64", "shape": [], "default": 0},
        {"name": "a[*]", "kind": "varlen", "dtype": "int64", "shape": [-1]}
    ]));
    let decoder = AvroDecoder::new(&specs)
        .unwrap()
        .with_reader_schema(ReaderSchema::parse(reader).unwrap());
    let err = decode_all(decoder, std::slice::from_ref(&path)).unwrap_err();
    let Error::Datum { at, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(at.file.as_ref(), path.to_str().unwrap(), "{err}");
    assert_eq!((at.block, at.record), (Some(0), Some(2)), "{err}");
    assert_eq!(at.feature.as_deref(), Some("u"), "{err}");
}
