//! Decodes Avro files to Arrow record batches with arrow-rs's `arrow-avro`
//! (`ReaderBuilder`), one thread, and prints one JSON line: records,
//! seconds, records_per_s, cpu_seconds, records_per_cpu_s.
//!
//! ```sh
//! cargo run --release --manifest-path benches/peers/arrow_avro/Cargo.toml -- \
//!     [--batch-size N] [--min-seconds S] FILE...
//! ```
//!
//! Every field of every record is decoded (arrow-avro has no projection by
//! key expression): the whole file becomes Arrow arrays.

use std::fs::File;
use std::io::BufReader;
use std::time::Instant;

use arrow_avro::reader::ReaderBuilder;

fn cpu_seconds() -> f64 {
    // Nanoseconds on a CPU of this (single) thread, from /proc (Linux):
    // finer than the clock ticks of /proc/self/stat.
    let stat = std::fs::read_to_string("/proc/self/schedstat").unwrap_or_default();
    let ns: f64 = stat.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ns / 1e9
}

fn main() {
    let mut batch = 1024usize;
    let mut min_seconds = 0.0f64;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--batch-size" => batch = args.next().and_then(|v| v.parse().ok()).expect("--batch-size N"),
            "--min-seconds" => {
                min_seconds = args.next().and_then(|v| v.parse().ok()).expect("--min-seconds S")
            }
            _ => files.push(a),
        }
    }
    assert!(!files.is_empty(), "usage: arrow-avro-bench [--batch-size N] [--min-seconds S] FILE...");
    let (start, cpu0) = (Instant::now(), cpu_seconds());
    let (mut records, mut passes) = (0usize, 0usize);
    loop {
        for f in &files {
            let file = BufReader::new(File::open(f).expect("open"));
            let reader = ReaderBuilder::new()
                .with_batch_size(batch)
                .build(file)
                .expect("arrow-avro reader");
            for b in reader {
                let b = b.expect("arrow-avro batch");
                records += b.num_rows();
            }
        }
        passes += 1;
        if start.elapsed().as_secs_f64() >= min_seconds {
            break;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    println!(
        "{{\"tool\": \"arrow-avro\", \"records\": {records}, \"passes\": {passes}, \"seconds\": {seconds:.4}, \"records_per_s\": {:.1}, \"cpu_seconds\": {cpu:.3}, \"records_per_cpu_s\": {:.1}, \"batch_size\": {batch}}}",
        records as f64 / seconds,
        records as f64 / cpu.max(1e-9),
    );
}
