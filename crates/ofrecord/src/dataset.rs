//! Datasets: folders of numbered part files, opened the way OneFlow's
//! `OFRecordReader` opens them, and split across ranks.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use grist_io::{Address, Storage};
use grist_tensor::StorageError;

use crate::error::{Error, Result};
use crate::framing::{ReaderOptions, RecordReader, open_object, read_from, scan_lengths};

/// How part files are named: a prefix, then the part's index in decimal,
/// left-padded with zeros to the suffix length (never cut). OneFlow's
/// `part_name_prefix` and `part_name_suffix_length` (−1 = no padding).
///
/// ```
/// use grist_ofrecord::PartNaming;
/// let spark = PartNaming::new("part-", Some(5));
/// assert_eq!(spark.name(3), "part-00003");
/// assert_eq!(spark.name(123456), "part-123456");
/// assert_eq!(PartNaming::default().name(10), "part-10");
/// assert_eq!(spark.index_of("part-00012"), Some(12));
/// assert_eq!(spark.index_of("part-12"), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartNaming {
    prefix: String,
    suffix_length: Option<usize>,
}

impl Default for PartNaming {
    /// OneFlow's defaults: prefix `part-`, no padding.
    fn default() -> Self {
        PartNaming::new("part-", None)
    }
}

impl PartNaming {
    /// Names made of `prefix` and the index padded to `suffix_length`
    /// digits (`None`: not padded).
    pub fn new(prefix: impl Into<String>, suffix_length: Option<usize>) -> Self {
        PartNaming {
            prefix: prefix.into(),
            suffix_length,
        }
    }

    /// OneFlow's form of the options: a negative suffix length means no
    /// padding.
    pub fn oneflow(prefix: impl Into<String>, suffix_length: i64) -> Self {
        Self::new(prefix, usize::try_from(suffix_length).ok())
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The padding width, `None` for none.
    pub fn suffix_length(&self) -> Option<usize> {
        self.suffix_length
    }

    /// The file name of part `index`.
    pub fn name(&self, index: usize) -> String {
        let width = self.suffix_length.unwrap_or(0);
        format!("{}{index:0width$}", self.prefix)
    }

    /// The index of the part called `file_name`, if it is one of these
    /// names (exactly: `part-007` is not a name of width 5).
    pub fn index_of(&self, file_name: &str) -> Option<usize> {
        let digits = file_name.strip_prefix(&self.prefix)?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let index: usize = digits.parse().ok()?;
        (self.name(index) == file_name).then_some(index)
    }
}

/// How a dataset is split across the ranks of a distributed job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardMode {
    /// OneFlow's way: each rank reads a contiguous range of parts (the
    /// balanced split: the first `parts % ranks` ranks get one more).
    /// Needs at least as many parts as ranks.
    Parts,
    /// Each rank reads a contiguous range of records (the balanced split
    /// of the record count, found by reading every part's length
    /// prefixes); works with any number of parts.
    Records,
    /// Parts when there are at least as many parts as ranks, records
    /// otherwise.
    Auto,
}

/// One rank's share of a dataset.
///
/// ```
/// use grist_ofrecord::{Shard, ShardMode};
/// let shard = Shard::new(1, 3).with_mode(ShardMode::Parts);
/// assert_eq!(shard.rank(), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    rank: usize,
    world_size: usize,
    mode: ShardMode,
}

impl Default for Shard {
    /// The whole dataset (rank 0 of 1).
    fn default() -> Self {
        Shard::new(0, 1)
    }
}

impl Shard {
    /// Rank `rank` of `world_size`.
    pub fn new(rank: usize, world_size: usize) -> Self {
        Shard {
            rank,
            world_size,
            mode: ShardMode::Auto,
        }
    }

    /// How the dataset is split. By default, [`ShardMode::Auto`].
    #[must_use]
    pub fn with_mode(mut self, mode: ShardMode) -> Self {
        self.mode = mode;
        self
    }

    /// The rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The split mode.
    pub fn mode(&self) -> ShardMode {
        self.mode
    }
}

/// OneFlow's balanced splitter: `n` items over `parts` ranges, the first
/// `n % parts` one longer. Range `i` of the split.
///
/// ```
/// use grist_ofrecord::balanced_range;
/// let ranges: Vec<_> = (0..3).map(|r| balanced_range(5, 3, r)).collect();
/// assert_eq!(ranges, vec![0..2, 2..4, 4..5]);
/// ```
pub fn balanced_range(n: u64, parts: u64, i: u64) -> Range<u64> {
    if parts == 0 {
        return 0..0;
    }
    let base = n / parts;
    let extra = n % parts;
    let start = i * base + i.min(extra);
    let len = base + u64::from(i < extra);
    start..start + len
}

/// One part file of a dataset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The part's index (its number in the dataset order).
    pub index: usize,
    /// Its path.
    pub path: PathBuf,
}

/// A run of records of one part that a reader reads: the whole part, or
/// (record sharding) a range of its records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The part.
    pub part: Part,
    /// The number, within the part, of the first record.
    pub first_record: u64,
    /// The byte offset of the first record's length prefix.
    pub offset: u64,
    /// How many records to read; `None` reads to the end of the part.
    pub records: Option<u64>,
}

impl Segment {
    /// The whole of `part`.
    pub fn whole(part: Part) -> Self {
        Segment {
            part,
            first_record: 0,
            offset: 0,
            records: None,
        }
    }
}

/// A dataset: an ordered list of part files.
///
/// ```
/// use grist_ofrecord::{Dataset, DatasetWriter, PartNaming, RecordBuilder, Shard};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DatasetWriter::create(dir.path())?.with_records_per_part(2);
/// for i in 0..5 {
///     w.write_record(&RecordBuilder::new().with_int64s("i", [i]).encode())?;
/// }
/// assert_eq!(w.finish()?.parts, 3);
///
/// let ds = Dataset::open(dir.path(), 3, &PartNaming::new("part-", Some(5)))?;
/// assert_eq!(ds.part_ranges(2)?, vec![0..2, 2..3]);
/// let mine = ds.segments(Shard::new(1, 2))?;
/// assert_eq!(mine.len(), 1);
/// let mut reader = ds.reader();
/// let mut n = 0;
/// while let Some(r) = reader.next_record()? {
///     assert_eq!(r.global_index, n);
///     n += 1;
/// }
/// assert_eq!(n, 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dataset {
    dir: PathBuf,
    parts: Vec<Part>,
    options: ReaderOptions,
}

impl Dataset {
    /// The dataset OneFlow's reader would open: parts `0..data_part_num`
    /// of `dir`, named by `naming`, each of which must exist (a missing
    /// one is [`Error::MissingPart`]). Other files are ignored.
    pub fn open(dir: impl AsRef<Path>, data_part_num: usize, naming: &PartNaming) -> Result<Self> {
        let dir = dir.as_ref();
        if data_part_num == 0 {
            return Err(Error::BadDataset {
                dir: dir.to_path_buf(),
                reason: "data_part_num must be at least 1".into(),
            });
        }
        let storage = Storage::new();
        let parts = (0..data_part_num)
            .map(|index| {
                let path = dir.join(naming.name(index));
                let address = Address::from(path.as_path());
                match storage.stat(&address) {
                    Ok(Some(meta)) if !meta.is_dir => Ok(Part { index, path }),
                    Ok(_) => Err(Error::MissingPart {
                        file: path,
                        part: index,
                    }),
                    Err(e) => Err(Error::Storage(StorageError::new(address.name().clone(), e))),
                }
            })
            .collect::<Result<_>>()?;
        Ok(Self::from_parts(dir, parts))
    }

    /// The dataset of every file of `dir` named `prefix` + a decimal index,
    /// padded or not, in numeric order. The indices must be `0..n` with no
    /// gap and no index given twice (`part-1` and `part-01`).
    pub fn discover(dir: impl AsRef<Path>, prefix: &str) -> Result<Self> {
        let dir = dir.as_ref();
        let bad = |reason: String| Error::BadDataset {
            dir: dir.to_path_buf(),
            reason,
        };
        let address = Address::from(dir);
        // The files of the folder (not its subfolders nor hidden files).
        let entries = Storage::new()
            .list(&address)
            .map_err(|e| Error::Storage(StorageError::new(address.name().clone(), e)))?;
        let plain = PartNaming::new(prefix, None);
        let mut found: Vec<(usize, PathBuf)> = Vec::new();
        for entry in entries {
            let Some(name) = entry.address.file_name() else {
                continue;
            };
            let Some(digits) = name.strip_prefix(prefix) else {
                continue;
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(index) = digits.parse::<usize>() else {
                return Err(bad(format!("part number of {name:?} is too large")));
            };
            found.push((index, dir.join(name)));
        }
        if found.is_empty() {
            return Err(bad(format!("no part files named {prefix}<n>")));
        }
        found.sort();
        let mut parts = Vec::with_capacity(found.len());
        for (i, (index, path)) in found.into_iter().enumerate() {
            if index != i {
                if index < i {
                    return Err(bad(format!("part {index} is there under two names")));
                }
                return Err(Error::MissingPart {
                    file: dir.join(plain.name(i)),
                    part: i,
                });
            }
            parts.push(Part { index, path });
        }
        Ok(Self::from_parts(dir, parts))
    }

    /// A dataset of the given files, in this order.
    pub fn from_files<P: Into<PathBuf>>(files: impl IntoIterator<Item = P>) -> Self {
        let parts: Vec<Part> = files
            .into_iter()
            .enumerate()
            .map(|(index, p)| Part {
                index,
                path: p.into(),
            })
            .collect();
        let dir = parts
            .first()
            .and_then(|p| p.path.parent())
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Self::from_parts(&dir, parts)
    }

    fn from_parts(dir: &Path, parts: Vec<Part>) -> Self {
        Dataset {
            dir: dir.to_path_buf(),
            parts,
            options: ReaderOptions::default(),
        }
    }

    /// The framing options its readers use. By default,
    /// [`ReaderOptions::default`].
    #[must_use]
    pub fn with_options(mut self, options: ReaderOptions) -> Self {
        self.options = options;
        self
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The parts, in dataset order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The framing options.
    pub fn options(&self) -> &ReaderOptions {
        &self.options
    }

    /// The part range of each of `world_size` ranks, as OneFlow splits
    /// them ([`balanced_range`]). Fails with [`Error::TooFewParts`] when
    /// there are fewer parts than ranks.
    pub fn part_ranges(&self, world_size: usize) -> Result<Vec<Range<usize>>> {
        if world_size == 0 {
            return Err(Error::BadRank {
                rank: 0,
                world_size,
            });
        }
        if world_size > self.parts.len() {
            return Err(Error::TooFewParts {
                parts: self.parts.len(),
                world_size,
            });
        }
        Ok((0..world_size as u64)
            .map(|r| {
                let range = balanced_range(self.parts.len() as u64, world_size as u64, r);
                range.start as usize..range.end as usize
            })
            .collect())
    }

    /// The number of records of each part, read from their length
    /// prefixes only (the payloads are skipped).
    pub fn record_counts(&self) -> Result<Vec<u64>> {
        self.parts
            .iter()
            .map(|p| scan_lengths(&p.path, &self.options, None).map(|(n, _)| n))
            .collect()
    }

    /// What rank `shard.rank()` reads, in order.
    pub fn segments(&self, shard: Shard) -> Result<Vec<Segment>> {
        let (rank, world) = (shard.rank, shard.world_size);
        if world == 0 || rank >= world {
            return Err(Error::BadRank {
                rank,
                world_size: world,
            });
        }
        let by_parts = match shard.mode {
            ShardMode::Parts => true,
            ShardMode::Records => false,
            ShardMode::Auto => world <= self.parts.len(),
        };
        if by_parts {
            let range = self.part_ranges(world)?.swap_remove(rank);
            return Ok(self.parts[range]
                .iter()
                .cloned()
                .map(Segment::whole)
                .collect());
        }
        let counts = self.record_counts()?;
        let total: u64 = counts.iter().sum();
        let mine = balanced_range(total, world as u64, rank as u64);
        let mut segments = Vec::new();
        let mut first = 0u64;
        for (part, &count) in self.parts.iter().zip(&counts) {
            let here = first..first + count;
            first += count;
            let start = mine.start.max(here.start);
            let end = mine.end.min(here.end);
            if start >= end {
                continue;
            }
            let skip = start - here.start;
            let offset = if skip == 0 {
                0
            } else {
                scan_lengths(&part.path, &self.options, Some(skip))?
                    .1
                    .unwrap_or(0)
            };
            segments.push(Segment {
                part: part.clone(),
                first_record: skip,
                offset,
                records: Some(end - start),
            });
        }
        Ok(segments)
    }

    /// A reader of every record of the dataset, in order.
    pub fn reader(&self) -> DatasetReader {
        DatasetReader::new(
            self.parts.iter().cloned().map(Segment::whole).collect(),
            self.options,
        )
    }
}

/// One record read by a [`DatasetReader`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatasetRecord<'a> {
    /// The part it is in (its index in the dataset).
    pub part: usize,
    /// The part file's name, as errors name it.
    pub file: &'a Arc<str>,
    /// Its number within the part.
    pub index_in_part: u64,
    /// Its number among the records this reader read (for a whole dataset:
    /// its number in the dataset).
    pub global_index: u64,
    /// The byte offset of its length prefix in the part.
    pub offset: u64,
    /// The serialized OFRecord.
    pub payload: &'a [u8],
}

/// Reads the records of a list of [`Segment`]s, one after the other.
/// Each part is framed on its own: a record cut by the end of its part is
/// truncation (OneFlow reads its parts as one stream and would splice it
/// with the next part's bytes).
#[derive(Debug)]
pub struct DatasetReader {
    segments: std::collections::VecDeque<Segment>,
    options: ReaderOptions,
    current: Option<(usize, u64, RecordReader)>,
    global: u64,
    done: bool,
}

impl DatasetReader {
    /// A reader of `segments`, in order.
    pub fn new(segments: Vec<Segment>, options: ReaderOptions) -> Self {
        DatasetReader {
            segments: segments.into(),
            options,
            current: None,
            global: 0,
            done: false,
        }
    }

    /// The next record, `None` at the end. After an error the reader
    /// returns `None`.
    pub fn next_record(&mut self) -> Result<Option<DatasetRecord<'_>>> {
        if self.done {
            return Ok(None);
        }
        loop {
            if self.current.is_none() {
                let Some(seg) = self.segments.pop_front() else {
                    self.done = true;
                    return Ok(None);
                };
                match open_segment(&seg, self.options) {
                    Ok(reader) => {
                        let limit = seg.records.unwrap_or(u64::MAX);
                        self.current = Some((seg.part.index, limit, reader));
                    }
                    Err(e) => {
                        self.done = true;
                        return Err(e);
                    }
                }
            }
            let Some((_, left, reader)) = &mut self.current else {
                continue;
            };
            if *left == 0 {
                self.current = None;
                continue;
            }
            // The record is taken again below (`last`), once this borrow of
            // the reader has ended and `self.current` may be cleared.
            match reader.next_record() {
                Ok(Some(_)) => {}
                Ok(None) => {
                    self.current = None;
                    continue;
                }
                Err(e) => {
                    self.done = true;
                    self.current = None;
                    return Err(e);
                }
            }
            break;
        }
        let global = self.global;
        self.global += 1;
        let Some((part, left, reader)) = &mut self.current else {
            return Ok(None);
        };
        *left -= 1;
        let (index, offset, payload) = reader.last();
        Ok(Some(DatasetRecord {
            part: *part,
            file: reader.name(),
            index_in_part: index,
            global_index: global,
            offset,
            payload,
        }))
    }
}

fn open_segment(seg: &Segment, options: ReaderOptions) -> Result<RecordReader> {
    let path = &seg.part.path;
    if seg.first_record == 0 && seg.offset == 0 {
        return RecordReader::open(path, options);
    }
    let object = open_object(&Storage::new(), &Address::from(path.as_path()))?;
    let size = object.size();
    // An offset past the end reads nothing: the framing then reports it.
    let stream = read_from(&object, seg.offset.min(size))?;
    Ok(RecordReader::resume(
        stream,
        object.name().clone(),
        options,
        seg.first_record,
        seg.offset,
        size,
    ))
}
