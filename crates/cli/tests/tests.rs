//! Integration tests of the `grist` binary: the golden corpus
//! (`../shared/corpus`) through `grist cat`, and smoke tests of the other
//! commands.

mod commands;
mod corpus;
mod support;
