//! grist reads ML training records into tensor batches, fast: TFRecord
//! files of `tf.train.Example` / `SequenceExample`, Avro object container
//! files, HFAiLab's FFRecord and OneFlow's OFRecord.
//!
//! Any format converts to any other with [`convert`]: the sources (paths,
//! folders, globs, object-store URLs) read by the loader, written as
//! `part-00000.<ext>`, ... files of the target format with `spec.json`
//! beside them, which reads them back as the sources read (here an Avro
//! file with an int32 and a sparse feature becomes TFRecord):
//!
//! ```
//! # let dir = tempfile::tempdir()?;
//! # let (src, out) = (dir.path().join("in.avro"), dir.path().join("out"));
//! # use grist::tensor::synth::{prod19_native, prod19_native_specs};
//! # let native = grist::tensor::SpecFile { features: prod19_native_specs(), ..Default::default() };
//! # let schema = grist::avro::schema_for_specs(&native.features, "Row")?;
//! # let mut w = grist::avro::ContainerWriter::create(&src, &schema, Default::default())?;
//! # for datum in grist::avro::encode_batch(&prod19_native(100, 1), &native)? {
//! #     w.append_datum(&datum)?;
//! # }
//! # w.finish()?;
//! use grist::tensor::{Lossy, SpecFile, WriteOptions};
//!
//! let spec = SpecFile::from_json(r#"[
//!     {"name": "s_int", "kind": "dense", "dtype": "int32", "shape": []},
//!     {"name": "sp_0", "kind": "sparse", "dtype": "float32", "shape": [50001]}]"#)?;
//! let target = grist::ConvertTarget::new(grist::registry().get("tfrecord")?, out.to_str().unwrap())
//!     .with_options(WriteOptions::new().with_compression("GZIP").with_lossy(Lossy::Refuse))
//!     .with_records_per_file(40)
//!     .with_threads(2);
//! let report = grist::convert([&src], Some(&spec), &target)?;
//! assert_eq!((report.records, report.files.len()), (100, 3));
//!
//! let back = grist::loader().with_path(&out).with_spec_path(out.join("spec.json")).build()?;
//! assert_eq!(back.map(|b| b.map(|b| b.rows())).sum::<Result<usize, _>>()?, 100);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A conversion is resumable (`convert.json` says what it is, a rerun
//! keeps the parts already complete, [`Manifest`] lists each part with its
//! CRC-32C) and can be split between machines
//! ([`ConvertTarget::with_shard`], then [`merge_shards`]).
//!
//! This crate is the front door. It holds the [`registry`] of the formats
//! (which format a file is in: by name, then by content), [`loader`],
//! a [`LoaderBuilder`] that knows them all, and [`convert`]. The format crates are
//! re-exported whole ([`tfrecord`], [`avro`], [`ffrecord`], [`ofrecord`],
//! [`tensor`]), the storage layer as [`io`], the loader's types at the
//! root.
//!
//! | Cargo feature | default | what it adds |
//! |---|---|---|
//! | `remote` | off | object stores (`s3://`, `gs://`, `az://`, `http(s)://`) wherever a path is taken, through `object_store` (needs Rust 1.89) |
//! | `avro-bzip2` | off | Avro's `bzip2` codec (pure Rust) |
//! | `avro-xz` | off | Avro's `xz` codec (pure Rust) |
//! | `tfrecord-zstd` | off | ZSTD-compressed TFRecord files (not a TensorFlow codec) |
//! | `arrow` | off | [grist-arrow](https://docs.rs/grist-arrow) as `grist::arrow`: batches to and from Apache Arrow record batches, record batches written to any format (needs Rust 1.88) |
//!
//! ```
//! use grist::tensor::{DType, FeatureSpec};
//! use grist::tfrecord::{ExampleBuilder, RecordWriter};
//!
//! let dir = tempfile::tempdir()?;
//! // A TFRecord file named as Spark names its parts: TFRecord by extension.
//! let path = dir.path().join("part-00000.tfrecord");
//! let mut w = RecordWriter::create(&path, Default::default())?;
//! for i in 0..10i64 {
//!     w.write_record(&ExampleBuilder::new().with_int64s("id", [i]).encode())?;
//! }
//! w.finish()?;
//!
//! let mut loader = grist::loader()
//!     .with_path(dir.path())
//!     .with_specs([FeatureSpec::dense("id", DType::Int64, [])])
//!     .with_batch_size(4)
//!     .build()?;
//! assert_eq!(loader.format().name(), "TFRecord");
//! let batch = loader.next_batch().unwrap()?;
//! let ids = batch.dense::<i64>("id")?.values;
//! assert_eq!(ids, &[0, 1, 2, 3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

use std::sync::Arc;

mod convert;
mod manifest;

pub use convert::{
    ConvertError, ConvertProgress, ConvertReport, ConvertTarget, DEFAULT_BATCH, SPEC_FILE, Split,
    convert, infer_spec,
};
pub use manifest::{
    CONVERT_FILE, MANIFEST_FILE, Manifest, ManifestPart, PAUSE_BEFORE_MANIFEST, Shard, merge_shards,
};

#[cfg(feature = "arrow")]
pub use grist_arrow as arrow;
pub use grist_avro_tensor as avro;
pub use grist_ffrecord as ffrecord;
pub use grist_io as io;
pub use grist_io::{Address, Storage};
pub use grist_loader::{
    Access, Epochs, Error as LoadError, Loader, LoaderBuilder, LoaderState, MAX_THREADS,
    RandomAccess, ShardMode, Stats, Threads,
};
pub use grist_ofrecord as ofrecord;
pub use grist_tensor as tensor;
pub use grist_tensor::{Format, Registry};
pub use grist_tfrecord as tfrecord;

/// Every grist format, in the order content sniffing tries them: TFRecord
/// (a frame whose length CRC holds), Avro (`Obj\x01`), FFRecord (a header
/// whose checksum holds), OFRecord (a length prefix and a feature map).
///
/// ```
/// let registry = grist::registry();
/// let names: Vec<_> = registry.formats().iter().map(|f| f.id()).collect();
/// assert_eq!(names, ["tfrecord", "avro", "ffrecord", "ofrecord"]);
/// assert_eq!(registry.by_name("part-00000").unwrap().id(), "ofrecord");
/// assert_eq!(registry.by_name("part-00000.tfrecord.gz").unwrap().id(), "tfrecord");
/// ```
pub fn registry() -> Registry {
    Registry::new()
        .with_format(Arc::new(grist_tfrecord::TfRecordFormat))
        .with_format(Arc::new(grist_avro_tensor::AvroFormat))
        .with_format(Arc::new(grist_ffrecord::FfrFormat::default()))
        .with_format(Arc::new(grist_ofrecord::OfRecordFormat::default()))
}

/// A loader builder that knows every grist format ([`registry`]).
pub fn loader() -> LoaderBuilder {
    LoaderBuilder::new().with_registry(registry())
}

/// The README's examples, run as doc tests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
