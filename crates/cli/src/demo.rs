//! `grist demo`: write a built-in dataset as TFRecord (plain and GZIP) and
//! Avro (codecs null and deflate), read it back as batches, check every
//! value, and report the speed.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use grist_avro_tensor::Codec;

use crate::fmt;
use crate::out::Out;
use crate::pipeline::{self, BatchOptions, LoadedSpec};
use crate::prod19::{self, Expected, FileKind, Written};

/// The batch size the demo reads with.
const BATCH: usize = 1024;

/// The files the demo writes.
const KINDS: [FileKind; 4] = [
    FileKind::Tfrecord { gzip: false },
    FileKind::Tfrecord { gzip: true },
    FileKind::Avro(Codec::Null),
    FileKind::Avro(Codec::Deflate),
];

/// Arguments of `grist demo`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The dataset is prod19 (19 features: 6 scalars, 8 dense vectors, 5 sparse \
                        features), the same as `grist gen prod19` writes, as TFRecord files of \
                        tf.Example records (plain and GZIP) and Avro files (codecs null and \
                        deflate). Without --dir the files go to a temporary folder that is \
                        removed afterwards."
)]
pub(crate) struct Args {
    /// Number of records to write.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    records: u64,

    /// Random seed of the dataset.
    #[arg(long, value_name = "S", default_value_t = 42)]
    seed: u64,

    /// Keep the files in this folder (created if missing) instead of a
    /// temporary one.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// Decode threads per batch. By default, one per CPU core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..1025))]
    threads: Option<u64>,
}

/// The result of reading one file back.
struct ReadBack {
    records: u64,
    batches: u64,
    /// Time spent producing batches (reading, inflating, checking,
    /// parsing), without the comparison.
    decode_time: Duration,
}

/// Reads `file` back as batches, comparing each with the generated data.
fn read_back(
    file: &Written,
    dir: &std::path::Path,
    threads: usize,
    records: u64,
    seed: u64,
) -> anyhow::Result<ReadBack> {
    let format = file.kind.format();
    let spec = LoadedSpec {
        spec: prod19::spec_file(format),
        path: prod19::spec_path(dir, format),
    };
    let options = BatchOptions {
        batch_size: BATCH,
        drop_remainder: false,
        threads,
        check_crc: true,
    };
    let mut reader = pipeline::open(vec![file.path.clone()], format, &spec, options)?;
    let mut expected = Expected::new(records, seed, format);
    let mut r = ReadBack {
        records: 0,
        batches: 0,
        decode_time: Duration::ZERO,
    };
    loop {
        let t = Instant::now();
        let Some(batch) = reader.next_batch()? else {
            break;
        };
        r.decode_time += t.elapsed();
        expected
            .check(&batch)
            .with_context(|| format!("{}: batch {}", file.path.display(), r.batches))?;
        r.records += batch.rows() as u64;
        r.batches += 1;
    }
    expected
        .finish()
        .with_context(|| format!("{}", file.path.display()))?;
    Ok(r)
}

/// Runs `grist demo`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let threads = match args.threads {
        Some(t) => t as usize,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let temp;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("grist-demo-")
                .tempdir()
                .context("creating a temporary folder")?;
            temp.path().to_path_buf()
        }
    };
    let mut out = Out::stdout();
    out.line(format_args!(
        "grist demo: prod19, {} records (seed {}): 6 scalar, 8 dense and 5 sparse features per record",
        fmt::count(args.records),
        args.seed
    ))?;
    out.flush()?;

    let dataset = prod19::write(&dir, args.records, args.seed, &KINDS)?;
    out.line(format_args!(
        "\nwrote{} (generate + encode + write took {})",
        if args.dir.is_some() {
            ""
        } else {
            ", in a temporary folder"
        },
        fmt::seconds(dataset.elapsed)
    ))?;
    let width = dataset
        .files
        .iter()
        .map(|f| f.path.display().to_string().len())
        .max()
        .unwrap_or(0);
    for f in &dataset.files {
        out.line(format_args!(
            "  {:<width$}  {:>10}  {:>8} records  {}",
            f.path.display().to_string(),
            fmt::bytes(f.bytes),
            fmt::count(f.records),
            f.kind.describe()
        ))?;
    }
    for spec in &dataset.specs {
        out.line(format_args!("  {}", spec.display()))?;
    }

    out.line(format_args!(
        "\nread back as batches of {BATCH} on {threads} decode thread{}, CRCs and sync markers \
         checked, every value compared with the generated data",
        if threads == 1 { "" } else { "s" }
    ))?;
    out.flush()?;
    for f in &dataset.files {
        let r = read_back(f, &dir, threads, args.records, args.seed)?;
        let secs = r.decode_time.as_secs_f64().max(1e-9);
        out.line(format_args!(
            "  {:<width$}  OK  {} records in {} batches  {:>22}  {:>12}",
            f.path.display().to_string(),
            fmt::count(r.records),
            fmt::count(r.batches),
            fmt::per_second(r.records as f64 / secs, "records"),
            fmt::mb_per_second(f.bytes as f64 / secs)
        ))?;
        out.flush()?;
    }

    out.line("")?;
    match &args.dir {
        Some(dir) => {
            let data = |kind: FileKind| dir.join(kind.file_name());
            let plain = data(KINDS[0]);
            let avro = data(KINDS[2]);
            let spec = prod19::spec_path(dir, KINDS[0].format());
            let avro_spec = prod19::spec_path(dir, KINDS[2].format());
            out.line(format_args!(
                "next: `grist cat --spec {} --batch-size 2 {} | head -n 1` prints a batch \
                 as JSON; `grist bench --spec {} {}` measures speed (Avro: \
                 `grist bench --spec {} {}`)",
                spec.display(),
                plain.display(),
                spec.display(),
                plain.display(),
                avro_spec.display(),
                avro.display()
            ))?;
        }
        None => out.line(
            "next: `grist gen prod19 --out DIR` writes such files to keep (or rerun with --dir DIR); \
             then `grist cat --spec DIR/prod19.spec.json --batch-size 2 DIR/prod19.tfrecord | head -n 1` \
             prints a batch as JSON and `grist bench --spec DIR/prod19.spec.json \
             DIR/prod19.tfrecord` measures speed (Avro: `grist gen prod19 --format avro --out DIR`, \
             then `grist bench --spec DIR/prod19.avro.spec.json DIR/prod19.avro`)",
        )?,
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
