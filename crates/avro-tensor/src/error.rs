//! The error type of grist-avro-tensor.

use std::fmt;
use std::sync::Arc;

use grist_tensor::TensorError;

/// Where in the input an error happened: a file (empty when decoding bytes
/// that did not come from a file), a block, and a record where known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The file name, or empty.
    pub file: Arc<str>,
    /// The block number within the file (0-based).
    pub block: u64,
    /// The record number within the file (0-based), when known.
    pub record: Option<u64>,
}

impl Location {
    /// A location at block `block` of `file`.
    pub fn block(file: Arc<str>, block: u64) -> Self {
        Location {
            file,
            block,
            record: None,
        }
    }

    /// The same location at record `record`.
    pub fn with_record(mut self, record: u64) -> Self {
        self.record = Some(record);
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.file.is_empty() {
            write!(f, "{}: ", self.file)?;
        }
        write!(f, "block {}", self.block)?;
        if let Some(r) = self.record {
            write!(f, ", record {r}")?;
        }
        Ok(())
    }
}

/// What is wrong with one feature of one record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FeatureProblem {
    /// An array's length does not match the spec's dimension.
    WrongLength {
        /// The 0-based dimension (after the batch dimension).
        dim: usize,
        /// The length the shape needs.
        expected: usize,
        /// The length found.
        actual: usize,
    },
    /// A sparse feature's index and value arrays differ in length.
    IndexCountMismatch {
        /// Which `indicesN` array.
        index: usize,
        /// Its length.
        indices: usize,
        /// The length of `values`.
        values: usize,
    },
    /// A sparse index is outside its dimension.
    IndexOutOfRange {
        /// Which `indicesN` array.
        index: usize,
        /// The index found.
        value: i64,
        /// The dimension's size.
        size: i64,
    },
    /// A union took its null branch and the spec has no default.
    NullWithoutDefault,
}

impl fmt::Display for FeatureProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FeatureProblem::WrongLength {
                dim,
                expected,
                actual,
            } => write!(
                f,
                "array of {actual} values where dimension {dim} of the shape needs {expected}"
            ),
            FeatureProblem::IndexCountMismatch {
                index,
                indices,
                values,
            } => write!(
                f,
                "indices{index} has {indices} entries but values has {values}"
            ),
            FeatureProblem::IndexOutOfRange { index, value, size } => {
                write!(f, "indices{index} holds {value}, outside [0, {size})")
            }
            FeatureProblem::NullWithoutDefault => {
                write!(f, "is null and the spec gives no default")
            }
        }
    }
}

/// Errors of grist-avro-tensor, sorted by who is at fault: bad data, bad
/// arguments (specs, schemas), limits, unsupported features, I/O.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file does not start with `Obj\x01`.
    #[error("{file}: not an Avro object container file (bad magic {found:02x?})")]
    BadMagic {
        /// The file.
        file: Arc<str>,
        /// The first bytes found.
        found: Vec<u8>,
    },
    /// The header (metadata map, schema, sync marker) is malformed.
    #[error("{file}: bad header: {reason}")]
    BadHeader {
        /// The file.
        file: Arc<str>,
        /// What is wrong.
        reason: String,
    },
    /// The 16 bytes after a block are not the file's sync marker.
    #[error("{at}: sync marker mismatch after the block")]
    SyncMismatch {
        /// The block.
        at: Location,
    },
    /// The file ends inside a block.
    #[error("{at}: truncated block ({reason})")]
    TruncatedBlock {
        /// The block.
        at: Location,
        /// What was cut.
        reason: &'static str,
    },
    /// A block's record count or byte size is negative or impossible.
    #[error("{at}: bad block header: {reason}")]
    BadBlock {
        /// The block.
        at: Location,
        /// What is wrong.
        reason: String,
    },
    /// A compressed block does not inflate (or its checksum is wrong).
    #[error("{at}: corrupt {codec} block: {reason}")]
    Decompress {
        /// The block.
        at: Location,
        /// The codec.
        codec: &'static str,
        /// The codec's complaint.
        reason: String,
    },
    /// A datum does not follow its schema (bad varint, length past the
    /// block, bad union or enum index, more records than the block holds).
    #[error("{at}: bad datum: {reason}")]
    Datum {
        /// The record.
        at: Location,
        /// What is wrong.
        reason: String,
    },
    /// One feature of a record does not fit its spec.
    #[error("{at}: feature {feature:?}: {problem}")]
    Feature {
        /// The record.
        at: Location,
        /// The feature name.
        feature: String,
        /// What is wrong.
        problem: FeatureProblem,
    },
    /// A spec cannot be resolved against the file's writer schema (missing
    /// field, wrong type, wrong rank), raised when the decode plan is
    /// compiled.
    #[error("{file}: feature {feature:?}: {reason}")]
    Schema {
        /// The file whose writer schema was used.
        file: Arc<str>,
        /// The feature name.
        feature: String,
        /// What does not fit.
        reason: String,
    },
    /// A feature spec is invalid in itself.
    #[error(transparent)]
    Spec(#[from] TensorError),
    /// The file uses a codec this build does not include.
    #[error("{file}: codec {codec:?} is not supported by this build{hint}")]
    UnsupportedCodec {
        /// The file.
        file: Arc<str>,
        /// The codec name from the header.
        codec: String,
        /// How to enable it, if it is a known codec.
        hint: String,
    },
    /// A size read from the file exceeds [`grist_tensor::Limits`].
    #[error("{at}: {what} of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Where.
        at: Location,
        /// What was sized.
        what: &'static str,
        /// The size asked for.
        size: u64,
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
    /// The block (and record) location of a data error, if it has one.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::SyncMismatch { at }
            | Error::TruncatedBlock { at, .. }
            | Error::BadBlock { at, .. }
            | Error::Decompress { at, .. }
            | Error::Datum { at, .. }
            | Error::Feature { at, .. }
            | Error::TooLarge { at, .. } => Some(at),
            _ => None,
        }
    }
}

/// A `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
