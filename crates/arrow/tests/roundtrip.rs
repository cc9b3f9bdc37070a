//! Batch → RecordBatch → Batch gives the batch and its spec back.

use arrow_schema::DataType;
use grist_arrow::{from_record_batch, spec_from_schema, to_record_batch};
use grist_tensor::synth::{prod19, prod19_example_specs, prod19_native, prod19_native_specs};
use grist_tensor::{
    Batch, Column, DType, DenseTensor, FeatureSpec, FixedLenSequenceSpec, Section, SpecFile,
    Tensor, Values,
};

use crate::support::{self, every_kind};

/// Converts both ways, with the spec from the schema and with the given
/// one, and checks everything comes back.
fn round_trip(batch: &Batch, spec: &SpecFile) {
    let arrow = to_record_batch(batch.clone(), spec).unwrap();
    assert_eq!(arrow.num_rows(), batch.rows());
    assert_eq!(arrow.num_columns(), batch.columns().len());
    let inferred = spec_from_schema(&arrow.schema()).unwrap();
    assert_eq!(inferred, *spec);
    let (back, back_spec) = from_record_batch(arrow.clone(), None).unwrap();
    assert_eq!(back_spec, *spec);
    for (a, b) in batch.columns().iter().zip(back.columns()) {
        assert_eq!(a, b, "column {}", a.name);
    }
    assert_eq!(back, *batch);
    let (back, _) = from_record_batch(arrow, Some(spec)).unwrap();
    assert_eq!(back, *batch);
}

#[test]
fn every_kind_and_dtype() {
    for (rows, seed) in [(1, 1), (7, 2), (40, 3)] {
        let (batch, spec) = every_kind(rows, seed);
        round_trip(&batch, &spec);
    }
}

#[test]
fn zero_rows() {
    let (batch, spec) = every_kind(0, 4);
    assert!(!batch.columns().is_empty());
    round_trip(&batch, &spec);
}

#[test]
fn empty_batch() {
    for rows in [0, 5] {
        let batch = Batch::new(rows, Vec::new());
        let arrow = to_record_batch(batch.clone(), &SpecFile::default()).unwrap();
        assert_eq!(arrow.num_rows(), rows);
        let (back, _) = from_record_batch(arrow, None).unwrap();
        assert_eq!(back, batch);
    }
}

#[test]
fn strings_are_utf8_only_when_every_value_is() {
    let mut rng = grist_tensor::synth::SplitMix64::new(9);
    for (binary, want) in [(false, DataType::LargeUtf8), (true, DataType::LargeBinary)] {
        let batch = Batch::new(
            5,
            vec![support::column(
                "s",
                support::dense(&mut rng, DType::String, 5, &[], binary),
            )],
        );
        let spec = SpecFile {
            features: vec![FeatureSpec::dense("s", DType::String, [])],
            ..SpecFile::default()
        };
        let arrow = to_record_batch(batch.clone(), &spec).unwrap();
        assert_eq!(arrow.column(0).data_type(), &want);
        round_trip(&batch, &spec);
    }
    // Valid as a whole but cut inside a character: not UTF-8 per value.
    let s: grist_tensor::StringValues = ["é".as_bytes()[..1].as_ref(), &"é".as_bytes()[1..]]
        .into_iter()
        .collect();
    let batch = Batch::new(
        2,
        vec![support::column(
            "s",
            Tensor::Dense(DenseTensor {
                shape: vec![2],
                values: Values::String(s),
            }),
        )],
    );
    let spec = SpecFile {
        features: vec![FeatureSpec::dense("s", DType::String, [])],
        ..SpecFile::default()
    };
    let arrow = to_record_batch(batch.clone(), &spec).unwrap();
    assert_eq!(arrow.column(0).data_type(), &DataType::LargeBinary);
    round_trip(&batch, &spec);
}

#[test]
fn prod19_batches() {
    for (rows, seed) in [(1, 5), (256, 6), (1024, 7)] {
        let spec = SpecFile {
            features: prod19_example_specs(),
            ..SpecFile::default()
        };
        round_trip(&prod19(rows, seed), &spec);
        let spec = SpecFile {
            features: prod19_native_specs(),
            ..SpecFile::default()
        };
        round_trip(&prod19_native(rows, seed), &spec);
    }
}

#[test]
fn sequence_example_sections() {
    let mut rng = grist_tensor::synth::SplitMix64::new(11);
    let rows = 6;
    let steps = 3;
    let seq = FeatureSpec::FixedLenSequence(FixedLenSequenceSpec {
        name: "x".into(),
        dtype: DType::Float32,
        shape: vec![2],
        allow_missing: true,
        default: None,
        tf_class: None,
    });
    let lengths: Vec<i64> = (0..rows)
        .map(|_| rng.below(steps as u64 + 1) as i64)
        .collect();
    let columns = vec![
        Column {
            name: "x".into(),
            section: Section::Context,
            tensor: support::dense(&mut rng, DType::Int64, rows, &[], false),
        },
        Column {
            name: "x".into(),
            section: Section::FeatureLists,
            tensor: support::dense(&mut rng, DType::Float32, rows, &[steps, 2], false),
        },
        Column {
            name: "x".into(),
            section: Section::FeatureListLengths,
            tensor: Tensor::Dense(DenseTensor {
                shape: vec![rows],
                values: Values::Int64(lengths),
            }),
        },
    ];
    let spec = SpecFile {
        context_features: vec![FeatureSpec::dense("x", DType::Int64, [])],
        sequence_features: vec![seq],
        sequence: true,
        ..SpecFile::default()
    };
    let batch = Batch::new(rows, columns);
    let arrow = to_record_batch(batch.clone(), &spec).unwrap();
    let names: Vec<_> = arrow
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        names,
        ["context/x", "feature_lists/x", "feature_list_lengths/x"]
    );
    round_trip(&batch, &spec);
}

#[test]
fn columns_outside_the_spec_are_described_from_their_tensors() {
    let (batch, spec) = every_kind(5, 12);
    // Without a spec, sparse features read back as varlen ones: keep the
    // other kinds, whose description is exact.
    let keep = |f: &FeatureSpec| {
        !matches!(f, FeatureSpec::Sparse(_) | FeatureSpec::Ragged(_))
            && !f.name().starts_with("padded")
    };
    let columns: Vec<Column> = batch
        .columns()
        .iter()
        .filter(|c| spec.features.iter().any(|f| f.name() == c.name && keep(f)))
        .cloned()
        .collect();
    let batch = Batch::new(5, columns);
    let arrow = to_record_batch(batch.clone(), &SpecFile::default()).unwrap();
    let (back, _) = from_record_batch(arrow, None).unwrap();
    assert_eq!(back, batch);
}

#[test]
fn sliced_record_batches_read_as_their_rows() {
    let (batch, spec) = every_kind(40, 13);
    let arrow = to_record_batch(batch, &spec).unwrap();
    for (offset, len) in [(0, 0), (3, 10), (39, 1), (0, 40)] {
        let sliced = arrow.slice(offset, len);
        let (back, _) = from_record_batch(sliced.clone(), None).unwrap();
        assert_eq!(back.rows(), len);
        // Arrow compares arrays by their values: the rows read are the
        // slice's rows. (A string column may turn UTF-8 when the slice
        // leaves out its binary values: see strings_are_utf8_only_...)
        let again = to_record_batch(back.clone(), &spec).unwrap();
        for (i, (a, b)) in again.columns().iter().zip(sliced.columns()).enumerate() {
            let name = sliced.schema().field(i).name().clone();
            if a.data_type() == b.data_type() {
                assert_eq!(a, b, "{name} at {offset}+{len}");
            } else {
                let strings = [a.data_type(), b.data_type()].map(|t| t.to_string());
                assert!(
                    strings.iter().any(|t| t.contains("LargeUtf8")),
                    "{name}: {strings:?}"
                );
                assert!(
                    strings.iter().any(|t| t.contains("LargeBinary")),
                    "{name}: {strings:?}"
                );
            }
        }
        assert_eq!(from_record_batch(again, None).unwrap().0, back);
    }
}
