//! Spec inference for tf.Example and tf.SequenceExample records: each
//! sampled record's features told to a [`SpecSampler`].

use grist_tensor::{DType, Location, SpecSampler};
use prost::Message as _;

use crate::error::{Error, Result};
use crate::proto::{self, feature::Kind};

/// The element type and value count of a feature (`None`: a Feature with
/// no list, which reads as missing).
fn observe(feature: &proto::Feature) -> (Option<DType>, usize) {
    match &feature.kind {
        None => (None, 0),
        Some(Kind::Int64List(l)) => (Some(DType::Int64), l.value.len()),
        Some(Kind::FloatList(l)) => (Some(DType::Float32), l.value.len()),
        Some(Kind::BytesList(l)) => (Some(DType::String), l.value.len()),
    }
}

/// Tells `sampler` the features of one serialized record (`at`: where it
/// is, for errors), and ends the record.
///
/// With `sequence` `Some(false)` the record is read as a `tf.Example`;
/// otherwise as a `tf.SequenceExample`, whose context is an Example's
/// features (the same field), so that one reading serves both: a record
/// with `feature_lists` marks the sample as sequence examples. Dtypes
/// follow the lists: `int64_list` → int64, `float_list` → float32,
/// `bytes_list` → string.
///
/// ```
/// use grist_tensor::{DType, FeatureSpec, Location, SpecSampler};
/// use grist_tfrecord::{ExampleBuilder, sample_example};
///
/// let mut sampler = SpecSampler::new();
/// let at = Location::record("mem", 0);
/// let record = ExampleBuilder::new().with_int64s("id", [7]).encode();
/// sample_example(&record, &at, None, &mut sampler)?;
/// let spec = sampler.finish(None).spec;
/// assert_eq!(spec.features, [FeatureSpec::dense("id", DType::Int64, [])]);
/// # Ok::<(), grist_tfrecord::Error>(())
/// ```
pub fn sample_example(
    record: &[u8],
    at: &Location,
    sequence: Option<bool>,
    sampler: &mut SpecSampler,
) -> Result<()> {
    let malformed = |message| Error::Malformed {
        at: Box::new(at.clone()),
        message,
        reason: "not a valid protobuf message of this type",
        offset: 0,
    };
    if sequence == Some(false) {
        let example = proto::Example::decode(record).map_err(|_| malformed("Example"))?;
        for (name, f) in example.features.iter().flat_map(|f| &f.feature) {
            let (dtype, n) = observe(f);
            sampler.feature(name, dtype, n);
        }
    } else {
        let seq =
            proto::SequenceExample::decode(record).map_err(|_| malformed("SequenceExample"))?;
        for (name, f) in seq.context.iter().flat_map(|c| &c.feature) {
            let (dtype, n) = observe(f);
            sampler.feature(name, dtype, n);
        }
        if let Some(lists) = &seq.feature_lists {
            sampler.saw_sequence();
            for (name, list) in &lists.feature_list {
                sampler.feature_list(name, list.feature.iter().map(observe));
            }
        }
    }
    sampler.end_record();
    Ok(())
}
