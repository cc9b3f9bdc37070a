//! `grist gen`: synthetic datasets to benchmark and play with.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::fmt;
use crate::out::Out;
use crate::prod19;

/// The datasets `gen` can write.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum DatasetName {
    /// 19 features like a production ranking model (after LinkedIn's
    /// AvroTensorDataset post): 6 scalars, 8 dense vectors (4 to 32 values),
    /// 5 sparse features (10 to 50 of 50,001 indices).
    Prod19,
}

/// Arguments of `grist gen`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  \
    grist gen prod19 --records 200000 --out /tmp/prod19\n  \
    grist bench --spec /tmp/prod19/prod19.spec.json /tmp/prod19/prod19.tfrecord")]
pub(crate) struct Args {
    /// The dataset.
    #[arg(value_enum)]
    dataset: DatasetName,

    /// Number of records.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    records: u64,

    /// Random seed (the same seed always gives the same files).
    #[arg(long, value_name = "S", default_value_t = 42)]
    seed: u64,

    /// Also write a GZIP-compressed copy (`<name>.tfrecord.gz`).
    #[arg(long)]
    gzip: bool,

    /// Output folder (created if missing). Writes `<name>.tfrecord`,
    /// `<name>.spec.json` and, with --gzip, `<name>.tfrecord.gz`.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Runs `grist gen`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let DatasetName::Prod19 = args.dataset;
    let dataset = prod19::write(&args.out, args.records, args.seed, args.gzip)?;
    let mut out = Out::stdout();
    for f in &dataset.files {
        out.line(format_args!(
            "wrote {}  ({} records, {})",
            f.path.display(),
            fmt::count(f.records),
            fmt::bytes(f.bytes)
        ))?;
    }
    out.line(format_args!("wrote {}", dataset.spec.display()))?;
    out.line(format_args!("done in {}", fmt::seconds(dataset.elapsed)))?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
