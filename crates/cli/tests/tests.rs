//! Integration tests of the `grist` binary: the golden corpus
//! (`../shared/corpus`) through `grist cat` and the other commands, for
//! TFRecord, Avro, FFRecord and OFRecord, and smoke tests of the other
//! commands, and the command line's conventions (standard input, --limit,
//! stdout for data and stderr for status, gen --force, completions).

mod avro;
mod commands;
mod convert;
mod corpus;
mod detection;
mod evolution;
mod ffrecord;
mod ofrecord;
mod polish;
mod remote;
mod spec;
mod support;
