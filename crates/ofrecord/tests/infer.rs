//! Spec inference: the specs inferred from every valid corpus dataset
//! decode each record to the values its manifest holds; prod19; the
//! dense/varlen rule over OFRecord's five list kinds; empty parts.

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use grist_ofrecord::{OfRecordDecoder, OfRecordFormat, RecordBuilder, encode_batch};
use grist_tensor::synth::{prod19, prod19_example_specs};
use grist_tensor::{
    DType, FeatureSpec, Format, InferOptions, Inferred, Input, Tensor, TensorError, Values,
};
use grist_testkit::corpus::{self, FolderCase};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn parts(case: &FolderCase) -> Vec<PathBuf> {
    case.parts().iter().map(|p| case.path(&p["file"])).collect()
}

fn infer(paths: &[PathBuf], options: &InferOptions) -> Result<Inferred, grist_tensor::BoxError> {
    let inputs: Vec<Input> = paths.iter().map(Input::local).collect();
    OfRecordFormat::default().infer_spec(&inputs, options)
}

/// Every record's bytes, in dataset order.
fn payloads(case: &FolderCase) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for part in case.parts() {
        let file = std::fs::read(case.path(&part["file"])).unwrap();
        for r in part["records"].as_array().unwrap() {
            let at = r["offset"].as_u64().unwrap() as usize + 8;
            out.push(file[at..at + r["len"].as_u64().unwrap() as usize].to_vec());
        }
    }
    out
}

/// Values `range` of `values`, in the manifest's form: integers, the hex
/// bits of floats, base64 of bytes (summarized past 4096 bytes).
fn manifest_form(values: &Values, range: std::ops::Range<usize>) -> Vec<Value> {
    range
        .map(|i| match values {
            Values::Int32(v) => json!(v[i]),
            Values::Int64(v) => json!(v[i]),
            Values::Float32(v) => json!(format!("0x{:08x}", v[i].to_bits())),
            Values::Float64(v) => json!(format!("0x{:016x}", v[i].to_bits())),
            Values::String(s) => {
                let b = s.get(i).unwrap();
                let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
                if b.len() > grist_ofrecord::MAX_INLINE_BYTES {
                    let sha: String = Sha256::digest(b)
                        .iter()
                        .map(|x| format!("{x:02x}"))
                        .collect();
                    json!({"len": b.len(), "sha256": sha, "head_b64": b64(&b[..16])})
                } else {
                    json!(b64(b))
                }
            }
            other => panic!("no OFRecord list reads as {:?}", other.dtype()),
        })
        .collect()
}

/// The values of row `row` of a decoded column, in the manifest's form.
fn row_values(tensor: &Tensor, row: usize) -> Vec<Value> {
    match tensor {
        Tensor::Dense(d) => {
            let n: usize = d.shape[1..].iter().product();
            manifest_form(&d.values, row * n..(row + 1) * n)
        }
        Tensor::Sparse(s) => {
            let rank = s.rank();
            let rows: Vec<usize> = (0..s.nnz())
                .filter(|&e| s.indices[e * rank] == row as i64)
                .collect();
            match (rows.first(), rows.last()) {
                (Some(&a), Some(&b)) => manifest_form(&s.values, a..b + 1),
                _ => Vec::new(),
            }
        }
        other => panic!("inference gives dense and varlen columns, not {other:?}"),
    }
}

/// The manifest's values of a feature of one record: the bits of floats,
/// nothing for a missing feature or one with no list.
fn expected_values(record: &Value, name: &str) -> Vec<Value> {
    let f = &record["features"][name];
    let key = match f["kind"].as_str() {
        None | Some("none") => return Vec::new(),
        Some("float_list" | "double_list") => "bits",
        Some(_) => "values",
    };
    f[key].as_array().cloned().unwrap_or_default()
}

#[test]
fn corpus_specs_decode_every_record_to_its_manifest_values() {
    let (mut cases, mut compared) = (0, 0);
    for case in corpus::folder_cases("ofrecord") {
        if !case.valid() {
            continue;
        }
        let records = case.records();
        let inferred = match infer(&parts(&case), &InferOptions::default()) {
            Ok(i) => i,
            Err(e) if records.is_empty() => {
                assert!(
                    matches!(
                        e.downcast_ref::<TensorError>(),
                        Some(TensorError::NoRecords { .. })
                    ),
                    "{}: {e}",
                    case.name
                );
                continue;
            }
            Err(e) => panic!("{}: {e}", case.name),
        };
        assert_eq!(inferred.records, records.len() as u64, "{}", case.name);
        // Only features no record gives a list are left out.
        for note in &inferred.notes {
            assert!(note.skipped, "{}: {note}", case.name);
            let kinds: Vec<&Value> = records
                .iter()
                .filter_map(|r| r.get("features")?.get(&note.feature))
                .map(|f| &f["kind"])
                .collect();
            assert!(
                !kinds.is_empty() && kinds.iter().all(|k| *k == "none"),
                "{}: {note}",
                case.name
            );
        }
        let mut decoder = OfRecordDecoder::new(&inferred.spec.features).unwrap();
        let file: Arc<str> = case.name.as_str().into();
        let payloads = payloads(&case);
        let batch = decoder
            .decode_batch(&file, 0, payloads.iter().map(|p| &p[..]))
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        if records.iter().any(|r| r.get("features").is_none()) {
            continue; // lenient cases give features_raw
        }
        for spec in &inferred.spec.features {
            let column = batch.get(spec.name()).unwrap();
            // Each feature's spec fits what the records hold.
            let counts: Vec<usize> = records
                .iter()
                .map(|r| expected_values(r, spec.name()).len())
                .collect();
            let all_there = records.iter().all(|r| {
                !matches!(
                    r["features"][spec.name()]["kind"].as_str(),
                    None | Some("none")
                )
            });
            let dense = all_there && counts.iter().all(|&c| c == counts[0]) && counts[0] > 0;
            assert_eq!(
                spec.kind(),
                if dense { "dense" } else { "varlen" },
                "{}/{}",
                case.name,
                spec.name()
            );
            for (r, record) in records.iter().enumerate() {
                assert_eq!(
                    row_values(column, r),
                    expected_values(record, spec.name()),
                    "{} record {r} feature {}",
                    case.name,
                    spec.name()
                );
            }
            compared += 1;
        }
        cases += 1;
    }
    assert!(
        cases >= 6 && compared >= 40,
        "{cases} cases, {compared} features"
    );
}

/// prod19 as OFRecords: the dense features come back as written.
#[test]
fn prod19_dense_features_are_inferred_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let specs = prod19_example_specs();
    let batch = prod19(200, 3);
    let records = encode_batch(
        &batch,
        &grist_tensor::SpecFile {
            features: specs.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    let mut writer = grist_ofrecord::DatasetWriter::create(dir.path().join("ds")).unwrap();
    for (i, r) in records.iter().enumerate() {
        writer.write_record(r).unwrap();
        if i == 99 {
            writer.end_part().unwrap();
        }
    }
    writer.finish().unwrap();
    let paths: Vec<PathBuf> = (0..2)
        .map(|i| dir.path().join(format!("ds/part-{i:05}")))
        .collect();
    let inferred = infer(&paths, &InferOptions::default()).unwrap();
    assert_eq!(inferred.records, 200);
    let got = &inferred.spec.features;
    for s in specs.iter().filter(|s| s.kind() == "dense") {
        assert!(got.contains(s), "{}", s.name());
    }
    assert!(got.contains(&FeatureSpec::varlen("sp_0_indices", DType::Int64)));
    let mut decoder = OfRecordDecoder::new(got).unwrap();
    let back = decoder
        .decode_batch(&"p".into(), 0, records.iter().map(|r| &r[..]))
        .unwrap();
    for s in specs.iter().filter(|s| s.kind() == "dense") {
        assert_eq!(back.get(s.name()), batch.get(s.name()), "{}", s.name());
    }
}

/// Every list kind has its dtype; counts that vary or features that are
/// missing are varlen; an empty part is an error naming it; `sequence`
/// is refused.
#[test]
fn list_kinds_counts_and_empty_parts() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..3i32)
        .map(|i| {
            let mut b = RecordBuilder::new()
                .with_int32s("i32", [i])
                .with_int64s("i64", [1, 2])
                .with_floats("f32", vec![0.5; 1 + i as usize])
                .with_doubles("f64", [0.25; 3])
                .with_bytes("s", [b"x"]);
            if i != 1 {
                b = b.with_int32s("sometimes", [i]);
            }
            b.encode()
        })
        .collect();
    let mut w = grist_ofrecord::DatasetWriter::create(dir.path().join("ds")).unwrap();
    for r in &records {
        w.write_record(r).unwrap();
    }
    w.end_part().unwrap();
    w.end_part().unwrap();
    w.finish().unwrap();
    let part = |i: usize| dir.path().join(format!("ds/part-{i:05}"));
    let inferred = infer(&[part(0)], &InferOptions::default()).unwrap();
    assert_eq!(
        inferred.spec.features,
        [
            FeatureSpec::varlen("f32", DType::Float32),
            FeatureSpec::dense("f64", DType::Float64, [3]),
            FeatureSpec::dense("i32", DType::Int32, []),
            FeatureSpec::dense("i64", DType::Int64, [2]),
            FeatureSpec::dense("s", DType::String, []),
            FeatureSpec::varlen("sometimes", DType::Int32),
        ]
    );
    let empty = part(1);
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
    let e = infer(std::slice::from_ref(&empty), &InferOptions::default()).unwrap_err();
    assert!(matches!(
        e.downcast_ref::<TensorError>(),
        Some(TensorError::NoRecords { .. })
    ));
    assert!(e.to_string().contains("part-00001"), "{e}");
    let e = infer(&[part(0)], &InferOptions::default().with_sequence(true)).unwrap_err();
    assert!(e.to_string().contains("sequence"), "{e}");
}

/// Cut parts: inference may fail, naming the part, but never panics.
#[test]
fn prefixes_of_corpus_parts_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut cuts = 0;
    for case in corpus::folder_cases("ofrecord") {
        for part in parts(&case) {
            let bytes = std::fs::read(&part).unwrap();
            let cut = dir.path().join("part-00000");
            let step = (bytes.len() / 200).max(1);
            for len in (0..bytes.len()).step_by(step) {
                std::fs::write(&cut, &bytes[..len]).unwrap();
                if let Err(e) = infer(std::slice::from_ref(&cut), &InferOptions::default()) {
                    assert!(e.to_string().contains("part-00000"), "{e}");
                }
                cuts += 1;
            }
        }
    }
    assert!(cuts > 500, "{cuts}");
}
