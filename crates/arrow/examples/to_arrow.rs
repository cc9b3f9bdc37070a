//! Batch → RecordBatch on prod19 batches, next to the cost of decoding
//! them: a sanity check that the conversion is far under the decode.
//!
//! `cargo run --release -p grist-arrow --example to_arrow [ROWS] [BATCHES]`
//!
//! It writes prod19 as TFRecord to a temporary folder, reads it back with
//! grist's loader (timing the decode), then converts each decoded batch
//! to Arrow (timing the conversion). Numbers on a busy machine are noisy;
//! record real ones in docs/BENCHMARKS.md with the command.

use std::time::{Duration, Instant};

use grist::io::{Address, Storage};
use grist_tensor::synth::{prod19, prod19_example_specs};
use grist_tensor::{RecordBuf, SpecFile, WriteOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let rows: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1024);
    let batches: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(20);
    let spec = SpecFile {
        features: prod19_example_specs(),
        ..SpecFile::default()
    };
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("prod19.tfrecord");
    let format = grist::registry().get("tfrecord")?;
    let options = WriteOptions::new();
    let encoder = format.encoder(&spec, &options)?;
    let mut sink = format.create(
        &Storage::new(),
        &Address::from(path.as_path()),
        &spec,
        &options,
    )?;
    let mut records = RecordBuf::new();
    for seed in 0..batches as u64 {
        records.clear();
        encoder.encode(&prod19(rows, seed), &mut records)?;
        for r in records.iter() {
            sink.write(r)?;
        }
    }
    sink.finish()?;

    let start = Instant::now();
    let decoded: Vec<_> = grist::loader()
        .with_path(&path)
        .with_spec_file(spec.clone())
        .with_batch_size(rows)
        .build()?
        .collect::<Result<_, _>>()?;
    let decode = start.elapsed();

    let mut convert = Duration::ZERO;
    let mut cells = 0usize;
    for batch in decoded {
        let start = Instant::now();
        let arrow = grist_arrow::to_record_batch(batch, &spec)?;
        convert += start.elapsed();
        cells += arrow.num_rows() * arrow.num_columns();
    }
    let n = (rows * batches) as f64;
    println!(
        "{batches} batches of {rows} prod19 records ({cells} cells): decode {:.1} ms ({:.0} records/s), to Arrow {:.2} ms ({:.1}% of decode)",
        decode.as_secs_f64() * 1e3,
        n / decode.as_secs_f64(),
        convert.as_secs_f64() * 1e3,
        100.0 * convert.as_secs_f64() / decode.as_secs_f64(),
    );
    Ok(())
}
