//! [`AvroFormat`]: Avro object container files behind the format contract
//! ([`grist_tensor::Format`]): the `.avro` extension and the `Obj\x01`
//! magic, streams of blocks left compressed for the parse threads, the
//! ATDS decoder, and datums one by one.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use grist_tensor::{
    BatchBuilder, BoxError, ByNumber, Chunk, ChunkPos, ChunkStream, FeatureSpec, Format,
    InferOptions, Inferred, Input, InspectOptions, Limits, NameMatch, RandomAccess, RawRecord,
    ReadOptions, RecordOptions, Records, Report, SpecFile, StorageError, TensorError, Verified,
    VerifyFailure, WriteOptions,
};

use crate::codec::Codec;
use crate::container::{BlockReader, Header, MAGIC, ReaderOptions};
use crate::decoder::AvroDecoder;
use crate::error::Error;
use crate::generic::{DatumSchema, datum_to_json};
use crate::report;
use crate::resolve::ReaderSchema;
use crate::sink::{AvroSink, DatumEncoder};
use crate::source::AvroStream;
use grist_tensor::Location;

/// What a count reads at once for a local file's header (its blocks are
/// read where they lie).
const HEADER_READ: usize = 64 << 10;

/// Avro object container files, as a [`Format`].
///
/// A file is Avro by its name when it ends in `.avro`, by its content when
/// it starts with `Obj\x01`. Avro files are read as streams of blocks
/// only (records cannot be found by number without decoding the ones
/// before them).
///
/// ```
/// use grist_avro_tensor::AvroFormat;
/// use grist_tensor::{Format, NameMatch};
///
/// assert_eq!(AvroFormat.name_match("part-r-00000.avro"), NameMatch::Extension);
/// assert!(AvroFormat.sniff(b"Obj\x01\x04\x14avro.codec", 100));
/// assert!(!AvroFormat.sniff(b"Obj\x02", 100));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AvroFormat;

impl Format for AvroFormat {
    fn id(&self) -> &'static str {
        "avro"
    }

    fn name(&self) -> &'static str {
        "Avro"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &[".avro"]
    }

    fn name_match(&self, name: &str) -> NameMatch {
        if name.to_ascii_lowercase().ends_with(".avro") {
            NameMatch::Extension
        } else {
            NameMatch::No
        }
    }

    fn sniff(&self, head: &[u8], _size: u64) -> bool {
        head.starts_with(&MAGIC)
    }

    fn encoder(
        &self,
        spec: &SpecFile,
        options: &WriteOptions,
    ) -> Result<Box<dyn grist_tensor::Encoder>, BoxError> {
        crate::sink::codec(options)?;
        Ok(Box::new(DatumEncoder::new(spec, options)?))
    }

    fn create(
        &self,
        storage: &grist_io::Storage,
        address: &grist_io::Address,
        spec: &SpecFile,
        options: &WriteOptions,
    ) -> Result<Box<dyn grist_tensor::RecordSink>, BoxError> {
        Ok(Box::new(AvroSink::create(storage, address, spec, options)?))
    }

    fn decoder(
        &self,
        spec: &SpecFile,
        limits: Limits,
    ) -> Result<Box<dyn grist_tensor::Decoder>, BoxError> {
        if spec.sequence {
            return Err(Box::new(TensorError::Unsupported {
                what: "Avro: context/sequence features are for tf.SequenceExample records".into(),
            }));
        }
        let mut decoder = AvroDecoder::new(&spec.features)?.with_limits(limits);
        if let Some(reader) = &spec.reader_schema {
            decoder = decoder.with_reader_schema(ReaderSchema::from_value(reader)?);
        }
        Ok(Box::new(decoder))
    }

    fn stream(
        &self,
        input: &Input,
        pos: ChunkPos,
        options: &ReadOptions,
    ) -> Result<Box<dyn ChunkStream>, BoxError> {
        Ok(Box::new(AvroStream::open(input, pos, options)?))
    }

    fn random_access(
        &self,
        _inputs: &[Input],
        mode: RandomAccess,
        _shuffle: bool,
    ) -> Result<bool, BoxError> {
        if mode == RandomAccess::Required {
            return Err(Box::new(TensorError::Unsupported {
                what: "Avro files cannot be read by record number".into(),
            }));
        }
        Ok(false)
    }

    fn by_number(
        &self,
        _inputs: &[Input],
        _options: &ReadOptions,
    ) -> Result<Box<dyn ByNumber>, BoxError> {
        Err(Box::new(TensorError::Unsupported {
            what: "Avro files cannot be read by record number".into(),
        }))
    }

    fn records(
        &self,
        inputs: &[Input],
        options: &RecordOptions,
    ) -> Result<Box<dyn Records>, BoxError> {
        if options.sequence {
            return Err(Box::new(TensorError::Unsupported {
                what: "Avro: --sequence is for tf.SequenceExample records; Avro datums decode \
                       by their writer schema"
                    .into(),
            }));
        }
        let reader = match &options.reader_schema {
            Some(json) => Some(ReaderSchema::from_value(json)?),
            None => None,
        };
        Ok(Box::new(AvroRecords {
            inputs: inputs.to_vec(),
            next_input: 0,
            options: ReaderOptions::default().with_limits(options.read.limits),
            reader,
            current: None,
        }))
    }

    /// The records the blocks claim, together: every block's frame and
    /// sync marker read, no block decompressed, no datum walked.
    fn framed_count(&self, input: &Input, options: &ReadOptions) -> Result<u64, BoxError> {
        let options = ReaderOptions::default().with_limits(options.limits);
        if input.is_remote() {
            // Read in order: a request per block would cost more than the
            // data.
            let reader = BlockReader::new(input.reader_at(0)?, input.name().clone(), options)?;
            return Ok(reader.claimed_records()?);
        }
        // A local file's blocks are framed where they lie: their data (all
        // but a few dozen bytes of each) is never read.
        let object = input.open()?;
        let options = options.with_buffer_size(HEADER_READ);
        let header = object
            .reader(0, 0)
            .map_err(|e| StorageError::new(input.name().clone(), e))?;
        let reader = BlockReader::new(header, input.name().clone(), options)?;
        let read_at = |at: u64, buf: &mut [u8]| {
            object
                .read_range_into(at..at + buf.len() as u64, buf)
                .map_err(|e| Error::Storage(StorageError::new(input.name().clone(), e)))
        };
        Ok(reader.claimed_records_at(object.size(), read_at)?)
    }

    /// Reads every block (sync marker, codec) and every datum, checked
    /// against its block's record count: an Avro block's count alone is
    /// not checked until its datums are walked.
    fn count(&self, input: &Input, options: &ReadOptions) -> Result<u64, BoxError> {
        let options = ReaderOptions::default().with_limits(options.limits);
        Ok(report::count_datums(input, options)?)
    }

    /// Reads every block (sync marker, codec; snappy's CRC-32 too) and
    /// every datum against its block's record count. Details: the blocks
    /// and the codec.
    fn verify(&self, input: &Input) -> Result<Verified, VerifyFailure> {
        report::verify(input)
    }

    /// The codec, the metadata, the number of blocks and records (every
    /// block and datum is read and checked), each top-level field's type,
    /// and the writer schema; for several files, each file's.
    fn inspect(
        &self,
        name: &str,
        inputs: &[Input],
        options: &InspectOptions,
    ) -> Result<Report, BoxError> {
        if options.sequence {
            return Err(Box::new(TensorError::Unsupported {
                what: "--sequence is for TFRecord files of tf.SequenceExamples, not Avro".into(),
            }));
        }
        if let [input] = inputs {
            return Ok(report::inspect(name, input, options)?);
        }
        let mut files = Vec::new();
        let mut text = Vec::new();
        for input in inputs {
            let report = report::inspect(input.name(), input, options)?;
            if !text.is_empty() {
                text.push(String::new());
            }
            text.extend(report.text);
            files.push(report.json);
        }
        let json = serde_json::json!({"file": name, "format": "avro", "files": files});
        Ok(Report::new(json, text))
    }

    /// The spec from the inputs' writer schema, in the ATDS layout
    /// the decoder reads: a primitive field (int, long, float, double,
    /// boolean; string, bytes, enum and fixed as strings) is a dense
    /// scalar; nested arrays of primitives are varlen, of rank their
    /// depth (`shape` all `-1`); a record of arrays `indices0..` (int or
    /// long) and `values` is sparse. A `[null, T]` field reads as `T`, a
    /// null in a dense field as 0 (false, empty). Fields the ATDS layout
    /// cannot read (maps, other unions, arrays of records, other records)
    /// are left out, each with a note naming it, so that the rest can be
    /// read.
    ///
    /// Each other input's header is read too: a feature that another
    /// input's writer schema lacks, or types otherwise, is left out with a
    /// note naming that input.
    ///
    /// The schema gives everything but a sparse feature's shape: that is
    /// the largest index of the first `options.records` records plus one
    /// (a note says so), and a sparse feature no sampled record has an
    /// index for is left out. A file without records still has its
    /// schema, so its spec is inferred all the same.
    fn infer_spec(&self, inputs: &[Input], options: &InferOptions) -> Result<Inferred, BoxError> {
        if options.sequence == Some(true) {
            return Err(Box::new(TensorError::Unsupported {
                what: "Avro: --sequence is for tf.SequenceExample records".into(),
            }));
        }
        Ok(crate::infer::infer(inputs, options)?)
    }

    fn write_index(&self, input: &Input, _options: &ReadOptions) -> Result<u64, BoxError> {
        Err(Box::new(TensorError::Unsupported {
            what: format!(
                "{}: Avro files have no index files: they are read block by block through \
                 their sync markers (index files are for TFRecord files)",
                input.name()
            ),
        }))
    }
}

/// The header a chunk of an [`AvroStream`] carries.
fn header_of(chunk: &Chunk) -> Result<&Header, Error> {
    chunk
        .header
        .as_ref()
        .and_then(|h| h.downcast_ref::<Header>())
        .ok_or_else(|| Error::Schema {
            file: chunk.file.clone(),
            feature: String::new(),
            reason: "the chunk carries no Avro header (writer schema)".into(),
        })
}

impl AvroDecoder {
    /// Makes sure the plan of `chunk`'s file is compiled, from the header
    /// the chunk carries (a chunk without one must come from a file whose
    /// schema was registered with [`add_schema`](Self::add_schema)).
    fn bind(&mut self, chunk: &Chunk) -> Result<(), Error> {
        if self.knows(&chunk.file) {
            return Ok(());
        }
        match chunk
            .header
            .as_ref()
            .and_then(|h| h.downcast_ref::<Header>())
        {
            Some(h) => self.add_schema(chunk.file.clone(), &h.schema_json),
            None => Ok(()),
        }
    }
}

impl grist_tensor::Decoder for AvroDecoder {
    fn clone_box(&self) -> Box<dyn grist_tensor::Decoder> {
        Box::new(self.clone())
    }

    fn specs(&self) -> &[FeatureSpec] {
        AvroDecoder::specs(self)
    }

    fn new_batch(&self, rows: usize) -> BatchBuilder {
        AvroDecoder::new_batch(self, rows)
    }

    /// Decodes as the contract says and returns where the record after the
    /// last decoded one starts in the block's data, so a loader can cut
    /// the decoded records off.
    fn decode_chunk(
        &mut self,
        chunk: &Chunk,
        rows: Range<usize>,
        out: &mut BatchBuilder,
    ) -> Result<Option<usize>, BoxError> {
        self.bind(chunk)?;
        Ok(Some(self.decode_block_to(
            &chunk.file,
            chunk.index,
            chunk.first_record,
            &chunk.data,
            chunk.record_count,
            rows,
            out,
        )?))
    }

    fn inflate(&self, chunk: &Chunk, limits: &Limits) -> Result<Bytes, BoxError> {
        let codec = header_of(chunk)?.codec;
        let at = Location::block(chunk.file.clone(), chunk.index);
        Ok(codec.decompress_bytes(&chunk.data, 0, limits, &at)?)
    }

    fn inflates_together(&self, a: &Chunk, b: &Chunk) -> bool {
        let deflate = |c: &Chunk| header_of(c).is_ok_and(|h| h.codec == Codec::Deflate);
        deflate(a) && deflate(b)
    }

    fn inflate_two(&self, a: &Chunk, b: &Chunk, limits: &Limits) -> [Result<Bytes, BoxError>; 2] {
        let codec = match (header_of(a), header_of(b)) {
            (Ok(ha), Ok(hb)) if ha.codec == hb.codec => ha.codec,
            _ => return [self.inflate(a, limits), self.inflate(b, limits)],
        };
        let at = [a, b].map(|c| Location::block(c.file.clone(), c.index));
        codec
            .decompress_two_bytes([&a.data, &b.data], 0, limits, [&at[0], &at[1]])
            .map(|r| r.map_err(BoxError::from))
    }
}

/// Avro files datum by datum.
struct AvroRecords {
    inputs: Vec<Input>,
    next_input: usize,
    options: ReaderOptions,
    /// The schema each file's datums are decoded through, if any.
    reader: Option<ReaderSchema>,
    current: Option<(report::FileReader, Arc<DatumSchema>)>,
}

impl Records for AvroRecords {
    fn next_record(&mut self) -> Result<Option<RawRecord>, BoxError> {
        loop {
            let Some((reader, _)) = &mut self.current else {
                let Some(input) = self.inputs.get(self.next_input) else {
                    return Ok(None);
                };
                self.next_input += 1;
                let reader = report::open(input, self.options.clone())?;
                let schema = match &self.reader {
                    Some(r) => reader.schema().with_reader_schema(input.name(), r)?,
                    None => reader.schema().clone(),
                };
                let schema = Arc::new(schema);
                self.current = Some((reader, schema));
                continue;
            };
            match reader.next_datum()? {
                Some(d) => {
                    return Ok(Some(RawRecord {
                        at: grist_tensor::Location::block(d.file.clone(), d.block)
                            .with_record(d.record),
                        bytes: Bytes::copy_from_slice(d.data),
                    }));
                }
                None => self.current = None,
            }
        }
    }

    fn to_json(&self, record: &RawRecord) -> Result<serde_json::Value, BoxError> {
        let Some((_, schema)) = &self.current else {
            return Err(Box::new(TensorError::Unsupported {
                what: format!("{}: the record's file is no longer open", record.at.file),
            }));
        };
        let at = Location::block(record.at.file.clone(), record.at.block.unwrap_or_default())
            .with_record(record.at.record.unwrap_or_default());
        Ok(datum_to_json(schema, &record.bytes, &at)?)
    }

    fn to_json_text(&self, record: &RawRecord) -> Result<String, BoxError> {
        let Some((_, schema)) = &self.current else {
            return Err(Box::new(TensorError::Unsupported {
                what: format!("{}: the record's file is no longer open", record.at.file),
            }));
        };
        let at = Location::block(record.at.file.clone(), record.at.block.unwrap_or_default())
            .with_record(record.at.record.unwrap_or_default());
        let value = schema.decode(&record.bytes, &at)?;
        serde_json::to_string(&schema.json(&value)).map_err(|e| {
            Box::new(crate::Error::Datum {
                at: at.into(),
                reason: e.to_string(),
            }) as BoxError
        })
    }
}
