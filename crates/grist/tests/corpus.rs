//! The golden corpus through the registry and the format contract, from
//! local files and over S3: the same manifests decide both.

use std::path::PathBuf;
use std::sync::Arc;

use grist::Storage;
use grist::tensor::json::{batch_to_json, compare_json};
use grist::tensor::{Format, Input, RecordOptions, SpecFile};
use grist_testkit::corpus::{self, Case, Remote, sha256_hex};
use serde_json::Value;

/// Where the corpus files are read from.
enum Place<'a> {
    Local,
    S3(&'a Remote),
}

impl Place<'_> {
    fn storage(&self) -> Storage {
        match self {
            Place::Local => Storage::new(),
            Place::S3(r) => r.server().storage(),
        }
    }

    /// `paths` as this place names them.
    fn sources(&self, paths: &[PathBuf]) -> Vec<String> {
        paths
            .iter()
            .map(|p| match self {
                Place::Local => p.display().to_string(),
                Place::S3(r) => r.url(p),
            })
            .collect()
    }

    fn name(&self) -> &'static str {
        match self {
            Place::Local => "local",
            Place::S3(_) => "s3",
        }
    }
}

/// Loads `case` with `parse` at `place` on `threads` threads and checks
/// every batch, and the error if the reference reader failed, against the
/// manifest.
fn check_parse(case: &Case, parse: &Value, place: &Place<'_>, threads: usize) {
    let what = format!(
        "{} / {} / {} / {threads} threads",
        case.name,
        parse["id"].as_str().unwrap_or("?"),
        place.name()
    );
    let spec = SpecFile::from_json(&parse.to_string()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let sources: Vec<PathBuf> = place
        .sources(&case.files)
        .into_iter()
        .map(PathBuf::from)
        .collect();
    let batches = parse["batches"].as_array().cloned().unwrap_or_default();
    let built = grist::loader()
        .with_storage(place.storage())
        .with_paths(sources)
        .with_spec_file(spec)
        .with_batch_size(parse["batch_size"].as_u64().unwrap_or(1) as usize)
        .with_threads(grist::Threads::Fixed(threads))
        .build();
    let mut got = Vec::new();
    let mut error = None;
    match built {
        Ok(loader) => {
            for b in loader {
                match b {
                    Ok(b) => got.push(batch_to_json(&b)),
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
        }
        Err(e) => error = Some(e),
    }
    if parse["outcome"] == "ok" {
        if let Some(e) = error {
            panic!("{what}: {e}");
        }
        assert_eq!(got.len(), batches.len(), "{what}: batch count");
    } else {
        let e = error.unwrap_or_else(|| panic!("{what}: no error"));
        // Without `batches_before_error` (tensorflow-io's parse_avro
        // cases), the batches that came before are `batches` (null: none).
        let before = parse["error"]["batches_before_error"]
            .as_u64()
            .map_or(batches.len(), |b| b as usize);
        assert_eq!(got.len(), before, "{what}: batches before the error ({e})");
        // An error about the data names the file (the path or URL as
        // given) and the record, and the message says so too.
        if let Some(at) = e.location().filter(|at| !at.file.is_empty()) {
            let sources = place.sources(&case.files);
            assert!(sources.iter().any(|s| **s == *at.file), "{what}: {at}");
            assert!(e.to_string().contains(&*at.file), "{what}: {e}");
        }
    }
    for (i, (want, got)) in batches.iter().zip(&got).enumerate() {
        if let Err(m) = compare_json(want, got) {
            panic!("{what}: batch {i}: {m}");
        }
    }
}

/// Every TFRecord and Avro parse (ATDS and key expressions), locally and
/// over S3, on one and two threads.
#[test]
fn every_parse_matches_the_manifest_locally_and_over_s3() {
    let remote = Remote::start();
    let mut checked = 0;
    for section in ["tfrecord", "avro"] {
        for case in corpus::cases(section) {
            for parse in case.parses() {
                for place in [Place::Local, Place::S3(&remote)] {
                    for threads in [1, 2] {
                        check_parse(&case, parse, &place, threads);
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 100, "{checked} parses checked");
}

/// The records of `files` (read as `format`, one dataset) through the
/// contract's `Records`: each one's bytes, or the error they stopped at.
fn records(
    format: &Arc<dyn Format>,
    place: &Place<'_>,
    files: &[PathBuf],
) -> (Vec<Vec<u8>>, Option<String>) {
    records_decoded(format, place, files, false)
}

/// [`records`], each record also decoded generically (`decode`), a record
/// that does not decode ending them as an error.
fn records_decoded(
    format: &Arc<dyn Format>,
    place: &Place<'_>,
    files: &[PathBuf],
    decode: bool,
) -> (Vec<Vec<u8>>, Option<String>) {
    let storage = place.storage();
    let inputs: Vec<Input> = place
        .sources(files)
        .iter()
        .map(|s| Input::parse(&storage, s).unwrap())
        .collect();
    let mut out = Vec::new();
    let mut records = match format.records(&inputs, &RecordOptions::default()) {
        Ok(r) => r,
        Err(e) => return (out, Some(e.to_string())),
    };
    loop {
        match records.next_record() {
            Ok(Some(r)) => {
                if decode {
                    if let Err(e) = records.to_json(&r) {
                        return (out, Some(e.to_string()));
                    }
                }
                out.push(r.bytes.to_vec())
            }
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
}

/// The TFRecord framing (each payload's SHA-256) of every case, locally and
/// over S3: the records TensorFlow returned, then its error if it failed.
#[test]
fn tfrecord_framing_matches_locally_and_over_s3() {
    let remote = Remote::start();
    let format = grist::registry().get("tfrecord").unwrap();
    for case in corpus::cases("tfrecord") {
        let tf = case.tfrecord();
        let want: Vec<String> = case.records().into_iter().map(|(_, sha)| sha).collect();
        for place in [Place::Local, Place::S3(&remote)] {
            let what = format!("{} / {}", case.name, place.name());
            let (got, error) = records(&format, &place, &case.files);
            let got: Vec<String> = got.iter().map(|r| sha256_hex(r)).collect();
            if tf["error"].is_null() {
                assert_eq!(error, None, "{what}");
                assert_eq!(got, want, "{what}");
            } else if case.compression_name() == "NONE" {
                assert!(error.is_some(), "{what}: no error");
                assert_eq!(got, want, "{what}: the records before the error");
            } else {
                // A streaming reader may hand out more records of a
                // damaged compressed stream than TensorFlow's buffered one
                // (see the corpus README), but must fail.
                assert!(error.is_some(), "{what}: no error");
                assert!(got.len() >= want.len(), "{what}");
                assert_eq!(got[..want.len()], want, "{what}");
            }
        }
    }
}

/// Every Avro datum (its SHA-256, as tensorflow-io's AvroRecordDataset
/// gave it) of the intact cases, locally and over S3.
#[test]
fn avro_datums_match_locally_and_over_s3() {
    let remote = Remote::start();
    let format = grist::registry().get("avro").unwrap();
    let mut checked = 0;
    for case in corpus::cases("avro").into_iter().filter(Case::is_ok) {
        let Some(datums) = case.datums() else {
            continue;
        };
        let want: Vec<String> = datums.into_iter().map(|(_, sha)| sha).collect();
        for place in [Place::Local, Place::S3(&remote)] {
            let what = format!("{} / {}", case.name, place.name());
            let (got, error) = records(&format, &place, &case.files);
            assert_eq!(error, None, "{what}");
            let got: Vec<String> = got.iter().map(|r| sha256_hex(r)).collect();
            assert_eq!(got, want, "{what}");
            checked += 1;
        }
    }
    assert!(checked > 10);
}

/// Every FFRecord case: the samples of the intact ones (SHA-256 each), and
/// an error for the damaged ones, locally and over S3.
#[test]
fn ffrecord_samples_match_locally_and_over_s3() {
    let remote = Remote::start();
    let format = grist::registry().get("ffrecord").unwrap();
    for case in corpus::folder_cases("ffrecord") {
        let input = case.input();
        let files: Vec<PathBuf> = if input.is_dir() {
            grist::ffrecord::dataset_files(&input).unwrap()
        } else {
            vec![input]
        };
        let want: Vec<&str> = case
            .samples()
            .iter()
            .map(|s| s["sha256"].as_str().unwrap())
            .collect();
        for place in [Place::Local, Place::S3(&remote)] {
            let what = format!("{} / {}", case.name, place.name());
            let (got, error) = records(&format, &place, &files);
            let got: Vec<String> = got.iter().map(|r| sha256_hex(r)).collect();
            if case.valid() {
                assert_eq!(error, None, "{what}");
                assert_eq!(got, want, "{what}");
            } else {
                let error = error.unwrap_or_else(|| panic!("{what}: no error"));
                let file = case.expected["error"]["file"].as_str().unwrap();
                assert!(error.contains(file), "{what}: {error}");
                assert_eq!(got, want[..got.len()], "{what}");
            }
        }
    }
}

/// Every OFRecord case: each part's records (SHA-256 each) for the intact
/// ones, records then an error for the damaged ones, locally and over S3.
#[test]
fn ofrecord_records_match_locally_and_over_s3() {
    let remote = Remote::start();
    let format = grist::registry().get("ofrecord").unwrap();
    for case in corpus::folder_cases("ofrecord") {
        let parts = case.parts();
        let files: Vec<PathBuf> = parts.iter().map(|p| case.path(&p["file"])).collect();
        let want: Vec<String> = parts
            .iter()
            .flat_map(|p| p["records"].as_array().cloned().unwrap_or_default())
            .filter_map(|r| r["sha256"].as_str().map(str::to_string))
            .collect();
        for place in [Place::Local, Place::S3(&remote)] {
            let what = format!("{} / {}", case.name, place.name());
            let (got, error) = records_decoded(&format, &place, &files, true);
            let got: Vec<String> = got.iter().map(|r| sha256_hex(r)).collect();
            if case.valid() {
                assert_eq!(error, None, "{what}");
                assert_eq!(got, want, "{what}");
            } else {
                assert!(error.is_some(), "{what}: no error");
                let before = case.expected["records_readable_before_error"]
                    .as_u64()
                    .unwrap() as usize;
                assert_eq!(got.len(), before, "{what}: records before the error");
            }
        }
    }
}
