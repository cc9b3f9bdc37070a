//! Differential test of the generic datum API against apache-avro.
//!
//! Each case draws a random writer schema over every Avro type: all
//! primitives, logical types (`date`, `timestamp-millis`, one apache-avro
//! does not know), enums, fixed (size 0 too), arrays and maps of anything,
//! unions of distinct branches, records (empty ones too), named types
//! reused by their full names across namespaces, and recursive records.
//! Its random values are encoded twice: by apache-avro
//! (`to_avro_datum`), and by this test with arrays and maps split into
//! random blocks, some with negative counts and byte sizes (which
//! apache-avro must decode back to the same value).
//!
//! grist must decode each datum to the value drawn
//! ([`DatumSchema::decode`], floats compared by their bits), find every
//! datum's boundaries in a block of all of them
//! ([`DatumSchema::datum_ranges`]), and give apache-avro's encodings
//! through [`DatumReader`] from a container file apache-avro's `Writer`
//! wrote from the values. Datums that take no bytes at all (a record of
//! nothing but empty records and nulls) are found the same way: any
//! number of them in a block of no bytes.
//!
//! A failing case prints its seed; `GRIST_GENERIC_SEED=<seed>` reruns only
//! that case, `GRIST_GENERIC_CASES=<n>` changes the number of cases.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use apache_avro::types::Value as AV;
use bytes::Bytes;
use grist_avro_tensor::{
    AvroValue, Block, BlockReader, DatumReader, DatumSchema, Location, ReaderOptions,
};
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use serde_json::{Value as J, json};

/// A writer type as the test draws it. Named types carry their full name.
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
    /// `{"type": "long", "logicalType": "grist-unknown"}`: a plain long.
    UnknownLogical,
    Enum {
        name: Name,
        symbols: Vec<String>,
    },
    Fixed {
        name: Name,
        size: usize,
    },
    Array(Box<Ty>),
    Map(Box<Ty>),
    Union(Vec<Ty>),
    Record {
        name: Name,
        fields: Vec<(String, Ty)>,
    },
    /// `{"type": "record", "name": N, "fields": [{"name": "v", "type":
    /// item}, {"name": "next", "type": ["null", N]}]}`.
    List {
        name: Name,
        item: Box<Ty>,
    },
}

/// How a named type is written: its full name, and the `name` (and
/// `namespace`) attributes that give it.
#[derive(Clone, Debug)]
struct Name {
    full: String,
    name: String,
    namespace: Option<String>,
}

/// The named types drawn so far (to reuse) and a counter for fresh names.
#[derive(Default)]
struct Names {
    defined: Vec<Ty>,
    next: usize,
}

impl Names {
    /// A fresh name inside namespace `ns`, written one of three ways; and
    /// the namespace its members inherit.
    fn fresh(&mut self, rng: &mut StdRng, ns: &str) -> (Name, String) {
        self.next += 1;
        let base = format!("T{}", self.next);
        match rng.random_range(0..3) {
            // Inherited from the enclosing type.
            0 => (
                Name {
                    full: format!("{ns}.{base}"),
                    name: base,
                    namespace: None,
                },
                ns.to_string(),
            ),
            // A namespace attribute of its own.
            1 => {
                let own = format!("ns{}.sub", self.next);
                (
                    Name {
                        full: format!("{own}.{base}"),
                        name: base,
                        namespace: Some(own.clone()),
                    },
                    own,
                )
            }
            // A dotted name.
            _ => {
                let own = format!("dotted{}", self.next);
                let full = format!("{own}.{base}");
                (
                    Name {
                        full: full.clone(),
                        name: full,
                        namespace: None,
                    },
                    own,
                )
            }
        }
    }
}

fn named(ty: &Ty) -> Option<&Name> {
    match ty {
        Ty::Enum { name, .. }
        | Ty::Fixed { name, .. }
        | Ty::Record { name, .. }
        | Ty::List { name, .. } => Some(name),
        _ => None,
    }
}

fn name_json(name: &Name, mut o: J) -> J {
    o["name"] = json!(name.name);
    if let Some(ns) = &name.namespace {
        o["namespace"] = json!(ns);
    }
    o
}

/// The schema JSON of `ty`; a named type already written is referred to
/// by its full name.
fn schema_json(ty: &Ty, written: &mut HashSet<String>) -> J {
    if let Some(name) = named(ty)
        && !written.insert(name.full.clone())
    {
        return json!(name.full);
    }
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
        Ty::UnknownLogical => json!({"type": "long", "logicalType": "grist-unknown"}),
        Ty::Enum { name, symbols } => name_json(name, json!({"type": "enum", "symbols": symbols})),
        Ty::Fixed { name, size } => name_json(name, json!({"type": "fixed", "size": size})),
        Ty::Array(items) => json!({"type": "array", "items": schema_json(items, written)}),
        Ty::Map(values) => json!({"type": "map", "values": schema_json(values, written)}),
        Ty::Union(branches) => J::Array(branches.iter().map(|b| schema_json(b, written)).collect()),
        Ty::Record { name, fields } => {
            let fields: Vec<J> = fields
                .iter()
                .map(|(n, t)| json!({"name": n, "type": schema_json(t, written)}))
                .collect();
            name_json(name, json!({"type": "record", "fields": fields}))
        }
        Ty::List { name, item } => {
            let item = schema_json(item, written);
            name_json(
                name,
                json!({"type": "record", "fields": [
                    {"name": "v", "type": item},
                    {"name": "next", "type": ["null", name.full]}
                ]}),
            )
        }
    }
}

const PRIMITIVES: [Ty; 8] = [
    Ty::Null,
    Ty::Boolean,
    Ty::Int,
    Ty::Long,
    Ty::Float,
    Ty::Double,
    Ty::Bytes,
    Ty::String,
];

/// A random type in namespace `ns`, nesting at most `depth` more levels.
fn random_ty(rng: &mut StdRng, names: &mut Names, ns: &str, depth: usize) -> Ty {
    let leaf = depth == 0;
    let pick = if leaf {
        rng.random_range(0..14)
    } else {
        rng.random_range(0..22)
    };
    match pick {
        0..=7 => PRIMITIVES[pick].clone(),
        8 => Ty::Date,
        9 => Ty::Timestamp,
        10 => Ty::UnknownLogical,
        11 | 12 if !names.defined.is_empty() && rng.random_bool(0.5) => {
            names.defined.choose(rng).cloned().unwrap_or(Ty::Null)
        }
        11 => {
            let (name, _) = names.fresh(rng, ns);
            let n = rng.random_range(1..5);
            let ty = Ty::Enum {
                name,
                symbols: (0..n).map(|i| format!("S{i}")).collect(),
            };
            names.defined.push(ty.clone());
            ty
        }
        12 | 13 => {
            let (name, _) = names.fresh(rng, ns);
            let ty = Ty::Fixed {
                name,
                size: rng.random_range(0..6),
            };
            names.defined.push(ty.clone());
            ty
        }
        14 | 15 => Ty::Array(Box::new(random_ty(rng, names, ns, depth - 1))),
        16 => Ty::Map(Box::new(random_ty(rng, names, ns, depth - 1))),
        17 | 18 => random_union(rng, names, ns, depth - 1),
        19 | 20 => random_record(rng, names, ns, depth - 1),
        _ => {
            let (name, inner) = names.fresh(rng, ns);
            let item = Box::new(random_ty(rng, names, &inner, depth - 1));
            let ty = Ty::List { name, item };
            names.defined.push(ty.clone());
            ty
        }
    }
}

/// A record of 0 to 4 random fields.
fn random_record(rng: &mut StdRng, names: &mut Names, ns: &str, depth: usize) -> Ty {
    let (name, inner) = names.fresh(rng, ns);
    let fields = (0..rng.random_range(0..5))
        .map(|i| (format!("f{i}"), random_ty(rng, names, &inner, depth)))
        .collect();
    let ty = Ty::Record { name, fields };
    names.defined.push(ty.clone());
    ty
}

/// A union of distinct branches: primitives, at most one array and one
/// map, a named type.
fn random_union(rng: &mut StdRng, names: &mut Names, ns: &str, depth: usize) -> Ty {
    let mut branches: Vec<Ty> = PRIMITIVES.to_vec();
    branches.shuffle(rng);
    branches.truncate(rng.random_range(1..4));
    let mut others = Vec::new();
    if rng.random_bool(0.3) {
        others.push(Ty::Array(Box::new(random_ty(rng, names, ns, depth))));
    }
    if rng.random_bool(0.2) {
        others.push(Ty::Map(Box::new(random_ty(rng, names, ns, depth))));
    }
    if rng.random_bool(0.4) {
        let ty = match rng.random_range(0..3) {
            0 => random_record(rng, names, ns, depth),
            _ => random_ty(rng, names, ns, 0),
        };
        // The array or map may hold it: a union cannot hold it twice.
        let fresh = named(&ty).is_some_and(|n| {
            others
                .iter()
                .all(|b| named(b).is_none_or(|m| m.full != n.full))
        });
        if fresh {
            others.push(ty);
        }
    }
    // Among the primitives, in the order drawn: a named type is defined
    // where it is first written, and its namespace is that place's.
    let mut from = 0;
    for ty in others {
        let at = rng.random_range(from..=branches.len());
        branches.insert(at, ty);
        from = at + 1;
    }
    Ty::Union(branches)
}

fn random_string(rng: &mut StdRng) -> String {
    let alphabet = ['a', 'b', 'z', ' ', 'é', '€', '𝄞', '"', '\\', '\0'];
    (0..rng.random_range(0..6))
        .map(|_| *alphabet.choose(rng).unwrap_or(&'a'))
        .collect()
}

fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.random()).collect()
}

fn random_float(rng: &mut StdRng) -> f32 {
    match rng.random_range(0..4) {
        0 => [f32::NAN, -f32::NAN, f32::INFINITY, -0.0, f32::MAX][rng.random_range(0..5)],
        1 => f32::from_bits(rng.random()),
        _ => rng.random_range(-100.0..100.0),
    }
}

fn random_double(rng: &mut StdRng) -> f64 {
    match rng.random_range(0..4) {
        0 => [f64::NAN, f64::NEG_INFINITY, -0.0, 5e-324, f64::MIN][rng.random_range(0..5)],
        1 => f64::from_bits(rng.random()),
        _ => rng.random_range(-1e6..1e6),
    }
}

fn random_long(rng: &mut StdRng) -> i64 {
    match rng.random_range(0..3) {
        0 => [0, -1, i64::MIN, i64::MAX][rng.random_range(0..4)],
        1 => rng.random(),
        _ => rng.random_range(-300..300),
    }
}

/// A random value of `ty`; containers get fewer items the deeper they are.
fn random_value(rng: &mut StdRng, ty: &Ty, depth: usize) -> AV {
    let len = |rng: &mut StdRng| rng.random_range(0..=4usize.saturating_sub(depth));
    match ty {
        Ty::Null => AV::Null,
        Ty::Boolean => AV::Boolean(rng.random()),
        Ty::Int => AV::Int(random_long(rng) as i32),
        Ty::Long | Ty::UnknownLogical => AV::Long(random_long(rng)),
        Ty::Float => AV::Float(random_float(rng)),
        Ty::Double => AV::Double(random_double(rng)),
        Ty::Bytes => {
            let n = rng.random_range(0..6);
            AV::Bytes(random_bytes(rng, n))
        }
        Ty::String => AV::String(random_string(rng)),
        Ty::Date => AV::Date(rng.random_range(-30000..30000)),
        Ty::Timestamp => AV::TimestampMillis(random_long(rng)),
        Ty::Enum { symbols, .. } => {
            let i = rng.random_range(0..symbols.len());
            AV::Enum(i as u32, symbols[i].clone())
        }
        Ty::Fixed { size, .. } => AV::Fixed(*size, random_bytes(rng, *size)),
        Ty::Array(items) => AV::Array(
            (0..len(rng))
                .map(|_| random_value(rng, items, depth + 1))
                .collect(),
        ),
        Ty::Map(values) => AV::Map(
            (0..len(rng))
                .map(|_| (random_string(rng), random_value(rng, values, depth + 1)))
                .collect(),
        ),
        Ty::Union(branches) => {
            let i = rng.random_range(0..branches.len());
            AV::Union(i as u32, Box::new(random_value(rng, &branches[i], depth)))
        }
        Ty::Record { fields, .. } => AV::Record(
            fields
                .iter()
                .map(|(n, t)| (n.clone(), random_value(rng, t, depth + 1)))
                .collect(),
        ),
        Ty::List { item, .. } => {
            let next = if depth < 4 && rng.random_bool(0.5) {
                AV::Union(1, Box::new(random_value(rng, ty, depth + 1)))
            } else {
                AV::Union(0, Box::new(AV::Null))
            };
            AV::Record(vec![
                ("v".into(), random_value(rng, item, depth + 1)),
                ("next".into(), next),
            ])
        }
    }
}

fn long(out: &mut Vec<u8>, v: i64) {
    out.extend(crate::generic::long(v));
}

/// Encodes `v` in Avro's binary encoding. With `rng`, arrays and maps are
/// split into random blocks, some with negative counts and byte sizes;
/// without, each is one block and map keys are sorted (a canonical form).
fn encode(v: &AV, rng: &mut Option<&mut StdRng>, out: &mut Vec<u8>) {
    match v {
        AV::Null => {}
        AV::Boolean(b) => out.push(u8::from(*b)),
        AV::Int(i) | AV::Date(i) => long(out, i64::from(*i)),
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
        AV::Enum(i, _) => long(out, i64::from(*i)),
        AV::Union(i, inner) => {
            long(out, i64::from(*i));
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

/// Checks that grist's value is apache-avro's.
fn same(got: &AvroValue, want: &AV, path: &str) -> Result<(), String> {
    let fail = || Err(format!("at {path}: grist {got:?}, apache-avro {want:?}"));
    match (got, want) {
        (AvroValue::Null, AV::Null) => Ok(()),
        (AvroValue::Boolean(a), AV::Boolean(b)) if a == b => Ok(()),
        (AvroValue::Int(a), AV::Int(b) | AV::Date(b)) if a == b => Ok(()),
        (AvroValue::Long(a), AV::Long(b) | AV::TimestampMillis(b)) if a == b => Ok(()),
        (AvroValue::Float(a), AV::Float(b)) if a.to_bits() == b.to_bits() => Ok(()),
        (AvroValue::Double(a), AV::Double(b)) if a.to_bits() == b.to_bits() => Ok(()),
        (AvroValue::Bytes(a), AV::Bytes(b)) if a == b => Ok(()),
        (AvroValue::String(a), AV::String(b)) if *a == b.as_bytes() => Ok(()),
        (AvroValue::Fixed(a), AV::Fixed(n, b)) if a == b && a.len() == *n => Ok(()),
        (AvroValue::Enum { index, symbol }, AV::Enum(i, s))
            if *index == *i as usize && symbol == s =>
        {
            Ok(())
        }
        (AvroValue::Union { branch, value }, AV::Union(i, v)) if *branch == *i as usize => {
            same(value, v, &format!("{path}|{i}"))
        }
        (AvroValue::Array(a), AV::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .try_for_each(|(i, (a, b))| same(a, b, &format!("{path}[{i}]"))),
        (AvroValue::Map(a), AV::Map(b)) if a.len() == b.len() => a.iter().try_for_each(|(k, v)| {
            let key = std::str::from_utf8(k).map_err(|e| format!("at {path}: {e}"))?;
            match b.get(key) {
                Some(w) => same(v, w, &format!("{path}[{key:?}]")),
                None => Err(format!("at {path}: key {key:?} not in {want:?}")),
            }
        }),
        (AvroValue::Record(a), AV::Record(b)) if a.len() == b.len() => {
            a.iter().zip(b).try_for_each(|((n, v), (m, w))| {
                if n != m {
                    return Err(format!("at {path}: field {n} where {m} was written"));
                }
                same(v, w, &format!("{path}.{n}"))
            })
        }
        _ => fail(),
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// One case: a schema, values, both encodings, and a container file.
fn run_case(seed: u64) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut names = Names::default();
    let mut top = random_record(&mut rng, &mut names, "top", 3);
    // At the top there is no namespace to inherit: say it.
    if let Ty::Record { name, .. } = &mut top
        && name.namespace.is_none()
        && !name.name.contains('.')
    {
        name.namespace = Some("top".into());
    }
    let text = schema_json(&top, &mut HashSet::new()).to_string();
    let schema = apache_avro::Schema::parse_str(&text)
        .map_err(|e| format!("apache-avro refuses the schema {text}: {e}"))?;
    let grist = DatumSchema::parse("case.avro", &text).map_err(|e| e.to_string())?;
    let values: Vec<AV> = (0..rng.random_range(1..12))
        .map(|_| random_value(&mut rng, &top, 0))
        .collect();

    let at = Location::block("case.avro", 0).with_record(0);
    let mut data = Vec::new();
    let mut datums = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let apache = apache_avro::to_avro_datum(&schema, v.clone())
            .map_err(|e| format!("apache-avro cannot encode {v:?}: {e}"))?;
        let mut blocked = Vec::new();
        encode(v, &mut Some(&mut rng), &mut blocked);
        let back = apache_avro::from_avro_datum(&schema, &mut &blocked[..], None)
            .map_err(|e| format!("apache-avro cannot read the blocked encoding: {e}"))?;
        if canonical(&back) != canonical(v) {
            return Err(format!(
                "the blocked encoding of value {i} reads back as {back:?}"
            ));
        }
        for (what, datum) in [("apache-avro's", &apache), ("the blocked", &blocked)] {
            let got = grist
                .decode(datum, &at)
                .map_err(|e| format!("value {i}, {what} encoding: {e}"))?;
            same(&got, v, "").map_err(|e| format!("value {i}, {what} encoding: {e}"))?;
            data.extend_from_slice(datum);
            datums.push(datum.clone());
        }
    }
    // The boundaries of all of them in one block.
    let block = Block {
        index: 0,
        offset: 0,
        first_record: 0,
        record_count: datums.len() as u64,
        data: Bytes::from(data),
        stored_bytes: 0,
        compressed: false,
    };
    let ranges = match grist.datum_ranges(&Arc::from("case.avro"), &block) {
        Ok(ranges) => ranges,
        Err(e) => return Err(e.to_string()),
    };
    let got: Vec<&[u8]> = ranges.iter().map(|r| &block.data[r]).collect();
    if got != datums.iter().map(Vec::as_slice).collect::<Vec<_>>() {
        return Err(format!("datum boundaries {ranges:?}"));
    }
    // A file apache-avro writes, read back datum by datum.
    let codec = match rng.random_range(0..3) {
        0 => apache_avro::Codec::Null,
        1 => apache_avro::Codec::Deflate(apache_avro::DeflateSettings::default()),
        _ => apache_avro::Codec::Snappy,
    };
    let mut w = apache_avro::Writer::builder()
        .schema(&schema)
        .writer(Vec::new())
        .codec(codec)
        .block_size(rng.random_range(1..200))
        .build();
    for v in &values {
        w.append(v.clone()).map_err(|e| e.to_string())?;
    }
    let file = w.into_inner().map_err(|e| e.to_string())?;
    let blocks = BlockReader::new(&file[..], "case.avro", ReaderOptions::default())
        .map_err(|e| e.to_string())?;
    let mut reader = DatumReader::new(blocks).map_err(|e| e.to_string())?;
    let mut read = Vec::new();
    while let Some(d) = reader.next_datum().map_err(|e| e.to_string())? {
        read.push(d.data.to_vec());
    }
    let want: Vec<Vec<u8>> = datums.iter().step_by(2).cloned().collect();
    if read != want {
        return Err("the file's datums are not apache-avro's encodings".into());
    }
    Ok(())
}

#[test]
fn grist_reads_every_datum_as_apache_avro_wrote_it() {
    let seeds: Vec<u64> = match env_u64("GRIST_GENERIC_SEED") {
        Some(seed) => vec![seed],
        None => (0..env_u64("GRIST_GENERIC_CASES").unwrap_or(300)).collect(),
    };
    let mut failures = HashMap::new();
    for seed in seeds {
        if let Err(e) = run_case(seed) {
            failures.insert(seed, e);
        }
    }
    let mut seeds: Vec<_> = failures.keys().copied().collect();
    seeds.sort_unstable();
    for seed in seeds.iter().take(5) {
        eprintln!("seed {seed}: {}", failures[seed]);
    }
    assert!(failures.is_empty(), "failing seeds: {seeds:?}");
}
