//! Resuming, manifests, shards and the refusal to overwrite another
//! conversion: judged by what the loader reads from the outputs against
//! what it reads from the inputs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use grist::io::Digest;
use grist::tensor::{Batch, DType, FeatureSpec, Format, SpecFile, Values, WriteOptions};
use grist::tfrecord::{ExampleBuilder, RecordWriter};
use grist::{ConvertError, ConvertTarget, Manifest, Storage};

fn format(id: &str) -> Arc<dyn Format> {
    grist::registry().get(id).unwrap()
}

fn spec() -> SpecFile {
    SpecFile {
        features: vec![
            FeatureSpec::dense("id", DType::Int64, []),
            FeatureSpec::varlen("v", DType::Float32),
        ],
        ..SpecFile::default()
    }
}

/// TFRecord files of records `id` (the ranges given) with a few floats
/// each; their paths.
fn write_inputs(dir: &Path, ranges: &[std::ops::Range<i64>]) -> Vec<String> {
    ranges
        .iter()
        .enumerate()
        .map(|(n, range)| {
            let path = dir.join(format!("in-{n:02}.tfrecord"));
            let mut w = RecordWriter::create(&path, Default::default()).unwrap();
            for i in range.clone() {
                let values: Vec<f32> = (0..(i % 7)).map(|k| (i * 10 + k) as f32).collect();
                let e = ExampleBuilder::new()
                    .with_int64s("id", [i])
                    .with_floats("v", values);
                w.write_record(&e.encode()).unwrap();
            }
            w.finish().unwrap();
            path.display().to_string()
        })
        .collect()
}

/// Everything the loader reads from `sources` with `spec`, in order.
fn load(sources: &[String], spec: &SpecFile) -> Vec<Batch> {
    grist::loader()
        .with_paths(sources.iter().map(PathBuf::from))
        .with_spec_file(spec.clone())
        .with_batch_size(64)
        .build()
        .unwrap_or_else(|e| panic!("{sources:?}: {e}"))
        .map(|b| b.unwrap_or_else(|e| panic!("{sources:?}: {e}")))
        .collect()
}

/// The outputs in `out` read back with the `spec.json` there.
fn load_out(out: &Path) -> Vec<Batch> {
    let text = std::fs::read_to_string(out.join(grist::SPEC_FILE)).unwrap();
    load(
        &[out.display().to_string()],
        &SpecFile::from_json(&text).unwrap(),
    )
}

fn ids(batches: &[Batch]) -> Vec<i64> {
    let mut ids = Vec::new();
    for b in batches {
        let Values::Int64(v) = &b.get("id").unwrap().as_dense().unwrap().values else {
            panic!("id is int64");
        };
        ids.extend_from_slice(v);
    }
    ids
}

/// Fails unless `got` holds the records of `want` in the same order,
/// value for value.
fn assert_same_records(want: &[Batch], got: &[Batch], what: &str) {
    use grist::tensor::json::{batch_to_json, compare_json};
    assert_eq!(ids(want), ids(got), "{what}: ids");
    assert_eq!(want.len(), got.len(), "{what}: batches");
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        if let Err(m) = compare_json(&batch_to_json(w), &batch_to_json(g)) {
            panic!("{what}: batch {i} differs: {m}");
        }
    }
}

fn mtime(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

/// A run killed after 5 of 8 parts (its journal lists them, one more
/// part half-written, no manifest) resumes: the 5 parts stay untouched and
/// their records are not encoded again (but the batch straddling the
/// boundary), the rest is written, and the outputs are the inputs, each
/// record once, in order; the manifest is the one an uninterrupted run
/// writes. A run after that does nothing.
#[test]
fn resume_skips_complete_parts() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = write_inputs(dir.path(), &[0..100, 100..250, 250..300]);
    let want = load(&inputs, &spec());
    let out = dir.path().join("out");
    let target = ConvertTarget::new(format("tfrecord"), out.display().to_string())
        .with_records_per_file(40)
        .with_batch_size(16);
    let first = grist::convert(&inputs, Some(&spec()), &target).unwrap();
    assert_eq!(
        (
            first.files.len(),
            first.encoded_records,
            first.skipped_parts
        ),
        (8, 300, 0)
    );
    assert_same_records(&want, &load_out(&out), "first run");

    // What a kill after part 5 leaves: the journal of 5 parts, a part
    // half-written, no manifest.
    let full: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let mut journal = full.clone();
    journal["complete"] = false.into();
    journal["parts"].as_array_mut().unwrap().truncate(5);
    std::fs::write(
        out.join("convert-journal.json"),
        serde_json::to_vec(&journal).unwrap(),
    )
    .unwrap();
    std::fs::remove_file(out.join("manifest.json")).unwrap();
    for (address, _) in &first.files[5..] {
        std::fs::remove_file(address.as_str()).unwrap();
    }
    std::fs::write(out.join(".part-00005.tfrecord.tmp-999999-0"), b"cut short").unwrap();
    let kept: Vec<_> = first.files[..5]
        .iter()
        .map(|(a, _)| mtime(Path::new(a.as_str())))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(20));

    let second = grist::convert(&inputs, Some(&spec()), &target).unwrap();
    assert_eq!((second.skipped_parts, second.skipped_records), (5, 200));
    // Whole batches of 16 before record 200 are not encoded; the one
    // across it is.
    assert_eq!(second.encoded_records, 300 - 200 / 16 * 16);
    for ((address, _), before) in second.files[..5].iter().zip(&kept) {
        assert_eq!(mtime(Path::new(address.as_str())), *before, "{address}");
    }
    assert_same_records(&want, &load_out(&out), "resumed");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    // TFRecord files are the same bytes for the same records (Avro files
    // are not: each has a random sync marker).
    assert_eq!(manifest, full, "the same manifest, checksums included");
    let names = grist_testkit::dir_entries(&out);
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with('.') || n.starts_with("convert-journal")),
        "{names:?}"
    );

    let third = grist::convert(&inputs, Some(&spec()), &target).unwrap();
    assert!(third.up_to_date);
    assert_eq!((third.encoded_records, third.records), (0, 300));
}

/// Every part of every format, compressed or not, is in the manifest with
/// its size and the CRC-32C of its bytes (computed while writing; checked
/// here against the files).
#[test]
fn manifest_checksums_are_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = write_inputs(dir.path(), &[0..90, 90..130]);
    let cases = [
        ("tfrecord", WriteOptions::new()),
        ("tfrecord", WriteOptions::new().with_compression("GZIP")),
        ("avro", WriteOptions::new().with_codec("deflate")),
        ("ffrecord", WriteOptions::new()),
        ("ffrecord", WriteOptions::new().with_payload("ofrecord")),
        ("ofrecord", WriteOptions::new()),
    ];
    for (n, (id, options)) in cases.into_iter().enumerate() {
        let out = dir.path().join(format!("out-{n}"));
        let target = ConvertTarget::new(format(id), out.display().to_string())
            .with_options(options)
            .with_records_per_file(50);
        let report = grist::convert(&inputs, Some(&spec()), &target).unwrap();
        let manifest = Manifest::read(
            &Storage::new(),
            &grist::Address::from(out.join("manifest.json")),
        )
        .unwrap();
        assert!(manifest.complete);
        assert_eq!((manifest.records, manifest.parts.len()), (130, 3), "{n}");
        let mut total = 0;
        for part in &manifest.parts {
            let bytes = std::fs::read(out.join(&part.file)).unwrap();
            let digest = Digest::of(&bytes);
            assert_eq!(part.bytes, digest.size, "{n}: {}", part.file);
            assert_eq!(part.crc32c, Some(digest.crc32c), "{n}: {}", part.file);
            total += part.bytes;
        }
        assert_eq!(manifest.bytes, total, "{n}");
        assert_eq!(report.manifest, manifest, "{n}");
    }
}

/// Shard `i` of `n` for every `i`, then the merge: the union of the
/// shards' outputs is the inputs, each record once, over several files
/// (shards of whole files) and over one (shards of records); the merged
/// manifest counts them all. Without one shard's manifest, the merge
/// fails naming it.
#[test]
fn shards_cover_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let ranges: Vec<_> = (0..9)
        .map(|k| k * 70..(k + 1) * 70 - (k % 3) * 10)
        .collect();
    let several = write_inputs(dir.path(), &ranges);
    let one_dir = dir.path().join("one");
    std::fs::create_dir(&one_dir).unwrap();
    // Large enough for several chunks of the stream.
    let one = write_inputs(&one_dir, std::slice::from_ref(&(0..40_000)));
    for (what, inputs) in [("files", &several), ("records", &one)] {
        let mut want = ids(&load(inputs, &spec()));
        want.sort_unstable();
        for n in [1usize, 3, 7] {
            let out = dir.path().join(format!("out-{what}-{n}"));
            let storage = Storage::new();
            let mut non_empty = 0;
            for i in 0..n {
                let target = ConvertTarget::new(format("tfrecord"), out.display().to_string())
                    .with_records_per_file(3_000)
                    .with_batch_size(500)
                    .with_shard(i, n);
                let report = grist::convert(inputs, Some(&spec()), &target).unwrap();
                non_empty += usize::from(report.records > 0);
                // Each shard holds the loader's share, in its order (a
                // conversion started by a loader-built shard resumes).
                let share = grist::loader()
                    .with_paths(inputs.clone())
                    .with_spec_file(spec())
                    .with_shard(i, n)
                    .build()
                    .unwrap()
                    .map(|b| b.unwrap())
                    .collect::<Vec<_>>();
                let files: Vec<String> = report
                    .files
                    .iter()
                    .map(|(a, _)| a.as_str().to_string())
                    .collect();
                let written = if files.is_empty() {
                    Vec::new()
                } else {
                    load(&files, &spec())
                };
                assert_eq!(ids(&written), ids(&share), "{what} {n}: shard {i}");
            }
            if n > 1 {
                assert!(non_empty > 1, "{what} {n}: the work was shared");
            }
            let mut got = ids(&load_out(&out));
            got.sort_unstable();
            assert_eq!(got, want, "{what} {n}: each record once");
            if n > 1 {
                let merged = grist::merge_shards(&storage, &out.display().to_string()).unwrap();
                assert_eq!(merged.records, want.len() as u64, "{what} {n}");
                assert!(merged.parts.iter().all(|p| p.shard.is_some()));
                let manifest =
                    Manifest::read(&storage, &grist::Address::from(out.join("manifest.json")))
                        .unwrap();
                assert_eq!(manifest, merged);
                let missing = out.join(format!("manifest-1-of-{n}.json"));
                std::fs::remove_file(&missing).unwrap();
                match grist::merge_shards(&storage, &out.display().to_string()) {
                    Err(e @ ConvertError::MissingShard { shard: 1, .. }) => {
                        assert!(
                            e.to_string().contains(&missing.display().to_string()),
                            "{e}"
                        )
                    }
                    other => panic!("{what} {n}: {other:?}"),
                }
            }
        }
    }
}

/// Shards started together into an empty folder (as a job array starts
/// them) all claim it as the same conversion.
#[test]
fn shards_started_together_share_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let ranges: Vec<_> = (0..6).map(|k| k * 40..(k + 1) * 40).collect();
    let inputs = write_inputs(dir.path(), &ranges);
    for round in 0..5 {
        let out = dir.path().join(format!("out-{round}"));
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|i| {
                    let (out, inputs) = (&out, &inputs);
                    s.spawn(move || {
                        let target =
                            ConvertTarget::new(format("ffrecord"), out.display().to_string())
                                .with_records_per_file(25)
                                .with_shard(i, 3);
                        grist::convert(inputs, Some(&spec()), &target).map(|r| r.records)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut total = 0;
        for r in results {
            total += r.unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        assert_eq!(total, 240, "round {round}");
        let mut got = ids(&load_out(&out));
        got.sort_unstable();
        assert_eq!(got, (0..240).collect::<Vec<_>>(), "round {round}");
        grist::merge_shards(&Storage::new(), &out.display().to_string()).unwrap();
    }
}

/// Another conversion into the same folder is refused (nothing touched)
/// unless forced, and then replaces the old outputs; files named as
/// outputs without a convert.json are refused too.
#[test]
fn a_different_conversion_is_refused_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = write_inputs(dir.path(), std::slice::from_ref(&(0..120)));
    let out = dir.path().join("out");
    let target = |per_file| {
        ConvertTarget::new(format("avro"), out.display().to_string())
            .with_records_per_file(per_file)
    };
    grist::convert(&inputs, Some(&spec()), &target(40)).unwrap();
    let before = grist_testkit::dir_entries(&out);
    let err = grist::convert(&inputs, Some(&spec()), &target(50)).unwrap_err();
    assert!(
        matches!(&err, ConvertError::DifferentConversion { file } if file.ends_with("convert.json")),
        "{err:?}"
    );
    assert_eq!(grist_testkit::dir_entries(&out), before, "nothing touched");
    // Another format is another conversion too.
    let err = grist::convert(
        &inputs,
        Some(&spec()),
        &ConvertTarget::new(format("tfrecord"), out.display().to_string()),
    )
    .unwrap_err();
    assert!(matches!(err, ConvertError::DifferentConversion { .. }));

    let report = grist::convert(&inputs, Some(&spec()), &target(50).with_force(true)).unwrap();
    assert_eq!(report.files.len(), 3);
    let parts: Vec<_> = grist_testkit::dir_entries(&out)
        .into_iter()
        .filter(|n| n.starts_with("part-"))
        .collect();
    assert_eq!(
        parts,
        ["part-00000.avro", "part-00001.avro", "part-00002.avro"]
    );
    assert_eq!(ids(&load_out(&out)), (0..120).collect::<Vec<_>>());

    // Into the inputs' own folder: refused, forced or not.
    let err = grist::convert(
        &inputs,
        Some(&spec()),
        &ConvertTarget::new(format("tfrecord"), dir.path().display().to_string()).with_force(true),
    )
    .unwrap_err();
    assert!(
        matches!(&err, ConvertError::InputInOutput { file } if file.ends_with("in-00.tfrecord")),
        "{err:?}"
    );
    assert!(dir.path().join("in-00.tfrecord").exists());

    // Outputs of no known conversion.
    let stray = dir.path().join("stray");
    std::fs::create_dir(&stray).unwrap();
    std::fs::write(stray.join("part-00000.avro"), b"someone's").unwrap();
    let stray_target = ConvertTarget::new(format("avro"), stray.display().to_string());
    let err = grist::convert(&inputs, Some(&spec()), &stray_target).unwrap_err();
    assert!(
        matches!(&err, ConvertError::DifferentConversion { file } if file.ends_with("part-00000.avro")),
        "{err:?}"
    );
    grist::convert(&inputs, Some(&spec()), &stray_target.with_force(true)).unwrap();
    assert_eq!(ids(&load_out(&stray)), (0..120).collect::<Vec<_>>());
}

/// A bad shard is refused before anything is written.
#[test]
fn a_shard_beyond_its_count_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = write_inputs(dir.path(), std::slice::from_ref(&(0..10)));
    let out = dir.path().join("out");
    let target = ConvertTarget::new(format("avro"), out.display().to_string()).with_shard(3, 3);
    let err = grist::convert(&inputs, Some(&spec()), &target).unwrap_err();
    assert!(matches!(err, ConvertError::BadShard { index: 3, count: 3 }));
    assert!(!out.exists());
}

/// `with_files` counts the inputs to plan its files and says their total
/// in the progress (where `grist convert --files` takes its bar's end,
/// rather than counting the inputs a second time); without it nothing is
/// counted and the total is unknown.
#[test]
fn with_files_says_the_total_it_counted_in_the_progress() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = write_inputs(dir.path(), &[0..150, 150..230]);
    let expected = ids(&load(&inputs, &spec())).len() as u64;
    for files in [None, Some(3)] {
        let out = dir.path().join(format!("out-{}", files.unwrap_or(0)));
        let mut target =
            ConvertTarget::new(format("tfrecord"), out.display().to_string()).with_batch_size(64);
        if let Some(n) = files {
            target = target.with_files(n);
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let told = Arc::clone(&seen);
        target = target.with_progress(move |p| told.lock().unwrap().push(p.total));
        let report = grist::convert(&inputs, Some(&spec()), &target).unwrap();
        assert_eq!(report.records, expected, "{files:?}");
        assert_eq!(report.files.len(), files.unwrap_or(1), "{files:?}");
        let seen = seen.lock().unwrap();
        assert!(!seen.is_empty(), "{files:?}: no progress");
        let want = files.map(|_| expected);
        assert!(seen.iter().all(|&t| t == want), "{files:?}: {seen:?}");
    }
}
