//! OFRecord framing: an 8-byte signed little-endian length, then the
//! payload; records simply follow each other to the end of the file.
//!
//! [`FrameDecoder`] is the sans-I/O state machine; [`RecordReader`] drives
//! it over any [`Read`].

use std::io::{self, Read};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use grist_io::{Address, Object, Storage};
use grist_tensor::{Limits, StorageError};

use crate::error::{Error, Result};
use grist_tensor::Location;

/// The size of a record's length prefix.
pub const LENGTH_PREFIX: usize = 8;

/// How records are framed and bounded.
///
/// ```
/// use grist_ofrecord::ReaderOptions;
/// let strict = ReaderOptions::default().with_zero_length(false);
/// # let _ = strict;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderOptions {
    limits: Limits,
    zero_length: bool,
    buffer_size: usize,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            limits: Limits::default(),
            zero_length: true,
            buffer_size: 256 << 10,
        }
    }
}

impl ReaderOptions {
    /// The limits on record sizes and allocations. By default,
    /// [`Limits::default`].
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether a zero length (an OFRecord with no features, which
    /// serializes to nothing) is a valid record. OneFlow's reader aborts on
    /// it; `false` mimics that with [`Error::InvalidLength`]. By default,
    /// `true`.
    #[must_use]
    pub fn with_zero_length(mut self, accept: bool) -> Self {
        self.zero_length = accept;
        self
    }

    /// How many bytes a reader asks of its input at a time. Values below
    /// 16 are raised to 16, values above [`grist_tensor::MAX_IO_BUFFER`]
    /// lowered to it. By default, 256 KiB.
    #[must_use]
    pub fn with_buffer_size(mut self, bytes: usize) -> Self {
        self.buffer_size = bytes.clamp(16, grist_tensor::MAX_IO_BUFFER);
        self
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether zero-length records are accepted.
    pub fn zero_length(&self) -> bool {
        self.zero_length
    }

    /// The read size.
    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }
}

/// One record found by [`FrameDecoder::decode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Where the payload lies in the buffer given to `decode`.
    pub payload: Range<usize>,
    /// The bytes the record takes, length prefix included.
    pub len: usize,
}

/// What [`FrameDecoder::decode`] found at the start of its buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A whole record.
    Frame(Frame),
    /// The record needs `needed` bytes in all (prefix included); the buffer
    /// holds fewer.
    Incomplete {
        /// The bytes the record takes.
        needed: u64,
    },
}

/// The framing state machine: give it the bytes from the current position
/// of a file, it finds the next record or says how many bytes it needs. It
/// counts records and bytes, so errors name the record and the offset of
/// its length prefix.
///
/// ```
/// use grist_ofrecord::{Decoded, FrameDecoder};
///
/// let mut data = 3i64.to_le_bytes().to_vec();
/// data.extend_from_slice(b"abc");
/// let mut frames = FrameDecoder::new("mem");
/// match frames.decode(&data)? {
///     Decoded::Frame(f) => assert_eq!(&data[f.payload], b"abc"),
///     other => panic!("{other:?}"),
/// }
/// frames.finish(&[])?;
/// assert!(frames.finish(&[1, 2]).is_err());
/// # Ok::<(), grist_ofrecord::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct FrameDecoder {
    file: Arc<str>,
    record: u64,
    offset: u64,
    /// The bytes from `offset` to the end of the file, when known.
    remaining: Option<u64>,
    limits: Limits,
    zero_length: bool,
}

impl FrameDecoder {
    /// A decoder at the start of `file`, with default options.
    pub fn new(file: impl Into<Arc<str>>) -> Self {
        Self::with_options(file, &ReaderOptions::default())
    }

    /// A decoder at the start of `file`.
    pub fn with_options(file: impl Into<Arc<str>>, options: &ReaderOptions) -> Self {
        FrameDecoder {
            file: file.into(),
            record: 0,
            offset: 0,
            remaining: None,
            limits: options.limits,
            zero_length: options.zero_length,
        }
    }

    /// Starts counting at record `record`, byte `offset` of the file. By
    /// default, record 0 at byte 0.
    #[must_use]
    pub fn with_position(mut self, record: u64, offset: u64) -> Self {
        if let Some(r) = &mut self.remaining {
            *r = r.saturating_sub(offset.saturating_sub(self.offset));
        }
        self.record = record;
        self.offset = offset;
        self
    }

    /// Tells the decoder how many bytes the input holds from its current
    /// position to its end, so that a length running past the end is
    /// reported as truncation at once (before any limit check and without
    /// waiting for the bytes). By default, unknown.
    #[must_use]
    pub fn with_remaining(mut self, bytes: u64) -> Self {
        self.remaining = Some(bytes);
        self
    }

    /// The number of the next record within the file.
    pub fn record_index(&self) -> u64 {
        self.record
    }

    /// The byte offset of the next record's length prefix.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The file name used in errors.
    pub fn file(&self) -> &Arc<str> {
        &self.file
    }

    fn at(&self) -> Location {
        Location::record(self.file.clone(), self.record).with_offset(self.offset)
    }

    /// Finds the record at the start of `buf`. On [`Decoded::Frame`] the
    /// decoder moves past it; on an error or `Incomplete` it stays, so the
    /// same call can be repeated with more bytes.
    pub fn decode(&mut self, buf: &[u8]) -> Result<Decoded> {
        let Some(prefix) = buf.first_chunk::<LENGTH_PREFIX>() else {
            if let Some(rest) = self.remaining {
                if rest > 0 && rest < LENGTH_PREFIX as u64 && rest <= buf.len() as u64 {
                    return Err(self.truncated_length(rest));
                }
            }
            return Ok(Decoded::Incomplete {
                needed: LENGTH_PREFIX as u64,
            });
        };
        let len = i64::from_le_bytes(*prefix);
        if len < 0 || (len == 0 && !self.zero_length) {
            return Err(Error::InvalidLength {
                at: self.at().into(),
                len,
            });
        }
        let len = len as u64;
        if let Some(rest) = self.remaining {
            let available = rest.saturating_sub(LENGTH_PREFIX as u64);
            if len > available {
                return Err(self.truncated_payload(len, available));
            }
        }
        if len > self.limits.max_record_bytes() {
            return Err(Error::RecordTooLarge {
                at: self.at().into(),
                len,
                max: self.limits.max_record_bytes(),
            });
        }
        let needed = LENGTH_PREFIX as u64 + len;
        if (buf.len() as u64) < needed {
            return Ok(Decoded::Incomplete { needed });
        }
        let end = needed as usize;
        // Saturating: the position may have been set to any number.
        self.record = self.record.saturating_add(1);
        self.offset = self.offset.saturating_add(needed);
        if let Some(r) = &mut self.remaining {
            *r -= needed;
        }
        Ok(Decoded::Frame(Frame {
            payload: LENGTH_PREFIX..end,
            len: end,
        }))
    }

    /// Checks the end of the input: `rest` holds the bytes left after the
    /// last whole record. Nothing left is a clean end; anything else is a
    /// truncated length prefix or payload.
    pub fn finish(&self, rest: &[u8]) -> Result<()> {
        match rest.first_chunk::<LENGTH_PREFIX>() {
            None if rest.is_empty() => Ok(()),
            None => Err(self.truncated_length(rest.len() as u64)),
            Some(prefix) => {
                let len = i64::from_le_bytes(*prefix);
                if len < 0 || (len == 0 && !self.zero_length) {
                    return Err(Error::InvalidLength {
                        at: self.at().into(),
                        len,
                    });
                }
                Err(self.truncated_payload(len as u64, (rest.len() - LENGTH_PREFIX) as u64))
            }
        }
    }

    fn truncated_length(&self, available: u64) -> Error {
        Error::TruncatedLength {
            at: self.at().into(),
            available,
        }
    }

    fn truncated_payload(&self, len: u64, available: u64) -> Error {
        Error::TruncatedPayload {
            at: self.at().into(),
            len,
            available,
        }
    }
}

/// One record read by a [`RecordReader`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// The record's number within its file.
    pub index: u64,
    /// The byte offset of its length prefix.
    pub offset: u64,
    /// The serialized OFRecord.
    pub payload: &'a [u8],
}

/// Reads the records of one OFRecord file (or any byte stream) in order.
///
/// The buffer grows with the bytes actually read, never by a length taken
/// from the data, so a lying length costs at most the bytes that are
/// there. After an error (or the end) the reader returns `None`.
///
/// ```
/// use grist_ofrecord::{ReaderOptions, RecordReader};
///
/// let mut data = Vec::new();
/// for payload in [&b"ab"[..], b""] {
///     data.extend_from_slice(&(payload.len() as i64).to_le_bytes());
///     data.extend_from_slice(payload);
/// }
/// let mut reader = RecordReader::new(&data[..], "mem", ReaderOptions::default());
/// assert_eq!(reader.next_record()?.unwrap().payload, b"ab");
/// let second = reader.next_record()?.unwrap();
/// assert_eq!((second.index, second.offset, second.payload), (1, 10, &b""[..]));
/// assert!(reader.next_record()?.is_none());
/// # Ok::<(), grist_ofrecord::Error>(())
/// ```
pub struct RecordReader<R: Read = Box<dyn Read + Send>> {
    input: R,
    frames: FrameDecoder,
    buf: Vec<u8>,
    /// The start of the unread bytes in `buf`.
    pos: usize,
    eof: bool,
    done: bool,
    block: usize,
    /// The last record returned: number, offset, payload range in `buf`.
    last: (u64, u64, Range<usize>),
}

impl<R: Read> std::fmt::Debug for RecordReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordReader")
            .field("frames", &self.frames)
            .field("eof", &self.eof)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl RecordReader {
    /// Opens the file at `path`. Its size is known, so a length running
    /// past its end is reported as truncation before any limit check (see
    /// [`open_at`](Self::open_at)).
    pub fn open(path: impl AsRef<Path>, options: ReaderOptions) -> Result<Self> {
        RecordReader::open_at(&Storage::new(), &Address::from(path.as_ref()), options)
    }

    /// Opens the file or object at `address` (a path, or an object store
    /// URL) through `storage`. A remote object is read with ranged
    /// requests issued ahead of the reader. Fails with [`Error::Storage`]
    /// when the storage cannot open it.
    pub fn open_at(storage: &Storage, address: &Address, options: ReaderOptions) -> Result<Self> {
        let object = open_object(storage, address)?;
        let stream = read_from(&object, 0)?;
        let mut reader = RecordReader::new(stream, address.name().clone(), options);
        reader.frames = reader.frames.with_remaining(object.size());
        Ok(reader)
    }
}

/// How far ahead a stream of a remote object reads (as
/// [`grist_tensor::Input`] does).
const READ_AHEAD: usize = 16 << 20;

/// The file or object at `address`, opened (its size known).
pub(crate) fn open_object(storage: &Storage, address: &Address) -> Result<Object> {
    storage
        .open(address)
        .map_err(|e| Error::Storage(StorageError::new(address.name().clone(), e)))
}

/// `object` read in order from byte `start`.
pub(crate) fn read_from(object: &Object, start: u64) -> Result<Box<dyn Read + Send>> {
    object
        .reader(start, READ_AHEAD)
        .map_err(|e| Error::Storage(StorageError::new(object.name().clone(), e)))
}

impl<R: Read> RecordReader<R> {
    /// Reads records from `input`, calling it `name` in errors.
    pub fn new(input: R, name: impl Into<Arc<str>>, options: ReaderOptions) -> Self {
        RecordReader {
            input,
            frames: FrameDecoder::with_options(name, &options),
            buf: Vec::new(),
            pos: 0,
            eof: false,
            done: false,
            block: options.buffer_size,
            last: (0, 0, 0..0),
        }
    }

    /// Reads from `input`, which starts at record `record`, byte `offset` of
    /// the file `name` whose size is `file_len` (a reader that resumes in
    /// the middle of a file).
    pub fn resume(
        input: R,
        name: impl Into<Arc<str>>,
        options: ReaderOptions,
        record: u64,
        offset: u64,
        file_len: u64,
    ) -> Self {
        let mut reader = Self::new(input, name, options);
        reader.frames = reader
            .frames
            .with_remaining(file_len)
            .with_position(record, offset);
        reader
    }

    /// The next record, `None` at the end of the input.
    pub fn next_record(&mut self) -> Result<Option<RawRecord<'_>>> {
        if self.done {
            return Ok(None);
        }
        loop {
            let index = self.frames.record_index();
            let offset = self.frames.offset();
            match self.frames.decode(&self.buf[self.pos..]) {
                Ok(Decoded::Frame(frame)) => {
                    let start = self.pos;
                    self.pos += frame.len;
                    let range = start + frame.payload.start..start + frame.payload.end;
                    self.last = (index, offset, range.clone());
                    let payload = &self.buf[range];
                    return Ok(Some(RawRecord {
                        index,
                        offset,
                        payload,
                    }));
                }
                Ok(Decoded::Incomplete { needed }) => {
                    if self.eof {
                        self.done = true;
                        self.frames.finish(&self.buf[self.pos..])?;
                        return Ok(None);
                    }
                    if let Err(e) = self.fill(needed) {
                        self.done = true;
                        return Err(e);
                    }
                }
                Err(e) => {
                    self.done = true;
                    return Err(e);
                }
            }
        }
    }

    /// Reads more input: at least up to `needed` unread bytes or the end,
    /// in steps of the block size (the buffer grows only by what was read).
    fn fill(&mut self, needed: u64) -> Result<()> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        while (self.buf.len() as u64) < needed && !self.eof {
            let old = self.buf.len();
            let short = needed - old as u64;
            // Read a block ahead for small records; for a long one, grow by
            // at most the size already read (doubling), so a lying length
            // costs at most twice the bytes that are really there.
            let want = if short <= self.block as u64 {
                self.block
            } else {
                short.min(self.block.max(old) as u64) as usize
            };
            self.buf.resize(old + want, 0);
            let mut filled = old;
            while filled < self.buf.len() {
                match self.input.read(&mut self.buf[filled..]) {
                    Ok(0) => {
                        self.eof = true;
                        break;
                    }
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        self.buf.truncate(filled);
                        let file = self.frames.file();
                        // The storage layer's own errors name their URL
                        // and bytes.
                        return Err(match StorageError::from_io(file, e) {
                            Ok(e) => Error::Storage(e),
                            Err(source) => Error::Io {
                                file: file.clone(),
                                source,
                            },
                        });
                    }
                }
            }
            self.buf.truncate(filled);
        }
        Ok(())
    }

    /// The last record returned by `next_record`: its number, offset and
    /// payload.
    pub(crate) fn last(&self) -> (u64, u64, &[u8]) {
        let (index, offset, range) = &self.last;
        (*index, *offset, &self.buf[range.clone()])
    }

    /// The number of the next record within the file.
    pub fn record_index(&self) -> u64 {
        self.frames.record_index()
    }

    /// The byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.frames.offset()
    }

    /// The name used in errors.
    pub fn name(&self) -> &Arc<str> {
        self.frames.file()
    }
}

/// Counts the records of the file at `path` by reading only their length
/// prefixes (stepping over the payloads): the byte offset of record `stop`
/// (when the file has that many) and the number of records read.
pub(crate) fn scan_lengths(
    path: &Path,
    options: &ReaderOptions,
    stop: Option<u64>,
) -> Result<(u64, Option<u64>)> {
    let object = open_object(&Storage::new(), &Address::from(path))?;
    let size = object.size();
    let mut frames = FrameDecoder::with_options(object.name().clone(), options)
        .with_remaining(size)
        .with_limits_unchecked();
    let mut prefix = [0u8; LENGTH_PREFIX];
    loop {
        if Some(frames.record_index()) == stop {
            return Ok((frames.record_index(), Some(frames.offset())));
        }
        let left = size - frames.offset();
        if left == 0 {
            return Ok((frames.record_index(), None));
        }
        let n = (left as usize).min(LENGTH_PREFIX);
        let at = frames.offset();
        object
            .read_range_into(at..at + n as u64, &mut prefix[..n])
            .map_err(|e| Error::Storage(StorageError::new(object.name().clone(), e)))?;
        if n < LENGTH_PREFIX {
            // A clean end was handled above: this is a cut length prefix.
            return frames
                .finish(&prefix[..n])
                .map(|()| (frames.record_index(), None));
        }
        // Only the prefix is at hand: check the length, then step over it.
        frames.clone().decode(&prefix)?;
        frames.skip(i64::from_le_bytes(prefix) as u64);
    }
}

impl FrameDecoder {
    /// The same decoder without the record size limit (for scans that do
    /// not read payloads).
    fn with_limits_unchecked(mut self) -> Self {
        self.limits = self.limits.with_max_record_bytes(u64::MAX);
        self
    }

    /// Moves past a record of `len` payload bytes (checked by `decode`).
    fn skip(&mut self, len: u64) {
        let needed = LENGTH_PREFIX as u64 + len;
        // Saturating: the position may have been set to any number.
        self.record = self.record.saturating_add(1);
        self.offset = self.offset.saturating_add(needed);
        if let Some(r) = &mut self.remaining {
            *r = r.saturating_sub(needed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            out.extend_from_slice(&(p.len() as i64).to_le_bytes());
            out.extend_from_slice(p);
        }
        out
    }

    #[test]
    fn negative_and_zero_lengths() {
        let data = (-1i64).to_le_bytes();
        let err = FrameDecoder::new("f").decode(&data).unwrap_err();
        assert!(matches!(err, Error::InvalidLength { len: -1, .. }), "{err}");
        let zero = 0i64.to_le_bytes();
        assert!(matches!(
            FrameDecoder::new("f").decode(&zero).unwrap(),
            Decoded::Frame(Frame { len: 8, .. })
        ));
        let strict = ReaderOptions::default().with_zero_length(false);
        let err = FrameDecoder::with_options("f", &strict)
            .decode(&zero)
            .unwrap_err();
        assert_eq!(err.manifest_kind(), "invalid_length");
    }

    #[test]
    fn truncation_before_limits_when_the_size_is_known() {
        let mut data = (u64::MAX >> 2).to_le_bytes().to_vec();
        data.extend_from_slice(b"xy");
        let known = FrameDecoder::new("f").with_remaining(data.len() as u64);
        let err = known.clone().decode(&data).unwrap_err();
        assert!(
            matches!(err, Error::TruncatedPayload { available: 2, .. }),
            "{err}"
        );
        let err = FrameDecoder::new("f").decode(&data).unwrap_err();
        assert!(matches!(err, Error::RecordTooLarge { .. }), "{err}");
        let err = known.finish(&data[..3]).unwrap_err();
        assert!(
            matches!(err, Error::TruncatedLength { available: 3, .. }),
            "{err}"
        );
    }

    #[test]
    fn reader_grows_with_the_input_and_stops_after_errors() {
        let big = vec![7u8; 10_000];
        let mut data = framed(&[b"a", &big, b""]);
        let mut reader = RecordReader::new(
            &data[..],
            "mem",
            ReaderOptions::default().with_buffer_size(16),
        );
        let mut seen = Vec::new();
        while let Some(r) = reader.next_record().unwrap() {
            seen.push((r.index, r.offset, r.payload.len()));
        }
        assert_eq!(seen, vec![(0, 0, 1), (1, 9, 10_000), (2, 10_017, 0)]);
        // A lying length: an error naming the record, then nothing.
        data.extend_from_slice(&1_000_000i64.to_le_bytes());
        data.extend_from_slice(b"short");
        let small = ReaderOptions::default().with_buffer_size(16);
        let mut reader = RecordReader::new(&data[..], "mem", small);
        for _ in 0..3 {
            reader.next_record().unwrap();
        }
        let err = reader.next_record().unwrap_err();
        assert!(
            matches!(&err, Error::TruncatedPayload { at, len: 1_000_000, available: 5 }
                if at.record == Some(3) && at.offset == Some(10_025)),
            "{err}"
        );
        assert!(reader.next_record().unwrap().is_none());
        assert!(reader.buf.capacity() < 100_000);
    }
}
