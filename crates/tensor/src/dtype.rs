//! Element types.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The element type of a tensor.
///
/// The serde names are the `dtype` strings of the corpus manifests:
/// `bool`, `int32`, `int64`, `float32`, `float64` and `string` (which holds
/// arbitrary bytes, as `tf.string` does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DType {
    /// `bool`.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `string`: a byte string, not necessarily UTF-8.
    String,
}

impl DType {
    /// The manifest name of the type (`"int64"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::String => "string",
        }
    }

    /// TensorFlow's short name of the type, as its error messages print it
    /// (`"int64"`, `"float"`, `"string"`, ...).
    pub fn tf_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Float32 => "float",
            DType::Float64 => "double",
            DType::String => "string",
        }
    }

    /// The size of one element in bytes; for strings, the size of an offset.
    pub fn size_of(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::Int32 | DType::Float32 => 4,
            DType::Int64 | DType::Float64 | DType::String => 8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
