//! The prefetch queue stays within its byte budget.

use crate::support::{Fixture, KINDS, drain};

#[test]
fn prefetch_stays_within_its_budget() {
    for kind in KINDS {
        let fx = Fixture::standard(kind);
        for budget in [1u64, 1000, 5000] {
            let mut loader = fx.builder().with_prefetch_bytes(budget).build().unwrap();
            let batches = drain(&mut loader);
            assert!(!batches.is_empty());
            let stats = loader.stats();
            assert_eq!(stats.prefetch_budget, budget);
            // A chunk (or a batch read by number) is at most 300 bytes of
            // records here... plus framing; a single item over the budget
            // passes alone.
            let largest_item = 2000;
            assert!(stats.prefetch_peak_bytes > 0, "{kind:?}");
            assert!(
                stats.prefetch_peak_bytes <= budget.max(largest_item),
                "{kind:?}: {} > {budget}",
                stats.prefetch_peak_bytes
            );
            if budget >= largest_item {
                assert!(stats.prefetch_peak_bytes <= budget, "{kind:?}");
            }
            assert_eq!(stats.records as i64, fx.total);
            assert!(stats.bytes > 0, "{kind:?}: {stats:?}");
        }
    }
}
