//! What the entry points share: the storage, format names, specs.

use std::sync::Arc;

use grist::tensor::{Format, InferOptions, Input, ReadOptions, SpecFile};
use grist::{Address, Storage};

use crate::errors::{Failure, Result};

/// The storage every call reads and writes through: local files, and
/// object stores configured by the usual environment variables.
pub(crate) fn storage() -> Storage {
    Storage::new()
}

/// The format called `name` (`"tfrecord"` or `"TFRecord"`, ...).
pub(crate) fn format(name: &str) -> Result<Arc<dyn Format>> {
    Ok(grist::registry().get(name)?)
}

/// `paths` expanded (folders, globs, URLs), with their format (`format`
/// when given, else told by name and content).
pub(crate) fn expand(
    storage: &Storage,
    paths: &[String],
    format: Option<&str>,
) -> Result<(Arc<dyn Format>, Vec<Input>)> {
    expand_with(storage, paths, format, None)
}

/// [`expand`], the format configured with FFRecord's `payload` (the
/// payloads' kind: `example`, `ofrecord`, `raw`) when given.
pub(crate) fn expand_with(
    storage: &Storage,
    paths: &[String],
    format: Option<&str>,
    payload: Option<&str>,
) -> Result<(Arc<dyn Format>, Vec<Input>)> {
    // Only FFRecord has payloads of several kinds.
    let format = match (format, payload) {
        (None, Some(_)) => Some("ffrecord"),
        (f, _) => f,
    };
    let mut format = format.map(self::format).transpose()?;
    if let (Some(f), Some(payload)) = (&format, payload) {
        format = Some(f.configure("payload", payload)?);
    }
    Ok(grist::registry().expand(storage, paths, format)?)
}

/// The spec given as JSON text or as the path (or URL) of a spec file;
/// `None` when neither was given.
pub(crate) fn given_spec(
    storage: &Storage,
    json: Option<&str>,
    path: Option<&str>,
) -> Result<Option<SpecFile>> {
    if let Some(json) = json {
        return Ok(Some(SpecFile::from_json(json)?));
    }
    let Some(path) = path else {
        return Ok(None);
    };
    let name: Arc<str> = path.into();
    let address =
        Address::parse(path).map_err(|e| grist::tensor::StorageError::new(name.clone(), e))?;
    let bytes = storage
        .read_all(&address)
        .map_err(|e| grist::tensor::StorageError::new(name.clone(), e))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| Failure::argument(format!("{path}: a spec file that is not UTF-8: {e}")))?;
    SpecFile::from_json(text)
        .map(Some)
        .map_err(|e| Failure::argument(format!("{path}: {}", crate::errors::chain(&e))))
}

/// A reader schema given as JSON text (`reader_schema=`), parsed.
pub(crate) fn reader_schema(text: Option<&str>) -> Result<Option<serde_json::Value>> {
    text.map(|t| {
        serde_json::from_str(t)
            .map_err(|e| Failure::argument(format!("reader_schema: not JSON: {e}")))
    })
    .transpose()
}

/// The spec of `inputs` as `format` infers it (Avro: the writer schema,
/// or `reader_schema` when given; the others: sampling the first
/// `records` records).
pub(crate) fn infer(
    format: &Arc<dyn Format>,
    inputs: &[Input],
    records: u64,
    reader_schema: Option<&serde_json::Value>,
) -> Result<SpecFile> {
    let mut options = InferOptions::default().with_records(records);
    if let Some(schema) = reader_schema {
        options = options.with_reader_schema(schema.clone());
    }
    let inferred = format.infer_spec(inputs, &options)?;
    let spec = inferred.spec;
    if spec.features.is_empty()
        && spec.context_features.is_empty()
        && spec.sequence_features.is_empty()
    {
        return Err(Failure::argument(format!(
            "no feature of the {} sources could be inferred: a spec is needed",
            format.name()
        )));
    }
    Ok(spec)
}

/// The records of each of `inputs`.
pub(crate) fn count(format: &Arc<dyn Format>, inputs: &[Input]) -> Result<Vec<u64>> {
    let options = ReadOptions::default();
    inputs
        .iter()
        .map(|input| Ok(format.count(input, &options)?))
        .collect()
}
