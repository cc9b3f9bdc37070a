//! Rust errors as the package's Python exceptions.
//!
//! Every grist error answers [`FormatError`]: who is at fault
//! ([`ErrorKind`]) picks the exception class, its [`Location`] becomes the
//! exception's `location` dict, and the message is the whole cause chain,
//! as the CLI prints it.

use std::error::Error as StdError;

use grist::tensor::{BoxError, ErrorKind, FormatError, Location};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The exception classes, defined in Python so that they can inherit from
/// two bases (`SpecError(GristError, ValueError)`, ...), which PyO3's
/// exception macros cannot.
pub(crate) const EXCEPTIONS: &std::ffi::CStr = c"
class GristError(Exception):
    '''An error of grist. `location` is a dict (keys among 'file',
    'block', 'record', 'feature') naming where in the data it happened,
    or None; the message is the whole cause chain.'''

    def __init__(self, message, location=None):
        super().__init__(message)
        self.location = location


class SpecError(GristError, ValueError):
    '''A bad argument: a spec, an option, a path, a record number out of
    range, or something the format cannot hold.'''


class DataError(GristError):
    '''Bad data: damaged files, records that do not fit the spec, a limit
    hit.'''


class StorageError(GristError, OSError):
    '''Reading or writing a file or object failed.'''


for _cls in (GristError, SpecError, DataError, StorageError):
    _cls.__module__ = 'grist'
del _cls
";

/// A failure on its way to Python: the class, where, and what.
#[derive(Debug)]
pub(crate) struct Failure {
    kind: ErrorKind,
    /// Boxed: results carrying a failure stay small.
    location: Option<Box<Location>>,
    message: String,
}

impl Failure {
    /// A failure of `kind` with `message` and no location.
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            location: None,
            message: message.into(),
        }
    }

    /// A bad argument.
    pub(crate) fn argument(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Argument, message)
    }

    /// The failure, placed at `at`.
    pub(crate) fn at(mut self, at: Location) -> Self {
        self.location = Some(Box::new(at));
        self
    }

    /// Any grist error that answers [`FormatError`].
    pub(crate) fn of(e: &dyn FormatError) -> Self {
        Failure {
            kind: e.kind(),
            location: e.location().cloned().map(Box::new),
            message: chain(e),
        }
    }
}

/// `e`'s message followed by its causes', as the CLI prints them.
pub(crate) fn chain(e: &(dyn StdError + '_)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        // A transparent wrapper repeats its cause's message.
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

impl From<grist::LoadError> for Failure {
    fn from(e: grist::LoadError) -> Self {
        Failure::of(&e)
    }
}

impl From<BoxError> for Failure {
    fn from(e: BoxError) -> Self {
        Failure::of(&*e)
    }
}

impl From<grist::tensor::TensorError> for Failure {
    fn from(e: grist::tensor::TensorError) -> Self {
        Failure::of(&e)
    }
}

impl From<grist::tensor::StorageError> for Failure {
    fn from(e: grist::tensor::StorageError) -> Self {
        Failure::of(&e)
    }
}

impl From<grist::tensor::RegistryError> for Failure {
    fn from(e: grist::tensor::RegistryError) -> Self {
        Failure::of(&e)
    }
}

impl From<grist::ConvertError> for Failure {
    fn from(e: grist::ConvertError) -> Self {
        use grist::ConvertError as E;
        let message = chain(&e);
        let (kind, location) = match &e {
            E::Read(inner) => (inner.kind(), inner.location().cloned().map(Box::new)),
            E::Sources { source, .. } | E::Write { source, .. } => {
                (source.kind(), source.location().cloned().map(Box::new))
            }
            E::Encode { at, source, .. } => {
                let mut at = (**at).clone();
                if at.feature.is_none() {
                    at.feature = source.location().and_then(|l| l.feature.clone());
                }
                (source.kind(), Some(Box::new(at)))
            }
            E::Target { .. }
            | E::NeedsSpec { .. }
            | E::DifferentConversion { .. }
            | E::InputInOutput { .. }
            | E::BadShard { .. }
            | E::BadOutput { .. } => (ErrorKind::Argument, None),
            _ => (ErrorKind::Io, None),
        };
        Failure {
            kind,
            location,
            message,
        }
    }
}

impl From<grist::arrow::Error> for Failure {
    fn from(e: grist::arrow::Error) -> Self {
        match &e {
            grist::arrow::Error::Write { source, .. } => Failure {
                kind: source.kind(),
                location: source.location().cloned().map(Box::new),
                message: chain(&e),
            },
            // The others are about the columns given.
            _ => Failure::argument(chain(&e)),
        }
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Self {
        Failure::argument(e.to_string())
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> Self {
        Python::attach(|py| match raise(py, &f) {
            Ok(err) | Err(err) => err,
        })
    }
}

/// The exception for `f` (or the error met while making it).
fn raise(py: Python<'_>, f: &Failure) -> PyResult<PyErr> {
    let class = match f.kind {
        ErrorKind::Data | ErrorKind::Limit => "DataError",
        ErrorKind::Argument | ErrorKind::Unsupported => "SpecError",
        ErrorKind::Io => "StorageError",
        _ => "GristError",
    };
    let class = py.import("grist._grist")?.getattr(class)?;
    let location = match &f.location {
        None => py.None(),
        Some(at) => location_dict(py, at)?.into_any().unbind(),
    };
    let exc = class.call1((f.message.as_str(), location))?;
    Ok(PyErr::from_value(exc))
}

/// `at` as the exception's `location` dict.
fn location_dict<'py>(py: Python<'py>, at: &Location) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("file", &*at.file)?;
    if let Some(block) = at.block {
        d.set_item("block", block)?;
    }
    if let Some(record) = at.record {
        d.set_item("record", record)?;
    }
    if let Some(feature) = &at.feature {
        d.set_item("feature", &**feature)?;
    }
    Ok(d)
}

/// Results whose errors become Python exceptions.
pub(crate) type Result<T, E = Failure> = std::result::Result<T, E>;
