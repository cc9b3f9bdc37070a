//! Atomic writes.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

#[cfg(feature = "remote")]
use crate::remote;
use crate::{Address, AtomicTarget, Error, Result};

/// An atomic write: the bytes appear under their final name only when
/// [`commit`](Writer::commit) succeeds; a writer dropped uncommitted, or
/// whose commit fails, leaves nothing behind.
///
/// A local file is written to a temporary sibling `.name.tmp-<pid>-<n>`,
/// synced, renamed over the final name, and its folder synced (see
/// [`AtomicTarget`]). An object is written to a local spool file (so the
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
    /// The bytes written so far, and their CRC-32C while every write
    /// appended at the end (`None` once one did not).
    digest: Option<Digest>,
    /// `at` when a local file was last asked to write back.
    behind_at: u64,
}

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
        file: File,
        target: AtomicTarget,
    },
    #[cfg(feature = "remote")]
    Remote {
        spool: File,
        upload: remote::Upload,
    },
    #[cfg(feature = "remote")]
    Stream(remote::StreamUpload),
}

impl Writer {
    pub(crate) fn local(addr: &Address, path: &Path) -> Result<Writer> {
        let (file, target) =
            AtomicTarget::create(path).map_err(|e| Error::write(addr.name(), e))?;
        Ok(Writer {
            address: addr.clone(),
            kind: Kind::Local { file, target },
            at: 0,
            digest: Some(Digest::default()),
            behind_at: 0,
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
        }
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
    }

    /// Makes the bytes written visible under the final name: syncs and
    /// renames a local file, uploads an object.
    pub fn commit(self) -> Result<()> {
        let name = self.address.name().clone();
        match self.kind {
            Kind::Local { file, target } => {
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
        if let Some(file) = self.file() {
            return file.write(buf);
        }
        #[cfg(feature = "remote")]
        if let Some(upload) = self.stream() {
            return upload.write(buf).map_err(io::Error::from);
        }
        Ok(0)
    }
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.write_inner(buf)?;
        self.wrote(&buf[..n.min(buf.len())]);
        if self.at >= self.behind_at + WRITE_BEHIND_BYTES {
            if let Some(target) = self.local_target() {
                target.write_behind();
                self.behind_at = self.at;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.file() {
            Some(file) => file.flush(),
            // Parts go up when full; the rest on commit.
            None => Ok(()),
        }
    }
}

impl Read for Writer {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
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

    #[test]
    fn a_large_local_file_is_written_back_while_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("large");
        let mut w = Storage::new().create(&Address::from(path.clone())).unwrap();
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
