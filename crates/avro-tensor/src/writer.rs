//! [`ContainerWriter`]: object container files from already-encoded
//! datums, written atomically through the storage layer (a local file
//! beside the target, fsync, rename; an object store's multipart upload).

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use grist_io::{Address, Storage, Writer};

use crate::codec::Codec;
use crate::container::{MAGIC, SYNC_LEN, write_long};
use crate::error::{Error, Result};

/// Options of [`ContainerWriter`].
///
/// ```
/// use grist_avro_tensor::{Codec, WriterOptions};
/// let options = WriterOptions::default()
///     .with_codec(Codec::Snappy)
///     .with_sync_interval(16_000)
///     .with_metadata("written_by", "grist");
/// # let _ = options;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriterOptions {
    codec: Codec,
    sync_interval: usize,
    metadata: Vec<(String, Vec<u8>)>,
    sync_marker: Option<[u8; SYNC_LEN]>,
    buffer_size: usize,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            codec: Codec::Null,
            sync_interval: 64_000,
            metadata: Vec::new(),
            sync_marker: None,
            buffer_size: 1 << 20,
        }
    }
}

impl WriterOptions {
    /// The codec of every block. By default, [`Codec::Null`].
    #[must_use]
    pub fn with_codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }

    /// The size of a block's serialized (uncompressed) records at which it
    /// is written out: a block ends with the first datum that takes it to
    /// this size or beyond. Values below 1 are raised to 1 (one record per
    /// block). By default, 64,000 bytes (Java's `DataFileWriter`; fastavro
    /// uses 16,000).
    #[must_use]
    pub fn with_sync_interval(mut self, bytes: usize) -> Self {
        self.sync_interval = bytes.max(1);
        self
    }

    /// Adds a metadata entry to the header (a later entry with the same
    /// key replaces an earlier one). Keys starting with `avro.` are
    /// reserved by the specification: [`ContainerWriter::new`] refuses
    /// them. By default, no entries besides `avro.schema` and
    /// `avro.codec`.
    #[must_use]
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        let key = key.into();
        self.metadata.retain(|(k, _)| *k != key);
        self.metadata.push((key, value.into()));
        self
    }

    /// The sync marker, e.g. for byte-reproducible output. By default, 16
    /// random bytes from the operating system's generator (through
    /// `rand`), new for every file, as the specification asks.
    #[must_use]
    pub fn with_sync_marker(mut self, sync: [u8; SYNC_LEN]) -> Self {
        self.sync_marker = Some(sync);
        self
    }

    /// The size of the write buffer in front of the output (for a storage
    /// address, how much the storage writer gathers: its
    /// [`set_buffer_size`](grist_io::Writer::set_buffer_size)), at most
    /// [`grist_tensor::MAX_IO_BUFFER`]. By default, 1 MiB.
    #[must_use]
    pub fn with_buffer_size(mut self, bytes: usize) -> Self {
        self.buffer_size = bytes.clamp(1, grist_tensor::MAX_IO_BUFFER);
        self
    }
}

/// What a finished [`ContainerWriter`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteSummary {
    /// The number of records.
    pub records: u64,
    /// The number of blocks.
    pub blocks: u64,
    /// The number of bytes of the file, header included.
    pub bytes: u64,
    /// The file's size and CRC-32C, computed while writing it (a file
    /// made by `create`/`create_at`; `None` for other writers).
    pub digest: Option<grist_io::Digest>,
}

/// Commits the inner writer of a file (and says its digest).
type Commit<W> = fn(W) -> grist_io::Result<Option<grist_io::Digest>>;

/// Writes an object container file from already-encoded datums, to a file
/// or object (atomically) or to any [`Write`].
///
/// The header (magic, `avro.schema`, `avro.codec`, the extra metadata,
/// the sync marker) is written when the writer is made. Datums are
/// buffered into a block, which is compressed and written once its
/// serialized size reaches the sync interval, or by
/// [`flush_block`](Self::flush_block), or by [`finish`](Self::finish).
/// The writer does not check that a datum follows the schema: that is the
/// encoder's job.
///
/// A file made by [`create`](ContainerWriter::create) or
/// [`create_at`](ContainerWriter::create_at) is written through the
/// storage layer ([`grist_io::Storage::create`]): locally to a hidden
/// temporary sibling, renamed to its name by `finish` after an fsync; to
/// an object store as a multipart upload that `finish` completes.
/// Dropping the writer unfinished, or a failed `finish`, leaves nothing,
/// so no partial file ever appears under the final name.
///
/// ```
/// use grist_avro_tensor::{Codec, ContainerWriter, WriterOptions};
///
/// let options = WriterOptions::default().with_codec(Codec::Deflate);
/// let mut w = ContainerWriter::new(Vec::new(), r#"{"type": "array", "items": "long"}"#, options)?;
/// w.append_datum(&[0x04, 0x02, 0x04, 0x00])?; // [1, 2]
/// w.append_datum(&[0x00])?; // []
/// let (bytes, summary) = w.finish_into_inner()?;
/// assert_eq!((summary.records, summary.blocks), (2, 1));
///
/// let values: Vec<_> = apache_avro::Reader::new(&bytes[..]).unwrap().map(|v| v.unwrap()).collect();
/// assert_eq!(values.len(), 2);
/// # Ok::<(), grist_avro_tensor::Error>(())
/// ```
pub struct ContainerWriter<W: Write = Writer> {
    name: Arc<str>,
    out: Option<BufWriter<W>>,
    /// Makes the output visible, for [`ContainerWriter::create_at`]
    /// ([`Writer::commit`]); `None` for a plain [`Write`].
    commit: Option<Commit<W>>,
    codec: Codec,
    sync: [u8; SYNC_LEN],
    sync_interval: usize,
    /// The serialized records of the block being filled.
    block: Vec<u8>,
    block_records: u64,
    /// Compressed block bytes, reused.
    scratch: Vec<u8>,
    records: u64,
    blocks: u64,
    bytes: u64,
    failed: bool,
}

impl ContainerWriter {
    /// Creates an object container file at `path` with the writer schema
    /// `schema_json`, writing through a temporary sibling that
    /// [`finish`](Self::finish) renames to `path` (see
    /// [`create_at`](Self::create_at)).
    pub fn create(
        path: impl AsRef<Path>,
        schema_json: &str,
        options: WriterOptions,
    ) -> Result<Self> {
        ContainerWriter::create_at(
            &Storage::new(),
            &Address::from(path.as_ref()),
            schema_json,
            options,
        )
    }

    /// Creates an object container file or object at `address` (a path,
    /// or an object store URL) with the writer schema `schema_json`,
    /// through `storage`: nothing appears under `address` until
    /// [`finish`](Self::finish).
    ///
    /// Fails as [`new`](ContainerWriter::new) does, before touching the
    /// storage, or with [`Error::Storage`] when the storage refuses.
    ///
    /// ```
    /// use grist_avro_tensor::{ContainerWriter, WriterOptions};
    /// use grist_io::{Address, Storage};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let address = Address::from(dir.path().join("longs.avro"));
    /// let mut w = ContainerWriter::create_at(&Storage::new(), &address, r#""long""#,
    ///     WriterOptions::default())?;
    /// w.append_datum(&[0x02])?;
    /// assert!(!dir.path().join("longs.avro").exists());
    /// w.finish()?;
    /// assert!(dir.path().join("longs.avro").is_file());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_at(
        storage: &Storage,
        address: &Address,
        schema_json: &str,
        options: WriterOptions,
    ) -> Result<Self> {
        let name = address.name().clone();
        let header = header_bytes(&name, schema_json, &options)?;
        let mut file = storage
            .create(address)
            .map_err(|e| Error::Storage(grist_tensor::StorageError::new(name.clone(), e)))?;
        // The storage's writer gathers the blocks' pieces itself.
        file.set_buffer_size(options.buffer_size);
        let mut w = ContainerWriter::from_parts(name, file, header, options, 0)?;
        w.commit = Some(Writer::commit_with_digest);
        Ok(w)
    }
}

impl<W: Write> ContainerWriter<W> {
    /// Writes an object container file to `inner` (e.g. a `Vec<u8>`).
    ///
    /// Fails with [`Error::BadHeader`] when `schema_json` is not a schema
    /// `apache-avro` accepts or a metadata key is reserved (`avro.*`), with
    /// [`Error::UnsupportedCodec`] for a codec not built in, and with
    /// [`Error::Io`] when the header cannot be written.
    pub fn new(inner: W, schema_json: &str, options: WriterOptions) -> Result<Self> {
        let name: Arc<str> = "".into();
        let header = header_bytes(&name, schema_json, &options)?;
        let buffer = options.buffer_size;
        ContainerWriter::from_parts(name, inner, header, options, buffer)
    }

    /// The writer of `inner`, through a buffer of `buffer` bytes (none for
    /// a storage writer, which gathers writes itself).
    fn from_parts(
        name: Arc<str>,
        inner: W,
        header: HeaderBytes,
        options: WriterOptions,
        buffer: usize,
    ) -> Result<Self> {
        let mut out = BufWriter::with_capacity(buffer, inner);
        let mut w = ContainerWriter {
            name,
            out: None,
            commit: None,
            codec: options.codec,
            sync: header.sync,
            sync_interval: options.sync_interval,
            block: Vec::new(),
            block_records: 0,
            scratch: Vec::new(),
            records: 0,
            blocks: 0,
            bytes: header.bytes.len() as u64,
            failed: false,
        };
        out.write_all(&header.bytes).map_err(|e| w.io_error(e))?;
        w.out = Some(out);
        Ok(w)
    }

    /// Appends one datum, already encoded in Avro's binary encoding per the
    /// writer schema, and writes the block out if it has reached the sync
    /// interval.
    ///
    /// After a failed write the writer is unusable: later calls and
    /// `finish` fail too (and a file's temporary is removed).
    pub fn append_datum(&mut self, datum: &[u8]) -> Result<()> {
        self.check_usable()?;
        self.block.extend_from_slice(datum);
        self.block_records += 1;
        self.records += 1;
        if self.block.len() >= self.sync_interval {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Appends a whole block of `record_count` encoded datums, `data`, as
    /// one block of its own (after writing out the datums buffered
    /// before it), compressed with this writer's codec: for copying blocks
    /// between files without decoding them.
    pub fn append_block(&mut self, record_count: u64, data: &[u8]) -> Result<()> {
        self.check_usable()?;
        self.flush_block()?;
        let result = self.write_block(record_count, data);
        self.after_write(result)?;
        self.records += record_count;
        Ok(())
    }

    /// Writes out the datums buffered so far as a block (nothing when none
    /// are), like Java's `DataFileWriter.sync()`.
    pub fn flush_block(&mut self) -> Result<()> {
        self.check_usable()?;
        if self.block_records == 0 {
            return Ok(());
        }
        let block = std::mem::take(&mut self.block);
        let result = self.write_block(self.block_records, &block);
        self.block = block;
        self.block.clear();
        self.block_records = 0;
        self.after_write(result)
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed || self.out.is_none() {
            return Err(self.io_error(earlier_failure()));
        }
        Ok(())
    }

    fn after_write(&mut self, result: Result<()>) -> Result<()> {
        if result.is_err() {
            self.failed = true;
            // Remove a file's temporary now, not only on drop.
            self.out = None;
        }
        result
    }

    fn write_block(&mut self, record_count: u64, data: &[u8]) -> Result<()> {
        let Ok(count) = i64::try_from(record_count) else {
            return Err(self.io_error(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a block's record count must fit in a long",
            )));
        };
        self.scratch.clear();
        let name = self.name.clone();
        self.codec
            .compress(data, &mut self.scratch)
            .map_err(|e| match e {
                Error::Io { source, .. } => Error::Io { file: name, source },
                other => other,
            })?;
        let mut prefix = Vec::with_capacity(20);
        write_long(&mut prefix, count);
        write_long(&mut prefix, self.scratch.len() as i64);
        let Some(out) = self.out.as_mut() else {
            return Err(self.io_error(earlier_failure()));
        };
        let written = out
            .write_all(&prefix)
            .and_then(|()| out.write_all(&self.scratch))
            .and_then(|()| out.write_all(&self.sync));
        written.map_err(|e| self.io_error(e))?;
        self.blocks += 1;
        self.bytes += (prefix.len() + self.scratch.len() + SYNC_LEN) as u64;
        Ok(())
    }

    /// The number of records appended so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The file's sync marker.
    pub fn sync_marker(&self) -> [u8; SYNC_LEN] {
        self.sync
    }

    /// A write error: the storage layer's own (a streaming upload's part
    /// that failed), or an I/O error of this file.
    fn io_error(&self, source: io::Error) -> Error {
        match grist_tensor::StorageError::from_io(&self.name, source) {
            Ok(e) => Error::Storage(e),
            Err(source) => Error::Io {
                file: self.name.clone(),
                source,
            },
        }
    }

    /// Writes out the last block and, for a file, makes it durable and
    /// visible under its name.
    pub fn finish(self) -> Result<WriteSummary> {
        self.finish_parts().map(|(_, summary)| summary)
    }

    /// Like [`finish`](Self::finish), also returning the inner writer (the
    /// `Vec<u8>` of [`new`](Self::new), say).
    ///
    /// A writer made by [`create`](ContainerWriter::create) or
    /// [`create_at`](ContainerWriter::create_at) has no writer to return
    /// once its file is committed: it fails with [`Error::Io`], committing
    /// nothing (use `finish`).
    pub fn finish_into_inner(self) -> Result<(W, WriteSummary)> {
        if self.commit.is_some() {
            return Err(self.io_error(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a file made by create is finished by finish, which has no writer to return",
            )));
        }
        match self.finish_parts()? {
            (Some(inner), summary) => Ok((inner, summary)),
            (None, _) => unreachable!("only a committed file has no inner writer"),
        }
    }

    /// Writes out the last block; commits a file and returns no writer,
    /// or returns the inner writer.
    fn finish_parts(mut self) -> Result<(Option<W>, WriteSummary)> {
        self.flush_block()?;
        let mut summary = WriteSummary {
            records: self.records,
            blocks: self.blocks,
            bytes: self.bytes,
            digest: None,
        };
        let Some(out) = self.out.take() else {
            return Err(self.io_error(earlier_failure()));
        };
        let mut inner = out
            .into_inner()
            .map_err(|e| self.io_error(e.into_error()))?;
        inner.flush().map_err(|e| self.io_error(e))?;
        match self.commit.take() {
            Some(commit) => {
                summary.digest = commit(inner).map_err(|e| {
                    Error::Storage(grist_tensor::StorageError::new(self.name.clone(), e))
                })?;
                Ok((None, summary))
            }
            None => Ok((Some(inner), summary)),
        }
    }
}

impl<W: Write> fmt::Debug for ContainerWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContainerWriter")
            .field("name", &self.name)
            .field("codec", &self.codec)
            .field("records", &self.records)
            .field("blocks", &self.blocks)
            .finish_non_exhaustive()
    }
}

/// A header ready to write.
struct HeaderBytes {
    bytes: Vec<u8>,
    sync: [u8; SYNC_LEN],
}

/// Checks the schema, the codec and the metadata, and encodes the header.
fn header_bytes(
    name: &Arc<str>,
    schema_json: &str,
    options: &WriterOptions,
) -> Result<HeaderBytes> {
    let bad = |reason: String| Error::BadHeader {
        file: name.clone(),
        reason,
    };
    crate::schema::parse_apache(schema_json).map_err(|e| bad(format!("schema: {e}")))?;
    options.codec.check_enabled(name)?;
    if let Some((key, _)) = options
        .metadata
        .iter()
        .find(|(k, _)| k.starts_with("avro."))
    {
        return Err(bad(format!(
            "metadata key {key:?} is reserved (avro.* keys belong to the specification)"
        )));
    }
    let sync = options.sync_marker.unwrap_or_else(rand::random);
    let mut bytes = MAGIC.to_vec();
    let entries = 2 + options.metadata.len();
    write_long(&mut bytes, entries as i64);
    let mut entry = |key: &str, value: &[u8]| {
        write_long(&mut bytes, key.len() as i64);
        bytes.extend_from_slice(key.as_bytes());
        write_long(&mut bytes, value.len() as i64);
        bytes.extend_from_slice(value);
    };
    entry("avro.schema", schema_json.as_bytes());
    entry("avro.codec", options.codec.name().as_bytes());
    for (key, value) in &options.metadata {
        entry(key, value);
    }
    write_long(&mut bytes, 0);
    bytes.extend_from_slice(&sync);
    Ok(HeaderBytes { bytes, sync })
}

fn earlier_failure() -> io::Error {
    io::Error::other("an earlier write to this Avro container writer failed")
}
