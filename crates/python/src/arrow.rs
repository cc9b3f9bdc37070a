//! Arrow record batches across the Arrow C data interface (the PyCapsule
//! protocol): exported to pyarrow (and anything else that reads
//! `__arrow_c_array__`), imported from anything that has
//! `__arrow_c_array__` or `__arrow_c_stream__`.

use arrow_array::ffi::FFI_ArrowArray;
use arrow_array::{Array, RecordBatch, StructArray};
use arrow_schema::ffi::FFI_ArrowSchema;
use grist::tensor::{Batch, SpecFile};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

use crate::errors::{Failure, Result};

/// One record batch, ready to be taken by an Arrow consumer through
/// `__arrow_c_array__` (`grist.Loader(output="arrow")` hands it to
/// `pyarrow.record_batch`). The buffers are the batch's vectors: nothing
/// is copied on the way (grist-arrow's mapping says what is).
#[pyclass(module = "grist._grist", name = "ArrowBatch", frozen)]
pub(crate) struct ArrowBatch {
    batch: RecordBatch,
}

/// `batch` as an Arrow record batch (grist-arrow's mapping).
pub(crate) fn export_batch(batch: Batch, spec: &SpecFile) -> Result<ArrowBatch> {
    Ok(ArrowBatch {
        batch: grist::arrow::to_record_batch(batch, spec)?,
    })
}

fn arrow_failure(e: arrow_schema::ArrowError) -> Failure {
    Failure::from(grist::arrow::Error::from(e))
}

#[pymethods]
impl ArrowBatch {
    /// The number of rows.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// The schema as an `arrow_schema` capsule.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema =
            FFI_ArrowSchema::try_from(self.batch.schema().as_ref()).map_err(arrow_failure)?;
        PyCapsule::new_with_value(py, schema, c"arrow_schema")
    }

    /// The schema and the batch (as a struct array) as `arrow_schema` and
    /// `arrow_array` capsules. A requested schema is not honoured: the
    /// consumer casts if it wants another.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let schema = self.__arrow_c_schema__(py)?;
        let data = StructArray::from(self.batch.clone()).into_data();
        let array = PyCapsule::new_with_value(py, FFI_ArrowArray::new(&data), c"arrow_array")?;
        PyTuple::new(py, [schema.into_any(), array.into_any()])
    }

    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }

    fn __repr__(&self) -> String {
        format!(
            "ArrowBatch({} rows, {} columns)",
            self.batch.num_rows(),
            self.batch.num_columns()
        )
    }
}
