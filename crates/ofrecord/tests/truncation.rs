//! Truncation: every prefix of every good corpus part file frames to the
//! whole records it holds and then a truncation error naming the next
//! record and its offset; every prefix of every record parses or fails
//! naming the record, through `Record` and the decoder. Never a panic.

use std::collections::BTreeMap;
use std::sync::Arc;

use grist_ofrecord::{
    Decoded, Error, Field, FrameDecoder, Location, OfRecordDecoder, RawDType, RawSpec,
    ReaderOptions, Record, RecordReader,
};
use grist_tensor::json::batch_to_json;
use grist_tensor::{DType, FeatureSpec};
use grist_testkit::corpus::{self, FolderCase};

/// Files and records above this size are cut at a stride (plus their
/// first and last bytes) where a step copies the prefix.
const SMALL: usize = 64 << 10;

/// The prefix lengths to try of something `len` bytes long.
fn prefixes(len: usize) -> Vec<usize> {
    if len <= SMALL {
        return (0..=len).collect();
    }
    let mut v: Vec<usize> = (0..=256).chain(len - 256..=len).collect();
    v.extend((0..len).step_by(4093));
    v.sort_unstable();
    v.dedup();
    v
}

/// (offset, framed length) of every record of a part, from the manifest.
fn frames(part: &serde_json::Value) -> Vec<(usize, usize)> {
    part["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let offset = r["offset"].as_u64().unwrap() as usize;
            (offset, 8 + r["len"].as_u64().unwrap() as usize)
        })
        .collect()
}

#[test]
fn every_prefix_of_every_good_part_frames_or_names_the_cut_record() {
    let mut tried = 0usize;
    for case in corpus::folder_cases("ofrecord")
        .into_iter()
        .filter(|c| c.valid())
    {
        for part in case.parts() {
            let data = std::fs::read(case.path(&part["file"])).unwrap();
            let want = frames(part);
            // The sans-I/O decoder: every prefix, whatever the size.
            for cut in 0..=data.len() {
                tried += 1;
                let prefix = &data[..cut];
                let mut dec = FrameDecoder::new("p").with_remaining(cut as u64);
                let mut pos = 0;
                let mut whole = 0;
                let err = loop {
                    match dec.decode(&prefix[pos..]) {
                        Ok(Decoded::Frame(f)) => {
                            assert_eq!((pos, f.len), want[whole], "{} cut {cut}", case.name);
                            pos += f.len;
                            whole += 1;
                        }
                        Ok(Decoded::Incomplete { .. }) => break dec.finish(&prefix[pos..]).err(),
                        Err(e) => break Some(e),
                    }
                };
                let expected_whole = want.iter().take_while(|(o, l)| o + l <= cut).count();
                assert_eq!(whole, expected_whole, "{} cut {cut}", case.name);
                match err {
                    None => assert_eq!(pos, cut, "{} cut {cut}", case.name),
                    Some(e) => {
                        assert_eq!(
                            e.manifest_kind(),
                            "truncated",
                            "{} cut {cut}: {e}",
                            case.name
                        );
                        let at = e.location().unwrap();
                        assert_eq!(
                            (at.record, at.offset),
                            (Some(whole as u64), Some(pos as u64))
                        );
                    }
                }
            }
            // The streaming reader over the same prefixes (fewer for big
            // files), with a small buffer.
            for cut in prefixes(data.len()) {
                let options = ReaderOptions::default().with_buffer_size(61);
                let mut r = RecordReader::new(&data[..cut], "p", options);
                let mut n = 0;
                let result = loop {
                    match r.next_record() {
                        Ok(Some(rec)) => {
                            assert_eq!(rec.offset as usize, want[n].0);
                            n += 1;
                        }
                        Ok(None) => break Ok(()),
                        Err(e) => break Err(e),
                    }
                };
                let expected_whole = want.iter().take_while(|(o, l)| o + l <= cut).count();
                assert_eq!(n, expected_whole, "{} cut {cut}", case.name);
                if let Err(e) = result {
                    assert_eq!(e.location().unwrap().record, Some(n as u64));
                }
            }
        }
    }
    assert!(tried > 1_000_000, "only {tried} prefixes");
}

/// Fields reading every feature the case's records hold: a varlen spec of
/// its dtype, or (with `oneflow`) OneFlow's raw decoder for numeric lists
/// and the bytes decoder for bytes lists.
fn fields_for(case: &FolderCase, oneflow: bool) -> Vec<Field> {
    let mut kinds: BTreeMap<String, String> = BTreeMap::new();
    for r in case.records() {
        if let Some(features) = r["features"].as_object() {
            for (name, f) in features {
                kinds.insert(name.clone(), f["kind"].as_str().unwrap().to_string());
            }
        }
    }
    kinds
        .into_iter()
        .filter_map(|(name, kind)| {
            let dtype = match kind.as_str() {
                "bytes_list" => DType::String,
                "float_list" => DType::Float32,
                "double_list" => DType::Float64,
                "int32_list" => DType::Int32,
                "int64_list" => DType::Int64,
                _ => return None,
            };
            Some(match (oneflow, dtype) {
                (false, _) => FeatureSpec::varlen(name, dtype).into(),
                (true, DType::String) => Field::Bytes(grist_ofrecord::BytesSpec { name }),
                (true, _) => RawSpec::new(name, [3], RawDType::Float64)
                    .with_truncate(true)
                    .into(),
            })
        })
        .collect()
}

#[test]
fn every_prefix_of_every_record_parses_or_names_the_record() {
    let file: Arc<str> = "prefix".into();
    let mut tried = 0usize;
    for case in corpus::folder_cases("ofrecord")
        .into_iter()
        .filter(|c| c.valid())
    {
        let mut decoders: Vec<OfRecordDecoder> =
            [fields_for(&case, false), fields_for(&case, true)]
                .into_iter()
                .chain(
                    case.decoder_runs()
                        .iter()
                        .map(|run| vec![Field::from_json(run).unwrap()]),
                )
                .map(|fields| OfRecordDecoder::with_fields(&fields).unwrap())
                .collect();
        for part in case.parts() {
            let data = std::fs::read(case.path(&part["file"])).unwrap();
            for (i, (offset, len)) in frames(part).into_iter().enumerate() {
                let payload = &data[offset + 8..offset + len];
                let at = Location::record(file.clone(), i as u64).with_offset(offset as u64);
                for cut in prefixes(payload.len()) {
                    tried += 1;
                    let prefix = &payload[..cut];
                    if let Err(e) = Record::parse_at(prefix, &at) {
                        assert!(matches!(e, Error::Malformed { .. }), "{e}");
                        assert_eq!(e.location(), Some(&at));
                    }
                    for decoder in &mut decoders {
                        let mut out = decoder.new_batch(1);
                        match decoder.decode(prefix, &at, &mut out) {
                            Ok(()) => {
                                let batch = decoder.finish(&mut out, &file, i as u64);
                                if let Ok(batch) = batch {
                                    batch_to_json(&batch);
                                }
                            }
                            Err(e) => {
                                // The decoder adds the feature, if any.
                                let mut named = e.location().cloned().expect("a location");
                                named.feature = None;
                                assert_eq!(named, at, "{}: {e}", case.name);
                                assert_eq!(out.rows(), 0);
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(tried > 3_000, "only {tried} prefixes");
}
