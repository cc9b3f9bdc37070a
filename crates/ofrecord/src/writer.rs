//! Writing OFRecord files: [`RecordWriter`] frames records into any
//! [`Write`]; [`DatasetWriter`] fills a folder (or an object store prefix)
//! with part files, each written atomically through the storage layer.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use grist_io::{Address, Storage, Writer};
use grist_tensor::StorageError;

use crate::dataset::PartNaming;
use crate::error::{Error, Result};
use crate::framing::LENGTH_PREFIX;

/// Frames records (8-byte little-endian length, then the payload) into any
/// [`Write`].
///
/// ```
/// use grist_ofrecord::{ReaderOptions, RecordReader, RecordWriter};
/// let mut w = RecordWriter::new(Vec::new());
/// w.write_record(b"abc")?;
/// let bytes = w.into_inner();
/// assert_eq!(bytes.len(), 8 + 3);
/// let mut r = RecordReader::new(&bytes[..], "mem", ReaderOptions::default());
/// assert_eq!(r.next_record()?.unwrap().payload, b"abc");
/// # Ok::<(), grist_ofrecord::Error>(())
/// ```
#[derive(Debug)]
pub struct RecordWriter<W: Write> {
    out: W,
    name: Arc<str>,
    records: u64,
    bytes: u64,
}

impl<W: Write> RecordWriter<W> {
    /// Writes to `out`.
    pub fn new(out: W) -> Self {
        Self::named(out, "")
    }

    /// Writes to `out`, calling it `name` in errors.
    pub fn named(out: W, name: impl Into<Arc<str>>) -> Self {
        RecordWriter {
            out,
            name: name.into(),
            records: 0,
            bytes: 0,
        }
    }

    /// Appends one record.
    pub fn write_record(&mut self, payload: &[u8]) -> Result<()> {
        let len = payload.len() as u64;
        self.out
            .write_all(&(len as i64).to_le_bytes())
            .and_then(|()| self.out.write_all(payload))
            .map_err(|source| match StorageError::from_io(&self.name, source) {
                // The storage layer's own errors name their URL.
                Ok(e) => Error::Storage(e),
                Err(source) => Error::Io {
                    file: self.name.clone(),
                    source,
                },
            })?;
        self.records += 1;
        self.bytes += LENGTH_PREFIX as u64 + len;
        Ok(())
    }

    /// The records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The bytes written so far (length prefixes included).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The output.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// What a [`DatasetWriter`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DatasetSummary {
    /// The number of part files (OneFlow's `data_part_num`).
    pub parts: usize,
    /// The number of records.
    pub records: u64,
    /// The bytes of all parts.
    pub bytes: u64,
}

/// The part being written.
struct OpenPart {
    out: RecordWriter<BufWriter<Writer>>,
    dest: Address,
}

/// Writes a dataset: records into part files `part-00000`, `part-00001`,
/// ... of a folder, a new part when the current one reaches its record or
/// byte limit.
///
/// Each part is written through the storage layer
/// ([`grist_io::Storage::create`]) and made visible under its name when it
/// is complete: locally a hidden temporary file beside it, fsynced and
/// renamed; in an object store a multipart upload, completed. So a part
/// file under its final name is always whole. Dropping the writer
/// unfinished removes the part in progress (the completed parts stay). The
/// writer refuses a folder that already holds part files of its naming
/// (another dataset's parts would mix with its own). A dataset of no
/// records is one empty part.
///
/// ```
/// use grist_ofrecord::{Dataset, DatasetWriter, PartNaming};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DatasetWriter::create(dir.path().join("ds"))?
///     .with_naming(PartNaming::new("part-", None))
///     .with_bytes_per_part(100);
/// for _ in 0..10 {
///     w.write_record(&[0u8; 42])?;
/// }
/// let summary = w.finish()?;
/// assert_eq!((summary.parts, summary.records), (5, 10));
/// assert!(dir.path().join("ds/part-4").is_file());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DatasetWriter {
    storage: Storage,
    dir: Address,
    naming: PartNaming,
    records_per_part: u64,
    bytes_per_part: u64,
    buffer_size: usize,
    current: Option<OpenPart>,
    summary: DatasetSummary,
    failed: bool,
}

impl std::fmt::Debug for DatasetWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetWriter")
            .field("dir", &self.dir)
            .field("naming", &self.naming)
            .field("summary", &self.summary)
            .field("current", &self.current.as_ref().map(|p| &p.dest))
            .finish_non_exhaustive()
    }
}

impl DatasetWriter {
    /// A writer of a dataset in folder `dir` (created if missing; see
    /// [`create_at`](Self::create_at)).
    pub fn create(dir: impl AsRef<Path>) -> Result<Self> {
        DatasetWriter::create_at(&Storage::new(), &Address::from(dir.as_ref()))
    }

    /// A writer of a dataset in the folder or object store prefix `dir`
    /// (a path, or a URL such as `s3://bucket/train/`), through `storage`.
    /// A local folder is created if missing; an object store has no
    /// folders to create.
    ///
    /// ```
    /// use grist_io::{Address, Storage};
    /// use grist_ofrecord::DatasetWriter;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let ds = Address::from(dir.path().join("ds"));
    /// let mut w = DatasetWriter::create_at(&Storage::new(), &ds)?;
    /// w.write_record(b"...")?;
    /// assert_eq!(w.finish()?.parts, 1);
    /// assert!(dir.path().join("ds/part-00000").is_file());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_at(storage: &Storage, dir: &Address) -> Result<Self> {
        storage
            .create_dir_all(dir)
            .map_err(|e| storage_error(dir.name(), e))?;
        Ok(DatasetWriter {
            storage: storage.clone(),
            dir: dir.clone(),
            naming: PartNaming::new("part-", Some(5)),
            records_per_part: u64::MAX,
            bytes_per_part: u64::MAX,
            buffer_size: 1 << 20,
            current: None,
            summary: DatasetSummary::default(),
            failed: false,
        })
    }

    /// How parts are named. By default, `part-` and 5 digits
    /// (`part-00000`, Spark's convention; open the result with
    /// `part_name_suffix_length=5`).
    #[must_use]
    pub fn with_naming(mut self, naming: PartNaming) -> Self {
        self.naming = naming;
        self
    }

    /// The most records in one part. By default, no limit.
    #[must_use]
    pub fn with_records_per_part(mut self, records: u64) -> Self {
        self.records_per_part = records.max(1);
        self
    }

    /// The most bytes in one part (length prefixes included); a record
    /// larger than this gets a part of its own. By default, no limit.
    #[must_use]
    pub fn with_bytes_per_part(mut self, bytes: u64) -> Self {
        self.bytes_per_part = bytes.max(1);
        self
    }

    /// How many bytes of each part are gathered before they are handed to
    /// its file (the storage writer's
    /// [`set_buffer_size`](grist_io::Writer::set_buffer_size)), at most
    /// [`grist_tensor::MAX_IO_BUFFER`]. By default, 1 MiB.
    #[must_use]
    pub fn with_buffer_size(mut self, bytes: usize) -> Self {
        self.buffer_size = bytes.clamp(1, grist_tensor::MAX_IO_BUFFER);
        self
    }

    /// The folder or prefix.
    pub fn dir(&self) -> &Address {
        &self.dir
    }

    /// What has been written so far (the part in progress included).
    pub fn summary(&self) -> DatasetSummary {
        let mut s = self.summary;
        if let Some(p) = &self.current {
            s.parts += 1;
            s.records += p.out.records();
            s.bytes += p.out.bytes();
        }
        s
    }

    /// Appends one record (a serialized OFRecord), starting a new part
    /// first when it would not fit in the current one. After an error the
    /// writer is unusable.
    pub fn write_record(&mut self, payload: &[u8]) -> Result<()> {
        if self.failed {
            return Err(self.earlier_failure());
        }
        let result = self.write_inner(payload);
        if result.is_err() {
            self.failed = true;
            self.current = None;
        }
        result
    }

    fn write_inner(&mut self, payload: &[u8]) -> Result<()> {
        let framed = LENGTH_PREFIX as u64 + payload.len() as u64;
        if let Some(p) = &self.current {
            let full = p.out.records() >= self.records_per_part
                || (p.out.records() > 0
                    && p.out.bytes().saturating_add(framed) > self.bytes_per_part);
            if full {
                self.close_part()?;
            }
        }
        if self.current.is_none() {
            self.open_part()?;
        }
        match &mut self.current {
            Some(p) => p.out.write_record(payload),
            None => Err(self.earlier_failure()),
        }
    }

    fn earlier_failure(&self) -> Error {
        Error::Io {
            file: self.dir.name().clone(),
            source: std::io::Error::other("an earlier write to this dataset writer failed"),
        }
    }

    fn open_part(&mut self) -> Result<()> {
        let index = self.summary.parts;
        if index == 0 {
            self.check_empty()?;
        }
        let dest = self.dir.join(&self.naming.name(index));
        let mut out = self
            .storage
            .create(&dest)
            .map_err(|e| storage_error(dest.name(), e))?;
        // The storage's writer gathers the records itself.
        out.set_buffer_size(self.buffer_size);
        let out = RecordWriter::named(BufWriter::with_capacity(0, out), dest.name().clone());
        self.current = Some(OpenPart { out, dest });
        Ok(())
    }

    /// Fails when the folder already holds a part of this naming.
    fn check_empty(&self) -> Result<()> {
        let entries = self
            .storage
            .list(&self.dir)
            .map_err(|e| storage_error(self.dir.name(), e))?;
        for entry in entries {
            if let Some(name) = entry.address.file_name() {
                if self.naming.index_of(name).is_some() {
                    return Err(Error::DatasetExists {
                        dir: PathBuf::from(self.dir.as_str()),
                        file: name.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Makes the part in progress durable and visible under its name.
    fn close_part(&mut self) -> Result<()> {
        let Some(OpenPart { out, dest }) = self.current.take() else {
            return Ok(());
        };
        let (records, bytes) = (out.records(), out.bytes());
        let file = out.into_inner().into_inner().map_err(|e| Error::Io {
            file: dest.name().clone(),
            source: e.into_error(),
        })?;
        file.commit().map_err(|e| storage_error(dest.name(), e))?;
        self.summary.parts += 1;
        self.summary.records += records;
        self.summary.bytes += bytes;
        Ok(())
    }

    /// Completes the current part now: the next record starts a new one.
    /// With no record written since the last part, this writes an empty
    /// part.
    pub fn end_part(&mut self) -> Result<()> {
        if self.failed {
            return Err(self.earlier_failure());
        }
        let result = match self.current {
            Some(_) => self.close_part(),
            None => self.open_part().and_then(|()| self.close_part()),
        };
        if result.is_err() {
            self.failed = true;
            self.current = None;
        }
        result
    }

    /// Completes the last part and returns what was written.
    pub fn finish(mut self) -> Result<DatasetSummary> {
        if self.failed {
            return Err(self.earlier_failure());
        }
        if self.current.is_none() && self.summary.parts == 0 {
            self.open_part()?;
        }
        self.close_part()?;
        Ok(self.summary)
    }
}

/// A failure of the storage layer, naming `file`.
fn storage_error(file: &Arc<str>, e: grist_io::Error) -> Error {
    Error::Storage(StorageError::new(file.clone(), e))
}
