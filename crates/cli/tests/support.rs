//! Running the binary and reading the golden corpus.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The golden corpus shared by the developers.
pub fn corpus_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus"
    ))
}

/// One TFRecord case of the manifest, with its expectations loaded.
pub struct Case {
    /// The case name.
    pub name: String,
    /// The manifest entry.
    pub manifest: Value,
    /// The `.expected.json` document.
    pub expected: Value,
    /// The data files, as absolute paths.
    pub files: Vec<PathBuf>,
}

impl Case {
    /// Whether the file is damaged (`expected: "error"`).
    pub fn is_error(&self) -> bool {
        self.manifest["expected"] == "error"
    }

    /// The compression (`NONE`, `GZIP`, `ZLIB`).
    pub fn compression(&self) -> &str {
        self.expected["tfrecord"]["compression"]
            .as_str()
            .unwrap_or("NONE")
    }

    /// The number of good records (before the error, if any).
    pub fn record_count(&self) -> u64 {
        self.expected["tfrecord"]["record_count"].as_u64().unwrap()
    }

    /// The framing expectations, `[{length, sha256}]`.
    pub fn records(&self) -> &Vec<Value> {
        self.expected["tfrecord"]["records"].as_array().unwrap()
    }

    /// The parse configurations.
    pub fn parses(&self) -> &Vec<Value> {
        self.expected["parses"].as_array().unwrap()
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every TFRecord case of the manifest.
pub fn tfrecord_cases() -> Vec<Case> {
    let root = corpus_dir();
    let manifest = read_json(&root.join("manifest.json"));
    let cases = manifest["sections"]["tfrecord"]
        .as_array()
        .expect("tfrecord section");
    assert!(!cases.is_empty());
    cases
        .iter()
        .map(|c| Case {
            name: c["case"].as_str().unwrap().to_string(),
            expected: read_json(&root.join(c["expected_json"].as_str().unwrap())),
            files: c["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| root.join(f.as_str().unwrap()))
                .collect(),
            manifest: c.clone(),
        })
        .collect()
}

/// The case called `name`.
pub fn case(name: &str) -> Case {
    tfrecord_cases()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

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

/// Compares two manifest-form documents exactly (floats by bits).
pub fn assert_json_eq(expected: &Value, actual: &Value, what: &str) {
    if let Err(m) = grist_tensor::json::compare_json(expected, actual) {
        panic!("{what}: {m}");
    }
}
