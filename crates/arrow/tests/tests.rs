//! grist-arrow's integration tests.
