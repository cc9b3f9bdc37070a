//! Hostile inputs: lengths and counts that claim far more than is there,
//! bad varints, and decompression bombs. Each is an error naming the
//! block, and none allocates by the claimed size: the claims here are
//! made under [`Limits::unlimited`] and go up to 2^61 bytes, which no
//! allocator could satisfy, so a test that returns at all did not try.

use std::sync::Arc;

use grist_avro_tensor::{
    BlockDecoder, BlockReader, Codec, ContainerWriter, Decoded, Error, Header, Location,
    ReaderOptions, SYNC_LEN, WriterOptions,
};
use grist_tensor::Limits;

const SYNC: [u8; SYNC_LEN] = [0xab; SYNC_LEN];

/// A zig-zag varint.
fn long(v: i64) -> Vec<u8> {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    let mut out = Vec::new();
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
    out
}

/// A valid header for `schema` with `codec`.
fn header(codec: Codec) -> Vec<u8> {
    let options = WriterOptions::default()
        .with_codec(codec)
        .with_sync_marker(SYNC);
    ContainerWriter::new(Vec::new(), r#""bytes""#, options)
        .unwrap()
        .finish_into_inner()
        .unwrap()
        .0
}

fn read_all(bytes: &[u8], limits: Limits) -> Result<Vec<u64>, Error> {
    let options = ReaderOptions::default().with_limits(limits);
    let mut reader = BlockReader::new(bytes, "hostile", options)?;
    let mut counts = Vec::new();
    while let Some(b) = reader.next_block()? {
        counts.push(b.record_count);
    }
    Ok(counts)
}

#[test]
fn huge_block_size_with_few_bytes_is_truncated() {
    for size in [1i64 << 30, 1 << 40, 1 << 61] {
        let mut file = header(Codec::Null);
        file.extend(long(1));
        file.extend(long(size));
        file.extend_from_slice(b"only a few bytes");
        match read_all(&file, Limits::unlimited()) {
            Err(Error::TruncatedBlock { at, reason }) => {
                assert_eq!(at.block.unwrap(), 0);
                assert_eq!(reason, "the file ends inside the block data");
            }
            other => panic!("{size}: expected TruncatedBlock, got {other:?}"),
        }
        // Under default limits the largest ones are refused outright.
        if size > 4 << 30 {
            assert!(matches!(
                read_all(&file, Limits::default()),
                Err(Error::TooLarge { what: "block", .. })
            ));
        }
    }
}

#[test]
fn huge_record_count_is_the_decoders_to_check() {
    // A count needs no allocation: the block frames fine.
    let mut file = header(Codec::Null);
    file.extend(long(1 << 62));
    file.extend(long(2));
    file.extend_from_slice(&[2, 0x61]);
    file.extend_from_slice(&SYNC);
    assert_eq!(read_all(&file, Limits::unlimited()).unwrap(), [1 << 62]);
}

#[test]
fn bad_block_varints() {
    let cases: [(&str, Vec<u8>); 5] = [
        ("negative count", [long(-1), long(0)].concat()),
        ("negative size", [long(1), long(-5)].concat()),
        ("eleven-byte count", [vec![0xff; 10], vec![0x01]].concat()),
        ("overflowing count", [vec![0xff; 9], vec![0x7f]].concat()),
        ("eleven-byte size", [long(1), vec![0x80; 11]].concat()),
    ];
    for (what, block) in cases {
        let mut file = header(Codec::Null);
        file.extend_from_slice(&block);
        file.extend_from_slice(&SYNC);
        match read_all(&file, Limits::unlimited()) {
            Err(Error::BadBlock { at, .. }) => assert_eq!(at.block.unwrap(), 0, "{what}"),
            other => panic!("{what}: expected BadBlock, got {other:?}"),
        }
    }
    // A second block is named as such.
    let mut file = header(Codec::Null);
    file.extend([long(1), long(1), vec![0], SYNC.to_vec(), long(-3)].concat());
    assert!(matches!(
        read_all(&file, Limits::unlimited()),
        Err(Error::BadBlock { at, .. }) if at.block.unwrap() == 1
    ));
}

#[test]
fn sans_io_decoder_asks_only_for_what_it_can_check() {
    let mut d = BlockDecoder::new("hostile", SYNC).with_limits(Limits::unlimited());
    let mut buf = long(1);
    buf.extend(long(1 << 61));
    // The whole block is needed, as a number: nothing is allocated.
    assert_eq!(
        d.decode(&buf).unwrap(),
        Decoded::Incomplete {
            needed: buf.len() as u64 + (1 << 61) + 16
        }
    );
    let small = BlockDecoder::new("hostile", SYNC)
        .with_limits(Limits::default().with_max_alloc_bytes(1000))
        .decode(&buf);
    assert!(matches!(small, Err(Error::TooLarge { size, max: 1000, .. }) if size == 1 << 61));
}

#[test]
fn huge_metadata_lengths_with_few_bytes() {
    // A metadata value claiming 2^61 bytes.
    let mut file = b"Obj\x01".to_vec();
    file.extend(long(1));
    file.extend(long(11));
    file.extend_from_slice(b"avro.schema");
    file.extend(long(1 << 61));
    file.extend_from_slice(b"\"long\"");
    match Header::parse(&file, "hostile", &Limits::unlimited()) {
        Ok(Decoded::Incomplete { needed }) => assert!(needed > 1 << 61),
        other => panic!("expected Incomplete, got {other:?}"),
    }
    assert!(matches!(
        Header::parse(&file, "hostile", &Limits::default()),
        Err(Error::TooLarge { .. })
    ));
    let options = ReaderOptions::default().with_limits(Limits::unlimited());
    assert!(matches!(
        BlockReader::new(&file[..], "hostile", options),
        Err(Error::BadHeader { .. })
    ));
    // A map block count of 2^62 entries, with a few bytes of them.
    let mut file = b"Obj\x01".to_vec();
    file.extend(long(1 << 62));
    file.extend_from_slice(&[2, b'a', 2, b'b']);
    assert!(matches!(
        Header::parse(&file, "hostile", &Limits::unlimited()),
        Ok(Decoded::Incomplete { .. })
    ));
    assert!(matches!(
        BlockReader::new(&file[..], "hostile", ReaderOptions::default()),
        Err(Error::BadHeader { .. })
    ));
}

#[test]
fn bad_headers() {
    let schema_entry = |value: &[u8]| {
        let mut e = long(11);
        e.extend_from_slice(b"avro.schema");
        e.extend(long(value.len() as i64));
        e.extend_from_slice(value);
        e
    };
    let build = |entries: &[Vec<u8>]| {
        let mut file = b"Obj\x01".to_vec();
        file.extend(long(entries.len() as i64));
        for e in entries {
            file.extend_from_slice(e);
        }
        file.extend(long(0));
        file.extend_from_slice(&SYNC);
        file
    };
    let parse = |file: &[u8]| Header::parse(file, "h", &Limits::default());
    // Fine: a negative map block count (with its byte size) is allowed.
    let entry = schema_entry(b"\"int\"");
    let mut negative = b"Obj\x01".to_vec();
    negative.extend(long(-1));
    negative.extend(long(entry.len() as i64));
    negative.extend_from_slice(&entry);
    negative.extend(long(0));
    negative.extend_from_slice(&SYNC);
    assert!(matches!(parse(&negative), Ok(Decoded::Complete { .. })));

    let no_schema = build(&[]);
    let bad_json = build(&[schema_entry(b"{")]);
    let not_utf8 = build(&[schema_entry(b"\xff")]);
    let mut bad_key = long(1);
    bad_key.push(0xff);
    bad_key.extend(long(0));
    let bad_key = build(&[schema_entry(b"\"int\""), bad_key]);
    for (what, file) in [
        ("no schema", no_schema),
        ("bad JSON", bad_json),
        ("non-UTF-8 schema", not_utf8),
        ("non-UTF-8 key", bad_key),
    ] {
        assert!(
            matches!(parse(&file), Err(Error::BadHeader { .. })),
            "{what}: {:?}",
            parse(&file)
        );
    }
    // An unknown codec.
    let mut codec = long(10);
    codec.extend_from_slice(b"avro.codec");
    codec.extend(long(3));
    codec.extend_from_slice(b"lz4");
    let file = build(&[schema_entry(b"\"int\""), codec]);
    match parse(&file) {
        Err(Error::UnsupportedCodec { file, codec, .. }) => {
            assert_eq!((&*file, &*codec), ("h", "lz4"));
        }
        other => panic!("expected UnsupportedCodec, got {other:?}"),
    }
    // Empty and short files.
    for short in [&b""[..], b"O", b"Obj"] {
        assert!(matches!(
            BlockReader::new(short, "h", ReaderOptions::default()),
            Err(Error::BadMagic { .. })
        ));
    }
    assert!(matches!(
        BlockReader::new(&b"Obj\x01"[..], "h", ReaderOptions::default()),
        Err(Error::BadHeader { .. })
    ));
}

/// A file of one block holding `data` as one record, with `codec`.
fn one_block(codec: Codec, data: &[u8]) -> Vec<u8> {
    let options = WriterOptions::default().with_codec(codec);
    let mut w = ContainerWriter::new(Vec::new(), r#""bytes""#, options).unwrap();
    w.append_block(1, data).unwrap();
    w.finish_into_inner().unwrap().0
}

#[test]
fn decompression_bombs_hit_the_limit() {
    let zeros = vec![0u8; 2 << 20];
    let limits = Limits::default().with_max_alloc_bytes(256 << 10);
    for codec in Codec::ALL.into_iter().filter(|c| *c != Codec::Null) {
        let file = one_block(codec, &zeros);
        // Snappy inflates at most about 21-fold; the others are real bombs.
        let ratio = if codec == Codec::Snappy { 16 } else { 128 };
        assert!(
            file.len() < zeros.len() / ratio,
            "{codec}: {} bytes",
            file.len()
        );
        match read_all(&file, limits) {
            // xz's 8 MiB dictionary (preset 6) is refused before any output.
            Err(Error::TooLarge { at, what, .. }) => {
                let expected = if codec == Codec::Xz {
                    "decoder window (over the bound)"
                } else {
                    "decompressed block"
                };
                assert_eq!((at.block.unwrap(), what), (0, expected), "{codec}");
            }
            other => panic!("{codec}: expected TooLarge, got {other:?}"),
        }
        // With room, the same file reads.
        assert_eq!(read_all(&file, Limits::default()).unwrap(), [1], "{codec}");
    }
}

#[test]
fn xz_bomb_with_a_small_dictionary_hits_the_output_limit() {
    let zeros = vec![0u8; 2 << 20];
    let mut stored = Vec::new();
    let mut enc =
        lzma_rust2::XzWriter::new(&mut stored, lzma_rust2::XzOptions::with_preset(0)).unwrap();
    std::io::Write::write_all(&mut enc, &zeros).unwrap();
    enc.finish().unwrap();
    assert!(stored.len() < 4096, "{}", stored.len());
    let at = Location::block(Arc::from("bomb"), 2);
    let limits = Limits::default().with_max_alloc_bytes(1 << 20);
    assert!(matches!(
        Codec::Xz.decompress(&stored, 0, &limits, &at),
        Err(Error::TooLarge { at, what: "decompressed block", .. }) if at.block.unwrap() == 2
    ));
    let back = Codec::Xz
        .decompress(&stored, 0, &Limits::default(), &at)
        .unwrap();
    assert_eq!(back.len(), zeros.len());
}

#[test]
fn zstd_bomb_without_a_content_size() {
    // A streamed frame does not declare its size up front: the output
    // buffer is what stops it.
    let zeros = vec![0u8; 4 << 20];
    let mut stored = Vec::new();
    {
        let mut enc = zstd::stream::write::Encoder::new(&mut stored, 3).unwrap();
        std::io::Write::write_all(&mut enc, &zeros).unwrap();
        enc.finish().unwrap();
    }
    assert!(matches!(
        zstd::zstd_safe::get_frame_content_size(&stored),
        Ok(None)
    ));
    let at = Location::block(Arc::from("bomb"), 3);
    let limits = Limits::default().with_max_alloc_bytes(1 << 20);
    assert!(matches!(
        Codec::Zstandard.decompress(&stored, 0, &limits, &at),
        Err(Error::TooLarge { at, .. }) if at.block.unwrap() == 3
    ));
    assert_eq!(
        Codec::Zstandard
            .decompress(&stored, 0, &Limits::default(), &at)
            .unwrap()
            .len(),
        zeros.len()
    );
}

#[test]
fn snappy_length_claims_are_checked_before_allocating() {
    let at = Location::block(Arc::from("s"), 0);
    // A snappy preamble claiming 2^32 - 1 bytes, then one literal byte and
    // a CRC.
    let mut block = vec![0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, b'x'];
    block.extend_from_slice(&[0, 0, 0, 0]);
    assert!(matches!(
        Codec::Snappy.decompress(&block, 0, &Limits::unlimited(), &at),
        Err(Error::Decompress { .. })
    ));
    assert!(matches!(
        Codec::Snappy.decompress(
            &block,
            0,
            &Limits::default().with_max_alloc_bytes(1000),
            &at
        ),
        Err(Error::TooLarge { .. })
    ));
    // A wrong CRC.
    let mut stored = Vec::new();
    Codec::Snappy
        .compress(b"hello hello hello", &mut stored)
        .unwrap();
    let last = stored.len() - 1;
    stored[last] ^= 1;
    assert!(matches!(
        Codec::Snappy.decompress(&stored, 0, &Limits::default(), &at),
        Err(Error::Decompress { reason, .. }) if reason.contains("CRC")
    ));
    // Shorter than the CRC.
    assert!(matches!(
        Codec::Snappy.decompress(&[1, 2], 0, &Limits::default(), &at),
        Err(Error::Decompress { .. })
    ));
}

#[test]
fn corrupt_and_cut_streams_of_every_codec() {
    let data: Vec<u8> = (0..20_000u32)
        .flat_map(|i| (i * 31 % 1000).to_le_bytes())
        .collect();
    let at = Location::block(Arc::from("c"), 5);
    for codec in Codec::ALL.into_iter().filter(|c| *c != Codec::Null) {
        let mut stored = Vec::new();
        codec.compress(&data, &mut stored).unwrap();
        // Cut in half: the stream ends early.
        let cut = &stored[..stored.len() / 2];
        match codec.decompress(cut, 0, &Limits::default(), &at) {
            Err(Error::Decompress {
                at, codec: name, ..
            }) => {
                assert_eq!((at.block.unwrap(), name), (5, codec.name()));
            }
            other => panic!(
                "{codec}: expected Decompress, got {:?}",
                other.map(|v| v.len())
            ),
        }
        // Garbage: an error, never a panic.
        let garbage: Vec<u8> = stored.iter().map(|b| b.wrapping_mul(167) ^ 0x5a).collect();
        assert!(
            codec
                .decompress(&garbage, 0, &Limits::default(), &at)
                .is_err()
        );
    }
}
