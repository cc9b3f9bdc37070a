//! `grist`: read, check, inspect and benchmark TFRecord and Avro training
//! data.
//!
//! Each subcommand lives in its own module; this file only parses the
//! command line, dispatches, and turns an error into one line on stderr
//! and a non-zero exit status.
#![forbid(unsafe_code)]

mod bench;
mod cat;
mod count;
mod demo;
mod fmt;
mod format;
mod generate;
mod index;
mod inspect;
mod out;
mod prod19;
mod records;
mod spec;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// grist reads ML training records (TFRecord files of tf.Example and
/// tf.SequenceExample, Avro object container files) into tensor batches,
/// fast.
#[derive(Debug, Parser)]
#[command(
    name = "grist",
    version,
    about,
    long_about = "grist reads ML training records (TFRecord files of tf.Example and \
                  tf.SequenceExample, Avro object container files) into tensor batches, \
                  fast.\n\n\
                  The format is taken from the file name: .avro is Avro, anything else \
                  TFRecord (--format overrides). TFRecord compression is taken from the file \
                  name too: .gz is GZIP, .zz/.zlib is ZLIB, .zst/.zstd is ZSTD (not built \
                  into this binary), anything else is uncompressed; Avro files name their \
                  codec in their header (null, deflate, snappy, zstandard, bzip2, xz).\n\n\
                  Start with `grist demo`, then try `grist gen prod19 --out DIR` and \
                  `grist bench --spec DIR/prod19.spec.json DIR/prod19.tfrecord`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Print records as JSON lines: parsed batches (--spec), raw framing
    /// (--raw) or generic decoded records (--records).
    Cat(cat::Args),
    /// Count the records of each file (and the total).
    Count(count::Args),
    /// Read every record with every check (TFRecord CRCs; Avro sync markers,
    /// codecs, record counts); report OK or the first bad record or block.
    Verify(verify::Args),
    /// Write DALI-compatible `<file>.idx` index files next to each TFRecord
    /// file.
    Index(index::Args),
    /// Summarize a file: the features of its first records (TFRecord), or
    /// its schema, codec, blocks and records (Avro).
    Inspect(inspect::Args),
    /// Measure end-to-end decoding speed (read + framing + checks + parse).
    Bench(bench::Args),
    /// Generate a synthetic dataset (TFRecord or Avro files plus a spec file).
    Gen(generate::Args),
    /// Write a built-in dataset, read it back, check it and time it.
    Demo(demo::Args),
}

/// Runs the chosen subcommand.
fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Cat(args) => cat::run(args),
        Command::Count(args) => count::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Index(args) => index::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Gen(args) => generate::run(args),
        Command::Demo(args) => demo::run(args),
    }
}

/// Parses the command line and reports any error in one line.
fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        // A closed pipe (`grist cat ... | head`) is not an error.
        Err(e) if out::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let message = format!("{e:#}").replace('\n', " ");
            eprintln!("grist: error: {message}");
            ExitCode::FAILURE
        }
    }
}
