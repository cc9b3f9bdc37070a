//! Random access: reading the records of a batch by number, wherever they
//! are, with one positioned read per run of neighbouring records.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use grist_ffrecord::FfrReader;
use grist_tensor::pool::BufferPool;
use grist_tensor::{Location, TensorError};

use crate::error::{Error, Result};
use crate::files::{Format, Input};
use crate::options::ReadOptions;

/// One record read by number.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    /// The input it came from.
    pub(crate) input: usize,
    /// Its number within the file.
    pub(crate) record: u64,
    /// Its number in the FFRecord dataset (FFRecord only).
    pub(crate) global: u64,
    pub(crate) payload: Bytes,
    /// FFRecord, checks on the parse threads: where the sample is and its
    /// stored CRC-32, to check before it is decoded.
    pub(crate) crc: Option<(Location, u32)>,
}

/// The records of one batch, in batch order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Gathered {
    pub(crate) records: Vec<Record>,
    /// The bytes read for them.
    pub(crate) bytes: u64,
}

/// Reads records by number.
pub(crate) enum Gather {
    Ffrecord {
        reader: FfrReader,
        first: Vec<u64>,
        /// Where the CRC-32s are checked: by the reader, or left to the
        /// parse threads (see [`ReadOptions::crc_on_parse`]).
        read: ReadOptions,
    },
    Framed {
        tfrecord: bool,
        read: ReadOptions,
        files: Vec<Framed>,
        /// The batch read buffers, back when a batch's records are gone:
        /// no zeroing of a fresh buffer per batch.
        pool: Arc<BufferPool>,
    },
}

impl std::fmt::Debug for Gather {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gather::Ffrecord { reader, .. } => f.debug_tuple("Ffrecord").field(reader).finish(),
            Gather::Framed {
                tfrecord, files, ..
            } => f
                .debug_struct("Framed")
                .field("tfrecord", tfrecord)
                .field("files", &files.len())
                .finish(),
        }
    }
}

/// A file of length-framed records and where each frame lies.
pub(crate) struct Framed {
    name: Arc<str>,
    file: File,
    /// Offset and total length of each record's frame.
    entries: Vec<(u64, u64)>,
    /// The whole file, memory-mapped ([`grist_tensor::Access::mmap`]):
    /// frames are sliced from it instead of read.
    mapped: Option<Bytes>,
}

impl Framed {
    fn new(
        read: &ReadOptions,
        name: Arc<str>,
        file: File,
        entries: Vec<(u64, u64)>,
    ) -> Result<Self> {
        let mapped = read.access.map(&file).map_err(|e| Error::io(&name, e))?;
        Ok(Framed {
            name,
            file,
            entries,
            mapped,
        })
    }
}

/// How far apart two wanted frames may be and still be read in one go.
const COALESCE_GAP: u64 = 8 << 10;

impl Gather {
    /// Opens `inputs` for reading by number: FFRecord headers, TFRecord
    /// index files, or the OFRecord length prefixes (read now: the index
    /// is built on first read).
    pub(crate) fn open(read: &ReadOptions, inputs: &[Input]) -> Result<Self> {
        match read.format {
            Format::Ffrecord => {
                let reader =
                    FfrReader::open_files(inputs.iter().map(|i| &i.path), read.ffrecord())?;
                let first = reader.files().iter().map(|f| f.first_index()).collect();
                Ok(Gather::Ffrecord {
                    reader,
                    first,
                    read: read.clone(),
                })
            }
            Format::Tfrecord => {
                let options = read.tfrecord();
                let files = inputs
                    .iter()
                    .map(|input| {
                        let indexed =
                            grist_tfrecord::IndexedReader::open(&input.path, options.clone())?;
                        let entries = indexed
                            .entries()
                            .iter()
                            .map(|e| (e.offset, e.len))
                            .collect();
                        let file =
                            File::open(&input.path).map_err(|e| Error::io(&input.name, e))?;
                        Framed::new(read, input.name.clone(), file, entries)
                    })
                    .collect::<Result<_>>()?;
                Ok(Gather::Framed {
                    tfrecord: true,
                    read: read.clone(),
                    files,
                    pool: Arc::default(),
                })
            }
            Format::Ofrecord => {
                let files = inputs
                    .iter()
                    .map(|input| scan_ofrecord(read, input))
                    .collect::<Result<_>>()?;
                Ok(Gather::Framed {
                    tfrecord: false,
                    read: read.clone(),
                    files,
                    pool: Arc::default(),
                })
            }
            Format::Avro => Err(Error::Unsupported {
                format: Format::Avro.name(),
                what: "Avro files cannot be read by record number".into(),
            }),
        }
    }

    /// The number of records of each input.
    pub(crate) fn counts(&self) -> Vec<u64> {
        match self {
            Gather::Ffrecord { reader, .. } => reader.files().iter().map(|f| f.count()).collect(),
            Gather::Framed { files, .. } => files.iter().map(|f| f.entries.len() as u64).collect(),
        }
    }

    /// Reads the records `wants` (input, record number), in that order.
    pub(crate) fn read(&self, wants: &[(usize, u64)]) -> Result<Gathered> {
        match self {
            Gather::Ffrecord {
                reader,
                first,
                read,
            } => {
                let globals: Vec<u64> = wants.iter().map(|&(f, r)| first[f] + r).collect();
                // Checked by the parse threads when deferred.
                let deferred = read.crc_on_parse();
                let samples = if deferred {
                    reader.read_unchecked(&globals)?
                } else {
                    reader.read(&globals)?
                };
                let mut bytes = 0;
                let records = wants
                    .iter()
                    .zip(globals)
                    .zip(samples)
                    .map(|((&(input, record), global), s)| {
                        bytes += s.data.len() as u64;
                        // Not checked by the reader: the parse threads
                        // check them.
                        let crc = deferred.then_some((s.at, s.crc));
                        Record {
                            input,
                            record,
                            global,
                            payload: s.data,
                            crc,
                        }
                    })
                    .collect();
                Ok(Gathered { records, bytes })
            }
            Gather::Framed {
                tfrecord,
                read,
                files,
                pool,
            } => read_framed(*tfrecord, read, files, pool, wants),
        }
    }
}

/// One positioned read covering several frames of one file.
struct Run {
    file: usize,
    start: u64,
    end: u64,
    /// Where the run lands in the batch buffer.
    at: u64,
}

fn read_framed(
    tfrecord: bool,
    read: &ReadOptions,
    files: &[Framed],
    pool: &Arc<BufferPool>,
    wants: &[(usize, u64)],
) -> Result<Gathered> {
    // Every wanted frame, checked against its index.
    let mut frames = Vec::with_capacity(wants.len());
    for &(f, r) in wants {
        let file = &files[f];
        let &(offset, len) = usize::try_from(r)
            .ok()
            .and_then(|i| file.entries.get(i))
            .ok_or_else(|| Error::BadIndex {
                at: Location::record(file.name.clone(), r).into(),
                reason: format!("the index has {} records", file.entries.len()),
            })?;
        frames.push((f, offset, len));
    }
    if files.iter().all(|f| f.mapped.is_some()) {
        return slice_framed(tfrecord, read, files, wants, &frames);
    }
    let mut order: Vec<usize> = (0..frames.len()).collect();
    order.sort_unstable_by_key(|&i| (frames[i].0, frames[i].1));
    let mut runs: Vec<Run> = Vec::new();
    let mut at = vec![0u64; frames.len()];
    let mut total = 0u64;
    for &i in &order {
        let (f, offset, len) = frames[i];
        let end = offset.saturating_add(len);
        match runs.last_mut() {
            Some(run)
                if run.file == f
                    && offset >= run.start
                    && offset <= run.end.saturating_add(COALESCE_GAP) =>
            {
                if end > run.end {
                    total += end - run.end;
                    run.end = end;
                }
                at[i] = run.at + (offset - run.start);
            }
            _ => {
                runs.push(Run {
                    file: f,
                    start: offset,
                    end,
                    at: total,
                });
                at[i] = total;
                total += len;
            }
        }
    }
    let first = &files[frames.first().map_or(0, |f| f.0)].name;
    read.limits
        .check_alloc("loader batch read", total)
        .map_err(|source| Error::Batch {
            at: Location::record(first.clone(), wants.first().map_or(0, |w| w.1)).into(),
            source,
        })?;
    let total_len = usize::try_from(total).map_err(|_| Error::Batch {
        at: Location::record(first.clone(), 0).into(),
        source: TensorError::LimitExceeded {
            what: "loader batch read",
            requested: total,
            max: usize::MAX as u64,
        },
    })?;
    // A buffer of an earlier batch: the reads below fill every byte used.
    let mut buf = pool.take(total_len);
    for run in &runs {
        let file = &files[run.file];
        let range = run.at as usize..(run.at + run.end - run.start) as usize;
        if let Err(source) = file.file.read_exact_at(&mut buf[range], run.start) {
            // The record whose frame starts the run names the error.
            let record = file.entries.partition_point(|e| e.0 < run.start) as u64;
            return Err(Error::Read {
                at: Location::record(file.name.clone(), record).into(),
                source,
            });
        }
    }
    let buf = BufferPool::share(pool, buf, total_len);
    let mut records = Vec::with_capacity(wants.len());
    for (i, &(f, r)) in wants.iter().enumerate() {
        let (_, offset, len) = frames[i];
        let frame = buf.slice(at[i] as usize..(at[i] + len) as usize);
        records.push(Record {
            input: f,
            record: r,
            global: 0,
            crc: None,
            payload: payload(tfrecord, read, &files[f], r, offset, frame)?,
        });
    }
    Ok(Gathered {
        records,
        bytes: total,
    })
}

/// [`read_framed`] from memory-mapped files: each frame is a slice of its
/// file's map (`frames`: file, offset, length of each wanted record).
fn slice_framed(
    tfrecord: bool,
    read: &ReadOptions,
    files: &[Framed],
    wants: &[(usize, u64)],
    frames: &[(usize, u64, u64)],
) -> Result<Gathered> {
    // The frames sit at random places of the maps: load each one's first
    // line first, all at once, rather than miss the cache at every
    // frame's header in turn below (a third of the prefetch thread's time
    // in an exact OFRecord shuffle).
    grist_tensor::warm(
        wants
            .iter()
            .zip(frames)
            .filter_map(|(&(f, _), &(_, offset, _))| {
                let at = usize::try_from(offset).ok()?;
                files[f].mapped.as_ref()?.get(at..at.checked_add(1)?)
            }),
    );
    let mut records = Vec::with_capacity(wants.len());
    let mut bytes = 0;
    for (&(f, r), &(_, offset, len)) in wants.iter().zip(frames) {
        let file = &files[f];
        let map = file.mapped.clone().unwrap_or_default();
        let range = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(offset.saturating_add(len)).ok())
            .filter(|&(_, end)| end <= map.len());
        let Some((start, end)) = range else {
            return Err(Error::Read {
                at: Location::record(file.name.clone(), r).into(),
                source: io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the index says the frame at {offset} is {len} bytes; the file has {}",
                        map.len()
                    ),
                ),
            });
        };
        let frame = map.slice(start..end);
        bytes += len;
        records.push(Record {
            input: f,
            record: r,
            global: 0,
            crc: None,
            payload: payload(tfrecord, read, file, r, offset, frame)?,
        });
    }
    Ok(Gathered { records, bytes })
}

/// The payload of record `r`, whose whole frame (`offset` in `file`) is
/// `frame`, checked (TFRecord: its CRCs when asked) against the index.
fn payload(
    tfrecord: bool,
    read: &ReadOptions,
    file: &Framed,
    r: u64,
    offset: u64,
    frame: Bytes,
) -> Result<Bytes> {
    let len = frame.len();
    Ok(if tfrecord {
        let mut dec =
            grist_tfrecord::FrameDecoder::with_options(file.name.clone(), &read.tfrecord())
                .with_position(r, offset);
        match dec.decode(&frame)? {
            grist_tfrecord::Decoded::Frame(fr) if fr.len == frame.len() => frame.slice(fr.payload),
            other => {
                return Err(Error::BadIndex {
                    at: Location::record(file.name.clone(), r).into(),
                    reason: format!(
                        "the index says the frame at {offset} is {len} bytes, the file's frame {}",
                        match other {
                            grist_tfrecord::Decoded::Frame(fr) => format!("is {} bytes", fr.len),
                            grist_tfrecord::Decoded::Incomplete { needed } =>
                                format!("needs {needed} bytes"),
                        }
                    ),
                });
            }
        }
    } else {
        let mut dec =
            grist_ofrecord::FrameDecoder::with_options(file.name.clone(), &read.ofrecord())
                .with_position(r, offset);
        match dec.decode(&frame)? {
            grist_ofrecord::Decoded::Frame(fr) if fr.len == frame.len() => frame.slice(fr.payload),
            _ => {
                return Err(Error::BadIndex {
                    at: Location::record(file.name.clone(), r).into(),
                    reason: format!(
                        "the file changed since its index was built (frame at {offset})"
                    ),
                });
            }
        }
    })
}

/// Builds the index of an OFRecord part: reads each length prefix and
/// seeks past the payload, checking the prefixes as the reader does
/// (negative, zero when not accepted, running past the end, over the
/// limits); the first bad one is the error, naming its record.
fn scan_ofrecord(read: &ReadOptions, input: &Input) -> Result<Framed> {
    let name = input.name.clone();
    let file = File::open(&input.path).map_err(|e| Error::io(&name, e))?;
    let size = file.metadata().map_err(|e| Error::io(&name, e))?.len();
    let options = read.ofrecord();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut entries = Vec::new();
    let mut offset = 0u64;
    let mut prefix = [0u8; 8];
    while offset < size {
        let record = entries.len() as u64;
        let have = read_up_to(&mut reader, &mut prefix).map_err(|source| Error::Read {
            at: Location::record(name.clone(), record).into(),
            source,
        })?;
        let mut dec = grist_ofrecord::FrameDecoder::with_options(name.clone(), &options)
            .with_remaining(size)
            .with_position(record, offset);
        let len = match dec.decode(&prefix[..have])? {
            grist_ofrecord::Decoded::Incomplete { needed } => needed,
            grist_ofrecord::Decoded::Frame(f) => f.len as u64,
        };
        if have < 8 {
            // decode reported nothing wrong with a partial prefix: the
            // file ends inside it.
            dec.finish(&prefix[..have])?;
            break;
        }
        entries.push((offset, len));
        offset += len;
        let skip = i64::try_from(len - 8).unwrap_or(i64::MAX);
        reader.seek_relative(skip).map_err(|source| Error::Read {
            at: Location::record(name.clone(), record).into(),
            source,
        })?;
    }
    Framed::new(read, name, reader.into_inner(), entries)
}

/// Reads into `buf` until it is full or the input ends.
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
