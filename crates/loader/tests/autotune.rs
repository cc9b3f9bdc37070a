//! The autotuner in simulation: with injected costs, the chosen thread
//! count and spread are optimal for the model, and calibration recovers
//! the costs that produced the timings. No wall clock is involved.

use grist_loader::autotune::{
    Calibrator, CostModel, HEAD_SHARE, MIN_UNIT, PartTiming, Piece, SHARE_FROM, Shares, WorkItem,
    longest_share, plan, plan_preferring_more, plan_threads, share, spread, spread_weighted,
};

/// A small deterministic generator for the instances.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// The units a cut can fall between: each row of a splittable item, each
/// whole atomic item.
fn elements(items: &[WorkItem], costs: &[f64]) -> Vec<f64> {
    let mut out = Vec::new();
    for (item, &c) in items.iter().zip(costs) {
        if item.records == 0 {
            continue;
        }
        if item.splittable {
            out.extend(std::iter::repeat_n(
                c / item.records as f64,
                item.records as usize,
            ));
        } else {
            out.push(c);
        }
    }
    out
}

/// The optimal longest part of a cut of `e` into at most `t` contiguous
/// parts, by dynamic programming over every cut.
fn optimum(e: &[f64], t: usize) -> f64 {
    let n = e.len();
    let mut prefix = vec![0.0; n + 1];
    for i in 0..n {
        prefix[i + 1] = prefix[i] + e[i];
    }
    // best[k][i]: the best longest part for the first i elements in k parts.
    let mut best = vec![vec![f64::INFINITY; n + 1]; t + 1];
    best[0][0] = 0.0;
    for k in 1..=t {
        for i in 0..=n {
            for j in 0..=i {
                let v = best[k - 1][j].max(prefix[i] - prefix[j]);
                if v < best[k][i] {
                    best[k][i] = v;
                }
            }
        }
    }
    (1..=t).map(|k| best[k][n]).fold(f64::INFINITY, f64::min)
}

/// The optimal costliest part of a cut of `e` into contiguous parts, part
/// `k` costing `w[k]` times its elements, none empty but the last ones,
/// by dynamic programming over every cut.
fn optimum_weighted(e: &[f64], w: &[f64]) -> f64 {
    let n = e.len();
    let mut prefix = vec![0.0; n + 1];
    for i in 0..n {
        prefix[i + 1] = prefix[i] + e[i];
    }
    // best[k][i]: the first i elements in exactly k non-empty parts.
    let mut best = vec![vec![f64::INFINITY; n + 1]; w.len() + 1];
    best[0][0] = 0.0;
    for k in 1..=w.len() {
        for i in 1..=n {
            for j in 0..i {
                let v = best[k - 1][j].max(w[k - 1] * (prefix[i] - prefix[j]));
                if v < best[k][i] {
                    best[k][i] = v;
                }
            }
        }
    }
    (1..=w.len())
        .map(|k| best[k][n])
        .fold(f64::INFINITY, f64::min)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-7 * a.abs().max(b.abs()) + 1e-15
}

/// 1 to `most` splittable items of `least` to `least + spread - 1`
/// records, without bytes to inflate.
fn splittable_items(rng: &mut Lcg, most: u64, least: u64, spread: u64) -> Vec<WorkItem> {
    (0..1 + rng.below(most))
        .map(|_| WorkItem {
            records: least + rng.below(spread),
            inflate_bytes: 0,
            splittable: true,
        })
        .collect()
}

fn random_items(rng: &mut Lcg, n: usize) -> Vec<WorkItem> {
    (0..n)
        .map(|_| WorkItem {
            records: 1 + rng.below(40),
            inflate_bytes: if rng.below(2) == 0 {
                0
            } else {
                rng.below(50_000)
            },
            splittable: rng.below(2) == 0,
        })
        .collect()
}

#[test]
fn spread_is_the_optimal_contiguous_cut() {
    let mut rng = Lcg(1);
    for case in 0..300 {
        let items = random_items(&mut rng, 1 + (case % 9));
        let costs: Vec<f64> = items
            .iter()
            .map(|i| 1e-6 * i.records as f64 + 3e-9 * i.inflate_bytes as f64)
            .collect();
        for t in 1..=5 {
            let (parts, longest) = spread(&items, &costs, t);
            assert!(!parts.is_empty() && parts.len() <= t);
            // Every row once, in order.
            let mut next = vec![0u64; items.len()];
            let mut last_item = 0;
            for piece in parts.iter().flatten() {
                assert!(piece.item >= last_item);
                last_item = piece.item;
                assert_eq!(piece.rows.start, next[piece.item], "case {case}");
                assert!(piece.rows.end > piece.rows.start);
                if !items[piece.item].splittable {
                    assert_eq!(piece.rows, 0..items[piece.item].records);
                }
                next[piece.item] = piece.rows.end;
            }
            assert!(next.iter().zip(&items).all(|(n, i)| *n == i.records));
            let want = optimum(&elements(&items, &costs), t);
            assert!(
                close(longest, want),
                "case {case}, {t} threads: {longest} vs {want}"
            );
        }
    }
}

#[test]
fn weighted_spread_is_the_optimal_cut_of_splittable_work() {
    // Threads of unequal speed (part k costing w[k] times its rows): the
    // slower ones get fewer rows, and the costliest part is the least any
    // cut gives them.
    let mut rng = Lcg(9);
    for case in 0..200 {
        let items = splittable_items(&mut rng, 5, 1, 30);
        let costs: Vec<f64> = items
            .iter()
            .map(|i| (1 + rng.below(3)) as f64 * 1e-6 * i.records as f64)
            .collect();
        let weights: Vec<f64> = (0..1 + rng.below(4))
            .map(|_| 0.7 + rng.below(600) as f64 / 1000.0)
            .collect();
        let (parts, longest) = spread_weighted(&items, &costs, &weights);
        assert!(!parts.is_empty() && parts.len() <= weights.len());
        let mut rows = 0;
        for (part, w) in parts.iter().zip(&weights) {
            let cost: f64 = part
                .iter()
                .map(|p| {
                    costs[p.item] * (p.rows.end - p.rows.start) as f64
                        / items[p.item].records as f64
                })
                .sum();
            assert!(w * cost <= longest * (1.0 + 1e-9), "case {case}");
            rows += part.iter().map(|p| p.rows.end - p.rows.start).sum::<u64>();
        }
        assert_eq!(rows, items.iter().map(|i| i.records).sum::<u64>());
        let want = optimum_weighted(&elements(&items, &costs), &weights);
        assert!(
            close(longest, want),
            "case {case}, weights {weights:?}: {longest} vs {want}"
        );
    }
}

#[test]
fn a_slower_thread_gets_fewer_rows() {
    // Part 1 (the pool's thread) decodes 25% slower than part 0 (the
    // loader's): calibration learns it, and the two then finish together.
    let mut model = CostModel::new(2);
    let mut cal = Calibrator::new(2);
    let batch = [WorkItem {
        records: 1024,
        inflate_bytes: 0,
        splittable: true,
    }];
    let speed = [1.0, 1.25];
    let mut times = [0.0; 2];
    for _ in 0..40 {
        let p = plan(&batch, &model);
        assert_eq!(p.threads, 2);
        let parts: Vec<PartTiming> = p
            .parts
            .iter()
            .zip(speed)
            .map(|(pieces, s)| {
                let records: u64 = pieces.iter().map(|p| p.rows.end - p.rows.start).sum();
                PartTiming {
                    records,
                    inflate_bytes: 0,
                    seconds: s * 1e-6 * records as f64,
                }
            })
            .collect();
        times = [parts[0].seconds, parts[1].seconds];
        let longest = times[0].max(times[1]);
        cal.observe(&mut model, &parts, longest + 20e-6);
    }
    // Within a row of each other (1.25 µs), where an even cut leaves the
    // loader's thread waiting 128 µs.
    assert!(
        (times[0] - times[1]).abs() <= 1.3e-6,
        "{times:?}: {model:?}"
    );
    let skew = model.skew(2);
    assert!((skew[1] / skew[0] - 1.25).abs() < 1e-6, "{model:?}");
}

#[test]
fn splittable_work_finishes_together() {
    let mut rng = Lcg(2);
    for _ in 0..100 {
        let items = splittable_items(&mut rng, 6, 20, 500);
        let costs: Vec<f64> = items.iter().map(|i| 2e-6 * i.records as f64).collect();
        let total: f64 = costs.iter().sum();
        for t in 1..=4 {
            let (parts, longest) = spread(&items, &costs, t);
            assert_eq!(parts.len(), t);
            // Within one row of sum(cost) / t.
            assert!(
                longest <= total / t as f64 + 2e-6 + 1e-12,
                "{longest} vs {}",
                total / t as f64
            );
        }
    }
}

#[test]
fn plan_picks_the_thread_count_the_model_prefers() {
    let mut rng = Lcg(3);
    for case in 0..200 {
        let items = random_items(&mut rng, 1 + (case % 7));
        let max = 1 + (case % 6);
        let per_record = 1e-7 * (1 + rng.below(30)) as f64;
        let per_byte = 1e-10 * (1 + rng.below(50)) as f64;
        let o1 = 1e-6 * rng.below(200) as f64;
        let o2 = 1e-8 * rng.below(100) as f64;
        // Overheads linear and quadratic in the extra threads.
        let model = CostModel::uniform(max, per_record, per_byte, |t| {
            o1 * (t - 1) as f64 + o2 * ((t - 1) * (t - 1)) as f64
        });
        let p = plan(&items, &model);
        let costs: Vec<f64> = items.iter().map(|i| model.cost(1, i)).collect();
        let rows: u64 = items.iter().map(|i| i.records).sum();
        // The model's time of every thread count, from the exact optimum.
        let times: Vec<f64> = (1..=max.min(rows as usize))
            .map(|t| optimum(&elements(&items, &costs), t) + model.overhead[t - 1])
            .collect();
        let best = times.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            close(p.predicted, best),
            "case {case}: {} vs {best} ({times:?})",
            p.predicted
        );
        assert!(
            close(times[p.threads - 1], best),
            "case {case}: chose {} of {times:?}",
            p.threads
        );
        assert_eq!(p.parts.len(), p.threads);
    }
}

#[test]
fn calibration_recovers_the_costs() {
    // Timings made by a "machine" costing 0.8 µs per record and 4 ns per
    // inflated byte, parts slowed by 30% when two run at once, 25 µs to
    // start the second thread.
    let truth = |t: usize, p: &PartTiming| {
        let slow = if t == 2 { 1.3 } else { 1.0 };
        slow * (0.8e-6 * p.records as f64 + 4e-9 * p.inflate_bytes as f64)
    };
    let mut model = CostModel::new(2);
    let mut cal = Calibrator::new(2);
    let mut rng = Lcg(4);
    for batch in 0..400 {
        let t = 1 + batch % 2;
        let mut parts: Vec<PartTiming> = (0..t)
            .map(|_| PartTiming {
                records: 100 + rng.below(1000),
                inflate_bytes: rng.below(200_000),
                seconds: 0.0,
            })
            .collect();
        for p in &mut parts {
            p.seconds = truth(t, p);
        }
        let longest = parts.iter().map(|p| p.seconds).fold(0.0, f64::max);
        let overhead = if t == 2 { 25e-6 } else { 1e-6 };
        cal.observe(&mut model, &parts, longest + overhead);
    }
    let near = |a: f64, b: f64| (a - b).abs() <= 0.01 * b;
    assert!(near(model.per_record[0], 0.8e-6), "{model:?}");
    assert!(near(model.per_inflated_byte[0], 4e-9), "{model:?}");
    assert!(near(model.per_record[1], 1.3 * 0.8e-6), "{model:?}");
    assert!(near(model.per_inflated_byte[1], 1.3 * 4e-9), "{model:?}");
    assert!(near(model.overhead[1], 25e-6), "{model:?}");
    assert!(near(model.overhead[0], 1e-6), "{model:?}");
    assert!(cal.measured(1) && cal.measured(2));
    // With these costs, 2 threads pay off for 4000 records, not for 20.
    let big = [WorkItem {
        records: 4000,
        inflate_bytes: 0,
        splittable: true,
    }];
    let small = [WorkItem {
        records: 20,
        inflate_bytes: 0,
        splittable: true,
    }];
    assert_eq!(plan(&big, &model).threads, 2);
    assert_eq!(plan(&small, &model).threads, 1);
}

#[test]
fn calibration_stays_put_when_records_and_bytes_go_together() {
    // Deflate blocks of one file: every part's inflated bytes are about
    // 1,700 per record, so the two features say nearly the same thing,
    // and the timings are noisy (parts that sometimes take twice as
    // long). The
    // fitted cost of a typical part must stay near its true mean instead
    // of drifting: a fit that clipped a negative coefficient to zero
    // without refitting the other climbed to 2x the truth within a few
    // hundred batches, and autotune then kept one thread where two were
    // 1.6x faster.
    let mut model = CostModel::new(2);
    let mut cal = Calibrator::new(2);
    let mut rng = Lcg(11);
    let per_byte = 2.3e-9;
    let typical = WorkItem {
        records: 512,
        inflate_bytes: 512 * 1750,
        splittable: false,
    };
    let truth = per_byte * typical.inflate_bytes as f64;
    for batch in 0..3000 {
        let parts: Vec<PartTiming> = (0..2u64)
            .map(|k| {
                // As measured: the first part's blocks a little denser,
                // and the first part the one that is often slow.
                let records = 490 + rng.below(40);
                let inflate_bytes = records * (1690 + 80 * k) + rng.below(2000);
                let noise = if k == 0 && rng.below(2) == 0 {
                    2.0
                } else {
                    1.0
                };
                PartTiming {
                    records,
                    inflate_bytes,
                    seconds: noise * per_byte * inflate_bytes as f64,
                }
            })
            .collect();
        let longest = parts.iter().map(|p| p.seconds).fold(0.0, f64::max);
        cal.observe(&mut model, &parts, longest + 100e-6);
        if batch >= 200 {
            // The noise averages 1.25x the base cost.
            let fitted = model.cost(2, &typical);
            assert!(
                fitted > 0.9 * truth && fitted < 1.7 * truth,
                "batch {batch}: fitted {fitted:e} s for a part of true mean {:e} s: {model:?}",
                1.25 * truth
            );
        }
    }
}

#[test]
fn one_slow_batch_does_not_keep_two_threads_away() {
    // A "machine" where two threads decode a batch of 1024 records in
    // 0.89 ms against 1.13 ms for one: 1.1 µs per record alone, 1.25 µs
    // each when two run, 0.25 ms to run the second thread. But the first
    // batch with two threads measures 3.6 ms of overhead (their memory
    // still to fault in), and one batch in 50 is held up 3 ms by the host.
    // The decisions follow the loader's: the plan's thread count, except
    // for trial runs of 4 batches (the last 4 of every 64, thread counts
    // in turn), and no learning from the first batch of a run.
    let mut model = CostModel::new(2);
    let mut cal = Calibrator::new(2);
    let mut rng = Lcg(5);
    let batch = [WorkItem {
        records: 1024,
        inflate_bytes: 0,
        splittable: true,
    }];
    let (mut last, mut first_two, mut two, mut chosen) = (0, true, 0, 0);
    for k in 0..3000u64 {
        let trial = k % 64 >= 60;
        let t = if trial {
            1 + (k / 64) as usize % 2
        } else {
            plan(&batch, &model).threads
        };
        let per_record = if t == 2 { 1.25e-6 } else { 1.1e-6 };
        let parts: Vec<PartTiming> = (0..t as u64)
            .map(|_| PartTiming {
                records: 1024 / t as u64,
                inflate_bytes: 0,
                seconds: per_record * (1024 / t) as f64,
            })
            .collect();
        let longest = parts.iter().map(|p| p.seconds).fold(0.0, f64::max);
        let mut overhead = if t == 2 { 0.25e-3 } else { 0.0 };
        if t == 2 && first_two {
            overhead = 3.6e-3;
        }
        if rng.below(50) == 0 {
            overhead += 3e-3;
        }
        if t == last {
            if t == 2 {
                first_two = false;
            }
            cal.observe(&mut model, &parts, longest + overhead);
        }
        last = t;
        if k >= 300 && !trial {
            chosen += 1;
            two += usize::from(t == 2);
        }
    }
    assert!(
        two as f64 >= 0.95 * chosen as f64,
        "two threads chosen for {two} of {chosen} batches: {model:?}"
    );
}

#[test]
fn autotune_measures_every_thread_count_first() {
    // Not a simulation: a real loader, but what is asserted depends on
    // the batch count only. After its first two batches (not learnt
    // from), autotune gives each thread count, one first, a run of 4
    // batches before its model decides, so a short epoch is not decided
    // by one cold batch.
    let max = std::thread::available_parallelism().map_or(1, |n| n.get());
    if max < 2 {
        return;
    }
    // Batches of 64 rows (enough for every thread count to get rows),
    // as many as the exploring takes and one more.
    let batches = 2 + 4 * max + 1;
    let fx = crate::support::Fixture::new(crate::support::Kind::Tfrecord, 1, (64 * batches) as i64);
    let mut loader = fx
        .builder()
        .with_batch_size(64)
        .with_chunk_bytes(1 << 16)
        .with_threads(grist_loader::Threads::Autotune)
        .build()
        .unwrap();
    let got = crate::support::drain(&mut loader);
    assert_eq!(got.len(), batches);
    let used = loader.stats().threads_used;
    for t in 1..=max {
        let at = used.get(t - 1).copied().unwrap_or(0);
        // The first two batches ran with one thread too.
        let want = if t == 1 { 6 } else { 4 };
        assert!(at >= want, "{t} threads for {at} batches: {used:?}");
    }
}

#[test]
fn long_batches_take_more_threads_when_they_are_nearly_as_good() {
    // 1 µs per record; the second thread costs `extra` seconds, so that
    // two threads are predicted `slower` times as long as one.
    let model_for = |records: u64, slower: f64| {
        let one = 1e-6 * records as f64;
        let extra = slower * one - one / 2.0;
        CostModel::uniform(3, 1e-6, 0.0, move |t| match t {
            1 => 0.0,
            2 => extra,
            // Three threads always worse.
            _ => 10.0 * one,
        })
    };
    let batch = |records| {
        [WorkItem {
            records,
            inflate_bytes: 0,
            splittable: true,
        }]
    };
    for (records, slower, want) in [
        // A long batch (1 ms alone): up to 1 / 0.9 times the best takes
        // two threads.
        (1000, 1.05, 2),
        (1000, 1.12, 1),
        // Better is better either way.
        (1000, 0.9, 2),
        // A short batch (64 µs): the model's best.
        (64, 1.05, 1),
    ] {
        let model = model_for(records, slower);
        let items = batch(records);
        let p = plan_preferring_more(&items, &model, 0.1, 0.5e-3);
        assert_eq!(p.threads, want, "{records} records, {slower}x");
        assert_eq!(p.parts.len(), p.threads);
        // Without a margin it is plan's choice.
        let plain = plan_preferring_more(&items, &model, 0.0, 0.5e-3);
        assert_eq!(plain.threads, plan(&items, &model).threads);
    }
}

/// The rows of `pieces` as (item, row) pairs, in order.
fn rows_in_order(pieces: &[Piece]) -> Vec<(usize, u64)> {
    pieces
        .iter()
        .flat_map(|p| p.rows.clone().map(move |r| (p.item, r)))
        .collect()
}

/// The makespan of `shares` on `threads` threads when each thread takes
/// the next unit as soon as it is free, thread 0 starting with the head at
/// time 0 and the others at `delay` (woken late, or sharing a core).
fn simulate(shares: &Shares, cost: &dyn Fn(&[Piece]) -> f64, threads: usize, delay: f64) -> f64 {
    let mut free: Vec<f64> = (0..threads)
        .map(|t| if t == 0 { cost(&shares.head) } else { delay })
        .collect();
    for unit in &shares.units {
        let (t, _) =
            free.iter().enumerate().fold(
                (0, f64::INFINITY),
                |b, (i, &f)| if f < b.1 { (i, f) } else { b },
            );
        free[t] += cost(unit);
    }
    free.into_iter().fold(0.0, f64::max)
}

#[test]
fn shares_cover_the_plan_in_order_and_let_a_late_thread_off_lightly() {
    let mut rng = Lcg(11);
    let mut long = 0;
    for case in 0..300 {
        let items = random_items(&mut rng, 1 + case % 40);
        let model = CostModel::uniform(4, 1e-6, 2e-9, |_| 0.0);
        let costs: Vec<f64> = items.iter().map(|i| model.cost(2, i)).collect();
        let cost = |pieces: &[Piece]| -> f64 {
            pieces
                .iter()
                .map(|p| {
                    costs[p.item] * (p.rows.end - p.rows.start) as f64
                        / items[p.item].records as f64
                })
                .sum()
        };
        for t in 1..=4 {
            let plan = plan_threads(&items, &model, t);
            let shares = share(&plan, &items, &model);
            // The same rows in the same order, whole items whole.
            let planned: Vec<Piece> = plan.parts.concat();
            let mut shared = shares.head.clone();
            shared.extend(shares.units.concat());
            assert_eq!(rows_in_order(&shared), rows_in_order(&planned));
            for p in &shared {
                if !items[p.item].splittable {
                    assert_eq!(p.rows, 0..items[p.item].records, "case {case}");
                }
            }
            if plan.threads == 1 {
                assert!(shares.units.is_empty());
                continue;
            }
            let total = cost(&planned);
            if total < SHARE_FROM {
                // Short: the parts as planned.
                assert_eq!(shares.head, plan.parts[0], "case {case}");
                assert_eq!(shares.units, plan.parts[1..], "case {case}");
                continue;
            }
            long += 1;
            // The head: half of part 0, to one row or whole item (or two
            // compressed items, which inflate as a pair).
            let head = cost(&shares.head);
            let target = HEAD_SHARE * cost(&plan.parts[0]);
            assert!(head + 1e-15 >= target.min(cost(&planned)), "case {case}");
            let h = &shares.head;
            let compressed = |p: &Piece| items[p.item].inflate_bytes > 0;
            let (last, before) = h.split_last().expect("a head");
            let pairs =
                compressed(last) && before.iter().filter(|p| compressed(p)).count() % 2 == 1;
            let before = if pairs && cost(before) >= target {
                &before[..before.len() - 1]
            } else {
                before
            };
            assert!(cost(before) < target + 1e-15, "case {case}");
            // Units at least MIN_UNIT of the batch (but the last).
            for u in shares.units.iter().rev().skip(1) {
                assert!(cost(u) + 1e-15 >= total * MIN_UNIT, "case {case}");
            }
            // A thread that starts late delays the batch by about half its
            // delay, not all of it: list scheduling's bound.
            let largest = shares.units.iter().map(|u| cost(u)).fold(0.0, f64::max);
            for delay in [0.0, total / 8.0, total / 3.0] {
                let makespan = simulate(&shares, &cost, plan.threads, delay);
                let bound = head
                    .max((total + (plan.threads - 1) as f64 * delay) / plan.threads as f64)
                    + largest;
                assert!(
                    makespan <= bound + 1e-12,
                    "case {case} t {t}: {makespan} > {bound}"
                );
            }
        }
    }
    // Both kinds of batch came up.
    assert!(long > 100, "{long}");
}

#[test]
fn a_thread_that_did_its_late_partners_part_counts_against_two_threads() {
    // 64 records at 2 µs each. With 2 threads the loader's thread decoded
    // them all: its partner woke after the work was gone.
    let batch = [WorkItem {
        records: 64,
        inflate_bytes: 0,
        splittable: true,
    }];
    let alone = [PartTiming {
        records: 64,
        inflate_bytes: 0,
        seconds: 128e-6,
    }];
    let shared = [alone[0], PartTiming::default()];
    let learn = |by_plan: bool| {
        let mut model = CostModel::new(2);
        let mut cal = Calibrator::new(2);
        for _ in 0..20 {
            cal.observe(&mut model, &alone, 130e-6);
            if by_plan {
                let share = longest_share(&plan_threads(&batch, &model, 2), &batch, &model);
                assert!((share - 0.5).abs() < 1e-9);
                cal.observe_shared(&mut model, &shared, 133e-6, share);
            } else {
                cal.observe(&mut model, &shared, 133e-6);
            }
        }
        plan(&batch, &model).threads
    };
    assert_eq!(learn(true), 1);
    // Beyond the longest thread, the 133 µs look like 64 + 5.
    assert_eq!(learn(false), 2);
}
