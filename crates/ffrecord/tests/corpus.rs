//! Every ffrecord case of the golden corpus, through every access mode:
//! open, read by index, batch reads, the chunk source, header metadata,
//! and the writer reproducing the original's files.

use std::fs;
use std::path::PathBuf;

use grist_ffrecord::{
    Access, Error, FfrReader, FfrWriter, ReaderOptions, WriterOptions, encode_file,
};
use grist_tensor::RecordSource;
use grist_testkit::corpus::sha256_hex;
use grist_testkit::temp_dir;

use crate::support::{Case, ExpectedSample, ffrecord_cases, hex_u32, names_file};

/// The ways a case can be opened: positioned reads, memory maps and (for
/// single files) bytes in memory.
fn open_all(case: &Case, options: ReaderOptions) -> Vec<(&'static str, Result<FfrReader, Error>)> {
    // SAFETY: the corpus files are read-only and nothing modifies them
    // while the tests run.
    let mmap = unsafe { Access::mmap() };
    let mut out = vec![
        ("pread", FfrReader::open(&case.input, options)),
        (
            "mmap",
            FfrReader::open(&case.input, options.with_access(mmap)),
        ),
    ];
    if !case.is_dir {
        let bytes = fs::read(&case.input).expect("corpus file");
        let name = case.input.display().to_string();
        out.push(("bytes", FfrReader::from_bytes(&name, bytes.into(), options)));
    }
    out
}

/// Checks an error against the kind, file and (if given) sample the
/// manifest names.
fn assert_error(case: &Case, how: &str, e: &Error, kind: &str, sample: Option<u64>) {
    assert_eq!(e.class().name(), kind, "{} ({how}): {e}", case.name);
    let expected_file = case.error.as_ref().map(|x| x.file.as_str());
    if let (Some(file), Some(expected)) = (e.file(), expected_file) {
        assert!(
            names_file(file, expected),
            "{} ({how}): error names {file}, not {expected}: {e}",
            case.name
        );
    } else {
        assert!(e.file().is_some(), "{} ({how}): no file in {e}", case.name);
    }
    if let Some(index) = sample {
        let at = e
            .location()
            .unwrap_or_else(|| panic!("{} ({how}): no sample in {e}", case.name));
        assert_eq!(at.index.unwrap(), index, "{} ({how}): {e}", case.name);
        // The message names the file and the sample.
        let msg = e.to_string();
        assert!(msg.contains(&*at.file) && msg.contains("sample"), "{msg}");
    }
}

/// Checks sample bytes against the manifest (the checked bytes, or with
/// `unchecked` the bytes a reader without checks returns).
fn assert_sample(case: &Case, how: &str, s: &ExpectedSample, data: &[u8], unchecked: bool) {
    let (len, sha) = match (&s.unchecked, unchecked) {
        (Some((len, sha)), true) => (*len, sha.as_str()),
        _ => (s.len, s.sha256.as_str()),
    };
    assert_eq!(
        data.len() as u64,
        len,
        "{} ({how}): sample {} length",
        case.name,
        s.index
    );
    assert_eq!(
        sha256_hex(data),
        sha,
        "{} ({how}): sample {} bytes",
        case.name,
        s.index
    );
}

#[test]
fn with_checks_every_case_opens_and_reads_as_the_manifest_says() {
    for case in ffrecord_cases() {
        for (how, opened) in open_all(&case, ReaderOptions::default()) {
            let reader = match opened {
                Err(e) => {
                    let expected = case
                        .error
                        .as_ref()
                        .unwrap_or_else(|| panic!("{} ({how}): open failed: {e}", case.name));
                    assert!(
                        matches!(expected.at.as_str(), "open" | "open_or_read"),
                        "{} ({how}): open failed but the error is at {}: {e}",
                        case.name,
                        expected.at
                    );
                    let sample = (expected.at == "open").then_some(expected.sample).flatten();
                    assert_error(&case, how, &e, &expected.kind, sample);
                    continue;
                }
                Ok(r) => r,
            };
            assert!(
                case.error_at() != Some("open"),
                "{} ({how}): opened a file the manifest says fails at open",
                case.name
            );
            assert_eq!(reader.len(), case.n, "{} ({how})", case.name);
            assert_eq!(reader.len(), case.samples.len() as u64);
            let mut first_failure = None;
            for s in &case.samples {
                let at = reader.locate(s.index).unwrap();
                assert!(names_file(&at.file, &s.file), "{} ({how}): {at}", case.name);
                assert_eq!(at.record.unwrap(), s.local_index);
                match reader.read_one(s.index) {
                    Ok(sample) => {
                        assert_eq!(
                            s.read, "ok",
                            "{} ({how}): sample {} read",
                            case.name, s.index
                        );
                        assert_eq!(sample.at, at);
                        assert_eq!(grist_ffrecord::crc32(&sample.data), s.crc32);
                        assert_sample(&case, how, s, &sample.data, false);
                    }
                    Err(e) => {
                        assert_error(&case, how, &e, &s.read, Some(s.index));
                        first_failure.get_or_insert((s.index, s.read.clone()));
                    }
                }
            }
            if let Some(e) = &case.error {
                if e.at == "open_or_read" {
                    let failed = first_failure.as_ref().map(|f| f.0);
                    assert!(
                        failed.is_some_and(|f| Some(f) <= e.sample),
                        "{} ({how}): no failure by sample {:?}",
                        case.name,
                        e.sample
                    );
                }
            }
            // The whole dataset in one batch, forwards, backwards and with
            // repeats: the same bytes, or the first failure in the order
            // asked.
            let n = reader.len();
            let forwards: Vec<u64> = (0..n).collect();
            let backwards: Vec<u64> = (0..n).rev().collect();
            let repeats: Vec<u64> = (0..n).flat_map(|i| [i, n - 1 - i, i]).collect();
            for indices in [forwards, backwards, repeats] {
                let failing = indices
                    .iter()
                    .map(|&i| &case.samples[i as usize])
                    .find(|s| s.read != "ok");
                match (reader.read(&indices), failing) {
                    (Ok(samples), None) => {
                        assert_eq!(samples.len(), indices.len());
                        for (sample, &i) in samples.iter().zip(&indices) {
                            assert_eq!(sample.at.index.unwrap(), i);
                            assert_sample(
                                &case,
                                how,
                                &case.samples[i as usize],
                                &sample.data,
                                false,
                            );
                        }
                    }
                    (Err(e), Some(s)) => assert_error(&case, how, &e, &s.read, Some(s.index)),
                    (Ok(_), Some(s)) => {
                        panic!("{} ({how}): batch read hid sample {}", case.name, s.index)
                    }
                    (Err(e), None) => panic!("{} ({how}): batch read failed: {e}", case.name),
                }
            }
            assert_eq!(reader.read(&[]).unwrap().len(), 0);
            assert!(matches!(
                reader.read(&[n]),
                Err(Error::IndexOutOfRange { index, count }) if index == n && count == n
            ));
        }
    }
}

#[test]
fn without_checks_samples_read_as_the_original_reads_them() {
    for case in ffrecord_cases() {
        let original = &case.json["original_behavior"]["check_data_false"];
        let original_exact = original["open"] == "ok"
            && original["read_one"]["errors"]
                .as_object()
                .is_some_and(|e| e.is_empty())
            && original["read_one"]["ok_bytes_match_manifest"] == true;
        for (how, opened) in open_all(&case, ReaderOptions::default().with_check_data(false)) {
            match opened {
                Ok(reader) => {
                    assert_eq!(reader.len(), case.n, "{} ({how})", case.name);
                    for s in &case.samples {
                        let sample = reader
                            .read_one(s.index)
                            .unwrap_or_else(|e| panic!("{} ({how}): {e}", case.name));
                        assert_sample(&case, how, s, &sample.data, true);
                    }
                    let all: Vec<u64> = (0..reader.len()).rev().collect();
                    for (sample, &i) in reader.read(&all).unwrap().iter().zip(&all) {
                        assert_sample(&case, how, &case.samples[i as usize], &sample.data, true);
                    }
                }
                Err(e) => {
                    // Only structural damage stops a reader without checks,
                    // and only where the original misread or crashed.
                    assert!(
                        matches!(e.class().name(), "truncated" | "invalid_offsets"),
                        "{} ({how}): {e}",
                        case.name
                    );
                    let expected = case.error.as_ref().expect("a damaged case");
                    assert_eq!(
                        e.class().name(),
                        expected.kind,
                        "{} ({how}): {e}",
                        case.name
                    );
                    assert!(
                        !original_exact,
                        "{} ({how}): the original read this file correctly without checks: {e}",
                        case.name
                    );
                }
            }
        }
    }
}

#[test]
fn headers_match_the_manifest() {
    for case in ffrecord_cases() {
        let Ok(reader) =
            FfrReader::open(&case.input, ReaderOptions::default().with_check_data(false))
        else {
            continue;
        };
        let files = case.dataset_files();
        assert_eq!(reader.files().len(), files.len(), "{}", case.name);
        for (info, f) in reader.files().iter().zip(files) {
            let file = f["file"].as_str().unwrap();
            assert!(
                names_file(info.name(), file),
                "{}: {} vs {file}",
                case.name,
                info.name()
            );
            let h = info.header();
            assert_eq!(h.count(), f["n"].as_u64().unwrap(), "{file}");
            assert_eq!(h.file_size(), f["file_size"].as_u64().unwrap(), "{file}");
            assert_eq!(
                h.stored_crc(),
                hex_u32(&f["stored_meta_checksum"]),
                "{file}"
            );
            if !f["computed_meta_checksum"].is_null() {
                assert_eq!(
                    h.computed_crc(),
                    hex_u32(&f["computed_meta_checksum"]),
                    "{file}"
                );
            }
            if let Some(len) = f["header_len"].as_u64() {
                assert_eq!(h.header_len(), len, "{file}");
            }
            if let Some(crcs) = f["checksums"].as_array() {
                let crcs: Vec<u32> = crcs.iter().map(hex_u32).collect();
                assert_eq!(h.checksums(), &crcs[..], "{file}");
            }
            if let Some(offsets) = f["offsets"].as_array() {
                let mut offsets: Vec<u64> = offsets.iter().map(|o| o.as_u64().unwrap()).collect();
                offsets.push(h.file_size());
                assert_eq!(h.offsets(), &offsets[..], "{file}");
            }
            assert_eq!(h.is_legacy(), h.stored_crc() == 0);
            let data = fs::read(info.path().unwrap()).unwrap();
            assert_eq!(
                sha256_hex(&data),
                f["file_sha256"].as_str().unwrap(),
                "{file}"
            );
        }
        // Legacy files are reported (the original warns about them).
        let warned =
            case.json["original_behavior"]["check_data_true"]["stderr_warning"].is_string();
        assert_eq!(
            reader.legacy_files().next().is_some(),
            warned,
            "{}",
            case.name
        );
        // validate() re-checks the metadata whatever the options.
        let meta_ok = reader.files().iter().all(|f| {
            f.header().is_legacy() || f.header().stored_crc() == f.header().computed_crc()
        });
        match reader.validate() {
            Ok(()) => assert!(meta_ok, "{}", case.name),
            Err(e) => {
                assert!(!meta_ok, "{}: {e}", case.name);
                assert!(matches!(e, Error::MetadataChecksum { .. }));
            }
        }
    }
}

#[test]
fn the_source_yields_every_sample_in_order_up_to_the_first_bad_one() {
    for case in ffrecord_cases() {
        for (how, opened) in open_all(&case, ReaderOptions::default()) {
            let Ok(reader) = opened else { continue };
            let first_bad = case.samples.iter().find(|s| s.read != "ok");
            for chunk_bytes in [1, 64, 4 << 20] {
                let mut source = reader.source().with_chunk_bytes(chunk_bytes);
                let mut seen: Vec<Vec<u8>> = Vec::new();
                let mut error = None;
                loop {
                    match source.next_chunk() {
                        Ok(Some(chunk)) => {
                            assert!(chunk.record_count > 0);
                            let s = &case.samples[seen.len()];
                            assert!(names_file(&chunk.file, &s.file), "{}", case.name);
                            assert_eq!(chunk.first_record, s.local_index);
                            assert_eq!(chunk.stored_bytes, chunk.data.len() as u64);
                            for i in 0..chunk.record_count {
                                seen.push(chunk.record(i).unwrap().to_vec());
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            assert!(matches!(source.next_chunk(), Ok(None)));
                            error = Some(e);
                            break;
                        }
                    }
                }
                let good = first_bad.map_or(case.samples.len(), |s| s.index as usize);
                assert_eq!(seen.len(), good, "{} ({how}, {chunk_bytes})", case.name);
                for (data, s) in seen.iter().zip(&case.samples) {
                    assert_sample(&case, how, s, data, false);
                }
                match (error, first_bad) {
                    (None, None) => {}
                    (Some(e), Some(s)) => assert_error(&case, how, &e, &s.read, Some(s.index)),
                    (e, s) => panic!("{} ({how}): source error {e:?}, expected {s:?}", case.name),
                }
            }
        }
    }
}

#[test]
fn the_writer_reproduces_every_file_the_original_wrote() {
    let dir = temp_dir();
    let mut reproduced = 0;
    for case in ffrecord_cases().into_iter().filter(|c| c.valid) {
        for f in case.dataset_files() {
            let writer = f["writer"].as_str().unwrap_or("");
            if !writer.starts_with("HFAiLab/ffrecord FileWriter") {
                // Crafted files (legacy checksums, gaps) are not what a
                // writer produces.
                continue;
            }
            let path = case.path_of(f["file"].as_str().unwrap());
            let reader = FfrReader::open(&path, ReaderOptions::default()).unwrap();
            let samples = reader.read(&(0..reader.len()).collect::<Vec<_>>()).unwrap();
            let expected_sha = f["file_sha256"].as_str().unwrap();
            assert_eq!(
                sha256_hex(&encode_file(samples.iter().map(|s| &s.data[..]))),
                expected_sha
            );
            for count in [Some(reader.len()), None] {
                let out: PathBuf = dir.path().join(format!("{}-{reproduced}.ffr", case.name));
                let mut w =
                    FfrWriter::create(&out, WriterOptions::default().with_count(count)).unwrap();
                for s in &samples {
                    w.write_sample(&s.data).unwrap();
                }
                let summary = w.finish().unwrap();
                let bytes = fs::read(&out).unwrap();
                assert_eq!(summary.bytes, bytes.len() as u64);
                assert_eq!(summary.samples, reader.len());
                assert_eq!(sha256_hex(&bytes), expected_sha, "{} {count:?}", case.name);
                reproduced += 1;
            }
        }
    }
    assert!(reproduced >= 2 * 7, "only {reproduced} files reproduced");
    // Nothing but the finished files is left behind.
    let left = fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(left, reproduced);
}
