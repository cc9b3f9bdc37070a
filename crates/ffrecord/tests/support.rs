//! What only grist-ffrecord's tests need on top of grist-testkit's corpus
//! helpers: the FFRecord cases parsed into typed expectations, files laid
//! out by hand, and a small seeded generator.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use grist_testkit::corpus::{self, FolderCase};
use serde_json::Value;

/// The expected error of a case: `{kind, file, sample, at}`.
#[derive(Clone, Debug)]
pub(crate) struct ExpectedError {
    /// `metadata_checksum`, `sample_checksum`, `truncated`, `invalid_offsets`.
    pub(crate) kind: String,
    /// The file, relative to the corpus folder.
    pub(crate) file: String,
    /// The global sample index, if the error is about one sample.
    pub(crate) sample: Option<u64>,
    /// `open`, `read` or `open_or_read`.
    pub(crate) at: String,
}

/// One sample of a case's `samples[]`.
#[derive(Clone, Debug)]
pub(crate) struct ExpectedSample {
    pub(crate) index: u64,
    pub(crate) file: String,
    pub(crate) local_index: u64,
    pub(crate) len: u64,
    pub(crate) sha256: String,
    pub(crate) crc32: u32,
    /// `ok`, an error kind, or `n/a (open fails)`.
    pub(crate) read: String,
    /// What a reader with checks off returns, when it differs.
    pub(crate) unchecked: Option<(u64, String)>,
}

/// One ffrecord case (`<case>.expected.json`).
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub(crate) name: String,
    /// The path to open (file or folder), absolute.
    pub(crate) input: PathBuf,
    pub(crate) is_dir: bool,
    pub(crate) valid: bool,
    pub(crate) n: u64,
    pub(crate) error: Option<ExpectedError>,
    pub(crate) samples: Vec<ExpectedSample>,
    /// The parsed JSON.
    pub(crate) json: Value,
    /// The case as grist-testkit reads it.
    pub(crate) folder: FolderCase,
}

impl Case {
    /// The `files[]` entries.
    pub(crate) fn files(&self) -> &[Value] {
        self.json["files"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The `files[]` entries that belong to the dataset, in order.
    pub(crate) fn dataset_files(&self) -> Vec<&Value> {
        self.files()
            .iter()
            .filter(|f| f["part_of_dataset"].as_bool() != Some(false))
            .collect()
    }

    /// The absolute path of a `files[].file`.
    pub(crate) fn path_of(&self, file: &str) -> PathBuf {
        self.folder.path_of(file)
    }

    /// The expected error's `at`, if any.
    pub(crate) fn error_at(&self) -> Option<&str> {
        self.error.as_ref().map(|e| e.at.as_str())
    }
}

/// Parses a hex checksum such as `"0x1614ecb8"`.
pub(crate) fn hex_u32(v: &Value) -> u32 {
    let s = v.as_str().expect("hex string");
    u32::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex checksum")
}

/// Every ffrecord case of the corpus, sorted by name.
pub(crate) fn ffrecord_cases() -> Vec<Case> {
    let cases: Vec<Case> = corpus::folder_cases("ffrecord")
        .into_iter()
        .map(parse_case)
        .collect();
    assert!(cases.len() >= 11, "only {} ffrecord cases", cases.len());
    cases
}

/// The case called `name`.
pub(crate) fn ffrecord_case(name: &str) -> Case {
    parse_case(corpus::folder_case("ffrecord", name))
}

fn parse_case(folder: FolderCase) -> Case {
    let json = folder.expected.clone();
    assert_eq!(json["format"], "ffrecord", "{}", folder.name);
    let name = folder.name.clone();
    let error = match &json["error"] {
        Value::Null => None,
        e => Some(ExpectedError {
            kind: e["kind"].as_str().expect("error.kind").to_owned(),
            file: e["file"].as_str().expect("error.file").to_owned(),
            sample: e["sample"].as_u64(),
            at: e["at"].as_str().expect("error.at").to_owned(),
        }),
    };
    let samples = json["samples"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|s| ExpectedSample {
            index: s["index"].as_u64().expect("index"),
            file: s["file"].as_str().expect("file").to_owned(),
            local_index: s["local_index"].as_u64().expect("local_index"),
            len: s["len"].as_u64().expect("len"),
            sha256: s["sha256"].as_str().expect("sha256").to_owned(),
            crc32: hex_u32(&s["crc32"]),
            read: s["read"].as_str().expect("read").to_owned(),
            unchecked: s["unchecked_len"].as_u64().map(|l| {
                (
                    l,
                    s["unchecked_sha256"]
                        .as_str()
                        .expect("unchecked_sha256")
                        .to_owned(),
                )
            }),
        })
        .collect();
    Case {
        input: folder.input(),
        is_dir: json["input_kind"] == "dir",
        valid: json["valid"].as_bool().expect("valid"),
        n: json["n"].as_u64().expect("n"),
        name,
        error,
        samples,
        json,
        folder,
    }
}

/// Whether `name` (an error's file name, a full path) is the corpus file
/// `file` (relative to the corpus folder).
pub(crate) fn names_file(name: &str, file: &str) -> bool {
    Path::new(name).ends_with(file)
}

/// A small deterministic generator (splitmix64) for test data.
#[derive(Clone, Debug)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// `len` random bytes.
    pub(crate) fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// The bytes of an FFRecord file laid out by hand: metadata checksum
/// (`None`: computed), count, checksums, offsets, then `body` (everything
/// after the header).
pub(crate) fn craft(
    meta: Option<u32>,
    n: i64,
    crcs: &[u32],
    offsets: &[i64],
    body: &[u8],
) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    out.extend_from_slice(&n.to_le_bytes());
    for c in crcs {
        out.extend_from_slice(&c.to_le_bytes());
    }
    for o in offsets {
        out.extend_from_slice(&o.to_le_bytes());
    }
    let crc = meta.unwrap_or_else(|| grist_ffrecord::crc32(&out[4..]));
    out[..4].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(body);
    out
}
