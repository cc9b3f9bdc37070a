//! Local files.

use std::io::{BufReader, Read, Seek, SeekFrom, Write};

use grist_io::{Access, Address, Error, Storage, read_into};
use grist_testkit::dir_entries;

use crate::support::{at, pattern};

#[test]
fn ranged_reads_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(100_000, 1);
    std::fs::write(dir.path().join("f"), &data).unwrap();
    let object = Storage::new().open(&at(dir.path(), "f")).unwrap();
    assert_eq!(object.size(), 100_000);
    assert!(!object.is_remote());
    assert!(object.map().is_none());
    assert_eq!(
        &object.read_range(10..20_000).unwrap()[..],
        &data[10..20_000]
    );
    assert!(object.read_range(5..5).unwrap().is_empty());
    let mut out = vec![0; 3000];
    object
        .read_range_into(99_000..100_000, &mut out[..1000])
        .unwrap();
    assert_eq!(&out[..1000], &data[99_000..]);

    let past = object.read_range(99_999..100_001).unwrap_err();
    assert!(
        matches!(&past, Error::BadRange { range, size: 100_000, .. } if *range == (99_999..100_001)),
        "{past}"
    );
    assert!(matches!(
        object.read_range_into(0..10, &mut out[..9]),
        Err(Error::BufferLength {
            expected: 10,
            actual: 9
        })
    ));
}

#[test]
fn read_ranges_gives_each_range_in_the_order_asked() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(1 << 20, 2);
    std::fs::write(dir.path().join("f"), &data).unwrap();
    let object = Storage::new().open(&at(dir.path(), "f")).unwrap();
    assert_eq!(object.coalesce_gap(), 8 << 10);
    // Near, far, overlapping, empty, out of order.
    let ranges = [
        500_000..500_100,
        0..10,
        20..4000,
        100..200,
        900_000..1_048_576,
        7..7,
    ];
    let got = object.read_ranges(&ranges).unwrap();
    assert_eq!(got.len(), ranges.len());
    for (bytes, r) in got.iter().zip(&ranges) {
        assert_eq!(&bytes[..], &data[r.start as usize..r.end as usize]);
    }
    assert!(matches!(
        object.read_ranges(&[0..1, 0..(1 << 21)]),
        Err(Error::BadRange { .. })
    ));
}

#[test]
fn read_into_fills_a_batch_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (pattern(5000, 3), pattern(7000, 4));
    std::fs::write(dir.path().join("a"), &a).unwrap();
    std::fs::write(dir.path().join("b"), &b).unwrap();
    let storage = Storage::new();
    let fa = storage.open(&at(dir.path(), "a")).unwrap();
    let fb = storage.open(&at(dir.path(), "b")).unwrap();
    let mut out = vec![0; 100 + 2000 + 1 + 50];
    read_into(
        &[
            (&fa, 0..100),
            (&fb, 5000..7000),
            (&fa, 4999..5000),
            (&fb, 0..50),
        ],
        &mut out,
    )
    .unwrap();
    let want: Vec<u8> = [&a[..100], &b[5000..], &a[4999..], &b[..50]].concat();
    assert_eq!(out, want);
    assert!(matches!(
        read_into(&[(&fa, 0..100)], &mut out),
        Err(Error::BufferLength { expected: 100, .. })
    ));
    read_into(&[], &mut []).unwrap();
}

#[test]
fn a_reader_streams_from_an_offset() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(300_000, 5);
    std::fs::write(dir.path().join("f"), &data).unwrap();
    let object = Storage::new().open(&at(dir.path(), "f")).unwrap();
    let mut got = Vec::new();
    BufReader::new(object.reader(123_456, 1 << 20).unwrap())
        .read_to_end(&mut got)
        .unwrap();
    assert_eq!(got, &data[123_456..]);
    // Two readers of one object keep their own positions.
    let (mut r1, mut r2) = (object.reader(0, 0).unwrap(), object.reader(10, 0).unwrap());
    let (mut b1, mut b2) = ([0; 4], [0; 4]);
    r1.read_exact(&mut b1).unwrap();
    r2.read_exact(&mut b2).unwrap();
    r1.read_exact(&mut b1).unwrap();
    assert_eq!((&b1[..], &b2[..]), (&data[4..8], &data[10..14]));
    let mut end = Vec::new();
    object
        .reader(300_000, 0)
        .unwrap()
        .read_to_end(&mut end)
        .unwrap();
    assert!(end.is_empty());
    assert!(matches!(
        object.reader(300_001, 0),
        Err(Error::BadRange { .. })
    ));
}

#[test]
fn mapped_files_are_read_without_copies() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(50_000, 6);
    std::fs::write(dir.path().join("f"), &data).unwrap();
    std::fs::write(dir.path().join("empty"), b"").unwrap();
    // SAFETY: the files live in this test's own folder and nothing writes
    // to them while they are mapped.
    let storage = Storage::new().with_access(unsafe { Access::mmap() });
    assert!(storage.access().is_mmap());
    let object = storage.open(&at(dir.path(), "f")).unwrap();
    let map = object.map().unwrap().clone();
    assert_eq!(&map[..], &data[..]);
    let slice = object.read_range(1000..2000).unwrap();
    assert_eq!(slice.as_ptr(), map[1000..].as_ptr());
    let parts = object.read_ranges(&[10..20, 40_000..40_010]).unwrap();
    assert_eq!(parts[1].as_ptr(), map[40_000..].as_ptr());
    let mut out = [0; 10];
    object.read_range_into(49_990..50_000, &mut out).unwrap();
    assert_eq!(&out, &data[49_990..]);
    let mut tail = Vec::new();
    object
        .reader(49_000, 0)
        .unwrap()
        .read_to_end(&mut tail)
        .unwrap();
    assert_eq!(tail, &data[49_000..]);
    let empty = storage.open(&at(dir.path(), "empty")).unwrap();
    assert_eq!((empty.size(), empty.map().map(|m| m.len())), (0, Some(0)));
}

#[test]
fn list_and_glob_are_sorted_and_skip_hidden_files() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "b.tfrecord",
        "a.tfrecord",
        "c.idx",
        ".hidden.tfrecord",
        "sub/d.tfrecord",
        "sub/e.idx",
    ] {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, name.as_bytes()).unwrap();
    }
    std::fs::create_dir(dir.path().join("empty.tfrecord")).unwrap();
    let storage = Storage::new();
    let root = Address::from(dir.path());
    let listed = storage.list(&root).unwrap();
    let names: Vec<_> = listed
        .iter()
        .map(|e| e.address.file_name().unwrap())
        .collect();
    assert_eq!(names, ["a.tfrecord", "b.tfrecord", "c.idx"]);
    assert_eq!(listed[0].size, 10);
    assert_eq!(listed[0].address, at(dir.path(), "a.tfrecord"));

    let base = dir.path().display();
    let found = storage.glob(&format!("{base}/*.tfrecord")).unwrap();
    let names: Vec<_> = found
        .iter()
        .map(|e| e.address.as_str().to_string())
        .collect();
    assert_eq!(
        names,
        [format!("{base}/a.tfrecord"), format!("{base}/b.tfrecord")]
    );
    let deep = storage.glob(&format!("{base}/*/?.tfrecord")).unwrap();
    assert_eq!(deep.len(), 1);
    assert_eq!(deep[0].address.as_str(), format!("{base}/sub/d.tfrecord"));
    let all = storage.glob(&format!("{base}/[ab].*")).unwrap();
    assert_eq!(all.len(), 2);
    let url = storage.glob(&format!("file://{base}/*.idx")).unwrap();
    assert_eq!(url.len(), 1);
    assert_eq!(
        url[0].address.local_path(),
        Some(dir.path().join("c.idx").as_path())
    );
    assert!(storage.glob(&format!("{base}/*.none")).unwrap().is_empty());
    assert!(matches!(
        storage.list(&at(dir.path(), "missing")),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn stat_read_all_and_remove() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"spec").unwrap();
    let storage = Storage::new();
    let f = at(dir.path(), "f");
    let meta = storage.stat(&f).unwrap().unwrap();
    assert_eq!((meta.size, meta.is_dir), (4, false));
    assert!(
        storage
            .stat(&Address::from(dir.path()))
            .unwrap()
            .unwrap()
            .is_dir
    );
    assert_eq!(storage.stat(&at(dir.path(), "missing")).unwrap(), None);
    assert_eq!(&storage.read_all(&f).unwrap()[..], b"spec");
    assert!(matches!(
        storage.read_all(&Address::from(dir.path())),
        Err(Error::NotAFile { .. })
    ));
    assert!(matches!(
        storage.open(&Address::from(dir.path())),
        Err(Error::NotAFile { .. })
    ));
    storage.remove(&f).unwrap();
    assert_eq!(storage.stat(&f).unwrap(), None);
    storage.remove(&f).unwrap();
}

#[test]
fn writes_appear_only_on_commit() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::new();
    let addr = at(dir.path(), "out.ffrecord");
    let mut w = storage.create(&addr).unwrap();
    assert_eq!(w.address(), &addr);
    w.write_all(b"........payload").unwrap();
    // A writer that seeks back to fill in its header and reads it back.
    w.seek(SeekFrom::Start(0)).unwrap();
    w.write_all(b"HEADER!!").unwrap();
    w.seek(SeekFrom::Start(0)).unwrap();
    let mut head = [0; 8];
    w.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HEADER!!");
    assert_eq!(storage.stat(&addr).unwrap(), None);
    // Only the temporary sibling, hidden, exists.
    let names = dir_entries(dir.path());
    assert_eq!(names.len(), 1);
    assert!(names[0].starts_with(".out.ffrecord.tmp-"), "{names:?}");
    w.commit().unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("out.ffrecord")).unwrap(),
        b"HEADER!!payload"
    );
    assert_eq!(dir_entries(dir.path()), ["out.ffrecord"]);

    // A second commit replaces the file whole.
    let mut w = storage.create(&addr).unwrap();
    w.write_all(b"v2").unwrap();
    w.commit().unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("out.ffrecord")).unwrap(),
        b"v2"
    );
}

#[test]
fn a_dropped_writer_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::new();
    let mut w = storage.create(&at(dir.path(), "out.avro")).unwrap();
    w.write_all(&pattern(100_000, 7)).unwrap();
    drop(w);
    assert!(dir_entries(dir.path()).is_empty());
}

#[test]
fn a_files_version_changes_with_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"spec").unwrap();
    let storage = Storage::new();
    let f = at(dir.path(), "f");
    let version = |a: &Address| storage.stat(a).unwrap().unwrap().version;
    let first = version(&f);
    assert!(first.is_some());
    assert_eq!(version(&f), first, "unchanged");
    std::fs::write(dir.path().join("f"), b"spec, longer").unwrap();
    let longer = version(&f);
    assert_ne!(longer, first, "rewritten at another size");
    std::fs::write(dir.path().join("g"), b"spec, LONGER").unwrap();
    std::fs::rename(dir.path().join("g"), dir.path().join("f")).unwrap();
    assert_ne!(version(&f), longer, "replaced by another file");
    assert_eq!(version(&Address::from(dir.path())), None, "a folder");
}
