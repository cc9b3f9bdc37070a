//! The Avro cases of the golden corpus through every command (`cat` in its
//! three forms, `count`, `verify`, `inspect`, `bench`), and the Avro side
//! of `gen`.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use grist_testkit::corpus::{self, Case};
use serde_json::{Value, json};

use crate::support::{BENCH_KEYS, assert_json_eq, bench_json, check_parse, grist};

/// Whether a parse is tensorflow-io's generic key-expression path
/// (`parse_avro`) rather than ATDS.
pub(crate) fn is_generic(parse: &Value) -> bool {
    parse["api"]
        .as_str()
        .is_some_and(|api| api.contains("parse_avro"))
}

/// The records fastavro's block reader saw in each file (all of them for
/// intact files).
fn records_per_file(case: &Case) -> Vec<u64> {
    case.containers()
        .iter()
        .map(|c| {
            c["blocks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["record_count"].as_u64().unwrap())
                .sum()
        })
        .collect()
}

/// The codec of one file (its `avro.codec` metadata; `null` without).
fn codec(container: &Value) -> &str {
    container["metadata"]["avro.codec"]
        .as_str()
        .unwrap_or("null")
}

/// The good records of a damaged file: those of the blocks before the
/// damaged one.
fn intact_before(case: &Case) -> u64 {
    case.expected["error"]["records_in_intact_blocks_before"]
        .as_u64()
        .unwrap()
}

/// The offset of block `index` of the (only) file: from the manifest's
/// blocks, or just after the last block it lists.
fn block_offset(case: &Case, index: u64) -> u64 {
    let blocks = case.containers()[0]["blocks"].as_array().unwrap();
    match blocks.iter().find(|b| b["index"] == index) {
        Some(b) => b["offset"].as_u64().unwrap(),
        None => {
            let last = blocks.last().unwrap();
            last["offset"].as_u64().unwrap() + last["total_size"].as_u64().unwrap()
        }
    }
}

/// `grist <command> <flags...> <files...>`.
fn run_on(command: &[&str], files: &[PathBuf]) -> crate::support::Run {
    let mut args: Vec<OsString> = command.iter().map(Into::into).collect();
    args.extend(files.iter().map(|f| f.clone().into_os_string()));
    grist(args)
}

/// Checks that a failed run names the file and, when the manifest knows
/// it, the damaged block.
fn assert_names_the_damage(case: &Case, text: &str, what: &str) {
    let file = case.files[0].display().to_string();
    assert!(text.contains(&file), "{what}: {text} does not name {file}");
    if let Some(block) = case.failing_block() {
        let needle = format!("block {block}");
        assert!(
            text.contains(&needle),
            "{what}: {text} does not name {needle}"
        );
    }
}

#[test]
fn cat_spec_matches_every_parse() {
    let dir = tempfile::tempdir().unwrap();
    let (mut checked, mut generic) = (0, 0);
    for case in corpus::cases("avro") {
        for parse in case.parses() {
            for threads in [1, 3] {
                check_parse(&case, parse, threads, dir.path());
            }
            checked += 1;
            generic += usize::from(is_generic(parse));
        }
    }
    assert!(checked >= 20, "only {checked} parses");
    assert!(generic >= 12, "only {generic} key-expression parses");
}

/// Damaged files through `cat --spec` (no features: every datum is still
/// walked): the batches before the damage come out, then an error naming
/// the file and block.
#[test]
fn cat_spec_stops_at_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("none.json");
    std::fs::write(&spec, r#"{"features": []}"#).unwrap();
    let spec = spec.to_str().unwrap();
    let mut checked = 0;
    for case in corpus::cases("avro").into_iter().filter(|c| c.is_error()) {
        let fastavro = &case.expected["error"]["reader_outcomes"]["fastavro.reader"];
        let most = fastavro["records_before_error"]
            .as_u64()
            .or(fastavro["records"].as_u64())
            .unwrap();
        // Records before the failing one: at least the intact blocks', at
        // most what fastavro read.
        let mut good = None;
        for (batch, threads) in [(1, "1"), (2, "1"), (3, "2"), (4, "2")] {
            let what = format!("{} / batch {batch}", case.name);
            let size = batch.to_string();
            let run = run_on(
                &[
                    "cat",
                    "--spec",
                    spec,
                    "--batch-size",
                    &size,
                    "--threads",
                    threads,
                ],
                &case.files,
            );
            run.assert_failed(&what);
            assert_names_the_damage(&case, &run.stderr, &what);
            let lines = run.json_lines();
            assert!(lines.iter().all(|l| l["records"] == batch), "{what}");
            let records = *good.get_or_insert(lines.len() as u64);
            assert!(
                (intact_before(&case)..=most).contains(&records),
                "{what}: {records} records before the error"
            );
            assert_eq!(lines.len() as u64, records / batch, "{what}");
        }
        checked += 1;
    }
    assert!(checked >= 5);
}

#[test]
fn cat_raw_matches_the_datums() {
    for case in corpus::cases("avro") {
        let what = &case.name;
        let run = run_on(&["cat", "--raw"], &case.files);
        let lines = run.json_lines();
        if case.is_error() {
            run.assert_failed(what);
            assert_names_the_damage(&case, &run.stderr, what);
            assert_eq!(lines.len() as u64, intact_before(&case), "{what}");
            continue;
        }
        run.assert_ok(what);
        assert_eq!(lines.len() as u64, case.avro()["record_count"], "{what}");
        // The index counts per file; "file" is there with several files.
        let several = case.files.len() > 1;
        let indices: Vec<u64> = records_per_file(&case)
            .into_iter()
            .flat_map(|n| 0..n)
            .collect();
        for (line, index) in lines.iter().zip(&indices) {
            assert_eq!(line["index"], *index, "{what}");
            assert_eq!(line.get("file").is_some(), several, "{what}");
        }
        let datums = &case.avro()["datums"];
        if datums["outcome"] != "ok" {
            // tensorflow-io could not read this codec: no datums to compare.
            continue;
        }
        let want = datums["datums"].as_array().unwrap();
        assert_eq!(want.len(), lines.len(), "{what}");
        for (i, (want, got)) in want.iter().zip(&lines).enumerate() {
            assert_eq!(got["length"], want["length"], "{what}: datum {i}");
            assert_eq!(got["sha256"], want["sha256"], "{what}: datum {i}");
        }
    }
}

#[test]
fn cat_records_matches_fastavro() {
    for case in corpus::cases("avro") {
        let what = &case.name;
        let want = case.avro()["records"].as_array().unwrap();
        // One file at a time: with several, lines gain "file" and "index".
        let mut lines = Vec::new();
        let mut failed = None;
        for file in &case.files {
            let run = run_on(&["cat", "--records"], std::slice::from_ref(file));
            lines.extend(run.json_lines());
            if !run.ok {
                run.assert_failed(what);
                failed = Some(run.stderr);
                break;
            }
        }
        match failed {
            Some(stderr) => {
                assert!(case.is_error(), "{what}: {stderr}");
                assert_names_the_damage(&case, &stderr, what);
                assert_eq!(lines.len() as u64, intact_before(&case), "{what}");
            }
            None => {
                assert!(!case.is_error(), "{what}: should fail");
                assert_eq!(lines.len(), want.len(), "{what}: records");
            }
        }
        for (i, (want, got)) in want.iter().zip(&lines).enumerate() {
            assert_json_eq(want, got, &format!("{what}: record {i}"));
        }
    }
}

#[test]
fn count_matches_the_corpus() {
    for case in corpus::cases("avro") {
        let what = &case.name;
        let run = run_on(&["count", "--json"], &case.files);
        if case.is_error() {
            run.assert_failed(what);
            assert_names_the_damage(&case, &run.stderr, what);
            continue;
        }
        let doc = &run.assert_ok(what).json_lines()[0];
        assert_eq!(doc["total"], case.avro()["record_count"], "{what}");
        let per_file: Vec<u64> = doc["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["records"].as_u64().unwrap())
            .collect();
        assert_eq!(per_file, records_per_file(&case), "{what}");
    }
}

#[test]
fn verify_reports_the_first_bad_block() {
    for case in corpus::cases("avro") {
        let what = &case.name;
        let run = run_on(&["verify"], &case.files);
        if case.is_error() {
            run.assert_failed(what);
            assert_eq!(run.code, Some(1));
            assert!(run.stdout.starts_with("FAILED"), "{what}: {}", run.stdout);
            assert_names_the_damage(&case, &run.stderr, what);
            if let Some(block) = case.failing_block() {
                let at = format!("block {block} at offset {}", block_offset(&case, block));
                assert!(
                    run.stdout.contains(&at),
                    "{what}: {} lacks {at}",
                    run.stdout
                );
            }
            continue;
        }
        run.assert_ok(what);
        for ((line, container), records) in run
            .stdout
            .lines()
            .zip(case.containers())
            .zip(records_per_file(&case))
        {
            let blocks = container["blocks"].as_array().unwrap().len();
            let plural = if blocks == 1 { "" } else { "s" };
            let codec = codec(container);
            let want = format!("({records} records, {blocks} block{plural}, codec {codec})");
            assert!(line.starts_with("OK"), "{what}: {line}");
            assert!(line.ends_with(&want), "{what}: {line} vs {want}");
        }
    }
}

#[test]
fn inspect_shows_schema_codec_blocks_and_fields() {
    for case in corpus::cases("avro") {
        for ((file, container), records) in case
            .files
            .iter()
            .zip(case.containers())
            .zip(records_per_file(&case))
        {
            let what = format!("{}: {}", case.name, file.display());
            let run = run_on(&["inspect", "--json"], std::slice::from_ref(file));
            if case.is_error() {
                run.assert_failed(&what);
                continue;
            }
            let doc = &run.assert_ok(&what).json_lines()[0];
            let schema = &case.avro()["schema"];
            assert_eq!(doc["format"], "avro", "{what}");
            assert_eq!(doc["codec"], codec(container), "{what}");
            assert_eq!(&doc["schema"], schema, "{what}");
            assert_eq!(doc["records"], records, "{what}");
            assert_eq!(
                doc["blocks"],
                container["blocks"].as_array().unwrap().len(),
                "{what}"
            );
            // Metadata besides avro.schema and avro.codec, values as stored.
            let mut metadata = container["metadata"].as_object().unwrap().clone();
            metadata.remove("avro.codec");
            metadata.remove("avro.schema");
            assert_eq!(doc["metadata"], Value::Object(metadata), "{what}");
            let fields: Vec<(&Value, &Value)> = doc["fields"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| (&f["name"], &f["type"]))
                .collect();
            let want: Vec<(&Value, &Value)> = schema["fields"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| (&f["name"], &f["type"]))
                .collect();
            assert_eq!(fields, want, "{what}");

            // The table names every field.
            let run = run_on(&["inspect"], std::slice::from_ref(file));
            run.assert_ok(&what);
            for (name, _) in &want {
                let name = name.as_str().unwrap();
                assert!(run.stdout.contains(name), "{what}: {name}");
            }
        }
    }
}

/// `--format` overrides the extension; batches come from files of one
/// format only.
#[test]
fn format_by_extension_or_flag() {
    let case = corpus::case("avro", "avro_atds_primitives");
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("part-00000");
    std::fs::copy(&case.files[0], &plain).unwrap();
    let files = [plain];
    run_on(&["count"], &files).assert_failed("an Avro file read as TFRecord");
    let run = run_on(&["count", "--json", "--format", "avro"], &files);
    assert_eq!(run.assert_ok("--format avro").json_lines()[0]["total"], 10);

    let tfrecord = corpus::case("tfrecord", "tfr_example_basic").files[0].clone();
    let spec = dir.path().join("spec.json");
    std::fs::write(&spec, serde_json::to_string(&case.parses()[0]).unwrap()).unwrap();
    let run = run_on(
        &["cat", "--spec", spec.to_str().unwrap()],
        &[case.files[0].clone(), tfrecord],
    );
    run.assert_failed("mixed formats");
    assert!(run.stderr.contains("--format"), "{}", run.stderr);

    let run = run_on(&["cat", "--records", "--sequence"], &case.files);
    run.assert_failed("--sequence on Avro");
    let run = run_on(&["index"], &case.files);
    run.assert_failed("index of an Avro file");
    assert!(run.stderr.contains("TFRecord"), "{}", run.stderr);
}

/// Every command fails cleanly (one line, no panic) or succeeds on every
/// cut of a few files (one per codec family).
#[test]
fn truncated_files_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "avro_atds_primitives",
        "avro_atds_dense_deflate",
        "avro_atds_sparse_snappy",
        "avro_atds_codec_zstandard",
        "avro_generic_nested",
    ] {
        let case = corpus::case("avro", name);
        let spec = dir.path().join(format!("{name}.json"));
        // The first parse that succeeds (key expressions for the generic
        // case).
        let parse = case.parses().iter().find(|p| p["outcome"] == "ok");
        let parse = parse.cloned().unwrap_or(json!({"features": []}));
        std::fs::write(&spec, serde_json::to_string(&parse).unwrap()).unwrap();
        let spec = spec.to_str().unwrap().to_string();
        let data = std::fs::read(&case.files[0]).unwrap();
        let cut = dir.path().join(format!("{name}.avro"));
        let step = (data.len() / 12).max(1);
        let lengths = (0..data.len())
            .step_by(step)
            .chain([data.len() - 1, data.len()]);
        for len in lengths {
            std::fs::write(&cut, &data[..len]).unwrap();
            let files = [cut.clone()];
            let commands: [&[&str]; 6] = [
                &["cat", "--spec", &spec, "--threads", "2"],
                &["cat", "--raw"],
                &["cat", "--records"],
                &["count"],
                &["verify"],
                &["inspect"],
            ];
            for command in commands {
                let what = format!("{name} cut at {len}: {command:?}");
                let run = run_on(command, &files);
                if run.ok {
                    assert!(run.stderr.is_empty(), "{what}: {}", run.stderr);
                } else {
                    run.assert_failed(&what);
                }
                if len == data.len() {
                    run.assert_ok(&what);
                }
            }
        }
    }
}

/// The features whose dtype is the same in the TFRecord (tf.Example) and
/// Avro (native types) forms of prod19: they must decode identically.
fn same_dtype_outputs<'a>(tf: &'a Value, avro: &'a Value) -> Vec<(&'a str, &'a Value, &'a Value)> {
    avro["outputs"]
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(name, a)| {
            let t = &tf["outputs"][name];
            (t["dtype"] == a["dtype"]).then_some((name.as_str(), t, a))
        })
        .collect()
}

#[test]
fn gen_avro_then_cat_count_verify_and_bench() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data");
    let generate = |extra: &[&str], out: &Path| {
        let mut args: Vec<OsString> = ["gen", "prod19", "--records", "300", "--seed", "7"]
            .iter()
            .map(Into::into)
            .collect();
        args.extend(extra.iter().map(Into::into));
        args.extend(["--out".into(), out.as_os_str().to_owned()]);
        grist(args)
    };
    generate(&["--format", "avro", "--codec", "deflate"], &out).assert_ok("gen avro deflate");
    generate(&["--format", "avro"], &out).assert_ok("gen avro null");
    generate(&[], &out).assert_ok("gen tfrecord");
    let deflate = out.join("prod19.deflate.avro");
    let null = out.join("prod19.avro");
    let spec = out.join("prod19.avro.spec.json");
    let tf_spec = out.join("prod19.spec.json");
    let spec_doc: Value = serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    assert_eq!(spec_doc["features"].as_array().unwrap().len(), 19);

    for file in [&deflate, &null] {
        let files = [file.clone()];
        let doc = &run_on(&["count", "--json"], &files).json_lines()[0];
        assert_eq!(doc["total"], 300);
        let run = run_on(&["verify"], &files);
        run.assert_ok("verify");
        assert!(run.stdout.contains("300 records"), "{}", run.stdout);
        let doc = &run_on(&["inspect", "--json"], &files).json_lines()[0];
        assert_eq!(doc["fields"].as_array().unwrap().len(), 19);
    }
    let doc = &run_on(&["inspect", "--json"], std::slice::from_ref(&deflate)).json_lines()[0];
    assert_eq!(doc["codec"], "deflate");

    // Both codecs decode to the same batches, which agree with the
    // TFRecord file on every feature of the same dtype.
    let cat = |spec: &Path, file: &Path, threads: &str| {
        let spec = spec.to_str().unwrap();
        let run = run_on(
            &[
                "cat",
                "--spec",
                spec,
                "--batch-size",
                "128",
                "--threads",
                threads,
            ],
            &[file.to_path_buf()],
        );
        run.assert_ok("cat prod19");
        run.stdout
    };
    let avro_out = cat(&spec, &deflate, "1");
    assert_eq!(avro_out, cat(&spec, &null, "1"));
    assert_eq!(avro_out, cat(&spec, &deflate, "3"));
    let tf_out = cat(&tf_spec, &out.join("prod19.tfrecord"), "1");
    let avro_batches: Vec<Value> = avro_out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tf_batches: Vec<Value> = tf_out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sizes: Vec<&Value> = avro_batches.iter().map(|b| &b["records"]).collect();
    assert_eq!(sizes, [128, 128, 44]);
    let mut compared = BTreeSet::new();
    for (tf, av) in tf_batches.iter().zip(&avro_batches) {
        for (name, t, a) in same_dtype_outputs(tf, av) {
            assert_json_eq(t, a, name);
            compared.insert(name.to_string());
        }
    }
    assert!(compared.len() >= 12, "{compared:?}");

    // The same seed gives the same file.
    let again = dir.path().join("again");
    generate(&["--format", "avro", "--codec", "deflate"], &again).assert_ok("gen again");
    assert_eq!(
        std::fs::read(&deflate).unwrap(),
        std::fs::read(again.join("prod19.deflate.avro")).unwrap()
    );

    // Options of the other format are refused.
    generate(&["--format", "avro", "--gzip"], &again).assert_failed("--gzip with avro");
    generate(&["--codec", "deflate"], &again).assert_failed("--codec with tfrecord");
    assert_eq!(
        generate(&["--format", "avro", "--codec", "lz4"], &again).code,
        Some(2)
    );

    // bench --json: the same keys as for TFRecord.
    let doc = bench_json(
        &spec,
        &deflate,
        &["--min-seconds", "0", "--batch-size", "64"],
    );
    let keys: BTreeSet<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(keys, BENCH_KEYS.into());
    assert_eq!(
        (doc["records"].as_u64(), doc["batches"].as_u64()),
        (Some(300), Some(5))
    );
    assert!(doc["records_per_s"].as_f64().unwrap() > 0.0);
    assert!(doc["bytes_per_s"].as_f64().unwrap() > 0.0);
    let doc = bench_json(
        &spec,
        &null,
        &[
            "--min-seconds",
            "0",
            "--threads",
            "2",
            "--batch-size",
            "100",
        ],
    );
    assert_eq!(
        (doc["records"].as_u64(), doc["threads"].as_u64()),
        (Some(300), Some(2))
    );
    let run = run_on(
        &[
            "bench",
            "--spec",
            spec.to_str().unwrap(),
            "--min-seconds",
            "0",
        ],
        std::slice::from_ref(&deflate),
    );
    run.assert_ok("bench table");
    assert!(run.stdout.contains("Avro") && run.stdout.contains("records/s"));
}

/// `bench` over the corpus: every record of an ATDS case, several files.
#[test]
fn bench_reads_corpus_files() {
    let case = corpus::case("avro", "avro_atds_multifile");
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.json");
    std::fs::write(&spec, serde_json::to_string(&case.parses()[0]).unwrap()).unwrap();
    let mut args = vec!["bench", "--json", "--min-seconds", "0", "--spec"];
    args.push(spec.to_str().unwrap());
    let run = run_on(&args, &case.files);
    let doc = &run.assert_ok("bench multifile").json_lines()[0];
    assert_eq!(doc["records"], case.avro()["record_count"]);
    let batches = case.parses()[0]["batches"].as_array().unwrap().len();
    assert_eq!(doc["batches"], batches);
}

/// `cat --records` prints each record as fastavro's record dumped as
/// JSON, text for text: fields in schema order, logical types converted,
/// records that take no bytes, Java names, the `error` type (the files
/// and fastavro's lines in grist-avro-tensor's `tests/conformance`), and
/// `count` agrees.
#[test]
fn cat_records_prints_fastavro_text() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../avro-tensor/tests/conformance");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "avro") {
            continue;
        }
        let want = std::fs::read_to_string(path.with_extension("records.jsonl")).unwrap();
        let run = grist([
            OsString::from("cat"),
            "--records".into(),
            path.clone().into(),
        ]);
        run.assert_clean("cat --records");
        assert_eq!(run.stdout, want, "{}", path.display());
        let run = grist([
            OsString::from("count"),
            "--json".into(),
            path.clone().into(),
        ]);
        assert!(run.ok, "{}", run.stderr);
        let count: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(count["total"], want.lines().count(), "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 8);
}
