//! The loader's error type.

use std::sync::Arc;

use grist_tensor::{BoxError, ErrorKind, FormatError, Location, RegistryError, TensorError};

/// What went wrong while loading.
///
/// Errors about the data come from the formats and already name the file,
/// the record (or block, sample) and the feature; the loader passes them
/// on unchanged, and [`location`](Self::location) answers for all of them
/// the same way. A cause is returned by `source()` and left out of the
/// variant's own message, so that printing the chain shows it once. After
/// an error the loader yields nothing more.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // -- bad data (and spec errors found by the format decoders) --
    /// A format's error: framing, checksums, compression, records that do
    /// not fit the specs, specs the format cannot honour, reading a file.
    /// Downcast it (`e.downcast_ref::<grist_tfrecord::Error>()`) for the
    /// format's own variants.
    #[error(transparent)]
    Format(BoxError),
    /// A batch could not be finished (a ragged feature's partitions do not
    /// fit, or padding would exceed the limits).
    #[error("{at}: the batch starting here")]
    Batch {
        /// The batch's first record.
        at: Box<Location>,
        /// What was wrong.
        #[source]
        source: Box<TensorError>,
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
    /// Sources that could not be listed, or whose format could not be
    /// told (see [`RegistryError`]).
    #[error(transparent)]
    Sources(Box<RegistryError>),
    /// A saved state that does not belong to a loader built with these
    /// arguments.
    #[error("the saved loader state does not fit this loader: {reason}")]
    StateMismatch {
        /// What differs.
        reason: String,
    },

    // -- I/O --
    /// Reading a spec file through the storage layer failed (the message
    /// names the file or URL).
    #[error(transparent)]
    Storage(#[from] grist_tensor::StorageError),
    /// Starting a thread failed.
    #[error("{file}")]
    Io {
        /// The file (or thread).
        file: Arc<str>,
        /// The cause.
        #[source]
        source: std::io::Error,
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
    pub(crate) fn io(file: &Arc<str>, source: std::io::Error) -> Self {
        Error::Io {
            file: file.clone(),
            source,
        }
    }

    pub(crate) fn option(option: &'static str, reason: impl Into<String>) -> Self {
        Error::BadOption {
            option,
            reason: reason.into(),
        }
    }

    /// Where the error happened (file, block, record, byte, feature), for
    /// errors about the data, whatever the format.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::Format(e) => e.location(),
            Error::Sources(e) => e.location(),
            Error::Batch { at, .. } => Some(at),
            _ => None,
        }
    }

    /// The format's error, when it is one of type `E`.
    pub fn downcast_ref<E: FormatError>(&self) -> Option<&E> {
        match self {
            Error::Format(e) => e.downcast_ref::<E>(),
            _ => None,
        }
    }
}

impl FormatError for Error {
    fn location(&self) -> Option<&Location> {
        Error::location(self)
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Error::Format(e) => e.kind(),
            Error::Sources(e) => e.kind(),
            Error::Batch { source, .. } => source.kind(),
            Error::BadOption { .. } | Error::StateMismatch { .. } => ErrorKind::Argument,
            Error::Storage(e) => e.kind(),
            Error::Io { .. } => ErrorKind::Io,
            Error::ThreadPanicked { .. } => ErrorKind::Unsupported,
        }
    }
}

impl From<BoxError> for Error {
    fn from(e: BoxError) -> Self {
        Error::Format(e)
    }
}

impl From<RegistryError> for Error {
    fn from(e: RegistryError) -> Self {
        Error::Sources(Box::new(e))
    }
}

impl From<TensorError> for Error {
    fn from(e: TensorError) -> Self {
        Error::Format(Box::new(e))
    }
}
