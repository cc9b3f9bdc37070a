//! The general Avro → tensor path: features named by key expressions
//! (tensorflow-io's `parse_avro` mapping, see `docs/AVRO-KEY-EXPRESSIONS.md`),
//! compiled once per writer schema into a program that mirrors the parts
//! of the schema the features reach.
//!
//! The program is walked once per record, straight over the datum bytes:
//! values go into the batch's column builders as they are met; fields no
//! feature needs are skipped by schema; filters and several selectors on
//! one array re-read an element from its start (a `Reader` is a cursor,
//! so that costs no copy). No value tree is built.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use grist_tensor::{
    BatchBuilder, BuilderColumn, ColumnBuilder, DType, DenseBuilder, FeatureProblem, FeatureSpec,
    Limits, Location, MAX_DEFAULT_VALUES, PaddedBuilder, PartitionKind, RaggedBuilder, Section,
    SparseBuilder, TensorError, UNKNOWN_DIM, Values, resolve_default, shape_elements,
};

use crate::datum::{DatumError, MAX_DEPTH, Reader};
use crate::decoder::{block_end, datum_error, leaf_size, read_leaf, read_leaves};
use crate::error::{Error, Result};
use crate::keyexpr::{self, KeyExpr, Operand, Step};
use crate::plan::Leaf;
use crate::resolve::{ReaderSchema, resolve};
use crate::schema::{Node, Schema};

/// Whether `specs` need the general plan: a name that is a key
/// expression, a kind or form the ATDS plan lacks, or TensorFlow's feature
/// classes (`tf_class`, as `parse_avro`'s specs carry: their semantics
/// have no type promotion) in a spec without ATDS-form sparse features.
pub(crate) fn wanted(specs: &[FeatureSpec]) -> bool {
    let general = |s: &FeatureSpec| match s {
        FeatureSpec::Dense(d) if d.shape.iter().any(|&x| x < 0) => true,
        FeatureSpec::Sparse(sp) if sp.index_key.is_some() => true,
        FeatureSpec::Dense(_) | FeatureSpec::Sparse(_) | FeatureSpec::Varlen(_) => {
            !keyexpr::is_plain(s.name())
        }
        _ => true,
    };
    let tf_class = |s: &FeatureSpec| match s {
        FeatureSpec::Dense(d) => d.tf_class.is_some(),
        FeatureSpec::Varlen(v) => v.tf_class.is_some(),
        _ => false,
    };
    let atds_sparse = specs
        .iter()
        .any(|s| matches!(s, FeatureSpec::Sparse(sp) if sp.index_key.is_none()));
    specs.iter().any(general) || (!atds_sparse && specs.iter().any(tf_class))
}

/// How a feature's values become its column.
#[derive(Clone, Debug)]
enum Out {
    /// `row_len` values per record, completed from `default`.
    Dense {
        row_len: usize,
        default: Option<Values>,
    },
    /// Items of `item_len` values, as many as the record has, padded to
    /// the batch's longest (FixedLen `[-1, ...]`, FixedLenSequence).
    Padded {
        item_len: usize,
        default: Option<Values>,
        /// FixedLenSequence without `allow_missing`: a null on the path
        /// is an error.
        required: bool,
    },
    /// A sparse tensor with one dimension per variable step; `Some` sizes
    /// are checked.
    Varlen { dims: Vec<Option<usize>> },
    /// A sparse feature: index lists and values zipped per record,
    /// sorted by index unless the spec says they are sorted or is in
    /// ATDS's form (stored order).
    Sparse { size: Vec<i64>, sort: bool },
    /// A ragged tensor, one ragged dimension per variable step.
    Ragged,
}

/// Where a leaf value goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Slot {
    /// The feature's values.
    Values,
    /// Index list `k` of a sparse feature.
    Index(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Target {
    feat: usize,
    slot: Slot,
}

/// Where a leaf value goes, decided at plan time from the feature's
/// output (so records do not match on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Put {
    /// The values of a dense, padded or ragged column.
    Values,
    /// A varlen value: its index tuple, then the value.
    Tuple,
    /// A sparse feature's value, held until the record ends.
    Staged,
    /// Index list `k` of a sparse feature, held until the record ends.
    Index(usize),
}

/// One leaf's destination.
#[derive(Clone, Copy, Debug)]
struct Emit {
    feat: usize,
    put: Put,
}

/// A comparison operand, compiled.
#[derive(Clone, Debug)]
enum Rhs {
    Literal(Vec<u8>),
    Path(Vec<String>),
    /// A value read from the record root first (`st.roots[k]`).
    Root(usize),
}

#[derive(Clone, Debug)]
enum Sel {
    Star,
    Index(u64),
    Key(Vec<u8>),
    Filter { lhs: Vec<String>, rhs: Rhs },
}

/// One selector on an array or map, with what to do with what it selects.
#[derive(Clone, Debug)]
struct Child {
    sel: Sel,
    prog: Prog,
    /// Variable dimensions this selector counts: (feature, level).
    dims: Vec<(usize, usize)>,
    /// What closing each of `dims` does, chosen once the features'
    /// outputs are known (so records do not match on them).
    closes: Vec<(usize, Close)>,
    /// A feature below, named when an index or key is missing.
    first: usize,
    /// For `[*]` over records whose every field is one of the frequent
    /// programs: the fields, read by [`Run::fast_elements`].
    fast: Option<Vec<Fast>>,
}

/// A field of a record in an array under `[*]`, with what it does fixed
/// at plan time ([`plan_fast`]). Not boxed: a plan holds a few, and the
/// element loop reads them in place.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
enum Fast {
    /// A leaf into a varlen feature of one dimension, this array's: the
    /// value, then its tuple (row, element).
    Leaf { leaf: Leaf, feat: usize },
    /// `[*]` over an array of leaves (`Prog::Leaves`) for a feature whose
    /// first dimension is this array's.
    Leaves {
        leaf: Leaf,
        feat: usize,
        child: Child,
    },
    /// Nothing wanted from a value of this many bytes.
    Take(usize),
    /// Nothing wanted from a union of fixed-size branches.
    SkipUnion(Vec<usize>),
    /// Nothing wanted: skipped by schema.
    Skip(usize),
}

/// An array whose selectors are `[*]` (at most one) and indices: each
/// element is read once, by one program.
#[derive(Clone, Debug)]
struct Direct {
    /// The `[*]` child, whose dimensions count every element.
    star: Option<usize>,
    /// One past the largest selected index: later elements need no
    /// look-up in `at`.
    until: u64,
    /// Per selected index, the program of that element (the index's
    /// paths and the star's, together).
    at: Vec<(u64, Prog)>,
}

/// What closing a counted dimension at `n` selected elements does.
#[derive(Clone, Copy, Debug)]
enum Close {
    /// A varlen dimension of fixed size: `n` must be it.
    Check { level: usize, size: usize },
    /// A varlen dimension of any size: the shape grows to `n`.
    Widen(usize),
    /// A ragged dimension below the first: `n` is a row length of this
    /// partition.
    Partition(usize),
}

/// What to do with one value of a schema node.
#[derive(Clone, Debug)]
enum Prog {
    /// Nothing wanted: skip the value.
    Skip(usize),
    /// A leaf several features read (each from its start).
    Leaf { leaf: Leaf, targets: Vec<Emit> },
    /// A leaf one feature reads (most are).
    One { leaf: Leaf, emit: Emit },
    /// `[*]` over an array of leaves, for one feature that is not sparse:
    /// values read in bulk (floats and doubles are copied).
    Leaves {
        leaf: Leaf,
        feat: usize,
        child: Box<Child>,
    },
    /// One program per writer field.
    Record(Vec<Prog>),
    /// One program per branch; `nulls` are the features whose path a null
    /// branch cuts.
    Union {
        branches: Vec<Prog>,
        nulls: Vec<usize>,
    },
    Array {
        item: usize,
        min: usize,
        children: Vec<Child>,
        /// Selectors that are all `[*]` and `[i]`, read in one pass.
        direct: Option<Direct>,
    },
    Map {
        value: usize,
        /// The bytes each value takes, when fixed: unselected values
        /// are jumped over.
        value_size: Option<usize>,
        children: Vec<Child>,
    },
    /// Nothing wanted from a value of this many bytes (fixed-size
    /// types): jump over it.
    Take(usize),
    /// Nothing wanted from a union whose branches all have fixed sizes
    /// (a nullable number): the branch index, then that branch's bytes.
    SkipUnion(Vec<usize>),
    /// A reader field the writer lacks: `prog` run over the default's
    /// encoding (nothing is read from the record).
    Default { datum: Vec<u8>, prog: Box<Prog> },
    /// A writer value the reader schema cannot take (a union branch no
    /// reader branch matches): an error naming `feat` when met.
    Unreadable { reason: &'static str, feat: usize },
    /// A default read by dense, padded or ragged features straight (no
    /// dimension to count): its values, decoded once, per feature.
    Const(Vec<(usize, Values)>),
}

/// A decode plan of the general path for one writer schema.
#[derive(Clone, Debug)]
pub(crate) struct GeneralPlan {
    pub(crate) schema: Arc<Schema>,
    root: Prog,
    /// `@` paths compared by filters, read before each record.
    roots: Vec<Vec<String>>,
    outs: Vec<Out>,
    /// The features whose rows need completing after each record (all
    /// but varlen ones, whose values and shapes are written as met).
    finish: Vec<usize>,
    /// The number of index lists of each sparse feature.
    index_lists: Vec<usize>,
    /// Compiled skips, by node, of the nodes the plan skips by schema.
    skips: Vec<Option<Skip>>,
}

/// A feature's path still to resolve.
#[derive(Clone, Debug)]
struct Item {
    target: Target,
    steps: Vec<Step>,
    /// Variable steps taken so far.
    level: usize,
    dtype: DType,
    /// Whether `[*]` is implied at an array the path ends on.
    implicit: bool,
    /// Whether variable steps count dimensions (varlen, ragged).
    counted: bool,
    /// Whether a field step at an array implies `[*]` (the keys of a
    /// sparse feature are fields of the elements its path names).
    star_before_field: bool,
}

/// The index keys and the value key of a sparse feature: its own, or
/// ATDS's `indices0..` and `values`.
fn sparse_keys(sp: &grist_tensor::SparseSpec) -> (Vec<String>, String) {
    match (&sp.index_key, &sp.value_key) {
        (Some(_), Some(v)) => (sp.index_keys().to_vec(), v.clone()),
        (Some(_), None) => (sp.index_keys().to_vec(), String::new()),
        (None, _) => (
            (0..sp.dense_shape().len())
                .map(|k| format!("indices{k}"))
                .collect(),
            "values".into(),
        ),
    }
}

/// The number of variable steps (`[*]`, filters) of a path.
fn variable_steps(e: &KeyExpr) -> usize {
    e.steps
        .iter()
        .filter(|s| matches!(s, Step::Star | Step::Filter(_)))
        .count()
}

fn parse_name(file: &Arc<str>, feature: &str, expr: &str) -> Result<KeyExpr> {
    keyexpr::parse(expr).map_err(|e| Error::Schema {
        file: file.clone(),
        feature: feature.to_string(),
        reason: format!("{e} in {expr:?}"),
    })
}

fn spec_error(feature: &str, reason: impl Into<String>) -> Error {
    Error::Spec(TensorError::InvalidSpec {
        feature: feature.to_string(),
        reason: reason.into(),
    })
}

/// A zero of `dtype` as JSON, for padding without a default.
fn zero(dtype: DType) -> serde_json::Value {
    match dtype {
        DType::Bool => serde_json::json!(false),
        DType::Float32 | DType::Float64 => serde_json::json!(0.0),
        DType::String => serde_json::json!(""),
        _ => serde_json::json!(0),
    }
}

/// Refuses padded items larger than a default may fill: the padding item
/// is materialised once per column, sized by the spec alone.
fn padded_item(name: &str, n: usize) -> Result<()> {
    if n > MAX_DEFAULT_VALUES {
        return Err(spec_error(
            name,
            format!("an item of {n} values is more than padding may fill ({MAX_DEFAULT_VALUES})"),
        ));
    }
    Ok(())
}

/// The rank of a varlen feature: its shape, its rank, or its variable
/// steps (at least one).
fn varlen_dims(v: &grist_tensor::VarlenSpec) -> Result<Vec<Option<usize>>> {
    Ok(match (&v.shape, v.rank) {
        (Some(shape), _) => shape
            .iter()
            .map(|&x| (x != UNKNOWN_DIM).then_some(x.max(0) as usize))
            .collect(),
        (None, Some(rank)) => vec![None; rank],
        (None, None) => {
            let e = keyexpr::parse(&v.name)
                .map_err(|e| spec_error(&v.name, format!("{e} in {:?}", v.name)))?;
            vec![None; variable_steps(&e).max(1)]
        }
    })
}

/// The number of ragged dimensions of a ragged feature's path.
fn ragged_levels(path: &str) -> usize {
    keyexpr::parse(path)
        .map(|e| variable_steps(&e))
        .unwrap_or(0)
        .max(1)
}

fn ragged_path(r: &grist_tensor::RaggedSpec) -> &str {
    r.value_key.as_deref().unwrap_or(&r.name)
}

/// Checks what can be checked without a schema: syntax, kinds, shapes,
/// defaults.
pub(crate) fn check_specs(specs: &[FeatureSpec]) -> Result<()> {
    let mut seen = HashMap::new();
    for s in specs {
        let name = s.name();
        if seen.insert(name, ()).is_some() {
            return Err(spec_error(name, "the name is used twice"));
        }
        let path = match s {
            FeatureSpec::Ragged(r) => ragged_path(r),
            _ => name,
        };
        keyexpr::parse(path).map_err(|e| spec_error(name, format!("{e} in {path:?}")))?;
        match s {
            FeatureSpec::Dense(d) => {
                if d.shape.iter().skip(1).any(|&x| x < 0) {
                    return Err(spec_error(
                        name,
                        "only the first dimension of a dense shape may be unknown (-1)",
                    ));
                }
                let fixed = if d.shape.first().is_some_and(|&x| x < 0) {
                    &d.shape[1..]
                } else {
                    &d.shape[..]
                };
                let n = shape_elements(fixed)
                    .ok_or_else(|| spec_error(name, format!("shape {:?} is too large", d.shape)))?;
                if fixed.len() < d.shape.len() {
                    padded_item(name, n)?;
                }
                if let Some(v) = &d.default {
                    resolve_default(name, d.dtype, v, n)?;
                }
            }
            FeatureSpec::FixedLenSequence(f) => {
                if f.shape.iter().any(|&x| x < 0) {
                    return Err(spec_error(name, "a sequence item's shape must be known"));
                }
                let n = shape_elements(&f.shape)
                    .ok_or_else(|| spec_error(name, format!("shape {:?} is too large", f.shape)))?;
                padded_item(name, n)?;
                if let Some(v) = &f.default {
                    // A scalar or one item's worth.
                    if resolve_default(name, f.dtype, v, n).is_err() {
                        resolve_default(name, f.dtype, v, 1)?;
                    }
                }
            }
            FeatureSpec::Sparse(sp) => {
                let (keys, value) = sparse_keys(sp);
                let size = sp.dense_shape();
                if size.is_empty() {
                    return Err(spec_error(
                        name,
                        "a sparse feature needs `index_key`, `value_key` and `size` \
                         (tf.Example's form) or `shape` (ATDS's: a record of indices0.. and \
                         values)",
                    ));
                }
                if size.len() != keys.len() || size.iter().any(|&d| d < 0) {
                    return Err(spec_error(
                        name,
                        "`size` must give one known size per index key",
                    ));
                }
                for k in keys.iter().chain([&value]) {
                    let k = k.strip_prefix('@').unwrap_or(k);
                    keyexpr::parse(k).map_err(|e| spec_error(name, format!("{e} in {k:?}")))?;
                }
            }
            FeatureSpec::Varlen(v) => {
                varlen_dims(v)?;
            }
            FeatureSpec::Ragged(r) => {
                if !r.partitions.is_empty() {
                    return Err(Error::Spec(TensorError::UnsupportedSpec {
                        feature: name.to_string(),
                        format: "Avro",
                        kind: s.kind(),
                        reason: "the ragged dimensions of an Avro feature come from its path \
                                 (one per [*]); partitions are not read"
                            .into(),
                    }));
                }
            }
            _ => {
                return Err(Error::Spec(TensorError::UnsupportedSpec {
                    feature: name.to_string(),
                    format: "Avro",
                    kind: s.kind(),
                    reason: "not a kind the key-expression path reads".into(),
                }));
            }
        }
    }
    Ok(())
}

/// The column builders of the specs on the general path.
pub(crate) fn new_columns(specs: &[FeatureSpec], limits: &Limits, b: &mut BatchBuilder) {
    for spec in specs {
        let builder = match spec {
            FeatureSpec::Dense(d) if d.shape.first().is_some_and(|&x| x < 0) => {
                let item: Vec<usize> = d.shape[1..].iter().map(|&x| x as usize).collect();
                let pad = d.default.clone().unwrap_or_else(|| zero(d.dtype));
                let pad = resolve_default(&d.name, d.dtype, &pad, 1)
                    .or_else(|_| resolve_default(&d.name, d.dtype, &zero(d.dtype), 1))
                    .unwrap_or_else(|_| Values::new(d.dtype));
                ColumnBuilder::Padded(PaddedBuilder::new(item, pad).with_limits(*limits))
            }
            FeatureSpec::Dense(d) => ColumnBuilder::Dense(DenseBuilder::new(
                d.dtype,
                d.shape.iter().map(|&x| x.max(0) as usize).collect(),
            )),
            FeatureSpec::FixedLenSequence(f) => {
                let item: Vec<usize> = f.shape.iter().map(|&x| x.max(0) as usize).collect();
                let pad = f.default.clone().unwrap_or_else(|| zero(f.dtype));
                let n = item.iter().product();
                let pad = resolve_default(&f.name, f.dtype, &pad, n)
                    .or_else(|_| resolve_default(&f.name, f.dtype, &pad, 1))
                    .unwrap_or_else(|_| Values::new(f.dtype));
                ColumnBuilder::Padded(PaddedBuilder::new(item, pad).with_limits(*limits))
            }
            FeatureSpec::Sparse(s) => {
                ColumnBuilder::Sparse(SparseBuilder::new(s.dtype, s.dense_shape()))
            }
            FeatureSpec::Varlen(v) => {
                let dims = varlen_dims(v).unwrap_or_default();
                ColumnBuilder::Sparse(SparseBuilder::new(
                    v.dtype,
                    dims.iter().map(|d| d.unwrap_or(0) as i64).collect(),
                ))
            }
            FeatureSpec::Ragged(r) => {
                let inner = vec![PartitionKind::RowLengths; ragged_levels(ragged_path(r)) - 1];
                let mut rb = RaggedBuilder::new(r.dtype, &inner, r.row_splits_dtype, limits);
                rb.validate = r.validate;
                ColumnBuilder::Ragged(rb)
            }
            // check_specs refused the other kinds.
            _ => continue,
        };
        b.push_column(spec.name(), Section::Features, builder);
    }
}

/// Whether a leaf of the writer schema reads as `dtype` (no promotion).
fn exact(leaf: Leaf, dtype: DType) -> bool {
    matches!(
        (leaf, dtype),
        (Leaf::Int, DType::Int32)
            | (Leaf::Long, DType::Int64)
            | (Leaf::Float, DType::Float32)
            | (Leaf::Double, DType::Float64)
            | (Leaf::Boolean, DType::Bool)
            | (Leaf::Bytes | Leaf::Enum(_) | Leaf::Fixed(_), DType::String)
    )
}

fn leaf_of(schema: &Schema, node: usize) -> Option<Leaf> {
    Some(match schema.node(node) {
        Node::Int => Leaf::Int,
        Node::Long => Leaf::Long,
        Node::Float => Leaf::Float,
        Node::Double => Leaf::Double,
        Node::Boolean => Leaf::Boolean,
        Node::Bytes | Node::String => Leaf::Bytes,
        Node::Fixed(n) => Leaf::Fixed(*n),
        Node::Enum { .. } | Node::EnumMap { .. } => Leaf::Enum(node),
        // Read as the wire type; `typed_as` gives the type it stands for.
        &Node::Promote { wire, .. } => return leaf_of(schema, wire),
        _ => return None,
    })
}

/// The type a leaf is read as: the reader's type where a reader schema
/// promotes the writer's.
fn typed_as(schema: &Schema, node: usize) -> Option<Leaf> {
    match schema.node(node) {
        &Node::Promote { reader, .. } => leaf_of(schema, reader),
        _ => leaf_of(schema, node),
    }
}

/// The field of a (resolved) record named `name`: writer fields the
/// reader schema drops (`Skip`) have no name a path can use.
fn field_of(schema: &Schema, fields: &[(String, usize)], name: &str) -> Option<usize> {
    fields
        .iter()
        .position(|(n, f)| n == name && !matches!(schema.node(*f), Node::Skip(_)))
}

/// The last dotted component of a type name.
fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// The record names of a union's branches.
fn items_names<'s>(branches: &[usize], schema: &'s Schema) -> Vec<&'s str> {
    branches
        .iter()
        .filter_map(|&b| match schema.node(b) {
            Node::Record { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect()
}

/// How a path continues into union branch `b`: `Some(k)` when its first
/// `k` field steps name the branch's type (`Rock`, or with its namespace
/// `ex.Rock`), `Some(0)` when they name no branch of the union (the path
/// goes into every branch), `None` when they name another branch.
fn type_steps(schema: &Schema, names: &[&str], b: usize, steps: &[Step]) -> Option<usize> {
    let fields: Vec<&str> = steps
        .iter()
        .map_while(|s| match s {
            Step::Field(f) => Some(f.as_str()),
            _ => None,
        })
        .collect();
    // The longest run of steps that names a branch type.
    let named = (1..=fields.len()).rev().find_map(|k| {
        let joined = fields[..k].join(".");
        names
            .iter()
            .find(|n| **n == joined || short(n) == short(&joined))
            .map(|n| (k, *n))
    });
    match (named, schema.node(b)) {
        (None, _) => Some(0),
        (Some((k, n)), Node::Record { name, fields }) if name == n => {
            // A field of the same name as the type wins over the type.
            if k == 1 && fields.iter().any(|(f, _)| f == n) {
                Some(0)
            } else {
                Some(k)
            }
        }
        _ => None,
    }
}

struct Compiler<'a> {
    schema: &'a Schema,
    outs: &'a [Out],
    /// Per target: whether a leaf was bound, and why not (the last reason).
    reached: HashMap<Target, bool>,
    why: HashMap<Target, String>,
    roots: Vec<Vec<String>>,
    /// Filter paths that resolve nowhere.
    bad_filter: Option<(usize, String)>,
}

impl Compiler<'_> {
    fn fail(&mut self, item: &Item, reason: String) {
        self.why.insert(item.target, reason);
    }

    fn type_name(&self, node: usize) -> String {
        self.schema.type_name(node)
    }

    /// Whether `path` (field names, through unions) reaches a leaf from
    /// `node`.
    fn leaf_path(&self, mut node: usize, path: &[String], depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        for (i, name) in path.iter().enumerate() {
            if let &Node::Default { node: n, .. } = self.schema.node(node) {
                node = n;
            }
            match self.schema.node(node) {
                Node::Record { fields, .. } => match field_of(self.schema, fields, name) {
                    Some(k) => node = fields[k].1,
                    None => return false,
                },
                Node::Union(b) => {
                    return b.iter().any(|&b| self.leaf_path(b, &path[i..], depth + 1));
                }
                _ => return false,
            }
        }
        if let &Node::Default { node: n, .. } = self.schema.node(node) {
            node = n;
        }
        match self.schema.node(node) {
            Node::Union(b) => b.iter().any(|&b| leaf_of(self.schema, b).is_some()),
            _ => leaf_of(self.schema, node).is_some(),
        }
    }

    fn compile(&mut self, node: usize, items: Vec<Item>, depth: usize) -> Prog {
        if items.is_empty() {
            return skip(self.schema, node, depth);
        }
        if depth > MAX_DEPTH {
            for it in &items {
                self.fail(it, "the path nests too deeply".into());
            }
            return Prog::Skip(node);
        }
        let schema = self.schema;
        match schema.node(node) {
            // Under a reader schema (`resolve.rs`): a reader-only field
            // reads its default; a writer value the reader cannot take is
            // an error when met.
            Node::Default { node: inner, datum } => match self.compile(*inner, items, depth + 1) {
                p if skips(&p) => Prog::Skip(node),
                prog => Prog::Default {
                    datum: datum.clone(),
                    prog: Box::new(prog),
                },
            },
            Node::Unreadable { reason, .. } => Prog::Unreadable {
                reason,
                feat: items[0].target.feat,
            },
            Node::Union(branches) => {
                let mut progs = Vec::with_capacity(branches.len());
                let mut nulls: Vec<usize> = Vec::new();
                for &b in branches {
                    if matches!(schema.node(b), Node::Null) {
                        nulls.extend(items.iter().map(|i| i.target.feat));
                        progs.push(Prog::Skip(b));
                        continue;
                    }
                    if let Node::Unreadable { reason, .. } = schema.node(b) {
                        progs.push(Prog::Unreadable {
                            reason,
                            feat: items[0].target.feat,
                        });
                        continue;
                    }
                    // A step naming this branch's type selects it alone.
                    let mut mine = Vec::new();
                    for it in &items {
                        match type_steps(schema, &items_names(branches, schema), b, &it.steps) {
                            Some(0) => mine.push(it.clone()),
                            Some(k) => {
                                let mut it = it.clone();
                                it.steps.drain(..k);
                                mine.push(it);
                            }
                            None => {}
                        }
                    }
                    progs.push(self.compile(b, mine, depth + 1));
                }
                nulls.sort_unstable();
                nulls.dedup();
                if progs
                    .iter()
                    .all(|p| skips(p) || matches!(p, Prog::Unreadable { .. }))
                {
                    return skip(schema, node, depth);
                }
                Prog::Union {
                    branches: progs,
                    nulls,
                }
            }
            Node::Record { fields, name } => {
                let mut groups: Vec<Vec<Item>> = vec![Vec::new(); fields.len()];
                for mut it in items {
                    match it.steps.first() {
                        Some(Step::Field(f)) => match field_of(schema, fields, f) {
                            Some(k) => {
                                it.steps.remove(0);
                                groups[k].push(it);
                            }
                            None => {
                                let dropped = fields.iter().any(|(n, _)| n == f);
                                let reason = match dropped {
                                    true => format!(
                                        "record {name} has no field {f:?} in the reader schema \
                                         (only the writer's has it)"
                                    ),
                                    false => format!("record {name} has no field {f:?}"),
                                };
                                self.fail(&it, reason);
                            }
                        },
                        Some(_) => self.fail(
                            &it,
                            format!("record {name} is not an array or a map: use .field"),
                        ),
                        None => self.fail(
                            &it,
                            format!("the path ends at record {name}, not at a value"),
                        ),
                    }
                }
                let mut progs = Vec::with_capacity(fields.len());
                for (g, &(_, f)) in groups.into_iter().zip(fields) {
                    // A record in a record is its fields in line: one
                    // program step per field, however deep.
                    match (self.compile(f, g, depth + 1), progs.last_mut()) {
                        (Prog::Record(inner), _) => progs.extend(inner),
                        // Fixed-size fields no feature reads: one jump.
                        (Prog::Take(n), Some(Prog::Take(m))) => *m += n,
                        (p, _) => progs.push(p),
                    }
                }
                if progs.iter().all(skips) {
                    return skip(schema, node, depth);
                }
                Prog::Record(progs)
            }
            Node::Array(inner) | Node::Map(inner) => {
                let is_map = matches!(schema.node(node), Node::Map(_));
                let inner = *inner;
                let mut children: Vec<Child> = Vec::new();
                let mut groups: Vec<Vec<Item>> = Vec::new();
                for mut it in items {
                    let step = if it.steps.is_empty() {
                        if it.implicit {
                            Step::Star
                        } else {
                            let reason = format!(
                                "the path ends at {}: add [*] (this kind implies no dimension)",
                                self.type_name(node)
                            );
                            self.fail(&it, reason);
                            continue;
                        }
                    } else if it.star_before_field && matches!(it.steps[0], Step::Field(_)) {
                        Step::Star
                    } else {
                        it.steps.remove(0)
                    };
                    let sel = match (step, is_map) {
                        (Step::Star, _) => Sel::Star,
                        (Step::Index(i), false) => Sel::Index(i),
                        (Step::Key(k), true) => Sel::Key(k.into_bytes()),
                        (Step::Filter(f), false) => {
                            if !self.leaf_path(inner, &f.lhs, 0) {
                                self.bad_filter = Some((
                                    it.target.feat,
                                    format!(
                                        "filter path {:?} does not reach a value in {}",
                                        f.lhs.join("."),
                                        self.type_name(inner)
                                    ),
                                ));
                            }
                            let rhs = match f.rhs {
                                Operand::Literal(s) => Rhs::Literal(s.into_bytes()),
                                Operand::Path(p) => {
                                    if !self.leaf_path(inner, &p, 0) {
                                        self.bad_filter = Some((
                                            it.target.feat,
                                            format!(
                                                "filter path {:?} does not reach a value",
                                                p.join(".")
                                            ),
                                        ));
                                    }
                                    Rhs::Path(p)
                                }
                                Operand::Root(p) => {
                                    if !self.leaf_path(schema.root, &p, 0) {
                                        self.bad_filter = Some((
                                            it.target.feat,
                                            format!(
                                                "filter path @{} does not reach a value",
                                                p.join(".")
                                            ),
                                        ));
                                    }
                                    let k = match self.roots.iter().position(|r| *r == p) {
                                        Some(k) => k,
                                        None => {
                                            self.roots.push(p);
                                            self.roots.len() - 1
                                        }
                                    };
                                    Rhs::Root(k)
                                }
                            };
                            Sel::Filter { lhs: f.lhs, rhs }
                        }
                        (other, _) => {
                            let reason = format!(
                                "{} cannot take {}",
                                self.type_name(node),
                                match other {
                                    Step::Field(f) => format!(".{f} (use [*] or [i] first)"),
                                    Step::Index(i) => format!("[{i}] (a map takes ['key'])"),
                                    Step::Key(k) => format!("['{k}'] (an array takes [i])"),
                                    _ => "a filter (only arrays do)".into(),
                                }
                            );
                            self.fail(&it, reason);
                            continue;
                        }
                    };
                    let dim = (matches!(sel, Sel::Star | Sel::Filter { .. }) && it.counted)
                        .then_some((it.target.feat, it.level));
                    if matches!(sel, Sel::Star | Sel::Filter { .. }) {
                        it.level += 1;
                    }
                    let same = children.iter().position(|c| same_sel(&c.sel, &sel));
                    let k = match same {
                        Some(k) => k,
                        None => {
                            children.push(Child {
                                sel,
                                prog: Prog::Skip(inner),
                                dims: Vec::new(),
                                closes: Vec::new(),
                                first: it.target.feat,
                                fast: None,
                            });
                            groups.push(Vec::new());
                            children.len() - 1
                        }
                    };
                    if let Some(d) = dim {
                        if !children[k].dims.contains(&d) {
                            children[k].dims.push(d);
                        }
                    }
                    groups[k].push(it);
                }
                // An array read by `[*]` and `[i]` only: element `i` is
                // read once, by a program compiled from both selectors'
                // paths, rather than once per selector.
                let direct = !is_map
                    && children
                        .iter()
                        .all(|c| matches!(c.sel, Sel::Star | Sel::Index(_)))
                    && children.iter().any(|c| matches!(c.sel, Sel::Index(_)));
                let star = children.iter().position(|c| matches!(c.sel, Sel::Star));
                let mut at = Vec::new();
                if direct {
                    for (k, c) in children.iter().enumerate() {
                        let Sel::Index(i) = c.sel else { continue };
                        let mut both = Vec::new();
                        for j in [Some(k), star].into_iter().flatten() {
                            both.push(j);
                        }
                        // In the selectors' order, as separate reads would go.
                        both.sort_unstable();
                        let items: Vec<Item> = both
                            .iter()
                            .flat_map(|&j| groups[j].iter().cloned())
                            .collect();
                        at.push((i, self.compile(inner, items, depth + 1)));
                    }
                }
                for (c, g) in children.iter_mut().zip(groups) {
                    c.prog = self.compile(inner, g, depth + 1);
                }
                if children.is_empty() {
                    return Prog::Skip(node);
                }
                if is_map {
                    Prog::Map {
                        value: inner,
                        value_size: fixed_size(schema, inner, depth),
                        children,
                    }
                } else {
                    Prog::Array {
                        item: inner,
                        min: schema.min_size[inner].max(1),
                        children,
                        direct: direct.then_some(Direct {
                            star,
                            until: at
                                .iter()
                                .map(|&(i, _)| i.saturating_add(1))
                                .max()
                                .unwrap_or(0),
                            at,
                        }),
                    }
                }
            }
            _ => {
                let leaf = leaf_of(schema, node);
                let read_as = typed_as(schema, node);
                let mut targets = Vec::new();
                for it in items {
                    if let Some(s) = it.steps.first() {
                        let reason = format!(
                            "{} is a value: the path cannot go on with {}",
                            self.type_name(node),
                            match s {
                                Step::Field(f) => format!(".{f}"),
                                _ => "a selector".into(),
                            }
                        );
                        self.fail(&it, reason);
                        continue;
                    }
                    let (Some(leaf), Some(read_as)) = (leaf, read_as) else {
                        self.fail(&it, "the path ends at null".into());
                        continue;
                    };
                    // A reader schema's promotion is the reader's type; the
                    // path itself promotes nothing.
                    let fits = match it.target.slot {
                        Slot::Values => exact(read_as, it.dtype),
                        Slot::Index(_) => matches!(read_as, Leaf::Int | Leaf::Long),
                    };
                    if !fits {
                        let want = match it.target.slot {
                            Slot::Values => it.dtype.to_string(),
                            Slot::Index(_) => "an index (int or long)".into(),
                        };
                        let reason = format!(
                            "writer type {} cannot be read as {want} (no type promotion on \
                             the key-expression path)",
                            self.type_name(node)
                        );
                        self.fail(&it, reason);
                        continue;
                    }
                    if leaf == Leaf::Fixed(0) && it.level > 0 {
                        self.fail(
                            &it,
                            "fixed(0) values under [*] cannot be read: they take no bytes, so \
                             nothing bounds how many an array holds"
                                .into(),
                        );
                        continue;
                    }
                    self.reached.insert(it.target, true);
                    let put = match (it.target.slot, &self.outs[it.target.feat]) {
                        (Slot::Index(k), _) => Put::Index(k),
                        (Slot::Values, Out::Varlen { .. }) => Put::Tuple,
                        (Slot::Values, Out::Sparse { .. }) => Put::Staged,
                        (Slot::Values, _) => Put::Values,
                    };
                    targets.push(Emit {
                        feat: it.target.feat,
                        put,
                    });
                }
                match (leaf, targets.as_slice()) {
                    (Some(leaf), &[emit]) => Prog::One { leaf, emit },
                    (Some(leaf), [_, ..]) => Prog::Leaf { leaf, targets },
                    _ => Prog::Skip(node),
                }
            }
        }
    }
}

/// The program of a value no feature reads: by fixed sizes where the
/// schema has them, else by schema.
fn skip(schema: &Schema, node: usize, depth: usize) -> Prog {
    if let Node::Union(branches) = schema.node(node) {
        let sizes: Option<Vec<usize>> = branches
            .iter()
            .map(|&b| fixed_size(schema, b, depth + 1))
            .collect();
        if let Some(sizes) = sizes {
            return Prog::SkipUnion(sizes);
        }
    }
    match fixed_size(schema, node, depth) {
        Some(n) if n > 0 => Prog::Take(n),
        _ => Prog::Skip(node),
    }
}

/// Whether a program reads nothing.
fn skips(p: &Prog) -> bool {
    matches!(p, Prog::Skip(_) | Prog::Take(_) | Prog::SkipUnion(_))
}

/// The bytes every value of `node` takes, when that is fixed.
fn fixed_size(schema: &Schema, node: usize, depth: usize) -> Option<usize> {
    if depth > MAX_DEPTH {
        return None;
    }
    match schema.node(node) {
        Node::Null | Node::Default { .. } => Some(0),
        Node::Float => Some(4),
        Node::Double => Some(8),
        Node::Fixed(n) => Some(*n),
        Node::Record { fields, .. } => fields
            .iter()
            .map(|&(_, f)| fixed_size(schema, f, depth + 1))
            .sum(),
        &Node::Skip(n) | &Node::Promote { wire: n, .. } => fixed_size(schema, n, depth + 1),
        _ => None,
    }
}

fn same_sel(a: &Sel, b: &Sel) -> bool {
    match (a, b) {
        (Sel::Star, Sel::Star) => true,
        (Sel::Index(x), Sel::Index(y)) => x == y,
        (Sel::Key(x), Sel::Key(y)) => x == y,
        _ => false,
    }
}

impl GeneralPlan {
    /// Compiles `specs` (checked by [`check_specs`]) against the writer
    /// schema of `file`.
    pub(crate) fn compile(
        schema: Arc<Schema>,
        specs: &[FeatureSpec],
        file: &Arc<str>,
    ) -> Result<GeneralPlan> {
        let mismatch = |feature: &str, reason: String| Error::Schema {
            file: file.clone(),
            feature: feature.to_string(),
            reason,
        };
        let mut items = Vec::new();
        let mut outs = Vec::with_capacity(specs.len());
        let mut index_lists = vec![0; specs.len()];
        for (feat, spec) in specs.iter().enumerate() {
            let name = spec.name();
            let item = |slot, e: KeyExpr, implicit, counted| Item {
                target: Target { feat, slot },
                steps: e.steps,
                level: 0,
                dtype: if slot == Slot::Values {
                    spec.dtype()
                } else {
                    DType::Int64
                },
                implicit,
                counted,
                star_before_field: false,
            };
            match spec {
                FeatureSpec::Dense(d) => {
                    let e = parse_name(file, name, name)?;
                    let padded = d.shape.first().is_some_and(|&x| x < 0);
                    let fixed = if padded { &d.shape[1..] } else { &d.shape[..] };
                    let n = shape_elements(fixed).unwrap_or(usize::MAX);
                    let default = match &d.default {
                        Some(v) => Some(resolve_default(name, d.dtype, v, n)?),
                        None => None,
                    };
                    outs.push(if padded {
                        Out::Padded {
                            item_len: n,
                            default,
                            required: false,
                        }
                    } else {
                        Out::Dense {
                            row_len: n,
                            default,
                        }
                    });
                    items.push(item(Slot::Values, e, true, false));
                }
                FeatureSpec::FixedLenSequence(f) => {
                    let e = parse_name(file, name, name)?;
                    let n = shape_elements(&f.shape).unwrap_or(usize::MAX);
                    let default = match &f.default {
                        Some(v) => Some(resolve_default(name, f.dtype, v, n).or_else(|_| {
                            resolve_default(name, f.dtype, v, 1).map(|one| {
                                let mut all = Values::new(f.dtype);
                                all.extend_repeat(&one, n);
                                all
                            })
                        })?),
                        None => None,
                    };
                    outs.push(Out::Padded {
                        item_len: n,
                        default,
                        required: !f.allow_missing,
                    });
                    items.push(item(Slot::Values, e, true, false));
                }
                FeatureSpec::Varlen(v) => {
                    let e = parse_name(file, name, name)?;
                    let dims = varlen_dims(v)?;
                    outs.push(Out::Varlen { dims });
                    items.push(item(Slot::Values, e, true, true));
                }
                FeatureSpec::Ragged(r) => {
                    let path = ragged_path(r);
                    let e = parse_name(file, name, path)?;
                    // A trailing array is a ragged dimension only when the
                    // path names none (the builder's rank comes from the
                    // path alone).
                    let implicit = variable_steps(&e) == 0;
                    outs.push(Out::Ragged);
                    items.push(item(Slot::Values, e, implicit, true));
                }
                FeatureSpec::Sparse(sp) => {
                    let base = parse_name(file, name, name)?;
                    let keyed = |k: &str| -> Result<KeyExpr> {
                        match k.strip_prefix('@') {
                            Some(abs) => parse_name(file, name, abs),
                            None => {
                                let rel = parse_name(file, name, k)?;
                                let mut steps = base.steps.clone();
                                steps.extend(rel.steps);
                                Ok(KeyExpr {
                                    rooted: false,
                                    steps,
                                })
                            }
                        }
                    };
                    // tf.Example's form names fields of the elements of
                    // the feature's array; ATDS's names arrays of a record.
                    let atds = sp.index_key.is_none();
                    let (keys, value_key) = sparse_keys(sp);
                    for (k, key) in keys.iter().enumerate() {
                        let mut it = item(Slot::Index(k), keyed(key)?, true, false);
                        it.star_before_field = !atds && !key.starts_with('@');
                        items.push(it);
                    }
                    let mut it = item(Slot::Values, keyed(&value_key)?, true, false);
                    it.star_before_field = !atds && !value_key.starts_with('@');
                    items.push(it);
                    index_lists[feat] = keys.len();
                    outs.push(Out::Sparse {
                        size: sp.dense_shape(),
                        // ATDS returns entries in stored order.
                        sort: !atds && !sp.already_sorted,
                    });
                }
                other => {
                    return Err(Error::Spec(TensorError::UnsupportedSpec {
                        feature: name.to_string(),
                        format: "Avro",
                        kind: other.kind(),
                        reason: "not a kind the key-expression path reads".into(),
                    }));
                }
            }
        }
        let mut c = Compiler {
            schema: &schema,
            outs: &outs,
            reached: HashMap::new(),
            why: HashMap::new(),
            roots: Vec::new(),
            bad_filter: None,
        };
        let all: Vec<Target> = items.iter().map(|i| i.target).collect();
        let root = c.compile(schema.root, items, 0);
        for t in &all {
            if !c.reached.contains_key(t) {
                let spec = &specs[t.feat];
                let why = c
                    .why
                    .get(t)
                    .cloned()
                    .unwrap_or_else(|| "the path is not in the writer schema".into());
                let what = match t.slot {
                    Slot::Values => String::new(),
                    Slot::Index(k) => format!("index key {k}: "),
                };
                return Err(mismatch(spec.name(), format!("{what}{why}")));
            }
        }
        if let Some((feat, why)) = c.bad_filter.take() {
            return Err(mismatch(specs[feat].name(), why));
        }
        // Ranks: a varlen feature's rank and a ragged feature's levels are
        // its variable steps, implied ones included.
        for (feat, spec) in specs.iter().enumerate() {
            let levels = max_level(&root, feat);
            match (&outs[feat], spec) {
                (Out::Varlen { dims }, _) if dims.len() != levels => {
                    return Err(mismatch(
                        spec.name(),
                        format!(
                            "the spec has rank {} but the path has {levels} variable steps \
                             ([*] or filters, with those implied by trailing arrays)",
                            dims.len()
                        ),
                    ));
                }
                (Out::Ragged, FeatureSpec::Ragged(r))
                    if ragged_levels(ragged_path(r)) != levels =>
                {
                    return Err(mismatch(
                        spec.name(),
                        format!(
                            "the path has {levels} variable steps, the ragged builder {}",
                            ragged_levels(ragged_path(r))
                        ),
                    ));
                }
                _ => {}
            }
        }
        let mut root = root;
        fold_defaults(&mut root, &schema, specs);
        plan_closes(&mut root, &outs);
        plan_fast(&mut root, &outs);
        let roots = std::mem::take(&mut c.roots);
        drop(c);
        let finish = (0..outs.len())
            .filter(|&f| !matches!(outs[f], Out::Varlen { .. }))
            .collect();
        let mut skipped = Vec::new();
        skipped_nodes(&root, &mut skipped);
        let mut skips = vec![None; schema.nodes.len()];
        for n in skipped {
            if let Some(slot @ None) = skips.get_mut(n) {
                let (how, height) = skipper(&schema, n, SKIP_LEVELS);
                *slot = Some(Skip { how, height });
            }
        }
        Ok(GeneralPlan {
            schema,
            root,
            roots,
            outs,
            finish,
            index_lists,
            skips,
        })
    }
}

/// Turns each reader default whose value features take as it is into
/// its decoded values, so records do not decode it again.
fn fold_defaults(p: &mut Prog, schema: &Schema, specs: &[FeatureSpec]) {
    match p {
        Prog::Default { datum, prog } => {
            let (leaf, targets) = match &**prog {
                Prog::Leaf { leaf, targets } => (leaf, targets.as_slice()),
                Prog::One { leaf, emit } => (leaf, std::slice::from_ref(emit)),
                _ => return fold_defaults(prog, schema, specs),
            };
            if !targets.iter().all(|t| t.put == Put::Values) {
                return;
            }
            let mut values = Vec::with_capacity(targets.len());
            for t in targets {
                let mut v = Values::new(specs[t.feat].dtype());
                if read_leaf(&mut Reader::new(datum), schema, *leaf, &mut v).is_err() {
                    return;
                }
                values.push((t.feat, v));
            }
            *p = Prog::Const(values);
        }
        Prog::Record(fields) => fields
            .iter_mut()
            .for_each(|f| fold_defaults(f, schema, specs)),
        Prog::Union { branches, .. } => branches
            .iter_mut()
            .for_each(|b| fold_defaults(b, schema, specs)),
        Prog::Array {
            children, direct, ..
        } => {
            children
                .iter_mut()
                .for_each(|c| fold_defaults(&mut c.prog, schema, specs));
            for (_, p) in direct.iter_mut().flat_map(|d| &mut d.at) {
                fold_defaults(p, schema, specs);
            }
        }
        Prog::Map { children, .. } => children
            .iter_mut()
            .for_each(|c| fold_defaults(&mut c.prog, schema, specs)),
        _ => {}
    }
}

/// Fills each selector's `closes` from its `dims` and the outputs.
fn plan_closes(p: &mut Prog, outs: &[Out]) {
    match p {
        Prog::Default { prog, .. } => plan_closes(prog, outs),
        Prog::Record(fields) => fields.iter_mut().for_each(|f| plan_closes(f, outs)),
        Prog::Union { branches, .. } => branches.iter_mut().for_each(|b| plan_closes(b, outs)),
        Prog::Array { children, .. } | Prog::Map { children, .. } => {
            for c in children {
                c.closes = c
                    .dims
                    .iter()
                    .filter_map(|&(f, level)| {
                        let close = match &outs[f] {
                            Out::Varlen { dims } => match dims.get(level)? {
                                Some(size) => Close::Check { level, size: *size },
                                None => Close::Widen(level),
                            },
                            Out::Ragged if level > 0 => Close::Partition(level - 1),
                            _ => return None,
                        };
                        Some((f, close))
                    })
                    .collect();
                plan_closes(&mut c.prog, outs);
            }
            if let Prog::Array {
                direct: Some(d), ..
            } = p
            {
                for (_, p) in &mut d.at {
                    plan_closes(p, outs);
                }
            }
        }
        _ => {}
    }
    // `[*]` over leaves for one feature that is not sparse: in bulk.
    if let Prog::Array {
        children,
        direct: None,
        ..
    } = p
    {
        if let [
            Child {
                sel: Sel::Star,
                prog: Prog::One { leaf, emit },
                ..
            },
        ] = children.as_slice()
        {
            if matches!(emit.put, Put::Values | Put::Tuple) {
                let (leaf, feat) = (*leaf, emit.feat);
                if let Some(child) = children.pop() {
                    *p = Prog::Leaves {
                        leaf,
                        feat,
                        child: Box::new(child),
                    };
                }
            }
        }
    }
}

/// Fills `fast` of each `[*]` selector over records whose fields are all
/// leaves into varlen features counted by this array alone, arrays of
/// leaves whose first dimension is this array's, or skips.
fn plan_fast(p: &mut Prog, outs: &[Out]) {
    match p {
        Prog::Default { prog, .. } => plan_fast(prog, outs),
        Prog::Record(fields) => fields.iter_mut().for_each(|f| plan_fast(f, outs)),
        Prog::Union { branches, .. } => branches.iter_mut().for_each(|b| plan_fast(b, outs)),
        Prog::Leaves { child, .. } => plan_fast(&mut child.prog, outs),
        Prog::Array {
            children, direct, ..
        } => {
            for c in children.iter_mut() {
                plan_fast(&mut c.prog, outs);
                c.fast = fast_fields(c, outs);
            }
            for (_, p) in direct.iter_mut().flat_map(|d| &mut d.at) {
                plan_fast(p, outs);
            }
        }
        Prog::Map { children, .. } => children
            .iter_mut()
            .for_each(|c| plan_fast(&mut c.prog, outs)),
        _ => {}
    }
}

/// The [`Fast`] fields of selector `c`, if it is `[*]` over records that
/// have them all.
fn fast_fields(c: &Child, outs: &[Out]) -> Option<Vec<Fast>> {
    let (Sel::Star, Prog::Record(fields)) = (&c.sel, &c.prog) else {
        return None;
    };
    // Features counted at this array's level only: their index tuples
    // start with the element.
    let first_dim = |feat: usize| c.dims.contains(&(feat, 0));
    let varlen_of = |feat: usize| match &outs[feat] {
        Out::Varlen { dims } => Some(dims.len()),
        _ => None,
    };
    let mut seen = Vec::new();
    let mut fast = Vec::with_capacity(fields.len());
    for f in fields {
        let op = match f {
            Prog::One {
                leaf,
                emit:
                    Emit {
                        feat,
                        put: Put::Tuple,
                    },
            } if first_dim(*feat) && varlen_of(*feat) == Some(1) => Fast::Leaf {
                leaf: *leaf,
                feat: *feat,
            },
            Prog::Leaves { leaf, feat, child }
                if first_dim(*feat) && varlen_of(*feat).is_some() =>
            {
                Fast::Leaves {
                    leaf: *leaf,
                    feat: *feat,
                    child: (**child).clone(),
                }
            }
            Prog::Take(n) => Fast::Take(*n),
            Prog::SkipUnion(sizes) => Fast::SkipUnion(sizes.clone()),
            Prog::Skip(node) => Fast::Skip(*node),
            _ => return None,
        };
        if let Fast::Leaf { feat, .. } | Fast::Leaves { feat, .. } = &op {
            if seen.contains(feat) {
                return None;
            }
            seen.push(*feat);
        }
        fast.push(op);
    }
    // Every counted dimension is one of the fields' (so that setting
    // them once per block leaves the state one element at a time would).
    c.dims
        .iter()
        .all(|&(f, level)| level == 0 && seen.contains(&f))
        .then_some(fast)
}

/// The number of counted dimensions of `feat` in the program (the
/// deepest level + 1 of its dims).
fn max_level(p: &Prog, feat: usize) -> usize {
    match p {
        Prog::Skip(_)
        | Prog::Take(_)
        | Prog::SkipUnion(_)
        | Prog::Leaf { .. }
        | Prog::One { .. }
        | Prog::Unreadable { .. }
        | Prog::Const(_) => 0,
        Prog::Default { prog, .. } => max_level(prog, feat),
        Prog::Record(v) => v.iter().map(|p| max_level(p, feat)).max().unwrap_or(0),
        Prog::Union { branches, .. } => branches
            .iter()
            .map(|p| max_level(p, feat))
            .max()
            .unwrap_or(0),
        Prog::Leaves { child, .. } => child_level(child, feat),
        Prog::Array { children, .. } | Prog::Map { children, .. } => children
            .iter()
            .map(|c| child_level(c, feat))
            .max()
            .unwrap_or(0),
    }
}

fn child_level(c: &Child, feat: usize) -> usize {
    let here = c
        .dims
        .iter()
        .filter(|d| d.0 == feat)
        .map(|d| d.1 + 1)
        .max()
        .unwrap_or(0);
    here.max(max_level(&c.prog, feat))
}

/// Why decoding a record failed, before the location is attached.
#[derive(Debug)]
enum Fail {
    Datum(DatumError),
    Feature(usize, FeatureProblem),
    /// A bad datum met while reading this feature.
    DatumIn(usize, DatumError),
}

impl From<DatumError> for Box<Fail> {
    #[cold]
    fn from(e: DatumError) -> Self {
        Box::new(Fail::Datum(e))
    }
}

/// Boxed, so that the hot loop's results are one word wide.
type Hot<T> = std::result::Result<T, Box<Fail>>;

/// A value compared by a filter: numbers as numbers, the rest as bytes
/// (a range of the block, or an enum symbol).
#[derive(Clone, Copy, Debug)]
enum Val<'a> {
    Int(i64),
    Float(f64),
    Bool(bool),
    Bytes(&'a [u8]),
    Symbol(&'a str),
}

/// Per-decoder scratch of the general path (cloned empty per thread).
#[derive(Clone, Debug, Default)]
pub(crate) struct Scratch {
    /// Values each feature received in this record.
    count: Vec<usize>,
    /// Whether a null cut each feature's path in this record.
    nulled: Vec<bool>,
    /// The current index of each counted dimension, per feature.
    idx: Vec<Vec<i64>>,
    /// Sparse features: index lists and values of this record.
    sparse_idx: Vec<Vec<Vec<i64>>>,
    sparse_vals: Vec<Option<Values>>,
    /// Selected counts of the arrays being walked (a stack).
    sel: Vec<usize>,
    order: Vec<usize>,
}

impl Scratch {
    fn fit(&mut self, plan: &GeneralPlan, specs: &[FeatureSpec]) {
        let n = plan.outs.len();
        if self.count.len() != n {
            self.count = vec![0; n];
            self.nulled = vec![false; n];
            self.idx = plan
                .outs
                .iter()
                .map(|o| match o {
                    Out::Varlen { dims } => vec![0; dims.len()],
                    _ => vec![0; 64],
                })
                .collect();
            self.sparse_idx = plan
                .index_lists
                .iter()
                .map(|&k| vec![Vec::new(); k])
                .collect();
            self.sparse_vals = specs
                .iter()
                .zip(&plan.outs)
                .map(|(s, o)| matches!(o, Out::Sparse { .. }).then(|| Values::new(s.dtype())))
                .collect();
        }
    }
}

/// One record's walk. The datum and the plan share `'a`: a default's
/// encoding (in the plan) is read as the record's bytes are.
struct Run<'s, 'a> {
    schema: &'a Schema,
    plan: &'a GeneralPlan,
    cols: &'s mut [BuilderColumn],
    st: &'s mut Scratch,
    row: i64,
    /// The values of `plan.roots` for this record.
    roots: Vec<Option<Val<'a>>>,
}

impl<'a> Run<'_, 'a> {
    /// `depth` is the program's depth, which compiling bounded by
    /// `MAX_DEPTH` (deeper paths are refused), so it needs no check here.
    fn value(&mut self, r: &mut Reader<'a>, prog: &'a Prog, depth: usize) -> Hot<()> {
        match prog {
            Prog::Skip(n) => skip_value(r, self.schema, &self.plan.skips, *n, depth)?,
            Prog::Take(n) => {
                r.take(*n)?;
            }
            Prog::SkipUnion(sizes) => skip_union(r, sizes)?,
            Prog::Leaf { leaf, targets } => {
                let start = *r;
                for t in targets {
                    *r = start;
                    self.emit(r, *leaf, *t)?;
                }
            }
            Prog::One { leaf, emit } => self.emit(r, *leaf, *emit)?,
            Prog::Leaves { leaf, feat, child } => self.leaves(r, *leaf, *feat, child)?,
            Prog::Record(fields) => self.fields(r, fields, depth)?,
            Prog::Union { branches, nulls } => {
                let p = r.branch(branches)?;
                if let Prog::Skip(n) = p {
                    if matches!(self.schema.node(*n), Node::Null) {
                        for &f in nulls {
                            self.st.nulled[f] = true;
                        }
                        return Ok(());
                    }
                }
                self.step(r, p, depth + 1)?;
            }
            Prog::Array {
                item,
                min,
                children,
                direct,
            } => match direct {
                Some(d) => self.direct(r, *item, *min, children, d, depth)?,
                None => self.array(r, *item, *min, children, depth)?,
            },
            Prog::Map {
                value,
                value_size,
                children,
            } => self.map(r, *value, *value_size, children, depth)?,
            Prog::Default { datum, prog } => {
                self.value(&mut Reader::new(datum), prog, depth + 1)?;
            }
            Prog::Const(values) => {
                for (f, v) in values {
                    let vals = match &mut self.cols[*f].builder {
                        ColumnBuilder::Dense(d) => &mut d.values,
                        ColumnBuilder::Padded(p) => &mut p.values,
                        ColumnBuilder::Ragged(g) => &mut g.values,
                        ColumnBuilder::Sparse(s) => &mut s.values,
                    };
                    vals.extend_from(v);
                    self.st.count[*f] += v.len();
                }
            }
            Prog::Unreadable { reason, feat } => {
                return Err(Box::new(Fail::DatumIn(*feat, r.err(reason))));
            }
        }
        Ok(())
    }

    /// [`value`](Self::value), with the frequent programs (a leaf of one
    /// feature, leaves in bulk, skips, records) taken in line: a record's
    /// fields are then read without a call per field.
    #[inline(always)]
    fn step(&mut self, r: &mut Reader<'a>, prog: &'a Prog, depth: usize) -> Hot<()> {
        match prog {
            Prog::One { leaf, emit } => self.emit(r, *leaf, *emit),
            Prog::Leaves {
                leaf: Leaf::Long,
                feat,
                child,
            } => self.longs(r, *feat, child),
            Prog::Leaves { leaf, feat, child } => self.leaves(r, *leaf, *feat, child),
            Prog::Take(n) => {
                r.take(*n)?;
                Ok(())
            }
            Prog::SkipUnion(sizes) => Ok(skip_union(r, sizes)?),
            Prog::Record(fields) => self.fields(r, fields, depth),
            _ => self.value(r, prog, depth),
        }
    }

    /// [`step`](Self::step) for an element of an array: a record's fields
    /// read here, without a call per element (as in
    /// [`fields`](Self::fields), at the same depths).
    #[inline(always)]
    fn element(&mut self, r: &mut Reader<'a>, prog: &'a Prog, depth: usize) -> Hot<()> {
        match prog {
            Prog::Record(fields) => {
                for f in fields {
                    self.step(r, f, depth + 1)?;
                }
                Ok(())
            }
            p => self.step(r, p, depth),
        }
    }

    /// A record's fields, in writer order (apart from [`value`](Self::value),
    /// as records in arrays are frequent and small). Out of line: the
    /// recursion through [`step`](Self::step) stops here.
    #[inline(never)]
    fn fields(&mut self, r: &mut Reader<'a>, fields: &'a [Prog], depth: usize) -> Hot<()> {
        for f in fields {
            self.step(r, f, depth + 1)?;
        }
        Ok(())
    }

    #[inline(always)]
    fn emit(&mut self, r: &mut Reader<'a>, leaf: Leaf, t: Emit) -> Hot<()> {
        let f = t.feat;
        let vals = match (t.put, &mut self.cols[f].builder) {
            (Put::Index(k), _) => {
                let v = match leaf {
                    Leaf::Int => r.int()? as i64,
                    _ => r.long_word()?,
                };
                self.st.sparse_idx[f][k].push(v);
                return Ok(());
            }
            (Put::Staged, _) => match &mut self.st.sparse_vals[f] {
                Some(v) => v,
                None => return Ok(()),
            },
            (Put::Tuple, ColumnBuilder::Sparse(s)) => {
                leaf_value(r, self.schema, leaf, &mut s.values)?;
                match self.st.idx[f].as_slice() {
                    // One copy of a fixed size, not one push per number.
                    &[i] => s.indices.extend_from_slice(&[self.row, i]),
                    &[i, j] => s.indices.extend_from_slice(&[self.row, i, j]),
                    idx => push_tuple(&mut s.indices, self.row, idx),
                }
                // Varlen features count no values: nothing completes
                // their rows.
                return Ok(());
            }
            (_, ColumnBuilder::Dense(d)) => &mut d.values,
            (_, ColumnBuilder::Padded(p)) => &mut p.values,
            (_, ColumnBuilder::Ragged(g)) => &mut g.values,
            (_, ColumnBuilder::Sparse(s)) => &mut s.values,
        };
        leaf_value(r, self.schema, leaf, vals)?;
        self.st.count[f] += 1;
        Ok(())
    }

    fn hit(&mut self, start: &Reader<'a>, item: usize, sel: &Sel, n: u64) -> Hot<bool> {
        Ok(match sel {
            Sel::Star => true,
            Sel::Index(i) => *i == n,
            Sel::Key(_) => false,
            Sel::Filter { lhs, rhs } => {
                let a = eval(*start, self.schema, item, lhs)?;
                let b = match rhs {
                    Rhs::Literal(lit) => {
                        return Ok(a.is_some_and(|a| eq_literal(a, lit)));
                    }
                    Rhs::Path(p) => eval(*start, self.schema, item, p)?,
                    Rhs::Root(k) => self.roots[*k],
                };
                match (a, b) {
                    (Some(a), Some(b)) => eq_vals(a, b),
                    _ => false,
                }
            }
        })
    }

    fn begin_selected(&mut self, c: &Child, sel: usize) {
        for &(f, level) in &c.dims {
            if let Some(slot) = self.st.idx[f].get_mut(level) {
                *slot = sel as i64;
            }
        }
    }

    /// Closes the dimensions counted by `c` at `n` selected elements.
    #[inline(always)]
    fn end_selected(&mut self, c: &Child, n: usize) -> Hot<()> {
        // The frequent case (an array of one varlen feature) in line.
        if let [(f, Close::Widen(level))] = c.closes[..] {
            if let ColumnBuilder::Sparse(s) = &mut self.cols[f].builder {
                if let Some(s) = s.shape.get_mut(level) {
                    *s = (*s).max(n as i64);
                }
            }
            return Ok(());
        }
        self.end_all(c, n)
    }

    /// [`end_selected`](Self::end_selected) for any closes.
    #[inline(never)]
    fn end_all(&mut self, c: &Child, n: usize) -> Hot<()> {
        for &(f, close) in &c.closes {
            match (close, &mut self.cols[f].builder) {
                (Close::Check { level, size }, _) if size != n => {
                    return Err(Box::new(Fail::Feature(
                        f,
                        FeatureProblem::WrongCount {
                            dim: Some(level),
                            expected: size,
                            actual: n,
                        },
                    )));
                }
                (Close::Widen(level), ColumnBuilder::Sparse(s)) => {
                    if let Some(s) = s.shape.get_mut(level) {
                        *s = (*s).max(n as i64);
                    }
                }
                (Close::Partition(p), ColumnBuilder::Ragged(g)) => {
                    if let Some(p) = g.partitions.get_mut(p) {
                        p.values.push(n as i64);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn array(
        &mut self,
        r: &mut Reader<'a>,
        item: usize,
        min: usize,
        children: &'a [Child],
        depth: usize,
    ) -> Hot<()> {
        let base = self.st.sel.len();
        self.st.sel.resize(base + children.len(), 0);
        let single = matches!(children, [c] if matches!(c.sel, Sel::Star));
        let mut n = 0u64;
        loop {
            let count = r.block_count(min)?;
            if count == 0 {
                break;
            }
            if single {
                if let Some(fast) = children[0].fast.as_deref() {
                    self.fast_elements(r, &children[0], fast, base, count, depth)?;
                    n += count as u64;
                    continue;
                }
            }
            for _ in 0..count {
                if single {
                    let c = &children[0];
                    let sel = self.st.sel[base];
                    self.begin_selected(c, sel);
                    self.element(r, &c.prog, depth + 1)?;
                    self.st.sel[base] += 1;
                } else {
                    let start = *r;
                    let mut end = None;
                    for (k, c) in children.iter().enumerate() {
                        // Stars and indices decided here: `hit` is out of
                        // line, for filters.
                        let hit = match &c.sel {
                            Sel::Star => true,
                            Sel::Index(i) => *i == n,
                            sel => self.hit(&start, item, sel, n)?,
                        };
                        if hit {
                            let mut rc = start;
                            let sel = self.st.sel[base + k];
                            self.begin_selected(c, sel);
                            self.step(&mut rc, &c.prog, depth + 1)?;
                            self.st.sel[base + k] += 1;
                            end = Some(rc.pos);
                        }
                    }
                    match end {
                        Some(e) => r.pos = e,
                        None => skip_value(r, self.schema, &self.plan.skips, item, depth + 1)?,
                    }
                }
                n += 1;
            }
        }
        let res = self.close(children, base, n);
        self.st.sel.truncate(base);
        res
    }

    /// An array of [`Direct`] selectors: each element read once.
    fn direct(
        &mut self,
        r: &mut Reader<'a>,
        item: usize,
        min: usize,
        children: &'a [Child],
        d: &'a Direct,
        depth: usize,
    ) -> Hot<()> {
        let base = self.st.sel.len();
        self.st.sel.resize(base + children.len(), 0);
        let star = d.star.map(|k| (k, &children[k]));
        let mut n = 0u64;
        loop {
            let count = r.block_count(min)?;
            if count == 0 {
                break;
            }
            let mut done = 0;
            while done < count {
                done += 1;
                if n >= d.until {
                    // Past every index: the star's program, or a skip.
                    match star {
                        Some((
                            k,
                            c @ Child {
                                fast: Some(fast), ..
                            },
                        )) => {
                            // The rest of the block at once.
                            let rest = count - done + 1;
                            self.fast_elements(r, c, fast, base + k, rest, depth)?;
                            n += rest as u64;
                            done = count;
                            continue;
                        }
                        Some((k, c)) => {
                            let sel = self.st.sel[base + k];
                            self.begin_selected(c, sel);
                            self.element(r, &c.prog, depth + 1)?;
                            self.st.sel[base + k] += 1;
                        }
                        None => skip_value(r, self.schema, &self.plan.skips, item, depth + 1)?,
                    }
                    n += 1;
                    continue;
                }
                let prog = match d.at.iter().find(|(i, _)| *i == n) {
                    Some((_, p)) => Some(p),
                    None => star.map(|(_, c)| &c.prog),
                };
                match (prog, star) {
                    (Some(p), Some((k, c))) => {
                        let sel = self.st.sel[base + k];
                        self.begin_selected(c, sel);
                        self.step(r, p, depth + 1)?;
                        self.st.sel[base + k] += 1;
                    }
                    (Some(p), None) => self.step(r, p, depth + 1)?,
                    (None, _) => skip_value(r, self.schema, &self.plan.skips, item, depth + 1)?,
                }
                n += 1;
            }
        }
        let res = self.close(children, base, n);
        self.st.sel.truncate(base);
        res
    }

    /// `count` elements of an array under `[*]` (selector `c`, its count
    /// at `self.st.sel[at]`) whose records have [`Fast`] fields: what
    /// [`element`](Self::element) does for each, without walking the
    /// record's programs or setting every counted dimension per element.
    #[inline(never)]
    fn fast_elements(
        &mut self,
        r: &mut Reader<'a>,
        c: &'a Child,
        fast: &'a [Fast],
        at: usize,
        count: usize,
        depth: usize,
    ) -> Hot<()> {
        let row = self.row;
        let first = self.st.sel[at];
        for e in first..first + count {
            for op in fast {
                match op {
                    Fast::Leaf { leaf, feat } => match &mut self.cols[*feat].builder {
                        ColumnBuilder::Sparse(s) => {
                            match (leaf, &mut s.values) {
                                (Leaf::Long, Values::Int64(v)) => v.push(r.long_word()?),
                                (leaf, vals) => leaf_value(r, self.schema, *leaf, vals)?,
                            }
                            s.indices.extend_from_slice(&[row, e as i64]);
                        }
                        _ => {
                            self.begin_selected(c, e);
                            let emit = Emit {
                                feat: *feat,
                                put: Put::Tuple,
                            };
                            self.emit(r, *leaf, emit)?;
                        }
                    },
                    Fast::Leaves { leaf, feat, child } => {
                        if let Some(i) = self.st.idx[*feat].first_mut() {
                            *i = e as i64;
                        }
                        match leaf {
                            Leaf::Long => self.longs(r, *feat, child)?,
                            _ => self.leaves(r, *leaf, *feat, child)?,
                        }
                    }
                    Fast::Take(n) => {
                        r.take(*n)?;
                    }
                    Fast::SkipUnion(sizes) => skip_union(r, sizes)?,
                    Fast::Skip(node) => {
                        skip_value(r, self.schema, &self.plan.skips, *node, depth + 2)?
                    }
                }
            }
        }
        if count > 0 {
            // As after the last element one at a time.
            self.begin_selected(c, first + count - 1);
            self.st.sel[at] = first + count;
        }
        Ok(())
    }

    /// `arr[*]` over an array of longs, for one feature: when the array
    /// is one block of a few longs into a varlen of rank 1 or 2 (`items[*]`
    /// of records in an array), read in line, else by
    /// [`leaves`](Self::leaves).
    #[inline(always)]
    fn longs(&mut self, r: &mut Reader<'a>, f: usize, c: &Child) -> Hot<()> {
        if let (Some(&b), Some(&(_, level))) = (r.buf.get(r.pos), c.dims.first()) {
            // As `block_count`'s fast path: a one-byte count that fits.
            let count = (b >> 1) as usize;
            if b & 0x81 == 0 && count <= SMALL && count < r.remaining() {
                if let ColumnBuilder::Sparse(s) = &mut self.cols[f].builder {
                    let idx = &mut self.st.idx[f];
                    if let (Values::Int64(v), 1..=2) = (&mut s.values, idx.len()) {
                        if level < idx.len() {
                            r.pos += 1;
                            if count > 0 {
                                match idx.len() {
                                    1 => small_longs::<2>(
                                        r,
                                        count,
                                        v,
                                        &mut s.indices,
                                        self.row,
                                        idx,
                                        level,
                                        0,
                                    )?,
                                    _ => small_longs::<3>(
                                        r,
                                        count,
                                        v,
                                        &mut s.indices,
                                        self.row,
                                        idx,
                                        level,
                                        0,
                                    )?,
                                }
                                self.st.count[f] += count;
                                // The end of the array (a zero count), or more blocks.
                                if r.buf.get(r.pos) != Some(&0) {
                                    return self.leaves_from(r, Leaf::Long, f, c, count);
                                }
                                r.pos += 1;
                            }
                            return self.end_selected(c, count);
                        }
                    }
                }
            }
        }
        self.leaves(r, Leaf::Long, f, c)
    }

    /// `arr[*]` over an array of leaves, for one feature: values read in
    /// bulk where the encoding allows (floats and doubles are copied).
    fn leaves(&mut self, r: &mut Reader<'a>, leaf: Leaf, f: usize, c: &Child) -> Hot<()> {
        self.leaves_from(r, leaf, f, c, 0)
    }

    /// [`leaves`](Self::leaves) after `n` values of the array were read.
    #[inline(never)]
    fn leaves_from(
        &mut self,
        r: &mut Reader<'a>,
        leaf: Leaf,
        f: usize,
        c: &Child,
        mut n: usize,
    ) -> Hot<()> {
        let level = c.dims.first().map(|d| d.1);
        loop {
            let count = r.block_count(leaf_size(leaf))?;
            if count == 0 {
                break;
            }
            match &mut self.cols[f].builder {
                ColumnBuilder::Dense(d) => read_leaves(r, self.schema, leaf, count, &mut d.values)?,
                ColumnBuilder::Padded(p) => {
                    read_leaves(r, self.schema, leaf, count, &mut p.values)?
                }
                ColumnBuilder::Ragged(g) => {
                    read_leaves(r, self.schema, leaf, count, &mut g.values)?
                }
                ColumnBuilder::Sparse(s) => {
                    let idx = &mut self.st.idx[f];
                    match (leaf, &mut s.values, level, idx.len()) {
                        // A few longs (`items[*]` of a record in an
                        // array): one by one, each with its tuple, as the
                        // bulk path's set-up costs more than it saves.
                        (Leaf::Long, Values::Int64(v), Some(l @ 0), 1) if count <= SMALL => {
                            small_longs::<2>(r, count, v, &mut s.indices, self.row, idx, l, n)?
                        }
                        (Leaf::Long, Values::Int64(v), Some(l @ 0..2), 2) if count <= SMALL => {
                            small_longs::<3>(r, count, v, &mut s.indices, self.row, idx, l, n)?
                        }
                        _ => {
                            read_leaves(r, self.schema, leaf, count, &mut s.values)?;
                            push_tuples(&mut s.indices, self.row, idx, level, n, count);
                        }
                    }
                }
            }
            self.st.count[f] += count;
            n += count;
        }
        self.end_selected(c, n)
    }

    fn close(&mut self, children: &[Child], base: usize, n: u64) -> Hot<()> {
        for (k, c) in children.iter().enumerate() {
            let sel = self.st.sel[base + k];
            match &c.sel {
                Sel::Index(i) if *i >= n => {
                    return Err(Box::new(Fail::Feature(
                        c.first,
                        FeatureProblem::IndexOutOfRange {
                            dim: None,
                            index: i64::try_from(*i).unwrap_or(i64::MAX),
                            size: n as i64,
                        },
                    )));
                }
                Sel::Key(_) if sel == 0 => {
                    return Err(Box::new(Fail::Feature(c.first, FeatureProblem::Missing)));
                }
                Sel::Star | Sel::Filter { .. } => self.end_selected(c, sel)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn map(
        &mut self,
        r: &mut Reader<'a>,
        value: usize,
        value_size: Option<usize>,
        children: &'a [Child],
        depth: usize,
    ) -> Hot<()> {
        let base = self.st.sel.len();
        self.st.sel.resize(base + children.len(), 0);
        let mut n = 0u64;
        loop {
            let at = r.pos;
            let count = r.long_word()?;
            if count == 0 {
                break;
            }
            if count < 0 && r.long_word()? < 0 {
                return Err(r.err("negative map block size").into());
            }
            // Each entry takes at least its key's length byte.
            if count.unsigned_abs() > r.remaining() as u64 {
                return Err(Box::new(Fail::Datum(DatumError {
                    reason: "map block claims more entries than the block holds",
                    offset: at,
                })));
            }
            for _ in 0..count.unsigned_abs() {
                let key = r.bytes()?;
                let start = *r;
                let mut end = None;
                for (k, c) in children.iter().enumerate() {
                    let hit = match &c.sel {
                        Sel::Key(want) => want.as_slice() == key,
                        Sel::Star => true,
                        _ => false,
                    };
                    if hit {
                        let mut rc = start;
                        let sel = self.st.sel[base + k];
                        self.begin_selected(c, sel);
                        self.step(&mut rc, &c.prog, depth + 1)?;
                        self.st.sel[base + k] += 1;
                        end = Some(rc.pos);
                    }
                }
                match end {
                    Some(e) => r.pos = e,
                    None => match value_size {
                        Some(n) => {
                            r.take(n)?;
                        }
                        None => r.skip(self.schema, value, depth + 1)?,
                    },
                }
                n += 1;
            }
        }
        let res = self.close(children, base, n);
        self.st.sel.truncate(base);
        res
    }

    /// After a record: completes each feature's row.
    fn finish_row(&mut self) -> Hot<()> {
        for &f in &self.plan.finish {
            let got = self.st.count[f];
            let missing = |st: &Scratch| {
                if st.nulled[f] {
                    FeatureProblem::NullWithoutDefault
                } else {
                    FeatureProblem::Missing
                }
            };
            match (&self.plan.outs[f], &mut self.cols[f].builder) {
                (Out::Dense { row_len, default }, ColumnBuilder::Dense(d)) => {
                    if got > *row_len {
                        return Err(Box::new(Fail::Feature(
                            f,
                            FeatureProblem::WrongCount {
                                dim: None,
                                expected: *row_len,
                                actual: got,
                            },
                        )));
                    }
                    if got < *row_len {
                        match default {
                            Some(v) => d.values.extend_from_range(v, got..*row_len),
                            None if got == 0 => {
                                return Err(Box::new(Fail::Feature(f, missing(self.st))));
                            }
                            None => {
                                return Err(Box::new(Fail::Feature(
                                    f,
                                    FeatureProblem::WrongCount {
                                        dim: None,
                                        expected: *row_len,
                                        actual: got,
                                    },
                                )));
                            }
                        }
                    }
                    d.end_row();
                }
                (
                    Out::Padded {
                        item_len,
                        default,
                        required,
                    },
                    ColumnBuilder::Padded(p),
                ) => {
                    if *required && got == 0 && self.st.nulled[f] {
                        return Err(Box::new(Fail::Feature(f, FeatureProblem::Missing)));
                    }
                    let item = (*item_len).max(1);
                    let steps = got.div_ceil(item);
                    let short = steps * item - got;
                    if short > 0 {
                        match default {
                            Some(v) => p.values.extend_from_range(v, item - short..item),
                            None => {
                                return Err(Box::new(Fail::Feature(
                                    f,
                                    FeatureProblem::NotMultiple { item, actual: got },
                                )));
                            }
                        }
                    }
                    p.steps.push(if *item_len == 0 { 0 } else { steps });
                }
                (Out::Sparse { size, sort }, ColumnBuilder::Sparse(s)) => {
                    sparse_row(self.st, self.row, f, size, *sort, s)?;
                }
                (Out::Ragged, ColumnBuilder::Ragged(g)) => g.end_row(),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Skips a union whose branches have fixed sizes: the branch index, then
/// that branch's bytes.
#[inline(always)]
fn skip_union(r: &mut Reader<'_>, sizes: &[usize]) -> std::result::Result<(), DatumError> {
    let n = r.branch(sizes)?;
    r.take(*n)?;
    Ok(())
}

/// What [`Reader::skip`] does for a schema node, decided once per plan
/// (no look-up and match of the node per value skipped).
#[derive(Clone, Debug)]
enum Skipper {
    /// int, long, enum: a varint (its range unchecked, as a skip).
    Varint,
    Boolean,
    /// null, float, double, fixed, a reader-only field: `n` bytes.
    Take(usize),
    Bytes,
    Record(Vec<Skipper>),
    Union(Vec<Skipper>),
    Array {
        item: Box<Skipper>,
        /// The item node's fewest bytes.
        min: usize,
        /// The bytes of each item of a float, double or fixed array
        /// (skipped a block at a time).
        size: Option<usize>,
    },
    /// Maps, and values nested past the compiled levels: by schema, at
    /// their depth.
    Node(usize),
}

/// A compiled skip of one node: `height` is the deepest level it reads
/// below the node (its `Node` parts check their own depth).
#[derive(Clone, Debug)]
struct Skip {
    how: Skipper,
    height: usize,
}

/// How many levels of a skipped value are compiled.
const SKIP_LEVELS: usize = 8;

/// The skipper of `node` and its height, `levels` compiled below it.
fn skipper(schema: &Schema, node: usize, levels: usize) -> (Skipper, usize) {
    match schema.node(node) {
        Node::Null | Node::Default { .. } => (Skipper::Take(0), 0),
        Node::Boolean => (Skipper::Boolean, 0),
        Node::Int | Node::Long | Node::Enum { .. } | Node::EnumMap { .. } => (Skipper::Varint, 0),
        Node::Float => (Skipper::Take(4), 0),
        Node::Double => (Skipper::Take(8), 0),
        Node::Fixed(n) => (Skipper::Take(*n), 0),
        Node::Bytes | Node::String => (Skipper::Bytes, 0),
        // Skipped at the same depth.
        &(Node::Skip(n) | Node::Promote { wire: n, .. } | Node::Unreadable { wire: n, .. }) => {
            skipper(schema, n, levels)
        }
        _ if levels == 0 => (Skipper::Node(node), 0),
        Node::Record { fields, .. } => {
            let mut height = 0;
            let fields = fields
                .iter()
                .map(|&(_, f)| {
                    let (s, h) = skipper(schema, f, levels - 1);
                    height = height.max(h + 1);
                    s
                })
                .collect();
            (Skipper::Record(fields), height)
        }
        Node::Union(branches) => {
            let mut height = 0;
            let branches = branches
                .iter()
                .map(|&b| {
                    let (s, h) = skipper(schema, b, levels - 1);
                    height = height.max(h + 1);
                    s
                })
                .collect();
            (Skipper::Union(branches), height)
        }
        &Node::Array(items) => {
            let (item, h) = skipper(schema, items, levels - 1);
            let size = match schema.node(items) {
                Node::Float => Some(4),
                Node::Double => Some(8),
                Node::Fixed(n) => Some(*n),
                _ => None,
            };
            let how = Skipper::Array {
                item: Box::new(item),
                min: schema.min_size[items],
                size,
            };
            (how, h + 1)
        }
        Node::Map(_) => (Skipper::Node(node), 0),
    }
}

/// Skips a value of `node` at `depth` as [`Reader::skip`] does (the same
/// bytes, the same errors), by its compiled skip where it has one.
#[inline(never)]
fn skip_value(
    r: &mut Reader<'_>,
    schema: &Schema,
    skips: &[Option<Skip>],
    node: usize,
    depth: usize,
) -> std::result::Result<(), DatumError> {
    match skips.get(node) {
        // Nothing below can nest too deeply: no check per level.
        Some(Some(s)) if depth + s.height <= MAX_DEPTH => skip_by(r, schema, &s.how, depth),
        _ => r.skip(schema, node, depth),
    }
}

/// Runs a skipper over the value at `r` (of depth `depth`).
fn skip_by(
    r: &mut Reader<'_>,
    schema: &Schema,
    s: &Skipper,
    depth: usize,
) -> std::result::Result<(), DatumError> {
    match s {
        Skipper::Varint => {
            r.long_word()?;
        }
        Skipper::Boolean => {
            r.boolean()?;
        }
        Skipper::Take(n) => {
            r.take(*n)?;
        }
        Skipper::Bytes => {
            r.bytes()?;
        }
        Skipper::Node(n) => r.skip(schema, *n, depth)?,
        Skipper::Record(fields) => {
            for f in fields {
                // Leaves in line.
                match f {
                    Skipper::Varint => {
                        r.long_word()?;
                    }
                    Skipper::Take(n) => {
                        r.take(*n)?;
                    }
                    f => skip_by(r, schema, f, depth + 1)?,
                }
            }
        }
        Skipper::Union(branches) => match r.branch(branches)? {
            Skipper::Take(n) => {
                r.take(*n)?;
            }
            b => skip_by(r, schema, b, depth + 1)?,
        },
        // As `Reader::skip_blocks`.
        Skipper::Array { item, min, size } => loop {
            let at = r.pos;
            let count = r.long()?;
            if count == 0 {
                return Ok(());
            }
            if count < 0 && r.long()? < 0 {
                return Err(r.err("negative array block size"));
            }
            let count = count.unsigned_abs();
            match *min {
                0 => continue,
                n if count > (r.remaining() / n) as u64 => {
                    return Err(DatumError {
                        reason: "array block claims more items than the block holds",
                        offset: at,
                    });
                }
                _ => {}
            }
            match (size, &**item) {
                (Some(n), _) => {
                    r.take(count as usize * n)?;
                }
                (None, Skipper::Varint) => {
                    for _ in 0..count {
                        r.long_word()?;
                    }
                }
                (None, item) => {
                    for _ in 0..count {
                        skip_by(r, schema, item, depth + 1)?;
                    }
                }
            }
        },
    }
    Ok(())
}

/// The nodes a plan skips by schema: those of `Skip` programs and the
/// items of arrays (elements no selector takes).
fn skipped_nodes(p: &Prog, out: &mut Vec<usize>) {
    match p {
        Prog::Skip(n) => out.push(*n),
        Prog::Default { prog, .. } => skipped_nodes(prog, out),
        Prog::Record(fields) => fields.iter().for_each(|f| skipped_nodes(f, out)),
        Prog::Union { branches, .. } => branches.iter().for_each(|b| skipped_nodes(b, out)),
        Prog::Array {
            item,
            children,
            direct,
            ..
        } => {
            out.push(*item);
            children.iter().for_each(|c| skipped_nodes(&c.prog, out));
            for (_, p) in direct.iter().flat_map(|d| &d.at) {
                skipped_nodes(p, out);
            }
        }
        Prog::Map { children, .. } => children.iter().for_each(|c| skipped_nodes(&c.prog, out)),
        Prog::Leaves { child, .. } => skipped_nodes(&child.prog, out),
        _ => {}
    }
}

/// Appends one index tuple (the row, then `idx`): value by value, as the
/// tuples are a few numbers, for which a copy call costs more than it does.
#[inline]
fn push_tuple(indices: &mut Vec<i64>, row: i64, idx: &[i64]) {
    indices.push(row);
    for &i in idx {
        indices.push(i);
    }
}

/// Appends `count` index tuples: the row, then `idx` with entry `level`
/// counting from `first` (left at the last count, as one by one would).
fn push_tuples(
    indices: &mut Vec<i64>,
    row: i64,
    idx: &mut [i64],
    level: Option<usize>,
    first: usize,
    count: usize,
) {
    match idx.len() {
        1 => tuples::<2>(indices, row, idx, level, first, count),
        2 => tuples::<3>(indices, row, idx, level, first, count),
        3 => tuples::<4>(indices, row, idx, level, first, count),
        _ => {
            indices.reserve(count * (idx.len() + 1));
            for k in 0..count {
                if let Some(l) = level {
                    idx[l] = (first + k) as i64;
                }
                push_tuple(indices, row, idx);
            }
        }
    }
}

/// Reads one leaf value into `out`: [`read_leaf`], with longs and enum
/// symbols in line.
#[inline(always)]
fn leaf_value(
    r: &mut Reader<'_>,
    schema: &Schema,
    leaf: Leaf,
    out: &mut Values,
) -> std::result::Result<(), DatumError> {
    match (leaf, out) {
        (Leaf::Long, Values::Int64(v)) => v.push(r.long_word()?),
        (Leaf::Enum(node), out) => enum_leaf(r, schema, node, out)?,
        (leaf, out) => read_leaf(r, schema, leaf, out)?,
    }
    Ok(())
}

/// An enum leaf as a string: a symbol of a writer's enum read in line;
/// a reader's enum, or an index out of range, by [`read_leaf`].
#[inline(always)]
fn enum_leaf(
    r: &mut Reader<'_>,
    schema: &Schema,
    node: usize,
    vals: &mut Values,
) -> std::result::Result<(), DatumError> {
    if let (Node::Enum { symbols }, Values::String(v)) = (schema.node(node), &mut *vals) {
        let at = r.pos;
        let i = r.long_word()?;
        if let Some(s) = usize::try_from(i).ok().and_then(|i| symbols.get(i)) {
            v.push(s.as_bytes());
            return Ok(());
        }
        r.pos = at;
    }
    read_leaf(r, schema, Leaf::Enum(node), vals)
}

/// Arrays up to this long are read value by value by [`Run::leaves`].
const SMALL: usize = 8;

/// Reads `count` longs into a varlen column of tuples of `W` numbers (the
/// row, then `idx` with entry `level` counting from `first`), value by
/// value; `idx[level]` is left at the last count, as [`push_tuples`] does.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn small_longs<const W: usize>(
    r: &mut Reader<'_>,
    count: usize,
    values: &mut Vec<i64>,
    indices: &mut Vec<i64>,
    row: i64,
    idx: &mut [i64],
    level: usize,
    first: usize,
) -> std::result::Result<(), DatumError> {
    let mut t = [row; W];
    t[1..].copy_from_slice(idx);
    for k in 0..count {
        let x = r.long_word()?;
        values.push(x);
        t[1 + level] = (first + k) as i64;
        indices.extend_from_slice(&t);
    }
    if count > 0 {
        idx[level] = t[1 + level];
    }
    Ok(())
}

/// [`push_tuples`] for tuples of `W` numbers: each appended as one
/// fixed-size copy.
#[inline]
fn tuples<const W: usize>(
    indices: &mut Vec<i64>,
    row: i64,
    idx: &mut [i64],
    level: Option<usize>,
    first: usize,
    count: usize,
) {
    let mut t = [row; W];
    t[1..].copy_from_slice(idx);
    indices.reserve(count * W);
    match level.filter(|&l| l + 1 < W) {
        Some(l) => {
            for k in 0..count {
                t[1 + l] = (first + k) as i64;
                indices.extend_from_slice(&t);
            }
            idx[l] = t[1 + l];
        }
        None => {
            for _ in 0..count {
                indices.extend_from_slice(&t);
            }
        }
    }
}

/// Zips a sparse feature's index lists and values of one record into its
/// column, sorted by index.
fn sparse_row(
    st: &mut Scratch,
    row: i64,
    f: usize,
    size: &[i64],
    sort: bool,
    s: &mut SparseBuilder,
) -> Hot<()> {
    {
        let Some(vals) = st.sparse_vals[f].as_mut() else {
            return Ok(());
        };
        let nnz = vals.len();
        let lists = &st.sparse_idx[f];
        for (k, ids) in lists.iter().enumerate() {
            if ids.len() != nnz {
                return Err(Box::new(Fail::Feature(
                    f,
                    FeatureProblem::IndexCountMismatch {
                        dim: Some(k),
                        indices: ids.len(),
                        values: nnz,
                    },
                )));
            }
            if let Some(&bad) = ids.iter().find(|&&i| i < 0 || i >= size[k]) {
                return Err(Box::new(Fail::Feature(
                    f,
                    FeatureProblem::IndexOutOfRange {
                        dim: Some(k),
                        index: bad,
                        size: size[k],
                    },
                )));
            }
        }
        // Sorted by index tuple, stably, as TensorFlow's SparseFeature
        // returns them.
        st.order.clear();
        st.order.extend(0..nnz);
        if sort {
            st.order.sort_by(|&a, &b| {
                lists
                    .iter()
                    .map(|l| l[a].cmp(&l[b]))
                    .find(|o| o.is_ne())
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        }
        s.values.reserve(nnz);
        for &j in &st.order {
            s.values.extend_from_range(vals, j..j + 1);
            s.indices.push(row);
            s.indices.extend(lists.iter().map(|l| l[j]));
        }
        Ok(())
    }
}

/// Reads the value at `path` (field names, through unions) of the value
/// of `node` at `r`; `None` when a null or another branch cuts it.
fn eval<'a>(
    mut r: Reader<'a>,
    schema: &'a Schema,
    mut node: usize,
    path: &[String],
) -> Hot<Option<Val<'a>>> {
    let mut i = 0;
    for _ in 0..=MAX_DEPTH {
        match schema.node(node) {
            Node::Union(branches) => {
                node = *r.branch(branches)?;
            }
            Node::Record { fields, .. } if i < path.len() => {
                let Some(k) = field_of(schema, fields, &path[i]) else {
                    return Ok(None);
                };
                for &(_, f) in &fields[..k] {
                    r.skip(schema, f, 1)?;
                }
                node = fields[k].1;
                i += 1;
            }
            // A reader-only field: its default.
            Node::Default { node: n, datum } => {
                r = Reader::new(datum);
                node = *n;
            }
            Node::Unreadable { reason, .. } => return Err(r.err(reason).into()),
            _ if i < path.len() => return Ok(None),
            &Node::Promote { wire, reader } => {
                let v = eval(r, schema, wire, &[])?;
                return Ok(match (v, schema.node(reader)) {
                    (Some(Val::Int(x)), Node::Float | Node::Double) => Some(Val::Float(x as f64)),
                    (v, _) => v,
                });
            }
            Node::Int | Node::Long => return Ok(Some(Val::Int(r.long_word()?))),
            Node::Float => return Ok(Some(Val::Float(r.float()? as f64))),
            Node::Double => return Ok(Some(Val::Float(r.double()?))),
            Node::Boolean => return Ok(Some(Val::Bool(r.boolean()?))),
            Node::Bytes | Node::String => return Ok(Some(Val::Bytes(r.bytes()?))),
            Node::Fixed(n) => return Ok(Some(Val::Bytes(r.take(*n)?))),
            Node::Enum { symbols } => {
                let at = r.pos;
                let s = usize::try_from(r.long_word()?)
                    .ok()
                    .and_then(|i| symbols.get(i))
                    .ok_or(DatumError {
                        reason: "enum index out of range",
                        offset: at,
                    })?;
                return Ok(Some(Val::Symbol(s)));
            }
            Node::EnumMap { symbols } => {
                let at = r.pos;
                let s = usize::try_from(r.long_word()?)
                    .ok()
                    .and_then(|i| symbols.get(i))
                    .ok_or(DatumError {
                        reason: "enum index out of range",
                        offset: at,
                    })?;
                let Some((_, s)) = s else {
                    return Err(DatumError {
                        reason: "the writer's enum symbol is not in the reader's enum, \
                                 which has no default",
                        offset: at,
                    }
                    .into());
                };
                return Ok(Some(Val::Symbol(s)));
            }
            Node::Null | Node::Array(_) | Node::Map(_) | Node::Record { .. } | Node::Skip(_) => {
                return Ok(None);
            }
        }
    }
    Err(r.err("values nest too deeply").into())
}

fn text(v: Val<'_>) -> Option<&[u8]> {
    match v {
        Val::Bytes(b) => Some(b),
        Val::Symbol(s) => Some(s.as_bytes()),
        _ => None,
    }
}

fn eq_literal(v: Val<'_>, lit: &[u8]) -> bool {
    let s = std::str::from_utf8(lit).unwrap_or("");
    match v {
        Val::Int(i) => s.parse::<i64>() == Ok(i),
        Val::Float(x) => s.parse::<f64>() == Ok(x),
        Val::Bool(b) => s == if b { "true" } else { "false" },
        _ => text(v) == Some(lit),
    }
}

fn eq_vals(a: Val<'_>, b: Val<'_>) -> bool {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => x == y,
        (Val::Float(x), Val::Float(y)) => x == y,
        (Val::Int(x), Val::Float(y)) | (Val::Float(y), Val::Int(x)) => x as f64 == y,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        _ => match (text(a), text(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

/// Decodes rows `rows` of a block through a general plan (the general
/// twin of `AvroDecoder::decode_block_to`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_block(
    plan: &GeneralPlan,
    specs: &[FeatureSpec],
    st: &mut Scratch,
    file: &Arc<str>,
    block: u64,
    first_record: u64,
    data: &[u8],
    record_count: usize,
    rows: Range<usize>,
    out: &mut BatchBuilder,
) -> Result<usize> {
    let at = || Location::block(file.clone(), block);
    let schema = &*plan.schema;
    let min = schema.min_size[schema.root].max(1);
    if record_count > data.len() / min {
        return Err(Error::BadBlock {
            at: at().into(),
            reason: format!(
                "the block claims {record_count} records in {} bytes \
                 (records of this schema take at least {min})",
                data.len()
            ),
        });
    }
    st.fit(plan, specs);
    let mut r = Reader::new(data);
    let end = rows.end.min(record_count);
    for i in 0..end {
        let record = first_record.saturating_add(i as u64);
        // Rows before `rows` are decoded and dropped rather than skipped
        // by schema: the program reads map entries a skip would jump
        // over by their block size, so only decoding consumes exactly the
        // bytes (and finds exactly the errors) that decoding does.
        out.begin_row();
        let row = out.next_row() as i64;
        let res = decode_record(plan, st, &mut r, row, out.columns_mut());
        match &res {
            Ok(()) if i >= rows.start => out.end_row(),
            _ => out.discard_row(),
        }
        if let Err(e) = res {
            return Err(match *e {
                Fail::Datum(d) => datum_error(at().with_record(record), d),
                Fail::DatumIn(col, d) => {
                    datum_error(at().with_record(record).with_feature(specs[col].name()), d)
                }
                Fail::Feature(col, problem) => Error::Feature {
                    at: at()
                        .with_record(record)
                        .with_feature(specs[col].name())
                        .into(),
                    problem,
                },
            });
        }
    }
    block_end(&r, end, record_count, at())
}

/// Decodes one record into its row.
fn decode_record<'a>(
    plan: &'a GeneralPlan,
    st: &mut Scratch,
    r: &mut Reader<'a>,
    row: i64,
    cols: &mut [BuilderColumn],
) -> Hot<()> {
    st.count.iter_mut().for_each(|c| *c = 0);
    st.nulled.iter_mut().for_each(|n| *n = false);
    st.sel.clear();
    for (f, v) in st.sparse_vals.iter_mut().enumerate() {
        if let Some(v) = v {
            v.clear();
            st.sparse_idx[f].iter_mut().for_each(Vec::clear);
        }
    }
    let schema = &*plan.schema;
    let roots = plan
        .roots
        .iter()
        .map(|path| eval(*r, schema, schema.root, path))
        .collect::<Hot<Vec<_>>>()?;
    let mut run = Run {
        schema,
        plan,
        cols,
        st,
        row,
        roots,
    };
    run.value(r, &plan.root, 0)?;
    run.finish_row()
}

/// The general path's share of an `AvroDecoder`: plans by file and by
/// schema text, and the scratch of the record being decoded.
#[derive(Clone, Debug, Default)]
pub(crate) struct Plans {
    by_file: HashMap<Arc<str>, Arc<GeneralPlan>>,
    by_schema: HashMap<String, Arc<GeneralPlan>>,
    scratch: Scratch,
}

impl Plans {
    /// Compiles (or reuses) the plan of `file`'s writer schema.
    /// With a reader schema, the plan is compiled from the writer schema
    /// resolved against it, so paths name the reader's fields.
    pub(crate) fn add_schema(
        &mut self,
        specs: &[FeatureSpec],
        reader: Option<&ReaderSchema>,
        file: Arc<str>,
        schema_json: &str,
    ) -> Result<()> {
        let plan = match self.by_schema.get(schema_json) {
            Some(p) => p.clone(),
            None => {
                let mut schema = Schema::parse(schema_json).map_err(|reason| Error::BadHeader {
                    file: file.clone(),
                    reason: format!("bad writer schema: {reason}"),
                })?;
                if let Some(reader) = reader {
                    schema = resolve(&schema, reader, &file)?;
                }
                let plan = Arc::new(GeneralPlan::compile(Arc::new(schema), specs, &file)?);
                self.by_schema.insert(schema_json.to_string(), plan.clone());
                plan
            }
        };
        self.by_file.insert(file, plan);
        Ok(())
    }

    pub(crate) fn knows(&self, file: &Arc<str>) -> bool {
        self.by_file.contains_key(file)
    }

    /// [`decode_block`] with the plan of `file`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn decode_block(
        &mut self,
        specs: &[FeatureSpec],
        file: &Arc<str>,
        block: u64,
        first_record: u64,
        data: &[u8],
        record_count: usize,
        rows: Range<usize>,
        out: &mut BatchBuilder,
    ) -> Result<usize> {
        let plan = self
            .by_file
            .get(file)
            .cloned()
            .ok_or_else(|| Error::Schema {
                file: file.clone(),
                feature: String::new(),
                reason: "no writer schema was registered for this file".into(),
            })?;
        decode_block(
            &plan,
            specs,
            &mut self.scratch,
            file,
            block,
            first_record,
            data,
            record_count,
            rows,
            out,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiled skips read the same bytes and fail with the same errors
    /// as `Reader::skip`, on any bytes, at any depth.
    #[test]
    fn compiled_skips_agree_with_reader_skip() {
        let schemas = [
            r#"{"type": "record", "name": "E", "fields": [
                {"name": "ts", "type": "long"},
                {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
                {"name": "price", "type": ["null", "double"]},
                {"name": "items", "type": {"type": "array", "items": "long"}},
                {"name": "ok", "type": "boolean"},
                {"name": "tag", "type": "string"},
                {"name": "f", "type": {"type": "fixed", "name": "F", "size": 3}},
                {"name": "m", "type": {"type": "map", "values": "int"}}]}"#,
            r#"{"type": "array", "items": {"type": "array", "items": "float"}}"#,
            r#"{"type": "array", "items": ["null", {"type": "array", "items": "string"}]}"#,
            r#"{"type": "array", "items": {"type": "record", "name": "N", "fields": []}}"#,
            r#"{"type": "record", "name": "L", "fields": [
                {"name": "v", "type": "int"},
                {"name": "next", "type": ["null", "L"]}]}"#,
        ];
        // Bytes from a fixed LCG, biased to small varints and ends.
        let mut seed = 7u64;
        let mut bufs: Vec<Vec<u8>> = Vec::new();
        for len in 0..48 {
            for _ in 0..40 {
                let buf = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                        let b = (seed >> 33) as u8;
                        match b % 4 {
                            0 => b & 0x07,
                            1 => 0x02,
                            _ => b,
                        }
                    })
                    .collect();
                bufs.push(buf);
            }
        }
        for json in schemas {
            let schema = Schema::parse(json).unwrap();
            let skips: Vec<Option<Skip>> = (0..schema.nodes.len())
                .map(|n| {
                    let (how, height) = skipper(&schema, n, SKIP_LEVELS);
                    Some(Skip { how, height })
                })
                .collect();
            for buf in &bufs {
                for depth in [0, 3, MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH] {
                    let mut a = Reader::new(buf);
                    let mut b = a;
                    let got = skip_value(&mut a, &schema, &skips, schema.root, depth);
                    let want = b.skip(&schema, schema.root, depth);
                    assert_eq!(got, want, "{json} {buf:x?} at depth {depth}");
                    assert_eq!(a.pos, b.pos, "{json} {buf:x?} at depth {depth}");
                }
            }
        }
    }
}

#[cfg(test)]
mod fast_tests {
    use grist_testkit::avro::long;

    use super::*;

    fn strip_fast(p: &mut Prog) {
        match p {
            Prog::Default { prog, .. } => strip_fast(prog),
            Prog::Record(fields) => fields.iter_mut().for_each(strip_fast),
            Prog::Union { branches, .. } => branches.iter_mut().for_each(strip_fast),
            Prog::Leaves { child, .. } => strip_fast(&mut child.prog),
            Prog::Array {
                children, direct, ..
            } => {
                for c in children.iter_mut() {
                    c.fast = None;
                    strip_fast(&mut c.prog);
                }
                for (_, p) in direct.iter_mut().flat_map(|d| &mut d.at) {
                    strip_fast(p);
                }
            }
            Prog::Map { children, .. } => children.iter_mut().for_each(|c| {
                c.fast = None;
                strip_fast(&mut c.prog);
            }),
            _ => {}
        }
    }

    fn has_fast(p: &Prog) -> bool {
        match p {
            Prog::Record(fields) => fields.iter().any(has_fast),
            Prog::Array { children, .. } => children
                .iter()
                .any(|c| c.fast.is_some() || has_fast(&c.prog)),
            _ => false,
        }
    }

    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n.max(1)
        }
    }

    /// `items` as array blocks: random splits, some blocks with a
    /// negative count and their byte size.
    fn blocks(out: &mut Vec<u8>, items: &[Vec<u8>], rng: &mut Lcg) {
        grist_testkit::avro::blocks(items, out, |left| {
            (1 + rng.next(left as u64) as usize, rng.next(3) == 0)
        });
    }

    fn event(rng: &mut Lcg) -> Vec<u8> {
        let mut e = Vec::new();
        let mag = [1u64, 100, 1 << 20, 1 << 40, u64::MAX >> 2][rng.next(5) as usize];
        long(&mut e, rng.next(mag) as i64 - (mag / 2) as i64);
        // An index past the symbols now and then: an error both ways.
        long(
            &mut e,
            if rng.next(300) == 0 {
                7
            } else {
                rng.next(3) as i64
            },
        );
        if rng.next(2) == 0 {
            e.push(0);
        } else {
            e.push(2);
            e.extend_from_slice(&1.5f64.to_le_bytes());
        }
        let items: Vec<Vec<u8>> = (0..rng.next(13))
            .map(|_| {
                let mut v = Vec::new();
                long(&mut v, rng.next(1 << 30) as i64);
                v
            })
            .collect();
        blocks(&mut e, &items, rng);
        let w: Vec<Vec<u8>> = (0..rng.next(4))
            .map(|i| (i as f32).to_le_bytes().to_vec())
            .collect();
        blocks(&mut e, &w, rng);
        for _ in 0..2 {
            let n = rng.next(6);
            long(&mut e, n as i64);
            e.extend((0..n).map(|i| b'a' + i as u8));
        }
        e.extend_from_slice(&[7, 9]);
        e
    }

    /// The batch (as JSON) or the error of one block, `fast` or not.
    fn run(plan: &GeneralPlan, specs: &[FeatureSpec], data: &[u8], n: usize) -> String {
        let mut st = Scratch::default();
        let mut out = BatchBuilder::new();
        new_columns(specs, &Limits::default(), &mut out);
        let file: Arc<str> = "t.avro".into();
        match decode_block(plan, specs, &mut st, &file, 0, 0, data, n, 0..n, &mut out) {
            Ok(end) => match out.finish() {
                Ok(b) => format!("{end} {}", grist_tensor::json::batch_to_json(&b)),
                Err(e) => format!("finish: {e}"),
            },
            Err(e) => format!("error: {e}"),
        }
    }

    /// Records of arrays of records read by `Run::fast_elements` decode
    /// (and fail) exactly as element by element, on valid blocks and on
    /// damaged ones, through `Run::array` and `Run::direct`.
    #[test]
    fn fast_elements_read_as_element_by_element() {
        let schema = Arc::new(
            Schema::parse(
                r#"{"type": "record", "name": "R", "fields": [
                {"name": "id", "type": "long"},
                {"name": "ev", "type": {"type": "array", "items": {"type": "record", "name": "E",
                    "fields": [
                    {"name": "ts", "type": "long"},
                    {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B", "C"]}},
                    {"name": "price", "type": ["null", "double"]},
                    {"name": "items", "type": {"type": "array", "items": "long"}},
                    {"name": "w", "type": {"type": "array", "items": "float"}},
                    {"name": "note", "type": "string"},
                    {"name": "tag", "type": "string"},
                    {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}}]}}}]}"#,
            )
            .unwrap(),
        );
        let varlen = |name: &str, dtype: &str| serde_json::json!({"name": name, "kind": "varlen", "dtype": dtype});
        let base = vec![
            serde_json::json!({"name": "id", "kind": "dense", "dtype": "int64", "shape": []}),
            varlen("ev[*].ts", "int64"),
            varlen("ev[*].kind", "string"),
            varlen("ev[*].items[*]", "int64"),
            varlen("ev[*].w[*]", "float32"),
            varlen("ev[*].tag", "string"),
        ];
        let mut indexed = base.clone();
        indexed.push(
            serde_json::json!({"name": "ev[0].ts", "kind": "dense", "dtype": "int64", "shape": []}),
        );
        let mut sized = base.clone();
        sized[3] = serde_json::json!({"name": "ev[*].items[*]", "kind": "varlen",
            "dtype": "int64", "shape": [-1, 3]});
        let mut rng = Lcg(11);
        let mut decoded = 0;
        for features in [base, indexed, sized] {
            let specs: Vec<FeatureSpec> =
                serde_json::from_value(serde_json::Value::Array(features)).unwrap();
            let file: Arc<str> = "t.avro".into();
            let fast = GeneralPlan::compile(schema.clone(), &specs, &file).unwrap();
            assert!(has_fast(&fast.root), "no fast path planned");
            let mut slow = fast.clone();
            strip_fast(&mut slow.root);
            assert!(!has_fast(&slow.root));
            for _ in 0..300 {
                let n = 1 + rng.next(4) as usize;
                let mut data = Vec::new();
                for _ in 0..n {
                    long(&mut data, rng.next(1000) as i64);
                    let events: Vec<Vec<u8>> = (0..rng.next(30)).map(|_| event(&mut rng)).collect();
                    blocks(&mut data, &events, &mut rng);
                }
                let got = run(&fast, &specs, &data, n);
                assert_eq!(got, run(&slow, &specs, &data, n));
                decoded += usize::from(!got.starts_with("error"));
                // Damaged: cut short, or a byte changed.
                for _ in 0..4 {
                    let mut bad = data.clone();
                    if rng.next(2) == 0 {
                        bad.truncate(rng.next(bad.len() as u64) as usize);
                    } else {
                        let i = rng.next(bad.len() as u64) as usize;
                        bad[i] = rng.next(256) as u8;
                    }
                    assert_eq!(run(&fast, &specs, &bad, n), run(&slow, &specs, &bad, n));
                }
            }
        }
        // Most valid blocks decode (the rest meet a bad enum index or,
        // with items of size 3, another count).
        assert!(decoded > 300, "{decoded} blocks decoded");
    }
}
