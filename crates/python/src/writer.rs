//! `grist.Writer`: one file of a grist format from numpy batches or Arrow
//! data, committed atomically.

use std::sync::{Arc, Mutex};

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema, from_ffi};
use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::{RecordBatch, RecordBatchReader, StructArray};
use arrow_schema::Schema;
use grist::tensor::{
    Batch, Column, DType, DenseTensor, Encoder, FeatureSpec, Format, RaggedTensor, RecordBuf,
    RecordSink, Section, SparseTensor, SpecFile, StringValues, Values, WriteOptions,
};
use grist::{Address, Storage};
use numpy::{Element, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict, PyList, PyString, PyTuple};

use crate::common;
use crate::errors::{Failure, Result};

/// Writes one file (the Python class `grist.Writer` wraps it).
#[pyclass(module = "grist._grist", name = "_Writer")]
pub(crate) struct PyWriter {
    state: Mutex<State>,
    /// The process that created it: a forked child leaves the parent's
    /// file alone (see `crate::loader::drop_here`).
    pid: u32,
}

impl Drop for PyWriter {
    fn drop(&mut self) {
        let open = self
            .state
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .open
            .take();
        crate::loader::drop_here(open, self.pid);
    }
}

#[derive(Debug)]
struct State {
    format: Arc<dyn Format>,
    storage: Storage,
    address: Address,
    path: String,
    options: WriteOptions,
    /// The spec given, or the one taken from the first batch.
    spec: Option<SpecFile>,
    /// Created at the first batch (or at close, for an empty file).
    open: Option<Open>,
    done: bool,
}

#[derive(Debug)]
struct Open {
    encoder: Box<dyn Encoder>,
    sink: Box<dyn RecordSink>,
    records: RecordBuf,
}

impl State {
    /// The encoder and sink (creating them with `spec` when none was
    /// given).
    fn open(&mut self, spec: impl FnOnce() -> Result<SpecFile>) -> Result<&mut Open> {
        if self.done {
            return Err(Failure::argument(format!(
                "{}: the writer is closed",
                self.path
            )));
        }
        if self.open.is_none() {
            let spec = match &self.spec {
                Some(s) => s.clone(),
                None => spec()?,
            };
            let encoder = self.format.encoder(&spec, &self.options)?;
            let sink = self
                .format
                .create(&self.storage, &self.address, &spec, &self.options)?;
            self.spec = Some(spec);
            self.open = Some(Open {
                encoder,
                sink,
                records: RecordBuf::new(),
            });
        }
        Ok(self.open.as_mut().expect("opened above"))
    }

    fn write(&mut self, batch: &Batch) -> Result<()> {
        let open = self.open(no_spec)?;
        open.records.clear();
        open.encoder.encode(batch, &mut open.records)?;
        for record in open.records.iter() {
            open.sink.write(record)?;
        }
        Ok(())
    }
}

/// The spec of a writer given none that has not seen a batch yet.
fn no_spec() -> Result<SpecFile> {
    Err(Failure::argument(
        "no spec: give one, or write a batch first",
    ))
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[pymethods]
impl PyWriter {
    #[new]
    #[pyo3(signature = (path, format, spec_json, spec_path, compression, codec, lossy))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: String,
        format: &str,
        spec_json: Option<String>,
        spec_path: Option<String>,
        compression: Option<String>,
        codec: Option<String>,
        lossy: bool,
    ) -> PyResult<Self> {
        let format = common::format(format)?;
        let storage = common::storage();
        let spec =
            py.detach(|| common::given_spec(&storage, spec_json.as_deref(), spec_path.as_deref()))?;
        let address = Address::parse(&path)
            .map_err(|e| grist::tensor::StorageError::new(Arc::<str>::from(path.as_str()), e))
            .map_err(Failure::from)?;
        let mut options = WriteOptions::new().with_lossy(if lossy {
            grist::tensor::Lossy::Allow
        } else {
            grist::tensor::Lossy::Refuse
        });
        if let Some(c) = compression {
            options = options.with_compression(c);
        }
        if let Some(c) = codec {
            options = options.with_codec(c);
        }
        let mut state = State {
            format,
            storage,
            address,
            path,
            options,
            spec,
            open: None,
            done: false,
        };
        // With a spec, refuse what the format cannot hold now, before
        // anything is written.
        if state.spec.is_some() {
            py.detach(|| state.open(no_spec).map(|_| ()))?;
        }
        Ok(PyWriter {
            state: Mutex::new(state),
            pid: std::process::id(),
        })
    }

    /// Appends a batch given as a dict of numpy arrays (the loader's
    /// batch layout).
    fn write_numpy(&self, py: Python<'_>, batch: &Bound<'_, PyDict>) -> PyResult<()> {
        let spec = {
            let state = py.detach(|| lock(&self.state).spec.clone());
            match state {
                Some(s) => s,
                None => dense_spec_of(batch)?,
            }
        };
        let batch = from_numpy(py, batch, &spec)?;
        py.detach(|| {
            let mut state = lock(&self.state);
            state.open(|| Ok(spec))?;
            state.write(&batch)
        })?;
        Ok(())
    }

    /// Appends the rows of an Arrow object: anything with
    /// `__arrow_c_stream__` (a table, a reader, a polars frame) or
    /// `__arrow_c_array__` (a record batch).
    fn write_arrow(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        if data.hasattr("__arrow_c_stream__")? {
            let capsule = data.call_method0("__arrow_c_stream__")?;
            let capsule = capsule.cast::<PyCapsule>()?;
            let ptr = capsule
                .pointer_checked(Some(c"arrow_array_stream"))?
                .cast::<FFI_ArrowArrayStream>();
            // SAFETY: the capsule protocol guarantees that a capsule named
            // "arrow_array_stream" holds a valid FFI_ArrowArrayStream; the
            // reader moves it out and leaves a released stream behind, which
            // the capsule's destructor then leaves alone.
            let reader = unsafe { RecordBatchStreamReader::from_raw(ptr.as_ptr()) }
                .map_err(|e| Failure::from(grist::arrow::Error::from(e)))?;
            py.detach(|| -> Result<()> {
                let schema = reader.schema();
                for batch in reader {
                    let batch = batch.map_err(grist::arrow::Error::from)?;
                    self.write_record_batch(&schema, batch)?;
                }
                // An empty stream still says what the file holds.
                let mut state = lock(&self.state);
                state.open(|| Ok(grist::arrow::spec_from_schema(&schema)?))?;
                Ok(())
            })?;
            return Ok(());
        }
        if data.hasattr("__arrow_c_array__")? {
            let pair = data.call_method1("__arrow_c_array__", (py.None(),))?;
            let pair = pair.cast::<PyTuple>()?;
            let schema_capsule = pair.get_item(0)?;
            let schema_capsule = schema_capsule.cast::<PyCapsule>()?;
            let array_capsule = pair.get_item(1)?;
            let array_capsule = array_capsule.cast::<PyCapsule>()?;
            let schema_ptr = schema_capsule
                .pointer_checked(Some(c"arrow_schema"))?
                .cast::<FFI_ArrowSchema>();
            let array_ptr = array_capsule
                .pointer_checked(Some(c"arrow_array"))?
                .cast::<FFI_ArrowArray>();
            // SAFETY: the capsules are named as the protocol says, so they
            // hold a valid FFI_ArrowSchema and FFI_ArrowArray. The schema is
            // only borrowed (its capsule releases it); the array is moved
            // out (a released array is left, which its capsule's destructor
            // leaves alone) and released when the imported data drops.
            let batch = unsafe {
                let ffi_schema: &FFI_ArrowSchema = schema_ptr.as_ref();
                let schema = Schema::try_from(ffi_schema).map_err(grist::arrow::Error::from);
                let array = FFI_ArrowArray::from_raw(array_ptr.as_ptr());
                from_ffi(array, ffi_schema)
                    .map_err(grist::arrow::Error::from)
                    .and_then(|data| Ok((schema?, data)))
            };
            let (schema, data) = batch.map_err(Failure::from)?;
            let columns = StructArray::from(data);
            let schema = Arc::new(schema);
            let batch = RecordBatch::try_new(schema.clone(), columns.columns().to_vec())
                .map_err(|e| Failure::from(grist::arrow::Error::from(e)))?;
            py.detach(|| self.write_record_batch(&schema, batch))?;
            return Ok(());
        }
        Err(Failure::argument(format!(
            "cannot write a {}: a dict of numpy arrays, or an Arrow object (__arrow_c_stream__ or \
             __arrow_c_array__)",
            data.get_type().name()?
        ))
        .into())
    }

    /// Commits the file; returns (records, the spec that reads it back
    /// as JSON text).
    fn close(&self, py: Python<'_>) -> PyResult<(u64, String)> {
        Ok(py.detach(|| -> Result<(u64, String)> {
            let mut state = lock(&self.state);
            if state.done {
                return Err(Failure::argument(format!(
                    "{}: the writer is closed",
                    state.path
                )));
            }
            state.open(no_spec)?;
            let open = state.open.take().expect("opened above");
            state.done = true;
            let spec = open.encoder.spec().to_json();
            let written = open.sink.finish()?;
            Ok((written.records, spec))
        })?)
    }

    /// Drops the file being written: nothing is left under its name.
    fn abort(&self, py: Python<'_>) {
        py.detach(|| {
            let mut state = lock(&self.state);
            state.done = true;
            drop(state.open.take());
        });
    }

    /// The records written so far.
    #[getter]
    fn records(&self, py: Python<'_>) -> u64 {
        py.detach(|| {
            lock(&self.state)
                .open
                .as_ref()
                .map_or(0, |o| o.sink.records())
        })
    }

    /// The spec (JSON text) that reads the file back, once known (given,
    /// or taken from the first batch).
    #[getter]
    fn spec_json(&self, py: Python<'_>) -> Option<String> {
        py.detach(|| {
            let state = lock(&self.state);
            match (&state.open, &state.spec) {
                (Some(open), _) => Some(open.encoder.spec().to_json()),
                (None, Some(spec)) => state
                    .format
                    .write_spec(spec, &state.options)
                    .ok()
                    .map(|s| s.to_json()),
                (None, None) => None,
            }
        })
    }

    /// The path or URL written.
    #[getter]
    fn path(&self, py: Python<'_>) -> String {
        py.detach(|| lock(&self.state).path.clone())
    }
}

impl PyWriter {
    fn write_record_batch(&self, schema: &Schema, batch: RecordBatch) -> Result<()> {
        let mut state = lock(&self.state);
        state.open(|| Ok(grist::arrow::spec_from_schema(schema)?))?;
        let spec = state.spec.clone().expect("opened");
        let (batch, _) = grist::arrow::from_record_batch(batch, Some(&spec))?;
        state.write(&batch)
    }
}

/// The spec of a batch of dense arrays (the dict's order, each array's
/// dtype and its shape past the batch dimension).
fn dense_spec_of(batch: &Bound<'_, PyDict>) -> Result<SpecFile> {
    let mut features = Vec::new();
    for (key, value) in batch.iter() {
        let name: String = key.extract()?;
        if value.is_instance_of::<PyTuple>() {
            return Err(Failure::argument(format!(
                "column {name:?}: a sparse or ragged column needs a spec (spec=...)"
            )));
        }
        let array = numpy_module(batch.py())?.call_method1("asarray", (&value,))?;
        let kind: String = array.getattr("dtype")?.getattr("kind")?.extract()?;
        let size: usize = array.getattr("dtype")?.getattr("itemsize")?.extract()?;
        let dtype = match (kind.as_str(), size) {
            ("b", _) => DType::Bool,
            ("i" | "u", 1 | 2) | ("i", 4) => DType::Int32,
            ("i", 8) | ("u", 4) => DType::Int64,
            ("f", 2 | 4) => DType::Float32,
            ("f", 8) => DType::Float64,
            ("O" | "S" | "U", _) => DType::String,
            _ => {
                return Err(Failure::argument(format!(
                    "column {name:?}: numpy dtype {} has no grist dtype",
                    array.getattr("dtype")?.str()?
                )));
            }
        };
        let shape: Vec<i64> = array.getattr("shape")?.extract()?;
        if shape.is_empty() {
            return Err(Failure::argument(format!(
                "column {name:?}: a scalar, not a batch (the first dimension is the batch)"
            )));
        }
        features.push(FeatureSpec::dense(name, dtype, shape[1..].to_vec()));
    }
    Ok(SpecFile {
        features,
        ..SpecFile::default()
    })
}

fn numpy_module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("numpy")
}

/// A numpy batch (the loader's layout) as a grist batch of `spec`'s
/// features.
fn from_numpy(py: Python<'_>, batch: &Bound<'_, PyDict>, spec: &SpecFile) -> Result<Batch> {
    if !spec.context_features.is_empty() || !spec.sequence_features.is_empty() {
        return Err(Failure::argument(
            "tf.SequenceExample batches are written from Arrow (a record batch with the \
             loader's arrow output's schema), not from numpy dicts",
        ));
    }
    let mut rows: Option<usize> = None;
    let mut columns = Vec::with_capacity(spec.features.len());
    for feature in &spec.features {
        let name = feature.name();
        let value = batch.get_item(name)?.ok_or_else(|| {
            Failure::argument(format!("column {name:?} of the spec is not in the batch"))
        })?;
        let (tensor, n) = column(py, feature, &value)?;
        match rows {
            None => rows = Some(n),
            Some(r) if r != n => {
                return Err(Failure::argument(format!(
                    "column {name:?}: {n} rows, the columns before it {r}"
                )));
            }
            _ => {}
        }
        columns.push(Column {
            name: name.to_string(),
            section: Section::Features,
            tensor,
        });
    }
    if let Some(extra) = batch
        .keys()
        .iter()
        .filter_map(|k| k.extract::<String>().ok())
        .find(|k| !spec.features.iter().any(|f| f.name() == k))
    {
        return Err(Failure::argument(format!(
            "column {extra:?} is not in the spec"
        )));
    }
    Ok(Batch::new(rows.unwrap_or(0), columns))
}

/// One column: the tensor and its number of rows.
fn column(
    py: Python<'_>,
    feature: &FeatureSpec,
    value: &Bound<'_, PyAny>,
) -> Result<(grist::tensor::Tensor, usize)> {
    use grist::tensor::Tensor;
    let name = feature.name();
    let dtype = feature.dtype();
    let parts = |n: usize| -> Result<Vec<Bound<'_, PyAny>>> {
        let t = value.cast::<PyTuple>().map_err(|_| {
            Failure::argument(format!(
                "column {name:?} ({}): a tuple of {n} arrays",
                feature.kind()
            ))
        })?;
        if t.len() != n {
            return Err(Failure::argument(format!(
                "column {name:?} ({}): a tuple of {n} arrays, not {}",
                feature.kind(),
                t.len()
            )));
        }
        Ok(t.iter().collect())
    };
    match feature {
        FeatureSpec::Sparse(_) | FeatureSpec::Varlen(_) => {
            let p = parts(3)?;
            let (indices, ishape) = typed::<i64>(py, &p[0], name)?;
            let (values, _) = flat(py, &p[1], dtype, name)?;
            let (dense_shape, _) = typed::<i64>(py, &p[2], name)?;
            if ishape.len() != 2 || ishape[1] != dense_shape.len() || ishape[0] != values.len() {
                return Err(Failure::argument(format!(
                    "column {name:?}: indices of shape {ishape:?} for {} values of rank {}",
                    values.len(),
                    dense_shape.len()
                )));
            }
            let rows = dense_shape.first().copied().unwrap_or(0).max(0) as usize;
            Ok((
                Tensor::Sparse(SparseTensor {
                    indices,
                    values,
                    dense_shape,
                }),
                rows,
            ))
        }
        FeatureSpec::Ragged(_) => {
            let p = parts(2)?;
            let (values, shape) = flat(py, &p[0], dtype, name)?;
            let splits: Vec<Bound<'_, PyAny>> = match p[1].cast::<PyList>() {
                Ok(list) => list.iter().collect(),
                Err(_) => vec![p[1].clone()],
            };
            let nested = splits
                .iter()
                .map(|s| typed::<i64>(py, s, name).map(|(v, _)| v))
                .collect::<Result<Vec<_>>>()?;
            let rows = nested.first().map_or(0, |s| s.len().saturating_sub(1));
            Ok((
                Tensor::Ragged(RaggedTensor {
                    nested_row_splits: nested,
                    row_splits_dtype: DType::Int64,
                    flat_values: DenseTensor { shape, values },
                }),
                rows,
            ))
        }
        _ => {
            let (values, shape) = flat(py, value, dtype, name)?;
            let rows = shape.first().copied().ok_or_else(|| {
                Failure::argument(format!("column {name:?}: a scalar, not a batch"))
            })?;
            Ok((Tensor::Dense(DenseTensor { shape, values }), rows))
        }
    }
}

/// `value` as a C-contiguous array of `T` (converted by numpy when it is
/// another type): its values, copied, and its shape.
fn typed<T: Element + Copy>(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    name: &str,
) -> Result<(Vec<T>, Vec<usize>)> {
    let dtype = numpy::dtype::<T>(py);
    let array = numpy_module(py)?
        .call_method1("ascontiguousarray", (value, dtype))
        .map_err(|e| Failure::argument(format!("column {name:?}: {e}")))?;
    let array: PyReadonlyArrayDyn<'_, T> = array
        .extract()
        .map_err(|e| Failure::argument(format!("column {name:?}: {e}")))?;
    let shape = array.shape().to_vec();
    let values = array
        .as_slice()
        .map_err(|e| Failure::argument(format!("column {name:?}: {e}")))?
        .to_vec();
    Ok((values, shape))
}

/// `value`'s values as `dtype` and its shape.
fn flat(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    dtype: DType,
    name: &str,
) -> Result<(Values, Vec<usize>)> {
    Ok(match dtype {
        DType::Bool => typed::<bool>(py, value, name).map(|(v, s)| (Values::Bool(v), s))?,
        DType::Int32 => typed::<i32>(py, value, name).map(|(v, s)| (Values::Int32(v), s))?,
        DType::Int64 => typed::<i64>(py, value, name).map(|(v, s)| (Values::Int64(v), s))?,
        DType::Float32 => typed::<f32>(py, value, name).map(|(v, s)| (Values::Float32(v), s))?,
        DType::Float64 => typed::<f64>(py, value, name).map(|(v, s)| (Values::Float64(v), s))?,
        DType::String => {
            let array = numpy_module(py)?.call_method1("asarray", (value,))?;
            let shape: Vec<usize> = array.getattr("shape")?.extract()?;
            let items = array.call_method0("ravel")?.call_method0("tolist")?;
            let items = items.cast::<PyList>().map_err(PyErr::from)?;
            let mut strings = StringValues::with_capacity(items.len(), 0);
            for item in items.iter() {
                if let Ok(b) = item.cast::<PyBytes>() {
                    strings.push(b.as_bytes());
                } else if item.is_instance_of::<PyString>() {
                    strings.push(item.extract::<String>()?.as_bytes());
                } else {
                    return Err(Failure::argument(format!(
                        "column {name:?}: a {} where bytes or str were expected",
                        item.get_type().name()?
                    )));
                }
            }
            (Values::String(strings), shape)
        }
        _ => {
            return Err(Failure::argument(format!(
                "column {name:?}: dtype {dtype} cannot be written from numpy"
            )));
        }
    })
}
