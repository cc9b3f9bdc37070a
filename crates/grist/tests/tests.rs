//! The grist crate's tests: every format through the one registry and the
//! one contract, from local files and from an S3-compatible server on the
//! loopback interface (with faults); the format crates' writers to it.

// The loader's test data: the same records in every format.
#[path = "../../loader/tests/support.rs"]
#[allow(dead_code)]
mod fixture;
#[allow(dead_code)]
mod support;

mod convert;
mod corpus;
mod detection;
mod faults;
mod remote;
mod resume;
mod writers;
