//! `grist.Loader`: the loader's batches as numpy arrays or Arrow record
//! batches, the GIL released while it reads and decodes.

use std::sync::{Arc, Mutex};

use grist::tensor::{Format, RandomAccess, SpecFile};
use grist::{Epochs, Loader, LoaderState, ShardMode, Threads};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::common;
use crate::errors::{Failure, Result};

/// Iterates a dataset's batches (the Python class `grist.Loader` wraps
/// it and documents the arguments).
#[pyclass(module = "grist._grist", name = "_Loader")]
pub(crate) struct PyLoader {
    /// `None` once closed. The lock is taken with the GIL released, so
    /// that two Python threads using one loader wait for each other
    /// without holding the GIL.
    loader: Mutex<Option<Loader>>,
    spec: SpecFile,
    format: Arc<dyn Format>,
    arrow: bool,
    /// The process that started the loader's threads (see `Drop`).
    pid: u32,
}

/// The loader's arguments, as `grist.Loader` hands them over.
#[derive(Debug, Default)]
pub(crate) struct Args {
    pub(crate) paths: Vec<String>,
    pub(crate) spec_json: Option<String>,
    pub(crate) spec_path: Option<String>,
    pub(crate) format: Option<String>,
    pub(crate) payload: Option<String>,
    pub(crate) batch_size: Option<usize>,
    pub(crate) shuffle: bool,
    pub(crate) seed: u64,
    pub(crate) shuffle_buffer: Option<usize>,
    pub(crate) threads: Option<usize>,
    pub(crate) shard: Option<(usize, usize)>,
    pub(crate) shard_mode: String,
    pub(crate) epochs: Option<u64>,
    pub(crate) drop_remainder: bool,
    pub(crate) reader_schema: Option<String>,
    pub(crate) random_access: String,
    pub(crate) equal_batches: bool,
}

/// Builds the loader (and infers the spec when none was given): files are
/// listed, and sampled to infer, so this runs without the GIL.
pub(crate) fn build(args: Args) -> Result<(Loader, SpecFile, Arc<dyn Format>)> {
    let storage = common::storage();
    let shard_mode = match args.shard_mode.as_str() {
        "auto" => ShardMode::Auto,
        "files" => ShardMode::Files,
        "records" => ShardMode::Records,
        other => {
            return Err(Failure::argument(format!(
                "shard_mode {other:?}: one of \"auto\", \"files\", \"records\""
            )));
        }
    };
    let random_access = match args.random_access.as_str() {
        "auto" => RandomAccess::Auto,
        "off" => RandomAccess::Off,
        "required" => RandomAccess::Required,
        other => {
            return Err(Failure::argument(format!(
                "random_access {other:?}: one of \"auto\", \"off\", \"required\""
            )));
        }
    };
    let (format, inputs) = common::expand_with(
        &storage,
        &args.paths,
        args.format.as_deref(),
        args.payload.as_deref(),
    )?;
    let mut spec = match common::given_spec(
        &storage,
        args.spec_json.as_deref(),
        args.spec_path.as_deref(),
    )? {
        Some(spec) => spec,
        None => common::infer(&format, &inputs, 1000)?,
    };
    if let Some(schema) = &args.reader_schema {
        let schema: serde_json::Value = serde_json::from_str(schema)
            .map_err(|e| Failure::argument(format!("reader_schema: not JSON: {e}")))?;
        spec.reader_schema = Some(schema);
    }
    let mut builder = grist::loader()
        .with_paths(&args.paths)
        .with_storage(storage)
        .with_format(format.clone())
        .with_spec_file(spec.clone())
        .with_shuffle(args.shuffle)
        .with_seed(args.seed)
        .with_shard_mode(shard_mode)
        .with_random_access(random_access)
        .with_drop_remainder(args.drop_remainder)
        .with_equal_batches(args.equal_batches)
        .with_epochs(match args.epochs {
            Some(n) => Epochs::Count(n),
            None => Epochs::Endless,
        })
        .with_threads(match args.threads {
            Some(n) => Threads::Fixed(n),
            None => Threads::Autotune,
        });
    if let Some(n) = args.batch_size {
        builder = builder.with_batch_size(n);
    }
    if let Some(n) = args.shuffle_buffer {
        builder = builder.with_shuffle_buffer(n);
    }
    if let Some((rank, world)) = args.shard {
        builder = builder.with_shard(rank, world);
    }
    let loader = builder.build()?;
    Ok((loader, spec, format))
}

/// Whether `output` asks for Arrow record batches (rather than numpy).
pub(crate) fn output_is_arrow(output: &str) -> Result<bool> {
    match output {
        "numpy" => Ok(false),
        "arrow" => Ok(true),
        other => Err(Failure::argument(format!(
            "output {other:?}: \"numpy\" or \"arrow\""
        ))),
    }
}

impl PyLoader {
    /// Runs `f` on the open loader without the GIL.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Loader) -> Result<T> + Send,
    ) -> Result<T> {
        py.detach(|| {
            let mut guard = self.loader.lock().unwrap_or_else(|e| e.into_inner());
            match guard.as_mut() {
                Some(loader) => f(loader),
                None => Err(Failure::argument("the loader is closed")),
            }
        })
    }
}

/// Drops `value`, made by process `pid`, or forgets it in a forked child
/// (a torch DataLoader worker): there its threads do not exist, and
/// joining them would abort the process. The child leaks the parent's
/// buffers, which fork copied anyway.
pub(crate) fn drop_here<T>(value: T, pid: u32) {
    if std::process::id() == pid {
        drop(value);
    } else {
        std::mem::forget(value);
    }
}

impl Drop for PyLoader {
    fn drop(&mut self) {
        let loader = self
            .loader
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop_here(loader, self.pid);
    }
}

#[pymethods]
impl PyLoader {
    #[new]
    #[pyo3(signature = (paths, spec_json, spec_path, format, batch_size, shuffle, seed,
        shuffle_buffer, threads, shard, shard_mode, epochs, drop_remainder, reader_schema,
        random_access, output, payload = None, equal_batches = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        paths: Vec<String>,
        spec_json: Option<String>,
        spec_path: Option<String>,
        format: Option<String>,
        batch_size: Option<usize>,
        shuffle: bool,
        seed: u64,
        shuffle_buffer: Option<usize>,
        threads: Option<usize>,
        shard: Option<(usize, usize)>,
        shard_mode: String,
        epochs: Option<u64>,
        drop_remainder: bool,
        reader_schema: Option<String>,
        random_access: String,
        output: &str,
        payload: Option<String>,
        equal_batches: bool,
    ) -> PyResult<Self> {
        let arrow = output_is_arrow(output)?;
        let args = Args {
            paths,
            spec_json,
            spec_path,
            format,
            payload,
            batch_size,
            shuffle,
            seed,
            shuffle_buffer,
            threads,
            shard,
            shard_mode,
            epochs,
            drop_remainder,
            reader_schema,
            random_access,
            equal_batches,
        };
        let (loader, spec, format) = py.detach(|| build(args))?;
        Ok(PyLoader {
            loader: Mutex::new(Some(loader)),
            spec,
            format,
            arrow,
            pid: std::process::id(),
        })
    }

    /// The next batch (a dict of arrays, or an Arrow batch exporter), or
    /// `None` at the end.
    fn next_batch(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let batch = self.with(py, |loader| {
            loader.next_batch().transpose().map_err(Into::into)
        })?;
        let Some(batch) = batch else {
            return Ok(None);
        };
        if self.arrow {
            let spec = self.spec.clone();
            let exported = py.detach(|| crate::arrow::export_batch(batch, &spec))?;
            return Ok(Some(Py::new(py, exported)?.into_any()));
        }
        Ok(Some(crate::batch::to_dict(py, batch)?.into_any().unbind()))
    }

    /// The loader's state as JSON text.
    fn state_json(&self, py: Python<'_>) -> PyResult<String> {
        let state = self.with(py, |loader| Ok(loader.state()))?;
        serde_json::to_string(&state)
            .map_err(|e| Failure::argument(format!("the loader state as JSON: {e}")).into())
    }

    /// Restores a state saved by `state_json`.
    fn restore_json(&self, py: Python<'_>, state: &str) -> PyResult<()> {
        let state: LoaderState = serde_json::from_str(state)
            .map_err(|e| Failure::argument(format!("not a grist loader state: {e}")))?;
        Ok(self.with(py, move |loader| Ok(loader.restore(&state)?))?)
    }

    /// The format's name (`"TFRecord"`, ...).
    #[getter]
    fn format(&self) -> &'static str {
        self.format.name()
    }

    /// The resolved spec, as JSON text.
    #[getter]
    fn spec_json(&self) -> String {
        self.spec.to_json()
    }

    /// The epoch the next batch belongs to.
    #[getter]
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.with(py, |loader| Ok(loader.epoch()))?)
    }

    /// The batch size.
    #[getter]
    fn batch_size(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.with(py, |loader| Ok(loader.batch_size()))?)
    }

    /// Whether records are read by number.
    #[getter]
    fn random_access(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.with(py, |loader| Ok(loader.is_random_access()))?)
    }

    /// The loader's measurements.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(py, |loader| Ok(loader.stats()))?;
        let d = PyDict::new(py);
        d.set_item("records", s.records)?;
        d.set_item("batches", s.batches)?;
        d.set_item("bytes", s.bytes)?;
        d.set_item("elapsed_s", s.elapsed.as_secs_f64())?;
        d.set_item("io_wait_s", s.io_wait.as_secs_f64())?;
        d.set_item("decode_s", s.decode.as_secs_f64())?;
        d.set_item("read_s", s.read.as_secs_f64())?;
        d.set_item("records_per_s", s.records_per_s())?;
        d.set_item("bytes_per_s", s.bytes_per_s())?;
        d.set_item("mean_threads", s.mean_threads())?;
        d.set_item("last_threads", s.last_threads)?;
        d.set_item("threads_used", s.threads_used.clone())?;
        d.set_item("prefetch_peak_bytes", s.prefetch_peak_bytes)?;
        d.set_item("prefetch_budget", s.prefetch_budget)?;
        Ok(d)
    }

    /// Stops the loader's threads; later calls fail.
    fn close(&self, py: Python<'_>) {
        // Joining the threads may wait for a batch being decoded.
        py.detach(|| {
            let loader = self.loader.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop_here(loader, self.pid);
        });
    }
}
