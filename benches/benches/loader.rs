//! grist-loader end to end on prod19, for every format: files in a
//! temporary folder (in the page cache), loaded into batches through the
//! prefetch thread, the shuffle and the parse threads.
//!
//! The data is `synth::prod19(10_240, 42)` written as Avro (codecs null and
//! deflate, the Avro record's own types), TFRecord (plain and GZIP), an
//! FFRecord file of the tf.Example records and an OFRecord dataset of four
//! parts. Group `loader_<format>`, ids `t<threads>_<shuffle|ordered>/<batch>`
//! for batches of 64, 256 and 1024, threads 1, 2 and autotune
//! (`tauto`), shuffle off (`ordered`) and on (`shuffle`: a buffer of
//! 10,000 records for streams, an exact permutation for FFRecord and
//! OFRecord). One iteration is one epoch of an endless loader (so the
//! autotuner's calibration carries over between iterations); throughput
//! in records. Defaults: 10 samples, 0.5 s warm-up, 2 s measurement;
//! override on the command line (`cargo bench -p grist-benches --bench
//! loader -- loader_avro_null`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use grist_avro_tensor::{Codec, ContainerWriter, WriterOptions, schema_for_specs};
use grist_loader::{Epochs, Threads};
use grist_tensor::{SpecFile, synth};
use grist_tfrecord::{Compression, RecordWriter};

const RECORDS: usize = 10_240;
const SHUFFLE_BUFFER: usize = 10_000;

/// One data set of the bench.
struct Data {
    name: &'static str,
    path: PathBuf,
    format: &'static str,
    spec: SpecFile,
}

fn spec(features: Vec<grist_tensor::FeatureSpec>) -> SpecFile {
    SpecFile {
        features,
        ..SpecFile::default()
    }
}

/// Writes prod19 in every format into `dir`.
fn write_all(dir: &Path) -> Vec<Data> {
    let example_spec = spec(synth::prod19_example_specs());
    let native_spec = spec(synth::prod19_native_specs());
    let batch = synth::prod19(RECORDS, 42);
    let examples = grist_tfrecord::encode_batch(&batch, &example_spec).expect("encodes");
    let native = synth::prod19_native(RECORDS, 42);
    let datums = grist_avro_tensor::encode_batch(&native, &native_spec.features).expect("encodes");
    let mut out = Vec::new();

    for (name, codec) in [("avro_null", Codec::Null), ("avro_deflate", Codec::Deflate)] {
        let path = dir.join(format!("{name}.avro"));
        let schema = schema_for_specs(&native_spec.features, "Prod19").expect("schema");
        let mut w =
            ContainerWriter::create(&path, &schema, WriterOptions::default().with_codec(codec))
                .expect("creates");
        for d in &datums {
            w.append_datum(d).expect("writes");
        }
        w.finish().expect("finishes");
        out.push(Data {
            name,
            path,
            format: "avro",
            spec: native_spec.clone(),
        });
    }
    for (name, gzip) in [("tfrecord", false), ("tfrecord_gzip", true)] {
        let path = dir.join(if gzip {
            "prod19.tfrecord.gz"
        } else {
            "prod19.tfrecord"
        });
        let options = grist_tfrecord::WriterOptions::default()
            .with_compression(gzip.then_some(Compression::Gzip));
        let mut w = RecordWriter::create(&path, options).expect("creates");
        for e in &examples {
            w.write_record(e).expect("writes");
        }
        w.finish().expect("finishes");
        out.push(Data {
            name,
            path,
            format: "tfrecord",
            spec: example_spec.clone(),
        });
    }
    let ffr = dir.join("prod19.ffr");
    let mut w = grist_ffrecord::FfrWriter::create(&ffr, Default::default()).expect("creates");
    for e in &examples {
        w.write_sample(e).expect("writes");
    }
    w.finish().expect("finishes");
    out.push(Data {
        name: "ffrecord",
        path: ffr,
        format: "ffrecord",
        spec: example_spec.clone(),
    });
    let of = dir.join("prod19.ofrecord");
    let mut w = grist_ofrecord::DatasetWriter::create(&of)
        .expect("creates")
        .with_records_per_part((RECORDS / 4) as u64);
    for r in grist_ofrecord::encode_batch(&batch, &example_spec.features).expect("encodes") {
        w.write_record(&r).expect("writes");
    }
    w.finish().expect("finishes");
    out.push(Data {
        name: "ofrecord",
        path: of,
        format: "ofrecord",
        spec: example_spec,
    });
    out
}

fn loader(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let data = write_all(dir.path());
    for d in &data {
        let mut group = c.benchmark_group(format!("loader_{}", d.name));
        group.throughput(Throughput::Elements(RECORDS as u64));
        for shuffle in [false, true] {
            for threads in [Threads::Fixed(1), Threads::Fixed(2), Threads::Autotune] {
                let t = match threads {
                    Threads::Fixed(n) => n.to_string(),
                    _ => "auto".into(),
                };
                let id = format!("t{t}_{}", if shuffle { "shuffle" } else { "ordered" });
                for batch in [64usize, 256, 1024] {
                    let format = grist::registry().get(d.format).expect("a format");
                    let mut l = grist::loader()
                        .with_path(&d.path)
                        .with_format(format)
                        .with_spec_file(d.spec.clone())
                        .with_batch_size(batch)
                        .with_threads(threads)
                        .with_shuffle(shuffle)
                        .with_shuffle_buffer(SHUFFLE_BUFFER)
                        .with_epochs(Epochs::Endless)
                        .build()
                        .expect("loader");
                    group.bench_with_input(BenchmarkId::new(&id, batch), &batch, |b, _| {
                        b.iter_custom(|iters| {
                            let start = Instant::now();
                            for _ in 0..iters {
                                // One epoch: the batch sizes divide it.
                                let mut records = 0;
                                while records < RECORDS {
                                    let batch = l.next_batch().expect("endless").expect("decodes");
                                    records += batch.rows();
                                    l.recycle(batch);
                                }
                            }
                            start.elapsed()
                        })
                    });
                }
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = loader
}
criterion_main!(benches);
