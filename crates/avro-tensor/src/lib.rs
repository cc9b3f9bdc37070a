//! Avro object container files decoded straight into grist tensor batches.
//!
//! [`BlockReader`] reads a file's header and blocks (checking sync markers,
//! inflating each codec); [`AvroDecoder`] decodes a block's records into
//! tensor columns by a plan compiled once per writer schema and feature
//! specs; [`ContainerWriter`] writes files. Features named by plain field
//! names read the AvroTensorDataset way (flat records of primitives and
//! arrays); features named by key expressions (`name.first`,
//! `friends[*].x`, `cars['nick'].color`, `friends[gender='m'].x`, ...,
//! tensorflow-io's `parse_avro` mapping) read any schema, through a
//! second plan behind the same decoder (`docs/AVRO-KEY-EXPRESSIONS.md`). To look at records one by one
//! instead, [`DatumReader`] hands out each datum's bytes and
//! [`DatumSchema`] decodes them generically ([`AvroValue`], or JSON in
//! fastavro's form with [`datum_to_json`]).
//!
//! Deflate blocks are inflated two at a time on one thread
//! ([`Codec::decompress_two_bytes`]: two independent streams stepped in one
//! loop, about 1.5x libdeflate on blocks of mostly literals); `BlockReader`
//! reads one block ahead to do so, which its counters and errors do not
//! show.
//!
//! ```
//! use grist_avro_tensor::{
//!     AvroDecoder, BlockReader, ContainerWriter, ReaderOptions, WriterOptions, schema_for_specs,
//! };
//! use grist_tensor::FeatureSpec;
//!
//! let specs: Vec<FeatureSpec> = serde_json::from_str(
//!     r#"[{"name": "id", "kind": "dense", "dtype": "int64", "shape": []},
//!         {"name": "emb", "kind": "dense", "dtype": "float32", "shape": [2]}]"#,
//! )?;
//! // A file of two records {id: long, emb: array<float>}, datums by hand.
//! let schema = schema_for_specs(&specs, "Row")?;
//! let mut writer = ContainerWriter::new(Vec::new(), &schema, WriterOptions::default())?;
//! for id in [1i64, 2] {
//!     let mut datum = vec![(id * 2) as u8, 4]; // zig-zag id; a block of 2 items
//!     datum.extend(0.5f32.to_le_bytes());
//!     datum.extend((id as f32).to_le_bytes());
//!     datum.push(0); // end of the array
//!     writer.append_datum(&datum)?;
//! }
//! let (file, _) = writer.finish_into_inner()?;
//!
//! // Read it back: blocks from the container, rows into one batch.
//! let mut reader = BlockReader::new(&file[..], "rows.avro", ReaderOptions::default())?;
//! let mut decoder = AvroDecoder::new(&specs)?;
//! decoder.add_schema(reader.name().clone(), &reader.header().schema_json)?;
//! let mut out = decoder.new_batch(2);
//! while let Some(block) = reader.next_block()? {
//!     let n = block.record_count as usize;
//!     let (file, index, first) = (reader.name(), block.index, block.first_record);
//!     decoder.decode_block(file, index, first, &block.data, n, 0..n, &mut out)?;
//! }
//! let batch = decoder.finish(&mut out)?;
//! assert_eq!(batch.rows(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | Cargo feature | default | what it adds |
//! |---|---|---|
//! | `deflate` | on | the `deflate` codec |
//! | `snappy` | on | the `snappy` codec (with its CRC-32 check) |
//! | `zstandard` | on | the `zstandard` codec |
//! | `bzip2` | off | the `bzip2` codec (pure Rust) |
//! | `xz` | off | the `xz` codec (pure Rust) |
#![deny(missing_docs, unreachable_pub)]
#![deny(unsafe_code)]

mod error;
mod format;

// -- container: header, blocks, codecs, chunk source, writer --
mod codec;
mod container;
#[cfg(feature = "deflate")]
#[allow(unsafe_code)]
mod inflate;
mod source;
mod writer;

// -- decoding: schema → plan, datums → columns --
mod datum;
mod decoder;
mod encode;
mod general;
mod infer;
mod keyexpr;
mod plan;
mod resolve;
mod schema;
mod sink;

// -- datums read generically: boundaries, value trees, JSON --
mod generic;
mod logical;
mod report;

pub use codec::Codec;
pub use container::{
    Block, BlockDecoder, BlockReader, Blocks, Decoded, Header, MAGIC, RawBlock, ReaderOptions,
    SYNC_LEN,
};
pub use decoder::AvroDecoder;
pub use encode::{encode_batch, schema_for_specs};
pub use error::{Error, Result};
pub use format::AvroFormat;
pub use generic::{
    AvroValue, Datum, DatumJson, DatumRanges, DatumReader, DatumSchema, datum_to_json,
};
pub use grist_tensor::{FeatureProblem, FormatError, Location};
pub use resolve::ReaderSchema;
pub use sink::{DatumEncoder, RECORD_NAME};
pub use source::{AvroSource, AvroStream};
pub use writer::{ContainerWriter, WriteSummary, WriterOptions};

/// The README's examples, run as doc tests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
