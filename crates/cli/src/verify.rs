//! `grist verify`: read every record of every file with every check its
//! format has ([`Format::verify`](grist_tensor::Format::verify)):
//! TFRecord: both CRCs of every frame (and `<file>.idx` when present).
//! Avro: every block's sync marker, its codec (snappy's CRC-32 too), and
//! its datums against its record count. FFRecord: the header (metadata
//! CRC-32, offsets) and every sample's CRC-32. OFRecord: the framing of
//! every part file, and every record as an OFRecord protobuf (the format
//! has no checksum).

use std::path::PathBuf;
use std::process::ExitCode;

use grist_tensor::{Location, VerifyFailure};

use crate::fmt;
use crate::out::Out;
use crate::progress::Progress;
use crate::sources::{FormatArg, shown, with_stdin};

/// Arguments of `grist verify`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Prints one line per file: OK with its record count, or FAILED with \
                        where the damage is: the first bad record's index and byte offset \
                        (TFRecord, OFRecord; in the decompressed stream for compressed \
                        TFRecord files), the first bad block's index and byte offset (Avro), \
                        the first bad sample's index and byte offset (FFRecord). When \
                        <FILE>.idx exists next to a TFRecord file it is checked against the \
                        file too. A folder stands for its files (FFRecord files, OFRecord \
                        parts, ...), each verified on its own. Exits with status 1 when any \
                        file fails. The lines go to stdout; a progress bar of the files is drawn \
                        on stderr when it is a terminal."
)]
pub(crate) struct Args {
    #[command(flatten)]
    format: FormatArg,

    /// Files, folders (each of their files verified on its own) or glob
    /// patterns; `-` is standard input (read to its end first).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Where a failure is, as the output says it: `record <i> at offset <o>`
/// (`noun` for what the format calls a record: `sample <i> at offset
/// <o>`), `block <b> at offset <o>[, record <r>]`; `None` when the
/// position says nothing.
fn position(at: &Location, noun: &str) -> Option<String> {
    let offset = at
        .offset
        .map(|o| format!(" at offset {o}"))
        .unwrap_or_default();
    match (at.block, at.record) {
        (Some(b), record) => {
            let record = record.map(|r| format!(", {noun} {r}")).unwrap_or_default();
            Some(format!("block {b}{offset}{record}"))
        }
        (None, Some(r)) => Some(format!("{noun} {r}{offset}")),
        (None, None) => at.offset.map(|o| format!("at offset {o}")),
    }
}

/// `s` without a leading run of location words (`block 3, record 70: `,
/// `sample 2 (dataset index 9): `, `record 1 (length prefix at byte 36):
/// `), or `s` itself when it does not start with one.
fn strip_location(s: &str) -> &str {
    const WORDS: [&str; 5] = ["block ", "record ", "sample ", "byte ", "dataset index "];
    let mut rest = s;
    loop {
        let Some(after) = WORDS.iter().find_map(|w| rest.strip_prefix(w)) else {
            return s;
        };
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return s;
        }
        let mut next = &after[digits..];
        // A note on the number: ` (dataset index 9)`.
        if let Some(note) = next.strip_prefix(" (") {
            match note.find(')') {
                Some(end) if !note[..end].contains(':') => next = &note[end + 1..],
                _ => return s,
            }
        }
        if let Some(more) = next.strip_prefix(", ") {
            rest = more;
        } else if let Some(detail) = next.strip_prefix(": ") {
            return detail;
        } else {
            return s;
        }
    }
}

/// What is wrong, without the file and place the error's message starts
/// with (the line says them already).
fn detail(failure: &VerifyFailure, file: &str) -> String {
    let message = failure.error.to_string();
    if let Some(at) = failure.error.location()
        && let Some(rest) = message.strip_prefix(&format!("{at}: "))
    {
        return rest.to_string();
    }
    match message.strip_prefix(&format!("{file}: ")) {
        Some(rest) => strip_location(rest).to_string(),
        None => message,
    }
}

/// `<position>: <detail>`, or just the detail.
fn describe(failure: &VerifyFailure, file: &str, noun: &str) -> String {
    let detail = detail(failure, file);
    match failure.position.as_ref().and_then(|at| position(at, noun)) {
        Some(at) => format!("{at}: {detail}"),
        None => detail,
    }
}

/// Runs `grist verify`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut out = Out::stdout();
    let mut failures: Vec<(String, String)> = Vec::new();
    let (files, _stdin) = with_stdin(&args.files)?;
    let inputs = args.format.expand_each(&files)?;
    let bar = Progress::new(Some(inputs.len() as u64), "files");
    for (format, input) in &inputs {
        let name = input.name();
        let shown_name = shown(name);
        bar.message(&shown_name);
        let verified = format.verify(input);
        bar.inc(1);
        match verified {
            Ok(v) => {
                let details = match v.details.as_str() {
                    "" => String::new(),
                    d => format!(", {d}"),
                };
                out.line(format_args!(
                    "OK      {shown_name}  ({} records{details})",
                    fmt::count(v.records)
                ))?
            }
            Err(f) => {
                let text = shown(&describe(&f, name, format.record_noun())).into_owned();
                out.line(format_args!("FAILED  {shown_name}  {text}"))?;
                failures.push((shown_name.into_owned(), text));
            }
        }
    }
    bar.finish();
    out.flush()?;
    let Some((file, first)) = failures.first() else {
        return Ok(ExitCode::SUCCESS);
    };
    let more = match failures.len() {
        1 => String::new(),
        n => format!(" ({} of {} files failed)", n, inputs.len()),
    };
    Err(anyhow::anyhow!("verify failed: {file}: {first}{more}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_in_each_format_s_words() {
        let at = Location::record("f", 2).with_offset(162);
        assert_eq!(position(&at, "record").unwrap(), "record 2 at offset 162");
        assert_eq!(position(&at, "sample").unwrap(), "sample 2 at offset 162");
        let at = Location::block("f", 1).with_offset(653);
        assert_eq!(position(&at, "record").unwrap(), "block 1 at offset 653");
        let at = at.with_record(9);
        assert_eq!(
            position(&at, "record").unwrap(),
            "block 1 at offset 653, record 9"
        );
        assert_eq!(
            position(&Location::record("f", 4), "sample").unwrap(),
            "sample 4"
        );
        assert_eq!(position(&Location::file("f"), "record"), None);
    }

    #[test]
    fn location_words_are_stripped() {
        for (message, detail) in [
            (
                "record 2: corrupted record at 174",
                "corrupted record at 174",
            ),
            ("block 1, record 9: bad datum: x", "bad datum: x"),
            (
                "sample 2 (dataset index 7): sample checksum mismatch",
                "sample checksum mismatch",
            ),
            (
                "record 1 (length prefix at byte 36): could not parse",
                "could not parse",
            ),
            ("truncated: record length 28", "truncated: record length 28"),
            ("record 3 is out of range", "record 3 is out of range"),
            ("metadata checksum mismatch", "metadata checksum mismatch"),
        ] {
            assert_eq!(strip_location(message), detail, "{message}");
        }
    }
}
