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
    let text = read_text(path).with_context(|| format!("spec file {}", path.display()))?;
    let spec =
        SpecFile::from_json(&text).with_context(|| format!("spec file {}", path.display()))?;
    Ok(LoadedSpec { spec })
}

/// Reads the Avro reader schema at `path` (a `.avsc` file: the schema's
/// JSON), for `--reader-schema`, and checks that it is a valid Avro
/// schema; errors name the file.
pub(crate) fn load_reader_schema(path: &Path) -> anyhow::Result<serde_json::Value> {
    let context = || format!("reader schema {}", path.display());
    let text = read_text(path).with_context(context)?;
    let json = serde_json::from_str(&text).with_context(context)?;
    grist::avro::ReaderSchema::from_value(&json).with_context(context)?;
    Ok(json)
}

/// The text of a small file (a spec) at a path or URL.
fn read_text(path: &Path) -> anyhow::Result<String> {
    let storage = crate::sources::storage()?;
    let address = grist::Address::parse(&path.to_string_lossy())?;
    let bytes = storage.read_all(&address)?;
    Ok(String::from_utf8(bytes.to_vec())?)
}

/// Builds `builder`'s loader; errors about the spec's features (a
/// feature the format cannot decode, a bad option the spec file may have
/// set) say which spec file they come from, errors about the inputs (no
/// such file, a file of no format the registry knows, mixed formats, a
/// bad read) stand as they are: they name their file already, and are not
/// the spec file's fault.
pub(crate) fn build_loader(
    builder: grist::LoaderBuilder,
    spec_path: &Path,
) -> anyhow::Result<grist::Loader> {
    use grist::LoadError as Error;
    use grist_tensor::ErrorKind;
    builder.build().map_err(|e| {
        let spec_s = match &e {
            // Nothing is read before the first batch: a format's error here
            // is its decoder refusing the specs, unless it says it is about
            // an input (an I/O error, or one placed in a file).
            Error::Format(f) => {
                f.kind() != ErrorKind::Io && f.location().is_none_or(|at| at.file.is_empty())
            }
            Error::BadOption { .. } | Error::Batch { .. } => true,
            _ => false,
        };
        let e = match e {
            Error::Sources(e) => crate::sources::hint(*e),
            e => anyhow::Error::from(e),
        };
        if spec_s {
            e.context(format!("spec file {}", spec_path.display()))
        } else {
            e
        }
    })
}
