//! Faults of the object store: transient ones (503s, dropped connections,
//! stalled responses) are retried and lose or repeat nothing; a persistent
//! one fails the loader within a bounded time, naming the URL and bytes.

use std::time::{Duration, Instant};

use grist::{Epochs, LoaderBuilder};
use grist_testkit::{Fault, chain};

use crate::fixture::{KINDS, drain};
use crate::support::Served;

fn settings(b: LoaderBuilder) -> LoaderBuilder {
    b.with_shuffle(true)
        .with_seed(9)
        .with_cycle_length(2)
        .with_epochs(Epochs::Count(2))
        .with_prefetch_bytes(4 << 10)
}

/// Faults injected before and between batches, of every kind: the batches
/// are exactly the local ones.
#[test]
fn transient_faults_lose_and_repeat_nothing() {
    for kind in KINDS {
        let served = Served::new(kind);
        let faults = served.server.faults();
        let local = drain(&mut settings(served.fixture.builder()).build().unwrap());
        let mut loader = settings(served.remote()).build().unwrap();
        let plan = [
            Fault::Status(503),
            Fault::Drop { after: 10 },
            Fault::Status(500),
            Fault::Stall(Duration::from_secs(3)),
        ];
        // One fault waiting at a time: the next is queued once the last
        // was met (faults queued faster than requests come would fail one
        // request again and again, which is the persistent case below).
        faults.inject(1, plan[0]);
        let mut injected = 1;
        let mut remote = Vec::new();
        while let Some(b) = loader.next_batch() {
            let b = b.unwrap_or_else(|e| panic!("{kind:?}: {}", chain(&e)));
            remote.push((loader.state().epoch(), b));
            if faults.counts().faulted == injected {
                faults.inject(1, plan[injected as usize % plan.len()]);
                injected += 1;
            }
        }
        faults.clear();
        assert!(
            local == remote,
            "{kind:?}: {} local batches, {} over S3",
            local.len(),
            remote.len()
        );
        assert!(faults.counts().faulted > 1, "{kind:?}: no fault was met");
    }
}

/// Every request failing from some point on: the loader stops with an
/// error naming the URL, within the retry deadline (plus slack), and yields
/// nothing after it.
#[test]
fn a_persistent_fault_fails_clearly_in_bounded_time() {
    for kind in KINDS {
        let served = Served::new(kind);
        let faults = served.server.faults();
        let mut loader = settings(served.remote()).build().unwrap();
        loader.next_batch().unwrap().unwrap();
        faults.fail_always(Fault::Status(503));
        let start = Instant::now();
        let error = loop {
            match loader.next_batch() {
                Some(Ok(_)) => {}
                Some(Err(e)) => break e,
                None => panic!("{kind:?}: no error"),
            }
        };
        let took = start.elapsed();
        let deadline = grist_testkit::S3Server::test_retry().deadline();
        assert!(
            took < deadline * 2 + Duration::from_secs(5),
            "{kind:?}: {took:?} to fail"
        );
        let text = format!("{error}");
        assert!(text.contains("s3://data/"), "{kind:?}: {text}");
        assert!(loader.next_batch().is_none(), "{kind:?}");
        faults.clear();
    }
}
