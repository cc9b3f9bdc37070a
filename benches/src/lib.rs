//! Shared inputs for grist's criterion benchmarks: deterministic datasets
//! built once per bench run.

use grist_tensor::{SpecFile, synth};
use grist_tfrecord::{RecordWriter, encode_batch};

/// prod19 (`shared/bench/prod19.md`) as serialized tf.Example records,
/// with the spec that parses them.
pub fn prod19_examples(records: usize, seed: u64) -> (SpecFile, Vec<Vec<u8>>) {
    let spec = SpecFile {
        features: synth::prod19_example_specs(),
        ..SpecFile::default()
    };
    let mut out = Vec::with_capacity(records);
    let mut done = 0;
    while done < records {
        let n = (records - done).min(10_000);
        let batch = synth::prod19(n, seed.wrapping_add(done as u64));
        out.extend(encode_batch(&batch, &spec).expect("prod19 encodes"));
        done += n;
    }
    (spec, out)
}

/// The records framed as one uncompressed TFRecord file, in memory.
pub fn tfrecord_bytes(records: &[Vec<u8>]) -> Vec<u8> {
    let mut w = RecordWriter::new(Vec::new());
    for r in records {
        w.write_record(r).expect("in-memory write");
    }
    w.finish_into_inner().expect("in-memory write").0
}
