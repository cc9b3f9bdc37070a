//! Shared test helpers: the golden corpus and its manifests.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

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
    /// The case name (`"avro_atds_primitives"`).
    pub(crate) name: String,
    /// The manifest's `expected`: `"ok"`, `"error"` or `"unspecified"`.
    pub(crate) outcome: String,
    /// The data files, absolute, in reading order.
    pub(crate) files: Vec<PathBuf>,
    /// The parsed `.expected.json`.
    pub(crate) expected: Value,
}

/// One block as fastavro's `block_reader` reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExpectedBlock {
    pub(crate) index: u64,
    pub(crate) offset: u64,
    pub(crate) record_count: u64,
    pub(crate) total_size: u64,
}

impl Case {
    /// The `avro` section of the expected JSON.
    pub(crate) fn avro(&self) -> &Value {
        &self.expected["avro"]
    }

    /// The `error` section (damaged files), or `Null`.
    pub(crate) fn error(&self) -> &Value {
        &self.expected["error"]
    }

    /// True for the cases the reference readers read without error.
    pub(crate) fn is_ok(&self) -> bool {
        self.outcome == "ok"
    }

    /// The `containers` entries, one per file, in the order of `files`.
    pub(crate) fn containers(&self) -> Vec<&Value> {
        let list = self.avro()["containers"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no avro.containers", self.name));
        assert_eq!(
            list.len(),
            self.files.len(),
            "{}: one container per file",
            self.name
        );
        for (c, f) in list.iter().zip(&self.files) {
            let name = c["file"].as_str().expect("container file");
            assert_eq!(
                f.file_name().and_then(|n| n.to_str()),
                Some(name),
                "{}: containers follow the files' order",
                self.name
            );
        }
        list.iter().collect()
    }

    /// The failing block of a damaged file (`error.failing_block_index`),
    /// `None` when the damage is not in a block (or the file is intact).
    pub(crate) fn failing_block(&self) -> Option<u64> {
        self.error()["failing_block_index"].as_u64()
    }

    /// The datums AvroRecordDataset read, (length, sha256 hex) each, when
    /// it read them all.
    pub(crate) fn datums(&self) -> Option<Vec<(usize, String)>> {
        let datums = &self.avro()["datums"];
        if datums["outcome"] != "ok" {
            return None;
        }
        let list = datums["datums"].as_array()?;
        Some(
            list.iter()
                .map(|d| {
                    (
                        d["length"].as_u64().expect("datum length") as usize,
                        d["sha256"].as_str().expect("datum sha256").to_owned(),
                    )
                })
                .collect(),
        )
    }

    /// The parse configurations (`parses`), for the decode tests.
    pub(crate) fn parses(&self) -> &[Value] {
        self.expected["parses"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

/// The blocks of a `containers` entry.
pub(crate) fn expected_blocks(container: &Value) -> Vec<ExpectedBlock> {
    container["blocks"]
        .as_array()
        .expect("container blocks")
        .iter()
        .map(|b| ExpectedBlock {
            index: b["index"].as_u64().expect("index"),
            offset: b["offset"].as_u64().expect("offset"),
            record_count: b["record_count"].as_u64().expect("record_count"),
            total_size: b["total_size"].as_u64().expect("total_size"),
        })
        .collect()
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

/// The avro cases of the manifest.
pub(crate) fn avro_cases() -> Vec<Case> {
    cases("avro")
}

/// The avro case called `name`.
pub(crate) fn avro_case(name: &str) -> Case {
    avro_cases()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no avro case {name:?}"))
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
