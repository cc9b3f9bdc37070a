//! `grist inspect`: what a file (or dataset) holds, as its format's
//! [`Format::inspect`](grist_tensor::Format::inspect) says. TFRecord:
//! which features the first records hold, of which kinds, and how many
//! values. Avro: the writer schema, codec, metadata, blocks and records,
//! and each top-level field's type. FFRecord: each file's sample count,
//! legacy flag and sizes, from the headers. OFRecord: the parts and their
//! record counts, and the features the first records hold.

use std::path::PathBuf;
use std::process::ExitCode;

use grist_tensor::InspectOptions;

use crate::out::Out;
use crate::sources::{FormatArg, STDIN_NAME, shown, shown_aligned, with_stdin};

/// Arguments of `grist inspect`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "For each feature key: its kind(s) (int64_list, float_list, bytes_list; \
                        `none` for a feature with no list set), in how many records it \
                        appears, and the fewest and most values it holds. With --sequence, \
                        context features and feature lists (steps per record, values per \
                        step) of tf.SequenceExamples.\n\n\
                        Avro files: the codec, the metadata, the number of blocks and records \
                        (every block and datum is read and checked), each top-level field's \
                        Avro type, and the writer schema.\n\n\
                        FFRecord files or folders: each file's sample count, whether its header \
                        is a legacy one (metadata checksum stored as 0, not checked), the sizes \
                        of its header, samples and file, and the smallest and largest sample \
                        (headers are read and checked; samples are not read: `grist verify` \
                        checks them).\n\n\
                        OFRecord part files or folders: each part's record count (from the \
                        length prefixes), and the features of the first records as for \
                        TFRecord (kinds bytes_list, float_list, double_list, int32_list, \
                        int64_list)."
)]
pub(crate) struct Args {
    /// How many records to look at (from the start of a TFRecord file or
    /// OFRecord dataset; Avro files are read whole).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    records: u64,

    /// Decode the records as tf.SequenceExamples (TFRecord).
    #[arg(long)]
    sequence: bool,

    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    format: FormatArg,

    /// A file, a folder (a dataset) or a glob pattern, of one format; `-`
    /// is standard input (read to its end first).
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

/// Runs `grist inspect`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (files, stdin) = with_stdin(std::slice::from_ref(&args.file))?;
    let (format, inputs) = args.format.expand(&files)?;
    let options = InspectOptions::default()
        .with_records(args.records)
        .with_sequence(args.sequence);
    let name = match stdin {
        Some(_) => STDIN_NAME.to_string(),
        None => args.file.display().to_string(),
    };
    let report = format.inspect(&name, &inputs, &options)?;
    let mut out = Out::stdout();
    if args.json {
        out.line(shown(&report.json.to_string()))?;
    } else {
        for line in &report.text {
            out.line(shown_aligned(line))?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
