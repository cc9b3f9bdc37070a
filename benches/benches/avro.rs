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
use grist_avro_tensor::{
    AvroDecoder, BlockDecoder, BlockReader, Codec, Decoded, Header, Location, ReaderOptions,
};
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

/// The stored (deflated) data of each block of a container file.
fn stored_blocks(file: &[u8]) -> Vec<&[u8]> {
    let limits = grist_tensor::Limits::default();
    let Ok(Decoded::Complete { value, len }) = Header::parse(file, "prod19", &limits) else {
        panic!("prod19: no header")
    };
    let mut decoder = BlockDecoder::new("prod19", value.sync).with_position(0, len as u64);
    let (mut at, mut blocks) = (len, Vec::new());
    while let Ok(Decoded::Complete { value, len }) = decoder.decode(&file[at..]) {
        blocks.push(&file[at + value.data.start..at + value.data.end]);
        at += len;
    }
    blocks
}

fn inflate(c: &mut Criterion) {
    let (_, file) = prod19_avro(RECORDS, 42, Codec::Deflate);
    let blocks = stored_blocks(&file);
    let (limits, at) = (
        grist_tensor::Limits::default(),
        Location::block("prod19", 0),
    );
    let inflated: usize = blocks
        .iter()
        .map(|b| Codec::Deflate.decompress(b, 0, &limits, &at).unwrap().len())
        .sum();
    let mut group = c.benchmark_group("avro_prod19_inflate");
    group.throughput(Throughput::Bytes(inflated as u64));
    group.bench_function("one_at_a_time_libdeflate", |b| {
        b.iter(|| {
            for block in &blocks {
                black_box(
                    Codec::Deflate
                        .decompress_bytes(block, 0, &limits, &at)
                        .unwrap(),
                );
            }
        })
    });
    group.bench_function("two_at_a_time_grist", |b| {
        b.iter(|| {
            for pair in blocks.chunks(2) {
                match pair {
                    [x, y] => {
                        let [x, y] =
                            Codec::Deflate.decompress_two_bytes([x, y], 0, &limits, [&at, &at]);
                        black_box((x.unwrap(), y.unwrap()));
                    }
                    [x] => {
                        black_box(Codec::Deflate.decompress_bytes(x, 0, &limits, &at).unwrap());
                    }
                    _ => unreachable!(),
                }
            }
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = decode, inflate
}
criterion_main!(benches);
