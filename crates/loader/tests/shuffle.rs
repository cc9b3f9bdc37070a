//! Shuffle quality: the correlation between a record's position in the
//! files and its position in the epoch, over several seeds.
//!
//! For a uniform permutation of `n` records the correlation is about
//! `0 ± 1/sqrt(n)`. The thresholds, for 20 seeds:
//! * the mean correlation over the seeds is within ±0.15 of 0, and
//! * no single seed's correlation exceeds 0.6 in size.
//!
//! Records read by number follow exact permutations; streams mix by
//! shuffling the file order and sampling from the buffer, so with many
//! small files, or a buffer as large as a file, they pass too. The same
//! statistic without shuffling is 1 (the test fails on it).

use grist_loader::RandomAccess;

use crate::support::{Fixture, KINDS, Kind, drain, ids_by_epoch};

const SEEDS: u64 = 20;

fn correlation(order: &[i64]) -> f64 {
    let n = order.len() as f64;
    let mean = (n - 1.0) / 2.0;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (pos, &id) in order.iter().enumerate() {
        let x = id as f64 - mean;
        let y = pos as f64 - mean;
        sxy += x * y;
        sxx += x * x;
        syy += y * y;
    }
    sxy / (sxx * syy).sqrt()
}

/// The correlation of each seed's first epoch.
fn correlations(fx: &Fixture, shuffle: bool, buffer: usize) -> Vec<f64> {
    (0..SEEDS)
        .map(|seed| {
            let mut loader = fx
                .builder()
                .with_shuffle(shuffle)
                .with_shuffle_buffer(buffer)
                .with_seed(seed)
                .build()
                .unwrap();
            let ids = ids_by_epoch(&drain(&mut loader)).remove(0);
            assert_eq!(ids.len() as i64, fx.total);
            correlation(&ids)
        })
        .collect()
}

fn passes(c: &[f64]) -> bool {
    let mean = c.iter().sum::<f64>() / c.len() as f64;
    mean.abs() < 0.15 && c.iter().all(|x| x.abs() < 0.6)
}

#[test]
fn many_files_are_well_mixed() {
    for kind in KINDS {
        // 16 files of 25 to 130 records.
        let fx = Fixture::new(kind, 16, 25);
        let c = correlations(&fx, true, 100);
        assert!(passes(&c), "{kind:?}: {c:?}");
        let unshuffled = correlations(&fx, false, 100);
        assert!(!passes(&unshuffled), "{kind:?}: {unshuffled:?}");
    }
}

#[test]
fn a_buffer_as_large_as_the_file_mixes_one_file() {
    for kind in [
        Kind::Tfrecord,
        Kind::Avro,
        Kind::AvroDeflate,
        Kind::Ofrecord,
    ] {
        let fx = Fixture::new(kind, 1, 400);
        let c = correlations(&fx, true, 400);
        assert!(passes(&c), "{kind:?}: {c:?}");
    }
}

#[test]
fn exact_permutations_of_one_file() {
    for kind in [Kind::Ffrecord, Kind::TfrecordIndexed, Kind::OfrecordIndexed] {
        let fx = Fixture::new(kind, 1, 400);
        let c = correlations(&fx, true, 0);
        // Tighter for exact permutations: 1/sqrt(400) = 0.05 per seed.
        assert!(c.iter().all(|x| x.abs() < 0.25), "{kind:?}: {c:?}");
        let loader = fx.builder().with_shuffle(true).build().unwrap();
        assert!(loader.is_random_access());
    }
    // With random access off, OFRecord streams (and block-samples).
    let fx = Fixture::new(Kind::OfrecordIndexed, 1, 400);
    let loader = fx
        .builder()
        .with_shuffle(true)
        .with_random_access(RandomAccess::Off)
        .build()
        .unwrap();
    assert!(!loader.is_random_access());
}
