//! `grist count`: records per file and in total, through each format's
//! count (FFRecord: the sample count of the checked header; OFRecord: the
//! length prefixes alone; TFRecord: every frame, CRCs checked; Avro:
//! every block and datum).

use std::path::PathBuf;
use std::process::ExitCode;

use grist_tensor::ReadOptions;
use serde_json::json;

use crate::out::Out;
use crate::progress::Progress;
use crate::sources::{FormatArg, shown, with_stdin};

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

    /// Files, folders (a dataset: one line per file) or glob patterns;
    /// `-` is standard input (read to its end first).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Runs `grist count`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (files, _stdin) = with_stdin(&args.files)?;
    let inputs = args.format.expand_each(&files)?;
    let options = ReadOptions::new().with_check_crc(!args.no_crc);
    let mut out = Out::stdout();
    let mut total = 0u64;
    let mut per_file = Vec::new();
    let bar = Progress::new(Some(inputs.len() as u64), "files");
    for (format, input) in &inputs {
        bar.message(input.name());
        let counted = format.count(input, &options);
        bar.inc(1);
        let n = match counted {
            Ok(n) => n,
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        };
        total += n;
        if args.json {
            per_file.push(json!({"file": shown(input.name()), "records": n}));
        } else {
            out.line(format_args!("{n:>12}  {}", shown(input.name())))?;
        }
    }
    bar.finish();
    if args.json {
        out.json(&json!({"files": per_file, "total": total}))?;
    } else if inputs.len() > 1 {
        out.line(format_args!("{total:>12}  total"))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
