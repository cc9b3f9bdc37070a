//! Epochs, remainders and sharding: every record exactly once per epoch
//! across the ranks.

use grist_loader::{Epochs, ShardMode};

use crate::support::{Fixture, KINDS, drain, ids_by_epoch};

#[test]
fn every_record_once_per_epoch_across_ranks() {
    for kind in KINDS {
        let fx = Fixture::standard(kind);
        for world in [1usize, 2, 3, 5] {
            for mode in [ShardMode::Auto, ShardMode::Files, ShardMode::Records] {
                if mode == ShardMode::Files && world > fx.files {
                    continue;
                }
                for shuffle in [false, true] {
                    let mut all: Vec<Vec<i64>> = vec![Vec::new(); 2];
                    for rank in 0..world {
                        let mut loader = fx
                            .builder()
                            .with_shard(rank, world)
                            .with_shard_mode(mode)
                            .with_shuffle(shuffle)
                            .with_seed(3)
                            .with_cycle_length(2)
                            .with_epochs(Epochs::Count(2))
                            .build()
                            .unwrap();
                        for (e, ids) in ids_by_epoch(&drain(&mut loader)).into_iter().enumerate() {
                            all[e].extend(ids);
                        }
                    }
                    for mut epoch in all {
                        epoch.sort_unstable();
                        assert_eq!(
                            epoch,
                            (0..fx.total).collect::<Vec<_>>(),
                            "{kind:?} world {world} {mode:?} shuffle {shuffle}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn equal_batch_counts_on_every_rank() {
    for kind in KINDS {
        let fx = Fixture::standard(kind);
        for (world, mode) in [
            (3, ShardMode::Files),
            (3, ShardMode::Records),
            (2, ShardMode::Auto),
        ] {
            let mut counts = Vec::new();
            let mut unequal = Vec::new();
            let mut seen: Vec<Vec<i64>> = vec![Vec::new(); 2];
            for rank in 0..world {
                let builder = fx
                    .builder()
                    .with_shard(rank, world)
                    .with_shard_mode(mode)
                    .with_shuffle(true)
                    .with_seed(1)
                    .with_epochs(Epochs::Count(2));
                let batches = drain(&mut builder.clone().with_equal_batches(true).build().unwrap());
                let per_epoch: Vec<usize> = (0..2)
                    .map(|e| batches.iter().filter(|(b, _)| *b == e).count())
                    .collect();
                counts.push(per_epoch);
                unequal.push(drain(&mut builder.build().unwrap()).len());
                for (e, ids) in ids_by_epoch(&batches).into_iter().enumerate() {
                    seen[e].extend(ids);
                }
            }
            assert!(
                counts.iter().all(|c| c == &counts[0]),
                "{kind:?} {mode:?}: {counts:?}"
            );
            // The fewest batches any rank has on its own.
            assert_eq!(
                counts[0].iter().sum::<usize>(),
                *unequal.iter().min().unwrap(),
                "{kind:?} {mode:?}"
            );
            // No record twice in an epoch.
            for mut epoch in seen {
                let n = epoch.len();
                epoch.sort_unstable();
                epoch.dedup();
                assert_eq!(epoch.len(), n, "{kind:?} {mode:?}");
            }
        }
    }
}

#[test]
fn drop_remainder_and_endless_epochs() {
    for kind in KINDS {
        let fx = Fixture::standard(kind);
        let mut loader = fx.builder().with_drop_remainder(true).build().unwrap();
        let batches = drain(&mut loader);
        assert_eq!(batches.len() as i64, fx.total / 16, "{kind:?}");
        assert!(batches.iter().all(|(_, b)| b.rows() == 16));

        let mut endless = fx.builder().with_epochs(Epochs::Endless).build().unwrap();
        let per_epoch = (fx.total as u64).div_ceil(16) as usize;
        let taken: Vec<_> = endless.by_ref().take(3 * per_epoch + 1).collect();
        assert_eq!(taken.len(), 3 * per_epoch + 1);
        assert!(taken.iter().all(|b| b.is_ok()));
        assert_eq!(endless.state().epoch(), 3, "{kind:?}");
    }
}
