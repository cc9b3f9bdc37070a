//! [`RecordWriter`]: TFRecord frames, byte-identical to TensorFlow's
//! `TFRecordWriter`, written atomically (beside the target, fsync, rename).

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use grist_io::AtomicTarget;

use crate::compression::{CompressedWriter, Compression};
use crate::error::{Error, Result};
use crate::framing::{FOOTER_LEN, FRAME_OVERHEAD, frame_header, masked_crc32c};
use crate::index::{IndexEntry, index_path, write_index_line};

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
    pub fn with_compression(mut self, compression: Option<Compression>) -> Self {
        self.compression = compression;
        self
    }

    /// Whether to also write a DALI-compatible index file `<path>.idx`
    /// (uncompressed files only). By default, `false`.
    pub fn with_index(mut self, index: bool) -> Self {
        self.index = index;
        self
    }

    /// The size of the write buffer in front of the file, at most
    /// [`grist_tensor::MAX_IO_BUFFER`]. By default, 1 MiB.
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
}

/// Writes TFRecord frames to a file (atomically) or to any [`Write`].
///
/// For uncompressed output the bytes are identical to TensorFlow's
/// `tf.io.TFRecordWriter`. A file made by [`create`](RecordWriter::create)
/// is written to a hidden temporary sibling and only renamed to its name by
/// [`finish`](RecordWriter::finish), after an fsync; dropping the writer
/// unfinished, or a failed `finish`, removes the temporary file, so no
/// partial file ever appears under the final name.
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
pub struct RecordWriter<W: Write = File> {
    name: Arc<str>,
    out: Option<CompressedWriter<BufWriter<W>>>,
    index: Option<IndexSink>,
    /// The temporary file and final name, for [`RecordWriter::create`].
    target: Option<AtomicTarget>,
    records: u64,
    bytes: u64,
    failed: bool,
}

/// The index being written beside the data file.
struct IndexSink {
    out: BufWriter<File>,
    target: AtomicTarget,
}

impl RecordWriter<File> {
    /// Creates a TFRecord file at `path`, compressed as `options` say (or
    /// as its extension implies), writing through a temporary sibling that
    /// [`finish`](Self::finish) renames to `path`.
    ///
    /// Fails with [`Error::NeedsUncompressed`] when an index is asked for a
    /// compressed file, [`Error::CompressionDisabled`] for a codec not built
    /// in.
    pub fn create(path: impl AsRef<Path>, options: WriterOptions) -> Result<Self> {
        let path = path.as_ref();
        let name: Arc<str> = path.display().to_string().into();
        let compression = options
            .compression
            .unwrap_or_else(|| Compression::from_path(path));
        if options.index && compression != Compression::None {
            return Err(Error::NeedsUncompressed {
                file: name,
                compression: compression.name(),
            });
        }
        if !compression.is_enabled() {
            // Report the codec before touching the file system.
            compression.writer(io::sink())?;
        }
        let (file, target) = AtomicTarget::create(path).map_err(|source| Error::Io {
            file: name.clone(),
            source,
        })?;
        let index = if options.index {
            let idx = index_path(path);
            let (file, target) = AtomicTarget::create(&idx).map_err(|source| Error::Io {
                file: idx.display().to_string().into(),
                source,
            })?;
            Some(IndexSink {
                out: BufWriter::new(file),
                target,
            })
        } else {
            None
        };
        let out = compression.writer(BufWriter::with_capacity(options.buffer_size, file))?;
        Ok(RecordWriter {
            name,
            out: Some(out),
            index,
            target: Some(target),
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
            target: None,
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
        Error::Io {
            file: self.name.clone(),
            source,
        }
    }

    /// Ends the stream and, for a file, makes it durable and visible under
    /// its name (and its index under `<path>.idx`).
    pub fn finish(self) -> Result<WriteSummary> {
        self.finish_into_inner().map(|(_, summary)| summary)
    }

    /// Like [`finish`](Self::finish), also returning the inner writer (for
    /// a file: the renamed file, still open).
    pub fn finish_into_inner(mut self) -> Result<(W, WriteSummary)> {
        let summary = WriteSummary {
            records: self.records,
            bytes: self.bytes,
        };
        let out = match (self.out.take(), self.failed) {
            (Some(out), false) => out,
            _ => return Err(self.io_error(earlier_failure())),
        };
        let name = self.name.clone();
        let io_err = |source| Error::Io {
            file: name.clone(),
            source,
        };
        let buffered = out.finish().map_err(io_err)?;
        let mut inner = buffered.into_inner().map_err(|e| io_err(e.into_error()))?;
        inner.flush().map_err(io_err)?;
        if let Some(target) = self.target.take() {
            target.sync().map_err(io_err)?;
            let index = match self.index.take() {
                Some(IndexSink { out, target }) => {
                    let file = out
                        .into_inner()
                        .map_err(|e| path_error(target.dest(), e.into_error()))?;
                    drop(file);
                    target.sync().map_err(|e| path_error(target.dest(), e))?;
                    Some(target)
                }
                None => None,
            };
            target.commit().map_err(io_err)?;
            if let Some(target) = index {
                let dest = target.dest().to_path_buf();
                target.commit().map_err(|e| path_error(&dest, e))?;
            }
        }
        Ok((inner, summary))
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

fn path_error(path: &Path, source: io::Error) -> Error {
    Error::Io {
        file: path.display().to_string().into(),
        source,
    }
}

fn earlier_failure() -> io::Error {
    io::Error::other("an earlier write to this TFRecord writer failed")
}
