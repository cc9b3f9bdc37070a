//! The `loader` target's checks, and what its seed tool writes.
//!
//! An input is three selector bytes and one file of the format the first
//! byte names. The file goes through `grist_loader::Loader` twice: once
//! as a plain reference (one thread, no shuffle, read calls, the default
//! chunk size, streamed) and once as the selectors configure it (threads,
//! shuffle, memory map, CRC checks, read by number, batch size, chunk
//! size, a strict or a lenient spec, GZIP, two files interleaved, two
//! ranks, and a resume from a saved state). With a resume, a third loader
//! resumes from the saved state with one of its numbers damaged, which
//! may fail but must not panic. See [`check`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use grist_loader::{Epochs, Error, LoaderBuilder, RandomAccess, Threads};
use grist_tensor::{Access, DType, FeatureSpec, Limits};

/// The four formats (`grist::registry()` may grow).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// TFRecord, uncompressed, streamed.
    Tfrecord,
    /// An OFRecord part, streamed or read by number.
    Ofrecord,
    /// An Avro object container file.
    Avro,
    /// An FFRecord file (read by number).
    Ffrecord,
}

/// The formats, by the first selector byte's low two bits.
pub const KINDS: [Kind; 4] = [Kind::Tfrecord, Kind::Ofrecord, Kind::Avro, Kind::Ffrecord];

impl Kind {
    /// The name of file `n` (0 or 1), by which the loader finds the
    /// format; `gzip`: a compressed TFRecord file.
    pub fn file_name(self, n: usize, gzip: bool) -> String {
        match self {
            Kind::Tfrecord if gzip => format!("data{n}.tfrecord.gz"),
            Kind::Tfrecord => format!("data{n}.tfrecord"),
            Kind::Ofrecord => format!("part-{n:05}"),
            Kind::Avro => format!("data{n}.avro"),
            Kind::Ffrecord => format!("data{n}.ffr"),
        }
    }
}

/// The columns the files are read as. `lenient`: every feature varlen
/// (a record without one decodes; not for Avro, whose schema has `id` as
/// a long); otherwise `id` and `x` are dense without
/// defaults (a record without them is an error).
pub fn specs(lenient: bool) -> Vec<FeatureSpec> {
    // Shape [-1]: Avro's varlen features need one.
    let varlen = |name: &str, dtype: DType| {
        let spec = serde_json::json!({"name": name, "kind": "varlen", "dtype": dtype.name(), "shape": [-1]});
        serde_json::from_value::<FeatureSpec>(spec).expect("a varlen spec")
    };
    if lenient {
        vec![
            varlen("id", DType::Int64),
            varlen("x", DType::Float32),
            varlen("tags", DType::Int64),
        ]
    } else {
        vec![
            FeatureSpec::dense("id", DType::Int64, []),
            FeatureSpec::dense("x", DType::Float32, [3]),
            varlen("tags", DType::Int64),
        ]
    }
}

/// Small limits, so that a fuzzed length cannot make a run slow.
fn limits() -> Limits {
    Limits::default()
        .with_max_record_bytes(1 << 20)
        .with_max_alloc_bytes(4 << 20)
}

/// How the selectors configure the loader under test.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// The format (and so the file's name).
    pub format: Kind,
    /// Two parse threads instead of one.
    pub two_threads: bool,
    /// Shuffled (then every batch holds one record).
    pub shuffle: bool,
    /// Memory-mapped instead of read.
    pub mmap: bool,
    /// CRCs checked (TFRecord, FFRecord).
    pub crc: bool,
    /// Every feature varlen (not for Avro).
    pub lenient: bool,
    /// OFRecord read by number (an index built on first read).
    pub by_number: bool,
    /// Records per batch (unshuffled).
    pub batch: usize,
    /// The chunk size.
    pub chunk_bytes: usize,
    /// The shuffle buffer, in records.
    pub shuffle_buffer: usize,
    /// TFRecord: the file is GZIP-compressed (`.tfrecord.gz`).
    pub gzip: bool,
    /// Two copies of the file, read as two files.
    pub two_files: bool,
    /// Two files read at once, a chunk from each in turn.
    pub interleave: bool,
    /// Two ranks (`shard(0, 2)` and `shard(1, 2)`), their records together.
    pub sharded: bool,
    /// After this many batches, the run goes on in a new loader restored
    /// from the first one's state (0: no resume).
    pub resume_after: usize,
}

impl Config {
    /// The configuration three selector bytes give.
    pub fn from_selectors(a: u8, b: u8, c: u8) -> Config {
        Config {
            format: KINDS[usize::from(a & 3)],
            two_threads: a & 4 != 0,
            shuffle: a & 8 != 0,
            mmap: a & 16 != 0,
            crc: a & 32 != 0,
            lenient: a & 64 != 0,
            by_number: a & 128 != 0,
            batch: 1 + usize::from(b & 7),
            chunk_bytes: 64 << ((b >> 3) & 7),
            shuffle_buffer: usize::from(b >> 6) * 5,
            gzip: c & 1 != 0,
            two_files: c & 2 != 0,
            interleave: c & 6 == 6,
            sharded: c & 8 != 0,
            resume_after: usize::from(c >> 4),
        }
    }
}

/// What a loader yielded: each batch's debug form (NaNs compare equal
/// that way), then the error it stopped with, if it did.
#[derive(Debug)]
struct Run {
    batches: Vec<String>,
    error: Option<String>,
}

/// A loader of `paths` with the settings both runs share.
fn builder(paths: &[PathBuf], lenient: bool, crc: bool) -> LoaderBuilder {
    grist::loader()
        .with_paths(paths.iter().cloned())
        .with_specs(specs(lenient))
        .with_epochs(Epochs::Count(1))
        .with_limits(limits())
        .with_check_crc(crc)
        .with_prefetch_bytes(1 << 16)
}

/// Everything the loaders `builder` makes yield: one loader, or with
/// `resume_after` > 0, one that yields that many batches and a second one
/// restored from its state (through its serde form) that yields the rest.
/// Panics if a loader thread panicked, or if a loader yields anything
/// after an error.
fn drain(builder: impl Fn() -> LoaderBuilder, resume_after: usize) -> Run {
    let failed = |e| Run {
        batches: Vec::new(),
        error: Some(checked(e)),
    };
    let mut loader = match builder().build() {
        Ok(l) => l,
        Err(e) => return failed(e),
    };
    let mut batches = Vec::new();
    loop {
        if resume_after > 0 && batches.len() == resume_after {
            let state = loader.state();
            drop(loader);
            let json = serde_json::to_string(&state).expect("a state's JSON");
            let state = serde_json::from_str(&json).expect("a state from its JSON");
            loader = match builder().build() {
                Ok(l) => l,
                Err(e) => return failed(e),
            };
            if let Err(e) = loader.restore(&state) {
                return Run {
                    batches,
                    error: Some(checked(e)),
                };
            }
        }
        let Some(next) = loader.next_batch() else {
            break;
        };
        match next {
            Ok(batch) => batches.push(format!("{batch:?}")),
            Err(e) => {
                let error = checked(e);
                assert!(
                    loader.next_batch().is_none(),
                    "the loader went on after {error}"
                );
                return Run {
                    batches,
                    error: Some(error),
                };
            }
        }
    }
    Run {
        batches,
        error: None,
    }
}

/// A resume from a damaged checkpoint: the state of a loader from
/// `builder` after `resume_after` batches, with one of its numbers (but
/// the version and the fingerprint, checked first) set to an extreme
/// value, both chosen by `pick`. Restoring it may fail; if it does not,
/// the loader yields batches or an error and then ends, and no thread
/// panics.
fn tampered_resume(builder: impl Fn() -> LoaderBuilder, resume_after: usize, pick: u64) {
    let Ok(mut loader) = builder().build() else {
        return;
    };
    for _ in 0..resume_after {
        match loader.next_batch() {
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                checked(e);
                return;
            }
            None => return,
        }
    }
    let mut state = serde_json::to_value(loader.state()).expect("a state's JSON");
    drop(loader);
    let mut numbers = Vec::new();
    number_pointers(&state, String::new(), &mut numbers);
    let Some(len) = u64::try_from(numbers.len()).ok().filter(|&n| n > 0) else {
        return;
    };
    let number = state
        .pointer_mut(&numbers[(pick % len) as usize])
        .expect("a number there");
    let old = number.as_u64().unwrap_or(0);
    let values = [
        0,
        1,
        old.saturating_add(1),
        old.saturating_mul(3),
        1 << 32,
        u64::MAX,
    ];
    *number = values[(pick / len % values.len() as u64) as usize].into();
    let Ok(state) = serde_json::from_value(state) else {
        return;
    };
    let Ok(mut loader) = builder().build() else {
        return;
    };
    if loader.restore(&state).is_err() {
        return;
    }
    while let Some(next) = loader.next_batch() {
        if let Err(e) = next {
            let error = checked(e);
            assert!(
                loader.next_batch().is_none(),
                "the loader went on after {error}"
            );
            return;
        }
    }
}

/// The JSON pointers of the numbers in `v` (at `at`), but a state's
/// version and fingerprint.
fn number_pointers(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Number(_) => out.push(at),
        serde_json::Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                number_pointers(x, format!("{at}/{i}"), out);
            }
        }
        serde_json::Value::Object(fields) => {
            for (k, x) in fields {
                if at.is_empty() && (k == "version" || k == "fingerprint") {
                    continue;
                }
                number_pointers(x, format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
}

/// FNV-1a of `data`: a choice the fuzzer reaches by changing the input.
fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// An error's text; panics on a thread panic (a bug, not bad input).
fn checked(e: Error) -> String {
    if let Error::ThreadPanicked { .. } = e {
        panic!("{e}");
    }
    e.to_string()
}

/// A folder of its own for one input, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "grist-fuzz-loader-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs one input: `data` is three selector bytes
/// ([`Config::from_selectors`]) and a file. Nothing may panic or hang; an error ends a loader's
/// batches. Against the reference run:
///
/// - unshuffled, streamed: the same batches and, if it failed, a failure
///   (threads, the memory map, the chunk size, the CRC's place and a
///   resume change nothing);
/// - unshuffled, OFRecord read by number: the index is built over the
///   whole part first, so a framing error comes before any batch: the
///   batches are a prefix of the reference's, and if either failed, both
///   did;
/// - shuffled, interleaved or sharded over two ranks (one record per
///   batch; the ranks' records together): when the reference read every
///   record, the same records in some order; when it failed, a failure
///   (every record is some rank's, and is read in an epoch).
///
/// With a resume, a resume from a damaged state too
/// ([`tampered_resume`]).
///
/// `mmap` needs the file to stay as written while it is mapped: this
/// function writes it, maps it and deletes it, and nothing else knows it.
pub fn check(data: &[u8], mmap: Access) {
    let Some((&[a, b, c], file)) = data.split_first_chunk::<3>() else {
        return;
    };
    let config = Config::from_selectors(a, b, c);
    let scratch = Scratch::new();
    let gzip = config.gzip && config.format == Kind::Tfrecord;
    let mut paths = Vec::new();
    for n in 0..1 + usize::from(config.two_files) {
        let path = scratch.0.join(config.format.file_name(n, gzip));
        std::fs::write(&path, file).expect("the input file");
        paths.push(path);
    }
    if config.format == Kind::Ofrecord {
        // An OFRecord dataset is its folder of parts.
        paths = vec![scratch.0.clone()];
    }
    let unordered = config.shuffle || config.interleave || config.sharded;
    let batch = if unordered { 1 } else { config.batch };
    // An Avro file's schema decides: its `id` is a long, not a list.
    let lenient = config.lenient && config.format != Kind::Avro;

    let reference = drain(
        || {
            builder(&paths, lenient, config.crc)
                .with_batch_size(batch)
                .with_threads(Threads::Fixed(1))
                .with_random_access(match config.format {
                    Kind::Ffrecord => RandomAccess::Auto,
                    _ => RandomAccess::Off,
                })
        },
        0,
    );
    let under_test = |rank: usize, world: usize| {
        let b = builder(&paths, lenient, config.crc)
            .with_shard(rank, world)
            .with_batch_size(batch)
            .with_threads(Threads::Fixed(if config.two_threads { 2 } else { 1 }))
            .with_chunk_bytes(config.chunk_bytes)
            .with_shuffle(config.shuffle)
            .with_shuffle_buffer(config.shuffle_buffer)
            .with_seed(u64::from(b))
            .with_cycle_length(if config.interleave { 2 } else { 1 })
            .with_random_access(match config.format {
                Kind::Ffrecord => RandomAccess::Auto,
                Kind::Ofrecord if config.by_number => RandomAccess::Required,
                _ => RandomAccess::Off,
            });
        if config.mmap { b.with_access(mmap) } else { b }
    };
    let run = if config.sharded {
        // Each rank on its own; every record is some rank's.
        let mut run = drain(|| under_test(0, 2), config.resume_after);
        let other = drain(|| under_test(1, 2), config.resume_after);
        run.batches.extend(other.batches);
        run.error = run.error.or(other.error);
        run
    } else {
        drain(|| under_test(0, 1), config.resume_after)
    };

    if config.resume_after > 0 {
        tampered_resume(|| under_test(0, 1), config.resume_after, fnv(data));
    }

    let by_number = config.format == Kind::Ofrecord && config.by_number;
    if unordered {
        match &reference.error {
            None => {
                let mut want = reference.batches.clone();
                let mut got = run.batches.clone();
                want.sort();
                got.sort();
                assert!(
                    run.error.is_none() && got == want,
                    "{config:?}: not the reference's records: {run:?} vs {reference:?}"
                );
            }
            Some(_) => assert!(
                run.error.is_some(),
                "{config:?}: the reference failed, the run did not: {run:?} vs {reference:?}"
            ),
        }
    } else if by_number {
        assert!(
            reference.batches.starts_with(&run.batches)
                && reference.error.is_some() == run.error.is_some(),
            "{config:?}: read by number, not a prefix of the reference: {run:?} vs {reference:?}"
        );
    } else {
        assert!(
            run.batches == reference.batches && run.error.is_some() == reference.error.is_some(),
            "{config:?}: not the reference's batches: {run:?} vs {reference:?}"
        );
    }
}

/// Valid files of `records` records in `format` (`gzip`: a compressed
/// TFRecord file), readable with both [`specs`]: `id`, `x` (3 floats) and `tags` (0 to 3 ints) per record.
/// Avro files are cut into blocks of about 150 bytes, so that the loader
/// meets several.
pub fn valid_file(format: Kind, records: i64, gzip: bool) -> Vec<u8> {
    let examples: Vec<Vec<u8>> = (0..records)
        .map(|id| {
            grist_tfrecord::ExampleBuilder::new()
                .with_int64s("id", [id])
                .with_floats("x", [id as f32 * 0.5, -(id as f32), 1.0])
                .with_int64s("tags", (0..id % 4).map(|k| id * 10 + k))
                .encode()
        })
        .collect();
    match format {
        Kind::Tfrecord => {
            let mut w = if gzip {
                grist_tfrecord::RecordWriter::with_compression(
                    Vec::new(),
                    grist_tfrecord::Compression::Gzip,
                )
                .expect("a GZIP writer")
            } else {
                grist_tfrecord::RecordWriter::new(Vec::new())
            };
            for e in &examples {
                w.write_record(e).expect("a frame");
            }
            w.finish_into_inner().expect("the file").0
        }
        Kind::Ffrecord => grist_ffrecord::encode_file(examples.iter().map(Vec::as_slice)),
        Kind::Ofrecord => {
            let mut w = grist_ofrecord::RecordWriter::new(Vec::new());
            for id in 0..records {
                let record = grist_ofrecord::RecordBuilder::new()
                    .with_int64s("id", [id])
                    .with_floats("x", [id as f32 * 0.5, -(id as f32), 1.0])
                    .with_int64s("tags", (0..id % 4).map(|k| id * 10 + k));
                w.write_record(&record.encode()).expect("a frame");
            }
            w.into_inner()
        }
        Kind::Avro => {
            // The records as a batch, then as Avro datums.
            let specs = specs(false);
            let mut decoder = grist_tfrecord::ExampleDecoder::new(&specs).expect("the specs");
            let mut out = decoder.new_batch(examples.len());
            for (i, e) in examples.iter().enumerate() {
                let at = grist_tfrecord::Location::record("seed", i as u64);
                decoder.decode(e, &at, &mut out).expect("a record");
            }
            let batch = out.finish().expect("a batch");
            let datums = grist_avro_tensor::encode_batch(
                &batch,
                &grist_tensor::SpecFile {
                    features: specs.clone(),
                    ..Default::default()
                },
            )
            .expect("the datums");
            let schema = grist_avro_tensor::schema_for_specs(&specs, "Row").expect("a schema");
            let options = grist_avro_tensor::WriterOptions::default().with_sync_interval(150);
            let mut w = grist_avro_tensor::ContainerWriter::new(Vec::new(), &schema, options)
                .expect("a writer");
            for d in &datums {
                w.append_datum(d).expect("a datum");
            }
            w.finish_into_inner().expect("the file").0
        }
    }
}

/// The seed inputs (name, input): valid files of 0, 1, 5 and 23 records in
/// each format (TFRecord also GZIP-compressed), behind selector bytes that
/// turn each choice on and off: the format, then each other bit of the
/// first selector alone and all together; batch and chunk sizes varied;
/// two files, in turn or interleaved, two ranks, and resumes after 1 and
/// 3 batches.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (f, &format) in KINDS.iter().enumerate() {
        for gzip in [false, true] {
            if gzip && format != Kind::Tfrecord {
                continue;
            }
            for records in [0, 1, 5, 23] {
                let file = valid_file(format, records, gzip);
                let firsts = [0u8, 4, 8, 16, 32, 64, 128, 0xfc];
                let thirds = [0u8, 2, 6, 8, 0x10, 0x36, 0x1a];
                for (k, bits) in firsts.into_iter().enumerate() {
                    for (m, &third) in thirds.iter().enumerate() {
                        let a = f as u8 | bits;
                        let b = (k as u8).wrapping_mul(37).wrapping_add(m as u8 * 11);
                        let c = third | u8::from(gzip);
                        let mut input = vec![a, b, c];
                        input.extend(&file);
                        let name = format!("{f}-{}-{records}-{k}-{m}", u8::from(gzip));
                        out.push((name, input));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On valid files every configuration agrees with the reference (the
    /// fuzz target's checks hold on its seeds), with read calls where the
    /// target maps the file (this crate has no `unsafe` to map with).
    #[test]
    fn every_configuration_agrees_on_valid_files() {
        let seeds = seeds();
        assert_eq!(seeds.len(), 1120);
        for (name, input) in &seeds {
            let outcome = std::panic::catch_unwind(|| check(input, Access::read()));
            assert!(outcome.is_ok(), "seed {name}");
        }
    }
}
