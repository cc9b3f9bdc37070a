//! The write side of [`AvroFormat`](crate::AvroFormat): batches encoded
//! as datums of the schema derived from the specs (ATDS layout) by
//! [`DatumEncoder`], written into object container files by the
//! [`ContainerWriter`].

use grist_io::{Address, Storage};
use grist_tensor::{
    Batch, BoxError, Encoder, RecordBuf, RecordSink, SpecFile, SpecForm, TensorError, WriteOptions,
    Written, spec_in_form,
};
use serde_json::Value;

use crate::codec::Codec;
use crate::decoder::AvroDecoder;
use crate::encode::{encode_rows, no_sequences, schema_for_specs};
use crate::error::{Error, Result};
use crate::writer::{ContainerWriter, WriterOptions};

/// The name of the record type a derived schema describes.
pub const RECORD_NAME: &str = "Record";

/// Encodes batches as Avro datums in the ATDS layout: the encoder of
/// [`AvroFormat`](crate::AvroFormat).
///
/// The writer schema is [`schema_for_specs`] of the specs in ATDS form
/// (a sparse feature is one field, a record of `indices0..` and
/// `values`), or the schema [`WriteOptions::schema`] gives when it encodes
/// datums exactly as that one does (names, namespaces, docs and other
/// attributes may differ; field names, types and order may not). Every
/// dtype has an Avro type, so nothing is narrowed. Ragged and
/// fixed-length-sequence features and sequence specs are refused in
/// [`new`](Self::new), naming the feature.
///
/// ```
/// use grist_avro_tensor::DatumEncoder;
/// use grist_tensor::{DType, Encoder, FeatureSpec, SpecFile, WriteOptions};
///
/// let spec = SpecFile {
///     features: vec![FeatureSpec::sparse("sp", DType::Int32, "i", "v", 8)],
///     ..SpecFile::default()
/// };
/// let e = DatumEncoder::new(&spec, &WriteOptions::new())?;
/// assert!(e.schema().contains("indices0"));
/// assert_eq!(e.spec().features[0].dtype(), DType::Int32);
/// # Ok::<(), grist_avro_tensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DatumEncoder {
    spec: SpecFile,
    schema: String,
}

impl DatumEncoder {
    /// The encoder of batches described by `spec`, or an error naming the
    /// first feature Avro cannot hold, or saying how a given schema
    /// differs from the derived one.
    pub fn new(spec: &SpecFile, options: &WriteOptions) -> Result<Self> {
        if spec.sequence {
            return Err(no_sequences());
        }
        let spec = spec_in_form(spec, SpecForm::Atds);
        let derived = schema_for_specs(&spec.features, RECORD_NAME)?;
        let schema = match &options.schema {
            None => derived,
            Some(given) => {
                check_same_encoding(given, &derived)?;
                given.clone()
            }
        };
        // What the decoder refuses, no datums can describe.
        let mut decoder = AvroDecoder::new(&spec.features)?;
        decoder.add_schema("(written schema)", &schema)?;
        Ok(DatumEncoder { spec, schema })
    }

    /// The writer schema (JSON).
    pub fn schema(&self) -> &str {
        &self.schema
    }
}

impl Encoder for DatumEncoder {
    fn spec(&self) -> &SpecFile {
        &self.spec
    }

    fn encode(&self, batch: &Batch, out: &mut RecordBuf) -> std::result::Result<(), BoxError> {
        Ok(encode_rows(batch, &self.spec, out)?)
    }
}

fn schema_error(reason: String) -> Error {
    Error::Spec(TensorError::Unsupported {
        what: format!("Avro: the given writer schema cannot be written: {reason}"),
    })
}

/// Checks that schema `given` encodes datums exactly as `derived` does.
fn check_same_encoding(given: &str, derived: &str) -> Result<()> {
    let given: Value =
        serde_json::from_str(given).map_err(|e| schema_error(format!("it is not JSON ({e})")))?;
    let derived: Value = serde_json::from_str(derived)
        .map_err(|e| schema_error(format!("the derived schema is not JSON ({e})")))?;
    same_encoding("", &given, &derived).map_err(schema_error)
}

/// A type's encoding: a primitive's name, or the object's `type`.
fn type_name(t: &Value) -> Option<&str> {
    match t {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("type").and_then(type_name),
        _ => None,
    }
}

fn same_encoding(at: &str, given: &Value, derived: &Value) -> std::result::Result<(), String> {
    let (g, d) = (type_name(given), type_name(derived));
    if g != d || g.is_none() {
        return Err(format!(
            "{}: {given} where the specs need {derived}",
            if at.is_empty() { "the record" } else { at }
        ));
    }
    match d {
        Some("array") => same_encoding(&format!("{at}[]"), &given["items"], &derived["items"]),
        Some("record") => {
            let empty = Vec::new();
            let gf = given["fields"].as_array().unwrap_or(&empty);
            let df = derived["fields"].as_array().unwrap_or(&empty);
            if gf.len() != df.len() {
                return Err(format!(
                    "{}: {} fields where the specs need {}",
                    if at.is_empty() { "the record" } else { at },
                    gf.len(),
                    df.len()
                ));
            }
            for (g, d) in gf.iter().zip(df) {
                let name = d["name"].as_str().unwrap_or_default();
                let path = if at.is_empty() {
                    name.to_string()
                } else {
                    format!("{at}.{name}")
                };
                if g["name"] != d["name"] {
                    return Err(format!("{path}: the field is called {} there", g["name"]));
                }
                same_encoding(&path, &g["type"], &d["type"])?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The codec `options` ask for (`null` by default), refused when unknown
/// or not built in.
pub(crate) fn codec(options: &WriteOptions) -> Result<Codec> {
    let Some(name) = options.codec.as_deref() else {
        return Ok(Codec::Null);
    };
    let codec = Codec::from_name(name)?;
    codec.check_enabled(&"".into())?;
    Ok(codec)
}

/// One Avro file being written (the format's [`RecordSink`]).
#[derive(Debug)]
pub(crate) struct AvroSink {
    writer: ContainerWriter,
}

impl AvroSink {
    pub(crate) fn create(
        storage: &Storage,
        address: &Address,
        spec: &SpecFile,
        options: &WriteOptions,
    ) -> Result<Self> {
        let encoder = DatumEncoder::new(spec, options)?;
        let writer_options = WriterOptions::default().with_codec(codec(options)?);
        Ok(AvroSink {
            writer: ContainerWriter::create_at(storage, address, encoder.schema(), writer_options)?,
        })
    }
}

impl RecordSink for AvroSink {
    fn write(&mut self, record: &[u8]) -> std::result::Result<(), BoxError> {
        Ok(self.writer.append_datum(record)?)
    }

    fn records(&self) -> u64 {
        self.writer.records()
    }

    fn finish(self: Box<Self>) -> std::result::Result<Written, BoxError> {
        let summary = self.writer.finish()?;
        Ok(Written::new(summary.records, summary.bytes).with_digest(summary.digest))
    }
}

#[cfg(test)]
mod tests {
    use grist_tensor::{DType, FeatureSpec};

    use super::*;

    fn spec() -> SpecFile {
        SpecFile {
            features: vec![
                FeatureSpec::dense("id", DType::Int32, [2]),
                FeatureSpec::sparse("sp", DType::Float64, "i", "v", 9),
            ],
            ..SpecFile::default()
        }
    }

    #[test]
    fn a_given_schema_must_encode_as_the_derived_one() {
        let same = r#"{"type": "record", "name": "Mine", "namespace": "x.y", "doc": "d",
            "fields": [
              {"name": "id", "type": {"type": "array", "items": {"type": "int"}}, "doc": "ids"},
              {"name": "sp", "type": {"type": "record", "name": "S", "fields": [
                {"name": "indices0", "type": {"type": "array", "items": "long"}},
                {"name": "values", "type": {"type": "array", "items": "double"}}]}}]}"#;
        let e = DatumEncoder::new(&spec(), &WriteOptions::new().with_schema(same)).unwrap();
        assert_eq!(e.schema(), same);
        for (bad, says) in [
            (same.replace("\"double\"", "\"float\""), "sp.values[]"),
            (same.replace("\"id\"", "\"ids\""), "id"),
            (same.replace("\"int\"", "\"long\""), "id[]"),
        ] {
            let err = DatumEncoder::new(&spec(), &WriteOptions::new().with_schema(bad))
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{err}");
        }
    }
}
