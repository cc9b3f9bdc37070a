//! Random access: batched reads in every access mode against single
//! reads and the samples written, folders, hostile headers, limits, and
//! files that change after they were opened.

use std::fs;
use std::path::Path;

use grist_ffrecord::{
    Access, Error, FfrReader, FfrWriter, OffsetProblem, ReaderOptions, SampleBatch, WriterOptions,
    crc32, dataset_files,
};
use grist_tensor::{Limits, RecordSource};
use grist_testkit::temp_dir;

use crate::support::{Rng, craft};

/// Writes `samples` as an FFRecord file at `path`.
fn write(path: &Path, samples: &[Vec<u8>]) {
    let mut w = FfrWriter::create(path, WriterOptions::default()).unwrap();
    for s in samples {
        w.write_sample(s).unwrap();
    }
    w.finish().unwrap();
}

/// Random samples: mostly small, some empty, a few large.
fn random_samples(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let len = match rng.below(10) {
                0 => 0,
                1 => 5000 + rng.below(70_000) as usize,
                _ => rng.below(300) as usize,
            };
            rng.bytes(len)
        })
        .collect()
}

/// A folder dataset of several files (one empty) plus entries the reader
/// must ignore; returns the samples in dataset order.
fn folder_dataset(dir: &Path, rng: &mut Rng) -> Vec<Vec<u8>> {
    // String order: "a_10" < "a_2" < "b" (numeric order would differ).
    let names = ["a_2.ffr", "a_10.ffr", "b.ffr", "empty.ffr"];
    let counts = [40, 25, 60, 0];
    let mut by_name = Vec::new();
    for (name, n) in names.iter().zip(counts) {
        let samples = random_samples(rng, n);
        write(&dir.join(name), &samples);
        by_name.push((name.to_string(), samples));
    }
    fs::write(dir.join("README.txt"), b"not a dataset file").unwrap();
    fs::write(dir.join("c.ffr.bak"), b"not a dataset file either").unwrap();
    fs::create_dir(dir.join("sub")).unwrap();
    write(&dir.join("sub").join("deeper.ffr"), &[b"ignored".to_vec()]);
    by_name.sort_by(|a, b| a.0.cmp(&b.0));
    by_name.into_iter().flat_map(|(_, s)| s).collect()
}

#[test]
fn batched_reads_in_every_mode_equal_the_samples_written() {
    let dir = temp_dir();
    let mut rng = Rng(7);
    let expected = folder_dataset(dir.path(), &mut rng);
    let files = dataset_files(dir.path()).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["a_10.ffr", "a_2.ffr", "b.ffr", "empty.ffr"]);

    // SAFETY: the dataset's files are not modified while it is read.
    let mmap = unsafe { Access::mmap() };
    let modes = [
        ("pread", ReaderOptions::default()),
        (
            "pread, no coalescing",
            ReaderOptions::default().with_coalesce_gap(0),
        ),
        (
            "pread, coalesce all",
            ReaderOptions::default().with_coalesce_gap(u64::MAX),
        ),
        (
            "pread, unchecked",
            ReaderOptions::default().with_check_data(false),
        ),
        ("mmap", ReaderOptions::default().with_access(mmap)),
        (
            "mmap, unchecked",
            ReaderOptions::default()
                .with_access(mmap)
                .with_check_data(false),
        ),
    ];
    // One batch reused across modes and rounds.
    let mut batch = SampleBatch::default();
    for (how, options) in modes {
        let reader = FfrReader::open(dir.path(), options).unwrap();
        assert_eq!(reader.len(), expected.len() as u64, "{how}");
        assert_eq!(reader.files().len(), 4);
        let total: u64 = expected.iter().map(|s| s.len() as u64).sum();
        assert_eq!(reader.data_len(), total);
        for round in 0..20 {
            let size = if round == 0 {
                256
            } else {
                1 + rng.below(300) as usize
            };
            let indices: Vec<u64> = (0..size)
                .map(|_| rng.below(expected.len() as u64))
                .collect();
            let samples = reader.read(&indices).unwrap();
            assert_eq!(samples.len(), indices.len());
            reader.read_batch(&indices, &mut batch).unwrap();
            assert_eq!(batch.len(), indices.len());
            assert_eq!(batch.iter().len(), indices.len());
            for (k, (s, &i)) in samples.iter().zip(&indices).enumerate() {
                assert_eq!(s.at.index.unwrap(), i, "{how}");
                assert_eq!(s.data, expected[i as usize], "{how}: sample {i}");
                assert_eq!(reader.read_one(i).unwrap(), *s, "{how}");
                assert_eq!(reader.sample_len(i).unwrap(), s.data.len() as u64);
                // The batch holds the same samples, and says the same
                // about them.
                assert_eq!(batch.get(k), Some(&expected[i as usize][..]), "{how}");
                assert_eq!(batch.bytes(k).as_ref(), Some(&s.data));
                assert_eq!(batch.at(k).as_ref(), Some(&s.at));
                assert_eq!((batch.index(k), batch.crc(k)), (Some(i), Some(s.crc)));
                assert_eq!(s.crc, crc32(&s.data));
            }
            assert_eq!(batch.get(indices.len()), None);
        }
        // Consecutive runs (read with one pread each when coalescing).
        let run: Vec<u64> = (10..90).collect();
        for (s, &i) in reader.read(&run).unwrap().iter().zip(&run) {
            assert_eq!(s.data, expected[i as usize], "{how}");
        }
        // The files' own numbering.
        let at = reader.locate(30).unwrap();
        assert!(at.file.ends_with("a_2.ffr"), "{at}");
        assert_eq!((at.record.unwrap(), at.index.unwrap()), (5, 30));
        // The source agrees.
        let mut source = reader.source().with_chunk_bytes(1000);
        let mut seen = Vec::new();
        while let Some(chunk) = source.next_chunk().unwrap() {
            for i in 0..chunk.record_count {
                seen.push(chunk.record(i).unwrap().to_vec());
            }
        }
        assert_eq!(seen, expected, "{how}");
    }
}

#[test]
fn mmap_mode_slices_the_map_without_copying() {
    let dir = temp_dir();
    let path = dir.path().join("m.ffr");
    let samples: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; i as usize * 3]).collect();
    write(&path, &samples);
    // SAFETY: the file is not modified while it is mapped.
    let options = ReaderOptions::default().with_access(unsafe { Access::mmap() });
    assert!(options.access().is_mmap());
    let reader = FfrReader::open(&path, options).unwrap();
    let a = reader.read(&[7, 8]).unwrap();
    let b = reader.read(&[8]).unwrap();
    // Two reads of one sample share the mapped bytes.
    assert_eq!(a[1].data.as_ptr(), b[0].data.as_ptr());
    // Consecutive samples are consecutive in the map.
    assert_eq!(
        a[0].data.as_ptr().wrapping_add(a[0].data.len()),
        a[1].data.as_ptr()
    );
    drop(reader);
    // Samples outlive the reader (they keep the map alive).
    assert_eq!(b[0].data, samples[8]);
}

#[test]
fn zero_length_samples_have_their_checksum_checked() {
    // Sample 1 is empty but its stored checksum is not 0. The original
    // checks it in read_one but not on its batched (AIO) path.
    let body = b"abcdef";
    let file = craft(
        None,
        3,
        &[crc32(b"abc"), 0x1234_5678, crc32(b"def")],
        &[48, 51, 51],
        body,
    );
    let reader =
        FfrReader::from_bytes("z.ffr", file.clone().into(), ReaderOptions::default()).unwrap();
    assert_eq!(reader.read_one(0).unwrap().data, &b"abc"[..]);
    for indices in [&[1][..], &[0, 1, 2], &[2, 0, 1, 1]] {
        match reader.read(indices) {
            Err(Error::SampleChecksum {
                at,
                stored,
                computed,
            }) => {
                assert_eq!((at.index.unwrap(), stored, computed), (1, 0x1234_5678, 0));
            }
            other => panic!("{other:?}"),
        }
    }
    let mut source = reader.source();
    assert_eq!(source.next_chunk().unwrap().unwrap().record_count, 1);
    assert!(matches!(
        source.next_chunk(),
        Err(Error::SampleChecksum { .. })
    ));
    // Without checks it reads as empty.
    let unchecked = FfrReader::from_bytes(
        "z.ffr",
        file.into(),
        ReaderOptions::default().with_check_data(false),
    )
    .unwrap();
    assert!(unchecked.read(&[0, 1, 2]).unwrap()[1].data.is_empty());
}

#[test]
fn a_bad_sample_past_the_first_groups_of_a_batch_is_found() {
    // Checked batches of in-memory samples prefetch the samples ahead of
    // the one they check: a bad sample deep in a long batch is still the
    // one reported, in the order asked, and the samples around it read
    // back whole.
    let n = 200usize;
    let samples: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; 100 + i % 7]).collect();
    let header_len = 12 + 12 * n as i64;
    let mut offsets = Vec::new();
    let mut body = Vec::new();
    for s in &samples {
        offsets.push(header_len + body.len() as i64);
        body.extend_from_slice(s);
    }
    let mut crcs: Vec<u32> = samples.iter().map(|s| crc32(s)).collect();
    crcs[150] ^= 1;
    let file = craft(None, n as i64, &crcs, &offsets, &body);
    let reader = FfrReader::from_bytes("g.ffr", file.into(), ReaderOptions::default()).unwrap();
    let forward: Vec<u64> = (0..n as u64).collect();
    let backward: Vec<u64> = forward.iter().rev().copied().collect();
    let mut batch = SampleBatch::default();
    for indices in [&forward[..], &backward[..], &[150][..]] {
        match reader.read(indices) {
            Err(Error::SampleChecksum { at, stored, .. }) => {
                assert_eq!((at.index.unwrap(), stored), (150, crcs[150]));
            }
            other => panic!("{other:?}"),
        }
        // The same error through a reused batch, which is left empty.
        reader.read_batch(&[1, 2], &mut batch).unwrap();
        match reader.read_batch(indices, &mut batch) {
            Err(Error::SampleChecksum { at, .. }) => assert_eq!(at.index.unwrap(), 150),
            other => panic!("{other:?}"),
        }
        assert!(batch.is_empty() && batch.get(0).is_none() && batch.at(0).is_none());
    }
    let good: Vec<u64> = (0..n as u64).filter(|&i| i != 150).rev().collect();
    let read = reader.read(&good).unwrap();
    assert_eq!(read.len(), good.len());
    for (s, &i) in read.iter().zip(&good) {
        assert_eq!(
            (s.at.index.unwrap(), &s.data[..]),
            (i, &samples[i as usize][..])
        );
    }
}

#[test]
fn bytes_between_the_header_and_the_first_sample_are_ignored() {
    let mut body = b"GAPGAP".to_vec();
    body.extend_from_slice(b"onetwo");
    let file = craft(
        None,
        2,
        &[crc32(b"one"), crc32(b"two")],
        &[36 + 6, 36 + 9],
        &body,
    );
    let reader = FfrReader::from_bytes("gap.ffr", file.into(), ReaderOptions::default()).unwrap();
    let got = reader.read(&[1, 0]).unwrap();
    assert_eq!(
        (&got[0].data[..], &got[1].data[..]),
        (&b"two"[..], &b"one"[..])
    );
    assert_eq!(reader.data_len(), 6);
}

#[test]
fn legacy_files_are_read_and_reported() {
    let file = craft(Some(0), 2, &[crc32(b"ab"), crc32(b"c")], &[36, 38], b"abc");
    let reader = FfrReader::from_bytes("old.ffr", file.into(), ReaderOptions::default()).unwrap();
    assert_eq!(reader.legacy_files().count(), 1);
    assert!(reader.files()[0].header().is_legacy());
    assert_eq!(reader.read_one(1).unwrap().data, &b"c"[..]);
    reader.validate().unwrap();
}

#[test]
fn hostile_headers_fail_at_open_without_allocating() {
    let opts = ReaderOptions::default();
    let open = |bytes: Vec<u8>| FfrReader::from_bytes("h.ffr", bytes.into(), opts);
    // Counts that no file holds: the arrays would need terabytes (an
    // attempt to allocate them would abort this test).
    for n in [1i64 << 40, i64::MAX, -1, i64::MIN, 4] {
        let file = craft(None, n, &[], &[], &[0; 40]);
        match open(file) {
            Err(Error::TruncatedHeader { count, .. }) => assert_eq!(count, Some(n)),
            other => panic!("{n}: {other:?}"),
        }
    }
    // Fewer than 12 bytes.
    for len in 0..12 {
        assert!(matches!(
            open(vec![0; len]),
            Err(Error::TruncatedHeader { count: None, .. })
        ));
    }
    // Offsets: into the header, negative, past the end, decreasing.
    let crcs = [crc32(b"ab"), crc32(b"cd")];
    let cases: [(&[i64], u64, OffsetProblem); 5] = [
        (&[35, 38], 0, OffsetProblem::BeforeData { header_len: 36 }),
        (&[-5, 38], 0, OffsetProblem::BeforeData { header_len: 36 }),
        (&[36, 41], 1, OffsetProblem::PastEnd { size: 40 }),
        (&[38, 36], 1, OffsetProblem::Decreasing { previous: 38 }),
        (&[i64::MAX, 36], 0, OffsetProblem::PastEnd { size: 40 }),
    ];
    for (offsets, bad, problem) in cases {
        let file = craft(None, 2, &crcs, offsets, b"abcd");
        match open(file) {
            Err(e @ Error::InvalidOffset { .. }) => {
                let Error::InvalidOffset { at, problem: p, .. } = &e else {
                    unreachable!()
                };
                assert_eq!((at.record.unwrap(), *p), (bad, problem), "{offsets:?}");
                assert_eq!(e.class().name(), "invalid_offsets");
            }
            other => panic!("{offsets:?}: {other:?}"),
        }
    }
    // The header fits but is larger than the limits allow.
    let file = craft(None, 2, &crcs, &[36, 38], b"abcd");
    let small = ReaderOptions::default().with_limits(Limits::default().with_max_alloc_bytes(10));
    assert!(matches!(
        FfrReader::from_bytes("h.ffr", file.into(), small),
        Err(Error::TooLarge { .. })
    ));
    // A metadata checksum that does not match (checked before offsets).
    let file = craft(Some(1), 2, &crcs, &[38, 36], b"abcd");
    assert!(matches!(
        open(file.clone()),
        Err(Error::MetadataChecksum { stored: 1, .. })
    ));
    let unchecked = ReaderOptions::default().with_check_data(false);
    assert!(matches!(
        FfrReader::from_bytes("h.ffr", file.into(), unchecked),
        Err(Error::InvalidOffset { .. })
    ));
}

#[test]
fn limits_bound_samples_and_batches() {
    let samples: Vec<Vec<u8>> = vec![vec![1; 10], vec![2; 100], vec![3; 10]];
    let file = grist_ffrecord::encode_file(samples.iter().map(|s| &s[..]));
    let options = |limits| ReaderOptions::default().with_limits(limits);
    let reader = FfrReader::from_bytes(
        "l.ffr",
        file.clone().into(),
        options(Limits::default().with_max_record_bytes(50)),
    )
    .unwrap();
    assert!(reader.read(&[0, 2]).is_ok());
    match reader.read(&[0, 1]) {
        Err(Error::SampleTooLarge {
            at,
            len: 100,
            max: 50,
        }) => assert_eq!(at.index.unwrap(), 1),
        other => panic!("{other:?}"),
    }
    let mut source = reader.source();
    assert_eq!(source.next_chunk().unwrap().unwrap().record_count, 1);
    assert!(matches!(
        source.next_chunk(),
        Err(Error::SampleTooLarge { .. })
    ));
    assert!(source.next_chunk().unwrap().is_none());

    // A batch larger than the allocation limit (pread reads allocate).
    let dir = temp_dir();
    let path = dir.path().join("l.ffr");
    fs::write(&path, &file).unwrap();
    let reader =
        FfrReader::open(&path, options(Limits::default().with_max_alloc_bytes(150))).unwrap();
    assert!(reader.read(&[1, 0]).is_ok());
    assert!(matches!(
        reader.read(&[1, 1, 0, 2, 1]).map(|s| s.len()),
        Ok(5)
    ));
    let reader =
        FfrReader::open(&path, options(Limits::default().with_max_alloc_bytes(105))).unwrap();
    match reader.read(&[0, 1]) {
        Err(e @ Error::TooLarge { .. }) => assert_eq!(e.class().name(), "limit"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn folders_need_ffr_files_and_paths_must_be_files() {
    let dir = temp_dir();
    assert!(matches!(
        FfrReader::open(dir.path(), ReaderOptions::default()),
        Err(Error::NoFiles { .. })
    ));
    fs::write(dir.path().join("x.txt"), b"").unwrap();
    assert!(matches!(
        dataset_files(dir.path()),
        Err(Error::NoFiles { .. })
    ));
    // A folder named like a file is no file of the dataset, and not a
    // file to open.
    fs::create_dir(dir.path().join("parts.ffr")).unwrap();
    assert!(matches!(
        FfrReader::open(dir.path(), ReaderOptions::default()),
        Err(Error::NoFiles { .. })
    ));
    assert!(matches!(
        FfrReader::open_files([dir.path().join("parts.ffr")], ReaderOptions::default()),
        Err(Error::NotAFile { .. })
    ));
    assert!(matches!(
        FfrReader::open(dir.path().join("missing.ffr"), ReaderOptions::default()),
        Err(e @ Error::Storage(_)) if e.class().name() == "io"
    ));
    // An empty list of files is an empty dataset.
    let empty = FfrReader::open_files(Vec::<&Path>::new(), ReaderOptions::default()).unwrap();
    assert!(empty.is_empty());
    assert!(matches!(
        empty.read_one(0),
        Err(Error::IndexOutOfRange { index: 0, count: 0 })
    ));
}

#[test]
fn a_file_that_shrinks_after_open_gives_a_truncated_sample() {
    let dir = temp_dir();
    let path = dir.path().join("s.ffr");
    let samples: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 100]).collect();
    write(&path, &samples);
    let reader = FfrReader::open(&path, ReaderOptions::default()).unwrap();
    let size = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(size - 150)
        .unwrap();
    assert!(reader.read(&[0, 7]).is_ok());
    // The error names the first wanted sample past the new end.
    for (indices, bad) in [(&[8u64][..], 8), (&[0, 9, 1], 9), (&[7, 9, 8], 8)] {
        match reader.read(indices) {
            Err(e @ Error::TruncatedSample { .. }) => {
                assert_eq!(e.class().name(), "truncated");
                assert_eq!(e.location().unwrap().index, Some(bad), "{indices:?}: {e}");
            }
            other => panic!("{indices:?}: {other:?}"),
        }
    }
    let mut source = reader.source().with_chunk_bytes(1 << 20);
    assert!(matches!(
        source.next_chunk(),
        Err(Error::TruncatedSample { .. })
    ));
}

#[test]
fn read_unchecked_leaves_sample_checks_to_the_caller_but_not_header_checks() {
    let dir = temp_dir();
    let path = dir.path().join("a.ffr");
    let samples: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 10 + i as usize]).collect();
    write(&path, &samples);
    let reader = FfrReader::open(&path, ReaderOptions::default()).unwrap();
    let offsets = reader.files()[0].header().offsets().to_vec();
    // Damage sample 4's bytes.
    let mut bytes = fs::read(&path).unwrap();
    bytes[offsets[4] as usize + 2] ^= 1;
    fs::write(&path, &bytes).unwrap();
    let reader = FfrReader::open(&path, ReaderOptions::default()).unwrap();
    assert!(matches!(
        reader.read(&[3, 4]),
        Err(Error::SampleChecksum { .. })
    ));
    let got = reader.read_unchecked(&[3, 4]).unwrap();
    assert_eq!(got[0].data, samples[3]);
    assert_ne!(got[1].data, samples[4]);
    // The caller's check finds what `read` found.
    let stored = reader.files()[0].header().checksums()[4];
    assert_ne!(crc32(&got[1].data), stored);
    // A damaged header still fails at open, whatever is read later.
    bytes[4] ^= 1;
    fs::write(&path, &bytes).unwrap();
    assert!(FfrReader::open(&path, ReaderOptions::default()).is_err());
}
