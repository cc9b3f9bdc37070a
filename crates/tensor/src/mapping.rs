//! Specs rewritten into the form a format reads (docs/CONVERSION.md has
//! the whole table of what each kind and dtype becomes in each format).
//!
//! A sparse feature has two forms: tf.Example's (`index_key`, `value_key`,
//! `size`: the index and value lists are features of their own) and ATDS's
//! (`shape`: one Avro field, a record of `indices0..` and `values`). A
//! varlen feature has one shape in tf.Example (rank 1), written `[-1]` in
//! ATDS form. Every other kind reads the same in every format.

use crate::{DType, FeatureSpec, OneOrMany, SpecFile, UNKNOWN_DIM};

/// The two ways specs name where a sparse feature's parts are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpecForm {
    /// tf.Example's (also OFRecord's): a sparse feature's index lists and
    /// values are features of their own (`index_key`, `value_key`,
    /// `size`).
    Example,
    /// ATDS's (Avro): a sparse feature is one field, a record of
    /// `indices0..` and `values` (`shape`); a varlen feature has a
    /// `shape` (`[-1]` for a list).
    Atds,
}

/// The index keys a sparse feature named `name` gets in tf.Example form
/// when it has none (it came from ATDS form): `<name>_indices0`, ... .
pub fn sparse_index_key(name: &str, dim: usize) -> String {
    format!("{name}_indices{dim}")
}

/// The value key a sparse feature named `name` gets in tf.Example form
/// when it has none: `<name>_values`.
pub fn sparse_value_key(name: &str) -> String {
    format!("{name}_values")
}

/// `spec` rewritten into `form`: sparse features moved between the
/// tf.Example and ATDS forms (keys made up from the name by
/// [`sparse_index_key`] and [`sparse_value_key`] where there are none),
/// varlen features given the shape `[-1]` in ATDS form when they have no
/// shape or rank. Everything else is kept, dtypes included.
///
/// ```
/// use grist_tensor::{DType, FeatureSpec, SpecFile, SpecForm, spec_in_form};
/// let spec = SpecFile {
///     features: vec![FeatureSpec::sparse("sp", DType::Float32, "idx", "val", 10)],
///     ..SpecFile::default()
/// };
/// let atds = spec_in_form(&spec, SpecForm::Atds);
/// let FeatureSpec::Sparse(s) = &atds.features[0] else { unreachable!() };
/// assert_eq!((s.shape.clone(), s.value_key.clone()), (Some(vec![10]), None));
/// let back = spec_in_form(&atds, SpecForm::Example);
/// let FeatureSpec::Sparse(s) = &back.features[0] else { unreachable!() };
/// assert_eq!(s.index_keys(), ["sp_indices0"]);
/// assert_eq!(s.dense_shape(), [10]);
/// ```
pub fn spec_in_form(spec: &SpecFile, form: SpecForm) -> SpecFile {
    let map = |specs: &[FeatureSpec]| -> Vec<FeatureSpec> {
        specs.iter().map(|s| feature_in_form(s, form)).collect()
    };
    SpecFile {
        features: map(&spec.features),
        context_features: map(&spec.context_features),
        sequence_features: map(&spec.sequence_features),
        ..spec.clone()
    }
}

/// One feature spec rewritten into `form` (see [`spec_in_form`]).
pub fn feature_in_form(spec: &FeatureSpec, form: SpecForm) -> FeatureSpec {
    let mut out = spec.clone();
    match (&mut out, form) {
        (FeatureSpec::Sparse(s), SpecForm::Example) => {
            let dims = s.dense_shape();
            if s.value_key.is_none() {
                s.value_key = Some(sparse_value_key(&s.name));
            }
            if s.index_keys().len() != dims.len() {
                let keys: Vec<String> = (0..dims.len())
                    .map(|k| sparse_index_key(&s.name, k))
                    .collect();
                s.index_key = Some(match <[String; 1]>::try_from(keys) {
                    Ok([one]) => OneOrMany::One(one),
                    Err(keys) => OneOrMany::Many(keys),
                });
            }
            if s.size.is_none() {
                s.size = Some(match dims.as_slice() {
                    [one] => OneOrMany::One(*one),
                    _ => OneOrMany::Many(dims),
                });
            }
            s.shape = None;
        }
        (FeatureSpec::Sparse(s), SpecForm::Atds) => {
            s.shape = Some(s.dense_shape());
            s.size = None;
            s.index_key = None;
            s.value_key = None;
        }
        (FeatureSpec::Varlen(v), SpecForm::Atds) if v.shape.is_none() => {
            v.shape = Some(vec![UNKNOWN_DIM; v.rank.unwrap_or(1)]);
            v.rank = None;
        }
        _ => {}
    }
    out
}

/// `spec` with its element type set to `dtype` (a sparse or ragged
/// feature's values, a dense feature's elements).
pub fn with_dtype(spec: &FeatureSpec, dtype: DType) -> FeatureSpec {
    let mut out = spec.clone();
    match &mut out {
        FeatureSpec::Dense(s) => s.dtype = dtype,
        FeatureSpec::Sparse(s) => s.dtype = dtype,
        FeatureSpec::Varlen(s) => s.dtype = dtype,
        FeatureSpec::Ragged(s) => s.dtype = dtype,
        FeatureSpec::FixedLenSequence(s) => s.dtype = dtype,
    }
    out
}

/// Every feature of `spec` (context, sequence and plain), mutably.
pub fn features_mut(spec: &mut SpecFile) -> impl Iterator<Item = &mut FeatureSpec> {
    spec.features
        .iter_mut()
        .chain(spec.context_features.iter_mut())
        .chain(spec.sequence_features.iter_mut())
}
