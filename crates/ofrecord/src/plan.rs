//! What a decoder outputs: [`Field`]s (grist feature specs, or OneFlow's
//! raw and bytes decoders), compiled once into a decode plan.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use grist_tensor::{
    DType, FeatureSpec, Partition, PartitionKind, RaggedSpec, TensorError, Values, resolve_default,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wire::ListKind;

/// The output dtypes of OneFlow's `OFRecordRawDecoder`.
///
/// grist has no 8-bit tensors: `int8` (OneFlow's `char` too) and `uint8`
/// outputs are `int32` columns holding the 8-bit values (−128..=127 and
/// 0..=255).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RawDType {
    /// `int8` (alias `char`).
    #[serde(alias = "char")]
    Int8,
    /// `uint8`.
    Uint8,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
}

impl RawDType {
    /// The manifest name (`"uint8"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            RawDType::Int8 => "int8",
            RawDType::Uint8 => "uint8",
            RawDType::Int32 => "int32",
            RawDType::Int64 => "int64",
            RawDType::Float32 => "float32",
            RawDType::Float64 => "float64",
        }
    }

    /// The dtype of the output column.
    pub fn output(self) -> DType {
        match self {
            RawDType::Int8 | RawDType::Uint8 | RawDType::Int32 => DType::Int32,
            RawDType::Int64 => DType::Int64,
            RawDType::Float32 => DType::Float32,
            RawDType::Float64 => DType::Float64,
        }
    }
}

/// OneFlow's `OFRecordRawDecoder(blob_name, shape, dtype,
/// dim1_varying_length, truncate)`: a numeric list (any kind, converted to
/// `dtype` as C++ `static_cast` does) or the bytes of a single-value bytes
/// list (read as int8) per record.
///
/// Output: a dense `[batch] + shape` column; with `truncate` long lists are
/// cut and short ones zero-filled; with `dim1_varying_length` (and not
/// `truncate`) a ragged column `[batch, (n)]`, or `[batch, (rows), inner]`
/// for a shape of rank 2 or more, holding each record's values (at most
/// the shape's worth: OneFlow would write past its buffer). Bytes shorter
/// than the shape are zero-filled (OneFlow leaves that memory as it was).
///
/// ```
/// use grist_ofrecord::{RawDType, RawSpec};
/// let spec: RawSpec = serde_json::from_str(
///     r#"{"name": "img", "shape": [4], "dtype": "uint8", "truncate": false}"#,
/// ).unwrap();
/// assert_eq!(spec.dtype, RawDType::Uint8);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawSpec {
    /// The feature (blob) name.
    pub name: String,
    /// The shape of one record's value.
    #[serde(default)]
    pub shape: Vec<usize>,
    /// The output dtype.
    pub dtype: RawDType,
    /// Cut long lists and zero-fill short ones (alias
    /// `auto_zero_padding`).
    #[serde(default, alias = "auto_zero_padding")]
    pub truncate: bool,
    /// Each record holds up to the shape's worth of values, its first
    /// dimension varying.
    #[serde(default)]
    pub dim1_varying_length: bool,
}

impl RawSpec {
    /// A raw decoder of `name` into `shape` of `dtype`, without truncation
    /// or varying length.
    pub fn new(name: impl Into<String>, shape: impl Into<Vec<usize>>, dtype: RawDType) -> Self {
        RawSpec {
            name: name.into(),
            shape: shape.into(),
            dtype,
            truncate: false,
            dim1_varying_length: false,
        }
    }

    /// Whether to cut and zero-fill. By default, `false`.
    #[must_use]
    pub fn with_truncate(mut self, truncate: bool) -> Self {
        self.truncate = truncate;
        self
    }

    /// Whether the first dimension varies. By default, `false`.
    #[must_use]
    pub fn with_dim1_varying_length(mut self, varying: bool) -> Self {
        self.dim1_varying_length = varying;
        self
    }

    fn varying(&self) -> bool {
        self.dim1_varying_length && !self.truncate
    }

    /// The values of one row of a shape of rank 2 or more: the inner
    /// dimensions of a varying-length output.
    fn inner(&self) -> Option<usize> {
        (self.shape.len() >= 2).then(|| self.shape[1..].iter().product())
    }
}

/// OneFlow's `OFRecordBytesDecoder(blob_name)`: the single value of a
/// bytes list per record, as a dense `string` column `[batch]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BytesSpec {
    /// The feature (blob) name.
    pub name: String,
}

/// One output of an [`OfRecordDecoder`](crate::OfRecordDecoder).
///
/// Its JSON form is a [`FeatureSpec`], or OneFlow's decoders as the corpus
/// manifests write them: `{"op": "raw", "name", "shape", "dtype",
/// "truncate", "dim1_varying_length"}` and `{"op": "bytes", "name"}`.
///
/// ```
/// use grist_ofrecord::Field;
/// let f = Field::from_json(&serde_json::json!({"op": "bytes", "name": "img"})).unwrap();
/// assert_eq!(f.name(), "img");
/// assert_eq!(f.to_json()["op"], "bytes");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Field {
    /// A grist feature spec, with tf.Example-like semantics over
    /// OFRecord's typed lists.
    Spec(FeatureSpec),
    /// OneFlow's raw decoder.
    Raw(RawSpec),
    /// OneFlow's bytes decoder.
    Bytes(BytesSpec),
}

impl From<FeatureSpec> for Field {
    fn from(s: FeatureSpec) -> Self {
        Field::Spec(s)
    }
}

impl From<RawSpec> for Field {
    fn from(s: RawSpec) -> Self {
        Field::Raw(s)
    }
}

impl From<BytesSpec> for Field {
    fn from(s: BytesSpec) -> Self {
        Field::Bytes(s)
    }
}

impl Field {
    /// Reads the JSON form.
    pub fn from_json(value: &Value) -> Result<Self, TensorError> {
        let json = |e| TensorError::SpecJson { source: e };
        match value.get("op").and_then(Value::as_str) {
            Some("raw") => Ok(Field::Raw(
                serde_json::from_value(value.clone()).map_err(json)?,
            )),
            Some("bytes") => Ok(Field::Bytes(
                serde_json::from_value(value.clone()).map_err(json)?,
            )),
            Some(other) => Err(TensorError::InvalidSpecFile {
                reason: format!("unknown OFRecord decoder op {other:?} (raw or bytes)"),
            }),
            None => Ok(Field::Spec(
                serde_json::from_value(value.clone()).map_err(json)?,
            )),
        }
    }

    /// The JSON form.
    pub fn to_json(&self) -> Value {
        let (op, mut v) = match self {
            Field::Spec(s) => return serde_json::to_value(s).unwrap_or(Value::Null),
            Field::Raw(r) => ("raw", serde_json::to_value(r).unwrap_or(Value::Null)),
            Field::Bytes(b) => ("bytes", serde_json::to_value(b).unwrap_or(Value::Null)),
        };
        if let Value::Object(m) = &mut v {
            m.insert("op".into(), Value::from(op));
        }
        v
    }

    /// The output (and feature) name.
    pub fn name(&self) -> &str {
        match self {
            Field::Spec(s) => s.name(),
            Field::Raw(r) => &r.name,
            Field::Bytes(b) => &b.name,
        }
    }

    /// The feature spec describing the output column: itself, or for
    /// OneFlow's decoders a required dense spec (a ragged one for a varying
    /// raw decoder).
    pub fn spec(&self) -> FeatureSpec {
        match self {
            Field::Spec(s) => s.clone(),
            Field::Raw(r) if r.varying() => FeatureSpec::Ragged(RaggedSpec {
                name: r.name.clone(),
                dtype: r.dtype.output(),
                value_key: None,
                partitions: r
                    .inner()
                    .map(|length| Partition::UniformRowLength {
                        length: length as i64,
                    })
                    .into_iter()
                    .collect(),
                row_splits_dtype: DType::Int64,
                validate: false,
                tf_class: None,
            }),
            Field::Raw(r) => FeatureSpec::dense(
                r.name.clone(),
                r.dtype.output(),
                r.shape.iter().map(|&d| d as i64).collect::<Vec<_>>(),
            ),
            Field::Bytes(b) => FeatureSpec::dense(b.name.clone(), DType::String, []),
        }
    }
}

impl Serialize for Field {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Field::from_json(&v).map_err(serde::de::Error::custom)
    }
}

/// FNV-1a: feature names are short, and the table is only asked when the
/// order of a record's keys differs from the previous record's.
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Wanted feature names → slot numbers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Keys {
    pub(crate) names: Vec<Box<[u8]>>,
    table: HashMap<Box<[u8]>, u32, BuildHasherDefault<Fnv>>,
}

impl Keys {
    fn intern(&mut self, name: &str) -> u32 {
        let key: Box<[u8]> = name.as_bytes().into();
        if let Some(&slot) = self.table.get(&key) {
            return slot;
        }
        let slot = self.names.len() as u32;
        self.names.push(key.clone());
        self.table.insert(key, slot);
        slot
    }

    #[inline]
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<u32> {
        self.table.get(key).copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }
}

/// How one output column is filled.
#[derive(Clone, Debug)]
pub(crate) enum Col {
    Dense {
        slot: u32,
        kind: ListKind,
        row_len: usize,
        default: Option<Values>,
    },
    Varlen {
        slot: u32,
        kind: ListKind,
    },
    Sparse {
        index: Vec<u32>,
        value: u32,
        kind: ListKind,
        sizes: Vec<i64>,
        sorted: bool,
    },
    Ragged {
        value: u32,
        kind: ListKind,
        partitions: Vec<Option<u32>>,
    },
    Sequence {
        slot: u32,
        kind: ListKind,
        item_len: usize,
    },
    Raw {
        slot: u32,
        spec: RawSpec,
        row_len: usize,
        /// For a varying-length output: the values per row of the ragged
        /// column's flat values (1 for a shape of rank 0 or 1).
        varying: Option<usize>,
    },
    Bytes {
        slot: u32,
    },
}

/// A compiled decoder: the wanted keys and one column plan per output.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) keys: Keys,
    pub(crate) columns: Vec<Col>,
    pub(crate) fields: Vec<Field>,
    pub(crate) specs: Vec<FeatureSpec>,
}

fn invalid(name: &str, reason: impl Into<String>) -> TensorError {
    TensorError::InvalidSpec {
        feature: name.to_string(),
        reason: reason.into(),
    }
}

fn unsupported(spec: &FeatureSpec, reason: impl Into<String>) -> TensorError {
    TensorError::UnsupportedSpec {
        feature: spec.name().to_string(),
        format: "OFRecord",
        kind: spec.kind(),
        reason: reason.into(),
    }
}

/// The list a feature of `dtype` is read from, if any.
pub(crate) fn list_for(dtype: DType) -> Option<ListKind> {
    Some(match dtype {
        DType::Int32 | DType::Bool => ListKind::Int32,
        DType::Int64 => ListKind::Int64,
        DType::Float32 => ListKind::Float,
        DType::Float64 => ListKind::Double,
        DType::String => ListKind::Bytes,
        _ => return None,
    })
}

fn fixed_shape(name: &str, shape: &[i64]) -> Result<Vec<usize>, TensorError> {
    let dims = shape
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                invalid(
                    name,
                    format!("shape {shape:?} is not fully defined (use a varlen or ragged spec)"),
                )
            })
        })
        .collect::<Result<Vec<usize>, TensorError>>()?;
    if grist_tensor::shape_elements(shape).is_none() {
        return Err(invalid(
            name,
            format!("shape {shape:?} has more than 2^63 - 1 elements"),
        ));
    }
    Ok(dims)
}

fn partition_kind(p: &Partition) -> PartitionKind {
    match p {
        Partition::RowSplits { .. } => PartitionKind::RowSplits,
        Partition::RowLengths { .. } => PartitionKind::RowLengths,
        Partition::RowStarts { .. } => PartitionKind::RowStarts,
        Partition::RowLimits { .. } => PartitionKind::RowLimits,
        Partition::ValueRowids { .. } => PartitionKind::ValueRowids,
        Partition::UniformRowLength { length } => PartitionKind::UniformRowLength(*length),
    }
}

/// The partition kinds of a ragged output, outermost first.
pub(crate) fn partition_kinds(spec: &FeatureSpec) -> Vec<PartitionKind> {
    match spec {
        FeatureSpec::Ragged(r) => r.partitions.iter().map(partition_kind).collect(),
        _ => Vec::new(),
    }
}

fn column(field: &Field, keys: &mut Keys) -> Result<Col, TensorError> {
    let spec = match field {
        Field::Raw(r) => {
            let row_len = r.shape.iter().product();
            let varying = match (r.varying(), r.inner()) {
                (false, _) => None,
                (true, Some(0)) => {
                    return Err(invalid(
                        &r.name,
                        "a varying shape needs inner dimensions > 0",
                    ));
                }
                (true, inner) => Some(inner.unwrap_or(1)),
            };
            return Ok(Col::Raw {
                slot: keys.intern(&r.name),
                spec: r.clone(),
                row_len,
                varying,
            });
        }
        Field::Bytes(b) => {
            return Ok(Col::Bytes {
                slot: keys.intern(&b.name),
            });
        }
        Field::Spec(spec) => spec,
    };
    let name = spec.name();
    let Some(kind) = list_for(spec.dtype()) else {
        return Err(unsupported(
            spec,
            format!("dtype {}: no OFRecord list holds it", spec.dtype()),
        ));
    };
    Ok(match spec {
        FeatureSpec::Dense(d) => {
            let shape = fixed_shape(name, &d.shape)?;
            let row_len = shape.iter().product();
            let default = match &d.default {
                None => None,
                Some(v) => Some(resolve_default(name, d.dtype, v, row_len)?),
            };
            Col::Dense {
                slot: keys.intern(name),
                kind,
                row_len,
                default,
            }
        }
        FeatureSpec::Varlen(v) => {
            if v.shape.as_ref().is_some_and(|s| s != &[-1]) || v.rank.is_some_and(|r| r != 1) {
                return Err(unsupported(spec, "an OFRecord list is rank 1 (shape [-1])"));
            }
            Col::Varlen {
                slot: keys.intern(name),
                kind,
            }
        }
        FeatureSpec::Sparse(s) => {
            let (Some(value_key), Some(size)) = (&s.value_key, &s.size) else {
                return Err(unsupported(
                    spec,
                    "an OFRecord SparseFeature needs index_key, value_key and size",
                ));
            };
            let index_keys = s.index_keys();
            let sizes = size.as_slice().to_vec();
            if index_keys.is_empty() || index_keys.len() != sizes.len() {
                return Err(invalid(
                    name,
                    format!("{} index keys but {} sizes", index_keys.len(), sizes.len()),
                ));
            }
            if let Some(bad) = sizes.iter().find(|&&s| s < 0) {
                return Err(invalid(name, format!("negative size {bad}")));
            }
            Col::Sparse {
                index: index_keys.iter().map(|k| keys.intern(k)).collect(),
                value: keys.intern(value_key),
                kind,
                sizes,
                sorted: s.already_sorted,
            }
        }
        FeatureSpec::Ragged(r) => {
            if !matches!(r.row_splits_dtype, DType::Int32 | DType::Int64) {
                return Err(invalid(name, "row_splits_dtype must be int32 or int64"));
            }
            for p in &r.partitions {
                if let Partition::UniformRowLength { length } = p {
                    if *length <= 0 {
                        return Err(invalid(name, format!("uniform_row_length {length}")));
                    }
                }
            }
            Col::Ragged {
                value: keys.intern(r.value_key()),
                kind,
                partitions: r
                    .partitions
                    .iter()
                    .map(|p| p.key().map(|k| keys.intern(k)))
                    .collect(),
            }
        }
        FeatureSpec::FixedLenSequence(f) => {
            if !f.allow_missing {
                return Err(invalid(
                    name,
                    "a FixedLenSequenceFeature of a plain record needs allow_missing",
                ));
            }
            let item_len = fixed_shape(name, &f.shape)?.iter().product();
            Col::Sequence {
                slot: keys.intern(name),
                kind,
                item_len,
            }
        }
        _ => return Err(unsupported(spec, "not a kind of spec OFRecord reads")),
    })
}

/// The padding of a fixed-length sequence output.
pub(crate) fn sequence_pad(spec: &FeatureSpec) -> Result<Values, TensorError> {
    let dtype = spec.dtype();
    match spec {
        FeatureSpec::FixedLenSequence(f) => match &f.default {
            Some(Value::Array(items)) if !items.is_empty() => {
                resolve_default(spec.name(), dtype, &items[0], 1)
            }
            Some(v) => resolve_default(spec.name(), dtype, v, 1),
            None => resolve_default(spec.name(), dtype, &zero_json(dtype), 1),
        },
        _ => Ok(Values::new(dtype)),
    }
}

fn zero_json(dtype: DType) -> Value {
    match dtype {
        DType::String => Value::from(""),
        DType::Bool => Value::from(false),
        _ => Value::from(0),
    }
}

impl Plan {
    pub(crate) fn new(fields: &[Field]) -> Result<Plan, TensorError> {
        let mut seen = HashMap::new();
        for f in fields {
            if seen.insert(f.name(), ()).is_some() {
                return Err(invalid(f.name(), "the name is used twice"));
            }
        }
        let mut keys = Keys::default();
        let columns = fields
            .iter()
            .map(|f| column(f, &mut keys))
            .collect::<Result<_, _>>()?;
        let specs = fields.iter().map(Field::spec).collect::<Vec<_>>();
        for spec in &specs {
            sequence_pad(spec)?;
        }
        Ok(Plan {
            keys,
            columns,
            fields: fields.to_vec(),
            specs,
        })
    }
}
