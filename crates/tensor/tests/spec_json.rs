//! Spec files written back to JSON read back to the same spec: every
//! parse of every corpus manifest.

use grist_tensor::SpecFile;
use grist_testkit::corpus;

/// Every parse of the manifest's TFRecord and Avro cases, read, written
/// and read again.
#[test]
fn every_corpus_spec_round_trips_through_json() {
    let mut checked = 0;
    let mut sequence = 0;
    for section in ["tfrecord", "avro"] {
        for case in corpus::cases(section) {
            for (i, parse) in case.parses().iter().enumerate() {
                let spec = SpecFile::from_value(parse)
                    .unwrap_or_else(|e| panic!("{} parse {i}: {e}", case.name));
                let text = spec.to_json();
                let back = SpecFile::from_json(&text)
                    .unwrap_or_else(|e| panic!("{} parse {i}: {e}\n{text}", case.name));
                assert_eq!(back, spec, "{} parse {i}:\n{text}", case.name);
                // Through serde as well.
                let value = serde_json::to_value(&spec).unwrap();
                let again: SpecFile = serde_json::from_value(value).unwrap();
                assert_eq!(again, spec, "{} parse {i}", case.name);
                // The features are written in the manifest's own form.
                let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                let key = if spec.sequence {
                    "context_features"
                } else {
                    "features"
                };
                assert!(json[key].is_array(), "{} parse {i}: {text}", case.name);
                assert_eq!(json.get("api"), None);
                if parse["batch_size"].is_u64() {
                    assert_eq!(json["batch_size"], parse["batch_size"]);
                }
                sequence += spec.sequence as usize;
                checked += 1;
            }
        }
    }
    assert!(
        checked > 30 && sequence > 0,
        "{checked} specs, {sequence} sequence"
    );
}

/// A sequence spec keeps its two keys even when one list is empty; a
/// plain spec keeps `features` even when empty.
#[test]
fn empty_lists_keep_the_form() {
    let seq = SpecFile {
        sequence: true,
        ..SpecFile::default()
    };
    let text = seq.to_json();
    assert!(text.contains("context_features") && !text.contains("\"features\""));
    assert_eq!(SpecFile::from_json(&text).unwrap(), seq);
    let plain = SpecFile::default();
    assert_eq!(
        plain.to_json().replace([' ', '\n'], ""),
        r#"{"features":[]}"#
    );
    assert_eq!(SpecFile::from_json(&plain.to_json()).unwrap(), plain);
}

/// An Avro reader schema round-trips: given as a JSON object or as a
/// string of its JSON, it reads as the object and is written back as it.
#[test]
fn a_reader_schema_round_trips() {
    let schema = serde_json::json!({"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"},
        {"name": "tag", "type": ["null", "string"], "default": null}]});
    let object = serde_json::json!({
        "features": [{"name": "id", "kind": "dense", "dtype": "int64", "shape": []}],
        "reader_schema": schema,
    });
    let spec = SpecFile::from_value(&object).unwrap();
    assert_eq!(spec.reader_schema.as_ref(), Some(&schema));
    let mut as_text = object.clone();
    as_text["reader_schema"] = serde_json::json!(schema.to_string());
    assert_eq!(SpecFile::from_value(&as_text).unwrap(), spec);
    let text = spec.to_json();
    assert_eq!(SpecFile::from_json(&text).unwrap(), spec);
    let back: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(back["reader_schema"], schema);
    // A primitive schema given by name stays a string.
    let mut primitive = object;
    primitive["reader_schema"] = serde_json::json!("long");
    let spec = SpecFile::from_value(&primitive).unwrap();
    assert_eq!(spec.reader_schema, Some(serde_json::json!("long")));
    assert_eq!(SpecFile::from_json(&spec.to_json()).unwrap(), spec);
    // Without one, none is written.
    assert!(!SpecFile::default().to_json().contains("reader_schema"));
}
