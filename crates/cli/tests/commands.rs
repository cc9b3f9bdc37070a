//! Smoke tests of count, verify, index, inspect, gen, bench and demo.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use grist_testkit::corpus;
use serde_json::Value;

use crate::support::{BENCH_KEYS, bench_json, grist, grist_on};

#[test]
fn count_matches_the_corpus() {
    for case in corpus::cases("tfrecord") {
        let what = &case.name;
        let run = grist(["count".as_ref(), case.files[0].as_os_str()]);
        if case.is_error() {
            run.assert_failed(what);
            continue;
        }
        run.assert_ok(what);
        let n: u64 = run
            .stdout
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(n, case.record_count(), "{what}");
    }
    let c = corpus::case("tfrecord", "tfr_example_basic");
    let f = c.files[0].as_os_str();
    let run = grist(["count".as_ref(), "--json".as_ref(), f, f]);
    run.assert_ok("count --json");
    let doc = &run.json_lines()[0];
    assert_eq!(doc["total"], 2 * c.record_count());
    assert_eq!(doc["files"].as_array().unwrap().len(), 2);
    let run = grist(["count".as_ref(), f, f]);
    assert!(run.stdout.lines().last().unwrap().ends_with("total"));
}

#[test]
fn verify_reports_the_first_bad_record() {
    for case in corpus::cases("tfrecord") {
        let what = &case.name;
        let run = grist(["verify".as_ref(), case.files[0].as_os_str()]);
        if !case.is_error() {
            run.assert_ok(what);
            assert!(run.stdout.starts_with("OK"), "{what}: {}", run.stdout);
            continue;
        }
        run.assert_failed(what);
        assert_eq!(run.code, Some(1));
        assert!(run.stdout.starts_with("FAILED"), "{what}: {}", run.stdout);
        assert!(run.stdout.contains("offset"), "{what}: {}", run.stdout);
        if case.compression_name() == "NONE" {
            let failing = case.expected["tfrecord"]["error"]["failing_record_index"]
                .as_u64()
                .unwrap();
            let needle = format!("record {failing}");
            assert!(run.stdout.contains(&needle), "{what}: {}", run.stdout);
            assert!(run.stderr.contains(&needle), "{what}: {}", run.stderr);
        }
    }
}

#[test]
fn index_writes_dali_index_files() {
    let c = corpus::case("tfrecord", "tfr_example_basic");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.tfrecord");
    std::fs::copy(&c.files[0], &file).unwrap();
    grist(["index".as_ref(), file.as_os_str()]).assert_ok("index");
    let text = std::fs::read_to_string(dir.path().join("data.tfrecord.idx")).unwrap();
    let mut offset = 0u64;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), c.records().len());
    for (line, (length, _)) in lines.iter().zip(c.records()) {
        let len = length as u64 + 16;
        assert_eq!(*line, format!("{offset} {len}"));
        offset += len;
    }
    let run = grist(["verify".as_ref(), file.as_os_str()]);
    run.assert_ok("verify with index");
    assert!(run.stdout.contains("index matches"), "{}", run.stdout);

    // A stale index fails verification.
    std::fs::write(dir.path().join("data.tfrecord.idx"), "0 17\n").unwrap();
    grist(["verify".as_ref(), file.as_os_str()]).assert_failed("stale index");

    // Compressed files are refused, and no index appears.
    let gz = corpus::case("tfrecord", "tfr_example_gzip");
    let gz_file = dir.path().join("data.tfrecord.gz");
    std::fs::copy(&gz.files[0], &gz_file).unwrap();
    let run = grist(["index".as_ref(), gz_file.as_os_str()]);
    run.assert_failed("index of gzip");
    assert!(run.stderr.contains("compressed"), "{}", run.stderr);
    assert!(!dir.path().join("data.tfrecord.gz.idx").exists());

    // A damaged file is not indexed either.
    let bad = corpus::case("tfrecord", "tfr_corrupt_length");
    let bad_file = dir.path().join("bad.tfrecord");
    std::fs::copy(&bad.files[0], &bad_file).unwrap();
    grist(["index".as_ref(), bad_file.as_os_str()]).assert_failed("index of a damaged file");
    assert!(!dir.path().join("bad.tfrecord.idx").exists());
}

/// Per key: (kinds, records, min values, max values), from decoded records.
type KeyStats = BTreeMap<String, (BTreeSet<String>, u64, u64, u64)>;

fn add(stats: &mut KeyStats, key: &str, feature: &Value, per_record: bool) {
    let (kind, n) = match feature.as_object().unwrap().iter().next() {
        Some((kind, values)) => (kind.clone(), values.as_array().unwrap().len() as u64),
        None => ("none".to_string(), 0),
    };
    let e = stats
        .entry(key.to_string())
        .or_insert((BTreeSet::new(), 0, u64::MAX, 0));
    e.0.insert(kind);
    if per_record {
        e.1 += 1;
    }
    e.2 = e.2.min(n);
    e.3 = e.3.max(n);
}

fn check_stats(got: &Value, want: &KeyStats, what: &str) {
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{what}: keys");
    for g in got {
        let name = g["name"].as_str().unwrap();
        let (kinds, records, lo, hi) = &want[name];
        let got_kinds: BTreeSet<String> = g["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        assert_eq!(&got_kinds, kinds, "{what}: {name} kinds");
        assert_eq!(g["records"], *records, "{what}: {name} records");
        assert_eq!(g["min_values"], *lo, "{what}: {name} min");
        assert_eq!(g["max_values"], *hi, "{what}: {name} max");
    }
}

#[test]
fn inspect_summarizes_features() {
    let c = corpus::case("tfrecord", "tfr_example_basic");
    let decoded = c.expected["decoded_records"].as_array().unwrap();
    let mut want = KeyStats::new();
    for r in decoded {
        for (k, f) in r["features"].as_object().unwrap() {
            add(&mut want, k, f, true);
        }
    }
    let run = grist([
        "inspect".as_ref(),
        "--json".as_ref(),
        c.files[0].as_os_str(),
    ]);
    run.assert_ok("inspect --json");
    let doc = &run.json_lines()[0];
    assert_eq!(doc["records"], decoded.len() as u64);
    assert_eq!(doc["complete"], true);
    check_stats(&doc["features"], &want, "inspect");

    // --records limits the records looked at.
    let run = grist([
        "inspect".as_ref(),
        "--json".as_ref(),
        "--records".as_ref(),
        "2".as_ref(),
        c.files[0].as_os_str(),
    ]);
    let doc = &run.assert_ok("inspect --records 2").json_lines()[0];
    assert_eq!(doc["records"], 2);
    assert_eq!(doc["complete"], false);

    // The table names every key.
    let run = grist(["inspect".as_ref(), c.files[0].as_os_str()]);
    run.assert_ok("inspect table");
    for key in want.keys() {
        assert!(run.stdout.contains(key.as_str()), "{key}: {}", run.stdout);
    }
}

#[test]
fn inspect_sequence_examples() {
    let c = corpus::case("tfrecord", "tfr_sequence_example");
    let decoded = c.expected["decoded_records"].as_array().unwrap();
    let mut context = KeyStats::new();
    let mut lists = KeyStats::new();
    let mut steps: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in decoded {
        for (k, f) in r["context"].as_object().unwrap() {
            add(&mut context, k, f, true);
        }
        for (k, list) in r["feature_lists"].as_object().unwrap() {
            let list = list.as_array().unwrap();
            let e = lists
                .entry(k.clone())
                .or_insert((BTreeSet::new(), 0, u64::MAX, 0));
            e.1 += 1;
            for f in list {
                add(&mut lists, k, f, false);
            }
            let s = steps.entry(k.clone()).or_insert((u64::MAX, 0));
            s.0 = s.0.min(list.len() as u64);
            s.1 = s.1.max(list.len() as u64);
        }
    }
    // Lists with no steps have no values.
    for v in lists.values_mut() {
        if v.2 == u64::MAX {
            v.2 = 0;
        }
    }
    let run = grist([
        "inspect".as_ref(),
        "--sequence".as_ref(),
        "--json".as_ref(),
        c.files[0].as_os_str(),
    ]);
    let doc = &run.assert_ok("inspect --sequence").json_lines()[0];
    check_stats(&doc["context"], &context, "context");
    check_stats(&doc["feature_lists"], &lists, "feature_lists");
    for l in doc["feature_lists"].as_array().unwrap() {
        let (lo, hi) = steps[l["name"].as_str().unwrap()];
        assert_eq!(
            (
                l["min_steps"].as_u64().unwrap(),
                l["max_steps"].as_u64().unwrap()
            ),
            (lo, hi)
        );
    }
    grist([
        "inspect".as_ref(),
        "--sequence".as_ref(),
        c.files[0].as_os_str(),
    ])
    .assert_ok("table");
}

#[test]
fn gen_then_cat_count_and_bench() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data");
    let run = grist([
        "gen".as_ref(),
        "prod19".as_ref(),
        "--records".as_ref(),
        "300".as_ref(),
        "--seed".as_ref(),
        "7".as_ref(),
        "--gzip".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    run.assert_ok("gen");
    let plain = out.join("prod19.tfrecord");
    let gz = out.join("prod19.tfrecord.gz");
    let spec = out.join("prod19.spec.json");
    assert!(plain.exists() && gz.exists() && spec.exists());
    let spec_doc: Value = serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    assert_eq!(spec_doc["features"].as_array().unwrap().len(), 19);

    for file in [&plain, &gz] {
        let run = grist(["count".as_ref(), file.as_os_str()]);
        run.assert_ok("count");
        assert!(
            run.stdout.trim_start().starts_with("300 "),
            "{}",
            run.stdout
        );
        grist(["verify".as_ref(), file.as_os_str()]).assert_ok("verify");
    }

    // Both files decode to the same batches.
    let cat = |file: &Path| {
        let run = grist([
            "cat".as_ref(),
            "--spec".as_ref(),
            spec.as_os_str(),
            "--batch-size".as_ref(),
            "128".as_ref(),
            file.as_os_str(),
        ]);
        run.assert_ok("cat prod19");
        run.stdout
    };
    let plain_out = cat(&plain);
    let records: Vec<u64> = plain_out
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["records"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(records, [128, 128, 44]);
    assert_eq!(plain_out, cat(&gz));

    // The same seed gives the same file.
    let again = dir.path().join("again");
    grist([
        "gen".as_ref(),
        "prod19".as_ref(),
        "--records".as_ref(),
        "300".as_ref(),
        "--seed".as_ref(),
        "7".as_ref(),
        "--out".as_ref(),
        again.as_os_str(),
    ])
    .assert_ok("gen again");
    assert_eq!(
        std::fs::read(&plain).unwrap(),
        std::fs::read(again.join("prod19.tfrecord")).unwrap()
    );

    // bench --json: exactly the documented keys, one pass with
    // --min-seconds 0.
    let keys: BTreeSet<&str> = BENCH_KEYS.into();
    let doc = bench_json(&spec, &plain, &["--min-seconds", "0", "--batch-size", "64"]);
    let got: BTreeSet<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(got, keys);
    assert_eq!(doc["records"], 300);
    assert_eq!(doc["batches"], 5);
    assert_eq!(doc["threads"], "autotune");
    assert_eq!(doc["batch_size"], 64);
    assert!(doc["records_per_s"].as_f64().unwrap() > 0.0);
    assert!(doc["bytes_per_s"].as_f64().unwrap() > 0.0);

    let doc = bench_json(
        &spec,
        &gz,
        &[
            "--min-seconds",
            "0",
            "--threads",
            "2",
            "--no-crc",
            "--batch-size",
            "100",
        ],
    );
    assert_eq!(
        (doc["records"].as_u64(), doc["batches"].as_u64()),
        (Some(300), Some(3))
    );
    assert_eq!(doc["threads"], 2);

    // Several passes: a whole number of files' worth of records, and of
    // the file's bytes (not the chunks the batch opening the next pass,
    // or a shuffle buffer, took from it).
    let size = std::fs::metadata(&plain).unwrap().len();
    for shuffle in ["0", "150"] {
        let doc = bench_json(
            &spec,
            &plain,
            &[
                "--min-seconds",
                "0.2",
                "--threads",
                "2",
                "--batch-size",
                "64",
                "--shuffle-buffer",
                shuffle,
            ],
        );
        let records = doc["records"].as_u64().unwrap();
        let passes = doc["passes"].as_u64().unwrap();
        assert!(passes >= 1 && records == 300 * passes, "{doc}");
        assert_eq!(doc["bytes"].as_u64(), Some(size * passes), "{doc}");
        assert!(doc["seconds"].as_f64().unwrap() >= 0.2);
    }
    // A loader per pass, mapped or read: the same whole passes.
    for mmap in [false, true] {
        let mut args = vec![
            "--min-seconds",
            "0.2",
            "--loader-per-pass",
            "--batch-size",
            "64",
        ];
        if mmap {
            args.push("--mmap");
        }
        let doc = bench_json(&spec, &plain, &args);
        let passes = doc["passes"].as_u64().unwrap();
        assert!(passes >= 2, "{doc}");
        assert_eq!(doc["records"].as_u64(), Some(300 * passes), "{doc}");
        assert_eq!(doc["batches"].as_u64(), Some(5 * passes), "{doc}");
        assert_eq!(doc["bytes"].as_u64(), Some(size * passes), "{doc}");
    }

    let run = grist([
        "bench".as_ref(),
        "--spec".as_ref(),
        spec.as_os_str(),
        "--min-seconds".as_ref(),
        "0".as_ref(),
        plain.as_os_str(),
    ]);
    run.assert_ok("bench table");
    assert!(
        run.stdout.contains("records/s") && run.stdout.contains("MB/s"),
        "{}",
        run.stdout
    );

    // An input whose name says no format is read by its content.
    let odd = dir.path().join("prod19.data");
    std::fs::copy(&plain, &odd).unwrap();
    let doc = bench_json(&spec, &odd, &["--min-seconds", "0"]);
    assert_eq!(
        (doc["format"].as_str(), doc["records"].as_u64()),
        (Some("TFRecord"), Some(300))
    );
    // One whose content says none either: the error is about that file,
    // not the spec file.
    std::fs::write(&odd, b"not records").unwrap();
    let run = grist([
        "bench".as_ref(),
        "--spec".as_ref(),
        spec.as_os_str(),
        odd.as_os_str(),
    ]);
    run.assert_failed("bench on a file of no known format");
    assert!(
        run.stderr.contains("prod19.data") && !run.stderr.contains("spec file"),
        "{}",
        run.stderr
    );
}

#[test]
fn demo_writes_reads_back_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join("demo");
    let run = grist([
        "demo".as_ref(),
        "--records".as_ref(),
        "2500".as_ref(),
        "--threads".as_ref(),
        "2".as_ref(),
        "--dir".as_ref(),
        keep.as_os_str(),
    ]);
    run.assert_ok("demo");
    // Six data sets read back: TFRecord plain and GZIP, Avro null and
    // deflate, FFRecord, OFRecord; each then loaded shuffled, in the table.
    assert_eq!(run.stdout.matches(" OK ").count(), 6, "{}", run.stdout);
    for format in ["FFRecord", "OFRecord", "threads chosen"] {
        assert!(run.stdout.contains(format), "{}", run.stdout);
    }
    assert!(run.stdout.contains("grist bench"), "{}", run.stdout);
    // The conversions: a chain through the four formats, then the Avro
    // file's own types into OFRecord, and into TFRecord (refused without
    // Lossy::Allow, then narrowed); each output checked value by value.
    assert_eq!(
        run.stdout.matches("values match").count(),
        6,
        "{}",
        run.stdout
    );
    for line in [
        "TFRecord → Avro",
        "Avro → FFRecord",
        "FFRecord → OFRecord",
        "OFRecord → TFRecord",
        "refused: feature \"s_double\"",
        "records/s",
    ] {
        assert!(run.stdout.contains(line), "{line}: {}", run.stdout);
    }
    for name in [
        "convert-1-avro/part-00000.avro",
        "convert-1-avro/spec.json",
        "convert-3-ofrecord/part-00001",
        "convert-4-tfrecord/part-00000.tfrecord.gz",
    ] {
        assert!(keep.join(name).exists(), "{name}");
    }
    for name in [
        "prod19.tfrecord",
        "prod19.tfrecord.gz",
        "prod19.avro",
        "prod19.deflate.avro",
        "prod19.spec.json",
        "prod19.avro.spec.json",
        "prod19.ffr",
        "prod19.ofrecord/part-00000",
    ] {
        assert!(keep.join(name).exists(), "{name}");
    }
    // The Avro files are the ones `gen` writes.
    let gen_dir = dir.path().join("gen");
    grist([
        "gen".as_ref(),
        "prod19".as_ref(),
        "--format".as_ref(),
        "avro".as_ref(),
        "--codec".as_ref(),
        "deflate".as_ref(),
        "--records".as_ref(),
        "2500".as_ref(),
        "--out".as_ref(),
        gen_dir.as_os_str(),
    ])
    .assert_ok("gen avro");
    assert_eq!(
        std::fs::read(keep.join("prod19.deflate.avro")).unwrap(),
        std::fs::read(gen_dir.join("prod19.deflate.avro")).unwrap()
    );

    // Without --dir nothing is left behind (the temporary folder goes).
    let run = grist(["demo", "--records", "300", "--threads", "1"]);
    run.assert_ok("demo in a temporary folder");
    assert_eq!(run.stdout.matches(" OK ").count(), 6, "{}", run.stdout);
    assert_eq!(
        run.stdout.matches("values match").count(),
        6,
        "{}",
        run.stdout
    );
}

/// `gen prod19 --format ffrecord|ofrecord`: the same records as the
/// TFRecord file, through every command.
#[test]
fn gen_ffrecord_and_ofrecord() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data");
    let gen_format_with = |format: &str, extra: &[&str], out: &Path| {
        let args = [
            "gen",
            "prod19",
            "--records",
            "300",
            "--seed",
            "7",
            "--format",
            format,
        ];
        grist_on(
            &[&args[..], extra, &["--out"]].concat(),
            &[out.to_path_buf()],
        )
    };
    let gen_format = |format: &str, out: &Path| gen_format_with(format, &[], out);
    for format in ["tfrecord", "ffrecord", "ofrecord"] {
        gen_format(format, &out).assert_ok(format);
    }
    let tf = out.join("prod19.tfrecord");
    let ffr = out.join("prod19.ffr");
    let of = out.join("prod19.ofrecord");
    let spec = out.join("prod19.spec.json");
    let parts: Vec<_> = (0..4).map(|i| of.join(format!("part-0000{i}"))).collect();
    assert!(parts.iter().all(|p| p.is_file()), "four parts");
    assert!(!of.join("part-00004").exists());

    // The same batches from all three.
    let cat = |args: &[&str], path: &Path| {
        let mut all: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
        all.push(path.into());
        let run = grist(all);
        run.assert_ok(&format!("{args:?} {}", path.display()));
        run.stdout
    };
    let spec_args = [
        "cat",
        "--spec",
        spec.to_str().unwrap(),
        "--batch-size",
        "128",
    ];
    let batches = cat(&spec_args, &tf);
    assert_eq!(batches.lines().count(), 3);
    assert_eq!(cat(&spec_args, &ffr), batches);
    assert_eq!(cat(&spec_args, &of), batches);
    // FFRecord samples are the TFRecord payloads; so are their records.
    assert_eq!(cat(&["cat", "--raw"], &ffr), cat(&["cat", "--raw"], &tf));
    assert_eq!(
        cat(&["cat", "--records"], &ffr),
        cat(&["cat", "--records"], &tf)
    );
    // An OFRecord record holds the same features, as typed lists.
    let records = cat(&["cat", "--records"], &of);
    let lines: Vec<Value> = records
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 300);
    assert_eq!(lines[0]["file"], parts[0].display().to_string());
    assert_eq!(lines[75]["index_in_part"], 0);
    assert_eq!(lines[75]["index"], 75);
    assert_eq!(
        lines[0]["features"].as_object().unwrap().len(),
        lines[0]["features"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !k.is_empty())
            .count()
    );

    // count, verify, inspect.
    let run = grist([
        "count".as_ref(),
        "--json".as_ref(),
        ffr.as_os_str(),
        of.as_os_str(),
    ]);
    run.assert_ok("count");
    let doc = &run.json_lines()[0];
    assert_eq!(doc["total"], 600);
    assert_eq!(doc["files"].as_array().unwrap().len(), 5);
    let run = grist(["verify".as_ref(), ffr.as_os_str(), of.as_os_str()]);
    run.assert_ok("verify");
    assert_eq!(run.stdout.matches("OK ").count(), 5, "{}", run.stdout);
    let run = grist(["inspect".as_ref(), "--json".as_ref(), ffr.as_os_str()]);
    run.assert_ok("inspect ffr");
    let doc = &run.json_lines()[0];
    assert_eq!(
        (doc["samples"].as_u64(), doc["legacy"].as_bool()),
        (Some(300), Some(false))
    );
    let run = grist(["inspect".as_ref(), "--json".as_ref(), of.as_os_str()]);
    run.assert_ok("inspect ofrecord");
    let doc = &run.json_lines()[0];
    assert_eq!(doc["records"], 300);
    assert_eq!(doc["parts"].as_array().unwrap().len(), 4);
    assert_eq!(doc["features"].as_array().unwrap().len(), 19 + 5);

    // The same seed gives the same bytes; a second run with --force
    // replaces the dataset's parts (without, it is refused).
    let again = dir.path().join("again");
    gen_format("ffrecord", &again).assert_ok("gen again");
    assert_eq!(
        std::fs::read(&ffr).unwrap(),
        std::fs::read(again.join("prod19.ffr")).unwrap()
    );
    let before = std::fs::read(&parts[2]).unwrap();
    gen_format("ofrecord", &out).assert_failed("gen ofrecord over itself");
    gen_format_with("ofrecord", &["--force"], &out).assert_ok("gen ofrecord over itself");
    assert_eq!(std::fs::read(&parts[2]).unwrap(), before);
    // A folder holding other files is not replaced.
    std::fs::write(of.join("notes.txt"), b"mine").unwrap();
    let run = gen_format_with("ofrecord", &["--force"], &out);
    run.assert_failed("gen over a folder with other files");
    assert!(run.stderr.contains("notes.txt"), "{}", run.stderr);
    assert!(of.join("notes.txt").exists() && parts[0].exists());

    // Options of other formats are refused.
    let run = grist([
        "gen",
        "prod19",
        "--format",
        "ffrecord",
        "--gzip",
        "--out",
        "/nonexistent/x",
    ]);
    run.assert_failed("ffrecord --gzip");

    // bench reads both (through the loader).
    for path in [&ffr, &of] {
        let doc = bench_json(&spec, path, &["--min-seconds", "0", "--batch-size", "64"]);
        assert_eq!(doc["records"], 300, "{}", path.display());
    }
}

#[test]
fn a_missing_file_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.tfrecord");
    let run = grist(["count".as_ref(), missing.as_os_str()]);
    run.assert_failed("count of a missing file");
    // One line, the path and what is wrong once each.
    let path = missing.display().to_string();
    assert_eq!(
        run.stderr.trim(),
        format!("grist: error: {path}: not found")
    );
    // A file that cannot be read: the OS error once.
    let locked = dir.path().join("locked.tfrecord");
    std::fs::create_dir(&locked).unwrap();
    let run = grist(["count".as_ref(), locked.as_os_str()]);
    run.assert_failed("count of a folder named like a file");
    assert_eq!(
        run.stderr.matches("locked.tfrecord").count(),
        1,
        "{}",
        run.stderr
    );
}
