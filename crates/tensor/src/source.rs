//! Chunks of raw records, and the simplest source of them.
//!
//! A [`RecordSource`] turns files into [`Chunk`]s of raw records; a
//! [`Decoder`](crate::Decoder) appends the rows of a chunk into a
//! [`BatchBuilder`](crate::BatchBuilder). The loader relies on this
//! contract (see [`crate::format`] for the rest of it):
//!
//! * A chunk is the unit of I/O and of parallel work: an Avro block, a run of
//!   TFRecord frames, a set of FFRecord samples, a run of OFRecord records.
//!   It knows its file, its position, its record count, its stored byte size
//!   and whether it was compressed, so the loader can estimate its cost
//!   before decoding it.
//! * Chunks are independent: any chunk can be decoded on any thread, in any
//!   order, by a clone of the decoder.
//! * A decoder never allocates per record on its hot path, writes only into
//!   the builder it is given, and reports bad data as an error naming the
//!   file, the record and the feature. A failed row leaves the builder with
//!   only whole rows in it (the rows before the failure).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::{ChunkPos, Deferred, FileHeader};

/// The largest I/O buffer a reader or writer option may ask for (64 MiB):
/// larger values are lowered to it, and a source reads a larger chunk in
/// steps of at most this, so that a file of a few bytes never makes a
/// buffer of gigabytes.
pub const MAX_IO_BUFFER: usize = 64 << 20;

/// Where the records of a chunk lie in its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordLayout {
    /// Each record's payload is the given byte range of `data` (framed
    /// formats: TFRecord, FFRecord, OFRecord).
    Spans(Arc<[Range<usize>]>),
    /// The records follow each other in `data` and are found by decoding
    /// (Avro blocks).
    Sequential,
}

/// A run of raw records: the unit of I/O and of parallel work.
#[derive(Clone)]
pub struct Chunk {
    /// The file the records come from.
    pub file: Arc<str>,
    /// The chunk's number within its file (block index, run index).
    pub index: u64,
    /// The number, within its file, of the chunk's first record.
    pub first_record: u64,
    /// How many records the chunk holds.
    pub record_count: usize,
    /// How many bytes the chunk occupies in the file as stored.
    pub stored_bytes: u64,
    /// Whether the stored bytes were compressed (the cost of inflating
    /// them was or will be paid for this chunk).
    pub compressed: bool,
    /// The record bytes (decompressed).
    pub data: Bytes,
    /// Where the records lie in `data`.
    pub layout: RecordLayout,
    /// The byte offset of the chunk in its file (in the decompressed
    /// stream for compressed files): the `offset` of its [`ChunkPos`].
    pub offset: u64,
    /// Work left for the thread that decodes the chunk.
    pub deferred: Deferred,
    /// Its file's header, for formats whose decoding needs one (Avro's
    /// writer schema and codec).
    pub header: Option<FileHeader>,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk")
            .field("file", &self.file)
            .field("index", &self.index)
            .field("first_record", &self.first_record)
            .field("record_count", &self.record_count)
            .field("stored_bytes", &self.stored_bytes)
            .field("compressed", &self.compressed)
            .field("bytes", &self.data.len())
            .field("offset", &self.offset)
            .field("deferred", &self.deferred)
            .field("header", &self.header.is_some())
            .finish_non_exhaustive()
    }
}

impl Chunk {
    /// Where the chunk starts: what a [`ChunkStream`](crate::ChunkStream)
    /// reopens at to read it again.
    pub fn pos(&self) -> ChunkPos {
        ChunkPos {
            index: self.index,
            record: self.first_record,
            offset: self.offset,
        }
    }

    /// The payload of record `i` of a chunk with [`RecordLayout::Spans`].
    pub fn record(&self, i: usize) -> Option<&[u8]> {
        match &self.layout {
            RecordLayout::Spans(spans) => spans.get(i).and_then(|r| self.data.get(r.clone())),
            RecordLayout::Sequential => None,
        }
    }
}

/// A source of chunks of raw records, read from files.
pub trait RecordSource {
    /// The format's error type.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The next chunk, or `None` at the end of the input.
    fn next_chunk(&mut self) -> Result<Option<Chunk>, Self::Error>;
}
