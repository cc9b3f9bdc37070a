//! The parse-thread cost model: how many threads a batch gets and which
//! rows each thread decodes.
//!
//! A batch is a sequence of [`WorkItem`]s (a run of rows of one chunk, or
//! a run of records read by number). With `t` threads, an item costs
//! `per_record[t] · records + per_inflated_byte[t] · inflate_bytes`
//! seconds (the bytes still to decompress: a compressed Avro block the
//! first time it is touched). The items are cut into `t` contiguous parts
//! — contiguous so that the batch's rows are in the same order whatever
//! the thread count, which keeps batches bit for bit reproducible under
//! autotuning — splitting an item between two parts at a row boundary
//! where its rows can be addressed one by one ([`WorkItem::splittable`]),
//! keeping it whole otherwise. [`spread_weighted`] finds the cut that
//! minimises the longest part (the threads then finish together, to one
//! row), each thread's part weighed by how much slower than the others
//! that thread has been decoding ([`CostModel::skew`]);
//! [`plan`] picks the `t` minimising
//!
//! ```text
//! T(t) = longest_part(t) + overhead[t]
//! ```
//!
//! which for splittable items is `sum(cost) / t + overhead(t)`. Unlike
//! fixed constants, the coefficients and overheads are measured online by
//! a [`Calibrator`]: per thread count, a least-squares fit of each part's
//! decode time to its records and inflated bytes (older batches weighing
//! less), and the batch's wall time beyond its longest part as the
//! overhead of running that many threads (waking them, joining them,
//! appending their columns): the median of the last
//! [`OVERHEAD_WINDOW`] batches, so that one slow batch (the first, with
//! the threads' memory still to fault in; one the host preempted) does
//! not keep a thread count away for hundreds of batches; and each part's
//! time against the others' as that thread's skew. Contention with other
//! processes shows up as slower parts at higher thread counts, so the
//! choice follows the machine's actual state.
//!
//! The cut sizes the threads' shares; [`share`] then turns it into the
//! work the threads actually run: the loader's thread decodes the first
//! half of its part, and the rest is taken in shrinking units by whichever
//! thread is free, so that a thread started late or slowed by the
//! prefetch thread holds the batch back by at most one unit.
//!
//! ```
//! use grist_loader::autotune::{CostModel, WorkItem, plan};
//!
//! // 1 µs per record, 100 µs to start a second thread.
//! let model = CostModel::uniform(2, 1e-6, 0.0, |t| 100e-6 * (t - 1) as f64);
//! let small = [WorkItem { records: 64, inflate_bytes: 0, splittable: true }];
//! assert_eq!(plan(&small, &model).threads, 1);
//! let large = [WorkItem { records: 4096, inflate_bytes: 0, splittable: true }];
//! let p = plan(&large, &model);
//! assert_eq!(p.threads, 2);
//! assert_eq!(p.parts[0][0].rows, 0..2048);
//! ```

use std::collections::VecDeque;
use std::ops::Range;

/// One unit of a batch's work, in batch order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkItem {
    /// The records to decode.
    pub records: u64,
    /// The bytes to decompress first (0 when the data is already
    /// decompressed or was never compressed).
    pub inflate_bytes: u64,
    /// Whether the item may be cut between two threads at any row.
    pub splittable: bool,
}

/// Rows `rows` (counted within the item) of item `item`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The item's position in the batch.
    pub item: usize,
    /// The rows of the item, `0..records` for the whole item.
    pub rows: Range<u64>,
}

/// What [`plan`] chose.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The thread count (the number of parts).
    pub threads: usize,
    /// Each thread's pieces; concatenated in part order they are the
    /// batch's rows in order.
    pub parts: Vec<Vec<Piece>>,
    /// The predicted time of the longest part, in seconds.
    pub longest: f64,
    /// The model's time for the batch: `longest + overhead[threads]`.
    pub predicted: f64,
}

/// The coefficients of the model, per thread count (index `t - 1`).
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    /// Seconds per record decoded, when `t` threads run.
    pub per_record: Vec<f64>,
    /// Seconds per byte decompressed, when `t` threads run.
    pub per_inflated_byte: Vec<f64>,
    /// Seconds a batch costs beyond its longest part with `t` threads.
    pub overhead: Vec<f64>,
    /// Per thread count `t`: how much slower than the model's cost each
    /// of the `t` parts of a batch decodes (part 0 is the loader's own
    /// thread; their mean is 1). Threads are not alike: a parse thread
    /// that shares its core with the prefetch thread, or is woken late,
    /// runs behind, and giving every thread the same cost leaves the
    /// others waiting for it.
    pub skew: Vec<Vec<f64>>,
}

/// The coefficients before anything is measured: 1 µs per record, 2 ns
/// per inflated byte, 10 µs per extra thread (on the low side, so that
/// more threads get tried and measured).
const PRIOR_RECORD: f64 = 1e-6;
const PRIOR_BYTE: f64 = 2e-9;
const PRIOR_OVERHEAD: f64 = 10e-6;

impl CostModel {
    /// The starting model for up to `max_threads` threads.
    pub fn new(max_threads: usize) -> Self {
        Self::uniform(max_threads, PRIOR_RECORD, PRIOR_BYTE, |t| {
            PRIOR_OVERHEAD * (t - 1) as f64
        })
    }

    /// A model with the same per-record and per-byte costs at every thread
    /// count and `overhead(t)` for `t` threads (for simulations).
    pub fn uniform(
        max_threads: usize,
        per_record: f64,
        per_inflated_byte: f64,
        overhead: impl Fn(usize) -> f64,
    ) -> Self {
        let n = max_threads.max(1);
        CostModel {
            per_record: vec![per_record; n],
            per_inflated_byte: vec![per_inflated_byte; n],
            overhead: (1..=n).map(overhead).collect(),
            skew: (1..=n).map(|t| vec![1.0; t]).collect(),
        }
    }

    /// The largest thread count the model knows.
    pub fn max_threads(&self) -> usize {
        self.per_record.len()
    }

    /// The cost of `item` with `threads` threads, in seconds.
    pub fn cost(&self, threads: usize, item: &WorkItem) -> f64 {
        let t = threads.clamp(1, self.max_threads()) - 1;
        self.per_record[t] * item.records as f64
            + self.per_inflated_byte[t] * item.inflate_bytes as f64
    }

    /// The parts' [`skew`](Self::skew) with `threads` threads.
    pub fn skew(&self, threads: usize) -> &[f64] {
        &self.skew[threads.clamp(1, self.max_threads()) - 1]
    }
}

/// Picks the thread count minimising `longest part + overhead` (the fewer
/// threads on a tie) and its spread. An empty batch gets one empty part.
pub fn plan(items: &[WorkItem], model: &CostModel) -> Plan {
    plan_preferring_more(items, model, 0.0, f64::INFINITY)
}

/// [`plan`], except that when the best plan's predicted time is at least
/// `from` seconds, the plan with the most threads whose predicted time is
/// within `margin` of the best (at most `best / (1 - margin)`) is taken
/// instead.
///
/// For long batches a wrong pick of fewer threads costs more than a wrong
/// pick of more, and the estimate of more threads is the noisier one (a
/// pool thread that shares its core with the loader's prefetch thread
/// starts late now and then).
///
/// ```
/// use grist_loader::autotune::{CostModel, WorkItem, plan, plan_preferring_more};
///
/// // Two threads predicted 5% slower than one.
/// let model = CostModel::uniform(2, 1e-6, 0.0, |t| if t == 2 { 563e-6 } else { 0.0 });
/// let batch = [WorkItem { records: 1024, inflate_bytes: 0, splittable: true }];
/// assert_eq!(plan(&batch, &model).threads, 1);
/// assert_eq!(plan_preferring_more(&batch, &model, 0.1, 0.5e-3).threads, 2);
/// ```
pub fn plan_preferring_more(items: &[WorkItem], model: &CostModel, margin: f64, from: f64) -> Plan {
    let rows: u64 = items.iter().map(|i| i.records).sum();
    let max = (model.max_threads() as u64).min(rows.max(1)) as usize;
    let mut candidates: Vec<Plan> = (1..=max).map(|t| plan_threads(items, model, t)).collect();
    // The best (the fewer threads on a tie); `max` is at least 1.
    let mut pick = 0;
    for (i, c) in candidates.iter().enumerate() {
        if c.predicted < candidates[pick].predicted {
            pick = i;
        }
    }
    let top = candidates[pick].predicted;
    if top >= from {
        for (i, c) in candidates.iter().enumerate() {
            if c.threads > candidates[pick].threads && c.predicted * (1.0 - margin) <= top {
                pick = i;
            }
        }
    }
    candidates.swap_remove(pick)
}

/// The spread of `items` over `threads` threads (fewer when there are
/// fewer rows; one empty part when there are none) and the model's time
/// for it: what [`plan`] weighs for each thread count, and what a fixed
/// thread count runs.
pub fn plan_threads(items: &[WorkItem], model: &CostModel, threads: usize) -> Plan {
    let costs: Vec<f64> = items.iter().map(|i| model.cost(threads, i)).collect();
    let (parts, longest) = spread_weighted(items, &costs, model.skew(threads));
    let threads = parts.len().max(1);
    Plan {
        threads,
        predicted: longest + model.overhead[threads.min(model.max_threads()) - 1],
        parts: if parts.is_empty() {
            vec![Vec::new()]
        } else {
            parts
        },
        longest,
    }
}

/// Cuts `items` (with costs `costs`) into at most `threads` contiguous
/// parts minimising the longest part, splitting splittable items at row
/// boundaries; returns the parts (none empty) and the longest part's cost.
/// [`spread_weighted`] with every thread alike.
pub fn spread(items: &[WorkItem], costs: &[f64], threads: usize) -> (Vec<Vec<Piece>>, f64) {
    spread_weighted(items, costs, &vec![1.0; threads.max(1)])
}

/// Cuts `items` (with costs `costs`) into at most `weights.len()`
/// contiguous parts, part `k` costing `weights[k]` times the costs of what
/// it holds, minimising the costliest part; splits splittable items at
/// row boundaries. Returns the parts (none empty, in order: part `k` for
/// thread `k`) and the costliest part's cost.
///
/// For a bound `M`, each part `k` is filled greedily up to
/// `M / weights[k]` (as many rows of a splittable item as fit, a new part
/// started before a whole item that does not); the smallest `M` the fill
/// meets with the parts there are is found by bisection between a lower
/// bound and a cut that fits. With equal weights, or splittable items, the
/// greedy fill covers the longest prefix of the items any cut within `M`
/// covers, so the cut is optimal; with unequal weights a whole item too
/// costly for the part it would open is not put off to a later one, so the
/// cut may then be longer than the best.
pub fn spread_weighted(
    items: &[WorkItem],
    costs: &[f64],
    weights: &[f64],
) -> (Vec<Vec<Piece>>, f64) {
    let ones = [1.0];
    let weights = if weights.is_empty() {
        &ones[..]
    } else {
        weights
    };
    let total: f64 = costs.iter().sum();
    if weights.len() <= 2 {
        return spread_two(items, costs, weights, total);
    }
    let fastest = weights.iter().copied().fold(f64::INFINITY, f64::min);
    let slowest = weights.iter().copied().fold(0.0, f64::max);
    // Every part ending at its bound; every row or whole item in the
    // fastest part at least.
    let mut lower = total / weights.iter().map(|w| 1.0 / w).sum::<f64>();
    for (item, &c) in items.iter().zip(costs) {
        if item.records == 0 {
            continue;
        }
        let unit = if item.splittable {
            c / item.records as f64
        } else {
            c
        };
        lower = lower.max(unit * fastest);
    }
    let fits = |m: f64| fill(items, costs, m, weights, None);
    let m = if total <= 0.0 || fits(lower) {
        lower
    } else {
        // Everything in the slowest part fits.
        let (mut lo, mut hi) = (lower, (total * slowest).max(lower));
        for _ in 0..100 {
            if hi - lo <= hi * 1e-12 {
                break;
            }
            let mid = 0.5 * (lo + hi);
            if fits(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    };
    let mut parts = Vec::with_capacity(weights.len());
    fill(items, costs, m, weights, Some(&mut parts));
    let longest = parts
        .iter()
        .zip(weights)
        .map(|(p, w): (&Vec<Piece>, &f64)| {
            w * p
                .iter()
                .map(|piece| piece_cost(items, costs, piece))
                .sum::<f64>()
        })
        .fold(0.0, f64::max);
    (parts, longest)
}

/// [`spread_weighted`] for one or two threads, directly (a batch shuffled
/// from a buffer of Avro blocks has hundreds of items, and the bisection
/// took 6% of a loader's time): the best cut puts part 0's cost just below
/// or just above the point where the two parts' weighted costs are equal,
/// so only the two row boundaries around it are tried. Exact for whole
/// items too.
fn spread_two(
    items: &[WorkItem],
    costs: &[f64],
    weights: &[f64],
    total: f64,
) -> (Vec<Vec<Piece>>, f64) {
    let w0 = weights[0];
    // Where part 0 ends: before `rows` rows of item `item`.
    let mut end = (items.len(), 0u64);
    let mut first_cost = total;
    if let &[_, w1] = weights {
        if total > 0.0 {
            let balance = total * w1 / (w0 + w1);
            let mut best = f64::INFINITY;
            let (mut before, mut rows_before) = (0.0f64, 0u64);
            for (i, (item, &c)) in items.iter().zip(costs).enumerate() {
                if item.records == 0 {
                    continue;
                }
                if before + c < balance {
                    before += c;
                    rows_before += item.records;
                    continue;
                }
                let (row, candidates) = if item.splittable {
                    let row = c / item.records as f64;
                    let below = if row > 0.0 {
                        (((balance - before) / row).floor().max(0.0) as u64).min(item.records)
                    } else {
                        item.records
                    };
                    (row, [below, (below + 1).min(item.records)])
                } else {
                    (c, [0, 1])
                };
                for r in candidates {
                    if rows_before == 0 && r == 0 {
                        // Part 0 would be empty.
                        continue;
                    }
                    let p0 = before + r as f64 * row;
                    let cost = (w0 * p0).max(w1 * (total - p0));
                    // Ties go to the larger part 0, as the greedy fill's.
                    if cost <= best {
                        best = cost;
                        let rows = if item.splittable { r } else { r * item.records };
                        end = (i, rows);
                        first_cost = p0;
                    }
                }
                break;
            }
        }
    }
    let mut parts = vec![Vec::new(), Vec::new()];
    for (i, item) in items.iter().enumerate() {
        if item.records == 0 {
            continue;
        }
        let cut = match i.cmp(&end.0) {
            std::cmp::Ordering::Less => item.records,
            std::cmp::Ordering::Equal => end.1,
            std::cmp::Ordering::Greater => 0,
        };
        if cut > 0 {
            parts[0].push(Piece {
                item: i,
                rows: 0..cut,
            });
        }
        if cut < item.records {
            parts[1].push(Piece {
                item: i,
                rows: cut..item.records,
            });
        }
    }
    parts.retain(|p| !p.is_empty());
    let longest = match weights {
        [_, w1] if parts.len() == 2 => (w0 * first_cost).max(w1 * (total - first_cost)),
        _ => w0 * total,
    };
    (parts, longest)
}

/// The greedy fill with bound `m` (part `k` holding costs up to
/// `m / weights[k]`): true when it needs at most `weights.len()` parts.
/// With `out`, records the parts.
fn fill(
    items: &[WorkItem],
    costs: &[f64],
    m: f64,
    weights: &[f64],
    mut out: Option<&mut Vec<Vec<Piece>>>,
) -> bool {
    let threads = weights.len();
    // A relative tolerance so that float sums equal to `m` fit.
    let bound = |part: usize| m / weights[part - 1] * (1.0 + 1e-9) + f64::MIN_POSITIVE;
    let mut limit = bound(1);
    let mut parts = 1usize;
    let mut load = 0.0f64;
    let mut current: Vec<Piece> = Vec::new();
    let mut push = |piece: Piece, new_part: bool, current: &mut Vec<Piece>| {
        if let Some(out) = out.as_deref_mut() {
            if new_part && !current.is_empty() {
                out.push(std::mem::take(current));
            }
            current.push(piece);
        }
    };
    for (i, (item, &c)) in items.iter().zip(costs).enumerate() {
        if item.records == 0 {
            continue;
        }
        if !item.splittable || item.records == 1 {
            if c > limit {
                return false;
            }
            let new_part = load > 0.0 && load + c > limit;
            if new_part {
                parts += 1;
                if parts > threads {
                    return false;
                }
                load = 0.0;
                limit = bound(parts);
                if c > limit {
                    return false;
                }
            }
            load += c;
            push(
                Piece {
                    item: i,
                    rows: 0..item.records,
                },
                new_part,
                &mut current,
            );
            continue;
        }
        let row = c / item.records as f64;
        if row > limit {
            return false;
        }
        let mut start = 0u64;
        let mut new_part = false;
        while start < item.records {
            let left = item.records - start;
            let room = ((limit - load) / row).floor();
            let mut take = if row <= 0.0 || room >= left as f64 {
                left
            } else {
                room.max(0.0) as u64
            };
            if take == 0 {
                if load > 0.0 {
                    parts += 1;
                    if parts > threads {
                        return false;
                    }
                    load = 0.0;
                    limit = bound(parts);
                    new_part = true;
                    continue;
                }
                // A row that fits only alone (rounding).
                take = 1;
            }
            load += take as f64 * row;
            push(
                Piece {
                    item: i,
                    rows: start..start + take,
                },
                new_part,
                &mut current,
            );
            new_part = false;
            start += take;
        }
        if parts > threads {
            return false;
        }
    }
    if let Some(out) = out {
        if !current.is_empty() {
            out.push(current);
        }
    }
    parts <= threads
}

/// The cost of `piece`: its rows' share of its item's cost (`costs`, per
/// item).
fn piece_cost(items: &[WorkItem], costs: &[f64], piece: &Piece) -> f64 {
    costs[piece.item] * (piece.rows.end - piece.rows.start) as f64
        / items[piece.item].records.max(1) as f64
}

/// How much of part 0's cost the loader's own thread decodes as the head
/// of a shared batch ([`share`]); the rest goes into units.
pub const HEAD_SHARE: f64 = 0.5;

/// The smallest unit of a shared batch, as a fraction of the batch's cost
/// (apart from whole items, which are never cut).
pub const MIN_UNIT: f64 = 1.0 / 64.0;

/// The predicted time of a batch below which [`share`] keeps the plan's
/// parts as they are: 400 µs. Shorter batches lose more to the claiming
/// and appending of units than a late thread costs them (batch 64 on 2
/// threads: Avro deflate 0.72x, TFRecord 0.96x of the plan's parts).
pub const SHARE_FROM: f64 = 400e-6;

/// A plan's rows as its threads share them: the head, which the loader's
/// own thread decodes straight into the batch, then units in row order,
/// each taken by whichever thread is free first.
///
/// A fixed cut leaves the threads waiting for the slowest one, and which
/// one that is changes from batch to batch on a busy machine (a thread
/// that shares its core with the prefetch thread, or is woken late):
/// 2 threads on TFRecord waited for each other for 30% of a run. Taking
/// units as they come, the threads finish within one unit of each other,
/// and units shrink towards the end of the batch to make that unit small.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shares {
    /// The loader's own thread's first rows.
    pub head: Vec<Piece>,
    /// The other rows, in order, in units.
    pub units: Vec<Vec<Piece>>,
    /// The plan's [`longest_share`], for the [`Calibrator`].
    pub longest_share: f64,
}

/// Shares `plan`'s rows of `items` among its threads (see [`Shares`]).
/// When the model predicts the batch at [`SHARE_FROM`] or more, the head
/// is the first [`HEAD_SHARE`] of part 0's cost, each unit after it
/// `1 / (2 · threads)` of the cost left (at least [`MIN_UNIT`] of the
/// batch), splittable items cut at row boundaries, whole items kept
/// whole, and an odd compressed item followed by another compressed one
/// when it comes next and the other threads still have one each left (a
/// thread inflates deflate blocks two at a time).
/// Shorter, the head is part 0 and each other part a unit. With one
/// thread, everything is the head.
///
/// ```
/// use grist_loader::autotune::{CostModel, WorkItem, plan_threads, share};
///
/// let model = CostModel::uniform(2, 1e-6, 0.0, |_| 0.0);
/// let batch = [WorkItem { records: 1024, inflate_bytes: 0, splittable: true }];
/// let shares = share(&plan_threads(&batch, &model, 2), &batch, &model);
/// assert_eq!(shares.head[0].rows, 0..256);
/// assert_eq!(shares.units[0][0].rows, 256..448);
/// assert_eq!(shares.units.last().unwrap()[0].rows.end, 1024);
/// ```
pub fn share(plan: &Plan, items: &[WorkItem], model: &CostModel) -> Shares {
    let pieces: Vec<Piece> = plan.parts.iter().flatten().cloned().collect();
    let longest_share = longest_share(plan, items, model);
    if plan.threads <= 1 || plan.parts.len() <= 1 {
        return Shares {
            head: pieces,
            units: Vec::new(),
            longest_share,
        };
    }
    // Per row of each item; by records when the model prices nothing.
    let mut row_cost: Vec<f64> = items
        .iter()
        .map(|i| model.cost(plan.threads, i) / i.records.max(1) as f64)
        .collect();
    let priced =
        row_cost.iter().all(|c| c.is_finite() && *c >= 0.0) && row_cost.iter().any(|c| *c > 0.0);
    if !priced {
        row_cost = vec![1.0; items.len()];
    }
    let cost = |p: &Piece| (p.rows.end - p.rows.start) as f64 * row_cost[p.item];
    let total: f64 = pieces.iter().map(cost).sum();
    if priced && total < SHARE_FROM {
        // A short batch: the parts as planned, each a unit (a thread that
        // is late still has its part taken by one that is free).
        return Shares {
            head: plan.parts[0].clone(),
            units: plan.parts[1..].to_vec(),
            longest_share,
        };
    }
    let part0: f64 = plan.parts[0].iter().map(cost).sum();
    let is_compressed = |p: &Piece| items[p.item].inflate_bytes > 0;
    // Compressed pieces not yet in the head or a unit.
    let mut compressed_left = pieces.iter().filter(|p| is_compressed(p)).count();
    let mut rest = pieces.into_iter().peekable();
    // The pieces from `rest` worth at least `target` (or all there are),
    // rounded up to a row, or to a whole item.
    let mut take = |target: f64| {
        let mut unit = Vec::new();
        let mut load = 0.0;
        // Compressed items in the unit: an odd count takes one more
        // when it comes next, so that a thread inflates them in pairs
        // (1.5x one at a time) — unless that would leave fewer than one
        // for each other thread, which would then wait (two on two
        // threads run 2x).
        let mut compressed = 0;
        while let Some(p) = rest.peek_mut() {
            let pairs =
                compressed % 2 == 1 && is_compressed(p) && compressed_left > plan.threads - 1;
            if load >= target && !unit.is_empty() && !pairs {
                break;
            }
            compressed += usize::from(is_compressed(p));
            let row = row_cost[p.item];
            let left = p.rows.end - p.rows.start;
            let rows = if items[p.item].splittable && row > 0.0 {
                (((target - load) / row).ceil().max(1.0) as u64).min(left)
            } else {
                left
            };
            unit.push(Piece {
                item: p.item,
                rows: p.rows.start..p.rows.start + rows,
            });
            load += rows as f64 * row;
            if rows == left {
                if is_compressed(p) {
                    compressed_left = compressed_left.saturating_sub(1);
                }
                rest.next();
            } else {
                p.rows.start += rows;
            }
        }
        (unit, load)
    };
    let (head, mut left) = take(part0 * HEAD_SHARE);
    left = total - left;
    let mut units = Vec::new();
    loop {
        let (unit, load) = take((left / (2 * plan.threads) as f64).max(total * MIN_UNIT));
        if unit.is_empty() {
            break;
        }
        left -= load;
        units.push(unit);
    }
    Shares {
        head,
        units,
        longest_share,
    }
}

/// The model's cost of `plan`'s longest part over the cost of all its
/// parts (1 for one part; about `1 / threads` for a balanced plan).
pub fn longest_share(plan: &Plan, items: &[WorkItem], model: &CostModel) -> f64 {
    if plan.parts.len() <= 1 {
        // One part is all of the batch (pricing each item, ~500 of them
        // in a shuffled Avro batch, would not change that).
        return 1.0;
    }
    let item_costs: Vec<f64> = items.iter().map(|i| model.cost(plan.threads, i)).collect();
    let costs: Vec<f64> = plan
        .parts
        .iter()
        .map(|part| part.iter().map(|p| piece_cost(items, &item_costs, p)).sum())
        .collect();
    let total: f64 = costs.iter().sum();
    if total > 0.0 && total.is_finite() {
        costs.iter().copied().fold(0.0, f64::max) / total
    } else {
        1.0
    }
}

/// How long one part of a batch took, and what it held.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PartTiming {
    /// Records decoded.
    pub records: u64,
    /// Bytes decompressed.
    pub inflate_bytes: u64,
    /// Seconds spent.
    pub seconds: f64,
}

impl PartTiming {
    /// Adds `other`'s records, bytes and seconds (one thread's parts).
    pub fn add(&mut self, other: &PartTiming) {
        self.records += other.records;
        self.inflate_bytes += other.inflate_bytes;
        self.seconds += other.seconds;
    }
}

/// Fits a [`CostModel`] to measured batches.
#[derive(Clone, Debug)]
pub struct Calibrator {
    /// Per thread count: the weighted sums of the least-squares fit
    /// (features scaled by `SCALE`).
    fits: Vec<Fit>,
    /// Per thread count: the overheads of its last batches.
    overheads: Vec<Window>,
    /// Per thread count, per part: how much slower than the batch's mean
    /// that part decoded in the last batches.
    skews: Vec<Vec<Window>>,
}

/// The last [`OVERHEAD_WINDOW`] values of a measurement, and their median.
#[derive(Clone, Debug, Default)]
struct Window(VecDeque<f64>);

impl Window {
    fn push(&mut self, x: f64) {
        if self.0.len() == OVERHEAD_WINDOW {
            self.0.pop_front();
        }
        self.0.push_back(x);
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn median(&self) -> f64 {
        let mut sorted: Vec<f64> = self.0.iter().copied().collect();
        sorted.sort_unstable_by(f64::total_cmp);
        match sorted.len() {
            0 => 1.0,
            n if n % 2 == 1 => sorted[n / 2],
            n => 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]),
        }
    }
}

/// Feature scales: the model's costs per 100 records and per 100 KB, so
/// that the prior weighs about as much as one small part.
const SCALE: [f64; 2] = [100.0, 100e3];
/// How much the previous observations keep of their weight per new one.
const FORGET: f64 = 0.97;
/// How many of a thread count's last batches its overhead (and each
/// part's [`skew`](CostModel::skew)) is the median of.
///
/// An average followed every outlier: in a trace of an OFRecord shuffle
/// the second batch (threads just started) measured 3.6 ms of overhead
/// against a typical 0.25 ms, and with two threads tried for only a few
/// batches in every 128 the estimate took 500 batches to come down, all
/// decoded with one thread at 0.7x the speed of two.
pub const OVERHEAD_WINDOW: usize = 15;

/// Minimises `θᵀAθ − 2bᵀθ` over `θ ≥ 0` (`a` symmetric, its diagonal at
/// least the ridge): the plain solution when neither coordinate is
/// negative, else the better of the two with one coordinate at zero.
///
/// Records and inflated bytes go together (a file's blocks all hold about
/// as many bytes per record), so the plain solution can put a negative
/// cost on one of them. Clipping that to zero while keeping the other's
/// value, which was fitted together with the negative one, overstates
/// every part; with the ridge pulling towards the last fit, the error grew
/// batch after batch (6x in a simulation) and autotune dropped to one
/// thread.
fn solve_nonnegative(a: [[f64; 2]; 2], b: [f64; 2]) -> [f64; 2] {
    let det = a[0][0] * a[1][1] - a[0][1] * a[1][0];
    if det.abs() > f64::MIN_POSITIVE {
        let theta = [
            (b[0] * a[1][1] - a[0][1] * b[1]) / det,
            (a[0][0] * b[1] - a[1][0] * b[0]) / det,
        ];
        if theta[0] >= 0.0 && theta[1] >= 0.0 {
            return theta;
        }
    }
    let objective = |t: [f64; 2]| {
        t[0] * (a[0][0] * t[0] + a[0][1] * t[1]) + t[1] * (a[1][0] * t[0] + a[1][1] * t[1])
            - 2.0 * (b[0] * t[0] + b[1] * t[1])
    };
    let records_only = [(b[0] / a[0][0]).max(0.0), 0.0];
    let bytes_only = [0.0, (b[1] / a[1][1]).max(0.0)];
    if objective(records_only) <= objective(bytes_only) {
        records_only
    } else {
        bytes_only
    }
}

#[derive(Clone, Debug, Default)]
struct Fit {
    xx: [[f64; 2]; 2],
    xy: [f64; 2],
    observed: bool,
}

impl Calibrator {
    /// A calibrator for up to `max_threads` threads.
    pub fn new(max_threads: usize) -> Self {
        let n = max_threads.max(1);
        Calibrator {
            fits: vec![Fit::default(); n],
            overheads: vec![Window::default(); n],
            skews: (1..=n).map(|t| vec![Window::default(); t]).collect(),
        }
    }

    /// Learns from one batch decoded with `parts.len()` threads whose
    /// parallel section (start of the first part to the last part joined
    /// into the batch) took `wall` seconds, and updates `model`; the
    /// overhead is the wall time beyond the longest part.
    pub fn observe(&mut self, model: &mut CostModel, parts: &[PartTiming], wall: f64) {
        let total: f64 = parts.iter().map(|p| p.seconds).sum();
        let longest = parts.iter().map(|p| p.seconds).fold(0.0, f64::max);
        let share = if total > 0.0 { longest / total } else { 1.0 };
        self.observe_shared(model, parts, wall, share);
    }

    /// [`observe`](Self::observe) for a batch whose threads shared their
    /// work ([`share`]): `parts` is each thread's time and what it
    /// decoded, and `longest_share` the planned longest part's share of
    /// the batch's cost ([`longest_share`]). The overhead is the wall time
    /// beyond that share of the threads' summed time: what the plan's
    /// longest part would have taken. Beyond the longest thread instead, a
    /// thread that took its late partner's part hid the lateness (in a
    /// short batch one thread often does all: the longest is then the
    /// whole), and two threads looked as cheap as one.
    pub fn observe_shared(
        &mut self,
        model: &mut CostModel,
        parts: &[PartTiming],
        wall: f64,
        longest_share: f64,
    ) {
        let t = parts.len().clamp(1, self.fits.len());
        let prior = [
            model.per_record[t - 1] * SCALE[0],
            model.per_inflated_byte[t - 1] * SCALE[1],
        ];
        let fit = &mut self.fits[t - 1];
        for p in parts {
            let x = [
                p.records as f64 / SCALE[0],
                p.inflate_bytes as f64 / SCALE[1],
            ];
            for (r, xr) in x.iter().enumerate() {
                for (c, xc) in x.iter().enumerate() {
                    fit.xx[r][c] = FORGET * fit.xx[r][c] + xr * xc;
                }
                fit.xy[r] = FORGET * fit.xy[r] + xr * p.seconds;
            }
        }
        fit.observed = true;
        // Ridge towards the current coefficients: a well-measured fit
        // moves freely, an unmeasured feature stays where it was.
        let ridge = 1.0;
        let a = [
            [fit.xx[0][0] + ridge, fit.xx[0][1]],
            [fit.xx[1][0], fit.xx[1][1] + ridge],
        ];
        let b = [fit.xy[0] + ridge * prior[0], fit.xy[1] + ridge * prior[1]];
        let theta = solve_nonnegative(a, b);
        model.per_record[t - 1] = theta[0] / SCALE[0];
        model.per_inflated_byte[t - 1] = theta[1] / SCALE[1];
        let longest = longest_share * parts.iter().map(|p| p.seconds).sum::<f64>();
        self.overheads[t - 1].push((wall - longest).max(0.0));
        model.overhead[t - 1] = self.overheads[t - 1].median();
        // Each part's time over the model's cost for it, against the
        // mean of the parts.
        let slowness: Vec<f64> = parts
            .iter()
            .map(|p| {
                let cost = model.per_record[t - 1] * p.records as f64
                    + model.per_inflated_byte[t - 1] * p.inflate_bytes as f64;
                p.seconds / cost
            })
            .collect();
        let mean = slowness.iter().sum::<f64>() / slowness.len().max(1) as f64;
        if t > 1 && parts.len() == t && slowness.iter().all(|x| x.is_finite() && *x > 0.0) {
            for (window, x) in self.skews[t - 1].iter_mut().zip(&slowness) {
                window.push(x / mean);
            }
            let skew: Vec<f64> = self.skews[t - 1].iter().map(Window::median).collect();
            let mean = skew.iter().sum::<f64>() / t as f64;
            model.skew[t - 1] = skew.iter().map(|x| x / mean).collect();
        }
        // Thread counts not measured yet start from what was measured at
        // the nearest one below.
        for u in t..self.fits.len() {
            if !self.fits[u].observed {
                model.per_record[u] = model.per_record[u - 1];
                model.per_inflated_byte[u] = model.per_inflated_byte[u - 1];
            }
        }
    }

    /// Whether `threads` threads were measured at least once.
    pub fn measured(&self, threads: usize) -> bool {
        threads >= 1
            && self
                .overheads
                .get(threads - 1)
                .is_some_and(|o| !o.is_empty())
    }
}
