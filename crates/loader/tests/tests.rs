//! Integration tests of grist-loader: every format through the same tests
//! (data written with the format crates' writers into temporary folders).

mod support;

mod autotune;
mod determinism;
mod epochs;
mod errors;
mod mmap;
mod prefetch;
mod resume;
mod shuffle;
