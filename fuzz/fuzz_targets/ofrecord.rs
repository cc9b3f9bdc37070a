//! Fuzzes OFRecord: the input (after one selector byte) is a part file.
//!
//! * Framing: the sans-I/O `FrameDecoder`, the streaming `RecordReader`
//!   (small buffers) and the `OfRecordSource` (small chunks) find the same
//!   records and the same error; re-framing what was read with
//!   `RecordWriter` gives back the input's bytes.
//! * Parsing: each record through `Record::parse` (and, when it parses,
//!   its canonical encoding parses back to the same record and to the same
//!   bytes), and through an `OfRecordDecoder` under one of several field
//!   configurations over the keys "a".."e" chosen by the selector: every
//!   error names its record, a record `Record::parse` refuses is a
//!   `protobuf` error, a failed record leaves only whole rows, and every
//!   finished batch has a JSON form.
#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use grist_ofrecord::{
    BytesSpec, Dataset, Decoded, Error, Field, FrameDecoder, Location, OfRecordDecoder,
    OfRecordSource, RawDType, RawSpec, ReaderOptions, Record, RecordReader, RecordWriter,
};
use grist_tensor::json::batch_to_json;
use grist_tensor::{DType, FeatureSpec, Limits, Partition, RaggedSpec, RecordSource};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

/// Small limits, so a fuzzed length cannot make a run slow.
fn limits() -> Limits {
    Limits::default()
        .with_max_record_bytes(1 << 20)
        .with_max_alloc_bytes(4 << 20)
}

/// The field configurations, by selector.
fn configs() -> &'static [Vec<Field>] {
    static CONFIGS: OnceLock<Vec<Vec<Field>>> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        let spec = |v: serde_json::Value| Field::from_json(&v).expect("a valid field");
        let dtypes = [
            DType::Int64,
            DType::Int32,
            DType::Float32,
            DType::Float64,
            DType::String,
            DType::Bool,
        ];
        let raw = [
            RawDType::Int8,
            RawDType::Uint8,
            RawDType::Int32,
            RawDType::Int64,
            RawDType::Float32,
            RawDType::Float64,
        ];
        let mut out: Vec<Vec<Field>> = Vec::new();
        for d in dtypes {
            out.push(vec![
                FeatureSpec::varlen("a", d).into(),
                FeatureSpec::dense("b", d, [2]).into(),
                spec(json!({"name": "c", "kind": "dense", "dtype": d.name(), "shape": [], "default": if d == DType::String { json!("x") } else if d == DType::Bool { json!(true) } else { json!(1) }})),
            ]);
        }
        for r in raw {
            for (truncate, varying) in [(false, false), (true, false), (false, true)] {
                out.push(vec![
                    RawSpec::new("a", [3], r)
                        .with_truncate(truncate)
                        .with_dim1_varying_length(varying)
                        .into(),
                    RawSpec::new("b", [2, 2], r)
                        .with_dim1_varying_length(varying)
                        .into(),
                ]);
            }
        }
        out.push(vec![
            Field::Bytes(BytesSpec { name: "a".into() }),
            FeatureSpec::sparse("s", DType::Float32, "b", "c", 5).into(),
        ]);
        out.push(vec![
            spec(json!({"name": "s2", "kind": "sparse", "dtype": "int64", "index_key": ["a", "b"], "value_key": "c", "size": [3, 4], "already_sorted": false})),
            spec(json!({"name": "q", "kind": "fixed_len_sequence", "dtype": "float32", "shape": [2], "allow_missing": true, "default": -1.0})),
        ]);
        for p in [
            Partition::RowLengths { key: "b".into() },
            Partition::RowSplits { key: "b".into() },
            Partition::RowStarts { key: "b".into() },
            Partition::RowLimits { key: "b".into() },
            Partition::ValueRowids { key: "b".into() },
            Partition::UniformRowLength { length: 2 },
        ] {
            for validate in [false, true] {
                out.push(vec![FeatureSpec::Ragged(RaggedSpec {
                    name: "r".into(),
                    dtype: DType::Int64,
                    value_key: Some("a".into()),
                    partitions: vec![p.clone(), Partition::UniformRowLength { length: 1 }],
                    row_splits_dtype: DType::Int64,
                    validate,
                    tf_class: None,
                })
                .into()]);
            }
        }
        out
    })
}

/// The records the sans-I/O decoder finds, and its error.
fn frame(data: &[u8]) -> (Vec<Vec<u8>>, Option<Error>) {
    let options = ReaderOptions::default().with_limits(limits());
    let mut dec = FrameDecoder::with_options("fuzz", &options).with_remaining(data.len() as u64);
    let mut rest = data;
    let mut out = Vec::new();
    loop {
        match dec.decode(rest) {
            Ok(Decoded::Frame(f)) => {
                out.push(rest[f.payload].to_vec());
                rest = &rest[f.len..];
            }
            Ok(Decoded::Incomplete { .. }) => return (out, dec.finish(rest).err()),
            Err(e) => return (out, Some(e)),
        }
    }
}

fn scratch_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("grist-fuzz-ofrecord-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch folder");
        dir
    })
}

fuzz_target!(|input: &[u8]| {
    let Some((&selector, data)) = input.split_first() else {
        return;
    };
    let (records, error) = frame(data);

    // The streaming reader agrees, at a small buffer size.
    let options = ReaderOptions::default()
        .with_limits(limits())
        .with_buffer_size(16 + usize::from(selector));
    let mut reader = RecordReader::new(data, "fuzz", options);
    let mut read = Vec::new();
    let read_error = loop {
        match reader.next_record() {
            Ok(Some(r)) => read.push(r.payload.to_vec()),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    assert!(matches!(reader.next_record(), Ok(None)));
    assert_eq!(read, records);
    // Without the file size the reader may see a limit before the end.
    assert_eq!(read_error.is_some(), error.is_some());

    // Re-framing gives back the bytes read.
    let mut writer = RecordWriter::new(Vec::new());
    for r in &records {
        writer.write_record(r).expect("in-memory write");
    }
    let bytes = writer.into_inner();
    assert_eq!(&data[..bytes.len()], &bytes[..]);

    // The chunk source over the bytes as a part file.
    let path = scratch_dir().join("part-0");
    if std::fs::write(&path, data).is_ok() {
        let ds = Dataset::from_files([&path])
            .with_options(ReaderOptions::default().with_limits(limits()));
        let mut source = OfRecordSource::new(&ds).with_chunk_bytes(16 + usize::from(selector) * 4);
        let mut chunked = Vec::new();
        let chunk_error = loop {
            match source.next_chunk() {
                Ok(Some(c)) => {
                    assert_eq!(c.first_record, chunked.len() as u64);
                    for i in 0..c.record_count {
                        chunked.push(c.record(i).expect("span in the chunk").to_vec());
                    }
                }
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        assert_eq!(chunked, records);
        assert_eq!(
            chunk_error.map(|e| e.manifest_kind()),
            error.as_ref().map(|e| e.manifest_kind())
        );
        let _ = std::fs::remove_file(&path);
    }

    // Parsing and decoding.
    let fields = &configs()[usize::from(selector) % configs().len()];
    let mut decoder = OfRecordDecoder::with_fields(fields)
        .expect("the configurations are valid")
        .with_limits(limits());
    let file: Arc<str> = "fuzz".into();
    let mut out = decoder.new_batch(records.len());
    for (i, payload) in records.iter().enumerate() {
        let at = Location::record(file.clone(), i as u64);
        let parsed = Record::parse_at(payload, &at);
        match &parsed {
            Ok(record) => {
                record.to_json();
                let canonical = record.encode();
                let again = Record::parse(&canonical).expect("canonical bytes parse");
                assert_eq!(
                    again.to_json_with(usize::MAX),
                    record.to_json_with(usize::MAX)
                );
                assert_eq!(again.encode(), canonical);
            }
            Err(e) => assert_eq!(e.location(), Some(&at)),
        }
        let rows = out.rows();
        match decoder.decode(payload, &at, &mut out) {
            Ok(()) => {
                assert!(parsed.is_ok());
                assert_eq!(out.rows(), rows + 1);
            }
            Err(e) => {
                // The record's location, naming the field at fault when
                // one is.
                let named = e.location().map(|l| (&l.file, l.record, l.block, l.offset));
                assert_eq!(named, Some((&at.file, at.record, None, None)), "{e}");
                if let Some(name) = e.location().and_then(|l| l.feature.as_deref()) {
                    assert!(fields.iter().any(|f| f.name() == name), "{e}");
                }
                assert_eq!(e.manifest_kind() == "protobuf", parsed.is_err(), "{e}");
                assert_eq!(out.rows(), rows);
            }
        }
    }
    if let Ok(batch) = decoder.finish(&mut out, &file, 0) {
        batch_to_json(&batch);
    }
    assert_eq!(out.rows(), 0);
});
