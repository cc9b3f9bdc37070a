//! grist-tensor's integration tests: one binary, one module per subject.

mod spec_json;
