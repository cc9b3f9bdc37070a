//! Arrow record batches built by hand, written to each of the four formats
//! and read back with grist's loader.

use std::sync::Arc;

use arrow_array::builder::{Int64Builder, LargeBinaryBuilder, ListBuilder};
use arrow_array::{
    ArrayRef, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field};
use grist::io::{Address, Storage};
use grist_arrow::{from_record_batch, write_batches};
use grist_tensor::synth::SplitMix64;
use grist_tensor::{Batch, SpecFile, WriteOptions};

/// A record batch of `rows` rows: an int64, a float32, a float32 vector
/// of 3, a list of int64 and a string per row.
fn record_batch(rows: usize, seed: u64) -> RecordBatch {
    let mut rng = SplitMix64::new(seed);
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(
        (0..rows).map(|_| rng.next_u64() as i64 >> 1),
    ));
    let score: ArrayRef = Arc::new(Float32Array::from_iter_values(
        (0..rows).map(|_| rng.normal() as f32),
    ));
    let flat = Float32Array::from_iter_values((0..rows * 3).map(|_| rng.normal() as f32));
    let emb: ArrayRef = Arc::new(FixedSizeListArray::new(
        Arc::new(Field::new("item", DataType::Float32, true)),
        3,
        Arc::new(flat),
        None,
    ));
    let mut tags = ListBuilder::new(Int64Builder::new());
    for _ in 0..rows {
        let n = rng.below(4);
        tags.append_value((0..n).map(|_| Some(rng.below(1000) as i64)));
    }
    let tags: ArrayRef = Arc::new(tags.finish());
    let names: ArrayRef = Arc::new(StringArray::from_iter_values(
        (0..rows).map(|i| format!("row-{i}-{}", rng.below(100))),
    ));
    let mut blob = LargeBinaryBuilder::new();
    for _ in 0..rows {
        let n = rng.below(5) as usize;
        blob.append_value((0..n).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>());
    }
    let blob: ArrayRef = Arc::new(blob.finish());
    RecordBatch::try_from_iter([
        ("id", ids),
        ("score", score),
        ("emb", emb),
        ("tags", tags),
        ("name", names),
        ("blob", blob),
    ])
    .unwrap()
}

#[test]
fn record_batches_to_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let parts = [record_batch(6, 1), record_batch(6, 2)];
    let expected: Vec<Batch> = parts
        .iter()
        .map(|b| from_record_batch(b.clone(), None).unwrap().0)
        .collect();
    let registry = grist::registry();
    for format in registry.formats() {
        let options = WriteOptions::new();
        let path = dir
            .path()
            .join(format.id())
            .join(format.part_name(0, &options));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let (written, spec) = write_batches(
            format.as_ref(),
            &Storage::new(),
            &Address::from(path.as_path()),
            &parts[0].schema(),
            None,
            &options,
            parts.iter().cloned().map(Ok),
        )
        .unwrap_or_else(|e| panic!("{}: {e:?}", format.name()));
        assert_eq!(written.records, 12, "{}", format.name());
        let loaded: Vec<Batch> = grist::loader()
            .with_path(&path)
            .with_spec_file(spec.clone())
            .with_batch_size(6)
            .build()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(loaded.len(), 2, "{}", format.name());
        for (got, want) in loaded.iter().zip(&expected) {
            assert_eq!(got.rows(), want.rows());
            for (g, w) in got.columns().iter().zip(want.columns()) {
                assert_eq!(g, w, "{}: column {}", format.name(), w.name);
            }
            assert_eq!(got.columns().len(), want.columns().len());
        }
        let _: &SpecFile = &spec;
    }
}

/// prod19 (dense and sparse features) through Arrow into every format:
/// the loader reads prod19 back.
#[test]
fn prod19_through_arrow_to_every_format() {
    use grist_tensor::synth::{prod19, prod19_example_specs};
    let dir = tempfile::tempdir().unwrap();
    let spec = SpecFile {
        features: prod19_example_specs(),
        ..SpecFile::default()
    };
    let arrow = grist_arrow::to_record_batch(prod19(50, 3), &spec).unwrap();
    for format in grist::registry().formats() {
        let options = WriteOptions::new();
        let path = dir
            .path()
            .join(format.id())
            .join(format.part_name(0, &options));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let (_, written_spec) = write_batches(
            format.as_ref(),
            &Storage::new(),
            &Address::from(path.as_path()),
            &arrow.schema(),
            None,
            &options,
            [Ok(arrow.clone())],
        )
        .unwrap_or_else(|e| panic!("{}: {e:?}", format.name()));
        let loaded: Vec<Batch> = grist::loader()
            .with_path(&path)
            .with_spec_file(written_spec)
            .with_batch_size(50)
            .build()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(loaded, [prod19(50, 3)], "{}", format.name());
    }
}
