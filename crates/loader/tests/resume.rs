//! Resuming after any batch reproduces the rest bit for bit.

use grist_loader::{Epochs, Error, ShardMode, Threads};

use crate::support::{Fixture, KINDS, Kind, drain, roundtrip};

/// For every `k`, a loader that took `k` batches, saved its state (through
/// JSON), and a new loader restored from it yield the same batches as the
/// uninterrupted run from batch `k` on, also when the new loader went on
/// and was restored again in place.
fn check_resume(fx: &Fixture, builder: impl Fn() -> grist_loader::LoaderBuilder, what: &str) {
    let reference = drain(&mut builder().build().unwrap());
    assert!(reference.len() > 4, "{what}");
    for k in 0..=reference.len() {
        let mut first = builder().build().unwrap();
        for _ in 0..k {
            first.next_batch().unwrap().unwrap();
        }
        let state = roundtrip(&first.state());
        // A different thread count must not matter.
        let mut second = builder()
            .with_threads(Threads::Fixed(1 + k % 3))
            .build()
            .unwrap();
        second.restore(&state).unwrap();
        // Two batches on (its prefetch thread further still), then back to
        // the state in place.
        for _ in 0..2 {
            if second.next_batch().is_none() {
                break;
            }
        }
        second.restore(&state).unwrap();
        let rest = drain(&mut second);
        assert_eq!(rest.len(), reference.len() - k, "{what}: after {k} batches");
        for (i, (got, want)) in rest.iter().zip(&reference[k..]).enumerate() {
            assert!(got == want, "{what}: after {k} batches, batch {i} differs");
        }
        // The interrupted loader also goes on where it was.
        let on = drain(&mut first);
        assert!(on == rest, "{what}: after {k} batches");
    }
    let _ = fx;
}

#[test]
fn resume_after_any_batch() {
    for kind in KINDS {
        let fx = Fixture::standard(kind);
        for shuffle in [false, true] {
            check_resume(
                &fx,
                || {
                    fx.builder()
                        .with_shuffle(shuffle)
                        .with_shuffle_buffer(30)
                        .with_seed(11)
                        .with_cycle_length(2)
                        .with_epochs(Epochs::Count(2))
                },
                &format!("{kind:?} shuffle {shuffle}"),
            );
        }
    }
}

#[test]
fn resume_a_shard_with_equal_batches() {
    for kind in [
        Kind::Avro,
        Kind::TfrecordGzip,
        Kind::Ffrecord,
        Kind::OfrecordIndexed,
    ] {
        let fx = Fixture::standard(kind);
        check_resume(
            &fx,
            || {
                fx.builder()
                    .with_shuffle(true)
                    .with_seed(2)
                    .with_shard(1, 3)
                    .with_shard_mode(ShardMode::Records)
                    .with_equal_batches(true)
                    .with_epochs(Epochs::Count(2))
            },
            &format!("{kind:?} rank 1 of 3"),
        );
    }
}

#[test]
fn a_state_only_fits_its_own_arguments() {
    let fx = Fixture::standard(Kind::Tfrecord);
    let mut a = fx
        .builder()
        .with_shuffle(true)
        .with_seed(1)
        .build()
        .unwrap();
    a.next_batch().unwrap().unwrap();
    let state = a.state();
    for other in [
        fx.builder().with_shuffle(true).with_seed(2),
        fx.builder()
            .with_shuffle(true)
            .with_seed(1)
            .with_batch_size(8),
        fx.builder()
            .with_shuffle(true)
            .with_seed(1)
            .with_shard(0, 2),
        fx.builder().with_seed(1),
    ] {
        let mut b = other.build().unwrap();
        assert!(matches!(
            b.restore(&state),
            Err(Error::StateMismatch { .. })
        ));
    }
    // The same arguments take it (the epoch count may differ).
    let mut b = fx
        .builder()
        .with_shuffle(true)
        .with_seed(1)
        .with_epochs(Epochs::Count(3))
        .build()
        .unwrap();
    b.restore(&state).unwrap();
    assert_eq!(state.batches_in_epoch(), 1);
}

/// Every number of a state (but its version and fingerprint) set to
/// extreme values, as a corrupted or hand-edited checkpoint could hold:
/// restoring it either fails or gives a loader that yields batches or an
/// error and then ends. Nothing panics (on any thread) or hangs, and no
/// number is taken as a size to allocate (2^64 would abort the test).
#[test]
fn a_tampered_state_fails_cleanly() {
    fn leaves(v: &serde_json::Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match v {
            serde_json::Value::Number(_) => out.push(path.clone()),
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    path.push(i.to_string());
                    leaves(x, path, out);
                    path.pop();
                }
            }
            serde_json::Value::Object(o) => {
                for (k, x) in o {
                    path.push(k.clone());
                    leaves(x, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    fn at<'a>(v: &'a mut serde_json::Value, path: &[String]) -> &'a mut serde_json::Value {
        path.iter().fold(v, |v, k| match v {
            serde_json::Value::Array(a) => &mut a[k.parse::<usize>().unwrap()],
            other => &mut other[k.as_str()],
        })
    }
    for kind in KINDS {
        // Three files of 20, 27 and 34 records: few numbers to change.
        let fx = Fixture::new(kind, 3, 20);
        // A shuffle buffer of 16 leaves the stream going after the first
        // batches; the default one holds every chunk, most untouched.
        for (shuffle, buffer) in [(false, 0), (true, 16), (true, 10_000)] {
            let builder = || {
                fx.builder()
                    .with_shuffle(shuffle)
                    .with_shuffle_buffer(buffer)
                    .with_seed(3)
                    .with_epochs(Epochs::Count(1))
            };
            let total = drain(&mut builder().build().unwrap()).len();
            // States after one and two batches: a chunk of the buffer
            // may then be untouched, partly used or cut.
            let mut first = builder().build().unwrap();
            for _ in 0..2 {
                first.next_batch().unwrap().unwrap();
                let saved = serde_json::to_value(first.state()).unwrap();
                let mut paths = Vec::new();
                leaves(&saved, &mut Vec::new(), &mut paths);
                paths.retain(|p| p[0] != "version" && p[0] != "fingerprint");
                assert!(!paths.is_empty());
                for path in &paths {
                    let old = at(&mut saved.clone(), path).as_u64().unwrap();
                    for value in [
                        0,
                        1,
                        old.saturating_add(1),
                        old.saturating_mul(3),
                        1 << 32,
                        u64::MAX,
                    ] {
                        let mut v = saved.clone();
                        *at(&mut v, path) = value.into();
                        let what =
                            format!("{kind:?}, buffer {buffer}: {} = {value}", path.join("."));
                        let Ok(state) = serde_json::from_value(v) else {
                            continue;
                        };
                        let mut loader = builder().build().unwrap();
                        if loader.restore(&state).is_err() {
                            continue;
                        }
                        let mut n = 0;
                        loop {
                            match loader.next_batch() {
                                None => break,
                                Some(Err(e)) => {
                                    // A panic caught on a thread is a bug too.
                                    assert!(
                                        !matches!(e, Error::ThreadPanicked { .. }),
                                        "{what}: {e}"
                                    );
                                    assert!(loader.next_batch().is_none(), "{what}");
                                    break;
                                }
                                Some(Ok(_)) => n += 1,
                            }
                            assert!(n <= 4 * total, "{what}: {n} batches and more");
                        }
                    }
                }
            }
        }
    }
}
