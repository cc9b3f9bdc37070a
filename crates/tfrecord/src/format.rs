//! [`TfRecordFormat`]: TFRecord behind the format contract
//! ([`grist_tensor::Format`]): names and content that say TFRecord,
//! streams of frame runs, records by number through DALI index files, the
//! tf.Example decoder, and records one by one.

use std::io::Read as _;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use grist_tensor::{
    BatchBuilder, BoxError, ByNumber, Chunk, ChunkPos, ChunkStream, FeatureSpec, Format,
    FramedFile, FramedFiles, Gathered, InferOptions, Inferred, Input, InspectOptions, Limits,
    NameMatch, RandomAccess, RawRecord, ReadOptions, Record, RecordLayout, RecordOptions, Records,
    Report, SpecFile, SpecSampler, Verified, VerifyFailure, WriteOptions,
};

use crate::compression::Compression;
use crate::decoder::ExampleDecoder;
use crate::error::{Error, Result};
use crate::framing::{Decoded, FrameDecoder, ReaderOptions, data_crc_matches, masked_crc32c};
use crate::index::parse_index;
use crate::records::{example_to_json, sequence_example_to_json};
use crate::report;
use crate::sink::{ExampleEncoder, TfRecordSink};
use crate::source::TfStream;
use grist_tensor::Location;

/// The file-name endings of TFRecord data, before a compression suffix.
const EXTENSIONS: [&str; 3] = [".tfrecord", ".tfrecords", ".tfr"];

/// The compression suffixes a TFRecord file name may end with.
const COMPRESSIONS: [&str; 5] = [".gz", ".zz", ".zlib", ".zst", ".zstd"];

/// TFRecord files of `tf.train.Example` (or `SequenceExample`) records, as
/// a [`Format`].
///
/// A file is TFRecord by its name when it ends in `.tfrecord`,
/// `.tfrecords` or `.tfr`, optionally followed by a compression suffix
/// (`.gz`, `.zz`/`.zlib`, `.zst`/`.zstd`); by its content when its first
/// frame's length CRC holds (inflated first, when it starts like a GZIP or
/// ZLIB stream). The compression comes from the suffix, or, for names
/// without a TFRecord extension, from the first bytes.
///
/// ```
/// use grist_tensor::{Format, NameMatch};
/// use grist_tfrecord::TfRecordFormat;
///
/// let f = TfRecordFormat;
/// assert_eq!(f.name_match("part-00000.tfrecord.gz"), NameMatch::Extension);
/// assert_eq!(f.name_match("part-00000"), NameMatch::No);
/// // An empty record's frame: its length, the length's CRC, its CRC.
/// let frame = [0, 0, 0, 0, 0, 0, 0, 0, 0x29, 0x03, 0x98, 0x07, 0xd8, 0xea, 0x82, 0xa2];
/// assert!(f.sniff(&frame, 16));
/// assert!(!f.sniff(b"Obj\x01 and more bytes", 20));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TfRecordFormat;

/// The file name `name` without a compression suffix, lower-cased.
fn stem(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    for c in COMPRESSIONS {
        if let Some(s) = lower.strip_suffix(c) {
            return s.to_string();
        }
    }
    lower
}

/// Whether the first 12 bytes of `head` are a frame header whose length
/// CRC holds.
fn frame_header_holds(head: &[u8]) -> bool {
    match (head.first_chunk::<8>(), head.get(8..12)) {
        (Some(len), Some(crc)) => {
            masked_crc32c(len) == u32::from_le_bytes(crc.try_into().unwrap_or_default())
        }
        _ => false,
    }
}

/// The compression the first bytes of a file say: GZIP's magic, or a
/// ZLIB header (CMF 0x78 with a valid check).
fn compression_by_magic(head: &[u8]) -> Compression {
    match head {
        [0x1f, 0x8b, ..] if Compression::Gzip.is_enabled() => Compression::Gzip,
        [0x78, flg, ..] if (0x7800u16 | u16::from(*flg)) % 31 == 0 => {
            if Compression::Zlib.is_enabled() {
                Compression::Zlib
            } else {
                Compression::None
            }
        }
        _ => Compression::None,
    }
}

impl TfRecordFormat {
    /// The compression of `input`: its name's suffix when the name says
    /// TFRecord, else its first bytes (a `.bin` file may be GZIP).
    pub fn compression_of(&self, input: &Input) -> Compression {
        let name = input.file_name();
        if self.name_match(name) == NameMatch::Extension {
            return Compression::from_path(Path::new(name));
        }
        match input.open().and_then(|o| {
            o.read_range(0..o.size().min(2))
                .map_err(|e| grist_tensor::StorageError::new(input.name().clone(), e))
        }) {
            Ok(head) => compression_by_magic(&head),
            Err(_) => Compression::None,
        }
    }
}

impl Format for TfRecordFormat {
    fn id(&self) -> &'static str {
        "tfrecord"
    }

    fn name(&self) -> &'static str {
        "TFRecord"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &[
            ".tfrecord",
            ".tfrecords",
            ".tfr",
            "(+ .gz, .zz, .zlib, .zst, .zstd)",
        ]
    }

    fn name_match(&self, name: &str) -> NameMatch {
        let stem = stem(name);
        if EXTENSIONS.iter().any(|e| stem.ends_with(e)) {
            NameMatch::Extension
        } else {
            NameMatch::No
        }
    }

    fn sniff(&self, head: &[u8], size: u64) -> bool {
        let fits = |head: &[u8], size: Option<u64>| {
            frame_header_holds(head)
                && size.is_none_or(|size| {
                    let len = u64::from_le_bytes(*head.first_chunk::<8>().expect("checked"));
                    len.checked_add(16).is_some_and(|frame| frame <= size)
                })
        };
        if fits(head, Some(size)) {
            return true;
        }
        // A compressed stream: inflate what is there (a cut stream gives
        // what it can) and look at the first frame's header.
        let compression = compression_by_magic(head);
        if compression == Compression::None {
            return false;
        }
        let mut inflated = Vec::new();
        if let Ok(r) = compression.reader(head) {
            let _ = r.take(12).read_to_end(&mut inflated);
        }
        fits(&inflated, None)
    }

    fn encoder(
        &self,
        spec: &SpecFile,
        options: &WriteOptions,
    ) -> std::result::Result<Box<dyn grist_tensor::Encoder>, BoxError> {
        crate::sink::compression(options)?;
        Ok(Box::new(ExampleEncoder::new(spec, options)?))
    }

    /// `part-00000.tfrecord`, with `.gz`, `.zz` or `.zst` after it for
    /// compressed files (readers tell the compression by that suffix).
    fn part_name(&self, part: usize, options: &WriteOptions) -> String {
        let suffix = match crate::sink::compression(options) {
            Ok(Compression::Gzip) => ".gz",
            Ok(Compression::Zlib) => ".zz",
            Ok(Compression::Zstd) => ".zst",
            _ => "",
        };
        format!("part-{part:05}.tfrecord{suffix}")
    }

    fn create(
        &self,
        storage: &grist_io::Storage,
        address: &grist_io::Address,
        spec: &SpecFile,
        options: &WriteOptions,
    ) -> std::result::Result<Box<dyn grist_tensor::RecordSink>, BoxError> {
        let _ = spec;
        Ok(Box::new(TfRecordSink::create(storage, address, options)?))
    }

    fn decoder(
        &self,
        spec: &SpecFile,
        limits: Limits,
    ) -> Result<Box<dyn grist_tensor::Decoder>, BoxError> {
        grist_tensor::no_reader_schema("TFRecord", spec.reader_schema.as_ref())?;
        Ok(Box::new(
            ExampleDecoder::from_spec_file(spec)?.with_limits(limits),
        ))
    }

    fn stream(
        &self,
        input: &Input,
        pos: ChunkPos,
        options: &ReadOptions,
    ) -> Result<Box<dyn ChunkStream>, BoxError> {
        Ok(Box::new(TfStream::open(
            input,
            pos,
            options,
            self.compression_of(input),
        )?))
    }

    fn random_access(
        &self,
        inputs: &[Input],
        mode: RandomAccess,
        shuffle: bool,
    ) -> Result<bool, BoxError> {
        // Shuffled records of an object store would cost a request each:
        // streamed, and shuffled by the loader's buffer, unless required.
        let remote_shuffle = shuffle && inputs.iter().any(Input::is_remote);
        if mode == RandomAccess::Off || (mode == RandomAccess::Auto && remote_shuffle) {
            return Ok(false);
        }
        let missing = inputs.iter().find(|i| {
            self.compression_of(i) != Compression::None || !i.with_suffix(".idx").exists()
        });
        match (missing, mode) {
            (None, _) => Ok(true),
            (Some(_), RandomAccess::Auto) => Ok(false),
            (Some(i), _) => Err(Box::new(grist_tensor::TensorError::Unsupported {
                what: format!(
                    "{}: TFRecord files are read by record number only when uncompressed and \
                     indexed ({} is missing or the file is compressed)",
                    i.name(),
                    i.with_suffix(".idx").name()
                ),
            })),
        }
    }

    fn by_number(
        &self,
        inputs: &[Input],
        options: &ReadOptions,
    ) -> Result<Box<dyn ByNumber>, BoxError> {
        let files = inputs
            .iter()
            .map(|input| {
                let entries = index_entries(input)?;
                Ok(FramedFile::open(input, entries, options)?)
            })
            .collect::<Result<Vec<_>, BoxError>>()?;
        Ok(Box::new(Indexed {
            files: FramedFiles::new(files, options.limits),
            options: ReaderOptions::default()
                .with_check_crc(options.check_crc)
                .with_limits(options.limits),
        }))
    }

    fn records(
        &self,
        inputs: &[Input],
        options: &RecordOptions,
    ) -> Result<Box<dyn Records>, BoxError> {
        grist_tensor::no_reader_schema("TFRecord", options.reader_schema.as_ref())?;
        Ok(Box::new(TfRecords {
            format: *self,
            inputs: inputs.to_vec(),
            next_input: 0,
            options: options.clone(),
            current: None,
        }))
    }

    /// Reads every frame, both CRCs checked unless `options` turn them
    /// off.
    fn count(&self, input: &Input, options: &ReadOptions) -> Result<u64, BoxError> {
        Ok(report::count_records(self, input, options)?)
    }

    /// Reads every frame with both CRCs checked; when the file is
    /// uncompressed and `<file>.idx` is there, checks that it lists
    /// exactly the file's frames. Details: the bytes framed, and whether
    /// the index matches.
    fn verify(&self, input: &Input) -> Result<Verified, VerifyFailure> {
        report::verify(self, input)
    }

    /// The features (or, with `sequence`, the context features and
    /// feature lists) of the first records: their kinds, in how many
    /// records each appears, and how many values (and steps) it holds.
    fn inspect(
        &self,
        name: &str,
        inputs: &[Input],
        options: &InspectOptions,
    ) -> Result<Report, BoxError> {
        Ok(report::inspect(self, name, inputs, options)?)
    }

    /// Writes DALI's `<file>.idx` (one `<offset> <frame length>` line per
    /// record) atomically, after reading every frame (with CRC checks
    /// unless `options` turn them off); compressed files are refused.
    fn write_index(&self, input: &Input, options: &ReadOptions) -> Result<u64, BoxError> {
        Ok(report::write_index(self, input, options)?)
    }

    fn index_file(&self, input: &Input) -> Option<Input> {
        Some(input.with_suffix(".idx"))
    }

    /// Samples the first `options.records` records (see
    /// [`sample_example`](crate::sample_example) and
    /// [`SpecSampler`](grist_tensor::SpecSampler) for the rules); files with
    /// no records are an error.
    fn infer_spec(&self, inputs: &[Input], options: &InferOptions) -> Result<Inferred, BoxError> {
        grist_tensor::no_reader_schema("TFRecord", options.reader_schema.as_ref())?;
        let record_options = RecordOptions::default().with_read(options.read.clone());
        let mut records = self.records(inputs, &record_options)?;
        let mut sampler = SpecSampler::new();
        while sampler.records() < options.records {
            let Some(r) = records.next_record()? else {
                break;
            };
            crate::infer::sample_example(&r.bytes, &r.at, options.sequence, &mut sampler)?;
        }
        Ok(sampler.finish_for(inputs, options.sequence)?)
    }
}

/// The frames of `input` by its index file `<input>.idx`, each checked to
/// lie inside the file.
fn index_entries(input: &Input) -> Result<Vec<(u64, u64)>> {
    let index = input.with_suffix(".idx");
    let text = index.read_all()?;
    let size = input.size()?;
    let entries = parse_index(&text, index.name())?;
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            if e.offset.checked_add(e.len).is_none_or(|end| end > size) {
                Err(Error::BadIndex {
                    file: index.name().clone(),
                    line: i as u64 + 1,
                    reason: format!(
                        "frame {} +{} ends past the end of the {size}-byte file",
                        e.offset, e.len
                    ),
                })
            } else {
                Ok((e.offset, e.len))
            }
        })
        .collect()
}

/// Indexed TFRecord files, read by record number.
#[derive(Debug)]
struct Indexed {
    files: FramedFiles,
    options: ReaderOptions,
}

impl ByNumber for Indexed {
    fn counts(&self) -> Vec<u64> {
        self.files.counts()
    }

    fn read(&self, wants: &[(usize, u64)], _defer_checks: bool) -> Result<Gathered, BoxError> {
        self.files.read(wants, |input, r, offset, frame| {
            let len = frame.len();
            let mut dec = FrameDecoder::with_options(input.name().clone(), &self.options)
                .with_position(r, offset);
            match dec.decode(&frame)? {
                Decoded::Frame(fr) if fr.len == len => Ok(frame.slice(fr.payload)),
                other => Err(Box::new(grist_tensor::TensorError::BadIndex {
                    at: Box::new(grist_tensor::Location::record(input.name().clone(), r)),
                    reason: format!(
                        "the index says the frame at {offset} is {len} bytes, the file's frame {}",
                        match other {
                            Decoded::Frame(fr) => format!("is {} bytes", fr.len),
                            Decoded::Incomplete { needed } => format!("needs {needed} bytes"),
                        }
                    ),
                })),
            }
        })
    }
}

impl grist_tensor::Decoder for ExampleDecoder {
    fn clone_box(&self) -> Box<dyn grist_tensor::Decoder> {
        Box::new(self.clone())
    }

    fn specs(&self) -> &[FeatureSpec] {
        ExampleDecoder::specs(self)
    }

    fn new_batch(&self, rows: usize) -> BatchBuilder {
        ExampleDecoder::new_batch(self, rows)
    }

    fn decode_chunk(
        &mut self,
        chunk: &Chunk,
        rows: Range<usize>,
        out: &mut BatchBuilder,
    ) -> Result<Option<usize>, BoxError> {
        for i in rows {
            let number = chunk.first_record.saturating_add(i as u64);
            let record = chunk.record(i).ok_or_else(|| Error::RecordOutOfRange {
                file: chunk.file.clone(),
                record: number,
                count: chunk.first_record.saturating_add(chunk.record_count as u64),
            })?;
            self.decode_numbered(record, &chunk.file, number, None, out)?;
        }
        Ok(None)
    }

    fn decode_record(
        &mut self,
        file: &Arc<str>,
        record: &Record,
        out: &mut BatchBuilder,
    ) -> Result<(), BoxError> {
        Ok(self.decode_numbered(&record.payload, file, record.record, None, out)?)
    }

    /// Checks the data CRCs of the frames of `rows`, as the frame decoder
    /// would have: a mismatch is TensorFlow's `corrupted record at
    /// <payload offset>`.
    fn verify(&self, chunk: &Chunk, rows: Range<usize>) -> Result<(), BoxError> {
        let RecordLayout::Spans(spans) = &chunk.layout else {
            return Ok(());
        };
        for row in rows {
            let Some(span) = spans.get(row) else {
                // Not a row of the chunk: decoding reports it.
                return Ok(());
            };
            if !data_crc_matches(&chunk.data, span.clone()) {
                return Err(Box::new(Error::CorruptData {
                    at: Box::new(Location::record(
                        chunk.file.clone(),
                        chunk.first_record.saturating_add(row as u64),
                    )),
                    offset: chunk.offset + span.start as u64,
                }));
            }
        }
        Ok(())
    }
}

/// TFRecord files record by record, each handed out as soon as its frame
/// is read and checked (so that the records before a damaged one, also in
/// a compressed stream, come out first).
struct TfRecords {
    format: TfRecordFormat,
    inputs: Vec<Input>,
    next_input: usize,
    options: RecordOptions,
    /// The file being read.
    current: Option<report::FileReader>,
}

impl Records for TfRecords {
    fn next_record(&mut self) -> Result<Option<RawRecord>, BoxError> {
        loop {
            let Some(reader) = &mut self.current else {
                let Some(input) = self.inputs.get(self.next_input) else {
                    return Ok(None);
                };
                self.next_input += 1;
                let compression = self.format.compression_of(input);
                let options = report::reader_options(&self.options.read);
                self.current = Some(report::open(input, compression, options)?);
                continue;
            };
            match reader.next_record()? {
                Some(payload) => {
                    let bytes = Bytes::copy_from_slice(payload);
                    let at = grist_tensor::Location::record(
                        reader.name().clone(),
                        reader.record_index(),
                    );
                    return Ok(Some(RawRecord { at, bytes }));
                }
                None => self.current = None,
            }
        }
    }

    fn to_json(&self, record: &RawRecord) -> Result<serde_json::Value, BoxError> {
        let at = Location::record(record.at.file.clone(), record.at.record.unwrap_or_default());
        Ok(if self.options.sequence {
            sequence_example_to_json(&record.bytes, &at)?
        } else {
            example_to_json(&record.bytes, &at)?
        })
    }
}
