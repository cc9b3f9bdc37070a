//! Batches of every kind and dtype, made from a seeded generator.

use grist_tensor::synth::SplitMix64;
use grist_tensor::{
    Batch, Column, DType, DenseTensor, FeatureSpec, RaggedSpec, RaggedTensor, Section, SparseSpec,
    SparseTensor, SpecFile, StringValues, Tensor, Values, VarlenSpec,
};

pub const DTYPES: [DType; 6] = [
    DType::Bool,
    DType::Int32,
    DType::Int64,
    DType::Float32,
    DType::Float64,
    DType::String,
];

/// `n` random values of `dtype`; strings are UTF-8 unless `binary`.
pub fn values(rng: &mut SplitMix64, dtype: DType, n: usize, binary: bool) -> Values {
    match dtype {
        DType::Bool => Values::Bool((0..n).map(|_| rng.below(2) == 1).collect()),
        DType::Int32 => Values::Int32((0..n).map(|_| rng.next_u64() as i32).collect()),
        DType::Int64 => Values::Int64((0..n).map(|_| rng.next_u64() as i64).collect()),
        DType::Float32 => Values::Float32((0..n).map(|_| rng.normal() as f32).collect()),
        DType::Float64 => Values::Float64((0..n).map(|_| rng.normal()).collect()),
        _ => {
            let mut s = StringValues::new();
            for _ in 0..n {
                let len = rng.below(6) as usize;
                let bytes: Vec<u8> = if binary {
                    // 0xff is never UTF-8.
                    (0..=len)
                        .map(|_| 0x80 | rng.below(128) as u8)
                        .chain([0xff])
                        .collect()
                } else {
                    (0..len)
                        .flat_map(|_| {
                            let c = char::from_u32(0x61 + rng.below(26) as u32).unwrap();
                            let c = if rng.below(3) == 0 { 'é' } else { c };
                            c.to_string().into_bytes()
                        })
                        .collect()
                };
                s.push(&bytes);
            }
            Values::String(s)
        }
    }
}

pub fn column(name: &str, tensor: Tensor) -> Column {
    Column {
        name: name.to_string(),
        section: Section::Features,
        tensor,
    }
}

/// A dense column `[rows, dims...]`.
pub fn dense(
    rng: &mut SplitMix64,
    dtype: DType,
    rows: usize,
    dims: &[usize],
    binary: bool,
) -> Tensor {
    let mut shape = vec![rows];
    shape.extend_from_slice(dims);
    let n = shape.iter().product();
    Tensor::Dense(DenseTensor {
        shape,
        values: values(rng, dtype, n, binary),
    })
}

/// A varlen column of `rank` (without the batch): COO sorted by index,
/// some rows empty, inner gaps where `rank > 1`.
pub fn varlen(rng: &mut SplitMix64, dtype: DType, rows: usize, rank: usize) -> Tensor {
    let mut indices = Vec::new();
    let mut maxes = vec![0i64; rank];
    fn fill(
        rng: &mut SplitMix64,
        prefix: &mut Vec<i64>,
        left: usize,
        indices: &mut Vec<i64>,
        maxes: &mut [i64],
    ) {
        let depth = maxes.len() - left;
        let n = rng.below(4) as i64;
        for i in 0..n {
            // Inner levels skip some positions (empty lists).
            if left > 1 && rng.below(3) == 0 {
                continue;
            }
            maxes[depth] = maxes[depth].max(i + 1);
            prefix.push(i);
            if left == 1 {
                indices.extend_from_slice(prefix);
            } else {
                fill(rng, prefix, left - 1, indices, maxes);
            }
            prefix.pop();
        }
    }
    for row in 0..rows {
        let mut prefix = vec![row as i64];
        fill(rng, &mut prefix, rank, &mut indices, &mut maxes);
    }
    // A list position is only known from its entries: a skipped last
    // position or an empty last inner list is not in the COO.
    let nnz = indices.len() / (rank + 1);
    let mut maxes = vec![0i64; rank];
    for t in indices.chunks(rank + 1) {
        for (m, &x) in maxes.iter_mut().zip(&t[1..]) {
            *m = (*m).max(x + 1);
        }
    }
    let mut dense_shape = vec![rows as i64];
    dense_shape.extend(maxes);
    Tensor::Sparse(SparseTensor {
        indices,
        values: values(rng, dtype, nnz, false),
        dense_shape,
    })
}

/// A sparse column: per row, a few sorted positions in `[0, size)^rank`.
pub fn sparse(rng: &mut SplitMix64, dtype: DType, rows: usize, size: &[i64]) -> Tensor {
    let mut indices = Vec::new();
    for row in 0..rows {
        let mut tuples: Vec<Vec<i64>> = (0..rng.below(4))
            .map(|_| size.iter().map(|&s| rng.below(s as u64) as i64).collect())
            .collect();
        tuples.sort();
        tuples.dedup();
        for t in tuples {
            indices.push(row as i64);
            indices.extend(t);
        }
    }
    let nnz = indices.len() / (size.len() + 1);
    let mut dense_shape = vec![rows as i64];
    dense_shape.extend_from_slice(size);
    Tensor::Sparse(SparseTensor {
        indices,
        values: values(rng, dtype, nnz, false),
        dense_shape,
    })
}

/// A ragged column with `levels` levels of splits over flat values of
/// inner shape `inner`.
pub fn ragged(
    rng: &mut SplitMix64,
    dtype: DType,
    rows: usize,
    levels: usize,
    inner: &[usize],
) -> Tensor {
    let mut nested = Vec::new();
    let mut n = rows;
    for _ in 0..levels {
        let mut splits = vec![0i64];
        for _ in 0..n {
            let last = *splits.last().unwrap();
            splits.push(last + rng.below(4) as i64);
        }
        n = *splits.last().unwrap() as usize;
        nested.push(splits);
    }
    let mut shape = vec![n];
    shape.extend_from_slice(inner);
    let count = shape.iter().product();
    Tensor::Ragged(RaggedTensor {
        nested_row_splits: nested,
        row_splits_dtype: DType::Int64,
        flat_values: DenseTensor {
            shape,
            values: values(rng, dtype, count, false),
        },
    })
}

pub fn varlen_spec(name: &str, dtype: DType, rank: usize) -> FeatureSpec {
    if rank == 1 {
        return FeatureSpec::varlen(name, dtype);
    }
    FeatureSpec::Varlen(VarlenSpec {
        name: name.to_string(),
        dtype,
        shape: None,
        rank: Some(rank),
        tf_class: None,
        atds_class: None,
    })
}

pub fn sparse_spec(name: &str, dtype: DType, size: &[i64]) -> FeatureSpec {
    FeatureSpec::Sparse(SparseSpec {
        name: name.to_string(),
        dtype,
        shape: Some(size.to_vec()),
        index_key: None,
        value_key: None,
        size: None,
        already_sorted: true,
        tf_class: None,
        atds_class: None,
    })
}

pub fn ragged_spec(name: &str, dtype: DType) -> FeatureSpec {
    FeatureSpec::Ragged(RaggedSpec {
        name: name.to_string(),
        dtype,
        value_key: None,
        partitions: Vec::new(),
        row_splits_dtype: DType::Int64,
        validate: false,
        tf_class: None,
    })
}

/// A batch holding every kind in every dtype, and its spec.
pub fn every_kind(rows: usize, seed: u64) -> (Batch, SpecFile) {
    let mut rng = SplitMix64::new(seed);
    let mut columns = Vec::new();
    let mut specs = Vec::new();
    for dtype in DTYPES {
        let d = dtype.name();
        for dims in [&[][..], &[3][..], &[2, 3][..], &[2, 0][..]] {
            let name = format!("dense_{d}_{}", dims.len() + 1);
            let name = if dims.contains(&0) {
                format!("{name}_empty")
            } else {
                name
            };
            columns.push(column(&name, dense(&mut rng, dtype, rows, dims, false)));
            let shape: Vec<i64> = dims.iter().map(|&x| x as i64).collect();
            specs.push(FeatureSpec::dense(name, dtype, shape));
        }
        // A dimension padded to the batch.
        let name = format!("padded_{d}");
        // An empty batch pads to 0, as a decoder does.
        let pad = if rows == 0 { 0 } else { 4 };
        columns.push(column(&name, dense(&mut rng, dtype, rows, &[pad], false)));
        specs.push(FeatureSpec::dense(name, dtype, [-1]));
        for rank in 1..=3 {
            let name = format!("varlen_{d}_{rank}");
            columns.push(column(&name, varlen(&mut rng, dtype, rows, rank)));
            specs.push(varlen_spec(&name, dtype, rank));
        }
        for size in [&[7][..], &[3, 5][..]] {
            let name = format!("sparse_{d}_{}", size.len());
            columns.push(column(&name, sparse(&mut rng, dtype, rows, size)));
            specs.push(sparse_spec(&name, dtype, size));
        }
        for (levels, inner) in [(1, &[][..]), (2, &[][..]), (1, &[2][..])] {
            let name = format!("ragged_{d}_{levels}_{}", inner.len());
            columns.push(column(&name, ragged(&mut rng, dtype, rows, levels, inner)));
            specs.push(ragged_spec(&name, dtype));
        }
    }
    let name = "binary";
    columns.push(column(
        name,
        dense(&mut rng, DType::String, rows, &[2], true),
    ));
    specs.push(FeatureSpec::dense(name, DType::String, [2]));
    let spec = SpecFile {
        features: specs,
        ..SpecFile::default()
    };
    (Batch::new(rows, columns), spec)
}
