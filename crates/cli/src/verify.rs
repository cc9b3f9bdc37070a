//! `grist verify`: read every record with every check the format has.
//! TFRecord: both CRCs of every frame (and `<file>.idx` when present).
//! Avro: every block's sync marker, its codec (snappy's CRC-32 too), and
//! its datums against its record count.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use grist_avro_tensor::DatumReader;
use grist_tfrecord::{
    Compression, FRAME_OVERHEAD, ReaderOptions, RecordReader, index_path, verify_index,
};

use crate::fmt;
use crate::format::{Format, FormatArg};
use crate::out::Out;

/// Arguments of `grist verify`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Prints one line per file: OK with its record count, or FAILED with \
                        where the damage is: the first bad record's index and byte offset \
                        (TFRecord), the first bad block's index and byte offset (Avro). When \
                        <FILE>.idx exists next to a TFRecord file it is checked against the \
                        file too. Exits with status 1 when any file fails."
)]
pub(crate) struct Args {
    #[command(flatten)]
    format: FormatArg,

    /// TFRecord files (compression from the extension) or Avro files
    /// (.avro).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// The first problem found in a file.
struct Failure {
    /// Where: `record <i> at offset <o>` (TFRecord), `block <b> at offset
    /// <o>` (Avro); `None` when the file cannot be opened, its header is
    /// bad or its index file is wrong.
    position: Option<String>,
    /// What is wrong, without the file and position (said above).
    detail: String,
}

/// An error's message without its leading `<location>: ` (`at`: where
/// the format's error says it happened) or `<file>: `.
fn detail(message: String, at: Option<impl std::fmt::Display>, file: &Path) -> String {
    let prefixes = [
        at.map(|at| format!("{at}: ")),
        Some(format!("{}: ", file.display())),
    ];
    prefixes
        .iter()
        .flatten()
        .find_map(|p| message.strip_prefix(p.as_str()))
        .map(str::to_string)
        .unwrap_or(message)
}

/// What a good file holds, said after its record count.
struct Verified {
    records: u64,
    /// `<bytes> framed[, index matches]` or `<n> blocks, codec <c>`.
    details: String,
}

/// Reads every record of a TFRecord file (and checks `<file>.idx` if
/// present).
fn verify_tfrecord(file: &Path) -> Result<Verified, Failure> {
    let fail = |position, error: grist_tfrecord::Error| Failure {
        position,
        detail: detail(error.to_string(), error.location(), file),
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
            Err(e) => {
                let at = format!("record {records} at offset {offset}{}", stream(file));
                return Err(fail(Some(at), e));
            }
        }
    }
    let idx = index_path(file);
    let index = Compression::from_path(file) == Compression::None && idx.exists();
    if index {
        verify_index(file, &idx, ReaderOptions::default()).map_err(|e| fail(None, e))?;
    }
    Ok(Verified {
        records,
        details: format!(
            "{} framed{}",
            fmt::bytes(offset),
            if index { ", index matches" } else { "" }
        ),
    })
}

/// Reads every block and datum of an Avro file.
fn verify_avro(file: &Path) -> Result<Verified, Failure> {
    let fail = |position, error: grist_avro_tensor::Error| Failure {
        position,
        detail: detail(error.to_string(), error.location(), file),
    };
    let mut reader = DatumReader::open(file, grist_avro_tensor::ReaderOptions::default())
        .map_err(|e| fail(None, e))?;
    let mut records = 0u64;
    loop {
        match reader.next_datum() {
            Ok(Some(_)) => records += 1,
            Ok(None) => break,
            Err(e) => {
                let (block, offset) = (reader.block_index(), reader.block_offset());
                let mut at = format!("block {block} at offset {offset}");
                if let Some(r) = e.location().and_then(|l| l.record) {
                    at.push_str(&format!(", record {r}"));
                }
                return Err(fail(Some(at), e));
            }
        }
    }
    Ok(Verified {
        records,
        details: format!(
            "{} block{}, codec {}",
            fmt::count(reader.blocks_read()),
            if reader.blocks_read() == 1 { "" } else { "s" },
            reader.header().codec
        ),
    })
}

impl Failure {
    /// `<position>: <detail>`, or just the detail.
    fn describe(&self) -> String {
        match &self.position {
            Some(at) => format!("{at}: {}", self.detail),
            None => self.detail.clone(),
        }
    }
}

/// Where offsets count, for compressed TFRecord files.
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
        let verified = match args.format.of(file) {
            Format::Tfrecord => verify_tfrecord(file),
            Format::Avro => verify_avro(file),
        };
        match verified {
            Ok(v) => out.line(format_args!(
                "OK      {}  ({} records, {})",
                file.display(),
                fmt::count(v.records),
                v.details
            ))?,
            Err(f) => {
                out.line(format_args!("FAILED  {}  {}", file.display(), f.describe()))?;
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
        first.describe()
    ))
}
