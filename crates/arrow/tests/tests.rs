//! grist-arrow's integration tests: one binary, one module per concern.

mod formats;
mod refusals;
mod roundtrip;
mod support;
mod zero_copy;
