//! The prod19 synthetic dataset as TFRecord, Avro, FFRecord and OFRecord
//! files, shared by `gen` and `demo`, and the check that decoded batches
//! equal the generated data.
//!
//! A dataset of `n` records is generated in chunks of [`CHUNK_ROWS`] rows
//! (to bound memory): chunk `k` is `synth::prod19(rows, chunk_seed(seed,
//! k))`, so the first chunk — and any dataset of up to `CHUNK_ROWS`
//! records — is exactly `synth::prod19(n, seed)`. TFRecord files hold it
//! as tf.Example records (`synth::prod19_example_specs`), FFRecord files
//! as samples of the same tf.Example bytes, OFRecord part files as
//! OFRecords of the same features, Avro files with its own types
//! (`synth::prod19_native`, `synth::prod19_native_specs`).

use std::borrow::Cow;
use std::io::Write as _;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use grist::{Address, Storage};
use grist_avro_tensor::{Codec, ContainerWriter};
use grist_ffrecord::FfrWriter;
use grist_ofrecord::{DatasetWriter, OfRecordFormat};
use grist_tensor::synth::{
    SplitMix64, prod19, prod19_example_specs, prod19_native, prod19_native_specs,
};
use grist_tensor::{Batch, Format as _, NameMatch, SpecFile};
use grist_tfrecord::RecordWriter;
use rayon::prelude::*;
use serde_json::json;

use crate::rows::slice_rows;

/// The formats prod19 is written in, each by its format crate's writer
/// (reading goes through grist's registry, like every file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutputFormat {
    /// TFRecord files of tf.Example records.
    Tfrecord,
    /// An Avro object container file of records with the features' own
    /// types.
    Avro,
    /// An FFRecord file of tf.Example samples.
    Ffrecord,
    /// An OFRecord dataset: a folder of part files of OFRecords.
    Ofrecord,
}

/// Rows per generated chunk (a multiple of 1024, so batches of 1024 never
/// straddle two chunks).
pub(crate) const CHUNK_ROWS: u64 = 10_240;

/// The base name of the files: `prod19.tfrecord`, `prod19.spec.json`.
pub(crate) const NAME: &str = "prod19";

/// The seed of chunk `k` of a dataset seeded with `seed` (`seed` itself
/// for chunk 0).
pub(crate) fn chunk_seed(seed: u64, k: u64) -> u64 {
    seed.wrapping_add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// The number of rows of chunk `k` of a dataset of `records` records.
fn chunk_rows(records: u64, k: u64) -> usize {
    (records - k * CHUNK_ROWS).min(CHUNK_ROWS) as usize
}

/// Chunk `k` of a dataset of `records` records, with the types `format`
/// stores.
fn chunk(records: u64, seed: u64, k: u64, format: OutputFormat) -> Batch {
    let (rows, seed) = (chunk_rows(records, k), chunk_seed(seed, k));
    match format {
        OutputFormat::Avro => prod19_native(rows, seed),
        OutputFormat::Tfrecord | OutputFormat::Ffrecord | OutputFormat::Ofrecord => {
            prod19(rows, seed)
        }
    }
}

/// The chunks of a dataset of `records` records, in order.
pub(crate) fn chunks(records: u64, seed: u64, format: OutputFormat) -> impl Iterator<Item = Batch> {
    (0..records.div_ceil(CHUNK_ROWS)).map(move |k| chunk(records, seed, k, format))
}

/// The spec file of prod19 in `format`: tf.Example features (TFRecord,
/// and the same features of FFRecord's tf.Example samples and of
/// OFRecords), or the ATDS features of the Avro record's own types (Avro).
pub(crate) fn spec_file(format: OutputFormat) -> SpecFile {
    let features = match format {
        OutputFormat::Avro => prod19_native_specs(),
        OutputFormat::Tfrecord | OutputFormat::Ffrecord | OutputFormat::Ofrecord => {
            prod19_example_specs()
        }
    };
    SpecFile {
        features,
        ..SpecFile::default()
    }
}

/// The address of the spec file of `format` in `dir`: `prod19.spec.json`
/// (TFRecord, FFRecord, OFRecord: the same features),
/// `prod19.avro.spec.json` (Avro).
pub(crate) fn spec_path(dir: &Address, format: OutputFormat) -> Address {
    match format {
        OutputFormat::Avro => dir.join(&format!("{NAME}.avro.spec.json")),
        OutputFormat::Tfrecord | OutputFormat::Ffrecord | OutputFormat::Ofrecord => {
            dir.join(&format!("{NAME}.spec.json"))
        }
    }
}

/// The number of part files of an OFRecord dataset (fewer when there are
/// fewer records).
pub(crate) const OFRECORD_PARTS: u64 = 4;

/// One file of the dataset: its format and compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// TFRecord, GZIP-compressed when `gzip`.
    Tfrecord {
        /// Whether to compress with GZIP.
        gzip: bool,
    },
    /// An Avro object container file with this codec.
    Avro(Codec),
    /// An FFRecord file of tf.Example samples.
    Ffrecord,
    /// An OFRecord dataset: a folder of [`OFRECORD_PARTS`] part files.
    Ofrecord,
}

impl FileKind {
    /// The format of the file.
    pub(crate) fn format(self) -> OutputFormat {
        match self {
            FileKind::Tfrecord { .. } => OutputFormat::Tfrecord,
            FileKind::Avro(_) => OutputFormat::Avro,
            FileKind::Ffrecord => OutputFormat::Ffrecord,
            FileKind::Ofrecord => OutputFormat::Ofrecord,
        }
    }

    /// The file's name: `prod19.tfrecord`, `prod19.tfrecord.gz`,
    /// `prod19.avro` (codec null), `prod19.<codec>.avro`, `prod19.ffr`, and
    /// the folder `prod19.ofrecord` (its parts `part-00000`, ...).
    pub(crate) fn file_name(self) -> String {
        match self {
            FileKind::Tfrecord { gzip: false } => format!("{NAME}.tfrecord"),
            FileKind::Tfrecord { gzip: true } => format!("{NAME}.tfrecord.gz"),
            FileKind::Avro(Codec::Null) => format!("{NAME}.avro"),
            FileKind::Avro(codec) => format!("{NAME}.{codec}.avro"),
            FileKind::Ffrecord => format!("{NAME}.ffr"),
            FileKind::Ofrecord => format!("{NAME}.ofrecord"),
        }
    }

    /// `TFRecord`, `TFRecord, gzip`, `Avro, codec deflate`, `FFRecord,
    /// tf.Example samples`, `OFRecord, part files`.
    pub(crate) fn describe(self) -> String {
        match self {
            FileKind::Tfrecord { gzip: false } => "TFRecord".into(),
            FileKind::Tfrecord { gzip: true } => "TFRecord, gzip".into(),
            FileKind::Avro(codec) => format!("Avro, codec {codec}"),
            FileKind::Ffrecord => "FFRecord, tf.Example samples".into(),
            FileKind::Ofrecord => "OFRecord, part files".into(),
        }
    }
}

/// One file written by [`write()`].
#[derive(Debug)]
pub(crate) struct Written {
    /// The file (the folder, for OFRecord).
    pub(crate) path: Address,
    pub(crate) kind: FileKind,
    pub(crate) records: u64,
    /// The size in storage (of the files in the folder, for OFRecord).
    pub(crate) bytes: u64,
}

/// What [`write()`] wrote.
#[derive(Debug)]
pub(crate) struct Dataset {
    /// The data files, in the order asked for.
    pub(crate) files: Vec<Written>,
    /// The spec file of each format written (see [`spec_path`]).
    pub(crate) specs: Vec<Address>,
    /// The time taken to generate, encode and write everything.
    pub(crate) elapsed: Duration,
}

/// A data file being written.
// One per file, moved once to its writer thread: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Sink {
    Tfrecord(RecordWriter),
    Avro(ContainerWriter),
    Ffrecord(FfrWriter),
    Ofrecord(DatasetWriter),
}

impl Sink {
    /// Creates the file of `kind` at `path` for `records` records (the
    /// data of `seed` gives an Avro file its sync marker, so the same seed
    /// gives the same bytes). Each file appears under its name only once
    /// it is complete (for OFRecord, each part).
    fn create(
        storage: &Storage,
        path: &Address,
        kind: FileKind,
        seed: u64,
        records: u64,
    ) -> anyhow::Result<Sink> {
        Ok(match kind {
            FileKind::Tfrecord { .. } => Sink::Tfrecord(RecordWriter::create_at(
                storage,
                path,
                grist_tfrecord::WriterOptions::default(),
            )?),
            FileKind::Avro(codec) => {
                let specs = prod19_native_specs();
                let schema = grist_avro_tensor::schema_for_specs(&specs, "Prod19")?;
                let mut rng = SplitMix64::new(seed);
                let mut sync = [0u8; 16];
                sync[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
                sync[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
                let options = grist_avro_tensor::WriterOptions::default()
                    .with_codec(codec)
                    .with_sync_marker(sync);
                Sink::Avro(ContainerWriter::create_at(storage, path, &schema, options)?)
            }
            FileKind::Ffrecord => Sink::Ffrecord(FfrWriter::create_at(
                storage,
                path,
                grist_ffrecord::WriterOptions::default().with_count(Some(records)),
            )?),
            FileKind::Ofrecord => {
                remove_dataset(storage, path)?;
                let per_part = records.div_ceil(OFRECORD_PARTS).max(1);
                Sink::Ofrecord(
                    DatasetWriter::create_at(storage, path)?.with_records_per_part(per_part),
                )
            }
        })
    }

    fn write(&mut self, record: &[u8]) -> anyhow::Result<()> {
        match self {
            Sink::Tfrecord(w) => w.write_record(record)?,
            Sink::Avro(w) => w.append_datum(record)?,
            Sink::Ffrecord(w) => w.write_sample(record)?,
            Sink::Ofrecord(w) => w.write_record(record)?,
        }
        Ok(())
    }

    /// Finishes the file; returns its record count.
    fn finish(self) -> anyhow::Result<u64> {
        Ok(match self {
            Sink::Tfrecord(w) => w.finish()?.records,
            Sink::Avro(w) => w.finish()?.records,
            Sink::Ffrecord(w) => w.finish()?.samples,
            Sink::Ofrecord(w) => w.finish()?.records,
        })
    }
}

/// Removes the OFRecord dataset at `dest` (a folder or prefix holding
/// only part files), if there is one, so that a new one can be written
/// there; refuses a folder holding any other file.
///
/// The new parts are written where the old ones were, each made visible
/// when it is complete: an object store has no folders to rename, so the
/// dataset as a whole is replaced part by part, not at once.
fn remove_dataset(storage: &Storage, dest: &Address) -> anyhow::Result<()> {
    let entries = match storage.list(dest) {
        Ok(entries) => entries,
        // Nothing there yet.
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(anyhow::Error::from(e).context(format!("replacing {dest}"))),
    };
    let format = OfRecordFormat::default();
    if let Some(other) = entries.iter().find(|e| {
        e.address
            .file_name()
            .is_none_or(|name| format.name_match(name) == NameMatch::No)
    }) {
        bail!(
            "{dest} holds {}, which is not an OFRecord part file: not replacing it",
            other.address
        );
    }
    // Only part files: remove them all.
    for entry in entries {
        storage
            .remove(&entry.address)
            .with_context(|| format!("removing {}", entry.address))?;
    }
    Ok(())
}

/// The size of a file, or of the files in a folder (an OFRecord dataset).
pub(crate) fn size_in_storage(
    storage: &Storage,
    path: &Address,
    kind: FileKind,
) -> anyhow::Result<u64> {
    if kind == FileKind::Ofrecord {
        let entries = storage.list(path)?;
        return Ok(entries.iter().map(|e| e.size).sum());
    }
    Ok(storage.open(path)?.size())
}

/// A chunk of encoded records, shared by the writers of one format.
type Encoded = Arc<Vec<Vec<u8>>>;

/// The text of the spec file of `format`: `{"features": [...]}`.
pub(crate) fn spec_text(format: OutputFormat) -> anyhow::Result<String> {
    let text = serde_json::to_string_pretty(&json!({ "features": spec_file(format).features }))?;
    Ok(text + "\n")
}

/// The spec files [`write()`] writes into `dir` for `kinds`, each once.
fn spec_paths(dir: &Address, kinds: &[FileKind]) -> Vec<(OutputFormat, Address)> {
    let mut specs: Vec<(OutputFormat, Address)> = Vec::new();
    for format in formats(kinds.iter().map(|k| k.format())) {
        let path = spec_path(dir, format);
        if !specs.iter().any(|(_, p)| *p == path) {
            specs.push((format, path));
        }
    }
    specs
}

/// Everything [`write()`] writes into `dir` for `kinds`: the spec files,
/// then the data files (the folder, for OFRecord).
pub(crate) fn outputs(dir: &Address, kinds: &[FileKind]) -> Vec<Address> {
    let specs = spec_paths(dir, kinds).into_iter().map(|(_, p)| p);
    specs
        .chain(kinds.iter().map(|k| dir.join(&k.file_name())))
        .collect()
}

/// The first of `paths` that exists in `storage`: a file, a folder, or an
/// object-store prefix with objects under it (an OFRecord dataset).
pub(crate) fn first_existing(
    storage: &Storage,
    paths: &[Address],
) -> anyhow::Result<Option<Address>> {
    for path in paths {
        let stat = storage
            .stat(path)
            .with_context(|| format!("looking for {path}"))?;
        let exists = match stat {
            Some(_) => true,
            None => match storage.list(path) {
                Ok(entries) => !entries.is_empty(),
                Err(e) if e.is_not_found() => false,
                Err(e) => return Err(anyhow::Error::from(e).context(format!("listing {path}"))),
            },
        };
        if exists {
            return Ok(Some(path.clone()));
        }
    }
    Ok(None)
}

/// Writes `records` records of prod19 seeded with `seed` into `dir`, one
/// file (or OFRecord folder) per entry of `kinds` (see
/// [`FileKind::file_name`]), and the spec file of each format among them
/// (`{"features": [...]}`, see [`spec_path`]). Files already there are
/// replaced (see [`outputs`] and [`first_existing`] to refuse that).
/// `progress` is told the number of records generated each time a chunk
/// has been handed to the writers.
pub(crate) fn write(
    dir: &Address,
    records: u64,
    seed: u64,
    kinds: &[FileKind],
    progress: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<Dataset> {
    let start = Instant::now();
    let storage = crate::sources::storage()?;
    storage
        .create_dir_all(dir)
        .with_context(|| format!("creating {dir}"))?;
    let mut specs = Vec::new();
    for (format, path) in spec_paths(dir, kinds) {
        let text = spec_text(format)?;
        let mut out = storage.create(&path)?;
        out.write_all(text.as_bytes())
            .with_context(|| format!("writing {path}"))?;
        out.commit()?;
        specs.push(path);
    }

    let paths: Vec<Address> = kinds.iter().map(|k| dir.join(&k.file_name())).collect();
    let sinks = paths
        .iter()
        .zip(kinds)
        .map(|(p, &k)| Sink::create(&storage, p, k, seed, records))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Each file is written (and compressed) on its own thread, while the
    // chunks are generated and encoded a few at a time in parallel.
    let counts = std::thread::scope(|scope| -> anyhow::Result<Vec<u64>> {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for (mut sink, kind) in sinks.into_iter().zip(kinds) {
            let (tx, rx) = mpsc::sync_channel::<Encoded>(2);
            senders.push((encoding(kind.format()), tx));
            handles.push(scope.spawn(move || -> anyhow::Result<u64> {
                for chunk in rx {
                    for record in chunk.iter() {
                        sink.write(record)?;
                    }
                }
                sink.finish()
            }));
        }
        let produced = produce(records, seed, &senders, progress);
        drop(senders);
        let mut counts = Vec::new();
        for handle in handles {
            let n = handle
                .join()
                .map_err(|_| anyhow::anyhow!("a writer thread panicked"))??;
            counts.push(n);
        }
        // A writer's own error explains a failed send better.
        produced?;
        Ok(counts)
    })?;
    let mut files = Vec::new();
    for ((records, path), &kind) in counts.into_iter().zip(paths).zip(kinds) {
        let bytes = size_in_storage(&storage, &path, kind)?;
        files.push(Written {
            path,
            kind,
            records,
            bytes,
        });
    }
    Ok(Dataset {
        files,
        specs,
        elapsed: start.elapsed(),
    })
}

/// The formats among `these`, each once.
fn formats(these: impl Iterator<Item = OutputFormat> + Clone) -> Vec<OutputFormat> {
    [
        OutputFormat::Tfrecord,
        OutputFormat::Avro,
        OutputFormat::Ffrecord,
        OutputFormat::Ofrecord,
    ]
    .into_iter()
    .filter(|f| these.clone().any(|g| g == *f))
    .collect()
}

/// The format whose record encoding files of `format` hold: FFRecord
/// samples are the tf.Example records of TFRecord files.
fn encoding(format: OutputFormat) -> OutputFormat {
    match format {
        OutputFormat::Ffrecord => OutputFormat::Tfrecord,
        other => other,
    }
}

/// Encodes `batch` as the records of `format` (see [`encoding`]).
fn encode(batch: &Batch, format: OutputFormat) -> anyhow::Result<Vec<Vec<u8>>> {
    let spec = spec_file(format);
    Ok(match encoding(format) {
        OutputFormat::Avro => grist_avro_tensor::encode_batch(batch, &spec)?,
        OutputFormat::Ofrecord => grist_ofrecord::encode_batch(batch, &spec)?,
        OutputFormat::Tfrecord | OutputFormat::Ffrecord => {
            grist_tfrecord::encode_batch(batch, &spec)?
        }
    })
}

/// Generates and encodes the chunks of the dataset, a few at a time in
/// parallel, and sends each to every writer of its format, in order.
fn produce(
    records: u64,
    seed: u64,
    writers: &[(OutputFormat, mpsc::SyncSender<Encoded>)],
    progress: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<()> {
    let formats = formats(writers.iter().map(|(f, _)| *f));
    let window = rayon::current_num_threads().max(1) as u64;
    let total_chunks = records.div_ceil(CHUNK_ROWS);
    let mut k = 0;
    while k < total_chunks {
        let end = (k + window).min(total_chunks);
        let jobs: Vec<(u64, OutputFormat)> = (k..end)
            .flat_map(|k| formats.iter().map(move |&f| (k, f)))
            .collect();
        let encoded: Vec<(OutputFormat, Encoded)> = jobs
            .into_par_iter()
            .map(|(k, f)| Ok((f, Arc::new(encode(&chunk(records, seed, k, f), f)?))))
            .collect::<anyhow::Result<_>>()?;
        for (format, chunk) in encoded {
            for (_, w) in writers.iter().filter(|(f, _)| *f == format) {
                w.send(chunk.clone())
                    .map_err(|_| anyhow::anyhow!("a writer stopped early"))?;
            }
        }
        progress((end * CHUNK_ROWS).min(records));
        k = end;
    }
    Ok(())
}

/// Compares decoded batches, in order, with the generated dataset.
pub(crate) struct Expected {
    chunks: Box<dyn Iterator<Item = Batch>>,
    current: Option<Batch>,
    /// Rows of `current` already compared.
    offset: usize,
    /// Records compared so far.
    compared: u64,
}

impl Expected {
    /// The expected data of a dataset of `records` records seeded with
    /// `seed`, with the types `format` stores.
    pub(crate) fn new(records: u64, seed: u64, format: OutputFormat) -> Self {
        Expected {
            chunks: Box::new(chunks(records, seed, format)),
            current: None,
            offset: 0,
            compared: 0,
        }
    }

    /// The expected data of a dataset of `records` records seeded with
    /// `seed`, with the types `format` stores, each chunk passed through
    /// `map` (such as the types a conversion writes).
    pub(crate) fn mapped(
        records: u64,
        seed: u64,
        format: OutputFormat,
        map: fn(Batch) -> Batch,
    ) -> Self {
        Expected {
            chunks: Box::new(chunks(records, seed, format).map(map)),
            current: None,
            offset: 0,
            compared: 0,
        }
    }

    /// Checks that `decoded` holds the next records of the dataset.
    pub(crate) fn check(&mut self, decoded: &Batch) -> anyhow::Result<()> {
        let mut done = 0;
        while done < decoded.rows() {
            let exhausted = self
                .current
                .as_ref()
                .is_none_or(|c| self.offset == c.rows());
            if exhausted {
                self.current = self.chunks.next();
                self.offset = 0;
            }
            let Some(chunk) = &self.current else {
                bail!("decoded more records than were written ({})", self.compared);
            };
            let m = (decoded.rows() - done).min(chunk.rows() - self.offset);
            let want = slice_rows(chunk, self.offset..self.offset + m)?;
            let got = if done == 0 && m == decoded.rows() {
                Cow::Borrowed(decoded)
            } else {
                Cow::Owned(slice_rows(decoded, done..done + m)?)
            };
            if let Some(column) = first_difference(&want, &got) {
                bail!(
                    "records {}..{}: {column} differs from the generated data",
                    self.compared,
                    self.compared + m as u64
                );
            }
            done += m;
            self.offset += m;
            self.compared += m as u64;
        }
        Ok(())
    }

    /// Checks that every generated record was compared.
    pub(crate) fn finish(self) -> anyhow::Result<u64> {
        let left = self.current.as_ref().map_or(0, |c| c.rows() - self.offset)
            + self.chunks.map(|c| c.rows()).sum::<usize>();
        if left > 0 {
            bail!("{left} generated records were not read back");
        }
        Ok(self.compared)
    }
}

/// The name of the first column where two batches differ.
fn first_difference(want: &Batch, got: &Batch) -> Option<String> {
    if want.rows() != got.rows() {
        return Some(format!("the row count ({} vs {})", got.rows(), want.rows()));
    }
    if want.columns().len() != got.columns().len() {
        return Some("the column count".into());
    }
    want.columns()
        .iter()
        .zip(got.columns())
        .find(|(a, b)| a != b)
        .map(|(a, _)| format!("feature {:?}", a.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_chunk_is_the_plain_dataset() {
        let mut it = chunks(100, 7, OutputFormat::Tfrecord);
        assert_eq!(it.next().unwrap(), prod19(100, 7));
        assert!(it.next().is_none());
        let mut it = chunks(100, 7, OutputFormat::Avro);
        assert_eq!(it.next().unwrap(), prod19_native(100, 7));
    }

    #[test]
    fn slices_reassemble() {
        let whole = prod19(50, 3);
        let mut expected = Expected::new(50, 3, OutputFormat::Tfrecord);
        for range in [0..7, 7..30, 30..50] {
            let part = slice_rows(&whole, range).unwrap();
            expected.check(&part).unwrap();
        }
        assert_eq!(expected.finish().unwrap(), 50);
        let mut wrong = Expected::new(50, 4, OutputFormat::Tfrecord);
        assert!(wrong.check(&whole).is_err());
    }
}
