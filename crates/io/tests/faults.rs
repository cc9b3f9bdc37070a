//! Retries and failures, with faults injected by the test server.

use std::io::Read;
use std::time::{Duration, Instant};

use grist_io::{Error, Retry};
use grist_testkit::Fault;
use grist_testkit::chain;

use crate::support::{Remote, pattern};

#[test]
fn answers_of_503_are_retried() {
    let data = pattern(100_000, 1);
    let r = Remote::new(&[("k", &data)]);
    let object = r.storage.open(&r.addr("k")).unwrap();
    let faults = r.server.faults();
    faults.reset_counts();
    faults.fail_next(3);
    assert_eq!(
        &object.read_range(10..90_000).unwrap()[..],
        &data[10..90_000]
    );
    let counts = faults.counts();
    assert_eq!((counts.faulted, counts.ranged_gets), (3, 4), "{counts:?}");
}

#[test]
fn a_body_cut_short_is_asked_for_again() {
    let data = pattern(1 << 20, 2);
    let r = Remote::new(&[("k", &data)]);
    let object = r.storage.open(&r.addr("k")).unwrap();
    let faults = r.server.faults();
    faults.drop_next(1, 100_000);
    let got = object.read_range(0..1 << 20).unwrap();
    assert!(got == data, "bytes differ after a retry");
    assert_eq!(faults.counts().faulted, 1);
    // The same inside a stream and a batch.
    faults.drop_next(2, 10_000);
    let mut streamed = Vec::new();
    let small = r.storage.clone().with_block_size(256 << 10);
    let object = small.open(&r.addr("k")).unwrap();
    object
        .reader(5, 1 << 20)
        .unwrap()
        .read_to_end(&mut streamed)
        .unwrap();
    assert!(streamed == data[5..], "stream differs after retries");
    faults.drop_next(1, 1);
    let mut out = vec![0; 300_000];
    grist_io::read_into(&[(&object, 700_000..1_000_000)], &mut out).unwrap();
    assert_eq!(out, &data[700_000..1_000_000]);
}

#[test]
fn a_stalled_answer_times_out_and_is_retried() {
    let data = pattern(50_000, 3);
    let r = Remote::new(&[("k", &data)]);
    let retry = Retry::new()
        .with_attempts(4)
        .with_backoff(Duration::from_millis(10), Duration::from_millis(50))
        .with_request_timeout(Duration::from_millis(300))
        .with_deadline(Duration::from_secs(10));
    let storage = r.storage.clone().with_retry(retry);
    let object = storage.open(&r.addr("k")).unwrap();
    let faults = r.server.faults();
    faults.stall_next(1, Duration::from_secs(2));
    let t = Instant::now();
    assert_eq!(&object.read_range(0..50_000).unwrap()[..], &data[..]);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
    // A body that stalls part-way is abandoned and asked for again.
    faults.inject(
        1,
        Fault::StallBody {
            after: 10_000,
            duration: Duration::from_secs(2),
        },
    );
    let t = Instant::now();
    assert_eq!(&object.read_range(0..50_000).unwrap()[..], &data[..]);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

fn quick() -> Retry {
    Retry::new()
        .with_attempts(3)
        .with_backoff(Duration::from_millis(10), Duration::from_millis(50))
        .with_request_timeout(Duration::from_millis(300))
        .with_deadline(Duration::from_secs(3))
}

#[test]
fn a_persistent_fault_fails_naming_the_object_and_range_in_time() {
    let data = pattern(100_000, 4);
    let r = Remote::new(&[("dir/k", &data)]);
    let storage = r.storage.clone().with_retry(quick());
    let object = storage.open(&r.addr("dir/k")).unwrap();
    let faults = r.server.faults();
    for fault in [
        Fault::Status(503),
        Fault::Drop { after: 10 },
        Fault::Stall(Duration::from_secs(5)),
    ] {
        faults.fail_always(fault);
        let t = Instant::now();
        let e = object.read_range(100..200).unwrap_err();
        let took = t.elapsed();
        assert!(
            took < quick().deadline() + Duration::from_secs(1),
            "{fault:?}: {took:?}"
        );
        match &e {
            Error::Read { address, range, .. } => {
                assert_eq!(&**address, "s3://data/dir/k");
                assert_eq!(range, &Some(100..200));
            }
            Error::Timeout { address, range, .. } => {
                assert_eq!(&**address, "s3://data/dir/k");
                assert_eq!(range, &Some(100..200));
            }
            other => panic!("{fault:?}: {other:?}"),
        }
        assert!(
            e.to_string()
                .starts_with("s3://data/dir/k: bytes 100..200: "),
            "{e}"
        );
        faults.clear();
    }
    // The 503 case is a read error, and its cause says so once.
    faults.fail_always(Fault::Status(503));
    let e = object.read_range(0..10).unwrap_err();
    assert!(matches!(e, Error::Read { .. }), "{e:?}");
    let text = chain(&e);
    eprintln!("{text}");
    assert_eq!(
        text.matches("fault injected by grist-testkit").count(),
        1,
        "{text}"
    );
    faults.clear();
}

#[test]
fn a_stream_never_ends_early() {
    let data = pattern(2 << 20, 5);
    let r = Remote::new(&[("k", &data)]);
    let storage = r
        .storage
        .clone()
        .with_retry(quick())
        .with_block_size(256 << 10);
    let object = storage.open(&r.addr("k")).unwrap();
    let mut reader = object.reader(0, 512 << 10).unwrap();
    let mut first = vec![0; 300_000];
    reader.read_exact(&mut first).unwrap();
    assert_eq!(first, &data[..300_000]);
    r.server.faults().fail_always(Fault::Drop { after: 1000 });
    let mut rest = Vec::new();
    let e = reader.read_to_end(&mut rest).unwrap_err();
    // Whatever came before the error is exact.
    assert!(rest == data[300_000..300_000 + rest.len()]);
    assert!(rest.len() < data.len() - 300_000);
    let inner = e.get_ref().and_then(|e| e.downcast_ref::<Error>());
    match inner {
        Some(Error::Read {
            address,
            range: Some(range),
            ..
        }) => {
            assert_eq!(&**address, "s3://data/k");
            assert_eq!(range.end - range.start, 256 << 10);
        }
        Some(Error::Timeout { .. }) => {}
        other => panic!("{other:?}"),
    }
    // And it keeps failing rather than reporting the end.
    assert!(reader.read(&mut [0; 10]).is_err());
}

#[test]
fn a_failed_upload_leaves_no_object() {
    let r = Remote::new(&[]);
    // Parts of 5 MiB: more time per request than `quick` gives on a busy
    // machine (the faults here are answers, not stalls).
    let retry = quick()
        .with_request_timeout(Duration::from_secs(30))
        .with_deadline(Duration::from_secs(60));
    let storage = r.storage.clone().with_retry(retry).with_part_size(5 << 20);
    let addr = r.addr("up.bin");
    let faults = r.server.faults();
    // Two 503s on the way are retried.
    let mut w = storage.create(&addr).unwrap();
    std::io::Write::write_all(&mut w, &pattern(6 << 20, 6)).unwrap();
    faults.fail_next(2);
    w.commit().unwrap();
    assert_eq!(storage.stat(&addr).unwrap().map(|m| m.size), Some(6 << 20));
    // A refusal is not.
    let other = r.addr("refused.bin");
    let mut w = storage.create(&other).unwrap();
    std::io::Write::write_all(&mut w, &pattern(6 << 20, 7)).unwrap();
    faults.fail_always(Fault::Status(403));
    let e = w.commit().unwrap_err();
    assert!(
        matches!(&e, Error::Write { address, .. } if &**address == "s3://data/refused.bin"),
        "{e:?}"
    );
    faults.clear();
    assert_eq!(storage.stat(&other).unwrap(), None);
}
