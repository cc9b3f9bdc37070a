//! Integration tests of grist-io: local files, and object stores through
//! the in-process S3 server of grist-testkit (with faults injected).

mod support;

mod corpus;
mod errors;
mod faults;
mod local;
mod remote;
mod speed;
