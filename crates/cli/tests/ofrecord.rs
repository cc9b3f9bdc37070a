//! The OFRecord cases of the golden corpus (`ofrecord/*.expected.json`)
//! through `grist cat` (`--raw`, `--records`, and `--spec` with a varlen
//! feature per list the records hold), `count`, `verify` and `inspect`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use grist_tensor::json::{bytes_from_json, float_from_json};
use grist_testkit::corpus::{self, FolderCase, sha256_hex};
use serde_json::{Value, json};

use crate::support::{Run, assert_json_eq, grist_on, kind_words, write_spec};

/// The dataset as the commands are given it: its folder, or (for parts
/// not named `part-<n>`) its part files with `--format ofrecord`.
fn input(case: &FolderCase) -> (Vec<&'static str>, Vec<PathBuf>) {
    if case.expected["reader_options"]["part_name_prefix"] == "part-" {
        (Vec::new(), vec![case.path(&case.expected["dataset_dir"])])
    } else {
        (vec!["--format", "ofrecord"], part_files(case))
    }
}

fn part_files(case: &FolderCase) -> Vec<PathBuf> {
    case.parts().iter().map(|p| case.path(&p["file"])).collect()
}

/// Runs `grist ARGS... [--format ofrecord] INPUT`.
fn run_on(case: &FolderCase, args: &[&str]) -> Run {
    let (extra, paths) = input(case);
    let mut all = args.to_vec();
    all.extend(extra);
    grist_on(&all, &paths)
}

/// Checks a failed run against the case's error: one clean line naming
/// the part file, the record's number in it and what was wrong; `lines`
/// good lines before it.
fn check_error(case: &FolderCase, run: &Run, lines: usize, what: &str) {
    run.assert_failed(what);
    let error = &case.expected["error"];
    let before = case.expected["records_readable_before_error"]
        .as_u64()
        .unwrap();
    assert_eq!(lines as u64, before, "{what}: good lines");
    let file = case.path(&error["file"]);
    assert!(
        run.stderr.contains(&file.display().to_string()),
        "{what}: {}",
        run.stderr
    );
    // The record's number within its part.
    let mut first = 0;
    for p in case.parts() {
        if case.path(&p["file"]) == file {
            break;
        }
        first += p["record_count"].as_u64().unwrap();
    }
    let local = error["record"].as_u64().unwrap() - first;
    let needle = format!("record {local}");
    assert!(run.stderr.contains(&needle), "{what}: {}", run.stderr);
    let words = kind_words(error["kind"].as_str().unwrap());
    assert!(run.stderr.contains(words), "{what}: {}", run.stderr);
}

/// Checks a run that reads and parses every record: the case's error
/// after the good records, or (lenient cases) any clean failure, or one
/// line per record.
fn check_outcome(case: &FolderCase, run: &Run, lines: usize, what: &str) {
    if case.error_at().is_some() {
        check_error(case, run, lines, what);
    } else if case.lenient() && !run.ok {
        run.assert_failed(what);
    } else {
        run.assert_ok(what);
        assert_eq!(lines, case.records().len(), "{what}");
    }
}

#[test]
fn cat_raw_matches_every_case() {
    for case in corpus::folder_cases("ofrecord") {
        let what = format!("{}: cat --raw", case.name);
        let run = run_on(&case, &["cat", "--raw"]);
        let lines = run.json_lines();
        match case.error_at() {
            Some("frame") => check_error(&case, &run, lines.len(), &what),
            _ => {
                // Records that do not parse are framed fine.
                run.assert_ok(&what);
                assert_eq!(lines.len(), case.records().len(), "{what}");
            }
        }
        let several = case.parts().len() > 1;
        for (want, got) in case.records().into_iter().zip(&lines) {
            let i = &want["global_index"];
            assert_eq!(&got["index"], i, "{what}");
            assert_eq!(got["length"], want["len"], "{what}: record {i}");
            assert_eq!(got["sha256"], want["sha256"], "{what}: record {i}");
            if several {
                assert_eq!(got["index_in_part"], want["index_in_part"], "{what}");
                assert!(
                    got["file"].as_str().unwrap().ends_with(
                        case.parts()
                            .iter()
                            .find(|p| p["records"].as_array().unwrap().contains(want))
                            .unwrap()["file"]
                            .as_str()
                            .unwrap()
                    )
                );
            } else {
                assert_eq!(got.as_object().unwrap().len(), 3, "{what}: {got}");
            }
        }
    }
}

#[test]
fn cat_records_matches_every_case() {
    for case in corpus::folder_cases("ofrecord") {
        let what = format!("{}: cat --records", case.name);
        let run = run_on(&case, &["cat", "--records"]);
        let lines = run.json_lines();
        check_outcome(&case, &run, lines.len(), &what);
        for (want, got) in case.records().into_iter().zip(&lines) {
            let i = &want["global_index"];
            for key in ["features", "features_raw"] {
                if let Some(w) = want.get(key) {
                    assert_json_eq(w, &got[key], &format!("{what}: record {i}"));
                }
            }
            if case.parts().len() > 1 {
                assert_eq!(&got["index"], i, "{what}");
                assert_eq!(got["index_in_part"], want["index_in_part"], "{what}");
            }
        }
    }
}

/// The spec dtype of a manifest list kind.
fn dtype_of(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "bytes_list" => "string",
        "float_list" => "float32",
        "double_list" => "float64",
        "int32_list" => "int32",
        "int64_list" => "int64",
        _ => return None,
    })
}

/// A varlen feature for every name that holds one list kind in every
/// record that has it, plus one no record has (it decodes to empty rows).
pub(crate) fn varlen_spec(case: &FolderCase) -> BTreeMap<String, String> {
    let mut kinds: BTreeMap<String, Option<String>> = BTreeMap::new();
    for r in case.records() {
        let Some(features) = r["features"].as_object() else {
            continue;
        };
        for (name, f) in features {
            let kind = f["kind"].as_str().unwrap().to_string();
            let entry = kinds.entry(name.clone()).or_insert(Some(kind.clone()));
            if entry.as_deref() != Some(kind.as_str()) {
                *entry = None;
            }
        }
    }
    let mut spec: BTreeMap<String, String> = kinds
        .into_iter()
        .filter_map(|(name, kind)| Some((name, dtype_of(&kind?)?.to_string())))
        .collect();
    spec.insert("absent from every record".into(), "int64".into());
    spec
}

/// Checks the values grist decoded for one feature of one record against
/// the manifest's (`None`: the record does not have it).
fn check_values(want: Option<&Value>, got: &[Value], what: &str) {
    let Some(want) = want else {
        assert!(got.is_empty(), "{what}: {got:?}");
        return;
    };
    let values = want["values"].as_array().unwrap();
    assert_eq!(got.len(), values.len(), "{what}: value count");
    for (k, (w, g)) in values.iter().zip(got).enumerate() {
        let what = format!("{what}: value {k}");
        match want["kind"].as_str().unwrap() {
            "float_list" | "double_list" => {
                let bits = want["bits"][k].as_str().unwrap();
                let bits = u64::from_str_radix(bits.trim_start_matches("0x"), 16).unwrap();
                let g = float_from_json(g).unwrap();
                let got_bits = if want["kind"] == "float_list" {
                    u64::from((g as f32).to_bits())
                } else {
                    g.to_bits()
                };
                assert_eq!(got_bits, bits, "{what}");
            }
            "bytes_list" => {
                let g = bytes_from_json(g).unwrap();
                match w {
                    Value::String(b64) => {
                        let w = bytes_from_json(&json!({ "base64": b64 })).unwrap();
                        assert_eq!(g, w, "{what}");
                    }
                    summary => {
                        assert_eq!(json!(g.len()), summary["len"], "{what}");
                        assert_eq!(json!(sha256_hex(&g)), summary["sha256"], "{what}");
                    }
                }
            }
            _ => assert_eq!(g.as_i64(), w.as_i64(), "{what}"),
        }
    }
}

/// `cat --spec` with a varlen feature per list: one record per batch
/// against the manifest, and the same values in batches of 4 on two
/// threads.
#[test]
fn cat_spec_matches_every_case() {
    let dir = tempfile::tempdir().unwrap();
    for case in corpus::folder_cases("ofrecord") {
        let spec = varlen_spec(&case);
        let features: Vec<Value> = spec
            .iter()
            .map(|(name, dtype)| json!({"name": name, "kind": "varlen", "dtype": dtype, "shape": [-1]}))
            .collect();
        let path = write_spec(
            dir.path(),
            &format!("{}.json", case.name),
            &json!({ "features": features }),
        );
        let path = path.to_str().unwrap();
        let what = format!("{}: cat --spec", case.name);
        let run = run_on(&case, &["cat", "--spec", path, "--batch-size", "1"]);
        let lines = run.json_lines();
        check_outcome(&case, &run, lines.len(), &what);
        for (want, got) in case.records().into_iter().zip(&lines) {
            let i = &want["global_index"];
            assert_eq!(got["records"], 1, "{what}");
            for name in spec.keys() {
                let out = &got["outputs"][name];
                assert_eq!(out["kind"], "sparse", "{what}: {name}");
                let values = out["values"].as_array().unwrap();
                assert_eq!(out["dense_shape"][1], values.len(), "{what}: {name}");
                let want = want["features"].get(name);
                check_values(want, values, &format!("{what}: record {i}, {name}"));
            }
        }
        if !run.ok {
            continue;
        }
        // Batches of 4 on two threads hold the same values.
        let run4 = run_on(
            &case,
            &["cat", "--spec", path, "--batch-size", "4", "--threads", "2"],
        );
        run4.assert_ok(&what);
        let batches = run4.json_lines();
        assert_eq!(
            batches.len(),
            lines.len().div_ceil(4),
            "{what}: batches of 4"
        );
        for name in spec.keys() {
            let concat = |lines: &[Value]| -> Vec<Value> {
                lines
                    .iter()
                    .flat_map(|b| b["outputs"][name]["values"].as_array().unwrap().clone())
                    .collect()
            };
            assert_json_eq(
                &Value::Array(concat(&lines)),
                &Value::Array(concat(&batches)),
                &format!("{what}: {name} in batches of 4"),
            );
        }
    }
}

/// The `records` of each entry of a list of parts.
fn part_counts(list: &Value) -> Vec<u64> {
    let list = list.as_array().unwrap();
    list.iter()
        .map(|p| p["records"].as_u64().unwrap())
        .collect()
}

/// The manifest's record count of each part.
fn want_counts(case: &FolderCase) -> Vec<u64> {
    let parts = case.parts().iter();
    parts.map(|p| p["record_count"].as_u64().unwrap()).collect()
}

#[test]
fn count_verify_and_inspect_every_case() {
    for case in corpus::folder_cases("ofrecord") {
        let name = &case.name;
        let framed = case.records().len() as u64;

        // count: length prefixes only.
        let run = run_on(&case, &["count", "--json"]);
        if case.error_at() == Some("frame") {
            let before = case.expected["records_readable_before_error"].as_u64();
            check_error(
                &case,
                &run,
                before.unwrap() as usize,
                &format!("{name}: count"),
            );
        } else {
            run.assert_ok(&format!("{name}: count"));
            let doc = &run.json_lines()[0];
            assert_eq!(doc["total"], framed, "{name}");
            assert_eq!(part_counts(&doc["files"]), want_counts(&case), "{name}");
        }

        // verify: framing and protobuf, part by part.
        let run = run_on(&case, &["verify"]);
        match case.error_at() {
            Some(_) => {
                let what = format!("{name}: verify");
                run.assert_failed(&what);
                let error = &case.expected["error"];
                let words = kind_words(error["kind"].as_str().unwrap());
                assert!(run.stdout.contains(words), "{what}: {}", run.stdout);
                let offset = format!("at offset {}", error["offset"]);
                assert!(run.stdout.contains(&offset), "{what}: {}", run.stdout);
            }
            None if case.lenient() && !run.ok => {
                run.assert_failed(name);
            }
            None => {
                run.assert_ok(&format!("{name}: verify"));
                assert_eq!(run.stdout.lines().count(), case.parts().len(), "{name}");
            }
        }

        // inspect: parts, their counts, and the features seen.
        let run = run_on(&case, &["inspect", "--json"]);
        if case.error_at().is_some() || (case.lenient() && !run.ok) {
            run.assert_failed(&format!("{name}: inspect"));
            continue;
        }
        run.assert_ok(&format!("{name}: inspect"));
        let doc = &run.json_lines()[0];
        assert_eq!(doc["format"], "ofrecord");
        assert_eq!(doc["records"], framed, "{name}");
        assert_eq!(doc["complete"], true, "{name}");
        assert_eq!(part_counts(&doc["parts"]), want_counts(&case), "{name}");
        // (kinds, records, fewest and most values) per feature name.
        let mut want: BTreeMap<String, (Vec<String>, u64, usize, usize)> = BTreeMap::new();
        for r in case.records() {
            for (f, v) in r["features"].as_object().into_iter().flatten() {
                let n = v["values"].as_array().unwrap().len();
                let e = want.entry(f.clone()).or_insert((Vec::new(), 0, n, n));
                let kind = v["kind"].as_str().unwrap().to_string();
                if !e.0.contains(&kind) {
                    e.0.push(kind);
                    e.0.sort();
                }
                e.1 += 1;
                e.2 = e.2.min(n);
                e.3 = e.3.max(n);
            }
        }
        if case
            .records()
            .iter()
            .any(|r| r.get("features_raw").is_some())
        {
            continue;
        }
        let got: BTreeMap<String, (Vec<String>, u64, usize, usize)> = doc["features"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let kinds = f["kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| k.as_str().unwrap().to_string())
                    .collect();
                (
                    f["name"].as_str().unwrap().to_string(),
                    (
                        kinds,
                        f["records"].as_u64().unwrap(),
                        f["min_values"].as_u64().unwrap() as usize,
                        f["max_values"].as_u64().unwrap() as usize,
                    ),
                )
            })
            .collect();
        assert_eq!(got, want, "{name}: features");
    }
}

/// Every command fails cleanly (one line, no panic) or succeeds on every
/// prefix of every good single-part dataset.
#[test]
fn cut_parts_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        "spec.json",
        &json!([{"name": "x", "kind": "varlen", "dtype": "float32", "shape": [-1]}]),
    );
    let spec = spec.to_str().unwrap();
    for case in corpus::folder_cases("ofrecord") {
        if case.expected["valid"] != true || case.parts().len() != 1 {
            continue;
        }
        let data = std::fs::read(&part_files(&case)[0]).unwrap();
        let folder = dir.path().join(&case.name);
        std::fs::create_dir_all(&folder).unwrap();
        let cut = folder.join("part-00000");
        let step = (data.len() / 24).max(1);
        let lengths = (0..data.len())
            .step_by(step)
            .chain(data.len().saturating_sub(3)..data.len());
        for len in lengths {
            std::fs::write(&cut, &data[..len]).unwrap();
            for path in [&folder, &cut] {
                let p = std::slice::from_ref(path);
                let runs = [
                    ("cat --raw", grist_on(&["cat", "--raw"], p)),
                    ("cat --records", grist_on(&["cat", "--records"], p)),
                    ("cat --spec", grist_on(&["cat", "--spec", spec], p)),
                    ("count", grist_on(&["count"], p)),
                    ("verify", grist_on(&["verify"], p)),
                    ("inspect", grist_on(&["inspect"], p)),
                ];
                for (what, run) in runs {
                    run.assert_clean(&format!(
                        "{} cut at {len}: {what} {}",
                        case.name,
                        path.display()
                    ));
                }
            }
        }
    }
}

/// OneFlow's name of part `i`: the prefix, then the index zero-padded to
/// the suffix length, never cut (`ofrecord_dataset.h`).
fn oneflow_part_name(prefix: &str, suffix_length: i64, i: usize) -> String {
    let num = i.to_string();
    let zeros = (suffix_length - num.len() as i64).max(0) as usize;
    format!("{prefix}{}{num}", "0".repeat(zeros))
}

/// A folder of the corpus case's parts, renamed as OneFlow names them with
/// `part_name_prefix` "train-" and the case's suffix length, beside files
/// that are not parts (a note, a part of another width or prefix), read
/// with `--part-name-prefix` / `--part-name-suffix-length`: the records of
/// the parts in numeric order, as the manifest lists them; a missing part
/// is an error naming its file.
#[test]
fn part_name_options_read_a_folder_as_oneflow_names_it() {
    for name in ["multi_part", "nopad_parts"] {
        let case = corpus::folder_case("ofrecord", name);
        let suffix = case.expected["reader_options"]["part_name_suffix_length"]
            .as_i64()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let parts = part_files(&case);
        for (i, part) in parts.iter().enumerate() {
            let to = dir.path().join(oneflow_part_name("train-", suffix, i));
            std::fs::copy(part, to).unwrap();
        }
        std::fs::write(dir.path().join("train-notes"), b"not a part").unwrap();
        std::fs::copy(&parts[0], dir.path().join("valid-0")).unwrap();
        let want: Vec<String> = case
            .parts()
            .iter()
            .flat_map(|p| p["records"].as_array().unwrap().clone())
            .map(|r| r["sha256"].as_str().unwrap().to_string())
            .collect();
        let suffix_arg = suffix.to_string();
        let options = [
            "--part-name-prefix",
            "train-",
            "--part-name-suffix-length",
            &suffix_arg,
        ];
        let folder = vec![dir.path().to_path_buf()];
        let mut args = vec!["cat", "--raw"];
        args.extend(options);
        let run = grist_on(&args, &folder);
        run.assert_clean(name);
        let got: Vec<String> = run
            .json_lines()
            .iter()
            .map(|l| l["sha256"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(got, want, "{name}");
        let mut args = vec!["count", "--json"];
        args.extend(options);
        let run = grist_on(&args, &folder);
        assert!(run.ok, "{name}: {}", run.stderr);
        let count: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(count["total"], want.len(), "{name}");
        // Part 1 missing: an error naming the file OneFlow would open.
        let missing = oneflow_part_name("train-", suffix, 1);
        std::fs::remove_file(dir.path().join(&missing)).unwrap();
        let mut args = vec!["cat", "--raw"];
        args.extend(options);
        let run = grist_on(&args, &folder);
        run.assert_failed(name);
        assert!(run.stderr.contains(&missing), "{name}: {}", run.stderr);
    }
    // Other formats refuse the options.
    let case = corpus::cases("tfrecord").remove(0);
    let run = grist_on(&["count", "--part-name-prefix", "x-"], &case.files);
    run.assert_failed("tfrecord with --part-name-prefix");
    assert!(run.stderr.contains("part_name_prefix"), "{}", run.stderr);
}
