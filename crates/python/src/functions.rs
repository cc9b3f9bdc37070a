//! The module's functions: spec inference, counting, conversion.

use pyo3::prelude::*;

use crate::common;

/// The spec of `paths` as JSON text (`grist.infer_spec` parses it).
#[pyfunction]
#[pyo3(signature = (paths, records = 100, format = None))]
pub(crate) fn infer_spec_json(
    py: Python<'_>,
    paths: Vec<String>,
    records: u64,
    format: Option<String>,
) -> PyResult<String> {
    Ok(py.detach(|| {
        let storage = common::storage();
        let (format, inputs) = common::expand(&storage, &paths, format.as_deref())?;
        common::infer(&format, &inputs, records).map(|spec| spec.to_json())
    })?)
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
