//! TFRecord files and tf.Example / tf.SequenceExample records into grist
//! tensor batches.
#![deny(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod error;
/// The prost-generated TensorFlow protobuf types (`tf.train.Example`, ...),
/// used for writing and as a reference; the read path does not use them.
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/tensorflow.rs"));
}

// -- framing, compression, index files, record writer, chunk source --
// (module lines for framing.rs, compression.rs, index.rs, writer.rs, source.rs go here)

// -- tf.Example / tf.SequenceExample parsing and building --
// (module lines for plan.rs, decoder.rs, wire.rs, build.rs, records.rs go here)

pub use error::{Error, FeatureProblem, Location, Result};
