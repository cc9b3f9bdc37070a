//! `grist demo`: write a built-in dataset in every format grist reads —
//! TFRecord (plain and GZIP), Avro (codecs null and deflate), FFRecord
//! and OFRecord — read each back through the loader in order, checking
//! every value, then load each shuffled with autotuned threads and print a
//! table of the speeds; last, convert between the formats
//! ([`convert`]), checking every value of each output.

mod convert;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use grist::Threads;
use grist_avro_tensor::Codec;
use grist_tensor::{Batch, SpecFile, Values};

use crate::bench::parse_threads;
use crate::fmt;
use crate::out::Out;
use crate::prod19::{self, Expected, FileKind, OutputFormat};

/// The batch size the demo reads with.
const BATCH: usize = 1024;

/// The shuffle buffer of the timed pass (streams), in records.
const SHUFFLE_BUFFER: usize = 10_000;

/// The files `prod19::write` writes for the demo.
const KINDS: [FileKind; 6] = [
    FileKind::Tfrecord { gzip: false },
    FileKind::Tfrecord { gzip: true },
    FileKind::Avro(Codec::Null),
    FileKind::Avro(Codec::Deflate),
    FileKind::Ffrecord,
    FileKind::Ofrecord,
];

/// Arguments of `grist demo`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The dataset is prod19 (19 features: 6 scalars, 8 dense vectors, 5 sparse \
                        features), the same as `grist gen prod19` writes, as TFRecord files of \
                        tf.Example records (plain and GZIP), Avro files (codecs null and \
                        deflate), an FFRecord file of tf.Example samples and an OFRecord dataset \
                        of four parts. Each is read back through grist's loader in order, every \
                        value compared with the generated data; then each is loaded shuffled \
                        (streams: a buffer of 10,000 records and the block sampling of \
                        AvroTensorDataset; FFRecord and OFRecord: an exact permutation) with the \
                        parse threads autotuned, and timed. Without --dir the files go to a \
                        temporary folder that is removed afterwards. Last, the data is converted \
                        between the formats with grist::convert (TFRecord → Avro → FFRecord → \
                        OFRecord → TFRecord GZIP, each reading the previous outputs with their \
                        spec.json; and the Avro file, with its int32, bool and float64 fields, \
                        into OFRecord and TFRecord), each output read back and every value \
                        compared."
)]
pub(crate) struct Args {
    /// Number of records to write.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    records: u64,

    /// Random seed of the dataset (and of the shuffle).
    #[arg(long, value_name = "S", default_value_t = 42)]
    seed: u64,

    /// Keep the files in this folder (created if missing), or under this
    /// object store URL (`s3://bucket/demo`), instead of a temporary
    /// folder.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// Parse threads per batch: a number, or `autotune`.
    #[arg(long, value_name = "N|autotune", default_value = "autotune", value_parser = parse_threads)]
    threads: Threads,
}

/// One data set of the demo: a file or folder and what it is (its format
/// is told by grist's registry, from its name).
struct Data {
    path: grist::Address,
    kind: FileKind,
    describe: String,
    /// The types it stores (Avro's own, or tf.Example's).
    types: OutputFormat,
    records: u64,
    bytes: u64,
}

/// The loader of `data`: batches of [`BATCH`], one epoch.
fn loader(data: &Data, threads: Threads) -> anyhow::Result<grist::LoaderBuilder> {
    let spec: SpecFile = prod19::spec_file(data.types);
    Ok(grist::loader()
        .with_storage(crate::sources::storage()?)
        .with_path(data.path.as_str())
        .with_spec_file(spec)
        .with_batch_size(BATCH)
        .with_threads(threads))
}

/// The sum of `s_long0` over a batch: equal over two passes that read the
/// same records, in whatever order.
fn checksum(batch: &Batch) -> i64 {
    match batch
        .get("s_long0")
        .and_then(|c| c.as_dense())
        .map(|d| &d.values)
    {
        Some(Values::Int64(v)) => v.iter().fold(0i64, |a, &x| a.wrapping_add(x)),
        _ => 0,
    }
}

/// Reads `data` in order, comparing each batch with the generated data;
/// returns the checksum of the records and the batch count.
fn check(data: &Data, threads: Threads, records: u64, seed: u64) -> anyhow::Result<(i64, u64)> {
    let mut expected = Expected::new(records, seed, data.types);
    let mut loader = loader(data, threads)?.build()?;
    let mut sum = 0i64;
    let mut batches = 0u64;
    while let Some(batch) = loader.next_batch() {
        let batch = batch?;
        expected
            .check(&batch)
            .with_context(|| format!("{}: batch {batches}", data.path))?;
        sum = sum.wrapping_add(checksum(&batch));
        batches += 1;
        loader.recycle(batch);
    }
    expected
        .finish()
        .with_context(|| format!("{}", data.path))?;
    Ok((sum, batches))
}

/// What the timed, shuffled pass measured.
struct Timed {
    records: u64,
    batches: u64,
    elapsed: Duration,
    stats: grist::Stats,
    sum: i64,
}

/// Loads `data` shuffled, timed.
fn timed(data: &Data, threads: Threads, seed: u64) -> anyhow::Result<Timed> {
    let mut loader = loader(data, threads)?
        .with_shuffle(true)
        .with_shuffle_buffer(SHUFFLE_BUFFER)
        .with_seed(seed)
        .build()?;
    let mut t = Timed {
        records: 0,
        batches: 0,
        elapsed: Duration::ZERO,
        stats: loader.stats(),
        sum: 0,
    };
    let start = Instant::now();
    while let Some(batch) = loader.next_batch() {
        let batch = batch?;
        t.records += batch.rows() as u64;
        t.batches += 1;
        t.sum = t.sum.wrapping_add(checksum(&batch));
        loader.recycle(batch);
    }
    t.elapsed = start.elapsed();
    t.stats = loader.stats();
    Ok(t)
}

/// Runs `grist demo`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let temp;
    let dir = match &args.dir {
        Some(dir) => grist::Address::parse(&dir.to_string_lossy())?,
        None => {
            temp = tempfile::Builder::new()
                .prefix("grist-demo-")
                .tempdir()
                .context("creating a temporary folder")?;
            grist::Address::from(temp.path())
        }
    };
    let mut out = Out::stdout();
    out.line(format_args!(
        "grist demo: prod19, {} records (seed {}): 6 scalar, 8 dense and 5 sparse features per record",
        fmt::count(args.records),
        args.seed
    ))?;
    out.flush()?;

    let start = Instant::now();
    let dataset = prod19::write(&dir, args.records, args.seed, &KINDS, &|_| {})?;
    let all: Vec<Data> = dataset
        .files
        .iter()
        .map(|f| Data {
            path: f.path.clone(),
            kind: f.kind,
            describe: f.kind.describe(),
            types: f.kind.format(),
            records: f.records,
            bytes: f.bytes,
        })
        .collect();
    out.line(format_args!(
        "\nwrote{} (generate + encode + write took {})",
        if args.dir.is_some() {
            ""
        } else {
            ", in a temporary folder"
        },
        fmt::seconds(start.elapsed())
    ))?;
    let width = all.iter().map(|d| d.path.as_str().len()).max().unwrap_or(0);
    for d in &all {
        out.line(format_args!(
            "  {:<width$}  {:>10}  {:>8} records  {}",
            d.path.as_str(),
            fmt::bytes(d.bytes),
            fmt::count(d.records),
            d.describe
        ))?;
    }
    for spec in &dataset.specs {
        out.line(format_args!("  {spec}"))?;
    }

    out.line(format_args!(
        "\nread back in order through the loader, batches of {BATCH}, checksums checked, \
         every value compared with the generated data"
    ))?;
    out.flush()?;
    let mut sums = Vec::new();
    for d in &all {
        let (sum, batches) = check(d, args.threads, args.records, args.seed)?;
        sums.push(sum);
        out.line(format_args!(
            "  {:<width$}  OK  {} records in {} batches",
            d.path.as_str(),
            fmt::count(d.records),
            fmt::count(batches)
        ))?;
        out.flush()?;
    }

    out.line(format_args!(
        "\nloaded shuffled (seed {}; streams: buffer of {} records + file order; FFRecord and \
         OFRecord: exact permutation), parse threads {}",
        args.seed,
        fmt::count(SHUFFLE_BUFFER as u64),
        match args.threads {
            Threads::Fixed(n) => n.to_string(),
            _ => "autotuned".into(),
        }
    ))?;
    let rows: Vec<[String; 6]> = std::iter::once([
        "format".to_string(),
        "records".into(),
        "batches".into(),
        "records/s".into(),
        "MB/s".into(),
        "threads chosen".into(),
    ])
    .chain(
        all.iter()
            .zip(&sums)
            .map(|(d, &sum)| -> anyhow::Result<[String; 6]> {
                let t = timed(d, args.threads, args.seed)?;
                if t.records != d.records || t.sum != sum {
                    anyhow::bail!(
                        "{}: the shuffled pass read other records ({} records) than the ordered one",
                        d.path,
                        t.records
                    );
                }
                let secs = t.elapsed.as_secs_f64().max(1e-9);
                let used: Vec<String> = t
                    .stats
                    .threads_used
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(k, n)| format!("{}×{}", n, k + 1))
                    .collect();
                Ok([
                    d.describe.clone(),
                    fmt::count(t.records),
                    fmt::count(t.batches),
                    fmt::count((t.records as f64 / secs) as u64),
                    format!("{:.1}", t.stats.bytes as f64 / secs / 1e6),
                    format!("{:.2} ({})", t.stats.mean_threads(), used.join(", ")),
                ])
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
    )
    .collect();
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &w))| {
                if c == 0 || c == 5 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.line(format_args!("  {}", cells.join("  ").trim_end()))?;
    }

    convert::run(&mut out, &dir, &all, args.records, args.seed, args.threads)?;

    out.line("")?;
    match &args.dir {
        Some(_) => {
            let spec = prod19::spec_path(&dir, OutputFormat::Tfrecord);
            out.line(format_args!(
                "next: `grist bench --spec {} --shuffle-buffer 10000 {}` measures one of them \
                 (Avro: --spec {})",
                spec,
                all[4].path,
                prod19::spec_path(&dir, OutputFormat::Avro),
            ))?;
        }
        None => out.line(
            "next: rerun with --dir DIR to keep the files, then `grist bench --spec \
             DIR/prod19.spec.json --shuffle-buffer 10000 DIR/prod19.ffr` measures one of them",
        )?,
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
