//! Decodes prod19 Avro blocks in a loop, for profilers:
//! `cargo run --release -p grist-benches --example avro_loop -- [reps] [batch] [null|deflate]`.

use std::time::Instant;

use grist_avro_tensor::{AvroDecoder, BlockReader, Codec, ReaderOptions};
use grist_benches::prod19_avro;

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
        let mut reader =
            BlockReader::new(&file[..], "prod19", ReaderOptions::default()).expect("header");
        decoder
            .add_schema(reader.name().clone(), &reader.header().schema_json)
            .expect("plan");
        let mut out = decoder.new_batch(batch);
        while let Some(b) = reader.next_block().expect("block") {
            let n = b.record_count as usize;
            let mut row = 0;
            while row < n {
                let take = (batch - out.rows()).min(n - row);
                decoder
                    .decode_block(
                        reader.name(),
                        b.index,
                        b.first_record,
                        &b.data,
                        n,
                        row..row + take,
                        &mut out,
                    )
                    .expect("decode");
                row += take;
                if out.rows() == batch {
                    let done = decoder.finish(&mut out).expect("finish");
                    rows += done.rows();
                    decoder.recycle(done);
                    out = decoder.recycled_batch(batch);
                }
            }
        }
        rows += decoder.finish(&mut out).expect("finish").rows();
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{rows} records in {secs:.3} s: {:.0} records/s, {:.0} MB/s of Avro",
        rows as f64 / secs,
        (file.len() * reps) as f64 / secs / 1e6
    );
}
