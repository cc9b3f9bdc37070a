//! The `grist` binary on object store URLs. The golden corpus is served
//! over S3 by grist-testkit's loopback server (`s3://corpus/...`), and
//! every command on every case of every format gives exactly what it gives
//! on the local path (whose output the other modules check against the
//! manifests), the URL in place of the path. `gen` writes to S3 the bytes
//! it writes locally; transient faults are retried; a persistent one fails
//! within the retry deadline, naming the URL.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use grist_testkit::corpus::{self, Remote};
use grist_testkit::{Fault, S3Server};
use serde_json::{Value, json};

use crate::support::{Run, grist};

/// Retries for the child processes (`grist` reads these variables): short,
/// so that a persistent fault fails quickly; long enough for the faults
/// the tests inject.
const RETRY: [(&str, &str); 3] = [
    ("GRIST_REMOTE_ATTEMPTS", "5"),
    ("GRIST_REMOTE_REQUEST_TIMEOUT", "2"),
    ("GRIST_REMOTE_DEADLINE", "10"),
];

/// Runs `grist` with `args`, the settings of `server` (endpoint,
/// credentials, plain HTTP) and `retry` in its environment.
fn grist_at(server: &S3Server, retry: &[(&str, &str)], args: &[OsString]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_grist"))
        .args(args)
        .envs(server.env())
        .envs(retry.iter().copied())
        .output()
        .expect("running grist");
    Run {
        ok: output.status.success(),
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// An argument of a command run both ways.
enum Arg {
    /// The same text both times (options, spec files).
    Text(String),
    /// A file or folder of the corpus: its path locally, its URL over S3.
    Corpus(PathBuf),
}

fn text(s: impl Into<String>) -> Arg {
    Arg::Text(s.into())
}

/// The corpus over S3.
struct Corpus {
    remote: Remote,
}

impl Corpus {
    fn start() -> Corpus {
        Corpus {
            remote: Remote::start(),
        }
    }

    fn server(&self) -> &S3Server {
        self.remote.server()
    }

    /// The URL of a corpus path (the CLI tests' corpus path: its text
    /// differs from grist-testkit's, which `Remote::url` expects).
    fn url(&self, path: &Path) -> String {
        let relative = path
            .strip_prefix(corpus::root())
            .unwrap_or_else(|_| panic!("{} is not in the corpus", path.display()));
        let key = relative.to_string_lossy().replace('\\', "/");
        self.server().url("corpus", &key)
    }

    /// Runs `grist ARGS` on the local paths and on their URLs; checks that
    /// both runs give the same status, standard output and error (the
    /// local corpus folder read as `s3://corpus`); returns the local run.
    ///
    /// A folder is given with a trailing `/` both ways, as folder URLs
    /// usually are (`a_folder_url_is_a_dataset_with_or_without_a_slash`
    /// covers the other form).
    fn same(&self, args: &[Arg], what: &str) -> Run {
        let slash = |p: &Path| if p.is_dir() { "/" } else { "" };
        let local: Vec<OsString> = args
            .iter()
            .map(|a| match a {
                Arg::Text(t) => t.into(),
                Arg::Corpus(p) => format!("{}{}", p.display(), slash(p)).into(),
            })
            .collect();
        let remote: Vec<OsString> = args
            .iter()
            .map(|a| match a {
                Arg::Text(t) => t.into(),
                Arg::Corpus(p) => format!("{}{}", self.url(p), slash(p)).into(),
            })
            .collect();
        let here = grist(&local);
        let there = grist_at(self.server(), &RETRY, &remote);
        let root = corpus::root().display().to_string();
        let as_remote = |s: &str| s.replace(&root, "s3://corpus");
        assert_eq!(
            (there.ok, there.code),
            (here.ok, here.code),
            "{what}: status; local stderr: {}; S3 stderr: {}",
            here.stderr,
            there.stderr
        );
        assert_eq!(there.stdout, as_remote(&here.stdout), "{what}: stdout");
        assert_eq!(there.stderr, as_remote(&here.stderr), "{what}: stderr");
        here
    }

    /// `cat --raw`, `cat --records`, `count`, `verify` and `inspect --json`
    /// of `files` (`extra` options first), both ways.
    fn every_command(&self, extra: &[&str], files: &[PathBuf], what: &str) {
        let commands: [&[&str]; 5] = [
            &["cat", "--raw"],
            &["cat", "--records"],
            &["count", "--json"],
            &["verify"],
            &["inspect", "--json"],
        ];
        for command in commands {
            let mut args: Vec<Arg> = command.iter().chain(extra).map(|s| text(*s)).collect();
            args.extend(files.iter().cloned().map(Arg::Corpus));
            self.same(&args, &format!("{what}: {}", command.join(" ")));
        }
    }

    /// `cat --spec SPEC` of `files`, both ways.
    fn cat_spec(&self, spec: &Path, extra: &[&str], files: &[PathBuf], what: &str) -> Run {
        let mut args = vec![text("cat"), text("--spec"), text(spec.to_str().unwrap())];
        args.extend(extra.iter().map(|s| text(*s)));
        args.extend(files.iter().cloned().map(Arg::Corpus));
        self.same(&args, &format!("{what}: cat --spec"))
    }
}

/// Writes `doc` as the spec file `name` in `dir`.
fn spec_file(dir: &Path, name: &str, doc: &Value) -> PathBuf {
    crate::support::write_spec(dir, name, doc)
}

#[test]
fn tfrecord_cases_read_the_same_over_s3() {
    let corpus = Corpus::start();
    let dir = tempfile::tempdir().unwrap();
    let mut parses = 0;
    for case in corpus::cases("tfrecord") {
        for parse in case.parses() {
            let id = parse["id"].as_str().unwrap();
            let spec = spec_file(dir.path(), &format!("{}-{id}.json", case.name), parse);
            let what = format!("{} / {id}", case.name);
            corpus.cat_spec(&spec, &["--threads", "2"], &case.files, &what);
            parses += 1;
        }
        corpus.every_command(&[], &case.files, &case.name);
    }
    assert!(parses > 10, "{parses} parses");
}

#[test]
fn avro_cases_read_the_same_over_s3() {
    let corpus = Corpus::start();
    let dir = tempfile::tempdir().unwrap();
    let mut parses = 0;
    for case in corpus::cases("avro") {
        for parse in case.parses() {
            let id = parse["id"].as_str().unwrap();
            let spec = spec_file(dir.path(), &format!("{}-{id}.json", case.name), parse);
            let what = format!("{} / {id}", case.name);
            corpus.cat_spec(&spec, &["--threads", "2"], &case.files, &what);
            parses += 1;
        }
        corpus.every_command(&[], &case.files, &case.name);
    }
    assert!(parses >= 10, "{parses} parses");
}

#[test]
fn ffrecord_cases_read_the_same_over_s3() {
    let corpus = Corpus::start();
    let dir = tempfile::tempdir().unwrap();
    let spec = crate::ffrecord::raw_spec(dir.path());
    for case in corpus::folder_cases("ffrecord") {
        let input = [case.input()];
        let raw = ["--payload", "raw", "--batch-size", "3", "--threads", "2"];
        corpus.cat_spec(&spec, &raw, &input, &case.name);
        corpus.every_command(&[], &input, &case.name);
    }
}

#[test]
fn ofrecord_cases_read_the_same_over_s3() {
    let corpus = Corpus::start();
    let dir = tempfile::tempdir().unwrap();
    for case in corpus::folder_cases("ofrecord") {
        // Every case is a folder of `part-<n>` files: a folder URL.
        let folder = [case.path(&case.expected["dataset_dir"])];
        let features: Vec<Value> = crate::ofrecord::varlen_spec(&case)
            .iter()
            .map(|(name, dtype)| json!({"name": name, "kind": "varlen", "dtype": dtype, "shape": [-1]}))
            .collect();
        let spec = spec_file(
            dir.path(),
            &format!("{}.json", case.name),
            &json!({ "features": features }),
        );
        let batches = ["--batch-size", "4", "--threads", "2"];
        corpus.cat_spec(&spec, &batches, &folder, &case.name);
        corpus.every_command(&[], &folder, &case.name);
    }
}

/// A folder URL is a dataset with or without a trailing `/` (without
/// one, grist-io asks for an object of that name first, then lists).
#[test]
fn a_folder_url_is_a_dataset_with_or_without_a_slash() {
    let corpus = Corpus::start();
    let folder = corpus::root().join("ofrecord/tiny2");
    let url = corpus.url(&folder);
    assert_eq!(url, "s3://corpus/ofrecord/tiny2");
    let root = corpus::root().display().to_string();
    for command in [&["cat", "--raw"][..], &["count", "--json"]] {
        let local = grist(command.iter().copied().chain([folder.to_str().unwrap()]));
        local.assert_ok("local");
        for url in [url.clone(), format!("{url}/")] {
            let args: Vec<OsString> = command
                .iter()
                .copied()
                .chain([url.as_str()])
                .map(Into::into)
                .collect();
            let remote = grist_at(corpus.server(), &RETRY, &args);
            remote.assert_ok(&url);
            assert_eq!(remote.stdout, local.stdout.replace(&root, "s3://corpus"));
        }
    }
}

/// Every file under `dir` (not hidden), by path relative to it, with its
/// bytes.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).unwrap().display().to_string();
                out.push((relative, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The `wrote ...` lines of `gen`, without the timing line.
fn wrote(run: &Run) -> Vec<String> {
    run.stdout
        .lines()
        .filter(|l| l.starts_with("wrote "))
        .map(String::from)
        .collect()
}

/// `grist gen prod19 --out s3://...` in every format writes the bytes a
/// local run writes (an FFRecord file larger than one upload part, with
/// two 503s on the way), which `count` and `cat --spec` (the spec file
/// read from S3 too) read back as the local files.
#[test]
fn gen_writes_to_s3() {
    let root = tempfile::tempdir().unwrap();
    let server = S3Server::start(root.path());
    let bucket = server.bucket("gen");
    let local = tempfile::tempdir().unwrap();
    let on = |args: &[&str]| -> Run {
        let args: Vec<OsString> = args.iter().map(Into::into).collect();
        grist_at(&server, &RETRY, &args)
    };
    for (format, records, data) in [
        ("tfrecord", "300", "prod19.tfrecord"),
        ("avro", "300", "prod19.avro"),
        ("ffrecord", "4000", "prod19.ffr"),
        ("ofrecord", "300", "prod19.ofrecord"),
    ] {
        let here = local.path().join(format);
        let url = server.url("gen", format);
        let common = ["gen", "prod19", "--records", records, "--format", format];
        let mut args: Vec<&str> = common.to_vec();
        args.extend(["--out", here.to_str().unwrap()]);
        let made = on(&args);
        made.assert_ok(&format!("local gen {format}"));
        if format == "ffrecord" {
            // Uploads retry too.
            server.faults().fail_next(2);
        }
        let mut args: Vec<&str> = common.to_vec();
        args.extend(["--out", url.as_str()]);
        let sent = on(&args);
        sent.assert_ok(&format!("gen {format} to S3"));
        let local_text = here.display().to_string();
        let expected: Vec<String> = wrote(&made)
            .iter()
            .map(|l| l.replace(&local_text, &url))
            .collect();
        assert_eq!(wrote(&sent), expected, "{format}");
        assert!(
            tree(&bucket.join(format)) == tree(&here),
            "{format}: the objects differ from the local files"
        );

        // Read back over S3, the spec file too.
        let spec = if format == "avro" {
            "prod19.avro.spec.json"
        } else {
            "prod19.spec.json"
        };
        let count = on(&["count", "--json", &format!("{url}/{data}")]);
        count.assert_ok(&format!("count {format}"));
        assert_eq!(
            count.json_lines()[0]["total"],
            records.parse::<u64>().unwrap()
        );
        let cat =
            |spec: &str, data: &str| on(&["cat", "--spec", spec, "--batch-size", "128", data]);
        let remote = cat(&format!("{url}/{spec}"), &format!("{url}/{data}"));
        remote.assert_ok(&format!("cat --spec {format}"));
        let here_cat = cat(
            here.join(spec).to_str().unwrap(),
            here.join(data).to_str().unwrap(),
        );
        here_cat.assert_ok(&format!("local cat --spec {format}"));
        assert!(
            remote.stdout == here_cat.stdout,
            "{format}: cat --spec over S3 differs"
        );
    }
    assert_eq!(server.faults().counts().faulted, 2);
    // The FFRecord file went up in parts (it is larger than one).
    let ffr = std::fs::metadata(bucket.join("ffrecord/prod19.ffr")).unwrap();
    assert!(ffr.len() > 8 << 20, "{} bytes", ffr.len());

    // gen refuses to replace an OFRecord dataset (a prefix) without
    // --force; with it, replaces its parts, and refuses a folder that
    // holds anything else.
    let dataset = bucket.join("ofrecord/prod19.ofrecord");
    let url = server.url("gen", "ofrecord");
    let unforced = [
        "gen",
        "prod19",
        "--records",
        "300",
        "--format",
        "ofrecord",
        "--out",
    ];
    let run = on(&[&unforced[..], &[url.as_str()]].concat());
    run.assert_failed("gen ofrecord over S3 without --force");
    assert!(run.stderr.contains("prod19.ofrecord"), "{}", run.stderr);
    let again = [
        "gen",
        "prod19",
        "--records",
        "300",
        "--format",
        "ofrecord",
        "--force",
    ];
    let mut args = again.to_vec();
    args.extend(["--out", url.as_str()]);
    on(&args).assert_ok("gen ofrecord again");
    assert_eq!(tree(&dataset).len(), 4);
    std::fs::write(dataset.join("notes.txt"), b"mine").unwrap();
    let run = on(&args);
    run.assert_failed("gen over a dataset with other files");
    assert!(run.stderr.contains("notes.txt"), "{}", run.stderr);
    assert_eq!(tree(&dataset).len(), 5, "nothing was removed");
}

/// A failed upload leaves nothing under the final names, and says which
/// URL failed.
#[test]
fn a_failed_upload_leaves_nothing() {
    let root = tempfile::tempdir().unwrap();
    let server = S3Server::start(root.path());
    let bucket = server.bucket("gen");
    server.faults().fail_always(Fault::Status(503));
    let url = server.url("gen", "out");
    let quick = [
        ("GRIST_REMOTE_ATTEMPTS", "2"),
        ("GRIST_REMOTE_REQUEST_TIMEOUT", "2"),
        ("GRIST_REMOTE_DEADLINE", "3"),
    ];
    let args: Vec<OsString> = ["gen", "prod19", "--records", "50", "--out", &url]
        .iter()
        .map(Into::into)
        .collect();
    let run = grist_at(&server, &quick, &args);
    run.assert_failed("gen with every request failing");
    assert!(run.stderr.contains(&url), "{}", run.stderr);
    assert!(tree(&bucket).is_empty(), "{:?}", tree(&bucket));
}

/// Requests answered with 503 or cut short are retried: the output is the
/// local one.
#[test]
fn transient_faults_are_retried() {
    let corpus = Corpus::start();
    let faults = corpus.server().faults();
    let file = corpus::root().join("tfrecord/tfr_example_basic.tfrecord");
    let folder = corpus::root().join("ofrecord/multi_part");
    for (fault, what) in [
        (Fault::Status(503), "503"),
        (Fault::Drop { after: 10 }, "dropped"),
        (Fault::Status(500), "500"),
    ] {
        for input in [&file, &folder] {
            let before = faults.counts().faulted;
            faults.inject(2, fault);
            let args = [text("cat"), text("--raw"), Arg::Corpus(input.clone())];
            corpus
                .same(&args, &format!("{what}: {}", input.display()))
                .assert_ok(what);
            assert_eq!(faults.counts().faulted, before + 2, "{what}");
        }
    }
}

/// Every request failing: the command fails with one line naming the URL,
/// within the retry deadline (plus the process's start and slack).
#[test]
fn a_persistent_fault_fails_naming_the_url_in_time() {
    let corpus = Corpus::start();
    corpus.server().faults().fail_always(Fault::Status(503));
    let deadline = Duration::from_secs(3);
    let retry = [
        ("GRIST_REMOTE_ATTEMPTS", "3"),
        ("GRIST_REMOTE_REQUEST_TIMEOUT", "1"),
        ("GRIST_REMOTE_DEADLINE", "3"),
    ];
    let url = corpus.url(&corpus::root().join("avro/avro_atds_varlen.avro"));
    for command in [&["count"][..], &["cat", "--raw"], &["verify"]] {
        let args: Vec<OsString> = command
            .iter()
            .copied()
            .chain([url.as_str()])
            .map(Into::into)
            .collect();
        let start = Instant::now();
        let run = grist_at(corpus.server(), &retry, &args);
        let took = start.elapsed();
        let what = command.join(" ");
        // One line (verify's too, after its per-file report).
        run.assert_failed(&what);
        assert!(run.stderr.contains(&url), "{what}: {}", run.stderr);
        assert!(
            took < deadline * 2 + Duration::from_secs(10),
            "{what}: took {took:?}"
        );
    }
}

/// `grist spec` on URLs prints what it prints on the local paths (the
/// spec, its notes, its errors).
#[test]
fn spec_is_the_same_over_s3() {
    let corpus_s3 = Corpus::start();
    let files = [
        corpus::case("tfrecord", "tfr_sequence_example").files,
        corpus::case("tfrecord", "tfr_example_gzip").files,
        corpus::case("tfrecord", "tfr_empty_file").files,
        corpus::case("avro", "avro_generic_nested").files,
        corpus::case("avro", "avro_atds_multifile").files,
        vec![corpus::folder_case("ofrecord", "multi_part").dataset_dir()],
    ];
    for paths in files {
        let mut args = vec![text("spec"), text("--records"), text("5")];
        args.extend(paths.iter().cloned().map(Arg::Corpus));
        corpus_s3.same(&args, &format!("spec {paths:?}"));
    }
}
