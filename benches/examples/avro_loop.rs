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
    let mut decoder = AvroDecoder::new(&specs).expect("specs");
    let start = Instant::now();
    let mut rows = 0;
    for _ in 0..reps {
        let reader =
            BlockReader::new(&file[..], "prod19", ReaderOptions::default()).expect("header");
        rows += avro_peers::grist(reader, &mut decoder, batch, |b| {
            std::hint::black_box(b);
        })
        .expect("decode");
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{rows} records in {secs:.3} s: {:.0} records/s, {:.0} MB/s of Avro",
        rows as f64 / secs,
        (file.len() * reps) as f64 / secs / 1e6
    );
}
