//! Shared test helpers: the golden corpus and its manifests.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use grist_tfrecord::Compression;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The root of the shared golden corpus.
pub(crate) fn corpus_root() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus"
    ))
}

/// One case of the corpus manifest, with its parsed `.expected.json`.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    /// The case name (`"tfr_example_basic"`).
    pub(crate) name: String,
    /// The manifest's `expected`: `"ok"`, `"error"` or `"unspecified"`.
    pub(crate) outcome: String,
    /// The data files, absolute.
    pub(crate) files: Vec<PathBuf>,
    /// The parsed `.expected.json`.
    pub(crate) expected: Value,
}

impl Case {
    /// The `tfrecord` section of the expected JSON.
    pub(crate) fn tfrecord(&self) -> &Value {
        &self.expected["tfrecord"]
    }

    /// The compression TensorFlow read the file with.
    pub(crate) fn compression(&self) -> Compression {
        let name = self.tfrecord()["compression"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no tfrecord.compression", self.name));
        Compression::from_name(name)
            .unwrap_or_else(|| panic!("{}: unknown compression {name:?}", self.name))
    }

    /// The single data file of a one-file case.
    pub(crate) fn file(&self) -> &Path {
        assert_eq!(self.files.len(), 1, "{}: expected one file", self.name);
        &self.files[0]
    }

    /// True for the cases the reference reader read without error.
    pub(crate) fn is_ok(&self) -> bool {
        self.outcome == "ok"
    }

    /// The expected records: (length, sha256 hex) per record.
    pub(crate) fn records(&self) -> Vec<(usize, String)> {
        self.tfrecord()["records"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no tfrecord.records", self.name))
            .iter()
            .map(|r| {
                (
                    r["length"].as_u64().expect("length") as usize,
                    r["sha256"].as_str().expect("sha256").to_owned(),
                )
            })
            .collect()
    }

    /// The parse configurations (`parses`), for the parse tests.
    pub(crate) fn parses(&self) -> &[Value] {
        self.expected["parses"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

/// Reads a JSON file.
pub(crate) fn read_json(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The cases of one section (`"tfrecord"`, `"avro"`) of the manifest.
pub(crate) fn cases(section: &str) -> Vec<Case> {
    let root = corpus_root();
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

/// The tfrecord cases of the manifest.
pub(crate) fn tfrecord_cases() -> Vec<Case> {
    cases("tfrecord")
}

/// The tfrecord case called `name`.
pub(crate) fn tfrecord_case(name: &str) -> Case {
    tfrecord_cases()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no tfrecord case {name:?}"))
}

/// Lowercase hex SHA-256.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A fresh temporary directory.
pub(crate) fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}
