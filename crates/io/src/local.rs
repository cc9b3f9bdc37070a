//! The local file system.

use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::object::Backend;
use crate::storage::{Config, MATCH, Version};
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
            version: (!m.is_dir()).then(|| Version::of(&m)),
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

/// Removes `.<name>.<tag>-<pid>-<n>` files in `path` whose `name` `of`
/// accepts (a folder that does not exist has none).
pub(crate) fn remove_temporaries(
    dir: &Address,
    path: &Path,
    of: &dyn Fn(&str) -> bool,
) -> Result<Vec<Address>> {
    let read = match fs::read_dir(path) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::list(dir.name(), e)),
    };
    let mut removed = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| Error::list(dir.name(), e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if temporary_of(name).is_some_and(of) {
            let address = dir.join(name);
            remove(&address, &entry.path())?;
            removed.push(address);
        }
    }
    Ok(removed)
}

/// The final name whose temporary file `name` is (`.<name>.<tag>-<pid>-<n>`).
fn temporary_of(name: &str) -> Option<&str> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let rest = name.strip_prefix('.')?;
    let mut parts = rest.rsplitn(3, '-');
    let (n, pid, rest) = (parts.next()?, parts.next()?, parts.next()?);
    if !digits(n) || !digits(pid) {
        return None;
    }
    let (final_name, tag) = rest.rsplit_once('.')?;
    let tag_ok = !tag.is_empty() && tag.bytes().all(|b| b.is_ascii_alphanumeric());
    (tag_ok && !final_name.is_empty()).then_some(final_name)
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

#[cfg(test)]
mod temporary_tests {
    use super::temporary_of;

    #[test]
    fn temporary_names() {
        assert_eq!(
            temporary_of(".part-00001.tfrecord.tmp-123-4"),
            Some("part-00001.tfrecord")
        );
        assert_eq!(temporary_of(".a.idx.index-1-0"), Some("a.idx"));
        for not in [
            "part-00001.tfrecord",
            ".x.tmp-1",
            ".x.tmp-a-1",
            "..tmp-1-2",
            ".hidden",
        ] {
            assert_eq!(temporary_of(not), None, "{not}");
        }
    }
}
