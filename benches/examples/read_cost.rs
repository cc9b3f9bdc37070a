//! What a read by record number costs with read calls, against reading the
//! same bytes in one go: the price an exact shuffle pays without `--mmap`.
//!
//! `cargo run --release -p grist-benches --example read_cost -- FILE
//! [record_bytes] [batches]` (defaults: 2200, prod19's mean record, and
//! 200 batches of 1024). The file is read once first, so that every
//! figure is from the page cache.
//!
//! Prints microseconds per record for:
//! - one `pread` per record at random record-aligned offsets, sorted within
//!   each batch (what the loader's exact shuffle does with read calls);
//! - one `pread` of 1 byte per record at the same kind of offsets (the
//!   kernel's per-read path without the copy);
//! - one `pread` per batch of the batch's bytes, contiguous (what an
//!   unshuffled batch costs).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const BATCH: usize = 1024;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: read_cost FILE [record_bytes] [batches]");
    let record: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2200);
    let batches: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let mut file = File::open(&path)?;
    let len = file.metadata()?.len();
    let records = len / record;
    assert!(
        records > BATCH as u64,
        "{path}: {len} bytes hold fewer than {BATCH} records of {record} bytes"
    );
    // Into the page cache.
    std::io::copy(&mut (&mut file).take(len), &mut std::io::sink())?;

    // Seeded: the offsets are the same run to run.
    let mut rng = StdRng::seed_from_u64(42);
    let mut buf = vec![0u8; BATCH * record as usize];
    let mut offsets = vec![0u64; BATCH];
    // One pread per record of a random batch, of `take` bytes each.
    let mut scattered = |take: usize| {
        per_record(batches, || {
            for o in offsets.iter_mut() {
                *o = rng.random_range(0..records) * record;
            }
            offsets.sort_unstable();
            for (o, slot) in offsets.iter().zip(buf.chunks_exact_mut(record as usize)) {
                file.read_exact_at(&mut slot[..take], *o)?;
            }
            Ok(())
        })
    };
    let whole = scattered(record as usize)?;
    println!("one pread per record ({record} B, random):  {whole:.2} µs per record");
    let one_byte = scattered(1)?;
    println!("one pread of 1 B per record (random):      {one_byte:.2} µs per record");

    let contiguous = per_record(batches, || {
        let first = rng.random_range(0..records - BATCH as u64) * record;
        file.read_exact_at(&mut buf, first)
    })?;
    println!("one pread per batch (contiguous):          {contiguous:.2} µs per record");
    println!(
        "a read by number costs {:.2} µs more per record than a batch read whole",
        whole - contiguous
    );
    Ok(())
}

/// Microseconds per record of `batches` calls of `read_batch`, each
/// reading one batch of [`BATCH`] records.
fn per_record(
    batches: usize,
    mut read_batch: impl FnMut() -> std::io::Result<()>,
) -> std::io::Result<f64> {
    let t = Instant::now();
    for _ in 0..batches {
        read_batch()?;
    }
    Ok(t.elapsed().as_secs_f64() / (batches * BATCH) as f64 * 1e6)
}
