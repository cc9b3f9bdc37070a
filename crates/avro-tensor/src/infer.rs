//! Spec inference from a writer schema, in the ATDS layout the decoder
//! reads (the inverse of [`schema_for_specs`](crate::schema_for_specs)),
//! and key expressions for what that layout lacks: the leaves of nested
//! records (`name.first`) and of arrays of records (`points[*].x`).

use std::collections::BTreeMap;
use std::sync::Arc;

use grist_tensor::{
    DType, FeatureSpec, InferNote, InferOptions, Inferred, Input, SparseSpec, SpecFile,
    TensorError, UNKNOWN_DIM, VarlenSpec,
};
use serde_json::{Value, json};

use crate::container::ReaderOptions;
use crate::error::{Error, Result};
use crate::generic::{AvroValue, DatumSchema};
use crate::report;
use crate::resolve::ReaderSchema;
use crate::schema::{Node, Schema};

/// The dtype a leaf of the writer schema reads as, if it is a leaf.
fn leaf_dtype(node: &Node) -> Option<DType> {
    Some(match node {
        Node::Int => DType::Int32,
        Node::Long => DType::Int64,
        Node::Float => DType::Float32,
        Node::Double => DType::Float64,
        Node::Boolean => DType::Bool,
        Node::Bytes | Node::String | Node::Enum { .. } | Node::Fixed(_) => DType::String,
        _ => return None,
    })
}

/// The value a null of a nullable dense feature reads as.
fn zero(dtype: DType) -> Value {
    match dtype {
        DType::Bool => json!(false),
        DType::Float32 | DType::Float64 => json!(0.0),
        DType::String => json!(""),
        _ => json!(0),
    }
}

/// What one top-level field becomes.
#[derive(Debug, PartialEq)]
enum Field {
    Spec(FeatureSpec),
    /// An ATDS sparse record of this rank, its shape still to be found.
    Sparse {
        dtype: DType,
        rank: usize,
    },
    /// A nested record or an array of records, read through key
    /// expressions: a feature per leaf, and the leaves left out (path,
    /// why).
    Nested {
        specs: Vec<FeatureSpec>,
        skipped: Vec<(String, String)>,
    },
}

/// The key-expression features of the leaves under `node`, reached by
/// `path` through `levels` arrays: a dense scalar outside arrays (a zero
/// default under a null), a varlen of rank `levels` inside.
fn nested(
    schema: &Schema,
    path: String,
    node: usize,
    levels: usize,
    nullable: bool,
    seen: &mut Vec<usize>,
    out: &mut (Vec<FeatureSpec>, Vec<(String, String)>),
) {
    let n = schema.node(node);
    if let Some(dtype) = leaf_dtype(n) {
        if levels == 0 {
            let spec = FeatureSpec::dense(path, dtype, []);
            out.0.push(if nullable {
                spec.with_default(zero(dtype))
            } else {
                spec
            });
        } else if matches!(n, Node::Fixed(0)) {
            out.1.push((
                path,
                "fixed(0) values in arrays cannot be read: nothing bounds how many".into(),
            ));
        } else {
            out.0.push(FeatureSpec::Varlen(VarlenSpec {
                name: path,
                dtype,
                shape: None,
                rank: Some(levels),
                tf_class: None,
                atds_class: None,
            }));
        }
        return;
    }
    match n {
        Node::Union(b) if b.len() == 2 => match (schema.node(b[0]), schema.node(b[1])) {
            (Node::Null, Node::Null) => {}
            (Node::Null, _) => nested(schema, path, b[1], levels, true, seen, out),
            (_, Node::Null) => nested(schema, path, b[0], levels, true, seen, out),
            _ => out.1.push((
                path,
                format!("union {} is not [null, T]", schema.type_name(node)),
            )),
        },
        Node::Record { fields, .. } => {
            if seen.contains(&node) {
                out.1.push((path, "the record type is recursive".into()));
                return;
            }
            seen.push(node);
            for (f, fnode) in fields {
                nested(
                    schema,
                    format!("{path}.{f}"),
                    *fnode,
                    levels,
                    nullable,
                    seen,
                    out,
                );
            }
            seen.pop();
        }
        Node::Array(items) => nested(
            schema,
            format!("{path}[*]"),
            *items,
            levels + 1,
            nullable,
            seen,
            out,
        ),
        Node::Map(_) => out.1.push((
            path,
            "maps have no fixed keys to name (read one with ['key'])".into(),
        )),
        Node::Null => {}
        _ => out.1.push((
            path,
            format!("{} holds no value to read", schema.type_name(node)),
        )),
    }
}

/// [`nested`] from a top-level field, or why it gives nothing.
fn nested_field(
    schema: &Schema,
    name: &str,
    node: usize,
    atds_why: String,
) -> std::result::Result<Field, String> {
    let mut out = (Vec::new(), Vec::new());
    nested(
        schema,
        name.to_string(),
        node,
        0,
        false,
        &mut Vec::new(),
        &mut out,
    );
    if out.0.is_empty() {
        return Err(out
            .1
            .first()
            .map_or(atds_why, |(p, why)| format!("{p}: {why}")));
    }
    Ok(Field::Nested {
        specs: out.0,
        skipped: out.1,
    })
}

/// How `node` (the value of field `name`, nulls aside) reads in the ATDS
/// layout, or why it cannot.
fn field(schema: &Schema, name: &str, node: usize) -> std::result::Result<Field, String> {
    let n = schema.node(node);
    if let Some(dtype) = leaf_dtype(n) {
        return Ok(Field::Spec(FeatureSpec::dense(name, dtype, [])));
    }
    match n {
        Node::Array(_) => {
            let mut leaf = node;
            let mut rank = 0;
            while let Node::Array(items) = schema.node(leaf) {
                leaf = *items;
                rank += 1;
            }
            match (schema.node(leaf), leaf_dtype(schema.node(leaf))) {
                (Node::Fixed(0), _) => Err(
                    "arrays of fixed(0) cannot be read: nothing bounds how many items they claim"
                        .into(),
                ),
                (Node::Record { .. } | Node::Union(_) | Node::Array(_), _) => nested_field(
                    schema,
                    name,
                    node,
                    format!("{} holds no value to read", schema.type_name(node)),
                ),
                (_, Some(dtype)) => Ok(Field::Spec(FeatureSpec::Varlen(VarlenSpec {
                    name: name.to_string(),
                    dtype,
                    shape: Some(vec![UNKNOWN_DIM; rank]),
                    rank: None,
                    tf_class: None,
                    atds_class: None,
                }))),
                _ => Err(format!(
                    "{} is not an array of primitives (the ATDS layout nests only arrays of \
                     int, long, float, double, boolean, string, bytes, enum or fixed)",
                    schema.type_name(node)
                )),
            }
        }
        Node::Record { fields, .. } => match sparse(schema, fields) {
            Some(f) => Ok(f),
            None => nested_field(
                schema,
                name,
                node,
                format!("{} has no field to read", schema.type_name(node)),
            ),
        },
        Node::Map(_) => Err(format!(
            "maps have no keys in the schema to name: read one with a key expression \
                 such as {name}['key']"
        )),
        Node::Union(_) => Err(format!(
            "union {} is not [null, T]: the ATDS reader reads no other union",
            schema.type_name(node)
        )),
        _ => Err(format!("{} holds no value to read", schema.type_name(node))),
    }
}

/// The rank and dtype of an ATDS sparse record, if `fields` make one.
fn sparse(schema: &Schema, fields: &[(String, usize)]) -> Option<Field> {
    let array_of = |node: usize| match schema.node(node) {
        Node::Array(items) => Some(schema.node(*items)),
        _ => None,
    };
    let mut indices = Vec::new();
    let mut dtype = None;
    for (name, node) in fields {
        if let Some(k) = name
            .strip_prefix("indices")
            .and_then(|k| k.parse::<usize>().ok())
        {
            if !matches!(array_of(*node), Some(Node::Int | Node::Long)) {
                return None;
            }
            indices.push(k);
        } else if name == "values" {
            dtype = array_of(*node)
                .filter(|leaf| !matches!(leaf, Node::Fixed(0)))
                .and_then(leaf_dtype);
        }
    }
    indices.sort_unstable();
    let rank = indices.len();
    let dense = indices.iter().enumerate().all(|(i, &k)| i == k);
    (rank > 0 && dense).then_some(Field::Sparse {
        dtype: dtype?,
        rank,
    })
}

/// The largest index of each dimension seen in the sparse records of
/// field `name` of one datum.
fn widen(value: &AvroValue<'_>, name: &str, max: &mut [Option<i64>]) {
    let AvroValue::Record(fields) = value else {
        return;
    };
    let Some((_, v)) = fields.iter().find(|(f, _)| *f == name) else {
        return;
    };
    let v = match v {
        AvroValue::Union { value, .. } => value.as_ref(),
        v => v,
    };
    let AvroValue::Record(parts) = v else {
        return;
    };
    for (part, items) in parts {
        let Some(k) = part
            .strip_prefix("indices")
            .and_then(|k| k.parse::<usize>().ok())
        else {
            continue;
        };
        let (Some(slot), AvroValue::Array(items)) = (max.get_mut(k), items) else {
            continue;
        };
        for item in items {
            let i = match *item {
                AvroValue::Int(i) => i as i64,
                AvroValue::Long(i) => i,
                _ => continue,
            };
            *slot = Some(slot.map_or(i, |m: i64| m.max(i)));
        }
    }
}

/// What each top-level field of the writer schema of `input` becomes, in
/// writer order: its field (and whether it is `[null, T]`), or why the
/// ATDS layout cannot read it.
type Fields = Vec<(String, std::result::Result<(Field, bool), String>)>;

/// The writer schema of `input` (only its header is read).
fn writer_schema(input: &Input, options: &ReaderOptions) -> Result<DatumSchema> {
    // A remote object is not read far ahead for its header.
    let header_only = input.clone().with_read_ahead(64 << 10);
    let reader = report::open(&header_only, options.clone())?;
    Ok(reader.schema().clone())
}

/// What each top-level field of `schema` (the writer schema of `file`,
/// or a reader schema) becomes.
fn fields_of(schema: &Schema, file: &Arc<str>, which: &str) -> Result<Fields> {
    let Node::Record { fields, .. } = schema.node(schema.root) else {
        return Err(Error::Schema {
            file: file.clone(),
            feature: String::new(),
            reason: format!(
                "the {which} schema is {}, not a record of fields: the ATDS layout reads records",
                schema.type_name(schema.root)
            ),
        });
    };
    Ok(fields
        .iter()
        .map(|(name, node)| {
            let (nullable, node) = match schema.node(*node) {
                Node::Union(b) if b.len() == 2 => match (schema.node(b[0]), schema.node(b[1])) {
                    (Node::Null, Node::Null) => (false, *node),
                    (Node::Null, _) => (true, b[1]),
                    (_, Node::Null) => (true, b[0]),
                    _ => (false, *node),
                },
                _ => (false, *node),
            };
            let f = field(schema, name, node).map(|f| (f, nullable));
            (name.clone(), f)
        })
        .collect())
}

/// The fields of `input`'s writer schema.
fn writer_fields(input: &Input, options: &ReaderOptions) -> Result<Fields> {
    let schema = writer_schema(input, options)?;
    fields_of(schema.schema(), input.name(), "writer")
}

/// The spec of `inputs` from the first one's writer schema (see
/// `AvroFormat::infer_spec`); a feature that another input's schema lacks
/// or types otherwise is left out, with a note naming that input. With a
/// reader schema, from it: every input's writer schema must resolve
/// against it (else the error names the file and the field), and the
/// spec carries it.
pub(crate) fn infer(inputs: &[Input], options: &InferOptions) -> Result<Inferred> {
    let Some(first) = inputs.first() else {
        return Err(Error::Spec(TensorError::NoRecords {
            inputs: grist_tensor::inputs_named(inputs),
        }));
    };
    let reader_options = ReaderOptions::default().with_limits(options.read.limits);
    let reader = match &options.reader_schema {
        Some(json) => Some(ReaderSchema::from_value(json)?),
        None => None,
    };
    let mut notes = Vec::new();
    let mut fields = match &reader {
        Some(r) => {
            for input in inputs {
                writer_schema(input, &reader_options)?.with_reader_schema(input.name(), r)?;
            }
            fields_of(r.schema(), &Arc::from("the reader schema"), "reader")?
        }
        None => writer_fields(first, &reader_options)?,
    };
    // Without a reader schema, each input's writer schema is compared.
    let others = if reader.is_some() {
        &[][..]
    } else {
        &inputs[1..]
    };
    for input in others {
        let theirs = writer_fields(input, &reader_options)?;
        for (name, mine) in &mut fields {
            let Ok(mine_ok) = mine else { continue };
            let same = theirs
                .iter()
                .any(|(n, f)| n == name && f.as_ref().ok() == Some(&*mine_ok));
            if !same {
                *mine = Err(format!(
                    "{} has no such field, or one of another type (its writer schema differs \
                     from {}'s)",
                    input.name(),
                    first.name()
                ));
            }
        }
    }
    // In writer order; sparse fields wait for their shapes.
    let mut out: Vec<Option<FeatureSpec>> = Vec::new();
    let mut pending: BTreeMap<usize, (String, DType, Vec<Option<i64>>)> = BTreeMap::new();
    for (name, f) in fields {
        match f {
            Err(why) => notes.push(InferNote::skipped(&name, why)),
            Ok((Field::Spec(spec), true)) if spec.kind() == "dense" => {
                let zero = zero(spec.dtype());
                notes.push(InferNote::kept(
                    &name,
                    format!("the field is nullable: a null reads as the default {zero}"),
                ));
                out.push(Some(spec.with_default(zero)));
            }
            Ok((Field::Spec(spec), _)) => out.push(Some(spec)),
            Ok((Field::Nested { specs, skipped }, nullable)) => {
                notes.push(InferNote::kept(
                    &name,
                    format!(
                        "a nested field: read through key expressions ({})",
                        specs
                            .iter()
                            .map(FeatureSpec::name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
                for (path, why) in skipped {
                    notes.push(InferNote::skipped(&path, why));
                }
                for spec in specs {
                    let spec = match &spec {
                        FeatureSpec::Dense(d) if nullable && d.default.is_none() => {
                            let zero = zero(d.dtype);
                            spec.with_default(zero)
                        }
                        _ => spec,
                    };
                    out.push(Some(spec));
                }
            }
            Ok((Field::Sparse { dtype, rank }, _)) => {
                pending.insert(out.len(), (name, dtype, vec![None; rank]));
                out.push(None);
            }
        }
    }
    let mut records = 0u64;
    if !pending.is_empty() {
        // The schema does not give a sparse feature's shape: the sample's
        // largest index does.
        'files: for input in inputs {
            let mut file = report::open(input, reader_options.clone())?;
            let datum_schema = match &reader {
                Some(r) => file.schema().with_reader_schema(input.name(), r)?,
                None => file.schema().clone(),
            };
            while records < options.records {
                let Some(d) = file.next_datum()? else {
                    continue 'files;
                };
                let value = datum_schema.decode(d.data, &d.location())?;
                for (name, _, max) in pending.values_mut() {
                    widen(&value, name, max);
                }
                records += 1;
            }
            break;
        }
    }
    for (at, (name, dtype, max)) in pending {
        if let Some(k) = max.iter().position(|m| m.is_none_or(|m| m < 0)) {
            notes.push(InferNote::skipped(
                &name,
                format!(
                    "its shape is not in the schema, and no sampled record has an index in \
                     dimension {k} to tell it"
                ),
            ));
            continue;
        }
        let shape: Vec<i64> = max
            .iter()
            .map(|m| m.unwrap_or_default().saturating_add(1))
            .collect();
        notes.push(InferNote::kept(
            &name,
            format!(
                "shape {shape:?} is the largest index of the {records} sampled records plus \
                 one (the schema does not give it): a later record with a larger index fails, \
                 naming the feature"
            ),
        ));
        out[at] = Some(FeatureSpec::Sparse(SparseSpec {
            name,
            dtype,
            shape: Some(shape),
            index_key: None,
            value_key: None,
            size: None,
            already_sorted: false,
            tf_class: None,
            atds_class: None,
        }));
    }
    let spec = SpecFile {
        features: out.into_iter().flatten().collect(),
        reader_schema: reader.map(|r| r.json().clone()),
        ..SpecFile::default()
    };
    Ok(Inferred::new(spec, notes, records))
}
