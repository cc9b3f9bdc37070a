//! Object stores, through the in-process S3 server.

use std::io::{Read, Seek, SeekFrom, Write};

use grist_io::{Address, Error, Storage, read_into};

use crate::support::{Remote, pattern};

#[test]
fn opens_and_reads_ranges_of_an_object() {
    let data = pattern(200_000, 1);
    let r = Remote::new(&[("dir/obj.bin", &data)]);
    let addr = r.addr("dir/obj.bin");
    assert_eq!(addr.as_str(), "s3://data/dir/obj.bin");
    assert!(addr.is_remote());
    let object = r.storage.open(&addr).unwrap();
    assert!(object.is_remote());
    assert!(object.map().is_none());
    assert_eq!(object.size(), 200_000);
    assert_eq!(object.coalesce_gap(), 1 << 20);
    assert_eq!(object.name().as_ref(), "s3://data/dir/obj.bin");
    let faults = r.server.faults();
    assert_eq!(faults.counts().heads, 1);
    assert_eq!(
        &object.read_range(1000..150_000).unwrap()[..],
        &data[1000..150_000]
    );
    let mut out = vec![0; 10];
    object.read_range_into(199_990..200_000, &mut out).unwrap();
    assert_eq!(out, &data[199_990..]);
    assert!(object.read_range(7..7).unwrap().is_empty());
    assert!(matches!(
        object.read_range(0..200_001),
        Err(Error::BadRange { size: 200_000, .. })
    ));
    assert_eq!(faults.ranged_gets(), 2);
    // Clones share the client.
    let again = object.clone();
    assert_eq!(&again.read_range(0..3).unwrap()[..], &data[..3]);
}

#[test]
fn nearby_ranges_are_fetched_together() {
    let data = pattern(4 << 20, 2);
    let r = Remote::new(&[("big", &data)]);
    let object = r.storage.open(&r.addr("big")).unwrap();
    let faults = r.server.faults();
    faults.reset_counts();
    // Three ranges within 1 MiB of each other, no gap wider than the bytes
    // wanted before it, asked out of order: one GET.
    let near = [500_000..500_100, 0..200_000, 300_000..400_000];
    let got = object.read_ranges(&near).unwrap();
    for (bytes, range) in got.iter().zip(&near) {
        assert_eq!(&bytes[..], &data[range.start as usize..range.end as usize]);
    }
    assert_eq!(faults.ranged_gets(), 1);
    // Two groups more than 1 MiB apart: two GETs.
    faults.reset_counts();
    let far = [0..100, 150..200, (3 << 20)..(3 << 20) + 10];
    let got = object.read_ranges(&far).unwrap();
    for (bytes, range) in got.iter().zip(&far) {
        assert_eq!(&bytes[..], &data[range.start as usize..range.end as usize]);
    }
    assert_eq!(faults.ranged_gets(), 2);
    // Small ranges scattered through the object (records read by number):
    // fetching what lies between would read ~1,000 times the bytes
    // wanted, so each is its own GET.
    faults.reset_counts();
    let scattered: Vec<_> = (0..8u64).map(|i| i * 300_000..i * 300_000 + 300).collect();
    let got = object.read_ranges(&scattered).unwrap();
    for (bytes, range) in got.iter().zip(&scattered) {
        assert_eq!(&bytes[..], &data[range.start as usize..range.end as usize]);
    }
    assert_eq!(faults.ranged_gets(), 8);
}

#[test]
fn read_into_reads_across_objects_and_files() {
    let (a, b) = (pattern(3 << 20, 3), pattern(10_000, 4));
    let r = Remote::new(&[("a", &a), ("b", &b)]);
    let dir = tempfile::tempdir().unwrap();
    let local = pattern(1000, 5);
    std::fs::write(dir.path().join("l"), &local).unwrap();
    let oa = r.storage.open(&r.addr("a")).unwrap();
    let ob = r.storage.open(&r.addr("b")).unwrap();
    let ol = r
        .storage
        .open(&Address::from(dir.path().join("l")))
        .unwrap();
    let faults = r.server.faults();
    faults.reset_counts();
    let parts = [
        (&oa, 0..1000),
        (&ob, 500..600),
        (&ol, 10..20),
        (&oa, 1500..2500),              // near the first: joined with it
        (&oa, (3 << 20) - 10..3 << 20), // far: its own request
        (&ob, 0..400),
    ];
    let total: u64 = parts.iter().map(|(_, r)| r.end - r.start).sum();
    let mut out = vec![0; total as usize];
    read_into(&parts, &mut out).unwrap();
    let want: Vec<u8> = [
        &a[..1000],
        &b[500..600],
        &local[10..20],
        &a[1500..2500],
        &a[(3 << 20) - 10..],
        &b[..400],
    ]
    .concat();
    assert_eq!(out, want);
    assert_eq!(faults.ranged_gets(), 3);
}

#[test]
fn a_reader_streams_a_large_object_in_blocks() {
    let data = pattern(3 << 20, 6);
    let r = Remote::new(&[("stream", &data)]);
    let storage = r.storage.clone().with_block_size(64 << 10);
    let object = storage.open(&r.addr("stream")).unwrap();
    let faults = r.server.faults();
    faults.reset_counts();
    let start = 12_345;
    let mut got = Vec::new();
    object
        .reader(start, 512 << 10)
        .unwrap()
        .read_to_end(&mut got)
        .unwrap();
    assert!(got == data[start as usize..], "stream differs");
    let blocks = (data.len() as u64 - start).div_ceil(64 << 10);
    assert_eq!(faults.ranged_gets(), blocks);
    // A reader dropped part-way stops fetching.
    let mut partial = object.reader(0, 256 << 10).unwrap();
    let mut first = vec![0; 100];
    partial.read_exact(&mut first).unwrap();
    assert_eq!(first, &data[..100]);
    drop(partial);
    let mut empty = Vec::new();
    object
        .reader(object.size(), 0)
        .unwrap()
        .read_to_end(&mut empty)
        .unwrap();
    assert!(empty.is_empty());
}

#[test]
fn lists_and_globs_a_bucket() {
    let r = Remote::new(&[
        ("b.bin", b"bb"),
        ("a.bin", b"a"),
        (".hidden.bin", b"h"),
        ("c.idx", b"ccc"),
        ("sub/d.bin", b"dddd"),
        ("sub2/e.bin", b"eeeee"),
        ("sub2/f.idx", b"f"),
    ]);
    let s = &r.storage;
    let root = Address::parse("s3://data/").unwrap();
    let listed = s.list(&root).unwrap();
    let names: Vec<_> = listed.iter().map(|e| e.address.as_str()).collect();
    assert_eq!(
        names,
        ["s3://data/a.bin", "s3://data/b.bin", "s3://data/c.idx"]
    );
    assert_eq!(listed[1].size, 2);
    let sub = s.list(&Address::parse("s3://data/sub").unwrap()).unwrap();
    assert_eq!(sub.len(), 1);
    assert_eq!(sub[0].address.as_str(), "s3://data/sub/d.bin");
    assert!(
        s.list(&Address::parse("s3://data/nothing/").unwrap())
            .unwrap()
            .is_empty()
    );

    let found = s.glob("s3://data/*.bin").unwrap();
    let names: Vec<_> = found.iter().map(|e| e.address.as_str()).collect();
    assert_eq!(names, ["s3://data/a.bin", "s3://data/b.bin"]);
    let deep = s.glob("s3://data/sub*/*.bin").unwrap();
    let names: Vec<_> = deep.iter().map(|e| e.address.as_str()).collect();
    assert_eq!(names, ["s3://data/sub/d.bin", "s3://data/sub2/e.bin"]);
    assert_eq!(deep[1].size, 5);
    let one = s.glob("s3://data/sub2/?.idx").unwrap();
    assert_eq!(one.len(), 1);
    // The objects found open as they are named.
    assert_eq!(&s.read_all(&one[0].address).unwrap()[..], b"f");
}

#[test]
fn stat_and_read_all() {
    let r = Remote::new(&[("spec.json", b"{\"x\": 1}"), ("dir/k", b"k")]);
    let s = &r.storage;
    let meta = s.stat(&r.addr("spec.json")).unwrap().unwrap();
    assert_eq!((meta.size, meta.is_dir), (8, false));
    assert!(s.stat(&r.addr("dir")).unwrap().unwrap().is_dir);
    assert!(s.stat(&r.addr("dir/")).unwrap().unwrap().is_dir);
    assert_eq!(s.stat(&r.addr("missing")).unwrap(), None);
    let faults = r.server.faults();
    faults.reset_counts();
    assert_eq!(
        &s.read_all(&r.addr("spec.json")).unwrap()[..],
        b"{\"x\": 1}"
    );
    assert_eq!(faults.counts().requests, 1);
    assert!(matches!(
        s.read_all(&r.addr("missing")),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        s.open(&r.addr("missing")),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn a_multipart_upload_appears_only_on_commit() {
    let r = Remote::new(&[]);
    let storage = r.storage.clone().with_part_size(5 << 20);
    let addr = r.addr("out/big.ffrecord");
    let data = pattern(11 << 20, 8);
    let faults = r.server.faults();
    let mut w = storage.create(&addr).unwrap();
    w.write_all(&[0; 16]).unwrap();
    w.write_all(&data[16..]).unwrap();
    // The header is written last, as FFRecord's writer does.
    w.seek(SeekFrom::Start(0)).unwrap();
    w.write_all(&data[..16]).unwrap();
    w.seek(SeekFrom::Start(0)).unwrap();
    let mut head = [0; 16];
    w.read_exact(&mut head).unwrap();
    assert_eq!(&head, &data[..16]);
    assert_eq!(storage.stat(&addr).unwrap(), None);
    faults.reset_counts();
    w.commit().unwrap();
    let counts = faults.counts();
    // Start and complete, and three parts.
    assert_eq!((counts.posts, counts.puts), (2, 3), "{counts:?}");
    let object = storage.open(&addr).unwrap();
    assert_eq!(object.size(), data.len() as u64);
    assert!(
        storage.read_all(&addr).unwrap() == data,
        "uploaded bytes differ"
    );
}

#[test]
fn a_small_upload_is_one_request_and_a_dropped_writer_leaves_nothing() {
    let r = Remote::new(&[]);
    let faults = r.server.faults();
    let addr = r.addr("small.idx");
    let mut w = r.storage.create(&addr).unwrap();
    w.write_all(b"0123").unwrap();
    faults.reset_counts();
    w.commit().unwrap();
    assert_eq!(faults.counts().puts, 1);
    assert_eq!(&r.storage.read_all(&addr).unwrap()[..], b"0123");

    let gone = r.addr("dropped.bin");
    let mut w = r.storage.create(&gone).unwrap();
    w.write_all(&pattern(6 << 20, 9)).unwrap();
    faults.reset_counts();
    drop(w);
    assert_eq!(faults.requests(), 0);
    assert_eq!(r.storage.stat(&gone).unwrap(), None);
    let names: Vec<_> = std::fs::read_dir(r.bucket_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["small.idx"]);
}

#[test]
fn remove_deletes_an_object() {
    let r = Remote::new(&[("x", b"x")]);
    let addr = r.addr("x");
    r.storage.remove(&addr).unwrap();
    assert_eq!(r.storage.stat(&addr).unwrap(), None);
    r.storage.remove(&addr).unwrap();
}

#[test]
fn plain_http_cannot_list() {
    let addr = Address::parse("http://127.0.0.1:9/files/").unwrap();
    assert!(matches!(
        Storage::new().list(&addr),
        Err(Error::Unsupported {
            what: "listing over plain HTTP",
            ..
        })
    ));
    assert!(matches!(
        Storage::new().glob("http://127.0.0.1:9/files/*.bin"),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
fn a_streaming_upload_sends_parts_as_they_fill() {
    let r = Remote::new(&[]);
    let storage = r
        .storage
        .clone()
        .with_part_size(5 << 20)
        .with_concurrency(2);
    let faults = r.server.faults();
    let addr = r.addr("streamed.tfrecord");
    let data = pattern(11 << 20, 10);
    let mut w = storage.create_streaming(&addr).unwrap();
    for chunk in data.chunks(1 << 20) {
        w.write_all(chunk).unwrap();
    }
    assert_eq!(w.stream_position().unwrap(), data.len() as u64);
    assert!(w.seek(SeekFrom::Start(0)).is_err());
    assert!(w.read(&mut [0; 4]).is_err());
    // Two full parts go up in the background; the object is not there yet.
    let t = std::time::Instant::now();
    while faults.counts().puts < 2 && t.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let before = faults.counts();
    assert_eq!((before.posts, before.puts), (1, 2), "{before:?}");
    assert_eq!(storage.stat(&addr).unwrap(), None);
    w.commit().unwrap();
    let after = faults.counts();
    assert_eq!((after.posts, after.puts), (2, 3), "{after:?}");
    assert!(
        storage.read_all(&addr).unwrap() == data,
        "uploaded bytes differ"
    );

    // Small: one request on commit.
    let small = r.addr("small.bin");
    let mut w = storage.create_streaming(&small).unwrap();
    w.write_all(b"tiny").unwrap();
    faults.reset_counts();
    w.commit().unwrap();
    assert_eq!((faults.counts().puts, faults.counts().posts), (1, 0));
    assert_eq!(&storage.read_all(&small).unwrap()[..], b"tiny");

    // Dropped after a part: the upload is aborted and nothing is left.
    let dropped = r.addr("dropped.bin");
    let mut w = storage.create_streaming(&dropped).unwrap();
    w.write_all(&data[..6 << 20]).unwrap();
    faults.reset_counts();
    drop(w);
    assert_eq!(faults.counts().deletes, 1);
    assert_eq!(storage.stat(&dropped).unwrap(), None);
    let leftovers: Vec<_> = std::fs::read_dir(r.server.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(".upload"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn lists_more_than_a_page() {
    let names: Vec<String> = (0..1100).map(|i| format!("many/f{i:05}.bin")).collect();
    let objects: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
    let r = Remote::new(&objects);
    let listed = r.storage.list(&r.addr("many/")).unwrap();
    assert_eq!(listed.len(), 1100);
    assert_eq!(listed[1099].address.as_str(), "s3://data/many/f01099.bin");
    assert_eq!(
        r.storage.glob("s3://data/many/f010*.bin").unwrap().len(),
        100
    );
}
