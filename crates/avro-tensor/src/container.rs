//! Object container files (Avro 1.11 specification, "Object Container
//! Files"): the [`Header`], the sans-I/O [`BlockDecoder`] and the streaming
//! [`BlockReader`] built on them.
//!
//! ```text
//! file   = header block*
//! header = "Obj" 0x01
//!          metadata: map<bytes> (avro.schema, avro.codec, others)
//!          sync: 16 bytes
//! block  = record count: long (zig-zag varint)
//!          byte size:    long (zig-zag varint)
//!          data:         byte size bytes (the records, compressed by the codec)
//!          sync:         the header's 16 bytes
//! ```
//!
//! A block is handed out only after its sync marker has been checked.
//! Errors name the file and the block: a damaged block's predecessors are
//! delivered first, then the error.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead, Read};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use grist_io::{Address, Storage};
use grist_tensor::{Input, Limits, StorageError};

use crate::codec::Codec;
use crate::error::{Error, Result};
use grist_tensor::Location;

/// The four bytes every object container file starts with.
pub const MAGIC: [u8; 4] = *b"Obj\x01";
/// The length of a sync marker.
pub const SYNC_LEN: usize = 16;
/// The longest varint of a long (64 bits in 7-bit groups).
const MAX_VARINT_LEN: usize = 10;

/// What a sans-I/O parser found at the start of a buffer.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded<T> {
    /// A whole, checked item that took `len` bytes (the number to consume).
    Complete {
        /// The item.
        value: T,
        /// Its length in bytes.
        len: usize,
    },
    /// The buffer holds only part of the item: at least `needed` bytes
    /// (counted from the buffer's start) are needed to go on.
    Incomplete {
        /// The number of bytes the buffer must hold.
        needed: u64,
    },
}

/// The header of an object container file.
///
/// ```
/// use grist_avro_tensor::{Codec, ContainerWriter, Decoded, Header, WriterOptions};
/// use grist_tensor::Limits;
///
/// let options = WriterOptions::default().with_metadata("origin", "doc test");
/// let w = ContainerWriter::new(Vec::new(), r#""long""#, options)?;
/// let (bytes, _) = w.finish_into_inner()?;
///
/// let Decoded::Complete { value: header, len } = Header::parse(&bytes, "mem", &Limits::default())? else {
///     unreachable!()
/// };
/// assert_eq!(len, bytes.len()); // no blocks
/// assert_eq!(header.codec, Codec::Null);
/// assert_eq!(header.metadata["origin"], b"doc test");
/// assert_eq!(header.schema_json, r#""long""#);
/// // The schema itself, compiled for reading datums generically:
/// let schema = grist_avro_tensor::DatumSchema::parse("mem", &header.schema_json)?;
/// assert_eq!(schema.min_datum_size(), 1);
/// # Ok::<(), grist_avro_tensor::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The writer schema as stored (`avro.schema`), JSON text, checked
    /// to be a valid schema. [`DatumSchema::parse`](crate::DatumSchema::parse)
    /// compiles it for reading datums generically.
    pub schema_json: String,
    /// The codec (`avro.codec`; `null` when absent).
    pub codec: Codec,
    /// Every other metadata entry (not `avro.schema`, not `avro.codec`),
    /// values as stored.
    pub metadata: BTreeMap<String, Vec<u8>>,
    /// The file's sync marker.
    pub sync: [u8; SYNC_LEN],
}

/// Zig-zag varint decoding outcome.
enum Varint {
    Value { value: i64, len: usize },
    Incomplete,
    TooLong,
}

/// Reads a zig-zag varint long at the start of `buf`. A varint longer than
/// ten bytes, or whose tenth byte carries more than the 64th bit, is
/// `TooLong`.
fn read_long(buf: &[u8]) -> Varint {
    let mut raw: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(MAX_VARINT_LEN) {
        if i == MAX_VARINT_LEN - 1 && b > 1 {
            return Varint::TooLong;
        }
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let value = ((raw >> 1) as i64) ^ -((raw & 1) as i64);
            return Varint::Value { value, len: i + 1 };
        }
    }
    if buf.len() >= MAX_VARINT_LEN {
        Varint::TooLong
    } else {
        Varint::Incomplete
    }
}

/// Appends the zig-zag varint of `value` to `out`.
pub(crate) fn write_long(out: &mut Vec<u8>, value: i64) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// The largest header, or block, this platform and these limits allow.
fn max_len(limits: &Limits) -> u64 {
    limits.max_alloc_bytes().min(isize::MAX as u64 / 2)
}

/// A cursor over a header being parsed.
struct HeaderCursor<'a> {
    buf: &'a [u8],
    pos: usize,
    file: &'a Arc<str>,
    max: u64,
    max_alloc: u64,
}

/// A header parsing step: a value, or "need this many bytes", or an error.
enum Step<T> {
    Got(T),
    Need(u64),
}

impl HeaderCursor<'_> {
    fn bad(&self, reason: impl Into<String>) -> Error {
        Error::BadHeader {
            file: self.file.clone(),
            reason: reason.into(),
        }
    }

    fn need(&self, needed: u64) -> Result<Step<()>> {
        if needed > self.max {
            return Err(Error::TooLarge {
                at: Location::block(self.file.clone(), 0).into(),
                what: "file header (before block 0)",
                size: needed,
                max: self.max_alloc,
            });
        }
        Ok(Step::Need(needed))
    }

    fn long(&mut self, what: &str) -> Result<Step<i64>> {
        match read_long(&self.buf[self.pos..]) {
            Varint::Value { value, len } => {
                self.pos += len;
                Ok(Step::Got(value))
            }
            Varint::Incomplete => Ok(Step::Need(self.buf.len() as u64 + 1)),
            Varint::TooLong => Err(self.bad(format!(
                "{what} at byte {} is not a valid long (varint over 10 bytes)",
                self.pos
            ))),
        }
    }

    fn bytes(&mut self, what: &str) -> Result<Step<Range<usize>>> {
        let start = self.pos;
        let len = match self.long(what)? {
            Step::Got(len) => len,
            Step::Need(n) => return Ok(Step::Need(n)),
        };
        let Ok(len) = u64::try_from(len) else {
            return Err(self.bad(format!("{what} at byte {start} has negative length {len}")));
        };
        let end = (self.pos as u64).saturating_add(len);
        if end > self.buf.len() as u64 {
            return self.need(end).map(|_| Step::Need(end));
        }
        let range = self.pos..end as usize;
        self.pos = end as usize;
        Ok(Step::Got(range))
    }
}

macro_rules! step {
    ($e:expr) => {
        match $e? {
            Step::Got(v) => v,
            Step::Need(needed) => return Ok(Decoded::Incomplete { needed }),
        }
    };
}

impl Header {
    /// Parses the header at the start of `buf` (sans I/O): the magic, the
    /// metadata map, the sync marker; then the schema (with `apache-avro`)
    /// and the codec.
    ///
    /// Returns [`Decoded::Incomplete`] while `buf` holds only part of the
    /// header; an input that cannot be a header fails as soon as enough of
    /// it is seen: [`Error::BadMagic`] (as soon as the bytes present
    /// differ from `Obj\x01`), [`Error::BadHeader`] (bad varint, negative
    /// length, non-UTF-8 key, missing or invalid schema),
    /// [`Error::UnsupportedCodec`] (a codec the specification does not
    /// define; codecs whose feature is off parse fine, see
    /// [`Codec::is_enabled`]), [`Error::TooLarge`] (a header longer than
    /// [`Limits::max_alloc_bytes`]). `file` names the input in errors.
    pub fn parse(
        buf: &[u8],
        file: impl Into<Arc<str>>,
        limits: &Limits,
    ) -> Result<Decoded<Header>> {
        let file: Arc<str> = file.into();
        let n = buf.len().min(MAGIC.len());
        if buf[..n] != MAGIC[..n] {
            return Err(Error::BadMagic {
                file,
                found: buf[..n].to_vec(),
            });
        }
        if n < MAGIC.len() {
            return Ok(Decoded::Incomplete {
                needed: MAGIC.len() as u64,
            });
        }
        let mut cur = HeaderCursor {
            buf,
            pos: MAGIC.len(),
            file: &file,
            max: max_len(limits),
            max_alloc: limits.max_alloc_bytes(),
        };
        let mut schema = None;
        let mut codec = None;
        let mut metadata = BTreeMap::new();
        loop {
            let count = step!(cur.long("metadata block count"));
            if count == 0 {
                break;
            }
            if count < 0 {
                // A negative count is followed by the block's byte size.
                let size = step!(cur.long("metadata block size"));
                if size < 0 {
                    return Err(cur.bad(format!("metadata block size {size} is negative")));
                }
            }
            for _ in 0..count.unsigned_abs() {
                let key = step!(cur.bytes("metadata key"));
                let value = step!(cur.bytes("metadata value"));
                let key = std::str::from_utf8(&buf[key])
                    .map_err(|_| cur.bad("a metadata key is not UTF-8"))?;
                let value = buf[value].to_vec();
                match key {
                    "avro.schema" => schema = Some(value),
                    "avro.codec" => codec = Some(value),
                    _ => {
                        metadata.insert(key.to_owned(), value);
                    }
                }
            }
        }
        let sync_end = cur.pos + SYNC_LEN;
        let Some(sync) = buf.get(cur.pos..sync_end) else {
            return cur.need(sync_end as u64).map(|_| Decoded::Incomplete {
                needed: sync_end as u64,
            });
        };
        let sync: [u8; SYNC_LEN] = sync.try_into().unwrap_or_default();

        let schema_json = match schema {
            Some(s) => String::from_utf8(s).map_err(|_| cur.bad("avro.schema is not UTF-8"))?,
            None => return Err(cur.bad("no avro.schema entry")),
        };
        crate::schema::parse_apache(&schema_json)
            .map_err(|e| cur.bad(format!("avro.schema: {e}")))?;
        let codec = match codec {
            None => Codec::Null,
            Some(name) => {
                let name =
                    std::str::from_utf8(&name).map_err(|_| cur.bad("avro.codec is not UTF-8"))?;
                Codec::from_name(name).map_err(|e| match e {
                    Error::UnsupportedCodec { codec, hint, .. } => Error::UnsupportedCodec {
                        file: file.clone(),
                        codec,
                        hint,
                    },
                    other => other,
                })?
            }
        };
        Ok(Decoded::Complete {
            value: Header {
                schema_json,
                codec,
                metadata,
                sync,
            },
            len: sync_end,
        })
    }

    /// Reads the header from the start of `reader`, consuming exactly its
    /// bytes (the reader is left at block 0). Errors as
    /// [`parse`](Self::parse); a stream that ends inside the header is
    /// [`Error::BadMagic`] within the first four bytes (as Java's reader
    /// says of an empty file) and [`Error::BadHeader`] after them.
    pub fn read_from<R: BufRead>(
        reader: &mut R,
        file: impl Into<Arc<str>>,
        limits: &Limits,
    ) -> Result<Header> {
        let file: Arc<str> = file.into();
        let mut acc: Vec<u8> = Vec::new();
        loop {
            let avail = loop {
                match reader.fill_buf() {
                    Ok(b) => break b,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(source) => {
                        return Err(Error::Io {
                            file: file.clone(),
                            source,
                        });
                    }
                }
            };
            if avail.is_empty() {
                return Err(header_eof(&file, &acc));
            }
            let before = acc.len();
            acc.extend_from_slice(avail);
            match Header::parse(&acc, file.clone(), limits)? {
                Decoded::Complete { value, len } => {
                    reader.consume(len - before);
                    return Ok(value);
                }
                Decoded::Incomplete { .. } => {
                    let n = acc.len() - before;
                    reader.consume(n);
                }
            }
        }
    }

    /// The value of metadata entry `key` as UTF-8 text, if it is there and
    /// is text.
    pub fn metadata_str(&self, key: &str) -> Option<&str> {
        self.metadata
            .get(key)
            .and_then(|v| std::str::from_utf8(v).ok())
    }
}

/// The error for a stream that ended inside the header.
fn header_eof(file: &Arc<str>, seen: &[u8]) -> Error {
    if seen.len() < MAGIC.len() {
        Error::BadMagic {
            file: file.clone(),
            found: seen.to_vec(),
        }
    } else {
        Error::BadHeader {
            file: file.clone(),
            reason: format!(
                "the file ends inside the header (after {} bytes)",
                seen.len()
            ),
        }
    }
}

/// A block found by [`BlockDecoder::decode`], relative to the start of the
/// buffer it was given. Its sync marker has been checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawBlock {
    /// The block's number in its file (0-based).
    pub index: u64,
    /// The block's offset in the file (the position of its count).
    pub offset: u64,
    /// The record count the block claims (checked only when its records
    /// are decoded: a lying count is the decoder's to find).
    pub record_count: u64,
    /// Where the block's stored (possibly compressed) data lies in the
    /// buffer.
    pub data: Range<usize>,
}

/// The sans-I/O block framer: record count, byte size, data, sync marker.
///
/// It knows where it is in a file (block number, byte offset), so its
/// errors name the block. Give [`decode`](Self::decode) a buffer that
/// starts at a block boundary; on [`Decoded::Complete`] it advances by one
/// block and the caller drops `len` bytes. At the end of the input, call
/// [`finish`](Self::finish) with the bytes left over.
///
/// Checks: a negative count or size is [`Error::BadBlock`], a varint over
/// ten bytes too; a size over [`Limits::max_alloc_bytes`] is
/// [`Error::TooLarge`] (before any bytes of the data are asked for); a
/// wrong sync marker is [`Error::SyncMismatch`]. Nothing is allocated.
///
/// ```
/// use grist_avro_tensor::{BlockDecoder, ContainerWriter, Decoded, Header, WriterOptions};
/// use grist_tensor::Limits;
///
/// let mut w = ContainerWriter::new(Vec::new(), r#""int""#, WriterOptions::default())?;
/// w.append_datum(&[0x54])?; // 42
/// let (bytes, _) = w.finish_into_inner()?;
///
/// let Decoded::Complete { value: header, len } = Header::parse(&bytes, "mem", &Limits::default())? else {
///     unreachable!()
/// };
/// let mut blocks = BlockDecoder::new("mem", header.sync).with_position(0, len as u64);
/// let rest = &bytes[len..];
/// let Decoded::Complete { value: block, len } = blocks.decode(rest)? else { unreachable!() };
/// assert_eq!((block.record_count, &rest[block.data]), (1, &[0x54][..]));
/// blocks.finish(&rest[len..])?;
/// # Ok::<(), grist_avro_tensor::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct BlockDecoder {
    file: Arc<str>,
    sync: [u8; SYNC_LEN],
    block: u64,
    offset: u64,
    max_data: u64,
    max_alloc: u64,
}

impl BlockDecoder {
    /// A decoder for the blocks of `file` (the name used in errors) whose
    /// header has sync marker `sync`, at block 0, offset 0 (set the header
    /// length with [`with_position`](Self::with_position) for file
    /// offsets), with default limits.
    pub fn new(file: impl Into<Arc<str>>, sync: [u8; SYNC_LEN]) -> Self {
        BlockDecoder {
            file: file.into(),
            sync,
            block: 0,
            offset: 0,
            max_data: 0,
            max_alloc: 0,
        }
        .with_limits(Limits::default())
    }

    /// The limit on a block's stored size. By default,
    /// [`Limits::default`] (the allocation limit, 4 GiB).
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.max_data = max_len(&limits);
        self.max_alloc = limits.max_alloc_bytes();
        self
    }

    /// Starts at block number `block`, file offset `offset` (a block
    /// boundary). By default, block 0 at offset 0.
    #[must_use]
    pub fn with_position(mut self, block: u64, offset: u64) -> Self {
        self.block = block;
        self.offset = offset;
        self
    }

    /// The number of the next block.
    pub fn block_index(&self) -> u64 {
        self.block
    }

    /// The file offset of the next block.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The file name used in errors.
    pub fn file(&self) -> &Arc<str> {
        &self.file
    }

    /// The location of the next block, for errors.
    pub fn location(&self) -> Location {
        Location::block(self.file.clone(), self.block)
    }

    fn bad(&self, reason: String) -> Error {
        Error::BadBlock {
            at: self.location().into(),
            reason,
        }
    }

    /// Parses the frame of the block at the start of `buf` up to its data:
    /// its record count, where its data starts and how long the data is
    /// (checked against the limits). `2 * 10` bytes are always enough.
    fn head(&self, buf: &[u8]) -> Result<Decoded<(u64, usize, u64)>> {
        let (count, count_len) = match read_long(buf) {
            Varint::Value { value, len } => (value, len),
            Varint::Incomplete => {
                return Ok(Decoded::Incomplete {
                    needed: buf.len() as u64 + 1,
                });
            }
            Varint::TooLong => return Err(self.bad("record count varint over 10 bytes".into())),
        };
        if count < 0 {
            return Err(self.bad(format!("negative record count {count}")));
        }
        let (size, size_len) = match read_long(&buf[count_len..]) {
            Varint::Value { value, len } => (value, len),
            Varint::Incomplete => {
                return Ok(Decoded::Incomplete {
                    needed: buf.len() as u64 + 1,
                });
            }
            Varint::TooLong => return Err(self.bad("byte size varint over 10 bytes".into())),
        };
        if size < 0 {
            return Err(self.bad(format!("negative byte size {size}")));
        }
        let size = size as u64;
        if size > self.max_data {
            return Err(Error::TooLarge {
                at: self.location().into(),
                what: "block",
                size,
                max: self.max_alloc,
            });
        }
        Ok(Decoded::Complete {
            value: (count as u64, count_len + size_len, size),
            len: count_len + size_len,
        })
    }

    /// Parses the block at the start of `buf`. An error does not advance
    /// the decoder.
    pub fn decode(&mut self, buf: &[u8]) -> Result<Decoded<RawBlock>> {
        let (count, start, size) = match self.head(buf)? {
            Decoded::Complete { value, .. } => value,
            Decoded::Incomplete { needed } => return Ok(Decoded::Incomplete { needed }),
        };
        // Both fit in usize: `size` is below isize::MAX / 2.
        let end = start + size as usize;
        let total = end + SYNC_LEN;
        let Some(sync) = buf.get(end..total) else {
            return Ok(Decoded::Incomplete {
                needed: total as u64,
            });
        };
        if sync != self.sync {
            return Err(Error::SyncMismatch {
                at: self.location().into(),
            });
        }
        let block = RawBlock {
            index: self.block,
            offset: self.offset,
            record_count: count,
            data: start..end,
        };
        // Saturating: the position may have been set to any number.
        self.block = self.block.saturating_add(1);
        self.offset = self.offset.saturating_add(total as u64);
        Ok(Decoded::Complete {
            value: block,
            len: total,
        })
    }

    /// Ends the file with `rest`, the bytes left over that did not make a
    /// block: nothing left is a clean end; anything else is
    /// [`Error::TruncatedBlock`] at the next block, saying what was cut
    /// (or the error `rest` itself decodes to).
    pub fn finish(&self, rest: &[u8]) -> Result<()> {
        if rest.is_empty() {
            return Ok(());
        }
        let mut probe = self.clone();
        let reason = match probe.decode(rest)? {
            Decoded::Complete { .. } => return Err(self.bad("a whole block left over".into())),
            Decoded::Incomplete { .. } => truncation_reason(rest),
        };
        Err(Error::TruncatedBlock {
            at: self.location().into(),
            reason,
        })
    }
}

/// Where a block whose first bytes are `rest` was cut.
fn truncation_reason(rest: &[u8]) -> &'static str {
    let Varint::Value { len: count_len, .. } = read_long(rest) else {
        return "the file ends inside the record count";
    };
    let Varint::Value {
        value: size,
        len: size_len,
    } = read_long(&rest[count_len..])
    else {
        return "the file ends inside the byte size";
    };
    let data_end = (count_len + size_len) as u64 + size as u64;
    cut_after_size(rest.len() as u64, data_end)
}

/// Where a block whose data ends `data_end` bytes from its start was cut,
/// `available` bytes from its start.
fn cut_after_size(available: u64, data_end: u64) -> &'static str {
    if available < data_end {
        "the file ends inside the block data"
    } else {
        "the file ends inside the sync marker"
    }
}

/// Options of a [`BlockReader`] (and of [`crate::AvroSource`]).
///
/// ```
/// use grist_avro_tensor::ReaderOptions;
/// use grist_tensor::Limits;
/// let options = ReaderOptions::default()
///     .with_limits(Limits::default().with_max_alloc_bytes(256 << 20))
///     .with_buffer_size(4 << 20);
/// # let _ = options;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReaderOptions {
    pub(crate) limits: Limits,
    pub(crate) buffer_size: usize,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            limits: Limits::default(),
            buffer_size: 1 << 20,
        }
    }
}

impl ReaderOptions {
    /// The limits on a header's size, a block's stored size and a block's
    /// decompressed size ([`Limits::max_alloc_bytes`]). By default,
    /// [`Limits::default`] (4 GiB).
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// How many bytes to read from the file at a time; the buffer grows
    /// beyond this only for blocks that do not fit, and only as their bytes
    /// arrive. Values below 64 are raised to 64, values above
    /// [`grist_tensor::MAX_IO_BUFFER`] lowered to it. By default, 1 MiB.
    #[must_use]
    pub fn with_buffer_size(mut self, bytes: usize) -> Self {
        self.buffer_size = bytes.clamp(64, grist_tensor::MAX_IO_BUFFER);
        self
    }

    /// The limits set.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}

/// One block of records, checked and decompressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// The block's number in its file (0-based).
    pub index: u64,
    /// The block's offset in the file (the position of its record count).
    pub offset: u64,
    /// The number, within the file, of the block's first record (the sum
    /// of the earlier blocks' counts).
    pub first_record: u64,
    /// The record count the block claims.
    pub record_count: u64,
    /// The serialized records, decompressed (for the `null` codec, a slice
    /// of the read buffer: no copy).
    pub data: Bytes,
    /// The block's size in the file: count and size varints, stored data
    /// and sync marker (fastavro's `block_reader` `total_size`).
    pub stored_bytes: u64,
    /// Whether the stored data was compressed (codec other than `null`).
    pub compressed: bool,
}

/// Reads the blocks of one object container file, checking each sync
/// marker and decompressing each block.
///
/// The header is read (and its codec checked against this build) when the
/// reader is made. The blocks before a damaged one are handed out first;
/// the error follows on the next call, after which the reader is finished
/// (later calls return `Ok(None)`).
///
/// ```
/// use grist_avro_tensor::{BlockReader, Codec, ContainerWriter, ReaderOptions, WriterOptions};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("longs.avro");
/// let options = WriterOptions::default().with_codec(Codec::Deflate).with_sync_interval(100);
/// let mut w = ContainerWriter::create(&path, r#""long""#, options)?;
/// for _ in 0..1000 {
///     w.append_datum(&[0x02])?; // the long 1: one byte per record
/// }
/// w.finish()?;
///
/// let mut reader = BlockReader::open(&path, ReaderOptions::default())?;
/// assert_eq!(reader.header().codec, Codec::Deflate);
/// let mut records = 0;
/// while let Some(block) = reader.next_block()? {
///     assert_eq!(block.first_record, records);
///     assert_eq!(block.data.len() as u64, block.record_count);
///     records += block.record_count;
/// }
/// assert_eq!(records, 1000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BlockReader<R: Read = Box<dyn Read + Send>> {
    input: R,
    header: Arc<Header>,
    header_len: u64,
    decoder: BlockDecoder,
    limits: Limits,
    /// Bytes read and not yet handed out, starting at a block boundary.
    buf: BytesMut,
    /// The whole input, for a reader made by
    /// [`from_bytes`](BlockReader::from_bytes): blocks are slices of it.
    whole: Option<Bytes>,
    read_size: usize,
    eof: bool,
    done: bool,
    records: u64,
    /// The last block's decompressed size: the next one's size hint.
    last_size: usize,
    /// The second of two deflate blocks inflated together, not yet handed
    /// out (or its error).
    pending: Option<Result<Block>>,
}

impl BlockReader {
    /// Opens the file at `path` and reads its header (see
    /// [`open_at`](Self::open_at)).
    pub fn open(path: impl AsRef<Path>, options: ReaderOptions) -> Result<Self> {
        BlockReader::open_at(&Storage::new(), &Address::from(path.as_ref()), options)
    }

    /// Opens the file or object at `address` (a path, or an object store
    /// URL) through `storage` and reads its header. A remote object is
    /// read with ranged requests issued ahead of the reader. Fails with
    /// [`Error::Storage`] when the storage cannot open it, else as
    /// [`new`](BlockReader::new) does.
    pub fn open_at(storage: &Storage, address: &Address, options: ReaderOptions) -> Result<Self> {
        let stream = Input::new(storage, address.clone()).reader_at(0)?;
        BlockReader::new(stream, address.name().clone(), options)
    }
}

impl BlockReader<std::io::Empty> {
    /// A reader over a whole file already in memory, naming it `name` in
    /// errors: nothing is copied, and blocks stored without compression
    /// are slices of `bytes`. Fails as [`BlockReader::new`] does.
    pub fn from_bytes(
        bytes: Bytes,
        name: impl Into<Arc<str>>,
        options: ReaderOptions,
    ) -> Result<Self> {
        let name: Arc<str> = name.into();
        let mut this = BlockReader::blank(std::io::empty(), name.clone(), &options);
        match Header::parse(&bytes, name.clone(), &options.limits)? {
            Decoded::Complete { value, len } => {
                this.whole = Some(bytes.slice(len..));
                this.eof = true;
                this.start(value, len, options.limits)?;
                Ok(this)
            }
            Decoded::Incomplete { .. } => Err(header_eof(&name, &bytes)),
        }
    }
}

impl<R: Read> BlockReader<R> {
    /// Reads the header from `reader`, naming it `name` in errors. Fails
    /// as [`Header::parse`] does, with [`Error::UnsupportedCodec`] for a
    /// codec not built in, and with [`Error::Io`].
    pub fn new(reader: R, name: impl Into<Arc<str>>, options: ReaderOptions) -> Result<Self> {
        let name: Arc<str> = name.into();
        let mut this = BlockReader::blank(reader, name.clone(), &options);
        loop {
            match Header::parse(&this.buf, name.clone(), &options.limits)? {
                Decoded::Complete { value, len } => {
                    let _ = this.buf.split_to(len);
                    this.start(value, len, options.limits)?;
                    return Ok(this);
                }
                Decoded::Incomplete { needed } => {
                    if this.eof {
                        return Err(header_eof(&name, &this.buf));
                    }
                    this.fill(needed)?;
                }
            }
        }
    }

    /// A reader that has read nothing yet.
    fn blank(input: R, name: Arc<str>, options: &ReaderOptions) -> Self {
        BlockReader {
            input,
            header: Arc::new(Header {
                schema_json: String::new(),
                codec: Codec::Null,
                metadata: BTreeMap::new(),
                sync: [0; SYNC_LEN],
            }),
            header_len: 0,
            decoder: BlockDecoder::new(name, [0; SYNC_LEN]).with_limits(options.limits),
            limits: options.limits,
            buf: BytesMut::new(),
            whole: None,
            read_size: options.buffer_size,
            eof: false,
            done: false,
            records: 0,
            last_size: 0,
            pending: None,
        }
    }

    /// Takes the parsed header (`len` bytes): blocks follow.
    fn start(&mut self, header: Header, len: usize, limits: Limits) -> Result<()> {
        let name = self.decoder.file().clone();
        header.codec.check_enabled(&name)?;
        self.decoder = BlockDecoder::new(name, header.sync)
            .with_limits(limits)
            .with_position(0, len as u64);
        self.header = Arc::new(header);
        self.header_len = len as u64;
        Ok(())
    }

    /// The file's header.
    pub fn header(&self) -> &Arc<Header> {
        &self.header
    }

    /// The header's length in bytes: the offset of block 0.
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// The name used in errors.
    pub fn name(&self) -> &Arc<str> {
        self.decoder.file()
    }

    /// How many blocks have been handed out.
    pub fn blocks_read(&self) -> u64 {
        self.decoder.block_index() - u64::from(self.pending.is_some())
    }

    /// How many records the blocks handed out claim, together.
    pub fn records_read(&self) -> u64 {
        self.records
    }

    /// The next block, or `None` at the end of the file.
    pub fn next_block(&mut self) -> Result<Option<Block>> {
        if self.done {
            return Ok(None);
        }
        let result = match self.pending.take() {
            Some(Ok(block)) => {
                self.records = self.records.saturating_add(block.record_count);
                Ok(Some(block))
            }
            Some(Err(e)) => Err(e),
            None => self.advance(),
        };
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result
    }

    fn advance(&mut self) -> Result<Option<Block>> {
        match self.next_frame()? {
            Some((raw, len)) if self.header.codec == Codec::Deflate => {
                self.emit_deflate(raw, len).map(Some)
            }
            Some((raw, len)) => self.emit(raw, len).map(Some),
            None => Ok(None),
        }
    }

    /// The next block's frame, whole in the buffer (reading until it
    /// is), and its length; `None` at the end of the file.
    fn next_frame(&mut self) -> Result<Option<(RawBlock, usize)>> {
        loop {
            let view = unread(&self.whole, &self.buf);
            let needed = match self.decoder.decode(view)? {
                Decoded::Complete { value, len } => return Ok(Some((value, len))),
                Decoded::Incomplete { needed } => needed,
            };
            if self.eof {
                self.decoder.finish(view)?;
                return Ok(None);
            }
            self.fill(needed)?;
        }
    }

    /// The records the file's blocks claim, together (those handed out
    /// and the rest): each remaining block's frame and sync marker read
    /// and checked, none decompressed, no datum walked (a block's count
    /// is a claim that only reading its datums checks). For counting a
    /// file cheaply.
    pub fn claimed_records(mut self) -> Result<u64> {
        let mut n = self.records;
        if let Some(pending) = self.pending.take() {
            n = n.saturating_add(pending?.record_count);
        }
        while let Some((raw, len)) = self.next_frame()? {
            let _ = self.cut(len);
            n = n.saturating_add(raw.record_count);
        }
        Ok(n)
    }

    /// [`claimed_records`](Self::claimed_records) for a file of `size`
    /// bytes that can be read at any offset (`read_at` fills a buffer from
    /// one): each remaining block's count and size, then its sync marker,
    /// read where they are, its data skipped. For counting a local file
    /// without reading all of it; the same checks and errors.
    pub fn claimed_records_at(
        mut self,
        size: u64,
        mut read_at: impl FnMut(u64, &mut [u8]) -> Result<()>,
    ) -> Result<u64> {
        let mut n = self.records;
        if let Some(pending) = self.pending.take() {
            n = n.saturating_add(pending?.record_count);
        }
        let d = &mut self.decoder;
        // A sync marker and the next block's count and size (two varints
        // of at most ten bytes each), read together: one read per block.
        const HEAD: usize = 20;
        let mut buf = [0u8; SYNC_LEN + HEAD];
        let mut head_len = 0;
        if d.offset < size {
            head_len = (size - d.offset).min(HEAD as u64) as usize;
            read_at(d.offset, &mut buf[SYNC_LEN..SYNC_LEN + head_len])?;
        }
        while d.offset < size {
            let at = d.offset;
            let head = &buf[SYNC_LEN..SYNC_LEN + head_len];
            let (count, start, data) = match d.head(head)? {
                Decoded::Complete { value, .. } => value,
                // The rest of the file is in `head`: it ends inside the
                // count or the size.
                Decoded::Incomplete { .. } => return d.finish(head).map(|()| n),
            };
            let sync_at = at + start as u64 + data;
            if sync_at.saturating_add(SYNC_LEN as u64) > size {
                return Err(Error::TruncatedBlock {
                    at: d.location().into(),
                    reason: cut_after_size(size - at, sync_at - at),
                });
            }
            let len = (size - sync_at).min(buf.len() as u64) as usize;
            read_at(sync_at, &mut buf[..len])?;
            if buf[..SYNC_LEN] != d.sync {
                return Err(Error::SyncMismatch {
                    at: d.location().into(),
                });
            }
            d.block = d.block.saturating_add(1);
            d.offset = sync_at + SYNC_LEN as u64;
            n = n.saturating_add(count);
            head_len = len - SYNC_LEN;
        }
        Ok(n)
    }

    /// Cuts the block off the buffer and decompresses it.
    fn emit(&mut self, raw: RawBlock, len: usize) -> Result<Block> {
        let frame = self.cut(len);
        self.finish_block(raw, frame, len)
    }

    /// The next `len` bytes of input, off the buffer.
    fn cut(&mut self, len: usize) -> Bytes {
        match &mut self.whole {
            Some(whole) => whole.split_to(len),
            None => self.buf.split_to(len).freeze(),
        }
    }

    /// Decompresses the block `raw` of `frame`.
    fn finish_block(&mut self, raw: RawBlock, frame: Bytes, len: usize) -> Result<Block> {
        let stored = frame.slice(raw.data.clone());
        let codec = self.header.codec;
        let data = if codec == Codec::Null {
            stored
        } else {
            let at = Location::block(self.decoder.file().clone(), raw.index);
            codec.decompress_bytes(&stored, self.last_size, &self.limits, &at)?
        };
        let first_record = self.records;
        self.records = first_record.saturating_add(raw.record_count);
        Ok(self.block(raw, data, len, first_record))
    }

    /// The block `raw` with its `data` (its size the next block's hint).
    fn block(&mut self, raw: RawBlock, data: Bytes, len: usize, first_record: u64) -> Block {
        self.last_size = data.len();
        Block {
            index: raw.index,
            offset: raw.offset,
            first_record,
            record_count: raw.record_count,
            data,
            stored_bytes: len as u64,
            compressed: self.header.codec != Codec::Null,
        }
    }

    /// Cuts a deflate block off the buffer and, when the next block is
    /// whole in the buffer (or after one more read), that one too, and
    /// inflates both together ([`Codec::decompress_two_bytes`]); the
    /// second waits in `pending`. Anything wrong with the second block is
    /// left for the next call to find.
    fn emit_deflate(&mut self, raw: RawBlock, len: usize) -> Result<Block> {
        let first = self.cut(len);
        let mut next = self.decoder.clone();
        let mut decoded = next.decode(unread(&self.whole, &self.buf));
        if let Ok(Decoded::Incomplete { needed }) = decoded
            && !self.eof
            && self.fill(needed).is_ok()
        {
            // One more read; an I/O error is found again next time.
            decoded = next.decode(unread(&self.whole, &self.buf));
        }
        let Ok(Decoded::Complete {
            value: raw2,
            len: len2,
        }) = decoded
        else {
            return self.finish_block(raw, first, len);
        };
        self.decoder = next;
        let frame2 = self.cut(len2);
        let file = self.decoder.file().clone();
        let at = [
            Location::block(file.clone(), raw.index),
            Location::block(file, raw2.index),
        ];
        let [a, b] = Codec::Deflate.decompress_two_bytes(
            [&first[raw.data.clone()], &frame2[raw2.data.clone()]],
            self.last_size,
            &self.limits,
            [&at[0], &at[1]],
        );
        // The second block's records count once it is handed out.
        let first_record = self.records;
        let later_first = first_record.saturating_add(raw.record_count);
        let block = self.block(raw, a?, len, first_record);
        self.records = later_first;
        self.pending = Some(b.map(|data| self.block(raw2, data, len2, later_first)));
        Ok(block)
    }

    /// Reads until the buffer holds `needed` bytes or the input ends,
    /// growing it only as bytes arrive.
    fn fill(&mut self, needed: u64) -> Result<()> {
        if self.whole.is_some() {
            // All the input there is, is there.
            self.eof = true;
            return Ok(());
        }
        let needed = usize::try_from(needed).unwrap_or(usize::MAX);
        while self.buf.len() < needed && !self.eof {
            let start = self.buf.len();
            self.buf.resize(start + self.read_size, 0);
            let n = loop {
                match self.input.read(&mut self.buf[start..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(source) => {
                        self.buf.truncate(start);
                        let file = self.decoder.file();
                        // The storage layer's own errors name their URL
                        // and bytes.
                        return Err(match StorageError::from_io(file, source) {
                            Ok(e) => Error::Storage(e),
                            Err(source) => Error::Io {
                                file: file.clone(),
                                source,
                            },
                        });
                    }
                }
            };
            self.buf.truncate(start + n);
            if n == 0 {
                self.eof = true;
            }
        }
        Ok(())
    }

    /// An iterator over the remaining blocks. It ends after the first
    /// error.
    pub fn blocks(self) -> Blocks<R> {
        Blocks { reader: self }
    }
}

/// The input a reader holds and has not handed out: the rest of a whole
/// input, else its buffer.
fn unread<'a>(whole: &'a Option<Bytes>, buf: &'a BytesMut) -> &'a [u8] {
    match whole {
        Some(whole) => whole,
        None => buf,
    }
}

impl<R: Read> fmt::Debug for BlockReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockReader")
            .field("name", self.decoder.file())
            .field("codec", &self.header.codec)
            .field("blocks_read", &self.decoder.block_index())
            .field("offset", &self.decoder.offset())
            .finish_non_exhaustive()
    }
}

/// The iterator of [`BlockReader::blocks`].
#[derive(Debug)]
pub struct Blocks<R: Read> {
    reader: BlockReader<R>,
}

impl<R: Read> Blocks<R> {
    /// The reader underneath.
    pub fn reader(&self) -> &BlockReader<R> {
        &self.reader
    }
}

impl<R: Read> Iterator for Blocks<R> {
    type Item = Result<Block>;

    fn next(&mut self) -> Option<Self::Item> {
        self.reader.next_block().transpose()
    }
}

impl<R: Read> std::iter::FusedIterator for Blocks<R> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        for v in [0i64, 1, -1, 63, -64, 64, 1 << 40, i64::MAX, i64::MIN] {
            let mut buf = Vec::new();
            write_long(&mut buf, v);
            assert!(buf.len() <= MAX_VARINT_LEN);
            match read_long(&buf) {
                Varint::Value { value, len } => assert_eq!((value, len), (v, buf.len())),
                _ => panic!("{v}"),
            }
            assert!(matches!(
                read_long(&buf[..buf.len() - 1]),
                Varint::Incomplete
            ));
        }
        // Eleven bytes, or a tenth byte above 1: not a long.
        assert!(matches!(read_long(&[0x80; 11]), Varint::TooLong));
        let mut ten = vec![0xff; 9];
        ten.push(0x02);
        assert!(matches!(read_long(&ten), Varint::TooLong));
        assert!(matches!(read_long(&[0x80; 10]), Varint::TooLong));
    }

    #[test]
    fn block_decoder_checks() {
        let sync = [7u8; SYNC_LEN];
        let mut d = BlockDecoder::new("t", sync);
        assert_eq!(d.decode(&[]).unwrap(), Decoded::Incomplete { needed: 1 });
        // count 1, size 2: needs 1 + 1 + 2 + 16 bytes.
        assert_eq!(
            d.decode(&[2, 4]).unwrap(),
            Decoded::Incomplete { needed: 20 }
        );
        assert!(matches!(d.decode(&[1, 0]), Err(Error::BadBlock { .. })));
        assert!(matches!(d.decode(&[2, 3]), Err(Error::BadBlock { .. })));
        let mut block = vec![2, 4, 9, 9];
        block.extend_from_slice(&sync);
        let Decoded::Complete { value, len } = d.decode(&block).unwrap() else {
            panic!()
        };
        assert_eq!((value.record_count, value.data, len), (1, 2..4, 20));
        assert_eq!((d.block_index(), d.offset()), (1, 20));
        block[5] ^= 1;
        assert!(matches!(
            d.decode(&block),
            Err(Error::SyncMismatch { at }) if at.block.unwrap() == 1
        ));
        assert!(matches!(
            d.finish(&block[..3]),
            Err(Error::TruncatedBlock {
                reason: "the file ends inside the block data",
                ..
            })
        ));
        assert!(d.finish(&[]).is_ok());
    }
}
