//! Running the binary, and checking its output against the golden corpus
//! (whose cases come from grist-testkit).

use std::path::{Path, PathBuf};
use std::process::Command;

use grist_testkit::corpus::Case;
use serde_json::Value;

/// What a run of the binary produced.
pub struct Run {
    /// Whether it exited with status 0.
    pub ok: bool,
    /// The exit status code.
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Standard output as JSON lines.
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
            .collect()
    }

    /// Panics with the run's output unless it succeeded.
    pub fn assert_ok(&self, what: &str) -> &Self {
        assert!(self.ok, "{what}: failed ({:?}): {}", self.code, self.stderr);
        self
    }

    /// Panics unless it failed with a one-line message that is not a
    /// panic.
    pub fn assert_failed(&self, what: &str) -> &Self {
        assert!(
            !self.ok,
            "{what}: should have failed; stdout: {}",
            self.stdout
        );
        assert!(
            !self.stderr.contains("panicked"),
            "{what}: panicked: {}",
            self.stderr
        );
        assert_eq!(
            self.stderr.trim_end().lines().count(),
            1,
            "{what}: not one line: {}",
            self.stderr
        );
        assert!(
            self.stderr.starts_with("grist: error: "),
            "{what}: {}",
            self.stderr
        );
        self
    }
}

impl Run {
    /// Panics unless it succeeded without a word on stderr or failed
    /// cleanly (see [`assert_failed`](Self::assert_failed)).
    pub fn assert_clean(&self, what: &str) {
        if self.ok {
            assert!(self.stderr.is_empty(), "{what}: {}", self.stderr);
        } else {
            self.assert_failed(what);
        }
    }
}

/// Runs `grist` with `args`.
pub fn grist<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let output = Command::new(env!("CARGO_BIN_EXE_grist"))
        .args(args)
        .output()
        .expect("running grist");
    Run {
        ok: output.status.success(),
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `grist` with `args`, `input` on its standard input.
pub fn grist_stdin<I, S>(args: I, input: &[u8]) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_grist"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running grist");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_vec();
    // Written from another thread: grist may stop reading early (an error)
    // while its output fills the pipes.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().expect("waiting for grist");
    writer.join().expect("the writer thread");
    Run {
        ok: output.status.success(),
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Compares two manifest-form documents exactly (floats by bits).
pub fn assert_json_eq(expected: &Value, actual: &Value, what: &str) {
    if let Err(m) = grist_tensor::json::compare_json(expected, actual) {
        panic!("{what}: {m}");
    }
}

/// The feature a reference reader's per-record error message names, if
/// any: TensorFlow's `Key: x,` / `Feature: x (`, ATDS's `decode feature
/// x.`.
fn feature_in_message(message: &str) -> Option<String> {
    for marker in ["Key: ", "Feature: ", "decode feature "] {
        if let Some(at) = message.find(marker) {
            let rest = &message[at + marker.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| !matches!(c, ',' | ' ' | '.'))
                .collect();
            if !name.is_empty() {
                return Some(name);
            }
        }
    }
    None
}

/// Runs `grist cat --spec` for one parse of a case on `threads` threads
/// and checks every batch (and the error, if the parse fails) against the
/// manifest.
pub fn check_parse(case: &Case, parse: &Value, threads: u32, dir: &Path) {
    let id = parse["id"].as_str().unwrap_or("?");
    let what = format!("{} / {id} / {threads} threads", case.name);
    let spec = dir.join(format!("{}-{id}.json", case.name));
    std::fs::write(&spec, serde_json::to_string(parse).unwrap()).unwrap();
    let mut args = vec![
        "cat".into(),
        "--spec".into(),
        spec.into_os_string(),
        "--threads".into(),
        threads.to_string().into(),
    ];
    args.extend(case.files.iter().map(|f| f.clone().into_os_string()));
    let run = grist(args);
    let lines = run.json_lines();
    let batches = parse["batches"].as_array().cloned().unwrap_or_default();
    if parse["outcome"] == "ok" {
        run.assert_ok(&what);
        assert_eq!(lines.len(), batches.len(), "{what}: batch count");
    } else {
        run.assert_failed(&what);
        let error = &parse["error"];
        // Without `batches_before_error` (tensorflow-io's parse_avro
        // cases), the batches that came before are `batches` (null: none).
        let before = error["batches_before_error"]
            .as_u64()
            .map_or(batches.len(), |b| b as usize);
        assert_eq!(lines.len(), before, "{what}: batches before the error");
        let message = error["message"].as_str().unwrap_or("");
        let features: Vec<&str> = parse["features"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["name"].as_str())
            .collect();
        if error["batches_before_error"].is_null() {
            // parse_avro's messages name no feature: grist's name the one
            // at fault, and the file.
            assert!(
                features.iter().any(|f| run.stderr.contains(f)),
                "{what}: {} names none of {features:?}",
                run.stderr
            );
            let file = case.files[0].display().to_string();
            assert!(run.stderr.contains(&file), "{what}: {}", run.stderr);
        } else if let Some(feature) = feature_in_message(message) {
            // A per-record error: the message names the file, the record
            // and the feature.
            assert!(
                run.stderr.contains(&feature),
                "{what}: {} does not name {feature}",
                run.stderr
            );
            assert!(run.stderr.contains("record "), "{what}: {}", run.stderr);
            let file = case.files[0].display().to_string();
            assert!(run.stderr.contains(&file), "{what}: {}", run.stderr);
        }
    }
    for (i, (want, got)) in batches.iter().zip(&lines).enumerate() {
        assert_json_eq(want, got, &format!("{what}: batch {i}"));
    }
}

/// The keys of `grist bench --json`, whatever the format.
pub const BENCH_KEYS: [&str; 19] = [
    "format",
    "records",
    "batches",
    "passes",
    "bytes",
    "seconds",
    "records_per_s",
    "bytes_per_s",
    "cpu_seconds",
    "records_per_cpu_s",
    "threads",
    "threads_mean",
    "threads_used",
    "batch_size",
    "shuffle_buffer",
    "median_batch_ms",
    "io_wait_s",
    "decode_s",
    "read_s",
];

/// Runs `grist bench --json --spec SPEC EXTRA... FILE` and returns its one
/// JSON line.
pub fn bench_json(spec: &Path, file: &Path, extra: &[&str]) -> Value {
    let mut args: Vec<std::ffi::OsString> = vec![
        "bench".into(),
        "--json".into(),
        "--spec".into(),
        spec.into(),
    ];
    args.extend(extra.iter().map(Into::into));
    args.push(file.into());
    let run = grist(args);
    run.assert_ok("bench");
    let lines = run.json_lines();
    assert_eq!(lines.len(), 1);
    lines[0].clone()
}

/// The words a message uses for a corpus error kind.
pub fn kind_words(kind: &str) -> &'static str {
    match kind {
        "metadata_checksum" => "metadata checksum",
        "sample_checksum" => "sample checksum",
        "invalid_offsets" => "invalid offset",
        "truncated" => "truncated",
        "invalid_length" => "invalid record length",
        "protobuf" => "could not parse OFRecord",
        other => panic!("unknown error kind {other}"),
    }
}

/// Writes `doc` as a spec file `name` in `dir`.
pub fn write_spec(dir: &Path, name: &str, doc: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(doc).unwrap()).unwrap();
    path
}

/// Runs `grist` with `args` and then `paths`.
pub fn grist_on(args: &[&str], paths: &[PathBuf]) -> Run {
    let mut all: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    all.extend(paths.iter().map(|p| p.clone().into_os_string()));
    grist(all)
}
