//! `grist bench`: end-to-end loading speed through grist-loader (read +
//! framing + checks + shuffle + parse into batches), pass after pass until
//! enough time has passed, for every format.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use grist::tensor::Maps;
use grist::{Access, Epochs, Loader, Stats, Threads};
use serde_json::json;

use crate::fmt;
use crate::out::Out;
use crate::sources::{FormatArg, PayloadArg};
use crate::spec::{build_loader, load_reader_schema, load_spec};

/// `--threads`: a number or `autotune`.
pub(crate) fn parse_threads(s: &str) -> Result<Threads, String> {
    if s.eq_ignore_ascii_case("autotune") {
        return Ok(Threads::Autotune);
    }
    match s.parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(Threads::Fixed(n)),
        _ => Err(format!("expected 1 to 1024 or `autotune`, not {s:?}")),
    }
}

/// Arguments of `grist bench`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Loads all files into batches through grist's loader (a prefetch thread reading \
                        ahead, the batch's rows parsed on several threads), pass after pass, \
                        until at least --min-seconds have passed (at least one pass), then prints \
                        records/s, MB/s (file bytes as stored), the median time per batch, the \
                        records per CPU-second of the whole process, the thread counts chosen, and \
                        the time spent waiting for I/O versus decoding.\n\n\
                        Example:\n  \
                        grist gen prod19 --records 200000 --out /tmp/prod19\n  \
                        grist bench --spec /tmp/prod19/prod19.spec.json --batch-size 256 \
                        --threads autotune --shuffle-buffer 10000 /tmp/prod19/prod19.tfrecord\n  \
                        grist demo --dir /tmp/demo   # also writes FFRecord and OFRecord files\n  \
                        grist bench --spec /tmp/demo/prod19.spec.json /tmp/demo/prod19.ffr"
)]
pub(crate) struct Args {
    /// The spec file (features to parse), as for `grist cat --spec`.
    #[arg(long, value_name = "SPEC.json")]
    spec: PathBuf,

    /// Avro: read every file through this reader schema (an .avsc file of
    /// the schema's JSON), by the Avro specification's schema resolution:
    /// fields matched by name and by the reader's aliases, reader fields the
    /// writer lacks filled with their defaults, int → long → float → double
    /// and string ↔ bytes promoted, enum symbols by name (else the reader's
    /// default), union branches matched. A writer schema the rules forbid is
    /// an error naming the file and the field. Replaces the spec file's
    /// "reader_schema". Other formats refuse it.
    #[arg(long, value_name = "FILE.avsc")]
    reader_schema: Option<PathBuf>,

    /// Records per batch. By default, the spec file's "batch_size", else
    /// 1024.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: Option<u64>,

    /// Parse threads per batch: a number, or `autotune` (the loader's cost
    /// model picks per batch, up to one per CPU core).
    #[arg(long, value_name = "N|autotune", default_value = "autotune", value_parser = parse_threads)]
    threads: Threads,

    /// Shuffle: streams sample each batch from this many records beyond
    /// the batch, in a file order shuffled per pass; files read by record
    /// number (FFRecord, TFRecord with .idx files, OFRecord) follow an
    /// exact permutation. 0: no shuffle.
    #[arg(long, value_name = "N", default_value_t = 0)]
    shuffle_buffer: u64,

    /// The shuffle's seed.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,

    /// Streams: how many files are read at once, one chunk from each in
    /// turn.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    cycle_length: u64,

    /// Skip the CRC checks (TFRecord CRC32Cs, FFRecord CRC-32s; Avro
    /// blocks are always checked).
    #[arg(long)]
    no_crc: bool,

    /// Memory-map the files instead of reading them (no copy out of the
    /// page cache; the prefetch thread then leaves the cores to the parse
    /// threads). Only for files that nothing modifies or truncates while
    /// the bench runs: a file that shrinks under a map kills the process
    /// (SIGBUS). Compressed TFRecord files are always read.
    #[arg(long)]
    mmap: bool,

    /// Build a new loader for each pass, as a training loop that makes one
    /// per epoch does (PyTorch's DataLoader, `grist.Loader(epochs=1)`):
    /// each pass pays the loader's start and its tail. The time to build
    /// each loader counts. With --mmap the loaders share their maps.
    #[arg(long)]
    loader_per_pass: bool,

    /// Keep going until this many seconds have passed (0: one pass).
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    min_seconds: f64,

    /// Print one JSON object: format, records, batches, passes, bytes (as
    /// stored, read by the measured passes), seconds, records_per_s,
    /// bytes_per_s, cpu_seconds, records_per_cpu_s, threads, threads_mean,
    /// threads_used, batch_size, shuffle_buffer, median_batch_ms,
    /// io_wait_s, decode_s, read_s.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    format: FormatArg,

    #[command(flatten)]
    payload: PayloadArg,

    /// Files, folders or glob patterns (all of one format), read in order
    /// on each pass unless shuffled.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// The measurements of a run.
struct Measured {
    passes: u64,
    /// Bytes read (as stored) by the measured passes: not those the batch
    /// that opened the next pass took from it.
    bytes: u64,
    records: u64,
    batches: u64,
    elapsed: Duration,
    cpu: Option<Duration>,
    batch_times: Vec<Duration>,
    stats: Stats,
}

/// The file access `--mmap` asks for.
#[allow(unsafe_code)]
fn access(mmap: bool) -> Access {
    if mmap {
        // SAFETY: `--mmap` is the user's promise, stated in its help, that
        // nothing modifies or truncates the files while the bench runs.
        unsafe { Access::mmap() }
    } else {
        Access::read()
    }
}

/// The loader of `args`, keeping its maps in `maps`.
fn loader(args: &Args, epochs: Epochs, maps: &Arc<Maps>) -> anyhow::Result<Loader> {
    let loaded = load_spec(&args.spec)?;
    let mut builder = grist::loader()
        .with_storage(crate::sources::storage()?)
        .with_paths(args.files.iter().cloned())
        .with_spec_file(loaded.spec)
        .with_threads(args.threads)
        .with_shuffle(args.shuffle_buffer > 0)
        .with_shuffle_buffer(args.shuffle_buffer as usize)
        .with_seed(args.seed)
        .with_cycle_length(args.cycle_length as usize)
        .with_check_crc(!args.no_crc)
        .with_access(access(args.mmap))
        .with_maps(maps.clone())
        .with_epochs(epochs);
    if let Some(b) = args.batch_size {
        builder = builder.with_batch_size(b as usize);
    }
    if let Some(path) = &args.reader_schema {
        builder = builder.with_reader_schema(load_reader_schema(path)?);
    }
    if let Some(format) = args.format.for_loader(&args.payload, &args.files)? {
        builder = builder.with_format(format);
    }
    build_loader(builder, &args.spec)
}

/// Runs `grist bench`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Ok(min_time) = Duration::try_from_secs_f64(args.min_seconds) else {
        anyhow::bail!("--min-seconds must be a non-negative number of seconds");
    };
    let maps = Arc::new(Maps::new());
    let (loader, m) = if args.loader_per_pass {
        measure_per_pass(&args, &maps, min_time)?
    } else {
        let mut loader = loader(&args, Epochs::Endless, &maps)?;
        let m = measure(&mut loader, min_time)?;
        (loader, m)
    };
    let pass_bytes = m.bytes.checked_div(m.passes).unwrap_or(0);

    let seconds = m.elapsed.as_secs_f64().max(1e-9);
    let records_per_s = m.records as f64 / seconds;
    let bytes_per_s = m.bytes as f64 / seconds;
    let cpu = m.cpu.map(|c| c.as_secs_f64());
    let per_cpu = cpu.map(|c| m.records as f64 / c.max(1e-9));
    let median_ms = median(m.batch_times).as_secs_f64() * 1e3;
    let threads = match args.threads {
        Threads::Fixed(n) => json!(n),
        _ => json!("autotune"),
    };
    let mut out = Out::stdout();
    if args.json {
        out.json(&json!({
            "format": loader.format().name(),
            "records": m.records,
            "batches": m.batches,
            "passes": m.passes,
            "bytes": m.bytes,
            "seconds": seconds,
            "records_per_s": records_per_s,
            "bytes_per_s": bytes_per_s,
            "cpu_seconds": cpu,
            "records_per_cpu_s": per_cpu,
            "threads": threads,
            "threads_mean": m.stats.mean_threads(),
            "threads_used": m.stats.threads_used,
            "batch_size": loader.batch_size(),
            "shuffle_buffer": args.shuffle_buffer,
            "median_batch_ms": median_ms,
            "io_wait_s": m.stats.io_wait.as_secs_f64(),
            "decode_s": m.stats.decode.as_secs_f64(),
            "read_s": m.stats.read.as_secs_f64(),
        }))?;
    } else {
        let files = match (args.files.len(), loader.files()) {
            (1, 1) => args.files[0].display().to_string(),
            (_, n) => format!("{n} files"),
        };
        let shuffle = match (args.shuffle_buffer, loader.is_random_access()) {
            (0, _) => "no shuffle".to_string(),
            (_, true) => "exact shuffle".to_string(),
            (n, false) => format!("shuffle buffer {}", fmt::count(n)),
        };
        let threads = match args.threads {
            Threads::Fixed(1) => "1 thread".to_string(),
            Threads::Fixed(n) => format!("{n} threads"),
            _ => "threads autotuned".to_string(),
        };
        out.line(format_args!(
            "{files}: {} {} per pass; batch {}, {threads}, {shuffle}, {}{}",
            loader.format().name(),
            fmt::bytes(pass_bytes),
            loader.batch_size(),
            match (args.no_crc, args.mmap) {
                (true, false) => "checksums off",
                (false, false) => "checksums checked",
                (true, true) => "checksums off, memory-mapped",
                (false, true) => "checksums checked, memory-mapped",
            },
            if args.loader_per_pass {
                ", a loader per pass"
            } else {
                ""
            },
        ))?;
        out.line(format_args!(
            "  {} pass{} in {}: {} records in {} batches",
            m.passes,
            if m.passes == 1 { "" } else { "es" },
            fmt::seconds(m.elapsed),
            fmt::count(m.records),
            fmt::count(m.batches)
        ))?;
        out.line(format_args!(
            "  {}   {}   median {median_ms:.3} ms per batch",
            fmt::per_second(records_per_s, "records"),
            fmt::mb_per_second(bytes_per_s)
        ))?;
        if let (Some(cpu), Some(per_cpu)) = (cpu, per_cpu) {
            out.line(format_args!(
                "  {cpu:.2} CPU-seconds: {} records per CPU-second",
                fmt::count(per_cpu as u64)
            ))?;
        }
        let used: Vec<String> = m
            .stats
            .threads_used
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(t, n)| format!("{} × {}", fmt::count(*n), t + 1))
            .collect();
        out.line(format_args!(
            "  parse threads per batch: mean {:.2} ({}); waiting for I/O {}, decoding {}, \
             reading (prefetch thread) {}",
            m.stats.mean_threads(),
            used.join(", "),
            fmt::seconds(m.stats.io_wait),
            fmt::seconds(m.stats.decode),
            fmt::seconds(m.stats.read),
        ))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Reads batches, pass after pass, until `min` has passed at the end of a
/// pass (at least one pass; one only when a pass yields nothing).
fn measure(loader: &mut Loader, min: Duration) -> anyhow::Result<Measured> {
    let mut m = Measured {
        passes: 0,
        bytes: 0,
        records: 0,
        batches: 0,
        elapsed: Duration::ZERO,
        cpu: None,
        batch_times: Vec::new(),
        stats: loader.stats(),
    };
    let cpu_start = cpu_time();
    let start = Instant::now();
    let mut pass_records = 0u64;
    let mut end;
    loop {
        let t = Instant::now();
        end = t;
        m.bytes = loader.bytes_read();
        let Some(batch) = loader.next_batch() else {
            m.passes += 1;
            m.bytes = loader.bytes_read();
            break;
        };
        let batch = batch?;
        if loader.epoch() > m.passes {
            // The batch opens a new pass: the previous one ended at `t`
            // (the CPU time counts this one batch more).
            m.passes += 1;
            if t - start >= min || pass_records == 0 {
                break;
            }
            pass_records = 0;
        }
        m.batch_times.push(t.elapsed());
        pass_records += batch.rows() as u64;
        m.records += batch.rows() as u64;
        m.batches += 1;
        // The batch is consumed here; its memory serves the next one, as a
        // training loop that hands batches back would.
        loader.recycle(black_box(batch));
    }
    m.elapsed = end - start;
    m.cpu = cpu_start.and_then(|s| cpu_time().map(|e| e.saturating_sub(s)));
    m.stats = loader.stats();
    Ok(m)
}

/// Builds a loader of one pass, reads it to its end, and again, until
/// `min` has passed (at least one pass); the time and CPU include the
/// builds. Returns the last loader.
fn measure_per_pass(
    args: &Args,
    maps: &Arc<Maps>,
    min: Duration,
) -> anyhow::Result<(Loader, Measured)> {
    let cpu_start = cpu_time();
    let start = Instant::now();
    let mut total: Option<Measured> = None;
    loop {
        let mut loader = loader(args, Epochs::Count(1), maps)?;
        let pass = measure(&mut loader, Duration::ZERO)?;
        let empty = pass.records == 0;
        match &mut total {
            Some(m) => m.add(pass),
            None => total = Some(pass),
        }
        if let Some(mut m) = total.take_if(|_| empty || start.elapsed() >= min) {
            m.elapsed = start.elapsed();
            m.cpu = cpu_start.and_then(|s| cpu_time().map(|e| e.saturating_sub(s)));
            return Ok((loader, m));
        }
    }
}

impl Measured {
    /// Adds the counts and times of `pass` (not its elapsed time or CPU,
    /// which the caller measures across passes).
    fn add(&mut self, pass: Measured) {
        self.passes += pass.passes;
        self.bytes += pass.bytes;
        self.records += pass.records;
        self.batches += pass.batches;
        self.batch_times.extend(pass.batch_times);
        let (s, p) = (&mut self.stats, pass.stats);
        s.io_wait += p.io_wait;
        s.decode += p.decode;
        s.read += p.read;
        if s.threads_used.len() < p.threads_used.len() {
            s.threads_used.resize(p.threads_used.len(), 0);
        }
        for (a, b) in s.threads_used.iter_mut().zip(p.threads_used) {
            *a += b;
        }
    }
}

/// The CPU time (user + system) of this process so far, from
/// `/proc/self/stat` (Linux; `None` elsewhere).
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) in
    // parentheses; utime and stime are fields 14 and 15 (1-based), in
    // clock ticks of 1/100 s (USER_HZ on Linux).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// The median of `times` (zero when empty).
fn median(mut times: Vec<Duration>) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let mid = times.len() / 2;
    let (_, m, _) = times.select_nth_unstable(mid);
    *m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_parse() {
        assert_eq!(parse_threads("autotune"), Ok(Threads::Autotune));
        assert_eq!(parse_threads("2"), Ok(Threads::Fixed(2)));
        assert!(parse_threads("0").is_err());
        assert!(parse_threads("two").is_err());
    }

    #[test]
    fn cpu_time_is_read() {
        if cfg!(target_os = "linux") {
            assert!(cpu_time().is_some());
        }
    }
}
