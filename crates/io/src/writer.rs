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
}

impl Writer {
    pub(crate) fn local(addr: &Address, path: &Path) -> Result<Writer> {
        let (file, target) =
            AtomicTarget::create(path).map_err(|e| Error::write(addr.name(), e))?;
        Ok(Writer {
            address: addr.clone(),
            kind: Kind::Local { file, target },
        })
    }

    #[cfg(feature = "remote")]
    pub(crate) fn remote(addr: &Address, spool: File, upload: remote::Upload) -> Writer {
        Writer {
            address: addr.clone(),
            kind: Kind::Remote { spool, upload },
        }
    }

    /// Where the bytes go.
    pub fn address(&self) -> &Address {
        &self.address
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
        }
    }

    fn file(&mut self) -> &mut File {
        match &mut self.kind {
            Kind::Local { file, .. } => file,
            #[cfg(feature = "remote")]
            Kind::Remote { spool, .. } => spool,
        }
    }
}

impl fmt::Debug for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file().flush()
    }
}

impl Read for Writer {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file().read(buf)
    }
}

impl Seek for Writer {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.file().seek(pos)
    }
}
