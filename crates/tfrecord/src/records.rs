//! Generic decoding of one record into the manifest JSON form
//! (`decoded_records`): every feature, whatever the specs.

use std::collections::BTreeMap;

use prost::Message;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::proto;
use grist_tensor::Location;
use grist_tensor::json::{bytes_to_json, float_to_json};

/// The JSON form of one `tf.train.Feature`: `{"int64_list": [...]}`,
/// `{"float_list": [...]}`, `{"bytes_list": [...]}`, or `{}` when no kind
/// is set.
pub(crate) fn feature_to_json(feature: &proto::Feature) -> Value {
    use proto::feature::Kind;
    match &feature.kind {
        None => json!({}),
        Some(Kind::Int64List(l)) => json!({ "int64_list": l.value }),
        Some(Kind::FloatList(l)) => {
            let v: Vec<Value> = l.value.iter().map(|&f| float_to_json(f as f64)).collect();
            json!({ "float_list": v })
        }
        Some(Kind::BytesList(l)) => {
            let v: Vec<Value> = l.value.iter().map(|b| bytes_to_json(b)).collect();
            json!({ "bytes_list": v })
        }
    }
}

fn features_to_json(features: &BTreeMap<String, proto::Feature>) -> Value {
    Value::Object(
        features
            .iter()
            .map(|(k, f)| (k.clone(), feature_to_json(f)))
            .collect::<Map<_, _>>(),
    )
}

fn protobuf_error(at: &Location, message: &'static str) -> Error {
    Error::Malformed {
        at: at.clone().into(),
        message,
        reason: "not a valid protobuf message of this type",
        offset: 0,
    }
}

/// Decodes a serialized `tf.train.Example` into the manifest form
/// `{"features": {name: feature}}` (protobuf semantics: for a key given
/// twice, the last one wins).
pub fn example_to_json(record: &[u8], at: &Location) -> Result<Value> {
    let example = proto::Example::decode(record).map_err(|_| protobuf_error(at, "Example"))?;
    let features = example.features.map(|f| f.feature).unwrap_or_default();
    Ok(json!({ "features": features_to_json(&features) }))
}

/// Decodes a serialized `tf.train.SequenceExample` into the manifest form
/// `{"context": {...}, "feature_lists": {name: [feature, ...]}}`.
pub fn sequence_example_to_json(record: &[u8], at: &Location) -> Result<Value> {
    let seq = proto::SequenceExample::decode(record)
        .map_err(|_| protobuf_error(at, "SequenceExample"))?;
    let context = seq.context.map(|f| f.feature).unwrap_or_default();
    let lists = seq
        .feature_lists
        .map(|l| l.feature_list)
        .unwrap_or_default();
    let lists: Map<String, Value> = lists
        .iter()
        .map(|(k, l)| {
            (
                k.clone(),
                Value::Array(l.feature.iter().map(feature_to_json).collect()),
            )
        })
        .collect();
    Ok(json!({ "context": features_to_json(&context), "feature_lists": lists }))
}
