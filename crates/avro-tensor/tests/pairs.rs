//! Deflate blocks are inflated two at a time (`Codec::decompress_two_bytes`,
//! which `BlockReader` uses): the pair must give what one block at a time
//! gives (libdeflate), errors included, and the reader's counters and
//! errors must not show that a block was read ahead.

use grist_avro_tensor::{
    BlockDecoder, BlockReader, Codec, ContainerWriter, Decoded, Error, Header, Location,
    ReaderOptions, WriterOptions,
};
use grist_tensor::Limits;

/// A deflate file of many blocks: records that compress a little (ints
/// and repeats) and some that do not.
fn file() -> Vec<u8> {
    let options = WriterOptions::default()
        .with_codec(Codec::Deflate)
        .with_sync_interval(3_000)
        .with_sync_marker([7; 16]);
    let mut w = ContainerWriter::new(Vec::new(), r#""bytes""#, options).unwrap();
    let mut x = 88172645463325252u64;
    for i in 0..2_000u32 {
        let len = 20 + (i % 97) as usize;
        let mut d = vec![(len as u8) << 1];
        for k in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            d.push(if i % 3 == 0 { (k % 5) as u8 } else { x as u8 });
        }
        w.append_datum(&d).unwrap();
    }
    w.finish_into_inner().unwrap().0
}

/// Each block's stored data range in `bytes`.
fn stored_ranges(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let Decoded::Complete { value: header, len } =
        Header::parse(bytes, "f", &Limits::default()).unwrap()
    else {
        panic!("header")
    };
    let mut decoder = BlockDecoder::new("f", header.sync).with_position(0, len as u64);
    let (mut at, mut out) = (len, Vec::new());
    while at < bytes.len() {
        let Decoded::Complete { value, len } = decoder.decode(&bytes[at..]).unwrap() else {
            panic!("block")
        };
        out.push(at + value.data.start..at + value.data.end);
        at += len;
    }
    out
}

#[test]
fn pairs_read_like_single_blocks_with_honest_counters() {
    let bytes = file();
    let ranges = stored_ranges(&bytes);
    assert!(ranges.len() > 20, "{} blocks", ranges.len());
    // Small reads too: the second block of a pair then needs another read.
    for buffer in [64, 5_000, 1 << 20] {
        let options = ReaderOptions::default().with_buffer_size(buffer);
        let mut reader = BlockReader::new(&bytes[..], "f", options).unwrap();
        let mut records = 0;
        for (i, range) in ranges.iter().enumerate() {
            let block = reader.next_block().unwrap().expect("a block");
            let at = Location::block("f", i as u64);
            let want = Codec::Deflate
                .decompress(&bytes[range.clone()], 0, &Limits::default(), &at)
                .unwrap();
            assert_eq!(block.data, want, "buffer {buffer}, block {i}");
            assert_eq!((block.index, block.first_record), (i as u64, records));
            records += block.record_count;
            assert_eq!(reader.blocks_read(), i as u64 + 1, "buffer {buffer}");
            assert_eq!(reader.records_read(), records, "buffer {buffer}");
        }
        assert!(reader.next_block().unwrap().is_none());
    }
}

#[test]
fn a_damaged_block_fails_in_its_turn_whether_first_or_second_of_a_pair() {
    let bytes = file();
    let ranges = stored_ranges(&bytes);
    for damaged in [4, 5] {
        let mut bad = bytes.clone();
        // A reserved block type (11) in the first block header byte.
        bad[ranges[damaged].start] |= 0b110;
        let mut reader = BlockReader::new(&bad[..], "f", ReaderOptions::default()).unwrap();
        for i in 0..damaged {
            let block = reader.next_block().unwrap().expect("an intact block");
            assert_eq!(block.index, i as u64);
        }
        assert_eq!(reader.blocks_read(), damaged as u64);
        let err = reader.next_block().unwrap_err();
        match &err {
            Error::Decompress { at, .. } => assert_eq!(at.block.unwrap(), damaged as u64, "{err}"),
            other => panic!("block {damaged}: {other}"),
        }
        assert!(
            reader.next_block().unwrap().is_none(),
            "ends after the error"
        );
    }
}

#[test]
fn two_at_a_time_agrees_with_one_at_a_time_on_damaged_streams() {
    let bytes = file();
    let ranges = stored_ranges(&bytes);
    let limits = Limits::default();
    let at = Location::block("f", 0);
    let mut x = 1u64;
    let mut failures = 0;
    for round in 0..3_000 {
        let a = bytes[ranges[round % ranges.len()].clone()].to_vec();
        let mut b = bytes[ranges[(round * 7 + 1) % ranges.len()].clone()].to_vec();
        for _ in 0..1 + round % 3 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (x >> 33) as usize % b.len();
            b[i] ^= 1 << (x % 8);
        }
        if round % 5 == 0 {
            b.truncate((x >> 40) as usize % b.len());
        }
        let [pa, pb] = Codec::Deflate.decompress_two_bytes([&a, &b], 0, &limits, [&at, &at]);
        let one_a = Codec::Deflate.decompress(&a, 0, &limits, &at).unwrap();
        assert_eq!(pa.unwrap(), one_a);
        match (pb, Codec::Deflate.decompress(&b, 0, &limits, &at)) {
            (Ok(two), Ok(one)) => assert_eq!(two, one, "round {round}"),
            (Err(Error::Decompress { .. }), Err(Error::Decompress { .. })) => failures += 1,
            (two, one) => panic!("round {round}: two at a time {two:?}, one at a time {one:?}"),
        }
    }
    assert!(failures > 100, "{failures} damaged streams failed");
}
