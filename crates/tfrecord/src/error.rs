//! The error type of grist-tfrecord.

use std::fmt;
use std::sync::Arc;

use grist_tensor::{DType, TensorError};

/// Where in the input an error happened: a file (empty when decoding bytes
/// that did not come from a file) and a record number within it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The file name, or empty.
    pub file: Arc<str>,
    /// The record number within the file (0-based).
    pub record: u64,
}

impl Location {
    /// A location in `file`.
    pub fn new(file: Arc<str>, record: u64) -> Self {
        Location { file, record }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.file.is_empty() {
            write!(f, "record {}", self.record)
        } else {
            write!(f, "{}: record {}", self.file, self.record)
        }
    }
}

/// What is wrong with one feature of one record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FeatureProblem {
    /// The feature holds another list kind than the spec's dtype needs.
    TypeMismatch {
        /// The dtype the spec asks for.
        expected: DType,
        /// The list kind found (`"int64_list"`, `"float_list"`, `"bytes_list"`).
        actual: &'static str,
    },
    /// A dense feature has the wrong number of values.
    WrongCount {
        /// The number of values the shape needs.
        expected: usize,
        /// The number found.
        actual: usize,
    },
    /// A sequence feature's value count is not a multiple of its item size.
    NotMultiple {
        /// The item size.
        item: usize,
        /// The number of values found.
        actual: usize,
    },
    /// A required feature (no default) is missing.
    Missing,
    /// A `SparseFeature` index is outside `[0, size)`.
    IndexOutOfRange {
        /// The index found.
        index: i64,
        /// The dense size of the dimension.
        size: i64,
    },
    /// `SparseFeature` index and value lists differ in length.
    IndexCountMismatch {
        /// The number of indices.
        indices: usize,
        /// The number of values.
        values: usize,
    },
    /// A `RaggedFeature` partition is inconsistent with its values.
    BadPartition {
        /// The partition feature.
        key: String,
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for FeatureProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FeatureProblem::TypeMismatch { expected, actual } => write!(
                f,
                "data types don't match: expected {}, found {actual}",
                expected.tf_name()
            ),
            FeatureProblem::WrongCount { expected, actual } => write!(
                f,
                "number of values != expected: found {actual}, the shape needs {expected}"
            ),
            FeatureProblem::NotMultiple { item, actual } => write!(
                f,
                "{actual} values are not a multiple of the item size {item}"
            ),
            FeatureProblem::Missing => write!(f, "is required but could not be found"),
            FeatureProblem::IndexOutOfRange { index, size } => {
                write!(f, "index {index} is out of bounds [0, {size})")
            }
            FeatureProblem::IndexCountMismatch { indices, values } => {
                write!(f, "{indices} indices but {values} values")
            }
            FeatureProblem::BadPartition { key, reason } => {
                write!(f, "partition {key:?}: {reason}")
            }
        }
    }
}

/// Errors of grist-tfrecord, sorted by who is at fault: bad data, bad
/// arguments, limits, I/O.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The masked CRC32C of a record's length does not match (TensorFlow:
    /// `DataLossError: corrupted record at <offset>`, the record's start).
    #[error("{at}: corrupted record at {offset}: length CRC mismatch")]
    CorruptLength {
        /// The record.
        at: Location,
        /// Byte offset of the record's start in the (decompressed) stream.
        offset: u64,
    },
    /// The masked CRC32C of a record's payload does not match (TensorFlow:
    /// `corrupted record at <offset>`, the payload's start).
    #[error("{at}: corrupted record at {offset}: data CRC mismatch")]
    CorruptData {
        /// The record.
        at: Location,
        /// Byte offset of the payload in the (decompressed) stream.
        offset: u64,
    },
    /// The stream ends inside a record (TensorFlow: `truncated record at
    /// <offset>`, the record's start).
    #[error("{at}: truncated record at {offset}")]
    Truncated {
        /// The record.
        at: Location,
        /// Byte offset of the record's start in the (decompressed) stream.
        offset: u64,
    },
    /// The compressed stream is damaged.
    #[error("{at}: corrupt compressed stream: {source}")]
    Decompress {
        /// The record being read when inflating failed.
        at: Location,
        /// The codec's error.
        source: std::io::Error,
    },
    /// A record is not a valid protobuf message of the expected type.
    #[error("{at}: could not parse {message}: {reason} at byte {offset}")]
    Malformed {
        /// The record.
        at: Location,
        /// The message type (`"Example"`, `"SequenceExample"`).
        message: &'static str,
        /// What is wrong with the wire format.
        reason: &'static str,
        /// Byte offset within the record.
        offset: usize,
    },
    /// One feature of a record does not fit its spec.
    #[error("{at}: feature {feature:?}: {problem}")]
    Feature {
        /// The record.
        at: Location,
        /// The feature name (or key).
        feature: String,
        /// What is wrong.
        problem: FeatureProblem,
    },
    /// Finishing a batch would allocate more than [`grist_tensor::Limits`]
    /// allow (e.g. padding fixed-length sequences to a very long one).
    #[error("batch starting at {at}: {source}")]
    BatchTooLarge {
        /// The batch's first record.
        at: Location,
        /// The limit that was hit.
        source: TensorError,
    },
    /// An index file line is malformed or does not match the data.
    #[error("index file {file}: line {line}: {reason}")]
    BadIndex {
        /// The index file.
        file: Arc<str>,
        /// The 1-based line number.
        line: u64,
        /// What is wrong.
        reason: String,
    },
    /// A record number past the end was asked for.
    #[error("{file}: record {record} is out of range ({count} records)")]
    RecordOutOfRange {
        /// The file.
        file: Arc<str>,
        /// The record asked for.
        record: u64,
        /// The number of records.
        count: u64,
    },
    /// A spec is invalid or cannot be honoured (raised when a decoder is
    /// built).
    #[error(transparent)]
    Spec(#[from] TensorError),
    /// The file's compression is not built into this binary.
    #[error("{compression} compression is not enabled (Cargo feature `{feature}`)")]
    CompressionDisabled {
        /// The compression asked for.
        compression: &'static str,
        /// The Cargo feature that enables it.
        feature: &'static str,
    },
    /// Index files and random access need an uncompressed TFRecord file.
    #[error("{file}: index files and random access need an uncompressed file, not {compression}")]
    NeedsUncompressed {
        /// The file.
        file: Arc<str>,
        /// Its compression (`"GZIP"`, `"ZLIB"`, `"ZSTD"`).
        compression: &'static str,
    },
    /// A record is longer than [`grist_tensor::Limits`] allow.
    #[error("{at}: record of {len} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge {
        /// The record.
        at: Location,
        /// Its length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Reading or writing through the storage layer failed (the message
    /// names the file or URL and the bytes).
    #[error(transparent)]
    Storage(#[from] grist_tensor::StorageError),
    /// An I/O error.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: Arc<str>,
        /// The cause.
        source: std::io::Error,
    },
}

impl Error {
    /// The location of a data error, if it has one.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::CorruptLength { at, .. }
            | Error::CorruptData { at, .. }
            | Error::Truncated { at, .. }
            | Error::Decompress { at, .. }
            | Error::Malformed { at, .. }
            | Error::Feature { at, .. }
            | Error::RecordTooLarge { at, .. } => Some(at),
            _ => None,
        }
    }

    /// True for the framing errors TensorFlow reports as `DataLossError`.
    pub fn is_data_loss(&self) -> bool {
        matches!(
            self,
            Error::CorruptLength { .. }
                | Error::CorruptData { .. }
                | Error::Truncated { .. }
                | Error::Decompress { .. }
        )
    }
}

/// A `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
