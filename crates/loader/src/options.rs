//! The loader's options and their resolved form.

use std::sync::Arc;

use grist_tensor::{Format, Input, ReadOptions};

use crate::rng::{self, Purpose};

/// How many threads parse each batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threads {
    /// Exactly this many (at least 1).
    Fixed(usize),
    /// Chosen per batch by a cost model calibrated online from measured
    /// decode times, up to the number of CPU cores.
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

/// Everything the loader's threads need to know, resolved.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) format: Arc<dyn Format>,
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
            "{:?}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
            self.format,
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
        );
        for input in &self.inputs {
            text.push('|');
            text.push_str(input.name());
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
