//! Shared inputs for grist's criterion benchmarks: deterministic datasets
//! built once per bench run, and the Rust Avro peers ([`avro_peers`]).

pub mod avro_peers;

use std::path::{Path, PathBuf};

use grist_avro_tensor::{Codec, ContainerWriter, WriterOptions, schema_for_specs};
use grist_tensor::{FeatureSpec, SpecFile, synth};
use grist_tfrecord::{Compression, RecordWriter, encode_batch};

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
        for datum in
            grist_avro_tensor::encode_batch(&batch, &spec(specs.clone())).expect("prod19 encodes")
        {
            w.append_datum(&datum).expect("in-memory write");
        }
        done += n;
    }
    (specs, w.finish_into_inner().expect("in-memory write").0)
}

/// One data set of the loader benches: prod19 in one format.
#[derive(Clone, Debug)]
pub struct DataFile {
    /// The bench's name for it (`avro_null`, `tfrecord_gzip`, ...).
    pub name: &'static str,
    /// The file (or, for OFRecord, the folder of parts).
    pub path: PathBuf,
    /// The format's id.
    pub format: &'static str,
    /// The spec that decodes it.
    pub spec: SpecFile,
}

fn spec(features: Vec<FeatureSpec>) -> SpecFile {
    SpecFile {
        features,
        ..SpecFile::default()
    }
}

/// Writes `records` records of prod19 (seed 42) in every format into
/// `dir`: Avro with codecs null and deflate (the Avro record's own types),
/// TFRecord plain and GZIP, an FFRecord file of the tf.Example records and
/// an OFRecord dataset of four parts.
pub fn prod19_files(dir: &Path, records: usize) -> Vec<DataFile> {
    let example_spec = spec(synth::prod19_example_specs());
    let native_spec = spec(synth::prod19_native_specs());
    let batch = synth::prod19(records, 42);
    let examples = encode_batch(&batch, &example_spec).expect("encodes");
    let native = synth::prod19_native(records, 42);
    let datums = grist_avro_tensor::encode_batch(&native, &native_spec).expect("encodes");
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
        out.push(DataFile {
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
        out.push(DataFile {
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
    out.push(DataFile {
        name: "ffrecord",
        path: ffr,
        format: "ffrecord",
        spec: example_spec.clone(),
    });
    let of = dir.join("prod19.ofrecord");
    let mut w = grist_ofrecord::DatasetWriter::create(&of)
        .expect("creates")
        .with_records_per_part((records / 4).max(1) as u64);
    for r in grist_ofrecord::encode_batch(&batch, &example_spec).expect("encodes") {
        w.write_record(&r).expect("writes");
    }
    w.finish().expect("finishes");
    out.push(DataFile {
        name: "ofrecord",
        path: of,
        format: "ofrecord",
        spec: example_spec,
    });
    out
}
