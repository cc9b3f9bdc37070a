//! Feature specs: what to read from each record and how to shape it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::TensorError;
use crate::json::scalar_from_json;
use crate::{DType, Values};

/// One requested output column: the same type for every format, the CLI's
/// spec files and the tests.
///
/// The JSON form is the `features` entries of the corpus manifests, tagged
/// by `kind`: `dense`, `sparse`, `varlen`, `ragged`, `fixed_len_sequence`.
/// Informational fields such as `tf_class` and `atds_class` are accepted and
/// ignored. A format that cannot honour a spec rejects it when its decoder
/// is built, naming the feature.
///
/// ```
/// use grist_tensor::{DType, FeatureSpec};
/// let spec: FeatureSpec = serde_json::from_str(
///     r#"{"name": "id", "kind": "dense", "dtype": "int64", "shape": [], "default": 0}"#,
/// ).unwrap();
/// assert_eq!(spec.name(), "id");
/// assert_eq!(spec.dtype(), DType::Int64);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum FeatureSpec {
    /// A fixed-shape dense tensor per record (`FixedLenFeature`, ATDS
    /// `DenseFeature`).
    Dense(DenseSpec),
    /// A sparse tensor: `SparseFeature` (index keys + value key) or ATDS's
    /// `SparseFeature` (an Avro record of `indices*` and `values`).
    Sparse(SparseSpec),
    /// A variable-length list per record, returned as a sparse tensor
    /// (`VarLenFeature`, ATDS `VarlenFeature`).
    Varlen(VarlenSpec),
    /// A ragged tensor (`RaggedFeature`).
    Ragged(RaggedSpec),
    /// A sequence of fixed-shape items (`FixedLenSequenceFeature`).
    FixedLenSequence(FixedLenSequenceSpec),
}

/// A dimension size in a spec shape: `-1` stands for an unknown dimension
/// (JSON `-1` or `null`).
pub const UNKNOWN_DIM: i64 = -1;

/// `FixedLenFeature` / ATDS `DenseFeature`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DenseSpec {
    /// The feature (output) name; in key-expression formats, the key.
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// The shape of one record's value, without the batch dimension;
    /// `-1` (or JSON `null`) for a dimension that is padded to the batch
    /// maximum.
    #[serde(deserialize_with = "de_shape", default)]
    pub shape: Vec<i64>,
    /// The value used when the feature is missing: a scalar (repeated to
    /// the shape) or a flat row-major list. `None` (JSON `null` or absent)
    /// makes the feature required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    /// Informational: the reference class name (`tf_class`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_class: Option<String>,
    /// Informational: the ATDS class name (`atds_class`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atds_class: Option<String>,
}

/// `SparseFeature`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SparseSpec {
    /// The output name.
    pub name: String,
    /// The element type of the values.
    pub dtype: DType,
    /// ATDS form: the dense shape without the batch dimension.
    #[serde(
        deserialize_with = "de_opt_shape",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub shape: Option<Vec<i64>>,
    /// tf.Example form: the feature(s) holding the indices, one per
    /// dimension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_key: Option<OneOrMany<String>>,
    /// tf.Example form: the feature holding the values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_key: Option<String>,
    /// tf.Example form: the dense size of each dimension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<OneOrMany<i64>>,
    /// Whether the indices are known to be sorted (no sort needed).
    #[serde(default)]
    pub already_sorted: bool,
    /// Informational: the reference class name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_class: Option<String>,
    /// Informational: the ATDS class name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atds_class: Option<String>,
}

impl SparseSpec {
    /// The index keys (tf.Example form), empty in ATDS form.
    pub fn index_keys(&self) -> &[String] {
        self.index_key
            .as_ref()
            .map(OneOrMany::as_slice)
            .unwrap_or(&[])
    }

    /// The dense shape without the batch dimension: `size` (tf.Example
    /// form) or `shape` (ATDS form).
    pub fn dense_shape(&self) -> Vec<i64> {
        match (&self.size, &self.shape) {
            (Some(size), _) => size.as_slice().to_vec(),
            (None, Some(shape)) => shape.clone(),
            (None, None) => Vec::new(),
        }
    }
}

/// `VarLenFeature` / ATDS `VarlenFeature` / `VarLenFeatureWithRank`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VarlenSpec {
    /// The output name.
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// ATDS form: the shape without the batch dimension, `-1` for unknown
    /// dimensions.
    #[serde(
        deserialize_with = "de_opt_shape",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub shape: Option<Vec<i64>>,
    /// `VarLenFeatureWithRank` form: the rank without the batch dimension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// Informational: the reference class name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_class: Option<String>,
    /// Informational: the ATDS class name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atds_class: Option<String>,
}

/// `RaggedFeature`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RaggedSpec {
    /// The output name.
    pub name: String,
    /// The element type of the flat values.
    pub dtype: DType,
    /// The feature holding the flat values (defaults to `name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_key: Option<String>,
    /// The partitions, outermost first (after the batch dimension).
    #[serde(default)]
    pub partitions: Vec<Partition>,
    /// The row-splits dtype, `int32` (TensorFlow's default) or `int64`.
    #[serde(default = "default_row_splits_dtype")]
    pub row_splits_dtype: DType,
    /// Whether to validate the partitions (they are always checked enough
    /// to be safe; this adds TensorFlow's consistency checks).
    #[serde(default)]
    pub validate: bool,
    /// Informational: the reference class name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_class: Option<String>,
}

impl RaggedSpec {
    /// The feature holding the flat values.
    pub fn value_key(&self) -> &str {
        self.value_key.as_deref().unwrap_or(&self.name)
    }
}

fn default_row_splits_dtype() -> DType {
    DType::Int32
}

/// One `RaggedFeature` partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Partition {
    /// Row splits read from feature `key`.
    RowSplits {
        /// The feature holding the splits.
        key: String,
    },
    /// Row lengths read from feature `key`.
    RowLengths {
        /// The feature holding the lengths.
        key: String,
    },
    /// Row starts read from feature `key`.
    RowStarts {
        /// The feature holding the starts.
        key: String,
    },
    /// Row limits read from feature `key`.
    RowLimits {
        /// The feature holding the limits.
        key: String,
    },
    /// The row of each value, read from feature `key`.
    ValueRowids {
        /// The feature holding the row ids.
        key: String,
    },
    /// Rows of a fixed length.
    UniformRowLength {
        /// The length of every row.
        length: i64,
    },
}

impl Partition {
    /// The feature this partition reads, if any.
    pub fn key(&self) -> Option<&str> {
        match self {
            Partition::RowSplits { key }
            | Partition::RowLengths { key }
            | Partition::RowStarts { key }
            | Partition::RowLimits { key }
            | Partition::ValueRowids { key } => Some(key),
            Partition::UniformRowLength { .. } => None,
        }
    }
}

/// `FixedLenSequenceFeature`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixedLenSequenceSpec {
    /// The output name.
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// The shape of one item of the sequence.
    #[serde(deserialize_with = "de_shape", default)]
    pub shape: Vec<i64>,
    /// Whether a missing feature is an empty sequence rather than an error.
    #[serde(default)]
    pub allow_missing: bool,
    /// The padding value (a scalar); `None` pads with zeros / empty strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    /// Informational: the reference class name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_class: Option<String>,
}

/// A JSON value that is either one item or a list of items.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OneOrMany<T> {
    /// A single item (JSON scalar).
    One(T),
    /// A list of items (JSON array).
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// The items as a slice.
    pub fn as_slice(&self) -> &[T] {
        match self {
            OneOrMany::One(t) => std::slice::from_ref(t),
            OneOrMany::Many(v) => v,
        }
    }
}

impl<T: Serialize> Serialize for OneOrMany<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OneOrMany::One(t) => t.serialize(s),
            OneOrMany::Many(v) => v.serialize(s),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw<T> {
            Many(Vec<T>),
            One(T),
        }
        Ok(match Raw::deserialize(d)? {
            Raw::Many(v) => OneOrMany::Many(v),
            Raw::One(t) => OneOrMany::One(t),
        })
    }
}

fn de_shape<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<i64>, D::Error> {
    let dims: Option<Vec<Option<i64>>> = Option::deserialize(d)?;
    Ok(dims
        .unwrap_or_default()
        .into_iter()
        .map(|x| x.unwrap_or(UNKNOWN_DIM))
        .collect())
}

fn de_opt_shape<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<i64>>, D::Error> {
    let dims: Option<Vec<Option<i64>>> = Option::deserialize(d)?;
    Ok(dims.map(|v| v.into_iter().map(|x| x.unwrap_or(UNKNOWN_DIM)).collect()))
}

impl FeatureSpec {
    /// A required dense feature of `shape` (no default).
    pub fn dense(name: impl Into<String>, dtype: DType, shape: impl Into<Vec<i64>>) -> Self {
        FeatureSpec::Dense(DenseSpec {
            name: name.into(),
            dtype,
            shape: shape.into(),
            default: None,
            tf_class: None,
            atds_class: None,
        })
    }

    /// A variable-length feature returned as a sparse tensor.
    pub fn varlen(name: impl Into<String>, dtype: DType) -> Self {
        FeatureSpec::Varlen(VarlenSpec {
            name: name.into(),
            dtype,
            shape: None,
            rank: None,
            tf_class: None,
            atds_class: None,
        })
    }

    /// A `SparseFeature` of one dimension: indices in `index_key`, values
    /// in `value_key`, dense size `size`.
    pub fn sparse(
        name: impl Into<String>,
        dtype: DType,
        index_key: impl Into<String>,
        value_key: impl Into<String>,
        size: i64,
    ) -> Self {
        FeatureSpec::Sparse(SparseSpec {
            name: name.into(),
            dtype,
            shape: None,
            index_key: Some(OneOrMany::One(index_key.into())),
            value_key: Some(value_key.into()),
            size: Some(OneOrMany::One(size)),
            already_sorted: false,
            tf_class: None,
            atds_class: None,
        })
    }

    /// The same spec with `default` as its default value (dense and
    /// fixed-length-sequence specs; other kinds are returned unchanged).
    ///
    /// By default, dense specs have no default (the feature is required).
    #[must_use]
    pub fn with_default(mut self, default: serde_json::Value) -> Self {
        match &mut self {
            FeatureSpec::Dense(d) => d.default = Some(default),
            FeatureSpec::FixedLenSequence(d) => d.default = Some(default),
            _ => {}
        }
        self
    }

    /// The output name.
    pub fn name(&self) -> &str {
        match self {
            FeatureSpec::Dense(s) => &s.name,
            FeatureSpec::Sparse(s) => &s.name,
            FeatureSpec::Varlen(s) => &s.name,
            FeatureSpec::Ragged(s) => &s.name,
            FeatureSpec::FixedLenSequence(s) => &s.name,
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            FeatureSpec::Dense(s) => s.dtype,
            FeatureSpec::Sparse(s) => s.dtype,
            FeatureSpec::Varlen(s) => s.dtype,
            FeatureSpec::Ragged(s) => s.dtype,
            FeatureSpec::FixedLenSequence(s) => s.dtype,
        }
    }

    /// The `kind` tag (`"dense"`, `"sparse"`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            FeatureSpec::Dense(_) => "dense",
            FeatureSpec::Sparse(_) => "sparse",
            FeatureSpec::Varlen(_) => "varlen",
            FeatureSpec::Ragged(_) => "ragged",
            FeatureSpec::FixedLenSequence(_) => "fixed_len_sequence",
        }
    }
}

/// The number of elements of a tensor of `shape`: `None` when a dimension
/// is unknown (negative) or the count exceeds 2^63 - 1, TensorFlow's own
/// bound for a shape (where a plain product would wrap around).
///
/// ```
/// use grist_tensor::shape_elements;
/// assert_eq!(shape_elements(&[2, 3]), Some(6));
/// assert_eq!(shape_elements(&[]), Some(1));
/// assert_eq!(shape_elements(&[-1, 3]), None);
/// assert_eq!(shape_elements(&[1 << 32, 1 << 32]), None);
/// ```
pub fn shape_elements(shape: &[i64]) -> Option<usize> {
    let n = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?))?;
    usize::try_from(n).ok().filter(|_| n <= i64::MAX as u64)
}

/// The most values a default may fill one row with (2^28): a default is
/// materialised once per feature, so a larger one would be an allocation
/// sized by the spec alone.
pub const MAX_DEFAULT_VALUES: usize = 1 << 28;

/// Resolves a default value to exactly `len` values of `dtype`.
///
/// A scalar is repeated `len` times; a list must have `len` values.
/// `feature` names the feature in the error. Fails when `len` is over
/// [`MAX_DEFAULT_VALUES`].
pub fn resolve_default(
    feature: &str,
    dtype: DType,
    default: &serde_json::Value,
    len: usize,
) -> Result<Values, TensorError> {
    let bad = |reason: String| TensorError::InvalidDefault {
        feature: feature.to_string(),
        reason,
    };
    if len > MAX_DEFAULT_VALUES {
        return Err(bad(format!(
            "the shape holds {len} values, more than a default may fill ({MAX_DEFAULT_VALUES})"
        )));
    }
    let mut out = Values::with_capacity(dtype, len.min(1 << 16));
    match default {
        serde_json::Value::Array(items) => {
            if items.len() != len {
                return Err(bad(format!(
                    "has {} values, the shape holds {len}",
                    items.len()
                )));
            }
            for item in items {
                scalar_from_json(dtype, item, &mut out).map_err(bad)?;
            }
        }
        scalar => {
            let mut one = Values::new(dtype);
            scalar_from_json(dtype, scalar, &mut one).map_err(bad)?;
            out.extend_repeat(&one, len);
        }
    }
    Ok(out)
}

/// A spec file: a manifest `parses[]` entry or a bare `features` array.
///
/// Plain records use `features`; `tf.SequenceExample` uses
/// `context_features` and `sequence_features`. `batch_size` and
/// `drop_remainder` are taken when present, and so is `reader_schema`
/// (Avro: the schema every file is read through, a JSON schema or a
/// string of its JSON).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpecFile {
    /// The features of plain records.
    pub features: Vec<FeatureSpec>,
    /// The context features of sequence examples.
    pub context_features: Vec<FeatureSpec>,
    /// The sequence features of sequence examples.
    pub sequence_features: Vec<FeatureSpec>,
    /// True when the file describes a sequence-example parse.
    pub sequence: bool,
    /// The batch size, if the file gives one.
    pub batch_size: Option<usize>,
    /// Whether to drop a final partial batch, if the file says.
    pub drop_remainder: Option<bool>,
    /// Avro: the reader schema every file is read through (the Avro
    /// specification's schema resolution), as JSON; the features name its
    /// fields. Other formats refuse a spec that has one.
    pub reader_schema: Option<serde_json::Value>,
}

impl SpecFile {
    /// Parses a spec file from JSON text.
    pub fn from_json(text: &str) -> Result<Self, TensorError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| TensorError::SpecJson { source: e })?;
        Self::from_value(&value)
    }

    /// Builds a spec file from a parsed JSON value.
    pub fn from_value(value: &serde_json::Value) -> Result<Self, TensorError> {
        let specs = |v: Option<&serde_json::Value>| -> Result<Vec<FeatureSpec>, TensorError> {
            match v {
                None | Some(serde_json::Value::Null) => Ok(Vec::new()),
                Some(v) => serde_json::from_value(v.clone())
                    .map_err(|e| TensorError::SpecJson { source: e }),
            }
        };
        match value {
            serde_json::Value::Array(_) => Ok(SpecFile {
                features: specs(Some(value))?,
                ..SpecFile::default()
            }),
            serde_json::Value::Object(map) => {
                let sequence = map.contains_key("context_features")
                    || map.contains_key("sequence_features")
                    || map.get("api").and_then(|a| a.as_str())
                        == Some("tf.io.parse_sequence_example");
                Ok(SpecFile {
                    features: specs(map.get("features"))?,
                    context_features: specs(map.get("context_features"))?,
                    sequence_features: specs(map.get("sequence_features"))?,
                    sequence,
                    batch_size: map
                        .get("batch_size")
                        .and_then(|b| b.as_u64())
                        .map(|b| b as usize),
                    drop_remainder: map.get("drop_remainder").and_then(|b| b.as_bool()),
                    reader_schema: match map.get("reader_schema") {
                        None | Some(serde_json::Value::Null) => None,
                        // A string of JSON text is the schema it holds; any
                        // other string is a schema too (a type's name).
                        Some(serde_json::Value::String(text)) => Some(
                            serde_json::from_str::<serde_json::Value>(text)
                                .ok()
                                .filter(|v| v.is_object() || v.is_array())
                                .unwrap_or_else(|| serde_json::Value::String(text.clone())),
                        ),
                        Some(v) => Some(v.clone()),
                    },
                })
            }
            _ => Err(TensorError::InvalidSpecFile {
                reason: "expected a JSON array of features or an object with `features`".into(),
            }),
        }
    }

    /// The JSON value of the spec file, in the form
    /// [`from_value`](Self::from_value) reads back to an equal value: a
    /// plain spec as `{"features": [...]}`, a sequence spec as
    /// `{"context_features": [...], "sequence_features": [...]}` (and
    /// `features` too when it has any), with `batch_size`,
    /// `drop_remainder` and `reader_schema` when they are set.
    ///
    /// Context and sequence features of a spec that is not marked
    /// [`sequence`](Self::sequence) are written too, and read back as a
    /// sequence spec: the two keys are what marks one.
    pub fn to_value(&self) -> serde_json::Value {
        // A spec file is plain fields and JSON values: serializing it
        // cannot fail.
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The spec file as pretty-printed JSON text (see
    /// [`to_value`](Self::to_value)), which [`from_json`](Self::from_json)
    /// reads back to an equal value and `grist cat --spec` accepts.
    ///
    /// ```
    /// use grist_tensor::{DType, FeatureSpec, SpecFile};
    /// let spec = SpecFile {
    ///     features: vec![FeatureSpec::dense("id", DType::Int64, [])],
    ///     batch_size: Some(32),
    ///     ..SpecFile::default()
    /// };
    /// let text = spec.to_json();
    /// assert!(text.contains("\"batch_size\": 32"));
    /// assert_eq!(SpecFile::from_json(&text).unwrap(), spec);
    /// ```
    pub fn to_json(&self) -> String {
        // Written straight from the fields, so that each feature's keys
        // keep their order (kind, name, dtype, ...); cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// The JSON form of a [`SpecFile`], its keys in this order.
#[derive(Serialize)]
struct SpecFileJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    features: Option<&'a [FeatureSpec]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_features: Option<&'a [FeatureSpec]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sequence_features: Option<&'a [FeatureSpec]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    batch_size: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    drop_remainder: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reader_schema: Option<&'a serde_json::Value>,
}

impl Serialize for SpecFile {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let sequence = self.sequence
            || !self.context_features.is_empty()
            || !self.sequence_features.is_empty();
        SpecFileJson {
            features: (!sequence || !self.features.is_empty()).then_some(&self.features[..]),
            context_features: sequence.then_some(&self.context_features[..]),
            sequence_features: sequence.then_some(&self.sequence_features[..]),
            batch_size: self.batch_size,
            drop_remainder: self.drop_remainder,
            reader_schema: self.reader_schema.as_ref(),
        }
        .serialize(s)
    }
}

/// Refuses a reader schema (a spec's `reader_schema`, a
/// [`RecordOptions`](crate::RecordOptions) one) for a format whose records
/// have no writer schema to resolve: every format but Avro.
pub fn no_reader_schema(
    format: &str,
    reader_schema: Option<&serde_json::Value>,
) -> Result<(), TensorError> {
    match reader_schema {
        None => Ok(()),
        Some(_) => Err(TensorError::Unsupported {
            what: format!(
                "{format}: a reader schema (`reader_schema`, --reader-schema) is for Avro files; \
                 {format} records have no writer schema to resolve"
            ),
        }),
    }
}

impl<'de> Deserialize<'de> for SpecFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        SpecFile::from_value(&value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_manifest_form() {
        let texts = [
            r#"{"name": "m", "kind": "dense", "tf_class": "tf.io.FixedLenFeature", "dtype": "int32", "shape": [null], "default": -1}"#,
            r#"{"name": "sp2", "kind": "sparse", "tf_class": "SparseFeature", "dtype": "int64", "index_key": ["a", "b"], "value_key": "v", "size": [4, 5], "already_sorted": false}"#,
            r#"{"name": "sp", "kind": "sparse", "atds_class": "SparseFeature", "dtype": "float64", "shape": [20]}"#,
            r#"{"name": "m[*][*]", "kind": "varlen", "dtype": "int32", "rank": 2}"#,
            r#"{"name": "r", "kind": "ragged", "dtype": "string", "value_key": "v", "partitions": [{"kind": "row_lengths", "key": "a"}, {"kind": "uniform_row_length", "length": 2}], "row_splits_dtype": "int64", "validate": false}"#,
            r#"{"name": "s", "kind": "fixed_len_sequence", "dtype": "float32", "shape": [2], "allow_missing": true, "default": -1.0}"#,
        ];
        for t in texts {
            let spec: FeatureSpec = serde_json::from_str(t).unwrap();
            let back: FeatureSpec =
                serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
            assert_eq!(spec, back);
        }
        let spec: FeatureSpec = serde_json::from_str(texts[0]).unwrap();
        match spec {
            FeatureSpec::Dense(d) => assert_eq!(d.shape, vec![UNKNOWN_DIM]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_unknown_kind() {
        let err = serde_json::from_str::<FeatureSpec>(
            r#"{"name": "x", "kind": "blob", "dtype": "int64"}"#,
        );
        assert!(err.is_err());
    }

    #[test]
    fn defaults_resolve() {
        let v = resolve_default("x", DType::Float32, &serde_json::json!("NaN"), 2).unwrap();
        match v {
            Values::Float32(v) => assert!(v.len() == 2 && v[0].is_nan()),
            other => panic!("{other:?}"),
        }
        assert!(resolve_default("x", DType::Int64, &serde_json::json!([1, 2]), 3).is_err());
        assert!(resolve_default("x", DType::Int64, &serde_json::json!("a"), 1).is_err());
    }
}
