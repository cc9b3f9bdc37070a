//! The integration tests of grist-ffrecord (one binary, one module per
//! area).

mod corpus;
mod decode;
mod errors;
mod infer;
mod read;
mod support;
mod truncation;
mod writer;
