//! Tensors and batches.

use serde::{Deserialize, Serialize};

use crate::DType;

/// Byte strings stored as one contiguous buffer plus offsets.
///
/// String `i` is `data[offsets[i]..offsets[i + 1]]`; `offsets` always starts
/// with `0` and has one more entry than there are strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StringValues {
    data: Vec<u8>,
    offsets: Vec<usize>,
}

impl Default for StringValues {
    fn default() -> Self {
        StringValues {
            data: Vec::new(),
            offsets: vec![0],
        }
    }
}

impl StringValues {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty list with room for `strings` strings of `bytes` bytes in all.
    pub fn with_capacity(strings: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(strings + 1);
        offsets.push(0);
        StringValues {
            data: Vec::with_capacity(bytes),
            offsets,
        }
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when there are no strings.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends one string.
    #[inline]
    pub fn push(&mut self, value: &[u8]) {
        self.data.extend_from_slice(value);
        self.offsets.push(self.data.len());
    }

    /// String `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let start = *self.offsets.get(i)?;
        let end = *self.offsets.get(i + 1)?;
        Some(&self.data[start..end])
    }

    /// Iterates over the strings.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.offsets.windows(2).map(|w| &self.data[w[0]..w[1]])
    }

    /// The concatenated bytes of every string.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The `len() + 1` offsets into [`data`](Self::data).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// Consumes the list, returning its bytes and its `len() + 1` offsets,
    /// so that another representation (Arrow's) can take the buffers
    /// without copying them.
    pub fn into_parts(self) -> (Vec<u8>, Vec<usize>) {
        (self.data, self.offsets)
    }

    /// The list made of `data` and `offsets` (as [`into_parts`] returns
    /// them), or `None` unless `offsets` starts at 0, never decreases and
    /// ends at `data.len()`.
    ///
    /// [`into_parts`]: Self::into_parts
    ///
    /// ```
    /// use grist_tensor::StringValues;
    /// let s = StringValues::from_parts(b"abcd".to_vec(), vec![0, 1, 4]).unwrap();
    /// assert_eq!(s.get(1), Some(&b"bcd"[..]));
    /// assert!(StringValues::from_parts(b"ab".to_vec(), vec![0, 3]).is_none());
    /// ```
    pub fn from_parts(data: Vec<u8>, offsets: Vec<usize>) -> Option<Self> {
        let valid = offsets.first() == Some(&0)
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && offsets.last() == Some(&data.len());
        valid.then_some(StringValues { data, offsets })
    }

    /// Keeps the first `len` strings.
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.offsets.truncate(len + 1);
            self.data.truncate(self.offsets[len]);
        }
    }

    /// Appends every string of `other`.
    pub fn extend_from(&mut self, other: &StringValues) {
        let base = self.data.len();
        self.data.extend_from_slice(&other.data);
        self.offsets
            .extend(other.offsets[1..].iter().map(|&o| o + base));
    }

    /// Appends strings `range` of `other`.
    pub fn extend_from_range(&mut self, other: &StringValues, range: std::ops::Range<usize>) {
        for i in range {
            let s = other.get(i).unwrap_or_default();
            self.push(s);
        }
    }

    /// Removes every string, keeping the allocations.
    pub fn clear(&mut self) {
        self.data.clear();
        self.offsets.truncate(1);
    }
}

impl<'a> FromIterator<&'a [u8]> for StringValues {
    fn from_iter<I: IntoIterator<Item = &'a [u8]>>(iter: I) -> Self {
        let mut out = StringValues::new();
        for s in iter {
            out.push(s);
        }
        out
    }
}

/// A flat list of values of one [`DType`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Values {
    /// `bool` values.
    Bool(Vec<bool>),
    /// `int32` values.
    Int32(Vec<i32>),
    /// `int64` values.
    Int64(Vec<i64>),
    /// `float32` values.
    Float32(Vec<f32>),
    /// `float64` values.
    Float64(Vec<f64>),
    /// `string` values.
    String(StringValues),
}

/// Applies `$body` to the vector inside a [`Values`], whatever its type.
macro_rules! each_values {
    ($v:expr, $x:ident => $body:expr) => {
        match $v {
            Values::Bool($x) => $body,
            Values::Int32($x) => $body,
            Values::Int64($x) => $body,
            Values::Float32($x) => $body,
            Values::Float64($x) => $body,
            Values::String($x) => $body,
        }
    };
}

impl Values {
    /// An empty list of `dtype`.
    pub fn new(dtype: DType) -> Self {
        Self::with_capacity(dtype, 0)
    }

    /// An empty list of `dtype` with room for `n` values.
    pub fn with_capacity(dtype: DType, n: usize) -> Self {
        match dtype {
            DType::Bool => Values::Bool(Vec::with_capacity(n)),
            DType::Int32 => Values::Int32(Vec::with_capacity(n)),
            DType::Int64 => Values::Int64(Vec::with_capacity(n)),
            DType::Float32 => Values::Float32(Vec::with_capacity(n)),
            DType::Float64 => Values::Float64(Vec::with_capacity(n)),
            DType::String => Values::String(StringValues::with_capacity(n, 0)),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Values::Bool(_) => DType::Bool,
            Values::Int32(_) => DType::Int32,
            Values::Int64(_) => DType::Int64,
            Values::Float32(_) => DType::Float32,
            Values::Float64(_) => DType::Float64,
            Values::String(_) => DType::String,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        each_values!(self, v => v.len())
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps the first `len` values.
    pub fn truncate(&mut self, len: usize) {
        each_values!(self, v => v.truncate(len))
    }

    /// Removes every value, keeping the allocation.
    pub fn clear(&mut self) {
        each_values!(self, v => v.clear())
    }

    /// The bytes of string values (0 for other dtypes): with
    /// [`len`](Self::len), the size of the buffers to reserve for as many
    /// values again.
    pub fn string_bytes(&self) -> usize {
        match self {
            Values::String(s) => s.data.len(),
            _ => 0,
        }
    }

    /// Reserves room for `n` more values and, for strings, `bytes` more
    /// bytes of them.
    pub fn reserve_with_bytes(&mut self, n: usize, bytes: usize) {
        if let Values::String(s) = self {
            s.data.reserve(bytes);
        }
        self.reserve(n);
    }

    /// Reserves room for `n` more values.
    pub fn reserve(&mut self, n: usize) {
        match self {
            Values::String(s) => s.offsets.reserve(n),
            Values::Bool(v) => v.reserve(n),
            Values::Int32(v) => v.reserve(n),
            Values::Int64(v) => v.reserve(n),
            Values::Float32(v) => v.reserve(n),
            Values::Float64(v) => v.reserve(n),
        }
    }

    /// Appends values `range` of `other`, which must have the same dtype.
    ///
    /// # Panics
    ///
    /// When the dtypes differ or `range` is out of bounds: both are bugs
    /// of the caller, never a property of input data.
    pub fn extend_from_range(&mut self, other: &Values, range: std::ops::Range<usize>) {
        match (self, other) {
            (Values::Bool(a), Values::Bool(b)) => a.extend_from_slice(&b[range]),
            (Values::Int32(a), Values::Int32(b)) => a.extend_from_slice(&b[range]),
            (Values::Int64(a), Values::Int64(b)) => a.extend_from_slice(&b[range]),
            (Values::Float32(a), Values::Float32(b)) => a.extend_from_slice(&b[range]),
            (Values::Float64(a), Values::Float64(b)) => a.extend_from_slice(&b[range]),
            (Values::String(a), Values::String(b)) => a.extend_from_range(b, range),
            (a, b) => panic!("extend_from_range: dtype {} into {}", b.dtype(), a.dtype()),
        }
    }

    /// Appends every value of `other`, which must have the same dtype.
    ///
    /// # Panics
    ///
    /// When the dtypes differ (a caller bug).
    pub fn extend_from(&mut self, other: &Values) {
        match (self, other) {
            (Values::String(a), Values::String(b)) => a.extend_from(b),
            (a, b) => {
                let n = b.len();
                a.extend_from_range(b, 0..n)
            }
        }
    }

    /// Appends `count` copies of the list `pattern` (same dtype).
    ///
    /// # Panics
    ///
    /// When the dtypes differ (a caller bug).
    pub fn extend_repeat(&mut self, pattern: &Values, count: usize) {
        for _ in 0..count {
            self.extend_from(pattern);
        }
    }

    /// Compares two lists value by value, floats by their bits (so `NaN`
    /// equals the same `NaN` and `-0.0` differs from `0.0`).
    pub fn bit_eq(&self, other: &Values) -> bool {
        match (self, other) {
            (Values::Float32(a), Values::Float32(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Values::Float64(a), Values::Float64(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (a, b) => a == b,
        }
    }
}

/// A dense tensor: a shape and its values in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseTensor {
    /// The dimensions; the product is `values.len()`.
    pub shape: Vec<usize>,
    /// The values, row-major.
    pub values: Values,
}

impl DenseTensor {
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.values.dtype()
    }
}

/// A sparse tensor in TensorFlow's COO layout (`tf.SparseTensor`).
///
/// `indices` holds `nnz` index tuples of `dense_shape.len()` entries each,
/// flattened; in a batch the first entry of each tuple is the batch row.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseTensor {
    /// The `nnz × rank` indices, row-major.
    pub indices: Vec<i64>,
    /// The `nnz` values, in the order of `indices`.
    pub values: Values,
    /// The shape of the dense tensor this one stands for.
    pub dense_shape: Vec<i64>,
}

impl SparseTensor {
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.values.dtype()
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.dense_shape.len()
    }

    /// The number of stored values.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// The index tuples, one slice of `rank` entries per value.
    pub fn index_tuples(&self) -> impl Iterator<Item = &[i64]> + '_ {
        self.indices.chunks(self.rank().max(1))
    }
}

/// A ragged tensor (`tf.RaggedTensor`): flat values partitioned by one or
/// more levels of row splits, the outermost (over the batch) first.
#[derive(Clone, Debug, PartialEq)]
pub struct RaggedTensor {
    /// Row splits, outermost first; each level starts at 0 and is
    /// non-decreasing.
    pub nested_row_splits: Vec<Vec<i64>>,
    /// The dtype the row splits are reported in: `Int32` or `Int64`.
    pub row_splits_dtype: DType,
    /// The flat values; its first dimension is the last split's end.
    pub flat_values: DenseTensor,
}

impl RaggedTensor {
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.flat_values.dtype()
    }
}

/// A tensor of any layout.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Tensor {
    /// Dense.
    Dense(DenseTensor),
    /// Sparse COO.
    Sparse(SparseTensor),
    /// Ragged.
    Ragged(RaggedTensor),
}

impl Tensor {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::Dense(t) => t.dtype(),
            Tensor::Sparse(t) => t.dtype(),
            Tensor::Ragged(t) => t.dtype(),
        }
    }

    /// The dense tensor, if this is one.
    pub fn as_dense(&self) -> Option<&DenseTensor> {
        match self {
            Tensor::Dense(t) => Some(t),
            _ => None,
        }
    }

    /// The sparse tensor, if this is one.
    pub fn as_sparse(&self) -> Option<&SparseTensor> {
        match self {
            Tensor::Sparse(t) => Some(t),
            _ => None,
        }
    }

    /// The ragged tensor, if this is one.
    pub fn as_ragged(&self) -> Option<&RaggedTensor> {
        match self {
            Tensor::Ragged(t) => Some(t),
            _ => None,
        }
    }
}

/// Which part of a parsed record a column belongs to.
///
/// Plain records (tf.Example, Avro, OFRecord) only have `Features`;
/// `tf.SequenceExample` yields the other three, as
/// `tf.io.parse_sequence_example` does. The serde names are the keys of a
/// batch in the corpus manifests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Section {
    /// The features of a plain record (`outputs`).
    #[serde(rename = "outputs")]
    Features,
    /// The context features of a sequence example (`context`).
    #[serde(rename = "context")]
    Context,
    /// The feature lists of a sequence example (`feature_lists`).
    #[serde(rename = "feature_lists")]
    FeatureLists,
    /// The lengths of the fixed-length sequence feature lists
    /// (`feature_list_lengths`).
    #[serde(rename = "feature_list_lengths")]
    FeatureListLengths,
}

impl Section {
    /// The manifest key of the section.
    pub fn key(self) -> &'static str {
        match self {
            Section::Features => "outputs",
            Section::Context => "context",
            Section::FeatureLists => "feature_lists",
            Section::FeatureListLengths => "feature_list_lengths",
        }
    }
}

/// One named column of a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// The feature name.
    pub name: String,
    /// The part of the record it comes from.
    pub section: Section,
    /// The values, with the batch as the first dimension.
    pub tensor: Tensor,
}

/// The columns of one batch, in spec order, plus its row count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    rows: usize,
    columns: Vec<Column>,
}

impl Batch {
    /// A batch of `rows` records made of `columns`.
    pub fn new(rows: usize, columns: Vec<Column>) -> Self {
        Batch { rows, columns }
    }

    /// The number of records in the batch.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The columns, in spec order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Consumes the batch, returning its columns.
    pub fn into_columns(self) -> Vec<Column> {
        self.columns
    }

    /// The first column called `name` (in any section).
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.columns
            .iter()
            .find(|c| c.name == name)
            .map(|c| &c.tensor)
    }

    /// The column called `name` in `section`.
    pub fn get_in(&self, section: Section, name: &str) -> Option<&Tensor> {
        self.columns
            .iter()
            .find(|c| c.section == section && c.name == name)
            .map(|c| &c.tensor)
    }
}
