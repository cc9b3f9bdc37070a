//! The configurations of the `avro_decode` target (a writer schema and
//! ATDS feature specs each) and a generator of valid datums for them,
//! shared with its seed tool.
//!
//! New configurations go at the end of the list, so that saved inputs
//! (whose first byte selects one) keep their meaning.

use std::collections::HashMap;
use std::sync::OnceLock;

use grist_avro_tensor::schema_for_specs;
use grist_tensor::{FeatureSpec, Limits};
use serde_json::Value;

/// One schema + specs pair.
#[derive(Debug)]
pub struct Config {
    /// A short name, for seed files.
    pub name: &'static str,
    /// The writer schema (JSON text).
    pub schema: String,
    /// The schema `schema_for_specs` writes for the specs: what
    /// `encode_batch` output decodes with.
    pub canonical: String,
    /// The feature specs.
    pub specs: Vec<FeatureSpec>,
}

/// Small limits, so a fuzzed count can't make a run slow.
pub fn limits() -> Limits {
    Limits::default()
        .with_max_record_bytes(1 << 20)
        .with_max_alloc_bytes(4 << 20)
}

/// Named types reused by several configurations.
const SPARSE_F: &str = r#"{"type": "record", "name": "SpF", "fields": [
    {"name": "indices0", "type": {"type": "array", "items": "long"}},
    {"name": "values", "type": {"type": "array", "items": "float"}}]}"#;

/// `(name, writer schema fields, specs)`; the schema is a record `Row`
/// with these fields.
const TABLE: &[(&str, &str, &str)] = &[
    (
        "primitives",
        r#"[{"name": "i", "type": "int"}, {"name": "l", "type": "long"},
            {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
            {"name": "b", "type": "boolean"}, {"name": "s", "type": "string"},
            {"name": "y", "type": "bytes"}]"#,
        r#"[{"name": "i", "kind": "dense", "dtype": "int32", "shape": []},
            {"name": "l", "kind": "dense", "dtype": "int64", "shape": []},
            {"name": "f", "kind": "dense", "dtype": "float32", "shape": []},
            {"name": "d", "kind": "dense", "dtype": "float64", "shape": []},
            {"name": "b", "kind": "dense", "dtype": "bool", "shape": []},
            {"name": "s", "kind": "dense", "dtype": "string", "shape": []},
            {"name": "y", "kind": "dense", "dtype": "string", "shape": []}]"#,
    ),
    (
        "dense_nested",
        r#"[{"name": "l0", "type": "long"},
            {"name": "r1", "type": {"type": "array", "items": "float"}},
            {"name": "r2", "type": {"type": "array", "items": {"type": "array", "items": "int"}}},
            {"name": "r3", "type": {"type": "array", "items": {"type": "array", "items": {"type": "array", "items": "double"}}}},
            {"name": "sr1", "type": {"type": "array", "items": "string"}},
            {"name": "br1", "type": {"type": "array", "items": "boolean"}}]"#,
        r#"[{"name": "l0", "kind": "dense", "dtype": "int64", "shape": []},
            {"name": "r1", "kind": "dense", "dtype": "float32", "shape": [4]},
            {"name": "r2", "kind": "dense", "dtype": "int32", "shape": [2, 3]},
            {"name": "r3", "kind": "dense", "dtype": "float64", "shape": [2, 2, 2]},
            {"name": "sr1", "kind": "dense", "dtype": "string", "shape": [2]},
            {"name": "br1", "kind": "dense", "dtype": "bool", "shape": [3]}]"#,
    ),
    (
        "sparse",
        r#"[{"name": "sp1", "type": {"type": "record", "name": "Sp1", "fields": [
                {"name": "indices0", "type": {"type": "array", "items": "long"}},
                {"name": "values", "type": {"type": "array", "items": "float"}}]}},
            {"name": "sp2", "type": {"type": "record", "name": "Sp2", "fields": [
                {"name": "values", "type": {"type": "array", "items": "long"}},
                {"name": "indices1", "type": {"type": "array", "items": "long"}},
                {"name": "extra", "type": {"type": "map", "values": "string"}},
                {"name": "indices0", "type": {"type": "array", "items": "int"}}]}},
            {"name": "sps", "type": {"type": "record", "name": "SpS", "fields": [
                {"name": "indices0", "type": {"type": "array", "items": "long"}},
                {"name": "values", "type": {"type": "array", "items": "string"}}]}}]"#,
        r#"[{"name": "sp1", "kind": "sparse", "dtype": "float32", "shape": [100]},
            {"name": "sp2", "kind": "sparse", "dtype": "int64", "shape": [5, 7]},
            {"name": "sps", "kind": "sparse", "dtype": "string", "shape": [8]}]"#,
    ),
    (
        "varlen",
        r#"[{"name": "v1", "type": {"type": "array", "items": "long"}},
            {"name": "v2", "type": {"type": "array", "items": {"type": "array", "items": "float"}}},
            {"name": "v3", "type": {"type": "array", "items": {"type": "array", "items": {"type": "array", "items": "int"}}}},
            {"name": "vs", "type": {"type": "array", "items": "string"}},
            {"name": "vb", "type": {"type": "array", "items": "boolean"}}]"#,
        r#"[{"name": "v1", "kind": "varlen", "dtype": "int64", "shape": [-1]},
            {"name": "v2", "kind": "varlen", "dtype": "float32", "shape": [2, -1]},
            {"name": "v3", "kind": "varlen", "dtype": "int32", "shape": [-1, -1, 2]},
            {"name": "vs", "kind": "varlen", "dtype": "string", "shape": [-1]},
            {"name": "vb", "kind": "varlen", "dtype": "bool", "shape": [-1]}]"#,
    ),
    (
        "nullable",
        r#"[{"name": "a", "type": ["null", "long"]},
            {"name": "b", "type": [{"type": "array", "items": "double"}, "null"]},
            {"name": "c", "type": ["null", "string"]},
            {"name": "d", "type": ["float", "null"]},
            {"name": "v", "type": ["null", {"type": "array", "items": "int"}]},
            {"name": "s", "type": [REF_SPARSE_F, "null"]}]"#,
        r#"[{"name": "a", "kind": "dense", "dtype": "int64", "shape": [], "default": -1},
            {"name": "b", "kind": "dense", "dtype": "float64", "shape": [2], "default": [0.5, "NaN"]},
            {"name": "c", "kind": "dense", "dtype": "string", "shape": [], "default": {"base64": "/w=="}},
            {"name": "d", "kind": "dense", "dtype": "float32", "shape": []},
            {"name": "v", "kind": "varlen", "dtype": "int64", "shape": [-1]},
            {"name": "s", "kind": "sparse", "dtype": "float64", "shape": [10]}]"#,
    ),
    (
        "enum_fixed_promotions",
        r#"[{"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
            {"name": "x", "type": {"type": "fixed", "name": "Id", "size": 4}},
            {"name": "ea", "type": {"type": "array", "items": "Color"}},
            {"name": "xa", "type": {"type": "array", "items": "Id"}},
            {"name": "i2d", "type": "int"},
            {"name": "l2f", "type": {"type": "array", "items": "long"}},
            {"name": "f2d", "type": "float"},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "z", "type": {"type": "fixed", "name": "Zero", "size": 0}}]"#,
        r#"[{"name": "e", "kind": "dense", "dtype": "string", "shape": []},
            {"name": "x", "kind": "dense", "dtype": "string", "shape": []},
            {"name": "ea", "kind": "varlen", "dtype": "string", "shape": [-1]},
            {"name": "xa", "kind": "dense", "dtype": "string", "shape": [2]},
            {"name": "i2d", "kind": "dense", "dtype": "float64", "shape": []},
            {"name": "l2f", "kind": "varlen", "dtype": "float32", "shape": [-1]},
            {"name": "f2d", "kind": "dense", "dtype": "float64", "shape": []},
            {"name": "ts", "kind": "dense", "dtype": "int64", "shape": []},
            {"name": "z", "kind": "dense", "dtype": "string", "shape": []}]"#,
    ),
    (
        "skipped_everything",
        r#"[{"name": "m", "type": {"type": "map", "values": {"type": "record", "name": "MV", "fields": [
                {"name": "a", "type": "int"}, {"name": "b", "type": ["null", "string", {"type": "array", "items": "double"}]}]}}},
            {"name": "u", "type": ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]},
            {"name": "list", "type": {"type": "record", "name": "Node", "fields": [
                {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}},
            {"name": "empty", "type": {"type": "array", "items": {"type": "record", "name": "Empty", "fields": []}}},
            {"name": "nulls", "type": {"type": "array", "items": "null"}},
            {"name": "zeros", "type": {"type": "array", "items": {"type": "fixed", "name": "Z0", "size": 0}}},
            {"name": "recs", "type": {"type": "array", "items": "MV"}},
            {"name": "fx", "type": {"type": "array", "items": {"type": "fixed", "name": "F3", "size": 3}}},
            {"name": "date", "type": {"type": "int", "logicalType": "date"}},
            {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}},
            {"name": "id", "type": "long"}]"#,
        r#"[{"name": "id", "kind": "dense", "dtype": "int64", "shape": []}]"#,
    ),
    (
        "missing_with_default",
        r#"[{"name": "x", "type": "double"},
            {"name": "w", "type": {"type": "array", "items": "float"}}]"#,
        r#"[{"name": "w", "kind": "dense", "dtype": "float32", "shape": [3]},
            {"name": "gone", "kind": "dense", "dtype": "int32", "shape": [2], "default": [7, -7]},
            {"name": "gone_s", "kind": "dense", "dtype": "string", "shape": [], "default": "absent"}]"#,
    ),
    (
        "everything",
        r#"[{"name": "x1", "type": {"type": "map", "values": {"type": "array", "items": "long"}}},
            {"name": "d", "type": {"type": "array", "items": {"type": "array", "items": "long"}}},
            {"name": "x2", "type": ["null", "string", {"type": "map", "values": "int"}]},
            {"name": "v", "type": ["null", {"type": "array", "items": {"type": "array", "items": "double"}}]},
            {"name": "s", "type": {"type": "record", "name": "S", "fields": [
                {"name": "indices1", "type": {"type": "array", "items": "int"}},
                {"name": "values", "type": {"type": "array", "items": "boolean"}},
                {"name": "indices0", "type": {"type": "array", "items": "long"}}]}},
            {"name": "x3", "type": {"type": "record", "name": "Inner", "fields": [
                {"name": "deep", "type": {"type": "array", "items": {"type": "map", "values": ["null", "Inner"]}}}]}}]"#,
        r#"[{"name": "v", "kind": "varlen", "dtype": "float64", "shape": [-1, -1]},
            {"name": "s", "kind": "sparse", "dtype": "bool", "shape": [3, 4]},
            {"name": "d", "kind": "dense", "dtype": "int64", "shape": [2, 2]}]"#,
    ),
    (
        "no_specs",
        r#"[{"name": "a", "type": {"type": "array", "items": {"type": "map", "values": "bytes"}}},
            {"name": "b", "type": ["null", {"type": "record", "name": "B", "fields": [{"name": "c", "type": "float"}]}]},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}]"#,
        r#"[]"#,
    ),
    (
        "empty_shapes",
        r#"[{"name": "z", "type": {"type": "array", "items": "long"}},
            {"name": "zz", "type": {"type": "array", "items": {"type": "array", "items": "float"}}},
            {"name": "v0", "type": {"type": "array", "items": {"type": "array", "items": "int"}}}]"#,
        r#"[{"name": "z", "kind": "dense", "dtype": "int64", "shape": [0]},
            {"name": "zz", "kind": "dense", "dtype": "float32", "shape": [2, 0]},
            {"name": "v0", "kind": "varlen", "dtype": "int32", "shape": [0, -1]}]"#,
    ),
];

/// The configurations, built once.
pub fn configs() -> &'static [Config] {
    static CONFIGS: OnceLock<Vec<Config>> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        TABLE
            .iter()
            .map(|(name, fields, specs)| {
                let fields = fields.replace("REF_SPARSE_F", SPARSE_F);
                let schema = format!(
                    r#"{{"type": "record", "name": "Row", "namespace": "fuzz", "fields": {fields}}}"#
                );
                let specs: Vec<FeatureSpec> = serde_json::from_str(specs)
                    .unwrap_or_else(|e| panic!("{name}: bad specs: {e}"));
                let canonical = schema_for_specs(&specs, "Canonical")
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                Config {
                    name,
                    schema,
                    canonical,
                    specs,
                }
            })
            .collect()
    })
}

/// A nested writer schema (records in arrays, a map, unions, an enum)
/// and key-expression specs of every kind over it: the general plan,
/// run by the target on the same bytes as the selected configuration.
pub fn keyexpr_config() -> &'static (String, Vec<FeatureSpec>) {
    static CONFIG: OnceLock<(String, Vec<FeatureSpec>)> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let schema = r#"{"type": "record", "name": "P", "fields": [
            {"name": "name", "type": {"type": "record", "name": "N", "fields": [
                {"name": "first", "type": "string"}]}},
            {"name": "h", "type": ["null", "float"]},
            {"name": "c", "type": {"type": "enum", "name": "C", "symbols": ["R", "G"]}},
            {"name": "fr", "type": {"type": "array", "items": {"type": "record", "name": "F",
                "fields": [{"name": "g", "type": "string"}, {"name": "x", "type": "long"},
                           {"name": "v", "type": ["null", {"type": "array", "items": "int"}]}]}}},
            {"name": "cars", "type": {"type": "map", "values": {"type": "record", "name": "Car",
                "fields": [{"name": "y", "type": "int"}]}}},
            {"name": "sp", "type": {"type": "array", "items": {"type": "record", "name": "E",
                "fields": [{"name": "i", "type": "long"}, {"name": "w", "type": "float"}]}}}]}"#;
        let specs = serde_json::from_str(
            r#"[{"name": "name.first", "kind": "dense", "dtype": "string", "shape": []},
                {"name": "h", "kind": "dense", "dtype": "float32", "shape": [], "default": 0.0,
                 "tf_class": "tf.io.FixedLenFeature"},
                {"name": "fr[*].x", "kind": "dense", "dtype": "int64", "shape": [-1],
                 "default": -1},
                {"name": "fr[g='m'].v[*]", "kind": "varlen", "dtype": "int32"},
                {"name": "fr[g=@name.first].x", "kind": "varlen", "dtype": "int64"},
                {"name": "fr[0].g", "kind": "dense", "dtype": "string", "shape": [],
                 "default": ""},
                {"name": "cars['k'].y", "kind": "dense", "dtype": "int32", "shape": []},
                {"name": "rg", "value_key": "fr[*].v[*]", "kind": "ragged", "dtype": "int32"},
                {"name": "sp[*].i", "kind": "fixed_len_sequence", "dtype": "int64",
                 "shape": [], "allow_missing": true},
                {"name": "sp", "kind": "sparse", "dtype": "float32", "index_key": "i",
                 "value_key": "w", "size": 16},
                {"name": "c", "kind": "dense", "dtype": "string", "shape": [],
                 "tf_class": "tf.io.FixedLenFeature"}]"#,
        )
        .expect("key-expression specs");
        (schema.to_string(), specs)
    })
}

/// Varlen features of the [`keyexpr_config`] schema's arrays of records
/// (`fr[*].g`, `fr[*].x`, `sp[*].i`, `sp[*].w`): each record's fields are
/// then read by the general plan's fast element loop (the others skipped),
/// which the target runs on the same bytes too.
pub fn keyexpr_fast_specs() -> &'static Vec<FeatureSpec> {
    static SPECS: OnceLock<Vec<FeatureSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        serde_json::from_str(
            r#"[{"name": "fr[*].g", "kind": "varlen", "dtype": "string"},
                {"name": "fr[*].x", "kind": "varlen", "dtype": "int64"},
                {"name": "sp[*].i", "kind": "varlen", "dtype": "int64"},
                {"name": "sp[*].w", "kind": "varlen", "dtype": "float32"}]"#,
        )
        .expect("fast key-expression specs")
    })
}

// ---------------------------------------------------------------------
// Valid datums
// ---------------------------------------------------------------------

/// A small deterministic generator (SplitMix64).
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

fn long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Named types of a schema, by name (short and full).
struct Named<'a>(HashMap<String, &'a Value>);

impl<'a> Named<'a> {
    fn collect(v: &'a Value, out: &mut HashMap<String, &'a Value>) {
        match v {
            Value::Array(items) => items.iter().for_each(|i| Self::collect(i, out)),
            Value::Object(m) => {
                if let (Some(Value::String(t)), Some(Value::String(n))) =
                    (m.get("type"), m.get("name"))
                    && matches!(t.as_str(), "record" | "enum" | "fixed")
                {
                    out.insert(n.clone(), v);
                }
                m.values().for_each(|i| Self::collect(i, out));
            }
            _ => {}
        }
    }

    fn resolve(&self, v: &'a Value) -> &'a Value {
        match v {
            Value::String(s) => match self.0.get(s.rsplit('.').next().unwrap_or(s)) {
                Some(def) => def,
                None => v,
            },
            Value::Object(m) => match m.get("type") {
                // {"type": {...}} wraps a type.
                Some(inner @ (Value::Object(_) | Value::Array(_))) => self.resolve(inner),
                Some(Value::String(s))
                    if !matches!(s.as_str(), "record" | "enum" | "fixed" | "array" | "map") =>
                {
                    // A primitive with attributes (logical types), or a reference.
                    self.resolve(&m["type"])
                }
                _ => v,
            },
            other => other,
        }
    }
}

/// Writes a random value of type `t`; `depth` bounds nesting.
fn any_value(named: &Named<'_>, t: &Value, rng: &mut Rng, depth: usize, out: &mut Vec<u8>) {
    let t = named.resolve(t);
    let deep = depth > 4;
    match t {
        Value::String(p) => match p.as_str() {
            "null" => {}
            "boolean" => out.push(rng.below(2) as u8),
            "int" => long(out, ((rng.next_u64() as i32) >> rng.below(32)) as i64),
            "long" => long(out, (rng.next_u64() as i64) >> rng.below(64)),
            "float" => out.extend_from_slice(&(rng.next_u64() as u32).to_le_bytes()),
            "double" => out.extend_from_slice(&rng.next_u64().to_le_bytes()),
            "bytes" | "string" => {
                let n = rng.below(6) as usize;
                long(out, n as i64);
                out.extend((0..n).map(|_| b'a' + rng.below(26) as u8));
            }
            other => panic!("unknown type {other}"),
        },
        Value::Array(branches) => {
            // Deep down, the first branch (null in recursive unions).
            let i = if deep {
                0
            } else {
                rng.below(branches.len() as u64) as usize
            };
            long(out, i as i64);
            any_value(named, &branches[i], rng, depth + 1, out);
        }
        Value::Object(m) => match m["type"].as_str().unwrap_or_default() {
            "record" => {
                for f in m["fields"].as_array().into_iter().flatten() {
                    any_value(named, &f["type"], rng, depth + 1, out);
                }
            }
            "enum" => {
                let n = m["symbols"].as_array().map_or(1, Vec::len) as u64;
                long(out, rng.below(n) as i64);
            }
            "fixed" => {
                let n = m["size"].as_u64().unwrap_or(0);
                out.extend((0..n).map(|_| rng.next_u64() as u8));
            }
            "array" | "map" => {
                let n = if deep { 0 } else { rng.below(4) };
                if n > 0 {
                    long(out, n as i64);
                    for i in 0..n {
                        if m["type"] == "map" {
                            long(out, 2);
                            out.extend_from_slice(format!("k{i}").as_bytes());
                            any_value(named, &m["values"], rng, depth + 1, out);
                        } else {
                            any_value(named, &m["items"], rng, depth + 1, out);
                        }
                    }
                }
                long(out, 0);
            }
            other => panic!("unknown type {other}"),
        },
        other => panic!("not a type: {other}"),
    }
}

/// Writes nested arrays of `levels` levels whose lengths `len` gives, of
/// random leaves of type `leaf`.
fn nested(
    named: &Named<'_>,
    t: &Value,
    levels: &[Option<usize>],
    rng: &mut Rng,
    out: &mut Vec<u8>,
) {
    let Some((dim, rest)) = levels.split_first() else {
        return any_value(named, t, rng, 5, out);
    };
    let items = &named.resolve(t)["items"];
    let n = dim.unwrap_or_else(|| rng.below(4) as usize);
    if n > 0 {
        long(out, n as i64);
        for _ in 0..n {
            nested(named, items, rest, rng, out);
        }
    }
    long(out, 0);
}

/// A value of a requested field that fits its spec.
fn feature_value(
    named: &Named<'_>,
    t: &Value,
    spec: &FeatureSpec,
    rng: &mut Rng,
    out: &mut Vec<u8>,
) {
    let t = named.resolve(t);
    if let Value::Array(branches) = t {
        // [null, T] or [T, null]: null where the spec allows it.
        let null = branches.iter().position(|b| b == "null").unwrap_or(0);
        let may_be_null = !matches!(spec, FeatureSpec::Dense(d) if d.default.is_none());
        if may_be_null && rng.below(3) == 0 {
            long(out, null as i64);
            return;
        }
        long(out, 1 - null as i64);
        return feature_value(named, &branches[1 - null], spec, rng, out);
    }
    match spec {
        FeatureSpec::Dense(d) => {
            let dims: Vec<Option<usize>> = d.shape.iter().map(|&x| Some(x as usize)).collect();
            nested(named, t, &dims, rng, out);
        }
        FeatureSpec::Varlen(v) => {
            let dims: Vec<Option<usize>> = v
                .shape
                .clone()
                .unwrap_or_default()
                .iter()
                .map(|&x| (x >= 0).then_some(x as usize))
                .collect();
            nested(named, t, &dims, rng, out);
        }
        FeatureSpec::Sparse(s) => {
            let shape = s.shape.clone().unwrap_or_default();
            let nnz = rng.below(4) as usize;
            for f in t["fields"].as_array().into_iter().flatten() {
                let name = f["name"].as_str().unwrap_or_default();
                let k = name
                    .strip_prefix("indices")
                    .and_then(|k| k.parse::<usize>().ok());
                match (k, name) {
                    (Some(k), _) if k < shape.len() => {
                        if nnz > 0 {
                            long(out, nnz as i64);
                            for _ in 0..nnz {
                                long(out, rng.below(shape[k].max(1) as u64) as i64);
                            }
                        }
                        long(out, 0);
                    }
                    (_, "values") => {
                        if nnz > 0 {
                            long(out, nnz as i64);
                            let items = &named.resolve(&f["type"])["items"];
                            for _ in 0..nnz {
                                any_value(named, items, rng, 5, out);
                            }
                        }
                        long(out, 0);
                    }
                    _ => any_value(named, &f["type"], rng, 1, out),
                }
            }
        }
        _ => any_value(named, t, rng, 1, out),
    }
}

/// `records` random datums of `schema` (a record) that decode with
/// `specs`, concatenated: a valid block.
pub fn valid_block(schema: &str, specs: &[FeatureSpec], records: usize, seed: u64) -> Vec<u8> {
    let json: Value = serde_json::from_str(schema).expect("schema JSON");
    let mut map = HashMap::new();
    Named::collect(&json, &mut map);
    let named = Named(map);
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for _ in 0..records {
        for f in json["fields"].as_array().into_iter().flatten() {
            let name = f["name"].as_str().unwrap_or_default();
            match specs.iter().find(|s| s.name() == name) {
                Some(spec) => feature_value(&named, &f["type"], spec, &mut rng, &mut out),
                None => any_value(&named, &f["type"], &mut rng, 1, &mut out),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use grist_avro_tensor::AvroDecoder;

    /// The key-expression configuration compiles against its schema; a
    /// record of zeros (strings, arrays and maps empty, unions null)
    /// fails at `fr[0]`, an index out of range even with a default.
    #[test]
    fn keyexpr_config_compiles() {
        let (schema, specs) = super::keyexpr_config();
        let mut d = AvroDecoder::new(specs).unwrap();
        let file: Arc<str> = "t".into();
        d.add_schema(file.clone(), schema).unwrap();
        let mut out = d.new_batch(1);
        let err = d
            .decode_block(&file, 0, 0, &[0; 8], 1, 0..1, &mut out)
            .unwrap_err();
        assert!(err.to_string().contains("fr[0].g"), "{err}");
    }

    /// The fast specs read a record of the same schema.
    #[test]
    fn keyexpr_fast_specs_read_a_record() {
        let (schema, _) = super::keyexpr_config();
        let mut d = AvroDecoder::new(super::keyexpr_fast_specs()).unwrap();
        let file: Arc<str> = "t".into();
        d.add_schema(file.clone(), schema).unwrap();
        // name.first "", h null, c R, fr [{g "m", x 5, v null}], cars {},
        // sp [{i 3, w 1.5}].
        let mut datum = vec![0, 0, 0, 2, 2, b'm', 10, 0, 0, 0, 2, 6];
        datum.extend_from_slice(&1.5f32.to_le_bytes());
        datum.push(0);
        let mut out = d.new_batch(1);
        d.decode_block(&file, 0, 0, &datum, 1, 0..1, &mut out)
            .unwrap();
        let json = grist_tensor::json::batch_to_json(&d.finish(&mut out).unwrap());
        let values = |name: &str| json["outputs"][name]["values"].clone();
        assert_eq!(values("fr[*].x"), serde_json::json!([5]), "{json}");
        assert_eq!(values("sp[*].i"), serde_json::json!([3]), "{json}");
        assert_eq!(values("sp[*].w"), serde_json::json!([1.5]), "{json}");
    }
}
