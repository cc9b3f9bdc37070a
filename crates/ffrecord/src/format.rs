//! [`FfrFormat`]: FFRecord behind the format contract
//! ([`grist_tensor::Format`]): the `.ffr` extension and the header's
//! shape, samples read by number (CRC-32 checks optionally left to the
//! parse threads), payload decoders, and samples one by one.

use std::ops::Range;
use std::sync::Arc;

use grist_tensor::{
    BatchBuilder, BoxError, ByNumber, Chunk, ChunkPos, ChunkStream, FeatureSpec, Format, Gathered,
    InferOptions, Inferred, Input, InspectOptions, Limits, NameMatch, RandomAccess, RawRecord,
    ReadOptions, Record, RecordOptions, RecordSource, Records, Report, SpecFile, SpecSampler,
    TensorError, Verified, VerifyFailure, WriteOptions,
};

use crate::decoder::PayloadDecoder;
use crate::error::Error;
use crate::header::{PREFIX_LEN, check_sample, crc32, header_len};
use crate::reader::{FfrReader, ReaderOptions};
use crate::report;
use crate::source::FfrSource;

/// What FFRecord samples hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Payload {
    /// Serialized `tf.train.Example` (or `SequenceExample`) records.
    #[default]
    Example,
    /// Serialized OneFlow `OFRecord`s.
    OfRecord,
    /// The raw little-endian bytes of one tensor, decoded by a spec of
    /// exactly one dense feature (see [`RawDecoder`](crate::RawDecoder)).
    Raw,
}

impl Payload {
    /// The payload named `name` (`example`, `ofrecord`, `raw`).
    pub fn from_name(name: &str) -> Option<Payload> {
        match name.to_ascii_lowercase().as_str() {
            "example" | "tf.example" | "tfexample" => Some(Payload::Example),
            "ofrecord" => Some(Payload::OfRecord),
            "raw" => Some(Payload::Raw),
            _ => None,
        }
    }
}

/// FFRecord files (HFAiLab), as a [`Format`].
///
/// A file is FFRecord by its name when it ends in `.ffr`, by its content
/// when its header fits: the sample count leaves room for its `12 + 12·N`
/// header, and the metadata CRC-32 (or, for a header longer than what was
/// looked at, the first sample's offset) agrees. A folder's `*.ffr` files
/// make one dataset in plain string order, as HFAiLab's reader sorts
/// them. Samples are always read by number. What they hold is the
/// [`Payload`]: set it with [`with_payload`](Self::with_payload), or by
/// name through [`Format::configure`]`("payload", "ofrecord")`.
///
/// ```
/// use grist_ffrecord::{FfrFormat, encode_file};
/// use grist_tensor::{Format, NameMatch};
///
/// let file = encode_file([&b"one"[..], b"two"]);
/// assert!(FfrFormat::default().sniff(&file, file.len() as u64));
/// assert_eq!(FfrFormat::default().name_match("PART_00000.ffr"), NameMatch::Extension);
/// assert!(FfrFormat::default().configure("payload", "ofrecord").is_ok());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FfrFormat {
    payload: Payload,
}

impl FfrFormat {
    /// The format whose samples hold `payload`.
    pub fn with_payload(payload: Payload) -> Self {
        FfrFormat { payload }
    }

    /// What the samples hold.
    pub fn payload(&self) -> Payload {
        self.payload
    }

    pub(crate) fn open(
        &self,
        inputs: &[Input],
        options: ReaderOptions,
    ) -> Result<FfrReader, Error> {
        FfrReader::open_inputs(inputs, options)
    }
}

/// The reader options of the contract's read options.
fn reader_options(options: &ReadOptions) -> ReaderOptions {
    ReaderOptions::default()
        .with_check_data(options.check_crc)
        .with_limits(options.limits)
        .with_access(options.access)
}

impl Format for FfrFormat {
    fn id(&self) -> &'static str {
        "ffrecord"
    }

    fn name(&self) -> &'static str {
        "FFRecord"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &[".ffr"]
    }

    fn name_match(&self, name: &str) -> NameMatch {
        if name.to_ascii_lowercase().ends_with(".ffr") {
            NameMatch::Extension
        } else {
            NameMatch::No
        }
    }

    fn sniff(&self, head: &[u8], size: u64) -> bool {
        let (Some(stored), Some(count)) = (
            head.first_chunk::<4>().map(|b| u32::from_le_bytes(*b)),
            head.get(4..PREFIX_LEN)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default())),
        ) else {
            return false;
        };
        let Some(len) = header_len(count).filter(|&len| len <= size) else {
            return false;
        };
        match usize::try_from(len).ok().and_then(|len| head.get(4..len)) {
            // The whole header is here: its checksum decides (a stored 0
            // is a legacy file: the offsets must then start right after
            // the header).
            Some(meta) if stored != 0 => crc32(meta) == stored,
            _ => {
                // The first offset must be the header's end.
                let at = PREFIX_LEN as u64 + 4 * count;
                count > 0
                    && usize::try_from(at)
                        .ok()
                        .and_then(|at| head.get(at..at + 8))
                        .is_some_and(|b| {
                            u64::from_le_bytes(b.try_into().unwrap_or_default()) == len
                        })
            }
        }
    }

    fn configure(&self, key: &str, value: &str) -> Result<Arc<dyn Format>, BoxError> {
        match (key, Payload::from_name(value)) {
            ("payload", Some(payload)) => Ok(Arc::new(FfrFormat { payload })),
            _ => Err(Box::new(TensorError::Unsupported {
                what: format!(
                    "FFRecord: unknown option {key}={value}: the option is payload=example, \
                     payload=ofrecord or payload=raw"
                ),
            })),
        }
    }

    /// The payload's encoder (tf.Example or OFRecord): its spec, written
    /// beside FFRecord files, reads them back with the same payload.
    fn encoder(
        &self,
        spec: &SpecFile,
        options: &WriteOptions,
    ) -> Result<Box<dyn grist_tensor::Encoder>, BoxError> {
        crate::sink::encoder(crate::sink::payload(self.payload, options)?, spec, options)
    }

    /// The header holds the count and every sample's offset: known up
    /// front, the samples are written in place rather than moved.
    fn wants_record_counts(&self) -> bool {
        true
    }

    fn create(
        &self,
        storage: &grist_io::Storage,
        address: &grist_io::Address,
        spec: &SpecFile,
        options: &WriteOptions,
    ) -> Result<Box<dyn grist_tensor::RecordSink>, BoxError> {
        let _ = spec;
        crate::sink::payload(self.payload, options)?;
        Ok(Box::new(crate::sink::FfrSink::create(storage, address)?))
    }

    fn decoder(
        &self,
        spec: &SpecFile,
        limits: Limits,
    ) -> Result<Box<dyn grist_tensor::Decoder>, BoxError> {
        grist_tensor::no_reader_schema("FFRecord", spec.reader_schema.as_ref())?;
        let no_sequence = || {
            if spec.sequence {
                Err(TensorError::Unsupported {
                    what: "FFRecord: context/sequence features are for tf.SequenceExample \
                           payloads"
                        .into(),
                })
            } else {
                Ok(())
            }
        };
        let decoder = match self.payload {
            Payload::Example => PayloadDecoder::Example(
                grist_tfrecord::ExampleDecoder::from_spec_file(spec)?.with_limits(limits),
            ),
            Payload::OfRecord => {
                no_sequence()?;
                PayloadDecoder::OfRecord(
                    grist_ofrecord::OfRecordDecoder::new(&spec.features)?.with_limits(limits),
                )
            }
            Payload::Raw => {
                no_sequence()?;
                match &spec.features[..] {
                    [one] => PayloadDecoder::raw(one)?,
                    other => {
                        return Err(Box::new(TensorError::Unsupported {
                            what: format!(
                                "FFRecord: a raw tensor sample decodes into one dense feature, \
                                 not {}",
                                other.len()
                            ),
                        }));
                    }
                }
            }
        };
        Ok(Box::new(decoder))
    }

    fn stream(
        &self,
        input: &Input,
        pos: ChunkPos,
        options: &ReadOptions,
    ) -> Result<Box<dyn ChunkStream>, BoxError> {
        let reader = self.open(std::slice::from_ref(input), reader_options(options))?;
        Ok(Box::new(FfrStream {
            source: FfrSource::new(reader)
                .with_chunk_bytes(options.chunk_bytes)
                .starting_at(pos.record, pos.index),
        }))
    }

    fn random_access(
        &self,
        inputs: &[Input],
        mode: RandomAccess,
        shuffle: bool,
    ) -> Result<bool, BoxError> {
        // By number, in order or in an exact permutation; but shuffled
        // samples of an object store would cost a request each: those are
        // streamed, and shuffled by the loader's buffer.
        Ok(match mode {
            RandomAccess::Off => false,
            RandomAccess::Required => true,
            _ => !(shuffle && inputs.iter().any(Input::is_remote)),
        })
    }

    fn by_number(
        &self,
        inputs: &[Input],
        options: &ReadOptions,
    ) -> Result<Box<dyn ByNumber>, BoxError> {
        let reader = self.open(inputs, reader_options(options))?;
        let first = reader.files().iter().map(|f| f.first_index()).collect();
        Ok(Box::new(Samples { reader, first }))
    }

    fn records(
        &self,
        inputs: &[Input],
        options: &RecordOptions,
    ) -> Result<Box<dyn Records>, BoxError> {
        grist_tensor::no_reader_schema("FFRecord", options.reader_schema.as_ref())?;
        let reader = self.open(inputs, reader_options(&options.read))?;
        match (self.payload, options.sequence) {
            (Payload::Raw, _) => {}
            (Payload::OfRecord, true) => {
                return Err(Box::new(TensorError::Unsupported {
                    what: "FFRecord: --sequence is for tf.SequenceExample payloads".into(),
                }));
            }
            _ => {}
        }
        Ok(Box::new(FfrRecords {
            firsts: reader
                .files()
                .iter()
                .map(|f| (f.name().clone(), f.first_index()))
                .collect(),
            source: reader.source(),
            chunk: None,
            payload: self.payload,
            sequence: options.sequence,
        }))
    }

    /// Samples are numbered across a dataset's files; within its file, a
    /// sample's number is its `local_index` (HFAiLab's name).
    fn local_index_key(&self) -> Option<&'static str> {
        Some("local_index")
    }

    fn record_noun(&self) -> &'static str {
        "sample"
    }

    /// The sample count of the file's header, its metadata CRC-32 checked
    /// (unless `options` turn checks off) and its offsets validated; the
    /// samples are not read.
    fn count(&self, input: &Input, options: &ReadOptions) -> Result<u64, BoxError> {
        Ok(self
            .open(std::slice::from_ref(input), reader_options(options))?
            .len())
    }

    /// Reads the header (metadata CRC-32, offsets) and every sample
    /// against its CRC-32. Details: the bytes of samples, and whether the
    /// header is a legacy one (its checksum stored as 0).
    fn verify(&self, input: &Input) -> Result<Verified, VerifyFailure> {
        report::verify(self, input)
    }

    /// Each file's sample count, whether its header is a legacy one, the
    /// sizes of its header, samples and file, and its smallest and
    /// largest sample, from the headers (read and checked; samples are not
    /// read).
    fn inspect(
        &self,
        name: &str,
        inputs: &[Input],
        options: &InspectOptions,
    ) -> Result<Report, BoxError> {
        if options.sequence {
            return Err(Box::new(TensorError::Unsupported {
                what: "--sequence is for TFRecord files of tf.SequenceExamples, not FFRecord"
                    .into(),
            }));
        }
        Ok(report::inspect(self, name, inputs)?)
    }

    /// Samples the first `options.records` samples, read as the payload
    /// says: tf.Example / SequenceExample
    /// ([`grist_tfrecord::sample_example`]) or OFRecord
    /// ([`grist_ofrecord::sample_ofrecord`]) under the rules of
    /// [`SpecSampler`](grist_tensor::SpecSampler). Raw payloads carry no
    /// feature names and are refused; files with no samples are an error.
    fn infer_spec(&self, inputs: &[Input], options: &InferOptions) -> Result<Inferred, BoxError> {
        grist_tensor::no_reader_schema("FFRecord", options.reader_schema.as_ref())?;
        let sequence = match (self.payload, options.sequence) {
            (Payload::Raw, _) => {
                return Err(Box::new(TensorError::Unsupported {
                    what: format!(
                        "{}: raw FFRecord samples name no features and carry no dtype, so no                          spec can be inferred from them; write a spec of one dense feature                          (or give --payload example / ofrecord)",
                        grist_tensor::inputs_named(inputs)
                    ),
                }));
            }
            (Payload::OfRecord, Some(true)) => {
                return Err(Box::new(TensorError::Unsupported {
                    what: "FFRecord: --sequence is for tf.SequenceExample payloads".into(),
                }));
            }
            (Payload::OfRecord, _) => Some(false),
            (Payload::Example, sequence) => sequence,
        };
        let record_options = RecordOptions::default().with_read(options.read.clone());
        let mut records = self.records(inputs, &record_options)?;
        let mut sampler = SpecSampler::new();
        while sampler.records() < options.records {
            let Some(r) = records.next_record()? else {
                break;
            };
            match self.payload {
                Payload::OfRecord => {
                    grist_ofrecord::sample_ofrecord(&r.bytes, &r.at, &mut sampler)?;
                }
                _ => grist_tfrecord::sample_example(&r.bytes, &r.at, sequence, &mut sampler)?,
            }
        }
        Ok(sampler.finish_for(inputs, sequence)?)
    }

    fn write_index(&self, input: &Input, _options: &ReadOptions) -> Result<u64, BoxError> {
        Err(Box::new(TensorError::Unsupported {
            what: format!(
                "{}: FFRecord files have no index files: an FFRecord file holds its samples' \
                 offsets in its header (index files are for TFRecord files)",
                input.name()
            ),
        }))
    }
}

/// An FFRecord file read as a stream of runs of consecutive samples.
struct FfrStream {
    source: FfrSource,
}

impl ChunkStream for FfrStream {
    fn next_chunk(&mut self) -> Result<Option<(Chunk, ChunkPos)>, BoxError> {
        Ok(self.source.next_chunk()?.map(|c| {
            let next = ChunkPos {
                index: c.index + 1,
                record: c.first_record + c.record_count as u64,
                offset: c.offset + c.stored_bytes,
            };
            (c, next)
        }))
    }
}

/// An FFRecord dataset read by sample number.
#[derive(Debug)]
struct Samples {
    reader: FfrReader,
    /// The dataset number of each file's first sample.
    first: Vec<u64>,
}

impl ByNumber for Samples {
    fn counts(&self) -> Vec<u64> {
        self.reader.files().iter().map(|f| f.count()).collect()
    }

    fn read(&self, wants: &[(usize, u64)], defer_checks: bool) -> Result<Gathered, BoxError> {
        let globals: Vec<u64> = wants.iter().map(|&(f, r)| self.first[f] + r).collect();
        // Checked by the parse threads when deferred.
        let defer = defer_checks && self.reader.options().check_data();
        let samples = if defer {
            self.reader.read_unchecked(&globals)?
        } else {
            self.reader.read(&globals)?
        };
        let mut bytes = 0;
        let records = wants
            .iter()
            .zip(globals)
            .zip(samples)
            .map(|((&(input, record), global), s)| {
                bytes += s.data.len() as u64;
                Record {
                    input,
                    record,
                    global,
                    payload: s.data,
                    check: defer.then_some(s.crc),
                }
            })
            .collect();
        Ok(Gathered { records, bytes })
    }
}

impl grist_tensor::Decoder for PayloadDecoder {
    fn clone_box(&self) -> Box<dyn grist_tensor::Decoder> {
        Box::new(self.clone())
    }

    fn specs(&self) -> &[FeatureSpec] {
        PayloadDecoder::specs(self)
    }

    fn new_batch(&self, rows: usize) -> BatchBuilder {
        PayloadDecoder::new_batch(self, rows)
    }

    /// Decodes rows of a chunk of consecutive samples; errors name the
    /// file and the sample's number within it.
    fn decode_chunk(
        &mut self,
        chunk: &Chunk,
        rows: Range<usize>,
        out: &mut BatchBuilder,
    ) -> Result<Option<usize>, BoxError> {
        for i in rows {
            let sample = chunk.first_record.saturating_add(i as u64);
            let Some(payload) = chunk.record(i) else {
                return Err(Box::new(Error::IndexOutOfRange {
                    index: sample,
                    count: chunk.first_record.saturating_add(chunk.record_count as u64),
                }));
            };
            self.decode(payload, &chunk.file, sample, None, out)?;
        }
        Ok(None)
    }

    fn decode_record(
        &mut self,
        file: &Arc<str>,
        record: &Record,
        out: &mut BatchBuilder,
    ) -> Result<(), BoxError> {
        Ok(self.decode(
            &record.payload,
            file,
            record.record,
            Some(record.global),
            out,
        )?)
    }

    fn verify_record(&self, file: &Arc<str>, record: &Record) -> Result<(), BoxError> {
        if let Some(stored) = record.check {
            check_sample(&record.payload, stored, || {
                grist_tensor::Location::record(file.clone(), record.record)
                    .with_index(record.global)
            })?;
        }
        Ok(())
    }
}

/// An FFRecord dataset sample by sample, numbered across its files.
struct FfrRecords {
    source: FfrSource,
    /// Each file's name and the dataset number of its first sample.
    firsts: Vec<(Arc<str>, u64)>,
    chunk: Option<(Chunk, usize)>,
    payload: Payload,
    sequence: bool,
}

impl Records for FfrRecords {
    fn next_record(&mut self) -> Result<Option<RawRecord>, BoxError> {
        loop {
            if let Some((c, at)) = &mut self.chunk {
                if let grist_tensor::RecordLayout::Spans(spans) = &c.layout {
                    if let Some(span) = spans.get(*at) {
                        let record = c.first_record + *at as u64;
                        let first = self
                            .firsts
                            .iter()
                            .find(|(name, _)| Arc::ptr_eq(name, &c.file))
                            .map_or(0, |(_, first)| *first);
                        *at += 1;
                        return Ok(Some(RawRecord {
                            at: grist_tensor::Location::record(c.file.clone(), record)
                                .with_index(first + record),
                            bytes: c.data.slice(span.clone()),
                        }));
                    }
                }
            }
            match self.source.next_chunk()? {
                Some(c) => self.chunk = Some((c, 0)),
                None => return Ok(None),
            }
        }
    }

    fn to_json(&self, record: &RawRecord) -> Result<serde_json::Value, BoxError> {
        let (file, sample) = (record.at.file.clone(), record.at.record.unwrap_or_default());
        Ok(match self.payload {
            Payload::Example => {
                let at = grist_tfrecord::Location::record(file, sample);
                if self.sequence {
                    grist_tfrecord::sequence_example_to_json(&record.bytes, &at)?
                } else {
                    grist_tfrecord::example_to_json(&record.bytes, &at)?
                }
            }
            Payload::OfRecord => {
                let at = grist_ofrecord::Location::record(file, sample);
                grist_ofrecord::Record::parse_at(&record.bytes, &at)?.to_json()
            }
            Payload::Raw => {
                return Err(Box::new(TensorError::Unsupported {
                    what: "FFRecord: records decode tf.Example or OFRecord samples; raw tensor \
                           samples print raw, or as batches with a spec"
                        .into(),
                }));
            }
        })
    }
}
