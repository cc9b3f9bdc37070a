//! `grist.Loader`: the loader's batches as numpy arrays or Arrow record
//! batches, the GIL released while it reads and decodes; with
//! `decode_ahead`, the next batch decoded while Python works on the last.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use grist::tensor::{Batch, Format, Maps, RandomAccess, SpecFile};
use grist::{Access, Epochs, Loader, LoaderState, ShardMode, Stats, Threads};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::common;
use crate::errors::{Failure, Result};

/// Iterates a dataset's batches (the Python class `grist.Loader` wraps
/// it and documents the arguments).
#[pyclass(module = "grist._grist", name = "_Loader")]
pub(crate) struct PyLoader {
    /// `None` once closed. Shared with the thread that decodes ahead,
    /// which holds the lock while it makes a batch. Every lock is taken
    /// with the GIL released, so that two Python threads using one loader
    /// wait for each other without holding the GIL.
    loader: Arc<Mutex<Option<Loader>>>,
    /// The thread decoding the next batch, once iteration started.
    ahead: Mutex<Option<Ahead>>,
    /// The loader as it was after the last batch handed to Python: its
    /// state, epoch and measurements (the loader itself is a batch
    /// further). `None` before the first batch and after a restore.
    delivered: Mutex<Option<Snapshot>>,
    /// Set by `close` (the snapshot outlives the loader).
    closed: AtomicBool,
    spec: SpecFile,
    format: Arc<dyn Format>,
    arrow: bool,
    /// Whether a thread decodes the next batch while Python works on the
    /// last (`decode_ahead=True`).
    decode_ahead: bool,
    /// The process that built the loader and starts its threads (see
    /// `Drop`).
    pid: u32,
}

/// The loader's position and measurements after a batch.
struct Snapshot {
    state: LoaderState,
    epoch: u64,
    stats: Stats,
}

/// What the thread ahead hands over: a batch (or the end, or an error)
/// and the loader just after it.
struct Made {
    batch: Option<Result<Ready>>,
    /// `None` after a panic.
    snapshot: Option<Snapshot>,
}

/// A batch ready for Python: numpy's arrays are made with the GIL, an
/// Arrow export without it (in the thread ahead).
enum Ready {
    Numpy(Batch),
    Arrow(crate::arrow::ArrowBatch),
}

/// The thread that makes the next batch while Python works on the last
/// (`decode_ahead=True`: for loops that wait per batch, on a GPU step say;
/// a loop that only computes gains nothing on two cores, and the batches
/// handed from thread to thread cost it CPU).
/// The channel holds nothing (`sync_channel(0)`): the thread waits with
/// one batch made, so exactly one batch is decoded ahead.
struct Ahead {
    batches: Receiver<Made>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Ahead {
    fn start(loader: Arc<Mutex<Option<Loader>>>, arrow: Option<SpecFile>) -> Result<Ahead> {
        let (tx, rx) = sync_channel(0);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("grist-ahead".into())
            .spawn(move || make_batches(&loader, arrow.as_ref(), &stopped, &tx))
            .map_err(|e| Failure::argument(format!("starting the loader's thread: {e}")))?;
        Ok(Ahead {
            batches: rx,
            stop,
            thread,
        })
    }

    /// Stops the thread (it drops a batch it made and nobody took) and
    /// waits for it: the loader is then free to restore or close.
    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.batches);
        // A panic in the thread was reported as a failed batch already.
        let _ = self.thread.join();
    }
}

/// The thread ahead: batches until the end, an error, or `stop`.
fn make_batches(
    loader: &Mutex<Option<Loader>>,
    arrow: Option<&SpecFile>,
    stop: &AtomicBool,
    tx: &SyncSender<Made>,
) {
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let made = {
            let mut guard = lock(loader);
            let Some(loader) = guard.as_mut() else {
                return;
            };
            // A panic (a bug) ends the iteration with an error, not
            // silently: the thread's end alone would read as the end.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let batch = next_ready(loader, arrow);
                Made {
                    batch,
                    snapshot: Some(Snapshot::of(loader)),
                }
            }))
            .unwrap_or_else(|_| Made {
                batch: Some(Err(Failure::new(
                    grist::tensor::ErrorKind::Unsupported,
                    "the loader panicked making a batch (a bug: please report it)",
                ))),
                snapshot: None,
            })
        };
        let last = !matches!(made.batch, Some(Ok(_)));
        if tx.send(made).is_err() || last {
            return;
        }
    }
}

/// The loader's next batch, exported to Arrow when `arrow` gives the spec.
fn next_ready(loader: &mut Loader, arrow: Option<&SpecFile>) -> Option<Result<Ready>> {
    loader.next_batch().map(|b| {
        let b = b?;
        Ok(match arrow {
            Some(spec) => Ready::Arrow(crate::arrow::export_batch(b, spec)?),
            None => Ready::Numpy(b),
        })
    })
}

impl Snapshot {
    fn of(loader: &Loader) -> Snapshot {
        Snapshot {
            state: loader.state(),
            epoch: loader.epoch(),
            stats: loader.stats(),
        }
    }
}

/// `m` locked, whether or not a thread panicked while holding it (the
/// loader fails cleanly afterwards: its batch was reported as an error).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
    /// Memory-map local files (`mmap=True`): the Python caller's promise
    /// that nothing modifies or truncates them while they are read.
    pub(crate) mmap: bool,
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
    let reader_schema = common::reader_schema(args.reader_schema.as_deref())?;
    let mut spec = match common::given_spec(
        &storage,
        args.spec_json.as_deref(),
        args.spec_path.as_deref(),
    )? {
        Some(spec) => spec,
        None => common::infer(&format, &inputs, 1000, reader_schema.as_ref())?,
    };
    if reader_schema.is_some() {
        spec.reader_schema = reader_schema;
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
    if args.mmap {
        // SAFETY: `mmap=True` is the caller's promise, stated in the
        // parameter's documentation, that no file read is modified or
        // truncated while the loader or a batch from it is alive.
        builder = builder
            .with_access(unsafe { Access::mmap() })
            .with_maps(maps().clone());
    }
    let loader = builder.build()?;
    Ok((loader, spec, format))
}

/// The maps of every `mmap=True` loader of the process: a loader per
/// epoch (what `grist.torch` and most training loops make) finds the files
/// still mapped and faulted in, rather than mapping them again.
pub(crate) fn maps() -> &'static Arc<Maps> {
    static MAPS: std::sync::OnceLock<Arc<Maps>> = std::sync::OnceLock::new();
    MAPS.get_or_init(Arc::default)
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
    /// Refuses a loader inherited through `fork`: its threads, and maybe
    /// the thread holding its lock, stayed in the parent.
    fn here(&self) -> Result<()> {
        if std::process::id() == self.pid {
            Ok(())
        } else {
            Err(Failure::argument(
                "this loader was built in another process (a forked worker inherited it): \
                 build the loader in the process that uses it",
            ))
        }
    }

    /// Runs `f` on the open loader without the GIL.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Loader) -> Result<T> + Send,
    ) -> Result<T> {
        self.here()?;
        py.detach(|| {
            let mut guard = lock(&self.loader);
            match guard.as_mut() {
                Some(loader) => f(loader),
                None => Err(Failure::argument("the loader is closed")),
            }
        })
    }

    /// Runs `f` on the snapshot after the last batch handed over, or on a
    /// snapshot of the loader itself when none was (without the GIL).
    fn with_delivered<T: Send>(
        &self,
        py: Python<'_>,
        f: impl Fn(&Snapshot) -> T + Send + Sync,
    ) -> Result<T> {
        self.here()?;
        if self.closed.load(Ordering::Relaxed) {
            return Err(Failure::argument("the loader is closed"));
        }
        py.detach(|| {
            if let Some(s) = lock(&self.delivered).as_ref() {
                return Ok(f(s));
            }
            match lock(&self.loader).as_ref() {
                Some(loader) => Ok(f(&Snapshot::of(loader))),
                None => Err(Failure::argument("the loader is closed")),
            }
        })
    }

    /// Stops the thread ahead, if one runs (its batch is dropped: the
    /// loader is about to restore or close).
    fn stop_ahead(&self) {
        if let Some(ahead) = lock(&self.ahead).take() {
            ahead.stop();
        }
    }

    /// The next batch: made here, or taken from the thread ahead (started
    /// on first use) with `decode_ahead`.
    fn next_ready(&self) -> Result<Option<Ready>> {
        self.here()?;
        let arrow = self.arrow.then_some(&self.spec);
        if !self.decode_ahead {
            let mut guard = lock(&self.loader);
            let Some(loader) = guard.as_mut() else {
                return Err(Failure::argument("the loader is closed"));
            };
            return next_ready(loader, arrow).transpose();
        }
        let mut ahead = lock(&self.ahead);
        if ahead.is_none() {
            let snapshot = match lock(&self.loader).as_ref() {
                Some(loader) => Snapshot::of(loader),
                None => return Err(Failure::argument("the loader is closed")),
            };
            lock(&self.delivered).get_or_insert(snapshot);
            *ahead = Some(Ahead::start(self.loader.clone(), arrow.cloned())?);
        }
        let running = ahead.as_ref().expect("started above");
        match running.batches.recv() {
            Ok(made) => {
                if let Some(snapshot) = made.snapshot {
                    *lock(&self.delivered) = Some(snapshot);
                }
                made.batch.transpose()
            }
            // The thread ended after its last batch, the end or an error.
            Err(_) => Ok(None),
        }
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
        let ahead = self
            .ahead
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if std::process::id() != self.pid {
            // A forked child: the threads are the parent's, and the
            // loader's lock may have been held by one of them at the fork,
            // so it is not even locked here.
            std::mem::forget(ahead);
            std::mem::forget(self.loader.clone());
            return;
        }
        if let Some(ahead) = ahead {
            ahead.stop();
        }
        drop(lock(&self.loader).take());
    }
}

#[pymethods]
impl PyLoader {
    #[new]
    #[pyo3(signature = (paths, spec_json, spec_path, format, batch_size, shuffle, seed,
        shuffle_buffer, threads, shard, shard_mode, epochs, drop_remainder, reader_schema,
        random_access, output, payload = None, equal_batches = false, decode_ahead = false,
        mmap = false))]
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
        decode_ahead: bool,
        mmap: bool,
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
            mmap,
        };
        let (loader, spec, format) = py.detach(|| build(args))?;
        Ok(PyLoader {
            loader: Arc::new(Mutex::new(Some(loader))),
            ahead: Mutex::new(None),
            delivered: Mutex::new(None),
            closed: AtomicBool::new(false),
            spec,
            format,
            arrow,
            decode_ahead,
            pid: std::process::id(),
        })
    }

    /// The next batch (a dict of arrays, or an Arrow batch exporter), or
    /// `None` at the end.
    fn next_batch(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match py.detach(|| self.next_ready())? {
            None => Ok(None),
            Some(Ready::Arrow(exported)) => Ok(Some(Py::new(py, exported)?.into_any())),
            Some(Ready::Numpy(batch)) => {
                Ok(Some(crate::batch::to_dict(py, batch)?.into_any().unbind()))
            }
        }
    }

    /// The loader's state as JSON text.
    fn state_json(&self, py: Python<'_>) -> PyResult<String> {
        let state = self.with_delivered(py, |s| s.state.clone())?;
        serde_json::to_string(&state)
            .map_err(|e| Failure::argument(format!("the loader state as JSON: {e}")).into())
    }

    /// Restores a state saved by `state_json`.
    fn restore_json(&self, py: Python<'_>, state: &str) -> PyResult<()> {
        let state: LoaderState = serde_json::from_str(state)
            .map_err(|e| Failure::argument(format!("not a grist loader state: {e}")))?;
        py.detach(|| self.stop_ahead());
        // The thread ahead had taken a batch Python has not seen: back to
        // the last one handed over first, so that a state refused below
        // leaves the loader where Python left it.
        let delivered = lock(&self.delivered).take();
        self.with(py, move |loader| {
            if let Some(s) = delivered {
                loader.restore(&s.state)?;
            }
            Ok(loader.restore(&state)?)
        })?;
        Ok(())
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
        Ok(self.with_delivered(py, |s| s.epoch)?)
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
        let s = self.with_delivered(py, |s| s.stats.clone())?;
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
        if self.here().is_err() {
            // Dropping it is all a forked child can do (see `Drop`).
            return;
        }
        self.closed.store(true, Ordering::Relaxed);
        py.detach(|| {
            self.stop_ahead();
            drop(lock(&self.loader).take());
        });
    }
}
