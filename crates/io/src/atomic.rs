//! Atomic local writes.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A temporary sibling of `dest`, removed on drop unless committed.
///
/// Writing a file atomically: into a temporary sibling, synced, then
/// renamed over the final name, so a reader never sees a truncated file
/// under that name. The format crates' writers share it.
///
/// ```
/// use std::io::Write;
/// use grist_io::AtomicTarget;
///
/// let dir = tempfile::tempdir()?;
/// let dest = dir.path().join("out.bin");
/// let (mut file, target) = AtomicTarget::create(&dest)?;
/// file.write_all(b"all or nothing")?;
/// assert!(!dest.exists());
/// target.sync()?;
/// target.commit()?;
/// assert_eq!(std::fs::read(&dest)?, b"all or nothing");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct AtomicTarget {
    /// A handle on the temporary file, for fsync.
    file: File,
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl AtomicTarget {
    /// Creates `.<name>.tmp-<pid>-<n>` beside `dest`, open for writing
    /// and reading.
    pub fn create(dest: &Path) -> io::Result<(File, AtomicTarget)> {
        AtomicTarget::create_tagged(dest, "tmp")
    }

    /// Creates `.<name>.<what>-<pid>-<n>` beside `dest` (a writer that
    /// needs several temporary files tells them apart by `what`).
    pub fn create_tagged(dest: &Path, what: &str) -> io::Result<(File, AtomicTarget)> {
        let file_name = dest.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the path has no file name")
        })?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(file_name);
        tmp_name.push(format!(
            ".{what}-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let tmp = dest.with_file_name(tmp_name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let handle = match file.try_clone() {
            Ok(h) => h,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        };
        Ok((
            file,
            AtomicTarget {
                file: handle,
                tmp,
                dest: dest.to_path_buf(),
                committed: false,
            },
        ))
    }

    /// The final name.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// The temporary file's name.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// A handle on the temporary file (open for reading and writing).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Makes the bytes written to the temporary file durable.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    /// Renames the temporary file to its final name and syncs the
    /// directory (best effort: not every file system can).
    pub fn commit(mut self) -> io::Result<()> {
        fs::rename(&self.tmp, &self.dest)?;
        self.committed = true;
        let dir = match self.dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Drop for AtomicTarget {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

impl fmt::Debug for AtomicTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AtomicTarget")
            .field("tmp", &self.tmp)
            .field("dest", &self.dest)
            .finish()
    }
}
