//! `grist`: read, check, inspect and benchmark TFRecord, Avro, FFRecord and
//! OFRecord training data.
//!
//! Each subcommand lives in its own module; this file only parses the
//! command line, dispatches, and turns an error into one line on stderr
//! and a non-zero exit status.
// The one `unsafe` is `grist bench --mmap` (the user's promise, see `bench::access`).
#![deny(unsafe_code)]

mod bench;
mod cat;
mod completions;
mod convert;
mod count;
mod demo;
mod fmt;
mod generate;
mod index;
mod infer;
mod inspect;
mod out;
mod prod19;
mod progress;
mod rows;
mod sources;
mod spec;
mod verify;

use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};

/// grist reads ML training records (TFRecord files of tf.Example and
/// tf.SequenceExample, Avro object container files, FFRecord files, OFRecord
/// part files) into tensor batches, fast.
#[derive(Debug, Parser)]
#[command(
    name = "grist",
    version,
    about,
    long_about = "grist reads ML training records (TFRecord files of tf.Example and \
                  tf.SequenceExample, Avro object container files, HFAiLab FFRecord files, \
                  OneFlow OFRecord part files) into tensor batches, fast.\n\n\
                  Files are read through grist's format registry, as the loader reads them. \
                  A file's format is told by its extension first (.tfrecord, .tfrecords, \
                  .tfr, optionally followed by .gz/.zz/.zlib/.zst/.zstd: TFRecord; .avro: \
                  Avro; .ffr: FFRecord), then by a format's usual bare name (part-<digits>: \
                  an OFRecord part), then by its content (Avro's magic, a TFRecord frame's \
                  length CRC, an FFRecord header, an OFRecord frame); --format overrides. A \
                  folder is a dataset of its files in the format's order (FFRecord files in \
                  plain string order, OFRecord parts in numeric order). TFRecord compression \
                  is taken from the extension (.gz GZIP, .zz/.zlib ZLIB, .zst/.zstd ZSTD, not \
                  built into this binary) or, without a TFRecord extension, from the first \
                  bytes; Avro files name their codec in their header (null, deflate, snappy, \
                  zstandard, bzip2, xz).\n\n\
                  Any file or folder may be an object store URL (s3://, gs://, az://, \
                  http(s)://), read and written through grist's storage layer: object_store's \
                  environment variables configure it (AWS_ENDPOINT, AWS_ACCESS_KEY_ID, \
                  AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ALLOW_HTTP, GOOGLE_*, AZURE_*), and \
                  GRIST_REMOTE_ATTEMPTS (requests per operation, default 10), \
                  GRIST_REMOTE_REQUEST_TIMEOUT (seconds per request, default 30) and \
                  GRIST_REMOTE_DEADLINE (seconds per operation with its retries, default 180) \
                  how failed requests are retried. Files written to an object store appear \
                  only once complete.\n\n\
                  Data (records, counts, reports) goes to stdout; status (what gen and \
                  index wrote, progress bars, drawn only when stderr is a terminal) and errors \
                  go to stderr. A FILE of `-` is standard input (cat, count, verify, inspect).\n\n\
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
    /// codecs, record counts; FFRecord header and sample CRC-32s; OFRecord
    /// framing and protobuf); report OK or the first bad record, block or
    /// sample.
    Verify(verify::Args),
    /// Write DALI-compatible `<file>.idx` index files next to each TFRecord
    /// file.
    Index(index::Args),
    /// Summarize a file: the features of its first records (TFRecord,
    /// OFRecord, with OFRecord's parts), its schema, codec, blocks and
    /// records (Avro), or its headers: samples, legacy flag, sizes
    /// (FFRecord).
    Inspect(inspect::Args),
    /// Infer the spec file that reads some files (from an Avro writer
    /// schema or a given reader schema, or by sampling records) and print
    /// it as JSON, for `cat --spec` and `bench --spec`.
    Spec(infer::Args),
    /// Measure end-to-end decoding speed (read + framing + checks + parse).
    /// The report (a table, or --json) is the output: stdout.
    Bench(bench::Args),
    /// Convert files of one format into another (TFRecord, Avro, FFRecord,
    /// OFRecord): resumable, shardable, verifiable.
    Convert(convert::Args),
    /// Generate a synthetic dataset (TFRecord, Avro, FFRecord or OFRecord
    /// files plus a spec file).
    Gen(generate::Args),
    /// Write a built-in dataset, read it back, check it and time it. The
    /// report is the output: stdout.
    Demo(demo::Args),
    /// Print a shell completion script on stdout.
    Completions(completions::Args),
}

/// Runs the chosen subcommand.
fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Cat(args) => cat::run(args),
        Command::Count(args) => count::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Index(args) => index::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Spec(args) => infer::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Gen(args) => generate::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Completions(args) => completions::run(args, Cli::command()),
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
            // Standard input by its name, not its temporary file's.
            let message = sources::shown(&message);
            eprintln!("grist: error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// mimalloc keeps freed pages for the next allocation of their size where
/// the system allocator unmaps large blocks and faults them in again (see
/// ARCHITECTURE.md, "grist-cli").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
