//! `grist cat`: records as JSON lines, in three forms, for TFRecord and
//! Avro files alike.
//!
//! * `--spec SPEC.json`: parsed batches, one line per batch, in the corpus
//!   manifest's `batches[]` form.
//! * `--raw`: each record's index, length and SHA-256 (TFRecord: the
//!   payload; Avro: the datum's bytes).
//! * `--records`: each record decoded generically, in the manifest's
//!   `decoded_records` form (TFRecord) or `avro.records` form (Avro).
//!
//! On a bad record every good line before it is printed, then the command
//! fails naming the file and record or block (and the feature, for parse
//! errors).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::ArgGroup;
use grist_tensor::json::batch_to_json;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::format::{Format, FormatArg};
use crate::out::Out;
use crate::records::RecordFile;
use crate::spec::load_spec;

/// Arguments of `grist cat`.
#[derive(Debug, clap::Args)]
#[command(
    group(ArgGroup::new("mode").required(true).args(["spec", "raw", "records"])),
    after_help = "Examples:\n  \
        grist cat --spec spec.json --batch-size 32 train.tfrecord\n  \
        grist cat --raw train.tfrecord.gz\n  \
        grist cat --records --sequence sequences.tfrecord\n  \
        grist cat --spec spec.json --batch-size 32 part-0.avro part-1.avro"
)]
pub(crate) struct Args {
    /// Parse the records with the features of this spec file and print one
    /// JSON line per batch ({"records": n, "outputs": {...}}, or the
    /// context/feature_lists form for SequenceExamples). The spec file is a
    /// corpus manifest `parses[]` entry, an object with "features" (or
    /// "context_features"/"sequence_features"), or a bare features array.
    #[arg(long, value_name = "SPEC.json")]
    spec: Option<PathBuf>,

    /// Print each record's bytes as {"index", "length", "sha256"} (plus
    /// "file" when several files are given; the index counts per file).
    /// TFRecord: the payload of each frame; Avro: each datum (a block's
    /// datums are printed once the whole block has been checked).
    #[arg(long)]
    raw: bool,

    /// Print each record decoded generically. TFRecord: as a tf.Example,
    /// {"features": {name: {"int64_list"|"float_list"|"bytes_list": [...]}}};
    /// Avro: by its writer schema, as fastavro reads it (enums as symbols,
    /// bytes and fixed as strings or {"base64": ...}, unions as the
    /// branch's value). Plus "file" and "index" when several files are
    /// given.
    #[arg(long)]
    records: bool,

    /// With --records: decode tf.SequenceExamples
    /// ({"context": {...}, "feature_lists": {...}}).
    #[arg(long, requires = "records")]
    sequence: bool,

    /// With --spec: records per batch. By default, the spec file's
    /// "batch_size", else 1.
    #[arg(long, requires = "spec", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: Option<u64>,

    /// With --spec: drop a final partial batch (also when the spec file
    /// says "drop_remainder": true).
    #[arg(long, requires = "spec")]
    drop_remainder: bool,

    /// With --spec: decode each batch's rows on N threads.
    #[arg(long, requires = "spec", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..1025))]
    threads: u64,

    #[command(flatten)]
    format: FormatArg,

    /// TFRecord files (compression from the extension: .gz GZIP, .zz/.zlib
    /// ZLIB) or Avro object container files (.avro), read in order.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Runs `grist cat`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut out = Out::stdout();
    let result = match &args.spec {
        Some(spec) => cat_batches(&args, spec, &mut out),
        None => args.files.iter().try_for_each(|file| {
            let format = args.format.of(file);
            cat_records(&args, file, format, &mut out)
        }),
    };
    // The good lines go out before the error is reported.
    out.flush()?;
    result?;
    Ok(ExitCode::SUCCESS)
}

/// `--spec`: one JSON line per decoded batch, through grist's loader (in
/// file order, no shuffle).
fn cat_batches(args: &Args, spec_path: &Path, out: &mut Out) -> anyhow::Result<()> {
    let loaded = load_spec(spec_path)?;
    let format = match args.format.of_all(&args.files)? {
        Format::Tfrecord => grist_loader::Format::Tfrecord,
        Format::Avro => grist_loader::Format::Avro,
    };
    let batch_size = args
        .batch_size
        .map(|b| b as usize)
        .or(loaded.spec.batch_size)
        .unwrap_or(1);
    let drop_remainder = args.drop_remainder || loaded.spec.drop_remainder == Some(true);
    let mut loader = grist_loader::Loader::builder()
        .with_paths(args.files.iter().cloned())
        .with_format(format)
        .with_spec_file(loaded.spec)
        .with_batch_size(batch_size)
        .with_drop_remainder(drop_remainder)
        .with_threads(grist_loader::Threads::Fixed(args.threads as usize))
        .build()
        .with_context(|| format!("spec file {}", spec_path.display()))?;
    while let Some(batch) = loader.next_batch() {
        out.json(&batch_to_json(&batch?))?;
    }
    Ok(())
}

/// `--raw` or `--records`: one JSON line per record of `file`.
fn cat_records(args: &Args, file: &Path, format: Format, out: &mut Out) -> anyhow::Result<()> {
    let mut records = RecordFile::open(file, format, true)?;
    let decoder = match args.records {
        true => Some(records.json_decoder(args.sequence)?),
        false => None,
    };
    let several = args.files.len() > 1;
    let name: Arc<str> = file.display().to_string().into();
    let mut index = 0u64;
    while let Some(record) = records.next_record()? {
        let line = match &decoder {
            None => {
                let sha = hex::encode(Sha256::digest(record.bytes));
                let mut line = json!({"index": index, "length": record.bytes.len(), "sha256": sha});
                if several {
                    line["file"] = json!(&*name);
                }
                line
            }
            Some(decoder) => {
                let mut line = decoder.decode(&record, &name, index)?;
                if let (true, Value::Object(map)) = (several, &mut line) {
                    map.insert("file".into(), json!(&*name));
                    map.insert("index".into(), json!(index));
                }
                line
            }
        };
        out.json(&line)?;
        index += 1;
    }
    Ok(())
}
