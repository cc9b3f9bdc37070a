//! The loader's options and their resolved form.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use grist_tensor::{Access, Limits};

use crate::files::{Format, Input};
use crate::rng::{self, Purpose};

/// How many threads parse each batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threads {
    /// Exactly this many (at least 1).
    Fixed(usize),
    /// Chosen per batch by the cost model, up to the number of CPU cores
    /// (see [`autotune`](crate::autotune)).
    #[default]
    Autotune,
}

/// How many passes over the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epochs {
    /// This many passes.
    Count(u64),
    /// Pass after pass, without end (except that an epoch giving no
    /// records ends the run, so that empty input does not loop forever).
    Endless,
}

impl Default for Epochs {
    fn default() -> Self {
        Epochs::Count(1)
    }
}

/// How the data is split between the ranks of a data-parallel job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShardMode {
    /// By file when there are at least as many files as ranks, by record
    /// otherwise.
    #[default]
    Auto,
    /// Each rank reads whole files: the epoch's file order, dealt out
    /// round-robin. Needs at least as many files as ranks.
    Files,
    /// Each rank reads a share of the records: with random access, a
    /// contiguous, balanced range of the epoch's order of all records;
    /// otherwise the chunks of the stream of all files, dealt out
    /// round-robin (every rank reads the framing of every chunk, decodes
    /// only its own).
    Records,
}

/// Whether records are read by number (exact shuffles, resuming anywhere
/// without reading what came before) rather than as a stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RandomAccess {
    /// FFRecord: always. TFRecord: when every file is uncompressed and has
    /// an index (`<file>.idx`, as DALI's `tfrecord2idx` writes it).
    /// OFRecord: when shuffling (the index is built on first read, from
    /// the length prefixes). Avro: never.
    #[default]
    Auto,
    /// Streams (FFRecord files are still read by number, in order).
    Off,
    /// By number, or an error for a format or file that cannot be.
    Required,
}

/// What FFRecord samples hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FfrPayload {
    /// Serialized `tf.train.Example` (or `SequenceExample`) records.
    #[default]
    Example,
    /// Serialized OneFlow `OFRecord`s.
    OfRecord,
    /// The raw little-endian bytes of one tensor, decoded by a spec of
    /// exactly one dense feature (see [`grist_ffrecord::RawDecoder`]).
    Raw,
}

/// How files are read (shared by the stream and the random-access
/// readers).
#[derive(Clone, Debug)]
pub(crate) struct ReadOptions {
    pub(crate) format: Format,
    pub(crate) chunk_bytes: usize,
    pub(crate) limits: Limits,
    pub(crate) check_crc: bool,
    /// Read calls or memory maps.
    pub(crate) access: Access,
    /// The memory maps of the stream files, kept from epoch to epoch.
    pub(crate) maps: Arc<Maps>,
    /// The read buffers that stream chunks share (see `stream::Window`),
    /// back when their chunks are dropped.
    pub(crate) buffers: Arc<grist_tensor::pool::BufferPool>,
    /// The loader shuffles (then Avro blocks do not share read buffers:
    /// see `stream::Window`).
    pub(crate) shuffled: bool,
    /// Whether the parse threads check the data CRCs of TFRecord streams
    /// and the CRC-32s of FFRecord samples as they decode them (else the
    /// prefetch thread does, as it reads them). Shared with the prefetch
    /// thread: the loader moves the checks batch by batch to where its
    /// thread count says (several parse threads: onto them; one: beside
    /// it, on the prefetch thread), and each chunk or record read says
    /// whether it is still to be checked.
    pub(crate) crc_on_parse: Arc<AtomicBool>,
}

/// The memory maps of the last [`Maps::KEEP`] files mapped, so that a file
/// read again (the next epoch) is not mapped, faulted in page by page and
/// unmapped once more: with the page cache warm, that costs about as
/// much as copying the bytes.
#[derive(Debug, Default)]
pub(crate) struct Maps(Mutex<VecDeque<(PathBuf, Bytes)>>);

impl Maps {
    /// How many maps are kept (each is one mapping of the process; the
    /// kernel allows tens of thousands).
    const KEEP: usize = 256;

    /// The whole of `file` (at `path`) as bytes when `access` maps,
    /// `None` when it reads.
    pub(crate) fn map(
        &self,
        access: Access,
        path: &Path,
        file: &File,
    ) -> io::Result<Option<Bytes>> {
        if !access.is_mmap() {
            return Ok(None);
        }
        let mut maps = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, map)) = maps.iter().find(|(p, _)| p == path) {
            return Ok(Some(map.clone()));
        }
        let map = access.map(file)?.unwrap_or_default();
        if maps.len() == Self::KEEP {
            maps.pop_front();
        }
        maps.push_back((path.to_path_buf(), map.clone()));
        Ok(Some(map))
    }
}

impl ReadOptions {
    /// The most a stream chunker reads at once: the chunk size, within
    /// 64 KiB and 16 MiB.
    pub(crate) fn read_size(&self) -> usize {
        self.chunk_bytes.clamp(64 << 10, 16 << 20)
    }

    /// Whether data CRCs read from now on are left to the parse threads
    /// (when CRCs are checked at all).
    pub(crate) fn crc_on_parse(&self) -> bool {
        self.check_crc && self.crc_on_parse.load(Ordering::Relaxed)
    }

    pub(crate) fn tfrecord(&self) -> grist_tfrecord::ReaderOptions {
        grist_tfrecord::ReaderOptions::default()
            .with_check_crc(self.check_crc)
            .with_limits(self.limits)
    }

    pub(crate) fn ofrecord(&self) -> grist_ofrecord::ReaderOptions {
        grist_ofrecord::ReaderOptions::default().with_limits(self.limits)
    }

    pub(crate) fn ffrecord(&self) -> grist_ffrecord::ReaderOptions {
        grist_ffrecord::ReaderOptions::default()
            .with_check_data(self.check_crc)
            .with_limits(self.limits)
            .with_access(self.access)
    }
}

/// Everything the loader's threads need to know, resolved.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) read: ReadOptions,
    pub(crate) inputs: Vec<Input>,
    pub(crate) batch_size: usize,
    pub(crate) drop_remainder: bool,
    /// `None`: endless.
    pub(crate) epochs: Option<u64>,
    pub(crate) shuffle: bool,
    pub(crate) seed: u64,
    pub(crate) shuffle_buffer: usize,
    pub(crate) reshuffle: bool,
    pub(crate) cycle_length: usize,
    pub(crate) rank: usize,
    pub(crate) world: usize,
    pub(crate) by_file: bool,
    pub(crate) equal_batches: bool,
    pub(crate) indexed: bool,
    pub(crate) prefetch_bytes: u64,
    pub(crate) ffr_payload: FfrPayload,
}

impl Config {
    /// The epoch number the random choices of `epoch` are keyed by.
    pub(crate) fn shuffle_epoch(&self, epoch: u64) -> u64 {
        if self.reshuffle { epoch } else { 0 }
    }

    /// Every input, in the order of `epoch` (shuffled when shuffling).
    pub(crate) fn file_order(&self, epoch: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.inputs.len()).collect();
        if self.shuffle {
            let mut rng = rng::stream(self.seed, Purpose::FileOrder, self.shuffle_epoch(epoch), 0);
            rng::shuffle(&mut order, &mut rng);
        }
        order
    }

    /// The inputs `rank` reads in `epoch`, in order: its share of the
    /// epoch's file order when sharding by file, else all of them.
    pub(crate) fn files_of(&self, epoch: u64, rank: usize) -> Vec<usize> {
        let order = self.file_order(epoch);
        if self.by_file && self.world > 1 {
            order
                .into_iter()
                .enumerate()
                .filter(|(j, _)| j % self.world == rank)
                .map(|(_, f)| f)
                .collect()
        } else {
            order
        }
    }

    /// Whether chunk `global` of the stream of all files is this rank's.
    pub(crate) fn owns_chunk(&self, global: u64) -> bool {
        self.by_file || self.world <= 1 || global % self.world as u64 == self.rank as u64
    }

    /// The batches an epoch of `records` records makes.
    pub(crate) fn batches(&self, records: u64) -> u64 {
        let b = self.batch_size as u64;
        if self.drop_remainder {
            records / b
        } else {
            records.div_ceil(b)
        }
    }

    /// A digest of every argument that decides which batches come out, to
    /// check a saved state against.
    pub(crate) fn fingerprint(&self) -> u64 {
        let mut text = format!(
            "{:?}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{:?}",
            self.read.format,
            self.read.chunk_bytes,
            self.batch_size,
            self.drop_remainder,
            self.shuffle,
            self.seed,
            self.shuffle_buffer,
            self.reshuffle,
            self.cycle_length,
            self.rank,
            self.world,
            self.by_file,
            self.equal_batches,
            self.indexed,
            self.ffr_payload,
        );
        for input in &self.inputs {
            text.push('|');
            text.push_str(&input.name);
        }
        // FNV-1a: stable across builds and platforms.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h
    }
}

/// Rank `rank`'s share of `n` items split into `world` contiguous ranges,
/// the first `n % world` one longer.
pub(crate) fn balanced_range(n: u64, world: u64, rank: u64) -> std::ops::Range<u64> {
    let base = n / world;
    let extra = n % world;
    let start = rank * base + rank.min(extra);
    start..start + base + u64::from(rank < extra)
}
