//! The demo's conversions: prod19 through every format with
//! `grist::convert`, each output read back with the `spec.json` written
//! beside it and every value compared with the generated data.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use grist::{Address, ConvertError, ConvertTarget, Storage, Threads};
use grist_avro_tensor::Codec;
use grist_tensor::{Batch, Lossy, SpecFile, Tensor, Values, WriteOptions};

use super::{BATCH, Data};
use crate::fmt;
use crate::out::Out;
use crate::prod19::{Expected, FileKind, OutputFormat};

/// What a conversion's outputs hold: prod19 with these types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Holds {
    /// tf.Example's types (int64, float32), as the TFRecord, FFRecord
    /// and OFRecord files of the demo hold them.
    Example,
    /// The Avro record's own types (int32, bool and float64 too).
    Native,
    /// The Avro record's types with float64 narrowed to float32: what
    /// tf.Example holds of them under `Lossy::Allow`.
    Narrowed,
}

impl Holds {
    /// The expected data of `records` records seeded with `seed`.
    pub(super) fn expected(self, records: u64, seed: u64) -> Expected {
        match self {
            Holds::Example => Expected::new(records, seed, OutputFormat::Tfrecord),
            Holds::Native => Expected::new(records, seed, OutputFormat::Avro),
            Holds::Narrowed => Expected::mapped(records, seed, OutputFormat::Avro, narrow),
        }
    }
}

/// `batch` with its float64 columns narrowed to float32.
fn narrow(batch: Batch) -> Batch {
    let rows = batch.rows();
    let columns = batch
        .into_columns()
        .into_iter()
        .map(|mut c| {
            if let Tensor::Dense(d) = &mut c.tensor
                && let Values::Float64(v) = &d.values
            {
                d.values = Values::Float32(v.iter().map(|&x| x as f32).collect());
            }
            c
        })
        .collect();
    Batch::new(rows, columns)
}

/// Where a conversion reads from.
#[derive(Clone, Copy, Debug)]
enum From {
    /// A file the demo wrote, with its prod19 spec.
    Demo(FileKind),
    /// The previous conversion's outputs, with their `spec.json`.
    Previous,
}

/// One conversion of the demo.
struct Conversion {
    /// What it shows.
    describe: &'static str,
    from: From,
    /// The target's registry id.
    target: &'static str,
    options: WriteOptions,
    /// The types its outputs hold.
    holds: Holds,
    /// When set, it is first tried without `Lossy::Allow`, described so,
    /// and must be refused; then it runs with `Lossy::Allow`.
    refused_first: Option<&'static str>,
}

/// The conversions: a chain through every format, as source and as
/// target, each reading the previous one's outputs with their
/// `spec.json`; then the Avro file's own types (int32, bool, float64)
/// into OFRecord, which holds them all, and into TFRecord, which refuses
/// float64 unless told to narrow it.
fn conversions() -> Vec<Conversion> {
    let plain = || WriteOptions::new();
    vec![
        Conversion {
            describe: "TFRecord → Avro, codec deflate",
            from: From::Demo(FileKind::Tfrecord { gzip: false }),
            target: "avro",
            options: plain().with_codec("deflate"),
            holds: Holds::Example,
            refused_first: None,
        },
        Conversion {
            describe: "Avro → FFRecord",
            from: From::Previous,
            target: "ffrecord",
            options: plain(),
            holds: Holds::Example,
            refused_first: None,
        },
        Conversion {
            describe: "FFRecord → OFRecord",
            from: From::Previous,
            target: "ofrecord",
            options: plain(),
            holds: Holds::Example,
            refused_first: None,
        },
        Conversion {
            describe: "OFRecord → TFRecord, GZIP",
            from: From::Previous,
            target: "tfrecord",
            options: plain().with_compression("GZIP"),
            holds: Holds::Example,
            refused_first: None,
        },
        Conversion {
            describe: "Avro (int32, bool, float64) → OFRecord",
            from: From::Demo(FileKind::Avro(Codec::Null)),
            target: "ofrecord",
            options: plain(),
            holds: Holds::Native,
            refused_first: None,
        },
        Conversion {
            describe: "Avro → TFRecord, Lossy::Allow",
            from: From::Demo(FileKind::Avro(Codec::Null)),
            target: "tfrecord",
            options: plain(),
            holds: Holds::Narrowed,
            refused_first: Some("Avro (int32, bool, float64) → TFRecord"),
        },
    ]
}

/// The threads that decode and encode a conversion's batches: the demo's parse threads.
fn encoding_threads(threads: Threads) -> usize {
    match threads {
        Threads::Fixed(n) => n.max(1),
        _ => std::thread::available_parallelism().map_or(2, |n| n.get()),
    }
}

/// The spec file written beside a conversion's outputs.
fn read_spec(storage: &Storage, address: &Address) -> anyhow::Result<SpecFile> {
    let bytes = storage
        .read_all(address)
        .with_context(|| format!("reading {address}"))?;
    let text = std::str::from_utf8(&bytes).with_context(|| format!("{address}: not UTF-8"))?;
    SpecFile::from_json(text).with_context(|| format!("{address}"))
}

/// Reads the outputs in `dir` in order with `spec` and compares every
/// value with `expected`; returns the records read.
pub(super) fn check_outputs(
    storage: &Storage,
    dir: &Address,
    spec: SpecFile,
    mut expected: Expected,
    threads: Threads,
) -> anyhow::Result<u64> {
    let mut loader = grist::loader()
        .with_storage(storage.clone())
        .with_path(dir.as_str())
        .with_spec_file(spec)
        .with_batch_size(BATCH)
        .with_threads(threads)
        .build()
        .with_context(|| format!("reading {dir}"))?;
    let mut batches = 0u64;
    while let Some(batch) = loader.next_batch() {
        let batch = batch?;
        expected
            .check(&batch)
            .with_context(|| format!("{dir}: batch {batches}"))?;
        batches += 1;
        loader.recycle(batch);
    }
    expected.finish().with_context(|| format!("{dir}"))
}

/// Runs the conversions into folders `convert-N-FORMAT` of `dir`, reading
/// the demo's files `all`, and prints one line each.
pub(super) fn run(
    out: &mut Out,
    dir: &Address,
    all: &[Data],
    records: u64,
    seed: u64,
    threads: Threads,
) -> anyhow::Result<()> {
    let storage = crate::sources::storage()?;
    let registry = grist::registry();
    let encoding = encoding_threads(threads);
    // Two output files each, to show how outputs are cut.
    let per_file = records.div_ceil(2).max(1);
    out.line(format_args!(
        "\nconverted with grist::convert ({encoding} threads decoding and encoding, {} records per file), \
         each output read back with the spec.json written beside it, every value compared \
         with the generated data",
        fmt::count(per_file)
    ))?;
    let conversions = conversions();
    let width = conversions
        .iter()
        .flat_map(|c| [Some(c.describe), c.refused_first])
        .flatten()
        .map(|d| d.chars().count())
        .max()
        .unwrap_or(0);
    let mut previous: Option<(Address, SpecFile)> = None;
    for (i, c) in conversions.iter().enumerate() {
        let (source, spec) = match c.from {
            From::Demo(kind) => {
                let d = all
                    .iter()
                    .find(|d| d.kind == kind)
                    .context("the demo did not write the conversion's source")?;
                (d.path.clone(), crate::prod19::spec_file(d.types))
            }
            From::Previous => previous
                .clone()
                .context("the first conversion has no previous one")?,
        };
        let folder = dir.join(&format!("convert-{}-{}", i + 1, c.target));
        let target = |lossy: Lossy| -> anyhow::Result<ConvertTarget> {
            Ok(ConvertTarget::new(registry.get(c.target)?, folder.as_str())
                .with_options(c.options.clone().with_lossy(lossy))
                .with_storage(storage.clone())
                .with_records_per_file(per_file)
                .with_threads(encoding)
                .with_batch_size(BATCH))
        };
        let describe = c.describe;
        if let Some(first) = c.refused_first {
            match grist::convert([source.as_str()], Some(&spec), &target(Lossy::Refuse)?) {
                Err(ConvertError::Target { source, .. }) => {
                    out.line(format_args!("  {first:<width$}  refused: {source}"))?
                }
                Err(e) => return Err(e).context(format!("{first}: {source}")),
                Ok(_) => anyhow::bail!("{first}: written without Lossy::Allow"),
            }
        }
        let lossy = match c.refused_first {
            Some(_) => Lossy::Allow,
            None => Lossy::Refuse,
        };
        let start = Instant::now();
        let report = grist::convert([source.as_str()], Some(&spec), &target(lossy)?)
            .with_context(|| format!("{describe}: {source}"))?;
        let elapsed = start.elapsed();
        let spec = read_spec(&storage, &report.spec_address)?;
        let read = check_outputs(
            &storage,
            &folder,
            spec.clone(),
            c.holds.expected(records, seed),
            threads,
        )
        .with_context(|| format!("{describe}: the outputs differ from the generated data"))?;
        anyhow::ensure!(
            read == report.records && read == records,
            "{describe}: {} records written, {read} read back, {records} generated",
            report.records
        );
        out.line(format_args!(
            "  {describe:<width$}  {:>8} records/s  {} files, {:>9}  values match",
            fmt::count(rate(report.records, elapsed)),
            report.files.len(),
            fmt::bytes(report.bytes),
        ))?;
        out.flush()?;
        previous = Some((folder, spec));
    }
    Ok(())
}

/// Records per second.
fn rate(records: u64, elapsed: Duration) -> u64 {
    (records as f64 / elapsed.as_secs_f64().max(1e-9)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use grist_tensor::DenseTensor;
    use grist_tensor::synth::prod19;

    /// The check of a conversion's outputs passes on what was converted
    /// and fails, naming the feature, when one value differs.
    #[test]
    fn a_changed_value_fails_the_check() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Address::from(tmp.path());
        let storage = Storage::new();
        let kind = FileKind::Tfrecord { gzip: false };
        let written = crate::prod19::write(&dir, 300, 9, &[kind], &|_| {}).unwrap();
        let folder = dir.join("out");
        let target =
            ConvertTarget::new(grist::registry().get("tfrecord").unwrap(), folder.as_str())
                .with_threads(1);
        let report = grist::convert(
            [written.files[0].path.as_str()],
            Some(&crate::prod19::spec_file(OutputFormat::Tfrecord)),
            &target,
        )
        .unwrap();
        let spec = read_spec(&storage, &report.spec_address).unwrap();
        let check = |seed| {
            check_outputs(
                &storage,
                &folder,
                spec.clone(),
                Holds::Example.expected(300, seed),
                Threads::Fixed(1),
            )
        };
        assert_eq!(check(9).unwrap(), 300);

        // The same records with one value of `s_float` changed, written
        // over the output.
        let mut columns = prod19(300, 9).into_columns();
        let column = columns.iter_mut().find(|c| c.name == "s_float").unwrap();
        let Tensor::Dense(DenseTensor {
            values: Values::Float32(v),
            ..
        }) = &mut column.tensor
        else {
            panic!("s_float is a float32 column")
        };
        v[123] += 1.0;
        let batch = Batch::new(300, columns);
        let (path, _) = &report.files[0];
        let mut w =
            grist_tfrecord::RecordWriter::create(path.as_str(), Default::default()).unwrap();
        for record in grist_tfrecord::encode_batch(&batch, &spec).unwrap() {
            w.write_record(&record).unwrap();
        }
        w.finish().unwrap();
        let err = format!("{:#}", check(9).unwrap_err());
        assert!(
            err.contains("\"s_float\"") && err.contains("differs"),
            "{err}"
        );
    }

    #[test]
    fn narrowing_keeps_other_columns() {
        let native = crate::prod19::chunks(10, 1, OutputFormat::Avro)
            .next()
            .unwrap();
        let narrowed = narrow(native.clone());
        for (a, b) in native.columns().iter().zip(narrowed.columns()) {
            match (&a.tensor, &b.tensor) {
                (
                    Tensor::Dense(DenseTensor {
                        values: Values::Float64(x),
                        ..
                    }),
                    Tensor::Dense(DenseTensor {
                        values: Values::Float32(y),
                        ..
                    }),
                ) => assert!(x.iter().zip(y).all(|(&x, &y)| x as f32 == y)),
                _ => assert_eq!(a, b),
            }
        }
    }
}
