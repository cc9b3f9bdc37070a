//! Compiling feature specs into a decode plan: a key table and one column
//! plan per output, checked against what `tf.io.parse_example` and
//! `tf.io.parse_sequence_example` accept.

use std::collections::HashMap;

use grist_tensor::{
    DType, FeatureSpec, Partition, PartitionKind, TensorError, Values, resolve_default,
};

use crate::error::{Error, Result};

/// Feature names → dense slot numbers, with a hash table tuned for the
/// short keys of tf.Example (open addressing, no allocation per lookup).
#[derive(Clone, Debug)]
pub(crate) struct KeyTable {
    names: Vec<Box<[u8]>>,
    /// (hash, slot + 1); 0 = empty.
    table: Vec<(u64, u32)>,
    mask: usize,
}

#[inline]
fn hash(key: &[u8]) -> u64 {
    // FxHash-style: fold 8-byte words with a multiply-rotate.
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = key.len() as u64;
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(buf)).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

impl KeyTable {
    fn new() -> Self {
        KeyTable {
            names: Vec::new(),
            table: vec![(0, 0); 8],
            mask: 7,
        }
    }

    /// The slot of `key`, adding it if new.
    fn intern(&mut self, key: &str) -> u32 {
        if let Some(slot) = self.lookup(key.as_bytes()) {
            return slot;
        }
        let slot = self.names.len() as u32;
        self.names.push(key.as_bytes().into());
        if self.names.len() * 2 > self.table.len() {
            let size = (self.table.len() * 2).max(8);
            self.table = vec![(0, 0); size];
            self.mask = size - 1;
            for (i, name) in self.names.iter().enumerate() {
                Self::insert(&mut self.table, self.mask, hash(name), i as u32);
            }
        } else {
            Self::insert(&mut self.table, self.mask, hash(key.as_bytes()), slot);
        }
        slot
    }

    fn insert(table: &mut [(u64, u32)], mask: usize, h: u64, slot: u32) {
        let mut i = h as usize & mask;
        while table[i].1 != 0 {
            i = (i + 1) & mask;
        }
        table[i] = (h, slot + 1);
    }

    /// The slot of `key`, if it is a wanted feature.
    #[inline]
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<u32> {
        let h = hash(key);
        let mut i = h as usize & self.mask;
        loop {
            let (eh, slot) = self.table[i];
            if slot == 0 {
                return None;
            }
            if eh == h && *self.names[slot as usize - 1] == *key {
                return Some(slot - 1);
            }
            i = (i + 1) & self.mask;
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether slot `slot` is the key `key`.
    #[inline]
    pub(crate) fn is(&self, slot: u32, key: &[u8]) -> bool {
        let name = &self.names[slot as usize];
        // Short keys (the usual case) compare as two words, no memcmp call.
        if name.len() != key.len() {
            return false;
        }
        match key.len() {
            8..=16 => {
                let word = |b: &[u8], at: usize| {
                    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
                };
                let last = key.len() - 8;
                word(name, 0) == word(key, 0) && word(name, last) == word(key, last)
            }
            0..8 => name.iter().zip(key).all(|(a, b)| a == b),
            _ => **name == *key,
        }
    }

    /// The name of slot `slot`.
    pub(crate) fn name(&self, slot: u32) -> String {
        String::from_utf8_lossy(&self.names[slot as usize]).into_owned()
    }
}

/// How one output column of a tf.Example (or context) parse is filled.
#[derive(Clone, Debug)]
pub(crate) enum ColumnPlan {
    /// `FixedLenFeature`.
    Dense {
        key: u32,
        dtype: DType,
        shape: Vec<usize>,
        row_len: usize,
        default: Option<Values>,
    },
    /// `VarLenFeature` → sparse `[batch, max]`.
    Varlen { key: u32, dtype: DType },
    /// `SparseFeature`.
    Sparse {
        index_keys: Vec<u32>,
        value_key: u32,
        dtype: DType,
        sizes: Vec<i64>,
        already_sorted: bool,
    },
    /// `RaggedFeature`.
    Ragged {
        value_key: u32,
        dtype: DType,
        partitions: Vec<(PartitionKind, Option<u32>)>,
        row_splits_dtype: DType,
        validate: bool,
    },
    /// `FixedLenSequenceFeature` in `parse_example` → dense padded.
    Padded {
        key: u32,
        dtype: DType,
        item_shape: Vec<usize>,
        item_len: usize,
        pad: Values,
    },
}

/// How one output column of the feature lists of a sequence example is
/// filled.
#[derive(Clone, Debug)]
pub(crate) enum SequencePlan {
    /// `FixedLenSequenceFeature` → dense `[batch, max_steps, ...]` + lengths.
    Dense {
        key: u32,
        dtype: DType,
        item_shape: Vec<usize>,
        item_len: usize,
        allow_missing: bool,
    },
    /// `VarLenFeature` → sparse `[batch, max_steps, max_values]`.
    Varlen { key: u32, dtype: DType },
    /// `RaggedFeature` without partitions → `[batch, (steps), (values)]`.
    Ragged {
        key: u32,
        dtype: DType,
        row_splits_dtype: DType,
    },
}

/// A compiled parse: output names and plans.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Keys of the Example features (or of the context).
    pub(crate) keys: KeyTable,
    pub(crate) columns: Vec<(String, ColumnPlan)>,
    /// Keys of the feature lists (sequence examples only).
    pub(crate) list_keys: KeyTable,
    pub(crate) sequence: Vec<(String, SequencePlan)>,
    /// Whether records are `SequenceExample`s.
    pub(crate) is_sequence: bool,
    /// The specs, in output order.
    pub(crate) specs: Vec<FeatureSpec>,
    /// For plain Examples whose every key feeds exactly one column (no
    /// RaggedFeature): what each key slot is, so records can be decoded in
    /// one pass over their bytes.
    pub(crate) direct: Option<Vec<Role>>,
}

/// What one key is for, in the one-pass decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The values of dense column `.0`.
    Dense(usize),
    /// The values of varlen column `.0`.
    Varlen(usize),
    /// The values of padded (FixedLenSequenceFeature) column `.0`.
    Padded(usize),
    /// The values of SparseFeature column `.0`.
    SparseValue(usize),
    /// Index list `.1` of SparseFeature column `.0`.
    SparseIndex(usize, usize),
}

/// The roles of every key slot, or `None` when some key feeds several
/// columns or a column is ragged (the two-pass decoder handles those).
fn direct_roles(columns: &[(String, ColumnPlan)], keys: usize) -> Option<Vec<Role>> {
    let mut roles: Vec<Option<Role>> = vec![None; keys];
    let mut set = |key: u32, role: Role| -> Option<()> {
        let slot = roles.get_mut(key as usize)?;
        if slot.is_some() {
            return None;
        }
        *slot = Some(role);
        Some(())
    };
    for (c, (_, plan)) in columns.iter().enumerate() {
        match plan {
            ColumnPlan::Dense { key, .. } => set(*key, Role::Dense(c))?,
            ColumnPlan::Varlen { key, .. } => set(*key, Role::Varlen(c))?,
            ColumnPlan::Padded { key, .. } => set(*key, Role::Padded(c))?,
            ColumnPlan::Sparse {
                index_keys,
                value_key,
                ..
            } => {
                set(*value_key, Role::SparseValue(c))?;
                for (k, key) in index_keys.iter().enumerate() {
                    set(*key, Role::SparseIndex(c, k))?;
                }
            }
            ColumnPlan::Ragged { .. } => return None,
        }
    }
    roles.into_iter().collect()
}

fn invalid(feature: &str, reason: impl Into<String>) -> Error {
    Error::Spec(TensorError::InvalidSpec {
        feature: feature.to_string(),
        reason: reason.into(),
    })
}

fn unsupported(spec: &FeatureSpec, reason: impl Into<String>) -> Error {
    Error::Spec(TensorError::UnsupportedSpec {
        feature: spec.name().to_string(),
        format: "tf.Example",
        kind: spec.kind(),
        reason: reason.into(),
    })
}

/// tf.Example holds only int64, float and bytes lists; int32 and bool
/// columns read int64 lists (what a writer widens them to), each value
/// checked to fit.
fn check_dtype(spec: &FeatureSpec) -> Result<DType> {
    match spec.dtype() {
        d @ (DType::Int64 | DType::Int32 | DType::Bool | DType::Float32 | DType::String) => Ok(d),
        d => Err(unsupported(
            spec,
            format!(
                "dtype {d}: tf.Example holds only int64 (read as int64, int32 or bool), float32 and string"
            ),
        )),
    }
}

fn fixed_shape(name: &str, shape: &[i64]) -> Result<Vec<usize>> {
    let dims = shape
        .iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| invalid(name, format!("shape {shape:?} is not fully defined")))
        })
        .collect::<Result<Vec<usize>>>()?;
    if grist_tensor::shape_elements(shape).is_none() {
        return Err(invalid(
            name,
            format!("shape {shape:?} has more than 2^63 - 1 elements"),
        ));
    }
    Ok(dims)
}

pub(crate) fn zero(dtype: DType) -> Values {
    match dtype {
        DType::Int64 => Values::Int64(vec![0]),
        DType::Int32 => Values::Int32(vec![0]),
        DType::Bool => Values::Bool(vec![false]),
        DType::Float32 => Values::Float32(vec![0.0]),
        _ => {
            let mut v = Values::new(DType::String);
            if let Values::String(s) = &mut v {
                s.push(b"");
            }
            v
        }
    }
}

fn partition_kind(p: &Partition) -> PartitionKind {
    match p {
        Partition::RowSplits { .. } => PartitionKind::RowSplits,
        Partition::RowLengths { .. } => PartitionKind::RowLengths,
        Partition::RowStarts { .. } => PartitionKind::RowStarts,
        Partition::RowLimits { .. } => PartitionKind::RowLimits,
        Partition::ValueRowids { .. } => PartitionKind::ValueRowids,
        Partition::UniformRowLength { length } => PartitionKind::UniformRowLength(*length),
    }
}

/// Compiles one Example / context spec.
fn column(spec: &FeatureSpec, keys: &mut KeyTable, sequence_context: bool) -> Result<ColumnPlan> {
    let dtype = check_dtype(spec)?;
    let name = spec.name();
    Ok(match spec {
        FeatureSpec::Dense(d) => {
            let shape = fixed_shape(name, &d.shape)?;
            let row_len = shape.iter().product();
            let default = match &d.default {
                None => None,
                Some(v) => Some(resolve_default(name, dtype, v, row_len)?),
            };
            ColumnPlan::Dense {
                key: keys.intern(name),
                dtype,
                shape,
                row_len,
                default,
            }
        }
        FeatureSpec::Varlen(v) => {
            if v.shape.as_ref().is_some_and(|s| s != &[-1]) || v.rank.is_some_and(|r| r != 1) {
                return Err(unsupported(
                    spec,
                    "a tf.Example VarLenFeature has rank 1 (shape [-1])",
                ));
            }
            ColumnPlan::Varlen {
                key: keys.intern(name),
                dtype,
            }
        }
        FeatureSpec::Sparse(s) => {
            if sequence_context {
                return Err(unsupported(
                    spec,
                    "parse_sequence_example accepts FixedLenFeature, VarLenFeature and RaggedFeature context features",
                ));
            }
            let index_keys = s.index_keys();
            let (Some(value_key), Some(size)) = (&s.value_key, &s.size) else {
                return Err(unsupported(
                    spec,
                    "a tf.Example SparseFeature needs index_key, value_key and size",
                ));
            };
            let sizes = size.as_slice().to_vec();
            if index_keys.is_empty() || index_keys.len() != sizes.len() {
                return Err(invalid(
                    name,
                    format!("{} index keys but {} sizes", index_keys.len(), sizes.len()),
                ));
            }
            if let Some(bad) = sizes.iter().find(|&&s| s < 0) {
                return Err(invalid(name, format!("negative size {bad}")));
            }
            ColumnPlan::Sparse {
                index_keys: index_keys.iter().map(|k| keys.intern(k)).collect(),
                value_key: keys.intern(value_key),
                dtype,
                sizes,
                already_sorted: s.already_sorted,
            }
        }
        FeatureSpec::Ragged(r) => {
            if !matches!(r.row_splits_dtype, DType::Int32 | DType::Int64) {
                return Err(invalid(
                    name,
                    format!(
                        "row_splits_dtype {} is not int32 or int64",
                        r.row_splits_dtype
                    ),
                ));
            }
            let mut partitions = Vec::new();
            for p in &r.partitions {
                if let Partition::UniformRowLength { length } = p {
                    if *length <= 0 {
                        return Err(invalid(name, format!("uniform_row_length {length}")));
                    }
                }
                partitions.push((partition_kind(p), p.key().map(|k| keys.intern(k))));
            }
            ColumnPlan::Ragged {
                value_key: keys.intern(r.value_key()),
                dtype,
                partitions,
                row_splits_dtype: r.row_splits_dtype,
                validate: r.validate,
            }
        }
        FeatureSpec::FixedLenSequence(f) => {
            if sequence_context {
                return Err(unsupported(
                    spec,
                    "a FixedLenSequenceFeature belongs in sequence_features",
                ));
            }
            if !f.allow_missing {
                return Err(invalid(
                    name,
                    "Unsupported: FixedLenSequenceFeature requires allow_missing to be True.",
                ));
            }
            let item_shape = fixed_shape(name, &f.shape)?;
            let item_len = item_shape.iter().product();
            let pad = match &f.default {
                None => zero(dtype),
                Some(serde_json::Value::Array(items)) if !items.is_empty() => {
                    resolve_default(name, dtype, &items[0], 1)?
                }
                Some(v) => resolve_default(name, dtype, v, 1)?,
            };
            ColumnPlan::Padded {
                key: keys.intern(name),
                dtype,
                item_shape,
                item_len,
                pad,
            }
        }
        _ => return Err(unsupported(spec, "not a kind of spec tf.Example reads")),
    })
}

fn sequence_column(spec: &FeatureSpec, keys: &mut KeyTable) -> Result<SequencePlan> {
    let dtype = check_dtype(spec)?;
    let name = spec.name();
    Ok(match spec {
        FeatureSpec::FixedLenSequence(f) => {
            // tf.io.parse_sequence_example refuses any default here, before
            // reading (parse_example takes it as the padding value).
            if f.default.is_some() {
                return Err(invalid(
                    name,
                    format!("Value feature_list.dense_defaults[{name}] must be None"),
                ));
            }
            let item_shape = fixed_shape(name, &f.shape)?;
            SequencePlan::Dense {
                key: keys.intern(name),
                dtype,
                item_len: item_shape.iter().product(),
                item_shape,
                allow_missing: f.allow_missing,
            }
        }
        FeatureSpec::Varlen(v) => {
            if v.shape.as_ref().is_some_and(|s| s != &[-1]) || v.rank.is_some_and(|r| r != 1) {
                return Err(unsupported(spec, "a VarLenFeature has shape [-1]"));
            }
            SequencePlan::Varlen {
                key: keys.intern(name),
                dtype,
            }
        }
        FeatureSpec::Ragged(r) if r.partitions.is_empty() => SequencePlan::Ragged {
            key: keys.intern(r.value_key()),
            dtype,
            row_splits_dtype: r.row_splits_dtype,
        },
        FeatureSpec::Ragged(_) => {
            return Err(unsupported(
                spec,
                "partitioned RaggedFeatures in sequence_features are not supported",
            ));
        }
        _ => {
            return Err(unsupported(
                spec,
                "sequence_features accept FixedLenSequenceFeature, VarLenFeature and RaggedFeature",
            ));
        }
    })
}

fn check_names<'a>(specs: impl Iterator<Item = &'a FeatureSpec>) -> Result<()> {
    let mut seen = HashMap::new();
    for s in specs {
        if seen.insert(s.name().to_string(), ()).is_some() {
            return Err(invalid(s.name(), "the name is used twice"));
        }
    }
    Ok(())
}

/// Two RaggedFeatures that share a value key must agree on the splits
/// dtype (TensorFlow: "Conflicting partition type").
fn check_ragged_dtypes(specs: &[FeatureSpec]) -> Result<()> {
    let mut by_key: HashMap<&str, DType> = HashMap::new();
    for s in specs {
        if let FeatureSpec::Ragged(r) = s {
            if let Some(prev) = by_key.insert(r.value_key(), r.row_splits_dtype) {
                if prev != r.row_splits_dtype {
                    return Err(invalid(
                        s.name(),
                        format!(
                            "Conflicting partition type {prev} vs {} for feature {}.",
                            r.row_splits_dtype,
                            r.value_key()
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

impl Plan {
    /// A `tf.io.parse_example` plan.
    pub(crate) fn example(specs: &[FeatureSpec]) -> Result<Plan> {
        check_names(specs.iter())?;
        check_ragged_dtypes(specs)?;
        let mut keys = KeyTable::new();
        let columns: Vec<(String, ColumnPlan)> = specs
            .iter()
            .map(|s| Ok((s.name().to_string(), column(s, &mut keys, false)?)))
            .collect::<Result<_>>()?;
        let direct = direct_roles(&columns, keys.len());
        Ok(Plan {
            keys,
            columns,
            list_keys: KeyTable::new(),
            sequence: Vec::new(),
            is_sequence: false,
            specs: specs.to_vec(),
            direct,
        })
    }

    /// A `tf.io.parse_sequence_example` plan.
    pub(crate) fn sequence(context: &[FeatureSpec], sequence: &[FeatureSpec]) -> Result<Plan> {
        check_names(context.iter())?;
        check_names(sequence.iter())?;
        check_ragged_dtypes(context)?;
        let mut keys = KeyTable::new();
        let columns = context
            .iter()
            .map(|s| Ok((s.name().to_string(), column(s, &mut keys, true)?)))
            .collect::<Result<_>>()?;
        let mut list_keys = KeyTable::new();
        let seq = sequence
            .iter()
            .map(|s| Ok((s.name().to_string(), sequence_column(s, &mut list_keys)?)))
            .collect::<Result<_>>()?;
        Ok(Plan {
            keys,
            columns,
            list_keys,
            sequence: seq,
            is_sequence: true,
            specs: context.iter().chain(sequence).cloned().collect(),
            direct: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_table_finds_every_key_and_nothing_else() {
        let mut t = KeyTable::new();
        let names: Vec<String> = (0..100).map(|i| format!("feature_{i}")).collect();
        for n in &names {
            t.intern(n);
        }
        for (i, n) in names.iter().enumerate() {
            assert_eq!(t.lookup(n.as_bytes()), Some(i as u32));
        }
        assert_eq!(t.lookup(b"feature_100"), None);
        assert_eq!(t.lookup(b""), None);
        assert_eq!(t.intern("feature_5"), 5);
        assert_eq!(t.len(), 100);
    }
}
