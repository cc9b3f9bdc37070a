//! Index files, as NVIDIA DALI's `tfrecord2idx` writes them, and
//! [`IndexedReader`] for random access by record number.
//!
//! An index has one text line per record: the byte offset of its frame
//! and the frame's total length (payload plus 16 bytes), separated by a
//! space:
//!
//! ```text
//! 0 79
//! 79 83
//! ```
//!
//! Only uncompressed files can be indexed.

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use grist_io::{Address, Object, Storage};

use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::framing::{Decoded, FRAME_OVERHEAD, FrameDecoder, ReaderOptions, RecordReader};
use crate::writer::{index_address, storage_error};

/// One line of an index file: where a record's frame lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IndexEntry {
    /// The byte offset of the frame in the file.
    pub offset: u64,
    /// The frame's total length: payload plus 16 header and footer bytes.
    pub len: u64,
}

impl IndexEntry {
    /// The payload's length (`len - 16`; 0 for a malformed entry).
    pub fn payload_len(&self) -> u64 {
        self.len.saturating_sub(FRAME_OVERHEAD as u64)
    }
}

/// The index file name DALI users expect beside `path`: `<path>.idx`.
pub fn index_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".idx");
    PathBuf::from(s)
}

/// Writes one index line.
pub(crate) fn write_index_line(out: &mut impl Write, entry: IndexEntry) -> io::Result<()> {
    writeln!(out, "{} {}", entry.offset, entry.len)
}

/// Writes `entries` as index text.
pub fn write_index_to(entries: &[IndexEntry], mut out: impl Write) -> io::Result<()> {
    for &entry in entries {
        write_index_line(&mut out, entry)?;
    }
    out.flush()
}

/// Parses index text. `name` (the index file) is used in errors.
///
/// Each line is two unsigned decimal numbers separated by spaces or tabs
/// (a trailing `\r` is allowed); empty lines may only end the file. The
/// frame length must be at least 16. Errors are [`Error::BadIndex`] with the
/// 1-based line number.
///
/// ```
/// use grist_tfrecord::{IndexEntry, parse_index};
/// let entries = parse_index(b"0 79\n79 83\n", "x.idx")?;
/// assert_eq!(entries[1], IndexEntry { offset: 79, len: 83 });
/// assert!(parse_index(b"0 79\nbad\n", "x.idx").is_err());
/// # Ok::<(), grist_tfrecord::Error>(())
/// ```
pub fn parse_index(text: &[u8], name: &str) -> Result<Vec<IndexEntry>> {
    let file: Arc<str> = name.into();
    let bad = |line: usize, reason: String| Error::BadIndex {
        file: file.clone(),
        line: line as u64 + 1,
        reason,
    };
    let mut entries = Vec::new();
    let mut blank_since: Option<usize> = None;
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.iter().all(|b| *b == b' ' || *b == b'\t') {
            blank_since.get_or_insert(i);
            continue;
        }
        if let Some(blank) = blank_since {
            return Err(bad(blank, "empty line".into()));
        }
        let mut fields = line
            .split(|&b| b == b' ' || b == b'\t')
            .filter(|f| !f.is_empty());
        let mut number = |what: &str| -> Result<u64> {
            let field = fields
                .next()
                .ok_or_else(|| bad(i, format!("missing {what}")))?;
            parse_u64(field).ok_or_else(|| {
                bad(
                    i,
                    format!(
                        "{what} {:?} is not a number",
                        String::from_utf8_lossy(field)
                    ),
                )
            })
        };
        let offset = number("offset")?;
        let len = number("length")?;
        if fields.next().is_some() {
            return Err(bad(i, "more than two fields".into()));
        }
        if len < FRAME_OVERHEAD as u64 {
            return Err(bad(
                i,
                format!("frame length {len} is shorter than the 16-byte header and footer"),
            ));
        }
        entries.push(IndexEntry { offset, len });
    }
    Ok(entries)
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        if d.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        } else {
            None
        }
    })
}

/// Reads and parses the index file at `path` (see [`parse_index`]).
pub fn read_index(path: impl AsRef<Path>) -> Result<Vec<IndexEntry>> {
    read_index_at(&Storage::new(), &Address::from(path.as_ref()))
}

/// Reads and parses the index at `address` through `storage`.
fn read_index_at(storage: &Storage, address: &Address) -> Result<Vec<IndexEntry>> {
    let text = storage
        .read_all(address)
        .map_err(|e| storage_error(address.name(), e))?;
    parse_index(&text, address.as_str())
}

/// Fails with [`Error::NeedsUncompressed`] unless the file at `address`
/// is uncompressed (per `options` or its extension).
fn require_uncompressed(address: &Address, options: &ReaderOptions) -> Result<()> {
    match options.compression_for(Path::new(address.as_str())) {
        Compression::None => Ok(()),
        c => Err(Error::NeedsUncompressed {
            file: address.name().clone(),
            compression: c.name(),
        }),
    }
}

/// Scans the TFRecord file at `path` (all CRCs checked unless `options`
/// turn them off) and returns one entry per record.
pub fn build_index(path: impl AsRef<Path>, options: ReaderOptions) -> Result<Vec<IndexEntry>> {
    build_index_at(&Storage::new(), &Address::from(path.as_ref()), options)
}

/// Scans the TFRecord file at `address` through `storage`.
fn build_index_at(
    storage: &Storage,
    address: &Address,
    options: ReaderOptions,
) -> Result<Vec<IndexEntry>> {
    require_uncompressed(address, &options)?;
    let options = options.with_compression(Some(Compression::None));
    let mut reader = RecordReader::open_at(storage, address, options)?;
    let mut entries = Vec::new();
    while let Some(payload) = reader.next_record()? {
        let len = payload.len() as u64 + FRAME_OVERHEAD as u64;
        entries.push(IndexEntry {
            offset: reader.offset(),
            len,
        });
    }
    Ok(entries)
}

/// Scans the TFRecord file at `path` and writes its index to `<path>.idx`
/// (atomically), returning the number of records. Compressed files fail
/// with [`Error::NeedsUncompressed`].
pub fn write_index(path: impl AsRef<Path>, options: ReaderOptions) -> Result<u64> {
    let storage = Storage::new();
    let address = Address::from(path.as_ref());
    let entries = build_index_at(&storage, &address, options)?;
    let idx = index_address(&address);
    let mut out = storage
        .create(&idx)
        .map_err(|e| storage_error(idx.name(), e))?;
    write_index_to(&entries, BufWriter::new(&mut out)).map_err(|source| Error::Io {
        file: idx.name().clone(),
        source,
    })?;
    out.commit().map_err(|e| storage_error(idx.name(), e))?;
    Ok(entries.len() as u64)
}

/// Checks the index at `index` against the TFRecord file at `path`: every
/// line must name exactly the frame found there, with no record missing or
/// extra. Returns the number of records; a mismatch is an
/// [`Error::BadIndex`] naming the first wrong line.
pub fn verify_index(
    path: impl AsRef<Path>,
    index: impl AsRef<Path>,
    options: ReaderOptions,
) -> Result<u64> {
    let storage = Storage::new();
    let index = Address::from(index.as_ref());
    let listed = read_index_at(&storage, &index)?;
    let actual = build_index_at(&storage, &Address::from(path.as_ref()), options)?;
    compare_index(index.as_str(), &listed, &actual)?;
    Ok(actual.len() as u64)
}

/// Checks the entries `listed` by the index file `index` against the
/// frames `actual` found in the file: a mismatch is an
/// [`Error::BadIndex`] naming the first wrong line.
pub(crate) fn compare_index(
    index: &str,
    listed: &[IndexEntry],
    actual: &[IndexEntry],
) -> Result<()> {
    let bad = |line: usize, reason: String| Error::BadIndex {
        file: index.into(),
        line: line as u64 + 1,
        reason,
    };
    for (i, (l, a)) in listed.iter().zip(actual).enumerate() {
        if l != a {
            return Err(bad(
                i,
                format!(
                    "says {} {}, the file has record {i} at {} {}",
                    l.offset, l.len, a.offset, a.len
                ),
            ));
        }
    }
    if listed.len() != actual.len() {
        return Err(bad(
            listed.len().min(actual.len()),
            format!(
                "the index lists {} records, the file has {}",
                listed.len(),
                actual.len()
            ),
        ));
    }
    Ok(())
}

/// Random access to the records of an uncompressed TFRecord file through
/// its index, with positioned reads (the reader can be shared between
/// threads).
///
/// ```
/// use grist_tfrecord::{IndexedReader, ReaderOptions, RecordWriter, WriterOptions};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("data.tfrecord");
/// let mut w = RecordWriter::create(&path, WriterOptions::default().with_index(true))?;
/// for r in [&b"a"[..], b"bb", b"ccc"] {
///     w.write_record(r)?;
/// }
/// w.finish()?;
///
/// let reader = IndexedReader::open(&path, ReaderOptions::default())?;
/// assert_eq!(reader.len(), 3);
/// assert_eq!(&reader.read(2)?[..], b"ccc");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct IndexedReader {
    object: Object,
    name: Arc<str>,
    index_name: Arc<str>,
    entries: Vec<IndexEntry>,
    options: ReaderOptions,
}

impl IndexedReader {
    /// Opens the file at `path` with its index `<path>.idx`.
    pub fn open(path: impl AsRef<Path>, options: ReaderOptions) -> Result<Self> {
        let path = path.as_ref();
        IndexedReader::open_with_index(path, index_path(path), options)
    }

    /// Opens the file at `path` with the index at `index`.
    ///
    /// Checks that every entry lies inside the file ([`Error::BadIndex`]
    /// otherwise); the frames themselves are checked when read.
    pub fn open_with_index(
        path: impl AsRef<Path>,
        index: impl AsRef<Path>,
        options: ReaderOptions,
    ) -> Result<Self> {
        IndexedReader::open_with_index_at(
            &Storage::new(),
            &Address::from(path.as_ref()),
            &Address::from(index.as_ref()),
            options,
        )
    }

    /// Opens the file or object at `address` (a path, or an object store
    /// URL) with its index `<address>.idx`, through `storage`. Each record
    /// read from an object store costs one ranged request.
    pub fn open_at(storage: &Storage, address: &Address, options: ReaderOptions) -> Result<Self> {
        IndexedReader::open_with_index_at(storage, address, &index_address(address), options)
    }

    /// Opens the file or object at `address` with the index at `index`,
    /// both through `storage` (see [`open_with_index`](Self::open_with_index)).
    pub fn open_with_index_at(
        storage: &Storage,
        address: &Address,
        index: &Address,
        options: ReaderOptions,
    ) -> Result<Self> {
        require_uncompressed(address, &options)?;
        let name = address.name().clone();
        let object = storage.open(address).map_err(|e| storage_error(&name, e))?;
        let size = object.size();
        let entries = read_index_at(storage, index)?;
        let index_name = index.name().clone();
        for (i, e) in entries.iter().enumerate() {
            if e.offset.checked_add(e.len).is_none_or(|end| end > size) {
                return Err(Error::BadIndex {
                    file: index_name,
                    line: i as u64 + 1,
                    reason: format!(
                        "frame {} +{} ends past the end of the {size}-byte file",
                        e.offset, e.len
                    ),
                });
            }
        }
        Ok(IndexedReader {
            object,
            name,
            index_name,
            entries,
            options,
        })
    }

    /// The number of records.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the file has no records.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The index entries.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The data file's name, as used in errors.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// Reads record `record` (CRCs checked unless the options turn them
    /// off).
    pub fn read(&self, record: u64) -> Result<Bytes> {
        let mut frame = Vec::new();
        let payload = self.read_into(record, &mut frame)?;
        Ok(Bytes::from(frame).slice(payload))
    }

    /// Reads the frame of record `record` into `frame` (replacing its
    /// contents, reusing its allocation) and returns where the payload lies
    /// in it.
    ///
    /// Errors: [`Error::RecordOutOfRange`] past the end; the framing errors
    /// of [`FrameDecoder::decode`]; [`Error::Truncated`] if the file is
    /// shorter than the index says; [`Error::BadIndex`] if the frame's
    /// length differs from the index.
    pub fn read_into(&self, record: u64, frame: &mut Vec<u8>) -> Result<Range<usize>> {
        let entry = usize::try_from(record)
            .ok()
            .and_then(|i| self.entries.get(i))
            .ok_or_else(|| Error::RecordOutOfRange {
                file: self.name.clone(),
                record,
                count: self.entries.len() as u64,
            })?;
        let mut decoder = FrameDecoder::with_options(self.name.clone(), &self.options)
            .with_position(record, entry.offset);
        // Checked against the limits (and against the file size at open)
        // before allocating.
        decoder.check_len(entry.payload_len())?;
        let len = usize::try_from(entry.len).unwrap_or(usize::MAX);
        frame.clear();
        frame.resize(len, 0);
        let range = entry.offset..entry.offset + entry.len;
        if let Err(e) = self.object.read_range_into(range, frame) {
            frame.clear();
            // A file cut since it was opened reads short.
            return Err(if is_short_read(&e) {
                Error::Truncated {
                    at: crate::Location::record(self.name.clone(), record).into(),
                    offset: entry.offset,
                }
            } else {
                storage_error(&self.name, e)
            });
        }
        let mismatch = |actual: String| Error::BadIndex {
            file: self.index_name.clone(),
            line: record + 1,
            reason: format!(
                "the index says the frame at {} is {} bytes, the file's frame {actual}",
                entry.offset, entry.len
            ),
        };
        match decoder.decode(frame)? {
            Decoded::Frame(f) if f.len == len => Ok(f.payload),
            Decoded::Frame(f) => Err(mismatch(format!("is {} bytes", f.len))),
            Decoded::Incomplete { needed } => Err(mismatch(format!("needs {needed} bytes"))),
        }
    }
}

/// Whether a read failed because the file ended before the bytes asked
/// for.
fn is_short_read(e: &grist_io::Error) -> bool {
    match e {
        grist_io::Error::Read { source, .. } => source
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::UnexpectedEof),
        _ => false,
    }
}

impl fmt::Debug for IndexedReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexedReader")
            .field("name", &self.name)
            .field("index", &self.index_name)
            .field("records", &self.entries.len())
            .finish_non_exhaustive()
    }
}
