//! Block sampling: how many rows a batch takes from each buffered chunk.

use crate::rng::SplitMix64;

/// Draws `n` rows without replacement from chunks holding `remaining`
/// rows each (uniformly over all the rows), and returns how many came from
/// each chunk: the multivariate hypergeometric draw of AvroTensorDataset's
/// shuffle, by a Fenwick tree (`O(n log k)`).
pub(crate) fn block_sample(remaining: &[usize], n: usize, rng: &mut SplitMix64) -> Vec<usize> {
    let k = remaining.len();
    // tree[i] (1-based) holds the sum of a power-of-two run ending at i.
    let mut tree = vec![0u64; k + 1];
    for (i, &r) in remaining.iter().enumerate() {
        tree[i + 1] += r as u64;
        let parent = (i + 1) + lowbit(i + 1);
        if parent <= k {
            tree[parent] += tree[i + 1];
        }
    }
    let mut total: u64 = remaining.iter().map(|&r| r as u64).sum();
    let mut counts = vec![0usize; k];
    let top = if k == 0 {
        0
    } else {
        1usize << (usize::BITS - 1 - k.leading_zeros())
    };
    for _ in 0..n.min(total as usize) {
        let mut u = rng.below(total);
        // The smallest i with prefix(i + 1) > u.
        let mut pos = 0usize;
        let mut step = top;
        while step > 0 {
            let next = pos + step;
            if next <= k && tree[next] <= u {
                u -= tree[next];
                pos = next;
            }
            step >>= 1;
        }
        counts[pos] += 1;
        let mut i = pos + 1;
        while i <= k {
            tree[i] -= 1;
            i += lowbit(i);
        }
        total -= 1;
    }
    counts
}

fn lowbit(i: usize) -> usize {
    i & i.wrapping_neg()
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
}
