//! Two one-thread loaders in one process, against one loader alone and
//! one loader with two parse threads: whether what a pair of `grist
//! bench` processes gains over two parse threads (`benches/loader/
//! pairs.sh`) needs separate processes.
//!
//! `cargo run --release -p grist-benches --example loaders_in_process --
//! SPEC FILE [seconds] [rounds] [mmap]` (defaults: 3 seconds, 3 rounds,
//! read calls). Each round runs, one after the other:
//! - `alone`: one loader, one parse thread;
//! - `two`: two loaders on two threads of this process, one parse
//!   thread each, started together;
//! - `split`: one loader with two parse threads.
//!
//! Each loader runs whole passes over FILE (batch 1024) until its time is
//! up. Printed per round: records/s (for `two`, the records of both over
//! the longer one's time) and records per CPU-second of the process.

use std::time::{Duration, Instant};

use grist_loader::{Access, Epochs, Loader, Threads};

/// CPU seconds of this process so far (user + system, from
/// `/proc/self/stat`, in clock ticks of 1/100 s).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')').expect("a command name") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields[i].parse::<f64>().expect("a tick count");
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    (ticks(11) + ticks(12)) / 100.0
}

fn loader(spec: &str, file: &str, threads: usize, mmap: bool) -> Loader {
    let access = if mmap {
        // SAFETY: the benchmark's files are not modified while it runs.
        unsafe { Access::mmap() }
    } else {
        Access::read()
    };
    grist::loader()
        .with_path(file)
        .with_spec_path(spec)
        .with_batch_size(1024)
        .with_epochs(Epochs::Endless)
        .with_threads(Threads::Fixed(threads))
        .with_access(access)
        .build()
        .expect("a loader of the file")
}

/// Runs `loader` until `secs` have passed; its records and seconds.
fn run(mut loader: Loader, secs: f64) -> (u64, f64) {
    let start = Instant::now();
    let mut records = 0u64;
    while start.elapsed() < Duration::from_secs_f64(secs) {
        let batch = loader
            .next_batch()
            .expect("an endless loader")
            .expect("a batch");
        records += batch.rows() as u64;
        loader.recycle(batch);
    }
    (records, start.elapsed().as_secs_f64())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [spec, file, rest @ ..] = &args[..] else {
        panic!("usage: loaders_in_process SPEC FILE [seconds] [rounds] [mmap]");
    };
    let secs: f64 = rest.first().and_then(|a| a.parse().ok()).unwrap_or(3.0);
    let rounds: usize = rest.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let mmap = rest.get(2).is_some_and(|a| a == "mmap");
    // From the page cache.
    std::fs::read(file).expect("the file");
    for round in 1..=rounds {
        let mut line = format!("round {round}:");
        for mode in ["alone", "two", "split"] {
            let cpu = cpu_seconds();
            let (records, seconds) = match mode {
                "alone" => run(loader(spec, file, 1, mmap), secs),
                "two" => {
                    let loaders = [loader(spec, file, 1, mmap), loader(spec, file, 1, mmap)];
                    let runs: Vec<(u64, f64)> = std::thread::scope(|s| {
                        let handles: Vec<_> = loaders
                            .into_iter()
                            .map(|l| s.spawn(move || run(l, secs)))
                            .collect();
                        handles
                            .into_iter()
                            .map(|h| h.join().expect("a loader thread"))
                            .collect()
                    });
                    (
                        runs.iter().map(|r| r.0).sum(),
                        runs.iter().map(|r| r.1).fold(0.0, f64::max),
                    )
                }
                _ => run(loader(spec, file, 2, mmap), secs),
            };
            let cpu = cpu_seconds() - cpu;
            line += &format!(
                "  {mode} {:.0}k/s ({:.0}k per CPU-s)",
                records as f64 / seconds / 1e3,
                records as f64 / cpu / 1e3
            );
        }
        println!("{line}");
    }
}
