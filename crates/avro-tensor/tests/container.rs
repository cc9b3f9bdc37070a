//! The container layer against the golden corpus: every case's header
//! (schema, codec, metadata, sync marker) and blocks (index, offset,
//! record count, size on disk) as fastavro's `block_reader` reported them,
//! the datums inside the blocks as AvroRecordDataset read them, the
//! damaged files' errors, and the chunk source.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use grist_avro_tensor::{
    AvroSource, Block, BlockReader, Codec, Decoded, Error, Header, ReaderOptions,
};
use grist_tensor::{Limits, RecordLayout, RecordSource};
use grist_testkit::corpus::{self, Case, ExpectedBlock, expected_blocks, sha256_hex};
use serde_json::Value;

/// What reading a file block by block gave.
struct Read {
    header: Arc<Header>,
    blocks: Vec<Block>,
    /// The error that ended the reading, if any.
    error: Option<Error>,
}

/// Reads `bytes` with a [`BlockReader`] to its end or its first error.
fn read_bytes(bytes: &[u8], name: &str, options: ReaderOptions) -> Result<Read, Error> {
    let mut reader = BlockReader::new(bytes, name, options)?;
    let header = reader.header().clone();
    let mut blocks = Vec::new();
    let error = loop {
        match reader.next_block() {
            Ok(Some(block)) => blocks.push(block),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    // A finished reader stays finished.
    assert!(matches!(reader.next_block(), Ok(None)));
    Ok(Read {
        header,
        blocks,
        error,
    })
}

fn read_file(path: &Path) -> Result<Read, Error> {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    read_bytes(
        &bytes,
        &path.display().to_string(),
        ReaderOptions::default(),
    )
}

fn block_summary(b: &Block) -> ExpectedBlock {
    ExpectedBlock {
        index: b.index,
        offset: b.offset,
        record_count: b.record_count,
        total_size: b.stored_bytes,
    }
}

/// Checks a header against a `containers` entry and the case's schema.
fn check_header(case: &Case, container: &Value, header: &Header) {
    let name = &case.name;
    // The schema as stored parses to the JSON the manifest gives.
    let stored: Value = serde_json::from_str(&header.schema_json).expect("schema JSON");
    if !case.avro()["schema"].is_null() {
        assert_eq!(stored, case.avro()["schema"], "{name}: avro.schema");
    }
    let metadata = container["metadata"].as_object().expect("metadata");
    let codec = metadata
        .get("avro.codec")
        .map(|c| c.as_str().expect("codec name"))
        .unwrap_or("null");
    assert_eq!(header.codec.name(), codec, "{name}: codec");
    assert_eq!(Codec::from_name(codec).unwrap(), header.codec);
    let others: Vec<(String, Vec<u8>)> = metadata
        .iter()
        .filter(|(k, _)| *k != "avro.codec")
        .map(|(k, v)| {
            (
                k.clone(),
                v.as_str().expect("text metadata").as_bytes().to_vec(),
            )
        })
        .collect();
    let ours: Vec<(String, Vec<u8>)> = header
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(ours, others, "{name}: metadata");
    let sync = container["sync_marker_hex"]
        .as_str()
        .expect("sync_marker_hex");
    assert_eq!(hex::encode(header.sync), sync, "{name}: sync marker");
}

/// Checks each block's datums against AvroRecordDataset's (length and
/// SHA-256 of each, in order): the blocks partition the datums by their
/// record counts, and each block's data is exactly its datums.
fn check_datums(case: &Case, blocks: &[Block]) {
    let Some(datums) = case.datums() else {
        return;
    };
    let mut rest = &datums[..];
    for block in blocks {
        let n = usize::try_from(block.record_count).unwrap();
        assert!(n <= rest.len(), "{}: more records than datums", case.name);
        let (mine, later) = rest.split_at(n);
        rest = later;
        let mut data = &block.data[..];
        for (k, (len, sha)) in mine.iter().enumerate() {
            assert!(
                *len <= data.len(),
                "{}: block {} ends inside datum {k}",
                case.name,
                block.index
            );
            let (datum, tail) = data.split_at(*len);
            assert_eq!(
                &sha256_hex(datum),
                sha,
                "{}: block {} datum {k}",
                case.name,
                block.index
            );
            data = tail;
        }
        assert!(
            data.is_empty(),
            "{}: block {} has bytes after its datums",
            case.name,
            block.index
        );
    }
    assert!(rest.is_empty(), "{}: datums left over", case.name);
}

/// The original bytes of a file damaged by one `flip_byte` mutation.
fn repaired(case: &Case, bytes: &[u8]) -> Option<Vec<u8>> {
    let m = &case.expected["mutation"];
    if m["kind"] != "flip_byte" {
        return None;
    }
    let offset = m["offset"].as_u64()? as usize;
    let mut fixed = bytes.to_vec();
    assert_eq!(u64::from(fixed[offset]), m["new_byte"].as_u64()?);
    fixed[offset] = u8::try_from(m["old_byte"].as_u64()?).ok()?;
    Some(fixed)
}

#[test]
fn every_case_matches_fastavro_block_reader() {
    for case in corpus::cases("avro") {
        let name = &case.name;
        let mut all_blocks = Vec::new();
        let mut records = 0;
        for (path, container) in case.files.iter().zip(case.containers()) {
            let bytes = fs::read(path).unwrap();
            let expected = expected_blocks(container);
            let read = match read_bytes(&bytes, name, ReaderOptions::default()) {
                Ok(read) => read,
                Err(Error::BadMagic { found, .. }) => {
                    // Only a file whose damage is in the header may fail
                    // here; fastavro does not check the magic, so with the
                    // byte repaired the rest must be what it read.
                    assert_eq!(case.error()["where"], "header", "{name}: {found:02x?}");
                    assert_eq!(case.error()["records_before_error"], 0);
                    let fixed = repaired(&case, &bytes).expect("a flip_byte mutation");
                    read_bytes(&fixed, name, ReaderOptions::default()).expect("repaired header")
                }
                Err(e) => panic!("{name}: {e}"),
            };
            check_header(&case, container, &read.header);
            let ours: Vec<ExpectedBlock> = read.blocks.iter().map(block_summary).collect();
            assert_eq!(ours, expected, "{name}: blocks");
            for b in &read.blocks {
                assert_eq!(b.compressed, read.header.codec != Codec::Null);
            }
            match (&container["block_reader_error"], &read.error) {
                (Value::Null, None) => {}
                (Value::Null, Some(e)) => panic!("{name}: fastavro read every block; we got {e}"),
                (fastavro, None) => panic!("{name}: fastavro failed ({fastavro}), we did not"),
                (fastavro, Some(e)) => {
                    let failing = case.failing_block().expect("failing_block_index");
                    let at = e
                        .location()
                        .unwrap_or_else(|| panic!("{name}: {e} has no block"));
                    assert_eq!(at.block.unwrap(), failing, "{name}: {e}");
                    assert_eq!(
                        fastavro["blocks_before_error"].as_u64(),
                        Some(read.blocks.len() as u64),
                        "{name}"
                    );
                }
            }
            records += read.blocks.iter().map(|b| b.record_count).sum::<u64>();
            all_blocks.extend(read.blocks);
        }
        if case.is_ok() {
            assert_eq!(
                Some(records),
                case.avro()["record_count"].as_u64(),
                "{name}"
            );
            check_datums(&case, &all_blocks);
        }
        if let Some(failing) = case.failing_block() {
            let before: u64 = all_blocks
                .iter()
                .filter(|b| b.index < failing)
                .map(|b| b.record_count)
                .sum();
            assert_eq!(
                Some(before),
                case.error()["records_in_intact_blocks_before"].as_u64(),
                "{name}"
            );
        }
    }
}

/// Reads the single file of the case `name`.
fn read_case(name: &str) -> (Case, Result<Read, Error>) {
    let case = corpus::case("avro", name);
    assert_eq!(case.files.len(), 1);
    let read = read_file(&case.files[0]);
    (case, read)
}

#[test]
fn bad_magic_is_rejected_before_any_block() {
    let (case, read) = read_case("avro_corrupt_bad_magic");
    assert!(case.failing_block().is_none());
    match read {
        Err(Error::BadMagic { file, found }) => {
            assert!(file.ends_with("avro_corrupt_bad_magic.avro"));
            assert_eq!(found, b"Pbj\x01");
        }
        Err(e) => panic!("expected BadMagic, got {e}"),
        Ok(_) => panic!("expected BadMagic, the file opened"),
    }
    // The sans-I/O parser says so from the first byte.
    let bytes = fs::read(&case.files[0]).unwrap();
    assert!(matches!(
        Header::parse(&bytes[..1], "x", &Limits::default()),
        Err(Error::BadMagic { .. })
    ));
    // And so does the chunk source, before any chunk.
    let mut source = AvroSource::new(&case.files);
    assert!(matches!(source.next_chunk(), Err(Error::BadMagic { .. })));
    assert!(matches!(source.next_chunk(), Ok(None)));
}

/// The blocks before the failing one are delivered, then `check` holds for
/// the error, which names the failing block.
fn damaged(name: &str, check: impl Fn(&Error) -> bool) {
    let (case, read) = read_case(name);
    let read = read.unwrap_or_else(|e| panic!("{name}: the header is intact: {e}"));
    let failing = case.failing_block().expect("failing_block_index");
    assert_eq!(read.blocks.len() as u64, failing, "{name}");
    let records: u64 = read.blocks.iter().map(|b| b.record_count).sum();
    assert_eq!(
        Some(records),
        case.error()["records_in_intact_blocks_before"].as_u64()
    );
    let error = read.error.expect("an error");
    assert!(check(&error), "{name}: unexpected {error:?}");
    let at = error.location().expect("a location");
    assert_eq!(at.block.unwrap(), failing);
    assert!(at.file.ends_with(&format!("{name}.avro")), "{}", at.file);
    // The message names the file and the block.
    let message = error.to_string();
    assert!(message.contains(&format!("block {failing}")), "{message}");
}

#[test]
fn sync_mismatch_after_block_1() {
    damaged("avro_corrupt_sync_block2", |e| {
        matches!(e, Error::SyncMismatch { .. })
    });
}

#[test]
fn truncated_block_is_truncated_not_a_codec_error() {
    // The file ends inside block 2's stored bytes: the block is never
    // handed to the codec.
    damaged("avro_truncated_block", |e| {
        matches!(
            e,
            Error::TruncatedBlock {
                reason: "the file ends inside the block data",
                ..
            }
        )
    });
}

#[test]
fn corrupt_deflate_stream() {
    damaged("avro_deflate_corrupt", |e| {
        matches!(
            e,
            Error::Decompress {
                codec: "deflate",
                ..
            }
        )
    });
}

#[test]
fn lying_block_count_reads_fine_at_container_level() {
    // Block 1 claims one record more than it holds: only decoding its
    // records can tell. The framing is intact.
    let (case, read) = read_case("avro_block_count_more");
    let read = read.expect("header");
    assert!(read.error.is_none());
    let expected = expected_blocks(case.containers()[0]);
    let ours: Vec<ExpectedBlock> = read.blocks.iter().map(block_summary).collect();
    assert_eq!(ours, expected);
    let mutation = &case.expected["mutation"];
    let index = mutation["block_index"].as_u64().unwrap() as usize;
    assert_eq!(
        Some(read.blocks[index].record_count),
        mutation["new_count"].as_u64()
    );
}

#[test]
fn fastavro_deflate_blocks_carry_stray_bytes_that_are_ignored() {
    // AVRO-NOTES.md: fastavro strips the zlib header and one byte of the
    // Adler-32 trailer, leaving 3 bytes after the raw deflate stream.
    let case = corpus::case("avro", "avro_atds_dense_deflate");
    let bytes = fs::read(&case.files[0]).unwrap();
    let read = read_bytes(&bytes, "x", ReaderOptions::default()).unwrap();
    assert!(read.error.is_none());
    let block = &read.blocks[0];
    let start = block.offset as usize;
    let stored = &bytes[start..start + block.stored_bytes as usize - 16];
    // Skip the two varints.
    let varint_len = |b: &[u8]| b.iter().position(|x| x & 0x80 == 0).unwrap() + 1;
    let count_len = varint_len(stored);
    let size_len = varint_len(&stored[count_len..]);
    let body = &stored[count_len + size_len..];
    let mut inflater = flate2::Decompress::new(false);
    let mut out = Vec::with_capacity(block.data.len() + 16);
    let status = inflater
        .decompress_vec(body, &mut out, flate2::FlushDecompress::Finish)
        .unwrap();
    assert_eq!(status, flate2::Status::StreamEnd);
    assert_eq!(out, &block.data[..]);
    assert_eq!(body.len() as u64 - inflater.total_in(), 3);
}

#[test]
fn small_buffers_read_the_same_blocks() {
    for case in corpus::cases("avro").into_iter().filter(Case::is_ok) {
        for path in &case.files {
            let bytes = fs::read(path).unwrap();
            let big = read_bytes(&bytes, "x", ReaderOptions::default()).unwrap();
            let small =
                read_bytes(&bytes, "x", ReaderOptions::default().with_buffer_size(1)).unwrap();
            assert!(small.error.is_none());
            assert_eq!(small.blocks, big.blocks, "{}", case.name);
            assert_eq!(small.header, big.header);
        }
    }
}

#[test]
fn header_read_from_consumes_exactly_the_header() {
    for case in corpus::cases("avro").into_iter().filter(Case::is_ok) {
        let bytes = fs::read(&case.files[0]).unwrap();
        let Decoded::Complete { value, len } =
            Header::parse(&bytes, "x", &Limits::default()).unwrap()
        else {
            panic!("{}: incomplete header", case.name)
        };
        // Every shorter prefix is incomplete.
        for n in [0, 4, 5, len / 2, len - 1] {
            assert!(matches!(
                Header::parse(&bytes[..n], "x", &Limits::default()),
                Ok(Decoded::Incomplete { needed }) if needed > n as u64
            ));
        }
        let mut reader = std::io::BufReader::with_capacity(7, &bytes[..]);
        let header = Header::read_from(&mut reader, "x", &Limits::default()).unwrap();
        assert_eq!(header, value);
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut rest).unwrap();
        assert_eq!(rest, &bytes[len..], "{}", case.name);
        assert_eq!(
            expected_blocks(case.containers()[0])
                .first()
                .map(|b| b.offset),
            Some(len as u64)
        );
    }
}

#[test]
fn source_yields_one_chunk_per_block_with_its_files_header() {
    for case in corpus::cases("avro").into_iter().filter(Case::is_ok) {
        let name = &case.name;
        let mut source = AvroSource::new(&case.files);
        assert!(source.current_header().is_none());
        let mut expected = Vec::new();
        for (path, container) in case.files.iter().zip(case.containers()) {
            for b in expected_blocks(container) {
                expected.push((path.display().to_string(), b, container));
            }
        }
        let mut headers: Vec<Arc<Header>> = Vec::new();
        let mut first_record = 0;
        let mut last_file = String::new();
        for (file, block, container) in expected {
            let (chunk, header) = source
                .next_chunk_with_header()
                .unwrap()
                .unwrap_or_else(|| panic!("{name}: too few chunks"));
            assert!(Arc::ptr_eq(source.current_header().unwrap(), &header));
            if file != last_file {
                first_record = 0;
                last_file = file.clone();
                check_header(&case, container, &header);
                assert!(!headers.iter().any(|h| Arc::ptr_eq(h, &header)));
                headers.push(header.clone());
            } else {
                assert!(Arc::ptr_eq(headers.last().unwrap(), &header));
            }
            assert_eq!(&*chunk.file, file);
            assert_eq!(chunk.index, block.index);
            assert_eq!(chunk.first_record, first_record);
            assert_eq!(chunk.record_count as u64, block.record_count);
            assert_eq!(chunk.stored_bytes, block.total_size);
            assert_eq!(chunk.compressed, header.codec != Codec::Null);
            assert_eq!(chunk.layout, RecordLayout::Sequential);
            first_record += block.record_count;
        }
        assert!(
            source.next_chunk().unwrap().is_none(),
            "{name}: extra chunks"
        );
        assert!(source.next_chunk().unwrap().is_none());
        assert_eq!(headers.len(), case.files.len());
    }
}

#[test]
fn source_delivers_intact_blocks_then_the_error() {
    let case = corpus::case("avro", "avro_corrupt_sync_block2");
    let good = corpus::case("avro", "avro_atds_primitives");
    // A damaged file between two good ones: the second good one is never
    // reached.
    let files = [&good.files[0], &case.files[0], &good.files[0]];
    let mut source = AvroSource::new(files);
    let mut chunks = Vec::new();
    let error = loop {
        match source.next_chunk() {
            Ok(Some(c)) => chunks.push(c),
            Ok(None) => panic!("expected an error"),
            Err(e) => break e,
        }
    };
    let good_blocks = expected_blocks(good.containers()[0]).len();
    let failing = case.failing_block().unwrap() as usize;
    assert_eq!(chunks.len(), good_blocks + failing);
    assert!(matches!(error, Error::SyncMismatch { .. }));
    assert!(source.next_chunk().unwrap().is_none());
}

#[test]
fn missing_file_is_a_storage_error_naming_it() {
    let missing = Path::new("/nonexistent/grist/missing.avro");
    match BlockReader::open(missing, ReaderOptions::default()) {
        Err(Error::Storage(e)) => {
            assert!(e.is_not_found());
            assert_eq!(e.to_string(), "/nonexistent/grist/missing.avro: not found");
        }
        other => panic!("expected Storage, got {other:?}"),
    }
}

/// Reads `bytes` with [`BlockReader::from_bytes`] to its end or its first
/// error.
fn read_whole(bytes: &[u8], name: &str) -> Result<Read, Error> {
    let data = bytes::Bytes::copy_from_slice(bytes);
    let mut reader = BlockReader::from_bytes(data, name, ReaderOptions::default())?;
    let header = reader.header().clone();
    let mut blocks = Vec::new();
    let error = loop {
        match reader.next_block() {
            Ok(Some(block)) => blocks.push(block),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    assert!(matches!(reader.next_block(), Ok(None)));
    Ok(Read {
        header,
        blocks,
        error,
    })
}

/// What a read gave, comparably: header, blocks with their data, error.
fn outcome(read: Result<Read, Error>) -> String {
    match read {
        Err(e) => format!("error at open: {e}"),
        Ok(r) => {
            let blocks: Vec<String> = r
                .blocks
                .iter()
                .map(|b| format!("{:?} {}", block_summary(b), sha256_hex(&b.data)))
                .collect();
            format!(
                "{} {:?} {:?} {blocks:?} {:?}",
                r.header.schema_json,
                r.header.codec,
                r.header.sync,
                r.error.map(|e| e.to_string())
            )
        }
    }
}

#[test]
fn a_reader_over_bytes_in_memory_reads_what_a_stream_reads() {
    for case in corpus::cases("avro") {
        for path in &case.files {
            let bytes = fs::read(path).unwrap();
            let name = &case.name;
            // The whole file, then prefixes of it (cut everywhere).
            for cut in (0..=bytes.len()).rev().step_by(7) {
                let stream = read_bytes(&bytes[..cut], name, ReaderOptions::default());
                let whole = read_whole(&bytes[..cut], name);
                assert_eq!(outcome(whole), outcome(stream), "{name}, {cut} bytes");
            }
        }
    }
}

/// Counting a file by reading each block's frame where it lies
/// (`claimed_records_at`, a local file's count) gives what reading it in
/// order gives (`claimed_records`): the same count, or the same error, for
/// every corpus file, every truncation of one, and bytes changed in its
/// frames; the data between frames is never read.
#[test]
fn frames_read_where_they_lie_count_as_read_in_order() {
    let by_order = |bytes: &[u8]| {
        BlockReader::new(bytes, "f", ReaderOptions::default())
            .and_then(|r| r.claimed_records())
            .map_err(|e| e.to_string())
    };
    let by_offset = |bytes: &[u8], read: &mut Vec<std::ops::Range<u64>>| {
        BlockReader::new(bytes, "f", ReaderOptions::default().with_buffer_size(64))
            .and_then(|r| {
                r.claimed_records_at(bytes.len() as u64, |at, buf| {
                    let at = at as usize;
                    buf.copy_from_slice(&bytes[at..at + buf.len()]);
                    read.push(at as u64..(at + buf.len()) as u64);
                    Ok(())
                })
            })
            .map_err(|e| e.to_string())
    };
    let mut compared = 0;
    for case in corpus::cases("avro") {
        for path in &case.files {
            let bytes = fs::read(path).unwrap();
            assert_eq!(
                by_offset(&bytes, &mut Vec::new()),
                by_order(&bytes),
                "{}",
                case.name
            );
            compared += 1;
        }
    }
    assert!(compared > 10, "only {compared} corpus files");
    // A file of several blocks, made here.
    let schema = apache_avro::Schema::parse_str(r#""long""#).unwrap();
    let mut w = apache_avro::Writer::builder()
        .schema(&schema)
        .writer(Vec::new())
        .block_size(1000)
        .build();
    for i in 0..2000i64 {
        w.append(i * 1_000_003).unwrap();
    }
    let bytes = w.into_inner().unwrap();
    let mut read = Vec::new();
    assert_eq!(by_offset(&bytes, &mut read), Ok(2000));
    let header = BlockReader::new(&bytes[..], "f", ReaderOptions::default())
        .unwrap()
        .header_len() as usize;
    let frames_read: u64 = read.iter().map(|r| r.end - r.start).sum();
    assert!(
        read.len() > 10 && frames_read < (bytes.len() - header) as u64 / 3,
        "{read:?}"
    );
    for cut in header..bytes.len() {
        assert_eq!(
            by_offset(&bytes[..cut], &mut Vec::new()),
            by_order(&bytes[..cut]),
            "cut {cut}"
        );
    }
    // Each byte a frame holds, changed: a count, a size, a sync marker.
    for r in &read {
        for at in r.clone() {
            let mut bad = bytes.clone();
            bad[at as usize] ^= 0x5a;
            assert_eq!(
                by_offset(&bad, &mut Vec::new()),
                by_order(&bad),
                "byte {at}"
            );
        }
    }
}

/// `claimed_records` (a conversion's cheap count) is the sum of the counts
/// the blocks claim, as reading them block by block gives; a file whose
/// framing is damaged fails it too (a damaged compressed payload is not
/// looked at).
#[test]
fn claimed_records_sum_the_blocks_claims() {
    for case in corpus::cases("avro") {
        let name = &case.name;
        for path in &case.files {
            let bytes = fs::read(path).unwrap();
            let Ok(read) = read_bytes(&bytes, name, ReaderOptions::default()) else {
                continue;
            };
            let claimed: u64 = read.blocks.iter().map(|b| b.record_count).sum();
            let counted = BlockReader::new(&bytes[..], name.as_str(), ReaderOptions::default())
                .unwrap()
                .claimed_records();
            match (&read.error, counted) {
                (None, Ok(n)) => assert_eq!(n, claimed, "{name}"),
                (None, Err(e)) => panic!("{name}: {e}"),
                // Damaged: counting fails too, or counts past the damage.
                (Some(_), Ok(n)) => assert!(n >= claimed, "{name}: {n} < {claimed}"),
                (Some(_), Err(_)) => {}
            }
            // After blocks handed out, the rest are added to them.
            let mut reader =
                BlockReader::new(&bytes[..], name.as_str(), ReaderOptions::default()).unwrap();
            if read.error.is_none() && reader.next_block().unwrap().is_some() {
                assert_eq!(reader.claimed_records().unwrap(), claimed, "{name}");
            }
        }
    }
}
