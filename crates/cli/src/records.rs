//! Records one at a time, in every format: the payloads of TFRecord frames
//! or the datums of Avro blocks of one file, the samples of an FFRecord
//! dataset or the records of an OFRecord dataset (numbered across their
//! files); each decodable into generic JSON. Shared by `cat --raw`,
//! `cat --records` and `count`.

use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::bail;
use grist_avro_tensor::{DatumReader, DatumSchema, datum_to_json};
use grist_ffrecord::{FfrReader, Sample};
use grist_ofrecord::DatasetReader;
use grist_tfrecord::{
    Location, ReaderOptions, RecordReader, example_to_json, sequence_example_to_json,
};
use serde_json::Value;

use crate::format::{Format, Payload};

/// The records of one TFRecord or Avro file, or of an FFRecord or
/// OFRecord dataset.
pub(crate) enum RecordFile {
    /// TFRecord frames (CRCs checked unless turned off).
    Tfrecord(Counted<RecordReader<File>>),
    /// Avro datums (each block checked whole before its first datum).
    Avro(Counted<DatumReader<File>>),
    /// FFRecord samples (CRC-32s checked unless turned off).
    Ffrecord(FfrSamples),
    /// OFRecord records, every part framed on its own.
    Ofrecord(DatasetReader),
}

/// A one-file reader, the file's name and the number of records read.
pub(crate) struct Counted<R> {
    reader: R,
    name: Arc<str>,
    read: u64,
}

impl<R> Counted<R> {
    fn new(reader: R, file: &Path) -> Self {
        Counted {
            reader,
            name: file.display().to_string().into(),
            read: 0,
        }
    }

    /// The place of the next record (and counts it).
    fn next_place(&mut self) -> Place {
        let n = self.read;
        self.read += 1;
        Place {
            file: self.name.clone(),
            local: n,
            global: n,
            offset: None,
        }
    }
}

/// Where a record is.
#[derive(Clone, Debug)]
pub(crate) struct Place {
    /// Its file.
    pub(crate) file: Arc<str>,
    /// Its number within the file.
    pub(crate) local: u64,
    /// Its number in the dataset (FFRecord, OFRecord; the number within
    /// the file for TFRecord and Avro).
    pub(crate) global: u64,
    /// OFRecord: the byte offset of its length prefix.
    pub(crate) offset: Option<u64>,
}

/// One record of a [`RecordFile`].
pub(crate) struct Record<'a> {
    /// The payload (TFRecord), datum (Avro), sample (FFRecord) or
    /// serialized OFRecord bytes.
    pub(crate) bytes: &'a [u8],
    /// Where it is.
    pub(crate) place: Place,
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
    /// An OFRecord, in the OFRecord corpus manifests' form
    /// (`{"features": {name: {"kind", "values"}}}`).
    OfRecord,
}

/// The samples of an FFRecord dataset in order, read by index a few
/// megabytes at a time.
pub(crate) struct FfrSamples {
    reader: FfrReader,
    /// The next sample to read.
    next: u64,
    /// Samples read and not yet handed out.
    pending: VecDeque<Sample>,
    /// The sample handed out last.
    current: Option<Sample>,
    /// After a batch read failed: samples before this one are read one at
    /// a time, so those before the bad one are handed out.
    single_until: u64,
}

/// The bytes of samples one read of [`FfrSamples`] asks for (at least one
/// sample).
const FFR_READ_BYTES: u64 = 4 << 20;

impl FfrSamples {
    /// The next sample.
    fn next_sample(&mut self) -> grist_ffrecord::Result<Option<&Sample>> {
        if self.pending.is_empty() {
            let len = self.reader.len();
            if self.next >= len {
                self.current = None;
                return Ok(None);
            }
            let mut end = self.next + 1;
            if self.next >= self.single_until {
                let mut bytes = self.reader.sample_len(self.next)?;
                while end < len {
                    let more = self.reader.sample_len(end)?;
                    if bytes + more > FFR_READ_BYTES {
                        break;
                    }
                    bytes += more;
                    end += 1;
                }
            }
            let indices: Vec<u64> = (self.next..end).collect();
            match self.reader.read(&indices) {
                Ok(samples) => self.pending = samples.into(),
                Err(_) if indices.len() > 1 => {
                    // One of them is bad: read one at a time up to it.
                    self.single_until = end;
                    end = self.next + 1;
                    self.pending.push_back(self.reader.read_one(self.next)?);
                }
                Err(e) => return Err(e),
            }
            self.next = end;
        }
        self.current = self.pending.pop_front();
        Ok(self.current.as_ref())
    }
}

impl RecordFile {
    /// Opens the TFRecord or Avro file `file`; `check_crc` applies to
    /// TFRecord.
    pub(crate) fn open(file: &Path, format: Format, check_crc: bool) -> anyhow::Result<Self> {
        Ok(match format {
            Format::Tfrecord => RecordFile::Tfrecord(Counted::new(
                RecordReader::open(file, ReaderOptions::default().with_check_crc(check_crc))?,
                file,
            )),
            Format::Avro => RecordFile::Avro(Counted::new(
                DatumReader::open(file, grist_avro_tensor::ReaderOptions::default())?,
                file,
            )),
            Format::Ffrecord | Format::Ofrecord => {
                Self::open_dataset(std::slice::from_ref(&file.to_path_buf()), format, check_crc)?
            }
        })
    }

    /// Opens the FFRecord or OFRecord dataset of `files` (in this order);
    /// `check_crc` applies to FFRecord (every header is read and checked
    /// here).
    pub(crate) fn open_dataset(
        files: &[PathBuf],
        format: Format,
        check_crc: bool,
    ) -> anyhow::Result<Self> {
        Ok(match format {
            Format::Ffrecord => {
                let options = grist_ffrecord::ReaderOptions::default().with_check_data(check_crc);
                RecordFile::Ffrecord(FfrSamples {
                    reader: FfrReader::open_files(files, options)?,
                    next: 0,
                    pending: VecDeque::new(),
                    current: None,
                    single_until: 0,
                })
            }
            Format::Ofrecord => RecordFile::Ofrecord(
                grist_ofrecord::Dataset::from_files(files.iter().cloned()).reader(),
            ),
            Format::Tfrecord | Format::Avro => match files {
                [file] => Self::open(file, format, check_crc)?,
                _ => bail!("{} records are read one file at a time", format.name()),
            },
        })
    }

    /// The next record, or `None` at the end.
    pub(crate) fn next_record(&mut self) -> anyhow::Result<Option<Record<'_>>> {
        Ok(match self {
            RecordFile::Tfrecord(r) => {
                let place = r.next_place();
                r.reader.next_record()?.map(|bytes| Record {
                    bytes,
                    place,
                    block: None,
                })
            }
            RecordFile::Avro(r) => {
                let place = r.next_place();
                r.reader.next_datum()?.map(|d| Record {
                    bytes: d.data,
                    place,
                    block: Some(d.block),
                })
            }
            RecordFile::Ffrecord(r) => r.next_sample()?.map(|s| Record {
                bytes: &s.data,
                place: Place {
                    file: s.at.file.clone(),
                    local: s.at.record.unwrap_or_default(),
                    global: s.at.index.unwrap_or_default(),
                    offset: None,
                },
                block: None,
            }),
            RecordFile::Ofrecord(r) => r.next_record()?.map(|d| Record {
                bytes: d.payload,
                place: Place {
                    file: d.file.clone(),
                    local: d.index_in_part,
                    global: d.global_index,
                    offset: Some(d.offset),
                },
                block: None,
            }),
        })
    }

    /// The generic decoder of these records; `sequence` (tf.Example
    /// payloads only) picks tf.SequenceExample over tf.Example, `payload`
    /// says what FFRecord samples hold.
    pub(crate) fn json_decoder(
        &self,
        sequence: bool,
        payload: Payload,
    ) -> anyhow::Result<RecordJson> {
        let example = |sequence| match sequence {
            false => RecordJson::Example,
            true => RecordJson::SequenceExample,
        };
        Ok(match (self, sequence) {
            (RecordFile::Tfrecord(_), _) => example(sequence),
            (RecordFile::Avro(r), false) => RecordJson::Avro(r.reader.schema().clone()),
            (RecordFile::Ffrecord(_), _) if payload == Payload::Example => example(sequence),
            (RecordFile::Ffrecord(_), false) if payload == Payload::Ofrecord => {
                RecordJson::OfRecord
            }
            (RecordFile::Ffrecord(_), _) if payload == Payload::Raw => bail!(
                "--records decodes tf.Example or OFRecord samples; raw tensor samples print \
                 with --raw, or as batches with --spec"
            ),
            (RecordFile::Ofrecord(_), false) => RecordJson::OfRecord,
            (_, _) => bail!("--sequence is for tf.SequenceExample records (TFRecord or FFRecord)"),
        })
    }
}

impl RecordJson {
    /// Decodes `record`.
    pub(crate) fn decode(&self, record: &Record<'_>) -> anyhow::Result<Value> {
        let place = &record.place;
        let at = || Location::record(place.file.clone(), place.local);
        Ok(match self {
            RecordJson::Example => example_to_json(record.bytes, &at())?,
            RecordJson::SequenceExample => sequence_example_to_json(record.bytes, &at())?,
            RecordJson::Avro(schema) => {
                let at = grist_avro_tensor::Location::block(
                    place.file.clone(),
                    record.block.unwrap_or(0),
                )
                .with_record(place.local);
                datum_to_json(schema, record.bytes, &at)?
            }
            RecordJson::OfRecord => {
                let mut at = grist_ofrecord::Location::record(place.file.clone(), place.local);
                if let Some(offset) = place.offset {
                    at = at.with_offset(offset);
                }
                grist_ofrecord::Record::parse_at(record.bytes, &at)?.to_json()
            }
        })
    }
}
