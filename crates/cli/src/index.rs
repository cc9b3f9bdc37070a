//! `grist index`: the index files of the formats that have them
//! ([`Format::write_index`](grist_tensor::Format::write_index)): TFRecord's
//! DALI-compatible `<file>.idx`.

use std::path::PathBuf;
use std::process::ExitCode;

use grist_tensor::ReadOptions;

use crate::fmt;
use crate::sources::FormatArg;

/// Arguments of `grist index`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "TFRecord files: each index line is `<offset> <frame length>` of one record, \
                        as NVIDIA DALI's tfrecord2idx writes it. Every record is read with CRC \
                        checks first; the index is written atomically. Compressed files cannot \
                        be indexed (the offsets would point into the compressed stream). Other \
                        formats have no index files. The files are indexed in order; the first \
                        that cannot be stops the command. What was written is said on stderr."
)]
pub(crate) struct Args {
    #[command(flatten)]
    format: FormatArg,

    /// Uncompressed TFRecord files (or folders or glob patterns of them).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Runs `grist index`. Its output is files: what it wrote is said on
/// stderr, as status.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let inputs = args.format.expand_each(&args.files)?;
    let options = ReadOptions::new();
    for (format, input) in &inputs {
        let records = fmt::count(format.write_index(input, &options)?);
        match format.index_file(input) {
            Some(index) => eprintln!("wrote {}  ({records} records)", index.name()),
            None => eprintln!("indexed {}  ({records} records)", input.name()),
        }
    }
    Ok(ExitCode::SUCCESS)
}
