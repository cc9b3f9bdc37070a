//! TFRecord framing: the sans-I/O [`FrameDecoder`] and the streaming
//! [`RecordReader`] built on it.
//!
//! A frame is
//!
//! ```text
//! u64 LE   length
//! u32 LE   masked CRC32C of the 8 length bytes
//! [u8]     payload (length bytes)
//! u32 LE   masked CRC32C of the payload
//! ```
//!
//! and the errors are raised exactly where TensorFlow raises
//! `DataLossError`: a bad length CRC at the record's start offset, a bad
//! data CRC at the payload's offset, a stream that ends inside a frame at
//! the record's start offset.

use std::fmt;
use std::io::{self, Read};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use grist_io::{Address, Storage};
use grist_tensor::{Input, Limits};

use crate::compression::{CompressedReader, Compression};
use crate::error::{Error, Result};
use grist_tensor::Location;

/// Bytes before the payload: the length and its CRC.
pub const HEADER_LEN: usize = 12;
/// Bytes after the payload: its CRC.
pub const FOOTER_LEN: usize = 4;
/// Header plus footer: a frame is its payload plus this many bytes.
pub const FRAME_OVERHEAD: usize = HEADER_LEN + FOOTER_LEN;

const MASK_DELTA: u32 = 0xa282_ead8;

/// The masked CRC32C TFRecord stores: `((crc >> 15) | (crc << 17)) +
/// 0xa282ead8`, wrapping, of the CRC32C (Castagnoli) of `data`.
///
/// ```
/// use grist_tfrecord::masked_crc32c;
/// // The header and footer TensorFlow writes for an empty record:
/// // 00000000 00000000 29039807 d8ea82a2.
/// assert_eq!(masked_crc32c(&0u64.to_le_bytes()), 0x0798_0329);
/// assert_eq!(masked_crc32c(b""), 0xa282_ead8);
/// ```
pub fn masked_crc32c(data: &[u8]) -> u32 {
    mask_crc(crc32c::crc32c(data))
}

/// Whether the payload `data[payload]` of a frame matches the data CRC
/// stored in the 4 bytes after it: the check a [`FrameDecoder`] made
/// `with_data_check(false)` leaves to its caller. False when the footer is
/// not within `data`.
///
/// ```
/// use grist_tfrecord::{data_crc_matches, FrameDecoder, Decoded, RecordWriter};
/// let mut w = RecordWriter::new(Vec::new());
/// w.write_record(b"hello")?;
/// let (mut bytes, _) = w.finish_into_inner()?;
/// let Decoded::Frame(f) = FrameDecoder::new("").decode(&bytes)? else { unreachable!() };
/// assert!(data_crc_matches(&bytes, f.payload.clone()));
/// bytes[f.payload.start] ^= 1;
/// assert!(!data_crc_matches(&bytes, f.payload));
/// # Ok::<(), grist_tfrecord::Error>(())
/// ```
pub fn data_crc_matches(data: &[u8], payload: std::ops::Range<usize>) -> bool {
    let footer = payload.end..payload.end.saturating_add(FOOTER_LEN);
    match (data.get(payload), data.get(footer)) {
        (Some(p), Some(f)) => {
            masked_crc32c(p) == u32::from_le_bytes(f.try_into().unwrap_or_default())
        }
        _ => false,
    }
}

/// Masks a CRC32C the way TFRecord (and LevelDB) do.
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Undoes [`mask_crc`].
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// Writes the 12-byte header of a frame with a `len`-byte payload.
pub(crate) fn frame_header(len: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&len.to_le_bytes());
    let crc = masked_crc32c(&h[..8]);
    h[8..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Options of a [`RecordReader`] (and of the readers built on the same
/// framing: [`crate::IndexedReader`], [`crate::TfRecordSource`]).
///
/// ```
/// use grist_tfrecord::{Compression, ReaderOptions};
/// let options = ReaderOptions::default()
///     .with_compression(Some(Compression::Gzip))
///     .with_check_crc(false);
/// # let _ = options;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReaderOptions {
    pub(crate) compression: Option<Compression>,
    pub(crate) check_crc: bool,
    pub(crate) limits: Limits,
    pub(crate) buffer_size: usize,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            compression: None,
            check_crc: true,
            limits: Limits::default(),
            buffer_size: 1 << 20,
        }
    }
}

impl ReaderOptions {
    /// The compression of the files opened by path; `None` derives it from
    /// the extension ([`Compression::from_path`]). By default, `None`.
    #[must_use]
    pub fn with_compression(mut self, compression: Option<Compression>) -> Self {
        self.compression = compression;
        self
    }

    /// Whether to check the masked CRC32Cs of lengths and payloads; turning
    /// it off skips both checks for speed (damage then shows up, if at all,
    /// as a truncated record or an over-long length). By default, `true`
    /// (TensorFlow always checks).
    #[must_use]
    pub fn with_check_crc(mut self, check_crc: bool) -> Self {
        self.check_crc = check_crc;
        self
    }

    /// The limits checked before any allocation sized by a record length.
    /// By default, [`Limits::default`] (records up to 1 GiB).
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// How many bytes to read from the (decompressed) stream at a time; the
    /// buffer grows beyond this only for records that do not fit, and only
    /// as their bytes arrive. Values below 64 are raised to 64, values
    /// above [`grist_tensor::MAX_IO_BUFFER`] lowered to it. By default,
    /// 1 MiB.
    #[must_use]
    pub fn with_buffer_size(mut self, bytes: usize) -> Self {
        self.buffer_size = bytes.clamp(64, grist_tensor::MAX_IO_BUFFER);
        self
    }

    /// The compression for a file at `path`: the one set, or the one its
    /// extension implies.
    pub fn compression_for(&self, path: &Path) -> Compression {
        self.compression
            .unwrap_or_else(|| Compression::from_path(path))
    }
}

/// A frame found by [`FrameDecoder::decode`], relative to the start of the
/// buffer it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Where the payload lies in the buffer.
    pub payload: Range<usize>,
    /// The frame's total length (payload plus [`FRAME_OVERHEAD`]): the
    /// number of bytes to consume.
    pub len: usize,
}

/// What [`FrameDecoder::decode`] found at the start of a buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A whole, checked frame.
    Frame(Frame),
    /// The buffer holds only part of a frame: at least `needed` bytes
    /// (counted from the buffer's start) are needed to go on.
    Incomplete {
        /// The number of bytes the buffer must hold.
        needed: u64,
    },
}

/// The sans-I/O TFRecord frame parser.
///
/// It knows where it is in a stream (record number, byte offset), so its
/// errors carry TensorFlow's offsets. Give [`decode`](Self::decode) a
/// buffer that starts at the next record boundary; on
/// [`Decoded::Frame`] it advances by one record and the caller drops
/// `frame.len` bytes from the buffer. At the end of the input, call
/// [`finish`](Self::finish) with the number of bytes left over.
///
/// ```
/// use grist_tfrecord::{Decoded, FrameDecoder, RecordWriter};
///
/// let mut w = RecordWriter::new(Vec::new());
/// w.write_record(b"hello")?;
/// let (bytes, _) = w.finish_into_inner()?;
///
/// let mut dec = FrameDecoder::new("mem");
/// assert_eq!(dec.decode(&bytes[..7])?, Decoded::Incomplete { needed: 12 });
/// let Decoded::Frame(frame) = dec.decode(&bytes)? else { unreachable!() };
/// assert_eq!(&bytes[frame.payload], b"hello");
/// assert_eq!(frame.len, bytes.len());
/// dec.finish(0)?;
/// # Ok::<(), grist_tfrecord::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct FrameDecoder {
    file: Arc<str>,
    record: u64,
    offset: u64,
    check_crc: bool,
    /// Whether the data CRC is checked here (else by the caller).
    check_data: bool,
    /// The largest payload accepted (record and allocation limits).
    max_len: u64,
}

impl FrameDecoder {
    /// A decoder at the start of the stream of `file` (the name used in
    /// errors; may be empty), checking CRCs, with default limits.
    pub fn new(file: impl Into<Arc<str>>) -> Self {
        FrameDecoder {
            file: file.into(),
            record: 0,
            offset: 0,
            check_crc: true,
            check_data: true,
            max_len: 0,
        }
        .with_limits(Limits::default())
    }

    /// A decoder configured by `options` (CRC checking, limits).
    pub fn with_options(file: impl Into<Arc<str>>, options: &ReaderOptions) -> Self {
        FrameDecoder::new(file)
            .with_check_crc(options.check_crc)
            .with_limits(options.limits)
    }

    /// Whether to check both CRCs. By default, `true`.
    #[must_use]
    pub fn with_check_crc(mut self, check_crc: bool) -> Self {
        self.check_crc = check_crc;
        self
    }

    /// Whether [`decode`](Self::decode) checks the data CRC too (when CRCs
    /// are checked at all). Turn it off to check payloads elsewhere, e.g.
    /// on the threads that parse them, with [`data_crc_matches`]: the
    /// length CRC is still checked here, since framing depends on it. By
    /// default, `true`.
    #[must_use]
    pub fn with_data_check(mut self, check: bool) -> Self {
        self.check_data = check;
        self
    }

    /// [`with_data_check`](Self::with_data_check) for a decoder in use:
    /// from the next frame on.
    pub fn set_data_check(&mut self, check: bool) {
        self.check_data = check;
    }

    /// The limits on a record's length. By default, [`Limits::default`].
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        let record = limits.max_record_bytes();
        let alloc = limits
            .max_alloc_bytes()
            .saturating_sub(FRAME_OVERHEAD as u64);
        // The whole frame must also fit in memory on this platform.
        let addressable = (isize::MAX as u64).saturating_sub(FRAME_OVERHEAD as u64);
        self.max_len = record.min(alloc).min(addressable);
        self
    }

    /// Starts at record number `record`, byte `offset` of the stream
    /// (a record boundary), e.g. for a frame found through an index. By
    /// default, record 0 at offset 0.
    #[must_use]
    pub fn with_position(mut self, record: u64, offset: u64) -> Self {
        self.record = record;
        self.offset = offset;
        self
    }

    /// The number of the next record (= the records decoded so far, when
    /// started at 0).
    pub fn record_index(&self) -> u64 {
        self.record
    }

    /// The stream offset of the next record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The file name used in errors.
    pub fn file(&self) -> &Arc<str> {
        &self.file
    }

    fn at(&self) -> Location {
        Location::record(self.file.clone(), self.record)
    }

    /// Parses the frame at the start of `buf`.
    ///
    /// Checks, in TensorFlow's order: the length CRC ([`Error::CorruptLength`]
    /// at the record's offset), the length against the limits
    /// ([`Error::RecordTooLarge`]), then, once the whole frame is there, the
    /// data CRC ([`Error::CorruptData`] at the payload's offset). An error
    /// does not advance the decoder.
    pub fn decode(&mut self, buf: &[u8]) -> Result<Decoded> {
        let Some(header) = buf.first_chunk::<HEADER_LEN>() else {
            return Ok(Decoded::Incomplete {
                needed: HEADER_LEN as u64,
            });
        };
        let (len_bytes, crc_bytes) = header.split_at(8);
        if self.check_crc {
            let stored = u32::from_le_bytes(crc_bytes.try_into().unwrap_or_default());
            if masked_crc32c(len_bytes) != stored {
                return Err(Error::CorruptLength {
                    at: self.at().into(),
                    offset: self.offset,
                });
            }
        }
        let len = u64::from_le_bytes(len_bytes.try_into().unwrap_or_default());
        self.check_len(len)?;
        // `len <= isize::MAX - 16`, so these fit in usize and u64.
        let payload_len = len as usize;
        let frame_len = payload_len + FRAME_OVERHEAD;
        let Some(frame) = buf.get(..frame_len) else {
            return Ok(Decoded::Incomplete {
                needed: frame_len as u64,
            });
        };
        let payload = HEADER_LEN..HEADER_LEN + payload_len;
        if self.check_crc && self.check_data {
            let footer = frame
                .last_chunk::<FOOTER_LEN>()
                .copied()
                .unwrap_or_default();
            if masked_crc32c(&frame[payload.clone()]) != u32::from_le_bytes(footer) {
                return Err(Error::CorruptData {
                    at: self.at().into(),
                    offset: self.offset.saturating_add(HEADER_LEN as u64),
                });
            }
        }
        self.record = self.record.saturating_add(1);
        self.offset = self.offset.saturating_add(frame_len as u64);
        Ok(Decoded::Frame(Frame {
            payload,
            len: frame_len,
        }))
    }

    /// Checks a payload length against the limits.
    pub(crate) fn check_len(&self, len: u64) -> Result<()> {
        if len > self.max_len {
            return Err(Error::RecordTooLarge {
                at: self.at().into(),
                len,
                max: self.max_len,
            });
        }
        Ok(())
    }

    /// Ends the stream with `remaining` bytes left that did not make a
    /// frame: nothing left is a clean end, anything else a
    /// [`Error::Truncated`] at the record's offset.
    pub fn finish(&self, remaining: usize) -> Result<()> {
        if remaining == 0 {
            Ok(())
        } else {
            Err(Error::Truncated {
                at: self.at().into(),
                offset: self.offset,
            })
        }
    }
}

/// Reads the records of a TFRecord stream one at a time, in large blocks,
/// into one reusable buffer.
///
/// ```no_run
/// use grist_tfrecord::{ReaderOptions, RecordReader};
///
/// let mut reader = RecordReader::open("train.tfrecord.gz", ReaderOptions::default())?;
/// while let Some(payload) = reader.next_record()? {
///     let len = payload.len();
///     println!("record {} at {}: {len} bytes", reader.record_index(), reader.offset());
/// }
/// # Ok::<(), grist_tfrecord::Error>(())
/// ```
pub struct RecordReader<R: Read = Box<dyn Read + Send>> {
    input: CompressedReader<R>,
    decoder: FrameDecoder,
    buf: Vec<u8>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    block: usize,
    eof: bool,
    /// Set after the end or an error: later calls return `Ok(None)`.
    done: bool,
    last_record: u64,
    last_offset: u64,
}

impl RecordReader {
    /// Opens the file at `path`, with the compression set in `options` or
    /// implied by the extension (see [`open_at`](Self::open_at)).
    pub fn open(path: impl AsRef<Path>, options: ReaderOptions) -> Result<Self> {
        RecordReader::open_at(&Storage::new(), &Address::from(path.as_ref()), options)
    }

    /// Opens the file or object at `address` (a path, or an object store
    /// URL) through `storage`, with the compression set in `options` or
    /// implied by its name's extension. A remote object is read with
    /// ranged requests issued ahead of the reader. Fails with
    /// [`Error::Storage`] when the storage cannot open it.
    pub fn open_at(storage: &Storage, address: &Address, options: ReaderOptions) -> Result<Self> {
        let input = Input::new(storage, address.clone());
        let stream = input.reader_at(0)?;
        let compression = options.compression_for(Path::new(address.as_str()));
        RecordReader::new(stream, address.name().clone(), compression, options)
    }
}

impl<R: Read> RecordReader<R> {
    /// Reads the stream `reader`, compressed with `compression` (which
    /// overrides `options`' compression), naming it `name` in errors.
    pub fn new(
        reader: R,
        name: impl Into<Arc<str>>,
        compression: Compression,
        options: ReaderOptions,
    ) -> Result<Self> {
        let decoder = FrameDecoder::with_options(name, &options);
        let input = compression.reader(reader)?;
        Ok(RecordReader {
            input,
            decoder,
            buf: Vec::new(),
            start: 0,
            end: 0,
            block: options.buffer_size,
            eof: false,
            done: false,
            last_record: 0,
            last_offset: 0,
        })
    }

    /// The next record's payload, or `None` at the end of the stream.
    ///
    /// The payload borrows the reader's buffer. After an error, the reader
    /// is finished: later calls return `Ok(None)`.
    pub fn next_record(&mut self) -> Result<Option<&[u8]>> {
        if self.done {
            return Ok(None);
        }
        match self.advance() {
            Ok(Some(range)) => Ok(Some(&self.buf[range])),
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    /// Finds the next frame and returns its payload's range in `buf`.
    fn advance(&mut self) -> Result<Option<Range<usize>>> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        loop {
            let offset = self.decoder.offset();
            let record = self.decoder.record_index();
            let needed = match self.decoder.decode(&self.buf[self.start..self.end])? {
                Decoded::Frame(frame) => {
                    let payload = self.start + frame.payload.start..self.start + frame.payload.end;
                    self.start += frame.len;
                    self.last_record = record;
                    self.last_offset = offset;
                    return Ok(Some(payload));
                }
                Decoded::Incomplete { needed } => needed,
            };
            if self.eof {
                self.decoder.finish(self.end - self.start)?;
                return Ok(None);
            }
            // `needed` is bounded by the limits (and isize::MAX) here.
            let needed = usize::try_from(needed).unwrap_or(usize::MAX);
            self.fill(needed)?;
        }
    }

    /// Reads until `buf[start..end]` holds `needed` bytes or the input ends,
    /// growing the buffer only as bytes arrive.
    fn fill(&mut self, needed: usize) -> Result<()> {
        // Move the unread tail to the front when the frame would not fit
        // behind it.
        if self.start > 0 && self.start + needed > self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end - self.start < needed {
            if self.end == self.buf.len() {
                // The buffer is full of bytes that did arrive: at most
                // double it (or make it one block), never jump straight to
                // the `needed` an untrusted length asks for.
                let cur = self.buf.len();
                let target = cur
                    .saturating_mul(2)
                    .max(self.block)
                    .min(needed.max(self.block))
                    .max(cur + 1);
                self.buf.resize(target, 0);
            }
            let n = loop {
                match self.input.read(&mut self.buf[self.end..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(self.read_error(e)),
                }
            };
            if n == 0 {
                self.eof = true;
                return Ok(());
            }
            self.end += n;
        }
        Ok(())
    }

    fn read_error(&self, source: io::Error) -> Error {
        read_error(
            self.decoder.file(),
            self.decoder.record_index(),
            self.input.compression(),
            source,
        )
    }

    /// The number of the record last returned by
    /// [`next_record`](Self::next_record) (0-based; 0 before the first).
    pub fn record_index(&self) -> u64 {
        self.last_record
    }

    /// The byte offset, in the decompressed stream, of the frame of the
    /// record last returned (0 before the first).
    pub fn offset(&self) -> u64 {
        self.last_offset
    }

    /// How many records have been returned so far.
    pub fn records_read(&self) -> u64 {
        self.decoder.record_index()
    }

    /// The stream's name, as used in errors.
    pub fn name(&self) -> &Arc<str> {
        self.decoder.file()
    }

    /// An iterator over the remaining records as owned [`Bytes`] (one
    /// allocation per record; use [`next_record`](Self::next_record) to
    /// avoid it). It ends after the first error.
    pub fn records(self) -> Records<R> {
        Records { reader: self }
    }
}

/// Classifies a read error: under compression, bad or cut data is a
/// [`Error::Decompress`]; anything else is an [`Error::Io`].
pub(crate) fn read_error(
    file: &Arc<str>,
    record: u64,
    compression: Compression,
    source: io::Error,
) -> Error {
    // The storage layer's own errors (a remote read that failed for good)
    // name their URL and bytes.
    let source = match grist_tensor::StorageError::from_io(file, source) {
        Ok(e) => return Error::Storage(e),
        Err(source) => source,
    };
    let inflate_error = matches!(
        source.kind(),
        io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
    );
    if compression != Compression::None && inflate_error {
        Error::Decompress {
            at: Location::record(file.clone(), record).into(),
            source,
        }
    } else {
        Error::Io {
            file: file.clone(),
            source,
        }
    }
}

impl<R: Read> fmt::Debug for RecordReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordReader")
            .field("name", self.decoder.file())
            .field("compression", &self.input.compression())
            .field("records_read", &self.decoder.record_index())
            .field("offset", &self.decoder.offset())
            .finish_non_exhaustive()
    }
}

/// The owned iterator of [`RecordReader::records`].
#[derive(Debug)]
pub struct Records<R: Read> {
    reader: RecordReader<R>,
}

impl<R: Read> Records<R> {
    /// The reader underneath.
    pub fn reader(&self) -> &RecordReader<R> {
        &self.reader
    }
}

impl<R: Read> Iterator for Records<R> {
    type Item = Result<Bytes>;

    fn next(&mut self) -> Option<Self::Item> {
        self.reader
            .next_record()
            .map(|r| r.map(Bytes::copy_from_slice))
            .transpose()
    }
}

impl<R: Read> std::iter::FusedIterator for Records<R> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_value() {
        // The CRC-32C check value (RFC 3720 / the CRC catalogue).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn mask_known_vectors() {
        // LevelDB's crc32c_test: Mask(crc) != crc, and unmask inverts it.
        for crc in [0u32, 1, 0xe306_9283, 0xffff_ffff, 0x8000_0000] {
            assert_eq!(unmask_crc(mask_crc(crc)), crc);
            assert_ne!(mask_crc(crc), crc);
            assert_ne!(mask_crc(mask_crc(crc)), mask_crc(crc));
        }
        // By the formula, for the check value and the ends of the range.
        assert_eq!(mask_crc(0), 0xa282_ead8);
        assert_eq!(mask_crc(0xffff_ffff), 0xa282_ead7);
        // The formula as TensorFlow's crc32c.h spells it.
        let crc = 0xe306_9283_u32;
        #[allow(clippy::manual_rotate)]
        let formula = ((crc >> 15) | (crc << 17)).wrapping_add(0xa282_ead8);
        assert_eq!(mask_crc(crc), formula);
        assert_eq!(masked_crc32c(b"123456789"), 0xc78a_b0e5);
        // As TensorFlow writes them for an empty record (header, footer).
        assert_eq!(masked_crc32c(&[0; 8]), 0x0798_0329);
        assert_eq!(masked_crc32c(b""), 0xa282_ead8);
    }

    #[test]
    fn decoder_on_tiny_inputs() {
        let mut d = FrameDecoder::new("t");
        for n in 0..HEADER_LEN {
            let buf = vec![0u8; n];
            assert_eq!(d.decode(&buf).unwrap(), Decoded::Incomplete { needed: 12 });
        }
        // Twelve zero bytes: length 0, but the stored CRC (0) is wrong.
        assert!(matches!(
            d.decode(&[0u8; 12]),
            Err(Error::CorruptLength { offset: 0, .. })
        ));
        assert!(d.finish(0).is_ok());
        assert!(matches!(
            d.finish(3),
            Err(Error::Truncated { offset: 0, .. })
        ));
    }

    #[test]
    fn empty_record_frame() {
        let mut frame = frame_header(0).to_vec();
        frame.extend_from_slice(&masked_crc32c(b"").to_le_bytes());
        let mut d = FrameDecoder::new("");
        assert_eq!(
            d.decode(&frame).unwrap(),
            Decoded::Frame(Frame {
                payload: 12..12,
                len: 16
            })
        );
        assert_eq!((d.record_index(), d.offset()), (1, 16));
    }
}
