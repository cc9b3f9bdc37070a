//! `grist bench`: end-to-end decoding speed (read + framing + checks +
//! parse into batches), repeated until enough time has passed, for
//! TFRecord and Avro files alike.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::json;

use crate::fmt;
use crate::format::{Format, FormatArg};
use crate::out::Out;
use crate::pipeline::{self, BatchOptions, Batches, load_spec};

/// Arguments of `grist bench`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Reads and decodes all files into batches, over and over, until at least \
                        --min-seconds have passed (at least once), then prints records/s, MB/s \
                        (file bytes as stored) and the median time per batch. With --threads N \
                        each batch's rows are split into N contiguous parts decoded in \
                        parallel (for Avro, cut at block boundaries where one is close).\n\n\
                        Example:\n  \
                        grist gen prod19 --records 200000 --out /tmp/prod19\n  \
                        grist bench --spec /tmp/prod19/prod19.spec.json --batch-size 256 \
                        --threads 2 /tmp/prod19/prod19.tfrecord\n  \
                        grist gen prod19 --format avro --codec deflate --out /tmp/prod19\n  \
                        grist bench --spec /tmp/prod19/prod19.avro.spec.json /tmp/prod19/prod19.avro"
)]
pub(crate) struct Args {
    /// The spec file (features to parse), as for `grist cat --spec`.
    #[arg(long, value_name = "SPEC.json")]
    spec: PathBuf,

    /// Records per batch. By default, the spec file's "batch_size", else
    /// 1024.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: Option<u64>,

    /// Decode threads per batch.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..1025))]
    threads: u64,

    /// Skip the CRC checks (TFRecord; Avro blocks are always checked).
    #[arg(long)]
    no_crc: bool,

    /// Keep going until this many seconds have passed (0: one pass).
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    min_seconds: f64,

    /// Print one JSON object: records, batches, seconds, records_per_s,
    /// bytes_per_s, threads, batch_size, median_batch_ms.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    format: FormatArg,

    /// TFRecord or Avro files (all of one format), read in order on each
    /// pass.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// The measurements of a run.
struct Measured {
    passes: u64,
    records: u64,
    batches: u64,
    elapsed: Duration,
    batch_times: Vec<Duration>,
}

/// Runs `grist bench`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Ok(min_time) = Duration::try_from_secs_f64(args.min_seconds) else {
        anyhow::bail!("--min-seconds must be a non-negative number of seconds");
    };
    let loaded = load_spec(&args.spec)?;
    let format = args.format.of_all(&args.files)?;
    let batch_size = args
        .batch_size
        .map(|b| b as usize)
        .or(loaded.spec.batch_size)
        .unwrap_or(1024);
    let threads = args.threads as usize;
    let mut pass_bytes = 0u64;
    for f in &args.files {
        pass_bytes += std::fs::metadata(f)
            .with_context(|| format!("{}", f.display()))?
            .len();
    }
    let options = BatchOptions {
        batch_size,
        drop_remainder: loaded.spec.drop_remainder == Some(true),
        threads,
        check_crc: !args.no_crc,
    };
    let mut reader = pipeline::open(args.files.clone(), format, &loaded, options)?;
    let m = measure(reader.as_mut(), min_time)?;

    let seconds = m.elapsed.as_secs_f64().max(1e-9);
    let records_per_s = m.records as f64 / seconds;
    let bytes_per_s = (pass_bytes * m.passes) as f64 / seconds;
    let median_ms = median(m.batch_times).as_secs_f64() * 1e3;
    let mut out = Out::stdout();
    if args.json {
        out.json(&json!({
            "records": m.records,
            "batches": m.batches,
            "seconds": seconds,
            "records_per_s": records_per_s,
            "bytes_per_s": bytes_per_s,
            "threads": threads,
            "batch_size": batch_size,
            "median_batch_ms": median_ms,
        }))?;
    } else {
        let files = match args.files.len() {
            1 => args.files[0].display().to_string(),
            n => format!("{n} files"),
        };
        let checks = match (format, args.no_crc) {
            (Format::Tfrecord, false) => "CRC checked",
            (Format::Tfrecord, true) => "CRC off",
            (Format::Avro, _) => "sync markers checked",
        };
        out.line(format_args!(
            "{files}: {} {} per pass; batch {batch_size}, {threads} thread{}, {checks}",
            format.name(),
            fmt::bytes(pass_bytes),
            if threads == 1 { "" } else { "s" },
        ))?;
        out.line(format_args!(
            "  {} pass{} in {}: {} records in {} batches",
            m.passes,
            if m.passes == 1 { "" } else { "es" },
            fmt::seconds(m.elapsed),
            fmt::count(m.records),
            fmt::count(m.batches)
        ))?;
        out.line(format_args!(
            "  {}   {}   median {median_ms:.3} ms per batch",
            fmt::per_second(records_per_s, "records"),
            fmt::mb_per_second(bytes_per_s)
        ))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Reads every batch of the files, pass after pass, until `min` has
/// passed (at least one pass; one only when a pass yields nothing).
fn measure(reader: &mut dyn Batches, min: Duration) -> anyhow::Result<Measured> {
    let mut m = Measured {
        passes: 0,
        records: 0,
        batches: 0,
        elapsed: Duration::ZERO,
        batch_times: Vec::new(),
    };
    let start = Instant::now();
    loop {
        if m.passes > 0 {
            reader.rewind();
        }
        let mut pass_records = 0;
        loop {
            let t = Instant::now();
            let Some(batch) = reader.next_batch()? else {
                break;
            };
            m.batch_times.push(t.elapsed());
            pass_records += batch.rows() as u64;
            m.batches += 1;
            // The batch is consumed here; its memory serves the next one,
            // as a training loop that hands batches back would.
            reader.recycle(black_box(batch));
        }
        m.records += pass_records;
        m.passes += 1;
        if start.elapsed() >= min || pass_records == 0 {
            break;
        }
    }
    m.elapsed = start.elapsed();
    Ok(m)
}

/// The median of `times` (zero when empty).
fn median(mut times: Vec<Duration>) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let mid = times.len() / 2;
    let (_, m, _) = times.select_nth_unstable(mid);
    *m
}
