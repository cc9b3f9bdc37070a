//! A dataset of one record type written with three schema versions, and
//! the reader schema all three read through (Avro schema resolution), with
//! apache-avro's own reader-schema resolution as the reference for what
//! each record reads as.
//!
//! The versions differ the ways datasets drift: a field added with a
//! default (`weight`, absent from version 1; `maybe`, a nullable union
//! only version 3 writes), a field removed (`legacy`, in version 1 only),
//! a field renamed (`old_name` → `name`, through a reader alias), fields
//! reordered (version 2), promotions (`id` int → long, `score` float →
//! double, `tags` items int → long), an enum symbol the reader lacks (`C`,
//! read as the reader enum's default `UNKNOWN`).

use std::path::{Path, PathBuf};

use apache_avro::types::{Record, Value};
use apache_avro::{Codec, DeflateSettings, Reader, Schema, Writer};
use serde_json::{Map, Value as Json, json};

/// The reader schema.
pub const READER_SCHEMA: &str = r#"{"type": "record", "name": "Event", "namespace": "grist.v3",
 "fields": [
  {"name": "id", "type": "long"},
  {"name": "score", "type": "double"},
  {"name": "kind", "type": {"type": "enum", "name": "Kind",
     "symbols": ["A", "B", "UNKNOWN"], "default": "UNKNOWN"}},
  {"name": "name", "aliases": ["old_name"], "type": "string"},
  {"name": "tags", "type": {"type": "array", "items": "long"}},
  {"name": "weight", "type": "float", "default": 1.5},
  {"name": "maybe", "type": ["null", "double"], "default": null}
 ]}"#;

/// The names of [`READER_SCHEMA`]'s fields, in its order.
pub fn reader_fields() -> Vec<String> {
    let reader: Json = serde_json::from_str(READER_SCHEMA).expect("the reader schema's JSON");
    reader["fields"]
        .as_array()
        .expect("a record's fields")
        .iter()
        .map(|f| f["name"].as_str().expect("a field name").to_string())
        .collect()
}

/// The writer schemas of the three versions.
pub const WRITER_SCHEMAS: [&str; 3] = [
    r#"{"type": "record", "name": "Event", "namespace": "grist.v1", "fields": [
      {"name": "id", "type": "int"},
      {"name": "score", "type": "float"},
      {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
      {"name": "old_name", "type": "string"},
      {"name": "legacy", "type": "long"},
      {"name": "tags", "type": {"type": "array", "items": "int"}}
    ]}"#,
    r#"{"type": "record", "name": "Event", "namespace": "grist.v2", "fields": [
      {"name": "tags", "type": {"type": "array", "items": "int"}},
      {"name": "old_name", "type": "string"},
      {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}},
      {"name": "weight", "type": "float"},
      {"name": "score", "type": "double"},
      {"name": "id", "type": "long"}
    ]}"#,
    r#"{"type": "record", "name": "Event", "namespace": "grist.v3", "fields": [
      {"name": "id", "type": "long"},
      {"name": "name", "type": "string"},
      {"name": "score", "type": "double"},
      {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["C", "B", "A"]}},
      {"name": "maybe", "type": ["null", "double"]},
      {"name": "tags", "type": {"type": "array", "items": "long"}},
      {"name": "weight", "type": "float"}
    ]}"#,
];

/// Records per file.
pub const RECORDS: usize = 150;

/// The record `i` of version `v` (0, 1, 2), as apache-avro values.
fn record(schema: &Schema, v: usize, i: usize) -> Record<'_> {
    let mut r = Record::new(schema).expect("a record schema");
    let id = (v * 1000 + i) as i64;
    let tags: Vec<i64> = (0..(i % 4) as i64).map(|t| id * 10 + t).collect();
    let kind = ["A", "B", "C"][i % if v == 0 { 2 } else { 3 }];
    let symbols: &[&str] = match v {
        0 => &["A", "B"],
        1 => &["A", "B", "C"],
        _ => &["C", "B", "A"],
    };
    let index = symbols.iter().position(|s| *s == kind).unwrap_or(0) as u32;
    r.put("kind", Value::Enum(index, kind.to_string()));
    let name = format!("event {id}");
    if v == 2 {
        r.put("name", Value::String(name));
    } else {
        r.put("old_name", Value::String(name));
    }
    if v == 0 {
        r.put("id", Value::Int(id as i32));
        r.put("score", Value::Float(i as f32 * 0.25 + 0.1));
        r.put("legacy", Value::Long(-id));
        r.put(
            "tags",
            Value::Array(tags.iter().map(|&t| Value::Int(t as i32)).collect()),
        );
    } else {
        r.put("id", Value::Long(id));
        r.put("score", Value::Double(i as f64 / 3.0));
        r.put("weight", Value::Float(i as f32 * 0.5));
        let items = tags.iter().map(|&t| match v {
            1 => Value::Int(t as i32),
            _ => Value::Long(t),
        });
        r.put("tags", Value::Array(items.collect()));
    }
    if v == 2 {
        let maybe = match i % 3 {
            0 => Value::Union(0, Box::new(Value::Null)),
            _ => Value::Union(1, Box::new(Value::Double(i as f64 * 1.25))),
        };
        r.put("maybe", maybe);
    }
    r
}

/// Writes the three files into `dir` (`v1.avro` null codec, `v2.avro`
/// deflate, `v3.avro` null; blocks of a few dozen records) and returns
/// their paths, in version order.
pub fn write_dataset(dir: &Path) -> Vec<PathBuf> {
    WRITER_SCHEMAS
        .iter()
        .enumerate()
        .map(|(v, text)| {
            let schema = Schema::parse_str(text).expect("a valid writer schema");
            let codec = match v {
                1 => Codec::Deflate(DeflateSettings::default()),
                _ => Codec::Null,
            };
            let mut w = Writer::builder()
                .schema(&schema)
                .writer(Vec::new())
                .codec(codec)
                .block_size(1000)
                .build();
            for i in 0..RECORDS {
                w.append(record(&schema, v, i))
                    .expect("a record of the schema");
            }
            let bytes = w.into_inner().expect("the file's bytes");
            let path = dir.join(format!("v{}.avro", v + 1));
            std::fs::write(&path, bytes).expect("writing the file");
            path
        })
        .collect()
}

/// What apache-avro's reader (`Reader::with_schema`) reads each record of
/// the file at `path` as, through [`READER_SCHEMA`], in the JSON form
/// fastavro decodes records to (unions as the branch's value, enums as
/// their symbol).
///
/// apache-avro 0.21 matches fields by name only: a reader field whose
/// alias names a writer field is read through a reader schema that
/// names it as the writer does (the field renamed back), and its value
/// is put under the reader's name.
pub fn reference_records(path: &Path) -> Vec<Json> {
    let bytes = std::fs::read(path).expect("reading the file");
    let writer = Reader::new(&bytes[..]).expect("an Avro file");
    let writer_fields: Vec<String> = match writer.writer_schema() {
        Schema::Record(r) => r.fields.iter().map(|f| f.name.clone()).collect(),
        other => panic!("not a record schema: {other:?}"),
    };
    let mut reader: Json = serde_json::from_str(READER_SCHEMA).expect("the reader schema");
    let mut renamed = Vec::new();
    for f in reader["fields"].as_array_mut().expect("fields") {
        let name = f["name"].as_str().unwrap_or_default().to_string();
        if writer_fields.contains(&name) {
            continue;
        }
        let alias = f["aliases"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
            .find(|a| writer_fields.iter().any(|w| w == a))
            .map(str::to_string);
        if let Some(alias) = alias {
            f["name"] = json!(alias);
            renamed.push((alias, name));
        }
    }
    let schema = Schema::parse(&reader).expect("the reference reader schema");
    Reader::with_schema(&schema, &bytes[..])
        .expect("apache-avro reads the file")
        .map(|v| {
            let mut json = to_json(&v.expect("apache-avro resolves the record"));
            if let Json::Object(m) = &mut json {
                for (from, to) in &renamed {
                    if let Some(v) = m.remove(from) {
                        m.insert(to.clone(), v);
                    }
                }
            }
            json
        })
        .collect()
}

/// An apache-avro value in the JSON form fastavro decodes to (the form of
/// `grist cat --records`), for the values of strings, numbers, enums,
/// unions, arrays, maps and records.
pub fn to_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Boolean(b) => json!(b),
        Value::Int(i) => json!(i),
        Value::Long(l) => json!(l),
        Value::Float(x) => json!(f64::from(*x)),
        Value::Double(x) => json!(x),
        Value::String(s) | Value::Enum(_, s) => json!(s),
        Value::Union(_, inner) => to_json(inner),
        Value::Array(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Record(fields) => Json::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect::<Map<_, _>>(),
        ),
        other => panic!("no JSON form here: {other:?}"),
    }
}
