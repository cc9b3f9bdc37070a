//! Fuzzes TFRecord framing: the sans-I/O frame decoder, the streaming
//! reader in every compression mode (CRCs on and off, tiny buffers), the
//! chunk source, and write-then-read round trips of whatever was read.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use grist_tensor::{Limits, RecordSource};
use grist_tfrecord::{
    Compression, Decoded, FrameDecoder, ReaderOptions, RecordReader, RecordWriter, TfRecordSource,
};
use libfuzzer_sys::fuzz_target;

/// Small limits, so a fuzzed length can't make a run slow.
fn limits() -> Limits {
    Limits::default()
        .with_max_record_bytes(1 << 20)
        .with_max_alloc_bytes(4 << 20)
}

/// The payloads the frame decoder finds at the start of `data`.
fn decode_frames(data: &[u8]) -> Vec<Vec<u8>> {
    let mut decoder = FrameDecoder::new("fuzz").with_limits(limits());
    let mut rest = data;
    let mut payloads = Vec::new();
    loop {
        match decoder.decode(rest) {
            Ok(Decoded::Frame(frame)) => {
                payloads.push(rest[frame.payload].to_vec());
                rest = &rest[frame.len..];
            }
            Ok(Decoded::Incomplete { needed }) => {
                assert!(needed > rest.len() as u64);
                assert_eq!(decoder.finish(rest.len()).is_ok(), rest.is_empty());
                return payloads;
            }
            Err(e) => {
                assert!(e.location().is_some());
                return payloads;
            }
        }
    }
}

/// Reads `data` as a stream compressed with `compression`.
fn read(data: &[u8], compression: Compression, options: ReaderOptions) -> Vec<Vec<u8>> {
    let mut reader = RecordReader::new(data, "fuzz", compression, options).expect("codec built in");
    let mut records = Vec::new();
    while let Ok(Some(payload)) = reader.next_record() {
        records.push(payload.to_vec());
    }
    // Finished readers stay finished.
    assert!(matches!(reader.next_record(), Ok(None)));
    records
}

/// Writes `records` with `compression` and reads them back.
fn round_trip(records: &[Vec<u8>], compression: Compression) -> Vec<u8> {
    let mut writer = RecordWriter::with_compression(Vec::new(), compression).expect("codec");
    for r in records {
        writer.write_record(r).expect("in-memory write");
    }
    let (bytes, summary) = writer.finish_into_inner().expect("in-memory finish");
    assert_eq!(summary.records, records.len() as u64);
    let back = RecordReader::new(
        &bytes[..],
        "round trip",
        compression,
        ReaderOptions::default(),
    )
    .expect("codec")
    .records()
    .map(|r| r.expect("our own output reads back").to_vec())
    .collect::<Vec<_>>();
    assert_eq!(back, records);
    bytes
}

fn scratch_file() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("grist-fuzz-{}.tfrecord", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let frames = decode_frames(data);

    let compressions = [
        Compression::None,
        Compression::Gzip,
        Compression::Zlib,
        Compression::Zstd,
    ];
    let buffer = 64 + usize::from(data.first().copied().unwrap_or(0)) * 4;
    for compression in compressions.into_iter().filter(|c| c.is_enabled()) {
        for check_crc in [true, false] {
            let options = ReaderOptions::default()
                .with_limits(limits())
                .with_buffer_size(buffer)
                .with_check_crc(check_crc);
            let records = read(data, compression, options);
            if compression == Compression::None && check_crc {
                // The reader and the sans-I/O decoder agree...
                assert_eq!(records, frames);
                // ...and re-writing what was read gives back the same bytes.
                let bytes = round_trip(&records, compression);
                assert_eq!(&data[..bytes.len()], &bytes[..]);
            } else if !records.is_empty() && (check_crc || compression == Compression::None) {
                round_trip(&records, compression);
            }
        }
    }

    // The chunk source over the same bytes as a file: the same records.
    let path = scratch_file();
    if std::fs::write(path, data).is_ok() {
        let chunk_bytes = 16 + usize::from(data.get(1).copied().unwrap_or(0)) * 8;
        let mut source = TfRecordSource::new([path])
            .with_options(ReaderOptions::default().with_limits(limits()))
            .with_chunk_bytes(chunk_bytes);
        let mut records = Vec::new();
        while let Ok(Some(chunk)) = source.next_chunk() {
            assert_eq!(chunk.first_record, records.len() as u64);
            for i in 0..chunk.record_count {
                records.push(chunk.record(i).expect("span inside the chunk").to_vec());
            }
        }
        assert_eq!(records, frames);
        let _ = std::fs::remove_file(path);
    }
});
