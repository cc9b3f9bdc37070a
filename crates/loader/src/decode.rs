//! The per-format glue (one decoder type for the four formats) and the
//! parallel decoding of one batch: the loader's thread decodes the head of
//! the batch straight into it, then it and the parse threads take the
//! other rows in units, each into a builder of its own, joined in order.

use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use grist_avro_tensor::{AvroDecoder, Codec};
use grist_ffrecord::PayloadDecoder;
use grist_ofrecord::OfRecordDecoder;
use grist_tensor::{BatchBuilder, Chunk, Decoder as _, Limits, RecordLayout, SpecFile};
use grist_tfrecord::ExampleDecoder;

use crate::autotune::{PartTiming, Piece, Plan, Shares, WorkItem};
use crate::error::{Error, Result};
use crate::files::{Format, Input};
use crate::gather::Record;
use crate::options::FfrPayload;
use crate::producer::panic_message;

/// The decoder of the loader's format.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum AnyDecoder {
    Tfrecord(ExampleDecoder),
    Avro(AvroDecoder),
    Ffrecord(PayloadDecoder),
    Ofrecord(OfRecordDecoder),
}

impl AnyDecoder {
    /// The decoder of `spec` for `format` (refusing, by feature, what the
    /// format cannot decode).
    pub(crate) fn new(
        format: Format,
        spec: &SpecFile,
        payload: FfrPayload,
        limits: Limits,
    ) -> Result<Self> {
        let no_sequence = |format: Format| {
            if spec.sequence {
                Err(Error::Unsupported {
                    format: format.name(),
                    what: "context/sequence features are for tf.SequenceExample records".into(),
                })
            } else {
                Ok(())
            }
        };
        Ok(match format {
            Format::Tfrecord => {
                AnyDecoder::Tfrecord(ExampleDecoder::from_spec_file(spec)?.with_limits(limits))
            }
            Format::Avro => {
                no_sequence(format)?;
                AnyDecoder::Avro(AvroDecoder::new(&spec.features)?.with_limits(limits))
            }
            Format::Ffrecord => AnyDecoder::Ffrecord(match payload {
                FfrPayload::Example => PayloadDecoder::Example(
                    ExampleDecoder::from_spec_file(spec)?.with_limits(limits),
                ),
                FfrPayload::OfRecord => {
                    no_sequence(format)?;
                    PayloadDecoder::OfRecord(
                        OfRecordDecoder::new(&spec.features)?.with_limits(limits),
                    )
                }
                FfrPayload::Raw => {
                    no_sequence(format)?;
                    match &spec.features[..] {
                        [one] => PayloadDecoder::raw(one)?,
                        other => {
                            return Err(Error::Unsupported {
                                format: format.name(),
                                what: format!(
                                    "a raw tensor sample decodes into one dense feature, \
                                     not {}",
                                    other.len()
                                ),
                            });
                        }
                    }
                }
            }),
            Format::Ofrecord => {
                no_sequence(format)?;
                AnyDecoder::Ofrecord(OfRecordDecoder::new(&spec.features)?.with_limits(limits))
            }
        })
    }

    /// An empty builder for `rows` rows.
    pub(crate) fn new_batch(&self, rows: usize) -> BatchBuilder {
        match self {
            AnyDecoder::Tfrecord(d) => d.new_batch(rows),
            AnyDecoder::Avro(d) => d.new_batch(rows),
            AnyDecoder::Ffrecord(d) => d.new_batch(rows),
            AnyDecoder::Ofrecord(d) => d.new_batch(rows),
        }
    }

    /// Registers an Avro file's writer schema.
    pub(crate) fn add_schema(&mut self, file: &Arc<str>, schema_json: &str) -> Result<()> {
        if let AnyDecoder::Avro(d) = self {
            d.add_schema(file.clone(), schema_json)?;
        }
        Ok(())
    }

    fn decode_chunk(
        &mut self,
        chunk: &Chunk,
        rows: Range<usize>,
        out: &mut BatchBuilder,
    ) -> Result<Option<usize>> {
        Ok(match self {
            AnyDecoder::Tfrecord(d) => d.decode_chunk_to(chunk, rows, out)?,
            AnyDecoder::Avro(d) => d.decode_chunk_to(chunk, rows, out)?,
            AnyDecoder::Ffrecord(d) => d.decode_chunk_to(chunk, rows, out)?,
            AnyDecoder::Ofrecord(d) => d.decode_chunk_to(chunk, rows, out)?,
        })
    }

    fn decode_record(&mut self, name: &Arc<str>, r: &Record, out: &mut BatchBuilder) -> Result<()> {
        match self {
            AnyDecoder::Tfrecord(d) => d.decode(
                &r.payload,
                &grist_tensor::Location::record(name.clone(), r.record),
                out,
            )?,
            AnyDecoder::Ofrecord(d) => d.decode(
                &r.payload,
                &grist_tensor::Location::record(name.clone(), r.record),
                out,
            )?,
            AnyDecoder::Ffrecord(d) => d.decode(&r.payload, name, r.record, Some(r.global), out)?,
            AnyDecoder::Avro(_) => {
                return Err(Error::Unsupported {
                    format: Format::Avro.name(),
                    what: "Avro records cannot be read by number".into(),
                });
            }
        }
        Ok(())
    }
}

/// Where the rows of one work item come from.
#[derive(Debug)]
pub(crate) enum Source<'a> {
    /// Rows of a buffered chunk, from row `first` of its data on; `inflate`
    /// when its data is still compressed; `crc_at` when the data CRCs of
    /// its TFRecord frames are still to be checked, with the stream offset
    /// of its first byte.
    Chunk {
        chunk: &'a Chunk,
        first: usize,
        inflate: Option<Codec>,
        crc_at: Option<u64>,
    },
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
    decoders: &mut [AnyDecoder],
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
    fn take_units(&self, decoder: &mut AnyDecoder, mut timing: PartTiming) -> PartTiming {
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

/// Checks the data CRCs of the TFRecord frames of `rows` of `chunk` (whose
/// first byte is at stream offset `at`), as the frame decoder would have:
/// a mismatch is TensorFlow's `corrupted record at <payload offset>`.
fn check_data_crcs(
    chunk: &Chunk,
    spans: &[Range<usize>],
    rows: Range<usize>,
    at: u64,
) -> Result<()> {
    for row in rows {
        let Some(span) = spans.get(row) else {
            // Not a row of the chunk: the decoder reports it.
            return Ok(());
        };
        if !grist_tfrecord::data_crc_matches(&chunk.data, span.clone()) {
            return Err(grist_tfrecord::Error::CorruptData {
                at: grist_tensor::Location::record(
                    chunk.file.clone(),
                    chunk.first_record.saturating_add(row as u64),
                )
                .into(),
                offset: at + span.start as u64,
            }
            .into());
        }
    }
    Ok(())
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
    let Source::Chunk {
        chunk,
        first,
        inflate: None,
        ..
    } = &ctx.work[piece.item].source
    else {
        return None;
    };
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

/// The compressed chunk of piece `k` of `part`, inflated. A deflate block
/// is inflated together with the next compressed piece's of the part
/// ([`Codec::decompress_two_bytes`]: two streams in one loop, about 1.5x
/// one after the other), whose result (data or error) waits in `ahead`
/// until its turn. A shuffled batch takes a few rows of hundreds of
/// blocks, mostly inflated by earlier batches, so the next block to
/// inflate may be many pieces on; the searches never overlap (the one
/// from `k` stops at its partner, which searches no further), so a part
/// costs one pass over its pieces.
fn inflate_piece(
    ctx: &Ctx<'_>,
    part: &[Piece],
    k: usize,
    chunk: &Chunk,
    codec: Codec,
    ahead: &mut Option<(usize, Result<Bytes>)>,
) -> Result<Bytes> {
    if let Some((_, data)) = ahead.take_if(|(j, _)| *j == k) {
        return data;
    }
    let at = grist_avro_tensor::Location::block(chunk.file.clone(), chunk.index);
    let next = if codec == Codec::Deflate {
        part.iter()
            .enumerate()
            .skip(k + 1)
            .find_map(|(j, p)| match &ctx.work[p.item].source {
                Source::Chunk {
                    chunk,
                    inflate: Some(c),
                    ..
                } if *c == codec => Some((j, *chunk)),
                _ => None,
            })
    } else {
        None
    };
    let Some((j, other)) = next else {
        return Ok(codec.decompress_bytes(&chunk.data, 0, ctx.limits, &at)?);
    };
    let other_at = grist_avro_tensor::Location::block(other.file.clone(), other.index);
    let [data, later] =
        codec.decompress_two_bytes([&chunk.data, &other.data], 0, ctx.limits, [&at, &other_at]);
    *ahead = Some((j, later.map_err(Error::from)));
    Ok(data?)
}

/// Decodes one part's pieces into `out`, in order.
fn decode_part(
    decoder: &mut AnyDecoder,
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
            Source::Chunk {
                chunk,
                first,
                inflate,
                crc_at,
            } => {
                let rows = first + rows.start..first + rows.end;
                if let (Some(at), RecordLayout::Spans(spans)) = (crc_at, &chunk.layout) {
                    check_data_crcs(chunk, spans, rows.clone(), *at)?;
                }
                let mut out_piece = PieceOut {
                    item: piece.item,
                    ..PieceOut::default()
                };
                out_piece.end = match inflate {
                    Some(codec) => {
                        // Into a pooled buffer, back to its pool when the
                        // last row of the block has been decoded; sized
                        // by the last block's compression ratio.
                        let data = inflate_piece(ctx, part, k, chunk, *codec, &mut ahead)?;
                        timing.inflate_bytes += chunk.data.len() as u64;
                        let inflated = Chunk {
                            data: data.clone(),
                            ..(*chunk).clone()
                        };
                        out_piece.inflated = Some(data);
                        decoder.decode_chunk(&inflated, rows, out)?
                    }
                    None => decoder.decode_chunk(chunk, rows, out)?,
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
                    if let Some((at, stored)) = &r.crc {
                        grist_ffrecord::check_sample(&r.payload, *stored, || at.clone())?;
                    }
                    decoder.decode_record(&ctx.inputs[r.input].name, r, out)?;
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
