//! `grist count`: records per file and in total.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use crate::format::{Format, FormatArg};
use crate::out::Out;
use crate::records::RecordFile;

/// Arguments of `grist count`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Skip the CRC checks of TFRecord files (faster; damage may go
    /// unnoticed). Avro files are always read whole: sync markers, codecs
    /// and every datum against its block's record count.
    #[arg(long)]
    no_crc: bool,

    /// Print one JSON object: {"files": [{"file", "records"}], "total"}.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    format: FormatArg,

    /// TFRecord files (compression from the extension) or Avro files
    /// (.avro).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Counts the records of one file.
fn count_records(file: &Path, format: Format, check_crc: bool) -> anyhow::Result<u64> {
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
    for file in &args.files {
        let n = match count_records(file, args.format.of(file), !args.no_crc) {
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
    } else if args.files.len() > 1 {
        out.line(format_args!("{total:>12}  total"))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
