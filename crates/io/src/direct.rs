//! The tail of a large local file appended past the page cache.
//!
//! A buffered `write` copies every byte into the page cache, and the
//! kernel's writeback then spends CPU on the pages again; a conversion
//! writing gigabytes pays that on the cores it encodes on, and evicts the
//! reader's cache on the way. Past [`DIRECT_FROM`] bytes of a local
//! [`Writer`](crate::Writer) that only appends, its bytes are gathered in
//! aligned buffers that a thread of the writer's own writes with
//! `O_DIRECT` (Linux) while the next buffer fills. What is left when the
//! writer seeks, reads or commits (less than a buffer) goes through the
//! buffered handle, which the final sync covers with the rest.
//!
//! A file system that refuses `O_DIRECT` (on open, or on a write with
//! `EINVAL`) gets the same bytes through the buffered handle instead.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread::JoinHandle;

/// A local file goes past the page cache from this many bytes on: small
/// files (most tests', a reader's right after) stay cached.
pub(crate) const DIRECT_FROM: u64 = 16 << 20;

/// What `O_DIRECT` needs offsets, lengths and memory aligned to: the
/// page size, a multiple of every common logical block size.
pub(crate) const ALIGN: u64 = 4096;

/// The bytes of one buffer: written in one call.
const BUFFER: usize = 2 << 20;

/// Buffers in circulation: one filling, the others being written.
const BUFFERS: usize = 3;

/// A buffer whose bytes start at an [`ALIGN`]ed address: a `Vec` a little
/// larger than needed, used from its first aligned byte (moving the `Vec`
/// keeps its heap block where it is).
struct Aligned {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new() -> Aligned {
        let raw = vec![0u8; BUFFER + ALIGN as usize];
        let start = raw.as_ptr().align_offset(ALIGN as usize);
        Aligned { raw, start, len: 0 }
    }

    fn bytes(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    /// Copies what fits of `data`: how much.
    fn fill(&mut self, data: &[u8]) -> usize {
        let at = self.start + self.len;
        let n = data.len().min(BUFFER - self.len);
        self.raw[at..at + n].copy_from_slice(&data[..n]);
        self.len += n;
        n
    }

    fn is_full(&self) -> bool {
        self.len == BUFFER
    }
}

/// A file's tail being written past the page cache.
pub(crate) struct Direct {
    /// The buffer being filled, for the bytes from `at` on.
    buf: Aligned,
    at: u64,
    /// Full buffers to the thread, and empty ones back.
    full: Option<SyncSender<(u64, Aligned)>>,
    empty: Receiver<Aligned>,
    made: usize,
    /// The buffered handle, for the last bytes.
    plain: File,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Direct {
    /// Starts writing `path` (whose buffered handle is `plain`) past the
    /// page cache from byte `at` (a multiple of [`ALIGN`]) on; `None` when
    /// the file system refuses (the caller goes on buffered).
    pub(crate) fn start(path: &Path, plain: &File, at: u64) -> Option<Direct> {
        let direct = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok()?;
        Direct::with_handles(direct, plain.try_clone().ok()?, at)
    }

    /// [`start`](Self::start) with the handles open already.
    fn with_handles(direct: File, plain: File, at: u64) -> Option<Direct> {
        debug_assert_eq!(at % ALIGN, 0);
        let thread_plain = plain.try_clone().ok()?;
        let (full, to_write) = sync_channel::<(u64, Aligned)>(BUFFERS);
        let (done, empty) = sync_channel::<Aligned>(BUFFERS);
        let thread = std::thread::Builder::new()
            .name("grist-write-direct".into())
            .spawn(move || write_loop(direct, thread_plain, to_write, done))
            .ok()?;
        Some(Direct {
            buf: Aligned::new(),
            at,
            full: Some(full),
            empty,
            made: 1,
            plain,
            thread: Some(thread),
        })
    }

    /// Takes what fits of `data` into the buffer (handing it to the
    /// thread when full): how many bytes, at least one of a non-empty
    /// `data`.
    pub(crate) fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.buf.fill(data);
        if self.buf.is_full() {
            self.hand_over()?;
        }
        Ok(n)
    }

    fn hand_over(&mut self) -> io::Result<()> {
        let next = match self.empty.try_recv() {
            Ok(b) => b,
            Err(TryRecvError::Empty) if self.made < BUFFERS => {
                self.made += 1;
                Aligned::new()
            }
            // Every buffer is out: wait for the thread to write one.
            Err(TryRecvError::Empty) => match self.empty.recv() {
                Ok(b) => b,
                Err(_) => return Err(self.stop_thread()),
            },
            Err(TryRecvError::Disconnected) => return Err(self.stop_thread()),
        };
        let mut next = next;
        next.len = 0;
        let full = std::mem::replace(&mut self.buf, next);
        let at = self.at;
        self.at += full.len as u64;
        let sent = self
            .full
            .as_ref()
            .is_some_and(|tx| tx.send((at, full)).is_ok());
        if sent {
            Ok(())
        } else {
            Err(self.stop_thread())
        }
    }

    /// The thread's error, after it ended early.
    fn stop_thread(&mut self) -> io::Error {
        self.full = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            Some(Err(_)) => io::Error::other("the direct-write thread panicked"),
            _ => io::Error::other("the direct-write thread ended"),
        }
    }

    /// Waits for the buffers handed over, then writes the last bytes
    /// through the buffered handle: the file then holds every byte
    /// written, up to the offset returned.
    pub(crate) fn finish(mut self) -> io::Result<u64> {
        self.full = None;
        if let Some(thread) = self.thread.take() {
            thread
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the direct-write thread panicked")))?;
        }
        self.plain.write_all_at(self.buf.bytes(), self.at)?;
        Ok(self.at + self.buf.len as u64)
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        // Unfinished (the write is abandoned): let the thread end.
        self.full = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread: writes each full buffer at its offset, past the page cache
/// while the file system allows it, and sends it back empty.
fn write_loop(
    direct: File,
    plain: File,
    full: Receiver<(u64, Aligned)>,
    empty: SyncSender<Aligned>,
) -> io::Result<()> {
    let mut direct = Some(direct);
    for (at, buf) in full {
        let bytes = buf.bytes();
        match direct.as_ref().map(|f| f.write_all_at(bytes, at)) {
            Some(Ok(())) => {}
            Some(Err(e)) if e.raw_os_error() == Some(libc::EINVAL) => {
                // Not for this file system (or not at this alignment):
                // this buffer and the rest go through the page cache.
                direct = None;
                plain.write_all_at(bytes, at)?;
            }
            Some(Err(e)) => return Err(e),
            None => plain.write_all_at(bytes, at)?,
        }
        // Never blocks: there are no more buffers than its room.
        let _ = empty.try_send(buf);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u32) -> Vec<u8> {
        (0..len as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
            .collect()
    }

    /// A new file `f` in a new folder (kept alive by the first item),
    /// open for reading and writing.
    fn new_file() -> (tempfile::TempDir, std::path::PathBuf, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        (dir, path, file)
    }

    /// Hands all of `data` to `d` (each call takes at least a byte).
    fn write_all(d: &mut Direct, mut data: &[u8]) {
        while !data.is_empty() {
            let n = d.write(data).unwrap();
            assert!(n > 0);
            data = &data[n..];
        }
    }

    #[test]
    fn buffers_are_aligned() {
        for _ in 0..4 {
            let b = Aligned::new();
            assert_eq!(b.bytes().as_ptr() as usize % ALIGN as usize, 0);
        }
    }

    #[test]
    fn every_byte_lands_at_its_offset() {
        let (_dir, path, plain) = new_file();
        let head = pattern(ALIGN as usize * 3, 1);
        plain.write_all_at(&head, 0).unwrap();
        let Some(mut d) = Direct::start(&path, &plain, head.len() as u64) else {
            // A file system without O_DIRECT: nothing here to test.
            return;
        };
        // More buffers than circulate, in writes of odd sizes.
        let body = pattern(BUFFER * (BUFFERS + 2) + 12_345, 2);
        let mut rest = &body[..];
        let mut step = 1usize;
        while !rest.is_empty() {
            let n = d.write(&rest[..step.min(rest.len())]).unwrap();
            assert!(n > 0);
            rest = &rest[n..];
            step = step * 7 % 1_000_003 + 1;
        }
        let end = d.finish().unwrap();
        assert_eq!(end, (head.len() + body.len()) as u64);
        let mut want = head;
        want.extend_from_slice(&body);
        assert_eq!(std::fs::read(&path).unwrap(), want);
    }

    #[test]
    fn a_refused_direct_write_goes_through_the_page_cache() {
        // O_DIRECT at an unaligned offset fails with EINVAL: the thread
        // writes that buffer and the rest buffered, losing nothing.
        let (_dir, path, plain) = new_file();
        plain.write_all_at(b"abc", 0).unwrap();
        let Some(mut d) = Direct::start(&path, &plain, 0) else {
            return;
        };
        d.at = 3;
        let body = pattern(BUFFER * 2 + 100, 3);
        write_all(&mut d, &body);
        assert_eq!(d.finish().unwrap(), 3 + body.len() as u64);
        let mut want = b"abc".to_vec();
        want.extend_from_slice(&body);
        assert_eq!(std::fs::read(&path).unwrap(), want);
    }

    #[test]
    fn a_failed_write_is_reported() {
        // Handles open for reading only: the thread's writes fail (EBADF),
        // and the error comes out of `write` or `finish`.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"").unwrap();
        let read_only = || File::open(&path).unwrap();
        let mut d = Direct::with_handles(read_only(), read_only(), 0).unwrap();
        let body = pattern(BUFFER * (BUFFERS + 3), 4);
        let mut rest = &body[..];
        let err = loop {
            match d.write(rest) {
                Ok(n) if n < rest.len() => rest = &rest[n..],
                Ok(_) => break d.finish().unwrap_err(),
                Err(e) => break e,
            }
        };
        assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
    }
}
