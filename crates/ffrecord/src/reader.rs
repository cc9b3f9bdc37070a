//! [`FfrReader`]: one FFRecord file, or a folder of them, read by sample
//! number.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use grist_io::{Address, Object, Storage};
use grist_tensor::{Input, Limits, Location, StorageError, prefetch_ahead};

use crate::error::{Error, Result};
use crate::header::{FileHeader, HeaderDecoder, PREFIX_LEN, check_sample, encode_header};
use crate::source::FfrSource;
use grist_io::BufferPool;

/// How sample bytes are fetched from the files: positioned reads (`pread`)
/// into buffers the reader owns by default ([`Access::read`]), or slices of
/// a memory map behind the `unsafe` opt-in [`Access::mmap`], whose caller
/// promises that the files do not change.
pub use grist_tensor::Access;

/// Options of [`FfrReader`].
///
/// ```
/// use grist_ffrecord::ReaderOptions;
/// let options = ReaderOptions::default().with_check_data(false);
/// assert!(!options.check_data());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderOptions {
    check_data: bool,
    limits: Limits,
    access: Access,
    coalesce_gap: u64,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            check_data: true,
            limits: Limits::default(),
            access: Access::read(),
            coalesce_gap: 4096,
        }
    }
}

impl ReaderOptions {
    /// Whether to verify checksums, as the original's `check_data`: the
    /// metadata CRC-32 of each file when it is opened (skipped for legacy
    /// files, whose stored checksum is 0) and the CRC-32 of every sample
    /// read, zero-length ones included. Offsets are checked against the
    /// header and file sizes either way. By default, `true`.
    #[must_use]
    pub fn with_check_data(mut self, check: bool) -> Self {
        self.check_data = check;
        self
    }

    /// The limits on allocations sized by the files: the header arrays,
    /// one sample ([`Limits::max_record_bytes`]) and one batch of samples
    /// ([`Limits::max_alloc_bytes`]). By default, [`Limits::default`].
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// How sample bytes are fetched. By default, [`Access::read`]
    /// (positioned reads).
    #[must_use]
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    /// The largest run of unwanted bytes a batch read reads through to
    /// join two wanted samples of the same file into one read (the bytes
    /// in between are read and skipped). Samples that touch are always
    /// read together. By default, 4096 bytes.
    #[must_use]
    pub fn with_coalesce_gap(mut self, bytes: u64) -> Self {
        self.coalesce_gap = bytes;
        self
    }

    /// Whether checksums are verified.
    pub fn check_data(&self) -> bool {
        self.check_data
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The access mode.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The coalescing gap.
    pub fn coalesce_gap(&self) -> u64 {
        self.coalesce_gap
    }
}

/// One file of a dataset: its name, where its samples are numbered, and
/// its validated header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    name: Arc<str>,
    path: Option<PathBuf>,
    first_index: u64,
    header: FileHeader,
}

impl FileInfo {
    /// The file's name as errors print it.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The file's path (`None` for a file given as bytes).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The dataset number of the file's first sample.
    pub fn first_index(&self) -> u64 {
        self.first_index
    }

    /// The number of samples in the file.
    pub fn count(&self) -> u64 {
        self.header.count()
    }

    /// The validated header.
    pub fn header(&self) -> &FileHeader {
        &self.header
    }
}

/// One sample read from a dataset.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sample {
    /// Where the sample is: its file, its number there (`record`) and in
    /// the dataset (`index`), both always set.
    pub at: Location,
    /// Its bytes (a slice of a buffer shared with the other samples of
    /// the same read, or of the file's memory map).
    pub data: Bytes,
    /// Its CRC-32 as stored in its file's header (checked against
    /// [`data`](Self::data) unless read with
    /// [`read_unchecked`](FfrReader::read_unchecked) or without
    /// [`check_data`](ReaderOptions::with_check_data)).
    pub crc: u32,
}

/// Where a file's bytes come from.
enum Backing {
    /// Ranged reads through the storage layer (positioned reads of a local
    /// file, requests to an object store).
    Object(Object),
    /// The whole file in memory (a memory map or given bytes).
    Bytes(Bytes),
}

struct Inner {
    files: Vec<FileInfo>,
    backings: Vec<Backing>,
    /// The dataset number after each file's last sample.
    ends: Vec<u64>,
    options: ReaderOptions,
    /// Read buffers, reused once the samples sliced from them are gone.
    pool: Arc<BufferPool>,
}

/// An FFRecord dataset (one file, a list of files, or a folder of `*.ffr`
/// files) read by sample number.
///
/// Opening reads and validates every file's header (and nothing else):
/// the file must hold the `12 + 12·N` bytes of its header (checked before
/// anything is allocated for it), its metadata CRC-32 must match when
/// [`check_data`](ReaderOptions::with_check_data) is on (legacy files,
/// whose stored checksum is 0, are accepted and reported by
/// [`legacy_files`](Self::legacy_files)), and its offsets must lie between
/// the end of the header and the end of the file without decreasing.
/// Samples are numbered across files in order, as the original numbers
/// them. [`read`](Self::read) then fetches any samples, in the order asked,
/// coalescing neighbours into single reads, and checks their CRC-32s.
///
/// The reader is cheap to clone and can be shared between threads.
///
/// ```
/// use grist_ffrecord::{FfrReader, FfrWriter, ReaderOptions, WriterOptions};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("data.ffr");
/// let mut w = FfrWriter::create(&path, WriterOptions::default())?;
/// for s in [&b"zero"[..], b"one", b"two", b"three"] {
///     w.write_sample(s)?;
/// }
/// w.finish()?;
///
/// let reader = FfrReader::open(&path, ReaderOptions::default())?;
/// assert_eq!(reader.len(), 4);
/// let samples = reader.read(&[3, 0, 3])?;
/// assert_eq!(samples[0].data, &b"three"[..]);
/// assert_eq!(samples[1].data, &b"zero"[..]);
/// assert_eq!(samples[2].at.index, Some(3));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct FfrReader {
    inner: Arc<Inner>,
}

fn name_of(path: &Path) -> Arc<str> {
    path.display().to_string().into()
}

fn storage_error(file: &Arc<str>) -> impl FnOnce(grist_io::Error) -> Error + '_ {
    move |e| Error::Storage(StorageError::new(file.clone(), e))
}

/// The `*.ffr` entries of folder `dir` (not recursive), sorted as plain
/// strings, as the original orders them (`a_10.ffr` before `a_2.ffr`).
/// Other entries are ignored. Fails with [`Error::NoFiles`] when there is
/// none.
pub fn dataset_files(dir: impl AsRef<Path>) -> Result<Vec<PathBuf>> {
    let dir = dir.as_ref();
    let dir_name = name_of(dir);
    let entries = Storage::new()
        .list(&Address::from(dir))
        .map_err(storage_error(&dir_name))?;
    let mut files: Vec<PathBuf> = entries
        .into_iter()
        .filter_map(|e| e.address.local_path().map(Path::to_path_buf))
        .filter(|p| p.as_os_str().as_encoded_bytes().ends_with(b".ffr"))
        .collect();
    if files.is_empty() {
        return Err(Error::NoFiles { dir: dir_name });
    }
    files.sort_by(|a, b| {
        a.as_os_str()
            .as_encoded_bytes()
            .cmp(b.as_os_str().as_encoded_bytes())
    });
    Ok(files)
}

impl FfrReader {
    /// Opens `path`: an FFRecord file, or a folder whose `*.ffr` entries
    /// (see [`dataset_files`]) make one dataset.
    pub fn open(path: impl AsRef<Path>, options: ReaderOptions) -> Result<Self> {
        let path = path.as_ref();
        let name = name_of(path);
        let meta = Storage::new()
            .stat(&Address::from(path))
            .map_err(storage_error(&name))?;
        if meta.is_some_and(|m| m.is_dir) {
            Self::open_files(dataset_files(path)?, options)
        } else {
            Self::open_files([path], options)
        }
    }

    /// Opens the FFRecord files `paths`, numbering their samples in the
    /// order given. An empty list is an empty dataset.
    pub fn open_files<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
        options: ReaderOptions,
    ) -> Result<Self> {
        let inputs: Vec<Input> = paths
            .into_iter()
            .map(|p| Input::local(p.as_ref()))
            .collect();
        Self::open_inputs(&inputs, options)
    }

    /// Opens the FFRecord files `inputs` (local files or objects of any
    /// storage), numbering their samples in the order given.
    pub fn open_inputs(inputs: &[Input], options: ReaderOptions) -> Result<Self> {
        let mut builder = Builder::new(options);
        for input in inputs {
            let name = input.name().clone();
            let object = match input
                .storage()
                .clone()
                .with_access(options.access)
                .open(input.address())
            {
                Ok(o) => o,
                Err(grist_io::Error::NotAFile { .. }) => {
                    return Err(Error::NotAFile { file: name });
                }
                Err(e) => return Err(storage_error(&name)(e)),
            };
            let path = input.path().map(Path::to_path_buf);
            // Mapped (an empty file maps to no bytes: too short for a
            // header anyway), or read by ranges.
            match object.map() {
                Some(bytes) => builder.add_bytes(name, path, bytes.clone())?,
                None => builder.add_object(name, path, object)?,
            }
        }
        Ok(builder.finish())
    }

    /// Reads one FFRecord file held in memory, called `name` in errors.
    /// Samples are slices of `data` (no copy).
    pub fn from_bytes(name: &str, data: Bytes, options: ReaderOptions) -> Result<Self> {
        let mut builder = Builder::new(options);
        builder.add_bytes(name.into(), None, data)?;
        Ok(builder.finish())
    }

    /// The number of samples in the dataset.
    pub fn len(&self) -> u64 {
        self.inner.ends.last().copied().unwrap_or(0)
    }

    /// True when the dataset has no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The files, in sample order.
    pub fn files(&self) -> &[FileInfo] {
        &self.inner.files
    }

    /// The legacy files (stored metadata checksum 0, not verified): the
    /// original reader prints "you are using an old version ffrecord
    /// file" for each.
    pub fn legacy_files(&self) -> impl Iterator<Item = &FileInfo> + '_ {
        self.inner.files.iter().filter(|f| f.header.is_legacy())
    }

    /// The options the reader was opened with.
    pub fn options(&self) -> &ReaderOptions {
        &self.inner.options
    }

    /// The total length of all samples, in bytes.
    pub fn data_len(&self) -> u64 {
        self.inner.files.iter().map(|f| f.header.data_len()).sum()
    }

    /// Which file sample `index` is in, and its number there.
    fn find(&self, index: u64) -> Result<(usize, u64)> {
        let ends = &self.inner.ends;
        let f = ends.partition_point(|&end| end <= index);
        if f >= ends.len() {
            return Err(Error::IndexOutOfRange {
                index,
                count: self.len(),
            });
        }
        Ok((f, index - self.inner.files[f].first_index))
    }

    /// Where sample `index` is.
    pub fn locate(&self, index: u64) -> Result<Location> {
        let (f, sample) = self.find(index)?;
        Ok(self.at(f, sample, index))
    }

    /// The length of sample `index`, in bytes.
    pub fn sample_len(&self, index: u64) -> Result<u64> {
        let (f, local) = self.find(index)?;
        let r = self.range(f, local);
        Ok(r.end - r.start)
    }

    fn range(&self, f: usize, local: u64) -> std::ops::Range<u64> {
        // `find` returned a sample of this file.
        self.inner.files[f]
            .header
            .sample_range(local)
            .unwrap_or(0..0)
    }

    /// Re-checks the metadata checksum of every file that has one (the
    /// original's `validate`), whether or not the reader checks data.
    pub fn validate(&self) -> Result<()> {
        for f in &self.inner.files {
            let h = &f.header;
            if h.is_legacy() {
                continue;
            }
            let offsets = &h.offsets()[..h.offsets().len() - 1];
            let encoded = encode_header(h.checksums(), offsets);
            let computed = u32::from_le_bytes([encoded[0], encoded[1], encoded[2], encoded[3]]);
            if computed != h.stored_crc() {
                return Err(Error::MetadataChecksum {
                    file: f.name.clone(),
                    stored: h.stored_crc(),
                    computed,
                });
            }
        }
        Ok(())
    }

    /// Reads sample `index` (checking its CRC-32 if the reader checks
    /// data).
    pub fn read_one(&self, index: u64) -> Result<Sample> {
        let mut samples = self.read(&[index])?;
        Ok(samples.remove(0))
    }

    /// Reads the samples `indices`, in that order (repeats allowed),
    /// checking each one's CRC-32 if the reader checks data.
    ///
    /// With positioned reads, the wanted samples of each file are sorted
    /// and read into one buffer, neighbours (and samples at most
    /// [`coalesce_gap`](ReaderOptions::with_coalesce_gap) bytes apart)
    /// with a single `pread`; a sample asked for twice is read once. The
    /// buffer is checked against [`Limits::max_alloc_bytes`] first, each
    /// sample against [`Limits::max_record_bytes`]. Memory-mapped (and
    /// in-memory) files are sliced without copying.
    ///
    /// Fails on the first index (in the order asked) that is out of range,
    /// over the limit, or whose sample's checksum does not match; or when
    /// the batch is over the allocation limit or a read fails.
    pub fn read(&self, indices: &[u64]) -> Result<Vec<Sample>> {
        self.read_checked(indices, self.inner.options.check_data)
    }

    /// [`read`](Self::read) without the samples' CRC-32 checks, for a
    /// caller that checks them itself, elsewhere (a loader's parse threads,
    /// in parallel): each sample's stored checksum is in its file's
    /// [`header`](FileInfo::header), and a mismatch is
    /// [`Error::SampleChecksum`]. The headers were checked at open as the
    /// options said.
    pub fn read_unchecked(&self, indices: &[u64]) -> Result<Vec<Sample>> {
        self.read_checked(indices, false)
    }

    /// Reads the samples `indices` into `batch` (replacing what it held,
    /// keeping its memory), in that order, checking each one's CRC-32 if
    /// the reader checks data: [`read`](Self::read) without a `Vec` of
    /// [`Sample`]s and a reference count per sample, for a caller that
    /// reads batch after batch. The samples are slices of one buffer per
    /// batch (positioned reads) or of the files' maps; they stay valid
    /// until the next read into `batch`.
    ///
    /// Reads, checks and fails as [`read`](Self::read) does; on failure
    /// `batch` is left empty.
    ///
    /// ```
    /// use grist_ffrecord::{FfrReader, FfrWriter, ReaderOptions, SampleBatch, WriterOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("data.ffr");
    /// let mut w = FfrWriter::create(&path, WriterOptions::default())?;
    /// for s in [&b"zero"[..], b"one", b"two"] {
    ///     w.write_sample(s)?;
    /// }
    /// w.finish()?;
    ///
    /// let reader = FfrReader::open(&path, ReaderOptions::default())?;
    /// let mut batch = SampleBatch::default();
    /// for indices in [[2, 0], [1, 1]] {
    ///     reader.read_batch(&indices, &mut batch)?;
    ///     assert_eq!(batch.len(), 2);
    /// }
    /// assert_eq!(batch.get(0), Some(&b"one"[..]));
    /// assert_eq!(batch.at(1).and_then(|at| at.index), Some(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_batch(&self, indices: &[u64], batch: &mut SampleBatch) -> Result<()> {
        self.read_into(indices, self.inner.options.check_data, batch)
    }

    fn read_checked(&self, indices: &[u64], check_data: bool) -> Result<Vec<Sample>> {
        let mut batch = SampleBatch::default();
        self.read_into(indices, check_data, &mut batch)?;
        Ok((0..batch.len())
            .filter_map(|i| {
                Some(Sample {
                    at: batch.at(i)?,
                    data: batch.bytes(i)?,
                    crc: batch.crc(i)?,
                })
            })
            .collect())
    }

    fn read_into(&self, indices: &[u64], check_data: bool, batch: &mut SampleBatch) -> Result<()> {
        batch.clear();
        let result = self.fill(indices, check_data, batch);
        if result.is_err() {
            batch.clear();
        }
        result
    }

    fn fill(&self, indices: &[u64], check_data: bool, batch: &mut SampleBatch) -> Result<()> {
        let inner = &*self.inner;
        let limits = inner.options.limits;
        let wants = &mut batch.entries;
        wants.reserve(indices.len());
        // An index out of range or a sample over the limit fails the batch,
        // but only after the samples asked for before it (which may fail
        // first).
        let mut later = None;
        for &index in indices {
            let (f, local) = match self.find(index) {
                Ok(found) => found,
                Err(e) => {
                    later = Some(e);
                    break;
                }
            };
            let range = self.range(f, local);
            let len = range.end - range.start;
            if len > limits.max_record_bytes() {
                later = Some(Error::SampleTooLarge {
                    at: self.at(f, local, index).into(),
                    len,
                    max: limits.max_record_bytes(),
                });
                break;
            }
            let crc = inner.files[f].header.checksums()[local as usize];
            wants.push(Want {
                file: f,
                local,
                index,
                start: range.start,
                end: range.end,
                crc,
                buffer: 0,
                at: 0,
            });
        }
        self.fetch(batch)?;
        batch.reader = Some(self.clone());
        if check_data {
            // Mapped samples come in from memory while the samples before
            // them are checked, not one by one as the checks reach them.
            // (Samples read with pread were just copied, and are in cache.)
            let prefetching = inner
                .backings
                .iter()
                .any(|b| matches!(b, Backing::Bytes(_)));
            for k in 0..batch.entries.len() {
                if prefetching {
                    prefetch_ahead(k, |i| batch.get(i));
                }
                let w = &batch.entries[k];
                let data = batch.get(k).unwrap_or_default();
                check_sample(data, w.crc, || self.at(w.file, w.local, w.index))?;
            }
        }
        match later {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn at(&self, f: usize, local: u64, index: u64) -> Location {
        Location::record(self.inner.files[f].name.clone(), local).with_index(index)
    }

    /// Fetches the bytes of each wanted sample of `batch`: where it lands
    /// (a buffer of `batch.buffers` and an offset there).
    fn fetch(&self, batch: &mut SampleBatch) -> Result<()> {
        let inner = &*self.inner;
        let wants = &mut batch.entries;
        // The wanted samples of files read with pread, in file order.
        let mut order: Vec<usize> = Vec::new();
        for (i, w) in wants.iter_mut().enumerate() {
            match &inner.backings[w.file] {
                Backing::Bytes(b) => {
                    // The file's bytes, once per batch.
                    if batch.slots.len() < inner.files.len() {
                        batch.slots.resize(inner.files.len(), usize::MAX);
                    }
                    let slot = &mut batch.slots[w.file];
                    if *slot == usize::MAX {
                        batch.buffers.push(b.clone());
                        *slot = batch.buffers.len() - 1;
                        batch.files.push(w.file);
                    }
                    w.buffer = *slot;
                    w.at = w.start as usize;
                }
                Backing::Object(_) => order.push(i),
            }
        }
        if order.is_empty() {
            return Ok(());
        }
        order.sort_unstable_by_key(|&i| (wants[i].file, wants[i].local));
        // Plan the reads: runs of samples of one file, and where each
        // wanted sample lands in the buffer.
        let mut runs: Vec<Run> = Vec::new();
        let mut total = 0u64;
        for (k, &i) in order.iter().enumerate() {
            let w = &wants[i];
            if k > 0 {
                let p = order[k - 1];
                if wants[p].file == w.file && wants[p].local == w.local {
                    wants[i].at = wants[p].at;
                    continue;
                }
            }
            // Objects fetched by request join wider gaps: a request costs
            // more than a read call.
            let (gap, remote) = match &inner.backings[w.file] {
                Backing::Object(o) if o.is_remote() => {
                    (inner.options.coalesce_gap.max(o.coalesce_gap()), true)
                }
                _ => (inner.options.coalesce_gap, false),
            };
            let worth =
                |run: &Run, gap| !remote || grist_tensor::within_waste_remote(run.wanted, gap);
            let pos = match runs.last_mut() {
                Some(run)
                    if run.file == w.file
                        && w.start >= run.end
                        && w.start - run.end <= gap
                        && worth(run, w.start - run.end) =>
                {
                    total += w.end - run.end;
                    run.end = w.end;
                    run.last = k;
                    run.wanted += w.end - w.start;
                    run.buf_start + (w.start - run.start)
                }
                _ => {
                    runs.push(Run {
                        file: w.file,
                        start: w.start,
                        end: w.end,
                        buf_start: total,
                        first: k,
                        last: k,
                        wanted: w.end - w.start,
                    });
                    total += w.end - w.start;
                    total - (w.end - w.start)
                }
            };
            wants[i].at = pos as usize;
        }
        let first = &inner.files[wants[order[0]].file].name;
        inner
            .options
            .limits
            .check_alloc("ffrecord sample batch", total)
            .map_err(|source| Error::TooLarge {
                file: first.clone(),
                source,
            })?;
        let total = usize::try_from(total).map_err(|_| Error::TooLarge {
            file: first.clone(),
            source: grist_tensor::TensorError::LimitExceeded {
                what: "ffrecord sample batch",
                requested: total,
                max: usize::MAX as u64,
            },
        })?;
        let mut buf = inner.pool.take(total);
        // One call for every run: remote ones are fetched at once.
        let parts: Vec<(&Object, Range<u64>)> = runs
            .iter()
            .filter_map(|run| match &inner.backings[run.file] {
                Backing::Object(o) => Some((o, run.start..run.end)),
                Backing::Bytes(_) => None,
            })
            .collect();
        if let Err(e) = grist_io::read_into(&parts, &mut buf[..total]) {
            return Err(self.read_failure(e, &runs, &order, wants));
        }
        batch
            .buffers
            .push(BufferPool::share(&inner.pool, buf, total));
        let k = batch.buffers.len() - 1;
        for &i in &order {
            wants[i].buffer = k;
        }
        Ok(())
    }

    /// The error for a failed read of `runs`: a truncated sample if a
    /// file shrank since it was opened, else the storage layer's error.
    fn read_failure(
        &self,
        e: grist_io::Error,
        runs: &[Run],
        order: &[usize],
        wants: &[Want],
    ) -> Error {
        for run in runs {
            let Backing::Object(object) = &self.inner.backings[run.file] else {
                continue;
            };
            let now = object.current_size();
            for &i in &order[run.first..=run.last] {
                let w = &wants[i];
                if let Some(size) = now.filter(|&size| w.end > size) {
                    return Error::TruncatedSample {
                        at: self.at(w.file, w.local, w.index).into(),
                        end: w.end,
                        size,
                    };
                }
            }
        }
        let name = e
            .address()
            .map_or_else(|| self.inner.files[runs[0].file].name.clone(), Arc::from);
        Error::Storage(StorageError::new(name, e))
    }

    /// A [`FfrSource`] over the whole dataset, in sample order.
    pub fn source(&self) -> FfrSource {
        FfrSource::new(self.clone())
    }

    /// The bytes `start..end` of file `f` (a whole run of samples), with
    /// one read (into a pooled buffer) or one slice.
    pub(crate) fn fetch_range(
        &self,
        f: usize,
        start: u64,
        end: u64,
    ) -> Result<Bytes, grist_io::Error> {
        match &self.inner.backings[f] {
            Backing::Bytes(b) => Ok(b.slice(start as usize..end as usize)),
            Backing::Object(object) => {
                let len = (end - start) as usize;
                let mut buf = self.inner.pool.take(len);
                object.read_range_into(start..end, &mut buf[..len])?;
                Ok(BufferPool::share(&self.inner.pool, buf, len))
            }
        }
    }

    /// Bytes `start..end` of file `f`, the next bytes of a sequential read:
    /// a remote file is streamed through `ahead`, whose blocks are
    /// requested ahead of time so that the round trips overlap with
    /// decoding (one ranged request per chunk would wait out each one);
    /// other files as [`fetch_range`](Self::fetch_range). `ahead` is
    /// reopened when the read does not continue where it stopped.
    pub(crate) fn fetch_next(
        &self,
        f: usize,
        start: u64,
        end: u64,
        ahead: &mut Option<Ahead>,
    ) -> Result<Bytes, grist_io::Error> {
        let Backing::Object(object) = &self.inner.backings[f] else {
            return self.fetch_range(f, start, end);
        };
        if !object.is_remote() {
            return self.fetch_range(f, start, end);
        }
        if !matches!(ahead, Some(a) if a.file == f && a.pos == start) {
            *ahead = Some(Ahead {
                file: f,
                pos: start,
                reader: object.reader(start, STREAM_READ_AHEAD)?,
            });
        }
        let Some(a) = ahead.as_mut() else {
            unreachable!("set above")
        };
        let len = (end - start) as usize;
        let mut buf = self.inner.pool.take(len);
        match std::io::Read::read_exact(&mut a.reader, &mut buf[..len]) {
            Ok(()) => {
                a.pos = end;
                Ok(BufferPool::share(&self.inner.pool, buf, len))
            }
            Err(e) => {
                *ahead = None;
                match e
                    .into_inner()
                    .map(|inner| inner.downcast::<grist_io::Error>())
                {
                    Some(Ok(error)) => Err(*error),
                    // The object ended early: the ranged read says how.
                    _ => self.fetch_range(f, start, end),
                }
            }
        }
    }

    /// The current size of file `f`, when it can be asked (to tell a file
    /// that shrank from a failed read).
    pub(crate) fn current_size(&self, f: usize) -> Option<u64> {
        match &self.inner.backings[f] {
            Backing::Bytes(b) => Some(b.len() as u64),
            Backing::Object(o) => o.current_size(),
        }
    }
}

/// How far ahead a stream of a remote file reads (as
/// [`grist_tensor::Input`] does).
const STREAM_READ_AHEAD: usize = 16 << 20;

/// A remote file read in order by [`FfrReader::fetch_next`].
pub(crate) struct Ahead {
    file: usize,
    /// The next byte `reader` gives.
    pos: u64,
    reader: Box<dyn std::io::Read + Send>,
}

/// One wanted sample of a batch read.
#[derive(Clone, Copy, Debug)]
struct Want {
    file: usize,
    local: u64,
    index: u64,
    start: u64,
    end: u64,
    /// The sample's CRC-32, as stored.
    crc: u32,
    /// Where its bytes are once fetched: a buffer of the batch, and the
    /// offset there.
    buffer: usize,
    at: usize,
}

/// The samples of a batch read with [`FfrReader::read_batch`], in the
/// order asked: slices of one buffer (positioned reads) or of the files'
/// maps, without a reference count or an allocation per sample. Reused
/// from batch to batch, it keeps its memory.
#[derive(Clone, Debug, Default)]
pub struct SampleBatch {
    reader: Option<FfrReader>,
    /// The bytes the samples are slices of.
    buffers: Vec<Bytes>,
    /// Per file of the reader: its map's place in `buffers`, or
    /// `usize::MAX`.
    slots: Vec<usize>,
    /// The files whose slots are set.
    files: Vec<usize>,
    entries: Vec<Want>,
}

impl SampleBatch {
    fn clear(&mut self) {
        self.reader = None;
        self.buffers.clear();
        for &f in &self.files {
            self.slots[f] = usize::MAX;
        }
        self.files.clear();
        self.entries.clear();
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no sample.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes of sample `i` (the `i`-th asked for).
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let w = self.entries.get(i)?;
        let len = usize::try_from(w.end - w.start).ok()?;
        self.buffers
            .get(w.buffer)?
            .get(w.at..w.at.checked_add(len)?)
    }

    /// The bytes of every sample, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or_default())
    }

    /// Sample `i`'s bytes as shared [`Bytes`] (a slice of the same
    /// buffer, not a copy).
    pub fn bytes(&self, i: usize) -> Option<Bytes> {
        let w = self.entries.get(i)?;
        let len = usize::try_from(w.end - w.start).ok()?;
        let buffer = self.buffers.get(w.buffer)?;
        (w.at.checked_add(len)? <= buffer.len()).then(|| buffer.slice(w.at..w.at + len))
    }

    /// Sample `i`'s number in the dataset.
    pub fn index(&self, i: usize) -> Option<u64> {
        self.entries.get(i).map(|w| w.index)
    }

    /// Sample `i`'s CRC-32 as stored in its file's header.
    pub fn crc(&self, i: usize) -> Option<u32> {
        self.entries.get(i).map(|w| w.crc)
    }

    /// Where sample `i` is.
    pub fn at(&self, i: usize) -> Option<Location> {
        let w = self.entries.get(i)?;
        Some(self.reader.as_ref()?.at(w.file, w.local, w.index))
    }
}

/// One `pread` of a batch read: bytes `start..end` of `file` into the
/// buffer at `buf_start`, covering `order[first..=last]`.
struct Run {
    file: usize,
    start: u64,
    end: u64,
    buf_start: u64,
    first: usize,
    last: usize,
    /// The bytes of wanted samples in it.
    wanted: u64,
}

/// Collects the files of a reader as they are opened.
struct Builder {
    options: ReaderOptions,
    files: Vec<FileInfo>,
    backings: Vec<Backing>,
    ends: Vec<u64>,
    next: u64,
}

impl Builder {
    fn new(options: ReaderOptions) -> Self {
        Builder {
            options,
            files: Vec::new(),
            backings: Vec::new(),
            ends: Vec::new(),
            next: 0,
        }
    }

    fn push(&mut self, name: Arc<str>, path: Option<PathBuf>, header: FileHeader, b: Backing) {
        let first_index = self.next;
        self.next += header.count();
        self.ends.push(self.next);
        self.files.push(FileInfo {
            name,
            path,
            first_index,
            header,
        });
        self.backings.push(b);
    }

    fn add_bytes(&mut self, name: Arc<str>, path: Option<PathBuf>, data: Bytes) -> Result<()> {
        let header = crate::header::parse_header(
            name.clone(),
            &data,
            self.options.check_data,
            &self.options.limits,
            self.next,
        )?;
        self.push(name, path, header, Backing::Bytes(data));
        Ok(())
    }

    fn add_object(&mut self, name: Arc<str>, path: Option<PathBuf>, object: Object) -> Result<()> {
        let header = read_header(&name, &object, &self.options, self.next)?;
        self.push(name, path, header, Backing::Object(object));
        Ok(())
    }

    fn finish(self) -> FfrReader {
        FfrReader {
            inner: Arc::new(Inner {
                files: self.files,
                backings: self.backings,
                ends: self.ends,
                options: self.options,
                pool: Arc::default(),
            }),
        }
    }
}

/// Reads and validates the header of `object` with ranged reads (the
/// fixed prefix, then the arrays in pieces of at most 64 KiB, so that a
/// lying count costs no more than the bytes that are there).
fn read_header(
    name: &Arc<str>,
    object: &Object,
    options: &ReaderOptions,
    first_index: u64,
) -> Result<FileHeader> {
    let size = object.size();
    let read = |range: Range<u64>| {
        let range = range.start.min(size)..range.end.min(size);
        object.read_range(range).map_err(storage_error(name))
    };
    let prefix = read(0..PREFIX_LEN as u64)?;
    let mut decoder = HeaderDecoder::new(name.clone(), &prefix, size, &options.limits)?;
    let mut pos = PREFIX_LEN as u64;
    while decoder.remaining() > 0 {
        let want = decoder.remaining().min(1 << 16);
        let piece = read(pos..pos.saturating_add(want))?;
        if piece.is_empty() {
            // The file is shorter than its header: `finish` reports the
            // header as truncated.
            break;
        }
        decoder.feed(&piece);
        pos += piece.len() as u64;
    }
    decoder.finish(options.check_data, first_index)
}

impl fmt::Debug for FfrReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FfrReader")
            .field(
                "files",
                &self.inner.files.iter().map(|f| &f.name).collect::<Vec<_>>(),
            )
            .field("samples", &self.len())
            .field("options", &self.inner.options)
            .finish()
    }
}
