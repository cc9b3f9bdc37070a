//! [`OfRecordFormat`]: OneFlow's OFRecord parts behind the format contract
//! ([`grist_tensor::Format`]): `part-<digits>` names, parts in numeric
//! order, streams of record runs, records by number through an index
//! built from the length prefixes, the OFRecord decoder, and records one by
//! one.

use std::io::{self, BufRead, BufReader, Read};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use grist_tensor::{
    BatchBuilder, BoxError, ByNumber, Chunk, ChunkPos, ChunkStream, FeatureSpec, Format,
    FramedFile, FramedFiles, Gathered, InferOptions, Inferred, Input, InspectOptions, Limits,
    NameMatch, RandomAccess, RawRecord, ReadOptions, Record, RecordOptions, Records, Report,
    SpecFile, SpecSampler, TensorError, Verified, VerifyFailure, WriteOptions,
};

use crate::dataset::PartNaming;
use crate::decoder::OfRecordDecoder;
use crate::error::{Error, Result};
use crate::framing::{Decoded, FrameDecoder, ReaderOptions};
use crate::record::Record as OfRecord;
use crate::report;
use crate::sink::{OfRecordEncoder, OfRecordSink};
use crate::source::OfStream;
use grist_tensor::Location;

/// OFRecord part files, as a [`Format`].
///
/// A file is OFRecord by its name when it is `part-` and digits (with no
/// extension: `part-00000.tfrecord` is TFRecord), by its content when its
/// first length prefix fits the file and the record after it starts like
/// an OFRecord's feature map. A folder's parts are read in numeric order
/// and must be numbered `0..n` without a gap; other files are left out.
///
/// Parts named otherwise (`train-000`, ...) take OneFlow's options:
/// [`with_naming`](Self::with_naming), or [`Format::configure`] with
/// `part_name_prefix` (by default `part-`) and `part_name_suffix_length`
/// (the index padded to that many digits, exactly, as OneFlow names the
/// parts; −1, as in OneFlow, or by default: any number of digits).
///
/// ```
/// use grist_ofrecord::OfRecordFormat;
/// use grist_tensor::{Format, NameMatch};
///
/// assert_eq!(OfRecordFormat::default().name_match("part-00003"), NameMatch::Name);
/// assert_eq!(OfRecordFormat::default().name_match("part-r-00003.avro"), NameMatch::No);
/// let train = OfRecordFormat::default()
///     .configure("part_name_prefix", "train-")?
///     .configure("part_name_suffix_length", "3")?;
/// assert_eq!(train.name_match("train-007"), NameMatch::Name);
/// assert_eq!(train.name_match("train-7"), NameMatch::No);
/// # Ok::<(), grist_tensor::BoxError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OfRecordFormat {
    framing: ReaderOptions,
    naming: PartNaming,
}

impl OfRecordFormat {
    /// The format read with framing options `framing` (zero-length
    /// records, buffer sizes).
    pub fn with_framing(framing: ReaderOptions) -> Self {
        OfRecordFormat {
            framing,
            ..Default::default()
        }
    }

    /// The format whose folders hold parts named by `naming` (OneFlow's
    /// `part_name_prefix` and `part_name_suffix_length`). By default,
    /// `part-` and any number of digits.
    #[must_use]
    pub fn with_naming(mut self, naming: PartNaming) -> Self {
        self.naming = naming;
        self
    }

    /// The part index of the file called `name`, if it is a part's name:
    /// the prefix and digits, exactly as many as the suffix length when
    /// one is set (`Err` for an index too large).
    fn part_index(&self, name: &str) -> Option<Result<usize, ()>> {
        let digits = name.strip_prefix(self.naming.prefix())?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        match self.naming.suffix_length() {
            Some(_) => Some(self.naming.index_of(name).ok_or(())).filter(|i| i.is_ok()),
            None => Some(digits.parse().map_err(|_| ())),
        }
    }
}

impl Format for OfRecordFormat {
    fn id(&self) -> &'static str {
        "ofrecord"
    }

    fn name(&self) -> &'static str {
        "OFRecord"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["(part-<digits>)"]
    }

    fn name_match(&self, name: &str) -> NameMatch {
        match self.part_index(name) {
            Some(_) => NameMatch::Name,
            None => NameMatch::No,
        }
    }

    /// `part_name_prefix` (any text) and `part_name_suffix_length` (an
    /// integer; negative: no padding), OneFlow's options for naming the
    /// parts of a folder.
    fn configure(&self, key: &str, value: &str) -> Result<Arc<dyn Format>, BoxError> {
        let naming = match key {
            "part_name_prefix" => PartNaming::new(value, self.naming.suffix_length()),
            "part_name_suffix_length" => {
                let Ok(n) = value.trim().parse::<i64>() else {
                    return Err(Box::new(TensorError::Unsupported {
                        what: format!(
                            "OFRecord: part_name_suffix_length {value:?} is not an integer"
                        ),
                    }));
                };
                PartNaming::oneflow(self.naming.prefix(), n)
            }
            _ => {
                return Err(Box::new(TensorError::Unsupported {
                    what: format!(
                        "OFRecord: unknown option {key:?} (= {value:?}): it takes \
                         part_name_prefix and part_name_suffix_length"
                    ),
                }));
            }
        };
        Ok(Arc::new(self.clone().with_naming(naming)))
    }

    fn sniff(&self, head: &[u8], size: u64) -> bool {
        let Some(len) = head.first_chunk::<8>().map(|b| i64::from_le_bytes(*b)) else {
            return false;
        };
        // A record of at least one feature, wholly in the file, starting
        // with the feature map's tag (field 1, length-delimited).
        let Ok(len) = u64::try_from(len) else {
            return false;
        };
        if len == 0 || len.checked_add(8).is_none_or(|end| end > size) {
            return false;
        }
        match head.get(8..) {
            Some(payload) if (payload.len() as u64) >= len => {
                OfRecord::parse(&payload[..len as usize]).is_ok_and(|r| !r.features.is_empty())
            }
            Some([0x0a, ..]) => true,
            _ => false,
        }
    }

    fn dataset(&self, dir: &str, files: Vec<Input>) -> Result<Vec<Input>, BoxError> {
        let mut parts: Vec<(usize, Input)> = Vec::new();
        for f in &files {
            let name = f.file_name();
            match self.part_index(name) {
                None => continue,
                Some(Ok(index)) => parts.push((index, f.clone())),
                Some(Err(())) => {
                    return Err(Box::new(Error::BadDataset {
                        dir: dir.into(),
                        reason: format!("part number of {name:?} is too large"),
                    }));
                }
            }
        }
        if parts.is_empty() {
            // Named otherwise (the format was given): every file, by name.
            return Ok(files);
        }
        parts.sort_by_key(|(i, _)| *i);
        for (i, (index, _)) in parts.iter().enumerate() {
            if *index != i {
                if *index < i {
                    return Err(Box::new(Error::BadDataset {
                        dir: dir.into(),
                        reason: format!("part {index} is there under two names"),
                    }));
                }
                return Err(Box::new(Error::MissingPart {
                    file: std::path::Path::new(dir).join(self.naming.name(i)),
                    part: i,
                }));
            }
        }
        Ok(parts.into_iter().map(|(_, f)| f).collect())
    }

    fn encoder(
        &self,
        spec: &SpecFile,
        options: &WriteOptions,
    ) -> std::result::Result<Box<dyn grist_tensor::Encoder>, BoxError> {
        Ok(Box::new(OfRecordEncoder::new(spec, options)?))
    }

    /// One part file at `address` (name it `part-<digits>`, as
    /// [`part_name`](Format::part_name) does, for it to be found as a
    /// part of a dataset).
    fn create(
        &self,
        storage: &grist_io::Storage,
        address: &grist_io::Address,
        spec: &SpecFile,
        options: &WriteOptions,
    ) -> std::result::Result<Box<dyn grist_tensor::RecordSink>, BoxError> {
        let _ = (spec, options);
        Ok(Box::new(OfRecordSink::create(storage, address)?))
    }

    fn part_name(&self, part: usize, options: &WriteOptions) -> String {
        let _ = options;
        format!("part-{part:05}")
    }

    fn decoder(
        &self,
        spec: &SpecFile,
        limits: Limits,
    ) -> Result<Box<dyn grist_tensor::Decoder>, BoxError> {
        grist_tensor::no_reader_schema("OFRecord", spec.reader_schema.as_ref())?;
        if spec.sequence {
            return Err(Box::new(TensorError::Unsupported {
                what: "OFRecord: context/sequence features are for tf.SequenceExample records"
                    .into(),
            }));
        }
        Ok(Box::new(
            OfRecordDecoder::new(&spec.features)?.with_limits(limits),
        ))
    }

    fn stream(
        &self,
        input: &Input,
        pos: ChunkPos,
        options: &ReadOptions,
    ) -> Result<Box<dyn ChunkStream>, BoxError> {
        Ok(Box::new(OfStream::open(
            input,
            pos,
            options,
            &self.framing,
        )?))
    }

    fn random_access(
        &self,
        inputs: &[Input],
        mode: RandomAccess,
        shuffle: bool,
    ) -> Result<bool, BoxError> {
        // The index is built from the length prefixes on first read: worth
        // it for an exact shuffle, of local parts (records of an object
        // store would cost a request each).
        Ok(match mode {
            RandomAccess::Off => false,
            RandomAccess::Required => true,
            _ => shuffle && !inputs.iter().any(Input::is_remote),
        })
    }

    fn by_number(
        &self,
        inputs: &[Input],
        options: &ReadOptions,
    ) -> Result<Box<dyn ByNumber>, BoxError> {
        let framing = self.framing.with_limits(options.limits);
        let files = inputs
            .iter()
            .map(|input| {
                let entries = scan(input, &framing)?;
                Ok(FramedFile::open(input, entries, options)?)
            })
            .collect::<Result<Vec<_>, BoxError>>()?;
        Ok(Box::new(Indexed {
            files: FramedFiles::new(files, options.limits),
            framing,
        }))
    }

    fn records(
        &self,
        inputs: &[Input],
        options: &RecordOptions,
    ) -> Result<Box<dyn Records>, BoxError> {
        grist_tensor::no_reader_schema("OFRecord", options.reader_schema.as_ref())?;
        if options.sequence {
            return Err(Box::new(TensorError::Unsupported {
                what: "OFRecord: --sequence is for tf.SequenceExample records".into(),
            }));
        }
        Ok(Box::new(OfRecords {
            inputs: inputs.to_vec(),
            next_input: 0,
            read: options.read.clone(),
            framing: self.framing,
            current: None,
            global: 0,
        }))
    }

    /// Records are numbered across a dataset's parts; within its part, a
    /// record's number is its `index_in_part`.
    fn local_index_key(&self) -> Option<&'static str> {
        Some("index_in_part")
    }

    /// The records of the part by its length prefixes alone, each checked
    /// as the reader checks it (the payloads are skipped, not parsed).
    fn count(&self, input: &Input, options: &ReadOptions) -> Result<u64, BoxError> {
        let framing = self.framing.with_limits(options.limits);
        Ok(scan(input, &framing)?.len() as u64)
    }

    /// Reads every record of the part and parses each one as an OFRecord
    /// (the format has no checksum). Details: the bytes framed.
    fn verify(&self, input: &Input) -> Result<Verified, VerifyFailure> {
        report::verify(&self.framing, input)
    }

    /// Each part's record count (from the length prefixes), and the
    /// features of the first records: their kinds, in how many records
    /// each appears, and how many values it holds.
    fn inspect(
        &self,
        name: &str,
        inputs: &[Input],
        options: &InspectOptions,
    ) -> Result<Report, BoxError> {
        if options.sequence {
            return Err(Box::new(TensorError::Unsupported {
                what: "--sequence is for TFRecord files of tf.SequenceExamples, not OFRecord"
                    .into(),
            }));
        }
        Ok(report::inspect(&self.framing, name, inputs, options)?)
    }

    /// Samples the first `options.records` records of the parts (see
    /// [`sample_ofrecord`](crate::sample_ofrecord) and
    /// [`SpecSampler`](grist_tensor::SpecSampler) for the rules); parts
    /// with no records are an error, and so is `sequence`.
    fn infer_spec(&self, inputs: &[Input], options: &InferOptions) -> Result<Inferred, BoxError> {
        grist_tensor::no_reader_schema("OFRecord", options.reader_schema.as_ref())?;
        if options.sequence == Some(true) {
            return Err(Box::new(TensorError::Unsupported {
                what: "OFRecord: --sequence is for tf.SequenceExample records".into(),
            }));
        }
        let record_options = RecordOptions::default().with_read(options.read.clone());
        let mut records = self.records(inputs, &record_options)?;
        let mut sampler = SpecSampler::new();
        while sampler.records() < options.records {
            let Some(r) = records.next_record()? else {
                break;
            };
            crate::infer::sample_ofrecord(&r.bytes, &r.at, &mut sampler)?;
        }
        Ok(sampler.finish_for(inputs, Some(false))?)
    }

    fn write_index(&self, input: &Input, _options: &ReadOptions) -> Result<u64, BoxError> {
        Err(Box::new(TensorError::Unsupported {
            what: format!(
                "{}: OFRecord parts have no index files: grist builds a part's index from its \
                 length prefixes when it reads records by number (index files are for TFRecord \
                 files)",
                input.name()
            ),
        }))
    }
}

/// Moves `reader` up to `n` bytes on, past bytes it has buffered without
/// copying them anywhere; how many it moved (fewer at the end).
fn skip(reader: &mut impl BufRead, n: u64) -> io::Result<u64> {
    let mut left = n;
    while left > 0 {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            break;
        }
        let k = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        reader.consume(k);
        left -= k as u64;
    }
    Ok(n - left)
}

/// Reads into `buf` until it is full or the input ends.
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The index of an OFRecord part: each record's frame (offset, length),
/// from its length prefixes, checked as the reader checks them (negative,
/// zero when not accepted, running past the end, over the limits); the
/// first bad one is the error, naming its record.
pub(crate) fn scan(input: &Input, framing: &ReaderOptions) -> Result<Vec<(u64, u64)>> {
    let name = input.name().clone();
    let io = |source: io::Error| match grist_tensor::StorageError::from_io(&name, source) {
        Ok(e) => Error::Storage(e),
        Err(source) => Error::Io {
            file: name.clone(),
            source,
        },
    };
    let size = input.size()?;
    let mut reader = BufReader::with_capacity(1 << 20, input.reader_at(0)?);
    let mut entries = Vec::new();
    let mut offset = 0u64;
    let mut prefix = [0u8; 8];
    while offset < size {
        let record = entries.len() as u64;
        let have = read_up_to(&mut reader, &mut prefix).map_err(io)?;
        let mut dec = FrameDecoder::with_options(name.clone(), framing)
            .with_remaining(size)
            .with_position(record, offset);
        let len = match dec.decode(&prefix[..have])? {
            Decoded::Incomplete { needed } => needed,
            Decoded::Frame(f) => f.len as u64,
        };
        if have < 8 {
            // decode reported nothing wrong with a partial prefix: the
            // file ends inside it.
            dec.finish(&prefix[..have])?;
            break;
        }
        entries.push((offset, len));
        offset += len;
        let payload = len - 8;
        let skipped = skip(&mut reader, payload).map_err(io)?;
        if skipped < payload {
            // The frame decoder checked the length against the bytes left.
            return Err(io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the file ends inside record {record}"),
            )));
        }
    }
    Ok(entries)
}

/// Indexed OFRecord parts, read by record number.
#[derive(Debug)]
struct Indexed {
    files: FramedFiles,
    framing: ReaderOptions,
}

impl ByNumber for Indexed {
    fn counts(&self) -> Vec<u64> {
        self.files.counts()
    }

    fn read(&self, wants: &[(usize, u64)], _defer_checks: bool) -> Result<Gathered, BoxError> {
        self.files.read(wants, |input, r, offset, frame| {
            let mut dec = FrameDecoder::with_options(input.name().clone(), &self.framing)
                .with_position(r, offset);
            match dec.decode(&frame)? {
                Decoded::Frame(fr) if fr.len == frame.len() => Ok(frame.slice(fr.payload)),
                _ => Err(Box::new(TensorError::BadIndex {
                    at: Box::new(grist_tensor::Location::record(input.name().clone(), r)),
                    reason: format!(
                        "the file changed since its index was built (frame at {offset})"
                    ),
                })),
            }
        })
    }
}

impl grist_tensor::Decoder for OfRecordDecoder {
    fn clone_box(&self) -> Box<dyn grist_tensor::Decoder> {
        Box::new(self.clone())
    }

    fn specs(&self) -> &[FeatureSpec] {
        OfRecordDecoder::specs(self)
    }

    fn new_batch(&self, rows: usize) -> BatchBuilder {
        OfRecordDecoder::new_batch(self, rows)
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
}

/// OFRecord parts record by record, numbered across the parts.
struct OfRecords {
    inputs: Vec<Input>,
    next_input: usize,
    read: ReadOptions,
    framing: ReaderOptions,
    /// The part being read and the records of its chunk not handed out.
    current: Option<(OfStream, Option<(Chunk, usize)>)>,
    global: u64,
}

impl Records for OfRecords {
    fn next_record(&mut self) -> Result<Option<RawRecord>, BoxError> {
        loop {
            let Some((stream, chunk)) = &mut self.current else {
                let Some(input) = self.inputs.get(self.next_input) else {
                    return Ok(None);
                };
                self.next_input += 1;
                let stream = OfStream::open(input, ChunkPos::default(), &self.read, &self.framing)?;
                self.current = Some((stream, None));
                continue;
            };
            if let Some((c, at)) = chunk {
                if let grist_tensor::RecordLayout::Spans(spans) = &c.layout {
                    if let Some(span) = spans.get(*at) {
                        let record = c.first_record + *at as u64;
                        // The length prefix is the 8 bytes before the payload.
                        let offset = c.offset + span.start as u64 - 8;
                        let bytes: Bytes = c.data.slice(span.clone());
                        *at += 1;
                        let index = self.global;
                        self.global += 1;
                        return Ok(Some(RawRecord {
                            at: grist_tensor::Location::record(c.file.clone(), record)
                                .with_index(index)
                                .with_offset(offset),
                            bytes,
                        }));
                    }
                }
            }
            match stream.read_chunk()? {
                Some((c, _)) => *chunk = Some((c, 0)),
                None => self.current = None,
            }
        }
    }

    fn to_json(&self, record: &RawRecord) -> Result<serde_json::Value, BoxError> {
        let mut at = Location::record(record.at.file.clone(), record.at.record.unwrap_or_default());
        if let Some(offset) = record.at.offset {
            at = at.with_offset(offset);
        }
        Ok(OfRecord::parse_at(&record.bytes, &at)?.to_json())
    }
}
