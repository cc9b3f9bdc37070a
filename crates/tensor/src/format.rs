//! The contract between the formats and everything generic over them.
//!
//! Each format crate implements [`Format`]: the loader, the CLI and
//! conversion hold formats as `Arc<dyn Format>` (found by a
//! [`Registry`](crate::Registry)) and know no format crate. Through it they
//! get, for a file:
//!
//! * a [`ChunkStream`]: the file's chunks from any chunk boundary
//!   ([`ChunkPos`], what a saved loader state holds), each read into a
//!   pooled buffer, with work that can run in parallel (inflating a
//!   compressed block, checking data CRCs) left undone when the options
//!   ask for it ([`Chunk::deferred`]);
//! * for the formats that can, a [`ByNumber`] reader: records by number,
//!   several at once, with neighbours read together;
//! * a [`Decoder`], compiled once from the feature specs, that decodes a
//!   chunk's rows (or records read by number) into a
//!   [`BatchBuilder`], and does a chunk's deferred
//!   work on the thread that decodes it;
//! * a [`Records`] iterator: each record's bytes and a generic JSON
//!   decoding of it (`grist cat --raw/--records`, `grist inspect`);
//! * an [`Inferred`] spec: the features that read the inputs, from their
//!   schema or by sampling their first records (`grist spec`).
//!
//! Errors cross the contract as [`BoxError`]s, which answer
//! [`location`](crate::FormatError::location) whatever the format.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use grist_io::{Address, BufferPool, Object, Storage, Version};
use serde::{Deserialize, Serialize};

use crate::{
    Access, BatchBuilder, BoxError, Chunk, Encoder, FeatureSpec, InferOptions, Inferred, Limits,
    RecordSink, SpecFile, StorageError, WriteOptions,
};

/// A file's header as its format reads it (Avro: the writer schema and the
/// codec), shared by the file's chunks; the format's decoder downcasts it.
pub type FileHeader = Arc<dyn Any + Send + Sync>;

/// One input file: its name in messages and where its bytes are (an
/// address of the [`Storage`] it is read through: a local path, or an
/// object store or HTTP URL).
///
/// Readers get the file's bytes only through it, so that the storage
/// behind it (a local file, a memory map, an object store) is the storage
/// layer's business.
#[derive(Clone, Debug)]
pub struct Input {
    storage: Storage,
    address: Address,
    /// How far a stream of a remote object reads ahead.
    read_ahead: usize,
}

/// How far a remote stream reads ahead by default.
const READ_AHEAD: usize = 16 << 20;

impl Input {
    /// The file at `address`, read through `storage`.
    pub fn new(storage: &Storage, address: Address) -> Self {
        Input {
            storage: storage.clone(),
            address,
            read_ahead: READ_AHEAD,
        }
    }

    /// A local file, named in messages as its path is written, read by
    /// read calls.
    pub fn local(path: impl Into<PathBuf>) -> Self {
        Input::new(&Storage::new(), Address::from(path.into()))
    }

    /// The file at `text` (a path or URL), read through `storage`.
    pub fn parse(storage: &Storage, text: &str) -> Result<Self, StorageError> {
        Address::parse(text)
            .map(|a| Input::new(storage, a))
            .map_err(|e| StorageError::new(text, e))
    }

    /// This input, its remote streams reading up to `bytes` ahead (local
    /// files read what is asked). By default, 16 MiB.
    #[must_use]
    pub fn with_read_ahead(mut self, bytes: usize) -> Self {
        self.read_ahead = bytes.max(1);
        self
    }

    /// The file's name in messages (the path or URL as given).
    pub fn name(&self) -> &Arc<str> {
        self.address.name()
    }

    /// Where the file is.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The storage it is read through.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The file's last path segment.
    pub fn file_name(&self) -> &str {
        self.address.file_name().unwrap_or_default()
    }

    /// Whether the file is in an object store (or behind HTTP): reads
    /// there cost a request each.
    pub fn is_remote(&self) -> bool {
        self.address.is_remote()
    }

    /// The local path, for a local file.
    pub fn path(&self) -> Option<&Path> {
        self.address.local_path()
    }

    /// The file beside this one whose name is this one's plus `suffix`
    /// (a TFRecord file's `.idx` index).
    #[must_use]
    pub fn with_suffix(&self, suffix: &str) -> Input {
        let name = format!("{}{suffix}", self.file_name());
        Input {
            address: self.address.with_file_name(&name),
            ..self.clone()
        }
    }

    fn err(&self, e: grist_io::Error) -> StorageError {
        StorageError::new(self.name().clone(), e)
    }

    /// Whether the file exists (and is a file).
    pub fn exists(&self) -> bool {
        matches!(self.storage.stat(&self.address), Ok(Some(m)) if !m.is_dir)
    }

    /// The file opened for ranged reads (and mapped, when the storage maps
    /// local files).
    pub fn open(&self) -> Result<Object, StorageError> {
        self.storage.open(&self.address).map_err(|e| self.err(e))
    }

    /// The file's size in bytes.
    pub fn size(&self) -> Result<u64, StorageError> {
        Ok(self.open()?.size())
    }

    /// The whole file.
    pub fn read_all(&self) -> Result<Bytes, StorageError> {
        self.storage
            .read_all(&self.address)
            .map_err(|e| self.err(e))
    }

    /// The file read in order from byte `start` on (a remote object's
    /// blocks fetched ahead, concurrently). Its read errors carry the
    /// storage layer's error ([`StorageError::from_io`] takes it back).
    pub fn reader_at(&self, start: u64) -> Result<Box<dyn Read + Send>, StorageError> {
        self.open()?
            .reader(start, self.read_ahead)
            .map_err(|e| self.err(e))
    }
}

/// Where a chunk starts in its file: its number, the number of its first
/// record, and its byte offset (in the decompressed stream for compressed
/// files; what offset 0 means is the format's: for Avro, "after the
/// header"). A [`ChunkStream`] opened there reads the rest of the file
/// exactly as a stream from the start would.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChunkPos {
    /// The chunk's number within its file.
    pub index: u64,
    /// The number, within its file, of its first record.
    pub record: u64,
    /// Its byte offset.
    pub offset: u64,
}

/// Work a stream left for the thread that decodes a chunk, so that it runs
/// on the parse threads, in parallel, and leaves the bytes in the cache of
/// the thread that decodes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Deferred {
    /// The chunk's `data` is still compressed: [`Decoder::inflate`] gives
    /// the records' bytes.
    pub inflate: bool,
    /// The records' checksums are still to be checked:
    /// [`Decoder::verify`] checks those of the rows being decoded.
    pub verify: bool,
}

impl Deferred {
    /// Nothing left to do.
    pub const NONE: Deferred = Deferred {
        inflate: false,
        verify: false,
    };

    /// Inflation left to do.
    pub const INFLATE: Deferred = Deferred {
        inflate: true,
        verify: false,
    };

    /// Checksums left to check.
    pub const VERIFY: Deferred = Deferred {
        inflate: false,
        verify: true,
    };
}

/// The memory maps of the last [`Maps::KEEP`] files mapped, so that a file
/// read again (the next epoch) is not mapped, faulted in page by page and
/// unmapped once more: with the page cache warm, that costs about as much
/// as copying the bytes.
///
/// A loader keeps its own; one `Maps` shared by several loaders
/// ([`ReadOptions::with_maps`]) keeps the files mapped from one loader to
/// the next (a new loader per epoch, as PyTorch's `DataLoader` makes). A
/// map is only reused while the file's size, modification time and
/// identity (device and inode) are those it was mapped with; a file
/// replaced or rewritten since is mapped again.
///
/// ```
/// use std::sync::Arc;
/// use grist_tensor::{Maps, ReadOptions};
/// let maps = Arc::new(Maps::new());
/// let epoch_1 = ReadOptions::new().with_maps(maps.clone());
/// let epoch_2 = ReadOptions::new().with_maps(maps.clone());
/// assert!(Arc::ptr_eq(&epoch_1.maps, &epoch_2.maps));
/// maps.clear(); // unmaps (once no chunk of them is alive)
/// ```
///
/// In a process forked from the one that made it (a DataLoader worker),
/// a `Maps` keeps nothing: it maps each file afresh and never takes its
/// lock, which another thread of the parent may have held at the fork.
#[derive(Debug)]
pub struct Maps {
    kept: Mutex<VecDeque<Mapped>>,
    /// The process the maps are kept for.
    pid: u32,
}

impl Default for Maps {
    fn default() -> Self {
        Maps {
            kept: Mutex::default(),
            pid: std::process::id(),
        }
    }
}

/// One kept map and the version of the file it maps.
#[derive(Debug)]
struct Mapped {
    name: Arc<str>,
    version: Option<Version>,
    map: Bytes,
}

impl Maps {
    /// How many maps are kept (each is one mapping of the process; the
    /// kernel allows tens of thousands).
    pub const KEEP: usize = 256;

    /// No maps kept yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drops every kept map: each is unmapped once no chunk or batch cut
    /// from it is alive.
    pub fn clear(&self) {
        if let Some(mut kept) = self.lock() {
            kept.clear();
        }
    }

    /// How many maps are kept.
    pub fn len(&self) -> usize {
        self.lock().map_or(0, |kept| kept.len())
    }

    /// True when no map is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kept maps; `None` in a forked child.
    fn lock(&self) -> Option<std::sync::MutexGuard<'_, VecDeque<Mapped>>> {
        (std::process::id() == self.pid)
            .then(|| self.kept.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The whole of `input` as bytes when `access` maps and `input` is a
    /// local file, `None` when it is read.
    pub fn map(&self, access: Access, input: &Input) -> Result<Option<Bytes>, StorageError> {
        if !access.is_mmap() || input.path().is_none() {
            return Ok(None);
        }
        let version = input
            .storage()
            .stat(input.address())
            .ok()
            .flatten()
            .and_then(|meta| meta.version);
        let mut maps = self.lock();
        if let Some(maps) = &mut maps {
            if let Some(at) = maps.iter().position(|m| m.name == *input.name()) {
                if version.is_some() && maps[at].version == version {
                    return Ok(Some(maps[at].map.clone()));
                }
                maps.remove(at);
            }
        }
        let storage = input.storage().clone().with_access(access);
        let object = storage.open(input.address()).map_err(|e| input.err(e))?;
        let map = object.map().cloned().unwrap_or_default();
        if let Some(maps) = &mut maps {
            if maps.len() == Self::KEEP {
                maps.pop_front();
            }
            maps.push_back(Mapped {
                name: input.name().clone(),
                version,
                map: map.clone(),
            });
        }
        Ok(Some(map))
    }
}

/// How the readers of the contract read: the loader's options, shared by
/// every stream and reader it opens.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ReadOptions {
    /// The target size of a stream's chunk, in (decompressed) bytes; a
    /// format whose chunks are given by the file (Avro blocks) ignores it.
    pub chunk_bytes: usize,
    /// The limits on allocations sized by the input.
    pub limits: Limits,
    /// Whether checksums are verified (where the format has optional
    /// ones).
    pub check_crc: bool,
    /// Read calls or memory maps.
    pub access: Access,
    /// The maps of mapped files, kept between opens.
    pub maps: Arc<Maps>,
    /// The buffers that stream chunks are read into and share; a buffer
    /// comes back when the last chunk cut from it is dropped.
    pub buffers: Arc<BufferPool>,
    /// The chunks will be consumed out of order and kept a while (a
    /// shuffle buffer): a format whose chunks share a read buffer many to
    /// one copies them out instead, so that a few stragglers do not pin
    /// whole buffers.
    pub shuffled: bool,
    /// Whether work that can wait (checksums) is left to the decoding
    /// threads ([`Deferred`]). Read as each chunk is cut, so that the
    /// loader can move the checks as its thread count changes.
    pub defer_checks: Arc<AtomicBool>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            chunk_bytes: 1 << 20,
            limits: Limits::default(),
            check_crc: true,
            access: Access::read(),
            maps: Arc::default(),
            buffers: Arc::default(),
            shuffled: false,
            defer_checks: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl ReadOptions {
    /// Options with every field at its default: chunks of 1 MiB, default
    /// limits, checksums checked on the reading thread, read calls.
    pub fn new() -> Self {
        Self::default()
    }

    /// The target chunk size. By default, 1 MiB.
    #[must_use]
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes;
        self
    }

    /// The limits. By default, [`Limits::default`].
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether checksums are verified. By default, `true`.
    #[must_use]
    pub fn with_check_crc(mut self, check: bool) -> Self {
        self.check_crc = check;
        self
    }

    /// Read calls or memory maps. By default, [`Access::read`].
    #[must_use]
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    /// Where maps are kept between opens. By default, a `Maps` of these
    /// options' own; one shared by several readers keeps files mapped
    /// from one to the next.
    #[must_use]
    pub fn with_maps(mut self, maps: Arc<Maps>) -> Self {
        self.maps = maps;
        self
    }

    /// Whether chunks are consumed out of order. By default, `false`.
    #[must_use]
    pub fn with_shuffled(mut self, shuffled: bool) -> Self {
        self.shuffled = shuffled;
        self
    }

    /// Whether checksums are left to the decoding threads. By default,
    /// `false`.
    #[must_use]
    pub fn with_defer_checks(self, defer: bool) -> Self {
        self.defer_checks.store(defer, Ordering::Relaxed);
        self
    }

    /// The most a stream reads at once: the chunk size, within 64 KiB and
    /// 16 MiB.
    pub fn read_size(&self) -> usize {
        self.chunk_bytes.clamp(64 << 10, 16 << 20)
    }

    /// Whether checksums read from now on are left to the decoding
    /// threads (when checksums are checked at all).
    pub fn defers_checks(&self) -> bool {
        self.check_crc && self.defer_checks.load(Ordering::Relaxed)
    }
}

/// One file read as chunks, from a chunk boundary on.
pub trait ChunkStream: Send {
    /// The next chunk and where the chunk after it starts; `None` at the
    /// end of the file. After an error the stream must not be used again.
    fn next_chunk(&mut self) -> Result<Option<(Chunk, ChunkPos)>, BoxError>;
}

/// One record read by number.
#[derive(Clone, Debug)]
pub struct Record {
    /// The input it came from (its position in the inputs given).
    pub input: usize,
    /// Its number within the file.
    pub record: u64,
    /// Its number in the dataset (the inputs' records numbered one after
    /// the other).
    pub global: u64,
    /// The record's bytes.
    pub payload: Bytes,
    /// A checksum of the payload still to be checked (by
    /// [`Decoder::verify_record`]), when checks were deferred.
    pub check: Option<u32>,
}

/// The records of one read, in the order asked for.
#[derive(Clone, Debug, Default)]
pub struct Gathered {
    /// The records.
    pub records: Vec<Record>,
    /// The bytes read for them.
    pub bytes: u64,
}

/// Records read by number from a list of inputs; shared by the threads
/// that fetch several batches at once.
pub trait ByNumber: Send + Sync {
    /// The number of records of each input.
    fn counts(&self) -> Vec<u64>;

    /// Reads the records `wants` (input, record number within it), in that
    /// order; neighbours are read together. With `defer_checks`, checksums
    /// are left in [`Record::check`] for the decoding threads.
    fn read(&self, wants: &[(usize, u64)], defer_checks: bool) -> Result<Gathered, BoxError>;
}

/// Whether records are read by number (exact shuffles, resuming anywhere
/// without reading what came before) rather than as a stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RandomAccess {
    /// When the format says it pays (see [`Format::random_access`]).
    #[default]
    Auto,
    /// Streams.
    Off,
    /// By number, or an error for a format or file that cannot be.
    Required,
}

/// A compiled decoder: built once from feature specs by
/// [`Format::decoder`], then called many times, on several threads (one
/// clone each).
///
/// A decoder never allocates per record on its hot path, writes only into
/// the builder it is given, and reports bad data as an error naming the
/// file, the record and the feature. A failed row leaves the builder with
/// only whole rows in it (the rows before the failure).
pub trait Decoder: Send + fmt::Debug {
    /// A copy for another thread.
    fn clone_box(&self) -> Box<dyn Decoder>;

    /// The specs of the columns this decoder produces, in output order.
    fn specs(&self) -> &[FeatureSpec];

    /// A batch builder for this decoder's columns, with room for `rows`
    /// rows in its dense columns.
    fn new_batch(&self, rows: usize) -> BatchBuilder;

    /// Decodes rows `rows` (positions within the chunk) of `chunk`,
    /// appending them to `out` in order. Returns where the record after
    /// the last decoded one starts in `chunk.data`, if the decoder knows.
    ///
    /// That serves chunks whose records are found by decoding
    /// ([`RecordLayout::Sequential`](crate::RecordLayout::Sequential))
    /// taken a few rows at a time (a loader sampling rows from many
    /// buffered chunks): instead of skipping the rows already decoded again
    /// on every call, the caller cuts them off (`data.slice(offset..)`,
    /// `first_record` moved on and `record_count` reduced by the rows
    /// decoded) and decodes the rest of the chunk from there.
    ///
    /// The chunk's [deferred](Chunk::deferred) work must have been done
    /// first ([`inflate`](Self::inflate), [`verify`](Self::verify)).
    fn decode_chunk(
        &mut self,
        chunk: &Chunk,
        rows: Range<usize>,
        out: &mut BatchBuilder,
    ) -> Result<Option<usize>, BoxError>;

    /// Decodes one record read by number (from `file`) into `out`. By
    /// default, an error: the format reads no records by number.
    fn decode_record(
        &mut self,
        file: &Arc<str>,
        record: &Record,
        out: &mut BatchBuilder,
    ) -> Result<(), BoxError> {
        let _ = (record, out);
        Err(Box::new(crate::TensorError::Unsupported {
            what: format!("{file}: this format reads no records by number"),
        }))
    }

    /// The records' bytes of a chunk whose data is still compressed
    /// ([`Deferred::inflate`]). By default, the data as it is.
    fn inflate(&self, chunk: &Chunk, limits: &Limits) -> Result<Bytes, BoxError> {
        let _ = limits;
        Ok(chunk.data.clone())
    }

    /// Whether [`inflate_two`](Self::inflate_two) does `a` and `b` faster
    /// together than one after the other. By default, `false`.
    fn inflates_together(&self, a: &Chunk, b: &Chunk) -> bool {
        let _ = (a, b);
        false
    }

    /// Inflates two chunks. By default, one after the other.
    fn inflate_two(&self, a: &Chunk, b: &Chunk, limits: &Limits) -> [Result<Bytes, BoxError>; 2] {
        [self.inflate(a, limits), self.inflate(b, limits)]
    }

    /// Checks the checksums of rows `rows` of a chunk whose checks were
    /// deferred ([`Deferred::verify`]). By default, nothing to check.
    fn verify(&self, chunk: &Chunk, rows: Range<usize>) -> Result<(), BoxError> {
        let _ = (chunk, rows);
        Ok(())
    }

    /// Checks a record read by number whose check was deferred
    /// ([`Record::check`]). By default, nothing to check.
    fn verify_record(&self, file: &Arc<str>, record: &Record) -> Result<(), BoxError> {
        let _ = (file, record);
        Ok(())
    }
}

impl Clone for Box<dyn Decoder> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// How strongly a file's name says it holds a format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NameMatch {
    /// The name says nothing of this format.
    No,
    /// The name is this format's usual name, without an extension
    /// (OFRecord's `part-<digits>`): an extension of another format wins.
    Name,
    /// The name has this format's extension.
    Extension,
}

/// One record as [`Records`] hands it out.
#[derive(Clone, Debug)]
pub struct RawRecord {
    /// Where it is: its file, its number within the file (`record`), its
    /// number in the dataset for formats whose datasets number records
    /// across files (`index`: FFRecord, OFRecord), its block (Avro) or
    /// the byte offset of its frame (OFRecord).
    pub at: crate::Location,
    /// Its bytes (TFRecord: the payload; Avro: the datum; FFRecord: the
    /// sample; OFRecord: the serialized record).
    pub bytes: Bytes,
}

/// Options of a [`Records`] iterator.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RecordOptions {
    /// The read options (checksums, limits).
    pub read: ReadOptions,
    /// Decode records as `tf.SequenceExample`s (formats of tf.Example
    /// records).
    pub sequence: bool,
    /// Avro: decode each record through this reader schema (JSON); other
    /// formats refuse it.
    pub reader_schema: Option<serde_json::Value>,
}

impl RecordOptions {
    /// How files are read. By default, [`ReadOptions::default`].
    #[must_use]
    pub fn with_read(mut self, read: ReadOptions) -> Self {
        self.read = read;
        self
    }

    /// Decode tf.SequenceExamples. By default, `false`.
    #[must_use]
    pub fn with_sequence(mut self, sequence: bool) -> Self {
        self.sequence = sequence;
        self
    }

    /// Avro: the reader schema records are decoded through (the Avro
    /// specification's schema resolution). By default, none: each file's
    /// writer schema.
    #[must_use]
    pub fn with_reader_schema(mut self, schema: serde_json::Value) -> Self {
        self.reader_schema = Some(schema);
        self
    }
}

/// Records one by one, for tools (`grist cat --raw/--records`,
/// `inspect`, `verify`): a format's records with their places, and a
/// generic decoding of each into JSON.
pub trait Records: Send {
    /// The next record; `None` at the end.
    fn next_record(&mut self) -> Result<Option<RawRecord>, BoxError>;

    /// `record` decoded generically, in the corpus manifests' form for the
    /// format (tf.Example: `{"features": {name: {"int64_list": [...]}}}`;
    /// Avro: as fastavro reads it; OFRecord: `{"features": {name:
    /// {"kind", "values"}}}`).
    fn to_json(&self, record: &RawRecord) -> Result<serde_json::Value, BoxError>;

    /// [`to_json`](Self::to_json) as text, for tools that print records.
    /// By default, the `Value`'s text (object keys sorted); a format whose
    /// records have an order of their own keeps it (Avro: fields in
    /// schema order, as fastavro's records have them).
    fn to_json_text(&self, record: &RawRecord) -> Result<String, BoxError> {
        Ok(self.to_json(record)?.to_string())
    }
}

/// What [`Format::verify`] found in a file without damage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verified {
    /// The number of records.
    pub records: u64,
    /// What was checked besides, for people (`"3.2 MB framed, index
    /// matches"`, `"12 blocks, codec deflate"`); may be empty.
    pub details: String,
}

impl Verified {
    /// `records` records, with `details`.
    pub fn new(records: u64, details: impl Into<String>) -> Self {
        Verified {
            records,
            details: details.into(),
        }
    }
}

/// The first damage [`Format::verify`] found.
#[derive(Debug)]
pub struct VerifyFailure {
    /// Where, as tools print it: the record (or block) and the byte offset
    /// of the frame (or block) where the damage is; `None` when the file
    /// cannot be opened, its header is bad or a file beside it (an index)
    /// is wrong.
    pub position: Option<crate::Location>,
    /// What is wrong.
    pub error: BoxError,
}

impl VerifyFailure {
    /// `error`, found at `position`.
    pub fn new(position: Option<crate::Location>, error: impl Into<BoxError>) -> Self {
        VerifyFailure {
            position,
            error: error.into(),
        }
    }
}

/// Options of [`Format::inspect`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct InspectOptions {
    /// How many records to look at (formats that look at records).
    pub records: u64,
    /// Decode records as `tf.SequenceExample`s (formats of tf.Example
    /// records; others refuse it).
    pub sequence: bool,
    /// How files are read.
    pub read: ReadOptions,
}

impl Default for InspectOptions {
    fn default() -> Self {
        InspectOptions {
            records: 1000,
            sequence: false,
            read: ReadOptions::default(),
        }
    }
}

impl InspectOptions {
    /// Look at `records` records. By default, 1000.
    #[must_use]
    pub fn with_records(mut self, records: u64) -> Self {
        self.records = records;
        self
    }

    /// Decode tf.SequenceExamples. By default, `false`.
    #[must_use]
    pub fn with_sequence(mut self, sequence: bool) -> Self {
        self.sequence = sequence;
        self
    }
}

/// What [`Format::inspect`] says of a file or dataset, in two forms.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Report {
    /// The machine form (`grist inspect --json`): an object with at least
    /// `"file"` and `"format"` (the format's [`id`](Format::id)).
    pub json: serde_json::Value,
    /// The text form, line by line (`grist inspect`).
    pub text: Vec<String>,
}

impl Report {
    /// A report of `json` and `text`.
    pub fn new(json: serde_json::Value, text: Vec<String>) -> Self {
        Report { json, text }
    }
}

/// A record format: how its files are recognized, read and decoded.
///
/// Implemented by each format crate; held as `Arc<dyn Format>`.
pub trait Format: Send + Sync + fmt::Debug {
    /// The format's short name, as `--format` takes it (`"tfrecord"`).
    fn id(&self) -> &'static str;

    /// The format's name in messages (`"TFRecord"`).
    fn name(&self) -> &'static str;

    /// The file-name extensions that say this format, for messages
    /// (`[".tfrecord", ...]`).
    fn extensions(&self) -> &'static [&'static str];

    /// How strongly the file name `name` (its last segment) says this
    /// format.
    fn name_match(&self, name: &str) -> NameMatch;

    /// Whether a file that starts with `head` (its first bytes, up to 4
    /// KiB; fewer when the file is shorter) and is `size` bytes long holds
    /// this format, by its content.
    fn sniff(&self, head: &[u8], size: u64) -> bool;

    /// The files of a folder that make one dataset of this format, in the
    /// dataset's order, chosen from `files` (the folder's files, sorted by
    /// name; sidecar files already left out). By default, every file
    /// whose name has this format's extension (or, when none has, every
    /// file), in name order.
    fn dataset(&self, dir: &str, files: Vec<Input>) -> Result<Vec<Input>, BoxError> {
        let _ = dir;
        let matching: Vec<Input> = files
            .iter()
            .filter(|f| self.name_match(f.file_name()) != NameMatch::No)
            .cloned()
            .collect();
        Ok(if matching.is_empty() { files } else { matching })
    }

    /// A value of this format configured by `key` = `value` (FFRecord's
    /// `payload`, ...), or an error naming what this format takes.
    fn configure(&self, key: &str, value: &str) -> Result<Arc<dyn Format>, BoxError> {
        Err(Box::new(crate::TensorError::Unsupported {
            what: format!(
                "{}: unknown option {key:?} (= {value:?}): this format takes none",
                self.name()
            ),
        }))
    }

    /// The decoder of `spec` (refusing, by feature, what the format cannot
    /// decode).
    fn decoder(&self, spec: &SpecFile, limits: Limits) -> Result<Box<dyn Decoder>, BoxError>;

    /// `input` read as chunks from `pos` on.
    fn stream(
        &self,
        input: &Input,
        pos: ChunkPos,
        options: &ReadOptions,
    ) -> Result<Box<dyn ChunkStream>, BoxError>;

    /// Whether `inputs` are read by number under `mode`: `Auto` says
    /// whether it pays (FFRecord: always; TFRecord: with index files;
    /// OFRecord: when `shuffle`; but an exact shuffle of files in an
    /// object store costs a request per record, so shuffled remote inputs
    /// are streamed and shuffled by the loader's buffer instead), `Off` is
    /// `false`, and `Required` is `true` or an error naming the file that
    /// cannot be. Cheap: nothing is read but what tells (an index file's
    /// existence).
    fn random_access(
        &self,
        inputs: &[Input],
        mode: RandomAccess,
        shuffle: bool,
    ) -> Result<bool, BoxError>;

    /// `inputs` opened for reading by number (after
    /// [`random_access`](Self::random_access) said yes).
    fn by_number(
        &self,
        inputs: &[Input],
        options: &ReadOptions,
    ) -> Result<Box<dyn ByNumber>, BoxError>;

    /// The records of `inputs`, one by one, in order.
    fn records(
        &self,
        inputs: &[Input],
        options: &RecordOptions,
    ) -> Result<Box<dyn Records>, BoxError>;

    /// For formats whose datasets number records across their files
    /// (FFRecord samples, OFRecord parts), the name tools give a record's
    /// number within its file (`"local_index"`, `"index_in_part"`); `None`
    /// (the default) for formats that number records file by file.
    fn local_index_key(&self) -> Option<&'static str> {
        None
    }

    /// What the format calls a record, in messages (`"record"`, FFRecord's
    /// `"sample"`). By default, `"record"`.
    fn record_noun(&self) -> &'static str {
        "record"
    }

    /// The number of records of `input`, every check the format makes
    /// while counting made. By default, the records of its stream's
    /// chunks.
    fn count(&self, input: &Input, options: &ReadOptions) -> Result<u64, BoxError> {
        let mut stream = self.stream(input, ChunkPos::default(), options)?;
        let mut n = 0u64;
        while let Some((chunk, _)) = stream.next_chunk()? {
            n = n.saturating_add(chunk.record_count as u64);
        }
        Ok(n)
    }

    /// Reads every record of `input` with every check the format has (and
    /// files beside it that describe it, such as an index). By default,
    /// every record of [`records`](Self::records), decoded generically.
    fn verify(&self, input: &Input) -> Result<Verified, VerifyFailure> {
        let mut records = self
            .records(std::slice::from_ref(input), &RecordOptions::default())
            .map_err(|e| VerifyFailure::new(None, e))?;
        let mut n = 0u64;
        loop {
            match records.next_record() {
                Ok(Some(r)) => {
                    records
                        .to_json(&r)
                        .map_err(|e| VerifyFailure::new(Some(r.at.clone()), e))?;
                    n += 1;
                }
                Ok(None) => return Ok(Verified::new(n, "every record decodes")),
                Err(e) => {
                    let at = e.location().cloned();
                    return Err(VerifyFailure::new(at, e));
                }
            }
        }
    }

    /// What `inputs` (a file, or the files of a dataset; `name` is the
    /// path or URL as given) hold: counts, sizes, features or schema, as
    /// the format knows them. By default, how many of the first
    /// `options.records` records there are and how long they are.
    fn inspect(
        &self,
        name: &str,
        inputs: &[Input],
        options: &InspectOptions,
    ) -> Result<Report, BoxError> {
        let record_options = RecordOptions {
            read: options.read.clone(),
            sequence: options.sequence,
            reader_schema: None,
        };
        let mut records = self.records(inputs, &record_options)?;
        let (mut n, mut lo, mut hi) = (0u64, usize::MAX, 0usize);
        let mut complete = true;
        while let Some(r) = records.next_record()? {
            if n == options.records {
                complete = false;
                break;
            }
            n += 1;
            lo = lo.min(r.bytes.len());
            hi = hi.max(r.bytes.len());
        }
        let lo = if n == 0 { 0 } else { lo };
        let json = serde_json::json!({
            "file": name,
            "format": self.id(),
            "records": n,
            "complete": complete,
            "min_record_bytes": lo,
            "max_record_bytes": hi,
        });
        let text = vec![format!(
            "{name}: {}, {n} records inspected ({}), of {lo}..{hi} bytes",
            self.name(),
            if complete {
                "all records"
            } else {
                "the first records; there are more"
            }
        )];
        Ok(Report::new(json, text))
    }

    /// Writes the index that lets `input` be read by record number, beside
    /// it (TFRecord: DALI's `<file>.idx`), and returns its record count.
    /// By default, an error: the format has no index files.
    fn write_index(&self, input: &Input, options: &ReadOptions) -> Result<u64, BoxError> {
        let _ = options;
        Err(Box::new(crate::TensorError::Unsupported {
            what: format!(
                "{}: {} files have no index files",
                input.name(),
                self.name()
            ),
        }))
    }

    /// The feature specs that read `inputs` (a file, or the files of a
    /// dataset), with notes on what was left out: from the writer schema
    /// (Avro), or by sampling the first `options.records` records (the
    /// formats of tf.Example, SequenceExample and OFRecord records, under
    /// the rules of [`SpecSampler`](crate::SpecSampler)). Inputs with no
    /// record to sample are an error ([`TensorError::NoRecords`]), as an
    /// empty spec would read every record as nothing.
    ///
    /// By default, an error: the format cannot infer specs.
    ///
    /// [`TensorError::NoRecords`]: crate::TensorError::NoRecords
    fn infer_spec(&self, inputs: &[Input], options: &InferOptions) -> Result<Inferred, BoxError> {
        let _ = options;
        Err(Box::new(crate::TensorError::Unsupported {
            what: format!(
                "{}: {} files carry no schema and no self-describing records to infer a spec                  from; write the spec by hand",
                crate::inputs_named(inputs),
                self.name()
            ),
        }))
    }

    /// The index file [`write_index`](Self::write_index) writes for
    /// `input` (TFRecord: `<file>.idx`), to name it in messages; `None`
    /// (the default) for formats without index files.
    fn index_file(&self, input: &Input) -> Option<Input> {
        let _ = input;
        None
    }

    /// `spec` in this format's own form, as records written for it read
    /// back (sparse features in tf.Example or ATDS form, dtypes the
    /// format reads back; see [`spec_in_form`](crate::spec_in_form)), or
    /// an error naming the first feature this format cannot write under
    /// `options` (a float64 feature where the format holds only float32,
    /// unless [`Lossy::Allow`](crate::Lossy::Allow)): the spec of its
    /// [`encoder`](Self::encoder).
    fn write_spec(&self, spec: &SpecFile, options: &WriteOptions) -> Result<SpecFile, BoxError> {
        Ok(self.encoder(spec, options)?.spec().clone())
    }

    /// The encoder of batches described by `spec` into this format's
    /// records, refusing (before any output exists, naming the feature)
    /// what the format cannot represent; its [`Encoder::spec`] is
    /// [`write_spec`](Self::write_spec)'s. By default, an error: the
    /// format cannot write.
    fn encoder(
        &self,
        spec: &SpecFile,
        options: &WriteOptions,
    ) -> Result<Box<dyn Encoder>, BoxError> {
        let _ = (spec, options);
        Err(cannot_write(self))
    }

    /// A new file of this format at `address` in `storage`, for records of
    /// [`encoder`](Self::encoder)`(spec, options)`: nothing is visible
    /// under `address` until [`RecordSink::finish`]. By default, an
    /// error: the format cannot write.
    fn create(
        &self,
        storage: &Storage,
        address: &Address,
        spec: &SpecFile,
        options: &WriteOptions,
    ) -> Result<Box<dyn RecordSink>, BoxError> {
        let _ = (storage, address, spec, options);
        Err(cannot_write(self))
    }

    /// The number of records of `input` by its framing or header alone,
    /// without reading each record's contents: what a conversion into a
    /// format that [wants record counts](Self::wants_record_counts)
    /// counts its inputs with. By default, [`count`](Self::count) (which
    /// walks the frames of TFRecord and OFRecord and reads FFRecord's
    /// header).
    fn framed_count(&self, input: &Input, options: &ReadOptions) -> Result<u64, BoxError> {
        self.count(input, options)
    }

    /// Whether a file of this format is written more cheaply when its
    /// record count is known before its first record
    /// ([`RecordSink::expect_records`]): a conversion into it then counts
    /// its inputs first. By default, `false`.
    fn wants_record_counts(&self) -> bool {
        false
    }

    /// The name of output file number `part` of a dataset written in this
    /// format under `options` (`part-00000.tfrecord`,
    /// `part-00000.tfrecord.gz`: the name says what a reader needs to
    /// know). By default, `part-` and five digits and the format's first
    /// extension.
    fn part_name(&self, part: usize, options: &WriteOptions) -> String {
        let _ = options;
        let ext = self.extensions().first().copied().unwrap_or_default();
        let ext = if ext.starts_with('.') { ext } else { "" };
        format!("part-{part:05}{ext}")
    }
}

/// The error of a format that cannot write ("FORMAT cannot write").
fn cannot_write(format: &(impl Format + ?Sized)) -> BoxError {
    Box::new(crate::TensorError::Unsupported {
        what: format!("{} cannot write", format.name()),
    })
}

#[cfg(test)]
// The tests map files of their own folder.
#[allow(unsafe_code)]
mod maps_tests {
    use super::*;

    fn mapped(maps: &Maps, path: &Path) -> Bytes {
        // SAFETY: the files live in the test's own folder and are replaced
        // (renamed over, or written anew) only between maps, never while a
        // map of them is read.
        let access = unsafe { Access::mmap() };
        maps.map(access, &Input::local(path)).unwrap().unwrap()
    }

    #[test]
    fn shared_maps_are_reused_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, b"first version").unwrap();
        let maps = Arc::new(Maps::new());
        let one = ReadOptions::new().with_maps(maps.clone());
        let two = ReadOptions::new().with_maps(maps.clone());
        let a = mapped(&one.maps, &path);
        let b = mapped(&two.maps, &path);
        assert_eq!(&a[..], b"first version");
        assert_eq!(a.as_ptr(), b.as_ptr(), "the second reader reuses the map");
        drop((a, b));
        assert_eq!(maps.len(), 1);

        // Rewritten at another length: mapped again, the new bytes.
        std::fs::write(&path, b"second, longer version").unwrap();
        assert_eq!(&mapped(&maps, &path)[..], b"second, longer version");
        // Replaced by another file of the same length (a new inode).
        let other = dir.path().join("other");
        std::fs::write(&other, b"third, a longer version").unwrap();
        std::fs::write(&path, b"third, a longer versioN").unwrap();
        let before = mapped(&maps, &path);
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(&mapped(&maps, &path)[..], b"third, a longer version");
        // The slices handed out before stay valid: the replaced file's
        // map lives on in them.
        assert_eq!(&before[..], b"third, a longer versioN");
        assert_eq!(maps.len(), 1, "one map per file name");

        maps.clear();
        assert!(maps.is_empty());
        // A loader's own maps are not shared.
        assert!(!Arc::ptr_eq(&ReadOptions::new().maps, &one.maps));
    }

    #[test]
    fn a_forked_child_keeps_no_maps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, b"bytes").unwrap();
        // As a child sees the Maps its parent made.
        let inherited = Maps {
            kept: Mutex::default(),
            pid: std::process::id().wrapping_add(1),
        };
        let a = mapped(&inherited, &path);
        let b = mapped(&inherited, &path);
        assert_eq!((&a[..], &b[..]), (&b"bytes"[..], &b"bytes"[..]));
        assert_ne!(a.as_ptr(), b.as_ptr(), "mapped afresh each time");
        assert!(inherited.is_empty());
        inherited.clear();
    }

    #[test]
    fn read_access_maps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, b"bytes").unwrap();
        let maps = Maps::new();
        assert!(
            maps.map(Access::read(), &Input::local(&path))
                .unwrap()
                .is_none()
        );
        assert!(maps.is_empty());
    }
}
