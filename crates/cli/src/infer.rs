//! `grist spec`: the spec file that reads some files, inferred by their
//! format ([`Format::infer_spec`](grist_tensor::Format::infer_spec)): from
//! an Avro writer schema, or by sampling the first records of TFRecord
//! (tf.Example, SequenceExample), FFRecord and OFRecord files. The spec
//! goes to stdout as JSON (what `cat --spec` and `bench --spec` read);
//! notes on features left out or guessed at go to stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use grist_tensor::InferOptions;

use crate::out::Out;
use crate::sources::{FormatArg, PayloadArg};

/// Arguments of `grist spec`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "TFRecord, FFRecord and OFRecord: the first records are sampled. A feature \
                  with the same number of values n > 0 in every sampled record is dense (shape \
                  [] for one value, [n] otherwise); any other (counts that vary, missing from a \
                  record, always empty) is varlen. Dtypes follow the lists: int64_list int64, \
                  float_list float32, bytes_list string; OFRecord also double_list float64 and \
                  int32_list int32. Records that have feature_lists are tf.SequenceExamples: \
                  their context features follow the same rules, and a feature list whose every \
                  step holds the same number of values is fixed_len_sequence (allow_missing \
                  when a record lacks it), any other varlen. A feature whose type changes, or \
                  that never holds a list, is left out with a note. Files with no records are \
                  an error.\n\n\
                  Avro: from the writer schema, in the ATDS layout: primitive fields are dense \
                  scalars (enum, fixed, string and bytes as string), nested arrays of \
                  primitives varlen of their depth, records of indices0..N-1 and values sparse \
                  (their shape from the largest index of the sampled records); [null, T] reads \
                  as T, a null in a dense field as 0 (false, empty). Maps, other unions and \
                  arrays of records are left out with a note. With --reader-schema, from the \
                  reader schema instead (every file's writer schema must resolve against it), \
                  and the spec carries it as \"reader_schema\".\n\n\
                  Notes go to stderr, the spec to stdout: `grist spec FILE > spec.json`, then \
                  `grist cat --spec spec.json FILE`."
)]
pub(crate) struct Args {
    /// How many records to sample (from the start of the files, in order).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    records: u64,

    /// Read the records as tf.SequenceExamples (TFRecord, FFRecord); by
    /// default, records that have feature lists are taken as such.
    #[arg(long, conflicts_with = "no_sequence")]
    sequence: bool,

    /// Read the records as tf.Examples, even if they have feature lists.
    #[arg(long)]
    no_sequence: bool,

    /// Avro: infer the spec of the files read through this reader schema
    /// (an .avsc file of the schema's JSON; schema evolution): the
    /// features are the reader's fields, every file's writer schema must
    /// resolve against it, and the spec carries it as "reader_schema".
    /// Other formats refuse it.
    #[arg(long, value_name = "FILE.avsc")]
    reader_schema: Option<PathBuf>,

    /// The batch size to write into the spec file (`batch_size`).
    #[arg(long, value_name = "N")]
    batch_size: Option<usize>,

    #[command(flatten)]
    format: FormatArg,

    #[command(flatten)]
    payload: PayloadArg,

    /// Files, folders (a dataset) or glob patterns, of one format.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Runs `grist spec`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.records == 0 {
        bail!("--records must be at least 1");
    }
    let (format, inputs) = args.format.expand_with(&args.payload, &args.files)?;
    let mut options = InferOptions::default().with_records(args.records);
    if args.sequence || args.no_sequence {
        options = options.with_sequence(args.sequence);
    }
    if let Some(path) = &args.reader_schema {
        options = options.with_reader_schema(crate::spec::load_reader_schema(path)?);
    }
    let mut inferred = format.infer_spec(&inputs, &options)?;
    for note in &inferred.notes {
        eprintln!("grist: note: {note}");
    }
    let spec = &mut inferred.spec;
    if spec.features.is_empty()
        && spec.context_features.is_empty()
        && spec.sequence_features.is_empty()
    {
        bail!(
            "{}: no feature could be inferred (see the notes above)",
            grist_tensor::inputs_named(&inputs)
        );
    }
    spec.batch_size = args.batch_size;
    let mut out = Out::stdout();
    out.line(spec.to_json())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
