//! `grist verify`: read every record with every check the format has.
//! TFRecord: both CRCs of every frame (and `<file>.idx` when present).
//! Avro: every block's sync marker, its codec (snappy's CRC-32 too), and
//! its datums against its record count. FFRecord: the header (metadata
//! CRC-32, offsets) and every sample's CRC-32. OFRecord: the framing of
//! every part file, and every record as an OFRecord protobuf (the format
//! has no checksum).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use grist_avro_tensor::DatumReader;
use grist_ffrecord::FfrReader;
use grist_tensor::RecordSource as _;
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
                        (TFRecord, OFRecord), the first bad block's index and byte offset \
                        (Avro), the first bad sample's index and byte offset (FFRecord). When \
                        <FILE>.idx exists next to a TFRecord file it is checked against the \
                        file too. A folder stands for its FFRecord files or OFRecord parts, \
                        each verified on its own. Exits with status 1 when any file fails."
)]
pub(crate) struct Args {
    #[command(flatten)]
    format: FormatArg,

    /// TFRecord files (compression from the extension), Avro files
    /// (.avro), FFRecord files (.ffr), OFRecord part files (part-<n>), or
    /// folders of FFRecord files or OFRecord parts.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// The first problem found in a file.
struct Failure {
    /// Where: `record <i> at offset <o>` (TFRecord, OFRecord), `block <b>
    /// at offset <o>` (Avro), `sample <i> at offset <o>` (FFRecord); `None`
    /// when the file cannot be opened, its header is bad or its index file
    /// is wrong.
    position: Option<String>,
    /// What is wrong, without the file and position (said above).
    detail: String,
}

/// An error's message and its causes, joined by ": " (as the CLI prints
/// errors).
fn chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        out = format!("{out}: {c}");
        cause = c.source();
    }
    out
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
        detail: detail(chain(&error), error.location(), file),
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
        detail: detail(chain(&error), error.location(), file),
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

/// Reads the header and every sample of an FFRecord file, checking the
/// metadata CRC-32 and every sample's CRC-32.
fn verify_ffrecord(file: &Path) -> Result<Verified, Failure> {
    let fail = |error: grist_ffrecord::Error, offsets: Option<&[u64]>| {
        let sample = error.location().and_then(|at| at.record);
        let position = sample.map(|sample| match offsets {
            Some(o) => format!("sample {sample} at offset {}", o[sample as usize]),
            None => format!("sample {sample}"),
        });
        Failure {
            detail: detail(chain(&error), error.location(), file),
            position,
        }
    };
    let reader = FfrReader::open(file, grist_ffrecord::ReaderOptions::default())
        .map_err(|e| fail(e, None))?;
    let info = &reader.files()[0];
    let offsets = info.header().offsets();
    let mut source = reader.source();
    loop {
        match source.next_chunk() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => return Err(fail(e, Some(offsets))),
        }
    }
    let legacy = match info.header().is_legacy() {
        true => ", legacy header (metadata checksum stored as 0, not checked)",
        false => "",
    };
    Ok(Verified {
        records: reader.len(),
        details: format!(
            "{} of samples, every CRC-32 checked{legacy}",
            fmt::bytes(reader.data_len())
        ),
    })
}

/// Reads every record of an OFRecord part file and parses each one.
fn verify_ofrecord(file: &Path) -> Result<Verified, Failure> {
    let fail = |position, error: grist_ofrecord::Error| Failure {
        position,
        detail: detail(chain(&error), error.location(), file),
    };
    let mut reader =
        grist_ofrecord::RecordReader::open(file, grist_ofrecord::ReaderOptions::default())
            .map_err(|e| fail(None, e))?;
    let name = reader.name().clone();
    let mut records = 0u64;
    loop {
        let (index, offset) = (reader.record_index(), reader.offset());
        let at = || Some(format!("record {index} at offset {offset}"));
        match reader.next_record() {
            Ok(Some(r)) => {
                let location =
                    grist_ofrecord::Location::record(name.clone(), r.index).with_offset(r.offset);
                grist_ofrecord::Record::parse_at(r.payload, &location)
                    .map_err(|e| fail(at(), e))?;
                records += 1;
            }
            Ok(None) => break,
            Err(e) => return Err(fail(at(), e)),
        }
    }
    Ok(Verified {
        records,
        details: format!(
            "{} framed, every record parses",
            fmt::bytes(reader.offset())
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
    let inputs = args.format.expand(&args.files)?;
    for input in &inputs {
        let file = &input.path;
        let verified = match input.format {
            Format::Tfrecord => verify_tfrecord(file),
            Format::Avro => verify_avro(file),
            Format::Ffrecord => verify_ffrecord(file),
            Format::Ofrecord => verify_ofrecord(file),
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
        n => format!(" ({} of {} files failed)", n, inputs.len()),
    };
    Err(anyhow::anyhow!(
        "verify failed: {}: {}{more}",
        file.display(),
        first.describe()
    ))
}
