//! The command line's conventions: `-` for standard input, `cat --limit`,
//! data on stdout and status on stderr, `gen --force`, completions.

use std::path::{Path, PathBuf};

use grist_testkit::corpus;
use serde_json::Value;

use crate::support::{Run, assert_json_eq, grist, grist_on, grist_stdin, write_spec};

/// A file of the corpus, by its path under the corpus root.
fn corpus_file(relative: &str) -> PathBuf {
    corpus::root().join(relative)
}

/// Runs `args` then `-`, with `file`'s bytes on standard input.
fn piped(args: &[&str], file: &Path) -> Run {
    let bytes = std::fs::read(file).unwrap();
    let mut all = args.to_vec();
    all.push("-");
    grist_stdin(all, &bytes)
}

/// One file of each format (and each TFRecord compression), by path.
const ONE_OF_EACH: [&str; 6] = [
    "tfrecord/tfr_example_basic.tfrecord",
    "tfrecord/tfr_example_gzip.tfrecord.gz",
    "tfrecord/tfr_example_zlib.tfrecord.zz",
    "avro/avro_apache_deflate.avro",
    "ffrecord/tiny2.ffr",
    "ofrecord/tiny2/part-00000",
];

#[test]
fn stdin_reads_as_the_file_does() {
    for relative in ONE_OF_EACH {
        let file = corpus_file(relative);
        let modes = [
            &["cat", "--raw"][..],
            &["cat", "--records"],
            &["count"],
            &["inspect"],
            &["inspect", "--json"],
        ];
        for args in modes {
            if args[1..] == ["--records"] && relative.ends_with(".ffr") {
                // The corpus's FFRecord samples are opaque bytes, not
                // tf.Examples: --raw is what reads them.
                continue;
            }
            let what = format!("{args:?} {relative}");
            let by_name = grist_on(args, std::slice::from_ref(&file));
            by_name.assert_ok(&what);
            assert!(!by_name.stdout.is_empty(), "{what}");
            let run = piped(args, &file);
            run.assert_ok(&format!("{what} from stdin"));
            assert!(run.stderr.is_empty(), "{what}: {}", run.stderr);
            // count and inspect name the file: standard input is `<stdin>`.
            // (Tables are laid out for the names they hold: compared word
            // by word.)
            let named = by_name.stdout.replace(&*file.to_string_lossy(), "<stdin>");
            let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
            assert_eq!(words(&run.stdout), words(&named), "{what}");
        }
        let run = piped(&["verify"], &file);
        run.assert_ok(&format!("verify {relative} from stdin"));
        assert!(
            run.stdout.starts_with("OK      <stdin>  ("),
            "{}",
            run.stdout
        );
        let by_name = grist_on(&["verify"], std::slice::from_ref(&file));
        let counts = |s: &str| s.split_once("  (").map(|(_, r)| r.to_string());
        assert_eq!(counts(&run.stdout), counts(&by_name.stdout), "{relative}");
    }
}

#[test]
fn stdin_with_a_spec_and_with_format() {
    let case = corpus::case("tfrecord", "tfr_example_basic");
    let dir = tempfile::tempdir().unwrap();
    let parse = case.parses().iter().find(|p| p["outcome"] == "ok").unwrap();
    let spec = write_spec(dir.path(), "spec.json", parse);
    let spec = spec.to_str().unwrap();
    let by_name = grist_on(&["cat", "--spec", spec], &case.files);
    by_name.assert_ok("cat --spec");
    let run = piped(&["cat", "--spec", spec], &case.files[0]);
    run.assert_ok("cat --spec -");
    assert_eq!(run.stdout, by_name.stdout);
    for (got, want) in run
        .json_lines()
        .iter()
        .zip(parse["batches"].as_array().unwrap())
    {
        assert_json_eq(want, got, "cat --spec -");
    }
    // --format names the format instead of the content.
    let run = piped(&["cat", "--raw", "--format", "tfrecord"], &case.files[0]);
    run.assert_ok("--format tfrecord -");
    assert_eq!(run.json_lines().len(), 10);
    let run = piped(&["cat", "--raw", "--format", "avro"], &case.files[0]);
    run.assert_failed("a TFRecord file read as Avro from stdin");
    assert!(run.stderr.contains("<stdin>"), "{}", run.stderr);
}

#[test]
fn stdin_errors_name_stdin() {
    for (relative, words) in [
        ("tfrecord/tfr_corrupt_data_crc.tfrecord", "record "),
        ("ffrecord/corrupt_sample_byte.ffr", "sample "),
    ] {
        let file = corpus_file(relative);
        let run = piped(&["verify"], &file);
        run.assert_failed(relative);
        assert!(
            run.stdout.starts_with("FAILED  <stdin>  ") && run.stdout.contains(words),
            "{relative}: {}",
            run.stdout
        );
        assert!(run.stderr.contains("<stdin>"), "{}", run.stderr);
        assert!(!run.stderr.contains(".grist-stdin"), "{}", run.stderr);
        let run = piped(&["cat", "--raw"], &file);
        run.assert_failed(relative);
        assert!(run.stderr.contains("<stdin>"), "{}", run.stderr);
    }
    // Nothing on stdin: no format to tell.
    let run = grist_stdin(["count", "-"], b"");
    run.assert_failed("empty stdin");
    assert!(run.stderr.contains("<stdin>"), "{}", run.stderr);
    // Standard input is read once.
    let run = grist_stdin(["count", "-", "-"], b"");
    run.assert_failed("- twice");
    assert!(run.stderr.contains("only once"), "{}", run.stderr);
    // Beside named files, with its name in the output.
    let file = corpus_file(ONE_OF_EACH[0]);
    let bytes = std::fs::read(&file).unwrap();
    let args = ["count".as_ref(), file.as_os_str(), "-".as_ref()];
    let run = grist_stdin(args, &bytes);
    run.assert_ok("a file and stdin");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert!(lines[1].ends_with("  <stdin>"), "{}", run.stdout);
    assert!(lines[2].trim_start().starts_with("20 "), "{}", run.stdout);
}

#[test]
fn cat_limit_stops_after_n_records() {
    let case = corpus::case("tfrecord", "tfr_example_basic");
    let files = [case.files[0].clone(), case.files[0].clone()];
    for mode in ["--raw", "--records"] {
        let all = grist_on(&["cat", mode], &files);
        all.assert_ok(mode);
        let all: Vec<&str> = all.stdout.lines().collect();
        assert_eq!(all.len(), 20);
        for n in [0usize, 1, 7, 10, 12, 20, 25] {
            let limit = n.to_string();
            let run = grist_on(&["cat", mode, "--limit", &limit], &files);
            run.assert_ok(&format!("{mode} --limit {n}"));
            let got: Vec<&str> = run.stdout.lines().collect();
            assert_eq!(got, all[..n.min(20)], "{mode} --limit {n}");
        }
        // From standard input too.
        let one = grist_on(&["cat", mode], &files[..1]);
        let one: Vec<&str> = one.stdout.lines().collect();
        assert_eq!(one.len(), 10);
        let run = piped(&["cat", mode, "--limit", "3"], &files[0]);
        run.assert_ok("--limit from stdin");
        assert_eq!(run.stdout.lines().collect::<Vec<_>>(), one[..3]);
    }

    // --spec: whole batches, the last one cut to the records left.
    let dir = tempfile::tempdir().unwrap();
    let parse = case.parses().iter().find(|p| p["outcome"] == "ok").unwrap();
    let spec = write_spec(dir.path(), "spec.json", parse);
    let spec = spec.to_str().unwrap();
    let cat = |extra: &[&str]| {
        let batch = if extra.contains(&"--batch-size") {
            &[][..]
        } else {
            &["--batch-size", "4"]
        };
        let args = [&["cat", "--spec", spec][..], batch, extra].concat();
        let run = grist_on(&args, &case.files);
        run.assert_ok(&format!("{extra:?}"));
        run.json_lines()
    };
    let all = cat(&[]);
    let records = |lines: &[Value]| -> Vec<u64> {
        lines
            .iter()
            .map(|l| l["records"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(records(&all), [4, 4, 2]);
    assert_eq!(cat(&["--limit", "8"]), all[..2]);
    assert_eq!(cat(&["--limit", "100"]), all);
    assert!(cat(&["--limit", "0"]).is_empty());
    let cut = cat(&["--limit", "6"]);
    assert_eq!(records(&cut), [4, 2]);
    assert_eq!(cut[0], all[0]);
    // The cut batch holds the first two records of the second: batches
    // of two say what they are.
    let pairs = cat(&["--batch-size", "2"]);
    let dense_of = |batch: &Value| -> Vec<(String, Value)> {
        let outputs = batch["outputs"].as_object().unwrap();
        outputs
            .iter()
            .filter(|(_, t)| t["kind"] == "dense" || t["kind"] == "ragged")
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect()
    };
    assert!(!dense_of(&cut[1]).is_empty());
    assert_eq!(dense_of(&cut[1]), dense_of(&pairs[2]));
}

#[test]
fn data_goes_to_stdout_and_status_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data");
    let out_s = out.to_str().unwrap();
    let run = grist(["gen", "prod19", "--records", "100", "--out", out_s]);
    run.assert_ok("gen");
    assert!(run.stdout.is_empty(), "gen's stdout: {}", run.stdout);
    assert!(run.stderr.contains("wrote "), "{}", run.stderr);
    assert!(run.stderr.contains("prod19.tfrecord"), "{}", run.stderr);
    // No progress bar off a terminal: only the status lines.
    assert!(
        run.stderr
            .lines()
            .all(|l| l.starts_with("wrote ") || l.starts_with("done in ")),
        "{}",
        run.stderr
    );

    let file = out.join("prod19.tfrecord");
    let run = grist(["index".as_ref(), file.as_os_str()]);
    run.assert_ok("index");
    assert!(run.stdout.is_empty(), "index's stdout: {}", run.stdout);
    assert!(run.stderr.contains("prod19.tfrecord.idx"), "{}", run.stderr);

    // The read commands print data on stdout and nothing on stderr.
    let spec = out.join("prod19.spec.json");
    for args in [
        vec!["count"],
        vec!["verify"],
        vec!["inspect"],
        vec!["cat", "--raw"],
        vec!["cat", "--spec", spec.to_str().unwrap(), "--limit", "5"],
    ] {
        let run = grist_on(&args, std::slice::from_ref(&file));
        run.assert_ok(&format!("{args:?}"));
        assert!(!run.stdout.is_empty(), "{args:?}");
        assert!(run.stderr.is_empty(), "{args:?}: {}", run.stderr);
    }
    let run = grist(["completions", "bash"]);
    run.assert_ok("completions");
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[test]
fn gen_refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data");
    let out_s = out.to_str().unwrap();
    let gen_args = |seed: &str, extra: &[&'static str]| -> Vec<String> {
        let mut args: Vec<String> = ["gen", "prod19", "--records", "50", "--seed", seed]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(["--out".to_string(), out_s.to_string()]);
        args
    };
    grist(gen_args("1", &[])).assert_ok("first gen");
    let data = out.join("prod19.tfrecord");
    let first = std::fs::read(&data).unwrap();

    // Same outputs again: refused, naming the data file, nothing changed.
    let run = grist(gen_args("2", &[]));
    run.assert_failed("gen over its outputs");
    assert!(
        run.stderr.contains(&*data.to_string_lossy()) && run.stderr.contains("--force"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read(&data).unwrap(), first);
    // The gzip copy is new, but the plain file exists: nothing is written.
    let run = grist(gen_args("2", &["--gzip"]));
    run.assert_failed("gen --gzip over the plain file");
    assert!(!out.join("prod19.tfrecord.gz").exists());

    // Another format beside it shares the same spec file: no conflict.
    grist(gen_args("1", &["--format", "ffrecord"])).assert_ok("ffrecord beside");

    // --force replaces the files.
    grist(gen_args("2", &["--force"])).assert_ok("gen --force");
    let second = std::fs::read(&data).unwrap();
    assert_ne!(second, first, "a new seed, new bytes");
    let run = grist(["count".as_ref(), data.as_os_str()]);
    assert!(run.stdout.trim_start().starts_with("50 "), "{}", run.stdout);

    // A spec file that differs is an output that exists.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let spec = other.join("prod19.spec.json");
    std::fs::write(&spec, "{\"features\": []}\n").unwrap();
    let run = grist([
        "gen".as_ref(),
        "prod19".as_ref(),
        "--records".as_ref(),
        "10".as_ref(),
        "--out".as_ref(),
        other.as_os_str(),
    ]);
    run.assert_failed("gen over another spec");
    assert!(run.stderr.contains("prod19.spec.json"), "{}", run.stderr);
    assert!(!other.join("prod19.tfrecord").exists(), "nothing written");
    assert_eq!(
        std::fs::read_to_string(&spec).unwrap(),
        "{\"features\": []}\n"
    );

    // An OFRecord dataset is a folder: refused too, replaced with --force.
    let of =
        |extra: &[&'static str]| grist(gen_args("1", &[&["--format", "ofrecord"], extra].concat()));
    of(&[]).assert_ok("ofrecord");
    let run = of(&[]);
    run.assert_failed("ofrecord again");
    assert!(run.stderr.contains("prod19.ofrecord"), "{}", run.stderr);
    of(&["--force"]).assert_ok("ofrecord --force");
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let run = grist(["completions", shell]);
        run.assert_ok(shell);
        assert!(run.stdout.len() > 200, "{shell}: {}", run.stdout);
        // fish and elvish spell long options without their dashes.
        for word in ["grist", "verify", "completions", "limit"] {
            assert!(run.stdout.contains(word), "{shell}: no {word}");
        }
    }
    // clap's usage error: status 2, the shells it knows named.
    let run = grist(["completions", "tcsh"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stdout.is_empty() && run.stderr.contains("fish"),
        "{}",
        run.stderr
    );
}
