//! The write side of [`FfrFormat`](crate::FfrFormat): samples encoded by
//! the payload's encoder (tf.Example through grist-tfrecord, OFRecord
//! through grist-ofrecord), written by the [`FfrWriter`].

use grist_io::{Address, Storage};
use grist_tensor::{BoxError, Encoder, RecordSink, SpecFile, TensorError, WriteOptions, Written};
use grist_tfrecord::ExampleEncoder;

use crate::error::{Error, Result};
use crate::format::Payload;
use crate::writer::{FfrWriter, WriterOptions};

/// The payload `options` ask for, else `configured` (the format's); raw
/// tensors are refused (a sample holds one tensor, a batch many).
pub(crate) fn payload(configured: Payload, options: &WriteOptions) -> Result<Payload> {
    let payload = match options.payload.as_deref() {
        None => configured,
        Some(name) => Payload::from_name(name).ok_or_else(|| {
            Error::Spec(TensorError::Unsupported {
                what: format!("FFRecord: unknown payload {name:?} (example or ofrecord)"),
            })
        })?,
    };
    if payload == Payload::Raw {
        return Err(Error::Spec(TensorError::Unsupported {
            what: "FFRecord: raw tensor payloads are read, not written (write example or \
                   ofrecord payloads)"
                .into(),
        }));
    }
    Ok(payload)
}

/// The encoder of `payload` samples for `spec`.
pub(crate) fn encoder(
    payload: Payload,
    spec: &SpecFile,
    options: &WriteOptions,
) -> std::result::Result<Box<dyn Encoder>, BoxError> {
    Ok(match payload {
        Payload::OfRecord => Box::new(grist_ofrecord::OfRecordEncoder::new(spec, options)?),
        _ => Box::new(ExampleEncoder::new(spec, options)?),
    })
}

/// One FFRecord file being written (the format's [`RecordSink`]).
#[derive(Debug)]
pub(crate) struct FfrSink {
    writer: FfrWriter,
}

impl FfrSink {
    pub(crate) fn create(storage: &Storage, address: &Address) -> Result<Self> {
        Ok(FfrSink {
            writer: FfrWriter::create_at(storage, address, WriterOptions::default())?,
        })
    }
}

impl RecordSink for FfrSink {
    fn write(&mut self, record: &[u8]) -> std::result::Result<(), BoxError> {
        Ok(self.writer.write_sample(record)?)
    }

    fn records(&self) -> u64 {
        self.writer.samples()
    }

    fn expect_records(&mut self, records: u64) -> std::result::Result<(), BoxError> {
        Ok(self.writer.expect_samples(records)?)
    }

    fn finish(self: Box<Self>) -> std::result::Result<Written, BoxError> {
        let summary = self.writer.finish()?;
        Ok(Written::new(summary.samples, summary.bytes).with_digest(summary.digest))
    }
}
