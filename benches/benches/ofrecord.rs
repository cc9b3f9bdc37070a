//! OFRecord decode of prod19 records next to tf.Example decode of the
//! same data, in the same run.
//!
//! The data is `synth::prod19(20_000, 42)`, encoded once as OFRecords
//! (`grist_ofrecord::encode_batch`) and once as tf.Examples
//! (`grist_tfrecord::encode_batch`), both with
//! `synth::prod19_example_specs()`, each format's records back to back in
//! one buffer (as in a file); each decoder decodes its records into
//! batches of 64, 256 and 1024 with those specs, one thread. Group
//! `prod19_decode`: `ofrecord/N` and `tf_example/N`, in records per second
//! (one iteration decodes all 20,000 records). Defaults: 10 samples, 1 s
//! warm-up, 4 s measurement; override on the command line.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use grist_ofrecord::OfRecordDecoder;
use grist_tensor::{SpecFile, synth};
use grist_tfrecord::ExampleDecoder;

const RECORDS: usize = 20_000;

fn decode(c: &mut Criterion) {
    let batch = synth::prod19(RECORDS, 42);
    let specs = synth::prod19_example_specs();
    let spec_file = SpecFile {
        features: specs.clone(),
        ..SpecFile::default()
    };
    // Each format's records back to back in one buffer, as a file's chunk
    // holds them (separately allocated records would land wherever the
    // allocator put them, and a decoder would pay for that layout).
    let contiguous = |records: Vec<Vec<u8>>| -> (Vec<u8>, Vec<std::ops::Range<usize>>) {
        let mut data = Vec::with_capacity(records.iter().map(Vec::len).sum());
        let spans = records
            .iter()
            .map(|r| {
                data.extend_from_slice(r);
                data.len() - r.len()..data.len()
            })
            .collect();
        (data, spans)
    };
    let (of_data, of_spans) =
        contiguous(grist_ofrecord::encode_batch(&batch, &spec_file).expect("prod19 encodes"));
    let (ex_data, ex_spans) =
        contiguous(grist_tfrecord::encode_batch(&batch, &spec_file).expect("prod19 encodes"));
    let ofrecords: Vec<&[u8]> = of_spans.iter().map(|r| &of_data[r.clone()]).collect();
    let examples: Vec<&[u8]> = ex_spans.iter().map(|r| &ex_data[r.clone()]).collect();
    let size = |records: &[&[u8]]| records.iter().map(|r| r.len()).sum::<usize>();
    eprintln!(
        "prod19 decode bench: {RECORDS} records; OFRecord {} bytes, tf.Example {} bytes",
        size(&ofrecords),
        size(&examples)
    );
    let file: Arc<str> = "prod19".into();

    // Both decoders give the same batch.
    let mut of = OfRecordDecoder::new(&specs).expect("specs");
    let mut ex = ExampleDecoder::from_spec_file(&spec_file).expect("specs");
    let a = of
        .decode_batch(&file, 0, ofrecords.iter().copied())
        .expect("decodes");
    let b = ex
        .decode_batch(&file, 0, examples.iter().copied())
        .expect("decodes");
    assert_eq!(a, b, "OFRecord and tf.Example decode to different batches");
    assert_eq!(a, batch);

    let mut group = c.benchmark_group("prod19_decode");
    group.throughput(Throughput::Elements(RECORDS as u64));
    for n in [64usize, 256, 1024] {
        group.bench_with_input(BenchmarkId::new("ofrecord", n), &n, |b, &n| {
            b.iter(|| {
                for (i, chunk) in ofrecords.chunks(n).enumerate() {
                    let out = of
                        .decode_batch(&file, (i * n) as u64, chunk.iter().copied())
                        .expect("decodes");
                    of.recycle(black_box(out));
                }
            })
        });
        group.bench_with_input(BenchmarkId::new("tf_example", n), &n, |b, &n| {
            b.iter(|| {
                for (i, chunk) in examples.chunks(n).enumerate() {
                    let out = ex
                        .decode_batch(&file, (i * n) as u64, chunk.iter().copied())
                        .expect("decodes");
                    ex.recycle(black_box(out));
                }
            })
        });
    }
    group.finish();
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
