//! The module's functions: spec inference, counting, conversion.

use pyo3::prelude::*;

use crate::common;

/// The spec of `paths` as JSON text (`grist.infer_spec` parses it).
#[pyfunction]
#[pyo3(signature = (paths, records = 100, format = None, reader_schema = None))]
pub(crate) fn infer_spec_json(
    py: Python<'_>,
    paths: Vec<String>,
    records: u64,
    format: Option<String>,
    reader_schema: Option<String>,
) -> PyResult<String> {
    Ok(py.detach(|| {
        let storage = common::storage();
        let (format, inputs) = common::expand(&storage, &paths, format.as_deref())?;
        let reader_schema = common::reader_schema(reader_schema.as_deref())?;
        common::infer(&format, &inputs, records, reader_schema.as_ref()).map(|spec| spec.to_json())
    })?)
}

/// Unmaps the files that `mmap=True` loaders keep mapped between loaders
/// (each once no batch from it is alive); returns how many were kept.
#[pyfunction]
pub(crate) fn release_maps() -> usize {
    let maps = crate::loader::maps();
    let kept = maps.len();
    maps.clear();
    kept
}

/// The number of records of `paths`.
#[pyfunction]
#[pyo3(signature = (paths, format = None))]
pub(crate) fn count(py: Python<'_>, paths: Vec<String>, format: Option<String>) -> PyResult<u64> {
    Ok(py.detach(|| {
        let storage = common::storage();
        let (format, inputs) = common::expand(&storage, &paths, format.as_deref())?;
        common::count(&format, &inputs).map(|counts| counts.iter().sum())
    })?)
}

/// What `grist.convert` takes besides its sources, target and spec.
#[derive(Debug, Default, FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct ConvertArgs {
    compression: Option<String>,
    codec: Option<String>,
    records_per_file: Option<u64>,
    files: Option<usize>,
    threads: Option<usize>,
    shard: Option<(usize, usize)>,
    lossy: bool,
    force: bool,
    verify: bool,
    reader_schema: Option<String>,
}

/// Converts `inputs` into `output` (a folder or URL) in the format `to`;
/// returns the report as JSON text.
#[pyfunction]
#[pyo3(signature = (inputs, output, to, spec_json, spec_path, args))]
pub(crate) fn convert(
    py: Python<'_>,
    inputs: Vec<String>,
    output: String,
    to: String,
    spec_json: Option<String>,
    spec_path: Option<String>,
    args: ConvertArgs,
) -> PyResult<String> {
    Ok(py.detach(|| -> crate::errors::Result<String> {
        use grist::tensor::{Input, Lossy, WriteOptions};
        let storage = common::storage();
        let spec = common::given_spec(&storage, spec_json.as_deref(), spec_path.as_deref())?;
        let format = common::format(&to)?;
        let mut options = WriteOptions::new().with_lossy(if args.lossy {
            Lossy::Allow
        } else {
            Lossy::Refuse
        });
        if let Some(c) = &args.compression {
            options = options.with_compression(c.clone());
        }
        if let Some(c) = &args.codec {
            options = options.with_codec(c.clone());
        }
        let mut target = grist::ConvertTarget::new(format.clone(), output)
            .with_options(options)
            .with_storage(storage.clone())
            .with_force(args.force);
        if let Some(n) = args.records_per_file {
            target = target.with_records_per_file(n);
        }
        if let Some(n) = args.files {
            target = target.with_files(n);
        }
        if let Some(n) = args.threads {
            target = target.with_threads(n);
        }
        if let Some((index, count)) = args.shard {
            target = target.with_shard(index, count);
        }
        if let Some(schema) = common::reader_schema(args.reader_schema.as_deref())? {
            target = target.with_reader_schema(schema);
        }
        let report = grist::convert(&inputs, spec.as_ref(), &target)?;
        if args.verify {
            for (address, _) in &report.files {
                let input = Input::new(&storage, address.clone());
                format.verify(&input).map_err(|f| {
                    let mut failure = crate::errors::Failure::from(f.error);
                    if let Some(at) = f.position {
                        failure = failure.at(at);
                    }
                    failure
                })?;
            }
        }
        let files: Vec<serde_json::Value> = report
            .files
            .iter()
            .map(|(address, written)| {
                serde_json::json!({
                    "path": address.to_string(),
                    "records": written.records,
                    "bytes": written.bytes,
                })
            })
            .collect();
        let notes: Vec<serde_json::Value> = report
            .notes
            .iter()
            .map(|n| {
                serde_json::json!({
                    "feature": n.feature, "skipped": n.skipped, "message": n.message,
                })
            })
            .collect();
        Ok(serde_json::json!({
            "records": report.records,
            "bytes": report.bytes,
            "files": files,
            "skipped_parts": report.skipped_parts,
            "skipped_records": report.skipped_records,
            "encoded_records": report.encoded_records,
            "up_to_date": report.up_to_date,
            "spec": report.spec.to_value(),
            "spec_path": report.spec_address.to_string(),
            "manifest_path": report.manifest_address.to_string(),
            "notes": notes,
        })
        .to_string())
    })?)
}

/// The inputs `paths` expand to, in dataset order, with their sizes.
#[pyfunction]
#[pyo3(signature = (paths, format = None, payload = None))]
pub(crate) fn list_files(
    py: Python<'_>,
    paths: Vec<String>,
    format: Option<String>,
    payload: Option<String>,
) -> PyResult<Vec<(String, u64)>> {
    Ok(py.detach(|| {
        let storage = common::storage();
        let (_, inputs) =
            common::expand_with(&storage, &paths, format.as_deref(), payload.as_deref())?;
        inputs
            .iter()
            .map(|i| Ok((i.name().to_string(), i.size()?)))
            .collect::<crate::errors::Result<Vec<_>>>()
    })?)
}

/// Write options from the Python arguments.
fn write_options(
    compression: Option<String>,
    codec: Option<String>,
    lossy: bool,
) -> grist::tensor::WriteOptions {
    use grist::tensor::{Lossy, WriteOptions};
    let mut options =
        WriteOptions::new().with_lossy(if lossy { Lossy::Allow } else { Lossy::Refuse });
    if let Some(c) = compression {
        options = options.with_compression(c);
    }
    if let Some(c) = codec {
        options = options.with_codec(c);
    }
    options
}

/// The name of output part `part` of `format` (as `convert` names them).
#[pyfunction]
#[pyo3(signature = (format, part, compression = None, codec = None))]
pub(crate) fn part_name(
    format: &str,
    part: usize,
    compression: Option<String>,
    codec: Option<String>,
) -> PyResult<String> {
    let format = common::format(format)?;
    Ok(format.part_name(part, &write_options(compression, codec, false)))
}

/// Writes `spec` in `format`'s own form as `spec.json` in `folder` (what
/// `convert` writes beside its parts); returns it as JSON text.
#[pyfunction]
#[pyo3(signature = (folder, format, spec_json, compression = None, codec = None, lossy = false))]
pub(crate) fn write_spec(
    py: Python<'_>,
    folder: String,
    format: &str,
    spec_json: &str,
    compression: Option<String>,
    codec: Option<String>,
    lossy: bool,
) -> PyResult<String> {
    let format = common::format(format)?;
    Ok(py.detach(|| -> crate::errors::Result<String> {
        use std::io::Write;
        let storage = common::storage();
        let spec = grist::tensor::SpecFile::from_json(spec_json)?;
        let spec = format.write_spec(&spec, &write_options(compression, codec, lossy))?;
        let name: std::sync::Arc<str> = folder.as_str().into();
        let storage_err = |e| grist::tensor::StorageError::new(name.clone(), e);
        let dir = grist::Address::parse(&folder).map_err(storage_err)?;
        let address = dir.join(grist::SPEC_FILE);
        let file_err = |e| grist::tensor::StorageError::new(address.name().clone(), e);
        storage.create_dir_all(&dir).map_err(storage_err)?;
        let mut text = serde_json::to_vec_pretty(&spec.to_value())
            .map_err(|e| crate::errors::Failure::argument(e.to_string()))?;
        text.push(b'\n');
        let mut file = storage.create(&address).map_err(file_err)?;
        file.write_all(&text)
            .and_then(|()| file.flush())
            .map_err(|e| {
                crate::errors::Failure::new(
                    grist::tensor::ErrorKind::Io,
                    format!("{}: {e}", address.name()),
                )
            })?;
        file.commit().map_err(file_err)?;
        Ok(spec.to_json())
    })?)
}
