//! The format crates' writers on object store URLs (`create_at` with a
//! storage and an address): an object appears only when its writer
//! finishes, holds the bytes the same writer writes to a local file, and a
//! writer dropped unfinished leaves nothing; the readers' `open_at` read
//! the objects back.

use std::path::Path;

use grist::io::{Address, MIN_PART_SIZE};
use grist::tensor::Input;
use grist_testkit::S3Server;

/// A server with an empty bucket `out`; its folder on disk.
fn server() -> (S3Server, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let server = S3Server::start(root.path());
    server.bucket("out");
    (server, root)
}

/// The files under `dir` (hidden ones left out), by relative path.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            out.extend(files(&path).into_iter().map(|f| format!("{name}/{f}")));
        } else {
            out.push(name);
        }
    }
    out.sort();
    out
}

fn url(server: &S3Server, key: &str) -> Address {
    Address::parse(&server.url("out", key)).unwrap()
}

fn records(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("record {i} ").repeat(1 + i % 7).into_bytes())
        .collect()
}

#[test]
fn tfrecord_files_and_indexes() {
    use grist::tfrecord::{
        IndexedReader, ReaderOptions, RecordReader, RecordWriter, WriterOptions,
    };
    let (server, root) = server();
    let bucket = root.path().join("out");
    let storage = server.storage();
    let local = tempfile::tempdir().unwrap();
    let data = records(50);
    for (name, index) in [("a.tfrecord", true), ("b.tfrecord.gz", false)] {
        let options = WriterOptions::default().with_index(index);
        let path = local.path().join(name);
        let mut w = RecordWriter::create(&path, options.clone()).unwrap();
        let mut r = RecordWriter::create_at(&storage, &url(&server, name), options).unwrap();
        for d in &data {
            w.write_record(d).unwrap();
            r.write_record(d).unwrap();
        }
        w.finish().unwrap();
        assert!(!bucket.join(name).exists(), "{name}: visible before finish");
        r.finish().unwrap();
        assert_eq!(
            std::fs::read(bucket.join(name)).unwrap(),
            std::fs::read(&path).unwrap(),
            "{name}"
        );
        let mut back =
            RecordReader::open_at(&storage, &url(&server, name), ReaderOptions::default()).unwrap();
        for d in &data {
            assert_eq!(back.next_record().unwrap(), Some(&d[..]));
        }
        assert_eq!(back.next_record().unwrap(), None);
    }
    let idx = "a.tfrecord.idx";
    assert_eq!(
        std::fs::read(bucket.join(idx)).unwrap(),
        std::fs::read(local.path().join(idx)).unwrap()
    );
    let indexed = IndexedReader::open_at(
        &storage,
        &url(&server, "a.tfrecord"),
        ReaderOptions::default(),
    )
    .unwrap();
    assert_eq!(&indexed.read(49).unwrap()[..], &data[49][..]);

    // Dropped unfinished: nothing; finish_into_inner of a file: refused,
    // nothing either.
    let mut w =
        RecordWriter::create_at(&storage, &url(&server, "c.tfrecord"), Default::default()).unwrap();
    w.write_record(b"x").unwrap();
    drop(w);
    let mut w =
        RecordWriter::create_at(&storage, &url(&server, "d.tfrecord"), Default::default()).unwrap();
    w.write_record(b"x").unwrap();
    assert!(matches!(
        w.finish_into_inner(),
        Err(grist::tfrecord::Error::Io { .. })
    ));
    assert_eq!(
        files(&bucket),
        ["a.tfrecord", "a.tfrecord.idx", "b.tfrecord.gz"]
    );
}

#[test]
fn avro_container_files() {
    use grist::avro::{
        BlockReader, Codec, ContainerWriter, DatumReader, ReaderOptions, WriterOptions,
    };
    let (server, root) = server();
    let bucket = root.path().join("out");
    let storage = server.storage();
    let local = tempfile::tempdir().unwrap();
    let options = WriterOptions::default()
        .with_codec(Codec::Deflate)
        .with_sync_interval(100)
        .with_sync_marker([7; 16]);
    let schema = r#""bytes""#;
    let data = records(200);
    let encode = |d: &[u8]| {
        // A bytes datum: its length (zig-zag) then the bytes.
        let mut out = vec![(d.len() as u8) << 1];
        assert!(d.len() < 64);
        out.extend_from_slice(d);
        out
    };
    let path = local.path().join("a.avro");
    let mut w = ContainerWriter::create(&path, schema, options.clone()).unwrap();
    let address = url(&server, "a.avro");
    let mut r = ContainerWriter::create_at(&storage, &address, schema, options).unwrap();
    for d in &data {
        w.append_datum(&encode(&d[..d.len().min(60)])).unwrap();
        r.append_datum(&encode(&d[..d.len().min(60)])).unwrap();
    }
    w.finish().unwrap();
    assert!(files(&bucket).is_empty(), "visible before finish");
    let summary = r.finish().unwrap();
    assert!(summary.blocks > 1);
    assert_eq!(
        std::fs::read(bucket.join("a.avro")).unwrap(),
        std::fs::read(&path).unwrap()
    );
    let mut blocks = BlockReader::open_at(&storage, &address, ReaderOptions::default()).unwrap();
    let mut n = 0;
    while let Some(b) = blocks.next_block().unwrap() {
        n += b.record_count;
    }
    assert_eq!(n, 200);
    let mut datums = DatumReader::open_at(&storage, &address, ReaderOptions::default()).unwrap();
    let first = datums.next_datum().unwrap().unwrap();
    assert_eq!(&first.data[1..], &data[0][..data[0].len().min(60)]);

    let mut w = ContainerWriter::create_at(
        &storage,
        &url(&server, "b.avro"),
        schema,
        WriterOptions::default(),
    )
    .unwrap();
    w.append_datum(&[0]).unwrap();
    drop(w);
    assert_eq!(files(&bucket), ["a.avro"]);
}

/// An FFRecord file larger than an upload part, with and without a count:
/// without one the samples are moved behind the header in the spool before
/// the upload.
#[test]
fn ffrecord_files_in_parts() {
    use grist::ffrecord::{FfrReader, FfrWriter, ReaderOptions, WriterOptions, encode_file};
    let (server, root) = server();
    let bucket = root.path().join("out");
    let storage = server.storage().with_part_size(MIN_PART_SIZE);
    let samples: Vec<Vec<u8>> = (0..130u32)
        .map(|i| {
            let mut s = vec![i as u8; 50_000];
            s[..4].copy_from_slice(&i.to_le_bytes());
            s
        })
        .collect();
    let expected = encode_file(samples.iter().map(|s| &s[..]));
    assert!(expected.len() > MIN_PART_SIZE);
    for (name, count) in [("known.ffr", Some(130)), ("unknown.ffr", None)] {
        let address = url(&server, name);
        let options = WriterOptions::default().with_count(count);
        let mut w = FfrWriter::create_at(&storage, &address, options).unwrap();
        for s in &samples {
            w.write_sample(s).unwrap();
        }
        assert!(!bucket.join(name).exists(), "{name}: visible before finish");
        w.finish().unwrap();
        assert!(
            std::fs::read(bucket.join(name)).unwrap() == expected,
            "{name}"
        );
        let reader =
            FfrReader::open_inputs(&[Input::new(&storage, address)], ReaderOptions::default())
                .unwrap();
        assert_eq!(&reader.read_one(129).unwrap().data[..], &samples[129][..]);
    }
    assert!(server.faults().counts().posts >= 2, "multipart uploads");
}

#[test]
fn ofrecord_datasets_under_a_prefix() {
    use grist::ofrecord::{DatasetWriter, Error, ReaderOptions, RecordReader};
    let (server, root) = server();
    let bucket = root.path().join("out");
    let storage = server.storage();
    let local = tempfile::tempdir().unwrap();
    let data = records(25);
    let prefix = url(&server, "ds/");
    let mut here = DatasetWriter::create(local.path().join("ds"))
        .unwrap()
        .with_records_per_part(10);
    let mut there = DatasetWriter::create_at(&storage, &prefix)
        .unwrap()
        .with_records_per_part(10);
    for d in &data {
        here.write_record(d).unwrap();
        there.write_record(d).unwrap();
    }
    here.finish().unwrap();
    assert_eq!(files(&bucket), ["ds/part-00000", "ds/part-00001"]);
    assert_eq!(there.finish().unwrap().parts, 3);
    for part in ["part-00000", "part-00001", "part-00002"] {
        assert_eq!(
            std::fs::read(bucket.join("ds").join(part)).unwrap(),
            std::fs::read(local.path().join("ds").join(part)).unwrap()
        );
    }
    let part = prefix.join("part-00002");
    let mut reader = RecordReader::open_at(&storage, &part, ReaderOptions::default()).unwrap();
    let mut n = 0;
    while let Some(r) = reader.next_record().unwrap() {
        assert_eq!(r.payload, &data[20 + n][..]);
        n += 1;
    }
    assert_eq!(n, 5);
    // Another dataset's parts are not mixed with these.
    let mut again = DatasetWriter::create_at(&storage, &prefix).unwrap();
    match again.write_record(b"x") {
        Err(Error::DatasetExists { file, .. }) => assert_eq!(file, "part-00000"),
        other => panic!("{other:?}"),
    }
    // The part in progress of a writer dropped unfinished is not left.
    let mut w = DatasetWriter::create_at(&storage, &url(&server, "other/")).unwrap();
    w.write_record(b"x").unwrap();
    drop(w);
    assert_eq!(files(&bucket).len(), 3);
}
