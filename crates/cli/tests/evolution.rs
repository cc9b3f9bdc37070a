//! `--reader-schema`: grist-testkit's dataset of three schema versions
//! through `cat --records`, `cat --spec`, `bench` and `convert`, judged by
//! apache-avro's reader-schema resolution; a reader schema on a TFRecord
//! input fails cleanly, naming the format.

use std::path::{Path, PathBuf};

use grist_testkit::evolution::{
    READER_SCHEMA, RECORDS, reader_fields, reference_records, write_dataset,
};
use serde_json::{Value, json};

use crate::support::{bench_json, grist_on, write_spec};

/// The spec of the reader schema's fields (a null `maybe` as -1).
fn spec() -> Value {
    json!({"features": [
        {"name": "id", "kind": "dense", "dtype": "int64", "shape": []},
        {"name": "score", "kind": "dense", "dtype": "float64", "shape": []},
        {"name": "kind", "kind": "dense", "dtype": "string", "shape": []},
        {"name": "name", "kind": "dense", "dtype": "string", "shape": []},
        {"name": "tags", "kind": "varlen", "dtype": "int64", "shape": [-1]},
        {"name": "weight", "kind": "dense", "dtype": "float32", "shape": []},
        {"name": "maybe", "kind": "dense", "dtype": "float64", "shape": [], "default": -1.0}
    ]})
}

struct Dataset {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    files: Vec<PathBuf>,
    avsc: PathBuf,
    spec: PathBuf,
}

fn dataset() -> Dataset {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let files = write_dataset(&dir);
    let avsc = dir.join("reader.avsc");
    std::fs::write(&avsc, READER_SCHEMA).unwrap();
    let spec = write_spec(&dir, "spec.json", &spec());
    Dataset {
        _dir: tmp,
        dir,
        files,
        avsc,
        spec,
    }
}

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The `id` values of the conversion in `out`, read back with the spec
/// written beside it (one batch of all the records).
fn converted_ids(out: &Path) -> Value {
    let n = (3 * RECORDS).to_string();
    let run = grist_on(
        &[
            "cat",
            "--spec",
            arg(&out.join("spec.json")),
            "--batch-size",
            &n,
        ],
        &[out.to_path_buf()],
    );
    run.assert_ok("cat the converted files");
    run.json_lines()[0]["outputs"]["id"]["values"].clone()
}

fn expected(files: &[PathBuf]) -> Vec<Value> {
    files.iter().flat_map(|f| reference_records(f)).collect()
}

#[test]
fn cat_records_decodes_through_the_reader_schema() {
    let d = dataset();
    let run = grist_on(
        &["cat", "--records", "--reader-schema", arg(&d.avsc)],
        &d.files,
    );
    run.assert_ok("cat --records --reader-schema");
    let mut lines = run.json_lines();
    // Several files: each line also says where the record is.
    for line in &mut lines {
        let m = line.as_object_mut().unwrap();
        assert!(m.remove("file").is_some() && m.remove("index").is_some());
    }
    let expected = expected(&d.files);
    assert_eq!(lines.len(), 3 * RECORDS);
    for (i, (got, want)) in lines.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "record {i}");
    }
    // Without it, each file by its own writer schema.
    let run = grist_on(&["cat", "--records"], &d.files[..1]);
    run.assert_ok("cat --records");
    assert!(run.json_lines()[0].get("legacy").is_some());
}

#[test]
fn cat_spec_loads_the_versions_through_the_reader_schema() {
    let d = dataset();
    let batch = |args: &[&str]| {
        let run = grist_on(args, &d.files);
        run.assert_ok("cat --spec");
        let lines = run.json_lines();
        assert_eq!(lines.len(), 1);
        lines[0].clone()
    };
    let n = (3 * RECORDS).to_string();
    let got = batch(&[
        "cat",
        "--spec",
        arg(&d.spec),
        "--reader-schema",
        arg(&d.avsc),
        "--batch-size",
        &n,
    ]);
    let expected = expected(&d.files);
    let outputs = &got["outputs"];
    for name in ["id", "score", "kind", "name", "weight"] {
        let want: Vec<&Value> = expected.iter().map(|r| &r[name]).collect();
        assert_eq!(
            outputs[name]["values"]
                .as_array()
                .unwrap()
                .iter()
                .collect::<Vec<_>>(),
            want,
            "{name}"
        );
    }
    let maybe: Vec<Value> = expected
        .iter()
        .map(|r| {
            if r["maybe"].is_null() {
                json!(-1.0)
            } else {
                r["maybe"].clone()
            }
        })
        .collect();
    assert_eq!(outputs["maybe"]["values"], json!(maybe));
    let tags: Vec<&Value> = expected
        .iter()
        .flat_map(|r| r["tags"].as_array().unwrap())
        .collect();
    assert_eq!(
        outputs["tags"]["values"]
            .as_array()
            .unwrap()
            .iter()
            .collect::<Vec<_>>(),
        tags
    );
    // The same through the spec file's "reader_schema" (a string of JSON).
    let mut with_schema = spec();
    with_schema["reader_schema"] = json!(READER_SCHEMA);
    let spec2 = write_spec(&d.dir, "spec2.json", &with_schema);
    assert_eq!(
        batch(&["cat", "--spec", arg(&spec2), "--batch-size", &n]),
        got
    );
    // A writer schema the reader schema does not resolve: the file and
    // the field.
    let mut bad: Value = serde_json::from_str(READER_SCHEMA).unwrap();
    bad["fields"][2]["type"] = json!("string");
    let bad_avsc = d.dir.join("bad.avsc");
    std::fs::write(&bad_avsc, bad.to_string()).unwrap();
    let run = grist_on(
        &[
            "cat",
            "--spec",
            arg(&d.spec),
            "--reader-schema",
            arg(&bad_avsc),
        ],
        &d.files,
    );
    run.assert_failed("a reader schema that does not resolve");
    assert!(
        run.stderr.contains("v1.avro") && run.stderr.contains("kind"),
        "{}",
        run.stderr
    );
    // One that is no Avro schema: the file.
    let invalid = d.dir.join("invalid.avsc");
    std::fs::write(
        &invalid,
        r#"{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]}"#,
    )
    .unwrap();
    for mode in ["--records", "--spec"] {
        let mut args = vec!["cat", mode];
        if mode == "--spec" {
            args.push(arg(&d.spec));
        }
        args.extend(["--reader-schema", arg(&invalid)]);
        let run = grist_on(&args, &d.files);
        run.assert_failed("an invalid reader schema");
        assert!(
            run.stderr.contains("reader schema") && run.stderr.contains("invalid.avsc"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn bench_and_convert_take_the_reader_schema() {
    let d = dataset();
    let report = bench_json(
        &d.spec,
        &d.files[2],
        &["--reader-schema", arg(&d.avsc), "--min-seconds", "0"],
    );
    assert_eq!(report["records"], json!(RECORDS));
    let out = d.dir.join("out");
    let run = grist_on(
        &[
            "convert",
            "--to",
            "tfrecord",
            "--lossy",
            "--spec",
            arg(&d.spec),
            "--reader-schema",
            arg(&d.avsc),
            "-o",
            arg(&out),
        ],
        &d.files,
    );
    run.assert_ok("convert --reader-schema");
    // The outputs are read without it, as the written spec says.
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("spec.json")).unwrap()).unwrap();
    assert!(written.get("reader_schema").is_none(), "{written}");
    let want: Vec<Value> = expected(&d.files).iter().map(|r| r["id"].clone()).collect();
    assert_eq!(converted_ids(&out), json!(want));
    // A reader schema on TFRecord files: refused, naming the format.
    for args in [
        vec!["cat", "--records", "--reader-schema", arg(&d.avsc)],
        vec![
            "cat",
            "--spec",
            arg(&d.spec),
            "--reader-schema",
            arg(&d.avsc),
        ],
    ] {
        let run = grist_on(&args, std::slice::from_ref(&out));
        run.assert_failed("--reader-schema on TFRecord files");
        assert!(
            run.stderr.contains("TFRecord") && run.stderr.contains("reader schema"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn spec_and_convert_infer_from_the_reader_schema() {
    let d = dataset();
    let inferred = |extra: &[&str]| {
        let mut args = vec!["spec", "--reader-schema", arg(&d.avsc)];
        args.extend(extra);
        grist_on(&args, &d.files)
    };
    let run = inferred(&[]);
    run.assert_ok("spec --reader-schema");
    let got: Value = serde_json::from_str(&run.stdout).unwrap();
    // The reader's fields, in its order, with its types; the spec
    // carries the schema, so that it reads the files alone.
    let reader: Value = serde_json::from_str(READER_SCHEMA).unwrap();
    assert_eq!(got["reader_schema"], reader);
    let names: Vec<&str> = got["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, reader_fields());
    let hand = spec();
    for (f, want) in got["features"]
        .as_array()
        .unwrap()
        .iter()
        .zip(hand["features"].as_array().unwrap())
    {
        assert_eq!(
            (&f["kind"], &f["dtype"]),
            (&want["kind"], &want["dtype"]),
            "{f}"
        );
    }
    // It loads the three versions as the hand-written spec does (a null
    // `maybe` reads as the inferred default, 0).
    let spec_path = write_spec(&d.dir, "inferred.json", &got);
    let n = (3 * RECORDS).to_string();
    let run = grist_on(
        &["cat", "--spec", arg(&spec_path), "--batch-size", &n],
        &d.files,
    );
    run.assert_ok("cat --spec inferred.json");
    let outputs = &run.json_lines()[0]["outputs"];
    let expected = expected(&d.files);
    for name in ["id", "score", "kind", "name", "weight"] {
        let want: Vec<&Value> = expected.iter().map(|r| &r[name]).collect();
        assert_eq!(outputs[name]["values"], json!(want), "{name}");
    }
    let maybe: Vec<Value> = expected
        .iter()
        .map(|r| {
            if r["maybe"].is_null() {
                json!(0.0)
            } else {
                r["maybe"].clone()
            }
        })
        .collect();
    assert_eq!(outputs["maybe"]["values"], json!(maybe));
    // Without the reader schema, the writer schemas disagree: fewer
    // features, with notes.
    let run = grist_on(&["spec"], &d.files);
    run.assert_ok("spec");
    let writer_spec: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(writer_spec["features"].as_array().unwrap().len() < names.len());
    assert!(
        run.stderr.contains("writer schema differs"),
        "{}",
        run.stderr
    );
    // convert without --spec: inferred from the reader schema.
    let out = d.dir.join("out");
    let run = grist_on(
        &[
            "convert",
            "--to",
            "tfrecord",
            "--lossy",
            "--reader-schema",
            arg(&d.avsc),
            "-o",
            arg(&out),
        ],
        &d.files,
    );
    run.assert_ok("convert --reader-schema without --spec");
    let want: Vec<Value> = expected.iter().map(|r| r["id"].clone()).collect();
    assert_eq!(converted_ids(&out), json!(want));
    // A reader schema a writer schema does not resolve against: the file
    // and the field, before any spec is printed.
    let mut bad = reader.clone();
    bad["fields"][2]["type"] = json!("string");
    let bad_avsc = d.dir.join("bad.avsc");
    std::fs::write(&bad_avsc, bad.to_string()).unwrap();
    let run = grist_on(&["spec", "--reader-schema", arg(&bad_avsc)], &d.files);
    run.assert_failed("spec with a reader schema that does not resolve");
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.contains("v1.avro") && run.stderr.contains("kind"),
        "{}",
        run.stderr
    );
    // Other formats refuse it, naming theirs.
    let run = grist_on(
        &["spec", "--reader-schema", arg(&d.avsc)],
        std::slice::from_ref(&out),
    );
    run.assert_failed("spec --reader-schema on TFRecord files");
    assert!(
        run.stderr.contains("TFRecord") && run.stderr.contains("reader schema"),
        "{}",
        run.stderr
    );
}
