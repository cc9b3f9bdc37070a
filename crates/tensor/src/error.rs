//! The shared error vocabulary.
//!
//! The rule every grist error follows: a variant that has a cause returns
//! it from `source()` and leaves it out of its own message, so that a
//! printer of the whole chain (the CLI's `{e:#}`, joined by ": ") shows
//! each cause once. A variant that only wraps another error is
//! `#[error(transparent)]`.

/// Errors raised by `grist-tensor`: invalid specs and hit limits. Format
/// crates wrap it in their own error enums.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TensorError {
    /// A feature spec is inconsistent in itself.
    #[error("feature {feature:?}: invalid spec: {reason}")]
    InvalidSpec {
        /// The feature name.
        feature: String,
        /// What is wrong.
        reason: String,
    },
    /// A feature spec asks for something this format cannot provide.
    #[error("feature {feature:?}: {format} cannot provide a {kind} feature: {reason}")]
    UnsupportedSpec {
        /// The feature name.
        feature: String,
        /// The format that rejects it.
        format: &'static str,
        /// The spec kind.
        kind: &'static str,
        /// Why.
        reason: String,
    },
    /// A default value does not fit the feature's dtype or shape.
    #[error("feature {feature:?}: invalid default: {reason}")]
    InvalidDefault {
        /// The feature name.
        feature: String,
        /// What is wrong.
        reason: String,
    },
    /// A spec file is not valid JSON or not a spec.
    #[error("invalid spec JSON")]
    SpecJson {
        /// The JSON error.
        source: serde_json::Error,
    },
    /// A spec file has the wrong shape.
    #[error("invalid spec file: {reason}")]
    InvalidSpecFile {
        /// What is wrong.
        reason: String,
    },
    /// A ragged column's partitions cannot be applied to its values.
    #[error("feature {feature:?}: bad ragged partitions: {reason}")]
    BadRagged {
        /// The feature name.
        feature: String,
        /// What is wrong.
        reason: String,
    },
    /// A batch has no column of this name.
    #[error("the batch has no column {name:?}")]
    NoColumn {
        /// The column asked for.
        name: String,
    },
    /// A batch's column is not of the layout or type asked for.
    #[error("column {name:?} holds {found}, not {want}")]
    ColumnType {
        /// The column (empty when converting bare values).
        name: String,
        /// What was asked for.
        want: String,
        /// What the column holds.
        found: String,
    },
    /// Something a format (or this build) cannot do.
    #[error("{what}")]
    Unsupported {
        /// What cannot be done, naming the format.
        what: String,
    },
    /// An index of records (a TFRecord `.idx` file, an OFRecord part's
    /// index built from its length prefixes) that does not match its
    /// file.
    #[error("{at}: {reason}")]
    BadIndex {
        /// The record the index entry is for.
        at: Box<crate::Location>,
        /// What does not match.
        reason: String,
    },
    /// A spec was to be inferred from records, and the inputs hold none.
    #[error("{inputs}: no records to infer a spec from")]
    NoRecords {
        /// The inputs, as messages name them.
        inputs: String,
    },
    /// Reading or writing through the storage layer failed.
    #[error(transparent)]
    Storage(#[from] crate::StorageError),
    /// Reading a file failed.
    #[error("{at}")]
    Io {
        /// The file (and record, where one was being read).
        at: Box<crate::Location>,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An allocation or record size sized by the input exceeds a limit.
    #[error("{what}: {requested} bytes exceeds the limit of {max} bytes")]
    LimitExceeded {
        /// What was being sized.
        what: &'static str,
        /// The size asked for.
        requested: u64,
        /// The limit.
        max: u64,
    },
}
