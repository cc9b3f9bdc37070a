//! The one error of the crate.

use arrow_schema::{ArrowError, DataType};
use grist_tensor::{BoxError, DType};

/// What went wrong converting between grist batches and Arrow, or writing
/// Arrow record batches to a format. Every variant about a column names
/// it (its Arrow field name).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An Arrow type that no grist dtype holds exactly (dates, decimals,
    /// unions, dictionaries, `uint64`, ...).
    #[error("column {column:?}: Arrow type {data_type} has no grist dtype")]
    UnsupportedType {
        /// The column.
        column: String,
        /// Its Arrow type (or the nested type that has no grist dtype).
        data_type: DataType,
    },
    /// A null where grist has no place for one (a value, a fixed-size
    /// list, or a list slot that is null but not empty).
    #[error("column {column:?}: null values have no grist representation")]
    Nulls {
        /// The column.
        column: String,
    },
    /// The column's layout does not fit its feature kind (a dense column
    /// whose rows differ in length, a list nested deeper than the spec
    /// says, unsorted sparse indices, ...).
    #[error("column {column:?}: {reason}")]
    Layout {
        /// The column.
        column: String,
        /// What does not fit.
        reason: String,
    },
    /// The column's element type is not the spec's (and does not widen to
    /// it exactly).
    #[error("column {column:?}: Arrow values of type {found} cannot be read as {expected}")]
    DType {
        /// The column.
        column: String,
        /// The spec's dtype.
        expected: DType,
        /// The Arrow type found.
        found: DataType,
    },
    /// A feature of the spec has no column.
    #[error("column {column:?} of the spec is not in the record batch")]
    Missing {
        /// The column (as Arrow names it).
        column: String,
    },
    /// A field's `grist.spec` metadata is not a feature spec.
    #[error("column {column:?}: bad grist.spec metadata")]
    SpecMetadata {
        /// The column.
        column: String,
        /// Why it does not parse.
        source: serde_json::Error,
    },
    /// Arrow refused to build an array or a record batch.
    #[error(transparent)]
    Arrow(#[from] ArrowError),
    /// The format refused the spec or the batch, or its sink failed (the
    /// error names the feature or the file).
    #[error("writing {format}")]
    Write {
        /// The format's name.
        format: String,
        /// What it said.
        source: BoxError,
    },
}

impl Error {
    pub(crate) fn layout(column: &str, reason: impl Into<String>) -> Self {
        Error::Layout {
            column: column.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn unsupported(column: &str, data_type: &DataType) -> Self {
        Error::UnsupportedType {
            column: column.to_string(),
            data_type: data_type.clone(),
        }
    }
}
