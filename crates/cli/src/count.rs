//! `grist count`: records per file and in total, through each format's
//! count (FFRecord: the sample count of the checked header; OFRecord: the
//! length prefixes alone; TFRecord: every frame, CRCs checked; Avro:
//! every block and datum).

use std::path::PathBuf;
use std::process::ExitCode;

use grist_tensor::ReadOptions;
use serde_json::json;

use crate::out::Out;
use crate::sources::FormatArg;

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

    /// Files, folders (a dataset: one line per file) or glob patterns.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Runs `grist count`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let inputs = args.format.expand_each(&args.files)?;
    let options = ReadOptions::new().with_check_crc(!args.no_crc);
    let mut out = Out::stdout();
    let mut total = 0u64;
    let mut per_file = Vec::new();
    for (format, input) in &inputs {
        let n = match format.count(input, &options) {
            Ok(n) => n,
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        };
        total += n;
        if args.json {
            per_file.push(json!({"file": &**input.name(), "records": n}));
        } else {
            out.line(format_args!("{n:>12}  {}", input.name()))?;
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
