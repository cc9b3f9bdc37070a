//! Which format a file or folder holds, told by grist's registry: the
//! CLI's read paths (`count`, `cat --raw`, `inspect`) and the loader's
//! (`cat --spec`, `bench`) must agree, whatever the files are named:
//! extensions first, `part-<digits>` for OFRecord, then the content.

use std::path::{Path, PathBuf};

use grist_testkit::corpus;
use serde_json::{Value, json};

use crate::support::{Run, grist_on, write_spec};

/// Files named as a case says, read as the format `id`: the same records
/// as `original` (the corpus files they are copies of, in order).
struct Named {
    what: &'static str,
    /// The path given to the commands (a file or a folder).
    path: PathBuf,
    /// The corpus files, read under their own names.
    original: Vec<PathBuf>,
    /// The format's id.
    id: &'static str,
    /// Extra arguments of the loader's commands (`--payload raw`).
    loader_args: Vec<&'static str>,
}

fn corpus(path: &str) -> PathBuf {
    corpus::root().join(path)
}

/// Copies `from` (a corpus path) to `to`, creating its folder.
fn copy(from: &str, to: &Path) -> PathBuf {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(corpus(from), to).unwrap();
    to.to_path_buf()
}

/// The cases, their files written into `dir`.
fn cases(dir: &Path) -> Vec<Named> {
    let one = |what, from: &str, to: &str, id| Named {
        what,
        path: copy(from, &dir.join(to)),
        original: vec![corpus(from)],
        id,
        loader_args: Vec::new(),
    };
    // A folder of data files (copies of corpus files) and sidecar files
    // (not data: left out of the dataset).
    let folder = |what, files: &[(&str, &str)], sidecars: &[&str], folder: &str, id| {
        for (from, to) in files {
            copy(from, &dir.join(folder).join(to));
        }
        for name in sidecars {
            std::fs::write(dir.join(folder).join(name), b"not data\n").unwrap();
        }
        Named {
            what,
            path: dir.join(folder),
            original: files.iter().map(|(from, _)| corpus(from)).collect(),
            id,
            loader_args: Vec::new(),
        }
    };
    let tf = "tfrecord/tfr_example_basic.tfrecord";
    let avro = "avro/avro_atds_primitives.avro";
    let parts: Vec<String> = (0..4)
        .map(|i| format!("ofrecord/multi_part/part-0000{i}"))
        .collect();
    let ffr: Vec<String> = (0..3)
        .map(|i| format!("ffrecord/multi/PART_0000{i}.ffr"))
        .collect();
    vec![
        one(
            "a Spark part with the TFRecord extension",
            tf,
            "named/part-00000.tfrecord",
            "tfrecord",
        ),
        one(
            "a Spark part with the Avro extension",
            avro,
            "named/part-r-00000.avro",
            "avro",
        ),
        one("an Avro file named .bin", avro, "content/avro.bin", "avro"),
        one(
            "a GZIP TFRecord file named .bin",
            "tfrecord/tfr_example_gzip.tfrecord.gz",
            "content/gzip.bin",
            "tfrecord",
        ),
        one(
            "an OFRecord part",
            "ofrecord/tiny2/part-00000",
            "single/part-00000",
            "ofrecord",
        ),
        folder(
            "a folder of TFRecord files",
            &[
                (tf, "a.tfrecord"),
                ("tfrecord/tfr_example_shapes.tfrecord", "b.tfrecord"),
            ],
            &["a.tfrecord.idx"],
            "tf",
            "tfrecord",
        ),
        folder(
            "a folder of Spark TFRecord parts (by content)",
            &[(tf, "part-r-00000"), (tf, "part-r-00001")],
            &["_SUCCESS", ".part-r-00000.crc"],
            "spark",
            "tfrecord",
        ),
        folder(
            "a folder of Avro files",
            &[
                ("avro/avro_atds_multifile.avro", "a.avro"),
                ("avro/avro_atds_multifile_b.avro", "b.avro"),
            ],
            &["schema.avsc"],
            "avro",
            "avro",
        ),
        Named {
            loader_args: vec!["--payload", "raw"],
            ..folder(
                "a folder of FFRecord files",
                &[
                    (&ffr[0], "PART_00000.ffr"),
                    (&ffr[1], "PART_00001.ffr"),
                    (&ffr[2], "PART_00002.ffr"),
                ],
                &["README.txt"],
                "ffr",
                "ffrecord",
            )
        },
        folder(
            "a folder of OFRecord parts",
            &[
                (&parts[0], "part-00000"),
                (&parts[1], "part-00001"),
                (&parts[2], "part-00002"),
                (&parts[3], "part-00003"),
            ],
            &["_SUCCESS"],
            "of",
            "ofrecord",
        ),
    ]
}

/// `cat --raw` lines without "file" (the copies have other paths).
fn raw_lines(run: &Run) -> Vec<Value> {
    run.json_lines()
        .into_iter()
        .map(|mut l| {
            l.as_object_mut().unwrap().remove("file");
            l
        })
        .collect()
}

/// Runs `grist ARGS... PATHS` and checks that it worked.
fn ok(args: &[&str], paths: &[PathBuf], what: &str) -> Run {
    let run = grist_on(args, paths);
    run.assert_ok(&format!("{what}: {args:?}"));
    run
}

#[test]
fn cli_and_loader_agree_on_every_name() {
    let dir = tempfile::tempdir().unwrap();
    let none = write_spec(dir.path(), "none.json", &json!({"features": []}));
    let raw = write_spec(
        dir.path(),
        "raw.json",
        &json!([{"name": "sample", "kind": "dense", "dtype": "string", "shape": []}]),
    );
    for case in cases(&dir.path().join("data")) {
        let what = case.what;
        let path = std::slice::from_ref(&case.path);
        let original = &case.original;

        // count: the records of every file.
        let total = |run: &Run| run.json_lines()[0]["total"].as_u64().unwrap();
        let n = total(&ok(&["count", "--json"], path, what));
        assert_eq!(
            n,
            total(&ok(&["count", "--json"], original, what)),
            "{what}"
        );
        assert!(n > 0, "{what}");

        // cat --raw: the same records.
        let got = raw_lines(&ok(&["cat", "--raw"], path, what));
        let want = raw_lines(&ok(&["cat", "--raw"], original, what));
        assert_eq!(got, want, "{what}");

        // inspect names the format the CLI found.
        let doc = &ok(&["inspect", "--json"], path, what).json_lines()[0];
        assert_eq!(doc["format"], case.id, "{what}");

        // cat --spec and bench go through the loader: the same records, the
        // same format.
        let spec = if case.loader_args.is_empty() {
            &none
        } else {
            &raw
        };
        let spec = spec.to_str().unwrap();
        let mut args = vec!["cat", "--spec", spec, "--batch-size", "1000"];
        args.extend(&case.loader_args);
        let run = ok(&args, path, what);
        let records: u64 = run
            .json_lines()
            .iter()
            .map(|b| b["records"].as_u64().unwrap())
            .sum();
        assert_eq!(records, n, "{what}: cat --spec");
        let mut args = vec!["bench", "--json", "--min-seconds", "0", "--spec", spec];
        args.extend(&case.loader_args);
        let doc = &ok(&args, path, what).json_lines()[0];
        assert_eq!(doc["records"], n, "{what}: bench");
        let loader_format = doc["format"].as_str().unwrap().to_ascii_lowercase();
        assert_eq!(loader_format, case.id, "{what}: bench");
    }
}

/// A file whose name and content say no format: every command fails
/// naming the file, the extensions and formats it tried, and how to name
/// the format; never blaming the spec file.
#[test]
fn a_name_that_fits_nothing_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mystery.dat");
    std::fs::write(&file, b"neither TFRecord nor Avro nor anything else\n").unwrap();
    let spec = write_spec(dir.path(), "spec.json", &json!({"features": []}));
    let spec = spec.to_str().unwrap();
    let path = std::slice::from_ref(&file);
    for args in [
        &["count"][..],
        &["cat", "--raw"],
        &["cat", "--spec", spec],
        &["bench", "--spec", spec],
        &["verify"],
        &["inspect"],
    ] {
        let run = grist_on(args, path);
        let what = format!("{args:?}");
        run.assert_failed(&what);
        for needle in [
            "mystery.dat",
            "cannot tell the record format",
            ".tfrecord",
            ".avro",
            ".ffr",
            "part-<digits>",
            "TFRecord, Avro, FFRecord, OFRecord",
            "6e 65 69 74",
            "--format",
        ] {
            assert!(
                run.stderr.contains(needle),
                "{what}: {needle}: {}",
                run.stderr
            );
        }
        assert!(!run.stderr.contains("spec file"), "{what}: {}", run.stderr);
    }
    // Named, it is read as that format (and fails as that format does).
    let run = grist_on(&["count", "--format", "tfrecord"], path);
    run.assert_failed("--format tfrecord");
    assert!(!run.stderr.contains("cannot tell"), "{}", run.stderr);
    // A format no registry knows lists the known ones.
    let run = grist_on(&["count", "--format", "parquet"], path);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("tfrecord, avro, ffrecord, ofrecord"),
        "{}",
        run.stderr
    );
}

/// `--payload` is the format's option: detected formats are configured
/// with it, formats that take none refuse it.
#[test]
fn payload_is_an_option_of_the_format() {
    let ffr = corpus("ffrecord/tiny2.ffr");
    let tf = corpus("tfrecord/tfr_example_basic.tfrecord");
    let run = grist_on(
        &["cat", "--raw", "--payload", "raw"],
        std::slice::from_ref(&ffr),
    );
    run.assert_ok("--payload raw on FFRecord");
    let run = grist_on(
        &["cat", "--raw", "--payload", "jpeg"],
        std::slice::from_ref(&ffr),
    );
    run.assert_failed("--payload jpeg");
    assert!(run.stderr.contains("--payload jpeg"), "{}", run.stderr);
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path(), "spec.json", &json!({"features": []}));
    let spec = spec.to_str().unwrap();
    for args in [
        &["cat", "--raw", "--payload", "raw"][..],
        &["cat", "--spec", spec, "--payload", "raw"],
        &["bench", "--spec", spec, "--payload", "raw"],
    ] {
        let run = grist_on(args, std::slice::from_ref(&tf));
        run.assert_failed(&format!("{args:?} on TFRecord"));
        assert!(
            run.stderr.contains("--payload raw: TFRecord"),
            "{}",
            run.stderr
        );
    }
}
