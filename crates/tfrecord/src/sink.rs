//! The write side of [`TfRecordFormat`](crate::TfRecordFormat): batches
//! encoded as `tf.train.Example` (or `SequenceExample`) records by
//! [`ExampleEncoder`], framed into files by the [`RecordWriter`].

use grist_io::{Address, Storage};
use grist_tensor::{
    Batch, BoxError, DType, Encoder, FeatureSpec, Lossy, RecordBuf, RecordSink, SpecFile, SpecForm,
    TensorError, WriteOptions, Written, features_mut, spec_in_form, with_dtype,
};

use crate::compression::Compression;
use crate::decoder::ExampleDecoder;
use crate::encode::{encode_rows, narrowing};
use crate::error::{Error, Result};
use crate::writer::{RecordWriter, WriterOptions};

/// Encodes batches as serialized `tf.train.Example`s (or
/// `SequenceExample`s for a sequence spec): the encoder of
/// [`TfRecordFormat`](crate::TfRecordFormat) and of FFRecord's tf.Example
/// payloads.
///
/// Built from the specs that describe the batches. Sparse features in ATDS
/// form (`shape`) are written under keys made from their name
/// ([`grist_tensor::sparse_index_key`]); int32 and bool values are written
/// as int64 lists (and read back as int32 and bool by the written spec);
/// float64 values are refused unless [`Lossy::Allow`] narrows them to
/// float32. Every refusal happens in [`new`](Self::new), naming the
/// feature.
///
/// ```
/// use grist_tensor::{DType, Encoder, FeatureSpec, Lossy, SpecFile, WriteOptions};
/// use grist_tfrecord::ExampleEncoder;
///
/// let spec = SpecFile {
///     features: vec![FeatureSpec::dense("x", DType::Float64, [])],
///     ..SpecFile::default()
/// };
/// assert!(ExampleEncoder::new(&spec, &WriteOptions::new()).is_err());
/// let e = ExampleEncoder::new(&spec, &WriteOptions::new().with_lossy(Lossy::Allow))?;
/// assert_eq!(e.spec().features[0].dtype(), DType::Float32);
/// # Ok::<(), grist_tfrecord::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ExampleEncoder {
    /// The specs the batches are encoded by (tf.Example form, the batch's
    /// dtypes).
    source: SpecFile,
    /// The specs that read the records back.
    written: SpecFile,
    lossy: Lossy,
}

impl ExampleEncoder {
    /// The encoder of batches described by `spec`, or an error naming the
    /// first feature tf.Example cannot hold (a float64 one without
    /// [`Lossy::Allow`], a kind the decoder would not read back).
    pub fn new(spec: &SpecFile, options: &WriteOptions) -> Result<Self> {
        let source = spec_in_form(spec, SpecForm::Example);
        let mut written = source.clone();
        for f in features_mut(&mut written) {
            match f.dtype() {
                DType::Float64 if options.lossy == Lossy::Allow => {
                    *f = with_dtype(f, DType::Float32)
                }
                DType::Float64 => return Err(narrowing(f.name())),
                _ => {}
            }
            if let FeatureSpec::Sparse(s) = f {
                // Written sorted: the decoder need not sort them again.
                s.already_sorted = true;
            }
        }
        // What the decoder refuses, no records can describe.
        ExampleDecoder::from_spec_file(&written)?;
        Ok(ExampleEncoder {
            source,
            written,
            lossy: options.lossy,
        })
    }

    /// Appends the serialized records of `batch`'s rows to `out`.
    pub fn encode_batch(&self, batch: &Batch, out: &mut RecordBuf) -> Result<()> {
        encode_rows(batch, &self.source, self.lossy, out)
    }
}

impl Encoder for ExampleEncoder {
    fn spec(&self) -> &SpecFile {
        &self.written
    }

    fn encode(&self, batch: &Batch, out: &mut RecordBuf) -> std::result::Result<(), BoxError> {
        Ok(self.encode_batch(batch, out)?)
    }
}

/// The compression `options` ask for (none by default), refused when
/// unknown or not built in.
pub(crate) fn compression(options: &WriteOptions) -> Result<Compression> {
    let Some(name) = options.compression.as_deref() else {
        return Ok(Compression::None);
    };
    let c = Compression::from_name(name).ok_or_else(|| {
        Error::Spec(TensorError::Unsupported {
            what: format!("TFRecord: unknown compression {name:?} (NONE, GZIP, ZLIB or ZSTD)"),
        })
    })?;
    // Report a codec left out of this build before anything is written.
    c.writer(std::io::sink())?;
    Ok(c)
}

/// One TFRecord file being written (the format's [`RecordSink`]).
#[derive(Debug)]
pub(crate) struct TfRecordSink {
    writer: RecordWriter,
}

impl TfRecordSink {
    pub(crate) fn create(
        storage: &Storage,
        address: &Address,
        options: &WriteOptions,
    ) -> Result<Self> {
        let options = WriterOptions::default().with_compression(Some(compression(options)?));
        Ok(TfRecordSink {
            writer: RecordWriter::create_at(storage, address, options)?,
        })
    }
}

impl RecordSink for TfRecordSink {
    fn write(&mut self, record: &[u8]) -> std::result::Result<(), BoxError> {
        Ok(self.writer.write_record(record)?)
    }

    fn records(&self) -> u64 {
        self.writer.records()
    }

    fn finish(self: Box<Self>) -> std::result::Result<Written, BoxError> {
        let summary = self.writer.finish()?;
        Ok(Written::new(summary.records, summary.bytes).with_digest(summary.digest))
    }
}
