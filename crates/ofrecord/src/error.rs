//! The error type of grist-ofrecord.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use grist_tensor::TensorError;

/// Where in the input an error happened: a part file (empty when decoding
/// bytes that did not come from a file), a record number within it and,
/// when known, the byte offset of the record's length prefix in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The file name, or empty.
    pub file: Arc<str>,
    /// The record number within the file (0-based).
    pub record: u64,
    /// The byte offset of the record's 8-byte length prefix, when known.
    pub offset: Option<u64>,
}

impl Location {
    /// Record `record` of `file`, at an unknown offset.
    pub fn new(file: Arc<str>, record: u64) -> Self {
        Location {
            file,
            record,
            offset: None,
        }
    }

    /// The same location with its byte offset.
    pub fn with_offset(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.file.is_empty() {
            write!(f, "{}: ", self.file)?;
        }
        write!(f, "record {}", self.record)?;
        if let Some(offset) = self.offset {
            write!(f, " (length prefix at byte {offset})")?;
        }
        Ok(())
    }
}

/// What is wrong with one feature of one record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FeatureProblem {
    /// The record has no such feature and the output has no default
    /// (OneFlow: `Field <name> not found`, a process abort).
    Missing,
    /// The feature is a `Feature` with no list set (OneFlow: abort,
    /// unimplemented).
    NoKind,
    /// The feature holds another list than the spec's dtype needs.
    TypeMismatch {
        /// The list kind the spec needs (`"int64_list"`, ...).
        expected: &'static str,
        /// The list kind found.
        actual: &'static str,
    },
    /// OneFlow's bytes decoder needs a `bytes_list`.
    NotBytesList {
        /// The list kind found.
        actual: &'static str,
    },
    /// A `bytes_list` read by OneFlow's raw or bytes decoder must hold
    /// exactly one value.
    BytesValueCount {
        /// The number of values found.
        actual: usize,
    },
    /// A fixed-shape output got another number of values than its shape
    /// holds (OneFlow: a CHECK failure).
    WrongCount {
        /// The number of values the shape holds.
        expected: usize,
        /// The number found.
        actual: usize,
    },
    /// A `dim1_varying_length` list is longer than the shape holds: OneFlow
    /// writes past its buffer.
    Overrun {
        /// The number of values the shape holds.
        max: usize,
        /// The number found.
        actual: usize,
    },
    /// A value has no result in the output dtype (a float out of range of
    /// an integer type, or NaN): undefined behaviour in OneFlow's
    /// `static_cast`.
    Unrepresentable {
        /// The value, as text.
        value: String,
        /// The output dtype.
        dtype: &'static str,
    },
    /// A list's length is not a multiple of its item size.
    NotMultiple {
        /// The item size.
        item: usize,
        /// The number of values found.
        actual: usize,
    },
    /// A `SparseFeature` index is outside `[0, size)`.
    IndexOutOfRange {
        /// The index.
        index: i64,
        /// The dense size of its dimension.
        size: i64,
    },
    /// `SparseFeature` index and value lists differ in length.
    IndexCountMismatch {
        /// The number of indices.
        indices: usize,
        /// The number of values.
        values: usize,
    },
    /// A `RaggedFeature`'s partitions cannot be applied to its values.
    BadPartition {
        /// What is wrong.
        reason: String,
    },
}

impl FeatureProblem {
    /// The error kind as the OFRecord corpus manifests name it
    /// (`decoder_runs[].result.error`): `feature_missing`,
    /// `unsupported_kind`, `not_bytes_list`,
    /// `bytes_list_needs_exactly_one_value`, `length_mismatch`,
    /// `overflow_undefined_in_oneflow`; problems OneFlow's decoders cannot
    /// have are `type_mismatch`, `not_multiple`, `index_out_of_range`,
    /// `index_count_mismatch` and `bad_partition`.
    pub fn kind(&self) -> &'static str {
        match self {
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
        }
    }
}

impl fmt::Display for FeatureProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FeatureProblem::Missing => write!(f, "not found and no default is given"),
            FeatureProblem::NoKind => write!(f, "the Feature has no list set"),
            FeatureProblem::TypeMismatch { expected, actual } => {
                write!(f, "expected a {expected}, found a {actual}")
            }
            FeatureProblem::NotBytesList { actual } => {
                write!(f, "the bytes decoder needs a bytes_list, found a {actual}")
            }
            FeatureProblem::BytesValueCount { actual } => {
                write!(f, "a bytes_list must hold exactly 1 value, found {actual}")
            }
            FeatureProblem::WrongCount { expected, actual } => {
                write!(f, "{actual} values, the shape holds {expected}")
            }
            FeatureProblem::Overrun { max, actual } => write!(
                f,
                "{actual} values overrun the {max} the shape holds (dim1_varying_length)"
            ),
            FeatureProblem::Unrepresentable { value, dtype } => {
                write!(f, "value {value} cannot be converted to {dtype}")
            }
            FeatureProblem::NotMultiple { item, actual } => {
                write!(
                    f,
                    "{actual} values are not a multiple of the item size {item}"
                )
            }
            FeatureProblem::IndexOutOfRange { index, size } => {
                write!(f, "index {index} is out of bounds [0, {size})")
            }
            FeatureProblem::IndexCountMismatch { indices, values } => {
                write!(f, "{indices} indices but {values} values")
            }
            FeatureProblem::BadPartition { reason } => write!(f, "bad partitions: {reason}"),
        }
    }
}

/// Errors of grist-ofrecord, sorted by who is at fault: bad data, bad
/// arguments or datasets, limits, I/O.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Fewer than 8 bytes are left for a record's length prefix.
    #[error("{at}: truncated: only {available} bytes left for an 8-byte length prefix")]
    TruncatedLength {
        /// The record.
        at: Location,
        /// The bytes left.
        available: u64,
    },
    /// A record's length runs past the end of its file.
    #[error("{at}: truncated: record length {len} exceeds the {available} bytes left")]
    TruncatedPayload {
        /// The record.
        at: Location,
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
        at: Location,
        /// The length read from the prefix.
        len: i64,
    },
    /// A record is not a valid serialized OFRecord.
    #[error("{at}: could not parse OFRecord: {reason} at byte {offset} of the record")]
    Malformed {
        /// The record.
        at: Location,
        /// What is wrong with the wire format.
        reason: &'static str,
        /// Byte offset within the record.
        offset: usize,
    },
    /// One feature of a record does not fit its output.
    #[error("{at}: feature {feature:?}: {problem}")]
    Feature {
        /// The record.
        at: Location,
        /// The feature name (or key).
        feature: String,
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
    #[error("batch starting at {at}: {source}")]
    BatchTooLarge {
        /// The batch's first record.
        at: Location,
        /// The limit that was hit.
        source: TensorError,
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
    #[error("{file}: {source}")]
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
            | Error::RecordTooLarge { at, .. } => Some(at),
            _ => None,
        }
    }

    /// The error kind as the OFRecord corpus manifests name it: `truncated`
    /// and `invalid_length` (framing), `protobuf` (a record that does not
    /// parse), a [`FeatureProblem::kind`] for feature errors; other errors
    /// are `record_too_large`, `missing_part`, `bad_dataset`,
    /// `dataset_exists`, `too_few_parts`, `bad_rank`, `spec`, `batch`,
    /// `out_of_range` and `io`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::TruncatedLength { .. } | Error::TruncatedPayload { .. } => "truncated",
            Error::InvalidLength { .. } => "invalid_length",
            Error::Malformed { .. } => "protobuf",
            Error::Feature { problem, .. } => problem.kind(),
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

/// A `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An I/O error on `path`.
pub(crate) fn io_error(path: &std::path::Path, source: std::io::Error) -> Error {
    Error::Io {
        file: path.display().to_string().into(),
        source,
    }
}
