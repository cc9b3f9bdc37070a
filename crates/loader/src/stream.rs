//! Sequential reading: each file as a run of chunks that can start at any
//! chunk boundary (so a saved state resumes there without reading what
//! came before), and the epoch's files interleaved `cycle_length` at a
//! time into one stream of chunks.

use grist_tensor::{Chunk, ChunkPos, ChunkStream, Format, Input, ReadOptions};
use serde::{Deserialize, Serialize};

use crate::error::Result;

/// A chunk as read, with where the next one starts.
#[derive(Debug)]
pub(crate) struct RawChunk {
    pub(crate) chunk: Chunk,
    pub(crate) next: ChunkPos,
}

/// One file read as chunks, by its format's stream.
pub(crate) struct Chunker(Box<dyn ChunkStream>);

impl Chunker {
    /// Opens `input` at chunk boundary `pos`.
    pub(crate) fn open(
        format: &dyn Format,
        options: &ReadOptions,
        input: &Input,
        pos: ChunkPos,
    ) -> Result<Self> {
        Ok(Chunker(format.stream(input, pos, options)?))
    }

    /// The next chunk, `None` at the end of the file. After an error the
    /// chunker must not be used again.
    pub(crate) fn next(&mut self) -> Result<Option<RawChunk>> {
        Ok(self
            .0
            .next_chunk()?
            .map(|(chunk, next)| RawChunk { chunk, next }))
    }
}

/// Where the interleaved stream of an epoch is: which files are open in
/// which slot and where, which slot's turn it is, how many chunks went by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StreamCursor {
    /// The position, in the epoch's file list, of the next file to open.
    pub(crate) next_file: usize,
    /// The interleave slots (`None`: closed, no file left for it).
    pub(crate) slots: Vec<Option<Slot>>,
    /// The slot whose turn is next.
    pub(crate) turn: usize,
    /// The number of chunks of the whole (all ranks') stream so far.
    pub(crate) global: u64,
}

/// One interleave slot: a file (by position in the epoch's list) and where
/// its next chunk starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Slot {
    pub(crate) file: usize,
    pub(crate) next: ChunkPos,
}

impl StreamCursor {
    /// The start of an epoch over `files` files, `cycle` at a time.
    pub(crate) fn start(files: usize, cycle: usize) -> Self {
        // No more slots than files: the others would stay closed.
        let cycle = slots_for(files, cycle);
        StreamCursor {
            next_file: cycle.min(files),
            slots: (0..cycle)
                .map(|i| {
                    (i < files).then_some(Slot {
                        file: i,
                        next: ChunkPos::default(),
                    })
                })
                .collect(),
            turn: 0,
            global: 0,
        }
    }

    /// Whether this cursor can be one of an epoch over `files` files,
    /// `cycle` at a time (a restored state may hold anything); what is
    /// wrong if not.
    pub(crate) fn check(&self, files: usize, cycle: usize) -> std::result::Result<(), String> {
        // (States saved before slots were capped by the file count have
        // one per `cycle`.)
        if self.slots.len() != slots_for(files, cycle) && self.slots.len() != cycle.max(1) {
            return Err(format!(
                "the stream has {} interleave slots, this loader {}",
                self.slots.len(),
                slots_for(files, cycle)
            ));
        }
        if self.next_file > files {
            return Err(format!(
                "the next file is number {} of {files}",
                self.next_file
            ));
        }
        if let Some(s) = self.slots.iter().flatten().find(|s| s.file >= files) {
            return Err(format!("a slot reads file number {} of {files}", s.file));
        }
        Ok(())
    }

    /// Whether every slot is closed.
    pub(crate) fn ended(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }
}

/// The interleave slots of an epoch over `files` files, `cycle` at a time.
fn slots_for(files: usize, cycle: usize) -> usize {
    cycle.clamp(1, files.max(1))
}

/// Reads the chunks of one slot's file.
pub(crate) trait SlotReader {
    /// What a chunk is.
    type Chunk;
    /// The next chunk and where the one after starts; `None` at the end.
    fn next(&mut self) -> Result<Option<(Self::Chunk, ChunkPos)>>;
}

impl SlotReader for Chunker {
    type Chunk = RawChunk;

    fn next(&mut self) -> Result<Option<(RawChunk, ChunkPos)>> {
        Ok(Chunker::next(self)?.map(|raw| {
            let next = raw.next;
            (raw, next)
        }))
    }
}

/// `cycle_length` files at a time, one chunk from each in turn (a file
/// that ends gives its slot to the next file at once, which then gives the
/// chunk; a slot with no file left closes), as `tf.data`'s `interleave`
/// with a block length of one chunk.
pub(crate) struct Interleave<R> {
    pub(crate) cursor: StreamCursor,
    open: Vec<Option<R>>,
}

impl<R: SlotReader> Interleave<R> {
    pub(crate) fn new(cursor: StreamCursor) -> Self {
        let open = cursor.slots.iter().map(|_| None).collect();
        Interleave { cursor, open }
    }

    /// The next chunk of the stream, its file (position in the list) and
    /// its global number; `open(file, pos)` opens a file at a position.
    pub(crate) fn next(
        &mut self,
        files: usize,
        open: &mut impl FnMut(usize, ChunkPos) -> Result<R>,
    ) -> Result<Option<(R::Chunk, usize, u64)>> {
        let c = &mut self.cursor;
        let k = c.slots.len();
        while !c.ended() {
            let i = c.turn % k;
            let Some(slot) = c.slots[i] else {
                c.turn = (i + 1) % k;
                continue;
            };
            if self.open[i].is_none() {
                self.open[i] = Some(open(slot.file, slot.next)?);
            }
            let reader = self.open[i].as_mut().expect("opened above");
            match reader.next()? {
                Some((chunk, next)) => {
                    c.slots[i] = Some(Slot {
                        file: slot.file,
                        next,
                    });
                    c.turn = (i + 1) % k;
                    let global = c.global;
                    c.global = c.global.saturating_add(1);
                    return Ok(Some((chunk, slot.file, global)));
                }
                None => {
                    self.open[i] = None;
                    if c.next_file < files {
                        c.slots[i] = Some(Slot {
                            file: c.next_file,
                            next: ChunkPos::default(),
                        });
                        c.next_file += 1;
                    } else {
                        c.slots[i] = None;
                        c.turn = (i + 1) % k;
                    }
                }
            }
        }
        Ok(None)
    }
}

/// The record count of each chunk of `input`, read without decoding (Avro
/// blocks are not even decompressed).
pub(crate) fn chunk_counts(
    format: &dyn Format,
    options: &ReadOptions,
    input: &Input,
) -> Result<Vec<u64>> {
    let mut chunker = Chunker::open(format, options, input, ChunkPos::default())?;
    let mut counts = Vec::new();
    while let Some(raw) = chunker.next()? {
        counts.push(raw.chunk.record_count as u64);
    }
    Ok(counts)
}

/// A file known by its chunk sizes, for simulating the stream.
pub(crate) struct Counted<'a> {
    counts: &'a [u64],
    at: usize,
}

impl<'a> Counted<'a> {
    pub(crate) fn new(counts: &'a [u64], pos: ChunkPos) -> Self {
        Counted {
            counts,
            at: pos.index as usize,
        }
    }
}

impl SlotReader for Counted<'_> {
    type Chunk = u64;

    fn next(&mut self) -> Result<Option<(u64, ChunkPos)>> {
        let Some(&n) = self.counts.get(self.at) else {
            return Ok(None);
        };
        self.at += 1;
        Ok(Some((
            n,
            ChunkPos {
                index: self.at as u64,
                ..ChunkPos::default()
            },
        )))
    }
}
