//! The error type of grist-ffrecord.

use std::fmt;
use std::sync::Arc;

use grist_tensor::TensorError;

/// Where a sample is: its file, its number within the file and its number
/// in the dataset (files numbered one after the other).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SampleAt {
    /// The file name.
    pub file: Arc<str>,
    /// The sample's number within its file (0-based).
    pub sample: u64,
    /// The sample's number in the dataset (0-based).
    pub index: u64,
}

impl fmt::Display for SampleAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sample == self.index {
            write!(f, "{}: sample {}", self.file, self.sample)
        } else {
            write!(
                f,
                "{}: sample {} (dataset index {})",
                self.file, self.sample, self.index
            )
        }
    }
}

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

/// What is wrong with a raw tensor payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RawProblem {
    /// The payload's length is not the spec's shape times the dtype's size.
    WrongLength {
        /// The length the spec needs.
        expected: u64,
        /// The payload's length.
        actual: u64,
    },
    /// A `bool` element is neither 0 nor 1.
    BadBool {
        /// The element's byte offset in the payload.
        offset: usize,
        /// The byte found.
        value: u8,
    },
}

impl fmt::Display for RawProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawProblem::WrongLength { expected, actual } => write!(
                f,
                "payload of {actual} bytes, the dtype and shape need {expected}"
            ),
            RawProblem::BadBool { offset, value } => {
                write!(f, "byte {offset} is {value}, not a bool (0 or 1)")
            }
        }
    }
}

/// The classes of errors, as the corpus manifests name the data errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
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

impl ErrorKind {
    /// The name the corpus manifests use (`"truncated"`,
    /// `"metadata_checksum"`, `"invalid_offsets"`, `"sample_checksum"`),
    /// or a descriptive name for the other kinds.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Truncated => "truncated",
            ErrorKind::MetadataChecksum => "metadata_checksum",
            ErrorKind::InvalidOffsets => "invalid_offsets",
            ErrorKind::SampleChecksum => "sample_checksum",
            ErrorKind::Payload => "payload",
            ErrorKind::Argument => "argument",
            ErrorKind::Limit => "limit",
            ErrorKind::Io => "io",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of grist-ffrecord, sorted by who is at fault: bad data, bad
/// arguments, limits, I/O.
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
        at: SampleAt,
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
        at: SampleAt,
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
        at: SampleAt,
        /// Where the sample ends.
        end: u64,
        /// The file's size when the read failed.
        size: u64,
    },
    /// A sample's payload is not a valid `tf.train.Example` for the specs
    /// (the cause names the file, the sample as its record and the
    /// feature).
    #[error("{source}{}", example_suffix(*index))]
    Example {
        /// The sample's number in the dataset, when known (chunks know only
        /// the number within the file).
        index: Option<u64>,
        /// The tf.Example decoder's error.
        source: Box<grist_tfrecord::Error>,
    },
    /// A sample's payload is not a valid OFRecord for the decoder's fields
    /// (the cause names the file, the sample as its record and the
    /// feature).
    #[error("{source}{}", example_suffix(*index))]
    OfRecord {
        /// The sample's number in the dataset, when known (chunks know only
        /// the number within the file).
        index: Option<u64>,
        /// The OFRecord decoder's error.
        source: Box<grist_ofrecord::Error>,
    },
    /// A sample's payload does not fit a raw tensor spec.
    #[error("{file}: sample {sample}{}: feature {feature:?}: {problem}", index_suffix(*sample, *index))]
    RawPayload {
        /// The file.
        file: Arc<str>,
        /// The sample's number within its file.
        sample: u64,
        /// The sample's number in the dataset, when known (chunks know
        /// only the number within the file).
        index: Option<u64>,
        /// The feature name.
        feature: String,
        /// What is wrong.
        problem: RawProblem,
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
        at: SampleAt,
        /// Its length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Reading a header or a batch of samples would allocate more than
    /// [`grist_tensor::Limits`] allow.
    #[error("{file}: {source}")]
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
    #[error("{file}: {source}")]
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

fn index_suffix(sample: u64, index: Option<u64>) -> String {
    match index {
        Some(i) if i != sample => format!(" (dataset index {i})"),
        _ => String::new(),
    }
}

fn example_suffix(index: Option<u64>) -> String {
    index.map_or_else(String::new, |i| format!(" (dataset index {i})"))
}

impl Error {
    /// The class of the error; for data errors, the name the corpus
    /// manifests use ([`ErrorKind::name`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::TruncatedHeader { .. } | Error::TruncatedSample { .. } => ErrorKind::Truncated,
            Error::MetadataChecksum { .. } => ErrorKind::MetadataChecksum,
            Error::InvalidOffset { .. } => ErrorKind::InvalidOffsets,
            Error::SampleChecksum { .. } => ErrorKind::SampleChecksum,
            Error::Example { source, .. } => match **source {
                grist_tfrecord::Error::BatchTooLarge { .. }
                | grist_tfrecord::Error::RecordTooLarge { .. } => ErrorKind::Limit,
                grist_tfrecord::Error::Spec(_) => ErrorKind::Argument,
                _ => ErrorKind::Payload,
            },
            Error::OfRecord { source, .. } => match **source {
                grist_ofrecord::Error::BatchTooLarge { .. }
                | grist_ofrecord::Error::RecordTooLarge { .. } => ErrorKind::Limit,
                grist_ofrecord::Error::Spec(_) => ErrorKind::Argument,
                _ => ErrorKind::Payload,
            },
            Error::RawPayload { .. } => ErrorKind::Payload,
            Error::IndexOutOfRange { .. }
            | Error::NoFiles { .. }
            | Error::NotAFile { .. }
            | Error::TooManySamples { .. }
            | Error::CountMismatch { .. }
            | Error::Spec(_) => ErrorKind::Argument,
            Error::SampleTooLarge { .. } | Error::TooLarge { .. } => ErrorKind::Limit,
            Error::Io { .. } | Error::Storage(_) => ErrorKind::Io,
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
            | Error::SampleTooLarge { at, .. } => Some(&at.file),
            Error::RawPayload { file, .. } => Some(file),
            Error::Example { source, .. } => source.location().map(|l| &l.file),
            Error::OfRecord { source, .. } => source.location().map(|l| &l.file),
            Error::Storage(e) => grist_tensor::FormatError::location(e).map(|l| &l.file),
            Error::IndexOutOfRange { .. } | Error::Spec(_) => None,
        }
    }

    /// The sample an error is about, if it names one.
    pub fn sample(&self) -> Option<&SampleAt> {
        match self {
            Error::InvalidOffset { at, .. }
            | Error::SampleChecksum { at, .. }
            | Error::TruncatedSample { at, .. }
            | Error::SampleTooLarge { at, .. } => Some(at),
            _ => None,
        }
    }
}

/// A `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
