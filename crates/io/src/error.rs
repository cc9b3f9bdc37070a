//! The one error type of grist-io.

use std::fmt;
use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

/// A boxed underlying cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong with a path, URL or object.
///
/// Every variant names the address as the user gave it. The underlying
/// cause, where there is one, is not part of the message: it is returned
/// by [`source`](std::error::Error::source), so that a report walking the
/// chain prints each cause once.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // Bad arguments.
    /// The text is not a path or URL grist can read.
    #[error("{text:?} is not a path or URL grist can read: {reason}")]
    BadAddress {
        /// The text as given.
        text: String,
        /// Why it was refused.
        reason: String,
    },
    /// A glob pattern that does not parse.
    #[error("{pattern:?} is not a valid glob pattern: {reason}")]
    BadPattern {
        /// The pattern as given.
        pattern: String,
        /// Why it was refused.
        reason: String,
    },
    /// A byte range that is reversed or reaches past the end of the object.
    #[error("{address}: bytes {}..{} are not within its {size} bytes", range.start, range.end)]
    BadRange {
        /// The object.
        address: Arc<str>,
        /// The range asked for.
        range: Range<u64>,
        /// The object's size when it was opened.
        size: u64,
    },
    /// An output buffer whose length is not the number of bytes asked for.
    #[error("the output buffer holds {actual} bytes but {expected} were asked for")]
    BufferLength {
        /// The number of bytes asked for.
        expected: u64,
        /// The buffer's length.
        actual: usize,
    },
    /// An option the object store's builder refused (a bad endpoint,
    /// missing credentials it insists on, …).
    #[error("{address}: cannot set up the object store")]
    Config {
        /// The address whose store was being set up.
        address: Arc<str>,
        /// The builder's complaint.
        source: BoxError,
    },

    // Nothing there.
    /// No file or object at that address.
    #[error("{address}: not found")]
    NotFound {
        /// The address.
        address: Arc<str>,
    },
    /// A folder where a file was expected.
    #[error("{address}: is a folder, not a file")]
    NotAFile {
        /// The address.
        address: Arc<str>,
    },

    // Unsupported.
    /// Something this build or this kind of store cannot do.
    #[error("{address}: {what} is not supported")]
    Unsupported {
        /// The address.
        address: Arc<str>,
        /// What was asked for.
        what: &'static str,
    },

    // I/O.
    /// Reading failed (opening, asking the size, or reading bytes).
    #[error("{address}: {}read failed{}", RangeText(range), AttemptsText(*attempts))]
    Read {
        /// The file or object.
        address: Arc<str>,
        /// The bytes being read, if any.
        range: Option<Range<u64>>,
        /// How many times grist-io asked for the bytes (each attempt may
        /// itself be retried at the request level by the object store
        /// client, whose message says so).
        attempts: u32,
        /// Why.
        source: BoxError,
    },
    /// Writing, committing or removing failed.
    #[error("{address}: write failed{}", AttemptsText(*attempts))]
    Write {
        /// The file or object.
        address: Arc<str>,
        /// How many times the failing request was made.
        attempts: u32,
        /// Why.
        source: BoxError,
    },
    /// Listing a folder or prefix failed.
    #[error("{address}: listing failed")]
    List {
        /// The folder, prefix or pattern.
        address: Arc<str>,
        /// Why.
        source: BoxError,
    },

    // Limits.
    /// The operation did not finish within the retry deadline.
    #[error(
        "{address}: {}gave up after {after:?} (the retry deadline)",
        RangeText(range)
    )]
    Timeout {
        /// The file or object.
        address: Arc<str>,
        /// The bytes being read, if any.
        range: Option<Range<u64>>,
        /// The deadline that passed.
        after: Duration,
    },
}

/// Shorthand for results of grist-io.
pub type Result<T, E = Error> = std::result::Result<T, E>;

struct RangeText<'a>(&'a Option<Range<u64>>);

impl fmt::Display for RangeText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(r) => write!(f, "bytes {}..{}: ", r.start, r.end),
            None => Ok(()),
        }
    }
}

struct AttemptsText(u32);

impl fmt::Display for AttemptsText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 > 1 {
            write!(f, " (after {} attempts)", self.0)
        } else {
            Ok(())
        }
    }
}

impl Error {
    /// The address the error is about, if it names one.
    pub fn address(&self) -> Option<&str> {
        match self {
            Error::BadAddress { text, .. } => Some(text),
            Error::BadPattern { pattern, .. } => Some(pattern),
            Error::BufferLength { .. } => None,
            Error::BadRange { address, .. }
            | Error::Config { address, .. }
            | Error::NotFound { address }
            | Error::NotAFile { address }
            | Error::Unsupported { address, .. }
            | Error::Read { address, .. }
            | Error::Write { address, .. }
            | Error::List { address, .. }
            | Error::Timeout { address, .. } => Some(address),
        }
    }

    /// True for [`Error::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    pub(crate) fn read(address: &Arc<str>, range: Option<Range<u64>>, source: io::Error) -> Error {
        if source.kind() == io::ErrorKind::NotFound {
            return Error::NotFound {
                address: address.clone(),
            };
        }
        Error::Read {
            address: address.clone(),
            range,
            attempts: 1,
            source: Box::new(source),
        }
    }

    pub(crate) fn write(address: &Arc<str>, source: io::Error) -> Error {
        Error::Write {
            address: address.clone(),
            attempts: 1,
            source: Box::new(source),
        }
    }

    pub(crate) fn list(address: &Arc<str>, source: impl Into<BoxError>) -> Error {
        Error::List {
            address: address.clone(),
            source: source.into(),
        }
    }
}

/// Lets `Read` and `Write` implementations return a grist-io error; the
/// error stays reachable through `get_ref().downcast_ref::<Error>()`.
impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match &e {
            Error::NotFound { .. } => io::ErrorKind::NotFound,
            Error::BadAddress { .. }
            | Error::BadPattern { .. }
            | Error::BufferLength { .. }
            | Error::Config { .. } => io::ErrorKind::InvalidInput,
            Error::BadRange { .. } => io::ErrorKind::UnexpectedEof,
            Error::NotAFile { .. } => io::ErrorKind::IsADirectory,
            Error::Unsupported { .. } => io::ErrorKind::Unsupported,
            Error::Timeout { .. } => io::ErrorKind::TimedOut,
            Error::Read { .. } | Error::Write { .. } | Error::List { .. } => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

/// A cause whose own chain repeats itself (object_store's errors print
/// their source inside their message and return it again from `source`),
/// rendered once: each link of the chain whose text the links before it
/// do not already contain, joined by ": ". It has no source of its own.
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
pub(crate) struct Flat {
    text: String,
    inner: BoxError,
}

#[cfg_attr(not(feature = "remote"), allow(dead_code))]
impl Flat {
    pub(crate) fn boxed(inner: impl Into<BoxError>) -> BoxError {
        let inner = inner.into();
        let mut text = inner.to_string();
        let mut next = inner.source();
        while let Some(e) = next {
            let t = e.to_string();
            if !t.is_empty() && !text.contains(&t) {
                text.push_str(": ");
                text.push_str(&t);
            }
            next = e.source();
        }
        Box::new(Flat { text, inner })
    }
}

impl fmt::Display for Flat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Flat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl std::error::Error for Flat {}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(e: &dyn std::error::Error) -> String {
        let mut s = e.to_string();
        let mut next = e.source();
        while let Some(c) = next {
            s.push_str(" | ");
            s.push_str(&c.to_string());
            next = c.source();
        }
        s
    }

    #[test]
    fn read_errors_name_the_range_and_print_the_cause_once() {
        let e = Error::Read {
            address: "s3://b/k".into(),
            range: Some(100..200),
            attempts: 10,
            source: Box::new(io::Error::other("connection reset")),
        };
        let text = chain(&e);
        assert_eq!(
            text,
            "s3://b/k: bytes 100..200: read failed (after 10 attempts) | connection reset"
        );
        let io: io::Error = e.into();
        let inner = io.get_ref().and_then(|e| e.downcast_ref::<Error>());
        assert!(matches!(inner, Some(Error::Read { attempts: 10, .. })));
        assert_eq!(chain(&io).matches("connection reset").count(), 1);
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {source}")]
    struct Repeats {
        source: io::Error,
    }

    #[test]
    fn flat_causes_drop_repeated_links() {
        let e = Flat::boxed(Repeats {
            source: io::Error::other("broken pipe"),
        });
        assert_eq!(chain(&*e), "outer: broken pipe");
    }
}
