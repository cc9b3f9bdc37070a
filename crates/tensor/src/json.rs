//! The JSON form of tensors and batches used by the corpus manifests and
//! printed by `grist cat`.
//!
//! Integers are JSON integers; floats are JSON numbers that round-trip
//! (float32 widened to float64), non-finite floats the strings `"NaN"`,
//! `"Infinity"`, `"-Infinity"`; bytes are a JSON string when they are valid
//! UTF-8 and `{"base64": "..."}` otherwise.

use base64::Engine as _;
use serde_json::{Map, Number, Value, json};

use crate::{Batch, DType, DenseTensor, RaggedTensor, Section, SparseTensor, Tensor, Values};

/// The JSON form of a float.
pub fn float_to_json(x: f64) -> Value {
    if x.is_nan() {
        Value::String("NaN".into())
    } else if x.is_infinite() {
        Value::String(if x > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else {
        // Finite, so from_f64 cannot fail.
        Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// The JSON form of a byte string.
pub fn bytes_to_json(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) => Value::String(s.to_string()),
        Err(_) => json!({ "base64": base64::engine::general_purpose::STANDARD.encode(b) }),
    }
}

/// Decodes the JSON form of a byte string.
pub fn bytes_from_json(v: &Value) -> Result<Vec<u8>, String> {
    match v {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Object(m) => match m.get("base64") {
            Some(Value::String(b)) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| format!("bad base64: {e}")),
            _ => Err("expected a string or {\"base64\": ...}".into()),
        },
        other => Err(format!("expected a byte string, found {other}")),
    }
}

/// Decodes the JSON form of a float (number or `"NaN"`/`"Infinity"`/`"-Infinity"`).
pub fn float_from_json(v: &Value) -> Result<f64, String> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("bad number {n}")),
        Value::String(s) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            _ => Err(format!("expected a float, found {s:?}")),
        },
        other => Err(format!("expected a float, found {other}")),
    }
}

/// Appends the JSON scalar `v`, read as `dtype`, to `out`.
pub fn scalar_from_json(dtype: DType, v: &Value, out: &mut Values) -> Result<(), String> {
    let int = |v: &Value| -> Result<i64, String> {
        if let Some(i) = v.as_i64() {
            return Ok(i);
        }
        match v.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Ok(f as i64),
            _ => Err(format!("expected an integer, found {v}")),
        }
    };
    match (dtype, out) {
        (DType::Bool, Values::Bool(o)) => match v {
            Value::Bool(b) => o.push(*b),
            Value::Number(n) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => {
                o.push(n.as_i64() == Some(1))
            }
            other => return Err(format!("expected a bool, found {other}")),
        },
        (DType::Int32, Values::Int32(o)) => {
            let i = int(v)?;
            o.push(i32::try_from(i).map_err(|_| format!("{i} does not fit int32"))?);
        }
        (DType::Int64, Values::Int64(o)) => o.push(int(v)?),
        (DType::Float32, Values::Float32(o)) => o.push(float_from_json(v)? as f32),
        (DType::Float64, Values::Float64(o)) => o.push(float_from_json(v)?),
        (DType::String, Values::String(o)) => o.push(&bytes_from_json(v)?),
        (d, o) => return Err(format!("dtype {d} into a {} list", o.dtype())),
    }
    Ok(())
}

/// The JSON list of a flat value list.
pub fn values_to_json(values: &Values) -> Value {
    Value::Array(match values {
        Values::Bool(v) => v.iter().map(|&b| Value::Bool(b)).collect(),
        Values::Int32(v) => v.iter().map(|&i| json!(i)).collect(),
        Values::Int64(v) => v.iter().map(|&i| json!(i)).collect(),
        Values::Float32(v) => v.iter().map(|&f| float_to_json(f as f64)).collect(),
        Values::Float64(v) => v.iter().map(|&f| float_to_json(f)).collect(),
        Values::String(v) => v.iter().map(bytes_to_json).collect(),
    })
}

fn dense_to_json(t: &DenseTensor) -> Value {
    json!({
        "kind": "dense",
        "dtype": t.dtype().name(),
        "shape": t.shape,
        "values": values_to_json(&t.values),
    })
}

fn sparse_to_json(t: &SparseTensor) -> Value {
    let indices: Vec<Value> = t.index_tuples().map(|ix| json!(ix)).collect();
    let indices = if t.nnz() == 0 { Vec::new() } else { indices };
    json!({
        "kind": "sparse",
        "dtype": t.dtype().name(),
        "indices": indices,
        "values": values_to_json(&t.values),
        "dense_shape": t.dense_shape,
    })
}

fn ragged_to_json(t: &RaggedTensor) -> Value {
    json!({
        "kind": "ragged",
        "dtype": t.dtype().name(),
        "row_splits_dtype": t.row_splits_dtype.name(),
        "nested_row_splits": t.nested_row_splits,
        "flat_values_shape": t.flat_values.shape,
        "flat_values": values_to_json(&t.flat_values.values),
    })
}

/// The manifest JSON form of a tensor.
pub fn tensor_to_json(t: &Tensor) -> Value {
    match t {
        Tensor::Dense(d) => dense_to_json(d),
        Tensor::Sparse(s) => sparse_to_json(s),
        Tensor::Ragged(r) => ragged_to_json(r),
    }
}

/// The manifest `batches[]` form of a batch: `{"records": n, "outputs":
/// {...}}`, or for sequence examples `{"records", "context",
/// "feature_lists", "feature_list_lengths"}`.
pub fn batch_to_json(b: &Batch) -> Value {
    let mut out = Map::new();
    out.insert("records".into(), json!(b.rows()));
    let sequence = b.columns().iter().any(|c| c.section != Section::Features);
    let sections: &[Section] = if sequence {
        &[
            Section::Context,
            Section::FeatureLists,
            Section::FeatureListLengths,
        ]
    } else {
        &[Section::Features]
    };
    for &section in sections {
        let mut m = Map::new();
        for c in b.columns().iter().filter(|c| c.section == section) {
            m.insert(c.name.clone(), tensor_to_json(&c.tensor));
        }
        out.insert(section.key().into(), Value::Object(m));
    }
    Value::Object(out)
}

/// Where two JSON documents first differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonMismatch {
    /// A JSON-pointer-like path to the difference.
    pub path: String,
    /// What differs.
    pub detail: String,
}

impl std::fmt::Display for JsonMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {}: {}", self.path, self.detail)
    }
}

/// Compares two documents in the manifest JSON form exactly: integers as
/// integers, other numbers by the bits of their float64 value (so `-0.0`
/// differs from `0.0`), everything else structurally.
pub fn compare_json(expected: &Value, actual: &Value) -> Result<(), JsonMismatch> {
    compare_at(expected, actual, &mut String::new())
}

fn compare_at(expected: &Value, actual: &Value, path: &mut String) -> Result<(), JsonMismatch> {
    let fail = |path: &str, detail: String| {
        Err(JsonMismatch {
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
            detail,
        })
    };
    match (expected, actual) {
        (Value::Number(a), Value::Number(b)) => {
            let same = match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => match (a.as_f64(), b.as_f64()) {
                    (Some(x), Some(y)) => x.to_bits() == y.to_bits(),
                    _ => false,
                },
            };
            if same {
                Ok(())
            } else {
                fail(path, format!("expected {a}, found {b}"))
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return fail(
                    path,
                    format!("expected {} items, found {}", a.len(), b.len()),
                );
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                compare_at(x, y, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        (Value::Object(a), Value::Object(b)) => {
            for k in a.keys().chain(b.keys()) {
                let (Some(x), Some(y)) = (a.get(k), b.get(k)) else {
                    return fail(path, format!("key {k:?} only on one side"));
                };
                let len = path.len();
                path.push('/');
                path.push_str(k);
                compare_at(x, y, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        (a, b) if a == b => Ok(()),
        (a, b) => fail(path, format!("expected {a}, found {b}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_round_trip_and_compare_by_bits() {
        let x = 0.1f32;
        let v = float_to_json(x as f64);
        assert_eq!(float_from_json(&v).unwrap() as f32, x);
        assert!(compare_json(&json!(-0.0), &float_to_json(-0.0)).is_ok());
        assert!(compare_json(&json!(0.0), &float_to_json(-0.0)).is_err());
        assert_eq!(float_to_json(f64::NAN), json!("NaN"));
        assert!(compare_json(&json!([1, {"a": 2}]), &json!([1, {"a": 3}])).is_err());
    }

    #[test]
    fn bytes_use_base64_when_not_utf8() {
        assert_eq!(bytes_to_json(b"ok"), json!("ok"));
        assert_eq!(bytes_to_json(&[0xff]), json!({"base64": "/w=="}));
        assert_eq!(
            bytes_from_json(&json!({"base64": "/w=="})).unwrap(),
            vec![0xff]
        );
    }
}
