//! Building blocks of a [`ChunkStream`](crate::ChunkStream): a [`Window`]
//! of bytes read from a file into pooled buffers (or a memory map), and
//! [`FrameCutter`], which cuts runs of length-prefixed frames into chunks.
//! The TFRecord and OFRecord streams are a [`Frames`] decoder plus a
//! cutter; Avro's cuts blocks from a window.
//!
//! ```
//! use std::io::Read;
//! use std::ops::Range;
//! use grist_tensor::chunking::{FrameCutter, Frames, Window};
//! use grist_tensor::{BoxError, ReadOptions, TensorError};
//!
//! /// Frames of a one-byte length, then that many bytes.
//! struct Tiny(u64);
//! impl Frames for Tiny {
//!     const OVERHEAD: u64 = 1;
//!     fn frame(&mut self, data: &[u8]) -> Result<Result<(Range<usize>, usize), u64>, BoxError> {
//!         let Some(&n) = data.first() else { return Ok(Err(1)) };
//!         let len = 1 + n as usize;
//!         if data.len() < len { return Ok(Err(len as u64)) }
//!         self.0 += 1;
//!         Ok(Ok((1..len, len)))
//!     }
//!     fn finish(&self, rest: &[u8]) -> Result<(), BoxError> {
//!         if rest.is_empty() { Ok(()) } else {
//!             Err(Box::new(TensorError::Unsupported { what: "a cut frame".into() }))
//!         }
//!     }
//!     fn record_index(&self) -> u64 { self.0 }
//!     fn read_error(&self, e: std::io::Error) -> BoxError {
//!         Box::new(TensorError::Unsupported { what: e.to_string() })
//!     }
//! }
//!
//! let file = [2u8, b'h', b'i', 0, 3, b'a', b'b', b'c'];
//! let options = ReadOptions::default().with_chunk_bytes(4);
//! let mut cut = FrameCutter::new(Window::reading(&options, 64), &options);
//! let mut input: &[u8] = &file;
//! let mut frames = Tiny(0);
//! let mut chunks = Vec::new();
//! while let Some((spans, len)) = cut.frames(&mut frames, &mut input)? {
//!     let data = cut.window.take(len);
//!     chunks.push(spans.iter().map(|s| data[s.clone()].to_vec()).collect::<Vec<_>>());
//! }
//! assert_eq!(chunks, [vec![b"hi".to_vec(), vec![]], vec![b"abc".to_vec()]]);
//! # Ok::<(), BoxError>(())
//! ```

use std::io::{self, Read};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::{BoxError, Input, ReadOptions};
use grist_io::BufferPool;

/// The read buffer of a file: bytes read and not handed out yet.
///
/// With a pool ([`Window::sharing`]), chunks are slices of the buffer they
/// were read into: the first chunk cut from a read turns the buffer into
/// shared bytes, the chunks after it slice those, and the next read goes
/// into a buffer from the pool, with the start of the next frame or block
/// (the bytes left) copied into it. A buffer goes back to the pool when
/// its last chunk is dropped. Copying every chunk out of one reused
/// buffer instead costs a memmove of every byte read and fresh memory for
/// each chunk (see `docs/BENCHMARKS.md`).
///
/// Or, with [`Access::mmap`](crate::Access::mmap), the rest of the file
/// as a memory map: then there is nothing to read, and chunks are slices
/// of the map.
#[derive(Debug, Default)]
pub struct Window {
    /// Always fully initialized; `start..end` holds the bytes (unless
    /// `shared`).
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The mapped file from the stream's start (then `buf` is unused and
    /// `start` indexes this).
    mapped: Option<Bytes>,
    /// The last buffer read into, since a chunk was cut from it: `start`
    /// and `end` index this, and `buf` is empty.
    shared: Option<Bytes>,
    /// Where buffers come from when chunks share them, and how long the
    /// buffers taken from there are.
    pool: Option<(Arc<BufferPool>, usize)>,
}

impl Window {
    /// A window whose chunks share the buffers they are read into, of
    /// `len` bytes, from `options.buffers`.
    pub fn reading(options: &ReadOptions, len: usize) -> Self {
        Window::default().sharing(options, len)
    }

    /// A window whose chunks are copied out of one reused buffer (zeroed
    /// only when it grows).
    pub fn copying() -> Self {
        Window::default()
    }

    /// The window of `input` from byte `start` on: the mapped file when
    /// `options` map (nothing when `start` is past its end), else `None`
    /// (the caller then reads the file from `start` into a reading or
    /// copying window).
    pub fn mapped(
        options: &ReadOptions,
        input: &Input,
        start: u64,
    ) -> Result<Option<Self>, crate::StorageError> {
        Ok(options.maps.map(options.access, input)?.map(|map| {
            let from = usize::try_from(start).map_or(map.len(), |s| s.min(map.len()));
            Window {
                mapped: Some(map.slice(from..)),
                ..Window::default()
            }
        }))
    }

    /// This window, its chunks sharing the buffers they were read into,
    /// of `len` bytes, from `options.buffers` (not for a mapped window,
    /// whose chunks are slices of the map).
    #[must_use]
    pub fn sharing(mut self, options: &ReadOptions, len: usize) -> Self {
        if self.mapped.is_none() {
            self.pool = Some((options.buffers.clone(), len));
        }
        self
    }

    /// Whether the window is a memory map (nothing to read).
    pub fn is_mapped(&self) -> bool {
        self.mapped.is_some()
    }

    /// The bytes there, not handed out yet.
    pub fn data(&self) -> &[u8] {
        match (&self.mapped, &self.shared) {
            (Some(map), _) => &map[self.start..],
            (None, Some(shared)) => &shared[self.start..self.end],
            (None, None) => &self.buf[self.start..self.end],
        }
    }

    /// Reads up to `block` more bytes (fewer at the end of the input,
    /// setting `eof`): the buffer grows by what is asked of the input in
    /// one step, never by a length read from the data. A mapped window
    /// holds all there is: `eof` at once.
    pub fn fill(&mut self, input: &mut dyn Read, block: usize, eof: &mut bool) -> io::Result<()> {
        if self.mapped.is_some() {
            *eof = true;
            return Ok(());
        }
        if let Some((pool, len)) = &self.pool {
            if self.buf.is_empty() {
                // A fresh buffer, with the bytes left from the last one.
                let rest = self.end - self.start;
                let want = (*len).max(rest + block);
                let mut next = pool.take(want);
                if next.len() > 2 * want {
                    // Grown for a long frame once: not pinned by short
                    // chunks (dropped, so its memory goes).
                    next = vec![0; want];
                }
                if let Some(shared) = self.shared.take() {
                    next[..rest].copy_from_slice(&shared[self.start..self.end]);
                }
                self.buf = next;
                self.start = 0;
                self.end = rest;
            }
        }
        if self.buf.len() - self.end < block {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buf.len() - self.end < block {
                self.buf.resize(self.end + block, 0);
            }
        }
        let stop = self.end + block;
        while self.end < stop {
            match input.read(&mut self.buf[self.end..stop]) {
                Ok(0) => {
                    *eof = true;
                    break;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The first `n` bytes, consumed: a slice of the map or of the shared
    /// buffer, or a copy.
    pub fn take(&mut self, n: usize) -> Bytes {
        let end = self.start + n;
        let bytes = match (&self.mapped, &self.pool) {
            (Some(map), _) => map.slice(self.start..end),
            (None, Some((pool, _))) => {
                let shared = match &self.shared {
                    Some(shared) => shared,
                    None => self.shared.insert(BufferPool::share(
                        pool,
                        std::mem::take(&mut self.buf),
                        self.end,
                    )),
                };
                shared.slice(self.start..end)
            }
            (None, None) => Bytes::copy_from_slice(&self.buf[self.start..end]),
        };
        self.start = end;
        bytes
    }

    /// Drops the window's buffers from the pool it takes them from, so
    /// that its chunks are copies (tests compare the two ways).
    #[doc(hidden)]
    pub fn without_pool(&mut self) {
        self.pool = None;
    }
}

/// Bytes a stream reads beyond the chunk size: room for the next frame's
/// length, so that the chunk's end is known without another read.
pub const FRAME_HEAD_ROOM: usize = 16;

/// The fewest bytes a stream reads at once.
pub const MIN_FILL: usize = 64 << 10;

/// The buffers of a frame stream: a chunk (at most a read) and
/// [`FRAME_HEAD_ROOM`].
pub fn frame_buffer(options: &ReadOptions) -> usize {
    options.chunk_bytes.min(options.read_size()) + FRAME_HEAD_ROOM
}

/// How much a stream whose window holds `window` bytes reads when a frame
/// (or Avro block) is incomplete with `missing` bytes not there: up to
/// `chunk_bytes` (a chunk, or for Avro a read) and [`FRAME_HEAD_ROOM`] in
/// the window (so that the chunk takes all but the start of the next
/// frame), or the rest of a longer frame; at least [`MIN_FILL`], and at
/// most `read_size` (at least [`MIN_FILL`]) however long the chunk or the
/// frame (memory grows only as bytes arrive).
pub fn fill_size(window: usize, chunk_bytes: usize, missing: u64, read_size: usize) -> usize {
    let to_chunk = chunk_bytes
        .saturating_add(FRAME_HEAD_ROOM)
        .saturating_sub(window);
    let frame = usize::try_from(missing).unwrap_or(usize::MAX);
    to_chunk.max(frame).min(read_size).max(MIN_FILL)
}

/// Whether the frame at `pos` of `data` ends within `chunk_bytes`, by the
/// little-endian length in its first 8 bytes plus `overhead` (a size hint:
/// a damaged length only ends the chunk early, decoding reports it); true
/// while its length is not there yet.
fn fits(data: &[u8], pos: usize, chunk_bytes: usize, overhead: u64) -> bool {
    if pos >= chunk_bytes {
        return false;
    }
    match data.get(pos..).and_then(|b| b.first_chunk::<8>()) {
        Some(len) => {
            let frame = u64::from_le_bytes(*len).saturating_add(overhead);
            (pos as u64).saturating_add(frame) <= chunk_bytes as u64
        }
        None => true,
    }
}

/// A frame decoder of a format of frames that start with their
/// little-endian 64-bit length (TFRecord, OFRecord), as
/// [`FrameCutter::frames`] drives it.
pub trait Frames {
    /// Bytes a frame holds beyond the length in its first 8 bytes.
    const OVERHEAD: u64;
    /// The next frame at the start of `data`: `Ok(Ok((payload, len)))`,
    /// or `Ok(Err(needed))` when more bytes are needed.
    #[allow(clippy::type_complexity)]
    fn frame(&mut self, data: &[u8]) -> Result<Result<(Range<usize>, usize), u64>, BoxError>;
    /// Checks that `rest`, left at the end of the file, is no partial
    /// frame.
    fn finish(&self, rest: &[u8]) -> Result<(), BoxError>;
    /// The number of the next record.
    fn record_index(&self) -> u64;
    /// The error for a read that failed at the next record.
    fn read_error(&self, e: io::Error) -> BoxError;
}

/// Cuts a file of frames into chunks: the window of bytes read, whether
/// the file has ended, and the sizes it cuts and reads by.
#[derive(Debug)]
pub struct FrameCutter {
    /// The bytes read and not handed out yet.
    pub window: Window,
    eof: bool,
    /// A read error after some good frames, reported on the next call.
    pending: Option<BoxError>,
    chunk_bytes: usize,
    read_size: usize,
}

impl FrameCutter {
    /// A cutter reading into `window`, by `options`' chunk and read sizes.
    pub fn new(window: Window, options: &ReadOptions) -> Self {
        FrameCutter {
            window,
            eof: false,
            pending: None,
            chunk_bytes: options.chunk_bytes,
            read_size: options.read_size(),
        }
    }

    /// The next chunk's frames: their payloads' spans in the window and
    /// the chunk's length, filling the window from `input` as needed (the
    /// longest run of frames that fits in the chunk size, at least one);
    /// `None` at a clean end of the file. An error after good frames ends
    /// the chunk before it: a read error is kept for the next call, a
    /// decoding error comes again then (the decoder did not move).
    ///
    /// The cut depends only on the frames, so reading from any chunk
    /// boundary cuts the rest of the file the same way.
    #[allow(clippy::type_complexity)]
    pub fn frames<F: Frames>(
        &mut self,
        frames: &mut F,
        input: &mut dyn Read,
    ) -> Result<Option<(Vec<Range<usize>>, usize)>, BoxError> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let mut spans: Vec<Range<usize>> = Vec::new();
        let mut len = 0usize;
        loop {
            let data = self.window.data();
            if !spans.is_empty() && !fits(data, len, self.chunk_bytes, F::OVERHEAD) {
                break;
            }
            match frames.frame(&data[len..]) {
                Ok(Ok((payload, n))) => {
                    spans.push(len + payload.start..len + payload.end);
                    len += n;
                }
                Ok(Err(needed)) => {
                    if self.eof {
                        if !spans.is_empty() {
                            break;
                        }
                        frames.finish(&data[len..])?;
                        return Ok(None);
                    }
                    let missing = needed.saturating_sub((data.len() - len) as u64);
                    let size = fill_size(data.len(), self.chunk_bytes, missing, self.read_size);
                    if let Err(source) = self.window.fill(input, size, &mut self.eof) {
                        let e = frames.read_error(source);
                        if spans.is_empty() {
                            return Err(e);
                        }
                        self.pending = Some(e);
                        break;
                    }
                }
                Err(_) if !spans.is_empty() => break,
                Err(e) => return Err(e),
            }
        }
        Ok(Some((spans, len)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_sizes_stay_within_a_read() {
        let chunk = 1 << 20;
        let read = chunk;
        // Empty window: a chunk and the head room.
        assert_eq!(fill_size(0, chunk, 12, read), read);
        assert_eq!(
            fill_size(100, chunk, 12, 4 << 20),
            chunk + FRAME_HEAD_ROOM - 100
        );
        // Nearly a chunk there already: at least MIN_FILL.
        assert_eq!(fill_size(chunk, chunk, 12, read), MIN_FILL);
        // A long frame: the rest of it, at most a read.
        assert_eq!(fill_size(chunk, chunk, 300_000, read), 300_000);
        assert_eq!(fill_size(chunk, chunk, u64::MAX, read), read);
        // A huge chunk size reads no more than a read at once either.
        assert_eq!(fill_size(0, usize::MAX, u64::MAX, read), read);
    }
}
