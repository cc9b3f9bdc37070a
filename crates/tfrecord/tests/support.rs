//! What only grist-tfrecord's tests need on top of grist-testkit's corpus
//! helpers: the views of a case in this crate's types, and a file's
//! records.

use std::path::Path;

use grist_testkit::corpus::Case;
use grist_tfrecord::{Compression, ReaderOptions, RecordReader};

/// A TFRecord corpus case in grist-tfrecord's types.
pub(crate) trait TfCase {
    /// The compression TensorFlow read the file with.
    fn compression(&self) -> Compression;
}

impl TfCase for Case {
    fn compression(&self) -> Compression {
        let name = self.compression_name();
        Compression::from_name(name)
            .unwrap_or_else(|| panic!("{}: unknown compression {name:?}", self.name))
    }
}

/// Every record of a good file.
pub(crate) fn read_all(path: &Path) -> Vec<Vec<u8>> {
    let mut reader = RecordReader::open(path, ReaderOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        out.push(r.to_vec());
    }
    out
}
