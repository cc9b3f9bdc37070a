//! The FFRecord cases of the golden corpus (`ffrecord/*.expected.json`)
//! through `grist cat` (`--raw`, and `--spec` with raw payloads), `count`,
//! `verify` and `inspect`; `gen`/`demo` files in `commands.rs`.

use std::path::PathBuf;

use grist_tensor::json::bytes_from_json;
use grist_testkit::corpus::{self, FolderCase, sha256_hex};
use serde_json::{Value, json};

use crate::support::{Run, grist_on, kind_words, write_spec};

/// How many samples read before the error, if the case has one.
fn good_before_error(case: &FolderCase) -> Option<usize> {
    let error = &case.expected["error"];
    if error.is_null() {
        return None;
    }
    Some(match error["at"].as_str().unwrap() {
        "open" => 0,
        _ => error["sample"].as_u64().unwrap() as usize,
    })
}

/// Checks a failed run against the case's error: one clean line naming
/// the file, the sample (for read errors) and what was wrong; `lines`
/// good lines before it.
fn check_error(case: &FolderCase, run: &Run, lines: usize, what: &str) {
    run.assert_failed(what);
    let error = &case.expected["error"];
    let at = error["at"].as_str().unwrap();
    if at == "open_or_read" {
        // A hardened reader fails at open, a lazy one no later than the
        // sample: either way no line for it or after it.
        let sample = error["sample"].as_u64().unwrap() as usize;
        assert!(lines <= sample, "{what}: {lines} lines");
    } else {
        assert_eq!(Some(lines), good_before_error(case), "{what}: good lines");
    }
    let file = case.path(&error["file"]).display().to_string();
    assert!(run.stderr.contains(&file), "{what}: {}", run.stderr);
    let words = kind_words(error["kind"].as_str().unwrap());
    assert!(run.stderr.contains(words), "{what}: {}", run.stderr);
    if at == "read" {
        let sample = error["sample"].as_u64().unwrap() as usize;
        let local = case.samples()[sample]["local_index"].as_u64().unwrap();
        // The shared Location calls a sample within its file a record.
        let needle = format!("record {local}");
        assert!(run.stderr.contains(&needle), "{what}: {}", run.stderr);
    }
}

#[test]
fn cat_raw_matches_every_case() {
    for case in corpus::folder_cases("ffrecord") {
        let what = format!("{}: cat --raw", case.name);
        let run = grist_on(&["cat", "--raw"], &[case.input()]);
        let lines = run.json_lines();
        match good_before_error(&case) {
            Some(_) => check_error(&case, &run, lines.len(), &what),
            None => {
                run.assert_ok(&what);
                assert_eq!(lines.len() as u64, case.expected["n"].as_u64().unwrap());
            }
        }
        let several = case.expected["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["part_of_dataset"] != false)
            .count()
            > 1;
        for (want, got) in case.samples().iter().zip(&lines) {
            let i = &want["index"];
            assert_eq!(&got["index"], i, "{what}: index");
            assert_eq!(got["length"], want["len"], "{what}: sample {i} length");
            assert_eq!(got["sha256"], want["sha256"], "{what}: sample {i} sha256");
            let keys = got.as_object().unwrap().len();
            if several {
                // Global numbers, and where each sample is.
                assert_eq!(keys, 5, "{what}: {got}");
                assert_eq!(got["local_index"], want["local_index"], "{what}: {got}");
                let file = case.path(&want["file"]).display().to_string();
                assert_eq!(got["file"], json!(file), "{what}");
            } else {
                assert_eq!(keys, 3, "{what}: {got}");
            }
        }
    }
}

/// A spec file in `dir` of one string feature, `sample`: each raw sample
/// whole.
pub(crate) fn raw_spec(dir: &std::path::Path) -> PathBuf {
    let feature = json!({"name": "sample", "kind": "dense", "dtype": "string", "shape": []});
    write_spec(dir, "raw.json", &json!({ "features": [feature] }))
}

/// `--payload raw` with one string feature: each sample's bytes as a
/// batch, one sample per batch and several per batch on two threads.
#[test]
fn cat_spec_raw_payloads_match_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let spec = raw_spec(dir.path());
    let spec = spec.to_str().unwrap();
    for case in corpus::folder_cases("ffrecord") {
        for (batch, threads) in [("1", "1"), ("3", "2")] {
            let what = format!("{}: cat --spec, batch {batch}", case.name);
            let run = grist_on(
                &[
                    "cat",
                    "--spec",
                    spec,
                    "--payload",
                    "raw",
                    "--batch-size",
                    batch,
                    "--threads",
                    threads,
                ],
                &[case.input()],
            );
            let values: Vec<Vec<u8>> = run
                .json_lines()
                .iter()
                .flat_map(|b| b["outputs"]["sample"]["values"].as_array().unwrap().clone())
                .map(|v| bytes_from_json(&v).unwrap())
                .collect();
            match good_before_error(&case) {
                Some(good) => {
                    if batch == "1" {
                        check_error(&case, &run, values.len(), &what);
                    } else {
                        // Whole batches before the failing one.
                        run.assert_failed(&what);
                        assert!(values.len() <= good / 3 * 3, "{what}");
                        if case.expected["error"]["at"] != "open_or_read" {
                            assert_eq!(values.len(), good / 3 * 3, "{what}");
                        }
                    }
                }
                None => {
                    run.assert_ok(&what);
                    assert_eq!(values.len() as u64, case.expected["n"].as_u64().unwrap());
                }
            }
            for (want, got) in case.samples().iter().zip(&values) {
                assert_eq!(json!(sha256_hex(got)), want["sha256"], "{what}: {want}");
            }
        }
    }
}

#[test]
fn count_verify_and_inspect_every_case() {
    for case in corpus::folder_cases("ffrecord") {
        let name = &case.name;
        let n = case.expected["n"].as_u64().unwrap();
        let error_at = case.expected["error"]["at"].as_str();
        let files: Vec<&Value> = case.expected["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["part_of_dataset"] != false)
            .collect();

        // count: the headers' sample counts.
        let run = grist_on(&["count", "--json"], &[case.input()]);
        if error_at == Some("open") {
            check_error(&case, &run, 0, &format!("{name}: count"));
        } else {
            run.assert_ok(&format!("{name}: count"));
            let doc = &run.json_lines()[0];
            assert_eq!(doc["total"], n, "{name}: count");
            assert_eq!(doc["files"].as_array().unwrap().len(), files.len());
        }

        // verify: every header and sample CRC.
        let run = grist_on(&["verify"], &[case.input()]);
        if error_at.is_some() {
            let what = format!("{name}: verify");
            run.assert_failed(&what);
            assert_eq!(run.code, Some(1));
            assert!(run.stdout.contains("FAILED"), "{what}: {}", run.stdout);
            let error = &case.expected["error"];
            let words = kind_words(error["kind"].as_str().unwrap());
            assert!(run.stdout.contains(words), "{what}: {}", run.stdout);
            if let Some(s) = error["sample"].as_u64() {
                let local = case.samples()[s as usize]["local_index"].as_u64().unwrap();
                let needle = format!("sample {local} at offset");
                assert!(run.stdout.contains(&needle), "{what}: {}", run.stdout);
            }
        } else {
            run.assert_ok(&format!("{name}: verify"));
            assert_eq!(run.stdout.lines().count(), files.len());
            assert!(run.stdout.lines().all(|l| l.starts_with("OK")));
        }

        // inspect: counts, legacy flags and sizes from the headers.
        let run = grist_on(&["inspect", "--json"], &[case.input()]);
        if error_at == Some("open") {
            check_error(&case, &run, 0, &format!("{name}: inspect"));
            continue;
        }
        run.assert_ok(&format!("{name}: inspect"));
        let doc = &run.json_lines()[0];
        assert_eq!(doc["format"], "ffrecord");
        assert_eq!(doc["samples"], n, "{name}");
        let got = doc["files"].as_array().unwrap();
        assert_eq!(got.len(), files.len(), "{name}");
        let mut any_legacy = false;
        for (want, got) in files.iter().zip(got) {
            let legacy = want["stored_meta_checksum"] == "0x00000000";
            any_legacy |= legacy;
            assert_eq!(got["legacy"], legacy, "{name}: {got}");
            assert_eq!(got["samples"], want["n"], "{name}: {got}");
            assert_eq!(got["file_bytes"], want["file_size"], "{name}: {got}");
            assert_eq!(
                got["stored_meta_checksum"], want["stored_meta_checksum"],
                "{name}"
            );
            if let Some(header) = want.get("header_len") {
                assert_eq!(&got["header_bytes"], header, "{name}");
            }
        }
        assert_eq!(doc["legacy"], any_legacy, "{name}");
        // The sample sizes the manifest lists (as the header states them).
        let lens: Vec<u64> = case
            .samples()
            .iter()
            .map(|s| s["len"].as_u64().unwrap())
            .collect();
        if case.expected["valid"] == true && !lens.is_empty() {
            assert_eq!(
                doc["min_sample_bytes"],
                *lens.iter().min().unwrap(),
                "{name}"
            );
            assert_eq!(
                doc["max_sample_bytes"],
                *lens.iter().max().unwrap(),
                "{name}"
            );
            assert_eq!(doc["data_bytes"], lens.iter().sum::<u64>(), "{name}");
        }
    }
}

/// Every command fails cleanly (one line, no panic) or succeeds on every
/// prefix of every good file.
#[test]
fn cut_files_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let spec = raw_spec(dir.path());
    let spec = spec.to_str().unwrap();
    for case in corpus::folder_cases("ffrecord") {
        if case.expected["valid"] != true || case.expected["input_kind"] != "file" {
            continue;
        }
        let data = std::fs::read(case.input()).unwrap();
        let cut = dir.path().join(format!("{}.ffr", case.name));
        let step = (data.len() / 40).max(1);
        let lengths = (0..data.len())
            .step_by(step)
            .chain(data.len().saturating_sub(3)..data.len());
        for len in lengths {
            std::fs::write(&cut, &data[..len]).unwrap();
            let file = std::slice::from_ref(&cut);
            let runs = [
                ("cat --raw", grist_on(&["cat", "--raw"], file)),
                (
                    "cat --spec",
                    grist_on(&["cat", "--spec", spec, "--payload", "raw"], file),
                ),
                ("count", grist_on(&["count"], file)),
                ("verify", grist_on(&["verify"], file)),
                ("inspect", grist_on(&["inspect"], file)),
            ];
            for (what, run) in runs {
                run.assert_clean(&format!("{} cut at {len}: {what}", case.name));
            }
        }
    }
}
