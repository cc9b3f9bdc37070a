//! `grist spec`: the spec it prints reads the files it came from, through
//! `grist cat --spec` and `grist bench --spec`: on the corpus cases of
//! every format and on prod19 written by `grist gen`; notes on stderr,
//! the spec alone on stdout; clean errors.

use std::path::{Path, PathBuf};

use grist_testkit::corpus;
use serde_json::Value;

use crate::support::{bench_json, grist, grist_on};

/// `grist spec PATHS` written to `out`; the run's stderr (its notes).
fn spec_to(paths: &[PathBuf], extra: &[&str], out: &Path) -> String {
    let run = grist_on(&[&["spec"], extra].concat(), paths);
    run.assert_ok(&format!("spec {paths:?}"));
    // stdout is the spec alone, and it parses as one.
    let doc: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{paths:?}: {e}: {}", run.stdout));
    assert!(doc.is_object(), "{doc}");
    std::fs::write(out, &run.stdout).unwrap();
    for line in run.stderr.lines() {
        assert!(line.starts_with("grist: note: "), "{line}");
    }
    run.stderr
}

/// `grist cat --spec SPEC PATHS`: the batches.
fn cat(spec: &Path, paths: &[PathBuf]) -> Vec<Value> {
    let spec = spec.to_str().unwrap();
    let run = grist_on(&["cat", "--spec", spec, "--batch-size", "4"], paths);
    run.assert_ok(&format!("cat --spec {spec} {paths:?}"));
    run.json_lines()
}

fn records(batches: &[Value]) -> u64 {
    batches.iter().map(|b| b["records"].as_u64().unwrap()).sum()
}

/// Every good corpus file with records, of the four formats: the spec
/// reads all of its records.
#[test]
fn spec_then_cat_reads_every_corpus_case() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.json");
    let mut checked = 0;
    for case in corpus::cases("tfrecord") {
        if !case.is_ok() || case.parses().is_empty() || case.record_count() == 0 {
            continue;
        }
        if case.name == "tfr_zero_length_records" {
            // Empty Examples: nothing to infer, and said so.
            let run = grist_on(&["spec"], &case.files);
            run.assert_failed(&case.name);
            assert!(run.stderr.contains("no feature"), "{}", run.stderr);
            continue;
        }
        spec_to(&case.files, &[], &out);
        assert_eq!(
            records(&cat(&out, &case.files)),
            case.record_count(),
            "{}",
            case.name
        );
        checked += 1;
    }
    for case in corpus::cases("avro") {
        let atds = case
            .parses()
            .iter()
            .any(|p| p["api"].as_str().is_some_and(|a| a.contains("ATDS")));
        if !case.is_ok() || !atds {
            continue;
        }
        spec_to(&case.files, &[], &out);
        let n = case.avro()["record_count"].as_u64().unwrap();
        assert_eq!(records(&cat(&out, &case.files)), n, "{}", case.name);
        checked += 1;
    }
    for case in corpus::folder_cases("ofrecord") {
        let n = case.records().len() as u64;
        if !case.valid() || n == 0 {
            continue;
        }
        let folder = vec![case.dataset_dir()];
        spec_to(&folder, &[], &out);
        assert_eq!(records(&cat(&out, &folder)), n, "{}", case.name);
        checked += 1;
    }
    assert!(checked >= 20, "{checked} cases");
}

/// prod19 from `grist gen` in each format: the inferred spec reads it,
/// and its dense features hold what the generated spec reads; `bench`
/// takes it too.
#[test]
fn spec_of_generated_prod19_reads_it_like_its_own_spec() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for format in ["tfrecord", "avro", "ffrecord", "ofrecord"] {
        let args = [
            "gen",
            "prod19",
            "--records",
            "60",
            "--format",
            format,
            "--out",
        ];
        grist_on(&args, std::slice::from_ref(&data)).assert_ok(format);
    }
    let cases = [
        ("prod19.tfrecord", "prod19.spec.json"),
        ("prod19.avro", "prod19.avro.spec.json"),
        ("prod19.ffr", "prod19.spec.json"),
        ("prod19.ofrecord", "prod19.spec.json"),
    ];
    for (file, own) in cases {
        let paths = vec![data.join(file)];
        let inferred = dir.path().join(format!("{file}.inferred.json"));
        if file.ends_with(".avro") {
            // The sparse shapes come from the sample, and say so: a record
            // past a small sample may hold a larger index, and fails,
            // naming its feature.
            let notes = spec_to(&paths, &["--records", "2"], &inferred);
            assert_eq!(notes.lines().count(), 5, "{notes}");
            let spec = inferred.to_str().unwrap();
            let run = grist_on(&["cat", "--spec", spec], &paths);
            run.assert_failed("a sample too small");
            assert!(run.stderr.contains("feature \"sp_"), "{}", run.stderr);
            spec_to(&paths, &[], &inferred);
        } else {
            spec_to(&paths, &["--records", "20"], &inferred);
        }
        let mine = cat(&inferred, &paths);
        let theirs = cat(&data.join(own), &paths);
        assert_eq!(records(&mine), 60, "{file}");
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(data.join(own)).unwrap()).unwrap();
        let mut dense = 0;
        for f in doc["features"].as_array().unwrap() {
            let name = f["name"].as_str().unwrap();
            if f["kind"] != "dense" {
                continue;
            }
            for (m, t) in mine.iter().zip(&theirs) {
                let (m, t) = (&m["outputs"][name], &t["outputs"][name]);
                assert_eq!(m["values"], t["values"], "{file} {name}");
                if f["shape"].as_array().unwrap().is_empty() {
                    assert_eq!(m, t, "{file} {name}");
                }
            }
            dense += 1;
        }
        assert_eq!(dense, 14, "{file}");
        let doc = bench_json(
            &inferred,
            &paths[0],
            &["--min-seconds", "0", "--threads", "1"],
        );
        assert_eq!(doc["records"], 60, "{file}");
    }
}

/// Notes go to stderr and the spec to stdout; a sequence file gives a
/// sequence spec; `--batch-size` is written into it.
#[test]
fn notes_on_stderr_spec_on_stdout() {
    let nested = corpus::case("avro", "avro_generic_nested");
    let run = grist_on(&["spec", "--batch-size", "3"], &nested.files);
    run.assert_ok("spec nested");
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["batch_size"], 3);
    assert!(
        run.stderr
            .contains("grist: note: feature \"cars\" left out: maps"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("cars"));
    let seq = corpus::case("tfrecord", "tfr_sequence_example");
    let run = grist_on(&["spec"], &seq.files);
    run.assert_ok("spec sequence");
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(doc["context_features"].is_array() && doc["sequence_features"].is_array());
    let run = grist_on(&["spec", "--no-sequence"], &seq.files);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(doc["features"].is_array() && doc.get("sequence_features").is_none());
}

/// Files with no records, raw FFRecord samples, `--records 0`, a missing
/// file: one line on stderr naming what is wrong, no panic.
#[test]
fn bad_inputs_fail_cleanly() {
    let empty = corpus::case("tfrecord", "tfr_empty_file");
    let run = grist_on(&["spec"], &empty.files);
    run.assert_failed("empty");
    assert!(
        run.stderr.contains("tfr_empty_file") && run.stderr.contains("no records"),
        "{}",
        run.stderr
    );
    let tiny = corpus::folder_case("ffrecord", "tiny2").input();
    let run = grist_on(&["spec", "--payload", "raw"], &[tiny]);
    run.assert_failed("raw");
    assert!(run.stderr.contains("raw"), "{}", run.stderr);
    let basic = corpus::case("tfrecord", "tfr_example_basic");
    grist_on(&["spec", "--records", "0"], &basic.files).assert_failed("--records 0");
    grist(["spec", "/nonexistent/x.tfrecord"]).assert_failed("missing");
    let avro = corpus::case("avro", "avro_atds_primitives");
    grist_on(&["spec", "--sequence"], &avro.files).assert_failed("avro --sequence");
}
