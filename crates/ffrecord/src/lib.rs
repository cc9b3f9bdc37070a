//! HFAiLab's FFRecord ("FireFlyer Record") files into grist tensor
//! batches: read any sample by number, many per call.
//!
//! An FFRecord file is a header (a metadata CRC-32, the sample count `N`,
//! each sample's CRC-32 and offset) followed by the samples. Data moves
//! like this: an [`FfrReader`] opens a file, a list of files or a folder
//! of `*.ffr` files as one dataset, validating every header (and nothing
//! else) at open; [`FfrReader::read`] fetches any samples by their number
//! in the dataset, in the order asked, with coalesced positioned reads
//! (or slices of a memory map, behind the explicit [`Access::mmap`]
//! opt-in), and checks their CRC-32s. For a pass in order, an
//! [`FfrSource`] hands the loader [`grist_tensor::Chunk`]s of consecutive
//! samples. Payloads are opaque bytes: a [`PayloadDecoder`] turns them
//! into a [`grist_tensor::Batch`] (serialized `tf.train.Example`s through
//! grist-tfrecord's parser, serialized OneFlow `OFRecord`s through
//! grist-ofrecord's, or raw little-endian tensors). An
//! [`FfrWriter`] writes files byte-identical to the original's, with or
//! without knowing `N` up front, atomically.
//!
//! Where the original library crashes, aborts or silently misreads
//! (truncated headers, lying counts, offsets out of bounds or
//! decreasing, negative indices, unchecked zero-length samples, half
//! written files), grist returns a typed [`Error`] naming the file and
//! sample; elsewhere it reads exactly what the original reads.
//!
//! ```
//! use grist_ffrecord::{FfrReader, FfrWriter, PayloadDecoder, ReaderOptions, WriterOptions};
//! use grist_tensor::{DType, FeatureSpec, Values};
//! use grist_tfrecord::ExampleBuilder;
//!
//! // A file of four tf.Example samples.
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("train.ffr");
//! let mut writer = FfrWriter::create(&path, WriterOptions::default())?;
//! for id in 0..4i64 {
//!     writer.write_sample(&ExampleBuilder::new().with_int64s("id", [id]).encode())?;
//! }
//! writer.finish()?;
//!
//! // Read samples 3 and 1 and decode them into one batch.
//! let reader = FfrReader::open(&path, ReaderOptions::default())?;
//! let samples = reader.read(&[3, 1])?;
//! let mut decoder = PayloadDecoder::example(&[FeatureSpec::dense("id", DType::Int64, [])])?;
//! let batch = decoder.decode_samples(&samples)?;
//! let id = batch.get("id").unwrap().as_dense().unwrap();
//! assert_eq!(id.values, Values::Int64(vec![3, 1]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | type | what it does |
//! |---|---|
//! | [`FfrReader`] | opens files or folders, validates headers, reads samples by number |
//! | [`FfrSource`] | the samples in order, as chunks for the loader |
//! | [`PayloadDecoder`] | sample payloads into batches (tf.Example, OFRecord, raw tensors) |
//! | [`FfrWriter`] | writes files, atomically, byte-identical to the original |
//! | [`HeaderDecoder`] | the sans-I/O header parser under the reader |
//!
//! The crate has no Cargo features and no `unsafe` of its own: the memory
//! map behind [`Access::mmap`] (an `unsafe fn` whose caller promises the
//! files do not change while they are mapped) is `grist_tensor::Access`'s.
#![deny(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod decoder;
mod error;
mod format;
mod header;
mod reader;
mod report;
mod sink;
mod source;
mod writer;

pub use decoder::{PayloadDecoder, RawDecoder};
pub use error::{Error, ErrorClass, OffsetProblem, Result};
pub use format::{FfrFormat, Payload};
pub use grist_tensor::{FeatureProblem, FormatError, Location};
pub use header::{
    FileHeader, HeaderDecoder, PREFIX_LEN, check_sample, crc32, encode_file, encode_header,
    header_len, parse_header,
};
pub use reader::{Access, FfrReader, FileInfo, ReaderOptions, Sample, SampleBatch, dataset_files};
pub use source::FfrSource;
pub use writer::{FfrWriter, WriteSummary, WriterOptions};

/// The README's examples, run as doc tests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
