//! Shared inputs for grist's criterion benchmarks: deterministic datasets
//! built once per bench run, and the Rust Avro peers ([`avro_peers`]).

pub mod avro_peers;

use grist_avro_tensor::{Codec, ContainerWriter, WriterOptions};
use grist_tensor::{FeatureSpec, SpecFile, synth};
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

/// prod19 with its native Avro types as an in-memory object container
/// file (sync interval 64,000 bytes, as Java's writer), with its specs.
pub fn prod19_avro(records: usize, seed: u64, codec: Codec) -> (Vec<FeatureSpec>, Vec<u8>) {
    let specs = synth::prod19_native_specs();
    let schema = grist_avro_tensor::schema_for_specs(&specs, "Prod19").expect("prod19 schema");
    let options = WriterOptions::default()
        .with_codec(codec)
        .with_sync_interval(64_000);
    let mut w = ContainerWriter::new(Vec::new(), &schema, options).expect("in-memory writer");
    let mut done = 0;
    while done < records {
        let n = (records - done).min(10_000);
        let batch = synth::prod19_native(n, seed.wrapping_add(done as u64));
        for datum in grist_avro_tensor::encode_batch(&batch, &specs).expect("prod19 encodes") {
            w.append_datum(&datum).expect("in-memory write");
        }
        done += n;
    }
    (specs, w.finish_into_inner().expect("in-memory write").0)
}
