//! [`TfRecordSource`]: TFRecord files as a [`RecordSource`] of chunks of
//! whole frames.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::BytesMut;
use grist_tensor::{Chunk, RecordLayout, RecordSource};

use crate::compression::{CompressedReader, Compression};
use crate::error::{Error, Result};
use crate::framing::{Decoded, FRAME_OVERHEAD, FrameDecoder, ReaderOptions, read_error};

/// Reads TFRecord files, one after the other, as [`Chunk`]s: runs of whole
/// frames of about [`with_chunk_bytes`](Self::with_chunk_bytes) bytes.
///
/// A chunk's `data` holds the frames as read (decompressed), headers and
/// footers included, and its [`RecordLayout::Spans`] point at the payloads,
/// so records are never copied. Both CRCs of every frame are checked
/// before its chunk is handed out (unless the options turn checks off).
/// The records before a damaged frame are handed out first; the error
/// follows on the next call, and then the source ends.
///
/// ```
/// use grist_tensor::RecordSource;
/// use grist_tfrecord::{RecordWriter, TfRecordSource};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("a.tfrecord");
/// let mut w = RecordWriter::create(&path, Default::default())?;
/// for i in 0..100u32 {
///     w.write_record(&i.to_le_bytes())?;
/// }
/// w.finish()?;
///
/// let mut source = TfRecordSource::new([&path]).with_chunk_bytes(400);
/// let mut seen = 0;
/// while let Some(chunk) = source.next_chunk()? {
///     assert_eq!(chunk.first_record, seen);
///     for i in 0..chunk.record_count {
///         assert_eq!(chunk.record(i), Some(&(seen as u32).to_le_bytes()[..]));
///         seen += 1;
///     }
/// }
/// assert_eq!(seen, 100);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TfRecordSource {
    files: VecDeque<PathBuf>,
    options: ReaderOptions,
    chunk_bytes: usize,
    current: Option<OpenFile>,
    done: bool,
}

/// The file being read.
struct OpenFile {
    name: Arc<str>,
    input: CompressedReader<CountingReader<File>>,
    compressed: bool,
    decoder: FrameDecoder,
    /// Bytes read but not yet handed out (starts at a record boundary).
    buf: BytesMut,
    /// The previous buffer: its memory is reused once the chunks cut from
    /// it are dropped, so steady reading allocates (and page-faults) no
    /// fresh memory.
    spare: BytesMut,
    eof: bool,
    /// A read error that came after some good records, reported on the
    /// call after those records' chunk.
    pending: Option<Error>,
    chunk_index: u64,
    /// Stored bytes counted at the last chunk handed out.
    stored_mark: u64,
}

impl TfRecordSource {
    /// A source over `files`, read in order, with default options.
    pub fn new<P: Into<PathBuf>>(files: impl IntoIterator<Item = P>) -> Self {
        TfRecordSource {
            files: files.into_iter().map(Into::into).collect(),
            options: ReaderOptions::default(),
            chunk_bytes: 4 << 20,
            current: None,
            done: false,
        }
    }

    /// The reader options (compression, CRC checks, limits). By default,
    /// [`ReaderOptions::default`]: compression from each file's extension,
    /// CRCs checked.
    pub fn with_options(mut self, options: ReaderOptions) -> Self {
        self.options = options;
        self
    }

    /// The target size of a chunk, in decompressed bytes. A chunk holds the
    /// frames that fit (at least one: a larger frame makes a chunk of its
    /// own). Values below 16 are raised to 16. By default, 4 MiB.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes.max(16);
        self
    }

    fn open_next(&mut self) -> Result<Option<OpenFile>> {
        let Some(path) = self.files.pop_front() else {
            return Ok(None);
        };
        OpenFile::open(&path, &self.options).map(Some)
    }
}

impl RecordSource for TfRecordSource {
    type Error = Error;

    fn next_chunk(&mut self) -> Result<Option<Chunk>> {
        while !self.done {
            let file = match &mut self.current {
                Some(file) => file,
                None => match self.open_next() {
                    Ok(Some(file)) => self.current.insert(file),
                    Ok(None) => {
                        self.done = true;
                        break;
                    }
                    Err(e) => {
                        self.done = true;
                        return Err(e);
                    }
                },
            };
            match file.next_chunk(self.chunk_bytes) {
                Ok(Some(chunk)) => return Ok(Some(chunk)),
                Ok(None) => self.current = None,
                Err(e) => {
                    self.done = true;
                    self.current = None;
                    return Err(e);
                }
            }
        }
        Ok(None)
    }
}

impl fmt::Debug for TfRecordSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TfRecordSource")
            .field("files_left", &self.files.len())
            .field("chunk_bytes", &self.chunk_bytes)
            .field("current", &self.current.as_ref().map(|c| &c.name))
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl OpenFile {
    fn open(path: &Path, options: &ReaderOptions) -> Result<Self> {
        let name: Arc<str> = path.display().to_string().into();
        let file = File::open(path).map_err(|source| Error::Io {
            file: name.clone(),
            source,
        })?;
        let compression = options.compression_for(path);
        let input = compression.reader(CountingReader {
            inner: file,
            count: 0,
        })?;
        Ok(OpenFile {
            decoder: FrameDecoder::with_options(name.clone(), options),
            name,
            input,
            compressed: compression != Compression::None,
            buf: BytesMut::new(),
            spare: BytesMut::new(),
            eof: false,
            pending: None,
            chunk_index: 0,
            stored_mark: 0,
        })
    }

    /// The next chunk of this file, `None` at its (clean) end.
    fn next_chunk(&mut self, chunk_bytes: usize) -> Result<Option<Chunk>> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let mut spans: Vec<Range<usize>> = Vec::new();
        let mut pos = 0;
        loop {
            // Take the whole frames already buffered, up to the chunk size.
            let needed = loop {
                if pos >= chunk_bytes {
                    return Ok(Some(self.emit(spans, pos)));
                }
                if !spans.is_empty() && !self.fits(pos, chunk_bytes) {
                    return Ok(Some(self.emit(spans, pos)));
                }
                match self.decoder.decode(&self.buf[pos..]) {
                    Ok(Decoded::Frame(frame)) => {
                        spans.push(pos + frame.payload.start..pos + frame.payload.end);
                        pos += frame.len;
                    }
                    Ok(Decoded::Incomplete { needed }) => break needed,
                    // The decoder did not advance: the error comes again on
                    // the next call, after the good records.
                    Err(_) if !spans.is_empty() => return Ok(Some(self.emit(spans, pos))),
                    Err(e) => return Err(e),
                }
            };
            let next_end = (pos as u64).saturating_add(needed);
            if !spans.is_empty() && (self.eof || next_end > chunk_bytes as u64) {
                // The next frame does not fit: hand out what we have.
                return Ok(Some(self.emit(spans, pos)));
            }
            if self.eof {
                self.decoder.finish(self.buf.len() - pos)?;
                return Ok(None);
            }
            if let Err(e) = self.read_block(chunk_bytes.min(grist_tensor::MAX_IO_BUFFER)) {
                if spans.is_empty() {
                    return Err(e);
                }
                self.pending = Some(e);
                return Ok(Some(self.emit(spans, pos)));
            }
        }
    }

    /// Whether the frame at `pos` (whose header may be damaged: this is
    /// only a size hint) ends within `chunk_bytes`; true when its header is
    /// not buffered yet.
    fn fits(&self, pos: usize, chunk_bytes: usize) -> bool {
        match self.buf.get(pos..).and_then(|b| b.first_chunk::<8>()) {
            Some(len) => {
                let frame = u64::from_le_bytes(*len).saturating_add(FRAME_OVERHEAD as u64);
                (pos as u64).saturating_add(frame) <= chunk_bytes as u64
            }
            None => true,
        }
    }

    /// Appends up to `block` bytes from the input (fewer at its end): the
    /// buffer grows only by what was asked of the input in one step, never
    /// by a length read from the data.
    fn read_block(&mut self, block: usize) -> Result<()> {
        self.make_room(block);
        let old = self.buf.len();
        self.buf.resize(old + block, 0);
        let mut filled = old;
        let result = loop {
            if filled == self.buf.len() {
                break Ok(());
            }
            match self.input.read(&mut self.buf[filled..]) {
                Ok(0) => {
                    self.eof = true;
                    break Ok(());
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    break Err(read_error(
                        &self.name,
                        self.decoder.record_index(),
                        self.input.compression(),
                        e,
                    ));
                }
            }
        };
        self.buf.truncate(filled);
        result
    }

    /// Makes room for `block` more bytes in `buf`: in place when the chunks
    /// cut from it are gone, else in the spare buffer when its chunks are
    /// gone, else in a new buffer (and the current one becomes the spare).
    fn make_room(&mut self, block: usize) {
        if self.buf.capacity() - self.buf.len() >= block || self.buf.try_reclaim(block) {
            return;
        }
        let want = self.buf.len() + block;
        let next = if self.spare.try_reclaim(want) {
            std::mem::take(&mut self.spare)
        } else {
            // Room for two blocks, so that this buffer, once reclaimed, also
            // fits a block plus the partial frame left over.
            BytesMut::with_capacity(want.max(2 * block))
        };
        let mut old = std::mem::replace(&mut self.buf, next);
        self.buf.extend_from_slice(&old);
        old.clear();
        self.spare = old;
    }

    /// Hands out the first `len` bytes of the buffer as a chunk.
    fn emit(&mut self, spans: Vec<Range<usize>>, len: usize) -> Chunk {
        let data = self.buf.split_to(len).freeze();
        let record_count = spans.len();
        let stored_bytes = if self.compressed {
            let count = self.input.get_ref().count;
            let stored = count - self.stored_mark;
            self.stored_mark = count;
            stored
        } else {
            len as u64
        };
        let chunk = Chunk {
            file: self.name.clone(),
            index: self.chunk_index,
            first_record: self.decoder.record_index() - record_count as u64,
            record_count,
            stored_bytes,
            compressed: self.compressed,
            data,
            layout: RecordLayout::Spans(spans.into()),
        };
        self.chunk_index += 1;
        chunk
    }
}

/// Counts the bytes read from the file, to attribute stored (compressed)
/// bytes to chunks.
struct CountingReader<R> {
    inner: R,
    count: u64,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}
