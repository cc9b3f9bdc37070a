//! How a reader gets a local file's bytes: read calls into buffers it owns (the
//! default, safe whatever happens to the file), or a memory map, behind an
//! `unsafe` opt-in whose caller promises that the file does not change.

use std::fs::File;
use std::io;

use bytes::Bytes;

/// How file bytes are fetched.
///
/// By default ([`Access::read`]) readers copy bytes out of the page cache
/// with `read` / `pread` calls into buffers they own: safe whatever happens
/// to the file. [`Access::mmap`] maps each file into memory instead and
/// hands out records as slices of the map, without copying: cheaper (the
/// copy out of the page cache is most of what reading costs, and with a
/// loader's parse threads busy, the reading thread competes with them for
/// the cores), but only sound while nobody changes the files, which the
/// caller must promise.
///
/// ```
/// use grist_io::Access;
/// assert!(!Access::default().is_mmap());
/// // SAFETY: nothing writes to the files read with this access.
/// let mapped = unsafe { Access::mmap() };
/// assert!(mapped.is_mmap());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Access(Kind);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
enum Kind {
    #[default]
    Read,
    Mmap,
}

impl Access {
    /// Read calls (`read`, positioned `pread`) into owned buffers. The
    /// default.
    pub fn read() -> Self {
        Access(Kind::Read)
    }

    /// Memory-maps every file; records are slices of the maps (no copy).
    ///
    /// # Safety
    ///
    /// The caller promises that no file read with this access is modified
    /// or truncated, by this process or any other, while the reader or any
    /// record, chunk or sample it returned is alive. A file that shrinks
    /// under a map makes reading its bytes fault (the process is killed
    /// with `SIGBUS`); a file written to changes bytes that were already
    /// returned, and checked, under the caller's feet.
    #[allow(unsafe_code)]
    pub unsafe fn mmap() -> Self {
        Access(Kind::Mmap)
    }

    /// True for the memory-mapped mode.
    pub fn is_mmap(self) -> bool {
        self.0 == Kind::Mmap
    }

    /// The whole of `file` as bytes when this is the memory-mapped mode
    /// (an empty file gives empty bytes: it cannot be mapped everywhere),
    /// `None` in the read mode.
    pub fn map(self, file: &File) -> io::Result<Option<Bytes>> {
        if !self.is_mmap() {
            return Ok(None);
        }
        if file.metadata()?.len() == 0 {
            return Ok(Some(Bytes::new()));
        }
        #[allow(unsafe_code)]
        // SAFETY: `Kind::Mmap` is only made by `Access::mmap`, an `unsafe
        // fn` whose caller promised that the file is neither modified nor
        // truncated while the map, or any slice of it (the `Bytes` keep
        // the map alive), is in use. The map is read-only and private to
        // this process; every slice of it is bounds-checked by `Bytes`.
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(Some(Bytes::from_owner(map)))
    }
}

#[cfg(test)]
// The tests opt in to maps of files they own.
#[allow(unsafe_code)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn maps_a_file_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(b"hello, map").unwrap();
        drop(f);
        let file = File::open(&path).unwrap();
        assert_eq!(Access::read().map(&file).unwrap(), None);
        // SAFETY: the file lives in this test's own folder; nothing
        // writes to it while it is mapped.
        let mapped = unsafe { Access::mmap() };
        let bytes = mapped.map(&file).unwrap().unwrap();
        assert_eq!(&bytes[..], b"hello, map");
        // Slices outlive the file handle and the first `Bytes`.
        let tail = bytes.slice(7..);
        drop((bytes, file));
        assert_eq!(&tail[..], b"map");
    }

    #[test]
    fn an_empty_file_maps_to_no_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty");
        File::create(&path).unwrap();
        // SAFETY: as above.
        let mapped = unsafe { Access::mmap() };
        let bytes = mapped.map(&File::open(&path).unwrap()).unwrap();
        assert_eq!(bytes, Some(Bytes::new()));
    }
}
