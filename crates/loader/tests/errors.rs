//! Bad input and bad arguments: errors name the file and the record, the
//! batches before them arrive, and the loader stops.

use std::sync::Arc;

use grist_loader::{Error, Loader, LoaderBuilder, ShardMode, Threads};
use grist_tensor::{DType, ErrorKind, FeatureSpec, FormatError, RegistryError, SpecFile};
use grist_testkit::chain;

use crate::support::{Fixture, KINDS, Kind, ids, specs};

/// Flips a byte `at` bytes before the end of `path`.
fn damage(path: &std::path::Path, from_end: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes.len() - from_end;
    bytes[at] ^= 0x55;
    std::fs::write(path, bytes).unwrap();
}

/// Reads until the error; returns the ids before it and the error.
fn until_error(loader: &mut Loader) -> (Vec<i64>, Error) {
    let mut seen = Vec::new();
    loop {
        match loader.next_batch() {
            Some(Ok(b)) => seen.extend(ids(&b)),
            Some(Err(e)) => {
                assert!(
                    loader.next_batch().is_none(),
                    "the loader stops after an error"
                );
                return (seen, e);
            }
            None => panic!("no error"),
        }
    }
}

#[test]
fn damaged_files_fail_at_their_record() {
    for (kind, threads) in [
        (Kind::Tfrecord, 1),
        (Kind::Tfrecord, 2),
        (Kind::TfrecordIndexed, 2),
        (Kind::Avro, 2),
        (Kind::AvroDeflate, 1),
        (Kind::AvroDeflate, 2),
        (Kind::Ffrecord, 2),
    ] {
        let fx = Fixture::standard(kind);
        // Damage the last record of the second file.
        damage(&fx.sources[1], 6);
        let mut loader = fx
            .builder()
            .with_threads(Threads::Fixed(threads))
            .build()
            .unwrap();
        let (seen, e) = until_error(&mut loader);
        let text = e.to_string();
        assert!(text.contains("data-1"), "{kind:?}: {text}");
        // Every record of the first file came before.
        assert!(
            seen.len() >= 32 && seen.iter().all(|&i| i < 87),
            "{kind:?}: {seen:?}"
        );
        // Every format's error says where, through the loader's error.
        let at = e.location().expect("a data error has a location");
        assert!(at.file.contains("data-1"), "{kind:?}: {at}");
        match kind {
            Kind::Tfrecord | Kind::TfrecordIndexed => {
                assert!(e.downcast_ref::<grist_tfrecord::Error>().is_some(), "{e:?}");
                assert_eq!(at.record, Some(46), "{kind:?}: {text}");
            }
            Kind::Avro | Kind::AvroDeflate => {
                assert!(
                    e.downcast_ref::<grist_avro_tensor::Error>().is_some(),
                    "{e:?}"
                )
            }
            Kind::Ffrecord => {
                assert!(e.downcast_ref::<grist_ffrecord::Error>().is_some(), "{e:?}");
                assert_eq!(at.record, Some(46), "{kind:?}: {text}");
                assert!(text.contains("46"), "{text}");
            }
            _ => panic!("{kind:?}: {e:?}"),
        }
    }
}

#[test]
fn bad_records_name_their_feature() {
    let fx = Fixture::standard(Kind::Tfrecord);
    // id decoded as a 2-vector: every record is wrong.
    let mut loader = fx
        .builder()
        .with_specs([FeatureSpec::dense("id", DType::Int64, [2])])
        .build()
        .unwrap();
    let e = loader.next_batch().unwrap().unwrap_err();
    let text = e.to_string();
    assert!(text.contains("data-0") && text.contains("id"), "{text}");
    assert!(loader.next_batch().is_none());
}

#[test]
fn missing_and_unknown_files() {
    let fx = Fixture::standard(Kind::Tfrecord);
    let missing = fx.sources[0].with_file_name("missing.tfrecord");
    let mut loader = crate::support::loader()
        .with_path(&missing)
        .with_specs(specs())
        .build()
        .unwrap();
    match loader.next_batch() {
        Some(Err(e)) => {
            assert!(e.to_string().contains("missing.tfrecord"), "{e}");
            assert_eq!(FormatError::kind(&e), ErrorKind::Io, "{e:?}");
            // The whole chain, as the CLI prints it: the path and what is
            // wrong once each.
            let text = chain(&e);
            assert_eq!(text, format!("{}: not found", missing.display()));
            assert_eq!(
                e.location().map(|at| at.file.to_string()),
                Some(missing.display().to_string())
            );
        }
        other => panic!("{other:?}"),
    }
    let txt = fx.sources[0].with_file_name("notes.txt");
    std::fs::write(&txt, b"").unwrap();
    assert!(matches!(
        crate::support::loader()
            .with_path(&txt)
            .with_specs(specs())
            .build(),
        Err(Error::Sources(e)) if matches!(*e, RegistryError::Unrecognized { .. })
    ));
    // An explicit format reads any name.
    std::fs::copy(&fx.sources[0], &txt).unwrap();
    let loader = crate::support::loader()
        .with_path(&txt)
        .with_format(Arc::new(grist_tfrecord::TfRecordFormat))
        .with_specs(specs())
        .with_batch_size(16)
        .build()
        .unwrap();
    let batches: Vec<_> = loader.collect();
    assert_eq!(batches.len(), 3, "{batches:?}");
}

#[test]
fn bad_options_are_refused_at_build() {
    let fx = Fixture::standard(Kind::Avro);
    let bad = [
        fx.builder().with_batch_size(0),
        fx.builder().with_shard(2, 2),
        fx.builder().with_shard(0, 0),
        fx.builder().with_cycle_length(0),
        fx.builder().with_threads(Threads::Fixed(0)),
        fx.builder()
            .with_threads(Threads::Fixed(grist_loader::MAX_THREADS + 1)),
        fx.builder().with_threads(Threads::Fixed(usize::MAX)),
        fx.builder()
            .with_shard(0, 5)
            .with_shard_mode(ShardMode::Files),
        crate::support::loader().with_paths(fx.sources.clone()),
    ];
    for b in bad {
        assert!(matches!(b.build(), Err(Error::BadOption { .. })));
    }
    let sequence = SpecFile {
        context_features: specs(),
        sequence: true,
        ..SpecFile::default()
    };
    let unsupported = |b: LoaderBuilder| match b.build() {
        Err(e) => assert_eq!(e.kind(), ErrorKind::Unsupported, "{e:?}"),
        Ok(l) => panic!("{l:?}"),
    };
    unsupported(fx.builder().with_spec_file(sequence));
    unsupported(
        fx.builder()
            .with_random_access(grist_loader::RandomAccess::Required),
    );
    let plain = Fixture::standard(Kind::Tfrecord);
    unsupported(
        plain
            .builder()
            .with_random_access(grist_loader::RandomAccess::Required),
    );
}

/// Options at the ends of their ranges: the loader reads every record
/// (or, as a rank of `usize::MAX`, none) without panicking, hanging or
/// allocating by the option. These once overflowed `batch + buffer`,
/// sized a vector by the batch size, the interleave cycle or the thread
/// count, and looped over every rank.
#[test]
fn options_at_their_limits_still_work() {
    for kind in KINDS {
        let fx = Fixture::new(kind, 3, 20);
        let all = fx.total as usize;
        let cases: [(&str, LoaderBuilder, usize); 9] = [
            ("batch", fx.builder().with_batch_size(usize::MAX), all),
            (
                "batch, shuffled",
                fx.builder().with_batch_size(usize::MAX).with_shuffle(true),
                all,
            ),
            (
                "buffer",
                fx.builder()
                    .with_shuffle(true)
                    .with_shuffle_buffer(usize::MAX),
                all,
            ),
            ("prefetch 0", fx.builder().with_prefetch_bytes(0), all),
            ("prefetch", fx.builder().with_prefetch_bytes(u64::MAX), all),
            ("chunk", fx.builder().with_chunk_bytes(usize::MAX), all),
            ("cycle", fx.builder().with_cycle_length(usize::MAX), all),
            (
                "rank",
                fx.builder().with_shard(usize::MAX - 1, usize::MAX),
                0,
            ),
            (
                "rank, equal batches",
                fx.builder()
                    .with_shard(usize::MAX - 1, usize::MAX)
                    .with_equal_batches(true),
                0,
            ),
        ];
        for (what, builder, want) in cases {
            let mut loader = builder.build().unwrap();
            let mut rows = 0;
            while let Some(batch) = loader.next_batch() {
                rows += batch
                    .unwrap_or_else(|e| panic!("{kind:?}, {what}: {e}"))
                    .rows();
            }
            assert_eq!(rows, want, "{kind:?}, {what}");
        }
    }
}

/// A spec whose dense shape is far larger than any record: the loader
/// fails with an error naming the feature, at build or at the first
/// batch, instead of reserving the shape's values for every row of the
/// batch (petabytes) or wrapping the element count around.
#[test]
fn specs_with_huge_shapes_fail_cleanly() {
    let with_x = |x: FeatureSpec| {
        let mut s = specs();
        s[1] = x;
        s
    };
    let cases = [
        (
            with_x(FeatureSpec::dense("x", DType::Float32, [1 << 40])),
            "\"x\"",
        ),
        (
            with_x(FeatureSpec::dense("x", DType::Float32, [1 << 32, 1 << 32])),
            "2^63 - 1 elements",
        ),
        (
            with_x(
                FeatureSpec::dense("x", DType::Float32, [1 << 40])
                    .with_default(serde_json::json!(0.0)),
            ),
            "more than a default may fill",
        ),
    ];
    for kind in KINDS {
        let fx = Fixture::new(kind, 1, 5);
        for (specs, want) in &cases {
            let error = match fx.builder().with_specs(specs.clone()).build() {
                Err(e) => e,
                Ok(mut loader) => match loader.next_batch() {
                    Some(Err(e)) => e,
                    other => panic!("{kind:?}: {other:?}"),
                },
            };
            assert!(error.to_string().contains(want), "{kind:?}: {error}");
        }
    }
}

#[test]
fn dropping_a_loader_midway_stops_its_threads() {
    for kind in [Kind::Tfrecord, Kind::Ffrecord] {
        let fx = Fixture::standard(kind);
        // A tiny budget keeps the prefetch thread blocked on a full queue.
        let mut loader = fx.builder().with_prefetch_bytes(1).build().unwrap();
        loader.next_batch().unwrap().unwrap();
        drop(loader); // joins the prefetch thread; a hang fails the test run
    }
}

#[test]
fn a_loader_can_move_to_another_thread() {
    fn send<T: Send>(t: T) -> T {
        t
    }
    let fx = Fixture::standard(Kind::Avro);
    let mut loader = send(fx.builder().build().unwrap());
    let handle = std::thread::spawn(move || match loader.next_batch() {
        Some(Ok(b)) => b.rows(),
        other => panic!("{other:?}"),
    });
    assert_eq!(handle.join().unwrap(), 16);
}

#[test]
fn tfrecord_data_crcs_checked_on_the_parse_threads_fail_as_the_reader_does() {
    for kind in [Kind::Tfrecord, Kind::TfrecordGzip] {
        // Autotune moves the checks between the prefetch and the parse
        // threads as its preferred thread count changes.
        for threads in [Threads::Fixed(1), Threads::Fixed(2), Threads::Autotune] {
            let fx = Fixture::standard(kind);
            let path = &fx.sources[2];
            // Flip a payload byte of record 20 of the third file (in the
            // uncompressed stream, then written back compressed).
            let compression = if kind == Kind::TfrecordGzip {
                grist_tfrecord::Compression::Gzip
            } else {
                grist_tfrecord::Compression::None
            };
            let plain = {
                let mut r = compression
                    .reader(std::fs::File::open(path).unwrap())
                    .unwrap();
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut r, &mut v).unwrap();
                v
            };
            let mut frames = grist_tfrecord::FrameDecoder::new("");
            let mut at = 0usize;
            for _ in 0..20 {
                let grist_tfrecord::Decoded::Frame(f) = frames.decode(&plain[at..]).unwrap() else {
                    panic!("short file");
                };
                at += f.len;
            }
            let mut damaged = plain.clone();
            damaged[at + grist_tfrecord::HEADER_LEN + 3] ^= 0x40;
            let bytes = {
                let mut w = compression.writer(Vec::new()).unwrap();
                std::io::Write::write_all(&mut w, &damaged).unwrap();
                w.finish().unwrap()
            };
            std::fs::write(path, bytes).unwrap();
            // What the record reader says.
            let mut reader =
                grist_tfrecord::RecordReader::open(path, grist_tfrecord::ReaderOptions::default())
                    .unwrap();
            let expected = loop {
                match reader.next_record() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("{kind:?}: the damage went unnoticed"),
                    Err(e) => break e.to_string(),
                }
            };
            let (seen, e) = first_error(&fx, threads);
            match e.downcast_ref::<grist_tfrecord::Error>() {
                Some(t @ grist_tfrecord::Error::CorruptData { at, .. }) => {
                    assert_eq!(at.record, Some(20), "{kind:?}");
                    assert!(t.is_data_loss());
                }
                _ => panic!("{kind:?} {threads:?}: {e:?}"),
            }
            assert_eq!(e.to_string(), expected, "{kind:?} {threads:?}");
            stopped_before(&seen, 87 + 20);
        }
    }
}

#[test]
fn ffrecord_checksums_checked_on_the_parse_threads_fail_as_the_reader_does() {
    let all = [1, 2, 3].map(Threads::Fixed);
    for threads in all.into_iter().chain([Threads::Autotune]) {
        let fx = Fixture::standard(Kind::Ffrecord);
        let path = &fx.sources[1];
        let reader = grist_ffrecord::FfrReader::open(path, Default::default()).unwrap();
        // Flip a byte in the middle of sample 30 of the second file.
        let offsets = reader.files()[0].header().offsets().to_vec();
        let mut bytes = std::fs::read(path).unwrap();
        bytes[offsets[30] as usize + 5] ^= 0x20;
        std::fs::write(path, bytes).unwrap();
        // What the reader of the whole dataset says of sample 30 of the
        // second file (after the first file's 40).
        let expected = grist_ffrecord::FfrReader::open_files(&fx.sources, Default::default())
            .unwrap()
            .read(&[70])
            .unwrap_err();
        assert!(
            matches!(expected, grist_ffrecord::Error::SampleChecksum { .. }),
            "{expected:?}"
        );
        let (seen, e) = first_error(&fx, threads);
        match e.downcast_ref::<grist_ffrecord::Error>() {
            Some(grist_ffrecord::Error::SampleChecksum { at, .. }) => {
                // The dataset number counts the first file's 40 samples.
                assert_eq!((at.record, at.index), (Some(30), Some(70)), "{threads:?}");
            }
            _ => panic!("{threads:?}: {e:?}"),
        }
        assert_eq!(e.to_string(), expected.to_string(), "{threads:?}");
        stopped_before(&seen, 70);
    }
}

/// Reads `fx` with `threads` parse threads until the error.
fn first_error(fx: &Fixture, threads: Threads) -> (Vec<i64>, Error) {
    let mut loader = fx.builder().with_threads(threads).build().unwrap();
    until_error(&mut loader)
}

/// Checks that the records `seen` before an error at record `bad` (a
/// dataset number) are those of the batches before the one holding it
/// (batches of 16, no shuffle).
fn stopped_before(seen: &[i64], bad: i64) {
    assert!(seen.iter().all(|&i| i < bad), "{bad}: {seen:?}");
    assert!(seen.len() as i64 >= bad - 16, "{bad}: {}", seen.len());
}

#[test]
fn the_first_bad_record_of_a_batch_is_reported_whichever_thread_meets_it() {
    // Two damaged samples in one batch of 16 (dataset numbers 64..80): in
    // the head and a unit, or in two units, which the threads may finish
    // in either order.
    for (first, second) in [(26, 38), (30, 38), (33, 36)] {
        let fx = Fixture::standard(Kind::Ffrecord);
        let path = &fx.sources[1];
        let reader = grist_ffrecord::FfrReader::open(path, Default::default()).unwrap();
        let offsets = reader.files()[0].header().offsets().to_vec();
        let mut bytes = std::fs::read(path).unwrap();
        for sample in [first, second] {
            bytes[offsets[sample] as usize + 5] ^= 0x20;
        }
        std::fs::write(path, bytes).unwrap();
        for threads in [1, 2, 3].map(Threads::Fixed) {
            for _ in 0..5 {
                let (seen, e) = first_error(&fx, threads);
                match e.downcast_ref::<grist_ffrecord::Error>() {
                    Some(grist_ffrecord::Error::SampleChecksum { at, .. }) => {
                        assert_eq!(at.record, Some(first as u64), "{threads:?}");
                    }
                    _ => panic!("{threads:?}: {e:?}"),
                }
                stopped_before(&seen, 40 + first as i64);
            }
        }
    }
}

/// The loader's errors box the format crates' ones, so that a caller's
/// `Result<T, grist_loader::Error>` stays under clippy's
/// `result_large_err` threshold (128 bytes), which warns by default.
#[test]
fn errors_stay_small_enough_to_return() {
    let size = std::mem::size_of::<Error>();
    assert!(size < 128, "grist_loader::Error is {size} bytes");
    let e: Error = grist_tensor::BoxError::from(grist_tfrecord::Error::Io {
        file: "a.tfrecord".into(),
        source: std::io::Error::other("gone"),
    })
    .into();
    assert!(matches!(e, Error::Format(_)), "{e:?}");
    // Transparent: the format crate's message and cause, unchanged.
    assert_eq!(e.to_string(), "a.tfrecord");
    assert_eq!(chain(&e), "a.tfrecord: gone");
}

/// A spec file is read through the loader's storage: a missing one is the
/// storage layer's error, naming the file once.
#[test]
fn spec_files_are_read_through_the_storage() {
    let fx = Fixture::standard(Kind::Tfrecord);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.json");
    let doc = serde_json::json!({ "features": specs() });
    std::fs::write(&spec, doc.to_string()).unwrap();
    let from_file = crate::support::drain(
        &mut crate::support::loader()
            .with_paths(fx.sources.clone())
            .with_spec_path(&spec)
            .build()
            .unwrap(),
    );
    let inline = crate::support::drain(&mut fx.builder().build().unwrap());
    assert_eq!(
        crate::support::ids_by_epoch(&from_file),
        crate::support::ids_by_epoch(&inline)
    );

    let missing = dir.path().join("missing.json");
    let e = crate::support::loader()
        .with_paths(fx.sources.clone())
        .with_spec_path(&missing)
        .build()
        .unwrap_err();
    assert!(matches!(e, Error::Storage(_)), "{e:?}");
    assert_eq!(FormatError::kind(&e), ErrorKind::Io);
    assert_eq!(chain(&e), format!("{}: not found", missing.display()));
}
