//! Converts files to another format with `grist::convert` and prints what
//! it did as one JSON line: records, seconds, records_per_s, bytes, files,
//! threads, the target and its options, cpu_seconds and
//! records_per_cpu_s (the process's CPU time, all threads). It makes the inputs of
//! `benches/peers/convert_readback.py` (the outputs read back by the
//! reference tools) and measures grist's side of
//! `benches/peers/side_by_side_convert.sh`.
//!
//! ```sh
//! cargo run --release -p grist-benches --example convert -- \
//!     --spec /work/peers/data/prod19.spec.json --to avro --codec deflate --threads 1 \
//!     -o /tmp/out /work/peers/data/prod19.tfrecord
//! ```
//!
//! `--spec` takes a spec file (`{"features": [...]}`: the tf.Example
//! `prod19.spec.json` or the ATDS `prod19.atds.json`). `--to` is a
//! registry id (`tfrecord`, `avro`, `ffrecord`, `ofrecord`); `--codec`
//! (Avro), `--compression` (TFRecord), `--payload` (FFRecord) and
//! `--lossy` are the target's `WriteOptions`. `--threads N` is the
//! encoding threads (reading and writing take one more each). The output
//! folder is replaced when it exists (`--force` is implied: this is a
//! bench). `--rounds R` converts R times and prints one line per round.

use std::path::PathBuf;
use std::process::ExitCode;

/// The CLI's allocator (see its `main.rs`), so that this conversion and
/// `grist bench`, which side_by_side_convert.sh sets against each other,
/// run on the same one.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::Instant;

use grist::tensor::{Lossy, SpecFile, WriteOptions};

struct Args {
    spec: PathBuf,
    to: String,
    options: WriteOptions,
    options_text: Vec<String>,
    threads: usize,
    batch: usize,
    records_per_file: u64,
    rounds: usize,
    out: PathBuf,
    inputs: Vec<PathBuf>,
}

const USAGE: &str = "usage: convert --spec SPEC.json --to tfrecord|avro|ffrecord|ofrecord \
                     [--codec C] [--compression C] [--payload example|ofrecord] [--lossy] \
                     [--threads N] [--batch-size N] [--records-per-file N] [--rounds R] \
                     -o OUT INPUT...";

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut a = Args {
        spec: PathBuf::new(),
        to: String::new(),
        options: WriteOptions::new(),
        options_text: Vec::new(),
        threads: 1,
        batch: grist::DEFAULT_BATCH,
        records_per_file: 1_000_000,
        rounds: 1,
        out: PathBuf::new(),
        inputs: Vec::new(),
    };
    let positive = |v: String, name: &str| {
        v.parse::<u64>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or(format!("{name} takes a positive integer"))
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--spec" => a.spec = value("--spec")?.into(),
            "--to" => a.to = value("--to")?,
            "-o" | "--out" => a.out = value("-o")?.into(),
            "--codec" => {
                let v = value("--codec")?;
                a.options_text.push(format!("codec={v}"));
                a.options = a.options.with_codec(v);
            }
            "--compression" => {
                let v = value("--compression")?;
                a.options_text.push(format!("compression={v}"));
                a.options = a.options.with_compression(v);
            }
            "--payload" => {
                let v = value("--payload")?;
                a.options_text.push(format!("payload={v}"));
                a.options = a.options.with_payload(v);
            }
            "--lossy" => {
                a.options_text.push("lossy".into());
                a.options = a.options.with_lossy(Lossy::Allow);
            }
            "--threads" => a.threads = positive(value("--threads")?, "--threads")? as usize,
            "--batch-size" => a.batch = positive(value("--batch-size")?, "--batch-size")? as usize,
            "--records-per-file" => {
                a.records_per_file = positive(value("--records-per-file")?, "--records-per-file")?
            }
            "--rounds" => a.rounds = positive(value("--rounds")?, "--rounds")? as usize,
            "-h" | "--help" => return Err(USAGE.into()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}\n{USAGE}")),
            _ => a.inputs.push(arg.into()),
        }
    }
    if a.spec.as_os_str().is_empty() || a.to.is_empty() || a.out.as_os_str().is_empty() {
        return Err(format!("--spec, --to and -o are required\n{USAGE}"));
    }
    if a.inputs.is_empty() {
        return Err(format!("no input\n{USAGE}"));
    }
    Ok(a)
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let spec = SpecFile::from_json(&std::fs::read_to_string(&args.spec)?)?;
    let target = grist::ConvertTarget::new(
        grist::registry().get(&args.to)?,
        args.out.to_string_lossy().into_owned(),
    )
    .with_options(args.options.clone())
    .with_threads(args.threads)
    .with_batch_size(args.batch)
    .with_records_per_file(args.records_per_file);
    for round in 0..args.rounds {
        if args.out.exists() {
            std::fs::remove_dir_all(&args.out)?;
        }
        let (start, cpu_start) = (Instant::now(), cpu_seconds());
        let report = grist::convert(&args.inputs, Some(&spec), &target)?;
        let seconds = start.elapsed().as_secs_f64();
        let cpu = cpu_seconds().zip(cpu_start).map(|(b, a)| b - a);
        println!(
            "{{\"tool\": \"grist-convert\", \"round\": {round}, \"to\": \"{}\", \"options\": \"{}\", \
             \"records\": {}, \"seconds\": {seconds:.4}, \"records_per_s\": {:.1}, \"bytes\": {}, \
             \"files\": {}, \"threads\": {}, \"batch_size\": {}, \"cpu_seconds\": {}, \
             \"records_per_cpu_s\": {}}}",
            args.to,
            args.options_text.join(","),
            report.records,
            report.records as f64 / seconds.max(1e-9),
            report.bytes,
            report.files.len(),
            args.threads,
            args.batch,
            cpu.map_or("null".into(), |c| format!("{c:.3}")),
            cpu.filter(|&c| c > 0.0).map_or("null".into(), |c| format!(
                "{:.1}",
                report.records as f64 / c
            )),
        );
    }
    Ok(())
}

/// The CPU time of this process so far (all its threads, user and
/// system), from `/proc/self/stat` (Linux; `None` elsewhere), in clock
/// ticks of 1/100 s.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let (user, system): (u64, u64) = (fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?);
    Some((user + system) as f64 / 100.0)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut msg = e.to_string();
            let mut source = e.source();
            while let Some(s) = source {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                source = s.source();
            }
            eprintln!("convert: {msg}");
            ExitCode::FAILURE
        }
    }
}
