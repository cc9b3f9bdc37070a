//! [`FfrSource`]: a dataset as a [`RecordSource`] of chunks of
//! consecutive samples.

use std::fmt;
use std::sync::Arc;

use grist_tensor::{Chunk, Deferred, RecordLayout, RecordSource};

use crate::error::{Error, Result};
use crate::header::check_sample;
use crate::reader::{Ahead, FfrReader};
use grist_tensor::Location;

/// Reads a dataset in sample order as [`Chunk`]s: runs of consecutive
/// samples of one file, about [`with_chunk_bytes`](Self::with_chunk_bytes)
/// bytes each, each fetched with one read (or sliced from the file's
/// memory map).
///
/// A chunk's `first_record` is the number of its first sample within its
/// file; its [`RecordLayout::Spans`] point at the samples. When the reader
/// checks data, every sample's CRC-32 is checked before its chunk is
/// handed out; the samples before a bad one come first, the error on the
/// next call, and then the source ends.
///
/// ```
/// use grist_tensor::RecordSource;
/// use grist_ffrecord::{FfrReader, ReaderOptions, encode_file};
///
/// let samples: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_le_bytes().to_vec()).collect();
/// let file = encode_file(samples.iter().map(|s| &s[..]));
/// let reader = FfrReader::from_bytes("mem.ffr", file.into(), ReaderOptions::default())?;
/// let mut source = reader.source().with_chunk_bytes(64);
/// let mut seen = 0;
/// while let Some(chunk) = source.next_chunk()? {
///     assert_eq!(chunk.first_record, seen);
///     for i in 0..chunk.record_count {
///         assert_eq!(chunk.record(i), Some(&samples[seen as usize][..]));
///         seen += 1;
///     }
/// }
/// assert_eq!(seen, 100);
/// # Ok::<(), grist_ffrecord::Error>(())
/// ```
pub struct FfrSource {
    reader: FfrReader,
    chunk_bytes: u64,
    /// The file being read and the next sample in it.
    file: usize,
    next: u64,
    chunk_index: u64,
    pending: Option<Error>,
    done: bool,
    /// The sequential read of a remote file.
    ahead: Option<Ahead>,
}

impl FfrSource {
    /// A source over every sample of `reader`.
    pub fn new(reader: FfrReader) -> Self {
        FfrSource {
            reader,
            chunk_bytes: 4 << 20,
            file: 0,
            next: 0,
            chunk_index: 0,
            pending: None,
            done: false,
            ahead: None,
        }
    }

    /// The target size of a chunk in bytes: a chunk holds the consecutive
    /// samples that fit (at least one: a larger sample makes a chunk of its
    /// own). By default, 4 MiB.
    #[must_use]
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes.max(1) as u64;
        self
    }

    /// This source started at sample `sample` (within the dataset's first
    /// file) as chunk number `chunk_index`: the rest of a stream whose
    /// chunks before were read already.
    #[must_use]
    pub fn starting_at(mut self, sample: u64, chunk_index: u64) -> Self {
        self.next = sample;
        self.chunk_index = chunk_index;
        self
    }

    /// The next chunk of the current file, moving on to the next file at
    /// its end; `None` at the end of the dataset.
    fn next_inner(&mut self) -> Result<Option<Chunk>> {
        let files = self.reader.files();
        while self.file < files.len() && self.next >= files[self.file].count() {
            self.file += 1;
            self.next = 0;
            self.chunk_index = 0;
        }
        let Some(info) = files.get(self.file) else {
            return Ok(None);
        };
        let header = info.header();
        let offsets = header.offsets();
        let limits = self.reader.options().limits();
        let first = self.next as usize;
        let start = offsets[first];
        // Take the samples that fit (at least one); stop before one over
        // the limit (its error comes after the samples before it).
        let over_limit = |i: usize| {
            let len = offsets[i + 1] - offsets[i];
            (len > limits.max_record_bytes()).then(|| Error::SampleTooLarge {
                at: self.at(i as u64).into(),
                len,
                max: limits.max_record_bytes(),
            })
        };
        if let Some(e) = over_limit(first) {
            return Err(e);
        }
        let mut end_sample = first + 1;
        let mut later_error = None;
        while end_sample < header.count() as usize
            && offsets[end_sample + 1] - start <= self.chunk_bytes
        {
            if let Some(e) = over_limit(end_sample) {
                later_error = Some(e);
                break;
            }
            end_sample += 1;
        }
        let end = offsets[end_sample];
        let data = self
            .reader
            .fetch_next(self.file, start, end, &mut self.ahead)
            .map_err(|e| self.read_error(e, first as u64, end_sample as u64))?;
        // Check the samples; stop before the first bad one.
        let mut good = end_sample;
        if self.reader.options().check_data() {
            for i in first..end_sample {
                let bytes = &data[(offsets[i] - start) as usize..(offsets[i + 1] - start) as usize];
                if let Err(e) = check_sample(bytes, header.checksums()[i], || self.at(i as u64)) {
                    later_error = Some(e);
                    good = i;
                    break;
                }
            }
        }
        if let Some(e) = later_error {
            if good == first {
                return Err(e);
            }
            self.pending = Some(e);
        }
        let spans: Arc<[std::ops::Range<usize>]> = (first..good)
            .map(|i| (offsets[i] - start) as usize..(offsets[i + 1] - start) as usize)
            .collect();
        let stored_bytes = offsets[good] - start;
        let chunk = Chunk {
            file: info.name().clone(),
            index: self.chunk_index,
            first_record: first as u64,
            record_count: good - first,
            stored_bytes,
            compressed: false,
            data: data.slice(..stored_bytes as usize),
            layout: RecordLayout::Spans(spans),
            offset: start,
            deferred: Deferred::NONE,
            header: None,
        };
        self.chunk_index += 1;
        self.next = good as u64;
        Ok(Some(chunk))
    }

    fn at(&self, sample: u64) -> Location {
        let info = &self.reader.files()[self.file];
        Location::record(info.name().clone(), sample).with_index(info.first_index() + sample)
    }

    /// The error for a failed read of samples `first..end` of the current
    /// file: the first sample past the end of a file that shrank, or the
    /// storage layer's error.
    fn read_error(&self, e: grist_io::Error, first: u64, end: u64) -> Error {
        let info = &self.reader.files()[self.file];
        if let Some(size) = self.reader.current_size(self.file) {
            let offsets = info.header().offsets();
            for i in first..end {
                let sample_end = offsets[i as usize + 1];
                if sample_end > size {
                    return Error::TruncatedSample {
                        at: self.at(i).into(),
                        end: sample_end,
                        size,
                    };
                }
            }
        }
        Error::Storage(grist_tensor::StorageError::new(info.name().clone(), e))
    }
}

impl RecordSource for FfrSource {
    type Error = Error;

    fn next_chunk(&mut self) -> Result<Option<Chunk>> {
        if self.done {
            return Ok(None);
        }
        if let Some(e) = self.pending.take() {
            self.done = true;
            return Err(e);
        }
        match self.next_inner() {
            Ok(Some(chunk)) => Ok(Some(chunk)),
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
}

impl fmt::Debug for FfrSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FfrSource")
            .field("reader", &self.reader)
            .field("chunk_bytes", &self.chunk_bytes)
            .field("file", &self.file)
            .field("next", &self.next)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
