//! The integration tests of grist-tfrecord (one binary, one module per
//! area).

mod conformance;
mod differential;
mod errors;
mod framing;
mod infer;
mod parse;
mod regressions;
mod support;
mod truncation;
