//! Deflate blocks are inflated into pooled buffers that come back when a
//! block is dropped: a reused buffer (larger than the next block, holding
//! an older block's bytes) must never leak those bytes into later blocks.

use grist_avro_tensor::{BlockReader, Codec, ContainerWriter, ReaderOptions, WriterOptions};

/// Records of shrinking then growing sizes, so later blocks land in
/// buffers that held longer blocks.
fn datums() -> Vec<Vec<u8>> {
    (0..600u32)
        .map(|i| {
            let len = if i < 300 { 600 - i } else { i - 250 } as usize;
            // A bytes datum: zig-zag length, then bytes that differ per record.
            let mut d = Vec::new();
            let mut z = (len as u64) << 1;
            while z >= 0x80 {
                d.push((z as u8) | 0x80);
                z >>= 7;
            }
            d.push(z as u8);
            d.extend((0..len).map(|k| (k as u32 * 31 + i * 7) as u8));
            d
        })
        .collect()
}

fn write(codec: Codec, datums: &[Vec<u8>]) -> Vec<u8> {
    let options = WriterOptions::default()
        .with_codec(codec)
        .with_sync_interval(2_000)
        .with_sync_marker([9; 16]);
    let mut w = ContainerWriter::new(Vec::new(), r#""bytes""#, options).unwrap();
    for d in datums {
        w.append_datum(d).unwrap();
    }
    w.finish_into_inner().unwrap().0
}

#[test]
fn reused_inflate_buffers_hold_only_their_own_block() {
    let datums = datums();
    let plain = write(Codec::Null, &datums);
    let deflated = write(Codec::Deflate, &datums);
    // Twice, so the second pass starts with a full pool.
    for pass in 0..2 {
        let mut want = BlockReader::new(&plain[..], "plain", ReaderOptions::default()).unwrap();
        let mut got = BlockReader::new(&deflated[..], "deflate", ReaderOptions::default()).unwrap();
        let mut blocks = 0;
        loop {
            match (want.next_block().unwrap(), got.next_block().unwrap()) {
                (Some(w), Some(g)) => {
                    assert_eq!(g.data, w.data, "pass {pass}, block {}", w.index);
                    assert!(g.compressed);
                    blocks += 1;
                    // Both dropped here: the deflate buffer goes back.
                }
                (None, None) => break,
                (w, g) => panic!("block counts differ: {w:?} vs {g:?}"),
            }
        }
        assert!(blocks > 50, "{blocks} blocks");
    }
}
