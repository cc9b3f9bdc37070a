//! grist-tensor's integration tests: one binary, one module per subject.

mod feature_map;
mod spec_json;
