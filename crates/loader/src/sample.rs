//! Block sampling: how many rows a batch takes from each buffered chunk.

use crate::rng::SplitMix64;

/// Draws `n` rows without replacement from chunks holding `remaining`
/// rows each (uniformly over all the rows), and returns how many came from
/// each chunk: the multivariate hypergeometric draw of AvroTensorDataset's
/// shuffle.
///
/// The rows are numbered chunk after chunk and a uniformly random set of
/// `n` of them is marked in a bitmap (a number drawn twice is drawn again;
/// when `n` is over half the rows, the rows left out are drawn instead, so
/// at most half are ever marked); each chunk's count is then the marks in
/// its range. `O(n + rows / 64 + chunks)`, with one predictable branch per
/// draw: a Fenwick tree descent per row cost a mispredicted branch per
/// level, 2.5% of a shuffled Avro batch's time on the loader's thread.
/// When the rows are far more than the marks, the marks go in a set.
pub(crate) fn block_sample(remaining: &[usize], n: usize, rng: &mut SplitMix64) -> Vec<usize> {
    let total = sum(remaining);
    let marks = marks(total, n.min(total));
    // A bitmap over all the rows, unless it would be much larger than the
    // marks themselves: chunk record counts come from the data (an Avro
    // block header claims its count before its bytes are inflated and
    // checked), and a claim of 2^50 rows must not become 2^44 words.
    sample_with(remaining, n, rng, total.div_ceil(64) > 4 * marks + 4096)
}

/// The rows of all the chunks (saturating: claimed counts can be anything).
fn sum(remaining: &[usize]) -> usize {
    remaining.iter().fold(0, |a, &r| a.saturating_add(r))
}

/// How many rows are marked when `n` of `total` are drawn.
fn marks(total: usize, n: usize) -> usize {
    if n > total / 2 { total - n } else { n }
}

/// [`block_sample`] with the marked rows kept in a bitmap or, with
/// `sparse`, in a set: the same draws, so the same counts either way.
fn sample_with(remaining: &[usize], n: usize, rng: &mut SplitMix64, sparse: bool) -> Vec<usize> {
    let total = sum(remaining);
    let n = n.min(total);
    let left_out = n > total / 2;
    let marks = marks(total, n);
    let counts = if sparse {
        let mut set = std::collections::HashSet::with_capacity(marks);
        while set.len() < marks {
            set.insert(rng.below(total as u64) as usize);
        }
        let mut rows: Vec<usize> = set.into_iter().collect();
        rows.sort_unstable();
        let mut start = 0usize;
        remaining
            .iter()
            .map(|&r| {
                let end = start.saturating_add(r);
                let from = rows.partition_point(|&x| x < start);
                let to = rows.partition_point(|&x| x < end);
                start = end;
                to - from
            })
            .collect::<Vec<_>>()
    } else {
        let mut bits = vec![0u64; total.div_ceil(64)];
        let mut marked = 0;
        while marked < marks {
            let row = rng.below(total as u64) as usize;
            let (word, bit) = (row / 64, 1u64 << (row % 64));
            if bits[word] & bit == 0 {
                bits[word] |= bit;
                marked += 1;
            }
        }
        let mut start = 0;
        remaining
            .iter()
            .map(|&r| {
                let set = ones(&bits, start, start + r);
                start += r;
                set
            })
            .collect()
    };
    if left_out {
        counts.iter().zip(remaining).map(|(c, r)| r - c).collect()
    } else {
        counts
    }
}

/// The set bits of `bits` in `from..to`.
fn ones(bits: &[u64], from: usize, to: usize) -> usize {
    if from >= to {
        return 0;
    }
    // Masks keep bits at and above `from` in its word and below `to` in
    // its (the last) word.
    let (first, last) = (from / 64, (to - 1) / 64);
    let low = !0u64 << (from % 64);
    let high = !0u64 >> (63 - (to - 1) % 64);
    if first == last {
        return (bits[first] & low & high).count_ones() as usize;
    }
    let middle: u32 = bits[first + 1..last].iter().map(|w| w.count_ones()).sum();
    ((bits[first] & low).count_ones() + middle + (bits[last] & high).count_ones()) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_within_what_is_there() {
        let mut rng = SplitMix64::new(7);
        for _ in 0..200 {
            let k = rng.below(20) as usize;
            let remaining: Vec<usize> = (0..k).map(|_| rng.below(9) as usize).collect();
            let total: usize = remaining.iter().sum();
            let n = rng.below(total as u64 + 3) as usize;
            let counts = block_sample(&remaining, n, &mut rng);
            assert_eq!(counts.iter().sum::<usize>(), n.min(total));
            assert!(counts.iter().zip(&remaining).all(|(c, r)| c <= r));
        }
    }

    #[test]
    fn a_set_of_marks_draws_as_the_bitmap_does() {
        let mut rng = SplitMix64::new(9);
        for _ in 0..300 {
            let k = 1 + rng.below(12) as usize;
            let remaining: Vec<usize> = (0..k).map(|_| rng.below(200) as usize).collect();
            let total: usize = remaining.iter().sum();
            let n = rng.below(total as u64 + 3) as usize;
            let seed = rng.next_u64();
            let bitmap = sample_with(&remaining, n, &mut SplitMix64::new(seed), false);
            let set = sample_with(&remaining, n, &mut SplitMix64::new(seed), true);
            assert_eq!(bitmap, set, "{remaining:?}, n = {n}");
        }
    }

    #[test]
    fn a_huge_claimed_chunk_allocates_by_the_draw() {
        // 2^50 rows in a bitmap would be 128 TiB; the draw needs 4 marks.
        let mut rng = SplitMix64::new(1);
        let counts = block_sample(&[1 << 50, 3, 1 << 40], 4, &mut rng);
        assert_eq!(counts.iter().sum::<usize>(), 4);
    }

    #[test]
    fn draws_in_proportion() {
        // 1000 draws of 1 from chunks of 1, 3 and 6 rows: about 10%, 30%
        // and 60% each (binomial sd about 15; 6 sd of slack).
        let mut rng = SplitMix64::new(11);
        let mut hits = [0usize; 3];
        for _ in 0..1000 {
            let c = block_sample(&[1, 3, 6], 1, &mut rng);
            for (h, c) in hits.iter_mut().zip(c) {
                *h += c;
            }
        }
        for (h, want) in hits.iter().zip([100usize, 300, 600]) {
            assert!(h.abs_diff(want) < 90, "{hits:?}");
        }
    }
    #[test]
    fn counts_marks_in_any_range() {
        let mut rng = SplitMix64::new(3);
        for _ in 0..300 {
            let bits: Vec<u64> = (0..1 + rng.below(5)).map(|_| rng.next_u64()).collect();
            let len = bits.len() * 64;
            let from = rng.below(len as u64 + 1) as usize;
            let to = from + rng.below((len - from) as u64 + 1) as usize;
            let naive = (from..to)
                .filter(|&i| bits[i / 64] >> (i % 64) & 1 == 1)
                .count();
            assert_eq!(ones(&bits, from, to), naive, "{from}..{to} of {bits:x?}");
        }
    }

    #[test]
    fn draws_follow_the_hypergeometric_law() {
        // Rows 2 + 3. Drawing 2 (marking them): counts (0, 2), (1, 1) and
        // (2, 0) with probabilities C(3,2), C(2,1)C(3,1) and C(2,2) over
        // C(5,2) = 10. Drawing 3 (marking the 2 left out): (0, 3), (1, 2)
        // and (2, 1) with 1, 6 and 3 in 10. 20,000 draws each: binomial sd
        // at most 70; 5 sd of slack.
        let mut rng = SplitMix64::new(5);
        for (n, want) in [
            (2, [(0, 6000), (1, 12_000), (2, 2000)]),
            (3, [(0, 2000), (1, 12_000), (2, 6000)]),
        ] {
            let mut seen = [0usize; 3];
            for _ in 0..20_000 {
                let c = block_sample(&[2, 3], n, &mut rng);
                assert_eq!(c[0] + c[1], n);
                seen[c[0]] += 1;
            }
            for (first, count) in want {
                assert!(seen[first].abs_diff(count) < 350, "n={n}: {seen:?}");
            }
        }
    }
}
