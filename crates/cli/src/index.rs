//! `grist index`: DALI-compatible index files (`<file>.idx`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use grist_tfrecord::{Compression, ReaderOptions, index_path, write_index};

use crate::fmt;
use crate::format::Format;
use crate::out::Out;

/// Arguments of `grist index`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Each index line is `<offset> <frame length>` of one record, as NVIDIA \
                        DALI's tfrecord2idx writes it. Every record is read with CRC checks \
                        first; the index is written atomically. Compressed files cannot be \
                        indexed (the offsets would point into the compressed stream)."
)]
pub(crate) struct Args {
    /// Uncompressed TFRecord files.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Runs `grist index`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    for file in &args.files {
        let why = match Format::of_path(file) {
            Format::Tfrecord => None,
            Format::Avro => Some("an Avro file is read block by block through its sync markers"),
            Format::Ffrecord => Some("an FFRecord file holds its samples' offsets in its header"),
            Format::Ofrecord => Some(
                "grist builds the index of an OFRecord part from its length prefixes when it \
                 reads records by number",
            ),
        };
        if let Some(why) = why {
            bail!(
                "{}: index files are for TFRecord files ({why})",
                file.display()
            );
        }
        let compression = Compression::from_path(file);
        if compression != Compression::None {
            bail!(
                "{}: cannot index a {compression}-compressed file: index offsets only make \
                 sense in an uncompressed TFRecord file (decompress it first)",
                file.display()
            );
        }
    }
    let mut out = Out::stdout();
    for file in &args.files {
        let records = match write_index(file, ReaderOptions::default()) {
            Ok(n) => n,
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        };
        out.line(format_args!(
            "wrote {}  ({} records)",
            index_path(file).display(),
            fmt::count(records)
        ))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
