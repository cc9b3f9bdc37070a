//! Spec inference over FFRecord samples: tf.Example payloads (the
//! tfrecord corpus stored as samples, compared with TensorFlow's tensors
//! where the specs agree), OFRecord payloads (prod19), raw payloads
//! refused, empty and damaged files named.

use std::path::Path;

use grist_ffrecord::{
    FfrFormat, FfrReader, FfrWriter, Payload, PayloadDecoder, ReaderOptions, WriterOptions,
};
use grist_tensor::json::{batch_to_json, compare_json};
use grist_tensor::synth::{prod19, prod19_example_specs};
use grist_tensor::{
    DType, FeatureSpec, Format, InferOptions, Inferred, Input, SpecFile, TensorError,
};
use grist_testkit::{corpus, temp_dir};
use grist_tfrecord::{ExampleBuilder, ExampleDecoder, RecordReader};

fn write(path: &Path, samples: &[Vec<u8>]) {
    let mut w = FfrWriter::create(path, WriterOptions::default()).unwrap();
    for s in samples {
        w.write_sample(s).unwrap();
    }
    w.finish().unwrap();
}

fn infer(
    payload: Payload,
    path: &Path,
    options: &InferOptions,
) -> Result<Inferred, grist_tensor::BoxError> {
    FfrFormat::with_payload(payload).infer_spec(&[Input::local(path)], options)
}

#[test]
fn tf_example_samples_read_as_tensorflow_did() {
    let dir = temp_dir();
    let (mut cases, mut compared) = (0, 0);
    for case in corpus::cases("tfrecord") {
        if !case.is_ok() || case.parses().is_empty() {
            continue;
        }
        let mut records = Vec::new();
        for f in &case.files {
            let mut reader = RecordReader::open(f, Default::default()).unwrap();
            while let Some(r) = reader.next_record().unwrap() {
                records.push(r.to_vec());
            }
        }
        if records.is_empty() {
            continue;
        }
        let path = dir.path().join(format!("{}.ffr", case.name));
        write(&path, &records);
        let inferred = infer(Payload::Example, &path, &InferOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let spec = &inferred.spec;
        let sequence = case.parses()[0]["api"] == "tf.io.parse_sequence_example";
        assert_eq!(spec.sequence, sequence, "{}", case.name);
        let reader = FfrReader::open(&path, ReaderOptions::default()).unwrap();
        let mut decoder = PayloadDecoder::Example(ExampleDecoder::from_spec_file(spec).unwrap());
        for parse in case.parses() {
            if parse["outcome"] != "ok" {
                continue;
            }
            let own = SpecFile::from_value(parse).unwrap();
            let size = own.batch_size.unwrap() as u64;
            let want = parse["batches"].as_array().unwrap();
            let sections: &[(&str, &[FeatureSpec], &[FeatureSpec])] = if sequence {
                &[
                    ("context", &own.context_features, &spec.context_features),
                    (
                        "feature_lists",
                        &own.sequence_features,
                        &spec.sequence_features,
                    ),
                ]
            } else {
                &[("outputs", &own.features, &spec.features)]
            };
            let n = reader.len();
            for (b, first) in (0..n).step_by(size as usize).enumerate() {
                let indices: Vec<u64> = (first..(first + size).min(n)).collect();
                let got = decoder
                    .decode_samples(&reader.read(&indices).unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", case.name));
                let got = batch_to_json(&got);
                for (section, own, inferred) in sections {
                    let json = |s: &[FeatureSpec]| serde_json::to_value(s).unwrap();
                    for name in corpus::agreeing_features(&json(own), &json(inferred)) {
                        compare_json(&want[b][section][&name], &got[section][&name])
                            .unwrap_or_else(|m| panic!("{} {name} batch {b}: {m}", case.name));
                        compared += 1;
                    }
                }
            }
        }
        cases += 1;
    }
    assert!(
        cases >= 8 && compared >= 40,
        "{cases} cases, {compared} comparisons"
    );
}

/// prod19 as OFRecord payloads: the dense features are inferred exactly
/// and read back as written.
#[test]
fn ofrecord_samples_of_prod19() {
    let dir = temp_dir();
    let path = dir.path().join("p.ffr");
    let specs = prod19_example_specs();
    let batch = prod19(100, 11);
    write(
        &path,
        &grist_ofrecord::encode_batch(
            &batch,
            &grist_tensor::SpecFile {
                features: specs.clone(),
                ..Default::default()
            },
        )
        .unwrap(),
    );
    let inferred = infer(Payload::OfRecord, &path, &InferOptions::default()).unwrap();
    let got = &inferred.spec.features;
    assert_eq!(got.len(), 24);
    for s in specs.iter().filter(|s| s.kind() == "dense") {
        assert!(got.contains(s), "{}", s.name());
    }
    assert!(got.contains(&FeatureSpec::varlen("sp_4_values", DType::Float32)));
    let reader = FfrReader::open(&path, ReaderOptions::default()).unwrap();
    let mut decoder = PayloadDecoder::ofrecord(got).unwrap();
    let all: Vec<u64> = (0..100).collect();
    let back = decoder.decode_samples(&reader.read(&all).unwrap()).unwrap();
    for s in specs.iter().filter(|s| s.kind() == "dense") {
        assert_eq!(back.get(s.name()), batch.get(s.name()), "{}", s.name());
    }
    // Read as tf.Examples instead (the wrong payload), the samples may
    // happen to parse; if they do not, the error names the file.
    if let Err(e) = infer(Payload::Example, &path, &InferOptions::default()) {
        assert!(e.to_string().contains("p.ffr"), "{e}");
    }
}

/// Raw payloads name no features; a file of no samples is an error naming
/// it; a sample that is no Example names its file and sample.
#[test]
fn raw_empty_and_damaged() {
    let empty = corpus::folder_case("ffrecord", "empty").input();
    let e = infer(Payload::Example, &empty, &InferOptions::default()).unwrap_err();
    assert!(matches!(
        e.downcast_ref::<TensorError>(),
        Some(TensorError::NoRecords { .. })
    ));
    assert!(e.to_string().contains("empty.ffr"), "{e}");
    let tiny = corpus::folder_case("ffrecord", "tiny2").input();
    let e = infer(Payload::Raw, &tiny, &InferOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("tiny2.ffr") && e.to_string().contains("raw"),
        "{e}"
    );
    let dir = temp_dir();
    let path = dir.path().join("bad.ffr");
    let good = ExampleBuilder::new().with_int64s("a", [1, 2]).encode();
    write(&path, &[good.clone(), good, vec![0xff; 4]]);
    let e = infer(Payload::Example, &path, &InferOptions::default()).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("bad.ffr") && text.contains('2'), "{text}");
    let two = infer(
        Payload::Example,
        &path,
        &InferOptions::default().with_records(2),
    )
    .unwrap();
    assert_eq!(
        two.spec.features,
        [FeatureSpec::dense("a", DType::Int64, [2])]
    );
    // The payload is a format option, as `--payload` sets it.
    let format = FfrFormat::default()
        .configure("payload", "ofrecord")
        .unwrap();
    assert!(
        format
            .infer_spec(&[Input::local(&path)], &InferOptions::default())
            .is_err()
    );
}
