//! One file's records one at a time, in either format: the payloads of
//! TFRecord frames or the datums of Avro blocks, each decodable into
//! generic JSON. Shared by `cat --raw`, `cat --records` and `count`.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use anyhow::bail;
use grist_avro_tensor::{DatumReader, DatumSchema, datum_to_json};
use grist_tfrecord::{
    Location, ReaderOptions, RecordReader, example_to_json, sequence_example_to_json,
};
use serde_json::Value;

use crate::format::Format;

/// The records of one file.
pub(crate) enum RecordFile {
    /// TFRecord frames (CRCs checked unless turned off).
    Tfrecord(RecordReader<File>),
    /// Avro datums (each block checked whole before its first datum).
    Avro(DatumReader<File>),
}

/// One record of a [`RecordFile`].
pub(crate) struct Record<'a> {
    /// The payload (TFRecord) or datum (Avro) bytes.
    pub(crate) bytes: &'a [u8],
    /// Avro: the number of the datum's block (errors name it).
    pub(crate) block: Option<u64>,
}

/// How to decode a record of a [`RecordFile`] generically.
pub(crate) enum RecordJson {
    /// A tf.Example: `{"features": {...}}`.
    Example,
    /// A tf.SequenceExample: `{"context": {...}, "feature_lists": {...}}`.
    SequenceExample,
    /// An Avro datum of this writer schema, as fastavro decodes it.
    Avro(DatumSchema),
}

impl RecordFile {
    /// Opens `file` as `format`; `check_crc` applies to TFRecord.
    pub(crate) fn open(file: &Path, format: Format, check_crc: bool) -> anyhow::Result<Self> {
        Ok(match format {
            Format::Tfrecord => RecordFile::Tfrecord(RecordReader::open(
                file,
                ReaderOptions::default().with_check_crc(check_crc),
            )?),
            Format::Avro => RecordFile::Avro(DatumReader::open(
                file,
                grist_avro_tensor::ReaderOptions::default(),
            )?),
        })
    }

    /// The next record, or `None` at the end of the file.
    pub(crate) fn next_record(&mut self) -> anyhow::Result<Option<Record<'_>>> {
        Ok(match self {
            RecordFile::Tfrecord(r) => r.next_record()?.map(|bytes| Record { bytes, block: None }),
            RecordFile::Avro(r) => r.next_datum()?.map(|d| Record {
                bytes: d.data,
                block: Some(d.block),
            }),
        })
    }

    /// The generic decoder of this file's records; `sequence` (TFRecord
    /// only) picks tf.SequenceExample over tf.Example.
    pub(crate) fn json_decoder(&self, sequence: bool) -> anyhow::Result<RecordJson> {
        Ok(match (self, sequence) {
            (RecordFile::Tfrecord(_), false) => RecordJson::Example,
            (RecordFile::Tfrecord(_), true) => RecordJson::SequenceExample,
            (RecordFile::Avro(r), false) => RecordJson::Avro(r.schema().clone()),
            (RecordFile::Avro(_), true) => {
                bail!("--sequence is for TFRecord files of tf.SequenceExamples, not Avro")
            }
        })
    }
}

impl RecordJson {
    /// Decodes `record`, record `index` of `file`.
    pub(crate) fn decode(
        &self,
        record: &Record<'_>,
        file: &Arc<str>,
        index: u64,
    ) -> anyhow::Result<Value> {
        let at = || Location::new(file.clone(), index);
        Ok(match self {
            RecordJson::Example => example_to_json(record.bytes, &at())?,
            RecordJson::SequenceExample => sequence_example_to_json(record.bytes, &at())?,
            RecordJson::Avro(schema) => {
                let at =
                    grist_avro_tensor::Location::block(file.clone(), record.block.unwrap_or(0))
                        .with_record(index);
                datum_to_json(schema, record.bytes, &at)?
            }
        })
    }
}
