//! Reads Avro object container files into batches with grist-avro-tensor,
//! one thread, pass after pass, and prints the keys `grist bench --json`
//! prints: records, batches, seconds, records_per_s, bytes_per_s, threads,
//! batch_size, median_batch_ms.
//!
//! ```sh
//! cargo run --release -p grist-benches --example avro_file_bench -- \
//!     --spec /work/peers/data/prod19.atds.json --batch-size 256 --min-seconds 10 --json \
//!     /work/peers/data/prod19-null.avro
//! ```
//!
//! `--spec` takes a spec file (`{"features": [...]}`, e.g. the ATDS
//! feature list `prod19.atds.json`). Each pass opens every file, reads its
//! blocks (decompressing them) and decodes them into batches of
//! `--batch-size` records (a file's last batch may be short); it keeps
//! doing whole passes until `--min-seconds` have passed.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use grist_avro_tensor::{AvroDecoder, BlockReader, ReaderOptions};
use grist_benches::avro_peers;
use grist_tensor::SpecFile;

struct Args {
    spec: PathBuf,
    batch: usize,
    min_seconds: f64,
    json: bool,
    files: Vec<PathBuf>,
}

const USAGE: &str = "usage: avro_file_bench --spec SPEC.json [--batch-size N] \
                     [--threads 1] [--min-seconds S] [--json] FILE.avro...";

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut spec, mut batch, mut min_seconds, mut json, mut files) =
        (None, 1024, 3.0, false, Vec::new());
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--spec" => spec = Some(PathBuf::from(value("--spec")?)),
            "--batch-size" => {
                batch = value("--batch-size")?
                    .parse()
                    .ok()
                    .filter(|&b| b > 0)
                    .ok_or("--batch-size takes a positive integer")?
            }
            "--min-seconds" => {
                min_seconds = value("--min-seconds")?
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                    .ok_or("--min-seconds takes a non-negative number")?
            }
            // Accepted for `grist bench` parity: this reader is one thread.
            "--threads" => {
                if value("--threads")? != "1" {
                    return Err("--threads: only 1 (one decode thread) is supported".into());
                }
            }
            "--json" => json = true,
            "-h" | "--help" => return Err(USAGE.into()),
            f if !f.starts_with("--") => files.push(PathBuf::from(f)),
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    let spec = spec.ok_or(USAGE)?;
    if files.is_empty() {
        return Err(USAGE.into());
    }
    Ok(Args {
        spec,
        batch,
        min_seconds,
        json,
        files,
    })
}

fn run(args: &Args) -> Result<(), String> {
    let text =
        std::fs::read_to_string(&args.spec).map_err(|e| format!("{}: {e}", args.spec.display()))?;
    let spec = SpecFile::from_json(&text).map_err(|e| format!("{}: {e}", args.spec.display()))?;
    let mut decoder =
        AvroDecoder::new(&spec.features).map_err(|e| format!("{}: {e}", args.spec.display()))?;
    let mut pass_bytes = 0;
    for f in &args.files {
        pass_bytes += std::fs::metadata(f)
            .map_err(|e| format!("{}: {e}", f.display()))?
            .len();
    }
    let min = Duration::from_secs_f64(args.min_seconds);
    let (mut records, mut batches, mut passes) = (0u64, 0u64, 0u64);
    let mut times = Vec::new();
    let start = Instant::now();
    loop {
        let mut pass_records = 0;
        for f in &args.files {
            let reader =
                BlockReader::open(f, ReaderOptions::default()).map_err(|e| e.to_string())?;
            let mut t = Instant::now();
            pass_records += avro_peers::grist(reader, &mut decoder, args.batch, |b| {
                black_box(b);
                let now = Instant::now();
                times.push(now - t);
                t = now;
                batches += 1;
            })
            .map_err(|e| e.to_string())? as u64;
        }
        records += pass_records;
        passes += 1;
        if start.elapsed() >= min || pass_records == 0 {
            break;
        }
    }
    let seconds = start.elapsed().as_secs_f64().max(1e-9);
    let median_ms = if times.is_empty() {
        0.0
    } else {
        let mid = times.len() / 2;
        times.select_nth_unstable(mid).1.as_secs_f64() * 1e3
    };
    let records_per_s = records as f64 / seconds;
    let bytes_per_s = (pass_bytes * passes) as f64 / seconds;
    if args.json {
        println!(
            "{{\"records\": {records}, \"batches\": {batches}, \"seconds\": {seconds}, \
             \"records_per_s\": {records_per_s}, \"bytes_per_s\": {bytes_per_s}, \
             \"threads\": 1, \"batch_size\": {}, \"median_batch_ms\": {median_ms}}}",
            args.batch
        );
    } else {
        println!(
            "{passes} passes, {records} records in {batches} batches of {} in {seconds:.2} s: \
             {records_per_s:.0} records/s, {:.1} MB/s, median {median_ms:.3} ms per batch",
            args.batch,
            bytes_per_s / 1e6
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    match parse_args().and_then(|a| run(&a)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
