//! `grist count`: records per file and in total.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use grist_tfrecord::{ReaderOptions, RecordReader};
use serde_json::json;

use crate::out::Out;

/// Arguments of `grist count`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Skip the CRC checks (faster; damage may go unnoticed).
    #[arg(long)]
    no_crc: bool,

    /// Print one JSON object: {"files": [{"file", "records"}], "total"}.
    #[arg(long)]
    json: bool,

    /// TFRecord files (compression from the extension).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Counts the records of one file.
pub(crate) fn count_records(file: &Path, check_crc: bool) -> grist_tfrecord::Result<u64> {
    let mut reader = RecordReader::open(file, ReaderOptions::default().with_check_crc(check_crc))?;
    while reader.next_record()?.is_some() {}
    Ok(reader.records_read())
}

/// Runs `grist count`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut out = Out::stdout();
    let mut total = 0u64;
    let mut per_file = Vec::new();
    for file in &args.files {
        let n = match count_records(file, !args.no_crc) {
            Ok(n) => n,
            Err(e) => {
                out.flush()?;
                return Err(e.into());
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
    } else if args.files.len() > 1 {
        out.line(format_args!("{total:>12}  total"))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
