//! Payload decoding: the tf.Example records of the tfrecord corpus stored
//! as FFRecord samples parse exactly as TensorFlow parsed them; raw
//! tensor payloads; errors naming the file, the sample and the feature.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use grist_ffrecord::{
    Error, FeatureProblem, FfrReader, FfrWriter, PayloadDecoder, ReaderOptions, WriterOptions,
    encode_file,
};
use grist_tensor::json::{batch_to_json, compare_json};
use grist_tensor::{Batch, DType, Decoder, FeatureSpec, RecordSource, SpecFile, Values};
use grist_testkit::{corpus, temp_dir};
use grist_tfrecord::{ExampleBuilder, ExampleDecoder, RecordReader};
use serde_json::Value;

use crate::support::Rng;

/// Two batches are the same, floats compared by their JSON form (so NaNs
/// compare equal).
fn assert_same(a: &Batch, b: &Batch, what: &str) {
    if let Err(m) = compare_json(&batch_to_json(a), &batch_to_json(b)) {
        panic!("{what}: {m}");
    }
}

/// The payloads of a good TFRecord file.
fn tfrecords(path: &Path) -> Vec<Vec<u8>> {
    let mut reader = RecordReader::open(path, Default::default()).unwrap();
    let mut out = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        out.push(r.to_vec());
    }
    out
}

#[test]
fn tfrecord_corpus_examples_stored_as_samples_parse_as_tensorflow_did() {
    let dir = temp_dir();
    let mut batches_checked = 0;
    for case in corpus::cases("tfrecord").into_iter().filter(|c| c.is_ok()) {
        let records: Vec<Vec<u8>> = case.files.iter().flat_map(|f| tfrecords(f)).collect();
        let name = &case.name;
        let path = dir.path().join(format!("{name}.ffr"));
        let mut w = FfrWriter::create(&path, WriterOptions::default()).unwrap();
        for r in &records {
            w.write_sample(r).unwrap();
        }
        w.finish().unwrap();
        let reader = FfrReader::open(&path, ReaderOptions::default()).unwrap();
        for parse in case.parses() {
            let id = format!("{name}/{}", parse["id"].as_str().unwrap());
            let spec = SpecFile::from_value(parse).unwrap();
            let batch_size = spec.batch_size.unwrap();
            let decoder = match ExampleDecoder::from_spec_file(&spec) {
                Ok(d) => d,
                Err(e) => {
                    assert_eq!(parse["outcome"], "error", "{id}: {e}");
                    continue;
                }
            };
            let mut by_index = PayloadDecoder::Example(decoder.clone());
            let mut by_chunk = PayloadDecoder::Example(decoder);
            let chunk = reader
                .source()
                .with_chunk_bytes(usize::MAX)
                .next_chunk()
                .unwrap();
            let expected_batches = parse["batches"].as_array().cloned().unwrap_or_default();
            let failing = parse["error"]["failing_batch_index"].as_u64();
            let n = reader.len();
            for (b, first) in (0..n).step_by(batch_size.max(1)).enumerate() {
                let indices: Vec<u64> = (first..(first + batch_size as u64).min(n)).collect();
                let samples = reader.read(&indices).unwrap();
                let got = by_index.decode_samples(&samples);
                // The same rows through the chunk path.
                let mut out = by_chunk.new_batch(indices.len());
                let rows = first as usize..first as usize + indices.len();
                let chunk = chunk.as_ref().unwrap();
                let got_chunk = by_chunk
                    .decode_chunk(chunk, rows, &mut out)
                    .map_err(|e| e.to_string())
                    .and_then(|_| {
                        by_chunk
                            .finish(&mut out, &chunk.file, first, None)
                            .map_err(|e| e.to_string())
                    });
                if Some(b as u64) == failing {
                    let e = got.expect_err(&id);
                    assert_eq!(e.class().name(), "payload", "{id}: {e}");
                    assert!(got_chunk.is_err(), "{id}");
                    break;
                }
                let got = got.unwrap_or_else(|e| panic!("{id}: batch {b}: {e}"));
                let want: &Value = &expected_batches[b];
                if let Err(m) = compare_json(want, &batch_to_json(&got)) {
                    panic!("{id}: batch {b}: {m}");
                }
                assert_same(&got, &got_chunk.unwrap(), &id);
                by_index.recycle(got);
                batches_checked += 1;
            }
        }
    }
    assert!(batches_checked >= 20, "only {batches_checked} batches");
}

#[test]
fn random_batches_decode_like_the_example_decoder_on_the_same_records() {
    let mut rng = Rng(3);
    let records: Vec<Vec<u8>> = (0..300)
        .map(|i| {
            let n = rng.below(5) as usize;
            ExampleBuilder::new()
                .with_int64s("id", [i])
                .with_floats("x", (0..n).map(|k| k as f32 * 0.5))
                .with_bytes("tag", [format!("t{i}").into_bytes()])
                .encode()
        })
        .collect();
    let specs = [
        FeatureSpec::dense("id", DType::Int64, []),
        FeatureSpec::varlen("x", DType::Float32),
        FeatureSpec::dense("tag", DType::String, []),
    ];
    let file = encode_file(records.iter().map(|r| &r[..]));
    let reader = FfrReader::from_bytes("ex.ffr", file.into(), ReaderOptions::default()).unwrap();
    let mut decoder = PayloadDecoder::example(&specs).unwrap();
    let mut reference = ExampleDecoder::new(&specs).unwrap();
    let name: Arc<str> = "ex.ffr".into();
    for _ in 0..20 {
        let indices: Vec<u64> = (0..256).map(|_| rng.below(300)).collect();
        let got = decoder
            .decode_samples(&reader.read(&indices).unwrap())
            .unwrap();
        let want = reference
            .decode_batch(&name, 0, indices.iter().map(|&i| &records[i as usize][..]))
            .unwrap();
        assert_eq!(got, want);
        decoder.recycle(got);
    }
}

#[test]
fn decode_errors_name_the_file_the_sample_and_the_feature() {
    let dir = temp_dir();
    let a = dir.path().join("a.ffr");
    let b = dir.path().join("b.ffr");
    let good = |i: i64| ExampleBuilder::new().with_int64s("id", [i]).encode();
    fs::write(&a, encode_file([&good(0)[..], &good(1)])).unwrap();
    let wrong_type = ExampleBuilder::new().with_floats("id", [1.0]).encode();
    fs::write(&b, encode_file([&good(2)[..], &wrong_type, &good(4)])).unwrap();
    let reader = FfrReader::open(dir.path(), ReaderOptions::default()).unwrap();
    let mut decoder =
        PayloadDecoder::example(&[FeatureSpec::dense("id", DType::Int64, [])]).unwrap();
    let e = decoder
        .decode_samples(&reader.read(&[0, 4, 3]).unwrap())
        .unwrap_err();
    let msg = e.to_string();
    assert_eq!(e.class().name(), "payload");
    assert!(
        msg.contains("b.ffr")
            && msg.contains("record 1")
            && msg.contains("\"id\"")
            && msg.contains("dataset index 3"),
        "{msg}"
    );
    // The decoder is reusable after an error.
    let ok = decoder
        .decode_samples(&reader.read(&[4, 0]).unwrap())
        .unwrap();
    assert_eq!(
        ok.get("id").unwrap().as_dense().unwrap().values,
        Values::Int64(vec![4, 0])
    );
    // Specs tf.Example cannot hold are rejected when the decoder is built
    // (int32 and bool read int64 lists; float64 has no list).
    let bad = FeatureSpec::dense("id", DType::Float64, []);
    assert!(matches!(
        PayloadDecoder::example(&[bad]),
        Err(Error::Spec(_))
    ));
}

#[test]
fn raw_tensors_decode_into_dense_columns() {
    let mut rng = Rng(11);
    let rows = 40u64;
    let cases: [(DType, Vec<i64>); 6] = [
        (DType::Float32, vec![2, 3]),
        (DType::Float64, vec![4]),
        (DType::Int32, vec![]),
        (DType::Int64, vec![1, 2, 2]),
        (DType::Bool, vec![5]),
        (DType::String, vec![]),
    ];
    for (dtype, shape) in cases {
        let elems: usize = shape.iter().product::<i64>() as usize;
        let mut expected = Values::new(dtype);
        let mut samples = Vec::new();
        for _ in 0..rows {
            let mut bytes = Vec::new();
            match &mut expected {
                Values::Float32(v) => (0..elems).for_each(|_| {
                    let x = f32::from_bits(rng.next() as u32);
                    v.push(x);
                    bytes.extend(x.to_le_bytes());
                }),
                Values::Float64(v) => (0..elems).for_each(|_| {
                    let x = f64::from_bits(rng.next());
                    v.push(x);
                    bytes.extend(x.to_le_bytes());
                }),
                Values::Int32(v) => (0..elems).for_each(|_| {
                    let x = rng.next() as i32;
                    v.push(x);
                    bytes.extend(x.to_le_bytes());
                }),
                Values::Int64(v) => (0..elems).for_each(|_| {
                    let x = rng.next() as i64;
                    v.push(x);
                    bytes.extend(x.to_le_bytes());
                }),
                Values::Bool(v) => (0..elems).for_each(|_| {
                    let x = rng.below(2) == 1;
                    v.push(x);
                    bytes.push(x as u8);
                }),
                Values::String(v) => {
                    let len = rng.below(40) as usize;
                    bytes = rng.bytes(len);
                    v.push(&bytes);
                }
                other => panic!("no test payload for {} values", other.dtype()),
            }
            samples.push(bytes);
        }
        let file = encode_file(samples.iter().map(|s| &s[..]));
        let reader =
            FfrReader::from_bytes("raw.ffr", file.into(), ReaderOptions::default()).unwrap();
        let spec = FeatureSpec::dense("t", dtype, shape.clone());
        let mut decoder = PayloadDecoder::raw(&spec).unwrap();
        assert_eq!(decoder.specs(), &[spec]);
        let all: Vec<u64> = (0..rows).collect();
        let batch = decoder.decode_samples(&reader.read(&all).unwrap()).unwrap();
        let t = batch.get("t").unwrap().as_dense().unwrap();
        let mut want_shape = vec![rows as usize];
        want_shape.extend(shape.iter().map(|&d| d as usize));
        assert_eq!(t.shape, want_shape, "{dtype}");
        assert!(t.values.bit_eq(&expected), "{dtype}");
        // The chunk path gives the same batch.
        let mut source = reader.source().with_chunk_bytes(64);
        let mut out = decoder.new_batch(rows as usize);
        while let Some(chunk) = source.next_chunk().unwrap() {
            decoder
                .decode_chunk(&chunk, 0..chunk.record_count, &mut out)
                .unwrap();
        }
        let name: Arc<str> = "raw.ffr".into();
        assert_same(
            &decoder.finish(&mut out, &name, 0, None).unwrap(),
            &batch,
            "chunks",
        );
    }
}

#[test]
fn raw_payloads_of_the_wrong_size_or_bad_bools_are_errors() {
    let file = encode_file([&[0u8; 8][..], &[0u8; 7], &[1, 2]]);
    let reader = FfrReader::from_bytes("raw.ffr", file.into(), ReaderOptions::default()).unwrap();
    let mut f32s = PayloadDecoder::raw(&FeatureSpec::dense("x", DType::Float32, [2])).unwrap();
    match f32s.decode_samples(&reader.read(&[0, 1]).unwrap()) {
        Err(e @ Error::Feature { .. }) => {
            let Error::Feature { at, problem } = &e else {
                unreachable!()
            };
            assert_eq!((at.record, at.index), (Some(1), Some(1)));
            assert_eq!(at.feature.as_deref(), Some("x"));
            assert_eq!(
                *problem,
                FeatureProblem::WrongByteLength {
                    expected: 8,
                    actual: 7
                }
            );
            assert!(e.to_string().contains("raw.ffr: record 1"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let mut bools = PayloadDecoder::raw(&FeatureSpec::dense("b", DType::Bool, [2])).unwrap();
    assert!(matches!(
        bools.decode_samples(&reader.read(&[2]).unwrap()),
        Err(Error::Feature {
            problem: FeatureProblem::BadBool {
                offset: 1,
                value: 2
            },
            ..
        })
    ));
    // Specs a raw payload cannot honour.
    for spec in [
        FeatureSpec::varlen("v", DType::Int64),
        FeatureSpec::dense("d", DType::Int64, [-1]),
        FeatureSpec::dense("s", DType::String, [2]),
        FeatureSpec::dense("h", DType::Float64, [i64::MAX, 4]),
    ] {
        assert!(
            matches!(PayloadDecoder::raw(&spec), Err(Error::Spec(_))),
            "{spec:?}"
        );
    }
}

/// The expected rows with OneFlow's unwritten elements (null) as zeros.
fn zero_unwritten(rows: &Value) -> Value {
    match rows {
        Value::Null => serde_json::json!(0),
        Value::Array(items) => Value::Array(items.iter().map(zero_unwritten).collect()),
        other => other.clone(),
    }
}

/// The rows of a dense column, as JSON lists.
fn rows_of(t: &grist_tensor::Tensor) -> Value {
    let d = t.as_dense().expect("a dense column");
    let rows = d.shape[0];
    let row_len = d.values.len().checked_div(rows).unwrap_or(0);
    let all = grist_tensor::json::values_to_json(&d.values);
    let all = all.as_array().unwrap();
    Value::Array(
        (0..rows)
            .map(|r| Value::Array(all[r * row_len..(r + 1) * row_len].to_vec()))
            .collect(),
    )
}

#[test]
fn ofrecord_corpus_records_stored_as_samples_decode_as_oneflow_does() {
    use base64::Engine as _;
    let out_dir = temp_dir();
    let mut runs = 0;
    for case in corpus::folder_cases("ofrecord") {
        let decoder_runs = case.decoder_runs();
        if decoder_runs.is_empty() {
            continue;
        }
        // The records of every part, in dataset order, as FFRecord samples.
        let mut records = Vec::new();
        for part in case.parts() {
            let file = case.path(&part["file"]);
            let mut reader = grist_ofrecord::RecordReader::open(&file, Default::default()).unwrap();
            while let Some(r) = reader.next_record().unwrap() {
                records.push(r.payload.to_vec());
            }
        }
        let ffr = out_dir.path().join(format!("{}.ffr", case.name));
        fs::write(&ffr, encode_file(records.iter().map(|r| &r[..]))).unwrap();
        let reader = FfrReader::open(&ffr, ReaderOptions::default()).unwrap();
        let all: Vec<u64> = (0..reader.len()).collect();
        let samples = reader.read(&all).unwrap();
        for run in decoder_runs {
            runs += 1;
            let what = format!("{}: {run}", case.name);
            let field = grist_ofrecord::Field::from_json(run).unwrap();
            let decoder =
                grist_ofrecord::OfRecordDecoder::with_fields(std::slice::from_ref(&field)).unwrap();
            let mut decoder = PayloadDecoder::OfRecord(decoder);
            let result = &run["result"];
            match decoder.decode_samples(&samples) {
                Ok(batch) => {
                    assert_eq!(result["ok"], true, "{what}");
                    let column = batch.get(field.name()).unwrap();
                    if let Some(b64) = result.get("values_b64") {
                        let Values::String(s) = &column.as_dense().unwrap().values else {
                            panic!("{what}: not a string column");
                        };
                        let got: Vec<Value> = s
                            .iter()
                            .map(|b| base64::engine::general_purpose::STANDARD.encode(b).into())
                            .collect();
                        assert_eq!(Value::Array(got), *b64, "{what}");
                    } else if let Err(m) =
                        compare_json(&zero_unwritten(&result["rows"]), &rows_of(column))
                    {
                        panic!("{what}: {m}");
                    }
                }
                Err(e) => {
                    assert_eq!(result["ok"], false, "{what}: {e}");
                    assert_eq!(e.class().name(), "payload", "{what}: {e}");
                    let Error::OfRecord { source } = &e else {
                        panic!("{what}: {e}");
                    };
                    assert_eq!(result["error"], source.manifest_kind(), "{what}: {e}");
                    let index = e.location().and_then(|at| at.index);
                    assert_eq!(result["record"], index.unwrap(), "{what}: {e}");
                    assert!(e.to_string().contains(".ffr: record"), "{e}");
                }
            }
        }
    }
    assert!(runs >= 10, "only {runs} decoder runs");
}

#[test]
fn random_batches_of_ofrecords_decode_like_the_ofrecord_decoder() {
    let mut rng = Rng(5);
    let records: Vec<Vec<u8>> = (0..200)
        .map(|i| {
            let n = rng.below(4) as usize;
            grist_ofrecord::RecordBuilder::new()
                .with_int64s("id", [i])
                .with_floats("x", (0..n).map(|k| k as f32))
                .encode()
        })
        .collect();
    let specs = [
        FeatureSpec::dense("id", DType::Int64, []),
        FeatureSpec::varlen("x", DType::Float32),
    ];
    let file = encode_file(records.iter().map(|r| &r[..]));
    let reader = FfrReader::from_bytes("of.ffr", file.into(), ReaderOptions::default()).unwrap();
    let mut decoder = PayloadDecoder::ofrecord(&specs).unwrap();
    let mut reference = grist_ofrecord::OfRecordDecoder::new(&specs).unwrap();
    let name: Arc<str> = "of.ffr".into();
    for _ in 0..10 {
        let indices: Vec<u64> = (0..256).map(|_| rng.below(200)).collect();
        let got = decoder
            .decode_samples(&reader.read(&indices).unwrap())
            .unwrap();
        let want = reference
            .decode_batch(&name, 0, indices.iter().map(|&i| &records[i as usize][..]))
            .unwrap();
        assert_eq!(got, want);
        decoder.recycle(got);
    }
    // A sample that is not an OFRecord fails naming the file and sample.
    let bad = encode_file([&records[0][..], b"\x0f\x01"]);
    let reader = FfrReader::from_bytes("bad.ffr", bad.into(), ReaderOptions::default()).unwrap();
    let e = decoder
        .decode_samples(&reader.read(&[0, 1]).unwrap())
        .unwrap_err();
    assert!(matches!(e, Error::OfRecord { .. }), "{e}");
    assert_eq!(e.location().and_then(|at| at.index), Some(1), "{e}");
    assert!(e.to_string().contains("bad.ffr: record 1"), "{e}");
    assert_eq!(e.class().name(), "payload");
}
