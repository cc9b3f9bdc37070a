//! Avro benchmarks on prod19 (native types): decode throughput per batch
//! size and codec, next to the Rust peers measured in the same run:
//! apache-avro's generic `Value` reader converted to the same columns.

use std::hint::black_box;

use apache_avro::types::Value;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use grist_avro_tensor::{AvroDecoder, BlockReader, Codec, ReaderOptions};
use grist_benches::prod19_avro;

const RECORDS: usize = 20_000;

/// grist: every block decoded into batches of `batch`.
fn grist(file: &[u8], decoder: &mut AvroDecoder, batch: usize) -> usize {
    let mut reader = BlockReader::new(file, "prod19", ReaderOptions::default()).unwrap();
    decoder
        .add_schema(reader.name().clone(), &reader.header().schema_json)
        .unwrap();
    let mut rows = 0;
    let mut out = decoder.recycled_batch(batch);
    while let Some(b) = reader.next_block().unwrap() {
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
                .unwrap();
            row += take;
            if out.rows() == batch {
                let done = decoder.finish(&mut out).unwrap();
                rows += done.rows();
                decoder.recycle(black_box(done));
                out = decoder.recycled_batch(batch);
            }
        }
    }
    rows + decoder.finish(&mut out).unwrap().rows()
}

/// The peer: apache-avro's generic reader, each record's values pushed
/// into per-feature column vectors (the work a tensor batch needs).
fn apache_value(file: &[u8]) -> usize {
    let reader = apache_avro::Reader::new(file).unwrap();
    let mut f32s: Vec<f32> = Vec::new();
    let mut f64s: Vec<f64> = Vec::new();
    let mut i64s: Vec<i64> = Vec::new();
    let mut rows = 0;
    fn walk(v: &Value, f32s: &mut Vec<f32>, f64s: &mut Vec<f64>, i64s: &mut Vec<i64>) {
        match v {
            Value::Int(x) => i64s.push(*x as i64),
            Value::Long(x) => i64s.push(*x),
            Value::Float(x) => f32s.push(*x),
            Value::Double(x) => f64s.push(*x),
            Value::Boolean(x) => i64s.push(*x as i64),
            Value::Array(items) => items.iter().for_each(|i| walk(i, f32s, f64s, i64s)),
            Value::Record(fields) => fields.iter().for_each(|(_, f)| walk(f, f32s, f64s, i64s)),
            _ => {}
        }
    }
    for record in reader {
        walk(&record.unwrap(), &mut f32s, &mut f64s, &mut i64s);
        rows += 1;
        if rows % 1024 == 0 {
            black_box((&f32s, &f64s, &i64s));
            f32s.clear();
            f64s.clear();
            i64s.clear();
        }
    }
    rows
}

fn decode(c: &mut Criterion) {
    for (codec, name) in [(Codec::Null, "null"), (Codec::Deflate, "deflate")] {
        let (specs, file) = prod19_avro(RECORDS, 42, codec);
        let mut group = c.benchmark_group(format!("avro_prod19_{name}"));
        group.throughput(Throughput::Elements(RECORDS as u64));
        for batch in [64usize, 256, 1024] {
            let mut decoder = AvroDecoder::new(&specs).unwrap();
            group.bench_with_input(BenchmarkId::new("grist", batch), &batch, |b, &batch| {
                b.iter(|| black_box(grist(&file, &mut decoder, batch)))
            });
        }
        group.bench_function("apache_avro_value/1024", |b| {
            b.iter(|| black_box(apache_value(&file)))
        });
        group.finish();
    }
}

criterion_group!(benches, decode);
criterion_main!(benches);
