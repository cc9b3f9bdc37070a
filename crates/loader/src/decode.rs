//! The parallel decoding of one batch: the loader's thread decodes the
//! head of the batch straight into it, then it and the parse threads take
//! the other rows in units, each into a builder of its own, joined in
//! order. A chunk's deferred work (inflating, checking) is done by the
//! thread that decodes it, through the format's decoder.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use grist_tensor::{BatchBuilder, Chunk, Decoder, Input, Limits, Record, RecordLayout};

use crate::autotune::{PartTiming, Piece, Plan, Shares, WorkItem};
use crate::error::{Error, Result};
use crate::producer::panic_message;

/// Where the rows of one work item come from.
#[derive(Debug)]
pub(crate) enum Source<'a> {
    /// Rows of a buffered chunk, from row `first` of its data on (its
    /// deferred work, if any, still to do).
    Chunk { chunk: &'a Chunk, first: usize },
    /// Records read by number.
    Records(&'a [Record]),
}

/// One item of a batch's work.
#[derive(Debug)]
pub(crate) struct Work<'a> {
    pub(crate) source: Source<'a>,
    pub(crate) item: WorkItem,
}

/// What decoding a piece of a chunk left to remember.
#[derive(Debug, Default)]
pub(crate) struct PieceOut {
    pub(crate) item: usize,
    /// The chunk's data, decompressed.
    pub(crate) inflated: Option<Bytes>,
    /// Where the row after the piece starts in the (decompressed) data.
    pub(crate) end: Option<usize>,
}

/// What decoding a batch produced besides its rows.
#[derive(Debug, Default)]
pub(crate) struct BatchOut {
    pub(crate) pieces: Vec<PieceOut>,
    pub(crate) timings: Vec<PartTiming>,
    /// Seconds from the first part's start to the last part appended.
    pub(crate) wall: f64,
    /// The planned longest part's share of the batch's modelled cost (1
    /// when one thread decoded it all).
    pub(crate) longest_share: f64,
}

/// The context every part needs.
pub(crate) struct Ctx<'a> {
    pub(crate) work: &'a [Work<'a>],
    pub(crate) inputs: &'a [Input],
    pub(crate) limits: &'a Limits,
}

/// The parse threads beside the loader's own: a rayon pool whose threads
/// have all ended (their thread-locals dropped) when it has been dropped.
/// (A dropped rayon pool lets its threads exit after the drop returns: a
/// program that builds and drops loaders in a loop would have threads of
/// old loaders still running, and leak checkers report their memory.)
pub(crate) struct ParsePool {
    pool: Option<rayon::ThreadPool>,
    /// The threads, spawned by us so that they can be joined.
    handles: Arc<Mutex<Vec<std::thread::JoinHandle<()>>>>,
}

impl ParsePool {
    /// `threads` threads named `grist-parse-1`, `grist-parse-2`, ...
    pub(crate) fn new(threads: usize) -> Result<Self> {
        let handles = Arc::new(Mutex::new(Vec::with_capacity(threads)));
        let spawned = handles.clone();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("grist-parse-{}", i + 1))
            .spawn_handler(move |thread| {
                let mut b = std::thread::Builder::new();
                if let Some(name) = thread.name() {
                    b = b.name(name.to_owned());
                }
                if let Some(size) = thread.stack_size() {
                    b = b.stack_size(size);
                }
                let handle = b.spawn(|| thread.run())?;
                spawned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(handle);
                Ok(())
            })
            .build()
            .map_err(|e| Error::io(&Arc::from("grist-parse threads"), std::io::Error::other(e)))?;
        Ok(ParsePool {
            pool: Some(pool),
            handles,
        })
    }

    /// The pool.
    pub(crate) fn get(&self) -> &rayon::ThreadPool {
        self.pool.as_ref().expect("the pool lives until dropped")
    }
}

impl std::fmt::Debug for ParsePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParsePool").finish_non_exhaustive()
    }
}

impl Drop for ParsePool {
    fn drop(&mut self) {
        // Dropping the pool tells its threads to exit once their queues
        // are empty; every job the loader gives them ends within the
        // batch that gave it, so the joins return.
        drop(self.pool.take());
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(|e| e.into_inner()));
        for h in handles {
            // A job's panic is caught by rayon and reported to the batch.
            let _ = h.join();
        }
    }
}

/// Decodes `plan`'s rows of `ctx.work` into `out`: with one thread, on
/// this thread; with several, as `shares` shares them ([`Shares`]): this
/// thread decodes the head into `out`, then it and `plan.threads - 1`
/// threads of `pool` take the units in order, each into a builder of its
/// own, and the units are appended to `out` in order. On error, the first
/// error in row order.
///
/// `parts` holds the units' builders, kept between batches: each is left
/// empty (with its memory) when appended to `out`.
pub(crate) fn decode_batch(
    pool: Option<&rayon::ThreadPool>,
    decoders: &mut [Box<dyn Decoder>],
    parts: &mut Vec<BatchBuilder>,
    ctx: &Ctx<'_>,
    plan: &Plan,
    shares: &Shares,
    out: &mut BatchBuilder,
) -> Result<BatchOut> {
    let start = Instant::now();
    let mut result = BatchOut::default();
    let threads = plan.threads.min(decoders.len());
    let (first, rest) = decoders
        .split_first_mut()
        .expect("the loader has a decoder per thread");
    match pool {
        Some(pool) if threads > 1 && !shares.units.is_empty() => {
            let units = &shares.units;
            while parts.len() < units.len() {
                parts.push(first.new_batch(0));
            }
            // Each unit writes its rows' batch numbers into its sparse
            // indices, so appending it is a plain copy.
            let mut base = out.rows() + rows_of(&shares.head);
            for (part, unit) in parts.iter_mut().zip(units) {
                part.set_row_base(base);
                base += rows_of(unit);
            }
            let cells: Vec<UnitCell<'_>> = parts
                .iter_mut()
                .take(units.len())
                .map(|b| Mutex::new((b, None)))
                .collect();
            let next = AtomicUsize::new(0);
            let shared = Shared {
                ctx,
                units,
                cells: &cells,
                next: &next,
            };
            let mut timings: Vec<Option<PartTiming>> = vec![None; threads - 1];
            let head = pool.in_place_scope(|s| {
                for (decoder, timing) in rest.iter_mut().zip(timings.iter_mut()) {
                    let shared = &shared;
                    s.spawn(move |_| {
                        *timing = Some(shared.take_units(decoder, PartTiming::default()))
                    });
                }
                match guarded(|| decode_part(first, ctx, &shares.head, out)) {
                    Ok((pieces, t)) => Ok((pieces, shared.take_units(first, t))),
                    Err(e) => {
                        next.store(units.len(), Ordering::Relaxed);
                        Err(e)
                    }
                }
            });
            let (pieces, timing) = head?;
            result.pieces.extend(pieces);
            result.timings.push(timing);
            let mut decoded = Vec::with_capacity(cells.len());
            for cell in cells {
                let (b, done) = cell.into_inner().unwrap_or_else(|e| e.into_inner());
                // Units after a failed one may not have been taken: the
                // failed one comes first.
                let pieces = done.unwrap_or_else(|| {
                    Err(Error::ThreadPanicked {
                        thread: "parse",
                        message: "a unit was not decoded".into(),
                    })
                })?;
                decoded.push(b);
                result.pieces.extend(pieces);
            }
            // The units' columns are copied into the batch by this thread
            // and a pool thread, half each, when there are enough of them
            // to be worth waking the thread for.
            let copy = guarded(|| {
                out.append_all_from(&mut decoded, |bytes, a, b| {
                    if bytes < PARALLEL_COPY_FROM {
                        a();
                        b();
                    } else {
                        pool.in_place_scope(|s| {
                            s.spawn(|_| b());
                            a();
                        })
                    }
                });
                Ok(())
            });
            copy?;
            result
                .timings
                .extend(timings.into_iter().map(|t| t.unwrap_or_default()));
            result.longest_share = shares.longest_share;
        }
        _ => {
            let mut total = PartTiming::default();
            for part in &plan.parts {
                let (pieces, timing) = guarded(|| decode_part(first, ctx, part, out))?;
                result.pieces.extend(pieces);
                // Measured as one part: one thread did it all.
                total.add(&timing);
            }
            result.timings.push(total);
            // One thread decoded the plan's parts one after another.
            result.longest_share = 1.0;
        }
    }
    result.wall = start.elapsed().as_secs_f64();
    Ok(result)
}

/// The bytes of decoded units from which a pool thread copies half of
/// them into the batch: below, waking it costs more than the copy.
const PARALLEL_COPY_FROM: usize = 256 << 10;

/// The rows of `pieces`.
fn rows_of(pieces: &[Piece]) -> usize {
    pieces
        .iter()
        .map(|p| (p.rows.end - p.rows.start) as usize)
        .sum()
}

/// A unit's builder and what decoding it gave.
type UnitCell<'b> = Mutex<(&'b mut BatchBuilder, Option<Result<Vec<PieceOut>>>)>;

/// The units of a shared batch and who has taken which.
struct Shared<'s, 'a, 'b> {
    ctx: &'s Ctx<'a>,
    units: &'s [Vec<Piece>],
    cells: &'s [UnitCell<'b>],
    /// The next unit to take; past the end after a failure, so that no
    /// unit after it is started.
    next: &'s AtomicUsize,
}

impl Shared<'_, '_, '_> {
    /// Takes units in order until there are none left, decoding each into
    /// its cell; returns `timing` with this thread's units added.
    fn take_units(&self, decoder: &mut Box<dyn Decoder>, mut timing: PartTiming) -> PartTiming {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let (Some(unit), Some(cell)) = (self.units.get(i), self.cells.get(i)) else {
                return timing;
            };
            let mut cell = cell.lock().unwrap_or_else(|e| e.into_inner());
            let (b, done) = &mut *cell;
            let r = guarded(|| decode_part(decoder, self.ctx, unit, b));
            *done = Some(r.map(|(pieces, t)| {
                timing.add(&t);
                pieces
            }));
            if matches!(done, Some(Err(_))) {
                self.next.store(self.units.len(), Ordering::Relaxed);
            }
        }
    }
}

/// Runs `f`, turning a panic (a bug) into an error.
fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        Err(Error::ThreadPanicked {
            thread: "parse",
            message: panic_message(&*panic),
        })
    })
}

/// The longest piece [`short_piece_bytes`] gives: longer runs of records
/// are read as a stream, which the hardware fetches ahead on its own.
const PREFETCH_PIECE_MAX: usize = 32 << 10;

/// The bytes that a short piece of a chunk (a few rows that a shuffled
/// batch takes from a buffered chunk) decodes: exactly for framed chunks,
/// the rows' share of the data for Avro blocks, whose records are found by
/// decoding. Prefetching them a few pieces ahead lets a batch drawn from
/// hundreds of chunks find each piece in cache instead of waiting for
/// memory at every piece's first bytes. `None` for compressed chunks,
/// records read by number (prefetched record by record) and long pieces.
fn short_piece_bytes<'a>(ctx: &Ctx<'a>, piece: &Piece) -> Option<&'a [u8]> {
    let Source::Chunk { chunk, first } = &ctx.work[piece.item].source else {
        return None;
    };
    if chunk.deferred.inflate {
        return None;
    }
    let rows = first + piece.rows.start as usize..first + piece.rows.end as usize;
    let range = match &chunk.layout {
        RecordLayout::Spans(spans) => {
            spans.get(rows.start)?.start..spans.get(rows.end.checked_sub(1)?)?.end
        }
        RecordLayout::Sequential => {
            let per_record = chunk.data.len() / chunk.record_count.max(1);
            let start = rows.start.saturating_mul(per_record);
            start..start.saturating_add((rows.end - rows.start).saturating_mul(per_record))
        }
    };
    let bytes = chunk
        .data
        .get(range.start..range.end.min(chunk.data.len()))?;
    (bytes.len() <= PREFETCH_PIECE_MAX).then_some(bytes)
}

/// The compressed chunk of piece `k` of `part`, inflated. When the format
/// inflates two chunks faster together (Avro deflate blocks: two streams
/// in one loop), it is inflated together with the next compressed piece's
/// chunk of the part that it pairs with, whose result (data or error)
/// waits in `ahead` until its turn. A shuffled batch takes a few rows of
/// hundreds of blocks, mostly inflated by earlier batches, so the next
/// block to inflate may be many pieces on; the searches never overlap (the
/// one from `k` stops at its partner, which searches no further), so a
/// part costs one pass over its pieces.
fn inflate_piece(
    decoder: &dyn Decoder,
    ctx: &Ctx<'_>,
    part: &[Piece],
    k: usize,
    chunk: &Chunk,
    ahead: &mut Option<(usize, Result<Bytes>)>,
) -> Result<Bytes> {
    if let Some((_, data)) = ahead.take_if(|(j, _)| *j == k) {
        return data;
    }
    let next = part
        .iter()
        .enumerate()
        .skip(k + 1)
        .find_map(|(j, p)| match &ctx.work[p.item].source {
            Source::Chunk { chunk: other, .. } if other.deferred.inflate => Some((j, *other)),
            _ => None,
        })
        .filter(|(_, other)| decoder.inflates_together(chunk, other));
    let Some((j, other)) = next else {
        return Ok(decoder.inflate(chunk, ctx.limits)?);
    };
    let [data, later] = decoder.inflate_two(chunk, other, ctx.limits);
    *ahead = Some((j, later.map_err(Error::from)));
    Ok(data?)
}

/// Decodes one part's pieces into `out`, in order.
fn decode_part(
    decoder: &mut Box<dyn Decoder>,
    ctx: &Ctx<'_>,
    part: &[Piece],
    out: &mut BatchBuilder,
) -> Result<(Vec<PieceOut>, PartTiming)> {
    let start = Instant::now();
    let mut pieces = Vec::new();
    let mut timing = PartTiming {
        records: 0,
        inflate_bytes: 0,
        seconds: 0.0,
    };
    let mut ahead = None;
    for (k, piece) in part.iter().enumerate() {
        grist_tensor::prefetch_ahead(k, |i| {
            part.get(i)
                .map(|p| short_piece_bytes(ctx, p).unwrap_or_default())
        });
        let work = &ctx.work[piece.item];
        let rows = piece.rows.start as usize..piece.rows.end as usize;
        timing.records += (rows.end - rows.start) as u64;
        match &work.source {
            Source::Chunk { chunk, first } => {
                let rows = first + rows.start..first + rows.end;
                if chunk.deferred.verify {
                    decoder.verify(chunk, rows.clone())?;
                }
                let mut out_piece = PieceOut {
                    item: piece.item,
                    ..PieceOut::default()
                };
                out_piece.end = if chunk.deferred.inflate {
                    // Into a pooled buffer, back to its pool when the last
                    // row of the block has been decoded.
                    let data = inflate_piece(&**decoder, ctx, part, k, chunk, &mut ahead)?;
                    timing.inflate_bytes += chunk.data.len() as u64;
                    let mut inflated = (*chunk).clone();
                    inflated.data = data.clone();
                    inflated.deferred.inflate = false;
                    out_piece.inflated = Some(data);
                    decoder.decode_chunk(&inflated, rows, out)?
                } else {
                    decoder.decode_chunk(chunk, rows, out)?
                };
                pieces.push(out_piece);
            }
            Source::Records(records) => {
                let records = &records[rows];
                for (k, r) in records.iter().enumerate() {
                    // Mapped records come in from memory while the ones
                    // before them are checked and parsed, not one by one
                    // as the work reaches them.
                    grist_tensor::prefetch_ahead(k, |i| records.get(i).map(|r| &r.payload[..]));
                    let file = ctx.inputs[r.input].name();
                    if r.check.is_some() {
                        decoder.verify_record(file, r)?;
                    }
                    decoder.decode_record(file, r, out)?;
                }
            }
        }
    }
    timing.seconds = start.elapsed().as_secs_f64();
    Ok((pieces, timing))
}

#[cfg(test)]
mod tests {
    use super::*;

    static DROPPED: AtomicUsize = AtomicUsize::new(0);

    /// A thread-local that counts its drops: it is dropped when its
    /// thread ends.
    struct Counted;

    impl Drop for Counted {
        fn drop(&mut self) {
            DROPPED.fetch_add(1, Ordering::SeqCst);
        }
    }

    thread_local! {
        static LOCAL: std::cell::RefCell<Option<Counted>> = const { std::cell::RefCell::new(None) };
    }

    #[test]
    fn no_parse_thread_outlives_its_pool() {
        for threads in [1, 3] {
            for _ in 0..20 {
                let pool = ParsePool::new(threads).unwrap();
                let names = pool.get().broadcast(|_| {
                    LOCAL.with(|l| *l.borrow_mut() = Some(Counted));
                    std::thread::current().name().map(str::to_owned)
                });
                let want: Vec<Option<String>> = (1..=threads)
                    .map(|i| Some(format!("grist-parse-{i}")))
                    .collect();
                assert_eq!(names, want);
                let before = DROPPED.load(Ordering::SeqCst);
                drop(pool);
                // Every thread has ended: its thread-locals are dropped.
                assert_eq!(DROPPED.load(Ordering::SeqCst) - before, threads);
            }
        }
    }
}
