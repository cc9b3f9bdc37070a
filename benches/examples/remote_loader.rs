//! The loader from local files and from an S3-compatible server on the
//! loopback interface, with and without latency added to every request,
//! side by side: `cargo run --release -p grist-benches --example
//! remote_loader -- [records] [latency_ms] [rounds]` (defaults 50000, 20,
//! 3).
//!
//! prod19 is written in every format (`grist_benches::prod19_files`) and
//! uploaded to the in-process server of `grist-testkit` (multipart
//! uploads through the storage layer), which waits `latency_ms` before
//! serving each request. Each round reads every format one epoch locally,
//! over S3 without latency, then over S3 with it (batches of 1024, two
//! parse threads, in order and shuffled), alternating; each line is the
//! median over the rounds of records/s, the ratios of S3 with latency to
//! local and to S3 without it (what latency costs once the server's own
//! cost is out of the picture: the server shares the process's cores),
//! and the ranged requests per batch over S3.

use std::time::Instant;

use grist::{Address, Epochs, Storage, Threads};
use grist_benches::{DataFile, prod19_files};
use grist_testkit::S3Server;

/// One epoch of `source` read through `storage`: records per second.
fn epoch(storage: &Storage, source: &str, d: &DataFile, shuffle: bool) -> f64 {
    let start = Instant::now();
    let mut loader = grist::loader()
        .with_storage(storage.clone())
        .with_path(source)
        .with_spec_file(d.spec.clone())
        .with_batch_size(1024)
        .with_threads(Threads::Fixed(2))
        .with_shuffle(shuffle)
        .with_seed(7)
        .with_epochs(Epochs::Count(1))
        .build()
        .expect("a loader");
    let mut records = 0;
    while let Some(b) = loader.next_batch() {
        let b = b.expect("a batch");
        records += b.rows();
        loader.recycle(b);
    }
    records as f64 / start.elapsed().as_secs_f64()
}

/// Uploads `path` (a file, or a folder's files) to bucket `data` of
/// `server` through the storage layer; the URL to read it from.
fn upload(server: &S3Server, storage: &Storage, path: &std::path::Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let files: Vec<std::path::PathBuf> = if path.is_dir() {
        let mut v: Vec<_> = std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    } else {
        vec![path.to_path_buf()]
    };
    for f in &files {
        let rel = f.strip_prefix(path.parent().unwrap()).unwrap();
        let url = server.url("data", &rel.to_string_lossy());
        let mut w = storage.create(&Address::parse(&url).unwrap()).unwrap();
        std::io::copy(&mut std::fs::File::open(f).unwrap(), &mut w).unwrap();
        w.commit().unwrap();
    }
    if path.is_dir() {
        format!("{}/", server.url("data", &name))
    } else {
        server.url("data", &name)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let records: usize = args.first().map_or(50_000, |a| a.parse().unwrap());
    let latency_ms: u64 = args.get(1).map_or(20, |a| a.parse().unwrap());
    let rounds: usize = args.get(2).map_or(3, |a| a.parse().unwrap());
    let local_dir = tempfile::tempdir().unwrap();
    let data = prod19_files(local_dir.path(), records);
    let server_dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(server_dir.path());
    server.bucket("data");
    let remote = server.storage();
    let urls: Vec<String> = data
        .iter()
        .map(|d| upload(&server, &remote, &d.path))
        .collect();
    let local = Storage::new();
    println!(
        "prod19, {records} records, batches of 1024, 2 parse threads, {latency_ms} ms per request"
    );
    println!(
        "{:<14} {:<8} {:>12} {:>12} {:>12} {:>9} {:>8} {:>10}",
        "format", "order", "local rec/s", "s3 0ms", "s3 latency", "÷ local", "÷ 0ms", "GETs/batch"
    );
    let latency = std::time::Duration::from_millis(latency_ms);
    for (d, url) in data.iter().zip(&urls) {
        for shuffle in [false, true] {
            let (mut l, mut z, mut r) = (Vec::new(), Vec::new(), Vec::new());
            let mut gets = 0;
            for _ in 0..rounds {
                l.push(epoch(&local, &d.path.to_string_lossy(), d, shuffle));
                server.faults().set_latency(std::time::Duration::ZERO);
                z.push(epoch(&remote, url, d, shuffle));
                server.faults().set_latency(latency);
                server.faults().reset_counts();
                r.push(epoch(&remote, url, d, shuffle));
                gets = server.faults().ranged_gets();
            }
            let (l, z, r) = (median(l), median(z), median(r));
            let batches = records.div_ceil(1024);
            println!(
                "{:<14} {:<8} {:>12.0} {:>12.0} {:>12.0} {:>9.2} {:>8.2} {:>10.1}",
                d.name,
                if shuffle { "shuffle" } else { "order" },
                l,
                z,
                r,
                r / l,
                r / z,
                gets as f64 / batches as f64
            );
        }
    }
}
