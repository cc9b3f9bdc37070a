//! Files → batches: the read + framing + checks + parse pipeline shared by
//! `cat --spec`, `bench` and `demo`, for both formats.
//!
//! [`BatchReader`] pulls chunks from a format's source (TFRecord: runs of
//! whole frames, CRCs checked there; Avro: blocks, sync markers checked and
//! decompressed there), gathers `batch_size` records (a batch may span
//! chunks and files, as `TFRecordDataset(files).batch(n)` and ATDS do), and
//! decodes them with the format's decoder. With several threads, a batch's
//! rows are split into contiguous parts, each decoded by its own decoder
//! clone into its own builder on a rayon thread, and the builders are
//! appended in order. [`open`] picks the format and hands the reader out
//! as a [`Batches`] trait object.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use grist_avro_tensor::{AvroDecoder, AvroSource, Header};
use grist_tensor::{
    Batch, BatchBuilder, Chunk, Decoder, RecordLayout, RecordSource as _, SpecFile,
};
use grist_tfrecord::{ExampleDecoder, ReaderOptions, TfRecordSource};
use rayon::prelude::*;

use crate::format::Format;

/// How to batch and decode.
#[derive(Clone, Debug)]
pub(crate) struct BatchOptions {
    /// Records per batch (at least 1).
    pub(crate) batch_size: usize,
    /// Whether to drop a final partial batch.
    pub(crate) drop_remainder: bool,
    /// Decode threads per batch (at least 1).
    pub(crate) threads: usize,
    /// Whether to check record CRCs (TFRecord).
    pub(crate) check_crc: bool,
}

/// A format's decoder, with what the pipeline needs beyond
/// [`Decoder`]: its source of chunks, batch recycling and finishing.
pub(crate) trait FormatDecoder: Decoder + Sized + 'static {
    /// The chunk source over a list of files.
    type Source: Send;

    /// A fresh source over `files`.
    fn source(files: &[PathBuf], options: &BatchOptions) -> Self::Source;

    /// The next chunk, with every decoder made ready for it.
    fn next_chunk(
        source: &mut Self::Source,
        decoders: &mut [Self],
    ) -> Result<Option<Chunk>, Self::Error>;

    /// Gives a consumed batch's memory back for the next batch to reuse.
    fn recycle(&mut self, batch: Batch);

    /// An empty builder for `rows` rows, reusing recycled memory.
    fn recycled_batch(&mut self, rows: usize) -> BatchBuilder;

    /// Finishes a batch whose first row is record `first_record` of `file`.
    fn finish(
        &mut self,
        out: &mut BatchBuilder,
        file: &Arc<str>,
        first_record: u64,
    ) -> Result<Batch, Self::Error>;
}

impl FormatDecoder for ExampleDecoder {
    type Source = TfRecordSource;

    fn source(files: &[PathBuf], options: &BatchOptions) -> TfRecordSource {
        TfRecordSource::new(files.iter().cloned())
            .with_options(ReaderOptions::default().with_check_crc(options.check_crc))
    }

    fn next_chunk(
        source: &mut TfRecordSource,
        _: &mut [Self],
    ) -> grist_tfrecord::Result<Option<Chunk>> {
        source.next_chunk()
    }

    fn recycle(&mut self, batch: Batch) {
        ExampleDecoder::recycle(self, batch);
    }

    fn recycled_batch(&mut self, rows: usize) -> BatchBuilder {
        ExampleDecoder::recycled_batch(self, rows)
    }

    fn finish(
        &mut self,
        out: &mut BatchBuilder,
        file: &Arc<str>,
        first_record: u64,
    ) -> grist_tfrecord::Result<Batch> {
        ExampleDecoder::finish(self, out, file, first_record)
    }
}

/// Avro blocks, and the header whose schema the decoders know.
pub(crate) struct AvroChunks {
    source: AvroSource,
    /// The header of the file the decoders were last made ready for.
    registered: Option<Arc<Header>>,
}

impl FormatDecoder for AvroDecoder {
    type Source = AvroChunks;

    fn source(files: &[PathBuf], _: &BatchOptions) -> AvroChunks {
        AvroChunks {
            source: AvroSource::new(files),
            registered: None,
        }
    }

    /// Registers each new file's writer schema with every decoder (a plan
    /// is compiled once per distinct schema).
    fn next_chunk(
        chunks: &mut AvroChunks,
        decoders: &mut [Self],
    ) -> grist_avro_tensor::Result<Option<Chunk>> {
        let Some((chunk, header)) = chunks.source.next_chunk_with_header()? else {
            return Ok(None);
        };
        if !chunks
            .registered
            .as_ref()
            .is_some_and(|h| Arc::ptr_eq(h, &header))
        {
            for d in decoders.iter_mut() {
                d.add_schema(chunk.file.clone(), &header.schema_json)?;
            }
            chunks.registered = Some(header);
        }
        Ok(Some(chunk))
    }

    fn recycle(&mut self, batch: Batch) {
        AvroDecoder::recycle(self, batch);
    }

    fn recycled_batch(&mut self, rows: usize) -> BatchBuilder {
        AvroDecoder::recycled_batch(self, rows)
    }

    fn finish(
        &mut self,
        out: &mut BatchBuilder,
        _: &Arc<str>,
        _: u64,
    ) -> grist_avro_tensor::Result<Batch> {
        AvroDecoder::finish(self, out)
    }
}

/// Decoded batches from a list of files, whatever their format.
pub(crate) trait Batches {
    /// The next batch; `None` at the end. A bad record (framing or parse)
    /// is an error for the batch that holds it: the batches before it have
    /// been returned, that batch is not.
    fn next_batch(&mut self) -> anyhow::Result<Option<Batch>>;

    /// Starts reading the files again from the beginning.
    fn rewind(&mut self);

    /// Gives a consumed batch's memory back for the next batch to reuse.
    fn recycle(&mut self, batch: Batch);
}

/// A run of records of one chunk that belongs to a batch.
type Segment = (Chunk, Range<usize>);

/// Reads the records of a list of files as decoded batches.
pub(crate) struct BatchReader<D: FormatDecoder> {
    files: Vec<PathBuf>,
    options: BatchOptions,
    source: D::Source,
    /// One decoder per thread.
    decoders: Vec<D>,
    pool: Option<rayon::ThreadPool>,
    /// The chunk being consumed and the next row in it.
    current: Option<(Chunk, usize)>,
    done: bool,
}

impl<D: FormatDecoder> BatchReader<D> {
    /// A reader of `files` decoding with `decoder`.
    pub(crate) fn new(
        files: Vec<PathBuf>,
        decoder: D,
        options: BatchOptions,
    ) -> anyhow::Result<Self> {
        let threads = options.threads.max(1);
        let pool = if threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("grist-decode-{i}"))
                    .build()
                    .context("starting the decode threads")?,
            )
        } else {
            None
        };
        let options = BatchOptions {
            batch_size: options.batch_size.max(1),
            threads,
            ..options
        };
        Ok(BatchReader {
            source: D::source(&files, &options),
            files,
            decoders: vec![decoder; threads],
            pool,
            options,
            current: None,
            done: false,
        })
    }

    /// The next batch (see [`Batches::next_batch`]).
    fn read_batch(&mut self) -> Result<Option<Batch>, D::Error> {
        let segments = match self.gather() {
            Ok(segments) => segments,
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        };
        let rows: usize = segments.iter().map(|(_, r)| r.len()).sum();
        if rows == 0 || (rows < self.options.batch_size && self.options.drop_remainder) {
            return Ok(None);
        }
        let batch = self.decode(&segments, rows);
        if batch.is_err() {
            self.done = true;
        }
        batch.map(Some)
    }

    /// Collects the next `batch_size` records (fewer at the end).
    fn gather(&mut self) -> Result<Vec<Segment>, D::Error> {
        let mut segments = Vec::new();
        let mut need = self.options.batch_size;
        while need > 0 && !self.done {
            let (chunk, next) = match self.current.take() {
                Some((chunk, next)) if next < chunk.record_count => (chunk, next),
                _ => match D::next_chunk(&mut self.source, &mut self.decoders)? {
                    Some(chunk) => (chunk, 0),
                    None => {
                        self.done = true;
                        break;
                    }
                },
            };
            let take = need.min(chunk.record_count - next);
            segments.push((chunk.clone(), next..next + take));
            need -= take;
            self.current = Some((chunk, next + take));
        }
        Ok(segments)
    }

    /// Decodes the `rows` records of `segments` into one batch.
    fn decode(&mut self, segments: &[Segment], rows: usize) -> Result<Batch, D::Error> {
        let (file, first_record) = {
            let (chunk, range) = &segments[0];
            (chunk.file.clone(), chunk.first_record + range.start as u64)
        };
        let parts = self.options.threads.min(rows);
        let mut builder = match (&self.pool, parts) {
            (Some(pool), 2..) => {
                let parts = split(segments, rows, parts);
                let decoders = &mut self.decoders[..parts.len()];
                let built: Vec<Result<BatchBuilder, D::Error>> = pool.install(|| {
                    decoders
                        .par_iter_mut()
                        .zip(parts)
                        .map(|(decoder, part)| decode_part(decoder, &part))
                        .collect()
                });
                // The first error in row order is the one to report.
                let mut built = built.into_iter();
                let mut first = built.next().unwrap_or_else(|| Ok(BatchBuilder::new()))?;
                for part in built {
                    first.append(part?);
                }
                first
            }
            _ => decode_part(&mut self.decoders[0], segments)?,
        };
        self.decoders[0].finish(&mut builder, &file, first_record)
    }
}

impl<D: FormatDecoder> Batches for BatchReader<D> {
    fn next_batch(&mut self) -> anyhow::Result<Option<Batch>> {
        Ok(self.read_batch()?)
    }

    fn rewind(&mut self) {
        self.source = D::source(&self.files, &self.options);
        self.current = None;
        self.done = false;
    }

    fn recycle(&mut self, batch: Batch) {
        if let Some(decoder) = self.decoders.first_mut() {
            decoder.recycle(batch);
        }
    }
}

/// Decodes the records of `segments`, in order, into a new builder.
fn decode_part<D: FormatDecoder>(
    decoder: &mut D,
    segments: &[Segment],
) -> Result<BatchBuilder, D::Error> {
    let rows = segments.iter().map(|(_, r)| r.len()).sum();
    let mut out = decoder.recycled_batch(rows);
    for (chunk, range) in segments {
        decoder.decode_chunk(chunk, range.clone(), &mut out)?;
    }
    Ok(out)
}

/// Splits the `rows` records of `segments` into at most `parts` contiguous
/// runs of (nearly) equal size. Chunks whose records are read one after
/// the other ([`RecordLayout::Sequential`]: Avro blocks) are cut at chunk
/// boundaries where one lies within a quarter part of the even cut, since
/// starting inside such a chunk means skipping the records before.
fn split(segments: &[Segment], rows: usize, parts: usize) -> Vec<Vec<Segment>> {
    // Where each segment starts, in rows of the batch.
    let mut starts = Vec::with_capacity(segments.len());
    let mut at = 0;
    for (_, range) in segments {
        starts.push(at);
        at += range.len();
    }
    let sequential = segments
        .iter()
        .any(|(c, _)| matches!(c.layout, RecordLayout::Sequential));
    let slack = rows / parts / 4;
    let mut cuts = Vec::with_capacity(parts + 1);
    cuts.push(0);
    for p in 1..parts {
        let even = p * rows / parts;
        let cut = if sequential {
            starts
                .iter()
                .copied()
                .filter(|s| s.abs_diff(even) <= slack)
                .min_by_key(|s| s.abs_diff(even))
                .unwrap_or(even)
        } else {
            even
        };
        if cut > *cuts.last().unwrap_or(&0) {
            cuts.push(cut);
        }
    }
    cuts.push(rows);
    cuts.windows(2)
        .map(|w| rows_of(segments, &starts, w[0]..w[1]))
        .collect()
}

/// The segments holding rows `want` of the batch (`starts`: where each
/// segment starts).
fn rows_of(segments: &[Segment], starts: &[usize], want: Range<usize>) -> Vec<Segment> {
    let mut part = Vec::new();
    for ((chunk, range), &start) in segments.iter().zip(starts) {
        let lo = want.start.max(start);
        let hi = want.end.min(start + range.len());
        if lo < hi {
            let first = range.start + (lo - start);
            part.push((chunk.clone(), first..first + (hi - lo)));
        }
    }
    part
}

/// A spec file and where it came from.
pub(crate) struct LoadedSpec {
    /// The parsed spec file.
    pub(crate) spec: SpecFile,
    /// Its path, for messages.
    pub(crate) path: PathBuf,
}

/// Reads the spec file at `path` (a manifest `parses[]` entry, an object
/// with `features` or `context_features`/`sequence_features`, or a bare
/// features array); errors name the file.
pub(crate) fn load_spec(path: &Path) -> anyhow::Result<LoadedSpec> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("spec file {}", path.display()))?;
    let spec =
        SpecFile::from_json(&text).with_context(|| format!("spec file {}", path.display()))?;
    Ok(LoadedSpec {
        spec,
        path: path.to_path_buf(),
    })
}

/// A reader of `files` (all of `format`) decoding the features of `spec`.
pub(crate) fn open(
    files: Vec<PathBuf>,
    format: Format,
    spec: &LoadedSpec,
    options: BatchOptions,
) -> anyhow::Result<Box<dyn Batches>> {
    let context = || format!("spec file {}", spec.path.display());
    Ok(match format {
        Format::Tfrecord => {
            let decoder = ExampleDecoder::from_spec_file(&spec.spec).with_context(context)?;
            Box::new(BatchReader::new(files, decoder, options)?)
        }
        Format::Avro => {
            if spec.spec.sequence {
                anyhow::bail!(
                    "{}: context/sequence features are for TFRecord files of \
                     tf.SequenceExamples, not Avro",
                    context()
                );
            }
            let decoder = AvroDecoder::new(&spec.spec.features).with_context(context)?;
            Box::new(BatchReader::new(files, decoder, options)?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(records: usize, sequential: bool) -> Chunk {
        Chunk {
            file: "f".into(),
            index: 0,
            first_record: 0,
            record_count: records,
            stored_bytes: 0,
            compressed: false,
            data: Default::default(),
            layout: if sequential {
                RecordLayout::Sequential
            } else {
                RecordLayout::Spans(vec![0..0; records].into())
            },
        }
    }

    /// Every row of `segments` once, in order, as (chunk size, row).
    fn flat(parts: &[Vec<Segment>]) -> Vec<(usize, usize)> {
        parts
            .iter()
            .flatten()
            .flat_map(|(c, r)| r.clone().map(move |i| (c.record_count, i)))
            .collect()
    }

    fn sizes(parts: &[Vec<Segment>]) -> Vec<usize> {
        parts
            .iter()
            .map(|p| p.iter().map(|(_, r)| r.len()).sum())
            .collect()
    }

    #[test]
    fn split_covers_every_row_once_in_order() {
        for sequential in [false, true] {
            let segments = vec![
                (chunk(10, sequential), 3..10),
                (chunk(5, sequential), 0..5),
                (chunk(4, sequential), 0..2),
            ];
            for n in 1..=14 {
                let parts = split(&segments, 14, n);
                assert_eq!(flat(&parts), flat(std::slice::from_ref(&segments)));
                let sizes = sizes(&parts);
                assert!(sizes.iter().all(|&n| n > 0), "{sizes:?}");
                if !sequential {
                    assert_eq!(parts.len(), n);
                    assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
                }
            }
        }
    }

    #[test]
    fn sequential_chunks_are_cut_at_their_boundaries_when_close() {
        // 4 blocks of 25 rows, batch of 100 starting 5 rows into the
        // first: 20, 25, 25, 25, 5.
        let segments = vec![
            (chunk(25, true), 5..25),
            (chunk(25, true), 0..25),
            (chunk(25, true), 0..25),
            (chunk(25, true), 0..25),
            (chunk(25, true), 0..5),
        ];
        let parts = split(&segments, 100, 4);
        // Even cuts at 25, 50, 75 snap to the block starts 20, 45, 70.
        assert_eq!(sizes(&parts), [20, 25, 25, 30]);
        assert!(parts[1..].iter().all(|p| p[0].1.start == 0));
        // One big block is cut inside.
        let one = vec![(chunk(1000, true), 0..1000)];
        assert_eq!(sizes(&split(&one, 1000, 4)), [250, 250, 250, 250]);
    }
}
