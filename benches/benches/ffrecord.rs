//! FFRecord benchmarks on a prod19-shaped file (40,000 tf.Example samples
//! of `grist_benches::prod19_examples`, ~2.2 kB each, written with
//! `FfrWriter` into a temporary folder and read from the page cache).
//!
//! One iteration reads every sample's bytes once, so every benchmark moves
//! the same bytes:
//!
//! - `sequential_read`: plain `File::read` of the samples' byte range, in
//!   1 MiB reads (the floor: one copy out of the page cache);
//! - `random_batch256/check_data`, `random_batch256/no_check`:
//!   `FfrReader::read_batch` of batches of 256 random sample numbers (a
//!   seeded permutation of all samples, cut into batches) into one reused
//!   `SampleBatch`, with positioned reads, CRC-32 checks on and off;
//! - `random_batch256_mmap/check_data`: the same through the memory-mapped
//!   mode (`Access::mmap`): no copy, the checks touch the bytes;
//! - `random_batch256_mmap/check_data_vec`: the same through
//!   `FfrReader::read`, a `Vec` of `Sample`s per batch;
//! - `random_pread_plain`: the floor of the positioned-read mode, by hand:
//!   one `read_exact_at` per sample of each batch into one buffer, no
//!   checks (what one system call per sample costs).
//!
//! Group `ffrecord_read_prod19_bytes` reports bytes per second,
//! `ffrecord_read_prod19_samples` samples per second. Defaults: 10
//! samples, 1 s warm-up, 4 s measurement (the dev machine has 2 shared
//! cores); override on the command line.

use std::fs::File;
use std::hint::black_box;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use grist_benches::prod19_examples;
use grist_ffrecord::{
    Access, FfrReader, FfrWriter, ReaderOptions, Sample, SampleBatch, WriterOptions,
};
use grist_tensor::synth::SplitMix64;

const SAMPLES: usize = 40_000;
const BATCH: usize = 256;

/// Writes the samples as an FFRecord file at `path`.
fn write_file(path: &Path) {
    let (_, samples) = prod19_examples(SAMPLES, 42);
    let mut w = FfrWriter::create(path, WriterOptions::default()).expect("create");
    for s in &samples {
        w.write_sample(s).expect("write");
    }
    w.finish().expect("finish");
}

/// A seeded permutation of `0..n` (Fisher-Yates).
fn permutation(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = SplitMix64::new(seed);
    let mut v: Vec<u64> = (0..n as u64).collect();
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// Reads bytes `start..` of `path` to the end with plain `read` calls of
/// 1 MiB; returns the number of bytes read.
fn sequential(path: &Path, start: u64, buf: &mut [u8]) -> u64 {
    let mut f = File::open(path).expect("open");
    f.seek(SeekFrom::Start(start)).expect("seek");
    let mut total = 0u64;
    loop {
        let n = f.read(buf).expect("read");
        if n == 0 {
            return total;
        }
        total += n as u64;
    }
}

/// Reads every sample of `reader` in batches of `order`, into one
/// reused [`SampleBatch`]; returns the number of bytes read.
fn random(reader: &FfrReader, order: &[u64], samples: &mut SampleBatch) -> u64 {
    let mut total = 0u64;
    for batch in order.chunks(BATCH) {
        reader.read_batch(batch, samples).expect("read");
        total += samples.iter().map(|s| s.len() as u64).sum::<u64>();
        black_box(&samples);
    }
    total
}

/// [`random`] through [`FfrReader::read`]: a `Vec` of [`Sample`]s per
/// batch, each with its own reference counts.
fn random_vec(reader: &FfrReader, order: &[u64]) -> u64 {
    let mut total = 0u64;
    for batch in order.chunks(BATCH) {
        let samples: Vec<Sample> = reader.read(batch).expect("read");
        total += samples.iter().map(|s| s.data.len() as u64).sum::<u64>();
        black_box(samples);
    }
    total
}

/// Reads every sample in batches of `order` with one plain positioned
/// read each (`offsets`: the header's offsets, the file's size last);
/// returns the number of bytes read.
fn plain_pread(file: &File, offsets: &[u64], order: &[u64], buf: &mut Vec<u8>) -> u64 {
    let mut total = 0u64;
    for batch in order.chunks(BATCH) {
        buf.clear();
        for &i in batch {
            let (start, end) = (offsets[i as usize], offsets[i as usize + 1]);
            let at = buf.len();
            buf.resize(at + (end - start) as usize, 0);
            file.read_exact_at(&mut buf[at..], start).expect("read");
        }
        total += buf.len() as u64;
        black_box(&buf);
    }
    total
}

fn reads(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = dir.path().join("prod19.ffr");
    write_file(&path);
    let checked = FfrReader::open(&path, ReaderOptions::default()).expect("open");
    let unchecked =
        FfrReader::open(&path, ReaderOptions::default().with_check_data(false)).expect("open");
    // SAFETY: the file lives in this bench's own temporary folder and
    // nothing writes to it while it is mapped.
    let mapped = FfrReader::open(
        &path,
        ReaderOptions::default().with_access(unsafe { Access::mmap() }),
    )
    .expect("open");
    let data_len = checked.data_len();
    let header_len = checked.files()[0].header().header_len();
    let offsets = checked.files()[0].header().offsets().to_vec();
    let order = permutation(SAMPLES, 7);
    let mut buf = vec![0u8; 1 << 20];
    let plain = File::open(&path).expect("open");
    let mut batch_buf = Vec::new();
    // Page the file in, and check that every benchmark moves the same
    // bytes.
    assert_eq!(sequential(&path, header_len, &mut buf), data_len);
    let mut samples = SampleBatch::default();
    assert_eq!(random(&checked, &order, &mut samples), data_len);
    assert_eq!(random(&mapped, &order, &mut samples), data_len);
    assert_eq!(random_vec(&mapped, &order), data_len);
    assert_eq!(
        plain_pread(&plain, &offsets, &order, &mut batch_buf),
        data_len
    );
    eprintln!(
        "ffrecord bench: {SAMPLES} samples, {data_len} bytes of samples ({:.0} bytes each), \
         batches of {BATCH}",
        data_len as f64 / SAMPLES as f64
    );

    for (group_name, throughput) in [
        (
            "ffrecord_read_prod19_bytes",
            Throughput::BytesDecimal(data_len),
        ),
        (
            "ffrecord_read_prod19_samples",
            Throughput::Elements(SAMPLES as u64),
        ),
    ] {
        let mut group = c.benchmark_group(group_name);
        group.throughput(throughput);
        group.bench_function("sequential_read", |b| {
            b.iter(|| sequential(&path, header_len, &mut buf))
        });
        group.bench_function("random_batch256/check_data", |b| {
            b.iter(|| random(&checked, &order, &mut samples))
        });
        group.bench_function("random_batch256/no_check", |b| {
            b.iter(|| random(&unchecked, &order, &mut samples))
        });
        group.bench_function("random_batch256_mmap/check_data", |b| {
            b.iter(|| random(&mapped, &order, &mut samples))
        });
        group.bench_function("random_batch256_mmap/check_data_vec", |b| {
            b.iter(|| random_vec(&mapped, &order))
        });
        group.bench_function("random_pread_plain", |b| {
            b.iter(|| plain_pread(&plain, &offsets, &order, &mut batch_buf))
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = reads
}
criterion_main!(benches);
