//! [`AvroFormat`]: Avro object container files behind the format contract
//! ([`grist_tensor::Format`]): the `.avro` extension and the `Obj\x01`
//! magic, streams of blocks left compressed for the parse threads, the
//! ATDS decoder, and datums one by one.

use std::io::BufReader;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use grist_tensor::{
    BatchBuilder, BoxError, ByNumber, Chunk, ChunkPos, ChunkStream, FeatureSpec, Format, Input,
    Limits, NameMatch, RandomAccess, RawRecord, ReadOptions, RecordOptions, Records, SpecFile,
    TensorError,
};

use crate::codec::Codec;
use crate::container::{BlockReader, Header, MAGIC, ReaderOptions};
use crate::decoder::AvroDecoder;
use crate::error::{Error, Location};
use crate::generic::{DatumReader, DatumSchema, datum_to_json};
use crate::source::AvroStream;

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
        Ok(Box::new(
            AvroDecoder::new(&spec.features)?.with_limits(limits),
        ))
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
        Ok(Box::new(AvroRecords {
            inputs: inputs.to_vec(),
            next_input: 0,
            options: ReaderOptions::default().with_limits(options.read.limits),
            current: None,
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
    current: Option<(
        DatumReader<BufReader<Box<dyn std::io::Read + Send>>>,
        Arc<DatumSchema>,
    )>,
}

impl Records for AvroRecords {
    fn next_record(&mut self) -> Result<Option<RawRecord>, BoxError> {
        loop {
            let Some((reader, _)) = &mut self.current else {
                let Some(input) = self.inputs.get(self.next_input) else {
                    return Ok(None);
                };
                self.next_input += 1;
                let raw = input.reader_at(0).map_err(Error::from)?;
                let blocks = BlockReader::new(
                    BufReader::with_capacity(1 << 20, raw),
                    input.name().clone(),
                    self.options.clone(),
                )?;
                let reader = DatumReader::new(blocks)?;
                let schema = Arc::new(reader.schema().clone());
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
}
