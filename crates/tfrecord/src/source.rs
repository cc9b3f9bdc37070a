//! TFRecord files as chunks of whole frames: [`TfStream`], one file from
//! any chunk boundary on (the [`ChunkStream`] of the format contract), and
//! [`TfRecordSource`], files one after the other.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read};
use std::ops::Range;
use std::path::PathBuf;

use grist_tensor::chunking::{FrameCutter, Frames, Window, frame_buffer};
use grist_tensor::{
    BoxError, Chunk, ChunkPos, ChunkStream, Deferred, Input, ReadOptions, RecordLayout,
    RecordSource,
};

use crate::compression::{CompressedReader, Compression};
use crate::error::{Error, Result};
use crate::framing::{Decoded, FrameDecoder, ReaderOptions, read_error};

/// Counts the bytes read from the file, to attribute stored (compressed)
/// bytes to chunks.
struct Counting<R> {
    inner: R,
    count: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

/// The frame decoder of a stream and the compression that its read errors
/// are classified by.
struct TfFrames {
    decoder: FrameDecoder,
    compression: Compression,
}

impl Frames for TfFrames {
    const OVERHEAD: u64 = 16;

    fn frame(
        &mut self,
        data: &[u8],
    ) -> std::result::Result<std::result::Result<(Range<usize>, usize), u64>, BoxError> {
        Ok(match self.decoder.decode(data)? {
            Decoded::Frame(f) => Ok((f.payload, f.len)),
            Decoded::Incomplete { needed } => Err(needed),
        })
    }

    fn finish(&self, rest: &[u8]) -> std::result::Result<(), BoxError> {
        Ok(self.decoder.finish(rest.len())?)
    }

    fn record_index(&self) -> u64 {
        self.decoder.record_index()
    }

    fn read_error(&self, e: io::Error) -> BoxError {
        Box::new(read_error(
            self.decoder.file(),
            self.decoder.record_index(),
            self.compression,
            e,
        ))
    }
}

/// A TFRecord file as chunks of whole frames: each chunk is the longest
/// run of frames that fits in the chunk size (at least one), so the cut
/// depends only on the frames, and reading from any chunk boundary cuts
/// the rest of the file the same way.
///
/// A chunk's `data` holds the frames as read (decompressed), headers and
/// footers included, and its [`RecordLayout::Spans`] point at the payloads,
/// so records are never copied. Both CRCs of every frame are checked before
/// its chunk is handed out, unless the options defer the data CRCs to the
/// decoding threads ([`Deferred::verify`]; the length CRCs, which the
/// framing depends on, are always checked here). Compressed files are read
/// (and inflated) from their start; a position inside one is reached by
/// inflating and dropping the bytes before it.
pub struct TfStream {
    cut: FrameCutter,
    input: CompressedReader<Counting<Box<dyn Read + Send>>>,
    compressed: bool,
    frames: TfFrames,
    index: u64,
    stored_mark: u64,
    options: ReadOptions,
}

impl fmt::Debug for TfStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TfStream")
            .field("file", self.frames.decoder.file())
            .field("record", &self.frames.decoder.record_index())
            .finish_non_exhaustive()
    }
}

impl TfStream {
    /// `input` (with `compression`) read from chunk boundary `pos`.
    pub fn open(
        input: &Input,
        pos: ChunkPos,
        options: &ReadOptions,
        compression: Compression,
    ) -> Result<Self> {
        let name = input.name().clone();
        let compressed = compression != Compression::None;
        // Compressed files are read (and inflated) from their start.
        let start = if compressed { 0 } else { pos.offset };
        let (window, raw): (Window, Box<dyn Read + Send>) = match (!compressed)
            .then(|| Window::mapped(options, input, start))
            .transpose()?
            .flatten()
        {
            Some(w) => (w, Box::new(io::empty())),
            None => (
                Window::reading(options, frame_buffer(options)),
                input.reader_at(start)?,
            ),
        };
        let mut reader = compression.reader(Counting {
            inner: raw,
            count: 0,
        })?;
        if compressed && pos.offset > 0 {
            // No seeking in a compressed stream: inflate and drop the
            // bytes before the chunk (framing and parsing are skipped).
            let skipped = io::copy(&mut (&mut reader).take(pos.offset), &mut io::sink())
                .map_err(|e| read_error(&name, pos.record, compression, e))?;
            if skipped < pos.offset {
                return Err(read_error(
                    &name,
                    pos.record,
                    compression,
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the stream ends before byte {}", pos.offset),
                    ),
                ));
            }
        }
        // Bytes read before the chunk (the gzip header, read at once, or
        // the stream skipped to a resume point) count for no chunk; from
        // the file's start they count for the first.
        let stored_mark = if pos.offset > 0 {
            reader.get_ref().count
        } else {
            0
        };
        let tf = ReaderOptions::default()
            .with_check_crc(options.check_crc)
            .with_limits(options.limits);
        Ok(TfStream {
            frames: TfFrames {
                decoder: FrameDecoder::with_options(name, &tf)
                    .with_position(pos.record, pos.offset),
                compression,
            },
            cut: FrameCutter::new(window, options),
            input: reader,
            compressed,
            index: pos.index,
            stored_mark,
            options: options.clone(),
        })
    }

    fn pos(&self) -> ChunkPos {
        ChunkPos {
            index: self.index,
            record: self.frames.decoder.record_index(),
            offset: self.frames.decoder.offset(),
        }
    }

    /// The next chunk and where the one after it starts; `None` at the
    /// end of the file.
    pub fn read_chunk(&mut self) -> Result<Option<(Chunk, ChunkPos)>> {
        let start = self.pos();
        // Data CRCs left to the decoding threads, when the options say so.
        let defer = self.options.defers_checks();
        self.frames.decoder.set_data_check(!defer);
        let cut = self
            .cut
            .frames(&mut self.frames, &mut self.input)
            .map_err(own)?;
        let Some((spans, len)) = cut else {
            return Ok(None);
        };
        let data = self.cut.window.take(len);
        let stored_bytes = if self.compressed {
            let count = self.input.get_ref().count;
            let stored = count - self.stored_mark;
            self.stored_mark = count;
            stored
        } else {
            len as u64
        };
        let chunk = Chunk {
            file: self.frames.decoder.file().clone(),
            index: self.index,
            first_record: start.record,
            record_count: spans.len(),
            stored_bytes,
            compressed: self.compressed,
            data,
            layout: RecordLayout::Spans(spans.into()),
            offset: start.offset,
            deferred: if defer {
                Deferred::VERIFY
            } else {
                Deferred::NONE
            },
            header: None,
        };
        // Saturating: a restored position may hold any number.
        self.index = self.index.saturating_add(1);
        Ok(Some((chunk, self.pos())))
    }
}

impl ChunkStream for TfStream {
    fn next_chunk(&mut self) -> Result<Option<(Chunk, ChunkPos)>, BoxError> {
        Ok(self.read_chunk()?)
    }
}

/// A frame cutter's error, which [`TfFrames`] made: this crate's.
fn own(e: BoxError) -> Error {
    match e.downcast::<Error>() {
        Ok(e) => *e,
        Err(other) => Error::Io {
            file: other.location().map(|l| l.file.clone()).unwrap_or_default(),
            source: io::Error::other(other.to_string()),
        },
    }
}

/// Reads TFRecord files, one after the other, as [`Chunk`]s: runs of whole
/// frames of about [`with_chunk_bytes`](Self::with_chunk_bytes) bytes (see
/// [`TfStream`]).
///
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
    current: Option<TfStream>,
    done: bool,
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
    #[must_use]
    pub fn with_options(mut self, options: ReaderOptions) -> Self {
        self.options = options;
        self
    }

    /// The target size of a chunk, in decompressed bytes. A chunk holds the
    /// frames that fit (at least one: a larger frame makes a chunk of its
    /// own). Values below 16 are raised to 16. By default, 4 MiB.
    #[must_use]
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes.max(16);
        self
    }

    fn open_next(&mut self) -> Result<Option<TfStream>> {
        let Some(path) = self.files.pop_front() else {
            return Ok(None);
        };
        let read = ReadOptions::default()
            .with_chunk_bytes(self.chunk_bytes)
            .with_check_crc(self.options.check_crc)
            .with_limits(self.options.limits);
        let compression = self.options.compression_for(&path);
        TfStream::open(&Input::local(path), ChunkPos::default(), &read, compression).map(Some)
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
            match file.read_chunk() {
                Ok(Some((chunk, _))) => return Ok(Some(chunk)),
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
            .field("current", &self.current)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
