//! TFRecord files and `tf.train.Example` / `tf.train.SequenceExample`
//! records into grist tensor batches, with TensorFlow's semantics.
//!
//! Data moves like this: a [`RecordReader`] (or, for the loader, a
//! [`TfRecordSource`] of chunks) splits a file into record payloads,
//! checking both masked CRC32Cs of every frame; an [`ExampleDecoder`],
//! compiled once from [`grist_tensor::FeatureSpec`]s, reads each payload's
//! protobuf wire format straight into the columns of a
//! [`grist_tensor::BatchBuilder`], exactly as `tf.io.parse_example` (or
//! `tf.io.parse_sequence_example`) would fill its output tensors. Going the
//! other way, [`encode_batch`] / [`ExampleBuilder`] make Examples and a
//! [`RecordWriter`] frames them (atomically: never a truncated file under
//! the final name). [`IndexedReader`] reads records by number through
//! NVIDIA DALI-compatible index files. [`sample_example`] tells a
//! [`grist_tensor::SpecSampler`] what a record holds, for spec inference
//! (`grist spec`).
//!
//! ```
//! use std::sync::Arc;
//! use grist_tensor::{DType, FeatureSpec};
//! use grist_tfrecord::{
//!     Compression, ExampleBuilder, ExampleDecoder, ReaderOptions, RecordReader, RecordWriter,
//! };
//!
//! // Write two Examples into an in-memory TFRecord stream.
//! let mut writer = RecordWriter::new(Vec::new());
//! for id in [7, 8] {
//!     let example = ExampleBuilder::new().with_int64s("id", [id]).with_floats("x", [0.5, 1.5]);
//!     writer.write_record(&example.encode())?;
//! }
//! let (bytes, _) = writer.finish_into_inner()?;
//!
//! // Read them back as one batch.
//! let specs = [
//!     FeatureSpec::dense("id", DType::Int64, []),
//!     FeatureSpec::varlen("x", DType::Float32),
//! ];
//! let mut decoder = ExampleDecoder::new(&specs)?;
//! let mut reader = RecordReader::new(&bytes[..], "mem", Compression::None, ReaderOptions::default())?;
//! let file: Arc<str> = "mem".into();
//! let mut records = Vec::new();
//! while let Some(r) = reader.next_record()? {
//!     records.push(r.to_vec());
//! }
//! let batch = decoder.decode_batch(&file, 0, records.iter().map(|r| &r[..]))?;
//! assert_eq!(batch.rows(), 2);
//! assert_eq!(batch.get("x").unwrap().as_sparse().unwrap().dense_shape, vec![2, 2]);
//! # Ok::<(), grist_tfrecord::Error>(())
//! ```
//!
//! | Cargo feature | default | what it adds |
//! |---|---|---|
//! | `gzip` | on | GZIP-compressed files (`.gz`) |
//! | `zlib` | on | ZLIB-compressed files (`.zz`, `.zlib`) |
//! | `zstd` | off | ZSTD-compressed files (`.zst`), not a TensorFlow codec |
#![deny(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod error;
/// The prost-generated TensorFlow protobuf types (`tf.train.Example`, ...),
/// used for writing and as a reference; the read path does not use them.
///
/// Public for grist's differential tests and fuzz targets only: hidden from
/// the docs and not part of the stable API, since their trait impls are
/// prost's (whose version grist may change in any release).
#[doc(hidden)]
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/tensorflow.rs"));
}

// -- framing, compression, index files, record writer, chunk source --
mod compression;
mod format;
mod framing;
mod index;
mod source;
mod writer;

// -- tf.Example / tf.SequenceExample parsing and building --
mod decoder;
mod encode;
mod infer;
mod plan;
mod records;
mod report;
mod sink;
mod wire;

pub use compression::{CompressedReader, CompressedWriter, Compression};
pub use decoder::ExampleDecoder;
pub use encode::{ExampleBuilder, encode_batch};
pub use error::{Error, Result};
pub use format::TfRecordFormat;
pub use framing::{
    Decoded, FOOTER_LEN, FRAME_OVERHEAD, Frame, FrameDecoder, HEADER_LEN, ReaderOptions,
    RecordReader, Records, data_crc_matches, mask_crc, masked_crc32c, unmask_crc,
};
pub use grist_tensor::{FeatureProblem, FormatError, Location};
pub use index::{
    IndexEntry, IndexedReader, build_index, index_path, parse_index, read_index, verify_index,
    write_index, write_index_to,
};
pub use infer::sample_example;
pub use records::{example_to_json, sequence_example_to_json};
pub use sink::ExampleEncoder;
pub use source::{TfRecordSource, TfStream};
pub use writer::{RecordWriter, WriteSummary, WriterOptions};

/// The README's examples, run as doc tests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
