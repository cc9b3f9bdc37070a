//! The shared golden corpus (`../shared/corpus`, beside the project root):
//! where it is, its manifest's cases ([`Case`], with the TFRecord and Avro
//! views of them that several crates' tests read), the cases of the
//! folders without a manifest section ([`FolderCase`]: FFRecord, OFRecord),
//! and the corpus served over S3 ([`Remote`]). Views of a case that only
//! one crate's tests need (or that need a format crate's types) stay in
//! that crate's `tests/support.rs`.
//!
//! Everything here panics, naming the case, when the corpus is not what it
//! should be: these are test helpers.

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

    /// True for the damaged files (`expected: "error"`).
    pub fn is_error(&self) -> bool {
        self.outcome == "error"
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

    /// The `error` section (damaged files), or `Null`.
    pub fn error(&self) -> &Value {
        &self.expected["error"]
    }

    // -- TFRecord cases --

    /// The `tfrecord` section.
    pub fn tfrecord(&self) -> &Value {
        &self.expected["tfrecord"]
    }

    /// The compression TensorFlow read the file with, as the manifest
    /// names it (`NONE`, `GZIP`, `ZLIB`).
    pub fn compression_name(&self) -> &str {
        self.tfrecord()["compression"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no tfrecord.compression", self.name))
    }

    /// The number of records TensorFlow read (before the error, if any).
    pub fn record_count(&self) -> u64 {
        self.tfrecord()["record_count"]
            .as_u64()
            .unwrap_or_else(|| panic!("{}: no tfrecord.record_count", self.name))
    }

    /// The records TensorFlow read: (length, SHA-256 hex) each.
    pub fn records(&self) -> Vec<(usize, String)> {
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

    // -- Avro cases --

    /// The `avro` section.
    pub fn avro(&self) -> &Value {
        &self.expected["avro"]
    }

    /// The `containers` entries, one per file, in the order of `files`.
    pub fn containers(&self) -> Vec<&Value> {
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

    /// The failing block of a damaged Avro file
    /// (`error.failing_block_index`), `None` when the damage is not in a
    /// block (or the file is intact).
    pub fn failing_block(&self) -> Option<u64> {
        self.error()["failing_block_index"].as_u64()
    }

    /// The datums tensorflow-io's AvroRecordDataset read, (length, SHA-256
    /// hex) each, when it read them all.
    pub fn datums(&self) -> Option<Vec<(usize, String)>> {
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
}

/// One Avro block as fastavro's `block_reader` reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedBlock {
    /// The block's number in its file.
    pub index: u64,
    /// The byte offset of the block's record count.
    pub offset: u64,
    /// The records in the block.
    pub record_count: u64,
    /// The block's size in bytes, counts and sync marker included.
    pub total_size: u64,
}

/// The blocks of a `containers` entry ([`Case::containers`]).
pub fn expected_blocks(container: &Value) -> Vec<ExpectedBlock> {
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
                expected: without_reader_notes(read_json(&json_path)),
            }
        })
        .collect();
    assert!(!cases.is_empty(), "no {section} cases in the manifest");
    cases
}

/// The manifests note a parse read through its own writer schema as
/// `"reader_schema": "writer schema (see avro.schema)"`: prose, not a
/// schema, and reading without a reader schema is the same thing. Removed,
/// so a parse can be given to grist as a spec file.
fn without_reader_notes(mut expected: Value) -> Value {
    if let Some(parses) = expected["parses"].as_array_mut() {
        for parse in parses {
            let note = parse["reader_schema"]
                .as_str()
                .is_some_and(|s| s.starts_with("writer schema"));
            if let (true, Some(p)) = (note, parse.as_object_mut()) {
                p.remove("reader_schema");
            }
        }
    }
    expected
}

/// The case of section `section` called `name`.
pub fn case(section: &str, name: &str) -> Case {
    cases(section)
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {section} case {name:?}"))
}

/// A case of a corpus folder that has no manifest section of its own
/// (`ffrecord`, `ofrecord`): its `<case>.expected.json`. Paths in the
/// document are relative to the folder.
#[derive(Clone, Debug)]
pub struct FolderCase {
    /// The case name (the document's `case`).
    pub name: String,
    /// The parsed `.expected.json`.
    pub expected: Value,
    /// The corpus folder of the format.
    pub dir: PathBuf,
}

impl FolderCase {
    /// A path of the document (a JSON string), made absolute.
    pub fn path(&self, relative: &Value) -> PathBuf {
        self.path_of(relative.as_str().expect("a path"))
    }

    /// A path relative to the folder, made absolute.
    pub fn path_of(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }

    /// True when the reference reader reads the whole input without error.
    pub fn valid(&self) -> bool {
        self.expected["valid"]
            .as_bool()
            .unwrap_or_else(|| panic!("{}: no valid", self.name))
    }

    /// True when a clean error is as good as a matching parse.
    pub fn lenient(&self) -> bool {
        self.expected["lenient"].as_bool().unwrap_or(false)
    }

    /// Where the expected error happens (`error.at`), if there is one.
    pub fn error_at(&self) -> Option<&str> {
        self.expected["error"]["at"].as_str()
    }

    // -- FFRecord cases --

    /// The path to open (a file or a folder).
    pub fn input(&self) -> PathBuf {
        self.path(&self.expected["input"])
    }

    /// The `samples[]` entries.
    pub fn samples(&self) -> &[Value] {
        self.expected["samples"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    // -- OFRecord cases --

    /// The folder of the part files.
    pub fn dataset_dir(&self) -> PathBuf {
        self.path(&self.expected["dataset_dir"])
    }

    /// The `parts[]` entries.
    pub fn parts(&self) -> &[Value] {
        self.expected["parts"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no parts", self.name))
    }

    /// Every record of every part, in dataset order.
    pub fn records(&self) -> Vec<&Value> {
        self.parts()
            .iter()
            .flat_map(|p| p["records"].as_array().expect("records"))
            .collect()
    }

    /// The decoder runs (`decoder_runs[]`, empty when there are none).
    pub fn decoder_runs(&self) -> &[Value] {
        self.expected["decoder_runs"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

/// Every case of a corpus folder without a manifest section (`"ffrecord"`,
/// `"ofrecord"`): each `<folder>/*.expected.json`, plus any the manifest
/// lists under a section of that name, sorted by file name.
pub fn folder_cases(folder: &str) -> Vec<FolderCase> {
    let root = root();
    let dir = root.join(folder);
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".expected.json"))
        .collect();
    let manifest = read_json(&root.join("manifest.json"));
    if let Some(list) = manifest["sections"][folder].as_array() {
        paths.extend(
            list.iter()
                .filter_map(|c| c["expected_json"].as_str())
                .map(|p| root.join(p)),
        );
    }
    paths.sort();
    paths.dedup();
    assert!(!paths.is_empty(), "no cases in {}", dir.display());
    paths
        .iter()
        .map(|p| {
            let expected = read_json(p);
            let name = match expected["case"].as_str() {
                Some(name) => name.to_owned(),
                None => p
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(".expected.json"))
                    .expect("a case file name")
                    .to_owned(),
            };
            FolderCase {
                name,
                expected,
                dir: dir.clone(),
            }
        })
        .collect()
}

/// The case of folder `folder` called `name`.
pub fn folder_case(folder: &str, name: &str) -> FolderCase {
    folder_cases(folder)
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {folder} case {name:?}"))
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

/// The names of the features that two lists of feature specs (JSON, in
/// the form `SpecFile::to_value` writes them: every field spelled out)
/// describe alike: same name, kind, dtype and shape, and the same
/// everything else but the informational `tf_class` / `atds_class` and a
/// dense feature's `default` (which only fills missing features). Spec
/// inference tests decode a case with both and compare these features.
pub fn agreeing_features(case: &Value, inferred: &Value) -> Vec<String> {
    let strip = |spec: &Value| -> Value {
        let mut spec = spec.clone();
        if let Some(m) = spec.as_object_mut() {
            m.remove("tf_class");
            m.remove("atds_class");
            if m.get("kind").and_then(Value::as_str) == Some("dense") {
                m.remove("default");
            }
        }
        spec
    };
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let inferred = list(inferred);
    list(case)
        .iter()
        .filter(|c| {
            inferred
                .iter()
                .any(|i| i["name"] == c["name"] && strip(i) == strip(c))
        })
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}
