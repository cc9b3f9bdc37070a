//! The integration tests of grist-avro-tensor (one binary, one module per
//! area).

mod conformance;
mod container;
mod decode;
mod differential;
mod errors;
mod evolution;
mod evolution_keyexpr;
mod generic;
mod generic_differential;
mod hostile;
mod infer;
mod keyexpr;
mod pairs;
mod pool;
mod regressions;
mod truncation;
mod writer;
