//! The local file system.

use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::object::Backend;
use crate::storage::{Config, MATCH};
use crate::{Address, Entry, Error, Meta, Object, Result};

pub(crate) fn open(addr: &Address, path: &Path, config: &Config) -> Result<Object> {
    let file = File::open(path).map_err(|e| Error::read(addr.name(), None, e))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::read(addr.name(), None, e))?;
    if meta.is_dir() {
        return Err(Error::NotAFile {
            address: addr.name().clone(),
        });
    }
    let map = config
        .access
        .map(&file)
        .map_err(|e| Error::read(addr.name(), None, e))?;
    // A map's length is the size the reads are checked against: the file
    // may have changed between `metadata` and `map`.
    let size = map.as_ref().map_or(meta.len(), |m| m.len() as u64);
    Ok(Object::new(
        addr.clone(),
        size,
        Backend::Local {
            file: Arc::new(file),
            map,
        },
    ))
}

pub(crate) fn stat(addr: &Address, path: &Path) -> Result<Option<Meta>> {
    match fs::metadata(path) {
        Ok(m) => Ok(Some(Meta {
            size: if m.is_dir() { 0 } else { m.len() },
            is_dir: m.is_dir(),
        })),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::read(addr.name(), None, e)),
    }
}

pub(crate) fn list(dir: &Address, path: &Path) -> Result<Vec<Entry>> {
    let read = fs::read_dir(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::NotFound {
            address: dir.name().clone(),
        },
        _ => Error::list(dir.name(), e),
    })?;
    let mut found = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| Error::list(dir.name(), e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            // A name that is not UTF-8 cannot be written as an address.
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        // `fs::metadata` follows symbolic links: a link to a file is a file.
        let meta = match fs::metadata(entry.path()) {
            Ok(m) => m,
            // A dangling link, or a file removed since the listing.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::list(dir.name(), e)),
        };
        if meta.is_file() {
            found.push(Entry {
                address: dir.join(name),
                size: meta.len(),
            });
        }
    }
    found.sort_by(|a, b| a.address.as_str().cmp(b.address.as_str()));
    Ok(found)
}

pub(crate) fn glob(pattern: &str, dir: &Address, rest: &str) -> Result<Vec<Entry>> {
    let bad = |reason: String| Error::BadPattern {
        pattern: pattern.to_string(),
        reason,
    };
    let Some(base) = dir.local_path() else {
        return Err(bad("not a local pattern".to_string()));
    };
    // The folder part is escaped, so that characters the glob crate reads
    // as wildcards in a folder's name match literally; the addresses found
    // keep the folder's text as given.
    let base_text = base
        .to_str()
        .ok_or_else(|| bad("the folder is not UTF-8".to_string()))?;
    let mut full = glob::Pattern::escape(base_text);
    if !full.is_empty() && !full.ends_with('/') {
        full.push('/');
    }
    full.push_str(rest);
    let paths = glob::glob_with(&full, MATCH).map_err(|e| bad(e.to_string()))?;
    let mut found = Vec::new();
    for path in paths {
        let path = path.map_err(|e| Error::list(dir.name(), io::Error::from(e)))?;
        let meta = match fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::list(dir.name(), e)),
        };
        if !meta.is_file() {
            continue;
        }
        let Ok(relative) = path.strip_prefix(base) else {
            continue;
        };
        let Some(relative) = relative.to_str() else {
            continue;
        };
        let address = if dir.as_str() == "." {
            Address::parse(relative)?
        } else {
            dir.join(relative)
        };
        found.push(Entry {
            address,
            size: meta.len(),
        });
    }
    found.sort_by(|a, b| a.address.as_str().cmp(b.address.as_str()));
    Ok(found)
}

pub(crate) fn read_all(addr: &Address, path: &Path) -> Result<Bytes> {
    let meta = fs::metadata(path).map_err(|e| Error::read(addr.name(), None, e))?;
    if meta.is_dir() {
        return Err(Error::NotAFile {
            address: addr.name().clone(),
        });
    }
    fs::read(path)
        .map(Bytes::from)
        .map_err(|e| Error::read(addr.name(), None, e))
}

pub(crate) fn create_dir_all(addr: &Address, path: &Path) -> Result<()> {
    fs::create_dir_all(path).map_err(|e| Error::write(addr.name(), e))
}

pub(crate) fn remove(addr: &Address, path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::write(addr.name(), e)),
    }
}

/// Fills `buf` from `offset` with positioned reads (the file's own
/// position is neither used nor moved).
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        let (mut buf, mut offset) = (buf, offset);
        while !buf.is_empty() {
            match std::os::windows::fs::FileExt::seek_read(file, buf, offset) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset)
    }
}

/// A sequential reader over a shared file, with its own position.
pub(crate) struct LocalReader {
    pub(crate) file: Arc<File>,
    pub(crate) pos: u64,
}

impl io::Read for LocalReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = read_at(&self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}
