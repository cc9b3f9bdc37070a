//! `grist.RecordReader`: records by number (map-style datasets), each
//! call one coalesced read of the records asked for.

use std::sync::{Arc, Mutex};

use grist::tensor::{
    ByNumber, Decoder, Format, Input, Limits, RandomAccess, ReadOptions, SpecFile,
};
use pyo3::prelude::*;

use crate::common;
use crate::errors::{Failure, Result};

/// Reads records by their number in the dataset (the Python class
/// `grist.RecordReader` wraps it).
#[pyclass(module = "grist._grist", name = "_RecordReader")]
pub(crate) struct PyRecordReader {
    inputs: Vec<Input>,
    by_number: Box<dyn ByNumber>,
    /// A decoder per call at a time: decoding needs `&mut`.
    decoder: Mutex<Box<dyn Decoder>>,
    /// The first global record number of each input, and the total last.
    starts: Vec<u64>,
    counts: Vec<u64>,
    spec: SpecFile,
    format: Arc<dyn Format>,
    arrow: bool,
    /// The process that opened the files (see `crate::loader::drop_here`).
    pid: u32,
}

impl Drop for PyRecordReader {
    fn drop(&mut self) {
        let by_number = std::mem::replace(&mut self.by_number, Box::new(Empty));
        crate::loader::drop_here(by_number, self.pid);
    }
}

/// What a dropped reader holds.
struct Empty;

impl ByNumber for Empty {
    fn counts(&self) -> Vec<u64> {
        Vec::new()
    }

    fn read(
        &self,
        _: &[(usize, u64)],
        _: bool,
    ) -> std::result::Result<grist::tensor::Gathered, grist::tensor::BoxError> {
        Ok(grist::tensor::Gathered::default())
    }
}

/// Where global record `i` is: (input, record within it).
fn locate(starts: &[u64], i: u64) -> Option<(usize, u64)> {
    let total = *starts.last()?;
    if i >= total {
        return None;
    }
    // The last input starting at or before `i` (empty inputs share their
    // start with the next one, which is the one holding `i`).
    let input = starts.partition_point(|&s| s <= i) - 1;
    Some((input, i - starts[input]))
}

impl PyRecordReader {
    fn open(
        paths: &[String],
        spec_json: Option<&str>,
        spec_path: Option<&str>,
        format: Option<&str>,
        payload: Option<&str>,
        arrow: bool,
    ) -> Result<Self> {
        let storage = common::storage();
        let (format, inputs) = common::expand_with(&storage, paths, format, payload)?;
        // Refuses, naming the file, what cannot be read by number (a
        // TFRecord file without its index, ...).
        format.random_access(&inputs, RandomAccess::Required, false)?;
        let spec = match common::given_spec(&storage, spec_json, spec_path)? {
            Some(spec) => spec,
            None => common::infer(&format, &inputs, 1000, None)?,
        };
        let decoder = format.decoder(&spec, Limits::default())?;
        let by_number = format.by_number(&inputs, &ReadOptions::default())?;
        let counts = by_number.counts();
        let mut starts = Vec::with_capacity(counts.len() + 1);
        let mut total = 0u64;
        for &n in &counts {
            starts.push(total);
            total += n;
        }
        starts.push(total);
        Ok(PyRecordReader {
            inputs,
            by_number,
            decoder: Mutex::new(decoder),
            starts,
            counts,
            spec,
            format,
            arrow,
            pid: std::process::id(),
        })
    }

    /// Records `indices` (global numbers) decoded into one batch, rows in
    /// the order given.
    fn read_batch(&self, indices: &[u64]) -> Result<grist::tensor::Batch> {
        let wants = indices
            .iter()
            .map(|&i| {
                locate(&self.starts, i).ok_or_else(|| {
                    Failure::argument(format!(
                        "record {i} out of range: the dataset has {} records",
                        self.starts.last().copied().unwrap_or(0)
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let gathered = self.by_number.read(&wants, false)?;
        let mut decoder = self.decoder.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = decoder.new_batch(indices.len());
        for record in &gathered.records {
            let file = self.inputs[record.input].name();
            decoder.decode_record(file, record, &mut out)?;
        }
        Ok(out.finish()?)
    }
}

#[pymethods]
impl PyRecordReader {
    #[new]
    #[pyo3(signature = (paths, spec_json, spec_path, format, output, payload = None))]
    fn new(
        py: Python<'_>,
        paths: Vec<String>,
        spec_json: Option<String>,
        spec_path: Option<String>,
        format: Option<String>,
        output: &str,
        payload: Option<String>,
    ) -> PyResult<Self> {
        let arrow = crate::loader::output_is_arrow(output)?;
        Ok(py.detach(|| {
            Self::open(
                &paths,
                spec_json.as_deref(),
                spec_path.as_deref(),
                format.as_deref(),
                payload.as_deref(),
                arrow,
            )
        })?)
    }

    /// Records `indices` as one batch.
    fn read(&self, py: Python<'_>, indices: Vec<u64>) -> PyResult<Py<PyAny>> {
        let batch = py.detach(|| self.read_batch(&indices))?;
        if self.arrow {
            let spec = self.spec.clone();
            let exported = py.detach(|| crate::arrow::export_batch(batch, &spec))?;
            return Ok(Py::new(py, exported)?.into_any());
        }
        Ok(crate::batch::to_dict(py, batch)?.into_any().unbind())
    }

    /// Records per input file.
    #[getter]
    fn counts(&self) -> Vec<u64> {
        self.counts.clone()
    }

    /// The input files (paths or URLs), in dataset order.
    #[getter]
    fn files(&self) -> Vec<String> {
        self.inputs.iter().map(|i| i.name().to_string()).collect()
    }

    fn __len__(&self) -> usize {
        self.starts.last().copied().unwrap_or(0) as usize
    }

    /// The format's name.
    #[getter]
    fn format(&self) -> &'static str {
        self.format.name()
    }

    /// The spec, as JSON text.
    #[getter]
    fn spec_json(&self) -> String {
        self.spec.to_json()
    }
}
