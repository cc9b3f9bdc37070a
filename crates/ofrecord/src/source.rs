//! OFRecord part files as chunks of whole records: [`OfStream`], one part
//! from any chunk boundary on (the [`ChunkStream`] of the format
//! contract), and [`OfRecordSource`], the parts of a dataset (or one
//! rank's share) one after the other.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read};
use std::ops::Range;
use std::sync::Arc;

use bytes::BytesMut;
use grist_io::{Address, Storage};
use grist_tensor::chunking::{FrameCutter, Frames, Window, frame_buffer};
use grist_tensor::{
    BoxError, Chunk, ChunkPos, ChunkStream, Deferred, Input, ReadOptions, RecordLayout,
    RecordSource, StorageError,
};

use crate::dataset::{Dataset, Segment, Shard};
use crate::error::{Error, Result};
use crate::framing::{Decoded, FrameDecoder, ReaderOptions, open_object, read_from};

/// Reads the records of a dataset's part files, in order, as [`Chunk`]s:
/// runs of whole records of about [`with_chunk_bytes`](Self::with_chunk_bytes)
/// bytes, never spanning two parts.
///
/// A chunk's `data` holds the records as stored (length prefixes
/// included) and its [`RecordLayout::Spans`] point at the payloads, so
/// records are never copied; `first_record` is the number of its first
/// record within its part. The records before a framing error are handed
/// out first; the error follows on the next call, and then the source
/// ends.
///
/// ```
/// use grist_ofrecord::{Dataset, DatasetWriter, OfRecordSource, PartNaming, Shard};
/// use grist_tensor::RecordSource;
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DatasetWriter::create(dir.path())?.with_records_per_part(10);
/// for i in 0..25u32 {
///     w.write_record(&i.to_le_bytes())?;
/// }
/// w.finish()?;
/// let ds = Dataset::open(dir.path(), 3, &PartNaming::new("part-", Some(5)))?;
///
/// // Rank 1 of 2 reads part 2 (OneFlow's split: parts [0, 2) and [2, 3)).
/// let mut source = OfRecordSource::sharded(&ds, Shard::new(1, 2))?.with_chunk_bytes(30);
/// let mut seen = Vec::new();
/// while let Some(chunk) = source.next_chunk()? {
///     for i in 0..chunk.record_count {
///         seen.push(u32::from_le_bytes(chunk.record(i).unwrap().try_into().unwrap()));
///     }
/// }
/// assert_eq!(seen, (20..25).collect::<Vec<_>>());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct OfRecordSource {
    segments: VecDeque<Segment>,
    options: ReaderOptions,
    chunk_bytes: usize,
    current: Option<OpenSegment>,
    done: bool,
}

/// The segment being read.
struct OpenSegment {
    name: Arc<str>,
    input: Box<dyn Read + Send>,
    frames: FrameDecoder,
    /// Bytes read and not yet handed out; starts at a record boundary.
    buf: BytesMut,
    eof: bool,
    /// Records left to read in this segment.
    left: u64,
    /// A framing or read error found after some good records, reported on
    /// the call after their chunk.
    pending: Option<Error>,
    chunk_index: u64,
}

impl OfRecordSource {
    /// Every record of `dataset`.
    pub fn new(dataset: &Dataset) -> Self {
        let segments = dataset
            .parts()
            .iter()
            .cloned()
            .map(Segment::whole)
            .collect();
        Self::from_segments(segments, *dataset.options())
    }

    /// The records of one rank's share of `dataset` (see
    /// [`Dataset::segments`]).
    pub fn sharded(dataset: &Dataset, shard: Shard) -> Result<Self> {
        Ok(Self::from_segments(
            dataset.segments(shard)?,
            *dataset.options(),
        ))
    }

    /// The records of `segments`, in order.
    pub fn from_segments(segments: Vec<Segment>, options: ReaderOptions) -> Self {
        OfRecordSource {
            segments: segments.into(),
            options,
            chunk_bytes: 4 << 20,
            current: None,
            done: false,
        }
    }

    /// The target size of a chunk in bytes. A chunk holds the records that
    /// fit (at least one: a larger record makes a chunk of its own). Values
    /// below 16 are raised to 16. By default, 4 MiB.
    #[must_use]
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes.max(16);
        self
    }
}

impl RecordSource for OfRecordSource {
    type Error = Error;

    fn next_chunk(&mut self) -> Result<Option<Chunk>> {
        while !self.done {
            let seg = match &mut self.current {
                Some(seg) => seg,
                None => {
                    let Some(next) = self.segments.pop_front() else {
                        self.done = true;
                        break;
                    };
                    match OpenSegment::open(&next, &self.options) {
                        Ok(seg) => self.current.insert(seg),
                        Err(e) => {
                            self.done = true;
                            return Err(e);
                        }
                    }
                }
            };
            match seg.next_chunk(self.chunk_bytes) {
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

impl fmt::Debug for OfRecordSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OfRecordSource")
            .field("segments_left", &self.segments.len())
            .field("chunk_bytes", &self.chunk_bytes)
            .field("current", &self.current.as_ref().map(|c| &c.name))
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl OpenSegment {
    fn open(seg: &Segment, options: &ReaderOptions) -> Result<Self> {
        let path = &seg.part.path;
        let object = open_object(&Storage::new(), &Address::from(path.as_path()))?;
        let size = object.size();
        // An offset past the end reads nothing: the framing then reports it.
        let input = read_from(&object, seg.offset.min(size))?;
        let name = object.name().clone();
        Ok(OpenSegment {
            frames: FrameDecoder::with_options(name.clone(), options)
                .with_remaining(size)
                .with_position(seg.first_record, seg.offset),
            name,
            input,
            buf: BytesMut::new(),
            eof: false,
            left: seg.records.unwrap_or(u64::MAX),
            pending: None,
            chunk_index: 0,
        })
    }

    /// The next chunk of this segment, `None` at its (clean) end.
    fn next_chunk(&mut self, chunk_bytes: usize) -> Result<Option<Chunk>> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let mut spans: Vec<Range<usize>> = Vec::new();
        let mut pos = 0;
        loop {
            if self.left == 0 || (pos >= chunk_bytes && !spans.is_empty()) {
                return Ok((!spans.is_empty()).then(|| self.emit(spans, pos)));
            }
            match self.frames.decode(&self.buf[pos..]) {
                Ok(Decoded::Frame(frame)) => {
                    spans.push(pos + frame.payload.start..pos + frame.payload.end);
                    pos += frame.len;
                    self.left -= 1;
                }
                Ok(Decoded::Incomplete { needed }) => {
                    let end = (pos as u64).saturating_add(needed);
                    if !spans.is_empty() && (self.eof || end > chunk_bytes as u64) {
                        return Ok(Some(self.emit(spans, pos)));
                    }
                    if self.eof {
                        self.frames.finish(&self.buf[pos..])?;
                        return Ok(None);
                    }
                    // Read at least the rest of this record (its length
                    // was checked against the bytes left in the file).
                    let short = end.saturating_sub(self.buf.len() as u64) as usize;
                    let step = chunk_bytes.clamp(64 << 10, grist_tensor::MAX_IO_BUFFER);
                    if let Err(e) = self.read_block(step.max(short)) {
                        if spans.is_empty() {
                            return Err(e);
                        }
                        self.pending = Some(e);
                        return Ok(Some(self.emit(spans, pos)));
                    }
                }
                // The decoder did not move: the error is reported on the
                // next call, after the good records.
                Err(e) if !spans.is_empty() => {
                    self.pending = Some(e);
                    return Ok(Some(self.emit(spans, pos)));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Appends up to `block` bytes from the file (fewer at its end).
    fn read_block(&mut self, block: usize) -> Result<()> {
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
                Err(source) => {
                    // The storage layer's own errors name their URL and
                    // bytes.
                    break Err(match StorageError::from_io(&self.name, source) {
                        Ok(e) => Error::Storage(e),
                        Err(source) => Error::Io {
                            file: self.name.clone(),
                            source,
                        },
                    });
                }
            }
        };
        self.buf.truncate(filled);
        result
    }

    /// Hands out the first `len` bytes of the buffer as a chunk.
    fn emit(&mut self, spans: Vec<Range<usize>>, len: usize) -> Chunk {
        let record_count = spans.len();
        let offset = self.frames.offset() - len as u64;
        let chunk = Chunk {
            file: self.name.clone(),
            index: self.chunk_index,
            first_record: self.frames.record_index() - record_count as u64,
            record_count,
            stored_bytes: len as u64,
            compressed: false,
            data: self.buf.split_to(len).freeze(),
            layout: RecordLayout::Spans(spans.into()),
            offset,
            deferred: Deferred::NONE,
            header: None,
        };
        self.chunk_index += 1;
        chunk
    }
}

impl Frames for FrameDecoder {
    const OVERHEAD: u64 = 8;

    fn frame(
        &mut self,
        data: &[u8],
    ) -> std::result::Result<std::result::Result<(Range<usize>, usize), u64>, BoxError> {
        Ok(match self.decode(data)? {
            Decoded::Frame(f) => Ok((f.payload, f.len)),
            Decoded::Incomplete { needed } => Err(needed),
        })
    }

    fn finish(&self, rest: &[u8]) -> std::result::Result<(), BoxError> {
        Ok(FrameDecoder::finish(self, rest)?)
    }

    fn record_index(&self) -> u64 {
        FrameDecoder::record_index(self)
    }

    fn read_error(&self, source: io::Error) -> BoxError {
        Box::new(
            match grist_tensor::StorageError::from_io(self.file(), source) {
                Ok(e) => Error::Storage(e),
                Err(source) => Error::Io {
                    file: self.file().clone(),
                    source,
                },
            },
        )
    }
}

/// An OFRecord part file as chunks of whole records, cut as TFRecord files
/// are: each chunk is the longest run of records that fits in the chunk
/// size (at least one), so reading from any chunk boundary cuts the rest
/// of the part the same way. A chunk's `data` holds the records as stored
/// (length prefixes included) and its [`RecordLayout::Spans`] point at the
/// payloads.
pub struct OfStream {
    cut: FrameCutter,
    input: Box<dyn Read + Send>,
    frames: FrameDecoder,
    index: u64,
}

impl fmt::Debug for OfStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OfStream")
            .field("file", self.frames.file())
            .field("record", &self.frames.record_index())
            .finish_non_exhaustive()
    }
}

impl OfStream {
    /// Part `input` read from chunk boundary `pos`, with the framing
    /// options `framing` (zero-length records) and `options`' limits.
    pub fn open(
        input: &Input,
        pos: ChunkPos,
        options: &ReadOptions,
        framing: &ReaderOptions,
    ) -> Result<Self> {
        let name = input.name().clone();
        let size = input.size()?;
        let (window, reader): (Window, Box<dyn Read + Send>) =
            match Window::mapped(options, input, pos.offset)? {
                Some(w) => (w, Box::new(io::empty())),
                None => (
                    Window::reading(options, frame_buffer(options)),
                    input.reader_at(pos.offset)?,
                ),
            };
        let framing = framing.with_limits(options.limits);
        Ok(OfStream {
            frames: FrameDecoder::with_options(name, &framing)
                .with_remaining(size)
                .with_position(pos.record, pos.offset),
            cut: FrameCutter::new(window, options),
            input: reader,
            index: pos.index,
        })
    }

    fn pos(&self) -> ChunkPos {
        ChunkPos {
            index: self.index,
            record: self.frames.record_index(),
            offset: self.frames.offset(),
        }
    }

    /// The next chunk and where the one after it starts; `None` at the
    /// end of the part.
    pub fn read_chunk(&mut self) -> Result<Option<(Chunk, ChunkPos)>> {
        let start = self.pos();
        let cut = self
            .cut
            .frames(&mut self.frames, &mut self.input)
            .map_err(own)?;
        let Some((spans, len)) = cut else {
            return Ok(None);
        };
        let chunk = Chunk {
            file: self.frames.file().clone(),
            index: self.index,
            first_record: start.record,
            record_count: spans.len(),
            stored_bytes: len as u64,
            compressed: false,
            data: self.cut.window.take(len),
            layout: RecordLayout::Spans(spans.into()),
            offset: start.offset,
            deferred: Deferred::NONE,
            header: None,
        };
        // Saturating: a restored position may hold any number.
        self.index = self.index.saturating_add(1);
        Ok(Some((chunk, self.pos())))
    }
}

impl ChunkStream for OfStream {
    fn next_chunk(&mut self) -> std::result::Result<Option<(Chunk, ChunkPos)>, BoxError> {
        Ok(self.read_chunk()?)
    }
}

/// A frame cutter's error, which the frame decoder made: this crate's.
fn own(e: BoxError) -> Error {
    match e.downcast::<Error>() {
        Ok(e) => *e,
        Err(other) => Error::Io {
            file: other.location().map(|l| l.file.clone()).unwrap_or_default(),
            source: io::Error::other(other.to_string()),
        },
    }
}
