//! `grist count`: records per file and in total. FFRecord files give
//! their sample count from their (checked) header; OFRecord parts are
//! counted from their length prefixes alone.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use crate::format::{Format, FormatArg};
use crate::out::Out;
use crate::records::RecordFile;

/// Arguments of `grist count`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Skip the CRC checks of TFRecord files and the metadata CRC-32 of
    /// FFRecord headers (faster; damage may go unnoticed). Avro files are
    /// always read whole: sync markers, codecs and every datum against its
    /// block's record count. FFRecord samples and OFRecord payloads are not
    /// read (`grist verify` checks them).
    #[arg(long)]
    no_crc: bool,

    /// Print one JSON object: {"files": [{"file", "records"}], "total"}.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    format: FormatArg,

    /// TFRecord files (compression from the extension), Avro files
    /// (.avro), FFRecord files (.ffr), OFRecord part files (part-<n>), or
    /// folders of FFRecord files or OFRecord parts (one line per file).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Counts the records of one file.
fn count_records(file: &Path, format: Format, check_crc: bool) -> anyhow::Result<u64> {
    match format {
        Format::Ffrecord => {
            let options = grist_ffrecord::ReaderOptions::default().with_check_data(check_crc);
            return Ok(grist_ffrecord::FfrReader::open(file, options)?.len());
        }
        Format::Ofrecord => {
            let counts = grist_ofrecord::Dataset::from_files([file]).record_counts()?;
            return Ok(counts.iter().sum());
        }
        Format::Tfrecord | Format::Avro => {}
    }
    let mut records = RecordFile::open(file, format, check_crc)?;
    let mut n = 0;
    while records.next_record()?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// Runs `grist count`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut out = Out::stdout();
    let mut total = 0u64;
    let mut per_file = Vec::new();
    let inputs = args.format.expand(&args.files)?;
    for input in &inputs {
        let file = &input.path;
        let n = match count_records(file, input.format, !args.no_crc) {
            Ok(n) => n,
            Err(e) => {
                out.flush()?;
                return Err(e);
            }
        };
        total += n;
        if args.json {
            per_file.push(json!({"file": file.display().to_string(), "records": n}));
        } else {
            out.line(format_args!("{n:>12}  {}", file.display()))?;
        }
    }
    if args.json {
        out.json(&json!({"files": per_file, "total": total}))?;
    } else if inputs.len() > 1 {
        out.line(format_args!("{total:>12}  total"))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
