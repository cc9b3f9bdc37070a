//! Conversion between the formats: source → batch → sink.
//!
//! One thread reads the sources in file order as their format's chunks
//! ([`Format::stream`]) and cuts them into batches of rows; `threads`
//! threads each take a batch, decode it (the source's [`Decoder`]) and
//! encode it (the target format's [`Encoder`]) while its columns are in
//! that core's cache; the records come back in order to this thread,
//! which writes them into output files of the target format
//! ([`Format::create`]: each atomic, through the storage layer),
//! `part-00000.<ext>`, `part-00001.<ext>`, ..., then `spec.json` (the spec
//! in the target format's form, [`Format::write_spec`]). A shard takes
//! every `count`-th file, as the loader's
//! [`with_shard`](grist_loader::LoaderBuilder::with_shard) does; a shard
//! of fewer files than shards reads the loader's share of the records, its
//! batches going from the loader's thread to the encoding threads.
//! Memory stays bounded by the batches in flight.
//!
//! Resuming (see [`crate::manifest`] for the files): part `k` holds the
//! records `[k·per_file, (k+1)·per_file)` of the conversion's order, which
//! is the same on every run, and each part is committed whole and then
//! entered in the journal. A rerun keeps the journal's parts that are
//! there with their sizes, does not decode or encode their records (the
//! reading thread drops the batches they cover, and the writer the first
//! records of a batch that straddles the boundary) and goes on with the
//! next part.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use std::sync::atomic::{AtomicU64, Ordering};

use grist_io::{Address, Storage};
use grist_loader::{Epochs, Threads};
use grist_tensor::{
    Batch, BoxError, Encoder, Format, InferNote, InferOptions, Inferred, Location, RecordBuf,
    RecordSink, SpecFile, StorageError, WriteOptions, Written,
};

use crate::manifest::{self, Manifest, ManifestPart, Shard};

/// The name of the spec file written beside the outputs.
pub const SPEC_FILE: &str = "spec.json";

/// The records per batch a conversion reads and encodes at once, unless
/// [`ConvertTarget::with_batch_size`] says otherwise: small enough that a
/// batch's columns are still in the core's cache when they are encoded
/// and its records when they are written (docs/BENCHMARKS.md,
/// "Conversion").
pub const DEFAULT_BATCH: usize = 256;

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
    reader_schema: Option<serde_json::Value>,
    shard: Shard,
    force: bool,
    progress: Option<ProgressFn>,
}

/// How far a conversion is, as [`ConvertTarget::with_progress`]'s
/// callback is told after each batch written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConvertProgress {
    /// Records in the parts a previous run completed (not written again).
    pub skipped: u64,
    /// Records written by this run.
    pub records: u64,
    /// The bytes of those records (encoded, before framing and
    /// compression).
    pub bytes: u64,
    /// The records of all the inputs (every shard's), when the conversion
    /// counted them to plan its files
    /// ([`with_files`](ConvertTarget::with_files)); `None` otherwise. A
    /// progress bar takes its end from here rather than counting the
    /// inputs again.
    pub total: Option<u64>,
}

/// The progress callback.
#[derive(Clone)]
struct ProgressFn(Arc<dyn Fn(&ConvertProgress) + Send + Sync>);

impl std::fmt::Debug for ProgressFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressFn")
    }
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
            batch_size: DEFAULT_BATCH,
            storage: Storage::new(),
            source_format: None,
            reader_schema: None,
            shard: Shard::WHOLE,
            force: false,
            progress: None,
        }
    }

    /// Converts only shard `index` of `count` (`index < count`): the
    /// loader's share of rank `index` of `count` ranks (whole files when
    /// there are at least `count` files, else chunks of records), so that
    /// `count` runs (on as many machines) convert the sources together,
    /// each record once. Shard `i` names its parts `part-<i>-<part>...`
    /// (`part-00003-00001.tfrecord`) and its manifest
    /// `manifest-<i>-of-<count>.json`; [`merge_shards`](crate::merge_shards)
    /// writes `manifest.json` once all are done. With
    /// [`with_files`](Self::with_files), the records per file are those of
    /// the whole conversion's split. By default, shard 0 of 1: everything.
    #[must_use]
    pub fn with_shard(mut self, index: usize, count: usize) -> Self {
        self.shard = Shard { index, count };
        self
    }

    /// Whether to replace the outputs of another conversion found in the
    /// output folder (its `convert.json` differs, or there is none beside
    /// files named as outputs): those files are removed first. Without it
    /// the conversion is refused before anything is written. The same
    /// conversion is resumed either way. By default, `false`.
    #[must_use]
    pub fn with_force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    /// A function called after each batch is written, from the writing
    /// thread (keep it short). By default, none.
    #[must_use]
    pub fn with_progress(mut self, f: impl Fn(&ConvertProgress) + Send + Sync + 'static) -> Self {
        self.progress = Some(ProgressFn(Arc::new(f)));
        self
    }

    /// The options of the target format (compression, codec, lossy
    /// conversions, ...). By default, [`WriteOptions::default`].
    #[must_use]
    pub fn with_options(mut self, options: WriteOptions) -> Self {
        self.options = options;
        self
    }

    /// A new output file after `records` records (at least 1). By default,
    /// 1,000,000.
    #[must_use]
    pub fn with_records_per_file(mut self, records: u64) -> Self {
        self.split = Split::RecordsPerFile(records.max(1));
        self
    }

    /// Exactly `files` output files (at least 1; fewer records than files
    /// leave the last ones empty). By default, 1,000,000 records per file
    /// instead.
    #[must_use]
    pub fn with_files(mut self, files: usize) -> Self {
        self.split = Split::Files(files.max(1));
        self
    }

    /// Threads that decode and encode batches (at least 1; they also
    /// count the inputs when a count is needed); reading and writing each
    /// take one more. By default, 2.
    #[must_use]
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Records per batch read and encoded at once (at least 1). By
    /// default, [`DEFAULT_BATCH`].
    #[must_use]
    pub fn with_batch_size(mut self, records: usize) -> Self {
        self.batch_size = records.max(1);
        self
    }

    /// The storage both the sources and the outputs go through. By
    /// default, [`Storage::new`].
    #[must_use]
    pub fn with_storage(mut self, storage: Storage) -> Self {
        self.storage = storage;
        self
    }

    /// The sources' format (such as FFRecord configured for OFRecord
    /// payloads). By default, detected by the [`registry`](crate::registry).
    #[must_use]
    pub fn with_source_format(mut self, format: Arc<dyn Format>) -> Self {
        self.source_format = Some(format);
        self
    }

    /// Avro sources: read them through this reader schema (its JSON;
    /// schema evolution), replacing the spec's `reader_schema`; without a
    /// spec, the spec is inferred from it. The outputs are written in
    /// their own form, without it. Other source formats refuse it.
    #[must_use]
    pub fn with_reader_schema(mut self, schema: serde_json::Value) -> Self {
        self.reader_schema = Some(schema);
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
    /// The output files, in order, with what each holds (those of a
    /// previous run too, with their records and file size).
    pub files: Vec<(Address, Written)>,
    /// The first `skipped_parts` of `files` were complete already (a
    /// previous run wrote them): their records were not encoded again.
    pub skipped_parts: usize,
    /// The records of those parts.
    pub skipped_records: u64,
    /// The records this run encoded (those it wrote, plus the few before
    /// the end of the skipped parts in a batch that straddles it).
    pub encoded_records: u64,
    /// Whether the conversion was complete already (its manifest there,
    /// with every part): nothing was done.
    pub up_to_date: bool,
    /// The manifest written (`manifest.json`, or the shard's
    /// `manifest-<i>-of-<n>.json`).
    pub manifest: Manifest,
    /// Where it is.
    pub manifest_address: Address,
    /// The records written (every input record, once).
    pub records: u64,
    /// The bytes written (see [`Written::bytes`]).
    pub bytes: u64,
    /// The spec written to `spec.json`: the outputs read back with it.
    pub spec: SpecFile,
    /// Where `spec.json` is.
    pub spec_address: Address,
    /// With no spec given: the notes of its inference (features left out
    /// or guessed at, [`infer_spec`]).
    pub notes: Vec<InferNote>,
}

/// Why [`convert`] failed. Output files finished before the failure stay
/// (each whole); the file being written is left out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// No spec was given and no feature could be inferred from the
    /// sources.
    #[error("no feature of the {format} sources could be inferred: a spec is needed")]
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
    /// The output folder holds the outputs of another conversion (its
    /// `convert.json` differs), or files named as outputs without a
    /// `convert.json`: nothing was written (see
    /// [`ConvertTarget::with_force`]).
    #[error("{file}: the output folder holds another conversion's outputs (force replaces them)")]
    DifferentConversion {
        /// `convert.json`, or the first output of an unknown conversion.
        file: Arc<str>,
    },
    /// An input is in the output folder: converting into it could
    /// overwrite (or, forced, remove) the inputs.
    #[error("{file} is an input in the output folder: convert into another folder")]
    InputInOutput {
        /// The input.
        file: Arc<str>,
    },
    /// A shard that is not one of its count.
    #[error("shard {index} of {count}: the index must be below the count")]
    BadShard {
        /// The shard's index.
        index: usize,
        /// The count.
        count: usize,
    },
    /// Merging: a shard's manifest is missing (the shard has not
    /// finished).
    #[error("{file} is missing: shard {shard} of {count} has not finished")]
    MissingShard {
        /// The manifest expected.
        file: Arc<str>,
        /// The shard.
        shard: usize,
        /// The number of shards.
        count: usize,
    },
    /// Merging: a shard's manifest is of another conversion than
    /// `convert.json`, or incomplete.
    #[error("{file} is not a complete manifest of the conversion in convert.json")]
    ShardMismatch {
        /// The shard's manifest.
        file: Arc<str>,
    },
    /// A part a manifest lists is missing or of another size.
    #[error("{file} is missing or not the size its manifest says")]
    MissingPart {
        /// The part.
        file: Arc<str>,
    },
    /// There is no conversion there (no `convert.json`, or no manifest).
    #[error("{file} not found: no conversion there")]
    NoConversion {
        /// The file looked for.
        file: Arc<str>,
    },
    /// A conversion's own file (`convert.json`, a manifest) cannot be
    /// read.
    #[error("{file}: not a conversion file grist can read")]
    BadState {
        /// The file.
        file: Arc<str>,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
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
/// spec in the target's form is written as `spec.json` beside the
/// outputs, so that the loader reads them back as the sources read. With
/// no input records, one empty file is written.
///
/// Before any part, `convert.json` records what the conversion is; an
/// output folder holding another conversion's outputs is refused unless
/// [`with_force`](ConvertTarget::with_force). Run again with the same
/// arguments, `convert` resumes: the parts a previous run completed are
/// kept and their records not encoded again; a finished conversion (its
/// manifest there) is left as it is ([`ConvertReport::up_to_date`]). The
/// manifest (`manifest.json`, or the shard's) is written last.
///
/// Without `spec`, the spec is inferred from the sources as
/// [`infer_spec`] infers it (Avro: from the writer schema; the others: by
/// sampling their first records), and its notes are in the report.
pub fn convert<P: Into<PathBuf>>(
    sources: impl IntoIterator<Item = P>,
    spec: Option<&SpecFile>,
    target: &ConvertTarget,
) -> Result<ConvertReport, ConvertError> {
    let sources: Vec<PathBuf> = sources.into_iter().map(Into::into).collect();
    let storage = &target.storage;
    let format = &target.format;
    let shard = target.shard;
    if shard.count == 0 || shard.index >= shard.count {
        return Err(ConvertError::BadShard {
            index: shard.index,
            count: shard.count,
        });
    }
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
    let mut notes = Vec::new();
    let owned;
    let spec = match (spec, &target.reader_schema) {
        (Some(spec), None) => spec,
        (Some(spec), Some(reader)) => {
            owned = SpecFile {
                reader_schema: Some(reader.clone()),
                ..spec.clone()
            };
            &owned
        }
        (None, reader) => {
            let mut options = InferOptions::default();
            if let Some(reader) = reader {
                options = options.with_reader_schema(reader.clone());
            }
            let i = infer_inputs(&source_format, &inputs, &options)?;
            notes = i.notes;
            owned = i.spec;
            &owned
        }
    };
    // Everything the target refuses, it refuses here, before any output.
    // A reader schema is how the sources are read; the outputs are written
    // in their own form and read back without it.
    let out_spec = SpecFile {
        reader_schema: None,
        ..spec.clone()
    };
    let encoder: Arc<dyn Encoder> = Arc::from(
        format
            .encoder(&out_spec, &target.options)
            .map_err(target_err)?,
    );
    let written_spec = encoder.spec().clone();
    let out = Address::parse(&target.out).map_err(|source| ConvertError::BadOutput {
        out: target.out.clone(),
        source,
    })?;
    if let Some(input) = inputs
        .iter()
        .find(|i| out.join(i.file_name()).as_str() == i.address().as_str())
    {
        return Err(ConvertError::InputInOutput {
            file: input.name().clone(),
        });
    }
    let mut sizes = Vec::with_capacity(inputs.len());
    for input in &inputs {
        let size = storage
            .stat(input.address())
            .map_err(|e| ConvertError::Sources {
                what: format!("reading the size of {}", input.name()),
                source: Box::new(StorageError::new(input.name().clone(), e)),
            })?
            .map_or(0, |m| m.size);
        sizes.push(size);
    }
    let identity = identity(target, spec, &texts, &*source_format, &inputs, &sizes);
    let count_inputs = |framed: bool| -> Result<u64, ConvertError> {
        // The framing alone: the loader checks the checksums as it reads.
        let options = grist_tensor::ReadOptions::default().with_check_crc(!framed);
        let counts = each_input(&inputs, target.threads, |input| {
            if framed {
                source_format.framed_count(input, &options)
            } else {
                source_format.count(input, &options)
            }
        });
        let mut counted = 0u64;
        for (input, count) in inputs.iter().zip(counts) {
            counted += count.map_err(|source| ConvertError::Sources {
                what: format!("counting the records of {}", input.name()),
                source,
            })?;
        }
        Ok(counted)
    };
    let mut total = None;
    let per_file = match target.split {
        Split::RecordsPerFile(n) => n.max(1),
        Split::Files(files) => {
            let counted = count_inputs(false)?;
            total = Some(counted);
            counted.div_ceil(files as u64).max(1)
        }
    };
    // A format whose header holds the count writes each file in place
    // when told its count up front: the inputs are counted for it, by
    // their framing. (Not for a shard: its share's count is not known
    // before reading it.)
    if total.is_none() && shard.count == 1 && format.wants_record_counts() {
        total = Some(count_inputs(true)?);
    }
    let expected = total.filter(|_| shard.count == 1);
    // A shard's files are cut by the whole conversion's split: no padding.
    let files_wanted = match target.split {
        Split::Files(n) if shard.count == 1 => n,
        _ => 1,
    };
    // A shard of a dataset of at least as many files as shards takes
    // every `count`-th file from its `index` on, as the loader's
    // `with_shard` does; a shard of fewer files reads the loader's share
    // of the records. The source's decoder (the loader's, or the one the
    // encoding threads clone) refuses what it cannot read before any
    // output exists, too.
    let by_file = shard.count > 1 && inputs.len() >= shard.count;
    let share: Vec<grist_tensor::Input> = inputs
        .iter()
        .enumerate()
        .filter(|(j, _)| !by_file || j % shard.count == shard.index)
        .map(|(_, input)| input.clone())
        .collect();
    let mut source = if shard.count > 1 && !by_file {
        let mut loader = crate::loader()
            .with_storage(storage.clone())
            .with_paths(sources)
            .with_spec_file(spec.clone())
            .with_batch_size(target.batch_size)
            .with_drop_remainder(false)
            .with_epochs(Epochs::Count(1))
            .with_threads(Threads::Fixed(1))
            .with_shard(shard.index, shard.count);
        if let Some(f) = &target.source_format {
            loader = loader.with_format(f.clone());
        }
        Source::Loader(Box::new(loader.build()?))
    } else {
        // The share's chunks go straight to the encoding threads, each of
        // which decodes a batch and encodes it while its columns are in
        // that core's cache.
        let decoder = source_format
            .decoder(spec, grist_tensor::Limits::default())
            .map_err(grist_loader::Error::Format)?;
        Source::Chunks(decoder)
    };
    storage
        .create_dir_all(&out)
        .map_err(|e| ConvertError::Write {
            file: out.name().clone(),
            source: Box::new(StorageError::new(out.name().clone(), e)),
        })?;
    manifest::claim(storage, &out, &identity, target.force)?;
    // What a killed run of this shard left half-written.
    storage
        .remove_temporaries(&out, &|name| shard.owns(name))
        .map_err(|e| ConvertError::Write {
            file: out.name().clone(),
            source: Box::new(StorageError::new(out.name().clone(), e)),
        })?;

    let manifest_address = out.join(&shard.manifest_name());
    let journal_address = out.join(&shard.journal_name());
    let done = previous_parts(storage, &out, &identity, shard, &manifest_address)?;
    let spec_address = out.join(SPEC_FILE);
    if let Some(manifest) = done.complete {
        // Finished before (perhaps killed before removing the journal).
        storage
            .remove(&journal_address)
            .map_err(|e| ConvertError::Write {
                file: journal_address.name().clone(),
                source: Box::new(StorageError::new(journal_address.name().clone(), e)),
            })?;
        return Ok(ConvertReport {
            files: parts_written(&out, &manifest.parts),
            skipped_parts: manifest.parts.len(),
            skipped_records: manifest.records,
            encoded_records: 0,
            up_to_date: true,
            records: manifest.records,
            bytes: manifest.bytes,
            spec: written_spec,
            spec_address,
            notes,
            manifest,
            manifest_address,
        });
    }
    let kept = done.parts;
    let skip: u64 = kept.iter().map(|p| p.records).sum();

    let threads = target.threads;
    let encoded = AtomicU64::new(0);
    let mut writer = Parts {
        storage,
        format,
        out: &out,
        spec: &written_spec,
        options: &target.options,
        per_file,
        expected,
        shard,
        current: None,
        files: parts_written(&out, &kept),
        entries: kept,
        identity: &identity,
        journal: &journal_address,
        progress: target.progress.clone(),
        counts: ConvertProgress {
            skipped: skip,
            total,
            ..ConvertProgress::default()
        },
    };
    let skipped_parts = writer.files.len();
    // Record buffers go round between the encoders and the writer.
    let free = Spare::default();
    let result = std::thread::scope(|scope| -> Result<(), ConvertError> {
        // Bounded: at most `threads` batches wait to be encoded and
        // `threads` encoded ones to be written, besides those in hand.
        let (rec_tx, rec_rx) = sync_channel::<Encoded>(threads);
        let free = &free;
        let encoded = &encoded;
        let reader = match &mut source {
            Source::Loader(loader) => {
                let (batch_tx, batch_rx) = sync_channel::<ToEncode>(threads);
                let batch_rx = Arc::new(Mutex::new(batch_rx));
                let (done_tx, done_rx) = sync_channel::<Batch>(threads);
                for _ in 0..threads {
                    let rx = Arc::clone(&batch_rx);
                    let tx = rec_tx.clone();
                    let done = done_tx.clone();
                    let encoder = Arc::clone(&encoder);
                    scope.spawn(move || {
                        encode_loop(Encoding {
                            rx: &rx,
                            tx,
                            done,
                            free,
                            encoder: &*encoder,
                            encoded,
                        })
                    });
                }
                // Only the encoders hold the batches' receiver and the
                // records' sender, so that either side stopping stops the
                // other.
                drop((batch_rx, rec_tx, done_tx));
                scope.spawn(move || read_loop(loader, batch_tx, done_rx, skip))
            }
            Source::Chunks(decoder) => {
                let (group_tx, group_rx) = sync_channel::<Group>(threads);
                let group_rx = Arc::new(Mutex::new(group_rx));
                for _ in 0..threads {
                    let work = Fused {
                        rx: Arc::clone(&group_rx),
                        tx: rec_tx.clone(),
                        free,
                        decoder: decoder.clone_box(),
                        encoder: Arc::clone(&encoder),
                        encoded,
                    };
                    scope.spawn(move || fused_loop(work));
                }
                drop((group_rx, rec_tx));
                let (format, share) = (&*source_format, &share[..]);
                let batch = (target.batch_size, threads);
                scope.spawn(move || chunk_loop(format, share, group_tx, skip, batch))
            }
        };
        // Records come back in any order: put them back in batch order.
        let mut pending = BTreeMap::new();
        let mut next = 0u64;
        let mut failed = None;
        for (first, end, records) in rec_rx.iter() {
            pending.insert(first, (end, records));
            while let Some((end, records)) = pending.remove(&next) {
                let records = match records {
                    Ok(r) => r,
                    Err(Failure::Decode(e)) => {
                        failed = Some(ConvertError::from(e));
                        break;
                    }
                    Err(Failure::Encode(source)) => {
                        let at = if shard.count == 1 || by_file {
                            locate(&*source_format, &share, next)
                        } else {
                            // The loader's share: no file of its own.
                            Location::record(
                                format!("shard {} of {}", shard.index, shard.count),
                                next,
                            )
                        };
                        failed = Some(ConvertError::Encode {
                            at: Box::new(at),
                            first: next,
                            end,
                            source,
                        });
                        break;
                    }
                };
                // A batch straddling the end of the kept parts: its
                // first records are in them.
                let from = usize::try_from(skip.saturating_sub(next)).unwrap_or(usize::MAX);
                if let Err(e) = writer.write(&records, from) {
                    failed = Some(e);
                    break;
                }
                free.give(records);
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

    write_spec_file(storage, &spec_address, &written_spec)?;
    let manifest = Manifest::new(true, identity.clone(), shard, writer.entries.clone());
    manifest::write_json(storage, &manifest_address, &manifest, true)?;
    storage
        .remove(&journal_address)
        .map_err(|e| ConvertError::Write {
            file: journal_address.name().clone(),
            source: Box::new(StorageError::new(journal_address.name().clone(), e)),
        })?;
    let skipped_records = writer.counts.skipped;
    Ok(ConvertReport {
        files: writer.files,
        skipped_parts,
        skipped_records,
        encoded_records: encoded.into_inner(),
        up_to_date: false,
        records: manifest.records,
        bytes: manifest.bytes,
        spec: written_spec,
        spec_address,
        notes,
        manifest,
        manifest_address,
    })
}

/// `f` of each input, in the inputs' order, on up to `threads` threads
/// (files taken in turn): counting the inputs before a conversion is
/// reading them, and a dataset has many.
fn each_input<T: Send>(
    inputs: &[grist_tensor::Input],
    threads: usize,
    f: impl Fn(&grist_tensor::Input) -> Result<T, BoxError> + Sync,
) -> Vec<Result<T, BoxError>> {
    let threads = threads.clamp(1, inputs.len().max(1));
    if threads == 1 {
        return inputs.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, Result<T, BoxError>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(input) = inputs.get(i) else {
                            return mine;
                        };
                        mine.push((i, f(input)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            // A panic is a bug, not bad input: it goes on unwinding.
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// The conversion's identity, as `convert.json` holds it: what decides
/// which records go into which output file, and how they are written.
/// (Threads and batch size do not: they are left out.)
fn identity(
    target: &ConvertTarget,
    spec: &SpecFile,
    given: &[String],
    source_format: &dyn Format,
    inputs: &[grist_tensor::Input],
    sizes: &[u64],
) -> serde_json::Value {
    let o = &target.options;
    let split = match target.split {
        Split::RecordsPerFile(n) => serde_json::json!({ "records_per_file": n }),
        Split::Files(n) => serde_json::json!({ "files": n }),
    };
    let files: Vec<serde_json::Value> = inputs
        .iter()
        .zip(sizes)
        .map(|(i, size)| serde_json::json!({ "name": &**i.name(), "size": size }))
        .collect();
    serde_json::json!({
        "grist_convert": 1,
        "format": target.format.id(),
        "options": {
            "compression": o.compression,
            "codec": o.codec,
            "schema": o.schema,
            "payload": o.payload,
            "lossy": o.lossy == grist_tensor::Lossy::Allow,
        },
        "spec": spec.to_value(),
        "split": split,
        "sources": {
            "given": given,
            "format": source_format.id(),
            "files": files,
        },
        "shards": target.shard.count,
    })
}

/// The parts a previous run of this conversion and shard completed.
struct Previous {
    /// Its manifest, when it finished and every part is there.
    complete: Option<Manifest>,
    /// Otherwise, the parts to keep: the longest prefix of those it
    /// entered (manifest or journal) that are there with their sizes.
    parts: Vec<ManifestPart>,
}

fn previous_parts(
    storage: &Storage,
    out: &Address,
    identity: &serde_json::Value,
    shard: Shard,
    manifest_address: &Address,
) -> Result<Previous, ConvertError> {
    let ours =
        |m: &Manifest| &m.convert == identity && m.shard == (shard.count > 1).then_some(shard);
    let read = |address: &Address| match Manifest::read(storage, address) {
        Ok(m) if ours(&m) => Ok(Some(m)),
        // Another conversion's, or unreadable: claim() removed or refused
        // those; a stray one is overwritten.
        Ok(_) | Err(ConvertError::NoConversion { .. } | ConvertError::BadState { .. }) => Ok(None),
        Err(e) => Err(e),
    };
    let entered = match read(manifest_address)? {
        Some(m) if m.complete => {
            if manifest::check_parts(storage, out, &m.parts).is_ok() {
                return Ok(Previous {
                    complete: Some(m),
                    parts: Vec::new(),
                });
            }
            m.parts
        }
        _ => match read(&out.join(&shard.journal_name()))? {
            Some(j) => j.parts,
            None => Vec::new(),
        },
    };
    let present = entered
        .iter()
        .take_while(|p| manifest::part_present(storage, out, p))
        .count();
    Ok(Previous {
        complete: None,
        parts: entered.into_iter().take(present).collect(),
    })
}

/// The report's view of manifest entries.
fn parts_written(out: &Address, parts: &[ManifestPart]) -> Vec<(Address, Written)> {
    parts
        .iter()
        .map(|p| (out.join(&p.file), p.written()))
        .collect()
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

/// A batch numbered by its first and end records; `None` for one wholly
/// in the parts a previous run completed (not encoded).
type ToEncode = (u64, u64, Option<Batch>);

/// The loader's batches, numbered by their first record, into `tx` until
/// the end, an error, or the receiving side hanging up; those that end
/// at or before record `skip` go without their rows. Batches the encoders
/// are done with come back on `done`, for the loader to reuse.
fn read_loop(
    loader: &mut grist_loader::Loader,
    tx: SyncSender<ToEncode>,
    done: Receiver<Batch>,
    skip: u64,
) -> Result<(), grist_loader::Error> {
    let mut first = 0u64;
    while let Some(batch) = loader.next_batch() {
        let batch = batch?;
        let end = first + batch.rows() as u64;
        let batch = (end > skip).then_some(batch);
        if tx.send((first, end, batch)).is_err() {
            break;
        }
        if let Ok(spent) = done.try_recv() {
            loader.recycle(spent);
        }
        first = end;
    }
    Ok(())
}

/// Rows of the inputs' chunks, in order, that make one batch, numbered by
/// the first and end records of the conversion; `None` for a batch wholly
/// in the parts a previous run completed (not decoded).
type Group = (u64, u64, Option<Vec<Piece>>);

/// Rows of a chunk.
type Piece = (Arc<grist_tensor::Chunk>, std::ops::Range<usize>);

/// What the conversion reads at once from a file: a batch's chunks fit a
/// core's cache with its columns.
const CHUNK_BYTES: usize = 256 << 10;

/// How far ahead a remote input is fetched while its chunks are decoded.
const READ_AHEAD: usize = 32 << 20;

/// The inputs' chunks, in order, cut into batches of `batch` records (a
/// chunk whose records are found by decoding them, an Avro block, goes
/// whole into one batch), into `tx` until the end, an error, or the
/// encoders hanging up; batches that end at or before record `skip` go
/// without their rows.
fn chunk_loop(
    format: &dyn grist_tensor::Format,
    inputs: &[grist_tensor::Input],
    tx: SyncSender<Group>,
    skip: u64,
    (batch, threads): (usize, usize),
) -> Result<(), grist_loader::Error> {
    // Checksums are checked by the threads that decode, in parallel.
    let mut options = grist_tensor::ReadOptions::new()
        .with_chunk_bytes(CHUNK_BYTES)
        .with_defer_checks(true);
    // Read buffers come back once the batches cut from them are encoded:
    // the pool keeps as many as are out at once (a batch spans a few,
    // `threads` wait and `threads` are decoded), so that none is
    // allocated, and its memory touched afresh, in steady reading.
    options.buffers = Arc::new(grist_io::BufferPool::keeping(4 * (2 * threads + 1)));
    let batch = batch.max(1);
    let (mut first, mut end) = (0u64, 0u64);
    let mut group = Vec::new();
    let send = |first: u64, end: u64, group: Vec<Piece>| {
        tx.send((first, end, (end > skip).then_some(group))).is_ok()
    };
    for input in inputs {
        let input = input.clone().with_read_ahead(READ_AHEAD);
        let mut stream = format.stream(&input, grist_tensor::ChunkPos::default(), &options)?;
        while let Some((chunk, _)) = stream.next_chunk()? {
            let n = chunk.record_count;
            let chunk = Arc::new(chunk);
            let whole = matches!(chunk.layout, grist_tensor::RecordLayout::Sequential);
            let mut at = 0;
            while at < n {
                let take = if whole {
                    n
                } else {
                    (batch - (end - first) as usize).min(n - at)
                };
                group.push((chunk.clone(), at..at + take));
                (at, end) = (at + take, end + take as u64);
                if end - first >= batch as u64 {
                    if !send(first, end, std::mem::take(&mut group)) {
                        return Ok(());
                    }
                    first = end;
                }
            }
        }
    }
    if end > first {
        send(first, end, group);
    }
    Ok(())
}

/// What each thread that decodes and encodes whole batches holds.
struct Fused<'a> {
    rx: Arc<Mutex<Receiver<Group>>>,
    tx: SyncSender<Encoded>,
    free: &'a Spare,
    decoder: Box<dyn grist_tensor::Decoder>,
    encoder: Arc<dyn Encoder>,
    encoded: &'a AtomicU64,
}

/// The next batch for a thread of a pool sharing `rx`; `None` once the
/// sending side has hung up.
fn next_job<T>(rx: &Mutex<Receiver<T>>) -> Option<T> {
    rx.lock().unwrap_or_else(|e| e.into_inner()).recv().ok()
}

/// The record buffers the writer is done with, for the encoders to fill
/// again.
#[derive(Default)]
struct Spare(Mutex<SpareInner>);

#[derive(Default)]
struct SpareInner {
    free: Vec<RecordBuf>,
    /// The most bytes and records a buffer given back held.
    largest: (usize, usize),
}

impl Spare {
    /// An empty record buffer (one the writer is done with, when there
    /// is one) with room for the largest batch so far and an eighth more:
    /// made that large at once rather than grown a doubling at a time by
    /// the batches to come, each growth touching fresh memory.
    fn take(&self) -> RecordBuf {
        let (found, (bytes, records)) = {
            let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
            (inner.free.pop(), inner.largest)
        };
        let mut out = found.unwrap_or_default();
        out.clear();
        out.reserve(bytes + bytes / 8, records + records / 8);
        out
    }

    /// Gives back a buffer the writer is done with.
    fn give(&self, records: RecordBuf) {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        inner.largest.0 = inner.largest.0.max(records.bytes().len());
        inner.largest.1 = inner.largest.1.max(records.len());
        inner.free.push(records);
    }
}

/// Decodes and encodes batches until either side hangs up, counting the
/// records encoded.
fn fused_loop(mut w: Fused) {
    let mut spare = None;
    loop {
        let Some((first, end, pieces)) = next_job(&w.rx) else {
            return;
        };
        let mut out = w.free.take();
        let records = match pieces {
            None => Ok(out),
            Some(pieces) => match decode_group(&mut *w.decoder, &pieces, spare.take()) {
                Ok(batch) => {
                    w.encoded.fetch_add(batch.rows() as u64, Ordering::Relaxed);
                    let r = w.encoder.encode(&batch, &mut out).map(|()| out);
                    spare = Some(batch);
                    r.map_err(Failure::Encode)
                }
                Err(e) => Err(Failure::Decode(e)),
            },
        };
        if w.tx.send((first, end, records)).is_err() {
            return;
        }
    }
}

/// The rows of `pieces` as one batch (in the memory of `spare`, a batch
/// encoded before).
fn decode_group(
    decoder: &mut dyn grist_tensor::Decoder,
    pieces: &[Piece],
    spare: Option<Batch>,
) -> Result<Batch, grist_loader::Error> {
    let limits = grist_tensor::Limits::default();
    let rows = pieces.iter().map(|(_, rows)| rows.len()).sum();
    let mut out = decoder
        .new_batch(0)
        .reusing(spare, &grist_tensor::BatchSizes::new(), rows);
    for (chunk, rows) in pieces {
        let inflated;
        let chunk = if chunk.deferred.inflate {
            let mut c = grist_tensor::Chunk::clone(chunk);
            c.data = decoder.inflate(chunk, &limits)?;
            c.deferred.inflate = false;
            inflated = c;
            &inflated
        } else {
            &**chunk
        };
        if chunk.deferred.verify {
            decoder.verify(chunk, rows.clone())?;
        }
        decoder.decode_chunk(chunk, rows.clone(), &mut out)?;
    }
    out.finish().map_err(|source| {
        let at = pieces.first().map_or_else(
            || Location::record("", 0),
            |(c, rows)| Location::record(c.file.clone(), c.first_record + rows.start as u64),
        );
        grist_loader::Error::Batch {
            at: Box::new(at),
            source: Box::new(source),
        }
    })
}

/// A batch's records (or why not), numbered by its first and end records.
type Encoded = (u64, u64, Result<RecordBuf, Failure>);

/// Why a batch has no records.
enum Failure {
    /// Its records could not be read (the workers decode the chunks).
    Decode(grist_loader::Error),
    /// Its batch could not be encoded.
    Encode(BoxError),
}

/// Where the records to convert come from.
enum Source {
    /// A shard's share of the records (a shard of fewer files than
    /// shards), picked and decoded by the loader.
    Loader(Box<grist_loader::Loader>),
    /// Every record of the inputs (or of a shard's files), read as chunks
    /// that the encoding threads decode with (clones of) this decoder.
    Chunks(Box<dyn grist_tensor::Decoder>),
}

/// What the encoding threads share: the batches to encode, where encoded
/// records go, the batches done with (back to the reader), and the record
/// buffers the writer is done with (to encode into again).
struct Encoding<'a> {
    rx: &'a Mutex<Receiver<ToEncode>>,
    tx: SyncSender<Encoded>,
    done: SyncSender<Batch>,
    free: &'a Spare,
    encoder: &'a dyn Encoder,
    encoded: &'a AtomicU64,
}

/// Encodes batches until either side hangs up, counting the records
/// encoded.
fn encode_loop(e: Encoding) {
    loop {
        let Some((first, end, batch)) = next_job(e.rx) else {
            return;
        };
        let mut out = e.free.take();
        let records = match batch {
            Some(batch) => {
                e.encoded.fetch_add(batch.rows() as u64, Ordering::Relaxed);
                let r = e
                    .encoder
                    .encode(&batch, &mut out)
                    .map(|()| out)
                    .map_err(Failure::Encode);
                // The reader may be gone or busy: then the batch is freed.
                let _ = e.done.try_send(batch);
                r
            }
            None => Ok(out),
        };
        if e.tx.send((first, end, records)).is_err() {
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
    /// The records of the whole output, when known (counted): each file's
    /// count is told its sink up front.
    expected: Option<u64>,
    shard: Shard,
    current: Option<(Address, Box<dyn RecordSink>)>,
    files: Vec<(Address, Written)>,
    /// `files` as the journal and the manifest list them.
    entries: Vec<ManifestPart>,
    identity: &'a serde_json::Value,
    journal: &'a Address,
    progress: Option<ProgressFn>,
    counts: ConvertProgress,
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
        let name = self
            .shard
            .part_name(&self.format.part_name(n, self.options));
        let address = self.out.join(&name);
        let mut sink = self
            .format
            .create(self.storage, &address, self.spec, self.options)
            .map_err(|e| Self::write_err(&address, e))?;
        if let Some(total) = self.expected {
            let done = self.counts.skipped + self.counts.records;
            sink.expect_records(self.per_file.min(total.saturating_sub(done)))
                .map_err(|e| Self::write_err(&address, e))?;
        }
        self.current = Some((address, sink));
        Ok(())
    }

    /// Commits the current file, then enters it in the journal.
    fn close(&mut self) -> Result<(), ConvertError> {
        if let Some((address, sink)) = self.current.take() {
            let written = sink.finish().map_err(|e| Self::write_err(&address, e))?;
            self.entries.push(ManifestPart::new(&address, &written));
            self.files.push((address, written));
            let journal = Manifest::new(
                false,
                self.identity.clone(),
                self.shard,
                self.entries.clone(),
            );
            manifest::write_json(self.storage, self.journal, &journal, false)?;
        }
        Ok(())
    }

    /// Writes `records` from record `from` on.
    fn write(&mut self, records: &RecordBuf, from: usize) -> Result<(), ConvertError> {
        for record in records.iter().skip(from) {
            if self.current.is_none() {
                self.open()?;
            }
            let mut full = false;
            if let Some((address, sink)) = &mut self.current {
                sink.write(record)
                    .map_err(|e| Self::write_err(address, e))?;
                full = sink.records() >= self.per_file;
            }
            self.counts.records += 1;
            self.counts.bytes += record.len() as u64;
            if full {
                self.close()?;
            }
        }
        if let Some(f) = &self.progress {
            (f.0)(&self.counts);
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

fn write_spec_file(
    storage: &Storage,
    address: &Address,
    spec: &SpecFile,
) -> Result<(), ConvertError> {
    manifest::write_json(storage, address, &spec.to_value(), false)
}

/// The spec of `sources` (files, folders, globs or object-store URLs, as
/// the [`loader`](crate::loader) takes them, read through `storage`):
/// from an Avro file's writer schema, by sampling the first
/// [`InferOptions::records`] records of the other formats
/// ([`Format::infer_spec`]). `grist spec` prints it.
///
/// ```
/// use grist::tfrecord::{ExampleBuilder, RecordWriter};
/// use grist::tensor::{DType, InferOptions};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("a.tfrecord");
/// let mut w = RecordWriter::create(&path, Default::default())?;
/// for i in 0..5i64 {
///     w.write_record(&ExampleBuilder::new().with_int64s("id", [i]).encode())?;
/// }
/// w.finish()?;
/// let inferred = grist::infer_spec([&path], &grist::Storage::new(), &InferOptions::default())?;
/// assert_eq!(inferred.spec.features[0].name(), "id");
/// assert_eq!(inferred.spec.features[0].dtype(), DType::Int64);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn infer_spec<P: Into<PathBuf>>(
    sources: impl IntoIterator<Item = P>,
    storage: &Storage,
    options: &InferOptions,
) -> Result<Inferred, ConvertError> {
    let texts: Vec<String> = sources
        .into_iter()
        .map(|p| p.into().to_string_lossy().into_owned())
        .collect();
    let (format, inputs) = crate::registry()
        .expand(storage, &texts, None)
        .map_err(|e| ConvertError::Sources {
            what: "finding the sources".into(),
            source: Box::new(e),
        })?;
    infer_inputs(&format, &inputs, options)
}

/// [`infer_spec`] of expanded inputs: an error when no feature could be
/// inferred.
fn infer_inputs(
    format: &Arc<dyn Format>,
    inputs: &[grist_tensor::Input],
    options: &InferOptions,
) -> Result<Inferred, ConvertError> {
    let inferred = format
        .infer_spec(inputs, options)
        .map_err(|source| ConvertError::Sources {
            what: format!("inferring the spec of the {} sources", format.name()),
            source,
        })?;
    let spec = &inferred.spec;
    if spec.features.is_empty()
        && spec.context_features.is_empty()
        && spec.sequence_features.is_empty()
    {
        return Err(ConvertError::NeedsSpec {
            format: format.name(),
        });
    }
    Ok(inferred)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_record_buffers_have_room_for_the_largest_batch_given_back() {
        let spare = Spare::default();
        let mut first = spare.take();
        assert!(first.is_empty());
        for _ in 0..10 {
            first.push(&[7; 1000]);
        }
        let ptr = first.bytes().as_ptr();
        spare.give(first);
        // The buffer given back, emptied, with its room.
        let again = spare.take();
        assert!(again.is_empty());
        assert_eq!(again.bytes().as_ptr(), ptr);
        // A new one is made with room for that batch at once.
        let mut new = spare.take();
        let room = new.bytes().as_ptr();
        for _ in 0..10 {
            new.push(&[1; 1000]);
        }
        assert_eq!(new.bytes().as_ptr(), room, "grown, not made at its size");
    }

    #[test]
    fn each_input_keeps_the_inputs_order_and_their_errors() {
        let inputs: Vec<grist_tensor::Input> = (0..7)
            .map(|i| grist_tensor::Input::local(format!("f{i}")))
            .collect();
        let f = |input: &grist_tensor::Input| -> Result<String, BoxError> {
            match input.file_name() {
                "f3" => Err(Box::new(grist_tensor::TensorError::Unsupported {
                    what: "f3".into(),
                })),
                name => Ok(name.to_uppercase()),
            }
        };
        for threads in [0, 1, 2, 3, 7, 16] {
            let got: Vec<Result<String, String>> = each_input(&inputs, threads, f)
                .into_iter()
                .map(|r| r.map_err(|e| e.to_string()))
                .collect();
            let want: Vec<Result<String, String>> =
                (0..7)
                    .map(|i| match i {
                        3 => Err(grist_tensor::TensorError::Unsupported { what: "f3".into() }
                            .to_string()),
                        i => Ok(format!("F{i}")),
                    })
                    .collect();
            assert_eq!(got, want, "{threads} threads");
        }
        assert!(each_input(&[], 4, f).is_empty());
    }
}
