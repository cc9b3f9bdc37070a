//! Avro object container files decoded straight into grist tensor batches.
#![deny(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod error;

// -- container: header, blocks, codecs, chunk source, writer --
mod codec;
mod container;
mod source;
mod writer;

// -- decoding: schema → plan, datums → columns --
mod datum;
mod decoder;
mod encode;
mod plan;
mod schema;

pub use codec::Codec;
pub use container::{
    Block, BlockDecoder, BlockReader, Blocks, Decoded, Header, MAGIC, RawBlock, ReaderOptions,
    SYNC_LEN,
};
pub use decoder::AvroDecoder;
pub use encode::{encode_batch, schema_for_specs};
pub use error::{Error, FeatureProblem, Location, Result};
pub use source::AvroSource;
pub use writer::{ContainerWriter, WriteSummary, WriterOptions};
