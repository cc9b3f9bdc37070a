//! [`LoaderBuilder`] and [`Loader`]: the consumer side, which takes chunks
//! (or read batches) from the prefetch thread, samples the batch's rows,
//! plans and runs the parallel parse, and keeps the state.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use grist_io::{Address, Storage};
use grist_tensor::{
    Access, Batch, Chunk, ChunkPos, Decoder, FeatureSpec, Format, Gathered, Limits, Location, Maps,
    RandomAccess, ReadOptions, RecordLayout, Registry, SpecFile, StorageError,
};

use crate::autotune::{self, Calibrator, CostModel, Plan, WorkItem};
use crate::decode::{Ctx, ParsePool, Source, Work, decode_batch};
use crate::error::{Error, Result};
use crate::options::{Config, Epochs, ShardMode, Threads};
use crate::producer::{Item, Running, Start, StreamChunk};
use crate::rng::{self, Purpose};
use crate::sample::block_sample;
use crate::state::{BufferedState, LoaderState, Resume, STATE_VERSION};
use crate::stats::Stats;
use crate::stream::StreamCursor;

/// Builds a [`Loader`]: consuming `with_*` setters, each documenting its
/// default, then [`build`](Self::build).
#[derive(Clone, Debug)]
pub struct LoaderBuilder {
    sources: Vec<PathBuf>,
    storage: Storage,
    registry: Registry,
    format: Option<Arc<dyn Format>>,
    spec: Option<SpecFile>,
    spec_path: Option<PathBuf>,
    reader_schema: Option<serde_json::Value>,
    batch_size: Option<usize>,
    drop_remainder: Option<bool>,
    epochs: Epochs,
    threads: Threads,
    shuffle: bool,
    seed: u64,
    shuffle_buffer: usize,
    reshuffle: bool,
    cycle_length: usize,
    rank: usize,
    world: usize,
    shard_mode: ShardMode,
    equal_batches: bool,
    prefetch_bytes: u64,
    chunk_bytes: usize,
    limits: Limits,
    check_crc: bool,
    random_access: RandomAccess,
    access: Access,
    maps: Option<Arc<Maps>>,
}

impl Default for LoaderBuilder {
    fn default() -> Self {
        LoaderBuilder {
            sources: Vec::new(),
            storage: Storage::new(),
            registry: Registry::new(),
            format: None,
            spec: None,
            spec_path: None,
            reader_schema: None,
            batch_size: None,
            drop_remainder: None,
            epochs: Epochs::default(),
            threads: Threads::default(),
            shuffle: false,
            seed: 0,
            shuffle_buffer: 10_000,
            reshuffle: true,
            cycle_length: 1,
            rank: 0,
            world: 1,
            shard_mode: ShardMode::default(),
            equal_batches: false,
            prefetch_bytes: 32 << 20,
            chunk_bytes: 1 << 20,
            limits: Limits::default(),
            check_crc: true,
            random_access: RandomAccess::default(),
            access: Access::default(),
            maps: None,
        }
    }
}

impl LoaderBuilder {
    /// A builder with every option at its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds sources: files, folders (their files of the loader's format,
    /// sorted; OFRecord parts by number) or glob patterns (`data/*.avro`);
    /// paths, or URLs of object stores (`s3://bucket/train/`, see
    /// [`with_storage`](Self::with_storage)).
    /// A source given twice is read twice. By default, none (an error at
    /// [`build`](Self::build)).
    #[must_use]
    pub fn with_paths<P: Into<PathBuf>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.sources.extend(paths.into_iter().map(Into::into));
        self
    }

    /// Adds one source (see [`with_paths`](Self::with_paths)).
    #[must_use]
    pub fn with_path(self, path: impl Into<PathBuf>) -> Self {
        self.with_paths([path])
    }

    /// The storage the sources are read through: local files, and object
    /// stores (`s3://`, `gs://`, `az://`, `http(s)://`) when grist-io is
    /// built with its `remote` feature, with their options (endpoints,
    /// credentials, retries). By default, [`Storage::new`]: object-store
    /// settings from the usual environment variables.
    #[must_use]
    pub fn with_storage(mut self, storage: Storage) -> Self {
        self.storage = storage;
        self
    }

    /// The formats the sources may be in, and how a file's format is
    /// told ([`Registry::expand`]: by name, then by content). By default,
    /// none: name the format with [`with_format`](Self::with_format), or
    /// build the loader through the `grist` crate, whose registry knows
    /// every grist format.
    #[must_use]
    pub fn with_registry(mut self, registry: Registry) -> Self {
        self.registry = registry;
        self
    }

    /// The record format of every source. By default, each file's format
    /// is told by the [registry](Self::with_registry); all files must be of
    /// one format.
    #[must_use]
    pub fn with_format(mut self, format: Arc<dyn Format>) -> Self {
        self.format = Some(format);
        self
    }

    /// The features to decode. By default, none (an error at
    /// [`build`](Self::build)).
    #[must_use]
    pub fn with_specs(mut self, specs: impl Into<Vec<FeatureSpec>>) -> Self {
        self.spec = Some(SpecFile {
            features: specs.into(),
            ..SpecFile::default()
        });
        self
    }

    /// The features to decode, as a spec file (context and sequence
    /// features for `tf.SequenceExample` records; its `batch_size` and
    /// `drop_remainder`, when present, are the defaults of those options).
    #[must_use]
    pub fn with_spec_file(mut self, spec: SpecFile) -> Self {
        self.spec = Some(spec);
        self
    }

    /// The features to decode, from a spec file in JSON (read at
    /// [`build`](Self::build), through the loader's
    /// [storage](Self::with_storage): a path, or an object store URL). See
    /// [`with_spec_file`](Self::with_spec_file).
    #[must_use]
    pub fn with_spec_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.spec_path = Some(path.into());
        self
    }

    /// Avro: the reader schema every file is read through (the Avro
    /// specification's schema resolution: fields matched by name and
    /// alias, reader fields the writer lacks filled with their defaults,
    /// promotions), as JSON; the specs name its fields. It replaces the
    /// spec file's `reader_schema`. Other formats refuse it at
    /// [`build`](Self::build). By default, the spec file's
    /// `reader_schema`, else none: each file is read by its writer schema.
    #[must_use]
    pub fn with_reader_schema(mut self, schema: serde_json::Value) -> Self {
        self.reader_schema = Some(schema);
        self
    }

    /// Records per batch (at least 1). By default, the spec file's
    /// `batch_size`, else 1024.
    #[must_use]
    pub fn with_batch_size(mut self, records: usize) -> Self {
        self.batch_size = Some(records);
        self
    }

    /// Whether each epoch's last batch is dropped when it is short. By
    /// default, the spec file's `drop_remainder`, else `false`.
    #[must_use]
    pub fn with_drop_remainder(mut self, drop: bool) -> Self {
        self.drop_remainder = Some(drop);
        self
    }

    /// How many passes over the data. Batches never span two epochs. By
    /// default, [`Epochs::Count`]`(1)`.
    #[must_use]
    pub fn with_epochs(mut self, epochs: Epochs) -> Self {
        self.epochs = epochs;
        self
    }

    /// Parse threads per batch. By default, [`Threads::Autotune`]; a fixed
    /// count is at most [`MAX_THREADS`].
    #[must_use]
    pub fn with_threads(mut self, threads: Threads) -> Self {
        self.threads = threads;
        self
    }

    /// Whether to shuffle: streams sample each batch from a buffer of
    /// `batch size + shuffle buffer` records over many chunks, in a file
    /// order shuffled per epoch; sources read by number follow an exact
    /// permutation per epoch. Every choice follows from the
    /// [seed](Self::with_seed). By default, `false` (files in the order
    /// given, records in file order).
    #[must_use]
    pub fn with_shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// The seed of every random choice. By default, 0.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// For shuffled streams: how many records beyond the batch to keep
    /// buffered to sample from. By default, 10 000.
    #[must_use]
    pub fn with_shuffle_buffer(mut self, records: usize) -> Self {
        self.shuffle_buffer = records;
        self
    }

    /// Whether every epoch is shuffled differently (else each epoch
    /// repeats the first one's order). By default, `true`.
    #[must_use]
    pub fn with_reshuffle_each_epoch(mut self, reshuffle: bool) -> Self {
        self.reshuffle = reshuffle;
        self
    }

    /// For streams: how many files are read at once, taking one chunk
    /// from each in turn (at least 1). By default, 1.
    #[must_use]
    pub fn with_cycle_length(mut self, files: usize) -> Self {
        self.cycle_length = files;
        self
    }

    /// Reads the share of rank `rank` of `world` ranks (see
    /// [`ShardMode`]); with the same seed, the ranks' shares of an epoch
    /// hold every record exactly once. By default, rank 0 of 1.
    #[must_use]
    pub fn with_shard(mut self, rank: usize, world: usize) -> Self {
        self.rank = rank;
        self.world = world;
        self
    }

    /// How the data is split between ranks. By default,
    /// [`ShardMode::Auto`].
    #[must_use]
    pub fn with_shard_mode(mut self, mode: ShardMode) -> Self {
        self.shard_mode = mode;
        self
    }

    /// Whether every rank yields the same number of batches per epoch
    /// (the fewest any rank has; the records beyond are skipped that
    /// epoch), so that no rank waits for the others at an epoch's end.
    /// Streams count their chunks once, on first use, without decoding.
    /// By default, `false`.
    #[must_use]
    pub fn with_equal_batches(mut self, equal: bool) -> Self {
        self.equal_batches = equal;
        self
    }

    /// How many bytes the prefetch thread may read ahead (counted as the
    /// chunks' bytes; with read calls, the buffer they were read into
    /// adds up to one read, at most 16 MiB, beyond). By default, 32 MiB.
    #[must_use]
    pub fn with_prefetch_bytes(mut self, bytes: u64) -> Self {
        self.prefetch_bytes = bytes;
        self
    }

    /// The target size of a chunk of a stream (TFRecord frames, OFRecord
    /// records; Avro chunks are the file's blocks): smaller chunks shuffle
    /// more finely and spread better over threads, larger ones cost less
    /// per record. By default, 1 MiB.
    #[must_use]
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes;
        self
    }

    /// The limits on allocations sized by the input. By default,
    /// [`Limits::default`].
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether to verify checksums (TFRecord CRCs, FFRecord CRC-32s; Avro
    /// sync markers are always checked). By default, `true`.
    #[must_use]
    pub fn with_check_crc(mut self, check: bool) -> Self {
        self.check_crc = check;
        self
    }

    /// Whether to read by record number. By default, [`RandomAccess::Auto`].
    #[must_use]
    pub fn with_random_access(mut self, access: RandomAccess) -> Self {
        self.random_access = access;
        self
    }

    /// How file bytes are fetched: by read calls into the loader's own
    /// buffers (the default, [`Access::read`]), or as slices of memory maps
    /// ([`Access::mmap`], an `unsafe fn` whose caller promises that the
    /// files do not change while the loader or its batches are alive).
    ///
    /// Mapping saves the copy out of the page cache, which is most of what
    /// the prefetch thread costs, and leaves the cores to the parse
    /// threads. It applies to FFRecord files, Avro files, uncompressed
    /// TFRecord files and OFRecord parts; compressed TFRecord files are
    /// always read. The maps of the last 256 stream files stay mapped
    /// while the loader lives, so that the next epoch does not map, fault
    /// in and unmap them again.
    #[must_use]
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    /// Where the maps of mapped files are kept (with [`Access::mmap`]). By
    /// default the loader keeps its own, dropped with it; a [`Maps`]
    /// shared by several loaders keeps the files mapped from one to the
    /// next, so that a new loader per epoch does not map and fault in
    /// every file again. A kept map is reused only while the file's size,
    /// modification time and inode are unchanged.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use grist_loader::{Loader, Maps};
    /// let maps = Arc::new(Maps::new());
    /// for _epoch in 0..2 {
    ///     let builder = Loader::builder().with_maps(maps.clone());
    ///     # let _ = builder;
    /// }
    /// ```
    #[must_use]
    pub fn with_maps(mut self, maps: Arc<Maps>) -> Self {
        self.maps = Some(maps);
        self
    }

    /// Checks the options, lists the files, compiles the decoder and
    /// starts the parse threads. Nothing is read until the first batch is
    /// asked for.
    pub fn build(self) -> Result<Loader> {
        if self.world == 0 || self.rank >= self.world {
            return Err(Error::option(
                "with_shard",
                format!("rank {} of {} ranks", self.rank, self.world),
            ));
        }
        if self.cycle_length == 0 {
            return Err(Error::option("with_cycle_length", "must be at least 1"));
        }
        if self.chunk_bytes == 0 {
            return Err(Error::option("with_chunk_bytes", "must be at least 1"));
        }
        match self.threads {
            Threads::Fixed(0) => {
                return Err(Error::option(
                    "with_threads",
                    "Fixed(0): at least one thread",
                ));
            }
            Threads::Fixed(n) if n > MAX_THREADS => {
                return Err(Error::option(
                    "with_threads",
                    format!("Fixed({n}): at most {MAX_THREADS} threads"),
                ));
            }
            _ => {}
        }
        let mut spec = match (self.spec, &self.spec_path) {
            (Some(spec), _) => spec,
            (None, Some(path)) => read_spec(&self.storage, path)?,
            (None, None) => return Err(Error::option("with_specs", "no features to decode")),
        };
        if let Some(reader) = self.reader_schema {
            spec.reader_schema = Some(reader);
        }
        let batch_size = self.batch_size.or(spec.batch_size).unwrap_or(1024);
        if batch_size == 0 {
            return Err(Error::option("with_batch_size", "must be at least 1"));
        }
        let drop_remainder = self.drop_remainder.or(spec.drop_remainder).unwrap_or(false);
        if self.format.is_none() && self.registry.formats().is_empty() {
            return Err(Error::option(
                "with_registry",
                "no formats to tell the files' format by: give a registry (the grist crate's \
                 loader has one of every format) or a format",
            ));
        }
        let sources: Vec<String> = self
            .sources
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let (format, inputs) =
            self.registry
                .expand(&self.storage, &sources, self.format.clone())?;
        // Remote streams read ahead within the prefetch budget, shared by
        // the files read at once.
        let files_at_once = (self.cycle_length.max(1) as u64).saturating_mul(2);
        let read_ahead = usize::try_from(self.prefetch_bytes / files_at_once)
            .unwrap_or(usize::MAX)
            .clamp(1 << 20, 64 << 20);
        let inputs: Vec<_> = inputs
            .into_iter()
            .map(|i| i.with_read_ahead(read_ahead))
            .collect();
        let max_threads = match self.threads {
            Threads::Fixed(n) => n,
            Threads::Autotune => std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
        .max(1);
        // With several parse threads, checksums (TFRecord data CRCs,
        // FFRecord CRC-32s) are checked by them, in parallel, rather than
        // by the prefetch thread; autotune moves them back to the prefetch
        // thread while it prefers one parse thread (`plan`).
        let read = ReadOptions::new()
            .with_chunk_bytes(self.chunk_bytes)
            .with_limits(self.limits)
            .with_check_crc(self.check_crc)
            .with_access(self.access)
            .with_shuffled(self.shuffle)
            .with_defer_checks(max_threads > 1);
        let read = match &self.maps {
            Some(maps) => read.with_maps(maps.clone()),
            None => read,
        };
        let indexed = format.random_access(&inputs, self.random_access, self.shuffle)?;
        let by_file = match self.shard_mode {
            ShardMode::Files => {
                if inputs.len() < self.world {
                    return Err(Error::option(
                        "with_shard_mode",
                        format!(
                            "Files: {} files for {} ranks (use ShardMode::Records)",
                            inputs.len(),
                            self.world
                        ),
                    ));
                }
                true
            }
            ShardMode::Records => false,
            ShardMode::Auto => inputs.len() >= self.world,
        };
        let decoder = format.decoder(&spec, self.limits)?;
        let pool = if max_threads > 1 {
            Some(ParsePool::new(max_threads - 1)?)
        } else {
            None
        };
        let config = Config {
            format,
            read,
            inputs,
            batch_size,
            drop_remainder,
            epochs: match self.epochs {
                Epochs::Count(n) => Some(n),
                Epochs::Endless => None,
            },
            shuffle: self.shuffle,
            seed: self.seed,
            shuffle_buffer: self.shuffle_buffer,
            reshuffle: self.reshuffle,
            cycle_length: self.cycle_length,
            rank: self.rank,
            world: self.world,
            by_file,
            equal_batches: self.equal_batches,
            indexed,
            prefetch_bytes: self.prefetch_bytes,
        };
        Ok(Loader {
            fingerprint: config.fingerprint(),
            decoders: (0..max_threads).map(|_| decoder.clone()).collect(),
            pool,
            threads: self.threads,
            model: CostModel::new(max_threads),
            calibrator: Calibrator::new(max_threads),
            running: None,
            start: Start {
                epoch: 0,
                resume: Resume::Fresh,
            },
            epoch: 0,
            batches: 0,
            max_batches: None,
            buffer: Vec::new(),
            remaining: 0,
            ended: false,
            prelude_left: 0,
            mirror: None,
            spare: None,
            sizes: grist_tensor::BatchSizes::new(),
            parts: Vec::new(),
            acc: Acc::default(),
            finished: false,
            config: Arc::new(config),
        })
    }
}

/// The spec file at `path` (a path, or a URL of the loader's storage).
fn read_spec(storage: &Storage, path: &Path) -> Result<SpecFile> {
    let text = path.to_string_lossy();
    let name: Arc<str> = text.as_ref().into();
    let address = Address::parse(&text).map_err(|e| StorageError::new(name.clone(), e))?;
    let bytes = storage
        .read_all(&address)
        .map_err(|e| StorageError::new(name.clone(), e))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| Error::BadOption {
        option: "with_spec_path",
        reason: format!("{name}: not UTF-8 text: {e}"),
    })?;
    SpecFile::from_json(text).map_err(|e| Error::BadOption {
        option: "with_spec_path",
        reason: format!("{name}: {e}"),
    })
}

/// A chunk in the shuffle buffer.
#[derive(Debug)]
struct Buffered {
    /// The chunk as left to decode (cut past decoded records for
    /// sequential layouts).
    chunk: Chunk,
    input: usize,
    /// Where it starts in its file (to read it again on restore).
    pos: ChunkPos,
    remaining: usize,
    taken: u64,
    cut_rows: u64,
    cut_bytes: u64,
}

impl Buffered {
    /// The row of `chunk` where the next rows start.
    fn next_row(&self) -> usize {
        (self.taken - self.cut_rows) as usize
    }
}

/// Running totals for [`Stats`].
#[derive(Debug, Default)]
struct Acc {
    started: Option<Instant>,
    records: u64,
    batches: u64,
    bytes: u64,
    io_wait: Duration,
    decode: Duration,
    threads_used: Vec<u64>,
    last_threads: usize,
    read_before: Duration,
    peak_before: u64,
}

/// Batches from files of any grist format: see the [crate
/// documentation](crate). An iterator of `Result<Batch>`; after an error
/// (which names the file and record) or the last epoch, it yields `None`.
pub struct Loader {
    config: Arc<Config>,
    /// `config.fingerprint()`, worked out once: it hashes every input's
    /// name, and a caller may ask for the state after every batch.
    fingerprint: u64,
    decoders: Vec<Box<dyn Decoder>>,
    pool: Option<ParsePool>,
    threads: Threads,
    model: CostModel,
    calibrator: Calibrator,
    running: Option<Running>,
    /// Where the next prefetch thread starts.
    start: Start,
    epoch: u64,
    /// Batches yielded in this epoch.
    batches: u64,
    max_batches: Option<u64>,
    /// Boxed: a shuffled batch empties a few chunks anywhere in the
    /// buffer, and moving ~300 whole chunks up cost 1.7% of the loader's
    /// thread.
    #[allow(clippy::vec_box)]
    buffer: Vec<Box<Buffered>>,
    /// Rows left in the buffer.
    remaining: usize,
    /// The epoch's stream has no more chunks.
    ended: bool,
    /// Chunks of a restored shuffle buffer still to come.
    prelude_left: usize,
    /// The stream's cursor after the last chunk taken.
    mirror: Option<StreamCursor>,
    spare: Option<Batch>,
    /// The last batch's buffer sizes, to pre-size a batch built without a
    /// spare one (a caller that keeps its batches, as Python's numpy
    /// arrays do).
    sizes: grist_tensor::BatchSizes,
    /// The builders of the parts beyond the first, kept between batches.
    parts: Vec<grist_tensor::BatchBuilder>,
    acc: Acc,
    finished: bool,
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("format", &self.config.format.name())
            .field("files", &self.config.inputs.len())
            .field("batch_size", &self.config.batch_size)
            .field("epoch", &self.epoch)
            .field("batches", &self.batches)
            .finish_non_exhaustive()
    }
}

impl Loader {
    /// A builder.
    pub fn builder() -> LoaderBuilder {
        LoaderBuilder::new()
    }

    /// The format being read.
    pub fn format(&self) -> &Arc<dyn Format> {
        &self.config.format
    }

    /// The number of input files.
    pub fn files(&self) -> usize {
        self.config.inputs.len()
    }

    /// The batch size.
    pub fn batch_size(&self) -> usize {
        self.config.batch_size
    }

    /// The epoch of the last batch yielded (counted from 0).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether records are read by number (see
    /// [`RandomAccess`]) rather than as a stream.
    pub fn is_random_access(&self) -> bool {
        self.config.indexed
    }

    /// The next batch; `None` after the last epoch or an error.
    pub fn next_batch(&mut self) -> Option<Result<Batch>> {
        if self.finished {
            return None;
        }
        if self.running.is_none() {
            match Running::spawn(self.config.clone(), self.start.clone()) {
                Ok(r) => self.running = Some(r),
                Err(e) => return self.fail(e),
            }
        }
        self.acc.started.get_or_insert_with(Instant::now);
        let result = if self.config.indexed {
            self.next_indexed()
        } else {
            self.next_stream()
        };
        match result {
            Ok(Some(batch)) => Some(Ok(batch)),
            Ok(None) => {
                self.finished = true;
                self.stop();
                None
            }
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: Error) -> Option<Result<Batch>> {
        self.finished = true;
        self.stop();
        Some(Err(e))
    }

    /// Stops the prefetch thread (keeping its measurements).
    fn stop(&mut self) {
        if let Some(r) = self.running.take() {
            self.acc.read_before += Duration::from_nanos(
                r.counters
                    .read_nanos
                    .load(std::sync::atomic::Ordering::Relaxed),
            );
            self.acc.peak_before = self.acc.peak_before.max(r.queue.peak());
        }
    }

    /// Gives a consumed batch's memory back: the next batch reuses it
    /// instead of fresh allocations.
    pub fn recycle(&mut self, batch: Batch) {
        self.spare = Some(batch);
    }

    /// Bytes read from the files so far (as stored): [`Stats::bytes`]
    /// without building the rest of [`Stats`], cheap enough to ask before
    /// every batch. Counted as the batches take chunks from the prefetch
    /// queue, so a batch that opens an epoch has already counted the
    /// chunks it (and, shuffled, its buffer) took from that epoch.
    pub fn bytes_read(&self) -> u64 {
        self.acc.bytes
    }

    /// What the loader measured.
    pub fn stats(&self) -> Stats {
        let (read, peak) = match &self.running {
            Some(r) => (
                self.acc.read_before
                    + Duration::from_nanos(
                        r.counters
                            .read_nanos
                            .load(std::sync::atomic::Ordering::Relaxed),
                    ),
                self.acc.peak_before.max(r.queue.peak()),
            ),
            None => (self.acc.read_before, self.acc.peak_before),
        };
        Stats {
            records: self.acc.records,
            batches: self.acc.batches,
            bytes: self.acc.bytes,
            elapsed: self.acc.started.map_or(Duration::ZERO, |s| s.elapsed()),
            io_wait: self.acc.io_wait,
            decode: self.acc.decode,
            read,
            threads_used: self.acc.threads_used.clone(),
            last_threads: self.acc.last_threads,
            prefetch_peak_bytes: peak,
            prefetch_budget: self.config.prefetch_bytes,
            model: self.model.clone(),
        }
    }

    /// Where the loader is: restoring it into a loader built with the same
    /// arguments continues with exactly the batches this one would yield
    /// next.
    pub fn state(&self) -> LoaderState {
        let resume = if self.config.indexed {
            Resume::Indexed {
                batch: self.batches,
            }
        } else {
            Resume::Stream {
                cursor: self.mirror.clone(),
                ended: self.ended,
                buffer: self
                    .buffer
                    .iter()
                    .map(|b| BufferedState {
                        input: b.input,
                        pos: b.pos,
                        taken: b.taken,
                        cut_rows: b.cut_rows,
                        cut_bytes: b.cut_bytes,
                    })
                    .collect(),
            }
        };
        LoaderState {
            version: STATE_VERSION,
            fingerprint: self.fingerprint,
            epoch: self.epoch,
            batches: self.batches,
            resume,
        }
    }

    /// Continues from `state` (from [`state`](Self::state) of a loader
    /// built with the same arguments): the next batches are the ones that
    /// loader would have yielded. Records before the position are not
    /// decoded; records read by number are not even read, streams restart
    /// at the chunks still buffered (Avro blocks and uncompressed files by
    /// seeking, compressed TFRecord files by inflating up to there).
    pub fn restore(&mut self, state: &LoaderState) -> Result<()> {
        if state.version != STATE_VERSION {
            return Err(Error::StateMismatch {
                reason: format!(
                    "state version {}, this loader reads {STATE_VERSION}",
                    state.version
                ),
            });
        }
        if state.fingerprint != self.fingerprint {
            return Err(Error::StateMismatch {
                reason: "it was saved by a loader of other files or options (files, batch size, \
                         shuffle, seed, shard, chunk size, ...)"
                    .into(),
            });
        }
        let prelude = match (&state.resume, self.config.indexed) {
            (Resume::Indexed { batch }, true) if *batch == state.batches => 0,
            (Resume::Stream { buffer, .. }, false) => {
                if let Some(b) = buffer.iter().find(|b| b.input >= self.config.inputs.len()) {
                    return Err(Error::StateMismatch {
                        reason: format!("input {} does not exist", b.input),
                    });
                }
                buffer.len()
            }
            (Resume::Fresh, _) if state.batches == 0 => 0,
            _ => {
                return Err(Error::StateMismatch {
                    reason: "it does not match the way this loader reads".into(),
                });
            }
        };
        self.stop();
        self.start = Start {
            epoch: state.epoch,
            resume: state.resume.clone(),
        };
        self.epoch = state.epoch;
        self.batches = state.batches;
        self.max_batches = None;
        self.buffer.clear();
        self.remaining = 0;
        self.ended = false;
        self.prelude_left = prelude;
        // Parts left half-filled by an error are not reused.
        self.parts.clear();
        self.mirror = match &state.resume {
            Resume::Stream { cursor, .. } => cursor.clone(),
            _ => None,
        };
        self.finished = false;
        Ok(())
    }

    // -- the consumer --

    /// The next item from the prefetch thread (an error item as `Err`).
    fn pull(&mut self) -> Result<Option<Item>> {
        let Some(running) = &self.running else {
            return Ok(None);
        };
        let t = Instant::now();
        let item = running.queue.pop();
        self.acc.io_wait += t.elapsed();
        match item {
            Some(Item::Error(e)) => Err(e),
            other => Ok(other),
        }
    }

    fn begin_epoch(&mut self, epoch: u64, max_batches: Option<u64>) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.batches = 0;
            self.mirror = None;
        }
        self.max_batches = max_batches;
    }

    fn capped(&self) -> bool {
        self.max_batches.is_some_and(|m| self.batches >= m)
    }

    fn next_indexed(&mut self) -> Result<Option<Batch>> {
        loop {
            match self.pull()? {
                None => return Ok(None),
                Some(Item::EpochStart { epoch, max_batches }) => {
                    self.begin_epoch(epoch, max_batches)
                }
                Some(Item::EpochEnd) => {}
                Some(Item::Gathered(g)) => return self.gathered_batch(g).map(Some),
                Some(other) => return Err(unexpected(&other)),
            }
        }
    }

    fn next_stream(&mut self) -> Result<Option<Batch>> {
        loop {
            let want = self
                .config
                .batch_size
                .saturating_add(if self.config.shuffle {
                    self.config.shuffle_buffer
                } else {
                    0
                });
            while !self.ended && (self.remaining < want || self.prelude_left > 0) {
                match self.pull()? {
                    None => self.ended = true,
                    Some(Item::EpochStart { epoch, max_batches }) => {
                        self.begin_epoch(epoch, max_batches)
                    }
                    Some(Item::Chunk(c)) => self.add(*c)?,
                    Some(Item::EpochEnd) => self.ended = true,
                    Some(other) => return Err(unexpected(&other)),
                }
            }
            let short = self.remaining < self.config.batch_size && self.config.drop_remainder;
            if self.capped() || short {
                // The rest of the epoch is skipped.
                self.buffer.clear();
                self.remaining = 0;
            }
            if self.remaining == 0 {
                if !self.ended {
                    continue;
                }
                // The epoch is over: the next one starts, or nothing.
                match self.pull()? {
                    None => return Ok(None),
                    Some(Item::EpochStart { epoch, max_batches }) => {
                        self.begin_epoch(epoch, max_batches);
                        self.ended = false;
                        continue;
                    }
                    Some(other) => return Err(unexpected(&other)),
                }
            }
            let n = self.remaining.min(self.config.batch_size);
            return self.stream_batch(n).map(Some);
        }
    }

    /// Takes a chunk from the prefetch thread into the shuffle buffer.
    fn add(&mut self, c: StreamChunk) -> Result<()> {
        let StreamChunk {
            raw,
            input,
            cursor,
            resume,
        } = c;
        if let Some(cursor) = cursor {
            self.mirror = Some(cursor);
        }
        self.acc.bytes += raw.chunk.stored_bytes;
        let mut b = Buffered {
            remaining: raw.chunk.record_count,
            pos: raw.chunk.pos(),
            chunk: raw.chunk,
            input,
            taken: 0,
            cut_rows: 0,
            cut_bytes: 0,
        };
        if let Some(r) = resume {
            self.prelude_left = self.prelude_left.saturating_sub(1);
            let bad = |what: &str| Error::StateMismatch {
                reason: format!("{}: chunk {}: {what}", b.chunk.file, b.pos.index),
            };
            if r.taken > b.chunk.record_count as u64 || r.cut_rows > r.taken {
                return Err(bad("fewer records than the state says were used"));
            }
            if r.cut_rows == 0 && r.cut_bytes != 0 {
                return Err(bad("the state cuts bytes but no records off it"));
            }
            if r.cut_rows > 0 {
                if b.chunk.deferred.inflate {
                    b.chunk.data = self.decoders[0].inflate(&b.chunk, &self.config.read.limits)?;
                    b.chunk.deferred.inflate = false;
                }
                let cut = usize::try_from(r.cut_bytes).unwrap_or(usize::MAX);
                if cut > b.chunk.data.len() {
                    return Err(bad("shorter than the state says"));
                }
                b.chunk.data = b.chunk.data.slice(cut..);
                b.chunk.first_record = b.chunk.first_record.saturating_add(r.cut_rows);
                b.chunk.record_count -= r.cut_rows as usize;
            }
            b.taken = r.taken;
            b.cut_rows = r.cut_rows;
            b.cut_bytes = r.cut_bytes;
            b.remaining -= r.taken as usize;
        }
        if b.remaining > 0 {
            // Saturating: a chunk's count is claimed by the data.
            self.remaining = self.remaining.saturating_add(b.remaining);
            self.buffer.push(Box::new(b));
        }
        Ok(())
    }

    /// Picks the thread count and spread for `items`.
    fn plan(&self, items: &[WorkItem]) -> Plan {
        let fixed = match self.threads {
            Threads::Fixed(n) => Some(n),
            Threads::Autotune => {
                let max = self.model.max_threads();
                let k = self.acc.batches;
                if max > 1 && k < WARMUP_BATCHES + TRIAL_RUN * max as u64 {
                    // First every thread count gets a run of batches, so
                    // that the model starts from a few measurements of each
                    // rather than one cold batch (a short epoch then need
                    // not wait 60 batches for the first trial). One thread
                    // first: the first batches share the cores with the
                    // prefetch thread filling its queue, which would count
                    // against the thread count measured then.
                    let stage = k.saturating_sub(WARMUP_BATCHES) / TRIAL_RUN;
                    Some(1 + stage as usize)
                } else {
                    // Now and then a thread count other than the best gets
                    // a run of batches, so that its estimates follow the
                    // machine too (the first batch of a run, with threads
                    // just woken and caches cold, is not learnt from).
                    (max > 1 && k % 64 >= 64 - TRIAL_RUN).then(|| 1 + (k / 64) as usize % max)
                }
            }
        };
        match fixed {
            Some(t) => autotune::plan_threads(items, &self.model, t),
            None => {
                // For long batches, the most threads whose predicted time
                // is within PREFER_MORE of the best: two threads' estimate
                // carries the noise of the pool's thread sharing a core
                // with the prefetch thread (a late start of 0.25-5 ms now
                // and then), and there a wrong pick of fewer threads costs
                // 15-22% (batch 1024, read calls). Not for short batches,
                // where the costs per batch that the model leaves out
                // weigh more with more threads (batch 64: 0.82x of the
                // best fixed count with the preference, 0.94x without).
                let plan = autotune::plan_preferring_more(
                    items,
                    &self.model,
                    PREFER_MORE,
                    PREFER_MORE_FROM,
                );
                // Data CRCs go with the thread count autotune prefers:
                // onto the parse threads when it is several, else onto the
                // prefetch thread beside the one parse thread. (Not for
                // trial runs: chunks read during one are decoded later.)
                self.config
                    .read
                    .defer_checks
                    .store(plan.threads > 1, Ordering::Relaxed);
                plan
            }
        }
    }

    fn stream_batch(&mut self, n: usize) -> Result<Batch> {
        // Which rows of which chunks.
        let mut segments: Vec<(usize, usize)> = Vec::new();
        if self.config.shuffle {
            let mut rng = rng::stream(
                self.config.seed,
                Purpose::Sample,
                self.config.shuffle_epoch(self.epoch),
                self.batches,
            );
            let remaining: Vec<usize> = self.buffer.iter().map(|b| b.remaining).collect();
            let counts = block_sample(&remaining, n, &mut rng);
            segments.extend(counts.into_iter().enumerate().filter(|&(_, c)| c > 0));
            rng::shuffle(&mut segments, &mut rng);
        } else {
            let mut need = n;
            for (i, b) in self.buffer.iter().enumerate() {
                if need == 0 {
                    break;
                }
                let take = need.min(b.remaining);
                segments.push((i, take));
                need -= take;
            }
        }
        let first = {
            let b = &self.buffer[segments[0].0];
            (
                b.chunk.file.clone(),
                b.chunk.first_record.saturating_add(b.next_row() as u64),
            )
        };
        let started = Instant::now();
        let works: Vec<Work<'_>> = segments
            .iter()
            .map(|&(i, c)| {
                let b = &self.buffer[i];
                // Work the stream left undone (inflating, checksums) is
                // done as the records are decoded.
                let inflate = b.chunk.deferred.inflate;
                Work {
                    source: Source::Chunk {
                        chunk: &b.chunk,
                        first: b.next_row(),
                    },
                    item: WorkItem {
                        records: c as u64,
                        inflate_bytes: if inflate {
                            b.chunk.data.len() as u64
                        } else {
                            0
                        },
                        splittable: !inflate && matches!(b.chunk.layout, RecordLayout::Spans(_)),
                    },
                }
            })
            .collect();
        let items: Vec<WorkItem> = works.iter().map(|w| w.item).collect();
        let plan = self.plan(&items);
        let shares = autotune::share(&plan, &items, &self.model);
        let mut out = self.decoders[0]
            .new_batch(0)
            .reusing(self.spare.take(), &self.sizes, n);
        let ctx = Ctx {
            work: &works,
            inputs: &self.config.inputs,
            limits: &self.config.read.limits,
        };
        let mut done = decode_batch(
            self.pool.as_ref().map(ParsePool::get),
            &mut self.decoders,
            &mut self.parts,
            &ctx,
            &plan,
            &shares,
            &mut out,
        )?;
        drop(works);
        // What the batch used of each chunk.
        for p in std::mem::take(&mut done.pieces) {
            let b = &mut self.buffer[segments[p.item].0];
            if let Some(data) = p.inflated {
                b.chunk.data = data;
                b.chunk.deferred.inflate = false;
            }
            if let (Some(end), RecordLayout::Sequential) = (p.end, &b.chunk.layout) {
                let rows = segments[p.item].1;
                if end <= b.chunk.data.len() && b.next_row() == 0 {
                    b.chunk.data = b.chunk.data.slice(end..);
                    b.chunk.first_record = b.chunk.first_record.saturating_add(rows as u64);
                    b.chunk.record_count = b.chunk.record_count.saturating_sub(rows);
                    b.cut_rows += rows as u64;
                    b.cut_bytes += end as u64;
                }
            }
        }
        for &(i, c) in &segments {
            let b = &mut self.buffer[i];
            b.taken += c as u64;
            b.remaining -= c;
        }
        self.buffer.retain(|b| b.remaining > 0);
        self.remaining -= n;
        let batch = self.finish(out, first, started, &done)?;
        Ok(batch)
    }

    fn gathered_batch(&mut self, g: Gathered) -> Result<Batch> {
        let n = g.records.len();
        self.acc.bytes += g.bytes;
        let first = match g.records.first() {
            Some(r) => (self.config.inputs[r.input].name().clone(), r.record),
            None => (Arc::from(""), 0),
        };
        let started = Instant::now();
        let works = [Work {
            source: Source::Records(&g.records),
            item: WorkItem {
                records: n as u64,
                inflate_bytes: 0,
                splittable: true,
            },
        }];
        let items = [works[0].item];
        let plan = self.plan(&items);
        let shares = autotune::share(&plan, &items, &self.model);
        let mut out = self.decoders[0]
            .new_batch(0)
            .reusing(self.spare.take(), &self.sizes, n);
        let ctx = Ctx {
            work: &works,
            inputs: &self.config.inputs,
            limits: &self.config.read.limits,
        };
        let done = decode_batch(
            self.pool.as_ref().map(ParsePool::get),
            &mut self.decoders,
            &mut self.parts,
            &ctx,
            &plan,
            &shares,
            &mut out,
        )?;
        self.finish(out, first, started, &done)
    }

    /// Finishes a decoded batch and counts it.
    fn finish(
        &mut self,
        mut out: grist_tensor::BatchBuilder,
        first: (Arc<str>, u64),
        started: Instant,
        done: &crate::decode::BatchOut,
    ) -> Result<Batch> {
        let batch = out.finish().map_err(|source| Error::Batch {
            at: Box::new(Location::record(first.0, first.1)),
            source: Box::new(source),
        })?;
        self.sizes.measure(&batch);
        let threads = done.timings.len().max(1);
        // Not learnt from: the first batch of a run of a thread count
        // (threads just woken, caches cold), and the loader's first
        // batches (the threads' memory still to fault in: 3-4x the time
        // of the batches after).
        if threads == self.acc.last_threads && self.acc.batches >= WARMUP_BATCHES {
            self.calibrator.observe_shared(
                &mut self.model,
                &done.timings,
                done.wall,
                done.longest_share,
            );
        }
        if self.acc.threads_used.len() < threads {
            self.acc.threads_used.resize(threads, 0);
        }
        self.acc.threads_used[threads - 1] += 1;
        self.acc.last_threads = threads;
        self.acc.decode += started.elapsed();
        self.acc.records += batch.rows() as u64;
        self.acc.batches += 1;
        // Saturating: a restored state may hold any count.
        self.batches = self.batches.saturating_add(1);
        Ok(batch)
    }
}

/// The most parse threads a loader takes ([`Threads::Fixed`]).
pub const MAX_THREADS: usize = 1024;

/// How many batches in a row autotune gives a thread count it is trying.
const TRIAL_RUN: u64 = 4;

/// How many of the loader's first batches autotune does not learn from.
const WARMUP_BATCHES: u64 = 2;

/// How much faster, by its model, fewer threads must be for autotune to
/// prefer them for a batch of at least [`PREFER_MORE_FROM`] seconds.
const PREFER_MORE: f64 = 0.1;

/// The predicted batch time from which autotune prefers more threads.
const PREFER_MORE_FROM: f64 = 0.5e-3;

fn unexpected(item: &Item) -> Error {
    Error::ThreadPanicked {
        thread: "prefetch",
        message: format!("unexpected item {item:?}"),
    }
}

impl Iterator for Loader {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        self.next_batch()
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.stop();
    }
}
