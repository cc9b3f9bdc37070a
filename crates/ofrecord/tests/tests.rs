//! The integration tests of grist-ofrecord (one binary, one module per
//! area).

mod corpus;
mod decoders;
mod differential;
mod errors;
mod infer;
mod specs;
mod support;
mod truncation;
mod writer;
