//! Differential tests against prost, the reference protobuf reader:
//! random OFRecords (canonical, written by prost, and written in unusual
//! but valid ways), and random damage to them. Wherever prost reads a
//! record, grist reads the same features, and the decoder's columns are
//! what the spec semantics give for prost's values; wherever grist
//! refuses a record, prost does too.

use grist_ofrecord::proto::{self, feature::Kind};
use grist_ofrecord::{
    Error, FeatureValue, Field, OfRecordDecoder, RawDType, RawSpec, Record, RecordBuilder,
};
use grist_tensor::json::{batch_to_json, compare_json};
use grist_tensor::{DType, FeatureSpec};
use proptest::prelude::*;
use prost::Message;
use serde_json::{Value, json};

const NAMES: [&str; 5] = ["a", "b", "", "ключ", "long_feature_name_1"];

fn value() -> impl Strategy<Value = FeatureValue> {
    prop_oneof![
        1 => Just(FeatureValue::None),
        2 => prop::collection::vec(prop::collection::vec(any::<u8>(), 0..6), 0..4).prop_map(FeatureValue::Bytes),
        2 => prop::collection::vec(any::<f32>(), 0..5).prop_map(FeatureValue::Float),
        2 => prop::collection::vec(any::<f64>(), 0..5).prop_map(FeatureValue::Double),
        2 => prop::collection::vec(any::<i32>(), 0..5).prop_map(FeatureValue::Int32),
        2 => prop::collection::vec(any::<i64>(), 0..5).prop_map(FeatureValue::Int64),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    prop::collection::btree_map(prop::sample::select(NAMES.to_vec()), value(), 0..5).prop_map(|m| {
        Record {
            features: m
                .into_iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v))
                .collect(),
        }
    })
}

/// A prost-decoded record as a grist `Record`.
fn from_prost(m: &proto::OfRecord) -> Record {
    let features = m
        .feature
        .iter()
        .map(|(k, f)| {
            let v = match &f.kind {
                None => FeatureValue::None,
                Some(Kind::BytesList(l)) => {
                    FeatureValue::Bytes(l.value.iter().map(|b| b.to_vec()).collect())
                }
                Some(Kind::FloatList(l)) => FeatureValue::Float(l.value.clone()),
                Some(Kind::DoubleList(l)) => FeatureValue::Double(l.value.clone()),
                Some(Kind::Int32List(l)) => FeatureValue::Int32(l.value.clone()),
                Some(Kind::Int64List(l)) => FeatureValue::Int64(l.value.clone()),
            };
            (k.as_bytes().to_vec(), v)
        })
        .collect();
    Record { features }
}

/// The OFRecord schema with the map spelled out as what it is on the wire,
/// a repeated entry message: prost checks the wire type of repeated
/// message fields (of map fields it does not), and bytes keys take names
/// that are not UTF-8 (proto2 does not check them).
#[derive(Clone, PartialEq, prost::Message)]
struct WireRecord {
    #[prost(message, repeated, tag = "1")]
    feature: Vec<WireEntry>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct WireEntry {
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
    #[prost(message, optional, tag = "2")]
    value: Option<proto::Feature>,
}

/// Reads a record with prost: entries in order, a later key replacing an
/// earlier one.
fn prost_read(bytes: &[u8]) -> Result<Record, prost::DecodeError> {
    let wire = WireRecord::decode(bytes)?;
    let mut raw = Record::default();
    for e in wire.feature {
        let feature = e.value.unwrap_or_default();
        let one = proto::OfRecord {
            feature: [(String::new(), feature)].into_iter().collect(),
        };
        let value = from_prost(&one)
            .features
            .remove(&Vec::new())
            .unwrap_or(FeatureValue::None);
        raw.features.insert(e.key, value);
    }
    Ok(raw)
}

/// Records compare by their JSON (floats by bits).
fn same(a: &Record, b: &Record) -> Result<(), String> {
    let (x, y) = (a.to_json_with(usize::MAX), b.to_json_with(usize::MAX));
    compare_json(&x, &y).map_err(|m| m.to_string())
}

// -- unusual but valid encodings --

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field(num: u32, wt: u8, body: &[u8], out: &mut Vec<u8>) {
    varint(u64::from(num << 3 | u32::from(wt)), out);
    if wt == 2 {
        varint(body.len() as u64, out);
    }
    out.extend_from_slice(body);
}

/// One list message, its values split into `packed.len()` runs, each
/// packed or not (bytes values are never packed).
fn list(v: &FeatureValue, packed: &[bool]) -> Vec<u8> {
    // Each value's encoding and the wire type of an unpacked value.
    let (values, wt): (Vec<Vec<u8>>, u8) = match v {
        FeatureValue::None => (vec![], 2),
        FeatureValue::Bytes(b) => (b.clone(), 2),
        FeatureValue::Float(f) => (f.iter().map(|x| x.to_le_bytes().to_vec()).collect(), 5),
        FeatureValue::Double(f) => (f.iter().map(|x| x.to_le_bytes().to_vec()).collect(), 1),
        FeatureValue::Int32(x) => (
            x.iter().map(|&i| varint_bytes(i as i64 as u64)).collect(),
            0,
        ),
        FeatureValue::Int64(x) => (x.iter().map(|&i| varint_bytes(i as u64)).collect(), 0),
    };
    let mut out = Vec::new();
    let runs = packed.len().max(1);
    let n = values.len();
    for (r, &pack) in packed.iter().chain([&true]).take(runs).enumerate() {
        let run = &values[r * n / runs..(r + 1) * n / runs];
        if pack && wt != 2 {
            field(1, 2, &run.concat(), &mut out);
        } else {
            for x in run {
                field(1, wt, x, &mut out);
            }
        }
    }
    out
}

fn varint_bytes(v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    varint(v, &mut out);
    out
}

fn kind_field(v: &FeatureValue) -> u32 {
    v.kind().map_or(0, |k| k.field())
}

/// How one entry is written.
#[derive(Clone, Debug)]
struct Style {
    value_first: bool,
    unknown: bool,
    /// Write a replaced list of another kind before the real one.
    replaced: Option<FeatureValue>,
    /// Split the list into two list fields of the same kind (merged).
    split: bool,
    packed: Vec<bool>,
    /// Write the entry twice, the first time with another value.
    earlier: Option<FeatureValue>,
}

fn style() -> impl Strategy<Value = Style> {
    (
        any::<bool>(),
        any::<bool>(),
        prop::option::of(value()),
        any::<bool>(),
        prop::collection::vec(any::<bool>(), 1..3),
        prop::option::of(value()),
    )
        .prop_map(
            |(value_first, unknown, replaced, split, packed, earlier)| Style {
                value_first,
                unknown,
                replaced,
                split,
                packed,
                earlier,
            },
        )
}

fn feature_bytes(v: &FeatureValue, s: &Style) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(r) = &s.replaced {
        if v.kind().is_some() && r.kind().is_some() && r.kind() != v.kind() {
            field(kind_field(r), 2, &list(r, &[true]), &mut out);
        }
    }
    if s.unknown {
        // Unknown varint, fixed64 and group fields.
        field(9, 0, &[0x96, 0x01], &mut out);
        field(10, 1, &[0; 8], &mut out);
        out.extend([0x5b, 0x08, 0x01, 0x5c]);
    }
    if v.kind().is_some() {
        if s.split {
            let (a, b) = split(v);
            field(kind_field(v), 2, &list(&a, &s.packed), &mut out);
            field(kind_field(v), 2, &list(&b, &s.packed), &mut out);
        } else {
            field(kind_field(v), 2, &list(v, &s.packed), &mut out);
        }
    }
    out
}

fn split(v: &FeatureValue) -> (FeatureValue, FeatureValue) {
    fn halves<T: Clone>(x: &[T]) -> (Vec<T>, Vec<T>) {
        let (a, b) = x.split_at(x.len() / 2);
        (a.to_vec(), b.to_vec())
    }
    match v {
        FeatureValue::Bytes(x) => {
            let (a, b) = halves(x);
            (FeatureValue::Bytes(a), FeatureValue::Bytes(b))
        }
        FeatureValue::Float(x) => {
            let (a, b) = halves(x);
            (FeatureValue::Float(a), FeatureValue::Float(b))
        }
        FeatureValue::Double(x) => {
            let (a, b) = halves(x);
            (FeatureValue::Double(a), FeatureValue::Double(b))
        }
        FeatureValue::Int32(x) => {
            let (a, b) = halves(x);
            (FeatureValue::Int32(a), FeatureValue::Int32(b))
        }
        FeatureValue::Int64(x) => {
            let (a, b) = halves(x);
            (FeatureValue::Int64(a), FeatureValue::Int64(b))
        }
        FeatureValue::None => (FeatureValue::None, FeatureValue::None),
    }
}

fn entry(name: &[u8], feature: &[u8], value_first: bool, out: &mut Vec<u8>) {
    let mut e = Vec::new();
    if value_first {
        field(2, 2, feature, &mut e);
        field(1, 2, name, &mut e);
    } else {
        field(1, 2, name, &mut e);
        field(2, 2, feature, &mut e);
    }
    field(1, 2, &e, out);
}

/// The record written unusually, entries in reverse order.
fn unusual(r: &Record, styles: &[Style]) -> Vec<u8> {
    let mut out = Vec::new();
    field(7, 2, b"unknown top-level field", &mut out);
    for ((name, v), s) in r.features.iter().rev().zip(styles.iter().cycle()) {
        if let Some(e) = &s.earlier {
            entry(name, &feature_bytes(e, s), false, &mut out);
        }
        entry(name, &feature_bytes(v, s), s.value_first, &mut out);
    }
    out
}

// -- the decoder against spec semantics over prost's values --

fn reference(fields: &[Field], records: &[proto::OfRecord]) -> Result<Value, String> {
    let mut outputs = serde_json::Map::new();
    for f in fields {
        let name = f.name();
        let lists: Vec<Option<&Kind>> = records
            .iter()
            .map(|r| r.feature.get(name).and_then(|f| f.kind.as_ref()))
            .collect();
        let column = match f {
            Field::Spec(FeatureSpec::Varlen(v)) => {
                let mut indices = Vec::new();
                let mut values = Vec::new();
                let mut width = 0;
                for (row, l) in lists.iter().enumerate() {
                    let vals = match (v.dtype, l) {
                        (_, None) => vec![],
                        (DType::Int64, Some(Kind::Int64List(l))) => {
                            l.value.iter().map(|&x| json!(x)).collect()
                        }
                        (DType::Float64, Some(Kind::DoubleList(l))) => l
                            .value
                            .iter()
                            .map(|&x| grist_tensor::json::float_to_json(x))
                            .collect(),
                        _ => return Err(format!("{name}: type mismatch")),
                    };
                    for j in 0..vals.len() {
                        indices.push(json!([row, j]));
                    }
                    width = width.max(vals.len());
                    values.extend(vals);
                }
                json!({"kind": "sparse", "dtype": v.dtype.name(), "indices": indices, "values": values, "dense_shape": [records.len(), width]})
            }
            Field::Raw(raw) => {
                let n: usize = raw.shape.iter().product();
                let mut values = Vec::new();
                for l in &lists {
                    let nums: Vec<f64> = match l {
                        None => return Err(format!("{name}: missing")),
                        Some(Kind::FloatList(l)) => l.value.iter().map(|&x| x as f64).collect(),
                        Some(Kind::DoubleList(l)) => l.value.clone(),
                        Some(Kind::Int32List(l)) => l.value.iter().map(|&x| x as f64).collect(),
                        Some(Kind::Int64List(l)) => l.value.iter().map(|&x| x as f64).collect(),
                        Some(Kind::BytesList(l)) => {
                            if l.value.len() != 1 {
                                return Err(format!("{name}: bytes count"));
                            }
                            l.value[0].iter().take(n).map(|&b| b as i8 as f64).collect()
                        }
                    };
                    let take = nums.len().min(n);
                    values.extend(
                        nums[..take]
                            .iter()
                            .map(|&x| grist_tensor::json::float_to_json(x)),
                    );
                    values.extend(std::iter::repeat_n(json!(0.0), n - take));
                }
                let mut shape = vec![records.len()];
                shape.extend(&raw.shape);
                json!({"kind": "dense", "dtype": "float64", "shape": shape, "values": values})
            }
            _ => unreachable!("the test builds varlen and raw fields"),
        };
        outputs.insert(name.to_string(), column);
    }
    Ok(json!({"records": records.len(), "outputs": outputs}))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Canonical records: grist's encoding is prost's reading of it, and
    /// prost's encoding is grist's reading.
    #[test]
    fn canonical_records_agree_with_prost(r in record()) {
        let ours = r.encode();
        let theirs = proto::OfRecord::decode(&ours[..]).expect("prost reads grist's encoding");
        prop_assert!(same(&from_prost(&theirs), &r).is_ok());
        prop_assert_eq!(theirs.encoded_len(), theirs.encode_to_vec().len());
        let back = Record::parse(&theirs.encode_to_vec()).expect("grist reads prost's encoding");
        prop_assert!(same(&back, &r).is_ok(), "{:?}", same(&back, &r));
        prop_assert_eq!(Record::parse(&ours).unwrap().encode(), ours);
    }

    /// Unusual encodings (entries out of order and repeated, value before
    /// key, unknown fields and groups, unpacked and split lists, oneof
    /// members replaced): prost and grist read the same record.
    #[test]
    fn unusual_encodings_agree_with_prost(r in record(), styles in prop::collection::vec(style(), 1..4)) {
        let bytes = unusual(&r, &styles);
        let theirs = proto::OfRecord::decode(&bytes[..]).expect("valid protobuf");
        let ours = Record::parse(&bytes).expect("valid protobuf");
        prop_assert!(same(&ours, &from_prost(&theirs)).is_ok(), "{:?}", same(&ours, &from_prost(&theirs)));
        prop_assert!(same(&ours, &prost_read(&bytes).unwrap()).is_ok());
        prop_assert!(same(&ours, &r).is_ok());
    }

    /// Damaged records: where prost reads one, grist reads the same; where
    /// grist refuses one, prost refuses it too.
    #[test]
    fn damaged_records_agree_with_prost(
        r in record(),
        styles in prop::collection::vec(style(), 1..3),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = unusual(&r, &styles);
        for (at, x) in &flips {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] ^= x;
            }
        }
        let keep = cut.index(bytes.len() + 1);
        for bytes in [&bytes[..], &bytes[..keep]] {
            let theirs = prost_read(bytes);
            let ours = Record::parse(bytes);
            match (&theirs, &ours) {
                (Ok(t), Ok(o)) => prop_assert!(same(o, t).is_ok()),
                (Ok(_), Err(e)) => prop_assert!(false, "prost reads it, grist: {}", e),
                (Err(_), Err(e)) => {
                    let malformed = matches!(e, Error::Malformed { .. });
                    prop_assert!(malformed, "{}", e);
                }
                // grist is the more lenient where protobuf is and prost
                // is not: a known field of another wire type is an
                // unknown field, a varint's 10th byte may hold bits past
                // 64.
                (Err(_), Ok(_)) => {}
            }
            // The decoder refuses exactly what `Record::parse` refuses.
            let fields = [FeatureSpec::varlen("a", DType::Int64).into()];
            let mut decoder = OfRecordDecoder::with_fields(&fields).unwrap();
            let decoded = decoder.decode_batch(&"d".into(), 0, [bytes]);
            let refused = decoded.as_ref().err().is_some_and(|e| e.manifest_kind() == "protobuf");
            prop_assert_eq!(refused, ours.is_err(), "{:?} vs {:?}", decoded, ours);
        }
    }

    /// The decoder's columns are the spec semantics applied to prost's
    /// values, or both fail.
    #[test]
    fn decoder_matches_the_reference(
        records in prop::collection::vec(record(), 1..4),
        styles in prop::collection::vec(style(), 1..3),
        n in 0usize..4,
    ) {
        let fields: Vec<Field> = vec![
            FeatureSpec::varlen("a", DType::Int64).into(),
            FeatureSpec::varlen("ключ", DType::Float64).into(),
            RawSpec::new("b", [n], RawDType::Float64).with_truncate(true).into(),
        ];
        let bytes: Vec<Vec<u8>> = records.iter().map(|r| unusual(r, &styles)).collect();
        let protos: Vec<proto::OfRecord> = bytes.iter().map(|b| proto::OfRecord::decode(&b[..]).unwrap()).collect();
        let mut decoder = OfRecordDecoder::with_fields(&fields).unwrap();
        let got = decoder.decode_batch(&"d".into(), 0, bytes.iter().map(|b| &b[..]));
        match (reference(&fields, &protos), got) {
            (Ok(want), Ok(batch)) => {
                let m = compare_json(&want, &batch_to_json(&batch));
                prop_assert!(m.is_ok(), "{:?}", m);
            }
            (Err(_), Err(e)) => {
                let feature = matches!(e, Error::Feature { .. });
                prop_assert!(feature, "{}", e);
            }
            (want, got) => prop_assert!(false, "reference {:?}, decoder {:?}", want, got),
        }
    }
}

#[test]
fn prost_builds_what_the_builder_builds() {
    let builder = RecordBuilder::new()
        .with_int64s("label", [7])
        .with_floats("x", [1.0, 2.5]);
    let message = builder.clone().build();
    assert_eq!(message.feature.len(), 2);
    assert_eq!(message.encode_to_vec(), builder.encode());
}
