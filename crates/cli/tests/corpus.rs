//! `grist cat` against the TFRecord cases of the golden corpus: parsed
//! batches (`--spec`), framing (`--raw`) and generic records
//! (`--records`).

use grist_testkit::corpus;
use serde_json::Value;

use crate::support::{assert_json_eq, check_parse, grist};

#[test]
fn cat_spec_matches_every_parse() {
    let dir = tempfile::tempdir().unwrap();
    let mut parses = 0;
    for case in corpus::cases("tfrecord") {
        for parse in case.parses() {
            for threads in [1, 3] {
                check_parse(&case, parse, threads, dir.path());
            }
            parses += 1;
        }
    }
    assert!(parses > 0);
}

#[test]
fn cat_raw_matches_framing() {
    for case in corpus::cases("tfrecord") {
        let what = &case.name;
        let run = grist(["cat".as_ref(), "--raw".as_ref(), case.files[0].as_os_str()]);
        let lines = run.json_lines();
        let records = case.records();
        if case.is_error() {
            run.assert_failed(what);
            assert!(run.stderr.contains("record "), "{what}: {}", run.stderr);
            let error = &case.expected["tfrecord"]["error"];
            if case.compression_name() != "NONE" {
                // Where a damaged compressed stream is noticed depends on
                // buffering: only the failure is required.
                continue;
            }
            assert_eq!(
                lines.len() as u64,
                case.record_count(),
                "{what}: good records"
            );
            let failing = error["failing_record_index"].as_u64().unwrap();
            assert!(
                run.stderr.contains(&format!("record {failing}")),
                "{what}: {} does not name record {failing}",
                run.stderr
            );
        } else {
            run.assert_ok(what);
            assert_eq!(
                lines.len() as u64,
                case.record_count(),
                "{what}: record count"
            );
        }
        for (i, (want, got)) in records.iter().zip(&lines).enumerate() {
            let mut keys: Vec<&String> = got.as_object().unwrap().keys().collect();
            keys.sort();
            assert_eq!(keys, ["index", "length", "sha256"], "{what}: keys");
            assert_eq!(got["index"], i as u64, "{what}: index");
            assert_eq!(got["length"], want.0 as u64, "{what}: record {i} length");
            assert_eq!(got["sha256"], want.1.as_str(), "{what}: record {i} sha256");
        }
    }
}

#[test]
fn cat_records_matches_decoded_records() {
    let mut checked = 0;
    for case in corpus::cases("tfrecord") {
        let Some(decoded) = case.expected["decoded_records"].as_array() else {
            continue;
        };
        let sequence = decoded.first().is_some_and(|r| r.get("context").is_some())
            || case
                .parses()
                .iter()
                .any(|p| p["api"] == "tf.io.parse_sequence_example");
        let mut args = vec!["cat".into(), "--records".into()];
        if sequence {
            args.push("--sequence".into());
        }
        args.push(case.files[0].clone().into_os_string());
        let run = grist(args);
        run.assert_ok(&case.name);
        let lines = run.json_lines();
        assert_eq!(lines.len(), decoded.len(), "{}: record count", case.name);
        for (i, (want, got)) in decoded.iter().zip(&lines).enumerate() {
            assert_json_eq(want, got, &format!("{}: record {i}", case.name));
        }
        checked += 1;
    }
    assert!(checked > 0);
}

/// Batches span file boundaries, as `TFRecordDataset(files).batch(n)`
/// does; `--raw` names the file and counts per file when given several.
#[test]
fn several_files() {
    let case = corpus::case("tfrecord", "tfr_example_basic");
    let parse = case
        .parses()
        .iter()
        .find(|p| p["outcome"] == "ok")
        .expect("an ok parse");
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.json");
    std::fs::write(&spec, serde_json::to_string(parse).unwrap()).unwrap();
    let file = case.files[0].as_os_str();
    let n = case.record_count() as usize;
    let batch = n - 3; // so that a batch spans the two files
    let run = grist([
        "cat".as_ref(),
        "--spec".as_ref(),
        spec.as_os_str(),
        "--batch-size".as_ref(),
        batch.to_string().as_ref(),
        file,
        file,
    ]);
    run.assert_ok("two files");
    let lines = run.json_lines();
    let sizes: Vec<u64> = lines
        .iter()
        .map(|b| b["records"].as_u64().unwrap())
        .collect();
    let mut want = vec![batch as u64; 2 * n / batch];
    if !(2 * n).is_multiple_of(batch) {
        want.push(((2 * n) % batch) as u64);
    }
    assert_eq!(sizes, want);
    // Every dense output, concatenated over the batches, is the expected
    // one twice.
    let expected = parse["batches"].as_array().unwrap();
    for (name, tensor) in expected[0]["outputs"].as_object().unwrap() {
        if tensor["kind"] != "dense" {
            continue;
        }
        let concat = |batches: &[Value]| -> Vec<Value> {
            batches
                .iter()
                .flat_map(|b| b["outputs"][name]["values"].as_array().unwrap().clone())
                .collect()
        };
        let once = concat(expected);
        let twice: Vec<Value> = once.iter().chain(&once).cloned().collect();
        assert_json_eq(&Value::Array(twice), &Value::Array(concat(&lines)), name);
    }

    // --drop-remainder drops the final partial batch.
    let run = grist([
        "cat".as_ref(),
        "--spec".as_ref(),
        spec.as_os_str(),
        "--batch-size".as_ref(),
        batch.to_string().as_ref(),
        "--drop-remainder".as_ref(),
        file,
        file,
    ]);
    run.assert_ok("drop remainder");
    assert_eq!(run.json_lines().len(), 2 * n / batch);

    let run = grist(["cat".as_ref(), "--raw".as_ref(), file, file]);
    run.assert_ok("raw, two files");
    let lines = run.json_lines();
    assert_eq!(lines.len(), 2 * n);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["index"], (i % n) as u64);
        assert_eq!(line["file"], case.files[0].display().to_string());
    }
}

#[test]
fn usage_and_missing_files_fail_cleanly() {
    let run = grist(["cat", "/nonexistent/x.tfrecord"]);
    assert_eq!(run.code, Some(2), "no mode: usage error");
    let run = grist(["cat", "--raw", "/nonexistent/x.tfrecord"]);
    run.assert_failed("missing file");
    assert!(run.stderr.contains("/nonexistent/x.tfrecord"));
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bad.json");
    std::fs::write(
        &spec,
        "{\"features\": [{\"name\": \"x\", \"kind\": \"blob\"}]}",
    )
    .unwrap();
    let run = grist([
        "cat".as_ref(),
        "--spec".as_ref(),
        spec.as_os_str(),
        "/dev/null".as_ref(),
    ]);
    run.assert_failed("bad spec");
    assert!(run.stderr.contains("bad.json"), "{}", run.stderr);
    // A spec the format's decoder refuses is the spec file's fault too.
    let spec = dir.path().join("float64.json");
    std::fs::write(
        &spec,
        r#"{"features": [{"name": "x", "kind": "dense", "dtype": "float64", "shape": []}]}"#,
    )
    .unwrap();
    let file = corpus::case("tfrecord", "tfr_example_basic").files[0].clone();
    let run = grist([
        "cat".as_ref(),
        "--spec".as_ref(),
        spec.as_os_str(),
        file.as_os_str(),
    ]);
    run.assert_failed("a spec tf.Example cannot provide");
    assert!(
        run.stderr.contains("spec file") && run.stderr.contains("float64.json"),
        "{}",
        run.stderr
    );
}

/// Every command fails cleanly (one line, no panic) or succeeds on cut
/// files: prefixes of a plain and of a GZIP file.
#[test]
fn truncated_files_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "tfr_example_basic",
        "tfr_example_gzip",
        "tfr_sequence_example",
    ] {
        let case = corpus::case("tfrecord", name);
        let parse = &case.parses()[0];
        let spec = dir.path().join(format!("{name}.json"));
        std::fs::write(&spec, serde_json::to_string(parse).unwrap()).unwrap();
        let sequence = parse["api"] == "tf.io.parse_sequence_example";
        let data = std::fs::read(&case.files[0]).unwrap();
        let file_name = case.files[0].file_name().unwrap().to_owned();
        let cut = dir.path().join(file_name);
        let step = (data.len() / 16).max(1);
        let lengths = (0..data.len())
            .step_by(step)
            .chain([data.len() - 1, data.len()]);
        for len in lengths {
            std::fs::write(&cut, &data[..len]).unwrap();
            let f = cut.as_os_str();
            let mut runs = vec![
                (
                    "cat --spec",
                    grist([
                        "cat".as_ref(),
                        "--spec".as_ref(),
                        spec.as_os_str(),
                        "--threads".as_ref(),
                        "2".as_ref(),
                        f,
                    ]),
                ),
                ("cat --raw", grist(["cat".as_ref(), "--raw".as_ref(), f])),
                ("count", grist(["count".as_ref(), f])),
                ("verify", grist(["verify".as_ref(), f])),
            ];
            if sequence {
                runs.push((
                    "cat --records",
                    grist([
                        "cat".as_ref(),
                        "--records".as_ref(),
                        "--sequence".as_ref(),
                        f,
                    ]),
                ));
                runs.push((
                    "inspect",
                    grist(["inspect".as_ref(), "--sequence".as_ref(), f]),
                ));
            } else {
                runs.push((
                    "cat --records",
                    grist(["cat".as_ref(), "--records".as_ref(), f]),
                ));
                runs.push(("inspect", grist(["inspect".as_ref(), f])));
            }
            for (what, run) in runs {
                let what = format!("{name} cut at {len}: {what}");
                if run.ok {
                    assert!(run.stderr.is_empty(), "{what}: {}", run.stderr);
                } else {
                    run.assert_failed(&what);
                }
            }
        }
    }
}
