//! The generic datum API ([`DatumReader`], [`DatumSchema`],
//! [`datum_to_json`]) against the corpus, and on hostile datums.
//!
//! - Every good file: the datums handed out are AvroRecordDataset's
//!   (length and SHA-256 of each), in the blocks fastavro's block reader
//!   saw, and decode to fastavro's records (the manifest's `avro.records`).
//! - Every damaged file: the records of the intact blocks, then an error
//!   naming the damaged block (and where it starts).
//! - Every prefix of every good file: a prefix of the file's datums, then
//!   a clean end or an error; never a panic.
//! - Hand-built blocks and datums with lying counts and lengths, bad
//!   indices, deep nesting and items that take no bytes: errors of the
//!   right variant at the right record, nothing allocated or looped
//!   beyond the bytes present.

use std::fs;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use grist_avro_tensor::{
    AvroValue, Block, BlockReader, ContainerWriter, DatumReader, DatumSchema, Error, Location,
    ReaderOptions, WriterOptions, datum_to_json,
};
use grist_tensor::json::compare_json;
use grist_testkit::corpus::{self, Case, expected_blocks, sha256_hex};
use serde_json::Value;

/// What a [`DatumReader`] hands out for one input, up to the end or the
/// first error.
#[derive(Debug, Default)]
struct Read {
    /// Each datum's bytes, block number and record number.
    datums: Vec<(Vec<u8>, u64, u64)>,
    /// Each datum decoded to JSON.
    json: Vec<Value>,
    error: Option<Error>,
    /// After the error: the block the reader names, and its offset.
    failed_at: Option<(u64, u64)>,
    blocks_read: u64,
}

fn read_all<R: std::io::Read>(mut reader: DatumReader<R>) -> Read {
    let schema = reader.schema().clone();
    let mut read = Read::default();
    loop {
        match reader.next_datum() {
            Ok(Some(d)) => {
                let json = datum_to_json(&schema, d.data, &d.location())
                    .unwrap_or_else(|e| panic!("a checked datum does not decode: {e}"));
                read.json.push(json);
                read.datums.push((d.data.to_vec(), d.block, d.record));
            }
            Ok(None) => break,
            Err(e) => {
                read.error = Some(e);
                read.failed_at = Some((reader.block_index(), reader.block_offset()));
                assert!(
                    matches!(reader.next_datum(), Ok(None)),
                    "the reader goes on after an error"
                );
                break;
            }
        }
    }
    read.blocks_read = reader.blocks_read();
    read
}

#[test]
fn every_good_file_gives_the_manifests_datums_and_records() {
    let mut checked = 0;
    let mut with_datums = 0;
    for case in corpus::cases("avro").into_iter().filter(Case::is_ok) {
        let name = &case.name;
        let mut datums = Vec::new();
        let mut json = Vec::new();
        for (path, container) in case.files.iter().zip(case.containers()) {
            let read = read_all(DatumReader::open(path, ReaderOptions::default()).unwrap());
            assert!(read.error.is_none(), "{name}: {:?}", read.error);
            let blocks = expected_blocks(container);
            assert_eq!(read.blocks_read, blocks.len() as u64, "{name}: blocks");
            // Records are numbered per file, and each is in the block
            // fastavro's block reader counted it in.
            let block_of: Vec<u64> = blocks
                .iter()
                .flat_map(|b| std::iter::repeat_n(b.index, b.record_count as usize))
                .collect();
            assert_eq!(read.datums.len(), block_of.len(), "{name}: records");
            for (i, ((_, block, record), want)) in read.datums.iter().zip(&block_of).enumerate() {
                assert_eq!((*block, *record), (*want, i as u64), "{name}: datum {i}");
            }
            datums.extend(read.datums.into_iter().map(|(d, ..)| d));
            json.extend(read.json);
        }
        let records = case.avro()["records"].as_array().expect("avro.records");
        assert_eq!(json.len(), records.len(), "{name}: records");
        assert_eq!(case.avro()["record_count"], json.len(), "{name}");
        for (i, (want, got)) in records.iter().zip(&json).enumerate() {
            if let Err(m) = compare_json(want, got) {
                panic!("{name}: record {i}: {m}");
            }
        }
        if let Some(want) = case.datums() {
            let got: Vec<(usize, String)> =
                datums.iter().map(|d| (d.len(), sha256_hex(d))).collect();
            assert_eq!(got, want, "{name}: datums");
            with_datums += 1;
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} good cases");
    assert!(with_datums >= 8, "only {with_datums} cases with datums");
}

#[test]
fn datum_ranges_tile_each_block_of_every_good_file() {
    for case in corpus::cases("avro").into_iter().filter(Case::is_ok) {
        for path in &case.files {
            let mut blocks = BlockReader::open(path, ReaderOptions::default()).unwrap();
            let schema =
                DatumSchema::parse(blocks.name().clone(), &blocks.header().schema_json).unwrap();
            let name = blocks.name().clone();
            while let Some(block) = blocks.next_block().unwrap() {
                let ranges = schema.datum_ranges(&name, &block).unwrap();
                assert_eq!(ranges.len(), block.record_count, "{}", case.name);
                let mut at = 0;
                for r in ranges.iter() {
                    assert_eq!(r.start, at, "{}: ranges are contiguous", case.name);
                    assert!(r.end - r.start >= schema.min_datum_size(), "{}", case.name);
                    at = r.end;
                }
                assert_eq!(
                    at,
                    block.data.len(),
                    "{}: ranges cover the block",
                    case.name
                );
            }
        }
    }
}

/// The offset of block `index` of a case's only file: from the manifest's
/// blocks, or just after the last one it lists.
fn block_offset(case: &Case, index: u64) -> u64 {
    let blocks = expected_blocks(case.containers()[0]);
    match blocks.iter().find(|b| b.index == index) {
        Some(b) => b.offset,
        None => blocks.last().map_or(0, |b| b.offset + b.total_size),
    }
}

#[test]
fn damaged_files_give_the_intact_blocks_then_fail_at_the_damage() {
    let mut checked = 0;
    for case in corpus::cases("avro")
        .into_iter()
        .filter(|c| c.outcome == "error")
    {
        let name = &case.name;
        let intact = case.error()["records_in_intact_blocks_before"]
            .as_u64()
            .expect("records_in_intact_blocks_before");
        let reader = match DatumReader::open(&case.files[0], ReaderOptions::default()) {
            Ok(reader) => reader,
            Err(e) => {
                assert!(
                    matches!(e, Error::BadMagic { .. } | Error::BadHeader { .. }),
                    "{name}: {e}"
                );
                assert_eq!(case.failing_block(), None, "{name}: {e}");
                assert_eq!(intact, 0, "{name}");
                checked += 1;
                continue;
            }
        };
        let read = read_all(reader);
        let error = read.error.unwrap_or_else(|| panic!("{name}: no error"));
        assert_eq!(read.datums.len() as u64, intact, "{name}: {error}");
        if let Some(block) = case.failing_block() {
            let at = error
                .location()
                .unwrap_or_else(|| panic!("{name}: {error}"));
            assert_eq!(at.block.unwrap(), block, "{name}: {error}");
            assert!(at.file.ends_with(".avro"), "{name}: {error}");
            assert_eq!(
                read.failed_at,
                Some((block, block_offset(&case, block))),
                "{name}: {error}"
            );
        }
        // The records before the damage are fastavro's.
        let records = case.avro()["records"].as_array().expect("avro.records");
        for (i, (want, got)) in records.iter().zip(&read.json).enumerate() {
            if let Err(m) = compare_json(want, got) {
                panic!("{name}: record {i}: {m}");
            }
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} damaged cases");
}

#[test]
fn every_prefix_of_every_good_file_ends_cleanly_or_fails() {
    let options = ReaderOptions::default().with_buffer_size(64);
    for case in corpus::cases("avro").into_iter().filter(Case::is_ok) {
        for (path, container) in case.files.iter().zip(case.containers()) {
            let bytes = fs::read(path).unwrap();
            let whole = read_all(
                DatumReader::new(BlockReader::new(&bytes[..], "whole", options.clone()).unwrap())
                    .unwrap(),
            );
            let blocks = expected_blocks(container);
            for n in 0..=bytes.len() {
                let what = format!("{} cut at {n}", case.name);
                let Ok(blocks_reader) = BlockReader::new(&bytes[..n], "cut", options.clone())
                else {
                    continue;
                };
                let read = read_all(DatumReader::new(blocks_reader).unwrap());
                let got: Vec<&Vec<u8>> = read.datums.iter().map(|(d, ..)| d).collect();
                let want: Vec<&Vec<u8>> = whole.datums.iter().map(|(d, ..)| d).collect();
                assert!(got.len() <= want.len(), "{what}");
                assert_eq!(got, want[..got.len()], "{what}");
                // A clean end is at a block boundary, with every record of
                // the blocks before it.
                if read.error.is_none() {
                    let header_len = blocks.first().map_or(bytes.len(), |b| b.offset as usize);
                    let at_boundary = n == header_len
                        || blocks
                            .iter()
                            .any(|b| (b.offset + b.total_size) as usize == n);
                    assert!(at_boundary, "{what}: ended cleanly");
                    let records: u64 = blocks
                        .iter()
                        .filter(|b| ((b.offset + b.total_size) as usize) <= n)
                        .map(|b| b.record_count)
                        .sum();
                    assert_eq!(got.len() as u64, records, "{what}");
                }
            }
        }
    }
}

// ---------------------------------------------------------------------
// Hand-built blocks and datums
// ---------------------------------------------------------------------

/// A zig-zag varint.
pub(crate) fn long(v: i64) -> Vec<u8> {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    let mut out = Vec::new();
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
    out
}

fn schema(json: &str) -> DatumSchema {
    DatumSchema::parse("test.avro", json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

/// Block 7 of `test.avro`, whose first record is record 100.
fn block(data: Vec<u8>, record_count: u64) -> Block {
    Block {
        index: 7,
        offset: 1000,
        first_record: 100,
        record_count,
        data: Bytes::from(data),
        stored_bytes: 0,
        compressed: false,
    }
}

fn ranges(s: &DatumSchema, data: Vec<u8>, count: u64) -> Result<Vec<Range<usize>>, Error> {
    s.datum_ranges(&Arc::from("test.avro"), &block(data, count))
        .map(|r| r.iter().collect())
}

fn at(record: u64) -> Location {
    Location::block("test.avro", 7).with_record(record)
}

/// The reason of an [`Error::Datum`] at `want`.
fn datum_error(e: Error, want: &Location) -> String {
    match e {
        Error::Datum { at, reason } if *at == *want => reason,
        other => panic!("expected a datum error at {want}, got {other:?}"),
    }
}

/// Checks that `bad` fails as the second datum of a block (after `good`,
/// so at record 101) and on its own in `decode`, with a reason that says
/// `why`.
fn fails(s: &DatumSchema, good: &[u8], bad: &[u8], why: &str) {
    let data = [good, bad].concat();
    let e = ranges(s, data.clone(), 2).unwrap_err();
    let reason = datum_error(e, &at(101));
    assert!(reason.contains(why), "{why}: {reason}");
    let e = s.decode(bad, &at(3)).unwrap_err();
    let reason = datum_error(e, &at(3));
    assert!(reason.contains(why), "{why}: {reason}");
}

#[test]
fn lying_lengths_and_counts_fail_at_their_record() {
    let s = schema(
        r#"{"type": "record", "name": "R", "fields": [
            {"name": "xs", "type": {"type": "array", "items": "long"}},
            {"name": "s", "type": "string"},
            {"name": "m", "type": {"type": "map", "values": "int"}}]}"#,
    );
    let good = [long(1), long(5), vec![0], long(1), b"a".to_vec(), vec![0]].concat();
    assert_eq!(
        s.decode(&good, &at(0)).unwrap().to_json(),
        serde_json::json!({"xs": [5], "s": "a", "m": {}})
    );
    let huge = long(1 << 40);
    let cases: [(Vec<u8>, &str); 7] = [
        // 2^40 longs, strings and map entries in a few bytes.
        ([huge.clone(), vec![0, 0, 0]].concat(), "more items"),
        (
            [vec![0], huge.clone(), vec![b'x'; 8]].concat(),
            "past the end",
        ),
        (
            [vec![0, 0], huge.clone(), vec![0; 8]].concat(),
            "more items",
        ),
        // A negative length, a negative block size.
        (
            [vec![0], long(-3), vec![b'x'; 8]].concat(),
            "negative length",
        ),
        (
            [long(-1), long(-8), long(1), vec![0, 0, 0]].concat(),
            "negative array block size",
        ),
        // A varint that never ends; a datum cut short.
        ([vec![0x80; 12], vec![0]].concat(), "varint"),
        (vec![0, 10, b'a'], "past the end"),
    ];
    for (bad, why) in cases {
        fails(&s, &good, &bad, why);
    }
}

#[test]
fn bad_indices_booleans_and_ints_fail() {
    let s = schema(
        r#"{"type": "record", "name": "R", "fields": [
            {"name": "u", "type": ["null", "int"]},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "b", "type": "boolean"},
            {"name": "i", "type": "int"}]}"#,
    );
    let good = [long(1), long(-7), long(1), vec![1], long(9)].concat();
    assert_eq!(
        s.decode(&good, &at(0)).unwrap().to_json(),
        serde_json::json!({"u": -7, "e": "B", "b": true, "i": 9})
    );
    let cases: [(Vec<u8>, &str); 5] = [
        (
            [long(2), long(0), vec![1], long(9)].concat(),
            "union branch index",
        ),
        (
            [long(-1), long(0), vec![1], long(9)].concat(),
            "union branch index",
        ),
        ([long(0), long(2), vec![1], long(9)].concat(), "enum index"),
        ([long(0), long(1), vec![2], long(9)].concat(), "boolean"),
        (
            [long(0), long(1), vec![0], long(1 << 31)].concat(),
            "32-bit",
        ),
    ];
    for (bad, why) in cases {
        fails(&s, &good, &bad, why);
    }
}

#[test]
fn record_counts_are_checked_against_the_block() {
    let s = schema(r#""int""#);
    // More records than bytes: refused before anything is allocated.
    match ranges(&s, vec![2, 4, 6], u64::MAX) {
        Err(Error::BadBlock { at, reason }) => {
            assert_eq!(*at, Location::block("test.avro", 7));
            assert!(reason.contains("records claimed in 3 bytes"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ranges(&s, vec![2, 4, 6], 4),
        Err(Error::BadBlock { .. })
    ));
    // Fewer: the bytes after the last record are an error of the block.
    match ranges(&s, vec![2, 4, 6], 2) {
        Err(Error::Datum { at, reason }) => {
            assert_eq!(*at, Location::block("test.avro", 7));
            assert!(reason.contains("1 bytes left"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ranges(&s, vec![2, 4, 6], 3).unwrap(), [0..1, 1..2, 2..3]);
    assert_eq!(ranges(&s, Vec::new(), 0).unwrap(), []);
    // Datums that take no bytes: any number in no bytes, counted without
    // a range stored per datum (2^62 of them is no work), but no bytes
    // left over.
    let null = schema(r#""null""#);
    assert_eq!(null.min_datum_size(), 0);
    assert_eq!(ranges(&null, Vec::new(), 3).unwrap(), [0..0, 0..0, 0..0]);
    let many = null
        .datum_ranges(&Arc::from("test.avro"), &block(Vec::new(), 1 << 62))
        .unwrap();
    assert_eq!(many.len(), 1 << 62);
    assert_eq!(many.get((1 << 62) - 1), Some(0..0));
    assert_eq!(many.get(1 << 62), None);
    assert!(matches!(
        ranges(&null, vec![0; 3], 3),
        Err(Error::Datum { at, .. }) if at.record.is_none()
    ));
    // Trailing bytes after a datum given to decode.
    let reason = datum_error(s.decode(&[2, 4], &at(0)).unwrap_err(), &at(0));
    assert!(reason.contains("1 bytes left after the datum"), "{reason}");
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    let list = schema(
        r#"{"type": "record", "name": "L", "fields": [
            {"name": "next", "type": ["null", "L"]}]}"#,
    );
    let tree = schema(
        r#"{"type": "record", "name": "T", "fields": [
            {"name": "kids", "type": {"type": "array", "items": "T"}}]}"#,
    );
    // A list level is branch 1 of the union, the end branch 0; a tree
    // level is an array block of one child, the end an empty array, and
    // each level's array is closed by a 0 count.
    for (s, closed) in [(&list, false), (&tree, true)] {
        let nested = |levels: usize| {
            let mut d = vec![2; levels];
            d.push(0);
            if closed {
                d.extend(vec![0; levels]);
            }
            d
        };
        // 60 levels read (each is two values deep); 1,000 do not.
        let ok = nested(60);
        let value = s.decode(&ok, &at(0)).unwrap();
        let mut depth = 0;
        let mut v = &value;
        while let AvroValue::Record(fields) = v {
            depth += 1;
            v = match &fields[0].1 {
                AvroValue::Union { value, .. } => value,
                AvroValue::Array(items) if !items.is_empty() => &items[0],
                _ => break,
            };
        }
        assert_eq!(depth, 61);
        let whole = ranges(s, ok.clone(), 1).unwrap();
        assert_eq!((whole.len(), whole[0].clone()), (1, 0..ok.len()));
        let deep = nested(1000);
        let reason = datum_error(s.decode(&deep, &at(0)).unwrap_err(), &at(0));
        assert!(reason.contains("nest too deeply"), "{reason}");
        let reason = datum_error(ranges(s, deep, 1).unwrap_err(), &at(100));
        assert!(reason.contains("nest too deeply"), "{reason}");
    }
}

#[test]
fn items_that_take_no_bytes() {
    for items in [
        r#""null""#,
        r#"{"type": "record", "name": "Empty", "fields": []}"#,
        r#"{"type": "fixed", "name": "F0", "size": 0}"#,
        r#"{"type": "record", "name": "Nulls", "fields": [
            {"name": "a", "type": "null"}, {"name": "b", "type": "null"}]}"#,
    ] {
        let s = schema(&format!(r#"{{"type": "array", "items": {items}}}"#));
        // 2^32 items in a block: boundaries are found at once...
        let most = [long(1 << 32), vec![0]].concat();
        let many = [most.clone(), most.clone(), most.clone()].concat();
        assert_eq!(
            ranges(&s, many, 3).unwrap(),
            [0..6, 6..12, 12..18],
            "{items}"
        );
        // ... but not built: a decode takes 1,024 plus one per byte.
        let reason = datum_error(s.decode(&most, &at(0)).unwrap_err(), &at(0));
        assert!(reason.contains("take no bytes"), "{items}: {reason}");
        let fits = [long(1024 + 3), vec![0]].concat();
        assert_eq!(fits.len(), 3);
        match s.decode(&fits, &at(0)).unwrap() {
            AvroValue::Array(v) => assert_eq!(v.len(), 1027, "{items}"),
            other => panic!("{other:?}"),
        }
        let over = [long(1024 + 4), vec![0]].concat();
        assert!(s.decode(&over, &at(0)).is_err(), "{items}");
        // The budget is per datum, across blocks.
        let split = [long(1000), long(30), vec![0]].concat();
        assert!(s.decode(&split, &at(0)).is_err(), "{items}");
        // More than 2^32 in one block is refused even when skipping.
        let more = [long((1 << 32) + 1), vec![0]].concat();
        let reason = datum_error(ranges(&s, more, 1).unwrap_err(), &at(100));
        assert!(reason.contains("more items"), "{items}: {reason}");
    }
    // Map entries take at least their key's length byte.
    let s = schema(r#"{"type": "map", "values": "null"}"#);
    let reason = datum_error(
        ranges(&s, [long(1 << 32), vec![0]].concat(), 1).unwrap_err(),
        &at(100),
    );
    assert!(reason.contains("more items"), "{reason}");
    let datum = [
        long(2),
        long(1),
        b"a".to_vec(),
        long(1),
        b"b".to_vec(),
        vec![0],
    ]
    .concat();
    assert_eq!(
        s.decode(&datum, &at(0)).unwrap().to_json(),
        serde_json::json!({"a": null, "b": null})
    );
}

#[test]
fn reader_hands_out_whole_good_blocks_then_the_error() {
    let mut w = ContainerWriter::new(
        Vec::new(),
        r#"{"type": "array", "items": "long"}"#,
        WriterOptions::default(),
    )
    .unwrap();
    w.append_block(2, &[2, 2, 0, 0]).unwrap(); // [1], []
    w.append_block(1, &[0]).unwrap(); // []
    // Block 2: a good datum, then an array claiming 2^40 items.
    w.append_block(2, &[[0].as_slice(), &long(1 << 40), &[0]].concat())
        .unwrap();
    w.append_block(1, &[0]).unwrap();
    let (file, _) = w.finish_into_inner().unwrap();
    let blocks = BlockReader::new(&file[..], "w.avro", ReaderOptions::default()).unwrap();
    let header_len = blocks.header_len();
    let read = read_all(DatumReader::new(blocks).unwrap());
    let got: Vec<(Vec<u8>, u64, u64)> = read.datums;
    assert_eq!(
        got,
        [(vec![2, 2, 0], 0, 0), (vec![0], 0, 1), (vec![0], 1, 2)]
    );
    assert_eq!(
        read.json,
        [
            serde_json::json!([1]),
            serde_json::json!([]),
            serde_json::json!([])
        ]
    );
    match read.error {
        Some(Error::Datum { at, reason }) => {
            assert_eq!(*at, Location::block("w.avro", 2).with_record(4));
            assert!(reason.contains("more items"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Block 2 starts after the header and two blocks of (count, size,
    // data, sync).
    let (block, offset) = read.failed_at.unwrap();
    assert_eq!(block, 2);
    assert_eq!(offset, header_len + (1 + 1 + 4 + 16) + (1 + 1 + 1 + 16));
}
