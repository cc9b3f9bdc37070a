//! What the loader measured.

use std::time::Duration;

use crate::autotune::CostModel;

/// The loader's measurements since it was built (or restored), from
/// [`Loader::stats`](crate::Loader::stats).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Records yielded.
    pub records: u64,
    /// Batches yielded.
    pub batches: u64,
    /// Bytes read from the files (as stored: compressed bytes for
    /// compressed data).
    pub bytes: u64,
    /// Time since the first batch was asked for.
    pub elapsed: Duration,
    /// Time the consumer waited for the prefetch thread (I/O bound when
    /// large).
    pub io_wait: Duration,
    /// Time spent decoding batches (decompressing Avro blocks, parsing on
    /// the parse threads, joining their parts, finishing).
    pub decode: Duration,
    /// Time the prefetch thread spent reading (I/O, framing, checks,
    /// decompressing TFRecord streams), in parallel with decoding.
    pub read: Duration,
    /// Batches decoded with `t` threads, at index `t - 1`.
    pub threads_used: Vec<u64>,
    /// The thread count of the last batch.
    pub last_threads: usize,
    /// The most bytes the prefetch queue held at once.
    pub prefetch_peak_bytes: u64,
    /// The prefetch queue's byte budget.
    pub prefetch_budget: u64,
    /// The cost model as calibrated so far.
    pub model: CostModel,
}

impl Stats {
    /// Records per second of elapsed time.
    pub fn records_per_s(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Bytes (as stored) per second of elapsed time.
    pub fn bytes_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The mean thread count per batch.
    pub fn mean_threads(&self) -> f64 {
        let batches: u64 = self.threads_used.iter().sum();
        let weighted: u64 = self
            .threads_used
            .iter()
            .enumerate()
            .map(|(i, &n)| (i as u64 + 1) * n)
            .sum();
        weighted as f64 / batches.max(1) as f64
    }
}
