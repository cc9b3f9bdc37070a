//! [`RecordWriter`]: TFRecord frames, byte-identical to TensorFlow's
//! `TFRecordWriter`, written atomically through the storage layer (a
//! local file beside the target, fsync, rename; an object store's
//! multipart upload).

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use grist_io::{Address, Storage, Writer};

use crate::compression::{CompressedWriter, Compression};
use crate::error::{Error, Result};
use crate::framing::{FOOTER_LEN, FRAME_OVERHEAD, frame_header, masked_crc32c};
use crate::index::{IndexEntry, write_index_line};

/// Options of [`RecordWriter::create`].
///
/// ```
/// use grist_tfrecord::WriterOptions;
/// let options = WriterOptions::default().with_index(true);
/// # let _ = options;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriterOptions {
    compression: Option<Compression>,
    index: bool,
    buffer_size: usize,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            compression: None,
            index: false,
            buffer_size: 1 << 20,
        }
    }
}

impl WriterOptions {
    /// The compression to write; `None` derives it from the file's
    /// extension ([`Compression::from_path`]). By default, `None`.
    #[must_use]
    pub fn with_compression(mut self, compression: Option<Compression>) -> Self {
        self.compression = compression;
        self
    }

    /// Whether to also write a DALI-compatible index file `<path>.idx`
    /// (uncompressed files only). By default, `false`.
    #[must_use]
    pub fn with_index(mut self, index: bool) -> Self {
        self.index = index;
        self
    }

    /// How many bytes of frames are gathered before they are handed to
    /// the file (the storage writer's [`set_buffer_size`](Writer::set_buffer_size)),
    /// at most [`grist_tensor::MAX_IO_BUFFER`]. By default, 1 MiB.
    #[must_use]
    pub fn with_buffer_size(mut self, bytes: usize) -> Self {
        self.buffer_size = bytes.clamp(1, grist_tensor::MAX_IO_BUFFER);
        self
    }
}

/// What a finished [`RecordWriter`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteSummary {
    /// The number of records.
    pub records: u64,
    /// The number of framed bytes before compression (payloads plus 16
    /// bytes per record): the size of an uncompressed file.
    pub bytes: u64,
    /// The file's size and CRC-32C, computed while writing it (a file
    /// made by `create`/`create_at`; `None` for other writers).
    pub digest: Option<grist_io::Digest>,
}

/// Commits the inner writer of a file (and says its digest).
type Commit<W> = fn(W) -> grist_io::Result<Option<grist_io::Digest>>;

/// Writes TFRecord frames to a file or object (atomically) or to any
/// [`Write`].
///
/// For uncompressed output the bytes are identical to TensorFlow's
/// `tf.io.TFRecordWriter`. A file made by [`create`](RecordWriter::create)
/// or [`create_at`](RecordWriter::create_at) is written through the
/// storage layer ([`grist_io::Storage::create`]): locally to a hidden
/// temporary sibling, renamed to its name by
/// [`finish`](RecordWriter::finish) after an fsync; to an object store as
/// a multipart upload that `finish` completes. Dropping the writer
/// unfinished, or a failed `finish`, leaves nothing, so no partial file
/// ever appears under the final name.
///
/// ```
/// use grist_tfrecord::{RecordReader, RecordWriter, WriterOptions, ReaderOptions};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("out.tfrecord");
/// let mut w = RecordWriter::create(&path, WriterOptions::default().with_index(true))?;
/// w.write_record(b"first")?;
/// w.write_record(b"second")?;
/// let summary = w.finish()?;
/// assert_eq!((summary.records, summary.bytes), (2, 5 + 6 + 32));
///
/// let mut r = RecordReader::open(&path, ReaderOptions::default())?;
/// assert_eq!(r.next_record()?, Some(&b"first"[..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RecordWriter<W: Write = Writer> {
    name: Arc<str>,
    out: Option<CompressedWriter<BufWriter<W>>>,
    index: Option<IndexSink>,
    /// Makes the output visible, for [`RecordWriter::create_at`]
    /// ([`Writer::commit`]); `None` for a plain [`Write`].
    commit: Option<Commit<W>>,
    records: u64,
    bytes: u64,
    failed: bool,
}

/// The index being written beside the data file.
struct IndexSink {
    name: Arc<str>,
    out: BufWriter<Writer>,
}

impl RecordWriter {
    /// Creates a TFRecord file at `path`, compressed as `options` say (or
    /// as its extension implies), written through a temporary sibling that
    /// [`finish`](Self::finish) renames to `path` (see
    /// [`create_at`](Self::create_at)).
    pub fn create(path: impl AsRef<Path>, options: WriterOptions) -> Result<Self> {
        RecordWriter::create_at(&Storage::new(), &Address::from(path.as_ref()), options)
    }

    /// Creates a TFRecord file or object at `address` (a path, or an
    /// object store URL), compressed as `options` say (or as its name's
    /// extension implies), through `storage`: nothing appears under
    /// `address` (nor under `<address>.idx`) until
    /// [`finish`](Self::finish).
    ///
    /// Fails with [`Error::NeedsUncompressed`] when an index is asked for a
    /// compressed file, [`Error::CompressionDisabled`] for a codec not built
    /// in (both before touching the storage), and with [`Error::Storage`]
    /// when the storage refuses.
    ///
    /// ```
    /// use grist_io::{Address, Storage};
    /// use grist_tfrecord::{RecordWriter, WriterOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let address = Address::from(dir.path().join("out.tfrecord.gz"));
    /// let mut w = RecordWriter::create_at(&Storage::new(), &address, WriterOptions::default())?;
    /// w.write_record(b"gzipped")?;
    /// w.finish()?;
    /// assert!(dir.path().join("out.tfrecord.gz").is_file());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_at(storage: &Storage, address: &Address, options: WriterOptions) -> Result<Self> {
        let name = address.name().clone();
        let compression = options
            .compression
            .unwrap_or_else(|| Compression::from_path(Path::new(address.as_str())));
        if options.index && compression != Compression::None {
            return Err(Error::NeedsUncompressed {
                file: name,
                compression: compression.name(),
            });
        }
        if !compression.is_enabled() {
            // Report the codec before touching the storage.
            compression.writer(io::sink())?;
        }
        let mut file = storage
            .create(address)
            .map_err(|e| storage_error(&name, e))?;
        let index = if options.index {
            let idx = index_address(address);
            let out = storage
                .create(&idx)
                .map_err(|e| storage_error(idx.name(), e))?;
            Some(IndexSink {
                name: idx.name().clone(),
                out: BufWriter::new(out),
            })
        } else {
            None
        };
        // The storage's writer gathers the frames' pieces itself.
        file.set_buffer_size(options.buffer_size);
        let out = compression.writer(BufWriter::with_capacity(0, file))?;
        Ok(RecordWriter {
            name,
            out: Some(out),
            index,
            commit: Some(Writer::commit_with_digest),
            records: 0,
            bytes: 0,
            failed: false,
        })
    }
}

impl<W: Write> RecordWriter<W> {
    /// Writes uncompressed frames to `inner` (e.g. a `Vec<u8>`).
    pub fn new(inner: W) -> Self {
        RecordWriter::from_out(CompressedWriter::plain(BufWriter::new(inner)))
    }

    /// Writes frames compressed with `compression` to `inner`.
    pub fn with_compression(inner: W, compression: Compression) -> Result<Self> {
        Ok(RecordWriter::from_out(
            compression.writer(BufWriter::new(inner))?,
        ))
    }

    fn from_out(out: CompressedWriter<BufWriter<W>>) -> Self {
        RecordWriter {
            name: "".into(),
            out: Some(out),
            index: None,
            commit: None,
            records: 0,
            bytes: 0,
            failed: false,
        }
    }

    /// Appends one record.
    ///
    /// After a failed write the writer is unusable: later writes and
    /// `finish` fail too (and a file's temporary is removed).
    pub fn write_record(&mut self, payload: &[u8]) -> Result<()> {
        let result = self.write_frame(payload);
        if let Err(source) = result {
            self.failed = true;
            return Err(self.io_error(source));
        }
        Ok(())
    }

    fn write_frame(&mut self, payload: &[u8]) -> io::Result<()> {
        let out = match (&mut self.out, self.failed) {
            (Some(out), false) => out,
            _ => return Err(earlier_failure()),
        };
        let len = payload.len() as u64;
        out.write_all(&frame_header(len))?;
        out.write_all(payload)?;
        out.write_all(&masked_crc32c(payload).to_le_bytes()[..FOOTER_LEN])?;
        if let Some(index) = &mut self.index {
            let entry = IndexEntry {
                offset: self.bytes,
                len: len + FRAME_OVERHEAD as u64,
            };
            write_index_line(&mut index.out, entry)?;
        }
        self.records += 1;
        self.bytes += len + FRAME_OVERHEAD as u64;
        Ok(())
    }

    /// The number of records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The number of framed (uncompressed) bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn io_error(&self, source: io::Error) -> Error {
        io_error(&self.name, source)
    }

    /// Ends the stream and, for a file, makes it durable and visible under
    /// its name (and its index under `<path>.idx`).
    pub fn finish(self) -> Result<WriteSummary> {
        self.finish_parts().map(|(_, summary)| summary)
    }

    /// Like [`finish`](Self::finish), also returning the inner writer (the
    /// `Vec<u8>` of [`new`](Self::new), say).
    ///
    /// A writer made by [`create`](RecordWriter::create) or
    /// [`create_at`](RecordWriter::create_at) has no writer to return once
    /// its file is committed: it fails with [`Error::Io`], committing
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

    /// Ends the stream; commits a file (and its index) and returns no
    /// writer, or returns the inner writer.
    fn finish_parts(mut self) -> Result<(Option<W>, WriteSummary)> {
        let mut summary = WriteSummary {
            records: self.records,
            bytes: self.bytes,
            digest: None,
        };
        let out = match (self.out.take(), self.failed) {
            (Some(out), false) => out,
            _ => return Err(self.io_error(earlier_failure())),
        };
        let name = self.name.clone();
        let io_err = |source| io_error(&name, source);
        let buffered = out.finish().map_err(io_err)?;
        let mut inner = buffered.into_inner().map_err(|e| io_err(e.into_error()))?;
        inner.flush().map_err(io_err)?;
        let Some(commit) = self.commit.take() else {
            return Ok((Some(inner), summary));
        };
        let index = match self.index.take() {
            Some(IndexSink { name, out }) => {
                let out = out
                    .into_inner()
                    .map_err(|e| io_error(&name, e.into_error()))?;
                Some((name, out))
            }
            None => None,
        };
        // The data file first: an index never names a file that is not
        // there.
        summary.digest = commit(inner).map_err(|e| storage_error(&name, e))?;
        if let Some((name, out)) = index {
            out.commit().map_err(|e| storage_error(&name, e))?;
        }
        Ok((None, summary))
    }
}

impl<W: Write> fmt::Debug for RecordWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordWriter")
            .field("name", &self.name)
            .field("records", &self.records)
            .field("bytes", &self.bytes)
            .field("index", &self.index.is_some())
            .finish_non_exhaustive()
    }
}

/// The sibling `<address>.idx`.
pub(crate) fn index_address(address: &Address) -> Address {
    let name = address.file_name().unwrap_or_default();
    address.with_file_name(&format!("{name}.idx"))
}

/// A failure of the storage layer, naming `file`.
pub(crate) fn storage_error(file: &Arc<str>, e: grist_io::Error) -> Error {
    Error::Storage(grist_tensor::StorageError::new(file.clone(), e))
}

/// A write error: the storage layer's own (a streaming upload's part that
/// failed), or an I/O error of `file`.
fn io_error(file: &Arc<str>, source: io::Error) -> Error {
    match grist_tensor::StorageError::from_io(file, source) {
        Ok(e) => Error::Storage(e),
        Err(source) => Error::Io {
            file: file.clone(),
            source,
        },
    }
}

fn earlier_failure() -> io::Error {
    io::Error::other("an earlier write to this TFRecord writer failed")
}
