//! Files → batches: the read + framing + CRC + parse pipeline shared by
//! `cat --spec`, `bench` and `demo`.
//!
//! [`BatchReader`] pulls chunks of whole frames from a
//! [`TfRecordSource`] (CRCs checked there), gathers `batch_size` records
//! (a batch may span chunks and files, as `TFRecordDataset(files).batch(n)`
//! does), and decodes them with an [`ExampleDecoder`]. With several
//! threads, a batch's rows are split into contiguous parts, each decoded by
//! its own decoder clone into its own builder on a rayon thread, and the
//! builders are appended in order.

use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use grist_tensor::{Batch, BatchBuilder, Chunk, Decoder as _, RecordSource as _, SpecFile};
use grist_tfrecord::{Error, ExampleDecoder, ReaderOptions, TfRecordSource};
use rayon::prelude::*;

/// How to batch and decode.
#[derive(Clone, Debug)]
pub(crate) struct BatchOptions {
    /// Records per batch (at least 1).
    pub(crate) batch_size: usize,
    /// Whether to drop a final partial batch.
    pub(crate) drop_remainder: bool,
    /// Decode threads per batch (at least 1).
    pub(crate) threads: usize,
    /// Whether to check record CRCs.
    pub(crate) check_crc: bool,
}

/// A run of records of one chunk that belongs to a batch.
type Segment = (Chunk, Range<usize>);

/// Reads the records of a list of files as decoded batches.
pub(crate) struct BatchReader {
    files: Vec<PathBuf>,
    options: BatchOptions,
    source: TfRecordSource,
    /// One decoder per thread.
    decoders: Vec<ExampleDecoder>,
    pool: Option<rayon::ThreadPool>,
    /// The chunk being consumed and the next row in it.
    current: Option<(Chunk, usize)>,
    done: bool,
}

impl BatchReader {
    /// A reader of `files` decoding with `decoder`.
    pub(crate) fn new(
        files: Vec<PathBuf>,
        decoder: ExampleDecoder,
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
            source: Self::source(&files, &options),
            files,
            decoders: vec![decoder; threads],
            pool,
            options,
            current: None,
            done: false,
        })
    }

    /// A fresh source over `files`.
    fn source(files: &[PathBuf], options: &BatchOptions) -> TfRecordSource {
        TfRecordSource::new(files.iter().cloned())
            .with_options(ReaderOptions::default().with_check_crc(options.check_crc))
    }

    /// Starts reading the files again from the beginning.
    pub(crate) fn rewind(&mut self) {
        self.source = Self::source(&self.files, &self.options);
        self.current = None;
        self.done = false;
    }

    /// The next batch; `None` at the end. A bad record (framing or parse)
    /// is an error for the batch that holds it: the batches before it have
    /// been returned, that batch is not.
    pub(crate) fn next_batch(&mut self) -> Result<Option<Batch>, Error> {
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
    fn gather(&mut self) -> Result<Vec<Segment>, Error> {
        let mut segments = Vec::new();
        let mut need = self.options.batch_size;
        while need > 0 && !self.done {
            let (chunk, next) = match self.current.take() {
                Some((chunk, next)) if next < chunk.record_count => (chunk, next),
                _ => match self.source.next_chunk()? {
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

    /// Gives a consumed batch's memory back for the next batch to reuse.
    pub(crate) fn recycle(&mut self, batch: Batch) {
        if let Some(decoder) = self.decoders.first_mut() {
            decoder.recycle(batch);
        }
    }

    /// Decodes the `rows` records of `segments` into one batch.
    fn decode(&mut self, segments: &[Segment], rows: usize) -> Result<Batch, Error> {
        let (file, first_record) = {
            let (chunk, range) = &segments[0];
            (chunk.file.clone(), chunk.first_record + range.start as u64)
        };
        let parts = self.options.threads.min(rows);
        let mut builder = match (&self.pool, parts) {
            (Some(pool), 2..) => {
                let parts = split(segments, rows, parts);
                let decoders = &mut self.decoders[..parts.len()];
                let built: Vec<Result<BatchBuilder, Error>> = pool.install(|| {
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

/// Decodes the records of `segments`, in order, into a new builder.
fn decode_part(decoder: &mut ExampleDecoder, segments: &[Segment]) -> Result<BatchBuilder, Error> {
    let rows = segments.iter().map(|(_, r)| r.len()).sum();
    let mut out = decoder.recycled_batch(rows);
    for (chunk, range) in segments {
        decoder.decode_chunk(chunk, range.clone(), &mut out)?;
    }
    Ok(out)
}

/// Splits the `rows` records of `segments` into `parts` contiguous runs of
/// (nearly) equal size.
fn split(segments: &[Segment], rows: usize, parts: usize) -> Vec<Vec<Segment>> {
    let mut out = Vec::with_capacity(parts);
    let mut seg = 0;
    let mut offset = 0; // rows of segments[seg] already given out
    for p in 0..parts {
        let mut need = (p + 1) * rows / parts - p * rows / parts;
        let mut part = Vec::new();
        while need > 0 && seg < segments.len() {
            let (chunk, range) = &segments[seg];
            let start = range.start + offset;
            let take = need.min(range.end - start);
            part.push((chunk.clone(), start..start + take));
            need -= take;
            offset += take;
            if start + take == range.end {
                seg += 1;
                offset = 0;
            }
        }
        out.push(part);
    }
    out
}

/// A spec file and the decoder built from it.
pub(crate) struct LoadedSpec {
    /// The parsed spec file.
    pub(crate) spec: SpecFile,
    /// Its decoder.
    pub(crate) decoder: ExampleDecoder,
}

/// Reads the spec file at `path` (a manifest `parses[]` entry, an object
/// with `features` or `context_features`/`sequence_features`, or a bare
/// features array) and builds its decoder; errors name the file.
pub(crate) fn load_spec(path: &Path) -> anyhow::Result<LoadedSpec> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("spec file {}", path.display()))?;
    let spec =
        SpecFile::from_json(&text).with_context(|| format!("spec file {}", path.display()))?;
    let decoder = ExampleDecoder::from_spec_file(&spec)
        .with_context(|| format!("spec file {}", path.display()))?;
    Ok(LoadedSpec { spec, decoder })
}

#[cfg(test)]
mod tests {
    use super::*;
    use grist_tensor::RecordLayout;

    fn chunk(records: usize) -> Chunk {
        Chunk {
            file: "f".into(),
            index: 0,
            first_record: 0,
            record_count: records,
            stored_bytes: 0,
            compressed: false,
            data: Default::default(),
            layout: RecordLayout::Spans(vec![0..0; records].into()),
        }
    }

    #[test]
    fn split_covers_every_row_once_in_order() {
        let segments = vec![(chunk(10), 3..10), (chunk(5), 0..5), (chunk(4), 0..2)];
        for parts in 1..=14 {
            let split = split(&segments, 14, parts);
            assert_eq!(split.len(), parts);
            let flat: Vec<(usize, usize)> = split
                .iter()
                .flatten()
                .flat_map(|(c, r)| r.clone().map(move |i| (c.record_count, i)))
                .collect();
            let whole: Vec<(usize, usize)> = segments
                .iter()
                .flat_map(|(c, r)| r.clone().map(move |i| (c.record_count, i)))
                .collect();
            assert_eq!(flat, whole);
            let sizes: Vec<usize> = split
                .iter()
                .map(|p| p.iter().map(|(_, r)| r.len()).sum())
                .collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        }
    }
}
