//! Deterministic synthetic datasets for demos and benchmarks.
//!
//! [`prod19`] mirrors the production schema of the AvroTensorDataset blog
//! post (see `shared/bench/prod19.md`): 6 scalar features, 8 dense rank-1
//! features and 5 sparse rank-1 features with 10–50 sorted unique indices
//! in `[0, 50001)`. The values come from a seeded SplitMix64 generator, so
//! the same seed always gives the same batch.

use crate::{
    Batch, Column, DType, DenseTensor, FeatureSpec, OneOrMany, Section, SparseSpec, SparseTensor,
    Tensor, Values,
};

/// A small, fast, seeded pseudo-random generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `[0, n)` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// A uniform float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal float (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(f64::MIN_POSITIVE);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// The dense size of each prod19 sparse feature.
pub const PROD19_SPARSE_SIZE: i64 = 50_001;

/// The prod19 dense rank-1 features: name, tf.Example dtype, length.
const PROD19_DENSE: [(&str, DType, usize); 8] = [
    ("d_f32_0", DType::Float32, 32),
    ("d_f32_1", DType::Float32, 32),
    ("d_f32_2", DType::Float32, 32),
    ("d_f32_3", DType::Float32, 32),
    ("d_i64_0", DType::Int64, 8),
    ("d_i64_1", DType::Int64, 8),
    ("d_f64_0", DType::Float32, 16),
    ("d_i32_0", DType::Int64, 4),
];

/// The prod19 scalar features: name and tf.Example dtype.
const PROD19_SCALARS: [(&str, DType); 6] = [
    ("s_int", DType::Int64),
    ("s_long0", DType::Int64),
    ("s_long1", DType::Int64),
    ("s_float", DType::Float32),
    ("s_double", DType::Float32),
    ("s_bool", DType::Int64),
];

/// The feature specs of prod19 as tf.Example features: scalars and dense
/// arrays as `FixedLenFeature`s (int/long/bool → int64, float/double →
/// float32), each sparse feature `sp_k` as a `SparseFeature` over the keys
/// `sp_k_indices` and `sp_k_values`.
pub fn prod19_example_specs() -> Vec<FeatureSpec> {
    let mut specs: Vec<FeatureSpec> = PROD19_SCALARS
        .iter()
        .map(|&(name, dtype)| FeatureSpec::dense(name, dtype, []))
        .collect();
    specs.extend(
        PROD19_DENSE
            .iter()
            .map(|&(name, dtype, len)| FeatureSpec::dense(name, dtype, [len as i64])),
    );
    for k in 0..5 {
        specs.push(FeatureSpec::Sparse(SparseSpec {
            name: format!("sp_{k}"),
            dtype: DType::Float32,
            shape: None,
            index_key: Some(OneOrMany::One(format!("sp_{k}_indices"))),
            value_key: Some(format!("sp_{k}_values")),
            size: Some(OneOrMany::One(PROD19_SPARSE_SIZE)),
            already_sorted: true,
            tf_class: None,
            atds_class: None,
        }));
    }
    specs
}

/// `rows` records of prod19 as one batch whose columns follow
/// [`prod19_example_specs`].
pub fn prod19(rows: usize, seed: u64) -> Batch {
    let mut rng = SplitMix64::new(seed);
    let mut columns = Vec::new();
    for &(name, dtype) in &PROD19_SCALARS {
        let values = match (name, dtype) {
            ("s_bool", _) => Values::Int64((0..rows).map(|_| rng.below(2) as i64).collect()),
            ("s_int", _) => Values::Int64((0..rows).map(|_| rng.below(1_000_000) as i64).collect()),
            (_, DType::Int64) => Values::Int64(
                (0..rows)
                    .map(|_| rng.below(1_000_000_000_000) as i64)
                    .collect(),
            ),
            _ => Values::Float32((0..rows).map(|_| rng.normal() as f32).collect()),
        };
        columns.push(dense_column(name, vec![rows], values));
    }
    for &(name, dtype, len) in &PROD19_DENSE {
        let n = rows * len;
        let values = match dtype {
            DType::Int64 if name == "d_i32_0" => {
                Values::Int64((0..n).map(|_| rng.below(1_000_000) as i64).collect())
            }
            DType::Int64 => Values::Int64(
                (0..n)
                    .map(|_| rng.below(1_000_000_000_000) as i64)
                    .collect(),
            ),
            _ => Values::Float32((0..n).map(|_| rng.normal() as f32).collect()),
        };
        columns.push(dense_column(name, vec![rows, len], values));
    }
    for k in 0..5 {
        let mut indices = Vec::new();
        let mut values = Vec::new();
        let mut picked: Vec<i64> = Vec::with_capacity(50);
        for r in 0..rows {
            let nnz = 10 + rng.below(41) as usize;
            picked.clear();
            while picked.len() < nnz {
                let i = rng.below(PROD19_SPARSE_SIZE as u64) as i64;
                if !picked.contains(&i) {
                    picked.push(i);
                }
            }
            picked.sort_unstable();
            for &i in &picked {
                indices.extend([r as i64, i]);
                values.push(rng.normal() as f32);
            }
        }
        columns.push(Column {
            name: format!("sp_{k}"),
            section: Section::Features,
            tensor: Tensor::Sparse(SparseTensor {
                indices,
                values: Values::Float32(values),
                dense_shape: vec![rows as i64, PROD19_SPARSE_SIZE],
            }),
        });
    }
    Batch::new(rows, columns)
}

/// The Avro-native dtype of each prod19 feature that tf.Example widens.
const PROD19_NATIVE: [(&str, DType); 5] = [
    ("s_int", DType::Int32),
    ("s_double", DType::Float64),
    ("s_bool", DType::Bool),
    ("d_f64_0", DType::Float64),
    ("d_i32_0", DType::Int32),
];

fn native(name: &str) -> Option<DType> {
    PROD19_NATIVE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, d)| d)
}

/// The feature specs of prod19 with the Avro record's own types (int,
/// long, float, double, boolean; `prod19.md`), in the ATDS form: dense
/// features, and sparse features `sp_k` of shape `[50001]` read from
/// records of `indices0` and `values`.
pub fn prod19_native_specs() -> Vec<FeatureSpec> {
    prod19_example_specs()
        .into_iter()
        .map(|s| match s {
            FeatureSpec::Dense(mut d) => {
                if let Some(t) = native(&d.name) {
                    d.dtype = t;
                }
                FeatureSpec::Dense(d)
            }
            FeatureSpec::Sparse(sp) => FeatureSpec::Sparse(SparseSpec {
                shape: Some(vec![PROD19_SPARSE_SIZE]),
                index_key: None,
                value_key: None,
                size: None,
                ..sp
            }),
            other => other,
        })
        .collect()
}

/// [`prod19`] with the Avro record's own types (see
/// [`prod19_native_specs`]): the same values, narrowed or widened.
pub fn prod19_native(rows: usize, seed: u64) -> Batch {
    let columns = prod19(rows, seed)
        .into_columns()
        .into_iter()
        .map(|mut c| {
            if let (Some(t), Tensor::Dense(d)) = (native(&c.name), &mut c.tensor) {
                d.values = match (t, &d.values) {
                    (DType::Int32, Values::Int64(v)) => {
                        Values::Int32(v.iter().map(|&x| x as i32).collect())
                    }
                    (DType::Bool, Values::Int64(v)) => {
                        Values::Bool(v.iter().map(|&x| x != 0).collect())
                    }
                    (DType::Float64, Values::Float32(v)) => {
                        Values::Float64(v.iter().map(|&x| x as f64).collect())
                    }
                    (_, v) => v.clone(),
                };
            }
            c
        })
        .collect();
    Batch::new(rows, columns)
}

fn dense_column(name: &str, shape: Vec<usize>, values: Values) -> Column {
    Column {
        name: name.to_string(),
        section: Section::Features,
        tensor: Tensor::Dense(DenseTensor { shape, values }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prod19_is_deterministic_and_shaped() {
        let a = prod19(50, 42);
        assert_eq!(a, prod19(50, 42));
        assert_ne!(a, prod19(50, 43));
        assert_eq!(a.columns().len(), 19);
        assert_eq!(prod19_example_specs().len(), 19);
        let n = prod19_native(50, 42);
        let specs = prod19_native_specs();
        for (spec, col) in specs.iter().zip(n.columns()) {
            assert_eq!(spec.name(), col.name);
            assert_eq!(spec.dtype(), col.tensor.dtype(), "{}", col.name);
        }
        let sp = a.get("sp_3").unwrap().as_sparse().unwrap();
        let nnz = sp.nnz();
        assert!((500..=2500).contains(&nnz), "{nnz}");
        for t in sp.index_tuples() {
            assert!((0..PROD19_SPARSE_SIZE).contains(&t[1]));
        }
    }
}
