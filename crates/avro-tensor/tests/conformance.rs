//! Files fastavro 1.13.1 wrote and the records it read from them
//! (`tests/conformance/`, made by `benches/peers/gen_conformance.py avro`):
//! records that take no bytes, names as Java reflection writes them, the
//! `error` type, field order and logical types. grist must give each
//! record as fastavro's record dumped as JSON, text for text (so keys in
//! fastavro's order), and count and walk them.
//!
//! And a file of varlen features of rank 1 to 3 with the batches
//! tensorflow-io 0.37.1's ATDSDataset made of it (`gen_conformance.py
//! atds`): each `dense_shape` size is 1 + the largest index present.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use grist_avro_tensor::{AvroDecoder, BlockReader, DatumReader, ReaderOptions, datum_to_json};
use grist_tensor::SpecFile;
use grist_tensor::json::{batch_to_json, compare_json};
use serde_json::{Value, json};

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
    assert!(out.len() >= 9, "{} cases", out.len());
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

#[test]
fn varlen_batches_match_atds() {
    let mut files = 0;
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if let Some(stem) = name.strip_suffix(".atds.json") {
            check_atds(&dir().join(format!("{stem}.avro")), &path);
            files += 1;
        }
    }
    assert!(files >= 2, "{files} ATDS files");
}

/// The batches of `path` for the spec of `batches` (ATDS's output for
/// it, at each batch size) are ATDS's, value for value.
fn check_atds(path: &Path, batches: &Path) {
    let want: Value = serde_json::from_str(&std::fs::read_to_string(batches).unwrap()).unwrap();
    let spec = SpecFile::from_value(&json!({"features": want["features"]})).unwrap();
    let mut blocks = BlockReader::open(path, ReaderOptions::default()).unwrap();
    let file: Arc<str> = blocks.name().clone();
    let schema = blocks.header().schema_json.clone();
    let mut data = Vec::new();
    while let Some(b) = blocks.next_block().unwrap() {
        data.push(b);
    }
    let parses = want["parses"].as_array().unwrap();
    assert_eq!(parses.len(), 2);
    for parse in parses {
        let size = parse["batch_size"].as_u64().unwrap() as usize;
        let mut d = AvroDecoder::new(&spec.features).unwrap();
        d.add_schema(file.clone(), &schema).unwrap();
        let mut got = Vec::new();
        let mut out = d.new_batch(size);
        for b in &data {
            let count = b.record_count as usize;
            let mut row = 0;
            while row < count {
                let take = (size - out.rows()).min(count - row);
                d.decode_block(
                    &file,
                    b.index,
                    b.first_record,
                    &b.data,
                    count,
                    row..row + take,
                    &mut out,
                )
                .unwrap();
                row += take;
                if out.rows() == size {
                    got.push(batch_to_json(&d.finish(&mut out).unwrap()));
                    out = d.new_batch(size);
                }
            }
        }
        if out.rows() > 0 {
            got.push(batch_to_json(&d.finish(&mut out).unwrap()));
        }
        let got = Value::Array(got);
        if let Err(e) = compare_json(&parse["batches"], &got) {
            panic!("{} batch size {size}: {e:?}\n{got}", path.display());
        }
    }
}

/// A value fastavro fails to convert (a date past 9999-12-31: "year 10183
/// is out of range") fails in grist too, naming the record and the field.
#[test]
fn logical_values_fastavro_refuses_are_errors() {
    let schema = grist_avro_tensor::DatumSchema::parse(
        "mem",
        r#"{"type": "record", "name": "R", "fields": [
            {"name": "d", "type": {"type": "int", "logicalType": "date"}}]}"#,
    )
    .unwrap();
    let at = grist_avro_tensor::Location::block("mem", 0).with_record(1);
    // 3,000,000 days, zig-zag varint.
    let mut datum = Vec::new();
    let mut n = 3_000_000u64 << 1;
    while n >= 0x80 {
        datum.push(n as u8 | 0x80);
        n >>= 7;
    }
    datum.push(n as u8);
    match datum_to_json(&schema, &datum, &at) {
        Err(grist_avro_tensor::Error::Datum { at: got, reason }) => {
            assert_eq!(*got, at);
            assert!(reason.contains("field \"d\""), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
