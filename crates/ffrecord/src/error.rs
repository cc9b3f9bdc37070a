//! The error type of grist-ffrecord.

use std::fmt;
use std::sync::Arc;

use grist_tensor::{ErrorKind, FeatureProblem, FormatError, Location, TensorError};

/// What is wrong with a stored sample offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OffsetProblem {
    /// The offset points into the header (or is negative).
    BeforeData {
        /// Where the samples can start: the header's length.
        header_len: u64,
    },
    /// The offset is past the end of the file.
    PastEnd {
        /// The file's size.
        size: u64,
    },
    /// The offset is smaller than the previous sample's.
    Decreasing {
        /// The previous sample's offset.
        previous: u64,
    },
}

impl fmt::Display for OffsetProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OffsetProblem::BeforeData { header_len } => {
                write!(f, "is before the end of the {header_len}-byte header")
            }
            OffsetProblem::PastEnd { size } => {
                write!(f, "is past the end of the file ({size} bytes)")
            }
            OffsetProblem::Decreasing { previous } => {
                write!(f, "is smaller than the previous sample's offset {previous}")
            }
        }
    }
}

/// The classes of errors, as the corpus manifests name the data errors
/// ([`Error::class`]; [`FormatError::kind`] sorts them by who is at
/// fault instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The file ends inside its header or inside a sample (`truncated`).
    Truncated,
    /// The metadata CRC-32 does not match (`metadata_checksum`).
    MetadataChecksum,
    /// A stored offset is out of bounds or decreasing (`invalid_offsets`).
    InvalidOffsets,
    /// A sample's CRC-32 does not match (`sample_checksum`).
    SampleChecksum,
    /// A sample's payload does not decode as the decoder's specs ask.
    Payload,
    /// A bad argument: an index out of range, a spec this format cannot
    /// honour, a folder without `.ffr` files, a writer given the wrong
    /// number of samples.
    Argument,
    /// A [`grist_tensor::Limits`] bound was hit.
    Limit,
    /// An I/O error.
    Io,
}

impl ErrorClass {
    /// The name the corpus manifests use (`"truncated"`,
    /// `"metadata_checksum"`, `"invalid_offsets"`, `"sample_checksum"`),
    /// or a descriptive name for the other kinds.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Truncated => "truncated",
            ErrorClass::MetadataChecksum => "metadata_checksum",
            ErrorClass::InvalidOffsets => "invalid_offsets",
            ErrorClass::SampleChecksum => "sample_checksum",
            ErrorClass::Payload => "payload",
            ErrorClass::Argument => "argument",
            ErrorClass::Limit => "limit",
            ErrorClass::Io => "io",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of grist-ffrecord, sorted by who is at fault: bad data, bad
/// arguments, limits, I/O.
///
/// A sample's [`Location`] names its file, its number within the file
/// (`record`) and, when known, its number in the dataset (`index`).
///
/// Each variant with a place holds it as a boxed [`Location`], so that the
/// error (and a `Result` of it) stays under clippy's `result_large_err`
/// threshold; a cause is returned by `source()` and left out of the
/// variant's own message, so that printing the chain shows it once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file is shorter than its header: under the 12 bytes of
    /// checksum and count, or under the `12 + 12·N` bytes that `N`
    /// samples need (a negative `N` counts as its unsigned value, as the
    /// first writers stored it).
    #[error("{file}: truncated header: {}", truncated_header(*count, *needed, *size))]
    TruncatedHeader {
        /// The file.
        file: Arc<str>,
        /// The stored sample count, when the file holds it.
        count: Option<i64>,
        /// The header length the count implies (12 when the count itself
        /// is missing).
        needed: u128,
        /// The file's size.
        size: u64,
    },
    /// The stored metadata CRC-32 (over the count, checksums and offsets)
    /// does not match; the original reports "checksum of metadata
    /// mismached".
    #[error("{file}: metadata checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    MetadataChecksum {
        /// The file.
        file: Arc<str>,
        /// The stored checksum.
        stored: u32,
        /// The checksum of the header as read.
        computed: u32,
    },
    /// A stored sample offset is out of bounds or smaller than the one
    /// before it (the original does not check and reads garbage, fails
    /// with a short read, or aborts allocating).
    #[error("{at}: invalid offset {offset}: {problem}")]
    InvalidOffset {
        /// The sample whose offset is wrong.
        at: Box<Location>,
        /// The stored offset.
        offset: i64,
        /// What is wrong.
        problem: OffsetProblem,
    },
    /// A sample's CRC-32 does not match the stored one; the original
    /// reports "checksum mismached" (and does not check zero-length
    /// samples on its batched path: grist does).
    #[error("{at}: sample checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    SampleChecksum {
        /// The sample.
        at: Box<Location>,
        /// The stored checksum.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
    /// A sample ends past the end of its file: the file shrank after it
    /// was opened.
    #[error("{at}: truncated sample: it ends at byte {end}, the file now has {size} bytes")]
    TruncatedSample {
        /// The sample.
        at: Box<Location>,
        /// Where the sample ends.
        end: u64,
        /// The file's size when the read failed.
        size: u64,
    },
    /// A sample's payload is not a valid `tf.train.Example` for the specs
    /// (its location names the file, the sample as its record, its
    /// number in the dataset when known, and the feature).
    #[error(transparent)]
    Example {
        /// The tf.Example decoder's error.
        source: Box<grist_tfrecord::Error>,
    },
    /// A sample's payload is not a valid OFRecord for the decoder's fields
    /// (its location names the file, the sample as its record, its number
    /// in the dataset when known, and the feature).
    #[error(transparent)]
    OfRecord {
        /// The OFRecord decoder's error.
        source: Box<grist_ofrecord::Error>,
    },
    /// A sample's payload does not fit a raw tensor spec
    /// ([`FeatureProblem::WrongByteLength`],
    /// [`FeatureProblem::BadBool`]).
    #[error("{at}: {problem}")]
    Feature {
        /// The sample and the feature.
        at: Box<Location>,
        /// What is wrong.
        problem: FeatureProblem,
    },
    /// A sample number at or past the end of the dataset was asked for
    /// (the original reports "index >= number of samples").
    #[error("sample index {index} is out of range: the dataset has {count} samples")]
    IndexOutOfRange {
        /// The index asked for.
        index: u64,
        /// The number of samples.
        count: u64,
    },
    /// A folder holds no `*.ffr` file.
    #[error("{dir}: no *.ffr files in this folder")]
    NoFiles {
        /// The folder.
        dir: Arc<str>,
    },
    /// A dataset path names something that is not a regular file.
    #[error("{file}: not a regular file")]
    NotAFile {
        /// The path.
        file: Arc<str>,
    },
    /// More samples were written than the count given up front.
    #[error("{file}: the writer was created for {declared} samples; no more can be written")]
    TooManySamples {
        /// The file being written.
        file: Arc<str>,
        /// The declared count.
        declared: u64,
    },
    /// A writer was finished with fewer samples than the count given up
    /// front; nothing was left under the file's name.
    #[error("{file}: the writer was created for {declared} samples but {written} were written")]
    CountMismatch {
        /// The file being written.
        file: Arc<str>,
        /// The declared count.
        declared: u64,
        /// The number written.
        written: u64,
    },
    /// A spec is invalid or cannot be honoured (raised when a decoder is
    /// built).
    #[error(transparent)]
    Spec(#[from] TensorError),
    /// A sample is larger than [`grist_tensor::Limits`] allow.
    #[error("{at}: sample of {len} bytes exceeds the limit of {max} bytes")]
    SampleTooLarge {
        /// The sample.
        at: Box<Location>,
        /// Its length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Reading a header or a batch of samples would allocate more than
    /// [`grist_tensor::Limits`] allow.
    #[error("{file}")]
    TooLarge {
        /// The file (for a batch spanning files: its first sample's file).
        file: Arc<str>,
        /// The limit that was hit.
        source: TensorError,
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

fn truncated_header(count: Option<i64>, needed: u128, size: u64) -> String {
    match count {
        None => format!("the file has {size} bytes, the checksum and sample count need 12"),
        Some(n) => format!("{n} samples need a {needed}-byte header, the file has {size} bytes"),
    }
}

impl Error {
    /// The class of the error; for data errors, the name the corpus
    /// manifests use ([`ErrorClass::name`]).
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::TruncatedHeader { .. } | Error::TruncatedSample { .. } => ErrorClass::Truncated,
            Error::MetadataChecksum { .. } => ErrorClass::MetadataChecksum,
            Error::InvalidOffset { .. } => ErrorClass::InvalidOffsets,
            Error::SampleChecksum { .. } => ErrorClass::SampleChecksum,
            Error::Example { source, .. } => match **source {
                grist_tfrecord::Error::BatchTooLarge { .. }
                | grist_tfrecord::Error::RecordTooLarge { .. } => ErrorClass::Limit,
                grist_tfrecord::Error::Spec(_) => ErrorClass::Argument,
                _ => ErrorClass::Payload,
            },
            Error::OfRecord { source, .. } => match **source {
                grist_ofrecord::Error::BatchTooLarge { .. }
                | grist_ofrecord::Error::RecordTooLarge { .. } => ErrorClass::Limit,
                grist_ofrecord::Error::Spec(_) => ErrorClass::Argument,
                _ => ErrorClass::Payload,
            },
            Error::Feature { .. } => ErrorClass::Payload,
            Error::IndexOutOfRange { .. }
            | Error::NoFiles { .. }
            | Error::NotAFile { .. }
            | Error::TooManySamples { .. }
            | Error::CountMismatch { .. }
            | Error::Spec(_) => ErrorClass::Argument,
            Error::SampleTooLarge { .. } | Error::TooLarge { .. } => ErrorClass::Limit,
            Error::Io { .. } | Error::Storage(_) => ErrorClass::Io,
        }
    }

    /// The file a data error is about, if it names one.
    pub fn file(&self) -> Option<&Arc<str>> {
        match self {
            Error::TruncatedHeader { file, .. }
            | Error::MetadataChecksum { file, .. }
            | Error::NoFiles { dir: file }
            | Error::NotAFile { file }
            | Error::TooManySamples { file, .. }
            | Error::CountMismatch { file, .. }
            | Error::TooLarge { file, .. }
            | Error::Io { file, .. } => Some(file),
            Error::InvalidOffset { at, .. }
            | Error::SampleChecksum { at, .. }
            | Error::TruncatedSample { at, .. }
            | Error::SampleTooLarge { at, .. }
            | Error::Feature { at, .. } => Some(&at.file),
            Error::Example { source } => source.location().map(|l| &l.file),
            Error::OfRecord { source } => source.location().map(|l| &l.file),
            Error::Storage(e) => FormatError::location(e).map(|l| &l.file),
            Error::IndexOutOfRange { .. } | Error::Spec(_) => None,
        }
    }

    /// Where a data error happened: the sample (its file, its number in
    /// the file as `record`, its number in the dataset as `index` when
    /// known) and, for payload errors, the feature. The same as
    /// [`FormatError::location`].
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::InvalidOffset { at, .. }
            | Error::SampleChecksum { at, .. }
            | Error::TruncatedSample { at, .. }
            | Error::Feature { at, .. }
            | Error::SampleTooLarge { at, .. } => Some(at.as_ref()),
            Error::Example { source } => source.location(),
            Error::OfRecord { source } => source.location(),
            Error::Storage(e) => FormatError::location(e),
            Error::TruncatedHeader { .. }
            | Error::MetadataChecksum { .. }
            | Error::IndexOutOfRange { .. }
            | Error::NoFiles { .. }
            | Error::NotAFile { .. }
            | Error::TooManySamples { .. }
            | Error::CountMismatch { .. }
            | Error::Spec(_)
            | Error::TooLarge { .. }
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
            Error::TruncatedHeader { .. }
            | Error::MetadataChecksum { .. }
            | Error::InvalidOffset { .. }
            | Error::SampleChecksum { .. }
            | Error::TruncatedSample { .. }
            | Error::Feature { .. } => ErrorKind::Data,
            Error::Example { source } => FormatError::kind(&**source),
            Error::OfRecord { source } => FormatError::kind(&**source),
            Error::IndexOutOfRange { .. }
            | Error::NoFiles { .. }
            | Error::NotAFile { .. }
            | Error::TooManySamples { .. }
            | Error::CountMismatch { .. } => ErrorKind::Argument,
            Error::Spec(e) => e.kind(),
            Error::SampleTooLarge { .. } | Error::TooLarge { .. } => ErrorKind::Limit,
            Error::Storage(e) => e.kind(),
            Error::Io { .. } => ErrorKind::Io,
        }
    }
}

/// A `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
