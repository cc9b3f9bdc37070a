//! Atomic writes.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

#[cfg(target_os = "linux")]
use crate::direct::{ALIGN, DIRECT_FROM, Direct};
#[cfg(feature = "remote")]
use crate::remote;
use crate::{Address, AtomicTarget, Error, Result};

/// An atomic write: the bytes appear under their final name only when
/// [`commit`](Writer::commit) succeeds; a writer dropped uncommitted, or
/// whose commit fails, leaves nothing behind.
///
/// A local file is written to a temporary sibling `.name.tmp-<pid>-<n>`,
/// synced, renamed over the final name, and its folder synced (see
/// [`AtomicTarget`]). On Linux, what is appended to a local file past its
/// first 16 MiB goes past the page cache (`O_DIRECT`, written by a thread
/// of the writer's own while the next bytes are gathered), so that a
/// large output neither costs the copy into the page cache and its
/// writeback nor evicts the inputs' pages; [`keep_cached`](Self::keep_cached)
/// keeps a file that will be read back soon in the cache. Small writes
/// are gathered (256 KiB by default, [`set_buffer_size`](Self::set_buffer_size))
/// and handed to the file together, so a writer of small records needs no
/// buffer of its own in front; as with a `BufWriter`, the error of a
/// gathered write may come with a later call. An object is written to a local spool file (so the
/// writer can seek back and read, as the FFRecord and OFRecord writers do)
/// and `commit` uploads it: in one request when it fits in one part, else
/// as a multipart upload whose parts go up concurrently, each retried, and
/// which is aborted if it fails. Readers see the object only once it is
/// complete.
///
/// [`Storage::create_streaming`](crate::Storage::create_streaming) makes a
/// remote writer without a spool: each full part goes up in the background
/// while the next is written, with up to the storage's concurrency in
/// flight. It cannot seek back nor read; dropped uncommitted, it aborts the
/// upload.
///
/// ```
/// use std::io::{Seek, SeekFrom, Write};
/// use grist_io::{Address, Storage};
///
/// let dir = tempfile::tempdir()?;
/// let addr = Address::from(dir.path().join("out.bin"));
/// let mut w = Storage::new().create(&addr)?;
/// w.write_all(b"....body")?;
/// w.seek(SeekFrom::Start(0))?;
/// w.write_all(b"head")?; // a header written last
/// assert!(!dir.path().join("out.bin").exists());
/// w.commit()?;
/// assert_eq!(std::fs::read(dir.path().join("out.bin"))?, b"headbody");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Writer {
    address: Address,
    kind: Kind,
    /// Where the next write goes.
    at: u64,
    /// The end of the bytes written so far (a write at or past it
    /// appends).
    end: u64,
    /// The bytes written so far, and their CRC-32C while every write
    /// appended at the end (`None` once one did not).
    digest: Option<Digest>,
    /// `at` when a local file was last asked to write back.
    behind_at: u64,
    /// Bytes written to a file (local, or a remote one's spool) but not
    /// yet handed to it: small writes are gathered here, so that a format
    /// writer needs no buffer of its own (a second copy of every byte).
    pending: Vec<u8>,
    /// The most bytes gathered in `pending`.
    gather: usize,
}

/// The bytes a [`Writer`] gathers by default before handing them to its
/// file.
const GATHER: usize = 256 << 10;

/// A local file being written is written back to the disk in the
/// background every this many bytes ([`AtomicTarget::write_behind`]):
/// the sync at commit then waits for the tail only, not the whole file
/// (a fifth of a conversion's time when it was all left to the end).
const WRITE_BEHIND_BYTES: u64 = 16 << 20;

/// The size and CRC-32C (Castagnoli) of a file's bytes, computed while
/// they are written: see [`Writer::digest`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Digest {
    /// The file's size in bytes.
    pub size: u64,
    /// The CRC-32C of its bytes (not masked as TFRecord masks its CRCs).
    pub crc32c: u32,
}

impl Digest {
    /// The digest of `size` bytes whose CRC-32C is `crc32c`.
    pub fn new(size: u64, crc32c: u32) -> Self {
        Digest { size, crc32c }
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Digest::new(bytes.len() as u64, crc32c::crc32c(bytes))
    }

    /// The digest of these bytes followed by `bytes`.
    #[must_use]
    pub fn append(self, bytes: &[u8]) -> Self {
        Digest::new(
            self.size + bytes.len() as u64,
            crc32c::crc32c_append(self.crc32c, bytes),
        )
    }

    /// The digest of these bytes followed by those of `next` (without
    /// reading either again).
    #[must_use]
    pub fn then(self, next: Digest) -> Self {
        let len = usize::try_from(next.size).unwrap_or(usize::MAX);
        Digest::new(
            self.size + next.size,
            crc32c::crc32c_combine(self.crc32c, next.crc32c, len),
        )
    }
}

enum Kind {
    Local {
        /// The tail being written past the page cache, once the file is
        /// large. (Before `target`: dropped first, its thread joined
        /// before the temporary file is removed.)
        #[cfg(target_os = "linux")]
        direct: Option<Direct>,
        /// Whether the tail may go past the page cache (not once the
        /// file system refused).
        #[cfg(target_os = "linux")]
        may_direct: bool,
        file: File,
        target: AtomicTarget,
    },
    #[cfg(feature = "remote")]
    Remote { spool: File, upload: remote::Upload },
    #[cfg(feature = "remote")]
    Stream(remote::StreamUpload),
}

impl Writer {
    pub(crate) fn local(addr: &Address, path: &Path) -> Result<Writer> {
        let (file, target) =
            AtomicTarget::create(path).map_err(|e| Error::write(addr.name(), e))?;
        Ok(Writer {
            address: addr.clone(),
            kind: Kind::Local {
                file,
                target,
                #[cfg(target_os = "linux")]
                direct: None,
                #[cfg(target_os = "linux")]
                may_direct: true,
            },
            at: 0,
            digest: Some(Digest::default()),
            behind_at: 0,
            end: 0,
            pending: Vec::new(),
            gather: GATHER,
        })
    }

    #[cfg(feature = "remote")]
    pub(crate) fn remote(addr: &Address, spool: File, upload: remote::Upload) -> Writer {
        Writer {
            address: addr.clone(),
            kind: Kind::Remote { spool, upload },
            at: 0,
            digest: Some(Digest::default()),
            behind_at: 0,
            end: 0,
            pending: Vec::new(),
            gather: GATHER,
        }
    }

    #[cfg(feature = "remote")]
    pub(crate) fn streaming(addr: &Address, upload: remote::StreamUpload) -> Writer {
        Writer {
            address: addr.clone(),
            kind: Kind::Stream(upload),
            at: 0,
            digest: Some(Digest::default()),
            behind_at: 0,
            end: 0,
            pending: Vec::new(),
            gather: GATHER,
        }
    }

    /// Gathers up to `bytes` of small writes (at least one) before
    /// handing them to the file in one call, instead of 256 KiB: a writer
    /// of many small records needs no buffer of its own in front. (Bytes
    /// written past the page cache, and a streaming upload's, are gathered
    /// in their own buffers.) Call it before the first write.
    pub fn set_buffer_size(&mut self, bytes: usize) {
        self.gather = bytes.max(1);
    }

    /// Where the bytes go.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The size and CRC-32C of the bytes written, computed as they were
    /// written, when every write appended at the end (seeking and reading
    /// are fine); `None` once a write went anywhere else (a header written
    /// last, say), as the bytes seen no longer are the file's.
    ///
    /// ```
    /// use std::io::Write;
    /// use grist_io::{Address, Digest, Storage};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut w = Storage::new().create(&Address::from(dir.path().join("a")))?;
    /// w.write_all(b"in ")?;
    /// w.write_all(b"order")?;
    /// assert_eq!(w.digest(), Some(Digest::of(b"in order")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn digest(&self) -> Option<Digest> {
        self.digest
    }

    /// Notes that `buf` was written at the current position.
    fn wrote(&mut self, buf: &[u8]) {
        self.digest = match self.digest {
            Some(d) if d.size == self.at => Some(d.append(buf)),
            _ => None,
        };
        self.at += buf.len() as u64;
        self.end = self.end.max(self.at);
    }

    /// Makes the bytes written visible under the final name: syncs and
    /// renames a local file, uploads an object.
    pub fn commit(mut self) -> Result<()> {
        let name = self.address.name().clone();
        self.settle().map_err(|e| Error::write(&name, e))?;
        match self.kind {
            Kind::Local { file, target, .. } => {
                drop(file);
                target.sync().map_err(|e| Error::write(&name, e))?;
                target.commit().map_err(|e| Error::write(&name, e))
            }
            #[cfg(feature = "remote")]
            Kind::Remote { spool, upload } => upload.commit(&spool),
            #[cfg(feature = "remote")]
            Kind::Stream(upload) => upload.commit(),
        }
    }

    /// [`commit`](Self::commit), returning the [`digest`](Self::digest)
    /// of what it committed.
    pub fn commit_with_digest(self) -> Result<Option<Digest>> {
        let digest = self.digest;
        self.commit().map(|()| digest)
    }

    /// The file written to; `None` for a streaming upload, which has none.
    fn file(&mut self) -> Option<&mut File> {
        match &mut self.kind {
            Kind::Local { file, .. } => Some(file),
            #[cfg(feature = "remote")]
            Kind::Remote { spool, .. } => Some(spool),
            #[cfg(feature = "remote")]
            Kind::Stream(_) => None,
        }
    }

    /// Keeps every byte written in the page cache, for a writer that
    /// reads its bytes back before committing (the FFRecord writer moving
    /// its samples behind a header): by default a local file's bytes past
    /// 16 MiB go past the page cache, and reading them back would read the
    /// disk.
    /// (Bytes written past the page cache before the call are written
    /// out first: the error is of that write.)
    pub fn keep_cached(&mut self) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        if let Some(local) = self.local_parts() {
            *local.may_direct = false;
        }
        self.settle()
    }

    /// Whether the bytes go past the page cache now.
    fn is_direct(&self) -> bool {
        match &self.kind {
            #[cfg(target_os = "linux")]
            Kind::Local { direct, .. } => direct.is_some(),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The target of a local file (whose pages are written back behind).
    fn local_target(&self) -> Option<&AtomicTarget> {
        match &self.kind {
            Kind::Local { target, .. } => Some(target),
            #[cfg(feature = "remote")]
            _ => None,
        }
    }

    #[cfg(feature = "remote")]
    fn stream(&mut self) -> Option<&mut remote::StreamUpload> {
        match &mut self.kind {
            Kind::Stream(upload) => Some(upload),
            _ => None,
        }
    }

    fn cannot(&self, what: &'static str) -> io::Error {
        Error::Unsupported {
            address: self.address.name().clone(),
            what,
        }
        .into()
    }
}

impl fmt::Debug for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Writer {
    fn write_inner(&mut self, buf: &[u8]) -> io::Result<usize> {
        #[cfg(target_os = "linux")]
        if let Some(n) = self.write_direct(buf)? {
            return Ok(n);
        }
        if self.file().is_some() {
            if self.pending.len() + buf.len() > self.gather {
                self.hand_over()?;
            }
            if buf.len() >= self.gather {
                return match self.file() {
                    Some(file) => file.write(buf),
                    None => Ok(0),
                };
            }
            if self.pending.capacity() == 0 {
                self.pending.reserve_exact(self.gather);
            }
            self.pending.extend_from_slice(buf);
            return Ok(buf.len());
        }
        #[cfg(feature = "remote")]
        if let Some(upload) = self.stream() {
            return upload.write(buf).map_err(io::Error::from);
        }
        Ok(0)
    }
}

/// A local file's parts, borrowed.
#[cfg(target_os = "linux")]
struct LocalParts<'a> {
    file: &'a mut File,
    target: &'a AtomicTarget,
    direct: &'a mut Option<Direct>,
    may_direct: &'a mut bool,
}

#[cfg(target_os = "linux")]
impl Writer {
    /// The parts of a local file; `None` for an object.
    fn local_parts(&mut self) -> Option<LocalParts<'_>> {
        match &mut self.kind {
            Kind::Local {
                file,
                target,
                direct,
                may_direct,
            } => Some(LocalParts {
                file,
                target,
                direct,
                may_direct,
            }),
            #[cfg(feature = "remote")]
            _ => None,
        }
    }

    /// Appends to a large local file past the page cache (see
    /// [`direct`](crate::direct)): `None` when the bytes go the usual way.
    fn write_direct(&mut self, buf: &[u8]) -> io::Result<Option<usize>> {
        let (at, appending) = (self.at, self.at >= self.end);
        match self.local_parts() {
            None => return Ok(None),
            Some(LocalParts {
                direct: Some(d), ..
            }) => return d.write(buf).map(Some),
            Some(LocalParts { may_direct, .. }) => {
                if !*may_direct || !appending || at < DIRECT_FROM {
                    return Ok(None);
                }
            }
        }
        // What was gathered goes first, the usual way.
        self.hand_over()?;
        let Some(LocalParts {
            file,
            target,
            direct,
            may_direct,
        }) = self.local_parts()
        else {
            return Ok(None);
        };
        let misaligned = at % ALIGN;
        if misaligned != 0 {
            // The usual way up to an aligned offset.
            let n = buf.len().min((ALIGN - misaligned) as usize);
            return file.write(&buf[..n]).map(Some);
        }
        match Direct::start(target.tmp(), file, at) {
            Some(mut d) => {
                let n = d.write(buf)?;
                *direct = Some(d);
                Ok(Some(n))
            }
            None => {
                *may_direct = false;
                Ok(None)
            }
        }
    }
}

impl Writer {
    /// Ends writing past the page cache (until the writer appends again
    /// from an aligned offset): every byte is then in the file and its
    /// handle's cursor where the writer is.
    fn settle(&mut self) -> io::Result<()> {
        self.hand_over()?;
        #[cfg(target_os = "linux")]
        {
            let at = self.at;
            if let Some(LocalParts { file, direct, .. }) = self.local_parts() {
                if let Some(d) = direct.take() {
                    d.finish()?;
                    file.seek(SeekFrom::Start(at))?;
                }
            }
        }
        Ok(())
    }
}

impl Writer {
    /// Hands the gathered bytes to the file, where its cursor is (they
    /// end at `at`). On an error, what the file did not take stays
    /// gathered: a later call (a flush, the commit) tries it again and
    /// fails again rather than leave a hole.
    fn hand_over(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut self.pending);
        let mut done = 0;
        let result = match self.file() {
            Some(file) => loop {
                if done == pending.len() {
                    break Ok(());
                }
                match file.write(&pending[done..]) {
                    Ok(0) => break Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            },
            None => Ok(()),
        };
        pending.drain(..done);
        self.pending = pending;
        result
    }
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.write_inner(buf)?;
        self.wrote(&buf[..n.min(buf.len())]);
        if self.at >= self.behind_at + WRITE_BEHIND_BYTES {
            // Bytes past the page cache need no writing back.
            if let Some(target) = self.local_target().filter(|_| !self.is_direct()) {
                target.write_behind();
                self.behind_at = self.at;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.settle()?;
        match self.file() {
            Some(file) => file.flush(),
            // Parts go up when full; the rest on commit.
            None => Ok(()),
        }
    }
}

impl Read for Writer {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.settle()?;
        let n = match self.file() {
            Some(file) => file.read(buf)?,
            None => return Err(self.cannot("reading back a streaming upload")),
        };
        self.at += n as u64;
        Ok(n)
    }
}

impl Seek for Writer {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.settle()?;
        if let Some(file) = self.file() {
            let at = file.seek(pos)?;
            self.at = at;
            return Ok(at);
        }
        // A streaming upload can only tell where it is.
        #[cfg(feature = "remote")]
        if let Some(upload) = self.stream() {
            let at = upload.position();
            if matches!(pos, SeekFrom::Current(0)) || pos == SeekFrom::Start(at) {
                return Ok(at);
            }
        }
        Err(self.cannot("seeking in a streaming upload (use Storage::create)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Storage;

    /// Whether files in `dir` can be opened with `O_DIRECT`.
    fn takes_direct(dir: &Path) -> bool {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let probe = dir.join("probe");
            let ok = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .custom_flags(libc::O_DIRECT)
                .open(&probe)
                .is_ok();
            let _ = std::fs::remove_file(&probe);
            ok
        }
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// A writer of a new local file `large` in a new folder (kept alive
    /// by the first item).
    fn new_local() -> (tempfile::TempDir, std::path::PathBuf, Writer) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("large");
        let w = Storage::new().create(&Address::from(path.clone())).unwrap();
        (dir, path, w)
    }

    /// Writes `len` bytes of a pattern in writes of odd sizes: the bytes,
    /// and whether the tail went past the page cache.
    fn write_odd_sizes(w: &mut Writer, len: usize) -> (Vec<u8>, bool) {
        let want: Vec<u8> = (0..len as u32)
            .map(|i| (i * 31 + (i >> 11)) as u8)
            .collect();
        let (mut at, mut step, mut direct) = (0, 1usize, false);
        while at < len {
            let end = (at + step).min(len);
            w.write_all(&want[at..end]).unwrap();
            direct |= w.is_direct();
            at = end;
            step = step * 13 % 700_001 + 1;
        }
        (want, direct)
    }

    #[test]
    fn gathered_writes_land_where_they_were_written() {
        // Random writes, seeks and reads against a model of the file, with
        // gathers of several sizes: a write, read or seek after gathered
        // bytes sees them in place, and the committed file is the model.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 33) % n.max(1)
        };
        for gather in [1, 7, 64, 4096] {
            let (_dir, path, mut w) = new_local();
            w.set_buffer_size(gather);
            let mut model: Vec<u8> = Vec::new();
            let mut at = 0usize;
            for op in 0..400 {
                match next(6) {
                    0..=2 => {
                        let len = [1, 3, 50, 5000][next(4) as usize];
                        let bytes: Vec<u8> = (0..len).map(|i| (op * 7 + i) as u8).collect();
                        w.write_all(&bytes).unwrap();
                        if model.len() < at + len {
                            model.resize(at + len, 0);
                        }
                        model[at..at + len].copy_from_slice(&bytes);
                        at += len;
                    }
                    3 => {
                        at = next(model.len() as u64 + 1) as usize;
                        assert_eq!(w.seek(SeekFrom::Start(at as u64)).unwrap(), at as u64);
                    }
                    4 => {
                        let len = (next(100) as usize).min(model.len() - at.min(model.len()));
                        let mut got = vec![0; len];
                        w.read_exact(&mut got).unwrap();
                        assert_eq!(got, model[at..at + len], "gather {gather}, op {op}");
                        at += len;
                    }
                    _ => {
                        at = model.len();
                        assert_eq!(w.seek(SeekFrom::End(0)).unwrap(), at as u64);
                    }
                }
            }
            w.commit().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), model, "gather {gather}");
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_gathered_write_that_fails_keeps_failing_and_is_never_committed() {
        let (dir, path, mut w) = new_local();
        w.write_all(b"gathered, not yet in the file").unwrap();
        // The file's handle swapped for one open for reading only: handing
        // the bytes over fails (EBADF).
        if let Kind::Local { file, target, .. } = &mut w.kind {
            *file = File::open(target.tmp()).unwrap();
        }
        let err = w.flush().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
        // Still there to hand over: the next try fails the same way, and
        // so does the commit, which leaves nothing under the final name.
        assert!(w.flush().is_err());
        assert!(w.commit().is_err());
        assert!(!path.exists());
        drop(dir);
    }

    #[test]
    fn a_large_file_appended_goes_past_the_page_cache() {
        let (dir, path, mut w) = new_local();
        let (want, direct) = write_odd_sizes(&mut w, (DIRECT_FROM as usize) * 2 + 4_321);
        if takes_direct(dir.path()) {
            assert!(direct, "past {DIRECT_FROM} bytes the writes go direct");
        }
        let digest = w.commit_with_digest().unwrap();
        assert_eq!(digest, Some(Digest::of(&want)));
        assert_eq!(std::fs::read(&path).unwrap(), want);
    }

    #[test]
    fn seeking_back_after_direct_writes_keeps_every_byte() {
        // The FFRecord and OFRecord writers' way: a header written last,
        // then a read back.
        let (dir, path, mut w) = new_local();
        let (mut want, _) = write_odd_sizes(&mut w, (DIRECT_FROM as usize) + 3 * (2 << 20) + 77);
        let end = want.len() as u64;
        assert_eq!(w.stream_position().unwrap(), end);
        assert!(!w.is_direct());
        w.seek(SeekFrom::Start(4)).unwrap();
        w.write_all(b"HEAD").unwrap();
        want[4..8].copy_from_slice(b"HEAD");
        w.seek(SeekFrom::Start(end - 10)).unwrap();
        let mut tail = Vec::new();
        w.read_to_end(&mut tail).unwrap();
        assert_eq!(tail, want[want.len() - 10..]);
        // Appending again after the read, from an unaligned end: the
        // usual way up to an aligned offset, past the page cache after.
        w.write_all(b"more").unwrap();
        want.extend_from_slice(b"more");
        assert!(!w.is_direct());
        let (more, direct) = write_odd_sizes(&mut w, 5 << 20);
        want.extend_from_slice(&more);
        assert_eq!(direct, takes_direct(dir.path()));
        let digest = w.commit_with_digest().unwrap();
        assert_eq!(digest, None, "a write went back: no digest");
        assert_eq!(std::fs::read(&path).unwrap(), want);
    }

    #[test]
    fn a_file_written_after_a_seek_past_its_start_goes_direct_too() {
        // The FFRecord writer with a known count: the samples from after
        // the header's room, the header last.
        let (dir, path, mut w) = new_local();
        w.seek(SeekFrom::Start(1_000)).unwrap();
        let (body, direct) = write_odd_sizes(&mut w, (DIRECT_FROM as usize) + (5 << 20));
        assert_eq!(direct, takes_direct(dir.path()));
        w.seek(SeekFrom::Start(0)).unwrap();
        w.write_all(&[7; 1_000]).unwrap();
        w.commit().unwrap();
        let mut want = vec![7; 1_000];
        want.extend_from_slice(&body);
        assert_eq!(std::fs::read(&path).unwrap(), want);
    }

    #[test]
    fn a_file_kept_cached_never_goes_direct() {
        let (_dir, path, mut w) = new_local();
        w.keep_cached().unwrap();
        let (want, direct) = write_odd_sizes(&mut w, (DIRECT_FROM as usize) + (5 << 20));
        assert!(!direct);
        w.commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), want);
    }

    #[test]
    fn dropped_while_writing_direct_leaves_nothing() {
        let (dir, _path, mut w) = new_local();
        write_odd_sizes(&mut w, (DIRECT_FROM as usize) + 5 * (2 << 20));
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_large_local_file_is_written_back_while_written() {
        let (_dir, path, mut w) = new_local();
        let block: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        let mut want = Vec::new();
        for _ in 0..(WRITE_BEHIND_BYTES >> 20) + 3 {
            w.write_all(&block).unwrap();
            want.extend_from_slice(&block);
        }
        let Kind::Local { target, .. } = &w.kind else {
            panic!("a local file");
        };
        assert!(
            target.behind.lock().unwrap().is_some(),
            "past {WRITE_BEHIND_BYTES} bytes the write-behind thread runs"
        );
        assert_eq!(w.behind_at, WRITE_BEHIND_BYTES);
        let digest = w.commit_with_digest().unwrap();
        assert_eq!(digest, Some(Digest::of(&want)));
        assert_eq!(std::fs::read(&path).unwrap(), want);
    }
}
