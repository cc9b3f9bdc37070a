//! The tensor model shared by every grist format crate.
//!
//! Data moves like this: a format's [`RecordSource`] reads [`Chunk`]s of raw
//! records; its [`Decoder`], compiled once from the requested
//! [`FeatureSpec`]s, writes each record's values straight into the typed
//! buffers of a [`BatchBuilder`]; [`BatchBuilder::finish`] yields a
//! [`Batch`] of named columns, each a dense, sparse (TensorFlow COO) or
//! ragged [`Tensor`]. [`Limits`] bound every allocation sized by input.
//!
//! ```
//! use grist_tensor::{Batch, BatchBuilder, ColumnBuilder, DType, DenseBuilder, Section, Values};
//!
//! let mut b = BatchBuilder::new();
//! b.push_column("x", Section::Features, ColumnBuilder::Dense(DenseBuilder::new(DType::Int64, vec![2])));
//! for row in 0..3i64 {
//!     if let ColumnBuilder::Dense(d) = b.column_mut(0) {
//!         if let Values::Int64(v) = &mut d.values {
//!             v.extend([row, row * 10]);
//!         }
//!         d.end_row();
//!     }
//!     b.end_row();
//! }
//! let batch: Batch = b.finish().unwrap();
//! let x = batch.get("x").unwrap().as_dense().unwrap();
//! assert_eq!(x.shape, vec![3, 2]);
//! assert_eq!(grist_tensor::json::batch_to_json(&batch)["records"], 3);
//! ```
//!
//! # The format contract
//!
//! Each format crate implements [`Format`]: the loader, the CLI and
//! conversion hold formats as `Arc<dyn Format>` (found by a [`Registry`])
//! and know no format crate. Through it they get, for a file:
//!
//! * a [`ChunkStream`]: the file's chunks from any chunk boundary
//!   ([`ChunkPos`], what a saved loader state holds), each read into a
//!   pooled buffer, with work that can run in parallel (inflating a
//!   compressed block, checking data CRCs) left undone when the options
//!   ask for it ([`Chunk::deferred`]);
//! * for the formats that can, a [`ByNumber`] reader: records by number,
//!   several at once, with neighbours read together;
//! * a [`Decoder`], compiled once from the feature specs, that decodes a
//!   chunk's rows (or records read by number) into a [`BatchBuilder`],
//!   and does a chunk's deferred work on the thread that decodes it;
//! * a [`Records`] iterator: each record's bytes and a generic JSON
//!   decoding of it (`grist cat --raw/--records`, `grist inspect`);
//! * an [`Inferred`] spec ([`Format::infer_spec`]): the features that read
//!   the file, from its schema or by sampling its records
//!   ([`SpecSampler`]), as a [`SpecFile`] that serializes back to JSON.
//!
//! Errors cross the contract as [`BoxError`]s, which answer
//! [`location`](FormatError::location) whatever the format.
//!
//! # Cargo features
//!
//! | Cargo feature | default | what it adds |
//! |---|---|---|
//! | `ndarray` | off | `DenseTensor::to_ndarray` |
#![deny(missing_docs, unreachable_pub)]
// Two modules are `unsafe`: one prefetches (`prefetch_ahead`), one
// decodes short varints with AVX-512 (`varint_block`).
#![deny(unsafe_code)]

mod builder;
mod dtype;
mod error;
mod format;
mod gather;
mod infer;
pub mod json;
mod limits;
mod location;
mod mapping;
#[cfg(feature = "ndarray")]
mod ndarray;
mod prefetch;
mod registry;
mod sink;
mod source;
mod spec;
mod tensor;
mod typed;

// Shared internals of grist's format crates, benches and CLI: public so
// that those crates can reach them, hidden from the docs, and not part of
// the stable API (they change with the crates that use them).
//
// - `chunking`: the windows and frame cutters of the TFRecord, OFRecord
//   and Avro chunk streams;
// - `le`: bulk little-endian copies of every format's number lists;
// - `varint`: Avro's zig-zag varints (grist-avro-tensor);
// - `wire`: the protobuf wire primitives of tf.Example and OFRecord;
// - `feature_map`: their feature maps written straight from batch columns;
// - `report`: the pieces of every format's `inspect` / `verify` reports
//   (and the CLI's numbers);
// - `synth`: the seeded synthetic data of `grist gen` / `grist demo`,
//   the benches and the writers' tests.
#[doc(hidden)]
pub mod chunking;
#[doc(hidden)]
pub mod feature_map;
#[doc(hidden)]
pub mod le;
#[doc(hidden)]
pub mod report;
#[doc(hidden)]
pub mod synth;
#[doc(hidden)]
pub mod varint;
mod varint_block;
#[doc(hidden)]
pub mod wire;

pub use builder::{
    BatchBuilder, BatchSizes, BuilderColumn, ColumnBuilder, DenseBuilder, PaddedBuilder,
    PartitionBuffer, PartitionKind, RaggedBuilder, SparseBuilder,
};
pub use dtype::DType;
pub use error::TensorError;
pub use format::{
    ByNumber, ChunkPos, ChunkStream, Decoder, Deferred, FileHeader, Format, Gathered, Input,
    InspectOptions, Maps, NameMatch, RandomAccess, RawRecord, ReadOptions, Record, RecordOptions,
    Records, Report, Verified, VerifyFailure,
};
// Helpers of the format crates' record-by-number reads (gather) and hot
// loops (prefetch); hidden for the same reason as the modules above.
#[doc(hidden)]
pub use gather::{FramedFile, FramedFiles, within_waste, within_waste_remote};
/// How file bytes are fetched (read calls, or memory maps behind an
/// `unsafe` promise); see [`grist_io::Access`].
pub use grist_io::Access;
pub use infer::{InferNote, InferOptions, Inferred, SpecSampler, inputs_named};
pub use limits::Limits;
pub use location::{BoxError, ErrorKind, FeatureProblem, FormatError, Location, StorageError};
pub use mapping::{
    SpecForm, feature_in_form, features_mut, sparse_index_key, sparse_value_key, spec_in_form,
    with_dtype,
};
#[doc(hidden)]
pub use prefetch::{PREFETCH_FAR, PREFETCH_NEAR, prefetch_ahead, warm};
pub use registry::{Registry, RegistryError, SNIFF_BYTES};
pub use sink::{Encoder, Lossy, RecordBuf, RecordSink, WriteOptions, Written};
pub use source::{Chunk, MAX_IO_BUFFER, RecordLayout, RecordSource};
pub use spec::{
    DenseSpec, FeatureSpec, FixedLenSequenceSpec, MAX_DEFAULT_VALUES, OneOrMany, Partition,
    RaggedSpec, SparseSpec, SpecFile, UNKNOWN_DIM, VarlenSpec, no_reader_schema, resolve_default,
    shape_elements,
};
pub use tensor::{
    Batch, Column, DenseTensor, RaggedTensor, Section, SparseTensor, StringValues, Tensor, Values,
};
pub use typed::{DenseView, Element, RaggedView, SparseView};

/// The README's examples, run as doc tests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
