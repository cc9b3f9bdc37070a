//! `grist cat`: records as JSON lines, in three forms.
//!
//! * `--spec SPEC.json`: parsed batches, one line per batch, in the corpus
//!   manifest's `batches[]` form.
//! * `--raw`: the framing: each record's index, length and SHA-256.
//! * `--records`: each record decoded generically (every feature), in the
//!   manifest's `decoded_records` form.
//!
//! On a bad record every good line before it is printed, then the command
//! fails naming the file and record (and the feature, for parse errors).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::ArgGroup;
use grist_tensor::json::batch_to_json;
use grist_tfrecord::{
    Location, ReaderOptions, RecordReader, example_to_json, sequence_example_to_json,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::out::Out;
use crate::pipeline::{BatchOptions, BatchReader, load_spec};

/// Arguments of `grist cat`.
#[derive(Debug, clap::Args)]
#[command(
    group(ArgGroup::new("mode").required(true).args(["spec", "raw", "records"])),
    after_help = "Examples:\n  \
        grist cat --spec spec.json --batch-size 32 train.tfrecord\n  \
        grist cat --raw train.tfrecord.gz\n  \
        grist cat --records --sequence sequences.tfrecord"
)]
pub(crate) struct Args {
    /// Parse the records with the features of this spec file and print one
    /// JSON line per batch ({"records": n, "outputs": {...}}, or the
    /// context/feature_lists form for SequenceExamples). The spec file is a
    /// corpus manifest `parses[]` entry, an object with "features" (or
    /// "context_features"/"sequence_features"), or a bare features array.
    #[arg(long, value_name = "SPEC.json")]
    spec: Option<PathBuf>,

    /// Print each record's framing: {"index", "length", "sha256"} (plus
    /// "file" when several files are given; the index counts per file).
    #[arg(long)]
    raw: bool,

    /// Print each record decoded generically as a tf.Example:
    /// {"features": {name: {"int64_list"|"float_list"|"bytes_list": [...]}}}
    /// (plus "file" and "index" when several files are given).
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

    /// TFRecord files, read in order (compression from the extension:
    /// .gz GZIP, .zz/.zlib ZLIB).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Runs `grist cat`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut out = Out::stdout();
    if let Some(spec) = &args.spec {
        cat_batches(&args, spec, &mut out)?;
    } else if args.raw {
        let several = args.files.len() > 1;
        for file in &args.files {
            cat_raw(file, several, &mut out)?;
        }
    } else {
        let several = args.files.len() > 1;
        for file in &args.files {
            cat_records(file, args.sequence, several, &mut out)?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `--spec`: one JSON line per decoded batch.
fn cat_batches(args: &Args, spec_path: &Path, out: &mut Out) -> anyhow::Result<()> {
    let loaded = load_spec(spec_path)?;
    let options = BatchOptions {
        batch_size: args
            .batch_size
            .map(|b| b as usize)
            .or(loaded.spec.batch_size)
            .unwrap_or(1),
        drop_remainder: args.drop_remainder || loaded.spec.drop_remainder == Some(true),
        threads: args.threads as usize,
        check_crc: true,
    };
    let mut reader = BatchReader::new(args.files.clone(), loaded.decoder, options)?;
    loop {
        match reader.next_batch() {
            Ok(Some(batch)) => out.json(&batch_to_json(&batch))?,
            Ok(None) => return Ok(()),
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        }
    }
}

/// `--raw`: one JSON line per record: index, length, SHA-256.
fn cat_raw(file: &Path, several: bool, out: &mut Out) -> anyhow::Result<()> {
    let mut reader = RecordReader::open(file, ReaderOptions::default())?;
    let name = file.display().to_string();
    let mut index = 0u64;
    loop {
        match reader.next_record() {
            Ok(Some(payload)) => {
                let sha = hex::encode(Sha256::digest(payload));
                let mut line = json!({"index": index, "length": payload.len(), "sha256": sha});
                if several {
                    line["file"] = json!(name);
                }
                out.json(&line)?;
                index += 1;
            }
            Ok(None) => return Ok(()),
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        }
    }
}

/// `--records`: one JSON line per record, decoded generically.
fn cat_records(file: &Path, sequence: bool, several: bool, out: &mut Out) -> anyhow::Result<()> {
    let mut reader = RecordReader::open(file, ReaderOptions::default())?;
    let name: Arc<str> = file.display().to_string().into();
    let mut index = 0u64;
    loop {
        let payload = match reader.next_record() {
            Ok(Some(payload)) => payload,
            Ok(None) => return Ok(()),
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        };
        let at = Location::new(name.clone(), index);
        let decoded = if sequence {
            sequence_example_to_json(payload, &at)
        } else {
            example_to_json(payload, &at)
        };
        let mut line = match decoded {
            Ok(value) => value,
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        };
        if several {
            if let Value::Object(map) = &mut line {
                map.insert("file".into(), json!(&*name));
                map.insert("index".into(), json!(index));
            }
        }
        out.json(&line)?;
        index += 1;
    }
}
