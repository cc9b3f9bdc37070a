//! [`AvroSource`]: object container files as a [`RecordSource`] of one
//! chunk per block.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use grist_tensor::{Chunk, RecordLayout, RecordSource};

use crate::container::{Block, BlockReader, Header, ReaderOptions};
use crate::error::{Error, Result};

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
    current: Option<BlockReader<File>>,
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
                    let chunk = chunk(block, reader.name().clone());
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
fn chunk(block: Block, file: Arc<str>) -> Chunk {
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
