//! Object container files as chunks of one block each: [`AvroStream`],
//! one file from any block boundary on, its blocks still compressed (the
//! [`ChunkStream`] of the format contract), and [`AvroSource`], files one
//! after the other, blocks inflated.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;

use grist_tensor::chunking::{FRAME_HEAD_ROOM, Window, fill_size};
use grist_tensor::{
    BoxError, Chunk, ChunkPos, ChunkStream, Deferred, Input, ReadOptions, RecordLayout,
    RecordSource, StorageError,
};

use crate::codec::Codec;
use crate::container::{Block, BlockDecoder, BlockReader, Decoded, Header, ReaderOptions};
use crate::error::{Error, Result};

/// Counts the bytes read, to know how long the header was.
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

/// An object container file as chunks, one per block, handed out still
/// compressed ([`Deferred::inflate`]: the thread that decodes a block
/// inflates it, with [`AvroDecoder`](crate::AvroDecoder)'s
/// [`inflate`](grist_tensor::Decoder::inflate)). Each chunk carries the
/// file's [`Header`] (as [`Chunk::header`]), which the decoder compiles its
/// plan from.
///
/// Position 0 is the first block, after the header; any other position is
/// a block's offset in the file. Blocks are read many to a read: they
/// share the read buffer unless the options say the chunks are shuffled
/// (then a few blocks drained late would pin whole buffers) and are
/// copied out of one reused buffer instead.
pub struct AvroStream {
    name: Arc<str>,
    input: Box<dyn Read + Send>,
    header: Arc<Header>,
    blocks: BlockDecoder,
    window: Window,
    eof: bool,
    /// The number of the next block's first record.
    record: u64,
    read_size: usize,
}

impl fmt::Debug for AvroStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AvroStream")
            .field("name", &self.name)
            .field("block", &self.blocks.block_index())
            .finish_non_exhaustive()
    }
}

impl AvroStream {
    /// `input` read from block boundary `pos`.
    pub fn open(input: &Input, pos: ChunkPos, options: &ReadOptions) -> Result<Self> {
        let name = input.name().clone();
        let mut head = BufReader::with_capacity(
            64 << 10,
            Counting {
                inner: input.reader_at(0)?,
                count: 0,
            },
        );
        let header = Header::read_from(&mut head, name.clone(), &options.limits)?;
        header.codec.check_enabled(&name)?;
        let header_len = head.get_ref().count - head.buffer().len() as u64;
        let start = if pos.offset > 0 {
            pos.offset
        } else {
            header_len
        };
        let (window, input): (Window, Box<dyn Read + Send>) =
            match Window::mapped(options, input, start)? {
                Some(w) => (w, Box::new(io::empty())),
                None if start == header_len => {
                    // Go on from the header: what was read past it first.
                    let rest = head.buffer().to_vec();
                    let inner = head.into_inner().inner;
                    (
                        Window::copying(),
                        Box::new(io::Cursor::new(rest).chain(inner)),
                    )
                }
                None => (Window::copying(), input.reader_at(start)?),
            };
        let window = if options.shuffled {
            window
        } else {
            window.sharing(options, options.read_size() + FRAME_HEAD_ROOM)
        };
        Ok(AvroStream {
            blocks: BlockDecoder::new(name.clone(), header.sync)
                .with_limits(options.limits)
                .with_position(pos.index, start),
            name,
            input,
            header: Arc::new(header),
            window,
            eof: false,
            record: pos.record,
            read_size: options.read_size(),
        })
    }

    /// The file's header.
    pub fn header(&self) -> &Arc<Header> {
        &self.header
    }

    /// The next block, still compressed, and where the one after it
    /// starts; `None` at the end of the file.
    pub fn read_chunk(&mut self) -> Result<Option<(Chunk, ChunkPos)>> {
        loop {
            let offset = self.blocks.offset();
            match self.blocks.decode(self.window.data())? {
                Decoded::Complete { value: raw, len } => {
                    let frame = self.window.take(len);
                    let data = frame.slice(raw.data.clone());
                    let first_record = self.record;
                    self.record = self.record.saturating_add(raw.record_count);
                    let compressed = self.header.codec != Codec::Null;
                    let header: grist_tensor::FileHeader = self.header.clone();
                    let chunk = Chunk {
                        file: self.name.clone(),
                        index: raw.index,
                        first_record,
                        // A count beyond the address space cannot be
                        // decoded anyway: the decoder reports the block
                        // running out of data.
                        record_count: usize::try_from(raw.record_count).unwrap_or(usize::MAX),
                        stored_bytes: len as u64,
                        compressed,
                        data,
                        layout: RecordLayout::Sequential,
                        offset,
                        deferred: if compressed {
                            Deferred::INFLATE
                        } else {
                            Deferred::NONE
                        },
                        header: Some(header),
                    };
                    let next = ChunkPos {
                        index: self.blocks.block_index(),
                        record: self.record,
                        offset: self.blocks.offset(),
                    };
                    return Ok(Some((chunk, next)));
                }
                Decoded::Incomplete { needed } => {
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
                        .fill(&mut self.input, size, &mut self.eof)
                        .map_err(|e| match StorageError::from_io(&self.name, e) {
                            Ok(e) => Error::Storage(e),
                            Err(source) => Error::Io {
                                file: self.name.clone(),
                                source,
                            },
                        })?;
                }
            }
        }
    }
}

impl ChunkStream for AvroStream {
    fn next_chunk(&mut self) -> Result<Option<(Chunk, ChunkPos)>, BoxError> {
        Ok(self.read_chunk()?)
    }
}

/// Reads object container files, one after the other, as [`Chunk`]s: one
/// per block, [`RecordLayout::Sequential`], with the decompressed records
/// as `data`.
///
/// Each file has its own writer schema, and records can only be decoded
/// with it, so the source tells which header a chunk belongs to:
/// [`current_header`](Self::current_header) after
/// [`next_chunk`](RecordSource::next_chunk), or
/// [`next_chunk_with_header`](Self::next_chunk_with_header). Every file
/// gets a fresh `Arc<Header>`: a consumer that keeps the last header it
/// compiled a decode plan for and sees a different one (by
/// [`Arc::ptr_eq`]) compiles a new plan, or reuses the old one when the
/// `schema_json` is the same.
///
/// The blocks before a damaged one are handed out first; the error follows
/// on the next call, and then the source ends. Files with no blocks yield
/// no chunks.
///
/// ```
/// use std::sync::Arc;
/// use grist_avro_tensor::{AvroSource, ContainerWriter, WriterOptions};
///
/// let dir = tempfile::tempdir()?;
/// let mut paths = Vec::new();
/// for (i, schema) in [r#""int""#, r#""long""#].iter().enumerate() {
///     let path = dir.path().join(format!("{i}.avro"));
///     let mut w = ContainerWriter::create(&path, schema, WriterOptions::default().with_sync_interval(2))?;
///     for _ in 0..3 {
///         w.append_datum(&[0x02])?;
///     }
///     w.finish()?;
///     paths.push(path);
/// }
///
/// let mut source = AvroSource::new(&paths);
/// let mut plans = 0;
/// let mut last = None;
/// while let Some((chunk, header)) = source.next_chunk_with_header()? {
///     if !last.as_ref().is_some_and(|h| Arc::ptr_eq(h, &header)) {
///         plans += 1; // compile a decode plan for header.schema here
///         last = Some(header);
///     }
///     assert_eq!(chunk.data.len(), chunk.record_count);
/// }
/// assert_eq!(plans, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AvroSource {
    files: VecDeque<PathBuf>,
    options: ReaderOptions,
    current: Option<BlockReader>,
    header: Option<Arc<Header>>,
    done: bool,
}

impl AvroSource {
    /// A source over `files`, read in order, with default options.
    pub fn new<P: Into<PathBuf>>(files: impl IntoIterator<Item = P>) -> Self {
        AvroSource {
            files: files.into_iter().map(Into::into).collect(),
            options: ReaderOptions::default(),
            current: None,
            header: None,
            done: false,
        }
    }

    /// The reader options (limits, buffer size). By default,
    /// [`ReaderOptions::default`].
    #[must_use]
    pub fn with_options(mut self, options: ReaderOptions) -> Self {
        self.options = options;
        self
    }

    /// The header of the file the last chunk came from (`None` before the
    /// first chunk).
    pub fn current_header(&self) -> Option<&Arc<Header>> {
        self.header.as_ref()
    }

    /// The next chunk with the header of its file.
    pub fn next_chunk_with_header(&mut self) -> Result<Option<(Chunk, Arc<Header>)>> {
        while !self.done {
            let reader = match &mut self.current {
                Some(reader) => reader,
                None => match self.files.pop_front() {
                    Some(path) => match BlockReader::open(&path, self.options.clone()) {
                        Ok(reader) => self.current.insert(reader),
                        Err(e) => {
                            self.done = true;
                            return Err(e);
                        }
                    },
                    None => {
                        self.done = true;
                        break;
                    }
                },
            };
            match reader.next_block() {
                Ok(Some(block)) => {
                    let header = reader.header().clone();
                    let chunk = chunk(block, reader.name().clone(), &header);
                    self.header = Some(header.clone());
                    return Ok(Some((chunk, header)));
                }
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

/// A block as a chunk.
fn chunk(block: Block, file: Arc<str>, header: &Arc<Header>) -> Chunk {
    let file_header: grist_tensor::FileHeader = header.clone();
    Chunk {
        file,
        index: block.index,
        first_record: block.first_record,
        // Counts above the address space cannot be decoded anyway; the
        // decoder reports the block running out of data.
        record_count: usize::try_from(block.record_count).unwrap_or(usize::MAX),
        stored_bytes: block.stored_bytes,
        compressed: block.compressed,
        data: block.data,
        layout: RecordLayout::Sequential,
        offset: block.offset,
        deferred: Deferred::NONE,
        header: Some(file_header),
    }
}

impl RecordSource for AvroSource {
    type Error = Error;

    fn next_chunk(&mut self) -> Result<Option<Chunk>> {
        self.next_chunk_with_header()
            .map(|c| c.map(|(chunk, _)| chunk))
    }
}

impl fmt::Debug for AvroSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AvroSource")
            .field("files_left", &self.files.len())
            .field("current", &self.current.as_ref().map(|c| c.name()))
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
