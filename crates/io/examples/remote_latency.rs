//! Streams an object from the in-process S3 server with and without 20 ms
//! of latency per request, and prints the throughputs:
//!
//! ```text
//! cargo run --release -p grist-io --features remote --example remote_latency [MiB]
//! ```

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use grist_io::{Address, Object};
use grist_testkit::S3Server;

fn stream(object: &Object, read_ahead: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let t = Instant::now();
    let mut reader = object.reader(0, read_ahead)?;
    let mut buf = vec![0; 256 << 10];
    let mut n = 0u64;
    loop {
        match reader.read(&mut buf)? {
            0 => break,
            k => n += k as u64,
        }
    }
    Ok(n as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mib: usize = std::env::args().nth(1).map_or(Ok(64), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let server = S3Server::start(dir.path());
    server.bucket("bench");
    let storage = server.storage().with_block_size(1 << 20);
    let addr = Address::parse(&server.url("bench", "stream.bin"))?;
    let mut w = storage.create(&addr)?;
    let chunk: Vec<u8> = (0..1 << 20).map(|i| (i * 7) as u8).collect();
    for _ in 0..mib {
        w.write_all(&chunk)?;
    }
    w.commit()?;
    let object = storage.open(&addr)?;
    let read_ahead = 16 << 20;
    let _warm = stream(&object, read_ahead)?;
    let base = stream(&object, read_ahead)?;
    server.faults().set_latency(Duration::from_millis(20));
    let serial = stream(&object, 1 << 20)?;
    let hidden = stream(&object, read_ahead)?;
    println!("{mib} MiB object, 1 MiB blocks");
    println!("no latency, 16 blocks in flight:   {base:8.1} MiB/s");
    println!("20 ms latency, 1 block in flight:  {serial:8.1} MiB/s");
    println!(
        "20 ms latency, 16 blocks in flight: {hidden:8.1} MiB/s ({:.0}% of no latency)",
        100.0 * hidden / base
    );
    Ok(())
}
