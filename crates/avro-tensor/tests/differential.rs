//! Differential property test against apache-avro.
//!
//! Each case draws a random writer schema within what the ATDS decoder
//! supports (requested fields of primitives, enums, fixed and logical
//! types, nested arrays up to rank 3, sparse records of `indices0..` and
//! `values`, nullable unions in both orders) plus unrequested fields of any
//! type (maps, nested and recursive records, unions of several types,
//! arrays of records, enums, fixed, empty records), random specs over it
//! (dense with matching shapes and defaults, varlen with `-1` dimensions,
//! sparse, missing fields with defaults, Avro promotions) and random
//! records. The records are written twice:
//!
//! - file A by apache-avro's `Writer` (a random codec and block size);
//! - file B by grist's `ContainerWriter` (a random codec and sync
//!   interval) from datums this test encodes itself, splitting arrays and
//!   maps into random blocks, some with negative counts and byte sizes
//!   (apache-avro never writes those). apache-avro must read file B back
//!   to the same records.
//!
//! grist decodes both files in one pass, in batches of a random size that
//! span blocks and files. The expected tensors come from apache-avro's
//! generic `Reader` values, turned into tensors by the straightforward
//! implementation of the ATDS semantics in this file (`expect_*`), and
//! are compared exactly (floats by their bits).
//!
//! The error cases inject one bad value into one record (a null without a
//! default, a dense or fixed varlen array of the wrong length, a sparse
//! index array of the wrong length or an index out of range): grist must
//! fail at that record of that file, naming the feature and the problem
//! the reference finds, after the batches before it.
//!
//! A failing case prints its seed; `GRIST_DIFF_SEED=<seed>` reruns only
//! that case, `GRIST_DIFF_CASES=<n>` changes the number of cases.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::types::Value as AV;
use grist_avro_tensor::{
    AvroDecoder, BlockReader, Codec, ContainerWriter, Error, FeatureProblem, ReaderOptions,
    WriterOptions,
};
use grist_tensor::json::{bytes_to_json, float_to_json, tensor_to_json};
use grist_tensor::{Batch, DType, FeatureSpec, Tensor, Values};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value as J, json};

// ---------------------------------------------------------------------
// The writer schema model
// ---------------------------------------------------------------------

/// A writer type as the test builds it.
#[derive(Clone, Debug)]
enum Ty {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    /// `{"type": "int", "logicalType": "date"}`.
    Date,
    /// `{"type": "long", "logicalType": "timestamp-millis"}`.
    Timestamp,
    Enum {
        name: String,
        symbols: Vec<String>,
    },
    Fixed {
        name: String,
        size: usize,
    },
    Record {
        name: String,
        fields: Vec<(String, Ty)>,
    },
    Array(Box<Ty>),
    Map(Box<Ty>),
    Union(Vec<Ty>),
    /// A named type defined earlier in the schema text (or the record
    /// being defined, for recursion).
    Ref(String),
}

/// The named types defined so far, in definition order.
#[derive(Default)]
struct Names {
    defs: HashMap<String, Ty>,
    order: Vec<String>,
    next: usize,
}

impl Names {
    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    fn define(&mut self, ty: &Ty) {
        let name = match ty {
            Ty::Enum { name, .. } | Ty::Fixed { name, .. } | Ty::Record { name, .. } => name,
            _ => return,
        };
        self.defs.insert(name.clone(), ty.clone());
        self.order.push(name.clone());
    }

    fn resolve<'a>(&'a self, ty: &'a Ty) -> &'a Ty {
        match ty {
            Ty::Ref(name) => &self.defs[name],
            other => other,
        }
    }
}

fn schema_json(ty: &Ty) -> J {
    match ty {
        Ty::Null => json!("null"),
        Ty::Boolean => json!("boolean"),
        Ty::Int => json!("int"),
        Ty::Long => json!("long"),
        Ty::Float => json!("float"),
        Ty::Double => json!("double"),
        Ty::Bytes => json!("bytes"),
        Ty::String => json!("string"),
        Ty::Date => json!({"type": "int", "logicalType": "date"}),
        Ty::Timestamp => json!({"type": "long", "logicalType": "timestamp-millis"}),
        Ty::Enum { name, symbols } => json!({"type": "enum", "name": name, "symbols": symbols}),
        Ty::Fixed { name, size } => json!({"type": "fixed", "name": name, "size": size}),
        Ty::Record { name, fields } => json!({
            "type": "record",
            "name": name,
            "fields": fields
                .iter()
                .map(|(n, t)| json!({"name": n, "type": schema_json(t)}))
                .collect::<Vec<_>>(),
        }),
        Ty::Array(items) => json!({"type": "array", "items": schema_json(items)}),
        Ty::Map(values) => json!({"type": "map", "values": schema_json(values)}),
        Ty::Union(branches) => J::Array(branches.iter().map(schema_json).collect()),
        Ty::Ref(name) => json!(name),
    }
}

/// A leaf type of a requested field.
#[derive(Clone, Debug)]
enum Leaf {
    Int,
    Long,
    Float,
    Double,
    Boolean,
    String,
    Bytes,
    Date,
    Timestamp,
    Enum(Vec<String>),
    Fixed(usize),
}

impl Leaf {
    /// The dtypes the leaf can be read as (ATDS plus Avro's promotions).
    fn dtypes(&self) -> &'static [DType] {
        match self {
            Leaf::Int | Leaf::Date => &[DType::Int32, DType::Int64, DType::Float32, DType::Float64],
            Leaf::Long | Leaf::Timestamp => &[DType::Int64, DType::Float32, DType::Float64],
            Leaf::Float => &[DType::Float32, DType::Float64],
            Leaf::Double => &[DType::Float64],
            Leaf::Boolean => &[DType::Bool],
            Leaf::String | Leaf::Bytes | Leaf::Enum(_) | Leaf::Fixed(_) => &[DType::String],
        }
    }
}

fn nest(ty: Ty, levels: usize) -> Ty {
    (0..levels).fold(ty, |t, _| Ty::Array(Box::new(t)))
}

// ---------------------------------------------------------------------
// Random generation
// ---------------------------------------------------------------------

/// What one requested feature looks like.
#[derive(Clone, Debug)]
enum Kind {
    Dense {
        dims: Vec<usize>,
        /// The default's JSON.
        default: Option<J>,
    },
    Varlen {
        dims: Vec<Option<usize>>,
    },
    Sparse {
        shape: Vec<usize>,
        /// The record's fields in writer order.
        fields: Vec<SparseField>,
    },
}

#[derive(Clone, Debug)]
enum SparseField {
    Index { k: usize, long: bool },
    Values,
    Extra(String, Ty),
}

#[derive(Clone, Debug)]
struct Feature {
    name: String,
    leaf: Leaf,
    /// The leaf's writer type (a definition or a reference).
    leaf_ty: Ty,
    dtype: DType,
    kind: Kind,
    /// `Some(true)` for `[null, T]`, `Some(false)` for `[T, null]`.
    null_first: Option<bool>,
    /// False: the writer schema lacks the field (dense with a default).
    present: bool,
}

impl Feature {
    fn spec(&self) -> FeatureSpec {
        let dtype = self.dtype.name();
        let j = match &self.kind {
            Kind::Dense { dims, default } => {
                let mut j =
                    json!({"name": self.name, "kind": "dense", "dtype": dtype, "shape": dims});
                if let Some(d) = default {
                    j["default"] = d.clone();
                }
                j
            }
            Kind::Varlen { dims } => {
                let shape: Vec<i64> = dims.iter().map(|d| d.map_or(-1, |d| d as i64)).collect();
                json!({"name": self.name, "kind": "varlen", "dtype": dtype, "shape": shape})
            }
            Kind::Sparse { shape, .. } => {
                json!({"name": self.name, "kind": "sparse", "dtype": dtype, "shape": shape})
            }
        };
        serde_json::from_value(j).expect("a valid spec")
    }

    /// The writer type of the field.
    fn ty(&self) -> Ty {
        let inner = match &self.kind {
            Kind::Dense { dims, .. } => nest(self.leaf_ty.clone(), dims.len()),
            Kind::Varlen { dims } => nest(self.leaf_ty.clone(), dims.len()),
            Kind::Sparse { fields, .. } => Ty::Record {
                name: format!("{}_sparse", self.name),
                fields: fields
                    .iter()
                    .map(|f| match f {
                        SparseField::Index { k, long } => (
                            format!("indices{k}"),
                            Ty::Array(Box::new(if *long { Ty::Long } else { Ty::Int })),
                        ),
                        SparseField::Values => (
                            "values".to_string(),
                            Ty::Array(Box::new(self.leaf_ty.clone())),
                        ),
                        SparseField::Extra(n, t) => (n.clone(), t.clone()),
                    })
                    .collect(),
            },
        };
        match self.null_first {
            Some(true) => Ty::Union(vec![Ty::Null, inner]),
            Some(false) => Ty::Union(vec![inner, Ty::Null]),
            None => inner,
        }
    }
}

/// A random scalar of `dtype` (pushed to `out`) and its JSON, for a
/// default.
fn random_scalar(rng: &mut StdRng, dtype: DType, out: &mut Values) -> J {
    match (dtype, out) {
        (DType::Bool, Values::Bool(v)) => {
            let b = rng.random_bool(0.5);
            v.push(b);
            json!(b)
        }
        (DType::Int32, Values::Int32(v)) => {
            let x = random_int(rng);
            v.push(x);
            json!(x)
        }
        (DType::Int64, Values::Int64(v)) => {
            let x = random_long(rng);
            v.push(x);
            json!(x)
        }
        (DType::Float32, Values::Float32(v)) => {
            let x = random_float(rng);
            v.push(x);
            float_to_json(x as f64)
        }
        (DType::Float64, Values::Float64(v)) => {
            let x = random_double(rng);
            v.push(x);
            float_to_json(x)
        }
        (DType::String, Values::String(v)) => {
            let b = if rng.random_bool(0.5) {
                random_string(rng).into_bytes()
            } else {
                random_bytes(rng, 5)
            };
            v.push(&b);
            bytes_to_json(&b)
        }
        (d, o) => unreachable!("{d} into {:?}", o.dtype()),
    }
}

fn random_int(rng: &mut StdRng) -> i32 {
    match rng.random_range(0..4) {
        0 => *[0, 1, -1, 63, 64, -65, i32::MIN, i32::MAX]
            .get(rng.random_range(0..8))
            .unwrap_or(&0),
        1 => rng.random(),
        _ => rng.random_range(-1000..1000),
    }
}

fn random_long(rng: &mut StdRng) -> i64 {
    match rng.random_range(0..4) {
        0 => *[
            0,
            1,
            -1,
            i64::MIN,
            i64::MAX,
            1 << 53,
            (1 << 53) + 1,
            -(1 << 40),
        ]
        .get(rng.random_range(0..8))
        .unwrap_or(&0),
        1 => rng.random(),
        _ => rng.random_range(-100_000..100_000),
    }
}

fn random_float(rng: &mut StdRng) -> f32 {
    match rng.random_range(0..5) {
        0 => *[
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MIN_POSITIVE / 8.0,
            f32::MAX,
            f32::MIN,
        ]
        .get(rng.random_range(0..9))
        .unwrap_or(&0.0),
        1 => f32::from_bits(rng.random()),
        _ => rng.random_range(-100.0..100.0),
    }
}

fn random_double(rng: &mut StdRng) -> f64 {
    match rng.random_range(0..5) {
        0 => *[
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            5e-324,
            f64::MAX,
            f64::MIN,
        ]
        .get(rng.random_range(0..9))
        .unwrap_or(&0.0),
        1 => f64::from_bits(rng.random()),
        _ => rng.random_range(-1e6..1e6),
    }
}

fn random_string(rng: &mut StdRng) -> String {
    const CHARS: [char; 10] = ['a', 'z', ' ', '0', 'é', 'ζ', '😀', '\0', '"', '\\'];
    let n = rng.random_range(0..6);
    (0..n)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())])
        .collect()
}

fn random_bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let n = rng.random_range(0..=max);
    (0..n).map(|_| rng.random()).collect()
}

fn random_symbols(rng: &mut StdRng) -> Vec<String> {
    let n = rng.random_range(1..=4);
    (0..n)
        .map(|i| format!("S{i}_{}", rng.random_range(0..99)))
        .collect()
}

/// A random requested leaf type: new or reused enums and fixed (of size
/// 0 only for scalars: grist refuses arrays of fixed(0)).
fn random_leaf(rng: &mut StdRng, names: &mut Names, scalar: bool) -> (Leaf, Ty) {
    let fixed_ok = |size: usize| scalar || size > 0;
    match rng.random_range(0..12) {
        0 => (Leaf::Int, Ty::Int),
        1 => (Leaf::Long, Ty::Long),
        2 => (Leaf::Float, Ty::Float),
        3 => (Leaf::Double, Ty::Double),
        4 => (Leaf::Boolean, Ty::Boolean),
        5 => (Leaf::String, Ty::String),
        6 => (Leaf::Bytes, Ty::Bytes),
        7 => (Leaf::Date, Ty::Date),
        8 => (Leaf::Timestamp, Ty::Timestamp),
        k => {
            // Reuse an enum or fixed defined earlier, by name, half the time.
            let earlier: Vec<String> = names
                .order
                .iter()
                .filter(|n| match &names.defs[*n] {
                    Ty::Enum { .. } => true,
                    Ty::Fixed { size, .. } => fixed_ok(*size),
                    _ => false,
                })
                .cloned()
                .collect();
            if !earlier.is_empty() && rng.random_bool(0.5) {
                let name = earlier[rng.random_range(0..earlier.len())].clone();
                let leaf = match &names.defs[&name] {
                    Ty::Enum { symbols, .. } => Leaf::Enum(symbols.clone()),
                    Ty::Fixed { size, .. } => Leaf::Fixed(*size),
                    _ => unreachable!(),
                };
                return (leaf, Ty::Ref(name));
            }
            let ty = if k == 9 {
                Ty::Enum {
                    name: names.fresh("E"),
                    symbols: random_symbols(rng),
                }
            } else {
                Ty::Fixed {
                    name: names.fresh("F"),
                    size: rng.random_range(if fixed_ok(0) { 0 } else { 1 }..=5),
                }
            };
            names.define(&ty);
            let leaf = match &ty {
                Ty::Enum { symbols, .. } => Leaf::Enum(symbols.clone()),
                Ty::Fixed { size, .. } => Leaf::Fixed(*size),
                _ => unreachable!(),
            };
            (leaf, ty)
        }
    }
}

/// A random unrequested type of any kind, `depth` levels from the top.
fn random_ty(rng: &mut StdRng, names: &mut Names, depth: usize) -> Ty {
    let simple = depth >= 3;
    match rng.random_range(0..if simple { 10 } else { 19 }) {
        0 => Ty::Null,
        1 => Ty::Boolean,
        2 => Ty::Int,
        3 => Ty::Long,
        4 => Ty::Float,
        5 => Ty::Double,
        6 => Ty::Bytes,
        7 => Ty::String,
        8 => Ty::Date,
        9 => Ty::Timestamp,
        10 => {
            let ty = Ty::Enum {
                name: names.fresh("E"),
                symbols: random_symbols(rng),
            };
            names.define(&ty);
            ty
        }
        11 => {
            let ty = Ty::Fixed {
                name: names.fresh("F"),
                size: rng.random_range(0..=5),
            };
            names.define(&ty);
            ty
        }
        12 => Ty::Array(Box::new(random_ty(rng, names, depth + 1))),
        13 => Ty::Map(Box::new(random_ty(rng, names, depth + 1))),
        14 => {
            // A record, possibly empty.
            let name = names.fresh("R");
            let n = rng.random_range(0..=3);
            let fields = (0..n)
                .map(|i| (format!("a{i}"), random_ty(rng, names, depth + 1)))
                .collect();
            let ty = Ty::Record { name, fields };
            names.define(&ty);
            ty
        }
        15 => {
            // A union of several distinct kinds.
            let mut kinds: Vec<usize> = (0..11).collect();
            kinds.shuffle(rng);
            let n = rng.random_range(2..=4);
            let branches = kinds[..n]
                .iter()
                .map(|k| match k {
                    0 => Ty::Null,
                    1 => Ty::Boolean,
                    2 => Ty::Int,
                    3 => Ty::Long,
                    4 => Ty::Float,
                    5 => Ty::Double,
                    6 => Ty::Bytes,
                    7 => Ty::String,
                    8 => Ty::Array(Box::new(random_ty(rng, names, depth + 1))),
                    9 => Ty::Map(Box::new(random_ty(rng, names, depth + 1))),
                    _ => {
                        let name = names.fresh("U");
                        let fields = vec![("u".to_string(), random_ty(rng, names, depth + 1))];
                        let ty = Ty::Record { name, fields };
                        names.define(&ty);
                        ty
                    }
                })
                .collect();
            Ty::Union(branches)
        }
        16 => {
            // A recursive linked list.
            let name = names.fresh("L");
            let ty = Ty::Record {
                name: name.clone(),
                fields: vec![
                    ("v".into(), Ty::Int),
                    (
                        "next".into(),
                        Ty::Union(vec![Ty::Null, Ty::Ref(name.clone())]),
                    ),
                ],
            };
            names.define(&ty);
            ty
        }
        17 => {
            // An array of empty records: items of no bytes.
            let ty = Ty::Record {
                name: names.fresh("Z"),
                fields: Vec::new(),
            };
            names.define(&ty);
            Ty::Array(Box::new(ty))
        }
        _ => {
            // A named type defined earlier, by reference.
            match names.order.len() {
                0 => Ty::Long,
                n => {
                    let name = names.order[rng.random_range(0..n)].clone();
                    // A record still being defined is only referenced
                    // through a union with null (it may be recursive).
                    Ty::Union(vec![Ty::Null, Ty::Ref(name)])
                }
            }
        }
    }
}

/// A random value of `ty`.
fn random_value(rng: &mut StdRng, names: &Names, ty: &Ty, depth: usize) -> AV {
    let deep = depth > 5;
    match names.resolve(ty) {
        Ty::Null => AV::Null,
        Ty::Boolean => AV::Boolean(rng.random_bool(0.5)),
        Ty::Int => AV::Int(random_int(rng)),
        Ty::Long => AV::Long(random_long(rng)),
        Ty::Float => AV::Float(random_float(rng)),
        Ty::Double => AV::Double(random_double(rng)),
        Ty::Bytes => AV::Bytes(random_bytes(rng, 6)),
        Ty::String => AV::String(random_string(rng)),
        Ty::Date => AV::Date(random_int(rng)),
        Ty::Timestamp => AV::TimestampMillis(random_long(rng)),
        Ty::Enum { symbols, .. } => {
            let i = rng.random_range(0..symbols.len());
            AV::Enum(i as u32, symbols[i].clone())
        }
        Ty::Fixed { size, .. } => AV::Fixed(*size, (0..*size).map(|_| rng.random()).collect()),
        Ty::Record { fields, .. } => AV::Record(
            fields
                .iter()
                .map(|(n, t)| (n.clone(), random_value(rng, names, t, depth + 1)))
                .collect(),
        ),
        Ty::Array(items) => {
            let n = if deep { 0 } else { rng.random_range(0..4) };
            AV::Array(
                (0..n)
                    .map(|_| random_value(rng, names, items, depth + 1))
                    .collect(),
            )
        }
        Ty::Map(values) => {
            let n = if deep { 0 } else { rng.random_range(0..4) };
            AV::Map(
                (0..n)
                    .map(|i| {
                        (
                            format!("k{i}{}", random_string(rng)),
                            random_value(rng, names, values, depth + 1),
                        )
                    })
                    .collect(),
            )
        }
        Ty::Union(branches) => {
            // Deep down, the first branch (null in recursive unions).
            let i = if deep {
                0
            } else {
                rng.random_range(0..branches.len())
            };
            AV::Union(
                i as u32,
                Box::new(random_value(rng, names, &branches[i], depth + 1)),
            )
        }
        Ty::Ref(_) => unreachable!("resolved"),
    }
}

fn random_leaf_value(rng: &mut StdRng, leaf: &Leaf) -> AV {
    match leaf {
        Leaf::Int => AV::Int(random_int(rng)),
        Leaf::Long => AV::Long(random_long(rng)),
        Leaf::Float => AV::Float(random_float(rng)),
        Leaf::Double => AV::Double(random_double(rng)),
        Leaf::Boolean => AV::Boolean(rng.random_bool(0.5)),
        Leaf::String => AV::String(random_string(rng)),
        Leaf::Bytes => AV::Bytes(random_bytes(rng, 6)),
        Leaf::Date => AV::Date(random_int(rng)),
        Leaf::Timestamp => AV::TimestampMillis(random_long(rng)),
        Leaf::Enum(symbols) => {
            let i = rng.random_range(0..symbols.len());
            AV::Enum(i as u32, symbols[i].clone())
        }
        Leaf::Fixed(size) => AV::Fixed(*size, (0..*size).map(|_| rng.random()).collect()),
    }
}

/// Nested arrays of leaves, each level's length from `len(level)`.
fn random_nested(
    rng: &mut StdRng,
    leaf: &Leaf,
    levels: usize,
    len: &mut dyn FnMut(&mut StdRng, usize) -> usize,
    level: usize,
) -> AV {
    if level == levels {
        return random_leaf_value(rng, leaf);
    }
    let n = len(rng, level);
    AV::Array(
        (0..n)
            .map(|_| random_nested(rng, leaf, levels, len, level + 1))
            .collect(),
    )
}

/// A valid value of a requested feature (null only where that is fine).
fn random_feature_value(rng: &mut StdRng, names: &Names, f: &Feature) -> AV {
    let may_be_null = match &f.kind {
        Kind::Dense { default, .. } => default.is_some(),
        _ => true,
    };
    if let Some(null_first) = f.null_first {
        let null_index = if null_first { 0 } else { 1 };
        if may_be_null && rng.random_bool(0.3) {
            return AV::Union(null_index, Box::new(AV::Null));
        }
        let inner = random_feature_inner(rng, names, f);
        return AV::Union(1 - null_index, Box::new(inner));
    }
    random_feature_inner(rng, names, f)
}

fn random_feature_inner(rng: &mut StdRng, names: &Names, f: &Feature) -> AV {
    match &f.kind {
        Kind::Dense { dims, .. } => random_nested(
            rng,
            &f.leaf,
            dims.len(),
            &mut |_: &mut StdRng, l: usize| dims[l],
            0,
        ),
        Kind::Varlen { dims } => random_nested(
            rng,
            &f.leaf,
            dims.len(),
            &mut |rng: &mut StdRng, l: usize| dims[l].unwrap_or_else(|| rng.random_range(0..4)),
            0,
        ),
        Kind::Sparse { shape, fields } => {
            let nnz = rng.random_range(0..5);
            let indices: Vec<Vec<i64>> = shape
                .iter()
                .map(|&s| (0..nnz).map(|_| rng.random_range(0..s as i64)).collect())
                .collect();
            AV::Record(
                fields
                    .iter()
                    .map(|field| match field {
                        SparseField::Index { k, long } => (
                            format!("indices{k}"),
                            AV::Array(
                                indices[*k]
                                    .iter()
                                    .map(|&i| {
                                        if *long {
                                            AV::Long(i)
                                        } else {
                                            AV::Int(i as i32)
                                        }
                                    })
                                    .collect(),
                            ),
                        ),
                        SparseField::Values => (
                            "values".to_string(),
                            AV::Array((0..nnz).map(|_| random_leaf_value(rng, &f.leaf)).collect()),
                        ),
                        SparseField::Extra(n, t) => (n.clone(), random_value(rng, names, t, 2)),
                    })
                    .collect(),
            )
        }
    }
}

/// One random requested feature.
fn random_feature(rng: &mut StdRng, names: &mut Names, name: String) -> Feature {
    let which = rng.random_range(0..3);
    let dims: Vec<usize> = (0..rng.random_range(0..=3))
        .map(|_| rng.random_range(0..=3))
        .collect();
    let (leaf, leaf_ty) = random_leaf(rng, names, which == 0 && dims.is_empty());
    let dtypes = leaf.dtypes();
    let dtype = dtypes[rng.random_range(0..dtypes.len())];
    let kind = match which {
        0 => {
            let default = rng.random_bool(0.5).then(|| {
                let n: usize = dims.iter().product();
                let mut scratch = Values::new(dtype);
                if rng.random_bool(0.5) || n == 0 {
                    // A scalar, repeated over the shape.
                    random_scalar(rng, dtype, &mut scratch)
                } else {
                    // A flat row-major list.
                    J::Array(
                        (0..n)
                            .map(|_| random_scalar(rng, dtype, &mut scratch))
                            .collect(),
                    )
                }
            });
            Kind::Dense { dims, default }
        }
        1 => Kind::Varlen {
            dims: (0..rng.random_range(1..=3))
                .map(|_| (!rng.random_bool(0.7)).then(|| rng.random_range(0..=3)))
                .collect(),
        },
        _ => {
            let shape: Vec<usize> = (0..rng.random_range(1..=3))
                .map(|_| rng.random_range(1..=6))
                .collect();
            let mut fields: Vec<SparseField> = (0..shape.len())
                .map(|k| SparseField::Index {
                    k,
                    long: rng.random_bool(0.5),
                })
                .collect();
            fields.push(SparseField::Values);
            fields.shuffle(rng);
            // Unrequested fields go last: they may refer to a named type
            // the values' items define.
            for i in 0..rng.random_range(0..=1) {
                let ty = random_ty(rng, names, 2);
                fields.push(SparseField::Extra(format!("s{i}"), ty));
            }
            Kind::Sparse { shape, fields }
        }
    };
    let null_first = match rng.random_range(0..6) {
        0 => Some(true),
        1 => Some(false),
        _ => None,
    };
    let present = !(matches!(
        &kind,
        Kind::Dense {
            default: Some(_),
            ..
        }
    ) && rng.random_bool(0.15));
    Feature {
        name,
        leaf,
        leaf_ty,
        dtype,
        kind,
        null_first: null_first.filter(|_| present),
        present,
    }
}

/// A random case: the features, the writer schema's fields and the
/// registry of named types.
struct Case {
    features: Vec<Feature>,
    /// The writer fields: a feature index or an unrequested type.
    fields: Vec<(String, Result<usize, Ty>)>,
    names: Names,
    schema: String,
}

fn random_case(rng: &mut StdRng) -> Case {
    let mut names = Names::default();
    let n_features = rng.random_range(0..=5);
    let n_extra = rng.random_range(0..=4);
    // The field order first, so that types are generated (and named types
    // defined) in the order the schema text lists them.
    let mut slots: Vec<Option<usize>> = (0..n_features)
        .map(Some)
        .chain((0..n_extra).map(|_| None))
        .collect();
    slots.shuffle(rng);
    let mut features: Vec<Option<Feature>> = vec![None; n_features];
    let mut fields = Vec::new();
    let mut extra = 0;
    for slot in slots {
        match slot {
            Some(i) => {
                let defined = names.order.len();
                let f = random_feature(rng, &mut names, format!("f{i}"));
                if !f.present {
                    // The named types of a field the schema lacks are not
                    // defined in its text.
                    for name in names.order.drain(defined..) {
                        names.defs.remove(&name);
                    }
                }
                // The sparse record is a named type too.
                if f.present {
                    if let Ty::Record { .. } = &f.ty() {
                        names.define(&f.ty());
                    }
                    fields.push((f.name.clone(), Ok(i)));
                }
                features[i] = Some(f);
            }
            None => {
                let ty = random_ty(rng, &mut names, 0);
                fields.push((format!("x{extra}"), Err(ty)));
                extra += 1;
            }
        }
    }
    let mut case = Case {
        features: features.into_iter().map(Option::unwrap).collect(),
        fields,
        names,
        schema: String::new(),
    };
    case.write_schema();
    case
}

impl Case {
    /// Sets `schema` to the writer schema's text.
    fn write_schema(&mut self) {
        self.schema = json!({
            "type": "record",
            "name": "Row",
            "namespace": "grist.diff",
            "fields": self
                .fields
                .iter()
                .map(|(n, t)| {
                    let ty = match t {
                        Ok(i) => self.features[*i].ty(),
                        Err(ty) => ty.clone(),
                    };
                    json!({"name": n, "type": schema_json(&ty)})
                })
                .collect::<Vec<_>>(),
        })
        .to_string();
    }
}

fn random_row(rng: &mut StdRng, case: &Case) -> AV {
    AV::Record(
        case.fields
            .iter()
            .map(|(n, t)| {
                let v = match t {
                    Ok(i) => random_feature_value(rng, &case.names, &case.features[*i]),
                    Err(ty) => random_value(rng, &case.names, ty, 1),
                };
                (n.clone(), v)
            })
            .collect(),
    )
}

// ---------------------------------------------------------------------
// Error injection
// ---------------------------------------------------------------------

/// Makes one value of `row` break its feature's spec, if the feature can
/// be broken; returns whether it did.
fn inject(rng: &mut StdRng, case: &Case, row: &mut AV, feature: usize) -> bool {
    let f = &case.features[feature];
    let AV::Record(fields) = row else {
        unreachable!()
    };
    let Some((_, v)) = fields.iter_mut().find(|(n, _)| *n == f.name) else {
        return false;
    };
    let null_index: u32 = if f.null_first == Some(true) { 0 } else { 1 };
    if matches!(v, AV::Union(..))
        && matches!(&f.kind, Kind::Dense { default: None, .. })
        && rng.random_bool(0.7)
    {
        // A null without a default.
        *v = AV::Union(null_index, Box::new(AV::Null));
        return true;
    }
    let inner = match v {
        AV::Union(i, inner) => {
            if **inner == AV::Null {
                *i = 1 - null_index;
                **inner = random_feature_inner(rng, &case.names, f);
            }
            &mut **inner
        }
        other => other,
    };
    match &f.kind {
        Kind::Dense { dims, .. } if !dims.is_empty() => {
            change_length(rng, inner, &f.leaf, dims.len(), &|l| Some(dims[l]))
        }
        Kind::Varlen { dims } if dims.iter().any(Option::is_some) => {
            change_length(rng, inner, &f.leaf, dims.len(), &|l| dims[l])
        }
        Kind::Sparse { shape, fields } => {
            let AV::Record(parts) = inner else {
                unreachable!()
            };
            let k = rng.random_range(0..shape.len());
            let long = fields
                .iter()
                .any(|f| matches!(f, SparseField::Index { k: i, long: true } if *i == k));
            let key = format!("indices{k}");
            let (_, AV::Array(ids)) = parts.iter_mut().find(|(n, _)| *n == key).unwrap() else {
                unreachable!()
            };
            let bad = if rng.random_bool(0.5) || ids.is_empty() {
                // One more index than values.
                rng.random_range(0..shape[k] as i64)
            } else {
                // An index out of range (replacing one).
                let at = rng.random_range(0..ids.len());
                ids.remove(at);
                if rng.random_bool(0.5) {
                    -1
                } else {
                    shape[k] as i64
                }
            };
            let value = if long {
                AV::Long(bad)
            } else {
                AV::Int(bad as i32)
            };
            let at = rng.random_range(0..=ids.len());
            ids.insert(at, value);
            true
        }
        _ => false,
    }
}

/// Changes the length of one array at a level with a fixed size.
fn change_length(
    rng: &mut StdRng,
    v: &mut AV,
    leaf: &Leaf,
    levels: usize,
    dim: &dyn Fn(usize) -> Option<usize>,
) -> bool {
    let fixed: Vec<usize> = (0..levels).filter(|&l| dim(l).is_some()).collect();
    let level = fixed[rng.random_range(0..fixed.len())];
    // Walk down to an array at `level` (through non-empty arrays).
    let mut at = v;
    for _ in 0..level {
        let AV::Array(items) = at else { unreachable!() };
        if items.is_empty() {
            return false;
        }
        let i = rng.random_range(0..items.len());
        at = &mut items[i];
    }
    let AV::Array(items) = at else { unreachable!() };
    if !items.is_empty() && rng.random_bool(0.5) {
        items.pop();
    } else {
        let mut len = |rng: &mut StdRng, l: usize| dim(l).unwrap_or_else(|| rng.random_range(0..3));
        items.push(random_nested(rng, leaf, levels, &mut len, level + 1));
    }
    true
}

// ---------------------------------------------------------------------
// The reference: ATDS semantics over apache-avro values
// ---------------------------------------------------------------------

/// An error the reference finds: the row (within the rows given), the
/// feature and the problem.
#[derive(Clone, Debug, PartialEq)]
struct Expected {
    row: usize,
    feature: String,
    problem: FeatureProblem,
}

/// One column being built.
enum Col {
    Dense(Values),
    Sparse {
        indices: Vec<i64>,
        values: Values,
        shape: Vec<i64>,
    },
}

fn leaf_into(v: &AV, out: &mut Values) {
    match (v, out) {
        (AV::Int(i) | AV::Date(i), Values::Int32(o)) => o.push(*i),
        (AV::Int(i) | AV::Date(i), Values::Int64(o)) => o.push(*i as i64),
        (AV::Int(i) | AV::Date(i), Values::Float32(o)) => o.push(*i as f32),
        (AV::Int(i) | AV::Date(i), Values::Float64(o)) => o.push(*i as f64),
        (AV::Long(l) | AV::TimestampMillis(l), Values::Int64(o)) => o.push(*l),
        (AV::Long(l) | AV::TimestampMillis(l), Values::Float32(o)) => o.push(*l as f32),
        (AV::Long(l) | AV::TimestampMillis(l), Values::Float64(o)) => o.push(*l as f64),
        (AV::Float(x), Values::Float32(o)) => o.push(*x),
        (AV::Float(x), Values::Float64(o)) => o.push(*x as f64),
        (AV::Double(x), Values::Float64(o)) => o.push(*x),
        (AV::Boolean(b), Values::Bool(o)) => o.push(*b),
        (AV::String(s), Values::String(o)) => o.push(s.as_bytes()),
        (AV::Bytes(b) | AV::Fixed(_, b), Values::String(o)) => o.push(b),
        (AV::Enum(_, s), Values::String(o)) => o.push(s.as_bytes()),
        (v, o) => panic!("the reference cannot put {v:?} into {:?}", o.dtype()),
    }
}

fn items(v: &AV) -> &[AV] {
    match v {
        AV::Array(items) => items,
        other => panic!("expected an array, found {other:?}"),
    }
}

fn wrong_length(level: usize, expected: usize, actual: usize) -> FeatureProblem {
    FeatureProblem::WrongCount {
        dim: Some(level),
        expected,
        actual,
    }
}

/// Dense: nested arrays flattened, each level's length checked after its
/// items (innermost first).
fn expect_dense(
    v: &AV,
    dims: &[usize],
    level: usize,
    out: &mut Values,
) -> Result<(), FeatureProblem> {
    if level == dims.len() {
        leaf_into(v, out);
        return Ok(());
    }
    let items = items(v);
    for item in items {
        expect_dense(item, dims, level + 1, out)?;
    }
    if items.len() != dims[level] {
        return Err(wrong_length(level, dims[level], items.len()));
    }
    Ok(())
}

/// Varlen: one COO entry per leaf, `[row, i0, i1, ...]`; unknown
/// dimensions grow to 1 + the largest index of a leaf (ATDS's
/// `dense_shape`: lists holding no leaf do not count), known ones are
/// checked.
fn expect_varlen(
    v: &AV,
    dims: &[Option<usize>],
    level: usize,
    at: &mut Vec<i64>,
    col: &mut Col,
) -> Result<(), FeatureProblem> {
    let items = items(v);
    for (i, item) in items.iter().enumerate() {
        at.push(i as i64);
        if level + 1 == dims.len() {
            let Col::Sparse {
                indices, values, ..
            } = col
            else {
                unreachable!()
            };
            leaf_into(item, values);
            indices.extend_from_slice(at);
            let Col::Sparse { shape, .. } = col else {
                unreachable!()
            };
            for (l, d) in dims.iter().enumerate() {
                if d.is_none() {
                    shape[l + 1] = shape[l + 1].max(at[l + 1] + 1);
                }
            }
        } else {
            expect_varlen(item, dims, level + 1, at, col)?;
        }
        at.pop();
    }
    match dims[level] {
        Some(d) if d != items.len() => Err(wrong_length(level, d, items.len())),
        _ => Ok(()),
    }
}

/// Sparse: the record's `indicesK` and `values` arrays, entries in stored
/// order; each index array must match the values in length and stay
/// within its dimension.
fn expect_sparse(v: &AV, row: usize, dims: &[i64], col: &mut Col) -> Result<(), FeatureProblem> {
    let AV::Record(fields) = v else {
        panic!("expected a record, found {v:?}")
    };
    let get = |name: &str| {
        items(
            &fields
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("no {name}"))
                .1,
        )
    };
    let vals = get("values");
    let ids: Vec<Vec<i64>> = (0..dims.len())
        .map(|k| {
            get(&format!("indices{k}"))
                .iter()
                .map(|i| match i {
                    AV::Int(i) => *i as i64,
                    AV::Long(l) => *l,
                    other => panic!("index {other:?}"),
                })
                .collect()
        })
        .collect();
    for (k, id) in ids.iter().enumerate() {
        if id.len() != vals.len() {
            return Err(FeatureProblem::IndexCountMismatch {
                dim: Some(k),
                indices: id.len(),
                values: vals.len(),
            });
        }
        if let Some(&bad) = id.iter().find(|&&i| i < 0 || i >= dims[k]) {
            return Err(FeatureProblem::IndexOutOfRange {
                dim: Some(k),
                index: bad,
                size: dims[k],
            });
        }
    }
    let Col::Sparse {
        indices, values, ..
    } = col
    else {
        unreachable!()
    };
    for (j, v) in vals.iter().enumerate() {
        indices.push(row as i64);
        indices.extend(ids.iter().map(|id| id[j]));
        leaf_into(v, values);
    }
    Ok(())
}

/// The tensors `specs` give for `rows`, or the first error.
fn expect_batch(specs: &[FeatureSpec], rows: &[&AV]) -> Result<Vec<Tensor>, Expected> {
    let mut cols: Vec<Col> = specs
        .iter()
        .map(|s| match s {
            FeatureSpec::Dense(d) => Col::Dense(Values::new(d.dtype)),
            FeatureSpec::Varlen(v) => Col::Sparse {
                indices: Vec::new(),
                values: Values::new(v.dtype),
                shape: std::iter::once(rows.len() as i64)
                    .chain(v.shape.as_ref().unwrap().iter().map(|&d| d.max(0)))
                    .collect(),
            },
            FeatureSpec::Sparse(sp) => Col::Sparse {
                indices: Vec::new(),
                values: Values::new(sp.dtype),
                shape: std::iter::once(rows.len() as i64)
                    .chain(sp.shape.clone().unwrap())
                    .collect(),
            },
            other => panic!("not an ATDS spec: {other:?}"),
        })
        .collect();
    let by_name: HashMap<&str, usize> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name(), i))
        .collect();
    for (r, row) in rows.iter().enumerate() {
        let AV::Record(fields) = row else {
            panic!("rows are records")
        };
        let mut seen = vec![false; specs.len()];
        // Writer field order: the order errors are found in.
        for (name, value) in fields {
            let Some(&c) = by_name.get(name.as_str()) else {
                continue;
            };
            seen[c] = true;
            let value = match value {
                AV::Union(_, inner) => &**inner,
                v => v,
            };
            let fail = |problem: FeatureProblem| Expected {
                row: r,
                feature: name.clone(),
                problem,
            };
            match (&specs[c], &mut cols[c]) {
                (FeatureSpec::Dense(d), Col::Dense(out)) => {
                    let dims: Vec<usize> = d.shape.iter().map(|&x| x as usize).collect();
                    if *value == AV::Null {
                        let Some(default) = &d.default else {
                            return Err(fail(FeatureProblem::NullWithoutDefault));
                        };
                        push_default(out, d.dtype, default, dims.iter().product());
                    } else {
                        expect_dense(value, &dims, 0, out).map_err(fail)?;
                    }
                }
                (FeatureSpec::Varlen(v), col) => {
                    if *value != AV::Null {
                        let dims: Vec<Option<usize>> = v
                            .shape
                            .as_ref()
                            .unwrap()
                            .iter()
                            .map(|&d| (d >= 0).then_some(d as usize))
                            .collect();
                        let mut at = vec![r as i64];
                        expect_varlen(value, &dims, 0, &mut at, col).map_err(fail)?;
                    }
                }
                (FeatureSpec::Sparse(sp), col) => {
                    if *value != AV::Null {
                        expect_sparse(value, r, sp.shape.as_ref().unwrap(), col).map_err(fail)?;
                    }
                }
                _ => unreachable!(),
            }
        }
        // Fields the writer lacks take their default.
        for (c, spec) in specs.iter().enumerate() {
            if seen[c] {
                continue;
            }
            let (FeatureSpec::Dense(d), Col::Dense(out)) = (spec, &mut cols[c]) else {
                panic!("{}: missing and not dense", spec.name())
            };
            let n = d.shape.iter().map(|&x| x as usize).product();
            push_default(out, d.dtype, d.default.as_ref().expect("a default"), n);
        }
    }
    Ok(specs
        .iter()
        .zip(cols)
        .map(|(spec, col)| match (spec, col) {
            (FeatureSpec::Dense(d), Col::Dense(values)) => {
                Tensor::Dense(grist_tensor::DenseTensor {
                    shape: std::iter::once(rows.len())
                        .chain(d.shape.iter().map(|&x| x as usize))
                        .collect(),
                    values,
                })
            }
            (
                _,
                Col::Sparse {
                    indices,
                    values,
                    shape,
                },
            ) => Tensor::Sparse(grist_tensor::SparseTensor {
                indices,
                values,
                dense_shape: shape,
            }),
            _ => unreachable!(),
        })
        .collect())
}

/// The default of a dense spec: a scalar repeated over the shape, or a
/// flat list (read from the spec's JSON by this test, independently of
/// grist's default resolution).
fn push_default(out: &mut Values, dtype: DType, default: &J, n: usize) {
    let one = |j: &J, out: &mut Values| {
        let f = || match j {
            J::String(s) if s == "NaN" => f64::NAN,
            J::String(s) if s == "Infinity" => f64::INFINITY,
            J::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
            J::Number(x) => x.as_f64().unwrap(),
            other => panic!("float default {other}"),
        };
        match (dtype, out) {
            (DType::Bool, Values::Bool(o)) => o.push(j.as_bool().unwrap()),
            (DType::Int32, Values::Int32(o)) => o.push(j.as_i64().unwrap() as i32),
            (DType::Int64, Values::Int64(o)) => o.push(j.as_i64().unwrap()),
            (DType::Float32, Values::Float32(o)) => o.push(f() as f32),
            (DType::Float64, Values::Float64(o)) => o.push(f()),
            (DType::String, Values::String(o)) => {
                o.push(&grist_tensor::json::bytes_from_json(j).unwrap())
            }
            _ => unreachable!(),
        }
    };
    match default {
        J::Array(list) => list.iter().for_each(|j| one(j, out)),
        scalar => (0..n).for_each(|_| one(scalar, out)),
    }
}

// ---------------------------------------------------------------------
// Encoding (file B) and comparison helpers
// ---------------------------------------------------------------------

fn long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Encodes `v` in Avro's binary encoding. With `rng`, arrays and maps are
/// split into random blocks, some with negative counts and byte sizes;
/// without, each is one block and map keys are sorted (a canonical form
/// for comparing values that hold NaNs).
fn encode(v: &AV, rng: &mut Option<&mut StdRng>, out: &mut Vec<u8>) {
    match v {
        AV::Null => {}
        AV::Boolean(b) => out.push(*b as u8),
        AV::Int(i) | AV::Date(i) => long(out, *i as i64),
        AV::Long(l) | AV::TimestampMillis(l) => long(out, *l),
        AV::Float(x) => out.extend_from_slice(&x.to_le_bytes()),
        AV::Double(x) => out.extend_from_slice(&x.to_le_bytes()),
        AV::Bytes(b) => {
            long(out, b.len() as i64);
            out.extend_from_slice(b);
        }
        AV::String(s) => {
            long(out, s.len() as i64);
            out.extend_from_slice(s.as_bytes());
        }
        AV::Fixed(_, b) => out.extend_from_slice(b),
        AV::Enum(i, _) => long(out, *i as i64),
        AV::Union(i, inner) => {
            long(out, *i as i64);
            encode(inner, rng, out);
        }
        AV::Record(fields) => fields.iter().for_each(|(_, f)| encode(f, rng, out)),
        AV::Array(items) => {
            let encoded: Vec<Vec<u8>> = items
                .iter()
                .map(|item| {
                    let mut b = Vec::new();
                    encode(item, rng, &mut b);
                    b
                })
                .collect();
            blocks(&encoded, rng, out);
        }
        AV::Map(map) => {
            let mut entries: Vec<(&String, &AV)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let encoded: Vec<Vec<u8>> = entries
                .into_iter()
                .map(|(k, v)| {
                    let mut b = Vec::new();
                    long(&mut b, k.len() as i64);
                    b.extend_from_slice(k.as_bytes());
                    encode(v, rng, &mut b);
                    b
                })
                .collect();
            blocks(&encoded, rng, out);
        }
        other => panic!("the test does not make {other:?}"),
    }
}

fn blocks(items: &[Vec<u8>], rng: &mut Option<&mut StdRng>, out: &mut Vec<u8>) {
    grist_testkit::avro::blocks(items, out, |left| match rng {
        Some(rng) => (rng.random_range(1..=left), rng.random_bool(0.4)),
        None => (left, false),
    });
}

fn canonical(v: &AV) -> Vec<u8> {
    let mut out = Vec::new();
    encode(v, &mut None, &mut out);
    out
}

const CODECS: [Codec; 6] = [
    Codec::Null,
    Codec::Deflate,
    Codec::Snappy,
    Codec::Zstandard,
    Codec::Bzip2,
    Codec::Xz,
];

/// A codec, xz and bzip2 rarely (they are slow in debug builds).
fn random_codec(rng: &mut StdRng) -> Codec {
    match rng.random_range(0..40) {
        0 => Codec::Xz,
        1 | 2 => Codec::Bzip2,
        n => CODECS[n % 4],
    }
}

fn apache_codec(c: Codec) -> apache_avro::Codec {
    match c {
        Codec::Null => apache_avro::Codec::Null,
        Codec::Deflate => apache_avro::Codec::Deflate(apache_avro::DeflateSettings::default()),
        Codec::Snappy => apache_avro::Codec::Snappy,
        Codec::Zstandard => {
            apache_avro::Codec::Zstandard(apache_avro::ZstandardSettings::default())
        }
        Codec::Bzip2 => apache_avro::Codec::Bzip2(apache_avro::Bzip2Settings::default()),
        Codec::Xz => apache_avro::Codec::Xz(apache_avro::XzSettings::default()),
        other => panic!("{other}"),
    }
}

/// Writes file A with apache-avro.
fn write_apache(rng: &mut StdRng, schema: &apache_avro::Schema, rows: &[AV]) -> Vec<u8> {
    let mut w = apache_avro::Writer::builder()
        .schema(schema)
        .writer(Vec::new())
        .codec(apache_codec(random_codec(rng)))
        .block_size(rng.random_range(1..400))
        .build();
    for r in rows {
        w.append(r.clone()).expect("apache-avro takes the row");
    }
    w.into_inner().expect("apache-avro writes")
}

/// Writes file B with grist's writer from this test's own (blocked)
/// encoding, checking apache-avro decodes every datum back to its row.
fn write_grist(
    rng: &mut StdRng,
    schema_text: &str,
    schema: &apache_avro::Schema,
    rows: &[AV],
) -> Vec<u8> {
    let options = WriterOptions::default()
        .with_codec(random_codec(rng))
        .with_sync_interval(rng.random_range(1..300));
    let mut w = ContainerWriter::new(Vec::new(), schema_text, options).unwrap();
    for r in rows {
        let mut datum = Vec::new();
        encode(r, &mut Some(&mut *rng), &mut datum);
        let back = apache_avro::from_avro_datum(schema, &mut &datum[..], None)
            .expect("apache-avro reads the test's encoding");
        assert_eq!(canonical(&back), canonical(r), "the test's encoder");
        if rng.random_bool(0.05) {
            w.flush_block().unwrap();
        }
        w.append_datum(&datum).unwrap();
    }
    let (bytes, summary) = w.finish_into_inner().unwrap();
    assert_eq!(summary.records, rows.len() as u64);
    bytes
}

/// One block of records, with its file.
struct Block {
    file: Arc<str>,
    index: u64,
    first_record: u64,
    count: usize,
    data: bytes::Bytes,
}

fn read_blocks(name: &str, bytes: &[u8], decoder: &mut AvroDecoder) -> Vec<Block> {
    let mut reader = BlockReader::new(bytes, name, ReaderOptions::default()).unwrap();
    decoder
        .add_schema(reader.name().clone(), &reader.header().schema_json)
        .unwrap();
    let file = reader.name().clone();
    let mut out = Vec::new();
    while let Some(b) = reader.next_block().unwrap() {
        out.push(Block {
            file: file.clone(),
            index: b.index,
            first_record: b.first_record,
            count: b.record_count as usize,
            data: b.data,
        });
    }
    out
}

/// Decodes the blocks in batches of `batch_size` spanning blocks and
/// files; the batches before the first error, and the error.
fn decode_batches(
    decoder: &mut AvroDecoder,
    blocks: &[Block],
    batch_size: usize,
) -> (Vec<Batch>, Option<Error>) {
    let mut batches = Vec::new();
    let mut out = decoder.new_batch(batch_size);
    let mut pending = 0;
    for b in blocks {
        let mut row = 0;
        while row < b.count {
            let take = (batch_size - pending).min(b.count - row);
            if let Err(e) = decoder.decode_block(
                &b.file,
                b.index,
                b.first_record,
                &b.data,
                b.count,
                row..row + take,
                &mut out,
            ) {
                return (batches, Some(e));
            }
            row += take;
            pending += take;
            if pending == batch_size {
                batches.push(decoder.finish(&mut out).unwrap());
                pending = 0;
            }
        }
    }
    if pending > 0 {
        batches.push(decoder.finish(&mut out).unwrap());
    }
    (batches, None)
}

fn same_tensor(a: &Tensor, b: &Tensor) -> bool {
    match (a, b) {
        (Tensor::Dense(x), Tensor::Dense(y)) => x.shape == y.shape && x.values.bit_eq(&y.values),
        (Tensor::Sparse(x), Tensor::Sparse(y)) => {
            x.indices == y.indices && x.dense_shape == y.dense_shape && x.values.bit_eq(&y.values)
        }
        _ => false,
    }
}

fn compare_batch(specs: &[FeatureSpec], rows: &[&AV], got: &Batch, what: &str) {
    let want = expect_batch(specs, rows).unwrap_or_else(|e| panic!("{what}: reference: {e:?}"));
    assert_eq!(got.rows(), rows.len(), "{what}: rows");
    assert_eq!(got.columns().len(), specs.len(), "{what}: columns");
    for (spec, want) in specs.iter().zip(&want) {
        let col = got
            .get(spec.name())
            .unwrap_or_else(|| panic!("{what}: no column {}", spec.name()));
        assert!(
            same_tensor(want, col),
            "{what}: feature {}\nexpected {}\nactual   {}",
            spec.name(),
            tensor_to_json(want),
            tensor_to_json(col)
        );
    }
}

// ---------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------

/// The outcome of one case, for the coverage check.
#[derive(Default)]
struct Tally {
    cases: usize,
    rows: usize,
    columns: [usize; 3],
    nullable: usize,
    missing: usize,
    errors: HashMap<&'static str, usize>,
}

fn run_case(seed: u64, want_error: bool, tally: &mut Tally) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut case = random_case(&mut rng);
    if want_error && rng.random_bool(0.3) {
        // Make a dense field nullable without a default, so that a null
        // is an error.
        let dense: Vec<usize> = (0..case.features.len())
            .filter(|&i| {
                case.features[i].present && matches!(case.features[i].kind, Kind::Dense { .. })
            })
            .collect();
        if !dense.is_empty() {
            let f = &mut case.features[dense[rng.random_range(0..dense.len())]];
            f.null_first = Some(rng.random_bool(0.5));
            f.kind = match &f.kind {
                Kind::Dense { dims, .. } => Kind::Dense {
                    dims: dims.clone(),
                    default: None,
                },
                _ => unreachable!(),
            };
            case.write_schema();
        }
    }
    let n = rng.random_range(0..=25);
    let mut rows: Vec<AV> = (0..n).map(|_| random_row(&mut rng, &case)).collect();

    // Error cases: one bad value in one record of a breakable feature.
    let mut injected = None;
    if want_error {
        if rows.is_empty() {
            rows.push(random_row(&mut rng, &case));
        }
        let r = rng.random_range(0..rows.len());
        let mut order: Vec<usize> = (0..case.features.len()).collect();
        order.shuffle(&mut rng);
        for f in order {
            if case.features[f].present && inject(&mut rng, &case, &mut rows[r], f) {
                injected = Some(r);
                break;
            }
        }
        if injected.is_none() {
            return;
        }
    }

    let specs: Vec<FeatureSpec> = case.features.iter().map(Feature::spec).collect();
    let schema = apache_avro::Schema::parse_str(&case.schema)
        .unwrap_or_else(|e| panic!("seed {seed}: apache-avro rejects {}: {e}", case.schema));
    let a = write_apache(&mut rng, &schema, &rows);
    let b = write_grist(&mut rng, &case.schema, &schema, &rows);

    // apache-avro reads both files to the same records.
    let read = |bytes: &[u8]| -> Vec<AV> {
        apache_avro::Reader::new(bytes)
            .unwrap()
            .map(|v| v.unwrap())
            .collect()
    };
    let values = read(&a);
    let from_b = read(&b);
    assert_eq!(values.len(), rows.len(), "seed {seed}");
    for (x, y) in values.iter().zip(&from_b) {
        assert_eq!(canonical(x), canonical(y), "seed {seed}: file B reads back");
    }

    // Both files in one pass, in either order, batches spanning them.
    let mut decoder = AvroDecoder::new(&specs).unwrap();
    let b_first = rng.random_bool(0.5);
    let (first, second) = if b_first {
        (("b.avro", &b), ("a.avro", &a))
    } else {
        (("a.avro", &a), ("b.avro", &b))
    };
    let mut blocks = read_blocks(first.0, first.1, &mut decoder);
    blocks.extend(read_blocks(second.0, second.1, &mut decoder));
    let all: Vec<&AV> = values.iter().chain(values.iter()).collect();
    let batch_size = rng.random_range(1..=12);
    let (batches, error) = decode_batches(&mut decoder, &blocks, batch_size);
    let what = |i: usize| {
        format!(
            "seed {seed}: batch {i} of {batch_size}, schema {}",
            case.schema
        )
    };
    match (injected, error) {
        (None, None) => {
            assert_eq!(batches.len(), all.len().div_ceil(batch_size), "seed {seed}");
            for (i, got) in batches.iter().enumerate() {
                let rows = &all[i * batch_size..((i + 1) * batch_size).min(all.len())];
                compare_batch(&specs, rows, got, &what(i));
            }
        }
        (None, Some(e)) => panic!("{}: {e}", what(batches.len())),
        (Some(r), None) => panic!("seed {seed}: no error for the bad record {r}"),
        (Some(r), Some(e)) => {
            let want = expect_batch(&specs, &all)
                .err()
                .unwrap_or_else(|| panic!("seed {seed}: the reference sees no error"));
            assert_eq!(
                want.row, r,
                "seed {seed}: the reference fails at the bad record"
            );
            let Error::Feature { at, problem } = &e else {
                panic!("seed {seed}: expected a feature error, got {e}")
            };
            assert_eq!(
                (&*at.file, at.record, at.feature.as_deref(), problem),
                (
                    first.0,
                    Some(r as u64),
                    Some(want.feature.as_str()),
                    &want.problem
                ),
                "seed {seed}: {e}"
            );
            // The message names the file, the record and the feature.
            let msg = e.to_string();
            for part in [
                first.0.to_string(),
                format!("record {r}"),
                want.feature.clone(),
            ] {
                assert!(msg.contains(&part), "seed {seed}: {msg:?} lacks {part:?}");
            }
            assert_eq!(batches.len(), r / batch_size, "seed {seed}: batches before");
            for (i, got) in batches.iter().enumerate() {
                compare_batch(
                    &specs,
                    &all[i * batch_size..(i + 1) * batch_size],
                    got,
                    &what(i),
                );
            }
            let kind = match problem {
                FeatureProblem::WrongCount { .. } => "wrong length",
                FeatureProblem::IndexCountMismatch { .. } => "index count",
                FeatureProblem::IndexOutOfRange { .. } => "index range",
                FeatureProblem::NullWithoutDefault => "null",
                _ => "other",
            };
            *tally.errors.entry(kind).or_default() += 1;
        }
    }
    tally.cases += 1;
    tally.rows += rows.len();
    for f in &case.features {
        tally.columns[match f.kind {
            Kind::Dense { .. } => 0,
            Kind::Varlen { .. } => 1,
            Kind::Sparse { .. } => 2,
        }] += 1;
        tally.nullable += f.null_first.is_some() as usize;
        tally.missing += !f.present as usize;
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn grist_decodes_what_apache_avro_reads() {
    if let Some(seed) = env_u64("GRIST_DIFF_SEED") {
        run_case(seed, false, &mut Tally::default());
        return;
    }
    let cases = env_u64("GRIST_DIFF_CASES").unwrap_or(300);
    let mut tally = Tally::default();
    for seed in 0..cases {
        run_case(seed, false, &mut tally);
    }
    println!(
        "{} cases, {} rows, dense/varlen/sparse columns {:?}, {} nullable, {} missing",
        tally.cases, tally.rows, tally.columns, tally.nullable, tally.missing
    );
    // The generator covers what it claims to.
    assert_eq!(tally.cases as u64, cases);
    assert!(tally.columns.iter().all(|&c| c > 50), "{:?}", tally.columns);
    assert!(tally.nullable > 30 && tally.missing > 5);
}

#[test]
fn grist_fails_where_the_reference_fails() {
    if let Some(seed) = env_u64("GRIST_DIFF_SEED") {
        run_case(seed, true, &mut Tally::default());
        return;
    }
    let cases = env_u64("GRIST_DIFF_CASES").unwrap_or(300);
    let mut tally = Tally::default();
    for seed in 0..cases {
        run_case(1_000_000 + seed, true, &mut tally);
    }
    println!("{} error cases: {:?}", tally.cases, tally.errors);
    for kind in ["wrong length", "index count", "index range", "null"] {
        assert!(
            tally.errors.get(kind).copied().unwrap_or(0) >= 5,
            "{kind}: {:?}",
            tally.errors
        );
    }
}
