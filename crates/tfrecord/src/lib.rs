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
mod compression;
mod framing;
mod index;
mod source;
mod writer;

// -- tf.Example / tf.SequenceExample parsing and building --
mod decoder;
mod encode;
mod plan;
mod records;
mod wire;

pub use compression::{CompressedReader, CompressedWriter, Compression};
pub use decoder::ExampleDecoder;
pub use encode::{ExampleBuilder, encode_batch};
pub use error::{Error, FeatureProblem, Location, Result};
pub use framing::{
    Decoded, FOOTER_LEN, FRAME_OVERHEAD, Frame, FrameDecoder, HEADER_LEN, ReaderOptions,
    RecordReader, Records, mask_crc, masked_crc32c, unmask_crc,
};
pub use index::{
    IndexEntry, IndexedReader, build_index, index_path, parse_index, read_index, verify_index,
    write_index, write_index_to,
};
pub use records::{example_to_json, feature_to_json, sequence_example_to_json};
pub use source::TfRecordSource;
pub use writer::{RecordWriter, WriteSummary, WriterOptions};
