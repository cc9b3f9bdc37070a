//! Loads files through the grist loader once and prints what it measured:
//! `load SPEC.json SHUFFLE_BUFFER THREADS(N|autotune) BATCH FILE...`.

use grist::Threads;
use grist_tensor::SpecFile;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        eprintln!("usage: load SPEC.json SHUFFLE_BUFFER THREADS BATCH FILE...");
        std::process::exit(2);
    }
    let spec = SpecFile::from_json(&std::fs::read_to_string(&args[0])?)?;
    let buffer: usize = args[1].parse()?;
    let threads = match args[2].as_str() {
        "autotune" => Threads::Autotune,
        n => Threads::Fixed(n.parse()?),
    };
    let mut loader = grist::loader()
        .with_spec_file(spec)
        .with_shuffle(buffer > 0)
        .with_shuffle_buffer(buffer)
        .with_threads(threads)
        .with_batch_size(args[3].parse()?)
        .with_paths(&args[4..])
        .build()?;
    while let Some(batch) = loader.next_batch() {
        loader.recycle(batch?);
    }
    let s = loader.stats();
    println!(
        "{} records in {:.3} s: {:.0} records/s; mean threads {:.2}; io wait {:.3} s, decode {:.3} s, read {:.3} s",
        s.records,
        s.elapsed.as_secs_f64(),
        s.records_per_s(),
        s.mean_threads(),
        s.io_wait.as_secs_f64(),
        s.decode.as_secs_f64(),
        s.read.as_secs_f64()
    );
    if std::env::var_os("GRIST_LOAD_MODEL").is_some() {
        println!("threads used {:?}; model {:?}", s.threads_used, s.model);
    }
    Ok(())
}
