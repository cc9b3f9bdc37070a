//! Fuzzes the FFRecord reader: arbitrary bytes as a file, read in memory,
//! with positioned reads and memory-mapped, checks on and off; the
//! sans-I/O header decoder fed in pieces; single, batched and sequential
//! (chunk source) reads must all agree; and whatever reads back whole is
//! written again and must read back the same (byte-identical when the
//! input was laid out as the original writer lays files out).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use grist_ffrecord::{
    Access, Error, FfrReader, FfrWriter, HeaderDecoder, ReaderOptions, SampleBatch, WriterOptions,
    encode_file, parse_header,
};
use grist_tensor::{Limits, RecordSource};
use libfuzzer_sys::fuzz_target;

/// Small limits, so a fuzzed header can't make a run slow.
fn limits() -> Limits {
    Limits::default()
        .with_max_record_bytes(1 << 20)
        .with_max_alloc_bytes(4 << 20)
}

/// What reading a dataset gave: the open error, or per sample its bytes
/// or error kind, plus a batch read of a fuzzed selection and the chunk
/// source's samples.
#[derive(Debug, PartialEq)]
struct Outcome {
    samples: Vec<Result<Vec<u8>, &'static str>>,
    batch: Result<Vec<Vec<u8>>, &'static str>,
    source: (Vec<Vec<u8>>, Option<&'static str>),
}

fn kind(e: Error) -> &'static str {
    // Every data error names its file.
    assert!(
        e.file().is_some() || matches!(e, Error::IndexOutOfRange { .. }),
        "{e}"
    );
    e.class().name()
}

fn run(opened: Result<FfrReader, Error>, selector: &[u8]) -> Result<Outcome, &'static str> {
    let reader = opened.map_err(kind)?;
    let n = reader.len();
    let samples: Vec<_> = (0..n)
        .map(|i| reader.read_one(i).map(|s| s.data.to_vec()).map_err(kind))
        .collect();
    // A selection of indices (with repeats and one past the end when the
    // selector says so), read as one batch: the same bytes as read one by
    // one, or the first failure in the order asked.
    let mut indices: Vec<u64> = selector
        .iter()
        .map(|&b| if n == 0 { 0 } else { u64::from(b) % n })
        .collect();
    if n == 0 {
        indices.clear();
    }
    let batch = reader
        .read(&indices)
        .map(|v| v.into_iter().map(|s| s.data.to_vec()).collect::<Vec<_>>())
        .map_err(kind);
    let expected_batch: Result<Vec<Vec<u8>>, &'static str> = indices
        .iter()
        .map(|&i| samples[i as usize].clone())
        .collect();
    assert_eq!(batch, expected_batch);
    // The same through a reused batch, read twice.
    let mut reused = SampleBatch::default();
    for _ in 0..2 {
        let again = reader
            .read_batch(&indices, &mut reused)
            .map(|()| reused.iter().map(<[u8]>::to_vec).collect::<Vec<_>>())
            .map_err(kind);
        assert_eq!(again, expected_batch);
    }
    assert!(matches!(
        reader.read(&[n]),
        Err(Error::IndexOutOfRange { .. })
    ));

    let chunk_bytes = 1 + usize::from(selector.first().copied().unwrap_or(0)) * 16;
    let mut source = reader.source().with_chunk_bytes(chunk_bytes);
    let mut seen = Vec::new();
    let mut error = None;
    loop {
        match source.next_chunk() {
            Ok(Some(chunk)) => {
                assert!(chunk.record_count > 0);
                for i in 0..chunk.record_count {
                    seen.push(chunk.record(i).expect("span inside the chunk").to_vec());
                }
            }
            Ok(None) => break,
            Err(e) => {
                error = Some(kind(e));
                assert!(matches!(source.next_chunk(), Ok(None)));
                break;
            }
        }
    }
    // The source stops exactly at the first sample that fails alone.
    let good = samples.iter().take_while(|s| s.is_ok()).count();
    assert_eq!(seen.len(), good);
    assert_eq!(error, samples.get(good).map(|s| *s.as_ref().unwrap_err()));
    Ok(Outcome {
        samples,
        batch,
        source: (seen, error),
    })
}

fn scratch(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("grist-fuzz-ffrecord-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("scratch folder");
        d
    });
    dir.join(name)
}

fuzz_target!(|data: &[u8]| {
    let selector = data.get(data.len().saturating_sub(8)..).unwrap_or(&[]);

    // The header decoder fed in pieces agrees with the whole-file parse.
    let whole = parse_header("fuzz.ffr".into(), data, true, &limits(), 0);
    if let Ok(mut d) = HeaderDecoder::new("fuzz.ffr".into(), data, data.len() as u64, &limits()) {
        let piece = 1 + usize::from(data.first().copied().unwrap_or(0) % 13);
        for c in data.get(12..).unwrap_or(&[]).chunks(piece) {
            if d.feed(c) < c.len() {
                break;
            }
        }
        match (d.finish(true, 0), &whole) {
            (Ok(a), Ok(b)) => assert_eq!(&a, b),
            (Err(a), Err(b)) => assert_eq!(a.class(), b.class()),
            (a, b) => panic!("pieces {a:?} vs whole {b:?}"),
        }
    } else {
        assert!(whole.is_err());
    }

    let path = scratch("input.ffr");
    std::fs::write(&path, data).expect("scratch file");
    for check in [true, false] {
        let options = ReaderOptions::default()
            .with_limits(limits())
            .with_check_data(check)
            .with_coalesce_gap(u64::from(data.get(1).copied().unwrap_or(0)));
        let in_memory = run(
            FfrReader::from_bytes("fuzz.ffr", data.to_vec().into(), options),
            selector,
        );
        let pread = run(FfrReader::open(&path, options), selector);
        // SAFETY: the scratch file is private to this process and is not
        // written again until every reader over it is gone.
        let mmap = unsafe { Access::mmap() };
        let mapped = run(FfrReader::open(&path, options.with_access(mmap)), selector);
        assert_eq!(pread, in_memory);
        assert_eq!(mapped, in_memory);

        // Without checks only structure can fail.
        if !check {
            match &in_memory {
                Err(k) => assert!(matches!(*k, "truncated" | "invalid_offsets" | "limit")),
                Ok(o) => assert!(o.samples.iter().all(|s| s.is_ok() || *s == Err("limit"))),
            }
        }

        // Write back what read whole (with checks): it reads back the same,
        // and a file laid out as the original writer does comes back byte
        // for byte.
        let Ok(outcome) = &in_memory else { continue };
        let Ok(samples) = outcome
            .samples
            .iter()
            .cloned()
            .collect::<Result<Vec<_>, _>>()
        else {
            continue;
        };
        if !check {
            continue;
        }
        let encoded = encode_file(samples.iter().map(|s| &s[..]));
        let canonical = {
            let reader =
                FfrReader::from_bytes("fuzz.ffr", data.to_vec().into(), options).expect("opened");
            let h = reader.files()[0].header();
            !h.is_legacy() && h.offsets()[0] == h.header_len()
        };
        if canonical {
            assert_eq!(
                encoded, data,
                "a canonical layout is rewritten byte for byte"
            );
        }
        let out = scratch("rewritten.ffr");
        for count in [Some(samples.len() as u64), None] {
            let mut w = FfrWriter::create(&out, WriterOptions::default().with_count(count))
                .expect("scratch writer");
            for s in &samples {
                w.write_sample(s).expect("write");
            }
            w.finish().expect("finish");
            assert_eq!(std::fs::read(&out).expect("rewritten"), encoded);
        }
        let back = FfrReader::from_bytes("back.ffr", encoded.into(), ReaderOptions::default())
            .expect("our own output opens");
        let all: Vec<u64> = (0..back.len()).collect();
        let read: Vec<Vec<u8>> = back
            .read(&all)
            .expect("our own output reads")
            .into_iter()
            .map(|s| s.data.to_vec())
            .collect();
        assert_eq!(read, samples);
    }
});
