//! The prefetch thread: reads the epoch's chunks (or, with random access,
//! each batch's records) ahead of the parse threads, into the byte-bounded
//! queue.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use grist_tensor::{ByNumber, ChunkPos, Gathered};

use crate::error::{Error, Result};
use crate::options::{Config, balanced_range};
use crate::prefetch::{Cancelled, Queue};
use crate::rng::{self, Permutation, Purpose};
use crate::state::Resume;
use crate::stream::{Chunker, Counted, Interleave, RawChunk, StreamCursor, chunk_counts};

/// What the prefetch thread hands the consumer.
#[derive(Debug)]
pub(crate) enum Item {
    /// An epoch begins; with equal batch counts, the most batches it may
    /// yield.
    EpochStart {
        epoch: u64,
        max_batches: Option<u64>,
    },
    /// A chunk of the stream.
    Chunk(Box<StreamChunk>),
    /// The records of one batch, read by number.
    Gathered(Gathered),
    /// The epoch's records are all handed out.
    EpochEnd,
    /// Reading failed; nothing follows.
    Error(Error),
}

/// A chunk of the stream and what the consumer keeps of its provenance.
#[derive(Debug)]
pub(crate) struct StreamChunk {
    pub(crate) raw: RawChunk,
    /// The input it came from.
    pub(crate) input: usize,
    /// The stream's cursor just after it (`None` for chunks re-read to
    /// restore a saved shuffle buffer).
    pub(crate) cursor: Option<StreamCursor>,
    /// For a re-read chunk: how much of it was used already.
    pub(crate) resume: Option<crate::state::BufferedState>,
}

/// Where the prefetch thread starts.
#[derive(Clone, Debug)]
pub(crate) struct Start {
    pub(crate) epoch: u64,
    pub(crate) resume: Resume,
}

/// Counters the prefetch thread keeps for the stats.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Nanoseconds spent reading (I/O, framing, checks).
    pub(crate) read_nanos: AtomicU64,
}

/// The running prefetch thread.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) queue: Arc<Queue<Item>>,
    pub(crate) counters: Arc<Counters>,
    handle: Option<JoinHandle<()>>,
}

impl Running {
    pub(crate) fn spawn(config: Arc<Config>, start: Start) -> Result<Self> {
        let queue = Arc::new(Queue::new(config.prefetch_bytes));
        let counters = Arc::new(Counters::default());
        let handle = {
            let queue = queue.clone();
            let counters = counters.clone();
            std::thread::Builder::new()
                .name("grist-prefetch".into())
                .spawn(move || {
                    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let mut p = Producer {
                            config,
                            queue: &queue,
                            counters: &counters,
                            gather: None,
                            counts: HashMap::new(),
                            produced: false,
                        };
                        p.run(start)
                    }));
                    let error = match run {
                        Ok(Ok(())) | Ok(Err(Stop::Cancelled)) => None,
                        Ok(Err(Stop::Failed(e))) => Some(*e),
                        Err(panic) => Some(Error::ThreadPanicked {
                            thread: "prefetch",
                            message: panic_message(&*panic),
                        }),
                    };
                    if let Some(e) = error {
                        let _ = queue.push(Item::Error(e), 0);
                    }
                    queue.finish();
                })
                .map_err(|e| Error::io(&Arc::from("grist-prefetch thread"), e))?
        };
        Ok(Running {
            queue,
            counters,
            handle: Some(handle),
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.queue.cancel();
        if let Some(h) = self.handle.take() {
            // The thread's panics are caught inside it.
            let _ = h.join();
        }
    }
}

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".into()
    }
}

/// Why the producer stopped early.
enum Stop {
    Cancelled,
    Failed(Box<Error>),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(Box::new(e))
    }
}

impl From<grist_tensor::BoxError> for Stop {
    fn from(e: grist_tensor::BoxError) -> Self {
        Stop::Failed(Box::new(Error::Format(e)))
    }
}

impl From<Cancelled> for Stop {
    fn from(_: Cancelled) -> Self {
        Stop::Cancelled
    }
}

struct Producer<'q> {
    config: Arc<Config>,
    queue: &'q Queue<Item>,
    counters: &'q Counters,
    gather: Option<Box<dyn ByNumber>>,
    /// Chunk record counts per input (stream mode, equal batch counts).
    counts: HashMap<usize, Vec<u64>>,
    /// Whether this epoch handed out any records yet.
    produced: bool,
}

impl Producer<'_> {
    fn run(&mut self, start: Start) -> Result<(), Stop> {
        let mut epoch = start.epoch;
        let mut resume = start.resume;
        loop {
            if self.config.epochs.is_some_and(|n| epoch >= n) {
                return Ok(());
            }
            if self.config.indexed {
                let first = match resume {
                    Resume::Indexed { batch } => batch,
                    _ => 0,
                };
                self.indexed_epoch(epoch, first)?;
            } else {
                self.stream_epoch(epoch, resume)?;
            }
            if self.config.epochs.is_none() && !self.produced {
                // An endless run over input that gives this rank nothing
                // would loop forever: it ends here.
                return Ok(());
            }
            self.produced = false;
            epoch += 1;
            resume = Resume::Fresh;
        }
    }

    fn push(&mut self, item: Item, bytes: u64) -> Result<(), Cancelled> {
        if matches!(item, Item::Chunk(_) | Item::Gathered(_)) {
            self.produced = true;
        }
        self.queue.push(item, bytes)
    }

    fn timed<T>(&self, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.counters
            .read_nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    // -- streams --

    fn stream_epoch(&mut self, epoch: u64, resume: Resume) -> Result<(), Stop> {
        let config = self.config.clone();
        let files = config.files_of(epoch, config.rank);
        let max_batches = if config.equal_batches {
            Some(self.stream_cap(epoch)?)
        } else {
            None
        };
        self.push(Item::EpochStart { epoch, max_batches }, 0)?;
        let (cursor, ended) = match resume {
            Resume::Stream {
                cursor,
                ended,
                buffer,
            } => {
                // The chunks of the saved shuffle buffer, read again one
                // by one.
                for b in buffer {
                    let input = &config.inputs[b.input];
                    let raw = self.timed(|| -> Result<Option<RawChunk>> {
                        Chunker::open(&*config.format, &config.read, input, b.pos)?.next()
                    })?;
                    let raw = raw.ok_or_else(|| Error::StateMismatch {
                        reason: format!(
                            "{}: no chunk at record {} (the file changed?)",
                            input.name(),
                            b.pos.record
                        ),
                    })?;
                    let bytes = raw.chunk.data.len() as u64;
                    let item = StreamChunk {
                        raw,
                        input: b.input,
                        cursor: None,
                        resume: Some(b),
                    };
                    self.push(Item::Chunk(Box::new(item)), bytes)?;
                }
                if let Some(c) = &cursor {
                    c.check(files.len(), config.cycle_length)
                        .map_err(|reason| Error::StateMismatch { reason })?;
                }
                (cursor, ended)
            }
            _ => (None, false),
        };
        if !ended {
            let cursor =
                cursor.unwrap_or_else(|| StreamCursor::start(files.len(), config.cycle_length));
            let mut stream: Interleave<Chunker> = Interleave::new(cursor);
            loop {
                let next = self.timed(|| {
                    stream.next(files.len(), &mut |f, pos| {
                        Chunker::open(&*config.format, &config.read, &config.inputs[files[f]], pos)
                    })
                })?;
                let Some((raw, f, global)) = next else {
                    break;
                };
                if !config.owns_chunk(global) || raw.chunk.record_count == 0 {
                    continue;
                }
                let bytes = raw.chunk.data.len() as u64;
                let item = StreamChunk {
                    raw,
                    input: files[f],
                    cursor: Some(stream.cursor.clone()),
                    resume: None,
                };
                self.push(Item::Chunk(Box::new(item)), bytes)?;
            }
        }
        self.push(Item::EpochEnd, 0)?;
        Ok(())
    }

    /// The fewest batches any rank's stream makes in `epoch`.
    fn stream_cap(&mut self, epoch: u64) -> Result<u64> {
        let config = self.config.clone();
        for i in 0..config.inputs.len() {
            if !self.counts.contains_key(&i) {
                let c =
                    self.timed(|| chunk_counts(&*config.format, &config.read, &config.inputs[i]))?;
                self.counts.insert(i, c);
            }
        }
        let world = config.world.max(1);
        if !config.by_file {
            // Chunks are dealt to the ranks in turn: with more ranks than
            // chunks, some rank gets none (and no count per rank is kept
            // for ranks that cannot have any).
            let chunks: usize = self.counts.values().map(Vec::len).sum();
            if world > chunks {
                return Ok(0);
            }
        }
        let mut totals = vec![0u64; world];
        if config.by_file {
            for (r, total) in totals.iter_mut().enumerate() {
                for f in config.files_of(epoch, r) {
                    *total += self.counts[&f].iter().sum::<u64>();
                }
            }
        } else {
            let files = config.file_order(epoch);
            let mut sim: Interleave<Counted<'_>> =
                Interleave::new(StreamCursor::start(files.len(), config.cycle_length));
            let counts = &self.counts;
            while let Some((n, _, global)) = sim.next(files.len(), &mut |f, pos: ChunkPos| {
                Ok(Counted::new(&counts[&files[f]], pos))
            })? {
                totals[(global % world as u64) as usize] += n;
            }
        }
        Ok(totals
            .into_iter()
            .map(|t| config.batches(t))
            .min()
            .unwrap_or(0))
    }

    // -- random access --

    fn indexed_epoch(&mut self, epoch: u64, first_batch: u64) -> Result<(), Stop> {
        let config = self.config.clone();
        if self.gather.is_none() {
            let g = self.timed(|| config.format.by_number(&config.inputs, &config.read))?;
            self.gather = Some(g);
        }
        let gather = self.gather.as_ref().expect("opened above");
        let counts = gather.counts();
        let order = Order::new(&config, epoch, config.rank, &counts);
        let mut batches = config.batches(order.len);
        let max_batches = if config.equal_batches {
            let fewest = if config.by_file {
                // No more ranks than files (checked when built).
                (0..config.world.max(1))
                    .map(|r| config.batches(Order::new(&config, epoch, r, &counts).len))
                    .min()
                    .unwrap_or(0)
            } else {
                // Ranks share the records evenly: the fewest are the
                // floor of the share (not a loop over the ranks, which
                // may be many).
                let total = counts.iter().fold(0u64, |a, &c| a.saturating_add(c));
                config.batches(total / config.world.max(1) as u64)
            };
            batches = batches.min(fewest);
            Some(fewest)
        } else {
            None
        };
        self.push(Item::EpochStart { epoch, max_batches }, 0)?;
        let depth = self.fetch_depth();
        if depth > 1 {
            self.fetch_ahead(&order, first_batch..batches, depth)?;
        } else {
            let b = config.batch_size as u64;
            let mut wants = Vec::with_capacity(
                config
                    .batch_size
                    .min(usize::try_from(order.len).unwrap_or(0)),
            );
            for batch in first_batch..batches {
                wants.clear();
                let end = ((batch + 1) * b).min(order.len);
                wants.extend((batch * b..end).map(|i| order.get(i)));
                let gather = self.gather.as_ref().expect("opened above");
                let g = self.timed(|| gather.read(&wants, config.read.defers_checks()))?;
                let bytes = g.bytes;
                self.push(Item::Gathered(g), bytes)?;
            }
        }
        self.push(Item::EpochEnd, 0)?;
        Ok(())
    }

    /// How many batches of records read by number are fetched at once:
    /// one from local files (a read call is short; more threads would
    /// only compete with the parse threads), several from object stores,
    /// whose requests wait on the network.
    fn fetch_depth(&self) -> usize {
        if self.config.inputs.iter().any(|i| i.address().is_remote()) {
            REMOTE_FETCH_DEPTH
        } else {
            1
        }
    }

    /// The batches `batches` of `order`, fetched `depth` at a time by as
    /// many threads and pushed in order: the requests of several batches
    /// are in flight at once, so the round trips of an object store
    /// overlap. The fetched batches waiting for their turn are bounded by
    /// `depth`, on top of the prefetch budget.
    fn fetch_ahead(
        &mut self,
        order: &Order,
        batches: std::ops::Range<u64>,
        depth: usize,
    ) -> Result<(), Stop> {
        let config = self.config.clone();
        // Held here while the fetchers borrow it (put back below).
        let held = self.gather.take().expect("opened above");
        let gather = &*held;
        let next = std::sync::atomic::AtomicU64::new(batches.start);
        let b = config.batch_size as u64;
        let (sender, receiver) = std::sync::mpsc::sync_channel(depth);
        let result = std::thread::scope(|scope| -> Result<(), Stop> {
            for _ in 0..depth {
                let (sender, next, config) = (sender.clone(), &next, &config);
                scope.spawn(move || {
                    let mut wants = Vec::new();
                    loop {
                        let batch = next.fetch_add(1, Ordering::Relaxed);
                        if batch >= batches.end {
                            return;
                        }
                        wants.clear();
                        let end = ((batch + 1) * b).min(order.len);
                        wants.extend((batch * b..end).map(|i| order.get(i)));
                        let t = Instant::now();
                        let g = gather.read(&wants, config.read.defers_checks());
                        let nanos = t.elapsed().as_nanos() as u64;
                        // The receiver gone: the epoch was stopped.
                        if sender.send((batch, g, nanos)).is_err() {
                            return;
                        }
                    }
                });
            }
            drop(sender);
            // Owned here: dropped when this closure returns, early too,
            // so that fetchers blocked on a full channel end before the
            // scope waits for them.
            let receiver = receiver;
            let mut waiting = std::collections::BTreeMap::new();
            let mut turn = batches.start;
            while turn < batches.end {
                let Ok((batch, g, nanos)) = receiver.recv() else {
                    break;
                };
                // Time waited on the network, spread over the fetchers.
                self.counters
                    .read_nanos
                    .fetch_add(nanos / depth as u64, Ordering::Relaxed);
                waiting.insert(batch, g);
                while let Some(g) = waiting.remove(&turn) {
                    turn += 1;
                    let g = g?;
                    let bytes = g.bytes;
                    self.push(Item::Gathered(g), bytes)?;
                }
            }
            Ok(())
        });
        // The fetchers saw the receiver gone and ended (the scope joined
        // them); an error or a cancellation is passed on.
        self.gather = Some(held);
        result
    }
}

/// How many batches of records read by number from object stores are
/// fetched at once.
const REMOTE_FETCH_DEPTH: usize = 8;

/// The order in which one rank reads records by number in one epoch.
struct Order {
    len: u64,
    /// The rank's share starts here in the permuted sequence.
    offset: u64,
    permutation: Option<Permutation>,
    /// Inputs of the sequence and where each starts in it.
    files: Vec<usize>,
    starts: Vec<u64>,
}

impl Order {
    fn new(config: &Config, epoch: u64, rank: usize, counts: &[u64]) -> Self {
        let files = if config.by_file {
            config.files_of(epoch, rank)
        } else {
            (0..counts.len()).collect()
        };
        let mut starts = Vec::with_capacity(files.len());
        let mut total = 0u64;
        for &f in &files {
            starts.push(total);
            total += counts[f];
        }
        let (offset, len) = if config.by_file || config.world <= 1 {
            (0, total)
        } else {
            let r = balanced_range(total, config.world as u64, rank as u64);
            (r.start, r.end - r.start)
        };
        let permutation = config.shuffle.then(|| {
            // Sharding by record: every rank permutes all records the same
            // way and takes its range; by file: each rank its own files.
            let key = if config.by_file { rank as u64 } else { 0 };
            let mut rng = rng::stream(
                config.seed,
                Purpose::Permutation,
                config.shuffle_epoch(epoch),
                key,
            );
            Permutation::new(total, &mut rng)
        });
        Order {
            len,
            offset,
            permutation,
            files,
            starts,
        }
    }

    /// The `i`-th record (input, record number) of the rank's epoch.
    fn get(&self, i: u64) -> (usize, u64) {
        let p = self.offset + i;
        let g = self.permutation.as_ref().map_or(p, |perm| perm.get(p));
        let k = self.starts.partition_point(|&s| s <= g) - 1;
        (self.files[k], g - self.starts[k])
    }
}
