//! Fuzzes the Avro object container layer: the sans-I/O `Header::parse`
//! and `BlockDecoder`, the streaming `BlockReader` (small limits, small
//! and odd buffer sizes), `AvroSource`, every codec's bounded
//! decompression, and the writer's `append_block`.
//!
//! Input: the bytes of a container file. For each input:
//!
//! - nothing may panic, and nothing allocates past the target's limits
//!   (4 MiB; the run's `-malloc_limit_mb` catches the rest);
//! - a prefix of a header or of a block is `Incomplete`, asking for more
//!   bytes than it has and no more than the whole thing;
//! - the sans-I/O path over the whole input and `BlockReader` agree: the
//!   same header, the same blocks (index, offset, record count, stored
//!   size, decompressed data) and the same error, if any; block numbers
//!   count up from 0, each block's offset is the previous one's plus its
//!   stored size, `first_record` sums the earlier counts and
//!   `records_read` is their total; after an error the reader stays done;
//! - `AvroSource` over the input as a file hands out the same blocks as
//!   chunks, and fails (at the same block) when the reader does;
//! - write-then-read: the blocks read are written again with
//!   `ContainerWriter::append_block` (the null codec, and the file's own
//!   codec when it is fast) and read back as the same blocks.
#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use grist_avro_tensor::{
    AvroSource, BlockDecoder, BlockReader, Codec, ContainerWriter, Decoded, Error, Header,
    Location, ReaderOptions, WriterOptions,
};
use grist_tensor::{Limits, RecordSource};
use libfuzzer_sys::fuzz_target;

fn limits() -> Limits {
    Limits::default()
        .with_max_record_bytes(1 << 20)
        .with_max_alloc_bytes(4 << 20)
}

/// One block as both paths see it.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    index: u64,
    offset: u64,
    record_count: u64,
    stored_bytes: u64,
    data: Vec<u8>,
}

/// What reading a file gave: the header (and its length), the blocks,
/// and the error that ended it.
#[derive(Debug, Default)]
struct Read {
    header: Option<(Header, u64)>,
    blocks: Vec<Seen>,
    error: Option<String>,
}

/// Checks that every prefix (some of them, for long inputs) of a whole
/// item of `len` bytes is incomplete.
fn prefixes_are_incomplete<T: std::fmt::Debug>(
    len: usize,
    mut parse: impl FnMut(usize) -> grist_avro_tensor::Result<Decoded<T>>,
) {
    let step = (len / 64).max(1);
    for k in (0..len).step_by(step).chain(len.checked_sub(1)) {
        match parse(k) {
            Ok(Decoded::Incomplete { needed }) => {
                assert!(
                    needed > k as u64 && needed <= len as u64,
                    "prefix {k} of {len} needs {needed}"
                );
            }
            other => panic!("prefix {k} of {len}: {other:?}"),
        }
    }
}

/// The sans-I/O path over the whole input.
fn sans_io(data: &[u8]) -> Read {
    let mut read = Read::default();
    let limits = limits();
    let (header, len) = match Header::parse(data, "fuzz", &limits) {
        Ok(Decoded::Complete { value, len }) => (value, len),
        Ok(Decoded::Incomplete { needed }) => {
            assert!(needed > data.len() as u64);
            return read;
        }
        Err(e) => {
            read.error = Some(e.to_string());
            return read;
        }
    };
    assert!(len <= data.len());
    prefixes_are_incomplete(len, |k| Header::parse(&data[..k], "fuzz", &limits));
    if let Err(e) = header.codec.check_enabled(&Arc::from("fuzz")) {
        read.error = Some(e.to_string());
        return read;
    }
    let mut decoder = BlockDecoder::new("fuzz", header.sync)
        .with_limits(limits)
        .with_position(0, len as u64);
    let mut rest = &data[len..];
    let mut offset = len as u64;
    loop {
        let probe = decoder.clone();
        match decoder.decode(rest) {
            Ok(Decoded::Complete { value, len }) => {
                assert_eq!(value.index, read.blocks.len() as u64);
                assert_eq!(value.offset, offset);
                assert!(value.data.end + grist_avro_tensor::SYNC_LEN == len);
                prefixes_are_incomplete(len, |k| probe.clone().decode(&rest[..k]));
                let at = Location::block("fuzz", value.index);
                match header
                    .codec
                    .decompress(&rest[value.data.clone()], 0, &limits, &at)
                {
                    Ok(out) => read.blocks.push(Seen {
                        index: value.index,
                        offset: value.offset,
                        record_count: value.record_count,
                        stored_bytes: len as u64,
                        data: out,
                    }),
                    Err(e) => {
                        assert_eq!(e.location().and_then(|l| l.block), Some(value.index));
                        read.error = Some(e.to_string());
                        break;
                    }
                }
                rest = &rest[len..];
                offset += len as u64;
                assert_eq!(
                    (decoder.block_index(), decoder.offset()),
                    (read.blocks.len() as u64, offset)
                );
            }
            Ok(Decoded::Incomplete { needed }) => {
                assert!(needed > rest.len() as u64);
                if let Err(e) = decoder.finish(rest) {
                    assert_eq!(
                        e.location().and_then(|l| l.block),
                        Some(read.blocks.len() as u64)
                    );
                    read.error = Some(e.to_string());
                } else {
                    assert!(rest.is_empty());
                }
                break;
            }
            Err(e) => {
                // An error does not advance the decoder.
                assert_eq!(decoder.block_index(), read.blocks.len() as u64);
                assert_eq!(
                    e.location().and_then(|l| l.block),
                    Some(read.blocks.len() as u64)
                );
                read.error = Some(e.to_string());
                break;
            }
        }
    }
    read.header = Some((header, len as u64));
    read
}

/// The streaming reader over `data`, reading `buffer` bytes at a time.
fn streaming(data: &[u8], buffer: usize) -> Read {
    let mut read = Read::default();
    let options = ReaderOptions::default()
        .with_limits(limits())
        .with_buffer_size(buffer);
    let mut reader = match BlockReader::new(data, "fuzz", options) {
        Ok(r) => r,
        Err(e) => {
            read.error = Some(e.to_string());
            return read;
        }
    };
    let mut records = 0u64;
    loop {
        match reader.next_block() {
            Ok(Some(b)) => {
                assert_eq!(b.first_record, records);
                records = records.saturating_add(b.record_count);
                assert_eq!(reader.records_read(), records);
                assert_eq!(reader.blocks_read(), b.index + 1);
                assert_eq!(b.compressed, reader.header().codec != Codec::Null);
                read.blocks.push(Seen {
                    index: b.index,
                    offset: b.offset,
                    record_count: b.record_count,
                    stored_bytes: b.stored_bytes,
                    data: b.data.to_vec(),
                });
            }
            Ok(None) => break,
            Err(e) => {
                read.error = Some(e.to_string());
                break;
            }
        }
    }
    // Finished readers stay finished.
    assert!(matches!(reader.next_block(), Ok(None)));
    read.header = Some(((**reader.header()).clone(), reader.header_len()));
    read
}

fn scratch_file() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("grist-fuzz-{}.avro", std::process::id()))
    })
}

/// Writes the blocks again with `codec` and reads them back.
fn rewrite(header: &Header, blocks: &[Seen], codec: Codec) {
    let mut options = WriterOptions::default()
        .with_codec(codec)
        .with_sync_marker(header.sync);
    for (k, v) in &header.metadata {
        if !k.starts_with("avro.") {
            options = options.with_metadata(k.clone(), v.clone());
        }
    }
    let mut w = ContainerWriter::new(Vec::new(), &header.schema_json, options)
        .expect("a header we read is a header we can write");
    for b in blocks {
        w.append_block(b.record_count, &b.data).expect("in memory");
    }
    let (bytes, summary) = w.finish_into_inner().expect("in memory");
    assert_eq!(summary.blocks, blocks.len() as u64);
    // Unlimited: blocks up to the limit grow by their compression.
    let options = ReaderOptions::default();
    let mut reader = BlockReader::new(&bytes[..], "rewritten", options).expect("our own header");
    assert_eq!(reader.header().schema_json, header.schema_json);
    assert_eq!(reader.header().sync, header.sync);
    assert_eq!(reader.header().codec, codec);
    for b in blocks {
        let again = reader
            .next_block()
            .expect("our own blocks read back")
            .expect("as many blocks as written");
        assert_eq!(
            (again.record_count, &again.data[..]),
            (b.record_count, &b.data[..])
        );
    }
    assert!(matches!(reader.next_block(), Ok(None)));
}

fuzz_target!(|data: &[u8]| {
    let whole = sans_io(data);
    let buffer = 64 + usize::from(data.last().copied().unwrap_or(0)) * 3;
    let stream = streaming(data, buffer);

    match (&whole.header, &stream.header) {
        (Some((a, alen)), Some((b, blen))) => {
            assert_eq!((a, alen), (b, blen));
            assert_eq!(whole.blocks, stream.blocks);
            assert_eq!(whole.error, stream.error);
        }
        (Some(_), None) => panic!("the reader fails on a good header: {:?}", stream.error),
        (None, Some(_)) => panic!("the reader reads a bad header: {:?}", whole.error),
        (None, None) => match &whole.error {
            Some(e) => assert_eq!(Some(e), stream.error.as_ref()),
            // The input ends inside the header.
            None => assert!(stream.error.is_some()),
        },
    }

    // The same bytes as a file, through AvroSource.
    let path = scratch_file();
    if std::fs::write(path, data).is_ok() {
        let mut source =
            AvroSource::new([path]).with_options(ReaderOptions::default().with_limits(limits()));
        let mut chunks = 0;
        let error = loop {
            match source.next_chunk() {
                Ok(Some(chunk)) => {
                    let b = &stream.blocks[chunks];
                    assert_eq!(
                        (
                            chunk.index,
                            chunk.first_record,
                            chunk.record_count as u64,
                            &chunk.data[..]
                        ),
                        (
                            b.index,
                            stream.blocks[..chunks]
                                .iter()
                                .map(|b| b.record_count)
                                .fold(0u64, u64::saturating_add),
                            b.record_count,
                            &b.data[..]
                        )
                    );
                    chunks += 1;
                }
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        assert_eq!(chunks, stream.blocks.len());
        assert_eq!(
            error.is_some(),
            stream.error.is_some(),
            "{error:?} vs {:?}",
            stream.error
        );
        if let Some(Error::Io { .. }) = error {
            panic!("reading a file we wrote: {error:?}");
        }
        let _ = std::fs::remove_file(path);
    }

    // Write-then-read of what was read.
    if let Some((header, _)) = &whole.header
        && (stream.error.is_none() || !stream.blocks.is_empty())
    {
        rewrite(header, &stream.blocks, Codec::Null);
        if matches!(
            header.codec,
            Codec::Deflate | Codec::Snappy | Codec::Zstandard
        ) {
            rewrite(header, &stream.blocks, header.codec);
        }
    }
});
