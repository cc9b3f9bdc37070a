//! Conversion between the formats: source → batch → sink.
//!
//! The loader reads the sources in file order (one epoch, no shuffle) on
//! this thread; batches go through a bounded channel to `threads` encoding
//! threads (the target format's [`Encoder`]); the records come back in
//! order to this thread, which writes them into output files of the
//! target format ([`Format::create`]: each atomic, through the storage
//! layer), `part-00000.<ext>`, `part-00001.<ext>`, ..., then `spec.json`
//! (the spec in the target format's form, [`Format::write_spec`]).
//! Memory stays bounded by the batches in flight.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use grist_io::{Address, Storage};
use grist_loader::{Epochs, Threads};
use grist_tensor::{
    Batch, BoxError, Encoder, Format, Location, RecordSink, SpecFile, StorageError, TensorError,
    WriteOptions, Written,
};

/// The name of the spec file written beside the outputs.
pub const SPEC_FILE: &str = "spec.json";

/// How output files are cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Split {
    /// A new file after this many records (at least 1).
    RecordsPerFile(u64),
    /// This many files (at least 1), of equal record counts (the last
    /// shorter); the inputs' records are counted first.
    Files(usize),
}

/// Where and how [`convert`] writes: the target format, the output folder
/// (a path, or an object-store prefix such as `s3://bucket/out/`), and
/// the options of the write.
///
/// ```
/// let target = grist::ConvertTarget::new(grist::registry().get("avro")?, "out/")
///     .with_records_per_file(100_000)
///     .with_threads(4);
/// assert_eq!(target.format().id(), "avro");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct ConvertTarget {
    format: Arc<dyn Format>,
    out: String,
    options: WriteOptions,
    split: Split,
    threads: usize,
    batch_size: usize,
    storage: Storage,
    source_format: Option<Arc<dyn Format>>,
}

impl ConvertTarget {
    /// Files of `format` in the folder `out` (a path or URL).
    pub fn new(format: Arc<dyn Format>, out: impl Into<String>) -> Self {
        ConvertTarget {
            format,
            out: out.into(),
            options: WriteOptions::default(),
            split: Split::RecordsPerFile(1_000_000),
            threads: 2,
            batch_size: 1024,
            storage: Storage::new(),
            source_format: None,
        }
    }

    /// The options of the target format (compression, codec, lossy
    /// conversions, ...). By default, [`WriteOptions::default`].
    pub fn with_options(mut self, options: WriteOptions) -> Self {
        self.options = options;
        self
    }

    /// A new output file after `records` records (at least 1). By default,
    /// 1,000,000.
    pub fn with_records_per_file(mut self, records: u64) -> Self {
        self.split = Split::RecordsPerFile(records.max(1));
        self
    }

    /// Exactly `files` output files (at least 1; fewer records than files
    /// leave the last ones empty). By default, 1,000,000 records per file
    /// instead.
    pub fn with_files(mut self, files: usize) -> Self {
        self.split = Split::Files(files.max(1));
        self
    }

    /// Encoding threads (at least 1); reading and writing each take one
    /// more. By default, 2.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Records per batch read and encoded at once (at least 1). By
    /// default, 1024.
    pub fn with_batch_size(mut self, records: usize) -> Self {
        self.batch_size = records.max(1);
        self
    }

    /// The storage both the sources and the outputs go through. By
    /// default, [`Storage::new`].
    pub fn with_storage(mut self, storage: Storage) -> Self {
        self.storage = storage;
        self
    }

    /// The sources' format (such as FFRecord configured for OFRecord
    /// payloads). By default, detected by the [`registry`](crate::registry).
    pub fn with_source_format(mut self, format: Arc<dyn Format>) -> Self {
        self.source_format = Some(format);
        self
    }

    /// The target format.
    pub fn format(&self) -> &Arc<dyn Format> {
        &self.format
    }
}

/// What [`convert`] wrote.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConvertReport {
    /// The output files, in order, with what each holds.
    pub files: Vec<(Address, Written)>,
    /// The records written (every input record, once).
    pub records: u64,
    /// The bytes written (see [`Written::bytes`]).
    pub bytes: u64,
    /// The spec written to `spec.json`: the outputs read back with it.
    pub spec: SpecFile,
    /// Where `spec.json` is.
    pub spec_address: Address,
}

/// Why [`convert`] failed. Output files finished before the failure stay
/// (each whole); the file being written is left out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// No spec was given and none can be had from the sources.
    #[error("{format} sources need a spec to be converted (spec inference is not built yet)")]
    NeedsSpec {
        /// The sources' format.
        format: &'static str,
    },
    /// The target cannot hold the spec (refused before any output was
    /// written), or an option is not the format's.
    #[error("cannot write {format}")]
    Target {
        /// The target format.
        format: &'static str,
        /// What it refused (naming the feature).
        #[source]
        source: BoxError,
    },
    /// Reading the sources failed (the error names the file and record).
    #[error(transparent)]
    Read(#[from] grist_loader::Error),
    /// Expanding or counting the sources failed.
    #[error("{what}")]
    Sources {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// A batch could not be encoded.
    #[error("{at}: the batch of {} records from here", end - first)]
    Encode {
        /// Where the batch starts: its source file and record number in
        /// it (when the sources could be counted again).
        at: Box<Location>,
        /// The batch's first record, counting all the sources in order.
        first: u64,
        /// One past its last record, counting likewise.
        end: u64,
        /// The cause (naming the feature).
        #[source]
        source: BoxError,
    },
    /// Writing an output failed.
    #[error("{file}")]
    Write {
        /// The output file.
        file: Arc<str>,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// The output address is not a path or URL.
    #[error("bad output address {out:?}")]
    BadOutput {
        /// The address as given.
        out: String,
        /// The cause.
        #[source]
        source: grist_io::Error,
    },
}

/// Converts `sources` (files, folders, globs or object-store URLs, as the
/// [`loader`](crate::loader) takes them) described by `spec` into files of
/// `target`'s format.
///
/// Records keep their order (files in order, records in file order; one
/// pass, no shuffle). Every feature of the spec is written; what the
/// target cannot hold (float64 in tf.Example without
/// [`Lossy::Allow`](grist_tensor::Lossy::Allow), a ragged feature in Avro,
/// ...) is refused before any output exists, naming the feature. The
/// spec in the target's form is written last as `spec.json` beside the
/// outputs, so that the loader reads them back as the sources read. With
/// no input records, one empty file is written.
///
/// `spec` is required for now (inference comes later).
pub fn convert<P: Into<PathBuf>>(
    sources: impl IntoIterator<Item = P>,
    spec: Option<&SpecFile>,
    target: &ConvertTarget,
) -> Result<ConvertReport, ConvertError> {
    let sources: Vec<PathBuf> = sources.into_iter().map(Into::into).collect();
    let storage = &target.storage;
    let format = &target.format;
    let target_err = |source: BoxError| ConvertError::Target {
        format: format.name(),
        source,
    };
    let texts: Vec<String> = sources
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let (source_format, inputs) = crate::registry()
        .expand(storage, &texts, target.source_format.clone())
        .map_err(|e| ConvertError::Sources {
            what: "finding the sources".into(),
            source: Box::new(e),
        })?;
    let Some(spec) = spec else {
        return Err(ConvertError::NeedsSpec {
            format: source_format.name(),
        });
    };
    // Everything the target refuses, it refuses here, before any output.
    let encoder: Arc<dyn Encoder> =
        Arc::from(format.encoder(spec, &target.options).map_err(target_err)?);
    let written_spec = encoder.spec().clone();
    let out = Address::parse(&target.out).map_err(|source| ConvertError::BadOutput {
        out: target.out.clone(),
        source,
    })?;
    let per_file = match target.split {
        Split::RecordsPerFile(n) => n.max(1),
        Split::Files(files) => {
            let mut total = 0u64;
            for input in &inputs {
                total += source_format
                    .count(input, &grist_tensor::ReadOptions::default())
                    .map_err(|source| ConvertError::Sources {
                        what: format!("counting the records of {}", input.name()),
                        source,
                    })?;
            }
            total.div_ceil(files as u64).max(1)
        }
    };
    let files_wanted = match target.split {
        Split::Files(n) => n,
        Split::RecordsPerFile(_) => 1,
    };
    let mut loader = crate::loader()
        .with_storage(storage.clone())
        .with_paths(sources)
        .with_spec_file(spec.clone())
        .with_batch_size(target.batch_size)
        .with_drop_remainder(false)
        .with_epochs(Epochs::Count(1))
        .with_threads(Threads::Fixed(1));
    if let Some(f) = &target.source_format {
        loader = loader.with_format(f.clone());
    }
    // The source's decoder refuses what it cannot read before any output
    // exists, too.
    let mut loader = loader.build()?;
    storage
        .create_dir_all(&out)
        .map_err(|e| ConvertError::Write {
            file: out.name().clone(),
            source: Box::new(StorageError::new(out.name().clone(), e)),
        })?;

    let threads = target.threads;

    let mut writer = Parts {
        storage,
        format,
        out: &out,
        spec: &written_spec,
        options: &target.options,
        per_file,
        current: None,
        files: Vec::new(),
    };
    let result = std::thread::scope(|scope| -> Result<(), ConvertError> {
        // Bounded: at most `threads` batches wait to be encoded and
        // `threads` encoded ones to be written, besides those in hand.
        let (batch_tx, batch_rx) = sync_channel::<(u64, u64, Batch)>(threads);
        let batch_rx = Arc::new(Mutex::new(batch_rx));
        let (rec_tx, rec_rx) = sync_channel::<Encoded>(threads);
        for _ in 0..threads {
            let rx = Arc::clone(&batch_rx);
            let tx = rec_tx.clone();
            let encoder = Arc::clone(&encoder);
            scope.spawn(move || encode_loop(&rx, &tx, &*encoder));
        }
        // Only the encoders hold the batches' receiver and the records'
        // sender, so that either side stopping stops the other.
        drop((batch_rx, rec_tx));
        let reader = scope.spawn(move || read_loop(&mut loader, batch_tx));
        // Records come back in any order: put them back in batch order.
        let mut pending = BTreeMap::new();
        let mut next = 0u64;
        let mut failed = None;
        for (first, end, records) in rec_rx.iter() {
            pending.insert(first, (end, records));
            while let Some((end, records)) = pending.remove(&next) {
                let records = match records {
                    Ok(r) => r,
                    Err(source) => {
                        failed = Some(ConvertError::Encode {
                            at: Box::new(locate(&*source_format, &inputs, next)),
                            first: next,
                            end,
                            source,
                        });
                        break;
                    }
                };
                if let Err(e) = writer.write(&records) {
                    failed = Some(e);
                    break;
                }
                next = end;
            }
            if failed.is_some() {
                break;
            }
        }
        // Stop the encoders and the reader: dropping the receiver makes
        // their sends fail.
        drop(rec_rx);
        // A panic is a bug, not bad input: it goes on unwinding.
        let read = reader
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        match failed {
            Some(e) => Err(e),
            None => read.map_err(ConvertError::from),
        }
    });
    result?;
    writer.finish_all(files_wanted)?;

    let spec_address = out.join(SPEC_FILE);
    write_spec_file(storage, &spec_address, &written_spec)?;
    let records = writer.files.iter().map(|(_, w)| w.records).sum();
    let bytes = writer.files.iter().map(|(_, w)| w.bytes).sum();
    Ok(ConvertReport {
        files: writer.files,
        records,
        bytes,
        spec: written_spec,
        spec_address,
    })
}

/// Where record `n` of the conversion (counting every input's records in
/// order) is: its file and its number there, found by counting the
/// inputs again; the first input and `n` when counting fails.
fn locate(format: &dyn Format, inputs: &[grist_tensor::Input], n: u64) -> Location {
    let mut before = 0u64;
    for input in inputs {
        let Ok(count) = format.count(input, &grist_tensor::ReadOptions::default()) else {
            break;
        };
        if n < before + count {
            return Location::record(input.name().clone(), n - before);
        }
        before += count;
    }
    let file = inputs.first().map(|i| i.name().clone()).unwrap_or_default();
    Location::record(file, n)
}

/// The loader's batches, numbered by their first record, into `tx` until
/// the end, an error, or the receiving side hanging up.
fn read_loop(
    loader: &mut grist_loader::Loader,
    tx: SyncSender<(u64, u64, Batch)>,
) -> Result<(), grist_loader::Error> {
    let mut first = 0u64;
    while let Some(batch) = loader.next_batch() {
        let batch = batch?;
        let end = first + batch.rows() as u64;
        if tx.send((first, end, batch)).is_err() {
            break;
        }
        first = end;
    }
    Ok(())
}

/// A batch's records (or why not), numbered by its first and end records.
type Encoded = (u64, u64, Result<Vec<Vec<u8>>, BoxError>);

/// Encodes batches from `rx` into `tx` until either side hangs up.
fn encode_loop(
    rx: &Mutex<Receiver<(u64, u64, Batch)>>,
    tx: &SyncSender<Encoded>,
    encoder: &dyn Encoder,
) {
    loop {
        let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok((first, end, batch)) = next else {
            return;
        };
        if tx.send((first, end, encoder.encode(&batch))).is_err() {
            return;
        }
    }
}

/// The output files: the one being written, and those finished.
struct Parts<'a> {
    storage: &'a Storage,
    format: &'a Arc<dyn Format>,
    out: &'a Address,
    spec: &'a SpecFile,
    options: &'a WriteOptions,
    per_file: u64,
    current: Option<(Address, Box<dyn RecordSink>)>,
    files: Vec<(Address, Written)>,
}

impl Parts<'_> {
    fn write_err(address: &Address, source: BoxError) -> ConvertError {
        ConvertError::Write {
            file: address.name().clone(),
            source,
        }
    }

    /// Opens the next file.
    fn open(&mut self) -> Result<(), ConvertError> {
        let n = self.files.len();
        let address = self.out.join(&self.format.part_name(n, self.options));
        let sink = self
            .format
            .create(self.storage, &address, self.spec, self.options)
            .map_err(|e| Self::write_err(&address, e))?;
        self.current = Some((address, sink));
        Ok(())
    }

    /// Commits the current file.
    fn close(&mut self) -> Result<(), ConvertError> {
        if let Some((address, sink)) = self.current.take() {
            let written = sink.finish().map_err(|e| Self::write_err(&address, e))?;
            self.files.push((address, written));
        }
        Ok(())
    }

    fn write(&mut self, records: &[Vec<u8>]) -> Result<(), ConvertError> {
        for record in records {
            if self.current.is_none() {
                self.open()?;
            }
            let mut full = false;
            if let Some((address, sink)) = &mut self.current {
                sink.write(record)
                    .map_err(|e| Self::write_err(address, e))?;
                full = sink.records() >= self.per_file;
            }
            if full {
                self.close()?;
            }
        }
        Ok(())
    }

    /// Commits the last file, and writes empty ones up to `files` (at
    /// least one, so that an empty input gives a dataset that reads as
    /// empty).
    fn finish_all(&mut self, files: usize) -> Result<(), ConvertError> {
        self.close()?;
        while self.files.len() < files.max(1) {
            self.open()?;
            self.close()?;
        }
        Ok(())
    }
}

/// `spec` as JSON: `{"features": [...]}`, or `{"context_features": [...],
/// "sequence_features": [...]}` for a sequence spec; what
/// [`SpecFile::from_json`] reads back.
// TODO(merge): replace with `SpecFile::to_json()` when spec serialization
// lands.
fn spec_json(spec: &SpecFile) -> serde_json::Value {
    let list = |specs: &[grist_tensor::FeatureSpec]| {
        serde_json::to_value(specs).unwrap_or_else(|_| serde_json::Value::Array(Vec::new()))
    };
    let mut map = serde_json::Map::new();
    if spec.sequence {
        map.insert("context_features".into(), list(&spec.context_features));
        map.insert("sequence_features".into(), list(&spec.sequence_features));
    } else {
        map.insert("features".into(), list(&spec.features));
    }
    serde_json::Value::Object(map)
}

fn write_spec_file(
    storage: &Storage,
    address: &Address,
    spec: &SpecFile,
) -> Result<(), ConvertError> {
    let err = |source: BoxError| ConvertError::Write {
        file: address.name().clone(),
        source,
    };
    let storage_err = |e| err(Box::new(StorageError::new(address.name().clone(), e)));
    let mut text = serde_json::to_vec_pretty(&spec_json(spec))
        .map_err(|source| err(Box::new(TensorError::SpecJson { source })))?;
    text.push(b'\n');
    let mut file = storage.create(address).map_err(storage_err)?;
    file.write_all(&text).map_err(|source| {
        err(Box::new(TensorError::Io {
            at: Box::new(Location::file(address.name().clone())),
            source,
        }))
    })?;
    file.commit().map_err(storage_err)
}
