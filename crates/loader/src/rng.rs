//! Seeded randomness: every random choice of the loader is a function of
//! the seed and of where it is made (epoch, batch, purpose), so a loader
//! resumed from a saved state makes the same choices.

/// SplitMix64: small, fast, and its whole state is one `u64`.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        finalize(self.0)
    }

    /// A uniform integer in `[0, n)` (`n > 0`), by Lemire's
    /// multiply-shift (bias below 2^-64 · n, irrelevant here).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// SplitMix64's output function: a bijective 64-bit mixer.
fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What a random stream is for (so that streams of one seed differ).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Purpose {
    FileOrder = 1,
    Sample = 2,
    Permutation = 3,
}

/// The seed of the stream for `purpose` at `(epoch, index)`.
pub(crate) fn stream(seed: u64, purpose: Purpose, epoch: u64, index: u64) -> SplitMix64 {
    let mut h = finalize(seed ^ 0x6772_6973_745f_6c64); // "grist_ld"
    for x in [purpose as u64, epoch, index] {
        h = finalize(h.wrapping_add(x).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (h >> 29));
    }
    SplitMix64::new(h)
}

/// Fisher–Yates.
pub(crate) fn shuffle<T>(items: &mut [T], rng: &mut SplitMix64) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// A seeded permutation of `0..n` that needs no memory: a balanced Feistel
/// network over the smallest even number of bits that covers `n`, walked
/// until it lands inside `0..n` (cycle walking; fewer than four steps on
/// average, as the domain is at most four times `n`). A bijection for any
/// keys, so every number comes out exactly once.
#[derive(Clone, Debug)]
pub(crate) struct Permutation {
    n: u64,
    half: u32,
    mask: u64,
    keys: [u64; 6],
}

impl Permutation {
    pub(crate) fn new(n: u64, rng: &mut SplitMix64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half = bits.div_ceil(2).max(1);
        let mut keys = [0; 6];
        for k in &mut keys {
            *k = rng.next_u64();
        }
        Permutation {
            n,
            half,
            mask: (1u64 << half) - 1,
            keys,
        }
    }

    /// The `i`-th number of the permutation (`i < n`).
    pub(crate) fn get(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        let mut x = i;
        loop {
            x = self.round_trip(x);
            if x < self.n {
                return x;
            }
        }
    }

    fn round_trip(&self, x: u64) -> u64 {
        let mut left = x >> self.half;
        let mut right = x & self.mask;
        for &k in &self.keys {
            let f = finalize(right ^ k) & self.mask;
            (left, right) = (right, left ^ f);
        }
        (left << self.half) | right
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_are_bijections() {
        for n in [0u64, 1, 2, 3, 5, 16, 17, 1000, 4097] {
            let p = Permutation::new(n, &mut SplitMix64::new(n));
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let x = p.get(i) as usize;
                assert!(!seen[x], "n={n}: {x} twice");
                seen[x] = true;
            }
        }
    }

    #[test]
    fn streams_differ_by_every_input() {
        let a = stream(1, Purpose::Sample, 0, 0).next_u64();
        assert_ne!(a, stream(2, Purpose::Sample, 0, 0).next_u64());
        assert_ne!(a, stream(1, Purpose::FileOrder, 0, 0).next_u64());
        assert_ne!(a, stream(1, Purpose::Sample, 1, 0).next_u64());
        assert_ne!(a, stream(1, Purpose::Sample, 0, 1).next_u64());
        assert_eq!(a, stream(1, Purpose::Sample, 0, 0).next_u64());
    }
}
