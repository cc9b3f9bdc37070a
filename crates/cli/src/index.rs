//! `grist index`: the index files of the formats that have them
//! ([`Format::write_index`](grist_tensor::Format::write_index)): TFRecord's
//! DALI-compatible `<file>.idx`.

use std::path::PathBuf;
use std::process::ExitCode;

use grist_tensor::ReadOptions;

use crate::fmt;
use crate::out::Out;
use crate::sources::FormatArg;

/// Arguments of `grist index`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "TFRecord files: each index line is `<offset> <frame length>` of one record, \
                        as NVIDIA DALI's tfrecord2idx writes it. Every record is read with CRC \
                        checks first; the index is written atomically. Compressed files cannot \
                        be indexed (the offsets would point into the compressed stream). Other \
                        formats have no index files. The files are indexed in order; the first \
                        that cannot be stops the command."
)]
pub(crate) struct Args {
    #[command(flatten)]
    format: FormatArg,

    /// Uncompressed TFRecord files (or folders or glob patterns of them).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Runs `grist index`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let inputs = args.format.expand_each(&args.files)?;
    let options = ReadOptions::new();
    let mut out = Out::stdout();
    for (format, input) in &inputs {
        let records = match format.write_index(input, &options) {
            Ok(n) => n,
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        };
        let records = fmt::count(records);
        match format.index_file(input) {
            Some(index) => out.line(format_args!("wrote {}  ({records} records)", index.name()))?,
            None => out.line(format_args!(
                "indexed {}  ({records} records)",
                input.name()
            ))?,
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
