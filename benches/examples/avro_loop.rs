//! Decodes prod19 Avro blocks in a loop, for profilers:
//! `cargo run --release -p grist-benches --example avro_loop -- [reps] [batch] [null|deflate]`.

use std::time::Instant;

use grist_avro_tensor::{AvroDecoder, BlockReader, Codec, ReaderOptions};
use grist_benches::{avro_peers, prod19_avro};

fn main() {
    let mut args = std::env::args().skip(1);
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let batch: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1024);
    let codec = match args.next().as_deref() {
        Some("deflate") => Codec::Deflate,
        _ => Codec::Null,
    };
    let (specs, file) = prod19_avro(20_000, 42, codec);
    let file = bytes::Bytes::from(file);
    let mut decoder = AvroDecoder::new(&specs).expect("specs");
    let start = Instant::now();
    let cpu_start = cpu_seconds();
    let mut rows = 0;
    for _ in 0..reps {
        let reader = BlockReader::from_bytes(file.clone(), "prod19", ReaderOptions::default())
            .expect("header");
        rows += avro_peers::grist(reader, &mut decoder, batch, |b| {
            std::hint::black_box(b);
        })
        .expect("decode");
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_start;
    println!(
        "{rows} records in {secs:.3} s: {:.0} records/s, {:.0} MB/s of Avro; {:.0} records per CPU-second",
        rows as f64 / secs,
        (file.len() * reps) as f64 / secs / 1e6,
        rows as f64 / cpu,
    );
}

/// User + system CPU time of this process so far (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which ends with ')'): utime and stime
    // are the 12th and 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let ticks: f64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<f64>().ok())
        .sum();
    ticks / 100.0
}
