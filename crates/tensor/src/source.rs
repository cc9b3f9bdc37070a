//! The traits every format implements.
//!
//! A [`RecordSource`] turns files into [`Chunk`]s of raw records; a
//! [`Decoder`] appends the rows of a chunk into a [`BatchBuilder`]. The
//! loader relies on this contract:
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

use crate::{BatchBuilder, FeatureSpec};

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
#[derive(Clone, Debug)]
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
}

impl Chunk {
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

/// A compiled decoder: built once per (schema, feature specs), then called
/// many times. Clone it to decode on several threads.
pub trait Decoder: Clone + Send {
    /// The format's error type.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The specs of the columns this decoder produces, in output order.
    fn specs(&self) -> &[FeatureSpec];

    /// A batch builder for this decoder's columns, with room for `rows`
    /// rows in its dense columns.
    fn new_batch(&self, rows: usize) -> BatchBuilder;

    /// Decodes rows `rows` (positions within the chunk) of `chunk`,
    /// appending them to `out` in order.
    fn decode_chunk(
        &mut self,
        chunk: &Chunk,
        rows: Range<usize>,
        out: &mut BatchBuilder,
    ) -> Result<(), Self::Error>;

    /// Decodes rows `rows` of `chunk` as
    /// [`decode_chunk`](Self::decode_chunk) does, and returns where the
    /// record after the last decoded one starts in `chunk.data`, if the
    /// decoder knows.
    ///
    /// This serves [`RecordLayout::Sequential`] chunks taken a few rows at
    /// a time (a loader sampling rows from many buffered chunks): instead
    /// of skipping the rows already decoded again on every call, the
    /// consumer cuts them off (`data.slice(offset..)`, `first_record`
    /// moved on and `record_count` reduced by the rows decoded) and decodes
    /// the rest of the chunk from there. By default, decodes and returns
    /// `None` (the consumer then asks for later rows by their position).
    fn decode_chunk_to(
        &mut self,
        chunk: &Chunk,
        rows: Range<usize>,
        out: &mut BatchBuilder,
    ) -> Result<Option<usize>, Self::Error> {
        self.decode_chunk(chunk, rows, out).map(|()| None)
    }
}
