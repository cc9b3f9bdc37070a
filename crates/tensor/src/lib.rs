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
//! | Cargo feature | default | what it adds |
//! |---|---|---|
//! | `ndarray` | off | `DenseTensor::to_ndarray` |
#![deny(missing_docs, unreachable_pub)]
// One module prefetches (`prefetch_ahead`); nothing else is `unsafe`.
#![deny(unsafe_code)]

mod builder;
pub mod chunking;
mod dtype;
mod error;
pub mod format;
mod gather;
pub mod json;
pub mod le;
mod limits;
mod location;
#[cfg(feature = "ndarray")]
mod ndarray;
mod prefetch;
mod registry;
pub mod report;
mod source;
mod spec;
pub mod synth;
mod tensor;
pub mod varint;
#[doc(hidden)]
pub mod wire;

pub use builder::{
    BatchBuilder, BuilderColumn, ColumnBuilder, DenseBuilder, PaddedBuilder, PartitionBuffer,
    PartitionKind, RaggedBuilder, SparseBuilder,
};
pub use dtype::DType;
pub use error::TensorError;
pub use format::{
    ByNumber, ChunkPos, ChunkStream, Decoder, Deferred, FileHeader, Format, Gathered, Input,
    InspectOptions, Maps, NameMatch, RandomAccess, RawRecord, ReadOptions, Record, RecordOptions,
    Records, Report, Verified, VerifyFailure,
};
pub use gather::{FramedFile, FramedFiles, within_waste, within_waste_remote};
/// How file bytes are fetched (read calls, or memory maps behind an
/// `unsafe` promise); see [`grist_io::Access`].
pub use grist_io::Access;
pub use limits::Limits;
pub use location::{BoxError, ErrorKind, FeatureProblem, FormatError, Location, StorageError};
#[cfg(feature = "ndarray")]
pub use ndarray::Element;
pub use prefetch::{PREFETCH_FAR, PREFETCH_NEAR, prefetch_ahead, warm};
pub use registry::{Registry, RegistryError, SNIFF_BYTES};
pub use source::{Chunk, MAX_IO_BUFFER, RecordLayout, RecordSource};
pub use spec::{
    DenseSpec, FeatureSpec, FixedLenSequenceSpec, MAX_DEFAULT_VALUES, OneOrMany, Partition,
    RaggedSpec, SparseSpec, SpecFile, UNKNOWN_DIM, VarlenSpec, resolve_default, shape_elements,
};
pub use tensor::{
    Batch, Column, DenseTensor, RaggedTensor, Section, SparseTensor, StringValues, Tensor, Values,
};
