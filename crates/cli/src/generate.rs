//! `grist gen`: synthetic datasets to benchmark and play with.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use grist_avro_tensor::Codec;

use crate::fmt;
use crate::prod19::{self, FileKind, OutputFormat};
use crate::progress::Progress;

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
#[command(after_help = "Examples:\n  \
    grist gen prod19 --records 200000 --out /tmp/prod19\n  \
    grist bench --spec /tmp/prod19/prod19.spec.json /tmp/prod19/prod19.tfrecord\n  \
    grist gen prod19 --format avro --codec deflate --out /tmp/prod19\n  \
    grist bench --spec /tmp/prod19/prod19.avro.spec.json /tmp/prod19/prod19.deflate.avro\n  \
    grist gen prod19 --format ffrecord --out /tmp/prod19\n  \
    grist gen prod19 --format ofrecord --out /tmp/prod19\n  \
    grist cat --spec /tmp/prod19/prod19.spec.json --batch-size 2 /tmp/prod19/prod19.ofrecord\n\n\
    The data goes to files; what was written (names, records, sizes) is said on stderr, \
    with a progress bar while writing when stderr is a terminal.")]
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

    /// The file format: TFRecord files of tf.Example records, an Avro
    /// object container file of records with the features' own types, an
    /// FFRecord file of tf.Example samples, or an OFRecord dataset (a
    /// folder of 4 part files of OFRecords).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "tfrecord")]
    format: OutputFormat,

    /// TFRecord: also write a GZIP-compressed copy (`<name>.tfrecord.gz`).
    #[arg(long)]
    gzip: bool,

    /// Avro: the codec of the blocks (null, deflate, snappy, zstandard,
    /// bzip2, xz). By default, null.
    #[arg(long, value_name = "CODEC", value_parser = parse_codec)]
    codec: Option<Codec>,

    /// Output folder (created if missing), or an object store URL
    /// (`s3://bucket/dir`: each file is uploaded when complete). TFRecord: writes
    /// `<name>.tfrecord`, `<name>.spec.json` and, with --gzip,
    /// `<name>.tfrecord.gz`. Avro: `<name>.avro` (codec null) or
    /// `<name>.<codec>.avro`, and `<name>.avro.spec.json`. FFRecord:
    /// `<name>.ffr` and `<name>.spec.json`. OFRecord: the folder
    /// `<name>.ofrecord` (`part-00000`..`part-00003`, replacing the parts
    /// of an earlier run) and `<name>.spec.json`.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,

    /// Replace outputs that exist already (each file is replaced whole,
    /// once complete). Without it, gen refuses to write when any of its
    /// outputs exists and writes nothing; a spec file that already holds
    /// exactly what gen would write is no conflict (several formats share
    /// `<name>.spec.json`).
    #[arg(long)]
    force: bool,
}

/// An Avro codec by its `avro.codec` name.
fn parse_codec(name: &str) -> Result<Codec, String> {
    Codec::from_name(name).map_err(|_| {
        let names: Vec<&str> = Codec::ALL.iter().map(|c| c.name()).collect();
        format!("expected one of {}", names.join(", "))
    })
}

/// Runs `grist gen`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let DatasetName::Prod19 = args.dataset;
    let kinds = match (args.format, args.codec) {
        (OutputFormat::Tfrecord, Some(_)) => bail!("--codec is for --format avro"),
        (OutputFormat::Tfrecord, None) => {
            let mut kinds = vec![FileKind::Tfrecord { gzip: false }];
            if args.gzip {
                kinds.push(FileKind::Tfrecord { gzip: true });
            }
            kinds
        }
        (OutputFormat::Avro, _) if args.gzip => {
            bail!("--gzip is for --format tfrecord (Avro files compress with --codec)")
        }
        (OutputFormat::Avro, codec) => vec![FileKind::Avro(codec.unwrap_or(Codec::Null))],
        (OutputFormat::Ffrecord | OutputFormat::Ofrecord, _)
            if args.gzip || args.codec.is_some() =>
        {
            bail!("--gzip is for --format tfrecord and --codec for --format avro")
        }
        (OutputFormat::Ffrecord, _) => vec![FileKind::Ffrecord],
        (OutputFormat::Ofrecord, _) => vec![FileKind::Ofrecord],
    };
    let dir = grist::Address::parse(&args.out.to_string_lossy())?;
    if !args.force {
        refuse_to_overwrite(&dir, &kinds)?;
    }
    let bar = Progress::new(Some(args.records), "records");
    let dataset = prod19::write(&dir, args.records, args.seed, &kinds, &|n| bar.set(n))?;
    bar.finish();
    // What was written is status, not data: stderr.
    for f in &dataset.files {
        eprintln!(
            "wrote {}  ({} records, {})",
            f.path,
            fmt::count(f.records),
            fmt::bytes(f.bytes)
        );
    }
    for spec in &dataset.specs {
        eprintln!("wrote {spec}");
    }
    eprintln!("done in {}", fmt::seconds(dataset.elapsed));
    Ok(ExitCode::SUCCESS)
}

/// Fails, naming the file, when one of the outputs of `kinds` in `dir`
/// exists, unless it is a spec file holding exactly what gen would write.
fn refuse_to_overwrite(dir: &grist::Address, kinds: &[FileKind]) -> anyhow::Result<()> {
    let storage = crate::sources::storage()?;
    let mut outputs = prod19::outputs(dir, kinds);
    let specs: Vec<(grist::Address, String)> = kinds
        .iter()
        .map(|k| {
            let path = prod19::spec_path(dir, k.format());
            Ok((path, prod19::spec_text(k.format())?))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    outputs.retain(|path| {
        let Some((_, text)) = specs.iter().find(|(p, _)| p == path) else {
            return true;
        };
        // The same spec again is no overwrite (read only when the size
        // says it may be).
        let same_size = storage
            .stat(path)
            .is_ok_and(|m| m.is_some_and(|m| !m.is_dir && m.size == text.len() as u64));
        !(same_size
            && storage
                .read_all(path)
                .is_ok_and(|held| held.as_ref() == text.as_bytes()))
    });
    if let Some(path) = prod19::first_existing(&storage, &outputs)? {
        bail!("{path} exists: not overwriting it (pass --force to replace gen's outputs)");
    }
    Ok(())
}
