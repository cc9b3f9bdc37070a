//! The loader over S3 gives exactly the batches it gives from local files:
//! in order and shuffled, interleaved, sharded, resumed; records read by
//! number are fetched with coalesced ranged reads.

use grist::{Epochs, Threads};

use crate::fixture::{KINDS, Kind, drain, roundtrip};
use crate::support::Served;

/// Every kind, ordered and shuffled, two files at a time, two epochs, as
/// rank 0 and 1 of 2: the batches over S3 are the local ones.
#[test]
fn batches_over_s3_are_the_local_ones() {
    for kind in KINDS {
        let served = Served::new(kind);
        for shuffle in [false, true] {
            for rank in 0..2 {
                let settings = |b: grist::LoaderBuilder| {
                    b.with_shuffle(shuffle)
                        .with_shuffle_buffer(30)
                        .with_seed(5)
                        .with_cycle_length(2)
                        .with_epochs(Epochs::Count(2))
                        .with_shard(rank, 2)
                };
                let local = drain(&mut settings(served.fixture.builder()).build().unwrap());
                let remote = drain(&mut settings(served.remote()).build().unwrap());
                assert!(!local.is_empty(), "{kind:?}");
                assert!(
                    local == remote,
                    "{kind:?} shuffle {shuffle} rank {rank}: {} local batches, {} over S3",
                    local.len(),
                    remote.len()
                );
            }
        }
    }
}

/// A loader over S3 interrupted after `k` batches, its state saved (as
/// JSON) and restored into a new one, gives the rest of the batches.
#[test]
fn resume_over_s3() {
    for kind in [
        Kind::Tfrecord,
        Kind::TfrecordGzip,
        Kind::Avro,
        Kind::Ffrecord,
        Kind::OfrecordIndexed,
    ] {
        let served = Served::new(kind);
        let builder = || {
            served
                .remote()
                .with_shuffle(true)
                .with_shuffle_buffer(30)
                .with_seed(3)
                .with_epochs(Epochs::Count(2))
        };
        let reference = drain(&mut builder().build().unwrap());
        for k in [1, reference.len() / 2, reference.len() - 1] {
            let mut first = builder().build().unwrap();
            for _ in 0..k {
                first.next_batch().unwrap().unwrap();
            }
            let state = roundtrip(&first.state());
            let mut second = builder().with_threads(Threads::Fixed(1)).build().unwrap();
            second.restore(&state).unwrap();
            let rest = drain(&mut second);
            assert!(rest == reference[k..], "{kind:?}: after {k} batches");
        }
    }
}

/// FFRecord batches read by number cost a few ranged reads each: in order,
/// one per file a batch touches; shuffled, far fewer than its records
/// (neighbours within a request's worth of bytes are fetched together).
#[test]
fn records_read_by_number_are_coalesced() {
    let served = Served::new(Kind::Ffrecord);
    let faults = served.server.faults();
    for (shuffle, most_per_batch) in [(false, 2.0), (true, 8.0)] {
        let mut loader = served
            .remote()
            .with_shuffle(shuffle)
            .with_seed(1)
            .with_batch_size(64)
            .build()
            .unwrap();
        // Opening reads the headers: count the batches' reads only.
        let first = loader.next_batch().unwrap().unwrap();
        let mut batches = 1;
        faults.reset_counts();
        for b in loader.by_ref() {
            b.unwrap();
            batches += 1;
        }
        let _ = first;
        let gets = faults.ranged_gets() as f64;
        let per_batch = gets / (batches - 1) as f64;
        assert!(batches > 2, "{batches} batches");
        assert!(
            per_batch <= most_per_batch,
            "shuffle {shuffle}: {gets} ranged reads for {} batches of 64",
            batches - 1
        );
    }
}

/// Shuffled FFRecord samples and OFRecord records of an object store are
/// streamed by default (an exact permutation would cost a request per
/// record), and still give every record once per epoch; required, they
/// are read by number.
#[test]
fn shuffled_remote_datasets_stream_unless_required() {
    for kind in [Kind::Ffrecord, Kind::OfrecordIndexed] {
        let served = Served::new(kind);
        let shuffled = || {
            served
                .remote()
                .with_shuffle(true)
                .with_seed(2)
                .with_epochs(Epochs::Count(2))
        };
        let mut streamed = shuffled()
            .with_random_access(grist::RandomAccess::Auto)
            .build()
            .unwrap();
        assert!(!streamed.is_random_access(), "{kind:?}");
        let by_epoch = crate::fixture::ids_by_epoch(&drain(&mut streamed));
        for ids in by_epoch {
            let mut sorted = ids.clone();
            sorted.sort();
            assert_eq!(
                sorted,
                (0..served.fixture.total).collect::<Vec<_>>(),
                "{kind:?}"
            );
            assert!(ids != sorted, "{kind:?}: not shuffled");
        }
        let required = shuffled().build().unwrap();
        assert!(required.is_random_access(), "{kind:?}");
    }
}

/// A shuffled FFRecord dataset of an object store is streamed with its
/// blocks requested ahead, not with a request per chunk that would wait
/// out each round trip; the batches are the local ones.
#[test]
fn streamed_ffrecord_reads_ahead_in_blocks() {
    let served = Served::new(Kind::Ffrecord);
    let faults = served.server.faults();
    let settings = |b: grist::LoaderBuilder| {
        b.with_shuffle(true)
            .with_shuffle_buffer(30)
            .with_seed(9)
            .with_chunk_bytes(256)
            .with_random_access(grist::RandomAccess::Off)
    };
    let mut remote = settings(served.remote()).build().unwrap();
    assert!(!remote.is_random_access());
    faults.reset_counts();
    let batches = drain(&mut remote);
    let gets = faults.ranged_gets();
    let local = drain(&mut settings(served.fixture.builder()).build().unwrap());
    assert!(batches == local, "the batches over S3 are the local ones");
    // Chunks of 256 bytes: one per sample or two. Each file: its header
    // (two reads) and one stream.
    let chunks = served.fixture.total / 2;
    assert!(chunks >= 20, "{chunks} chunks");
    assert!(
        gets <= served.urls.len() as u64 * 3,
        "{gets} ranged GETs for about {chunks} chunks of {} files",
        served.urls.len()
    );
}
