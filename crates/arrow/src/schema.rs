//! What the Arrow schema says about grist: field names, the metadata that
//! carries each feature's spec, and the spec of a schema without it.

use std::collections::HashMap;

use arrow_schema::{DataType, Field, Schema};
use grist_tensor::{DType, FeatureSpec, Section, SpecFile, VarlenSpec};

use crate::Error;

/// Field metadata key: the feature kind (`dense`, `varlen`, `sparse`,
/// `ragged`, `fixed_len_sequence`, or `feature_list_length` for the
/// lengths column of a padded sequence feature).
pub const KIND_KEY: &str = "grist.kind";
/// Field metadata key: the feature's spec as grist's JSON.
pub const SPEC_KEY: &str = "grist.spec";
/// Field metadata key: the batch section (`outputs`, `context`,
/// `feature_lists`, `feature_list_lengths`).
pub const SECTION_KEY: &str = "grist.section";
/// Field metadata key: the feature name (the field name may carry a
/// section prefix).
pub const NAME_KEY: &str = "grist.name";
/// Schema metadata key: `"true"` when the batches are of
/// `tf.SequenceExample`s.
pub const SEQUENCE_KEY: &str = "grist.sequence";

/// The kind of the lengths column of a padded sequence feature.
pub(crate) const LENGTHS_KIND: &str = "feature_list_length";

/// The Arrow field name of feature `name` in `section`: the name itself for
/// plain records; `context/NAME`, `feature_lists/NAME` and
/// `feature_list_lengths/NAME` for the sections of a sequence example, since
/// a feature list and its lengths share a name and Arrow engines want
/// unique field names.
pub fn field_name(section: Section, name: &str) -> String {
    match section {
        Section::Features => name.to_string(),
        other => format!("{}/{name}", other.key()),
    }
}

pub(crate) fn section_from_key(key: &str) -> Option<Section> {
    Some(match key {
        "outputs" => Section::Features,
        "context" => Section::Context,
        "feature_lists" => Section::FeatureLists,
        "feature_list_lengths" => Section::FeatureListLengths,
        _ => return None,
    })
}

/// The section and feature name of a field: from its metadata, else the
/// field name in the plain-record section.
pub(crate) fn field_place(field: &Field) -> (Section, String) {
    let meta = field.metadata();
    let section = meta
        .get(SECTION_KEY)
        .and_then(|k| section_from_key(k))
        .unwrap_or(Section::Features);
    let name = meta
        .get(NAME_KEY)
        .cloned()
        .unwrap_or_else(|| field.name().clone());
    (section, name)
}

pub(crate) fn metadata(
    section: Section,
    name: &str,
    kind: &str,
    spec: Option<&FeatureSpec>,
) -> HashMap<String, String> {
    let mut m = HashMap::from([
        (KIND_KEY.to_string(), kind.to_string()),
        (SECTION_KEY.to_string(), section.key().to_string()),
        (NAME_KEY.to_string(), name.to_string()),
    ]);
    if let Some(spec) = spec {
        // A spec is plain fields and JSON values: serializing cannot fail.
        m.insert(
            SPEC_KEY.to_string(),
            serde_json::to_string(spec).unwrap_or_default(),
        );
    }
    m
}

/// The grist dtype Arrow values of `data_type` are read as, if any: the
/// exact types, and the integers that widen exactly (`int8`, `int16`,
/// `uint8`, `uint16` → int32; `uint32` → int64). Every string and binary
/// type is `string`.
pub(crate) fn leaf_dtype(data_type: &DataType) -> Option<DType> {
    Some(match data_type {
        DataType::Boolean => DType::Bool,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => {
            DType::Int32
        }
        DataType::Int64 | DataType::UInt32 => DType::Int64,
        DataType::Float32 => DType::Float32,
        DataType::Float64 => DType::Float64,
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView => DType::String,
        _ => return None,
    })
}

/// The spec that reads record batches of `schema` back into the batches
/// they were made from, or, for a schema from another Arrow producer, the
/// spec of its columns.
///
/// A field with `grist.spec` metadata (as [`to_record_batch`] writes it)
/// gets that spec, in its section. Otherwise, by type: a primitive, bool,
/// string or binary column is a dense scalar feature; fixed-size lists of
/// those a dense feature of their shape; `List`/`LargeList`s nested `k`
/// deep over a primitive a varlen feature (of rank `k` when `k > 1`). Any
/// other type is refused, naming the column. The lengths columns of padded
/// sequence features are left out (the decoder makes them).
///
/// [`to_record_batch`]: crate::to_record_batch
pub fn spec_from_schema(schema: &Schema) -> Result<SpecFile, Error> {
    let mut spec = SpecFile {
        sequence: schema.metadata().get(SEQUENCE_KEY).map(String::as_str) == Some("true"),
        ..SpecFile::default()
    };
    for field in schema.fields() {
        let (section, _) = field_place(field);
        if field.metadata().get(KIND_KEY).map(String::as_str) == Some(LENGTHS_KIND) {
            continue;
        }
        let feature = feature_of(field)?;
        match section {
            Section::Context => spec.context_features.push(feature),
            Section::FeatureLists => spec.sequence_features.push(feature),
            Section::Features | Section::FeatureListLengths => spec.features.push(feature),
        }
    }
    Ok(spec)
}

/// The spec of one field: its metadata's, or one inferred from its type.
pub(crate) fn feature_of(field: &Field) -> Result<FeatureSpec, Error> {
    if let Some(json) = field.metadata().get(SPEC_KEY) {
        return serde_json::from_str(json).map_err(|source| Error::SpecMetadata {
            column: field.name().clone(),
            source,
        });
    }
    let column = field.name();
    let (_, name) = field_place(field);
    let mut ty = field.data_type();
    let mut fixed = Vec::new();
    let mut lists = 0usize;
    loop {
        match ty {
            DataType::FixedSizeList(child, size) if lists == 0 => {
                fixed.push(i64::from(*size));
                ty = child.data_type();
            }
            DataType::List(child) | DataType::LargeList(child) if fixed.is_empty() => {
                lists += 1;
                ty = child.data_type();
            }
            leaf => {
                let dtype = leaf_dtype(leaf).ok_or_else(|| Error::unsupported(column, leaf))?;
                return Ok(match lists {
                    0 => FeatureSpec::dense(name, dtype, fixed),
                    1 => FeatureSpec::varlen(name, dtype),
                    rank => FeatureSpec::Varlen(VarlenSpec {
                        name,
                        dtype,
                        shape: None,
                        rank: Some(rank),
                        tf_class: None,
                        atds_class: None,
                    }),
                });
            }
        }
    }
}
