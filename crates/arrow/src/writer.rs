//! Arrow record batches written to one file of a grist format, through the
//! format contract (`Format::encoder`, `Format::create`).

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, Schema};
use grist_io::{Address, Storage};
use grist_tensor::{
    BoxError, Encoder, Format, RecordBuf, RecordSink, SpecFile, WriteOptions, Written,
};

use crate::{Error, from_record_batch, spec_from_schema};

/// Writes Arrow record batches as the records of one file of a grist
/// format: each batch converted with
/// [`from_record_batch`](crate::from_record_batch), encoded by the
/// format's [`Encoder`] and appended to its [`RecordSink`].
///
/// Everything the batches cannot become is refused by
/// [`try_new`](Self::try_new), before the file exists: Arrow types without
/// a grist dtype (naming the column) and features the format cannot write
/// (naming the feature). As every sink, nothing appears under the address
/// until [`finish`](Self::finish); dropped unfinished, it leaves nothing.
pub struct FormatWriter {
    format: String,
    spec: SpecFile,
    encoder: Box<dyn Encoder>,
    sink: Box<dyn RecordSink>,
    records: RecordBuf,
}

impl std::fmt::Debug for FormatWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FormatWriter")
            .field("format", &self.format)
            .field("records", &self.sink.records())
            .finish_non_exhaustive()
    }
}

impl FormatWriter {
    /// A writer of batches of `schema` into a new file of `format` at
    /// `address`, with `spec` (by default, [`spec_from_schema`]'s) under
    /// `options`.
    pub fn try_new(
        format: &dyn Format,
        storage: &Storage,
        address: &Address,
        schema: &Schema,
        spec: Option<&SpecFile>,
        options: &WriteOptions,
    ) -> Result<Self, Error> {
        let spec = match spec {
            Some(s) => s.clone(),
            None => spec_from_schema(schema)?,
        };
        let name = format.name().to_string();
        let failed = |source: BoxError| Error::Write {
            format: name.clone(),
            source,
        };
        let encoder = format.encoder(&spec, options).map_err(failed)?;
        let sink = format
            .create(storage, address, &spec, options)
            .map_err(failed)?;
        Ok(FormatWriter {
            format: name,
            spec,
            encoder,
            sink,
            records: RecordBuf::new(),
        })
    }

    /// The spec that reads the file back, in the format's own form (write
    /// it beside the file as `spec.json`, as `grist convert` does).
    pub fn spec(&self) -> &SpecFile {
        self.encoder.spec()
    }

    /// Appends the rows of `batch`.
    pub fn write(&mut self, batch: RecordBatch) -> Result<(), Error> {
        let (batch, _) = from_record_batch(batch, Some(&self.spec))?;
        self.records.clear();
        let failed = |source: BoxError| Error::Write {
            format: self.format.clone(),
            source,
        };
        self.encoder
            .encode(&batch, &mut self.records)
            .map_err(failed)?;
        for record in self.records.iter() {
            self.sink.write(record).map_err(failed)?;
        }
        Ok(())
    }

    /// Commits the file.
    pub fn finish(self) -> Result<Written, Error> {
        let format = self.format;
        self.sink
            .finish()
            .map_err(|source| Error::Write { format, source })
    }
}

/// Writes `batches` (of `schema`, as a Parquet or IPC reader yields them)
/// to one new file of `format` at `address`: [`FormatWriter`] from start to
/// finish. Returns what was written and the spec that reads it back. On an
/// error, nothing is left at `address`.
pub fn write_batches<I>(
    format: &dyn Format,
    storage: &Storage,
    address: &Address,
    schema: &Schema,
    spec: Option<&SpecFile>,
    options: &WriteOptions,
    batches: I,
) -> Result<(Written, SpecFile), Error>
where
    I: IntoIterator<Item = Result<RecordBatch, ArrowError>>,
{
    let mut writer = FormatWriter::try_new(format, storage, address, schema, spec, options)?;
    for batch in batches {
        writer.write(batch?)?;
    }
    let spec = writer.spec().clone();
    Ok((writer.finish()?, spec))
}
