//! The error type of grist-tfrecord.

use std::sync::Arc;

use grist_tensor::{ErrorKind, FeatureProblem, FormatError, Location, TensorError};

/// Errors of grist-tfrecord, sorted by who is at fault: bad data, bad
/// arguments, limits, I/O.
///
/// Each variant with a place holds it as a boxed [`Location`], so that the
/// error (and a `Result` of it) stays under clippy's `result_large_err`
/// threshold; a cause is returned by `source()` and left out of the
/// variant's own message, so that printing the chain shows it once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The masked CRC32C of a record's length does not match (TensorFlow:
    /// `DataLossError: corrupted record at <offset>`, the record's start).
    #[error("{at}: corrupted record at {offset}: length CRC mismatch")]
    CorruptLength {
        /// The record.
        at: Box<Location>,
        /// Byte offset of the record's start in the (decompressed) stream.
        offset: u64,
    },
    /// The masked CRC32C of a record's payload does not match (TensorFlow:
    /// `corrupted record at <offset>`, the payload's start).
    #[error("{at}: corrupted record at {offset}: data CRC mismatch")]
    CorruptData {
        /// The record.
        at: Box<Location>,
        /// Byte offset of the payload in the (decompressed) stream.
        offset: u64,
    },
    /// The stream ends inside a record (TensorFlow: `truncated record at
    /// <offset>`, the record's start).
    #[error("{at}: truncated record at {offset}")]
    Truncated {
        /// The record.
        at: Box<Location>,
        /// Byte offset of the record's start in the (decompressed) stream.
        offset: u64,
    },
    /// The compressed stream is damaged.
    #[error("{at}: corrupt compressed stream")]
    Decompress {
        /// The record being read when inflating failed.
        at: Box<Location>,
        /// The codec's error.
        source: std::io::Error,
    },
    /// A record is not a valid protobuf message of the expected type.
    #[error("{at}: could not parse {message}: {reason} at byte {offset}")]
    Malformed {
        /// The record.
        at: Box<Location>,
        /// The message type (`"Example"`, `"SequenceExample"`).
        message: &'static str,
        /// What is wrong with the wire format.
        reason: &'static str,
        /// Byte offset within the record.
        offset: usize,
    },
    /// A `Features` or `FeatureLists` message holds a field other than
    /// its map (field 1, length-delimited), or a `FeatureList` that is
    /// parsed one other than its features. Protobuf would skip it;
    /// TensorFlow's parser refuses the record, and so does grist.
    #[error(
        "{at}: could not parse {message}: field {field} (wire type {wire_type}) \
         is not its feature map, at byte {offset}"
    )]
    UnknownField {
        /// The record.
        at: Box<Location>,
        /// The message holding it (`"Features"`, `"FeatureLists"`,
        /// `"FeatureList"`: then the location names the feature).
        message: &'static str,
        /// The field number.
        field: u64,
        /// The wire type.
        wire_type: u8,
        /// Byte offset of the field's tag within the record.
        offset: usize,
    },
    /// One feature of a record does not fit its spec.
    #[error("{at}: {problem}")]
    Feature {
        /// The record and the feature (or key).
        at: Box<Location>,
        /// What is wrong.
        problem: FeatureProblem,
    },
    /// Finishing a batch would allocate more than [`grist_tensor::Limits`]
    /// allow (e.g. padding fixed-length sequences to a very long one).
    #[error("batch starting at {at}")]
    BatchTooLarge {
        /// The batch's first record.
        at: Box<Location>,
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
        at: Box<Location>,
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
    #[error("{file}")]
    Io {
        /// The file.
        file: Arc<str>,
        /// The cause.
        source: std::io::Error,
    },
}

impl Error {
    /// The location of a data error, if it has one (the same as
    /// [`FormatError::location`]).
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::CorruptLength { at, .. }
            | Error::CorruptData { at, .. }
            | Error::Truncated { at, .. }
            | Error::Decompress { at, .. }
            | Error::Malformed { at, .. }
            | Error::UnknownField { at, .. }
            | Error::Feature { at, .. }
            | Error::BatchTooLarge { at, .. }
            | Error::RecordTooLarge { at, .. } => Some(at.as_ref()),
            Error::Storage(e) => FormatError::location(e),
            Error::BadIndex { .. }
            | Error::RecordOutOfRange { .. }
            | Error::Spec(_)
            | Error::CompressionDisabled { .. }
            | Error::NeedsUncompressed { .. }
            | Error::Io { .. } => None,
        }
    }

    /// The same error with the record's number in its dataset set in its
    /// location (for records that are samples of a larger dataset, such
    /// as FFRecord's tf.Example payloads).
    #[must_use]
    pub fn with_index(mut self, index: u64) -> Self {
        if let Some(at) = self.location_mut() {
            at.index = Some(index);
        }
        self
    }

    fn location_mut(&mut self) -> Option<&mut Location> {
        match self {
            Error::CorruptLength { at, .. }
            | Error::CorruptData { at, .. }
            | Error::Truncated { at, .. }
            | Error::Decompress { at, .. }
            | Error::Malformed { at, .. }
            | Error::UnknownField { at, .. }
            | Error::Feature { at, .. }
            | Error::BatchTooLarge { at, .. }
            | Error::RecordTooLarge { at, .. } => Some(at.as_mut()),
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

impl FormatError for Error {
    fn location(&self) -> Option<&Location> {
        Error::location(self)
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Error::CorruptLength { .. }
            | Error::CorruptData { .. }
            | Error::Truncated { .. }
            | Error::Decompress { .. }
            | Error::Malformed { .. }
            | Error::UnknownField { .. }
            | Error::Feature { .. }
            | Error::BadIndex { .. } => ErrorKind::Data,
            Error::RecordOutOfRange { .. } | Error::NeedsUncompressed { .. } => ErrorKind::Argument,
            Error::Spec(e) => e.kind(),
            Error::BatchTooLarge { .. } | Error::RecordTooLarge { .. } => ErrorKind::Limit,
            Error::CompressionDisabled { .. } => ErrorKind::Unsupported,
            Error::Storage(e) => e.kind(),
            Error::Io { .. } => ErrorKind::Io,
        }
    }
}

/// A `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
