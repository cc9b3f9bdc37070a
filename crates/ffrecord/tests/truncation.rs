//! Every prefix of every good corpus file: opening and reading it fails
//! with a typed error (it may not read back whole), never panics, and
//! every access mode agrees.

use std::fs;

use grist_ffrecord::{Access, Error, FfrReader, ReaderOptions};
use grist_testkit::temp_dir;

use crate::support::ffrecord_cases;

/// Opens and reads all of a dataset; the error kind that stopped it, or
/// the samples.
fn read_everything(opened: Result<FfrReader, Error>) -> Result<Vec<Vec<u8>>, &'static str> {
    let reader = opened.map_err(|e| e.class().name())?;
    let all: Vec<u64> = (0..reader.len()).collect();
    let batch = reader.read(&all).map_err(|e| e.class().name())?;
    let mut one_by_one = Vec::new();
    for &i in &all {
        one_by_one.push(
            reader
                .read_one(i)
                .map_err(|e| e.class().name())?
                .data
                .to_vec(),
        );
    }
    let batch: Vec<Vec<u8>> = batch.iter().map(|s| s.data.to_vec()).collect();
    assert_eq!(batch, one_by_one);
    Ok(batch)
}

#[test]
fn every_prefix_of_every_good_file_fails_cleanly() {
    let dir = temp_dir();
    let scratch = dir.path().join("prefix.ffr");
    // SAFETY: the scratch file is only rewritten after the readers over
    // it are dropped.
    let mmap = unsafe { Access::mmap() };
    let mut prefixes = 0u64;
    let mut via_files = 0u64;
    for case in ffrecord_cases().into_iter().filter(|c| c.valid) {
        for f in case.dataset_files() {
            let path = case.path_of(f["file"].as_str().unwrap());
            let data = fs::read(&path).unwrap();
            let shared = bytes::Bytes::from(data.clone());
            let whole = read_everything(FfrReader::from_bytes(
                "whole",
                data.clone().into(),
                ReaderOptions::default(),
            ))
            .expect("a good file reads");
            for len in 0..=data.len() {
                prefixes += 1;
                let prefix = shared.slice(..len);
                let got = read_everything(FfrReader::from_bytes(
                    "prefix",
                    prefix.clone(),
                    ReaderOptions::default(),
                ));
                if len == data.len() {
                    assert_eq!(got, Ok(whole.clone()));
                } else {
                    // No end marker, but a cut always shows: in the header,
                    // in an offset past the end, or in the last sample's
                    // checksum.
                    let kind = got.clone().expect_err("a proper prefix reads whole");
                    assert!(
                        matches!(kind, "truncated" | "invalid_offsets" | "sample_checksum"),
                        "{}: prefix {len}: {kind}",
                        case.name
                    );
                }
                // Without checks, only structure can fail.
                if let Err(kind) = read_everything(FfrReader::from_bytes(
                    "prefix",
                    prefix,
                    ReaderOptions::default().with_check_data(false),
                )) {
                    assert!(matches!(kind, "truncated" | "invalid_offsets"), "{kind}");
                }
                // Through real files, for small files and a spread of
                // prefixes of big ones: pread and mmap agree with bytes.
                let near_end = data.len() - len < 64;
                if data.len() <= 8192 || near_end || len % 16411 == 0 {
                    via_files += 1;
                    fs::write(&scratch, &data[..len]).unwrap();
                    let pread =
                        read_everything(FfrReader::open(&scratch, ReaderOptions::default()));
                    let mapped = read_everything(FfrReader::open(
                        &scratch,
                        ReaderOptions::default().with_access(mmap),
                    ));
                    assert_eq!(pread, got, "{}: prefix {len} (pread)", case.name);
                    assert_eq!(mapped, got, "{}: prefix {len} (mmap)", case.name);
                }
            }
        }
    }
    assert!(prefixes > 1_000_000, "only {prefixes} prefixes");
    assert!(via_files > 500, "only {via_files} prefixes through files");
}
