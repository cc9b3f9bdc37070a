//! `grist verify`: read every record with both CRCs checked.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use grist_tfrecord::{
    Compression, FRAME_OVERHEAD, ReaderOptions, RecordReader, index_path, verify_index,
};

use crate::fmt;
use crate::out::Out;

/// Arguments of `grist verify`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Prints one line per file: OK with its record count, or FAILED with \
                        the first bad record's index and byte offset. When <FILE>.idx exists \
                        it is checked against the file too. Exits with status 1 when any \
                        file fails."
)]
pub(crate) struct Args {
    /// TFRecord files (compression from the extension).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// The first problem found in a file.
struct Failure {
    /// The index of the first bad record.
    record: u64,
    /// The byte offset of its frame (in the decompressed stream).
    offset: u64,
    error: anyhow::Error,
}

/// What a good file holds.
struct Verified {
    records: u64,
    /// Framed bytes (decompressed).
    bytes: u64,
    /// Whether an index file was found and matched.
    index: bool,
}

fn verify_file(file: &Path) -> Result<Verified, Failure> {
    let fail = |record, offset, error: anyhow::Error| Failure {
        record,
        offset,
        error,
    };
    let mut reader =
        RecordReader::open(file, ReaderOptions::default()).map_err(|e| fail(0, 0, e.into()))?;
    let mut records = 0u64;
    let mut offset = 0u64;
    loop {
        match reader.next_record() {
            Ok(Some(payload)) => {
                records += 1;
                offset += (payload.len() + FRAME_OVERHEAD) as u64;
            }
            Ok(None) => break,
            Err(e) => return Err(fail(records, offset, e.into())),
        }
    }
    let idx = index_path(file);
    let index = Compression::from_path(file) == Compression::None && idx.exists();
    if index {
        verify_index(file, &idx, ReaderOptions::default())
            .map_err(|e| fail(records, offset, e.into()))?;
    }
    Ok(Verified {
        records,
        bytes: offset,
        index,
    })
}

/// Runs `grist verify`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut out = Out::stdout();
    let mut failures: Vec<(PathBuf, Failure)> = Vec::new();
    for file in &args.files {
        match verify_file(file) {
            Ok(v) => out.line(format_args!(
                "OK      {}  ({} records, {} framed{})",
                file.display(),
                fmt::count(v.records),
                fmt::bytes(v.bytes),
                if v.index { ", index matches" } else { "" }
            ))?,
            Err(f) => {
                out.line(format_args!(
                    "FAILED  {}  record {} at offset {}: {:#}",
                    file.display(),
                    f.record,
                    f.offset,
                    f.error
                ))?;
                failures.push((file.clone(), f));
            }
        }
    }
    out.flush()?;
    let Some((file, first)) = failures.first() else {
        return Ok(ExitCode::SUCCESS);
    };
    let more = match failures.len() {
        1 => String::new(),
        n => format!(" ({} of {} files failed)", n, args.files.len()),
    };
    Err(anyhow::anyhow!(
        "verify failed: {}: record {} (frame at byte {}): {:#}{more}",
        file.display(),
        first.record,
        first.offset,
        first.error
    ))
}
