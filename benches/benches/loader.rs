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

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use grist_benches::prod19_files;
use grist_loader::{Epochs, Threads};

const RECORDS: usize = 10_240;
const SHUFFLE_BUFFER: usize = 10_000;

fn loader(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let data = prod19_files(dir.path(), RECORDS);
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
