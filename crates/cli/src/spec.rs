//! Spec files: the features to decode, as `cat --spec` and `bench` read
//! them.

use std::path::Path;

use anyhow::Context as _;
use grist_tensor::SpecFile;

/// A spec file and where it came from.
pub(crate) struct LoadedSpec {
    /// The parsed spec file.
    pub(crate) spec: SpecFile,
}

/// Reads the spec file at `path` (a manifest `parses[]` entry, an object
/// with `features` or `context_features`/`sequence_features`, or a bare
/// features array); errors name the file.
pub(crate) fn load_spec(path: &Path) -> anyhow::Result<LoadedSpec> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("spec file {}", path.display()))?;
    let spec =
        SpecFile::from_json(&text).with_context(|| format!("spec file {}", path.display()))?;
    Ok(LoadedSpec { spec })
}
