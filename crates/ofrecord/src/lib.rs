//! OneFlow's OFRecord datasets into grist tensor batches, and back.
//!
//! An OFRecord dataset is a folder of part files (`part-0`, `part-1`, ...
//! or `part-00000`, ...), each a run of records framed by an 8-byte
//! little-endian length; a record is a protobuf `OFRecord`, a map from
//! feature names to typed lists (`proto/record.proto`).
//!
//! Data moves like this: a [`Dataset`] names the parts in OneFlow's order
//! and splits them across ranks ([`Shard`]); an [`OfRecordSource`] reads
//! them as chunks of whole records (framing each part on its own with a
//! [`FrameDecoder`]); an [`OfRecordDecoder`], compiled once from
//! [`Field`]s (grist [`FeatureSpec`](grist_tensor::FeatureSpec)s, or
//! OneFlow's raw and bytes decoders), reads each record's wire format
//! straight into the columns of a [`grist_tensor::BatchBuilder`]. Going
//! the other way, [`RecordBuilder`] / [`encode_batch`] make records and a
//! [`DatasetWriter`] writes them into part files, each atomically.
//! [`Record`] parses any record whole, for inspection (`grist cat
//! --records`); [`sample_ofrecord`] tells a
//! [`SpecSampler`](grist_tensor::SpecSampler) what a record holds, for
//! spec inference (`grist spec`).
//!
//! Where OneFlow aborts (missing parts, zero or negative lengths,
//! truncation, records protobuf cannot parse, missing features, decoder
//! shape mismatches) or misreads (stale memory after short bytes values,
//! writes past the buffer with `dim1_varying_length`), grist returns a
//! typed [`Error`] naming the part file, the record and the feature, or
//! zero-fills.
//!
//! ```
//! use grist_ofrecord::{
//!     Dataset, DatasetWriter, OfRecordDecoder, OfRecordSource, PartNaming, RawDType, RawSpec,
//!     RecordBuilder, Shard,
//! };
//! use grist_tensor::{Decoder, DType, FeatureSpec, RecordSource, Values};
//!
//! // Write 6 records into parts of 2 records each.
//! let dir = tempfile::tempdir()?;
//! let mut writer = DatasetWriter::create(dir.path())?.with_records_per_part(2);
//! for i in 0..6 {
//!     let record = RecordBuilder::new()
//!         .with_int64s("label", [i])
//!         .with_floats("x", [0.5; 3]);
//!     writer.write_record(&record.encode())?;
//! }
//! assert_eq!(writer.finish()?.parts, 3);
//!
//! // Rank 0 of 2 reads parts 0 and 1 (OneFlow's split), decoding `label`
//! // as a grist spec and `x` with OneFlow's raw decoder.
//! let dataset = Dataset::open(dir.path(), 3, &PartNaming::new("part-", Some(5)))?;
//! let mut source = OfRecordSource::sharded(&dataset, Shard::new(0, 2))?;
//! let mut decoder = OfRecordDecoder::with_fields(&[
//!     FeatureSpec::dense("label", DType::Int64, []).into(),
//!     RawSpec::new("x", [4], RawDType::Float64).with_truncate(true).into(),
//! ])?;
//! let mut out = decoder.new_batch(4);
//! while let Some(chunk) = source.next_chunk()? {
//!     decoder.decode_chunk(&chunk, 0..chunk.record_count, &mut out)?;
//! }
//! let batch = decoder.finish(&mut out, &"rank 0".into(), 0)?;
//! let label = batch.get("label").unwrap().as_dense().unwrap();
//! assert_eq!(label.values, Values::Int64(vec![0, 1, 2, 3]));
//! let x = batch.get("x").unwrap().as_dense().unwrap();
//! assert_eq!(x.shape, vec![4, 4]);
//! assert_eq!(x.values, Values::Float64([0.5, 0.5, 0.5, 0.0].repeat(4)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | OneFlow | grist |
//! |---|---|
//! | `OFRecordReader(data_part_num, part_name_prefix, part_name_suffix_length)` | [`Dataset::open`] + [`OfRecordSource`] (finite epochs, no record shuffle) |
//! | rank split of parts (balanced splitter) | [`Dataset::part_ranges`], [`ShardMode::Parts`] |
//! | fewer parts than ranks: abort | [`ShardMode::Records`] / [`ShardMode::Auto`] |
//! | `OFRecordRawDecoder` | [`RawSpec`] |
//! | `OFRecordBytesDecoder` | [`BytesSpec`] |
//! | image decoders | not provided: decode the bytes with [`BytesSpec`] |
//!
//! The crate has no Cargo features.
#![deny(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

/// The prost-generated OFRecord protobuf types (`oneflow.OFRecord`, ...),
/// used for writing and as a reference; the read path does not use them.
///
/// Public for grist's differential tests and fuzz targets only: hidden from
/// the docs and not part of the stable API, since their trait impls are
/// prost's (whose version grist may change in any release).
#[doc(hidden)]
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/oneflow.rs"));
}

mod error;
mod format;

// -- files: framing, datasets and sharding, chunk source, writers --
mod dataset;
mod framing;
mod source;
mod writer;

// -- records: wire format, decode plans, decoder, whole records, encoding --
mod decoder;
mod encode;
mod infer;
mod plan;
mod record;
mod report;
mod sink;
mod wire;

pub use dataset::{
    Dataset, DatasetReader, DatasetRecord, Part, PartNaming, Segment, Shard, ShardMode,
    balanced_range,
};
pub use decoder::OfRecordDecoder;
pub use encode::{RecordBuilder, encode_batch};
pub use error::{Error, Result};
// The corpus manifests' names of feature problems, for the corpus tests:
// hidden from the docs, not a stable API.
#[doc(hidden)]
pub use error::problem_manifest_kind;
pub use format::OfRecordFormat;
pub use framing::{
    Decoded, Frame, FrameDecoder, LENGTH_PREFIX, RawRecord, ReaderOptions, RecordReader,
};
pub use grist_tensor::{FeatureProblem, FormatError, Location};
pub use infer::sample_ofrecord;
pub use plan::{BytesSpec, Field, RawDType, RawSpec};
pub use record::{FeatureValue, MAX_INLINE_BYTES, Record};
pub use sink::OfRecordEncoder;
pub use source::{OfRecordSource, OfStream};
pub use wire::ListKind;
pub use writer::{DatasetSummary, DatasetWriter, RecordWriter};

/// The README's examples, run as doc tests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
