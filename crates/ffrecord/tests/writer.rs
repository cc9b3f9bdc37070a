//! The writer: the worked example byte for byte, known and unknown
//! counts giving the same file, and never a partial file under the final
//! name.

use std::fs;

use grist_ffrecord::{Error, FfrReader, FfrWriter, ReaderOptions, WriterOptions, encode_file};
use grist_testkit::corpus::sha256_hex;
use grist_testkit::{dir_entries, temp_dir};

use crate::support::{Rng, ffrecord_case};

#[test]
fn the_worked_example_is_written_byte_for_byte() {
    let case = ffrecord_case("tiny2");
    let expected = fs::read(&case.input).unwrap();
    let dir = temp_dir();
    for count in [Some(2), None] {
        let path = dir.path().join("tiny2.ffr");
        let mut w = FfrWriter::create(&path, WriterOptions::default().with_count(count)).unwrap();
        w.write_sample(b"hello").unwrap();
        w.write_sample(b"ffrecord!").unwrap();
        assert_eq!(w.samples(), 2);
        w.finish().unwrap();
        assert_eq!(fs::read(&path).unwrap(), expected, "{count:?}");
    }
    assert_eq!(encode_file([&b"hello"[..], b"ffrecord!"]), expected);
    // The empty file.
    let empty = ffrecord_case("empty");
    assert_eq!(encode_file([]), fs::read(&empty.input).unwrap());
    let path = dir.path().join("empty.ffr");
    FfrWriter::create(&path, WriterOptions::default())
        .unwrap()
        .finish()
        .unwrap();
    assert_eq!(
        sha256_hex(&fs::read(&path).unwrap()),
        empty.files()[0]["file_sha256"].as_str().unwrap()
    );
}

#[test]
fn known_and_unknown_counts_write_the_same_file() {
    let dir = temp_dir();
    let mut rng = Rng(99);
    for round in 0..8 {
        let n = rng.below(200) as usize;
        let samples: Vec<Vec<u8>> = (0..n)
            .map(|_| {
                let len = if rng.below(5) == 0 {
                    0
                } else {
                    rng.below(5000) as usize
                };
                rng.bytes(len)
            })
            .collect();
        let expected = encode_file(samples.iter().map(|s| &s[..]));
        // Declared up front, declared before the first sample, unknown.
        for (count, declared) in [(Some(n as u64), None), (None, Some(n as u64)), (None, None)] {
            let path = dir.path().join(format!("r{round}.ffr"));
            let buffer = 1 + rng.below(10_000) as usize;
            let options = WriterOptions::default()
                .with_count(count)
                .with_buffer_size(buffer);
            let mut w = FfrWriter::create(&path, options).unwrap();
            if let Some(d) = declared {
                w.expect_samples(d).unwrap();
            }
            for s in &samples {
                w.write_sample(s).unwrap();
            }
            let summary = w.finish().unwrap();
            assert_eq!(summary.samples, n as u64);
            assert_eq!(
                fs::read(&path).unwrap(),
                expected,
                "round {round} {count:?} {declared:?}"
            );
            let reader = FfrReader::open(&path, ReaderOptions::default()).unwrap();
            let all: Vec<u64> = (0..n as u64).collect();
            let back: Vec<Vec<u8>> = reader
                .read(&all)
                .unwrap()
                .iter()
                .map(|s| s.data.to_vec())
                .collect();
            assert_eq!(back, samples);
        }
    }
    // Only the finished files are there: no temporaries, no spools.
    assert_eq!(dir_entries(dir.path()).len(), 8);
}

/// Without a count the samples are written first and moved behind the
/// header at the end, a block at a time: samples of several blocks
/// (megabytes) move whole.
#[test]
fn samples_of_many_blocks_move_behind_the_header() {
    let dir = temp_dir();
    let mut rng = Rng(7);
    let samples: Vec<Vec<u8>> = (0..700).map(|_| rng.bytes(5000)).collect();
    let path = dir.path().join("big.ffr");
    let mut w = FfrWriter::create(&path, WriterOptions::default()).unwrap();
    for s in &samples {
        w.write_sample(s).unwrap();
    }
    assert_eq!(w.finish().unwrap().samples, 700);
    assert_eq!(
        fs::read(&path).unwrap(),
        encode_file(samples.iter().map(|s| &s[..]))
    );
}

#[test]
fn no_partial_file_is_ever_left_under_the_final_name() {
    let dir = temp_dir();
    let path = dir.path().join("out.ffr");

    // Dropped unfinished, with and without a count.
    for count in [Some(3), None] {
        let mut w = FfrWriter::create(&path, WriterOptions::default().with_count(count)).unwrap();
        w.write_sample(b"a").unwrap();
        assert!(
            !dir_entries(dir.path()).is_empty(),
            "the temporary file exists while writing"
        );
        drop(w);
        assert!(
            dir_entries(dir.path()).is_empty(),
            "{:?}",
            dir_entries(dir.path())
        );
    }

    // Finished with fewer samples than declared (the original leaves a
    // zeroed header that reads as an empty file).
    let mut w = FfrWriter::create(&path, WriterOptions::default().with_count(Some(3))).unwrap();
    w.write_sample(b"a").unwrap();
    match w.finish() {
        Err(
            e @ Error::CountMismatch {
                declared: 3,
                written: 1,
                ..
            },
        ) => {
            assert_eq!(e.class().name(), "argument");
        }
        other => panic!("{other:?}"),
    }
    assert!(dir_entries(dir.path()).is_empty());

    // More samples than declared: refused, the writer stays usable.
    let mut w = FfrWriter::create(&path, WriterOptions::default().with_count(Some(1))).unwrap();
    w.write_sample(b"a").unwrap();
    assert!(matches!(
        w.write_sample(b"b"),
        Err(Error::TooManySamples { declared: 1, .. })
    ));
    w.finish().unwrap();
    assert_eq!(fs::read(&path).unwrap(), encode_file([&b"a"[..]]));

    // An existing file is replaced only when the new one is complete.
    let mut w = FfrWriter::create(&path, WriterOptions::default()).unwrap();
    w.write_sample(b"new").unwrap();
    assert_eq!(fs::read(&path).unwrap(), encode_file([&b"a"[..]]));
    w.finish().unwrap();
    assert_eq!(fs::read(&path).unwrap(), encode_file([&b"new"[..]]));
    assert_eq!(dir_entries(dir.path()), ["out.ffr"]);

    // A folder that does not exist: the storage layer's error, naming the
    // file once.
    let missing = dir.path().join("no").join("such.ffr");
    match FfrWriter::create(&missing, WriterOptions::default()) {
        Err(e @ Error::Storage(_)) => {
            let text = e.to_string();
            assert!(text.starts_with(&format!("{}: ", missing.display())), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

/// A write buffer or chunk size far beyond the data is lowered: three
/// samples are written and read back without a buffer of the size asked
/// for (which would not fit in memory).
#[test]
fn huge_buffer_and_chunk_sizes_are_lowered() {
    let dir = temp_dir();
    let path = dir.path().join("a.ffr");
    let samples = [b"a".to_vec(), b"bc".to_vec(), b"def".to_vec()];
    let mut w =
        FfrWriter::create(&path, WriterOptions::default().with_buffer_size(usize::MAX)).unwrap();
    for s in &samples {
        w.write_sample(s).unwrap();
    }
    w.finish().unwrap();
    let reader = FfrReader::open(&path, ReaderOptions::default()).unwrap();
    let mut source = reader.source().with_chunk_bytes(usize::MAX);
    let chunk = grist_tensor::RecordSource::next_chunk(&mut source)
        .unwrap()
        .unwrap();
    assert_eq!(chunk.record_count, 3);
    for (i, s) in samples.iter().enumerate() {
        assert_eq!(chunk.record(i), Some(&s[..]));
    }
}

#[test]
fn a_count_declared_late_is_kept_or_refused() {
    let dir = temp_dir();
    let path = dir.path().join("a.ffr");
    // Fewer samples than declared: nothing under the name.
    let mut w = FfrWriter::create(&path, WriterOptions::default()).unwrap();
    w.expect_samples(3).unwrap();
    w.expect_samples(3).unwrap();
    assert!(w.expect_samples(4).is_err(), "another count");
    w.write_sample(b"one").unwrap();
    assert!(w.expect_samples(3).is_err(), "after the first sample");
    assert!(matches!(
        w.finish(),
        Err(Error::CountMismatch {
            declared: 3,
            written: 1,
            ..
        })
    ));
    assert!(dir_entries(dir.path()).is_empty());
}

#[test]
fn a_large_file_with_a_declared_count_is_written_in_place() {
    // Past the storage layer's 16 MiB the samples go past the page cache
    // after the header's room; the header is written last.
    let dir = temp_dir();
    let mut rng = Rng(7);
    let samples: Vec<Vec<u8>> = (0..300).map(|_| rng.bytes(100_000)).collect();
    let expected = encode_file(samples.iter().map(|s| &s[..]));
    let path = dir.path().join("large.ffr");
    let mut w = FfrWriter::create(&path, WriterOptions::default()).unwrap();
    w.expect_samples(samples.len() as u64).unwrap();
    for s in &samples {
        w.write_sample(s).unwrap();
    }
    w.finish().unwrap();
    assert!(fs::read(&path).unwrap() == expected);
}
