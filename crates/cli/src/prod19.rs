//! The prod19 synthetic dataset as TFRecord files, shared by `gen` and
//! `demo`, and the check that decoded batches equal the generated data.
//!
//! A dataset of `n` records is generated in chunks of [`CHUNK_ROWS`] rows
//! (to bound memory): chunk `k` is `synth::prod19(rows, chunk_seed(seed,
//! k))`, so the first chunk — and any dataset of up to `CHUNK_ROWS`
//! records — is exactly `synth::prod19(n, seed)`.

use std::borrow::Cow;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use grist_tensor::synth::{prod19, prod19_example_specs};
use grist_tensor::{Batch, Column, DenseTensor, SparseTensor, SpecFile, Tensor, Values};
use grist_tfrecord::{RecordWriter, WriteSummary, WriterOptions, encode_batch};
use rayon::prelude::*;
use serde_json::json;

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

/// The chunks of a dataset of `records` records, in order.
pub(crate) fn chunks(records: u64, seed: u64) -> impl Iterator<Item = Batch> {
    (0..records.div_ceil(CHUNK_ROWS))
        .map(move |k| prod19(chunk_rows(records, k), chunk_seed(seed, k)))
}

/// The spec file of prod19 as tf.Example features.
pub(crate) fn spec_file() -> SpecFile {
    SpecFile {
        features: prod19_example_specs(),
        ..SpecFile::default()
    }
}

/// One file written by [`write`].
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) path: PathBuf,
    pub(crate) records: u64,
    /// The size on disk.
    pub(crate) bytes: u64,
}

/// What [`write`] wrote.
#[derive(Debug)]
pub(crate) struct Dataset {
    /// `prod19.tfrecord`, then `prod19.tfrecord.gz` when asked for.
    pub(crate) files: Vec<Written>,
    /// `prod19.spec.json`.
    pub(crate) spec: PathBuf,
    /// The time taken to generate, encode and write everything.
    pub(crate) elapsed: Duration,
}

/// Writes `records` records of prod19 seeded with `seed` into `dir`:
/// `prod19.tfrecord`, also `prod19.tfrecord.gz` when `gzip`, and
/// `prod19.spec.json` (`{"features": [...]}`).
pub(crate) fn write(dir: &Path, records: u64, seed: u64, gzip: bool) -> anyhow::Result<Dataset> {
    let start = Instant::now();
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let spec = spec_file();
    let spec_path = dir.join(format!("{NAME}.spec.json"));
    let text = serde_json::to_string_pretty(&json!({ "features": spec.features }))?;
    fs::write(&spec_path, text + "\n")
        .with_context(|| format!("writing {}", spec_path.display()))?;

    let mut paths = vec![dir.join(format!("{NAME}.tfrecord"))];
    if gzip {
        paths.push(dir.join(format!("{NAME}.tfrecord.gz")));
    }
    let writers = paths
        .iter()
        .map(|p| RecordWriter::create(p, WriterOptions::default()))
        .collect::<Result<Vec<_>, _>>()?;
    // Each file is written (and compressed) on its own thread, while the
    // chunks are generated and encoded a few at a time in parallel.
    let summaries = std::thread::scope(|scope| -> anyhow::Result<Vec<WriteSummary>> {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for mut writer in writers {
            let (tx, rx) = mpsc::sync_channel::<Arc<Vec<Vec<u8>>>>(2);
            senders.push(tx);
            handles.push(
                scope.spawn(move || -> grist_tfrecord::Result<WriteSummary> {
                    for chunk in rx {
                        for record in chunk.iter() {
                            writer.write_record(record)?;
                        }
                    }
                    writer.finish()
                }),
            );
        }
        let produced = produce(records, seed, &spec, &senders);
        drop(senders);
        let mut summaries = Vec::new();
        for handle in handles {
            let summary = handle
                .join()
                .map_err(|_| anyhow::anyhow!("a writer thread panicked"))??;
            summaries.push(summary);
        }
        // A writer's own error explains a failed send better.
        produced?;
        Ok(summaries)
    })?;
    let mut files = Vec::new();
    for (summary, path) in summaries.into_iter().zip(paths) {
        let bytes = fs::metadata(&path)
            .with_context(|| format!("{}", path.display()))?
            .len();
        files.push(Written {
            path,
            records: summary.records,
            bytes,
        });
    }
    Ok(Dataset {
        files,
        spec: spec_path,
        elapsed: start.elapsed(),
    })
}

/// Generates and encodes the chunks of the dataset, a few at a time in
/// parallel, and sends each to every writer, in order.
fn produce(
    records: u64,
    seed: u64,
    spec: &SpecFile,
    writers: &[mpsc::SyncSender<Arc<Vec<Vec<u8>>>>],
) -> anyhow::Result<()> {
    let window = rayon::current_num_threads().max(1) as u64;
    let total_chunks = records.div_ceil(CHUNK_ROWS);
    let mut k = 0;
    while k < total_chunks {
        let end = (k + window).min(total_chunks);
        let encoded: Vec<Vec<Vec<u8>>> = (k..end)
            .into_par_iter()
            .map(|k| encode_batch(&prod19(chunk_rows(records, k), chunk_seed(seed, k)), spec))
            .collect::<Result<_, _>>()?;
        for chunk in encoded {
            let chunk = Arc::new(chunk);
            for w in writers {
                w.send(chunk.clone())
                    .map_err(|_| anyhow::anyhow!("a writer stopped early"))?;
            }
        }
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
    /// `seed`.
    pub(crate) fn new(records: u64, seed: u64) -> Self {
        Expected {
            chunks: Box::new(chunks(records, seed)),
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

/// Rows `rows` of a batch of dense and sparse columns (sparse indices
/// sorted by row, as decoders and `synth` produce them).
fn slice_rows(batch: &Batch, rows: std::ops::Range<usize>) -> anyhow::Result<Batch> {
    let n = rows.len();
    let mut columns = Vec::with_capacity(batch.columns().len());
    for c in batch.columns() {
        let tensor = match &c.tensor {
            Tensor::Dense(d) => {
                let row_len: usize = d.shape.iter().skip(1).product();
                let mut values = Values::new(d.dtype());
                values.extend_from_range(&d.values, rows.start * row_len..rows.end * row_len);
                let mut shape = d.shape.clone();
                if let Some(first) = shape.first_mut() {
                    *first = n;
                }
                Tensor::Dense(DenseTensor { shape, values })
            }
            Tensor::Sparse(s) => {
                let rank = s.rank().max(1);
                let row_of = |i: usize| s.indices[i * rank];
                let nnz = s.nnz();
                let lo = partition_point(nnz, |i| row_of(i) < rows.start as i64);
                let hi = partition_point(nnz, |i| row_of(i) < rows.end as i64);
                let mut indices = s.indices[lo * rank..hi * rank].to_vec();
                for tuple in indices.chunks_mut(rank) {
                    tuple[0] -= rows.start as i64;
                }
                let mut values = Values::new(s.dtype());
                values.extend_from_range(&s.values, lo..hi);
                let mut dense_shape = s.dense_shape.clone();
                if let Some(first) = dense_shape.first_mut() {
                    *first = n as i64;
                }
                Tensor::Sparse(SparseTensor {
                    indices,
                    values,
                    dense_shape,
                })
            }
            Tensor::Ragged(_) => bail!(
                "feature {:?}: slicing ragged columns is not supported",
                c.name
            ),
        };
        columns.push(Column {
            name: c.name.clone(),
            section: c.section,
            tensor,
        });
    }
    Ok(Batch::new(n, columns))
}

/// The first `i` in `0..n` for which `pred` is false (`pred` must be true
/// then false over the range).
fn partition_point(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_chunk_is_the_plain_dataset() {
        let mut it = chunks(100, 7);
        assert_eq!(it.next().unwrap(), prod19(100, 7));
        assert!(it.next().is_none());
    }

    #[test]
    fn slices_reassemble() {
        let whole = prod19(50, 3);
        let mut expected = Expected::new(50, 3);
        for range in [0..7, 7..30, 30..50] {
            let part = slice_rows(&whole, range).unwrap();
            expected.check(&part).unwrap();
        }
        assert_eq!(expected.finish().unwrap(), 50);
        let mut wrong = Expected::new(50, 4);
        assert!(wrong.check(&whole).is_err());
    }
}
