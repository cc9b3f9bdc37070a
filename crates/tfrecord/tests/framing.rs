//! Framing, compression, index, writer and chunk-source tests against the
//! golden corpus.

use std::fs;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use grist_tensor::{Chunk, Limits, RecordLayout, RecordSource};
use grist_tfrecord::{
    Compression, Decoded, Error, FRAME_OVERHEAD, FrameDecoder, IndexEntry, IndexedReader,
    ReaderOptions, RecordReader, RecordWriter, TfRecordSource, WriterOptions, build_index,
    index_path, masked_crc32c, parse_index, read_index, verify_index, write_index,
};

use grist_testkit::corpus::{self, Case, sha256_hex};
use grist_testkit::{dir_entries, temp_dir};

use crate::support::TfCase;

// ---------------------------------------------------------------- helpers

/// Reads every record of `file` with a [`RecordReader`]; returns the
/// records delivered and the error that ended the stream, if any.
fn read_all(file: &Path, options: ReaderOptions) -> (Vec<Vec<u8>>, Option<Error>) {
    let mut reader = match RecordReader::open(file, options) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut records = Vec::new();
    loop {
        match reader.next_record() {
            Ok(Some(r)) => {
                records.push(r.to_vec());
                assert_eq!(reader.record_index() + 1, records.len() as u64);
            }
            Ok(None) => return (records, None),
            Err(e) => {
                // The reader ends after an error.
                assert!(matches!(reader.next_record(), Ok(None)));
                return (records, Some(e));
            }
        }
    }
}

/// Reads `bytes` (a whole stream in memory) with a [`RecordReader`].
fn read_bytes(
    bytes: &[u8],
    compression: Compression,
    options: ReaderOptions,
) -> (Vec<Vec<u8>>, Option<Error>) {
    let mut reader = match RecordReader::new(Cursor::new(bytes), "mem", compression, options) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut records = Vec::new();
    loop {
        match reader.next_record() {
            Ok(Some(r)) => records.push(r.to_vec()),
            Ok(None) => return (records, None),
            Err(e) => return (records, Some(e)),
        }
    }
}

/// Reads every record of `files` through a [`TfRecordSource`], checking
/// the chunk bookkeeping on the way.
fn read_source(
    files: &[PathBuf],
    options: ReaderOptions,
    chunk_bytes: usize,
) -> (Vec<Vec<Vec<u8>>>, Vec<Chunk>, Option<Error>) {
    let mut source = TfRecordSource::new(files.iter().cloned())
        .with_options(options)
        .with_chunk_bytes(chunk_bytes);
    let mut per_file: Vec<Vec<Vec<u8>>> = vec![Vec::new(); files.len()];
    let mut chunks = Vec::new();
    let mut error = None;
    loop {
        match source.next_chunk() {
            Ok(Some(chunk)) => {
                let i = files
                    .iter()
                    .position(|f| f.display().to_string() == *chunk.file)
                    .expect("chunk names one of the files");
                assert_eq!(chunk.first_record, per_file[i].len() as u64);
                let RecordLayout::Spans(spans) = &chunk.layout else {
                    panic!("TFRecord chunks have spans");
                };
                assert_eq!(spans.len(), chunk.record_count);
                assert!(chunk.record_count > 0, "no empty chunks");
                for r in 0..chunk.record_count {
                    per_file[i].push(chunk.record(r).expect("span inside data").to_vec());
                }
                chunks.push(chunk);
            }
            Ok(None) => break,
            Err(e) => {
                error = Some(e);
                assert!(
                    matches!(source.next_chunk(), Ok(None)),
                    "source ends after an error"
                );
                break;
            }
        }
    }
    (per_file, chunks, error)
}

/// Checks `records` against the case's `tfrecord.records` (length and
/// sha256 of each).
fn assert_records(case: &Case, records: &[Vec<u8>], how: &str) {
    let expected = case.records();
    assert_eq!(
        records.len(),
        expected.len(),
        "{} ({how}): record count",
        case.name
    );
    for (i, (r, (len, sha))) in records.iter().zip(&expected).enumerate() {
        assert_eq!(r.len(), *len, "{} ({how}): record {i} length", case.name);
        assert_eq!(
            &sha256_hex(r),
            sha,
            "{} ({how}): record {i} sha256",
            case.name
        );
    }
}

/// The kind of framing error TensorFlow reported, from its message.
#[derive(Debug, PartialEq)]
enum TfError {
    /// `corrupted record at N`
    Corrupted(u64),
    /// `truncated record at N`
    Truncated(u64),
    /// Anything else (e.g. an inflate failure): no offset.
    Other,
}

/// Parses TensorFlow's DataLossError message.
fn parse_tf_message(message: &str) -> TfError {
    fn number_after(message: &str, key: &str) -> Option<u64> {
        let rest = &message[message.find(key)? + key.len()..];
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        digits.parse().ok()
    }
    if let Some(n) = number_after(message, "corrupted record at ") {
        TfError::Corrupted(n)
    } else if let Some(n) = number_after(message, "truncated record at ") {
        TfError::Truncated(n)
    } else {
        TfError::Other
    }
}

#[test]
fn tf_message_parser() {
    assert_eq!(
        parse_tf_message("corrupted record at 174"),
        TfError::Corrupted(174)
    );
    assert_eq!(
        parse_tf_message("truncated record at 233' failed with Read less bytes than requested"),
        TfError::Truncated(233)
    );
    assert_eq!(parse_tf_message("inflate() failed"), TfError::Other);
}

/// Checks the error a reader gave for an `expected: "error"` case against
/// TensorFlow's, and the records delivered before it.
fn check_error_case(case: &Case, records: &[Vec<u8>], error: Option<Error>, how: &str) {
    let name = &case.name;
    let tf = &case.tfrecord()["error"];
    let Some(error) = error else {
        panic!(
            "{name} ({how}): expected an error, read {} records",
            records.len()
        );
    };
    assert!(error.is_data_loss(), "{name} ({how}): {error:?}");
    let message = tf["message"].as_str().expect("error.message");
    let failing = tf["failing_record_index"]
        .as_u64()
        .expect("failing_record_index");
    assert_eq!(
        tf["records_before_error"].as_u64(),
        Some(case.records().len() as u64),
        "{name}: manifest consistency"
    );
    let lengths: Vec<u64> = case.records().iter().map(|(l, _)| *l as u64).collect();
    match parse_tf_message(message) {
        TfError::Other => {
            // A damaged compressed stream: TF's buffered inflate stops
            // earlier than a streaming reader may; every record we did
            // deliver before failing must be one of the originals, and TF's
            // records must be a prefix of ours.
            assert_ne!(case.compression(), Compression::None, "{name}: {message}");
            let original = case.expected["original_file"]["record_count"]
                .as_u64()
                .expect("original_file.record_count");
            assert!(
                (records.len() as u64) < original || matches!(error, Error::Decompress { .. }),
                "{name} ({how}): {} records then {error:?}",
                records.len()
            );
            for (i, (len, sha)) in case.records().iter().enumerate() {
                assert_eq!(records[i].len(), *len, "{name}: record {i}");
                assert_eq!(&sha256_hex(&records[i]), sha, "{name}: record {i}");
            }
        }
        tf_error => {
            assert_records(case, records, how);
            assert_eq!(failing, records.len() as u64, "{name}: failing index");
            let location = error.location().expect("data errors have a location");
            assert_eq!(location.record, Some(failing), "{name} ({how}): {error:?}");
            // Where the failing record starts, from the manifest's lengths.
            let start: u64 = lengths.iter().map(|l| l + FRAME_OVERHEAD as u64).sum();
            match (tf_error, &error) {
                (TfError::Corrupted(at), Error::CorruptLength { offset, .. }) => {
                    assert_eq!(at, start, "{name}: TF reports the record start");
                    assert_eq!(*offset, at, "{name} ({how})");
                }
                (TfError::Corrupted(at), Error::CorruptData { offset, .. }) => {
                    assert_eq!(at, start + 12, "{name}: TF reports the payload start");
                    assert_eq!(*offset, at, "{name} ({how})");
                }
                (TfError::Truncated(at), Error::Truncated { offset, .. }) => {
                    assert_eq!(*offset, at, "{name} ({how})");
                }
                (tf_error, error) => {
                    panic!("{name} ({how}): TF said {tf_error:?} ({message}), we said {error:?}")
                }
            }
        }
    }
}

/// The corpus cases whose codec is built in (all, with default features).
fn enabled_cases() -> Vec<Case> {
    corpus::cases("tfrecord")
        .into_iter()
        .filter(|c| c.compression().is_enabled())
        .collect()
}

fn options_for(case: &Case) -> ReaderOptions {
    ReaderOptions::default().with_compression(Some(case.compression()))
}

// ------------------------------------------------------- corpus: reading

#[test]
fn corpus_cases_read_like_tensorflow() {
    let cases = enabled_cases();
    assert!(cases.iter().any(|c| c.outcome == "error"));
    if cfg!(all(feature = "gzip", feature = "zlib")) {
        assert_eq!(cases.len(), corpus::cases("tfrecord").len());
    }
    for case in &cases {
        // The extension alone must pick the codec TF was told to use.
        assert_eq!(
            Compression::from_path(case.file()),
            case.compression(),
            "{}",
            case.name
        );
        for (how, options) in [
            ("default", ReaderOptions::default()),
            ("explicit", options_for(case)),
            ("64-byte buffer", options_for(case).with_buffer_size(64)),
            ("1000-byte buffer", options_for(case).with_buffer_size(1000)),
        ] {
            let (records, error) = read_all(case.file(), options);
            match case.outcome.as_str() {
                "ok" => {
                    assert!(error.is_none(), "{} ({how}): {error:?}", case.name);
                    assert_records(case, &records, how);
                }
                "error" => check_error_case(case, &records, error, how),
                other => panic!("{}: unexpected outcome {other:?}", case.name),
            }
        }
    }
}

#[test]
fn corpus_error_locations_name_the_file() {
    for case in enabled_cases().iter().filter(|c| c.outcome == "error") {
        let (_, error) = read_all(case.file(), ReaderOptions::default());
        let error = error.expect("an error");
        let location = error.location().expect("a location");
        assert_eq!(*location.file, *case.file().display().to_string());
        assert!(error.to_string().contains(&*location.file), "{error}");
    }
}

#[test]
fn records_iterator_matches_next_record() {
    for case in enabled_cases().iter().filter(|c| c.is_ok()) {
        let reader = RecordReader::open(case.file(), ReaderOptions::default()).unwrap();
        let records: Vec<Vec<u8>> = reader
            .records()
            .map(|r| r.expect("good file").to_vec())
            .collect();
        assert_records(case, &records, "records()");
    }
    let case = corpus::case("tfrecord", "tfr_truncated");
    let mut it = RecordReader::open(case.file(), ReaderOptions::default())
        .unwrap()
        .records();
    let results: Vec<_> = it.by_ref().collect();
    assert_eq!(results.len(), case.records().len() + 1);
    assert!(matches!(results.last(), Some(Err(Error::Truncated { .. }))));
    assert!(it.next().is_none());
}

#[test]
fn reader_reports_offsets_of_frames() {
    let case = corpus::case("tfrecord", "tfr_example_basic");
    let mut reader = RecordReader::open(case.file(), ReaderOptions::default()).unwrap();
    let mut expected_offset = 0;
    while let Some(r) = reader.next_record().unwrap() {
        let len = r.len() as u64;
        assert_eq!(reader.offset(), expected_offset);
        expected_offset += len + FRAME_OVERHEAD as u64;
    }
    assert_eq!(expected_offset, fs::metadata(case.file()).unwrap().len());
    assert_eq!(reader.records_read(), case.records().len() as u64);
}

#[test]
fn corrupt_gzip_fails() {
    if !Compression::Gzip.is_enabled() {
        return;
    }
    let case = corpus::case("tfrecord", "tfr_corrupt_gzip");
    assert_eq!(case.compression(), Compression::Gzip);
    let (records, error) = read_all(case.file(), ReaderOptions::default());
    let error = error.expect("a damaged deflate stream must fail");
    assert!(error.is_data_loss(), "{error:?}");
    let (chunked, _, source_error) = read_source(&case.files, ReaderOptions::default(), 4096);
    assert!(source_error.is_some());
    assert!(chunked[0].len() <= records.len() + 1);
}

#[test]
fn crc_off_reads_past_crc_damage() {
    for name in ["tfr_corrupt_data_crc", "tfr_corrupt_length_crc_field"] {
        let case = corpus::case("tfrecord", name);
        let original = case.expected["original_file"]["record_count"]
            .as_u64()
            .unwrap() as usize;
        let options = ReaderOptions::default().with_check_crc(false);
        let (records, error) = read_all(case.file(), options.clone());
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(records.len(), original, "{name}");
        // The records TF delivered are the same.
        for (i, (len, sha)) in case.records().iter().enumerate() {
            assert_eq!((records[i].len(), &sha256_hex(&records[i])), (*len, sha));
        }
        let (chunked, _, error) = read_source(&case.files, options, 64);
        assert!(error.is_none());
        assert_eq!(chunked[0], records);
    }
    // A damaged length with no CRC to catch it misframes the file: some
    // error or garbage, never a panic.
    let case = corpus::case("tfrecord", "tfr_corrupt_length");
    let _ = read_all(case.file(), ReaderOptions::default().with_check_crc(false));
}

// ------------------------------------------------- corpus: chunk source

#[test]
fn source_chunks_cover_every_record_once() {
    for case in enabled_cases() {
        for chunk_bytes in [16, 100, 1000, 1 << 16, 4 << 20] {
            let how = format!("source, chunk_bytes {chunk_bytes}");
            let (records, chunks, error) =
                read_source(&case.files, ReaderOptions::default(), chunk_bytes);
            let records = &records[0];
            if case.is_ok() {
                assert!(error.is_none(), "{} ({how}): {error:?}", case.name);
                assert_records(&case, records, &how);
                let size = fs::metadata(case.file()).unwrap().len();
                let stored: u64 = chunks.iter().map(|c| c.stored_bytes).sum();
                if case.compression() == Compression::None {
                    assert_eq!(stored, size, "{} ({how})", case.name);
                } else {
                    assert!(stored <= size && (size == 0 || stored > 0), "{}", case.name);
                }
            } else {
                check_error_case(&case, records, error, &how);
            }
            for (i, c) in chunks.iter().enumerate() {
                assert_eq!(c.index, i as u64);
                assert_eq!(c.compressed, case.compression() != Compression::None);
                if c.record_count > 1 {
                    // Only a lone oversize frame exceeds the chunk size.
                    assert!(c.data.len() <= chunk_bytes.max(16), "{}", case.name);
                }
            }
        }
    }
}

#[test]
fn source_reads_many_files_in_order() {
    let cases: Vec<Case> = enabled_cases().into_iter().filter(|c| c.is_ok()).collect();
    let files: Vec<PathBuf> = cases.iter().map(|c| c.file().to_path_buf()).collect();
    let (per_file, chunks, error) = read_source(&files, ReaderOptions::default(), 256);
    assert!(error.is_none(), "{error:?}");
    for (case, records) in cases.iter().zip(&per_file) {
        assert_records(case, records, "multi-file source");
    }
    // Chunks come file by file.
    let order: Vec<&str> = chunks.iter().map(|c| &*c.file).collect();
    let mut dedup = order.clone();
    dedup.dedup();
    let mut unique = dedup.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(dedup.len(), unique.len());
}

#[test]
fn source_reports_missing_files() {
    let dir = temp_dir();
    let missing = dir.path().join("nope.tfrecord");
    let mut source = TfRecordSource::new([&missing]);
    match source.next_chunk() {
        Err(Error::Storage(e)) => {
            assert!(e.is_not_found(), "{e}");
            let at = grist_tensor::FormatError::location(&e).unwrap();
            assert_eq!(*at.file, *missing.display().to_string());
        }
        other => panic!("{other:?}"),
    }
    assert!(source.next_chunk().unwrap().is_none());
}

// ------------------------------------------------------------ truncation

/// The cut points to try for a file of `len` bytes: all of them for small
/// files; for large ones (whose every prefix would take minutes in a debug
/// build) the first and last 128 bytes, 128 evenly spread cuts, and the
/// bytes around the given frame boundaries.
fn cut_points(len: usize, boundaries: &[usize]) -> Vec<usize> {
    if len <= 16 << 10 {
        return (0..=len).collect();
    }
    let mut cuts: Vec<usize> = (0..128).chain(len - 128..=len).collect();
    cuts.extend((0..len).step_by(len / 128 + 1));
    for &b in boundaries {
        cuts.extend(b.saturating_sub(2)..(b + 2).min(len));
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

#[test]
fn every_prefix_is_records_or_an_error() {
    for case in enabled_cases().iter().filter(|c| c.is_ok()) {
        let data = fs::read(case.file()).unwrap();
        let compression = case.compression();
        let expected = case.records();
        // Checked against the manifest by `corpus_cases_read_like_tensorflow`;
        // compared byte for byte here (hashing each prefix's records is slow
        // in debug builds).
        let (full, _) = read_all(case.file(), ReaderOptions::default());
        let mut boundaries = vec![0];
        for (len, _) in &expected {
            boundaries.push(boundaries.last().unwrap() + len + FRAME_OVERHEAD);
        }
        let small = ReaderOptions::default().with_buffer_size(64);
        let cuts = if compression == Compression::None {
            cut_points(data.len(), &boundaries)
        } else {
            // Frame boundaries say nothing about the compressed bytes.
            cut_points(data.len(), &[])
        };
        for cut in cuts {
            let prefix = &data[..cut];
            let (records, error) = read_bytes(prefix, compression, small.clone());
            // Whatever was delivered is a prefix of the real records.
            assert!(records.len() <= expected.len(), "{} cut {cut}", case.name);
            for (i, r) in records.iter().enumerate() {
                assert!(*r == full[i], "{} cut {cut}: record {i}", case.name);
            }
            if compression == Compression::None {
                // A cut at a frame boundary is a clean end, anything else
                // is a truncated record at the right place.
                let whole = boundaries.iter().rposition(|&b| b <= cut).unwrap();
                assert_eq!(records.len(), whole, "{} cut {cut}", case.name);
                if boundaries.contains(&cut) {
                    assert!(error.is_none(), "{} cut {cut}: {error:?}", case.name);
                } else {
                    match error {
                        Some(Error::Truncated { at, offset }) => {
                            assert_eq!(offset, boundaries[whole] as u64);
                            assert_eq!(at.record, Some(whole as u64));
                        }
                        other => panic!("{} cut {cut}: {other:?}", case.name),
                    }
                }
            } else if cut < data.len() {
                // A cut compressed stream is an error, never a short read.
                assert!(error.is_some(), "{} cut {cut}", case.name);
            }
        }
    }
}

#[test]
fn every_prefix_of_the_decompressed_streams_through_the_frame_decoder() {
    for case in enabled_cases().iter().filter(|c| c.is_ok()) {
        // The decompressed stream, re-framed by the writer.
        let (records, error) = read_all(case.file(), ReaderOptions::default());
        assert!(error.is_none());
        let mut w = RecordWriter::new(Vec::new());
        let mut boundaries = vec![0usize];
        for r in &records {
            w.write_record(r).unwrap();
            boundaries.push(boundaries.last().unwrap() + r.len() + FRAME_OVERHEAD);
        }
        let (stream, _) = w.finish_into_inner().unwrap();
        // The frames before the last boundary of a cut decode the same
        // for every cut: start the decoder there (as an index would), so
        // each cut costs one frame, not the whole prefix.
        for cut in 0..=stream.len() {
            // The last boundary before the cut (so that a cut at the end
            // of a frame decodes that frame).
            let n = boundaries.iter().rposition(|&b| b < cut).unwrap_or(0);
            let start = boundaries[n];
            let mut decoder =
                FrameDecoder::new(case.name.as_str()).with_position(n as u64, start as u64);
            let rest = &stream[start..cut];
            match decoder.decode(rest).unwrap() {
                Decoded::Frame(f) => {
                    assert_eq!(f.len, rest.len(), "{} cut {cut}", case.name);
                    assert_eq!(rest[f.payload], records[n][..]);
                    assert_eq!(decoder.record_index(), n as u64 + 1);
                    assert_eq!(decoder.offset(), cut as u64);
                }
                Decoded::Incomplete { needed } => {
                    assert!(needed > rest.len() as u64);
                    match decoder.finish(rest.len()) {
                        Ok(()) => assert!(rest.is_empty()),
                        Err(Error::Truncated { at, offset }) => {
                            assert_eq!((at.record, offset), (Some(n as u64), start as u64))
                        }
                        Err(e) => panic!("{e:?}"),
                    }
                }
            }
        }
    }
}

#[test]
fn byte_at_a_time_decoding() {
    let case = corpus::case("tfrecord", "tfr_example_basic");
    let data = fs::read(case.file()).unwrap();
    let mut decoder = FrameDecoder::new("bytes");
    let mut start = 0;
    let mut records = Vec::new();
    for end in 0..=data.len() {
        if let Decoded::Frame(f) = decoder.decode(&data[start..end]).unwrap() {
            assert_eq!(f.len, end - start, "found as soon as complete");
            records.push(data[start..end][f.payload].to_vec());
            start = end;
        }
    }
    decoder.finish(data.len() - start).unwrap();
    assert_records(&case, &records, "byte at a time");
}

// ---------------------------------------------------------------- writer

#[test]
fn rewriting_corpus_payloads_gives_tensorflow_bytes() {
    let dir = temp_dir();
    let mut checked = 0;
    for case in enabled_cases().iter().filter(|c| c.is_ok()) {
        if case.compression() != Compression::None {
            continue;
        }
        let original = fs::read(case.file()).unwrap();
        let (records, _) = read_all(case.file(), ReaderOptions::default());
        // In memory.
        let mut w = RecordWriter::new(Vec::new());
        for r in &records {
            w.write_record(r).unwrap();
        }
        let (bytes, summary) = w.finish_into_inner().unwrap();
        assert_eq!(bytes, original, "{}", case.name);
        assert_eq!(summary.records, records.len() as u64);
        assert_eq!(summary.bytes, original.len() as u64);
        // To a file.
        let path = dir.path().join(format!("{}.tfrecord", case.name));
        let mut w = RecordWriter::create(&path, WriterOptions::default()).unwrap();
        for r in &records {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap();
        assert_eq!(fs::read(&path).unwrap(), original, "{}", case.name);
        checked += 1;
    }
    assert!(checked >= 5);
}

/// The codecs built in.
fn compressions() -> Vec<Compression> {
    [
        Compression::None,
        Compression::Gzip,
        Compression::Zlib,
        Compression::Zstd,
    ]
    .into_iter()
    .filter(|c| c.is_enabled())
    .collect()
}

fn extension(c: Compression) -> &'static str {
    match c {
        Compression::None => "tfrecord",
        Compression::Gzip => "tfrecord.gz",
        Compression::Zlib => "tfrecord.zz",
        Compression::Zstd => "tfrecord.zst",
        other => panic!("no test extension for {other}"),
    }
}

/// Payloads of awkward sizes: empty, around buffer sizes, > 1 MiB.
fn sample_payloads() -> Vec<Vec<u8>> {
    let mut payloads = Vec::new();
    for (i, len) in [
        0usize,
        1,
        11,
        12,
        16,
        63,
        64,
        65,
        4095,
        65536,
        1 << 20,
        0,
        1_500_000,
    ]
    .into_iter()
    .enumerate()
    {
        payloads.push(
            (0..len)
                .map(|j| {
                    (j as u32)
                        .wrapping_mul(2_654_435_761)
                        .wrapping_add(i as u32) as u8
                })
                .collect(),
        );
    }
    payloads
}

#[test]
fn writer_round_trips_every_compression() {
    let dir = temp_dir();
    let payloads = sample_payloads();
    for c in compressions() {
        let path = dir.path().join(format!("round.{}", extension(c)));
        let mut w = RecordWriter::create(&path, WriterOptions::default()).unwrap();
        for p in &payloads {
            w.write_record(p).unwrap();
        }
        let summary = w.finish().unwrap();
        assert_eq!(summary.records, payloads.len() as u64);
        let stored = fs::read(&path).unwrap();
        match c {
            Compression::Gzip => assert_eq!(&stored[..2], &[0x1f, 0x8b]),
            Compression::Zlib => assert_eq!(stored[0] & 0x0f, 8),
            Compression::Zstd => assert_eq!(&stored[..4], &[0x28, 0xb5, 0x2f, 0xfd]),
            Compression::None => assert_eq!(stored.len() as u64, summary.bytes),
            other => panic!("no test of the stored form of {other}"),
        }
        for options in [
            ReaderOptions::default(),
            ReaderOptions::default().with_buffer_size(100),
        ] {
            let (records, error) = read_all(&path, options);
            assert!(error.is_none(), "{c}: {error:?}");
            assert_eq!(records, payloads, "{c}");
        }
        let (chunked, _, error) = read_source(
            std::slice::from_ref(&path),
            ReaderOptions::default(),
            70_000,
        );
        assert!(error.is_none(), "{c}: {error:?}");
        assert_eq!(chunked[0], payloads, "{c}");
        // In memory, with the compression given explicitly.
        let mut w = RecordWriter::with_compression(Vec::new(), c).unwrap();
        for p in &payloads[..5] {
            w.write_record(p).unwrap();
        }
        let (bytes, _) = w.finish_into_inner().unwrap();
        let (records, error) = read_bytes(&bytes, c, ReaderOptions::default());
        assert!(error.is_none());
        assert_eq!(records, &payloads[..5]);
    }
}

#[test]
fn multi_member_gzip_reads_as_one_stream() {
    if !Compression::Gzip.is_enabled() {
        return;
    }
    let mut stream = Vec::new();
    for part in [&[b"a".to_vec(), b"bb".to_vec()][..], &[b"ccc".to_vec()][..]] {
        let mut w = RecordWriter::with_compression(Vec::new(), Compression::Gzip).unwrap();
        for r in part {
            w.write_record(r).unwrap();
        }
        stream.extend(w.finish_into_inner().unwrap().0);
    }
    let (records, error) = read_bytes(&stream, Compression::Gzip, ReaderOptions::default());
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        records,
        vec![b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()]
    );
}

#[test]
fn gzip_file_read_as_plain_is_corrupt_at_zero() {
    // As TensorFlow: "corrupted record at 0 (Is this even a TFRecord file?)".
    let case = corpus::case("tfrecord", "tfr_example_gzip");
    let options = ReaderOptions::default().with_compression(Some(Compression::None));
    let (records, error) = read_all(case.file(), options);
    assert!(records.is_empty());
    assert!(matches!(
        error,
        Some(Error::CorruptLength { offset: 0, .. })
    ));
}

#[test]
fn disabled_codecs_are_typed_errors() {
    if cfg!(feature = "zstd") {
        return;
    }
    let dir = temp_dir();
    let path = dir.path().join("x.tfrecord.zst");
    assert!(matches!(
        RecordWriter::create(&path, WriterOptions::default()),
        Err(Error::CompressionDisabled {
            feature: "zstd",
            ..
        })
    ));
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    fs::write(&path, b"").unwrap();
    assert!(matches!(
        RecordReader::open(&path, ReaderOptions::default()),
        Err(Error::CompressionDisabled { .. })
    ));
}

#[test]
fn writer_is_atomic() {
    let dir = temp_dir();
    for c in compressions() {
        let path = dir.path().join(format!("atomic.{}", extension(c)));
        // Dropped unfinished: nothing left, not even the temporary.
        {
            let mut w = RecordWriter::create(&path, WriterOptions::default()).unwrap();
            w.write_record(&[7; 100_000]).unwrap();
            assert_eq!(dir_entries(dir.path()).len(), 1, "the temporary exists");
            assert!(!path.exists());
        }
        assert!(dir_entries(dir.path()).is_empty(), "{c}");

        // An existing file survives an unfinished rewrite unchanged.
        fs::write(&path, b"old").unwrap();
        {
            let mut w = RecordWriter::create(&path, WriterOptions::default()).unwrap();
            w.write_record(b"new").unwrap();
        }
        assert_eq!(fs::read(&path).unwrap(), b"old");

        // Finished: exactly the final file.
        let mut w = RecordWriter::create(&path, WriterOptions::default()).unwrap();
        w.write_record(b"new").unwrap();
        w.finish().unwrap();
        assert_eq!(
            dir_entries(dir.path()),
            vec![path.file_name().unwrap().to_string_lossy().into_owned()]
        );
        let (records, _) = read_all(&path, ReaderOptions::default());
        assert_eq!(records, vec![b"new".to_vec()]);
        fs::remove_file(&path).unwrap();
    }
    // With an index: both appear together, or neither.
    let path = dir.path().join("with_index.tfrecord");
    {
        let mut w = RecordWriter::create(&path, WriterOptions::default().with_index(true)).unwrap();
        w.write_record(b"x").unwrap();
        assert_eq!(dir_entries(dir.path()).len(), 2);
    }
    assert!(dir_entries(dir.path()).is_empty());
    let mut w = RecordWriter::create(&path, WriterOptions::default().with_index(true)).unwrap();
    w.write_record(b"x").unwrap();
    w.finish().unwrap();
    assert_eq!(
        dir_entries(dir.path()),
        vec!["with_index.tfrecord", "with_index.tfrecord.idx"]
    );
}

#[test]
fn writer_reports_unwritable_targets() {
    let dir = temp_dir();
    let path = dir.path().join("missing-dir").join("x.tfrecord");
    match RecordWriter::create(&path, WriterOptions::default()) {
        // The storage layer's error, naming the file once.
        Err(Error::Storage(e)) => {
            let text = e.to_string();
            assert!(text.starts_with(&format!("{}: ", path.display())), "{text}");
        }
        other => panic!("{other:?}"),
    }
    assert!(dir_entries(dir.path()).is_empty());
}

/// A sink that fails after `limit` bytes.
struct Failing {
    written: usize,
    limit: usize,
}

impl Write for Failing {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.written + buf.len() > self.limit {
            return Err(std::io::Error::other("disk full"));
        }
        self.written += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn writer_errors_poison_the_writer() {
    let mut w = RecordWriter::new(Failing {
        written: 0,
        limit: 100,
    });
    // Larger than the write buffer: the failure shows at once.
    let big = vec![0u8; 1 << 20];
    assert!(matches!(w.write_record(&big), Err(Error::Io { .. })));
    assert!(w.write_record(b"x").is_err(), "poisoned");
    let result = w.finish();
    assert!(matches!(result, Err(Error::Io { .. })), "{result:?}");
}

// ----------------------------------------------------------------- index

#[test]
fn index_matches_dali_layout_and_sequential_reads() {
    let dir = temp_dir();
    for case in enabled_cases().iter().filter(|c| c.is_ok()) {
        if case.compression() != Compression::None {
            assert!(matches!(
                write_index(case.file(), ReaderOptions::default()),
                Err(Error::NeedsUncompressed { .. })
            ));
            assert!(matches!(
                IndexedReader::open(case.file(), ReaderOptions::default()),
                Err(Error::NeedsUncompressed { .. })
            ));
            continue;
        }
        // DALI's tfrecord2idx: "<frame offset> <frame length>\n" per record.
        let mut expected_text = String::new();
        let mut offset = 0;
        for (len, _) in case.records() {
            let frame = len + FRAME_OVERHEAD;
            expected_text.push_str(&format!("{offset} {frame}\n"));
            offset += frame;
        }
        let copy = dir.path().join(format!("{}.tfrecord", case.name));
        fs::copy(case.file(), &copy).unwrap();
        let count = write_index(&copy, ReaderOptions::default()).unwrap();
        assert_eq!(count as usize, case.records().len());
        let idx = index_path(&copy);
        assert_eq!(
            fs::read_to_string(&idx).unwrap(),
            expected_text,
            "{}",
            case.name
        );
        assert_eq!(
            read_index(&idx).unwrap(),
            build_index(&copy, ReaderOptions::default()).unwrap()
        );
        assert_eq!(
            verify_index(&copy, &idx, ReaderOptions::default()).unwrap(),
            count
        );

        // The writer's own index is the same.
        let (records, _) = read_all(case.file(), ReaderOptions::default());
        let rewritten = dir.path().join(format!("{}-w.tfrecord", case.name));
        let mut w =
            RecordWriter::create(&rewritten, WriterOptions::default().with_index(true)).unwrap();
        for r in &records {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap();
        assert_eq!(
            fs::read_to_string(index_path(&rewritten)).unwrap(),
            expected_text
        );

        // Random access, in a scrambled order, equals the sequential read.
        let reader = IndexedReader::open(&copy, ReaderOptions::default()).unwrap();
        assert_eq!(reader.len(), records.len());
        let n = records.len();
        let mut frame = Vec::new();
        for k in 0..n {
            let i = (k * 7 + 3) % n;
            assert_eq!(reader.read(i as u64).unwrap(), records[i], "{}", case.name);
            let payload = reader.read_into(i as u64, &mut frame).unwrap();
            assert_eq!(frame[payload], records[i]);
        }
        match reader.read(n as u64) {
            Err(Error::RecordOutOfRange { record, count, .. }) => {
                assert_eq!((record, count), (n as u64, n as u64))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            reader.read(u64::MAX),
            Err(Error::RecordOutOfRange { .. })
        ));
    }
}

#[test]
fn indexed_reads_check_crcs_like_tensorflow() {
    for name in ["tfr_corrupt_data_crc", "tfr_corrupt_length_crc_field"] {
        let case = corpus::case("tfrecord", name);
        let dir = temp_dir();
        let copy = dir.path().join("c.tfrecord");
        fs::copy(case.file(), &copy).unwrap();
        // Index the frames without checking CRCs, then read the bad one.
        let entries = build_index(&copy, ReaderOptions::default().with_check_crc(false)).unwrap();
        let mut text = Vec::new();
        grist_tfrecord::write_index_to(&entries, &mut text).unwrap();
        fs::write(index_path(&copy), &text).unwrap();
        // Without CRC checks the index itself does not verify.
        assert!(verify_index(&copy, index_path(&copy), ReaderOptions::default()).is_err());

        let reader = IndexedReader::open(&copy, ReaderOptions::default()).unwrap();
        let failing = case.tfrecord()["error"]["failing_record_index"]
            .as_u64()
            .unwrap();
        for i in 0..failing {
            reader.read(i).unwrap();
        }
        let error = reader.read(failing).unwrap_err();
        let records: Vec<Vec<u8>> = (0..failing)
            .map(|i| reader.read(i).unwrap().to_vec())
            .collect();
        check_error_case(&case, &records, Some(error), "indexed");
        let lax =
            IndexedReader::open(&copy, ReaderOptions::default().with_check_crc(false)).unwrap();
        assert!(lax.read(failing).is_ok());
    }
}

#[test]
fn bad_index_lines_are_reported_by_line() {
    let cases: &[(&[u8], u64)] = &[
        (b"0 16\nx 16\n", 2),
        (b"0 16\n16\n", 2),
        (b"0 16\n16 16 16\n", 2),
        (b"0 15\n", 1),
        (b"-1 16\n", 1),
        (b"0 99999999999999999999999\n", 1),
        (b"0 16\n\n16 16\n", 2),
        (b"0\t16\r\n16 +16\n", 2),
    ];
    for (text, line) in cases {
        match parse_index(text, "t.idx") {
            Err(Error::BadIndex { line: l, file, .. }) => {
                assert_eq!(
                    (l, &*file),
                    (*line, "t.idx"),
                    "{:?}",
                    String::from_utf8_lossy(text)
                )
            }
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(text)),
        }
    }
    assert_eq!(
        parse_index(b"0\t16\r\n16  20\n\n\n", "t.idx").unwrap(),
        vec![
            IndexEntry { offset: 0, len: 16 },
            IndexEntry {
                offset: 16,
                len: 20
            }
        ]
    );
    assert!(parse_index(b"", "t.idx").unwrap().is_empty());
}

#[test]
fn index_that_disagrees_with_the_data() {
    let case = corpus::case("tfrecord", "tfr_example_basic");
    let dir = temp_dir();
    let copy = dir.path().join("d.tfrecord");
    fs::copy(case.file(), &copy).unwrap();
    let size = fs::metadata(&copy).unwrap().len();
    let idx = index_path(&copy);
    let entries = build_index(&copy, ReaderOptions::default()).unwrap();

    // Past the end of the file: refused at open, naming the line.
    fs::write(&idx, format!("0 {}\n{} 16\n", entries[0].len, size)).unwrap();
    match IndexedReader::open(&copy, ReaderOptions::default()) {
        Err(Error::BadIndex { line: 2, .. }) => {}
        other => panic!("{other:?}"),
    }
    // A hostile length in the index: refused at open, nothing allocated.
    fs::write(&idx, format!("0 {}\n", u64::MAX)).unwrap();
    assert!(matches!(
        IndexedReader::open(&copy, ReaderOptions::default()),
        Err(Error::BadIndex { line: 1, .. })
    ));
    // Wrong frame length: found on read.
    let e0 = entries[0];
    fs::write(&idx, format!("0 {}\n0 {}\n", e0.len - 1, e0.len + 1)).unwrap();
    let reader = IndexedReader::open(&copy, ReaderOptions::default()).unwrap();
    assert!(matches!(
        reader.read(0),
        Err(Error::BadIndex { line: 1, .. })
    ));
    assert!(matches!(
        reader.read(1),
        Err(Error::BadIndex { line: 2, .. })
    ));
    // Pointing into the middle of a frame: a bad length CRC there.
    fs::write(&idx, format!("{} 20\n", e0.offset + 1)).unwrap();
    let reader = IndexedReader::open(&copy, ReaderOptions::default()).unwrap();
    assert!(matches!(
        reader.read(0),
        Err(Error::CorruptLength { offset: 1, .. })
    ));
    // verify_index finds a missing record.
    let mut text = Vec::new();
    grist_tfrecord::write_index_to(&entries[..entries.len() - 1], &mut text).unwrap();
    fs::write(&idx, &text).unwrap();
    match verify_index(&copy, &idx, ReaderOptions::default()) {
        Err(Error::BadIndex { line, .. }) => assert_eq!(line as usize, entries.len()),
        other => panic!("{other:?}"),
    }
    // A missing index file is the storage layer's "not found", naming it.
    fs::remove_file(&idx).unwrap();
    match IndexedReader::open(&copy, ReaderOptions::default()) {
        Err(Error::Storage(e)) => {
            assert!(e.is_not_found());
            assert_eq!(e.to_string(), format!("{}: not found", idx.display()));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn index_needs_uncompressed_output() {
    let dir = temp_dir();
    let path = dir.path().join("x.tfrecord.gz");
    assert!(matches!(
        RecordWriter::create(&path, WriterOptions::default().with_index(true)),
        Err(Error::NeedsUncompressed {
            compression: "GZIP",
            ..
        })
    ));
    assert!(dir_entries(dir.path()).is_empty());
}

// ------------------------------------------------------ hostile lengths

/// A header announcing `len` bytes, with a correct length CRC, followed by
/// `tail` bytes.
fn hostile(len: u64, tail: usize) -> Vec<u8> {
    let mut data = len.to_le_bytes().to_vec();
    data.extend_from_slice(&masked_crc32c(&len.to_le_bytes()).to_le_bytes());
    data.extend(std::iter::repeat_n(0xab, tail));
    data
}

#[test]
fn hostile_lengths_fail_without_allocating() {
    // Each of these, if allocated, would abort the test process.
    for len in [u64::MAX, 1 << 60, 1 << 40, (1 << 31) + 5] {
        let data = hostile(len, 100);
        // Default limits: refused before reading on.
        let (records, error) = read_bytes(&data, Compression::None, ReaderOptions::default());
        assert!(records.is_empty());
        match error {
            Some(Error::RecordTooLarge { len: l, at, .. }) => {
                assert_eq!((l, at.record), (len, Some(0)))
            }
            other => panic!("{len}: {other:?}"),
        }
        // No limits: the stream ends first.
        let unlimited = ReaderOptions::default().with_limits(Limits::unlimited());
        let (_, error) = read_bytes(&data, Compression::None, unlimited.clone());
        assert!(
            matches!(
                error,
                Some(Error::Truncated { offset: 0, .. } | Error::RecordTooLarge { .. })
            ),
            "{len}: {error:?}"
        );
        // Inside a compressed stream.
        if !Compression::Zlib.is_enabled() {
            continue;
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&data).unwrap();
        let zipped = z.finish().unwrap();
        for options in [ReaderOptions::default(), unlimited.clone()] {
            let (records, error) = read_bytes(&zipped, Compression::Zlib, options);
            assert!(records.is_empty());
            assert!(error.is_some());
        }
        // Through the chunk source.
        let dir = temp_dir();
        let path = dir.path().join("h.tfrecord");
        fs::write(&path, &data).unwrap();
        for options in [ReaderOptions::default(), unlimited.clone()] {
            let (records, _, error) = read_source(std::slice::from_ref(&path), options, 16);
            assert!(records[0].is_empty());
            assert!(error.is_some());
        }
    }
}

#[test]
fn record_limit_is_enforced() {
    let mut w = RecordWriter::new(Vec::new());
    w.write_record(&[1; 10]).unwrap();
    w.write_record(&[2; 11]).unwrap();
    let (bytes, _) = w.finish_into_inner().unwrap();
    let options = ReaderOptions::default().with_limits(Limits::default().with_max_record_bytes(10));
    let (records, error) = read_bytes(&bytes, Compression::None, options);
    assert_eq!(records, vec![vec![1; 10]]);
    match error {
        Some(Error::RecordTooLarge { at, len, max }) => {
            assert_eq!((at.record, len, max), (Some(1), 11, 10))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn reader_buffer_grows_with_the_data() {
    // A record far larger than the read block arrives in pieces.
    let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut w = RecordWriter::new(Vec::new());
    w.write_record(&payload).unwrap();
    w.write_record(b"tail").unwrap();
    let (bytes, _) = w.finish_into_inner().unwrap();
    let (records, error) = read_bytes(
        &bytes,
        Compression::None,
        ReaderOptions::default().with_buffer_size(4096),
    );
    assert!(error.is_none());
    assert_eq!(records, vec![payload, b"tail".to_vec()]);
}

/// Buffer and chunk sizes far beyond the data are lowered: three records
/// are written, read and cut into one chunk without a buffer of the size
/// asked for (which would not fit in memory).
#[test]
fn huge_buffer_and_chunk_sizes_are_lowered() {
    let dir = temp_dir();
    let path = dir.path().join("a.tfrecord");
    let payloads = [b"a".to_vec(), b"bc".to_vec(), Vec::new()];
    let mut w =
        RecordWriter::create(&path, WriterOptions::default().with_buffer_size(usize::MAX)).unwrap();
    for p in &payloads {
        w.write_record(p).unwrap();
    }
    w.finish().unwrap();
    let (records, error) = read_all(&path, ReaderOptions::default().with_buffer_size(usize::MAX));
    assert!(error.is_none(), "{error:?}");
    assert_eq!(records, payloads);
    let mut source = TfRecordSource::new([&path]).with_chunk_bytes(usize::MAX);
    assert_eq!(source.next_chunk().unwrap().unwrap().record_count, 3);
    assert!(source.next_chunk().unwrap().is_none());
}
