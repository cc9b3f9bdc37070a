//! Sequential reading: each file as a run of chunks that can start at any
//! chunk boundary (so a saved state resumes there without reading what
//! came before), and the epoch's files interleaved `cycle_length` at a
//! time into one stream of chunks.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use grist_avro_tensor::{BlockDecoder, Codec, Header};
use grist_tensor::pool::BufferPool;
use grist_tensor::{Chunk, Location, RecordLayout};
use grist_tfrecord::{CompressedReader, Compression, Decoded, FrameDecoder};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::files::{Format, Input};
use crate::options::ReadOptions;

/// Where a chunk starts in its file: its number, the number of its first
/// record, and its byte offset (in the decompressed stream for compressed
/// TFRecord files; 0 for an Avro file's first block means "after the
/// header").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct ChunkPos {
    pub(crate) index: u64,
    pub(crate) record: u64,
    pub(crate) offset: u64,
}

/// A chunk as read, with where it starts and where the next one starts.
#[derive(Clone, Debug)]
pub(crate) struct RawChunk {
    pub(crate) chunk: Chunk,
    pub(crate) pos: ChunkPos,
    pub(crate) next: ChunkPos,
    /// The codec its data is still compressed with (Avro blocks are
    /// decompressed by the parse thread that first decodes them).
    pub(crate) inflate: Option<Codec>,
    /// The file's header (Avro: its writer schema).
    pub(crate) header: Option<Arc<Header>>,
    /// Its TFRecord data CRCs are still to be checked (by the parse
    /// threads).
    pub(crate) crc_deferred: bool,
}

/// One file read as chunks.
#[derive(Debug)]
pub(crate) enum Chunker {
    Tfrecord(Box<TfChunker>),
    Avro(Box<AvroChunker>),
    Ofrecord(Box<OfChunker>),
}

impl Chunker {
    /// Opens `input` at chunk boundary `pos`.
    pub(crate) fn open(options: &ReadOptions, input: &Input, pos: ChunkPos) -> Result<Self> {
        Ok(match options.format {
            Format::Tfrecord => Chunker::Tfrecord(Box::new(TfChunker::open(options, input, pos)?)),
            Format::Avro => Chunker::Avro(Box::new(AvroChunker::open(options, input, pos)?)),
            Format::Ofrecord => Chunker::Ofrecord(Box::new(OfChunker::open(options, input, pos)?)),
            Format::Ffrecord => {
                return Err(Error::Unsupported {
                    format: Format::Ffrecord.name(),
                    what: "FFRecord files are read by sample number, not as a stream".into(),
                });
            }
        })
    }

    /// The next chunk, `None` at the end of the file. After an error the
    /// chunker must not be used again.
    pub(crate) fn next(&mut self) -> Result<Option<RawChunk>> {
        match self {
            Chunker::Tfrecord(c) => c.next(),
            Chunker::Avro(c) => c.next(),
            Chunker::Ofrecord(c) => c.next(),
        }
    }
}

/// Counts the bytes read from the file, to attribute stored (compressed)
/// bytes to chunks.
#[derive(Debug)]
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

/// The read buffer of a file: bytes read and not handed out yet.
///
/// With a pool ([`Window::sharing`]), chunks are slices of the buffer they
/// were read into: the first chunk cut from a read turns the buffer into
/// shared bytes, the chunks after it slice those, and the next read goes
/// into a buffer from the pool, with the start of the next frame or block
/// (the bytes left) copied into it. A buffer goes back to the pool when
/// its last chunk is dropped. Copying every chunk out of one reused
/// buffer cost the prefetch thread a memmove of every byte read and fresh
/// memory for each chunk (7% of the CPU samples of a TFRecord run, 16% of
/// an Avro one).
///
/// TFRecord and OFRecord chunkers read about a chunk at a time, so each
/// chunk holds one buffer of its own. Avro blocks are smaller than a
/// read: a buffer holds many, and shuffled blocks, drained at random,
/// would keep it until the last one goes; so they share it only when the
/// loader does not shuffle, and are copied out of one reused buffer
/// (zeroed only when it grows) when it does.
///
/// Or, with [`grist_tensor::Access::mmap`], the rest of the file as a
/// memory map: then there is nothing to read, and chunks are slices of
/// the map.
#[derive(Debug, Default)]
struct Window {
    /// Always fully initialized; `start..end` holds the bytes (unless
    /// `shared`).
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The mapped file from the chunker's start (then `buf` is unused and
    /// `start` indexes this).
    mapped: Option<Bytes>,
    /// The last buffer read into, since a chunk was cut from it: `start`
    /// and `end` index this, and `buf` is empty.
    shared: Option<Bytes>,
    /// Where buffers come from when chunks share them, and how long the
    /// buffers taken from there are.
    pool: Option<(Arc<BufferPool>, usize)>,
}

impl Window {
    /// The window of `file` read from byte `start` on: an empty read
    /// buffer (`file` is then positioned at `start`), or the mapped file
    /// from `start` (nothing when `start` is past its end: reading it
    /// would give nothing either).
    fn open(options: &ReadOptions, input: &Input, file: &mut File, start: u64) -> io::Result<Self> {
        match options.maps.map(options.access, &input.path, file)? {
            Some(map) => {
                let from = usize::try_from(start).map_or(map.len(), |s| s.min(map.len()));
                Ok(Window {
                    mapped: Some(map.slice(from..)),
                    ..Window::default()
                })
            }
            None => {
                file.seek(SeekFrom::Start(start))?;
                Ok(Window::default())
            }
        }
    }

    /// This window, its chunks sharing the buffers they were read into,
    /// of `len` bytes, from `options.buffers` (not for a mapped window,
    /// whose chunks are slices of the map).
    fn sharing(mut self, options: &ReadOptions, len: usize) -> Self {
        if self.mapped.is_none() {
            self.pool = Some((options.buffers.clone(), len));
        }
        self
    }

    fn data(&self) -> &[u8] {
        match (&self.mapped, &self.shared) {
            (Some(map), _) => &map[self.start..],
            (None, Some(shared)) => &shared[self.start..self.end],
            (None, None) => &self.buf[self.start..self.end],
        }
    }

    /// Reads up to `block` more bytes (fewer at the end of the input,
    /// setting `eof`): the buffer grows by what is asked of the input in
    /// one step, never by a length read from the data. A mapped window
    /// holds all there is: `eof` at once.
    fn fill(&mut self, input: &mut impl Read, block: usize, eof: &mut bool) -> io::Result<()> {
        if self.mapped.is_some() {
            *eof = true;
            return Ok(());
        }
        if let Some((pool, len)) = &self.pool {
            if self.buf.is_empty() {
                // A fresh buffer, with the bytes left from the last one.
                let rest = self.end - self.start;
                let want = (*len).max(rest + block);
                let mut next = pool.take(want);
                if next.len() > 2 * want {
                    // Grown for a long frame once: not pinned by short
                    // chunks (dropped, so its memory goes).
                    next = vec![0; want];
                }
                if let Some(shared) = self.shared.take() {
                    next[..rest].copy_from_slice(&shared[self.start..self.end]);
                }
                self.buf = next;
                self.start = 0;
                self.end = rest;
            }
        }
        if self.buf.len() - self.end < block {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buf.len() - self.end < block {
                self.buf.resize(self.end + block, 0);
            }
        }
        let stop = self.end + block;
        while self.end < stop {
            match input.read(&mut self.buf[self.end..stop]) {
                Ok(0) => {
                    *eof = true;
                    break;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The first `n` bytes, consumed: a slice of the map or of the shared
    /// buffer, or a copy.
    fn take(&mut self, n: usize) -> Bytes {
        let end = self.start + n;
        let bytes = match (&self.mapped, &self.pool) {
            (Some(map), _) => map.slice(self.start..end),
            (None, Some((pool, _))) => {
                let shared = match &self.shared {
                    Some(shared) => shared,
                    None => self.shared.insert(BufferPool::share(
                        pool,
                        std::mem::take(&mut self.buf),
                        self.end,
                    )),
                };
                shared.slice(self.start..end)
            }
            (None, None) => Bytes::copy_from_slice(&self.buf[self.start..end]),
        };
        self.start = end;
        bytes
    }
}

/// Bytes a chunker reads beyond the chunk size: room for the next frame's
/// length, so that the chunk's end is known without another read.
const FRAME_HEAD_ROOM: usize = 16;

/// The fewest bytes a chunker reads at once.
const MIN_FILL: usize = 64 << 10;

/// The buffers of a frame chunker: a chunk (at most a read) and
/// [`FRAME_HEAD_ROOM`].
fn frame_buffer(options: &ReadOptions) -> usize {
    options.chunk_bytes.min(options.read_size()) + FRAME_HEAD_ROOM
}

/// How much a chunker whose window holds `window` bytes reads when a frame
/// (or Avro block) is incomplete with `missing` bytes not there: up to
/// `chunk_bytes` (a chunk, or for Avro a read) and [`FRAME_HEAD_ROOM`] in
/// the window (so that the chunk takes all but the start of the next
/// frame), or the rest of a longer frame; at least
/// [`MIN_FILL`], and at most `read_size` (at least [`MIN_FILL`]) however
/// long the chunk or the frame (memory grows only as bytes arrive).
fn fill_size(window: usize, chunk_bytes: usize, missing: u64, read_size: usize) -> usize {
    let to_chunk = chunk_bytes
        .saturating_add(FRAME_HEAD_ROOM)
        .saturating_sub(window);
    let frame = usize::try_from(missing).unwrap_or(usize::MAX);
    to_chunk.max(frame).min(read_size).max(MIN_FILL)
}

/// Whether the frame at `pos` of `data` ends within `chunk_bytes`, by the
/// little-endian length in its first 8 bytes plus `overhead` (a size hint:
/// a damaged length only ends the chunk early, decoding reports it); true
/// while its length is not there yet.
fn fits(data: &[u8], pos: usize, chunk_bytes: usize, overhead: u64) -> bool {
    if pos >= chunk_bytes {
        return false;
    }
    match data.get(pos..).and_then(|b| b.first_chunk::<8>()) {
        Some(len) => {
            let frame = u64::from_le_bytes(*len).saturating_add(overhead);
            (pos as u64).saturating_add(frame) <= chunk_bytes as u64
        }
        None => true,
    }
}

/// A frame decoder of a length-prefixed format (TFRecord, OFRecord), as
/// [`Cut::frames`] drives it.
trait Frames {
    /// Bytes a frame holds beyond the length in its first 8 bytes.
    const OVERHEAD: u64;
    /// The next frame at the start of `data`: `Ok(Ok((payload, len)))`,
    /// or `Ok(Err(needed))` when more bytes are needed.
    fn frame(&mut self, data: &[u8]) -> Result<std::result::Result<(Range<usize>, usize), u64>>;
    /// Checks that `rest`, left at the end of the file, is no partial frame.
    fn finish(&self, rest: &[u8]) -> Result<()>;
    /// The number of the next record.
    fn record_index(&self) -> u64;
}

impl Frames for FrameDecoder {
    const OVERHEAD: u64 = 16;

    fn frame(&mut self, data: &[u8]) -> Result<std::result::Result<(Range<usize>, usize), u64>> {
        Ok(match self.decode(data)? {
            Decoded::Frame(f) => Ok((f.payload, f.len)),
            Decoded::Incomplete { needed } => Err(needed),
        })
    }

    fn finish(&self, rest: &[u8]) -> Result<()> {
        Ok(FrameDecoder::finish(self, rest.len())?)
    }

    fn record_index(&self) -> u64 {
        FrameDecoder::record_index(self)
    }
}

impl Frames for grist_ofrecord::FrameDecoder {
    const OVERHEAD: u64 = 8;

    fn frame(&mut self, data: &[u8]) -> Result<std::result::Result<(Range<usize>, usize), u64>> {
        Ok(match self.decode(data)? {
            grist_ofrecord::Decoded::Frame(f) => Ok((f.payload, f.len)),
            grist_ofrecord::Decoded::Incomplete { needed } => Err(needed),
        })
    }

    fn finish(&self, rest: &[u8]) -> Result<()> {
        Ok(grist_ofrecord::FrameDecoder::finish(self, rest)?)
    }

    fn record_index(&self) -> u64 {
        grist_ofrecord::FrameDecoder::record_index(self)
    }
}

/// What a frame chunker reads with: the file's name, the window of bytes
/// read, whether the file has ended, and the sizes it cuts and reads by.
struct Cut {
    name: Arc<str>,
    window: Window,
    eof: bool,
    /// A read error after some good frames, reported on the next call.
    pending: Option<Error>,
    chunk_bytes: usize,
    read_size: usize,
}

impl Cut {
    fn new(name: Arc<str>, window: Window, options: &ReadOptions) -> Self {
        Cut {
            name,
            window,
            eof: false,
            pending: None,
            chunk_bytes: options.chunk_bytes,
            read_size: options.read_size(),
        }
    }

    /// The next chunk's frames: their payloads' spans in the window and
    /// the chunk's length, filling the window from `input` as needed (the
    /// longest run of frames that fits in the chunk size, at least one);
    /// `None` at a clean end of the file. An error after good frames ends
    /// the chunk before it: a read error is kept for the next call, a
    /// decoding error comes again then (the decoder did not move).
    fn frames<F: Frames>(
        &mut self,
        frames: &mut F,
        input: &mut impl Read,
    ) -> Result<Option<(Vec<Range<usize>>, usize)>> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let mut spans: Vec<Range<usize>> = Vec::new();
        let mut len = 0usize;
        loop {
            let data = self.window.data();
            if !spans.is_empty() && !fits(data, len, self.chunk_bytes, F::OVERHEAD) {
                break;
            }
            match frames.frame(&data[len..]) {
                Ok(Ok((payload, n))) => {
                    spans.push(len + payload.start..len + payload.end);
                    len += n;
                }
                Ok(Err(needed)) => {
                    if self.eof {
                        if !spans.is_empty() {
                            break;
                        }
                        frames.finish(&data[len..])?;
                        return Ok(None);
                    }
                    let missing = needed.saturating_sub((data.len() - len) as u64);
                    let size = fill_size(data.len(), self.chunk_bytes, missing, self.read_size);
                    if let Err(source) = self.window.fill(input, size, &mut self.eof) {
                        let e = Error::Read {
                            at: Location::record(self.name.clone(), frames.record_index()).into(),
                            source,
                        };
                        if spans.is_empty() {
                            return Err(e);
                        }
                        self.pending = Some(e);
                        break;
                    }
                }
                Err(_) if !spans.is_empty() => break,
                Err(e) => return Err(e),
            }
        }
        Ok(Some((spans, len)))
    }
}

/// A TFRecord file as chunks of whole frames: each chunk is the longest
/// run of frames that fits in the chunk size (at least one), so the cut
/// depends only on the frames, and reading from any chunk boundary cuts
/// the rest of the file the same way.
pub(crate) struct TfChunker {
    cut: Cut,
    input: CompressedReader<Counting<File>>,
    compressed: bool,
    frames: FrameDecoder,
    index: u64,
    stored_mark: u64,
    /// Where the data CRCs are checked (see [`ReadOptions::crc_on_parse`]).
    options: ReadOptions,
}

impl std::fmt::Debug for TfChunker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TfChunker")
            .field("name", &self.cut.name)
            .field("record", &self.frames.record_index())
            .finish_non_exhaustive()
    }
}

impl TfChunker {
    fn open(options: &ReadOptions, input: &Input, pos: ChunkPos) -> Result<Self> {
        let name = input.name.clone();
        let tf = options.tfrecord();
        let mut file = File::open(&input.path).map_err(|e| Error::io(&name, e))?;
        let compression = tf.compression_for(&input.path);
        let compressed = compression != Compression::None;
        // Compressed files are read (and inflated) from their start.
        let window = if compressed {
            Window::default()
        } else {
            Window::open(options, input, &mut file, pos.offset).map_err(|e| Error::io(&name, e))?
        }
        .sharing(options, frame_buffer(options));
        let mut reader = compression.reader(Counting {
            inner: file,
            count: 0,
        })?;
        if compressed && pos.offset > 0 {
            // No seeking in a compressed stream: inflate and drop the
            // bytes before the chunk (framing and parsing are skipped).
            let skipped = io::copy(&mut (&mut reader).take(pos.offset), &mut io::sink()).map_err(
                |source| Error::Read {
                    at: Location::record(name.clone(), pos.record).into(),
                    source,
                },
            )?;
            if skipped < pos.offset {
                return Err(Error::Read {
                    at: Location::record(name.clone(), pos.record).into(),
                    source: io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the stream ends before byte {}", pos.offset),
                    ),
                });
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
        Ok(TfChunker {
            // With several parse threads, they check the data CRCs as
            // they decode the records (decode.rs), in parallel; here, the
            // length CRCs, which the framing depends on (see `next`).
            frames: FrameDecoder::with_options(name.clone(), &tf)
                .with_position(pos.record, pos.offset),
            cut: Cut::new(name, window, options),
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
            record: self.frames.record_index(),
            offset: self.frames.offset(),
        }
    }

    fn next(&mut self) -> Result<Option<RawChunk>> {
        let start = self.pos();
        let crc_deferred = self.options.crc_on_parse();
        self.frames.set_data_check(!crc_deferred);
        let Some((spans, len)) = self.cut.frames(&mut self.frames, &mut self.input)? else {
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
            file: self.cut.name.clone(),
            index: self.index,
            first_record: start.record,
            record_count: spans.len(),
            stored_bytes,
            compressed: self.compressed,
            data,
            layout: RecordLayout::Spans(spans.into()),
        };
        // Saturating: a restored position may hold any number.
        self.index = self.index.saturating_add(1);
        Ok(Some(RawChunk {
            chunk,
            pos: start,
            next: self.pos(),
            inflate: None,
            header: None,
            crc_deferred,
        }))
    }
}

/// An Avro object container file as chunks, one per block, handed out
/// still compressed.
pub(crate) struct AvroChunker {
    name: Arc<str>,
    file: File,
    header: Arc<Header>,
    blocks: BlockDecoder,
    window: Window,
    eof: bool,
    /// The number of the next block's first record.
    record: u64,
    read_size: usize,
}

impl std::fmt::Debug for AvroChunker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AvroChunker")
            .field("name", &self.name)
            .field("block", &self.blocks.block_index())
            .finish_non_exhaustive()
    }
}

impl AvroChunker {
    fn open(options: &ReadOptions, input: &Input, pos: ChunkPos) -> Result<Self> {
        let name = input.name.clone();
        let file = File::open(&input.path).map_err(|e| Error::io(&name, e))?;
        let mut reader = BufReader::with_capacity(64 << 10, file);
        let header = Header::read_from(&mut reader, name.clone(), &options.limits)?;
        header.codec.check_enabled(&name)?;
        let header_len = reader.stream_position().map_err(|e| Error::io(&name, e))?;
        let start = if pos.offset > 0 {
            pos.offset
        } else {
            header_len
        };
        let mut file = reader.into_inner();
        let mut window =
            Window::open(options, input, &mut file, start).map_err(|e| Error::io(&name, e))?;
        if !options.shuffled {
            window = window.sharing(options, options.read_size() + FRAME_HEAD_ROOM);
        }
        Ok(AvroChunker {
            blocks: BlockDecoder::new(name.clone(), header.sync)
                .with_limits(options.limits)
                .with_position(pos.index, start),
            name,
            file,
            header: Arc::new(header),
            window,
            eof: false,
            record: pos.record,
            read_size: options.read_size(),
        })
    }

    fn next(&mut self) -> Result<Option<RawChunk>> {
        loop {
            let pos = ChunkPos {
                index: self.blocks.block_index(),
                record: self.record,
                offset: self.blocks.offset(),
            };
            match self.blocks.decode(self.window.data())? {
                grist_avro_tensor::Decoded::Complete { value: raw, len } => {
                    let frame = self.window.take(len);
                    let data = frame.slice(raw.data.clone());
                    self.record = self.record.saturating_add(raw.record_count);
                    let codec = self.header.codec;
                    let chunk = Chunk {
                        file: self.name.clone(),
                        index: raw.index,
                        first_record: pos.record,
                        // A count beyond the address space cannot be
                        // decoded anyway: the decoder reports the block
                        // running out of data.
                        record_count: usize::try_from(raw.record_count).unwrap_or(usize::MAX),
                        stored_bytes: len as u64,
                        compressed: codec != Codec::Null,
                        data,
                        layout: RecordLayout::Sequential,
                    };
                    return Ok(Some(RawChunk {
                        chunk,
                        pos,
                        next: ChunkPos {
                            index: self.blocks.block_index(),
                            record: self.record,
                            offset: self.blocks.offset(),
                        },
                        inflate: (codec != Codec::Null).then_some(codec),
                        header: Some(self.header.clone()),
                        crc_deferred: false,
                    }));
                }
                grist_avro_tensor::Decoded::Incomplete { needed } => {
                    if self.eof {
                        self.blocks.finish(self.window.data())?;
                        return Ok(None);
                    }
                    // The size asked for was checked against the limits;
                    // the buffer still grows only as bytes arrive. Reads
                    // fill a read buffer (the rest of a longer block).
                    let there = self.window.data().len();
                    let missing = needed.saturating_sub(there as u64);
                    let size = fill_size(there, self.read_size, missing, self.read_size);
                    self.window
                        .fill(&mut self.file, size, &mut self.eof)
                        .map_err(|source| Error::Read {
                            at: Location::record(self.name.clone(), self.record).into(),
                            source,
                        })?;
                }
            }
        }
    }
}

/// An OFRecord part file as chunks of whole records, cut as TFRecord
/// files are (the longest run that fits in the chunk size).
pub(crate) struct OfChunker {
    cut: Cut,
    file: File,
    frames: grist_ofrecord::FrameDecoder,
    index: u64,
}

impl std::fmt::Debug for OfChunker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfChunker")
            .field("name", &self.cut.name)
            .field("record", &self.frames.record_index())
            .finish_non_exhaustive()
    }
}

impl OfChunker {
    fn open(options: &ReadOptions, input: &Input, pos: ChunkPos) -> Result<Self> {
        let name = input.name.clone();
        let mut file = File::open(&input.path).map_err(|e| Error::io(&name, e))?;
        let size = file.metadata().map_err(|e| Error::io(&name, e))?.len();
        let window = Window::open(options, input, &mut file, pos.offset)
            .map_err(|e| Error::io(&name, e))?
            .sharing(options, frame_buffer(options));
        Ok(OfChunker {
            frames: grist_ofrecord::FrameDecoder::with_options(name.clone(), &options.ofrecord())
                .with_remaining(size)
                .with_position(pos.record, pos.offset),
            cut: Cut::new(name, window, options),
            file,
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

    fn next(&mut self) -> Result<Option<RawChunk>> {
        let start = self.pos();
        let Some((spans, len)) = self.cut.frames(&mut self.frames, &mut self.file)? else {
            return Ok(None);
        };
        let chunk = Chunk {
            file: self.cut.name.clone(),
            index: self.index,
            first_record: start.record,
            record_count: spans.len(),
            stored_bytes: len as u64,
            compressed: false,
            data: self.cut.window.take(len),
            layout: RecordLayout::Spans(spans.into()),
        };
        // Saturating: a restored position may hold any number.
        self.index = self.index.saturating_add(1);
        Ok(Some(RawChunk {
            chunk,
            pos: start,
            next: self.pos(),
            inflate: None,
            header: None,
            crc_deferred: false,
        }))
    }
}

/// Where the interleaved stream of an epoch is: which files are open in
/// which slot and where, which slot's turn it is, how many chunks went by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StreamCursor {
    /// The position, in the epoch's file list, of the next file to open.
    pub(crate) next_file: usize,
    /// The interleave slots (`None`: closed, no file left for it).
    pub(crate) slots: Vec<Option<Slot>>,
    /// The slot whose turn is next.
    pub(crate) turn: usize,
    /// The number of chunks of the whole (all ranks') stream so far.
    pub(crate) global: u64,
}

/// One interleave slot: a file (by position in the epoch's list) and where
/// its next chunk starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Slot {
    pub(crate) file: usize,
    pub(crate) next: ChunkPos,
}

impl StreamCursor {
    /// The start of an epoch over `files` files, `cycle` at a time.
    pub(crate) fn start(files: usize, cycle: usize) -> Self {
        // No more slots than files: the others would stay closed.
        let cycle = slots_for(files, cycle);
        StreamCursor {
            next_file: cycle.min(files),
            slots: (0..cycle)
                .map(|i| {
                    (i < files).then_some(Slot {
                        file: i,
                        next: ChunkPos::default(),
                    })
                })
                .collect(),
            turn: 0,
            global: 0,
        }
    }

    /// Whether this cursor can be one of an epoch over `files` files,
    /// `cycle` at a time (a restored state may hold anything); what is
    /// wrong if not.
    pub(crate) fn check(&self, files: usize, cycle: usize) -> std::result::Result<(), String> {
        // (States saved before slots were capped by the file count have
        // one per `cycle`.)
        if self.slots.len() != slots_for(files, cycle) && self.slots.len() != cycle.max(1) {
            return Err(format!(
                "the stream has {} interleave slots, this loader {}",
                self.slots.len(),
                slots_for(files, cycle)
            ));
        }
        if self.next_file > files {
            return Err(format!(
                "the next file is number {} of {files}",
                self.next_file
            ));
        }
        if let Some(s) = self.slots.iter().flatten().find(|s| s.file >= files) {
            return Err(format!("a slot reads file number {} of {files}", s.file));
        }
        Ok(())
    }

    /// Whether every slot is closed.
    pub(crate) fn ended(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }
}

/// The interleave slots of an epoch over `files` files, `cycle` at a time.
fn slots_for(files: usize, cycle: usize) -> usize {
    cycle.clamp(1, files.max(1))
}

/// Reads the chunks of one slot's file.
pub(crate) trait SlotReader {
    /// What a chunk is.
    type Chunk;
    /// The next chunk and where the one after starts; `None` at the end.
    fn next(&mut self) -> Result<Option<(Self::Chunk, ChunkPos)>>;
}

impl SlotReader for Chunker {
    type Chunk = RawChunk;

    fn next(&mut self) -> Result<Option<(RawChunk, ChunkPos)>> {
        Ok(Chunker::next(self)?.map(|raw| {
            let next = raw.next;
            (raw, next)
        }))
    }
}

/// `cycle_length` files at a time, one chunk from each in turn (a file
/// that ends gives its slot to the next file at once, which then gives the
/// chunk; a slot with no file left closes), as `tf.data`'s `interleave`
/// with a block length of one chunk.
pub(crate) struct Interleave<R> {
    pub(crate) cursor: StreamCursor,
    open: Vec<Option<R>>,
}

impl<R: SlotReader> Interleave<R> {
    pub(crate) fn new(cursor: StreamCursor) -> Self {
        let open = cursor.slots.iter().map(|_| None).collect();
        Interleave { cursor, open }
    }

    /// The next chunk of the stream, its file (position in the list) and
    /// its global number; `open(file, pos)` opens a file at a position.
    pub(crate) fn next(
        &mut self,
        files: usize,
        open: &mut impl FnMut(usize, ChunkPos) -> Result<R>,
    ) -> Result<Option<(R::Chunk, usize, u64)>> {
        let c = &mut self.cursor;
        let k = c.slots.len();
        while !c.ended() {
            let i = c.turn % k;
            let Some(slot) = c.slots[i] else {
                c.turn = (i + 1) % k;
                continue;
            };
            if self.open[i].is_none() {
                self.open[i] = Some(open(slot.file, slot.next)?);
            }
            let reader = self.open[i].as_mut().expect("opened above");
            match reader.next()? {
                Some((chunk, next)) => {
                    c.slots[i] = Some(Slot {
                        file: slot.file,
                        next,
                    });
                    c.turn = (i + 1) % k;
                    let global = c.global;
                    c.global = c.global.saturating_add(1);
                    return Ok(Some((chunk, slot.file, global)));
                }
                None => {
                    self.open[i] = None;
                    if c.next_file < files {
                        c.slots[i] = Some(Slot {
                            file: c.next_file,
                            next: ChunkPos::default(),
                        });
                        c.next_file += 1;
                    } else {
                        c.slots[i] = None;
                        c.turn = (i + 1) % k;
                    }
                }
            }
        }
        Ok(None)
    }
}

/// The record count of each chunk of `input`, read without decoding (Avro
/// blocks are not even decompressed).
pub(crate) fn chunk_counts(options: &ReadOptions, input: &Input) -> Result<Vec<u64>> {
    let mut chunker = Chunker::open(options, input, ChunkPos::default())?;
    let mut counts = Vec::new();
    while let Some(raw) = chunker.next()? {
        counts.push(raw.chunk.record_count as u64);
    }
    Ok(counts)
}

/// A file known by its chunk sizes, for simulating the stream.
pub(crate) struct Counted<'a> {
    counts: &'a [u64],
    at: usize,
}

impl<'a> Counted<'a> {
    pub(crate) fn new(counts: &'a [u64], pos: ChunkPos) -> Self {
        Counted {
            counts,
            at: pos.index as usize,
        }
    }
}

impl SlotReader for Counted<'_> {
    type Chunk = u64;

    fn next(&mut self) -> Result<Option<(u64, ChunkPos)>> {
        let Some(&n) = self.counts.get(self.at) else {
            return Ok(None);
        };
        self.at += 1;
        Ok(Some((
            n,
            ChunkPos {
                index: self.at as u64,
                ..ChunkPos::default()
            },
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    fn options(format: Format, chunk_bytes: usize) -> ReadOptions {
        ReadOptions {
            format,
            chunk_bytes,
            limits: grist_tensor::Limits::default(),
            check_crc: true,
            access: grist_tensor::Access::read(),
            maps: Default::default(),
            buffers: Default::default(),
            shuffled: false,
            crc_on_parse: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Payloads of 1 byte to 5 KB, and one of 300 KB (longer than two
    /// chunks of 64 KiB) in the middle.
    fn payloads() -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = (0..400u32)
            .map(|i| {
                let len = 1 + (i as usize * 7919) % 5000;
                (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
            })
            .collect();
        out[200] = (0..300_000u32).map(|j| (j % 251) as u8).collect();
        out
    }

    fn write(format: Format, path: &std::path::Path, payloads: &[Vec<u8>]) {
        let file = File::create(path).unwrap();
        match format {
            Format::Tfrecord => {
                let mut w = grist_tfrecord::RecordWriter::new(file);
                for p in payloads {
                    w.write_record(p).unwrap();
                }
                w.finish().unwrap();
            }
            _ => {
                let mut w = grist_ofrecord::RecordWriter::new(file);
                for p in payloads {
                    w.write_record(p).unwrap();
                }
            }
        }
    }

    /// Every chunk of `chunker`, each checked against `want` (the payloads
    /// in order) as it comes; `keep` keeps them all alive to the end, else
    /// each is dropped before the next is read (its buffer then comes
    /// back to the pool and is read into again). Returns the record counts
    /// of the chunks.
    fn chunks(mut chunker: Chunker, want: &[Vec<u8>], keep: bool) -> Vec<usize> {
        let mut kept = Vec::new();
        let mut counts = Vec::new();
        let mut record = 0usize;
        while let Some(raw) = chunker.next().unwrap() {
            let RecordLayout::Spans(spans) = &raw.chunk.layout else {
                panic!("frames are cut into spans");
            };
            assert_eq!(raw.chunk.first_record, record as u64);
            for span in spans.iter() {
                assert_eq!(
                    &raw.chunk.data[span.clone()],
                    &want[record][..],
                    "record {record}"
                );
                record += 1;
            }
            // Within the chunk size, unless it is one longer frame.
            assert!(raw.chunk.data.len() <= 1 << 16 || spans.len() == 1);
            counts.push(spans.len());
            if keep {
                kept.push(raw);
            }
        }
        assert_eq!(record, want.len());
        counts
    }

    #[test]
    fn chunks_handed_their_read_buffers_hold_what_copies_would() {
        let dir = tempfile::tempdir().unwrap();
        let want = payloads();
        for format in [Format::Tfrecord, Format::Ofrecord] {
            let path = dir.path().join(format.name());
            write(format, &path, &want);
            let input = Input {
                path: path.clone(),
                name: Arc::from(path.to_string_lossy()),
            };
            let options = options(format, 1 << 16);
            let open = || Chunker::open(&options, &input, ChunkPos::default()).unwrap();
            // Copied out of one reused buffer, as Avro blocks are.
            let mut copying = open();
            match &mut copying {
                Chunker::Tfrecord(c) => c.cut.window.pool = None,
                Chunker::Ofrecord(c) => c.cut.window.pool = None,
                Chunker::Avro(_) => unreachable!(),
            }
            let cut = chunks(copying, &want, true);
            assert!(cut.len() > 10, "{format:?}: {cut:?}");
            // Handed off, every chunk alive to the end, then each dropped
            // before the next is read: buffers come back (the 300 KB one
            // too, which is then too large to be handed to a short chunk
            // and is copied from instead). The same cut every time.
            assert_eq!(chunks(open(), &want, true), cut, "{format:?}");
            assert_eq!(chunks(open(), &want, false), cut, "{format:?}");
            // The buffers came back with their bytes: the last one given
            // back holds frames of the file (not zeroes).
            let back = options.buffers.take(1);
            let file = std::fs::read(&path).unwrap();
            let probe = &back[..64];
            assert!(
                file.windows(64).any(|w| w == probe),
                "{format:?}: a pooled buffer not read from the file"
            );
        }
    }

    /// Every chunk of an Avro chunker: (first record, record count, data).
    fn avro_chunks(mut chunker: Chunker, keep: bool) -> Vec<(u64, usize, Vec<u8>)> {
        let mut kept = Vec::new();
        let mut out = Vec::new();
        while let Some(raw) = chunker.next().unwrap() {
            out.push((
                raw.chunk.first_record,
                raw.chunk.record_count,
                raw.chunk.data.to_vec(),
            ));
            if keep {
                kept.push(raw);
            }
        }
        out
    }

    #[test]
    fn avro_blocks_share_read_buffers_unless_shuffled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blocks.avro");
        let schema = r#"{"type":"record","name":"R","fields":[{"name":"b","type":"bytes"}]}"#;
        let writer = grist_avro_tensor::WriterOptions::default().with_sync_interval(20_000);
        let mut w = grist_avro_tensor::ContainerWriter::create(&path, schema, writer).unwrap();
        for p in payloads() {
            // A bytes field: its zig-zag length, then the bytes.
            let mut datum = Vec::new();
            let mut n = (p.len() as u64) << 1;
            while n >= 0x80 {
                datum.push(n as u8 | 0x80);
                n >>= 7;
            }
            datum.push(n as u8);
            datum.extend_from_slice(&p);
            w.append_datum(&datum).unwrap();
        }
        w.finish().unwrap();
        let input = Input {
            path: path.clone(),
            name: Arc::from(path.to_string_lossy()),
        };
        let mut shuffled = options(Format::Avro, 1 << 16);
        shuffled.shuffled = true;
        let open = |o: &ReadOptions| Chunker::open(o, &input, ChunkPos::default()).unwrap();
        let copied = avro_chunks(open(&shuffled), true);
        assert!(copied.len() > 20, "{} blocks", copied.len());
        assert_eq!(copied.iter().map(|c| c.1).sum::<usize>(), payloads().len());
        // Not shuffled: slices of shared buffers, all alive at once or
        // each dropped before the next is read.
        let sharing = options(Format::Avro, 1 << 16);
        assert_eq!(avro_chunks(open(&sharing), true), copied);
        assert_eq!(avro_chunks(open(&sharing), false), copied);
        let back = sharing.buffers.take(1);
        let file = std::fs::read(&path).unwrap();
        assert!(file.windows(64).any(|w| w == &back[..64]));
        // Shuffled: copies, no buffer taken from the pool.
        assert_eq!(shuffled.buffers.take(1).len(), 1);
    }

    #[test]
    fn fill_sizes_stay_within_a_read() {
        let chunk = 1 << 20;
        let read = chunk;
        // Empty window: a chunk and the head room.
        assert_eq!(fill_size(0, chunk, 12, read), read);
        assert_eq!(
            fill_size(100, chunk, 12, 4 << 20),
            chunk + FRAME_HEAD_ROOM - 100
        );
        // Nearly a chunk there already: at least MIN_FILL.
        assert_eq!(fill_size(chunk, chunk, 12, read), MIN_FILL);
        // A long frame: the rest of it, at most a read.
        assert_eq!(fill_size(chunk, chunk, 300_000, read), 300_000);
        assert_eq!(fill_size(chunk, chunk, u64::MAX, read), read);
        // A huge chunk size reads no more than a read at once either.
        assert_eq!(fill_size(0, usize::MAX, u64::MAX, read), read);
    }
}
