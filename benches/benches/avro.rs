//! Avro benchmarks on prod19 (native types, generated here with seed 42):
//! groups `avro_prod19_null` and `avro_prod19_deflate`, each measuring, at
//! batch sizes 64, 256 and 1024, one thread, over the same in-memory file:
//!
//! - `grist`: block read (decompression included) + decode into batches;
//! - `apache_avro_value`: apache-avro's `Reader` → `Value` → columns;
//! - `apache_avro_serde`: apache-avro's `Reader` → `Value` →
//!   `from_value::<Prod19>` → columns;
//! - `serde_avro_fast`: serde_avro_fast's container reader → `Prod19` →
//!   columns;
//! - `arrow_avro`: arrow-avro's `ReaderBuilder` (batch size N) →
//!   `RecordBatch` → columns; `arrow_avro_recordbatch`: the same without
//!   the conversion (arrow-avro's own cost).
//!
//! "Columns" are `grist_benches::avro_peers::Prod19Columns`: plain vectors
//! per feature (COO for the sparse ones) with grist's shape checks; a unit
//! test holds every peer's columns to grist's batches. Throughput is in
//! records. Defaults: 10 samples, 1 s warm-up, 4 s measurement (the dev
//! machine has 2 shared cores); override on the command line, e.g.
//! `cargo bench -p grist-benches --bench avro -- --measurement-time 8`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use grist_avro_tensor::{AvroDecoder, BlockReader, Codec, ReaderOptions};
use grist_benches::avro_peers::{self, Prod19Columns};
use grist_benches::prod19_avro;

const RECORDS: usize = 20_000;

fn sink(c: &Prod19Columns) {
    black_box(c);
}

fn decode(c: &mut Criterion) {
    for (codec, name) in [(Codec::Null, "null"), (Codec::Deflate, "deflate")] {
        let (specs, file) = prod19_avro(RECORDS, 42, codec);
        // grist reads the file in memory without copying it (the peers
        // read the same bytes from a slice).
        let shared = bytes::Bytes::from(file.clone());
        let file = &file[..];
        let mut group = c.benchmark_group(format!("avro_prod19_{name}"));
        group.throughput(Throughput::Elements(RECORDS as u64));
        // The peers take up to a second per pass: one pass per sample.
        group.sampling_mode(SamplingMode::Flat);
        for batch in [64usize, 256, 1024] {
            let mut decoder = AvroDecoder::new(&specs).unwrap();
            group.bench_with_input(BenchmarkId::new("grist", batch), &batch, |b, &batch| {
                b.iter(|| {
                    let reader =
                        BlockReader::from_bytes(shared.clone(), "prod19", ReaderOptions::default());
                    avro_peers::grist(reader.unwrap(), &mut decoder, batch, |b| {
                        black_box(b);
                    })
                    .unwrap()
                })
            });
            let id = |peer: &str| BenchmarkId::new(peer, batch);
            group.bench_with_input(id("apache_avro_value"), &batch, |b, &batch| {
                b.iter(|| avro_peers::apache_value(file, batch, sink).unwrap())
            });
            group.bench_with_input(id("apache_avro_serde"), &batch, |b, &batch| {
                b.iter(|| avro_peers::apache_serde(file, batch, sink).unwrap())
            });
            group.bench_with_input(id("serde_avro_fast"), &batch, |b, &batch| {
                b.iter(|| avro_peers::serde_avro_fast(file, batch, sink).unwrap())
            });
            group.bench_with_input(id("arrow_avro"), &batch, |b, &batch| {
                b.iter(|| avro_peers::arrow_avro(file, batch, sink).unwrap())
            });
            group.bench_with_input(id("arrow_avro_recordbatch"), &batch, |b, &batch| {
                b.iter(|| {
                    avro_peers::arrow_avro_batches(file, batch, |rb| {
                        black_box(rb);
                    })
                    .unwrap()
                })
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = decode
}
criterion_main!(benches);
