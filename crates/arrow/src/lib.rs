//! grist's batches as Apache Arrow record batches, and Arrow record
//! batches written to grist's formats.
//!
//! [`to_record_batch`] consumes a [`Batch`](grist_tensor::Batch) and moves
//! its vectors into Arrow buffers: the values of numeric columns, string
//! bytes and (on 64-bit targets) string offsets, ragged row splits are not
//! copied. [`from_record_batch`] goes back, taking the buffers back as
//! vectors when the record batch owned them alone, so any Arrow producer
//! (Parquet, Polars, DataFusion, Arrow IPC) feeds grist's batches;
//! [`FormatWriter`] and [`write_batches`] write record batches to any
//! grist format through its encoder and sink, refusing what the format or
//! grist cannot hold before the file exists.
//!
//! ```
//! use grist_arrow::{from_record_batch, to_record_batch};
//! use grist_tensor::SpecFile;
//! use grist_tensor::synth::{prod19, prod19_example_specs};
//!
//! let spec = SpecFile { features: prod19_example_specs(), ..Default::default() };
//! let batch = prod19(64, 7);
//! let expected = batch.clone();
//! let ids = batch.dense::<i64>("s_int")?.values.as_ptr();
//!
//! let arrow = to_record_batch(batch, &spec)?;
//! assert_eq!((arrow.num_rows(), arrow.num_columns()), (64, 19));
//! // The int64 values were moved, not copied.
//! use arrow_array::{cast::AsArray, types::Int64Type};
//! assert_eq!(arrow.column(0).as_primitive::<Int64Type>().values().as_ptr(), ids);
//!
//! // The schema's metadata holds the specs: the same batch comes back.
//! let (back, back_spec) = from_record_batch(arrow, None)?;
//! assert_eq!((back, back_spec.features), (expected, spec.features));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The mapping
//!
//! | grist | Arrow | copied |
//! |---|---|---|
//! | dense `[batch]` | the primitive array (`Int32`, `Int64`, `Float32`, `Float64`) | nothing |
//! | dense `[batch, d1, …]` | `FixedSizeList`s nested over the flat values, outermost first; a dimension the spec pads to the batch (`-1`) is a `LargeList` of uniform offsets instead, so the Arrow type is the same for every batch | the offsets of padded dimensions (O(rows)) |
//! | fixed-length sequence `[batch, steps, …]` | the steps a `LargeList` (padded per batch), the item dimensions as dense | the steps' offsets |
//! | varlen (COO `[row, i]`) | `LargeList<T>`; rank `r` (`[row, i, j, …]`): lists nested `r` deep, a row's list as long as its largest index plus one (gaps are empty lists) | the offsets, computed from the indices |
//! | ragged | a `LargeList` per level of row splits over the flat values (their inner dimensions as `FixedSizeList`s) | nothing: the splits become the offsets |
//! | sparse (index keys: positions matter) | `Struct { indices: LargeList<FixedSizeList<Int64, rank>>, values: LargeList<T> }`, one entry per row; the index tuples without the batch row | the index tuples (the batch row dropped) and the row offsets |
//! | strings | `LargeUtf8` when every value is UTF-8 (checked per column and batch), else `LargeBinary` | nothing on 64-bit targets (the `usize` offsets reinterpreted as `i64`); the offsets elsewhere |
//! | bool | `Boolean` | the values, packed into bits |
//!
//! Every field carries metadata: `grist.kind` (the feature kind),
//! `grist.spec` (the feature's spec as JSON), `grist.section` and
//! `grist.name`. Columns of a `tf.SequenceExample` batch are named with
//! their section as a prefix (`context/x`, `feature_lists/x`,
//! `feature_list_lengths/x`; see [`field_name`]) because a feature list
//! and its lengths share a name; plain records keep their names. The
//! schema's `grist.sequence` says the batches are sequence examples.
//!
//! Back from Arrow, a field without metadata is read by its type (see
//! [`spec_from_schema`]); integers that widen exactly (`Int8`, `Int16`,
//! `UInt8`, `UInt16` to int32, `UInt32` to int64), `Utf8`, `Binary` and
//! the view types are read with a copy. Dates, times, decimals,
//! `UInt64`, `Float16`, dictionaries, unions, maps and structs other than
//! sparse features are refused, naming the column, as are nulls (a null
//! list that is empty reads as an empty list).
//!
//! # Why a crate of its own
//!
//! Arrow is a large dependency tree; in its own crate, only its users
//! build it. The crate depends on grist-tensor and grist-io (the format
//! contract and the storage layer), not on the facade: the writer takes
//! any `&dyn Format`, such as one from `grist::registry()`.
#![deny(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod error;
mod from_arrow;
mod schema;
mod to_arrow;
mod writer;

pub use error::Error;
pub use from_arrow::from_record_batch;
pub use schema::{
    KIND_KEY, NAME_KEY, SECTION_KEY, SEQUENCE_KEY, SPEC_KEY, field_name, spec_from_schema,
};
pub use to_arrow::to_record_batch;
pub use writer::{FormatWriter, write_batches};

/// The README's example, run as a doc test so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
