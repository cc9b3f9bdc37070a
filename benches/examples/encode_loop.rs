//! Encodes prod19 batches as tf.Examples in a loop, for profilers:
//! `cargo run --release -p grist-benches --example encode_loop -- [reps] [batch]`.

use std::sync::Arc;
use std::time::Instant;

use grist_benches::prod19_examples;
use grist_tensor::{Encoder, RecordBuf, WriteOptions};
use grist_tfrecord::{ExampleDecoder, ExampleEncoder};

fn main() {
    let mut args = std::env::args().skip(1);
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let batch: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1024);
    let (spec, records) = prod19_examples(20_000, 42);
    let file: Arc<str> = "prod19".into();
    let mut decoder = ExampleDecoder::from_spec_file(&spec).expect("spec");
    let batches: Vec<_> = records
        .chunks(batch)
        .map(|chunk| {
            decoder
                .decode_batch(&file, 0, chunk.iter().map(|r| &r[..]))
                .expect("decode")
        })
        .collect();
    let encoder = ExampleEncoder::new(&spec, &WriteOptions::new()).expect("encoder");
    let mut out = RecordBuf::new();
    let start = Instant::now();
    let (mut rows, mut bytes) = (0, 0);
    for _ in 0..reps {
        for b in &batches {
            out.clear();
            encoder.encode(b, &mut out).expect("encode");
            rows += out.len();
            bytes += out.iter().map(<[u8]>::len).sum::<usize>();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{rows} records ({bytes} bytes) in {secs:.3} s: {:.0} records/s",
        rows as f64 / secs
    );
}
