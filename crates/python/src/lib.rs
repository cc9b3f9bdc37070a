//! grist's Python package, module `grist._grist`: the loader, records by
//! number, writers and conversion, over numpy arrays and Arrow record
//! batches. The pure-Python package `grist` (python/grist) wraps it:
//! argument normalisation, iteration, docstrings and type stubs live
//! there, the work here, with the GIL released while grist reads,
//! decodes and writes.
//!
//! ```python
//! import grist
//!
//! loader = grist.Loader("data/", "data/spec.json", batch_size=1024, shuffle=True, seed=7)
//! for batch in loader:
//!     x = batch["x"]                   # np.ndarray [1024, ...], the Rust buffer itself
//!     state = loader.state_dict()      # exact resume with load_state_dict(state)
//! ```
//!
//! Built and tested by maturin and pytest (`tests/pytest.rs`); see
//! `docs/PYTHON.md`.

use pyo3::prelude::*;

mod arrow;
mod batch;
mod common;
mod errors;
mod functions;
mod loader;
mod reader;
mod writer;

/// The module `grist._grist`.
#[pymodule]
fn _grist(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let exceptions = PyModule::from_code(
        py,
        errors::EXCEPTIONS,
        c"grist/_exceptions.py",
        c"grist._exceptions",
    )?;
    for name in ["GristError", "SpecError", "DataError", "StorageError"] {
        m.add(name, exceptions.getattr(name)?)?;
    }
    m.add_class::<loader::PyLoader>()?;
    m.add_class::<arrow::ArrowBatch>()?;
    m.add_class::<reader::PyRecordReader>()?;
    m.add_class::<writer::PyWriter>()?;
    m.add_function(wrap_pyfunction!(functions::infer_spec_json, m)?)?;
    m.add_function(wrap_pyfunction!(functions::count, m)?)?;
    m.add_function(wrap_pyfunction!(functions::release_maps, m)?)?;
    m.add_function(wrap_pyfunction!(functions::convert, m)?)?;
    m.add_function(wrap_pyfunction!(functions::list_files, m)?)?;
    m.add_function(wrap_pyfunction!(functions::part_name, m)?)?;
    m.add_function(wrap_pyfunction!(functions::write_spec, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

/// The extension's Rust allocations (every batch) come from mimalloc,
/// which keeps freed pages for the next batch: numpy frees each batch's
/// vectors in turn, and the system allocator unmapped and faulted them in
/// again (see ARCHITECTURE.md, "grist-python").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
