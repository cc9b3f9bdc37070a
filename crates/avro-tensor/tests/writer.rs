//! The container writer: round trips through apache-avro's `Reader` (and
//! ours) for every codec, files written by apache-avro read by us, block
//! splitting by the sync interval, the header bytes, atomic files.

use std::fs;

use apache_avro::types::Value as AvroValue;
use grist_avro_tensor::{
    BlockReader, Codec, ContainerWriter, Decoded, Error, Header, ReaderOptions, WriterOptions,
};
use grist_tensor::Limits;
use grist_testkit::{dir_entries, temp_dir};

const SCHEMA: &str = r#"{
  "type": "record", "name": "Row", "namespace": "grist.test",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "vec", "type": {"type": "array", "items": "float"}},
    {"name": "blob", "type": "bytes"},
    {"name": "score", "type": ["null", "double"]}
  ]
}"#;

/// `n` rows of [`SCHEMA`], of varying sizes.
fn rows(n: usize) -> Vec<AvroValue> {
    (0..n)
        .map(|i| {
            let i64 = i as i64;
            AvroValue::Record(vec![
                ("id".into(), AvroValue::Long(i64 * 7919 - 1_000_000)),
                (
                    "name".into(),
                    AvroValue::String(format!("row-{i}-{}", "é".repeat(i % 5))),
                ),
                (
                    "vec".into(),
                    AvroValue::Array(
                        (0..i % 9)
                            .map(|k| AvroValue::Float(k as f32 * 0.5 - i as f32))
                            .collect(),
                    ),
                ),
                (
                    "blob".into(),
                    AvroValue::Bytes(vec![(i % 256) as u8; i % 40]),
                ),
                (
                    "score".into(),
                    if i % 3 == 0 {
                        AvroValue::Union(0, Box::new(AvroValue::Null))
                    } else {
                        AvroValue::Union(1, Box::new(AvroValue::Double(i as f64 / 3.0)))
                    },
                ),
            ])
        })
        .collect()
}

fn datums(rows: &[AvroValue]) -> Vec<Vec<u8>> {
    let schema = apache_avro::Schema::parse_str(SCHEMA).unwrap();
    rows.iter()
        .map(|r| apache_avro::to_avro_datum(&schema, r.clone()).unwrap())
        .collect()
}

fn enabled_codecs() -> impl Iterator<Item = Codec> {
    Codec::ALL.into_iter().filter(Codec::is_enabled)
}

#[test]
fn the_tests_have_every_codec() {
    // tests are built with the bzip2 and xz features (a dev-dependency on
    // this crate turns them on), so every corpus case is covered.
    assert!(Codec::ALL.iter().all(Codec::is_enabled));
}

#[test]
fn round_trip_through_apache_avro_for_every_codec() {
    let rows = rows(300);
    let datums = datums(&rows);
    for codec in enabled_codecs() {
        let options = WriterOptions::default()
            .with_codec(codec)
            .with_sync_interval(1000)
            .with_metadata("grist.test", "yes")
            .with_metadata("binary", vec![0u8, 255, 7]);
        let mut w = ContainerWriter::new(Vec::new(), SCHEMA, options).unwrap();
        for d in &datums {
            w.append_datum(d).unwrap();
        }
        assert_eq!(w.records(), 300);
        let (bytes, summary) = w.finish_into_inner().unwrap();
        assert_eq!(summary.records, 300);
        assert_eq!(summary.bytes, bytes.len() as u64);
        assert!(summary.blocks > 5, "{codec}: {} blocks", summary.blocks);

        // apache-avro reads it all back, metadata included.
        let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
        assert_eq!(reader.user_metadata()["grist.test"], b"yes");
        assert_eq!(reader.user_metadata()["binary"], vec![0u8, 255, 7]);
        let back: Vec<AvroValue> = reader.map(|v| v.unwrap()).collect();
        assert_eq!(back, rows, "{codec}");

        // So do we: the blocks are the datums, in order.
        let mut ours = BlockReader::new(&bytes[..], "mem", ReaderOptions::default()).unwrap();
        assert_eq!(ours.header().codec, codec);
        let mut all = Vec::new();
        let mut blocks = 0;
        while let Some(block) = ours.next_block().unwrap() {
            all.extend_from_slice(&block.data);
            blocks += 1;
        }
        assert_eq!(blocks, summary.blocks);
        assert_eq!(ours.records_read(), 300);
        assert_eq!(all, datums.concat(), "{codec}");
    }
}

#[test]
fn files_written_by_apache_avro_read_back() {
    let schema = apache_avro::Schema::parse_str(SCHEMA).unwrap();
    let rows = rows(200);
    let codecs = [
        (Codec::Null, apache_avro::Codec::Null),
        (
            Codec::Deflate,
            apache_avro::Codec::Deflate(apache_avro::DeflateSettings::default()),
        ),
        (Codec::Snappy, apache_avro::Codec::Snappy),
        (
            Codec::Zstandard,
            apache_avro::Codec::Zstandard(apache_avro::ZstandardSettings::default()),
        ),
        (
            Codec::Bzip2,
            apache_avro::Codec::Bzip2(apache_avro::Bzip2Settings::default()),
        ),
        (
            Codec::Xz,
            apache_avro::Codec::Xz(apache_avro::XzSettings::default()),
        ),
    ];
    for (ours, theirs) in codecs {
        let mut w = apache_avro::Writer::with_codec(&schema, Vec::new(), theirs);
        for (i, r) in rows.iter().enumerate() {
            w.append(r.clone()).unwrap();
            if i % 50 == 49 {
                w.flush().unwrap();
            }
        }
        let bytes = w.into_inner().unwrap();
        let mut reader = BlockReader::new(&bytes[..], "apache", ReaderOptions::default()).unwrap();
        assert_eq!(reader.header().codec, ours);
        assert_eq!(
            apache_avro::Schema::parse_str(&reader.header().schema_json).unwrap(),
            schema
        );
        let mut data = Vec::new();
        while let Some(block) = reader.next_block().unwrap() {
            data.extend_from_slice(&block.data);
        }
        assert_eq!(reader.records_read(), 200);
        assert_eq!(data, datums(&rows).concat(), "{ours}");
    }
}

#[test]
fn sync_interval_splits_blocks() {
    let datums = datums(&rows(500));
    let longest = datums.iter().map(Vec::len).max().unwrap();
    for interval in [1, 100, 1000, 64_000] {
        let options = WriterOptions::default().with_sync_interval(interval);
        let mut w = ContainerWriter::new(Vec::new(), SCHEMA, options).unwrap();
        for d in &datums {
            w.append_datum(d).unwrap();
        }
        let (bytes, summary) = w.finish_into_inner().unwrap();
        let mut reader = BlockReader::new(&bytes[..], "mem", ReaderOptions::default()).unwrap();
        let mut sizes = Vec::new();
        while let Some(block) = reader.next_block().unwrap() {
            sizes.push((block.record_count, block.data.len()));
        }
        assert_eq!(sizes.len() as u64, summary.blocks);
        let (last, full) = sizes.split_last().unwrap();
        for &(count, len) in full {
            // A block ends with the datum that reaches the interval.
            assert!(len >= interval, "{interval}: {len}");
            assert!(len < interval + longest, "{interval}: {len}");
            assert!(count >= 1);
        }
        assert!(last.1 > 0);
        if interval == 1 {
            assert_eq!(sizes.len(), datums.len());
        }
        if interval == 64_000 {
            // The default: everything fits one block.
            assert_eq!(sizes.len(), 1);
        }
    }
}

#[test]
fn flush_block_and_append_block() {
    let datums = datums(&rows(10));
    let mut w = ContainerWriter::new(
        Vec::new(),
        SCHEMA,
        WriterOptions::default().with_codec(Codec::Snappy),
    )
    .unwrap();
    w.flush_block().unwrap(); // nothing buffered: no block
    w.append_datum(&datums[0]).unwrap();
    w.append_datum(&datums[1]).unwrap();
    w.flush_block().unwrap();
    w.append_datum(&datums[2]).unwrap();
    w.append_block(7, &datums[3..].concat()).unwrap();
    let (bytes, summary) = w.finish_into_inner().unwrap();
    assert_eq!((summary.records, summary.blocks), (10, 3));
    let counts: Vec<u64> = BlockReader::new(&bytes[..], "mem", ReaderOptions::default())
        .unwrap()
        .blocks()
        .map(|b| b.unwrap().record_count)
        .collect();
    assert_eq!(counts, [2, 1, 7]);
    let back: Vec<AvroValue> = apache_avro::Reader::new(&bytes[..])
        .unwrap()
        .map(|v| v.unwrap())
        .collect();
    assert_eq!(back, rows(10));
}

#[test]
fn written_header_parses_back_byte_for_byte() {
    let sync = *b"0123456789abcdef";
    let options = WriterOptions::default()
        .with_codec(Codec::Deflate)
        .with_sync_marker(sync)
        .with_metadata("k", "v")
        .with_metadata("k", "replaced")
        .with_metadata("empty", "");
    let w = ContainerWriter::new(Vec::new(), SCHEMA, options.clone()).unwrap();
    assert_eq!(w.sync_marker(), sync);
    let (bytes, summary) = w.finish_into_inner().unwrap();
    assert_eq!(summary.blocks, 0);
    let Decoded::Complete { value, len } =
        Header::parse(&bytes, "mem", &Limits::default()).unwrap()
    else {
        panic!("incomplete")
    };
    assert_eq!(len, bytes.len());
    assert_eq!(value.schema_json, SCHEMA);
    assert_eq!(value.codec, Codec::Deflate);
    assert_eq!(value.sync, sync);
    assert_eq!(value.metadata.len(), 2);
    assert_eq!(value.metadata_str("k"), Some("replaced"));
    assert_eq!(value.metadata["empty"], b"");
    // The header layout: magic, a 4-entry map block, the sync marker.
    assert_eq!(&bytes[..5], b"Obj\x01\x08");
    assert_eq!(&bytes[len - 17..], b"\x000123456789abcdef");
    // The same options write the same bytes.
    let again = ContainerWriter::new(Vec::new(), SCHEMA, options)
        .unwrap()
        .finish_into_inner()
        .unwrap()
        .0;
    assert_eq!(again, bytes);
    // Without a fixed marker, every file gets its own.
    let a = ContainerWriter::new(Vec::new(), SCHEMA, WriterOptions::default()).unwrap();
    let b = ContainerWriter::new(Vec::new(), SCHEMA, WriterOptions::default()).unwrap();
    assert_ne!(a.sync_marker(), b.sync_marker());
}

#[test]
fn bad_writer_arguments() {
    assert!(matches!(
        ContainerWriter::new(Vec::new(), "{not json", WriterOptions::default()),
        Err(Error::BadHeader { .. })
    ));
    assert!(matches!(
        ContainerWriter::new(
            Vec::new(),
            r#"{"type": "record"}"#,
            WriterOptions::default()
        ),
        Err(Error::BadHeader { .. })
    ));
    for key in ["avro.codec", "avro.schema", "avro.other"] {
        let options = WriterOptions::default().with_metadata(key, "x");
        assert!(matches!(
            ContainerWriter::new(Vec::new(), SCHEMA, options),
            Err(Error::BadHeader { .. })
        ));
    }
}

#[test]
fn files_appear_only_when_finished() {
    let dir = temp_dir();
    let path = dir.path().join("out.avro");
    let datums = datums(&rows(50));

    // Dropped unfinished: nothing is left behind.
    let mut w = ContainerWriter::create(&path, SCHEMA, WriterOptions::default()).unwrap();
    w.append_datum(&datums[0]).unwrap();
    let names = dir_entries(dir.path());
    assert_eq!(names.len(), 1);
    assert!(names[0].starts_with(".out.avro.tmp-"), "{names:?}");
    drop(w);
    assert!(dir_entries(dir.path()).is_empty());

    // Finished: the file under its name, and nothing else.
    let options = WriterOptions::default()
        .with_codec(Codec::Zstandard)
        .with_sync_interval(200);
    let mut w = ContainerWriter::create(&path, SCHEMA, options).unwrap();
    for d in &datums {
        w.append_datum(d).unwrap();
    }
    assert!(!path.exists());
    let summary = w.finish().unwrap();
    assert_eq!(dir_entries(dir.path()), ["out.avro"]);
    assert_eq!(fs::metadata(&path).unwrap().len(), summary.bytes);
    let mut reader = BlockReader::open(&path, ReaderOptions::default()).unwrap();
    while reader.next_block().unwrap().is_some() {}
    assert_eq!(reader.records_read(), 50);

    // A failing create (bad schema) touches nothing.
    let other = dir.path().join("other.avro");
    assert!(ContainerWriter::create(&other, "nope", WriterOptions::default()).is_err());
    assert_eq!(dir_entries(dir.path()), ["out.avro"]);
}

/// A sink that fails after `budget` bytes.
struct Failing {
    budget: usize,
}

impl std::io::Write for Failing {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.budget {
            return Err(std::io::Error::other("disk full"));
        }
        self.budget -= buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failed_write_makes_the_writer_unusable() {
    let datums = datums(&rows(100));
    let options = WriterOptions::default()
        .with_sync_interval(1)
        .with_buffer_size(1);
    let mut w = ContainerWriter::new(Failing { budget: 2000 }, SCHEMA, options).unwrap();
    let failure = datums
        .iter()
        .find_map(|d| w.append_datum(d).err())
        .expect("the sink fills up");
    assert!(matches!(failure, Error::Io { .. }));
    assert!(matches!(w.append_datum(&datums[0]), Err(Error::Io { .. })));
    assert!(matches!(w.finish(), Err(Error::Io { .. })));
}

/// Buffer sizes far beyond the data are lowered: a few rows are written
/// and read back without a buffer of the size asked for (which would not
/// fit in memory).
#[test]
fn huge_buffer_sizes_are_lowered() {
    let dir = temp_dir();
    let path = dir.path().join("a.avro");
    let rows = rows(3);
    let mut w = ContainerWriter::create(
        &path,
        SCHEMA,
        WriterOptions::default().with_buffer_size(usize::MAX),
    )
    .unwrap();
    for d in datums(&rows) {
        w.append_datum(&d).unwrap();
    }
    w.finish().unwrap();
    let mut reader =
        BlockReader::open(&path, ReaderOptions::default().with_buffer_size(usize::MAX)).unwrap();
    let mut count = 0;
    while let Some(block) = reader.next_block().unwrap() {
        count += block.record_count;
    }
    assert_eq!(count, 3);
}
