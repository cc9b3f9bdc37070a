//! Compiling feature specs against a writer schema into a decode plan: one
//! step per top-level writer field, in writer order.

use std::collections::HashMap;
use std::sync::Arc;

use grist_tensor::{DType, FeatureSpec, TensorError, UNKNOWN_DIM, Values, resolve_default};

use crate::error::{Error, Result};
use crate::schema::{Node, Schema};

/// How one leaf value is stored in the writer schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leaf {
    Int,
    Long,
    Float,
    Double,
    Boolean,
    /// `string` or `bytes`.
    Bytes,
    /// An enum: the symbols of node `.0`.
    Enum(usize),
    /// A fixed of this size.
    Fixed(usize),
}

impl Leaf {
    fn of(node: &Node) -> Option<Leaf> {
        Some(match node {
            Node::Int => Leaf::Int,
            Node::Long => Leaf::Long,
            Node::Float => Leaf::Float,
            Node::Double => Leaf::Double,
            Node::Boolean => Leaf::Boolean,
            Node::Bytes | Node::String => Leaf::Bytes,
            Node::Fixed(n) => Leaf::Fixed(*n),
            Node::Enum { .. } => return None,
            _ => return None,
        })
    }

    /// Whether values of this leaf can fill a column of `dtype`: the ATDS
    /// mapping, plus Avro's promotions (int → long/float/double, long →
    /// float/double, float → double) and enum / fixed → string.
    fn fits(self, dtype: DType) -> bool {
        matches!(
            (self, dtype),
            (
                Leaf::Int,
                DType::Int32 | DType::Int64 | DType::Float32 | DType::Float64
            ) | (Leaf::Long, DType::Int64 | DType::Float32 | DType::Float64)
                | (Leaf::Float, DType::Float32 | DType::Float64)
                | (Leaf::Double, DType::Float64)
                | (Leaf::Boolean, DType::Bool)
                | (Leaf::Bytes | Leaf::Enum(_) | Leaf::Fixed(_), DType::String)
        )
    }
}

/// A `[null, T]` or `[T, null]` union around a feature's field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Nullable {
    /// The branch index of `null`.
    pub(crate) null_branch: i64,
    /// Whether a null is an error: the writer's `[null, T]` read through a
    /// reader schema whose type is `T` alone.
    pub(crate) null_is_error: bool,
}

/// How a requested field is decoded.
#[derive(Clone, Debug)]
pub(crate) enum FieldPlan {
    /// A dense tensor: `dims` nested arrays (none for a scalar) of `leaf`.
    Dense {
        leaf: Leaf,
        dims: Vec<usize>,
        /// The values a null (or a field missing from the writer schema)
        /// takes, one row's worth.
        default: Option<Values>,
    },
    /// A varlen (sparse) tensor: `dims` nested arrays, `None` for unknown
    /// lengths.
    Varlen {
        leaf: Leaf,
        dims: Vec<Option<usize>>,
    },
    /// An ATDS sparse record: its fields in writer order.
    Sparse { parts: Vec<SparsePart> },
}

/// One field of an ATDS sparse record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SparsePart {
    /// `indicesK`: an array of int or long.
    Index { k: usize, leaf: Leaf },
    /// `values`: an array of the leaf.
    Values(Leaf),
    /// Any other field.
    Skip(usize),
}

/// One step per top-level writer field.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// A field no spec asks for: skipped without being materialised.
    Skip(usize),
    /// Column `col` from this field.
    Column {
        col: usize,
        nullable: Option<Nullable>,
        /// The node of the (non-null) value.
        node: usize,
        plan: FieldPlan,
    },
}

/// One row's worth of a column that every record fills alike.
#[derive(Clone, Debug)]
pub(crate) enum Constant {
    Dense(Values),
    /// A sparse or varlen row: its values, and its entries' indices (the
    /// batch row left out) and dense shape.
    Sparse {
        values: Values,
        indices: Vec<i64>,
        shape: Vec<i64>,
    },
}

/// A decode plan for one writer schema (or a writer schema resolved
/// against a reader schema).
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) schema: Arc<Schema>,
    pub(crate) steps: Vec<Step>,
    /// Columns every record fills alike: dense columns the schema lacks,
    /// with the spec's default; reader fields the writer lacks, with the
    /// reader's default (from `constants`, once the decoder has decoded
    /// them).
    pub(crate) defaults: Vec<(usize, Constant)>,
    /// Reader fields the writer lacks (resolution): each column's step
    /// and the reader's default in Avro binary, decoded once by the step.
    pub(crate) constants: Vec<(Step, Vec<u8>)>,
}

/// The specs a format accepts, checked once: dense, sparse and varlen.
pub(crate) fn check_specs(specs: &[FeatureSpec]) -> Result<()> {
    let mut seen = HashMap::new();
    for s in specs {
        if seen.insert(s.name(), ()).is_some() {
            return Err(Error::Spec(TensorError::InvalidSpec {
                feature: s.name().to_string(),
                reason: "the name is used twice".into(),
            }));
        }
        match s {
            FeatureSpec::Dense(d) => {
                if d.shape.iter().any(|&x| x < 0) {
                    return Err(unsupported(
                        s,
                        "a dense Avro feature needs a fully defined shape",
                    ));
                }
                if grist_tensor::shape_elements(&d.shape).is_none() {
                    return Err(Error::Spec(TensorError::InvalidSpec {
                        feature: s.name().to_string(),
                        reason: format!("shape {:?} has more than 2^63 - 1 elements", d.shape),
                    }));
                }
            }
            FeatureSpec::Sparse(sp) => match &sp.shape {
                None => {
                    return Err(unsupported(
                        s,
                        "an Avro sparse feature needs `shape` (a record of indices0.. and values)",
                    ));
                }
                Some(shape) if shape.iter().any(|&d| d < 0) => {
                    return Err(unsupported(
                        s,
                        "an Avro sparse feature's `shape` must give every size (no -1): \
                             indices are checked against it",
                    ));
                }
                Some(_) => {}
            },
            FeatureSpec::Varlen(v) => {
                if v.shape.is_none() && v.rank.is_none() {
                    return Err(unsupported(
                        s,
                        "an Avro varlen feature needs `shape` (e.g. [-1])",
                    ));
                }
            }
            _ => {
                return Err(unsupported(s, "Avro features are dense, sparse or varlen"));
            }
        }
    }
    Ok(())
}

fn unsupported(s: &FeatureSpec, reason: &str) -> Error {
    Error::Spec(TensorError::UnsupportedSpec {
        feature: s.name().to_string(),
        format: "Avro",
        kind: s.kind(),
        reason: reason.into(),
    })
}

struct Compiler<'a> {
    schema: &'a Schema,
    file: &'a Arc<str>,
}

impl Compiler<'_> {
    fn mismatch(&self, feature: &str, reason: String) -> Error {
        Error::Schema {
            file: self.file.clone(),
            feature: feature.to_string(),
            reason,
        }
    }

    /// Goes `levels` arrays deep from `node`, returning the leaf node.
    fn arrays(&self, feature: &str, mut node: usize, levels: usize) -> Result<usize> {
        let start = node;
        for level in 0..levels {
            match self.schema.node(node) {
                Node::Array(items) => node = *items,
                _ => {
                    return Err(self.mismatch(
                        feature,
                        format!(
                            "the spec has rank {levels} but the writer type {} has {level} levels of arrays",
                            self.schema.type_name(start)
                        ),
                    ));
                }
            }
        }
        Ok(node)
    }

    /// The leaf of a feature; `in_array` when the leaves are array items.
    fn leaf(&self, feature: &str, node: usize, dtype: DType, in_array: bool) -> Result<Leaf> {
        // The leaf as written, and the type it is read as: they differ
        // where a reader schema promotes the writer's type, and the
        // promotions compose with the dtype mapping (`Leaf::fits`).
        let (leaf, read_as) = match self.schema.node(node) {
            Node::Enum { .. } | Node::EnumMap { .. } => {
                (Some(Leaf::Enum(node)), Some(Leaf::Enum(node)))
            }
            &Node::Promote { wire, reader } => (
                Leaf::of(self.schema.node(wire)),
                Leaf::of(self.schema.node(reader)),
            ),
            n => (Leaf::of(n), Leaf::of(n)),
        };
        let leaf = leaf.filter(|_| read_as.is_some_and(|r| r.fits(dtype)));
        match leaf {
            // Items of no bytes: an array could claim any number of them
            // in a few bytes (a valid file included), and each would be a
            // value in the output.
            Some(Leaf::Fixed(0)) if in_array => Err(self.mismatch(
                feature,
                "arrays of fixed(0) cannot be read: their items take no bytes, so nothing bounds how many an array holds".into(),
            )),
            Some(l) => Ok(l),
            _ => Err(self.mismatch(
                feature,
                format!(
                    "writer type {} cannot be read as {dtype}",
                    self.schema.type_name(node)
                ),
            )),
        }
    }

    fn field(&self, spec: &FeatureSpec, node: usize) -> Result<FieldPlan> {
        let name = spec.name();
        Ok(match spec {
            FeatureSpec::Dense(d) => {
                let dims: Vec<usize> = d.shape.iter().map(|&x| x as usize).collect();
                let leaf_node = self.arrays(name, node, dims.len())?;
                let leaf = self.leaf(name, leaf_node, d.dtype, !dims.is_empty())?;
                let default = match &d.default {
                    Some(v) => Some(resolve_default(name, d.dtype, v, dims.iter().product())?),
                    None => None,
                };
                FieldPlan::Dense {
                    leaf,
                    dims,
                    default,
                }
            }
            FeatureSpec::Varlen(v) => {
                let dims: Vec<Option<usize>> = match (&v.shape, v.rank) {
                    (Some(shape), _) => shape
                        .iter()
                        .map(|&x| (x != UNKNOWN_DIM).then_some(x.max(0) as usize))
                        .collect(),
                    (None, Some(rank)) => vec![None; rank],
                    (None, None) => vec![None],
                };
                let leaf_node = self.arrays(name, node, dims.len())?;
                FieldPlan::Varlen {
                    leaf: self.leaf(name, leaf_node, v.dtype, true)?,
                    dims,
                }
            }
            FeatureSpec::Sparse(sp) => {
                let rank = sp.shape.as_ref().map_or(0, Vec::len);
                let Node::Record { fields, .. } = self.schema.node(node) else {
                    return Err(self.mismatch(
                        name,
                        format!(
                            "a sparse feature needs a record of indices0..indices{} and values, found {}",
                            rank.saturating_sub(1),
                            self.schema.type_name(node)
                        ),
                    ));
                };
                let mut parts = Vec::new();
                let mut found = vec![false; rank];
                let mut values = false;
                for (fname, fnode) in fields {
                    let index = fname
                        .strip_prefix("indices")
                        .and_then(|k| k.parse::<usize>().ok())
                        .filter(|&k| k < rank);
                    parts.push(match (index, fname.as_str()) {
                        (Some(k), _) => {
                            let mut leaf_node = self.arrays(name, *fnode, 1)?;
                            if let Node::Promote { wire, .. } = self.schema.node(leaf_node) {
                                leaf_node = *wire;
                            }
                            let leaf = match self.schema.node(leaf_node) {
                                Node::Int => Leaf::Int,
                                Node::Long => Leaf::Long,
                                _ => {
                                    return Err(self.mismatch(
                                        name,
                                        format!("{fname} must be an array of int or long"),
                                    ));
                                }
                            };
                            found[k] = true;
                            SparsePart::Index { k, leaf }
                        }
                        (None, "values") => {
                            let leaf_node = self.arrays(name, *fnode, 1)?;
                            values = true;
                            SparsePart::Values(self.leaf(name, leaf_node, sp.dtype, true)?)
                        }
                        _ => SparsePart::Skip(*fnode),
                    });
                }
                if let Some(k) = found.iter().position(|f| !f) {
                    return Err(self.mismatch(name, format!("the sparse record has no indices{k}")));
                }
                if !values {
                    return Err(self.mismatch(name, "the sparse record has no values".into()));
                }
                FieldPlan::Sparse { parts }
            }
            other => {
                return Err(unsupported(
                    other,
                    "Avro features are dense, sparse or varlen",
                ));
            }
        })
    }
}

impl Plan {
    /// Compiles `specs` against the writer schema of `file`.
    pub(crate) fn compile(
        schema: Arc<Schema>,
        specs: &[FeatureSpec],
        file: &Arc<str>,
    ) -> Result<Plan> {
        let c = Compiler {
            schema: &schema,
            file,
        };
        let Node::Record { fields, .. } = schema.node(schema.root) else {
            return Err(Error::Schema {
                file: file.clone(),
                feature: String::new(),
                reason: format!(
                    "the writer schema is {}, not a record",
                    schema.type_name(schema.root)
                ),
            });
        };
        let wanted: HashMap<&str, usize> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name(), i))
            .collect();
        let mut used = vec![false; specs.len()];
        let mut steps = Vec::with_capacity(fields.len());
        let mut constants = Vec::new();
        // Whether a union branch is null, or a null the reader cannot take.
        let null = |b: usize| match schema.node(b) {
            Node::Null => Some(false),
            Node::Unreadable { wire, .. } if schema.node(*wire) == &Node::Null => Some(true),
            _ => None,
        };
        for (fname, fnode) in fields {
            // Resolution: a writer field the reader lacks, a reader field
            // the writer lacks.
            let (fnode, default) = match schema.node(*fnode) {
                Node::Skip(wire) => {
                    steps.push(Step::Skip(*wire));
                    continue;
                }
                Node::Default { node, datum } => (node, Some(datum)),
                _ => (fnode, None),
            };
            let Some(&col) = wanted.get(fname.as_str()) else {
                if default.is_none() {
                    steps.push(Step::Skip(*fnode));
                }
                continue;
            };
            used[col] = true;
            let (nullable, node) = match schema.node(*fnode) {
                Node::Union(b) if b.len() == 2 => match (null(b[0]), null(b[1])) {
                    (Some(null_is_error), _) => (
                        Some(Nullable {
                            null_branch: 0,
                            null_is_error,
                        }),
                        b[1],
                    ),
                    (_, Some(null_is_error)) => (
                        Some(Nullable {
                            null_branch: 1,
                            null_is_error,
                        }),
                        b[0],
                    ),
                    _ => {
                        return Err(c.mismatch(
                            fname,
                            format!("union {} is not [null, T]", schema.type_name(*fnode)),
                        ));
                    }
                },
                Node::Union(_) => {
                    return Err(c.mismatch(
                        fname,
                        format!("union {} is not [null, T]", schema.type_name(*fnode)),
                    ));
                }
                _ => (None, *fnode),
            };
            let plan = c.field(&specs[col], node)?;
            let step = Step::Column {
                col,
                nullable,
                node,
                plan,
            };
            match default {
                Some(datum) => constants.push((step, datum.clone())),
                None => steps.push(step),
            }
        }
        let mut defaults = Vec::new();
        for (col, spec) in specs.iter().enumerate() {
            if used[col] {
                continue;
            }
            match spec {
                FeatureSpec::Dense(d) if d.default.is_some() => {
                    let n = d.shape.iter().map(|&x| x as usize).product();
                    let v = resolve_default(
                        spec.name(),
                        d.dtype,
                        d.default.as_ref().unwrap_or(&serde_json::Value::Null),
                        n,
                    )?;
                    defaults.push((col, Constant::Dense(v)));
                }
                _ => {
                    let which = if schema.resolved { "reader" } else { "writer" };
                    return Err(
                        c.mismatch(spec.name(), format!("the {which} schema has no such field"))
                    );
                }
            }
        }
        Ok(Plan {
            schema,
            steps,
            defaults,
            constants,
        })
    }
}
