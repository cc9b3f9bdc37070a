//! The write side of [`OfRecordFormat`](crate::OfRecordFormat): batches
//! encoded as OFRecords by [`OfRecordEncoder`], one part file per sink
//! (the [`RecordWriter`] over an atomic write of the storage layer).
//! [`DatasetWriter`](crate::DatasetWriter) writes whole folders of parts;
//! a sink is one part, so that a caller (conversion) names and commits
//! each.

use std::io::{BufWriter, Write};

use grist_io::{Address, Storage, Writer};
use grist_tensor::{
    Batch, BoxError, Encoder, FeatureSpec, RecordBuf, RecordSink, SpecFile, SpecForm, StorageError,
    WriteOptions, Written, features_mut, spec_in_form,
};

use crate::decoder::OfRecordDecoder;
use crate::encode::{encode_rows, keyed_partitions, no_sequences};
use crate::error::{Error, Result};
use crate::writer::RecordWriter;

/// Encodes batches as serialized OFRecords: the encoder of
/// [`OfRecordFormat`](crate::OfRecordFormat) and of FFRecord's OFRecord
/// payloads.
///
/// Every dtype has an OFRecord list (int32, int64, float, double, bytes;
/// bools as an int32 list of 0 and 1, read back as bool), so nothing is
/// narrowed. Sparse features in ATDS form (`shape`) are written under keys
/// made from their name ([`grist_tensor::sparse_index_key`]). Ragged
/// features with keyed partitions and sequence specs are refused in
/// [`new`](Self::new), naming the feature.
///
/// ```
/// use grist_ofrecord::OfRecordEncoder;
/// use grist_tensor::{DType, Encoder, FeatureSpec, SpecFile, WriteOptions};
///
/// let spec = SpecFile {
///     features: vec![FeatureSpec::dense("x", DType::Float64, [2])],
///     ..SpecFile::default()
/// };
/// let e = OfRecordEncoder::new(&spec, &WriteOptions::new())?;
/// assert_eq!(e.spec().features[0].dtype(), DType::Float64);
/// # Ok::<(), grist_ofrecord::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct OfRecordEncoder {
    spec: SpecFile,
}

impl OfRecordEncoder {
    /// The encoder of batches described by `spec`, or an error naming the
    /// first feature OFRecords cannot hold.
    pub fn new(spec: &SpecFile, options: &WriteOptions) -> Result<Self> {
        let _ = options;
        if spec.sequence {
            return Err(no_sequences());
        }
        let mut spec = spec_in_form(spec, SpecForm::Example);
        for f in features_mut(&mut spec) {
            match f {
                FeatureSpec::Ragged(r) if r.partitions.iter().any(|p| p.key().is_some()) => {
                    return Err(keyed_partitions(&r.name));
                }
                // Written sorted: the decoder need not sort them again.
                FeatureSpec::Sparse(s) => s.already_sorted = true,
                _ => {}
            }
        }
        // What the decoder refuses, no records can describe.
        OfRecordDecoder::new(&spec.features)?;
        Ok(OfRecordEncoder { spec })
    }
}

impl Encoder for OfRecordEncoder {
    fn spec(&self) -> &SpecFile {
        &self.spec
    }

    fn encode(&self, batch: &Batch, out: &mut RecordBuf) -> std::result::Result<(), BoxError> {
        Ok(encode_rows(batch, &self.spec, out)?)
    }
}

/// One OFRecord part being written (the format's [`RecordSink`]).
#[derive(Debug)]
pub(crate) struct OfRecordSink {
    writer: RecordWriter<BufWriter<Writer>>,
}

impl OfRecordSink {
    pub(crate) fn create(storage: &Storage, address: &Address) -> Result<Self> {
        let name = address.name().clone();
        let mut file = storage
            .create(address)
            .map_err(|e| Error::Storage(StorageError::new(name.clone(), e)))?;
        // The storage's writer gathers the records itself.
        file.set_buffer_size(1 << 20);
        Ok(OfRecordSink {
            writer: RecordWriter::named(BufWriter::with_capacity(0, file), name),
        })
    }
}

impl RecordSink for OfRecordSink {
    fn write(&mut self, record: &[u8]) -> std::result::Result<(), BoxError> {
        Ok(self.writer.write_record(record)?)
    }

    fn records(&self) -> u64 {
        self.writer.records()
    }

    fn finish(self: Box<Self>) -> std::result::Result<Written, BoxError> {
        let written = Written::new(self.writer.records(), self.writer.bytes());
        let mut out = self.writer.into_inner();
        let name = out.get_ref().address().name().clone();
        out.flush().map_err(|e| io_error(&name, e))?;
        let file = out
            .into_inner()
            .map_err(|e| io_error(&name, e.into_error()))?;
        let digest = file
            .commit_with_digest()
            .map_err(|e| Error::Storage(StorageError::new(name, e)))?;
        Ok(written.with_digest(digest))
    }
}

/// A write error of `file`: the storage layer's own, or the I/O error.
fn io_error(file: &std::sync::Arc<str>, e: std::io::Error) -> Error {
    match StorageError::from_io(file, e) {
        Ok(e) => Error::Storage(e),
        Err(source) => Error::Io {
            file: file.clone(),
            source,
        },
    }
}
