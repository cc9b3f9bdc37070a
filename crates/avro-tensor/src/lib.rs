//! Avro object container files decoded straight into grist tensor batches.
#![deny(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod error;

// -- container: header, blocks, codecs, chunk source, writer --
// (module lines for container.rs, codec.rs, source.rs, writer.rs go here)

// -- decoding: schema → plan, datums → columns --
mod datum;
mod decoder;
mod encode;
mod plan;
mod schema;

pub use decoder::AvroDecoder;
pub use encode::{encode_batch, schema_for_specs};
pub use error::{Error, FeatureProblem, Location, Result};
