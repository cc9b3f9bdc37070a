//! Whole records as values: [`Record`] parses any OFRecord (every feature,
//! whatever the specs), prints it in the corpus manifests' JSON form and
//! encodes it back canonically.

use std::collections::BTreeMap;

use base64::Engine as _;
use grist_tensor::json::float_to_json;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::wire::{self, ListKind, Sink};
use grist_tensor::Location;

/// The value of one feature: its list, or no list at all.
#[derive(Clone, Debug, PartialEq)]
pub enum FeatureValue {
    /// A `Feature` with no list set.
    None,
    /// `bytes_list`.
    Bytes(Vec<Vec<u8>>),
    /// `float_list`.
    Float(Vec<f32>),
    /// `double_list`.
    Double(Vec<f64>),
    /// `int32_list`.
    Int32(Vec<i32>),
    /// `int64_list`.
    Int64(Vec<i64>),
}

impl FeatureValue {
    /// The list kind, `None` for a Feature with no list.
    pub fn kind(&self) -> Option<ListKind> {
        match self {
            FeatureValue::None => None,
            FeatureValue::Bytes(_) => Some(ListKind::Bytes),
            FeatureValue::Float(_) => Some(ListKind::Float),
            FeatureValue::Double(_) => Some(ListKind::Double),
            FeatureValue::Int32(_) => Some(ListKind::Int32),
            FeatureValue::Int64(_) => Some(ListKind::Int64),
        }
    }

    /// The manifest name of the kind (`"int64_list"`, ..., `"none"`).
    pub fn kind_name(&self) -> &'static str {
        self.kind().map_or("none", ListKind::name)
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            FeatureValue::None => 0,
            FeatureValue::Bytes(v) => v.len(),
            FeatureValue::Float(v) => v.len(),
            FeatureValue::Double(v) => v.len(),
            FeatureValue::Int32(v) => v.len(),
            FeatureValue::Int64(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An empty list of `kind` (or no list).
    fn empty(kind: Option<ListKind>) -> Self {
        match kind {
            None => FeatureValue::None,
            Some(ListKind::Bytes) => FeatureValue::Bytes(Vec::new()),
            Some(ListKind::Float) => FeatureValue::Float(Vec::new()),
            Some(ListKind::Double) => FeatureValue::Double(Vec::new()),
            Some(ListKind::Int32) => FeatureValue::Int32(Vec::new()),
            Some(ListKind::Int64) => FeatureValue::Int64(Vec::new()),
        }
    }

    /// The manifest JSON of the value: `{"kind", "values"}` plus `"bits"`
    /// (hex IEEE bits) for floats. Bytes values longer than
    /// `max_inline_bytes` are summarized as `{"len", "sha256",
    /// "head_b64"}` (their first 16 bytes).
    pub fn to_json(&self, max_inline_bytes: usize) -> Value {
        let mut out = Map::new();
        out.insert("kind".into(), json!(self.kind_name()));
        let values = match self {
            FeatureValue::None => json!([]),
            FeatureValue::Bytes(v) => {
                let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
                Value::Array(
                    v.iter()
                        .map(|b| {
                            if b.len() > max_inline_bytes {
                                json!({
                                    "len": b.len(),
                                    "sha256": hex(&Sha256::digest(b)),
                                    "head_b64": b64(&b[..b.len().min(16)]),
                                })
                            } else {
                                json!(b64(b))
                            }
                        })
                        .collect(),
                )
            }
            FeatureValue::Float(v) => {
                let bits: Vec<Value> = v
                    .iter()
                    .map(|f| json!(format!("0x{:08x}", f.to_bits())))
                    .collect();
                out.insert("bits".into(), Value::Array(bits));
                v.iter().map(|&f| float_to_json(f as f64)).collect()
            }
            FeatureValue::Double(v) => {
                let bits: Vec<Value> = v
                    .iter()
                    .map(|f| json!(format!("0x{:016x}", f.to_bits())))
                    .collect();
                out.insert("bits".into(), Value::Array(bits));
                v.iter().map(|&f| float_to_json(f)).collect()
            }
            FeatureValue::Int32(v) => json!(v),
            FeatureValue::Int64(v) => json!(v),
        };
        out.insert("values".into(), values);
        Value::Object(out)
    }
}

/// Lowercase hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Collects the values of one list into a [`FeatureValue`].
impl Sink for FeatureValue {
    fn bytes(&mut self, v: &[u8]) {
        if let FeatureValue::Bytes(out) = self {
            out.push(v.to_vec());
        }
    }
    fn f32s(&mut self, le: &[u8]) {
        if let FeatureValue::Float(out) = self {
            out.f32s(le);
        }
    }
    fn f64s(&mut self, le: &[u8]) {
        if let FeatureValue::Double(out) = self {
            out.f64s(le);
        }
    }
    fn int(&mut self, v: u64) {
        match self {
            FeatureValue::Int32(out) => out.push(v as i32),
            FeatureValue::Int64(out) => out.push(v as i64),
            _ => {}
        }
    }
}

/// A parsed OFRecord: every feature, by name (names are bytes: proto2 does
/// not check that they are UTF-8, and neither does OneFlow).
///
/// ```
/// use grist_ofrecord::{FeatureValue, Record, RecordBuilder};
///
/// let bytes = RecordBuilder::new().with_int64s("label", [7]).encode();
/// let record = Record::parse(&bytes)?;
/// assert_eq!(record.get("label"), Some(&FeatureValue::Int64(vec![7])));
/// assert_eq!(record.to_json()["features"]["label"]["values"][0], 7);
/// assert_eq!(record.encode(), bytes);
/// # Ok::<(), grist_ofrecord::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    /// The features, by name.
    pub features: BTreeMap<Vec<u8>, FeatureValue>,
}

/// The bytes values above this size are summarized in [`Record::to_json`],
/// as the corpus manifests do.
pub const MAX_INLINE_BYTES: usize = 4096;

impl Record {
    /// Parses a serialized OFRecord with protobuf's rules (a key given
    /// twice keeps its last entry). Errors name no file: see
    /// [`parse_at`](Self::parse_at).
    pub fn parse(payload: &[u8]) -> Result<Self> {
        Self::parse_at(payload, &Location::record("", 0))
    }

    /// Parses a serialized OFRecord; errors name `at`.
    pub fn parse_at(payload: &[u8], at: &Location) -> Result<Self> {
        let mut features = BTreeMap::new();
        wire::scan(payload, |key, f| {
            let mut value = FeatureValue::empty(f.kind);
            wire::read_values(payload, &f, &mut value)?;
            features.insert(key.to_vec(), value);
            Ok(())
        })
        .map_err(|e| Error::Malformed {
            at: at.clone().into(),
            reason: e.reason,
            offset: e.offset,
        })?;
        Ok(Record { features })
    }

    /// The feature called `name`.
    pub fn get(&self, name: &str) -> Option<&FeatureValue> {
        self.features.get(name.as_bytes())
    }

    /// Sets feature `name`.
    pub fn insert(&mut self, name: impl Into<Vec<u8>>, value: FeatureValue) {
        self.features.insert(name.into(), value);
    }

    /// The manifest JSON form, as `grist cat --records` prints it:
    /// `{"features": {name: {"kind", "values", ...}}}`; when a name is not
    /// UTF-8, `{"features_raw": [{"name_hex", "kind", "values", ...}]}`
    /// instead. Bytes values over [`MAX_INLINE_BYTES`] are summarized.
    pub fn to_json(&self) -> Value {
        self.to_json_with(MAX_INLINE_BYTES)
    }

    /// [`to_json`](Self::to_json) with another summary threshold
    /// (`usize::MAX`: every value in full).
    pub fn to_json_with(&self, max_inline_bytes: usize) -> Value {
        if self.features.keys().all(|k| std::str::from_utf8(k).is_ok()) {
            let map: Map<String, Value> = self
                .features
                .iter()
                .map(|(k, v)| {
                    (
                        String::from_utf8_lossy(k).into_owned(),
                        v.to_json(max_inline_bytes),
                    )
                })
                .collect();
            return json!({ "features": map });
        }
        let list: Vec<Value> = self
            .features
            .iter()
            .map(|(k, v)| {
                let mut item = v.to_json(max_inline_bytes);
                if let Value::Object(m) = &mut item {
                    m.insert("name_hex".into(), json!(hex(k)));
                }
                item
            })
            .collect();
        json!({ "features_raw": list })
    }

    /// The canonical serialization (what Python protobuf writes): entries
    /// sorted by name bytes, key then value, numeric lists packed.
    pub fn encode(&self) -> Vec<u8> {
        let protos: Vec<_> = self
            .features
            .values()
            .map(crate::encode::feature_proto)
            .collect();
        let mut out = Vec::new();
        crate::encode::encode_entries(
            self.features.keys().map(Vec::as_slice).zip(&protos),
            &mut out,
        );
        out
    }

    /// Builds a record from its manifest JSON form (`features` or
    /// `features_raw`), the inverse of [`to_json_with`](Self::to_json_with)
    /// with `usize::MAX` (summarized bytes values cannot be rebuilt).
    pub fn from_json(value: &Value) -> std::result::Result<Self, String> {
        let mut record = Record::default();
        let mut add = |name: Vec<u8>, f: &Value| -> std::result::Result<(), String> {
            record.features.insert(name, feature_from_json(f)?);
            Ok(())
        };
        if let Some(map) = value.get("features").and_then(Value::as_object) {
            for (k, f) in map {
                add(k.as_bytes().to_vec(), f)?;
            }
        } else if let Some(list) = value.get("features_raw").and_then(Value::as_array) {
            for f in list {
                let name = f
                    .get("name_hex")
                    .and_then(Value::as_str)
                    .ok_or("features_raw entry without name_hex")?;
                add(unhex(name)?, f)?;
            }
        } else {
            return Err("no features or features_raw".into());
        }
        Ok(record)
    }
}

fn unhex(s: &str) -> std::result::Result<Vec<u8>, String> {
    if s.len() % 2 != 0 {
        return Err(format!("odd-length hex {s:?}"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| format!("hex {s:?}: {e}")))
        .collect()
}

fn feature_from_json(f: &Value) -> std::result::Result<FeatureValue, String> {
    let kind = f.get("kind").and_then(Value::as_str).ok_or("no kind")?;
    let values = f
        .get("values")
        .and_then(Value::as_array)
        .ok_or("no values")?;
    let bits = |i: usize| -> std::result::Result<u64, String> {
        let b = f
            .get("bits")
            .and_then(|b| b.get(i))
            .and_then(Value::as_str)
            .ok_or("float without bits")?;
        u64::from_str_radix(b.trim_start_matches("0x"), 16).map_err(|e| e.to_string())
    };
    let int = |v: &Value| v.as_i64().ok_or_else(|| format!("not an integer: {v}"));
    Ok(match kind {
        "none" => FeatureValue::None,
        "bytes_list" => FeatureValue::Bytes(
            values
                .iter()
                .map(|v| {
                    let s = v.as_str().ok_or("summarized or non-string bytes value")?;
                    base64::engine::general_purpose::STANDARD
                        .decode(s)
                        .map_err(|e| e.to_string())
                })
                .collect::<std::result::Result<_, String>>()?,
        ),
        "float_list" => FeatureValue::Float(
            (0..values.len())
                .map(|i| bits(i).map(|b| f32::from_bits(b as u32)))
                .collect::<std::result::Result<_, _>>()?,
        ),
        "double_list" => FeatureValue::Double(
            (0..values.len())
                .map(|i| bits(i).map(f64::from_bits))
                .collect::<std::result::Result<_, _>>()?,
        ),
        "int32_list" => FeatureValue::Int32(
            values
                .iter()
                .map(|v| int(v).and_then(|i| i32::try_from(i).map_err(|e| e.to_string())))
                .collect::<std::result::Result<_, _>>()?,
        ),
        "int64_list" => FeatureValue::Int64(
            values
                .iter()
                .map(int)
                .collect::<std::result::Result<_, _>>()?,
        ),
        other => return Err(format!("unknown kind {other:?}")),
    })
}
