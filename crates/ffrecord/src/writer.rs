//! [`FfrWriter`]: FFRecord files byte-identical to HFAiLab's
//! `FileWriter`, written atomically (beside the target, fsync, rename).

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use grist_io::AtomicTarget;

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
    /// without one they are spooled to a temporary file and copied behind
    /// the header at [`finish`](FfrWriter::finish). Either way the file
    /// is the same. By default, `None` (unknown).
    pub fn with_count(mut self, count: Option<u64>) -> Self {
        self.count = count;
        self
    }

    /// The size of the write buffer, at most
    /// [`grist_tensor::MAX_IO_BUFFER`]. By default, 1 MiB.
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
}

/// Writes an FFRecord file, byte-identical to what HFAiLab's `FileWriter`
/// writes for the same samples.
///
/// The file is written to a hidden temporary sibling and only renamed to
/// its name by [`finish`](Self::finish), after an fsync; dropping the
/// writer unfinished, a failed write or `finish`, or finishing with fewer
/// samples than a declared count removes the temporary file, so no partial
/// file ever appears under the final name. (The original leaves a zeroed
/// header there, which its reader then opens as an empty file.)
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
    /// The final file's temporary sibling.
    target: Option<AtomicTarget>,
    /// Where samples go: the final temporary (count known) or a spool.
    out: Option<BufWriter<File>>,
    /// The spool, when the count is not known.
    spool: Option<AtomicTarget>,
    count: Option<u64>,
    checksums: Vec<u32>,
    /// Each sample's offset relative to the first sample.
    offsets: Vec<u64>,
    written: u64,
    failed: bool,
}

impl FfrWriter {
    /// Creates the FFRecord file `path` (written through a temporary
    /// sibling that [`finish`](Self::finish) renames to `path`).
    pub fn create(path: impl AsRef<Path>, options: WriterOptions) -> Result<Self> {
        let path = path.as_ref();
        let name: Arc<str> = path.display().to_string().into();
        let io_err = |source| Error::Io {
            file: name.clone(),
            source,
        };
        let (out, target, spool) = match options.count {
            Some(n) => {
                let len = header_len(n)
                    .filter(|&l| l <= i64::MAX as u64)
                    .ok_or_else(|| {
                        io_err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!("{n} samples need a header longer than a file can be"),
                        ))
                    })?;
                let (mut file, target) = AtomicTarget::create(path).map_err(io_err)?;
                file.seek(SeekFrom::Start(len)).map_err(io_err)?;
                (file, target, None)
            }
            None => {
                let (file, target) = AtomicTarget::create(path).map_err(io_err)?;
                drop(file);
                let (spool_file, spool) =
                    AtomicTarget::create_tagged(path, "spool").map_err(io_err)?;
                (spool_file, target, Some(spool))
            }
        };
        Ok(FfrWriter {
            name,
            target: Some(target),
            out: Some(BufWriter::with_capacity(options.buffer_size, out)),
            spool,
            count: options.count,
            checksums: Vec::new(),
            offsets: Vec::new(),
            written: 0,
            failed: false,
        })
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
        let result = match (&mut self.out, self.failed) {
            (Some(out), false) => out.write_all(sample),
            _ => Err(earlier_failure()),
        };
        if let Err(source) = result {
            self.fail();
            return Err(Error::Io {
                file: self.name.clone(),
                source,
            });
        }
        self.checksums.push(crc32(sample));
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
        self.out = None;
        self.target = None;
        self.spool = None;
    }

    /// Writes the header, makes the file durable and renames it to its
    /// name.
    ///
    /// Fails with [`Error::CountMismatch`] (leaving nothing under the
    /// name) when fewer samples than a declared count were written.
    pub fn finish(mut self) -> Result<WriteSummary> {
        let name = self.name.clone();
        let io_err = |source| Error::Io {
            file: name.clone(),
            source,
        };
        let (Some(out), Some(target), false) = (self.out.take(), self.target.take(), self.failed)
        else {
            return Err(io_err(earlier_failure()));
        };
        let n = self.checksums.len() as u64;
        if let Some(declared) = self.count {
            if declared != n {
                // `out` and `target` are dropped here: the temporary file
                // is removed.
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
        let offsets: Vec<u64> = self.offsets.iter().map(|o| o + base).collect();
        let header = encode_header(&self.checksums, &offsets);
        let written = out.into_inner().map_err(|e| io_err(e.into_error()))?;
        match self.spool.take() {
            None => {
                written.write_all_at(&header, 0).map_err(io_err)?;
            }
            Some(spool) => {
                drop(written);
                let mut dest = target.file();
                dest.write_all(&header).map_err(io_err)?;
                let mut from = File::open(spool.tmp()).map_err(io_err)?;
                let copied = io::copy(&mut from, &mut dest).map_err(io_err)?;
                if copied != self.written {
                    return Err(io_err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the spooled samples changed size",
                    )));
                }
                drop(spool);
            }
        }
        target.sync().map_err(io_err)?;
        target.commit().map_err(io_err)?;
        Ok(WriteSummary {
            samples: n,
            bytes: base + self.written,
        })
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
