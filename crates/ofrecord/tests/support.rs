//! Shared test helpers: the golden OFRecord corpus and its manifests.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use grist_ofrecord::{Dataset, PartNaming};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The root of the shared golden corpus.
pub(crate) fn corpus_root() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus"
    ))
}

/// The folder of the OFRecord cases.
pub(crate) fn ofrecord_dir() -> PathBuf {
    corpus_root().join("ofrecord")
}

/// One OFRecord case: its `<case>.expected.json`.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    /// The case name.
    pub(crate) name: String,
    /// The parsed manifest.
    pub(crate) json: Value,
}

impl Case {
    /// The dataset as OneFlow's reader options open it.
    pub(crate) fn dataset(&self) -> grist_ofrecord::Result<Dataset> {
        let opts = &self.json["reader_options"];
        Dataset::open(
            self.dataset_dir(),
            opts["data_part_num"].as_u64().expect("data_part_num") as usize,
            &self.naming(),
        )
    }

    /// The part naming of the reader options.
    pub(crate) fn naming(&self) -> PartNaming {
        let opts = &self.json["reader_options"];
        PartNaming::oneflow(
            opts["part_name_prefix"].as_str().expect("part_name_prefix"),
            opts["part_name_suffix_length"]
                .as_i64()
                .expect("part_name_suffix_length"),
        )
    }

    /// The folder of the part files.
    pub(crate) fn dataset_dir(&self) -> PathBuf {
        ofrecord_dir().join(self.json["dataset_dir"].as_str().expect("dataset_dir"))
    }

    /// True when every record frames and parses.
    pub(crate) fn valid(&self) -> bool {
        self.json["valid"].as_bool().expect("valid")
    }

    /// True when a clean error is as good as a matching parse.
    pub(crate) fn lenient(&self) -> bool {
        self.json["lenient"].as_bool().unwrap_or(false)
    }

    /// The manifest's parts.
    pub(crate) fn parts(&self) -> &[Value] {
        self.json["parts"].as_array().expect("parts")
    }

    /// Every record of every part, in dataset order.
    pub(crate) fn records(&self) -> Vec<&Value> {
        self.parts()
            .iter()
            .flat_map(|p| p["records"].as_array().expect("records"))
            .collect()
    }

    /// The path of a manifest `file` (relative to the OFRecord folder).
    pub(crate) fn path(&self, file: &str) -> PathBuf {
        ofrecord_dir().join(file)
    }

    /// The decoder runs (`decoders*` cases).
    pub(crate) fn decoder_runs(&self) -> &[Value] {
        self.json["decoder_runs"]
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

/// Every OFRecord case: each `ofrecord/*.expected.json` (the shared
/// `manifest.json` has no `ofrecord` section), plus any the manifest
/// lists.
pub(crate) fn cases() -> Vec<Case> {
    let mut paths: Vec<PathBuf> = fs::read_dir(ofrecord_dir())
        .expect("corpus ofrecord folder")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".expected.json"))
        .collect();
    let manifest = read_json(&corpus_root().join("manifest.json"));
    if let Some(list) = manifest["sections"]["ofrecord"].as_array() {
        for c in list {
            if let Some(p) = c["expected_json"].as_str() {
                paths.push(corpus_root().join(p));
            }
        }
    }
    paths.sort();
    paths.dedup();
    let cases: Vec<Case> = paths
        .iter()
        .map(|p| {
            let json = read_json(p);
            Case {
                name: json["case"].as_str().expect("case").to_owned(),
                json,
            }
        })
        .collect();
    assert!(cases.len() >= 10, "only {} OFRecord cases", cases.len());
    cases
}

/// The case called `name`.
pub(crate) fn case(name: &str) -> Case {
    cases()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no OFRecord case {name:?}"))
}

/// Lowercase hex SHA-256.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
