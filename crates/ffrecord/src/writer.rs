//! [`FfrWriter`]: FFRecord files byte-identical to HFAiLab's
//! `FileWriter`, written atomically through the storage layer (a local
//! file beside the target, fsync, rename; an object store's multipart
//! upload).

use std::fmt;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use grist_io::{Address, Storage, Writer};

use crate::error::{Error, Result};
use crate::header::{PREFIX_LEN, crc32, encode_header, header_len};

/// Options of [`FfrWriter::create`].
///
/// ```
/// use grist_ffrecord::WriterOptions;
/// let options = WriterOptions::default().with_count(Some(1000));
/// # let _ = options;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterOptions {
    count: Option<u64>,
    buffer_size: usize,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            count: None,
            buffer_size: 1 << 20,
        }
    }
}

impl WriterOptions {
    /// The number of samples the file will hold, if known up front (as
    /// the original's `FileWriter(path, n)` requires). With a count the
    /// samples are written straight into place after the header;
    /// without one they are written from the file's start and moved
    /// behind the header at [`finish`](FfrWriter::finish) (one more copy
    /// of the samples, within the file being written). Either way the
    /// file is the same. By default, `None` (unknown).
    #[must_use]
    pub fn with_count(mut self, count: Option<u64>) -> Self {
        self.count = count;
        self
    }

    /// How many bytes of samples are gathered before they are handed to
    /// the file (the storage writer's
    /// [`set_buffer_size`](grist_io::Writer::set_buffer_size)), at most
    /// [`grist_tensor::MAX_IO_BUFFER`]. By default, 1 MiB.
    #[must_use]
    pub fn with_buffer_size(mut self, bytes: usize) -> Self {
        self.buffer_size = bytes.clamp(1, grist_tensor::MAX_IO_BUFFER);
        self
    }
}

/// What a finished [`FfrWriter`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteSummary {
    /// The number of samples.
    pub samples: u64,
    /// The size of the file.
    pub bytes: u64,
    /// The file's size and CRC-32C, computed while writing it: the
    /// header's, then the samples' (the file is not read back).
    pub digest: Option<grist_io::Digest>,
}

/// Writes an FFRecord file, byte-identical to what HFAiLab's `FileWriter`
/// writes for the same samples.
///
/// The file is written through the storage layer
/// ([`grist_io::Storage::create`]): locally to a hidden temporary sibling,
/// renamed to its name by [`finish`](Self::finish) after an fsync; to an
/// object store through a local spool file, uploaded (in parts) by
/// `finish`. Dropping the writer unfinished, a failed write or `finish`,
/// or finishing with fewer samples than a declared count leaves nothing,
/// so no partial file ever appears under the final name. (The original
/// leaves a zeroed header there, which its reader then opens as an empty
/// file.)
///
/// ```
/// use grist_ffrecord::{FfrReader, FfrWriter, ReaderOptions, WriterOptions};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("tiny2.ffr");
/// let mut w = FfrWriter::create(&path, WriterOptions::default().with_count(Some(2)))?;
/// w.write_sample(b"hello")?;
/// w.write_sample(b"ffrecord!")?;
/// let summary = w.finish()?;
/// assert_eq!((summary.samples, summary.bytes), (2, 50));
/// let bytes = std::fs::read(&path)?;
/// assert_eq!(&bytes[..4], &[0xb8, 0xec, 0x14, 0x16]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FfrWriter {
    name: Arc<str>,
    /// Where samples go: after the header's room (count known), or from
    /// the start (moved behind the header by `finish`).
    out: Option<BufWriter<Writer>>,
    count: Option<u64>,
    checksums: Vec<u32>,
    /// Each sample's offset relative to the first sample.
    offsets: Vec<u64>,
    written: u64,
    /// The samples' size and CRC-32C, as written.
    digest: grist_io::Digest,
    failed: bool,
}

impl FfrWriter {
    /// Creates the FFRecord file `path` (written through a temporary
    /// sibling that [`finish`](Self::finish) renames to `path`; see
    /// [`create_at`](Self::create_at)).
    pub fn create(path: impl AsRef<Path>, options: WriterOptions) -> Result<Self> {
        FfrWriter::create_at(&Storage::new(), &Address::from(path.as_ref()), options)
    }

    /// Creates the FFRecord file or object at `address` (a path, or an
    /// object store URL) through `storage`: nothing appears under
    /// `address` until [`finish`](Self::finish). Fails with
    /// [`Error::Storage`] when the storage refuses.
    ///
    /// ```
    /// use grist_ffrecord::{FfrWriter, WriterOptions};
    /// use grist_io::{Address, Storage};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let address = Address::from(dir.path().join("a.ffr"));
    /// let mut w = FfrWriter::create_at(&Storage::new(), &address, WriterOptions::default())?;
    /// w.write_sample(b"count not known up front")?;
    /// assert_eq!(w.finish()?.samples, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_at(storage: &Storage, address: &Address, options: WriterOptions) -> Result<Self> {
        let name = address.name().clone();
        let io_err = |source| Error::Io {
            file: name.clone(),
            source,
        };
        let start = match options.count {
            Some(n) => samples_start(n).map_err(io_err)?,
            None => 0,
        };
        let mut out = storage
            .create(address)
            .map_err(|e| storage_error(&name, e))?;
        out.set_buffer_size(options.buffer_size);
        out.seek(SeekFrom::Start(start))
            .map_err(|e| io_error(&name, e))?;
        let mut writer = FfrWriter {
            name,
            // The storage's writer gathers the samples itself.
            out: Some(BufWriter::with_capacity(0, out)),
            count: options.count,
            checksums: Vec::new(),
            offsets: Vec::new(),
            written: 0,
            digest: grist_io::Digest::default(),
            failed: false,
        };
        if let Some(n) = options.count {
            writer.reserve_entries(n);
        }
        Ok(writer)
    }

    /// Declares, before the first sample, that the file will hold `n`
    /// samples (as [`WriterOptions::with_count`] does up front): they
    /// are then written in place after the header's room, not moved
    /// there by [`finish`](Self::finish), which fails with
    /// [`Error::CountMismatch`] if another number was written.
    ///
    /// Fails with [`Error::Io`] after the first sample, or for a count
    /// other than one declared before.
    ///
    /// ```
    /// use grist_ffrecord::{FfrWriter, WriterOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut w = FfrWriter::create(dir.path().join("a.ffr"), WriterOptions::default())?;
    /// w.expect_samples(2)?;
    /// w.write_sample(b"hello")?;
    /// w.write_sample(b"ffrecord!")?;
    /// assert_eq!(w.finish()?.bytes, 50);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn expect_samples(&mut self, n: u64) -> Result<()> {
        let refuse = |reason: String| {
            Err(io_error(
                &self.name,
                io::Error::new(io::ErrorKind::InvalidInput, reason),
            ))
        };
        if !self.checksums.is_empty() {
            return refuse(format!(
                "the count of samples ({n}) must be declared before the first sample"
            ));
        }
        match self.count {
            Some(m) if m == n => return Ok(()),
            Some(m) => return refuse(format!("{m} samples were declared already, not {n}")),
            None => {}
        }
        let start = samples_start(n).map_err(|e| io_error(&self.name, e))?;
        let result = match (&mut self.out, self.failed) {
            (Some(out), false) => out.seek(SeekFrom::Start(start)).map(drop),
            _ => Err(earlier_failure()),
        };
        if let Err(source) = result {
            self.fail();
            return Err(io_error(&self.name, source));
        }
        self.count = Some(n);
        self.reserve_entries(n);
        Ok(())
    }

    /// Room for the header entries of `n` samples at once rather than
    /// grown a doubling at a time (bounded: `n` is a promise, not bytes
    /// that are there).
    fn reserve_entries(&mut self, n: u64) {
        let room = usize::try_from(n).unwrap_or(usize::MAX).min(RESERVE_MAX);
        self.checksums.reserve_exact(room);
        self.offsets.reserve_exact(room);
    }

    /// Appends one sample.
    ///
    /// Fails with [`Error::TooManySamples`] past a declared count (the
    /// writer stays usable); after a failed write the writer is unusable
    /// and its temporary files are removed.
    pub fn write_sample(&mut self, sample: &[u8]) -> Result<()> {
        if let Some(n) = self.count {
            if self.checksums.len() as u64 >= n && !self.failed {
                return Err(Error::TooManySamples {
                    file: self.name.clone(),
                    declared: n,
                });
            }
        }
        let first_unplaced = self.checksums.is_empty() && self.count.is_none();
        let result = match (&mut self.out, self.failed) {
            // `finish` reads the samples back to move them behind the
            // header: from the page cache, not the disk.
            (Some(out), false) if first_unplaced => out
                .get_mut()
                .keep_cached()
                .and_then(|()| out.write_all(sample)),
            (Some(out), false) => out.write_all(sample),
            _ => Err(earlier_failure()),
        };
        if let Err(source) = result {
            self.fail();
            return Err(io_error(&self.name, source));
        }
        self.checksums.push(crc32(sample));
        self.digest = self.digest.append(sample);
        self.offsets.push(self.written);
        self.written += sample.len() as u64;
        Ok(())
    }

    /// The number of samples written so far.
    pub fn samples(&self) -> u64 {
        self.checksums.len() as u64
    }

    fn fail(&mut self) {
        self.failed = true;
        // The output is removed now, not only on drop.
        self.out = None;
    }

    /// Writes the header, makes the file durable and renames it to its
    /// name.
    ///
    /// Fails with [`Error::CountMismatch`] (leaving nothing under the
    /// name) when fewer samples than a declared count were written.
    pub fn finish(mut self) -> Result<WriteSummary> {
        let name = self.name.clone();
        let io_err = |source| io_error(&name, source);
        let (Some(out), false) = (self.out.take(), self.failed) else {
            return Err(io_err(earlier_failure()));
        };
        let n = self.checksums.len() as u64;
        if let Some(declared) = self.count {
            if declared != n {
                // `out` is dropped here: nothing is left.
                return Err(Error::CountMismatch {
                    file: name,
                    declared,
                    written: n,
                });
            }
        }
        let base = PREFIX_LEN as u64 + 12 * n;
        if base
            .checked_add(self.written)
            .is_none_or(|end| end > i64::MAX as u64)
        {
            return Err(io_err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the file would be larger than FFRecord offsets can address",
            )));
        }
        for o in &mut self.offsets {
            *o += base;
        }
        let header = encode_header(&self.checksums, &self.offsets);
        let mut file = out.into_inner().map_err(|e| io_err(e.into_error()))?;
        if self.count.is_none() {
            // The samples were written from the start: make room for the
            // header, now that its length is known.
            shift_up(&mut file, self.written, base).map_err(io_err)?;
        }
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(&header))
            .and_then(|()| file.flush())
            .map_err(io_err)?;
        file.commit().map_err(|e| storage_error(&name, e))?;
        Ok(WriteSummary {
            samples: n,
            bytes: base + self.written,
            // The file is the header, then the samples.
            digest: Some(grist_io::Digest::of(&header).then(self.digest)),
        })
    }
}

/// The most header entries reserved up front (48 MiB of them).
const RESERVE_MAX: usize = 1 << 22;

/// Where the samples of a file of `n` samples start: after its header.
fn samples_start(n: u64) -> io::Result<u64> {
    header_len(n)
        .filter(|&l| l <= i64::MAX as u64)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{n} samples need a header longer than a file can be"),
            )
        })
}

/// Moves the first `len` bytes of `file` up by `by` bytes, the last block
/// first (so that nothing is overwritten before it is read).
fn shift_up(file: &mut Writer, len: u64, by: u64) -> io::Result<()> {
    let mut buf = vec![0u8; len.min(1 << 20) as usize];
    let mut end = len;
    while end > 0 {
        let n = end.min(buf.len() as u64);
        let start = end - n;
        let block = &mut buf[..n as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(block)?;
        file.seek(SeekFrom::Start(start + by))?;
        file.write_all(block)?;
        end = start;
    }
    Ok(())
}

/// A failure of the storage layer, naming `file`.
fn storage_error(file: &Arc<str>, e: grist_io::Error) -> Error {
    Error::Storage(grist_tensor::StorageError::new(file.clone(), e))
}

/// A write error: the storage layer's own, or an I/O error of `file`.
fn io_error(file: &Arc<str>, source: io::Error) -> Error {
    match grist_tensor::StorageError::from_io(file, source) {
        Ok(e) => Error::Storage(e),
        Err(source) => Error::Io {
            file: file.clone(),
            source,
        },
    }
}

impl fmt::Debug for FfrWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FfrWriter")
            .field("name", &self.name)
            .field("count", &self.count)
            .field("samples", &self.checksums.len())
            .field("bytes", &self.written)
            .finish_non_exhaustive()
    }
}

fn earlier_failure() -> io::Error {
    io::Error::other("an earlier write to this FFRecord writer failed")
}
