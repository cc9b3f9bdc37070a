//! Batches as Python values: numpy arrays that take the batch's vectors
//! over (no copy), in the layout TensorFlow's tensors have.

use grist::tensor::{Batch, DenseTensor, Tensor, Values};
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{Element, PyArray};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::errors::{Failure, Result};

/// `batch` as a dict of its columns (named as grist-arrow names fields:
/// plain names, sequence-example columns prefixed with their section), in
/// spec order.
pub(crate) fn to_dict<'py>(py: Python<'py>, batch: Batch) -> Result<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for column in batch.into_columns() {
        let key = grist::arrow::field_name(column.section, &column.name);
        let value = tensor(py, column.tensor, &key)?;
        out.set_item(key, value)?;
    }
    Ok(out)
}

/// A tensor: dense as an array, sparse as `(indices, values,
/// dense_shape)`, ragged as `(values, row_splits)`.
fn tensor<'py>(py: Python<'py>, tensor: Tensor, name: &str) -> Result<Bound<'py, PyAny>> {
    match tensor {
        Tensor::Dense(t) => dense(py, t, name),
        Tensor::Sparse(t) => {
            let rank = t.dense_shape.len();
            let nnz = t.values.len();
            let indices = array(py, t.indices, &[nnz, rank], name)?;
            let values = values(py, t.values, &[nnz], name)?;
            let shape = array(py, t.dense_shape, &[rank], name)?;
            Ok(PyTuple::new(py, [indices, values, shape])?.into_any())
        }
        Tensor::Ragged(t) => {
            let flat = dense(py, t.flat_values, name)?;
            let mut splits = t
                .nested_row_splits
                .into_iter()
                .map(|s| {
                    let n = s.len();
                    array(py, s, &[n], name)
                })
                .collect::<Result<Vec<_>>>()?;
            let splits = if splits.len() == 1 {
                splits.pop().expect("one level")
            } else {
                PyList::new(py, splits)?.into_any()
            };
            Ok(PyTuple::new(py, [flat, splits])?.into_any())
        }
        _ => Err(Failure::new(
            grist::tensor::ErrorKind::Unsupported,
            format!("column {name:?}: a tensor layout this package does not know"),
        )),
    }
}

fn dense<'py>(py: Python<'py>, t: DenseTensor, name: &str) -> Result<Bound<'py, PyAny>> {
    values(py, t.values, &t.shape, name)
}

/// `v` as an array of `shape`: numeric and bool values moved into it,
/// strings copied into `bytes` objects (numpy has no array of variable
/// length byte strings).
pub(crate) fn values<'py>(
    py: Python<'py>,
    v: Values,
    shape: &[usize],
    name: &str,
) -> Result<Bound<'py, PyAny>> {
    match v {
        Values::Bool(v) => array(py, v, shape, name),
        Values::Int32(v) => array(py, v, shape, name),
        Values::Int64(v) => array(py, v, shape, name),
        Values::Float32(v) => array(py, v, shape, name),
        Values::Float64(v) => array(py, v, shape, name),
        Values::String(s) => {
            let objects: Vec<Py<PyAny>> = s
                .iter()
                .map(|b| PyBytes::new(py, b).into_any().unbind())
                .collect();
            array(py, objects, shape, name)
        }
        _ => Err(Failure::new(
            grist::tensor::ErrorKind::Unsupported,
            format!("column {name:?}: a dtype this package does not know"),
        )),
    }
}

/// `v` as an array of `shape` owning it (numpy frees it through its base
/// object when the last reference goes).
fn array<'py, T: Element>(
    py: Python<'py>,
    v: Vec<T>,
    shape: &[usize],
    name: &str,
) -> Result<Bound<'py, PyAny>> {
    let a = ArrayD::from_shape_vec(IxDyn(shape), v).map_err(|e| {
        Failure::new(
            grist::tensor::ErrorKind::Unsupported,
            format!("column {name:?}: shape {shape:?} does not fit the values: {e}"),
        )
    })?;
    Ok(PyArray::from_owned_array(py, a).into_any())
}
