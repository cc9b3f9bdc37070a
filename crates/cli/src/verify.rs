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
    /// The index of the first bad record and the byte offset of its frame
    /// (in the decompressed stream); `None` when the file cannot be opened
    /// or its index file is wrong.
    position: Option<(u64, u64)>,
    /// What is wrong, without the file and record (said above).
    detail: String,
}

/// The message of `e` without its leading `<file>: record <n>: ` or
/// `<file>: `.
fn detail(e: &grist_tfrecord::Error, file: &Path) -> String {
    let message = e.to_string();
    let prefix = match e.location() {
        Some(at) => format!("{at}: "),
        None => format!("{}: ", file.display()),
    };
    message
        .strip_prefix(&prefix)
        .map(str::to_string)
        .unwrap_or(message)
}

/// What a good file holds.
struct Verified {
    records: u64,
    /// Framed bytes (decompressed).
    bytes: u64,
    /// Whether an index file was found and matched.
    index: bool,
}

/// Reads every record of `file` (and checks `<file>.idx` if present).
fn verify_file(file: &Path) -> Result<Verified, Failure> {
    let fail = |position, error: grist_tfrecord::Error| Failure {
        position,
        detail: detail(&error, file),
    };
    let mut reader =
        RecordReader::open(file, ReaderOptions::default()).map_err(|e| fail(None, e))?;
    let mut records = 0u64;
    let mut offset = 0u64;
    loop {
        match reader.next_record() {
            Ok(Some(payload)) => {
                records += 1;
                offset += (payload.len() + FRAME_OVERHEAD) as u64;
            }
            Ok(None) => break,
            Err(e) => return Err(fail(Some((records, offset)), e)),
        }
    }
    let idx = index_path(file);
    let index = Compression::from_path(file) == Compression::None && idx.exists();
    if index {
        verify_index(file, &idx, ReaderOptions::default()).map_err(|e| fail(None, e))?;
    }
    Ok(Verified {
        records,
        bytes: offset,
        index,
    })
}

impl Failure {
    /// `record <i> at offset <o>: <detail>`, or just the detail.
    fn describe(&self, file: &Path) -> String {
        match self.position {
            Some((record, offset)) => format!(
                "record {record} at offset {offset}{}: {}",
                stream(file),
                self.detail
            ),
            None => self.detail.clone(),
        }
    }
}

/// Where offsets count, for compressed files.
fn stream(file: &Path) -> &'static str {
    if Compression::from_path(file) == Compression::None {
        ""
    } else {
        " of the decompressed stream"
    }
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
                    "FAILED  {}  {}",
                    file.display(),
                    f.describe(file)
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
        "verify failed: {}: {}{more}",
        file.display(),
        first.describe(file)
    ))
}
