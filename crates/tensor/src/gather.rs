//! Records read by number from files of length-framed records whose frames
//! are known ([`FramedFiles`]): TFRecord files with an index, OFRecord
//! parts indexed from their length prefixes. One positioned read per run
//! of neighbouring frames, into one pooled buffer per batch (or slices of
//! memory maps); the format checks each frame and gives its payload.

use std::io;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use grist_io::{BufferPool, Object};

use crate::TensorError;
use crate::{BoxError, Gathered, Input, Limits, Location, ReadOptions, Record};

/// One file of frames and where each frame lies.
#[derive(Debug)]
pub struct FramedFile {
    input: Input,
    object: Object,
    /// Offset and total length of each record's frame.
    entries: Vec<(u64, u64)>,
    /// The whole file, memory-mapped: frames are sliced from it instead
    /// of read.
    mapped: Option<Bytes>,
}

impl FramedFile {
    /// `input`, whose record `i` is the frame of `entries[i]` (offset,
    /// length), opened for reading (mapped when `options` map).
    pub fn open(
        input: &Input,
        entries: Vec<(u64, u64)>,
        options: &ReadOptions,
    ) -> Result<Self, TensorError> {
        // Mapped once, for as long as the files are read by number (and
        // longer where the options' maps are kept between loaders).
        let mapped = options.maps.map(options.access, input)?;
        let object = input
            .storage()
            .open(input.address())
            .map_err(|e| crate::StorageError::new(input.name().clone(), e))?;
        Ok(FramedFile {
            input: input.clone(),
            object,
            entries,
            mapped,
        })
    }

    /// The file.
    pub fn input(&self) -> &Input {
        &self.input
    }

    /// The number of records.
    pub fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Whether the file has no records.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Files of frames, read by record number.
#[derive(Debug)]
pub struct FramedFiles {
    files: Vec<FramedFile>,
    limits: Limits,
    /// The batch read buffers, back when a batch's records are gone: no
    /// zeroing of a fresh buffer per batch.
    pool: Arc<BufferPool>,
}

/// One positioned read covering several frames of one file.
struct Run {
    file: usize,
    start: u64,
    end: u64,
    /// Where the run lands in the batch buffer.
    at: u64,
    /// The bytes of wanted frames in it.
    wanted: u64,
}

/// Whether reading through `gap` unwanted bytes to join a frame to a run
/// of `wanted` bytes is worth it: always within a local file's (small)
/// gap; from an object store, where the gap is large (a request costs
/// more than a read call), only while the unwanted bytes stay below the
/// wanted ones, so that a shuffled batch does not fetch whole objects.
pub fn within_waste(object: &Object, wanted: u64, gap: u64) -> bool {
    !object.is_remote() || within_waste_remote(wanted, gap)
}

/// [`within_waste`] for an object known to be remote.
pub fn within_waste_remote(wanted: u64, gap: u64) -> bool {
    gap <= wanted
}

impl FramedFiles {
    /// The files, read within `limits`.
    pub fn new(files: Vec<FramedFile>, limits: Limits) -> Self {
        FramedFiles {
            files,
            limits,
            pool: Arc::default(),
        }
    }

    /// The number of records of each file.
    pub fn counts(&self) -> Vec<u64> {
        self.files.iter().map(FramedFile::len).collect()
    }

    /// Reads the records `wants` (file, record number), in that order:
    /// each record's whole frame is read and handed to `payload` (file,
    /// record, frame offset, frame), which checks it and returns the
    /// record's payload.
    pub fn read(
        &self,
        wants: &[(usize, u64)],
        mut payload: impl FnMut(&Input, u64, u64, Bytes) -> Result<Bytes, BoxError>,
    ) -> Result<Gathered, BoxError> {
        // Every wanted frame, checked against its index.
        let mut frames = Vec::with_capacity(wants.len());
        for &(f, r) in wants {
            let file = &self.files[f];
            let &(offset, len) = usize::try_from(r)
                .ok()
                .and_then(|i| file.entries.get(i))
                .ok_or_else(|| TensorError::BadIndex {
                    at: Box::new(Location::record(file.input.name().clone(), r)),
                    reason: format!("the index has {} records", file.entries.len()),
                })?;
            frames.push((f, offset, len));
        }
        if self.files.iter().all(|f| f.mapped.is_some()) {
            return self.slice(wants, &frames, payload);
        }
        let mut order: Vec<usize> = (0..frames.len()).collect();
        order.sort_unstable_by_key(|&i| (frames[i].0, frames[i].1));
        let mut runs: Vec<Run> = Vec::new();
        let mut at = vec![0u64; frames.len()];
        let mut total = 0u64;
        for &i in &order {
            let (f, offset, len) = frames[i];
            let end = offset.saturating_add(len);
            // How far apart two wanted frames may be and still be read in
            // one go: what a second read (or request) costs.
            let object = &self.files[f].object;
            let gap = object.coalesce_gap();
            match runs.last_mut() {
                Some(run)
                    if run.file == f
                        && offset >= run.start
                        && offset <= run.end.saturating_add(gap)
                        && within_waste(object, run.wanted, offset.saturating_sub(run.end)) =>
                {
                    if end > run.end {
                        total += end - run.end;
                        run.end = end;
                    }
                    run.wanted += len;
                    at[i] = run.at + (offset - run.start);
                }
                _ => {
                    runs.push(Run {
                        file: f,
                        start: offset,
                        end,
                        at: total,
                        wanted: len,
                    });
                    at[i] = total;
                    total += len;
                }
            }
        }
        self.limits.check_alloc("batch read", total)?;
        let total_len = usize::try_from(total).map_err(|_| TensorError::LimitExceeded {
            what: "batch read",
            requested: total,
            max: usize::MAX as u64,
        })?;
        // A buffer of an earlier batch: the reads below fill every byte
        // used. One call for all runs: remote ones are fetched at once.
        let mut buf = self.pool.take(total_len);
        let parts: Vec<(&Object, Range<u64>)> = runs
            .iter()
            .map(|run| (&self.files[run.file].object, run.start..run.end))
            .collect();
        if let Err(e) = grist_io::read_into(&parts, &mut buf[..total_len]) {
            let name: Arc<str> = e
                .address()
                .map_or_else(|| self.files[runs[0].file].input.name().clone(), Arc::from);
            return Err(Box::new(TensorError::Storage(crate::StorageError::new(
                name, e,
            ))));
        }
        let buf = BufferPool::share(&self.pool, buf, total_len);
        let mut records = Vec::with_capacity(wants.len());
        for (i, &(f, r)) in wants.iter().enumerate() {
            let (_, offset, len) = frames[i];
            let frame = buf.slice(at[i] as usize..(at[i] + len) as usize);
            records.push(Record {
                input: f,
                record: r,
                global: 0,
                check: None,
                payload: payload(&self.files[f].input, r, offset, frame)?,
            });
        }
        Ok(Gathered {
            records,
            bytes: total,
        })
    }

    /// [`read`](Self::read) from memory-mapped files: each frame is a
    /// slice of its file's map (`frames`: file, offset, length of each
    /// wanted record).
    fn slice(
        &self,
        wants: &[(usize, u64)],
        frames: &[(usize, u64, u64)],
        mut payload: impl FnMut(&Input, u64, u64, Bytes) -> Result<Bytes, BoxError>,
    ) -> Result<Gathered, BoxError> {
        // The frames sit at random places of the maps: load each one's
        // first line first, all at once, rather than miss the cache at
        // every frame's header in turn below (a third of the prefetch
        // thread's time in an exact OFRecord shuffle).
        crate::warm(
            wants
                .iter()
                .zip(frames)
                .filter_map(|(&(f, _), &(_, offset, _))| {
                    let at = usize::try_from(offset).ok()?;
                    self.files[f].mapped.as_ref()?.get(at..at.checked_add(1)?)
                }),
        );
        let mut records = Vec::with_capacity(wants.len());
        let mut bytes = 0;
        for (&(f, r), &(_, offset, len)) in wants.iter().zip(frames) {
            let file = &self.files[f];
            let map = file.mapped.clone().unwrap_or_default();
            let range = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(offset.saturating_add(len)).ok())
                .filter(|&(_, end)| end <= map.len());
            let Some((start, end)) = range else {
                return Err(Box::new(TensorError::Io {
                    at: Box::new(
                        Location::record(file.input.name().clone(), r).with_offset(offset),
                    ),
                    source: io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "the index says the frame at {offset} is {len} bytes; the file has {}",
                            map.len()
                        ),
                    ),
                }));
            };
            bytes += len;
            records.push(Record {
                input: f,
                record: r,
                global: 0,
                check: None,
                payload: payload(&file.input, r, offset, map.slice(start..end))?,
            });
        }
        Ok(Gathered { records, bytes })
    }
}
