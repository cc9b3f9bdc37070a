//! `grist cat`: records as JSON lines, in three forms, for every format.
//!
//! * `--spec SPEC.json`: parsed batches, one line per batch, in the corpus
//!   manifest's `batches[]` form (through grist's loader, in order).
//! * `--raw`: each record's index, length and SHA-256 (TFRecord: the
//!   payload; Avro: the datum's bytes; FFRecord: the sample; OFRecord: the
//!   serialized record).
//! * `--records`: each record decoded generically, in the manifest's
//!   `decoded_records` form (TFRecord, FFRecord of tf.Examples),
//!   `avro.records` form (Avro) or `features` form (OFRecord, FFRecord of
//!   OFRecords).
//!
//! Every format is read through grist's registry (as the loader reads
//! it). Formats whose datasets number records across their files
//! (FFRecord, OFRecord: [`Format::local_index_key`]) are read as one
//! dataset; the others file by file, each file's records numbered from 0.
//! On a bad record every good line before it is printed, then the command
//! fails naming the file and record, sample or block (and the feature, for
//! parse errors).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::ArgGroup;
use grist_tensor::json::batch_to_json;
use grist_tensor::{Format, Input, RecordOptions, RegistryError};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::out::Out;
use crate::rows::slice_rows;
use crate::sources::{FormatArg, PayloadArg, hint, shown, with_stdin};
use crate::spec::{build_loader, load_reader_schema, load_spec};

/// Arguments of `grist cat`.
#[derive(Debug, clap::Args)]
#[command(
    group(ArgGroup::new("mode").required(true).args(["spec", "raw", "records"])),
    after_help = "Examples:\n  \
        grist cat --spec spec.json --batch-size 32 train.tfrecord\n  \
        grist cat --raw train.tfrecord.gz\n  \
        grist cat --records --limit 5 train.tfrecord\n  \
        gunzip -c train.tfrecord.gz | grist cat --raw -   # - is standard input\n  \
        grist cat --records --sequence sequences.tfrecord\n  \
        grist cat --spec spec.json --batch-size 32 part-0.avro part-1.avro\n  \
        grist cat --raw train.ffr\n  \
        grist cat --spec spec.json --payload ofrecord shards/   # a folder of *.ffr files\n  \
        grist cat --records ofrecord/train/   # a folder of part-00000, part-00001, ..."
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
    /// datums are printed once the whole block has been checked). FFRecord
    /// samples and OFRecord records are numbered across the dataset's
    /// files; with several files each line also has "file" and the number
    /// within it ("local_index" for FFRecord, "index_in_part" for
    /// OFRecord).
    #[arg(long)]
    raw: bool,

    /// Print each record decoded generically. TFRecord: as a tf.Example,
    /// {"features": {name: {"int64_list"|"float_list"|"bytes_list": [...]}}};
    /// Avro: by its writer schema, as fastavro reads it (enums as symbols,
    /// bytes and fixed as strings or {"base64": ...}, unions as the
    /// branch's value); OFRecord (and FFRecord with --payload ofrecord):
    /// {"features": {name: {"kind", "values"}}} ("bits" for floats, base64
    /// bytes), as the OFRecord corpus manifests write them. Plus "file" and
    /// "index" when several files are given (and "local_index" or
    /// "index_in_part" for FFRecord and OFRecord).
    #[arg(long)]
    records: bool,

    /// With --spec or --records: Avro: read (or decode) every file through this reader schema (an .avsc file of
    /// the schema's JSON), by the Avro specification's schema resolution:
    /// fields matched by name and by the reader's aliases, reader fields the
    /// writer lacks filled with their defaults, int → long → float → double
    /// and string ↔ bytes promoted, enum symbols by name (else the reader's
    /// default), union branches matched. A writer schema the rules forbid is
    /// an error naming the file and the field. Replaces the spec file's
    /// "reader_schema". Other formats refuse it.
    #[arg(long, value_name = "FILE.avsc", conflicts_with = "raw")]
    reader_schema: Option<PathBuf>,

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

    /// Stop after N records: with --raw and --records, N lines; with
    /// --spec, batches until N records have been printed, the last one cut
    /// to the records left (a cut batch keeps the whole batch's padding and
    /// sparse dense_shape past the first dimension). Nothing after them is
    /// read.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,

    #[command(flatten)]
    format: FormatArg,

    #[command(flatten)]
    payload: PayloadArg,

    /// Files, folders (datasets) or glob patterns, read in order:
    /// TFRecord, Avro, FFRecord or OFRecord, told by name, then by content
    /// (see `grist --help`); with --spec or a dataset format, all of one
    /// format. `-` is standard input (read to its end first, then as a
    /// file of any format, told by its content or --format).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Runs `grist cat`.
pub(crate) fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    let (files, _stdin) = with_stdin(&args.files)?;
    args.files = files;
    let mut out = Out::stdout();
    let result = match &args.spec {
        Some(spec) => cat_batches(&args, spec, &mut out),
        None => cat_all_records(&args, &mut out),
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
    let batch_size = args
        .batch_size
        .map(|b| b as usize)
        .or(loaded.spec.batch_size)
        .unwrap_or(1);
    let drop_remainder = args.drop_remainder || loaded.spec.drop_remainder == Some(true);
    let mut builder = grist::loader()
        .with_storage(crate::sources::storage()?)
        .with_paths(args.files.iter().cloned())
        .with_spec_file(loaded.spec)
        .with_batch_size(batch_size)
        .with_drop_remainder(drop_remainder)
        .with_threads(grist::Threads::Fixed(args.threads as usize));
    if let Some(format) = args.format.for_loader(&args.payload, &args.files)? {
        builder = builder.with_format(format);
    }
    if let Some(path) = &args.reader_schema {
        builder = builder.with_reader_schema(load_reader_schema(path)?);
    }
    let mut loader = build_loader(builder, spec_path)?;
    let mut left = args.limit.unwrap_or(u64::MAX);
    while left > 0 {
        let Some(batch) = loader.next_batch() else {
            break;
        };
        let batch = batch?;
        let rows = batch.rows() as u64;
        if rows > left {
            // `left` is below the batch's row count: it fits a usize.
            let cut = slice_rows(&batch, 0..left as usize)?;
            out.json(&batch_to_json(&cut))?;
            break;
        }
        out.json(&batch_to_json(&batch))?;
        left -= rows;
    }
    Ok(())
}

/// `--raw` or `--records`: the files of formats whose datasets number
/// records across files as one dataset (of one format), the others file
/// by file (each of its own format).
fn cat_all_records(args: &Args, out: &mut Out) -> anyhow::Result<()> {
    let mut options = RecordOptions::default();
    options.sequence = args.sequence;
    if let Some(path) = &args.reader_schema {
        options = options.with_reader_schema(load_reader_schema(path)?);
    }
    let inputs = args.format.expand_each_with(&args.payload, &args.files)?;
    let several = inputs.len() > 1;
    let Some((first, first_input)) = inputs.first() else {
        return Ok(());
    };
    let mut left = args.limit.unwrap_or(u64::MAX);
    if inputs.iter().any(|(f, _)| f.local_index_key().is_some()) {
        if let Some((other, input)) = inputs.iter().find(|(f, _)| f.id() != first.id()) {
            return Err(hint(RegistryError::Mixed {
                first: first_input.name().clone(),
                first_format: first.name(),
                other: input.name().clone(),
                other_format: other.name(),
            }));
        }
        let files: Vec<Input> = inputs.iter().map(|(_, i)| i.clone()).collect();
        return cat_records(args, &options, first, &files, several, &mut left, out);
    }
    for (format, input) in &inputs {
        if left == 0 {
            break;
        }
        let one = std::slice::from_ref(input);
        cat_records(args, &options, format, one, several, &mut left, out)?;
    }
    Ok(())
}

/// One JSON line per record of `inputs` (`several`: of several files),
/// at most `left` of them (`left` counts down).
fn cat_records(
    args: &Args,
    options: &RecordOptions,
    format: &Arc<dyn Format>,
    inputs: &[Input],
    several: bool,
    left: &mut u64,
    out: &mut Out,
) -> anyhow::Result<()> {
    if *left == 0 {
        return Ok(());
    }
    let mut records = format.records(inputs, options)?;
    // The key of the number within the file, for records numbered across
    // a dataset.
    let local_key = format.local_index_key();
    while let Some(record) = records.next_record()? {
        let at = &record.at;
        let local = at.record.unwrap_or_default();
        let index = at.index.unwrap_or(local);
        let mut extra = serde_json::Map::new();
        if several {
            extra.insert("file".into(), json!(shown(&at.file)));
            extra.insert("index".into(), json!(index));
            if let Some(key) = local_key {
                extra.insert(key.into(), json!(local));
            }
        }
        if args.records {
            // The record's own text keeps its key order (Avro: schema
            // order); the places go after its keys. A key of the record
            // named alike then comes twice, and JSON readers keep the
            // last, the place, as the `Value` path did by replacing it.
            let text = records.to_json_text(&record)?;
            let line = match text.strip_suffix('}') {
                Some(body) if !extra.is_empty() && text.starts_with('{') => {
                    let places = serde_json::to_string(&Value::Object(extra))?;
                    let sep = if body == "{" { "" } else { "," };
                    format!("{body}{sep}{}", &places[1..])
                }
                _ => text,
            };
            out.bytes(line.as_bytes())?;
            out.bytes(b"\n")?;
        } else {
            let sha = hex::encode(Sha256::digest(&record.bytes));
            let mut line = json!({"index": index, "length": record.bytes.len(), "sha256": sha});
            if let Value::Object(map) = &mut line {
                map.extend(extra);
            }
            out.json(&line)?;
        }
        *left -= 1;
        if *left == 0 {
            break;
        }
    }
    Ok(())
}
