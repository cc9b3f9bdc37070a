//! Same arguments, same batches; different seeds, different orders; the
//! thread count never changes a batch.

use grist_loader::{Epochs, Threads};

use crate::support::{Fixture, KINDS, drain, ids_by_epoch};

#[test]
fn without_shuffle_records_come_in_file_order() {
    for kind in KINDS {
        let fx = Fixture::standard(kind);
        let mut loader = fx.builder().build().unwrap();
        assert_eq!(loader.format().id(), fx.format());
        let batches = drain(&mut loader);
        let ids = ids_by_epoch(&batches);
        assert_eq!(ids, vec![(0..fx.total).collect::<Vec<_>>()], "{kind:?}");
        // Every batch full but the last.
        let sizes: Vec<usize> = batches.iter().map(|(_, b)| b.rows()).collect();
        assert!(
            sizes[..sizes.len() - 1].iter().all(|&s| s == 16),
            "{kind:?}: {sizes:?}"
        );
    }
}

#[test]
fn same_seed_same_batches_whatever_the_threads() {
    for kind in KINDS {
        let fx = Fixture::standard(kind);
        let run = |threads: Threads, seed: u64| {
            let mut loader = fx
                .builder()
                .with_shuffle(true)
                .with_shuffle_buffer(40)
                .with_seed(seed)
                .with_epochs(Epochs::Count(2))
                .with_threads(threads)
                .build()
                .unwrap();
            drain(&mut loader)
        };
        let reference = run(Threads::Fixed(1), 5);
        for threads in [Threads::Fixed(2), Threads::Fixed(3), Threads::Autotune] {
            assert!(run(threads, 5) == reference, "{kind:?} {threads:?}");
        }
        let ids = ids_by_epoch(&reference);
        assert_eq!(ids.len(), 2);
        assert_ne!(ids[0], ids[1], "{kind:?}: epochs are reshuffled");
        let other = ids_by_epoch(&run(Threads::Fixed(2), 6));
        assert_ne!(ids[0], other[0], "{kind:?}: seeds give different orders");
        // Still every record once per epoch.
        for mut epoch in ids.into_iter().chain(other) {
            epoch.sort_unstable();
            assert_eq!(epoch, (0..fx.total).collect::<Vec<_>>(), "{kind:?}");
        }
    }
}

#[test]
fn without_reshuffling_every_epoch_repeats_the_first() {
    for kind in KINDS {
        let fx = Fixture::standard(kind);
        let mut loader = fx
            .builder()
            .with_shuffle(true)
            .with_seed(9)
            .with_reshuffle_each_epoch(false)
            .with_epochs(Epochs::Count(3))
            .build()
            .unwrap();
        let ids = ids_by_epoch(&drain(&mut loader));
        assert_eq!(ids.len(), 3);
        assert_eq!(ids[0], ids[1], "{kind:?}");
        assert_eq!(ids[0], ids[2], "{kind:?}");
        assert_ne!(ids[0], (0..fx.total).collect::<Vec<_>>(), "{kind:?}");
    }
}

#[test]
fn interleaving_takes_chunks_from_several_files_in_turn() {
    use crate::support::Kind;
    for kind in [Kind::Tfrecord, Kind::Avro, Kind::Ofrecord] {
        let fx = Fixture::standard(kind);
        let ids = |cycle: usize| {
            let mut loader = fx.builder().with_cycle_length(cycle).build().unwrap();
            ids_by_epoch(&drain(&mut loader)).remove(0)
        };
        let plain = ids(1);
        let woven = ids(2);
        assert_eq!(plain, (0..fx.total).collect::<Vec<_>>());
        let mut sorted = woven.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, plain, "{kind:?}");
        // Records of file 1 (ids 40..87) come before the end of file 0.
        let first_of_1 = woven.iter().position(|&i| i >= 40).unwrap();
        let last_of_0 = woven.iter().rposition(|&i| i < 40).unwrap();
        assert!(first_of_1 < last_of_0, "{kind:?}: {woven:?}");
        // Within a file, records keep their order.
        for f in [0..40, 40..87, 87..141, 141..202] {
            let mine: Vec<i64> = woven.iter().copied().filter(|i| f.contains(i)).collect();
            assert_eq!(mine, f.collect::<Vec<_>>(), "{kind:?}");
        }
    }
}
