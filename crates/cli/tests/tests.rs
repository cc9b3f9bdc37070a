//! Integration tests of the `grist` binary: the golden corpus
//! (`../shared/corpus`) through `grist cat` and the other commands, for
//! TFRecord, Avro, FFRecord and OFRecord, and smoke tests of the other
//! commands.

mod avro;
mod commands;
mod corpus;
mod detection;
mod ffrecord;
mod ofrecord;
mod remote;
mod spec;
mod support;
