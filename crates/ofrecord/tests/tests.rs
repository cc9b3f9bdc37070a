//! The integration tests of grist-ofrecord (one binary, one module per
//! area).

mod corpus;
mod decoders;
mod specs;
mod support;
mod writer;
