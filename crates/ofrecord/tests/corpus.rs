//! Every OFRecord corpus case read as its manifest says: part files in
//! OneFlow's order, every record's position, length, hash and features,
//! damaged datasets failing at the stated record, file and offset with the
//! stated kind, and OneFlow's part split across ranks.

use grist_ofrecord::{
    Dataset, Error, Location, OfRecordSource, ReaderOptions, Record, Shard, ShardMode,
    balanced_range,
};
use grist_tensor::RecordSource;
use grist_tensor::json::compare_json;
use grist_testkit::corpus::{self, FolderCase, sha256_hex};
use serde_json::Value;

use crate::support::OfCase;

/// One record as read.
#[derive(Debug)]
struct Seen {
    part: usize,
    file: String,
    index_in_part: u64,
    global_index: u64,
    offset: u64,
    payload: Vec<u8>,
    parsed: Result<Record, Error>,
}

/// What reading a whole case gives: every record that frames, and the
/// framing error that ended the reading, if any.
fn read(case: &FolderCase) -> (Vec<Seen>, Option<Error>) {
    let ds = case
        .dataset()
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let mut reader = ds.reader();
    let mut seen = Vec::new();
    loop {
        match reader.next_record() {
            Ok(Some(r)) => {
                let at = Location::record(r.file.clone(), r.index_in_part).with_offset(r.offset);
                seen.push(Seen {
                    part: r.part,
                    file: r.file.to_string(),
                    index_in_part: r.index_in_part,
                    global_index: r.global_index,
                    offset: r.offset,
                    payload: r.payload.to_vec(),
                    parsed: Record::parse_at(r.payload, &at),
                });
            }
            Ok(None) => return (seen, None),
            Err(e) => return (seen, Some(e)),
        }
    }
}

fn check_record(case: &FolderCase, expected: &Value, seen: &Seen) {
    let what = format!("{} record {}", case.name, seen.global_index);
    assert_eq!(expected["global_index"], seen.global_index, "{what}");
    assert_eq!(expected["index_in_part"], seen.index_in_part, "{what}");
    assert_eq!(expected["offset"], seen.offset, "{what}");
    assert_eq!(expected["len"], seen.payload.len(), "{what}");
    assert_eq!(expected["sha256"], sha256_hex(&seen.payload), "{what}");
    match (
        &seen.parsed,
        expected.get("features"),
        expected.get("features_raw"),
    ) {
        (Ok(record), Some(features), _) => {
            let json = record.to_json();
            compare_json(features, &json["features"]).unwrap_or_else(|m| panic!("{what}: {m}"));
        }
        (Ok(record), None, Some(raw)) => {
            let json = record.to_json();
            compare_json(raw, &json["features_raw"]).unwrap_or_else(|m| panic!("{what}: {m}"));
        }
        (Err(e), None, Some(_)) if case.lenient() => {
            assert_eq!(e.manifest_kind(), "protobuf", "{what}: {e}");
        }
        (Err(e), None, None) => {
            assert!(
                expected.get("parse_error").is_some(),
                "{what}: parse failed unexpectedly: {e}"
            );
            assert_eq!(e.manifest_kind(), "protobuf", "{what}");
            assert_eq!(
                e.location().and_then(|l| l.offset),
                Some(seen.offset),
                "{what}"
            );
        }
        (parsed, _, _) => panic!("{what}: got {parsed:?}, manifest says {expected}"),
    }
}

#[test]
fn every_case_reads_as_its_manifest_says() {
    for case in corpus::folder_cases("ofrecord") {
        let (seen, framing) = read(&case);
        let expected = case.records();
        assert_eq!(
            seen.len(),
            expected.len(),
            "{}: records framed ({framing:?})",
            case.name
        );
        for (e, s) in expected.iter().zip(&seen) {
            check_record(&case, e, s);
            assert!(
                s.file.ends_with(&format!(
                    "/{}",
                    case.parts()[s.part]["file"].as_str().unwrap()
                )),
                "{}: {}",
                case.name,
                s.file
            );
        }
        // The first error, framing or parsing, in dataset order.
        let parse_error = seen
            .iter()
            .find_map(|s| s.parsed.as_ref().err().map(|e| (s, e)));
        let first: Option<(u64, &Error)> = match (parse_error, &framing) {
            (Some((s, e)), _) => Some((s.global_index, e)),
            (None, Some(e)) => Some((seen.len() as u64, e)),
            (None, None) => None,
        };
        if case.valid() {
            assert!(first.is_none(), "{}: {first:?}", case.name);
            assert_eq!(case.expected["record_count"], seen.len(), "{}", case.name);
            continue;
        }
        if case.lenient() && first.is_none() {
            continue;
        }
        let (record, err) = first.unwrap_or_else(|| panic!("{}: no error", case.name));
        let want = &case.expected["error"];
        let at = err.location().expect("data errors have a location");
        assert_eq!(want["kind"], err.manifest_kind(), "{}: {err}", case.name);
        assert_eq!(want["record"], record, "{}: {err}", case.name);
        assert_eq!(
            want["offset"],
            at.offset.expect("offset"),
            "{}: {err}",
            case.name
        );
        assert!(
            at.file
                .ends_with(&format!("/{}", want["file"].as_str().unwrap())),
            "{}: {err}",
            case.name
        );
        let before = seen.iter().take_while(|s| s.parsed.is_ok()).count();
        assert_eq!(
            case.expected["records_readable_before_error"], before,
            "{}",
            case.name
        );
        // The part's frame error, as the manifest words it.
        if let Some(Error::TruncatedLength { at, .. } | Error::TruncatedPayload { at, .. }) =
            &framing
        {
            let part = case
                .parts()
                .iter()
                .find(|p| {
                    at.file
                        .ends_with(&format!("/{}", p["file"].as_str().unwrap()))
                })
                .expect("the failing part");
            let fe = &part["frame_error"];
            assert_eq!(fe["record_in_part"], at.record.unwrap(), "{}", case.name);
            assert_eq!(fe["offset"], at.offset.unwrap(), "{}", case.name);
            let message = fe["message"].as_str().unwrap();
            assert!(
                framing.as_ref().unwrap().to_string().ends_with(message),
                "{}: {:?} vs {message:?}",
                case.name,
                framing.as_ref().unwrap().to_string()
            );
        }
    }
}

#[test]
fn parts_are_found_in_numeric_order_and_match_the_manifest() {
    for case in corpus::folder_cases("ofrecord") {
        let ds = case.dataset().unwrap();
        let want: Vec<_> = case.parts().iter().map(|p| case.path(&p["file"])).collect();
        let got: Vec<_> = ds.parts().iter().map(|p| p.path.clone()).collect();
        assert_eq!(got, want, "{}", case.name);
        for (p, path) in case.parts().iter().zip(&got) {
            let bytes = std::fs::read(path).unwrap();
            assert_eq!(p["file_size"], bytes.len(), "{}", case.name);
            assert_eq!(p["file_sha256"], sha256_hex(&bytes), "{}", case.name);
        }
        // Listing the folder finds the same parts.
        let found = Dataset::discover(case.dataset_dir(), case.naming().prefix()).unwrap();
        assert_eq!(found.parts(), ds.parts(), "{}", case.name);
        // Counting records by their length prefixes agrees.
        match ds.record_counts() {
            Ok(counts) => {
                let want: Vec<_> = case
                    .parts()
                    .iter()
                    .map(|p| p["record_count"].clone())
                    .collect();
                assert_eq!(Value::from(counts), Value::from(want), "{}", case.name);
            }
            Err(e) => assert!(e.is_framing(), "{}: {e}", case.name),
        }
    }
}

#[test]
fn a_missing_part_is_an_error_naming_it() {
    let case = corpus::folder_case("ofrecord", "multi_part");
    let opts = &case.expected["reader_options"];
    let parts = opts["data_part_num"].as_u64().unwrap() as usize;
    match Dataset::open(case.dataset_dir(), parts + 1, &case.naming()) {
        Err(Error::MissingPart { file, part }) => {
            assert_eq!(part, parts);
            assert!(file.ends_with(case.naming().name(parts)));
        }
        other => panic!("{other:?}"),
    }
}

/// The chunk source gives the records (and the error) the reader gives, at
/// any chunk size.
#[test]
fn chunks_hold_the_same_records() {
    for case in corpus::folder_cases("ofrecord") {
        let (seen, framing) = read(&case);
        let ds = case.dataset().unwrap();
        for chunk_bytes in [16, 100, 4 << 20] {
            let mut source = OfRecordSource::new(&ds).with_chunk_bytes(chunk_bytes);
            let mut got: Vec<(String, u64, Vec<u8>)> = Vec::new();
            let err = loop {
                match source.next_chunk() {
                    Ok(Some(chunk)) => {
                        for i in 0..chunk.record_count {
                            got.push((
                                chunk.file.to_string(),
                                chunk.first_record + i as u64,
                                chunk.record(i).unwrap().to_vec(),
                            ));
                        }
                    }
                    Ok(None) => break None,
                    Err(e) => break Some(e),
                }
            };
            assert!(source.next_chunk().unwrap().is_none());
            let want: Vec<_> = seen
                .iter()
                .map(|s| (s.file.clone(), s.index_in_part, s.payload.clone()))
                .collect();
            assert_eq!(got, want, "{} at {chunk_bytes}", case.name);
            assert_eq!(
                err.as_ref()
                    .map(|e| (e.manifest_kind(), e.location().cloned())),
                framing
                    .as_ref()
                    .map(|e| (e.manifest_kind(), e.location().cloned())),
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn parts_are_split_across_ranks_as_oneflow_splits_them() {
    let mut checked = 0;
    for case in corpus::folder_cases("ofrecord") {
        let Some(sharding) = case.expected["sharding"].as_object() else {
            continue;
        };
        let ds = case.dataset().unwrap();
        for (world, ranges) in sharding {
            let world: usize = world.parse().unwrap();
            let got: Vec<Value> = ds
                .part_ranges(world)
                .unwrap()
                .into_iter()
                .map(|r| Value::from(vec![r.start, r.end]))
                .collect();
            assert_eq!(Value::from(got), *ranges, "{} over {world}", case.name);
            checked += 1;
        }
        let parts = ds.parts().len();
        assert!(matches!(
            ds.part_ranges(parts + 1),
            Err(Error::TooFewParts { .. })
        ));
        assert!(matches!(
            ds.segments(Shard::new(0, parts + 1).with_mode(ShardMode::Parts)),
            Err(Error::TooFewParts { .. })
        ));
    }
    assert!(checked >= 4, "only {checked} sharding expectations");
}

/// Record sharding: any number of ranks, each a contiguous balanced range
/// of the records, together all of them in order.
#[test]
fn records_are_split_across_more_ranks_than_parts() {
    for case in corpus::folder_cases("ofrecord")
        .into_iter()
        .filter(|c| c.valid())
    {
        let ds = case.dataset().unwrap();
        let all: Vec<Vec<u8>> = read(&case).0.into_iter().map(|s| s.payload).collect();
        let n = all.len() as u64;
        for world in [1, 2, 3, ds.parts().len() + 1, 7] {
            let mut joined = Vec::new();
            for rank in 0..world {
                let shard = Shard::new(rank, world).with_mode(ShardMode::Records);
                let mine = read_source(OfRecordSource::sharded(&ds, shard).unwrap());
                let want = balanced_range(n, world as u64, rank as u64);
                assert_eq!(mine.len() as u64, want.end - want.start, "{}", case.name);
                // The dataset reader over the same segments agrees.
                let segments = ds.segments(shard).unwrap();
                let mut reader =
                    grist_ofrecord::DatasetReader::new(segments, ReaderOptions::default());
                let mut again = Vec::new();
                while let Some(r) = reader.next_record().unwrap() {
                    again.push(r.payload.to_vec());
                }
                assert_eq!(again, mine, "{} rank {rank}/{world}", case.name);
                joined.extend(mine);
            }
            assert_eq!(joined, all, "{} over {world}", case.name);
        }
        assert!(matches!(
            ds.segments(Shard::new(2, 2)),
            Err(Error::BadRank { .. })
        ));
    }
}

fn read_source(mut source: OfRecordSource) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(chunk) = source.next_chunk().unwrap() {
        for i in 0..chunk.record_count {
            out.push(chunk.record(i).unwrap().to_vec());
        }
    }
    out
}
