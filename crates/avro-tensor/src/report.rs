//! What tools say of Avro object container files, behind
//! [`AvroFormat`](crate::AvroFormat)'s `count` and `verify` (every block's
//! sync marker and codec, every datum against its block's record count)
//! and `inspect` (codec, metadata, blocks, records, fields, schema).

use std::io::{BufReader, Read};

use grist_tensor::json::bytes_to_json;
use grist_tensor::report::{count, plural, table};
use grist_tensor::{Input, InspectOptions, Report, Verified, VerifyFailure};
use serde_json::{Value, json};

use crate::container::{BlockReader, ReaderOptions};
use crate::error::{Error, Result};
use crate::generic::DatumReader;

/// An Avro file read datum by datum.
pub(crate) type FileReader = DatumReader<BufReader<Box<dyn Read + Send>>>;

/// `input` opened for reading datums (its header read and its schema
/// compiled).
pub(crate) fn open(input: &Input, options: ReaderOptions) -> Result<FileReader> {
    let raw = input.reader_at(0)?;
    let blocks = BlockReader::new(
        BufReader::with_capacity(1 << 20, raw),
        input.name().clone(),
        options,
    )?;
    DatumReader::new(blocks)
}

/// Reads every datum of `reader`; returns how many there are.
fn read_all(reader: &mut FileReader) -> Result<u64> {
    reader.count_rest()
}

/// The number of datums of `input`, every block and datum read and
/// checked.
pub(crate) fn count_datums(input: &Input, options: ReaderOptions) -> Result<u64> {
    read_all(&mut open(input, options)?)
}

/// Reads every block and datum of `input`. Details: the blocks and the
/// codec.
pub(crate) fn verify(input: &Input) -> Result<Verified, VerifyFailure> {
    let mut reader =
        open(input, ReaderOptions::default()).map_err(|e| VerifyFailure::new(None, e))?;
    let records = read_all(&mut reader).map_err(|e| {
        let mut at = grist_tensor::Location::block(input.name().clone(), reader.block_index())
            .with_offset(reader.block_offset());
        if let Some(r) = e.location().and_then(|l| l.record) {
            at = at.with_record(r);
        }
        VerifyFailure::new(Some(at), e)
    })?;
    let blocks = reader.blocks_read();
    Ok(Verified::new(
        records,
        format!(
            "{} block{}, codec {}",
            count(blocks),
            plural(blocks),
            reader.header().codec
        ),
    ))
}

/// The short text form of an Avro type (schema JSON): `long`,
/// `array<float>`, `map<long>`, `union[null, string]`, `record Name`,
/// `enum Color`, `fixed Id8(8)`, `long (timestamp-millis)`.
fn avro_type(t: &Value) -> String {
    match t {
        Value::String(name) => name.clone(),
        Value::Array(branches) => format!(
            "union[{}]",
            branches
                .iter()
                .map(avro_type)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(o) => {
            let name = o.get("name").and_then(Value::as_str).unwrap_or("?");
            let base = match o.get("type") {
                Some(Value::String(kind)) => match kind.as_str() {
                    "array" => format!("array<{}>", avro_type(&o["items"])),
                    "map" => format!("map<{}>", avro_type(&o["values"])),
                    "record" | "error" | "enum" => format!("{kind} {name}"),
                    "fixed" => format!("fixed {name}({})", o["size"]),
                    other => other.to_string(),
                },
                Some(inner) => avro_type(inner),
                None => "?".into(),
            };
            match o.get("logicalType").and_then(Value::as_str) {
                Some(logical) => format!("{base} ({logical})"),
                None => base,
            }
        }
        other => other.to_string(),
    }
}

/// The codec, metadata, blocks, records and fields of the Avro file
/// `input` (`name`: the path as given); every block and datum is read
/// and checked.
pub(crate) fn inspect(name: &str, input: &Input, options: &InspectOptions) -> Result<Report> {
    let mut reader = open(
        input,
        ReaderOptions::default().with_limits(options.read.limits),
    )?;
    let records = read_all(&mut reader)?;
    let header = reader.header().clone();
    let blocks = reader.blocks_read();
    let schema: Value = serde_json::from_str(&header.schema_json).map_err(|e| Error::Schema {
        file: input.name().clone(),
        feature: String::new(),
        reason: format!("avro.schema is not JSON: {e}"),
    })?;
    let no_fields = Vec::new();
    let fields = schema
        .get("fields")
        .and_then(Value::as_array)
        .unwrap_or(&no_fields);
    let fields: Vec<(&str, &Value)> = fields
        .iter()
        .map(|f| {
            let name = f.get("name").and_then(Value::as_str).unwrap_or("?");
            (name, f.get("type").unwrap_or(&Value::Null))
        })
        .collect();
    let metadata: serde_json::Map<String, Value> = header
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), bytes_to_json(v)))
        .collect();
    let json = json!({
        "file": name,
        "format": "avro",
        "codec": header.codec.name(),
        "metadata": metadata,
        "blocks": blocks,
        "records": records,
        "schema": schema,
        "fields": fields
            .iter()
            .map(|(name, t)| json!({"name": name, "type": t, "avro_type": avro_type(t)}))
            .collect::<Vec<_>>(),
    });
    let mut text = vec![format!(
        "{name}: Avro, codec {}, {} records in {} block{}",
        header.codec,
        count(records),
        count(blocks),
        plural(blocks)
    )];
    if header.metadata.is_empty() {
        text.push("metadata: none besides avro.schema and avro.codec".into());
    } else {
        text.push("metadata:".into());
        for (k, v) in &header.metadata {
            let shown = match std::str::from_utf8(v) {
                Ok(s) if s.len() <= 80 => format!("{s:?}"),
                _ => format!("({} bytes)", v.len()),
            };
            text.push(format!("  {k} = {shown}"));
        }
    }
    text.push(String::new());
    if fields.is_empty() {
        text.push(format!("records of type {}", avro_type(&schema)));
    } else {
        let rows: Vec<Vec<String>> = fields
            .iter()
            .map(|(name, t)| vec![name.to_string(), avro_type(t)])
            .collect();
        text.extend(table(&["field", "type"], &rows));
    }
    text.push(String::new());
    text.push(format!("schema: {}", header.schema_json));
    Ok(Report::new(json, text))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use grist_tensor::{Format as _, ReadOptions, RecordOptions};

    use super::*;
    use crate::AvroFormat;
    use crate::codec::Codec;
    use crate::writer::{ContainerWriter, WriterOptions};

    /// Writes an Avro file of longs (one-byte zig-zag varints) at `path`,
    /// a block per datum.
    fn write(path: &Path, longs: &[u8], codec: Codec) -> Input {
        let options = WriterOptions::default()
            .with_codec(codec)
            .with_sync_interval(1);
        let mut w = ContainerWriter::create(path, r#""long""#, options).unwrap();
        for &b in longs {
            w.append_datum(&[b]).unwrap();
        }
        w.finish().unwrap();
        Input::local(path)
    }

    #[test]
    fn every_datum_is_counted_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let input = write(&dir.path().join("a.bin"), &[2, 4, 6], Codec::Deflate);
        let f = AvroFormat;
        assert_eq!(f.count(&input, &ReadOptions::new()).unwrap(), 3);
        let v = f.verify(&input).unwrap();
        assert_eq!(v.records, 3);
        assert!(v.details.ends_with("codec deflate"), "{}", v.details);
        // Cut inside the last block: its block is named, with its offset.
        let path = input.path().unwrap();
        let data = std::fs::read(path).unwrap();
        std::fs::write(path, &data[..data.len() - 3]).unwrap();
        assert!(f.count(&input, &ReadOptions::new()).is_err());
        let failure = f.verify(&input).unwrap_err();
        let at = failure.position.unwrap();
        assert!(at.block.is_some() && at.offset.is_some(), "{at:?}");
    }

    #[test]
    fn inspect_of_several_files_reports_each() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(&dir.path().join("a.avro"), &[2], Codec::Null);
        let b = write(&dir.path().join("b.avro"), &[2, 4], Codec::Null);
        let f = AvroFormat;
        let one = f
            .inspect("a", std::slice::from_ref(&a), &InspectOptions::default())
            .unwrap();
        assert_eq!(
            (&one.json["records"], &one.json["codec"]),
            (&json!(1), &json!("null"))
        );
        assert_eq!(one.text[0], "a: Avro, codec null, 1 records in 1 block");
        assert!(one.text.contains(&"records of type long".to_string()));
        let both = f.inspect("d", &[a, b], &InspectOptions::default()).unwrap();
        assert_eq!(both.json["files"][1]["records"], 2);
        let sequence = InspectOptions::default().with_sequence(true);
        assert!(f.inspect("d", &[], &sequence).is_err());
        let mut options = RecordOptions::default();
        options.sequence = true;
        assert!(f.records(&[], &options).is_err());
        let e = f
            .write_index(
                &Input::local(dir.path().join("a.avro")),
                &ReadOptions::new(),
            )
            .unwrap_err();
        assert!(
            e.to_string().contains("index files are for TFRecord files"),
            "{e}"
        );
    }

    #[test]
    fn avro_type_names() {
        let cases = [
            (json!("long"), "long"),
            (json!({"type": "array", "items": "float"}), "array<float>"),
            (
                json!({"type": "array", "items": {"type": "array", "items": "int"}}),
                "array<array<int>>",
            ),
            (json!({"type": "map", "values": "long"}), "map<long>"),
            (json!(["null", "string"]), "union[null, string]"),
            (
                json!({"type": "record", "name": "Name", "fields": []}),
                "record Name",
            ),
            (
                json!({"type": "enum", "name": "C", "symbols": ["A"]}),
                "enum C",
            ),
            (
                json!({"type": "fixed", "name": "Id8", "size": 8}),
                "fixed Id8(8)",
            ),
            (
                json!({"type": "long", "logicalType": "timestamp-millis"}),
                "long (timestamp-millis)",
            ),
            (
                json!({"type": {"type": "map", "values": "int"}}),
                "map<int>",
            ),
        ];
        for (t, want) in cases {
            assert_eq!(avro_type(&t), want, "{t}");
        }
    }
}
