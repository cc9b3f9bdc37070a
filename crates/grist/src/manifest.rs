//! What a conversion leaves in its output folder besides the data, so
//! that it can be resumed, checked and split between machines:
//!
//! * `convert.json`: the conversion's identity (target format and
//!   options, spec, split, sources as given and as expanded with their
//!   sizes, the number of shards), written before any part;
//! * `convert-journal.json` (`convert-journal-<i>-of-<n>.json` for shard
//!   `i` of `n`): the parts committed so far, rewritten (atomically) after
//!   each part, removed once the manifest is written;
//! * `manifest.json` (`manifest-<i>-of-<n>.json` for a shard, merged into
//!   `manifest.json` by [`merge_shards`]): every part with its records,
//!   size and CRC-32C, and the totals; written last.

use std::io::Write as _;
use std::sync::Arc;

use grist_io::{Address, Digest, Storage};
use grist_tensor::{Location, StorageError, TensorError, Written};
use serde::{Deserialize, Serialize};

use crate::convert::ConvertError;

/// The name of the file that says which conversion an output folder holds.
pub const CONVERT_FILE: &str = "convert.json";

/// The name of the manifest of a finished conversion (of all its shards).
pub const MANIFEST_FILE: &str = "manifest.json";

/// A share of a conversion: shard `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    /// Which share, from 0.
    pub index: usize,
    /// How many shares.
    pub count: usize,
}

impl Shard {
    /// The whole conversion (shard 0 of 1).
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// The name of part `name` (a format's `part-00001.tfrecord`) of this
    /// shard: unchanged for the whole conversion, `part-<shard>-<part>...`
    /// otherwise (`part-00003-00001.tfrecord`), so that shards never
    /// write the same name.
    pub(crate) fn part_name(self, name: &str) -> String {
        if self.count <= 1 {
            return name.to_string();
        }
        match name.strip_prefix("part-") {
            Some(rest) => format!("part-{:05}-{rest}", self.index),
            None => format!("shard-{:05}-{name}", self.index),
        }
    }

    /// `manifest.json`, or `manifest-<i>-of-<n>.json` for a shard.
    pub(crate) fn manifest_name(self) -> String {
        self.suffixed("manifest")
    }

    /// `convert-journal.json`, or `convert-journal-<i>-of-<n>.json`.
    pub(crate) fn journal_name(self) -> String {
        self.suffixed("convert-journal")
    }

    fn suffixed(self, stem: &str) -> String {
        if self.count <= 1 {
            format!("{stem}.json")
        } else {
            format!("{stem}-{}-of-{}.json", self.index, self.count)
        }
    }

    /// Whether `name` is one of this shard's own files (those only it
    /// writes: its parts, journal and manifest).
    pub(crate) fn owns(self, name: &str) -> bool {
        if self.count <= 1 {
            return is_output_name(name);
        }
        name == self.manifest_name()
            || name == self.journal_name()
            || (is_part_name(name) && name.starts_with(&format!("part-{:05}-", self.index)))
    }
}

/// One output file in a [`Manifest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ManifestPart {
    /// Its name in the output folder.
    pub file: String,
    /// The shard that wrote it (in a merged manifest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<usize>,
    /// The records it holds.
    pub records: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// The CRC-32C of its bytes, computed while it was written (`None`
    /// when its sink could not tell).
    pub crc32c: Option<u32>,
}

impl ManifestPart {
    /// The entry of `address` whose sink reported `written`.
    pub(crate) fn new(address: &Address, written: &Written) -> Self {
        ManifestPart {
            file: address.file_name().unwrap_or_default().to_string(),
            shard: None,
            records: written.records,
            bytes: written.digest.map_or(written.bytes, |d| d.size),
            crc32c: written.digest.map(|d| d.crc32c),
        }
    }

    /// What its sink reported, as far as the entry tells.
    pub(crate) fn written(&self) -> Written {
        Written::new(self.records, self.bytes)
            .with_digest(self.crc32c.map(|c| Digest::new(self.bytes, c)))
    }
}

/// What a conversion wrote (`manifest.json`), or a shard of it
/// (`manifest-<i>-of-<n>.json`), or what it has written so far (the
/// journal).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Manifest {
    /// Whether every part is there (a manifest), or only those listed so
    /// far (a journal).
    pub complete: bool,
    /// The conversion: what `convert.json` holds.
    pub convert: serde_json::Value,
    /// The shard this manifest is of (`None`: the whole conversion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// The output files in the conversion's order.
    pub parts: Vec<ManifestPart>,
    /// The records of all the parts.
    pub records: u64,
    /// The bytes of all the parts.
    pub bytes: u64,
}

impl Manifest {
    pub(crate) fn new(
        complete: bool,
        convert: serde_json::Value,
        shard: Shard,
        parts: Vec<ManifestPart>,
    ) -> Self {
        Manifest {
            complete,
            convert,
            shard: (shard.count > 1).then_some(shard),
            records: parts.iter().map(|p| p.records).sum(),
            bytes: parts.iter().map(|p| p.bytes).sum(),
            parts,
        }
    }

    /// Reads the manifest at `address` (a path or URL).
    pub fn read(storage: &Storage, address: &Address) -> Result<Manifest, ConvertError> {
        match read_json(storage, address)? {
            Some(value) => serde_json::from_value(value).map_err(|e| bad_state(address, e)),
            None => Err(ConvertError::NoConversion {
                file: address.name().clone(),
            }),
        }
    }
}

/// Whether `name` is a file a conversion writes in its output folder.
pub(crate) fn is_output_name(name: &str) -> bool {
    name == CONVERT_FILE
        || name == crate::SPEC_FILE
        || name == MANIFEST_FILE
        || ((name.starts_with("manifest-") || name.starts_with("convert-journal"))
            && name.ends_with(".json"))
        || is_part_name(name)
}

/// `part-<digits>[-<digits>]`, then nothing or an extension.
fn is_part_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("part-") else {
        return false;
    };
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let n = digits(rest);
    if n == 0 {
        return false;
    }
    let mut rest = &rest[n..];
    if let Some(more) = rest.strip_prefix('-') {
        let m = digits(more);
        if m == 0 {
            return false;
        }
        rest = &more[m..];
    }
    rest.is_empty() || rest.starts_with('.')
}

fn bad_state(
    address: &Address,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> ConvertError {
    ConvertError::BadState {
        file: address.name().clone(),
        source: source.into(),
    }
}

fn storage_err(address: &Address, e: grist_io::Error) -> ConvertError {
    ConvertError::Write {
        file: address.name().clone(),
        source: Box::new(StorageError::new(address.name().clone(), e)),
    }
}

/// The JSON at `address`, or `None` when there is no such file.
pub(crate) fn read_json(
    storage: &Storage,
    address: &Address,
) -> Result<Option<serde_json::Value>, ConvertError> {
    let Some(meta) = storage.stat(address).map_err(|e| storage_err(address, e))? else {
        return Ok(None);
    };
    if meta.is_dir {
        return Err(bad_state(address, "a folder, not a file"));
    }
    let bytes = storage
        .read_all(address)
        .map_err(|e| storage_err(address, e))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| bad_state(address, e))
}

/// The environment variable of a test hook: when set to a number of
/// milliseconds, the write of a manifest sleeps that long with the
/// manifest's bytes in its temporary file, before committing it, so
/// that a test can kill the process in the middle of the manifest's write.
pub const PAUSE_BEFORE_MANIFEST: &str = "GRIST_CONVERT_PAUSE_BEFORE_MANIFEST";

/// Writes `value` as JSON at `address`, atomically; `pause` applies the
/// [`PAUSE_BEFORE_MANIFEST`] test hook.
pub(crate) fn write_json(
    storage: &Storage,
    address: &Address,
    value: &impl Serialize,
    pause: bool,
) -> Result<(), ConvertError> {
    let err = |source: grist_tensor::BoxError| ConvertError::Write {
        file: address.name().clone(),
        source,
    };
    let mut text = serde_json::to_vec_pretty(value)
        .map_err(|source| err(Box::new(TensorError::SpecJson { source })))?;
    text.push(b'\n');
    let mut file = storage
        .create(address)
        .map_err(|e| storage_err(address, e))?;
    file.write_all(&text)
        .and_then(|()| file.flush())
        .map_err(|source| {
            err(Box::new(TensorError::Io {
                at: Box::new(Location::file(address.name().clone())),
                source,
            }))
        })?;
    if pause {
        let ms = std::env::var(PAUSE_BEFORE_MANIFEST)
            .ok()
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(ms) = ms {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }
    file.commit().map_err(|e| storage_err(address, e))
}

/// Makes `out` the folder of the conversion `identity`: nothing to do when
/// its `convert.json` says so already; refused (unless `force`) when it
/// holds another conversion's outputs, or outputs of no known conversion;
/// with `force`, those are removed first. Then `convert.json` is written.
pub(crate) fn claim(
    storage: &Storage,
    out: &Address,
    identity: &serde_json::Value,
    force: bool,
) -> Result<(), ConvertError> {
    let address = out.join(CONVERT_FILE);
    // An unreadable convert.json is no conversion of ours.
    let held = match read_json(storage, &address) {
        Ok(held) => held,
        Err(ConvertError::BadState { .. }) => Some(serde_json::Value::Null),
        Err(e) => return Err(e),
    };
    match held {
        Some(held) if &held == identity => return Ok(()),
        Some(_) if !force => {
            return Err(ConvertError::DifferentConversion {
                file: address.name().clone(),
            });
        }
        _ => {}
    }
    let outputs: Vec<Address> = storage
        .list(out)
        .map_err(|e| storage_err(out, e))?
        .into_iter()
        .map(|e| e.address)
        .filter(|a| a.file_name().is_some_and(is_output_name))
        .collect();
    if let (Some(first), false) = (outputs.first(), force) {
        // Another shard of this conversion, started at the same time, may
        // have claimed the folder since it was read above.
        if matches!(read_json(storage, &address), Ok(Some(held)) if &held == identity) {
            return Ok(());
        }
        return Err(ConvertError::DifferentConversion {
            file: first.name().clone(),
        });
    }
    // convert.json last: until then, a rerun still knows to refuse.
    for a in outputs.iter().filter(|a| a.name() != address.name()) {
        storage.remove(a).map_err(|e| storage_err(a, e))?;
    }
    if force {
        // Only when replacing: a fresh folder may be claimed by several
        // shards at once, each writing its temporary files.
        storage
            .remove_temporaries(out, &is_output_name)
            .map_err(|e| storage_err(out, e))?;
    }
    write_json(storage, &address, identity, false)
}

/// Checks that every shard of the conversion in `out` (a path or URL)
/// finished (`manifest-<i>-of-<n>.json`, each of the conversion that
/// `convert.json` describes, each part there with its size) and writes
/// their parts, in shard order, into `manifest.json`.
///
/// ```no_run
/// let manifest = grist::merge_shards(&grist::Storage::new(), "out/")?;
/// println!("{} records in {} files", manifest.records, manifest.parts.len());
/// # Ok::<(), grist::ConvertError>(())
/// ```
pub fn merge_shards(storage: &Storage, out: &str) -> Result<Manifest, ConvertError> {
    let out = Address::parse(out).map_err(|source| ConvertError::BadOutput {
        out: out.to_string(),
        source,
    })?;
    let convert_address = out.join(CONVERT_FILE);
    let Some(identity) = read_json(storage, &convert_address)? else {
        return Err(ConvertError::NoConversion {
            file: convert_address.name().clone(),
        });
    };
    let count = identity
        .get("shards")
        .and_then(serde_json::Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n >= 1)
        .ok_or_else(|| bad_state(&convert_address, "no shard count"))?;
    let mut parts = Vec::new();
    for index in 0..count {
        let shard = Shard { index, count };
        let address = out.join(&shard.manifest_name());
        let file: Arc<str> = address.name().clone();
        let manifest = match Manifest::read(storage, &address) {
            Err(ConvertError::NoConversion { .. }) => {
                return Err(ConvertError::MissingShard {
                    file,
                    shard: index,
                    count,
                });
            }
            other => other?,
        };
        if manifest.convert != identity || !manifest.complete {
            return Err(ConvertError::ShardMismatch { file });
        }
        check_parts(storage, &out, &manifest.parts)?;
        parts.extend(manifest.parts.into_iter().map(|mut p| {
            p.shard = Some(index);
            p
        }));
    }
    let manifest = Manifest::new(true, identity, Shard::WHOLE, parts);
    // The shards are done: what they left half-written goes.
    storage
        .remove_temporaries(&out, &is_output_name)
        .map_err(|e| storage_err(&out, e))?;
    write_json(storage, &out.join(MANIFEST_FILE), &manifest, true)?;
    Ok(manifest)
}

/// Fails naming the first of `parts` that is missing or of another size.
pub(crate) fn check_parts(
    storage: &Storage,
    out: &Address,
    parts: &[ManifestPart],
) -> Result<(), ConvertError> {
    match parts.iter().position(|p| !part_present(storage, out, p)) {
        Some(i) => Err(ConvertError::MissingPart {
            file: out.join(&parts[i].file).name().clone(),
        }),
        None => Ok(()),
    }
}

/// Whether `part` is in `out` with its size (a part is committed whole,
/// so being there under its name means being complete).
pub(crate) fn part_present(storage: &Storage, out: &Address, part: &ManifestPart) -> bool {
    storage
        .stat(&out.join(&part.file))
        .is_ok_and(|m| m.is_some_and(|m| !m.is_dir && m.size == part.bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for yes in [
            "part-00000",
            "part-00001.tfrecord.gz",
            "part-00003-00001.avro",
            "manifest.json",
            "manifest-1-of-3.json",
            "convert-journal-0-of-2.json",
            "spec.json",
            "convert.json",
        ] {
            assert!(is_output_name(yes), "{yes}");
        }
        for no in [
            "part-",
            "part-x",
            "part-1-",
            "part-1x",
            "prod19.spec.json",
            "data.avro",
        ] {
            assert!(!is_output_name(no), "{no}");
        }
        let shard = Shard { index: 3, count: 7 };
        assert_eq!(
            shard.part_name("part-00001.tfrecord"),
            "part-00003-00001.tfrecord"
        );
        assert!(shard.owns("part-00003-00001.tfrecord"));
        assert!(!shard.owns("part-00002-00001.tfrecord"));
        assert!(shard.owns("manifest-3-of-7.json"));
        assert!(!shard.owns("spec.json"));
        assert_eq!(Shard::WHOLE.part_name("part-00001"), "part-00001");
        assert_eq!(Shard::WHOLE.manifest_name(), MANIFEST_FILE);
    }
}
