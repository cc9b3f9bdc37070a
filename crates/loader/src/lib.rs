//! Files of any grist format in, tensor batches out, as fast as the cores
//! allow: AvroTensorDataset's fused read, prefetch, parse, shuffle and
//! batch, for Avro, TFRecord, FFRecord and OFRecord alike.
//!
//! A [`LoaderBuilder`] takes the sources (files, folders, glob patterns),
//! the formats they may be in (a [`grist_tensor::Registry`], or one
//! [`grist_tensor::Format`]: the loader names no format itself; the
//! `grist` crate's `grist::loader()` knows them all), the features to
//! decode ([`grist_tensor::FeatureSpec`]s or a spec file) and the options;
//! the [`Loader`] it builds is an iterator of
//! `Result<`[`grist_tensor::Batch`]`>`. Inside, data moves like this:
//!
//! * a prefetch thread reads ahead, up to a byte budget: chunks of the
//!   epoch's stream of files (Avro blocks, runs of TFRecord frames or
//!   OFRecord records; several files interleaved, the file order shuffled
//!   per epoch), or, for sources read by record number (FFRecord, indexed
//!   TFRecord, OFRecord with an index built on first read), each batch's
//!   records in the epoch's permutation, one read per run of neighbours;
//! * the consumer samples each batch's rows from a buffer of
//!   `batch + shuffle_buffer` records over many chunks (block sampling);
//! * the batch's rows are cut into contiguous parts, one per parse thread,
//!   by a cost model calibrated online (`src/autotune.rs` explains it), which also picks
//!   how many threads a batch gets; the loader's thread decodes the first
//!   half of its part straight into the batch, and the rest is taken in
//!   shrinking units by whichever thread is free, each decoded into its
//!   own pre-sized columns (Avro blocks decompressed by the thread that
//!   first needs them) and joined in order with row and offset fix-ups,
//!   the copying split between two threads;
//! * every random choice follows from the seed, so the same arguments give
//!   the same batches, whatever the thread count; [`Loader::state`] and
//!   [`Loader::restore`] resume mid-epoch bit for bit, and
//!   [`LoaderBuilder::with_shard`] splits each epoch between the ranks of
//!   a data-parallel job with every record read exactly once.
//!
//! ```
//! use std::sync::Arc;
//! use grist_loader::{Epochs, Loader, Threads};
//! use grist_tensor::{DType, FeatureSpec};
//! use grist_tfrecord::{ExampleBuilder, RecordWriter, TfRecordFormat};
//!
//! // Two TFRecord files of 100 records each.
//! let dir = tempfile::tempdir()?;
//! for f in 0..2 {
//!     let path = dir.path().join(format!("train-{f}.tfrecord"));
//!     let mut w = RecordWriter::create(&path, Default::default())?;
//!     for i in 0..100i64 {
//!         w.write_record(&ExampleBuilder::new().with_int64s("id", [f * 100 + i]).encode())?;
//!     }
//!     w.finish()?;
//! }
//!
//! let mut loader = Loader::builder()
//!     .with_format(Arc::new(TfRecordFormat))
//!     .with_path(dir.path().join("*.tfrecord"))
//!     .with_specs([FeatureSpec::dense("id", DType::Int64, [])])
//!     .with_batch_size(32)
//!     .with_shuffle(true)
//!     .with_seed(7)
//!     .with_epochs(Epochs::Count(2))
//!     .with_threads(Threads::Fixed(2))
//!     .build()?;
//! let mut seen = Vec::new();
//! while let Some(batch) = loader.next_batch() {
//!     let batch = batch?;
//!     let ids = batch.dense::<i64>("id")?.values;
//!     seen.extend_from_slice(ids);
//!     loader.recycle(batch);
//! }
//! // Every record once per epoch.
//! seen.sort();
//! assert_eq!(seen, (0..200).flat_map(|i| [i, i]).collect::<Vec<_>>());
//! assert_eq!(loader.stats().records, 400);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | format | read as | shuffle | resume skips |
//! |---|---|---|---|
//! | Avro | stream of blocks | block sampling + file order | whole blocks by offset, decoded records by byte position |
//! | TFRecord | stream of frame runs, or by number with `.idx` files | block sampling, or exact | chunks by byte offset (compressed: inflated, not parsed) |
//! | FFRecord | by number | exact | everything |
//! | OFRecord | stream, or by number (index built on first read) | exact when shuffling | chunks by byte offset |
//!
//! The crate has no Cargo features.
#![deny(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

// The cost model's pieces: public for the integration tests
// (tests/autotune.rs) only, hidden from the docs, not a stable API.
#[doc(hidden)]
pub mod autotune;
mod decode;
mod error;
mod loader;
mod options;
mod prefetch;
mod producer;
mod rng;
mod sample;
mod state;
mod stats;
mod stream;

pub use error::{Error, Result};
/// How file bytes are fetched (see [`LoaderBuilder::with_access`]).
pub use grist_tensor::Access;
pub use grist_tensor::Maps;
/// Whether records are read by number (see
/// [`LoaderBuilder::with_random_access`]).
pub use grist_tensor::RandomAccess;
pub use loader::{Loader, LoaderBuilder, MAX_THREADS};
pub use options::{Epochs, ShardMode, Threads};
pub use state::LoaderState;
pub use stats::Stats;

/// The README's examples, run as doc tests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
