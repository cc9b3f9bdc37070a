//! The loader's error type.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use grist_tensor::{ErrorKind, FormatError, Location, TensorError};

/// What went wrong while loading.
///
/// Errors about the data come from the format crates and already name the
/// file, the record (or block, sample) and the feature; the loader passes
/// them on unchanged (boxed, so that a `Result` of this error stays small:
/// under clippy's `result_large_err` threshold in the caller's code).
/// [`location`](Error::location) answers where for every error that has a
/// place, whatever its format. After an error the loader yields nothing
/// more.
///
/// Each variant with a place holds it as a boxed [`Location`], so that the
/// error (and a `Result` of it) stays under clippy's `result_large_err`
/// threshold; a cause is returned by `source()` and left out of the
/// variant's own message, so that printing the chain shows it once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // -- bad data (and spec errors found by the format decoders) --
    /// A TFRecord file (framing, CRC, compression, tf.Example parse).
    #[error(transparent)]
    Tfrecord(Box<grist_tfrecord::Error>),
    /// An Avro object container file (header, blocks, codec, datums).
    #[error(transparent)]
    Avro(Box<grist_avro_tensor::Error>),
    /// An FFRecord file (header, sample checksums, payloads).
    #[error(transparent)]
    Ffrecord(Box<grist_ffrecord::Error>),
    /// An OFRecord part file (framing, record parse).
    #[error(transparent)]
    Ofrecord(Box<grist_ofrecord::Error>),
    /// A batch could not be finished (a ragged feature's partitions do not
    /// fit, or padding would exceed the limits).
    #[error("batch starting at {at}")]
    Batch {
        /// The batch's first record: its file and its number there.
        at: Box<Location>,
        /// What was wrong.
        source: TensorError,
    },

    // -- bad arguments --
    /// An option out of range or options that do not go together.
    #[error("{option}: {reason}")]
    BadOption {
        /// The option (builder method).
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A source path or pattern that matches no file.
    #[error("{pattern}: no input files")]
    NoFiles {
        /// The path, folder or glob pattern.
        pattern: String,
    },
    /// A glob pattern that does not parse.
    #[error("bad glob pattern {pattern:?}: {reason}")]
    BadPattern {
        /// The pattern.
        pattern: String,
        /// Why it does not parse.
        reason: String,
    },
    /// A file whose format the name does not tell.
    #[error(
        "{file}: cannot tell the record format from the name (.tfrecord, .avro, .ffr, part-N); \
         set it with with_format"
    )]
    UnknownFormat {
        /// The file.
        file: PathBuf,
    },
    /// Files of different formats in one loader.
    #[error("{first} is {first_format} but {other} is {other_format}: one loader reads one format")]
    MixedFormats {
        /// The first file.
        first: PathBuf,
        /// Its format.
        first_format: &'static str,
        /// A file of another format.
        other: PathBuf,
        /// That file's format.
        other_format: &'static str,
    },
    /// A saved state that does not belong to a loader built with these
    /// arguments.
    #[error("the saved loader state does not fit this loader: {reason}")]
    StateMismatch {
        /// What differs.
        reason: String,
    },

    // -- unsupported --
    /// A combination of format and options the loader cannot honour.
    #[error("{format}: {what}")]
    Unsupported {
        /// The format's name.
        format: &'static str,
        /// What is not supported.
        what: String,
    },

    // -- I/O --
    /// Reading a file or folder failed.
    #[error("{file}")]
    Io {
        /// The file or folder.
        file: Arc<str>,
        /// The I/O error.
        source: io::Error,
    },

    /// Reading (or decompressing) a file failed at a record.
    #[error("{at}: cannot read")]
    Read {
        /// The file, and the number there of the record being read.
        at: Box<Location>,
        /// The I/O (or decompression) error.
        source: io::Error,
    },
    /// An index (a TFRecord `.idx` file, or the index of an OFRecord part
    /// built on first read) that does not match its file.
    #[error("{at}: {reason}")]
    BadIndex {
        /// The data file and the record the index entry is for.
        at: Box<Location>,
        /// What does not match.
        reason: String,
    },

    // -- bugs --
    /// A loader thread panicked (a bug); the loader stopped.
    #[error("the loader's {thread} thread panicked: {message}")]
    ThreadPanicked {
        /// Which thread.
        thread: &'static str,
        /// The panic message, if it was text.
        message: String,
    },
}

/// The loader's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(file: &Arc<str>, source: io::Error) -> Self {
        Error::Io {
            file: file.clone(),
            source,
        }
    }

    /// Where the error happened, for errors about the data, whatever the
    /// format: a format's own error answers through
    /// [`FormatError::location`]; the loader's read, batch and index
    /// errors carry theirs.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::Tfrecord(e) => FormatError::location(&**e),
            Error::Avro(e) => FormatError::location(&**e),
            Error::Ffrecord(e) => FormatError::location(&**e),
            Error::Ofrecord(e) => FormatError::location(&**e),
            Error::Batch { at, .. } | Error::Read { at, .. } | Error::BadIndex { at, .. } => {
                Some(at.as_ref())
            }
            Error::BadOption { .. }
            | Error::NoFiles { .. }
            | Error::BadPattern { .. }
            | Error::UnknownFormat { .. }
            | Error::MixedFormats { .. }
            | Error::StateMismatch { .. }
            | Error::Unsupported { .. }
            | Error::Io { .. }
            | Error::ThreadPanicked { .. } => None,
        }
    }

    pub(crate) fn option(option: &'static str, reason: impl Into<String>) -> Self {
        Error::BadOption {
            option,
            reason: reason.into(),
        }
    }
}

impl FormatError for Error {
    fn location(&self) -> Option<&Location> {
        Error::location(self)
    }

    /// Who is at fault: a format's error answers for itself; a panicked
    /// loader thread (a bug) counts as [`ErrorKind::Unsupported`], the
    /// nearest there is to "not the caller's fault, not the data's".
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Tfrecord(e) => FormatError::kind(&**e),
            Error::Avro(e) => FormatError::kind(&**e),
            Error::Ffrecord(e) => FormatError::kind(&**e),
            Error::Ofrecord(e) => FormatError::kind(&**e),
            Error::Batch { source, .. } => match source {
                TensorError::LimitExceeded { .. } => ErrorKind::Limit,
                _ => ErrorKind::Data,
            },
            Error::BadIndex { .. } => ErrorKind::Data,
            Error::BadOption { .. }
            | Error::NoFiles { .. }
            | Error::BadPattern { .. }
            | Error::UnknownFormat { .. }
            | Error::MixedFormats { .. }
            | Error::StateMismatch { .. } => ErrorKind::Argument,
            Error::Unsupported { .. } | Error::ThreadPanicked { .. } => ErrorKind::Unsupported,
            Error::Io { .. } | Error::Read { .. } => ErrorKind::Io,
        }
    }
}

/// `From` a format crate's error: boxed into its variant.
macro_rules! from_boxed {
    ($($variant:ident: $error:ty),* $(,)?) => {$(
        impl From<$error> for Error {
            fn from(e: $error) -> Self {
                Error::$variant(Box::new(e))
            }
        }
    )*};
}

from_boxed!(
    Tfrecord: grist_tfrecord::Error,
    Avro: grist_avro_tensor::Error,
    Ffrecord: grist_ffrecord::Error,
    Ofrecord: grist_ofrecord::Error,
);
