//! Encodes prod19 batches as tf.Examples in a loop, for profilers:
//! `cargo run --release -p grist-benches --example encode_loop -- [reps] [batch]`.

use std::time::Instant;

use grist_tensor::{Encoder, RecordBuf, SpecFile, WriteOptions, synth};
use grist_tfrecord::ExampleEncoder;

fn main() {
    let mut args = std::env::args().skip(1);
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let batch: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1024);
    let spec = SpecFile {
        features: synth::prod19_example_specs(),
        ..SpecFile::default()
    };
    // 20,000 records, as `parse_loop` decodes.
    let batches: Vec<_> = (0..20_000usize.div_ceil(batch))
        .map(|i| synth::prod19(batch, 42 + i as u64))
        .collect();
    let encoder = ExampleEncoder::new(&spec, &WriteOptions::new()).expect("encoder");
    let mut out = RecordBuf::new();
    let start = Instant::now();
    let mut rows = 0;
    for _ in 0..reps {
        for b in &batches {
            out.clear();
            encoder.encode(b, &mut out).expect("encode");
            rows += out.len();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{rows} records in {secs:.3} s: {:.0} records/s",
        rows as f64 / secs
    );
}
