//! The one vocabulary every grist error speaks: where it happened
//! ([`Location`]), what was wrong with a feature ([`FeatureProblem`]), and
//! the trait ([`FormatError`]) that lets a caller ask any format's error
//! both without knowing the format.

use std::fmt;
use std::sync::Arc;

/// Where in the input something went wrong: a file (or URL), and as far as
/// they are known the block, the record, the record's number in a dataset
/// of several files, a byte offset and a feature.
///
/// Every format's errors carry this one type, so "which file and record
/// failed?" is one call ([`FormatError::location`]) whatever the format.
///
/// ```
/// use grist_tensor::Location;
///
/// let at = Location::record("train.tfrecord", 41).with_feature("label");
/// assert_eq!(at.to_string(), r#"train.tfrecord: record 41, feature "label""#);
/// assert_eq!(at.record, Some(41));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Location {
    /// The file or URL as given, or empty for bytes that did not come from
    /// a file.
    pub file: Arc<str>,
    /// The block (Avro) or chunk number within the file, 0-based.
    pub block: Option<u64>,
    /// The record (sample) number within the file, 0-based.
    pub record: Option<u64>,
    /// The record's number in a dataset of several files numbered one
    /// after the other (FFRecord samples, OFRecord parts), when it differs
    /// from `record`.
    pub index: Option<u64>,
    /// A byte offset in the file (in the decompressed stream for
    /// compressed files); what it points at is said by the error.
    pub offset: Option<u64>,
    /// The feature (or key) being decoded.
    pub feature: Option<Arc<str>>,
}

impl Location {
    /// A location in `file` (nothing more known yet).
    pub fn file(file: impl Into<Arc<str>>) -> Self {
        Location {
            file: file.into(),
            ..Location::default()
        }
    }

    /// Record `record` of `file`.
    pub fn record(file: impl Into<Arc<str>>, record: u64) -> Self {
        Location::file(file).with_record(record)
    }

    /// Record `record` of `file` (number `index` in a dataset of several
    /// files, if given), made from `kept` when that is a location in the
    /// same file (the same `Arc`): a decoder that names records by number
    /// keeps one location and moves it along (putting it back in `kept`
    /// after use), so that its threads clone no shared file name per
    /// record.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use grist_tensor::Location;
    /// let file: Arc<str> = "a.tfrecord".into();
    /// let mut kept = None;
    /// let at = Location::numbered(&mut kept, &file, 3, Some(9));
    /// assert_eq!(at, Location::record(file.clone(), 3).with_index(9));
    /// kept = Some(at);
    /// assert_eq!(Location::numbered(&mut kept, &file, 4, None), Location::record(file, 4));
    /// ```
    pub fn numbered(
        kept: &mut Option<Location>,
        file: &Arc<str>,
        record: u64,
        index: Option<u64>,
    ) -> Location {
        let mut at = match kept.take() {
            Some(at) if Arc::ptr_eq(&at.file, file) => at,
            _ => Location::file(file.clone()),
        };
        at.record = Some(record);
        at.index = index;
        at
    }

    /// Block `block` of `file`.
    pub fn block(file: impl Into<Arc<str>>, block: u64) -> Self {
        Location::file(file).with_block(block)
    }

    /// The same location at block `block`.
    #[must_use]
    pub fn with_block(mut self, block: u64) -> Self {
        self.block = Some(block);
        self
    }

    /// The same location at record `record`.
    #[must_use]
    pub fn with_record(mut self, record: u64) -> Self {
        self.record = Some(record);
        self
    }

    /// The same location with the record's number in its dataset.
    #[must_use]
    pub fn with_index(mut self, index: u64) -> Self {
        self.index = Some(index);
        self
    }

    /// The same location at byte `offset`.
    #[must_use]
    pub fn with_offset(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }

    /// The same location, in feature `feature`.
    #[must_use]
    pub fn with_feature(mut self, feature: impl Into<Arc<str>>) -> Self {
        self.feature = Some(feature.into());
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = if self.file.is_empty() {
            ""
        } else {
            f.write_str(&self.file)?;
            ": "
        };
        let mut part = |f: &mut fmt::Formatter<'_>, args: fmt::Arguments<'_>| {
            f.write_str(sep)?;
            sep = ", ";
            f.write_fmt(args)
        };
        if let Some(b) = self.block {
            part(f, format_args!("block {b}"))?;
        }
        if let Some(r) = self.record {
            part(f, format_args!("record {r}"))?;
            if let Some(i) = self.index.filter(|&i| i != r) {
                write!(f, " (dataset index {i})")?;
            }
        } else if let Some(i) = self.index {
            part(f, format_args!("dataset index {i}"))?;
        }
        if let Some(o) = self.offset {
            part(f, format_args!("byte {o}"))?;
        }
        if let Some(name) = &self.feature {
            part(f, format_args!("feature {name:?}"))?;
        }
        if self.file.is_empty() && sep.is_empty() {
            f.write_str("(no location)")?;
        }
        Ok(())
    }
}

/// What is wrong with one feature of one record, in every format's terms.
///
/// Each format raises the problems its reference reader has; the variants
/// that name a dimension (`dim`) or a partition key (`key`) leave them
/// `None` where the format has none.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FeatureProblem {
    /// A required feature (no default) is not in the record.
    Missing,
    /// A union took its null branch and the spec gives no default (Avro).
    NullWithoutDefault,
    /// A `Feature` message with no list set (OFRecord; tf.Example reads it
    /// as missing).
    NoKind,
    /// The feature holds another kind of value than the spec's dtype
    /// needs.
    TypeMismatch {
        /// What the spec needs (a dtype or a list kind, e.g. `"int64_list"`).
        expected: &'static str,
        /// What was found.
        actual: &'static str,
    },
    /// Another number of values than the shape holds.
    WrongCount {
        /// The dimension (after the batch dimension) whose length is
        /// wrong, for formats that check nested arrays one by one (Avro).
        dim: Option<usize>,
        /// The number the shape needs.
        expected: usize,
        /// The number found.
        actual: usize,
    },
    /// A value count that is not a multiple of the item size.
    NotMultiple {
        /// The item size.
        item: usize,
        /// The number of values found.
        actual: usize,
    },
    /// A sparse index outside `[0, size)`.
    IndexOutOfRange {
        /// Which index list (`indicesN`), for sparse features of several
        /// index lists.
        dim: Option<usize>,
        /// The index found.
        index: i64,
        /// The dense size of its dimension.
        size: i64,
    },
    /// Sparse index and value lists of different lengths.
    IndexCountMismatch {
        /// Which index list (`indicesN`), for sparse features of several
        /// index lists.
        dim: Option<usize>,
        /// The number of indices.
        indices: usize,
        /// The number of values.
        values: usize,
    },
    /// Ragged partitions that cannot be applied to the values.
    BadPartition {
        /// The partition's key, when it has one.
        key: Option<String>,
        /// What is wrong.
        reason: String,
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
    /// A `dim1_varying_length` list longer than the shape holds (OneFlow
    /// writes past its buffer).
    Overrun {
        /// The number of values the shape holds.
        max: usize,
        /// The number found.
        actual: usize,
    },
    /// A value with no result in the output dtype (a float out of range of
    /// an integer type, or NaN).
    Unrepresentable {
        /// The value, as text.
        value: String,
        /// The output dtype.
        dtype: &'static str,
    },
    /// A raw tensor payload whose length is not the shape times the
    /// dtype's size.
    WrongByteLength {
        /// The length the spec needs.
        expected: u64,
        /// The payload's length.
        actual: u64,
    },
    /// A raw `bool` element that is neither 0 nor 1.
    BadBool {
        /// The element's byte offset in the payload.
        offset: usize,
        /// The byte found.
        value: u8,
    },
}

impl fmt::Display for FeatureProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FeatureProblem::Missing => f.write_str("is required but could not be found"),
            FeatureProblem::NullWithoutDefault => {
                f.write_str("is null and the spec gives no default")
            }
            FeatureProblem::NoKind => f.write_str("the Feature has no list set"),
            FeatureProblem::TypeMismatch { expected, actual } => write!(
                f,
                "data types don't match: expected {expected}, found {actual}"
            ),
            FeatureProblem::WrongCount {
                dim: Some(dim),
                expected,
                actual,
            } => write!(
                f,
                "array of {actual} values where dimension {dim} of the shape needs {expected}"
            ),
            FeatureProblem::WrongCount {
                dim: None,
                expected,
                actual,
            } => write!(
                f,
                "number of values != expected: found {actual}, the shape needs {expected}"
            ),
            FeatureProblem::NotMultiple { item, actual } => write!(
                f,
                "{actual} values are not a multiple of the item size {item}"
            ),
            FeatureProblem::IndexOutOfRange { dim, index, size } => {
                if let Some(d) = dim {
                    write!(f, "indices{d}: ")?;
                }
                write!(f, "index {index} is out of bounds [0, {size})")
            }
            FeatureProblem::IndexCountMismatch {
                dim,
                indices,
                values,
            } => {
                if let Some(d) = dim {
                    write!(f, "indices{d}: ")?;
                }
                write!(f, "{indices} indices but {values} values")
            }
            FeatureProblem::BadPartition { key, reason } => match key {
                Some(key) => write!(f, "partition {key:?}: {reason}"),
                None => write!(f, "bad partitions: {reason}"),
            },
            FeatureProblem::NotBytesList { actual } => {
                write!(f, "the bytes decoder needs a bytes_list, found a {actual}")
            }
            FeatureProblem::BytesValueCount { actual } => {
                write!(f, "a bytes_list must hold exactly 1 value, found {actual}")
            }
            FeatureProblem::Overrun { max, actual } => write!(
                f,
                "{actual} values overrun the {max} the shape holds (dim1_varying_length)"
            ),
            FeatureProblem::Unrepresentable { value, dtype } => {
                write!(f, "value {value} cannot be converted to {dtype}")
            }
            FeatureProblem::WrongByteLength { expected, actual } => write!(
                f,
                "payload of {actual} bytes, the dtype and shape need {expected}"
            ),
            FeatureProblem::BadBool { offset, value } => {
                write!(f, "byte {offset} is {value}, not a bool (0 or 1)")
            }
        }
    }
}

/// Who is at fault for an error, so that a caller (the CLI's exit codes,
/// the Python package's exception classes) can tell them apart without
/// knowing the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input is damaged or does not fit the specs (bad magic, CRCs,
    /// truncation, wire format, feature problems).
    Data,
    /// A bad argument: a spec, an option, a path, an index out of range.
    Argument,
    /// A [`Limits`](crate::Limits) bound was hit.
    Limit,
    /// Something this build or format cannot do.
    Unsupported,
    /// Reading or writing failed (the file system, the network).
    Io,
}

/// Reading or writing through the storage layer ([`grist_io`]) failed:
/// the storage's error, which names the file or URL (and the byte range),
/// with the file as a [`Location`]. Every format's error has a variant
/// for it, so that the path or URL is printed once and the cause once.
#[derive(Debug)]
pub struct StorageError(Box<StorageInner>);

/// Boxed, so that results carrying the error stay small.
#[derive(Debug)]
struct StorageInner {
    at: Location,
    error: grist_io::Error,
}

impl StorageError {
    /// `error`, about the file named `file` in messages.
    pub fn new(file: impl Into<Arc<str>>, error: grist_io::Error) -> Self {
        StorageError(Box::new(StorageInner {
            at: Location::file(file),
            error,
        }))
    }

    /// The storage layer's error, when `e` (from a reader of the storage
    /// layer) carries one; `e` back otherwise.
    pub fn from_io(file: &Arc<str>, e: std::io::Error) -> Result<Self, std::io::Error> {
        if !e
            .get_ref()
            .is_some_and(|inner| inner.is::<grist_io::Error>())
        {
            return Err(e);
        }
        let inner = e.into_inner().expect("checked above");
        match inner.downcast::<grist_io::Error>() {
            Ok(error) => Ok(StorageError::new(file.clone(), *error)),
            Err(_) => unreachable!("checked above"),
        }
    }

    /// The storage layer's error.
    pub fn error(&self) -> &grist_io::Error {
        &self.0.error
    }

    /// Whether nothing is at the address.
    pub fn is_not_found(&self) -> bool {
        self.0.error.is_not_found()
    }
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.error, f)
    }
}

impl std::error::Error for StorageError {
    // The storage error's own message is ours: its cause comes next.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0.error)
    }
}

impl FormatError for StorageError {
    fn location(&self) -> Option<&Location> {
        Some(&self.0.at)
    }

    fn kind(&self) -> ErrorKind {
        match &self.0.error {
            grist_io::Error::BadAddress { .. }
            | grist_io::Error::BadPattern { .. }
            | grist_io::Error::BadRange { .. } => ErrorKind::Argument,
            grist_io::Error::Unsupported { .. } => ErrorKind::Unsupported,
            _ => ErrorKind::Io,
        }
    }
}

/// What every format crate's error answers, whatever the format: where it
/// happened and who is at fault. The loader and the CLI hold format errors
/// as [`BoxError`] and ask them this.
///
/// ```
/// use grist_tensor::{BoxError, ErrorKind, FormatError, TensorError};
///
/// let e: BoxError = Box::new(TensorError::InvalidSpecFile { reason: "empty".into() });
/// assert_eq!(e.kind(), ErrorKind::Argument);
/// assert!(e.location().is_none());
/// assert!(matches!(
///     e.downcast_ref::<TensorError>(),
///     Some(TensorError::InvalidSpecFile { .. })
/// ));
/// ```
pub trait FormatError: std::error::Error + Send + Sync + 'static {
    /// Where the error happened, for errors about the data.
    fn location(&self) -> Option<&Location>;

    /// Who is at fault.
    fn kind(&self) -> ErrorKind;
}

/// A format's error behind the shared contract ([`Format`](crate::Format)
/// and the traits it hands out).
pub type BoxError = Box<dyn FormatError>;

impl dyn FormatError {
    /// The error as its concrete type `E`, if it is one.
    pub fn downcast_ref<E: FormatError>(&self) -> Option<&E> {
        let e: &(dyn std::error::Error + 'static) = self;
        e.downcast_ref::<E>()
    }

    /// The error as its concrete type `E`, or itself back if it is not one.
    pub fn downcast<E: FormatError>(self: Box<Self>) -> Result<Box<E>, Box<Self>> {
        if self.downcast_ref::<E>().is_some() {
            let e: Box<dyn std::error::Error + Send + Sync> = self;
            Ok(e.downcast::<E>().expect("checked above"))
        } else {
            Err(self)
        }
    }
}

impl std::error::Error for BoxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        (**self).source()
    }
}

impl<E: FormatError> From<E> for BoxError {
    fn from(e: E) -> Self {
        Box::new(e)
    }
}

impl FormatError for crate::TensorError {
    fn location(&self) -> Option<&Location> {
        match self {
            crate::TensorError::BadIndex { at, .. } | crate::TensorError::Io { at, .. } => Some(at),
            crate::TensorError::Storage(e) => e.location(),
            _ => None,
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            crate::TensorError::Storage(e) => e.kind(),
            crate::TensorError::BadIndex { .. } => ErrorKind::Data,
            crate::TensorError::Io { .. } => ErrorKind::Io,
            crate::TensorError::LimitExceeded { .. } => ErrorKind::Limit,
            crate::TensorError::UnsupportedSpec { .. } | crate::TensorError::Unsupported { .. } => {
                ErrorKind::Unsupported
            }
            _ => ErrorKind::Argument,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_print_what_is_known() {
        assert_eq!(Location::file("a").to_string(), "a");
        assert_eq!(Location::default().to_string(), "(no location)");
        assert_eq!(
            Location::block("a.avro", 3).with_record(70).to_string(),
            "a.avro: block 3, record 70"
        );
        assert_eq!(
            Location::record("p/part-1", 4)
                .with_index(104)
                .with_offset(880)
                .to_string(),
            "p/part-1: record 4 (dataset index 104), byte 880"
        );
        assert_eq!(
            Location::record("", 2).with_feature("x").to_string(),
            "record 2, feature \"x\""
        );
        assert_eq!(
            Location::record("f", 5).with_index(5).to_string(),
            "f: record 5"
        );
    }

    #[test]
    fn problems_name_their_dimension_when_known() {
        let p = FeatureProblem::WrongCount {
            dim: Some(1),
            expected: 4,
            actual: 3,
        };
        assert_eq!(
            p.to_string(),
            "array of 3 values where dimension 1 of the shape needs 4"
        );
        let p = FeatureProblem::IndexOutOfRange {
            dim: None,
            index: 9,
            size: 5,
        };
        assert_eq!(p.to_string(), "index 9 is out of bounds [0, 5)");
    }
}
