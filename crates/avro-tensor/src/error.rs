//! The error type of grist-avro-tensor.

use std::sync::Arc;

use grist_tensor::{ErrorKind, FeatureProblem, FormatError, Location, TensorError};

/// Errors of grist-avro-tensor, sorted by who is at fault: bad data, bad
/// arguments (specs, schemas), limits, unsupported features, I/O.
///
/// Each variant with a place holds it as a boxed [`Location`], so that the
/// error (and a `Result` of it) stays under clippy's `result_large_err`
/// threshold; a cause is returned by `source()` and left out of the
/// variant's own message, so that printing the chain shows it once.
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
        at: Box<Location>,
    },
    /// The file ends inside a block.
    #[error("{at}: truncated block ({reason})")]
    TruncatedBlock {
        /// The block.
        at: Box<Location>,
        /// What was cut.
        reason: &'static str,
    },
    /// A block's record count or byte size is negative or impossible.
    #[error("{at}: bad block header: {reason}")]
    BadBlock {
        /// The block.
        at: Box<Location>,
        /// What is wrong.
        reason: String,
    },
    /// A compressed block does not inflate (or its checksum is wrong).
    #[error("{at}: corrupt {codec} block: {reason}")]
    Decompress {
        /// The block.
        at: Box<Location>,
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
        at: Box<Location>,
        /// What is wrong.
        reason: String,
    },
    /// One feature of a record does not fit its spec.
    #[error("{at}: {problem}")]
    Feature {
        /// The block, the record and the feature.
        at: Box<Location>,
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
    /// The reader schema is not a valid Avro schema.
    #[error("bad reader schema: {reason}")]
    BadReaderSchema {
        /// What is wrong.
        reason: String,
    },
    /// A file's writer schema cannot be read through the reader schema:
    /// the Avro specification's resolution rules forbid the pairing
    /// (types or names that do not match, a reader field the writer lacks
    /// without a default, a union with no branch to read). Raised when the
    /// decode plan is compiled.
    #[error("{file}: the writer schema does not resolve to the reader schema at {}: {reason}",
        if field.is_empty() { "the top level" } else { field.as_str() })]
    Resolution {
        /// The file whose writer schema was resolved.
        file: Arc<str>,
        /// The reader's field path (`outer.inner`, `[*]` for array items,
        /// `['*']` for map values); empty for the top level.
        field: String,
        /// What does not resolve.
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
        at: Box<Location>,
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
    #[error("{file}")]
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
            | Error::TooLarge { at, .. } => Some(at.as_ref()),
            Error::Storage(e) => FormatError::location(e),
            Error::BadMagic { .. }
            | Error::BadHeader { .. }
            | Error::Schema { .. }
            | Error::BadReaderSchema { .. }
            | Error::Resolution { .. }
            | Error::Spec(_)
            | Error::UnsupportedCodec { .. }
            | Error::Io { .. } => None,
        }
    }
}

impl FormatError for Error {
    fn location(&self) -> Option<&Location> {
        Error::location(self)
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Error::BadMagic { .. }
            | Error::BadHeader { .. }
            | Error::SyncMismatch { .. }
            | Error::TruncatedBlock { .. }
            | Error::BadBlock { .. }
            | Error::Decompress { .. }
            | Error::Datum { .. }
            | Error::Feature { .. } => ErrorKind::Data,
            Error::Schema { .. } | Error::BadReaderSchema { .. } | Error::Resolution { .. } => {
                ErrorKind::Argument
            }
            Error::Spec(e) => e.kind(),
            Error::UnsupportedCodec { .. } => ErrorKind::Unsupported,
            Error::TooLarge { .. } => ErrorKind::Limit,
            Error::Storage(e) => e.kind(),
            Error::Io { .. } => ErrorKind::Io,
        }
    }
}

/// A `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
