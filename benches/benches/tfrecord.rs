//! TFRecord benchmarks on prod19-shaped tf.Examples: parse throughput per
//! batch size, and framing + CRC next to raw CRC32C over the same bytes.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use grist_benches::{prod19_examples, tfrecord_bytes};
use grist_tfrecord::{
    Compression, Decoded, ExampleDecoder, FrameDecoder, ReaderOptions, RecordReader,
};

const RECORDS: usize = 20_000;

fn parse(c: &mut Criterion) {
    let (spec, records) = prod19_examples(RECORDS, 42);
    let bytes: usize = records.iter().map(Vec::len).sum();
    let file: Arc<str> = "prod19".into();
    let mut group = c.benchmark_group("tf_example_parse_prod19");
    group.throughput(Throughput::Elements(RECORDS as u64));
    for batch in [64usize, 256, 1024] {
        group.bench_with_input(BenchmarkId::new("batch", batch), &batch, |b, &batch| {
            let mut decoder = ExampleDecoder::from_spec_file(&spec).unwrap();
            b.iter(|| {
                for (i, chunk) in records.chunks(batch).enumerate() {
                    let out = decoder
                        .decode_batch(&file, (i * batch) as u64, chunk.iter().map(|r| &r[..]))
                        .unwrap();
                    black_box(out);
                }
            })
        });
    }
    group.finish();
    let mut group = c.benchmark_group("tf_example_parse_prod19_bytes");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("batch/1024", |b| {
        let mut decoder = ExampleDecoder::from_spec_file(&spec).unwrap();
        b.iter(|| {
            for chunk in records.chunks(1024) {
                black_box(
                    decoder
                        .decode_batch(&file, 0, chunk.iter().map(|r| &r[..]))
                        .unwrap(),
                );
            }
        })
    });
    group.finish();
}

fn framing(c: &mut Criterion) {
    let (_, records) = prod19_examples(RECORDS, 7);
    let data = tfrecord_bytes(&records);
    let mut group = c.benchmark_group("tfrecord_framing_prod19");
    group.throughput(Throughput::Bytes(data.len() as u64));
    group.bench_function("crc32c_raw", |b| {
        b.iter(|| black_box(crc32c::crc32c(&data)))
    });
    // Framing + both CRCs, zero-copy over the bytes (the sans-I/O parser).
    group.bench_function("frames_with_crc", |b| {
        b.iter(|| {
            let mut dec = FrameDecoder::new("mem");
            let (mut pos, mut n) = (0, 0usize);
            while let Decoded::Frame(f) = dec.decode(&data[pos..]).unwrap() {
                n += f.payload.len();
                pos += f.len;
            }
            black_box(n)
        })
    });
    for check in [true, false] {
        let name = if check {
            "read_with_crc"
        } else {
            "read_no_crc"
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                let options = ReaderOptions::default().with_check_crc(check);
                let mut reader =
                    RecordReader::new(&data[..], "mem", Compression::None, options).unwrap();
                let mut n = 0usize;
                while let Some(r) = reader.next_record().unwrap() {
                    n += r.len();
                }
                black_box(n)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, parse, framing);
criterion_main!(benches);
