//! `grist convert`: any format into any other through `grist::convert`,
//! with progress, resume, shards (`--shard I/N` or `RANK`/`WORLD_SIZE`),
//! the merge of the shards' manifests, and `--verify` (the outputs read
//! back and compared, value for value, with the inputs).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use grist::tensor::json::{batch_to_json, compare_json};
use grist::tensor::{Batch, DType, FeatureSpec, Format, Lossy, SpecFile, WriteOptions};
use grist::{ConvertReport, ConvertTarget};
use serde_json::Value;

use crate::fmt;
use crate::progress::Progress;
use crate::rows::slice_rows;
use crate::sources::{FormatArg, PayloadArg};
use crate::spec::{load_reader_schema, load_spec};

/// Arguments of `grist convert`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    grist convert --to tfrecord --compression GZIP --spec spec.json data/*.avro -o out/\n  \
    grist convert --to avro --codec deflate --spec out/spec.json out/ -o back/ --verify\n  \
    grist convert --to ffrecord --shard 0/4 --spec spec.json data/ -o out/   # one of 4 machines\n  \
    grist convert --merge out/   # once the 4 shards are done\n\n\
    Outputs: OUT/part-00000.<ext>, ... (shard I: part-<I>-00000.<ext>, ...), each written \
    atomically, OUT/spec.json (the spec in the output format's form: `--spec OUT/spec.json` \
    and the loader read the outputs back), OUT/convert.json (what the conversion is) and, \
    written last, OUT/manifest.json (shard I of N: OUT/manifest-I-of-N.json): each part's \
    records, size and CRC-32C. Run again with the same arguments, convert resumes after the \
    parts already complete (a killed run loses only the part it was writing), or does \
    nothing when the manifest says it is done; into a folder of another conversion it \
    refuses, unless --force. Status and the progress bar go to stderr.\n\n\
    Test hook: GRIST_CONVERT_PAUSE_BEFORE_MANIFEST=MS sleeps MS milliseconds with the \
    manifest written to its temporary file, before committing it.")]
pub(crate) struct Args {
    /// The output format: tfrecord, avro, ffrecord or ofrecord.
    #[arg(long, value_name = "FORMAT", required_unless_present = "merge")]
    to: Option<String>,

    /// TFRecord output: GZIP, ZLIB (or ZSTD, when built in). By default,
    /// none.
    #[arg(long, value_name = "C", conflicts_with = "codec")]
    compression: Option<String>,

    /// Avro output: the codec (null, deflate, snappy, zstandard, bzip2,
    /// xz). By default, null.
    #[arg(long, value_name = "C")]
    codec: Option<String>,

    /// FFRecord output: what the samples hold, example (tf.Example, the
    /// default) or ofrecord.
    #[arg(long, value_name = "KIND")]
    payload: Option<String>,

    /// The inputs' FFRecord payload when it is not tf.Example (ofrecord).
    #[arg(long, value_name = "KIND")]
    from_payload: Option<String>,

    #[command(flatten)]
    format: FormatArg,

    /// The features to convert (a spec file as `cat --spec` takes it).
    /// By default, the spec `grist spec` infers (Avro: from the writer
    /// schema; the others: by sampling the first 1000 records), printed on
    /// stderr.
    #[arg(long, value_name = "SPEC.json")]
    spec: Option<PathBuf>,

    /// Avro: read every file through this reader schema (an .avsc file of
    /// the schema's JSON), by the Avro specification's schema resolution:
    /// fields matched by name and by the reader's aliases, reader fields the
    /// writer lacks filled with their defaults, int → long → float → double
    /// and string ↔ bytes promoted, enum symbols by name (else the reader's
    /// default), union branches matched. A writer schema the rules forbid is
    /// an error naming the file and the field. Replaces the spec file's
    /// "reader_schema". Other formats refuse it.
    /// The spec names the reader's fields; without --spec it is inferred
    /// from the reader schema. The outputs are written in their own
    /// schema.
    #[arg(long, value_name = "FILE.avsc")]
    reader_schema: Option<PathBuf>,

    /// Allow lossy conversions (float64 written as float32 where the
    /// output holds no float64); refused otherwise, naming the feature.
    #[arg(long)]
    lossy: bool,

    /// A new output file after N records. By default, 1,000,000.
    #[arg(long, value_name = "N", conflicts_with = "files")]
    records_per_file: Option<u64>,

    /// N output files of equal record counts (the inputs are counted
    /// first).
    #[arg(long, value_name = "N")]
    files: Option<usize>,

    /// Threads that decode and encode batches (reading and writing take one more each). By default, 2.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,

    /// Convert only shard I of N (0 <= I < N): whole files when there are
    /// at least N, else chunks of records. By default, RANK of WORLD_SIZE
    /// from the environment when both are set, else everything.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<(usize, usize)>,

    /// Read the outputs back and compare every value with the inputs' (a
    /// shard: its own outputs with its share of the inputs).
    #[arg(long)]
    verify: bool,

    /// Replace the outputs of another conversion found in OUT.
    #[arg(long)]
    force: bool,

    /// Merge the manifests of the shards in OUT into OUT/manifest.json
    /// (every shard must have finished).
    #[arg(long, value_name = "OUT", conflicts_with_all = ["to", "out", "inputs"])]
    merge: Option<String>,

    /// The output folder (or object store URL).
    #[arg(short, long, value_name = "OUT", required_unless_present = "merge")]
    out: Option<String>,

    /// Input files, folders or glob patterns (or URLs).
    #[arg(value_name = "INPUT", required_unless_present = "merge")]
    inputs: Vec<PathBuf>,
}

/// `I/N`.
fn parse_shard(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("{text:?}: expected I/N, such as 0/4 (0 <= I < N)");
    let (i, n) = text.split_once('/').ok_or_else(bad)?;
    let (i, n) = (
        i.trim().parse::<usize>().map_err(|_| bad())?,
        n.trim().parse::<usize>().map_err(|_| bad())?,
    );
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

/// The shard from `RANK` and `WORLD_SIZE`, when both are set.
fn shard_from_env() -> anyhow::Result<Option<(usize, usize)>> {
    let (Ok(rank), Ok(world)) = (std::env::var("RANK"), std::env::var("WORLD_SIZE")) else {
        return Ok(None);
    };
    let shard = parse_shard(&format!("{rank}/{world}"))
        .map_err(|e| anyhow::anyhow!("RANK and WORLD_SIZE: {e}"))?;
    Ok(Some(shard))
}

/// Runs `grist convert`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(out) = &args.merge {
        let storage = crate::sources::storage()?;
        let manifest = grist::merge_shards(&storage, out)?;
        eprintln!(
            "merged {} shards: {} records in {} files ({}) → {}/{}",
            manifest
                .parts
                .iter()
                .filter_map(|p| p.shard)
                .max()
                .map_or(0, |s| s + 1),
            fmt::count(manifest.records),
            fmt::count(manifest.parts.len() as u64),
            fmt::bytes(manifest.bytes),
            out.trim_end_matches('/'),
            grist::MANIFEST_FILE,
        );
        return Ok(ExitCode::SUCCESS);
    }
    let (Some(to), Some(out)) = (&args.to, &args.out) else {
        bail!("--to and -o are required (or --merge OUT)");
    };
    let registry = grist::registry();
    let mut target_format = registry.get(to).with_context(|| format!("--to {to}"))?;
    let mut options = WriteOptions::new();
    if let Some(c) = &args.compression {
        if target_format.id() != "tfrecord" {
            bail!("--compression is for --to tfrecord (Avro compresses with --codec)");
        }
        options = options.with_compression(c.clone());
    }
    if let Some(c) = &args.codec {
        if target_format.id() != "avro" {
            bail!("--codec is for --to avro (TFRecord compresses with --compression)");
        }
        options = options.with_codec(c.clone());
    }
    if let Some(p) = &args.payload {
        if target_format.id() != "ffrecord" {
            bail!("--payload is for --to ffrecord");
        }
        options = options.with_payload(p.clone());
        // The outputs read back (--verify) with that payload.
        target_format = target_format
            .configure("payload", p)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("--payload {p}"))?;
    }
    if args.lossy {
        options = options.with_lossy(Lossy::Allow);
    }
    let storage = crate::sources::storage()?;
    let from_payload = PayloadArg::of(args.from_payload.clone());
    let reader_schema = match &args.reader_schema {
        Some(path) => Some(load_reader_schema(path)?),
        None => None,
    };
    let mut spec = match &args.spec {
        Some(path) => load_spec(path)?.spec,
        None => infer(&args, &from_payload, reader_schema.clone())?,
    };
    if reader_schema.is_some() {
        spec.reader_schema = reader_schema;
    }
    let source_format = args.format.for_loader(&from_payload, &args.inputs)?;
    let shard = match args.shard {
        Some(s) => Some(s),
        None => shard_from_env()?,
    };

    let mut target = ConvertTarget::new(target_format.clone(), out.clone())
        .with_options(options)
        .with_storage(storage.clone())
        .with_force(args.force);
    if let Some(n) = args.records_per_file {
        target = target.with_records_per_file(n);
    }
    if let Some(n) = args.files {
        target = target.with_files(n);
    }
    if let Some(n) = args.threads {
        target = target.with_threads(n);
    }
    if let Some((i, n)) = shard {
        target = target.with_shard(i, n);
    }
    if let Some(f) = &source_format {
        target = target.with_source_format(f.clone());
    }
    // With --files the conversion counts the inputs itself, and says
    // the total in its progress: they are not counted twice.
    let total = if Progress::drawn_here() && args.files.is_none() {
        count_records(&args, &from_payload, shard)
    } else {
        None
    };
    let bar = Arc::new(Progress::new(total, "records"));
    {
        let bar = Arc::clone(&bar);
        let shards = shard.map_or(1, |(_, n)| n as u64);
        target = target.with_progress(move |p| {
            if let Some(total) = p.total {
                bar.set_total(total.div_ceil(shards), "records");
            }
            bar.set(p.skipped + p.records);
            bar.message(&fmt::bytes(p.bytes));
        });
    }
    let started = Instant::now();
    let report = grist::convert(&args.inputs, Some(&spec), &target).map_err(|e| match e {
        e @ grist::ConvertError::DifferentConversion { .. } => {
            anyhow::Error::from(e).context("not converting (pass --force to replace them)")
        }
        e => e.into(),
    })?;
    bar.finish();
    summary(&report, out, started.elapsed());
    if args.verify {
        verify(
            &args,
            &spec,
            source_format,
            &target_format,
            shard,
            out,
            &report,
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The spec of the inputs, inferred as `grist spec` infers it (Avro:
/// from the writer schema; the others: by sampling their first records),
/// printed on stderr with its notes.
fn infer(
    args: &Args,
    payload: &PayloadArg,
    reader_schema: Option<serde_json::Value>,
) -> anyhow::Result<SpecFile> {
    let (format, inputs) = args.format.expand_with(payload, &args.inputs)?;
    let mut options = grist::tensor::InferOptions::default();
    if let Some(schema) = reader_schema {
        options = options.with_reader_schema(schema);
    }
    let inferred = format
        .infer_spec(&inputs, &options)
        .context("inferring the spec (or pass --spec)")?;
    for note in &inferred.notes {
        eprintln!("grist: note: {note}");
    }
    let spec = inferred.spec;
    if spec.features.is_empty()
        && spec.context_features.is_empty()
        && spec.sequence_features.is_empty()
    {
        bail!(
            "{}: no feature could be inferred (see the notes above; or pass --spec)",
            grist::tensor::inputs_named(&inputs)
        );
    }
    eprintln!(
        "grist: inferred spec ({} records looked at):\n{}",
        inferred.records,
        spec.to_json()
    );
    Ok(spec)
}

/// The records to convert, for the bar's end: the inputs' count (a share
/// of it for a shard); `None` when they cannot be counted.
fn count_records(args: &Args, payload: &PayloadArg, shard: Option<(usize, usize)>) -> Option<u64> {
    let (format, inputs) = args.format.expand_with(payload, &args.inputs).ok()?;
    let mut total = 0u64;
    for input in &inputs {
        total += format.count(input, &Default::default()).ok()?;
    }
    Some(match shard {
        Some((_, n)) => total.div_ceil(n as u64),
        None => total,
    })
}

/// `1 file`, `3 files`.
fn files(n: u64) -> String {
    match n {
        1 => "1 file".into(),
        n => format!("{} files", fmt::count(n)),
    }
}

/// One line on stderr: what was done.
fn summary(report: &ConvertReport, out: &str, elapsed: std::time::Duration) {
    let seconds = elapsed.as_secs_f64();
    let manifest = &report.manifest_address;
    if report.up_to_date {
        eprintln!(
            "nothing to do: {manifest} says the conversion is complete ({} records in {})",
            fmt::count(report.records),
            files(report.files.len() as u64),
        );
        return;
    }
    let written = report.records - report.skipped_records;
    let resumed = if report.skipped_parts > 0 {
        format!(
            " (resumed: {} records in {} were complete)",
            fmt::count(report.skipped_records),
            files(report.skipped_parts as u64)
        )
    } else {
        String::new()
    };
    eprintln!(
        "converted {} records into {} ({}) in {}, {}{resumed} → {out}; manifest {manifest}",
        fmt::count(written),
        files((report.files.len() - report.skipped_parts) as u64),
        fmt::bytes(report.bytes),
        fmt::seconds(elapsed),
        fmt::per_second(written as f64 / seconds.max(1e-9), "records"),
    );
}

/// Reads the outputs back (each part of the manifest with `spec.json`)
/// and compares them, record by record, with the inputs read with `spec`
/// (the same shard of them); fails naming the part, the record in it and
/// the feature of the first difference.
fn verify(
    args: &Args,
    spec: &SpecFile,
    source_format: Option<Arc<dyn Format>>,
    target_format: &Arc<dyn Format>,
    shard: Option<(usize, usize)>,
    out: &str,
    report: &ConvertReport,
) -> anyhow::Result<()> {
    const BATCH: usize = 1024;
    let storage = crate::sources::storage()?;
    let mut inputs = grist::loader()
        .with_storage(storage.clone())
        .with_paths(args.inputs.iter().cloned())
        .with_spec_file(spec.clone())
        .with_batch_size(BATCH)
        .with_drop_remainder(false)
        .with_threads(grist::Threads::Fixed(1));
    if let Some((i, n)) = shard.filter(|&(_, n)| n > 1) {
        inputs = inputs.with_shard(i, n);
    }
    if let Some(f) = source_format {
        inputs = inputs.with_format(f);
    }
    let mut inputs = inputs.build()?;
    let written = &report.spec;
    let narrowed = narrowed_features(spec, written);
    // The input batch in hand and the first of its rows not yet compared.
    let mut held: Option<(Batch, usize)> = None;
    let mut compared = 0u64;
    for (address, _) in &report.files {
        let part = address.as_str();
        let reader = grist::loader()
            .with_storage(storage.clone())
            .with_path(part)
            .with_format(target_format.clone())
            .with_spec_file(written.clone())
            .with_batch_size(BATCH)
            .with_drop_remainder(false)
            .with_threads(grist::Threads::Fixed(1))
            .build()
            .with_context(|| format!("verifying {part}"))?;
        let mut row_in_part = 0usize;
        for batch in reader {
            let batch = batch.with_context(|| format!("verifying {part}"))?;
            let mut done = 0;
            while done < batch.rows() {
                let (input, from) = match held.take() {
                    Some((b, from)) if from < b.rows() => (b, from),
                    _ => match inputs.next_batch() {
                        Some(b) => (b.context("verifying: reading the inputs")?, 0),
                        None => bail!(
                            "verify: {part}: record {}: the outputs hold more records than \
                             the inputs",
                            row_in_part + done
                        ),
                    },
                };
                let n = (batch.rows() - done).min(input.rows() - from);
                let got = slice_rows(&batch, done..done + n)?;
                let want = slice_rows(&input, from..from + n)?;
                if let Some((row, feature, detail)) = first_difference(&want, &got, &narrowed)? {
                    bail!(
                        "verify: {part}: record {}: feature {feature}: {detail}",
                        row_in_part + done + row
                    );
                }
                done += n;
                held = Some((input, from + n));
            }
            row_in_part += batch.rows();
            compared += batch.rows() as u64;
        }
    }
    let left = held.map_or(0, |(b, from)| b.rows() - from) as u64;
    let mut more = left;
    for batch in inputs.by_ref() {
        more += batch.context("verifying: reading the inputs")?.rows() as u64;
    }
    if more > 0 {
        bail!(
            "verify: {out}: the inputs hold {} records the outputs do not",
            fmt::count(more)
        );
    }
    eprintln!(
        "verified: {} records in {} read back as the inputs read",
        fmt::count(compared),
        files(report.files.len() as u64)
    );
    Ok(())
}

/// The features written narrower than they were read (float64 as
/// float32, under --lossy): their input values are compared narrowed.
fn narrowed_features(spec: &SpecFile, written: &SpecFile) -> Vec<String> {
    let all = |s: &SpecFile| -> Vec<FeatureSpec> {
        let mut v = s.features.clone();
        v.extend(s.context_features.iter().cloned());
        v.extend(s.sequence_features.iter().cloned());
        v
    };
    let written = all(written);
    all(spec)
        .into_iter()
        .filter(|f| f.dtype() == DType::Float64)
        .filter(|f| {
            written
                .iter()
                .any(|w| w.name() == f.name() && w.dtype() == DType::Float32)
        })
        .map(|f| f.name().to_string())
        .collect()
}

/// The first row (of equally long `want` and `got`) that differs, the
/// feature, and how; `None` when they are the same.
fn first_difference(
    want: &Batch,
    got: &Batch,
    narrowed: &[String],
) -> anyhow::Result<Option<(usize, String, String)>> {
    let want_json = narrow(batch_to_json(want), narrowed);
    if compare_json(&want_json, &batch_to_json(got)).is_ok() {
        return Ok(None);
    }
    // Row by row, to say which.
    for row in 0..want.rows() {
        let w = narrow(batch_to_json(&slice_rows(want, row..row + 1)?), narrowed);
        let g = batch_to_json(&slice_rows(got, row..row + 1)?);
        if let Err(m) = compare_json(&w, &g) {
            let detail = m.to_string();
            let feature = feature_of(&w, &g).unwrap_or_else(|| "?".into());
            return Ok(Some((row, feature, detail)));
        }
    }
    // Equal row by row but not as a whole: the columns differ.
    let feature = feature_of(&want_json, &batch_to_json(got)).unwrap_or_else(|| "?".into());
    Ok(Some((0, feature, "the columns differ".into())))
}

/// The first feature whose values differ between two batches' JSON.
fn feature_of(want: &Value, got: &Value) -> Option<String> {
    for section in ["outputs", "context", "feature_lists"] {
        let (Some(Value::Object(w)), Some(g)) = (want.get(section), got.get(section)) else {
            continue;
        };
        for (name, value) in w {
            match g.get(name) {
                Some(other) if compare_json(value, other).is_ok() => {}
                _ => return Some(name.clone()),
            }
        }
    }
    None
}

/// `batch` (manifest JSON form) with the values of the `narrowed`
/// features rounded to float32, as they were written.
fn narrow(mut batch: Value, narrowed: &[String]) -> Value {
    fn round(v: &mut Value) {
        match v {
            Value::Number(n) => {
                let narrowed = n
                    .as_f64()
                    .filter(|_| n.is_f64())
                    .and_then(|f| serde_json::Number::from_f64(f64::from(f as f32)));
                if let Some(r) = narrowed {
                    *n = r;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(round),
            Value::Object(o) => o.values_mut().for_each(round),
            _ => {}
        }
    }
    for section in ["outputs", "context", "feature_lists"] {
        if let Some(Value::Object(o)) = batch.get_mut(section) {
            for name in narrowed {
                let Some(Value::Object(t)) = o.get_mut(name) else {
                    continue;
                };
                t.insert("dtype".into(), "float32".into());
                for key in ["values", "flat_values"] {
                    if let Some(v) = t.get_mut(key) {
                        round(v);
                    }
                }
            }
        }
    }
    batch
}
