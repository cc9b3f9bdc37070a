//! The shared golden corpus (`../shared/corpus`, beside the project root):
//! where it is, its manifest's cases, and the helpers every crate's
//! corpus tests use. Format-specific views of a case stay in the tests
//! that need them.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The root of the shared golden corpus.
pub fn root() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus"
    ))
}

/// Reads a JSON file, panicking with its path on failure.
pub fn read_json(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One case of the corpus manifest, with its parsed `.expected.json`.
#[derive(Clone, Debug)]
pub struct Case {
    /// The case name (`"tfr_example_basic"`).
    pub name: String,
    /// The manifest's `expected`: `"ok"`, `"error"` or `"unspecified"`.
    pub outcome: String,
    /// The data files, absolute, in reading order.
    pub files: Vec<PathBuf>,
    /// The parsed `.expected.json`.
    pub expected: Value,
}

impl Case {
    /// True for the cases the reference readers read without error.
    pub fn is_ok(&self) -> bool {
        self.outcome == "ok"
    }

    /// The parse configurations (`parses`).
    pub fn parses(&self) -> &[Value] {
        self.expected["parses"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The single data file of a one-file case.
    pub fn file(&self) -> &Path {
        assert_eq!(self.files.len(), 1, "{}: expected one file", self.name);
        &self.files[0]
    }
}

/// The cases of one section (`"tfrecord"`, `"avro"`) of the manifest.
pub fn cases(section: &str) -> Vec<Case> {
    let root = root();
    let manifest = read_json(&root.join("manifest.json"));
    let list = manifest["sections"][section]
        .as_array()
        .unwrap_or_else(|| panic!("manifest has no section {section:?}"));
    let cases: Vec<Case> = list
        .iter()
        .map(|c| {
            let json_path = root.join(c["expected_json"].as_str().expect("expected_json"));
            Case {
                name: c["case"].as_str().expect("case").to_owned(),
                outcome: c["expected"].as_str().expect("expected").to_owned(),
                files: c["files"]
                    .as_array()
                    .expect("files")
                    .iter()
                    .map(|f| root.join(f.as_str().expect("file path")))
                    .collect(),
                expected: read_json(&json_path),
            }
        })
        .collect();
    assert!(!cases.is_empty(), "no {section} cases in the manifest");
    cases
}

/// The case of section `section` called `name`.
pub fn case(section: &str, name: &str) -> Case {
    cases(section)
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {section} case {name:?}"))
}

/// The `<case>.expected.json` documents of a corpus folder that has no
/// manifest section of its own (`"ffrecord"`, `"ofrecord"`), by name.
pub fn folder_cases(folder: &str) -> Vec<(String, Value)> {
    let dir = root().join(folder);
    let mut out: Vec<(String, Value)> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?.strip_suffix(".expected.json")?;
            Some((name.to_string(), read_json(&path)))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!out.is_empty(), "no cases in {}", dir.display());
    out
}

/// The corpus served over S3: every corpus path has a URL in the bucket
/// `corpus` of a test server ([`crate::S3Server::link`]).
#[derive(Debug)]
pub struct Remote {
    server: crate::S3Server,
    _dir: tempfile::TempDir,
}

impl Remote {
    /// A server whose bucket `corpus` is the corpus folder (read-only, by
    /// a symbolic link: nothing is copied).
    pub fn start() -> Remote {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let server = crate::S3Server::start(dir.path());
        server
            .link("corpus", &root())
            .expect("a link to the corpus folder");
        Remote { server, _dir: dir }
    }

    /// The server.
    pub fn server(&self) -> &crate::S3Server {
        &self.server
    }

    /// The URL of `path`, a file or folder of the corpus.
    pub fn url(&self, path: &Path) -> String {
        let root = root();
        let rel = path
            .strip_prefix(&root)
            .unwrap_or_else(|_| panic!("{} is not in the corpus", path.display()));
        let key = rel.to_string_lossy().replace('\\', "/");
        self.server.url("corpus", &key)
    }
}
