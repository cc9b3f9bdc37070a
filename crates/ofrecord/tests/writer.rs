//! Writing: the corpus datasets rebuilt from their manifests byte for
//! byte, part limits, atomic parts, and batches written then read back.

use std::fs;

use grist_ofrecord::{
    Dataset, DatasetWriter, Error, OfRecordDecoder, PartNaming, Record, RecordBuilder, encode_batch,
};
use grist_tensor::synth::{prod19, prod19_example_specs};
use grist_tensor::{DType, FeatureSpec, Partition, RaggedSpec, Values};
use grist_testkit::corpus::{self, sha256_hex};

use crate::support::OfCase;

/// Every valid case written by a protobuf library's canonical serializer
/// (all but the hand-made `wire_variants*`) comes out of `Record::encode`
/// and `DatasetWriter` byte-identical, part by part.
#[test]
fn canonical_cases_are_rebuilt_byte_for_byte() {
    let mut rebuilt = 0;
    for case in corpus::folder_cases("ofrecord")
        .into_iter()
        .filter(|c| c.valid())
    {
        let canonical = !case.name.starts_with("wire_variants");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("ds");
        let mut writer = DatasetWriter::create(&out)
            .unwrap()
            .with_naming(case.naming());
        for part in case.parts() {
            let records = part["records"].as_array().unwrap();
            let mut payloads = Vec::new();
            for r in records {
                let bytes = match Record::from_json(r) {
                    Ok(record) => record.encode(),
                    // Summarized (large) values: take the stored payload.
                    Err(_) => {
                        let path = case.path(&part["file"]);
                        let file = fs::read(path).unwrap();
                        let at = r["offset"].as_u64().unwrap() as usize + 8;
                        file[at..at + r["len"].as_u64().unwrap() as usize].to_vec()
                    }
                };
                // Whatever the encoding, it parses to the manifest's record.
                let again = Record::parse(&bytes).unwrap().to_json();
                if let Some(features) = r.get("features") {
                    grist_tensor::json::compare_json(features, &again["features"])
                        .unwrap_or_else(|m| panic!("{}: {m}", case.name));
                }
                if canonical {
                    assert_eq!(r["sha256"], sha256_hex(&bytes), "{}", case.name);
                }
                payloads.push(bytes);
            }
            for p in &payloads {
                writer.write_record(p).unwrap();
            }
            writer.end_part().unwrap();
        }
        let summary = writer.finish().unwrap();
        assert_eq!(summary.parts, case.parts().len(), "{}", case.name);
        if canonical {
            for (i, part) in case.parts().iter().enumerate() {
                let bytes = fs::read(out.join(case.naming().name(i))).unwrap();
                assert_eq!(
                    part["file_sha256"],
                    sha256_hex(&bytes),
                    "{} part {i}",
                    case.name
                );
            }
            rebuilt += 1;
        }
        // No temporary files are left behind.
        let names: Vec<String> = fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    }
    assert!(rebuilt >= 6, "only {rebuilt} cases rebuilt");
}

fn records_of(ds: &Dataset) -> Vec<Vec<u8>> {
    let mut reader = ds.reader();
    let mut out = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        out.push(r.payload.to_vec());
    }
    out
}

#[test]
fn parts_split_by_records_or_bytes() {
    let payloads: Vec<Vec<u8>> = (0..23u8).map(|i| vec![i; i as usize]).collect();
    for (records, bytes) in [
        (Some(5), None),
        (None, Some(64)),
        (Some(3), Some(40)),
        (None, Some(1)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut w = DatasetWriter::create(dir.path())
            .unwrap()
            .with_naming(PartNaming::default());
        if let Some(r) = records {
            w = w.with_records_per_part(r);
        }
        if let Some(b) = bytes {
            w = w.with_bytes_per_part(b);
        }
        for p in &payloads {
            w.write_record(p).unwrap();
        }
        let summary = w.finish().unwrap();
        let ds = Dataset::open(dir.path(), summary.parts, &PartNaming::default()).unwrap();
        assert_eq!(records_of(&ds), payloads);
        assert_eq!(summary.records, payloads.len() as u64);
        let mut total = 0;
        for part in ds.parts() {
            let size = fs::metadata(&part.path).unwrap().len();
            total += size;
            let counts = Dataset::from_files([&part.path]).record_counts().unwrap();
            if let Some(r) = records {
                assert!(counts[0] <= r);
            }
            // A part over the byte limit holds one record.
            if let Some(b) = bytes {
                assert!(size <= b || counts[0] == 1, "{size} bytes, {counts:?}");
            }
        }
        assert_eq!(total, summary.bytes);
    }
}

#[test]
fn an_empty_dataset_is_one_empty_part_and_parts_are_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let summary = DatasetWriter::create(dir.path()).unwrap().finish().unwrap();
    assert_eq!((summary.parts, summary.records), (1, 0));
    assert_eq!(
        fs::metadata(dir.path().join("part-00000")).unwrap().len(),
        0
    );
    let mut again = DatasetWriter::create(dir.path()).unwrap();
    match again.write_record(b"x") {
        Err(Error::DatasetExists { file, .. }) => assert_eq!(file, "part-00000"),
        other => panic!("{other:?}"),
    }
    // Another naming in the same folder is another dataset.
    let mut other = DatasetWriter::create(dir.path())
        .unwrap()
        .with_naming(PartNaming::new("val-", None));
    other.write_record(b"x").unwrap();
    assert_eq!(other.finish().unwrap().parts, 1);
}

#[test]
fn an_unfinished_part_never_appears() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DatasetWriter::create(dir.path())
        .unwrap()
        .with_records_per_part(2);
    for i in 0..5u8 {
        w.write_record(&[i]).unwrap();
    }
    // Parts 0 and 1 are complete; part 2 is being written.
    assert_eq!(w.summary().parts, 3);
    drop(w);
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec!["part-00000", "part-00001"]);
}

#[test]
fn batches_round_trip_through_records() {
    // prod19: dense and SparseFeature columns.
    let specs = prod19_example_specs();
    let batch = prod19(64, 7);
    let records = encode_batch(&batch, &spec_file(&specs)).unwrap();
    let mut decoder = OfRecordDecoder::new(&specs).unwrap();
    let back = decoder
        .decode_batch(&"mem".into(), 0, records.iter().map(|r| &r[..]))
        .unwrap();
    assert_eq!(back, batch);

    // Every dtype as dense, varlen, fixed-length sequence and ragged.
    let mut rows = Vec::new();
    for r in 0..5i32 {
        let n = r as usize % 3;
        rows.push(
            RecordBuilder::new()
                .with_int32s("i32", vec![r; n])
                .with_int64s("i64", [r as i64 * 1_000_000_000_000])
                .with_floats("f32", vec![r as f32 / 3.0; n])
                .with_doubles("f64", [r as f64 / 7.0, -0.0])
                .with_bytes("s", vec![vec![r as u8; n]; n])
                .with_int32s("b", [r % 2])
                .with_floats("seq", vec![1.5; 2 * n])
                .encode(),
        );
    }
    let specs = vec![
        FeatureSpec::varlen("i32", DType::Int32),
        FeatureSpec::dense("i64", DType::Int64, []),
        FeatureSpec::varlen("f32", DType::Float32),
        FeatureSpec::dense("f64", DType::Float64, [2]),
        FeatureSpec::Ragged(RaggedSpec {
            name: "s".into(),
            dtype: DType::String,
            value_key: None,
            partitions: vec![],
            row_splits_dtype: DType::Int64,
            validate: false,
            tf_class: None,
        }),
        FeatureSpec::dense("b", DType::Bool, []),
        serde_json::from_value(serde_json::json!({
            "name": "seq", "kind": "fixed_len_sequence", "dtype": "float32",
            "shape": [2], "allow_missing": true, "default": -1.0
        }))
        .unwrap(),
    ];
    let mut decoder = OfRecordDecoder::new(&specs).unwrap();
    let batch = decoder
        .decode_batch(&"mem".into(), 0, rows.iter().map(|r| &r[..]))
        .unwrap();
    assert_eq!(
        batch.get("b").unwrap().as_dense().unwrap().values,
        Values::Bool(vec![false, true, false, true, false])
    );
    let again = encode_batch(&batch, &spec_file(&specs)).unwrap();
    let back = decoder
        .decode_batch(&"mem".into(), 0, again.iter().map(|r| &r[..]))
        .unwrap();
    assert_eq!(back, batch);
    // Written as Python's protobuf writes them (the canonical form of
    // RecordBuilder), which prost's decoder reads.
    for record in records.iter().chain(&again) {
        assert_eq!(&Record::parse(record).unwrap().encode(), record);
        <grist_ofrecord::proto::OfRecord as prost::Message>::decode(&record[..]).unwrap();
    }

    // Keyed ragged partitions are refused, by name.
    let ragged = FeatureSpec::Ragged(RaggedSpec {
        name: "s".into(),
        dtype: DType::String,
        value_key: None,
        partitions: vec![Partition::RowLengths { key: "l".into() }],
        row_splits_dtype: DType::Int64,
        validate: false,
        tf_class: None,
    });
    let err = encode_batch(&batch, &spec_file(&[ragged])).unwrap_err();
    assert!(err.to_string().contains("\"s\""), "{err}");
}

/// Parts get the mode a plain `File::create` gives in the same folder
/// (they were left with the temporary file's private 0600).
#[cfg(unix)]
#[test]
fn parts_get_the_mode_of_a_created_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mut w = DatasetWriter::create(dir.path())
        .unwrap()
        .with_naming(PartNaming::default());
    w.write_record(b"").unwrap();
    let summary = w.finish().unwrap();
    let ds = Dataset::open(dir.path(), summary.parts, &PartNaming::default()).unwrap();
    let plain = dir.path().join("plain");
    fs::File::create(&plain).unwrap();
    let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for part in ds.parts() {
        assert_eq!(mode(&part.path), mode(&plain), "{}", part.path.display());
    }
}

/// Buffer and chunk sizes far beyond the data are lowered: three records
/// are written, read and cut into one chunk without a buffer of the size
/// asked for (which would not fit in memory).
#[test]
fn huge_buffer_and_chunk_sizes_are_lowered() {
    let payloads = [b"a".to_vec(), b"bc".to_vec(), Vec::new()];
    let dir = tempfile::tempdir().unwrap();
    let mut w = DatasetWriter::create(dir.path())
        .unwrap()
        .with_naming(PartNaming::default())
        .with_buffer_size(usize::MAX);
    for p in &payloads {
        w.write_record(p).unwrap();
    }
    let summary = w.finish().unwrap();
    let ds = Dataset::open(dir.path(), summary.parts, &PartNaming::default())
        .unwrap()
        .with_options(grist_ofrecord::ReaderOptions::default().with_buffer_size(usize::MAX));
    assert_eq!(records_of(&ds), payloads);
    let mut source = grist_ofrecord::OfRecordSource::new(&ds).with_chunk_bytes(usize::MAX);
    let chunk = grist_tensor::RecordSource::next_chunk(&mut source)
        .unwrap()
        .unwrap();
    assert_eq!(chunk.record_count, 3);
    assert!(
        grist_tensor::RecordSource::next_chunk(&mut source)
            .unwrap()
            .is_none()
    );
}

fn spec_file(specs: &[grist_tensor::FeatureSpec]) -> grist_tensor::SpecFile {
    grist_tensor::SpecFile {
        features: specs.to_vec(),
        ..Default::default()
    }
}
