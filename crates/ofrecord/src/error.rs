//! The error type of grist-ofrecord.

use std::path::PathBuf;
use std::sync::Arc;

use grist_tensor::{ErrorKind, FeatureProblem, FormatError, Location, TensorError};

/// The name the OFRecord corpus manifests give a feature problem
/// (`decoder_runs[].result.error`): `feature_missing`, `unsupported_kind`,
/// `not_bytes_list`, `bytes_list_needs_exactly_one_value`,
/// `length_mismatch`, `overflow_undefined_in_oneflow`; problems OneFlow's
/// decoders cannot have are `type_mismatch`, `not_multiple`,
/// `index_out_of_range`, `index_count_mismatch`, `bad_partition` (and
/// `feature` for problems of other formats).
pub fn problem_manifest_kind(problem: &FeatureProblem) -> &'static str {
    match problem {
        FeatureProblem::Missing => "feature_missing",
        FeatureProblem::NoKind => "unsupported_kind",
        FeatureProblem::TypeMismatch { .. } => "type_mismatch",
        FeatureProblem::NotBytesList { .. } => "not_bytes_list",
        FeatureProblem::BytesValueCount { .. } => "bytes_list_needs_exactly_one_value",
        FeatureProblem::WrongCount { .. } => "length_mismatch",
        FeatureProblem::Overrun { .. } | FeatureProblem::Unrepresentable { .. } => {
            "overflow_undefined_in_oneflow"
        }
        FeatureProblem::NotMultiple { .. } => "not_multiple",
        FeatureProblem::IndexOutOfRange { .. } => "index_out_of_range",
        FeatureProblem::IndexCountMismatch { .. } => "index_count_mismatch",
        FeatureProblem::BadPartition { .. } => "bad_partition",
        _ => "feature",
    }
}

/// Errors of grist-ofrecord, sorted by who is at fault: bad data, bad
/// arguments or datasets, limits, I/O.
///
/// A record's [`Location`] names its part file and its number within the
/// part (`record`) and, when known, the byte `offset` of its 8-byte length
/// prefix in the part; a record of a dataset read as one sequence also has
/// its number in the dataset (`index`).
///
/// Each variant with a place holds it as a boxed [`Location`], so that the
/// error (and a `Result` of it) stays under clippy's `result_large_err`
/// threshold; a cause is returned by `source()` and left out of the
/// variant's own message, so that printing the chain shows it once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Fewer than 8 bytes are left for a record's length prefix.
    #[error("{at}: truncated: only {available} bytes left for an 8-byte length prefix")]
    TruncatedLength {
        /// The record.
        at: Box<Location>,
        /// The bytes left.
        available: u64,
    },
    /// A record's length runs past the end of its file.
    #[error("{at}: truncated: record length {len} exceeds the {available} bytes left")]
    TruncatedPayload {
        /// The record.
        at: Box<Location>,
        /// The length read from the prefix.
        len: u64,
        /// The payload bytes left in the file.
        available: u64,
    },
    /// A length prefix is negative, or zero when zero-length records are
    /// refused (OneFlow aborts on both).
    #[error("{at}: invalid record length {len}")]
    InvalidLength {
        /// The record.
        at: Box<Location>,
        /// The length read from the prefix.
        len: i64,
    },
    /// A record is not a valid serialized OFRecord.
    #[error("{at}: could not parse OFRecord: {reason} at byte {offset} of the record")]
    Malformed {
        /// The record.
        at: Box<Location>,
        /// What is wrong with the wire format.
        reason: &'static str,
        /// Byte offset within the record.
        offset: usize,
    },
    /// One feature of a record does not fit its output.
    #[error("{at}: {problem}")]
    Feature {
        /// The record and the feature (or key).
        at: Box<Location>,
        /// What is wrong.
        problem: FeatureProblem,
    },
    /// A part file of a dataset does not exist (OneFlow: "Fail to open
    /// file", a process abort).
    #[error("{}: part {part} of the dataset is missing", file.display())]
    MissingPart {
        /// The part's path.
        file: PathBuf,
        /// The part's index.
        part: usize,
    },
    /// A dataset folder has no part files, or part names that do not
    /// form one numbered dataset.
    #[error("{}: {reason}", dir.display())]
    BadDataset {
        /// The folder.
        dir: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A dataset writer would overwrite the part files of another dataset.
    #[error("{}: already holds part files ({file})", dir.display())]
    DatasetExists {
        /// The folder.
        dir: PathBuf,
        /// One part file found there.
        file: String,
    },
    /// Part sharding needs at least as many parts as ranks (OneFlow: a
    /// CHECK failure, issue #6166); shard by records instead.
    #[error("{parts} part files cannot be split over {world_size} ranks by part; shard by records")]
    TooFewParts {
        /// The number of parts.
        parts: usize,
        /// The number of ranks.
        world_size: usize,
    },
    /// A rank outside `[0, world_size)`, or a world size of 0.
    #[error("rank {rank} is not in a world of {world_size} ranks")]
    BadRank {
        /// The rank.
        rank: usize,
        /// The world size.
        world_size: usize,
    },
    /// A spec is invalid or cannot be honoured (raised when a decoder is
    /// built, or when a batch does not fit the specs it is written with).
    #[error(transparent)]
    Spec(#[from] TensorError),
    /// Finishing a batch would exceed [`grist_tensor::Limits`], or a
    /// ragged column's partitions could not be applied.
    #[error("batch starting at {at}")]
    BatchTooLarge {
        /// The batch's first record.
        at: Box<Location>,
        /// The limit that was hit.
        source: TensorError,
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
    /// A record number past the end of a chunk was asked for.
    #[error("{file}: record {record} is out of range ({count} records)")]
    RecordOutOfRange {
        /// The file.
        file: Arc<str>,
        /// The record asked for.
        record: u64,
        /// The number of records.
        count: u64,
    },
    /// Reading or writing through the storage layer failed (the message
    /// names the file or URL and the bytes).
    #[error(transparent)]
    Storage(#[from] grist_tensor::StorageError),
    /// An I/O error.
    #[error("{file}")]
    Io {
        /// The file (or folder).
        file: Arc<str>,
        /// The cause.
        source: std::io::Error,
    },
}

impl Error {
    /// The location of a data error, if it has one.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::TruncatedLength { at, .. }
            | Error::TruncatedPayload { at, .. }
            | Error::InvalidLength { at, .. }
            | Error::Malformed { at, .. }
            | Error::Feature { at, .. }
            | Error::BatchTooLarge { at, .. }
            | Error::RecordTooLarge { at, .. } => Some(at.as_ref()),
            Error::Storage(e) => FormatError::location(e),
            Error::MissingPart { .. }
            | Error::BadDataset { .. }
            | Error::DatasetExists { .. }
            | Error::TooFewParts { .. }
            | Error::BadRank { .. }
            | Error::Spec(_)
            | Error::RecordOutOfRange { .. }
            | Error::Io { .. } => None,
        }
    }

    /// The same error with the record's number in its dataset set in its
    /// location (for records that are samples of a larger dataset, such
    /// as FFRecord's OFRecord payloads).
    #[must_use]
    pub fn with_index(mut self, index: u64) -> Self {
        match &mut self {
            Error::TruncatedLength { at, .. }
            | Error::TruncatedPayload { at, .. }
            | Error::InvalidLength { at, .. }
            | Error::Malformed { at, .. }
            | Error::Feature { at, .. }
            | Error::BatchTooLarge { at, .. }
            | Error::RecordTooLarge { at, .. } => at.index = Some(index),
            _ => {}
        }
        self
    }

    /// The error kind as the OFRecord corpus manifests name it: `truncated`
    /// and `invalid_length` (framing), `protobuf` (a record that does not
    /// parse), a [`problem_manifest_kind`] for feature errors; other errors
    /// are `record_too_large`, `missing_part`, `bad_dataset`,
    /// `dataset_exists`, `too_few_parts`, `bad_rank`, `spec`, `batch`,
    /// `out_of_range` and `io`.
    ///
    /// For the corpus tests and the fuzz targets: hidden from the docs, not
    /// a stable API.
    #[doc(hidden)]
    pub fn manifest_kind(&self) -> &'static str {
        match self {
            Error::TruncatedLength { .. } | Error::TruncatedPayload { .. } => "truncated",
            Error::InvalidLength { .. } => "invalid_length",
            Error::Malformed { .. } => "protobuf",
            Error::Feature { problem, .. } => problem_manifest_kind(problem),
            Error::RecordTooLarge { .. } => "record_too_large",
            Error::MissingPart { .. } => "missing_part",
            Error::BadDataset { .. } => "bad_dataset",
            Error::DatasetExists { .. } => "dataset_exists",
            Error::TooFewParts { .. } => "too_few_parts",
            Error::BadRank { .. } => "bad_rank",
            Error::Spec(_) => "spec",
            Error::BatchTooLarge { .. } => "batch",
            Error::RecordOutOfRange { .. } => "out_of_range",
            Error::Io { .. } | Error::Storage(_) => "io",
        }
    }

    /// True for the framing errors (truncation, invalid lengths).
    pub fn is_framing(&self) -> bool {
        matches!(
            self,
            Error::TruncatedLength { .. }
                | Error::TruncatedPayload { .. }
                | Error::InvalidLength { .. }
        )
    }
}

impl FormatError for Error {
    fn location(&self) -> Option<&Location> {
        Error::location(self)
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Error::TruncatedLength { .. }
            | Error::TruncatedPayload { .. }
            | Error::InvalidLength { .. }
            | Error::Malformed { .. }
            | Error::Feature { .. } => ErrorKind::Data,
            Error::MissingPart { .. }
            | Error::BadDataset { .. }
            | Error::DatasetExists { .. }
            | Error::TooFewParts { .. }
            | Error::BadRank { .. }
            | Error::RecordOutOfRange { .. } => ErrorKind::Argument,
            Error::Spec(e) => e.kind(),
            Error::BatchTooLarge { .. } | Error::RecordTooLarge { .. } => ErrorKind::Limit,
            Error::Storage(e) => e.kind(),
            Error::Io { .. } => ErrorKind::Io,
        }
    }
}

/// A `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
