//! Typed access to a batch's columns: a column's values as a slice of
//! their Rust type in one call, without matching on [`Values`].
//!
//! ```
//! use grist_tensor::{Batch, Column, DenseTensor, Section, Tensor, Values};
//!
//! let x = DenseTensor { shape: vec![2, 3], values: Values::Float32(vec![0.5; 6]) };
//! let column = Column { name: "x".into(), section: Section::Features, tensor: Tensor::Dense(x) };
//! let batch = Batch::new(2, vec![column]);
//!
//! let x = batch.dense::<f32>("x")?;
//! assert_eq!((x.shape, x.row(1)), (&[2, 3][..], &[0.5f32; 3][..]));
//! assert!(batch.dense::<i64>("x").is_err()); // float32, not int64
//! # Ok::<(), grist_tensor::TensorError>(())
//! ```

use crate::{Batch, DType, DenseTensor, StringValues, Tensor, TensorError, Values};

/// The Rust types of a column's values (`bool`, `i32`, `i64`, `f32`,
/// `f64`): what a [`Values`] holds a slice of.
pub trait Element: Copy + 'static {
    /// The dtype of values of this type.
    const DTYPE: DType;
    /// The values, if `values` holds this type.
    fn slice(values: &Values) -> Option<&[Self]>;
}

macro_rules! element {
    ($t:ty, $variant:ident, $as:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn slice(values: &Values) -> Option<&[Self]> {
                match values {
                    Values::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }

        impl<'a> TryFrom<&'a Values> for &'a [$t] {
            type Error = TensorError;
            fn try_from(values: &'a Values) -> Result<Self, TensorError> {
                values.as_slice::<$t>().ok_or(TensorError::ColumnType {
                    name: String::new(),
                    want: concat!(stringify!($t), " values").into(),
                    found: values.dtype().to_string(),
                })
            }
        }

        impl Values {
            #[doc = concat!("The values as `&[", stringify!($t), "]`, if they are ", stringify!($variant), ".")]
            pub fn $as(&self) -> Option<&[$t]> {
                self.as_slice::<$t>()
            }
        }
    };
}
element!(bool, Bool, as_bool);
element!(i32, Int32, as_i32);
element!(i64, Int64, as_i64);
element!(f32, Float32, as_f32);
element!(f64, Float64, as_f64);

impl Values {
    /// The values as a slice of `T`, if they are of `T`'s dtype.
    ///
    /// ```
    /// use grist_tensor::Values;
    /// let v = Values::Int64(vec![1, 2]);
    /// assert_eq!(v.as_slice::<i64>(), Some(&[1, 2][..]));
    /// assert_eq!(v.as_slice::<f32>(), None);
    /// let s: &[i64] = (&v).try_into()?;
    /// # Ok::<(), grist_tensor::TensorError>(())
    /// ```
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        T::slice(self)
    }

    /// The strings, if these are string values.
    pub fn as_strings(&self) -> Option<&StringValues> {
        match self {
            Values::String(s) => Some(s),
            _ => None,
        }
    }
}

/// A dense column: its shape (the batch first) and its values, row-major.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DenseView<'a, T> {
    /// The dimensions, the batch first.
    pub shape: &'a [usize],
    /// The values, row-major.
    pub values: &'a [T],
}

impl<'a, T> DenseView<'a, T> {
    /// The values of batch row `i` (empty past the last row).
    pub fn row(&self, i: usize) -> &'a [T] {
        let n: usize = self.shape.iter().skip(1).product();
        self.values.get(i * n..(i + 1) * n).unwrap_or_default()
    }
}

/// A sparse column in TensorFlow's COO layout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SparseView<'a, T> {
    /// `nnz × rank` indices, row-major; each tuple starts with the batch
    /// row.
    pub indices: &'a [i64],
    /// The `nnz` values.
    pub values: &'a [T],
    /// The dense shape, the batch first.
    pub dense_shape: &'a [i64],
}

/// A ragged column: flat values partitioned by levels of row splits, the
/// outermost (over the batch) first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RaggedView<'a, T> {
    /// The row splits, outermost first.
    pub nested_row_splits: &'a [Vec<i64>],
    /// The shape of the flat values.
    pub flat_shape: &'a [usize],
    /// The flat values, row-major.
    pub flat_values: &'a [T],
}

impl<'a, T> RaggedView<'a, T> {
    /// The flat values of batch row `i` (empty past the last row).
    pub fn row(&self, i: usize) -> &'a [T] {
        let Some(mut range) = self
            .nested_row_splits
            .first()
            .and_then(|s| Some(*s.get(i)?..*s.get(i + 1)?))
        else {
            return &[];
        };
        for level in self.nested_row_splits.iter().skip(1) {
            let at = |k: i64| usize::try_from(k).ok().and_then(|k| level.get(k).copied());
            match (at(range.start), at(range.end)) {
                (Some(a), Some(b)) => range = a..b,
                _ => return &[],
            }
        }
        let inner: usize = self.flat_shape.iter().skip(1).product();
        let (a, b) = (range.start.max(0) as usize, range.end.max(0) as usize);
        self.flat_values
            .get(a * inner..b * inner)
            .unwrap_or_default()
    }
}

fn kind(t: &Tensor) -> &'static str {
    match t {
        Tensor::Dense(_) => "a dense column",
        Tensor::Sparse(_) => "a sparse column",
        Tensor::Ragged(_) => "a ragged column",
    }
}

fn wrong(name: &str, want: String, found: impl ToString) -> TensorError {
    TensorError::ColumnType {
        name: name.to_string(),
        want,
        found: found.to_string(),
    }
}

impl Batch {
    fn column(&self, name: &str) -> Result<&Tensor, TensorError> {
        self.get(name).ok_or_else(|| TensorError::NoColumn {
            name: name.to_string(),
        })
    }

    /// Dense column `name` as `T` values; an error names the column and
    /// what it holds instead when it is missing, not dense or not of
    /// `T`'s dtype.
    pub fn dense<T: Element>(&self, name: &str) -> Result<DenseView<'_, T>, TensorError> {
        let t = self.column(name)?;
        let d = t
            .as_dense()
            .ok_or_else(|| wrong(name, format!("a dense {} column", T::DTYPE), kind(t)))?;
        let values = d
            .values
            .as_slice::<T>()
            .ok_or_else(|| wrong(name, format!("{} values", T::DTYPE), d.dtype()))?;
        Ok(DenseView {
            shape: &d.shape,
            values,
        })
    }

    /// Dense string column `name`: its shape and its strings.
    pub fn dense_strings(&self, name: &str) -> Result<(&[usize], &StringValues), TensorError> {
        let t = self.column(name)?;
        let d: &DenseTensor = t
            .as_dense()
            .ok_or_else(|| wrong(name, "a dense string column".into(), kind(t)))?;
        let s = d
            .values
            .as_strings()
            .ok_or_else(|| wrong(name, "string values".into(), d.dtype()))?;
        Ok((&d.shape, s))
    }

    /// Sparse column `name` (a varlen or sparse feature) as `T` values.
    pub fn sparse<T: Element>(&self, name: &str) -> Result<SparseView<'_, T>, TensorError> {
        let t = self.column(name)?;
        let s = t
            .as_sparse()
            .ok_or_else(|| wrong(name, format!("a sparse {} column", T::DTYPE), kind(t)))?;
        let values = s
            .values
            .as_slice::<T>()
            .ok_or_else(|| wrong(name, format!("{} values", T::DTYPE), s.dtype()))?;
        Ok(SparseView {
            indices: &s.indices,
            values,
            dense_shape: &s.dense_shape,
        })
    }

    /// Ragged column `name` as `T` values.
    pub fn ragged<T: Element>(&self, name: &str) -> Result<RaggedView<'_, T>, TensorError> {
        let t = self.column(name)?;
        let r = t
            .as_ragged()
            .ok_or_else(|| wrong(name, format!("a ragged {} column", T::DTYPE), kind(t)))?;
        let flat_values = r
            .flat_values
            .values
            .as_slice::<T>()
            .ok_or_else(|| wrong(name, format!("{} values", T::DTYPE), r.dtype()))?;
        Ok(RaggedView {
            nested_row_splits: &r.nested_row_splits,
            flat_shape: &r.flat_values.shape,
            flat_values,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Column, RaggedTensor, Section, SparseTensor};

    fn batch() -> Batch {
        let col = |name: &str, tensor| Column {
            name: name.into(),
            section: Section::Features,
            tensor,
        };
        Batch::new(
            2,
            vec![
                col(
                    "d",
                    Tensor::Dense(DenseTensor {
                        shape: vec![2, 2],
                        values: Values::Int64(vec![1, 2, 3, 4]),
                    }),
                ),
                col(
                    "s",
                    Tensor::Sparse(SparseTensor {
                        indices: vec![0, 0, 1, 3],
                        values: Values::Float32(vec![0.5, 1.5]),
                        dense_shape: vec![2, 4],
                    }),
                ),
                col(
                    "r",
                    Tensor::Ragged(RaggedTensor {
                        nested_row_splits: vec![vec![0, 1, 3], vec![0, 2, 2, 5]],
                        row_splits_dtype: DType::Int64,
                        flat_values: DenseTensor {
                            shape: vec![5],
                            values: Values::Int32(vec![1, 2, 3, 4, 5]),
                        },
                    }),
                ),
            ],
        )
    }

    #[test]
    fn each_layout_reads_as_its_type() {
        let b = batch();
        let d = b.dense::<i64>("d").unwrap();
        assert_eq!(
            (d.row(0), d.row(1), d.row(2)),
            (&[1, 2][..], &[3, 4][..], &[][..])
        );
        let s = b.sparse::<f32>("s").unwrap();
        assert_eq!((s.indices, s.values), (&[0, 0, 1, 3][..], &[0.5, 1.5][..]));
        let r = b.ragged::<i32>("r").unwrap();
        assert_eq!(
            (r.row(0), r.row(1), r.row(2)),
            (&[1, 2][..], &[3, 4, 5][..], &[][..])
        );
        assert_eq!(
            b.get("d").unwrap().as_dense().unwrap().values.as_i64(),
            Some(&[1, 2, 3, 4][..])
        );
    }

    #[test]
    fn mismatches_name_the_column_and_what_it_holds() {
        let b = batch();
        let e = b.dense::<f32>("d").unwrap_err().to_string();
        assert!(e.contains("\"d\"") && e.contains("int64"), "{e}");
        let e = b.dense::<f32>("s").unwrap_err().to_string();
        assert!(e.contains("sparse"), "{e}");
        let e = b.sparse::<f32>("nope").unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
        let v = Values::Int32(vec![1]);
        assert!(<&[i64]>::try_from(&v).is_err());
        assert_eq!(<&[i32]>::try_from(&v).unwrap(), &[1]);
    }
}
