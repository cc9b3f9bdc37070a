//! Files fastavro 1.13.1 wrote and the records it read from them
//! (`tests/conformance/`, made by `benches/peers/gen_conformance.py avro`):
//! records that take no bytes, names as Java reflection writes them, the
//! `error` type, field order and logical types. grist must give each
//! record as fastavro's record dumped as JSON, text for text (so keys in
//! fastavro's order), and count and walk them.

use std::path::{Path, PathBuf};

use grist_avro_tensor::{DatumReader, ReaderOptions, datum_to_json};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

/// The `.avro` files of the folder, with the lines fastavro's records
/// were dumped to.
fn cases() -> Vec<(PathBuf, Vec<String>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "avro") {
            let want = path.with_extension("records.jsonl");
            let text = std::fs::read_to_string(&want).unwrap();
            out.push((path, text.lines().map(str::to_string).collect()));
        }
    }
    out.sort();
    assert!(out.len() >= 8, "{} cases", out.len());
    out
}

#[test]
fn records_read_as_fastavro_reads_them() {
    for (path, want) in cases() {
        let name = path.display().to_string();
        let mut reader = DatumReader::open(&path, ReaderOptions::default()).unwrap();
        let schema = reader.schema().clone();
        let mut got = Vec::new();
        while let Some(d) = reader.next_datum().unwrap() {
            let at = d.location();
            let value = schema.decode(d.data, &at).unwrap();
            let text = serde_json::to_string(&schema.json(&value)).unwrap();
            // The Value form holds the same values (keys unordered).
            let json = datum_to_json(&schema, d.data, &at).unwrap();
            assert_eq!(
                json,
                serde_json::from_str::<serde_json::Value>(&text).unwrap()
            );
            got.push(text);
        }
        assert_eq!(got, want, "{name}");
        let mut again = DatumReader::open(&path, ReaderOptions::default()).unwrap();
        assert_eq!(again.count_rest().unwrap(), want.len() as u64, "{name}");
    }
}
