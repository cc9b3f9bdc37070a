//! Spec inference for OFRecords: each sampled record's features told to
//! a [`SpecSampler`].

use grist_tensor::{DType, Location, SpecSampler};

use crate::error::Result;
use crate::record::Record;
use crate::wire::ListKind;

/// The dtype a list of `kind` reads as.
fn dtype_of(kind: ListKind) -> DType {
    match kind {
        ListKind::Bytes => DType::String,
        ListKind::Float => DType::Float32,
        ListKind::Double => DType::Float64,
        ListKind::Int32 => DType::Int32,
        ListKind::Int64 => DType::Int64,
    }
}

/// Tells `sampler` the features of one serialized OFRecord (`at`: where
/// it is, for errors), and ends the record.
///
/// Dtypes follow the lists: `bytes_list` → string, `float_list` →
/// float32, `double_list` → float64, `int32_list` → int32, `int64_list` →
/// int64. A feature whose name is not UTF-8 cannot be named by a spec and
/// is left out, with a note.
///
/// ```
/// use grist_tensor::{DType, FeatureSpec, Location, SpecSampler};
/// use grist_ofrecord::{RecordBuilder, sample_ofrecord};
///
/// let mut sampler = SpecSampler::new();
/// let record = RecordBuilder::new().with_doubles("d", [0.5, 1.5]).encode();
/// sample_ofrecord(&record, &Location::record("mem", 0), &mut sampler)?;
/// let spec = sampler.finish(Some(false)).spec;
/// assert_eq!(spec.features, [FeatureSpec::dense("d", DType::Float64, [2])]);
/// # Ok::<(), grist_ofrecord::Error>(())
/// ```
pub fn sample_ofrecord(record: &[u8], at: &Location, sampler: &mut SpecSampler) -> Result<()> {
    let record = Record::parse_at(record, at)?;
    for (name, value) in &record.features {
        match std::str::from_utf8(name) {
            Ok(name) => sampler.feature(name, value.kind().map(dtype_of), value.len()),
            Err(_) => sampler.leave_out(
                &String::from_utf8_lossy(name),
                "its name is not UTF-8, and a spec names features in UTF-8",
            ),
        }
    }
    sampler.end_record();
    Ok(())
}
