//! The write side of the format contract, the mirror of the read side:
//! an [`Encoder`] turns batches into records (on any number of threads),
//! a [`RecordSink`] appends them to one file and commits it atomically.
//!
//! A format that writes implements [`Format::encoder`](crate::Format::encoder)
//! (whose [`Encoder::spec`] is the spec in the format's own form, which
//! reads the written records back: [`Format::write_spec`](crate::Format::write_spec))
//! and [`Format::create`](crate::Format::create). Everything a
//! format cannot represent is refused when the encoder is built, before
//! any output exists, naming the feature.

use std::fmt;

use crate::{Batch, BoxError, SpecFile};

/// Whether a conversion may lose precision (float64 written as float32
/// where a format has no float64).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lossy {
    /// Refuse, when the encoder is built, a feature whose values the
    /// format cannot hold exactly.
    #[default]
    Refuse,
    /// Narrow such values (float64 to float32), and say so in the
    /// written spec (its dtype becomes the narrower one).
    Allow,
}

/// How a format writes: options of every format in one value, each format
/// reading those that concern it (and refusing a value it does not know,
/// when its encoder or sink is built).
///
/// ```
/// use grist_tensor::{Lossy, WriteOptions};
/// let options = WriteOptions::new()
///     .with_compression("GZIP")
///     .with_codec("deflate")
///     .with_lossy(Lossy::Allow);
/// assert_eq!(options.compression.as_deref(), Some("GZIP"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteOptions {
    /// TFRecord compression, as TensorFlow names it: `""` (none), `"GZIP"`,
    /// `"ZLIB"`, or `"ZSTD"` (with grist-tfrecord's `zstd` feature).
    pub compression: Option<String>,
    /// Avro codec, as the specification names it: `"null"`, `"deflate"`,
    /// `"snappy"`, `"zstandard"`, `"bzip2"`, `"xz"` (each with its Cargo
    /// feature).
    pub codec: Option<String>,
    /// Avro: the writer schema (JSON) to write, instead of the one derived
    /// from the specs. It must encode datums exactly as the derived one
    /// does (names, namespaces, docs and extra attributes may differ).
    pub schema: Option<String>,
    /// FFRecord: what the samples hold, `"example"` (tf.Example, the
    /// default) or `"ofrecord"`.
    pub payload: Option<String>,
    /// Whether values may be narrowed where the format has no exact type.
    pub lossy: Lossy,
}

impl WriteOptions {
    /// Options with every field at its default: no compression, Avro's
    /// `null` codec, the derived schema, tf.Example payloads, lossy
    /// conversions refused.
    pub fn new() -> Self {
        Self::default()
    }

    /// The TFRecord compression (`""`, `"GZIP"`, `"ZLIB"`, `"ZSTD"`). By
    /// default, none.
    #[must_use]
    pub fn with_compression(mut self, name: impl Into<String>) -> Self {
        self.compression = Some(name.into());
        self
    }

    /// The Avro codec (`"null"`, `"deflate"`, `"snappy"`, `"zstandard"`,
    /// `"bzip2"`, `"xz"`). By default, `null`.
    #[must_use]
    pub fn with_codec(mut self, name: impl Into<String>) -> Self {
        self.codec = Some(name.into());
        self
    }

    /// The Avro writer schema. By default, the one derived from the specs.
    #[must_use]
    pub fn with_schema(mut self, schema_json: impl Into<String>) -> Self {
        self.schema = Some(schema_json.into());
        self
    }

    /// The FFRecord payload (`"example"`, `"ofrecord"`). By default, the
    /// format's configured payload (tf.Example unless configured).
    #[must_use]
    pub fn with_payload(mut self, name: impl Into<String>) -> Self {
        self.payload = Some(name.into());
        self
    }

    /// Whether lossy conversions are allowed. By default,
    /// [`Lossy::Refuse`].
    #[must_use]
    pub fn with_lossy(mut self, lossy: Lossy) -> Self {
        self.lossy = lossy;
        self
    }
}

/// Turns batches into a format's records: built once from the specs by
/// [`Format::encoder`](crate::Format::encoder) (which refuses what the
/// format cannot represent), then called from any number of threads.
pub trait Encoder: Send + Sync + fmt::Debug {
    /// The spec the records are written for, in the format's own form
    /// (what reads them back; see
    /// [`Format::write_spec`](crate::Format::write_spec)).
    fn spec(&self) -> &SpecFile;

    /// Appends the serialized records of `batch`'s rows to `out`, in row
    /// order. An error names the feature (the caller adds the file and
    /// record); `out` then holds the records before the failing one, or
    /// fewer.
    fn encode(&self, batch: &Batch, out: &mut RecordBuf) -> Result<(), BoxError>;
}

/// Serialized records in one buffer: what an [`Encoder`] appends to, kept
/// and cleared between batches so that encoding allocates nothing once the
/// buffer has grown to a batch's size.
///
/// ```
/// use grist_tensor::RecordBuf;
/// let mut records = RecordBuf::new();
/// records.push(b"first");
/// records.data_mut().extend_from_slice(b"second");
/// records.end_record();
/// assert_eq!(records.iter().collect::<Vec<_>>(), [&b"first"[..], b"second"]);
/// records.clear();
/// assert!(records.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordBuf {
    data: Vec<u8>,
    /// Where each record ends in `data`.
    ends: Vec<usize>,
}

impl RecordBuf {
    /// No records.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes room for `records` more records of `bytes` bytes in all.
    pub fn reserve(&mut self, bytes: usize, records: usize) {
        self.data.reserve(bytes);
        self.ends.reserve(records);
    }

    /// The number of records.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The bytes of all records, one after the other.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// Record `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.data.get(start..end)
    }

    /// The records, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or_default())
    }

    /// Appends one record.
    pub fn push(&mut self, record: &[u8]) {
        self.data.extend_from_slice(record);
        self.end_record();
    }

    /// The buffer the record being built is appended to; [`end_record`]
    /// closes it.
    ///
    /// [`end_record`]: Self::end_record
    pub fn data_mut(&mut self) -> &mut Vec<u8> {
        &mut self.data
    }

    /// Ends the record being built: the bytes appended to
    /// [`data_mut`](Self::data_mut) since the previous record.
    pub fn end_record(&mut self) {
        self.ends.push(self.data.len());
    }

    /// Drops every record, keeping the buffers.
    pub fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }
}

/// What a [`RecordSink`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    /// The records written.
    pub records: u64,
    /// The bytes written: the file's size (TFRecord: the framed bytes
    /// before compression, the size of the file uncompressed).
    pub bytes: u64,
    /// The file's size and CRC-32C, computed while it was written, when
    /// the sink knows them (see [`grist_io::Writer::digest`]).
    pub digest: Option<grist_io::Digest>,
}

impl Written {
    /// `records` records in `bytes` bytes.
    pub fn new(records: u64, bytes: u64) -> Self {
        Written {
            records,
            bytes,
            digest: None,
        }
    }

    /// The file's size and CRC-32C. By default, `None` (not known).
    #[must_use]
    pub fn with_digest(mut self, digest: Option<grist_io::Digest>) -> Self {
        self.digest = digest;
        self
    }
}

/// One output file of a format, from
/// [`Format::create`](crate::Format::create): records appended in order,
/// nothing under the final name until [`finish`](Self::finish) commits
/// (a local file renamed into place, an object uploaded whole); dropped
/// unfinished, it leaves nothing.
pub trait RecordSink: Send + fmt::Debug {
    /// Appends one record (a payload from the format's [`Encoder`]).
    fn write(&mut self, record: &[u8]) -> Result<(), BoxError>;

    /// The records written so far.
    fn records(&self) -> u64;

    /// Tells the sink, before its first record, how many records the file
    /// will hold, when the writer knows (a conversion that counted its
    /// inputs). A format whose header holds the count (FFRecord) then
    /// writes its records in place rather than moving them behind the
    /// header at the end; [`finish`](Self::finish) then fails if another
    /// number was written. By default, ignored.
    fn expect_records(&mut self, records: u64) -> Result<(), BoxError> {
        let _ = records;
        Ok(())
    }

    /// Commits the file.
    fn finish(self: Box<Self>) -> Result<Written, BoxError>;
}
