//! Atomic local writes.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

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
    /// The thread writing the file back while it is written, once
    /// [`write_behind`](Self::write_behind) started it.
    pub(crate) behind: Mutex<Option<Behind>>,
}

/// A thread that syncs the file's data when asked, so that the pages
/// written so far go to the disk while the writer goes on, and the
/// final sync has only the tail left to wait for.
pub(crate) struct Behind {
    asks: SyncSender<()>,
    /// Ends with the first failed sync's error: the caller's own sync
    /// may not see it again (a writeback error is reported once per open
    /// file, and the thread's handle shares the caller's).
    thread: JoinHandle<io::Result<()>>,
}

impl Behind {
    /// A thread syncing `file`'s data, asked once already.
    fn start(file: File) -> io::Result<Behind> {
        let (asks, waiting) = sync_channel::<()>(1);
        let thread = std::thread::Builder::new()
            .name("grist-write-behind".into())
            .spawn(move || {
                while waiting.recv().is_ok() {
                    file.sync_data()?;
                }
                Ok(())
            })?;
        let _ = asks.try_send(());
        Ok(Behind { asks, thread })
    }

    /// Waits for a sync under way (the thread then ends): its error, if
    /// one failed.
    fn stop(self) -> io::Result<()> {
        drop(self.asks);
        self.thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the write-behind thread panicked")))
    }
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
                behind: Mutex::new(None),
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

    /// Starts writing the bytes written so far back to the disk, on a
    /// thread of its own, and returns at once; a request while a sync is
    /// under way is dropped (the next one covers its bytes). For large
    /// files: [`sync`](Self::sync) then waits only for what was written
    /// since. A failed sync ends the thread, and `sync` returns its error.
    pub fn write_behind(&self) {
        let mut behind = self.behind.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = behind.as_ref() {
            // Full: a sync is under way. Disconnected: one failed, and
            // `sync` reports it.
            let _: Result<(), TrySendError<()>> = b.asks.try_send(());
            return;
        }
        let Ok(file) = self.file.try_clone() else {
            // Only an optimisation: `sync` does the work without it.
            return;
        };
        if let Ok(b) = Behind::start(file) {
            *behind = Some(b);
        }
    }

    /// Makes the bytes written to the temporary file durable (or returns
    /// the error of a sync [`write_behind`](Self::write_behind) made).
    pub fn sync(&self) -> io::Result<()> {
        let behind = self
            .behind
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(b) = behind {
            b.stop()?;
        }
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
        if let Some(b) = self
            .behind
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            // Not committed, or committed after `sync` took the thread.
            let _ = b.stop();
        }
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn written_behind_then_committed_holds_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("big.bin");
        let (mut file, target) = AtomicTarget::create(&dest).unwrap();
        let mut want = Vec::new();
        for i in 0..64u32 {
            let block: Vec<u8> = (0..65_536u32).map(|j| (i * 7 + j) as u8).collect();
            file.write_all(&block).unwrap();
            want.extend_from_slice(&block);
            // Asked often: most asks find a sync under way and are dropped.
            target.write_behind();
        }
        drop(file);
        target.sync().unwrap();
        assert!(
            target.behind.lock().unwrap().is_none(),
            "sync stops the thread"
        );
        target.commit().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), want);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_sync_behind_is_reported() {
        // Linux refuses to sync /dev/null (EINVAL): the error must come
        // out of `stop`, as `sync` returns it, not vanish with the thread.
        let file = OpenOptions::new().write(true).open("/dev/null").unwrap();
        let b = Behind::start(file).unwrap();
        let _ = b.asks.try_send(());
        assert!(b.stop().is_err());
    }

    #[test]
    fn dropped_while_writing_behind_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("gone.bin");
        let (mut file, target) = AtomicTarget::create(&dest).unwrap();
        file.write_all(&[1; 1 << 20]).unwrap();
        target.write_behind();
        let tmp = target.tmp().to_path_buf();
        drop(target);
        assert!(!tmp.exists() && !dest.exists());
    }
}
