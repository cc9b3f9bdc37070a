//! Regressions: inputs that once crashed or misread, found by
//! `tests/differential.rs` and the `avro_container` / `avro_decode` fuzz
//! targets. Each test names the bug it pins.

use std::sync::Arc;

use grist_avro_tensor::{
    AvroDecoder, BlockDecoder, BlockReader, Codec, ContainerWriter, Decoded, Error, Header,
    Location, ReaderOptions, WriterOptions,
};
use grist_tensor::{DType, FeatureSpec, Limits, Values};

/// A zig-zag varint.
fn long(v: i64) -> Vec<u8> {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    let mut out = Vec::new();
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
    out
}

/// Decodes `records` records of `data` (writer schema `schema`) with
/// `specs`, all rows, then the rows after the first (so the first is
/// skipped).
fn decode(
    schema: &str,
    specs: &[FeatureSpec],
    data: &[u8],
    records: usize,
) -> Vec<Result<grist_tensor::Batch, grist_avro_tensor::Error>> {
    let file: Arc<str> = "regression.avro".into();
    let mut d = AvroDecoder::new(specs).unwrap();
    d.add_schema(file.clone(), schema).unwrap();
    [0..records, 1.min(records)..records]
        .into_iter()
        .map(|rows| {
            let mut out = d.new_batch(records);
            d.decode_block(&file, 0, 0, data, records, rows, &mut out)?;
            d.finish(&mut out)
        })
        .collect()
}

/// Skipping an array of items that always take no bytes (an empty record,
/// fixed(0), a record of nulls) divided by their size, zero (found by the
/// differential test; fixed in datum.rs). Claims of 2^40 such items take
/// no time either.
#[test]
fn skipped_arrays_of_zero_size_items() {
    let items = [
        r#"{"type": "record", "name": "Empty", "fields": []}"#,
        r#"{"type": "fixed", "name": "Zero", "size": 0}"#,
        r#"{"type": "record", "name": "Nulls", "fields": [{"name": "n", "type": "null"}]}"#,
    ];
    for item in items {
        let schema = format!(
            r#"{{"type": "record", "name": "Row", "fields": [
                {{"name": "z", "type": {{"type": "array", "items": {item}}}}},
                {{"name": "id", "type": "long"}}]}}"#
        );
        let specs = [FeatureSpec::dense("id", DType::Int64, [])];
        // Record 0: 3 items; record 1: two blocks of 2^40 items.
        let data = [
            long(3),
            long(0),
            long(7),
            long(1 << 40),
            long(1 << 40),
            long(0),
            long(-8),
        ]
        .concat();
        let [all, rest] = &decode(&schema, &specs, &data, 2)[..] else {
            unreachable!()
        };
        let ids = |b: &grist_tensor::Batch| b.get("id").unwrap().as_dense().unwrap().values.clone();
        assert_eq!(
            ids(all.as_ref().unwrap()),
            Values::Int64(vec![7, -8]),
            "{item}"
        );
        assert_eq!(
            ids(rest.as_ref().unwrap()),
            Values::Int64(vec![-8]),
            "{item}"
        );
    }
}

/// Requested arrays of fixed(0) items: their items take no bytes, so the
/// decoder bounded an array's claimed count by one byte per item and
/// refused valid arrays near the end of a block (found while writing the
/// differential test); counting them by no bytes would let a few bytes
/// claim any number of output values. The plan now refuses them, naming
/// the feature, before any record; a scalar fixed(0) still reads as "".
#[test]
fn requested_arrays_of_fixed0_are_refused_when_the_plan_is_built() {
    let schema = r#"{"type": "record", "name": "Row", "fields": [
        {"name": "z", "type": {"type": "array", "items": {"type": "fixed", "name": "Zero", "size": 0}}},
        {"name": "sp", "type": {"type": "record", "name": "Sp", "fields": [
            {"name": "indices0", "type": {"type": "array", "items": "long"}},
            {"name": "values", "type": {"type": "array", "items": "Zero"}}]}},
        {"name": "one", "type": "Zero"}]}"#;
    let specs: [(FeatureSpec, &str); 3] = [
        (FeatureSpec::dense("z", DType::String, [3]), "z"),
        (
            serde_json::from_str(
                r#"{"name": "z", "kind": "varlen", "dtype": "string", "shape": [-1]}"#,
            )
            .unwrap(),
            "z",
        ),
        (
            serde_json::from_str(
                r#"{"name": "sp", "kind": "sparse", "dtype": "string", "shape": [4]}"#,
            )
            .unwrap(),
            "sp",
        ),
    ];
    for (spec, name) in specs {
        let mut d = AvroDecoder::new(std::slice::from_ref(&spec)).unwrap();
        match d.add_schema("fixed0.avro", schema) {
            Err(Error::Schema { file, feature, .. }) => {
                assert_eq!((&*file, feature.as_str()), ("fixed0.avro", name));
            }
            other => panic!("{spec:?}: {other:?}"),
        }
    }
    // The scalar: two records of z = [], sp = {[], []}, one = "".
    let specs = [FeatureSpec::dense("one", DType::String, [])];
    let data = [long(0), long(0), long(0), long(0), long(0), long(0)].concat();
    for (batch, rows) in decode(schema, &specs, &data, 2).into_iter().zip([2, 1]) {
        let one = batch
            .unwrap()
            .get("one")
            .unwrap()
            .as_dense()
            .unwrap()
            .values
            .clone();
        assert_eq!(
            one,
            Values::String(vec![&b""[..]; rows].into_iter().collect())
        );
    }
}

/// A header: the magic, `avro.schema` = `schema`, the sync marker.
fn header_with_schema(schema: &str) -> Vec<u8> {
    let mut out = b"Obj\x01".to_vec();
    out.extend(long(1));
    out.extend(long(11));
    out.extend_from_slice(b"avro.schema");
    out.extend(long(schema.len() as i64));
    out.extend_from_slice(schema.as_bytes());
    out.extend(long(0));
    out.extend_from_slice(&[7; 16]);
    out
}

/// apache-avro 0.21 panics (unwraps) on an invalid name of a named type,
/// an invalid alias, or an invalid name in a type object, so a header
/// whose schema had one aborted the reader (found by the avro_container
/// fuzz target: a record named "Corrup;"). Such schemas were then refused;
/// fastavro accepts any name (and Java writes `Outer$Inner`), so they now
/// read, by the container reader, the decoder and the writer, without
/// apache-avro ever seeing the names.
#[test]
fn schemas_with_names_apache_avro_panics_on_read() {
    let odd = [
        r#"{"type": "record", "name": "Corrup;", "fields": [{"name": "id", "type": "long"}]}"#,
        r#"{"type": "record", "name": "R", "fields": [{"name": "e", "type": {"type": "enum", "name": "a b", "symbols": ["X"]}}]}"#,
        r#"{"type": "record", "name": "R", "fields": [{"name": "f", "type": {"type": "fixed", "name": "9f", "size": 2}}]}"#,
        r#"{"type": "record", "name": "R", "aliases": ["ok", "not ok"], "fields": []}"#,
        r#"{"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": {"type": "record", "fields": [], "name": "x..y"}}}]}"#,
        r#"{"type": "record", "name": "R", "fields": [{"name": "u", "type": ["null", {"type": "record", "name": "in-union", "fields": []}]}, {"name": "v", "type": "in-union"}]}"#,
        r#"{"type": "record", "name": "R", "fields": [{"name": "m", "type": {"type": "map", "values": {"type": "enum", "name": "E.", "symbols": ["A"]}}}]}"#,
        r#"{"type": "record", "name": "ns..R", "fields": []}"#,
        r#"{"type": "error", "name": "com.example.Outer$Inner", "fields": [{"name": "n", "type": ["null", "Outer$Inner"]}]}"#,
    ];
    for schema in odd {
        let file = header_with_schema(schema);
        assert!(
            matches!(
                Header::parse(&file, "odd-name.avro", &Limits::default()),
                Ok(Decoded::Complete { .. })
            ),
            "{schema}"
        );
        BlockReader::new(&file[..], "odd-name.avro", ReaderOptions::default()).unwrap();
        let mut d = AvroDecoder::new(&[]).unwrap();
        d.add_schema("odd-name.avro", schema).unwrap();
        ContainerWriter::new(Vec::new(), schema, WriterOptions::default()).unwrap();
    }
    // A name that is not found is still an error, escaped or not.
    let file = header_with_schema(
        r#"{"type": "record", "name": "A$B", "fields": [{"name": "n", "type": "A$C"}]}"#,
    );
    assert!(matches!(
        Header::parse(&file, "odd-name.avro", &Limits::default()),
        Err(Error::BadHeader { .. })
    ));
    let good = [
        r#"{"type": "record", "name": "R", "namespace": "a.b", "aliases": ["S", "c.T", ".U"], "fields": [
            {"name": "e", "type": {"type": "enum", "name": "x.y.E", "symbols": ["A"]}},
            {"name": "f", "type": {"type": "fixed", "name": ".F", "size": 1}},
            {"name": "g", "type": "x.y.E"},
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}"#,
    ];
    for schema in good {
        let file = header_with_schema(schema);
        assert!(
            matches!(
                Header::parse(&file, "good.avro", &Limits::default()),
                Ok(Decoded::Complete { .. })
            ),
            "{schema}"
        );
        AvroDecoder::new(&[])
            .unwrap()
            .add_schema("good.avro", schema)
            .unwrap();
        ContainerWriter::new(Vec::new(), schema, WriterOptions::default()).unwrap();
    }
}

/// An array block's byte size that lies made skipping and decoding read
/// different bytes (found by the avro_decode fuzz target's split check;
/// fixed in datum.rs: skipping reads the items as decoding does).
/// Skipping a record must consume exactly the bytes decoding it does, even
/// when a negative-count array block's byte size lies.
#[test]
fn skipping_reads_array_blocks_as_decoding_does() {
    let schema = r#"{"type": "record", "name": "Row", "fields": [
        {"name": "a", "type": {"type": "array", "items": "long"}},
        {"name": "b", "type": "long"}]}"#;
    let specs: Vec<FeatureSpec> = serde_json::from_str(
        r#"[{"name": "a", "kind": "varlen", "dtype": "int64", "shape": [-1]},
            {"name": "b", "kind": "dense", "dtype": "int64", "shape": []}]"#,
    )
    .unwrap();
    // Record 0: a = one block of count -1 whose size says 0 bytes (the
    // item takes 1), b = 7. Record 1: a = [], b = 8.
    let data = [
        long(-1),
        long(0),
        long(1),
        long(0),
        long(7),
        long(0),
        long(8),
    ]
    .concat();
    let [all, rest] = &decode(schema, &specs, &data, 2)[..] else {
        unreachable!()
    };
    let b =
        |batch: &grist_tensor::Batch| batch.get("b").unwrap().as_dense().unwrap().values.clone();
    assert_eq!(b(all.as_ref().unwrap()), Values::Int64(vec![7, 8]));
    // Rows 1..2 skip record 0 first.
    assert_eq!(b(rest.as_ref().unwrap()), Values::Int64(vec![8]));
}

/// A fuzz find (`avro_container`): a zstandard file whose block 1 is
/// corrupt. zstd words the failure by the room it decodes into ("Data
/// corruption detected" without a size hint, "Destination buffer is too
/// small" with the previous block's size), so `BlockReader` (hinted) and a
/// block decompressed alone (unhinted) gave different errors.
#[test]
fn a_corrupt_zstandard_block_fails_alike_with_and_without_a_size_hint() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/regressions/zstd_error_depends_on_room.avro"
    );
    let bytes = std::fs::read(path).unwrap();
    let limits = Limits::default()
        .with_max_record_bytes(1 << 20)
        .with_max_alloc_bytes(4 << 20);
    let Ok(Decoded::Complete { value: header, len }) = Header::parse(&bytes, "fuzz", &limits)
    else {
        panic!("header")
    };
    assert_eq!(header.codec, Codec::Zstandard);
    // Each block alone, no hint, as the sans-I/O path does.
    let mut blocks = BlockDecoder::new("fuzz", header.sync)
        .with_limits(limits)
        .with_position(0, len as u64);
    let (mut at, mut alone) = (len, None);
    while let Ok(Decoded::Complete { value, len }) = blocks.decode(&bytes[at..]) {
        let where_ = Location::block("fuzz", value.index);
        let data = &bytes[at + value.data.start..at + value.data.end];
        if let Err(e) = Codec::Zstandard.decompress(data, 0, &limits, &where_) {
            alone = Some(e.to_string());
            break;
        }
        at += len;
    }
    let alone = alone.expect("a block that fails");
    // The reader hints each block with the one before.
    let options = ReaderOptions::default().with_limits(limits);
    let mut reader = BlockReader::new(&bytes[..], "fuzz", options).unwrap();
    let read = loop {
        match reader.next_block() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the reader read it all"),
            Err(e) => break e.to_string(),
        }
    };
    assert_eq!(read, alone);
}
