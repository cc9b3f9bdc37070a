//! Memory-mapped access (`Access::mmap`) gives exactly the batches, states
//! and errors that read calls give, in every format.

use grist_loader::{Access, Epochs, Error, Threads};

use crate::support::{Fixture, KINDS, Kind, drain, roundtrip};

/// The memory-mapped access.
fn mmap() -> Access {
    // SAFETY: the fixtures' files live in the tests' own temporary
    // folders; nothing changes them while they are mapped (the damaged
    // file below is rewritten before its loader is built).
    unsafe { Access::mmap() }
}

#[test]
fn mapped_files_give_the_batches_read_files_give() {
    for kind in KINDS {
        let fx = Fixture::standard(kind);
        for shuffle in [false, true] {
            let run = |access: Access| {
                let mut loader = fx
                    .builder()
                    .with_access(access)
                    .with_shuffle(shuffle)
                    .with_shuffle_buffer(30)
                    .with_seed(3)
                    // Three epochs: the maps kept from the first serve the
                    // others.
                    .with_epochs(Epochs::Count(3))
                    .build()
                    .unwrap();
                let batches = drain(&mut loader);
                (batches, loader.stats().bytes)
            };
            let (read, read_bytes) = run(Access::read());
            let (mapped, mapped_bytes) = run(mmap());
            assert_eq!(read.len(), mapped.len(), "{kind:?} shuffle {shuffle}");
            assert!(read == mapped, "{kind:?} shuffle {shuffle}");
            if matches!(kind, Kind::TfrecordIndexed | Kind::OfrecordIndexed) {
                // Reads cover runs of neighbouring frames (and the gaps
                // between them); maps give the frames alone.
                assert!(mapped_bytes <= read_bytes, "{kind:?}");
            } else {
                assert_eq!(read_bytes, mapped_bytes, "{kind:?}: bytes counted alike");
            }
        }
    }
}

#[test]
fn a_mapped_loader_resumes_where_a_read_one_stopped() {
    for kind in KINDS {
        let fx = Fixture::standard(kind);
        let builder = || {
            fx.builder()
                .with_shuffle(true)
                .with_shuffle_buffer(20)
                .with_seed(9)
        };
        let reference = drain(&mut builder().build().unwrap());
        let mut first = builder().build().unwrap();
        for _ in 0..3 {
            first.next_batch().unwrap().unwrap();
        }
        let state = roundtrip(&first.state());
        let mut second = builder()
            .with_access(mmap())
            .with_threads(Threads::Fixed(1))
            .build()
            .unwrap();
        second.restore(&state).unwrap();
        let rest = drain(&mut second);
        assert!(rest[..] == reference[3..], "{kind:?}");
    }
}

#[test]
fn damaged_mapped_files_fail_as_read_ones_do() {
    for kind in [
        Kind::Tfrecord,
        Kind::TfrecordIndexed,
        Kind::Avro,
        Kind::AvroDeflate,
        Kind::Ffrecord,
        Kind::Ofrecord,
    ] {
        let fx = Fixture::standard(kind);
        // The last record of the second file loses its last bytes.
        let victim = if matches!(kind, Kind::Ofrecord) {
            fx.sources[0].join("part-00001")
        } else {
            fx.sources[1].clone()
        };
        let mut bytes = std::fs::read(&victim).unwrap();
        bytes.truncate(bytes.len() - 5);
        std::fs::write(&victim, bytes).unwrap();
        let first_error = |access: Access| -> (usize, String) {
            let mut loader = fx.builder().with_access(access).build().unwrap();
            let mut rows = 0;
            loop {
                match loader.next_batch() {
                    Some(Ok(b)) => rows += b.rows(),
                    Some(Err(e)) => {
                        assert!(loader.next_batch().is_none(), "{kind:?}");
                        return (rows, e.to_string());
                    }
                    None => panic!("{kind:?}: no error"),
                }
            }
        };
        let read = first_error(Access::read());
        let mapped = first_error(mmap());
        assert!(read.1.contains("1"), "{kind:?}: {}", read.1);
        assert_eq!(read, mapped, "{kind:?}");
    }
    // An index that claims more than the mapped file holds is an error
    // naming the file, not a slice out of bounds.
    let fx = Fixture::standard(Kind::TfrecordIndexed);
    let mut bytes = std::fs::read(&fx.sources[3]).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&fx.sources[3], bytes).unwrap();
    let mut loader = fx.builder().with_access(mmap()).build().unwrap();
    let e = loop {
        match loader.next_batch() {
            Some(Ok(_)) => {}
            Some(Err(e)) => break e,
            None => panic!("no error"),
        }
    };
    assert!(matches!(e, Error::Format(_)), "{e:?}");
    assert!(e.to_string().contains("data-3"), "{e}");
}
